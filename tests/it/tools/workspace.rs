//! The workspace boundary under the `auto` policy: paths outside the
//! workspace (also through symlinks) and git internals ask, and so do
//! commands that write even with a read-only program and commands that
//! read outside the workspace.

use super::{always_answer, call, calls, permissions, say, script, Space, WAIT};
use crate::support::{run_prompt, Answer};
use serde_json::json;
use std::fs;

#[test]
#[cfg_attr(windows, ignore = "auto asks for every command under cmd")]
fn paths_outside_the_workspace_and_git_internals_ask_in_auto() {
    let space = Space::new("tools-boundary");
    fs::write(space.base.join("outside.txt"), "outside text\n").unwrap();
    fs::create_dir_all(space.base.join("outdir")).unwrap();
    fs::write(space.base.join("outdir/secret.txt"), "secret text\n").unwrap();
    spindle::os::testing::symlink(space.base.join("outdir"), space.path("link")).unwrap();
    spindle::os::testing::symlink(space.base.join("outside.txt"), space.path("alias.txt")).unwrap();
    space.write(".git/config", "[core]\n");
    space.write("inside.txt", "inside\n");
    let absolute = space.base.join("outside.txt").to_str().unwrap().to_string();
    let outdir = space.base.join("outdir").to_str().unwrap().to_string();
    let (mut agent, session) = space.start(
        &script(vec![
            calls(vec![
                call("b1", "read_file", json!({"path": "../outside.txt"})),
                call("b2", "read_file", json!({"path": "link/secret.txt"})),
                call("b3", "read_file", json!({"path": absolute})),
                call("b4", "write_file", json!({"path": ".git/config", "content": "[evil]\n"})),
                call("b5", "write_file", json!({"path": "link/planted.txt", "content": "x\n"})),
                call("b6", "edit_file", json!({"path": "sub/../../outside.txt", "edits": [{"old": "outside", "new": "changed"}]})),
                call("b7", "edit_file", json!({"path": "alias.txt", "edits": [{"old": "outside", "new": "changed"}]})),
                call("b8", "list_directory", json!({"path": ".."})),
                call("b9", "search", json!({"pattern": "secret", "path": "link"})),
                call("b10", "glob", json!({"pattern": "*.txt", "path": outdir})),
                call("b11", "run_command", json!({"command": "ls", "cwd": ".."})),
                // Controls: inside the workspace nothing asks in auto.
                call("i1", "read_file", json!({"path": "inside.txt"})),
                call("i2", "write_file", json!({"path": "inside.txt", "content": "edited\n"})),
                call("i3", "run_command", json!({"command": "cat inside.txt"})),
            ]),
            say("Done."),
        ]),
        &["--permissions", "auto", "--on-reject", "continue"],
        json!({}),
    );
    let turn = run_prompt(
        &mut agent,
        &session,
        "go",
        WAIT,
        permissions(vec![
            ("b1", Answer::select("allow_once")),
            ("b2", Answer::select("allow_once")),
            ("b3", Answer::select("allow_once")),
            ("b4", Answer::select("reject_once")),
            ("b5", Answer::select("reject_once")),
            ("b6", Answer::select("reject_once")),
            ("b7", Answer::select("reject_once")),
            ("b8", Answer::select("allow_once")),
            ("b9", Answer::select("allow_once")),
            ("b10", Answer::select("allow_once")),
            ("b11", Answer::select("reject_once")),
        ]),
    );
    assert_eq!(turn.stop_reason(), "end_turn", "{}", turn.dump());
    turn.assert_every_tool_call_finished();
    assert_eq!(
        turn.permission_ids(),
        ["b1", "b2", "b3", "b4", "b5", "b6", "b7", "b8", "b9", "b10", "b11"]
    );
    // `..` is resolved in what the editor is shown; a symlink stays as named.
    let outside = space.base.join("outside.txt").to_str().unwrap().to_string();
    assert_eq!(
        turn.tool_call("b1")["locations"],
        json!([{"path": outside}])
    );
    assert_eq!(
        turn.tool_call("b2")["locations"],
        json!([{"path": space.abs("link/secret.txt")}])
    );
    assert!(turn.final_text("b1").contains("1\toutside text"));
    assert!(turn.final_text("b2").contains("1\tsecret text"));
    assert!(turn.final_text("b3").contains("1\toutside text"));
    assert!(
        turn.final_text("b8").contains("outside.txt"),
        "{}",
        turn.dump()
    );
    assert!(
        turn.final_text("b9").contains("secret text"),
        "{}",
        turn.dump()
    );
    assert!(
        turn.final_text("b10").contains("secret.txt"),
        "{}",
        turn.dump()
    );
    for id in ["b4", "b5", "b6", "b7", "b11"] {
        assert_eq!(turn.final_status(id), "failed", "{id}");
    }
    for id in ["i1", "i2", "i3"] {
        assert_eq!(turn.final_status(id), "completed", "{id}");
    }
    assert_eq!(space.read(".git/config"), "[core]\n");
    assert!(!space.base.join("outdir/planted.txt").exists());
    assert_eq!(
        fs::read_to_string(space.base.join("outside.txt")).unwrap(),
        "outside text\n"
    );
    assert_eq!(space.read("inside.txt"), "edited\n");
}

#[test]
fn auto_policy_asks_for_commands_that_write_even_with_a_read_only_program() {
    // Each of these starts with a program the auto policy trusts as
    // read-only, but writes or deletes files.
    let space = Space::new("tools-auto-writers");
    space.write("in.txt", "a\na\n");
    space.write("other.txt", "b\n");
    space.write("victim.txt", "hello\n");
    let commands = [
        ("w1", "uniq in.txt out.txt"),
        ("w2", "find . -name in.txt -fprint0 found.txt"),
        (
            "w3",
            "git diff --no-index --output=diff.txt in.txt other.txt",
        ),
        ("w4", "rg --pre rm hello victim.txt"),
    ];
    let (mut agent, session) = space.start(
        &script(vec![
            calls(
                commands
                    .iter()
                    .map(|(id, command)| call(id, "run_command", json!({"command": command})))
                    .collect(),
            ),
            say("Done."),
        ]),
        &["--permissions", "auto", "--on-reject", "continue"],
        json!({}),
    );
    let turn = run_prompt(
        &mut agent,
        &session,
        "go",
        WAIT,
        always_answer("reject_once"),
    );
    assert_eq!(turn.stop_reason(), "end_turn", "{}", turn.dump());
    turn.assert_every_tool_call_finished();
    let asked = turn.permission_ids();
    let unasked: Vec<&str> = commands
        .iter()
        .filter(|(id, _)| !asked.iter().any(|a| a == id))
        .map(|(_, command)| *command)
        .collect();
    assert!(
        unasked.is_empty(),
        "these commands ran in auto without asking, yet they write or delete files: {unasked:?}"
    );
    assert!(!space.exists("out.txt"));
    assert!(!space.exists("found.txt"));
    assert!(!space.exists("diff.txt"));
    assert!(space.exists("victim.txt"));
}

#[test]
fn auto_policy_asks_before_a_command_reads_outside_the_workspace() {
    let space = Space::new("tools-auto-outside-cmd");
    fs::write(space.base.join("outside.txt"), "outside text\n").unwrap();
    fs::create_dir_all(space.base.join("outdir")).unwrap();
    fs::write(space.base.join("outdir/secret.txt"), "secret text\n").unwrap();
    spindle::os::testing::symlink(space.base.join("outdir"), space.path("link")).unwrap();
    let absolute = space.base.join("outside.txt").to_str().unwrap().to_string();
    let commands = [
        ("o1", "cat ../outside.txt".to_string()),
        ("o2", format!("cat {absolute}")),
        ("o3", "cat link/secret.txt".to_string()),
    ];
    let (mut agent, session) = space.start(
        &script(vec![
            calls(
                commands
                    .iter()
                    .map(|(id, command)| call(id, "run_command", json!({"command": command})))
                    .collect(),
            ),
            say("Done."),
        ]),
        &["--permissions", "auto", "--on-reject", "continue"],
        json!({}),
    );
    let turn = run_prompt(
        &mut agent,
        &session,
        "go",
        WAIT,
        always_answer("reject_once"),
    );
    assert_eq!(turn.stop_reason(), "end_turn", "{}", turn.dump());
    turn.assert_every_tool_call_finished();
    let asked = turn.permission_ids();
    let unasked: Vec<&str> = commands
        .iter()
        .filter(|(id, _)| !asked.iter().any(|a| a == id))
        .map(|(_, command)| command.as_str())
        .collect();
    assert!(
        unasked.is_empty(),
        "these commands read outside the workspace without asking (read_file of the same \
         paths asks): {unasked:?}"
    );
    for (id, _) in &commands {
        let text = turn.final_text(id);
        assert!(
            !text.contains("outside text") && !text.contains("secret text"),
            "{id}: {text}"
        );
    }
}

#[test]
#[cfg_attr(windows, ignore = "expects a case-sensitive file system")]
fn git_internals_ask_in_any_case_and_with_trailing_dots() {
    // On macOS's and Windows' default file systems `.GIT/hooks` is the
    // repository's hooks folder, and Windows drops trailing dots: each
    // spelling asks, as `.git` does.
    let space = Space::new("tools-git-case");
    space.write(".git/config", "[core]\n");
    let (mut agent, session) = space.start(
        &script(vec![
            calls(vec![
                call(
                    "c1",
                    "write_file",
                    json!({"path": ".GIT/hooks/pre-commit", "content": "#!/bin/sh\n"}),
                ),
                call(
                    "c2",
                    "write_file",
                    json!({"path": ".git./hooks/post-checkout", "content": "#!/bin/sh\n"}),
                ),
                call(
                    "c3",
                    "write_file",
                    json!({"path": ".Spindle/config.json", "content": "{}\n"}),
                ),
                // A control: a look-alike name is an ordinary file.
                call(
                    "i1",
                    "write_file",
                    json!({"path": ".gitx", "content": "x\n"}),
                ),
            ]),
            say("Done."),
        ]),
        &["--permissions", "auto", "--on-reject", "continue"],
        json!({}),
    );
    let turn = run_prompt(
        &mut agent,
        &session,
        "go",
        WAIT,
        always_answer("reject_once"),
    );
    assert_eq!(turn.stop_reason(), "end_turn", "{}", turn.dump());
    turn.assert_every_tool_call_finished();
    assert_eq!(turn.permission_ids(), ["c1", "c2", "c3"], "{}", turn.dump());
    for path in [".GIT", ".git./hooks", ".Spindle"] {
        assert!(!space.exists(path), "{path} exists");
    }
    assert!(space.exists(".gitx"));
}

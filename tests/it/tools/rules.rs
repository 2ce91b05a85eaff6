//! Lasting permission rules through the real binary: a command prefix
//! allowed for the session (and not for a line that chains something
//! after it), globs allowing edits, a project's own rules that only
//! tighten unless trusted, deny beating yolo, and an answer made
//! permanent for the project, written to the user's config file.

use super::{call, calls, permissions, say, script, Space, WAIT};
use crate::support::client::no_requests;
use crate::support::{run_prompt, Answer};
use serde_json::{json, Value};

fn config(space: &Space, value: Value) -> String {
    let path = space.base.join("config.json");
    std::fs::write(&path, value.to_string()).unwrap();
    path.to_str().unwrap().to_string()
}

fn run(id: &str, command: &str) -> Value {
    call(id, "run_command", json!({ "command": command }))
}

#[test]
fn a_prefix_allowed_for_the_session_covers_that_command_only() {
    let space = Space::new("rules-prefix");
    let (mut agent, session) = space.start(
        &script(vec![
            calls(vec![run("c1", "echo hi one")]),
            say("One."),
            calls(vec![
                run("c2", "echo hi two"),
                run("c3", "echo hi three; touch pwned"),
            ]),
            say("Two."),
        ]),
        &["--permissions", "ask", "--on-reject", "continue"],
        json!({}),
    );
    let answer = |request: &Value| {
        let names: Vec<String> = request["params"]["options"]
            .as_array()
            .unwrap()
            .iter()
            .map(|o| o["name"].as_str().unwrap().to_string())
            .collect();
        assert!(
            names
                .iter()
                .any(|n| n.contains("`echo hi …` in this session")),
            "{names:?}"
        );
        // The one "always" answer a client sees by default is that
        // command's start, for the session.
        Answer::select("allow_always")
    };
    let turn = run_prompt(&mut agent, &session, "one", WAIT, answer);
    assert_eq!(turn.final_status("c1"), "completed", "{}", turn.dump());
    // Same start: no question. Something chained after it: asked.
    let turn = run_prompt(
        &mut agent,
        &session,
        "two",
        WAIT,
        permissions(vec![("c3", Answer::select("reject_once"))]),
    );
    assert_eq!(turn.permission_ids(), ["c3"], "{}", turn.dump());
    assert_eq!(turn.final_status("c2"), "completed");
    assert!(!space.exists("pwned"));
}

#[test]
fn globs_allow_edits_and_deny_beats_yolo() {
    let space = Space::new("rules-glob");
    space.write("src/a.txt", "a\n");
    space.write("other.txt", "o\n");
    space.write("keep.txt", "k\n");
    let path = config(
        &space,
        json!({"permissions": {"rules": [
            {"tool": "edit", "path": "src/**", "decision": "allow"},
            {"tool": "run_command", "command": "rm", "decision": "deny"},
        ]}}),
    );
    let (mut agent, session) = space.start(
        &script(vec![
            calls(vec![
                call(
                    "e1",
                    "write_file",
                    json!({"path": "src/a.txt", "content": "A\n"}),
                ),
                call(
                    "e2",
                    "write_file",
                    json!({"path": "other.txt", "content": "O\n"}),
                ),
            ]),
            say("Edited."),
        ]),
        &[
            "--permissions",
            "ask",
            "--config",
            &path,
            "--on-reject",
            "continue",
        ],
        json!({}),
    );
    let turn = run_prompt(
        &mut agent,
        &session,
        "edit",
        WAIT,
        permissions(vec![("e2", Answer::select("allow_once"))]),
    );
    assert_eq!(
        turn.permission_ids(),
        ["e2"],
        "only the edit outside src/ asked"
    );
    assert_eq!(space.read("src/a.txt"), "A\n");

    // yolo asks nothing, but a deny rule still refuses, even hidden in a
    // compound line.
    let (mut agent, session) = space.start(
        &script(vec![
            calls(vec![run("r1", "echo ok && rm keep.txt")]),
            say("Tried."),
        ]),
        &["--permissions", "yolo", "--config", &path],
        json!({}),
    );
    let turn = run_prompt(&mut agent, &session, "remove", WAIT, no_requests);
    assert_eq!(turn.final_status("r1"), "failed", "{}", turn.dump());
    assert!(
        turn.final_text("r1").contains("permission rule"),
        "{}",
        turn.dump()
    );
    assert!(space.exists("keep.txt"));
    assert_eq!(
        turn.text(),
        "Tried.",
        "a rule's refusal does not stop the turn"
    );
}

#[test]
#[cfg_attr(windows, ignore = "sh command lines")]
fn project_rules_only_tighten_unless_trusted() {
    let space = Space::new("rules-project");
    space.write(
        ".spindle/config.json",
        r#"{"permissions": {"rules": [
            {"tool": "run_command", "command": "echo secret", "decision": "deny"},
            {"tool": "run_command", "command": "touch", "decision": "allow"}
        ]}}"#,
    );
    let path = config(
        &space,
        json!({"permissions": {"rules": [
            {"tool": "run_command", "command": "echo", "decision": "allow"},
        ]}}),
    );
    let replies = || {
        script(vec![
            calls(vec![
                run("a", "echo fine"),
                run("b", "echo secret"),
                run("c", "touch made"),
            ]),
            say("Done."),
        ])
    };
    let (mut agent, session) = space.start(
        &replies(),
        &[
            "--permissions",
            "ask",
            "--config",
            &path,
            "--on-reject",
            "continue",
        ],
        json!({}),
    );
    let turn = run_prompt(
        &mut agent,
        &session,
        "go",
        WAIT,
        permissions(vec![("c", Answer::select("reject_once"))]),
    );
    assert_eq!(turn.final_status("a"), "completed", "the user's allow");
    assert_eq!(turn.final_status("b"), "failed", "the project's deny");
    assert_eq!(
        turn.permission_ids(),
        ["c"],
        "the project's allow is ignored"
    );
    assert!(!space.exists("made"));

    // Trusted by the user: the project's allow counts.
    let ws = space.ws.to_str().unwrap().to_string();
    let path = config(
        &space,
        json!({"permissions": {
            "rules": [{"tool": "run_command", "command": "echo", "decision": "allow"}],
            "projects": {ws: {"trusted": true}},
        }}),
    );
    let (mut agent, session) = space.start(
        &replies(),
        &["--permissions", "ask", "--config", &path],
        json!({}),
    );
    let turn = run_prompt(&mut agent, &session, "go", WAIT, no_requests);
    assert_eq!(turn.final_status("c"), "completed", "{}", turn.dump());
    assert_eq!(turn.final_status("b"), "failed");
}

#[test]
fn an_answer_for_the_project_is_saved_in_the_users_config() {
    let space = Space::new("rules-permanent");
    let path = config(&space, json!({"defaults": {"effort": "auto"}}));
    let replies = || script(vec![calls(vec![run("p1", "echo saved once")]), say("Ran.")]);
    let (mut agent, session) = space.start(
        &replies(),
        &["--permissions", "ask", "--config", &path],
        json!({"_meta": {"spindle": {"permissionScopes": true}}}),
    );
    let turn = run_prompt(
        &mut agent,
        &session,
        "go",
        WAIT,
        permissions(vec![("p1", Answer::select("allow_project"))]),
    );
    assert_eq!(turn.final_status("p1"), "completed", "{}", turn.dump());
    let written: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let ws = space.ws.to_str().unwrap();
    assert_eq!(
        written["permissions"]["projects"][ws]["rules"],
        json!([{"tool": "run_command", "command": "echo saved", "decision": "allow"}])
    );
    assert_eq!(written["defaults"]["effort"], "auto", "the rest is kept");
    assert!(
        !space.exists(".spindle/config.json"),
        "nothing written in the workspace"
    );
    // A new process on that config: no question.
    let (mut agent, session) = space.start(
        &replies(),
        &["--permissions", "ask", "--config", &path],
        json!({}),
    );
    let turn = run_prompt(&mut agent, &session, "go", WAIT, no_requests);
    assert_eq!(turn.final_status("p1"), "completed", "{}", turn.dump());
}

/// The broad answers a default client's dialog leaves out are a command
/// away: `/allow edits` and `/allow command WORDS` for the session, with
/// `--project` saving the rule; anything else gets the usage.
#[test]
fn allow_gives_the_broad_answers_in_words() {
    let space = Space::new("rules-allow-command");
    let path = config(&space, json!({}));
    let (mut agent, session) = space.start(
        &script(vec![
            calls(vec![
                call(
                    "e1",
                    "write_file",
                    json!({"path": "a.txt", "content": "a\n"}),
                ),
                call(
                    "e2",
                    "write_file",
                    json!({"path": "b/c.txt", "content": "c\n"}),
                ),
                run("c1", "echo hi there"),
                run("c2", "touch nope"),
            ]),
            say("Done."),
        ]),
        &[
            "--permissions",
            "ask",
            "--on-reject",
            "continue",
            "--config",
            &path,
        ],
        json!({}),
    );
    let turn = run_prompt(&mut agent, &session, "/allow everything", WAIT, no_requests);
    assert!(turn.text().contains("`/allow edits`"), "{}", turn.dump());
    let turn = run_prompt(&mut agent, &session, "/allow edits", WAIT, no_requests);
    assert_eq!(
        turn.text(),
        "Allowed every edit for the rest of this session."
    );
    let turn = run_prompt(
        &mut agent,
        &session,
        "/allow command echo hi",
        WAIT,
        no_requests,
    );
    assert!(turn.text().contains("`echo hi …`"), "{}", turn.dump());
    let turn = run_prompt(
        &mut agent,
        &session,
        "go",
        WAIT,
        permissions(vec![("c2", Answer::select("reject_once"))]),
    );
    assert_eq!(turn.permission_ids(), ["c2"], "{}", turn.dump());
    assert_eq!(turn.final_status("c1"), "completed");
    assert!(space.exists("b/c.txt") && !space.exists("nope"));
    let turn = run_prompt(&mut agent, &session, "/allow", WAIT, no_requests);
    assert!(turn.text().contains("every edit"), "{}", turn.dump());
    assert_eq!(
        std::fs::read_to_string(&path).unwrap(),
        "{}",
        "nothing saved"
    );
    let turn = run_prompt(
        &mut agent,
        &session,
        "/allow edits --project",
        WAIT,
        no_requests,
    );
    assert!(turn.text().contains("saved in"), "{}", turn.dump());
    let written: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let ws = space.ws.to_str().unwrap();
    assert_eq!(
        written["permissions"]["projects"][ws]["rules"],
        json!([{"tool": "edit", "path": "**", "decision": "allow"}])
    );
}

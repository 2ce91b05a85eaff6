//! `apply_patch`, `delete_file` and `move_file` through the real binary:
//! one approval for a whole patch with a diff per file, a bad hunk that
//! leaves every file untouched, deletions and moves with their diffs, and
//! edits outside the workspace that ask even in auto.

use super::{call, calls, permissions, say, script, Space, WAIT};
use crate::support::client::no_requests;
use crate::support::{run_prompt, Answer};
use serde_json::json;

const PATCH: &str = "*** Begin Patch
*** Add File: docs/new.md
+# New
+text
*** Update File: src/lib.rs
@@ fn answer()
 fn answer() -> u32 {
-    41
+    42
 }
*** Delete File: old.txt
*** End Patch";

#[test]
fn a_patch_is_approved_once_with_a_diff_per_file_and_applied() {
    let space = Space::new("tools-patch");
    space.write("src/lib.rs", "// lib\nfn answer() -> u32 {\n    41\n}\n");
    space.write("old.txt", "obsolete\n");
    let (mut agent, session) = space.start(
        &script(vec![
            calls(vec![call("p1", "apply_patch", json!({"patch": PATCH}))]),
            say("Patched."),
        ]),
        &["--permissions", "ask"],
        json!({}),
    );
    let turn = run_prompt(
        &mut agent,
        &session,
        "patch",
        WAIT,
        permissions(vec![("p1", Answer::select("allow_once"))]),
    );
    assert_eq!(turn.stop_reason(), "end_turn", "{}", turn.dump());
    assert_eq!(turn.text(), "Patched.");
    let asked = turn.requests("session/request_permission");
    assert_eq!(asked.len(), 1, "one question for the whole patch");
    let diffs = asked[0]["params"]["toolCall"]["content"]
        .as_array()
        .unwrap();
    assert_eq!(diffs.len(), 3, "{diffs:#?}");
    assert!(diffs.iter().all(|d| d["type"] == "diff"));
    assert!(
        diffs[0]["oldText"].is_null(),
        "an added file has no old text"
    );
    assert_eq!(
        diffs[1]["newText"],
        "// lib\nfn answer() -> u32 {\n    42\n}\n"
    );
    assert_eq!(diffs[2]["newText"], "");
    assert_eq!(turn.tool_call("p1")["kind"], "edit");
    assert_eq!(turn.final_status("p1"), "completed");
    assert_eq!(space.read("docs/new.md"), "# New\ntext\n");
    assert_eq!(
        space.read("src/lib.rs"),
        "// lib\nfn answer() -> u32 {\n    42\n}\n"
    );
    assert!(!space.exists("old.txt"));
}

#[test]
fn a_bad_hunk_leaves_every_file_untouched() {
    let space = Space::new("tools-patch-atomic");
    space.write("a.txt", "alpha\n");
    space.write("b.txt", "beta\n");
    let patch = "*** Begin Patch
*** Update File: a.txt
@@
-alpha
+ALPHA
*** Update File: b.txt
@@
-not in the file
+whatever
*** Add File: c.txt
+c
*** End Patch";
    let (mut agent, session) = space.start(
        &script(vec![
            calls(vec![call("p1", "apply_patch", json!({"patch": patch}))]),
            say("It failed."),
        ]),
        &["--permissions", "yolo"],
        json!({}),
    );
    let turn = run_prompt(&mut agent, &session, "patch", WAIT, no_requests);
    assert_eq!(turn.final_status("p1"), "failed", "{}", turn.dump());
    assert!(turn.final_text("p1").contains("b.txt"), "{}", turn.dump());
    assert_eq!(space.read("a.txt"), "alpha\n");
    assert_eq!(space.read("b.txt"), "beta\n");
    assert!(!space.exists("c.txt"));
}

#[test]
#[cfg_attr(windows, ignore = "expects / in shown paths")]
fn delete_and_move_show_their_diffs() {
    let space = Space::new("tools-delete-move");
    space.write("gone.txt", "bye\n");
    space.write("from.txt", "moving\n");
    let (mut agent, session) = space.start(
        &script(vec![
            calls(vec![
                call("d1", "delete_file", json!({"path": "gone.txt"})),
                call(
                    "m1",
                    "move_file",
                    json!({"from": "from.txt", "to": "sub/to.txt"}),
                ),
            ]),
            say("Done."),
        ]),
        &["--permissions", "auto"],
        json!({}),
    );
    // Inside the workspace, auto lets both run without asking.
    let turn = run_prompt(&mut agent, &session, "tidy", WAIT, no_requests);
    assert_eq!(turn.stop_reason(), "end_turn", "{}", turn.dump());
    assert_eq!(turn.tool_call("d1")["kind"], "delete");
    assert_eq!(turn.tool_call("m1")["kind"], "move");
    assert!(!space.exists("gone.txt"));
    assert_eq!(space.read("sub/to.txt"), "moving\n");
    assert!(!space.exists("from.txt"));
    let diff = turn.final_content("d1");
    assert_eq!(diff[0]["oldText"], "bye\n");
    assert_eq!(diff[0]["newText"], "");
    let diff = turn.final_content("m1");
    assert!(diff[0]["path"].as_str().unwrap().ends_with("sub/to.txt"));
}

#[test]
fn a_move_out_of_the_workspace_asks_even_in_auto() {
    let space = Space::new("tools-move-out");
    space.write("keep.txt", "mine\n");
    let outside = space.base.join("outside.txt");
    let (mut agent, session) = space.start(
        &script(vec![
            calls(vec![call(
                "m1",
                "move_file",
                json!({"from": "keep.txt", "to": outside.to_str().unwrap()}),
            )]),
            say("unused"),
        ]),
        &["--permissions", "auto"],
        json!({}),
    );
    let turn = run_prompt(
        &mut agent,
        &session,
        "move",
        WAIT,
        permissions(vec![("m1", Answer::select("reject_once"))]),
    );
    assert_eq!(turn.permission_ids(), ["m1"]);
    assert_eq!(space.read("keep.txt"), "mine\n");
    assert!(!outside.exists());
}

#[test]
fn a_failing_patch_outside_the_workspace_still_asks_first() {
    // Review finding: a patch whose hunks do not match used to fail
    // without asking, and its error quoted the file: a free read of any
    // file the policy would have asked about.
    let space = Space::new("tools-patch-probe");
    let secret = space.base.join("secret.txt");
    std::fs::write(&secret, "token=hunter2\n").unwrap();
    let patch = format!(
        "*** Begin Patch\n*** Update File: {}\n@@\n-no such line\n+x\n*** End Patch",
        secret.display()
    );
    let (mut agent, session) = space.start(
        &script(vec![
            calls(vec![call("p1", "apply_patch", json!({"patch": patch}))]),
            say("unused"),
        ]),
        &["--permissions", "auto"],
        json!({}),
    );
    let turn = run_prompt(
        &mut agent,
        &session,
        "patch",
        WAIT,
        permissions(vec![("p1", Answer::select("reject_once"))]),
    );
    assert_eq!(turn.permission_ids(), ["p1"], "{}", turn.dump());
    assert!(!turn.dump().contains("hunter2"), "{}", turn.dump());
    assert_eq!(std::fs::read_to_string(&secret).unwrap(), "token=hunter2\n");
}

#[test]
fn edits_to_the_workspace_agent_config_always_ask() {
    // `.spindle/` holds the project's rules and commands: an injected
    // instruction must not rewrite what the agent may do without a word.
    let space = Space::new("tools-spindle-dir");
    let (mut agent, session) = space.start(
        &script(vec![
            calls(vec![
                call(
                    "w1",
                    "write_file",
                    json!({"path": ".spindle/config.json", "content": "{}"}),
                ),
                call(
                    "w2",
                    "write_file",
                    json!({"path": "src/.spindle/notes.txt", "content": "fine"}),
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
        "configure",
        WAIT,
        permissions(vec![("w1", Answer::select("reject_once"))]),
    );
    assert_eq!(turn.permission_ids(), ["w1"], "{}", turn.dump());
    assert!(!space.exists(".spindle/config.json"));
    assert_eq!(space.read("src/.spindle/notes.txt"), "fine");
}

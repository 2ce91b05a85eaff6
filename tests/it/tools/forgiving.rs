//! edit_file and apply_patch forgiving a model's slips through the real
//! binary: a re-indented edit written with the file's own indentation and
//! the slip named to the model, the approval diff equal to what is
//! written, a near miss refused with the closest lines shown, and a patch
//! whose context differs in trailing whitespace applied.

use super::{call, calls, diff_of, initialize, permissions, say, script, Space, WAIT};
use crate::support::client::no_requests;
use crate::support::fake_openai::{chat_text, chat_tool_calls};
use crate::support::{run_prompt, Agent, Answer, FakeServer, Reply};
use serde_json::{json, Value};

const FILE: &str = "impl Shape {\n\tfn area(&self) -> f64 {\n\t\tself.w * self.h\n\t}\n}\n";
/// The method as a model copies it: indented with four spaces, at the
/// outermost level.
const OLD: &str = "fn area(&self) -> f64 {\n    self.w * self.h\n}\n";
const NEW: &str = "fn area(&self) -> f64 {\n    let a = self.w * self.h;\n    a\n}\n";
const WRITTEN: &str =
    "impl Shape {\n\tfn area(&self) -> f64 {\n\t\tlet a = self.w * self.h;\n\t\ta\n\t}\n}\n";

#[test]
fn a_reindented_edit_keeps_the_files_tabs_and_names_the_slip() {
    let space = Space::new("tools-forgive-indent");
    space.write("shape.rs", FILE);
    let server = FakeServer::start();
    server.push(Reply::Sse(chat_tool_calls(&[(
        "edit_file",
        json!({"path": "shape.rs", "edits": [{"old": OLD, "new": NEW}]}),
    )])));
    server.push(Reply::Sse(chat_text(&["Done."])));
    let base = server.base_url();
    let tmp = space.tmpdir();
    let mut agent = Agent::spawn(
        &["acp", "--model", "test-model", "--permissions", "yolo"],
        &[
            ("OPENAI_BASE_URL", base.as_str()),
            ("OPENAI_API_KEY", "sk-test"),
            ("TMPDIR", tmp.as_str()),
        ],
    );
    initialize(&mut agent, json!({}));
    let session = agent.new_session(&space.ws);
    let turn = run_prompt(&mut agent, &session, "edit", WAIT, no_requests);
    assert_eq!(turn.stop_reason(), "end_turn", "{}", turn.dump());
    assert_eq!(space.read("shape.rs"), WRITTEN);
    let requests = server.wait_requests(2, WAIT);
    let messages = requests[1].body["messages"].as_array().unwrap().clone();
    let result: Vec<&Value> = messages.iter().filter(|m| m["role"] == "tool").collect();
    let said = result[0]["content"].as_str().unwrap();
    assert!(
        said.contains("matched after ignoring tabs against spaces"),
        "{said}"
    );
}

#[test]
fn the_approval_diff_is_what_is_written() {
    let space = Space::new("tools-forgive-diff");
    // Trailing whitespace in the file, none in the model's old text.
    space.write("notes.txt", "alpha   \nbeta\t\ngamma\n");
    let (mut agent, session) = space.start(
        &script(vec![
            calls(vec![call(
                "e1",
                "edit_file",
                json!({"path": "notes.txt", "edits": [{"old": "alpha\nbeta\n", "new": "ALPHA\nBETA\n"}]}),
            )]),
            say("Edited."),
        ]),
        &["--permissions", "ask"],
        json!({}),
    );
    let turn = run_prompt(
        &mut agent,
        &session,
        "edit",
        WAIT,
        permissions(vec![("e1", Answer::select("allow_once"))]),
    );
    assert_eq!(turn.final_status("e1"), "completed", "{}", turn.dump());
    let written = space.read("notes.txt");
    assert_eq!(written, "ALPHA\nBETA\ngamma\n");
    let asked = turn.requests("session/request_permission");
    assert_eq!(asked.len(), 1);
    let shown = &asked[0]["params"]["toolCall"]["content"][0];
    assert_eq!(shown["newText"], written.as_str(), "{shown}");
    assert_eq!(shown["oldText"], "alpha   \nbeta\t\ngamma\n");
    assert_eq!(diff_of(&turn, "e1")["newText"], written.as_str());
}

#[test]
fn a_near_miss_is_refused_with_the_closest_lines() {
    let space = Space::new("tools-forgive-miss");
    let file: String = (1..=30)
        .map(|i| format!("    let v{i} = compute({i});\n"))
        .collect();
    space.write("calc.rs", &file);
    // The middle line differs in a word: no slip explains it.
    let old =
        "    let v14 = compute(14);\n    let v15 = compute(51);\n    let v16 = compute(16);\n";
    let (mut agent, session) = space.start(
        &script(vec![
            calls(vec![call(
                "e1",
                "edit_file",
                json!({"path": "calc.rs", "edits": [{"old": old, "new": "gone\n"}]}),
            )]),
            say("It failed."),
        ]),
        &["--permissions", "yolo"],
        json!({}),
    );
    let turn = run_prompt(&mut agent, &session, "edit", WAIT, no_requests);
    assert_eq!(turn.final_status("e1"), "failed", "{}", turn.dump());
    assert_eq!(space.read("calc.rs"), file, "nothing was written");
    let error = turn.final_text("e1");
    assert!(error.contains("was not found"), "{error}");
    assert!(
        error.contains(
            "    14\t    let v14 = compute(14);\n    15\t    let v15 = compute(15);\n    16\t"
        ),
        "{error}"
    );
    assert!(!error.contains("    13\t"), "{error}");
    assert!(
        error.contains("line 15: the old text has \"51\" where the file has \"15\""),
        "{error}"
    );
}

#[test]
fn a_patch_whose_context_differs_in_trailing_whitespace_applies() {
    let space = Space::new("tools-forgive-patch");
    space.write(
        "lib.py",
        "def f():   \n    return 1\n\ndef g():\n    return 2\n",
    );
    let patch = "*** Begin Patch
*** Update File: lib.py
@@
 def f():
-    return 1
+    return 10
*** End Patch";
    let (mut agent, session) = space.start(
        &script(vec![
            calls(vec![call("p1", "apply_patch", json!({"patch": patch}))]),
            say("Patched."),
        ]),
        &["--permissions", "yolo"],
        json!({}),
    );
    let turn = run_prompt(&mut agent, &session, "patch", WAIT, no_requests);
    assert_eq!(turn.final_status("p1"), "completed", "{}", turn.dump());
    // The context line keeps the file's own trailing spaces.
    assert_eq!(
        space.read("lib.py"),
        "def f():   \n    return 10\n\ndef g():\n    return 2\n"
    );
}

#[test]
fn a_failed_hunk_names_its_file_and_shows_the_closest_lines() {
    let space = Space::new("tools-forgive-hunk");
    space.write("a.txt", "one\ntwo\nthree\nfour\n");
    let patch = "*** Begin Patch
*** Update File: a.txt
@@
 two
-THREE
+3
*** End Patch";
    let (mut agent, session) = space.start(
        &script(vec![
            calls(vec![call("p1", "apply_patch", json!({"patch": patch}))]),
            say("Failed."),
        ]),
        &["--permissions", "yolo"],
        json!({}),
    );
    let turn = run_prompt(&mut agent, &session, "patch", WAIT, no_requests);
    assert_eq!(turn.final_status("p1"), "failed", "{}", turn.dump());
    let error = turn.final_text("p1");
    assert!(error.contains("a.txt: hunk 1 of 1"), "{error}");
    assert!(error.contains("     2\ttwo\n     3\tthree\n"), "{error}");
    assert_eq!(space.read("a.txt"), "one\ntwo\nthree\nfour\n");
}

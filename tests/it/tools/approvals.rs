//! The approval policies (`ask` by default, `auto`, `yolo`) and the
//! permission answers: allow or reject, once or always (remembered for the
//! exact command and cwd, or the file), a cancelled outcome, and a request
//! answered with an error.

use super::{
    always_answer, announced_at, call, calls, finished_at, permissions, position, say, script,
    Space, WAIT,
};
use crate::support::client::no_requests;
use crate::support::{run_prompt, Answer};
use serde_json::{json, Value};
use std::fs;

#[test]
#[cfg_attr(windows, ignore = "sh command lines")]
fn ask_policy_is_the_default_and_asks_for_edits_writes_and_commands() {
    let space = Space::new("tools-ask");
    space.write("a.txt", "hello\n");
    let (mut agent, session) = space.start(
        &script(vec![
            calls(vec![
                call("p1", "read_file", json!({"path": "a.txt"})),
                call(
                    "p2",
                    "edit_file",
                    json!({"path": "a.txt", "edits": [{"old": "hello", "new": "bye"}]}),
                ),
                call("p3", "run_command", json!({"command": "echo hi > ran.txt"})),
                call(
                    "p4",
                    "write_file",
                    json!({"path": "new.txt", "content": "new\n"}),
                ),
                call("p5", "glob", json!({"pattern": "*.txt"})),
                call("p6", "search", json!({"pattern": "hello"})),
                call("p7", "list_directory", json!({})),
                call(
                    "p8",
                    "todo_write",
                    json!({"todos": [{"content": "x", "status": "pending"}]}),
                ),
                call("p9", "run_command", json!({"command": "ls"})),
            ]),
            say("Done."),
        ]),
        &[],
        json!({}),
    );
    let turn = run_prompt(
        &mut agent,
        &session,
        "go",
        WAIT,
        always_answer("allow_once"),
    );
    assert_eq!(turn.stop_reason(), "end_turn", "{}", turn.dump());
    turn.assert_every_tool_call_finished();
    assert_eq!(turn.permission_ids(), ["p2", "p3", "p4", "p9"]);
    for id in ["p1", "p2", "p3", "p4", "p5", "p6", "p7", "p8", "p9"] {
        assert_eq!(turn.final_status(id), "completed", "{id}\n{}", turn.dump());
    }
    assert_eq!(space.read("a.txt"), "bye\n");
    assert_eq!(space.read("ran.txt"), "hi\n");
    assert_eq!(space.read("new.txt"), "new\n");

    // The request describes the call and comes after its announcement.
    let request = turn.requests("session/request_permission")[0];
    assert_eq!(request["params"]["sessionId"], session);
    let tool_call = &request["params"]["toolCall"];
    assert_eq!(tool_call["title"], "Edit a.txt");
    assert_eq!(tool_call["kind"], "edit");
    let asked_at = position(&turn, |m| m["method"] == "session/request_permission");
    assert!(announced_at(&turn, "p2") < asked_at);
    assert!(asked_at < finished_at(&turn, "p2"));
    assert_eq!(turn.statuses("p2"), ["pending", "in_progress", "completed"]);
}

#[test]
#[cfg_attr(windows, ignore = "auto asks for every command under cmd")]
fn auto_policy_runs_edits_and_read_only_commands_and_asks_for_others() {
    let space = Space::new("tools-auto");
    space.write("a.txt", "hello\n");
    let (mut agent, session) = space.start(
        &script(vec![
            calls(vec![
                call(
                    "e1",
                    "edit_file",
                    json!({"path": "a.txt", "edits": [{"old": "hello", "new": "bye"}]}),
                ),
                call(
                    "w1",
                    "write_file",
                    json!({"path": "dir/new.txt", "content": "new\n"}),
                ),
                call("c1", "run_command", json!({"command": "ls"})),
                call(
                    "c2",
                    "run_command",
                    json!({"command": "cat a.txt | head -1"}),
                ),
                call("c3", "run_command", json!({"command": "touch x"})),
                call("c4", "run_command", json!({"command": "echo hi > y"})),
            ]),
            say("Done."),
        ]),
        &["--permissions", "auto"],
        json!({}),
    );
    let turn = run_prompt(
        &mut agent,
        &session,
        "go",
        WAIT,
        always_answer("allow_once"),
    );
    assert_eq!(turn.stop_reason(), "end_turn", "{}", turn.dump());
    turn.assert_every_tool_call_finished();
    assert_eq!(turn.permission_ids(), ["c3", "c4"]);
    assert_eq!(space.read("a.txt"), "bye\n");
    assert_eq!(space.read("dir/new.txt"), "new\n");
    assert!(turn.final_text("c1").contains("a.txt"));
    assert!(turn.final_text("c2").contains("bye"));
    assert!(space.exists("x"));
    assert_eq!(space.read("y"), "hi\n");
}

#[test]
#[cfg_attr(windows, ignore = "sh command lines")]
fn yolo_policy_never_asks() {
    let space = Space::new("tools-yolo");
    space.write("a.txt", "hello\n");
    fs::write(space.base.join("outside.txt"), "outside\n").unwrap();
    let outside = space.base.join("outside.txt").to_str().unwrap().to_string();
    let (mut agent, session) = space.start(
        &script(vec![
            calls(vec![
                call(
                    "e1",
                    "edit_file",
                    json!({"path": "a.txt", "edits": [{"old": "hello", "new": "bye"}]}),
                ),
                call("c1", "run_command", json!({"command": "touch x"})),
                call("r1", "read_file", json!({"path": outside})),
                call(
                    "w1",
                    "write_file",
                    json!({"path": "../yolo.txt", "content": "yolo\n"}),
                ),
                call(
                    "g1",
                    "write_file",
                    json!({"path": ".git/config", "content": "[core]\n"}),
                ),
            ]),
            say("Done."),
        ]),
        &["--permissions", "yolo"],
        json!({}),
    );
    let turn = run_prompt(&mut agent, &session, "go", WAIT, no_requests);
    assert_eq!(turn.stop_reason(), "end_turn", "{}", turn.dump());
    turn.assert_every_tool_call_finished();
    assert!(turn.all_requests().is_empty());
    for id in ["e1", "c1", "r1", "w1", "g1"] {
        assert_eq!(turn.final_status(id), "completed", "{id}\n{}", turn.dump());
    }
    assert!(turn.final_text("r1").contains("1\toutside"));
    assert_eq!(
        fs::read_to_string(space.base.join("yolo.txt")).unwrap(),
        "yolo\n"
    );
    assert_eq!(space.read(".git/config"), "[core]\n");
}

#[test]
fn reject_once_fails_the_call_and_is_not_remembered() {
    let space = Space::new("tools-reject-once");
    space.write("a.txt", "hello\n");
    let edit = json!({"path": "a.txt", "edits": [{"old": "hello", "new": "bye"}]});
    let (mut agent, session) = space.start(
        &script(vec![
            calls(vec![call("e1", "edit_file", edit.clone())]),
            calls(vec![call("e2", "edit_file", edit.clone())]),
            say("Edited."),
        ]),
        &["--permissions", "ask"],
        json!({}),
    );
    let turn = run_prompt(
        &mut agent,
        &session,
        "first",
        WAIT,
        permissions(vec![("e1", Answer::select("reject_once"))]),
    );
    // The rejection ends the turn, and says so.
    assert_eq!(turn.stop_reason(), "end_turn", "{}", turn.dump());
    assert_eq!(
        turn.text(),
        "_You declined: Edit a.txt. I stopped here; tell me how you want to go on._"
    );
    assert_eq!(turn.statuses("e1"), ["pending", "failed"]);
    assert!(
        turn.final_text("e1").contains("declined"),
        "{}",
        turn.dump()
    );
    assert_eq!(space.read("a.txt"), "hello\n");

    // Once means once: the same edit asks again.
    let turn = run_prompt(
        &mut agent,
        &session,
        "second",
        WAIT,
        permissions(vec![("e2", Answer::select("allow_once"))]),
    );
    assert_eq!(turn.stop_reason(), "end_turn", "{}", turn.dump());
    assert_eq!(turn.permission_ids(), ["e2"]);
    assert_eq!(turn.final_status("e2"), "completed");
    assert_eq!(space.read("a.txt"), "bye\n");
}

#[test]
#[cfg_attr(windows, ignore = "sh command lines")]
fn allow_always_is_remembered_for_the_exact_command_and_cwd_and_the_file() {
    let space = Space::new("tools-allow-always");
    fs::create_dir_all(space.path("sub")).unwrap();
    space.write("a.txt", "a0\n");
    space.write("b.txt", "b0\n");
    let (mut agent, session) = space.start(
        &script(vec![
            calls(vec![
                call(
                    "c1",
                    "run_command",
                    json!({"command": "echo one >> log.txt"}),
                ),
                call(
                    "e1",
                    "edit_file",
                    json!({"path": "a.txt", "edits": [{"old": "a0", "new": "a1"}]}),
                ),
            ]),
            say("First."),
            calls(vec![
                call(
                    "c2",
                    "run_command",
                    json!({"command": "echo one >> log.txt"}),
                ),
                call(
                    "c3",
                    "run_command",
                    json!({"command": "echo one >> log.txt", "cwd": "."}),
                ),
                call(
                    "c4",
                    "run_command",
                    json!({"command": "echo one >> log.txt", "cwd": "sub"}),
                ),
                call(
                    "c5",
                    "run_command",
                    json!({"command": "echo two >> log.txt"}),
                ),
                call(
                    "e2",
                    "edit_file",
                    json!({"path": "a.txt", "edits": [{"old": "a1", "new": "a2"}]}),
                ),
                call(
                    "e3",
                    "edit_file",
                    json!({"path": "b.txt", "edits": [{"old": "b0", "new": "b1"}]}),
                ),
            ]),
            say("Second."),
        ]),
        &["--permissions", "ask"],
        json!({}),
    );
    let turn = run_prompt(
        &mut agent,
        &session,
        "first",
        WAIT,
        permissions(vec![
            ("c1", Answer::select("allow_always")),
            ("e1", Answer::select("allow_always")),
        ]),
    );
    assert_eq!(turn.stop_reason(), "end_turn", "{}", turn.dump());
    assert_eq!(turn.permission_ids(), ["c1", "e1"]);
    assert_eq!(turn.final_status("c1"), "completed");

    let turn = run_prompt(
        &mut agent,
        &session,
        "second",
        WAIT,
        permissions(vec![
            ("c4", Answer::select("allow_once")),
            ("c5", Answer::select("allow_once")),
            ("e3", Answer::select("allow_once")),
        ]),
    );
    assert_eq!(turn.stop_reason(), "end_turn", "{}", turn.dump());
    turn.assert_every_tool_call_finished();
    // The same command line in the same directory ran without asking; another
    // directory, another command and another file asked.
    assert_eq!(turn.permission_ids(), ["c4", "c5", "e3"]);
    for id in ["c2", "c3", "c4", "c5", "e2", "e3"] {
        assert_eq!(turn.final_status(id), "completed", "{id}\n{}", turn.dump());
    }
    assert_eq!(space.read("log.txt"), "one\none\none\ntwo\n");
    assert_eq!(space.read("sub/log.txt"), "one\n");
    assert_eq!(space.read("a.txt"), "a2\n");
    assert_eq!(space.read("b.txt"), "b1\n");
}

#[test]
fn reject_always_refuses_the_same_file_and_command_without_asking() {
    let space = Space::new("tools-reject-always");
    space.write("a.txt", "a0\n");
    space.write("b.txt", "b0\n");
    let edit_a = json!({"path": "a.txt", "edits": [{"old": "a0", "new": "a1"}]});
    let (mut agent, session) = space.start(
        &script(vec![
            calls(vec![
                call("e1", "edit_file", edit_a.clone()),
                call("c1", "run_command", json!({"command": "touch r"})),
            ]),
            say("First."),
            calls(vec![
                call("e2", "edit_file", edit_a.clone()),
                call(
                    "w2",
                    "write_file",
                    json!({"path": "a.txt", "content": "overwritten\n"}),
                ),
                call(
                    "e3",
                    "edit_file",
                    json!({"path": "b.txt", "edits": [{"old": "b0", "new": "b1"}]}),
                ),
                call("c2", "run_command", json!({"command": "touch r"})),
            ]),
            say("Second."),
        ]),
        &["--permissions", "ask", "--on-reject", "continue"],
        json!({}),
    );
    let turn = run_prompt(
        &mut agent,
        &session,
        "first",
        WAIT,
        permissions(vec![
            ("e1", Answer::select("reject_always")),
            ("c1", Answer::select("reject_always")),
        ]),
    );
    assert_eq!(turn.stop_reason(), "end_turn", "{}", turn.dump());
    assert_eq!(turn.final_status("e1"), "failed");
    assert_eq!(turn.final_status("c1"), "failed");

    let turn = run_prompt(
        &mut agent,
        &session,
        "second",
        WAIT,
        permissions(vec![("e3", Answer::select("allow_once"))]),
    );
    assert_eq!(turn.stop_reason(), "end_turn", "{}", turn.dump());
    turn.assert_every_tool_call_finished();
    assert_eq!(turn.permission_ids(), ["e3"]);
    for id in ["e2", "w2", "c2"] {
        assert_eq!(
            turn.statuses(id),
            ["pending", "failed"],
            "{id}\n{}",
            turn.dump()
        );
        assert!(
            turn.final_text(id).contains("declined"),
            "{id}\n{}",
            turn.dump()
        );
    }
    assert_eq!(turn.final_status("e3"), "completed");
    assert_eq!(space.read("a.txt"), "a0\n");
    assert_eq!(space.read("b.txt"), "b1\n");
    assert!(!space.exists("r"));
}

#[test]
fn a_cancelled_permission_outcome_ends_the_turn_cancelled() {
    let space = Space::new("tools-perm-cancelled");
    space.write("a.txt", "hello\n");
    let (mut agent, session) = space.start(
        &script(vec![
            calls(vec![
                call("c1", "run_command", json!({"command": "touch z"})),
                call("r1", "read_file", json!({"path": "a.txt"})),
            ]),
            say("Still here."),
        ]),
        &["--permissions", "ask"],
        json!({}),
    );
    let turn = run_prompt(
        &mut agent,
        &session,
        "go",
        WAIT,
        permissions(vec![("c1", Answer::cancelled())]),
    );
    assert_eq!(turn.stop_reason(), "cancelled", "{}", turn.dump());
    turn.assert_every_tool_call_finished();
    assert_eq!(turn.final_status("c1"), "failed");
    assert!(
        !turn.tool_call_ids().contains(&"r1".to_string()),
        "a call after the cancel ran: {}",
        turn.dump()
    );
    assert!(!space.exists("z"));

    // The session goes on.
    let turn = run_prompt(&mut agent, &session, "again", WAIT, no_requests);
    assert_eq!(turn.stop_reason(), "end_turn", "{}", turn.dump());
    assert_eq!(turn.text(), "Still here.");
}

#[test]
fn a_permission_request_answered_with_an_error_is_a_rejection() {
    let space = Space::new("tools-perm-error");
    space.write("a.txt", "hello\n");
    let (mut agent, session) = space.start(
        &script(vec![
            calls(vec![call(
                "e1",
                "edit_file",
                json!({"path": "a.txt", "edits": [{"old": "hello", "new": "bye"}]}),
            )]),
            say("Went on."),
        ]),
        &["--permissions", "ask"],
        json!({}),
    );
    let turn = run_prompt(
        &mut agent,
        &session,
        "go",
        WAIT,
        permissions(vec![("e1", Answer::error(-32603, "the dialog crashed"))]),
    );
    assert_eq!(turn.stop_reason(), "end_turn", "{}", turn.dump());
    assert_eq!(turn.text(), "Went on.");
    turn.assert_every_tool_call_finished();
    assert_eq!(turn.statuses("e1"), ["pending", "failed"]);
    assert_eq!(space.read("a.txt"), "hello\n");
}

/// The approval of an edit shows the diff it would make, computed before
/// asking; `reject_always` stops the turn too, and is then remembered.
#[test]
fn edit_approvals_carry_the_diff_and_reject_always_stops() {
    let space = Space::new("tools-diff-approval");
    space.write("a.txt", "one\ntwo\n");
    let edit = json!({"path": "a.txt", "edits": [{"old": "two", "new": "deux"}]});
    let (mut agent, session) = space.start(
        &script(vec![
            calls(vec![
                call("d1", "edit_file", edit.clone()),
                call(
                    "d2",
                    "write_file",
                    json!({"path": "b.txt", "content": "new\n"}),
                ),
            ]),
            calls(vec![call("d3", "edit_file", edit.clone())]),
            say("Fine."),
        ]),
        &["--permissions", "ask"],
        json!({}),
    );
    let turn = run_prompt(
        &mut agent,
        &session,
        "edit",
        WAIT,
        permissions(vec![("d1", Answer::select("reject_always"))]),
    );
    assert_eq!(turn.stop_reason(), "end_turn", "{}", turn.dump());
    let asked = turn.requests("session/request_permission");
    assert_eq!(asked.len(), 1, "the second call was not asked about");
    let content = &asked[0]["params"]["toolCall"]["content"];
    assert_eq!(content[0]["type"], "diff", "{content}");
    assert_eq!(content[0]["oldText"], "one\ntwo\n");
    assert_eq!(content[0]["newText"], "one\ndeux\n");
    assert!(content[0]["path"].as_str().unwrap().ends_with("a.txt"));
    assert!(turn.text().contains("You declined"), "{}", turn.dump());
    assert_eq!(space.read("a.txt"), "one\ntwo\n");
    assert!(
        !space.exists("b.txt"),
        "the call after the rejection never ran"
    );
    // Remembered: the same edit is refused without asking, and the model
    // is told (a rejection nobody gave now does not stop the turn).
    let turn = run_prompt(&mut agent, &session, "again", WAIT, no_requests);
    assert_eq!(turn.stop_reason(), "end_turn", "{}", turn.dump());
    assert_eq!(turn.final_status("d3"), "failed");
    assert_eq!(turn.text(), "Fine.");
}

/// A client with form elicitation gets a "reject with feedback" choice:
/// the form's text goes to the model and the turn continues.
#[test]
fn reject_with_feedback_asks_through_a_form() {
    let space = Space::new("tools-feedback-form");
    space.write("a.txt", "x\n");
    let (mut agent, session) = space.start(
        &script(vec![
            calls(vec![call(
                "f1",
                "write_file",
                json!({"path": "a.txt", "content": "y\n"}),
            )]),
            say("Keeping x."),
        ]),
        &["--permissions", "ask"],
        json!({"elicitation": {"form": {}}, "_meta": {"spindle": {"permissionScopes": true}}}),
    );
    let answer = |request: &Value| match request["method"].as_str() {
        Some("session/request_permission") => {
            let ids: Vec<&str> = request["params"]["options"]
                .as_array()
                .unwrap()
                .iter()
                .filter_map(|o| o["optionId"].as_str())
                .collect();
            assert!(ids.contains(&"reject_with_feedback"), "{ids:?}");
            Answer::select("reject_with_feedback")
        }
        Some("elicitation/create") => {
            assert_eq!(request["params"]["mode"], "form");
            assert_eq!(request["params"]["toolCallId"], "f1");
            Answer::Result(json!({"action": "accept", "content": {"feedback": "keep x"}}))
        }
        other => panic!("unexpected request {other:?}"),
    };
    let turn = run_prompt(&mut agent, &session, "write", WAIT, answer);
    assert_eq!(turn.stop_reason(), "end_turn", "{}", turn.dump());
    assert_eq!(turn.text(), "Keeping x.");
    assert!(turn.final_text("f1").contains("keep x"), "{}", turn.dump());
    assert_eq!(space.read("a.txt"), "x\n");
}

/// A session started in yolo by a flag says so once, in its first answer.
#[test]
fn a_session_started_in_yolo_says_so_once() {
    let space = Space::new("tools-yolo-notice");
    let (mut agent, session) = space.start(
        &script(vec![say("One."), say("Two.")]),
        &["--permissions", "yolo"],
        json!({}),
    );
    let first = run_prompt(&mut agent, &session, "one", WAIT, no_requests);
    assert!(
        first
            .notices()
            .contains("runs in yolo._ Chosen by the --permissions flag"),
        "{}",
        first.dump()
    );
    assert_eq!(first.text(), "One.");
    let second = run_prompt(&mut agent, &session, "two", WAIT, no_requests);
    assert_eq!(second.notices(), "");
}

/// In plan mode the model asks to leave it with `exit_plan`: the user
/// picks normal mode with auto edits, the client hears of the change, and
/// the same turn goes on with every tool.
#[test]
fn exit_plan_switches_to_normal_mode_and_the_turn_goes_on() {
    let space = Space::new("tools-exit-plan");
    let (mut agent, session) = space.start(
        &script(vec![
            calls(vec![call(
                "x1",
                "exit_plan",
                json!({"plan": "1. Write notes.txt"}),
            )]),
            calls(vec![call(
                "w1",
                "write_file",
                json!({"path": "notes.txt", "content": "n\n"}),
            )]),
            say("Done."),
            calls(vec![call("x2", "exit_plan", json!({"plan": "again"}))]),
            say("Still planning."),
        ]),
        &["--permissions", "ask"],
        json!({}),
    );
    let id = agent.request(
        "session/set_mode",
        json!({"sessionId": session, "modeId": "plan"}),
    );
    let (answer, _) = agent.response(&id, WAIT);
    assert!(answer.get("result").is_some(), "{answer}");
    let answerer = |request: &Value| {
        assert_eq!(request["method"], "session/request_permission");
        let tool_call = &request["params"]["toolCall"];
        assert_eq!(tool_call["kind"], "switch_mode");
        assert_eq!(
            tool_call["content"][0]["content"]["text"],
            "1. Write notes.txt"
        );
        Answer::select("normal_auto")
    };
    let turn = run_prompt(&mut agent, &session, "plan then do", WAIT, answerer);
    assert_eq!(turn.stop_reason(), "end_turn", "{}", turn.dump());
    assert_eq!(turn.text(), "Done.");
    assert_eq!(
        turn.permission_ids(),
        ["x1"],
        "auto edits: the write did not ask"
    );
    assert_eq!(space.read("notes.txt"), "n\n");
    let updates = turn.updates();
    assert!(
        updates
            .iter()
            .any(|u| u["sessionUpdate"] == "current_mode_update" && u["currentModeId"] == "normal"),
        "{}",
        turn.dump()
    );
    assert!(updates.iter().any(|u| {
        u["sessionUpdate"] == "config_option_update"
            && u["configOptions"]
                .as_array()
                .unwrap()
                .iter()
                .any(|o| o["id"] == "tool_approval" && o["currentValue"] == "auto")
    }));
    // Out of plan mode, exit_plan is not offered; a call to it fails.
    let turn = run_prompt(&mut agent, &session, "again", WAIT, no_requests);
    assert_eq!(turn.final_status("x2"), "failed", "{}", turn.dump());
}

/// Picks, among the options of `kind`, the first or the last one, the way
/// a client that binds one key per kind does.
fn pick_by_kind(kind: &'static str, last: bool) -> impl FnMut(&Value) -> Answer {
    move |request: &Value| {
        assert_eq!(request["method"], "session/request_permission", "{request}");
        let options: Vec<&Value> = request["params"]["options"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|o| o["kind"] == kind)
            .collect();
        let option = if last {
            options.last()
        } else {
            options.first()
        };
        let id = option.unwrap_or_else(|| panic!("no {kind} option: {request}"))["optionId"]
            .as_str()
            .unwrap();
        Answer::select(id)
    }
}

/// A client that picks the first or the last "always allow" option of a
/// request never grants more than that file, or that command's start, for
/// the session: the next file and another command are asked again, and
/// nothing is saved in the user's config.
#[test]
fn always_by_kind_never_grants_a_broad_or_saved_rule() {
    for last in [false, true] {
        let space = Space::new(if last {
            "tools-pick-last"
        } else {
            "tools-pick-first"
        });
        let config = space.base.join("config.json");
        std::fs::write(&config, "{}").unwrap();
        let config = config.to_str().unwrap().to_string();
        let (mut agent, session) = space.start(
            &script(vec![
                calls(vec![
                    call(
                        "e1",
                        "write_file",
                        json!({"path": "a.txt", "content": "1\n"}),
                    ),
                    call("c1", "run_command", json!({"command": "echo hi one"})),
                    call("r1", "run_command", json!({"command": "ls"})),
                ]),
                say("Once."),
                calls(vec![
                    call(
                        "e2",
                        "write_file",
                        json!({"path": "a.txt", "content": "2\n"}),
                    ),
                    call(
                        "e3",
                        "write_file",
                        json!({"path": "b.txt", "content": "3\n"}),
                    ),
                    call("c2", "run_command", json!({"command": "echo hi two"})),
                    call("c3", "run_command", json!({"command": "touch c.txt"})),
                    call("r2", "run_command", json!({"command": "pwd"})),
                ]),
                say("Twice."),
            ]),
            &[
                "--permissions",
                "ask",
                "--on-reject",
                "continue",
                "--config",
                &config,
            ],
            json!({"elicitation": {"form": {}}}),
        );
        let turn = run_prompt(&mut agent, &session, "one", WAIT, |request: &Value| {
            super::check_options(request);
            let kinds: Vec<&str> = request["params"]["options"]
                .as_array()
                .unwrap()
                .iter()
                .filter_map(|o| o["kind"].as_str())
                .collect();
            let mut unique = kinds.clone();
            unique.sort_unstable();
            unique.dedup();
            assert_eq!(unique.len(), kinds.len(), "one option per kind: {request}");
            pick_by_kind("allow_always", last)(request)
        });
        assert_eq!(turn.permission_ids(), ["e1", "c1", "r1"], "{}", turn.dump());
        let turn = run_prompt(
            &mut agent,
            &session,
            "two",
            WAIT,
            pick_by_kind("reject_once", last),
        );
        // The same file and the same command start pass; the rest asks.
        assert_eq!(
            turn.permission_ids(),
            ["e3", "c3", "r2"],
            "last: {last}\n{}",
            turn.dump()
        );
        assert_eq!(space.read("a.txt"), "2\n");
        assert!(!space.exists("b.txt") && !space.exists("c.txt"));
        assert_eq!(
            std::fs::read_to_string(&config).unwrap(),
            "{}",
            "nothing saved"
        );
    }
}

/// A client that asked for the broad scopes gets them beside the narrow
/// one, in plain words with the pattern in backticks.
#[test]
fn broad_scopes_are_offered_to_a_client_that_asks() {
    let space = Space::new("tools-broad-scopes");
    let (mut agent, session) = space.start(
        &script(vec![
            calls(vec![call(
                "e1",
                "write_file",
                json!({"path": "a.txt", "content": "1\n"}),
            )]),
            say("Done."),
        ]),
        &["--permissions", "ask"],
        json!({"_meta": {"spindle": {"permissionScopes": true}}}),
    );
    let mut seen = Vec::new();
    let turn = run_prompt(&mut agent, &session, "go", WAIT, |request: &Value| {
        for option in request["params"]["options"].as_array().unwrap() {
            seen.push((
                option["optionId"].as_str().unwrap().to_string(),
                option["name"].as_str().unwrap().to_string(),
            ));
        }
        Answer::select("allow_once")
    });
    assert_eq!(turn.final_status("e1"), "completed", "{}", turn.dump());
    let ids: Vec<&str> = seen.iter().map(|(id, _)| id.as_str()).collect();
    assert_eq!(
        ids,
        [
            "allow_once",
            "allow_always",
            "allow_rule",
            "allow_project",
            "reject_once",
            "reject_always"
        ]
    );
    assert_eq!(seen[2].1, "Always allow every edit in this session");
}

/// An answer naming an option the request did not offer (the saved rule,
/// to a client that did not ask for it) is a refusal, and saves nothing.
#[test]
fn an_option_not_offered_is_a_refusal() {
    let space = Space::new("tools-unoffered");
    let config = space.base.join("config.json");
    std::fs::write(&config, "{}").unwrap();
    let config = config.to_str().unwrap().to_string();
    let (mut agent, session) = space.start(
        &script(vec![
            calls(vec![call(
                "c1",
                "run_command",
                json!({"command": "touch x.txt"}),
            )]),
            say("Stopped."),
        ]),
        &["--permissions", "ask", "--config", &config],
        json!({}),
    );
    let turn = run_prompt(&mut agent, &session, "go", WAIT, |_: &Value| {
        Answer::select("allow_project")
    });
    assert_eq!(turn.final_status("c1"), "failed", "{}", turn.dump());
    assert!(!space.exists("x.txt"));
    assert_eq!(std::fs::read_to_string(&config).unwrap(), "{}");
}

//! The turn around the tools: todo_write becoming a plan update, and the
//! per-turn step limit (`--max-steps`).

use super::{call, calls, finished_at, position, say, script, Space, WAIT};
use crate::support::client::no_requests;
use crate::support::run_prompt;
use serde_json::json;

#[test]
fn todo_write_becomes_a_plan_update() {
    let space = Space::new("tools-todo");
    let (mut agent, session) = space.start(
        &script(vec![
            calls(vec![call(
                "t1",
                "todo_write",
                json!({"todos": [
                    {"content": "Write the tests", "status": "completed", "priority": "high"},
                    {"content": "Run them", "status": "in_progress"},
                    {"content": "Report", "status": "pending", "priority": "low"}
                ]}),
            )]),
            say("Planned."),
        ]),
        &["--permissions", "yolo"],
        json!({}),
    );
    let turn = run_prompt(&mut agent, &session, "plan", WAIT, no_requests);
    assert_eq!(turn.stop_reason(), "end_turn", "{}", turn.dump());
    let plans = turn.plans();
    assert_eq!(plans.len(), 1, "{}", turn.dump());
    assert_eq!(
        *plans[0],
        json!([
            {"content": "Write the tests", "priority": "high", "status": "completed"},
            {"content": "Run them", "priority": "medium", "status": "in_progress"},
            {"content": "Report", "priority": "low", "status": "pending"}
        ])
    );
    let announce = turn.tool_call("t1");
    assert_eq!(announce["kind"], "think");
    assert_eq!(announce["title"], "Update plan");
    assert_eq!(turn.final_status("t1"), "completed");
    let plan_at = position(&turn, |m| m["params"]["update"]["sessionUpdate"] == "plan");
    assert!(plan_at < finished_at(&turn, "t1"));
    turn.assert_every_tool_call_finished();
}

#[test]
fn a_model_that_keeps_calling_tools_stops_at_max_steps() {
    let space = Space::new("tools-max-steps");
    space.write("a.txt", "again\n");
    let looping = json!({
        "fallback": {
            "text": "Once more.",
            "tool_calls": [{"name": "read_file", "arguments": {"path": "a.txt"}}]
        }
    });
    let (mut agent, session) = space.start(
        &looping,
        &["--permissions", "yolo", "--max-steps", "2"],
        json!({}),
    );
    let turn = run_prompt(&mut agent, &session, "loop", WAIT, no_requests);
    assert_eq!(turn.stop_reason(), "max_turn_requests", "{}", turn.dump());
    turn.assert_every_tool_call_finished();
    let ids = turn.tool_call_ids();
    assert_eq!(
        ids.len(),
        2,
        "two model calls, each with one tool call\n{}",
        turn.dump()
    );
    assert_ne!(ids[0], ids[1], "tool call ids must be unique");
    assert_eq!(turn.text(), "Once more.Once more.");
}

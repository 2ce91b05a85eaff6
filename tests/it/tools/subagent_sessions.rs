//! A client that takes subagents (`clientCapabilities.subagents`) gets a
//! `task` as a child session: announced on the parent by a
//! `subagent_update` before anything of the child is sent, the child's
//! updates and permission requests on the child's id, its state (running,
//! waiting on the user, idle and why), a cancel of the child alone or,
//! through its parent, of both (a pending permission included), an
//! error stop reason when its model fails, a child id refused as a
//! session of its own, and a load that replays it all as it was shown.

use super::subagents::copy_greeting;
use super::{call, calls, permissions, say, script, Space, WAIT};
use crate::support::{run_prompt, Answer, Exchange, Turn};
use serde_json::{json, Value};

fn capabilities() -> Value {
    json!({"subagents": {}})
}

/// The `subagent_update`s on `session`, in order.
fn subagent_updates<'a>(messages: &'a [Value], session: &str) -> Vec<&'a Value> {
    messages
        .iter()
        .filter(|m| m["method"] == "session/update" && m["params"]["sessionId"] == session)
        .map(|m| &m["params"]["update"])
        .filter(|u| u["sessionUpdate"] == "subagent_update")
        .collect()
}

/// The one child session announced on `session`.
fn child_of(turn: &Turn, session: &str) -> String {
    let announced = subagent_updates(&turn.messages, session);
    let child = announced
        .first()
        .and_then(|u| u["sessionId"].as_str())
        .unwrap_or_else(|| panic!("no subagent_update\n{}", turn.dump()))
        .to_string();
    assert!(
        child.starts_with(&format!("{session}/task-")),
        "{child}\n{}",
        turn.dump()
    );
    assert!(announced.iter().all(|u| u["sessionId"] == child.as_str()));
    child
}

/// The position of the first message naming `session` (an update or a
/// request).
fn first_naming(messages: &[Value], session: &str) -> Option<usize> {
    messages
        .iter()
        .position(|m| m["params"]["sessionId"] == session)
}

/// The updates sent on `session`, in order.
fn updates_on<'a>(messages: &'a [Value], session: &str) -> Vec<&'a Value> {
    messages
        .iter()
        .filter(|m| {
            m["method"] == "session/update"
                && m.get("id").is_none()
                && m["params"]["sessionId"] == session
        })
        .map(|m| &m["params"]["update"])
        .collect()
}

/// What a load must show again of a subagent: the `subagent_update`s and
/// tool calls, each with its session, and each session's message text.
fn shape(messages: &[&Value]) -> (Vec<Value>, Vec<(String, String)>) {
    let mut updates = Vec::new();
    let mut texts: Vec<(String, String)> = Vec::new();
    for message in messages {
        if message["method"] != "session/update" {
            continue;
        }
        let session = message["params"]["sessionId"].as_str().unwrap_or_default();
        let update = &message["params"]["update"];
        match update["sessionUpdate"].as_str().unwrap_or_default() {
            "subagent_update" | "tool_call" | "tool_call_update" => {
                updates.push(json!([session, update]))
            }
            "agent_message_chunk" => {
                let text = update["content"]["text"].as_str().unwrap_or_default();
                match texts.iter_mut().find(|(known, _)| known == session) {
                    Some((_, all)) => all.push_str(text),
                    None => texts.push((session.to_string(), text.to_string())),
                }
            }
            _ => {}
        }
    }
    (updates, texts)
}

#[test]
fn a_subagent_is_a_child_session_announced_first_and_replayed_alike() {
    let space = Space::new("subagent-session");
    space.write("a.txt", "hello from a\n");
    let db = space.base.join("db").join("spindle.db");
    let db_arg = db.to_str().unwrap().to_string();
    let (mut agent, session) = space.start(
        &copy_greeting(),
        &["--permissions", "ask", "--db", &db_arg],
        capabilities(),
    );
    let turn = run_prompt(
        &mut agent,
        &session,
        "copy it",
        WAIT,
        permissions(vec![("t1/c2", Answer::select("allow_once"))]),
    );
    assert_eq!(turn.stop_reason(), "end_turn", "{}", turn.dump());
    let child = child_of(&turn, &session);

    // Announced, running, cancellable, before anything names the child.
    let states = subagent_updates(&turn.messages, &session);
    assert_eq!(states[0]["title"], "Copy a greeting");
    assert_eq!(states[0]["state"], json!({"state": "running"}));
    assert_eq!(states[0]["capabilities"], json!({"cancel": {}}));
    let announced = turn
        .messages
        .iter()
        .position(|m| m["params"]["update"]["sessionUpdate"] == "subagent_update")
        .unwrap();
    let first = first_naming(&turn.messages, &child).expect("no child traffic");
    assert!(announced < first, "{}", turn.dump());

    // The child's calls and words are on its own session, unmarked.
    let on_child = updates_on(&turn.messages, &child);
    for id in ["t1/c1", "t1/c2"] {
        assert!(
            on_child
                .iter()
                .any(|u| u["sessionUpdate"] == "tool_call" && u["toolCallId"] == id),
            "{id}\n{}",
            turn.dump()
        );
    }
    assert!(on_child.iter().all(|u| u.get("_meta").is_none()));
    let child_text: String = on_child
        .iter()
        .filter(|u| u["sessionUpdate"] == "agent_message_chunk")
        .filter_map(|u| u["content"]["text"].as_str())
        .collect();
    assert_eq!(child_text, "a.txt says hello; I wrote b.txt.");
    // Nothing of the child is left on the parent's session.
    let on_parent = updates_on(&turn.messages, &session);
    assert!(on_parent
        .iter()
        .all(|u| u["_meta"]["spindle"]["parentToolCallId"].is_null()));
    assert!(!on_parent.iter().any(|u| u["toolCallId"] == "t1/c1"));

    // The permission request names the child; the child waited on it.
    let asked = turn.requests("session/request_permission");
    assert_eq!(asked.len(), 1);
    assert_eq!(asked[0]["params"]["sessionId"], child.as_str());
    assert_eq!(asked[0]["params"]["toolCall"]["toolCallId"], "t1/c2");
    let state_names: Vec<&Value> = states.iter().map(|u| &u["state"]["state"]).collect();
    assert_eq!(
        state_names,
        ["running", "requires_action", "running", "idle"],
        "{}",
        turn.dump()
    );
    let waiting = turn
        .messages
        .iter()
        .position(|m| m["params"]["update"]["state"]["state"] == "requires_action")
        .unwrap();
    let request = turn
        .messages
        .iter()
        .position(|m| m["method"] == "session/request_permission")
        .unwrap();
    assert!(waiting < request);

    // Idle at the end, and the parent's call has the child's answer.
    assert_eq!(
        states.last().unwrap()["state"],
        json!({"state": "idle", "stopReason": "end_turn"})
    );
    assert_eq!(turn.final_status("t1"), "completed", "{}", turn.dump());
    assert!(turn.final_text("t1").contains("I wrote b.txt"));
    assert_eq!(space.read("b.txt"), "hello from the subagent\n");
    let live: Vec<&Value> = turn.messages.iter().collect();
    let live_shape = shape(&live);
    drop(agent);

    // Another process loads it for the same kind of client: the same.
    let mut agent = space.spawn(&script(vec![]), &["--permissions", "yolo", "--db", &db_arg]);
    super::initialize(&mut agent, capabilities());
    let id = agent.request(
        "session/load",
        json!({"sessionId": session, "cwd": space.ws, "mcpServers": []}),
    );
    let (loaded, others) = agent.response(&id, WAIT);
    assert!(loaded.get("result").is_some(), "{loaded}");
    let replayed: Vec<&Value> = others.iter().collect();
    assert_eq!(shape(&replayed), live_shape);
    let announced = others
        .iter()
        .position(|m| m["params"]["update"]["sessionUpdate"] == "subagent_update")
        .unwrap();
    assert!(announced < first_naming(&others, &child).unwrap());
}

#[test]
fn a_cancel_of_the_child_stops_only_the_child() {
    let space = Space::new("subagent-session-cancel");
    let (mut agent, session) = space.start(
        &script(vec![
            calls(vec![call(
                "t1",
                "task",
                json!({"description": "Count slowly", "prompt": "Count."}),
            )]),
            json!({"text": "one two three four five six seven eight nine ten", "chunk_delay_ms": 400}),
            say("The parent goes on."),
        ]),
        &["--permissions", "yolo"],
        capabilities(),
    );
    let mut exchange = Exchange::prompt(&mut agent, &session, "go");
    let mut answer = |request: &Value| panic!("unexpected request: {request}");
    let child_spoke = |exchange: &Exchange| {
        exchange.messages.iter().any(|m| {
            m["params"]["update"]["sessionUpdate"] == "agent_message_chunk"
                && m["params"]["sessionId"]
                    .as_str()
                    .is_some_and(|s| s.contains("/task-"))
        })
    };
    assert!(
        exchange.until(&mut agent, WAIT, &mut answer, &mut |e: &Exchange| {
            child_spoke(e)
        })
    );
    let child = exchange
        .messages
        .iter()
        .find_map(|m| m["params"]["update"]["sessionId"].as_str())
        .unwrap()
        .to_string();
    // An unknown child is ignored, as any unknown session is.
    agent.notify(
        "session/cancel",
        json!({"sessionId": format!("{session}/task-00")}),
    );
    agent.notify("session/cancel", json!({"sessionId": child}));
    let turn = exchange.finish(&mut agent, WAIT, &mut answer);
    assert_eq!(turn.stop_reason(), "end_turn", "{}", turn.dump());
    let states = subagent_updates(&turn.messages, &session);
    assert_eq!(
        states.last().unwrap()["state"],
        json!({"state": "idle", "stopReason": "cancelled"}),
        "{}",
        turn.dump()
    );
    assert_eq!(turn.final_status("t1"), "failed");
    assert!(turn.final_text("t1").contains("Cancelled"));
    assert!(
        turn.text().contains("The parent goes on."),
        "{}",
        turn.dump()
    );
    let child_text: String = updates_on(&turn.messages, &child)
        .iter()
        .filter_map(|u| u["content"]["text"].as_str())
        .collect();
    assert!(!child_text.contains("ten"), "{child_text}");

    // The child is not a session to prompt.
    let id = agent.request(
        "session/prompt",
        json!({"sessionId": child, "prompt": [{"type": "text", "text": "hi"}]}),
    );
    let (refused, _) = agent.response(&id, WAIT);
    let message = refused["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("subagent's session"), "{refused}");
    let id = agent.request(
        "session/load",
        json!({"sessionId": child, "cwd": space.ws, "mcpServers": []}),
    );
    let (refused, _) = agent.response(&id, WAIT);
    let message = refused["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("subagent's session"), "{refused}");
}

#[test]
fn a_failing_model_in_the_child_ends_it_with_an_error() {
    let space = Space::new("subagent-session-error");
    let (mut agent, session) = space.start(
        &script(vec![
            calls(vec![call(
                "t1",
                "task",
                json!({"description": "Fail", "prompt": "Try."}),
            )]),
            json!({"error": {"code": "provider_http_400", "message": "the model broke"}}),
            say("It failed; I stop here."),
        ]),
        &["--permissions", "yolo"],
        capabilities(),
    );
    let turn = run_prompt(&mut agent, &session, "go", WAIT, |r: &Value| -> Answer {
        panic!("unexpected request: {r}")
    });
    assert_eq!(turn.stop_reason(), "end_turn", "{}", turn.dump());
    let states = subagent_updates(&turn.messages, &session);
    let last = &states.last().unwrap()["state"];
    assert_eq!(last["state"], "idle", "{}", turn.dump());
    assert_eq!(last["stopReason"], "error", "{}", turn.dump());
    assert!(last["error"]["code"].is_i64(), "{last}");
    assert!(
        last["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("the model broke")),
        "{last}"
    );
    assert_eq!(turn.final_status("t1"), "failed");
}

#[test]
fn a_cancel_of_the_parent_stops_a_child_waiting_on_a_permission() {
    let space = Space::new("subagent-session-parent-cancel");
    let (mut agent, session) = space.start(
        &script(vec![
            calls(vec![call(
                "t1",
                "task",
                json!({"description": "Write", "prompt": "Write b.txt."}),
            )]),
            calls(vec![call(
                "c1",
                "write_file",
                json!({"path": "b.txt", "content": "x\n"}),
            )]),
            say("unused"),
            say("unused"),
        ]),
        &["--permissions", "ask"],
        capabilities(),
    );
    let mut exchange = Exchange::prompt(&mut agent, &session, "go");
    let mut answer = |_: &Value| Answer::Ignore;
    let asked = exchange.until(&mut agent, WAIT, &mut answer, &mut |e: &Exchange| {
        e.messages
            .iter()
            .any(|m| m["method"] == "session/request_permission")
    });
    assert!(asked);
    let request = exchange
        .messages
        .iter()
        .find(|m| m["method"] == "session/request_permission")
        .unwrap()
        .clone();
    assert!(request["params"]["sessionId"]
        .as_str()
        .is_some_and(|s| s.starts_with(&format!("{session}/task-"))));
    agent.notify("session/cancel", json!({"sessionId": session}));
    let turn = exchange.finish(&mut agent, WAIT, &mut answer);
    assert_eq!(turn.stop_reason(), "cancelled", "{}", turn.dump());
    let states = subagent_updates(&turn.messages, &session);
    assert_eq!(
        states.last().unwrap()["state"],
        json!({"state": "idle", "stopReason": "cancelled"}),
        "{}",
        turn.dump()
    );
    assert!(!space.exists("b.txt"));
}

//! Nothing for a session before the answer that gives the client its id:
//! `session/new`, `session/fork` and `session/resume` are answered first,
//! and the slash commands and notices (here: an MCP server that cannot
//! start) follow. Zed drops updates for a session it does not know yet
//! (zed-industries/zed#60199). The harness fails any test that breaks
//! this (`support::rules`); these tests make each path happen.

use super::{Space, WAIT};
use crate::support::prelude::call;
use crate::support::Agent;
use serde_json::{json, Value};
use std::time::Instant;

/// An MCP server whose command does not exist: a notice after the answer.
fn broken_server(space: &Space) -> Value {
    let missing = space.base.join("no-such-server");
    json!([{"name": "broken", "command": missing.to_str().expect("UTF-8"),
            "args": [], "env": []}])
}

/// The session's updates that follow, until both the slash commands and
/// the notice naming `broken` have come.
fn commands_and_notice_after(agent: &mut Agent, session: &str) {
    let deadline = Instant::now() + WAIT;
    let (mut commands, mut notice) = (false, false);
    while !(commands && notice) {
        let left = deadline.saturating_duration_since(Instant::now());
        let Some(message) = agent.recv(left) else {
            panic!("no commands ({commands}) or notice ({notice}) for {session}");
        };
        if message["method"] != "session/update" || message["params"]["sessionId"] != session {
            continue;
        }
        let update = &message["params"]["update"];
        commands |= update["sessionUpdate"] == "available_commands_update";
        notice |= update["sessionUpdate"] == "notice"
            && update["title"]
                .as_str()
                .is_some_and(|title| title.contains("broken"));
    }
}

/// No `session/update` among the messages that came before an answer.
fn no_update_before(before: &[Value], method: &str) {
    let updates: Vec<&Value> = before
        .iter()
        .filter(|m| m["method"] == "session/update")
        .collect();
    assert!(
        updates.is_empty(),
        "updates before the {method} answer: {updates:#?}"
    );
}

#[test]
fn new_fork_and_resume_are_answered_before_any_update() {
    let space = Space::new("order");
    let mut agent = space.spawn_scripted(&space.db, &json!({"replies": []}));
    agent.initialize_with(json!({"session": {"notices": {}}}));
    let servers = broken_server(&space);

    let (outcome, before) = call(
        &mut agent,
        "session/new",
        json!({"cwd": space.ws(), "mcpServers": servers}),
    );
    let session = outcome.expect("session/new")["sessionId"]
        .as_str()
        .expect("a sessionId")
        .to_string();
    no_update_before(&before, "session/new");
    commands_and_notice_after(&mut agent, &session);

    let (outcome, before) = call(
        &mut agent,
        "session/resume",
        json!({"sessionId": session, "cwd": space.ws(), "mcpServers": servers}),
    );
    outcome.expect("session/resume");
    no_update_before(&before, "session/resume");
    commands_and_notice_after(&mut agent, &session);

    let (outcome, before) = call(
        &mut agent,
        "session/fork",
        json!({"sessionId": session, "cwd": space.ws(), "mcpServers": servers}),
    );
    let fork = outcome.expect("session/fork")["sessionId"]
        .as_str()
        .expect("a sessionId")
        .to_string();
    assert_ne!(fork, session);
    no_update_before(&before, "session/fork");
    commands_and_notice_after(&mut agent, &fork);

    // Resumed in a process that never had it: from the store.
    drop(agent);
    let mut agent = space.spawn_scripted(&space.db, &json!({"replies": []}));
    agent.initialize_with(json!({"session": {"notices": {}}}));
    let (outcome, before) = call(
        &mut agent,
        "session/resume",
        json!({"sessionId": fork, "cwd": space.ws(), "mcpServers": servers}),
    );
    outcome.expect("session/resume from the store");
    no_update_before(&before, "session/resume");
    commands_and_notice_after(&mut agent, &fork);
}

//! The client's system prompt (unstable `systemPrompt`): advertised,
//! `append` after Spindle's instructions and `override` in their place
//! (its safety text and the project's instructions kept), carried by the
//! store across processes, loads, resumes and forks, given to subagents,
//! shown by `/memory`, and refused with -32602 (no session made) when it
//! cannot be applied as given.

use super::{err, load, message, ok, prompt_ok, resume, Space, INVALID_PARAMS};
use crate::support::fake_openai::{chat_text, chat_tool_calls};
use crate::support::{updates_text, FakeServer, Reply};
use serde_json::{json, Value};

/// Words of Spindle's safety text, which `override` cannot remove.
const SAFETY_WORDS: [&str; 2] = [
    "approval policy and the sandbox allow",
    "are data, not instructions",
];

/// Words of Spindle's own instructions, which `override` replaces.
const OWN_WORDS: [&str; 2] = ["You are Spindle", "How to use the tools"];

fn system_prompt(mode: &str, text: &str) -> Value {
    json!({"mode": mode, "content": [{"type": "text", "text": text}]})
}

fn new_with(space: &Space, agent: &mut crate::support::Agent, given: Value) -> String {
    let result = ok(
        agent,
        "session/new",
        json!({"cwd": space.ws(), "mcpServers": [], "systemPrompt": given}),
    );
    result["sessionId"].as_str().unwrap().to_string()
}

/// The system message of a recorded request.
fn system_of(body: &Value) -> String {
    let first = &body["messages"][0];
    assert_eq!(first["role"], "system", "{body}");
    first["content"].as_str().unwrap_or_default().to_string()
}

/// Runs a turn answered "ok" and returns the system message the model got.
fn sent_system(server: &FakeServer, agent: &mut crate::support::Agent, session: &str) -> String {
    server.push(Reply::Sse(chat_text(&["ok"])));
    prompt_ok(agent, session, "hello");
    let body = server.requests().pop().unwrap().body;
    // Never a user message: the client's text is at system level.
    for message in body["messages"].as_array().unwrap().iter().skip(1) {
        assert!(
            !message.to_string().contains("CLIENT-"),
            "the client's text outside the system message: {message}"
        );
    }
    system_of(&body)
}

#[test]
fn append_follows_spindles_instructions_and_override_replaces_them() {
    let space = Space::new("sysprompt-modes");
    std::fs::write(space.ws.join("AGENTS.md"), "PROJECT-RULE: tabs.").unwrap();
    let server = FakeServer::start();
    let mut agent = space.openai(&server);
    let initialized = agent.received().first().cloned().unwrap_or_default();
    assert_eq!(
        initialized["result"]["agentCapabilities"]["sessionCapabilities"]["systemPrompt"],
        json!({"mode": {"override": {}}}),
        "{initialized}"
    );

    let plain = agent.new_session(&space.ws);
    let untouched = sent_system(&server, &mut agent, &plain);
    assert!(!untouched.contains("from the client"), "{untouched}");

    let appended = new_with(&space, &mut agent, system_prompt("append", "CLIENT-APPEND"));
    let system = sent_system(&server, &mut agent, &appended);
    assert!(system.starts_with(&untouched), "{system}");
    assert!(system.trim_end().ends_with("CLIENT-APPEND"), "{system}");

    let replaced = new_with(
        &space,
        &mut agent,
        json!({"mode": "override", "content": [
            {"type": "text", "text": "CLIENT-OVERRIDE one."},
            {"type": "text", "text": "CLIENT-OVERRIDE two."}]}),
    );
    let system = sent_system(&server, &mut agent, &replaced);
    assert!(
        system.contains("CLIENT-OVERRIDE one.\n\nCLIENT-OVERRIDE two."),
        "{system}"
    );
    for own in OWN_WORDS {
        assert!(!system.contains(own), "{own} kept: {system}");
    }
    for kept in SAFETY_WORDS
        .iter()
        .chain(&["PROJECT-RULE: tabs.", space.ws()])
    {
        assert!(system.contains(kept), "{kept} lost: {system}");
        assert!(untouched.contains(kept), "{kept} not in the default");
    }
}

#[test]
fn a_stored_prompt_goes_on_through_load_and_resume_in_a_fresh_process() {
    let space = Space::new("sysprompt-stored");
    let server = FakeServer::start();
    let mut first = space.openai(&server);
    let session = new_with(&space, &mut first, system_prompt("override", "CLIENT-KEPT"));
    let before = sent_system(&server, &mut first, &session);
    assert!(before.contains("CLIENT-KEPT"), "{before}");
    let replay_before = load(&mut first, &session, space.ws());
    drop(first);

    // A fresh process loads it without a system prompt: the stored one.
    let mut second = space.openai(&server);
    let replayed = load(&mut second, &session, space.ws());
    assert_eq!(replayed, replay_before, "the replay changed");
    assert!(!format!("{replayed:?}").contains("CLIENT-"), "{replayed:?}");
    let system = sent_system(&server, &mut second, &session);
    assert!(system.contains("CLIENT-KEPT"), "{system}");
    assert!(!system.contains(OWN_WORDS[0]), "{system}");
    drop(second);

    // A resume with a new one replaces it, and keeps the new one.
    let mut third = space.openai(&server);
    ok(
        &mut third,
        "session/resume",
        json!({"sessionId": session, "cwd": space.ws(),
               "systemPrompt": system_prompt("append", "CLIENT-NEWER")}),
    );
    let system = sent_system(&server, &mut third, &session);
    assert!(
        system.contains("CLIENT-NEWER") && !system.contains("CLIENT-KEPT"),
        "{system}"
    );
    assert!(system.contains(OWN_WORDS[0]), "{system}");
    drop(third);
    let mut fourth = space.openai(&server);
    resume(&mut fourth, &session, space.ws());
    let system = sent_system(&server, &mut fourth, &session);
    assert!(system.contains("CLIENT-NEWER"), "{system}");
}

#[test]
fn a_fork_keeps_the_sources_prompt_unless_given_one() {
    let space = Space::new("sysprompt-fork");
    let server = FakeServer::start();
    let mut agent = space.openai(&server);
    let source = new_with(&space, &mut agent, system_prompt("append", "CLIENT-SOURCE"));
    sent_system(&server, &mut agent, &source);
    let fork = |agent: &mut crate::support::Agent, more: Value| {
        let mut params = json!({"sessionId": source, "cwd": space.ws(), "mcpServers": []});
        if !more.is_null() {
            params["systemPrompt"] = more;
        }
        ok(agent, "session/fork", params)["sessionId"]
            .as_str()
            .unwrap()
            .to_string()
    };
    let copy = fork(&mut agent, Value::Null);
    let system = sent_system(&server, &mut agent, &copy);
    assert!(system.contains("CLIENT-SOURCE"), "{system}");
    let other = fork(&mut agent, system_prompt("override", "CLIENT-FORK"));
    let system = sent_system(&server, &mut agent, &other);
    assert!(
        system.contains("CLIENT-FORK") && !system.contains("CLIENT-SOURCE"),
        "{system}"
    );
    // The source is as it was.
    let system = sent_system(&server, &mut agent, &source);
    assert!(
        system.contains("CLIENT-SOURCE") && !system.contains("CLIENT-FORK"),
        "{system}"
    );
}

#[test]
fn what_cannot_be_applied_is_refused_and_makes_no_session() {
    let space = Space::new("sysprompt-refused");
    let server = FakeServer::start();
    let mut agent = space.openai(&server);
    let text = json!([{"type": "text", "text": "x"}]);
    let cases = [
        (
            json!({"mode": "_x", "content": text}),
            "\"_x\" is not supported",
        ),
        (
            json!({"mode": "replace", "content": text}),
            "\"replace\" is not supported",
        ),
        (
            json!({"mode": "append", "content": [
                {"type": "image", "data": "iVBORw0KGgo=", "mimeType": "image/png"}]}),
            "content[0] is a \"image\" block",
        ),
        (json!({"mode": "append", "content": []}), "content is empty"),
        (
            system_prompt("append", &"x".repeat(64 * 1024 + 1)),
            "limited to 65536 bytes",
        ),
    ];
    for (given, says) in &cases {
        let error = err(
            &mut agent,
            "session/new",
            json!({"cwd": space.ws(), "mcpServers": [], "systemPrompt": given}),
        );
        assert_eq!(error["code"], INVALID_PARAMS, "{error}");
        assert!(message(&error).contains(says), "{says}: {error}");
    }
    // The list opens the store (the agent may still be making it).
    let listed = ok(&mut agent, "session/list", json!({}));
    assert_eq!(listed["sessions"], json!([]), "{listed}");
    assert!(
        space.db.session_ids().is_empty(),
        "{:?}",
        space.db.session_ids()
    );

    // On load, resume and fork: refused, and nothing changed or copied.
    let session = new_with(&space, &mut agent, system_prompt("append", "CLIENT-FIRST"));
    sent_system(&server, &mut agent, &session);
    drop(agent);
    let mut agent = space.openai(&server);
    for (given, _) in &cases {
        for (method, mut params) in [
            (
                "session/load",
                json!({"sessionId": session, "cwd": space.ws(), "mcpServers": []}),
            ),
            (
                "session/resume",
                json!({"sessionId": session, "cwd": space.ws()}),
            ),
            (
                "session/fork",
                json!({"sessionId": session, "cwd": space.ws(), "mcpServers": []}),
            ),
        ] {
            params["systemPrompt"] = given.clone();
            let error = err(&mut agent, method, params);
            assert_eq!(error["code"], INVALID_PARAMS, "{method}: {error}");
        }
    }
    assert_eq!(space.db.session_ids(), std::slice::from_ref(&session));
    resume(&mut agent, &session, space.ws());
    let system = sent_system(&server, &mut agent, &session);
    assert!(system.contains("CLIENT-FIRST"), "{system}");
}

#[test]
fn subagents_and_memory_see_the_clients_prompt() {
    let space = Space::new("sysprompt-task");
    let server = FakeServer::start();
    let mut agent = space.openai(&server);
    let session = new_with(
        &space,
        &mut agent,
        json!({"mode": "override", "content": [{"type": "text",
            "text": "CLIENT-LINE one\nCLIENT-LINE two\nCLIENT-LINE three\nCLIENT-LINE four"}]}),
    );
    server.push(Reply::Sse(chat_tool_calls(&[(
        "task",
        json!({"description": "dig", "prompt": "look around"}),
    )])));
    server.push(Reply::Sse(chat_text(&["found it"])));
    server.push(Reply::Sse(chat_text(&["done"])));
    prompt_ok(&mut agent, &session, "delegate");
    let requests = server.requests();
    assert_eq!(requests.len(), 3, "no subagent ran");
    let child = system_of(&requests[1].body);
    assert!(child.contains("CLIENT-LINE one"), "{child}");
    assert!(child.contains(SAFETY_WORDS[1]), "{child}");
    assert!(!child.contains(OWN_WORDS[0]), "{child}");

    let updates = prompt_ok(&mut agent, &session, "/memory");
    let shown = updates_text(
        &updates
            .iter()
            .map(|u| json!({"method": "session/update", "params": {"update": u}}))
            .collect::<Vec<_>>(),
        "agent_message_chunk",
    );
    assert!(
        shown.contains("system prompt is in force: override"),
        "{shown}"
    );
    assert!(
        shown.contains("CLIENT-LINE three") && !shown.contains("CLIENT-LINE four"),
        "{shown}"
    );
    assert!(shown.contains(" bytes)"), "{shown}");
    let plain = agent.new_session(&space.ws);
    let updates = prompt_ok(&mut agent, &plain, "/memory");
    assert!(
        format!("{updates:?}").contains("gave no system prompt"),
        "{updates:?}"
    );
}

#[test]
fn a_prompt_given_to_a_session_open_here_replaces_its_own() {
    let space = Space::new("sysprompt-live");
    let server = FakeServer::start();
    let mut agent = space.openai(&server);
    let session = new_with(&space, &mut agent, system_prompt("override", "CLIENT-OLD"));
    sent_system(&server, &mut agent, &session);
    let replayed = load(&mut agent, &session, space.ws());
    assert!(!replayed.is_empty());
    ok(
        &mut agent,
        "session/resume",
        json!({"sessionId": session, "cwd": space.ws(),
               "systemPrompt": system_prompt("append", "CLIENT-LIVE")}),
    );
    let system = sent_system(&server, &mut agent, &session);
    assert!(
        system.contains("CLIENT-LIVE") && !system.contains("CLIENT-OLD"),
        "{system}"
    );
    // And it is what the store keeps.
    drop(agent);
    let mut agent = space.openai(&server);
    resume(&mut agent, &session, space.ws());
    let system = sent_system(&server, &mut agent, &session);
    assert!(system.contains("CLIENT-LIVE"), "{system}");
}

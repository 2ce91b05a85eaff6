//! W3C trace context: a prompt's `_meta.traceparent` (and `tracestate`)
//! goes with every model request of its turn as the headers of the same
//! names, in each wire format, and is named in the log; anything that is
//! not a valid version-00 value is never sent, least of all a value that
//! tries to smuggle in a header of its own.

use crate::support::fake_openai::{chat_text, chunk_finish, chunk_role, chunk_tool_call, done};
use crate::support::prelude::WAIT;
use crate::support::wire::{anthropic_answer, responses_answer};
use crate::support::{temp_dir, write_file, Agent, FakeServer, Reply};
use serde_json::{json, Value};
use std::path::Path;

const TRACEPARENT: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
const TRACE_ID: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const TRACESTATE: &str = "rojo=00f067aa0ba902b7,congo=t61rcWkgMzE";

/// `spindle acp` with the config naming the fake server as `kind`, every
/// tool allowed, logging at `log`, initialised, with a session open.
fn start(server: &FakeServer, kind: &str, log: &str) -> (Agent, String) {
    let dir = temp_dir("trace-config");
    let base_url = match kind {
        "anthropic" => format!("http://{}", server.address()),
        _ => server.base_url(),
    };
    let config = json!({
        "providers": {"fake": {"kind": kind, "base_url": base_url, "api_key_env": "FAKE_KEY"}},
        "models": {"fake/model": {"context_window": 64000, "max_output_tokens": 4000}},
    });
    let path = write_file(&dir, "config.json", config.to_string());
    let path = path.to_str().expect("UTF-8 path");
    let mut agent = Agent::spawn(
        &["acp", "--config", path, "--permissions", "yolo"],
        &[("FAKE_KEY", "sk-fake"), ("RUST_LOG", log)],
    );
    agent.initialize();
    let workspace = temp_dir("trace-ws");
    let session = agent.new_session(Path::new(&workspace));
    (agent, session)
}

/// Prompts with `meta` as the request's `_meta` (none when `Null`) and
/// waits for the answer, which must be a stop reason.
fn prompt(agent: &mut Agent, session: &str, meta: Value) {
    let mut params = json!({"sessionId": session, "prompt": [{"type": "text", "text": "hi"}]});
    if !meta.is_null() {
        params["_meta"] = meta;
    }
    let id = agent.request("session/prompt", params);
    let (response, others) = agent.response(&id, WAIT);
    assert!(
        response["result"]["stopReason"].is_string(),
        "{response}\n{others:#?}"
    );
}

/// A Chat Completions reply calling `list_directory`.
fn list_call() -> Reply {
    Reply::Sse(vec![
        chunk_role(),
        chunk_tool_call(
            0,
            Some("call_1"),
            Some("list_directory"),
            "{\"path\":\".\"}",
        ),
        chunk_finish("tool_calls"),
        done(),
    ])
}

#[test]
fn a_prompts_trace_context_goes_with_every_model_request_of_its_turn() {
    let server = FakeServer::start();
    server.push(list_call());
    server.push(Reply::Sse(chat_text(&["Listed."])));
    server.push(Reply::Sse(chat_text(&["Untraced."])));
    let (mut agent, session) = start(&server, "openai", "info");
    prompt(
        &mut agent,
        &session,
        json!({"traceparent": TRACEPARENT, "tracestate": TRACESTATE}),
    );
    // The next prompt carries none: the context belongs to its turn.
    prompt(&mut agent, &session, Value::Null);
    let requests = server.wait_requests(3, WAIT);
    assert_eq!(requests.len(), 3);
    // The first request and the tool call's follow-up.
    for request in &requests[..2] {
        assert_eq!(request.header("traceparent"), Some(TRACEPARENT));
        assert_eq!(request.header("tracestate"), Some(TRACESTATE));
    }
    assert_eq!(requests[2].header("traceparent"), None);
    assert_eq!(requests[2].header("tracestate"), None);
    let log = agent.stderr();
    assert!(
        log.lines()
            .any(|line| line.contains(TRACE_ID) && line.contains("INFO")),
        "{log}"
    );
}

#[test]
fn anthropic_and_responses_requests_carry_it_too() {
    for (kind, reply) in [
        ("anthropic", anthropic_answer("Hello.", "end_turn")),
        ("responses", responses_answer("Hello.")),
    ] {
        let server = FakeServer::start();
        server.push(Reply::Sse(reply));
        let (mut agent, session) = start(&server, kind, "warn");
        prompt(&mut agent, &session, json!({"traceparent": TRACEPARENT}));
        let requests = server.wait_requests(1, WAIT);
        assert_eq!(
            requests[0].header("traceparent"),
            Some(TRACEPARENT),
            "{kind}"
        );
        assert_eq!(requests[0].header("tracestate"), None, "{kind}");
    }
}

#[test]
fn an_invalid_trace_context_is_never_sent() {
    let bad = [
        json!("00-4BF92F3577B34DA6A3CE929D0E0E4736-00F067AA0BA902B7-01"),
        json!("00-00000000000000000000000000000000-00f067aa0ba902b7-01"),
        json!("00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01"),
        json!("ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"),
        json!("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7"),
        json!(format!("{TRACEPARENT}\r\nX-Injected: 1")),
        json!(format!("{TRACEPARENT}\nX-Injected: 1")),
        json!(42),
    ];
    let server = FakeServer::start();
    for _ in 0..bad.len() + 1 {
        server.push(Reply::Sse(chat_text(&["Fine."])));
    }
    let (mut agent, session) = start(&server, "openai", "debug");
    for traceparent in &bad {
        prompt(
            &mut agent,
            &session,
            json!({"traceparent": traceparent, "tracestate": TRACESTATE}),
        );
    }
    // A valid traceparent with a tracestate that tries the same: the
    // traceparent goes, the tracestate does not.
    prompt(
        &mut agent,
        &session,
        json!({"traceparent": TRACEPARENT, "tracestate": "rojo=1\r\nX-Injected: 1"}),
    );
    let requests = server.wait_requests(bad.len() + 1, WAIT);
    assert_eq!(requests.len(), bad.len() + 1);
    for (request, traceparent) in requests.iter().zip(&bad) {
        assert_eq!(request.header("traceparent"), None, "{traceparent}");
        assert_eq!(request.header("tracestate"), None, "{traceparent}");
    }
    let last = &requests[bad.len()];
    assert_eq!(last.header("traceparent"), Some(TRACEPARENT));
    assert_eq!(last.header("tracestate"), None);
    for request in &requests {
        assert_eq!(request.header("x-injected"), None);
    }
    // Refused with the reason, and no line break of theirs reached the log
    // (the debug log of incoming messages shows them JSON-escaped).
    let log = agent.stderr();
    assert!(log.contains("traceparent is ignored"), "{log}");
    assert!(
        !log.lines().any(|line| line.starts_with("X-Injected")),
        "{log}"
    );
}

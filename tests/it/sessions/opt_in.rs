//! Vendor notifications only on request (docs/extensions.md, "Conventions"): a client that
//! did not ask for `_spindle/event` in `initialize` sees pure ACP through
//! everything that makes events — a turn with tool calls and usage, an
//! inbox follow-up, a background job whose end starts a turn, a settings
//! change — while its `_spindle/*` methods keep working; a client that
//! asked gets every kind, numbered without gaps.

use super::{ok, text_prompt, Space, WAIT};
use crate::support::fake_openai::done;
use crate::support::fake_openai::{chat_text, chunk_finish, chunk_role, chunk_tool_call};
use crate::support::{Agent, FakeServer, Reply};
use serde_json::{json, Value};
use std::collections::BTreeSet;
use std::thread;
use std::time::{Duration, Instant};

/// The model's side of the scenario, in the order it is asked.
fn replies(server: &FakeServer) {
    // The prompt: a listing and a background job that waits for a line.
    server.push(Reply::Sse(vec![
        chunk_role(),
        chunk_tool_call(0, Some("l1"), Some("list_directory"), "{}"),
        chunk_tool_call(
            1,
            Some("j1"),
            Some("run_command"),
            &json!({"command": "read go; echo job says $go", "background": true}).to_string(),
        ),
        chunk_finish("tool_calls"),
        done(),
    ]));
    server.push(Reply::Sse(chat_text(&["Listed, and the job waits."])));
    // The inbox follow-up, then the job's end.
    server.push(Reply::Sse(chat_text(&["Follow-up done."])));
    server.push(Reply::Sse(chat_text(&["The job ended."])));
}

/// Waits until the session's `epoch`-th turn has ended (status, which
/// every client may ask for).
fn wait_idle(agent: &mut Agent, session: &str, epoch: u64) {
    let deadline = Instant::now() + WAIT;
    loop {
        let status = ok(
            agent,
            "_spindle/session/status",
            json!({"sessionId": session}),
        );
        if status["turn"]["state"] == "idle" && status["turn"]["epoch"] == epoch {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "turn {epoch} never ended: {status}"
        );
        thread::sleep(Duration::from_millis(20));
    }
}

/// Runs the whole scenario in `space`; returns the session.
fn scenario(agent: &mut Agent, space: &Space) -> String {
    std::fs::write(space.ws.join("notes.txt"), "hello\n").unwrap();
    let session = agent.new_session(&space.ws);
    // 1. A prompt with tool calls, one of them a background job.
    let id = agent.request(
        "session/prompt",
        text_prompt(&session, "list, then start it"),
    );
    let (answer, _) = agent.response(&id, WAIT);
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    // 2. An inbox follow-up, started at once on the idle session.
    let item = ok(
        agent,
        "_spindle/session/inbox/enqueue",
        json!({"sessionId": session, "text": "and then this"}),
    );
    assert_eq!(item["disposition"], "started", "{item}");
    wait_idle(agent, &session, 2);
    // 3. A settings change.
    ok(
        agent,
        "session/set_mode",
        json!({"sessionId": session, "modeId": "plan"}),
    );
    // 4. The job ends while the session is idle: a job turn.
    let jobs = ok(agent, "_spindle/jobs", json!({"sessionId": session}));
    let job = jobs["items"][0]["jobId"].clone();
    assert!(job.is_string(), "{jobs}");
    ok(
        agent,
        "_spindle/job/send",
        json!({"sessionId": session, "jobId": job, "text": "yes\n"}),
    );
    wait_idle(agent, &session, 3);
    let job = ok(
        agent,
        "_spindle/job",
        json!({"sessionId": session, "jobId": job}),
    );
    assert_ne!(job["state"], "running", "{job}");
    session
}

fn texts(messages: &[Value]) -> String {
    messages
        .iter()
        .filter(|m| m["params"]["update"]["sessionUpdate"] == "agent_message_chunk")
        .filter_map(|m| m["params"]["update"]["content"]["text"].as_str())
        .collect()
}

#[test]
#[cfg_attr(windows, ignore = "sh command lines")]
fn a_client_that_did_not_opt_in_gets_no_vendor_notification() {
    let space = Space::new("opt-in-none");
    let server = FakeServer::start();
    replies(&server);
    let mut agent = space.openai(&server);
    let session = scenario(&mut agent, &space);
    // Everything happened: both tools ran, all three turns answered.
    let received = agent.received().to_vec();
    let said = texts(&received);
    for text in [
        "Listed, and the job waits.",
        "Follow-up done.",
        "The job ended.",
    ] {
        assert!(said.contains(text), "{text:?} missing from {said:?}");
    }
    assert_eq!(server.requests().len(), 4);
    let vendor: Vec<&Value> = received
        .iter()
        .filter(|m| m["method"].as_str().is_some_and(|m| m.starts_with('_')))
        .collect();
    assert!(vendor.is_empty(), "vendor messages: {vendor:#?}");
    // The methods still answer this client.
    let status = ok(
        &mut agent,
        "_spindle/session/status",
        json!({"sessionId": session}),
    );
    assert_eq!(status["turn"]["epoch"], 3, "{status}");
    let capabilities = ok(&mut agent, "_spindle/capabilities", json!({}));
    assert_eq!(capabilities["notifications"]["event"], "_spindle/event");
}

#[test]
#[cfg_attr(windows, ignore = "sh command lines")]
fn a_client_that_opted_in_gets_every_kind_numbered_without_gaps() {
    let space = Space::new("opt-in-events");
    let server = FakeServer::start();
    replies(&server);
    let mut agent = space.openai_with_events(&server);
    let session = scenario(&mut agent, &space);
    let events: Vec<Value> = agent
        .received()
        .iter()
        .filter(|m| m["method"] == "_spindle/event")
        .map(|m| m["params"].clone())
        .collect();
    assert!(
        events.iter().all(|e| e["sessionId"] == session.as_str()),
        "{events:#?}"
    );
    let seqs: Vec<u64> = events.iter().map(|e| e["seq"].as_u64().unwrap()).collect();
    let expected: Vec<u64> = (1..=seqs.len() as u64).collect();
    assert_eq!(seqs, expected, "{events:#?}");
    let kinds: BTreeSet<&str> = events.iter().map(|e| e["kind"].as_str().unwrap()).collect();
    for kind in ["turn", "inbox", "job", "usage", "settings"] {
        assert!(kinds.contains(kind), "no {kind} event in {events:#?}");
    }
    let sources: Vec<&str> = events
        .iter()
        .filter(|e| e["kind"] == "turn" && e["data"]["state"] == "idle")
        .map(|e| e["data"]["source"].as_str().unwrap())
        .collect();
    assert_eq!(sources, ["prompt", "queue", "job"], "{events:#?}");
    // Nothing else of Spindle's own is sent.
    let other: Vec<&Value> = agent
        .received()
        .iter()
        .filter(|m| {
            m["method"]
                .as_str()
                .is_some_and(|m| m.starts_with('_') && m != "_spindle/event")
        })
        .collect();
    assert!(other.is_empty(), "{other:#?}");
}

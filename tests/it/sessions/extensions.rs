//! Spindle's vendor extensions through the real binary (docs/extensions.md:
//! conventions, turn events, the inbox, status): discovery, turn events
//! in order with the updates, status while a stream stalls, steering during a step and during a pending
//! permission (the steer reaches the next request, the system prompt and
//! tools byte for byte the same, replay shows it), late steers queued,
//! the inbox with automatic dispatch, idempotency, pause on cancel,
//! recovery after kill -9, every error, and cost quotes.

use super::{call, err, load, ok, text_prompt, wait_for, Space, WAIT};
use crate::support::fake_openai::{chat_text, chunk_content, chunk_role, chunk_tool_call};
use crate::support::fake_openai::{chunk_finish, chunk_usage, done};
use crate::support::{Agent, FakeServer, Reply, Step};
use serde_json::{json, Value};
use std::time::{Duration, Instant};

fn text_blocks(text: &str) -> Value {
    json!([{"type": "text", "text": text}])
}

/// A slow text answer: a first chunk, a pause, the rest.
fn slow(first: &str, pause_ms: u64, rest: &str) -> Reply {
    Reply::Sse(vec![
        chunk_role(),
        chunk_content(first),
        Step::Sleep(Duration::from_millis(pause_ms)),
        chunk_content(rest),
        chunk_finish("stop"),
        done(),
    ])
}

/// A tool call to list the workspace, after a pause.
fn slow_tool(pause_ms: u64) -> Reply {
    Reply::Sse(vec![
        chunk_role(),
        chunk_content("Looking."),
        Step::Sleep(Duration::from_millis(pause_ms)),
        chunk_tool_call(0, Some("l1"), Some("list_directory"), "{}"),
        chunk_finish("tool_calls"),
        done(),
    ])
}

fn events_of(messages: &[Value]) -> Vec<Value> {
    messages
        .iter()
        .filter(|m| m["method"] == "_spindle/event")
        .map(|m| m["params"].clone())
        .collect()
}

fn is_turn_event(message: &Value, state: &str) -> bool {
    message["method"] == "_spindle/event"
        && message["params"]["kind"] == "turn"
        && message["params"]["data"]["state"] == state
}

fn last_user_text(body: &Value) -> String {
    body["messages"]
        .as_array()
        .and_then(|m| m.iter().rev().find(|m| m["role"] == "user"))
        .and_then(|m| m["content"].as_str())
        .unwrap_or_default()
        .to_string()
}

fn prefix_of(raw: &str) -> (String, String) {
    // The system prompt is the first message; the tools are last.
    let system_end = raw.find("},{").unwrap_or(0);
    let tools = raw[raw.find("\"tools\":").unwrap_or(raw.len())..].to_string();
    (raw[..system_end].to_string(), tools)
}

#[test]
fn discovery_lists_exactly_what_is_served() {
    let space = Space::new("ext-discovery");
    let mut agent = space.reader_in_process();
    let session = agent.new_session(&space.ws);
    let id = agent.request("initialize", json!({"protocolVersion": 1}));
    let (init, _) = agent.response(&id, WAIT);
    let advertised = &init["result"]["agentCapabilities"]["_meta"]["spindle"];
    assert_eq!(advertised["schemaVersion"], 1);
    assert_eq!(init["result"]["_meta"]["steering"]["supported"], true);
    let methods = advertised["methods"].as_object().unwrap();
    assert_eq!(methods["steer"], "_spindle/session/steer");
    assert_eq!(methods["status"], "_spindle/session/status");
    assert_eq!(advertised["notifications"]["event"], "_spindle/event");
    let same = ok(&mut agent, "_spindle/capabilities", json!({}));
    assert_eq!(same["methods"], advertised["methods"]);
    assert!(same["version"].is_string());
    // Every advertised method answers (not -32601) for an open session.
    for (key, name) in methods {
        let (outcome, _) = call(
            &mut agent,
            name.as_str().unwrap(),
            json!({"sessionId": session}),
        );
        if let Err(error) = outcome {
            assert_ne!(error["code"], -32601, "{key} is advertised but not served");
        }
    }
    // Unprefixed or unknown names are not extensions.
    for name in ["session/steer", "_spindle/session/nope", "_spindle/agents"] {
        let error = err(&mut agent, name, json!({"sessionId": session}));
        assert_eq!(error["code"], -32601, "{name}");
    }
    // Unknown sessions and bad params have their codes.
    let error = err(
        &mut agent,
        "_spindle/session/status",
        json!({"sessionId": "nope"}),
    );
    assert_eq!(error["code"], -32602);
    assert_eq!(error["data"]["code"], "unknown_session");
    let error = err(&mut agent, "_spindle/session/status", json!({}));
    assert!(error["message"].as_str().unwrap().contains("sessionId"));
    let error = err(
        &mut agent,
        "_spindle/session/steer",
        json!({"sessionId": session, "prompt": [{"type": "text", "text": "  "}]}),
    );
    assert_eq!(error["code"], -32602);
    assert!(error["message"].as_str().unwrap().contains("empty"));
    let error = err(
        &mut agent,
        "_spindle/session/inbox/enqueue",
        json!({"sessionId": session, "text": 7}),
    );
    assert_eq!(error["code"], -32602);
}

#[test]
fn events_are_numbered_and_ordered_with_the_updates_and_status_answers_during_a_stall() {
    let space = Space::new("ext-events");
    let server = FakeServer::start();
    server.push(Reply::Sse(vec![
        chunk_role(),
        chunk_content("Thinking"),
        Step::Stall,
    ]));
    let mut agent = space.openai_with_events(&server);
    let session = agent.new_session(&space.ws);
    let prompt = agent.request("session/prompt", text_prompt(&session, "stall please"));
    let mut seen = wait_for(&mut agent, |m| {
        m["params"]["update"]["content"]["text"] == "Thinking"
    });
    // Status answers while the stream stalls, from the dispatcher.
    let started = Instant::now();
    let status = ok(
        &mut agent,
        "_spindle/session/status",
        json!({"sessionId": session}),
    );
    assert!(started.elapsed() < Duration::from_secs(5));
    assert_eq!(status["turn"]["state"], "running");
    assert_eq!(status["turn"]["epoch"], 1);
    assert_eq!(status["turn"]["source"], "prompt");
    assert_eq!(status["health"]["provider"], "ok");
    assert_eq!(status["mode"], "normal");
    assert!(status["usage"]["contextUsed"].is_null(), "unknown is null");
    agent.notify("session/cancel", json!({"sessionId": session}));
    let (answer, more) = agent.response(&prompt, WAIT);
    assert_eq!(answer["result"]["stopReason"], "cancelled");
    seen.extend(more);
    // The running event before the turn's first update; idle after its
    // last, before the answer (which `response` returned last).
    let first_update = seen
        .iter()
        .position(|m| {
            m["method"] == "session/update"
                && m["params"]["update"]["sessionUpdate"] != "available_commands_update"
        })
        .unwrap();
    let running = seen
        .iter()
        .position(|m| is_turn_event(m, "running"))
        .unwrap();
    let idle = seen.iter().position(|m| is_turn_event(m, "idle")).unwrap();
    let last_update = seen
        .iter()
        .rposition(|m| m["method"] == "session/update")
        .unwrap();
    assert!(running < first_update, "{seen:#?}");
    assert!(idle > last_update, "{seen:#?}");
    let idle_event = &seen[idle]["params"];
    assert_eq!(idle_event["data"]["outcome"], "cancelled");
    // Numbered from 1 without gaps.
    let seqs: Vec<u64> = events_of(&seen)
        .iter()
        .map(|e| e["seq"].as_u64().unwrap())
        .collect();
    let expected: Vec<u64> = (1..=seqs.len() as u64).collect();
    assert_eq!(seqs, expected, "{seen:#?}");
    let status = ok(
        &mut agent,
        "_spindle/session/status",
        json!({"sessionId": session}),
    );
    assert_eq!(status["turn"]["state"], "idle");
    assert_eq!(status["turn"]["outcome"], "cancelled");
}

#[test]
fn a_steer_during_a_step_reaches_the_next_request_with_the_prefix_unchanged() {
    let space = Space::new("ext-steer");
    let server = FakeServer::start();
    server.push(slow_tool(800));
    server.push(Reply::Sse(chat_text(&["Using email."])));
    let mut agent = space.openai(&server);
    let session = agent.new_session(&space.ws);
    let prompt = agent.request("session/prompt", text_prompt(&session, "log users in"));
    wait_for(&mut agent, |m| {
        m["params"]["update"]["content"]["text"] == "Looking."
    });
    let steer = ok(
        &mut agent,
        "_spindle/session/steer",
        json!({"sessionId": session, "prompt": text_blocks("use email, not username")}),
    );
    assert_eq!(steer["disposition"], "steer_accepted");
    let (answer, messages) = agent.response(&prompt, WAIT);
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    let requests = server.wait_requests(2, WAIT);
    assert_eq!(last_user_text(&requests[1].body), "use email, not username");
    // The steer comes after the tool result, as a user message.
    let sent = requests[1].body["messages"].as_array().unwrap();
    let last = sent.len() - 1;
    assert_eq!(sent[last - 1]["role"], "tool");
    // System prompt and tools: the same bytes.
    assert_eq!(prefix_of(&requests[0].raw), prefix_of(&requests[1].raw));
    // Live and replay show it as the user's text.
    let shown: Vec<&Value> = messages
        .iter()
        .filter(|m| m["params"]["update"]["sessionUpdate"] == "user_message_chunk")
        .collect();
    assert_eq!(shown.len(), 1);
    assert_eq!(
        shown[0]["params"]["update"]["content"]["text"],
        "use email, not username"
    );
    let mut reader = space.reader();
    let replay = load(&mut reader, &session, space.ws());
    let users: Vec<&str> = replay
        .iter()
        .filter(|u| u["sessionUpdate"] == "user_message_chunk")
        .filter_map(|u| u["content"]["text"].as_str())
        .collect();
    assert_eq!(users, ["log users in", "use email, not username"]);
    // The item is applied.
    let list = ok(
        &mut agent,
        "_spindle/session/inbox/list",
        json!({"sessionId": session}),
    );
    assert_eq!(list["items"], json!([]), "{list}");
    space.db.assert_sound();
}

#[test]
fn a_steer_during_a_permission_request_is_applied_right_after_it() {
    let space = Space::new("ext-steer-permission");
    let server = FakeServer::start();
    server.push(Reply::Sse(vec![
        chunk_role(),
        chunk_tool_call(
            0,
            Some("w1"),
            Some("write_file"),
            r#"{"path":"a.txt","content":"x"}"#,
        ),
        chunk_finish("tool_calls"),
        done(),
    ]));
    server.push(Reply::Sse(chat_text(&["Noted."])));
    let base = server.base_url();
    let db = space.db.arg();
    let mut agent = Agent::spawn(
        &["acp", "--model", "m", "--db", &db, "--permissions", "ask"],
        &[("OPENAI_BASE_URL", &base), ("OPENAI_API_KEY", "k")],
    );
    agent.initialize();
    let session = agent.new_session(&space.ws);
    let prompt = agent.request("session/prompt", text_prompt(&session, "write it"));
    let seen = wait_for(&mut agent, |m| m["method"] == "session/request_permission");
    let asked = seen.last().unwrap().clone();
    let steer = ok(
        &mut agent,
        "_spindle/session/steer",
        json!({"sessionId": session, "prompt": text_blocks("and keep it short")}),
    );
    assert_eq!(steer["disposition"], "steer_accepted");
    agent.send(json!({"jsonrpc": "2.0", "id": asked["id"],
        "result": {"outcome": {"outcome": "selected", "optionId": "allow_once"}}}));
    let (answer, _) = agent.response(&prompt, WAIT);
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    let requests = server.wait_requests(2, WAIT);
    assert_eq!(last_user_text(&requests[1].body), "and keep it short");
}

#[test]
fn a_late_steer_is_the_next_turn_and_follow_ups_run_in_order() {
    let space = Space::new("ext-queue");
    let server = FakeServer::start();
    server.push(slow("Working", 900, " done."));
    server.push(Reply::Sse(chat_text(&["Steer handled."])));
    server.push(Reply::Sse(chat_text(&["First follow-up."])));
    server.push(Reply::Sse(chat_text(&["Second follow-up."])));
    let mut agent = space.openai_with_events(&server);
    let session = agent.new_session(&space.ws);
    let prompt = agent.request("session/prompt", text_prompt(&session, "start"));
    wait_for(&mut agent, |m| {
        m["params"]["update"]["content"]["text"] == "Working"
    });
    let one = ok(
        &mut agent,
        "_spindle/session/inbox/enqueue",
        json!({"sessionId": session, "text": "follow one", "idempotencyKey": "k1"}),
    );
    assert_eq!(one["disposition"], "queued");
    assert_eq!(one["idempotent"], false);
    let again = ok(
        &mut agent,
        "_spindle/session/inbox/enqueue",
        json!({"sessionId": session, "text": "follow one (again)", "idempotencyKey": "k1"}),
    );
    assert_eq!(again["itemId"], one["itemId"]);
    assert_eq!(again["idempotent"], true);
    ok(
        &mut agent,
        "_spindle/session/inbox/enqueue",
        json!({"sessionId": session, "prompt": text_blocks("follow two")}),
    );
    // No boundary is left in a text-only step: the steer waits, first.
    let steer = ok(
        &mut agent,
        "_spindle/session/steer",
        json!({"sessionId": session, "prompt": text_blocks("late steer")}),
    );
    assert_eq!(steer["disposition"], "steer_accepted");
    let list = ok(
        &mut agent,
        "_spindle/session/inbox/list",
        json!({"sessionId": session}),
    );
    let previews: Vec<&str> = list["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["preview"].as_str().unwrap())
        .collect();
    assert_eq!(previews, ["late steer", "follow one", "follow two"]);
    assert!(
        list["items"][0].get("prompt").is_none(),
        "lists carry no bodies"
    );
    let (answer, _) = agent.response(&prompt, WAIT);
    assert_eq!(answer["result"]["stopReason"], "end_turn");
    // Three turns follow by themselves, in order, each ending idle.
    let mut sources = Vec::new();
    while sources.len() < 3 {
        let seen = wait_for(&mut agent, |m| is_turn_event(m, "idle"));
        let idle = &seen.last().unwrap()["params"]["data"];
        assert_eq!(idle["outcome"], "end_turn");
        sources.push(idle["source"].as_str().unwrap().to_string());
    }
    assert_eq!(sources, ["steer", "queue", "queue"]);
    let requests = server.wait_requests(4, WAIT);
    let asked: Vec<String> = requests[1..]
        .iter()
        .map(|r| last_user_text(&r.body))
        .collect();
    assert_eq!(asked, ["late steer", "follow one", "follow two"]);
    let list = ok(
        &mut agent,
        "_spindle/session/inbox/list",
        json!({"sessionId": session}),
    );
    assert_eq!(list["items"], json!([]));
}

#[test]
fn cancel_pauses_the_inbox_and_explicit_input_resumes_it() {
    let space = Space::new("ext-pause");
    let server = FakeServer::start();
    server.push(Reply::Sse(vec![
        chunk_role(),
        chunk_content("Busy"),
        Step::Stall,
    ]));
    server.push(Reply::Sse(chat_text(&["Queued one ran."])));
    let mut agent = space.openai_with_events(&server);
    let session = agent.new_session(&space.ws);
    let prompt = agent.request("session/prompt", text_prompt(&session, "go"));
    wait_for(&mut agent, |m| {
        m["params"]["update"]["content"]["text"] == "Busy"
    });
    let item = ok(
        &mut agent,
        "_spindle/session/inbox/enqueue",
        json!({"sessionId": session, "text": "after"}),
    );
    agent.notify("session/cancel", json!({"sessionId": session}));
    let (answer, _) = agent.response(&prompt, WAIT);
    assert_eq!(answer["result"]["stopReason"], "cancelled");
    let status = ok(
        &mut agent,
        "_spindle/session/status",
        json!({"sessionId": session}),
    );
    assert_eq!(status["inbox"]["paused"], true);
    assert_eq!(status["inbox"]["pending"], 1);
    // Waiting to see nothing happen: a turn the paused inbox wrongly
    // started would reach the model on its own thread, with no answer to
    // wait for; the status above is the last thing the agent must answer.
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(server.requests().len(), 1, "nothing ran while paused");
    // The item can still change while it waits.
    let updated = ok(
        &mut agent,
        "_spindle/session/inbox/update",
        json!({"sessionId": session, "itemId": item["itemId"], "text": "after, edited"}),
    );
    assert_eq!(updated["item"]["prompt"][0]["text"], "after, edited");
    let got = ok(
        &mut agent,
        "_spindle/session/inbox/get",
        json!({"sessionId": session, "itemId": item["itemId"]}),
    );
    assert_eq!(got["item"]["state"], "pending");
    let resumed = ok(
        &mut agent,
        "_spindle/session/inbox/setPaused",
        json!({"sessionId": session, "paused": false}),
    );
    assert_eq!(resumed["paused"], false);
    wait_for(&mut agent, |m| is_turn_event(m, "idle"));
    let requests = server.wait_requests(2, WAIT);
    assert_eq!(last_user_text(&requests[1].body), "after, edited");
    // Applied items no longer change.
    let error = err(
        &mut agent,
        "_spindle/session/inbox/delete",
        json!({"sessionId": session, "itemId": item["itemId"]}),
    );
    assert_eq!(error["code"], -32600);
    assert_eq!(error["data"]["code"], "not_pending");
}

#[test]
fn inbox_errors_and_reordering() {
    let space = Space::new("ext-inbox-errors");
    let server = FakeServer::start();
    server.push(Reply::Sse(vec![
        chunk_role(),
        chunk_content("Hold"),
        Step::Stall,
    ]));
    let mut agent = space.openai(&server);
    let session = agent.new_session(&space.ws);
    let prompt = agent.request("session/prompt", text_prompt(&session, "hold"));
    wait_for(&mut agent, |m| {
        m["params"]["update"]["content"]["text"] == "Hold"
    });
    let mut ids = Vec::new();
    for n in 0..3 {
        let item = ok(
            &mut agent,
            "_spindle/session/inbox/enqueue",
            json!({"sessionId": session, "text": format!("item {n}")}),
        );
        ids.push(item["itemId"].clone());
    }
    let moved = ok(
        &mut agent,
        "_spindle/session/inbox/move",
        json!({"sessionId": session, "itemId": ids[2], "toIndex": 0}),
    );
    assert_eq!(moved["position"], 0);
    let list = ok(
        &mut agent,
        "_spindle/session/inbox/list",
        json!({"sessionId": session}),
    );
    let order: Vec<&Value> = list["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| &i["itemId"])
        .collect();
    assert_eq!(order, [&ids[2], &ids[0], &ids[1]]);
    let error = err(
        &mut agent,
        "_spindle/session/inbox/move",
        json!({"sessionId": session, "itemId": ids[0], "toIndex": 3}),
    );
    assert_eq!(
        (error["code"].clone(), error["data"]["code"].clone()),
        (json!(-32602), json!("out_of_range"))
    );
    let error = err(
        &mut agent,
        "_spindle/session/inbox/get",
        json!({"sessionId": session, "itemId": "item_nope"}),
    );
    assert_eq!(error["code"], -32602);
    let huge = "x".repeat(300_000);
    let error = err(
        &mut agent,
        "_spindle/session/inbox/enqueue",
        json!({"sessionId": session, "text": huge}),
    );
    assert_eq!(error["data"]["code"], "too_large");
    let error = err(
        &mut agent,
        "_spindle/session/inbox/enqueue",
        json!({"sessionId": session, "text": "x", "intent": "later"}),
    );
    assert_eq!(error["code"], -32602);
    for n in 3..64 {
        ok(
            &mut agent,
            "_spindle/session/inbox/enqueue",
            json!({"sessionId": session, "text": format!("item {n}")}),
        );
    }
    let error = err(
        &mut agent,
        "_spindle/session/inbox/enqueue",
        json!({"sessionId": session, "text": "one too many"}),
    );
    assert_eq!(
        (error["code"].clone(), error["data"]["code"].clone()),
        (json!(-32600), json!("inbox_full"))
    );
    let deleted = ok(
        &mut agent,
        "_spindle/session/inbox/delete",
        json!({"sessionId": session, "itemId": ids[1]}),
    );
    assert_eq!(deleted["state"], "deleted");
    let error = err(
        &mut agent,
        "_spindle/session/inbox/retry",
        json!({"sessionId": session, "itemId": ids[0]}),
    );
    assert_eq!(error["data"]["code"], "not_retryable");
    // Pause first, so nothing runs when the turn ends.
    ok(
        &mut agent,
        "_spindle/session/inbox/setPaused",
        json!({"sessionId": session, "paused": true}),
    );
    agent.notify("session/cancel", json!({"sessionId": session}));
    agent.response(&prompt, WAIT);
    // The cross-agent convention: idle with promptRequired consumes nothing.
    let outcome = ok(
        &mut agent,
        "_session/steering",
        json!({"sessionId": session, "prompt": text_blocks("hi"),
               "_meta": {"steering": {"idleBehavior": "promptRequired"}}}),
    );
    assert_eq!(
        outcome,
        json!({"outcome": "promptRequired", "reason": "noRunningTurn"})
    );
    let error = err(
        &mut agent,
        "_session/steering",
        json!({"sessionId": session, "prompt": text_blocks("hi"),
               "_meta": {"steering": {"idleBehavior": "whenever"}}}),
    );
    assert_eq!(error["code"], -32602);
}

#[test]
fn a_dispatched_item_is_uncertain_after_kill_9_and_the_inbox_comes_back_paused() {
    let space = Space::processes("ext-recover");
    let server = FakeServer::start();
    server.push(Reply::Sse(chat_text(&["First."])));
    server.push(Reply::Sse(vec![
        chunk_role(),
        chunk_content("Queued work"),
        Step::Stall,
    ]));
    let mut agent = space.openai_with_events(&server);
    let session = agent.new_session(&space.ws);
    // Idle: the item starts at once.
    let item = ok(
        &mut agent,
        "_spindle/session/inbox/enqueue",
        json!({"sessionId": session, "text": "queued while idle"}),
    );
    assert_eq!(item["disposition"], "started");
    wait_for(&mut agent, |m| is_turn_event(m, "idle"));
    ok(
        &mut agent,
        "_spindle/session/inbox/enqueue",
        json!({"sessionId": session, "text": "the one cut off"}),
    );
    wait_for(&mut agent, |m| {
        m["params"]["update"]["content"]["text"] == "Queued work"
    });
    agent.kill();
    space.db.assert_sound();

    let mut agent = space.openai(&server);
    load(&mut agent, &session, space.ws());
    let list = ok(
        &mut agent,
        "_spindle/session/inbox/list",
        json!({"sessionId": session}),
    );
    assert_eq!(list["paused"], true);
    assert_eq!(list["recovered"], true);
    assert_eq!(list["items"][0]["state"], "uncertain", "{list}");
    let id = list["items"][0]["itemId"].clone();
    // Nothing runs by itself; retry puts it back.
    let retried = ok(
        &mut agent,
        "_spindle/session/inbox/retry",
        json!({"sessionId": session, "itemId": id}),
    );
    assert_eq!(retried["state"], "pending");
    assert_eq!(server.requests().len(), 2);
}

#[test]
fn cost_quotes_are_complete_only_with_prices() {
    let space = Space::new("ext-cost");
    let server = FakeServer::start();
    server.push(Reply::Sse(chat_text(&["Priced."])));
    let config = space.base.join("config.json");
    std::fs::write(
        &config,
        json!({
            "providers": {"fake": {"kind": "openai", "base_url": server.base_url(), "api_key_env": "K"}},
            "models": {"fake/priced": {"context_window": 100000, "price": {"input": 1.0, "output": 2.0}}},
            "defaults": {"model": "fake/priced"},
        })
        .to_string(),
    )
    .unwrap();
    let db = space.db.arg();
    let mut agent = Agent::spawn(
        &["acp", "--config", config.to_str().unwrap(), "--db", &db],
        &[("K", "k")],
    );
    agent.initialize();
    let session = agent.new_session(&space.ws);
    super::prompt_ok(&mut agent, &session, "hi");
    let status = ok(
        &mut agent,
        "_spindle/session/status",
        json!({"sessionId": session}),
    );
    let quote = &status["usage"]["costQuote"];
    assert_eq!(quote["costComplete"], true, "{quote}");
    assert_eq!(quote["currency"], "USD");
    assert_eq!(quote["displayStatus"], "exact");
    assert_eq!(status["usage"]["cost"]["currency"], "USD");

    // Without a price: no silent 0.
    server.push(Reply::Sse(chat_text(&["Free?"])));
    let mut agent = space.openai(&server);
    let session = agent.new_session(&space.ws);
    super::prompt_ok(&mut agent, &session, "hi");
    let status = ok(
        &mut agent,
        "_spindle/session/status",
        json!({"sessionId": session}),
    );
    assert!(status["usage"]["cost"].is_null());
    assert_eq!(status["usage"]["costQuote"]["costComplete"], false);
    assert_eq!(status["usage"]["costQuote"]["displayStatus"], "unknown");
}

#[test]
fn the_steering_convention_injects_or_starts_a_turn_and_health_follows_failures() {
    let space = Space::new("ext-steering");
    let server = FakeServer::start();
    server.push(slow_tool(700));
    server.push(Reply::Sse(chat_text(&["Injected."])));
    server.push(Reply::Sse(chat_text(&["Started."])));
    server.push(Reply::openai_error(
        400,
        "the model is gone",
        "invalid_request_error",
        "gone",
    ));
    let mut agent = space.openai_with_events(&server);
    let session = agent.new_session(&space.ws);
    let prompt = agent.request("session/prompt", text_prompt(&session, "one"));
    wait_for(&mut agent, |m| {
        m["params"]["update"]["content"]["text"] == "Looking."
    });
    let outcome = ok(
        &mut agent,
        "_session/steering",
        json!({"sessionId": session, "prompt": text_blocks("steered")}),
    );
    assert_eq!(outcome["outcome"], "injected");
    agent.response(&prompt, WAIT);
    assert_eq!(
        last_user_text(&server.wait_requests(2, WAIT)[1].body),
        "steered"
    );
    // Idle: a new turn, source steer.
    let outcome = ok(
        &mut agent,
        "_session/steering",
        json!({"sessionId": session, "prompt": text_blocks("start one")}),
    );
    assert_eq!(outcome["outcome"], "startedNewTurn");
    let seen = wait_for(&mut agent, |m| is_turn_event(m, "idle"));
    assert_eq!(seen.last().unwrap()["params"]["data"]["source"], "steer");
    // A failing provider shows in health.
    let id = agent.request("session/prompt", text_prompt(&session, "fail"));
    let (answer, _) = agent.response(&id, WAIT);
    assert!(answer.get("error").is_some(), "{answer}");
    let status = ok(
        &mut agent,
        "_spindle/session/status",
        json!({"sessionId": session}),
    );
    assert_eq!(status["health"]["provider"], "failing");
    assert!(status["health"]["error"]
        .as_str()
        .unwrap()
        .contains("the model is gone"));
    assert_eq!(status["turn"]["outcome"], "error");
    assert_eq!(status["turn"]["epoch"], 3);
}

fn write_config(space: &Space, server: &FakeServer, models: Value) -> std::path::PathBuf {
    let config = space.base.join("config.json");
    std::fs::write(
        &config,
        json!({
            "providers": {"fake": {"kind": "openai", "base_url": server.base_url(), "api_key_env": "K"}},
            "models": models,
            "defaults": {"model": "fake/one"},
        })
        .to_string(),
    )
    .unwrap();
    config
}

#[test]
fn catalogs_invoke_and_reload() {
    let space = Space::new("ext-catalogs");
    let server = FakeServer::start();
    let config = write_config(
        &space,
        &server,
        json!({"fake/one": {"context_window": 50000}}),
    );
    let db = space.db.arg();
    let mut agent = Agent::spawn(
        &["acp", "--config", config.to_str().unwrap(), "--db", &db],
        &[("K", "k")],
    );
    agent.initialize_with_events();
    let session = agent.new_session(&space.ws);
    let settings = ok(
        &mut agent,
        "_spindle/settings",
        json!({"sessionId": session}),
    );
    let names: Vec<&str> = settings["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        ["mode", "model", "effort", "agent_preset", "tool_approval"]
    );
    let row = ok(
        &mut agent,
        "_spindle/setting/set",
        json!({"sessionId": session, "name": "agent_preset", "value": "light"}),
    );
    assert_eq!(row["value"], "light");
    assert!(row["values"]
        .as_array()
        .unwrap()
        .contains(&json!("delivery")));
    let error = err(
        &mut agent,
        "_spindle/setting/set",
        json!({"sessionId": session, "name": "agent_preset", "value": "turbo"}),
    );
    assert_eq!(error["code"], -32602);
    let models = ok(&mut agent, "_spindle/models", json!({"sessionId": session}));
    assert_eq!(models["items"][0]["id"], "fake/one");
    assert_eq!(models["items"][0]["contextWindow"], 50000);
    let operations = ok(
        &mut agent,
        "_spindle/operations",
        json!({"sessionId": session}),
    );
    let admission = |name: &str| {
        operations["items"]
            .as_array()
            .unwrap()
            .iter()
            .find(|o| o["name"] == name)
            .map(|o| o["admission"].clone())
            .unwrap_or_else(|| panic!("no {name}"))
    };
    assert_eq!(admission("cost"), "now");
    assert_eq!(admission("init"), "idle_only");
    // A local operation answers at once.
    let cost = ok(
        &mut agent,
        "_spindle/invoke",
        json!({"sessionId": session, "operation": "cost", "arguments": {}}),
    );
    assert_eq!(cost["delivery"], "immediate");
    assert!(cost["text"].as_str().unwrap().contains("Tokens so far"));
    // One that needs the model runs as a turn of its own.
    server.push(Reply::Sse(chat_text(&["AGENTS.md written."])));
    let init = ok(
        &mut agent,
        "_spindle/invoke",
        json!({"sessionId": session, "operation": "init", "arguments": {"text": "keep it short"}}),
    );
    assert_eq!(init["delivery"], "scheduled");
    let seen = wait_for(&mut agent, |m| is_turn_event(m, "idle"));
    assert_eq!(seen.last().unwrap()["params"]["data"]["source"], "invoke");
    assert!(last_user_text(&server.requests()[0].body).contains("keep it short"));
    let error = err(
        &mut agent,
        "_spindle/invoke",
        json!({"sessionId": session, "operation": "nope"}),
    );
    assert_eq!(error["data"]["code"], "unknown_operation");

    // Reload: a new model appears; a broken file keeps the old runtime.
    write_config(
        &space,
        &server,
        json!({"fake/one": {"context_window": 50000}, "fake/two": {}}),
    );
    let reloaded = ok(
        &mut agent,
        "_spindle/session/reload",
        json!({"sessionId": session}),
    );
    assert_eq!(reloaded["reloaded"], true);
    let models = ok(&mut agent, "_spindle/models", json!({"sessionId": session}));
    assert_eq!(models["items"].as_array().unwrap().len(), 2);
    std::fs::write(&config, "{ \"providers\": ").unwrap();
    let error = err(
        &mut agent,
        "_spindle/session/reload",
        json!({"sessionId": session}),
    );
    assert_eq!(error["code"], -32603);
    assert_eq!(error["data"]["code"], "reload_failed");
    assert!(
        error["message"].as_str().unwrap().contains("config.json"),
        "{error}"
    );
    let models = ok(&mut agent, "_spindle/models", json!({"sessionId": session}));
    assert_eq!(
        models["items"].as_array().unwrap().len(),
        2,
        "the old runtime stays"
    );
    // While a turn runs, one reload waits for it.
    write_config(&space, &server, json!({"fake/one": {}}));
    server.push(slow("Busy", 500, " done."));
    let prompt = agent.request("session/prompt", text_prompt(&session, "wait"));
    wait_for(&mut agent, |m| {
        m["params"]["update"]["content"]["text"] == "Busy"
    });
    let queued = ok(
        &mut agent,
        "_spindle/session/reload",
        json!({"sessionId": session}),
    );
    assert_eq!(queued["queued"], true);
    agent.response(&prompt, WAIT);
    let models = ok(&mut agent, "_spindle/models", json!({"sessionId": session}));
    assert_eq!(
        models["items"].as_array().unwrap().len(),
        1,
        "reloaded after the turn"
    );
}

/// Whether `messages` hold an `available_commands_update` of `session`
/// naming `name`.
fn announces_command(messages: &[Value], session: &str, name: &str) -> bool {
    messages.iter().any(|m| {
        m["params"]["sessionId"] == session
            && m["params"]["update"]["sessionUpdate"] == "available_commands_update"
            && m["params"]["update"]["availableCommands"]
                .as_array()
                .is_some_and(|list| list.iter().any(|c| c["name"] == name))
    })
}

/// Every reload tells the editor the commands at once, without waiting
/// for some later request's answer: `/reload` before its prompt's answer,
/// a reload queued behind a turn when that turn ends; the other open
/// sessions hear theirs too.
#[test]
fn every_reload_sends_the_commands_at_once() {
    let space = Space::new("ext-reload-commands");
    let server = FakeServer::start();
    let config = write_config(&space, &server, json!({"fake/one": {}}));
    let db = space.db.arg();
    let mut agent = Agent::spawn(
        &["acp", "--config", config.to_str().unwrap(), "--db", &db],
        &[("K", "k")],
    );
    agent.initialize();
    let session = agent.new_session(&space.ws);
    let other = agent.new_session(&space.ws);
    let commands = space.ws.join(".spindle").join("commands");
    std::fs::create_dir_all(&commands).unwrap();
    std::fs::write(commands.join("deploy.md"), "Deploy the site.\n").unwrap();
    let id = agent.request("session/prompt", text_prompt(&session, "/reload"));
    let (answer, seen) = agent.response(&id, WAIT);
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    assert!(announces_command(&seen, &session, "deploy"), "{seen:#?}");
    assert!(announces_command(&seen, &other, "deploy"), "{seen:#?}");

    std::fs::write(commands.join("review.md"), "Review the diff.\n").unwrap();
    server.push(slow("Busy", 500, " done."));
    let prompt = agent.request("session/prompt", text_prompt(&session, "wait"));
    wait_for(&mut agent, |m| {
        m["params"]["update"]["content"]["text"] == "Busy"
    });
    let queued = ok(
        &mut agent,
        "_spindle/session/reload",
        json!({"sessionId": session}),
    );
    assert_eq!(queued["queued"], true);
    let (answer, seen) = agent.response(&prompt, WAIT);
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    assert!(announces_command(&seen, &session, "review"), "{seen:#?}");
}

/// The text of the `resource` an item's link was frozen into.
fn frozen_text(agent: &mut Agent, session: &str, item: &Value) -> Value {
    let got = ok(
        agent,
        "_spindle/session/inbox/get",
        json!({"sessionId": session, "itemId": item["itemId"]}),
    );
    let block = &got["item"]["prompt"][1];
    assert_eq!(block["type"], "resource", "{got}");
    block["resource"]["text"].clone()
}

/// A queued item's resource links are frozen into it when it is
/// enqueued: the item holds the file's text then, a later change of the
/// file does not reach it (nor the model), and `refresh` reads it anew.
#[test]
fn queued_items_hold_their_links_frozen_at_enqueue() {
    let space = Space::new("ext-freeze");
    let server = FakeServer::start();
    let notes = space.ws.join("notes.txt");
    std::fs::write(&notes, "version one\n").unwrap();
    server.push(slow("Busy", 500, " done."));
    server.push(Reply::Sse(chat_text(&["Read the first."])));
    server.push(slow("Busy again", 500, " done."));
    server.push(Reply::Sse(chat_text(&["Read the second."])));
    let mut agent = space.openai_with_events(&server);
    let session = agent.new_session(&space.ws);
    let enqueue = |agent: &mut Agent, text: &str| {
        ok(
            agent,
            "_spindle/session/inbox/enqueue",
            json!({"sessionId": session, "prompt": [
                {"type": "text", "text": text},
                {"type": "resource_link", "uri": format!("{}#L1", spindle::os::paths::to_file_uri(notes.to_str().unwrap(), spindle::os::paths::NATIVE)),
                 "name": "notes.txt"},
            ]}),
        )
    };
    let prompt = agent.request("session/prompt", text_prompt(&session, "wait"));
    wait_for(&mut agent, |m| {
        m["params"]["update"]["content"]["text"] == "Busy"
    });
    let first = enqueue(&mut agent, "read the notes");
    assert_eq!(first["disposition"], "queued", "{first}");
    assert_eq!(frozen_text(&mut agent, &session, &first), "version one\n");
    std::fs::write(&notes, "version two\n").unwrap();
    assert_eq!(frozen_text(&mut agent, &session, &first), "version one\n");
    agent.response(&prompt, WAIT);
    wait_for(&mut agent, |m| is_turn_event(m, "idle"));
    let requests = server.wait_requests(2, WAIT);
    let sent = last_user_text(&requests[1].body);
    assert!(
        sent.contains("version one") && !sent.contains("version two"),
        "{sent}"
    );
    // Held in a paused inbox, an item keeps its text until refreshed.
    let prompt = agent.request("session/prompt", text_prompt(&session, "wait more"));
    wait_for(&mut agent, |m| {
        m["params"]["update"]["content"]["text"] == "Busy again"
    });
    let second = enqueue(&mut agent, "read them again");
    ok(
        &mut agent,
        "_spindle/session/inbox/setPaused",
        json!({"sessionId": session, "paused": true}),
    );
    agent.response(&prompt, WAIT);
    assert_eq!(frozen_text(&mut agent, &session, &second), "version two\n");
    std::fs::write(&notes, "version three\n").unwrap();
    assert_eq!(frozen_text(&mut agent, &session, &second), "version two\n");
    let refreshed = ok(
        &mut agent,
        "_spindle/session/inbox/refresh",
        json!({"sessionId": session, "itemId": second["itemId"]}),
    );
    assert_eq!(
        refreshed["item"]["prompt"][1]["resource"]["text"],
        "version three\n"
    );
    ok(
        &mut agent,
        "_spindle/session/inbox/setPaused",
        json!({"sessionId": session, "paused": false}),
    );
    wait_for(&mut agent, |m| is_turn_event(m, "idle"));
    let requests = server.wait_requests(4, WAIT);
    assert!(last_user_text(&requests[3].body).contains("version three"));
}

/// Status (and `/cost`) shows the usage of the running turn's model calls
/// as each one reports it, not only once the turn has ended (and never
/// twice after).
#[test]
fn status_shows_the_running_turns_usage() {
    let space = Space::new("ext-live-usage");
    let server = FakeServer::start();
    server.push(Reply::Sse(vec![
        chunk_role(),
        chunk_tool_call(0, Some("l1"), Some("list_directory"), "{}"),
        chunk_finish("tool_calls"),
        chunk_usage(1200, 80),
        done(),
    ]));
    server.push(Reply::Sse(vec![
        chunk_role(),
        chunk_content("Thinking"),
        Step::Sleep(Duration::from_millis(500)),
        chunk_content(" done."),
        chunk_finish("stop"),
        chunk_usage(1300, 20),
        done(),
    ]));
    let mut agent = space.openai(&server);
    let session = agent.new_session(&space.ws);
    let tokens = |agent: &mut Agent| {
        let status = ok(
            agent,
            "_spindle/session/status",
            json!({"sessionId": session}),
        );
        (
            status["usage"]["inputTokens"].clone(),
            status["usage"]["outputTokens"].clone(),
        )
    };
    let prompt = agent.request("session/prompt", text_prompt(&session, "look"));
    wait_for(&mut agent, |m| {
        m["params"]["update"]["content"]["text"] == "Thinking"
    });
    assert_eq!(tokens(&mut agent), (json!(1200), json!(80)), "mid-turn");
    let cost = ok(
        &mut agent,
        "_spindle/invoke",
        json!({"sessionId": session, "operation": "cost", "arguments": {}}),
    );
    assert!(
        cost["text"]
            .as_str()
            .unwrap()
            .contains("Tokens so far: 1200 input"),
        "{cost}"
    );
    let (answer, _) = agent.response(&prompt, WAIT);
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    assert_eq!(tokens(&mut agent), (json!(2500), json!(100)), "after");
}

//! Prompt turns against the fake OpenAI-compatible server: streaming,
//! conversation, cancellation, EOF, and provider failures.

use crate::support::fake_openai::{
    chat_text, chunk_content, chunk_error, chunk_finish, chunk_reasoning, chunk_role, chunk_usage,
    done,
};
use crate::support::prelude::WAIT;
use crate::support::{
    in_process, temp_dir, updates_text, write_file, Agent, FakeServer, Reply, Step,
};
use serde_json::{json, Value};
use std::time::{Duration, Instant};

/// `spindle acp --model test-model EXTRA…` against `server`, named as
/// `OPENAI_BASE_URL` would name it (`in_process::openai_config`), in
/// process, initialized.
fn start(server: &FakeServer, extra_args: &[&str]) -> Agent {
    let mut agent = openai_agent(&server.base_url(), "sk-test-key", extra_args);
    agent.initialize();
    agent
}

/// An in-process agent whose model `test-model` is at `base`, with `key`.
fn openai_agent(base: &str, key: &str, extra_args: &[&str]) -> Agent {
    let config = in_process::openai_config(&temp_dir("streaming"), base, key);
    let mut args = vec![
        "--model",
        "test-model",
        "--config",
        config.to_str().unwrap(),
    ];
    args.extend_from_slice(extra_args);
    in_process::acp(&args)
}

fn prompt(agent: &mut Agent, session: &str, text: &str) -> Value {
    agent.request(
        "session/prompt",
        json!({"sessionId": session, "prompt": [{"type": "text", "text": text}]}),
    )
}

fn updates_of<'a>(messages: &'a [Value], session: &str) -> Vec<&'a Value> {
    messages
        .iter()
        .filter(|m| m["method"] == "session/update" && m["params"]["sessionId"] == session)
        .collect()
}

#[test]
fn streams_text_and_thoughts_and_sends_the_conversation() {
    let server = FakeServer::start();
    server.push(Reply::Sse(vec![
        chunk_role(),
        chunk_reasoning("Thinking "),
        chunk_reasoning("hard."),
        chunk_content("Hello"),
        chunk_content(", world"),
        chunk_finish("stop"),
        done(),
    ]));
    server.push(Reply::Sse(chat_text(&["Second ", "answer"])));
    let dir = temp_dir("stream");
    write_file(&dir, "AGENTS.md", "Use tabs, never spaces.");
    let mut agent = start(&server, &[]);
    let session = agent.new_session(&dir);

    let id = prompt(&mut agent, &session, "Say hello");
    let (response, updates) = agent.response(&id, WAIT);
    assert_eq!(response["result"]["stopReason"], "end_turn");
    assert_eq!(
        updates_text(&updates, "agent_thought_chunk"),
        "Thinking hard."
    );
    assert_eq!(
        updates_text(&updates, "agent_message_chunk"),
        "Hello, world"
    );
    // One message id for all chunks of the answer.
    let ids: std::collections::HashSet<&Value> = updates
        .iter()
        .filter(|m| m["params"]["update"]["sessionUpdate"] == "agent_message_chunk")
        .map(|m| &m["params"]["update"]["messageId"])
        .collect();
    assert_eq!(ids.len(), 1);

    let first = &server.wait_requests(1, WAIT)[0];
    assert_eq!(first.path, "/v1/chat/completions");
    assert_eq!(first.header("authorization"), Some("Bearer sk-test-key"));
    assert_eq!(first.body["model"], "test-model");
    assert_eq!(first.body["stream"], true);
    assert_eq!(first.body["stream_options"]["include_usage"], true);
    let system = first.body["messages"][0]["content"].as_str().unwrap();
    assert_eq!(first.body["messages"][0]["role"], "system");
    assert!(system.contains(dir.to_str().unwrap()), "{system}");
    assert!(system.contains("Use tabs, never spaces."), "{system}");
    assert_eq!(
        first.body["messages"][1],
        json!({"role": "user", "content": "Say hello"})
    );

    let id = prompt(&mut agent, &session, "Again");
    let (response, updates) = agent.response(&id, WAIT);
    assert_eq!(response["result"]["stopReason"], "end_turn");
    assert_eq!(
        updates_text(&updates, "agent_message_chunk"),
        "Second answer"
    );
    let second = &server.wait_requests(2, WAIT)[1];
    let messages = second.body["messages"].as_array().unwrap();
    assert_eq!(messages.len(), 4, "{messages:?}");
    assert_eq!(
        messages[2],
        json!({"role": "assistant", "content": "Hello, world"})
    );
    assert_eq!(messages[3], json!({"role": "user", "content": "Again"}));
}

#[test]
fn finish_reasons_map_to_stop_reasons() {
    let server = FakeServer::start();
    for reason in ["length", "content_filter"] {
        server.push(Reply::Sse(vec![
            chunk_content("cut"),
            chunk_finish(reason),
            done(),
        ]));
    }
    let mut agent = start(&server, &[]);
    let session = agent.new_session(&temp_dir("finish"));
    for expected in ["max_tokens", "refusal"] {
        let id = prompt(&mut agent, &session, "go");
        let (response, _) = agent.response(&id, WAIT);
        assert_eq!(response["result"]["stopReason"], expected);
    }
}

/// Sends a prompt against a reply and returns the JSON-RPC error object.
fn failing_prompt(reply: Option<Reply>, base_url: Option<&str>, args: &[&str]) -> Value {
    let server = FakeServer::start();
    if let Some(reply) = reply {
        server.push(reply);
    }
    let base = base_url.map_or_else(|| server.base_url(), str::to_string);
    // Retries have their own tests; here each failure must surface as is.
    let mut all_args = vec!["--retries", "0"];
    all_args.extend_from_slice(args);
    let mut agent = openai_agent(&base, "sk-test", &all_args);
    agent.initialize();
    let session = agent.new_session(&temp_dir("fail"));
    let id = prompt(&mut agent, &session, "hello");
    let (response, _) = agent.response(&id, WAIT);
    assert!(response.get("result").is_none(), "{response}");
    // The agent is still alive and answers.
    let id = agent.request("session/new", json!({"cwd": "relative", "mcpServers": []}));
    let (alive, _) = agent.response(&id, WAIT);
    assert_eq!(alive["error"]["code"], -32602);
    response["error"].clone()
}

#[test]
fn http_errors_carry_the_providers_message_and_a_stable_code() {
    let error = failing_prompt(
        Some(Reply::openai_error(
            401,
            "Incorrect API key provided",
            "invalid_request_error",
            "invalid_api_key",
        )),
        None,
        &[],
    );
    // ACP's "authentication required", so the editor can offer to log in.
    assert_eq!(error["code"], -32000);
    let message = error["message"].as_str().unwrap();
    assert!(message.contains("Incorrect API key provided"), "{error}");
    assert!(message.contains("spindle setup"), "{error}");
    assert!(!message.contains("Internal error"), "{error}");
    assert_eq!(error["data"]["code"], "provider_http_401");

    let error = failing_prompt(
        Some(Reply::openai_error(
            429,
            "Rate limit reached for requests",
            "requests",
            "rate_limit_exceeded",
        )),
        None,
        &[],
    );
    assert_eq!(error["data"]["code"], "provider_http_429");
    assert!(error["message"]
        .as_str()
        .unwrap()
        .contains("Rate limit reached"));

    let error = failing_prompt(
        Some(Reply::Status {
            code: 502,
            body: "<html>Bad gateway</html>".into(),
            headers: vec![("Content-Type".into(), "text/html".into())],
        }),
        None,
        &[],
    );
    assert_eq!(error["data"]["code"], "provider_http_502");
    assert!(error["message"].as_str().unwrap().contains("Bad gateway"));
}

#[test]
fn unreachable_provider_is_reported() {
    // A port that was just free: nothing listens there.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let base = format!("http://127.0.0.1:{port}/v1");
    let error = failing_prompt(None, Some(&base), &[]);
    assert_eq!(error["code"], -32603);
    assert_eq!(error["data"]["code"], "provider_unreachable");
    assert!(
        error["message"].as_str().unwrap().contains(&base),
        "{error}"
    );
}

#[test]
fn broken_streams_are_errors_not_answers() {
    let error = failing_prompt(
        Some(Reply::Sse(vec![
            chunk_role(),
            chunk_content("partial"),
            Step::Cut,
        ])),
        None,
        &[],
    );
    assert_eq!(error["data"]["code"], "provider_stream_broken");

    let error = failing_prompt(
        Some(Reply::Sse(vec![
            chunk_content("partial"),
            chunk_error("The server had an error", "server_error"),
        ])),
        None,
        &[],
    );
    assert_eq!(error["data"]["code"], "provider_stream_error");
    assert!(error["message"]
        .as_str()
        .unwrap()
        .contains("The server had an error"));

    let error = failing_prompt(
        Some(Reply::Sse(vec![chunk_content("partial"), Step::Stall])),
        None,
        &["--stall-timeout", "0.5"],
    );
    assert_eq!(error["data"]["code"], "provider_stalled");

    let error = failing_prompt(
        Some(Reply::Sse(vec![Step::Event("{not json".into())])),
        None,
        &[],
    );
    assert_eq!(error["data"]["code"], "provider_bad_response");
}

#[test]
fn cancel_during_a_stalled_stream_answers_cancelled_and_drops_the_connection() {
    let server = FakeServer::start();
    server.push(Reply::Sse(vec![
        chunk_role(),
        chunk_content("Partial "),
        chunk_content("answer"),
        Step::Stall,
    ]));
    server.push(Reply::Sse(chat_text(&["Fine."])));
    let mut agent = start(&server, &[]);
    let session = agent.new_session(&temp_dir("cancel"));
    let id = prompt(&mut agent, &session, "Write a long essay");

    // Wait until the partial answer has streamed.
    let mut seen = Vec::new();
    let deadline = Instant::now() + WAIT;
    while updates_text(&seen, "agent_message_chunk") != "Partial answer" {
        assert!(Instant::now() < deadline, "no partial answer: {seen:?}");
        if let Some(message) = agent.recv(Duration::from_millis(200)) {
            seen.push(message);
        }
    }
    let cancelled_at = Instant::now();
    agent.notify("session/cancel", json!({"sessionId": session}));
    let (response, _) = agent.response(&id, WAIT);
    let elapsed = cancelled_at.elapsed();
    assert_eq!(response["result"]["stopReason"], "cancelled");
    eprintln!("cancel answered after {elapsed:?}");
    assert!(
        server.wait_disconnect(WAIT),
        "the server never saw the client go away"
    );
    // Nothing of that turn after its answer.
    while let Some(late) = agent.recv(Duration::from_millis(300)) {
        assert_ne!(
            late["method"], "session/update",
            "update after the answer: {late}"
        );
    }

    // The session still works and the model sees the partial answer.
    let id = prompt(&mut agent, &session, "Shorter please");
    let (response, updates) = agent.response(&id, WAIT);
    assert_eq!(response["result"]["stopReason"], "end_turn");
    assert_eq!(updates_text(&updates, "agent_message_chunk"), "Fine.");
    let second = &server.wait_requests(2, WAIT)[1];
    let messages = second.body["messages"].as_array().unwrap();
    assert_eq!(
        messages[2],
        json!({"role": "assistant", "content": "Partial answer"})
    );
    assert_eq!(messages[3]["content"], "Shorter please");
}

#[test]
fn cancel_before_the_provider_answers_and_by_request_id() {
    let server = FakeServer::start();
    // Headers never come: the server stalls before answering at all is
    // modelled by a stall as the first step.
    server.push(Reply::Sse(vec![Step::Stall]));
    let mut agent = start(&server, &[]);
    let session = agent.new_session(&temp_dir("cancel-early"));
    let id = prompt(&mut agent, &session, "hello");
    server.wait_requests(1, WAIT);
    agent.notify("$/cancel_request", json!({"requestId": id}));
    let (response, updates) = agent.response(&id, WAIT);
    assert_eq!(response["result"]["stopReason"], "cancelled");
    // Only the session's title; nothing of the cancelled answer.
    let kinds: Vec<&Value> = updates_of(&updates, &session)
        .iter()
        .map(|m| &m["params"]["update"]["sessionUpdate"])
        .filter(|kind| *kind != "available_commands_update")
        .collect();
    assert_eq!(kinds, [&json!("session_info_update")], "{updates:?}");
    assert!(server.wait_disconnect(WAIT));
}

#[test]
fn a_second_prompt_while_one_runs_is_refused() {
    let server = FakeServer::start();
    server.push(Reply::Sse(vec![chunk_content("slow"), Step::Stall]));
    let mut agent = start(&server, &[]);
    let session = agent.new_session(&temp_dir("busy"));
    let first = prompt(&mut agent, &session, "one");
    server.wait_requests(1, WAIT);
    let second = prompt(&mut agent, &session, "two");
    let (response, _) = agent.response(&second, WAIT);
    assert_eq!(response["error"]["code"], -32600);
    assert!(response["error"]["message"]
        .as_str()
        .unwrap()
        .contains("already running"));
    agent.notify("session/cancel", json!({"sessionId": session}));
    let (response, _) = agent.response(&first, WAIT);
    assert_eq!(response["result"]["stopReason"], "cancelled");
}

#[test]
fn two_sessions_stream_at_the_same_time() {
    let server = FakeServer::start();
    let slow = |word: &str| {
        let mut steps = vec![chunk_role()];
        for index in 0..5 {
            steps.push(chunk_content(&format!("{word}{index} ")));
            steps.push(Step::Sleep(Duration::from_millis(60)));
        }
        steps.extend([chunk_finish("stop"), done()]);
        Reply::Sse(steps)
    };
    server.push(slow("a"));
    server.push(slow("b"));
    let mut agent = start(&server, &[]);
    let one = agent.new_session(&temp_dir("two-a"));
    let two = agent.new_session(&temp_dir("two-b"));
    let first = prompt(&mut agent, &one, "first");
    let second = prompt(&mut agent, &two, "second");
    // Both model calls are in flight before either turn is answered.
    server.wait_requests(2, WAIT);
    let mut updates = Vec::new();
    let deadline = Instant::now() + WAIT;
    let mut answered = 0;
    while answered < 2 {
        assert!(
            Instant::now() < deadline,
            "prompts not answered: {updates:?}"
        );
        let Some(message) = agent.recv(Duration::from_millis(200)) else {
            continue;
        };
        if message.get("method").is_none() {
            assert!(message["id"] == first || message["id"] == second);
            assert_eq!(message["result"]["stopReason"], "end_turn");
            answered += 1;
        } else {
            updates.push(message);
        }
    }
    let text_of = |session: &str| {
        let mine: Vec<Value> = updates_of(&updates, session).into_iter().cloned().collect();
        updates_text(&mine, "agent_message_chunk")
    };
    let (a, b) = (text_of(&one), text_of(&two));
    // Which reply each session got depends on request order; each got one
    // whole reply.
    let mut texts = [a, b];
    texts.sort();
    assert_eq!(texts, ["a0 a1 a2 a3 a4 ", "b0 b1 b2 b3 b4 "]);
}

fn stalled_agent(extra: &[&str]) -> (FakeServer, Agent, Value) {
    let server = FakeServer::start();
    server.push(Reply::Sse(vec![chunk_content("waiting"), Step::Stall]));
    let mut agent = start(&server, extra);
    let session = agent.new_session(&temp_dir("eof"));
    let id = prompt(&mut agent, &session, "hello");
    server.wait_requests(1, WAIT);
    (server, agent, id)
}

#[test]
fn eof_mid_turn_cancels_and_exits_zero() {
    let (server, mut agent, id) = stalled_agent(&[]);
    let closed_at = Instant::now();
    agent.close_stdin();
    let status = agent.wait_exit(WAIT).expect("the agent did not exit");
    eprintln!("exited {:?} after stdin closed", closed_at.elapsed());
    assert!(status.success(), "{status:?}");
    let answer = agent
        .received()
        .iter()
        .find(|m| m.get("id") == Some(&id) && m.get("method").is_none())
        .cloned()
        .expect("the running prompt was not answered");
    assert_eq!(answer["result"]["stopReason"], "cancelled");
    assert!(server.wait_disconnect(WAIT));
}

#[test]
fn eof_with_drain_lets_the_turn_finish() {
    let server = FakeServer::start();
    let mut steps = vec![chunk_role()];
    for word in ["still ", "going ", "strong"] {
        steps.push(Step::Sleep(Duration::from_millis(150)));
        steps.push(chunk_content(word));
    }
    steps.extend([chunk_finish("stop"), done()]);
    server.push(Reply::Sse(steps));
    let mut agent = start(&server, &["--drain"]);
    let session = agent.new_session(&temp_dir("drain"));
    let id = prompt(&mut agent, &session, "hello");
    server.wait_requests(1, WAIT);
    agent.close_stdin();
    let status = agent.wait_exit(WAIT).expect("the agent did not exit");
    assert!(status.success(), "{status:?}");
    let received = agent.received().to_vec();
    let answer = received
        .iter()
        .find(|m| m.get("id") == Some(&id) && m.get("method").is_none())
        .expect("the running prompt was not answered");
    assert_eq!(answer["result"]["stopReason"], "end_turn");
    assert_eq!(
        updates_text(&received, "agent_message_chunk"),
        "still going strong"
    );
}

#[test]
fn logs_never_reach_stdout() {
    // Debug logging prints every line in and out — to stderr. The harness
    // fails the test if any stdout line is not a valid ACP message.
    let server = FakeServer::start();
    server.push(Reply::Sse(chat_text(&["Hi"])));
    server.serve_models(json!({"data": [{"id": "listed-model"}]}));
    let base = server.base_url();
    let mut agent = Agent::spawn(
        &["acp"],
        &[
            ("OPENAI_BASE_URL", &base),
            ("OPENAI_API_KEY", "sk-trace-secret"),
            ("RUST_LOG", "trace"),
        ],
    );
    agent.initialize();
    let session = agent.new_session(&temp_dir("logs"));
    let id = prompt(&mut agent, &session, "hello");
    let (response, _) = agent.response(&id, WAIT);
    assert_eq!(response["result"]["stopReason"], "end_turn");
    agent.close_stdin();
    assert!(agent.wait_exit(WAIT).unwrap().success());
    let stderr = agent.stderr();
    assert!(stderr.contains("session/prompt"), "no debug log on stderr");
    assert!(
        !stderr.contains("sk-trace-secret"),
        "a key leaked into the log"
    );
}

/// With `RUST_LOG` unset, a model call leaves stderr quiet: the HTTP and
/// TLS libraries log only when `RUST_LOG` names them.
#[test]
fn library_debug_logging_stays_off_without_rust_log() {
    let server = FakeServer::start();
    server.push(Reply::Sse(chat_text(&["Quiet ", "answer"])));
    let dir = temp_dir("quiet-log");
    // A process of its own, whose stderr is its log, given the variables.
    let base = server.base_url();
    let mut agent = Agent::spawn(
        &["acp", "--model", "test-model"],
        &[
            ("OPENAI_BASE_URL", &base),
            ("OPENAI_API_KEY", "sk-test-key"),
        ],
    );
    agent.initialize();
    let session = agent.new_session(&dir);
    let id = prompt(&mut agent, &session, "hello");
    let (response, _) = agent.response(&id, WAIT);
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    agent.close_stdin();
    agent.wait_exit(WAIT);
    let stderr = agent.stderr();
    assert!(
        !stderr.contains("DEBUG") && !stderr.contains("ureq"),
        "stderr: {stderr}"
    );
}

/// A hostile model server: a line with no end is refused at its cap, and
/// keep-alive comments alone do not hold a stream open past its stall
/// timeout.
#[test]
fn endless_lines_and_keep_alives_alone_end_the_stream() {
    let endless = format!("data: {}", "x".repeat(17 * 1024 * 1024));
    let error = failing_prompt(
        Some(Reply::Sse(vec![
            chunk_content("partial"),
            Step::Raw(endless),
        ])),
        None,
        &[],
    );
    assert_eq!(
        error["data"]["code"], "provider_stream_too_large",
        "{error}"
    );

    // Ten seconds of comments every 100 ms, with a one-second stall limit.
    let mut pings = vec![chunk_content("partial")];
    for _ in 0..100 {
        pings.push(Step::Raw(": keep-alive\n\n".into()));
        pings.push(Step::Sleep(Duration::from_millis(100)));
    }
    let started = Instant::now();
    let error = failing_prompt(Some(Reply::Sse(pings)), None, &["--stall-timeout", "1"]);
    assert_eq!(error["data"]["code"], "provider_stalled", "{error}");
    // Not a timing target: only that it did not wait for all the pings.
    assert!(
        started.elapsed() < Duration::from_secs(9),
        "{:?}",
        started.elapsed()
    );
}

/// The stream limits can be set in the config file.
#[test]
fn stream_limits_come_from_the_config() {
    let server = FakeServer::start();
    server.push(Reply::Sse(vec![
        chunk_content("partial"),
        Step::Raw(format!("data: {}\n\n", "y".repeat(5000))),
    ]));
    let dir = temp_dir("stream-limits");
    let config = dir.join("config.json");
    std::fs::write(
        &config,
        json!({
            "providers": {"local": {"kind": "openai", "base_url": server.base_url(), "requires_key": false}},
            "limits": {"sse_line_bytes": 1000}
        })
        .to_string(),
    )
    .unwrap();
    let mut agent = in_process::acp(&[
        "--retries",
        "0",
        "--config",
        config.to_str().unwrap(),
        "--model",
        "local/test-model",
    ]);
    agent.initialize();
    let session = agent.new_session(&dir);
    let id = prompt(&mut agent, &session, "hello");
    let (response, _) = agent.response(&id, WAIT);
    assert_eq!(
        response["error"]["data"]["code"], "provider_stream_too_large",
        "{response}"
    );
}

/// An empty answer is not a silent end: a short notice is shown.
#[test]
fn an_empty_answer_is_shown_as_a_notice() {
    let server = FakeServer::start();
    server.push(Reply::Sse(vec![chunk_role(), chunk_finish("stop"), done()]));
    let dir = temp_dir("empty-answer");
    let mut agent = start(&server, &[]);
    let session = agent.new_session(&dir);
    let id = prompt(&mut agent, &session, "hello");
    let (response, messages) = agent.response(&id, WAIT);
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    let text = updates_text(&messages, "agent_message_chunk");
    assert!(text.contains("empty answer"), "{messages:#?}");
    // The server said nothing of usage: the counts are unknown, not zero.
    let usage = &response["result"]["_meta"]["spindle"]["usage"];
    assert!(usage.is_object(), "{response}");
    for key in ["inputTokens", "outputTokens", "totalTokens"] {
        assert!(usage[key].is_null(), "{key} in {usage}");
    }

    // An empty answer with usage reports it, in the answer and as an
    // update.
    server.push(Reply::Sse(vec![
        chunk_role(),
        chunk_finish("stop"),
        chunk_usage(42, 0),
        done(),
    ]));
    let id = prompt(&mut agent, &session, "again");
    let (response, messages) = agent.response(&id, WAIT);
    assert!(updates_text(&messages, "agent_message_chunk").contains("empty answer"));
    assert_eq!(
        response["result"]["_meta"]["spindle"]["usage"]["inputTokens"],
        42
    );
    assert!(messages
        .iter()
        .any(|m| m["params"]["update"]["sessionUpdate"] == "usage_update"
            && m["params"]["update"]["used"] == 42));
}

/// An error body framed as SSE, or an HTML error page, gives a clean
/// message, not raw framing or markup.
#[test]
fn error_bodies_are_shown_cleanly_whatever_their_framing() {
    let error = failing_prompt(
        Some(Reply::status(
            400,
            "data: {\"error\": {\"message\": \"Unknown model\"}}\n\ndata: [DONE]\n\n",
        )),
        None,
        &[],
    );
    let message = error["message"].as_str().unwrap();
    assert!(message.contains("Unknown model"), "{error}");
    assert!(
        !message.contains("data:") && !message.contains("[DONE]"),
        "{error}"
    );

    let error = failing_prompt(
        Some(Reply::status(
            502,
            "<html><body><h1>502 Bad Gateway</h1><p>upstream gone</p></body></html>",
        )),
        None,
        &[],
    );
    let message = error["message"].as_str().unwrap();
    assert!(message.contains("502 Bad Gateway upstream gone"), "{error}");
    assert!(!message.contains('<'), "{error}");
}

/// A local server on a CPU reads a long prompt for minutes before its
/// first token, sending keep-alives: they count as progress until then
/// (up to ten stall times), never after.
#[test]
fn keep_alives_before_the_first_token_count_as_progress_for_a_while() {
    let server = FakeServer::start();
    // 2.5 s of keep-alives, then the answer, with a one-second stall limit.
    let mut steps = Vec::new();
    for _ in 0..10 {
        steps.push(Step::Raw(": keep-alive\n\n".into()));
        steps.push(Step::Sleep(Duration::from_millis(250)));
    }
    steps.extend(chat_text(&["Read it all."]));
    server.push(Reply::Sse(steps));
    let mut agent = start(&server, &["--retries", "0", "--stall-timeout", "1"]);
    let session = agent.new_session(&temp_dir("keepalive-first"));
    let id = prompt(&mut agent, &session, "a long prompt");
    let (response, messages) = agent.response(&id, WAIT);
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    assert_eq!(
        updates_text(&messages, "agent_message_chunk"),
        "Read it all."
    );

    // Keep-alives alone, for ever: given up after ten stall times.
    let mut pings = Vec::new();
    for _ in 0..200 {
        pings.push(Step::Raw(": keep-alive\n\n".into()));
        pings.push(Step::Sleep(Duration::from_millis(100)));
    }
    let started = Instant::now();
    let error = failing_prompt(Some(Reply::Sse(pings)), None, &["--stall-timeout", "0.3"]);
    assert_eq!(error["data"]["code"], "provider_stalled", "{error}");
    // Not a timing target: only that it did not wait for all 20 s of pings.
    assert!(
        started.elapsed() < Duration::from_secs(15),
        "{:?}",
        started.elapsed()
    );
}

//! Providers against the fake server: one conversation per wire format
//! (Chat Completions, Anthropic Messages, Responses) with reasoning, text,
//! a tool call answered in the next request, usage and stop reasons;
//! retries before the first streamed event; the config file and the
//! environment; authentication; and `spindle setup`.

use crate::support::fake_openai::{
    chat_text, chunk, chunk_content, chunk_finish, chunk_reasoning, chunk_role, chunk_tool_call,
    done,
};
use crate::support::prelude::{self, WAIT};
use crate::support::wire::{
    anthropic_answer, anthropic_end, anthropic_error_body, anthropic_ping, anthropic_start,
    anthropic_stream_error, anthropic_text, anthropic_thinking, anthropic_tool_use, chat_usage,
    named_event, responses_answer, responses_completed, responses_created, responses_function_call,
    responses_incomplete, responses_message, responses_reasoning, responses_usage,
};
use crate::support::{
    in_process, notices_text, temp_dir, updates_text, write_file, Agent, FakeServer, Reply, Step,
};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};
use std::time::{Duration, Instant};

mod defaults;

// ---------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------

/// Writes `config` as `dir/config.json` and returns its path.
fn write_config(dir: &Path, config: &Value) -> PathBuf {
    let text = serde_json::to_string_pretty(config).expect("a Value always serialises");
    write_file(dir, "config.json", text)
}

fn path_str(path: &Path) -> &str {
    path.to_str().expect("test paths are UTF-8")
}

/// `spindle acp --config CONFIG ARGS…`, initialized: in process
/// (`support::in_process`), or a process of its own when `env` sets
/// variables for it.
fn agent_with_config(config: &Path, args: &[&str], env: &[(&str, &str)]) -> Agent {
    let mut all = vec!["--config", path_str(config)];
    all.extend_from_slice(args);
    let mut agent = match env.is_empty() {
        true => in_process::acp(&all),
        false => {
            all.insert(0, "acp");
            Agent::spawn(&all, env)
        }
    };
    agent.initialize();
    agent
}

/// `spindle acp --model test-model ARGS…` with the fake server as the
/// OpenAI-compatible provider `OPENAI_BASE_URL` would make (named in a
/// config file: `in_process::openai_config`), in process, initialized.
fn env_agent(server: &FakeServer, args: &[&str]) -> Agent {
    let config = in_process::openai_config(&temp_dir("env-agent"), &server.base_url(), "sk-test");
    let mut all = vec!["--model", "test-model", "--config", path_str(&config)];
    all.extend_from_slice(args);
    let mut agent = in_process::acp(&all);
    agent.initialize();
    agent
}

/// `env_agent` as a process given the real variables `OPENAI_BASE_URL`
/// and `OPENAI_API_KEY`, for a test of the environment itself.
fn spawned_env_agent(server: &FakeServer) -> Agent {
    let base = server.base_url();
    let mut agent = Agent::spawn(
        &["acp", "--model", "test-model"],
        &[("OPENAI_BASE_URL", &base), ("OPENAI_API_KEY", "sk-test")],
    );
    agent.initialize();
    agent
}

/// Sends a text prompt and waits for its answer; returns the answer and
/// everything received meanwhile.
fn prompt(agent: &mut Agent, session: &str, text: &str) -> (Value, Vec<Value>) {
    let id = agent.request(
        "session/prompt",
        json!({"sessionId": session, "prompt": [{"type": "text", "text": text}]}),
    );
    agent.response(&id, WAIT)
}

/// A prompt that must end with a stop reason; returns the answer's result
/// and the messages of the turn.
fn prompt_ok(agent: &mut Agent, session: &str, text: &str) -> (Value, Vec<Value>) {
    let (response, updates) = prompt(agent, session, text);
    match response.get("result") {
        Some(result) => (result.clone(), updates),
        None => panic!("the prompt failed: {response}\nupdates: {updates:#?}"),
    }
}

/// A prompt that must fail; returns the JSON-RPC error and the messages of
/// the turn.
fn prompt_err(agent: &mut Agent, session: &str, text: &str) -> (Value, Vec<Value>) {
    let (response, updates) = prompt(agent, session, text);
    match response.get("error") {
        Some(error) => (error.clone(), updates),
        None => panic!("the prompt should have failed: {response}"),
    }
}

/// Sends a request and returns its result or its error.
fn call(agent: &mut Agent, method: &str, params: Value) -> Result<Value, Value> {
    prelude::call(agent, method, params).0
}

fn new_session(agent: &mut Agent, cwd: &Path) -> Result<Value, Value> {
    call(
        agent,
        "session/new",
        json!({"cwd": path_str(cwd), "mcpServers": []}),
    )
}

/// The `update` objects of the `session/update`s of this kind, in order.
fn updates_of<'a>(messages: &'a [Value], kind: &str) -> Vec<&'a Value> {
    messages
        .iter()
        .filter(|m| m["method"] == "session/update")
        .map(|m| &m["params"]["update"])
        .filter(|u| u["sessionUpdate"] == kind)
        .collect()
}

fn message_of(error: &Value) -> &str {
    error["message"].as_str().unwrap_or_default()
}

/// The values offered by a select config option.
fn option_values(options: &Value, id: &str) -> Vec<String> {
    let option = options
        .as_array()
        .and_then(|all| all.iter().find(|o| o["id"] == id))
        .unwrap_or_else(|| panic!("no config option {id}: {options}"));
    option["options"]
        .as_array()
        .expect("select options")
        .iter()
        .map(|choice| choice["value"].as_str().unwrap_or_default().to_string())
        .collect()
}

fn current_value<'a>(options: &'a Value, id: &str) -> &'a str {
    options
        .as_array()
        .and_then(|all| all.iter().find(|o| o["id"] == id))
        .and_then(|o| o["currentValue"].as_str())
        .unwrap_or_else(|| panic!("no current value for {id}: {options}"))
}

/// A workspace with one file the `list_directory` tool will show.
fn workspace(name: &str) -> PathBuf {
    let dir = temp_dir(name);
    write_file(&dir, "marker-file.txt", "hello");
    dir
}

/// The turn's `tool_call` announcement and its final status.
fn tool_call_outcome(messages: &[Value], call_id: &str) -> (Value, String) {
    let announced = updates_of(messages, "tool_call")
        .into_iter()
        .find(|u| u["toolCallId"] == call_id)
        .unwrap_or_else(|| panic!("no tool_call {call_id}: {messages:#?}"))
        .clone();
    let last = updates_of(messages, "tool_call_update")
        .into_iter()
        .rfind(|u| u["toolCallId"] == call_id && u.get("status").is_some())
        .map(|u| u["status"].as_str().unwrap_or_default().to_string())
        .unwrap_or_default();
    (announced, last)
}

fn assert_usage_meta(result: &Value, expected: Value) {
    let usage = &result["_meta"]["spindle"]["usage"];
    for (key, value) in expected.as_object().expect("an object") {
        assert_eq!(&usage[key], value, "usage {key} in {result}");
    }
}

// ---------------------------------------------------------------------
// One conversation per wire format
// ---------------------------------------------------------------------

#[test]
fn chat_completions_reasoning_text_tool_call_and_usage() {
    let server = FakeServer::start();
    server.push(Reply::Sse(vec![
        chunk_role(),
        chunk_reasoning("Let me "),
        chunk_reasoning("look."),
        chunk_content("Listing."),
        chunk_tool_call(0, Some("call_1"), Some("list_directory"), ""),
        chunk_tool_call(0, None, None, "{\"path\":"),
        chunk_tool_call(0, None, None, "\".\"}"),
        chunk_finish("tool_calls"),
        chat_usage(1000, 50, 200, 20),
        done(),
    ]));
    server.push(Reply::Sse(chat_text(&["Done."])));
    let home = temp_dir("chat-config");
    let config = write_config(
        &home,
        &json!({
            "providers": {"fake": {"kind": "openai", "base_url": server.base_url(),
                                   "api_key_env": "FAKE_CHAT_KEY"}},
            "models": {"fake/chat-model": {"context_window": 64000}},
        }),
    );
    let mut agent = agent_with_config(
        &config,
        &["--permissions", "yolo"],
        &[("FAKE_CHAT_KEY", "sk-chat")],
    );
    let dir = workspace("chat-ws");
    let session = new_session(&mut agent, &dir).unwrap();
    let session = session["sessionId"].as_str().unwrap().to_string();

    let (result, messages) = prompt_ok(&mut agent, &session, "List the files");
    assert_eq!(result["stopReason"], "end_turn");
    assert_eq!(
        updates_text(&messages, "agent_thought_chunk"),
        "Let me look."
    );
    assert_eq!(
        updates_text(&messages, "agent_message_chunk"),
        "Listing.Done."
    );
    let (announced, status) = tool_call_outcome(&messages, "call_1");
    assert_eq!(announced["rawInput"], json!({"path": "."}));
    assert_eq!(status, "completed");

    let requests = server.wait_requests(2, WAIT);
    assert_eq!(requests.len(), 2);
    for request in &requests {
        assert_eq!(request.path, "/v1/chat/completions");
        assert_eq!(request.header("authorization"), Some("Bearer sk-chat"));
        assert_eq!(request.body["model"], "chat-model");
    }
    let first = &requests[0].body;
    let tools: Vec<&str> = first["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            assert_eq!(t["type"], "function");
            t["function"]["name"].as_str().unwrap()
        })
        .collect();
    assert!(tools.contains(&"list_directory"), "{tools:?}");
    assert_eq!(first["tool_choice"], "auto");
    // A model without reasoning configured gets no effort.
    assert!(first.get("reasoning_effort").is_none(), "{first}");

    let messages_sent = requests[1].body["messages"].as_array().unwrap();
    assert_eq!(messages_sent.len(), 4, "{messages_sent:#?}");
    assert_eq!(
        messages_sent[1],
        json!({"role": "user", "content": "List the files"})
    );
    assert_eq!(
        messages_sent[2],
        json!({
            "role": "assistant",
            "content": "Listing.",
            "reasoning_content": "Let me look.",
            "tool_calls": [{"id": "call_1", "type": "function",
                            "function": {"name": "list_directory", "arguments": "{\"path\":\".\"}"}}],
        })
    );
    assert_eq!(messages_sent[3]["role"], "tool");
    assert_eq!(messages_sent[3]["tool_call_id"], "call_1");
    let output = messages_sent[3]["content"].as_str().unwrap();
    assert!(output.contains("marker-file.txt"), "{output}");

    // One usage_update per model call: context used and the window; no
    // cost without a price.
    let usage: Vec<&Value> = updates_of(&messages, "usage_update");
    assert_eq!(usage.len(), 2, "{usage:?}");
    assert_eq!(
        (&usage[0]["used"], &usage[0]["size"]),
        (&json!(1050), &json!(64000))
    );
    assert_eq!(
        (&usage[1]["used"], &usage[1]["size"]),
        (&json!(11), &json!(64000))
    );
    assert!(usage.iter().all(|u| u.get("cost").is_none()), "{usage:?}");
    assert_usage_meta(
        &result,
        json!({"inputTokens": 1010, "outputTokens": 51, "cachedReadTokens": 200,
               "thoughtTokens": 20, "totalTokens": 1061}),
    );
}

/// A Claude model behind an OpenAI-compatible gateway (LiteLLM's shape):
/// reasoning arrives as `reasoning_content` plus signed `thinking_blocks`,
/// and the blocks go back verbatim on the assistant message after the tool
/// call, and on later prompts of the session.
#[test]
fn chat_completions_carries_signed_thinking_blocks_back() {
    let server = FakeServer::start();
    let think = |text: &str, signature: &str| {
        chunk(
            json!({"reasoning_content": text,
                   "thinking_blocks": [{"type": "thinking", "thinking": text, "signature": signature}]}),
            None,
        )
    };
    server.push(Reply::Sse(vec![
        chunk_role(),
        think("Let me ", ""),
        think("look.", ""),
        think("", "EqoBCkgIARAB=="),
        chunk(
            json!({"thinking_blocks": [{"type": "redacted_thinking", "data": "EmwKAhgB=="}]}),
            None,
        ),
        chunk(
            json!({"reasoning_details": [{"type": "reasoning.encrypted", "index": 0, "data": "enc1"}]}),
            None,
        ),
        chunk(
            json!({"reasoning_details": [{"type": "reasoning.encrypted", "index": 0, "data": "enc2"}]}),
            None,
        ),
        chunk_tool_call(0, Some("call_t"), Some("list_directory"), "{}"),
        chunk_finish("tool_calls"),
        done(),
    ]));
    server.push(Reply::Sse(chat_text(&["Listed."])));
    server.push(Reply::Sse(chat_text(&["Again."])));
    let mut agent = env_agent(&server, &["--permissions", "yolo"]);
    let session = agent.new_session(&workspace("thinking-blocks"));
    let (_, messages) = prompt_ok(&mut agent, &session, "List");
    assert_eq!(
        updates_text(&messages, "agent_thought_chunk"),
        "Let me look."
    );
    prompt_ok(&mut agent, &session, "Once more");

    let expected_blocks = json!([
        {"type": "thinking", "thinking": "Let me look.", "signature": "EqoBCkgIARAB=="},
        {"type": "redacted_thinking", "data": "EmwKAhgB=="},
    ]);
    let expected_details = json!([{"type": "reasoning.encrypted", "index": 0, "data": "enc1enc2"}]);
    let requests = server.wait_requests(3, WAIT);
    for request in &requests[1..] {
        let sent = request.body["messages"].as_array().unwrap();
        let assistant = sent
            .iter()
            .find(|m| m["role"] == "assistant" && m.get("tool_calls").is_some())
            .unwrap_or_else(|| panic!("{sent:#?}"));
        assert_eq!(assistant["thinking_blocks"], expected_blocks);
        assert_eq!(assistant["reasoning_details"], expected_details);
        assert_eq!(assistant["reasoning_content"], "Let me look.");
    }
    // The first request had nothing to send back.
    let first = requests[0].body["messages"].as_array().unwrap();
    assert!(first.iter().all(|m| m.get("thinking_blocks").is_none()));
}

/// A gateway's odd shape for the opaque fields is dropped, not taken for a
/// broken chunk; a non-streamed answer carries its blocks too.
#[test]
fn odd_thinking_fields_are_ignored_and_whole_answers_keep_their_blocks() {
    let server = FakeServer::start();
    server.push(Reply::Sse(vec![
        chunk(
            json!({"thinking_blocks": "nonsense", "reasoning_details": 7}),
            None,
        ),
        chunk_content("Fine."),
        chunk_finish("stop"),
        done(),
    ]));
    server.push(Reply::status(
        200,
        json!({"choices": [{"message": {"role": "assistant", "content": null,
                "reasoning_content": "Hm.",
                "thinking_blocks": [{"type": "thinking", "thinking": "Hm.", "signature": "S=="}],
                "tool_calls": [{"id": "w1", "type": "function",
                                "function": {"name": "list_directory", "arguments": "{}"}}]},
                "finish_reason": "tool_calls"}]})
        .to_string(),
    ));
    server.push(Reply::Sse(chat_text(&["Done."])));
    let mut agent = env_agent(&server, &["--permissions", "yolo"]);
    let session = agent.new_session(&workspace("thinking-odd"));
    let (result, messages) = prompt_ok(&mut agent, &session, "one");
    assert_eq!(result["stopReason"], "end_turn");
    assert_eq!(updates_text(&messages, "agent_message_chunk"), "Fine.");
    let (_, messages) = prompt_ok(&mut agent, &session, "two");
    assert_eq!(updates_text(&messages, "agent_thought_chunk"), "Hm.");
    let requests = server.wait_requests(3, WAIT);
    let sent = requests[2].body["messages"].as_array().unwrap();
    let assistant = sent.iter().find(|m| m.get("tool_calls").is_some()).unwrap();
    assert_eq!(
        assistant["thinking_blocks"],
        json!([{"type": "thinking", "thinking": "Hm.", "signature": "S=="}])
    );
}

/// A config with one Anthropic provider on the fake server and a reasoning
/// model.
fn anthropic_config(server: &FakeServer, dir: &Path) -> PathBuf {
    write_config(
        dir,
        &json!({
            "providers": {"claude": {"kind": "anthropic",
                                     "base_url": format!("http://{}", server.address()),
                                     "api_key_env": "FAKE_ANTHROPIC_KEY"}},
            "models": {"claude/claude-fake": {
                "context_window": 200000, "max_output_tokens": 16000,
                "reasoning": true, "efforts": ["low", "medium", "high"]}},
        }),
    )
}

fn anthropic_agent(server: &FakeServer) -> Agent {
    let config = anthropic_config(server, &temp_dir("anthropic-config"));
    agent_with_config(
        &config,
        &["--permissions", "yolo"],
        &[("FAKE_ANTHROPIC_KEY", "sk-ant-fake")],
    )
}

#[test]
fn anthropic_signed_thinking_text_tool_use_and_tool_result() {
    let server = FakeServer::start();
    let mut first = vec![anthropic_start(100, 20), anthropic_ping()];
    first.extend(anthropic_thinking(
        0,
        &["Need the ", "listing."],
        "sig-abc==",
    ));
    first.extend(anthropic_text(1, &["Listing."]));
    first.extend(anthropic_tool_use(
        2,
        "toolu_1",
        "list_directory",
        &["{\"path\":", "\".\"}"],
    ));
    first.extend(anthropic_end("tool_use", 30));
    server.push(Reply::Sse(first));
    server.push(Reply::Sse(anthropic_answer("All done.", "end_turn")));
    let mut agent = anthropic_agent(&server);
    let dir = workspace("anthropic-ws");
    let session = new_session(&mut agent, &dir).unwrap();
    let session = session["sessionId"].as_str().unwrap().to_string();

    let (result, messages) = prompt_ok(&mut agent, &session, "List the files");
    assert_eq!(result["stopReason"], "end_turn");
    assert_eq!(
        updates_text(&messages, "agent_thought_chunk"),
        "Need the listing."
    );
    assert_eq!(
        updates_text(&messages, "agent_message_chunk"),
        "Listing.All done."
    );
    let (announced, status) = tool_call_outcome(&messages, "toolu_1");
    assert_eq!(announced["rawInput"], json!({"path": "."}));
    assert_eq!(status, "completed");

    let requests = server.wait_requests(2, WAIT);
    for request in &requests {
        assert_eq!(request.path, "/v1/messages");
        assert_eq!(request.header("x-api-key"), Some("sk-ant-fake"));
        assert_eq!(request.header("anthropic-version"), Some("2023-06-01"));
        assert_eq!(request.header("authorization"), None);
        assert_eq!(request.body["model"], "claude-fake");
        assert_eq!(request.body["stream"], true);
        assert_eq!(request.body["max_tokens"], 16000);
        // The balanced preset's medium effort as a thinking budget.
        assert_eq!(
            request.body["thinking"],
            json!({"type": "enabled", "budget_tokens": 8192})
        );
        // The system prompt is one text block, a prompt-cache breakpoint.
        let system = &request.body["system"][0];
        assert!(system["text"].as_str().is_some_and(|s| !s.is_empty()));
        assert_eq!(system["cache_control"], json!({"type": "ephemeral"}));
        // Tools, system and at most two conversation points: four.
        assert!(request.raw.matches("\"cache_control\"").count() <= 4);
        let tools = request.body["tools"].as_array().unwrap();
        assert_eq!(
            tools.last().unwrap()["cache_control"],
            json!({"type": "ephemeral"})
        );
    }
    let body = &requests[0].body;
    let tool = body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "list_directory")
        .expect("list_directory offered");
    assert!(tool["input_schema"].is_object(), "{tool}");
    assert_eq!(body["tool_choice"], json!({"type": "auto"}));
    assert_eq!(
        body["messages"],
        json!([{"role": "user", "content": [{"type": "text", "text": "List the files",
                                             "cache_control": {"type": "ephemeral"}}]}])
    );

    let sent = requests[1].body["messages"].as_array().unwrap();
    assert_eq!(sent.len(), 3, "{sent:#?}");
    assert_eq!(sent[0]["role"], "user");
    assert_eq!(
        sent[1],
        json!({"role": "assistant", "content": [
            {"type": "thinking", "thinking": "Need the listing.", "signature": "sig-abc=="},
            {"type": "text", "text": "Listing."},
            {"type": "tool_use", "id": "toolu_1", "name": "list_directory", "input": {"path": "."}},
        ]})
    );
    assert_eq!(sent[2]["role"], "user");
    let result_block = &sent[2]["content"][0];
    assert_eq!(result_block["type"], "tool_result");
    assert_eq!(result_block["tool_use_id"], "toolu_1");
    assert!(
        result_block["content"]
            .as_str()
            .is_some_and(|c| c.contains("marker-file.txt")),
        "{result_block}"
    );

    // Anthropic's input excludes cache reads: 100 + 20 read, 30 out.
    let usage = updates_of(&messages, "usage_update");
    assert_eq!(usage.len(), 2, "{usage:?}");
    assert_eq!(
        (&usage[0]["used"], &usage[0]["size"]),
        (&json!(150), &json!(200000))
    );
    assert_usage_meta(
        &result,
        json!({"inputTokens": 130, "outputTokens": 33, "cachedReadTokens": 20}),
    );
}

#[test]
fn anthropic_stop_reasons_and_a_call_cut_by_max_tokens() {
    let server = FakeServer::start();
    server.push(Reply::Sse(anthropic_answer("Long answ", "max_tokens")));
    server.push(Reply::Sse(anthropic_answer(
        "I can't help with that.",
        "refusal",
    )));
    server.push(Reply::Sse(anthropic_answer(
        "Too big",
        "model_context_window_exceeded",
    )));
    // max_tokens inside a tool_use block: the cut-off call must not run.
    let mut cut = vec![anthropic_start(10, 0)];
    cut.extend(anthropic_text(0, &["Writing."]));
    cut.extend(anthropic_tool_use(
        1,
        "toolu_cut",
        "write_file",
        &["{\"path\":\"cut.txt\",\"con"],
    ));
    cut.extend(anthropic_end("max_tokens", 16000));
    server.push(Reply::Sse(cut));
    let mut agent = anthropic_agent(&server);
    let dir = workspace("anthropic-stops");
    let session = new_session(&mut agent, &dir).unwrap();
    let session = session["sessionId"].as_str().unwrap().to_string();
    for (expected, text) in [
        ("max_tokens", "Long answ"),
        ("refusal", "I can't help with that."),
        ("max_tokens", "Too big"),
    ] {
        let (result, messages) = prompt_ok(&mut agent, &session, "go");
        assert_eq!(result["stopReason"], expected, "{text}");
        assert_eq!(updates_text(&messages, "agent_message_chunk"), text);
    }
    let (result, messages) = prompt_ok(&mut agent, &session, "write it");
    assert_eq!(result["stopReason"], "max_tokens");
    assert!(
        updates_of(&messages, "tool_call").is_empty(),
        "{messages:#?}"
    );
    assert!(!dir.join("cut.txt").exists());
    assert_eq!(server.requests().len(), 4);
}

#[test]
fn anthropic_errors_carry_the_message_and_overloaded_is_retried() {
    let server = FakeServer::start();
    server.push(Reply::status(
        529,
        anthropic_error_body("overloaded_error", "Overloaded"),
    ));
    server.push(Reply::Sse(anthropic_answer("Back.", "end_turn")));
    let too_long = || {
        Reply::status(
            400,
            anthropic_error_body("invalid_request_error", "prompt is too long: 210000 tokens"),
        )
    };
    // Refused as too long: compacted (the summary), tried once more,
    // refused again: the turn fails with what to do.
    server.push(too_long());
    server.push(Reply::Sse(anthropic_answer("Summary of hi.", "end_turn")));
    server.push(too_long());
    let mut agent = anthropic_agent(&server);
    let session = new_session(&mut agent, &workspace("anthropic-errors")).unwrap();
    let session = session["sessionId"].as_str().unwrap().to_string();
    let (result, messages) = prompt_ok(&mut agent, &session, "hi");
    assert_eq!(result["stopReason"], "end_turn");
    assert!(notices_text(&messages).contains("retrying"));
    assert_eq!(updates_text(&messages, "agent_message_chunk"), "Back.");
    let (error, messages) = prompt_err(&mut agent, &session, "again");
    assert_eq!(error["code"], -32603);
    assert_eq!(error["data"]["code"], "context_too_long");
    assert_eq!(error["data"]["providerCode"], "provider_http_400");
    assert!(message_of(&error).contains("prompt is too long"), "{error}");
    assert!(message_of(&error).contains("new session"), "{error}");
    assert!(notices_text(&messages).contains("Context compacted"));
    let requests = server.requests();
    assert_eq!(requests.len(), 5);
    // The retry starts with the summary and keeps the current prompt.
    let retried = requests[4].body["messages"].as_array().unwrap();
    let first = retried[0]["content"][0]["text"].as_str().unwrap();
    assert!(first.contains("Summary of hi."), "{retried:#?}");
    let last = retried.last().unwrap()["content"].as_array().unwrap();
    assert_eq!(last.last().unwrap()["text"], "again");
}

#[test]
fn an_overloaded_error_event_before_any_content_is_retried() {
    // The error arrives after the 200 but before anything was streamed:
    // nothing was shown, and the API says it may pass (WIRE.md §6).
    let server = FakeServer::start();
    server.push(Reply::Sse(vec![anthropic_stream_error(
        "overloaded_error",
        "Overloaded",
    )]));
    server.push(Reply::Sse(anthropic_answer("Recovered.", "end_turn")));
    let mut agent = anthropic_agent(&server);
    let session = new_session(&mut agent, &workspace("anthropic-overloaded")).unwrap();
    let session = session["sessionId"].as_str().unwrap().to_string();
    let (response, messages) = prompt(&mut agent, &session, "hi");
    assert_eq!(
        response["result"]["stopReason"], "end_turn",
        "an overloaded_error before any content must be retried: {response}"
    );
    assert_eq!(updates_text(&messages, "agent_message_chunk"), "Recovered.");
    assert!(notices_text(&messages).contains("retrying"));
    assert_eq!(server.requests().len(), 2);
}

fn responses_agent(server: &FakeServer) -> Agent {
    let config = write_config(
        &temp_dir("responses-config"),
        &json!({
            "providers": {"reasoner": {"kind": "responses", "base_url": server.base_url(),
                                       "api_key_env": "FAKE_RESPONSES_KEY"}},
            "models": {"reasoner/gpt-fake": {
                "context_window": 400000, "max_output_tokens": 8000,
                "reasoning": true, "efforts": ["low", "medium", "high"]}},
        }),
    );
    agent_with_config(
        &config,
        &["--permissions", "yolo"],
        &[("FAKE_RESPONSES_KEY", "sk-resp")],
    )
}

#[test]
fn responses_encrypted_reasoning_function_call_and_output() {
    let server = FakeServer::start();
    let (reasoning_steps, reasoning_item) =
        responses_reasoning(0, "rs_1", &["Thinking ", "it over."], "enc-123");
    let mut first = vec![responses_created()];
    first.extend(reasoning_steps);
    first.extend(responses_message(1, "msg_1", &["Listing."]));
    first.extend(responses_function_call(
        2,
        "fc_1",
        "call_1",
        "list_directory",
        &["{\"path\":", "\".\"}"],
    ));
    first.push(responses_completed(responses_usage(200, 50, 40, 12)));
    server.push(Reply::Sse(first));
    server.push(Reply::Sse(responses_answer("Finished.")));
    let mut agent = responses_agent(&server);
    let dir = workspace("responses-ws");
    let session = new_session(&mut agent, &dir).unwrap();
    let session = session["sessionId"].as_str().unwrap().to_string();

    let (result, messages) = prompt_ok(&mut agent, &session, "List the files");
    assert_eq!(result["stopReason"], "end_turn");
    assert_eq!(
        updates_text(&messages, "agent_thought_chunk"),
        "Thinking it over."
    );
    assert_eq!(
        updates_text(&messages, "agent_message_chunk"),
        "Listing.Finished."
    );
    let (announced, status) = tool_call_outcome(&messages, "call_1");
    assert_eq!(announced["rawInput"], json!({"path": "."}));
    assert_eq!(status, "completed");

    let requests = server.wait_requests(2, WAIT);
    for request in &requests {
        assert_eq!(request.path, "/v1/responses");
        assert_eq!(request.header("authorization"), Some("Bearer sk-resp"));
        let body = &request.body;
        assert_eq!(body["model"], "gpt-fake");
        assert_eq!(body["stream"], true);
        assert_eq!(body["store"], false);
        assert_eq!(body["include"], json!(["reasoning.encrypted_content"]));
        assert_eq!(
            body["reasoning"],
            json!({"effort": "medium", "summary": "auto"})
        );
        assert_eq!(body["max_output_tokens"], 8000);
        assert!(body["instructions"].as_str().is_some_and(|s| !s.is_empty()));
    }
    let body = &requests[0].body;
    let tool = body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "list_directory")
        .expect("list_directory offered, flat");
    assert_eq!(tool["type"], "function");
    assert!(tool.get("function").is_none() && tool["parameters"].is_object());
    assert_eq!(
        body["input"],
        json!([{"type": "message", "role": "user", "content": "List the files"}])
    );

    let input = requests[1].body["input"].as_array().unwrap();
    assert_eq!(input.len(), 5, "{input:#?}");
    assert_eq!(
        input[1], reasoning_item,
        "the reasoning item goes back verbatim"
    );
    assert_eq!(
        input[2],
        json!({"type": "message", "role": "assistant",
               "content": [{"type": "output_text", "text": "Listing."}]})
    );
    assert_eq!(
        input[3],
        json!({"type": "function_call", "call_id": "call_1", "name": "list_directory",
               "arguments": "{\"path\":\".\"}"})
    );
    assert_eq!(input[4]["type"], "function_call_output");
    assert_eq!(input[4]["call_id"], "call_1");
    assert!(input[4]["output"]
        .as_str()
        .is_some_and(|o| o.contains("marker-file.txt")));

    let usage = updates_of(&messages, "usage_update");
    assert_eq!(usage.len(), 2, "{usage:?}");
    assert_eq!(
        (&usage[0]["used"], &usage[0]["size"]),
        (&json!(240), &json!(400000))
    );
    assert_usage_meta(
        &result,
        json!({"inputTokens": 210, "outputTokens": 43, "cachedReadTokens": 50,
               "thoughtTokens": 12, "totalTokens": 253}),
    );
}

#[test]
fn responses_incomplete_answers_map_to_stop_reasons() {
    let server = FakeServer::start();
    for reason in ["max_output_tokens", "content_filter"] {
        let mut steps = vec![responses_created()];
        steps.extend(responses_message(0, "msg_1", &["Cut sho"]));
        steps.push(responses_incomplete(
            reason,
            responses_usage(10, 0, 8000, 0),
        ));
        server.push(Reply::Sse(steps));
    }
    let mut agent = responses_agent(&server);
    let session = new_session(&mut agent, &workspace("responses-stops")).unwrap();
    let session = session["sessionId"].as_str().unwrap().to_string();
    for expected in ["max_tokens", "refusal"] {
        let (result, messages) = prompt_ok(&mut agent, &session, "go");
        assert_eq!(result["stopReason"], expected);
        assert_eq!(updates_text(&messages, "agent_message_chunk"), "Cut sho");
    }
}

/// The reasoning items of a request's input.
fn reasoning_items(body: &Value) -> Vec<&Value> {
    let input = body["input"].as_array().expect("an input array");
    input
        .iter()
        .filter(|item| item["type"] == "reasoning")
        .collect()
}

/// `response.completed` whose `output` is the given JSON text, as written.
fn completed_with_output(output: &str) -> Step {
    Step::Raw(format!(
        "event: response.completed\ndata: {{\"type\":\"response.completed\",\
         \"response\":{{\"id\":\"resp_fake\",\"status\":\"completed\",\"output\":{output},\
         \"usage\":{}}}}}\n\n",
        responses_usage(20, 0, 5, 2)
    ))
}

#[test]
fn responses_signed_reasoning_only_in_completed_goes_back_exactly() {
    let server = FakeServer::start();
    // A bridge to a Claude model: the streamed reasoning item is bare, the
    // signed one comes only in the finished response, in its own key
    // order and spacing.
    let signed = concat!(
        r#"{"type": "reasoning", "id": "rs_1", "summary": [], "#,
        r#""encrypted_content": "EqQBCkYIBxgCKkD+/sig==", "status": "completed"}"#
    );
    let call = r#"{"type":"function_call","id":"fc_1","call_id":"call_1","name":"list_directory","arguments":"{\"path\":\".\"}","status":"completed"}"#;
    let bare = json!({"id": "rs_1", "type": "reasoning", "summary": []});
    let mut first = vec![
        responses_created(),
        named_event(
            json!({"type": "response.output_item.added", "output_index": 0,
                           "item": bare}),
        ),
        named_event(
            json!({"type": "response.reasoning_text.delta", "item_id": "rs_1",
                           "output_index": 0, "delta": "Look first."}),
        ),
        named_event(
            json!({"type": "response.output_item.done", "output_index": 0,
                           "item": bare}),
        ),
    ];
    first.extend(responses_function_call(
        1,
        "fc_1",
        "call_1",
        "list_directory",
        &["{\"path\":\".\"}"],
    ));
    first.push(completed_with_output(&format!("[ {signed}, {call} ]")));
    server.push(Reply::Sse(first));
    server.push(Reply::Sse(responses_answer("Done.")));
    server.push(Reply::Sse(responses_answer("Again.")));
    let mut agent = responses_agent(&server);
    let session = new_session(&mut agent, &workspace("responses-signed")).unwrap();
    let session = session["sessionId"].as_str().unwrap().to_string();
    let (result, messages) = prompt_ok(&mut agent, &session, "List the files");
    assert_eq!(result["stopReason"], "end_turn");
    assert_eq!(
        updates_text(&messages, "agent_thought_chunk"),
        "Look first."
    );
    assert_eq!(tool_call_outcome(&messages, "call_1").1, "completed");
    prompt_ok(&mut agent, &session, "Once more");

    let requests = server.wait_requests(3, WAIT);
    assert!(reasoning_items(&requests[0].body).is_empty());
    // The tool follow-up, and the next turn, carry the signed item once,
    // byte for byte, just before its call.
    for request in &requests[1..] {
        assert_eq!(request.raw.matches(signed).count(), 1, "{}", request.raw);
        assert_eq!(
            request.raw.matches("\"rs_1\"").count(),
            1,
            "{}",
            request.raw
        );
        let input = request.body["input"].as_array().unwrap();
        let at = input.iter().position(|i| i["type"] == "reasoning").unwrap();
        assert_eq!(input[at]["encrypted_content"], "EqQBCkYIBxgCKkD+/sig==");
        assert_eq!(input[at + 1]["type"], "function_call");
        assert_eq!(input[at + 1]["call_id"], "call_1");
    }
}

#[test]
fn responses_reasoning_streamed_and_completed_goes_back_once() {
    let server = FakeServer::start();
    let (reasoning_steps, streamed) =
        responses_reasoning(0, "rs_1", &["Thinking."], "enc-streamed");
    // An item without an id, streamed and then listed again.
    let anonymous = json!({"type": "reasoning", "summary": [], "encrypted_content": "enc-anon"});
    let mut first = vec![responses_created()];
    first.extend(reasoning_steps);
    first.push(named_event(json!({"type": "response.output_item.done",
                                  "output_index": 1, "item": anonymous})));
    first.extend(responses_function_call(
        2,
        "fc_1",
        "call_1",
        "list_directory",
        &["{}"],
    ));
    // The finished response lists both again, keys in another order.
    let output = format!(
        concat!(
            r#"[{{"type":"reasoning","id":"rs_1","encrypted_content":"enc-streamed","summary":{}}}, "#,
            r#"{{"encrypted_content":"enc-anon","type":"reasoning","summary":[]}}, "#,
            r#"{{"type":"function_call","id":"fc_1","call_id":"call_1","name":"list_directory","arguments":"{{}}"}}]"#
        ),
        streamed["summary"]
    );
    first.push(completed_with_output(&output));
    server.push(Reply::Sse(first));
    server.push(Reply::Sse(responses_answer("Done.")));
    let mut agent = responses_agent(&server);
    let session = new_session(&mut agent, &workspace("responses-once")).unwrap();
    let session = session["sessionId"].as_str().unwrap().to_string();
    let (result, _) = prompt_ok(&mut agent, &session, "List the files");
    assert_eq!(result["stopReason"], "end_turn");

    let requests = server.wait_requests(2, WAIT);
    let follow_up = &requests[1];
    assert_eq!(
        reasoning_items(&follow_up.body),
        [&streamed, &anonymous],
        "{}",
        follow_up.raw
    );
    // The streamed copies are the ones sent, as they were written.
    assert_eq!(follow_up.raw.matches(&streamed.to_string()).count(), 1);
    assert_eq!(follow_up.raw.matches(&anonymous.to_string()).count(), 1);
}

// ---------------------------------------------------------------------
// Retries
// ---------------------------------------------------------------------

/// One session on an environment-configured agent.
fn retry_session(server: &FakeServer, args: &[&str]) -> (Agent, String) {
    let mut agent = env_agent(server, args);
    let session = new_session(&mut agent, &temp_dir("retry")).unwrap();
    let session = session["sessionId"].as_str().unwrap().to_string();
    (agent, session)
}

/// The retry status lines: notices, not thoughts of the model.
fn retry_lines(messages: &[Value]) -> usize {
    assert!(
        !updates_text(messages, "agent_thought_chunk").contains("retrying"),
        "a retry line among the thoughts"
    );
    notices_text(messages).matches("retrying").count()
}

/// Gives a wrongly retried request time to show up, then checks the count.
fn assert_request_count(server: &FakeServer, expected: usize) {
    // Waiting to see nothing happen: a retry that should not be would come
    // after a backoff, and no event marks one that was never scheduled.
    std::thread::sleep(Duration::from_millis(1500));
    assert_eq!(
        server.requests().len(),
        expected,
        "{:#?}",
        server
            .requests()
            .iter()
            .map(|r| r.path.clone())
            .collect::<Vec<_>>()
    );
}

#[test]
fn a_429_with_retry_after_is_retried_after_the_delay() {
    let server = FakeServer::start();
    server.push(Reply::Status {
        code: 429,
        body: json!({"error": {"message": "Rate limit reached", "type": "requests",
                               "param": null, "code": "rate_limit_exceeded"}})
        .to_string(),
        headers: vec![("Retry-After".into(), "1".into())],
    });
    server.push(Reply::Sse(chat_text(&["Recovered."])));
    let (mut agent, session) = retry_session(&server, &[]);
    let started = Instant::now();
    let (result, messages) = prompt_ok(&mut agent, &session, "hello");
    let elapsed = started.elapsed();
    assert_eq!(result["stopReason"], "end_turn");
    assert_eq!(updates_text(&messages, "agent_message_chunk"), "Recovered.");
    let notices = notices_text(&messages);
    assert_eq!(retry_lines(&messages), 1, "{notices}");
    assert!(notices.contains("429"), "{notices}");
    assert!(notices.contains("1.0 s"), "{notices}");
    assert!(elapsed >= Duration::from_millis(950), "{elapsed:?}");
    assert_eq!(server.requests().len(), 2);
    // Only the successful call counts.
    assert_usage_meta(&result, json!({"inputTokens": 10, "outputTokens": 1}));
}

#[test]
fn a_500_is_retried_with_backoff_and_retry_after_ms_is_honoured() {
    let server = FakeServer::start();
    server.push(Reply::openai_error(
        500,
        "The server had an error",
        "server_error",
        "server_error",
    ));
    server.push(Reply::Status {
        code: 503,
        body: "upstream unavailable".into(),
        headers: vec![
            ("Content-Type".into(), "text/plain".into()),
            ("retry-after-ms".into(), "200".into()),
        ],
    });
    server.push(Reply::Sse(chat_text(&["Third time lucky."])));
    let (mut agent, session) = retry_session(&server, &[]);
    let (result, messages) = prompt_ok(&mut agent, &session, "hello");
    assert_eq!(result["stopReason"], "end_turn");
    assert_eq!(
        updates_text(&messages, "agent_message_chunk"),
        "Third time lucky."
    );
    let notices = notices_text(&messages);
    assert_eq!(retry_lines(&messages), 2, "{notices}");
    assert!(notices.contains("The server had an error"), "{notices}");
    assert!(notices.contains("retrying in 0.2 s"), "{notices}");
    assert_eq!(server.requests().len(), 3);
}

/// A gateway that forwards its upstream's hint with an `llm_provider-`
/// prefix: the hint is honoured like the plain header.
#[test]
fn a_gateway_prefixed_retry_hint_is_honoured() {
    let server = FakeServer::start();
    server.push(Reply::Status {
        code: 429,
        body: json!({"error": {"message": "upstream rate limit"}}).to_string(),
        headers: vec![("llm_provider-retry-after-ms".into(), "300".into())],
    });
    server.push(Reply::Sse(chat_text(&["After the hint."])));
    let (mut agent, session) = retry_session(&server, &[]);
    let (result, messages) = prompt_ok(&mut agent, &session, "hello");
    assert_eq!(result["stopReason"], "end_turn");
    let notices = notices_text(&messages);
    assert_eq!(retry_lines(&messages), 1, "{notices}");
    assert!(notices.contains("retrying in 0.3 s"), "{notices}");
    assert_eq!(server.requests().len(), 2);
}

#[test]
fn a_stream_that_ends_before_its_first_event_is_retried() {
    let server = FakeServer::start();
    // A 200 whose body ends at once, cleanly.
    server.push(Reply::Sse(vec![]));
    server.push(Reply::Sse(chat_text(&["After an empty stream."])));
    let (mut agent, session) = retry_session(&server, &[]);
    let (result, messages) = prompt_ok(&mut agent, &session, "hello");
    assert_eq!(result["stopReason"], "end_turn");
    assert_eq!(retry_lines(&messages), 1);
    assert_eq!(server.requests().len(), 2);
}

/// A gateway's upstream timeout: a 200, an empty first chunk, then an
/// error event with code 408. Nothing was shown, so it is retried as a
/// 408 would be; an error event after text is not.
#[test]
fn a_408_error_event_after_an_empty_chunk_is_retried() {
    use crate::support::fake_openai::{chunk_content, chunk_role, Step};
    let timeout = r#"{"error":{"message":"Request timed out","type":"timeout","code":408}}"#;
    let server = FakeServer::start();
    server.push(Reply::Sse(vec![chunk_role(), Step::Event(timeout.into())]));
    server.push(Reply::Sse(chat_text(&["After the timeout."])));
    let (mut agent, session) = retry_session(&server, &[]);
    let (result, messages) = prompt_ok(&mut agent, &session, "hello");
    assert_eq!(result["stopReason"], "end_turn");
    assert_eq!(
        updates_text(&messages, "agent_message_chunk"),
        "After the timeout."
    );
    assert_eq!(retry_lines(&messages), 1);
    assert_eq!(server.requests().len(), 2);

    // After visible text the same event ends the turn: nothing is repeated.
    server.push(Reply::Sse(vec![
        chunk_role(),
        chunk_content("Half"),
        Step::Event(timeout.into()),
    ]));
    let id = agent.request(
        "session/prompt",
        json!({"sessionId": session, "prompt": [{"type": "text", "text": "again"}]}),
    );
    let (response, _) = agent.response(&id, WAIT);
    assert!(response.get("error").is_some(), "{response}");
    assert_request_count(&server, 3);
}

/// A gateway that retried upstream already (LiteLLM says so in
/// `x-litellm-attempted-retries`), or one configured `gateway: true`,
/// gets one retry of ours at most: the two kinds of retries multiply.
#[test]
fn a_gateway_that_retried_gets_at_most_one_retry_of_ours() {
    let failed = |headers: Vec<(String, String)>| Reply::Status {
        code: 500,
        body: json!({"error": {"message": "upstream failed", "type": "server_error"}}).to_string(),
        headers,
    };
    let said = vec![
        ("x-litellm-attempted-retries".to_string(), "2".to_string()),
        ("retry-after-ms".to_string(), "10".to_string()),
    ];
    let server = FakeServer::start();
    for _ in 0..4 {
        server.push(failed(said.clone()));
    }
    let (mut agent, session) = retry_session(&server, &[]);
    let (response, _) = prompt(&mut agent, &session, "hello");
    assert!(response.get("error").is_some(), "{response}");
    assert_request_count(&server, 2);

    let server = FakeServer::start();
    for _ in 0..4 {
        server.push(failed(vec![(
            "retry-after-ms".to_string(),
            "10".to_string(),
        )]));
    }
    let dir = temp_dir("gateway-config");
    let config = write_config(
        &dir,
        &json!({"providers": {"gw": {"kind": "openai", "base_url": server.base_url(),
                                     "requires_key": false, "gateway": true}},
                "defaults": {"model": "gw/m"}}),
    );
    let mut agent = agent_with_config(&config, &[], &[]);
    let session = new_session(&mut agent, &dir).unwrap();
    let session = session["sessionId"].as_str().unwrap().to_string();
    let (response, _) = prompt(&mut agent, &session, "hello");
    assert!(response.get("error").is_some(), "{response}");
    assert_request_count(&server, 2);
    // doctor says what the setting does.
    server.serve_models(json!({"data": [{"id": "m"}]}));
    let out = crate::support::spindle_command(&crate::support::temp_dir("home"))
        .args(["doctor", "--config", path_str(&config), "--db"])
        .arg(dir.join("none.db"))
        .output()
        .unwrap();
    let report = text(&out.stdout);
    assert!(
        report.contains("Spindle retries a call once at most"),
        "{report}"
    );
}

#[test]
fn a_connection_cut_before_the_first_event_is_retried() {
    let server = FakeServer::start();
    server.push(Reply::Sse(vec![Step::Cut]));
    server.push(Reply::Sse(chat_text(&["After the cut."])));
    let (mut agent, session) = retry_session(&server, &[]);
    let (response, messages) = prompt(&mut agent, &session, "hello");
    assert_eq!(
        response["result"]["stopReason"], "end_turn",
        "a cut before the first event must be retried: {response}"
    );
    assert_eq!(
        updates_text(&messages, "agent_message_chunk"),
        "After the cut."
    );
    assert_eq!(retry_lines(&messages), 1);
    assert_eq!(server.requests().len(), 2);
}

#[test]
fn a_cut_after_text_is_not_retried_and_the_partial_text_is_kept() {
    let server = FakeServer::start();
    server.push(Reply::Sse(vec![
        chunk_role(),
        chunk_content("Partial answ"),
        Step::Cut,
    ]));
    server.push(Reply::Sse(chat_text(&["Follow-up."])));
    let (mut agent, session) = retry_session(&server, &[]);
    let (error, messages) = prompt_err(&mut agent, &session, "hello");
    assert_eq!(error["code"], -32603);
    assert_eq!(error["data"]["code"], "provider_stream_broken");
    assert_eq!(
        updates_text(&messages, "agent_message_chunk"),
        "Partial answ"
    );
    assert_eq!(retry_lines(&messages), 0);
    assert_request_count(&server, 1);
    assert_eq!(server.pending_replies(), 1);

    let (result, _) = prompt_ok(&mut agent, &session, "go on");
    assert_eq!(result["stopReason"], "end_turn");
    let sent = server.requests()[1].body["messages"].clone();
    let sent = sent.as_array().unwrap();
    assert_eq!(
        sent[2],
        json!({"role": "assistant", "content": "Partial answ"})
    );
    assert_eq!(sent[3], json!({"role": "user", "content": "go on"}));
}

#[test]
fn client_errors_quota_and_x_should_retry_false_are_not_retried() {
    let server = FakeServer::start();
    server.push(Reply::openai_error(
        401,
        "Incorrect API key provided",
        "invalid_request_error",
        "invalid_api_key",
    ));
    server.push(Reply::openai_error(
        429,
        "You exceeded your current quota",
        "insufficient_quota",
        "insufficient_quota",
    ));
    server.push(Reply::Status {
        code: 503,
        body: json!({"error": {"message": "Do not come back"}}).to_string(),
        headers: vec![("x-should-retry".into(), "false".into())],
    });
    server.push(Reply::Sse(chat_text(&["never used"])));
    let (mut agent, session) = retry_session(&server, &[]);
    for (count, (status, words)) in [
        (401, "Incorrect API key provided"),
        (429, "exceeded your current quota"),
        (503, "Do not come back"),
    ]
    .into_iter()
    .enumerate()
    {
        let (error, messages) = prompt_err(&mut agent, &session, "hello");
        // A refused key is ACP's "authentication required".
        let expected = if status == 401 { -32000 } else { -32603 };
        assert_eq!(error["code"], expected);
        assert_eq!(error["data"]["code"], format!("provider_http_{status}"));
        assert!(message_of(&error).contains(words), "{error}");
        assert_eq!(retry_lines(&messages), 0, "{messages:#?}");
        assert_request_count(&server, count + 1);
    }
    assert_eq!(server.pending_replies(), 1);
}

#[test]
fn retries_stop_at_the_limit_and_zero_means_one_attempt() {
    let server = FakeServer::start();
    for _ in 0..2 {
        server.push(Reply::openai_error(
            500,
            "boom",
            "server_error",
            "server_error",
        ));
    }
    server.push(Reply::Sse(chat_text(&["never used"])));
    let (mut agent, session) = retry_session(&server, &["--retries", "1"]);
    let (error, messages) = prompt_err(&mut agent, &session, "hello");
    assert_eq!(error["data"]["code"], "provider_http_500");
    assert_eq!(retry_lines(&messages), 1);
    assert_request_count(&server, 2);

    let server = FakeServer::start();
    server.push(Reply::openai_error(
        503,
        "busy",
        "server_error",
        "server_error",
    ));
    server.push(Reply::Sse(chat_text(&["never used"])));
    let (mut agent, session) = retry_session(&server, &["--retries", "0"]);
    let (error, messages) = prompt_err(&mut agent, &session, "hello");
    assert_eq!(error["data"]["code"], "provider_http_503");
    assert_eq!(retry_lines(&messages), 0);
    assert_request_count(&server, 1);
}

#[test]
fn a_retry_after_beyond_sixty_seconds_is_not_retried() {
    let server = FakeServer::start();
    server.push(Reply::Status {
        code: 503,
        body: json!({"error": {"message": "Down for maintenance"}}).to_string(),
        headers: vec![("Retry-After".into(), "120".into())],
    });
    server.push(Reply::Status {
        code: 429,
        body: json!({"error": {"message": "Slow down"}}).to_string(),
        headers: vec![("Retry-After".into(), "120".into())],
    });
    server.push(Reply::Sse(chat_text(&["never used"])));
    let (mut agent, session) = retry_session(&server, &[]);
    let started = Instant::now();
    let (error, _) = prompt_err(&mut agent, &session, "hello");
    assert!(started.elapsed() < Duration::from_secs(10));
    assert_eq!(error["data"]["code"], "provider_http_503");
    assert_request_count(&server, 1);
    // A limit that resets in two minutes is waited for instead (see
    // sessions::waiting); a cancel ends the wait with nothing resent.
    let id = agent.request(
        "session/prompt",
        json!({"sessionId": session, "prompt": [{"type": "text", "text": "again"}]}),
    );
    let deadline = Instant::now() + WAIT;
    loop {
        let message = agent
            .recv(deadline.saturating_duration_since(Instant::now()))
            .expect("the wait's notice");
        if notices_text(std::slice::from_ref(&message)).contains("Waiting for the limit") {
            break;
        }
    }
    assert_eq!(server.requests().len(), 2);
    agent.notify("session/cancel", json!({"sessionId": session}));
    let (answer, _) = agent.response(&id, WAIT);
    assert_eq!(answer["result"]["stopReason"], "cancelled", "{answer}");
    assert_request_count(&server, 2);
}

#[test]
fn an_unreachable_server_is_retried_then_reported() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let base = format!("http://127.0.0.1:{port}/v1");
    let mut agent = Agent::spawn(
        &["acp", "--model", "m", "--retries", "2"],
        &[("OPENAI_BASE_URL", &base), ("OPENAI_API_KEY", "sk-test")],
    );
    agent.initialize();
    let session = new_session(&mut agent, &temp_dir("unreachable")).unwrap();
    let session = session["sessionId"].as_str().unwrap().to_string();
    let (error, messages) = prompt_err(&mut agent, &session, "hello");
    assert_eq!(error["code"], -32603);
    assert_eq!(error["data"]["code"], "provider_unreachable");
    assert_eq!(retry_lines(&messages), 2, "{messages:#?}");
}

// ---------------------------------------------------------------------
// Configuration
// ---------------------------------------------------------------------

#[test]
fn a_config_with_two_providers_offers_their_models_and_routes_to_each() {
    let server = FakeServer::start();
    server.push(Reply::Sse(chat_text(&["from beta"])));
    server.push(Reply::Sse(chat_text(&["from alpha"])));
    let home = temp_dir("two-providers");
    let config = write_config(
        &home,
        &json!({
            "providers": {
                "alpha": {"kind": "openai", "base_url": server.base_url(), "api_key_env": "ALPHA_KEY"},
                "beta": {"kind": "openai", "base_url": server.base_url(), "api_key_env": "BETA_KEY"},
                // No key in the environment: its model is not offered.
                "gamma": {"kind": "openai", "base_url": server.base_url(), "api_key_env": "GAMMA_KEY_UNSET"},
            },
            "models": {
                "alpha/model-a": {"name": "Model A", "context_window": 100000,
                                  "price": {"input": 1.0, "output": 2.0}},
                "beta/model-b": {"price": {"input": 3.0, "output": 4.0, "cached_input": 0.5,
                                           "currency": "EUR"}},
                "gamma/model-c": {},
            },
            "defaults": {"model": "beta/model-b"},
        }),
    );
    let mut agent = agent_with_config(
        &config,
        &[],
        &[("ALPHA_KEY", "sk-alpha"), ("BETA_KEY", "sk-beta")],
    );
    let dir = temp_dir("two-providers-ws");
    let result = new_session(&mut agent, &dir).unwrap();
    let options = &result["configOptions"];
    assert_eq!(
        option_values(options, "model"),
        ["alpha/model-a", "beta/model-b"]
    );
    let names: Vec<&Value> = options
        .as_array()
        .unwrap()
        .iter()
        .find(|o| o["id"] == "model")
        .unwrap()["options"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| &c["name"])
        .collect();
    assert_eq!(names, [&json!("Model A"), &json!("beta/model-b")]);
    assert_eq!(current_value(options, "model"), "beta/model-b");
    let session = result["sessionId"].as_str().unwrap().to_string();

    let (_, messages) = prompt_ok(&mut agent, &session, "hi");
    assert_eq!(updates_text(&messages, "agent_message_chunk"), "from beta");
    let usage = updates_of(&messages, "usage_update");
    assert_eq!(usage[0]["cost"]["currency"], "EUR");
    call(
        &mut agent,
        "session/set_config_option",
        json!({"sessionId": session, "configId": "model", "value": "alpha/model-a"}),
    )
    .unwrap();
    let (_, messages) = prompt_ok(&mut agent, &session, "hi again");
    assert_eq!(updates_text(&messages, "agent_message_chunk"), "from alpha");
    let usage = updates_of(&messages, "usage_update");
    assert_eq!(usage[0]["size"], 100000);
    assert_eq!(usage[0]["cost"]["currency"], "USD");

    let requests = server.wait_requests(2, WAIT);
    assert_eq!(requests[0].body["model"], "model-b");
    assert_eq!(requests[0].header("authorization"), Some("Bearer sk-beta"));
    assert_eq!(requests[1].body["model"], "model-a");
    assert_eq!(requests[1].header("authorization"), Some("Bearer sk-alpha"));
    // The conversation is kept across the model change.
    assert_eq!(requests[1].body["messages"].as_array().unwrap().len(), 4);
}

#[test]
fn a_malformed_config_is_reported_with_its_path_and_line() {
    let home = temp_dir("malformed");
    let config = write_file(
        &home,
        "config.json",
        "{\n  \"providers\": {\n    \"x\": {\"kind\": \"openai\",, \"requires_key\": false}\n  }\n}\n",
    );
    let mut agent = agent_with_config(&config, &[], &[]);
    let error = new_session(&mut agent, &home).unwrap_err();
    let message = message_of(&error);
    assert!(
        message.contains(&format!("{}:3:", config.display())),
        "{error}"
    );
    assert_eq!(error["data"]["code"], "config_invalid", "{error}");
    // The agent keeps serving, and keeps refusing sessions until fixed.
    let again = new_session(&mut agent, &home).unwrap_err();
    assert_eq!(again["code"], error["code"]);
}

#[test]
fn an_unknown_provider_kind_is_named_in_the_error() {
    let home = temp_dir("bad-kind");
    let config = write_file(
        &home,
        "config.json",
        "{\n  \"providers\": {\n    \"x\": {\"kind\": \"opnai\"}\n  }\n}\n",
    );
    let mut agent = agent_with_config(&config, &[], &[]);
    let error = new_session(&mut agent, &home).unwrap_err();
    let message = message_of(&error);
    assert!(message.contains("opnai"), "{error}");
    assert!(message.contains("expected one of"), "{error}");
    assert!(
        message.contains(&format!("{}:3:", config.display())),
        "{error}"
    );
}

#[test]
fn without_a_config_file_the_environment_decides() {
    let server = FakeServer::start();
    server.push(Reply::Sse(chat_text(&["from the environment"])));
    let mut agent = spawned_env_agent(&server);
    assert!(!agent.home().join("config.json").exists());
    let result = new_session(&mut agent, &temp_dir("env")).unwrap();
    let options = &result["configOptions"];
    assert!(
        option_values(options, "model").contains(&"openai/test-model".to_string()),
        "{options}"
    );
    assert_eq!(current_value(options, "model"), "openai/test-model");
    let session = result["sessionId"].as_str().unwrap().to_string();
    let (_, messages) = prompt_ok(&mut agent, &session, "hi");
    assert_eq!(
        updates_text(&messages, "agent_message_chunk"),
        "from the environment"
    );
    assert_eq!(
        server.requests()[0].header("authorization"),
        Some("Bearer sk-test")
    );
}

#[test]
fn a_missing_explicit_config_file_is_an_error() {
    let server = FakeServer::start();
    let missing = temp_dir("missing-config").join("nope.json");
    let base = server.base_url();
    // Even with a usable environment: an explicit file must exist.
    let mut agent = agent_with_config(
        &missing,
        &[],
        &[("OPENAI_BASE_URL", &base), ("OPENAI_API_KEY", "sk-test")],
    );
    let error = new_session(&mut agent, &temp_dir("missing-config-ws")).unwrap_err();
    assert!(
        message_of(&error).contains(&missing.display().to_string()),
        "{error}"
    );
    assert!(server.requests().is_empty());
}

#[test]
#[cfg_attr(windows, ignore = "Unix file modes")]
fn a_key_file_readable_by_others_is_refused_until_chmod_600() {
    let server = FakeServer::start();
    server.push(Reply::Sse(chat_text(&["keyed"])));
    let home = temp_dir("key-file");
    let key = write_file(&home, "gateway.key", "sk-from-file\n");
    spindle::os::testing::set_mode(&key, 0o644).unwrap();
    let config = write_config(
        &home,
        &json!({"providers": {"gateway": {"kind": "openai", "base_url": server.base_url(),
                                          "api_key_file": path_str(&key)}},
                "models": {"gateway/m": {}}}),
    );
    let mut agent = agent_with_config(&config, &[], &[]);
    let error = new_session(&mut agent, &home).unwrap_err();
    assert_eq!(error["code"], -32000, "{error}");
    assert!(message_of(&error).contains("chmod 600"), "{error}");
    assert!(
        message_of(&error).contains(&key.display().to_string()),
        "{error}"
    );

    spindle::os::testing::set_mode(&key, 0o600).unwrap();
    let answer = call(
        &mut agent,
        "authenticate",
        json!({"methodId": "spindle-check"}),
    );
    assert_eq!(answer, Ok(json!({})));
    let result = new_session(&mut agent, &home).unwrap();
    let session = result["sessionId"].as_str().unwrap().to_string();
    prompt_ok(&mut agent, &session, "hi");
    assert_eq!(
        server.requests()[0].header("authorization"),
        Some("Bearer sk-from-file")
    );
}

#[test]
fn no_provider_asks_for_setup_and_authenticate_reads_the_config_again() {
    let server = FakeServer::start();
    server.push(Reply::Sse(chat_text(&["set up"])));
    let mut agent = Agent::spawn(&["acp"], &[]);
    let init = call(
        &mut agent,
        "initialize",
        json!({"protocolVersion": 1,
               "clientCapabilities": {"auth": {"terminal": true}},
               "clientInfo": {"name": "spindle-tests", "version": "0.0.0"}}),
    )
    .unwrap();
    let methods = init["authMethods"].as_array().unwrap();
    assert_eq!(methods.len(), 2, "{methods:?}");
    assert_eq!(methods[0]["id"], "spindle-check");
    assert!(methods[0].get("type").is_none() || methods[0]["type"] == "agent");
    assert_eq!(methods[1]["type"], "terminal");
    assert_eq!(methods[1]["id"], "spindle-setup");
    assert_eq!(methods[1]["args"], json!(["--setup"]));

    let dir = temp_dir("no-provider");
    let error = new_session(&mut agent, &dir).unwrap_err();
    assert_eq!(error["code"], -32000);
    assert!(message_of(&error).contains("spindle setup"), "{error}");
    let error = call(
        &mut agent,
        "authenticate",
        json!({"methodId": "spindle-check"}),
    )
    .unwrap_err();
    assert_eq!(error["code"], -32000);
    let error = call(&mut agent, "authenticate", json!({"methodId": "magic"})).unwrap_err();
    assert_eq!(error["code"], -32602);

    write_config(
        agent.home(),
        &json!({"providers": {"local": {"kind": "openai", "base_url": server.base_url(),
                                        "requires_key": false}},
                "models": {"local/tiny": {}}}),
    );
    let answer = call(
        &mut agent,
        "authenticate",
        json!({"methodId": "spindle-check"}),
    );
    assert_eq!(answer, Ok(json!({})));
    let result = new_session(&mut agent, &dir).unwrap();
    let session = result["sessionId"].as_str().unwrap().to_string();
    let (_, messages) = prompt_ok(&mut agent, &session, "hi");
    assert_eq!(updates_text(&messages, "agent_message_chunk"), "set up");
    assert_eq!(server.requests()[0].header("authorization"), None);
}

#[test]
fn without_the_terminal_capability_only_the_check_method_is_offered() {
    let mut agent = Agent::spawn(&["acp"], &[]);
    let init = agent.initialize();
    assert_eq!(
        init["authMethods"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["id"].as_str().unwrap())
            .collect::<Vec<_>>(),
        ["spindle-check"]
    );
}

// ---------------------------------------------------------------------
// spindle setup
// ---------------------------------------------------------------------

/// Runs `spindle setup ARGS…` with stdin not a terminal, a private
/// SPINDLE_HOME and no provider variables but `env`.
fn setup(args: &[&str], env: &[(&str, &str)]) -> Output {
    let home = temp_dir("setup-home");
    let mut command = crate::support::spindle_command(&home);
    command
        .arg("setup")
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (name, value) in env {
        command.env(name, value);
    }
    let output = command.output().expect("cannot run spindle setup");
    let _ = std::fs::remove_dir_all(&home);
    output
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[test]
fn setup_tests_the_connection_then_writes_a_usable_config() {
    let server = FakeServer::start();
    server.push(Reply::Sse(chat_text(&["OK"])));
    let dir = temp_dir("setup-ok");
    let config = dir.join("nested").join("config.json");
    let base = server.base_url();
    let output = setup(
        &[
            "--kind",
            "openai",
            "--base-url",
            &base,
            "--key-env",
            "SETUP_TEST_KEY",
            "--model",
            "tiny-model",
            "--config",
            path_str(&config),
        ],
        &[("SETUP_TEST_KEY", "sk-setup")],
    );
    assert_eq!(
        output.status.code(),
        Some(0),
        "stdout: {}\nstderr: {}",
        text(&output.stdout),
        text(&output.stderr)
    );
    assert!(
        text(&output.stdout).contains("OK"),
        "{}",
        text(&output.stdout)
    );
    let requests = server.requests();
    assert_eq!(requests.len(), 1);
    assert_eq!(requests[0].path, "/v1/chat/completions");
    assert_eq!(requests[0].header("authorization"), Some("Bearer sk-setup"));
    assert_eq!(requests[0].body["model"], "tiny-model");
    assert_eq!(requests[0].body["stream"], true);

    let written: Value = serde_json::from_str(&std::fs::read_to_string(&config).unwrap()).unwrap();
    assert_eq!(
        written["providers"],
        json!({"local": {"kind": "openai", "base_url": base, "api_key_env": "SETUP_TEST_KEY"}})
    );
    assert_eq!(written["models"], json!({"local/tiny-model": {}}));
    assert_eq!(written["defaults"]["model"], "local/tiny-model");
    assert!(!text(&output.stdout).contains("sk-setup"));
    assert!(!std::fs::read_to_string(&config)
        .unwrap()
        .contains("sk-setup"));

    // The file works for the agent.
    server.push(Reply::Sse(chat_text(&["configured"])));
    let mut agent = agent_with_config(&config, &[], &[("SETUP_TEST_KEY", "sk-setup")]);
    let result = new_session(&mut agent, &dir).unwrap();
    assert_eq!(
        current_value(&result["configOptions"], "model"),
        "local/tiny-model"
    );
    let session = result["sessionId"].as_str().unwrap().to_string();
    let (_, messages) = prompt_ok(&mut agent, &session, "hi");
    assert_eq!(updates_text(&messages, "agent_message_chunk"), "configured");
}

#[test]
fn setup_writes_nothing_when_the_test_request_fails() {
    let server = FakeServer::start();
    server.push(Reply::openai_error(
        401,
        "Incorrect API key provided",
        "invalid_request_error",
        "invalid_api_key",
    ));
    let dir = temp_dir("setup-fail");
    let config = dir.join("config.json");
    let base = server.base_url();
    let output = setup(
        &[
            "--kind",
            "openai",
            "--base-url",
            &base,
            "--key-env",
            "SETUP_TEST_KEY",
            "--model",
            "m",
            "--config",
            path_str(&config),
        ],
        &[("SETUP_TEST_KEY", "sk-wrong")],
    );
    assert_eq!(output.status.code(), Some(1), "{}", text(&output.stdout));
    let stderr = text(&output.stderr);
    assert!(stderr.contains("401"), "{stderr}");
    assert!(stderr.contains("Incorrect API key provided"), "{stderr}");
    assert!(!config.exists());
    // Not retried: setup makes one request.
    assert_eq!(server.requests().len(), 1);
}

#[test]
fn setup_never_overwrites_a_file_it_cannot_parse() {
    let server = FakeServer::start();
    server.push(Reply::Sse(chat_text(&["OK"])));
    let dir = temp_dir("setup-unparseable");
    let broken = "{\n  \"providers\": {\n    \"x\": \n";
    let config = write_file(&dir, "config.json", broken);
    let base = server.base_url();
    let output = setup(
        &[
            "--kind",
            "openai",
            "--base-url",
            &base,
            "--no-key",
            "--model",
            "m",
            "--config",
            path_str(&config),
        ],
        &[],
    );
    assert_eq!(output.status.code(), Some(1));
    let stderr = text(&output.stderr);
    assert!(stderr.contains(&config.display().to_string()), "{stderr}");
    assert_eq!(std::fs::read_to_string(&config).unwrap(), broken);
    assert!(server.requests().is_empty());
}

#[test]
fn setup_no_test_writes_without_a_request_and_keeps_other_providers() {
    let server = FakeServer::start();
    let dir = temp_dir("setup-no-test");
    let config = write_config(
        &dir,
        &json!({"providers": {"other": {"kind": "openai", "base_url": "http://127.0.0.1:9/v1",
                                        "requires_key": false}},
                "models": {"other/x": {"context_window": 4096}}}),
    );
    let base = server.base_url();
    let output = setup(
        &[
            "--kind",
            "openai",
            "--name",
            "fake",
            "--base-url",
            &base,
            "--no-key",
            "--model",
            "m",
            "--config",
            path_str(&config),
            "--no-test",
        ],
        &[],
    );
    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
    assert!(server.requests().is_empty());
    let written: Value = serde_json::from_str(&std::fs::read_to_string(&config).unwrap()).unwrap();
    assert_eq!(
        written["providers"]["other"]["base_url"],
        "http://127.0.0.1:9/v1"
    );
    assert_eq!(written["models"]["other/x"]["context_window"], 4096);
    assert_eq!(
        written["providers"]["fake"],
        json!({"kind": "openai", "base_url": base, "requires_key": false})
    );
    assert_eq!(written["defaults"]["model"], "fake/m");
}

#[test]
fn setup_tests_an_anthropic_provider_with_its_own_wire_format() {
    let server = FakeServer::start();
    server.push(Reply::Sse(anthropic_answer("OK", "end_turn")));
    let dir = temp_dir("setup-anthropic");
    let config = dir.join("config.json");
    let base = format!("http://{}", server.address());
    let output = setup(
        &[
            "--kind",
            "anthropic",
            "--base-url",
            &base,
            "--key-env",
            "SETUP_ANT_KEY",
            "--model",
            "claude-fake",
            "--config",
            path_str(&config),
        ],
        &[("SETUP_ANT_KEY", "sk-ant-setup")],
    );
    assert_eq!(
        output.status.code(),
        Some(0),
        "stderr: {}",
        text(&output.stderr)
    );
    let requests = server.requests();
    assert_eq!(requests.len(), 1);
    assert_eq!(requests[0].path, "/v1/messages");
    assert_eq!(requests[0].header("x-api-key"), Some("sk-ant-setup"));
    let written: Value = serde_json::from_str(&std::fs::read_to_string(&config).unwrap()).unwrap();
    assert_eq!(written["defaults"]["model"], "anthropic/claude-fake");
}

/// The POSTs a fake server received (model discovery is a GET).
fn posts(server: &FakeServer) -> usize {
    server
        .requests()
        .iter()
        .filter(|r| r.method == "POST")
        .count()
}

/// A server that ignores `stream: true` and answers 200 with a complete
/// JSON answer: each wire format reads it, shows it, and asks only once.
#[test]
fn complete_json_answers_to_streaming_requests_are_read_once() {
    // Chat Completions, with a tool call and then text.
    let server = FakeServer::start();
    server.push(Reply::status(
        200,
        json!({"choices": [{"message": {"role": "assistant", "content": "Looking. ",
                "tool_calls": [{"id": "c1", "type": "function",
                                "function": {"name": "list_directory", "arguments": "{}"}}]},
                "finish_reason": "tool_calls"}],
               "usage": {"prompt_tokens": 5, "completion_tokens": 2}})
        .to_string(),
    ));
    server.push(Reply::status(
        200,
        json!({"choices": [{"message": {"role": "assistant", "content": "Whole answer."},
                            "finish_reason": "stop"}]})
        .to_string(),
    ));
    let mut agent = env_agent(&server, &["--permissions", "yolo"]);
    let session = agent.new_session(&temp_dir("whole-chat"));
    let (result, messages) = prompt_ok(&mut agent, &session, "hi");
    assert_eq!(result["stopReason"], "end_turn");
    assert_eq!(
        updates_text(&messages, "agent_message_chunk"),
        "Looking. Whole answer."
    );
    assert!(messages
        .iter()
        .any(|m| m["params"]["update"]["toolCallId"] == "c1"));
    assert_eq!(posts(&server), 2, "no retry of a 200");

    // Anthropic Messages.
    let server = FakeServer::start();
    server.push(Reply::status(
        200,
        json!({"id": "msg_1", "type": "message", "role": "assistant",
               "content": [{"type": "thinking", "thinking": "Hm.", "signature": "sig=="},
                           {"type": "text", "text": "Whole claude."}],
               "stop_reason": "end_turn", "usage": {"input_tokens": 3, "output_tokens": 2}})
        .to_string(),
    ));
    let mut agent = anthropic_agent(&server);
    let session = agent.new_session(&temp_dir("whole-anthropic"));
    let (result, messages) = prompt_ok(&mut agent, &session, "hi");
    assert_eq!(result["stopReason"], "end_turn");
    assert_eq!(
        updates_text(&messages, "agent_message_chunk"),
        "Whole claude."
    );
    assert_eq!(updates_text(&messages, "agent_thought_chunk"), "Hm.");
    assert_eq!(posts(&server), 1);

    // OpenAI Responses.
    let server = FakeServer::start();
    server.push(Reply::status(
        200,
        json!({"id": "resp_1", "object": "response", "status": "completed",
               "output": [{"type": "message", "id": "m1", "role": "assistant",
                           "content": [{"type": "output_text", "text": "Whole response."}]}],
               "usage": {"input_tokens": 3, "output_tokens": 2}})
        .to_string(),
    ));
    let mut agent = responses_agent(&server);
    let session = agent.new_session(&temp_dir("whole-responses"));
    let (result, messages) = prompt_ok(&mut agent, &session, "hi");
    assert_eq!(result["stopReason"], "end_turn");
    assert_eq!(
        updates_text(&messages, "agent_message_chunk"),
        "Whole response."
    );
    assert_eq!(posts(&server), 1);
}

// ---------------------------------------------------------------------
// Model lists
// ---------------------------------------------------------------------

/// The model config option of a new session: (values, current, description).
fn model_picker(agent: &mut Agent, name: &str) -> (Vec<String>, String, String) {
    let session = new_session(agent, &temp_dir(name)).unwrap();
    let options = &session["configOptions"];
    let description = options
        .as_array()
        .and_then(|all| all.iter().find(|o| o["id"] == "model"))
        .and_then(|o| o["description"].as_str())
        .unwrap_or_default()
        .to_string();
    (
        option_values(options, "model"),
        current_value(options, "model").to_string(),
        description,
    )
}

/// An Anthropic-style server with a custom base URL is asked for its
/// models with Anthropic's headers and Spindle's one User-Agent; its list
/// (names included) is the picker, and no official model is added.
#[test]
fn anthropic_style_servers_are_asked_for_their_models() {
    let server = FakeServer::start();
    server.serve_models(json!({"data": [
        {"type": "model", "id": "claude-gw-b", "display_name": "Gateway B"},
        {"type": "model", "id": "claude-gw-a", "display_name": "Gateway A"},
    ], "has_more": false, "first_id": "claude-gw-b", "last_id": "claude-gw-a"}));
    let home = temp_dir("anthropic-list");
    let config = write_config(
        &home,
        &json!({"providers": {"gw": {"kind": "anthropic",
                                     "base_url": format!("http://{}", server.address()),
                                     "api_key_env": "GW_KEY"}}}),
    );
    let mut agent = agent_with_config(&config, &[], &[("GW_KEY", "sk-gw")]);
    let session = new_session(&mut agent, &temp_dir("anthropic-list-ws")).unwrap();
    let options = &session["configOptions"];
    assert_eq!(
        option_values(options, "model"),
        ["gw/claude-gw-a", "gw/claude-gw-b"]
    );
    // The default follows a stable rule (here: by id), not the server's
    // order.
    assert_eq!(current_value(options, "model"), "gw/claude-gw-a");
    let model = options
        .as_array()
        .unwrap()
        .iter()
        .find(|o| o["id"] == "model")
        .unwrap();
    assert_eq!(model["options"][0]["name"], "Gateway A");
    let listings = server.listings();
    assert_eq!(listings.len(), 1);
    assert_eq!(listings[0].path, "/v1/models?limit=1000");
    assert_eq!(listings[0].header("x-api-key"), Some("sk-gw"));
    assert_eq!(listings[0].header("anthropic-version"), Some("2023-06-01"));
    assert!(listings[0].header("authorization").is_none());
    let agent_header = listings[0].header("user-agent").unwrap_or_default();
    assert!(agent_header.starts_with("spindle/"), "{agent_header}");

    // A model call sends the same User-Agent.
    server.push(Reply::Sse(anthropic_answer("Hi.", "end_turn")));
    let id = session["sessionId"].as_str().unwrap().to_string();
    prompt_ok(&mut agent, &id, "hi");
    let requests = server.wait_requests(1, WAIT);
    assert_eq!(requests[0].header("user-agent"), Some(agent_header));
    assert_eq!(requests[0].body["model"], "claude-gw-a");
}

/// A gateway's list of hundreds of ids: image, speech, embedding,
/// transcription, moderation and realtime routes are dropped before the
/// cap, the named model stays the default even when the list does not
/// have it, no official model is offered, and the picker says more exist.
#[test]
fn a_long_gateway_list_is_filtered_capped_and_keeps_the_named_model() {
    let server = FakeServer::start();
    let mut data = Vec::new();
    for size in ["256-x-256", "512-x-512", "1024-x-1024", "1792-x-1024"] {
        for model in ["dall-e-2", "dall-e-3", "gpt-image-1"] {
            data.push(json!({"id": format!("{size}/{model}")}));
            data.push(json!({"id": format!("hd/{size}/{model}")}));
        }
    }
    for kind in [
        "text-embedding-3-small",
        "tts-1",
        "whisper-1",
        "gpt-4o-transcribe",
        "omni-moderation-latest",
        "gpt-4o-realtime-preview",
    ] {
        for n in 0..10 {
            data.push(json!({"id": format!("{kind}-{n}")}));
        }
    }
    // 240 chat models, listed in reverse order.
    for n in (0..240).rev() {
        data.push(json!({"id": format!("chat-{n:03}")}));
    }
    assert!(data.len() >= 300);
    // Image routes first, alphabetically before everything else.
    data.insert(0, json!({"id": "1024-x-1024/aaa-image"}));
    server.serve_models(json!({"object": "list", "data": data}));

    let base = server.base_url();
    let env = [
        ("OPENAI_BASE_URL", base.as_str()),
        ("OPENAI_API_KEY", "sk-gw"),
    ];
    let mut agent = Agent::spawn(&["acp", "--model", "my-named-model"], &env);
    agent.initialize();
    let (values, current, description) = model_picker(&mut agent, "gateway-list");
    assert_eq!(current, "openai/my-named-model");
    assert!(values.contains(&"openai/my-named-model".to_string()));
    assert!(
        !values.iter().any(|v| v.contains("gpt-4.1-mini")),
        "no official default for a custom base URL: {values:?}"
    );
    let listed: Vec<&String> = values.iter().filter(|v| v.contains("chat-")).collect();
    assert_eq!(listed.len(), 200, "{values:?}");
    assert_eq!(values.len(), 201, "{values:?}");
    for value in &values {
        let id = value.trim_start_matches("openai/");
        assert!(
            id.starts_with("chat-") || id == "my-named-model",
            "a non-chat id was offered: {value}"
        );
    }
    // The cap kept the server's first 200 chat models (its own order).
    assert!(
        values.contains(&"openai/chat-239".to_string()),
        "{values:?}"
    );
    assert!(values.contains(&"openai/chat-040".to_string()));
    assert!(!values.contains(&"openai/chat-039".to_string()));
    assert!(description.contains("40 more"), "{description}");
    assert!(
        server.requests().is_empty(),
        "discovery makes no model call"
    );
    assert_eq!(
        server.listings()[0].header("authorization"),
        Some("Bearer sk-gw")
    );

    // Without a named model, the default is the first chat model by id,
    // offered even when the cap left it out.
    let mut agent = Agent::spawn(&["acp"], &env);
    agent.initialize();
    let (values, current, _) = model_picker(&mut agent, "gateway-default");
    assert_eq!(current, "openai/chat-000");
    assert!(values.contains(&current), "{values:?}");
}

/// A custom server that lists nothing, with no model named: no official
/// model is made up; the session is refused with what to do. A named
/// model works without any list. An official endpoint gets its kind's
/// usual model without being asked.
#[test]
fn no_list_and_no_name_is_refused_and_official_endpoints_need_no_list() {
    let server = FakeServer::start();
    let base = server.base_url();
    let env = [
        ("OPENAI_BASE_URL", base.as_str()),
        ("OPENAI_API_KEY", "sk-x"),
    ];
    let mut agent = Agent::spawn(&["acp"], &env);
    agent.initialize();
    let error = new_session(&mut agent, &temp_dir("no-list")).unwrap_err();
    assert_eq!(error["code"], -32000);
    let message = message_of(&error);
    assert!(message.contains("offers no model"), "{message}");
    assert!(message.contains("--model"), "{message}");
    assert!(message.contains("404"), "{message}");

    let mut agent = Agent::spawn(&["acp", "--model", "local-model"], &env);
    agent.initialize();
    let (values, current, _) = model_picker(&mut agent, "named-no-list");
    assert_eq!(values, ["openai/local-model"]);
    assert_eq!(current, "openai/local-model");

    let home = temp_dir("official");
    let config = write_config(
        &home,
        &json!({"providers": {"openai": {"kind": "openai",
                                         "base_url": "https://api.openai.com/v1/",
                                         "api_key_env": "OFFICIAL_KEY"}}}),
    );
    let mut agent = agent_with_config(&config, &[], &[("OFFICIAL_KEY", "sk-official")]);
    let (values, current, _) = model_picker(&mut agent, "official-ws");
    // The catalog's current models of the kind, the usual one first, and
    // no list request (the agent starts without a network call).
    assert_eq!(values[0], "openai/gpt-4.1-mini");
    for model in ["openai/gpt-5", "openai/gpt-4.1", "openai/o4-mini"] {
        assert!(values.iter().any(|v| v == model), "{values:?}");
    }
    assert!(
        values.iter().all(|v| v.starts_with("openai/")),
        "{values:?}"
    );
    assert_eq!(current, "openai/gpt-4.1-mini");
}

/// Setup against a gateway without `--model`: the listed chat model the
/// agent's default rule picks (by id, never a search-only one; never an
/// official model name) is taken, and a server that answers the streaming
/// test request with a complete JSON answer is accepted.
#[test]
fn setup_takes_a_listed_model_and_accepts_a_whole_json_answer() {
    let server = FakeServer::start();
    server.serve_models(json!({"data": [{"id": "text-embedding-3-small"},
                                        {"id": "zz-another"}, {"id": "gpt-4o-search-preview"},
                                        {"id": "gw-chat"}]}));
    server.push(Reply::status(
        200,
        json!({"choices": [{"message": {"role": "assistant", "content": "OK"},
                            "finish_reason": "stop"}]})
        .to_string(),
    ));
    let dir = temp_dir("setup-listed");
    let config = dir.join("config.json");
    let base = server.base_url();
    let output = setup(
        &[
            "--kind",
            "openai",
            "--base-url",
            &base,
            "--no-key",
            "--config",
            path_str(&config),
        ],
        &[],
    );
    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
    assert!(text(&output.stdout).contains("OK"));
    assert_eq!(posts(&server), 1, "the 200 was not retried");
    assert_eq!(server.requests()[0].body["model"], "gw-chat");
    let written: Value = serde_json::from_str(&std::fs::read_to_string(&config).unwrap()).unwrap();
    assert_eq!(written["defaults"]["model"], "local/gw-chat");

    // A server without a list, and no --model: nothing is written.
    let bare = FakeServer::start();
    let config = dir.join("other.json");
    let base = bare.base_url();
    let output = setup(
        &[
            "--kind",
            "openai",
            "--base-url",
            &base,
            "--no-key",
            "--config",
            path_str(&config),
        ],
        &[],
    );
    assert_eq!(output.status.code(), Some(1));
    let stderr = text(&output.stderr);
    assert!(stderr.contains("--model"), "{stderr}");
    assert!(!config.exists());
    assert!(bare.requests().is_empty());
}

/// A small output limit with high effort: the thinking budget leaves the
/// visible answer at least 1,024 tokens, raising `max_tokens` when even
/// the smallest budget does not fit under the configured limit.
#[test]
fn the_thinking_budget_leaves_room_for_the_answer() {
    let server = FakeServer::start();
    server.push(Reply::Sse(anthropic_answer("Short.", "end_turn")));
    server.push(Reply::Sse(anthropic_answer("Roomy.", "end_turn")));
    let home = temp_dir("budget-floor");
    let config = write_config(
        &home,
        &json!({
            "providers": {"claude": {"kind": "anthropic",
                                     "base_url": format!("http://{}", server.address()),
                                     "api_key_env": "FAKE_ANTHROPIC_KEY"}},
            "models": {
                "claude/tiny": {"max_output_tokens": 2000, "reasoning": true, "efforts": ["high"]},
                "claude/mid": {"max_output_tokens": 6000, "reasoning": true, "efforts": ["high"]},
            },
            "defaults": {"model": "claude/tiny"},
        }),
    );
    let mut agent = agent_with_config(&config, &[], &[("FAKE_ANTHROPIC_KEY", "k")]);
    let session = new_session(&mut agent, &temp_dir("budget-ws")).unwrap();
    let id = session["sessionId"].as_str().unwrap().to_string();
    let set = |agent: &mut Agent, option: &str, value: &str| {
        call(
            agent,
            "session/set_config_option",
            json!({"sessionId": id, "configId": option, "value": value}),
        )
        .unwrap();
    };
    set(&mut agent, "effort", "high");
    prompt_ok(&mut agent, &id, "one");
    set(&mut agent, "model", "claude/mid");
    set(&mut agent, "effort", "high");
    prompt_ok(&mut agent, &id, "two");
    let requests = server.wait_requests(2, WAIT);
    let tiny = &requests[0].body;
    assert_eq!(tiny["thinking"]["budget_tokens"], 1024, "{tiny}");
    assert_eq!(tiny["max_tokens"], 5120, "{tiny}");
    let mid = &requests[1].body;
    assert_eq!(mid["max_tokens"], 6000, "{mid}");
    assert_eq!(mid["thinking"]["budget_tokens"], 6000 - 1024, "{mid}");
}

/// `spindle setup --key-stdin` keeps the key in a private file beside the
/// config; `logout` forgets exactly that (never a variable, never a key
/// file the user named elsewhere), and the next session asks to
/// authenticate.
#[test]
#[cfg_attr(windows, ignore = "Unix file modes")]
fn setup_keeps_a_given_key_and_logout_forgets_it() {
    use std::io::Write;
    let server = FakeServer::start();
    let dir = temp_dir("logout");
    let config = dir.join("config.json");
    let base = server.base_url();
    let home = temp_dir("logout-home");
    let mut child = crate::support::spindle_command(&home)
        .args([
            "setup",
            "--kind",
            "openai",
            "--base-url",
            &base,
            "--name",
            "gw",
            "--key-stdin",
        ])
        .args(["--model", "m", "--no-test", "--config", path_str(&config)])
        .env_remove("OPENAI_API_KEY")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(b"sk-given-once\n")
        .unwrap();
    let output = child.wait_with_output().unwrap();
    assert!(output.status.success(), "{}", text(&output.stderr));
    let key = dir.join("keys").join("gw.key");
    assert_eq!(std::fs::read_to_string(&key).unwrap(), "sk-given-once\n");
    assert_eq!(spindle::os::testing::mode(&key), 0o600);
    let written: Value = serde_json::from_str(&std::fs::read_to_string(&config).unwrap()).unwrap();
    assert_eq!(written["providers"]["gw"]["api_key_file"], json!(key));
    assert!(written["providers"]["gw"]
        .get("api_key_env")
        .is_none_or(Value::is_null));

    // A second provider whose key the user keeps in a file of their own.
    let own = dir.join("own.key");
    std::fs::write(&own, "sk-mine\n").unwrap();
    spindle::os::testing::set_mode(&own, 0o600).unwrap();
    let mut value = written.clone();
    value["providers"]["mine"] = json!({"kind": "openai", "base_url": base, "api_key_file": own});
    std::fs::write(&config, value.to_string()).unwrap();

    let mut agent = agent_with_config(&config, &[], &[]);
    let init = agent.received()[0].clone();
    assert_eq!(
        init["result"]["agentCapabilities"]["auth"]["logout"],
        json!({}),
        "{init}"
    );
    let ws = temp_dir("logout-ws");
    assert!(new_session(&mut agent, &ws).is_ok());
    let forgotten = call(&mut agent, "logout", json!({})).unwrap();
    assert_eq!(forgotten["_meta"]["spindle"]["forgotten"], json!(["gw"]));
    assert!(!key.exists(), "the key Spindle kept is gone");
    assert!(own.exists(), "a key file the user named stays");
    // Logging out again forgets nothing more.
    let again = call(&mut agent, "logout", json!({})).unwrap();
    assert_eq!(again["_meta"]["spindle"]["forgotten"], json!([]));
    // With only the provider whose key was forgotten, authentication is
    // required again.
    std::fs::write(&config, written.to_string()).unwrap();
    let error = call(
        &mut agent,
        "authenticate",
        json!({"methodId": "spindle-check"}),
    )
    .unwrap_err();
    assert_eq!(error["code"], -32000, "{error}");
}

/// A key rotation whose test request fails keeps the earlier key and
/// leaves no file behind.
#[test]
fn a_failed_key_rotation_keeps_the_earlier_key() {
    use std::io::Write;
    let server = FakeServer::start();
    server.push(Reply::openai_error(
        401,
        "Incorrect API key provided",
        "invalid_request_error",
        "invalid_api_key",
    ));
    let dir = temp_dir("rotate");
    let config = dir.join("config.json");
    let base = server.base_url();
    let run = |key: &str, test: bool| {
        let mut command = crate::support::spindle_command(&temp_dir("rotate-home"));
        command
            .args([
                "setup",
                "--kind",
                "openai",
                "--base-url",
                &base,
                "--name",
                "gw",
                "--key-stdin",
            ])
            .args(["--model", "m", "--config", path_str(&config)])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        if !test {
            command.arg("--no-test");
        }
        let mut child = command.spawn().unwrap();
        child
            .stdin
            .take()
            .unwrap()
            .write_all(format!("{key}\n").as_bytes())
            .unwrap();
        child.wait_with_output().unwrap()
    };
    assert!(run("sk-good", false).status.success());
    let failed = run("sk-typo", true);
    assert_eq!(failed.status.code(), Some(1), "{}", text(&failed.stdout));
    // Without a terminal nothing is asked: the failure is said plainly.
    let said = text(&failed.stderr);
    assert!(said.contains("HTTP 401"), "{said}");
    assert!(said.contains("nothing was written"), "{said}");
    let keys = dir.join("keys");
    assert_eq!(
        std::fs::read_to_string(keys.join("gw.key")).unwrap(),
        "sk-good\n"
    );
    let files: Vec<_> = std::fs::read_dir(&keys)
        .unwrap()
        .flatten()
        .map(|e| e.file_name())
        .collect();
    assert_eq!(files.len(), 1, "{files:?}");
}

/// The environment's providers join a config file's (the file wins on a
/// name both use); a provider typo in `--model` stops the start with the
/// providers named; a broken config is not called an internal error.
#[test]
fn env_and_file_providers_merge_and_a_provider_typo_is_refused() {
    let server = FakeServer::start();
    let base = server.base_url();
    let dir = temp_dir("merge");
    let config = write_config(
        &dir,
        &json!({"providers": {"local": {"kind": "openai", "base_url": base, "requires_key": false}},
                "models": {"local/m": {}}}),
    );
    let mut agent = agent_with_config(&config, &[], &[("ANTHROPIC_API_KEY", "sk-ant-test")]);
    let session = new_session(&mut agent, &temp_dir("merge-ws")).unwrap();
    let models = option_values(&session["configOptions"], "model");
    assert!(models.iter().any(|m| m.starts_with("local/")), "{models:?}");
    assert!(
        models.iter().any(|m| m.starts_with("anthropic/")),
        "{models:?}"
    );
    drop(agent);

    let out = crate::support::spindle_command(&crate::support::temp_dir("home"))
        .args(["acp", "--config", path_str(&config), "--model", "locl/m"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = text(&out.stderr);
    assert!(stderr.contains("did you mean \"local\""), "{stderr}");
    assert!(out.stdout.is_empty());

    std::fs::write(&config, "{\"providers\": 7}").unwrap();
    let mut agent = Agent::spawn(&["acp", "--config", path_str(&config)], &[]);
    agent.initialize();
    let error = new_session(&mut agent, &dir).unwrap_err();
    let message = error["message"].as_str().unwrap();
    assert!(!message.starts_with("Internal error"), "{message}");
    assert!(message.contains("config"), "{message}");
}

/// `spindle doctor` on a healthy and on a broken setup.
#[test]
fn doctor_reports_a_healthy_and_a_broken_setup() {
    let server = FakeServer::start();
    server.serve_models(json!({"data": [{"id": "m1"}, {"id": "m2"}]}));
    let base = server.base_url();
    let dir = temp_dir("doctor");
    let config = write_config(
        &dir,
        &json!({"providers": {"local": {"kind": "openai", "base_url": base, "requires_key": false}}}),
    );
    let doctor = |config: &Path| {
        crate::support::spindle_command(&crate::support::temp_dir("home"))
            .args(["doctor", "--config", path_str(config), "--db"])
            .arg(dir.join("none.db"))
            .env_remove("OPENAI_API_KEY")
            .env_remove("ANTHROPIC_API_KEY")
            .env_remove("OLLAMA_HOST")
            .env_remove("OPENAI_BASE_URL")
            .output()
            .unwrap()
    };
    let out = doctor(&config);
    let report = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{report}");
    assert!(report.contains("2 models listed"), "{report}");
    assert!(report.contains("does not exist yet"), "{report}");
    if cfg!(unix) {
        assert!(
            report.contains("shell") && report.contains("sh (commands run with sh -c)"),
            "{report}"
        );
    } else {
        assert!(report.contains("under auto every command asks"), "{report}");
    }

    let broken = write_config(
        &dir,
        &json!({"providers": {"gone": {"kind": "openai", "base_url": "http://127.0.0.1:9/v1", "requires_key": false},
                              "keyless": {"kind": "anthropic", "api_key_env": "DOCTOR_NO_SUCH_KEY"}}}),
    );
    let out = doctor(&broken);
    let report = text(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{report}");
    assert!(
        report.contains("FAIL  gone") && report.contains("/v1?"),
        "{report}"
    );
    assert!(report.contains("FAIL  keyless: no API key"), "{report}");
    assert!(report.contains("→ set DOCTOR_NO_SUCH_KEY"), "{report}");
    std::fs::write(&broken, "{ not json").unwrap();
    let out = doctor(&broken);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stdout).contains("FAIL  config"));
}

/// A well-known model is priced without any configuration: the prompt's
/// usage carries a cost.
#[test]
fn catalog_models_are_priced_without_config() {
    let server = FakeServer::start();
    server.serve_models(json!({"data": [{"id": "gpt-4.1-mini"}]}));
    // 1,000,000 prompt tokens and 500,000 completion tokens.
    server.push(Reply::Sse(vec![
        crate::support::fake_openai::chunk_role(),
        crate::support::fake_openai::chunk_content("priced"),
        crate::support::fake_openai::chunk_finish("stop"),
        crate::support::fake_openai::chunk_usage(1_000_000, 500_000),
        crate::support::fake_openai::done(),
    ]));
    let base = server.base_url();
    let mut agent = Agent::spawn(
        &["acp", "--model", "openai/gpt-4.1-mini"],
        &[("OPENAI_BASE_URL", &base), ("OPENAI_API_KEY", "sk-test")],
    );
    agent.initialize();
    let ws = temp_dir("priced-ws");
    let session = new_session(&mut agent, &ws).unwrap();
    let id = session["sessionId"].as_str().unwrap().to_string();
    let answer = call(
        &mut agent,
        "session/prompt",
        json!({"sessionId": id, "prompt": [{"type": "text", "text": "hi"}]}),
    )
    .unwrap();
    let cost = answer["_meta"]["spindle"]["usage"]["cost"]
        .as_f64()
        .unwrap();
    // 0.40 for the input and 0.80 for the output.
    assert!((cost - 1.20).abs() < 1e-6, "{answer}");
}

/// Setup takes the listed model the catalog knows and records the context
/// window the server reports for it.
#[test]
fn setup_records_the_listed_models_context_window() {
    let server = FakeServer::start();
    server.serve_models(json!({"data": [
        {"id": "qwen3-32k", "context_length": 32768},
        {"id": "other"},
    ]}));
    let dir = temp_dir("setup-window");
    let config = dir.join("config.json");
    let base = server.base_url();
    let output = setup(
        &[
            "--kind",
            "openai",
            "--base-url",
            &base,
            "--no-key",
            "--no-test",
            "--config",
            path_str(&config),
        ],
        &[],
    );
    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
    let written: Value = serde_json::from_str(&std::fs::read_to_string(&config).unwrap()).unwrap();
    assert_eq!(written["defaults"]["model"], "local/qwen3-32k");
    assert_eq!(
        written["models"]["local/qwen3-32k"]["context_window"], 32768,
        "{written}"
    );
}

/// Without RUST_LOG, a model call leaves no DEBUG lines on stderr (the HTTP
/// and TLS libraries stay quiet).
#[test]
fn no_debug_lines_without_rust_log() {
    let server = FakeServer::start();
    server.push(Reply::Sse(chat_text(&["quiet"])));
    // A process of its own, whose stderr is its log.
    let mut agent = spawned_env_agent(&server);
    let ws = temp_dir("quiet-ws");
    let session = new_session(&mut agent, &ws).unwrap();
    let id = session["sessionId"].as_str().unwrap().to_string();
    call(
        &mut agent,
        "session/prompt",
        json!({"sessionId": id, "prompt": [{"type": "text", "text": "hi"}]}),
    )
    .unwrap();
    let stderr = agent.stderr();
    assert!(
        !stderr.contains("DEBUG") && !stderr.contains("TRACE"),
        "{stderr}"
    );
}

/// The built-in catalog describes models nobody configured: windows,
/// images, reasoning and its effort levels; the config overrides it.
#[test]
fn catalog_models_are_described_without_config() {
    let server = FakeServer::start();
    server.serve_models(json!({"data": [{"id": "gpt-5-mini"}, {"id": "qwen3:8b"},
                                        {"id": "house-model"}]}));
    server.push(Reply::Sse(chat_text(&["thought about it"])));
    let dir = temp_dir("catalog-described");
    let base = server.base_url();
    let config = write_config(
        &dir,
        &json!({"providers": {"gw": {"kind": "openai", "base_url": base, "requires_key": false}},
                "models": {"gw/qwen3:8b": {"context_window": 40960, "reasoning": false}},
                "defaults": {"model": "gw/gpt-5-mini"}}),
    );
    let mut agent = agent_with_config(&config, &[], &[]);
    let ws = temp_dir("catalog-described-ws");
    let session = new_session(&mut agent, &ws).unwrap();
    let id = session["sessionId"].as_str().unwrap().to_string();
    assert_eq!(
        option_values(&session["configOptions"], "effort"),
        ["auto", "minimal", "low", "medium", "high"]
    );
    let models = call(&mut agent, "_spindle/models", json!({"sessionId": id})).unwrap();
    let item = |name: &str| {
        models["items"]
            .as_array()
            .unwrap()
            .iter()
            .find(|m| m["id"] == name)
            .cloned()
            .unwrap_or_else(|| panic!("{name} missing: {models}"))
    };
    let gpt = item("gw/gpt-5-mini");
    assert_eq!(gpt["contextWindow"], 400_000);
    assert_eq!(
        (&gpt["reasoning"], &gpt["images"]),
        (&json!(true), &json!(true))
    );
    assert_eq!(gpt["price"]["input"], 0.25);
    // The config's word wins over the catalog's.
    let qwen = item("gw/qwen3:8b");
    assert_eq!(qwen["contextWindow"], 40960);
    assert_eq!(qwen["reasoning"], false);
    assert!(qwen["price"].is_null(), "{qwen}");
    let house = item("gw/house-model");
    assert_eq!(house["reasoning"], false);
    assert_eq!(house["contextWindow"], 32_768);
    // The balanced preset's effort reaches a reasoning model.
    call(
        &mut agent,
        "session/prompt",
        json!({"sessionId": id, "prompt": [{"type": "text", "text": "hi"}]}),
    )
    .unwrap();
    let sent = server
        .requests()
        .into_iter()
        .find(|r| r.path.ends_with("/chat/completions"))
        .unwrap();
    assert_eq!(sent.body["reasoning_effort"], "medium", "{}", sent.body);
}

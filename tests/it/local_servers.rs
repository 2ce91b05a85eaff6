//! What a real local server (llama.cpp, Ollama) does that others do not:
//! refusing every request with tools, reporting no reasoning count,
//! needing an output limit sent; and how `spindle exec` and `spindle
//! doctor` show it.

use crate::support::fake_openai::{chat_text, chunk_content, chunk_finish, chunk_role, done};
use crate::support::prelude::WAIT;
use crate::support::wire::chat_usage;
use crate::support::{
    in_process, notices_text, temp_dir, write_file, Agent, FakeServer, Reply, Step,
};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::Duration;

/// llama.cpp's answer to tools when its server was started without
/// `--jinja`.
const NO_JINJA: &str =
    r#"{"error":{"code":500,"message":"tools param requires --jinja flag","type":"server_error"}}"#;

fn config_for(dir: &Path, server: &FakeServer, models: Value) -> PathBuf {
    let config = json!({
        "providers": {"local": {"kind": "openai", "base_url": server.base_url(), "requires_key": false}},
        "models": models,
        "defaults": {"model": "local/tiny"},
    });
    write_file(dir, "config.json", config.to_string())
}

/// An agent on `local/tiny` at the fake server, with a session.
fn session(server: &FakeServer, models: Value) -> (Agent, String) {
    let dir = temp_dir("local");
    let config = config_for(&dir, server, models);
    let mut agent = in_process::acp(&["--config", config.to_str().unwrap()]);
    agent.initialize();
    let id = agent.request(
        "session/new",
        json!({"cwd": dir.to_str().unwrap(), "mcpServers": []}),
    );
    let (answer, _) = agent.response(&id, WAIT);
    let session = answer["result"]["sessionId"]
        .as_str()
        .unwrap_or_else(|| panic!("no session: {answer}"))
        .to_string();
    (agent, session)
}

fn prompt(agent: &mut Agent, session: &str) -> (Value, Vec<Value>) {
    let id = agent.request(
        "session/prompt",
        json!({"sessionId": session, "prompt": [{"type": "text", "text": "hi"}]}),
    );
    agent.response(&id, WAIT)
}

#[test]
fn a_server_without_jinja_is_not_retried_and_the_error_says_what_to_do() {
    let server = FakeServer::start();
    server.push(Reply::status(500, NO_JINJA));
    server.push(Reply::Sse(chat_text(&["never reached"])));
    let (mut agent, session) = session(&server, json!({}));
    let (answer, messages) = prompt(&mut agent, &session);
    let error = &answer["error"];
    let message = error["message"].as_str().unwrap_or_default();
    assert!(message.contains("restart it with --jinja"), "{answer}");
    assert_eq!(
        error["data"]["code"], "provider_tools_unsupported",
        "{answer}"
    );
    assert!(
        !notices_text(&messages).contains("retrying"),
        "{messages:#?}"
    );
    // A retry would come after its backoff (0.5 s at least).
    std::thread::sleep(Duration::from_millis(1200));
    assert_eq!(server.requests().len(), 1);
    assert_eq!(server.pending_replies(), 1);

    // Ollama's wording for a model without tools.
    let server = FakeServer::start();
    server.push(Reply::openai_error(
        400,
        "registry.ollama.ai/library/gemma:2b does not support tools",
        "api_error",
        "",
    ));
    let (mut agent, session) = self::session(&server, json!({}));
    let (answer, _) = prompt(&mut agent, &session);
    let message = answer["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("pick a model that supports"), "{answer}");
}

#[test]
fn the_documented_output_limit_is_sent_when_nothing_else_gives_one() {
    let server = FakeServer::start();
    server.push(Reply::Sse(chat_text(&["one"])));
    let (mut agent, session) = session(&server, json!({}));
    let (answer, _) = prompt(&mut agent, &session);
    assert!(answer.get("result").is_some(), "{answer}");
    assert_eq!(server.requests()[0].body["max_completion_tokens"], 8192);

    // A configured limit is sent instead.
    server.push(Reply::Sse(chat_text(&["two"])));
    let (mut agent, session) =
        self::session(&server, json!({"local/tiny": {"max_output_tokens": 1000}}));
    let (answer, _) = prompt(&mut agent, &session);
    assert!(answer.get("result").is_some(), "{answer}");
    assert_eq!(server.requests()[1].body["max_completion_tokens"], 1000);

    // A limit the server's list gives is sent as the cap.
    server.serve_models(json!({"data": [{"id": "tiny", "max_output_tokens": 4000}]}));
    server.push(Reply::Sse(chat_text(&["three"])));
    let (mut agent, session) = self::session(&server, json!({}));
    let (answer, _) = prompt(&mut agent, &session);
    assert!(answer.get("result").is_some(), "{answer}");
    let body = &server.requests()[2].body;
    assert_eq!(body["max_completion_tokens"], 4000, "{body}");
}

fn answer_with_usage(usage: Step) -> Reply {
    Reply::Sse(vec![
        chunk_role(),
        chunk_content("Hi."),
        chunk_finish("stop"),
        usage,
        done(),
    ])
}

#[test]
fn thought_tokens_are_null_unless_the_server_counts_them() {
    let server = FakeServer::start();
    // llama.cpp: no completion_tokens_details at all.
    server.push(answer_with_usage(Step::Event(
        json!({"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "tiny",
               "choices": [],
               "usage": {"prompt_tokens": 12, "completion_tokens": 3, "total_tokens": 15}})
        .to_string(),
    )));
    server.push(answer_with_usage(chat_usage(12, 9, 0, 7)));
    let (mut agent, session) = session(&server, json!({}));
    let (silent, _) = prompt(&mut agent, &session);
    let usage = &silent["result"]["_meta"]["spindle"]["usage"];
    assert_eq!(usage["outputTokens"], 3, "{silent}");
    assert!(usage["thoughtTokens"].is_null(), "{silent}");
    let (counted, _) = prompt(&mut agent, &session);
    let usage = &counted["result"]["_meta"]["spindle"]["usage"];
    assert_eq!(usage["thoughtTokens"], 7, "{counted}");
}

fn spindle(dir: &Path, args: &[&str]) -> Output {
    crate::support::spindle_command(&dir.join("home"))
        .args(args)
        .current_dir(dir)
        .env_remove("RUST_LOG")
        .env_remove("OPENAI_API_KEY")
        .env_remove("ANTHROPIC_API_KEY")
        .env_remove("OLLAMA_HOST")
        .env_remove("OPENAI_BASE_URL")
        .output()
        .unwrap()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[test]
fn exec_shows_each_retry_once() {
    let server = FakeServer::start();
    server.push(Reply::openai_error(
        500,
        "The server had an error",
        "server_error",
        "server_error",
    ));
    server.push(Reply::Sse(chat_text(&["Recovered."])));
    let dir = temp_dir("exec-retry");
    let config = config_for(&dir, &server, json!({}));
    let out = spindle(&dir, &["exec", "--config", config.to_str().unwrap(), "hi"]);
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert_eq!(stdout, "Recovered.\n");
    let all = format!("{stdout}{stderr}");
    assert_eq!(all.matches("retrying in").count(), 1, "{all}");
    assert_eq!(all.matches("The server had an error").count(), 1, "{all}");
}

#[test]
fn doctor_sends_one_tool_and_names_a_server_without_jinja() {
    let server = FakeServer::start();
    server.serve_models(json!({"data": [{"id": "listed-first"}, {"id": "tiny"}]}));
    server.push(Reply::status(500, NO_JINJA));
    let dir = temp_dir("doctor-tools");
    let config = config_for(&dir, &server, json!({}));
    let db = dir.join("none.db");
    let args = [
        "doctor",
        "--config",
        config.to_str().unwrap(),
        "--db",
        db.to_str().unwrap(),
    ];
    let out = spindle(&dir, &args);
    let report = text(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{report}");
    assert!(
        report.contains("FAIL  local tools: tiny refuses tools"),
        "{report}"
    );
    assert!(
        report.contains("→ this llama.cpp server takes no tools: restart it with --jinja"),
        "{report}"
    );
    let requests = server.requests();
    assert_eq!(requests.len(), 1, "not retried");
    assert_eq!(requests[0].body["model"], "tiny");
    assert_eq!(requests[0].body["tools"].as_array().map(Vec::len), Some(1));

    server.push(Reply::Sse(chat_text(&["OK"])));
    let out = spindle(&dir, &args);
    let report = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{report}");
    assert!(
        report.contains("ok    local tools: tiny answers a request with a tool"),
        "{report}"
    );
}

/// Ctrl-C during `exec` cancels the turn (the server's stream is
/// dropped) and says so; exit 130, as a shell reports an interrupt.
#[cfg(unix)]
#[test]
fn exec_interrupted_says_cancelled() {
    let server = FakeServer::start();
    server.push(Reply::Sse(vec![Step::Stall]));
    let dir = temp_dir("exec-sigint");
    let config = config_for(&dir, &server, json!({}));
    let child = crate::support::spindle_command(&dir.join("home"))
        .args(["exec", "--config", config.to_str().unwrap(), "hi"])
        .current_dir(&dir)
        .env_remove("RUST_LOG")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    server.wait_requests(1, Duration::from_secs(20));
    // SAFETY: kill(2) on the child's pid, which it still holds.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let out = child.wait_with_output().unwrap();
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(130), "{stderr}");
    assert!(stderr.contains("spindle: cancelled"), "{stderr}");
}

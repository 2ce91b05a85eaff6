//! `spindle exec --json` in a fleet: stdout is JSON lines only, the last
//! one the result (session, stop reason, last message, files changed with
//! their lines, tokens and cost, budget, exit code).

use crate::support::fake_openai::{chat_text, chat_tool_calls, chunk_finish, chunk_role, done};
use crate::support::wire::chat_usage;
use crate::support::{temp_dir, write_file, FakeServer, Reply};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::Output;

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// A config for the fake server's `local/tiny`, priced in USD per token
/// as `price` (input, output, cached input) gives them per million.
fn config_for(dir: &Path, server: &FakeServer, price: Value) -> PathBuf {
    let config = json!({
        "providers": {"local": {"kind": "openai", "base_url": server.base_url(),
                                "requires_key": false}},
        "models": {"local/tiny": {"price": price}},
        "defaults": {"model": "local/tiny"},
    });
    write_file(dir, "config.json", config.to_string())
}

/// `spindle exec --config … --db … --permissions yolo ARGS…` in `dir`.
fn exec(dir: &Path, config: &Path, args: &[&str]) -> Output {
    let db = dir.join("sessions.db");
    crate::support::spindle_command(&dir.join("home"))
        .arg("exec")
        .arg("--config")
        .arg(config)
        .arg("--db")
        .arg(&db)
        .args(["--permissions", "yolo"])
        .args(args)
        .current_dir(dir)
        .env_remove("RUST_LOG")
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap()
}

/// Every line of stdout, each of which must be one JSON object; the last
/// is the result.
fn json_lines(out: &Output) -> Vec<Value> {
    let stdout = text(&out.stdout);
    assert!(stdout.ends_with('\n'), "{stdout}");
    stdout
        .lines()
        .map(|line| {
            let value: Value = serde_json::from_str(line)
                .unwrap_or_else(|e| panic!("not a JSON line ({e}): {line:?}\n{stdout}"));
            assert!(value.is_object(), "{line}");
            value
        })
        .collect()
}

fn result_of(out: &Output) -> Value {
    let lines = json_lines(out);
    let last = lines.last().cloned().expect("a result line");
    assert_eq!(last["type"], "result", "{last}");
    // Exactly one result line, and it is the last.
    let results = lines.iter().filter(|l| l["type"] == "result").count();
    assert_eq!(results, 1, "{}", text(&out.stdout));
    last
}

/// A tool call answer with its own usage chunk.
fn tool_reply(name: &str, arguments: Value) -> Reply {
    Reply::Sse(chat_tool_calls(&[(name, arguments)]))
}

#[test]
fn the_result_line_says_what_the_run_did_and_cost() {
    let server = FakeServer::start();
    let dir = temp_dir("exec-result");
    write_file(&dir, "edit.txt", "a\nb\nc\n");
    // A dollar a fresh input token, half one a cached one, two an output
    // token.
    let price = json!({"input": 1_000_000.0, "output": 2_000_000.0,
                       "cached_input": 500_000.0, "currency": "USD"});
    let config = config_for(&dir, &server, price);
    // Created (3 lines) and edited (b → B, d added: 2 added, 1 removed).
    server.push(tool_reply(
        "write_file",
        json!({"path": "new.txt", "content": "one\ntwo\nthree\n"}),
    ));
    server.push(tool_reply(
        "write_file",
        json!({"path": "edit.txt", "content": "a\nB\nc\nd\n"}),
    ));
    server.push(Reply::Sse(vec![
        chunk_role(),
        crate::support::fake_openai::chunk_content("Both files are written.\n\"Done\"."),
        chunk_finish("stop"),
        chat_usage(120, 7, 30, 0),
        done(),
    ]));
    let out = exec(&dir, &config, &["--json", "write the files"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let result = result_of(&out);
    let session = result["sessionId"].as_str().expect("a session id");
    assert!(session.starts_with("sess_"), "{result}");
    assert_eq!(result["stopReason"], "end_turn", "{result}");
    assert_eq!(result["message"], "Both files are written.\n\"Done\".");
    assert_eq!(
        result["files"],
        json!([
            {"path": "edit.txt", "added": 2, "removed": 1},
            {"path": "new.txt", "added": 3, "removed": 0},
        ]),
        "{result}"
    );
    // 10 + 10 + 120 input (30 cached), 5 + 5 + 7 output: two tool calls
    // (chat_tool_calls' usage) and the answer.
    let usage = &result["usage"];
    assert_eq!(usage["inputTokens"], 140, "{result}");
    assert_eq!(usage["outputTokens"], 17, "{result}");
    assert_eq!(usage["cachedInputTokens"], 30, "{result}");
    // 2 × (10 + 5 × 2) + (90 + 30 × 0.5 + 7 × 2) = 40 + 119.
    let cost = usage["costUsd"].as_f64().expect("a known cost");
    assert!((cost - 159.0).abs() < 1e-6, "{result}");
    assert!(result["budget"].is_null(), "{result}");
    assert_eq!(result["exitCode"], 0, "{result}");
    // No error: the key is there, null.
    assert!(result.get("error").is_some_and(Value::is_null), "{result}");
    // The session is there to go on with.
    let shown = crate::support::spindle_command(&dir.join("home"))
        .args(["sessions", "show", session, "--db"])
        .arg(dir.join("sessions.db"))
        .output()
        .unwrap();
    assert!(shown.status.success(), "{}", text(&shown.stderr));
    assert!(
        text(&shown.stdout).contains("write the files"),
        "{}",
        text(&shown.stdout)
    );
}

#[test]
fn a_cost_unknown_is_null_and_a_failed_prompt_still_ends_with_a_result() {
    let server = FakeServer::start();
    let dir = temp_dir("exec-result-error");
    let config = write_file(
        &dir,
        "config.json",
        json!({"providers": {"local": {"kind": "openai", "base_url": server.base_url(),
                                       "requires_key": false}},
               "defaults": {"model": "local/tiny"}})
        .to_string(),
    );
    server.push(Reply::Sse(chat_text(&["Fine."])));
    let out = exec(&dir, &config, &["--json", "hi"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let result = result_of(&out);
    assert_eq!(result["message"], "Fine.");
    assert_eq!(result["files"], json!([]), "{result}");
    // No price and none reported: unknown, not free.
    assert!(result["usage"]["costUsd"].is_null(), "{result}");
    assert_eq!(result["usage"]["inputTokens"], 10, "{result}");

    server.push(Reply::openai_error(
        400,
        "bad request",
        "invalid_request_error",
        "x",
    ));
    let out = exec(&dir, &config, &["--json", "--retries", "0", "hi"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    let result = result_of(&out);
    assert!(result["stopReason"].is_null(), "{result}");
    assert!(
        result["error"]
            .as_str()
            .is_some_and(|e| e.contains("bad request")),
        "{result}"
    );
    assert_eq!(result["exitCode"], 1, "{result}");
}

//! `spindle exec --json` in a fleet: stdout is JSON lines only, the last
//! one the result (session, stop reason, last message, files changed with
//! their lines, tokens and cost, budget, exit code); `--max-cost`,
//! `--max-steps` and `--max-minutes` end a run with exit 4 and say which;
//! bad budget values are usage errors (2) before any model call.

use crate::support::fake_openai::{chat_text, chat_tool_calls, chunk_finish, chunk_role, done};
use crate::support::wire::chat_usage;
use crate::support::{temp_dir, write_file, FakeServer, Reply, Step};
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

    // Only a slash command answered here: the session is not kept, so
    // the result names none.
    let calls = server.requests().len();
    let out = exec(&dir, &config, &["--json", "/help"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let result = result_of(&out);
    assert!(result["sessionId"].is_null(), "{result}");
    assert_eq!(result["stopReason"], "end_turn", "{result}");
    assert_eq!(server.requests().len(), calls);
}

/// Queues `count` answers that each read a file, then a last word.
fn push_reads(server: &FakeServer, count: usize) {
    for _ in 0..count {
        server.push(tool_reply("read_file", json!({"path": "a.txt"})));
    }
    server.push(Reply::Sse(chat_text(&["never reached"])));
}

#[test]
fn the_cost_budget_ends_the_run_with_4() {
    let server = FakeServer::start();
    let dir = temp_dir("exec-max-cost");
    write_file(&dir, "a.txt", "a\n");
    // A dollar a token: 15 a call (10 in, 5 out).
    let price = json!({"input": 1_000_000.0, "output": 1_000_000.0, "currency": "USD"});
    let config = config_for(&dir, &server, price);
    push_reads(&server, 10);
    let out = exec(&dir, &config, &["--json", "--max-cost", "20", "read on"]);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(4), "{stderr}");
    assert!(stderr.contains("the --max-cost budget of $20"), "{stderr}");
    let result = result_of(&out);
    assert_eq!(result["budget"], "cost", "{result}");
    assert_eq!(result["stopReason"], "cancelled", "{result}");
    assert_eq!(result["exitCode"], 4, "{result}");
    assert!(!text(&out.stdout).contains("never reached"));
    // 15, then 30: over 20. The calls already under way when the cancel
    // lands may still be made (how many depends on the machine's load),
    // never the whole queue.
    assert!(server.requests().len() < 11, "{}", server.requests().len());
    // A model whose price is in another currency cannot be held to
    // dollars: refused before any call.
    let euros = temp_dir("exec-max-cost-eur");
    let price = json!({"input": 1.0, "output": 1.0, "currency": "EUR"});
    let config = config_for(&euros, &server, price);
    let before = server.requests().len();
    let out = exec(&euros, &config, &["--max-cost", "1", "hi"]);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("price is in EUR"), "{stderr}");
    assert_eq!(server.requests().len(), before);
    let out = exec(&euros, &config, &["--json", "--max-cost", "1", "hi"]);
    let result = result_of(&out);
    assert!(
        result["error"]
            .as_str()
            .is_some_and(|e| e.contains("price is in EUR")),
        "{result}"
    );
    assert_eq!(result["exitCode"], 1, "{result}");
    assert!(result["stopReason"].is_null(), "{result}");
    // No price and no cost reported: the budget cannot be kept, and the
    // run ends rather than spending without a count.
    let unpriced = temp_dir("exec-max-cost-unknown");
    write_file(&unpriced, "a.txt", "a\n");
    let server = FakeServer::start();
    let config = write_file(
        &unpriced,
        "config.json",
        json!({"providers": {"local": {"kind": "openai", "base_url": server.base_url(),
                                       "requires_key": false}},
               "defaults": {"model": "local/tiny"}})
        .to_string(),
    );
    push_reads(&server, 10);
    let out = exec(
        &unpriced,
        &config,
        &["--json", "--max-cost", "5", "read on"],
    );
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(4), "{stderr}");
    assert!(
        stderr.contains("--max-cost cannot be kept: the cost of a model call is unknown"),
        "{stderr}"
    );
    let result = result_of(&out);
    assert_eq!(result["budget"], "cost", "{result}");
    assert!(result["usage"]["costUsd"].is_null(), "{result}");
    assert!(server.requests().len() < 11, "{}", server.requests().len());
}

#[test]
fn the_step_budget_ends_the_run_with_4_and_an_agent_files_limit_with_3() {
    let server = FakeServer::start();
    let dir = temp_dir("exec-max-steps");
    write_file(&dir, "a.txt", "a\n");
    let config = config_for(&dir, &server, json!({"input": 1.0, "output": 1.0}));
    push_reads(&server, 3);
    let out = exec(&dir, &config, &["--json", "--max-steps", "1", "read on"]);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(4), "{stderr}");
    assert!(
        stderr.contains("the --max-steps budget of 1 model call ran out"),
        "{stderr}"
    );
    let result = result_of(&out);
    assert_eq!(result["budget"], "steps", "{result}");
    assert_eq!(result["stopReason"], "max_turn_requests", "{result}");
    assert_eq!(server.requests().len(), 1);
    // The same limit from an agent file is a stop, not exec's budget.
    let agent = write_file(
        &dir,
        "agent.json",
        json!({"name": "short", "maxSteps": 1}).to_string(),
    );
    let server = FakeServer::start();
    let config = config_for(&dir, &server, json!({"input": 1.0, "output": 1.0}));
    push_reads(&server, 3);
    let out = exec(
        &dir,
        &config,
        &["--json", "--agent", agent.to_str().unwrap(), "read on"],
    );
    assert_eq!(out.status.code(), Some(3), "{}", text(&out.stderr));
    let result = result_of(&out);
    assert!(result["budget"].is_null(), "{result}");
    assert_eq!(result["stopReason"], "max_turn_requests", "{result}");
}

#[test]
fn the_minutes_budget_cancels_a_stalled_model_with_4() {
    let server = FakeServer::start();
    let dir = temp_dir("exec-max-minutes");
    let config = config_for(&dir, &server, json!({"input": 1.0, "output": 1.0}));
    // The model starts an answer and then says nothing for a minute.
    server.push(Reply::Sse(vec![chunk_role(), Step::Stall]));
    let started = std::time::Instant::now();
    let out = exec(&dir, &config, &["--json", "--max-minutes", "0.02", "wait"]);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(4), "{stderr}");
    assert!(
        stderr.contains("the --max-minutes budget of 0.02 minutes ran out"),
        "{stderr}"
    );
    let result = result_of(&out);
    assert_eq!(result["budget"], "minutes", "{result}");
    assert_eq!(result["stopReason"], "cancelled", "{result}");
    // Well before the stall's own minute ends.
    assert!(started.elapsed() < std::time::Duration::from_secs(50));
}

#[test]
fn bad_budget_values_are_usage_errors() {
    let server = FakeServer::start();
    let dir = temp_dir("exec-bad-budgets");
    let config = config_for(&dir, &server, json!({"input": 1.0, "output": 1.0}));
    let cases: &[(&str, &[&str])] = &[
        ("--max-cost", &["0", "-1", "NaN", "inf", "ten", "1e300", ""]),
        ("--max-minutes", &["0", "-0.5", "nan", "soon", "1e12"]),
        (
            "--max-steps",
            &[
                "0",
                "-3",
                "1.5",
                "many",
                "100001",
                "99999999999999999999999",
            ],
        ),
    ];
    for (flag, values) in cases {
        for value in *values {
            let joined = format!("{flag}={value}");
            let out = exec(&dir, &config, &["--json", &joined, "hi"]);
            let stderr = text(&out.stderr);
            assert_eq!(out.status.code(), Some(2), "{joined}: {stderr}");
            assert!(
                stderr.contains(&format!("{flag} takes")),
                "{joined}: {stderr}"
            );
            assert!(out.stdout.is_empty(), "{joined}");
        }
    }
    assert!(server.requests().is_empty());
    // chat takes no exec budget but the steps.
    let out = crate::support::spindle_command(&dir.join("home"))
        .args(["chat", "--max-cost", "1"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
}

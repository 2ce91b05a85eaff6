//! The protocol surface with the scripted provider: the handshake, sessions,
//! every error path, panics, piped NDJSON files, and the command line.
//!
//! The handshake and the dispatcher's answers to bad input run on the
//! in-process tier (`support::in_process`); what needs the agent's stderr,
//! an environment variable, a turn, or the binary itself spawns it.

use crate::support::prelude::WAIT;
use crate::support::{in_process, temp_dir, updates_text, write_file, Agent};
use serde_json::{json, Value};
use std::io::Write;
use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

fn script(contents: Value) -> PathBuf {
    write_file(&temp_dir("script"), "script.json", contents.to_string())
}

/// `spindle acp --script SCRIPT`, initialized: in process
/// (`support::in_process`), or a process of its own when `env` sets
/// variables for it.
fn scripted(contents: Value, env: &[(&str, &str)]) -> Agent {
    let path = script(contents);
    let path = path.to_str().unwrap();
    let mut agent = match env.is_empty() {
        true => in_process::acp(&["--script", path]),
        false => Agent::spawn(&["acp", "--script", path], env),
    };
    agent.initialize();
    agent
}

/// `scripted`, in process.
fn scripted_in_process(contents: Value) -> Agent {
    let mut agent = in_process::scripted(&script(contents));
    agent.initialize();
    agent
}

fn error_of(agent: &mut Agent, method: &str, params: Value) -> Value {
    let id = agent.request(method, params);
    let (response, _) = agent.response(&id, WAIT);
    assert!(response.get("result").is_none(), "{method}: {response}");
    response["error"].clone()
}

fn message(error: &Value) -> &str {
    error["message"].as_str().unwrap_or("")
}

#[test]
fn initialize_answers_version_one_and_describes_the_agent() {
    let mut agent = in_process::agent();
    let id = agent.request(
        "initialize",
        json!({"protocolVersion": 2, "clientCapabilities": {"fs": {"readTextFile": true}, "terminal": "yes", "future": {}}}),
    );
    let (response, _) = agent.response(&id, WAIT);
    let result = &response["result"];
    assert_eq!(result["protocolVersion"], 1);
    assert_eq!(result["agentInfo"]["name"], "spindle");
    assert_eq!(result["agentInfo"]["version"], env!("CARGO_PKG_VERSION"));
    // Only what works today is advertised.
    assert_eq!(result["agentCapabilities"]["loadSession"], true);
    assert_eq!(
        result["agentCapabilities"]["sessionCapabilities"],
        json!({"list": {}, "resume": {}, "close": {}, "delete": {}, "fork": {}, "additionalDirectories": {},
               "title": {}, "status": {}, "systemPrompt": {"mode": {"override": {}}}})
    );
    assert_eq!(
        result["agentCapabilities"]["promptCapabilities"],
        json!({"image": true, "audio": false, "embeddedContext": true})
    );
    // Without the client's auth.terminal capability only the re-check is
    // offered; the terminal method (`spindle setup`) needs it.
    assert_eq!(result["authMethods"][0]["id"], "spindle-check");
    assert_eq!(result["authMethods"].as_array().unwrap().len(), 1);
    let mut agent = in_process::agent();
    let id = agent.request(
        "initialize",
        json!({"protocolVersion": 1, "clientCapabilities": {"auth": {"terminal": true}}}),
    );
    let (response, _) = agent.response(&id, WAIT);
    let methods = response["result"]["authMethods"]
        .as_array()
        .unwrap()
        .clone();
    let setup = methods
        .iter()
        .find(|m| m["type"] == "terminal")
        .expect("no terminal auth method");
    assert_eq!(setup["args"], json!(["--setup"]));
}

#[test]
fn requests_before_initialize_are_refused_clearly() {
    let mut agent = in_process::agent();
    let error = error_of(
        &mut agent,
        "session/new",
        json!({"cwd": "/tmp", "mcpServers": []}),
    );
    assert_eq!(error["code"], -32600);
    assert!(message(&error).contains("initialize"), "{error}");
    agent.initialize();
}

#[test]
fn lines_that_are_not_messages_get_errors_and_the_agent_keeps_reading() {
    let mut agent = in_process::agent();
    let cases = [
        ("this is not json", -32700),
        ("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":", -32700),
        ("[]", -32600),
        ("42", -32600),
        ("{\"hello\":\"world\"}", -32600),
        (
            "{\"jsonrpc\":\"1.0\",\"id\":7,\"method\":\"initialize\"}",
            -32600,
        ),
        ("{\"jsonrpc\":\"2.0\",\"id\":8,\"method\":3}", -32600),
        (
            "{\"jsonrpc\":\"2.0\",\"id\":{\"x\":1},\"method\":\"initialize\"}",
            -32600,
        ),
    ];
    for (line, code) in cases {
        agent.send_raw(line);
        let reply = agent.recv(WAIT).expect("no answer to a bad line");
        assert_eq!(reply["error"]["code"], code, "{line} -> {reply}");
    }
    // An id that could be read is echoed.
    agent.send_raw("{\"jsonrpc\":\"1.0\",\"id\":7,\"method\":\"initialize\"}");
    assert_eq!(agent.recv(WAIT).unwrap()["id"], 7);
    agent.initialize();
}

#[test]
#[cfg_attr(windows, ignore = "requests name Unix paths (/tmp, /)")]
fn unknown_methods_and_notifications() {
    let mut agent = scripted_in_process(json!({"fallback": {"text": "ok"}}));
    for method in [
        "session/fly",
        "_vendor.example/thing",
        "_spindle/test/panic",
    ] {
        let error = error_of(&mut agent, method, json!({}));
        assert_eq!(error["code"], -32601, "{method}");
        assert!(message(&error).contains(method));
    }
    // Unknown notifications are ignored silently; a response to an id we
    // never sent is dropped.
    agent.notify("session/unheard_of", json!({"x": 1}));
    agent.notify("_vendor.example/ping", json!({}));
    agent.send(json!({"jsonrpc": "2.0", "id": 991, "result": {}}));
    agent.send(json!({"jsonrpc": "2.0", "id": "nope", "error": {"code": 1, "message": "m"}}));
    assert!(agent.recv(Duration::from_millis(300)).is_none());
    let id = agent.request("session/new", json!({"cwd": "/", "mcpServers": []}));
    let (response, others) = agent.response(&id, WAIT);
    assert!(response["result"]["sessionId"].is_string());
    assert!(others.is_empty(), "{others:?}");
}

/// The dropped responses of `unknown_methods_and_notifications` are
/// logged (on stderr, so with the binary).
#[test]
#[cfg_attr(windows, ignore = "requests name Unix paths (/tmp, /)")]
fn responses_to_unknown_ids_are_logged() {
    let mut agent = Agent::spawn(&["acp"], &[("OPENAI_API_KEY", "sk-test")]);
    agent.initialize();
    agent.send(json!({"jsonrpc": "2.0", "id": 991, "result": {}}));
    agent.send(json!({"jsonrpc": "2.0", "id": "nope", "error": {"code": 1, "message": "m"}}));
    // The agent reads in order: by this answer it has seen both.
    let id = agent.request("session/new", json!({"cwd": "/", "mcpServers": []}));
    let (response, others) = agent.response(&id, WAIT);
    assert!(response["result"]["sessionId"].is_string());
    assert!(others.is_empty(), "{others:?}");
    let stderr = agent.stderr();
    assert!(stderr.contains("unknown request id 991"), "{stderr}");
    assert!(stderr.contains("unknown request id \"nope\""), "{stderr}");
}

#[test]
#[cfg_attr(windows, ignore = "requests name Unix paths (/tmp, /)")]
fn session_new_checks_its_params() {
    // A script stands for the model (session/new needs one); the
    // environment's keys are the test process's here.
    let mut agent = scripted_in_process(json!({"fallback": {"text": "ok"}}));
    let file = write_file(&temp_dir("cwd"), "file.txt", "x");
    let cases = [
        (
            json!({"cwd": "relative/path", "mcpServers": []}),
            "absolute",
        ),
        (
            json!({"cwd": "/no/such/dir/spindle", "mcpServers": []}),
            "/no/such/dir/spindle",
        ),
        (
            json!({"cwd": file.to_str().unwrap(), "mcpServers": []}),
            "not a directory",
        ),
        (json!({"cwd": "/tmp"}), "mcpServers"),
        (json!({"mcpServers": []}), "cwd"),
        (json!({"cwd": 5, "mcpServers": []}), "cwd"),
        (
            json!({"cwd": "/tmp", "mcpServers": [], "_meta": {"spindle": {"sessionId": "../etc"}}}),
            "sessionId",
        ),
        (
            json!({"cwd": "/tmp", "mcpServers": [], "_meta": {"spindle": {"sessionId": 3}}}),
            "sessionId",
        ),
    ];
    for (params, needle) in cases {
        let error = error_of(&mut agent, "session/new", params.clone());
        assert_eq!(error["code"], -32602, "{params}");
        assert!(message(&error).contains(needle), "{params}: {error}");
    }
    // Ids are unique; a client-chosen one can be used once.
    let one = agent.new_session(&temp_dir("a"));
    let two = agent.new_session(&temp_dir("b"));
    assert_ne!(one, two);
    let params =
        json!({"cwd": "/tmp", "mcpServers": [], "_meta": {"spindle": {"sessionId": "mine"}}});
    let id = agent.request("session/new", params.clone());
    assert_eq!(agent.response(&id, WAIT).0["result"]["sessionId"], "mine");
    let error = error_of(&mut agent, "session/new", params);
    assert_eq!(error["code"], -32602);
    assert!(message(&error).contains("already in use"));
}

#[test]
fn session_prompt_checks_its_params() {
    let mut agent = scripted_in_process(json!({"fallback": {"text": "ok"}}));
    let session = agent.new_session(&temp_dir("prompt-params"));
    let cases = [
        (
            json!({"sessionId": "nope", "prompt": [{"type": "text", "text": "hi"}]}),
            "nope",
        ),
        (json!({"sessionId": session, "prompt": []}), "empty"),
        (
            json!({"sessionId": session, "prompt": [{"type": "text", "text": "   "}]}),
            "empty",
        ),
        (json!({"sessionId": session}), "prompt"),
        (
            json!({"sessionId": session, "prompt": [{"type": "image", "data": "AAAA", "mimeType": "image/png"}]}),
            "image",
        ),
        (
            json!({"sessionId": session, "prompt": [{"type": "hologram"}]}),
            "hologram",
        ),
        (
            json!({"sessionId": session, "prompt": [{"type": "text"}]}),
            "text",
        ),
    ];
    for (params, needle) in cases {
        let error = error_of(&mut agent, "session/prompt", params.clone());
        // An unknown session is a missing resource; the rest are bad params.
        let expected = if needle == "nope" { -32002 } else { -32602 };
        assert_eq!(error["code"], expected, "{params}");
        assert!(message(&error).contains(needle), "{params}: {error}");
    }
    // Cancelling an unknown or idle session is a no-op notification.
    agent.notify("session/cancel", json!({"sessionId": "nope"}));
    agent.notify("session/cancel", json!({"sessionId": session}));
    agent.notify("session/cancel", json!({"wrong": true}));
    assert!(agent.recv(Duration::from_millis(200)).is_none());
}

#[test]
fn resource_links_reach_the_model_as_references() {
    let mut agent = scripted(
        json!({"rules": [{"when": {"contains": "[@main.rs](file:///w/src/main.rs)"}, "reply": {"text": "I see main.rs"}}],
               "fallback": {"text": "no link"}}),
        &[],
    );
    let session = agent.new_session(&temp_dir("link"));
    let id = agent.request(
        "session/prompt",
        json!({"sessionId": session, "prompt": [
            {"type": "text", "text": "Explain"},
            {"type": "resource_link", "uri": "file:///w/src/main.rs", "name": "main.rs"}
        ]}),
    );
    let (response, updates) = agent.response(&id, WAIT);
    assert_eq!(response["result"]["stopReason"], "end_turn");
    assert_eq!(
        updates_text(&updates, "agent_message_chunk"),
        "I see main.rs"
    );
}

#[test]
fn scripted_replies_stream_through_the_pipeline() {
    let mut agent = scripted(
        json!({
            "replies": [
                {"thought": "Let me think.", "text": "First answer.", "usage": {"input_tokens": 3, "output_tokens": 2}},
                {"chunks": [{"text": "Sec"}, {"sleep_ms": 20}, {"text": "ond"}], "stop": "max_tokens"}
            ],
            "rules": [{"when": {"starts_with": "/refuse"}, "reply": {"text": "No.", "stop": "refusal"}}]
        }),
        &[],
    );
    let session = agent.new_session(&temp_dir("scripted"));
    let mut run = |text: &str| {
        let id = agent.request(
            "session/prompt",
            json!({"sessionId": session, "prompt": [{"type": "text", "text": text}]}),
        );
        agent.response(&id, WAIT)
    };
    let (response, updates) = run("hello");
    assert_eq!(response["result"]["stopReason"], "end_turn");
    assert_eq!(
        updates_text(&updates, "agent_thought_chunk"),
        "Let me think."
    );
    assert_eq!(
        updates_text(&updates, "agent_message_chunk"),
        "First answer."
    );
    let (response, _) = run("/refuse this");
    assert_eq!(response["result"]["stopReason"], "refusal");
    let (response, updates) = run("more");
    assert_eq!(response["result"]["stopReason"], "max_tokens");
    assert_eq!(updates_text(&updates, "agent_message_chunk"), "Second");
    let (response, _) = run("and more");
    assert_eq!(response["error"]["code"], -32603);
    assert_eq!(response["error"]["data"]["code"], "script_exhausted");
}

#[test]
fn scripted_errors_keep_their_code_and_the_streamed_text() {
    let mut agent = scripted(
        json!({"replies": [
            {"text": "Partial", "error": {"code": "provider_http_429", "message": "Rate limit reached"}},
            {"text": "Recovered"}
        ]}),
        &[],
    );
    let session = agent.new_session(&temp_dir("script-error"));
    let id = agent.request(
        "session/prompt",
        json!({"sessionId": session, "prompt": [{"type": "text", "text": "go"}]}),
    );
    let (response, updates) = agent.response(&id, WAIT);
    assert_eq!(response["error"]["code"], -32603);
    assert_eq!(response["error"]["data"]["code"], "provider_http_429");
    assert!(message(&response["error"]).contains("Rate limit reached"));
    assert_eq!(updates_text(&updates, "agent_message_chunk"), "Partial");
    let id = agent.request(
        "session/prompt",
        json!({"sessionId": session, "prompt": [{"type": "text", "text": "again"}]}),
    );
    assert_eq!(
        agent.response(&id, WAIT).0["result"]["stopReason"],
        "end_turn"
    );
}

#[test]
fn panics_become_internal_errors_and_the_agent_lives_on() {
    let mut agent = scripted(
        json!({"replies": [{"text": "Before ", "panic": "boom"}, {"text": "After"}]}),
        &[("SPINDLE_TEST_HOOKS", "1")],
    );
    let error = error_of(&mut agent, "_spindle/test/panic", json!({}));
    assert_eq!(error["code"], -32603);
    assert_eq!(error["data"]["code"], "internal_panic");

    let session = agent.new_session(&temp_dir("panic"));
    let id = agent.request(
        "session/prompt",
        json!({"sessionId": session, "prompt": [{"type": "text", "text": "go"}]}),
    );
    let (response, _) = agent.response(&id, WAIT);
    assert_eq!(response["error"]["code"], -32603);
    assert!(message(&response["error"]).contains("boom"));
    // The session is usable again.
    let id = agent.request(
        "session/prompt",
        json!({"sessionId": session, "prompt": [{"type": "text", "text": "again"}]}),
    );
    let (response, updates) = agent.response(&id, WAIT);
    assert_eq!(response["result"]["stopReason"], "end_turn");
    assert_eq!(updates_text(&updates, "agent_message_chunk"), "After");
}

#[test]
fn cancel_a_slow_scripted_stream() {
    let path = script(
        json!({"fallback": {"text": "one two three four five six seven eight nine ten", "chunk_delay_ms": 300}}),
    );
    let mut agent = in_process::acp(&["--script", path.to_str().unwrap()]);
    agent.initialize_with_events();
    let session = agent.new_session(&temp_dir("script-cancel"));
    let id = agent.request(
        "session/prompt",
        json!({"sessionId": session, "prompt": [{"type": "text", "text": "count"}]}),
    );
    // The session's commands (sent after session/new), its new title, then
    // the stream.
    let commands = agent.recv(WAIT).expect("no commands");
    assert_eq!(
        commands["params"]["update"]["sessionUpdate"],
        "available_commands_update"
    );
    // The turn's `running` event comes before any of its updates.
    let running = agent.recv(WAIT).expect("no turn event");
    assert_eq!(running["method"], "_spindle/event", "{running}");
    assert_eq!(running["params"]["kind"], "turn");
    assert_eq!(running["params"]["data"]["state"], "running");
    let title = agent.recv(WAIT).expect("no title");
    assert_eq!(
        title["params"]["update"]["sessionUpdate"],
        "session_info_update"
    );
    assert_eq!(title["params"]["update"]["title"], "count");
    let first = agent.recv(WAIT).expect("no chunk");
    assert_eq!(
        first["params"]["update"]["sessionUpdate"],
        "agent_message_chunk"
    );
    agent.notify("session/cancel", json!({"sessionId": session}));
    let (response, _) = agent.response(&id, WAIT);
    assert_eq!(response["result"]["stopReason"], "cancelled");
}

/// Runs the binary with a whole NDJSON file on stdin, like a shell pipe.
fn pipe(args: &[&str], input: &str) -> (std::process::ExitStatus, Vec<Value>, String) {
    let mut child = crate::support::spindle_command(&crate::support::temp_dir("home"))
        .args(args)
        .env_remove("RUST_LOG")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let input = input.to_string();
    let writer = std::thread::spawn(move || {
        let _ = stdin.write_all(input.as_bytes());
    });
    let output = child.wait_with_output().unwrap();
    writer.join().unwrap();
    let stdout = String::from_utf8(output.stdout).expect("stdout is UTF-8");
    let messages = stdout
        .lines()
        .map(|line| {
            let value: Value = serde_json::from_str(line)
                .unwrap_or_else(|e| panic!("stdout line is not JSON ({e}): {line}"));
            crate::support::validate_agent_message(&value, method_for(&value))
                .unwrap_or_else(|e| panic!("{e}"));
            value
        })
        .collect();
    (
        output.status,
        messages,
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

/// The method of the request each answer in the example files belongs to.
fn method_for(message: &Value) -> Option<&'static str> {
    if message.get("method").is_some() {
        return None;
    }
    match message["id"].as_i64() {
        Some(0) => Some("initialize"),
        Some(1) => Some("session/new"),
        Some(2) => Some("session/prompt"),
        _ => None,
    }
}

fn repo_file(path: &str) -> String {
    format!("{}/{path}", env!("CARGO_MANIFEST_DIR"))
}

#[test]
#[cfg_attr(windows, ignore = "requests name Unix paths (/tmp, /)")]
fn the_readme_demo_pipes_an_ndjson_file_with_a_chosen_session_id() {
    let input = std::fs::read_to_string(repo_file("examples/hello.ndjson")).unwrap();
    let script = repo_file("examples/hello.script.json");
    let (status, messages, stderr) = pipe(&["acp", "--script", &script, "--drain"], &input);
    assert!(status.success(), "{status:?} {stderr}");
    assert_eq!(messages[0]["result"]["protocolVersion"], 1);
    assert_eq!(messages[1]["result"]["sessionId"], "demo");
    let last = messages.last().unwrap();
    assert_eq!(last["id"], 2);
    assert_eq!(last["result"]["stopReason"], "end_turn");
    assert!(updates_text(&messages, "agent_message_chunk").starts_with("Hello! I am Spindle"));
    assert!(!updates_text(&messages, "agent_thought_chunk").is_empty());
    for update in &messages[2..messages.len() - 1] {
        assert_eq!(update["params"]["sessionId"], "demo");
    }
}

/// The steering example: the steer reaches the turn, the queued
/// follow-up runs by itself after it (under `--drain`).
#[test]
#[cfg_attr(windows, ignore = "requests name Unix paths (/tmp, /)")]
fn the_steering_example_steers_then_runs_the_queued_follow_up() {
    let input = std::fs::read_to_string(repo_file("examples/steer.ndjson")).unwrap();
    let script = repo_file("examples/steer.script.json");
    let (status, messages, stderr) = pipe(&["acp", "--script", &script, "--drain"], &input);
    assert!(status.success(), "{status:?} {stderr}");
    let answer = |id: u64| messages.iter().find(|m| m["id"] == id).cloned().unwrap();
    assert_eq!(answer(3)["result"]["disposition"], "steer_accepted");
    assert_eq!(answer(4)["result"]["disposition"], "queued");
    assert_eq!(answer(2)["result"]["stopReason"], "end_turn");
    let text = updates_text(&messages, "agent_message_chunk");
    assert!(text.contains("the compiler keeps its word"), "{text}");
    assert!(text.contains("rows sleep safe on disk"), "{text}");
    let idle: Vec<&Value> = messages
        .iter()
        .filter(|m| m["method"] == "_spindle/event" && m["params"]["data"]["state"] == "idle")
        .collect();
    // The steer lands in the first turn, or (when that turn is past its
    // last boundary already) starts the next one; the follow-up is last.
    assert!((2..=3).contains(&idle.len()), "{idle:#?}");
    assert_eq!(idle.last().unwrap()["params"]["data"]["source"], "queue");
}

#[test]
#[cfg_attr(windows, ignore = "requests name Unix paths (/tmp, /)")]
fn without_drain_a_piped_file_ends_with_a_cancelled_turn() {
    let dir = temp_dir("pipe");
    let script = write_file(
        &dir,
        "slow.json",
        json!({"fallback": {"text": "a b c d e f g h", "chunk_delay_ms": 200}}).to_string(),
    );
    let input = std::fs::read_to_string(repo_file("examples/hello.ndjson")).unwrap();
    let started = std::time::Instant::now();
    let (status, messages, stderr) = pipe(&["acp", "--script", script.to_str().unwrap()], &input);
    eprintln!("exited after {:?}", started.elapsed());
    assert!(status.success(), "{status:?} {stderr}");
    let last = messages.last().unwrap();
    assert_eq!(last["id"], 2);
    assert_eq!(last["result"]["stopReason"], "cancelled");
}

#[test]
fn command_line_help_version_and_usage_errors() {
    let run = |args: &[&str]| {
        crate::support::spindle_command(&crate::support::temp_dir("home"))
            .args(args)
            .stdin(Stdio::null())
            .output()
            .unwrap()
    };
    let help = run(&["--help"]);
    assert!(help.status.success());
    assert!(String::from_utf8_lossy(&help.stdout).contains("spindle acp"));
    let version = run(&["--version"]);
    assert!(version.status.success());
    let printed = String::from_utf8_lossy(&version.stdout).into_owned();
    assert!(printed.contains(env!("CARGO_PKG_VERSION")));
    // Built in a git checkout (as the tests are), it names its commit.
    if std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join(".git")
        .exists()
    {
        let head = std::process::Command::new("git")
            .args(["rev-parse", "--short=12", "HEAD"])
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
            .unwrap_or_default();
        if !head.is_empty() {
            assert!(printed.contains("(commit "), "{printed}");
        }
    }
    for args in [
        &["acp", "--frobnicate"][..],
        &["fly"][..],
        &[][..],
        &["acp", "--stall-timeout", "soon"][..],
        &["acp", "--model"][..],
    ] {
        let output = run(args);
        assert_eq!(output.status.code(), Some(2), "{args:?}");
        assert!(output.stdout.is_empty(), "{args:?}");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(stderr.contains("spindle:"), "{args:?}: {stderr}");
    }
    let bad = write_file(
        &temp_dir("bad-script"),
        "bad.json",
        r#"{"replies": [{"txt": "typo"}]}"#,
    );
    let output = run(&["acp", "--script", bad.to_str().unwrap()]);
    assert_eq!(output.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("bad.json") && stderr.contains("txt"),
        "{stderr}"
    );
    assert!(output.stdout.is_empty());
}

/// A JSON-RPC batch is answered as a batch (JSON-RPC 2.0 §6): an array with
/// an error for each request or non-message in it, none for notifications;
/// an empty one gets a single error; and the agent goes on serving.
#[test]
fn a_batch_gets_an_array_of_answers() {
    let input = [
        r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}"#,
        r#"[{"jsonrpc":"2.0","id":5,"method":"session/list","params":{}},{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"x"}},7]"#,
        r#"[{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"x"}}]"#,
        "[]",
        r#"{"jsonrpc":"2.0","id":2,"method":"session/list","params":{}}"#,
    ]
    .join("\n")
        + "\n";
    let mut child = crate::support::spindle_command(&crate::support::temp_dir("home"))
        .args(["acp", "--script", &repo_file("examples/hello.script.json")])
        .env_remove("RUST_LOG")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    let output = child.wait_with_output().unwrap();
    assert!(output.status.success());
    let lines: Vec<Value> = String::from_utf8(output.stdout)
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    assert_eq!(lines.len(), 4, "{lines:#?}");
    let batch = lines[1].as_array().expect("the batch's answer is an array");
    assert_eq!(batch.len(), 2, "{batch:?}");
    assert_eq!(batch[0]["id"], 5);
    assert_eq!(batch[1]["id"], Value::Null);
    for answer in batch {
        assert_eq!(answer["error"]["code"], -32600);
        crate::support::validate_agent_message(answer, None).unwrap();
    }
    // The batch of one notification got nothing; the empty one one error.
    assert_eq!(lines[2]["error"]["code"], -32600, "{}", lines[2]);
    assert!(lines[2].get("id").is_some());
    assert_eq!(lines[3]["id"], 2);
    assert!(lines[3].get("result").is_some(), "{}", lines[3]);
}

/// The terminal auth method (`spindle setup`) is offered to a client that
/// announces terminal auth either way: `auth.terminal: true`, or the older
/// `_meta["terminal-auth"]: true` that the ACP registry's check still
/// sends; never to one that announces neither (or only in a wrong shape).
#[test]
fn terminal_auth_is_offered_to_either_announcement_and_only_then() {
    let offered = |capabilities: Value| -> Vec<Value> {
        // A process of its own: the method's arguments are its command line.
        let mut agent = Agent::spawn(&["acp", "--permissions", "ask"], &[]);
        let result = agent.initialize_with(capabilities);
        result["authMethods"]
            .as_array()
            .cloned()
            .unwrap_or_default()
    };
    for capabilities in [
        json!({"auth": {"terminal": true}}),
        json!({"_meta": {"terminal-auth": true}}),
        json!({"terminal": true, "_meta": {"terminal-auth": true}}),
    ] {
        let methods = offered(capabilities.clone());
        assert_eq!(methods.len(), 2, "{capabilities}: {methods:?}");
        let setup = &methods[1];
        assert_eq!(setup["id"], "spindle-setup", "{capabilities}");
        assert_eq!(setup["type"], "terminal");
        assert_eq!(setup["args"], json!(["--setup"]));
        // The older form: the whole command line, `--setup` added.
        let legacy = &setup["_meta"]["terminal-auth"];
        assert_eq!(
            legacy["args"],
            json!(["acp", "--permissions", "ask", "--setup"])
        );
        // The running binary itself, by its absolute path.
        let command = std::path::Path::new(legacy["command"].as_str().unwrap_or_default());
        assert!(command.is_absolute() && command.is_file(), "{legacy}");
        let name = command.file_stem().and_then(|stem| stem.to_str());
        assert!(
            name.is_some_and(|name| name.starts_with("spindle")),
            "{legacy}"
        );
    }
    for capabilities in [
        json!({}),
        json!({"terminal": true}),
        json!({"auth": {"terminal": false}, "_meta": {"terminal-auth": false}}),
        json!({"auth": {"terminal": "yes"}, "_meta": {"terminal-auth": {"enabled": true}}}),
        json!({"_meta": {"spindle": {"terminal-auth": true}}}),
    ] {
        let methods = offered(capabilities.clone());
        assert_eq!(methods.len(), 1, "{capabilities}: {methods:?}");
        assert_eq!(methods[0]["id"], "spindle-check");
    }
}

/// The agent's start uses the config its command loaded (handed down in
/// `Options::loaded`) and reads the file again only when asked to
/// (`authenticate`): the file it names is broken from the start, so any
/// second read at start would refuse the session.
#[test]
fn the_start_uses_the_config_it_was_given_and_only_a_reload_reads_the_file() {
    let dir = temp_dir("loaded-once");
    let good = json!({
        "providers": {"local": {"kind": "openai", "base_url": "http://127.0.0.1:9/v1", "requires_key": false}},
        "models": {"local/m": {}},
        "defaults": {"model": "local/m"},
    });
    let good = write_file(&dir, "good.json", good.to_string());
    let loaded = spindle::config::loaded::Loaded::load(Some(&good));
    assert!(loaded.config().is_some());
    let broken = write_file(&dir, "config.json", "{ not json");
    let mut agent = in_process::with_options(|options| {
        options.config = Some(broken.clone());
        options.loaded = Some(loaded.clone());
    });
    agent.initialize();
    let id = agent.request(
        "session/new",
        json!({"cwd": temp_dir("loaded-once-work").to_str().unwrap(), "mcpServers": []}),
    );
    let (response, _) = agent.response(&id, WAIT);
    assert!(response["result"]["sessionId"].is_string(), "{response}");
    let model = response["result"]["configOptions"]
        .as_array()
        .and_then(|options| options.iter().find(|option| option["id"] == "model"))
        .map(|option| option["currentValue"].clone());
    assert_eq!(model, Some(json!("local/m")), "{response}");
    let id = agent.request("authenticate", json!({"methodId": "spindle-check"}));
    let (response, _) = agent.response(&id, WAIT);
    assert_eq!(
        response["error"]["data"]["code"], "config_invalid",
        "{response}"
    );
}

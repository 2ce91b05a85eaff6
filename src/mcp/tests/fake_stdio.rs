//! A fake stdio MCP server: this test binary started again with
//! `SPINDLE_MCP_FAKE_SERVER` set serves MCP on stdin/stdout until stdin
//! closes. On Linux a constructor in `.init_array` (run by the loader
//! before `main`) becomes the server, so it is no test the harness lists
//! or counts; other systems keep the `fake_stdio_server` entry test until
//! they get a constructor of their own.
//!
//! Knobs (environment): `FAKE_DELAY_MS` delays the `initialize` answer,
//! `FAKE_VERSION` replaces the protocol version it answers with,
//! `FAKE_SECRET` is printed to stderr, `FAKE_MARKER` is the file that
//! `crash_once` uses to crash only once, `FAKE_PID_FILE` receives the
//! server's pid, `FAKE_CUSTOM` is reported by the `env` tool, and
//! `FAKE_CURSOR_BYTES` makes the first `tools/list` cursor that long.
//!
//! Tools, over two pages: `echo`, `image`, `structured` | `fail`, `env`,
//! `slow`, `crash`, `crash_once`, `quit`, `change`, `ping_me`,
//! `spawn_child` (and `added` after `change`).

use crate::mcp::{ServerConfig, TransportConfig};
use serde_json::{json, Value};
use std::io::{BufRead, Write};
use std::time::Duration;

const SERVER_ENV: &str = "SPINDLE_MCP_FAKE_SERVER";

/// The configuration that starts the fake server, with `env` added.
pub(crate) fn config(name: &str, env: &[(&str, &str)]) -> ServerConfig {
    let exe = std::env::current_exe().expect("the test binary has a path");
    let mut all_env = vec![(SERVER_ENV.to_string(), "1".to_string())];
    all_env.extend(env.iter().map(|(k, v)| (k.to_string(), v.to_string())));
    ServerConfig {
        name: name.to_string(),
        transport: TransportConfig::Stdio {
            command: exe.to_string_lossy().into_owned(),
            args: server_args(),
            env: all_env,
        },
        env_remove: Vec::new(),
        message_cap: None,
        elicitation: Default::default(),
        tokens: None,
        trust: Default::default(),
    }
}

/// The arguments that make the test binary run only the server: on
/// Linux they name no test (the constructor serves before the harness
/// would run anything), elsewhere the entry test.
pub(crate) fn server_args() -> Vec<String> {
    let entry = if cfg!(target_os = "linux") {
        "no test: the fake MCP server"
    } else {
        "mcp::tests::fake_stdio::fake_stdio_server"
    };
    ["--exact", entry, "--nocapture", "--test-threads=1"]
        .map(str::to_string)
        .to_vec()
}

pub(crate) fn server_env_name() -> &'static str {
    SERVER_ENV
}

#[cfg(target_os = "linux")]
#[used]
#[link_section = ".init_array"]
static ENTRY: extern "C" fn() = entry;

/// Becomes the server, before the harness starts, when started by a test.
#[cfg(target_os = "linux")]
extern "C" fn entry() {
    if std::env::var_os(SERVER_ENV).is_some() {
        serve();
        std::process::exit(0);
    }
}

/// Does nothing in a normal test run; is the server when started by a test.
#[cfg(not(target_os = "linux"))]
#[test]
fn fake_stdio_server() {
    if std::env::var_os(SERVER_ENV).is_none() {
        return;
    }
    serve();
    std::process::exit(0);
}

fn send(message: &Value) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{message}");
    let _ = out.flush();
}

fn env(name: &str) -> Option<String> {
    std::env::var(name).ok()
}

fn serve() {
    {
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "fake MCP server starting (this line is not JSON)");
        let _ = out.flush();
    }
    if let Some(secret) = env("FAKE_SECRET") {
        eprintln!("token={secret} loaded");
    }
    if let Some(path) = env("FAKE_PID_FILE") {
        let _ = std::fs::write(path, std::process::id().to_string());
    }
    let mut changed = false;
    let stdin = std::io::stdin();
    let mut lines = stdin.lock().lines();
    while let Some(Ok(line)) = lines.next() {
        let Ok(message) = serde_json::from_str::<Value>(&line) else {
            continue;
        };
        let (Some(method), Some(id)) = (message["method"].as_str(), message.get("id")) else {
            continue;
        };
        let outcome = match method {
            "initialize" => {
                let delay = env("FAKE_DELAY_MS").and_then(|ms| ms.parse().ok());
                std::thread::sleep(Duration::from_millis(delay.unwrap_or(0)));
                let version = env("FAKE_VERSION").unwrap_or_else(|| {
                    message["params"]["protocolVersion"]
                        .as_str()
                        .unwrap_or("")
                        .to_string()
                });
                Ok(json!({
                    "protocolVersion": version,
                    "capabilities": {"tools": {"listChanged": true}, "logging": {}},
                    "serverInfo": {"name": "fake", "version": "1.0.0"},
                    "instructions": "Use the fake tools.",
                }))
            }
            "tools/list" => Ok(page(message["params"]["cursor"].as_str(), changed)),
            "tools/call" => {
                let name = message["params"]["name"].as_str().unwrap_or("");
                call(
                    name,
                    &message["params"]["arguments"],
                    &mut lines,
                    &mut changed,
                )
            }
            _ => Err((-32601, format!("Method not found: {method}"))),
        };
        let response = match outcome {
            Ok(result) => json!({"jsonrpc": "2.0", "id": id, "result": result}),
            Err((code, text)) => {
                json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": text}})
            }
        };
        send(&response);
        if method == "tools/call" && message["params"]["name"] == "quit" {
            std::process::exit(0);
        }
    }
}

fn tool(name: &str) -> Value {
    match name {
        "echo" => json!({"name": "echo", "description": "Echoes its text",
            "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}},
            "annotations": {"readOnlyHint": true}}),
        "crash" => json!({"name": "crash", "inputSchema": {"type": "object"},
            "annotations": {"destructiveHint": true}}),
        _ => json!({"name": name, "inputSchema": {"type": "object"}}),
    }
}

fn page(cursor: Option<&str>, changed: bool) -> Value {
    match cursor {
        None => {
            let tools = ["echo", "image", "structured"].map(tool);
            // `FAKE_CURSOR_BYTES`: a first cursor of that many bytes.
            let cursor = match std::env::var("FAKE_CURSOR_BYTES")
                .ok()
                .and_then(|n| n.parse().ok())
            {
                Some(bytes) => "c".repeat(bytes),
                None => "page-2".to_string(),
            };
            json!({"tools": tools, "nextCursor": cursor})
        }
        Some(_) => {
            let mut tools: Vec<Value> = [
                "fail",
                "env",
                "slow",
                "crash",
                "crash_once",
                "quit",
                "change",
                "ping_me",
                "spawn_child",
            ]
            .map(tool)
            .to_vec();
            if changed {
                tools.push(tool("added"));
            }
            json!({"tools": tools})
        }
    }
}

fn text(text: impl Into<String>) -> Result<Value, (i64, String)> {
    Ok(json!({"content": [{"type": "text", "text": text.into()}]}))
}

/// Sends a request to the client and returns its reply.
fn ask(lines: &mut impl Iterator<Item = std::io::Result<String>>, id: &str, method: &str) -> Value {
    send(&json!({"jsonrpc": "2.0", "id": id, "method": method}));
    for line in lines.by_ref() {
        let Ok(line) = line else { break };
        if let Ok(reply) = serde_json::from_str::<Value>(&line) {
            if reply["id"] == id {
                return reply;
            }
        }
    }
    Value::Null
}

fn call(
    name: &str,
    arguments: &Value,
    lines: &mut impl Iterator<Item = std::io::Result<String>>,
    changed: &mut bool,
) -> Result<Value, (i64, String)> {
    match name {
        "echo" => text(arguments["text"].as_str().unwrap_or("")),
        "image" => Ok(json!({"content": [
            {"type": "text", "text": "a picture"},
            {"type": "image", "data": "iVBORw0KGgo=", "mimeType": "image/png"},
        ]})),
        "structured" => Ok(json!({"content": [], "structuredContent": {"answer": 42}})),
        "fail" => Ok(json!({"content": [{"type": "text", "text": "it failed"}], "isError": true})),
        "env" => text(json!({"path": env("PATH"), "custom": env("FAKE_CUSTOM")}).to_string()),
        "slow" => {
            let ms = arguments["ms"].as_u64().unwrap_or(1000);
            std::thread::sleep(Duration::from_millis(ms));
            text("slept")
        }
        "crash" => std::process::exit(3),
        "crash_once" => {
            let marker = env("FAKE_MARKER").expect("FAKE_MARKER is set");
            if std::fs::metadata(&marker).is_err() {
                let _ = std::fs::write(&marker, "crashed");
                std::process::exit(3);
            }
            text("recovered")
        }
        "quit" => text("bye"),
        "change" => {
            *changed = true;
            send(&json!({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}));
            text("changed")
        }
        "ping_me" => {
            let ping = ask(lines, "srv-1", "ping");
            let roots = ask(lines, "srv-2", "roots/list");
            text(json!([ping, roots]).to_string())
        }
        "spawn_child" => {
            let child = std::process::Command::new("sleep")
                .arg("60")
                .stdin(std::process::Stdio::null())
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .spawn()
                .map_err(|err| (-32603, err.to_string()))?;
            text(child.id().to_string())
        }
        "added" => text("new tool"),
        other => Err((-32602, format!("Unknown tool: {other}"))),
    }
}

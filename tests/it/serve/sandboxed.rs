//! What a sandboxed command of a served session can reach: not the
//! server's token file (the sandbox hides it as it hides Spindle's own
//! keys), and not the server's socket (no network in the sandbox).

use super::Server;
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Write};

/// A command that tries both and says what it got (markers computed by
/// the shell, so that only the command's output holds them).
fn script(base: &std::path::Path, token_file: &std::path::Path, port: &str) -> std::path::PathBuf {
    let command = format!(
        "cat {} 2>&1; echo read-$((2+3)); (exec 3<>/dev/tcp/127.0.0.1/{port} && echo socket-$((1+1))) 2>&1; echo net-$((3+4))",
        token_file.display()
    );
    let script = json!({"rules": [{
        "when": {"starts_with": "sandbox: try"},
        "replies": [
            {"tool_calls": [{"name": "run_command", "arguments": {"command": command}}]},
            {"text": "Tried."}
        ]
    }]});
    let path = base.join("sandboxed.json");
    std::fs::write(&path, script.to_string()).unwrap();
    path
}

fn landlock_and_namespaces() -> bool {
    let output = crate::support::spindle_command(&crate::support::temp_dir("serve-probe-home"))
        .args(["sandbox", "--probe"])
        .output()
        .expect("the probe runs");
    let report: Value = serde_json::from_slice(&output.stdout).unwrap_or(Value::Null);
    report["landlock"].as_u64().unwrap_or(0) > 0 && report["namespaces"] == true
}

#[test]
#[cfg(target_os = "linux")]
fn a_sandboxed_command_reads_neither_the_token_nor_the_socket() {
    if !landlock_and_namespaces() {
        eprintln!("no Landlock or namespaces here: the sandbox is not there to check");
        return;
    }
    let base = crate::support::temp_dir("serve-sandboxed");
    let token_file = base.join("secret").join("serve-token");
    // The server picks its port; the script names it, so it is written
    // after a first start that only makes the token.
    let first = script(&base, &token_file, "9");
    let probe = Server::start_in(
        base.clone(),
        &[
            "--token-file",
            token_file.to_str().unwrap(),
            "--script",
            first.to_str().unwrap(),
        ],
    );
    let port = probe.address.port().to_string();
    drop(probe);
    let script = script(&base, &token_file, &port);
    let server = Server::start_in(
        base.clone(),
        &[
            "--listen",
            &format!("127.0.0.1:{port}"),
            "--token-file",
            token_file.to_str().unwrap(),
            "--script",
            script.to_str().unwrap(),
            "--permissions",
            "sandbox",
        ],
    );
    let token = std::fs::read_to_string(&token_file)
        .unwrap()
        .trim()
        .to_string();
    let ws = base.join("ws");
    std::fs::create_dir_all(&ws).unwrap();

    // Over a WebSocket-less path: HTTP, reading the connection's stream.
    let connection = server.initialize();
    let mut socket = server.socket();
    socket
        .set_read_timeout(Some(std::time::Duration::from_secs(60)))
        .unwrap();
    write!(
        socket,
        "GET /acp HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\nAccept: text/event-stream\r\nAcp-Connection-Id: {connection}\r\n\r\n"
    )
    .unwrap();
    let post = |body: Value, session: Option<&str>| {
        let mut headers = vec![("Acp-Connection-Id", connection.as_str())];
        if let Some(session) = session {
            headers.push(("Acp-Session-Id", session));
        }
        let (status, text) = server.post(&body.to_string(), &headers);
        assert_eq!(status, 202, "{text}");
    };
    post(
        json!({"jsonrpc": "2.0", "id": 1, "method": "session/new", "params": {"cwd": ws, "mcpServers": []}}),
        None,
    );
    let mut lines = BufReader::new(socket).lines();
    let mut seen = String::new();
    let mut session = String::new();
    while let Some(Ok(line)) = lines.next() {
        seen.push_str(&line);
        seen.push('\n');
        let Some(data) = line.strip_prefix("data: ") else {
            continue;
        };
        let message: Value = serde_json::from_str(data).unwrap();
        if message["id"] == 1 {
            session = message["result"]["sessionId"].as_str().unwrap().to_string();
            post(
                json!({"jsonrpc": "2.0", "id": 2, "method": "session/prompt", "params": {
                    "sessionId": session, "prompt": [{"type": "text", "text": "sandbox: try"}]}}),
                Some(&session),
            );
            break;
        }
    }
    // The session's updates and the prompt's answer come on its own
    // stream, kept for the first reader.
    assert!(!session.is_empty(), "{seen}");
    let mut socket = server.socket();
    write!(
        socket,
        "GET /acp HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\nAccept: text/event-stream\r\nAcp-Connection-Id: {connection}\r\nAcp-Session-Id: {session}\r\n\r\n"
    )
    .unwrap();
    let mut output = String::new();
    for line in BufReader::new(socket).lines() {
        let Ok(line) = line else { break };
        output.push_str(&line);
        output.push('\n');
        if output.contains("net-7") || output.contains("\"id\":2") {
            break;
        }
    }
    assert!(
        output.contains("read-5"),
        "the command ran: {output}\n{seen}"
    );
    assert!(
        !output.contains(&token),
        "the token leaked to a sandboxed command"
    );
    assert!(!seen.contains(&token), "the token leaked into the stream");
    assert!(
        !output.contains("socket-2"),
        "the sandbox reached the server's socket: {output}"
    );
}

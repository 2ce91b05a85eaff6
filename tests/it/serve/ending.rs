//! How a server ends: a termination signal drains it (the running turn
//! cancelled and answered, the process gone with status 0, the session
//! kept); a kill during a turn loses nothing stored, and a new server's
//! new connection loads and goes on with the session.

use super::{read_answer, Server};
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::sync::mpsc::{channel, Receiver};
use std::time::Duration;

const WAIT: Duration = Duration::from_secs(30);

fn script() -> String {
    let path =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/interop/scenarios/remote.json");
    path.to_str().unwrap().to_string()
}

/// An SSE stream of the connection (or of `session`): its messages.
fn stream(server: &Server, connection: &str, session: Option<&str>) -> Receiver<Value> {
    let mut socket = server.socket();
    socket.set_read_timeout(None).unwrap();
    let mut request = format!(
        "GET /acp HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {}\r\nAccept: text/event-stream\r\nAcp-Connection-Id: {connection}\r\n",
        server.token
    );
    if let Some(session) = session {
        request.push_str(&format!("Acp-Session-Id: {session}\r\n"));
    }
    request.push_str("\r\n");
    socket.write_all(request.as_bytes()).unwrap();
    let (sender, receiver) = channel();
    std::thread::spawn(move || {
        for line in BufReader::new(socket).lines() {
            let Ok(line) = line else { return };
            if let Some(data) = line.strip_prefix("data: ") {
                if let Ok(value) = serde_json::from_str::<Value>(data) {
                    if sender.send(value).is_err() {
                        return;
                    }
                }
            }
        }
    });
    receiver
}

/// POSTs one message on `connection` (with its session header): 202.
fn send(server: &Server, connection: &str, session: Option<&str>, message: Value) {
    let body = message.to_string();
    let mut request = format!(
        "POST /acp HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nAcp-Connection-Id: {connection}\r\nConnection: close\r\n",
        server.token,
        body.len()
    );
    if let Some(session) = session {
        request.push_str(&format!("Acp-Session-Id: {session}\r\n"));
    }
    request.push_str("\r\n");
    request.push_str(&body);
    let mut socket = server.socket();
    socket.write_all(request.as_bytes()).unwrap();
    let (status, text) = read_answer(&mut socket);
    assert_eq!(status, 202, "{text}");
}

/// Waits on `messages` for one that `wanted` accepts.
fn wait_for(messages: &Receiver<Value>, mut wanted: impl FnMut(&Value) -> bool) -> Value {
    let deadline = std::time::Instant::now() + WAIT;
    loop {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        match messages.recv_timeout(left) {
            Ok(message) if wanted(&message) => return message,
            Ok(_) => {}
            Err(_) => panic!("the awaited message did not come"),
        }
    }
}

fn new_session(server: &Server, connection: &str, events: &Receiver<Value>, ws: &str) -> String {
    send(
        server,
        connection,
        None,
        json!({"jsonrpc": "2.0", "id": 1, "method": "session/new", "params": {"cwd": ws, "mcpServers": []}}),
    );
    let answer = wait_for(events, |m| m["id"] == 1);
    answer["result"]["sessionId"]
        .as_str()
        .expect("a session")
        .to_string()
}

/// A session with a slow prompt streaming on it: the server, the
/// connection, the session, and the session's stream.
fn slow_turn(server: &Server) -> (String, String, Receiver<Value>) {
    let ws = server.base.join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    let connection = server.initialize();
    let events = stream(server, &connection, None);
    let session = new_session(server, &connection, &events, ws.to_str().unwrap());
    let updates = stream(server, &connection, Some(&session));
    send(
        server,
        &connection,
        Some(&session),
        json!({"jsonrpc": "2.0", "id": 2, "method": "session/prompt",
            "params": {"sessionId": session, "prompt": [{"type": "text", "text": "remote: slow"}]}}),
    );
    wait_for(&updates, |m| {
        m["params"]["update"]["sessionUpdate"] == "agent_message_chunk"
    });
    (connection, session, updates)
}

#[test]
#[cfg(unix)]
fn sigterm_cancels_the_running_turn_answers_it_and_exits_0() {
    let mut server = Server::start("serve-sigterm", &["--script", &script()]);
    let (_connection, _session, updates) = slow_turn(&server);
    let (status, _) = server.post("{}", &[("Acp-Connection-Id", "gone")]);
    assert_eq!(status, 404, "an unknown connection");
    // SAFETY: kill(2) on the child this test started.
    unsafe { libc::kill(server.child.id() as i32, libc::SIGTERM) };
    let answer = wait_for(&updates, |m| m["id"] == 2);
    assert_eq!(answer["result"]["stopReason"], "cancelled", "{answer}");
    let status = server.wait_exit(WAIT).expect("the server ends");
    assert!(status.success(), "{status:?}");
    let stderr = server.stderr.lock().unwrap().clone();
    assert!(stderr.contains("draining"), "{stderr}");
    // The token it made on its start is private to the user.
    use std::os::unix::fs::PermissionsExt;
    let token = std::fs::metadata(server.home.join("serve-token")).unwrap();
    assert_eq!(token.permissions().mode() & 0o777, 0o600);
}

#[test]
fn after_a_kill_during_a_turn_a_new_connection_loads_and_goes_on() {
    let db = "--db";
    let base = crate::support::temp_dir("serve-kill-9");
    let db_path = base.join("sessions.db");
    let db_path = db_path.to_str().unwrap().to_string();
    let mut server = Server::start_in(base.clone(), &["--script", &script(), db, &db_path]);
    let (_connection, session, _updates) = slow_turn(&server);
    server.child.kill().unwrap();
    server.child.wait().unwrap();

    let server = Server::start_in(base.clone(), &["--script", &script(), db, &db_path]);
    let connection = server.initialize();
    let events = stream(&server, &connection, None);
    let ws = base.join("ws");
    // The load names its session in the header too, as the TypeScript
    // SDK sends it.
    send(
        &server,
        &connection,
        Some(&session),
        json!({"jsonrpc": "2.0", "id": 7, "method": "session/load",
            "params": {"sessionId": session, "cwd": ws, "mcpServers": []}}),
    );
    let mut replayed = String::new();
    let answer = wait_for(&events, |m| {
        if let Some(text) = m["params"]["update"]["content"]["text"].as_str() {
            replayed.push_str(text);
        }
        m["id"] == 7
    });
    assert!(answer.get("error").is_none(), "{answer}");
    assert!(
        replayed.contains("remote: slow"),
        "the interrupted turn's prompt is replayed: {replayed}"
    );
    let updates = stream(&server, &connection, Some(&session));
    send(
        &server,
        &connection,
        Some(&session),
        json!({"jsonrpc": "2.0", "id": 8, "method": "session/prompt",
            "params": {"sessionId": session, "prompt": [{"type": "text", "text": "remote: after"}]}}),
    );
    let answer = wait_for(&updates, |m| m["id"] == 8);
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
}

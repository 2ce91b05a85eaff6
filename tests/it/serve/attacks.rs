//! Bad input of every kind on `spindle serve`'s raw socket: each attack
//! gets a bounded, clear answer, and costs nothing else (the server still
//! answers its health check, and a new client, at once afterwards).

use super::{header_of, Server};
use crate::support::{temp_dir, write_file};
use serde_json::{json, Value};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

const INITIALIZE: &str = r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{}}}"#;

/// A server with a scripted model.
fn start(name: &str, extra: &[&str]) -> Server {
    let script = write_file(
        &temp_dir(&format!("{name}-script")),
        "script.json",
        r#"{"rules":[{"when":{"starts_with":""},"reply":{"text":"ok"}}]}"#,
    );
    let script = script.to_string_lossy().to_string();
    let mut args = vec!["--script", script.as_str()];
    args.extend_from_slice(extra);
    Server::start(name, &args)
}

/// A request's bytes: `method` on /acp with `headers`, then `body`.
fn request(method: &str, headers: &[(&str, &str)], body: &[u8]) -> Vec<u8> {
    let mut head = format!("{method} /acp HTTP/1.1\r\nHost: x\r\n");
    if !headers
        .iter()
        .any(|(name, _)| name.eq_ignore_ascii_case("connection"))
    {
        head.push_str("Connection: close\r\n");
    }
    for (name, value) in headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head.push_str("\r\n");
    [head.as_bytes(), body].concat()
}

fn body_of(text: &str) -> &str {
    text.split_once("\r\n\r\n").map_or("", |(_, body)| body)
}

const QUICK: Duration = Duration::from_secs(20);

#[test]
fn a_missing_or_wrong_token_is_401_before_the_body_is_read() {
    let mut server = start("serve-attack-token", &[]);
    let token = server.token.clone();
    assert!(token.len() >= 32, "a token was made: {token:?}");
    let wrong = "0".repeat(token.len());
    let short = &token[..token.len() - 1];
    let long = format!("{token}0");
    let bearer = |t: &str| format!("Bearer {t}");
    let basic = format!("Basic {token}");
    let cases: Vec<Option<String>> = vec![
        None,
        Some(bearer(&wrong)),
        Some(bearer(short)),
        Some(bearer(&long)),
        Some(basic),
        Some("Bearer".into()),
        Some(token.clone()),
    ];
    for authorization in &cases {
        let mut headers = vec![("Content-Type", "application/json")];
        if let Some(value) = authorization {
            headers.push(("Authorization", value));
        }
        // A body that is not JSON: parsing it would give 400.
        let mut with_length = headers.clone();
        with_length.push(("Content-Length", "9"));
        let (status, text) = server.raw(&request("POST", &with_length, b"{not json"), QUICK);
        assert_eq!(status, 401, "{authorization:?}: {text}");
        assert_eq!(
            header_of(&text, "www-authenticate").as_deref(),
            Some("Bearer")
        );
        // A body announced far over the cap and never sent: the answer is
        // 401 at once, not 413, and no wait for the body.
        let mut huge = headers.clone();
        huge.push(("Content-Length", "17825792"));
        let (status, text) = server.raw(&request("POST", &huge, b"{"), QUICK);
        assert_eq!(status, 401, "{authorization:?}: {text}");
        let mut partial = headers.clone();
        partial.push(("Content-Length", "1000"));
        let started = Instant::now();
        let (status, text) = server.raw(&request("POST", &partial, b"{\"a\""), QUICK);
        assert_eq!(status, 401, "{authorization:?}: {text}");
        assert!(started.elapsed() < QUICK, "the body was waited for");
        // A chunked body that never ends is not waited for either.
        let mut chunked = headers.clone();
        chunked.push(("Transfer-Encoding", "chunked"));
        let (status, text) = server.raw(&request("POST", &chunked, b"5\r\n{\"a\""), QUICK);
        assert_eq!(status, 401, "{authorization:?}: {text}");
        // Not JSON at all, a stream, an end, an upgrade: all 401.
        let mut plain = headers.clone();
        plain[0] = ("Content-Type", "text/plain");
        plain.push(("Content-Length", "1"));
        let (status, _) = server.raw(&request("POST", &plain, b"x"), QUICK);
        assert_eq!(status, 401);
        let mut stream = headers.clone();
        stream.extend([("Accept", "text/event-stream"), ("Acp-Connection-Id", "x")]);
        let (status, _) = server.raw(&request("GET", &stream, b""), QUICK);
        assert_eq!(status, 401);
        let mut end = headers.clone();
        end.push(("Acp-Connection-Id", "x"));
        let (status, _) = server.raw(&request("DELETE", &end, b""), QUICK);
        assert_eq!(status, 401);
        let mut upgrade = headers.clone();
        upgrade.extend(websocket_headers());
        let (status, _) = server.raw(&request("GET", &upgrade, b""), QUICK);
        assert_eq!(status, 401);
    }
    assert!(server.healthy());
    server.initialize();
    assert!(server.wait_exit(Duration::from_millis(200)).is_none());
    let said = server.stderr.lock().unwrap().clone();
    assert!(!said.contains(&token), "the token is in stderr: {said}");
    // Nor in any file of the server's home but the token's own.
    let mut folders = vec![server.home.clone()];
    while let Some(folder) = folders.pop() {
        for entry in std::fs::read_dir(&folder).into_iter().flatten().flatten() {
            let path = entry.path();
            if path.is_dir() {
                folders.push(path);
            } else if path.file_name().is_some_and(|n| n != "serve-token") {
                let bytes = std::fs::read(&path).unwrap_or_default();
                let text = String::from_utf8_lossy(&bytes);
                assert!(!text.contains(&token), "the token is in {}", path.display());
            }
        }
    }
    #[cfg(target_os = "linux")]
    for part in ["cmdline", "environ"] {
        let path = format!("/proc/{}/{part}", server.child.id());
        let bytes = std::fs::read(&path).unwrap();
        let text = String::from_utf8_lossy(&bytes);
        assert!(!text.contains(&token), "the token is in {path}");
    }
}

/// `session/new` on connection `conn` over HTTP, its answer read from the
/// connection's SSE stream: the session id.
fn new_session(server: &Server, conn: &str) -> String {
    let cwd = server.base.to_string_lossy().to_string();
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "session/new",
        "params": {"cwd": cwd, "mcpServers": []}})
    .to_string();
    let (status, text) = server.post(&body, &[("Acp-Connection-Id", conn)]);
    assert_eq!(status, 202, "{text}");
    let mut socket = server.socket();
    let head = format!(
        "GET /acp HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {}\r\nAccept: text/event-stream\r\nAcp-Connection-Id: {conn}\r\n\r\n",
        server.token
    );
    socket.write_all(head.as_bytes()).unwrap();
    let mut seen = Vec::new();
    let mut buf = [0u8; 4096];
    let deadline = Instant::now() + QUICK;
    while Instant::now() < deadline {
        let n = socket.read(&mut buf).unwrap_or(0);
        assert!(
            n > 0,
            "the stream ended: {}",
            String::from_utf8_lossy(&seen)
        );
        seen.extend_from_slice(&buf[..n]);
        let text = String::from_utf8_lossy(&seen);
        for line in text.lines() {
            let Some(data) = line.strip_prefix("data: ") else {
                continue;
            };
            let Ok(message) = serde_json::from_str::<Value>(data) else {
                continue;
            };
            if message["id"] == 1 {
                return message["result"]["sessionId"]
                    .as_str()
                    .unwrap_or_else(|| panic!("no session: {message}"))
                    .to_string();
            }
        }
    }
    panic!(
        "no answer to session/new: {}",
        String::from_utf8_lossy(&seen)
    );
}

#[test]
fn ids_of_other_connections_and_sessions_are_refused() {
    let server = start("serve-attack-ids", &[]);
    let a = server.initialize();
    let b = server.initialize();
    let on_b = new_session(&server, &b);
    let prompt = |session: &str| {
        json!({"jsonrpc": "2.0", "id": 5, "method": "session/prompt",
            "params": {"sessionId": session, "prompt": [{"type": "text", "text": "hi"}]}})
        .to_string()
    };
    // An unknown connection.
    let unknown = "0".repeat(32);
    let (status, text) = server.post(&prompt(&on_b), &[("Acp-Connection-Id", &unknown)]);
    assert_eq!(status, 404, "{text}");
    assert!(body_of(&text).contains("unknown connection"), "{text}");
    // B's session on A: in the header, or only in the message.
    let (status, text) = server.post(
        &prompt(&on_b),
        &[("Acp-Connection-Id", &a), ("Acp-Session-Id", &on_b)],
    );
    assert_eq!(status, 404, "{text}");
    assert!(body_of(&text).contains("unknown session"), "{text}");
    let (status, text) = server.post(&prompt(&on_b), &[("Acp-Connection-Id", &a)]);
    assert_eq!(status, 404, "{text}");
    // B's stream of that session cannot be read through A either.
    let (status, _) = server.raw(
        &request(
            "GET",
            &[
                ("Authorization", &format!("Bearer {}", server.token)),
                ("Accept", "text/event-stream"),
                ("Acp-Connection-Id", &a),
                ("Acp-Session-Id", &on_b),
            ],
            b"",
        ),
        QUICK,
    );
    assert_eq!(status, 409);
    // A session-scoped method without its session.
    let bare = json!({"jsonrpc": "2.0", "id": 6, "method": "session/prompt",
        "params": {"prompt": [{"type": "text", "text": "hi"}]}})
    .to_string();
    let (status, text) = server.post(&bare, &[("Acp-Connection-Id", &b)]);
    assert_eq!(status, 400, "{text}");
    assert!(body_of(&text).contains("Acp-Session-Id"), "{text}");
    // The header naming another session than the message.
    let other = "f".repeat(32);
    let (status, text) = server.post(
        &prompt(&other),
        &[("Acp-Connection-Id", &b), ("Acp-Session-Id", &on_b)],
    );
    assert_eq!(status, 400, "{text}");
    // The right pairing is taken.
    let (status, text) = server.post(
        &prompt(&on_b),
        &[("Acp-Connection-Id", &b), ("Acp-Session-Id", &on_b)],
    );
    assert_eq!(status, 202, "{text}");
    assert!(server.healthy());
}

/// A GET of session `session`'s stream on connection `conn`, left open:
/// the socket and the head of the answer.
fn open_session_stream(server: &Server, conn: &str, session: &str) -> (TcpStream, String) {
    let mut socket = server.socket();
    let auth = format!("Bearer {}", server.token);
    let headers = [
        ("Authorization", auth.as_str()),
        ("Accept", "text/event-stream"),
        ("Acp-Connection-Id", conn),
        ("Acp-Session-Id", session),
    ];
    socket.write_all(&request("GET", &headers, b"")).unwrap();
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") && socket.read(&mut byte).unwrap_or(0) == 1 {
        head.push(byte[0]);
    }
    (socket, String::from_utf8_lossy(&head).to_string())
}

#[test]
fn a_stream_opened_before_its_load_gives_the_session_to_nobody() {
    let server = start("serve-attack-waiting", &[]);
    let conn = server.initialize();
    // A session no connection has: its stream may be opened before the
    // load that brings it here (the TypeScript SDK's order) ...
    let session = "e".repeat(32);
    let (_stream, head) = open_session_stream(&server, &conn, &session);
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    assert!(
        head.to_ascii_lowercase().contains("text/event-stream"),
        "{head}"
    );
    // ... but the stream does not make it the connection's session.
    let prompt = json!({"jsonrpc": "2.0", "id": 5, "method": "session/prompt",
        "params": {"sessionId": session, "prompt": [{"type": "text", "text": "hi"}]}})
    .to_string();
    let (status, text) = server.post(
        &prompt,
        &[("Acp-Connection-Id", &conn), ("Acp-Session-Id", &session)],
    );
    assert_eq!(status, 404, "{text}");
    let (status, text) = server.post(&prompt, &[("Acp-Connection-Id", &conn)]);
    assert_eq!(status, 404, "{text}");
    // Such streams are few per connection.
    let mut open = Vec::new();
    for n in 1..16 {
        let (socket, head) = open_session_stream(&server, &conn, &format!("{n:032x}"));
        assert!(head.starts_with("HTTP/1.1 200"), "stream {n}: {head}");
        open.push(socket);
    }
    let (_, head) = open_session_stream(&server, &conn, &"d".repeat(32));
    assert!(head.starts_with("HTTP/1.1 429"), "{head}");
    assert!(server.healthy());
}

#[test]
fn malformed_bodies_get_their_status() {
    let server = start("serve-attack-bodies", &[]);
    let auth = format!("Bearer {}", server.token);
    let post = |kind: &str, body: &[u8]| {
        let length = body.len().to_string();
        let headers = [
            ("Authorization", auth.as_str()),
            ("Content-Type", kind),
            ("Content-Length", length.as_str()),
        ];
        server.raw(&request("POST", &headers, body), QUICK)
    };
    let (status, text) = post("text/plain", INITIALIZE.as_bytes());
    assert_eq!(status, 415, "{text}");
    let batch = format!("[{INITIALIZE}]");
    let (status, text) = post("application/json", batch.as_bytes());
    assert_eq!(status, 501, "{text}");
    assert!(body_of(&text).contains("batch"), "{text}");
    let (status, text) = post("application/json", b"{\"jsonrpc\": ");
    assert_eq!(status, 400, "{text}");
    let (status, text) = post("application/json", b"\"a string\"");
    assert_eq!(status, 400, "{text}");
    let two = format!("{INITIALIZE}{INITIALIZE}");
    let (status, text) = post("application/json", two.as_bytes());
    assert_eq!(status, 400, "{text}");
    // Over the cap by its length alone: 413 at once, the body unsent.
    let headers = [
        ("Authorization", auth.as_str()),
        ("Content-Type", "application/json"),
        ("Content-Length", "17825792"),
    ];
    let (status, text) = server.raw(&request("POST", &headers, b"{\"a\":"), QUICK);
    assert_eq!(status, 413, "{text}");
    // A chunked body with a size that is not hex.
    let headers = [
        ("Authorization", auth.as_str()),
        ("Content-Type", "application/json"),
        ("Transfer-Encoding", "chunked"),
    ];
    let (status, text) = server.raw(&request("POST", &headers, b"zz\r\n{}\r\n0\r\n\r\n"), QUICK);
    assert_eq!(status, 400, "{text}");
    assert!(body_of(&text).contains("chunk"), "{text}");
    // A well-formed chunked initialize is served.
    let chunked = format!("{:x}\r\n{INITIALIZE}\r\n0\r\n\r\n", INITIALIZE.len());
    let (status, text) = server.raw(&request("POST", &headers, chunked.as_bytes()), QUICK);
    assert_eq!(status, 200, "{text}");
    assert!(server.healthy());
}

/// Starts writing `bytes` on a new socket one at a time, `pause` apart,
/// until they are written or the server drops the socket: how long the
/// server took to drop it, if it did.
fn trickle(
    server: &Server,
    bytes: Vec<u8>,
    pause: Duration,
) -> std::thread::JoinHandle<Option<Duration>> {
    let mut socket = server.socket();
    std::thread::spawn(move || {
        let started = Instant::now();
        for byte in bytes {
            if socket.write_all(&[byte]).is_err() {
                return Some(started.elapsed());
            }
            std::thread::sleep(pause);
        }
        // All written: is the socket still open?
        socket
            .set_read_timeout(Some(Duration::from_millis(200)))
            .unwrap();
        let still_open = match socket.read_to_end(&mut Vec::new()) {
            Ok(_) => false,
            Err(error) => matches!(
                error.kind(),
                std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
            ),
        };
        (!still_open).then(|| started.elapsed())
    })
}

#[test]
fn a_slow_client_holds_up_only_its_own_socket() {
    let server = start("serve-attack-slow", &[]);
    // A head, one byte a second, far slower than its deadline.
    let head = b"POST /acp HTTP/1.1\r\nHost: x\r\nX-Slow: ".repeat(2);
    let loris = trickle(&server, head, Duration::from_secs(1));
    // A chunked body with the token, one byte every 200 ms.
    let auth = format!("Bearer {}", server.token);
    let headers = [
        ("Authorization", auth.as_str()),
        ("Content-Type", "application/json"),
        ("Transfer-Encoding", "chunked"),
    ];
    let mut body = request("POST", &headers, b"");
    body.extend_from_slice(b"1\r\n{\r\n".repeat(8).as_slice());
    let mut socket = server.socket();
    socket.write_all(&body[..body.len() - 20]).unwrap();
    let rest = body[body.len() - 20..].to_vec();
    let dribble = std::thread::spawn(move || {
        for byte in rest {
            let _ = socket.write_all(&[byte]);
            std::thread::sleep(Duration::from_millis(200));
        }
        socket
    });
    std::thread::sleep(Duration::from_secs(2));
    for _ in 0..3 {
        let started = Instant::now();
        assert!(server.healthy());
        server.initialize();
        assert!(
            started.elapsed() < QUICK,
            "served late: {:?}",
            started.elapsed()
        );
    }
    drop(dribble.join());
    // The slow head's socket is dropped at the head's deadline (10 s),
    // long before all of it could arrive.
    let dropped = loris.join().unwrap();
    assert!(
        dropped.is_some_and(|after| after < Duration::from_secs(40)),
        "the slow head was not dropped: {dropped:?}"
    );
    assert!(server.healthy());
}

#[test]
fn header_floods_are_431() {
    let server = start("serve-attack-headers", &[]);
    let mut many = format!(
        "GET /acp HTTP/1.1\r\nAuthorization: Bearer {}\r\n",
        server.token
    );
    for i in 0..65 {
        many.push_str(&format!("X-H{i}: {i}\r\n"));
    }
    many.push_str("\r\n");
    let (status, text) = server.raw(many.as_bytes(), QUICK);
    assert_eq!(status, 431, "{text}");
    let long = format!(
        "GET /acp HTTP/1.1\r\nHost: x\r\nX-Long: {}\r\n\r\n",
        "a".repeat(20 * 1024)
    );
    let (status, text) = server.raw(long.as_bytes(), QUICK);
    assert_eq!(status, 431, "{text}");
    assert!(server.healthy());
}

#[test]
fn many_idle_sockets_and_too_many_connections() {
    let server = start("serve-attack-many", &["--max-connections", "2"]);
    let idle: Vec<TcpStream> = (0..300).map(|_| server.socket()).collect();
    let started = Instant::now();
    assert!(server.healthy());
    assert!(started.elapsed() < QUICK, "{:?}", started.elapsed());
    server.initialize();
    server.initialize();
    let (status, text) = server.post(INITIALIZE, &[]);
    assert_eq!(status, 503, "{text}");
    assert_eq!(header_of(&text, "retry-after").as_deref(), Some("5"));
    drop(idle);
    assert!(server.healthy());
}

#[test]
fn web_pages_of_other_origins_are_refused() {
    let server = start("serve-attack-origin", &[]);
    let (status, text) = server.post(INITIALIZE, &[("Origin", "https://evil.example")]);
    assert_eq!(status, 403, "{text}");
    let (status, text) = server.post(INITIALIZE, &[("Origin", "null")]);
    assert_eq!(status, 403, "{text}");
    let own = server.url().trim_end_matches("/acp").to_string();
    assert_eq!(own, format!("http://127.0.0.1:{}", server.address.port()));
    let (status, text) = server.post(INITIALIZE, &[("Origin", &own)]);
    assert_eq!(status, 200, "{text}");
    assert!(server.healthy());
}

// WebSocket: a small client of its own, frames written masked by hand.

fn websocket_headers() -> [(&'static str, &'static str); 4] {
    [
        ("Upgrade", "websocket"),
        ("Connection", "Upgrade"),
        ("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ=="),
        ("Sec-WebSocket-Version", "13"),
    ]
}

/// An upgraded socket.
fn websocket(server: &Server) -> TcpStream {
    try_websocket(server).unwrap_or_else(|answer| panic!("{answer}"))
}

/// An upgraded socket, or the answer that refused it.
fn try_websocket(server: &Server) -> Result<TcpStream, String> {
    let mut socket = server.socket();
    let head = format!(
        "GET /acp HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n",
        server.token
    );
    socket.write_all(head.as_bytes()).unwrap();
    let mut answer = Vec::new();
    let mut byte = [0u8; 1];
    while !answer.ends_with(b"\r\n\r\n") {
        socket.read_exact(&mut byte).expect("the upgrade's answer");
        answer.push(byte[0]);
    }
    let answer = String::from_utf8_lossy(&answer);
    if !answer.starts_with("HTTP/1.1 101") {
        return Err(answer.to_string());
    }
    assert_eq!(
        header_of(&answer, "sec-websocket-accept").as_deref(),
        Some("s3pPLMBiTxaQ9kYGzzhZRbK+xOo=")
    );
    Ok(socket)
}

/// A client frame: `first` (FIN and opcode), masked `payload`.
fn frame(first: u8, payload: &[u8]) -> Vec<u8> {
    let mask = [0x37u8, 0xfa, 0x21, 0x3d];
    let mut bytes = vec![first];
    match payload.len() {
        n if n < 126 => bytes.push(0x80 | n as u8),
        n if n <= 0xffff => {
            bytes.push(0x80 | 126);
            bytes.extend_from_slice(&(n as u16).to_be_bytes());
        }
        n => {
            bytes.push(0x80 | 127);
            bytes.extend_from_slice(&(n as u64).to_be_bytes());
        }
    }
    bytes.extend_from_slice(&mask);
    bytes.extend(payload.iter().enumerate().map(|(i, b)| b ^ mask[i % 4]));
    bytes
}

/// The next frame from the server other than a ping: opcode, payload.
fn read_frame(socket: &mut TcpStream) -> (u8, Vec<u8>) {
    loop {
        let mut head = [0u8; 2];
        socket.read_exact(&mut head).expect("a frame");
        assert_eq!(head[1] & 0x80, 0, "server frames are not masked");
        let length = match head[1] & 0x7f {
            126 => {
                let mut n = [0u8; 2];
                socket.read_exact(&mut n).unwrap();
                u64::from(u16::from_be_bytes(n))
            }
            127 => {
                let mut n = [0u8; 8];
                socket.read_exact(&mut n).unwrap();
                u64::from_be_bytes(n)
            }
            n => u64::from(n),
        };
        assert!(length < 1 << 24, "a frame of {length} bytes");
        let mut payload = vec![0u8; length as usize];
        socket.read_exact(&mut payload).unwrap();
        if head[0] & 0x0f != 0x9 {
            return (head[0] & 0x0f, payload);
        }
    }
}

/// The next text message, as JSON.
fn read_json(socket: &mut TcpStream) -> Value {
    let (opcode, payload) = read_frame(socket);
    assert_eq!(opcode, 1, "{}", String::from_utf8_lossy(&payload));
    serde_json::from_slice(&payload).unwrap()
}

/// The close code the server ends with.
fn close_code(socket: &mut TcpStream) -> u16 {
    let (opcode, payload) = read_frame(socket);
    assert_eq!(opcode, 8, "{}", String::from_utf8_lossy(&payload));
    assert!(payload.len() >= 2);
    u16::from_be_bytes([payload[0], payload[1]])
}

#[test]
fn websocket_handshakes_that_are_wrong_are_refused() {
    let server = start("serve-attack-ws-handshake", &[]);
    let auth = format!("Bearer {}", server.token);
    let with = |key: &str, version: &str| {
        let headers = [
            ("Authorization", auth.as_str()),
            ("Upgrade", "websocket"),
            ("Connection", "Upgrade"),
            ("Sec-WebSocket-Key", key),
            ("Sec-WebSocket-Version", version),
        ];
        server.raw(&request("GET", &headers, b""), QUICK).0
    };
    assert_eq!(with("short", "13"), 400);
    assert_eq!(with("", "13"), 400);
    assert_eq!(with("AAAAAAAAAAAAAAAAAAAAAAAAAAAA", "13"), 400);
    assert_eq!(with("dGhlIHNhbXBsZSBub25jZQ==", "8"), 426);
    let headers = [
        ("Authorization", auth.as_str()),
        ("Upgrade", "websocket"),
        ("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ=="),
        ("Sec-WebSocket-Version", "13"),
    ];
    let (status, _) = server.raw(&request("GET", &headers, b""), QUICK);
    assert_eq!(status, 400, "an upgrade without Connection: Upgrade");
    assert!(server.healthy());
}

#[test]
fn websocket_messages_that_are_not_one_request_get_an_error_answer() {
    let server = start("serve-attack-ws-text", &[]);
    let mut socket = websocket(&server);
    socket.write_all(&frame(0x81, b"not json")).unwrap();
    let answer = read_json(&mut socket);
    assert_eq!(answer["error"]["code"], -32700, "{answer}");
    assert_eq!(answer["id"], Value::Null);
    // Two messages in one frame are not JSON either: neither reaches the
    // agent.
    let two = INITIALIZE.replace("\"id\":0", "\"id\":7").repeat(2);
    socket.write_all(&frame(0x81, two.as_bytes())).unwrap();
    let answer = read_json(&mut socket);
    assert_eq!(answer["error"]["code"], -32700, "{answer}");
    let batch = format!("[{}]", INITIALIZE.replace("\"id\":0", "\"id\":8"));
    socket.write_all(&frame(0x81, batch.as_bytes())).unwrap();
    let answer = read_json(&mut socket);
    assert_eq!(answer["error"]["code"], -32600, "{answer}");
    socket.write_all(&frame(0x81, b"42")).unwrap();
    let answer = read_json(&mut socket);
    assert_eq!(answer["error"]["code"], -32600, "{answer}");
    // The socket is still usable: the next answer is to this request.
    let first = INITIALIZE.replace("\"id\":0", "\"id\":9");
    socket.write_all(&frame(0x81, first.as_bytes())).unwrap();
    let answer = read_json(&mut socket);
    assert_eq!(answer["id"], 9, "{answer}");
    assert!(answer["result"]["protocolVersion"].is_number(), "{answer}");
    // A fragmented message is joined; a ping between fragments is
    // answered with a pong.
    let ping =
        json!({"jsonrpc": "2.0", "id": 10, "method": "session/list", "params": {}}).to_string();
    let (one, two) = ping.split_at(10);
    socket.write_all(&frame(0x01, one.as_bytes())).unwrap();
    socket.write_all(&frame(0x89, b"hey")).unwrap();
    socket.write_all(&frame(0x80, two.as_bytes())).unwrap();
    let (opcode, payload) = read_frame(&mut socket);
    assert_eq!((opcode, payload.as_slice()), (0xA, &b"hey"[..]));
    let answer = read_json(&mut socket);
    assert_eq!(answer["id"], 10, "{answer}");
    assert!(server.healthy());
}

#[test]
fn websocket_frames_that_break_the_protocol_close_with_their_code() {
    let server = start("serve-attack-ws-frames", &[]);
    // A binary frame.
    let mut socket = websocket(&server);
    socket
        .write_all(&frame(0x82, INITIALIZE.as_bytes()))
        .unwrap();
    assert_eq!(close_code(&mut socket), 1003);
    // An unmasked frame.
    let mut socket = websocket(&server);
    let mut unmasked = vec![0x81, INITIALIZE.len() as u8];
    unmasked.extend_from_slice(INITIALIZE.as_bytes());
    socket.write_all(&unmasked).unwrap();
    assert_eq!(close_code(&mut socket), 1002);
    // A frame announcing 2^63 bytes, of which none follow.
    let mut socket = websocket(&server);
    let mut huge = vec![0x81, 0x80 | 127];
    huge.extend_from_slice(&(1u64 << 63).to_be_bytes());
    huge.extend_from_slice(&[1, 2, 3, 4]);
    socket.write_all(&huge).unwrap();
    assert_eq!(close_code(&mut socket), 1009);
    // The same length after a first fragment: the sum must not wrap.
    let mut socket = websocket(&server);
    socket.write_all(&frame(0x01, b"{")).unwrap();
    let mut huge = vec![0x80, 0x80 | 127];
    huge.extend_from_slice(&u64::MAX.to_be_bytes());
    huge.extend_from_slice(&[1, 2, 3, 4]);
    socket.write_all(&huge).unwrap();
    assert_eq!(close_code(&mut socket), 1009);
    // Text that is not UTF-8.
    let mut socket = websocket(&server);
    socket.write_all(&frame(0x81, &[0x22, 0xff, 0x22])).unwrap();
    assert_eq!(close_code(&mut socket), 1007);
    assert!(server.healthy());
    // Each of those connections ended: a limit of two leaves room for a
    // new one only if they did.
    drop(server);
    let server = start("serve-attack-ws-frames-cap", &["--max-connections", "2"]);
    let mut wraps = frame(0x01, b"{");
    wraps.extend_from_slice(&[0x80, 0x80 | 127]);
    wraps.extend_from_slice(&u64::MAX.to_be_bytes());
    wraps.extend_from_slice(&[1, 2, 3, 4]);
    let attacks = [(frame(0x82, b"x"), 1003), (wraps, 1009)];
    for (bytes, code) in attacks.iter().cycle().take(6) {
        // An ended connection leaves once its agent has stopped: soon.
        let deadline = Instant::now() + QUICK;
        let mut socket = loop {
            match try_websocket(&server) {
                Ok(socket) => break socket,
                Err(answer) if answer.contains(" 503 ") && Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(100));
                }
                Err(answer) => panic!("{answer}"),
            }
        };
        socket.write_all(bytes).unwrap();
        assert_eq!(close_code(&mut socket), *code);
        let mut buf = [0u8; 16];
        assert!(matches!(socket.read(&mut buf), Ok(0) | Err(_)));
    }
    let deadline = Instant::now() + QUICK;
    loop {
        let (status, text) = server.post(INITIALIZE, &[]);
        if status == 200 {
            break;
        }
        assert!(status == 503 && Instant::now() < deadline, "{text}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

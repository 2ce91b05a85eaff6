//! Fake HTTP MCP servers on `127.0.0.1:0`: a Streamable HTTP one (JSON and
//! SSE answers, a session id, a ping inside a stream) and a legacy HTTP+SSE
//! one (GET stream with an `endpoint` event, POSTs answered on the stream).
//!
//! The HTTP side is minimal: one request per connection, answered with
//! `Connection: close`; SSE bodies end when the socket closes. Every
//! request is recorded so tests can check the headers Spindle sent.

use crate::cancel::lock;
use crossbeam_channel::{unbounded, Receiver, Sender};
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

/// One request as the server saw it.
#[derive(Debug, Clone)]
pub(crate) struct Request {
    pub method: String,
    pub path: String,
    /// Names lower-cased.
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl Request {
    pub(super) fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(key, _)| key == name)
            .map(|(_, value)| value.as_str())
    }

    pub(super) fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or(Value::Null)
    }
}

type Handler = Arc<dyn Fn(Request, TcpStream) + Send + Sync>;

/// A running fake server.
pub(crate) struct Server {
    pub base: String,
    pub requests: Arc<Mutex<Vec<Request>>>,
}

impl Server {
    pub(super) fn requests(&self) -> Vec<Request> {
        lock(&self.requests).clone()
    }
}

fn serve(handler: Handler) -> Server {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let base = format!("http://{}", listener.local_addr().expect("address"));
    let requests = Arc::new(Mutex::new(Vec::new()));
    let recorded = requests.clone();
    thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(stream) = stream else { continue };
            let handler = handler.clone();
            let recorded = recorded.clone();
            thread::spawn(move || {
                if let Some(request) = read_request(&stream) {
                    lock(&recorded).push(request.clone());
                    handler(request, stream);
                }
            });
        }
    });
    Server { base, requests }
}

fn read_request(stream: &TcpStream) -> Option<Request> {
    let mut reader = BufReader::new(stream.try_clone().ok()?);
    let mut line = String::new();
    reader.read_line(&mut line).ok()?;
    let mut parts = line.split_whitespace();
    let method = parts.next()?.to_string();
    let path = parts.next()?.to_string();
    let mut headers = Vec::new();
    loop {
        line.clear();
        reader.read_line(&mut line).ok()?;
        let trimmed = line.trim_end();
        if trimmed.is_empty() {
            break;
        }
        let (name, value) = trimmed.split_once(':')?;
        headers.push((name.trim().to_ascii_lowercase(), value.trim().to_string()));
    }
    let length: usize = headers
        .iter()
        .find(|(name, _)| name == "content-length")
        .and_then(|(_, value)| value.parse().ok())
        .unwrap_or(0);
    let mut body = vec![0; length];
    reader.read_exact(&mut body).ok()?;
    Some(Request {
        method,
        path,
        headers,
        body: String::from_utf8_lossy(&body).into_owned(),
    })
}

/// Writes a complete response and closes the connection.
pub(crate) fn respond(mut stream: TcpStream, status: &str, headers: &[(&str, &str)], body: &str) {
    let mut head = format!(
        "HTTP/1.1 {status}\r\nContent-Length: {}\r\nConnection: close\r\n",
        body.len()
    );
    for (name, value) in headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head.push_str("\r\n");
    let _ = stream.write_all(head.as_bytes());
    let _ = stream.write_all(body.as_bytes());
    let _ = stream.flush();
    let _ = stream.shutdown(Shutdown::Both);
}

/// Starts an SSE answer whose body ends when the socket closes.
fn start_sse(stream: &mut TcpStream) {
    let head = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\nConnection: close\r\n\r\n";
    let _ = stream.write_all(head.as_bytes());
    let _ = stream.flush();
}

fn write_event(stream: &mut TcpStream, text: &str) -> bool {
    stream
        .write_all(text.as_bytes())
        .and_then(|()| stream.flush())
        .is_ok()
}

fn message_event(message: &Value) -> String {
    format!("event: message\ndata: {message}\n\n")
}

fn result(id: &Value, result: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "result": result})
}

fn text_result(id: &Value, text: &str) -> Value {
    result(id, json!({"content": [{"type": "text", "text": text}]}))
}

fn tool(name: &str) -> Value {
    json!({"name": name, "inputSchema": {"type": "object"}})
}

/// The session id the Streamable HTTP server issues.
pub(crate) const SESSION: &str = "sess-42";

/// A Streamable HTTP server at `{base}/mcp`. Tools: `echo` (JSON answer),
/// `sse_ping` (pings the client inside the stream), `slow` (never answers
/// in time), `change` (sends `list_changed`); `added` appears after it.
/// Calling the unlisted `expire` gets 404, as when a session expired.
pub(crate) fn streamable() -> Server {
    let changed = Arc::new(AtomicBool::new(false));
    let (reply_sender, replies) = unbounded::<Value>();
    serve(Arc::new(move |request, stream| {
        streamable_handle(request, stream, &changed, &reply_sender, &replies)
    }))
}

fn streamable_handle(
    request: Request,
    mut stream: TcpStream,
    changed: &AtomicBool,
    reply_sender: &Sender<Value>,
    replies: &Receiver<Value>,
) {
    match request.method.as_str() {
        "POST" => {}
        "DELETE" => return respond(stream, "200 OK", &[], ""),
        _ => return respond(stream, "405 Method Not Allowed", &[], ""),
    }
    let message = request.json();
    let id = message.get("id").cloned().unwrap_or(Value::Null);
    let method = message["method"].as_str().unwrap_or("");
    if method == "initialize" {
        let answer = result(
            &id,
            json!({"protocolVersion": "2025-06-18",
                   "capabilities": {"tools": {"listChanged": true}},
                   "serverInfo": {"name": "remote", "version": "1"}}),
        );
        let headers = [
            ("Content-Type", "application/json"),
            ("Mcp-Session-Id", SESSION),
        ];
        return respond(stream, "200 OK", &headers, &answer.to_string());
    }
    if request.header("mcp-session-id") != Some(SESSION) {
        return respond(stream, "400 Bad Request", &[], "missing session");
    }
    if id.is_null() {
        return respond(stream, "202 Accepted", &[], "");
    }
    if method.is_empty() {
        let _ = reply_sender.send(message.clone());
        return respond(stream, "202 Accepted", &[], "");
    }
    let params = &message["params"];
    match (method, params["name"].as_str()) {
        ("tools/list", _) => {
            start_sse(&mut stream);
            write_event(&mut stream, ": keep-alive\n\n");
            // An event that only primes resumption: no data.
            write_event(&mut stream, "id: prime-1\ndata:\n\n");
            let note = json!({"jsonrpc": "2.0", "method": "notifications/message",
                              "params": {"level": "info", "data": "listing"}});
            write_event(&mut stream, &message_event(&note));
            let page = match params["cursor"].as_str() {
                None => json!({"tools": [tool("echo"), tool("sse_ping")], "nextCursor": "two"}),
                Some(_) if changed.load(Ordering::SeqCst) => {
                    json!({"tools": [tool("slow"), tool("change"), tool("added")]})
                }
                Some(_) => json!({"tools": [tool("slow"), tool("change")]}),
            };
            write_event(&mut stream, &message_event(&result(&id, page)));
        }
        ("tools/call", Some("echo")) => {
            let text = params["arguments"]["text"].as_str().unwrap_or("");
            let answer = text_result(&id, &format!("{text} via json"));
            let headers = [("Content-Type", "application/json")];
            return respond(stream, "200 OK", &headers, &answer.to_string());
        }
        ("tools/call", Some("sse_ping")) => {
            start_sse(&mut stream);
            let ping = json!({"jsonrpc": "2.0", "id": "srv-ping", "method": "ping"});
            write_event(&mut stream, &message_event(&ping));
            let reply = replies
                .recv_timeout(Duration::from_secs(5))
                .unwrap_or(Value::Null);
            write_event(
                &mut stream,
                &message_event(&text_result(&id, &reply.to_string())),
            );
        }
        ("tools/call", Some("expire")) => {
            return respond(stream, "404 Not Found", &[], "unknown session");
        }
        ("tools/call", Some("slow")) => {
            start_sse(&mut stream);
            thread::sleep(Duration::from_secs(10));
            write_event(&mut stream, &message_event(&text_result(&id, "late")));
        }
        ("tools/call", Some("change")) => {
            start_sse(&mut stream);
            changed.store(true, Ordering::SeqCst);
            let note = json!({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"});
            write_event(&mut stream, &message_event(&note));
            write_event(&mut stream, &message_event(&text_result(&id, "changed")));
        }
        _ => {
            let answer = json!({"jsonrpc": "2.0", "id": id,
                                "error": {"code": -32602, "message": "Unknown tool"}});
            let headers = [("Content-Type", "application/json")];
            return respond(stream, "200 OK", &headers, &answer.to_string());
        }
    }
    let _ = stream.shutdown(Shutdown::Both);
}

/// A legacy HTTP+SSE server: GET `{base}/sse` opens the stream, messages go
/// to `/messages?sessionId=abc`. A POST to `/sse` gets 405, as from a
/// server that does not speak Streamable HTTP. Tools: `echo`, `ping_me`.
pub(crate) struct Legacy {
    pub server: Server,
    stream: Arc<Mutex<Option<TcpStream>>>,
}

impl Legacy {
    /// Closes the GET stream, as a crashing server would.
    pub(super) fn drop_stream(&self) {
        if let Some(stream) = lock(&self.stream).take() {
            let _ = stream.shutdown(Shutdown::Both);
        }
    }
}

pub(crate) fn legacy() -> Legacy {
    let stream: Arc<Mutex<Option<TcpStream>>> = Arc::new(Mutex::new(None));
    let events = stream.clone();
    let (reply_sender, replies) = unbounded::<Value>();
    let server = serve(Arc::new(move |request, connection| {
        legacy_handle(request, connection, &events, &reply_sender, &replies)
    }));
    Legacy { server, stream }
}

fn legacy_handle(
    request: Request,
    mut connection: TcpStream,
    events: &Mutex<Option<TcpStream>>,
    reply_sender: &Sender<Value>,
    replies: &Receiver<Value>,
) {
    match (request.method.as_str(), request.path.as_str()) {
        ("GET", "/sse") => {
            start_sse(&mut connection);
            write_event(
                &mut connection,
                "event: endpoint\ndata: /messages?sessionId=abc\n\n",
            );
            *lock(events) = Some(connection);
            return;
        }
        ("POST", "/messages?sessionId=abc") => {}
        ("POST", "/sse") => return respond(connection, "405 Method Not Allowed", &[], ""),
        _ => return respond(connection, "404 Not Found", &[], ""),
    }
    let message = request.json();
    respond(connection, "202 Accepted", &[], "Accepted");
    let push = |message: &Value| {
        if let Some(stream) = lock(events).as_mut() {
            write_event(stream, &message_event(message));
        }
    };
    let id = message.get("id").cloned().unwrap_or(Value::Null);
    let method = message["method"].as_str().unwrap_or("");
    if id.is_null() {
        return;
    }
    if method.is_empty() {
        let _ = reply_sender.send(message.clone());
        return;
    }
    let params = &message["params"];
    match (method, params["name"].as_str()) {
        ("initialize", _) => push(&result(
            &id,
            json!({"protocolVersion": "2024-11-05", "capabilities": {"tools": {}},
                   "serverInfo": {"name": "legacy", "version": "1"}}),
        )),
        ("tools/list", _) => push(&result(
            &id,
            json!({"tools": [tool("echo"), tool("ping_me")]}),
        )),
        ("tools/call", Some("echo")) => {
            let text = params["arguments"]["text"].as_str().unwrap_or("");
            push(&text_result(&id, &format!("{text} via sse")));
        }
        ("tools/call", Some("ping_me")) => {
            push(&json!({"jsonrpc": "2.0", "id": "srv-ping", "method": "ping"}));
            let reply = replies
                .recv_timeout(Duration::from_secs(5))
                .unwrap_or(Value::Null);
            push(&text_result(&id, &reply.to_string()));
        }
        _ => push(&json!({"jsonrpc": "2.0", "id": id,
                          "error": {"code": -32601, "message": "Method not found"}})),
    }
}

/// A server that answers every request with 401.
pub(crate) fn unauthorized() -> Server {
    serve(Arc::new(|_, stream| {
        respond(
            stream,
            "401 Unauthorized",
            &[("WWW-Authenticate", "Bearer")],
            "no token",
        )
    }))
}

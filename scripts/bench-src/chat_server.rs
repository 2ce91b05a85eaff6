//! The fake Chat Completions server of figures 10, 11 and 12: it accepts
//! connections, reads each request (head and body), answers anything but
//! `POST /v1/chat/completions` with 404, and lets the figure's own reply
//! logic answer the chat requests with an SSE stream (`Connection: close`,
//! one request per connection). Also the chunk builders, reading a
//! request for figure 4's server, and the agent command the figures spawn
//! against such a server.

use crate::workspace::Bench;
use serde_json::{json, Value};
use std::borrow::Cow;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

/// How long `finish` waits for the connections in flight.
const SERVER_WAIT: Duration = Duration::from_secs(2);
/// The longest request head read.
const HEAD_LIMIT: usize = 1024 * 1024;
const SSE_HEAD: &str = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\nConnection: close\r\n\r\n";

// ---------------------------------------------------------------------------
// Reading a request

/// One HTTP request as read from its connection.
pub(crate) struct RawRequest {
    /// `POST /v1/chat/completions HTTP/1.1`.
    pub(crate) line: String,
    pub(crate) body: Vec<u8>,
    /// When its head was read (before the body).
    pub(crate) received: Instant,
}

impl RawRequest {
    pub(crate) fn is_chat(&self) -> bool {
        let mut words = self.line.split(' ');
        words.next() == Some("POST") && words.next() == Some("/v1/chat/completions")
    }

    /// `GET /v1/models`: the method and path.
    pub(crate) fn shown(&self) -> String {
        self.line.split(' ').take(2).collect::<Vec<_>>().join(" ")
    }
}

/// Sets the socket's timeouts (reads 10 s, writes `write_timeout`) and
/// reads one request: its head, then all of its body (by Content-Length,
/// or chunked), so that closing the socket does not reset it.
pub(crate) fn read_request(
    stream: &mut TcpStream,
    write_timeout: Duration,
) -> Result<RawRequest, String> {
    let io = |what: &str, err: std::io::Error| format!("{what}: {err}");
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .map_err(|e| io("set_read_timeout", e))?;
    stream
        .set_write_timeout(Some(write_timeout))
        .map_err(|e| io("set_write_timeout", e))?;
    let _ = stream.set_nodelay(true);

    let mut buffer = Vec::with_capacity(64 * 1024);
    let mut scratch = vec![0u8; 64 * 1024];
    let header_end = loop {
        if let Some(end) = find(&buffer, b"\r\n\r\n") {
            break end + 4;
        }
        if buffer.len() > HEAD_LIMIT {
            return Err("request head over 1 MiB".into());
        }
        let n = stream
            .read(&mut scratch)
            .map_err(|e| io("reading the request", e))?;
        if n == 0 {
            return Err("the client closed before sending its head".into());
        }
        buffer.extend_from_slice(&scratch[..n]);
    };
    let received = Instant::now();
    let head = String::from_utf8_lossy(&buffer[..header_end]).to_string();
    let mut lines = head.split("\r\n");
    let line = lines.next().unwrap_or_default().to_string();
    let mut content_length: Option<usize> = None;
    let mut chunked = false;
    let mut expect_continue = false;
    for header in lines {
        let Some((name, value)) = header.split_once(':') else {
            continue;
        };
        let value = value.trim();
        match name.trim().to_ascii_lowercase().as_str() {
            "content-length" => content_length = value.parse().ok(),
            "transfer-encoding" => chunked = value.to_ascii_lowercase().contains("chunked"),
            "expect" => expect_continue = value.eq_ignore_ascii_case("100-continue"),
            _ => {}
        }
    }
    if expect_continue {
        stream
            .write_all(b"HTTP/1.1 100 Continue\r\n\r\n")
            .map_err(|e| io("writing 100 Continue", e))?;
    }

    let mut body = buffer.split_off(header_end);
    if let Some(length) = content_length {
        body.reserve(length.saturating_sub(body.len()));
    }
    let complete = |body: &[u8]| match content_length {
        Some(length) => body.len() >= length,
        None if chunked => find(body, b"0\r\n\r\n").is_some(),
        None => true,
    };
    while !complete(&body) {
        let n = stream
            .read(&mut scratch)
            .map_err(|e| io("reading the request body", e))?;
        if n == 0 {
            return Err("the client closed in the middle of its request body".into());
        }
        body.extend_from_slice(&scratch[..n]);
    }
    Ok(RawRequest {
        line,
        body,
        received,
    })
}

/// Answers 404 and closes the writing side.
pub(crate) fn not_found(stream: &mut TcpStream) {
    let text = r#"{"error":{"message":"bench: not found"}}"#;
    let answer = format!(
        "HTTP/1.1 404 Not Found\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{text}",
        text.len()
    );
    let _ = stream.write_all(answer.as_bytes());
    let _ = stream.shutdown(std::net::Shutdown::Write);
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

// ---------------------------------------------------------------------------
// The server

/// A chat request, for the reply logic.
pub(crate) struct ChatRequest {
    /// The connection's number, from 1 (every accepted connection counts).
    pub(crate) call: usize,
    /// When its head was read.
    pub(crate) received: Instant,
    /// The body's length in bytes, and the body.
    pub(crate) bytes: usize,
    pub(crate) body: Value,
}

impl ChatRequest {
    pub(crate) fn messages(&self) -> &[Value] {
        self.body["messages"].as_array().map_or(&[], Vec::as_slice)
    }

    /// The text of the last user message, if any.
    pub(crate) fn last_user(&self) -> Cow<'_, str> {
        self.messages()
            .iter()
            .rev()
            .find(|m| m["role"] == "user")
            .map(content)
            .unwrap_or_default()
    }
}

/// The answer to a chat request: an SSE stream, its head written with the
/// first events.
pub(crate) struct Sse<'a> {
    stream: &'a mut TcpStream,
    head_written: bool,
}

impl Sse<'_> {
    /// Writes `chunks` as events (after the head, the first time), in one
    /// write.
    pub(crate) fn send(&mut self, chunks: &[Value]) -> Result<(), String> {
        self.write(chunks, false)
    }

    /// Writes `chunks` and `[DONE]` (after the head, the first time), in
    /// one write; returns when that write was done.
    pub(crate) fn finish(&mut self, chunks: &[Value]) -> Result<Instant, String> {
        self.write(chunks, true)?;
        Ok(Instant::now())
    }

    fn write(&mut self, chunks: &[Value], done: bool) -> Result<(), String> {
        let mut text = String::new();
        if !self.head_written {
            text.push_str(SSE_HEAD);
            self.head_written = true;
        }
        for chunk in chunks {
            text.push_str(&format!("data: {chunk}\n\n"));
        }
        if done {
            text.push_str("data: [DONE]\n\n");
        }
        self.stream
            .write_all(text.as_bytes())
            .and_then(|()| self.stream.flush())
            .map_err(|e| format!("writing the answer: {e}"))
    }
}

/// What the server saw: what the reply logic returned for each chat
/// request (in the order their answers were done), the other requests
/// (method and path, answered 404) and the errors.
pub(crate) struct Log<T> {
    pub(crate) served: Vec<T>,
    pub(crate) others: Vec<String>,
    pub(crate) errors: Vec<String>,
}

impl<T> Default for Log<T> {
    fn default() -> Self {
        Log {
            served: Vec::new(),
            others: Vec::new(),
            errors: Vec::new(),
        }
    }
}

/// A fake Chat Completions server on 127.0.0.1, a thread per connection.
pub(crate) struct ChatServer<T> {
    pub(crate) base_url: String,
    address: SocketAddr,
    log: Arc<Mutex<Log<T>>>,
    /// Connections accepted and not yet done.
    open: Arc<AtomicUsize>,
    stop: Arc<AtomicBool>,
}

impl<T: Send + 'static> ChatServer<T> {
    /// Binds 127.0.0.1:0 and serves on threads named `bench-{name}-…`;
    /// `reply` answers each chat request, and what it returns is logged.
    pub(crate) fn start<F>(name: &str, reply: F) -> Result<ChatServer<T>, String>
    where
        F: Fn(&ChatRequest, &mut Sse) -> Result<T, String> + Send + Sync + 'static,
    {
        let listener = TcpListener::bind("127.0.0.1:0").map_err(|e| format!("cannot bind: {e}"))?;
        let address = listener
            .local_addr()
            .map_err(|e| format!("no local address: {e}"))?;
        let server = ChatServer {
            base_url: format!("http://{address}/v1"),
            address,
            log: Arc::new(Mutex::new(Log::default())),
            open: Arc::new(AtomicUsize::new(0)),
            stop: Arc::new(AtomicBool::new(false)),
        };
        let (log, open, stop) = (server.log.clone(), server.open.clone(), server.stop.clone());
        let reply = Arc::new(reply);
        let connection = format!("bench-{name}-conn");
        thread::Builder::new()
            .name(format!("bench-{name}-server"))
            .spawn(move || {
                for (call, stream) in listener.incoming().enumerate() {
                    if stop.load(Ordering::SeqCst) {
                        return;
                    }
                    let Ok(stream) = stream else { continue };
                    open.fetch_add(1, Ordering::SeqCst);
                    let (log, done, reply) = (log.clone(), open.clone(), reply.clone());
                    let spawned =
                        thread::Builder::new()
                            .name(connection.clone())
                            .spawn(move || {
                                let result = serve(stream, call + 1, &*reply);
                                if let Ok(mut log) = log.lock() {
                                    match result {
                                        Ok(Handled::Chat(served)) => log.served.push(served),
                                        Ok(Handled::Other(line)) => log.others.push(line),
                                        Err(err) => log.errors.push(err),
                                    }
                                }
                                done.fetch_sub(1, Ordering::SeqCst);
                            });
                    if spawned.is_err() {
                        open.fetch_sub(1, Ordering::SeqCst);
                    }
                }
            })
            .map_err(|e| format!("cannot start the server thread: {e}"))?;
        Ok(server)
    }

    /// Waits up to 2 s for the connections in flight, then takes the log.
    pub(crate) fn finish(&self) -> Log<T> {
        let deadline = Instant::now() + SERVER_WAIT;
        while self.open.load(Ordering::SeqCst) > 0 && Instant::now() < deadline {
            thread::sleep(Duration::from_millis(1));
        }
        match self.log.lock() {
            Ok(mut log) => std::mem::take(&mut *log),
            Err(_) => Log {
                errors: vec!["the log is poisoned".into()],
                ..Log::default()
            },
        }
    }
}

impl<T> Drop for ChatServer<T> {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wakes the accept loop so it sees the flag.
        let _ = TcpStream::connect_timeout(&self.address, Duration::from_secs(1));
    }
}

enum Handled<T> {
    Chat(T),
    Other(String),
}

/// Reads one request and answers it: a chat request by `reply`, anything
/// else with 404.
fn serve<T>(
    mut stream: TcpStream,
    call: usize,
    reply: &dyn Fn(&ChatRequest, &mut Sse) -> Result<T, String>,
) -> Result<Handled<T>, String> {
    let raw = read_request(&mut stream, Duration::from_secs(10))?;
    if !raw.is_chat() {
        not_found(&mut stream);
        return Ok(Handled::Other(raw.shown()));
    }
    let body: Value = serde_json::from_slice(&raw.body)
        .map_err(|e| format!("the chat request is not JSON: {e}"))?;
    let request = ChatRequest {
        call,
        received: raw.received,
        bytes: raw.body.len(),
        body,
    };
    let mut sse = Sse {
        stream: &mut stream,
        head_written: false,
    };
    let served = reply(&request, &mut sse)?;
    let _ = stream.shutdown(std::net::Shutdown::Write);
    Ok(Handled::Chat(served))
}

// ---------------------------------------------------------------------------
// Messages and chunks

/// A message's text: a string, or the text parts of an array (borrowed
/// when a string).
pub(crate) fn content(message: &Value) -> Cow<'_, str> {
    match &message["content"] {
        Value::String(text) => Cow::Borrowed(text),
        Value::Array(parts) => Cow::Owned(
            parts
                .iter()
                .filter_map(|part| part["text"].as_str())
                .collect::<Vec<_>>()
                .join(""),
        ),
        _ => Cow::Borrowed(""),
    }
}

pub(crate) fn content_chunk(text: &str) -> Value {
    json!({"choices": [{"index": 0, "delta": {"content": text}, "finish_reason": null}]})
}

pub(crate) fn stop_chunk() -> Value {
    json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
}

/// A text answer: its content, then `stop`.
pub(crate) fn text_chunks(text: &str) -> Vec<Value> {
    vec![content_chunk(text), stop_chunk()]
}

/// One tool call, then `tool_calls`.
pub(crate) fn tool_call_chunks(id: &str, name: &str, arguments: &str) -> Vec<Value> {
    vec![
        json!({"choices": [{"index": 0, "delta": {"tool_calls": [{
            "index": 0, "id": id, "type": "function",
            "function": {"name": name, "arguments": arguments}
        }]}, "finish_reason": null}]}),
        json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]}),
    ]
}

// ---------------------------------------------------------------------------
// The agent against it

/// A config with the provider `fake` at `base_url` (its key in the
/// environment variable `key_env`) and its model `fake/{model}` of
/// `window` tokens, the default.
pub(crate) fn fake_config(base_url: &str, key_env: &str, model: &str, window: u64) -> Value {
    let model = format!("fake/{model}");
    json!({
        "providers": { "fake": {
            "kind": "openai",
            "base_url": base_url,
            "api_key_env": key_env,
        }},
        "models": { model.clone(): { "context_window": window } },
        "defaults": { "model": model },
    })
}

impl Bench {
    /// Writes `config` to `config_path`; the command of an agent with it
    /// (`acp --config … --permissions yolo`), in the workspace's
    /// `SPINDLE_HOME`, with `key_env` set and the environment that could
    /// change its provider or logging removed. Stdio is the caller's.
    pub(crate) fn chat_agent(
        &self,
        config_path: &Path,
        config: &Value,
        key_env: &str,
    ) -> Result<Command, String> {
        std::fs::write(config_path, config.to_string())
            .map_err(|e| format!("cannot write {}: {e}", config_path.display()))?;
        let mut command = Command::new(&self.binary);
        command
            .arg("acp")
            .arg("--config")
            .arg(config_path)
            .args(["--permissions", "yolo"])
            .env_remove("RUST_LOG")
            .env_remove("SPINDLE_SEARCH")
            .env_remove("OPENAI_API_KEY")
            .env_remove("OPENAI_BASE_URL")
            .env_remove("ANTHROPIC_API_KEY")
            .env("SPINDLE_HOME", self.work.home())
            .env(key_env, "k");
        Ok(command)
    }
}

//! Small MCP servers of the tests' own, one per transport:
//!
//! - **stdio**: this integration-test binary started again with
//!   `SPINDLE_IT_MCP_SERVER=1`; on Linux a constructor (see
//!   `support::reexec`) then runs [`run_stdio_server`] before the test
//!   harness starts, so the server is no test. It speaks newline-delimited
//!   JSON-RPC on stdin/stdout until stdin closes, after a blank line and a
//!   banner: neither is JSON, which a client must skip (the MCP specification, stdio transport).
//! - **Streamable HTTP** ([`HttpMcp::streamable`]): one endpoint `/mcp`;
//!   requires an `Authorization` header, issues an `Mcp-Session-Id` and
//!   requires it back, answers some requests as JSON and others as an SSE
//!   stream (with a notification and a resumption-priming event first).
//! - **legacy HTTP+SSE** ([`HttpMcp::legacy`]): `GET /sse` opens the event
//!   stream, whose first event names the POST endpoint; POSTs get 202 and
//!   their answers arrive on the stream.
//!
//! The tools, over two pages of `tools/list`: `echo` (text, read-only),
//! `picture` (an image block), `data` (structuredContent only), `fail`
//! (`isError`); the stdio server adds `env` (its PATH, a custom variable
//! and its pid), `crash` (exits in the middle of the call, or only once
//! with a marker file) and `slow` (sleeps on a helper thread, so the server
//! keeps reading and can see `notifications/cancelled`), and two that ask
//! the user: `ask` sends `elicitation/create` with its `request` argument
//! as the params, waits for the answer (logged as `elicitation answer
//! {json}`) and returns it as its result; with `complete` and an accepted
//! answer it first sends `notifications/elicitation/complete` for an id it
//! never asked with and then for the request's own `elicitationId`.
//! `late_ask` answers at once and only then asks (a question outside any
//! call).
//!
//! Knobs of the stdio server (environment): `SPINDLE_IT_INIT_DELAY_MS`
//! delays the `initialize` answer; `SPINDLE_IT_PID_FILE` gets the pid of
//! every start appended; `SPINDLE_IT_EVENTS_FILE` gets one line per
//! message received (`initialize`, `tools/call echo`,
//! `notifications/cancelled 4`, …); `SPINDLE_IT_IGNORE_EOF` keeps it
//! running after its stdin closed; `SPINDLE_IT_TOKEN` is a secret the
//! server carelessly prints to its stderr and, as a non-JSON line, to its
//! stdout.

use serde_json::{json, Value};
use std::collections::{HashMap, HashSet};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread;
use std::time::Duration;

use super::media::{base64, png};

/// Set (to anything) in the environment of the stdio server process.
pub const SERVER_ENV: &str = "SPINDLE_IT_MCP_SERVER";
/// Reported by the `env` tool.
pub const CUSTOM_ENV: &str = "SPINDLE_IT_CUSTOM";
/// A secret the stdio server prints where a careless server would.
pub const TOKEN_ENV: &str = "SPINDLE_IT_TOKEN";
pub const INIT_DELAY_ENV: &str = "SPINDLE_IT_INIT_DELAY_MS";
pub const PID_FILE_ENV: &str = "SPINDLE_IT_PID_FILE";
pub const EVENTS_FILE_ENV: &str = "SPINDLE_IT_EVENTS_FILE";
/// Makes the stdio server stay after its stdin closed.
pub const IGNORE_EOF_ENV: &str = "SPINDLE_IT_IGNORE_EOF";

/// What the harness is asked to run in the server's process: on Linux a
/// name no test has, so that should the constructor not take over, the
/// binary runs nothing rather than the whole suite again; elsewhere the
/// test that becomes the server.
#[cfg(target_os = "linux")]
const ENTRY: &str = "mcp::no_test_is_the_stdio_server";
#[cfg(not(target_os = "linux"))]
const ENTRY: &str = "mcp::stdio_server_entry";

/// The path of this test binary: the stdio server's command.
pub fn stdio_command() -> String {
    std::env::current_exe()
        .expect("the test binary has a path")
        .to_str()
        .expect("UTF-8 path of the test binary")
        .to_string()
}

/// The arguments for the test binary as the server.
pub fn stdio_args() -> Vec<String> {
    ["--exact", ENTRY, "--nocapture", "--test-threads=1"]
        .map(str::to_string)
        .to_vec()
}

/// An ACP v1 stdio descriptor (`env` as `[{name, value}]`) for the stdio
/// server, with `env` added to the variable that turns it on.
pub fn stdio_server(name: &str, env: &[(&str, &str)]) -> Value {
    let mut entries = vec![json!({"name": SERVER_ENV, "value": "1"})];
    entries.extend(
        env.iter()
            .map(|(key, value)| json!({"name": key, "value": value})),
    );
    json!({"name": name, "command": stdio_command(), "args": stdio_args(), "env": entries})
}

/// The same descriptor with `env` as an object map, as older clients send.
pub fn stdio_server_env_map(name: &str, env: &[(&str, &str)]) -> Value {
    let mut map = serde_json::Map::new();
    map.insert(SERVER_ENV.to_string(), json!("1"));
    for (key, value) in env {
        map.insert(key.to_string(), json!(value));
    }
    json!({"name": name, "command": stdio_command(), "args": stdio_args(), "env": map})
}

// ---------------------------------------------------------------------------
// The tools, shared by the three servers.

/// The input schema of `echo`, as the server lists it.
pub fn echo_schema() -> Value {
    json!({
        "type": "object",
        "properties": {"text": {"type": "string", "description": "What to say back"}},
        "required": ["text"],
        "additionalProperties": false,
    })
}

/// The colour of the `picture` tool's image.
pub fn picture_png() -> Vec<u8> {
    png(200, 30, 30)
}

/// What `data` returns as `structuredContent`.
pub fn data_value() -> Value {
    json!({"answer": 42, "items": ["alpha", "beta"]})
}

/// What `fail` says (no word like "error" in it, on purpose).
pub const FAIL_TEXT: &str = "disk quota exceeded on volume 7";

fn tool_list(full: bool) -> (Vec<Value>, Vec<Value>) {
    let first = vec![
        json!({"name": "echo", "title": "Echo", "description": "Says the text back",
               "inputSchema": echo_schema(), "annotations": {"readOnlyHint": true}}),
        // A bare object schema: the client must add `properties`.
        json!({"name": "picture", "description": "Shows a small picture",
               "inputSchema": {"type": "object"}}),
        json!({"name": "data", "description": "Returns structured data",
               "inputSchema": {"type": "object", "properties": {}},
               "outputSchema": {"type": "object",
                                "properties": {"answer": {"type": "integer"},
                                               "items": {"type": "array"}}}}),
    ];
    let mut second = vec![json!({"name": "fail", "description": "Always fails",
               "inputSchema": {"type": "object", "properties": {}},
               "annotations": {"destructiveHint": false}})];
    if full {
        second.push(
            json!({"name": "env", "description": "Shows the server's environment",
                           "inputSchema": {"type": "object", "properties": {}}}),
        );
        second.push(
            json!({"name": "crash", "description": "Exits in the middle of the call",
                           "inputSchema": {"type": "object",
                                           "properties": {"marker": {"type": "string"}}}}),
        );
        second.push(
            json!({"name": "slow", "description": "Sleeps, then answers",
                           "inputSchema": {"type": "object",
                                           "properties": {"ms": {"type": "integer"}}}}),
        );
        second.push(
            json!({"name": "ask", "description": "Asks the user, then answers",
                   "inputSchema": {"type": "object",
                                   "properties": {"request": {"type": "object"},
                                                  "complete": {"type": "boolean"}}}}),
        );
        second.push(
            json!({"name": "late_ask", "description": "Answers, then asks the user",
                   "inputSchema": {"type": "object", "properties": {}}}),
        );
    }
    (first, second)
}

/// The names of the tools a server offers, in listing order.
pub fn tool_names(full: bool) -> Vec<String> {
    let (first, second) = tool_list(full);
    first
        .iter()
        .chain(&second)
        .map(|tool| tool["name"].as_str().unwrap_or_default().to_string())
        .collect()
}

/// How a server reacts to one message.
enum Outcome {
    /// Send this message back.
    Reply(Value),
    /// A notification or a response: nothing to send.
    Nothing,
    /// Exit at once, in the middle of the request.
    Crash,
    /// The `slow` tool: answer after this long.
    Later(Duration, Value),
    /// The `ask` tool (stdio only): ask the user, answer the call later.
    Ask,
    /// The `late_ask` tool: answer the call, then ask.
    AskAfter(Value),
}

fn success(id: &Value, result: Value) -> Outcome {
    Outcome::Reply(json!({"jsonrpc": "2.0", "id": id, "result": result}))
}

fn failure(id: &Value, code: i64, message: &str) -> Outcome {
    Outcome::Reply(json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}}))
}

fn text_result(text: &str) -> Value {
    json!({"content": [{"type": "text", "text": text}]})
}

/// The answer of a server called `label` (`stdio`, `http`, `sse`) to
/// `message`; `full` adds the stdio-only tools.
fn react(label: &str, full: bool, message: &Value) -> Outcome {
    let Some(method) = message.get("method").and_then(Value::as_str) else {
        return Outcome::Nothing;
    };
    let Some(id) = message.get("id") else {
        return Outcome::Nothing;
    };
    let params = &message["params"];
    match method {
        "initialize" => {
            let asked = params["protocolVersion"].as_str().unwrap_or("");
            let version = if ["2025-03-26", "2025-06-18", "2025-11-25"].contains(&asked) {
                asked
            } else {
                "2025-06-18"
            };
            success(
                id,
                json!({"protocolVersion": version,
                       "capabilities": {"tools": {"listChanged": false}, "logging": {}},
                       "serverInfo": {"name": format!("spindle-it-{label}"), "version": "1.0.0"},
                       "instructions": "Tools for Spindle's integration tests."}),
            )
        }
        "ping" => success(id, json!({})),
        "tools/list" => {
            let (first, second) = tool_list(full);
            match params.get("cursor").and_then(Value::as_str) {
                None => success(id, json!({"tools": first, "nextCursor": "page-two"})),
                Some("page-two") => success(id, json!({"tools": second})),
                Some(other) => failure(id, -32602, &format!("unknown cursor {other}")),
            }
        }
        "tools/call" => {
            let name = params["name"].as_str().unwrap_or("");
            let arguments = &params["arguments"];
            if !tool_names(full).iter().any(|known| known == name) {
                return failure(id, -32602, &format!("Unknown tool: {name}"));
            }
            match name {
                "echo" => {
                    let text = arguments["text"].as_str().unwrap_or("");
                    success(id, text_result(&format!("{label} echo: {text}")))
                }
                "picture" => success(
                    id,
                    json!({"content": [
                        {"type": "text", "text": "a red dot"},
                        {"type": "image", "data": base64(&picture_png()), "mimeType": "image/png"},
                    ]}),
                ),
                "data" => success(
                    id,
                    json!({"content": [], "structuredContent": data_value()}),
                ),
                "fail" => success(
                    id,
                    json!({"content": [{"type": "text", "text": FAIL_TEXT}], "isError": true}),
                ),
                "env" => {
                    let report = json!({
                        "path": std::env::var("PATH").ok(),
                        "custom": std::env::var(CUSTOM_ENV).ok(),
                        "openai_key": std::env::var("OPENAI_API_KEY").ok(),
                        "pid": std::process::id(),
                    });
                    success(id, text_result(&report.to_string()))
                }
                "crash" => match arguments["marker"].as_str() {
                    Some(marker) if Path::new(marker).exists() => {
                        success(id, text_result("survived the crash"))
                    }
                    Some(marker) => {
                        let _ = std::fs::write(marker, "crashed once");
                        Outcome::Crash
                    }
                    None => Outcome::Crash,
                },
                "ask" => Outcome::Ask,
                "late_ask" => Outcome::AskAfter(
                    json!({"jsonrpc": "2.0", "id": id, "result": text_result("asked nothing yet")}),
                ),
                "slow" => {
                    let ms = arguments["ms"].as_u64().unwrap_or(1000);
                    Outcome::Later(
                        Duration::from_millis(ms),
                        json!({"jsonrpc": "2.0", "id": id,
                               "result": text_result(&format!("slept {ms} ms"))}),
                    )
                }
                _ => failure(id, -32602, &format!("Unknown tool: {name}")),
            }
        }
        other => failure(id, -32601, &format!("Method not found: {other}")),
    }
}

// ---------------------------------------------------------------------------
// The stdio server.

fn append_line(variable: &str, line: &str) {
    if let Ok(path) = std::env::var(variable) {
        if let Ok(mut file) = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
        {
            let _ = writeln!(file, "{line}");
        }
    }
}

fn write_stdout(line: &str) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}

/// What the event log says about one message.
fn describe(message: &Value) -> String {
    let method = message["method"].as_str().unwrap_or("(response)");
    match method {
        "tools/call" => format!(
            "tools/call {}",
            message["params"]["name"].as_str().unwrap_or("")
        ),
        "notifications/cancelled" => format!("{method} {}", message["params"]["requestId"]),
        "initialize" => format!("initialize {}", message["params"]["capabilities"]),
        "(response)"
            if message
                .get("id")
                .is_some_and(|id| id.as_str().is_some_and(|id| id.starts_with("elicit-"))) =>
        {
            let answer = message.get("result").or_else(|| message.get("error"));
            format!("elicitation answer {}", answer.unwrap_or(&Value::Null))
        }
        _ => method.to_string(),
    }
}

/// The answer to an `ask` question came: completes a URL elicitation if
/// asked to (first for an id never asked with), then answers the call with
/// the answer.
fn answer_question(call: &Value, arguments: &Value, answer: &Value) {
    let accepted = answer["result"]["action"] == "accept";
    if arguments["complete"] == true && accepted {
        for id in [
            json!("never-asked"),
            arguments["request"]["elicitationId"].clone(),
        ] {
            let done = json!({"jsonrpc": "2.0", "method": "notifications/elicitation/complete",
                              "params": {"elicitationId": id}});
            write_stdout(&done.to_string());
        }
    }
    let shown = answer.get("result").or_else(|| answer.get("error"));
    let text = format!("answer: {}", shown.unwrap_or(&Value::Null));
    let reply = json!({"jsonrpc": "2.0", "id": call, "result": text_result(&text)});
    write_stdout(&reply.to_string());
}

/// Serves MCP on stdin/stdout until stdin closes, then exits the process.
pub fn run_stdio_server() -> ! {
    // Two lines that are no JSON (a blank one and a banner) come first.
    write_stdout("\nspindle-it MCP server starting (this line is not JSON)");
    if let Ok(token) = std::env::var(TOKEN_ENV) {
        eprintln!("loaded token={token}");
        write_stdout(&format!("debug: using token {token}"));
    }
    append_line(PID_FILE_ENV, &std::process::id().to_string());
    let delay = std::env::var(INIT_DELAY_ENV)
        .ok()
        .and_then(|ms| ms.parse().ok())
        .map(Duration::from_millis);
    let stdin = std::io::stdin();
    // Questions out: our request id → (the tools/call id, its arguments).
    let mut asking: HashMap<String, (Value, Value)> = HashMap::new();
    let mut asked = 0;
    for line in stdin.lock().lines() {
        let Ok(line) = line else { break };
        let Ok(message) = serde_json::from_str::<Value>(&line) else {
            continue;
        };
        append_line(EVENTS_FILE_ENV, &describe(&message));
        if message.get("method").is_none() {
            let question = message["id"].as_str().and_then(|id| asking.remove(id));
            if let Some((call, arguments)) = question {
                answer_question(&call, &arguments, &message);
            }
            continue;
        }
        if message["method"] == "initialize" {
            if let Some(delay) = delay {
                thread::sleep(delay);
            }
        }
        match react("stdio", true, &message) {
            Outcome::Reply(reply) => write_stdout(&reply.to_string()),
            Outcome::Nothing => {}
            Outcome::Crash => {
                eprintln!("crashing on purpose");
                std::process::exit(7);
            }
            Outcome::Later(pause, reply) => {
                thread::spawn(move || {
                    thread::sleep(pause);
                    write_stdout(&reply.to_string());
                });
            }
            Outcome::Ask => {
                asked += 1;
                let id = format!("elicit-{asked}");
                let arguments = message["params"]["arguments"].clone();
                let question = json!({"jsonrpc": "2.0", "id": id, "method": "elicitation/create",
                                      "params": arguments["request"]});
                asking.insert(id, (message["id"].clone(), arguments));
                write_stdout(&question.to_string());
            }
            Outcome::AskAfter(reply) => {
                write_stdout(&reply.to_string());
                asked += 1;
                let question = json!({"jsonrpc": "2.0", "id": format!("elicit-{asked}"),
                                      "method": "elicitation/create",
                                      "params": {"message": "Too late?",
                                                 "requestedSchema": {"type": "object", "properties": {}}}});
                write_stdout(&question.to_string());
            }
        }
    }
    append_line(EVENTS_FILE_ENV, "eof");
    // A careless server that does not leave when its client goes.
    if std::env::var_os(IGNORE_EOF_ENV).is_some() {
        loop {
            thread::sleep(Duration::from_secs(60));
        }
    }
    std::process::exit(0);
}

// ---------------------------------------------------------------------------
// The HTTP servers.

/// One HTTP request as a server saw it.
#[derive(Debug, Clone)]
pub struct HttpRequest {
    pub method: String,
    /// The request target, e.g. `/mcp` or `/messages?sessionId=1`.
    pub target: String,
    /// Names lower-cased.
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl HttpRequest {
    pub fn header(&self, name: &str) -> Option<&str> {
        let name = name.to_ascii_lowercase();
        self.headers
            .iter()
            .find(|(key, _)| *key == name)
            .map(|(_, value)| value.as_str())
    }

    pub fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or(Value::Null)
    }

    /// The JSON-RPC method of the body, if any.
    pub fn rpc_method(&self) -> Option<String> {
        self.json()["method"].as_str().map(str::to_string)
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

type Handler = Arc<dyn Fn(&HttpRequest, TcpStream) + Send + Sync>;

/// A running HTTP MCP server on 127.0.0.1; stops accepting when dropped.
pub struct HttpMcp {
    address: SocketAddr,
    path: &'static str,
    requests: Arc<Mutex<Vec<HttpRequest>>>,
    /// The open event streams of the legacy server, by session.
    streams: Arc<Mutex<HashMap<String, TcpStream>>>,
    stop: Arc<AtomicBool>,
}

impl HttpMcp {
    /// A Streamable HTTP server at `/mcp` that wants `Authorization:
    /// {authorization}` on every request.
    pub fn streamable(authorization: &str) -> HttpMcp {
        HttpMcp::protected(authorization, "Bearer realm=\"spindle-it\"")
    }

    /// `streamable`, whose 401 carries `WWW-Authenticate: {challenge}`.
    pub fn protected(authorization: &str, challenge: &str) -> HttpMcp {
        let expected = authorization.to_string();
        let challenge = challenge.to_string();
        let sessions: Arc<Mutex<HashSet<String>>> = Arc::default();
        let counter = Arc::new(AtomicUsize::new(0));
        HttpMcp::serve(
            "/mcp",
            Arc::default(),
            Arc::new(move |request, stream| {
                streamable(request, stream, &expected, &challenge, &sessions, &counter)
            }),
        )
    }

    /// A legacy HTTP+SSE server (`GET /sse`, POSTs to the endpoint it
    /// names) that wants `Authorization: {authorization}`.
    pub fn legacy(authorization: &str) -> HttpMcp {
        let expected = authorization.to_string();
        let streams: Arc<Mutex<HashMap<String, TcpStream>>> = Arc::default();
        let counter = Arc::new(AtomicUsize::new(0));
        let handler_streams = streams.clone();
        HttpMcp::serve(
            "/sse",
            streams,
            Arc::new(move |request, stream| {
                legacy(request, stream, &expected, &handler_streams, &counter)
            }),
        )
    }

    fn serve(
        path: &'static str,
        streams: Arc<Mutex<HashMap<String, TcpStream>>>,
        handler: Handler,
    ) -> HttpMcp {
        let listener = TcpListener::bind("127.0.0.1:0").expect("cannot bind an MCP test server");
        let address = listener.local_addr().expect("no local address");
        let requests: Arc<Mutex<Vec<HttpRequest>>> = Arc::default();
        let stop = Arc::new(AtomicBool::new(false));
        let recorded = requests.clone();
        let stopping = stop.clone();
        thread::Builder::new()
            .name("it-mcp-http-accept".into())
            .spawn(move || {
                for stream in listener.incoming() {
                    if stopping.load(Ordering::SeqCst) {
                        return;
                    }
                    let Ok(stream) = stream else { continue };
                    let handler = handler.clone();
                    let recorded = recorded.clone();
                    let _ = thread::Builder::new()
                        .name("it-mcp-http-conn".into())
                        .spawn(move || {
                            let _ = stream.set_read_timeout(Some(Duration::from_secs(10)));
                            if let Some(request) = read_request(&stream) {
                                lock(&recorded).push(request.clone());
                                handler(&request, stream);
                            }
                        });
                }
            })
            .expect("cannot start the MCP test server");
        HttpMcp {
            address,
            path,
            requests,
            streams,
            stop,
        }
    }

    /// The URL to configure: `http://127.0.0.1:PORT/mcp` or `…/sse`.
    pub fn url(&self) -> String {
        format!("http://{}{}", self.address, self.path)
    }

    /// Every request so far, in order of arrival.
    pub fn requests(&self) -> Vec<HttpRequest> {
        lock(&self.requests).clone()
    }
}

impl Drop for HttpMcp {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wakes the accepting thread so that it sees the flag.
        let _ = TcpStream::connect(self.address);
        for (_, stream) in lock(&self.streams).drain() {
            let _ = stream.shutdown(Shutdown::Both);
        }
    }
}

fn read_line(reader: &mut impl BufRead) -> Option<String> {
    let mut line = String::new();
    match reader.read_line(&mut line) {
        Ok(0) | Err(_) => None,
        Ok(_) => Some(line.trim_end_matches(['\r', '\n']).to_string()),
    }
}

pub fn read_request(stream: &TcpStream) -> Option<HttpRequest> {
    let mut reader = BufReader::new(stream.try_clone().ok()?);
    let first = read_line(&mut reader)?;
    let mut parts = first.split_whitespace();
    let method = parts.next()?.to_string();
    let target = parts.next()?.to_string();
    let mut headers = Vec::new();
    loop {
        let line = read_line(&mut reader)?;
        if line.is_empty() {
            break;
        }
        let (name, value) = line.split_once(':')?;
        headers.push((name.trim().to_ascii_lowercase(), value.trim().to_string()));
    }
    let find = |name: &str| {
        headers
            .iter()
            .find(|(key, _)| key == name)
            .map(|(_, value)| value.clone())
    };
    let mut body = Vec::new();
    if find("transfer-encoding").is_some_and(|value| value.eq_ignore_ascii_case("chunked")) {
        loop {
            let size = read_line(&mut reader)?;
            let size = usize::from_str_radix(size.split(';').next()?.trim(), 16).ok()?;
            if size == 0 {
                let _ = read_line(&mut reader);
                break;
            }
            let mut piece = vec![0; size];
            reader.read_exact(&mut piece).ok()?;
            body.extend_from_slice(&piece);
            read_line(&mut reader)?;
        }
    } else if let Some(length) = find("content-length").and_then(|v| v.parse::<usize>().ok()) {
        body = vec![0; length];
        reader.read_exact(&mut body).ok()?;
    }
    Some(HttpRequest {
        method,
        target,
        headers,
        body: String::from_utf8_lossy(&body).into_owned(),
    })
}

/// Writes a whole response and closes the connection.
pub fn respond(mut stream: TcpStream, status: &str, headers: &[(&str, &str)], body: &str) {
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

/// Starts an event-stream answer whose body ends when the socket closes.
fn open_event_stream(stream: &mut TcpStream) -> bool {
    let head = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\nConnection: close\r\n\r\n";
    stream
        .write_all(head.as_bytes())
        .and_then(|()| stream.flush())
        .is_ok()
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

fn unauthorized(stream: TcpStream, challenge: &str) {
    respond(
        stream,
        "401 Unauthorized",
        &[("WWW-Authenticate", challenge)],
        "missing or wrong credentials",
    )
}

fn streamable(
    request: &HttpRequest,
    mut stream: TcpStream,
    expected: &str,
    challenge: &str,
    sessions: &Mutex<HashSet<String>>,
    counter: &AtomicUsize,
) {
    if request.header("authorization") != Some(expected) {
        return unauthorized(stream, challenge);
    }
    let session = request.header("mcp-session-id").map(str::to_string);
    match request.method.as_str() {
        "POST" => {}
        "DELETE" => {
            let known = session.is_some_and(|session| lock(sessions).remove(&session));
            let status = if known { "200 OK" } else { "404 Not Found" };
            return respond(stream, status, &[], "");
        }
        _ => {
            return respond(
                stream,
                "405 Method Not Allowed",
                &[("Allow", "POST, DELETE")],
                "",
            )
        }
    }
    let message = request.json();
    if message["method"] == "initialize" {
        let issued = format!("it-session-{}", counter.fetch_add(1, Ordering::SeqCst) + 1);
        lock(sessions).insert(issued.clone());
        let Outcome::Reply(reply) = react("http", false, &message) else {
            return respond(stream, "400 Bad Request", &[], "bad initialize");
        };
        let headers = [
            ("Content-Type", "application/json"),
            ("Mcp-Session-Id", issued.as_str()),
        ];
        return respond(stream, "200 OK", &headers, &reply.to_string());
    }
    match session {
        None => return respond(stream, "400 Bad Request", &[], "Mcp-Session-Id is required"),
        Some(session) if !lock(sessions).contains(&session) => {
            return respond(stream, "404 Not Found", &[], "no such session")
        }
        Some(_) => {}
    }
    let as_stream = matches!(message["method"].as_str(), Some("tools/list"))
        || message["params"]["name"] == "picture";
    match react("http", false, &message) {
        Outcome::Reply(reply) if as_stream => {
            if !open_event_stream(&mut stream) {
                return;
            }
            // A comment, an event that only primes resumption, and a log
            // notification come before the answer.
            write_event(&mut stream, ": keep-alive\n\n");
            write_event(&mut stream, "id: prime-1\ndata:\n\n");
            let note = json!({"jsonrpc": "2.0", "method": "notifications/message",
                              "params": {"level": "info", "data": "working on it"}});
            write_event(&mut stream, &message_event(&note));
            write_event(&mut stream, &format!("id: 2\n{}", message_event(&reply)));
            let _ = stream.shutdown(Shutdown::Both);
        }
        Outcome::Reply(reply) => respond(
            stream,
            "200 OK",
            &[("Content-Type", "application/json")],
            &reply.to_string(),
        ),
        Outcome::Later(..)
        | Outcome::Crash
        | Outcome::Nothing
        | Outcome::Ask
        | Outcome::AskAfter(_) => respond(stream, "202 Accepted", &[], ""),
    }
}

fn legacy(
    request: &HttpRequest,
    mut stream: TcpStream,
    expected: &str,
    streams: &Mutex<HashMap<String, TcpStream>>,
    counter: &AtomicUsize,
) {
    if request.header("authorization") != Some(expected) {
        return unauthorized(stream, "Bearer realm=\"spindle-it\"");
    }
    let session = match (request.method.as_str(), request.target.as_str()) {
        ("GET", "/sse") => {
            let session = format!("legacy-{}", counter.fetch_add(1, Ordering::SeqCst) + 1);
            if open_event_stream(&mut stream) {
                let endpoint = format!("event: endpoint\ndata: /messages?sessionId={session}\n\n");
                write_event(&mut stream, &endpoint);
                lock(streams).insert(session, stream);
            }
            return;
        }
        ("POST", target) if target.starts_with("/messages?sessionId=") => {
            target["/messages?sessionId=".len()..].to_string()
        }
        // What a server without Streamable HTTP answers to a POST here.
        ("POST", "/sse") => return respond(stream, "405 Method Not Allowed", &[], ""),
        _ => return respond(stream, "404 Not Found", &[], ""),
    };
    if !lock(streams).contains_key(&session) {
        return respond(stream, "404 Not Found", &[], "no such session");
    }
    respond(stream, "202 Accepted", &[], "Accepted");
    if let Outcome::Reply(reply) = react("sse", false, &request.json()) {
        let mut open = lock(streams);
        if let Some(events) = open.get_mut(&session) {
            if !write_event(events, &message_event(&reply)) {
                open.remove(&session);
            }
        }
    }
}

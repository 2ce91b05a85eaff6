//! The fake model server, driven by a minimal `std::net` HTTP/1.1 client.

use std::io::{Read, Write};
use std::net::{Shutdown, TcpStream};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::support::fake_openai::{
    chat_text, chunk_content, chunk_error, chunk_finish, chunk_reasoning, chunk_role,
    chunk_tool_call, chunk_usage, done,
};
use crate::support::{FakeServer, Reply, Step};

struct Client {
    stream: TcpStream,
    buffer: Vec<u8>,
}

struct Head {
    status: u16,
    headers: Vec<(String, String)>,
}

impl Head {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(key, _)| key.eq_ignore_ascii_case(name))
            .map(|(_, value)| value.as_str())
    }
}

impl Client {
    fn connect(server: &FakeServer) -> Client {
        let stream = TcpStream::connect(server.address()).expect("connect to the fake server");
        stream
            .set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        Client {
            stream,
            buffer: Vec::new(),
        }
    }

    fn post(&mut self, path: &str, body: &Value) {
        let body = body.to_string();
        let request = format!(
            "POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer sk-test\r\n\
             Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        );
        self.stream.write_all(request.as_bytes()).unwrap();
    }

    /// Reads more bytes; false on end of stream or a connection error.
    fn fill(&mut self) -> bool {
        let mut chunk = [0u8; 4096];
        match self.stream.read(&mut chunk) {
            Ok(0) | Err(_) => false,
            Ok(n) => {
                self.buffer.extend_from_slice(&chunk[..n]);
                true
            }
        }
    }

    fn line(&mut self) -> Option<String> {
        loop {
            if let Some(at) = self.buffer.windows(2).position(|w| w == b"\r\n") {
                let line: Vec<u8> = self.buffer.drain(..at + 2).collect();
                return Some(String::from_utf8(line[..at].to_vec()).unwrap());
            }
            if !self.fill() {
                return None;
            }
        }
    }

    fn read_head(&mut self) -> Head {
        let status_line = self.line().expect("a status line");
        let status = status_line
            .split(' ')
            .nth(1)
            .and_then(|code| code.parse().ok())
            .unwrap_or_else(|| panic!("bad status line {status_line:?}"));
        let mut headers = Vec::new();
        loop {
            let line = self.line().expect("a header line");
            if line.is_empty() {
                break;
            }
            let (name, value) = line.split_once(':').expect("name: value");
            headers.push((name.trim().to_string(), value.trim().to_string()));
        }
        Head { status, headers }
    }

    fn take(&mut self, length: usize) -> Option<Vec<u8>> {
        while self.buffer.len() < length {
            if !self.fill() {
                return None;
            }
        }
        Some(self.buffer.drain(..length).collect())
    }

    /// One chunk of a chunked body: `Some(empty)` for the terminating chunk,
    /// `None` if the connection ended first.
    fn chunk(&mut self) -> Option<Vec<u8>> {
        let size_line = self.line()?;
        let size = usize::from_str_radix(size_line.trim(), 16).expect("hex chunk size");
        let data = self.take(size)?;
        if size == 0 {
            assert_eq!(self.line()?, "", "no trailers expected");
            return Some(data);
        }
        assert_eq!(self.line()?, "", "chunk data ends with CRLF");
        Some(data)
    }

    /// The rest of a chunked body and whether it ended properly.
    fn chunked_body(&mut self) -> (String, bool) {
        let mut body = Vec::new();
        loop {
            match self.chunk() {
                Some(data) if data.is_empty() => return (String::from_utf8(body).unwrap(), true),
                Some(data) => body.extend(data),
                None => return (String::from_utf8(body).unwrap(), false),
            }
        }
    }

    fn fixed_body(&mut self, head: &Head) -> String {
        let length: usize = head
            .header("content-length")
            .expect("a Content-Length")
            .parse()
            .unwrap();
        String::from_utf8(self.take(length).expect("the whole body")).unwrap()
    }
}

/// The `data:` payloads of an SSE body.
fn sse_data(body: &str) -> Vec<String> {
    body.split("\n\n")
        .filter(|event| !event.is_empty())
        .map(|event| {
            event
                .strip_prefix("data: ")
                .unwrap_or_else(|| panic!("not a data event: {event:?}"))
                .to_string()
        })
        .collect()
}

fn chat_request() -> Value {
    json!({
        "model": "fake-model",
        "stream": true,
        "stream_options": {"include_usage": true},
        "messages": [{"role": "user", "content": "Hi"}],
    })
}

// ---------------------------------------------------------------------------
// The server

#[test]
fn streams_chat_text_as_chunked_sse() {
    let server = FakeServer::start();
    assert!(server.base_url().starts_with("http://127.0.0.1:"));
    assert!(server.base_url().ends_with("/v1"));
    server.push(Reply::Sse(chat_text(&["Hel", "lo"])));

    let mut client = Client::connect(&server);
    client.post("/v1/chat/completions", &chat_request());
    let head = client.read_head();
    assert_eq!(head.status, 200);
    assert_eq!(head.header("content-type"), Some("text/event-stream"));
    assert_eq!(head.header("transfer-encoding"), Some("chunked"));
    let (body, complete) = client.chunked_body();
    assert!(complete, "the body ends with the terminating chunk");

    let data = sse_data(&body);
    assert_eq!(data.len(), 6, "{data:#?}");
    assert_eq!(data[5], "[DONE]");
    let chunks: Vec<Value> = data[..5]
        .iter()
        .map(|payload| serde_json::from_str(payload).unwrap())
        .collect();
    for chunk in &chunks {
        assert_eq!(chunk["object"], "chat.completion.chunk");
    }
    assert_eq!(chunks[0]["choices"][0]["delta"]["role"], "assistant");
    assert_eq!(chunks[1]["choices"][0]["delta"]["content"], "Hel");
    assert_eq!(chunks[2]["choices"][0]["delta"]["content"], "lo");
    assert_eq!(chunks[2]["choices"][0]["finish_reason"], Value::Null);
    assert_eq!(chunks[3]["choices"][0]["finish_reason"], "stop");
    assert_eq!(chunks[4]["choices"], json!([]));
    assert_eq!(chunks[4]["usage"]["completion_tokens"], 2);
    assert_eq!(chunks[4]["usage"]["total_tokens"], 12);

    let requests = server.wait_requests(1, Duration::from_secs(5));
    assert_eq!(requests.len(), 1);
    assert_eq!(requests[0].method, "POST");
    assert_eq!(requests[0].path, "/v1/chat/completions");
    assert_eq!(requests[0].header("Authorization"), Some("Bearer sk-test"));
    assert_eq!(requests[0].header("content-type"), Some("application/json"));
    assert_eq!(requests[0].body, chat_request());
    assert_eq!(server.pending_replies(), 0);
    assert!(!server.wait_disconnect(Duration::from_millis(50)));
}

#[test]
fn chunk_helpers_build_wire_payloads() {
    let payload = |step: Step| match step {
        Step::Event(payload) => serde_json::from_str::<Value>(&payload).unwrap(),
        other => panic!("expected an event, got {other:?}"),
    };
    let role = payload(chunk_role());
    assert_eq!(
        role["choices"][0]["delta"],
        json!({"role": "assistant", "content": ""})
    );
    assert_eq!(role["usage"], Value::Null);
    let content = payload(chunk_content("a\nb"));
    assert_eq!(content["choices"][0]["delta"]["content"], "a\nb");
    let reasoning = payload(chunk_reasoning("thinking"));
    assert_eq!(
        reasoning["choices"][0]["delta"]["reasoning_content"],
        "thinking"
    );
    let first_call = payload(chunk_tool_call(0, Some("call_1"), Some("read_file"), ""));
    assert_eq!(
        first_call["choices"][0]["delta"]["tool_calls"][0],
        json!({"index": 0, "id": "call_1", "type": "function",
               "function": {"name": "read_file", "arguments": ""}})
    );
    let more_arguments = payload(chunk_tool_call(0, None, None, "{\"path\""));
    assert_eq!(
        more_arguments["choices"][0]["delta"]["tool_calls"][0],
        json!({"index": 0, "function": {"arguments": "{\"path\""}})
    );
    let finish = payload(chunk_finish("tool_calls"));
    assert_eq!(finish["choices"][0]["delta"], json!({}));
    assert_eq!(finish["choices"][0]["finish_reason"], "tool_calls");
    let usage = payload(chunk_usage(812, 41));
    assert_eq!(usage["usage"]["prompt_tokens"], 812);
    assert_eq!(usage["usage"]["total_tokens"], 853);
    let error = payload(chunk_error("overloaded", "server_error"));
    assert_eq!(error["error"]["message"], "overloaded");
    assert!(matches!(done(), Step::Raw(text) if text == "data: [DONE]\n\n"));
}

#[test]
fn flushes_every_step() {
    let server = FakeServer::start();
    server.push(Reply::Sse(vec![
        chunk_content("first"),
        Step::Sleep(Duration::from_millis(400)),
        chunk_content("second"),
        done(),
    ]));
    let mut client = Client::connect(&server);
    client.post("/v1/chat/completions", &chat_request());
    assert_eq!(client.read_head().status, 200);
    let first = client.chunk().expect("the first event");
    let first_at = Instant::now();
    assert!(String::from_utf8(first).unwrap().contains("first"));
    let second = client.chunk().expect("the second event");
    assert!(String::from_utf8(second).unwrap().contains("second"));
    assert!(
        first_at.elapsed() >= Duration::from_millis(300),
        "the first event must arrive before the pause, not with the second"
    );
    let (rest, complete) = client.chunked_body();
    assert!(complete);
    assert_eq!(rest, "data: [DONE]\n\n");
}

#[test]
fn keeps_connections_alive_and_replies_in_order() {
    let server = FakeServer::start();
    server.push(Reply::Sse(vec![
        Step::Raw(": keepalive\n\n".into()),
        done(),
    ]));
    server.push(Reply::openai_error(
        401,
        "Incorrect API key provided",
        "invalid_request_error",
        "invalid_api_key",
    ));
    server.push(Reply::Status {
        code: 429,
        body: "{}".into(),
        headers: vec![("Retry-After".into(), "2".into())],
    });

    let mut client = Client::connect(&server);
    client.post("/v1/chat/completions", &chat_request());
    assert_eq!(client.read_head().status, 200);
    let (body, complete) = client.chunked_body();
    assert!(complete);
    assert_eq!(body, ": keepalive\n\ndata: [DONE]\n\n");

    // Same connection, second request.
    client.post("/v1/chat/completions", &json!({"n": 2}));
    let head = client.read_head();
    assert_eq!(head.status, 401);
    assert_eq!(head.header("content-type"), Some("application/json"));
    let error: Value = serde_json::from_str(&client.fixed_body(&head)).unwrap();
    assert_eq!(error["error"]["code"], "invalid_api_key");
    assert_eq!(error["error"]["message"], "Incorrect API key provided");

    // And a third, with an extra header.
    client.post("/v1/chat/completions", &json!({"n": 3}));
    let head = client.read_head();
    assert_eq!(head.status, 429);
    assert_eq!(head.header("retry-after"), Some("2"));
    assert_eq!(client.fixed_body(&head), "{}");

    let requests = server.requests();
    assert_eq!(requests.len(), 3);
    assert_eq!(requests[1].body, json!({"n": 2}));
    assert_eq!(requests[2].body, json!({"n": 3}));
}

#[test]
fn answers_500_when_no_reply_is_queued() {
    let server = FakeServer::start();
    let mut client = Client::connect(&server);
    client.post("/v1/chat/completions", &chat_request());
    let head = client.read_head();
    assert_eq!(head.status, 500);
    let body: Value = serde_json::from_str(&client.fixed_body(&head)).unwrap();
    let message = body["error"]["message"].as_str().unwrap();
    assert!(message.contains("no reply queued"), "{message}");
    assert_eq!(server.requests().len(), 1);
}

#[test]
fn answers_404_elsewhere_without_using_a_reply() {
    let server = FakeServer::start();
    server.push(Reply::Sse(chat_text(&["unused"])));
    let mut client = Client::connect(&server);
    client
        .stream
        .write_all(b"GET /v1/files HTTP/1.1\r\nHost: x\r\n\r\n")
        .unwrap();
    let head = client.read_head();
    assert_eq!(head.status, 404);
    client.fixed_body(&head);
    assert_eq!(server.pending_replies(), 1);
    let requests = server.requests();
    assert_eq!(requests[0].method, "GET");
    assert_eq!(requests[0].path, "/v1/files");
    assert_eq!(requests[0].body, Value::Null);
}

#[test]
fn serves_a_model_list_apart_from_model_calls() {
    let server = FakeServer::start();
    let mut client = Client::connect(&server);
    client
        .stream
        .write_all(b"GET /v1/models HTTP/1.1\r\nHost: x\r\n\r\n")
        .unwrap();
    let head = client.read_head();
    assert_eq!(head.status, 404, "nothing served yet");
    client.fixed_body(&head);
    server.serve_models(serde_json::json!({"data": [{"id": "m"}]}));
    client
        .stream
        .write_all(b"GET /v1/models?limit=5 HTTP/1.1\r\nHost: x\r\n\r\n")
        .unwrap();
    let head = client.read_head();
    assert_eq!(head.status, 200);
    let body: Value = serde_json::from_str(&client.fixed_body(&head)).unwrap();
    assert_eq!(body["data"][0]["id"], "m");
    assert!(server.requests().is_empty());
    let listings = server.listings();
    assert_eq!(listings.len(), 2);
    assert_eq!(listings[1].path, "/v1/models?limit=5");
}

#[test]
fn reads_chunked_request_bodies() {
    let server = FakeServer::start();
    server.push(Reply::status(200, "{\"ok\":true}"));
    let mut client = Client::connect(&server);
    client
        .stream
        .write_all(
            b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n\
              5\r\n{\"a\":\r\n2\r\n1}\r\n0\r\n\r\n",
        )
        .unwrap();
    let head = client.read_head();
    assert_eq!(head.status, 200);
    assert_eq!(client.fixed_body(&head), "{\"ok\":true}");
    assert_eq!(server.requests()[0].body, json!({"a": 1}));
}

#[test]
fn cut_ends_the_stream_without_terminating_chunk() {
    let server = FakeServer::start();
    server.push(Reply::Sse(vec![
        chunk_role(),
        chunk_content("par"),
        Step::Cut,
    ]));
    let mut client = Client::connect(&server);
    client.post("/v1/chat/completions", &chat_request());
    assert_eq!(client.read_head().status, 200);
    let (body, complete) = client.chunked_body();
    assert!(!complete, "a cut stream must not look complete");
    assert_eq!(sse_data(&body).len(), 2);
    // The connection is gone, not just the body.
    let mut probe = [0u8; 1];
    assert!(matches!(client.stream.read(&mut probe), Ok(0) | Err(_)));
    // The server cut it; the client did not go away.
    assert!(!server.wait_disconnect(Duration::from_millis(100)));
}

#[test]
fn detects_a_client_leaving_a_stall() {
    let server = FakeServer::start();
    server.push(Reply::Sse(vec![chunk_role(), Step::Stall, done()]));
    let mut client = Client::connect(&server);
    client.post("/v1/chat/completions", &chat_request());
    assert_eq!(client.read_head().status, 200);
    client.chunk().expect("the role chunk");
    // The stall holds: nothing else arrives while the client waits.
    client
        .stream
        .set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    let mut probe = [0u8; 1];
    let read = client.stream.read(&mut probe);
    assert!(
        matches!(&read, Err(err) if matches!(err.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut)),
        "expected silence during the stall, got {read:?}"
    );
    assert!(!server.wait_disconnect(Duration::from_millis(50)));

    let started = Instant::now();
    drop(client);
    assert!(
        server.wait_disconnect(Duration::from_secs(5)),
        "the server must notice the client leaving"
    );
    assert!(started.elapsed() < Duration::from_secs(2));
    assert_eq!(server.disconnects(), 1);
}

#[test]
fn detects_a_client_leaving_during_a_sleep() {
    let server = FakeServer::start();
    server.push(Reply::Sse(vec![
        chunk_role(),
        Step::Sleep(Duration::from_secs(30)),
        done(),
    ]));
    let mut client = Client::connect(&server);
    client.post("/v1/chat/completions", &chat_request());
    assert_eq!(client.read_head().status, 200);
    client.stream.shutdown(Shutdown::Both).unwrap();
    assert!(server.wait_disconnect(Duration::from_secs(5)));
}

#[test]
fn survives_misbehaving_clients() {
    let server = FakeServer::start();

    // Garbage instead of a request line: a 400, then the connection closes.
    let mut garbage = Client::connect(&server);
    garbage.stream.write_all(b"hello there\r\n\r\n").unwrap();
    assert_eq!(garbage.read_head().status, 400);

    // A bad Content-Length.
    let mut bad_length = Client::connect(&server);
    bad_length
        .stream
        .write_all(b"POST /v1/chat/completions HTTP/1.1\r\nContent-Length: lots\r\n\r\n")
        .unwrap();
    assert_eq!(bad_length.read_head().status, 400);

    // A client that promises a body and vanishes, and one that sends half a head.
    let mut short = Client::connect(&server);
    short
        .stream
        .write_all(b"POST /v1/chat/completions HTTP/1.1\r\nContent-Length: 100\r\n\r\n{")
        .unwrap();
    drop(short);
    let mut half = Client::connect(&server);
    half.stream.write_all(b"POST /v1/chat").unwrap();
    drop(half);
    // A client that connects and says nothing.
    let silent = Client::connect(&server);
    drop(silent);

    // The server still works.
    server.push(Reply::Sse(chat_text(&["ok"])));
    let mut client = Client::connect(&server);
    client.post("/v1/chat/completions", &chat_request());
    assert_eq!(client.read_head().status, 200);
    let (body, complete) = client.chunked_body();
    assert!(complete && body.contains("\"ok\""), "{body}");
    // Only the well-formed requests were recorded.
    assert_eq!(server.requests().len(), 1);
}

#[test]
fn wait_requests_returns_once_enough_arrived() {
    let server = FakeServer::start();
    server.push(Reply::status(200, "{}"));
    let address = server.address();
    let client = std::thread::spawn(move || {
        // The delay is the point: the request comes while `wait_requests`
        // is already waiting.
        std::thread::sleep(Duration::from_millis(100));
        let mut stream = TcpStream::connect(address).unwrap();
        stream
            .write_all(b"POST /v1/chat/completions HTTP/1.1\r\nContent-Length: 2\r\n\r\n{}")
            .unwrap();
        let mut answer = [0u8; 12];
        stream.read_exact(&mut answer).unwrap();
        String::from_utf8_lossy(&answer).into_owned()
    });
    let requests = server.wait_requests(1, Duration::from_secs(5));
    assert_eq!(requests.len(), 1);
    assert_eq!(requests[0].body, json!({}));
    assert_eq!(client.join().unwrap(), "HTTP/1.1 200");
}

#[test]
fn wait_requests_panics_on_timeout() {
    let message = super::panic_of(|| {
        let server = FakeServer::start();
        server.wait_requests(1, Duration::from_millis(50));
    });
    assert!(message.contains("expected 1 requests"), "{message}");
}

#[test]
fn closes_its_connections_when_dropped() {
    let server = FakeServer::start();
    server.push(Reply::Sse(vec![chunk_role(), Step::Stall]));
    let mut stalled = Client::connect(&server);
    stalled.post("/v1/chat/completions", &chat_request());
    assert_eq!(stalled.read_head().status, 200);
    stalled.chunk().expect("the role chunk");
    let mut idle = Client::connect(&server);
    // (Checking that the port refuses connections afterwards would race
    // with other tests' servers reusing it.)
    let started = Instant::now();
    drop(server);
    let mut probe = [0u8; 1];
    for client in [&mut stalled, &mut idle] {
        // End of stream, or a reset if the server never accepted it.
        let read = client.stream.read(&mut probe);
        let closed = match &read {
            Ok(n) => *n == 0,
            Err(err) => err.kind() == std::io::ErrorKind::ConnectionReset,
        };
        assert!(closed, "expected a closed connection, got {read:?}");
    }
    assert!(started.elapsed() < Duration::from_secs(2));
}

//! Serving one HTTP/1.1 connection of the fake server: parsing requests
//! (Content-Length or chunked bodies, keep-alive), recording them, and
//! playing the queued reply step by step.

use std::io::{self, Read, Write};
use std::net::{Shutdown, TcpStream};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::{Recorded, Reply, Shared, Step, POLL};

/// Longest time a `Step::Stall` holds a connection.
const STALL_LIMIT: Duration = Duration::from_secs(60);
/// Upper bound for a request head (request line plus headers).
const MAX_HEAD: usize = 64 * 1024;
/// Upper bound for a request body.
const MAX_BODY: usize = 64 * 1024 * 1024;
/// Paths that consume a queued reply when POSTed to: the three wire formats
/// (Chat Completions, Responses, Anthropic Messages) under a `/v1` base.
const REPLY_PATHS: [&str; 3] = ["/v1/chat/completions", "/v1/responses", "/v1/messages"];

/// Why a connection ended early.
enum Ended {
    /// The client closed its side (or reset the connection).
    ClientGone,
    /// The server is shutting down, or the reply asked for a cut.
    Closed,
}

struct Connection {
    stream: TcpStream,
    /// Bytes read from the socket but not parsed yet.
    pending: Vec<u8>,
    shared: Arc<Shared>,
}

struct Head {
    method: String,
    path: String,
    headers: Vec<(String, String)>,
}

impl Head {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(key, _)| key == name)
            .map(|(_, value)| value.as_str())
    }
}

/// Serves one accepted connection until it ends; never panics on client
/// input.
pub(super) fn serve(stream: TcpStream, shared: Arc<Shared>) {
    let setup = stream
        .set_nonblocking(false)
        .and_then(|()| stream.set_read_timeout(Some(POLL)))
        .and_then(|()| stream.set_write_timeout(Some(Duration::from_secs(10))))
        .and_then(|()| stream.set_nodelay(true));
    if let Err(err) = setup {
        eprintln!("fake server: cannot set up a connection: {err}");
        return;
    }
    let mut connection = Connection {
        stream,
        pending: Vec::new(),
        shared,
    };
    // Errors here are the client's business (it went away, or sent
    // garbage and got a 400); the connection just ends.
    let _ = connection.serve();
    let _ = connection.stream.shutdown(Shutdown::Both);
}

impl Connection {
    /// Serves requests until the client closes, misbehaves, asks to close,
    /// or a reply ends the connection.
    fn serve(&mut self) -> Result<(), Ended> {
        loop {
            let head = match self.read_head() {
                Ok(Some(head)) => head,
                Ok(None) => return Ok(()),
                Err(Some(reason)) => {
                    self.send_fixed(400, &[], &error_body(&reason, "invalid_request_error"))?;
                    return Ok(());
                }
                Err(None) => return Err(Ended::ClientGone),
            };
            if head
                .header("expect")
                .is_some_and(|value| value.eq_ignore_ascii_case("100-continue"))
            {
                self.write(b"HTTP/1.1 100 Continue\r\n\r\n")?;
            }
            let body = match self.read_body(&head) {
                Ok(body) => body,
                Err(Some(reason)) => {
                    self.send_fixed(400, &[], &error_body(&reason, "invalid_request_error"))?;
                    return Ok(());
                }
                Err(None) => return Err(Ended::ClientGone),
            };
            let close_after = head
                .header("connection")
                .is_some_and(|value| value.eq_ignore_ascii_case("close"));
            self.answer(head, body)?;
            if close_after {
                return Ok(());
            }
        }
    }

    /// Records the request and sends the matching reply.
    fn answer(&mut self, head: Head, body: Vec<u8>) -> Result<(), Ended> {
        let is_model_call = head.method == "POST" && REPLY_PATHS.contains(&head.path.as_str());
        let description = format!("{} {}", head.method, head.path);
        let route = head.path.split('?').next().unwrap_or_default();
        if head.method == "POST" && route == "/tokenize" {
            let content = parse_body(&body)["content"]
                .as_str()
                .unwrap_or_default()
                .to_string();
            let per = {
                let mut state = self.shared.state();
                let per = state.bytes_per_token;
                state.tokenized.push(content.clone());
                self.shared.changed.notify_all();
                per
            };
            return match per {
                Some(per) => {
                    let tokens = vec![0; content.len().div_ceil(per)];
                    let body = serde_json::json!({ "tokens": tokens }).to_string();
                    self.send_fixed(200, &[], &body)
                }
                None => self.send_fixed(404, &[], &error_body("no tokenizer", "not_found")),
            };
        }
        if head.method == "GET" && route.ends_with("/models") {
            let listed = {
                let mut state = self.shared.state();
                state.listings.push(Recorded {
                    method: head.method,
                    path: head.path,
                    headers: head.headers,
                    body: parse_body(&body),
                    raw: String::from_utf8_lossy(&body).into_owned(),
                });
                self.shared.changed.notify_all();
                state.model_list.clone()
            };
            return match listed {
                Some(list) => self.send_fixed(200, &[], &list),
                None => self.send_fixed(
                    404,
                    &[],
                    &error_body("fake server: no model list served", "not_found"),
                ),
            };
        }
        let reply = {
            let mut state = self.shared.state();
            state.requests.push(Recorded {
                method: head.method,
                path: head.path,
                headers: head.headers,
                body: parse_body(&body),
                raw: String::from_utf8_lossy(&body).into_owned(),
            });
            let number = state.requests.len();
            self.shared.changed.notify_all();
            if is_model_call {
                state.replies.pop_front().ok_or_else(|| {
                    format!("fake server: no reply queued for {description} (request #{number})")
                })
            } else {
                Err(format!("fake server: nothing is served at {description}"))
            }
        };
        match reply {
            Ok(Reply::Sse(steps)) => self.stream_steps(&[], &steps),
            Ok(Reply::SseWithHeaders { headers, steps }) => self.stream_steps(&headers, &steps),
            Ok(Reply::Status {
                code,
                body,
                headers,
            }) => self.send_fixed(code, &headers, &body),
            Err(message) => {
                eprintln!("{message}");
                let code = if is_model_call { 500 } else { 404 };
                self.send_fixed(code, &[], &error_body(&message, "fake_server_error"))
            }
        }
    }

    fn stream_steps(&mut self, headers: &[(String, String)], steps: &[Step]) -> Result<(), Ended> {
        let mut head = String::from(
            "HTTP/1.1 200 OK\r\n\
             Content-Type: text/event-stream\r\n\
             Cache-Control: no-cache\r\n\
             Transfer-Encoding: chunked\r\n\
             x-request-id: req_fake\r\n",
        );
        for (name, value) in headers {
            head.push_str(&format!("{name}: {value}\r\n"));
        }
        head.push_str("\r\n");
        self.write(head.as_bytes())
            .map_err(|ended| self.note(ended))?;
        for step in steps {
            let result = match step {
                Step::Event(payload) => self.write_chunk(format!("data: {payload}\n\n").as_bytes()),
                Step::Raw(text) => self.write_chunk(text.as_bytes()),
                Step::Sleep(duration) => self.wait(*duration),
                Step::Stall => self.wait(STALL_LIMIT),
                Step::Cut => {
                    let _ = self.stream.shutdown(Shutdown::Both);
                    return Err(Ended::Closed);
                }
            };
            result.map_err(|ended| self.note(ended))?;
        }
        self.write(b"0\r\n\r\n").map_err(|ended| self.note(ended))
    }

    /// Counts a client that vanished mid-reply.
    fn note(&self, ended: Ended) -> Ended {
        if let Ended::ClientGone = ended {
            self.shared.record_disconnect();
        }
        ended
    }

    /// Waits for `duration` while watching the socket: returns
    /// `ClientGone` as soon as the client closes or resets it.
    fn wait(&mut self, duration: Duration) -> Result<(), Ended> {
        let deadline = Instant::now() + duration;
        let mut probe = [0u8; 1];
        loop {
            if self.shared.stopping() {
                return Err(Ended::Closed);
            }
            let now = Instant::now();
            if now >= deadline {
                return Ok(());
            }
            let slice = (deadline - now).min(POLL);
            // peek waits up to the read timeout for something to happen.
            self.stream
                .set_read_timeout(Some(slice.max(Duration::from_millis(1))))
                .map_err(|_| Ended::ClientGone)?;
            let peeked = self.stream.peek(&mut probe);
            let _ = self.stream.set_read_timeout(Some(POLL));
            match peeked {
                Ok(0) => return Err(Ended::ClientGone),
                // The client sent more (a pipelined request): it is still
                // there. Do not spin on the unread bytes.
                Ok(_) => thread::sleep(slice),
                Err(err) if is_timeout(&err) || err.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => return Err(Ended::ClientGone),
            }
        }
    }

    fn write_chunk(&mut self, data: &[u8]) -> Result<(), Ended> {
        if data.is_empty() {
            // An empty chunk would end the body.
            return Ok(());
        }
        let mut framed = format!("{:x}\r\n", data.len()).into_bytes();
        framed.extend_from_slice(data);
        framed.extend_from_slice(b"\r\n");
        self.write(&framed)
    }

    fn write(&mut self, data: &[u8]) -> Result<(), Ended> {
        if self.shared.stopping() {
            return Err(Ended::Closed);
        }
        self.stream
            .write_all(data)
            .and_then(|()| self.stream.flush())
            .map_err(|_| Ended::ClientGone)
    }

    fn send_fixed(
        &mut self,
        code: u16,
        headers: &[(String, String)],
        body: &str,
    ) -> Result<(), Ended> {
        let mut head = format!("HTTP/1.1 {code} {}\r\n", reason_phrase(code));
        if !headers
            .iter()
            .any(|(name, _)| name.eq_ignore_ascii_case("content-type"))
        {
            head.push_str("Content-Type: application/json\r\n");
        }
        for (name, value) in headers {
            head.push_str(&format!("{name}: {value}\r\n"));
        }
        head.push_str(&format!("Content-Length: {}\r\n\r\n", body.len()));
        let mut bytes = head.into_bytes();
        bytes.extend_from_slice(body.as_bytes());
        self.write(&bytes)
    }

    /// Reads more bytes into `pending`. `Ok(false)` means end of stream.
    /// `Err(None)` means the connection failed or the server is stopping.
    fn fill(&mut self) -> Result<bool, Option<String>> {
        let mut buffer = [0u8; 16 * 1024];
        loop {
            if self.shared.stopping() {
                return Err(None);
            }
            match self.stream.read(&mut buffer) {
                Ok(0) => return Ok(false),
                Ok(n) => {
                    self.pending.extend_from_slice(&buffer[..n]);
                    return Ok(true);
                }
                Err(err) if is_timeout(&err) || err.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => return Err(None),
            }
        }
    }

    /// Reads a request line and headers. `Ok(None)`: the client closed the
    /// connection between requests. `Err(Some(reason))`: a malformed request.
    fn read_head(&mut self) -> Result<Option<Head>, Option<String>> {
        let end = loop {
            if let Some(at) = find(&self.pending, b"\r\n\r\n") {
                break at;
            }
            if self.pending.len() > MAX_HEAD {
                return Err(Some("request head too large".into()));
            }
            if !self.fill()? {
                if self.pending.is_empty() {
                    return Ok(None);
                }
                return Err(None);
            }
        };
        let head: Vec<u8> = self.pending.drain(..end + 4).collect();
        let text =
            String::from_utf8(head).map_err(|_| Some("request head is not UTF-8".to_string()))?;
        let mut lines = text.split("\r\n");
        let request_line = lines.next().unwrap_or_default();
        let mut parts = request_line.split(' ');
        let (Some(method), Some(path), Some(version)) = (parts.next(), parts.next(), parts.next())
        else {
            return Err(Some(format!("malformed request line {request_line:?}")));
        };
        if !version.starts_with("HTTP/1.") || method.is_empty() || path.is_empty() {
            return Err(Some(format!("malformed request line {request_line:?}")));
        }
        let mut headers = Vec::new();
        for line in lines.filter(|line| !line.is_empty()) {
            let Some((name, value)) = line.split_once(':') else {
                return Err(Some(format!("malformed header line {line:?}")));
            };
            headers.push((name.trim().to_ascii_lowercase(), value.trim().to_string()));
        }
        // A request sent to this server as to a proxy names the target in
        // absolute form (`http://host:port/path`); a server takes that as
        // its path too.
        let path = match path.strip_prefix("http://") {
            Some(rest) => rest.find('/').map_or("/", |at| &rest[at..]),
            None => path,
        };
        Ok(Some(Head {
            method: method.to_string(),
            path: path.to_string(),
            headers,
        }))
    }

    /// Reads the body announced by `Content-Length` or chunked encoding.
    fn read_body(&mut self, head: &Head) -> Result<Vec<u8>, Option<String>> {
        let chunked = head
            .header("transfer-encoding")
            .is_some_and(|value| value.to_ascii_lowercase().contains("chunked"));
        if chunked {
            return self.read_chunked_body();
        }
        let length = match head.header("content-length") {
            None => 0,
            Some(value) => value
                .parse::<usize>()
                .map_err(|_| Some(format!("bad Content-Length {value:?}")))?,
        };
        if length > MAX_BODY {
            return Err(Some("request body too large".into()));
        }
        self.take(length)
    }

    fn read_chunked_body(&mut self) -> Result<Vec<u8>, Option<String>> {
        let mut body = Vec::new();
        loop {
            let line = self.take_line()?;
            let size_text = line.split(';').next().unwrap_or_default().trim();
            let size = usize::from_str_radix(size_text, 16)
                .map_err(|_| Some(format!("bad chunk size {line:?}")))?;
            if body.len() + size > MAX_BODY {
                return Err(Some("request body too large".into()));
            }
            if size == 0 {
                // Trailers, if any, end with an empty line.
                while !self.take_line()?.is_empty() {}
                return Ok(body);
            }
            body.extend(self.take(size)?);
            if !self.take_line()?.is_empty() {
                return Err(Some("chunk not followed by CRLF".into()));
            }
        }
    }

    fn take_line(&mut self) -> Result<String, Option<String>> {
        loop {
            if let Some(at) = find(&self.pending, b"\r\n") {
                let line: Vec<u8> = self.pending.drain(..at + 2).collect();
                return Ok(String::from_utf8_lossy(&line[..at]).into_owned());
            }
            if self.pending.len() > MAX_HEAD {
                return Err(Some("chunk header line too long".into()));
            }
            if !self.fill()? {
                return Err(None);
            }
        }
    }

    fn take(&mut self, length: usize) -> Result<Vec<u8>, Option<String>> {
        while self.pending.len() < length {
            if !self.fill()? {
                return Err(None);
            }
        }
        Ok(self.pending.drain(..length).collect())
    }
}

fn is_timeout(err: &io::Error) -> bool {
    matches!(
        err.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
    )
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack
        .windows(needle.len())
        .position(|window| window == needle)
}

fn parse_body(body: &[u8]) -> Value {
    if body.is_empty() {
        return Value::Null;
    }
    serde_json::from_slice(body)
        .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(body).into_owned()))
}

fn error_body(message: &str, kind: &str) -> String {
    json!({"error": {"message": message, "type": kind, "param": null, "code": null}}).to_string()
}

fn reason_phrase(code: u16) -> &'static str {
    match code {
        200 => "OK",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        408 => "Request Timeout",
        413 => "Payload Too Large",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        504 => "Gateway Timeout",
        529 => "Overloaded",
        _ => "Status",
    }
}

//! The fake Chat Completions server: serves one pre-rendered SSE stream of
//! content chunks to every connection (figure 4).

use crossbeam_channel::Receiver;
use serde_json::Value;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

pub(crate) struct FakeServer {
    pub(crate) base_url: String,
    pub(crate) body_len: usize,
    /// One report per connection served.
    pub(crate) served: Receiver<Result<Served, String>>,
}

pub(crate) struct Served {
    pub(crate) request_at: Instant,
    pub(crate) written_at: Instant,
}

impl FakeServer {
    /// Binds 127.0.0.1:0 and serves every connection the same pre-rendered
    /// SSE response on a background thread.
    pub(crate) fn start(chunks: u64) -> Result<FakeServer, String> {
        let listener = TcpListener::bind("127.0.0.1:0").map_err(|e| format!("cannot bind: {e}"))?;
        let address = listener
            .local_addr()
            .map_err(|e| format!("no local address: {e}"))?;
        let response = Arc::new(render_response(chunks));
        let body_len = response.len();
        let (sender, served) = crossbeam_channel::unbounded();
        let connections = Arc::new(AtomicUsize::new(0));
        thread::Builder::new()
            .name("bench-server".into())
            .spawn(move || {
                for stream in listener.incoming() {
                    let Ok(stream) = stream else { continue };
                    let response = response.clone();
                    let sender = sender.clone();
                    let number = connections.fetch_add(1, Ordering::Relaxed);
                    let _ = thread::Builder::new()
                        .name(format!("bench-conn-{number}"))
                        .spawn(move || {
                            let _ = sender.send(serve(stream, &response));
                        });
                }
            })
            .map_err(|e| format!("cannot start the server thread: {e}"))?;
        Ok(FakeServer {
            base_url: format!("http://{address}/v1"),
            body_len,
            served,
        })
    }
}

fn render_response(chunks: u64) -> Vec<u8> {
    let head = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\nConnection: close\r\n\r\n";
    let chunk = "data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"tok \"},\"finish_reason\":null}]}\n\n";
    let finish = "data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n";
    let done = "data: [DONE]\n\n";
    let mut out =
        Vec::with_capacity(head.len() + chunk.len() * chunks as usize + finish.len() + done.len());
    out.extend_from_slice(head.as_bytes());
    for _ in 0..chunks {
        out.extend_from_slice(chunk.as_bytes());
    }
    out.extend_from_slice(finish.as_bytes());
    out.extend_from_slice(done.as_bytes());
    out
}

/// Reads one request (headers and body) and answers it with `response`.
fn serve(mut stream: TcpStream, response: &[u8]) -> Result<Served, String> {
    let io = |what: &str, err: std::io::Error| format!("{what}: {err}");
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .map_err(|e| io("set_read_timeout", e))?;
    stream
        .set_write_timeout(Some(Duration::from_secs(60)))
        .map_err(|e| io("set_write_timeout", e))?;
    let _ = stream.set_nodelay(true);

    // Headers.
    let mut buffer = Vec::with_capacity(16 * 1024);
    let mut scratch = [0u8; 16 * 1024];
    let header_end = loop {
        if let Some(end) = find(&buffer, b"\r\n\r\n") {
            break end + 4;
        }
        if buffer.len() > 1024 * 1024 {
            return Err("request headers over 1 MiB".into());
        }
        let n = stream
            .read(&mut scratch)
            .map_err(|e| io("reading the request", e))?;
        if n == 0 {
            return Err("the client closed before sending its headers".into());
        }
        buffer.extend_from_slice(&scratch[..n]);
    };
    let request_at = Instant::now();
    let head = String::from_utf8_lossy(&buffer[..header_end]).to_string();
    let mut lines = head.split("\r\n");
    let request_line = lines.next().unwrap_or_default().to_string();
    let mut content_length: Option<usize> = None;
    let mut chunked = false;
    let mut expect_continue = false;
    for line in lines {
        let Some((name, value)) = line.split_once(':') else {
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

    // Body: read all of it, so closing the socket does not reset it.
    let mut body = buffer[header_end..].to_vec();
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

    let path = request_line.split(' ').nth(1).unwrap_or_default();
    if !request_line.starts_with("POST ") || path != "/v1/chat/completions" {
        let body = r#"{"error":{"message":"bench: not found"}}"#;
        let answer = format!(
            "HTTP/1.1 404 Not Found\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        );
        let _ = stream.write_all(answer.as_bytes());
        return Err(format!("unexpected request: {request_line}"));
    }
    let parsed: Result<Value, _> = serde_json::from_slice(&body);
    if !parsed.is_ok_and(|v| v.get("stream") == Some(&Value::Bool(true))) {
        eprintln!("bench: warning: the chat request body is not JSON with \"stream\": true");
    }

    stream
        .write_all(response)
        .map_err(|e| io("writing the response", e))?;
    let written_at = Instant::now();
    let _ = stream.shutdown(std::net::Shutdown::Write);
    Ok(Served {
        request_at,
        written_at,
    })
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

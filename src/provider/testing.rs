//! Helpers shared by the providers' tests.

use super::Sink;
use std::io::{Read, Write};

/// A sink that keeps what was streamed.
#[derive(Default)]
pub(super) struct Collect {
    pub text: String,
    pub thought: String,
}

impl Sink for Collect {
    fn text(&mut self, delta: &str) {
        self.text.push_str(delta);
    }
    fn thought(&mut self, delta: &str) {
        self.thought.push_str(delta);
    }
}

/// Answers one request on a local port with `sse` and hands back the
/// request as received (head and body). The base URL ends in `suffix`.
pub(super) fn serve_once(
    sse: &'static str,
    suffix: &str,
) -> (String, std::thread::JoinHandle<String>) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let address = listener.local_addr().unwrap();
    let server = std::thread::spawn(move || {
        let (mut socket, _) = listener.accept().unwrap();
        let mut request = Vec::new();
        let mut buffer = [0u8; 8192];
        let mut wanted = usize::MAX;
        while request.len() < wanted {
            let read = socket.read(&mut buffer).unwrap();
            assert!(read > 0, "the client closed early");
            request.extend_from_slice(&buffer[..read]);
            let text = String::from_utf8_lossy(&request).to_lowercase();
            if let Some(end) = text.find("\r\n\r\n") {
                let length = text[..end]
                    .lines()
                    .find_map(|line| line.strip_prefix("content-length:"))
                    .map_or(0, |value| value.trim().parse().unwrap());
                wanted = end + 4 + length;
            }
        }
        let head =
            "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n";
        socket.write_all(head.as_bytes()).unwrap();
        socket.write_all(sse.as_bytes()).unwrap();
        String::from_utf8(request).unwrap()
    });
    (format!("http://{address}{suffix}"), server)
}

/// Timeouts of one attempt whose responses may hold at most `cap` bytes.
pub(super) fn capped(cap: usize) -> super::http::Timeouts {
    let mut timeouts = super::http::Timeouts {
        attempts: 1,
        ..Default::default()
    };
    timeouts.limits.response = cap;
    timeouts
}

/// `start`, then `event` (an SSE event with its blank line) 500 times,
/// and no terminal event: for `serve_once`.
pub(super) fn flood(start: &str, event: &str) -> &'static str {
    Box::leak(format!("{start}{}", event.repeat(500)).into_boxed_str())
}

/// The call was cut off at the cap, and the sink got no more than the
/// cap allows.
pub(super) fn assert_cut_off(
    result: Result<super::Outcome, super::StreamError>,
    sink: &Collect,
    cap: usize,
) {
    match result {
        Err(super::StreamError::Failed(error)) => {
            assert_eq!(error.code, "provider_response_too_large", "{error}");
        }
        other => panic!("not cut off: {other:?}"),
    }
    assert!(sink.text.len() + sink.thought.len() <= cap);
}

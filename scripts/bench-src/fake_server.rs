//! The fake Chat Completions server: serves one pre-rendered SSE stream of
//! content chunks to every connection (figure 4).

use crate::chat_server::{not_found, read_request};
use crossbeam_channel::Receiver;
use serde_json::Value;
use std::io::Write;
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
                            // A side request (the agent asking for the
                            // model list) is answered 404 and not reported.
                            if let Some(report) = serve(stream, &response).transpose() {
                                let _ = sender.send(report);
                            }
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

/// Reads one request (headers and body) and answers it with `response`;
/// any other than a chat request gets 404, as from a server without a
/// model list (`None`).
fn serve(mut stream: TcpStream, response: &[u8]) -> Result<Option<Served>, String> {
    let request = read_request(&mut stream, Duration::from_secs(60))?;
    let request_at = request.received;
    if !request.is_chat() {
        not_found(&mut stream);
        return Ok(None);
    }
    let parsed: Result<Value, _> = serde_json::from_slice(&request.body);
    if !parsed.is_ok_and(|v| v.get("stream") == Some(&Value::Bool(true))) {
        eprintln!("bench: warning: the chat request body is not JSON with \"stream\": true");
    }

    stream
        .write_all(response)
        .map_err(|e| format!("writing the response: {e}"))?;
    let written_at = Instant::now();
    let _ = stream.shutdown(std::net::Shutdown::Write);
    Ok(Some(Served {
        request_at,
        written_at,
    }))
}

//! A fake OpenAI-compatible model server on 127.0.0.1, built on `std::net`.
//!
//! Tests queue the replies the "model" should give, point the agent at
//! `base_url()`, and afterwards look at the requests the agent sent. Replies
//! are scripted step by step (events, raw bytes, pauses, a stall, a cut
//! connection), so streaming, error and cancellation paths can all be
//! exercised deterministically.
//!
//! Shape: one thread accepts, one thread serves each connection (HTTP/1.1
//! with keep-alive). Streamed replies use chunked transfer encoding and every
//! step is flushed on its own, like a real server. Nothing a client does can
//! make the server panic; a malformed request gets a 400 and the connection
//! is closed.
//!
//! Layout: this file holds the API and the accepting thread,
//! `connection.rs` the HTTP handling of one connection, `chunks.rs` the
//! builders of Chat Completions stream payloads (re-exported here).
//!
//! Lifetime: dropping the `FakeServer` stops and joins the accepting thread
//! and tells the connection threads to stop; they notice within about 100 ms
//! (they poll with short read timeouts) and are not joined.

mod chunks;
mod connection;

pub use chunks::*;

use std::collections::VecDeque;
use std::io;
use std::net::{SocketAddr, TcpListener};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

/// How often blocked threads wake up to check for shutdown or a vanished
/// client.
const POLL: Duration = Duration::from_millis(50);

/// One scripted answer to one model request.
#[derive(Debug, Clone)]
pub enum Reply {
    /// `200 OK`, `Content-Type: text/event-stream`, chunked; the steps are
    /// played in order and the body ends with the terminating chunk unless a
    /// `Step::Cut` (or a vanished client) ends it first.
    Sse(Vec<Step>),
    /// `Sse` with more response headers (a gateway's cost header, say).
    SseWithHeaders {
        headers: Vec<(String, String)>,
        steps: Vec<Step>,
    },
    /// Any status with a fixed body (`Content-Type: application/json` unless
    /// `headers` names another), sent with `Content-Length`.
    Status {
        code: u16,
        body: String,
        headers: Vec<(String, String)>,
    },
}

impl Reply {
    /// A status reply with a body and no extra headers.
    pub fn status(code: u16, body: impl Into<String>) -> Reply {
        Reply::Status {
            code,
            body: body.into(),
            headers: Vec::new(),
        }
    }

    /// An OpenAI-style error reply:
    /// `{"error":{"message":…,"type":…,"param":null,"code":…}}`.
    pub fn openai_error(status: u16, message: &str, kind: &str, code: &str) -> Reply {
        let body = json!({
            "error": {"message": message, "type": kind, "param": null, "code": code}
        });
        Reply::status(status, body.to_string())
    }
}

/// One step of a streamed reply.
#[derive(Debug, Clone)]
pub enum Step {
    /// Writes `data: {payload}\n\n`.
    Event(String),
    /// Writes the bytes as they are (an empty string writes nothing).
    Raw(String),
    /// Waits, still watching for the client to go away.
    Sleep(Duration),
    /// Holds the connection open, writing nothing, until the client
    /// disconnects or 60 s pass.
    Stall,
    /// Closes the TCP connection right here, without the terminating chunk.
    Cut,
}

/// A request the server received.
#[derive(Debug, Clone)]
pub struct Recorded {
    pub method: String,
    /// The request target as sent, e.g. `/v1/chat/completions`.
    pub path: String,
    /// Header names are lowercased; values are as sent.
    pub headers: Vec<(String, String)>,
    /// The body parsed as JSON; `Null` if empty, a JSON string holding the
    /// text if it is not JSON.
    pub body: Value,
    /// The body exactly as sent (lossy UTF-8).
    pub raw: String,
}

impl Recorded {
    /// The first header with this name (any case).
    pub fn header(&self, name: &str) -> Option<&str> {
        let name = name.to_ascii_lowercase();
        self.headers
            .iter()
            .find(|(key, _)| *key == name)
            .map(|(_, value)| value.as_str())
    }
}

/// The fake server. See the module documentation.
pub struct FakeServer {
    address: SocketAddr,
    shared: Arc<Shared>,
    acceptor: Option<JoinHandle<()>>,
}

struct Shared {
    state: Mutex<State>,
    changed: Condvar,
    stop: AtomicBool,
    next_connection: AtomicUsize,
}

#[derive(Default)]
struct State {
    replies: VecDeque<Reply>,
    requests: Vec<Recorded>,
    /// The body served at `GET …/models` (404 when unset).
    model_list: Option<String>,
    /// The model list requests, kept apart from the model calls.
    listings: Vec<Recorded>,
    /// `POST /tokenize` answers one token per this many bytes of
    /// `content` (404 when unset), and the texts it was asked to count.
    bytes_per_token: Option<usize>,
    tokenized: Vec<String>,
    /// Clients that went away while a reply was streaming or stalled.
    disconnects: usize,
}

impl Shared {
    fn state(&self) -> MutexGuard<'_, State> {
        // A poisoned lock only means some thread panicked while holding it;
        // the recorded data is still the best information available.
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn stopping(&self) -> bool {
        self.stop.load(Ordering::SeqCst)
    }

    fn record_disconnect(&self) {
        self.state().disconnects += 1;
        self.changed.notify_all();
    }
}

impl FakeServer {
    /// Binds 127.0.0.1 on a free port and starts accepting.
    pub fn start() -> FakeServer {
        let listener = TcpListener::bind("127.0.0.1:0").expect("fake server: cannot bind");
        let address = listener
            .local_addr()
            .expect("fake server: no local address");
        // Non-blocking accept lets the thread notice shutdown promptly.
        listener
            .set_nonblocking(true)
            .expect("fake server: cannot make the listener non-blocking");
        let shared = Arc::new(Shared {
            state: Mutex::new(State::default()),
            changed: Condvar::new(),
            stop: AtomicBool::new(false),
            next_connection: AtomicUsize::new(0),
        });
        let accept_shared = Arc::clone(&shared);
        let acceptor = thread::Builder::new()
            .name("fake-openai-accept".into())
            .spawn(move || accept_loop(listener, accept_shared))
            .expect("fake server: cannot spawn the accepting thread");
        FakeServer {
            address,
            shared,
            acceptor: Some(acceptor),
        }
    }

    /// `http://127.0.0.1:PORT/v1`, the base URL an OpenAI client expects.
    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.address)
    }

    /// The bound address.
    pub fn address(&self) -> SocketAddr {
        self.address
    }

    /// Queues a reply; replies are used in order, one per model request.
    pub fn push(&self, reply: Reply) {
        self.shared.state().replies.push_back(reply);
    }

    /// Serves `body` (JSON) at `GET /v1/models` from now on.
    pub fn serve_models(&self, body: serde_json::Value) {
        self.shared.state().model_list = Some(body.to_string());
    }

    /// Counts tokens at `POST /tokenize` as llama.cpp does, one per
    /// `bytes_per_token` bytes of the content, from now on.
    pub fn serve_tokenizer(&self, bytes_per_token: usize) {
        self.shared.state().bytes_per_token = Some(bytes_per_token.max(1));
    }

    /// The texts `POST /tokenize` was asked to count; they are not among
    /// [`FakeServer::requests`].
    pub fn tokenized(&self) -> Vec<String> {
        self.shared.state().tokenized.clone()
    }

    /// The model list requests (`GET …/models`) received so far; they are
    /// not among [`FakeServer::requests`].
    pub fn listings(&self) -> Vec<Recorded> {
        self.shared.state().listings.clone()
    }

    /// Replies queued but not used yet.
    pub fn pending_replies(&self) -> usize {
        self.shared.state().replies.len()
    }

    /// Every request received so far but model list requests, in order of
    /// arrival.
    pub fn requests(&self) -> Vec<Recorded> {
        self.shared.state().requests.clone()
    }

    /// Waits until at least `n` requests have arrived, then returns them
    /// all; panics with what did arrive if that takes longer than `timeout`.
    pub fn wait_requests(&self, n: usize, timeout: Duration) -> Vec<Recorded> {
        let deadline = Instant::now() + timeout;
        let mut state = self.shared.state();
        while state.requests.len() < n {
            let now = Instant::now();
            if now >= deadline {
                let paths: Vec<String> = state
                    .requests
                    .iter()
                    .map(|r| format!("{} {}", r.method, r.path))
                    .collect();
                panic!(
                    "fake server: expected {n} requests within {timeout:?}, got {}: {paths:?}",
                    state.requests.len()
                );
            }
            state = self
                .shared
                .changed
                .wait_timeout(state, deadline - now)
                .unwrap_or_else(|poisoned| poisoned.into_inner())
                .0;
        }
        state.requests.clone()
    }

    /// Waits until a client has closed its connection while a reply was
    /// still streaming or stalled; false if none did within `timeout`.
    pub fn wait_disconnect(&self, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        let mut state = self.shared.state();
        while state.disconnects == 0 {
            let now = Instant::now();
            if now >= deadline {
                return false;
            }
            state = self
                .shared
                .changed
                .wait_timeout(state, deadline - now)
                .unwrap_or_else(|poisoned| poisoned.into_inner())
                .0;
        }
        true
    }

    /// How many clients went away in the middle of a reply so far.
    pub fn disconnects(&self) -> usize {
        self.shared.state().disconnects
    }
}

impl Drop for FakeServer {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::SeqCst);
        if let Some(acceptor) = self.acceptor.take() {
            let _ = acceptor.join();
        }
    }
}

fn accept_loop(listener: TcpListener, shared: Arc<Shared>) {
    while !shared.stopping() {
        match listener.accept() {
            Ok((stream, _)) => {
                let number = shared.next_connection.fetch_add(1, Ordering::SeqCst);
                let connection_shared = Arc::clone(&shared);
                let spawned = thread::Builder::new()
                    .name(format!("fake-openai-conn-{number}"))
                    .spawn(move || connection::serve(stream, connection_shared));
                if let Err(err) = spawned {
                    eprintln!("fake server: cannot spawn a connection thread: {err}");
                }
            }
            Err(err) if err.kind() == io::ErrorKind::WouldBlock => thread::sleep(POLL / 10),
            Err(err) if err.kind() == io::ErrorKind::Interrupted => {}
            Err(err) => {
                eprintln!("fake server: accept failed: {err}");
                thread::sleep(POLL);
            }
        }
    }
}

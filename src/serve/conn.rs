//! One ACP connection of `serve`: a whole agent (`agent::serve`, exactly
//! as over stdio) on threads of its own, fed the client's messages through
//! a channel that reads as its stdin, its output routed line by line as
//! its stdout would be written. Routing follows the transport: over HTTP
//! a message goes to its session's SSE stream when it names a session the
//! connection has, else to the connection's stream; over a WebSocket
//! everything goes to the one socket. Each stream is a bounded outbox: a
//! client that stops reading slows only its own agent.

use super::owners::Owners;
use crossbeam_channel::{Receiver, Sender, TrySendError};
use serde_json::Value;
use std::collections::{HashMap, VecDeque};
use std::io::{self, Read, Write};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// Bytes an outbox may hold before the agent writing to it waits.
const OUTBOX_BYTES: usize = 8 << 20;
/// Client messages waiting for the agent to read them, at most.
const INPUT_QUEUE: usize = 256;
/// Streams opened for sessions not loaded yet, at most, per connection.
const WAITING_STREAMS: usize = 16;

/// What an outbox holds: a JSON-RPC line, or (WebSocket) a control frame.
#[derive(Debug)]
pub(crate) enum Item {
    Message(Vec<u8>),
    Frame(u8, Vec<u8>),
}

impl Item {
    fn len(&self) -> usize {
        match self {
            Item::Message(bytes) | Item::Frame(_, bytes) => bytes.len(),
        }
    }
}

#[derive(Default)]
struct Outbox {
    queue: VecDeque<Item>,
    bytes: usize,
    /// The reader attached now (a stream's number), 0 for none: a new
    /// GET for the same stream takes it over.
    reader: u64,
    /// A session's messages take its stream once the connection has it
    /// (made, or its load answered); while a load is under way they go on
    /// the connection's stream, where the client first learns of it.
    live: bool,
    /// Opened by a GET before the session's load was sent (the TypeScript
    /// SDK opens the stream first): the session is not the connection's
    /// yet, and the outbox goes when its reader leaves.
    waiting: bool,
}

struct Routes {
    connection: Outbox,
    sessions: HashMap<String, Outbox>,
    /// Open client requests naming a session: id → (session, method).
    pending: HashMap<String, (String, String)>,
    /// The `initialize` request whose answer the POST waits for, and it.
    waiting_init: Option<String>,
    init_answer: Option<Vec<u8>>,
    last_active: Instant,
    next_reader: u64,
    /// No more input: the agent was told to end.
    closed: bool,
    /// The agent ended: no more output.
    ended: bool,
}

/// Which stream a reader takes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Stream {
    Connection,
    Session(String),
}

/// What a reader got from [`Conn::next`].
pub(crate) enum Next {
    Item(Item),
    /// Nothing came within the wait: time for a keep-alive.
    Idle,
    /// The stream is over (the agent ended, or another reader took it).
    Over,
}

/// Why a client message was not passed on.
#[derive(Debug)]
pub(crate) enum Refusal {
    /// The connection no longer takes input.
    Closed,
    /// Too many messages at once.
    Busy,
}

pub(crate) struct Conn {
    pub(crate) id: String,
    /// A WebSocket: every message on the one connection stream.
    multiplex: bool,
    input: Mutex<Option<Sender<Vec<u8>>>>,
    routes: Mutex<Routes>,
    changed: Condvar,
    /// Requests allowed now (a token bucket) and when it was filled.
    bucket: Mutex<(f64, Instant)>,
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// A JSON-RPC id as a key: numbers and strings alike.
pub(crate) fn id_key(id: &Value) -> String {
    id.to_string()
}

/// The `sessionId` of a message's params or result.
pub(crate) fn session_of(message: &Value) -> Option<&str> {
    message
        .get("params")
        .and_then(|p| p.get("sessionId"))
        .or_else(|| message.get("result").and_then(|r| r.get("sessionId")))
        .and_then(Value::as_str)
}

impl Conn {
    pub(crate) fn new(multiplex: bool) -> (Arc<Conn>, Receiver<Vec<u8>>) {
        let (sender, receiver) = crossbeam_channel::bounded(INPUT_QUEUE);
        let conn = Conn {
            id: super::token::random_id(),
            multiplex,
            input: Mutex::new(Some(sender)),
            routes: Mutex::new(Routes {
                connection: Outbox::default(),
                sessions: HashMap::new(),
                pending: HashMap::new(),
                waiting_init: None,
                init_answer: None,
                last_active: Instant::now(),
                next_reader: 1,
                closed: false,
                ended: false,
            }),
            changed: Condvar::new(),
            bucket: Mutex::new((RATE_BURST, Instant::now())),
        };
        (Arc::new(conn), receiver)
    }

    /// Takes one request from the connection's allowance (a burst of
    /// [`RATE_BURST`], refilled at [`RATE_PER_SECOND`]); false: too many.
    pub(crate) fn allow(&self) -> bool {
        let mut bucket = lock(&self.bucket);
        let now = Instant::now();
        let refill = now.duration_since(bucket.1).as_secs_f64() * RATE_PER_SECOND;
        *bucket = ((bucket.0 + refill).min(RATE_BURST), now);
        if bucket.0 < 1.0 {
            return false;
        }
        bucket.0 -= 1.0;
        true
    }

    /// Passes a client message to the agent, one line; a request naming
    /// a session is remembered so that its answer takes that session's
    /// stream.
    pub(crate) fn deliver(&self, message: &Value) -> Result<(), Refusal> {
        let mut line = message.to_string().into_bytes();
        line.push(b'\n');
        {
            let mut routes = lock(&self.routes);
            routes.last_active = Instant::now();
            if let (Some(id), Some(method)) = (message.get("id"), message.get("method")) {
                if let Some(session) = session_of(message) {
                    let method = method.as_str().unwrap_or_default().to_string();
                    // A stream may be opened for a session being loaded
                    // (its replay names it) before the load is answered.
                    if method == "session/load" || method == "session/resume" {
                        routes
                            .sessions
                            .entry(session.to_string())
                            .or_default()
                            .waiting = false;
                    }
                    routes
                        .pending
                        .insert(id_key(id), (session.to_string(), method));
                }
            }
        }
        let input = lock(&self.input);
        let Some(sender) = input.as_ref() else {
            return Err(Refusal::Closed);
        };
        match sender.try_send(line) {
            Ok(()) => Ok(()),
            Err(TrySendError::Full(_)) => Err(Refusal::Busy),
            Err(TrySendError::Disconnected(_)) => Err(Refusal::Closed),
        }
    }

    /// Sends `initialize` and waits up to `limit` for its answer.
    pub(crate) fn initialize(&self, message: &Value, limit: Duration) -> Option<Vec<u8>> {
        let key = id_key(message.get("id")?);
        lock(&self.routes).waiting_init = Some(key);
        self.deliver(message).ok()?;
        let deadline = Instant::now() + limit;
        let mut routes = lock(&self.routes);
        loop {
            if let Some(answer) = routes.init_answer.take() {
                return Some(answer);
            }
            let left = deadline.checked_duration_since(Instant::now())?;
            if routes.ended {
                return None;
            }
            routes = self
                .changed
                .wait_timeout(routes, left)
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .0;
        }
    }

    /// Whether the connection has session `id` (it was made or loaded
    /// here).
    pub(crate) fn has_session(&self, id: &str) -> bool {
        lock(&self.routes)
            .sessions
            .get(id)
            .is_some_and(|outbox| !outbox.waiting)
    }

    /// Makes a stream for session `id`, which a load is about to open
    /// here; false when too many such streams wait already.
    pub(crate) fn expect_session(&self, id: &str) -> bool {
        let mut routes = lock(&self.routes);
        if routes.sessions.contains_key(id) {
            return true;
        }
        if routes.sessions.values().filter(|o| o.waiting).count() >= WAITING_STREAMS {
            return false;
        }
        let outbox = Outbox {
            waiting: true,
            ..Outbox::default()
        };
        routes.sessions.insert(id.to_string(), outbox);
        true
    }

    /// Routes one line the agent wrote; waits while the stream's outbox is
    /// full, unless the connection is closing.
    fn route(&self, hub: &Owners, line: Vec<u8>) {
        let message: Value = serde_json::from_slice(&line).unwrap_or(Value::Null);
        let mut routes = lock(&self.routes);
        let mut target = Stream::Connection;
        if message.get("id").is_some() && message.get("method").is_none() {
            let key = id_key(&message["id"]);
            if routes.waiting_init.as_deref() == Some(key.as_str()) {
                routes.waiting_init = None;
                routes.init_answer = Some(line);
                self.changed.notify_all();
                return;
            }
            let asked = routes.pending.remove(&key);
            let failed = message.get("error").is_some();
            let made = message
                .get("result")
                .and_then(|r| r.get("sessionId"))
                .and_then(Value::as_str)
                .map(str::to_string);
            let opened = asked
                .as_ref()
                .filter(|(_, m)| !failed && (m == "session/load" || m == "session/resume"))
                .map(|(session, _)| session.clone());
            if let Some(session) = made.or(opened) {
                // Its answer goes on the connection's stream: the client
                // opens the session's stream once it has seen it.
                routes.sessions.entry(session.clone()).or_default().live = true;
                hub.claim(&session, &self.id);
            } else if let Some((session, method)) = asked {
                let loading = method == "session/load" || method == "session/resume";
                if (method == "session/close" && !failed) || (loading && failed) {
                    hub.release(&session, &self.id);
                }
                if loading && failed && routes.sessions.get(&session).is_some_and(|o| !o.live) {
                    routes.sessions.remove(&session);
                }
                if routes.sessions.get(&session).is_some_and(|o| o.live) {
                    target = Stream::Session(session);
                }
            }
        } else if let Some(session) = session_of(&message) {
            if routes.sessions.get(session).is_some_and(|o| o.live) {
                target = Stream::Session(session.to_string());
            }
        }
        if self.multiplex {
            target = Stream::Connection;
        }
        loop {
            let closed = routes.closed;
            let outbox = match &target {
                Stream::Connection => &mut routes.connection,
                Stream::Session(id) => routes.sessions.entry(id.clone()).or_default(),
            };
            // Once the connection is closing, what nobody reads is
            // dropped; what a reader still takes waits for it.
            if closed && outbox.reader == 0 {
                return;
            }
            if outbox.bytes < OUTBOX_BYTES || closed {
                outbox.bytes += line.len();
                outbox.queue.push_back(Item::Message(line));
                self.changed.notify_all();
                return;
            }
            routes = self
                .changed
                .wait_timeout(routes, Duration::from_secs(1))
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .0;
        }
    }

    /// Queues a frame or message of the server's own (a WebSocket pong,
    /// close, or an error answer) on the connection stream.
    pub(crate) fn push(&self, item: Item) {
        let mut routes = lock(&self.routes);
        routes.connection.bytes += item.len();
        routes.connection.queue.push_back(item);
        self.changed.notify_all();
    }

    /// Attaches a reader to `stream`: its number, or `None` when the
    /// session is not this connection's.
    pub(crate) fn attach(&self, stream: &Stream) -> Option<u64> {
        let mut routes = lock(&self.routes);
        let number = routes.next_reader;
        routes.next_reader += 1;
        routes.last_active = Instant::now();
        let outbox = match stream {
            Stream::Connection => &mut routes.connection,
            Stream::Session(id) => routes.sessions.get_mut(id)?,
        };
        outbox.reader = number;
        self.changed.notify_all();
        Some(number)
    }

    /// The next item of `stream` for reader `number`, waiting up to
    /// `wait`.
    pub(crate) fn next(&self, stream: &Stream, number: u64, wait: Duration) -> Next {
        let deadline = Instant::now() + wait;
        let mut routes = lock(&self.routes);
        loop {
            let ended = routes.ended;
            let outbox = match stream {
                Stream::Connection => &mut routes.connection,
                Stream::Session(id) => match routes.sessions.get_mut(id) {
                    Some(outbox) => outbox,
                    None => return Next::Over,
                },
            };
            if outbox.reader != number {
                return Next::Over;
            }
            if let Some(item) = outbox.queue.pop_front() {
                outbox.bytes -= item.len();
                self.changed.notify_all();
                return Next::Item(item);
            }
            if ended {
                return Next::Over;
            }
            let Some(left) = deadline.checked_duration_since(Instant::now()) else {
                return Next::Idle;
            };
            routes = self
                .changed
                .wait_timeout(routes, left)
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .0;
        }
    }

    /// Puts back an item a reader could not deliver, first in line.
    pub(crate) fn unread(&self, stream: &Stream, item: Item) {
        let mut routes = lock(&self.routes);
        let outbox = match stream {
            Stream::Connection => &mut routes.connection,
            Stream::Session(id) => match routes.sessions.get_mut(id) {
                Some(outbox) => outbox,
                None => return,
            },
        };
        outbox.bytes += item.len();
        outbox.queue.push_front(item);
    }

    /// Detaches reader `number` from `stream`, if it is still the one.
    pub(crate) fn detach(&self, stream: &Stream, number: u64) {
        let mut routes = lock(&self.routes);
        routes.last_active = Instant::now();
        let outbox = match stream {
            Stream::Connection => Some(&mut routes.connection),
            Stream::Session(id) => routes.sessions.get_mut(id),
        };
        if let Some(outbox) = outbox.filter(|o| o.reader == number) {
            outbox.reader = 0;
            if outbox.waiting {
                if let Stream::Session(id) = stream {
                    routes.sessions.remove(id);
                }
            }
        }
    }

    /// Whether nobody has used the connection for `limit`: no stream
    /// attached, no message.
    pub(crate) fn idle_for(&self, limit: Duration) -> bool {
        let routes = lock(&self.routes);
        let attached =
            routes.connection.reader != 0 || routes.sessions.values().any(|o| o.reader != 0);
        !self.multiplex && !attached && routes.last_active.elapsed() > limit
    }

    /// Ends the agent's input: it ends as at the end of stdin (running
    /// turns cancelled and answered, sessions kept).
    pub(crate) fn close(&self) {
        lock(&self.input).take();
        lock(&self.routes).closed = true;
        self.changed.notify_all();
    }

    pub(crate) fn is_closed(&self) -> bool {
        lock(&self.routes).closed
    }

    fn ended(&self) {
        lock(&self.input).take();
        let mut routes = lock(&self.routes);
        routes.ended = true;
        routes.closed = true;
        self.changed.notify_all();
    }
}

/// Requests a connection may make in a burst, and per second after it.
const RATE_BURST: f64 = 200.0;
const RATE_PER_SECOND: f64 = 100.0;

/// The agent's stdin: the client's messages, then the end when the
/// connection closes.
struct Input {
    receiver: Receiver<Vec<u8>>,
    pending: Vec<u8>,
    at: usize,
}

impl Read for Input {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.at == self.pending.len() {
            match self.receiver.recv() {
                Ok(line) => {
                    self.pending = line;
                    self.at = 0;
                }
                Err(_) => return Ok(0),
            }
        }
        let n = buf.len().min(self.pending.len() - self.at);
        buf[..n].copy_from_slice(&self.pending[self.at..self.at + n]);
        self.at += n;
        Ok(n)
    }
}

/// The agent's stdout: lines routed as they are completed.
struct Output {
    conn: Arc<Conn>,
    hub: Arc<Owners>,
    partial: Vec<u8>,
}

impl Write for Output {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        for piece in buf.split_inclusive(|b| *b == b'\n') {
            self.partial.extend_from_slice(piece);
            if self.partial.ends_with(b"\n") {
                let mut line = std::mem::take(&mut self.partial);
                line.pop();
                self.conn.route(&self.hub, line);
            }
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// Starts the agent of `conn` on a thread of its own; `ended` runs when
/// it ends.
pub(crate) fn start(
    options: &crate::agent::Options,
    owners: &Arc<Owners>,
    conn: &Arc<Conn>,
    input: Receiver<Vec<u8>>,
    ended: Box<dyn FnOnce() + Send>,
) -> io::Result<std::thread::JoinHandle<()>> {
    let mut options = options.clone();
    options.signals = false;
    let (owners, conn) = (owners.clone(), conn.clone());
    std::thread::Builder::new()
        .name("spindle-connection".into())
        .spawn(move || {
            let output = Output {
                conn: conn.clone(),
                hub: owners,
                partial: Vec::new(),
            };
            let input = Input {
                receiver: input,
                pending: Vec::new(),
                at: 0,
            };
            if let Err(error) = crate::agent::serve(options, input, output) {
                log::error!("connection {}: {error}", conn.id);
            }
            conn.ended();
            ended();
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_burst_is_allowed_then_requests_are_refused_until_refilled() {
        let (conn, _input) = Conn::new(false);
        let allowed = (0..1000).take_while(|_| conn.allow()).count();
        assert_eq!(allowed, RATE_BURST as usize);
        assert!(!conn.allow());
        std::thread::sleep(Duration::from_millis(50));
        assert!(conn.allow(), "refilled at {RATE_PER_SECOND} a second");
    }

    #[test]
    fn a_full_input_queue_is_busy_and_a_closed_one_is_closed() {
        let (conn, input) = Conn::new(false);
        let message = json!({"jsonrpc": "2.0", "method": "x"});
        for _ in 0..INPUT_QUEUE {
            conn.deliver(&message).unwrap();
        }
        assert!(matches!(conn.deliver(&message), Err(Refusal::Busy)));
        drop(input);
        conn.close();
        assert!(matches!(conn.deliver(&message), Err(Refusal::Closed)));
    }

    #[test]
    fn a_session_stream_takes_only_its_sessions_messages() {
        let (conn, _input) = Conn::new(false);
        let owners = Owners::default();
        let made = br#"{"jsonrpc":"2.0","id":1,"result":{"sessionId":"s1"}}"#.to_vec();
        conn.route(&owners, made);
        assert!(conn.has_session("s1") && !conn.has_session("s2"));
        let update = br#"{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1"}}"#;
        conn.route(&owners, update.to_vec());
        let other = br#"{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s2"}}"#;
        conn.route(&owners, other.to_vec());
        let session = Stream::Session("s1".into());
        let reader = conn.attach(&session).unwrap();
        let Next::Item(Item::Message(line)) = conn.next(&session, reader, Duration::ZERO) else {
            panic!("the session's update is on its stream");
        };
        assert_eq!(line, update.to_vec());
        assert!(matches!(
            conn.next(&session, reader, Duration::ZERO),
            Next::Idle
        ));
        // The answer that made it, and the other session's update, are the
        // connection's.
        let main = conn.attach(&Stream::Connection).unwrap();
        let mut seen = 0;
        while let Next::Item(_) = conn.next(&Stream::Connection, main, Duration::ZERO) {
            seen += 1;
        }
        assert_eq!(seen, 2);
        // A second reader takes the stream over; the first one is over.
        let second = conn.attach(&session).unwrap();
        assert!(matches!(
            conn.next(&session, reader, Duration::ZERO),
            Next::Over
        ));
        assert!(matches!(
            conn.next(&session, second, Duration::ZERO),
            Next::Idle
        ));
    }
}

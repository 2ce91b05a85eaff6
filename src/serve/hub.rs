//! What every socket thread of `serve` shares: the agent's options, the
//! token, the caps, the open connections and which holds which session.

use super::conn::{self, Conn};
use super::http;
use super::owners::Owners;
use crate::agent::Options;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

/// What every socket thread shares: the agent's options, the token, the
/// connections and which of them holds which session.
pub(crate) struct Hub {
    pub(crate) options: Options,
    pub(crate) token: String,
    pub(crate) caps: Caps,
    pub(crate) origins: Vec<String>,
    pub(crate) conns: Mutex<HashMap<String, Arc<Conn>>>,
    /// Session id → the connection that has it open.
    pub(crate) owners: Arc<Owners>,
    pub(crate) threads: Mutex<Vec<JoinHandle<()>>>,
    pub(crate) draining: AtomicBool,
    pub(crate) sockets: AtomicUsize,
}

pub(crate) fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl Hub {
    pub(crate) fn conn(&self, id: &str) -> Option<Arc<Conn>> {
        lock(&self.conns).get(id).cloned()
    }

    /// A new connection with its agent started; `None` when there are
    /// too many already, or the agent cannot start.
    pub(crate) fn open(self: &Arc<Self>, multiplex: bool) -> Option<Arc<Conn>> {
        let (conn, input) = Conn::new(multiplex);
        {
            let mut conns = lock(&self.conns);
            if conns.len() >= self.caps.connections {
                return None;
            }
            conns.insert(conn.id.clone(), conn.clone());
        }
        let hub = self.clone();
        let id = conn.id.clone();
        let ended = Box::new(move || hub.remove(&id));
        match conn::start(&self.options, &self.owners, &conn, input, ended) {
            Ok(thread) => self.track(thread),
            Err(error) => {
                log::error!("cannot start a connection's agent: {error}");
                self.remove(&conn.id);
                return None;
            }
        }
        Some(conn)
    }

    pub(crate) fn remove(&self, id: &str) {
        lock(&self.conns).remove(id);
        self.owners.forget(id);
    }

    pub(crate) fn track(&self, thread: JoinHandle<()>) {
        let mut threads = lock(&self.threads);
        threads.retain(|t| !t.is_finished());
        threads.push(thread);
    }

    /// Takes session `session` for connection `conn`, unless another live
    /// connection has it: then that one's id.
    pub(crate) fn reserve(&self, session: &str, conn: &str) -> Result<(), ()> {
        self.owners.reserve(session, conn, |owner| {
            self.conn(owner).is_some_and(|c| !c.is_closed())
        })
    }

    /// Whether another live connection than `conn` has `session` open.
    pub(crate) fn held_elsewhere(&self, session: &str, conn: &str) -> bool {
        self.owners.held_elsewhere(session, conn, |owner| {
            self.conn(owner).is_some_and(|c| !c.is_closed())
        })
    }

    pub(crate) fn draining(&self) -> bool {
        self.draining.load(Ordering::SeqCst)
    }
}

/// The caps and clocks of the door.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Caps {
    pub(crate) http: http::Limits,
    /// ACP connections at once.
    pub(crate) connections: usize,
    /// Sockets at once (streams and requests included).
    pub(crate) sockets: usize,
    /// An HTTP connection with no stream and no message for this long is
    /// closed.
    pub(crate) idle: Duration,
    /// How long `initialize` may take.
    pub(crate) initialize: Duration,
    /// Between keep-alive comments (SSE) or pings (WebSocket).
    pub(crate) keepalive: Duration,
    /// A write that takes longer drops the stream.
    pub(crate) write: Duration,
}

impl Default for Caps {
    fn default() -> Self {
        Caps {
            http: http::Limits {
                head_bytes: 16 * 1024,
                headers: 64,
                body_bytes: 16 << 20,
                head_time: Duration::from_secs(10),
                body_time: Duration::from_secs(60),
            },
            connections: 256,
            sockets: 1024,
            idle: Duration::from_secs(600),
            initialize: Duration::from_secs(30),
            keepalive: Duration::from_secs(15),
            write: Duration::from_secs(30),
        }
    }
}

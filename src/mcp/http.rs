//! The Streamable HTTP transport (revision 2025-03-26 and later), and the
//! HTTP helpers it shares with the legacy SSE transport.
//!
//! Every message is its own POST to the server's one URL. A request's
//! answer comes back either as a JSON body or as an SSE stream that may
//! carry the server's notifications and requests before the response; a
//! helper thread (`spindle-mcp-http`) reads it, so the caller can wait on
//! the answer, its cancel signal and its timeout at once. Each request gets
//! its own `ureq::Agent`: abandoning a request shuts that agent down, which
//! closes the socket under the helper thread's blocked read.
//!
//! Header values are secrets (bearer tokens): they are sent, never logged
//! (ureq's own logging redacts them too). The optional GET stream for
//! unsolicited server messages is not opened; `list_changed` is still seen
//! when a server sends it inside a POST's stream.

use super::rpc::{id_of_response, Router, Transport};
use super::{McpError, McpErrorKind};
use crate::cancel::lock;
use crate::provider::sse::{Line, SseEvent, SseParser};
use serde_json::Value;
use std::collections::HashMap;
use std::io::{BufReader, Read};
use std::ops::ControlFlow;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

/// Longest wait for a TCP (and TLS) connection.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// Longest time for a POST that carries no request (a notification or a
/// reply), whose answer is a bare 202.
pub(crate) const SHORT_TIMEOUT: Duration = Duration::from_secs(10);
/// Longest time for the closing DELETE.
const DELETE_TIMEOUT: Duration = Duration::from_secs(2);
/// The largest JSON body accepted as an answer.
const BODY_LIMIT: u64 = 64 * 1024 * 1024;
/// The largest error body read for a message.
const ERROR_BODY_LIMIT: u64 = 4 * 1024;

/// Builds an agent for requests to `url` (the server's URL, which decides
/// the proxy) that reports HTTP errors as responses, trusting what
/// `trust` (the config's) adds. `timeout` bounds the whole exchange;
/// `None` leaves a streamed answer unbounded (the caller's own timeout
/// applies instead).
pub(crate) fn agent(
    url: &str,
    trust: &crate::net::Trust,
    timeout: Option<Duration>,
) -> ureq::Agent {
    let config = crate::net::agent_config(url, trust)
        .http_status_as_error(false)
        .timeout_connect(Some(CONNECT_TIMEOUT))
        .timeout_global(timeout)
        .build();
    crate::net::agent(url, config)
}

/// Headers Spindle sets itself; configured ones with these names are left
/// out so that a request never carries two of them.
pub(crate) fn is_reserved_header(name: &str) -> bool {
    [
        "content-type",
        "accept",
        "mcp-session-id",
        "mcp-protocol-version",
    ]
    .iter()
    .any(|reserved| name.eq_ignore_ascii_case(reserved))
}

/// Agents of requests in flight, so that an abandoned one can be cut off.
#[derive(Default)]
pub(crate) struct Inflight {
    agents: Mutex<HashMap<u64, ureq::Agent>>,
}

impl Inflight {
    pub(crate) fn add(&self, id: u64, agent: ureq::Agent) {
        lock(&self.agents).insert(id, agent);
    }

    pub(crate) fn remove(&self, id: u64) {
        lock(&self.agents).remove(&id);
    }

    pub(crate) fn abort(&self, id: u64) {
        if let Some(agent) = lock(&self.agents).remove(&id) {
            agent.shutdown();
        }
    }

    pub(crate) fn abort_all(&self) {
        let agents: Vec<ureq::Agent> = lock(&self.agents).drain().map(|(_, a)| a).collect();
        for agent in agents {
            agent.shutdown();
        }
    }
}

/// The error for a non-2xx answer, with the start of the body.
pub(crate) fn status_error(server: &str, status: u16, body: ureq::Body) -> McpError {
    let mut bytes = Vec::new();
    let _ = body
        .into_reader()
        .take(ERROR_BODY_LIMIT)
        .read_to_end(&mut bytes);
    let text = String::from_utf8_lossy(&bytes);
    let text: String = text.trim().chars().take(300).collect();
    let mut message = format!("MCP server `{server}` answered HTTP {status}");
    if status == 401 {
        message.push_str(&format!(
            " (it wants authorization: `spindle mcp login {server}` signs in)"
        ));
    }
    if !text.is_empty() {
        message.push_str(&format!(": {text}"));
    }
    McpError::http(status, message)
}

/// The error for a request to `url` that never got an answer (naming the
/// proxy when the proxy is what failed).
pub(crate) fn connect_error(server: &str, url: &str, err: &ureq::Error) -> McpError {
    match crate::net::proxy::failure(url, err) {
        Some(failure) => McpError::new(format!("cannot reach MCP server `{server}`: {failure}")),
        None => McpError::new(format!("cannot reach MCP server `{server}`: {err}")),
    }
}

/// Reads an SSE body and hands each event to `on_event` until it breaks or
/// the body ends. Returns true when `on_event` broke off.
pub(crate) fn read_sse(
    reader: impl Read,
    cap: usize,
    mut on_event: impl FnMut(SseEvent) -> ControlFlow<()>,
) -> std::io::Result<bool> {
    let mut reader = BufReader::with_capacity(64 * 1024, reader);
    let mut parser = SseParser::new();
    let mut line = Vec::with_capacity(1024);
    loop {
        match super::stdio::read_capped_line(&mut reader, &mut line, cap)? {
            None => return Ok(false),
            // An endless line: the stream cannot be trusted any further.
            Some(true) => {
                return Err(std::io::Error::other(format!(
                    "an SSE line over {cap} bytes"
                )))
            }
            Some(false) => {}
        }
        if line.last() == Some(&b'\n') {
            line.pop();
        }
        if line.last() == Some(&b'\r') {
            line.pop();
        }
        // A lone CR inside an LF-terminated line also ends a line.
        for piece in line.split(|&b| b == b'\r') {
            if let Line::Event(event) = parser.line(piece) {
                if on_event(event).is_break() {
                    return Ok(true);
                }
            }
        }
    }
}

/// Parses the data of one event; empty data (resumption priming) and
/// non-JSON data give `None`.
pub(crate) fn event_message(server: &str, event: &SseEvent) -> Option<Value> {
    let data = event.data.trim();
    if data.is_empty() {
        return None;
    }
    match serde_json::from_str(data) {
        Ok(value) => Some(value),
        Err(_) => {
            log::debug!("MCP server `{server}` sent an event that is not JSON (skipped)");
            None
        }
    }
}

/// Whether `value` (a message or a batch) holds the response to `id`.
pub(crate) fn answers(value: &Value, id: u64) -> bool {
    match value {
        Value::Array(items) => items.iter().any(|item| id_of_response(item) == Some(id)),
        message => id_of_response(message) == Some(id),
    }
}

/// A Streamable HTTP connection.
pub(crate) struct HttpTransport {
    inner: Arc<Inner>,
}

struct Inner {
    name: String,
    url: String,
    headers: Vec<(String, String)>,
    router: Arc<Router>,
    session: Mutex<Option<String>>,
    version: Mutex<Option<String>>,
    inflight: Inflight,
    closed: AtomicBool,
    /// The server forgot our session (404): the connection is dead.
    expired: AtomicBool,
    /// The sign-in tokens, when Spindle keeps some for this server.
    auth: Option<Arc<super::oauth::Auth>>,
    /// What its HTTPS connections trust (the config's).
    trust: crate::net::Trust,
}

impl HttpTransport {
    pub(crate) fn new(
        name: &str,
        url: &str,
        headers: &[(String, String)],
        router: Arc<Router>,
        auth: Option<Arc<super::oauth::Auth>>,
        trust: &crate::net::Trust,
    ) -> HttpTransport {
        HttpTransport {
            inner: Arc::new(Inner {
                name: name.to_string(),
                url: url.to_string(),
                headers: headers.to_vec(),
                router,
                session: Mutex::new(None),
                version: Mutex::new(None),
                inflight: Inflight::default(),
                closed: AtomicBool::new(false),
                expired: AtomicBool::new(false),
                auth,
                trust: trust.clone(),
            }),
        }
    }
}

impl Transport for HttpTransport {
    fn send(&self, message: &Value, request_id: Option<u64>) -> Result<(), McpError> {
        let inner = &self.inner;
        if inner.closed.load(Ordering::SeqCst) {
            return Err(McpError::of(
                McpErrorKind::Closed,
                format!("the connection to MCP server `{}` is closed", inner.name),
            ));
        }
        let body = message.to_string();
        let Some(id) = request_id else {
            return inner.post_plain(body);
        };
        let agent = agent(&inner.url, &inner.trust, None);
        inner.inflight.add(id, agent.clone());
        let worker = inner.clone();
        // Detached: the waiter gets the answer or the error on its own
        // channel, racing cancel; a cancel or close aborts the exchange
        // through its in-flight entry.
        let spawned = thread::Builder::new()
            .name("spindle-mcp-http".into())
            .spawn(move || {
                let outcome = worker.exchange(&agent, body, id);
                worker.inflight.remove(id);
                // After a successful exchange the waiter has its answer and
                // this does nothing.
                let error = outcome.err().unwrap_or_else(|| {
                    McpError::new(format!(
                        "MCP server `{}` ended its answer without a response",
                        worker.name
                    ))
                });
                worker.router.fail(id, error);
            });
        spawned.map(drop).map_err(|err| {
            inner.inflight.remove(id);
            McpError::new(format!("cannot start an HTTP request: {err}"))
        })
    }

    fn abandon(&self, id: u64) {
        self.inner.inflight.abort(id);
    }

    fn initialized(&self, version: &str) {
        *lock(&self.inner.version) = Some(version.to_string());
    }

    fn is_alive(&self) -> bool {
        !self.inner.closed.load(Ordering::SeqCst) && !self.inner.expired.load(Ordering::SeqCst)
    }

    fn close(&self) {
        let inner = &self.inner;
        if inner.closed.swap(true, Ordering::SeqCst) {
            return;
        }
        inner
            .router
            .close(&format!("MCP server `{}` was shut down", inner.name));
        inner.inflight.abort_all();
        let session = lock(&inner.session).clone();
        if let (Some(session), false) = (session, inner.expired.load(Ordering::SeqCst)) {
            // Ending the session is a courtesy: a 405 (not allowed) or a
            // failure changes nothing for us.
            let mut request = agent(&inner.url, &inner.trust, Some(DELETE_TIMEOUT))
                .delete(&inner.url)
                .header("Mcp-Session-Id", &session);
            for (name, value) in inner.extra_headers() {
                request = request.header(name, value);
            }
            if let Some(token) = inner.auth.as_ref().and_then(|auth| auth.current()) {
                request = request.header("Authorization", format!("Bearer {token}"));
            }
            if let Err(err) = request.call() {
                log::debug!("ending the session of MCP server `{}`: {err}", inner.name);
            }
        }
    }
}

impl Drop for HttpTransport {
    fn drop(&mut self) {
        self.close();
    }
}

impl Inner {
    /// The configured headers plus the negotiated protocol version.
    fn extra_headers(&self) -> Vec<(String, String)> {
        let mut headers: Vec<(String, String)> = self
            .headers
            .iter()
            .filter(|(name, _)| !is_reserved_header(name))
            .cloned()
            .collect();
        if let Some(version) = lock(&self.version).clone() {
            headers.push(("MCP-Protocol-Version".into(), version));
        }
        headers
    }

    /// POSTs one message; the session id, if any, goes with it, and the
    /// access token when signed in. A 401 to a token is answered once,
    /// after a refresh; a 401 that stays means sign-in is needed.
    fn post(
        &self,
        agent: &ureq::Agent,
        body: String,
    ) -> Result<(ureq::http::Response<ureq::Body>, bool), McpError> {
        let bearer = self.auth.as_ref().and_then(|auth| auth.bearer());
        let (response, resumed) = self.post_once(agent, body.clone(), bearer.as_deref())?;
        if response.status().as_u16() != 401 {
            return Ok((response, resumed));
        }
        let Some(auth) = &self.auth else {
            return Ok((response, resumed));
        };
        if auth.refused(bearer.as_deref()) {
            let again = auth.bearer();
            let (response, resumed) = self.post_once(agent, body, again.as_deref())?;
            if response.status().as_u16() != 401 {
                return Ok((response, resumed));
            }
        }
        Err(McpError::sign_in(&self.name))
    }

    fn post_once(
        &self,
        agent: &ureq::Agent,
        body: String,
        bearer: Option<&str>,
    ) -> Result<(ureq::http::Response<ureq::Body>, bool), McpError> {
        let mut request = agent
            .post(&self.url)
            .header("Content-Type", "application/json")
            .header("Accept", "application/json, text/event-stream");
        let session = lock(&self.session).clone();
        if let Some(session) = &session {
            request = request.header("Mcp-Session-Id", session);
        }
        for (name, value) in self.extra_headers() {
            request = request.header(name, value);
        }
        if let Some(token) = bearer {
            request = request.header("Authorization", format!("Bearer {token}"));
        }
        let response = request
            .send(body)
            .map_err(|err| connect_error(&self.name, &self.url, &err))?;
        if session.is_none() {
            let issued = response
                .headers()
                .get("mcp-session-id")
                .and_then(|value| value.to_str().ok());
            if let Some(issued) = issued {
                *lock(&self.session) = Some(issued.to_string());
            }
        }
        let status = response.status().as_u16();
        if status == 404 && session.is_some() {
            self.expired.store(true, Ordering::SeqCst);
            self.router.close(&format!(
                "MCP server `{}` ended the session (HTTP 404)",
                self.name
            ));
        }
        Ok((response, session.is_some()))
    }

    /// POSTs a notification or a reply and expects 2xx.
    fn post_plain(&self, body: String) -> Result<(), McpError> {
        let (response, _) = self.post(&agent(&self.url, &self.trust, Some(SHORT_TIMEOUT)), body)?;
        let status = response.status().as_u16();
        if (200..300).contains(&status) {
            Ok(())
        } else {
            Err(status_error(&self.name, status, response.into_body()))
        }
    }

    /// POSTs request `id` and hands whatever comes back to the router,
    /// until the response to `id` has arrived.
    fn exchange(&self, agent: &ureq::Agent, body: String, id: u64) -> Result<(), McpError> {
        let (response, _) = self.post(agent, body)?;
        let status = response.status().as_u16();
        if !(200..300).contains(&status) {
            return Err(status_error(&self.name, status, response.into_body()));
        }
        let content_type = response
            .headers()
            .get("content-type")
            .and_then(|value| value.to_str().ok())
            .unwrap_or("")
            .to_ascii_lowercase();
        let body = response.into_body().into_reader();
        if content_type.starts_with("text/event-stream") {
            let answered = read_sse(body, self.router.message_cap(), |event| {
                let Some(value) = event_message(&self.name, &event) else {
                    return ControlFlow::Continue(());
                };
                let ours = answers(&value, id);
                self.deliver(value);
                if ours {
                    ControlFlow::Break(())
                } else {
                    ControlFlow::Continue(())
                }
            });
            return match answered {
                Ok(true) => Ok(()),
                Ok(false) => Err(McpError::new(format!(
                    "MCP server `{}` ended its event stream without answering",
                    self.name
                ))),
                Err(err) => Err(McpError::new(format!(
                    "the event stream of MCP server `{}` broke: {err}",
                    self.name
                ))),
            };
        }
        if status == 202 {
            return Err(McpError::new(format!(
                "MCP server `{}` accepted the request without answering it",
                self.name
            )));
        }
        let mut bytes = Vec::new();
        body.take(BODY_LIMIT)
            .read_to_end(&mut bytes)
            .map_err(|err| {
                McpError::new(format!(
                    "reading the answer of MCP server `{}` failed: {err}",
                    self.name
                ))
            })?;
        let value: Value = serde_json::from_slice(&bytes).map_err(|_| {
            McpError::new(format!(
                "MCP server `{}` answered with something that is not JSON ({content_type})",
                self.name
            ))
        })?;
        self.deliver(value);
        Ok(())
    }

    /// Routes a message and POSTs the replies to the server's requests.
    fn deliver(&self, value: Value) {
        for reply in self.router.handle(value) {
            if let Err(err) = self.post_plain(reply.to_string()) {
                log::debug!("answering MCP server `{}` failed: {err}", self.name);
            }
        }
    }
}

//! The legacy HTTP+SSE transport of revision 2024-11-05.
//!
//! The client GETs the server's SSE URL and keeps that stream open for the
//! whole session on a reader thread (`spindle-mcp-sse`). The first event,
//! `endpoint`, names the URL (usually relative, with a session query) that
//! every client message is POSTed to; the server acknowledges each POST with
//! 202 and sends responses, its own requests and notifications as `message`
//! events on the stream. An endpoint on another origin is refused, so a
//! server cannot send Spindle's headers elsewhere.

use super::http::{
    agent, connect_error, event_message, is_reserved_header, read_sse, status_error, Inflight,
    SHORT_TIMEOUT,
};
use super::rpc::{wait_any, Router, Transport, Waited};
use super::{McpError, McpErrorKind};
use crate::cancel::CancelToken;
use crossbeam_channel::{bounded, Sender};
use serde_json::Value;
use std::ops::ControlFlow;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::thread;
use std::time::Duration;

/// A legacy HTTP+SSE connection.
pub(crate) struct SseTransport {
    inner: Arc<Inner>,
}

struct Inner {
    name: String,
    url: String,
    headers: Vec<(String, String)>,
    router: Arc<Router>,
    /// The agent of the GET stream; shutting it down ends the stream.
    stream_agent: ureq::Agent,
    /// Where messages are POSTed, once the `endpoint` event arrived.
    endpoint: OnceLock<String>,
    stream_open: AtomicBool,
    inflight: Inflight,
    closed: AtomicBool,
    /// What its HTTPS connections trust (the config's).
    trust: crate::net::Trust,
}

impl SseTransport {
    /// Opens the GET stream and waits (at most `timeout`, or until one of
    /// `cancels` fires) for the `endpoint` event.
    pub(crate) fn connect(
        name: &str,
        url: &str,
        headers: &[(String, String)],
        router: Arc<Router>,
        timeout: Duration,
        cancels: &[&CancelToken],
        trust: &crate::net::Trust,
    ) -> Result<SseTransport, McpError> {
        let transport = SseTransport {
            inner: Arc::new(Inner {
                name: name.to_string(),
                url: url.to_string(),
                headers: headers
                    .iter()
                    .filter(|(name, _)| !is_reserved_header(name))
                    .cloned()
                    .collect(),
                router,
                stream_agent: agent(url, trust, None),
                endpoint: OnceLock::new(),
                stream_open: AtomicBool::new(true),
                inflight: Inflight::default(),
                closed: AtomicBool::new(false),
                trust: trust.clone(),
            }),
        };
        let (ready_sender, ready) = bounded::<Result<(), McpError>>(1);
        let reader = transport.inner.clone();
        // Detached: it reads the event stream until it closes, which
        // dropping the transport makes sure of.
        thread::Builder::new()
            .name("spindle-mcp-sse".into())
            .spawn(move || {
                let mut ready = Some(ready_sender);
                let reason = reader.read_stream(&mut ready);
                reader.stream_open.store(false, Ordering::SeqCst);
                if let Some(ready) = ready.take() {
                    let _ = ready.send(Err(reason.clone()));
                }
                reader.router.close(&reason.message);
            })
            .map_err(|err| McpError::new(format!("cannot start a thread: {err}")))?;

        // Dropping `transport` on any error below closes the stream.
        match wait_any(&ready, cancels, timeout) {
            Waited::Got(Ok(Ok(()))) => Ok(transport),
            Waited::Got(Ok(Err(err))) => Err(err),
            // No questions are taken here (`wait_any`), so `Asked` cannot
            // come; it would mean the same as the stream ending.
            Waited::Got(Err(_)) | Waited::Asked(_) => Err(McpError::new(format!(
                "the event stream of MCP server `{name}` ended"
            ))),
            Waited::Cancelled => Err(McpError::of(
                McpErrorKind::Cancelled,
                format!("connecting to MCP server `{name}` was cancelled"),
            )),
            Waited::TimedOut => Err(McpError::of(
                McpErrorKind::TimedOut,
                format!(
                    "MCP server `{name}` sent no endpoint within {} s",
                    timeout.as_secs_f64()
                ),
            )),
        }
    }
}

impl Transport for SseTransport {
    fn send(&self, message: &Value, request_id: Option<u64>) -> Result<(), McpError> {
        let inner = &self.inner;
        if inner.closed.load(Ordering::SeqCst) || !inner.stream_open.load(Ordering::SeqCst) {
            return Err(McpError::of(
                McpErrorKind::Closed,
                format!("the connection to MCP server `{}` is closed", inner.name),
            ));
        }
        let body = message.to_string();
        let Some(id) = request_id else {
            return inner.post(&agent(&inner.url, &inner.trust, Some(SHORT_TIMEOUT)), body);
        };
        // Requests are POSTed on a helper thread, so that a slow
        // acknowledgement cannot hold up a cancel.
        let agent = agent(&inner.url, &inner.trust, Some(SHORT_TIMEOUT));
        inner.inflight.add(id, agent.clone());
        let worker = inner.clone();
        let spawned = thread::Builder::new()
            .name("spindle-mcp-post".into())
            .spawn(move || {
                let outcome = worker.post(&agent, body);
                worker.inflight.remove(id);
                if let Err(err) = outcome {
                    worker.router.fail(id, err);
                }
            });
        spawned.map(drop).map_err(|err| {
            inner.inflight.remove(id);
            McpError::new(format!("cannot start an HTTP request: {err}"))
        })
    }

    fn abandon(&self, id: u64) {
        self.inner.inflight.abort(id);
    }

    fn is_alive(&self) -> bool {
        !self.inner.closed.load(Ordering::SeqCst) && self.inner.stream_open.load(Ordering::SeqCst)
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
        inner.stream_agent.clone().shutdown();
    }
}

impl Drop for SseTransport {
    fn drop(&mut self) {
        self.close();
    }
}

impl Inner {
    /// POSTs one message to the endpoint and expects 2xx.
    fn post(&self, agent: &ureq::Agent, body: String) -> Result<(), McpError> {
        let endpoint = self
            .endpoint
            .get()
            .ok_or_else(|| McpError::new(format!("MCP server `{}` gave no endpoint", self.name)))?;
        let mut request = agent
            .post(endpoint)
            .header("Content-Type", "application/json");
        for (name, value) in &self.headers {
            request = request.header(name, value);
        }
        let response = request
            .send(body)
            .map_err(|err| connect_error(&self.name, endpoint, &err))?;
        let status = response.status().as_u16();
        if (200..300).contains(&status) {
            Ok(())
        } else {
            Err(status_error(&self.name, status, response.into_body()))
        }
    }

    /// The reader thread's work: reads the GET stream until it ends and
    /// returns why it ended. `ready` gets the outcome of waiting for the
    /// endpoint.
    fn read_stream(self: &Arc<Self>, ready: &mut Option<Sender<Result<(), McpError>>>) -> McpError {
        let mut request = self
            .stream_agent
            .get(&self.url)
            .header("Accept", "text/event-stream");
        for (name, value) in &self.headers {
            request = request.header(name, value);
        }
        let response = match request.call() {
            Ok(response) => response,
            Err(err) => return connect_error(&self.name, &self.url, &err),
        };
        let status = response.status().as_u16();
        if !(200..300).contains(&status) {
            return status_error(&self.name, status, response.into_body());
        }
        let content_type = response
            .headers()
            .get("content-type")
            .and_then(|value| value.to_str().ok())
            .unwrap_or("")
            .to_ascii_lowercase();
        if !content_type.starts_with("text/event-stream") {
            return McpError::new(format!(
                "MCP server `{}` did not answer with an event stream",
                self.name
            ));
        }
        let reader = response.into_body().into_reader();
        let mut failure = None;
        let outcome = read_sse(reader, self.router.message_cap(), |event| {
            match event.event.as_deref() {
                Some("endpoint") => {
                    if self.endpoint.get().is_some() {
                        return ControlFlow::Continue(());
                    }
                    match resolve_endpoint(&self.url, event.data.trim()) {
                        Ok(endpoint) => {
                            let _ = self.endpoint.set(endpoint);
                            if let Some(ready) = ready.take() {
                                let _ = ready.send(Ok(()));
                            }
                        }
                        Err(reason) => {
                            failure = Some(McpError::new(format!(
                                "MCP server `{}` sent an unusable endpoint: {reason}",
                                self.name
                            )));
                            return ControlFlow::Break(());
                        }
                    }
                }
                None | Some("message") => {
                    if let Some(value) = event_message(&self.name, &event) {
                        self.deliver(value);
                    }
                }
                Some(_) => {}
            }
            ControlFlow::Continue(())
        });
        if let Some(failure) = failure {
            return failure;
        }
        match outcome {
            Err(err) if !self.closed.load(Ordering::SeqCst) => McpError::new(format!(
                "the event stream of MCP server `{}` broke: {err}",
                self.name
            )),
            _ => McpError::new(format!(
                "the event stream of MCP server `{}` ended",
                self.name
            )),
        }
    }

    /// Routes a message; replies to the server's requests are POSTed on a
    /// helper thread so the stream keeps being read meanwhile.
    fn deliver(self: &Arc<Self>, value: Value) {
        let replies = self.router.handle(value);
        if replies.is_empty() {
            return;
        }
        let inner = self.clone();
        // Detached: the reply's POST is bounded by SHORT_TIMEOUT and
        // nothing waits for it.
        let spawned = thread::Builder::new()
            .name("spindle-mcp-post".into())
            .spawn(move || {
                for reply in replies {
                    if let Err(err) = inner.post(
                        &agent(&inner.url, &inner.trust, Some(SHORT_TIMEOUT)),
                        reply.to_string(),
                    ) {
                        log::debug!("answering MCP server `{}` failed: {err}", inner.name);
                    }
                }
            });
        if let Err(err) = spawned {
            log::debug!("cannot answer MCP server `{}`: {err}", self.name);
        }
    }
}

/// Resolves the `endpoint` event's URI against the SSE URL and refuses one
/// on another origin.
fn resolve_endpoint(base: &str, reference: &str) -> Result<String, String> {
    let resolved =
        resolve_url(base, reference).ok_or_else(|| format!("cannot resolve `{reference}`"))?;
    if origin(&resolved) != origin(base) {
        return Err(format!("`{resolved}` is on another origin"));
    }
    Ok(resolved)
}

/// Resolves a URI reference against an absolute http(s) URL: absolute,
/// scheme-relative (`//host/p`), absolute-path (`/p?q`), query-only (`?q`)
/// and relative-path (`p?q`) references. Dot segments are kept as they are.
pub(crate) fn resolve_url(base: &str, reference: &str) -> Option<String> {
    let lower = reference.to_ascii_lowercase();
    if lower.starts_with("http://") || lower.starts_with("https://") {
        return Some(reference.to_string());
    }
    let (scheme, rest) = base.split_once("://")?;
    let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let origin = format!("{scheme}://{}", &rest[..authority_end]);
    if let Some(network) = reference.strip_prefix("//") {
        return Some(format!("{scheme}://{network}"));
    }
    if reference.starts_with('/') {
        return Some(format!("{origin}{reference}"));
    }
    let path = rest[authority_end..]
        .split(['?', '#'])
        .next()
        .filter(|path| !path.is_empty())
        .unwrap_or("/");
    if reference.starts_with('?') || reference.is_empty() {
        return Some(format!("{origin}{path}{reference}"));
    }
    let directory = &path[..=path.rfind('/').unwrap_or(0)];
    Some(format!("{origin}{directory}{reference}"))
}

/// The scheme and authority of a URL, lower-cased, with the default port
/// made explicit.
fn origin(url: &str) -> Option<String> {
    let (scheme, rest) = url.split_once("://")?;
    let scheme = scheme.to_ascii_lowercase();
    let authority = rest[..rest.find(['/', '?', '#']).unwrap_or(rest.len())].to_ascii_lowercase();
    let host_port = authority
        .rsplit_once('@')
        .map_or(authority.as_str(), |(_, h)| h);
    let has_port = host_port
        .rsplit_once(':')
        .is_some_and(|(_, port)| !port.is_empty() && port.bytes().all(|b| b.is_ascii_digit()));
    let default_port = if scheme == "https" { 443 } else { 80 };
    if has_port {
        Some(format!("{scheme}://{host_port}"))
    } else {
        Some(format!("{scheme}://{host_port}:{default_port}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resolves_endpoint_references() {
        let base = "http://127.0.0.1:8080/mcp/sse?x=1";
        let cases = [
            (
                "/messages?sessionId=abc",
                "http://127.0.0.1:8080/messages?sessionId=abc",
            ),
            ("messages?s=1", "http://127.0.0.1:8080/mcp/messages?s=1"),
            ("?s=2", "http://127.0.0.1:8080/mcp/sse?s=2"),
            ("//127.0.0.1:8080/m", "http://127.0.0.1:8080/m"),
            ("http://127.0.0.1:8080/abs", "http://127.0.0.1:8080/abs"),
        ];
        for (reference, expected) in cases {
            assert_eq!(resolve_url(base, reference).as_deref(), Some(expected));
        }
        assert_eq!(resolve_url("http://h", "m").as_deref(), Some("http://h/m"));
    }

    #[test]
    fn refuses_endpoints_on_another_origin() {
        let base = "https://example.com/sse";
        assert!(resolve_endpoint(base, "https://example.com:443/messages").is_ok());
        assert!(resolve_endpoint(base, "https://evil.example/messages").is_err());
        assert!(resolve_endpoint(base, "http://example.com/messages").is_err());
        assert!(resolve_endpoint(base, "//evil.example/messages").is_err());
        assert!(resolve_endpoint(base, "https://example.com@evil.example/").is_err());
    }
}

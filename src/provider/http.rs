//! Blocking HTTP for providers: one POST whose answer is an SSE stream, read
//! on a helper thread so the turn worker can wait on the stream, its cancel
//! signal and a stall timer at once.
//!
//! Each call gets its own `ureq::Agent`; a cancel shuts that agent down,
//! which closes the socket under the blocked read: the helper thread wakes
//! with an error and ends, and the server sees the client go away.

use super::sse::{Line, SseEvent, SseParser};
use super::ProviderError;
use crate::cancel::CancelToken;
use crossbeam_channel::{select, Receiver};
use std::io::{BufRead, BufReader, Read};
use std::time::Duration;

/// Timeouts of provider calls.
#[derive(Debug, Clone, Copy)]
pub struct Timeouts {
    /// Longest wait for the TCP (and TLS) connection.
    pub connect: Duration,
    /// Longest silence on an open stream (including the wait for the
    /// response headers) before the call counts as stalled.
    pub stall: Duration,
}

impl Default for Timeouts {
    fn default() -> Self {
        Timeouts {
            connect: Duration::from_secs(10),
            stall: Duration::from_secs(120),
        }
    }
}

/// The largest error body we read to find the provider's message.
const ERROR_BODY_LIMIT: u64 = 64 * 1024;

/// What the helper thread reports.
#[derive(Debug)]
pub enum StreamItem {
    Event(SseEvent),
    /// A comment line: no data, but the stream is alive.
    Alive,
    /// The body ended cleanly.
    End,
    Failed(ProviderError),
}

/// An SSE stream being read by a helper thread.
pub struct EventStream {
    items: Receiver<StreamItem>,
    agent: ureq::Agent,
    stall: Duration,
    url: String,
}

/// What waiting for the next item gave.
pub enum Next {
    Item(StreamItem),
    Cancelled,
}

impl EventStream {
    /// Starts the POST on a helper thread and returns at once.
    pub fn post(
        url: &str,
        headers: &[(&str, String)],
        body: String,
        timeouts: Timeouts,
        cancel: &CancelToken,
    ) -> Result<EventStream, ProviderError> {
        let config = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_connect(Some(timeouts.connect))
            .user_agent(concat!("spindle/", env!("CARGO_PKG_VERSION")))
            .build();
        let agent: ureq::Agent = config.into();
        let mut request = agent.post(url);
        for (name, value) in headers {
            request = request.header(*name, value.as_str());
        }
        {
            let agent = agent.clone();
            cancel.on_cancel(move || agent.shutdown());
        }
        // A small buffer is enough to decouple the socket from the worker
        // and still lets a slow consumer push back on the server.
        let (sender, items) = crossbeam_channel::bounded(256);
        let url_owned = url.to_string();
        std::thread::Builder::new()
            .name("spindle-http".into())
            .spawn(move || {
                let result = request.send(body);
                let item = match result {
                    Err(err) => StreamItem::Failed(connect_error(&url_owned, err)),
                    Ok(response) => {
                        let status = response.status().as_u16();
                        if !(200..300).contains(&status) {
                            StreamItem::Failed(status_error(status, response.into_body()))
                        } else {
                            let reader = response.into_body().into_reader();
                            read_events(reader, &sender)
                        }
                    }
                };
                let _ = sender.send(item);
            })
            .map_err(|err| {
                ProviderError::new("provider_unreachable", format!("cannot start: {err}"))
            })?;
        Ok(EventStream {
            items,
            agent,
            stall: timeouts.stall,
            url: url.to_string(),
        })
    }

    /// Waits for the next item, a cancel, or the stall timeout (which shuts
    /// the connection and reports `provider_stalled`).
    pub fn next(&self, cancel: &CancelToken) -> Next {
        select! {
            recv(self.items) -> item => match item {
                Ok(item) => Next::Item(item),
                Err(_) => Next::Item(StreamItem::Failed(ProviderError::new(
                    "provider_stream_broken",
                    "the provider stream ended unexpectedly",
                ))),
            },
            recv(cancel.signal()) -> _ => Next::Cancelled,
            default(self.stall) => {
                self.agent.clone().shutdown();
                Next::Item(StreamItem::Failed(ProviderError::new(
                    "provider_stalled",
                    format!(
                        "no data from {} for {} s; gave up",
                        self.url,
                        self.stall.as_secs_f64()
                    ),
                )))
            }
        }
    }
}

impl Drop for EventStream {
    fn drop(&mut self) {
        // Whatever ended the call, the connection goes with it: the helper
        // thread wakes and exits instead of reading a stream nobody wants.
        self.agent.clone().shutdown();
    }
}

fn read_events<R: Read>(reader: R, sender: &crossbeam_channel::Sender<StreamItem>) -> StreamItem {
    let mut reader = BufReader::with_capacity(64 * 1024, reader);
    let mut parser = SseParser::new();
    let mut line = Vec::with_capacity(1024);
    loop {
        line.clear();
        match reader.read_until(b'\n', &mut line) {
            Ok(0) => return StreamItem::End,
            Ok(_) => {}
            Err(err) => {
                return StreamItem::Failed(ProviderError::new(
                    "provider_stream_broken",
                    format!("the provider stream broke: {err}"),
                ))
            }
        }
        if line.last() == Some(&b'\n') {
            line.pop();
            if line.last() == Some(&b'\r') {
                line.pop();
            }
        } else if line.last() == Some(&b'\r') {
            line.pop();
        }
        // A lone CR inside what LF-splitting gave us also ends a line.
        for piece in line.split(|&b| b == b'\r') {
            let item = match parser.line(piece) {
                Line::Event(event) => StreamItem::Event(event),
                Line::Comment => StreamItem::Alive,
                Line::Pending => continue,
            };
            if sender.send(item).is_err() {
                return StreamItem::End;
            }
        }
    }
}

fn connect_error(url: &str, err: ureq::Error) -> ProviderError {
    ProviderError::new(
        "provider_unreachable",
        format!("cannot reach the model provider at {url}: {err}"),
    )
}

/// Builds the error for a non-2xx answer, with the provider's own message
/// when the body has one.
fn status_error(status: u16, body: ureq::Body) -> ProviderError {
    let mut bytes = Vec::new();
    let _ = body
        .into_reader()
        .take(ERROR_BODY_LIMIT)
        .read_to_end(&mut bytes);
    let message = provider_message(&bytes).unwrap_or_else(|| {
        let text = String::from_utf8_lossy(&bytes);
        let text = text.trim();
        if text.is_empty() {
            "no details given".to_string()
        } else {
            text.chars().take(300).collect()
        }
    });
    ProviderError {
        code: format!("provider_http_{status}"),
        message: format!("the model provider answered HTTP {status}: {message}"),
        status: Some(status),
    }
}

/// Finds the message in an error body of any of the common shapes:
/// `{"error":{"message":…}}`, `{"error":"…"}`, `{"message":…}`.
pub fn provider_message(bytes: &[u8]) -> Option<String> {
    let value: serde_json::Value = serde_json::from_slice(bytes).ok()?;
    let error = value.get("error").unwrap_or(&value);
    if let Some(text) = error.as_str() {
        return Some(text.to_string());
    }
    error
        .get("message")
        .and_then(|m| m.as_str())
        .map(str::to_string)
}

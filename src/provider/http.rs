//! Blocking HTTP for providers: one POST whose answer is an SSE stream, read
//! on a helper thread so the turn worker can wait on the stream, its cancel
//! signal and a stall timer at once.
//!
//! Each call gets its own `ureq::Agent`; a cancel shuts that agent down,
//! which closes the socket under the blocked read: the helper thread wakes
//! with an error and ends, and the server sees the client go away.

use super::sse::{Line, SseEvent, SseParser};
use super::{Outcome, ProviderError, Sink, StreamError};
use crate::cancel::CancelToken;
use crossbeam_channel::{select, Receiver, Sender};
use std::cell::RefCell;
use std::io::{BufRead, BufReader, Read};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The User-Agent of every request Spindle makes to a model server.
pub const USER_AGENT: &str = concat!("spindle/", env!("CARGO_PKG_VERSION"));

/// Timeouts of provider calls.
#[derive(Debug, Clone, Copy)]
pub struct Timeouts {
    /// Longest wait for the TCP (and TLS) connection.
    pub connect: Duration,
    /// Longest silence on an open stream (including the wait for the
    /// response headers) before the call counts as stalled.
    pub stall: Duration,
    /// Attempts per model call (the first one included) when failures
    /// that may pass (connection errors, 408, 409, 429, 5xx, a stream cut
    /// before its first event) happen.
    pub attempts: u32,
    /// The longest total time spent waiting between attempts.
    pub max_retry_wait: Duration,
    /// How much one stream may send.
    pub limits: StreamLimits,
}

/// Size limits of one model stream, in bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StreamLimits {
    /// One SSE line.
    pub line: usize,
    /// One SSE event (all its data lines), and a whole JSON answer.
    pub event: usize,
    /// What one response makes the agent hold: its text, thoughts, tool
    /// calls and opaque reasoning, counted as JSON text.
    pub response: usize,
    /// All the event data one response may send, held or not.
    pub stream: usize,
}

impl Default for StreamLimits {
    fn default() -> Self {
        StreamLimits {
            line: super::sse::LINE_CAP,
            event: super::sse::EVENT_CAP,
            response: RESPONSE_CAP,
            stream: STREAM_CAP,
        }
    }
}

impl Default for Timeouts {
    fn default() -> Self {
        Timeouts {
            connect: Duration::from_secs(10),
            stall: Duration::from_secs(120),
            attempts: 4,
            max_retry_wait: Duration::from_secs(60),
            limits: StreamLimits::default(),
        }
    }
}

/// Turns a complete, non-streamed JSON answer (from a server that ignored
/// `stream: true`) into the data of the events its wire format would have
/// streamed, so the provider's own state machine reads it unchanged.
pub type WholeAnswer = fn(&serde_json::Value) -> Vec<String>;

/// The longest server-requested delay we honour before a retry.
const MAX_SERVER_DELAY: Duration = Duration::from_secs(60);

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
    /// The first item, read by `open` to decide about a retry.
    peeked: RefCell<Option<StreamItem>>,
    /// When the stream last gave something real (an event, or its start):
    /// keep-alive comments show the server lives but not that it makes
    /// progress, so they do not move the stall deadline.
    progress: std::cell::Cell<std::time::Instant>,
    /// Bytes of event data received so far, against `limits.stream`: a
    /// server that streams events nobody keeps is given up on too.
    received: std::cell::Cell<usize>,
    limits: StreamLimits,
    /// Event data read by the helper thread and not taken here yet.
    in_flight: Arc<AtomicUsize>,
    /// Tells the helper thread that data was taken (it waits when too much
    /// is in flight); dropped with the stream, which ends the helper.
    taken: Sender<()>,
}

/// The most one model response may make the agent hold (`limits.response`),
/// counted as JSON text. Far above what any model writes in one answer,
/// and low enough that the copies the agent makes of a response (the
/// message, the transcript, the lines to the editor and the store) keep
/// the whole process within 64 MiB.
pub const RESPONSE_CAP: usize = 4 * 1024 * 1024;

/// The most event data one model response may send (`limits.stream`).
pub const STREAM_CAP: usize = 256 * 1024 * 1024;

/// The most event data waiting between the helper thread and the turn: a
/// slow turn (a client that reads slowly) makes the helper wait instead of
/// reading ahead, whatever the size of the events.
const IN_FLIGHT_BYTES: usize = 1024 * 1024;

/// What each run of text or of thought costs beyond its bytes (the
/// transcript keeps each run as an update of its own), so a response that
/// alternates tiny pieces of both is bounded too.
const RUN_BYTES: usize = 256;

/// Has every large allocation (over 128 KiB: a response's text, the JSON
/// copies the transcript and the store make of it) mapped on its own, as
/// glibc does at first, instead of letting the threshold grow with the
/// largest block freed. Past that growth, long texts are built inside the
/// heap: each doubling leaves its old copy behind as resident free memory,
/// which the heap keeps after the turn; the peak of a response at the cap
/// is about a third higher, and the agent stays there. Once per process,
/// before the first model call or model list.
pub fn map_large_buffers() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        static ONCE: std::sync::Once = std::sync::Once::new();
        ONCE.call_once(|| {
            // SAFETY: mallopt takes plain integers; setting the threshold
            // also turns its dynamic adjustment off.
            unsafe {
                libc::mallopt(libc::M_MMAP_THRESHOLD, 128 * 1024);
            }
        });
    }
}

/// The parse of one wire format's stream, fed one event at a time.
pub trait WireState {
    /// Handles one event: `Some` outcome at the format's terminal event.
    fn handle(
        &mut self,
        event: &SseEvent,
        sink: &mut dyn Sink,
    ) -> Result<Option<Outcome>, ProviderError>;

    /// The bytes the parse holds so far (tool calls, opaque reasoning),
    /// counted as JSON text. Kept as a running count: called after every
    /// event.
    fn held(&self) -> usize;

    /// The outcome of a body that ended without the terminal event, when
    /// the format allows that; `None`: the stream was cut short.
    fn end(&mut self) -> Option<Outcome> {
        None
    }
}

/// The error of a response past its cap.
pub fn response_too_large(cap: usize, what: &str) -> ProviderError {
    ProviderError::new(
        "provider_response_too_large",
        format!("the model's response passed {cap} bytes{what}; it was cut off"),
    )
}

/// The sink a stream's text and thoughts go through: counts them (as JSON
/// text, plus `RUN_BYTES` per run) and passes on nothing past the cap.
struct Held<'a> {
    sink: &'a mut dyn Sink,
    bytes: usize,
    cap: usize,
    over: bool,
    /// Whether the last piece was a thought.
    last: Option<bool>,
}

impl Held<'_> {
    fn admit(&mut self, thought: bool, delta: &str) -> bool {
        let mut cost = super::json_len(delta);
        if self.last != Some(thought) {
            cost += RUN_BYTES;
        }
        if self.over || self.bytes + cost > self.cap {
            self.over = true;
            return false;
        }
        self.last = Some(thought);
        self.bytes += cost;
        true
    }
}

impl Sink for Held<'_> {
    fn text(&mut self, delta: &str) {
        if self.admit(false, delta) {
            self.sink.text(delta);
        }
    }

    fn thought(&mut self, delta: &str) {
        if self.admit(true, delta) {
            self.sink.thought(delta);
        }
    }

    fn notice(&mut self, text: &str) {
        if self.admit(true, text) {
            self.sink.notice(text);
        }
    }
}

/// What waiting for the next item gave.
pub enum Next {
    Item(StreamItem),
    Cancelled,
}

impl EventStream {
    /// POSTs and waits for the stream's first event, retrying failures
    /// that may pass with exponential backoff and jitter (or the server's
    /// `Retry-After`), at most `timeouts.attempts` times and
    /// `timeouts.max_retry_wait` in all. A retry happens only before the
    /// first event, so nothing the user already saw is ever repeated; each
    /// one is logged and told to the user through `sink.notice`. A cancel
    /// interrupts the wait at once.
    pub fn open(
        url: &str,
        headers: &[(&str, String)],
        body: String,
        timeouts: Timeouts,
        cancel: &CancelToken,
        sink: &mut dyn Sink,
        whole: WholeAnswer,
    ) -> Result<EventStream, StreamError> {
        let started = Instant::now();
        let mut attempt = 1;
        loop {
            let stream = EventStream::post(url, headers, body.clone(), timeouts, cancel, whole)?;
            let error = loop {
                match stream.next(cancel) {
                    Next::Cancelled => return Err(StreamError::Cancelled),
                    Next::Item(StreamItem::Alive) => continue,
                    Next::Item(StreamItem::End) => {
                        break ProviderError::new(
                            "provider_stream_broken",
                            "the provider ended the stream before sending anything",
                        )
                        .retryable()
                    }
                    Next::Item(StreamItem::Failed(error)) => break error,
                    Next::Item(StreamItem::Event(event)) if error_event(&event.data).is_some() => {
                        break error_event(&event.data).unwrap_or_else(|| {
                            ProviderError::new("provider_stream_error", "error event")
                        })
                    }
                    Next::Item(first) => {
                        *stream.peeked.borrow_mut() = Some(first);
                        return Ok(stream);
                    }
                }
            };
            if cancel.is_cancelled() {
                return Err(StreamError::Cancelled);
            }
            let delay = error.retry_after.unwrap_or_else(|| backoff(attempt));
            let waited = started.elapsed();
            if !error.retryable
                || attempt >= timeouts.attempts
                || delay > MAX_SERVER_DELAY
                || waited + delay > timeouts.max_retry_wait
            {
                return Err(StreamError::Failed(error));
            }
            attempt += 1;
            let note = format!(
                "{} — retrying in {:.1} s (attempt {attempt} of {}).",
                error.message,
                delay.as_secs_f64(),
                timeouts.attempts
            );
            log::warn!("{note}");
            sink.notice(&format!("\n{note}\n"));
            if cancel.sleep(delay) {
                return Err(StreamError::Cancelled);
            }
        }
    }

    /// Starts the POST on a helper thread and returns at once.
    pub fn post(
        url: &str,
        headers: &[(&str, String)],
        body: String,
        timeouts: Timeouts,
        cancel: &CancelToken,
        whole: WholeAnswer,
    ) -> Result<EventStream, ProviderError> {
        map_large_buffers();
        let config = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_connect(Some(timeouts.connect))
            .user_agent(USER_AGENT)
            .build();
        let agent: ureq::Agent = config.into();
        let limits = timeouts.limits;
        let mut request = agent.post(url);
        for (name, value) in headers {
            request = request.header(*name, value.as_str());
        }
        {
            let agent = agent.clone();
            cancel.on_cancel(move || agent.shutdown());
        }
        // A small buffer is enough to decouple the socket from the worker
        // and still lets a slow consumer push back on the server; the bytes
        // in it are bounded as well as the events.
        let (sender, items) = crossbeam_channel::bounded(256);
        let (taken, wake) = crossbeam_channel::bounded(1);
        let in_flight = Arc::new(AtomicUsize::new(0));
        let url_owned = url.to_string();
        let flow = Flow {
            sender,
            in_flight: in_flight.clone(),
            wake,
        };
        std::thread::Builder::new()
            .name("spindle-http".into())
            .spawn(move || {
                let result = request.send(body);
                let item = match result {
                    Err(err) => StreamItem::Failed(connect_error(&url_owned, err)),
                    Ok(response) => {
                        let status = response.status().as_u16();
                        if !(200..300).contains(&status) {
                            let retry = RetryAdvice::from_headers(response.headers());
                            StreamItem::Failed(status_error(status, &retry, response.into_body()))
                        } else if is_json(response.headers()) {
                            // A complete answer, not a stream: one read,
                            // never retried (it is a success).
                            read_whole(response.into_body(), &flow, limits, whole)
                        } else {
                            let reader = response.into_body().into_reader();
                            read_events(reader, &flow, limits)
                        }
                    }
                };
                let _ = flow.sender.send(item);
            })
            .map_err(|err| {
                ProviderError::new("provider_unreachable", format!("cannot start: {err}"))
            })?;
        Ok(EventStream {
            limits,
            in_flight,
            taken,
            items,
            agent,
            stall: timeouts.stall,
            url: url.to_string(),
            peeked: RefCell::new(None),
            progress: std::cell::Cell::new(std::time::Instant::now()),
            received: std::cell::Cell::new(0),
        })
    }

    /// Feeds every event to `state` until it gives the outcome (the wire
    /// format's terminal event). A stream that ends before that is
    /// truncated, never a success, unless the format says otherwise
    /// (`WireState::end`); a failure while cancelling is a cancel. What the
    /// response makes the agent hold (its text and thoughts, as passed to
    /// `sink`, and what `state` keeps) is checked after every event: past
    /// `limits.response` the call ends with `provider_response_too_large`,
    /// the text past the cap never reaching `sink`.
    pub fn drive(
        &self,
        cancel: &CancelToken,
        sink: &mut dyn Sink,
        state: &mut dyn WireState,
    ) -> Result<Outcome, StreamError> {
        let cap = self.limits.response;
        let mut held = Held {
            sink,
            bytes: 0,
            cap,
            over: false,
            last: None,
        };
        loop {
            let item = match self.next(cancel) {
                Next::Cancelled => return Err(StreamError::Cancelled),
                Next::Item(item) => item,
            };
            match item {
                StreamItem::Event(event) => {
                    let outcome = state.handle(&event, &mut held)?;
                    drop(event);
                    if held.over || held.bytes + state.held() > cap {
                        self.agent.clone().shutdown();
                        return Err(response_too_large(cap, " of text and tool calls").into());
                    }
                    if let Some(outcome) = outcome {
                        return Ok(outcome);
                    }
                }
                StreamItem::Alive => {}
                StreamItem::End => {
                    return state.end().ok_or_else(|| {
                        ProviderError::new(
                            "provider_stream_broken",
                            "the provider stream ended before the model finished",
                        )
                        .into()
                    })
                }
                StreamItem::Failed(error) => {
                    return Err(if cancel.is_cancelled() {
                        StreamError::Cancelled
                    } else {
                        StreamError::Failed(error)
                    })
                }
            }
        }
    }

    /// Waits for the next item, a cancel, or the stall timeout (which shuts
    /// the connection and reports `provider_stalled`).
    pub fn next(&self, cancel: &CancelToken) -> Next {
        if let Some(item) = self.peeked.borrow_mut().take() {
            return Next::Item(item);
        }
        let deadline = self.progress.get() + self.stall;
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        select! {
            recv(self.items) -> item => match item {
                Ok(item) => {
                    if !matches!(item, StreamItem::Alive) {
                        self.progress.set(std::time::Instant::now());
                    }
                    if let StreamItem::Event(event) = &item {
                        self.in_flight.fetch_sub(event.data.len(), Ordering::SeqCst);
                        let _ = self.taken.try_send(());
                        let received = self.received.get() + event.data.len();
                        self.received.set(received);
                        if received > self.limits.stream {
                            self.agent.clone().shutdown();
                            return Next::Item(StreamItem::Failed(response_too_large(
                                self.limits.stream,
                                " of events",
                            )));
                        }
                    }
                    Next::Item(item)
                }
                Err(_) => Next::Item(StreamItem::Failed(ProviderError::new(
                    "provider_stream_broken",
                    "the provider stream ended unexpectedly",
                ))),
            },
            recv(cancel.signal()) -> _ => Next::Cancelled,
            default(left) => {
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

fn is_json(headers: &ureq::http::HeaderMap) -> bool {
    headers
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| {
            v.trim()
                .to_ascii_lowercase()
                .starts_with("application/json")
        })
}

/// The helper thread's side of the stream: events go out only while
/// little enough data is in flight.
struct Flow {
    sender: Sender<StreamItem>,
    in_flight: Arc<AtomicUsize>,
    wake: Receiver<()>,
}

impl Flow {
    /// Sends an item, first waiting (for an event) until the data in flight
    /// is under `IN_FLIGHT_BYTES` or nothing: an event larger than that
    /// goes alone. False once the stream is gone.
    fn send(&self, item: StreamItem) -> bool {
        if let StreamItem::Event(event) = &item {
            let size = event.data.len();
            loop {
                let waiting = self.in_flight.load(Ordering::SeqCst);
                if waiting == 0 || waiting + size <= IN_FLIGHT_BYTES {
                    break;
                }
                if self.wake.recv().is_err() {
                    return false;
                }
            }
            self.in_flight.fetch_add(size, Ordering::SeqCst);
        }
        self.sender.send(item).is_ok()
    }
}

/// Reads a complete JSON answer (at most `limits.event` bytes: it stands
/// for the events of a stream) and sends the events it stands for.
fn read_whole(
    body: ureq::Body,
    flow: &Flow,
    limits: StreamLimits,
    whole: WholeAnswer,
) -> StreamItem {
    let mut bytes = Vec::new();
    let cap = limits.event as u64;
    if let Err(err) = body.into_reader().take(cap + 1).read_to_end(&mut bytes) {
        return StreamItem::Failed(
            ProviderError::new(
                "provider_stream_broken",
                format!("reading the provider's answer failed: {err}"),
            )
            .retryable(),
        );
    }
    if bytes.len() as u64 > cap {
        return StreamItem::Failed(response_too_large(limits.event, " as one JSON answer"));
    }
    let parsed = serde_json::from_slice::<serde_json::Value>(&bytes);
    drop(bytes);
    let value = match parsed {
        Ok(value) => value,
        Err(err) => {
            return StreamItem::Failed(ProviderError::new(
                "provider_bad_response",
                format!("the provider answered with JSON that cannot be read: {err}"),
            ))
        }
    };
    if let Some(error) = error_value(&value) {
        return StreamItem::Failed(error);
    }
    let events = whole(&value);
    drop(value);
    for data in events {
        if !flow.send(StreamItem::Event(SseEvent { event: None, data })) {
            return StreamItem::End;
        }
    }
    StreamItem::End
}

/// Line buffers that grew past this are given back after their line.
const LINE_KEPT: usize = 64 * 1024;

fn read_events<R: Read>(reader: R, flow: &Flow, limits: StreamLimits) -> StreamItem {
    let mut reader = BufReader::with_capacity(64 * 1024, reader);
    let mut parser = SseParser::with_event_cap(limits.event);
    let mut line = Vec::with_capacity(1024);
    let too_large = |what: &str| {
        StreamItem::Failed(ProviderError::new(
            "provider_stream_too_large",
            format!("the provider sent {what}; the stream was refused"),
        ))
    };
    loop {
        line.clear();
        let cap = limits.line as u64 + 1;
        match (&mut reader).take(cap).read_until(b'\n', &mut line) {
            Ok(0) => return StreamItem::End,
            Ok(_) if line.len() as u64 >= cap && line.last() != Some(&b'\n') => {
                return too_large(&format!("a line over {} bytes", limits.line));
            }
            Ok(_) => {}
            Err(err) => {
                // Retryable: `open` only retries before the first event,
                // so nothing already shown is ever repeated.
                return StreamItem::Failed(
                    ProviderError::new(
                        "provider_stream_broken",
                        format!("the provider stream broke: {err}"),
                    )
                    .retryable(),
                );
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
                Line::TooLarge => {
                    return too_large(&format!("an event over {} bytes", limits.event))
                }
            };
            if !flow.send(item) {
                return StreamItem::End;
            }
        }
        // A long line is not held on to once parsed.
        if line.capacity() > LINE_KEPT {
            line = Vec::with_capacity(1024);
        }
    }
}

fn connect_error(url: &str, err: ureq::Error) -> ProviderError {
    ProviderError::new(
        "provider_unreachable",
        format!("cannot reach the model provider at {url}: {err}"),
    )
    .retryable()
}

/// An error sent as a stream's first event, in any of the three wire
/// formats: Chat's `{"error": …}`, Anthropic's `{"type": "error", "error":
/// …}`, the Responses API's `error` and `response.failed`. Overloaded,
/// server and rate-limit errors may pass, so they are retryable.
fn error_event(data: &str) -> Option<ProviderError> {
    if !data.contains("error") {
        return None;
    }
    error_value(&serde_json::from_str(data).ok()?)
}

/// `error_event` of parsed data.
fn error_value(value: &serde_json::Value) -> Option<ProviderError> {
    let kind = value.get("type").and_then(|t| t.as_str()).unwrap_or("");
    let error = match kind {
        "response.failed" => value.get("response")?.get("error")?,
        "error" => value.get("error").unwrap_or(value),
        "" => value.get("error")?,
        _ => return None,
    };
    let message = error
        .get("message")
        .and_then(|m| m.as_str())
        .unwrap_or("the provider reported an error");
    let code = ["type", "code"]
        .iter()
        .filter_map(|key| error.get(*key).and_then(|c| c.as_str()))
        .collect::<Vec<_>>()
        .join(" ");
    let retryable = ["overloaded", "server_error", "api_error", "rate_limit"]
        .iter()
        .any(|word| code.contains(word));
    let error = ProviderError::new(
        "provider_stream_error",
        format!("the model provider reported an error: {message}"),
    );
    Some(if retryable { error.retryable() } else { error })
}

/// Exponential backoff: 0.5 s × 2ⁿ, at most 8 s, times a jitter factor in
/// (0.75, 1] so that many clients do not retry in step.
fn backoff(attempt: u32) -> Duration {
    let base = 0.5 * 2f64.powi(attempt.saturating_sub(1).min(8) as i32);
    let random = u64::from_str_radix(&crate::util::random_hex(), 16).unwrap_or(0);
    let jitter = 0.75 + 0.25 * ((random % 1000) as f64 + 1.0) / 1000.0;
    Duration::from_secs_f64(base.min(8.0) * jitter)
}

/// What the response headers say about retrying.
#[derive(Debug, Default, PartialEq)]
struct RetryAdvice {
    delay: Option<Duration>,
    /// `x-should-retry`, which overrides the status-code rules.
    should_retry: Option<bool>,
}

impl RetryAdvice {
    fn from_headers(headers: &ureq::http::HeaderMap) -> RetryAdvice {
        // Gateways (LiteLLM's proxy) forward the upstream's hints with an
        // `llm_provider-` prefix; the gateway's own header wins.
        let get = |name: &str| {
            headers
                .get(name)
                .or_else(|| headers.get(format!("llm_provider-{name}").as_str()))
                .and_then(|v| v.to_str().ok())
        };
        RetryAdvice::parse(
            get("retry-after-ms"),
            get("retry-after"),
            get("x-should-retry"),
        )
    }

    fn parse(
        retry_after_ms: Option<&str>,
        retry_after: Option<&str>,
        should_retry: Option<&str>,
    ) -> RetryAdvice {
        let from_ms = retry_after_ms
            .and_then(|v| v.trim().parse::<f64>().ok())
            .filter(|ms| ms.is_finite() && *ms >= 0.0)
            .map(|ms| Duration::from_secs_f64(ms / 1000.0));
        let from_header = retry_after.and_then(|v| {
            let v = v.trim();
            match v.parse::<f64>() {
                Ok(secs) if secs.is_finite() && secs >= 0.0 => Some(Duration::from_secs_f64(secs)),
                Ok(_) => None,
                Err(_) => parse_http_date(v).map(|at| {
                    let now = crate::clock::now_ms() / 1000;
                    Duration::from_secs(at.saturating_sub(now).max(0) as u64)
                }),
            }
        });
        RetryAdvice {
            delay: from_ms.or(from_header),
            should_retry: should_retry.map(|v| v.trim().eq_ignore_ascii_case("true")),
        }
    }
}

/// Parses an IMF-fixdate such as `Wed, 21 Oct 2026 07:28:00 GMT` into
/// seconds since the epoch.
fn parse_http_date(text: &str) -> Option<i64> {
    let parts: Vec<&str> = text.split_whitespace().collect();
    let [_, day, month, year, clock, zone] = parts.as_slice() else {
        return None;
    };
    if *zone != "GMT" {
        return None;
    }
    let months = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let month = months.iter().position(|m| m == month)? as i64 + 1;
    let day: i64 = day.parse().ok()?;
    let year: i64 = year.parse().ok()?;
    let mut clock = clock.split(':').map(|p| p.parse::<i64>().ok());
    let (hour, minute, second) = (clock.next()??, clock.next()??, clock.next()??);
    // Days from the civil date (the inverse of the store's formatter).
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let year_of_era = y - era * 400;
    let month_index = (month + 9) % 12;
    let day_of_year = (153 * month_index + 2) / 5 + day - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    let days = era * 146_097 + day_of_era - 719_468;
    Some(days * 86_400 + hour * 3600 + minute * 60 + second)
}

/// Builds the error for a non-2xx answer, with the provider's own message
/// when the body has one.
fn status_error(status: u16, advice: &RetryAdvice, body: ureq::Body) -> ProviderError {
    let mut bytes = Vec::new();
    let _ = body
        .into_reader()
        .take(ERROR_BODY_LIMIT)
        .read_to_end(&mut bytes);
    let message = provider_message(&bytes).unwrap_or_else(|| {
        let text = visible_text(&String::from_utf8_lossy(&bytes));
        if text.is_empty() {
            "no details given".to_string()
        } else {
            text.chars().take(300).collect()
        }
    });
    // Billing problems look like rate limits but waiting does not help.
    let quota = String::from_utf8_lossy(&bytes).contains("insufficient_quota");
    let by_status = matches!(status, 408 | 409 | 429) || status >= 500;
    ProviderError {
        code: format!("provider_http_{status}"),
        message: format!("the model provider answered HTTP {status}: {message}"),
        status: Some(status),
        retryable: advice.should_retry.unwrap_or(by_status && !quota),
        retry_after: advice.delay,
    }
}

/// The readable text of an error body: an HTML page (a proxy's error page)
/// loses its markup, scripts and styles, and white space is folded.
fn visible_text(body: &str) -> String {
    if !body.trim_start().starts_with('<') {
        return body.split_whitespace().collect::<Vec<_>>().join(" ");
    }
    let mut text = String::new();
    let mut rest = body;
    while let Some(open) = rest.find('<') {
        text.push_str(&rest[..open]);
        text.push(' ');
        let tag = &rest[open..];
        let lower = tag.get(..8).unwrap_or(tag).to_ascii_lowercase();
        let skip_to = if lower.starts_with("<script") {
            tag.to_ascii_lowercase().find("</script>").map(|at| at + 9)
        } else if lower.starts_with("<style") {
            tag.to_ascii_lowercase().find("</style>").map(|at| at + 8)
        } else {
            tag.find('>').map(|at| at + 1)
        };
        match skip_to {
            Some(end) => rest = &tag[end..],
            None => {
                rest = "";
                break;
            }
        }
    }
    text.push_str(rest);
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Finds the message in an error body of any of the common shapes:
/// `{"error":{"message":…}}`, `{"error":"…"}`, `{"message":…}`.
pub fn provider_message(bytes: &[u8]) -> Option<String> {
    // Some servers frame an error body as SSE: `data: {…}` lines and a
    // `[DONE]`; the JSON is in the first data line that parses.
    let value: serde_json::Value = serde_json::from_slice(bytes).ok().or_else(|| {
        String::from_utf8_lossy(bytes)
            .lines()
            .filter_map(|line| line.trim().strip_prefix("data:"))
            .find_map(|data| serde_json::from_str(data.trim()).ok())
    })?;
    let error = value.get("error").unwrap_or(&value);
    if let Some(text) = error.as_str() {
        return Some(text.to_string());
    }
    error
        .get("message")
        .and_then(|m| m.as_str())
        .map(str::to_string)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn held_text_counts_as_json_and_per_run_and_stops_at_the_cap() {
        let mut collect = crate::provider::testing::Collect::default();
        let mut held = Held {
            sink: &mut collect,
            bytes: 0,
            cap: 2 * RUN_BYTES + 20,
            over: false,
            last: None,
        };
        held.text("abc");
        held.text("\"\u{1}");
        assert_eq!(held.bytes, RUN_BYTES + 3 + 2 + 6);
        held.thought("d");
        assert_eq!(held.bytes, 2 * RUN_BYTES + 12);
        // A new run would pass the cap: nothing more gets through.
        held.text("e");
        held.thought("f");
        assert!(held.over);
        assert_eq!(
            (collect.text.as_str(), collect.thought.as_str()),
            ("abc\"\u{1}", "d")
        );
    }

    #[test]
    fn the_helper_waits_while_a_megabyte_is_in_flight() {
        let (sender, items) = crossbeam_channel::bounded(256);
        let (taken, wake) = crossbeam_channel::bounded(1);
        let flow = Flow {
            sender,
            in_flight: Arc::new(AtomicUsize::new(0)),
            wake,
        };
        let event = |size: usize| {
            StreamItem::Event(SseEvent {
                event: None,
                data: "x".repeat(size),
            })
        };
        // Alone, an event goes whatever its size; small ones join it
        // while the total stays under the budget.
        assert!(flow.send(event(IN_FLIGHT_BYTES / 2)));
        assert!(flow.send(event(IN_FLIGHT_BYTES / 4)));
        // This one waits for room, until the stream is gone.
        drop(taken);
        assert!(!flow.send(event(IN_FLIGHT_BYTES / 2)));
        assert_eq!(items.len(), 2);
        assert_eq!(
            flow.in_flight.load(Ordering::SeqCst),
            IN_FLIGHT_BYTES * 3 / 4
        );
    }

    #[test]
    fn error_bodies_are_read_whatever_their_framing() {
        assert_eq!(
            provider_message(
                b"data: {\"error\": {\"message\": \"Key expired\"}}\n\ndata: [DONE]\n\n"
            ),
            Some("Key expired".to_string())
        );
        assert_eq!(
            visible_text("<html><head><style>p{}</style><script>x()</script></head><body><h1>502 Bad Gateway</h1>\n<p>nginx</p></body></html>"),
            "502 Bad Gateway nginx"
        );
        assert_eq!(visible_text("plain\n  words"), "plain words");
    }

    #[test]
    fn gateway_prefixed_retry_hints_count() {
        let mut headers = ureq::http::HeaderMap::new();
        headers.insert("llm_provider-retry-after", "3".parse().unwrap());
        assert_eq!(
            RetryAdvice::from_headers(&headers).delay,
            Some(Duration::from_secs(3))
        );
        headers.insert("retry-after-ms", "250".parse().unwrap());
        assert_eq!(
            RetryAdvice::from_headers(&headers).delay,
            Some(Duration::from_millis(250))
        );
    }

    #[test]
    fn retry_advice_from_headers() {
        let advice = RetryAdvice::parse(None, Some("2"), None);
        assert_eq!(advice.delay, Some(Duration::from_secs(2)));
        let advice = RetryAdvice::parse(Some("1500"), Some("9"), Some("false"));
        assert_eq!(advice.delay, Some(Duration::from_millis(1500)));
        assert_eq!(advice.should_retry, Some(false));
        let past = RetryAdvice::parse(None, Some("Wed, 21 Oct 2015 07:28:00 GMT"), None);
        assert_eq!(past.delay, Some(Duration::ZERO));
        assert_eq!(RetryAdvice::parse(None, Some("soon"), None).delay, None);
    }

    #[test]
    fn error_events_of_each_wire_format() {
        let anthropic = error_event(
            r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#,
        )
        .unwrap();
        assert!(anthropic.retryable && anthropic.message.contains("Overloaded"));
        let chat =
            error_event(r#"{"error":{"message":"bad","type":"invalid_request_error"}}"#).unwrap();
        assert!(!chat.retryable);
        let failed = error_event(r#"{"type":"response.failed","response":{"error":{"code":"server_error","message":"oops"}}}"#).unwrap();
        assert!(failed.retryable);
        assert!(error_event(r#"{"type":"message_start","message":{}}"#).is_none());
        assert!(error_event(r#"{"choices":[{"delta":{"content":"error"}}]}"#).is_none());
    }

    #[test]
    fn http_dates() {
        assert_eq!(parse_http_date("Thu, 01 Jan 1970 00:00:00 GMT"), Some(0));
        assert_eq!(
            parse_http_date("Wed, 21 Oct 2026 07:28:00 GMT"),
            Some(1_792_567_680)
        );
        assert_eq!(parse_http_date("Wed, 21 Oct 2026 07:28:00 CET"), None);
    }

    #[test]
    fn backoff_grows_and_is_capped() {
        for attempt in 1..12 {
            let delay = backoff(attempt).as_secs_f64();
            let base = (0.5 * 2f64.powi(attempt as i32 - 1)).min(8.0);
            assert!(
                delay > base * 0.75 - 1e-9 && delay <= base + 1e-9,
                "{attempt}: {delay}"
            );
        }
    }
}

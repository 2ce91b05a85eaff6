//! Blocking HTTP for providers: one POST whose answer is an SSE stream, read
//! on a helper thread so the turn worker can wait on the stream, its cancel
//! signal and a stall timer at once.
//!
//! Each call gets its own `ureq::Agent`; a cancel shuts that agent down,
//! which closes the socket under the blocked read: the helper thread wakes
//! with an error and ends, and the server sees the client go away.
//!
//! This file holds the stream: its limits and timeouts, the POST on the
//! helper thread, the retries before the first event, the stall timer and
//! the response cap; `body.rs` is the helper thread's reading of the
//! body, `errors.rs` what a failure says and whether to retry it.

mod body;
pub(crate) mod errors;
mod reset;
mod stream;

use super::sse::SseEvent;
use super::{Outcome, ProviderError, Sink, StreamError};
use crate::cancel::CancelToken;
use body::{is_json, read_events, read_whole, Flow, InFlight, IN_FLIGHT_EVENTS};
use crossbeam_channel::{select, Receiver, Sender};
use errors::{backoff, connect_error, error_event, status_error, RetryAdvice};
use std::cell::RefCell;
use std::sync::Arc;
use std::time::{Duration, Instant};
use stream::Events;
pub(crate) use stream::{response_too_large, StreamItem, StreamLimits, WholeAnswer};

pub(crate) use crate::net::agent_config;

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

impl Timeouts {
    /// These timeouts with at most `attempts` tries, when given.
    pub fn at_most(self, attempts: Option<u32>) -> Timeouts {
        Timeouts {
            attempts: attempts.map_or(self.attempts, |n| self.attempts.min(n.max(1))),
            ..self
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

/// How many events that show nothing `open` holds before it hands the
/// stream on (a server that sends only those is read as it comes).
const HELD_BLANK_EVENTS: usize = 16;

/// The log target of the retry lines, which are also told to the user
/// (`spindle exec` leaves them out of its stderr log for that reason).
pub(crate) const RETRY_LOG: &str = "spindle::retry";

/// The log target of a model call's final failure, which the turn's
/// answer also tells (`spindle exec` prints that answer once, so its
/// stderr log leaves these lines out).
pub(crate) const FAILED_CALL_LOG: &str = "spindle::call_failed";

/// The longest server-requested delay we honour before a retry.
const MAX_SERVER_DELAY: Duration = Duration::from_secs(60);

/// How many stall times a server may take to its first event while it
/// sends keep-alives (20 minutes with the default 120 s).
const FIRST_EVENT_STALLS: u32 = 10;

/// An SSE stream being read by a helper thread.
pub(crate) struct EventStream {
    items: Receiver<StreamItem>,
    agent: ureq::Agent,
    stall: Duration,
    url: String,
    /// The first items, read by `open` to decide about a retry: events
    /// that show nothing yet, and the first that does.
    peeked: RefCell<std::collections::VecDeque<StreamItem>>,
    /// Events that came together (`StreamItem::Events`), not yet taken.
    read: RefCell<Events>,
    /// The last event's data buffer, given back (`recycle`) for the next.
    spare: RefCell<String>,
    /// When the stream last gave something real (an event, or its start):
    /// keep-alive comments show the server lives but not that it makes
    /// progress, so they do not move the stall deadline — except before
    /// the first event, while a server reads a long prompt (a local one
    /// on a CPU may take minutes and sends keep-alives meanwhile), up to
    /// `FIRST_EVENT_STALLS` stall times from the start.
    progress: std::cell::Cell<std::time::Instant>,
    started: std::time::Instant,
    /// Bytes of event data received so far, against `limits.stream`: a
    /// server that streams events nobody keeps is given up on too.
    received: std::cell::Cell<usize>,
    limits: StreamLimits,
    /// Event data read by the helper thread and not taken here yet.
    in_flight: Arc<InFlight>,
    /// Tells the helper thread that data was taken (it waits when too much
    /// is in flight); dropped with the stream, which ends the helper.
    taken: Sender<()>,
    /// The cost the response's headers reported (`COST_HEADER`), set by
    /// the helper thread before it sends the first item.
    header_cost: Arc<std::sync::OnceLock<f64>>,
}

/// The response header in which a gateway (LiteLLM) reports what the
/// call cost, in USD.
pub(crate) const COST_HEADER: &str = "x-litellm-response-cost";

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
/// before the first model call or model list (a static: the setting is too).
pub(crate) fn map_large_buffers() {
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
pub(crate) trait WireState {
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

    fn retrying(&mut self, text: &str, until_ms: i64) {
        if self.admit(true, text) {
            self.sink.retrying(text, until_ms);
        }
    }

    fn more_waiting(&mut self, more: bool) {
        self.sink.more_waiting(more);
    }
}

/// What waiting for the next item gave.
pub(crate) enum Next {
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
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn open(
        url: &str,
        trust: &crate::net::Trust,
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
            let stream =
                EventStream::post(url, trust, headers, body.clone(), timeouts, cancel, whole)?;
            let error = loop {
                match stream.receive(cancel) {
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
                    // Events that show nothing yet (a role, a start, an
                    // empty delta) are held: an error after them is still
                    // an error before any output, and retried as such.
                    Next::Item(StreamItem::Event(event))
                        if stream.peeked.borrow().len() < HELD_BLANK_EVENTS
                            && errors::shows_nothing(&event.data) =>
                    {
                        stream
                            .peeked
                            .borrow_mut()
                            .push_back(StreamItem::Event(event));
                    }
                    Next::Item(first) => {
                        stream.peeked.borrow_mut().push_back(first);
                        return Ok(stream);
                    }
                }
            };
            if cancel.is_cancelled() {
                return Err(StreamError::Cancelled);
            }
            let delay = error.retry_after.unwrap_or_else(|| backoff(attempt));
            let waited = started.elapsed();
            // Behind a gateway that already retried upstream, one retry of
            // ours at most: its retries and ours multiply.
            let attempts = match error.upstream_retried {
                true => timeouts.attempts.min(2),
                false => timeouts.attempts,
            };
            if !error.retryable
                || attempt >= attempts
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
            log::warn!(target: RETRY_LOG, "{note}");
            let until = crate::clock::now_ms()
                .saturating_add(i64::try_from(delay.as_millis()).unwrap_or(i64::MAX));
            sink.retrying(&format!("\n{note}\n"), until);
            if cancel.sleep(delay) {
                return Err(StreamError::Cancelled);
            }
        }
    }

    /// Starts the POST on a helper thread and returns at once.
    pub(crate) fn post(
        url: &str,
        trust: &crate::net::Trust,
        headers: &[(&str, String)],
        body: String,
        timeouts: Timeouts,
        cancel: &CancelToken,
        whole: WholeAnswer,
    ) -> Result<EventStream, ProviderError> {
        map_large_buffers();
        let config = agent_config(url, trust)
            .http_status_as_error(false)
            .timeout_connect(Some(timeouts.connect))
            .build();
        let agent = crate::net::agent(url, config);
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
        // and still lets a slow consumer push back on the server; the
        // events and bytes in it are counted (`InFlight`), the rest of its
        // room is for the few other items (keep-alives, the end).
        let (sender, items) = crossbeam_channel::bounded(IN_FLIGHT_EVENTS + 64);
        let (taken, wake) = crossbeam_channel::bounded(1);
        let in_flight = Arc::new(InFlight::default());
        let header_cost = Arc::new(std::sync::OnceLock::new());
        let cost_slot = header_cost.clone();
        let url_owned = url.to_string();
        let flow = Flow::new(sender, in_flight.clone(), wake);
        // Detached: it ends when the server's answer is read or refused;
        // cancel shuts the agent's connections down (above), so the turn
        // never waits on it.
        std::thread::Builder::new()
            .name("spindle-http".into())
            .spawn(move || {
                let result = request.send(body);
                let item = match result {
                    Err(err) => StreamItem::Failed(connect_error(&url_owned, err)),
                    Ok(response) => {
                        let status = response.status().as_u16();
                        if let Some(cost) = cost_of_headers(response.headers()) {
                            let _ = cost_slot.set(cost);
                        }
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
                let _ = flow.send(item);
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
            peeked: RefCell::new(std::collections::VecDeque::new()),
            read: RefCell::new(Events::default()),
            spare: RefCell::new(String::new()),
            progress: std::cell::Cell::new(std::time::Instant::now()),
            started: std::time::Instant::now(),
            received: std::cell::Cell::new(0),
            header_cost,
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
    pub(crate) fn drive(
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
        let result = self.drive_held(cancel, &mut held, state);
        held.sink.more_waiting(false);
        result
    }

    fn drive_held(
        &self,
        cancel: &CancelToken,
        held: &mut Held<'_>,
        state: &mut dyn WireState,
    ) -> Result<Outcome, StreamError> {
        let cap = self.limits.response;
        loop {
            let more = !self.peeked.borrow().is_empty()
                || !self.read.borrow().is_empty()
                || !self.items.is_empty();
            held.sink.more_waiting(more);
            let item = match self.next(cancel) {
                Next::Cancelled => return Err(StreamError::Cancelled),
                Next::Item(item) => item,
            };
            match item {
                StreamItem::Event(event) => {
                    let outcome = state.handle(&event, held)?;
                    self.recycle(event);
                    if held.over || held.bytes + state.held() > cap {
                        self.agent.clone().shutdown();
                        return Err(response_too_large(cap, " of text and tool calls").into());
                    }
                    if let Some(outcome) = outcome {
                        return Ok(self.with_header_cost(outcome));
                    }
                }
                StreamItem::Alive => {}
                // Taken apart by `receive`; never here, but kept in order
                // should it be.
                StreamItem::Events(events) => self.read.borrow_mut().append(events),
                StreamItem::End => {
                    return state
                        .end()
                        .map(|o| self.with_header_cost(o))
                        .ok_or_else(|| {
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

    /// The outcome with the headers' cost when the stream reported none:
    /// the stream's own figure is the call's, the header the fallback.
    fn with_header_cost(&self, mut outcome: Outcome) -> Outcome {
        if outcome.cost.is_none() {
            outcome.cost = self.header_cost.get().copied();
        }
        outcome
    }

    /// Waits for the next item, a cancel, or the stall timeout (which shuts
    /// the connection and reports `provider_stalled`).
    pub(crate) fn next(&self, cancel: &CancelToken) -> Next {
        if let Some(item) = self.peeked.borrow_mut().pop_front() {
            return Next::Item(item);
        }
        self.receive(cancel)
    }

    /// `next` from the connection itself, past the items `open` holds.
    fn receive(&self, cancel: &CancelToken) -> Next {
        // An item already waiting is taken without the select's set-up;
        // a cancel still wins at once.
        if !cancel.is_cancelled() {
            if let Some(event) = self.take_read() {
                return Next::Item(StreamItem::Event(event));
            }
            if let Ok(item) = self.items.try_recv() {
                return self.received_item(item);
            }
        }
        let deadline = self.progress.get() + self.stall;
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        select! {
            recv(self.items) -> item => match item {
                Ok(item) => self.received_item(item),
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

    /// Accounts for an item read from the connection: progress (for the
    /// stall timeout), the bytes in flight, the stream's cap.
    fn received_item(&self, item: StreamItem) -> Next {
        let now = std::time::Instant::now();
        let reading_prompt = self.received.get() == 0
            && now.duration_since(self.started) < self.stall * FIRST_EVENT_STALLS;
        if !matches!(item, StreamItem::Alive) || reading_prompt {
            self.progress.set(now);
        }
        let first = match item {
            StreamItem::Event(event) => {
                self.account_bytes(event.data.len(), 1);
                event
            }
            StreamItem::Events(events) => {
                self.account_bytes(events.bytes(), events.len());
                self.read.borrow_mut().append(events);
                let Some(first) = self.take_read() else {
                    return Next::Item(StreamItem::Alive);
                };
                first
            }
            item => return Next::Item(item),
        };
        if self.received.get() > self.limits.stream {
            self.agent.clone().shutdown();
            return Next::Item(StreamItem::Failed(response_too_large(
                self.limits.stream,
                " of events",
            )));
        }
        Next::Item(StreamItem::Event(first))
    }

    /// The next of the events read together, in the spare buffer.
    fn take_read(&self) -> Option<SseEvent> {
        let spare = std::mem::take(&mut *self.spare.borrow_mut());
        self.read.borrow_mut().take(spare)
    }

    /// Gives an event's data buffer back for the next event.
    fn recycle(&self, event: SseEvent) {
        if event.data.capacity() <= super::sse::RECYCLED {
            *self.spare.borrow_mut() = event.data;
        }
    }

    /// Counts events taken: the data received, and the room they free
    /// (waking the helper when it is half free).
    fn account_bytes(&self, bytes: usize, count: usize) {
        self.received.set(self.received.get() + bytes);
        if self.in_flight.taken(bytes, count) {
            let _ = self.taken.try_send(());
        }
    }
}

/// The cost a response's headers report (`COST_HEADER`), when it is
/// believable.
fn cost_of_headers(headers: &ureq::http::HeaderMap) -> Option<f64> {
    let value = headers.get(COST_HEADER)?.to_str().ok()?;
    super::reported_cost(&serde_json::Value::String(value.into()))
}

impl Drop for EventStream {
    fn drop(&mut self) {
        // Whatever ended the call, the connection goes with it: the helper
        // thread wakes and exits instead of reading a stream nobody wants.
        self.agent.clone().shutdown();
    }
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
}

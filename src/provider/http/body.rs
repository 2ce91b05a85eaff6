//! The helper thread's side of a call: the response body read into stream
//! items (an SSE stream line by line within the line and event caps, or a
//! whole JSON answer), sent on only while little enough data is in flight.

use super::errors::error_value;
use super::stream::{response_too_large, Events, StreamItem, StreamLimits, WholeAnswer};
use crate::provider::sse::{Line, SseEvent, SseParser};
use crate::provider::ProviderError;
use crossbeam_channel::{Receiver, Sender};
use std::cell::RefCell;
use std::io::{BufRead, BufReader, Read};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// The most event data waiting between the helper thread and the turn: a
/// slow turn (a client that reads slowly) makes the helper wait instead of
/// reading ahead, whatever the size of the events.
const IN_FLIGHT_BYTES: usize = 1024 * 1024;
/// The most events waiting between them.
pub(super) const IN_FLIGHT_EVENTS: usize = 1024;

/// What waits between the helper thread and the turn. A helper that found
/// no room is woken only once half of it is free, not for each event the
/// turn takes: a fast server and a busy turn then meet once per hundred
/// events instead of trading every one (a wake-up each way).
#[derive(Default)]
pub(super) struct InFlight {
    bytes: AtomicUsize,
    events: AtomicUsize,
}

impl InFlight {
    /// Whether an event of `size` may join `pending` (bytes, events)
    /// not yet counted: an event alone goes whatever its size.
    fn has_room(&self, pending: (usize, usize), size: usize) -> bool {
        let bytes = self.bytes.load(Ordering::SeqCst) + pending.0;
        (bytes == 0 || bytes + size <= IN_FLIGHT_BYTES)
            && self.events.load(Ordering::SeqCst) + pending.1 < IN_FLIGHT_EVENTS
    }

    /// Counts `events` events of `bytes` in all as sent (once a batch).
    fn add(&self, bytes: usize, events: usize) {
        self.bytes.fetch_add(bytes, Ordering::SeqCst);
        self.events.fetch_add(events, Ordering::SeqCst);
    }

    /// The turn took `events` events of `bytes` in all: whether to wake a
    /// waiting helper (half the room is free, in events and in bytes;
    /// with nothing left in flight it always is).
    pub(super) fn taken(&self, bytes: usize, events: usize) -> bool {
        let bytes = self.bytes.fetch_sub(bytes, Ordering::SeqCst) - bytes;
        let events = self.events.fetch_sub(events, Ordering::SeqCst) - events;
        bytes <= IN_FLIGHT_BYTES / 2 && events <= IN_FLIGHT_EVENTS / 2
    }
}

pub(super) fn is_json(headers: &ureq::http::HeaderMap) -> bool {
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
/// little enough data is in flight, and together: those read from one
/// buffer of the socket go as one item (`flush`), so the turn is woken
/// once for them, not once an event.
pub(super) struct Flow {
    pub(super) sender: Sender<StreamItem>,
    pub(super) in_flight: Arc<InFlight>,
    pub(super) wake: Receiver<()>,
    pub(super) batch: RefCell<Batch>,
}

/// Events read but not yet sent: counted in flight when they go, one
/// count a batch rather than one an event (the counts are shared with the
/// turn's thread).
type Batch = Events;

/// The most events sent as one item.
const BATCH_EVENTS: usize = 64;

impl Flow {
    pub(super) fn new(
        sender: Sender<StreamItem>,
        in_flight: Arc<InFlight>,
        wake: Receiver<()>,
    ) -> Flow {
        Flow {
            sender,
            in_flight,
            wake,
            batch: RefCell::new(Batch::default()),
        }
    }

    /// Sends an item: an event goes by `send_event`, anything else after
    /// the batch. False once the stream is gone.
    pub(super) fn send(&self, item: StreamItem) -> bool {
        match item {
            StreamItem::Event(event) => self.send_event(&event),
            item => self.flush() && self.sender.send(item).is_ok(),
        }
    }

    /// Adds an event to the batch once there is room in flight
    /// (`InFlight`; what is batched goes first while it waits). False once
    /// the stream is gone.
    pub(super) fn send_event(&self, event: &SseEvent) -> bool {
        let size = event.data.len();
        let pending = {
            let batch = self.batch.borrow();
            (batch.bytes(), batch.len())
        };
        if !self.in_flight.has_room(pending, size) {
            if !self.flush() {
                return false;
            }
            while !self.in_flight.has_room((0, 0), size) {
                if self.wake.recv().is_err() {
                    return false;
                }
            }
        }
        let full = {
            let mut batch = self.batch.borrow_mut();
            batch.push(event);
            batch.len() >= BATCH_EVENTS
        };
        !full || self.flush()
    }

    /// Sends the batched events, if any: before the reader may wait for
    /// the socket, and before any other item. False once the stream is
    /// gone.
    pub(super) fn flush(&self) -> bool {
        let batch = std::mem::take(&mut *self.batch.borrow_mut());
        if batch.is_empty() {
            return true;
        }
        self.in_flight.add(batch.bytes(), batch.len());
        self.sender.send(StreamItem::Events(batch)).is_ok()
    }
}

/// Reads a complete JSON answer (at most `limits.event` bytes: it stands
/// for the events of a stream) and sends the events it stands for.
pub(super) fn read_whole(
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
        if !flow.send_event(&SseEvent { event: None, data }) {
            return StreamItem::End;
        }
    }
    StreamItem::End
}

/// Line buffers that grew past this are given back after their line.
const LINE_KEPT: usize = 64 * 1024;

pub(super) fn read_events<R: Read>(reader: R, flow: &Flow, limits: StreamLimits) -> StreamItem {
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
        // What was read so far goes before the reader may wait for more.
        if reader.buffer().is_empty() && !flow.flush() {
            return StreamItem::End;
        }
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
                Line::Event(event) => {
                    if !flow.send_event(&event) {
                        return StreamItem::End;
                    }
                    // Its buffer holds the next event's data.
                    parser.recycle(event.data);
                    continue;
                }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_helper_waits_while_a_megabyte_is_in_flight() {
        let (sender, items) = crossbeam_channel::bounded(256);
        let (taken, wake) = crossbeam_channel::bounded(1);
        let flow = Flow::new(sender, Arc::new(InFlight::default()), wake);
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
        // The two went together before it waited.
        assert_eq!(items.len(), 1);
        let sent = items.try_recv().unwrap();
        assert!(matches!(&sent, StreamItem::Events(events) if events.len() == 2));
        assert_eq!(
            flow.in_flight.events.load(Ordering::SeqCst),
            2,
            "counted as sent"
        );
        assert_eq!(
            flow.in_flight.bytes.load(Ordering::SeqCst),
            IN_FLIGHT_BYTES * 3 / 4
        );
    }

    #[test]
    fn a_waiting_helper_is_woken_once_half_the_room_is_free() {
        let in_flight = InFlight::default();
        for _ in 0..IN_FLIGHT_EVENTS {
            assert!(in_flight.has_room((0, 0), 10));
            in_flight.add(10, 1);
        }
        assert!(
            !in_flight.has_room((0, 0), 10),
            "full at {IN_FLIGHT_EVENTS} events"
        );
        let wakes = (0..IN_FLIGHT_EVENTS)
            .map(|_| in_flight.taken(10, 1))
            .collect::<Vec<bool>>();
        let first = wakes.iter().position(|wake| *wake);
        assert_eq!(first, Some(IN_FLIGHT_EVENTS / 2 - 1));
        assert!(wakes[IN_FLIGHT_EVENTS / 2..].iter().all(|wake| *wake));
        // Large events: woken once half the bytes are free.
        let big = IN_FLIGHT_BYTES / 4;
        in_flight.add(4 * big, 4);
        assert!(!in_flight.has_room((0, 0), 1));
        assert!(!in_flight.taken(big, 1));
        assert!(in_flight.taken(big, 1));
        // What is batched counts too.
        in_flight.taken(2 * big, 2);
        assert!(in_flight.has_room((3 * big, 1), big));
        assert!(!in_flight.has_room((3 * big, 1), big + 1));
        assert!(!in_flight.has_room((0, IN_FLIGHT_EVENTS), 1));
    }
}

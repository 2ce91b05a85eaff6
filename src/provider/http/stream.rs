//! What a model stream's reader and its consumer share: the size limits,
//! the items the reader thread reports, and the error past a cap.

use crate::provider::sse::SseEvent;
use crate::provider::ProviderError;

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
            line: crate::provider::sse::LINE_CAP,
            event: crate::provider::sse::EVENT_CAP,
            response: RESPONSE_CAP,
            stream: STREAM_CAP,
        }
    }
}

/// The most one model response may make the agent hold (`limits.response`),
/// counted as JSON text. Far above what any model writes in one answer,
/// and low enough that the copies the agent makes of a response (the
/// message, the transcript, the lines to the editor and the store) keep
/// the whole process within 64 MiB.
pub(crate) const RESPONSE_CAP: usize = 4 * 1024 * 1024;

/// The most event data one model response may send (`limits.stream`).
pub(crate) const STREAM_CAP: usize = 256 * 1024 * 1024;

/// Turns a complete, non-streamed JSON answer (from a server that ignored
/// `stream: true`) into the data of the events its wire format would have
/// streamed, so the provider's own state machine reads it unchanged.
pub(crate) type WholeAnswer = fn(&serde_json::Value) -> Vec<String>;

/// What the helper thread reports.
#[derive(Debug)]
pub(crate) enum StreamItem {
    Event(SseEvent),
    /// Events read together, sent at once (`Flow::flush`); the consumer
    /// takes them one by one, so only the channel carries this.
    Events(Events),
    /// A comment line: no data, but the stream is alive.
    Alive,
    /// The body ended cleanly.
    End,
    Failed(ProviderError),
}

/// The error of a response past its cap.
pub(crate) fn response_too_large(cap: usize, what: &str) -> ProviderError {
    ProviderError::new(
        "provider_response_too_large",
        format!("the model's response passed {cap} bytes{what}; it was cut off"),
    )
}

/// Events read together: their data one after another in one buffer, so
/// a batch costs two allocations, not two an event (made on one thread,
/// freed on another).
#[derive(Debug, Default)]
pub(crate) struct Events {
    text: String,
    /// Where each event's data ends in `text`, and its `event:` name.
    ends: Vec<(usize, Option<String>)>,
    /// The next event to take, and where its data starts.
    next: usize,
    start: usize,
}

impl Events {
    pub(crate) fn push(&mut self, event: &SseEvent) {
        self.text.push_str(&event.data);
        self.ends.push((self.text.len(), event.event.clone()));
    }

    /// Events not taken yet.
    pub(crate) fn len(&self) -> usize {
        self.ends.len() - self.next
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The data bytes of the events not taken yet.
    pub(crate) fn bytes(&self) -> usize {
        self.text.len() - self.start
    }

    /// Takes the next event, its data written into `data` (cleared first:
    /// a buffer given back by the last event's reader).
    pub(crate) fn take(&mut self, mut data: String) -> Option<SseEvent> {
        let (end, name) = self.ends.get_mut(self.next)?;
        data.clear();
        data.push_str(&self.text[self.start..*end]);
        let event = name.take();
        self.start = *end;
        self.next += 1;
        Some(SseEvent { event, data })
    }

    /// Adds the events of `more` not taken yet after these.
    pub(crate) fn append(&mut self, mut more: Events) {
        if self.is_empty() {
            *self = more;
            return;
        }
        let base = self.text.len() - more.start;
        self.text.push_str(&more.text[more.start..]);
        let rest = more.ends.drain(more.next..);
        self.ends.extend(rest.map(|(end, name)| (end + base, name)));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(name: Option<&str>, data: &str) -> SseEvent {
        SseEvent {
            event: name.map(str::to_string),
            data: data.to_string(),
        }
    }

    #[test]
    fn events_read_together_come_out_one_by_one_in_order() {
        let mut first = Events::default();
        first.push(&event(None, "a"));
        first.push(&event(Some("delta"), "bc"));
        first.push(&event(None, ""));
        assert_eq!((first.len(), first.bytes()), (3, 3));
        let taken = first.take(String::from("left over")).unwrap();
        assert_eq!(taken, event(None, "a"));
        assert_eq!((first.len(), first.bytes()), (2, 2));
        let mut second = Events::default();
        second.push(&event(None, "d"));
        first.append(second);
        let mut rest = Vec::new();
        while let Some(event) = first.take(String::new()) {
            rest.push(event);
        }
        assert_eq!(
            rest,
            [
                event(Some("delta"), "bc"),
                event(None, ""),
                event(None, "d")
            ]
        );
        assert!(first.is_empty());
        assert_eq!(first.bytes(), 0);
        // Appended to an empty one, a batch is taken over whole.
        let mut third = Events::default();
        third.push(&event(None, "e"));
        first.append(third);
        assert_eq!(first.take(String::new()), Some(event(None, "e")));
    }
}

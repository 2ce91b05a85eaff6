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
    Events(Vec<SseEvent>),
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

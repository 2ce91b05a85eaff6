//! The turn worker: runs one prompt turn on its own thread. It calls the
//! model, streams what comes back to the writer as `session/update`s, and
//! finally hands its result to the dispatcher, which answers the prompt.
//!
//! The worker never touches session state: it works on a snapshot of the
//! conversation and returns what the turn added.

use super::Event;
use crate::acp::{self, ContentBlock, SessionUpdate, StopReason};
use crate::cancel::CancelToken;
use crate::provider::{Finish, Message, ModelRequest, Provider, Sink, StreamError, Usage};
use crate::rpc::stdio::Output;
use crate::rpc::{RequestId, RpcError};
use crossbeam_channel::Sender;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;
use std::thread::JoinHandle;

/// Everything a turn needs, handed over by the dispatcher.
pub struct Turn {
    pub session_id: String,
    pub request_id: RequestId,
    pub system: String,
    /// The conversation so far, ending with this turn's user message.
    pub messages: Vec<Message>,
    pub provider: Arc<dyn Provider>,
    pub cancel: CancelToken,
    pub writer: Sender<Output>,
}

/// What a finished turn reports to the dispatcher.
#[derive(Debug)]
pub struct TurnEnd {
    pub session_id: String,
    pub request_id: RequestId,
    pub result: Result<StopReason, RpcError>,
    /// Messages the turn adds to the conversation (the assistant's answer,
    /// partial when the turn was cancelled or failed mid-stream).
    pub added: Vec<Message>,
    pub usage: Option<Usage>,
}

pub fn spawn(turn: Turn, events: Sender<Event>) -> std::io::Result<JoinHandle<()>> {
    std::thread::Builder::new()
        .name(format!("spindle-turn-{}", turn.session_id))
        .spawn(move || {
            let mut stream = UpdateSink::new(&turn);
            let outcome = catch_unwind(AssertUnwindSafe(|| run(&turn, &mut stream)));
            let (result, usage) = match outcome {
                Ok(done) => done,
                Err(panic) => {
                    let what = panic
                        .downcast_ref::<String>()
                        .map(String::as_str)
                        .or_else(|| panic.downcast_ref::<&str>().copied())
                        .unwrap_or("unknown cause");
                    log::error!("turn in session {} panicked: {what}", turn.session_id);
                    (
                        Err(RpcError::internal(format!("the turn failed: {what}"))
                            .with_data(serde_json::json!({ "code": "internal_panic" }))),
                        None,
                    )
                }
            };
            let added = stream.finish();
            let _ = events.send(Event::TurnEnded(TurnEnd {
                session_id: turn.session_id,
                request_id: turn.request_id,
                result,
                added,
                usage,
            }));
        })
}

fn run(turn: &Turn, sink: &mut UpdateSink) -> (Result<StopReason, RpcError>, Option<Usage>) {
    let request = ModelRequest {
        session_id: &turn.session_id,
        system: &turn.system,
        messages: &turn.messages,
    };
    match turn.provider.stream(&request, sink, &turn.cancel) {
        Ok(outcome) => {
            let stop = match outcome.finish {
                Finish::EndTurn => StopReason::EndTurn,
                Finish::MaxTokens => StopReason::MaxTokens,
                Finish::Refusal => StopReason::Refusal,
            };
            if turn.cancel.is_cancelled() {
                (Ok(StopReason::Cancelled), outcome.usage)
            } else {
                (Ok(stop), outcome.usage)
            }
        }
        Err(StreamError::Cancelled) => (Ok(StopReason::Cancelled), None),
        Err(StreamError::Failed(_)) if turn.cancel.is_cancelled() => {
            (Ok(StopReason::Cancelled), None)
        }
        Err(StreamError::Failed(error)) => {
            log::warn!("model call failed in session {}: {error}", turn.session_id);
            (
                Err(RpcError::internal(error.message.clone()).with_data(error.data())),
                None,
            )
        }
    }
}

/// Turns provider deltas into `session/update` lines and keeps the whole
/// text, so the turn can return the (possibly partial) answer.
struct UpdateSink {
    session_id: String,
    writer: Sender<Output>,
    cancel: CancelToken,
    message_id: String,
    thought_id: String,
    text: String,
    thought: String,
}

impl UpdateSink {
    fn new(turn: &Turn) -> UpdateSink {
        let id = crate::util::random_hex();
        UpdateSink {
            session_id: turn.session_id.clone(),
            writer: turn.writer.clone(),
            cancel: turn.cancel.clone(),
            message_id: format!("msg_{id}"),
            thought_id: format!("thought_{id}"),
            text: String::new(),
            thought: String::new(),
        }
    }

    fn send(&self, update: SessionUpdate) {
        let _ = self
            .writer
            .send(Output::Line(acp::update_line(&self.session_id, update)));
    }

    fn finish(self) -> Vec<Message> {
        if self.text.is_empty() && self.thought.is_empty() {
            Vec::new()
        } else {
            vec![Message::assistant(self.text, self.thought)]
        }
    }
}

impl Sink for UpdateSink {
    fn text(&mut self, delta: &str) {
        // After a cancel the client gets nothing more of this turn.
        if self.cancel.is_cancelled() {
            return;
        }
        self.text.push_str(delta);
        self.send(SessionUpdate::AgentMessageChunk {
            content: ContentBlock::text(delta),
            message_id: Some(self.message_id.clone()),
        });
    }

    fn thought(&mut self, delta: &str) {
        if self.cancel.is_cancelled() {
            return;
        }
        self.thought.push_str(delta);
        self.send(SessionUpdate::AgentThoughtChunk {
            content: ContentBlock::text(delta),
            message_id: Some(self.thought_id.clone()),
        });
    }
}

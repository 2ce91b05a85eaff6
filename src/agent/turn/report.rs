//! What a turn tells the dispatcher: that it ended (and what it added), or
//! that it needs the client. The turn posts these through its `Outbox`, so
//! it never names the dispatcher's own types.

use crate::acp::StopReason;
use crate::agent::common::permission::Approvals;
use crate::provider::{Message, Usage};
use crate::rpc::{RequestId, RpcError};
use crossbeam_channel::Sender;
use serde_json::Value;
use std::sync::Arc;

/// A report of a turn to the dispatcher.
#[derive(Debug)]
pub(crate) enum Report {
    /// The turn ended; its prompt can be answered.
    Ended(Box<TurnEnd>),
    /// The turn needs the client (permission, files, terminals).
    Request(OutgoingRequest),
    /// A goal reached a continuation boundary (committed already).
    GoalProgress {
        session_id: String,
        goal: Box<crate::agent::common::goal::Goal>,
    },
    /// The user approved the plan (`exit_plan`): the session leaves plan
    /// mode for normal mode with this approval policy.
    ModeChanged {
        session_id: String,
        policy: crate::modes::Policy,
    },
}

/// Where a turn posts its reports; false when nobody listens any more.
pub(crate) type Outbox = Arc<dyn Fn(Report) -> bool + Send + Sync>;

/// What a finished turn reports to the dispatcher.
#[derive(Debug)]
pub(crate) struct TurnEnd {
    pub session_id: String,
    /// The prompt to answer (`None`: a turn the agent started itself).
    pub request_id: Option<RequestId>,
    pub result: Result<StopReason, RpcError>,
    /// Messages the turn adds to the conversation: assistant messages (the
    /// last one partial when the turn was cancelled or failed mid-stream)
    /// and tool results.
    pub added: Vec<Message>,
    pub usage: Usage,
    /// The model answered but never said what it used: the counts are
    /// unknown, not zero.
    pub usage_unknown: bool,
    /// Every model call of the turn said what it used: the counts are the
    /// turn's whole usage, not a part of it.
    pub usage_whole: bool,
    /// The turn's model calls that said nothing of what they used.
    pub usage_unreported: usize,
    /// The conversation's size as the provider last reported it.
    pub known: Option<Known>,
    /// The window a server named when it refused a request as too long
    /// (smaller than the configured one).
    pub window: Option<u64>,
    /// Inbox items applied during the turn (steers at boundaries).
    pub applied: Vec<String>,
    /// The inbox item the turn dispatched, if it was one.
    pub dispatched: Option<String>,
    /// The goal as the turn left it.
    pub goal: Option<crate::agent::common::goal::Goal>,
    /// Model calls made.
    pub model_calls: usize,
    /// The session's remembered approvals, with this turn's answers.
    pub approvals: Approvals,
    /// What this turn's model calls cost, as far as it is known.
    pub spend: crate::agent::common::spend::Spend,
    /// The conversation's replacement, when the turn compacted it.
    pub replaced: Option<Vec<Message>>,
}

/// A request on its way to the client, with where its answer goes.
#[derive(Debug)]
pub(crate) struct OutgoingRequest {
    pub session_id: String,
    pub method: &'static str,
    pub params: Value,
    pub reply: Sender<Result<Value, RpcError>>,
    /// Not the turn's: kept when the turn ends (a job in the editor's
    /// terminal polls its output across turns).
    pub lasting: bool,
}

/// The last size the provider reported: `tokens` for a conversation of
/// `bytes` (estimate bytes, as the turn counts them), its answer included.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Known {
    pub tokens: u64,
    pub bytes: u64,
}

/// Which way `/undo`, `/rewind` and `/redo` move the files.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Rewind {
    /// Back before the last `n` turns that changed files.
    Undo(usize),
    /// Forward again: the turn the last undo took back.
    Redo,
}

/// How the model provider answers in the current turn (status's
/// `health.provider`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) enum Health {
    /// Answering, or not asked yet.
    #[default]
    Ok,
    /// An answer failed and the request is being retried.
    Retrying,
    /// The last request failed for good.
    Failing,
    /// Waiting for the provider's limit to reset (`Live::waiting_until`).
    Waiting,
}

impl Health {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Health::Ok => "ok",
            Health::Retrying => "retrying",
            Health::Failing => "failing",
            Health::Waiting => "waiting",
        }
    }
}

/// What a running turn publishes for the dispatcher to read at any time
/// (status answers without waiting for the turn), and the steers the
/// dispatcher hands it. One per session; the dispatcher owns it, the turn
/// only fills in its progress and takes steers.
#[derive(Debug, Default)]
pub(crate) struct Live {
    /// Steers waiting for the next safe boundary: (item id, the user's
    /// text, its blocks as sent).
    pub steers: std::collections::VecDeque<(String, String, Vec<Value>)>,
    /// The last plan (`todo_write` entries).
    pub plan: Value,
    /// The model provider's health in the current turn, with the last
    /// problem.
    pub health: Health,
    pub health_error: Option<String>,
    /// When the provider's limit resets, while the turn waits for it.
    pub waiting_until: Option<String>,
    /// The agent is stopping (its input ended, or a signal): a turn that
    /// waits for a limit keeps its wait for the next process.
    pub shutting_down: bool,
    /// The running goal as the turn last committed it.
    pub goal: Option<Value>,
    /// The user asked the goal to pause at its next boundary.
    pub goal_pause: bool,
    /// The running turn's tokens and cost so far (after each model call
    /// that reported usage, and each subagent it ran); the dispatcher adds
    /// them to the session's when the turn ends, and zeroes them then.
    pub usage: crate::provider::Usage,
    pub spend: crate::agent::common::spend::Spend,
    /// The subagents running in the turn, each with a child session: a
    /// `session/cancel` of the child stops only its work.
    pub children: Children,
}

/// Running subagents' child session keys and their cancels.
#[derive(Default)]
pub(crate) struct Children(pub Vec<(String, crate::cancel::CancelToken)>);

impl std::fmt::Debug for Children {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let keys: Vec<&String> = self.0.iter().map(|(key, _)| key).collect();
        f.debug_tuple("Children").field(&keys).finish()
    }
}

/// The handle both sides hold.
pub(crate) type SharedLive = Arc<std::sync::Mutex<Live>>;

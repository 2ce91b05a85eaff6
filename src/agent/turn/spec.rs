//! What the dispatcher hands a turn worker, in named parts grouped by
//! what reads them: whom it answers and how it talks to the client
//! ([`Io`]); the model it calls ([`Model`]), the room in its window
//! ([`Window`]), how many steps it may take ([`Steps`]) and what it does
//! when the model is limited ([`OnLimit`]); what the model may do
//! ([`Rights`]); where its tools work ([`Workspace`]); and what it starts
//! from: its kind and the session's cost ([`Start`]), the conversation
//! ([`Conversation`]), what is recorded and shown first ([`Opening`]) and
//! the goal ([`TurnGoal`]).

use super::client::Client;
use super::processes::Processes;
use super::report::{Rewind, SharedLive};
use crate::agent::common::goal::Goal;
use crate::agent::common::permission::{Approvals, Policy};
use crate::cancel::CancelToken;
use crate::config::Price;
use crate::provider::{Message, Provider};
use crate::rpc::stdio::Queued;
use crate::rpc::RequestId;
use crossbeam_channel::Sender;
use serde_json::Value;
use std::path::PathBuf;
use std::sync::Arc;

/// What a turn does.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum TurnKind {
    /// The model/tool loop.
    Model,
    /// Spindle answers by itself (a slash command such as /help); the
    /// conversation is untouched.
    Local(String),
    /// The model summarises the conversation, which is then replaced by
    /// the summary (`/compact`, with what to focus on).
    Compact(String),
    /// `/undo`, `/rewind N`, `/redo`: files put back from checkpoints.
    Rewind(Rewind),
}

/// Everything a turn needs, handed over by the dispatcher.
#[derive(Clone)]
pub(crate) struct Turn {
    pub io: Io,
    pub model: Model,
    pub window: Window,
    pub steps: Steps,
    pub on_limit: OnLimit,
    pub rights: Rights,
    pub workspace: Workspace,
    pub start: Start,
    pub conversation: Conversation,
    pub opening: Opening,
    pub goal: TurnGoal,
}

/// Whom the turn answers, and how it talks to the client.
#[derive(Clone)]
pub(crate) struct Io {
    pub session_id: String,
    /// The prompt request to answer; `None` for a turn the agent started
    /// itself (an inbox follow-up).
    pub request_id: Option<RequestId>,
    /// The inbox item this turn dispatches, marked `dispatched` with its
    /// user message.
    pub inbox_item: Option<String>,
    /// What the dispatcher reads while the turn runs, and the steers it
    /// hands over.
    pub live: SharedLive,
    pub cancel: CancelToken,
    pub writer: Sender<Queued>,
    pub client: Client,
    /// The session's turn count, this turn's.
    pub epoch: u64,
    /// The prompt's trace context, sent with every model request.
    pub trace: Option<crate::provider::trace::TraceContext>,
}

/// The model the turn calls (its requests, its cost, what it takes in).
#[derive(Clone)]
pub(crate) struct Model {
    pub provider: Arc<dyn Provider>,
    /// The model's name at its provider.
    pub name: String,
    pub effort: Option<String>,
    pub max_output_tokens: Option<u32>,
    pub price: Option<Price>,
    /// Whether the model takes images; if not, it gets a note instead.
    pub images: bool,
}

/// The room in the model's window: what compaction and the output cap
/// work with.
#[derive(Clone)]
pub(crate) struct Window {
    /// The model's context window, in tokens.
    pub tokens: u64,
    /// The share of the window past which the conversation is compacted
    /// (`None`: never automatically).
    pub compact_at: Option<f64>,
    /// Room kept for the model's answer inside the window.
    pub output_reserve: u64,
    /// The largest tool result the model gets whole.
    pub tool_output_cap: usize,
}

/// How far the loop may go: its steps, and a model repeating itself.
#[derive(Clone)]
pub(crate) struct Steps {
    /// The most model calls one turn may make.
    pub max: usize,
    /// When a model repeating itself is told and stopped.
    pub loops: crate::config::LoopSettings,
}

/// What the turn does while its model is limited (`waiting.rs`).
#[derive(Clone)]
pub(crate) struct OnLimit {
    /// Asked in turn while the model is limited (`fallback` in the
    /// config).
    pub fallbacks: Vec<Fallback>,
    /// The longest the turn waits for a limit to reset.
    pub max_wait: std::time::Duration,
}

/// What the model may do without asking, and what ends the turn.
#[derive(Clone)]
pub(crate) struct Rights {
    pub policy: Policy,
    pub approvals: Approvals,
    /// Lasting permission rules, and where project answers are saved.
    pub rules: Arc<crate::policy::rules::RuleSet>,
    /// Whether a rejected tool call ends the turn.
    pub on_reject: crate::config::OnReject,
    /// Plan mode: only read-only tools.
    pub read_only: bool,
    /// The lean profile: the core tools, with short descriptions.
    pub lean: bool,
    /// The agent file's agent: its tool allow-list and per-turn limits.
    pub agent: Option<Arc<crate::agentfile::AgentSpec>>,
    /// A subagent's own spec (a `task` naming one): its allow-list narrows
    /// the agent's further.
    pub subagent: Option<Arc<crate::agentfile::AgentSpec>>,
}

/// Where the turn's tools work, and what they share with the session.
#[derive(Clone)]
pub(crate) struct Workspace {
    pub root: PathBuf,
    /// `additionalDirectories`: more roots the tools use as the workspace.
    pub extra_roots: Vec<PathBuf>,
    /// The session's environment snapshot, for the system prompt's
    /// `{ENVIRONMENT}` mark: taken by the first turn that needs it.
    pub environment: Arc<std::sync::OnceLock<String>>,
    /// Checkpoints: their settings, and what the session's last workspace
    /// scan saw.
    pub checkpoints: crate::checkpoint::Settings,
    pub scan_cache: Arc<std::sync::Mutex<crate::checkpoint::ScanCache>>,
    /// How the session's commands start.
    pub processes: Arc<Processes>,
    /// The session's background jobs.
    pub jobs: Arc<crate::tools::jobs::Jobs>,
    /// The session's MCP servers.
    pub mcp: Option<Arc<crate::mcp::McpSession>>,
    /// The skills the system prompt lists, for the `skill` tool.
    pub skills: Arc<Vec<crate::agent::common::skills::Skill>>,
    /// The hooks in force (the user's and a trusted project's).
    pub hooks: Arc<crate::agent::common::hooks::Hooks>,
    /// The session database; the worker commits each step there.
    pub db: Option<PathBuf>,
    pub config_path: Option<PathBuf>,
    /// What `fetch_url` trusts over HTTPS: the config's.
    pub trust: crate::net::Trust,
}

/// What the turn starts from: its kind, a wait left over, and what the
/// session cost before it.
#[derive(Clone)]
pub(crate) struct Start {
    pub kind: TurnKind,
    /// The wait a stopped process left: the turn waits out the rest,
    /// then sends the conversation as it is.
    pub wait: Option<Wait>,
    /// What the session cost before this turn.
    pub spend_before: crate::agent::common::spend::Spend,
}

/// The conversation the model is sent, and what this turn adds to it.
#[derive(Clone)]
pub(crate) struct Conversation {
    pub system: String,
    /// The conversation so far, ending with this turn's user message.
    pub messages: Vec<Message>,
    /// The conversation's size as the provider last reported it.
    pub known: Option<super::context::Known>,
    /// How many of the last messages the turn's start adds to the stored
    /// conversation: the user's prompt, or the answer of an `ask_user`
    /// question that waited for it (with the calls after it, unrun).
    pub fresh: usize,
    /// Hooks added to the prompt: the conversation is written back whole.
    pub rewritten: bool,
}

/// What is recorded and shown as the turn opens, before the model is
/// asked.
#[derive(Clone)]
pub(crate) struct Opening {
    /// The session's first turn in this process (or the first after
    /// `/clear`): `SessionStart` hooks run with this source.
    pub session_start: Option<&'static str>,
    /// How the user's prompt is replayed: its blocks as sent.
    pub prompt_blocks: Vec<Value>,
    /// The id the client gave the prompt (`messageId`), if any.
    pub prompt_message_id: Option<String>,
    /// A `session_info_update` to send (and keep) first, when the session
    /// just got its title.
    pub title_update: Option<crate::acp::SessionUpdate>,
    /// Notices to show before anything else (each once per session: the
    /// policy chosen at start, the sandbox policy without a sandbox, ...).
    pub notices: Vec<crate::acp::fit::Notice>,
}

/// The goal the turn works on.
#[derive(Clone)]
pub(crate) struct TurnGoal {
    /// The session's goal, when it runs (goal mode).
    pub current: Option<Goal>,
    /// The preset asks for verification before completion.
    pub delivery: bool,
    /// Goal mode: `goal_update` is offered.
    pub mode: bool,
}

/// A model asked instead while the session's is limited.
#[derive(Clone)]
pub(crate) struct Fallback {
    /// `provider/model`, as the config names it.
    pub id: String,
    pub provider: Arc<dyn Provider>,
    /// The model's name at its provider.
    pub name: String,
    pub max_output_tokens: Option<u32>,
    pub price: Option<Price>,
}

/// A wait a turn starts with: one a stopped process left in the store.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Wait {
    pub until_ms: i64,
    /// When the turn began waiting (the longest wait counts from here).
    pub since_ms: i64,
    /// The provider's words.
    pub reason: String,
    /// The turn worked on the session's goal.
    pub goal: bool,
    /// The inbox item the turn dispatched.
    pub item: Option<String>,
}

impl Wait {
    pub(crate) fn from_json(value: &serde_json::Value) -> Option<Wait> {
        Some(Wait {
            until_ms: value["untilMs"].as_i64()?,
            since_ms: value["sinceMs"].as_i64()?,
            reason: value["reason"].as_str().unwrap_or_default().to_string(),
            goal: value["goal"].as_bool().unwrap_or(false),
            item: value["item"].as_str().map(str::to_string),
        })
    }
}

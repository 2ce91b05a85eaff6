//! What a turn accumulates, and the helpers its steps call on it: the
//! model in use (the session's, or a fallback), the usage and cost
//! counted and published, the steers taken in, the provider's health,
//! the errors a failed model call ends with, and the answers owed to
//! tool calls that never ran.

use super::context;
use super::record::Record;
use super::report::Health;
use super::spec::Turn;
use super::updates::{UpdateSink, Updates};
use crate::acp::{ContentChunk, Cost, SessionUpdate};
use crate::agent::common::permission::Approvals;
use crate::agent::common::spend::{call_cost, currency, Spend};
use crate::config::Price;
use crate::provider::{Message, Outcome, Provider, Usage};
use crate::rpc::RpcError;
use serde_json::{json, Value};
use std::cell::RefCell;
use std::sync::Arc;

/// What the turn accumulates; kept outside the unwinding code so a panic
/// loses nothing that was already said.
#[derive(Default)]
pub(super) struct State {
    pub(super) added: Vec<Message>,
    pub(super) usage: Usage,
    pub(super) approvals: Approvals,
    /// What the turn's model calls cost (its subagents' included).
    pub(super) spend: Spend,
    pub(super) replaced: Option<Vec<Message>>,
    /// Model calls that finished, and how many of them reported usage.
    pub(super) model_calls: usize,
    pub(super) usage_reports: usize,
    /// The conversation's size as last reported.
    pub(super) known: Option<context::Known>,
    /// Whether the conversation was made smaller during the turn (then it
    /// replaces the session's).
    pub(super) compacted: bool,
    /// The turn's prompt was not sent for its size: it leaves the
    /// conversation.
    pub(super) prompt_dropped: bool,
    /// Summaries asked for during the turn.
    pub(super) summaries: usize,
    /// Inbox items (steers) applied at the turn's boundaries.
    pub(super) applied: Vec<String>,
    /// The goal the turn works on, as it goes.
    pub(super) goal: Option<crate::agent::common::goal::Goal>,
    /// The window a server named when it refused a request as too long,
    /// when smaller than the configured one: compaction fits it.
    pub(super) window: Option<u64>,
    /// The fallback model the turn moved to (an index into the turn's),
    /// when the session's is limited.
    pub(super) fallback: Option<usize>,
    /// When the session's model's limit resets (ms since the epoch), and
    /// since when the turn waits for it.
    pub(super) limit_reset: Option<i64>,
    pub(super) waiting_since: Option<i64>,
    /// A wait is recorded in the store.
    pub(super) parked: bool,
    /// How many times the turn waited for a limit.
    pub(super) parks: u32,
    /// How many times a `Stop` hook sent the model back to work.
    pub(super) stop_blocks: usize,
}

/// What every step of a model turn works with: the turn, its updates,
/// what it accumulates, its record in the store, the conversation as the
/// model sees it, and the checkpoints of the files it changes. The steps
/// take it as one argument, instead of the same six each.
pub(super) struct Step<'s, 'u> {
    pub(super) turn: &'s Turn,
    pub(super) sink: &'s mut UpdateSink<'u>,
    pub(super) state: &'s mut State,
    pub(super) record: &'s mut Option<Record>,
    pub(super) messages: &'s mut Vec<Message>,
    pub(super) checkpoints: Option<&'s RefCell<crate::checkpoint::Checkpoints>>,
}

impl State {
    pub(super) fn new(turn: &Turn) -> State {
        State {
            approvals: turn.rights.approvals.clone(),
            known: turn.conversation.known,
            goal: turn.goal.current.clone(),
            ..State::default()
        }
    }
}

/// The model the next request goes to: the session's, or the fallback
/// the turn moved to.
pub(super) struct InUse<'t> {
    pub provider: &'t Arc<dyn Provider>,
    pub name: &'t str,
    pub effort: Option<&'t str>,
    pub max_output_tokens: Option<u32>,
    pub price: Option<&'t Price>,
}

pub(super) fn in_use<'t>(turn: &'t Turn, state: &State) -> InUse<'t> {
    match state.fallback.and_then(|i| turn.on_limit.fallbacks.get(i)) {
        Some(fallback) => InUse {
            provider: &fallback.provider,
            name: &fallback.name,
            effort: None,
            max_output_tokens: fallback.max_output_tokens,
            price: fallback.price.as_ref(),
        },
        None => InUse {
            provider: &turn.model.provider,
            name: &turn.model.name,
            effort: turn.model.effort.as_deref(),
            max_output_tokens: turn.model.max_output_tokens,
            price: turn.model.price.as_ref(),
        },
    }
}

/// Takes the steers handed over since the last boundary: each is shown as
/// the user's text (and kept for replay) and becomes a user message.
/// Returns their item ids.
pub(super) fn take_steers(
    turn: &Turn,
    sink: &mut UpdateSink,
    state: &mut State,
    messages: &mut Vec<Message>,
) -> Vec<String> {
    let steers: Vec<(String, String, Vec<Value>)> = match turn.io.live.lock() {
        Ok(mut live) => live.steers.drain(..).collect(),
        Err(_) => Vec::new(),
    };
    let mut applied = Vec::new();
    for (item, text, blocks) in steers {
        for block in blocks {
            sink.updates
                .borrow_mut()
                .send(SessionUpdate::UserMessageChunk(ContentChunk {
                    content: block,
                    message_id: Some(format!("steer_{item}")),
                }));
        }
        let message = Message::user(text);
        messages.push(message.clone());
        state.added.push(message);
        state.applied.push(item.clone());
        applied.push(item);
    }
    applied
}

/// Publishes the provider's health for status.
pub(super) fn set_health(turn: &Turn, health: Health, error: Option<String>) {
    if let Ok(mut live) = turn.io.live.lock() {
        live.health = health;
        live.health_error = error;
        // A retry's or a wait's time is over either way.
        live.waiting_until = None;
    }
}

/// The answer for a failed model call: authentication problems (HTTP 401
/// and 403) are ACP's -32000, which lets the editor offer to authenticate;
/// everything else is -32603 with the provider's own words, not worded as
/// Spindle's internal fault.
pub(super) fn provider_failure(error: &crate::provider::ProviderError) -> RpcError {
    let data = error.data();
    if matches!(error.status, Some(401 | 403)) {
        return RpcError::new(
            crate::rpc::code::AUTH_REQUIRED,
            format!(
                "Authentication required: {} Check the provider's API key (its variable or key file, or run `spindle setup`), then authenticate again.",
                crate::util::sentence(&error.message)
            ),
        )
        .with_data(data);
    }
    RpcError::new(
        crate::rpc::code::INTERNAL_ERROR,
        format!("Model provider error: {}", error.message),
    )
    .with_data(data)
}

/// The answer when the provider refuses the conversation as longer than
/// the model's window, even after compacting it.
pub(super) fn too_long(error: &crate::provider::ProviderError, compacting: bool) -> RpcError {
    let mut data = error.data();
    data["code"] = json!("context_too_long");
    data["providerCode"] = json!(error.code);
    let advice = if compacting {
        "even after compacting it. Start a new session, or /clear and say again what matters"
    } else {
        "and automatic compaction is off. Use /compact, /clear or a new session"
    };
    RpcError::new(
        crate::rpc::code::INTERNAL_ERROR,
        format!(
            "Model provider error: the conversation is too long for the model's context window ({}), {advice}.",
            error.message
        ),
    )
    .with_data(data)
}

/// Which of the agent's per-turn limits the turn has reached, in words.
pub(super) fn limit_reached(agent: &crate::agentfile::AgentSpec, state: &State) -> Option<String> {
    let tokens = state
        .usage
        .input_tokens
        .saturating_add(state.usage.output_tokens);
    if let Some(limit) = agent.limits.tokens.filter(|limit| tokens >= *limit) {
        return Some(format!("{limit} tokens"));
    }
    agent
        .limits
        .cost
        .filter(|limit| state.spend.cost >= *limit)
        .map(|limit| format!("{limit} in cost"))
}

/// Adds a finished model call's usage and cost to the turn's: a call
/// without usage has unknown counts, and one with neither a reported cost
/// nor a price (nor usage to price) an unknown cost. The call's cost.
pub(super) fn add_call_usage(turn: &Turn, outcome: &Outcome, state: &mut State) -> Option<f64> {
    state.model_calls += 1;
    let usage = outcome.usage.as_ref();
    let cost = call_cost(outcome.cost, usage, in_use(turn, state).price);
    state.spend.add_call(cost);
    if let Some(usage) = usage {
        state.usage_reports += 1;
        state.usage.add(usage);
    }
    publish_usage(turn, &state.usage, state.spend);
    cost
}

/// Publishes the turn's usage so far for status, which answers without
/// waiting for the turn.
pub(super) fn publish_usage(turn: &Turn, usage: &Usage, spend: Spend) {
    if let Ok(mut live) = turn.io.live.lock() {
        live.usage = *usage;
        live.spend = spend;
    }
}

/// Sends `usage_update`: how full the context is (`used`, the size of the
/// conversation as the next request sends it), and what the session cost
/// so far when every call's cost is known (none is, when one is not).
pub(super) fn report_usage(turn: &Turn, used: u64, state: &State, updates: &RefCell<Updates>) {
    let mut session = turn.start.spend_before;
    session.add(&state.spend);
    let cost = session.total().map(|amount| Cost {
        amount,
        currency: currency(turn.model.price.as_ref()).to_string(),
    });
    updates.borrow_mut().send_live(SessionUpdate::UsageUpdate {
        used,
        size: state.window.unwrap_or(turn.window.tokens),
        cost,
    });
}

/// Every tool call the model made needs an answer in the conversation, even
/// those that never ran because the turn was cancelled first.
pub(super) fn answer_unrun(
    calls: &[crate::provider::ToolCallRequest],
    messages: &mut Vec<Message>,
    state: &mut State,
) {
    for call in calls {
        let message = Message::tool_result(&call.id, "Not run: the turn ended before it ran.");
        messages.push(message.clone());
        state.added.push(message);
    }
}

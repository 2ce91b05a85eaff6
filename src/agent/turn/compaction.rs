//! Keeping the conversation inside the window: before each model request
//! the turn estimates its size, and past the threshold first elides old
//! tool results, then has the model summarise the older part of the
//! conversation while the recent turns stay verbatim. A summary that fails
//! falls back to eliding more; `/compact` asks for the summary directly.
//!
//! The transcript the editor sees is never changed: only what the model
//! will be sent is.

use super::context::{self, Keeper};
use super::updates::UpdateSink;
use super::{State, Turn};
use crate::acp::{Notice, StopReason};
use crate::provider::{Message, ModelRequest, Role, Sink, StreamError};
use crate::rpc::RpcError;
use serde_json::json;

/// Steps whose tool results stay whole when old results are elided.
const KEEP_STEPS: usize = 3;

/// The share of the window the verbatim recent part may take.
const KEEP_SHARE: u64 = 4;

/// Why a model request may need a smaller conversation.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Pressure {
    /// Before an ordinary request: act only past the threshold.
    Threshold,
    /// The provider refused the request as too long: act whatever the
    /// estimate says.
    Refused,
}

/// What fitting did.
pub(super) enum Fitted {
    Unchanged,
    Smaller,
    Cancelled,
}

/// Collects a summary without showing it; status lines still reach the
/// user as notices.
struct Quiet<'a, 'b> {
    text: String,
    shown: &'a mut UpdateSink<'b>,
}

impl Sink for Quiet<'_, '_> {
    fn text(&mut self, delta: &str) {
        self.text.push_str(delta);
    }
    fn thought(&mut self, _: &str) {}
    fn notice(&mut self, text: &str) {
        self.shown.notice(text);
    }
}

/// The turn's estimate of the next request.
pub(super) fn estimate(state: &State, fixed: usize, messages: &[Message]) -> u64 {
    context::estimate(state.known, context::request_bytes(fixed, messages))
}

/// Makes the conversation fit before a model request, as `pressure` asks.
pub(super) fn fit(
    turn: &Turn,
    sink: &mut UpdateSink,
    state: &mut State,
    messages: &mut Vec<Message>,
    fixed: usize,
    pressure: Pressure,
) -> Fitted {
    let Some(share) = turn.compact_at else {
        return Fitted::Unchanged;
    };
    let window = turn.context_window.max(1);
    let limit = ((window as f64 * share) as u64).min(window.saturating_sub(turn.output_reserve));
    let before = estimate(state, fixed, messages);
    log::debug!(
        "context of session {}: about {before} tokens, compaction past {limit} (window {window})",
        turn.session_id
    );
    if pressure == Pressure::Threshold && before <= limit {
        return Fitted::Unchanged;
    }
    let keeper = Keeper {
        dir: turn.processes.session_dir.as_deref(),
    };
    // Old tool results first: cheap, and often enough — when it leaves
    // room for a while (a quarter of the limit), so that the conversation
    // is not rewritten before every request near the threshold (which
    // would also defeat the providers' prompt caches).
    let saved = context::elide_old_results(messages, KEEP_STEPS, &keeper);
    let after = estimate(state, fixed, messages);
    if saved > 0 && pressure == Pressure::Threshold && after <= limit / 4 * 3 {
        announce_elided(turn, sink, state, before, after, None);
        return Fitted::Smaller;
    }
    let keep_bytes = (window / KEEP_SHARE * 4) as usize;
    // One summary per turn past the threshold (a window the tools alone
    // nearly fill would otherwise ask for one before every step), and
    // none of a part too small to matter.
    let cut = context::cut_point(messages, keep_bytes).filter(|&cut| {
        let older: usize = messages[..cut].iter().map(context::message_bytes).sum();
        let worth = older as u64 >= window / 10 * 4 && state.summaries == 0;
        // A refusal overrides the estimate (the window may be wrong).
        pressure == Pressure::Refused || worth
    });
    let Some(cut) = cut else {
        return if saved > 0 {
            announce_elided(
                turn,
                sink,
                state,
                before,
                estimate(state, fixed, messages),
                None,
            );
            Fitted::Smaller
        } else {
            Fitted::Unchanged
        };
    };
    state.summaries += 1;
    match summarise(turn, sink, state, &messages[..cut], "", window) {
        Summary::Written(summary) => {
            // The current request, when the cut falls inside its turn, is
            // repeated verbatim after the summary.
            let current = if messages[cut..].iter().any(|m| m.role == Role::User) {
                None
            } else {
                context::prompt_before(messages, cut).map(|i| messages[i].text.clone())
            };
            let mut compacted = vec![context::summary_message(&summary, current.as_deref())];
            compacted.extend(messages.drain(cut..));
            *messages = compacted;
            state.known = None;
            state.compacted = true;
            let now = estimate(state, fixed, messages);
            announce(
                turn,
                sink,
                state,
                Notice::info("Context compacted", sizes(before, now)),
                now,
            );
            Fitted::Smaller
        }
        Summary::Cancelled => Fitted::Cancelled,
        Summary::Failed(reason) => {
            // Fall back to what needs no model: every old result elided.
            context::elide_old_results(messages, 1, &keeper);
            let now = estimate(state, fixed, messages);
            if now >= before {
                return Fitted::Unchanged;
            }
            announce_elided(turn, sink, state, before, now, Some(&reason));
            Fitted::Smaller
        }
    }
}

fn announce_elided(
    turn: &Turn,
    sink: &mut UpdateSink,
    state: &mut State,
    before: u64,
    now: u64,
    reason: Option<&str>,
) {
    let notice = match reason {
        Some(reason) => Notice::warning(
            "Context compaction failed",
            format!(
                "{reason}. Old tool outputs were elided instead: {}",
                sizes(before, now)
            ),
        ),
        None => Notice::info("Old tool outputs elided", sizes(before, now)),
    };
    announce(turn, sink, state, notice, now);
}

/// `151k → 40k tokens.`
fn sizes(before: u64, now: u64) -> String {
    format!(
        "{} → {} tokens.",
        context::tokens_text(before),
        context::tokens_text(now)
    )
}

/// Shows a short notice and the new size.
fn announce(turn: &Turn, sink: &mut UpdateSink, state: &mut State, notice: Notice, used: u64) {
    state.compacted = true;
    let mut updates = sink.updates.borrow_mut();
    updates.notice(&notice);
    updates.send_live(json!({
        "sessionUpdate": "usage_update",
        "used": used,
        "size": turn.context_window,
    }));
}

enum Summary {
    Written(String),
    Cancelled,
    Failed(String),
}

/// Asks the model for a summary of `older`, without showing it.
fn summarise(
    turn: &Turn,
    sink: &mut UpdateSink,
    state: &mut State,
    older: &[Message],
    focus: &str,
    window: u64,
) -> Summary {
    let max_bytes = (window * 3 / 5 * 4) as usize;
    let mut input = context::summary_input(older, max_bytes);
    input.push(Message::user(context::summary_instruction(focus)));
    let request = ModelRequest {
        session_id: &turn.session_id,
        model: &turn.model,
        system: &turn.system,
        messages: &input,
        tools: &[],
        effort: turn.effort.as_deref(),
        max_output_tokens: turn.max_output_tokens,
    };
    let mut quiet = Quiet {
        text: String::new(),
        shown: sink,
    };
    let streamed = turn.provider.stream(&request, &mut quiet, &turn.cancel);
    let text = std::mem::take(&mut quiet.text);
    match streamed {
        _ if turn.cancel.is_cancelled() => Summary::Cancelled,
        Ok(outcome) => {
            super::add_call_usage(turn, outcome.usage.as_ref(), state);
            if text.trim().is_empty() {
                Summary::Failed("the summary came back empty".into())
            } else {
                Summary::Written(text)
            }
        }
        Err(StreamError::Cancelled) => Summary::Cancelled,
        Err(StreamError::Failed(error)) => {
            log::warn!("compaction failed in session {}: {error}", turn.session_id);
            Summary::Failed(error.message)
        }
    }
}

/// `/compact [focus]`: the model summarises the whole conversation (the
/// summary is streamed to the user), and the summary replaces it.
pub(super) fn compact_command(
    turn: &Turn,
    sink: &mut UpdateSink,
    state: &mut State,
    focus: &str,
) -> Result<StopReason, RpcError> {
    let messages = &turn.messages;
    if messages.is_empty() {
        sink.begin_message();
        sink.updates.borrow_mut().chunk(
            false,
            &sink.message_id,
            "There is nothing to compact yet.",
        );
        return Ok(StopReason::EndTurn);
    }
    let window = turn.context_window.max(1);
    let fixed = context::fixed_bytes(&turn.system, &[]);
    let before = estimate(state, fixed, messages);
    let mut input = context::summary_input(messages, (window * 3 / 5 * 4) as usize);
    input.push(Message::user(context::summary_instruction(focus)));
    sink.begin_message();
    let request = ModelRequest {
        session_id: &turn.session_id,
        model: &turn.model,
        system: &turn.system,
        messages: &input,
        tools: &[],
        effort: turn.effort.as_deref(),
        max_output_tokens: turn.max_output_tokens,
    };
    let streamed = turn.provider.stream(&request, sink, &turn.cancel);
    let summary = sink.take_message().map(|m| m.text).unwrap_or_default();
    match streamed {
        Ok(outcome) => {
            super::add_call_usage(turn, outcome.usage.as_ref(), state);
            if summary.trim().is_empty() || turn.cancel.is_cancelled() {
                return Ok(StopReason::Cancelled);
            }
            let compacted = vec![context::summary_message(&summary, None)];
            state.known = None;
            let now = estimate(state, fixed, &compacted);
            state.replaced = Some(compacted);
            sink.updates
                .borrow_mut()
                .notice(&Notice::info("Context compacted", sizes(before, now)));
            sink.updates.borrow_mut().send_live(json!({
                "sessionUpdate": "usage_update",
                "used": now,
                "size": turn.context_window,
            }));
            Ok(StopReason::EndTurn)
        }
        Err(StreamError::Cancelled) => Ok(StopReason::Cancelled),
        Err(StreamError::Failed(_)) if turn.cancel.is_cancelled() => Ok(StopReason::Cancelled),
        Err(StreamError::Failed(error)) => Err(super::provider_failure(&error)),
    }
}

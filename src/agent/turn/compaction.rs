//! Keeping the conversation inside the window: before each model request
//! the turn estimates its size, and past the threshold first elides old
//! tool results, then has the model summarise the older part of the
//! conversation while the recent turns stay verbatim. A summary that fails
//! falls back to eliding more; `/compact` asks for the summary directly.
//!
//! The transcript the editor sees is never changed: only what the model
//! will be sent is.

use super::context::{self, Keeper};
use super::spec::{Turn, Window};
use super::state::{add_call_usage, provider_failure, State, Step};
use super::updates::UpdateSink;
use crate::acp::{fit::Notice, CompactionStatus, SessionUpdate, StopReason};
use crate::provider::{Message, ModelRequest, Role, Sink, StreamError};
use crate::rpc::RpcError;

/// Steps whose tool results stay whole when old results are elided.
const KEEP_STEPS: usize = 3;

/// A summary the output limit cut off is used, and said to be partial:
/// to the model, at its end, and to the user.
fn honest(summary: String, outcome: &crate::provider::Outcome, sink: &UpdateSink) -> String {
    if outcome.finish != crate::provider::Finish::MaxTokens {
        return summary;
    }
    sink.updates.borrow_mut().notice(&Notice::info(
        "Summary cut off",
        "the summary reached the output limit; parts of the earlier conversation may be missing from it",
    ));
    format!("{}\n\n{TRUNCATED}", summary.trim_end())
}

/// What ends a summary the output limit cut off.
const TRUNCATED: &str = "(This summary was cut off at the output limit: parts of the earlier conversation may be missing from it.)";

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

/// Collects a summary without showing it as the answer (a client that
/// takes compaction updates sees it as the compaction's summary); status
/// lines still reach the user as notices.
struct Quiet<'a, 'b> {
    text: String,
    shown: &'a mut UpdateSink<'b>,
    entity: Option<&'a Entity>,
}

impl Sink for Quiet<'_, '_> {
    fn text(&mut self, delta: &str) {
        self.text.push_str(delta);
        if let Some(entity) = self.entity {
            if !self.shown.cancel_raised() {
                entity.chunk(self.shown, delta);
            }
        }
    }
    fn thought(&mut self, _: &str) {}
    fn notice(&mut self, text: &str) {
        self.shown.notice(text);
    }
}

/// The window compaction fits: the configured one, or the smaller one a
/// server named when it refused a request as too long.
pub(super) fn window(room: &Window, state: &State) -> u64 {
    state.window.unwrap_or(room.tokens).max(1)
}

/// The next request's tokens as the server counts them, when it can (a
/// local llama.cpp): the conversation's text, a few tokens a message for
/// the chat template, and the tools as estimated.
fn counted(turn: &Turn, fixed: usize, messages: &[Message]) -> Option<u64> {
    let mut text = turn.conversation.system.clone();
    for message in messages {
        text.push('\n');
        text.push_str(&message.text);
        text.push_str(&message.thought);
        for call in &message.tool_calls {
            text.push_str(&call.name);
            text.push_str(&call.arguments);
        }
    }
    let tokens = turn.model.provider.count_tokens(&text, &turn.io.cancel)?;
    let tools = fixed.saturating_sub(turn.conversation.system.len()) as u64;
    Some(tokens + 4 * messages.len() as u64 + context::tokens_of(tools))
}

/// The turn's estimate of the next request.
pub(super) fn estimate(state: &State, fixed: usize, messages: &[Message]) -> u64 {
    context::estimate(state.known, context::request_bytes(fixed, messages))
}

/// The most the next request could be (`context::worst_case`).
fn worst_case(state: &State, fixed: usize, messages: &[Message]) -> u64 {
    context::worst_case(state.known, context::request_bytes(fixed, messages))
}

/// The least room a request must leave for the answer, in tokens.
pub(super) const LEAST_ANSWER: u64 = 512;

/// When the next request leaves no room for an answer in the window,
/// even counted by the server where it counts: its tokens and the window.
pub(super) fn no_room(
    turn: &Turn,
    state: &State,
    fixed: usize,
    messages: &[Message],
) -> Option<(u64, u64)> {
    let window = window(&turn.window, state);
    let room = turn.window.output_reserve.clamp(1, LEAST_ANSWER);
    let estimate = estimate(state, fixed, messages);
    let worst = worst_case(state, fixed, messages);
    if estimate.saturating_add(room) <= window && worst.saturating_add(room) <= window {
        return None;
    }
    // Counted where the server counts; else the estimate decides (an
    // estimate only the worst case puts over is not refused).
    if estimate.saturating_add(room) <= window {
        let tokens = counted(turn, fixed, messages)?;
        return (tokens.saturating_add(room) > window).then_some((tokens, window));
    }
    let tokens = counted(turn, fixed, messages).unwrap_or(estimate);
    (tokens.saturating_add(room) > window).then_some((tokens, window))
}

/// Makes the conversation fit before a model request, as `pressure` asks.
pub(super) fn fit(cx: &mut Step, fixed: usize, pressure: Pressure) -> Fitted {
    let turn = cx.turn;
    let Some(share) = turn.window.compact_at else {
        return Fitted::Unchanged;
    };
    let window = window(&turn.window, cx.state);
    let limit =
        ((window as f64 * share) as u64).min(window.saturating_sub(turn.window.output_reserve));
    let before = estimate(cx.state, fixed, cx.messages);
    log::debug!(
        "context of session {}: about {before} tokens, compaction past {limit} (window {window})",
        turn.io.session_id
    );
    // Under the threshold by the estimate but perhaps not in truth (dense
    // digits run a token a byte): a server that counts is asked.
    if pressure == Pressure::Threshold && before <= limit {
        if worst_case(cx.state, fixed, cx.messages) <= limit {
            return Fitted::Unchanged;
        }
        let Some(exact) = counted(turn, fixed, cx.messages) else {
            return Fitted::Unchanged;
        };
        // The count calibrates the estimates after it either way.
        cx.state.known = Some(context::Known {
            tokens: exact,
            bytes: context::request_bytes(fixed, cx.messages),
        });
        if exact <= limit {
            return Fitted::Unchanged;
        }
        log::debug!("the server counts {exact} tokens, past {limit}");
    }
    // The estimate errs high; a server that counts tokens may say there
    // is room after all.
    if pressure == Pressure::Threshold && before > limit {
        if let Some(exact) = counted(turn, fixed, cx.messages).filter(|exact| *exact <= limit) {
            log::debug!("the server counts {exact} tokens: no compaction yet");
            cx.state.known = Some(context::Known {
                tokens: exact,
                bytes: context::request_bytes(fixed, cx.messages),
            });
            return Fitted::Unchanged;
        }
    }
    let keeper = Keeper {
        dir: turn.workspace.processes.session_dir.as_deref(),
    };
    // Old tool results first: cheap, and often enough — when it leaves
    // room for a while (a quarter of the limit), so that the conversation
    // is not rewritten before every request near the threshold (which
    // would also defeat the providers' prompt caches).
    let saved = context::elide_old_results(cx.messages, KEEP_STEPS, &keeper);
    let after = estimate(cx.state, fixed, cx.messages);
    if saved > 0 && pressure == Pressure::Threshold && after <= limit / 4 * 3 {
        announce_elided(cx, (before, after), None);
        return Fitted::Smaller;
    }
    let keep_bytes = (window / KEEP_SHARE * 4) as usize;
    // One summary per turn past the threshold (a window the tools alone
    // nearly fill would otherwise ask for one before every step), and
    // none of a part too small to matter.
    let cut = context::cut_point(cx.messages, keep_bytes).filter(|&cut| {
        let older: usize = cx.messages[..cut].iter().map(context::message_bytes).sum();
        let worth = older as u64 >= window / 10 * 4 && cx.state.summaries == 0;
        // A refusal overrides the estimate (the window may be wrong).
        pressure == Pressure::Refused || worth
    });
    let Some(cut) = cut else {
        return if saved > 0 {
            let now = estimate(cx.state, fixed, cx.messages);
            announce_elided(cx, (before, now), None);
            Fitted::Smaller
        } else {
            Fitted::Unchanged
        };
    };
    cx.state.summaries += 1;
    super::hooks::pre_compact(turn, cx.sink.updates, "auto", "");
    let entity = Entity::start(turn, cx.sink);
    match summarise(cx, cut, window, entity.as_ref()) {
        Summary::Written(summary) => {
            // The current request, when the cut falls inside its turn, is
            // repeated verbatim after the summary.
            let current = if cx.messages[cut..].iter().any(|m| m.role == Role::User) {
                None
            } else {
                context::prompt_before(cx.messages, cut).map(|i| cx.messages[i].text.clone())
            };
            let mut compacted = vec![context::summary_message(&summary, current.as_deref())];
            compacted.extend(cx.messages.drain(cut..));
            *cx.messages = compacted;
            cx.state.known = None;
            cx.state.compacted = true;
            let now = estimate(cx.state, fixed, cx.messages);
            let notice = match entity {
                Some(entity) => {
                    entity.end(cx.sink, Ended::Completed(&summary), before, now);
                    None
                }
                None => Some(Notice::info("Context compacted", sizes(before, now))),
            };
            announce(cx, notice, now);
            Fitted::Smaller
        }
        Summary::Cancelled => {
            if let Some(entity) = entity {
                entity.end(cx.sink, Ended::Cancelled, before, before);
            }
            Fitted::Cancelled
        }
        Summary::Failed(reason) => {
            // Fall back to what needs no model: every old result elided.
            context::elide_old_results(cx.messages, 1, &keeper);
            let now = estimate(cx.state, fixed, cx.messages);
            let shown = entity.is_some();
            if let Some(entity) = entity {
                entity.end(cx.sink, Ended::Failed(&reason), before, now.min(before));
            }
            if now >= before {
                return Fitted::Unchanged;
            }
            // The compaction's failure is shown already to a client that
            // saw the compaction.
            let reason = (!shown).then_some(reason);
            announce_elided(cx, (before, now), reason.as_deref());
            Fitted::Smaller
        }
    }
}

/// One compaction as a client that takes compaction updates
/// (`clientCapabilities.session.compaction`) sees it: `in_progress`, the
/// summary streamed as it comes, then one terminal status. Only the
/// terminal update is kept for replay, with the whole summary (the
/// materialized form the RFD replays), so what a replay shows is what
/// the live compaction ended as.
struct Entity {
    id: String,
}

/// How a compaction ended.
enum Ended<'a> {
    Completed(&'a str),
    Failed(&'a str),
    Cancelled,
}

impl Entity {
    /// Starts one, when the client takes compaction updates.
    fn start(turn: &Turn, sink: &UpdateSink) -> Option<Entity> {
        if !turn.io.client.capabilities.session.compaction {
            return None;
        }
        let entity = Entity {
            id: format!("cmp_{}", crate::util::random_hex()),
        };
        sink.updates
            .borrow_mut()
            .send_transient(SessionUpdate::CompactionUpdate {
                compaction_id: entity.id.clone(),
                status: CompactionStatus::InProgress,
                summary: None,
                error: None,
                tokens: None,
            });
        Some(entity)
    }

    fn chunk(&self, sink: &UpdateSink, text: &str) {
        sink.updates
            .borrow_mut()
            .send_transient(SessionUpdate::CompactionSummaryChunk {
                compaction_id: self.id.clone(),
                text: text.to_string(),
            });
    }

    /// The terminal update, with the sizes before and after.
    fn end(&self, sink: &UpdateSink, ended: Ended, before: u64, after: u64) {
        let (status, summary, error) = match ended {
            Ended::Completed(summary) => {
                (CompactionStatus::Completed, Some(summary.to_string()), None)
            }
            Ended::Failed(error) => (CompactionStatus::Failed, None, Some(error.to_string())),
            Ended::Cancelled => (CompactionStatus::Cancelled, None, None),
        };
        let update = SessionUpdate::CompactionUpdate {
            compaction_id: self.id.clone(),
            status,
            summary,
            error,
            tokens: Some((before, after)),
        };
        sink.updates.borrow_mut().send(update);
    }
}

fn announce_elided(cx: &mut Step, (before, now): (u64, u64), reason: Option<&str>) {
    let notice = match reason {
        Some(reason) => Notice::warning(
            "Context compaction failed",
            format!(
                "{} Old tool outputs were elided instead: {}",
                crate::util::sentence(reason),
                sizes(before, now)
            ),
        ),
        None => Notice::info("Old tool outputs elided", sizes(before, now)),
    };
    announce(cx, Some(notice), now);
}

/// `151k → 40k tokens.`
fn sizes(before: u64, now: u64) -> String {
    format!(
        "{} → {} tokens.",
        context::tokens_text(before),
        context::tokens_text(now)
    )
}

/// Shows a short notice (when the compaction was not shown otherwise) and
/// the new size.
fn announce(cx: &mut Step, notice: Option<Notice>, used: u64) {
    let turn = cx.turn;
    cx.state.compacted = true;
    let mut updates = cx.sink.updates.borrow_mut();
    if let Some(notice) = notice {
        updates.notice(&notice);
    }
    updates.send_live(SessionUpdate::UsageUpdate {
        used,
        size: window(&turn.window, cx.state),
        cost: None,
    });
}

enum Summary {
    Written(String),
    Cancelled,
    Failed(String),
}

/// Asks the model for a summary of the messages before `cut`, without
/// showing it as the answer.
fn summarise(cx: &mut Step, cut: usize, window: u64, entity: Option<&Entity>) -> Summary {
    let turn = cx.turn;
    let max_bytes = (window * 3 / 5 * 4) as usize;
    let mut input = context::summary_input(&cx.messages[..cut], max_bytes);
    input.push(Message::user(context::summary_instruction("")));
    let request = ModelRequest {
        session_id: &turn.io.session_id,
        model: &turn.model.name,
        system: &turn.conversation.system,
        messages: &input,
        tools: &[],
        effort: turn.model.effort.as_deref(),
        max_output_tokens: turn.model.max_output_tokens,
        trace: turn.io.trace.as_ref(),
        max_attempts: None,
    };
    let mut quiet = Quiet {
        text: String::new(),
        shown: cx.sink,
        entity,
    };
    let streamed = turn
        .model
        .provider
        .stream(&request, &mut quiet, &turn.io.cancel);
    let text = std::mem::take(&mut quiet.text);
    match streamed {
        _ if turn.io.cancel.is_cancelled() => Summary::Cancelled,
        Ok(outcome) => {
            add_call_usage(turn, &outcome, cx.state);
            if text.trim().is_empty() {
                Summary::Failed("the summary came back empty".into())
            } else {
                Summary::Written(honest(text, &outcome, quiet.shown))
            }
        }
        Err(StreamError::Cancelled) => Summary::Cancelled,
        Err(StreamError::Failed(error)) => {
            log::warn!(
                "compaction failed in session {}: {error}",
                turn.io.session_id
            );
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
    let messages = &turn.conversation.messages;
    if messages.is_empty() {
        sink.begin_message();
        sink.updates.borrow_mut().chunk(
            false,
            &sink.message_id,
            "There is nothing to compact yet.",
        );
        return Ok(StopReason::EndTurn);
    }
    super::hooks::pre_compact(turn, sink.updates, "manual", focus);
    let window = window(&turn.window, state);
    let fixed = context::fixed_bytes(&turn.conversation.system, &[]);
    let before = estimate(state, fixed, messages);
    let mut input = context::summary_input(messages, (window * 3 / 5 * 4) as usize);
    input.push(Message::user(context::summary_instruction(focus)));
    let request = ModelRequest {
        session_id: &turn.io.session_id,
        model: &turn.model.name,
        system: &turn.conversation.system,
        messages: &input,
        tools: &[],
        effort: turn.model.effort.as_deref(),
        max_output_tokens: turn.model.max_output_tokens,
        trace: turn.io.trace.as_ref(),
        max_attempts: None,
    };
    // The summary is the answer, or the compaction's own summary for a
    // client that takes compaction updates.
    let entity = Entity::start(turn, sink);
    let (streamed, summary) = match &entity {
        Some(entity) => {
            let mut quiet = Quiet {
                text: String::new(),
                shown: sink,
                entity: Some(entity),
            };
            let streamed = turn
                .model
                .provider
                .stream(&request, &mut quiet, &turn.io.cancel);
            (streamed, quiet.text)
        }
        None => {
            sink.begin_message();
            let streamed = turn.model.provider.stream(&request, sink, &turn.io.cancel);
            let summary = sink.take_message().map(|m| m.text).unwrap_or_default();
            (streamed, summary)
        }
    };
    let end = |sink: &UpdateSink, ended: Ended, after: u64| {
        if let Some(entity) = &entity {
            entity.end(sink, ended, before, after);
        }
    };
    match streamed {
        Ok(outcome) => {
            add_call_usage(turn, &outcome, state);
            if turn.io.cancel.is_cancelled() {
                end(sink, Ended::Cancelled, before);
                return Ok(StopReason::Cancelled);
            }
            if summary.trim().is_empty() {
                end(sink, Ended::Failed("the summary came back empty"), before);
                return Ok(StopReason::Cancelled);
            }
            let summary = honest(summary, &outcome, sink);
            let compacted = vec![context::summary_message(&summary, None)];
            state.known = None;
            let now = estimate(state, fixed, &compacted);
            state.replaced = Some(compacted);
            if entity.is_some() {
                end(sink, Ended::Completed(&summary), now);
            } else {
                sink.updates
                    .borrow_mut()
                    .notice(&Notice::info("Context compacted", sizes(before, now)));
            }
            sink.updates
                .borrow_mut()
                .send_live(SessionUpdate::UsageUpdate {
                    used: now,
                    size: window,
                    cost: None,
                });
            Ok(StopReason::EndTurn)
        }
        Err(StreamError::Cancelled) => {
            end(sink, Ended::Cancelled, before);
            Ok(StopReason::Cancelled)
        }
        Err(StreamError::Failed(_)) if turn.io.cancel.is_cancelled() => {
            end(sink, Ended::Cancelled, before);
            Ok(StopReason::Cancelled)
        }
        Err(StreamError::Failed(error)) => {
            end(sink, Ended::Failed(&error.message), before);
            Err(provider_failure(&error))
        }
    }
}

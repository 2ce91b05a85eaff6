//! One model request of the loop: sent with the tools and the output cap
//! of the step, its answer streamed and watched for repetition, and what
//! it gave decided as a `Called` for the loop (`drive.rs`) to act on: an
//! answer, a limit to wait out, a too-long refusal to compact for, or
//! the turn's end.

use super::context;
use super::report::Health;
use super::spec::Turn;
use super::state::{add_call_usage, in_use, provider_failure, set_health, too_long, State, Step};
use super::step::Loop;
use super::updates::UpdateSink;
use super::waiting;
use crate::acp::StopReason;
use crate::provider::{Message, ModelRequest, Outcome, ProviderError, StreamError};
use crate::rpc::RpcError;

/// What a model request gave, for the loop to act on.
pub(super) enum Called {
    /// The answer, and the assistant message streamed with it.
    Answer(Box<(Outcome, Option<Message>)>),
    /// The model was told its answer repeated itself: ask again.
    Again,
    /// A limit that resets later (or the model down): a fallback is
    /// asked, or the turn waits, and the request goes out again.
    Limited(ProviderError),
    /// Refused as longer than the window: compacted, it goes out once
    /// more.
    TooLong(ProviderError),
    Stop(Result<StopReason, RpcError>),
}

/// What is known of a failed model request when it failed.
#[derive(Clone, Copy)]
struct Failed {
    /// The turn was cancelled (or the request, by the user).
    cancelled: bool,
    /// Part of the answer was streamed already (then it cannot be sent
    /// again unseen).
    partial: bool,
    /// The failure is a limit `waiting.rs` handles.
    limited: bool,
    /// The server refused the request as longer than the window.
    too_long: bool,
}

/// How a failed model request goes on.
#[derive(Debug, PartialEq)]
enum Failure {
    Cancelled,
    Limited,
    TooLong,
    /// The turn fails with the provider's error.
    Fails,
}

/// Decides how a failed model request goes on: a cancel ends the turn as
/// cancelled, a limit or a too-long refusal before anything was streamed
/// is handled (a limit first), anything else fails the turn.
fn failure(failed: Failed) -> Failure {
    match failed {
        Failed {
            cancelled: true, ..
        } => Failure::Cancelled,
        Failed { partial: true, .. } => Failure::Fails,
        Failed { limited: true, .. } => Failure::Limited,
        Failed { too_long: true, .. } => Failure::TooLong,
        _ => Failure::Fails,
    }
}

/// Asks the model, streaming its answer; the provider's health is
/// published. A request refused as longer than the window is compacted
/// and tried once more.
pub(super) fn call_model(cx: &mut Step, run: &mut Loop) -> Called {
    let turn = cx.turn;
    cx.sink.begin_message();
    let model = in_use(turn, cx.state);
    let request = ModelRequest {
        session_id: &turn.io.session_id,
        model: model.name,
        system: &turn.conversation.system,
        messages: cx.messages,
        tools: &run.tools,
        effort: model.effort,
        max_output_tokens: output_cap(
            turn,
            cx.state,
            run.fixed,
            cx.messages,
            model.max_output_tokens,
        ),
        trace: turn.io.trace.as_ref(),
        // After a wait for the model's limit, one try: its retries were
        // spent before the wait and do not start over.
        max_attempts: (cx.state.parks > 0
            && cx.state.waiting_since.is_some()
            && cx.state.fallback.is_none())
        .then_some(1),
    };
    // The call has its own token, so an answer that repeats itself can
    // be cut alone.
    let limit = turn.steps.loops.text_stop();
    let call = match limit {
        0 => turn.io.cancel.clone(),
        _ => super::loops::call_token(&turn.io.cancel),
    };
    let mut watched = super::loops::Watched::new(cx.sink, limit, call.clone());
    let streamed = model.provider.stream(&request, &mut watched, &call);
    let repeated = watched.repeated.take();
    let assistant = cx.sink.take_message();
    if let Some(what) = repeated.filter(|_| !turn.io.cancel.is_cancelled()) {
        // What was streamed is kept, without the calls it never finished.
        if let Ok(outcome) = &streamed {
            add_call_usage(turn, outcome, cx.state);
        }
        // The first time, the cut answer stays, the model is told what it
        // repeated and is asked once more; the second time the turn ends.
        if !run.text_told {
            run.text_told = true;
            if let Some(message) = assistant {
                cx.messages.push(message.clone());
                cx.state.added.push(message);
            }
            let note = Message::user(super::loops::text_note(&what, limit));
            cx.messages.push(note.clone());
            cx.state.added.push(note);
            cx.sink.updates
                .borrow_mut()
                .notice(&crate::acp::fit::Notice::warning(
                    "The model repeated itself",
                    format!("Its answer repeated the same text {limit} times and was cut there; it was told so and asked to go on."),
                ));
            return Called::Again;
        }
        cx.state.added.extend(assistant);
        super::loops::say_stopped(cx.sink, &super::loops::text_repeated(&what, limit));
        return Called::Stop(Ok(StopReason::EndTurn));
    }
    match &streamed {
        Ok(_) => set_health(turn, Health::Ok, None),
        Err(StreamError::Failed(error)) if !turn.io.cancel.is_cancelled() => {
            set_health(turn, Health::Failing, Some(error.message.clone()))
        }
        Err(_) => {}
    }
    let error = match streamed {
        Ok(outcome) => {
            waiting::answered(turn, cx.state, cx.record);
            return Called::Answer(Box::new((outcome, assistant)));
        }
        Err(StreamError::Cancelled) => None,
        Err(StreamError::Failed(error)) => Some(error),
    };
    let failed = Failed {
        cancelled: error.is_none() || turn.io.cancel.is_cancelled(),
        partial: assistant.is_some(),
        limited: error
            .as_ref()
            .is_some_and(|e| waiting::handles(&turn.on_limit, cx.state, e)),
        too_long: error
            .as_ref()
            .is_some_and(|e| context::is_too_long(e.status, &e.code, &e.message)),
    };
    match (failure(failed), error) {
        (Failure::Limited, Some(error)) => Called::Limited(error),
        (Failure::TooLong, Some(error)) => Called::TooLong(error),
        (Failure::Fails, Some(error)) => {
            cx.state.added.extend(assistant);
            log::warn!(
                target: crate::provider::http::FAILED_CALL_LOG,
                "model call failed in session {}: {error}",
                turn.io.session_id
            );
            Called::Stop(Err(provider_failure(&error)))
        }
        _ => {
            cx.state.added.extend(assistant);
            Called::Stop(Ok(StopReason::Cancelled))
        }
    }
}

/// After a too-long refusal: the window the server named is learnt, and
/// the conversation compacted, once per turn. `Ok` to send the request
/// again.
pub(super) fn after_too_long(
    cx: &mut Step,
    run: &mut Loop,
    error: &ProviderError,
) -> Result<(), Result<StopReason, RpcError>> {
    let turn = cx.turn;
    if !run.refused_as_too_long {
        run.refused_as_too_long = true;
        learn_window(turn, cx.sink, cx.state, &error.message);
        let refused = super::compaction::Pressure::Refused;
        match super::compaction::fit(cx, run.fixed, refused) {
            super::compaction::Fitted::Smaller => return Ok(()),
            super::compaction::Fitted::Cancelled => return Err(Ok(StopReason::Cancelled)),
            super::compaction::Fitted::Unchanged => {}
        }
    }
    log::warn!(
        "model call refused as too long in session {}: {error}",
        turn.io.session_id
    );
    Err(Err(too_long(error, turn.window.compact_at.is_some())))
}

/// The output cap a request carries: the model's, but never more than
/// half of what the request leaves of the window (at least
/// `LEAST_ANSWER`), so that a small model caught in a loop does not fill
/// its whole window with one answer.
fn output_cap(
    turn: &Turn,
    state: &State,
    fixed: usize,
    messages: &[Message],
    cap: Option<u32>,
) -> Option<u32> {
    use super::compaction::{estimate, window, LEAST_ANSWER};
    let cap = cap?;
    let left = window(&turn.window, state).saturating_sub(estimate(state, fixed, messages));
    let share = (left / 2).max(LEAST_ANSWER);
    Some(cap.min(u32::try_from(share).unwrap_or(u32::MAX)))
}

/// Believes the window a "too long" refusal names when it is smaller than
/// the configured one (a server started with a smaller context than the
/// config says), and says so.
fn learn_window(turn: &Turn, sink: &mut UpdateSink, state: &mut State, message: &str) {
    let configured = state.window.unwrap_or(turn.window.tokens);
    if let Some(named) = context::window_named(message).filter(|named| *named < configured) {
        state.window = Some(named);
        sink.updates.borrow_mut().notice(&crate::acp::fit::Notice::info(
            "Smaller window",
            format!(
                "the server's window is {named} tokens, not the {configured} configured; the conversation is compacted to fit"
            ),
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PLAIN: Failed = Failed {
        cancelled: false,
        partial: false,
        limited: false,
        too_long: false,
    };

    #[test]
    fn a_cancel_wins_over_every_other_failure() {
        let failed = Failed {
            cancelled: true,
            limited: true,
            too_long: true,
            ..PLAIN
        };
        assert_eq!(failure(failed), Failure::Cancelled);
    }

    #[test]
    fn a_limit_is_handled_before_a_too_long_refusal() {
        let both = Failed {
            limited: true,
            too_long: true,
            ..PLAIN
        };
        assert_eq!(failure(both), Failure::Limited);
        let too_long = Failed {
            too_long: true,
            ..PLAIN
        };
        assert_eq!(failure(too_long), Failure::TooLong);
        assert_eq!(failure(PLAIN), Failure::Fails);
    }

    #[test]
    fn a_request_already_partly_shown_is_not_sent_again() {
        let failed = Failed {
            partial: true,
            limited: true,
            too_long: true,
            ..PLAIN
        };
        assert_eq!(failure(failed), Failure::Fails);
    }
}

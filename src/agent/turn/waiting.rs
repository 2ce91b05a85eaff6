//! Waiting out a provider's limit. A refusal that names when its limit
//! resets (a 429 with a far `Retry-After`, rate-limit headers, a reset
//! time in the body) does not end the turn: the configured fallback
//! models are asked first, then the turn parks until the reset — the
//! wait recorded in the store, so that a process that stops meanwhile
//! leaves it for the next one to resume — and sends the same request
//! once more. Cancel ends the wait; a reset later than the longest wait
//! fails the turn, naming the time.

use super::record::Record;
use super::report::Health;
use super::spec::{OnLimit, Turn};
use super::state::{in_use, provider_failure, State, Step};
use crate::acp::fit::Notice;
use crate::acp::StopReason;
use crate::provider::ProviderError;
use crate::rpc::RpcError;
use serde_json::json;
use std::time::Duration;

/// Whether a failed request (nothing of its answer shown) is one this
/// module handles: a limit with a known reset, the session's model down
/// (a 5xx after its retries) when fallbacks are configured, or any
/// failure of a fallback (then the next one is asked).
pub(super) fn handles(on_limit: &OnLimit, state: &State, error: &ProviderError) -> bool {
    let helps = !on_limit.max_wait.is_zero() || !on_limit.fallbacks.is_empty();
    let down = error.status.is_some_and(|status| status >= 500);
    (error.limited && helps) || state.fallback.is_some() || (down && !on_limit.fallbacks.is_empty())
}

/// What a limited refusal (or the model down) leads to.
#[derive(Debug, PartialEq)]
pub(super) enum AfterLimit {
    /// The session's model refused again right after the turn waited for
    /// it (until the time given): the turn ends.
    StillRefused(i64),
    /// The fallback at this index is asked.
    Fallback(usize),
    /// The session's model was down, not limited, and no fallback is
    /// left: nothing to wait for, the turn fails.
    Down,
    /// The turn waits until then, and asks the session's model again.
    Wait(i64),
}

/// Decides what a limited refusal (or the model down) leads to, from the
/// turn's state, how many fallbacks it has, and the error, `now`; with
/// when the session's model's limit resets as the turn now knows it.
/// A wait is waited once: the same model refusing again right after it
/// ends the turn, so a server that keeps saying "retry in 2 s" is not
/// asked for hours.
pub(super) fn after_limit(
    state: &State,
    fallbacks: usize,
    error: &ProviderError,
    now: i64,
) -> (Option<i64>, AfterLimit) {
    let mut reset = state.limit_reset;
    // The session's own model decides how long to wait.
    if error.limited && state.fallback.is_none() {
        if state.parks > 0 && state.waiting_since.is_some() {
            return (reset, AfterLimit::StillRefused(reset.unwrap_or(now)));
        }
        // The provider's wait is at most a year already; the sum
        // saturates all the same.
        let wait = error.retry_after.unwrap_or_default().as_millis();
        reset = Some(now.saturating_add(i64::try_from(wait).unwrap_or(i64::MAX)));
    }
    let next = state.fallback.map_or(0, |i| i + 1);
    if next < fallbacks {
        return (reset, AfterLimit::Fallback(next));
    }
    let Some(until) = reset else {
        return (reset, AfterLimit::Down);
    };
    // A reset already past is waited at least a second.
    let floor = now.saturating_add(1000 << state.parks.min(6));
    (reset, AfterLimit::Wait(until.max(floor)))
}

/// After a limited refusal (or the model down): does what `after_limit`
/// decided. `Ok` to send the request again.
pub(super) fn on_limited(
    cx: &mut Step,
    error: &ProviderError,
) -> Result<(), Result<StopReason, RpcError>> {
    let turn = cx.turn;
    let now = crate::clock::now_ms();
    let (reset, next) = after_limit(cx.state, turn.on_limit.fallbacks.len(), error, now);
    cx.state.limit_reset = reset;
    match next {
        AfterLimit::StillRefused(at) => Err(Err(RpcError::new(
            crate::rpc::code::INTERNAL_ERROR,
            format!(
                "Model provider error: {} — still refused after waiting until {}; the turn stops rather than ask again.",
                error.message,
                reset_words(at)
            ),
        )
        .with_data(json!({"code": "provider_limit"})))),
        AfterLimit::Fallback(next) => {
            let fallback = &turn.on_limit.fallbacks[next];
            let from = in_use(turn, cx.state).name.to_string();
            cx.state.fallback = Some(next);
            log::warn!(
                "session {}: {from} refused ({error}); asking {}",
                turn.io.session_id,
                fallback.id
            );
            let title = match error.limited {
                true => "Limit reached",
                false => "Model unavailable",
            };
            cx.sink.updates.borrow_mut().notice(&Notice::info(
                title,
                format!(
                    "{from}: {} Asking {} meanwhile.",
                    crate::util::sentence(&error.message),
                    fallback.id
                ),
            ));
            Ok(())
        }
        AfterLimit::Down => {
            cx.state.fallback = None;
            Err(Err(provider_failure(error)))
        }
        AfterLimit::Wait(until) => {
            cx.state.fallback = None;
            cx.state.parks += 1;
            park(cx, until, &error.message)
        }
    }
}

/// Waits until `until_ms` (a cancel ends the wait), the wait recorded in
/// the store and shown in status; `Ok` when the time has come.
pub(super) fn park(
    cx: &mut Step,
    until_ms: i64,
    reason: &str,
) -> Result<(), Result<StopReason, RpcError>> {
    let turn = cx.turn;
    let now = crate::clock::now_ms();
    let since = *cx.state.waiting_since.get_or_insert(now);
    let at = reset_words(until_ms);
    let longest = i64::try_from(turn.on_limit.max_wait.as_millis()).unwrap_or(i64::MAX);
    if until_ms.saturating_sub(since) > longest {
        let why = match turn.on_limit.max_wait.as_secs() / 60 {
            0 => "waiting for it is off (max_wait_minutes is 0 in the config)".to_string(),
            minutes => format!(
                "later than the longest wait ({minutes} minutes; max_wait_minutes in the config)"
            ),
        };
        return Err(Err(RpcError::new(
            crate::rpc::code::INTERNAL_ERROR,
            format!("Model provider error: {reason} — the limit resets at {at}, {why}."),
        )
        .with_data(
            json!({"code": "provider_limit", "resetsAt": crate::clock::rfc3339(until_ms)}),
        )));
    }
    let wait = json!({
        "untilMs": until_ms,
        "sinceMs": since,
        "reason": reason,
        "item": turn.io.inbox_item,
        "goal": cx.state.goal.is_some(),
    });
    if let Some(record) = cx.record.as_mut() {
        if let Err(error) = record.store.save_wait(&turn.io.session_id, &wait) {
            log::warn!(
                "cannot record the wait of session {}: {error}",
                turn.io.session_id
            );
        }
    }
    cx.state.parked = true;
    if let Ok(mut live) = turn.io.live.lock() {
        live.health = Health::Waiting;
        live.health_error = Some(reason.to_string());
        live.waiting_until = Some(crate::clock::rfc3339(until_ms));
    }
    log::warn!(
        "session {}: waiting until {at} for the provider's limit ({reason})",
        turn.io.session_id
    );
    cx.sink.updates.borrow_mut().notice(&Notice::info(
        format!("Waiting for the limit to reset at {at}"),
        format!(
            "{} The request goes out again then; cancel to stop waiting.",
            crate::util::sentence(reason)
        ),
    ));
    let left = Duration::from_millis(until_ms.saturating_sub(now).max(0) as u64);
    let cancelled = turn.io.cancel.sleep(left);
    if let Ok(mut live) = turn.io.live.lock() {
        live.health = Health::Retrying;
        live.waiting_until = None;
        // Stopped by the agent's end, not the user: the next process
        // that opens the session waits on.
        cx.state.parked &= !(cancelled && live.shutting_down);
    }
    match cancelled {
        true => Err(Ok(StopReason::Cancelled)),
        false => Ok(()),
    }
}

/// The request after a wait went through: the wait is over.
pub(super) fn answered(turn: &Turn, state: &mut State, record: &mut Option<Record>) {
    state.waiting_since = None;
    state.limit_reset = None;
    if std::mem::take(&mut state.parked) {
        clear(turn, record);
    }
}

/// Removes the session's wait from the store (the turn ends, or its
/// request went out).
pub(super) fn clear(turn: &Turn, record: &mut Option<Record>) {
    if let Some(record) = record.as_mut() {
        if let Err(error) = record.store.clear_wait(&turn.io.session_id) {
            log::warn!(
                "cannot clear the wait of session {}: {error}",
                turn.io.session_id
            );
        }
    }
}

/// "14:05 CET" today, "2026-12-03 14:05 CET" another day.
fn reset_words(until_ms: i64) -> String {
    let then = crate::history::local_time(&crate::clock::rfc3339(until_ms));
    let today = crate::history::local_time(&crate::clock::now_rfc3339());
    match (then.split_once(' '), today.split_once(' ')) {
        (Some((day, time)), Some((this_day, _))) if day == this_day => time.to_string(),
        _ => then,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: i64 = 1_000_000;

    fn limited(retry_after_ms: u64) -> ProviderError {
        let mut error = ProviderError::new("provider_http_429", "limit reached");
        error.status = Some(429);
        error.limited = true;
        error.retry_after = Some(Duration::from_millis(retry_after_ms));
        error
    }

    #[test]
    fn a_limit_asks_the_first_fallback_and_remembers_the_reset() {
        let state = State::default();
        let (reset, next) = after_limit(&state, 2, &limited(60_000), NOW);
        assert_eq!(next, AfterLimit::Fallback(0));
        assert_eq!(reset, Some(NOW + 60_000));
        // The next refusal, by that fallback, asks the one after it.
        let state = State {
            fallback: Some(0),
            limit_reset: reset,
            ..State::default()
        };
        let (_, next) = after_limit(&state, 2, &limited(5), NOW);
        assert_eq!(next, AfterLimit::Fallback(1));
    }

    #[test]
    fn without_fallbacks_a_limit_is_waited_at_least_a_second() {
        let state = State::default();
        let (_, next) = after_limit(&state, 0, &limited(60_000), NOW);
        assert_eq!(next, AfterLimit::Wait(NOW + 60_000));
        let (_, next) = after_limit(&state, 0, &limited(0), NOW);
        assert_eq!(next, AfterLimit::Wait(NOW + 1000));
    }

    #[test]
    fn refused_again_right_after_a_wait_ends_the_turn() {
        let state = State {
            parks: 1,
            waiting_since: Some(NOW - 5000),
            limit_reset: Some(NOW - 10),
            ..State::default()
        };
        let (_, next) = after_limit(&state, 0, &limited(60_000), NOW);
        assert_eq!(next, AfterLimit::StillRefused(NOW - 10));
    }

    #[test]
    fn a_model_down_with_no_fallback_left_fails() {
        let mut error = ProviderError::new("provider_http_503", "down");
        error.status = Some(503);
        let state = State {
            fallback: Some(1),
            ..State::default()
        };
        let (reset, next) = after_limit(&state, 2, &error, NOW);
        assert_eq!((reset, next), (None, AfterLimit::Down));
    }
}

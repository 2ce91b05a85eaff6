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
use super::spec::Turn;
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
pub(super) fn handles(turn: &Turn, state: &State, error: &ProviderError) -> bool {
    let helps = !turn.model.max_wait.is_zero() || !turn.model.fallbacks.is_empty();
    let down = error.status.is_some_and(|status| status >= 500);
    (error.limited && helps)
        || state.fallback.is_some()
        || (down && !turn.model.fallbacks.is_empty())
}

/// After a limited refusal (or the model down): the next fallback is
/// asked, or the turn waits for the session's model's limit to reset.
/// `Ok` to send the request again. A wait is waited once: the same
/// model refusing again right after it ends the turn, so a server that
/// keeps saying "retry in 2 s" is not asked for hours.
pub(super) fn on_limited(
    cx: &mut Step,
    error: &ProviderError,
) -> Result<(), Result<StopReason, RpcError>> {
    let turn = cx.turn;
    let now = crate::clock::now_ms();
    // The session's own model decides how long to wait.
    if error.limited && cx.state.fallback.is_none() {
        if cx.state.parks > 0 && cx.state.waiting_since.is_some() {
            let at = reset_words(cx.state.limit_reset.unwrap_or(now));
            return Err(Err(RpcError::new(
                crate::rpc::code::INTERNAL_ERROR,
                format!(
                    "Model provider error: {} — still refused after waiting until {at}; the turn stops rather than ask again.",
                    error.message
                ),
            )
            .with_data(json!({"code": "provider_limit"}))));
        }
        // The provider's wait is at most a year already; the sum
        // saturates all the same.
        let wait = error.retry_after.unwrap_or_default().as_millis();
        let reset = now.saturating_add(i64::try_from(wait).unwrap_or(i64::MAX));
        cx.state.limit_reset = Some(reset);
    }
    let next = cx.state.fallback.map_or(0, |i| i + 1);
    if let Some(fallback) = turn.model.fallbacks.get(next) {
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
        return Ok(());
    }
    cx.state.fallback = None;
    // The session's model was down, not limited, and no fallback
    // answered: nothing to wait for.
    let Some(until) = cx.state.limit_reset else {
        return Err(Err(provider_failure(error)));
    };
    // A reset already past is waited at least a second.
    let floor = now.saturating_add(1000 << cx.state.parks.min(6));
    cx.state.parks += 1;
    park(cx, until.max(floor), &error.message)
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
    let longest = i64::try_from(turn.model.max_wait.as_millis()).unwrap_or(i64::MAX);
    if until_ms.saturating_sub(since) > longest {
        let why = match turn.model.max_wait.as_secs() / 60 {
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

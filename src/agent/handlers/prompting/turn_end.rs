//! The end of a turn: the worker's report applied to the session (its
//! messages, usage, goal, approvals), stored, and the prompt answered.

use crate::acp;
use crate::agent::dispatcher::session::Outcome;
use crate::agent::dispatcher::Dispatcher;
use crate::agent::handlers::events;
use crate::agent::handlers::goals;
use crate::agent::handlers::inbox;
use crate::agent::handlers::inbox_hold;
use crate::agent::handlers::prompting;
use crate::agent::handlers::reload;
use crate::agent::turn::report::TurnEnd;
use crate::util::OrLogged;
use serde_json::{json, Value};

pub(in crate::agent::handlers) fn on_turn_end(d: &mut Dispatcher, mut end: TurnEnd) {
    d.forget_requests_of(&end.session_id);
    let settings = absorb(d, &mut end);
    store_end(d, &end.session_id, settings.as_ref());
    let usage = meta_usage(&end);
    let queued = d
        .session_mut(&end.session_id)
        .and_then(|session| session.queued.take());
    let turn_usage = d
        .client()
        .is_some_and(|client| client.meta.spindle.prompt_usage)
        .then(|| prompt_usage(&end.usage, end.usage_unknown, end.usage_whole))
        .flatten();
    let outcome = match &end.result {
        Ok(stop_reason) => Outcome::Stopped(*stop_reason),
        Err(_) => Outcome::Failed,
    };
    let result = end.result.map(|stop_reason| {
        let mut response = serde_json::to_value(acp::PromptResponse { stop_reason })
            .or_logged("cannot write a prompt's answer");
        response["_meta"] = json!({"spindle": {"usage": usage}});
        if let Some(turn_usage) = turn_usage {
            response["usage"] = turn_usage;
        }
        response
    });
    // The item this turn dispatched is applied (or failed), the inbox
    // hears of it, then the turn's `idle` event, after its last update
    // and before its answer.
    inbox::after_turn_inbox(
        d,
        &end.session_id,
        end.dispatched.as_deref(),
        &end.applied,
        outcome,
    );
    if let Some(session) = d.session_mut(&end.session_id) {
        session.set_last_outcome(outcome);
        let (epoch, source) = (session.epoch(), session.turn_source().as_str());
        events::event(
            d,
            &end.session_id,
            "usage",
            json!({"inputTokens": usage["inputTokens"], "outputTokens": usage["outputTokens"]}),
        );
        events::event(
            d,
            &end.session_id,
            "turn",
            json!({"state": "idle", "epoch": epoch, "source": source, "outcome": outcome.as_str()}),
        );
    }
    goals::goal_changed(d, &end.session_id);
    reload::queued_reload(d, &end.session_id);
    if let Some(request_id) = &end.request_id {
        d.respond(request_id, result);
    }
    if let Some((id, params)) = queued {
        if let Err(error) = prompting::prompt(d, &id, params) {
            d.respond(&id, Err(error));
        }
        return;
    }
    // An ordinary end: the next follow-up starts at once; any other
    // end pauses the inbox so the user looks first.
    if outcome.is_end_turn() {
        inbox::dispatch_next(d, &end.session_id);
    } else if inbox::has_waiting_items(d, &end.session_id) {
        inbox_hold::pause_inbox(d, &end.session_id);
    }
}

/// The turn's report applied to its session: the conversation, the
/// usage and cost, the approvals and goal; a closed session is
/// dropped. The settings to store.
fn absorb(d: &mut Dispatcher, end: &mut TurnEnd) -> Option<Value> {
    let mut settings = None;
    let mut remove = false;
    if let Some(session) = d.session_mut(&end.session_id) {
        if let Some(running) = session.running.take() {
            let _ = running.handle.join();
        }
        match end.replaced.take() {
            Some(messages) => session.messages = messages,
            None => session.messages.extend(std::mem::take(&mut end.added)),
        }
        session.known = end.known;
        if let Some(window) = end.window {
            session.learn_window(window);
        }
        session.add_usage(&end.usage);
        session.settings.spend.add(&end.spend);
        session.count_calls(end.model_calls as u64, end.usage_unreported as u64);
        session.settings.approvals = std::mem::take(&mut end.approvals);
        if let Some(goal) = end.goal.clone() {
            session.goal = Some(goal);
            session.mark_goal_changed();
        }
        // Steers the turn never reached stay queued (they are still
        // pending in the store), ahead of the follow-ups. Its usage is
        // the session's now.
        if let Ok(mut live) = session.live().lock() {
            live.steers.clear();
            live.usage = Default::default();
            live.spend = Default::default();
        }
        settings = Some(session.settings_json());
        remove = session.is_closed();
    }
    if remove {
        d.remove_session(&end.session_id);
    }
    settings
}

/// The session's stored message count, its settings, and its lease
/// given back.
fn store_end(d: &mut Dispatcher, session_id: &str, settings: Option<&Value>) {
    if let Ok(store) = d.store() {
        if let Ok(count) = store.message_count(session_id) {
            if let Some(session) = d.session_mut(session_id) {
                session.stored_messages = count;
            }
        }
    }
    if let Ok(store) = d.store() {
        if let Some(settings) = settings {
            if let Err(error) = store.save_settings(session_id, settings) {
                log::warn!(
                    "cannot store the settings of session {}: {error}",
                    session_id
                );
            }
        }
        if let Err(error) = store.release_lease(session_id, std::process::id()) {
            log::warn!(
                "cannot release the lease of session {}: {error}",
                session_id
            );
        }
    }
}

/// The turn's usage as `_meta` carries it (the stable schema has no usage
/// field on the prompt response); what the provider never said is null,
/// not zero.
fn meta_usage(end: &TurnEnd) -> Value {
    // The turn's usage rides in `_meta`: the stable schema has no
    // usage field on the prompt response.
    let mut usage = json!({
        "inputTokens": end.usage.input_tokens,
        "outputTokens": end.usage.output_tokens,
        "cachedReadTokens": end.usage.cached_tokens,
        // Unknown (null) unless every call counted its reasoning: a
        // server that never says (llama.cpp, Ollama) is not a 0.
        "thoughtTokens": (end.usage.unreported.reasoning == 0)
            .then_some(end.usage.reasoning_tokens),
        "totalTokens": end.usage.input_tokens.saturating_add(end.usage.output_tokens),
        // Unknown (null) when a call's cost was: never a silent 0.
        "cost": end.spend.total(),
    });
    if end.usage_unknown {
        // The provider never said: unknown is null, not zero.
        for key in [
            "inputTokens",
            "outputTokens",
            "cachedReadTokens",
            "thoughtTokens",
            "totalTokens",
        ] {
            usage[key] = Value::Null;
        }
    }
    usage
}

/// The turn's usage in the unstable `Usage` shape of the prompt's answer
/// (`_meta.spindle.promptUsage`): `None` unless every model call said
/// what it used, and a finer count only when every call gave it.
fn prompt_usage(usage: &crate::provider::Usage, unknown: bool, whole: bool) -> Option<Value> {
    if unknown || !whole {
        return None;
    }
    let mut shape = json!({
        "totalTokens": usage.input_tokens.saturating_add(usage.output_tokens),
        "inputTokens": usage.input_tokens,
        "outputTokens": usage.output_tokens,
    });
    let finer = [
        (
            "thoughtTokens",
            usage.reasoning_tokens,
            usage.unreported.reasoning,
        ),
        (
            "cachedReadTokens",
            usage.cached_tokens,
            usage.unreported.cached,
        ),
        (
            "cachedWriteTokens",
            usage.cache_write_tokens,
            usage.unreported.cache_write,
        ),
    ];
    for (key, count, unreported) in finer {
        if unreported == 0 {
            shape[key] = json!(count);
        }
    }
    Some(shape)
}

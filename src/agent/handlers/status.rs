//! The status snapshot (docs/extensions.md, `_spindle/session/status`);
//! the numbered turn events are made in `events.rs`.

use super::cost::cost_quote;
use super::ext_params::store_error;
use crate::acp::spindle::results::{
    to_json, Cost, StatusHealth, StatusInbox, StatusJobs, StatusPlan, StatusResult, StatusSession,
    StatusTurn, StatusUsage,
};
use crate::acp::spindle::StatusParams;
use crate::agent::common::spend::currency;
use crate::agent::dispatcher::session::Outcome;
use crate::agent::dispatcher::Dispatcher;
use crate::rpc::RpcError;
use crate::store::inbox::ItemState;
use serde_json::{json, Value};

pub(super) fn status(d: &mut Dispatcher, params: StatusParams) -> Result<Value, RpcError> {
    let id = params.session_id;
    let registry = d.registry().ok();
    let stored = d.store()?.session(id).map_err(store_error)?;
    let waiting = d.store()?.inbox(id).map_err(store_error)?;
    let session = d.checked(id);
    let entry = registry
        .as_ref()
        .and_then(|r| r.model(&session.settings.model).cloned());
    let price = entry.as_ref().and_then(|e| e.config.price.clone());
    // The running turn's calls count as soon as each reported usage.
    let (usage, spent) = session.usage_so_far();
    let (plan, health, health_error, until, live_goal) = match session.live().lock() {
        Ok(live) => (
            live.plan.clone(),
            live.health.as_str(),
            live.health_error.clone(),
            live.waiting_until.clone(),
            live.goal.clone().filter(|_| session.running.is_some()),
        ),
        Err(_) => (Value::Null, "ok", None, None, None),
    };
    // Known only when every call's cost is (EXTENSIONS §6).
    let cost = spent.total().map(|amount| Cost {
        amount,
        currency: currency(price.as_ref()),
    });
    let quote = cost_quote((usage, spent), entry.as_ref(), registry.as_deref());
    let mcp: Vec<Value> = session.mcp.as_ref().map(|m| m.status()).unwrap_or_default();
    let count = |state: ItemState| waiting.iter().filter(|i| i.state == state).count();
    Ok(to_json(StatusResult {
        session: StatusSession {
            id,
            cwd: session.cwd(),
            title: session.title.as_deref(),
            created_at: stored.as_ref().map(|s| s.created_at.as_str()),
            updated_at: stored.as_ref().map(|s| s.updated_at.as_str()),
        },
        turn: StatusTurn {
            state: if session.running.is_some() {
                "running"
            } else {
                "idle"
            },
            epoch: session.epoch(),
            source: (session.epoch() != 0).then_some(session.turn_source().as_str()),
            started_at: session.turn_started_at(),
            outcome: session.last_outcome().map(Outcome::as_str),
        },
        model: &session.settings.model,
        mode: session.settings.mode.id(),
        preset: session.settings.preset.id(),
        approval: crate::agent::handlers::controls::policy_id(session.settings.policy),
        usage: StatusUsage {
            input_tokens: usage.input_tokens,
            output_tokens: usage.output_tokens,
            cached_read_tokens: usage.cached_tokens,
            reasoning_tokens: usage.reasoning_tokens,
            context_used: session.known.map(|k| k.tokens),
            context_size: entry.as_ref().map(|e| session.window_of(e)),
            cost,
            cost_quote: quote,
        },
        plan: StatusPlan {
            entries: if plan.is_array() { plan } else { json!([]) },
        },
        inbox: StatusInbox {
            pending: count(ItemState::Pending),
            uncertain: count(ItemState::Uncertain),
            paused: session.inbox().flags().0,
            recovered: session.inbox().flags().1,
        },
        goal: live_goal.or_else(|| session.goal.as_ref().map(|g| g.json())),
        jobs: StatusJobs {
            running: 0,
            total: 0,
        },
        mcp,
        health: StatusHealth {
            provider: health,
            error: health_error,
            until,
        },
    }))
}

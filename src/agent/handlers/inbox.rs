//! Steering (Spindle's `_spindle/session/steer` and the cross-agent
//! `_session/steering`) and the durable inbox (docs/extensions.md, "The inbox"): its
//! items live in the store, each change committed before the answer; the
//! dispatcher starts the next pending item when a session is idle, and the
//! running turn only takes the steers handed to it.

use super::events;
use super::ext_params::store_error;
use super::goals;
use super::inbox_hold;
use super::items::{freeze, item_json, summary_json, ITEM_CAP};
use super::prompting;
use super::prompting::TurnStart;
use crate::acp::spindle::{
    results::{
        to_json, EnqueueResult, InboxItemResult, InboxListResult, InboxMoveResult,
        InboxPausedResult, ItemStateResult, SteerResult, SteeringResult,
    },
    EnqueueParams, IdleBehavior, InboxListParams, InboxMoveParams, InboxSetPausedParams,
    InboxUpdateParams, ItemParams, SteerParams, SteeringParams,
};
use crate::agent::dispatcher::session::{InboxHold, Outcome};
use crate::agent::dispatcher::Dispatcher;
use crate::rpc::RpcError;
use crate::store::inbox::{Intent, Item, ItemState};
use crate::util::OrLogged;
use serde_json::{json, Value};

const INBOX_CAP: usize = 64;

pub(super) fn has_waiting_items(d: &mut Dispatcher, id: &str) -> bool {
    d.store()
        .ok()
        .and_then(|store| store.inbox(id).ok())
        .is_some_and(|items| items.iter().any(|i| i.state == ItemState::Pending))
}

/// Starts the first pending item when the session is idle and its
/// inbox runs; returns the item started.
pub(super) fn dispatch_next(d: &mut Dispatcher, id: &str) -> Option<String> {
    let session = d.session(id)?;
    // After the end of input, only `--drain` lets queued work run.
    let closing = d.closing() && !d.options().drain;
    if session.running.is_some()
        || session.is_closed()
        || session.inbox_held()
        || session.queued.is_some()
        || closing
    {
        return None;
    }
    let item = d
        .store()
        .ok()?
        .inbox(id)
        .ok()?
        .into_iter()
        .find(|i| i.state == ItemState::Pending)?;
    let blocks = item.prompt["frozen"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let source = if item.intent == Intent::Steer {
        crate::agent::dispatcher::session::TurnSource::Steer
    } else {
        crate::agent::dispatcher::session::TurnSource::Queue
    };
    let start = TurnStart {
        request: None,
        source,
        item: Some(item.item_id.clone()),
        wait: None,
        message_id: None,
    };
    match prompting::start_turn(d, id, &blocks, start) {
        Ok(()) => {
            events::event(
                d,
                id,
                "inbox",
                json!({"itemId": item.item_id, "change": "dispatched"}),
            );
            Some(item.item_id)
        }
        Err(error) => {
            log::warn!(
                "cannot start inbox item {}: {}",
                item.item_id,
                error.message
            );
            if let Ok(store) = d.store() {
                let _ = store.inbox_set_state(id, &item.item_id, ItemState::Failed);
            }
            inbox_hold::pause_inbox(d, id);
            events::event(
                d,
                id,
                "inbox",
                json!({"itemId": item.item_id, "change": "failed"}),
            );
            None
        }
    }
}

/// After a turn: its dispatched item is applied (failed on an error),
/// and the inbox hears of the steers it applied.
pub(super) fn after_turn_inbox(
    d: &mut Dispatcher,
    id: &str,
    dispatched: Option<&str>,
    applied: &[String],
    outcome: Outcome,
) {
    if let Some(item) = dispatched {
        let state = if outcome == Outcome::Failed {
            ItemState::Failed
        } else {
            ItemState::Applied
        };
        if let Ok(store) = d.store() {
            if let Err(error) = store.inbox_set_state(id, item, state) {
                log::warn!("cannot mark inbox item {item}: {error}");
            }
        }
        events::event(
            d,
            id,
            "inbox",
            json!({"itemId": item, "change": state.as_str()}),
        );
    }
    for item in applied {
        events::event(d, id, "inbox", json!({"itemId": item, "change": "applied"}));
    }
}

/// On load or resume: items left `dispatched` by a process that
/// stopped become `uncertain`; an inbox with waiting items comes back
/// paused and marked recovered, so the user looks first.
pub(super) fn recover_inbox(d: &mut Dispatcher, id: &str) {
    goals::recover_goal(d, id);
    let Ok(store) = d.store() else { return };
    let flags = store
        .inbox_flags(id)
        .or_logged("cannot read a session's inbox flags");
    let waiting = store.recover_inbox(id).unwrap_or(0);
    if let Some(session) = d.session_mut(id) {
        session.set_inbox(if waiting > 0 {
            InboxHold::Recovered
        } else if flags.paused {
            InboxHold::Paused
        } else {
            InboxHold::Open
        });
    }
    if waiting > 0 {
        inbox_hold::save_flags(d, id);
    }
}

/// The folders a session's workspace is made of: its own, then the
/// extra roots it was given.
fn workspace_roots(d: &Dispatcher, id: &str) -> Vec<std::path::PathBuf> {
    d.session(id)
        .map(|session| {
            std::iter::once(session.cwd().to_path_buf())
                .chain(session.settings.extra_roots.iter().cloned())
                .collect()
        })
        .unwrap_or_default()
}

// -----------------------------------------------------------------
// Steering
// -----------------------------------------------------------------

/// A steer: committed as an inbox item first, then handed to the
/// running turn (applied at its next boundary) or, when idle, queued
/// ahead of the follow-ups (and dispatched at once when it can be).
pub(super) fn steer(d: &mut Dispatcher, params: SteerParams) -> Result<SteerResult, RpcError> {
    let SteerParams {
        session_id: id,
        prompt: blocks,
        idempotency_key: key,
    } = params;
    let (item, existing) = add_item(d, id, &blocks, Intent::Steer, key)?;
    inbox_hold::unpause_inbox(d, id);
    let session = d.checked(id);
    let running = session
        .running
        .as_ref()
        .is_some_and(|r| !r.cancel.is_cancelled());
    if existing {
        let disposition = if item.state == ItemState::Pending && running {
            "steer_accepted"
        } else {
            "queued_followup"
        };
        return Ok(SteerResult {
            item_id: item.item_id,
            disposition,
        });
    }
    if running {
        if let Ok(mut live) = session.live().lock() {
            let text = crate::agent::common::content::read_prompt(
                item.prompt["frozen"]
                    .as_array()
                    .map(Vec::as_slice)
                    .unwrap_or(&[]),
                session.cwd(),
            )
            .map(|input| input.text)
            .or_logged("cannot read the text of a steering message");
            live.steers
                .push_back((item.item_id.clone(), text, blocks.clone()));
        }
        events::event(
            d,
            id,
            "inbox",
            json!({"itemId": item.item_id, "change": "steer"}),
        );
        return Ok(SteerResult {
            item_id: item.item_id,
            disposition: "steer_accepted",
        });
    }
    events::event(
        d,
        id,
        "inbox",
        json!({"itemId": item.item_id, "change": "queued"}),
    );
    dispatch_next(d, id);
    Ok(SteerResult {
        item_id: item.item_id,
        disposition: "queued_followup",
    })
}

/// `_session/steering`: the convention other agents' clients use.
pub(super) fn steering(d: &mut Dispatcher, params: SteeringParams) -> Result<Value, RpcError> {
    let running = d.checked(params.steer.session_id).running.is_some();
    if !running && params.idle == IdleBehavior::PromptRequired {
        return Ok(to_json(SteeringResult {
            outcome: "promptRequired",
            reason: Some("noRunningTurn"),
        }));
    }
    let disposition = steer(d, params.steer)?.disposition;
    let outcome = if disposition == "steer_accepted" {
        "injected"
    } else {
        "startedNewTurn"
    };
    Ok(to_json(SteeringResult {
        outcome,
        reason: None,
    }))
}

// -----------------------------------------------------------------
// The inbox
// -----------------------------------------------------------------

/// Commits a new item (or finds the one with the same idempotency
/// key): returns it and whether it existed.
fn add_item(
    d: &mut Dispatcher,
    id: &str,
    blocks: &[Value],
    intent: Intent,
    key: Option<&str>,
) -> Result<(Item, bool), RpcError> {
    if let Some(key) = key {
        // Its length was checked with the params.
        if let Some(item) = d.store()?.inbox_by_key(id, key).map_err(store_error)? {
            return Ok((item, true));
        }
    }
    let bytes = Value::Array(blocks.to_vec()).to_string();
    if bytes.chars().count() > ITEM_CAP {
        return Err(RpcError::invalid_params(format!(
            "prompt: the item is {} characters; the most is {ITEM_CAP}",
            bytes.chars().count()
        ))
        .with_data(json!({"code": "too_large"})));
    }
    // The blocks must be a prompt the agent can run.
    let cwd = d.checked(id).cwd().to_path_buf();
    crate::agent::common::content::read_prompt(blocks, &cwd)?;
    let roots = workspace_roots(d, id);
    let waiting = d.store()?.inbox(id).map_err(store_error)?;
    if waiting
        .iter()
        .filter(|i| i.state == ItemState::Pending)
        .count()
        >= INBOX_CAP
    {
        return Err(RpcError::invalid_request(format!(
            "the inbox of session {id} is full ({INBOX_CAP} pending items); wait, or delete some"
        ))
        .with_data(json!({"code": "inbox_full"})));
    }
    let item = Item {
        item_id: format!("item_{}", crate::util::random_hex()),
        intent,
        state: ItemState::Pending,
        prompt: json!({"blocks": blocks, "frozen": freeze(blocks, &roots)}),
        bytes: bytes.len() as i64,
        idempotency_key: key.map(str::to_string),
        created_at: crate::clock::now_rfc3339(),
        position: 0,
    };
    let position = d.store()?.inbox_add(id, &item).map_err(store_error)?;
    Ok((Item { position, ..item }, false))
}

pub(super) fn enqueue(d: &mut Dispatcher, params: EnqueueParams) -> Result<Value, RpcError> {
    let id = params.session_id;
    let key = params.idempotency_key;
    let (item, existing) = add_item(d, id, &params.prompt, params.intent.into(), key)?;
    if !existing {
        inbox_hold::unpause_inbox(d, id);
        events::event(
            d,
            id,
            "inbox",
            json!({"itemId": item.item_id, "change": "queued"}),
        );
    }
    let started = !existing && dispatch_next(d, id).as_deref() == Some(item.item_id.as_str());
    let position = d
        .store()?
        .inbox(id)
        .map_err(store_error)?
        .iter()
        .filter(|i| i.state == ItemState::Pending)
        .position(|i| i.item_id == item.item_id);
    Ok(to_json(EnqueueResult {
        item_id: &item.item_id,
        disposition: if started {
            "started"
        } else if existing {
            item.state.as_str()
        } else {
            "queued"
        },
        position,
        paused: d.checked(id).inbox_held(),
        idempotent: existing,
    }))
}

pub(super) fn inbox_list(d: &mut Dispatcher, params: InboxListParams) -> Result<Value, RpcError> {
    let id = params.session_id;
    let items = d.store()?.inbox(id).map_err(store_error)?;
    let session = d.checked(id);
    Ok(to_json(InboxListResult {
        items: items.iter().map(summary_json).collect(),
        capacity: INBOX_CAP,
        paused: session.inbox_held(),
        recovered: session.inbox() == InboxHold::Recovered,
    }))
}

fn find_item(d: &mut Dispatcher, id: &str, item_id: &str) -> Result<Item, RpcError> {
    match d.store()?.inbox_item(id, item_id).map_err(store_error)? {
        Some(item) if item.state != ItemState::Deleted => Ok(item),
        _ => Err(
            RpcError::invalid_params(format!("itemId: no item {item_id:?} in session {id}"))
                .with_data(json!({"code": "unknown_item"})),
        ),
    }
}

fn pending_item(d: &mut Dispatcher, id: &str, item_id: &str) -> Result<Item, RpcError> {
    let item = find_item(d, id, item_id)?;
    if item.state != ItemState::Pending {
        return Err(RpcError::invalid_request(format!(
            "item {} is {}, not pending; only pending items change",
            item.item_id, item.state
        ))
        .with_data(json!({"code": "not_pending"})));
    }
    Ok(item)
}

pub(super) fn inbox_get(d: &mut Dispatcher, params: ItemParams) -> Result<Value, RpcError> {
    let item = find_item(d, params.session_id, params.item_id)?;
    Ok(to_json(InboxItemResult {
        item: item_json(&item),
    }))
}

pub(super) fn inbox_update(
    d: &mut Dispatcher,
    params: InboxUpdateParams,
) -> Result<Value, RpcError> {
    let InboxUpdateParams {
        item: ItemParams {
            session_id: id,
            item_id,
        },
        prompt: blocks,
    } = params;
    let item = pending_item(d, id, item_id)?;
    let bytes = Value::Array(blocks.clone()).to_string();
    if bytes.chars().count() > ITEM_CAP {
        return Err(RpcError::invalid_params("prompt: the item is too large")
            .with_data(json!({"code": "too_large"})));
    }
    let cwd = d.checked(id).cwd().to_path_buf();
    crate::agent::common::content::read_prompt(&blocks, &cwd)?;
    let prompt = json!({"blocks": blocks, "frozen": freeze(&blocks, &workspace_roots(d, id))});
    d.store()?
        .inbox_set_prompt(id, &item.item_id, &prompt, bytes.len() as i64)
        .map_err(store_error)?;
    events::event(
        d,
        id,
        "inbox",
        json!({"itemId": item.item_id, "change": "updated"}),
    );
    let item = find_item(d, id, item_id)?;
    Ok(to_json(InboxItemResult {
        item: item_json(&item),
    }))
}

pub(super) fn inbox_delete(d: &mut Dispatcher, params: ItemParams) -> Result<Value, RpcError> {
    let id = params.session_id;
    let item = pending_item(d, id, params.item_id)?;
    d.store()?
        .inbox_set_state(id, &item.item_id, ItemState::Deleted)
        .map_err(store_error)?;
    events::event(
        d,
        id,
        "inbox",
        json!({"itemId": item.item_id, "change": "deleted"}),
    );
    Ok(to_json(ItemStateResult {
        item_id: &item.item_id,
        state: "deleted",
    }))
}

pub(super) fn inbox_move(d: &mut Dispatcher, params: InboxMoveParams) -> Result<Value, RpcError> {
    let id = params.item.session_id;
    let item = pending_item(d, id, params.item.item_id)?;
    let to = params.to_index as usize;
    let mut order: Vec<String> = d
        .store()?
        .inbox(id)
        .map_err(store_error)?
        .into_iter()
        .filter(|i| i.state == ItemState::Pending)
        .map(|i| i.item_id)
        .collect();
    if to >= order.len() {
        return Err(RpcError::invalid_params(format!(
            "toIndex: {to} is out of range (0 to {})",
            order.len().saturating_sub(1)
        ))
        .with_data(json!({"code": "out_of_range"})));
    }
    order.retain(|i| *i != item.item_id);
    order.insert(to, item.item_id.clone());
    d.store()?.inbox_reorder(id, &order).map_err(store_error)?;
    events::event(
        d,
        id,
        "inbox",
        json!({"itemId": item.item_id, "change": "moved"}),
    );
    Ok(to_json(InboxMoveResult {
        item_id: &item.item_id,
        position: to,
    }))
}

pub(super) fn inbox_set_paused(
    d: &mut Dispatcher,
    params: InboxSetPausedParams,
) -> Result<Value, RpcError> {
    let id = params.session_id;
    if params.paused {
        inbox_hold::pause_inbox(d, id);
    } else {
        inbox_hold::unpause_inbox(d, id);
        dispatch_next(d, id);
    }
    Ok(to_json(InboxPausedResult {
        paused: d.checked(id).inbox_held(),
    }))
}

pub(super) fn inbox_retry(d: &mut Dispatcher, params: ItemParams) -> Result<Value, RpcError> {
    let id = params.session_id;
    let item = find_item(d, id, params.item_id)?;
    if !matches!(item.state, ItemState::Uncertain | ItemState::Failed) {
        return Err(RpcError::invalid_request(format!(
            "item {} is {}; only uncertain or failed items are retried",
            item.item_id, item.state
        ))
        .with_data(json!({"code": "not_retryable"})));
    }
    d.store()?
        .inbox_set_state(id, &item.item_id, ItemState::Pending)
        .map_err(store_error)?;
    events::event(
        d,
        id,
        "inbox",
        json!({"itemId": item.item_id, "change": "retried"}),
    );
    Ok(to_json(ItemStateResult {
        item_id: &item.item_id,
        state: "pending",
    }))
}

pub(super) fn inbox_refresh(d: &mut Dispatcher, params: ItemParams) -> Result<Value, RpcError> {
    let id = params.session_id;
    let item = pending_item(d, id, params.item_id)?;
    let blocks = item.prompt["blocks"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let prompt = json!({"blocks": blocks, "frozen": freeze(&blocks, &workspace_roots(d, id))});
    d.store()?
        .inbox_set_prompt(id, &item.item_id, &prompt, item.bytes)
        .map_err(store_error)?;
    events::event(
        d,
        id,
        "inbox",
        json!({"itemId": item.item_id, "change": "refreshed"}),
    );
    let item = find_item(d, id, params.item_id)?;
    Ok(to_json(InboxItemResult {
        item: item_json(&item),
    }))
}

impl From<crate::acp::spindle::Intent> for Intent {
    fn from(intent: crate::acp::spindle::Intent) -> Intent {
        match intent {
            crate::acp::spindle::Intent::Steer => Intent::Steer,
            crate::acp::spindle::Intent::Followup => Intent::Followup,
        }
    }
}

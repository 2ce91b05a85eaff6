//! The requests the dispatcher answers, one file per area: the handshake
//! (`initialize`, `authenticate`; `handshake.rs`), the session lifecycle
//! (new, load with replay, resume, list, close, delete; `lifecycle.rs`;
//! `session/cancel` in `cancel.rs`; the
//! title and status of a session in `titles.rs`, with a project's own
//! defaults for a new session and the notices of what a session really
//! starts with in `project.rs`), a session's MCP server that needs sign-in
//! (`sign_in.rs`), `SessionEnd` hooks (`hooks.rs`), the controls (modes and
//! config options; `controls.rs`) and prompting (`session/prompt`;
//! `prompting.rs`, with `prompting/slash.rs` the slash commands,
//! `prompting/turn_start.rs` what a turn starts with and
//! `prompting/turn_end.rs` the answer when it reports).
//! A handler is a plain function `fn(d: &mut Dispatcher, params: P) ->
//! Result<R, RpcError>` over the `Dispatcher`, the only owner of session
//! state, which it reaches through the dispatcher's methods (its fields
//! are private). `routes.rs` is the one typed table from method name to
//! handler (stable and vendor alike, each with its params and result
//! types, decoded and encoded there; vendor discovery derived from it),
//! and this file sends each request there. A handler that calls another
//! file's function names it by path (`reload::reload_now(d, id)`), so the
//! imports show which file depends on which: none is a method of the
//! `Dispatcher`. What the dispatcher's loop hands on (requests and
//! notifications, a turn's end, a job's or goal's change, the agent's
//! end) reaches them through `EVENTS`, the table of function pointers the
//! agent gives the dispatcher at start, since the dispatcher never names
//! this module. A turn cut off by a stop is closed in `interrupted.rs`. A handler whose answer a helper
//! thread works out (`resources.rs`) takes a `Later` from `answer_later`
//! and returns `None`: the helper posts the result back and the
//! dispatcher answers, or answers -32800 first if the client cancels the
//! request.
//!
//! The vendor extensions of docs/extensions.md, one file per subject:
//! turn events (`events.rs`), the status snapshot (`status.rs`, with the
//! cost quote in `cost.rs`), steering and the inbox (`inbox.rs`; pausing
//! and resuming it in `inbox_hold.rs`; an item's prompt, frozen links and
//! JSON in `items.rs`), goals (`goals.rs`), background jobs and
//! their transcripts (`jobs.rs`), resource windows over line indexes
//! (`resources.rs`, whose `spindle-index` helper indexes a big file off the
//! dispatcher's thread), catalogs and invoke (`catalogs.rs`), reload
//! (`reload.rs`), rewind
//! to a prompt (`rewind.rs`: its files from the checkpoints, the
//! conversation cut, all or nothing); `ext_params.rs` decodes their params
//! into the types of `acp/spindle.rs` (the session checked open first).

mod cancel;
mod catalogs;
mod controls;
mod cost;
mod events;
mod ext_params;
mod goals;
mod handshake;
mod hooks;
mod inbox;
mod inbox_hold;
mod interrupted;
mod items;
mod jobs;
mod lifecycle;
mod project;
mod prompting;
mod reload;
mod resources;
mod rewind;
mod routes;
mod sign_in;
mod status;
mod titles;

use crate::acp::{self, method};
use crate::agent::dispatcher::params::decode;
use crate::agent::dispatcher::{Dispatcher, EventRoutes};
use crate::rpc::{RequestId, RpcError};
use ext_params::bad;
use routes::Handler;
use serde_json::Value;

/// Where the dispatcher's loop hands what it hears: given to it when the
/// agent starts, as the dispatcher never names this module.
pub(in crate::agent) const EVENTS: EventRoutes = EventRoutes {
    request: handle_request,
    notification: handle_notification,
    turn_ended: prompting::turn_end::on_turn_end,
    job_changed: jobs::job_changed,
    goal_progress: goals::goal_progress,
    plan_approved: controls::plan_approved,
    resume_wait: lifecycle::resume_wait,
    exiting: hooks::end_hooks_at_exit,
};

fn handle_notification(d: &mut Dispatcher, method: &str, params: Value) {
    match method {
        method::SESSION_CANCEL => match decode::<acp::CancelNotification>(params) {
            Ok(cancel) => cancel::cancel_session(d, &cancel.session_id),
            Err(error) => log::warn!("ignored session/cancel: {error}"),
        },
        method::CANCEL_REQUEST => match decode::<acp::CancelRequestNotification>(params) {
            Ok(cancel) => d.cancel_request(&cancel.request_id),
            Err(error) => log::warn!("ignored $/cancel_request: {error}"),
        },
        other => log::debug!("ignored notification {other}"),
    }
}

/// Returns the answer, or `None` when a worker will answer later.
fn handle_request(
    d: &mut Dispatcher,
    id: &RequestId,
    method: &str,
    params: Value,
) -> Option<Result<Value, RpcError>> {
    if method != method::INITIALIZE && d.client().is_none() {
        return Some(Err(RpcError::invalid_request(format!(
            "{method} was sent before initialize; send initialize first"
        ))));
    }
    let Some(route) = routes::route(method) else {
        // A vendor-looking name with params that are not an object is
        // refused for its params, as a vendor method's would be.
        if method.starts_with('_') && !(params.is_null() || params.is_object()) {
            return Some(Err(bad("params", "must be an object")));
        }
        return Some(Err(RpcError::method_not_found(method)));
    };
    match route.handler {
        Handler::Now(handler) => Some(handler(d, params)),
        Handler::Later(handler) => handler(d, id, params),
    }
}

//! `session/cancel`: the running turn of a session stops (and what is
//! queued for it waits), or a subagent's work stops while its parent's
//! turn goes on.

use super::inbox_hold;
use crate::agent::dispatcher::session::Session;
use crate::agent::dispatcher::Dispatcher;

pub(super) fn cancel_session(d: &mut Dispatcher, session_id: &str) {
    match d.session(session_id) {
        Some(Session {
            running: Some(running),
            ..
        }) => {
            log::debug!("cancelling the turn of session {session_id}");
            running.cancel.cancel();
        }
        Some(_) => {
            log::debug!("session/cancel for {session_id}: no turn is running");
            return;
        }
        None => {
            if !cancel_child(d, session_id) {
                log::warn!("session/cancel for unknown session {session_id}");
            }
            return;
        }
    }
    // A cancel stops what is queued too, until the user sends input,
    // and the jobs the cancelled turn started.
    if let Some(session) = d.session(session_id) {
        session.jobs().kill_all(Some(session.epoch()));
    }
    inbox_hold::pause_inbox(d, session_id);
}

/// Cancels a running subagent's work if `session_id` names its child
/// session; the parent's turn goes on. False when it names none.
fn cancel_child(d: &mut Dispatcher, session_id: &str) -> bool {
    let Some((parent, key)) = crate::acp::fit::parent_of(session_id) else {
        return false;
    };
    let Some(session) = d.session(parent) else {
        return false;
    };
    let live = crate::cancel::lock(session.live());
    match live.children.0.iter().find(|(running, _)| running == key) {
        Some((_, stop)) => {
            log::debug!("cancelling the subagent {session_id}");
            stop.cancel();
        }
        // Its work has ended already: nothing to cancel.
        None => log::debug!("session/cancel for {session_id}: the subagent is idle"),
    }
    true
}

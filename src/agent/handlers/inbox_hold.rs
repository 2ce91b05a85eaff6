//! Holding a session's inbox: paused by a cancel, a failed item, an end
//! other than `end_turn` or the client; resumed by the user's next prompt
//! or the client; the hold kept in the store.

use super::events;
use crate::agent::dispatcher::session::InboxHold;
use crate::agent::dispatcher::Dispatcher;
use crate::store::inbox::Flags;
use serde_json::json;

/// Holds the inbox: no pending item starts until it is resumed.
pub(super) fn pause_inbox(d: &mut Dispatcher, id: &str) {
    let Some(session) = d.session_mut(id) else {
        return;
    };
    if session.inbox_held() {
        return;
    }
    session.set_inbox(InboxHold::Paused);
    save_flags(d, id);
    events::event(d, id, "inbox", json!({"change": "paused"}));
}

/// Lets the inbox run again.
pub(super) fn unpause_inbox(d: &mut Dispatcher, id: &str) {
    let Some(session) = d.session_mut(id) else {
        return;
    };
    if !session.inbox_held() {
        return;
    }
    session.set_inbox(InboxHold::Open);
    save_flags(d, id);
    events::event(d, id, "inbox", json!({"change": "resumed"}));
}

/// Stores the session's hold.
pub(super) fn save_flags(d: &mut Dispatcher, id: &str) {
    let Some(session) = d.session(id) else {
        return;
    };
    let flags = Flags {
        paused: session.inbox_held(),
        recovered: session.inbox() == InboxHold::Recovered,
    };
    if let Ok(store) = d.store() {
        if let Err(error) = store.set_inbox_flags(id, flags) {
            log::warn!("cannot store the inbox flags of session {id}: {error}");
        }
    }
}

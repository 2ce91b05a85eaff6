//! The turn's place in the store: the user's prompt committed before the
//! first model request, and each completed step (what the editor saw and
//! the messages the conversation gained) before the next one.

use super::updates::Updates;
use crate::acp::{ContentChunk, SessionUpdate};
use crate::provider::Message;
use crate::store::inbox::ItemState;
use crate::store::Store;
use serde_json::Value;
use std::cell::RefCell;
use std::path::Path;

/// The turn's place in the store: the connection and the turn number, and
/// how much of the turn's messages is already committed.
pub(super) struct Record {
    pub store: Store,
    pub turn: i64,
    pub committed: usize,
}

impl Record {
    /// Opens the store and commits the start of the turn: the user's
    /// prompt (as its blocks were sent, and `user`, the message the
    /// conversation gains), before any provider request.
    pub(super) fn begin(
        db: Option<&Path>,
        session_id: &str,
        prompt_blocks: &[Value],
        client_id: Option<&str>,
        user: Vec<Message>,
        updates: &RefCell<Updates>,
        marks: &[(String, ItemState)],
    ) -> Option<Record> {
        let path = db?;
        let mut store = match Store::open(path) {
            Ok(store) => store,
            Err(error) => {
                log::error!("turn of session {} is not stored: {error}", session_id);
                return None;
            }
        };
        // One prompt is one user message, whatever number of blocks it
        // has: its chunks share one id, so a replay shows one message.
        // The client's own id when it gave one (a rewind names it).
        let message_id = client_id
            .map(str::to_string)
            .unwrap_or_else(|| format!("user_{}", crate::util::random_hex()));
        let mut events: Vec<String> = prompt_blocks
            .iter()
            .map(|block| {
                SessionUpdate::UserMessageChunk(ContentChunk {
                    content: block.clone(),
                    message_id: Some(message_id.clone()),
                })
                .into_value()
                .to_string()
            })
            .collect();
        events.extend(updates.borrow_mut().take_kept());
        match store.begin_turn_marking(session_id, &events, &user, marks) {
            Ok(number) => Some(Record {
                store,
                turn: number,
                committed: 0,
            }),
            Err(error) => {
                log::error!("cannot store the turn of session {}: {error}", session_id);
                None
            }
        }
    }

    /// Commits what the turn said and added since the last commit, and
    /// marks inbox items applied in the same transaction (steers that
    /// became user messages of this step).
    pub(super) fn step_marking(
        &mut self,
        session_id: &str,
        updates: &RefCell<Updates>,
        added: &[Message],
        applied: &[String],
    ) {
        let events = updates.borrow_mut().take_kept();
        let marks: Vec<(String, ItemState)> = applied
            .iter()
            .map(|id| (id.clone(), ItemState::Applied))
            .collect();
        if let Err(error) = self.store.append_marking(
            session_id,
            self.turn,
            &events,
            &added[self.committed..],
            &marks,
        ) {
            log::error!("cannot store a step of session {session_id}: {error}");
        }
        self.committed = added.len();
    }
}

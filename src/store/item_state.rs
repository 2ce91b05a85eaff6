//! Where an inbox item is. A file of its own: the store sets an item's
//! state in the same transaction as a turn's messages
//! (`begin_turn_marking`), and needs nothing else of the inbox for it.

use super::words::stored_words;

/// Where an item is: `pending` → `dispatched` → `applied`, or
/// `uncertain` (dispatched when a process stopped), `failed`, `deleted`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ItemState {
    Pending,
    Dispatched,
    Applied,
    Uncertain,
    Failed,
    Deleted,
}

stored_words!(ItemState {
    Pending => "pending",
    Dispatched => "dispatched",
    Applied => "applied",
    Uncertain => "uncertain",
    Failed => "failed",
    Deleted => "deleted",
});

//! The durable inbox: a session's ordered list of user input waiting for
//! a turn (steers and follow-ups). Every change is committed before the
//! agent answers; dispatching an item and committing its user message
//! happen in one transaction (`begin_turn_from`), so a crash can neither
//! apply an item twice nor lose it.

pub(crate) use super::item_state::ItemState;
use super::words::stored_words;
use super::{Result, Store, StoreError, StoreErrorKind};
use rusqlite::{params, OptionalExtension};
use serde_json::Value;

/// What an item asks for (docs/extensions.md, "The inbox").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Intent {
    /// Guidance for the running turn, applied at its next boundary.
    Steer,
    /// A prompt for a turn of its own, after the running one.
    Followup,
}

stored_words!(Intent {
    Steer => "steer",
    Followup => "followup",
});

/// One item.
#[derive(Debug, Clone, PartialEq)]
pub struct Item {
    pub item_id: String,
    pub intent: Intent,
    pub state: ItemState,
    /// The prompt's content blocks, as sent (links frozen into text).
    pub prompt: Value,
    pub bytes: i64,
    pub idempotency_key: Option<String>,
    pub created_at: String,
    /// Order among the session's items (lower first).
    pub position: i64,
}

/// The inbox's flags.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Flags {
    pub paused: bool,
    /// Loaded with pending or uncertain items after the agent stopped.
    pub recovered: bool,
}

fn row_to_item(row: &rusqlite::Row<'_>) -> rusqlite::Result<Item> {
    let prompt: String = row.get(3)?;
    Ok(Item {
        item_id: row.get(0)?,
        intent: row.get(1)?,
        state: row.get(2)?,
        prompt: serde_json::from_str(&prompt).unwrap_or(Value::Null),
        bytes: row.get(4)?,
        idempotency_key: row.get(5)?,
        created_at: row.get(6)?,
        position: row.get(7)?,
    })
}

const COLUMNS: &str =
    "item_id, intent, state, prompt, bytes, idempotency_key, created_at, position";

impl Store {
    /// Every item of the session that is not deleted or applied, in order.
    pub fn inbox(&self, session: &str) -> Result<Vec<Item>> {
        let mut statement = self.connection.prepare_cached(&format!(
            "SELECT {COLUMNS} FROM inbox WHERE session_id = ?1
             AND state NOT IN ('deleted', 'applied') ORDER BY position"
        ))?;
        let rows = statement.query_map([session], row_to_item)?;
        Ok(rows.collect::<rusqlite::Result<Vec<_>>>()?)
    }

    pub fn inbox_item(&self, session: &str, item_id: &str) -> Result<Option<Item>> {
        Ok(self
            .connection
            .query_row(
                &format!("SELECT {COLUMNS} FROM inbox WHERE session_id = ?1 AND item_id = ?2"),
                params![session, item_id],
                row_to_item,
            )
            .optional()?)
    }

    pub fn inbox_by_key(&self, session: &str, key: &str) -> Result<Option<Item>> {
        Ok(self
            .connection
            .query_row(
                &format!(
                    "SELECT {COLUMNS} FROM inbox WHERE session_id = ?1 AND idempotency_key = ?2"
                ),
                params![session, key],
                row_to_item,
            )
            .optional()?)
    }

    /// Adds an item; steers go before every pending follow-up.
    pub fn inbox_add(&mut self, session: &str, item: &Item) -> Result<i64> {
        let transaction = self
            .connection
            .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
        let position: i64 = if item.intent == Intent::Steer {
            // Just before the first pending follow-up: shift those down.
            let first: Option<i64> = transaction
                .query_row(
                    "SELECT MIN(position) FROM inbox WHERE session_id = ?1
                     AND intent = 'followup' AND state = 'pending'",
                    [session],
                    |row| row.get(0),
                )
                .optional()?
                .flatten();
            match first {
                Some(first) => {
                    transaction.execute(
                        "UPDATE inbox SET position = position + 1
                         WHERE session_id = ?1 AND position >= ?2",
                        params![session, first],
                    )?;
                    first
                }
                None => next_position(&transaction, session)?,
            }
        } else {
            next_position(&transaction, session)?
        };
        transaction.execute(
            "INSERT INTO inbox (session_id, item_id, intent, state, prompt, bytes,
                                idempotency_key, created_at, position)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
            params![
                session,
                item.item_id,
                item.intent,
                item.state,
                item.prompt.to_string(),
                item.bytes,
                item.idempotency_key,
                item.created_at,
                position
            ],
        )?;
        transaction.commit()?;
        Ok(position)
    }

    pub fn inbox_set_state(&self, session: &str, item_id: &str, state: ItemState) -> Result<()> {
        self.connection.execute(
            "UPDATE inbox SET state = ?3 WHERE session_id = ?1 AND item_id = ?2",
            params![session, item_id, state],
        )?;
        Ok(())
    }

    pub fn inbox_set_prompt(
        &self,
        session: &str,
        item_id: &str,
        prompt: &Value,
        bytes: i64,
    ) -> Result<()> {
        self.connection.execute(
            "UPDATE inbox SET prompt = ?3, bytes = ?4 WHERE session_id = ?1 AND item_id = ?2",
            params![session, item_id, prompt.to_string(), bytes],
        )?;
        Ok(())
    }

    /// Puts the pending items in this order (their ids), keeping the
    /// positions the others hold.
    pub fn inbox_reorder(&mut self, session: &str, order: &[String]) -> Result<()> {
        let transaction = self
            .connection
            .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
        let pending: Vec<(String, i64)> = {
            let mut statement = transaction.prepare(
                "SELECT item_id, position FROM inbox WHERE session_id = ?1 AND state = 'pending'
                 ORDER BY position",
            )?;
            let rows = statement.query_map([session], |row| Ok((row.get(0)?, row.get(1)?)))?;
            rows.collect::<rusqlite::Result<Vec<_>>>()?
        };
        // Exactly the pending items, each once: checked here, inside the
        // transaction, so a delivered item can never be given a position.
        let mut given: Vec<&str> = order.iter().map(String::as_str).collect();
        given.sort_unstable();
        let mut have: Vec<&str> = pending.iter().map(|(id, _)| id.as_str()).collect();
        have.sort_unstable();
        if given != have {
            return Err(StoreError::new(
                StoreErrorKind::Conflict,
                "the pending items changed meanwhile",
            ));
        }
        let mut positions: Vec<i64> = pending.iter().map(|(_, position)| *position).collect();
        positions.sort_unstable();
        for (id, position) in order.iter().zip(&positions) {
            // Out of the way first, so no two items ever share a position.
            transaction.execute(
                "UPDATE inbox SET position = -1 - ?3 WHERE session_id = ?1 AND item_id = ?2",
                params![session, id, position],
            )?;
        }
        transaction.execute(
            "UPDATE inbox SET position = -1 - position WHERE session_id = ?1 AND position < 0",
            [session],
        )?;
        transaction.commit()?;
        Ok(())
    }

    pub fn inbox_flags(&self, session: &str) -> Result<Flags> {
        Ok(self
            .connection
            .query_row(
                "SELECT paused, recovered FROM inbox_flags WHERE session_id = ?1",
                [session],
                |row| {
                    Ok(Flags {
                        paused: row.get(0)?,
                        recovered: row.get(1)?,
                    })
                },
            )
            .optional()?
            .unwrap_or_default())
    }

    pub fn set_inbox_flags(&self, session: &str, flags: Flags) -> Result<()> {
        self.connection.execute(
            "INSERT INTO inbox_flags (session_id, paused, recovered) VALUES (?1, ?2, ?3)
             ON CONFLICT (session_id) DO UPDATE SET paused = ?2, recovered = ?3",
            params![session, flags.paused, flags.recovered],
        )?;
        Ok(())
    }

    /// After the agent stopped: items left `dispatched` may or may not
    /// have run; they become `uncertain`. Returns how many items wait
    /// (pending or uncertain).
    pub fn recover_inbox(&self, session: &str) -> Result<usize> {
        self.connection.execute(
            "UPDATE inbox SET state = 'uncertain' WHERE session_id = ?1 AND state = 'dispatched'",
            [session],
        )?;
        let waiting: i64 = self.connection.query_row(
            "SELECT COUNT(*) FROM inbox WHERE session_id = ?1 AND state IN ('pending', 'uncertain')",
            [session],
            |row| row.get(0),
        )?;
        Ok(waiting as usize)
    }
}

fn next_position(transaction: &rusqlite::Transaction<'_>, session: &str) -> Result<i64> {
    let last: Option<i64> = transaction
        .query_row(
            "SELECT MAX(position) FROM inbox WHERE session_id = ?1",
            [session],
            |row| row.get(0),
        )
        .optional()?
        .flatten();
    Ok(last.map_or(0, |p| p + 1))
}

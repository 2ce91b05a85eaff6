//! A turn parked until a provider's limit resets: one record per session
//! (when, why, and what the turn carried), kept while the turn waits so
//! that a process that stops meanwhile leaves it for the next one.

use super::{Result, Store};
use rusqlite::{params, OptionalExtension};
use serde_json::Value;

impl Store {
    /// The session's waiting turn, if one was parked.
    pub fn wait(&self, id: &str) -> Result<Option<Value>> {
        let text: Option<String> = self
            .connection
            .query_row(
                "SELECT wait FROM waits WHERE session_id = ?1",
                [id],
                |row| row.get(0),
            )
            .optional()?;
        Ok(text.and_then(|t| serde_json::from_str(&t).ok()))
    }

    /// Records (or replaces) the session's waiting turn.
    pub fn save_wait(&self, id: &str, wait: &Value) -> Result<()> {
        self.connection.execute(
            "INSERT INTO waits (session_id, wait) VALUES (?1, ?2)
             ON CONFLICT (session_id) DO UPDATE SET wait = ?2",
            params![id, wait.to_string()],
        )?;
        Ok(())
    }

    /// The wait is over (the request went out, or the turn ended).
    pub fn clear_wait(&self, id: &str) -> Result<()> {
        self.connection
            .execute("DELETE FROM waits WHERE session_id = ?1", [id])?;
        Ok(())
    }
}

//! The session store: one SQLite database (WAL mode) holding every
//! session's record, its transcript as the editor saw it, and its
//! conversation as the model needs it.
//!
//! Several Spindle processes may share one database. Each thread that
//! writes opens its own connection; SQLite's locking and the busy timeout
//! serialise writers, and a session running a turn is leased to its process.
//! Opening, creating and migrating the file are safe when processes do
//! them at once (`open.rs`); migrations run forward (`PRAGMA
//! user_version`), and a newer database is refused untouched.
//!
//! This file holds sessions, turns, the transcript (`events`: every update
//! the editor saw, chunks of a message merged), the conversation
//! (`messages`) and leases. Beside it: `checkpoints.rs` (each turn's files
//! before and after, blobs by content, pruning), `inbox.rs` (the durable
//! inbox; `item_state.rs` an item's state, which a turn sets here),
//! `waits.rs` (a turn's wait for a provider's limit, kept while it
//! waits, for the next process if this one stops), `rewind.rs` (the prompts a
//! session can go back to, and the conversation cut before one),
//! `words.rs` (the closed sets of words it stores), `error.rs` (its errors
//! and their kinds). Timestamps come from `crate::clock`.

pub(crate) mod checkpoints;
mod error;
pub(crate) mod inbox;
mod item_state;
mod open;
pub(crate) mod rewind;
mod waits;
mod words;

use crate::conversation::Message;
pub use error::{StoreError, StoreErrorKind};
use item_state::ItemState;
use rusqlite::{params, Connection, OptionalExtension, TransactionBehavior};
use serde_json::Value;
use std::path::{Path, PathBuf};

/// The schema this Spindle writes. Older databases are migrated forward;
/// a newer one is refused, never rewritten.
pub const SCHEMA_VERSION: i64 = 8;

/// How long a lease lasts without a heartbeat.
pub const LEASE_TTL_MS: i64 = 30_000;

pub type Result<T> = std::result::Result<T, StoreError>;

/// One session's record.
#[derive(Debug, Clone, PartialEq)]
pub struct SessionRow {
    pub id: String,
    pub cwd: String,
    pub title: Option<String>,
    pub created_at: String,
    pub updated_at: String,
    pub updated_order: i64,
    pub settings: Value,
    pub mcp_servers: Value,
    pub lease_pid: Option<i64>,
    pub lease_expires_ms: Option<i64>,
}

/// Where the database lives when no `--db` is given: `$SPINDLE_HOME/spindle.db`,
/// else `spindle.db` in the system's data folder ([`crate::os::folders`]).
pub fn default_path() -> PathBuf {
    match std::env::var_os("SPINDLE_HOME").filter(|v| !v.is_empty()) {
        Some(home) => PathBuf::from(home).join("spindle.db"),
        None => crate::os::folders::data_dir().join("spindle.db"),
    }
}

/// The schema's steps, version 1 first. Each creates only what is
/// missing, though the version, read again inside the write transaction,
/// already keeps a step from running twice.
const MIGRATIONS: &[&str] = &[
    // Version 1.
    "CREATE TABLE IF NOT EXISTS sessions (
        id TEXT PRIMARY KEY,
        cwd TEXT NOT NULL,
        title TEXT,
        created_at TEXT NOT NULL,
        updated_at TEXT NOT NULL,
        updated_order INTEGER NOT NULL,
        settings TEXT NOT NULL DEFAULT '{}',
        mcp_servers TEXT NOT NULL DEFAULT '[]',
        lease_pid INTEGER,
        lease_expires_ms INTEGER
    );
    CREATE INDEX IF NOT EXISTS sessions_by_order ON sessions(updated_order);
    CREATE INDEX IF NOT EXISTS sessions_by_cwd ON sessions(cwd, updated_order);
    CREATE TABLE IF NOT EXISTS turns (
        session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
        turn INTEGER NOT NULL,
        state TEXT NOT NULL,
        stop_reason TEXT,
        error TEXT,
        usage TEXT,
        started_at TEXT NOT NULL,
        ended_at TEXT,
        PRIMARY KEY (session_id, turn)
    ) WITHOUT ROWID;
    CREATE TABLE IF NOT EXISTS events (
        session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
        seq INTEGER NOT NULL,
        turn INTEGER NOT NULL,
        body TEXT NOT NULL,
        PRIMARY KEY (session_id, seq)
    ) WITHOUT ROWID;
    CREATE TABLE IF NOT EXISTS messages (
        session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
        seq INTEGER NOT NULL,
        body TEXT NOT NULL,
        PRIMARY KEY (session_id, seq)
    ) WITHOUT ROWID;",
    // Version 2: the last choices made in each workspace.
    "CREATE TABLE IF NOT EXISTS workspaces (
        cwd TEXT PRIMARY KEY,
        defaults TEXT NOT NULL
    ) WITHOUT ROWID;",
    // Version 3: checkpoints — what each turn changed in the workspace,
    // the contents before and after kept once per session by hash.
    "CREATE TABLE IF NOT EXISTS checkpoint_blobs (
        session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
        key TEXT NOT NULL,
        data BLOB NOT NULL,
        PRIMARY KEY (session_id, key)
    ) WITHOUT ROWID;
    CREATE TABLE IF NOT EXISTS checkpoints (
        session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
        turn INTEGER NOT NULL,
        state TEXT NOT NULL,
        created_ms INTEGER NOT NULL,
        PRIMARY KEY (session_id, turn)
    ) WITHOUT ROWID;
    CREATE TABLE IF NOT EXISTS checkpoint_files (
        session_id TEXT NOT NULL,
        turn INTEGER NOT NULL,
        path TEXT NOT NULL,
        before_key TEXT,
        after_key TEXT,
        via_editor INTEGER NOT NULL DEFAULT 0,
        PRIMARY KEY (session_id, turn, path),
        FOREIGN KEY (session_id, turn) REFERENCES checkpoints(session_id, turn) ON DELETE CASCADE
    ) WITHOUT ROWID;",
    // Version 4: the durable inbox of steers and follow-ups.
    "CREATE TABLE IF NOT EXISTS inbox (
        session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
        item_id TEXT NOT NULL,
        intent TEXT NOT NULL,
        state TEXT NOT NULL,
        prompt TEXT NOT NULL,
        bytes INTEGER NOT NULL,
        idempotency_key TEXT,
        created_at TEXT NOT NULL,
        position INTEGER NOT NULL,
        PRIMARY KEY (session_id, item_id)
    ) WITHOUT ROWID;
    CREATE UNIQUE INDEX IF NOT EXISTS inbox_by_key ON inbox(session_id, idempotency_key)
        WHERE idempotency_key IS NOT NULL;
    CREATE TABLE IF NOT EXISTS inbox_flags (
        session_id TEXT PRIMARY KEY REFERENCES sessions(id) ON DELETE CASCADE,
        paused INTEGER NOT NULL DEFAULT 0,
        recovered INTEGER NOT NULL DEFAULT 0
    ) WITHOUT ROWID;",
    // Version 5: each session's goal.
    "CREATE TABLE IF NOT EXISTS goals (
        session_id TEXT PRIMARY KEY REFERENCES sessions(id) ON DELETE CASCADE,
        goal TEXT NOT NULL
    ) WITHOUT ROWID;",
    // Version 6: the records of background jobs.
    "CREATE TABLE IF NOT EXISTS jobs (
        session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
        job_id TEXT NOT NULL,
        record TEXT NOT NULL,
        PRIMARY KEY (session_id, job_id)
    );",
    // Version 7: a turn waiting for a provider's limit to reset.
    "CREATE TABLE IF NOT EXISTS waits (
        session_id TEXT PRIMARY KEY REFERENCES sessions(id) ON DELETE CASCADE,
        wait TEXT NOT NULL
    ) WITHOUT ROWID;",
    // Version 8: the turn each conversation message came in, so a rewind
    // can cut the conversation at a prompt (NULL: stored before, or
    // rewritten by a compaction; such messages are not cut at).
    "ALTER TABLE messages ADD COLUMN turn INTEGER;",
];

/// Whether the session of the `sessions` row at hand holds anything the
/// user sent or that came of it: a turn (every prompt, steer, follow-up
/// and job turn has one), a message, an inbox item in any state, a goal
/// or a job, or a title the client set (`session/set_title` keeps it as a
/// `session_info_update` outside any turn; the automatic title, set just
/// before the first turn is recorded, does not count, so a process killed
/// between the two leaves no listed session without a turn). Settings
/// alone do not count: a session's choices are also
/// the workspace's defaults, which the next new session starts from.
/// Such a session is not listed; `session/close` removes one that its
/// process created, unless a setting was changed in it.
const USED: &str = "(EXISTS (SELECT 1 FROM turns WHERE turns.session_id = sessions.id)
    OR EXISTS (SELECT 1 FROM messages WHERE messages.session_id = sessions.id)
    OR EXISTS (SELECT 1 FROM inbox WHERE inbox.session_id = sessions.id)
    OR EXISTS (SELECT 1 FROM goals WHERE goals.session_id = sessions.id)
    OR EXISTS (SELECT 1 FROM jobs WHERE jobs.session_id = sessions.id)
    OR EXISTS (SELECT 1 FROM events WHERE events.session_id = sessions.id
        AND events.turn = 0 AND events.body LIKE '%\"session_info_update\"%'))";

pub struct Store {
    connection: Connection,
    path: PathBuf,
}

impl Store {
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn next_order(connection: &Connection) -> rusqlite::Result<i64> {
        connection.query_row(
            "SELECT COALESCE(MAX(updated_order), 0) + 1 FROM sessions",
            [],
            |row| row.get(0),
        )
    }

    pub fn create_session(
        &mut self,
        id: &str,
        cwd: &str,
        settings: &Value,
        mcp_servers: &Value,
    ) -> Result<()> {
        let now = crate::clock::now_rfc3339();
        // One write transaction, so two processes never take the same
        // list position.
        let transaction = self
            .connection
            .transaction_with_behavior(TransactionBehavior::Immediate)?;
        let order = Self::next_order(&transaction)?;
        transaction.execute(
            "INSERT INTO sessions (id, cwd, created_at, updated_at, updated_order, settings, mcp_servers)
             VALUES (?1, ?2, ?3, ?3, ?4, ?5, ?6)",
            params![id, cwd, now, order, settings.to_string(), mcp_servers.to_string()],
        )?;
        transaction.commit()?;
        Ok(())
    }

    /// A copy of session `from` as a new session `to` in `cwd`: its
    /// settings, title, conversation and transcript, in one transaction.
    /// Not copied: checkpoints (undo stays with the original's files), the
    /// inbox, the goal and jobs. The copy's turns are all ended ones.
    pub fn fork_session(
        &mut self,
        from: &str,
        to: &str,
        cwd: &str,
        mcp_servers: &Value,
    ) -> Result<()> {
        let now = crate::clock::now_rfc3339();
        let transaction = self
            .connection
            .transaction_with_behavior(TransactionBehavior::Immediate)?;
        let order = Self::next_order(&transaction)?;
        let copied = transaction.execute(
            "INSERT INTO sessions (id, cwd, title, created_at, updated_at, updated_order, settings, mcp_servers)
             SELECT ?2, ?3, title, ?4, ?4, ?5, settings, ?6 FROM sessions WHERE id = ?1",
            params![from, to, cwd, now, order, mcp_servers.to_string()],
        )?;
        if copied != 1 {
            return Err(StoreError::new(
                StoreErrorKind::NotFound,
                format!("there is no session {from}"),
            ));
        }
        if transaction.query_row(
            "SELECT COUNT(*) FROM turns WHERE session_id = ?1 AND state = 'running'",
            [from],
            |row| row.get::<_, i64>(0),
        )? > 0
        {
            return Err(StoreError::new(
                StoreErrorKind::Conflict,
                format!("session {from} is in the middle of a turn"),
            ));
        }
        for statement in [
            "INSERT INTO turns (session_id, turn, state, stop_reason, error, usage, started_at, ended_at)
             SELECT ?2, turn, state, stop_reason, error, usage, started_at, ended_at FROM turns WHERE session_id = ?1",
            "INSERT INTO events (session_id, seq, turn, body)
             SELECT ?2, seq, turn, body FROM events WHERE session_id = ?1",
            "INSERT INTO messages (session_id, seq, body, turn)
             SELECT ?2, seq, body, turn FROM messages WHERE session_id = ?1",
        ] {
            transaction.execute(statement, params![from, to])?;
        }
        transaction.commit()?;
        Ok(())
    }

    pub fn session(&self, id: &str) -> Result<Option<SessionRow>> {
        Ok(self
            .connection
            .query_row(
                "SELECT id, cwd, title, created_at, updated_at, updated_order, settings, mcp_servers, lease_pid, lease_expires_ms
                 FROM sessions WHERE id = ?1",
                [id],
                row_to_session,
            )
            .optional()?)
    }

    /// Sessions newest first, after the cursor position `before_order`
    /// (exclusive), at most `limit`; only those the user sent something
    /// to (see `USED`) unless `with_unused`. The filter is part of the
    /// query, so a page boundary never falls on a hidden session.
    pub fn list_sessions(
        &self,
        cwd: Option<&str>,
        before_order: Option<i64>,
        limit: usize,
        with_unused: bool,
    ) -> Result<Vec<SessionRow>> {
        let sql = format!(
            "SELECT id, cwd, title, created_at, updated_at, updated_order, settings, mcp_servers, lease_pid, lease_expires_ms
             FROM sessions
             WHERE (?1 IS NULL OR cwd = ?1) AND (?2 IS NULL OR updated_order < ?2) AND (?4 OR {USED})
             ORDER BY updated_order DESC LIMIT ?3"
        );
        let mut statement = self.connection.prepare_cached(&sql)?;
        let rows = statement.query_map(
            params![cwd, before_order, limit as i64, with_unused],
            row_to_session,
        )?;
        Ok(rows.collect::<rusqlite::Result<Vec<_>>>()?)
    }

    /// Removes a session and everything it holds. Returns whether it existed.
    pub fn delete_session(&self, id: &str) -> Result<bool> {
        Ok(self
            .connection
            .execute("DELETE FROM sessions WHERE id = ?1", [id])?
            > 0)
    }

    /// Whether the user sent the session anything (see `USED`).
    pub fn is_used(&self, id: &str) -> Result<bool> {
        let sql = format!("SELECT {USED} FROM sessions WHERE id = ?1");
        Ok(self
            .connection
            .query_row(&sql, [id], |row| row.get(0))
            .optional()?
            .unwrap_or(false))
    }

    /// Removes a session the user never sent anything to (see `USED`),
    /// checked in the same statement, so a prompt that another process
    /// commits meanwhile keeps it. Returns whether it was removed.
    pub fn delete_if_unused(&self, id: &str) -> Result<bool> {
        let sql = format!("DELETE FROM sessions WHERE id = ?1 AND NOT {USED}");
        Ok(self.connection.execute(&sql, [id])? > 0)
    }

    /// Sets an automatic title unless the session has one (the client's,
    /// or another process's): whether it was set.
    pub fn set_title_if_unset(&self, id: &str, title: &str) -> Result<bool> {
        let changed = self.connection.execute(
            "UPDATE sessions SET title = ?2 WHERE id = ?1 AND title IS NULL",
            params![id, title],
        )?;
        Ok(changed > 0)
    }

    pub fn set_title(&self, id: &str, title: &str) -> Result<()> {
        self.connection.execute(
            "UPDATE sessions SET title = ?2 WHERE id = ?1",
            params![id, title],
        )?;
        Ok(())
    }

    pub fn save_settings(&self, id: &str, settings: &Value) -> Result<()> {
        self.connection.execute(
            "UPDATE sessions SET settings = ?2 WHERE id = ?1",
            params![id, settings.to_string()],
        )?;
        Ok(())
    }

    pub fn save_mcp_servers(&self, id: &str, servers: &Value) -> Result<()> {
        self.connection.execute(
            "UPDATE sessions SET mcp_servers = ?2 WHERE id = ?1",
            params![id, servers.to_string()],
        )?;
        Ok(())
    }

    /// Takes the session's lease for process `pid`, unless a live process
    /// holds an unexpired one: then `Err(holder pid)`.
    pub fn acquire_lease(&mut self, id: &str, pid: u32) -> Result<std::result::Result<(), i64>> {
        let transaction = self
            .connection
            .transaction_with_behavior(TransactionBehavior::Immediate)?;
        let holder: Option<(Option<i64>, Option<i64>)> = transaction
            .query_row(
                "SELECT lease_pid, lease_expires_ms FROM sessions WHERE id = ?1",
                [id],
                |row| Ok((row.get(0)?, row.get(1)?)),
            )
            .optional()?;
        let now = crate::clock::now_ms();
        if let Some((Some(holder), Some(expires))) = holder {
            if holder != i64::from(pid) && expires > now && process_alive(holder) {
                return Ok(Err(holder));
            }
        }
        transaction.execute(
            "UPDATE sessions SET lease_pid = ?2, lease_expires_ms = ?3 WHERE id = ?1",
            params![id, pid, now + LEASE_TTL_MS],
        )?;
        transaction.commit()?;
        Ok(Ok(()))
    }

    pub fn refresh_lease(&self, id: &str, pid: u32) -> Result<()> {
        self.connection.execute(
            "UPDATE sessions SET lease_expires_ms = ?3 WHERE id = ?1 AND lease_pid = ?2",
            params![id, pid, crate::clock::now_ms() + LEASE_TTL_MS],
        )?;
        Ok(())
    }

    pub fn release_lease(&self, id: &str, pid: u32) -> Result<()> {
        self.connection.execute(
            "UPDATE sessions SET lease_pid = NULL, lease_expires_ms = NULL WHERE id = ?1 AND lease_pid = ?2",
            params![id, pid],
        )?;
        Ok(())
    }

    /// Starts a turn: records it as running together with its first events
    /// and messages (the user's prompt), in one transaction. Returns the
    /// turn number.
    pub fn begin_turn(&mut self, id: &str, events: &[String], messages: &[Message]) -> Result<i64> {
        self.begin_turn_marking(id, events, messages, &[])
    }

    /// Begins a turn and, in the same transaction, sets inbox items'
    /// states (`(item, state)`): an item dispatched with its user message.
    pub fn begin_turn_marking(
        &mut self,
        id: &str,
        events: &[String],
        messages: &[Message],
        marks: &[(String, ItemState)],
    ) -> Result<i64> {
        let transaction = self
            .connection
            .transaction_with_behavior(TransactionBehavior::Immediate)?;
        mark_in(&transaction, id, marks)?;
        let turn: i64 = transaction.query_row(
            "SELECT COALESCE(MAX(turn), 0) + 1 FROM turns WHERE session_id = ?1",
            [id],
            |row| row.get(0),
        )?;
        transaction.execute(
            "INSERT INTO turns (session_id, turn, state, started_at) VALUES (?1, ?2, 'running', ?3)",
            params![id, turn, crate::clock::now_rfc3339()],
        )?;
        append_in(&transaction, id, turn, events, messages)?;
        transaction.commit()?;
        Ok(turn)
    }

    /// Appends a step of a turn (its events and messages) in one transaction.
    pub fn append(
        &mut self,
        id: &str,
        turn: i64,
        events: &[String],
        messages: &[Message],
    ) -> Result<()> {
        self.append_marking(id, turn, events, messages, &[])
    }

    /// Appends a step and, in the same transaction, sets inbox items'
    /// states: a steer applied with the user message it became.
    pub fn append_marking(
        &mut self,
        id: &str,
        turn: i64,
        events: &[String],
        messages: &[Message],
        marks: &[(String, ItemState)],
    ) -> Result<()> {
        if events.is_empty() && messages.is_empty() && marks.is_empty() {
            return Ok(());
        }
        let transaction = self
            .connection
            .transaction_with_behavior(TransactionBehavior::Immediate)?;
        mark_in(&transaction, id, marks)?;
        append_in(&transaction, id, turn, events, messages)?;
        transaction.commit()?;
        Ok(())
    }

    /// Ends a turn: its last events and messages, how it ended, and the
    /// session's settings as they are now, in one transaction.
    #[allow(clippy::too_many_arguments)]
    pub fn end_turn(
        &mut self,
        id: &str,
        turn: i64,
        events: &[String],
        messages: &[Message],
        stop_reason: Option<&str>,
        error: Option<&str>,
        usage: &Value,
    ) -> Result<()> {
        let transaction = self
            .connection
            .transaction_with_behavior(TransactionBehavior::Immediate)?;
        append_in(&transaction, id, turn, events, messages)?;
        transaction.execute(
            "UPDATE turns SET state = 'ended', stop_reason = ?3, error = ?4, usage = ?5, ended_at = ?6
             WHERE session_id = ?1 AND turn = ?2",
            params![id, turn, stop_reason, error, usage.to_string(), crate::clock::now_rfc3339()],
        )?;
        transaction.commit()?;
        Ok(())
    }

    /// Appends events outside any turn's steps (for example the title).
    pub fn append_events(&mut self, id: &str, turn: i64, events: &[String]) -> Result<()> {
        self.append(id, turn, events, &[])
    }

    /// The transcript: every stored update, in order, as JSON text.
    pub fn events(&self, id: &str) -> Result<Vec<String>> {
        let mut statement = self
            .connection
            .prepare_cached("SELECT body FROM events WHERE session_id = ?1 ORDER BY seq")?;
        let rows = statement.query_map([id], |row| row.get::<_, String>(0))?;
        Ok(rows.collect::<rusqlite::Result<Vec<_>>>()?)
    }

    /// The conversation as the model needs it.
    pub fn messages(&self, id: &str) -> Result<Vec<Message>> {
        let mut statement = self
            .connection
            .prepare_cached("SELECT body FROM messages WHERE session_id = ?1 ORDER BY seq")?;
        let rows = statement.query_map([id], |row| row.get::<_, String>(0))?;
        let mut messages = Vec::new();
        for body in rows {
            let body = body?;
            match serde_json::from_str(&body) {
                Ok(message) => messages.push(message),
                Err(err) => {
                    log::warn!("skipped an unreadable stored message of session {id}: {err}")
                }
            }
        }
        Ok(messages)
    }

    /// Replaces the whole conversation (after `/compact` or `/clear`); the
    /// transcript stays as it was.
    pub fn replace_messages(&mut self, id: &str, messages: &[Message]) -> Result<()> {
        let transaction = self
            .connection
            .transaction_with_behavior(TransactionBehavior::Immediate)?;
        transaction.execute("DELETE FROM messages WHERE session_id = ?1", [id])?;
        // Turn 0: a rewritten conversation has no prompt to cut at.
        append_in(&transaction, id, 0, &[], messages)?;
        transaction.commit()?;
        Ok(())
    }

    pub fn message_count(&self, id: &str) -> Result<i64> {
        Ok(self.connection.query_row(
            "SELECT COUNT(*) FROM messages WHERE session_id = ?1",
            [id],
            |row| row.get(0),
        )?)
    }

    /// Turns still marked running.
    pub fn running_turns(&self, id: &str) -> Result<Vec<i64>> {
        let mut statement = self.connection.prepare_cached(
            "SELECT turn FROM turns WHERE session_id = ?1 AND state = 'running' ORDER BY turn",
        )?;
        let rows = statement.query_map([id], |row| row.get::<_, i64>(0))?;
        Ok(rows.collect::<rusqlite::Result<Vec<_>>>()?)
    }

    /// Closes a turn that was cut off (the process died), with the events
    /// and messages that make the cut visible and keep the conversation
    /// valid for the model.
    pub fn mark_interrupted(
        &mut self,
        id: &str,
        turn: i64,
        events: &[String],
        messages: &[Message],
    ) -> Result<()> {
        let transaction = self
            .connection
            .transaction_with_behavior(TransactionBehavior::Immediate)?;
        append_in(&transaction, id, turn, events, messages)?;
        transaction.execute(
            "UPDATE turns SET state = 'interrupted', ended_at = ?3 WHERE session_id = ?1 AND turn = ?2",
            params![id, turn, crate::clock::now_rfc3339()],
        )?;
        transaction.commit()?;
        Ok(())
    }

    pub fn workspace_defaults(&self, cwd: &str) -> Result<Option<Value>> {
        let text: Option<String> = self
            .connection
            .query_row(
                "SELECT defaults FROM workspaces WHERE cwd = ?1",
                [cwd],
                |row| row.get(0),
            )
            .optional()?;
        Ok(text.and_then(|text| serde_json::from_str(&text).ok()))
    }

    pub fn save_workspace_defaults(&self, cwd: &str, defaults: &Value) -> Result<()> {
        self.connection.execute(
            "INSERT INTO workspaces (cwd, defaults) VALUES (?1, ?2)
             ON CONFLICT(cwd) DO UPDATE SET defaults = excluded.defaults",
            params![cwd, defaults.to_string()],
        )?;
        Ok(())
    }

    /// `PRAGMA integrity_check`: "ok" when the file is sound.
    pub fn integrity_check(&self) -> Result<String> {
        Ok(self
            .connection
            .query_row("PRAGMA integrity_check", [], |row| row.get(0))?)
    }
}

fn append_in(
    transaction: &rusqlite::Transaction<'_>,
    id: &str,
    turn: i64,
    events: &[String],
    messages: &[Message],
) -> Result<()> {
    if !events.is_empty() {
        let mut seq: i64 = transaction.query_row(
            "SELECT COALESCE(MAX(seq), 0) FROM events WHERE session_id = ?1",
            [id],
            |row| row.get(0),
        )?;
        let mut insert = transaction.prepare_cached(
            "INSERT INTO events (session_id, seq, turn, body) VALUES (?1, ?2, ?3, ?4)",
        )?;
        for event in events {
            seq += 1;
            insert.execute(params![id, seq, turn, event])?;
        }
    }
    if !messages.is_empty() {
        let mut seq: i64 = transaction.query_row(
            "SELECT COALESCE(MAX(seq), 0) FROM messages WHERE session_id = ?1",
            [id],
            |row| row.get(0),
        )?;
        let mut insert = transaction.prepare_cached(
            "INSERT INTO messages (session_id, seq, body, turn) VALUES (?1, ?2, ?3, NULLIF(?4, 0))",
        )?;
        for message in messages {
            seq += 1;
            let body = serde_json::to_string(message).map_err(|err| {
                StoreError::new(
                    StoreErrorKind::Other,
                    format!("cannot store a message: {err}"),
                )
            })?;
            insert.execute(params![id, seq, body, turn])?;
        }
    }
    let order = Store::next_order(transaction)?;
    transaction.execute(
        "UPDATE sessions SET updated_at = ?2, updated_order = ?3 WHERE id = ?1",
        params![id, crate::clock::now_rfc3339(), order],
    )?;
    Ok(())
}

fn row_to_session(row: &rusqlite::Row<'_>) -> rusqlite::Result<SessionRow> {
    let json = |text: String, fallback: Value| serde_json::from_str(&text).unwrap_or(fallback);
    Ok(SessionRow {
        id: row.get(0)?,
        cwd: row.get(1)?,
        title: row.get(2)?,
        created_at: row.get(3)?,
        updated_at: row.get(4)?,
        updated_order: row.get(5)?,
        settings: json(row.get(6)?, Value::Object(Default::default())),
        mcp_servers: json(row.get(7)?, Value::Array(Vec::new())),
        lease_pid: row.get(8)?,
        lease_expires_ms: row.get(9)?,
    })
}

/// Whether a process with this id exists on this machine (asked of the
/// system, which needs no `/proc`: macOS has none).
pub fn process_alive(pid: i64) -> bool {
    crate::process::alive(pid)
}

#[cfg(test)]
mod tests;

impl Store {
    /// The session's goal, as last committed.
    pub fn goal(&self, id: &str) -> Result<Option<Value>> {
        let text: Option<String> = self
            .connection
            .query_row(
                "SELECT goal FROM goals WHERE session_id = ?1",
                [id],
                |row| row.get(0),
            )
            .optional()?;
        Ok(text.and_then(|t| serde_json::from_str(&t).ok()))
    }

    /// The session's job records, oldest first.
    pub fn jobs(&self, id: &str) -> Result<Vec<Value>> {
        let mut statement = self
            .connection
            .prepare_cached("SELECT record FROM jobs WHERE session_id = ?1 ORDER BY rowid")?;
        let rows = statement.query_map([id], |row| row.get::<_, String>(0))?;
        let mut records = Vec::new();
        for row in rows {
            if let Ok(value) = serde_json::from_str(&row?) {
                records.push(value);
            }
        }
        Ok(records)
    }

    pub fn save_job(&self, id: &str, job_id: &str, record: &Value) -> Result<()> {
        self.connection.execute(
            "INSERT INTO jobs (session_id, job_id, record) VALUES (?1, ?2, ?3)
             ON CONFLICT (session_id, job_id) DO UPDATE SET record = ?3",
            params![id, job_id, record.to_string()],
        )?;
        Ok(())
    }

    pub fn save_goal(&self, id: &str, goal: &Value) -> Result<()> {
        self.connection.execute(
            "INSERT INTO goals (session_id, goal) VALUES (?1, ?2)
             ON CONFLICT (session_id) DO UPDATE SET goal = ?2",
            params![id, goal.to_string()],
        )?;
        Ok(())
    }
}

/// Sets inbox items' states inside a transaction.
fn mark_in(
    transaction: &rusqlite::Transaction<'_>,
    id: &str,
    marks: &[(String, ItemState)],
) -> Result<()> {
    for (item, state) in marks {
        transaction.execute(
            "UPDATE inbox SET state = ?3 WHERE session_id = ?1 AND item_id = ?2",
            params![id, item, state],
        )?;
    }
    Ok(())
}

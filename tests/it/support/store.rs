//! Helpers for the session-store tests: a look inside the database with
//! `rusqlite` (integrity, turns, events, messages, leases), and the
//! normalisation that makes a live turn's updates comparable with their
//! replay.
//!
//! The agent may be running (or may have just been killed) while a test
//! looks: every connection here is short-lived and has a busy timeout, and
//! a `kill -9` leaves a WAL file that opening the database recovers.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::time::Duration;

use rusqlite::{params, Connection, OptionalExtension};
use serde_json::{json, Value};

/// One turn's row in the `turns` table.
#[derive(Debug, Clone, PartialEq)]
pub struct TurnRow {
    pub turn: i64,
    pub state: String,
    pub stop_reason: Option<String>,
    pub error: Option<String>,
}

/// A session database file, inspected directly.
#[derive(Debug, Clone)]
pub struct Db {
    path: PathBuf,
}

impl Db {
    pub fn new(path: impl Into<PathBuf>) -> Db {
        Db { path: path.into() }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The path as a command-line argument.
    pub fn arg(&self) -> String {
        self.path.to_str().expect("UTF-8 database path").to_string()
    }

    /// A fresh connection (busy timeout 10 s).
    pub fn connect(&self) -> Connection {
        let connection = Connection::open(&self.path)
            .unwrap_or_else(|err| panic!("cannot open {}: {err}", self.path.display()));
        connection
            .busy_timeout(Duration::from_secs(10))
            .expect("cannot set the busy timeout");
        connection
    }

    /// `PRAGMA integrity_check` (all rows joined; "ok" when sound).
    pub fn integrity_check(&self) -> String {
        let connection = self.connect();
        let mut statement = connection
            .prepare("PRAGMA integrity_check")
            .expect("cannot prepare integrity_check");
        let rows = statement
            .query_map([], |row| row.get::<_, String>(0))
            .expect("integrity_check failed")
            .collect::<rusqlite::Result<Vec<_>>>()
            .expect("integrity_check failed");
        rows.join("\n")
    }

    /// Rows violating a foreign key (`PRAGMA foreign_key_check`), e.g.
    /// events left behind by a deleted session.
    pub fn foreign_key_violations(&self) -> usize {
        let connection = self.connect();
        let mut statement = connection
            .prepare("PRAGMA foreign_key_check")
            .expect("cannot prepare foreign_key_check");
        let rows = statement
            .query_map([], |_| Ok(()))
            .expect("foreign_key_check failed");
        rows.count()
    }

    /// Asserts the file is sound and consistent.
    pub fn assert_sound(&self) {
        assert_eq!(
            self.integrity_check(),
            "ok",
            "integrity_check of {}",
            self.path.display()
        );
        assert_eq!(
            self.foreign_key_violations(),
            0,
            "foreign_key_check of {}",
            self.path.display()
        );
    }

    pub fn user_version(&self) -> i64 {
        self.connect()
            .query_row("PRAGMA user_version", [], |row| row.get(0))
            .expect("cannot read user_version")
    }

    pub fn set_user_version(&self, version: i64) {
        self.connect()
            .execute_batch(&format!("PRAGMA user_version = {version}"))
            .expect("cannot set user_version");
    }

    /// Every session id stored.
    pub fn session_ids(&self) -> Vec<String> {
        let connection = self.connect();
        let mut statement = connection
            .prepare("SELECT id FROM sessions ORDER BY updated_order")
            .expect("cannot list sessions");
        let rows = statement
            .query_map([], |row| row.get::<_, String>(0))
            .expect("cannot list sessions")
            .collect::<rusqlite::Result<Vec<_>>>()
            .expect("cannot list sessions");
        rows
    }

    /// The stored title of a session (`None` also when there is no row).
    pub fn title(&self, session: &str) -> Option<String> {
        self.connect()
            .query_row(
                "SELECT title FROM sessions WHERE id = ?1",
                [session],
                |row| row.get::<_, Option<String>>(0),
            )
            .optional()
            .expect("cannot read the title")
            .flatten()
    }

    /// `(lease_pid, lease_expires_ms)` of a session.
    pub fn lease(&self, session: &str) -> (Option<i64>, Option<i64>) {
        self.connect()
            .query_row(
                "SELECT lease_pid, lease_expires_ms FROM sessions WHERE id = ?1",
                [session],
                |row| Ok((row.get(0)?, row.get(1)?)),
            )
            .optional()
            .expect("cannot read the lease")
            .unwrap_or((None, None))
    }

    pub fn turns(&self, session: &str) -> Vec<TurnRow> {
        let connection = self.connect();
        let mut statement = connection
            .prepare(
                "SELECT turn, state, stop_reason, error FROM turns WHERE session_id = ?1 ORDER BY turn",
            )
            .expect("cannot read turns");
        let rows = statement
            .query_map([session], |row| {
                Ok(TurnRow {
                    turn: row.get(0)?,
                    state: row.get(1)?,
                    stop_reason: row.get(2)?,
                    error: row.get(3)?,
                })
            })
            .expect("cannot read turns")
            .collect::<rusqlite::Result<Vec<_>>>()
            .expect("cannot read turns");
        rows
    }

    /// The stored updates of a session, in order.
    pub fn events(&self, session: &str) -> Vec<Value> {
        self.bodies(
            "SELECT body FROM events WHERE session_id = ?1 ORDER BY seq",
            session,
        )
    }

    /// The stored conversation of a session, in order.
    pub fn messages(&self, session: &str) -> Vec<Value> {
        self.bodies(
            "SELECT body FROM messages WHERE session_id = ?1 ORDER BY seq",
            session,
        )
    }

    /// Rows of `table` (events, messages, turns) belonging to `session`.
    pub fn rows_of(&self, table: &str, session: &str) -> i64 {
        self.connect()
            .query_row(
                &format!("SELECT COUNT(*) FROM {table} WHERE session_id = ?1"),
                params![session],
                |row| row.get(0),
            )
            .expect("cannot count rows")
    }

    /// Whether the `seq` numbers of `table` for `session` run 1..=n.
    pub fn seq_is_contiguous(&self, table: &str, session: &str) -> bool {
        let (count, min, max): (i64, Option<i64>, Option<i64>) = self
            .connect()
            .query_row(
                &format!("SELECT COUNT(*), MIN(seq), MAX(seq) FROM {table} WHERE session_id = ?1"),
                params![session],
                |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?)),
            )
            .expect("cannot read seq");
        count == 0 || (min == Some(1) && max == Some(count))
    }

    fn bodies(&self, sql: &str, session: &str) -> Vec<Value> {
        let connection = self.connect();
        let mut statement = connection.prepare(sql).expect("cannot prepare");
        let rows = statement
            .query_map([session], |row| row.get::<_, String>(0))
            .expect("cannot query")
            .collect::<rusqlite::Result<Vec<_>>>()
            .expect("cannot query");
        rows.iter()
            .map(|body| {
                serde_json::from_str(body)
                    .unwrap_or_else(|err| panic!("stored body is not JSON ({err}): {body}"))
            })
            .collect()
    }
}

/// The `update`s of the `session/update` notifications for `session` in
/// `messages`, in order.
pub fn session_updates(messages: &[Value], session: &str) -> Vec<Value> {
    messages
        .iter()
        .filter(|m| {
            m["method"] == "session/update"
                && m.get("id").is_none()
                && m["params"]["sessionId"] == session
        })
        .map(|m| m["params"]["update"].clone())
        .collect()
}

fn is_chunk(update: &Value) -> bool {
    matches!(
        update["sessionUpdate"].as_str(),
        Some("agent_message_chunk" | "agent_thought_chunk" | "user_message_chunk")
    ) && update["content"]["type"] == "text"
}

/// Merges consecutive text chunks of the same kind and `messageId` into
/// one chunk holding the whole text, so that updates streamed in any
/// chunking compare equal. Other updates are kept as they are.
pub fn merge_chunks(updates: &[Value]) -> Vec<Value> {
    let mut merged: Vec<Value> = Vec::new();
    for update in updates {
        if is_chunk(update) {
            if let Some(last) = merged.last_mut() {
                if is_chunk(last)
                    && last["sessionUpdate"] == update["sessionUpdate"]
                    && last.get("messageId") == update.get("messageId")
                {
                    let text = format!(
                        "{}{}",
                        last["content"]["text"].as_str().unwrap_or_default(),
                        update["content"]["text"].as_str().unwrap_or_default()
                    );
                    last["content"]["text"] = json!(text);
                    continue;
                }
            }
            let mut chunk = json!({
                "sessionUpdate": update["sessionUpdate"],
                "content": {"type": "text", "text": update["content"]["text"]},
            });
            if let Some(id) = update.get("messageId") {
                chunk["messageId"] = id.clone();
            }
            merged.push(chunk);
        } else {
            merged.push(update.clone());
        }
    }
    merged
}

/// Asserts two update lists are equal, showing the first difference.
pub fn assert_same_updates(left: &[Value], right: &[Value], what: &str) {
    if left == right {
        return;
    }
    let at = left
        .iter()
        .zip(right)
        .position(|(a, b)| a != b)
        .unwrap_or(left.len().min(right.len()));
    let show = |list: &[Value]| {
        list.iter()
            .enumerate()
            .map(|(index, update)| format!("  {index}: {update}"))
            .collect::<Vec<_>>()
            .join("\n")
    };
    panic!(
        "{what}: the update lists differ first at index {at} (lengths {} and {})\n\
         left:  {}\nright: {}\n--- left ---\n{}\n--- right ---\n{}",
        left.len(),
        right.len(),
        left.get(at).map_or("(none)".into(), Value::to_string),
        right.get(at).map_or("(none)".into(), Value::to_string),
        show(left),
        show(right)
    );
}

/// Checks a Chat Completions message list (or the stored conversation, in
/// Spindle's own format) for the shape a model needs: every assistant tool
/// call is answered by exactly one tool message before the next assistant
/// or user message, and no tool message answers an unknown call.
pub fn assert_tool_calls_answered(messages: &[Value]) {
    let mut open: Vec<String> = Vec::new();
    let mut seen: HashSet<String> = HashSet::new();
    for (index, message) in messages.iter().enumerate() {
        match message["role"].as_str() {
            Some("tool") => {
                let id = message["tool_call_id"].as_str().unwrap_or_default();
                let position = open.iter().position(|open_id| open_id == id);
                assert!(
                    position.is_some(),
                    "message {index} answers tool call {id:?}, which is not open: {messages:#?}"
                );
                open.remove(position.unwrap_or_default());
            }
            role => {
                assert!(
                    open.is_empty(),
                    "message {index} ({role:?}) comes while tool calls {open:?} are unanswered: {messages:#?}"
                );
                if let Some(calls) = message["tool_calls"].as_array() {
                    for call in calls {
                        let id = call["id"].as_str().unwrap_or_default().to_string();
                        assert!(
                            seen.insert(id.clone()),
                            "tool call id {id:?} is used twice: {messages:#?}"
                        );
                        open.push(id);
                    }
                }
            }
        }
    }
    assert!(
        open.is_empty(),
        "tool calls {open:?} are never answered: {messages:#?}"
    );
}

//! Rewinding a session's conversation to one of its prompts: the prompts
//! it can go back to (each turn that began with the user's message), and
//! the cut itself — the prompt's turn and every later one leave the
//! conversation the model sees and the transcript a load replays. The
//! turns stay recorded as `rewound`, so turn numbers (and the checkpoints
//! keyed by them) are never given out twice.

use super::{Result, Store, StoreError, StoreErrorKind};
use crate::conversation::{Message, Role};
use rusqlite::{params, OptionalExtension, TransactionBehavior};
use serde_json::Value;

/// The most characters of a prompt's text a point carries.
pub(crate) const PREVIEW_CHARS: usize = 200;

/// The most events of a turn read to find its prompt.
const PROMPT_EVENTS: i64 = 256;

/// A prompt the session can be rewound to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredPrompt {
    pub turn: i64,
    /// The id its `user_message_chunk` updates carry.
    pub message_id: String,
    /// Its text blocks, joined, cut to [`PREVIEW_CHARS`].
    pub text: String,
    /// How many conversation messages a cut here removes; `None` when
    /// the conversation cannot be cut here (a compaction or `/clear`
    /// rewrote it since this prompt).
    pub messages_after: Option<i64>,
}

impl Store {
    /// The prompts of the session's turns not rewound, oldest first.
    pub fn rewind_points(&self, session: &str) -> Result<Vec<StoredPrompt>> {
        let mut turns = self.connection.prepare_cached(
            "SELECT turn FROM turns WHERE session_id = ?1 AND state != 'rewound' ORDER BY turn",
        )?;
        let turns = turns
            .query_map([session], |row| row.get::<_, i64>(0))?
            .collect::<rusqlite::Result<Vec<_>>>()?;
        let mut points = Vec::new();
        for turn in turns {
            if let Some((message_id, text)) = self.prompt_of(session, turn)? {
                points.push(StoredPrompt {
                    turn,
                    message_id,
                    text,
                    messages_after: self.cut_point(session, turn)?.map(|(_, n)| n),
                });
            }
        }
        Ok(points)
    }

    /// The user's message a turn began with: its id and text, when the
    /// turn's first update is one.
    fn prompt_of(&self, session: &str, turn: i64) -> Result<Option<(String, String)>> {
        let mut events = self.connection.prepare_cached(
            "SELECT body FROM events WHERE session_id = ?1 AND turn = ?2 ORDER BY seq LIMIT ?3",
        )?;
        let bodies = events
            .query_map(params![session, turn, PROMPT_EVENTS], |row| {
                row.get::<_, String>(0)
            })?
            .collect::<rusqlite::Result<Vec<_>>>()?;
        let mut id: Option<String> = None;
        let mut text = String::new();
        for body in bodies {
            let Ok(update) = serde_json::from_str::<Value>(&body) else {
                break;
            };
            if update["sessionUpdate"] != "user_message_chunk" {
                break;
            }
            let Some(this) = update["messageId"].as_str() else {
                break;
            };
            match &id {
                None => id = Some(this.to_string()),
                Some(first) if first != this => break,
                Some(_) => {}
            }
            if let Some(chunk) = update["content"]["text"].as_str() {
                if !text.is_empty() {
                    text.push('\n');
                }
                text.push_str(chunk);
            }
        }
        Ok(id.map(|id| (id, preview(&text))))
    }

    /// Where the conversation is cut to go back before `turn`'s prompt:
    /// the first message's position and how many messages go; `None`
    /// when the turn's prompt is no longer a message of its own.
    fn cut_point(&self, session: &str, turn: i64) -> Result<Option<(i64, i64)>> {
        let first: Option<(i64, String)> = self
            .connection
            .query_row(
                "SELECT seq, body FROM messages WHERE session_id = ?1 AND turn = ?2
                 ORDER BY seq LIMIT 1",
                params![session, turn],
                |row| Ok((row.get(0)?, row.get(1)?)),
            )
            .optional()?;
        let Some((seq, body)) = first else {
            return Ok(None);
        };
        let is_prompt = serde_json::from_str::<Message>(&body).is_ok_and(|m| m.role == Role::User);
        if !is_prompt {
            return Ok(None);
        }
        let count: i64 = self.connection.query_row(
            "SELECT COUNT(*) FROM messages WHERE session_id = ?1 AND seq >= ?2",
            params![session, seq],
            |row| row.get(0),
        )?;
        Ok(Some((seq, count)))
    }

    /// Cuts the conversation before `turn`'s prompt, in one transaction:
    /// its messages and every later one go, the transcript of the turn
    /// and every later one goes, and those turns are marked `rewound`.
    /// Refused while a turn of the session runs (in any process), and
    /// where the conversation cannot be cut. Returns the messages removed.
    pub fn rewind_conversation(&mut self, session: &str, turn: i64) -> Result<i64> {
        let Some((seq, _)) = self.cut_point(session, turn)? else {
            return Err(StoreError::new(
                StoreErrorKind::Conflict,
                "the conversation holds nothing of this message (it was compacted or cleared since), so it cannot be cut there",
            ));
        };
        let transaction = self
            .connection
            .transaction_with_behavior(TransactionBehavior::Immediate)?;
        let running: i64 = transaction.query_row(
            "SELECT COUNT(*) FROM turns WHERE session_id = ?1 AND state = 'running'",
            [session],
            |row| row.get(0),
        )?;
        if running > 0 {
            return Err(StoreError::new(
                StoreErrorKind::Conflict,
                format!("session {session} is in the middle of a turn"),
            ));
        }
        let removed = transaction.execute(
            "DELETE FROM messages WHERE session_id = ?1 AND seq >= ?2",
            params![session, seq],
        )?;
        transaction.execute(
            "DELETE FROM events WHERE session_id = ?1 AND turn >= ?2",
            params![session, turn],
        )?;
        transaction.execute(
            "UPDATE turns SET state = 'rewound' WHERE session_id = ?1 AND turn >= ?2",
            params![session, turn],
        )?;
        transaction.commit()?;
        Ok(removed as i64)
    }
}

/// `text` cut to [`PREVIEW_CHARS`] characters, an ellipsis marking a cut.
fn preview(text: &str) -> String {
    match text.char_indices().nth(PREVIEW_CHARS) {
        Some((end, _)) => format!("{}…", &text[..end]),
        None => text.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn chunk(id: &str, text: &str) -> String {
        json!({"sessionUpdate": "user_message_chunk", "messageId": id,
               "content": {"type": "text", "text": text}})
        .to_string()
    }

    fn answer(text: &str) -> String {
        json!({"sessionUpdate": "agent_message_chunk", "messageId": "m",
               "content": {"type": "text", "text": text}})
        .to_string()
    }

    #[test]
    fn points_list_prompts_and_a_cut_removes_the_turn_and_later_ones() {
        let dir =
            std::env::temp_dir().join(format!("spindle-rewind-{}", crate::util::random_hex()));
        let mut store = Store::open(&dir.join("s.db")).unwrap();
        store
            .create_session("s", "/w", &json!({}), &json!([]))
            .unwrap();
        for (n, prompt) in ["first", "second", "third"].iter().enumerate() {
            let turn = store
                .begin_turn(
                    "s",
                    &[chunk(&format!("u{n}"), prompt), answer("ok")],
                    &[Message::user(*prompt)],
                )
                .unwrap();
            store
                .end_turn(
                    "s",
                    turn,
                    &[],
                    &[Message::assistant("done", "")],
                    Some("end_turn"),
                    None,
                    &json!({}),
                )
                .unwrap();
        }
        let points = store.rewind_points("s").unwrap();
        let ids: Vec<&str> = points.iter().map(|p| p.message_id.as_str()).collect();
        assert_eq!(ids, ["u0", "u1", "u2"]);
        assert_eq!(points[1].text, "second");
        assert_eq!(points[1].messages_after, Some(4));

        assert_eq!(store.rewind_conversation("s", points[1].turn).unwrap(), 4);
        let texts: Vec<String> = store
            .messages("s")
            .unwrap()
            .into_iter()
            .map(|m| m.text)
            .collect();
        assert_eq!(texts, ["first", "done"]);
        assert!(store
            .events("s")
            .unwrap()
            .iter()
            .all(|e| !e.contains("second")));
        assert_eq!(store.rewind_points("s").unwrap().len(), 1);
        // The next turn takes a number never used before.
        let next = store.begin_turn("s", &[chunk("u9", "again")], &[]).unwrap();
        assert_eq!(next, 4);

        // A rewritten conversation cannot be cut at the prompts it holds.
        store
            .replace_messages("s", &[Message::user("summary")])
            .unwrap();
        assert_eq!(store.rewind_points("s").unwrap()[0].messages_after, None);
        assert!(store.rewind_conversation("s", 1).is_err());
        drop(store);
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn a_preview_is_cut_on_a_character_boundary() {
        let long = "é".repeat(PREVIEW_CHARS + 5);
        let cut = preview(&long);
        assert_eq!(cut.chars().count(), PREVIEW_CHARS + 1);
        assert!(cut.ends_with('…'));
        assert_eq!(preview("short"), "short");
    }
}

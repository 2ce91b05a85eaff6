//! The one path a turn's `session/update`s take: written to the client at
//! once, and kept (chunks of one message merged) until the turn commits
//! them to the store at its next step boundary; `UpdateSink` feeds it the
//! provider's text and thought deltas. Each update is kept in the one form
//! the store holds and written fitted to the client (`acp::fit`); notices
//! are written only.

use crate::acp::{self, fit::Notice, ClientCapabilities, SessionUpdate, ToolCallUpdate};
use crate::cancel::CancelToken;
use crate::provider::{Message, Sink};
use crate::rpc::{stdio::Output, stdio::Queued};
use crossbeam_channel::Sender;
use serde_json::{json, Value};
use std::cell::RefCell;
use std::sync::{Arc, Mutex};

/// An update waiting to be stored.
enum Kept {
    /// Consecutive chunks of one message, merged into one text.
    Chunk {
        thought: bool,
        message_id: String,
        text: String,
        /// A subagent's chunk: the parent's tool call.
        parent: Option<String>,
        /// And its child session's key.
        child: Option<String>,
    },
    Other(Value),
}

pub(super) struct Updates {
    session_id: String,
    /// What the client asked for: which unstable parts it gets.
    capabilities: ClientCapabilities,
    writer: Sender<Queued>,
    cancel: CancelToken,
    kept: Vec<Kept>,
    /// While a subagent runs: the parent's tool call, which every update
    /// is marked with (`_meta.spindle.parentToolCallId`), and the titles
    /// of the subagent's tool calls so far (the parent's progress).
    nested: Option<Nested>,
    /// A subagent running as a job: every update also goes to its log,
    /// one JSON object a line (its structured transcript).
    mirror: Option<Arc<Mutex<crate::tools::jobs::LogSink>>>,
    /// While more of the model's answer is already read and waiting
    /// (`hold`): the lines written since, sent as one message when nothing
    /// more waits, so a burst of chunks wakes the writer once.
    held: Option<HeldLines>,
}

#[derive(Default)]
struct HeldLines {
    /// The lines, joined by newlines.
    text: String,
    lines: usize,
    /// The turn's own chunks of one message in a row, merged into one
    /// update: the model outran the client, which gets the same text in
    /// fewer lines. Written out before any other line.
    chunk: Option<MergedChunk>,
}

struct MergedChunk {
    thought: bool,
    message_id: String,
    text: String,
}

/// The most text merged into one chunk while held.
const MERGED_TEXT: usize = 4 * 1024;

/// The most lines, and bytes, held before they are sent anyway: what the
/// bounded writer queue holds stays near what it held a line at a time.
const HELD_LINES: usize = 64;
const HELD_BYTES: usize = 4 * 1024;

struct Nested {
    parent: String,
    /// The key of the subagent's child session (`acp::fit::route`):
    /// `None` for a job's, which stays under the parent's call.
    child: Option<String>,
    /// `None`: the parent's call has ended (a subagent running as a
    /// job), so it shows no progress.
    progress: Option<Vec<String>>,
}

/// The most progress lines the parent's tool call shows.
const PROGRESS_LINES: usize = 12;

/// How a subagent's tool call is known to the editor.
pub(super) fn nested_id(parent: &str, id: &str) -> String {
    format!("{parent}/{id}")
}

/// The mark of a subagent's update: Spindle's key, and the key clients
/// already fold another agent's subagents under (`claudeCode`).
pub(super) fn parent_meta(parent: &str) -> Value {
    json!({
        "spindle": {"parentToolCallId": parent},
        "claudeCode": {"parentToolUseId": parent},
    })
}

/// The stored mark of a subagent's update: the parent's tool call and,
/// when it has one, its child session's key.
fn stored_meta(parent: &str, child: Option<&str>) -> Value {
    let mut meta = parent_meta(parent);
    if let Some(child) = child {
        meta["spindle"][acp::fit::CHILD_MARK] = json!(child);
    }
    meta
}

/// How long, after a cancel, a line still waits for room in a full queue
/// (final tool statuses should reach a slow client) before it is dropped.
const AFTER_CANCEL_WAIT: std::time::Duration = std::time::Duration::from_millis(500);

impl Updates {
    pub(super) fn new(
        session_id: String,
        capabilities: ClientCapabilities,
        writer: Sender<Queued>,
        cancel: CancelToken,
    ) -> Updates {
        Updates {
            session_id,
            capabilities,
            writer,
            cancel,
            kept: Vec::new(),
            nested: None,
            mirror: None,
            held: None,
        }
    }

    /// `more`: more of the model's answer is already waiting, so lines may
    /// be held and sent together; otherwise whatever is held goes now.
    /// Only the stream's reader holds, and it ends every stream with
    /// `hold(false)`: nothing is held past it, and the order of the lines
    /// is kept.
    pub(super) fn hold(&mut self, more: bool) {
        if more {
            self.held.get_or_insert_with(HeldLines::default);
            return;
        }
        self.write_merged();
        if let Some(held) = self.held.take() {
            if held.lines > 0 {
                self.queue(held.text);
            }
        }
    }

    /// Writes the merged chunk, if there is one, as the client gets it.
    fn write_merged(&mut self) {
        let Some(merged) = self.held.as_mut().and_then(|held| held.chunk.take()) else {
            return;
        };
        let chunk = acp::fit::Update::Chunk {
            thought: merged.thought,
            message_id: &merged.message_id,
            text: &merged.text,
            meta: None,
        };
        if let Some(line) = acp::fit::line(&self.session_id, chunk, &self.capabilities) {
            self.add_line(line);
        }
    }

    /// While held, merges the turn's own chunk into the one before it
    /// (same kind, same message): false when it is written as it is.
    fn merged(&mut self, thought: bool, message_id: &str, text: &str) -> bool {
        if self.nested.is_some() {
            return false;
        }
        let Some(held) = &mut self.held else {
            return false;
        };
        match &mut held.chunk {
            Some(merged)
                if merged.thought == thought
                    && merged.message_id == message_id
                    && merged.text.len() + text.len() <= MERGED_TEXT =>
            {
                merged.text.push_str(text);
                return true;
            }
            Some(_) => self.write_merged(),
            None => {}
        }
        if let Some(held) = &mut self.held {
            held.chunk = Some(MergedChunk {
                thought,
                message_id: message_id.to_string(),
                text: text.to_string(),
            });
        }
        true
    }

    /// Mirrors every update into an agent job's log from now on.
    pub(super) fn mirror(&mut self, sink: Arc<Mutex<crate::tools::jobs::LogSink>>) {
        self.mirror = Some(sink);
    }

    fn mirrored(&self, update: &Value) {
        if self.mirror.is_some() {
            self.mirror_line(update.to_string());
        }
    }

    fn mirror_line(&self, mut line: String) {
        if let Some(sink) = &self.mirror {
            line.push('\n');
            crate::cancel::lock(sink).write(line.as_bytes());
        }
    }

    /// From now on, updates are a subagent's, under `parent` (`None`:
    /// the turn's own again).
    pub(super) fn nest(&mut self, parent: Option<&str>) {
        self.nested = parent.map(|parent| Nested {
            parent: parent.to_string(),
            child: None,
            progress: Some(Vec::new()),
        });
    }

    /// Like `nest`, for a subagent with a child session: `key` names it
    /// (`acp::fit::child_session_id`).
    pub(super) fn nest_child(&mut self, parent: &str, key: &str) {
        self.nested = Some(Nested {
            parent: parent.to_string(),
            child: Some(key.to_string()),
            progress: Some(Vec::new()),
        });
    }

    /// The running subagent's child session id, for this client: `None`
    /// when there is none or the client does not take subagents.
    pub(super) fn child_session(&self) -> Option<String> {
        let key = self.nested.as_ref()?.child.as_deref()?;
        self.capabilities
            .subagents
            .then(|| acp::fit::child_session_id(&self.session_id, key))
    }

    /// Sends a `subagent_update` of the running subagent's child session
    /// (`fields`: its title, state, ...), kept for replay like any update;
    /// only a client that takes subagents gets it. Nothing without a
    /// child session.
    pub(super) fn subagent_update(&mut self, fields: Value) {
        let Some(nested) = &self.nested else {
            return;
        };
        let Some(child) = nested.child.as_deref() else {
            return;
        };
        let mut update = json!({"sessionUpdate": "subagent_update"});
        if let (Some(update), Value::Object(fields)) = (update.as_object_mut(), fields) {
            update.extend(fields);
        }
        update["_meta"] = stored_meta(&nested.parent, Some(child));
        self.send_now(update);
    }

    /// Like `nest`, for a parent call that has already ended.
    pub(super) fn nest_quietly(&mut self, parent: &str) {
        self.nested = Some(Nested {
            parent: parent.to_string(),
            child: None,
            progress: None,
        });
    }

    /// Writes a line: held with the others while `hold` says more is
    /// waiting, queued at once otherwise.
    fn deliver(&mut self, line: String) {
        self.write_merged();
        self.add_line(line);
    }

    fn add_line(&mut self, line: String) {
        let Some(held) = &mut self.held else {
            return self.queue(line);
        };
        if held.lines > 0 {
            held.text.push('\n');
        }
        if held.text.capacity() == 0 {
            // Room for a burst's lines at once, not grown in steps.
            held.text.reserve(HELD_BYTES + 1024);
        }
        held.text.push_str(&line);
        held.lines += 1;
        if held.lines >= HELD_LINES || held.text.len() >= HELD_BYTES {
            let text = std::mem::take(&mut held.text);
            held.lines = 0;
            self.queue(text);
        }
    }

    /// Queues one message for stdout: a line, or held lines joined by
    /// newlines. The queue is bounded: when the client
    /// reads slowly this waits, but not past the turn's cancel; after a
    /// cancel a line waits a moment for room (final tool statuses should
    /// reach a slow client) and is then dropped.
    fn queue(&self, line: String) {
        let line = match self.writer.try_send(Output::Line(line).queued()) {
            Ok(()) => return,
            Err(crossbeam_channel::TrySendError::Full(queued)) => match Output::from_queued(queued)
            {
                Output::Line(line) => line,
                Output::Close => return,
            },
            Err(_) => return,
        };
        // Stamped anew when it is finally queued: nothing it caused was
        // queued in between.
        if !self.cancel.is_cancelled() {
            crossbeam_channel::select! {
                send(self.writer, Output::Line(line.clone()).queued()) -> _ => return,
                recv(self.cancel.signal()) -> _ => {}
            }
        }
        let _ = self
            .writer
            .send_timeout(Output::Line(line).queued(), AFTER_CANCEL_WAIT);
    }

    /// Sends a message or thought chunk (the hot path: no JSON tree).
    pub(super) fn chunk(&mut self, thought: bool, message_id: &str, text: &str) {
        if self.merged(thought, message_id, text) {
            self.keep_chunk(thought, message_id, text, None, None);
            return;
        }
        let parent = self.nested.as_ref().map(|n| n.parent.clone());
        let child = self.nested.as_ref().and_then(|n| n.child.clone());
        let meta = parent.as_deref().map(parent_meta);
        let child_session = self.child_session();
        // On its own session, a child's chunk needs no mark.
        let (session, mark) = match &child_session {
            Some(session) => (session, None),
            None => (&self.session_id, meta.as_ref()),
        };
        let chunk = acp::fit::Update::Chunk {
            thought,
            message_id,
            text,
            meta: mark,
        };
        if let Some(line) = acp::fit::line(session, chunk, &self.capabilities) {
            self.deliver(line);
        }
        if let (Some(meta), Some(_)) = (&meta, &self.mirror) {
            self.mirror_line(acp::stored_chunk(thought, message_id, text, Some(meta)));
        }
        self.keep_chunk(thought, message_id, text, parent, child);
    }

    fn keep_chunk(
        &mut self,
        thought: bool,
        message_id: &str,
        text: &str,
        parent: Option<String>,
        child: Option<String>,
    ) {
        if self.mirror.is_some() {
            return;
        }
        if let Some(Kept::Chunk {
            thought: last_thought,
            message_id: last_id,
            text: last_text,
            parent: last_parent,
            child: last_child,
        }) = self.kept.last_mut()
        {
            if *last_thought == thought
                && last_id == message_id
                && *last_parent == parent
                && *last_child == child
            {
                last_text.push_str(text);
                return;
            }
        }
        self.kept.push(Kept::Chunk {
            thought,
            message_id: message_id.to_string(),
            text: text.to_string(),
            parent,
            child,
        });
    }

    /// Sends any other update (tool calls, plans, ...).
    pub(super) fn send(&mut self, mut update: SessionUpdate) {
        let mut progress = None;
        let mut meta = None;
        if let Some(nested) = self.nested.as_mut() {
            meta = Some(stored_meta(&nested.parent, nested.child.as_deref()));
            // The subagent's call ids are its model's: under the parent's,
            // so they never clash with the session's own.
            if let Some(id) = update.tool_call_id_mut() {
                *id = nested_id(&nested.parent, id);
            }
            if let (SessionUpdate::ToolCall(call), Some(lines)) =
                (&update, nested.progress.as_mut())
            {
                lines.push(format!("- {}", call.title));
                let start = lines.len().saturating_sub(PROGRESS_LINES);
                progress = Some(SessionUpdate::ToolCallUpdate(ToolCallUpdate {
                    tool_call_id: nested.parent.clone(),
                    status: None,
                    content: Some(vec![json!({"type": "content",
                        "content": acp::text_block(&lines[start..].join("\n"))})]),
                }));
            }
        }
        self.send_now(update.into_value_with_meta(meta));
        // The parent's tool call streams the subagent's progress.
        if let Some(progress) = progress {
            let nested = self.nested.take();
            self.send_now(progress.into_value());
            self.nested = nested;
        }
    }

    fn send_now(&mut self, update: Value) {
        self.write_fitted(update.clone());
        if self.nested.is_some() {
            self.mirrored(&update);
        }
        // A job's subagent is stored in its log, not with the turn.
        if self.mirror.is_some() {
            return;
        }
        self.kept.push(Kept::Other(update));
    }

    /// Writes an update as this client gets it (`acp::fit`), if it gets it.
    fn write_fitted(&mut self, update: Value) {
        let update = acp::fit::Update::Kept(update);
        if let Some(line) = acp::fit::line(&self.session_id, update, &self.capabilities) {
            self.deliver(line);
        }
    }

    /// The `_meta` of a subagent's update.
    fn nested_meta(&self) -> Option<Value> {
        self.nested
            .as_ref()
            .map(|nested| stored_meta(&nested.parent, nested.child.as_deref()))
    }

    /// Sends a live-only update (usage): shown, never replayed. A
    /// subagent's are not sent: the session's meter is the parent's.
    pub(super) fn send_live(&mut self, update: SessionUpdate) {
        if self.nested.is_some() {
            return;
        }
        self.write_fitted(update.into_value());
    }

    /// Sends an update that is shown but not kept for replay (what a
    /// later update replaces, such as a compaction in progress).
    pub(super) fn send_transient(&mut self, update: SessionUpdate) {
        self.write_fitted(update.into_value_with_meta(self.nested_meta()));
    }

    /// Shows a one-off notice: live only, never kept, never part of the
    /// answer. A subagent's is marked with the parent's tool call.
    pub(super) fn notice(&mut self, notice: &Notice) {
        let notice = acp::fit::Update::Notice(notice, self.nested_meta());
        if let Some(line) = acp::fit::line(&self.session_id, notice, &self.capabilities) {
            self.deliver(line);
        }
    }

    /// Takes what was sent since the last call, as the JSON texts to store.
    /// A chunk's text is written straight into its JSON (no tree of it is
    /// built), and each kept update is let go as soon as it is written.
    pub(super) fn take_kept(&mut self) -> Vec<String> {
        let mut texts = Vec::with_capacity(self.kept.len());
        for kept in std::mem::take(&mut self.kept) {
            texts.push(match kept {
                Kept::Chunk {
                    thought,
                    message_id,
                    text,
                    parent,
                    child,
                } => {
                    let meta = parent
                        .as_deref()
                        .map(|parent| stored_meta(parent, child.as_deref()));
                    acp::stored_chunk(thought, &message_id, &text, meta.as_ref())
                }
                Kept::Other(value) => value.to_string(),
            });
        }
        texts
    }
}

/// Turns provider deltas into `session/update` lines and keeps the text of
/// the current model call, so the turn can keep the (possibly partial)
/// answer.
pub(super) struct UpdateSink<'a> {
    pub updates: &'a RefCell<Updates>,
    cancel: CancelToken,
    pub message_id: String,
    thought_id: String,
    text: String,
    thought: String,
    /// Where status lines (retries) mark the provider's health.
    pub live: Option<super::report::SharedLive>,
    /// What of the message's text is shown yet: a tool call the model may
    /// be writing into its text is held back until the message ends.
    holder: super::text_calls::Holder,
    /// The text held back when the message ended, until the turn reads it
    /// as calls or has it shown.
    held: Option<String>,
}

impl<'a> UpdateSink<'a> {
    pub(super) fn new(cancel: CancelToken, updates: &'a RefCell<Updates>) -> UpdateSink<'a> {
        UpdateSink {
            updates,
            cancel,
            message_id: String::new(),
            thought_id: String::new(),
            text: String::new(),
            thought: String::new(),
            live: None,
            holder: Default::default(),
            held: None,
        }
    }

    /// Whether the turn was cancelled: nothing more of it is shown.
    pub(super) fn cancel_raised(&self) -> bool {
        self.cancel.is_cancelled()
    }

    /// Starts a new assistant message (one per model call), with fresh ids.
    pub(super) fn begin_message(&mut self) {
        // Held text nobody read as calls is shown, as its own message's.
        if let Some(held) = self.held.take() {
            self.show(&held);
        }
        self.holder = Default::default();
        let id = crate::util::random_hex();
        self.message_id = format!("msg_{id}");
        self.thought_id = format!("thought_{id}");
    }

    /// The assistant message streamed since `begin_message`, if any. Its
    /// texts are trimmed to their length: the message lives on in the
    /// conversation.
    pub(super) fn take_message(&mut self) -> Option<Message> {
        if self.text.is_empty() && self.thought.is_empty() {
            None
        } else {
            let mut text = std::mem::take(&mut self.text);
            self.held = std::mem::take(&mut self.holder)
                .held(&text)
                .map(|at| text[at..].to_string());
            let mut thought = std::mem::take(&mut self.thought);
            text.shrink_to_fit();
            thought.shrink_to_fit();
            Some(Message::assistant(text, thought))
        }
    }

    /// The end of the last message's text that was held back (a possible
    /// tool call), now the turn's to read or show.
    pub(super) fn take_held(&mut self) -> Option<String> {
        self.held.take()
    }

    /// Shows text of the current message that was held back.
    pub(super) fn show(&mut self, text: &str) {
        if self.cancel.is_cancelled() || text.is_empty() {
            return;
        }
        self.updates
            .borrow_mut()
            .chunk(false, &self.message_id, text);
    }
}

impl Sink for UpdateSink<'_> {
    fn text(&mut self, delta: &str) {
        // After a cancel the client gets nothing more of this turn.
        if self.cancel.is_cancelled() {
            return;
        }
        self.text.push_str(delta);
        let shown = self.holder.advance(&self.text);
        if !shown.is_empty() {
            self.updates
                .borrow_mut()
                .chunk(false, &self.message_id, &self.text[shown]);
        }
    }

    fn notice(&mut self, text: &str) {
        // Status lines are retries and waits: the provider is struggling.
        if let Some(live) = &self.live {
            if let Ok(mut live) = live.lock() {
                live.health = super::report::Health::Retrying;
                live.health_error = Some(text.trim().to_string());
            }
        }
        if self.cancel.is_cancelled() {
            return;
        }
        // Shown, but not part of the model's answer (nor of its thoughts).
        self.updates
            .borrow_mut()
            .notice(&Notice::warning("Retrying the model request", text));
    }

    fn retrying(&mut self, text: &str, until_ms: i64) {
        if let Some(live) = &self.live {
            if let Ok(mut live) = live.lock() {
                live.waiting_until = Some(crate::clock::rfc3339(until_ms));
            }
        }
        self.notice(text);
    }

    fn more_waiting(&mut self, more: bool) {
        self.updates.borrow_mut().hold(more);
    }

    fn thought(&mut self, delta: &str) {
        if self.cancel.is_cancelled() {
            return;
        }
        self.thought.push_str(delta);
        self.updates
            .borrow_mut()
            .chunk(true, &self.thought_id, delta);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Updates of session `s` for a client that takes nothing unstable,
    /// and what they write.
    fn updates() -> (Updates, crossbeam_channel::Receiver<Queued>) {
        let (writer, lines) = crossbeam_channel::unbounded();
        let updates = Updates::new(
            "s".into(),
            ClientCapabilities::default(),
            writer,
            CancelToken::new(),
        );
        (updates, lines)
    }

    fn written(lines: &crossbeam_channel::Receiver<Queued>) -> Vec<String> {
        lines
            .try_iter()
            .map(|queued| match Output::from_queued(queued) {
                Output::Line(line) => line,
                Output::Close => "close".into(),
            })
            .collect()
    }

    #[test]
    fn lines_held_while_more_waits_go_together_in_order() {
        let (mut updates, lines) = updates();
        updates.hold(true);
        updates.chunk(false, "m1", "a");
        updates.chunk(false, "m1", "b");
        updates.send(SessionUpdate::Plan { entries: vec![] });
        updates.chunk(true, "t1", "c");
        updates.chunk(false, "m1", "d");
        updates.chunk(false, "m1", "e");
        assert!(written(&lines).is_empty(), "held while more waits");
        updates.hold(false);
        let sent = written(&lines);
        assert_eq!(sent.len(), 1, "one message for the lines");
        let each: Vec<Value> = sent[0]
            .split('\n')
            .map(|line| serde_json::from_str::<Value>(line).unwrap()["params"]["update"].clone())
            .collect();
        let shown: Vec<(String, String)> = each
            .iter()
            .map(|update| {
                let kind = update["sessionUpdate"].as_str().unwrap().to_string();
                let text = update["content"]["text"].as_str().unwrap_or("").to_string();
                (kind, text)
            })
            .collect();
        let pair = |kind: &str, text: &str| (kind.to_string(), text.to_string());
        assert_eq!(
            shown,
            [
                pair("agent_message_chunk", "ab"),
                pair("plan", ""),
                pair("agent_thought_chunk", "c"),
                pair("agent_message_chunk", "de"),
            ],
            "chunks in a row merged, the order kept"
        );
        // Kept for the store as ever.
        assert_eq!(updates.take_kept().len(), 4);
        // Not holding: each chunk goes at once, as it is.
        updates.chunk(false, "m1", "f");
        updates.chunk(false, "m1", "g");
        assert_eq!(written(&lines).len(), 2);
        // Held lines go once there are `HELD_LINES` of them or
        // `HELD_BYTES`, whatever waits.
        updates.hold(true);
        let many = 2 * HELD_LINES;
        for turn in 0..many {
            updates.chunk(turn % 2 == 0, "m1", "h");
        }
        let full = written(&lines);
        assert!(!full.is_empty(), "sent before the burst ended");
        for message in &full {
            let count = message.lines().count();
            assert!(count <= HELD_LINES, "{count} lines");
            assert!(count == HELD_LINES || message.len() >= HELD_BYTES);
        }
        updates.hold(false);
        let last = written(&lines);
        assert_eq!(last.len(), 1, "the rest");
        let total: usize = full.iter().chain(&last).map(|m| m.lines().count()).sum();
        assert_eq!(total, many);
        updates.hold(false);
        assert!(written(&lines).is_empty(), "nothing twice");
        // A merged chunk holds at most `MERGED_TEXT` bytes.
        updates.hold(true);
        let piece = "x".repeat(1000);
        for _ in 0..9 {
            updates.chunk(false, "m2", &piece);
        }
        updates.hold(false);
        let sent = written(&lines);
        let texts: Vec<usize> = sent
            .iter()
            .flat_map(|message| message.split('\n'))
            .map(|line| {
                let line: Value = serde_json::from_str(line).unwrap();
                line["params"]["update"]["content"]["text"]
                    .as_str()
                    .unwrap()
                    .len()
            })
            .collect();
        assert_eq!(texts, [4000, 4000, 1000]);
    }

    #[test]
    fn chunks_of_one_message_are_kept_merged() {
        let (mut updates, lines) = updates();
        updates.chunk(true, "t1", "Think ");
        updates.chunk(true, "t1", "hard");
        updates.chunk(false, "m1", "Hello");
        updates.chunk(false, "m1", ", world");
        updates.send(SessionUpdate::Plan { entries: vec![] });
        updates.chunk(false, "m1", "!");
        assert_eq!(lines.len(), 6);
        let kept: Vec<Value> = updates
            .take_kept()
            .iter()
            .map(|text| serde_json::from_str(text).unwrap())
            .collect();
        assert_eq!(kept.len(), 4);
        assert_eq!(kept[0]["content"]["text"], "Think hard");
        assert_eq!(kept[1]["content"]["text"], "Hello, world");
        assert_eq!(kept[1]["messageId"], "m1");
        assert_eq!(kept[3]["content"]["text"], "!");
        assert!(updates.take_kept().is_empty());
        let body = kept[1].to_string();
        let stored = acp::fit::Update::Stored(&body);
        let line = acp::fit::line("s\"x", stored, &ClientCapabilities::default()).unwrap();
        let parsed: Value = serde_json::from_str(&line).unwrap();
        assert_eq!(parsed["params"]["sessionId"], "s\"x");
        assert_eq!(parsed["params"]["update"], kept[1]);
    }

    #[test]
    fn kept_chunks_are_stored_as_their_json_tree_would_be() {
        let (writer, _lines) = crossbeam_channel::unbounded();
        let mut updates = Updates::new(
            "s".into(),
            ClientCapabilities::default(),
            writer,
            CancelToken::new(),
        );
        updates.chunk(false, "m1", "a \"quoted\"\n\u{1}");
        updates.nest(Some("call_1"));
        updates.chunk(true, "t1", "nested");
        let kept = updates.take_kept();
        assert_eq!(
            kept[0],
            json!({"sessionUpdate": "agent_message_chunk", "messageId": "m1",
                   "content": {"type": "text", "text": "a \"quoted\"\n\u{1}"}})
            .to_string()
        );
        assert_eq!(
            kept[1],
            json!({"sessionUpdate": "agent_thought_chunk", "messageId": "t1",
                   "content": {"type": "text", "text": "nested"},
                   "_meta": {"spindle": {"parentToolCallId": "call_1"},
                             "claudeCode": {"parentToolUseId": "call_1"}}})
            .to_string()
        );
    }

    #[test]
    fn a_full_queue_waits_but_not_past_a_cancel() {
        let (writer, lines) = crossbeam_channel::bounded(2);
        let cancel = CancelToken::new();
        let mut updates = Updates::new(
            "s".into(),
            ClientCapabilities::default(),
            writer,
            cancel.clone(),
        );
        updates.send(SessionUpdate::Plan { entries: vec![] });
        updates.send(SessionUpdate::Plan { entries: vec![] });
        let canceller = std::thread::spawn(move || {
            std::thread::sleep(std::time::Duration::from_millis(100));
            cancel.cancel();
        });
        // The queue is full and nobody reads it: this returns once the
        // cancel comes (and its short grace for room has passed).
        updates.send(SessionUpdate::Plan { entries: vec![] });
        canceller.join().unwrap();
        assert_eq!(lines.len(), 2);
        // Kept for the store all the same.
        assert_eq!(updates.take_kept().len(), 3);
    }
}

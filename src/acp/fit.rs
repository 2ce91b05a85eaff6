//! What one client gets of an update. Spindle keeps every update in one
//! form (the one it stores for replay) and fits it to the client at the
//! moment it is written, live or replayed: the unstable parts of ACP, and
//! the stable ones a client must opt into, go only to a client that asked
//! for them. Notices are built here too: they are live only, as a `notice`
//! or as a separate text chunk.
//!
//! `line` is the one way an update becomes a `session/update` line (a
//! turn's, the dispatcher's, a replay's, a notice), and `transcript_update`
//! the way it goes into a job's transcript: both take the same decision
//! (`decide`), so no door lets through what another would fit or leave out.

use super::{ClientCapabilities, ContentChunk, SessionUpdate, Severity};
use serde_json::Value;

/// How much of a notice's description is shown: it may carry a
/// provider's error message or a list of files.
const DESCRIPTION_CAP: usize = 4096;

/// A one-off notice for the user: never part of the answer, the
/// conversation or the replay.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Notice {
    pub severity: Severity,
    /// Short plain text that stands alone.
    pub title: String,
    pub description: Option<String>,
}

impl Notice {
    pub(crate) fn new(
        severity: Severity,
        title: impl Into<String>,
        description: Option<String>,
    ) -> Notice {
        let mut title: String = title.into().trim().to_string();
        if title.is_empty() {
            title = "Notice".into();
        }
        let description = description
            .map(|text| capped(text.trim()))
            .filter(|text| !text.is_empty());
        Notice {
            severity,
            title,
            description,
        }
    }

    pub(crate) fn info(title: impl Into<String>, description: impl Into<String>) -> Notice {
        Notice::new(Severity::Info, title, Some(description.into()))
    }

    pub(crate) fn warning(title: impl Into<String>, description: impl Into<String>) -> Notice {
        Notice::new(Severity::Warning, title, Some(description.into()))
    }

    /// The text a client without notices reads: the title in italics, the
    /// description after it (below it when it has several lines).
    pub(crate) fn text(&self) -> String {
        // A title may end in its own full stop (a hook's failure does):
        // never two.
        let title = crate::util::sentence(&self.title);
        match &self.description {
            None => format!("_{title}_\n\n"),
            Some(description) if description.contains('\n') => {
                format!("_{}:_\n\n{description}\n\n", title.trim_end_matches('.'))
            }
            Some(description) => format!("_{title}_ {description}\n\n"),
        }
    }

    /// The update this client gets: a `notice` when it takes them
    /// (`session.notices`, or the older `_meta.spindle.notices`), else an
    /// agent message chunk of its own, whose `notice_` id keeps it apart
    /// from the answer.
    pub(crate) fn update(&self, capabilities: &ClientCapabilities) -> SessionUpdate {
        if capabilities.notices() {
            SessionUpdate::Notice {
                severity: self.severity,
                title: self.title.clone(),
                description: self.description.clone(),
            }
        } else {
            SessionUpdate::AgentMessageChunk(ContentChunk::text(
                &self.text(),
                format!("notice_{}", crate::util::random_hex()),
            ))
        }
    }

    /// The whole `session/update` line of this notice for this client.
    pub(crate) fn line(&self, session_id: &str, capabilities: &ClientCapabilities) -> String {
        let line = line(session_id, Update::Notice(self, None), capabilities);
        line.unwrap_or_default()
    }
}

fn capped(text: &str) -> String {
    if text.len() <= DESCRIPTION_CAP {
        return text.to_string();
    }
    let mut end = DESCRIPTION_CAP;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &text[..end])
}

/// What a client gets of an update of one kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fit {
    /// As it is.
    Keep,
    /// Nothing: it did not ask for it (or it is a stored notice).
    Drop,
    /// The fields of a tool call fitted (`fit_tool_call`).
    ToolCall,
    /// The plan as a `plan_update` (`plan_update`).
    PlanUpdate,
}

/// The one decision of what this client gets of an update, from its kind
/// (`sessionUpdate`) and its message id (a chunk's).
fn decide(kind: &str, message_id: Option<&str>, capabilities: &ClientCapabilities) -> Fit {
    let given = |taken: bool| if taken { Fit::Keep } else { Fit::Drop };
    match kind {
        // Only for a client that advertised `session.compaction`.
        "compaction_update" | "compaction_summary_chunk" => given(capabilities.session.compaction),
        "tool_call" | "tool_call_update" => Fit::ToolCall,
        // Only for a client that advertised `subagents`.
        "subagent_update" => given(capabilities.subagents),
        "plan" if capabilities.plan => Fit::PlanUpdate,
        // A notice is never stored: one that was (an older database's)
        // is not replayed; a live one is built for the client (`Notice`).
        "notice" => Fit::Drop,
        "agent_message_chunk" => given(!message_id.is_some_and(|id| id.starts_with("notice_"))),
        _ => Fit::Keep,
    }
}

/// Fits an update, as kept for the store, to this client; `false` when
/// the client must not get it at all.
fn fit(update: &mut Value, capabilities: &ClientCapabilities) -> bool {
    let kind = update["sessionUpdate"].as_str().unwrap_or_default();
    match decide(kind, update["messageId"].as_str(), capabilities) {
        Fit::Keep => true,
        Fit::Drop => false,
        Fit::ToolCall => {
            fit_tool_call(update, capabilities);
            true
        }
        Fit::PlanUpdate => {
            *update = plan_update(std::mem::take(update));
            true
        }
    }
}

/// The session's plan (`todo_write`'s) as an unstable `plan_update` for a
/// client that advertised `plan`: the same entries, as the items of a
/// plan with an id. A subagent's plan is one of its own, under its
/// parent's tool call, rather than replacing the session's.
fn plan_update(mut plan: Value) -> Value {
    let entries = plan["entries"].take();
    let plan_id = match plan["_meta"]["spindle"]["parentToolCallId"].as_str() {
        Some(parent) => format!("todo/{parent}"),
        None => "todo".to_string(),
    };
    let meta = plan.get_mut("_meta").map(Value::take);
    SessionUpdate::PlanUpdate { plan_id, entries }.into_value_with_meta(meta)
}

/// Fits the fields of a tool call: in a `tool_call`, a `tool_call_update`
/// or a permission request's `toolCall`. The tool's `name` (as the model
/// called it) is stable and goes to every client; a removed file's diff
/// `deleted` goes only to a client that opted in
/// (`_meta.spindle.diffDeleted`).
pub(crate) fn fit_tool_call(tool_call: &mut Value, capabilities: &ClientCapabilities) {
    let Some(fields) = tool_call.as_object_mut() else {
        return;
    };
    if !capabilities.meta.spindle.diff_deleted {
        let content = fields.get_mut("content").and_then(Value::as_array_mut);
        for block in content.into_iter().flatten() {
            if block["type"] == "diff" {
                if let Some(diff) = block.as_object_mut() {
                    diff.remove("deleted");
                }
            }
        }
    }
}

/// Whether a stored update may need fitting: a cheap look at its text
/// before it is parsed (most stored updates are chunks, written as is).
fn may_need_fitting(body: &str) -> bool {
    [
        r#""messageId":"notice_"#,
        r#""sessionUpdate":"compaction_"#,
        r#""sessionUpdate":"tool_call"#,
        r#""sessionUpdate":"plan""#,
        CHILD_MARK_TEXT,
    ]
    .iter()
    .any(|mark| body.contains(mark))
}

/// The key under `_meta.spindle` that names a subagent's child session
/// (`task-…`) in the stored form of its updates.
pub(crate) const CHILD_MARK: &str = "subagentSession";
const CHILD_MARK_TEXT: &str = r#""subagentSession""#;

/// What ends a child session's id, after its parent's and a `/`.
const CHILD_PREFIX: &str = "task-";

/// The id of a subagent's child session: its parent's, then its key.
pub(crate) fn child_session_id(parent: &str, key: &str) -> String {
    format!("{parent}/{key}")
}

/// A fresh key for a subagent's child session.
pub(crate) fn new_child_key() -> String {
    format!("{CHILD_PREFIX}{}", crate::util::random_hex())
}

/// The parent session and the key of a child session's id, if it is one.
pub(crate) fn parent_of(session_id: &str) -> Option<(&str, &str)> {
    let (parent, key) = session_id.rsplit_once('/')?;
    let hex = key.strip_prefix(CHILD_PREFIX)?;
    (!parent.is_empty() && !hex.is_empty() && hex.bytes().all(|b| b.is_ascii_hexdigit()))
        .then_some((parent, key))
}

/// The session a stored update goes to for this client, and the update
/// made fit for it. A subagent's updates carry its child session's key;
/// a client that takes subagents gets them on that child session,
/// without the parent's marks, and the `subagent_update`s (the child's
/// announcement and state) on the parent, naming the child. Any other
/// client gets them as before: on the parent, marked with its tool call
/// (and `fit` leaves the `subagent_update`s out).
fn route(update: &mut Value, session_id: &str, capabilities: &ClientCapabilities) -> String {
    let key = update
        .get_mut("_meta")
        .and_then(|meta| meta.get_mut("spindle"))
        .and_then(Value::as_object_mut)
        .and_then(|spindle| spindle.remove(CHILD_MARK));
    let Some(key) = key.as_ref().and_then(Value::as_str) else {
        return session_id.to_string();
    };
    if !capabilities.subagents {
        return session_id.to_string();
    }
    let child = child_session_id(session_id, key);
    if let Some(fields) = update.as_object_mut() {
        if fields.get("sessionUpdate") == Some(&Value::from("subagent_update")) {
            fields.remove("_meta");
            fields.insert("sessionId".into(), Value::String(child));
            return session_id.to_string();
        }
        if let Some(meta) = fields.get_mut("_meta").and_then(Value::as_object_mut) {
            meta.remove("spindle");
            meta.remove("claudeCode");
            if meta.is_empty() {
                fields.remove("_meta");
            }
        }
    }
    child
}

/// An update on its way to one client, in the form Spindle has it.
pub(crate) enum Update<'a> {
    /// As the store keeps it (`SessionUpdate::into_value`, marks and all).
    Kept(Value),
    /// A stored update's JSON text, replayed.
    Stored(&'a str),
    /// A message or thought chunk, the hot path: written without a JSON
    /// tree; `meta` marks a subagent's.
    Chunk {
        thought: bool,
        message_id: &'a str,
        text: &'a str,
        meta: Option<&'a Value>,
    },
    /// A one-off notice, live only, with a subagent's `_meta`.
    Notice(&'a Notice, Option<Value>),
}

/// The whole `session/update` line of an update for this client; `None`
/// when this client does not get it. Every update Spindle writes to a
/// client is made here.
pub(crate) fn line(
    session_id: &str,
    update: Update<'_>,
    capabilities: &ClientCapabilities,
) -> Option<String> {
    match update {
        Update::Kept(update) => kept_line(session_id, update, capabilities),
        Update::Stored(body) => {
            let parsed = may_need_fitting(body)
                .then(|| serde_json::from_str::<Value>(body).ok())
                .flatten();
            match parsed {
                Some(update) => kept_line(session_id, update, capabilities),
                // Most stored updates are chunks, written as they are.
                None => Some(super::replay_line(session_id, body)),
            }
        }
        Update::Chunk {
            thought,
            message_id,
            text,
            meta,
        } => {
            let kind = if thought {
                "agent_thought_chunk"
            } else {
                "agent_message_chunk"
            };
            (decide(kind, Some(message_id), capabilities) == Fit::Keep)
                .then(|| super::chunk_line(session_id, thought, message_id, text, meta))
        }
        Update::Notice(notice, meta) => {
            // Built for this client already (`Notice::update`): routed
            // only, for a stored notice is what `fit` leaves out.
            let mut update = notice.update(capabilities).into_value_with_meta(meta);
            let session_id = route(&mut update, session_id, capabilities);
            Some(super::update_line(&session_id, &update))
        }
    }
}

fn kept_line(
    session_id: &str,
    mut update: Value,
    capabilities: &ClientCapabilities,
) -> Option<String> {
    let session_id = route(&mut update, session_id, capabilities);
    if !fit(&mut update, capabilities) {
        return None;
    }
    Some(super::update_line(&session_id, &update))
}

/// A stored update as a job's transcript gives it to this client (the
/// same fitting as `line`); `None` when this client does not get it.
pub(crate) fn transcript_update(body: &str, capabilities: &ClientCapabilities) -> Option<Value> {
    let mut update = serde_json::from_str::<Value>(body).unwrap_or(Value::Null);
    fit(&mut update, capabilities).then_some(update)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn replay_line(
        session_id: &str,
        body: &str,
        capabilities: &ClientCapabilities,
    ) -> Option<String> {
        line(session_id, Update::Stored(body), capabilities)
    }

    fn with_subagents() -> ClientCapabilities {
        ClientCapabilities {
            subagents: true,
            ..Default::default()
        }
    }

    fn child_chunk() -> Value {
        json!({"sessionUpdate": "agent_message_chunk", "messageId": "m",
               "content": {"type": "text", "text": "hi"},
               "_meta": {"spindle": {"parentToolCallId": "t1", "subagentSession": "task-ab"},
                         "claudeCode": {"parentToolUseId": "t1"}}})
    }

    #[test]
    fn a_child_update_goes_to_the_child_only_for_a_client_that_takes_subagents() {
        let mut update = child_chunk();
        assert_eq!(route(&mut update, "s1", &with_subagents()), "s1/task-ab");
        assert!(update.get("_meta").is_none(), "{update}");
        let mut update = child_chunk();
        assert_eq!(
            route(&mut update, "s1", &ClientCapabilities::default()),
            "s1"
        );
        assert_eq!(
            update["_meta"],
            json!({"spindle": {"parentToolCallId": "t1"}, "claudeCode": {"parentToolUseId": "t1"}})
        );
    }

    #[test]
    fn a_subagent_update_names_the_child_on_the_parent_or_is_left_out() {
        let stored = json!({"sessionUpdate": "subagent_update", "state": {"state": "running"},
            "_meta": {"spindle": {"parentToolCallId": "t1", "subagentSession": "task-ab"}}});
        let line = line("s1", Update::Kept(stored.clone()), &with_subagents()).unwrap();
        let line: Value = serde_json::from_str(&line).unwrap();
        assert_eq!(line["params"]["sessionId"], "s1");
        assert_eq!(
            line["params"]["update"],
            json!({"sessionUpdate": "subagent_update", "state": {"state": "running"},
                   "sessionId": "s1/task-ab"})
        );
        let default = ClientCapabilities::default();
        assert!(super::line("s1", Update::Kept(stored.clone()), &default).is_none());
        let body = stored.to_string();
        assert!(replay_line("s1", &body, &ClientCapabilities::default()).is_none());
        assert!(replay_line("s1", &body, &with_subagents()).is_some());
    }

    #[test]
    fn only_a_child_key_names_a_child_session() {
        assert_eq!(parent_of("s1/task-ab12"), Some(("s1", "task-ab12")));
        assert_eq!(parent_of("a/b/task-0"), Some(("a/b", "task-0")));
        for id in ["s1", "s1/task-", "/task-ab", "s1/task-xyz", "s1/other-ab"] {
            assert_eq!(parent_of(id), None, "{id}");
        }
    }

    fn opted_in() -> ClientCapabilities {
        let mut capabilities = ClientCapabilities::default();
        capabilities.meta.spindle.notices = true;
        capabilities
    }

    #[test]
    fn a_notice_is_an_update_or_a_chunk_of_its_own() {
        let notice = Notice::warning("No sandbox is available", "Every command asks.");
        let update = notice.update(&opted_in()).into_value();
        assert_eq!(
            update,
            json!({"sessionUpdate": "notice", "severity": "warning",
                   "title": "No sandbox is available", "description": "Every command asks."})
        );
        let chunk = notice.update(&ClientCapabilities::default()).into_value();
        assert_eq!(chunk["sessionUpdate"], "agent_message_chunk");
        assert_eq!(
            chunk["content"]["text"],
            "_No sandbox is available._ Every command asks.\n\n"
        );
        // Neither form is ever stored for replay, nor replayed.
        let default = ClientCapabilities::default();
        assert!(!fit(&mut chunk.clone(), &default) && !fit(&mut update.clone(), &opted_in()));
    }

    #[test]
    fn a_notice_has_a_title_and_a_capped_description() {
        let notice = Notice::new(Severity::Error, "  ", Some("x".repeat(10_000)));
        assert_eq!(notice.title, "Notice");
        assert!(notice.description.as_ref().unwrap().len() <= DESCRIPTION_CAP + 3);
        let list = Notice::warning("Files left out", "- a\n- b");
        assert_eq!(list.text(), "_Files left out:_\n\n- a\n- b\n\n");
        assert_eq!(
            Notice::new(Severity::Info, "t", Some(" ".into())).description,
            None
        );
        // A title that ends in its own full stop gets no second one.
        let hook = "The Stop hook `x` timed out after 1 s; the session goes on.";
        let text = Notice::new(Severity::Warning, hook, None).text();
        assert_eq!(text, format!("_{hook}_\n\n"));
        let text = Notice::warning(hook, "why").text();
        assert_eq!(text, format!("_{hook}_ why\n\n"));
        assert_eq!(
            Notice::warning("Done.", "- a\n- b").text(),
            "_Done:_\n\n- a\n- b\n\n"
        );
    }

    #[test]
    fn the_stable_capability_and_the_old_opt_in_both_take_notices() {
        let notice = Notice::info("Title", "Text");
        let mut stable = ClientCapabilities::default();
        stable.session.notices = true;
        assert_eq!(
            notice.update(&stable).into_value()["sessionUpdate"],
            "notice"
        );
        assert_eq!(
            notice.update(&opted_in()).into_value()["sessionUpdate"],
            "notice"
        );
        let parsed: crate::acp::InitializeRequest = serde_json::from_value(json!({
            "protocolVersion": 1,
            "clientCapabilities": {"session": {"notices": {}}}}))
        .unwrap();
        assert!(parsed.client_capabilities.notices());
        let parsed: crate::acp::InitializeRequest = serde_json::from_value(json!({
            "protocolVersion": 1,
            "clientCapabilities": {"session": {"notices": true, "compaction": null}}}))
        .unwrap();
        assert!(!parsed.client_capabilities.notices());
        assert!(!parsed.client_capabilities.session.compaction);
    }

    #[test]
    fn stored_notices_are_not_replayed() {
        let old = json!({"sessionUpdate": "agent_message_chunk", "messageId": "notice_1",
                         "content": {"type": "text", "text": "_yolo_"}})
        .to_string();
        assert_eq!(replay_line("s", &old, &opted_in()), None);
        let answer = json!({"sessionUpdate": "agent_message_chunk", "messageId": "msg_1",
                            "content": {"type": "text", "text": "\"messageId\":\"notice_"}})
        .to_string();
        assert!(replay_line("s", &answer, &opted_in()).is_some());
    }

    #[test]
    fn compaction_goes_only_to_a_client_that_takes_it() {
        let stored = json!({"sessionUpdate": "compaction_update", "compactionId": "cmp_1",
                            "status": "completed"})
        .to_string();
        assert_eq!(
            replay_line("s", &stored, &ClientCapabilities::default()),
            None
        );
        let mut capabilities = ClientCapabilities::default();
        capabilities.session.compaction = true;
        let line = replay_line("s", &stored, &capabilities).unwrap();
        let parsed: Value = serde_json::from_str(&line).unwrap();
        assert_eq!(parsed["params"]["update"].to_string(), stored);
    }

    #[test]
    fn a_tool_name_goes_to_every_client() {
        let stored = json!({"sessionUpdate": "tool_call", "toolCallId": "c1", "name": "read_file",
                            "title": "Read a.rs", "kind": "read", "status": "pending"})
        .to_string();
        let replayed = |capabilities: &ClientCapabilities| -> Value {
            let line = replay_line("s", &stored, capabilities).unwrap();
            serde_json::from_str::<Value>(&line).unwrap()["params"]["update"].clone()
        };
        assert_eq!(replayed(&ClientCapabilities::default()).to_string(), stored);
        // The old opt-in is an unknown field now, and changes nothing.
        let capabilities: ClientCapabilities =
            serde_json::from_value(json!({"_meta": {"spindle": {"toolCallName": true}}})).unwrap();
        assert_eq!(replayed(&capabilities).to_string(), stored);
        let mut request = json!({"toolCallId": "c1", "name": "write_file", "title": "Write"});
        fit_tool_call(&mut request, &ClientCapabilities::default());
        assert_eq!(request["name"], "write_file");
    }

    #[test]
    fn the_deleted_flag_goes_only_to_a_client_that_asked() {
        let mut update = json!({"sessionUpdate": "tool_call_update", "toolCallId": "c1",
            "content": [{"type": "diff", "path": "/w/a", "oldText": "a", "newText": "",
                         "deleted": true}, {"type": "content", "content": {"type": "text",
                         "text": "deleted"}}]});
        let stored = update.clone();
        assert!(fit(&mut update, &ClientCapabilities::default()));
        assert!(update["content"][0].get("deleted").is_none(), "{update}");
        assert_eq!(update["content"][1], stored["content"][1]);
        let mut capabilities = ClientCapabilities::default();
        capabilities.meta.spindle.diff_deleted = true;
        let mut kept = stored.clone();
        assert!(fit(&mut kept, &capabilities));
        assert_eq!(kept, stored);
    }

    #[test]
    fn a_plan_is_a_plan_update_for_a_client_that_takes_them() {
        let entries = json!([{"content": "Step", "priority": "high", "status": "pending"}]);
        let stored = json!({"sessionUpdate": "plan", "entries": entries}).to_string();
        let mut capabilities = ClientCapabilities::default();
        let line = replay_line("s", &stored, &capabilities).unwrap();
        assert!(
            line.ends_with(&format!("\"update\":{stored}}}}}")),
            "{line}"
        );
        capabilities.plan = true;
        let line = replay_line("s", &stored, &capabilities).unwrap();
        let update = serde_json::from_str::<Value>(&line).unwrap()["params"]["update"].clone();
        assert_eq!(
            update,
            json!({"sessionUpdate": "plan_update",
                   "plan": {"type": "items", "planId": "todo", "entries": entries}})
        );
        let mut nested = json!({"sessionUpdate": "plan", "entries": [],
                                "_meta": {"spindle": {"parentToolCallId": "t1"}}});
        assert!(fit(&mut nested, &capabilities));
        assert_eq!(nested["plan"]["planId"], "todo/t1");
        assert_eq!(nested["_meta"]["spindle"]["parentToolCallId"], "t1");
    }

    /// Every form an update takes on its way out (kept, stored, a chunk,
    /// a job's transcript) is fitted by the one decision: what a client
    /// without the opt-in must not get is left out of each alike.
    #[test]
    fn every_door_fits_an_update_alike() {
        let plain = ClientCapabilities::default();
        let mut opted = opted_in();
        opted.plan = true;
        opted.session.compaction = true;
        let updates = [
            json!({"sessionUpdate": "compaction_update", "compactionId": "c", "status": "completed"}),
            json!({"sessionUpdate": "plan", "entries": []}),
            json!({"sessionUpdate": "tool_call", "toolCallId": "c1", "title": "Remove a",
                   "content": [{"type": "diff", "path": "/w/a", "oldText": "a", "newText": "",
                                "deleted": true}]}),
            json!({"sessionUpdate": "agent_message_chunk", "messageId": "notice_1",
                   "content": {"type": "text", "text": "_old notice_"}}),
        ];
        for capabilities in [&plain, &opted] {
            for update in &updates {
                let body = update.to_string();
                let kept = line("s", Update::Kept(update.clone()), capabilities);
                assert_eq!(
                    kept,
                    line("s", Update::Stored(&body), capabilities),
                    "{body}"
                );
                let transcript = transcript_update(&body, capabilities);
                let sent = kept.map(|l| serde_json::from_str::<Value>(&l).unwrap());
                assert_eq!(
                    transcript.as_ref(),
                    sent.as_ref().map(|l| &l["params"]["update"]),
                    "{body}"
                );
            }
        }
        let compaction = updates[0].clone();
        assert!(line("s", Update::Kept(compaction.clone()), &plain).is_none());
        assert!(line("s", Update::Kept(compaction), &opted).is_some());
        let chunk = |message_id| Update::Chunk {
            thought: false,
            message_id,
            text: "hi",
            meta: None,
        };
        assert!(line("s", chunk("notice_1"), &plain).is_none());
        let sent = line("s", chunk("msg_1"), &plain).unwrap();
        let stored = crate::acp::stored_chunk(false, "msg_1", "hi", None);
        assert_eq!(Some(sent), line("s", Update::Stored(&stored), &plain));
        // A live notice is built for the client: a chunk of its own for
        // one without notices, a `notice` for one that takes them.
        let notice = Notice::info("Title", "Text");
        let as_chunk = line("s", Update::Notice(&notice, None), &plain).unwrap();
        assert!(as_chunk.contains(r#""messageId":"notice_"#), "{as_chunk}");
        let as_notice = line("s", Update::Notice(&notice, None), &opted).unwrap();
        assert!(
            as_notice.contains(r#""sessionUpdate":"notice""#),
            "{as_notice}"
        );
    }
}

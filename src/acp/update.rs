//! Every `session/update` Spindle sends, as a type, and the one place they
//! become JSON. The JSON is built by hand into a map (no serde derive):
//! it is what the store keeps and what `fit` adapts to each client, and
//! one non-generic function keeps the binary small. A message or thought
//! chunk, the hot path, is also written straight to text (`ChunkRef`,
//! `stored_chunk`) without a tree. Fields that carry free-form JSON built
//! elsewhere (tool call content, raw input, locations, config options,
//! commands, a user's prompt blocks) stay `Value`.

use serde::Serialize;
use serde_json::{Map, Value};

/// How loud a notice is (the unstable `NoticeSeverity`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Severity {
    Info,
    Warning,
    Error,
}

impl Severity {
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Info => "info",
            Severity::Warning => "warning",
            Severity::Error => "error",
        }
    }
}

/// One `session/update`, as the schema names it (`sessionUpdate`).
#[derive(Debug, Clone, PartialEq)]
pub enum SessionUpdate {
    UserMessageChunk(ContentChunk),
    AgentMessageChunk(ContentChunk),
    AgentThoughtChunk(ContentChunk),
    ToolCall(ToolCall),
    ToolCallUpdate(ToolCallUpdate),
    Plan {
        entries: Vec<PlanEntry>,
    },
    AvailableCommandsUpdate {
        available_commands: Vec<Value>,
    },
    CurrentModeUpdate {
        current_mode_id: String,
    },
    ConfigOptionUpdate {
        config_options: Value,
    },
    SessionInfoUpdate {
        title: Option<String>,
        updated_at: Option<String>,
    },
    UsageUpdate {
        used: u64,
        size: u64,
        cost: Option<Cost>,
    },
    /// Unstable: a compaction's state. `tokens` (before, after) go in
    /// `_meta.spindle` as `tokensBefore` and `tokensAfter`.
    CompactionUpdate {
        compaction_id: String,
        status: CompactionStatus,
        /// The summary's text, sent as one text block.
        summary: Option<String>,
        error: Option<String>,
        tokens: Option<(u64, u64)>,
    },
    /// Unstable: a piece of the summary as it is written.
    CompactionSummaryChunk {
        compaction_id: String,
        text: String,
    },
    /// Unstable: a one-off notice.
    Notice {
        severity: Severity,
        title: String,
        description: Option<String>,
    },
    /// Unstable: a plan with an id, as items.
    PlanUpdate {
        plan_id: String,
        entries: Value,
    },
}

/// A message chunk: `content` is a content block (a prompt's blocks are
/// the client's, kept as they came).
#[derive(Debug, Clone, PartialEq)]
pub struct ContentChunk {
    pub content: Value,
    pub message_id: Option<String>,
}

impl ContentChunk {
    /// A text chunk of the message `message_id`.
    pub fn text(text: &str, message_id: String) -> ContentChunk {
        ContentChunk {
            content: text_block(text),
            message_id: Some(message_id),
        }
    }
}

/// A tool call as first shown.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolCall {
    pub tool_call_id: String,
    /// The tool's name as the model called it (stable: every client gets
    /// it).
    pub name: Option<String>,
    pub title: String,
    pub kind: ToolKind,
    pub status: ToolCallStatus,
    pub locations: Option<Vec<Value>>,
    pub raw_input: Option<Value>,
}

/// What changed of a tool call; what is `None` is left out.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolCallUpdate {
    pub tool_call_id: String,
    pub status: Option<ToolCallStatus>,
    pub content: Option<Vec<Value>>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ToolCallStatus {
    Pending,
    InProgress,
    Completed,
    Failed,
}

impl ToolCallStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            ToolCallStatus::Pending => "pending",
            ToolCallStatus::InProgress => "in_progress",
            ToolCallStatus::Completed => "completed",
            ToolCallStatus::Failed => "failed",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ToolKind {
    Read,
    Edit,
    Delete,
    Move,
    Search,
    Execute,
    Think,
    Fetch,
    SwitchMode,
    Other,
}

impl ToolKind {
    pub fn as_str(self) -> &'static str {
        match self {
            ToolKind::Read => "read",
            ToolKind::Edit => "edit",
            ToolKind::Delete => "delete",
            ToolKind::Move => "move",
            ToolKind::Search => "search",
            ToolKind::Execute => "execute",
            ToolKind::Think => "think",
            ToolKind::Fetch => "fetch",
            ToolKind::SwitchMode => "switch_mode",
            ToolKind::Other => "other",
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct PlanEntry {
    pub content: String,
    pub priority: PlanEntryPriority,
    pub status: PlanEntryStatus,
}

impl PlanEntry {
    pub fn to_value(&self) -> Value {
        let mut map = Map::new();
        put(&mut map, "content", string(&self.content));
        put(&mut map, "priority", string(self.priority.as_str()));
        put(&mut map, "status", string(self.status.as_str()));
        Value::Object(map)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PlanEntryPriority {
    High,
    Medium,
    Low,
}

impl PlanEntryPriority {
    pub fn as_str(self) -> &'static str {
        match self {
            PlanEntryPriority::High => "high",
            PlanEntryPriority::Medium => "medium",
            PlanEntryPriority::Low => "low",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PlanEntryStatus {
    Pending,
    InProgress,
    Completed,
}

impl PlanEntryStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            PlanEntryStatus::Pending => "pending",
            PlanEntryStatus::InProgress => "in_progress",
            PlanEntryStatus::Completed => "completed",
        }
    }
}

/// What the session cost so far.
#[derive(Debug, Clone, PartialEq)]
pub struct Cost {
    pub amount: f64,
    pub currency: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CompactionStatus {
    InProgress,
    Completed,
    Failed,
    Cancelled,
}

impl CompactionStatus {
    fn as_str(self) -> &'static str {
        match self {
            CompactionStatus::InProgress => "in_progress",
            CompactionStatus::Completed => "completed",
            CompactionStatus::Failed => "failed",
            CompactionStatus::Cancelled => "cancelled",
        }
    }
}

fn put(map: &mut Map<String, Value>, key: &str, value: Value) {
    map.insert(key.to_string(), value);
}

fn string(text: &str) -> Value {
    Value::String(text.to_string())
}

/// A text content block.
pub(crate) fn text_block(text: &str) -> Value {
    let mut map = Map::new();
    put(&mut map, "type", string("text"));
    put(&mut map, "text", string(text));
    Value::Object(map)
}

impl SessionUpdate {
    /// A tool call update with a status and the content it ends with.
    pub fn tool_call_ended(id: &str, status: ToolCallStatus, content: Vec<Value>) -> SessionUpdate {
        SessionUpdate::ToolCallUpdate(ToolCallUpdate {
            tool_call_id: id.to_string(),
            status: Some(status),
            content: Some(content),
        })
    }

    /// The tool call id of a tool call or its update.
    pub fn tool_call_id_mut(&mut self) -> Option<&mut String> {
        match self {
            SessionUpdate::ToolCall(call) => Some(&mut call.tool_call_id),
            SessionUpdate::ToolCallUpdate(update) => Some(&mut update.tool_call_id),
            _ => None,
        }
    }

    /// The update as JSON: what is sent and stored.
    pub fn into_value(self) -> Value {
        self.into_value_with_meta(None)
    }

    /// The update as JSON, its `_meta` replaced by `meta` when given.
    pub fn into_value_with_meta(self, meta: Option<Value>) -> Value {
        let mut map = Map::new();
        let kind = match self {
            SessionUpdate::UserMessageChunk(chunk) => {
                chunk_fields(&mut map, chunk);
                "user_message_chunk"
            }
            SessionUpdate::AgentMessageChunk(chunk) => {
                chunk_fields(&mut map, chunk);
                "agent_message_chunk"
            }
            SessionUpdate::AgentThoughtChunk(chunk) => {
                chunk_fields(&mut map, chunk);
                "agent_thought_chunk"
            }
            SessionUpdate::ToolCall(call) => {
                put(&mut map, "toolCallId", Value::String(call.tool_call_id));
                if let Some(name) = call.name {
                    put(&mut map, "name", Value::String(name));
                }
                put(&mut map, "title", Value::String(call.title));
                put(&mut map, "kind", string(call.kind.as_str()));
                put(&mut map, "status", string(call.status.as_str()));
                if let Some(locations) = call.locations {
                    put(&mut map, "locations", Value::Array(locations));
                }
                if let Some(raw_input) = call.raw_input {
                    put(&mut map, "rawInput", raw_input);
                }
                "tool_call"
            }
            SessionUpdate::ToolCallUpdate(update) => {
                put(&mut map, "toolCallId", Value::String(update.tool_call_id));
                if let Some(status) = update.status {
                    put(&mut map, "status", string(status.as_str()));
                }
                if let Some(content) = update.content {
                    put(&mut map, "content", Value::Array(content));
                }
                "tool_call_update"
            }
            SessionUpdate::Plan { entries } => {
                let entries = entries.iter().map(PlanEntry::to_value).collect();
                put(&mut map, "entries", Value::Array(entries));
                "plan"
            }
            SessionUpdate::AvailableCommandsUpdate { available_commands } => {
                put(
                    &mut map,
                    "availableCommands",
                    Value::Array(available_commands),
                );
                "available_commands_update"
            }
            SessionUpdate::CurrentModeUpdate { current_mode_id } => {
                put(&mut map, "currentModeId", Value::String(current_mode_id));
                "current_mode_update"
            }
            SessionUpdate::ConfigOptionUpdate { config_options } => {
                put(&mut map, "configOptions", config_options);
                "config_option_update"
            }
            SessionUpdate::SessionInfoUpdate { title, updated_at } => {
                if let Some(title) = title {
                    put(&mut map, "title", Value::String(title));
                }
                if let Some(updated_at) = updated_at {
                    put(&mut map, "updatedAt", Value::String(updated_at));
                }
                "session_info_update"
            }
            SessionUpdate::UsageUpdate { used, size, cost } => {
                put(&mut map, "used", Value::from(used));
                put(&mut map, "size", Value::from(size));
                if let Some(cost) = cost {
                    let mut fields = Map::new();
                    put(&mut fields, "amount", Value::from(cost.amount));
                    put(&mut fields, "currency", Value::String(cost.currency));
                    put(&mut map, "cost", Value::Object(fields));
                }
                "usage_update"
            }
            SessionUpdate::CompactionUpdate {
                compaction_id,
                status,
                summary,
                error,
                tokens,
            } => {
                put(&mut map, "compactionId", Value::String(compaction_id));
                put(&mut map, "status", string(status.as_str()));
                if let Some(summary) = summary {
                    put(
                        &mut map,
                        "summary",
                        Value::Array(vec![text_block(&summary)]),
                    );
                }
                if let Some(error) = error {
                    put(&mut map, "error", Value::String(error));
                }
                if let Some((before, after)) = tokens {
                    let mut spindle = Map::new();
                    put(&mut spindle, "tokensBefore", Value::from(before));
                    put(&mut spindle, "tokensAfter", Value::from(after));
                    let mut fields = Map::new();
                    put(&mut fields, "spindle", Value::Object(spindle));
                    put(&mut map, "_meta", Value::Object(fields));
                }
                "compaction_update"
            }
            SessionUpdate::CompactionSummaryChunk {
                compaction_id,
                text,
            } => {
                put(&mut map, "compactionId", Value::String(compaction_id));
                put(&mut map, "content", text_block(&text));
                "compaction_summary_chunk"
            }
            SessionUpdate::Notice {
                severity,
                title,
                description,
            } => {
                put(&mut map, "severity", string(severity.as_str()));
                put(&mut map, "title", Value::String(title));
                if let Some(description) = description {
                    put(&mut map, "description", Value::String(description));
                }
                "notice"
            }
            SessionUpdate::PlanUpdate { plan_id, entries } => {
                let mut plan = Map::new();
                put(&mut plan, "type", string("items"));
                put(&mut plan, "planId", Value::String(plan_id));
                put(&mut plan, "entries", entries);
                put(&mut map, "plan", Value::Object(plan));
                "plan_update"
            }
        };
        put(&mut map, "sessionUpdate", string(kind));
        if let Some(meta) = meta {
            put(&mut map, "_meta", meta);
        }
        Value::Object(map)
    }
}

fn chunk_fields(map: &mut Map<String, Value>, chunk: ContentChunk) {
    put(map, "content", chunk.content);
    if let Some(id) = chunk.message_id {
        put(map, "messageId", Value::String(id));
    }
}

/// A message or thought chunk, borrowed, to be written without a JSON
/// tree: the fields in the order a tree of it writes them (`serde_json`'s
/// maps are sorted), so the stored text is the same whichever way it is
/// written.
#[derive(Serialize)]
pub(crate) struct ChunkRef<'a> {
    #[serde(rename = "_meta", skip_serializing_if = "Option::is_none")]
    meta: Option<&'a Value>,
    content: TextRef<'a>,
    #[serde(rename = "messageId")]
    message_id: &'a str,
    #[serde(rename = "sessionUpdate")]
    session_update: &'static str,
}

#[derive(Serialize)]
struct TextRef<'a> {
    text: &'a str,
    #[serde(rename = "type")]
    kind: &'static str,
}

impl<'a> ChunkRef<'a> {
    /// An agent message (or thought) chunk; `meta` marks a subagent's.
    pub(crate) fn new(
        thought: bool,
        message_id: &'a str,
        text: &'a str,
        meta: Option<&'a Value>,
    ) -> ChunkRef<'a> {
        ChunkRef {
            meta,
            content: TextRef { text, kind: "text" },
            message_id,
            session_update: chunk_kind(thought),
        }
    }
}

/// An agent message (or thought) chunk as the store keeps it: the text of
/// its JSON tree, written without one.
pub(crate) fn stored_chunk(
    thought: bool,
    message_id: &str,
    text: &str,
    meta: Option<&Value>,
) -> String {
    if meta.is_some() {
        return serde_json::to_string(&ChunkRef::new(thought, message_id, text, meta))
            .unwrap_or_default();
    }
    // A whole message's text at a turn's end: written straight, the same
    // bytes (a test holds them together).
    let mut out = String::with_capacity(96 + message_id.len() + text.len() * 9 / 8);
    out.push_str(r#"{"content":{"text":"#);
    push_json_string(&mut out, text);
    out.push_str(r#","type":"text"},"messageId":"#);
    push_json_string(&mut out, message_id);
    out.push_str(r#","sessionUpdate":""#);
    out.push_str(chunk_kind(thought));
    out.push_str(r#""}"#);
    out
}

/// Writes `text` as a JSON string, escaped as serde_json escapes it: runs
/// that need no escape are copied whole.
pub(super) fn push_json_string(out: &mut String, text: &str) {
    out.push('"');
    let mut start = 0;
    for (at, byte) in text.bytes().enumerate() {
        let escape = match byte {
            b'"' => "\\\"",
            b'\\' => "\\\\",
            b'\n' => "\\n",
            b'\r' => "\\r",
            b'\t' => "\\t",
            0x08 => "\\b",
            0x0c => "\\f",
            0..=0x1f => "",
            _ => continue,
        };
        out.push_str(&text[start..at]);
        if escape.is_empty() {
            out.push_str(&format!("\\u{byte:04x}"));
        } else {
            out.push_str(escape);
        }
        start = at + 1;
    }
    out.push_str(&text[start..]);
    out.push('"');
}

/// The `sessionUpdate` of an agent message or thought chunk.
pub(super) fn chunk_kind(thought: bool) -> &'static str {
    if thought {
        "agent_thought_chunk"
    } else {
        "agent_message_chunk"
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::acp::{chunk_line, update_line};
    use serde_json::json;

    #[test]
    fn a_tool_call_update_leaves_out_what_did_not_change() {
        let update = SessionUpdate::ToolCallUpdate(ToolCallUpdate {
            tool_call_id: "c1".into(),
            status: Some(ToolCallStatus::InProgress),
            content: None,
        });
        assert_eq!(
            update.into_value().to_string(),
            r#"{"sessionUpdate":"tool_call_update","status":"in_progress","toolCallId":"c1"}"#
        );
    }

    #[test]
    fn a_tool_call_has_the_schema_fields() {
        let call = SessionUpdate::ToolCall(ToolCall {
            tool_call_id: "c1".into(),
            name: Some("read_file".into()),
            title: "Read a.rs".into(),
            kind: ToolKind::Read,
            status: ToolCallStatus::Pending,
            locations: Some(vec![json!({"path": "/w/a.rs"})]),
            raw_input: Some(json!({"path": "a.rs"})),
        });
        assert_eq!(
            call.into_value(),
            json!({"sessionUpdate": "tool_call", "toolCallId": "c1", "name": "read_file",
                   "title": "Read a.rs", "kind": "read", "status": "pending",
                   "locations": [{"path": "/w/a.rs"}], "rawInput": {"path": "a.rs"}})
        );
    }

    #[test]
    fn meta_goes_on_any_update_and_replaces_the_own() {
        let meta = json!({"spindle": {"parentToolCallId": "t1"}});
        let compaction = SessionUpdate::CompactionUpdate {
            compaction_id: "cmp_1".into(),
            status: CompactionStatus::Completed,
            summary: Some("S".into()),
            error: None,
            tokens: Some((10, 2)),
        };
        assert_eq!(
            compaction.clone().into_value(),
            json!({"sessionUpdate": "compaction_update", "compactionId": "cmp_1",
                   "status": "completed", "summary": [{"type": "text", "text": "S"}],
                   "_meta": {"spindle": {"tokensBefore": 10, "tokensAfter": 2}}})
        );
        assert_eq!(
            compaction.into_value_with_meta(Some(meta.clone()))["_meta"],
            meta
        );
        let mode = SessionUpdate::CurrentModeUpdate {
            current_mode_id: "plan".into(),
        };
        assert_eq!(
            mode.into_value_with_meta(Some(meta.clone())),
            json!({"sessionUpdate": "current_mode_update", "currentModeId": "plan",
                   "_meta": meta})
        );
    }

    #[test]
    fn a_chunk_written_straight_is_its_tree() {
        let meta = json!({"spindle": {"parentToolCallId": "t1"}});
        for (thought, meta) in [(false, None), (true, Some(&meta))] {
            let chunk = ContentChunk::text("a \"b\"\n", "m1".into());
            let update = if thought {
                SessionUpdate::AgentThoughtChunk(chunk)
            } else {
                SessionUpdate::AgentMessageChunk(chunk)
            };
            let tree = update.into_value_with_meta(meta.cloned());
            assert_eq!(
                stored_chunk(thought, "m1", "a \"b\"\n", meta),
                tree.to_string()
            );
            assert_eq!(
                chunk_line("s", thought, "m1", "a \"b\"\n", meta),
                update_line("s", &tree)
            );
        }
    }

    #[test]
    fn a_chunk_line_written_by_hand_is_what_serde_writes() {
        let every_ascii: String = (0u8..0x80).map(char::from).collect();
        let texts = [
            String::new(),
            "tok ".into(),
            "a \"b\"\n\\c\u{7f}".into(),
            every_ascii,
            "é ✓ 😀 \u{2028} \u{202e} \u{80} \u{9b}".into(),
            "\\u0000 \\\\\"".into(),
            "x".repeat(10_000),
        ];
        for text in &texts {
            for (session, message) in [("s", "m1"), ("se\"ss\\", "m\n\u{1}é")] {
                for thought in [false, true] {
                    let chunk = ContentChunk::text(text, message.into());
                    let update = if thought {
                        SessionUpdate::AgentThoughtChunk(chunk)
                    } else {
                        SessionUpdate::AgentMessageChunk(chunk)
                    };
                    let tree = update.into_value_with_meta(None);
                    assert_eq!(
                        chunk_line(session, thought, message, text, None),
                        update_line(session, &tree),
                        "{text:?}"
                    );
                    assert_eq!(
                        stored_chunk(thought, message, text, None),
                        tree.to_string(),
                        "{text:?}"
                    );
                }
            }
        }
    }

    /// One of every update, with every field it can carry.
    fn one_of_each() -> Vec<SessionUpdate> {
        let chunk = || ContentChunk::text("Hi", "m1".into());
        vec![
            SessionUpdate::UserMessageChunk(ContentChunk {
                content: json!({"type": "resource_link", "uri": "file:///w/a", "name": "a"}),
                message_id: Some("u1".into()),
            }),
            SessionUpdate::AgentMessageChunk(chunk()),
            SessionUpdate::AgentThoughtChunk(chunk()),
            SessionUpdate::ToolCall(ToolCall {
                tool_call_id: "c1".into(),
                name: Some("run_command".into()),
                title: "Run make".into(),
                kind: ToolKind::SwitchMode,
                status: ToolCallStatus::InProgress,
                locations: Some(vec![json!({"path": "/w/a", "line": 3})]),
                raw_input: Some(json!({"command": "make"})),
            }),
            SessionUpdate::tool_call_ended(
                "c1",
                ToolCallStatus::Failed,
                vec![json!({"type": "content", "content": text_block("Error")})],
            ),
            SessionUpdate::Plan {
                entries: vec![PlanEntry {
                    content: "Step".into(),
                    priority: PlanEntryPriority::Low,
                    status: PlanEntryStatus::InProgress,
                }],
            },
            SessionUpdate::AvailableCommandsUpdate {
                available_commands: vec![json!({"name": "init", "description": "Init"})],
            },
            SessionUpdate::CurrentModeUpdate {
                current_mode_id: "goal".into(),
            },
            SessionUpdate::ConfigOptionUpdate {
                config_options: json!([]),
            },
            SessionUpdate::SessionInfoUpdate {
                title: Some("Fix it".into()),
                updated_at: Some("2026-01-01T00:00:00Z".into()),
            },
            SessionUpdate::UsageUpdate {
                used: 10,
                size: 100,
                cost: Some(Cost {
                    amount: 0.25,
                    currency: "USD".into(),
                }),
            },
            SessionUpdate::CompactionUpdate {
                compaction_id: "cmp_1".into(),
                status: CompactionStatus::Failed,
                summary: None,
                error: Some("no".into()),
                tokens: Some((10, 10)),
            },
            SessionUpdate::CompactionSummaryChunk {
                compaction_id: "cmp_1".into(),
                text: "So far".into(),
            },
            SessionUpdate::Notice {
                severity: Severity::Warning,
                title: "Careful".into(),
                description: Some("Really.".into()),
            },
            SessionUpdate::PlanUpdate {
                plan_id: "todo".into(),
                entries: json!([{"content": "Step", "priority": "high", "status": "pending"}]),
            },
        ]
    }

    #[test]
    fn every_update_matches_the_schema() {
        let schema: Value = serde_json::from_str(include_str!(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/data/acp-schema.unstable.json"
        )))
        .unwrap();
        let wrapper = json!({
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "$ref": "#/$defs/SessionNotification",
            "$defs": schema["$defs"],
        });
        let validator = jsonschema::draft202012::options().build(&wrapper).unwrap();
        let no_id =
            json!({"sessionId": "s", "update": {"sessionUpdate": "tool_call", "title": "x"}});
        assert!(!validator.is_valid(&no_id));
        let mut seen = std::collections::BTreeSet::new();
        let meta = json!({"spindle": {"parentToolCallId": "t1"}});
        for update in one_of_each() {
            // Every variant is here: a new one must be added above.
            seen.insert(match &update {
                SessionUpdate::UserMessageChunk(_) => 0,
                SessionUpdate::AgentMessageChunk(_) => 1,
                SessionUpdate::AgentThoughtChunk(_) => 2,
                SessionUpdate::ToolCall(_) => 3,
                SessionUpdate::ToolCallUpdate(_) => 4,
                SessionUpdate::Plan { .. } => 5,
                SessionUpdate::AvailableCommandsUpdate { .. } => 6,
                SessionUpdate::CurrentModeUpdate { .. } => 7,
                SessionUpdate::ConfigOptionUpdate { .. } => 8,
                SessionUpdate::SessionInfoUpdate { .. } => 9,
                SessionUpdate::UsageUpdate { .. } => 10,
                SessionUpdate::CompactionUpdate { .. } => 11,
                SessionUpdate::CompactionSummaryChunk { .. } => 12,
                SessionUpdate::Notice { .. } => 13,
                SessionUpdate::PlanUpdate { .. } => 14,
            });
            for meta in [None, Some(meta.clone())] {
                let value = update.clone().into_value_with_meta(meta);
                let line: Value = serde_json::from_str(&update_line("s", &value)).unwrap();
                let errors: Vec<String> = validator
                    .iter_errors(&line["params"])
                    .map(|error| error.to_string())
                    .collect();
                assert!(errors.is_empty(), "{value}: {errors:?}");
            }
        }
        assert_eq!(seen.len(), 15);
    }
}

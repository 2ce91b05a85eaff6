//! ACP v1 protocol types and method names: what crosses the wire, named
//! after the schema, camelCase on the wire. Nothing here knows about HTTP,
//! providers or threads.
//!
//! `update.rs` is every `session/update` Spindle sends, as a type, and where
//! it becomes JSON (one update, the opt-in `subagent_update`, is still
//! built in `agent/turn/updates.rs`); `fit.rs` is what one client gets of an
//! update, live or replayed (the unstable and opt-in parts only for a client
//! that asked for them), and the live-only notices; every `session/update`
//! line is made there, so no update reaches a client unfitted. `spindle.rs` holds the
//! params of the vendor methods of docs/extensions.md, one type per method,
//! read field by field with errors that name the field; `spindle/results.rs`
//! their results of a fixed shape, `spindle/rewind.rs` the rewind methods'.

use serde::{Deserialize, Serialize};
use serde_json::Value;

pub(crate) mod fit;
pub(crate) mod spindle;
pub(crate) mod update;

pub(crate) use update::{
    stored_chunk, text_block, CompactionStatus, ContentChunk, Cost, PlanEntry, PlanEntryPriority,
    PlanEntryStatus, SessionUpdate, Severity, ToolCall, ToolCallStatus, ToolCallUpdate, ToolKind,
};

/// The protocol version we speak, whatever the client asks for.
pub(crate) const PROTOCOL_VERSION: u16 = 1;

/// Method names, client to agent.
pub(crate) mod method {
    pub(crate) const INITIALIZE: &str = "initialize";
    pub(crate) const AUTHENTICATE: &str = "authenticate";
    pub(crate) const LOGOUT: &str = "logout";
    pub(crate) const SESSION_NEW: &str = "session/new";
    pub(crate) const SESSION_LOAD: &str = "session/load";
    pub(crate) const SESSION_RESUME: &str = "session/resume";
    pub(crate) const SESSION_LIST: &str = "session/list";
    pub(crate) const SESSION_CLOSE: &str = "session/close";
    /// Unstable: a copy of a session that goes its own way.
    pub(crate) const SESSION_FORK: &str = "session/fork";
    /// Unstable, used by older clients: the `model` config option.
    pub(crate) const SESSION_SET_MODEL: &str = "session/set_model";
    pub(crate) const SESSION_DELETE: &str = "session/delete";
    /// Unstable: a title the client chose.
    pub(crate) const SESSION_SET_TITLE: &str = "session/set_title";
    /// Unstable: whether a session is in memory.
    pub(crate) const SESSION_STATUS: &str = "session/status";
    pub(crate) const SESSION_SET_MODE: &str = "session/set_mode";
    pub(crate) const SESSION_SET_CONFIG_OPTION: &str = "session/set_config_option";
    pub(crate) const SESSION_PROMPT: &str = "session/prompt";
    pub(crate) const SESSION_CANCEL: &str = "session/cancel";
    pub(crate) const CANCEL_REQUEST: &str = "$/cancel_request";
    /// Agent to client.
    pub(crate) const SESSION_UPDATE: &str = "session/update";
    pub(crate) const ELICITATION_CREATE: &str = "elicitation/create";
    /// Agent to client: a URL elicitation's flow is over.
    pub(crate) const ELICITATION_COMPLETE: &str = "elicitation/complete";
}

// ----- initialize -----

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct InitializeRequest {
    pub protocol_version: u16,
    #[serde(default)]
    pub client_capabilities: ClientCapabilities,
    #[serde(default)]
    pub client_info: Option<Implementation>,
}

/// What the client lets us use. Unknown keys are ignored, missing ones are
/// off, and a malformed optional part counts as absent rather than failing
/// the whole handshake.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ClientCapabilities {
    #[serde(default, deserialize_with = "lenient")]
    pub fs: FileSystemCapabilities,
    #[serde(default, deserialize_with = "lenient")]
    pub terminal: bool,
    #[serde(default, deserialize_with = "lenient")]
    pub auth: AuthCapabilities,
    #[serde(default, deserialize_with = "lenient")]
    pub elicitation: ElicitationCapabilities,
    #[serde(default, deserialize_with = "lenient")]
    pub session: ClientSessionCapabilities,
    /// Unstable: the client takes `plan_update` and `plan_removed`.
    #[serde(default, deserialize_with = "present")]
    pub plan: bool,
    /// Unstable: the client takes a subagent as a child session of its own.
    #[serde(default, deserialize_with = "present")]
    pub subagents: bool,
    #[serde(default, rename = "_meta", deserialize_with = "lenient")]
    pub meta: ClientMeta,
}

/// The session parts of the client's capabilities that Spindle uses.
#[derive(Debug, Clone, Default, Deserialize)]
pub(crate) struct ClientSessionCapabilities {
    /// The client takes `compaction_update` and
    /// `compaction_summary_chunk` (stable; there was never a vendor alias).
    #[serde(default, deserialize_with = "present")]
    pub compaction: bool,
    /// The client shows `notice` updates (stable; Spindle's older opt-in
    /// `_meta.spindle.notices` still counts, see `ClientCapabilities::notices`).
    #[serde(default, deserialize_with = "present")]
    pub notices: bool,
}

impl ClientCapabilities {
    /// Whether the client takes `notice` updates: `session.notices`, or
    /// the vendor opt-in that came before it.
    pub(crate) fn notices(&self) -> bool {
        self.session.notices || self.meta.spindle.notices
    }
}

/// `clientCapabilities._meta`: Spindle's own key, and `terminal-auth`.
#[derive(Debug, Clone, Default, Deserialize)]
pub(crate) struct ClientMeta {
    #[serde(default, deserialize_with = "lenient")]
    pub spindle: SpindleOptIn,
    /// `"terminal-auth": true`, the convention from before
    /// `auth.terminal` (Zed's first terminal login; the ACP registry's
    /// check still announces only this one).
    #[serde(default, rename = "terminal-auth", deserialize_with = "lenient")]
    pub terminal_auth: bool,
}

impl ClientCapabilities {
    /// Whether the client can run a terminal auth method: `auth.terminal`,
    /// or the older `_meta["terminal-auth"]`.
    pub(crate) fn terminal_auth(&self) -> bool {
        self.auth.terminal || self.meta.terminal_auth
    }
}

/// What a client asked of Spindle beyond plain ACP
/// (`clientCapabilities._meta.spindle`); everything is off unless asked
/// for, so a client that knows nothing of Spindle sees pure ACP.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct SpindleOptIn {
    /// `_spindle/event` notifications.
    #[serde(default, deserialize_with = "lenient")]
    pub events: bool,
    /// `notice` updates: the opt-in from before `session.notices` was
    /// stable, kept as an alias of it.
    #[serde(default, deserialize_with = "lenient")]
    pub notices: bool,
    /// The unstable end-of-turn `usage` on the prompt response.
    #[serde(default, deserialize_with = "lenient")]
    pub prompt_usage: bool,
    /// The diff `deleted` flag (RFD "diff-delete") for removed files.
    #[serde(default, deserialize_with = "lenient")]
    pub diff_deleted: bool,
    /// Permission requests may offer the broad scopes (every edit, this
    /// project, saved) beside the narrow one: a client that shows every
    /// option by its name.
    #[serde(default, deserialize_with = "lenient")]
    pub permission_scopes: bool,
}

/// Which `elicitation/create` modes the client takes: an object (even
/// `{}`) advertises a mode; omitted or `null` does not.
#[derive(Debug, Clone, Default, Deserialize)]
pub(crate) struct ElicitationCapabilities {
    #[serde(default, deserialize_with = "present")]
    pub form: bool,
    #[serde(default, deserialize_with = "present")]
    pub url: bool,
}

fn present<'de, D: serde::Deserializer<'de>>(deserializer: D) -> Result<bool, D::Error> {
    let value = serde_json::Value::deserialize(deserializer)?;
    Ok(value.is_object())
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct AuthCapabilities {
    /// The client can run a terminal auth method (our `spindle setup`).
    #[serde(default, deserialize_with = "lenient")]
    pub terminal: bool,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct FileSystemCapabilities {
    #[serde(default, deserialize_with = "lenient")]
    pub read_text_file: bool,
    #[serde(default, deserialize_with = "lenient")]
    pub write_text_file: bool,
}

/// Falls back to the default when an optional field is malformed, as the
/// schema's `x-deserialize-default-on-error` asks.
fn lenient<'de, D, T>(deserializer: D) -> Result<T, D::Error>
where
    D: serde::Deserializer<'de>,
    T: serde::de::DeserializeOwned + Default,
{
    let value = Value::deserialize(deserializer)?;
    Ok(serde_json::from_value(value).unwrap_or_default())
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Implementation {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    pub version: String,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct InitializeResponse {
    pub protocol_version: u16,
    pub agent_capabilities: Value,
    pub auth_methods: Vec<Value>,
    pub agent_info: Implementation,
}

// ----- sessions -----

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct NewSessionRequest {
    pub cwd: String,
    pub mcp_servers: Vec<Value>,
    #[serde(default, rename = "_meta")]
    pub meta: Option<Value>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct LoadSessionRequest {
    pub session_id: String,
    pub cwd: String,
    /// Required by session/load, optional for session/resume.
    #[serde(default)]
    pub mcp_servers: Option<Vec<Value>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ListSessionsRequest {
    #[serde(default)]
    pub cwd: Option<String>,
    #[serde(default)]
    pub cursor: Option<String>,
}

/// Params of session/set_title: both required, the title a string.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct SetSessionTitleRequest {
    pub session_id: String,
    pub title: String,
}

/// Params of session/close, session/delete and session/status.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct SessionIdRequest {
    pub session_id: String,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct PromptRequest {
    pub session_id: String,
    pub prompt: Vec<Value>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum StopReason {
    EndTurn,
    MaxTokens,
    MaxTurnRequests,
    Refusal,
    Cancelled,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct PromptResponse {
    pub stop_reason: StopReason,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct CancelNotification {
    pub session_id: String,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct CancelRequestNotification {
    pub request_id: Value,
}

// ----- session/update -----

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct SessionNotification<'a, U> {
    session_id: &'a str,
    update: &'a U,
}

fn notification<U: Serialize>(session_id: &str, update: &U) -> String {
    crate::rpc::notification_line(
        method::SESSION_UPDATE,
        &SessionNotification { session_id, update },
    )
}

/// Renders one `session/update` line of an update's JSON
/// (`SessionUpdate::into_value`). Private, like the two below: every line
/// is made by `line` in fit.rs, fitted to the client.
fn update_line(session_id: &str, update: &Value) -> String {
    notification(session_id, update)
}

/// The `session/update` line of an agent message (or thought) chunk, the
/// hot path: written without a JSON tree; `meta` marks a subagent's.
fn chunk_line(
    session_id: &str,
    thought: bool,
    message_id: &str,
    text: &str,
    meta: Option<&Value>,
) -> String {
    if meta.is_some() {
        return notification(
            session_id,
            &update::ChunkRef::new(thought, message_id, text, meta),
        );
    }
    // The hot path of a stream: the bytes serde writes for the same
    // notification (a test holds them together), written straight.
    let kind = update::chunk_kind(thought);
    let mut line =
        String::with_capacity(160 + session_id.len() + message_id.len() + text.len() * 9 / 8);
    line.push_str(r#"{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"#);
    update::push_json_string(&mut line, session_id);
    line.push_str(r#","update":{"content":{"text":"#);
    update::push_json_string(&mut line, text);
    line.push_str(r#","type":"text"},"messageId":"#);
    update::push_json_string(&mut line, message_id);
    line.push_str(r#","sessionUpdate":""#);
    line.push_str(kind);
    line.push_str(r#""}}}"#);
    line
}

/// Renders a stored update as the `session/update` line that replays it.
fn replay_line(session_id: &str, body: &str) -> String {
    format!(
        r#"{{"jsonrpc":"2.0","method":"session/update","params":{{"sessionId":{},"update":{body}}}}}"#,
        serde_json::Value::String(session_id.to_string())
    )
}

//! Session state, owned by the dispatcher alone. Its states are typed
//! (`StartSource`, `InboxHold`, how the last turn ended in `Outcome`,
//! what it is told once in `SaidOnce`); the one-shot flags, the counters
//! and the shared handles are private, reached through methods that say
//! what they mean (`first_sandbox_notice`, `begin_turn`, `jobs`, …).

use crate::acp::StopReason;
use crate::agent::common::permission::{Approvals, Policy};
use crate::agent::common::spend::Spend;
use crate::cancel::CancelToken;
use crate::modes::{Mode, Preset};
use crate::provider::{Message, Usage};
use crate::rpc::RequestId;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::path::PathBuf;
use std::thread::JoinHandle;

pub(crate) struct Session {
    pub id: String,
    cwd: PathBuf,
    /// The MCP servers the client gave (with the agent's own), as given.
    mcp_servers: Vec<Value>,
    /// The conversation as the model sees it.
    pub messages: Vec<Message>,
    /// The conversation's size as the provider last reported it.
    pub known: Option<crate::agent::turn::report::Known>,
    /// The window a server named when it refused a request as too long,
    /// with the model it was learned for: believed for the session.
    learned_window: Option<(String, u64)>,
    pub running: Option<RunningTurn>,
    /// The choices the session keeps across reloads (stored as they are).
    pub settings: Settings,
    pub title: Option<String>,
    /// How many conversation messages the store held when this process
    /// last synchronised; another process may have added more.
    pub stored_messages: i64,
    /// Closed by the client while a turn was still running: dropped once
    /// that turn has answered.
    closed: bool,
    /// Created by this process (`session/new`) and no setting changed
    /// since: if the store shows nothing the user sent either,
    /// `session/close` removes it (`remove_if_unused` in handlers/).
    disposable: bool,
    /// The session's MCP servers, when the client gave any.
    pub mcp: Option<std::sync::Arc<crate::mcp::McpSession>>,
    /// A prompt that arrived while a cancelled turn was still winding down;
    /// it starts as soon as that turn has answered.
    pub queued: Option<(RequestId, Value)>,
    /// What a session is told once (`SaidOnce`).
    said: SaidOnce,
    /// What the session's last checkpoint scan saw of the workspace.
    scan_cache: std::sync::Arc<std::sync::Mutex<crate::checkpoint::ScanCache>>,
    /// Turns counted since the session opened in this process, what
    /// started the last one, when, and how it ended.
    epoch: u64,
    turn_source: TurnSource,
    turn_started_at: Option<String>,
    last_outcome: Option<Outcome>,
    /// The last `_spindle/event` number of the session.
    event_seq: u64,
    /// Shared with the running turn: its progress, and steers for it.
    live: crate::agent::turn::report::SharedLive,
    /// Whether the inbox is held (its items are in the store).
    inbox: InboxHold,
    /// Model calls of the session.
    model_calls: u64,
    /// Of them, those whose usage the provider did not report (this
    /// process's: the counts say "not reported", never a silent 0).
    usage_unreported: u64,
    /// The session's goal (goal mode), and whether it changed since the
    /// last `goal` event.
    pub goal: Option<crate::agent::common::goal::Goal>,
    goal_changed: bool,
    /// A reload waits for the running turn.
    reload_queued: bool,
    /// The session's background jobs.
    jobs: std::sync::Arc<crate::tools::jobs::Jobs>,
    /// The system prompt's environment (date, git state), taken by the
    /// first turn's worker and kept: the prompt stays the same bytes.
    environment: std::sync::Arc<std::sync::OnceLock<String>>,
    /// The `SessionStart` source of the next model turn; taken by the
    /// turn that runs the hooks.
    hook_start: Option<StartSource>,
    /// Line indexes of the workspace files `resource` windows read.
    /// Shared with the threads that index a file off the dispatcher.
    line_indexes: std::sync::Arc<std::sync::Mutex<crate::tools::lines::Indexes>>,
}

/// The choices a session keeps across reloads, stored as JSON. Fields
/// default, so databases written before a field existed still load.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub(crate) struct Settings {
    #[serde(default)]
    pub policy: Policy,
    #[serde(default)]
    pub approvals: Approvals,
    /// The model, as `provider/model`.
    #[serde(default)]
    pub model: String,
    /// `auto` or one of the model's effort levels.
    #[serde(default = "auto")]
    pub effort: String,
    #[serde(default)]
    pub preset: Preset,
    #[serde(default)]
    pub mode: Mode,
    #[serde(default)]
    pub usage: Usage,
    /// What the session's model calls cost so far, as far as it is known
    /// (`cost`, with the calls of known and unknown cost).
    #[serde(flatten)]
    pub spend: Spend,
    /// The name of the agent file's agent that serves it, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<String>,
    /// `additionalDirectories`: more workspace roots (absolute, real).
    #[serde(
        default,
        rename = "additionalDirectories",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub extra_roots: Vec<PathBuf>,
    /// The client's system prompt (`systemPrompt`), kept so that a load,
    /// a resume or a fork without one goes on with it.
    #[serde(
        default,
        rename = "systemPrompt",
        skip_serializing_if = "Option::is_none",
        deserialize_with = "lenient"
    )]
    pub system_prompt: Option<crate::agent::common::client_prompt::ClientPrompt>,
}

/// A stored value that cannot be read is left out, not every setting.
fn lenient<'de, D, T>(deserializer: D) -> Result<Option<T>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: serde::de::DeserializeOwned,
{
    let value = Value::deserialize(deserializer)?;
    Ok(serde_json::from_value(value).ok())
}

fn auto() -> String {
    "auto".into()
}

/// The choices a workspace remembers for its next new session.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub(crate) struct WorkspaceDefaults {
    #[serde(default)]
    pub model: Option<String>,
    #[serde(default)]
    pub effort: Option<String>,
    #[serde(default)]
    pub preset: Option<Preset>,
    #[serde(default)]
    pub policy: Option<Policy>,
}

/// What started a turn (`source` in docs/extensions.md, "Turn events").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TurnSource {
    /// `session/prompt`.
    Prompt,
    /// An inbox follow-up.
    Queue,
    /// A steer that arrived while idle.
    Steer,
    /// A background job that finished while idle.
    Job,
    /// `_spindle/session/invoke`.
    Invoke,
    /// A turn that waited for a provider's limit when its process
    /// stopped, going on in this one.
    Wait,
}

impl TurnSource {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            TurnSource::Prompt => "prompt",
            TurnSource::Queue => "queue",
            TurnSource::Steer => "steer",
            TurnSource::Job => "job",
            TurnSource::Invoke => "invoke",
            TurnSource::Wait => "wait",
        }
    }
}

/// How a turn ended (`outcome` in docs/extensions.md, "Turn events").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Outcome {
    /// Its prompt was answered with this stop reason.
    Stopped(StopReason),
    /// Its prompt was answered with an error.
    Failed,
}

impl Outcome {
    /// The outcome as events and the status name it: the stop reason as
    /// ACP spells it, or `error`.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Outcome::Stopped(StopReason::EndTurn) => "end_turn",
            Outcome::Stopped(StopReason::MaxTokens) => "max_tokens",
            Outcome::Stopped(StopReason::MaxTurnRequests) => "max_turn_requests",
            Outcome::Stopped(StopReason::Refusal) => "refusal",
            Outcome::Stopped(StopReason::Cancelled) => "cancelled",
            Outcome::Failed => "error",
        }
    }

    /// Whether the turn ended as turns normally do (`end_turn`).
    pub(crate) fn is_end_turn(self) -> bool {
        self == Outcome::Stopped(StopReason::EndTurn)
    }
}

/// The `SessionStart` source a session's next model turn fires with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum StartSource {
    /// A new session.
    Startup,
    /// A loaded or resumed one.
    Resume,
    /// After `/clear`.
    Clear,
}

impl StartSource {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            StartSource::Startup => "startup",
            StartSource::Resume => "resume",
            StartSource::Clear => "clear",
        }
    }
}

/// Whether a session's inbox is held: follow-ups start no turn until the
/// user resumes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum InboxHold {
    /// Follow-ups start turns.
    Open,
    /// Held by a cancel (or by the user).
    Paused,
    /// Held because items survived a stop of the process: the user
    /// looks first.
    Recovered,
}

impl InboxHold {
    /// The hold as stored: whether it is paused, and recovered.
    pub(crate) fn flags(self) -> (bool, bool) {
        (self != InboxHold::Open, self == InboxHold::Recovered)
    }
}

/// What a session is told once: each notice, in the first turn it
/// applies to.
#[derive(Default)]
struct SaidOnce {
    /// The sandbox policy has no sandbox here.
    sandbox: bool,
    /// The project's Claude Code permission rules left out.
    claude_rules: bool,
    /// The workspace files already named as refused.
    refused: Vec<PathBuf>,
    /// A policy above `auto` that a flag or the config chose.
    start: Option<crate::acp::fit::Notice>,
}

pub(crate) struct RunningTurn {
    /// The prompt it answers (`None`: the agent's own turn).
    pub request_id: Option<RequestId>,
    pub cancel: CancelToken,
    pub handle: JoinHandle<()>,
}

impl Session {
    pub(crate) fn new(
        id: String,
        cwd: PathBuf,
        mcp_servers: Vec<Value>,
        policy: Policy,
    ) -> Session {
        Session {
            id,
            cwd,
            mcp_servers,
            messages: Vec::new(),
            known: None,
            learned_window: None,
            running: None,
            settings: Settings {
                policy,
                approvals: Approvals::default(),
                model: String::new(),
                effort: auto(),
                preset: Preset::default(),
                mode: Mode::default(),
                usage: Usage::default(),
                spend: Spend::default(),
                agent: None,
                extra_roots: Vec::new(),
                system_prompt: None,
            },
            title: None,
            stored_messages: 0,
            closed: false,
            mcp: None,
            queued: None,
            said: SaidOnce::default(),
            scan_cache: Default::default(),
            epoch: 0,
            turn_source: TurnSource::Prompt,
            turn_started_at: None,
            last_outcome: None,
            event_seq: 0,
            disposable: false,
            live: Default::default(),
            inbox: InboxHold::Open,
            model_calls: 0,
            usage_unreported: 0,
            goal: None,
            goal_changed: false,
            reload_queued: false,
            jobs: Default::default(),
            line_indexes: Default::default(),
            environment: Default::default(),
            hook_start: Some(StartSource::Startup),
        }
    }

    /// The workspace folder the session was opened in.
    pub(crate) fn cwd(&self) -> &std::path::Path {
        &self.cwd
    }

    /// The session's background jobs.
    pub(crate) fn jobs(&self) -> &std::sync::Arc<crate::tools::jobs::Jobs> {
        &self.jobs
    }

    /// What the session shares with its running turn.
    pub(crate) fn live(&self) -> &crate::agent::turn::report::SharedLive {
        &self.live
    }

    /// What the last checkpoint scan saw of the workspace.
    pub(crate) fn scan_cache(
        &self,
    ) -> &std::sync::Arc<std::sync::Mutex<crate::checkpoint::ScanCache>> {
        &self.scan_cache
    }

    /// The system prompt's environment, once the first turn took it.
    pub(crate) fn environment(&self) -> &std::sync::Arc<std::sync::OnceLock<String>> {
        &self.environment
    }

    /// The line indexes `resource` windows read.
    pub(crate) fn line_indexes(
        &self,
    ) -> &std::sync::Arc<std::sync::Mutex<crate::tools::lines::Indexes>> {
        &self.line_indexes
    }

    /// The MCP servers the client gave (with the agent's own).
    pub(crate) fn mcp_servers(&self) -> &[Value] {
        &self.mcp_servers
    }

    /// Takes the servers a load or resume named, replacing the stored ones.
    pub(crate) fn set_mcp_servers(&mut self, servers: Vec<Value>) {
        self.mcp_servers = servers;
    }

    /// Counts a turn begun now from `source`; its epoch.
    pub(crate) fn begin_turn(&mut self, source: TurnSource) -> u64 {
        self.epoch += 1;
        self.turn_source = source;
        self.turn_started_at = Some(crate::clock::now_rfc3339());
        self.epoch
    }

    /// The turns begun since the session opened in this process (the
    /// last one's epoch; 0 before the first).
    pub(crate) fn epoch(&self) -> u64 {
        self.epoch
    }

    /// What started the last turn.
    pub(crate) fn turn_source(&self) -> TurnSource {
        self.turn_source
    }

    /// When the last turn began (RFC 3339).
    pub(crate) fn turn_started_at(&self) -> Option<&str> {
        self.turn_started_at.as_deref()
    }

    /// Counts a finished turn's model calls, and those of them whose
    /// usage the provider did not report.
    pub(crate) fn count_calls(&mut self, calls: u64, unreported: u64) {
        self.model_calls += calls;
        self.usage_unreported += unreported;
    }

    /// The session's model calls in this process, and those of them
    /// whose usage was not reported.
    pub(crate) fn calls(&self) -> (u64, u64) {
        (self.model_calls, self.usage_unreported)
    }

    /// Believes the window a server named for the session's model.
    pub(crate) fn learn_window(&mut self, window: u64) {
        self.learned_window = Some((self.settings.model.clone(), window));
    }

    /// The number of the session's next `_spindle/event`: numbered
    /// without gaps from 1.
    pub(crate) fn next_event_seq(&mut self) -> u64 {
        self.event_seq += 1;
        self.event_seq
    }

    /// Takes stored settings back (on load and resume): a stored model or
    /// agent that is missing leaves the one chosen at open.
    pub(crate) fn restore(&mut self, mut settings: Settings) {
        if settings.model.is_empty() {
            settings.model = std::mem::take(&mut self.settings.model);
        }
        if settings.agent.is_none() {
            settings.agent = self.settings.agent.take();
        }
        self.settings = settings;
    }

    /// Whether the client closed the session while its turn still ran.
    pub(crate) fn is_closed(&self) -> bool {
        self.closed
    }

    pub(crate) fn set_closed(&mut self, closed: bool) {
        self.closed = closed;
    }

    /// Whether `session/close` may remove it when nothing was sent.
    pub(crate) fn is_disposable(&self) -> bool {
        self.disposable
    }

    pub(crate) fn set_disposable(&mut self, disposable: bool) {
        self.disposable = disposable;
    }

    /// How the last turn ended (`None` before the first).
    pub(crate) fn last_outcome(&self) -> Option<Outcome> {
        self.last_outcome
    }

    pub(crate) fn set_last_outcome(&mut self, outcome: Outcome) {
        self.last_outcome = Some(outcome);
    }

    /// Notes that the goal changed since the last `goal` event.
    pub(crate) fn mark_goal_changed(&mut self) {
        self.goal_changed = true;
    }

    /// Whether the goal changed since the last `goal` event.
    pub(crate) fn goal_pending(&self) -> bool {
        self.goal_changed
    }

    /// Whether the goal changed, forgetting it: the event is sent.
    pub(crate) fn take_goal_change(&mut self) -> bool {
        std::mem::take(&mut self.goal_changed)
    }

    /// A reload waits for the running turn.
    pub(crate) fn queue_reload(&mut self) {
        self.reload_queued = true;
    }

    /// Whether a reload waited, forgetting it.
    pub(crate) fn take_reload(&mut self) -> bool {
        std::mem::take(&mut self.reload_queued)
    }

    /// True the first time it is asked: the session is to be told that
    /// its sandbox policy has no sandbox here.
    pub(crate) fn first_sandbox_notice(&mut self) -> bool {
        !std::mem::replace(&mut self.said.sandbox, true)
    }

    /// True the first time it is asked: the session is to be told of the
    /// project's Claude Code rules left out.
    pub(crate) fn first_claude_rules_notice(&mut self) -> bool {
        !std::mem::replace(&mut self.said.claude_rules, true)
    }

    /// Whether the refused workspace file `path` was named already.
    pub(crate) fn refused_named(&self, path: &std::path::Path) -> bool {
        self.said.refused.iter().any(|named| named == path)
    }

    /// Notes refused workspace files as named.
    pub(crate) fn name_refused(&mut self, paths: impl IntoIterator<Item = PathBuf>) {
        self.said.refused.extend(paths);
    }

    /// Sets the notice of the policy chosen at start, said in the first
    /// turn.
    pub(crate) fn set_start_notice(&mut self, notice: Option<crate::acp::fit::Notice>) {
        self.said.start = notice;
    }

    /// Takes the notice of the policy chosen at start, if not said yet.
    pub(crate) fn take_start_notice(&mut self) -> Option<crate::acp::fit::Notice> {
        self.said.start.take()
    }

    /// The `SessionStart` source the next model turn fires with, if any.
    pub(crate) fn hook_start(&self) -> Option<StartSource> {
        self.hook_start
    }

    pub(crate) fn set_hook_start(&mut self, source: StartSource) {
        self.hook_start = Some(source);
    }

    /// Takes the `SessionStart` source, for the turn that runs the hooks.
    pub(crate) fn take_hook_start(&mut self) -> Option<StartSource> {
        self.hook_start.take()
    }

    pub(crate) fn inbox(&self) -> InboxHold {
        self.inbox
    }

    /// Whether the inbox is held (paused or recovered).
    pub(crate) fn inbox_held(&self) -> bool {
        self.inbox != InboxHold::Open
    }

    pub(crate) fn set_inbox(&mut self, hold: InboxHold) {
        self.inbox = hold;
    }

    pub(crate) fn workspace_defaults(&self) -> WorkspaceDefaults {
        WorkspaceDefaults {
            model: Some(self.settings.model.clone()),
            effort: Some(self.settings.effort.clone()),
            preset: Some(self.settings.preset),
            policy: Some(self.settings.policy),
        }
    }

    pub(crate) fn settings_json(&self) -> Value {
        serde_json::to_value(&self.settings).unwrap_or_default()
    }

    pub(crate) fn add_usage(&mut self, usage: &Usage) {
        self.settings.usage = sum(&self.settings.usage, usage);
    }

    /// The window of the session's model: its configured or listed one,
    /// or the smaller one a server named when it refused a request.
    pub(crate) fn window_of(&self, entry: &crate::agent::common::models::ModelEntry) -> u64 {
        match &self.learned_window {
            Some((model, window)) if *model == entry.id => (*window).min(entry.context_window()),
            _ => entry.context_window(),
        }
    }

    /// The session's tokens and cost so far: its finished turns, and the
    /// running turn's model calls as it published them.
    pub(crate) fn usage_so_far(&self) -> (Usage, Spend) {
        match (&self.running, self.live.lock()) {
            (Some(_), Ok(live)) => {
                let mut spend = self.settings.spend;
                spend.add(&live.spend);
                (sum(&self.settings.usage, &live.usage), spend)
            }
            _ => (self.settings.usage, self.settings.spend),
        }
    }
}

fn sum(a: &Usage, b: &Usage) -> Usage {
    let mut total = *a;
    total.add(b);
    total
}

/// Checks a client-chosen session id: short and safe to show, log and use
/// in file names later.
pub(crate) fn valid_client_session_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= 64
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
        && !id.starts_with('.')
}

/// A short one-line title from the first prompt.
pub(crate) fn title_from(prompt: &str) -> String {
    let line = prompt
        .lines()
        .map(str::trim)
        .find(|line| !line.is_empty())
        .unwrap_or("");
    let words: Vec<&str> = line.split_whitespace().collect();
    let line = words.join(" ");
    const LIMIT: usize = 60;
    if line.chars().count() <= LIMIT {
        return line;
    }
    let cut: String = line.chars().take(LIMIT).collect();
    // End at a word boundary when one is near.
    let cut = match cut.rfind(' ') {
        Some(space) if space > LIMIT / 2 => cut[..space].to_string(),
        _ => cut,
    };
    format!("{cut}…")
}

/// MCP server definitions as stored: names, commands, URLs and the names
/// of variables and headers, never their values (they hold secrets).
pub(crate) fn redact_mcp_servers(servers: &[Value]) -> Value {
    let redacted: Vec<Value> = servers
        .iter()
        .map(|server| {
            let mut server = server.clone();
            for field in ["env", "headers"] {
                if let Some(entries) = server.get_mut(field) {
                    redact_entries(entries);
                }
            }
            server
        })
        .collect();
    Value::Array(redacted)
}

fn redact_entries(entries: &mut Value) {
    match entries {
        Value::Array(items) => {
            for item in items {
                if let Some(value) = item.get_mut("value") {
                    *value = Value::String(String::new());
                }
            }
        }
        Value::Object(map) => {
            for value in map.values_mut() {
                *value = Value::String(String::new());
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::valid_client_session_id;

    #[test]
    fn titles_are_one_short_line() {
        assert_eq!(
            super::title_from("\n  Fix   the parser\nmore"),
            "Fix the parser"
        );
        let long = "word ".repeat(30);
        let title = super::title_from(&long);
        assert!(
            title.ends_with('…') && title.chars().count() <= 61,
            "{title}"
        );
    }

    #[test]
    fn secrets_are_not_stored() {
        let servers = vec![
            serde_json::json!({"name": "a", "command": "/x", "args": [], "env": [{"name": "KEY", "value": "secret"}]}),
        ];
        let stored = super::redact_mcp_servers(&servers).to_string();
        assert!(
            !stored.contains("secret") && stored.contains("KEY"),
            "{stored}"
        );
    }

    #[test]
    fn client_session_ids() {
        assert!(valid_client_session_id("demo"));
        assert!(valid_client_session_id("a-b_c.1"));
        for bad in ["", "../x", "a b", ".hidden", &"x".repeat(65), "é"] {
            assert!(!valid_client_session_id(bad), "{bad}");
        }
    }

    #[test]
    fn an_outcome_is_named_as_acp_names_its_stop_reason() {
        use super::{Outcome, StopReason};
        for reason in [
            StopReason::EndTurn,
            StopReason::MaxTokens,
            StopReason::MaxTurnRequests,
            StopReason::Refusal,
            StopReason::Cancelled,
        ] {
            let wire = serde_json::to_value(reason).unwrap();
            assert_eq!(Outcome::Stopped(reason).as_str(), wire, "{reason:?}");
            assert_eq!(Outcome::Stopped(reason).is_end_turn(), wire == "end_turn");
        }
        assert_eq!(Outcome::Failed.as_str(), "error");
        assert!(!Outcome::Failed.is_end_turn());
    }
}

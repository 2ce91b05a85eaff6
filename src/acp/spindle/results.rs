//! The results of the vendor methods whose shape is fixed, one type per
//! answer (camelCase on the wire). The free-form parts (an inbox item, a
//! catalog row, a job's update, a plan, a goal, an MCP server's state)
//! stay JSON values inside them.

use serde::Serialize;
use serde_json::Value;

/// A result as the JSON it is sent as.
pub(crate) fn to_json(result: impl Serialize) -> Value {
    serde_json::to_value(result).unwrap_or_default()
}

/// `_spindle/session/status`: one snapshot of a session.
#[derive(Serialize)]
pub(crate) struct StatusResult<'a> {
    pub session: StatusSession<'a>,
    pub turn: StatusTurn<'a>,
    pub model: &'a str,
    pub mode: &'a str,
    pub preset: &'a str,
    pub approval: &'a str,
    pub usage: StatusUsage<'a>,
    pub plan: StatusPlan,
    pub inbox: StatusInbox,
    pub goal: Option<Value>,
    pub jobs: StatusJobs,
    pub mcp: Vec<Value>,
    pub health: StatusHealth<'a>,
}

/// The session of a status snapshot.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct StatusSession<'a> {
    pub id: &'a str,
    pub cwd: &'a std::path::Path,
    pub title: Option<&'a str>,
    pub created_at: Option<&'a str>,
    pub updated_at: Option<&'a str>,
}

/// The running or last turn of a status snapshot.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct StatusTurn<'a> {
    /// `running` or `idle`.
    pub state: &'static str,
    pub epoch: u64,
    /// What started the turn; `null` before the first.
    pub source: Option<&'a str>,
    pub started_at: Option<&'a str>,
    /// The last turn's outcome.
    pub outcome: Option<&'a str>,
}

/// The usage of a status snapshot: the session's totals so far.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct StatusUsage<'a> {
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub cached_read_tokens: u64,
    pub reasoning_tokens: u64,
    pub context_used: Option<u64>,
    pub context_size: Option<u64>,
    /// `null` when the model has no price.
    pub cost: Option<Cost<'a>>,
    pub cost_quote: CostQuote<'a>,
}

/// `usage.costQuote` (docs/extensions.md, "`_spindle/session/status`"): the totals priced by the
/// model's table; incomplete, never a silent 0, when a call had no price.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct CostQuote<'a> {
    /// `null` when the model has no price.
    pub currency: Option<&'a str>,
    pub original_totals: Option<CostTotals>,
    /// `official_table`.
    pub valuation: &'static str,
    pub cost_complete: bool,
    pub display_complete: bool,
    /// `exact`, `estimate` or `unknown`.
    pub display_status: &'static str,
    /// `per_token`, or `free` (a local model without a price).
    pub billing_mode: &'static str,
}

/// The parts of a cost quote.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct CostTotals {
    pub input: f64,
    pub cached_input: f64,
    pub output: f64,
    pub reasoning: f64,
    pub total: f64,
}

/// An amount of money.
#[derive(Serialize)]
pub(crate) struct Cost<'a> {
    pub amount: f64,
    pub currency: &'a str,
}

/// The plan of a status snapshot.
#[derive(Serialize)]
pub(crate) struct StatusPlan {
    pub entries: Value,
}

/// The inbox of a status snapshot.
#[derive(Serialize)]
pub(crate) struct StatusInbox {
    pub pending: usize,
    pub uncertain: usize,
    pub paused: bool,
    pub recovered: bool,
}

/// The jobs of a status snapshot.
#[derive(Serialize)]
pub(crate) struct StatusJobs {
    pub running: u64,
    pub total: u64,
}

/// The health of a status snapshot: the provider's, with its last error.
#[derive(Serialize)]
pub(crate) struct StatusHealth<'a> {
    pub provider: &'a str,
    pub error: Option<String>,
    /// While `waiting`: when the provider's limit resets (RFC 3339).
    pub until: Option<String>,
}

/// `_spindle/session/steer`: the item and what became of it
/// (`steer_accepted` or `queued_followup`).
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct SteerResult {
    pub item_id: String,
    pub disposition: &'static str,
}

/// `_session/steering`: `injected`, `startedNewTurn`, or
/// `promptRequired` (with the reason).
#[derive(Serialize)]
pub(crate) struct SteeringResult {
    pub outcome: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<&'static str>,
}

/// `_spindle/session/inbox/enqueue`.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct EnqueueResult<'a> {
    pub item_id: &'a str,
    /// `started`, `queued`, or the state of the item an idempotency key
    /// found.
    pub disposition: &'a str,
    /// Its place among the pending items; `null` when it is not pending.
    pub position: Option<usize>,
    pub paused: bool,
    pub idempotent: bool,
}

/// `_spindle/session/inbox/list`.
#[derive(Serialize)]
pub(crate) struct InboxListResult {
    pub items: Vec<Value>,
    pub capacity: usize,
    pub paused: bool,
    pub recovered: bool,
}

/// `_spindle/session/inbox/get`, `update` and `refresh`: the item whole.
#[derive(Serialize)]
pub(crate) struct InboxItemResult {
    pub item: Value,
}

/// `_spindle/session/inbox/delete` and `retry`: the item's new state.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ItemStateResult<'a> {
    pub item_id: &'a str,
    pub state: &'static str,
}

/// `_spindle/session/inbox/move`.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct InboxMoveResult<'a> {
    pub item_id: &'a str,
    pub position: usize,
}

/// `_spindle/session/inbox/setPaused`.
#[derive(Serialize)]
pub(crate) struct InboxPausedResult {
    pub paused: bool,
}

/// `_spindle/session/goal/pause`.
#[derive(Serialize)]
pub(crate) struct GoalPauseResult {
    pub goal: Option<Value>,
    /// Whether a running turn stops at its next boundary.
    pub pausing: bool,
}

/// `_spindle/session/goal/resume`.
#[derive(Serialize)]
pub(crate) struct GoalResumeResult {
    pub goal: Value,
}

/// `_spindle/settings`, `_spindle/models` and `_spindle/operations`: the
/// catalog's rows.
#[derive(Serialize)]
pub(crate) struct CatalogResult {
    pub items: Vec<Value>,
}

/// `_spindle/invoke`: the operation's text, `immediate` or `scheduled`
/// (it runs as a turn).
#[derive(Serialize)]
pub(crate) struct InvokeResult {
    pub text: String,
    pub delivery: &'static str,
}

/// `_spindle/session/reload`: `{"reloaded": true}`, or `{"queued": true}`
/// while a turn runs.
#[derive(Serialize)]
pub(crate) struct ReloadResult {
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub queued: bool,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub reloaded: bool,
}

/// A job as `_spindle/job`, `job/send`, `job/cancel`, the pages of
/// `_spindle/jobs` and the `job` events show it.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct JobResult<'a> {
    pub job_id: &'a str,
    /// `command` or `agent`.
    pub kind: &'a str,
    /// The command's first 80 characters.
    pub title: String,
    pub command: &'a str,
    pub cwd: &'a std::path::Path,
    pub state: &'a str,
    pub exit_code: Option<i32>,
    pub started_at: &'a str,
    pub ended_at: Option<&'a str>,
    pub output_bytes: u64,
    /// The editor's terminal the job runs in, when it does.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub terminal_id: Option<&'a str>,
}

/// `_spindle/jobs`: a page of jobs.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct JobsResult {
    pub items: Vec<Value>,
    pub next_cursor: Option<String>,
}

/// `_spindle/job/transcript` of a command job: bytes of its log.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct TextTranscriptResult {
    pub text: String,
    pub offset: u64,
    /// `null` once the log is complete.
    pub next_offset: Option<u64>,
    pub total: u64,
    pub complete: bool,
}

/// `_spindle/job/transcript` of an agent job: its updates.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct UpdatesTranscriptResult {
    pub updates: Vec<Value>,
    pub offset: u64,
    /// `null` once the log is complete.
    pub next_offset: Option<u64>,
    pub total: u64,
    pub complete: bool,
}

/// `_spindle/resource` of a job's log.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct LogWindowResult {
    pub text: String,
    pub byte_offset: u64,
    pub byte_count: u64,
    pub total_bytes: u64,
}

/// `_spindle/resource` of a workspace file.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct FileWindowResult<'a> {
    pub text: String,
    pub start_line: u64,
    pub line_count: usize,
    pub total_lines: u64,
    pub revision: &'a str,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn results_are_camel_case_with_nulls_kept() {
        let value = to_json(TextTranscriptResult {
            text: "x".into(),
            offset: 0,
            next_offset: None,
            total: 1,
            complete: true,
        });
        assert_eq!(
            value,
            json!({"text": "x", "offset": 0, "nextOffset": null, "total": 1, "complete": true})
        );
        let value = to_json(SteeringResult {
            outcome: "injected",
            reason: None,
        });
        assert_eq!(value, json!({"outcome": "injected"}));
        let queued = ReloadResult {
            queued: true,
            reloaded: false,
        };
        assert_eq!(to_json(queued), json!({"queued": true}));
    }
}

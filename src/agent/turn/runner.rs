//! The runner of a turn's tool calls: what it works with, how a call
//! ends, and its final report. One call from start to end is in
//! `tool_call.rs`; its permission in `permission.rs`; its execution in
//! `execute.rs`, `edits.rs`, `jobs.rs`, `shell.rs` and `questions.rs`.
//!
//! Every tool call that is shown also ends with `completed` or `failed`,
//! whatever happens (rejection, error, cancel).

use super::client::Client;
use super::processes::Processes;
use super::updates::Updates;
use crate::acp::{SessionUpdate, ToolCallStatus};
use crate::agent::common::permission::{Approvals, Policy};
use crate::cancel::CancelToken;
use crate::policy::rules::RuleSet;
use crate::provider::ToolCallRequest;
use crate::tools::{self, paths};
use crate::util::fence;
use serde_json::{json, Value};
use std::cell::RefCell;
use std::path::Path;

/// What a tool call gave the model, and whether the turn must stop.
pub(super) struct CallResult {
    pub text: String,
    /// The call ended `completed` (it did what was asked): only then do
    /// the `PostToolUse` hooks run.
    pub succeeded: bool,
    pub cancelled: bool,
    /// The user declined the call and the turn stops here: what was
    /// declined, in a few words.
    pub declined: Option<String>,
    /// Declined because nobody could be asked (not by the user).
    pub unasked: bool,
    /// The user left plan mode (`exit_plan`) for normal mode with this
    /// approval policy.
    pub switched: Option<Policy>,
    /// A question the editor could not put to the user itself: the turn
    /// ends with it as the agent's message, and the next prompt answers.
    pub question: Option<String>,
}

pub(super) struct Runner<'a> {
    pub session_id: &'a str,
    pub root: &'a Path,
    pub client: &'a Client,
    pub updates: &'a RefCell<Updates>,
    pub cancel: &'a CancelToken,
    /// The session's MCP servers.
    pub mcp: Option<&'a crate::mcp::McpSession>,
    /// Plan mode: tools that change things are refused.
    pub read_only: bool,
    pub policy: Policy,
    pub approvals: &'a mut Approvals,
    /// How commands start: credentials removed, logs, the sandbox.
    pub processes: &'a Processes,
    /// Whether a rejection ends the turn.
    pub on_reject: crate::config::OnReject,
    /// The turn's checkpoint: what file tools and commands change is kept.
    pub checkpoints: Option<&'a RefCell<crate::checkpoint::Checkpoints>>,
    /// Lasting permission rules: the user's and the project's.
    pub rules: &'a RuleSet,
    /// Where "always, in this project" answers are saved: the user's
    /// config file.
    pub config_path: Option<&'a Path>,
    /// What `fetch_url` trusts over HTTPS: the config's.
    pub trust: &'a crate::net::Trust,
    /// Where the plan is published for status.
    pub live: &'a super::report::SharedLive,
    /// The model's goal reports of this step, for the turn to apply.
    pub goal_updates: RefCell<Vec<tools::GoalUpdateArgs>>,
    /// The session's background jobs, and this turn's epoch (a cancel
    /// kills the jobs of its turn).
    pub jobs: &'a std::sync::Arc<crate::tools::jobs::Jobs>,
    /// The agent file's agent, whose tool allow-list holds, and a
    /// subagent's spec, whose allow-list narrows it.
    pub agent: Option<&'a crate::agentfile::AgentSpec>,
    pub subagent: Option<&'a crate::agentfile::AgentSpec>,
    /// `additionalDirectories`: paths inside them count as the workspace.
    pub extra_roots: &'a [std::path::PathBuf],
    pub epoch: u64,
    /// The skills the `skill` tool loads.
    pub skills: &'a [crate::agent::common::skills::Skill],
    /// The hooks in force, and whether a `PreToolUse` hook asked that the
    /// current call be put to the user.
    pub hooks: &'a crate::agent::common::hooks::Hooks,
    pub hook_ask: bool,
    /// Whether the current call's name or arguments were repaired: its
    /// title says so to the editor and to a person asked.
    pub repaired: bool,
    /// What the editor said each file holds, as far as the call now
    /// running read or wrote it: one question per file for its
    /// checkpoint, its change and its checkpoint after (emptied when the
    /// user has answered, since they may have typed while asked).
    pub editor_texts: RefCell<std::collections::HashMap<std::path::PathBuf, String>>,
}

/// How one call ended, before it is reported.
pub(in crate::agent) enum Ending {
    Completed { text: String, content: Vec<Value> },
    Failed { text: String, content: Vec<Value> },
    Cancelled,
}

pub(in crate::agent) fn text_content(text: &str) -> Value {
    json!({"type": "content", "content": {"type": "text", "text": text}})
}

pub(in crate::agent) fn failed(text: impl Into<String>) -> Ending {
    let text = text.into();
    Ending::Failed {
        content: vec![text_content(&text)],
        text,
    }
}

impl Runner<'_> {
    pub(in crate::agent) fn update(&self, update: SessionUpdate) {
        self.updates.borrow_mut().send(update);
    }

    pub(super) fn finish(&self, call: &ToolCallRequest, ending: Ending) -> CallResult {
        let (status, content, text, cancelled) = match ending {
            Ending::Completed { text, content } => {
                (ToolCallStatus::Completed, content, text, false)
            }
            Ending::Failed { text, content } => (ToolCallStatus::Failed, content, text, false),
            Ending::Cancelled => {
                let text = "Cancelled by the user.".to_string();
                (
                    ToolCallStatus::Failed,
                    vec![text_content(&text)],
                    text,
                    true,
                )
            }
        };
        self.update(SessionUpdate::tool_call_ended(&call.id, status, content));
        CallResult {
            text,
            succeeded: status == ToolCallStatus::Completed,
            cancelled,
            declined: None,
            unasked: false,
            switched: None,
            question: None,
        }
    }

    /// A path outside the workspace that lies inside one of the session's
    /// additional roots (after symlinks) counts as inside.
    pub(super) fn widen(&self, mut target: paths::Resolved) -> paths::Resolved {
        if target.inside {
            return target;
        }
        let shown = target.path.display().to_string();
        for root in self.extra_roots {
            let there = paths::resolve(root, &shown);
            if there.inside {
                target.inside = true;
                target.protection = there.protection;
                break;
            }
        }
        target
    }
}

pub(super) fn completed_text(text: String) -> Ending {
    Ending::Completed {
        content: vec![text_content(&fence(&text))],
        text,
    }
}

//! The `task` tool: a subagent with a fresh conversation runs inside the
//! parent's turn, on the same worker thread, with the same cancel, model
//! and checkpoint, its own step budget, and tools no more than the
//! parent's (read-only in plan mode, and no `task` of its own). Its updates
//! go out as ordinary `session/update`s marked with
//! `_meta.spindle.parentToolCallId` (stored with the turn, so a load
//! replays them), its permission requests carry the same mark, the
//! parent's tool call shows its progress, and its final answer is the
//! tool's result.

use super::report::Live;
use super::runner::{text_content, CallResult};
use super::updates::UpdateSink;
use super::{steps, State, StopReason, Turn, TurnKind};
use crate::agent::common::permission::Approvals;
use crate::provider::{Message, ToolCallRequest, Usage};
use serde_json::json;
use std::cell::RefCell;
use std::sync::Arc;

/// What the subagent is told, besides the parent's system prompt.
const NOTE: &str = "You are a subagent: another agent handed you the task in the next message. Work on it alone with your tools (you cannot ask it or the user anything), then answer with what you found or did, complete and self-contained: that answer is all the other agent receives.";

/// Model calls a subagent may make when nothing else says.
const DEFAULT_STEPS: usize = 25;

/// What a task costs the parent's turn.
#[derive(Default)]
pub(super) struct Spent {
    pub usage: Usage,
    pub cost: f64,
    pub model_calls: usize,
    pub usage_reports: usize,
}

fn result(text: String, cancelled: bool) -> CallResult {
    CallResult {
        text,
        cancelled,
        declined: None,
        switched: None,
        question: None,
    }
}

/// Runs one `task` call to its end.
pub(super) fn run_task(
    turn: &Turn,
    sink: &UpdateSink,
    approvals: &mut Approvals,
    checkpoints: Option<&RefCell<crate::checkpoint::Checkpoints>>,
    call: &ToolCallRequest,
) -> (CallResult, Spent) {
    let updates = sink.updates;
    let raw_input = serde_json::from_str::<serde_json::Value>(&call.arguments)
        .unwrap_or_else(|_| serde_json::Value::String(call.arguments.clone()));
    let parsed = crate::tools::parse(&call.name, &call.arguments);
    let title = match &parsed {
        Ok(tool) => crate::tools::title(tool, &turn.root),
        Err(_) => "task (invalid call)".to_string(),
    };
    updates.borrow_mut().send(json!({
        "sessionUpdate": "tool_call",
        "toolCallId": call.id,
        "title": title,
        "kind": "think",
        "status": "in_progress",
        "rawInput": raw_input,
    }));
    let fail = |text: String| {
        updates.borrow_mut().send(json!({
            "sessionUpdate": "tool_call_update",
            "toolCallId": call.id,
            "status": "failed",
            "content": [text_content(&text)],
        }));
        (result(text, false), Spent::default())
    };
    let args = match parsed {
        Ok(crate::tools::Tool::Task(args)) => args,
        Ok(_) => return fail("Error: not a task".into()),
        Err(error) => return fail(format!("Error: {error}")),
    };
    if turn.client.parent.is_some() {
        return fail(
            "Error: a subagent cannot hand out tasks of its own; do the work yourself".into(),
        );
    }
    let subagent = match &args.agent {
        None => None,
        Some(name) => {
            let known = turn.agent.as_ref().map(|a| &a.subagents);
            match known.and_then(|subagents| subagents.get(name)) {
                Some(spec) => Some(Arc::new(spec.clone())),
                None => {
                    let names: Vec<&String> = known.map(|s| s.keys().collect()).unwrap_or_default();
                    return fail(if names.is_empty() {
                        format!("Error: there is no subagent {name:?}; leave `agent` out")
                    } else {
                        format!(
                            "Error: there is no subagent {name:?}; the subagents are {}",
                            names
                                .iter()
                                .map(|n| n.as_str())
                                .collect::<Vec<_>>()
                                .join(", ")
                        )
                    });
                }
            }
        }
    };

    let mut child = turn.clone();
    let mut system = format!("{}\n\n{NOTE}", turn.system);
    if let Some(instructions) = subagent.as_ref().and_then(|s| s.instructions.as_deref()) {
        system.push_str("\n\n");
        system.push_str(instructions.trim());
    }
    child.system = system;
    child.messages = vec![Message::user(args.prompt.clone())];
    child.max_steps = subagent
        .as_ref()
        .and_then(|s| s.max_steps)
        .unwrap_or(turn.max_steps.min(DEFAULT_STEPS));
    child.subagent = subagent;
    child.goal = None;
    child.goal_mode = false;
    child.kind = TurnKind::Model;
    child.request_id = None;
    child.inbox_item = None;
    child.title_update = None;
    child.notice = None;
    child.known = None;
    child.prompt_blocks = Vec::new();
    child.approvals = approvals.clone();
    child.client.parent = Some(call.id.clone());
    // Steers are the parent's: the subagent's boundaries do not take them.
    child.live = Arc::new(std::sync::Mutex::new(Live::default()));

    let mut state = State::new(&child);
    let mut messages = child.messages.clone();
    let mut child_sink = UpdateSink::new(turn.cancel.clone(), updates);
    updates.borrow_mut().nest(Some(&call.id));
    let ended = steps(
        &child,
        &mut child_sink,
        &mut state,
        &mut None,
        &mut messages,
        checkpoints,
    );
    updates.borrow_mut().nest(None);
    *approvals = state.approvals.clone();
    let spent = Spent {
        usage: state.usage,
        cost: state.cost,
        model_calls: state.model_calls,
        usage_reports: state.usage_reports,
    };
    let answer = messages
        .iter()
        .rev()
        .find(|m| m.role == crate::provider::Role::Assistant && !m.text.trim().is_empty())
        .map(|m| m.text.trim().to_string())
        .unwrap_or_default();
    let (status, text, cancelled) = match ended {
        Ok(StopReason::Cancelled) => ("failed", "Cancelled by the user.".to_string(), true),
        Ok(stop) => {
            let note = match stop {
                StopReason::MaxTurnRequests => {
                    "\n\n(The subagent ran out of steps before it finished.)"
                }
                StopReason::MaxTokens => "\n\n(The subagent ran out of tokens before it finished.)",
                StopReason::Refusal => "\n\n(The model refused to go on.)",
                _ => "",
            };
            let answer = if answer.is_empty() {
                "(The subagent gave no answer.)".to_string()
            } else {
                answer
            };
            ("completed", format!("{answer}{note}"), false)
        }
        Err(error) => (
            "failed",
            format!("Error: the subagent failed: {}", error.message),
            false,
        ),
    };
    updates.borrow_mut().send(json!({
        "sessionUpdate": "tool_call_update",
        "toolCallId": call.id,
        "status": status,
        "content": [text_content(&text)],
    }));
    (result(text, cancelled), spent)
}

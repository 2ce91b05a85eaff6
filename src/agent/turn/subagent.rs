//! The `task` tool: a subagent with a fresh conversation runs inside the
//! parent's turn, on the same worker thread, with the same cancel, model
//! and checkpoint, its own step budget, and tools no more than the
//! parent's (read-only in plan mode, and no `task` of its own). Its updates
//! go out as ordinary `session/update`s marked with
//! `_meta.spindle.parentToolCallId` (stored with the turn, so a load
//! replays them), its permission requests carry the same mark, the
//! parent's tool call shows its progress, and its final answer is the
//! tool's result.
//!
//! A client that takes subagents (`clientCapabilities.subagents`) gets
//! the subagent as a child session of its own (`<session>/task-<hex>`):
//! a `subagent_update` on the parent announces it before anything of it
//! is sent and reports its state (running, waiting for a permission,
//! idle with why it stopped); its updates and permission requests name
//! the child; a `session/cancel` of the child stops its work only, and
//! the parent's turn goes on. The updates are stored once, with the
//! child's key, and fitted to each client as they are written, live or
//! replayed (`acp::fit::route`).

use super::report::Live;
use super::runner::{text_content, CallResult};
use super::spec::{Turn, TurnKind};
use super::state::{State, Step};
use super::updates::{UpdateSink, Updates};
use crate::acp::StopReason;
use crate::acp::{SessionUpdate, ToolCallStatus, ToolKind};
use crate::agent::common::permission::Approvals;
use crate::agent::common::spend::Spend;
use crate::cancel::CancelToken;
use crate::provider::{Message, ToolCallRequest, Usage};
use serde_json::json;
use std::cell::RefCell;
use std::sync::Arc;

/// What the subagent is told, besides the parent's system prompt.
const NOTE: &str = "You are a subagent: another agent handed you the task in the next message. Work on it alone with your tools (you cannot ask it or the user anything), then answer with what you found or did, complete and self-contained: that answer is all the other agent receives.";

/// Model calls a subagent may make when nothing else says.
const DEFAULT_STEPS: usize = 25;

/// The model/tool loop a subagent's turn runs: the parent's own, handed
/// down by the loop so that this file does not name it.
pub(super) type Drive = fn(&mut Step) -> Result<StopReason, crate::rpc::RpcError>;

/// The parent's turn as a `task` call sees it: its loop, its updates,
/// its checkpoints, and what it spent before the call (an agent file's
/// per-turn limits count it).
pub(super) struct Parent<'a, 'u> {
    pub(super) drive: Drive,
    pub(super) turn: &'a Turn,
    pub(super) sink: &'a UpdateSink<'u>,
    pub(super) checkpoints: Option<&'a RefCell<crate::checkpoint::Checkpoints>>,
    pub(super) spent_before: (&'a Usage, Spend),
}

/// What a task costs the parent's turn.
#[derive(Default)]
pub(super) struct Spent {
    pub usage: Usage,
    pub spend: Spend,
    pub model_calls: usize,
    pub usage_reports: usize,
}

fn result(text: String, status: ToolCallStatus, cancelled: bool) -> CallResult {
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

/// Runs one `task` call to its end; `announced` when the call was shown
/// already (pending, for a question a hook asked for).
pub(super) fn run_task(
    parent: &Parent,
    approvals: &mut Approvals,
    call: &ToolCallRequest,
    announced: bool,
) -> (CallResult, Spent) {
    let Parent {
        drive,
        turn,
        sink,
        checkpoints,
        spent_before,
    } = *parent;
    let updates = sink.updates;
    let parsed = crate::tools::parse(&call.name, &call.arguments);
    if announced {
        updates
            .borrow_mut()
            .send(SessionUpdate::ToolCallUpdate(crate::acp::ToolCallUpdate {
                tool_call_id: call.id.clone(),
                status: Some(ToolCallStatus::InProgress),
                content: None,
            }));
    } else {
        announce(turn, updates, call, &parsed);
    }
    let end = |status: ToolCallStatus, text: &str| {
        updates.borrow_mut().send(SessionUpdate::tool_call_ended(
            &call.id,
            status,
            vec![text_content(text)],
        ));
    };
    let (args, subagent) = match checked_task(turn, parsed) {
        Ok(task) => task,
        Err(text) => {
            end(ToolCallStatus::Failed, &text);
            return (
                result(text, ToolCallStatus::Failed, false),
                Spent::default(),
            );
        }
    };
    if args.background {
        let (text, ok) = match start_job(drive, turn, &args, subagent, call) {
            Ok(text) => (text, true),
            Err(error) => (format!("Error: {error}"), false),
        };
        end(ended_status(ok), &text);
        return (result(text, ended_status(ok), false), Spent::default());
    }
    let mut child = child_turn(turn, &args, subagent, call);
    child.rights.approvals = approvals.clone();
    // Its own cancel, which the parent's cancel raises too.
    let key = crate::acp::fit::new_child_key();
    let stop = CancelToken::new();
    let raised = stop.clone();
    turn.io.cancel.on_cancel(move || raised.cancel());
    child.io.cancel = stop.clone();
    child.io.client = child.io.client.with_cancel(stop.clone());
    child.io.client.child = Some(key.clone());
    crate::cancel::lock(&turn.io.live)
        .children
        .0
        .push((key.clone(), stop.clone()));
    let mut state = State::new(&child);
    // The agent file's per-turn limits count the parent's spending too.
    state.usage = *spent_before.0;
    state.spend = spent_before.1;
    let mut messages = child.conversation.messages.clone();
    let mut child_sink = UpdateSink::new(stop.clone(), updates);
    updates.borrow_mut().nest_child(&call.id, &key);
    updates.borrow_mut().subagent_update(json!({
        "title": args.description,
        "description": described(&args.prompt),
        "state": {"state": "running"},
        "capabilities": {"cancel": {}},
    }));
    let ended = drive(&mut Step {
        turn: &child,
        sink: &mut child_sink,
        state: &mut state,
        record: &mut None,
        messages: &mut messages,
        checkpoints,
    });
    updates
        .borrow_mut()
        .subagent_update(json!({"state": idle_state(&ended)}));
    updates.borrow_mut().nest(None);
    crate::cancel::lock(&turn.io.live)
        .children
        .0
        .retain(|(running, _)| *running != key);
    *approvals = state.approvals.clone();
    let before = spent_before.0;
    let spent = Spent {
        usage: state.usage.since(before),
        spend: state.spend.since(&spent_before.1),
        model_calls: state.model_calls,
        usage_reports: state.usage_reports,
    };
    let (status, text, cancelled) = match ended {
        // Only the child was cancelled: the parent's turn goes on.
        Ok(StopReason::Cancelled) if !turn.io.cancel.is_cancelled() => (
            ToolCallStatus::Failed,
            "Cancelled by the user: the subagent stopped before it finished.".to_string(),
            false,
        ),
        ended => outcome(ended, &messages),
    };
    end(status, &text);
    (result(text, status, cancelled), spent)
}

/// What the child session's `subagent_update` says of its purpose: the
/// start of the task's prompt.
fn described(prompt: &str) -> String {
    const CAP: usize = 400;
    let prompt = prompt.trim();
    if prompt.len() <= CAP {
        return prompt.to_string();
    }
    let mut end = CAP;
    while !prompt.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &prompt[..end])
}

/// The child session's state when the subagent's run ended: idle, and why.
fn idle_state(ended: &Result<StopReason, crate::rpc::RpcError>) -> serde_json::Value {
    match ended {
        Ok(stop) => json!({"state": "idle", "stopReason": stop}),
        Err(error) => json!({
            "state": "idle",
            "stopReason": "error",
            "error": {"code": error.code, "message": error.message},
        }),
    }
}

/// Tells the client the `task` call started.
fn announce(
    turn: &Turn,
    updates: &RefCell<Updates>,
    call: &ToolCallRequest,
    parsed: &Result<crate::tools::Tool, String>,
) {
    let raw_input = serde_json::from_str::<serde_json::Value>(&call.arguments)
        .unwrap_or_else(|_| serde_json::Value::String(call.arguments.clone()));
    let title = match parsed {
        Ok(tool) => crate::tools::title(tool, &turn.workspace.root),
        Err(_) => "task (invalid call)".to_string(),
    };
    updates
        .borrow_mut()
        .send(SessionUpdate::ToolCall(crate::acp::ToolCall {
            tool_call_id: call.id.clone(),
            name: Some(call.name.clone()),
            title,
            kind: ToolKind::Think,
            status: ToolCallStatus::InProgress,
            locations: None,
            raw_input: Some(raw_input),
        }));
}

/// The task's arguments and subagent, or the error text when this turn
/// may not hand out the task.
fn checked_task(
    turn: &Turn,
    parsed: Result<crate::tools::Tool, String>,
) -> Result<
    (
        crate::tools::TaskArgs,
        Option<Arc<crate::agentfile::AgentSpec>>,
    ),
    String,
> {
    let args = match parsed {
        Ok(crate::tools::Tool::Task(args)) => args,
        Ok(_) => return Err("Error: not a task".into()),
        Err(error) => return Err(format!("Error: {error}")),
    };
    if turn.io.client.parent.is_some() {
        return Err(
            "Error: a subagent cannot hand out tasks of its own; do the work yourself".into(),
        );
    }
    // The agent file's allow-list holds for `task` as for any tool.
    if let Some(agent) = turn
        .rights
        .agent
        .iter()
        .chain(&turn.rights.subagent)
        .find(|a| !a.allows_tool("task"))
    {
        return Err(format!(
            "Error: the agent {} may not use task; use the tools you were given",
            agent.name
        ));
    }
    let subagent = match &args.agent {
        None => None,
        Some(name) => Some(named_subagent(turn, name)?),
    };
    Ok((args, subagent))
}

/// The subagent the agent file names `name`, or the error text listing
/// the ones it has.
fn named_subagent(turn: &Turn, name: &str) -> Result<Arc<crate::agentfile::AgentSpec>, String> {
    let known = turn.rights.agent.as_ref().map(|a| &a.subagents);
    match known.and_then(|subagents| subagents.get(name)) {
        Some(spec) => Ok(Arc::new(spec.clone())),
        None => {
            let names: Vec<&String> = known.map(|s| s.keys().collect()).unwrap_or_default();
            Err(if names.is_empty() {
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
            })
        }
    }
}

/// How the subagent's run ended, for the client and the model: the
/// status, the text and whether it was cancelled.
fn outcome(
    ended: Result<StopReason, crate::rpc::RpcError>,
    messages: &[Message],
) -> (ToolCallStatus, String, bool) {
    let answer = final_answer(messages);
    match ended {
        Ok(StopReason::Cancelled) => (
            ToolCallStatus::Failed,
            "Cancelled by the user.".to_string(),
            true,
        ),
        Ok(stop) => {
            let note = match stop {
                StopReason::MaxTurnRequests => {
                    "\n\n(The subagent ran out of steps before it finished.)"
                }
                StopReason::MaxTokens => "\n\n(The subagent ran out of tokens before it finished.)",
                StopReason::Refusal => "\n\n(The model refused to go on.)",
                _ => "",
            };
            (ToolCallStatus::Completed, format!("{answer}{note}"), false)
        }
        Err(error) => (
            ToolCallStatus::Failed,
            format!("Error: the subagent failed: {}", error.message),
            false,
        ),
    }
}

fn ended_status(ok: bool) -> ToolCallStatus {
    if ok {
        ToolCallStatus::Completed
    } else {
        ToolCallStatus::Failed
    }
}

/// The subagent's turn: the parent's, with its own prompt, conversation,
/// budget and steers, marked as the parent's call.
fn child_turn(
    turn: &Turn,
    args: &crate::tools::TaskArgs,
    subagent: Option<Arc<crate::agentfile::AgentSpec>>,
    call: &ToolCallRequest,
) -> Turn {
    let mut child = turn.clone();
    let mut system = format!("{}\n\n{NOTE}", turn.conversation.system);
    if let Some(instructions) = subagent.as_ref().and_then(|s| s.instructions.as_deref()) {
        system.push_str("\n\n");
        system.push_str(instructions.trim());
    }
    child.conversation.system = system;
    child.conversation.messages = vec![Message::user(args.prompt.clone())];
    child.steps.max = subagent
        .as_ref()
        .and_then(|s| s.max_steps)
        .unwrap_or(turn.steps.max.min(DEFAULT_STEPS));
    child.rights.subagent = subagent;
    child.goal.current = None;
    child.goal.mode = false;
    child.start.kind = TurnKind::Model;
    child.io.request_id = None;
    child.io.inbox_item = None;
    child.opening.title_update = None;
    child.opening.notices = Vec::new();
    child.conversation.known = None;
    child.opening.prompt_blocks = Vec::new();
    child.opening.prompt_message_id = None;
    child.io.client.parent = Some(call.id.clone());
    // Steers are the parent's: the subagent's boundaries do not take them.
    child.io.live = Arc::new(std::sync::Mutex::new(Live::default()));

    child
}

/// Starts the subagent as a job: its own thread, stopped with the job (or
/// a cancel of the turn that started it), its updates sent as a nested
/// call's and kept in the job's log as its structured transcript. Returns
/// what the model is told.
fn start_job(
    drive: Drive,
    turn: &Turn,
    args: &crate::tools::TaskArgs,
    subagent: Option<Arc<crate::agentfile::AgentSpec>>,
    call: &ToolCallRequest,
) -> Result<String, String> {
    let log_dir = turn
        .workspace
        .processes
        .session_dir
        .clone()
        .ok_or("background tasks need the session's folder, which is not available")?;
    let mut child = child_turn(turn, args, subagent, call);
    let live = child.io.live.clone();
    let deliver: crate::tools::jobs::Deliver = Arc::new(move |text: &str| {
        let mut live = crate::cancel::lock(&live);
        let item = format!("send_{}", crate::util::random_hex());
        live.steers.push_back((
            item,
            text.to_string(),
            vec![json!({"type": "text", "text": text})],
        ));
        Ok(())
    });
    let spec = crate::tools::jobs::JobSpec {
        command_line: format!("task: {}", args.description),
        cwd: turn.workspace.root.clone(),
        env_remove: Vec::new(),
        env_set: Vec::new(),
        sandbox: None,
        shell: turn.workspace.processes.shell.clone(),
        log_dir,
        log_cap: turn.workspace.processes.log_cap,
        epoch: turn.io.epoch,
        watch: None,
    };
    let (info, job) = turn.workspace.jobs.start_agent(&spec, deliver)?;
    child.io.cancel = job.stop.clone();
    // Its requests (permissions, files) outlive the turn that started it.
    child.io.client = child.io.client.with_cancel(job.stop.clone());
    child.io.client.lasting = true;
    let parent = call.id.clone();
    let spawned = std::thread::Builder::new()
        .name("spindle-subagent".into())
        .spawn(move || {
            let updates = RefCell::new(super::updates::Updates::new(
                child.io.session_id.clone(),
                child.io.client.capabilities.clone(),
                child.io.writer.clone(),
                child.io.cancel.clone(),
            ));
            updates.borrow_mut().nest_quietly(&parent);
            updates.borrow_mut().mirror(job.sink.clone());
            let mut sink = UpdateSink::new(child.io.cancel.clone(), &updates);
            let mut state = State::new(&child);
            let mut messages = child.conversation.messages.clone();
            let ended = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                drive(&mut Step {
                    turn: &child,
                    sink: &mut sink,
                    state: &mut state,
                    record: &mut None,
                    messages: &mut messages,
                    checkpoints: None,
                })
            }));
            let (code, text) = match ended {
                Ok(Ok(StopReason::Cancelled)) => (None, "Stopped.".to_string()),
                Ok(Ok(_)) => (Some(0), final_answer(&messages)),
                Ok(Err(error)) => (Some(1), format!("The subagent failed: {}", error.message)),
                Err(_) => (
                    Some(1),
                    "The subagent failed: an internal error".to_string(),
                ),
            };
            // The transcript ends with the answer, as the parent's call.
            updates.borrow_mut().nest(None);
            let last = SessionUpdate::tool_call_ended(
                &parent,
                ended_status(code == Some(0)),
                vec![text_content(&text)],
            )
            .into_value();
            let mut line = last.to_string();
            line.push('\n');
            // Past the log's cap too: the answer is what the job is for.
            crate::cancel::lock(&job.sink).write_always(line.as_bytes());
            job.finish(code);
        });
    if spawned.is_err() {
        let _ = turn.workspace.jobs.kill(&info.job_id);
        return Err("cannot start the subagent's thread".into());
    }
    Ok(format!(
        "Started job {} (a subagent): {} You will be told when it ends; read its progress with job_output, stop it with job_stop.",
        info.job_id,
        crate::util::sentence(&args.description)
    ))
}

/// The subagent's last words: its answer.
fn final_answer(messages: &[Message]) -> String {
    messages
        .iter()
        .rev()
        .find(|m| m.role == crate::provider::Role::Assistant && !m.text.trim().is_empty())
        .map(|m| m.text.trim().to_string())
        .unwrap_or_else(|| "(The subagent gave no answer.)".to_string())
}

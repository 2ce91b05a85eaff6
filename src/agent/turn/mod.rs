//! The turn worker: runs one prompt turn on its own thread. It calls the
//! model, streams what comes back to the writer as `session/update`s, runs
//! the tools the model asks for, and loops until the model answers without
//! tools; then it hands its result to the dispatcher, which answers the
//! prompt.
//!
//! The worker does not own session state: it works on a snapshot of the
//! conversation, commits each step to the store itself (`record.rs`),
//! shares with the dispatcher only what guards itself (its live state
//! behind a mutex, the session's jobs, MCP servers and caches), and returns
//! what the turn added.
//!
//! The files, by what they answer:
//! - what it gets and gives back: `spec.rs` (what the dispatcher hands it,
//!   in small parts grouped by the steps that read them), `report.rs` (its end and its requests, through an
//!   `Outbox`, so the turn never names the dispatcher's types), `client.rs`
//!   (its handle for requests to the client), `updates.rs` (the one path of
//!   its updates, and the sink of the provider's deltas), `record.rs` (its
//!   commits to the store);
//! - the loop: this file (the turn's start and end; the files here never
//!   import it), `drive.rs` (the loop, which alone decides how it goes
//!   on), `state.rs` (what the turn accumulates, the helpers the steps
//!   call on it, and `Step`, the one context every step takes), `step.rs`
//!   (the checks, the answer and what follows it as a value for the loop,
//!   the tool calls), `model_call.rs` (the model
//!   request, and what it gave as a value for the loop), `goals.rs` (a
//!   goal across the steps), `context.rs` and `compaction.rs` (the size of
//!   the next request and fitting the conversation into the window),
//!   `waiting.rs` (a limit that resets later: fallback models, then a
//!   stored wait), `loops.rs` (a model that repeats itself), `recover.rs`
//!   with `text_calls.rs` (an answer's calls made whole before any is
//!   judged);
//! - the tool calls: `offered.rs` (the tools a step offers), `runner.rs` (a
//!   step's calls and how a call ends), `tool_call.rs` (one call from start
//!   to end), `permission.rs` (rules, policy, the question to the user),
//!   `execute.rs` (the built-in tools), `edits.rs` (the file-changing tools,
//!   previews, checkpoints), `questions.rs` (`ask_user`, `exit_plan`),
//!   `shell.rs` (`run_command`, locally or in the editor's terminal),
//!   `processes.rs` (how commands and hooks start: credentials removed,
//!   logs, confinement), `elicitation.rs` (an MCP server's question put to
//!   the editor);
//! - the rest: `hooks.rs` (the prompt's, the stop's and compaction's hooks),
//!   `jobs.rs` and `terminal_job.rs` (background jobs), `subagent.rs` (the
//!   `task` tool) with `agent_log.rs` (an agent job's log read back),
//!   `undo.rs` (`/undo`, `/rewind`, `/redo`).

mod agent_log;
pub(super) mod client;
mod compaction;
mod context;
mod drive;
mod edits;
mod elicitation;
mod execute;
mod goals;
mod hooks;
mod jobs;
mod loops;
mod model_call;
pub(super) mod offered;
mod permission;
pub(super) mod processes;
mod record;
mod recover;
pub(super) mod report;
pub(super) use agent_log::agent_answer;
pub(super) use offered::{first_request, is_lean};
mod questions;
mod runner;
mod shell;
mod spec;
mod state;
mod step;
mod subagent;
mod terminal_job;
mod text_calls;
mod tool_call;
mod undo;
mod updates;
mod waiting;

use crate::acp::StopReason;
use crate::provider::Message;
use crate::rpc::RpcError;
use record::Record;
use report::{Outbox, Report, TurnEnd};
use serde_json::Value;
use state::State;
use std::cell::RefCell;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::thread::JoinHandle;
use updates::{UpdateSink, Updates};

pub(super) use spec::{
    Conversation, Fallback, Io, Model, OnLimit, Opening, Rights, Start, Steps, Turn, TurnGoal,
    TurnKind, Wait, Window, Workspace,
};

/// Where the session's environment goes in the system prompt.
pub(super) const ENVIRONMENT_MARK: &str = "{ENVIRONMENT}";

pub(super) fn spawn(turn: Turn, outbox: Outbox) -> std::io::Result<JoinHandle<()>> {
    std::thread::Builder::new()
        .name(format!("spindle-turn-{}", turn.io.session_id))
        .spawn(move || {
            // Taken here, off the dispatcher (git may be slow), once.
            let mut turn = turn;
            take_environment(&mut turn);
            let updates = open_updates(&turn);
            let blocked = match turn.start.kind {
                TurnKind::Model => hooks::before_prompt(&mut turn, &updates),
                _ => None,
            };
            let mut record = begin_record(&turn, &updates);
            let mut sink = UpdateSink::new(turn.io.cancel.clone(), &updates);
            sink.live = Some(turn.io.live.clone());
            let mut state = State::new(&turn);
            let result = match blocked {
                // The prompt never reaches the model, nor the conversation.
                Some(reason) => {
                    state.replaced = Some(turn.conversation.messages.clone());
                    sink.begin_message();
                    let text = format!(
                        "Your prompt was not sent to the model: a UserPromptSubmit hook blocked it.\n\n{reason}"
                    );
                    sink.updates
                        .borrow_mut()
                        .chunk(false, &sink.message_id, &text);
                    Ok(StopReason::EndTurn)
                }
                None => run_guarded(&turn, &mut sink, &mut state, &mut record),
            };
            if state.parked {
                waiting::clear(&turn, &mut record);
            }
            store_end(&turn, &state, &mut record, &updates, &result);
            let final_goal = final_goal(&mut state, &result);
            outbox(Report::Ended(Box::new(TurnEnd {
                session_id: turn.io.session_id,
                request_id: turn.io.request_id,
                result,
                added: state.added,
                usage: state.usage,
                usage_unknown: state.model_calls > 0 && state.usage_reports == 0,
                usage_whole: state.usage_reports == state.model_calls,
                usage_unreported: state.model_calls.saturating_sub(state.usage_reports),
                known: state.known,
                applied: state.applied,
                dispatched: turn.io.inbox_item.clone(),
                goal: final_goal,
                model_calls: state.model_calls,
                approvals: state.approvals,
                spend: state.spend,
                replaced: state.replaced,
                window: state.window,
            })));
        })
}

/// The session's environment in the system prompt, where it asks for it.
fn take_environment(turn: &mut Turn) {
    if turn.conversation.system.contains(ENVIRONMENT_MARK) {
        // The workspace's files are read here (git's HEAD, …):
        // whatever they hold, a failure costs the snapshot only.
        let root = turn.workspace.root.clone();
        let shell = turn.workspace.processes.shell.clone();
        let environment = turn
            .workspace
            .environment
            .get_or_init(|| {
                catch_unwind(|| crate::agent::common::prompt::environment(&root, &shell))
                    .unwrap_or_else(|_| {
                        log::error!("the environment snapshot failed");
                        "Environment: not known.".into()
                    })
            })
            .clone();
        turn.conversation.system =
            turn.conversation
                .system
                .replacen(ENVIRONMENT_MARK, &environment, 1);
    }
}

/// The turn's one path of updates, opened with the session's new title
/// and the notices to show first.
fn open_updates(turn: &Turn) -> RefCell<Updates> {
    let updates = RefCell::new(Updates::new(
        turn.io.session_id.clone(),
        turn.io.client.capabilities.clone(),
        turn.io.writer.clone(),
        turn.io.cancel.clone(),
    ));
    if let Some(title) = &turn.opening.title_update {
        updates.borrow_mut().send(title.clone());
    }
    for notice in &turn.opening.notices {
        updates.borrow_mut().notice(notice);
    }
    updates
}

/// The turn begun in the store, with what it adds to the conversation.
fn begin_record(turn: &Turn, updates: &RefCell<Updates>) -> Option<Record> {
    // Only a model turn adds the prompt to the conversation (or the
    // answer of the question it waited for).
    let user: Vec<Message> = turn.conversation.messages[turn
        .conversation
        .messages
        .len()
        .saturating_sub(turn.conversation.fresh)..]
        .to_vec();
    let marks: Vec<(String, crate::store::inbox::ItemState)> = turn
        .io
        .inbox_item
        .iter()
        .map(|item| (item.clone(), crate::store::inbox::ItemState::Dispatched))
        .collect();
    Record::begin(
        turn.workspace.db.as_deref(),
        &turn.io.session_id,
        &turn.opening.prompt_blocks,
        turn.opening.prompt_message_id.as_deref(),
        user,
        updates,
        &marks,
    )
}

/// Runs the turn's kind; a panic becomes a failed turn, keeping the
/// message streamed so far.
fn run_guarded(
    turn: &Turn,
    sink: &mut UpdateSink,
    state: &mut State,
    record: &mut Option<Record>,
) -> Result<StopReason, RpcError> {
    let outcome = catch_unwind(AssertUnwindSafe(|| match &turn.start.kind {
        TurnKind::Model => drive::run(turn, sink, state, record),
        TurnKind::Local(reply) => {
            sink.begin_message();
            sink.updates
                .borrow_mut()
                .chunk(false, &sink.message_id, reply.as_str());
            Ok(StopReason::EndTurn)
        }
        TurnKind::Compact(focus) => compaction::compact_command(turn, sink, state, focus),
        TurnKind::Rewind(rewind) => undo::run(turn, sink, state, *rewind),
    }));
    // Text held back as a possible tool call that nobody read as one (a
    // failed request, a summary) is shown before the turn ends.
    if let Some(held) = sink.take_held() {
        sink.show(&held);
    }
    match outcome {
        Ok(result) => result,
        Err(panic) => {
            let what = panic
                .downcast_ref::<String>()
                .map(String::as_str)
                .or_else(|| panic.downcast_ref::<&str>().copied())
                .unwrap_or("unknown cause");
            log::error!("turn in session {} panicked: {what}", turn.io.session_id);
            if let Some(partial) = sink.take_message() {
                state.added.push(partial);
            }
            Err(RpcError::internal(format!("the turn failed: {what}"))
                .with_data(serde_json::json!({ "code": "internal_panic" })))
        }
    }
}

/// The turn's end in the store: its kept events, its last messages (or
/// the compacted conversation), its stop reason and usage.
fn store_end(
    turn: &Turn,
    state: &State,
    record: &mut Option<Record>,
    updates: &RefCell<Updates>,
    result: &Result<StopReason, RpcError>,
) {
    if let Some(record) = record {
        let events = updates.borrow_mut().take_kept();
        let (stop, error) = match &result {
            Ok(stop) => (serde_json::to_value(stop).ok(), None),
            Err(error) => (None, Some(error.message.as_str())),
        };
        let stop = stop.as_ref().and_then(Value::as_str);
        let usage = serde_json::to_value(state.usage).unwrap_or_default();
        // A replaced conversation holds the turn's messages too.
        let mut tail = &state.added[record.committed..];
        if let Some(messages) = &state.replaced {
            if let Err(error) = record.store.replace_messages(&turn.io.session_id, messages) {
                log::error!(
                    "cannot store the compacted conversation of session {}: {error}",
                    turn.io.session_id
                );
            }
            tail = &[];
        }
        if let Err(error) = record.store.end_turn(
            &turn.io.session_id,
            record.turn,
            &events,
            tail,
            stop,
            error,
            &usage,
        ) {
            log::error!(
                "cannot store the end of the turn of session {}: {error}",
                turn.io.session_id
            );
        }
    }
}

/// The goal as the turn leaves it: its last turn's outcome, and stopped
/// by a cancel (resumable).
fn final_goal(
    state: &mut State,
    result: &Result<StopReason, RpcError>,
) -> Option<crate::agent::common::goal::Goal> {
    state.goal.take().map(|mut goal| {
        use crate::agent::common::goal::Status;
        goal.last_turn = Some(match &result {
            Ok(stop) => serde_json::to_value(stop)
                .ok()
                .and_then(|v| v.as_str().map(str::to_string))
                .unwrap_or_default(),
            Err(_) => "failed".into(),
        });
        // A cancel stops the goal (resumable); a failed turn
        // leaves it running.
        if goal.status == Status::Running && matches!(result, Ok(StopReason::Cancelled)) {
            goal.status = Status::Cancelled;
        }
        goal.touch();
        goal
    })
}

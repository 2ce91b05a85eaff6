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
//!   in five parts), `report.rs` (its end and its requests, through an
//!   `Outbox`, so the turn never names the dispatcher's types), `client.rs`
//!   (its handle for requests to the client), `updates.rs` (the one path of
//!   its updates, and the sink of the provider's deltas), `record.rs` (its
//!   commits to the store);
//! - the loop: this file (start, end, the loop), `step.rs` (the checks, the
//!   model call, its answer, the tool calls), `goals.rs` (a goal across the
//!   steps), `context.rs` and `compaction.rs` (the size of the next request
//!   and fitting the conversation into the window), `waiting.rs` (a limit
//!   that resets later: fallback models, then a stored wait), `loops.rs` (a
//!   model that repeats itself), `recover.rs` with `text_calls.rs` (an
//!   answer's calls made whole before any is judged);
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
mod edits;
mod elicitation;
mod execute;
mod goals;
mod hooks;
mod jobs;
mod loops;
pub(super) mod offered;
mod permission;
pub(super) mod processes;
mod record;
mod recover;
pub(super) mod report;
pub(super) use agent_log::agent_answer;
mod questions;
mod runner;
mod shell;
mod spec;
mod step;
mod subagent;
mod terminal_job;
mod text_calls;
mod tool_call;
mod undo;
mod updates;
mod waiting;

use crate::acp::{ContentChunk, Cost, SessionUpdate, StopReason};
use crate::agent::common::permission::Approvals;
use crate::agent::common::spend::{call_cost, currency, Spend};
use crate::provider::{Message, Outcome, Usage};
use crate::rpc::RpcError;
use record::Record;
use report::{Outbox, Report, TurnEnd};
use serde_json::{json, Value};
use std::cell::RefCell;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::thread::JoinHandle;
use updates::{UpdateSink, Updates};

pub(super) use spec::{Fallback, Io, Rights, Start, Turn, TurnKind, TurnModel, Wait, Workspace};

/// What the turn accumulates; kept outside the unwinding code so a panic
/// loses nothing that was already said.
struct State {
    added: Vec<Message>,
    usage: Usage,
    approvals: Approvals,
    /// What the turn's model calls cost (its subagents' included).
    spend: Spend,
    replaced: Option<Vec<Message>>,
    /// Model calls that finished, and how many of them reported usage.
    model_calls: usize,
    usage_reports: usize,
    /// The conversation's size as last reported.
    known: Option<context::Known>,
    /// Whether the conversation was made smaller during the turn (then it
    /// replaces the session's).
    compacted: bool,
    /// The turn's prompt was not sent for its size: it leaves the
    /// conversation.
    prompt_dropped: bool,
    /// Summaries asked for during the turn.
    summaries: usize,
    /// Inbox items (steers) applied at the turn's boundaries.
    applied: Vec<String>,
    /// The goal the turn works on, as it goes.
    goal: Option<crate::agent::common::goal::Goal>,
    /// The window a server named when it refused a request as too long,
    /// when smaller than the configured one: compaction fits it.
    window: Option<u64>,
    /// The fallback model the turn moved to (an index into the turn's),
    /// when the session's is limited.
    fallback: Option<usize>,
    /// When the session's model's limit resets (ms since the epoch), and
    /// since when the turn waits for it.
    limit_reset: Option<i64>,
    waiting_since: Option<i64>,
    /// A wait is recorded in the store.
    parked: bool,
    /// How many times the turn waited for a limit.
    parks: u32,
    /// How many times a `Stop` hook sent the model back to work.
    stop_blocks: usize,
}

impl State {
    fn new(turn: &Turn) -> State {
        State {
            added: Vec::new(),
            usage: Usage::default(),
            approvals: turn.rights.approvals.clone(),
            spend: Spend::default(),
            replaced: None,
            model_calls: 0,
            usage_reports: 0,
            known: turn.start.known,
            compacted: false,
            prompt_dropped: false,
            summaries: 0,
            applied: Vec::new(),
            goal: turn.start.goal.clone(),
            window: None,
            fallback: None,
            limit_reset: None,
            waiting_since: None,
            parked: false,
            parks: 0,
            stop_blocks: 0,
        }
    }
}

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
                    state.replaced = Some(turn.start.messages.clone());
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
    if turn.start.system.contains(ENVIRONMENT_MARK) {
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
        turn.start.system = turn
            .start
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
    if let Some(title) = &turn.start.title_update {
        updates.borrow_mut().send(title.clone());
    }
    for notice in &turn.start.notices {
        updates.borrow_mut().notice(notice);
    }
    updates
}

/// The turn begun in the store, with what it adds to the conversation.
fn begin_record(turn: &Turn, updates: &RefCell<Updates>) -> Option<Record> {
    // Only a model turn adds the prompt to the conversation (or the
    // answer of the question it waited for).
    let user: Vec<Message> =
        turn.start.messages[turn.start.messages.len().saturating_sub(turn.start.fresh)..].to_vec();
    let marks: Vec<(String, crate::store::inbox::ItemState)> = turn
        .io
        .inbox_item
        .iter()
        .map(|item| (item.clone(), crate::store::inbox::ItemState::Dispatched))
        .collect();
    Record::begin(
        turn.workspace.db.as_deref(),
        &turn.io.session_id,
        &turn.start.prompt_blocks,
        turn.start.prompt_message_id.as_deref(),
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
        TurnKind::Model => run(turn, sink, state, record),
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

fn run(
    turn: &Turn,
    sink: &mut UpdateSink,
    state: &mut State,
    record: &mut Option<Record>,
) -> Result<StopReason, RpcError> {
    let mut messages = turn.start.messages.clone();
    let checkpoints = match (turn.workspace.db.as_deref(), record.as_ref()) {
        (Some(db), Some(record)) => crate::checkpoint::Checkpoints::open(
            db,
            &turn.io.session_id,
            record.turn,
            turn.workspace.scan_cache.clone(),
            turn.workspace.checkpoints,
        )
        .map(RefCell::new),
        _ => None,
    };
    let result = steps(
        turn,
        sink,
        state,
        record,
        &mut messages,
        checkpoints.as_ref(),
    );
    if let Some(checkpoints) = checkpoints {
        checkpoints.into_inner().finish();
    }
    if state.prompt_dropped {
        messages.truncate(messages.len().saturating_sub(turn.start.fresh));
        state.replaced = Some(messages);
    } else if state.compacted || turn.start.rewritten {
        state.replaced = Some(messages);
    }
    result
}

/// The model/tool loop over `messages`, the conversation as the model
/// sees it: each step checks it may go on, asks the model, takes its
/// answer, and runs the tools it called (the steps are in `step.rs`).
fn steps(
    turn: &Turn,
    sink: &mut UpdateSink,
    state: &mut State,
    record: &mut Option<Record>,
    messages: &mut Vec<Message>,
    checkpoints: Option<&RefCell<crate::checkpoint::Checkpoints>>,
) -> Result<StopReason, RpcError> {
    step::prepare(turn, sink, messages);
    let mut run = step::Loop::new(turn, state);
    // A turn that a stopped process left waiting waits out the rest.
    if let Some(wait) = &turn.start.wait {
        state.waiting_since = Some(wait.since_ms);
        state.limit_reset = Some(wait.until_ms);
        if let Err(stop) = waiting::park(turn, sink, state, record, wait.until_ms, &wait.reason) {
            return stop;
        }
    }
    loop {
        if let Some(stop) = step::before_request(turn, sink, state, record, messages, &mut run) {
            return stop;
        }
        let called = step::call_model(turn, sink, state, record, messages, &mut run);
        let (mut outcome, mut assistant) = match called {
            step::Called::Answer(answer) => *answer,
            step::Called::Retry => continue,
            step::Called::Stop(stop) => return stop,
        };
        // Calls written into the text, and calls almost right, made whole
        // before anything judges them.
        let repairs = recover::recover(run.tools(), sink, &mut outcome, &mut assistant);
        let stop = step::take_answer(turn, sink, state, messages, &run, &outcome, assistant);
        match step::after_answer(
            turn, sink, state, record, messages, &mut run, &outcome, stop,
        ) {
            step::Flow::Go => {}
            step::Flow::Again => continue,
            step::Flow::Stop(stop) => return stop,
        }
        let calls = step::run_calls(
            turn,
            sink,
            state,
            checkpoints,
            &mut run,
            (&outcome.tool_calls, &repairs),
        );
        if let Some(stop) = step::after_calls(
            turn, sink, state, record, messages, &mut run, &outcome, calls,
        ) {
            return stop;
        }
    }
}

/// Takes the steers handed over since the last boundary: each is shown as
/// the user's text (and kept for replay) and becomes a user message.
/// Returns their item ids.
fn take_steers(
    turn: &Turn,
    sink: &mut UpdateSink,
    state: &mut State,
    messages: &mut Vec<Message>,
) -> Vec<String> {
    let steers: Vec<(String, String, Vec<Value>)> = match turn.io.live.lock() {
        Ok(mut live) => live.steers.drain(..).collect(),
        Err(_) => Vec::new(),
    };
    let mut applied = Vec::new();
    for (item, text, blocks) in steers {
        for block in blocks {
            sink.updates
                .borrow_mut()
                .send(SessionUpdate::UserMessageChunk(ContentChunk {
                    content: block,
                    message_id: Some(format!("steer_{item}")),
                }));
        }
        let message = Message::user(text);
        messages.push(message.clone());
        state.added.push(message);
        state.applied.push(item.clone());
        applied.push(item);
    }
    applied
}

/// Publishes the provider's health for status.
fn set_health(turn: &Turn, health: report::Health, error: Option<String>) {
    if let Ok(mut live) = turn.io.live.lock() {
        live.health = health;
        live.health_error = error;
        // A retry's or a wait's time is over either way.
        live.waiting_until = None;
    }
}

/// The answer for a failed model call: authentication problems (HTTP 401
/// and 403) are ACP's -32000, which lets the editor offer to authenticate;
/// everything else is -32603 with the provider's own words, not worded as
/// Spindle's internal fault.
fn provider_failure(error: &crate::provider::ProviderError) -> RpcError {
    let data = error.data();
    if matches!(error.status, Some(401 | 403)) {
        return RpcError::new(
            crate::rpc::code::AUTH_REQUIRED,
            format!(
                "Authentication required: {} Check the provider's API key (its variable or key file, or run `spindle setup`), then authenticate again.",
                crate::util::sentence(&error.message)
            ),
        )
        .with_data(data);
    }
    RpcError::new(
        crate::rpc::code::INTERNAL_ERROR,
        format!("Model provider error: {}", error.message),
    )
    .with_data(data)
}

/// The answer when the provider refuses the conversation as longer than
/// the model's window, even after compacting it.
fn too_long(error: &crate::provider::ProviderError, compacting: bool) -> RpcError {
    let mut data = error.data();
    data["code"] = json!("context_too_long");
    data["providerCode"] = json!(error.code);
    let advice = if compacting {
        "even after compacting it. Start a new session, or /clear and say again what matters"
    } else {
        "and automatic compaction is off. Use /compact, /clear or a new session"
    };
    RpcError::new(
        crate::rpc::code::INTERNAL_ERROR,
        format!(
            "Model provider error: the conversation is too long for the model's context window ({}), {advice}.",
            error.message
        ),
    )
    .with_data(data)
}

/// Which of the agent's per-turn limits the turn has reached, in words.
fn limit_reached(agent: &crate::agentfile::AgentSpec, state: &State) -> Option<String> {
    let tokens = state
        .usage
        .input_tokens
        .saturating_add(state.usage.output_tokens);
    if let Some(limit) = agent.limits.tokens.filter(|limit| tokens >= *limit) {
        return Some(format!("{limit} tokens"));
    }
    agent
        .limits
        .cost
        .filter(|limit| state.spend.cost >= *limit)
        .map(|limit| format!("{limit} in cost"))
}

/// Adds a finished model call's usage and cost to the turn's: a call
/// without usage has unknown counts, and one with neither a reported cost
/// nor a price (nor usage to price) an unknown cost. The call's cost.
fn add_call_usage(turn: &Turn, outcome: &Outcome, state: &mut State) -> Option<f64> {
    state.model_calls += 1;
    let usage = outcome.usage.as_ref();
    let cost = call_cost(outcome.cost, usage, waiting::in_use(turn, state).price);
    state.spend.add_call(cost);
    if let Some(usage) = usage {
        state.usage_reports += 1;
        state.usage.add(usage);
    }
    publish_usage(turn, &state.usage, state.spend);
    cost
}

/// Publishes the turn's usage so far for status, which answers without
/// waiting for the turn.
fn publish_usage(turn: &Turn, usage: &Usage, spend: Spend) {
    if let Ok(mut live) = turn.io.live.lock() {
        live.usage = *usage;
        live.spend = spend;
    }
}

/// Sends `usage_update`: how full the context is (`used`, the size of the
/// conversation as the next request sends it), and what the session cost
/// so far when every call's cost is known (none is, when one is not).
fn report_usage(turn: &Turn, used: u64, state: &State, updates: &RefCell<Updates>) {
    let mut session = turn.start.spend_before;
    session.add(&state.spend);
    let cost = session.total().map(|amount| Cost {
        amount,
        currency: currency(turn.model.price.as_ref()).to_string(),
    });
    updates.borrow_mut().send_live(SessionUpdate::UsageUpdate {
        used,
        size: state.window.unwrap_or(turn.model.context_window),
        cost,
    });
}

/// Every tool call the model made needs an answer in the conversation, even
/// those that never ran because the turn was cancelled first.
fn answer_unrun(
    calls: &[crate::provider::ToolCallRequest],
    messages: &mut Vec<Message>,
    state: &mut State,
) {
    for call in calls {
        let message = Message::tool_result(&call.id, "Not run: the turn ended before it ran.");
        messages.push(message.clone());
        state.added.push(message);
    }
}

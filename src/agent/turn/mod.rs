//! The turn worker: runs one prompt turn on its own thread. It calls the
//! model, streams what comes back to the writer as `session/update`s, runs
//! the tools the model asks for, and loops until the model answers without
//! tools; then it hands its result to the dispatcher, which answers the
//! prompt.
//!
//! The worker never touches session state: it works on a snapshot of the
//! conversation and returns what the turn added.

pub mod client;
pub mod processes;
mod record;
pub mod report;
mod runner;
mod shell;
mod updates;

use crate::acp::StopReason;
use crate::agent::common::permission::{Approvals, Policy};
use crate::cancel::CancelToken;
use crate::config::Price;
use crate::provider::{Finish, Message, ModelRequest, Provider, StreamError, ToolSpec, Usage};
use crate::rpc::stdio::Queued;
use crate::rpc::{RequestId, RpcError};
use client::Client;
use crossbeam_channel::Sender;
use processes::Processes;
use record::Record;
use report::{Outbox, Report, TurnEnd};
use runner::Runner;
use serde_json::{json, Value};
use std::cell::RefCell;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::PathBuf;
use std::sync::Arc;
use std::thread::JoinHandle;
use updates::{UpdateSink, Updates};

/// What a turn does.
#[derive(Debug, Clone, PartialEq)]
pub enum TurnKind {
    /// The model/tool loop.
    Model,
    /// Spindle answers by itself (a slash command such as /help); the
    /// conversation is untouched.
    Local(String),
    /// The model summarises the conversation, which is then replaced by
    /// the summary (`/compact`).
    Compact,
}

/// Everything a turn needs, handed over by the dispatcher.
pub struct Turn {
    pub session_id: String,
    pub request_id: RequestId,
    pub root: PathBuf,
    pub system: String,
    /// The conversation so far, ending with this turn's user message.
    pub messages: Vec<Message>,
    pub provider: Arc<dyn Provider>,
    pub cancel: CancelToken,
    pub writer: Sender<Queued>,
    pub client: Client,
    pub policy: Policy,
    pub approvals: Approvals,
    /// The most model calls one turn may make.
    pub max_steps: usize,
    /// The model's name at its provider, and how to call it.
    pub model: String,
    pub effort: Option<String>,
    pub max_output_tokens: Option<u32>,
    pub context_window: u64,
    pub price: Option<Price>,
    /// What the session cost before this turn.
    pub cost_before: f64,
    /// Plan mode: only read-only tools.
    pub read_only: bool,
    /// Whether the model takes images; if not, it gets a note instead.
    pub images: bool,
    pub kind: TurnKind,
    /// The session's MCP servers.
    pub mcp: Option<Arc<crate::mcp::McpSession>>,
    /// The session database; the worker commits each step there.
    pub db: Option<PathBuf>,
    /// How the user's prompt is replayed: its blocks as sent.
    pub prompt_blocks: Vec<Value>,
    /// A `session_info_update` to send (and keep) first, when the session
    /// just got its title.
    pub title_update: Option<Value>,
    /// How the session's commands start.
    pub processes: Arc<Processes>,
    /// A message to show before anything else (once per session: the
    /// sandbox policy without a sandbox).
    pub notice: Option<String>,
}

/// What the turn accumulates; kept outside the unwinding code so a panic
/// loses nothing that was already said.
struct State {
    added: Vec<Message>,
    usage: Usage,
    approvals: Approvals,
    cost: f64,
    replaced: Option<Vec<Message>>,
    /// Model calls that finished, and how many of them reported usage.
    model_calls: usize,
    usage_reports: usize,
}

pub fn spawn(turn: Turn, outbox: Outbox) -> std::io::Result<JoinHandle<()>> {
    std::thread::Builder::new()
        .name(format!("spindle-turn-{}", turn.session_id))
        .spawn(move || {
            let updates = RefCell::new(Updates::new(
                turn.session_id.clone(),
                turn.writer.clone(),
                turn.cancel.clone(),
            ));
            if let Some(title) = &turn.title_update {
                updates.borrow_mut().send(title.clone());
            }
            if let Some(notice) = &turn.notice {
                updates.borrow_mut().send(serde_json::json!({
                    "sessionUpdate": "agent_message_chunk",
                    "content": {"type": "text", "text": notice},
                    "messageId": format!("notice_{}", crate::util::random_hex()),
                }));
            }
            // Only a model turn adds the prompt to the conversation.
            let user: Vec<Message> = match turn.kind {
                TurnKind::Model => turn.messages.last().cloned().into_iter().collect(),
                _ => Vec::new(),
            };
            let mut record = Record::begin(
                turn.db.as_deref(),
                &turn.session_id,
                &turn.prompt_blocks,
                user,
                &updates,
            );
            let mut sink = UpdateSink::new(turn.cancel.clone(), &updates);
            let mut state = State {
                added: Vec::new(),
                usage: Usage::default(),
                approvals: turn.approvals.clone(),
                cost: 0.0,
                replaced: None,
                model_calls: 0,
                usage_reports: 0,
            };
            let outcome = catch_unwind(AssertUnwindSafe(|| match &turn.kind {
                TurnKind::Model => run(&turn, &mut sink, &mut state, &mut record),
                TurnKind::Local(reply) => {
                    sink.begin_message();
                    sink.updates
                        .borrow_mut()
                        .chunk(false, &sink.message_id, reply.as_str());
                    Ok(StopReason::EndTurn)
                }
                TurnKind::Compact => compact(&turn, &mut sink, &mut state),
            }));
            let result = match outcome {
                Ok(result) => result,
                Err(panic) => {
                    let what = panic
                        .downcast_ref::<String>()
                        .map(String::as_str)
                        .or_else(|| panic.downcast_ref::<&str>().copied())
                        .unwrap_or("unknown cause");
                    log::error!("turn in session {} panicked: {what}", turn.session_id);
                    if let Some(partial) = sink.take_message() {
                        state.added.push(partial);
                    }
                    Err(RpcError::internal(format!("the turn failed: {what}"))
                        .with_data(serde_json::json!({ "code": "internal_panic" })))
                }
            };
            if let Some(record) = &mut record {
                let events = updates.borrow_mut().take_kept();
                let (stop, error) = match &result {
                    Ok(stop) => (serde_json::to_value(stop).ok(), None),
                    Err(error) => (None, Some(error.message.as_str())),
                };
                let stop = stop.as_ref().and_then(Value::as_str);
                let usage = serde_json::to_value(state.usage).unwrap_or_default();
                if let Some(messages) = &state.replaced {
                    if let Err(error) = record.store.replace_messages(&turn.session_id, messages) {
                        log::error!(
                            "cannot store the compacted conversation of session {}: {error}",
                            turn.session_id
                        );
                    }
                }
                if let Err(error) = record.store.end_turn(
                    &turn.session_id,
                    record.turn,
                    &events,
                    &state.added[record.committed..],
                    stop,
                    error,
                    &usage,
                ) {
                    log::error!(
                        "cannot store the end of the turn of session {}: {error}",
                        turn.session_id
                    );
                }
            }
            outbox(Report::Ended(TurnEnd {
                session_id: turn.session_id,
                request_id: turn.request_id,
                result,
                added: state.added,
                usage: state.usage,
                usage_unknown: state.model_calls > 0 && state.usage_reports == 0,
                approvals: state.approvals,
                cost: state.cost,
                replaced: state.replaced,
            }));
        })
}

fn add_usage(total: &mut Usage, usage: &Usage) {
    total.input_tokens += usage.input_tokens;
    total.output_tokens += usage.output_tokens;
    total.cached_tokens += usage.cached_tokens;
    total.reasoning_tokens += usage.reasoning_tokens;
}

fn run(
    turn: &Turn,
    sink: &mut UpdateSink,
    state: &mut State,
    record: &mut Option<Record>,
) -> Result<StopReason, RpcError> {
    let mut messages = turn.messages.clone();
    if !turn.images {
        for message in messages.iter_mut().filter(|m| !m.images.is_empty()) {
            for image in std::mem::take(&mut message.images) {
                message.text.push_str(&format!(
                    "\n(The image {} cannot be shown to this model, which does not take images.)",
                    image.path.display()
                ));
            }
        }
    }
    // Built here, not at start-up: finding out whether ripgrep is installed
    // runs a process, which must not delay `initialize`.
    let mut tools: Vec<ToolSpec> = crate::tools::specs(
        crate::tools::search::ripgrep_available(),
        turn.processes.output_cap,
    );
    if turn.read_only {
        tools.retain(|tool| crate::tools::READ_ONLY.contains(&tool.name.as_str()));
    }
    if let Some(mcp) = &turn.mcp {
        mcp.begin_turn();
        // Servers that failed since the last turn are named once, so the
        // user knows why their tools are missing.
        for (server, reason) in mcp.take_failures() {
            sink.begin_message();
            let note = format!(
                "_MCP server `{server}` is not available: {reason}. Its tools are withdrawn._\n\n"
            );
            sink.updates
                .borrow_mut()
                .chunk(false, &sink.message_id, &note);
        }
        for tool in mcp.tools() {
            if turn.read_only && !tool.read_only {
                continue;
            }
            tools.push(ToolSpec {
                name: tool.exposed_name,
                description: tool.description,
                parameters: tool.input_schema,
            });
        }
    }
    let mut steps = 0;
    loop {
        if turn.cancel.is_cancelled() {
            return Ok(StopReason::Cancelled);
        }
        if steps >= turn.max_steps {
            return Ok(StopReason::MaxTurnRequests);
        }
        // Every completed step is stored before the next provider request.
        if steps > 0 {
            if let Some(record) = record.as_mut() {
                record.step(&turn.session_id, sink.updates, &state.added);
            }
        }
        steps += 1;
        sink.begin_message();
        let request = ModelRequest {
            session_id: &turn.session_id,
            model: &turn.model,
            system: &turn.system,
            messages: &messages,
            tools: &tools,
            effort: turn.effort.as_deref(),
            max_output_tokens: turn.max_output_tokens,
        };
        let streamed = turn.provider.stream(&request, sink, &turn.cancel);
        let mut assistant = sink.take_message();
        let outcome = match streamed {
            Ok(outcome) => outcome,
            Err(error) => {
                state.added.extend(assistant);
                return match error {
                    StreamError::Cancelled => Ok(StopReason::Cancelled),
                    StreamError::Failed(_) if turn.cancel.is_cancelled() => {
                        Ok(StopReason::Cancelled)
                    }
                    StreamError::Failed(error) => {
                        log::warn!("model call failed in session {}: {error}", turn.session_id);
                        Err(provider_failure(&error))
                    }
                };
            }
        };
        count_usage(turn, outcome.usage.as_ref(), state, sink.updates);
        let stop = match outcome.finish {
            Finish::ToolUse => None,
            Finish::EndTurn => Some(StopReason::EndTurn),
            Finish::MaxTokens => Some(StopReason::MaxTokens),
            Finish::Refusal => Some(StopReason::Refusal),
        };
        // An answer with nothing in it would end the turn with nothing
        // shown: say so, in the transcript as well.
        if assistant.is_none() && outcome.tool_calls.is_empty() && stop.is_some() {
            sink.begin_message();
            sink.updates.borrow_mut().chunk(
                false,
                &sink.message_id,
                "_The model returned an empty answer._",
            );
        }
        if !outcome.tool_calls.is_empty() || !outcome.provider_data.is_null() {
            let message = assistant.get_or_insert_with(|| Message::assistant("", ""));
            message.tool_calls = outcome.tool_calls.clone();
            // Signed thinking and encrypted reasoning go back verbatim.
            message.provider_data = outcome.provider_data.clone();
        }
        if let Some(message) = assistant {
            messages.push(message.clone());
            state.added.push(message);
        }
        if turn.cancel.is_cancelled() {
            answer_unrun(&outcome.tool_calls, &mut messages, state);
            return Ok(StopReason::Cancelled);
        }
        if let Some(stop) = stop {
            // Calls made by a model that then ran out of tokens or refused
            // do not run, but still need answers for the next request.
            answer_unrun(&outcome.tool_calls, &mut messages, state);
            return Ok(stop);
        }
        let mut runner = Runner {
            session_id: &turn.session_id,
            root: &turn.root,
            client: &turn.client,
            updates: sink.updates,
            cancel: &turn.cancel,
            mcp: turn.mcp.as_deref(),
            read_only: turn.read_only,
            policy: turn.policy,
            approvals: &mut state.approvals,
            processes: &turn.processes,
        };
        let mut results = Vec::new();
        let mut cancelled_at = None;
        for (index, call) in outcome.tool_calls.iter().enumerate() {
            let result = runner.run(call);
            results.push(Message::tool_result(&call.id, result.text));
            if result.cancelled {
                cancelled_at = Some(index + 1);
                break;
            }
        }
        for message in results {
            messages.push(message.clone());
            state.added.push(message);
        }
        if let Some(done) = cancelled_at {
            answer_unrun(&outcome.tool_calls[done..], &mut messages, state);
            return Ok(StopReason::Cancelled);
        }
    }
}

/// `/compact`: asks the model for a summary of the conversation (streamed
/// to the user), which then replaces the conversation. The transcript keeps
/// everything.
fn compact(turn: &Turn, sink: &mut UpdateSink, state: &mut State) -> Result<StopReason, RpcError> {
    let mut messages = turn.messages.clone();
    if messages.is_empty() {
        sink.begin_message();
        sink.updates.borrow_mut().chunk(
            false,
            &sink.message_id,
            "There is nothing to compact yet.",
        );
        return Ok(StopReason::EndTurn);
    }
    messages.push(Message::user(
        "Summarise our conversation so far for your own later use: the task, what was decided, what was done (files changed, commands run and their results), what is left, and any facts needed to continue. Be complete but concise; plain text.",
    ));
    sink.begin_message();
    let request = ModelRequest {
        session_id: &turn.session_id,
        model: &turn.model,
        system: &turn.system,
        messages: &messages,
        tools: &[],
        effort: turn.effort.as_deref(),
        max_output_tokens: turn.max_output_tokens,
    };
    let streamed = turn.provider.stream(&request, sink, &turn.cancel);
    let summary = sink.take_message().map(|m| m.text).unwrap_or_default();
    match streamed {
        Ok(outcome) => {
            count_usage(turn, outcome.usage.as_ref(), state, sink.updates);
            if summary.trim().is_empty() || turn.cancel.is_cancelled() {
                return Ok(StopReason::Cancelled);
            }
            state.replaced = Some(vec![Message::user(format!(
                "(This conversation was compacted. Summary of what came before:)\n{summary}"
            ))]);
            Ok(StopReason::EndTurn)
        }
        Err(StreamError::Cancelled) => Ok(StopReason::Cancelled),
        Err(StreamError::Failed(_)) if turn.cancel.is_cancelled() => Ok(StopReason::Cancelled),
        Err(StreamError::Failed(error)) => Err(provider_failure(&error)),
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
                "Authentication required: {}. Check the provider's API key (its variable or key file, or run `spindle setup`), then authenticate again.",
                error.message
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

/// Adds a finished model call's usage to the turn's and reports it; a call
/// without usage is counted as unknown.
fn count_usage(turn: &Turn, usage: Option<&Usage>, state: &mut State, updates: &RefCell<Updates>) {
    state.model_calls += 1;
    if let Some(usage) = usage {
        state.usage_reports += 1;
        add_usage(&mut state.usage, usage);
        report_usage(turn, usage, state, updates);
    }
}

/// Sends `usage_update` after a model call: how full the context is, and
/// what the session cost so far when the model has prices.
fn report_usage(turn: &Turn, usage: &Usage, state: &mut State, updates: &RefCell<Updates>) {
    let mut update = json!({
        "sessionUpdate": "usage_update",
        "used": usage.input_tokens + usage.output_tokens,
        "size": turn.context_window,
    });
    if let Some(price) = &turn.price {
        state.cost += cost_of(usage, price);
        update["cost"] = json!({
            "amount": ((turn.cost_before + state.cost) * 1e6).round() / 1e6,
            "currency": price.currency,
        });
    }
    updates.borrow_mut().send_live(update);
}

/// The price of one model call's tokens.
pub fn cost_of(usage: &Usage, price: &Price) -> f64 {
    let cached = usage.cached_tokens.min(usage.input_tokens) as f64;
    let fresh = usage.input_tokens as f64 - cached;
    let cached_price = price.cached_input.unwrap_or(price.input);
    (fresh * price.input + cached * cached_price + usage.output_tokens as f64 * price.output)
        / 1_000_000.0
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

//! `session/prompt`: checking the request, starting the turn worker, and
//! answering when it reports back.

pub(super) mod slash;
pub(super) mod turn_end;
pub(super) mod turn_start;

pub(in crate::agent) use turn_start::TurnStart;

use super::inbox_hold;
use crate::acp;
use crate::agent::common::content::{read_prompt, PromptInput};
use crate::agent::dispatcher::params::{decode, internal, not_found};
use crate::agent::dispatcher::session::{Session, StartSource, TurnSource};
use crate::agent::dispatcher::Dispatcher;
use crate::agent::turn::client::Client;
use crate::agent::turn::{
    Conversation, Io, Model, OnLimit, Opening, Rights, Start, Steps, Turn, TurnGoal, TurnKind,
    Window, Workspace,
};
use crate::cancel::CancelToken;
use crate::modes::Mode;
use crate::provider::trace::TraceContext;
use crate::provider::Message;
use crate::rpc::{RequestId, RpcError};
use serde_json::Value;
use std::sync::Arc;

/// The most characters of a client's `messageId`.
const MESSAGE_ID_CHARS: usize = 128;

/// The id the client gave its prompt (`messageId`, unstable in ACP), kept
/// as the user message's id: `_session/rewind` names the prompt by it.
fn client_message_id(params: &Value) -> Result<Option<String>, RpcError> {
    use crate::acp::spindle::bad;
    match params.get("messageId") {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(id))
            if !id.is_empty()
                && id.chars().count() <= MESSAGE_ID_CHARS
                && !id.chars().any(char::is_control) =>
        {
            Ok(Some(id.clone()))
        }
        Some(Value::String(_)) => Err(bad(
            "messageId",
            "must be 1 to 128 characters, none of them control characters",
        )),
        Some(_) => Err(bad("messageId", "must be a string")),
    }
}

/// The W3C trace context a prompt carries in `_meta` (root keys
/// `traceparent` and `tracestate`, as ACP reserves them), when valid; an
/// invalid one is ignored, said at debug level with the reason only
/// (the value itself stays out of the log).
fn trace_context(params: &Value, session_id: &str) -> Option<TraceContext> {
    let meta = params.get("_meta")?;
    let traceparent = meta.get("traceparent")?;
    let Some(traceparent) = traceparent.as_str() else {
        log::debug!("session {session_id}: the prompt's traceparent is not a string; ignored");
        return None;
    };
    let tracestate = match meta.get("tracestate") {
        None | Some(Value::Null) => None,
        Some(Value::String(state)) => Some(state.as_str()),
        Some(_) => {
            log::debug!("session {session_id}: the prompt's tracestate is not a string; left out");
            None
        }
    };
    match TraceContext::parse(traceparent, tracestate) {
        Ok(trace) => {
            log::info!(
                "session {session_id}: the prompt carries trace {}; its model requests send it on",
                trace.trace_id()
            );
            Some(trace)
        }
        Err(why) => {
            log::debug!("session {session_id}: the prompt's traceparent is ignored: {why}");
            None
        }
    }
}

/// Starts a turn for `blocks` in an idle session: a prompt's (with the
/// request to answer) or an inbox item's (the agent's own).
pub(super) fn start_turn(
    d: &mut Dispatcher,
    session_id: &str,
    blocks: &[Value],
    start: TurnStart,
) -> Result<(), RpcError> {
    start_traced_turn(d, session_id, blocks, start, None)
}

/// Starts a turn. An `Err` is answered at once; on success the worker's
/// report produces the answer.
pub(super) fn prompt(d: &mut Dispatcher, id: &RequestId, params: Value) -> Result<(), RpcError> {
    let request: acp::PromptRequest = decode(params.clone())?;
    let session_id = request.session_id;
    let message_id = client_message_id(&params)?;
    match d.session_mut(&session_id) {
        Some(session) if !session.is_closed() => {
            // A cancelled turn is about to answer: this prompt waits
            // for it instead of being refused.
            let winding_down = session
                .running
                .as_ref()
                .is_some_and(|running| running.cancel.is_cancelled());
            if winding_down && session.queued.is_none() {
                session.queued = Some((id.clone(), params));
                return Ok(());
            }
            if session.running.is_some() && session.turn_source() == TurnSource::Wait {
                return Err(RpcError::invalid_request(format!(
                    "session {session_id} is waiting for the model provider's limit to reset, and its last turn goes on then; steer it, or send session/cancel to stop waiting"
                )));
            }
            if session.running.is_some() {
                return Err(RpcError::invalid_request(format!(
                    "a prompt is already running in session {session_id}; wait for its answer or send session/cancel first"
                )));
            }
        }
        _ => {
            let stored = d.store()?.session(&session_id).map_err(internal)?;
            return Err(match stored {
                Some(_) => RpcError::invalid_request(format!(
                    "session {session_id:?} is not open in this process; open it with session/load or session/resume first"
                )),
                None => not_found(&session_id),
            });
        }
    }
    if d.closing() {
        return Err(RpcError::invalid_request("the agent is shutting down"));
    }
    // Explicit input: a paused inbox runs again after this turn.
    inbox_hold::unpause_inbox(d, &session_id);
    start_traced_turn(
        d,
        &session_id,
        &request.prompt,
        TurnStart {
            request: Some(id.clone()),
            source: TurnSource::Prompt,
            item: None,
            wait: None,
            message_id,
        },
        trace_context(&params, &session_id),
    )
}

/// `start_turn`, with the trace context every model request of the
/// turn carries.
fn start_traced_turn(
    d: &mut Dispatcher,
    session_id: &str,
    blocks: &[Value],
    start: TurnStart,
    trace: Option<TraceContext>,
) -> Result<(), RpcError> {
    let session_id = session_id.to_string();
    let cwd = d.checked(&session_id).cwd().to_path_buf();
    // A turn that goes on after a wait takes no input of its own.
    let mut input = match start.wait {
        Some(_) => PromptInput {
            text: String::new(),
            images: Vec::new(),
            stored_blocks: Vec::new(),
        },
        None => read_prompt(blocks, &cwd)?,
    };
    let text = input.text.clone();
    let registry = d.registry()?;
    let title_update = turn_start::claim(d, &session_id, &text)?;
    let (kind, model_text) = slash::resolve_command(d, &session_id, &input.text, &registry)?;
    let db = Some(d.db_path().to_path_buf());
    let capabilities = d.capabilities();
    let explicit_steps = d.options().max_steps;
    let agent = d.options().agent.clone();
    let profile = d.options().profile;
    let on_reject = d
        .options()
        .on_reject
        .or(registry.config.permissions.on_reject);
    let processes = Arc::new(turn_start::processes_for(d, &session_id, &registry));
    let sandbox_description = processes
        .launcher
        .as_deref()
        .map(|exe| crate::sandbox::support(exe).describe())
        .unwrap_or_else(|| "the Spindle binary cannot be found".into());
    let outbox = d.outbox();
    let (skills, hooks) = match d.session(&session_id) {
        Some(session) => (
            d.skills_of(session.cwd()).skills,
            d.hooks_of(session.cwd(), &registry),
        ),
        None => Default::default(),
    };
    let stream_writer = d.stream_writer();
    let Some(session) = d.session_mut(&session_id) else {
        return Err(not_found(&session_id));
    };
    let (entry, provider) = turn_start::model_of(&registry, session)?;
    let (effort, max_steps) = turn_start::effort_and_steps(session, &entry, explicit_steps);
    let lean = crate::agent::turn::is_lean(
        profile.or(registry.config.profile),
        session.window_of(&entry),
    );
    let system = turn_start::system_of(session, agent.as_deref(), &skills, lean);
    let session_start = match kind {
        TurnKind::Model => session.take_hook_start().map(StartSource::as_str),
        _ => None,
    };
    let goal = match &start.wait {
        Some(wait) if !wait.goal => None,
        _ => turn_start::goal_of(session, &kind, &input.text),
    };
    let title_update = title_update.map(|title| {
        session.title = Some(title.clone());
        crate::acp::SessionUpdate::SessionInfoUpdate {
            title: Some(title),
            updated_at: Some(crate::clock::now_rfc3339()),
        }
    });
    let fresh = match start.wait {
        Some(_) => 0,
        None => add_prompt(session, &kind, &mut input, model_text, start.source),
    };
    let (notices, rules) = turn_start::notices_and_rules(
        session,
        &registry,
        agent.as_deref(),
        &processes,
        &sandbox_description,
    );
    let cancel = CancelToken::new();
    let client = Client::new(
        session.id.clone(),
        capabilities,
        outbox.clone(),
        cancel.clone(),
    );
    let (live, epoch) = turn_start::begin(session, start.source);
    let turn = Turn {
        io: Io {
            session_id: session.id.clone(),
            request_id: start.request.clone(),
            inbox_item: start.item.clone(),
            live,
            cancel: cancel.clone(),
            writer: stream_writer,
            client,
            epoch,
            trace,
        },
        model: Model {
            provider,
            name: entry.model.clone(),
            effort,
            max_output_tokens: entry.sent_output_limit(
                registry
                    .config
                    .providers
                    .get(&entry.provider)
                    .map(|p| p.kind),
            ),
            price: entry.config.price.clone(),
            images: entry.images(),
        },
        window: Window {
            tokens: session.window_of(&entry),
            compact_at: registry.config.context.compact_at(),
            output_reserve: entry.output_limit().min(session.window_of(&entry) / 4),
            tool_output_cap: registry.config.context.tool_output_bytes(),
        },
        steps: Steps {
            max: max_steps,
            loops: registry.config.loops,
        },
        on_limit: OnLimit {
            fallbacks: turn_start::fallbacks_of(&registry, &entry),
            max_wait: std::time::Duration::from_secs(
                registry
                    .config
                    .max_wait_minutes
                    .unwrap_or(300)
                    .saturating_mul(60),
            ),
        },
        rights: Rights {
            policy: session.settings.policy,
            approvals: session.settings.approvals.clone(),
            on_reject: on_reject.unwrap_or_default(),
            rules: Arc::new(rules),
            agent,
            subagent: None,
            read_only: session.settings.mode == Mode::Plan,
            lean,
        },
        workspace: Workspace {
            root: session.cwd().to_path_buf(),
            db,
            checkpoints: registry.config.checkpoints.settings(),
            jobs: session.jobs().clone(),
            extra_roots: session.settings.extra_roots.clone(),
            environment: session.environment().clone(),
            config_path: Some(
                registry
                    .config_path
                    .clone()
                    .unwrap_or_else(crate::config::default_path),
            ),
            trust: registry.config.trust.clone(),
            scan_cache: session.scan_cache().clone(),
            mcp: session.mcp.clone(),
            skills: Arc::new(skills),
            hooks: Arc::new(hooks),
            processes,
        },
        start: Start {
            kind,
            wait: start.wait.clone(),
            spend_before: session.settings.spend,
        },
        conversation: Conversation {
            system,
            messages: session.messages.clone(),
            known: session.known,
            fresh,
            rewritten: false,
        },
        opening: Opening {
            session_start,
            prompt_blocks: input.stored_blocks,
            prompt_message_id: start.message_id.clone(),
            title_update,
            notices,
        },
        goal: TurnGoal {
            current: goal,
            delivery: session.settings.preset == crate::modes::Preset::Delivery,
            mode: session.settings.mode == Mode::Goal,
        },
    };
    turn_start::launch(d, &session_id, turn, start, cancel, fresh, outbox)
}

/// Adds the prompt to the conversation: as the answer of an `ask_user`
/// question that waits for it, or as the user's message. How many
/// messages it added.
fn add_prompt(
    session: &mut Session,
    kind: &TurnKind,
    input: &mut PromptInput,
    model_text: String,
    source: TurnSource,
) -> usize {
    // An `ask_user` question the editor could not ask waits for the
    // user's next prompt, which is the tool's result; anything else
    // that sends the conversation to the model (a follow-up, a job's
    // end, `/compact`) first closes it unanswered. Local commands and
    // undo leave it waiting.
    let before = session.messages.len();
    let sends = matches!(kind, TurnKind::Model | TurnKind::Compact(_));
    let plain_answer = source == TurnSource::Prompt
        && matches!(kind, TurnKind::Model)
        && input.images.is_empty()
        && model_text == input.text;
    let answered = match open_question(&session.messages).filter(|_| sends) {
        Some(calls) => {
            let answer = if plain_answer {
                format!("The user answered: {model_text}")
            } else {
                "The user did not answer; the conversation goes on below.".to_string()
            };
            for (index, call) in calls.iter().enumerate() {
                session.messages.push(Message::tool_result(
                    call,
                    if index == 0 {
                        answer.as_str()
                    } else {
                        "Not run: the turn ended before it ran."
                    },
                ));
            }
            plain_answer
        }
        None => false,
    };
    if matches!(kind, TurnKind::Model) && !answered {
        let mut user = Message::user(model_text);
        user.images = std::mem::take(&mut input.images);
        session.messages.push(user);
    }
    session.messages.len() - before
}

/// The calls left without a result at the end of the conversation when an
/// `ask_user` question is waiting for the user (the editor had no way to
/// ask it): the question's call first, then the calls after it, which
/// never ran. `None` when no question waits.
fn open_question(messages: &[Message]) -> Option<Vec<String>> {
    let at = messages
        .iter()
        .rposition(|m| m.role == crate::provider::Role::Assistant && !m.tool_calls.is_empty())?;
    let after = &messages[at + 1..];
    if after.iter().any(|m| m.role != crate::provider::Role::Tool) {
        return None;
    }
    let open: Vec<&crate::provider::ToolCallRequest> = messages[at]
        .tool_calls
        .iter()
        .filter(|call| {
            !after
                .iter()
                .any(|m| m.tool_call_id.as_deref() == Some(call.id.as_str()))
        })
        .collect();
    match open.first() {
        Some(first) if first.name == "ask_user" => {
            Some(open.iter().map(|call| call.id.clone()).collect())
        }
        _ => None,
    }
}

#[cfg(test)]
mod question_tests {
    use super::open_question;
    use crate::provider::{Message, ToolCallRequest};

    fn asking(calls: &[(&str, &str)]) -> Message {
        let mut message = Message::assistant("", "");
        message.tool_calls = calls
            .iter()
            .map(|(id, name)| ToolCallRequest {
                id: id.to_string(),
                name: name.to_string(),
                arguments: "{}".into(),
            })
            .collect();
        message
    }

    #[test]
    fn a_question_waits_only_when_its_call_is_the_first_left_open() {
        let user = Message::user("go");
        let calls = [("r", "read_file"), ("q", "ask_user"), ("w", "write_file")];
        let done = Message::tool_result("r", "text");
        assert_eq!(
            open_question(&[user.clone(), asking(&calls), done.clone()]),
            Some(vec!["q".to_string(), "w".to_string()])
        );
        // Answered, or followed by anything but results: nothing waits.
        let answer = Message::tool_result("q", "The user answered: x");
        let rest = Message::tool_result("w", "Not run");
        assert_eq!(
            open_question(&[asking(&calls), done.clone(), answer, rest]),
            None
        );
        assert_eq!(
            open_question(&[asking(&calls), done, Message::user("later")]),
            None
        );
        // The first open call is not the question.
        assert_eq!(open_question(&[asking(&calls)]), None);
        assert_eq!(open_question(&[user]), None);
    }
}

//! `session/prompt`: checking the request, starting the turn worker, and
//! answering when it reports back.

mod slash;
mod turn_end;
mod turn_start;

use super::close_interrupted_turn;
use crate::acp;
use crate::agent::common::content::read_prompt;
use crate::agent::common::prompt::system_prompt;
use crate::agent::dispatcher::params::{decode, internal, not_found};
use crate::agent::dispatcher::session::{title_from, RunningTurn};
use crate::agent::dispatcher::Dispatcher;
use crate::agent::turn::client::Client;
use crate::agent::turn::{self, Turn, TurnKind};
use crate::cancel::CancelToken;
use crate::modes::Mode;
use crate::modes::Policy;
use crate::provider::trace::TraceContext;
use crate::provider::Message;
use crate::rpc::{RequestId, RpcError};
use serde_json::{json, Value};
use std::sync::Arc;

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

/// How a turn starts: the prompt request it answers (none for the
/// agent's own), its `source` for events and status, and the inbox item
/// it dispatches.
pub(in crate::agent) struct TurnStart {
    pub request: Option<RequestId>,
    pub source: &'static str,
    pub item: Option<String>,
}

impl Dispatcher {
    /// Starts a turn. An `Err` is answered at once; on success the worker's
    /// report produces the answer.
    pub(in crate::agent) fn prompt(
        &mut self,
        id: &RequestId,
        params: Value,
    ) -> Result<(), RpcError> {
        let request: acp::PromptRequest = decode(params.clone())?;
        let session_id = request.session_id;
        match self.sessions.get_mut(&session_id) {
            Some(session) if !session.closed => {
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
                if session.running.is_some() {
                    return Err(RpcError::invalid_request(format!(
                        "a prompt is already running in session {session_id}; wait for its answer or send session/cancel first"
                    )));
                }
            }
            _ => {
                let stored = self.store()?.session(&session_id).map_err(internal)?;
                return Err(match stored {
                    Some(_) => RpcError::invalid_request(format!(
                        "session {session_id:?} is not open in this process; open it with session/load or session/resume first"
                    )),
                    None => not_found(&session_id),
                });
            }
        }
        if self.closing.is_some() {
            return Err(RpcError::invalid_request("the agent is shutting down"));
        }
        // Explicit input: a paused inbox runs again after this turn.
        self.unpause_inbox(&session_id);
        self.start_traced_turn(
            &session_id,
            &request.prompt,
            TurnStart {
                request: Some(id.clone()),
                source: "prompt",
                item: None,
            },
            trace_context(&params, &session_id),
        )
    }

    /// Starts a turn for `blocks` in an idle session: a prompt's (with the
    /// request to answer) or an inbox item's (the agent's own).
    pub(in crate::agent) fn start_turn(
        &mut self,
        session_id: &str,
        blocks: &[Value],
        start: TurnStart,
    ) -> Result<(), RpcError> {
        self.start_traced_turn(session_id, blocks, start, None)
    }

    /// `start_turn`, with the trace context every model request of the
    /// turn carries.
    fn start_traced_turn(
        &mut self,
        session_id: &str,
        blocks: &[Value],
        start: TurnStart,
        trace: Option<TraceContext>,
    ) -> Result<(), RpcError> {
        let session_id = session_id.to_string();
        let cwd = self.sessions[&session_id].cwd.clone();
        let input = read_prompt(blocks, &cwd)?;
        let text = input.text.clone();
        let registry = self.registry()?;
        let me = std::process::id();
        let (known_count, needs_title) = match self.sessions.get(&session_id) {
            Some(session) => (session.stored_messages, session.title.is_none()),
            None => return Err(not_found(&session_id)),
        };
        let store = self.store()?;
        // Another process may have deleted it (`session/delete`, or closed
        // it unused) while it was open here.
        if store.session(&session_id).map_err(internal)?.is_none() {
            return Err(RpcError::invalid_request(format!(
                "session {session_id} is no longer stored (another Spindle process deleted it); start a new session"
            ))
            .with_data(json!({"code": "session_deleted"})));
        }
        if let Err(holder) = store.acquire_lease(&session_id, me).map_err(internal)? {
            return Err(RpcError::invalid_request(format!(
                "session {session_id} is running a turn in another Spindle process (pid {holder}); wait for it to finish"
            ))
            .with_data(json!({"code": "session_busy", "holderPid": holder})));
        }
        // Holding the lease now, any turn still marked running belongs to a
        // process that died: it was cut off.
        for turn in store.running_turns(&session_id).map_err(internal)? {
            close_interrupted_turn(store, &session_id, turn)?;
        }
        // Another process may have added to the conversation meanwhile.
        let stored_count = store.message_count(&session_id).map_err(internal)?;
        let reloaded = if known_count != stored_count {
            Some(store.messages(&session_id).map_err(internal)?)
        } else {
            None
        };
        let title_update = if needs_title {
            let title = title_from(&text);
            store.set_title(&session_id, &title).map_err(internal)?;
            Some(title)
        } else {
            None
        };
        if let Some(messages) = reloaded {
            if let Some(session) = self.sessions.get_mut(&session_id) {
                session.messages = messages;
                session.known = None;
            }
        }
        let (kind, model_text) = self.resolve_command(&session_id, &input.text, &registry)?;
        let db = Some(self.db_path.clone());
        let capabilities = self.client.clone().unwrap_or_default();
        let explicit_steps = self.options.max_steps;
        let agent = self.options.agent.clone();
        let on_reject = self
            .options
            .on_reject
            .or(registry.config.permissions.on_reject);
        let processes = Arc::new(self.processes_for(&session_id, &registry));
        let sandbox_description = processes
            .launcher
            .as_deref()
            .map(|exe| crate::sandbox::support(exe).describe())
            .unwrap_or_else(|| "the Spindle binary cannot be found".into());
        let outbox = self.outbox();
        let Some(session) = self.sessions.get_mut(&session_id) else {
            return Err(not_found(&session_id));
        };
        // The session's model, or the default when it is gone from the
        // configuration.
        let entry = match registry.model(&session.model) {
            Some(entry) => entry.clone(),
            None => {
                let Some(entry) = registry
                    .default_model
                    .as_deref()
                    .and_then(|id| registry.model(id))
                else {
                    return Err(RpcError::invalid_params("no model is available"));
                };
                log::warn!("model {} is gone; using {}", session.model, entry.id);
                session.model = entry.id.clone();
                entry.clone()
            }
        };
        let Some(provider) = registry.provider(&entry.provider) else {
            return Err(RpcError::failed(format!(
                "The provider {} is not available: check its key and base URL (spindle setup, or the config file)",
                entry.provider
            )));
        };
        let effort = if session.effort == "auto" {
            let wanted = session.preset.default_effort();
            entry.efforts().iter().find(|e| *e == wanted).cloned()
        } else {
            Some(session.effort.clone())
        };
        let max_steps = if explicit_steps == 0 {
            session.preset.step_budget()
        } else {
            explicit_steps
        };
        let mut system = system_prompt(&session.cwd, crate::agent::turn::ENVIRONMENT_MARK);
        system.push_str("\n\n");
        system.push_str(session.preset.instructions());
        if !session.extra_roots.is_empty() {
            let roots: Vec<String> = session
                .extra_roots
                .iter()
                .map(|r| format!("- {}", r.display()))
                .collect();
            system.push_str(&format!(
                "\n\nThese folders are part of the workspace too (use absolute paths for them):\n{}",
                roots.join("\n")
            ));
        }
        if let Some(instructions) = agent.as_ref().and_then(|a| a.instructions.as_deref()) {
            system.push_str("\n\n");
            system.push_str(instructions.trim());
        }
        if session.mode == Mode::Goal {
            system.push_str("\n\n");
            system.push_str(crate::agent::common::goal::INSTRUCTIONS);
        }
        // In goal mode a prompt drafts, continues, answers or resumes the
        // goal; a finished, cancelled or exhausted goal takes an ordinary
        // turn (resume it, or select goal again for a new one).
        let goal = match (&kind, session.mode, session.goal.as_mut()) {
            (TurnKind::Model, Mode::Goal, Some(goal)) => {
                use crate::agent::common::goal::Status;
                match goal.status {
                    Status::Drafting => {
                        goal.objective = input.text.clone();
                        goal.status = Status::Running;
                        goal.started_at = Some(crate::clock::now_rfc3339());
                        Some(goal.clone())
                    }
                    Status::Running => Some(goal.clone()),
                    Status::Paused | Status::Blocked => {
                        goal.status = Status::Running;
                        goal.question = None;
                        Some(goal.clone())
                    }
                    _ => None,
                }
            }
            _ => None,
        };
        if goal.is_some() {
            session.goal_changed = true;
        }
        if let Ok(mut live) = session.live.lock() {
            live.goal = goal.as_ref().map(|g| g.json());
            live.goal_pause = false;
        }
        if session.mode == Mode::Plan {
            system.push_str(
                "\n\nThe session is in plan mode: explore with the read-only tools and write a step-by-step plan with todo_write. Do not change any file or run commands that change anything; the user will switch modes to carry the plan out.",
            );
        }
        let title_update = title_update.map(|title| {
            session.title = Some(title.clone());
            json!({
                "sessionUpdate": "session_info_update",
                "title": title,
                "updatedAt": crate::clock::now_rfc3339(),
            })
        });
        // An `ask_user` question the editor could not ask waits for the
        // user's next prompt, which is the tool's result; anything else
        // that sends the conversation to the model (a follow-up, a job's
        // end, `/compact`) first closes it unanswered. Local commands and
        // undo leave it waiting.
        let before = session.messages.len();
        let sends = matches!(kind, TurnKind::Model | TurnKind::Compact(_));
        let plain_answer = start.source == "prompt"
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
            user.images = input.images;
            session.messages.push(user);
        }
        let fresh = session.messages.len() - before;
        let mut notice_extra = None;
        // The sandbox policy without a sandbox says so once per session:
        // every command then asks.
        let notice = if session.policy == Policy::Sandbox
            && !processes.sandbox_available()
            && !session.sandbox_notice_shown
        {
            session.sandbox_notice_shown = true;
            Some(acp::fit::Notice::warning(
                "No sandbox is available here, so every command asks",
                format!("The sandbox: {sandbox_description}."),
            ))
        } else {
            None
        };
        // Workspace files Spindle would read but refuses are named, each
        // once (the model's prompt names the instruction files itself).
        let refused: Vec<_> =
            crate::agent::common::prompt::skipped_files(&session.cwd, self.options.commands_dir())
                .into_iter()
                .filter(|skipped| !session.refused_shown.contains(&skipped.path))
                .collect();
        let refused_notice = (!refused.is_empty()).then(|| {
            let lines: Vec<String> = refused
                .iter()
                .map(|skipped| format!("- {}", skipped.describe()))
                .collect();
            session
                .refused_shown
                .extend(refused.into_iter().map(|skipped| skipped.path));
            acp::fit::Notice::warning(
                "Some of the workspace's files are left out",
                lines.join("\n"),
            )
        });
        // Lasting rules: the user's (with their answers for this project)
        // and the project's own, which only tighten unless trusted.
        let project_key = session.cwd.display().to_string();
        let mine = registry.config.permissions.projects.get(&project_key);
        // The agent file's rules count as the user's (they chose the file).
        let mut user_rules = agent
            .as_ref()
            .map(|a| a.permissions.clone())
            .unwrap_or_default();
        user_rules.extend(registry.config.permissions.rules.clone());
        user_rules.extend(mine.map(|p| p.rules.clone()).unwrap_or_default());
        let project_rules = match crate::config::project_rules(&session.cwd) {
            Ok(rules) => rules,
            Err(problem) => {
                log::warn!("{problem}");
                notice_extra = Some(acp::fit::Notice::warning(
                    "The workspace's permission rules are ignored",
                    format!("They cannot be used: {problem}"),
                ));
                Vec::new()
            }
        };
        let rules = crate::policy::rules::RuleSet::new(
            user_rules,
            project_rules,
            mine.is_some_and(|p| p.trusted),
        );
        // A policy above `auto` chosen at start is said once, first.
        let notices: Vec<acp::fit::Notice> = [
            session.start_notice.take(),
            notice,
            refused_notice,
            notice_extra,
        ]
        .into_iter()
        .flatten()
        .collect();
        let cancel = CancelToken::new();
        let client = Client::new(
            session.id.clone(),
            capabilities,
            outbox.clone(),
            cancel.clone(),
        );
        session.epoch += 1;
        session.turn_source = start.source;
        session.turn_started_at = Some(crate::clock::now_rfc3339());
        let live = session.live.clone();
        if let Ok(mut live) = live.lock() {
            live.health = "ok";
            live.health_error = None;
        }
        let epoch = session.epoch;
        let turn = Turn {
            session_id: session.id.clone(),
            request_id: start.request.clone(),
            inbox_item: start.item.clone(),
            live,
            root: session.cwd.clone(),
            system,
            messages: session.messages.clone(),
            provider,
            cancel: cancel.clone(),
            writer: self.stream_writer.clone(),
            client,
            policy: session.policy,
            approvals: session.approvals.clone(),
            max_steps,
            db,
            prompt_blocks: input.stored_blocks,
            title_update,
            model: entry.model.clone(),
            effort,
            max_output_tokens: entry.config.max_output_tokens,
            context_window: entry.context_window(),
            compact_at: registry.config.context.compact_at(),
            output_reserve: entry.output_limit().min(entry.context_window() / 4),
            tool_output_cap: registry.config.context.tool_output_bytes(),
            known: session.known,
            on_reject: on_reject.unwrap_or_default(),
            checkpoints: registry.config.checkpoints.settings(),
            delivery: session.preset == crate::modes::Preset::Delivery,
            goal_mode: session.mode == Mode::Goal,
            jobs: session.jobs.clone(),
            epoch,
            goal,
            rules: Arc::new(rules),
            agent,
            subagent: None,
            extra_roots: session.extra_roots.clone(),
            environment: session.environment.clone(),
            config_path: Some(
                registry
                    .config_path
                    .clone()
                    .unwrap_or_else(crate::config::default_path),
            ),
            scan_cache: session.scan_cache.clone(),
            price: entry.config.price.clone(),
            cost_before: session.cost,
            read_only: session.mode == Mode::Plan,
            images: entry.images(),
            kind,
            mcp: session.mcp.clone(),
            processes,
            notices,
            fresh,
            trace,
        };
        // The turn's `running` event goes out before any of its updates.
        self.event(
            &session_id,
            "turn",
            json!({"state": "running", "epoch": epoch, "source": start.source, "outcome": null}),
        );
        self.goal_changed(&session_id);
        let Some(session) = self.sessions.get_mut(&session_id) else {
            return Err(not_found(&session_id));
        };
        match turn::spawn(turn, outbox) {
            Ok(handle) => {
                session.running = Some(RunningTurn {
                    request_id: start.request.clone(),
                    cancel,
                    handle,
                });
                Ok(())
            }
            Err(err) => {
                if let Some(session) = self.sessions.get_mut(&session_id) {
                    let kept = session.messages.len().saturating_sub(fresh);
                    session.messages.truncate(kept);
                }
                if let Ok(store) = self.store() {
                    let _ = store.release_lease(&session_id, me);
                }
                Err(RpcError::internal(format!("cannot start the turn: {err}")))
            }
        }
    }
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

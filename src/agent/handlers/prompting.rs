//! `session/prompt`: checking the request, starting the turn worker, and
//! answering when it reports back.

use super::close_interrupted_turn;
use crate::acp;
use crate::agent::common::commands::{self, Builtin, Kind};
use crate::agent::common::content::read_prompt;
use crate::agent::common::models::Registry;
use crate::agent::common::prompt::{skipped_files, system_prompt};
use crate::agent::dispatcher::params::{decode, internal, not_found};
use crate::agent::dispatcher::session::{title_from, RunningTurn};
use crate::agent::dispatcher::Dispatcher;
use crate::agent::turn::client::Client;
use crate::agent::turn::processes::Processes;
use crate::agent::turn::report::{Rewind, TurnEnd};
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
        let refused: Vec<_> = skipped_files(&session.cwd, self.options.commands_dir())
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

    pub(in crate::agent) fn on_turn_end(&mut self, end: TurnEnd) {
        self.forget_requests_of(&end.session_id);
        let mut settings = None;
        let mut remove = false;
        if let Some(session) = self.sessions.get_mut(&end.session_id) {
            if let Some(running) = session.running.take() {
                let _ = running.handle.join();
            }
            match end.replaced {
                Some(messages) => session.messages = messages,
                None => session.messages.extend(end.added),
            }
            session.known = end.known;
            session.add_usage(&end.usage);
            session.cost += end.cost;
            session.model_calls += end.model_calls as u64;
            if !end.priced {
                session.unpriced_calls += end.model_calls as u64;
            }
            session.approvals = end.approvals;
            if let Some(goal) = end.goal.clone() {
                session.goal = Some(goal);
                session.goal_changed = true;
            }
            // Steers the turn never reached stay queued (they are still
            // pending in the store), ahead of the follow-ups. Its usage is
            // the session's now.
            if let Ok(mut live) = session.live.lock() {
                live.steers.clear();
                live.usage = Default::default();
                live.cost = 0.0;
            }
            settings = Some(session.settings_json());
            remove = session.closed;
        }
        if remove {
            self.sessions.remove(&end.session_id);
        }
        if let Ok(store) = self.store() {
            if let Ok(count) = store.message_count(&end.session_id) {
                if let Some(session) = self.sessions.get_mut(&end.session_id) {
                    session.stored_messages = count;
                }
            }
        }
        if let Ok(store) = self.store() {
            if let Some(settings) = &settings {
                if let Err(error) = store.save_settings(&end.session_id, settings) {
                    log::warn!(
                        "cannot store the settings of session {}: {error}",
                        end.session_id
                    );
                }
            }
            if let Err(error) = store.release_lease(&end.session_id, std::process::id()) {
                log::warn!(
                    "cannot release the lease of session {}: {error}",
                    end.session_id
                );
            }
        }
        // The turn's usage rides in `_meta`: the stable schema has no
        // usage field on the prompt response.
        let mut usage = json!({
            "inputTokens": end.usage.input_tokens,
            "outputTokens": end.usage.output_tokens,
            "cachedReadTokens": end.usage.cached_tokens,
            "thoughtTokens": end.usage.reasoning_tokens,
            "totalTokens": end.usage.input_tokens + end.usage.output_tokens,
            "cost": end.cost,
        });
        if end.usage_unknown {
            // The provider never said: unknown is null, not zero.
            for key in [
                "inputTokens",
                "outputTokens",
                "cachedReadTokens",
                "thoughtTokens",
                "totalTokens",
            ] {
                usage[key] = Value::Null;
            }
        }
        let queued = self
            .sessions
            .get_mut(&end.session_id)
            .and_then(|session| session.queued.take());
        let turn_usage = self
            .client
            .as_ref()
            .is_some_and(|client| client.meta.spindle.prompt_usage)
            .then(|| prompt_usage(&end.usage, end.usage_unknown, end.usage_whole))
            .flatten();
        let result = end.result.map(|stop_reason| {
            let mut response =
                serde_json::to_value(acp::PromptResponse { stop_reason }).unwrap_or_default();
            response["_meta"] = json!({"spindle": {"usage": usage}});
            if let Some(turn_usage) = turn_usage {
                response["usage"] = turn_usage;
            }
            response
        });
        // The item this turn dispatched is applied (or failed), the inbox
        // hears of it, then the turn's `idle` event, after its last update
        // and before its answer.
        let outcome = match &result {
            Ok(response) => response["stopReason"]
                .as_str()
                .unwrap_or("end_turn")
                .to_string(),
            Err(_) => "error".to_string(),
        };
        self.after_turn_inbox(
            &end.session_id,
            end.dispatched.as_deref(),
            &end.applied,
            &outcome,
        );
        if let Some(session) = self.sessions.get_mut(&end.session_id) {
            session.last_outcome = Some(outcome.clone());
            let (epoch, source) = (session.epoch, session.turn_source);
            self.event(
                &end.session_id,
                "usage",
                json!({"inputTokens": usage["inputTokens"], "outputTokens": usage["outputTokens"]}),
            );
            self.event(
                &end.session_id,
                "turn",
                json!({"state": "idle", "epoch": epoch, "source": source, "outcome": outcome}),
            );
        }
        self.goal_changed(&end.session_id);
        self.queued_reload(&end.session_id);
        if let Some(request_id) = &end.request_id {
            self.respond(request_id, result);
        }
        if let Some((id, params)) = queued {
            if let Err(error) = self.prompt(&id, params) {
                self.respond(&id, Err(error));
            }
            return;
        }
        // An ordinary end: the next follow-up starts at once; any other
        // end pauses the inbox so the user looks first.
        if outcome == "end_turn" {
            self.dispatch_next(&end.session_id);
        } else if outcome != "end_turn" && self.has_waiting_items(&end.session_id) {
            self.pause_inbox(&end.session_id);
        }
    }
}

impl Dispatcher {
    /// The answer of a local command (`/help`, `/cost`, `/model`, `/mode`).
    pub(in crate::agent) fn local_reply(
        &mut self,
        session_id: &str,
        text: &str,
        registry: &Registry,
    ) -> Result<String, RpcError> {
        match self.resolve_command(session_id, text, registry)? {
            (TurnKind::Local(reply), _) => Ok(reply),
            _ => Err(RpcError::internal("the operation is not a local one")),
        }
    }

    /// What a prompt starting with `/name` does: a custom command or `/init`
    /// becomes the model's prompt; `/compact` summarises; the others are
    /// answered by Spindle itself. Anything else is an ordinary prompt.
    pub(in crate::agent) fn resolve_command(
        &mut self,
        session_id: &str,
        text: &str,
        registry: &Registry,
    ) -> Result<(TurnKind, String), RpcError> {
        let Some((name, arguments)) = commands::invocation(text) else {
            return Ok((TurnKind::Model, text.to_string()));
        };
        let cwd = self.sessions[session_id].cwd.clone();
        let available = commands::available(&cwd, self.options.commands_dir());
        let Some(command) = available.iter().find(|c| c.name == name) else {
            return Ok((TurnKind::Model, text.to_string()));
        };
        let builtin = match &command.kind {
            Kind::Custom { body, .. } => {
                return Ok((TurnKind::Model, commands::expand(body, arguments)))
            }
            Kind::Builtin(builtin) => *builtin,
        };
        let reply = match builtin {
            Builtin::Init => {
                let mut prompt = commands::INIT_PROMPT.to_string();
                if !arguments.is_empty() {
                    prompt.push_str("\n\n");
                    prompt.push_str(arguments);
                }
                return Ok((TurnKind::Model, prompt));
            }
            Builtin::Compact => {
                return Ok((TurnKind::Compact(arguments.to_string()), text.to_string()))
            }
            Builtin::Reload => match self.reload_now(session_id) {
                Ok(()) => {
                    // The prompt's answer comes from a turn, later: the
                    // commands go now.
                    self.send_commands(session_id);
                    "Reloaded the configuration and the commands.".to_string()
                }
                Err(error) => format!(
                    "The reload failed; the old settings stay. {}",
                    error.message
                ),
            },
            Builtin::Undo => return Ok((TurnKind::Rewind(Rewind::Undo(1)), text.to_string())),
            Builtin::Redo => return Ok((TurnKind::Rewind(Rewind::Redo), text.to_string())),
            Builtin::Rewind => {
                let steps = match arguments.trim() {
                    "" => 1,
                    number => match number.parse::<usize>() {
                        Ok(steps) if (1..=1000).contains(&steps) => steps,
                        _ => {
                            return Ok((
                                TurnKind::Local(format!(
                                "`/rewind` takes a number of turns from 1 to 1000, not `{number}`."
                            )),
                                text.to_string(),
                            ))
                        }
                    },
                };
                return Ok((TurnKind::Rewind(Rewind::Undo(steps)), text.to_string()));
            }
            Builtin::Help => {
                let mut reply = String::from("Commands:\n");
                for command in &available {
                    let hint = command
                        .hint
                        .as_deref()
                        .map(|h| format!(" {h}"))
                        .unwrap_or_default();
                    reply.push_str(&format!(
                        "- `/{}{hint}` — {}\n",
                        command.name, command.description
                    ));
                }
                reply
            }
            Builtin::Cost => {
                let session = &self.sessions[session_id];
                let (usage, spent) = session.usage_so_far();
                let mut reply = format!(
                    "Tokens so far: {} input ({} cached), {} output ({} reasoning).",
                    usage.input_tokens,
                    usage.cached_tokens,
                    usage.output_tokens,
                    usage.reasoning_tokens
                );
                match registry
                    .model(&session.model)
                    .and_then(|m| m.config.price.clone())
                {
                    Some(price) => {
                        reply.push_str(&format!(" Cost: {spent:.4} {}.", price.currency))
                    }
                    None => reply.push_str(
                        " The model has no price configured, so there is no cost to show.",
                    ),
                }
                let window = registry.model(&session.model).map(|m| m.context_window());
                if let (Some(known), Some(window)) = (session.known, window) {
                    let left = 100u64.saturating_sub(known.tokens * 100 / window.max(1));
                    reply.push_str(&format!(
                        " Context: about {} of {} tokens in use ({left}% left).",
                        known.tokens, window
                    ));
                }
                reply
            }
            Builtin::Allow => self.allow_command(session_id, registry, arguments),
            Builtin::Model => self.command_option(session_id, registry, "model", arguments),
            Builtin::Mode => self.command_option(session_id, registry, "mode", arguments),
            Builtin::Clear => {
                if let Some(session) = self.sessions.get_mut(session_id) {
                    session.messages.clear();
                    session.known = None;
                }
                self.store()?
                    .replace_messages(session_id, &[])
                    .map_err(internal)?;
                "Started a fresh conversation: the model no longer sees the earlier messages (they stay in the transcript).".to_string()
            }
        };
        Ok((TurnKind::Local(reply), text.to_string()))
    }

    /// `/allow edits` and `/allow command WORDS`: the broad answers a
    /// permission request offers only to a client that asked for them,
    /// given by the user in words. `--project` saves the rule for the
    /// workspace in the user's config; without it, it lasts the session.
    /// No argument lists what this session allows.
    fn allow_command(&mut self, session_id: &str, registry: &Registry, arguments: &str) -> String {
        use crate::policy::rules::{self, Decision, Rule, ToolClass};
        const USAGE: &str = "Use `/allow edits` (every edit inside the workspace) or `/allow command WORDS` (commands starting with those words, e.g. `/allow command cargo test`); add `--project` to save it for this workspace.";
        let mut words: Vec<&str> = arguments.split_whitespace().collect();
        let project = words.last() == Some(&"--project");
        if project {
            words.pop();
        }
        let rule = match words.split_first() {
            None => {
                let session = &self.sessions[session_id];
                let allowed: Vec<String> = session
                    .approvals
                    .rules
                    .iter()
                    .filter(|rule| rule.decision == Decision::Allow)
                    .map(rules::describe)
                    .collect();
                let exact = session.approvals.allowed.len();
                let listed = if allowed.is_empty() {
                    "No rule of this session allows anything".to_string()
                } else {
                    format!("This session allows {}", allowed.join(", "))
                };
                return format!("{listed}; {exact} exact calls were allowed always. {USAGE}");
            }
            Some((&"edits", [])) => Rule::path(ToolClass::Edit, "**", Decision::Allow),
            Some((&"command", prefix)) if !prefix.is_empty() => {
                let rule = Rule::command(prefix.join(" "), Decision::Allow);
                if let Err(problem) = rule.check() {
                    return format!("That command pattern cannot be used: {problem}. {USAGE}");
                }
                rule
            }
            _ => return USAGE.to_string(),
        };
        let what = rules::describe(&rule);
        let Some(session) = self.sessions.get_mut(session_id) else {
            return USAGE.to_string();
        };
        let mut reply = format!("Allowed {what} for the rest of this session.");
        if project {
            let path = registry
                .config_path
                .clone()
                .unwrap_or_else(crate::config::default_path);
            let root = session.cwd.display().to_string();
            match crate::config::add_project_rule(&path, &root, rule.clone()) {
                Ok(()) => {
                    reply = format!(
                        "Allowed {what} in this workspace, saved in {}.",
                        path.display()
                    )
                }
                Err(error) => {
                    reply = format!("{reply} It could not be saved for the project: {error}.")
                }
            }
        }
        session.approvals.rules.push(rule);
        self.settings_changed(session_id);
        reply
    }

    /// `/model NAME` and `/mode NAME`: the same change as the config option,
    /// with its notifications; the reply says what happened.
    fn command_option(
        &mut self,
        session_id: &str,
        registry: &Registry,
        id: &str,
        value: &str,
    ) -> String {
        let value = if id == "model" {
            registry
                .models
                .iter()
                .find(|m| m.id == value || m.model == value)
                .map(|m| m.id.clone())
                .unwrap_or_else(|| value.to_string())
        } else {
            value.to_string()
        };
        if value.is_empty() {
            let current = match id {
                "model" => self.sessions[session_id].model.clone(),
                _ => self.sessions[session_id].mode.id().to_string(),
            };
            return format!(
                "The {id} is {current}. Give a new one after the command, e.g. `/{id} {}`.",
                if id == "model" {
                    "provider/model"
                } else {
                    "plan"
                }
            );
        }
        match self.change_option(session_id, registry, id, &value) {
            Ok(()) => format!("The {id} is now {value}."),
            Err(error) => {
                let choices = if id == "model" {
                    registry
                        .models
                        .iter()
                        .map(|m| m.id.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                } else {
                    "normal, plan".into()
                };
                let reason = error.message.trim_start_matches("Invalid params: ");
                format!("{reason}. The choices are: {choices}.")
            }
        }
    }
}

impl Dispatcher {
    /// How the commands of a session's next turn start: its private folder
    /// for logs (made now), the credentials to remove, the sandbox.
    pub(in crate::agent) fn processes_for(
        &self,
        session_id: &str,
        registry: &Registry,
    ) -> Processes {
        let session_dir = match crate::process::logs::prepare_session_dir(&self.db_path, session_id)
        {
            Ok(dir) => Some(dir),
            Err(error) => {
                log::warn!("commands of session {session_id} run without logs: {error}");
                None
            }
        };
        let launcher = std::env::current_exe().ok();
        let sandbox = launcher
            .as_deref()
            .is_some_and(|exe| crate::sandbox::support(exe).available());
        let temp_dir = crate::process::logs::prepare_temp_dir(&self.db_path, session_id)
            .map_err(|error| log::warn!("no private temp folder for the sandbox: {error}"))
            .ok();
        // Sandboxed commands may read outside the workspace, but not
        // Spindle's credentials, config (MCP servers' env and headers),
        // sessions or logs.
        let mut hidden: Vec<std::path::PathBuf> = registry
            .config
            .providers
            .values()
            .filter_map(|provider| provider.api_key_file.clone())
            .collect();
        let config_path = registry
            .config_path
            .clone()
            .unwrap_or_else(crate::config::default_path);
        hidden.push(crate::config::managed_keys_dir(&config_path));
        hidden.push(config_path);
        let with_suffixes = |path: &std::path::Path, suffixes: &[&str]| {
            suffixes
                .iter()
                .map(|suffix| {
                    let mut name = path.as_os_str().to_os_string();
                    name.push(suffix);
                    std::path::PathBuf::from(name)
                })
                .collect::<Vec<_>>()
        };
        hidden.extend(with_suffixes(
            &self.db_path,
            &["", "-wal", "-shm", "-journal"],
        ));
        hidden.push(crate::process::logs::root(&self.db_path));
        // The agent's own log (and the one rotation keeps).
        for log in [&self.options.log_file, &registry.config.log_file]
            .into_iter()
            .flatten()
        {
            hidden.extend(with_suffixes(log, &["", ".1"]));
        }
        // The launcher resolves them in the command's folder: a relative
        // one is meant from here.
        let hidden: Vec<std::path::PathBuf> = hidden
            .into_iter()
            .filter_map(|path| std::path::absolute(path).ok())
            .collect();
        // A page of read_file always fits a tool result whole, so reading
        // a kept output never spills again.
        let mut file_limits = registry.config.limits.files();
        file_limits.page = file_limits.page.min(
            registry
                .config
                .context
                .tool_output_bytes()
                .saturating_sub(1024),
        );
        Processes {
            file_limits,
            output_cap: crate::config::Limits::or(
                registry.config.limits.command_output_bytes,
                crate::tools::COMMAND_OUTPUT_CAP,
            ),
            secrets: registry.secrets.clone(),
            temp_dir,
            hidden,
            session_dir,
            log_cap: registry
                .config
                .tools
                .command_log_bytes
                .unwrap_or(crate::process::logs::DEFAULT_LOG_CAP),
            launcher,
            sandbox,
            extra_roots: self
                .sessions
                .get(session_id)
                .map(|s| s.extra_roots.clone())
                .unwrap_or_default(),
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

/// The turn's usage in the unstable `Usage` shape of the prompt's answer
/// (`_meta.spindle.promptUsage`): `None` unless every model call said
/// what it used, and a finer count only when every call gave it.
fn prompt_usage(usage: &crate::provider::Usage, unknown: bool, whole: bool) -> Option<Value> {
    if unknown || !whole {
        return None;
    }
    let mut shape = json!({
        "totalTokens": usage.input_tokens + usage.output_tokens,
        "inputTokens": usage.input_tokens,
        "outputTokens": usage.output_tokens,
    });
    let finer = [
        (
            "thoughtTokens",
            usage.reasoning_tokens,
            usage.unreported.reasoning,
        ),
        (
            "cachedReadTokens",
            usage.cached_tokens,
            usage.unreported.cached,
        ),
        (
            "cachedWriteTokens",
            usage.cache_write_tokens,
            usage.unreported.cache_write,
        ),
    ];
    for (key, count, unreported) in finer {
        if unreported == 0 {
            shape[key] = json!(count);
        }
    }
    Some(shape)
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

//! How a turn starts (`TurnStart`, which the handlers that start turns
//! fill in) and the stages of that start (`start_traced_turn` in
//! `prompting.rs` runs them): the session claimed, its model, system
//! prompt, goal, notices and rules, how its commands start, and the
//! worker launched. It names nothing of `prompting.rs`, its caller.

use crate::acp;
use crate::agent::common::models::Registry;
use crate::agent::common::prompt::system_prompt_with;
use crate::agent::dispatcher::params::{internal, not_found};
use crate::agent::dispatcher::session::title_from;
use crate::agent::dispatcher::session::RunningTurn;
use crate::agent::dispatcher::session::Session;
use crate::agent::dispatcher::session::TurnSource;
use crate::agent::dispatcher::Dispatcher;
use crate::agent::handlers::events;
use crate::agent::handlers::goals;
use crate::agent::handlers::interrupted::close_interrupted_turn;
use crate::agent::turn::processes::Processes;
use crate::agent::turn::report::Outbox;
use crate::agent::turn::TurnKind;
use crate::agent::turn::{self, Turn};
use crate::cancel::CancelToken;
use crate::modes::Mode;
use crate::modes::Policy;
use crate::rpc::{RequestId, RpcError};
use serde_json::json;
use std::sync::Arc;

/// How a turn starts: the prompt request it answers (none for the
/// agent's own), its `source` for events and status, and the inbox item
/// it dispatches.
pub(in crate::agent) struct TurnStart {
    pub request: Option<RequestId>,
    pub source: TurnSource,
    pub item: Option<String>,
    /// A wait a stopped process left (`source` is `wait`): the turn
    /// takes no input of its own.
    pub wait: Option<crate::agent::turn::Wait>,
    /// The id the client gave its prompt (`messageId`), kept as the
    /// user message's id instead of one of Spindle's.
    pub message_id: Option<String>,
}

/// How the commands of a session's next turn start: its private folder
/// for logs (made now), the credentials to remove, the sandbox.
pub(in crate::agent::handlers) fn processes_for(
    d: &Dispatcher,
    session_id: &str,
    registry: &Registry,
) -> Processes {
    let session_dir = match crate::process::logs::prepare_session_dir(d.db_path(), session_id) {
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
    let temp_dir = crate::process::logs::prepare_temp_dir(d.db_path(), session_id)
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
    // `serve`'s token file and TLS key.
    hidden.extend(d.options().secret_files.iter().cloned());
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
        d.db_path(),
        &["", "-wal", "-shm", "-journal"],
    ));
    hidden.push(crate::process::logs::root(d.db_path()));
    // Every line typed in `spindle chat`, of every project.
    hidden.push(d.db_path().with_file_name("chat_history"));
    // The agent's own log (and the one rotation keeps).
    for log in [&d.options().log_file, &registry.config.log_file]
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
        extra_roots: d
            .session(session_id)
            .map(|s| s.settings.extra_roots.clone())
            .unwrap_or_default(),
        shell: registry.config.shell(),
    }
}

/// Sends the turn's `running` event (before any of its updates) and
/// starts its worker; when the thread cannot start, the prompt leaves
/// the conversation and the lease is given back.
pub(super) fn launch(
    d: &mut Dispatcher,
    session_id: &str,
    turn: Turn,
    start: TurnStart,
    cancel: CancelToken,
    fresh: usize,
    outbox: Outbox,
) -> Result<(), RpcError> {
    let me = std::process::id();
    // The turn's `running` event goes out before any of its updates.
    events::event(
        d,
        session_id,
        "turn",
        json!({"state": "running", "epoch": turn.io.epoch, "source": start.source.as_str(), "outcome": null}),
    );
    goals::goal_changed(d, session_id);
    let Some(session) = d.session_mut(session_id) else {
        return Err(not_found(session_id));
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
            if let Some(session) = d.session_mut(session_id) {
                let kept = session.messages.len().saturating_sub(fresh);
                session.messages.truncate(kept);
            }
            if let Ok(store) = d.store() {
                let _ = store.release_lease(session_id, me);
            }
            Err(RpcError::internal(format!("cannot start the turn: {err}")))
        }
    }
}

/// Takes the session for a turn: still stored, its lease held
/// (turns a dead process left running closed), the conversation
/// reloaded when another process added to it, and its title set from
/// the first prompt. The new title, to show.
pub(super) fn claim(
    d: &mut Dispatcher,
    session_id: &str,
    text: &str,
) -> Result<Option<String>, RpcError> {
    let session_id = session_id.to_string();
    let me = std::process::id();
    let (known_count, needs_title) = match d.session(&session_id) {
        Some(session) => (session.stored_messages, session.title.is_none()),
        None => return Err(not_found(&session_id)),
    };
    let store = d.store()?;
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
    // A title already stored (the client's `session/set_title`, in
    // any process) is never replaced by an automatic one.
    let mut kept_title = None;
    let title_update = if needs_title {
        let title = title_from(text);
        if store
            .set_title_if_unset(&session_id, &title)
            .map_err(internal)?
        {
            Some(title)
        } else {
            kept_title = store
                .session(&session_id)
                .map_err(internal)?
                .and_then(|row| row.title);
            None
        }
    } else {
        None
    };
    if let (Some(title), Some(session)) = (kept_title, d.session_mut(&session_id)) {
        session.title = Some(title);
    }
    if let Some(messages) = reloaded {
        if let Some(session) = d.session_mut(&session_id) {
            session.messages = messages;
            session.known = None;
        }
    }
    Ok(title_update)
}

/// The session's model (or the default when it is gone from the
/// configuration) and its provider.
pub(super) fn model_of(
    registry: &Registry,
    session: &mut Session,
) -> Result<
    (
        crate::agent::common::models::ModelEntry,
        Arc<dyn crate::provider::Provider>,
    ),
    RpcError,
> {
    // The session's model, or the default when it is gone from the
    // configuration.
    let entry = match registry.model(&session.settings.model) {
        Some(entry) => entry.clone(),
        None => {
            let Some(entry) = registry
                .default_model
                .as_deref()
                .and_then(|id| registry.model(id))
            else {
                return Err(RpcError::invalid_params("no model is available"));
            };
            log::warn!(
                "model {} is gone; using {}",
                session.settings.model,
                entry.id
            );
            session.settings.model = entry.id.clone();
            entry.clone()
        }
    };
    let Some(provider) = registry.provider(&entry.provider) else {
        return Err(RpcError::failed(format!(
            "The provider {} is not available: check its key and base URL (spindle setup, or the config file)",
            entry.provider
        )));
    };
    Ok((entry, provider))
}

/// The turn's system prompt: the base with the environment's mark, the
/// preset's instructions, the extra roots, the agent file's and the
/// mode's instructions; with `lean`, the short base. A client's system
/// prompt opens it (`override`) or ends it (`append`).
pub(super) fn system_of(
    session: &Session,
    agent: Option<&crate::agentfile::AgentSpec>,
    skills: &[crate::agent::common::skills::Skill],
    lean: bool,
) -> String {
    let client = session.settings.system_prompt.as_ref();
    let mut system = system_prompt_with(
        session.cwd(),
        crate::agent::turn::ENVIRONMENT_MARK,
        lean,
        client,
    );
    let listing = crate::agent::common::skills::listing(skills);
    if !listing.is_empty() {
        system.push_str("\n\n");
        system.push_str(&listing);
    }
    system.push_str("\n\n");
    system.push_str(session.settings.preset.instructions());
    if !session.settings.extra_roots.is_empty() {
        let roots: Vec<String> = session
            .settings
            .extra_roots
            .iter()
            .map(|r| format!("- {}", r.display()))
            .collect();
        system.push_str(&format!(
            "\n\nThese folders are part of the workspace too (use absolute paths for them):\n{}",
            roots.join("\n")
        ));
    }
    if let Some(instructions) = agent.and_then(|a| a.instructions.as_deref()) {
        system.push_str("\n\n");
        system.push_str(instructions.trim());
    }
    if session.settings.mode == Mode::Goal {
        system.push_str("\n\n");
        system.push_str(crate::agent::common::goal::INSTRUCTIONS);
    }
    if session.settings.mode == Mode::Plan {
        system.push_str(
            "\n\nThe session is in plan mode: explore with the read-only tools and write a step-by-step plan with todo_write. Do not change any file or run commands that change anything; the user will switch modes to carry the plan out.",
        );
    }
    if let Some(closing) = crate::agent::common::client_prompt::closing(client) {
        system.push_str("\n\n");
        system.push_str(&closing);
    }
    system
}

/// The goal a turn works on in goal mode: drafted from the prompt,
/// continued, or resumed; shown live.
pub(super) fn goal_of(
    session: &mut Session,
    kind: &TurnKind,
    text: &str,
) -> Option<crate::agent::common::goal::Goal> {
    // In goal mode a prompt drafts, continues, answers or resumes the
    // goal; a finished, cancelled or exhausted goal takes an ordinary
    // turn (resume it, or select goal again for a new one).
    let goal = match (kind, session.settings.mode, session.goal.as_mut()) {
        (TurnKind::Model, Mode::Goal, Some(goal)) => {
            use crate::agent::common::goal::Status;
            match goal.status {
                Status::Drafting => {
                    goal.objective = text.to_string();
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
        session.mark_goal_changed();
    }
    if let Ok(mut live) = session.live().lock() {
        live.goal = goal.as_ref().map(|g| g.json());
        live.goal_pause = false;
    }
    goal
}

/// The notices a turn shows first (each once per session) and its
/// lasting permission rules: the user's (with the agent file's and their
/// answers for this project) and the project's own.
pub(super) fn notices_and_rules(
    session: &mut Session,
    registry: &Registry,
    agent: Option<&crate::agentfile::AgentSpec>,
    processes: &Processes,
    sandbox_description: &str,
) -> (Vec<acp::fit::Notice>, crate::policy::rules::RuleSet) {
    let mut notice_extra = None;
    // The sandbox policy without a sandbox says so once per session:
    // every command then asks.
    let notice = if session.settings.policy == Policy::Sandbox
        && !processes.sandbox_available()
        && session.first_sandbox_notice()
    {
        Some(acp::fit::Notice::warning(
            "No sandbox is available here, so every command asks",
            format!("The sandbox: {sandbox_description}."),
        ))
    } else {
        None
    };
    // Workspace files Spindle would read but refuses are named, each
    // once (the model's prompt names the instruction files itself).
    let commands_dir = agent.and_then(|agent| agent.commands_dir.as_deref());
    let refused: Vec<_> = crate::agent::common::prompt::skipped_files(session.cwd(), commands_dir)
        .into_iter()
        .filter(|skipped| !session.refused_named(&skipped.path))
        .collect();
    let refused_notice = (!refused.is_empty()).then(|| {
        let lines: Vec<String> = refused
            .iter()
            .map(|skipped| format!("- {}", skipped.describe()))
            .collect();
        session.name_refused(refused.into_iter().map(|skipped| skipped.path));
        acp::fit::Notice::warning(
            "Some of the workspace's files are left out",
            lines.join("\n"),
        )
    });
    // Lasting rules: the user's (with their answers for this project)
    // and the project's own, which only tighten unless trusted.
    // Kept under the project's root; rules an older version kept under
    // the working folder itself still count (they are the user's own),
    // its trust does not (`project::project_trusted`).
    let projects = &registry.config.permissions.projects;
    let key = crate::config::project::key(session.cwd());
    let here = session.cwd().display().to_string();
    let mine = projects.get(&key);
    let older = (here != key).then(|| projects.get(&here)).flatten();
    // The agent file's rules count as the user's (they chose the file).
    let mut user_rules = agent.map(|a| a.permissions.clone()).unwrap_or_default();
    user_rules.extend(registry.config.permissions.rules.clone());
    user_rules.extend(mine.map(|p| p.rules.clone()).unwrap_or_default());
    user_rules.extend(older.map(|p| p.rules.clone()).unwrap_or_default());
    let mut project_rules = match crate::config::project::project_rules(session.cwd()) {
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
    // Claude Code's rules of the project count as the project's own.
    let claude = crate::config::claude_permissions::ClaudeRules::load(session.cwd());
    project_rules.extend(claude.rules());
    let claude_notice = claude_notice(session, &claude);
    let rules = crate::policy::rules::RuleSet::new(
        user_rules,
        project_rules,
        mine.is_some_and(|p| p.trusted),
    );
    // A policy above `auto` chosen at start is said once, first.
    let notices: Vec<acp::fit::Notice> = [
        session.take_start_notice(),
        notice,
        refused_notice,
        notice_extra,
        claude_notice,
    ]
    .into_iter()
    .flatten()
    .collect();
    (notices, rules)
}

/// Once per session: how many of the project's Claude Code permission
/// rules Spindle leaves out (or cannot read), and where they are listed.
fn claude_notice(
    session: &mut Session,
    claude: &crate::config::claude_permissions::ClaudeRules,
) -> Option<acp::fit::Notice> {
    let (left, broken) = (claude.left_out.len(), claude.problems.len());
    if left + broken == 0 || !session.first_claude_rules_notice() {
        return None;
    }
    let mut said = Vec::new();
    if left > 0 {
        let (rules, are) = if left == 1 {
            ("rule", "is")
        } else {
            ("rules", "are")
        };
        said.push(format!(
            "{left} permission {rules} of .claude/settings.json or settings.local.json {are} \
             left out: Spindle's rules cannot say the same"
        ));
    }
    if broken > 0 {
        said.push(format!("{broken} entries or files could not be read"));
    }
    Some(acp::fit::Notice::warning(
        "Some of the project's Claude Code permissions are left out",
        format!(
            "{}. `/allow` and `spindle doctor` list them, with why.",
            said.join("; ")
        ),
    ))
}

/// The turn's reasoning effort (the preset's default under `auto`, when
/// the model has it) and its step budget (the preset's unless given).
pub(super) fn effort_and_steps(
    session: &Session,
    entry: &crate::agent::common::models::ModelEntry,
    explicit_steps: usize,
) -> (Option<String>, usize) {
    let effort = if session.settings.effort == "auto" {
        let wanted = session.settings.preset.default_effort();
        entry.efforts().iter().find(|e| *e == wanted).cloned()
    } else {
        Some(session.settings.effort.clone())
    };
    let max_steps = if explicit_steps == 0 {
        session.settings.preset.step_budget()
    } else {
        explicit_steps
    };
    (effort, max_steps)
}

/// The session marks its turn begun: a new epoch, its source and start,
/// the provider's health fresh. Its live state and the epoch.
pub(super) fn begin(
    session: &mut Session,
    source: crate::agent::dispatcher::session::TurnSource,
) -> (crate::agent::turn::report::SharedLive, u64) {
    let epoch = session.begin_turn(source);
    let live = session.live().clone();
    if let Ok(mut live) = live.lock() {
        live.health = crate::agent::turn::report::Health::Ok;
        live.health_error = None;
        live.waiting_until = None;
    }
    (live, epoch)
}

/// The models asked while the session's is limited (`fallback` in the
/// config), each as its provider knows it; one the configuration does not
/// offer (doctor names it) or the session's own model is left out.
pub(super) fn fallbacks_of(
    registry: &Registry,
    entry: &crate::agent::common::models::ModelEntry,
) -> Vec<crate::agent::turn::Fallback> {
    let config = &registry.config;
    config
        .fallback
        .iter()
        .filter(|id| **id != entry.id)
        .filter_map(|id| {
            let model = registry.model(id)?;
            let provider = registry.provider(&model.provider)?;
            let kind = config.providers.get(&model.provider).map(|p| p.kind);
            Some(crate::agent::turn::Fallback {
                id: id.clone(),
                provider,
                name: model.model.clone(),
                max_output_tokens: model.sent_output_limit(kind),
                price: model.config.price.clone(),
            })
        })
        .collect()
}

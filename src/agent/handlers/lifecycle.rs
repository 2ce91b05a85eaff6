//! Session lifecycle requests: new, load (with replay), resume, list,
//! close and delete — the dispatcher's side of the session store.

use super::cancel;
use super::controls::{config_options, effort_values, modes};
use super::events;
use super::hooks;
use super::inbox;
use super::interrupted::close_interrupted_turn;
use super::project::ProjectDefaults;
use super::prompting;
use super::{jobs, sign_in};
use crate::acp;
use crate::agent::common::client_prompt;
use crate::agent::common::models::Registry;
use crate::agent::dispatcher::params::{check_cwd, decode, internal, not_found};
use crate::agent::dispatcher::session::{
    redact_mcp_servers, valid_client_session_id, Session, Settings, StartSource, WorkspaceDefaults,
};
use crate::agent::dispatcher::Dispatcher;
use crate::mcp::McpSession;
use crate::modes::Policy;
use crate::rpc::RpcError;
use crate::store;
use crate::util::OrLogged;
use serde_json::{json, Value};
use std::sync::Arc;

/// Sessions per `session/list` page.
const PAGE_SIZE: usize = 50;

/// The longest `session/new` (or load, resume) waits for MCP servers; slow
/// ones finish starting in the background.
const MCP_START_WAIT: std::time::Duration = std::time::Duration::from_millis(1000);

/// Starts the turn that waits out the rest of a recorded wait.
pub(super) fn resume_wait(d: &mut Dispatcher, id: &str) {
    let wait = d
        .store()
        .ok()
        .and_then(|store| store.wait(id).ok().flatten());
    let Some(wait) = wait.as_ref().and_then(crate::agent::turn::Wait::from_json) else {
        return;
    };
    log::info!(
        "session {id}: its turn waited for the provider's limit; waiting on until {}",
        crate::clock::rfc3339(wait.until_ms)
    );
    let start = crate::agent::handlers::prompting::TurnStart {
        request: None,
        source: crate::agent::dispatcher::session::TurnSource::Wait,
        item: None,
        wait: Some(wait),
        message_id: None,
    };
    if let Err(error) = prompting::start_turn(d, id, &[], start) {
        log::warn!("session {id}: the wait cannot go on: {}", error.message);
    }
}

/// A session this process created and the user never sent anything to
/// leaves nothing in the store once the client closes it: it was never
/// listed, and nothing in it could be wanted (`store::USED`). One whose
/// settings were changed stays (a load restores them), and so does one
/// created by another process, which may still have it open. The
/// agent's exit removes nothing: a client may create a session in one
/// process and prompt it from the next (acpx's named sessions do).
fn remove_if_unused(d: &mut Dispatcher, session: &Session) {
    if !session.is_disposable() {
        return;
    }
    let id = session.id.as_str();
    let Ok(store) = d.store() else {
        return;
    };
    match store.delete_if_unused(id) {
        Ok(true) => log::info!("session {id} was never used; removed"),
        Ok(false) => {}
        Err(error) => log::warn!("cannot remove the unused session {id}: {error}"),
    }
}

pub(in crate::agent) fn new_session(d: &mut Dispatcher, params: Value) -> Result<Value, RpcError> {
    let roots = crate::agent::dispatcher::params::extra_roots(&params, &protected_dirs(d))?;
    let client_prompt = client_prompt::parse(&params)?;
    let request: acp::NewSessionRequest = decode(params)?;
    let cwd = check_cwd(&request.cwd)?;
    let requested = request
        .meta
        .as_ref()
        .and_then(|meta| meta.get("spindle"))
        .and_then(|spindle| spindle.get("sessionId"));
    let chosen = match requested {
        None | Some(Value::Null) => None,
        Some(Value::String(id)) => {
            if !valid_client_session_id(id) {
                return Err(RpcError::invalid_params(format!(
                    "_meta.spindle.sessionId {id:?} is not usable: use 1 to 64 letters, digits, '-', '_' or '.', not starting with '.'"
                )));
            }
            Some(id.clone())
        }
        Some(other) => {
            return Err(RpcError::invalid_params(format!(
                "_meta.spindle.sessionId must be a string, not {other}"
            )))
        }
    };
    let registry = d.registry()?;
    let servers = with_agent_servers(d, request.mcp_servers, &cwd);
    let mut session = Session::new(String::new(), cwd, servers, Policy::Ask);
    session.settings.agent = d.options().agent.as_ref().map(|a| a.name.clone());
    session.settings.extra_roots = roots.unwrap_or_default();
    session.settings.system_prompt = client_prompt;
    let cwd_key = session.cwd().display().to_string();
    let remembered = d
        .store()?
        .workspace_defaults(&cwd_key)
        .map_err(internal)?
        .map(|value| {
            serde_json::from_value::<WorkspaceDefaults>(value)
                .or_logged("stored workspace defaults do not parse")
        })
        .unwrap_or_default();
    let project = ProjectDefaults::read(session.cwd(), &registry);
    apply_start_values(d, &mut session, &registry, remembered, &project.defaults);
    let project_notes = project.notices(&session.settings);
    let settings = session.settings_json();
    let servers = redact_mcp_servers(session.mcp_servers());
    let cwd_text = session.cwd().display().to_string();
    let session_id = match chosen {
        Some(id) => {
            let taken = d.has_session(&id) || d.store()?.session(&id).map_err(internal)?.is_some();
            if taken {
                return Err(RpcError::invalid_params(format!(
                    "_meta.spindle.sessionId {id:?} is already in use by another session"
                )));
            }
            id
        }
        None => loop {
            let id = crate::util::new_id("sess");
            if !d.has_session(&id) && d.store()?.session(&id).map_err(internal)?.is_none() {
                break id;
            }
        },
    };
    let created = d
        .store()?
        .create_session(&session_id, &cwd_text, &settings, &servers);
    if let Err(error) = created {
        // Another process may have taken a client-chosen id between
        // the check above and this insert.
        if d.store()?.session(&session_id).map_err(internal)?.is_some() {
            return Err(RpcError::invalid_params(format!(
                "_meta.spindle.sessionId {session_id:?} is already in use by another session"
            )));
        }
        return Err(internal(error));
    }
    log::info!("session {session_id} opened in {cwd_text}");
    session.id = session_id.clone();
    session.set_disposable(true);
    session.mcp = open_mcp(d, &session.id, session.mcp_servers());
    d.notices_after_response(&session.id, project_notes);
    let response = json!({
        "sessionId": session_id,
        "modes": modes(&session),
        "configOptions": config_options(&session, &registry),
    });
    d.insert_session(session_id.clone(), session);
    jobs::own_jobs(d, &session_id);
    d.announce_commands(&session_id);
    events::announce_mcp(d, &session_id);
    Ok(response)
}

/// A new session's choices: the command line's explicit values first
/// (`--script` counts as a model chosen), then a trusted project's
/// defaults, the workspace's last choices, the user's config file's
/// defaults, and the built-in values (docs/configuration.md, "Which
/// choice wins").
fn apply_start_values(
    d: &Dispatcher,
    session: &mut Session,
    registry: &Registry,
    remembered: WorkspaceDefaults,
    project: &crate::config::Defaults,
) {
    let defaults = &registry.config.defaults;
    // A trusted project's own defaults come before what the
    // workspace's last session chose, and the user's config after.
    let project_model = project.model.as_ref().and_then(|m| registry.qualify(m));
    let explicit_model = d
        .options()
        .chosen_model()
        .and_then(|m| registry.qualify(&m));
    let model = explicit_model
        .or(project_model)
        .or(remembered.model)
        .filter(|m| registry.model(m).is_some())
        .or_else(|| registry.default_model.clone())
        .unwrap_or_default();
    session.settings.model = model;
    let effort = project
        .effort
        .clone()
        .or(remembered.effort)
        .or_else(|| defaults.effort.clone())
        .unwrap_or_else(|| "auto".into());
    session.settings.effort =
        if effort_values(registry.model(&session.settings.model)).contains(&effort) {
            effort
        } else {
            "auto".into()
        };
    session.settings.preset = d
        .options()
        .preset
        .or_else(|| {
            project
                .preset
                .as_deref()
                .and_then(crate::modes::Preset::parse)
        })
        .or(remembered.preset)
        .or_else(|| {
            defaults
                .preset
                .as_deref()
                .and_then(crate::modes::Preset::parse)
        })
        .unwrap_or_default();
    // A workspace's last choice carries over only up to `auto`: a
    // `yolo` chosen once must not silently become every later
    // session's. A flag or the config file may start higher, and the
    // session then says so in its first answer.
    let carried = remembered.policy.map(|policy| match policy {
        Policy::Yolo | Policy::Sandbox => Policy::Auto,
        other => other,
    });
    let (policy, chosen_by) = match (d.options().permissions, project.approval, carried) {
        (Some(policy), _, _) => (policy, "the --permissions flag"),
        (None, Some(policy), _) => (policy, "the project's .spindle/config.json"),
        (None, None, Some(policy)) => (policy, "this workspace's last session"),
        (None, None, None) => match defaults.approval {
            Some(policy) => (policy, "the config file's defaults.approval"),
            None => (Policy::default(), ""),
        },
    };
    session.settings.policy = policy;
    session.set_start_notice(match policy {
        Policy::Yolo => Some(acp::fit::Notice::warning(
            "This session runs in yolo",
            format!("Chosen by {chosen_by}: no tool call asks for approval."),
        )),
        Policy::Sandbox => Some(acp::fit::Notice::info(
            "This session runs in sandbox",
            format!("Chosen by {chosen_by}: commands run in a sandbox without asking."),
        )),
        _ => None,
    });
}

/// `session/load`: the session with its history replayed.
pub(super) fn load(d: &mut Dispatcher, params: Value) -> Result<Value, RpcError> {
    load_session(d, params, true)
}

/// `session/resume`: the session without a replay.
pub(super) fn resume(d: &mut Dispatcher, params: Value) -> Result<Value, RpcError> {
    load_session(d, params, false)
}

/// `session/load` (with `replay`) and `session/resume` (without).
pub(in crate::agent) fn load_session(
    d: &mut Dispatcher,
    params: Value,
    replay: bool,
) -> Result<Value, RpcError> {
    let roots = crate::agent::dispatcher::params::extra_roots(&params, &protected_dirs(d))?;
    let client_prompt = client_prompt::parse(&params)?;
    let request: acp::LoadSessionRequest = decode(params)?;
    if replay && request.mcp_servers.is_none() {
        return Err(RpcError::invalid_params("missing field `mcpServers`"));
    }
    let cwd = check_cwd(&request.cwd)?;
    let registry = d.registry()?;
    let id = request.session_id;
    let merged = request.mcp_servers.map(|s| with_agent_servers(d, s, &cwd));
    // A resume without the editor's servers still gets the configured.
    let configured = with_agent_servers(d, Vec::new(), &cwd);
    if d.has_session(&id) {
        if let Some(given) = client_prompt {
            replace_client_prompt(d, &id, given)?;
        }
        return attach_live(d, &id, roots, merged, replay, &registry);
    }
    let (row, messages) = read_stored(d, &id)?;
    let store = d.store()?;
    let settings: Settings = serde_json::from_value(row.settings.clone())
        .or_logged(format_args!("the stored settings of {id} do not parse"));
    let servers = match merged {
        Some(servers) => {
            store
                .save_mcp_servers(&id, &redact_mcp_servers(&servers))
                .map_err(internal)?;
            servers
        }
        None => configured,
    };
    let events = if replay {
        store.events(&id).map_err(internal)?
    } else {
        Vec::new()
    };
    let mut session = Session::new(id.clone(), cwd, servers, settings.policy);
    session.set_hook_start(StartSource::Resume);
    session.restore(settings);
    // A system prompt given now replaces the stored one.
    if let Some(given) = client_prompt {
        session.settings.system_prompt = Some(given);
        store
            .save_settings(&id, &session.settings_json())
            .map_err(internal)?;
    }
    restore_roots(d, &mut session, roots);
    session.mcp = open_mcp(d, &session.id, session.mcp_servers());
    fit_to_registry(&mut session, &registry);
    session.title = row.title;
    session.stored_messages = messages.len() as i64;
    session.messages = messages;
    d.replay(&id, &events);
    let response = json!({
        "modes": modes(&session),
        "configOptions": config_options(&session, &registry),
    });
    d.insert_session(id.clone(), session);
    jobs::own_jobs(d, &id);
    find_wait(d, &id);
    inbox::recover_inbox(d, &id);
    d.announce_commands(&id);
    events::announce_mcp(d, &id);
    Ok(response)
}

/// A client system prompt given to a session live here replaces its
/// own, for its next turn and kept in the store.
fn replace_client_prompt(
    d: &mut Dispatcher,
    id: &str,
    given: client_prompt::ClientPrompt,
) -> Result<(), RpcError> {
    let Some(session) = d.session_mut(id) else {
        return Err(not_found(id));
    };
    session.settings.system_prompt = Some(given);
    let settings = session.settings_json();
    d.store()?.save_settings(id, &settings).map_err(internal)
}

/// Attaches to a session already live here, without a second copy: new
/// roots and servers (whose MCP restarts) replace the old.
fn attach_live(
    d: &mut Dispatcher,
    id: &str,
    roots: Option<Vec<std::path::PathBuf>>,
    merged: Option<Vec<Value>>,
    replay: bool,
    registry: &Registry,
) -> Result<Value, RpcError> {
    let Some(session) = d.session_mut(id) else {
        return Err(not_found(id));
    };
    // A session closed while its turn still winds down is opened
    // again (that turn ends normally, as cancelled).
    session.set_closed(false);
    if let Some(roots) = roots {
        session.settings.extra_roots = roots;
    }
    let restart = merged.is_some();
    if let Some(servers) = merged {
        session.set_mcp_servers(servers);
    }
    if restart {
        if let Some(old) = session.mcp.take() {
            old.shutdown();
        }
        let servers = session.mcp_servers().to_vec();
        let mcp = open_mcp(d, id, &servers);
        if let Some(session) = d.session_mut(id) {
            session.mcp = mcp;
        }
    }
    let Some(session) = d.session_mut(id) else {
        return Err(not_found(id));
    };
    let response = json!({
        "modes": modes(session),
        "configOptions": config_options(session, registry),
    });
    if replay {
        let events = d.store()?.events(id).map_err(internal)?;
        d.replay(id, &events);
    }
    d.announce_commands(id);
    Ok(response)
}

/// A wait the session's last process left (its turn was closed as
/// interrupted, unless another live process still runs it) goes on
/// after the answer; the inbox item that turn carried is in the
/// conversation already, so it counts as applied, not uncertain.
fn find_wait(d: &mut Dispatcher, id: &str) {
    let Ok(store) = d.store() else { return };
    if !store.running_turns(id).is_ok_and(|turns| turns.is_empty()) {
        return;
    }
    let Some(wait) = store.wait(id).ok().flatten() else {
        return;
    };
    let Some(wait) = crate::agent::turn::Wait::from_json(&wait) else {
        log::warn!("session {id}: a wait record that cannot be read; dropped");
        let _ = store.clear_wait(id);
        return;
    };
    if let Some(item) = &wait.item {
        let _ = store.inbox_set_state(id, item, crate::store::inbox::ItemState::Applied);
    }
    d.resume_after_answer(id.to_string());
}

/// The stored session and its messages; a turn it left running is
/// closed as interrupted unless a live process holds its lease.
fn read_stored(
    d: &mut Dispatcher,
    id: &str,
) -> Result<(store::SessionRow, Vec<crate::provider::Message>), RpcError> {
    let me = std::process::id();
    let store = d.store()?;
    let Some(row) = store.session(id).map_err(internal)? else {
        return Err(not_found(id));
    };
    // A turn still marked running was cut off, unless a live process
    // holds the session's lease.
    let held_elsewhere = match (row.lease_pid, row.lease_expires_ms) {
        (Some(pid), Some(expires)) => {
            pid != i64::from(me) && expires > crate::clock::now_ms() && store::process_alive(pid)
        }
        _ => false,
    };
    if !held_elsewhere {
        for turn in store.running_turns(id).map_err(internal)? {
            close_interrupted_turn(store, id, turn)?;
        }
    }
    let messages = store.messages(id).map_err(internal)?;
    Ok((row, messages))
}

/// The session's extra roots: the given list, or else the stored one,
/// each checked again (a folder may be gone, or now hold Spindle's own).
fn restore_roots(d: &Dispatcher, session: &mut Session, roots: Option<Vec<std::path::PathBuf>>) {
    match roots {
        Some(roots) => session.settings.extra_roots = roots,
        None => {
            let stored: Vec<String> = session
                .settings
                .extra_roots
                .iter()
                .map(|r| r.display().to_string())
                .collect();
            session.settings.extra_roots = crate::agent::dispatcher::params::extra_roots(
                &json!({"additionalDirectories": stored}),
                &protected_dirs(d),
            )
            .or_logged("the stored extra folders are refused")
            .unwrap_or_default();
        }
    }
}

fn protected_dirs(d: &Dispatcher) -> Vec<std::path::PathBuf> {
    crate::agent::dispatcher::params::protected_dirs(d.options().config.as_deref(), d.db_path())
}

/// The session's MCP servers: the editor's, then the agent file's,
/// the user's config's and (when trusted) the project's; on a name
/// used twice the earlier wins.
fn with_agent_servers(
    d: &Dispatcher,
    mut servers: Vec<Value>,
    cwd: &std::path::Path,
) -> Vec<Value> {
    let mut more: Vec<Value> = Vec::new();
    if let Some(agent) = &d.options().agent {
        more.extend(agent.mcp_servers.iter().cloned());
    }
    if let Some(registry) = d.built_registry() {
        more.extend(registry.config.mcp_servers.iter().cloned());
        if crate::config::project::project_trusted(&registry.config, cwd) {
            let (project, problems) =
                crate::config::project::project_servers(&registry.config, cwd);
            more.extend(project.into_iter().map(|(server, _)| server));
            for problem in problems {
                log::warn!("{problem}");
            }
        }
    }
    for server in more {
        let name = &server["name"];
        if !servers.iter().any(|s| s["name"] == *name) {
            servers.push(server);
        }
    }
    servers
}

/// `session/fork` (unstable): a new session holding a copy of the
/// conversation and transcript so far, opened in `cwd` with the given
/// MCP servers; the two go their own ways from here.
pub(in crate::agent) fn fork_session(d: &mut Dispatcher, params: Value) -> Result<Value, RpcError> {
    let source = match params.get("sessionId") {
        Some(Value::String(id)) => id.clone(),
        Some(_) => return Err(RpcError::invalid_params("sessionId must be a string")),
        None => return Err(RpcError::invalid_params("missing field `sessionId`")),
    };
    let cwd = match params.get("cwd") {
        Some(Value::String(cwd)) => cwd.clone(),
        _ => {
            return Err(RpcError::invalid_params(
                "missing field `cwd` (an absolute path)",
            ))
        }
    };
    check_cwd(&cwd)?;
    // Checked before anything is copied; the copy keeps the source's
    // unless one is given.
    client_prompt::parse(&params)?;
    let servers = params.get("mcpServers").cloned().unwrap_or(json!([]));
    if !servers.is_array() {
        return Err(RpcError::invalid_params("mcpServers must be an array"));
    }
    if d.session(&source).is_some_and(|s| s.running.is_some()) {
        return Err(RpcError::invalid_request(format!(
            "session {source} is running a turn; fork it once the turn has ended"
        )));
    }
    if d.store()?.session(&source).map_err(internal)?.is_none() {
        return Err(not_found(&source));
    }
    // Checked before anything is copied.
    crate::agent::dispatcher::params::extra_roots(&params, &protected_dirs(d))?;
    if let Some(bad) = servers
        .as_array()
        .into_iter()
        .flatten()
        .position(|s| !s.is_object())
    {
        return Err(RpcError::invalid_params(format!(
            "mcpServers[{bad}] must be an object"
        )));
    }
    let id = loop {
        let id = crate::util::new_id("sess");
        if !d.has_session(&id) && d.store()?.session(&id).map_err(internal)?.is_none() {
            break id;
        }
    };
    let redacted = redact_mcp_servers(servers.as_array().map_or(&[][..], Vec::as_slice));
    d.store()?
        .fork_session(&source, &id, &cwd, &redacted)
        .map_err(|error| RpcError::invalid_request(error.to_string()))?;
    log::info!("session {id} forked from {source}");
    let mut load = json!({"sessionId": id, "cwd": cwd, "mcpServers": servers});
    if let Some(roots) = params.get("additionalDirectories") {
        load["additionalDirectories"] = roots.clone();
    }
    if let Some(given) = params.get("systemPrompt") {
        load["systemPrompt"] = given.clone();
    }
    let mut response = match load_session(d, load, false) {
        Ok(response) => response,
        Err(error) => {
            // No half-made copy stays behind.
            let _ = d.store()?.delete_session(&id);
            return Err(error);
        }
    };
    response["sessionId"] = json!(id);
    Ok(response)
}

pub(in crate::agent) fn list_sessions(
    d: &mut Dispatcher,
    request: acp::ListSessionsRequest,
) -> Result<Value, RpcError> {
    if let Some(cwd) = &request.cwd {
        if !std::path::Path::new(cwd).is_absolute() {
            return Err(RpcError::invalid_params(format!(
                "cwd must be an absolute path, got {cwd:?}"
            )));
        }
    }
    let before = match &request.cursor {
        None => None,
        Some(cursor) => Some(
            cursor
                .strip_prefix("o")
                .and_then(|n| n.parse::<i64>().ok())
                .filter(|n| *n > 0)
                .ok_or_else(|| {
                    RpcError::invalid_params(format!(
                        "invalid cursor {cursor:?}; pass back a nextCursor from an earlier session/list"
                    ))
                })?,
        ),
    };
    let mut rows = d
        .store()?
        .list_sessions(request.cwd.as_deref(), before, PAGE_SIZE + 1, false)
        .map_err(internal)?;
    let next = if rows.len() > PAGE_SIZE {
        rows.truncate(PAGE_SIZE);
        rows.last().map(|row| format!("o{}", row.updated_order))
    } else {
        None
    };
    let sessions: Vec<Value> = rows
        .into_iter()
        .map(|row| {
            let mut info = json!({
                "sessionId": row.id,
                "cwd": row.cwd,
                "updatedAt": row.updated_at,
            });
            if let Some(title) = row.title {
                info["title"] = json!(title);
            }
            info
        })
        .collect();
    let mut result = json!({ "sessions": sessions });
    if let Some(next) = next {
        result["nextCursor"] = json!(next);
    }
    Ok(result)
}

pub(in crate::agent) fn close_session(
    d: &mut Dispatcher,
    request: acp::SessionIdRequest,
) -> Result<Value, RpcError> {
    let id = request.session_id;
    if d.has_session(&id) {
        hooks::session_end_hooks(d, &id, "close");
        close_live(d, &id);
        return Ok(json!({}));
    }
    match d.store()?.session(&id).map_err(internal)? {
        Some(_) => Ok(json!({})),
        None => Err(not_found(&id)),
    }
}

pub(in crate::agent) fn delete_session(
    d: &mut Dispatcher,
    request: acp::SessionIdRequest,
) -> Result<Value, RpcError> {
    let id = request.session_id;
    if d.has_session(&id) {
        hooks::session_end_hooks(d, &id, "delete");
        close_live(d, &id);
    }
    // Deleting what is not there succeeds quietly, as the protocol asks.
    d.store()?.delete_session(&id).map_err(internal)?;
    crate::process::logs::remove_session(d.db_path(), &id);
    log::info!("session {id} deleted");
    Ok(json!({}))
}

/// Cancels the session's turn (its prompt still gets its `cancelled`
/// answer) and frees the session; with a turn still running, it is
/// freed when that turn has answered.
fn close_live(d: &mut Dispatcher, id: &str) {
    if let Some(mcp) = d.session_mut(id).and_then(|s| s.mcp.take()) {
        mcp.shutdown();
    }
    // No job outlives its session.
    if let Some(session) = d.session(id) {
        session.jobs().kill_all(None);
    }
    cancel::cancel_session(d, id);
    let running = d.session(id).is_some_and(|s| s.running.is_some());
    if running {
        if let Some(session) = d.session_mut(id) {
            session.set_closed(true);
        }
    } else if let Some(session) = d.remove_session(id) {
        remove_if_unused(d, &session);
    }
}

/// A stored session's model and effort, fitted to the registry: a model no
/// longer configured falls back to the default, an effort it lacks to auto.
fn fit_to_registry(session: &mut Session, registry: &Registry) {
    if registry.model(&session.settings.model).is_none() {
        session.settings.model = registry.default_model.clone().unwrap_or_default();
    }
    if !effort_values(registry.model(&session.settings.model)).contains(&session.settings.effort) {
        session.settings.effort = "auto".into();
    }
}

/// Starts a session's MCP servers (waiting a bounded time). Returns them
/// and the notices that name, after the answer, the servers that could
/// not be used.
/// Starts session `id`'s MCP `servers` with the dispatcher's settings;
/// what they bring to say (notices, sign-in offers) follows the answer.
fn open_mcp(d: &mut Dispatcher, id: &str, servers: &[Value]) -> Option<Arc<McpSession>> {
    let (mcp, notes, sign_in) = start_mcp(
        servers,
        &d.tool_secrets(),
        d.mcp_message_cap(),
        d.mcp_elicitation(),
        d.mcp_tokens(),
        d.mcp_trust(),
    );
    d.notices_after_response(id, notes);
    sign_in::offer_sign_in(d, id, mcp.clone(), sign_in);
    mcp
}

fn start_mcp(
    servers: &[Value],
    secrets: &crate::policy::secrets::Secrets,
    message_cap: Option<usize>,
    elicitation: crate::mcp::ElicitationSupport,
    tokens: Option<std::path::PathBuf>,
    trust: crate::net::Trust,
) -> (Option<Arc<McpSession>>, Vec<acp::fit::Notice>, Vec<String>) {
    let (mut configs, mut failures) = crate::mcp::parse_servers(servers);
    let env_remove: Vec<String> = secrets
        .to_remove_here()
        .into_iter()
        .map(|name| name.to_string_lossy().into_owned())
        .collect();
    for config in &mut configs {
        config.env_remove = env_remove.clone();
        config.message_cap = message_cap;
        config.elicitation = elicitation.clone();
        config.tokens = tokens.clone();
        config.trust = trust.clone();
    }
    // The servers that answered that they want sign-in.
    let mut sign_in = Vec::new();
    let mcp = if configs.is_empty() {
        None
    } else {
        let mcp = McpSession::start(configs, MCP_START_WAIT);
        for (server, reason) in mcp.take_failures() {
            if reason.kind == crate::mcp::McpErrorKind::SignIn {
                sign_in.push(server.clone());
            }
            failures.push((server, reason.message));
        }
        Some(mcp)
    };
    let notes = failures
        .into_iter()
        .map(|(server, reason)| {
            acp::fit::Notice::warning(format!("MCP server `{server}` is not available"), reason)
        })
        .collect();
    (mcp, notes, sign_in)
}

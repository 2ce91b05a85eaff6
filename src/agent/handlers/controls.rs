//! Session controls as the client sees them: modes (`session/set_mode`)
//! and config options (`session/set_config_option`) — model, effort,
//! execution preset, tool approval and mode — always sent as the complete
//! list, and how a change is applied.

use super::events;
use super::goals;
use crate::acp::SessionUpdate;
use crate::agent::common::models::{ModelEntry, Registry};
use crate::agent::dispatcher::params::not_found;
use crate::agent::dispatcher::session::Session;
use crate::agent::dispatcher::Dispatcher;
use crate::modes::Policy;
use crate::modes::{Mode, Preset};
use crate::rpc::RpcError;
use serde::Deserialize;
use serde_json::{json, Value};

fn option(
    id: &str,
    name: &str,
    description: &str,
    category: Option<&str>,
    current: &str,
    options: Vec<Value>,
) -> Value {
    let mut value = json!({
        "id": id,
        "name": name,
        "description": description,
        "type": "select",
        "currentValue": current,
        "options": options,
    });
    if let Some(category) = category {
        value["category"] = json!(category);
    }
    value
}

fn choice(value: &str, name: &str, description: Option<&str>) -> Value {
    let mut choice = json!({"value": value, "name": name});
    if let Some(description) = description {
        choice["description"] = json!(description);
    }
    choice
}

/// The effort levels offered for a model: `auto` plus what it supports.
pub(super) fn effort_values(model: Option<&ModelEntry>) -> Vec<String> {
    let mut values = vec!["auto".to_string()];
    if let Some(model) = model {
        values.extend(model.efforts().iter().cloned());
    }
    values
}

/// The complete config option list of a session.
pub(super) fn config_options(session: &Session, registry: &Registry) -> Value {
    let models: Vec<Value> = registry
        .models
        .iter()
        .map(|m| choice(&m.id, &m.display_name(), None))
        .collect();
    let efforts: Vec<Value> = effort_values(registry.model(&session.settings.model))
        .iter()
        .map(|e| {
            if e == "auto" {
                choice(
                    "auto",
                    "Auto",
                    Some("The preset's default level, when the model reasons"),
                )
            } else {
                choice(e, e, None)
            }
        })
        .collect();
    let model_description = match registry.more_models {
        0 => "The model that answers".to_string(),
        more => format!(
            "The model that answers. The server lists {more} more chat models than shown here; name one with --model or under \"models\" in the config file"
        ),
    };
    json!([
        option(
            "mode",
            "Mode",
            "Normal work, plan only (read-only tools), or a goal worked on until it is done",
            Some("mode"),
            session.settings.mode.id(),
            vec![
                choice("normal", "Normal", Some("Full tools")),
                choice(
                    "plan",
                    "Plan",
                    Some("Read-only tools; writes a plan and changes nothing")
                ),
                choice(
                    "goal",
                    "Goal",
                    Some("The next prompt is an objective the agent works on until it is done, blocked or out of budget")
                ),
            ]
        ),
        option(
            "model",
            "Model",
            &model_description,
            Some("model"),
            &session.settings.model,
            models
        ),
        option(
            "effort",
            "Effort",
            "How hard the model thinks",
            Some("thought_level"),
            &session.settings.effort,
            efforts
        ),
        option(
            "agent_preset",
            "Preset",
            "Step budget, default effort and how much the agent verifies",
            None,
            session.settings.preset.id(),
            vec![
                choice(
                    "light",
                    "Light",
                    Some("Few steps, low effort, verifies only when cheap")
                ),
                choice("balanced", "Balanced", Some("The default")),
                choice(
                    "delivery",
                    "Delivery",
                    Some("More steps, high effort, builds and tests before answering")
                ),
            ]
        ),
        option(
            "tool_approval",
            "Tool approval",
            "When tools ask before they act",
            None,
            policy_id(session.settings.policy),
            vec![
                choice("ask", "Ask", Some("Ask before every edit and command")),
                choice(
                    "auto",
                    "Auto",
                    Some("Edits in the workspace and read-only commands run freely")
                ),
                choice("sandbox", "Sandbox", Some(&sandbox_description())),
                choice("yolo", "Yolo", Some("Nothing asks")),
            ]
        ),
    ])
}

/// What the sandbox policy does on this machine: honest when no sandbox
/// can be had.
fn sandbox_description() -> String {
    let support = std::env::current_exe()
        .ok()
        .map(|exe| crate::sandbox::support(&exe));
    match support {
        Some(support) if support.available() => format!(
            "Commands run without asking in a sandbox: the workspace writable except .git, nothing else, no network ({})",
            support.describe()
        ),
        Some(support) => format!(
            "No sandbox is available here ({}): every command asks",
            support.describe()
        ),
        None => "No sandbox is available here: every command asks".to_string(),
    }
}

pub(super) fn policy_id(policy: Policy) -> &'static str {
    match policy {
        Policy::Ask => "ask",
        Policy::Auto => "auto",
        Policy::Sandbox => "sandbox",
        Policy::Yolo => "yolo",
    }
}

/// The `modes` object of session responses.
pub(super) fn modes(session: &Session) -> Value {
    json!({
        "currentModeId": session.settings.mode.id(),
        "availableModes": [
            {"id": "normal", "name": "Normal", "description": "Full tools"},
            {"id": "plan", "name": "Plan", "description": "Read-only tools: explore and write a plan, change nothing"},
            {"id": "goal", "name": "Goal", "description": "The next prompt is an objective worked on until it is done, blocked or out of budget"},
        ],
    })
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct SetConfigOption {
    session_id: String,
    config_id: String,
    value: Value,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct SetMode {
    session_id: String,
    mode_id: String,
}

/// Applies one config option value to a session. Returns whether the mode
/// changed (which also needs a `current_mode_update`).
fn apply(
    session: &mut Session,
    registry: &Registry,
    id: &str,
    value: &str,
) -> Result<bool, RpcError> {
    let bad_value = || {
        RpcError::invalid_params(format!(
            "{value:?} is not a valid value for config option {id:?}"
        ))
    };
    match id {
        "mode" => {
            let mode = match value {
                "normal" => Mode::Normal,
                "plan" => Mode::Plan,
                "goal" => Mode::Goal,
                _ => return Err(bad_value()),
            };
            let changed = session.settings.mode != mode;
            session.settings.mode = mode;
            // Selecting goal drafts a new goal: the next prompt is its
            // objective, the counters start at zero.
            if mode == Mode::Goal {
                let budget = crate::agent::common::goal::Budget::configured(
                    session.settings.preset,
                    &registry.config.goal,
                );
                session.goal = Some(crate::agent::common::goal::Goal::draft(budget));
                session.mark_goal_changed();
            }
            Ok(changed)
        }
        "model" => {
            let Some(model) = registry.model(value) else {
                return Err(bad_value());
            };
            session.settings.model = model.id.clone();
            // An effort the new model does not take falls back to auto.
            if !effort_values(Some(model)).contains(&session.settings.effort) {
                session.settings.effort = "auto".into();
            }
            Ok(false)
        }
        "effort" => {
            if !effort_values(registry.model(&session.settings.model)).iter().any(|e| e == value) {
                return Err(bad_value());
            }
            session.settings.effort = value.to_string();
            Ok(false)
        }
        "agent_preset" | "work_mode" => {
            session.settings.preset = Preset::parse(value).ok_or_else(bad_value)?;
            Ok(false)
        }
        "tool_approval" => {
            let policy = Policy::parse(value).ok_or_else(bad_value)?;
            if policy != session.settings.policy {
                // Remembered answers were given under the old policy.
                session.settings.approvals = Default::default();
            }
            session.settings.policy = policy;
            Ok(false)
        }
        other => Err(RpcError::invalid_params(format!(
            "unknown config option {other:?}; the options are mode, model, effort, agent_preset and tool_approval"
        ))),
    }
}

/// Stores a session's settings and makes its choices the workspace's
/// defaults for new sessions.
pub(super) fn settings_changed(d: &mut Dispatcher, session_id: &str) {
    let Some(session) = d.session_mut(session_id) else {
        return;
    };
    // A choice made for this session is kept with it, used or not.
    session.set_disposable(false);
    let summary = json!({
        "model": session.settings.model, "mode": session.settings.mode.id(), "effort": session.settings.effort,
        "preset": session.settings.preset.id(), "policy": session.settings.policy,
    });
    events::event(d, session_id, "settings", summary);
    goals::goal_changed(d, session_id);
    let Some(session) = d.session(session_id) else {
        return;
    };
    let settings = session.settings_json();
    let defaults = serde_json::to_value(session.workspace_defaults()).unwrap_or_default();
    let cwd = session.cwd().display().to_string();
    if let Ok(store) = d.store() {
        let saved = store
            .save_settings(session_id, &settings)
            .and_then(|()| store.save_workspace_defaults(&cwd, &defaults));
        if let Err(error) = saved {
            log::warn!("cannot store the settings of session {session_id}: {error}");
        }
    }
}

/// A change made on the agent's side (a slash command): applied like
/// the config option, then told to the client with
/// `config_option_update` (and `current_mode_update` for the mode).
pub(super) fn change_option(
    d: &mut Dispatcher,
    session_id: &str,
    registry: &Registry,
    id: &str,
    value: &str,
) -> Result<(), RpcError> {
    let Some(session) = d.session_mut(session_id) else {
        return Err(not_found(session_id));
    };
    let mode_changed = apply(session, registry, id, value)?;
    let options = config_options(session, registry);
    if mode_changed {
        d.send_update(
            session_id,
            SessionUpdate::CurrentModeUpdate {
                current_mode_id: value.to_string(),
            },
        );
    }
    d.send_update(
        session_id,
        SessionUpdate::ConfigOptionUpdate {
            config_options: options,
        },
    );
    settings_changed(d, session_id);
    Ok(())
}

/// The user approved the plan in a turn: normal mode, with the policy
/// they chose, told to the client like any mode change.
pub(super) fn plan_approved(d: &mut Dispatcher, session_id: &str, policy: Policy) {
    let Ok(registry) = d.registry() else {
        return;
    };
    for (id, value) in [("mode", "normal"), ("tool_approval", policy_id(policy))] {
        if let Err(error) = change_option(d, session_id, &registry, id, value) {
            log::warn!(
                "cannot leave plan mode in session {session_id}: {}",
                error.message
            );
        }
    }
}

pub(super) fn set_config_option(
    d: &mut Dispatcher,
    request: SetConfigOption,
) -> Result<Value, RpcError> {
    let Some(value) = request.value.as_str() else {
        return Err(RpcError::invalid_params(format!(
            "the value of {:?} must be a string",
            request.config_id
        )));
    };
    let registry = d.registry()?;
    let Some(session) = d
        .session_mut(&request.session_id)
        .filter(|s| !s.is_closed())
    else {
        return Err(not_found(&request.session_id));
    };
    let mode_changed = apply(session, &registry, &request.config_id, value)?;
    let options = config_options(session, &registry);
    let session_id = session.id.clone();
    if mode_changed {
        d.send_update(
            &session_id,
            SessionUpdate::CurrentModeUpdate {
                current_mode_id: value.to_string(),
            },
        );
    }
    settings_changed(d, &session_id);
    Ok(json!({ "configOptions": options }))
}

/// `session/set_model` (unstable; older clients): the same as setting
/// the `model` config option, told back as `config_option_update`.
pub(in crate::agent) fn set_model(d: &mut Dispatcher, params: Value) -> Result<Value, RpcError> {
    let session_id = match params.get("sessionId") {
        Some(Value::String(id)) => id.clone(),
        _ => return Err(RpcError::invalid_params("missing field `sessionId`")),
    };
    let model = match params.get("modelId") {
        Some(Value::String(model)) => model.clone(),
        _ => {
            return Err(RpcError::invalid_params(
                "missing field `modelId` (a string)",
            ))
        }
    };
    if d.session(&session_id).is_none_or(|s| s.is_closed()) {
        return Err(not_found(&session_id));
    }
    let registry = d.registry()?;
    change_option(d, &session_id, &registry, "model", &model)?;
    Ok(json!({}))
}

pub(super) fn set_mode(d: &mut Dispatcher, request: SetMode) -> Result<Value, RpcError> {
    let registry = d.registry()?;
    let Some(session) = d
        .session_mut(&request.session_id)
        .filter(|s| !s.is_closed())
    else {
        return Err(not_found(&request.session_id));
    };
    // Legacy ids: `default` is normal with asking, `auto` normal with
    // nothing asking.
    let (mode, policy) = match request.mode_id.as_str() {
        "normal" => ("normal", None),
        "plan" => ("plan", None),
        "goal" => ("goal", None),
        "default" => ("normal", Some("ask")),
        "auto" => ("normal", Some("yolo")),
        other => {
            return Err(RpcError::invalid_params(format!(
                "unknown mode {other:?}; the modes are normal, plan and goal"
            )))
        }
    };
    apply(session, &registry, "mode", mode)?;
    if let Some(policy) = policy {
        apply(session, &registry, "tool_approval", policy)?;
    }
    let options = config_options(session, &registry);
    let session_id = session.id.clone();
    d.send_update(
        &session_id,
        SessionUpdate::CurrentModeUpdate {
            current_mode_id: mode.to_string(),
        },
    );
    d.send_update(
        &session_id,
        SessionUpdate::ConfigOptionUpdate {
            config_options: options,
        },
    );
    settings_changed(d, &session_id);
    Ok(json!({}))
}

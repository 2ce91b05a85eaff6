//! Typed catalogs and invocation (docs/extensions.md, "Catalogs, invoke, reload"): the session's
//! settings and models, its operations (every slash command with when it
//! may run), invoking one, and reloading the runtime (config, commands,
//! AGENTS.md) fail-atomically.

use super::controls;
use super::controls::config_options;
use super::prompting;
use super::prompting::slash;
use super::prompting::TurnStart;
use super::reload;
use crate::acp::spindle::{
    results::{to_json, CatalogResult, InvokeResult, ReloadResult},
    InvokeParams, ModelsParams, OperationsParams, ReloadParams, SettingSetParams, SettingsParams,
};
use crate::agent::common::commands::{Builtin, Kind};
use crate::agent::dispatcher::Dispatcher;
use crate::rpc::RpcError;
use serde_json::{json, Value};

/// When an operation may run: `now` (answered at once, even while a turn
/// runs), `idle_only` (it runs a turn of its own).
fn admission(kind: &Kind) -> &'static str {
    match kind {
        Kind::Builtin(
            Builtin::Help
            | Builtin::Cost
            | Builtin::Model
            | Builtin::Mode
            | Builtin::Memory
            | Builtin::Skills
            | Builtin::Hooks,
        ) => "now",
        _ => "idle_only",
    }
}

fn setting_rows(d: &mut Dispatcher, id: &str) -> Result<Vec<Value>, RpcError> {
    let registry = d.registry()?;
    let options = config_options(d.checked(id), &registry);
    Ok(options
        .as_array()
        .into_iter()
        .flatten()
        .map(|option| {
            let values: Vec<Value> = option["options"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|choice| choice["value"].clone())
                .collect();
            json!({
                "name": option["id"],
                "value": option["currentValue"],
                "values": values,
                "description": option["description"],
            })
        })
        .collect())
}

pub(super) fn settings_catalog(
    d: &mut Dispatcher,
    params: SettingsParams,
) -> Result<Value, RpcError> {
    Ok(to_json(CatalogResult {
        items: setting_rows(d, params.session_id)?,
    }))
}

/// The same change as `session/set_config_option` (with its updates);
/// answers the updated row.
pub(super) fn setting_set(d: &mut Dispatcher, params: SettingSetParams) -> Result<Value, RpcError> {
    let SettingSetParams {
        session_id: id,
        name,
        value,
    } = params;
    let registry = d.registry()?;
    controls::change_option(d, id, &registry, name, value)?;
    setting_rows(d, id)?
        .into_iter()
        .find(|row| row["name"] == name)
        .ok_or_else(|| RpcError::internal("the setting vanished"))
}

pub(super) fn models_catalog(d: &mut Dispatcher, _: ModelsParams) -> Result<Value, RpcError> {
    let registry = d.registry()?;
    let items: Vec<Value> = registry
        .models
        .iter()
        .map(|model| {
            json!({
                "id": model.id,
                "provider": model.provider,
                "name": model.display_name(),
                "contextWindow": model.context_window(),
                "reasoning": model.reasoning(),
                "images": model.images(),
                "price": model.config.price,
            })
        })
        .collect();
    Ok(to_json(CatalogResult { items }))
}

pub(super) fn operations(d: &mut Dispatcher, params: OperationsParams) -> Result<Value, RpcError> {
    let cwd = d.checked(params.session_id).cwd().to_path_buf();
    let items: Vec<Value> = d
        .commands_of(&cwd)
        .iter()
        .map(|command| {
            json!({
                "name": command.name,
                "description": command.description,
                "inputHint": command.hint,
                "admission": admission(&command.kind),
            })
        })
        .collect();
    Ok(to_json(CatalogResult { items }))
}

/// `_spindle/invoke`: a local operation answers with its text; one that
/// needs the model (or the workspace) runs as a turn of its own.
pub(super) fn invoke(d: &mut Dispatcher, params: InvokeParams) -> Result<Value, RpcError> {
    let InvokeParams {
        session_id: id,
        operation: name,
        input,
    } = params;
    let cwd = d.checked(id).cwd().to_path_buf();
    let available = d.commands_of(&cwd);
    let Some(command) = available.iter().find(|c| c.name == name) else {
        return Err(RpcError::invalid_params(format!(
            "operation: there is no operation {name:?}; _spindle/operations lists them"
        ))
        .with_data(json!({"code": "unknown_operation"})));
    };
    let text = if input.is_empty() {
        format!("/{name}")
    } else {
        format!("/{name} {input}")
    };
    if admission(&command.kind) == "now" {
        let registry = d.registry()?;
        let reply = slash::local_reply(d, id, &text, &registry)?;
        return Ok(to_json(InvokeResult {
            text: reply,
            delivery: "immediate",
        }));
    }
    if d.checked(id).running.is_some() {
        return Err(RpcError::invalid_request(format!(
            "operation {name:?} runs a turn, and session {id} is busy; try again when it is idle"
        ))
        .with_data(json!({"code": "busy"})));
    }
    prompting::start_turn(
        d,
        id,
        &[json!({"type": "text", "text": text})],
        TurnStart {
            request: None,
            source: crate::agent::dispatcher::session::TurnSource::Invoke,
            item: None,
            wait: None,
            message_id: None,
        },
    )?;
    Ok(to_json(InvokeResult {
        text: format!("/{name} is running as a turn."),
        delivery: "scheduled",
    }))
}

/// `_spindle/session/reload`: builds a new runtime from the config
/// file and swaps it in only if it builds; while a turn runs, one
/// reload waits for it.
pub(super) fn reload(d: &mut Dispatcher, params: ReloadParams) -> Result<Value, RpcError> {
    let id = params.session_id;
    if d.checked(id).running.is_some() {
        if let Some(session) = d.session_mut(id) {
            session.queue_reload();
        }
        return Ok(to_json(ReloadResult {
            queued: true,
            reloaded: false,
        }));
    }
    reload::reload_now(d, id)?;
    // The commands follow the answer.
    d.announce_commands(id);
    Ok(to_json(ReloadResult {
        queued: false,
        reloaded: true,
    }))
}

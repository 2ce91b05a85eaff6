//! Reloading the runtime (config, providers, models, the agent file)
//! fail-atomically: now (`_spindle/session/reload`, `/reload`) or, when
//! a turn runs, once it ends.

use crate::agent::common::models::Registry;
use crate::agent::dispatcher::Dispatcher;
use crate::rpc::RpcError;
use serde_json::json;
use std::sync::Arc;

/// Rebuilds the registry (config, providers, models); a failure keeps
/// the old one and names the problem. Commands and AGENTS.md are read
/// at each turn already. The runtime is the process's: the other open
/// sessions hear their commands again at once; the caller tells `id`'s
/// (after its answer, or at once where none follows).
pub(super) fn reload_now(d: &mut Dispatcher, id: &str) -> Result<(), RpcError> {
    d.take_warm();
    let failed = |problem: String| {
        RpcError::failed(format!(
            "The reload failed, the old settings stay: {problem}"
        ))
        .with_data(json!({"code": "reload_failed"}))
    };
    // The agent file is read again too; a broken one changes nothing.
    let fresh = d.options().reread_agent().map_err(failed)?;
    let options = fresh.as_ref().unwrap_or(d.options());
    let built = Registry::build(options).map_err(failed)?;
    d.set_registry(Arc::new(built));
    if let Some(fresh) = fresh {
        d.set_options(fresh);
    }
    let others: Vec<String> = d
        .sessions()
        .filter(|(other, session)| other.as_str() != id && !session.is_closed())
        .map(|(other, _)| other.clone())
        .collect();
    for other in others {
        d.send_commands(&other);
    }
    Ok(())
}

/// After a turn: the reload that waited for it.
pub(super) fn queued_reload(d: &mut Dispatcher, id: &str) {
    let queued = d
        .session_mut(id)
        .map(crate::agent::dispatcher::session::Session::take_reload)
        .unwrap_or(false);
    if queued {
        match reload_now(d, id) {
            Ok(()) => d.send_commands(id),
            Err(error) => log::warn!(
                "the queued reload of session {id} failed: {}",
                error.message
            ),
        }
    }
}

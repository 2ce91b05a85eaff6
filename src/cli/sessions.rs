//! `spindle sessions …`.

use super::args::{SessionsAction, SessionsCommand};

/// Runs `spindle sessions …`; the error is a message for stderr.
pub fn run_sessions(command: SessionsCommand) -> Result<String, String> {
    let path = command.db.unwrap_or_else(crate::store::default_path);
    let store = crate::store::Store::open(&path).map_err(|e| e.to_string())?;
    // An id, or a unique prefix of one.
    let find = |given: &str| -> Result<String, String> {
        crate::history::resolve_id(&store, given)?
            .ok_or_else(|| format!("there is no session {given:?} in {}", path.display()))
    };
    match command.action {
        SessionsAction::List if command.json => {
            crate::history::list_json(&store, command.cwd.as_deref(), command.agent.as_deref())
                .map_err(|e| e.to_string())
        }
        SessionsAction::List => {
            crate::history::list(&store, command.cwd.as_deref(), command.agent.as_deref())
                .map_err(|e| e.to_string())
        }
        SessionsAction::Show(given) => {
            let id = find(&given)?;
            crate::history::show(&store, &id)
                .map_err(|e| e.to_string())?
                .ok_or_else(|| format!("there is no session {id:?} in {}", path.display()))
        }
        SessionsAction::Export(given) => {
            let id = find(&given)?;
            crate::history::export(&store, &id)
                .map_err(|e| e.to_string())?
                .ok_or_else(|| format!("there is no session {id:?} in {}", path.display()))
        }
        SessionsAction::Delete(given) => {
            let id = find(&given)?;
            if store.delete_session(&id).map_err(|e| e.to_string())? {
                crate::process::logs::remove_session(&path, &id);
                Ok(format!("Deleted session {id}.\n"))
            } else {
                Err(format!("there is no session {id:?} in {}", path.display()))
            }
        }
    }
}

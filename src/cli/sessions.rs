//! `spindle sessions …`.

use super::args::{SessionsAction, SessionsCommand};

/// Runs `spindle sessions …`; the error is a message for stderr.
pub(super) fn run_sessions(command: SessionsCommand) -> Result<String, String> {
    let path = command.db.unwrap_or_else(crate::store::default_path);
    let store = crate::store::Store::open(&path).map_err(|e| e.to_string())?;
    // An id, or a unique prefix of one.
    let find = |given: &str| -> Result<String, String> {
        crate::history::resolve_id(&store, given)?
            .ok_or_else(|| format!("there is no session {given:?} in {}", path.display()))
    };
    match command.action {
        SessionsAction::Prune {
            older_than_days,
            keep,
            dry_run,
        } => prune(
            &store,
            &path,
            command.cwd.as_deref(),
            older_than_days,
            keep,
            dry_run,
        ),
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

/// `spindle sessions prune`: the sessions nobody sent anything to, and
/// those not used for `older_than_days` or past the newest `keep` (of
/// `cwd`, when given); never one a live process holds.
fn prune(
    store: &crate::store::Store,
    path: &std::path::Path,
    cwd: Option<&str>,
    older_than_days: Option<u64>,
    keep: Option<usize>,
    dry_run: bool,
) -> Result<String, String> {
    let rows = store
        .list_sessions(cwd, None, usize::MAX >> 1, true)
        .map_err(|e| e.to_string())?;
    let now = crate::clock::now_ms();
    let mut out = String::new();
    let mut removed = 0;
    let mut kept_used = 0;
    for row in rows {
        let held = matches!((row.lease_pid, row.lease_expires_ms), (Some(pid), Some(until))
            if until > now && crate::store::process_alive(pid));
        let used = store.is_used(&row.id).map_err(|e| e.to_string())?;
        let age_days = crate::clock::parse_rfc3339(&row.updated_at)
            .map_or(0, |at| (now - at).max(0) / 86_400_000) as u64;
        let why = if !used {
            Some("empty".to_string())
        } else if older_than_days.is_some_and(|days| age_days >= days) {
            Some(format!("not used for {age_days} days"))
        } else if keep.is_some_and(|keep| kept_used >= keep) {
            Some("older than the newest kept".to_string())
        } else {
            kept_used += 1;
            None
        };
        let Some(why) = why.filter(|_| !held) else {
            continue;
        };
        let title = crate::util::visible(row.title.as_deref().unwrap_or("(untitled)"), false);
        out.push_str(&format!(
            "{} {} — {title} ({why})\n",
            if dry_run { "would remove" } else { "removed" },
            crate::util::visible(&row.id, false)
        ));
        if !dry_run {
            store.delete_session(&row.id).map_err(|e| e.to_string())?;
            crate::process::logs::remove_session(path, &row.id);
        }
        removed += 1;
    }
    out.push_str(&format!(
        "{} {}.\n",
        if dry_run { "Would remove" } else { "Removed" },
        crate::util::count(removed, "session", "sessions")
    ));
    Ok(out)
}

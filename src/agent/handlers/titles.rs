//! `session/set_title` and `session/status` (unstable ACP, advertised as
//! `sessionCapabilities.title` and `.status`): a title the user chose,
//! which no automatic title replaces, and whether a session is in memory.

use crate::acp;
use crate::agent::dispatcher::params::{internal, not_found};
use crate::agent::dispatcher::Dispatcher;
use crate::rpc::RpcError;
use serde_json::{json, Value};

/// The longest title kept, in characters; a longer one is cut with `…`.
pub(super) const TITLE_CAP: usize = 200;

/// `session/set_title`: stores the title (normalised: one line,
/// trimmed, capped) for any stored session, open here or not, keeps
/// it in the transcript, and tells this connection after the answer
/// when the session is open on it.
pub(super) fn set_title(
    d: &mut Dispatcher,
    request: acp::SetSessionTitleRequest,
) -> Result<Value, RpcError> {
    let title = normalized(&request.title).ok_or_else(|| {
        RpcError::invalid_params("title is empty; give the session a title with some text")
    })?;
    let id = request.session_id;
    let store = d.store()?;
    if store.session(&id).map_err(internal)?.is_none() {
        return Err(not_found(&id));
    }
    store.set_title(&id, &title).map_err(internal)?;
    // Kept in the transcript too, so a load replays this title last.
    let update = acp::SessionUpdate::SessionInfoUpdate {
        title: Some(title.clone()),
        updated_at: Some(crate::clock::now_rfc3339()),
    }
    .into_value();
    store
        .append_events(&id, 0, &[update.to_string()])
        .map_err(internal)?;
    log::info!("session {id} retitled by the client");
    if let Some(session) = d.session_mut(&id).filter(|s| !s.is_closed()) {
        session.title = Some(title.clone());
        if let Some(line) = d.update_line(&id, acp::fit::Update::Kept(update)) {
            d.follow_answer(line);
        }
    }
    Ok(json!({ "title": title }))
}

/// `session/status`: `open` when the session is in memory here,
/// `saved` when only the store has it. Changes nothing.
pub(super) fn session_status(
    d: &mut Dispatcher,
    request: acp::SessionIdRequest,
) -> Result<Value, RpcError> {
    let id = request.session_id;
    if d.session(&id).is_some_and(|s| !s.is_closed()) {
        return Ok(json!({"status": "open"}));
    }
    match d.store()?.session(&id).map_err(internal)? {
        Some(_) => Ok(json!({"status": "saved"})),
        None => Err(not_found(&id)),
    }
}

/// A client's title as kept: control characters (line breaks among them)
/// become spaces, runs of spaces one, the ends trimmed, at most
/// `TITLE_CAP` characters; `None` when nothing is left.
pub(super) fn normalized(title: &str) -> Option<String> {
    let spaced: String = title
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    let words: Vec<&str> = spaced.split_whitespace().collect();
    let joined = words.join(" ");
    if joined.is_empty() {
        return None;
    }
    if joined.chars().count() <= TITLE_CAP {
        return Some(joined);
    }
    let cut: String = joined.chars().take(TITLE_CAP - 1).collect();
    Some(format!("{}…", cut.trim_end()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_title_is_one_trimmed_capped_line() {
        assert_eq!(
            normalized("  Fix the parser \n"),
            Some("Fix the parser".into())
        );
        assert_eq!(normalized("a\nb\u{1b}[31mc\td"), Some("a b [31mc d".into()));
        assert_eq!(normalized(" \n\t "), None);
        assert_eq!(normalized(""), None);
        let long = normalized(&"é".repeat(500)).unwrap();
        assert_eq!(long.chars().count(), TITLE_CAP);
        assert!(long.ends_with('…'));
    }
}

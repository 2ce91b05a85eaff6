//! Turn events (docs/extensions.md, "Turn events"): the numbered
//! `_spindle/event` notifications, for clients that opted in.

use crate::agent::dispatcher::Dispatcher;
use serde_json::{json, Value};

/// Sends `_spindle/event` for a session, numbered without gaps.
pub(super) fn event(d: &mut Dispatcher, session_id: &str, kind: &str, data: Value) {
    if let Some(line) = event_line(d, session_id, kind, data) {
        d.send_line(line);
    }
}

/// The next event of a session as a line, numbered, to send now or
/// after an answer; `None` for a client that did not opt in to events
/// (`clientCapabilities._meta.spindle.events`), which sees pure ACP.
/// The number counts only events sent, so an opted-in client sees no
/// gap.
pub(super) fn event_line(
    d: &mut Dispatcher,
    session_id: &str,
    kind: &str,
    data: Value,
) -> Option<String> {
    if !wants_events(d) {
        return None;
    }
    let session = d.session_mut(session_id)?;
    let seq = session.next_event_seq();
    Some(crate::rpc::notification_line(
        "_spindle/event",
        &json!({"sessionId": session_id, "seq": seq, "kind": kind, "data": data}),
    ))
}

/// Whether the client asked for vendor notifications in `initialize`.
pub(super) fn wants_events(d: &Dispatcher) -> bool {
    d.client().is_some_and(|client| client.meta.spindle.events)
}

/// After a session opened: its MCP servers' state, as an `mcp` event
/// that follows the answer.
pub(super) fn announce_mcp(d: &mut Dispatcher, session_id: &str) {
    let Some(status) = d
        .session(session_id)
        .and_then(|s| s.mcp.as_ref())
        .map(|m| m.status())
    else {
        return;
    };
    if let Some(line) = event_line(d, session_id, "mcp", json!({"servers": status})) {
        d.follow_answer(line);
    }
}

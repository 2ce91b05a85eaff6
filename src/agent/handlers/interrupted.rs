//! A turn cut off by a crash or a stop, closed when its session is next
//! loaded or prompted: its open tool calls failed, the transcript and the
//! conversation told.

use crate::acp::{self, ContentChunk, SessionUpdate, ToolCallStatus};
use crate::agent::dispatcher::params::internal;
use crate::provider::{Message, Role};
use crate::rpc::RpcError;
use crate::store::Store;
use serde_json::{json, Value};
use std::collections::HashSet;

/// Marks a cut-off turn as interrupted: every tool call it showed without a
/// final status gets one, the transcript says the turn was interrupted, and
/// the conversation gets an answer for every tool call the model made.
pub(super) fn close_interrupted_turn(
    store: &mut Store,
    id: &str,
    turn: i64,
) -> Result<(), RpcError> {
    let mut open: Vec<String> = Vec::new();
    let mut finished: HashSet<String> = HashSet::new();
    for body in store.events(id).map_err(internal)? {
        let Ok(event) = serde_json::from_str::<Value>(&body) else {
            continue;
        };
        let Some(call_id) = event["toolCallId"].as_str() else {
            continue;
        };
        match event["sessionUpdate"].as_str() {
            Some("tool_call") => open.push(call_id.to_string()),
            Some("tool_call_update")
                if matches!(event["status"].as_str(), Some("completed" | "failed")) =>
            {
                finished.insert(call_id.to_string());
            }
            _ => {}
        }
    }
    let note = "Interrupted: Spindle stopped before this finished.";
    let mut events: Vec<String> = open
        .iter()
        .filter(|call| !finished.contains(*call))
        .map(|call| {
            let content = json!({"type": "content", "content": acp::text_block(note)});
            SessionUpdate::tool_call_ended(call, ToolCallStatus::Failed, vec![content])
                .into_value()
                .to_string()
        })
        .collect();
    events.push(
        SessionUpdate::AgentMessageChunk(ContentChunk::text(
            "\n\n_(This turn was interrupted: Spindle stopped before it finished.)_",
            format!("interrupted_{turn}"),
        ))
        .into_value()
        .to_string(),
    );
    let messages = store.messages(id).map_err(internal)?;
    let mut answers = Vec::new();
    if let Some(last_call) = messages.iter().rposition(|m| !m.tool_calls.is_empty()) {
        let answered: HashSet<&str> = messages[last_call + 1..]
            .iter()
            .filter(|m| m.role == Role::Tool)
            .filter_map(|m| m.tool_call_id.as_deref())
            .collect();
        for call in &messages[last_call].tool_calls {
            if !answered.contains(call.id.as_str()) {
                answers.push(Message::tool_result(&call.id, note));
            }
        }
    }
    log::info!("turn {turn} of session {id} was interrupted; closing it");
    store
        .mark_interrupted(id, turn, &events, &answers)
        .map_err(internal)
}

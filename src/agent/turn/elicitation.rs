//! An MCP server's question during one of its tool calls, put to the
//! editor as `elicitation/create` tied to that tool call. The MCP client
//! has already checked the question (`mcp/elicit.rs`); this side only
//! builds the request, waits on the turn's own thread (the turn owns its
//! client requests) and reads the answer.

use super::client::{Client, ClientError};
use crate::acp::method;
use crate::cancel::CancelToken;
use crate::mcp::{ElicitAnswer, ElicitError, ElicitErrorKind, Elicitation, Elicitor};
use serde_json::{json, Value};
use std::time::Instant;

/// Forwards the questions of one MCP tool call to the editor.
pub(super) struct Forward<'a> {
    pub client: &'a Client,
    pub tool_call_id: &'a str,
}

impl Elicitor for Forward<'_> {
    fn elicit(
        &self,
        request: &Elicitation,
        stops: &[&CancelToken],
        deadline: Instant,
    ) -> Result<ElicitAnswer, ElicitError> {
        let modes = &self.client.capabilities.elicitation;
        let params = match request {
            Elicitation::Form { message, schema } if modes.form => json!({
                "sessionId": self.client.session_id,
                "toolCallId": self.tool_call_id,
                "mode": "form",
                "message": message,
                "requestedSchema": schema,
            }),
            Elicitation::Url { message, id, url } if modes.url => json!({
                "sessionId": self.client.session_id,
                "toolCallId": self.tool_call_id,
                "mode": "url",
                "message": message,
                "elicitationId": id,
                "url": url,
            }),
            _ => {
                return Err(ElicitError::new(
                    ElicitErrorKind::Unsupported,
                    "the editor does not take this kind of elicitation",
                ))
            }
        };
        match self
            .client
            .request_until(method::ELICITATION_CREATE, params, stops, deadline)
        {
            Ok(answer) => Ok(read_answer(&answer)),
            Err(ClientError::Cancelled) | Err(ClientError::Gone) => Ok(ElicitAnswer::Cancel),
            Err(ClientError::Rpc(error)) => {
                let message: String = error.message.chars().take(300).collect();
                Err(ElicitError::new(
                    ElicitErrorKind::Editor,
                    format!("the editor refused the question: {message}"),
                ))
            }
        }
    }
}

/// The editor's answer: `accept` (with its content, if an object),
/// `decline`, `cancel`; an action Spindle does not know counts as
/// `cancel`, never as an acceptance.
fn read_answer(answer: &Value) -> ElicitAnswer {
    match answer["action"].as_str() {
        Some("accept") => {
            let content = answer["content"].as_object().cloned().unwrap_or_default();
            ElicitAnswer::Accept(content)
        }
        Some("decline") => ElicitAnswer::Decline,
        Some("cancel") => ElicitAnswer::Cancel,
        other => {
            log::debug!(
                "the editor answered an elicitation with the action {other:?}; taken as cancel"
            );
            ElicitAnswer::Cancel
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Map;

    #[test]
    fn unknown_actions_are_no_acceptance() {
        assert_eq!(
            read_answer(&json!({"action": "accept", "content": {"a": 1}})),
            ElicitAnswer::Accept(Map::from_iter([("a".to_string(), json!(1))]))
        );
        assert_eq!(
            read_answer(&json!({"action": "accept"})),
            ElicitAnswer::Accept(Map::new())
        );
        assert_eq!(
            read_answer(&json!({"action": "decline"})),
            ElicitAnswer::Decline
        );
        assert_eq!(
            read_answer(&json!({"action": "_approve"})),
            ElicitAnswer::Cancel
        );
        assert_eq!(read_answer(&json!("accept")), ElicitAnswer::Cancel);
    }
}

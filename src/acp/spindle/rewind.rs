//! The params and results of the cross-agent rewind methods,
//! `_session/rewind_points` and `_session/rewind` (the shape proposed for
//! claude-agent-acp, docs/extensions.md "Rewind").

use super::{bad, optional_string, string, FromParams, SessionCheck};
use crate::rpc::RpcError;
use serde::Serialize;
use serde_json::Value;

/// `_session/rewind_points`: the session only.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct RewindPointsParams<'a> {
    pub session_id: &'a str,
}

impl<'a> FromParams<'a> for RewindPointsParams<'a> {
    const SESSION: SessionCheck = SessionCheck::Open;
    fn read(session_id: &'a str, _params: &'a Value) -> Result<Self, RpcError> {
        Ok(RewindPointsParams { session_id })
    }
}

/// What a rewind puts back.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum RewindMode {
    Files,
    Conversation,
    Both,
}

impl RewindMode {
    pub(crate) fn files(self) -> bool {
        matches!(self, RewindMode::Files | RewindMode::Both)
    }

    pub(crate) fn conversation(self) -> bool {
        matches!(self, RewindMode::Conversation | RewindMode::Both)
    }
}

/// `_session/rewind`.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct RewindParams<'a> {
    pub session_id: &'a str,
    pub message_id: &'a str,
    pub mode: RewindMode,
    pub dry_run: bool,
}

impl<'a> FromParams<'a> for RewindParams<'a> {
    const SESSION: SessionCheck = SessionCheck::Open;
    fn read(session_id: &'a str, params: &'a Value) -> Result<Self, RpcError> {
        let message_id = string(params, "messageId")?;
        let mode = match optional_string(params, "mode")? {
            // The proposal's default.
            None | Some("files") => RewindMode::Files,
            Some("conversation") => RewindMode::Conversation,
            Some("both") => RewindMode::Both,
            Some(other) => {
                return Err(bad(
                    "mode",
                    &format!("must be \"files\", \"conversation\" or \"both\", not {other:?}"),
                ))
            }
        };
        let dry_run = match params.get("dryRun") {
            None | Some(Value::Null) => false,
            Some(Value::Bool(flag)) => *flag,
            Some(_) => return Err(bad("dryRun", "must be true or false")),
        };
        Ok(RewindParams {
            session_id,
            message_id,
            mode,
            dry_run,
        })
    }
}

/// One point of `_session/rewind_points`.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct RewindPoint {
    pub message_id: String,
    pub text: String,
    pub index: usize,
    /// Files changed by this prompt's turn and the later ones, still in
    /// the workspace.
    pub files_changed: usize,
    /// Whether every one of them can be put back.
    pub can_rewind_files: bool,
    /// Whether the conversation can be cut before this prompt.
    pub can_rewind_conversation: bool,
}

#[derive(Debug, Serialize)]
pub(crate) struct RewindPointsResult {
    pub points: Vec<RewindPoint>,
}

/// One file a rewind puts back: `restored`, `deleted` or `recreated`.
#[derive(Debug, Serialize)]
pub(crate) struct RewoundFile {
    pub path: String,
    pub action: &'static str,
}

/// The files half of `_session/rewind`'s answer.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct RewindFiles {
    pub can_rewind: bool,
    pub files_changed: Vec<String>,
    pub files: Vec<RewoundFile>,
}

/// The conversation half of `_session/rewind`'s answer.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct RewindConversation {
    pub rewound: bool,
    pub messages_dropped: i64,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct RewindResult {
    pub dry_run: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub files: Option<RewindFiles>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub conversation: Option<RewindConversation>,
}

#[cfg(test)]
mod tests {
    use super::super::read;
    use super::*;
    use serde_json::json;

    #[test]
    fn rewind_params_are_read_field_by_field() {
        let params = json!({"sessionId": "s", "messageId": "u1", "mode": "both", "dryRun": true});
        let read: RewindParams = read(&params).unwrap();
        assert_eq!(read.mode, RewindMode::Both);
        assert!(read.dry_run);
        let params = json!({"sessionId": "s", "messageId": "u1"});
        let read: RewindParams = super::super::read(&params).unwrap();
        assert_eq!((read.mode, read.dry_run), (RewindMode::Files, false));
        for (params, field) in [
            (json!({"sessionId": "s"}), "messageId: is missing"),
            (
                json!({"sessionId": "s", "messageId": 3}),
                "messageId: must be",
            ),
            (
                json!({"sessionId": "s", "messageId": "u", "mode": "all"}),
                "mode: must be",
            ),
            (
                json!({"sessionId": "s", "messageId": "u", "dryRun": "yes"}),
                "dryRun: must be",
            ),
        ] {
            let error = super::super::read::<RewindParams>(&params).unwrap_err();
            assert_eq!(error.code, -32602);
            assert!(error.message.contains(field), "{}", error.message);
        }
    }
}

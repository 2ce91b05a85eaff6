//! The params of Spindle's vendor methods (`_spindle/*` and the
//! cross-agent `_session/steering`, docs/extensions.md): one type per method,
//! read from the request's params object field by field ([`FromParams`]).
//! A field that is missing, of the wrong type or out of bounds is -32602
//! naming it, with `data.code: "invalid_params"` (docs/extensions.md, "Conventions").
//!
//! Read by hand rather than by serde derive: the messages name the field
//! in the contract's words, and the binary stays small.

use crate::rpc::RpcError;
use serde_json::{json, Value};

pub(crate) mod results;
pub(crate) mod rewind;

/// A bad field: -32602 `"{field}: {why}"`, `data.code: "invalid_params"`.
pub(crate) fn bad(field: &str, why: &str) -> RpcError {
    RpcError::invalid_params(format!("{field}: {why}")).with_data(json!({"code": "invalid_params"}))
}

/// How a method names its session: checked (read, then found open) before
/// any other field is read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum SessionCheck {
    /// The session methods' wording (`sessionId: is missing`, "open it
    /// with session/new, ...").
    Open,
    /// The catalog methods' wording (`sessionId: is missing or not a
    /// string`).
    Catalog,
}

impl SessionCheck {
    /// The `sessionId` field, in this check's wording.
    pub(crate) fn session_id(self, params: &Value) -> Result<&str, RpcError> {
        match self {
            SessionCheck::Open => string(params, "sessionId"),
            SessionCheck::Catalog => params["sessionId"]
                .as_str()
                .ok_or_else(|| bad("sessionId", "is missing or not a string")),
        }
    }

    /// The answer for a session that is not open in this process.
    pub(crate) fn not_open(self, id: &str) -> RpcError {
        let message = match self {
            SessionCheck::Open => format!(
                "session {id:?} is not open in this process; open it with session/new, session/load or session/resume"
            ),
            SessionCheck::Catalog => format!("session {id:?} is not open in this process"),
        };
        RpcError::invalid_params(message).with_data(json!({"code": "unknown_session"}))
    }
}

/// A vendor method's params, read from its params object (params that
/// are not an object read as one without fields).
pub(crate) trait FromParams<'a>: Sized {
    /// The session check that comes first, before [`FromParams::read`].
    const SESSION: SessionCheck;
    /// The params of session `session_id` (checked already), every other
    /// field checked.
    fn read(session_id: &'a str, params: &'a Value) -> Result<Self, RpcError>;
}

/// Reads params as `T`, the session first (without checking that it is
/// open): for tests, and callers that check the session themselves.
#[cfg(test)]
pub(crate) fn read<'a, T: FromParams<'a>>(params: &'a Value) -> Result<T, RpcError> {
    T::read(T::SESSION.session_id(params)?, params)
}

// ---------------------------------------------------------------------
// Fields
// ---------------------------------------------------------------------

/// A required string.
pub(crate) fn string<'a>(params: &'a Value, field: &str) -> Result<&'a str, RpcError> {
    match params.get(field) {
        Some(Value::String(text)) => Ok(text),
        Some(_) => Err(bad(field, "must be a string")),
        None => Err(bad(field, "is missing")),
    }
}

/// A string that may be absent or `null`.
pub(crate) fn optional_string<'a>(
    params: &'a Value,
    field: &str,
) -> Result<Option<&'a str>, RpcError> {
    match params.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(text)) => Ok(Some(text)),
        Some(_) => Err(bad(field, "must be a string")),
    }
}

/// A whole number from 0 to `max`; `default` when absent or `null`.
pub(crate) fn count(
    params: &Value,
    field: &'static str,
    default: u64,
    max: u64,
) -> Result<u64, RpcError> {
    Count::read(params, field).within(default, max)
}

/// A count whose bounds depend on what the request names (a job's kind):
/// read now, checked by [`Count::within`] once they are known.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Count {
    field: &'static str,
    /// `Ok(None)`: absent or `null`; `Err`: not a whole number.
    value: Result<Option<u64>, ()>,
}

impl Count {
    pub(crate) fn read(params: &Value, field: &'static str) -> Count {
        let value = match params.get(field) {
            None | Some(Value::Null) => Ok(None),
            Some(value) => value.as_u64().map(Some).ok_or(()),
        };
        Count { field, value }
    }

    /// The number, from 0 to `max`; `default` when it was not given.
    pub(crate) fn within(self, default: u64, max: u64) -> Result<u64, RpcError> {
        match self.value {
            Ok(None) => Ok(default),
            Ok(Some(n)) if n <= max => Ok(n),
            _ => Err(bad(
                self.field,
                &format!("must be a whole number from 0 to {max}"),
            )),
        }
    }
}

/// The prompt of a request: `prompt` (content blocks) or, where allowed,
/// `text`; it must hold some content.
pub(crate) fn prompt(params: &Value, text_allowed: bool) -> Result<Vec<Value>, RpcError> {
    let blocks = match (params.get("prompt"), params.get("text")) {
        (Some(Value::Array(blocks)), _) => blocks.clone(),
        (Some(_), _) => return Err(bad("prompt", "must be an array of content blocks")),
        (None, Some(Value::String(text))) if text_allowed => {
            vec![json!({"type": "text", "text": text})]
        }
        (None, Some(_)) if text_allowed => return Err(bad("text", "must be a string")),
        _ => {
            return Err(bad(
                "prompt",
                if text_allowed {
                    "give prompt (content blocks) or text"
                } else {
                    "is missing"
                },
            ))
        }
    };
    let has_content = blocks.iter().any(|block| match block["type"].as_str() {
        Some("text") => block["text"].as_str().is_some_and(|t| !t.trim().is_empty()),
        Some(_) => true,
        None => false,
    });
    if !has_content {
        return Err(bad("prompt", "is empty"));
    }
    Ok(blocks)
}

/// The most characters of an idempotency key.
const KEY_CAP: usize = 200;

/// `idempotencyKey`: absent, or 1 to 200 characters.
fn idempotency_key(params: &Value) -> Result<Option<&str>, RpcError> {
    let key = optional_string(params, "idempotencyKey")?;
    if key.is_some_and(|key| key.is_empty() || key.len() > KEY_CAP) {
        return Err(bad("idempotencyKey", "must be 1 to 200 characters"));
    }
    Ok(key)
}

// ---------------------------------------------------------------------
// Sessions: status, inbox, goals
// ---------------------------------------------------------------------

/// Params naming only an open session.
#[derive(Debug, PartialEq)]
pub(crate) struct SessionParams<'a> {
    pub session_id: &'a str,
}

impl<'a> FromParams<'a> for SessionParams<'a> {
    const SESSION: SessionCheck = SessionCheck::Open;
    fn read(session_id: &'a str, _: &'a Value) -> Result<Self, RpcError> {
        Ok(SessionParams { session_id })
    }
}

/// `_spindle/session/status`.
pub(crate) type StatusParams<'a> = SessionParams<'a>;
/// `_spindle/session/inbox/list`.
pub(crate) type InboxListParams<'a> = SessionParams<'a>;
/// `_spindle/session/goal/pause`.
pub(crate) type GoalPauseParams<'a> = SessionParams<'a>;
/// `_spindle/session/goal/resume`.
pub(crate) type GoalResumeParams<'a> = SessionParams<'a>;

/// `_spindle/session/steer`.
#[derive(Debug, PartialEq)]
pub(crate) struct SteerParams<'a> {
    pub session_id: &'a str,
    pub prompt: Vec<Value>,
    pub idempotency_key: Option<&'a str>,
}

impl<'a> FromParams<'a> for SteerParams<'a> {
    const SESSION: SessionCheck = SessionCheck::Open;
    fn read(session_id: &'a str, params: &'a Value) -> Result<Self, RpcError> {
        Ok(SteerParams {
            session_id,
            prompt: prompt(params, false)?,
            idempotency_key: idempotency_key(params)?,
        })
    }
}

/// What `_session/steering` does in an idle session.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum IdleBehavior {
    StartNewTurn,
    PromptRequired,
}

/// `_session/steering`: a steer, and what to do when no turn runs.
#[derive(Debug, PartialEq)]
pub(crate) struct SteeringParams<'a> {
    pub idle: IdleBehavior,
    pub steer: SteerParams<'a>,
}

impl<'a> FromParams<'a> for SteeringParams<'a> {
    const SESSION: SessionCheck = SessionCheck::Open;
    fn read(session_id: &'a str, params: &'a Value) -> Result<Self, RpcError> {
        let idle = match params.pointer("/_meta/steering/idleBehavior") {
            None | Some(Value::Null) => IdleBehavior::StartNewTurn,
            Some(Value::String(value)) if value == "promptRequired" => IdleBehavior::PromptRequired,
            Some(Value::String(value)) if value == "startNewTurn" => IdleBehavior::StartNewTurn,
            Some(other) => {
                return Err(bad(
                    "_meta.steering.idleBehavior",
                    &format!("must be startNewTurn or promptRequired, not {other}"),
                ))
            }
        };
        Ok(SteeringParams {
            idle,
            steer: SteerParams::read(session_id, params)?,
        })
    }
}

/// What an inbox item asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Intent {
    Followup,
    Steer,
}

impl Intent {
    pub fn id(self) -> &'static str {
        match self {
            Intent::Followup => "followup",
            Intent::Steer => "steer",
        }
    }
}

/// `_spindle/session/inbox/enqueue`.
#[derive(Debug, PartialEq)]
pub(crate) struct EnqueueParams<'a> {
    pub session_id: &'a str,
    pub prompt: Vec<Value>,
    pub intent: Intent,
    pub idempotency_key: Option<&'a str>,
}

impl<'a> FromParams<'a> for EnqueueParams<'a> {
    const SESSION: SessionCheck = SessionCheck::Open;
    fn read(session_id: &'a str, params: &'a Value) -> Result<Self, RpcError> {
        let prompt = prompt(params, true)?;
        let intent = match optional_string(params, "intent")? {
            None | Some("followup") => Intent::Followup,
            Some("steer") => Intent::Steer,
            Some(other) => {
                return Err(bad(
                    "intent",
                    &format!("must be followup or steer, not {other:?}"),
                ))
            }
        };
        Ok(EnqueueParams {
            session_id,
            prompt,
            intent,
            idempotency_key: idempotency_key(params)?,
        })
    }
}

/// Params naming one item of a session's inbox.
#[derive(Debug, PartialEq)]
pub(crate) struct ItemParams<'a> {
    pub session_id: &'a str,
    pub item_id: &'a str,
}

impl<'a> FromParams<'a> for ItemParams<'a> {
    const SESSION: SessionCheck = SessionCheck::Open;
    fn read(session_id: &'a str, params: &'a Value) -> Result<Self, RpcError> {
        Ok(ItemParams {
            session_id,
            item_id: string(params, "itemId")?,
        })
    }
}

/// `_spindle/session/inbox/update`: an item's new prompt.
#[derive(Debug, PartialEq)]
pub(crate) struct InboxUpdateParams<'a> {
    pub item: ItemParams<'a>,
    pub prompt: Vec<Value>,
}

impl<'a> FromParams<'a> for InboxUpdateParams<'a> {
    const SESSION: SessionCheck = SessionCheck::Open;
    fn read(session_id: &'a str, params: &'a Value) -> Result<Self, RpcError> {
        Ok(InboxUpdateParams {
            item: ItemParams::read(session_id, params)?,
            prompt: prompt(params, true)?,
        })
    }
}

/// `_spindle/session/inbox/move`: an item's new place among the pending.
#[derive(Debug, PartialEq)]
pub(crate) struct InboxMoveParams<'a> {
    pub item: ItemParams<'a>,
    pub to_index: u64,
}

impl<'a> FromParams<'a> for InboxMoveParams<'a> {
    const SESSION: SessionCheck = SessionCheck::Open;
    fn read(session_id: &'a str, params: &'a Value) -> Result<Self, RpcError> {
        let item = ItemParams::read(session_id, params)?;
        let to_index = match params.get("toIndex") {
            Some(value) => value
                .as_u64()
                .ok_or_else(|| bad("toIndex", "must be a number from 0"))?,
            None => return Err(bad("toIndex", "is missing")),
        };
        Ok(InboxMoveParams { item, to_index })
    }
}

/// `_spindle/session/inbox/setPaused`.
#[derive(Debug, PartialEq)]
pub(crate) struct InboxSetPausedParams<'a> {
    pub session_id: &'a str,
    pub paused: bool,
}

impl<'a> FromParams<'a> for InboxSetPausedParams<'a> {
    const SESSION: SessionCheck = SessionCheck::Open;
    fn read(session_id: &'a str, params: &'a Value) -> Result<Self, RpcError> {
        Ok(InboxSetPausedParams {
            session_id,
            paused: params
                .get("paused")
                .ok_or_else(|| bad("paused", "is missing"))?
                .as_bool()
                .ok_or_else(|| bad("paused", "must be true or false"))?,
        })
    }
}

// ---------------------------------------------------------------------
// Catalogs and invocation
// ---------------------------------------------------------------------

/// Params naming only an open session, for the catalog methods.
#[derive(Debug, PartialEq)]
pub(crate) struct CatalogParams<'a> {
    pub session_id: &'a str,
}

impl<'a> FromParams<'a> for CatalogParams<'a> {
    const SESSION: SessionCheck = SessionCheck::Catalog;
    fn read(session_id: &'a str, _: &'a Value) -> Result<Self, RpcError> {
        Ok(CatalogParams { session_id })
    }
}

/// `_spindle/settings`.
pub(crate) type SettingsParams<'a> = CatalogParams<'a>;
/// `_spindle/models`.
pub(crate) type ModelsParams<'a> = CatalogParams<'a>;
/// `_spindle/operations`.
pub(crate) type OperationsParams<'a> = CatalogParams<'a>;
/// `_spindle/session/reload`.
pub(crate) type ReloadParams<'a> = CatalogParams<'a>;

/// A catalog method's string field (missing and not a string read alike).
fn catalog_string<'a>(params: &'a Value, field: &str) -> Result<&'a str, RpcError> {
    params[field]
        .as_str()
        .ok_or_else(|| bad(field, "is missing or not a string"))
}

/// `_spindle/setting/set`.
#[derive(Debug, PartialEq)]
pub(crate) struct SettingSetParams<'a> {
    pub session_id: &'a str,
    pub name: &'a str,
    pub value: &'a str,
}

impl<'a> FromParams<'a> for SettingSetParams<'a> {
    const SESSION: SessionCheck = SessionCheck::Catalog;
    fn read(session_id: &'a str, params: &'a Value) -> Result<Self, RpcError> {
        Ok(SettingSetParams {
            session_id,
            name: catalog_string(params, "name")?,
            value: catalog_string(params, "value")?,
        })
    }
}

/// `_spindle/invoke`: an operation by name (a leading `/` dropped) and its
/// input (`arguments.input`, or `arguments.text`; empty when absent).
#[derive(Debug, PartialEq)]
pub(crate) struct InvokeParams<'a> {
    pub session_id: &'a str,
    pub operation: &'a str,
    pub input: &'a str,
}

impl<'a> FromParams<'a> for InvokeParams<'a> {
    const SESSION: SessionCheck = SessionCheck::Catalog;
    fn read(session_id: &'a str, params: &'a Value) -> Result<Self, RpcError> {
        let operation = catalog_string(params, "operation")?.trim_start_matches('/');
        let input = match params.get("arguments") {
            None | Some(Value::Null) => "",
            Some(arguments) => match arguments.get("input").or_else(|| arguments.get("text")) {
                None | Some(Value::Null) => "",
                Some(Value::String(text)) => text,
                Some(_) => return Err(bad("arguments.input", "must be a string")),
            },
        };
        Ok(InvokeParams {
            session_id,
            operation,
            input,
        })
    }
}

// ---------------------------------------------------------------------
// Jobs and resources
// ---------------------------------------------------------------------

/// The most jobs one page of `_spindle/jobs` lists.
const JOBS_PAGE_CAP: u64 = 500;

/// `_spindle/jobs`: a page of the session's jobs.
#[derive(Debug, PartialEq)]
pub(crate) struct JobsParams<'a> {
    pub session_id: &'a str,
    /// Where the page starts (the cursor an earlier page gave).
    pub start: usize,
    /// The most jobs on the page, at least 1.
    pub limit: usize,
}

impl<'a> FromParams<'a> for JobsParams<'a> {
    const SESSION: SessionCheck = SessionCheck::Open;
    fn read(session_id: &'a str, params: &'a Value) -> Result<Self, RpcError> {
        let start = match params.get("cursor") {
            None | Some(Value::Null) => 0,
            Some(Value::String(cursor)) => cursor
                .parse::<usize>()
                .map_err(|_| bad("cursor", "is not a cursor this agent gave"))?,
            Some(_) => return Err(bad("cursor", "must be a string")),
        };
        let limit = count(params, "limit", 100, JOBS_PAGE_CAP)?.max(1) as usize;
        Ok(JobsParams {
            session_id,
            start,
            limit,
        })
    }
}

/// Params naming one job of a session.
#[derive(Debug, PartialEq)]
pub(crate) struct JobParams<'a> {
    pub session_id: &'a str,
    pub job_id: &'a str,
}

impl<'a> FromParams<'a> for JobParams<'a> {
    const SESSION: SessionCheck = SessionCheck::Open;
    fn read(session_id: &'a str, params: &'a Value) -> Result<Self, RpcError> {
        Ok(JobParams {
            session_id,
            job_id: string(params, "jobId")?,
        })
    }
}

/// The most bytes `_spindle/job/send` writes to a job at once: below a
/// pipe's capacity, so a job that reads gets it whole.
pub(crate) const JOB_SEND_CAP: usize = 16 * 1024;

/// `_spindle/job/send`: text for a job's input.
#[derive(Debug, PartialEq)]
pub(crate) struct JobSendParams<'a> {
    pub job: JobParams<'a>,
    pub text: &'a str,
}

impl<'a> FromParams<'a> for JobSendParams<'a> {
    const SESSION: SessionCheck = SessionCheck::Open;
    fn read(session_id: &'a str, params: &'a Value) -> Result<Self, RpcError> {
        let job = JobParams::read(session_id, params)?;
        let text = string(params, "text")?;
        if text.len() > JOB_SEND_CAP {
            return Err(bad("text", "is too long").with_data(json!({"code": "too_large"})));
        }
        Ok(JobSendParams { job, text })
    }
}

/// The largest offset a window starts from.
const OFFSET_CAP: u64 = u64::MAX >> 1;

/// `_spindle/job/transcript`. Which `output` applies and how many `limit`
/// may be depend on the job's kind, so those are checked by the handler.
#[derive(Debug, PartialEq)]
pub(crate) struct JobTranscriptParams<'a> {
    pub job: JobParams<'a>,
    pub output: Option<&'a str>,
    pub offset: u64,
    pub limit: Count,
}

impl<'a> FromParams<'a> for JobTranscriptParams<'a> {
    const SESSION: SessionCheck = SessionCheck::Open;
    fn read(session_id: &'a str, params: &'a Value) -> Result<Self, RpcError> {
        Ok(JobTranscriptParams {
            job: JobParams::read(session_id, params)?,
            output: optional_string(params, "output")?,
            offset: count(params, "offset", 0, OFFSET_CAP)?,
            limit: Count::read(params, "limit"),
        })
    }
}

/// The most characters of one text window.
pub(crate) const WINDOW_CAP: u64 = 262_144;

/// What `_spindle/resource` reads, by its `uri`.
#[derive(Debug, PartialEq)]
pub(crate) enum Window<'a> {
    /// `shell-log:JOB`: bytes of a job's log.
    Log {
        job_id: &'a str,
        byte_offset: u64,
        byte_count: u64,
    },
    /// `workspace:PATH`: lines of a workspace file, from line 1 up.
    File {
        path: &'a str,
        start_line: u64,
        line_count: u64,
    },
}

/// `_spindle/resource`.
#[derive(Debug, PartialEq)]
pub(crate) struct ResourceParams<'a> {
    pub session_id: &'a str,
    pub window: Window<'a>,
}

impl<'a> FromParams<'a> for ResourceParams<'a> {
    const SESSION: SessionCheck = SessionCheck::Open;
    fn read(session_id: &'a str, params: &'a Value) -> Result<Self, RpcError> {
        let uri = string(params, "uri")?;
        let window = if let Some(job_id) = uri.strip_prefix("shell-log:") {
            Window::Log {
                job_id,
                byte_offset: count(params, "byteOffset", 0, OFFSET_CAP)?,
                byte_count: count(params, "byteCount", 65_536, WINDOW_CAP)?,
            }
        } else if let Some(path) = uri.strip_prefix("workspace:") {
            Window::File {
                path,
                start_line: count(params, "startLine", 1, OFFSET_CAP)?.max(1),
                line_count: count(params, "lineCount", 200, 2_000)?,
            }
        } else {
            return Err(bad("uri", "must start with workspace: or shell-log:"));
        };
        Ok(ResourceParams { session_id, window })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused<'a, T: FromParams<'a> + std::fmt::Debug>(params: &'a Value) -> RpcError {
        read::<T>(params).unwrap_err()
    }

    fn assert_names(error: &RpcError, field: &str, why: &str) {
        assert_eq!(error.code, crate::rpc::code::INVALID_PARAMS, "{error:?}");
        assert_eq!(
            error.message,
            format!("Invalid params: {field}: {why}"),
            "{error:?}"
        );
        assert_eq!(error.data, Some(json!({"code": "invalid_params"})));
    }

    #[test]
    fn a_missing_or_mistyped_field_is_named_with_its_class() {
        assert_names(
            &refused::<SessionParams>(&json!({})),
            "sessionId",
            "is missing",
        );
        assert_names(
            &refused::<ItemParams>(&json!({"sessionId": "s", "itemId": 7})),
            "itemId",
            "must be a string",
        );
        assert_names(
            &refused::<CatalogParams>(&json!({"sessionId": 7})),
            "sessionId",
            "is missing or not a string",
        );
        assert_names(
            &refused::<InboxSetPausedParams>(&json!({"sessionId": "s", "paused": "yes"})),
            "paused",
            "must be true or false",
        );
        assert_names(
            &refused::<JobsParams>(&json!({"sessionId": "s", "limit": 501})),
            "limit",
            "must be a whole number from 0 to 500",
        );
        assert_names(
            &refused::<JobsParams>(&json!({"sessionId": "s", "limit": -1})),
            "limit",
            "must be a whole number from 0 to 500",
        );
        assert_names(
            &refused::<InvokeParams>(
                &json!({"sessionId": "s", "operation": "help", "arguments": {"text": 1}}),
            ),
            "arguments.input",
            "must be a string",
        );
        assert_names(
            &refused::<SteeringParams>(
                &json!({"sessionId": "s", "_meta": {"steering": {"idleBehavior": 1}}}),
            ),
            "_meta.steering.idleBehavior",
            "must be startNewTurn or promptRequired, not 1",
        );
        assert_names(
            &refused::<SteerParams>(&json!({"sessionId": "s", "prompt": []})),
            "prompt",
            "is empty",
        );
    }

    #[test]
    fn a_session_not_open_is_its_own_class() {
        for check in [SessionCheck::Open, SessionCheck::Catalog] {
            let error = check.not_open("s1");
            assert_eq!(error.code, crate::rpc::code::INVALID_PARAMS);
            assert!(error.message.contains("\"s1\" is not open"), "{error:?}");
            assert_eq!(error.data, Some(json!({"code": "unknown_session"})));
            assert_eq!(check.session_id(&json!({"sessionId": "s1"})).unwrap(), "s1");
        }
        // Params that are not an object have no fields.
        assert_names(
            &refused::<ResourceParams>(&Value::Null),
            "sessionId",
            "is missing",
        );
    }

    #[test]
    fn fields_are_read_in_order_and_the_session_first() {
        // Two bad fields: the first read is the one named.
        let error = refused::<InboxMoveParams>(&json!({"sessionId": 1, "itemId": 2}));
        assert!(error.message.contains("sessionId"), "{error:?}");
        let error = refused::<InboxMoveParams>(&json!({"sessionId": "s", "itemId": 2}));
        assert!(error.message.contains("itemId"), "{error:?}");
        let error = refused::<InboxMoveParams>(&json!({"sessionId": "s", "itemId": "i"}));
        assert_names(&error, "toIndex", "is missing");
    }

    #[test]
    fn the_caps_hold() {
        let key = "k".repeat(201);
        let error = refused::<EnqueueParams>(
            &json!({"sessionId": "s", "text": "hi", "idempotencyKey": key}),
        );
        assert_names(&error, "idempotencyKey", "must be 1 to 200 characters");
        let error = refused::<SteerParams>(
            &json!({"sessionId": "s", "prompt": [{"type": "text", "text": "hi"}], "idempotencyKey": ""}),
        );
        assert_names(&error, "idempotencyKey", "must be 1 to 200 characters");
        let text = "x".repeat(JOB_SEND_CAP + 1);
        let error =
            refused::<JobSendParams>(&json!({"sessionId": "s", "jobId": "j", "text": text}));
        assert_eq!(error.data, Some(json!({"code": "too_large"})));
        let error = refused::<ResourceParams>(
            &json!({"sessionId": "s", "uri": "workspace:a", "lineCount": 2_001}),
        );
        assert_names(&error, "lineCount", "must be a whole number from 0 to 2000");
        let error = refused::<ResourceParams>(
            &json!({"sessionId": "s", "uri": "shell-log:j", "byteCount": WINDOW_CAP + 1}),
        );
        assert!(error.message.contains("byteCount"), "{error:?}");
    }

    #[test]
    fn good_params_are_typed() {
        let sent = json!({"sessionId": "s", "text": "hi", "intent": "steer"});
        let params = read::<EnqueueParams>(&sent).unwrap();
        assert_eq!(params.intent, Intent::Steer);
        assert_eq!(params.prompt, vec![json!({"type": "text", "text": "hi"})]);
        let sent = json!({"sessionId": "s", "uri": "workspace:a.rs", "startLine": 0});
        let params = read::<ResourceParams>(&sent).unwrap();
        let file = Window::File {
            path: "a.rs",
            start_line: 1,
            line_count: 200,
        };
        assert_eq!(params.window, file);
        // A window's fields of the other kind are not read.
        let sent = json!({"sessionId": "s", "uri": "shell-log:j", "lineCount": "many"});
        let params = read::<ResourceParams>(&sent).unwrap();
        assert!(matches!(
            params.window,
            Window::Log {
                byte_count: 65_536,
                ..
            }
        ));
        let sent = json!({"sessionId": "s", "operation": "/help"});
        let params = read::<InvokeParams>(&sent).unwrap();
        assert_eq!((params.operation, params.input), ("help", ""));
        let sent = json!({"sessionId": "s", "jobId": "j", "limit": 300});
        let params = read::<JobTranscriptParams>(&sent).unwrap();
        assert_eq!(params.limit.within(100, 500).unwrap(), 300);
        assert_names(
            &params.limit.within(100, 200).unwrap_err(),
            "limit",
            "must be a whole number from 0 to 200",
        );
    }
}

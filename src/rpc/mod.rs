//! JSON-RPC 2.0 framing: the messages that cross stdin and stdout, their
//! classification (`Incoming`: request, notification, response, invalid),
//! and the error object handlers answer with (`RpcError` and the codes).
//! `stdio.rs` holds the reader thread (one line at most 64 MiB) and the
//! writer thread, which merges its two queues by the stamp each message got
//! when it was queued.
//!
//! Params and results stay raw `serde_json::Value`s here; each handler decodes
//! them into its own typed struct, so this layer knows nothing of ACP.

pub(crate) mod stdio;

use serde::Serialize;
use serde_json::{Map, Value};
use std::fmt;

/// A JSON-RPC request id: a string, an integer, or (discouraged) null.
/// Kept as the raw value so it is echoed back exactly as it came.
pub(crate) type RequestId = Value;

/// The standard error codes, plus the ACP-specific ones we use.
pub(crate) mod code {
    pub(crate) const PARSE_ERROR: i64 = -32700;
    pub(crate) const INVALID_REQUEST: i64 = -32600;
    pub(crate) const METHOD_NOT_FOUND: i64 = -32601;
    pub(crate) const INVALID_PARAMS: i64 = -32602;
    pub(crate) const INTERNAL_ERROR: i64 = -32603;
    pub(crate) const AUTH_REQUIRED: i64 = -32000;
    pub(crate) const RESOURCE_NOT_FOUND: i64 = -32002;
}

/// The error object of a JSON-RPC response.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct RpcError {
    pub code: i64,
    pub message: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub data: Option<Value>,
}

impl RpcError {
    pub(crate) fn new(code: i64, message: impl Into<String>) -> RpcError {
        RpcError {
            code,
            message: message.into(),
            data: None,
        }
    }

    pub(crate) fn with_data(mut self, data: Value) -> RpcError {
        self.data = Some(data);
        self
    }

    pub(crate) fn parse_error(detail: impl fmt::Display) -> RpcError {
        RpcError::new(code::PARSE_ERROR, format!("Parse error: {detail}"))
    }

    pub(crate) fn invalid_request(detail: impl fmt::Display) -> RpcError {
        RpcError::new(code::INVALID_REQUEST, format!("Invalid request: {detail}"))
    }

    pub(crate) fn method_not_found(method: &str) -> RpcError {
        RpcError::new(
            code::METHOD_NOT_FOUND,
            format!("Method not found: {method}"),
        )
    }

    pub(crate) fn invalid_params(detail: impl fmt::Display) -> RpcError {
        RpcError::new(code::INVALID_PARAMS, format!("Invalid params: {detail}"))
    }

    pub(crate) fn internal(detail: impl fmt::Display) -> RpcError {
        RpcError::new(code::INTERNAL_ERROR, format!("Internal error: {detail}"))
    }

    /// A failure that is the user's or the provider's to fix (a broken
    /// config, a reload that failed): -32603, as the protocol wants, but
    /// not worded as Spindle's own fault.
    pub(crate) fn failed(detail: impl fmt::Display) -> RpcError {
        RpcError::new(code::INTERNAL_ERROR, detail.to_string())
    }
}

impl fmt::Display for RpcError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.message, self.code)
    }
}

/// One message read from the peer, already classified.
#[derive(Debug, Clone)]
pub(crate) enum Incoming {
    Request {
        id: RequestId,
        method: String,
        params: Value,
    },
    Notification {
        method: String,
        params: Value,
    },
    /// The peer's answer to a request we sent.
    Response {
        id: RequestId,
        result: Result<Value, RpcError>,
    },
    /// A line that could not be understood; `id` is known when the line was
    /// JSON with a usable id, so the error answer can name it.
    Invalid {
        id: RequestId,
        error: RpcError,
    },
    /// A JSON-RPC batch (an array), which ACP does not use: it is answered
    /// as a batch (JSON-RPC 2.0 §6), each element that needs an answer
    /// getting an error, in `answer_line`.
    Batch {
        answer_line: Option<String>,
    },
}

/// `line` with every `\uXXXX` escape of a lone UTF-16 surrogate replaced
/// by `\uFFFD`; `None` when there was none. One pass over the bytes.
fn repair_lone_surrogates(line: &[u8]) -> Option<Vec<u8>> {
    fn escape_at(line: &[u8], at: usize) -> Option<u16> {
        let digits = line.get(at + 2..at + 6)?;
        if line.get(at) != Some(&b'\\') || line.get(at + 1) != Some(&b'u') {
            return None;
        }
        let text = std::str::from_utf8(digits).ok()?;
        u16::from_str_radix(text, 16).ok()
    }
    let is_high = |unit: u16| (0xD800..0xDC00).contains(&unit);
    let is_low = |unit: u16| (0xDC00..0xE000).contains(&unit);
    let mut out = Vec::with_capacity(line.len());
    let mut changed = false;
    let mut at = 0;
    while at < line.len() {
        if line[at] != b'\\' {
            out.push(line[at]);
            at += 1;
            continue;
        }
        match escape_at(line, at) {
            Some(unit) if is_high(unit) && escape_at(line, at + 6).is_some_and(is_low) => {
                out.extend_from_slice(&line[at..at + 12]);
                at += 12;
            }
            Some(unit) if is_high(unit) || is_low(unit) => {
                out.extend_from_slice(b"\\uFFFD");
                changed = true;
                at += 6;
            }
            _ => {
                // Any other escape: the backslash and the byte it escapes.
                let end = (at + 2).min(line.len());
                out.extend_from_slice(&line[at..end]);
                at = end;
            }
        }
    }
    changed.then_some(out)
}

/// The answer to a batch: an array with an error for every element that is
/// a request or not a message at all (notifications get none), or `None`
/// when nothing needs an answer.
fn batch_answer(items: &[Value]) -> Option<String> {
    let mut answers = Vec::new();
    for item in items {
        let is_notification = item.get("method").is_some() && item.get("id").is_none();
        let is_response = item.get("method").is_none()
            && (item.get("result").is_some() || item.get("error").is_some());
        if is_notification || is_response {
            continue;
        }
        let id = match item.get("id") {
            Some(id @ (Value::String(_) | Value::Number(_))) => id.clone(),
            _ => Value::Null,
        };
        let error = RpcError::invalid_request(
            "JSON-RPC batches are not supported; send each message on its own line",
        );
        answers.push(serde_json::json!({"jsonrpc": "2.0", "id": id, "error": error}));
    }
    if answers.is_empty() {
        None
    } else {
        Some(Value::Array(answers).to_string())
    }
}

/// Classifies one line of input. Never fails: anything that is not a valid
/// message becomes `Incoming::Invalid` with the error to send back.
pub(crate) fn classify(line: &[u8]) -> Incoming {
    let parsed = serde_json::from_slice(line).or_else(|err| {
        // A string cut in the middle of a surrogate pair (what JavaScript
        // gives when it slices a string mid-emoji) is still the client's
        // request: the lone half becomes U+FFFD and the request is answered.
        match repair_lone_surrogates(line) {
            Some(repaired) => serde_json::from_slice(&repaired).map_err(|_| err),
            None => Err(err),
        }
    });
    let value: Value = match parsed {
        Ok(value) => value,
        Err(err) => {
            return Incoming::Invalid {
                id: Value::Null,
                error: RpcError::parse_error(err),
            }
        }
    };
    if let Value::Array(items) = &value {
        if items.is_empty() {
            return Incoming::Invalid {
                id: Value::Null,
                error: RpcError::invalid_request("an empty batch"),
            };
        }
        return Incoming::Batch {
            answer_line: batch_answer(items),
        };
    }
    let Value::Object(mut object) = value else {
        return Incoming::Invalid {
            id: Value::Null,
            error: RpcError::invalid_request("a message must be a JSON object"),
        };
    };
    let id = object.remove("id");
    let id_is_valid = matches!(id, None | Some(Value::String(_)) | Some(Value::Null))
        || matches!(&id, Some(Value::Number(n)) if n.is_i64() || n.is_u64());
    let echo_id = if id_is_valid {
        id.clone().unwrap_or(Value::Null)
    } else {
        Value::Null
    };
    let invalid = |detail: &str| Incoming::Invalid {
        id: echo_id.clone(),
        error: RpcError::invalid_request(detail),
    };
    if object.get("jsonrpc") != Some(&Value::String("2.0".into())) {
        return invalid("\"jsonrpc\" must be \"2.0\"");
    }
    if !id_is_valid {
        return invalid("\"id\" must be a string, an integer or null");
    }
    match object.remove("method") {
        Some(Value::String(method)) => {
            let params = match object.remove("params") {
                None | Some(Value::Null) => Value::Object(Map::new()),
                Some(params @ (Value::Object(_) | Value::Array(_))) => params,
                Some(_) => return invalid("\"params\" must be an object or an array"),
            };
            match id {
                Some(id) => Incoming::Request { id, method, params },
                None => Incoming::Notification { method, params },
            }
        }
        Some(_) => invalid("\"method\" must be a string"),
        None => {
            let Some(id) = id else {
                return invalid("a message needs a \"method\" or an \"id\"");
            };
            if let Some(error) = object.remove("error") {
                let code = error.get("code").and_then(Value::as_i64).unwrap_or(0);
                let message = error
                    .get("message")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_string();
                let data = error.get("data").cloned();
                Incoming::Response {
                    id,
                    result: Err(RpcError {
                        code,
                        message,
                        data,
                    }),
                }
            } else if let Some(result) = object.remove("result") {
                Incoming::Response {
                    id,
                    result: Ok(result),
                }
            } else {
                invalid("a response needs a \"result\" or an \"error\"")
            }
        }
    }
}

/// Serialises a successful response as one line (without the newline).
pub(crate) fn response_line(id: &RequestId, result: &Value) -> String {
    #[derive(Serialize)]
    struct Response<'a> {
        jsonrpc: &'static str,
        id: &'a Value,
        result: &'a Value,
    }
    to_line(&Response {
        jsonrpc: "2.0",
        id,
        result,
    })
}

/// Serialises an error response as one line.
pub(crate) fn error_line(id: &RequestId, error: &RpcError) -> String {
    #[derive(Serialize)]
    struct Response<'a> {
        jsonrpc: &'static str,
        id: &'a Value,
        error: &'a RpcError,
    }
    to_line(&Response {
        jsonrpc: "2.0",
        id,
        error,
    })
}

/// Serialises a notification as one line.
pub(crate) fn notification_line<P: Serialize>(method: &str, params: &P) -> String {
    #[derive(Serialize)]
    struct Notification<'a, P> {
        jsonrpc: &'static str,
        method: &'a str,
        params: &'a P,
    }
    to_line(&Notification {
        jsonrpc: "2.0",
        method,
        params,
    })
}

/// Serialises a request of ours as one line.
pub(crate) fn request_line<P: Serialize>(id: &RequestId, method: &str, params: &P) -> String {
    #[derive(Serialize)]
    struct Request<'a, P> {
        jsonrpc: &'static str,
        id: &'a Value,
        method: &'a str,
        params: &'a P,
    }
    to_line(&Request {
        jsonrpc: "2.0",
        id,
        method,
        params,
    })
}

fn to_line<T: Serialize>(message: &T) -> String {
    // Serialising plain structs of strings and values cannot fail; should it
    // ever, an internal error is still a valid line.
    // Room for most lines at once (a chunk's is about 200 bytes), where
    // `to_string`'s 128 bytes would grow in steps.
    let mut out = Vec::with_capacity(LINE_CAPACITY);
    let written = serde_json::to_writer(&mut out, message).map_err(|e| e.to_string());
    written
        .and_then(|()| String::from_utf8(out).map_err(|e| e.to_string()))
        .unwrap_or_else(|err| {
            format!(
                r#"{{"jsonrpc":"2.0","id":null,"error":{{"code":-32603,"message":"Internal error: {}"}}}}"#,
                err.replace('"', "'")
            )
        })
}

/// The room a line is serialised into at first.
const LINE_CAPACITY: usize = 512;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lone_surrogates_become_replacement_characters() {
        let line = br#"{"jsonrpc":"2.0","id":7,"method":"m","params":{"t":"cut \ud83d","u":"\ude00x","ok":"\ud83d\ude00","esc":"\\ud83d"}}"#;
        let Incoming::Request { id, params, .. } = classify(line) else {
            panic!("not a request");
        };
        assert_eq!(id, serde_json::json!(7));
        assert_eq!(params["t"], "cut \u{fffd}");
        assert_eq!(params["u"], "\u{fffd}x");
        assert_eq!(params["ok"], "\u{1f600}");
        assert_eq!(params["esc"], "\\ud83d");
        assert!(repair_lone_surrogates(br#"{"a":"\ud83d\ude00"}"#).is_none());
    }
    use serde_json::json;

    #[test]
    fn classifies_requests_notifications_and_responses() {
        match classify(br#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"a":1}}"#) {
            Incoming::Request { id, method, params } => {
                assert_eq!(id, json!(1));
                assert_eq!(method, "initialize");
                assert_eq!(params, json!({"a":1}));
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            classify(br#"{"jsonrpc":"2.0","method":"session/cancel"}"#),
            Incoming::Notification { .. }
        ));
        assert!(matches!(
            classify(br#"{"jsonrpc":"2.0","id":"x","result":{}}"#),
            Incoming::Response { result: Ok(_), .. }
        ));
        assert!(matches!(
            classify(br#"{"jsonrpc":"2.0","id":"x","error":{"code":-1,"message":"m"}}"#),
            Incoming::Response { result: Err(_), .. }
        ));
    }

    #[test]
    fn rejects_what_is_not_a_message() {
        let cases: &[(&[u8], i64)] = &[
            (b"not json", code::PARSE_ERROR),
            (b"[]", code::INVALID_REQUEST),
            (br#"{"id":1,"method":"x"}"#, code::INVALID_REQUEST),
            (
                br#"{"jsonrpc":"2.0","id":1,"method":7}"#,
                code::INVALID_REQUEST,
            ),
            (
                br#"{"jsonrpc":"2.0","id":1.5,"method":"x"}"#,
                code::INVALID_REQUEST,
            ),
            (br#"{"jsonrpc":"2.0","id":1}"#, code::INVALID_REQUEST),
            (
                br#"{"jsonrpc":"2.0","id":1,"method":"x","params":3}"#,
                code::INVALID_REQUEST,
            ),
        ];
        for (line, expected) in cases {
            match classify(line) {
                Incoming::Invalid { error, .. } => assert_eq!(error.code, *expected),
                other => panic!("{}: {other:?}", String::from_utf8_lossy(line)),
            }
        }
    }

    #[test]
    fn a_batch_is_answered_element_by_element() {
        let Incoming::Batch { answer_line } = classify(
            br#"[1, {"jsonrpc":"2.0","id":"a","method":"m"}, {"jsonrpc":"2.0","method":"n"}]"#,
        ) else {
            panic!("not a batch");
        };
        let answers: Value = serde_json::from_str(&answer_line.unwrap()).unwrap();
        let answers = answers.as_array().unwrap();
        assert_eq!(answers.len(), 2);
        assert_eq!(answers[0]["id"], Value::Null);
        assert_eq!(answers[1]["id"], "a");
        assert!(matches!(
            classify(br#"[{"jsonrpc":"2.0","method":"n"}]"#),
            Incoming::Batch { answer_line: None }
        ));
    }

    #[test]
    fn lines_are_compact_json() {
        let line = error_line(&json!(3), &RpcError::invalid_params("bad"));
        assert!(!line.contains('\n'));
        let parsed: Value = serde_json::from_str(&line).unwrap();
        assert_eq!(parsed["error"]["code"], json!(-32602));
    }
}

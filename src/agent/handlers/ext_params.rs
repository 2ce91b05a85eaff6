//! The params of the vendor methods, read field by field, and the errors
//! they answer with (`data.code` names the class, EXTENSIONS.md §0).

use crate::agent::dispatcher::Dispatcher;
use crate::rpc::RpcError;
use serde_json::{json, Value};

pub(super) fn unknown_session(id: &str) -> RpcError {
    RpcError::invalid_params(format!(
        "session {id:?} is not open in this process; open it with session/new, session/load or session/resume"
    ))
    .with_data(json!({"code": "unknown_session"}))
}

pub(super) fn bad(field: &str, why: &str) -> RpcError {
    RpcError::invalid_params(format!("{field}: {why}")).with_data(json!({"code": "invalid_params"}))
}

pub(super) fn store_error(error: crate::store::StoreError) -> RpcError {
    RpcError::internal(error.to_string()).with_data(json!({"code": "store_unavailable"}))
}

pub(super) fn string<'a>(params: &'a Value, field: &str) -> Result<&'a str, RpcError> {
    match params.get(field) {
        Some(Value::String(text)) => Ok(text),
        Some(_) => Err(bad(field, "must be a string")),
        None => Err(bad(field, "is missing")),
    }
}

pub(super) fn optional_string<'a>(
    params: &'a Value,
    field: &str,
) -> Result<Option<&'a str>, RpcError> {
    match params.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(text)) => Ok(Some(text)),
        Some(_) => Err(bad(field, "must be a string")),
    }
}

pub(super) fn count(params: &Value, field: &str, default: u64, max: u64) -> Result<u64, RpcError> {
    match params.get(field) {
        None | Some(Value::Null) => Ok(default),
        Some(value) => match value.as_u64() {
            Some(n) if n <= max => Ok(n),
            _ => Err(bad(
                field,
                &format!("must be a whole number from 0 to {max}"),
            )),
        },
    }
}

impl Dispatcher {
    pub(super) fn open_session(&self, params: &Value) -> Result<String, RpcError> {
        let id = string(params, "sessionId")?;
        match self.sessions.get(id) {
            Some(session) if !session.closed => Ok(id.to_string()),
            _ => Err(unknown_session(id)),
        }
    }
}

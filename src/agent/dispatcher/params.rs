//! Reading a request's params into a handler's type, and the errors
//! handlers answer with, each naming what a person should fix.

use crate::rpc::{code, RpcError};
use crate::store;
use serde::de::DeserializeOwned;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};

/// Decodes params into a handler's type; the error names the offending
/// field, so a person can fix the request.
pub(in crate::agent) fn decode<T: DeserializeOwned>(params: Value) -> Result<T, RpcError> {
    T::deserialize(&params).map_err(|err| RpcError::invalid_params(describe::<T>(&err, &params)))
}

/// serde reports a wrong type without saying where. Removing one top-level
/// field at a time finds it: the field whose removal turns the error into
/// "missing field" is the one that was wrong.
fn describe<T: DeserializeOwned>(err: &serde_json::Error, params: &Value) -> String {
    let text = err.to_string();
    if let Value::Object(map) = params {
        if !text.starts_with("missing field") {
            for key in map.keys() {
                let mut without = map.clone();
                without.remove(key);
                if let Err(other) = T::deserialize(&Value::Object(without)) {
                    if other.to_string() == format!("missing field `{key}`") {
                        return format!("field `{key}`: {text}");
                    }
                }
            }
        }
    }
    text
}

pub(in crate::agent) fn check_cwd(cwd: &str) -> Result<PathBuf, RpcError> {
    let path = Path::new(cwd);
    if !path.is_absolute() {
        return Err(RpcError::invalid_params(format!(
            "cwd must be an absolute path, got {cwd:?}"
        )));
    }
    match std::fs::metadata(path) {
        Ok(meta) if meta.is_dir() => Ok(path.to_path_buf()),
        Ok(_) => Err(RpcError::invalid_params(format!(
            "cwd {cwd:?} is not a directory"
        ))),
        Err(err) => Err(RpcError::invalid_params(format!(
            "cwd {cwd:?} cannot be used: {err}"
        ))),
    }
}

pub(in crate::agent) fn not_found(session_id: &str) -> RpcError {
    RpcError::new(
        code::RESOURCE_NOT_FOUND,
        format!("Resource not found: there is no session {session_id:?}"),
    )
    .with_data(json!({"uri": format!("spindle:session/{session_id}")}))
}

pub(in crate::agent) fn internal(error: store::StoreError) -> RpcError {
    RpcError::internal(error.0).with_data(json!({"code": "store_error"}))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cwd_must_be_an_absolute_directory() {
        assert!(check_cwd("relative/dir").is_err());
        assert!(check_cwd("/definitely/not/here/spindle").is_err());
        assert!(check_cwd(&std::env::temp_dir().display().to_string()).is_ok());
    }
}

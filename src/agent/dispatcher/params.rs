//! Reading a request's params into a handler's type, and the errors
//! handlers answer with, each naming what a person should fix.

use crate::rpc::{code, RpcError};
use crate::store;
use serde::de::DeserializeOwned;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};

/// Decodes params into a handler's type; the error names the offending
/// field, so a person can fix the request.
pub(in crate::agent) fn decode<T: DeserializeOwned>(mut params: Value) -> Result<T, RpcError> {
    match T::deserialize(&params) {
        Ok(value) => Ok(value),
        Err(err) => Err(RpcError::invalid_params(describe::<T>(&err, &mut params))),
    }
}

/// The most top-level fields `describe` tries, one at a time: params with
/// more fields than any request has get serde's message as it is, so a
/// hostile object of many keys costs one failed decode, not one per key.
const DESCRIBE_KEYS: usize = 32;

/// serde reports a wrong type without saying where. Taking one top-level
/// field out at a time finds it: the field whose absence turns the error
/// into "missing field" is the one that was wrong. Each try moves the
/// value out and back (no copy), so the whole search stays linear in the
/// size of the params.
fn describe<T: DeserializeOwned>(err: &serde_json::Error, params: &mut Value) -> String {
    let text = err.to_string();
    let Value::Object(map) = params else {
        return text;
    };
    if text.starts_with("missing field") || map.len() > DESCRIBE_KEYS {
        return text;
    }
    let keys: Vec<String> = map.keys().cloned().collect();
    for key in keys {
        let Some(value) = map.remove(&key) else {
            continue;
        };
        let missing = match T::deserialize(&*map_as_value(map)) {
            Err(other) => other.to_string() == format!("missing field `{key}`"),
            Ok(_) => false,
        };
        map.insert(key.clone(), value);
        if missing {
            return format!("field `{key}`: {text}");
        }
    }
    text
}

/// A borrowed view of a map as a `Value` for deserializing: serde_json
/// deserializes from `&Value`, so the map is wrapped without copying its
/// entries (moved in and back out).
fn map_as_value(map: &mut serde_json::Map<String, Value>) -> MapValue<'_> {
    MapValue {
        value: Value::Object(std::mem::take(map)),
        map,
    }
}

/// Holds a map's entries as a `Value` and gives them back when dropped.
struct MapValue<'a> {
    value: Value,
    map: &'a mut serde_json::Map<String, Value>,
}

impl std::ops::Deref for MapValue<'_> {
    type Target = Value;
    fn deref(&self) -> &Value {
        &self.value
    }
}

impl Drop for MapValue<'_> {
    fn drop(&mut self) {
        if let Value::Object(entries) = std::mem::take(&mut self.value) {
            *self.map = entries;
        }
    }
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

/// The folders no additional root may contain: the home folder, and
/// Spindle's config and session folders (keys, other projects' sessions).
pub(in crate::agent) fn protected_dirs(config: Option<&Path>, db: &Path) -> Vec<PathBuf> {
    let config = config
        .map(Path::to_path_buf)
        .unwrap_or_else(crate::config::default_path);
    let mut dirs: Vec<PathBuf> = [config.parent(), db.parent()]
        .into_iter()
        .flatten()
        .map(Path::to_path_buf)
        .collect();
    if let Some(home) = crate::os::folders::home() {
        dirs.push(home);
    }
    dirs.into_iter()
        .map(|dir| crate::os::canonical(&dir).unwrap_or(dir))
        .collect()
}

/// The most additional workspace roots of one session.
const EXTRA_ROOTS_CAP: usize = 32;

/// `additionalDirectories` of a session request: `None` when absent, else
/// each an absolute path to an existing folder (symlinks resolved), none
/// repeated. A bad entry is -32602 naming it.
pub(in crate::agent) fn extra_roots(
    params: &Value,
    forbidden: &[PathBuf],
) -> Result<Option<Vec<PathBuf>>, RpcError> {
    let list = match params.get("additionalDirectories") {
        None | Some(Value::Null) => return Ok(None),
        Some(Value::Array(list)) => list,
        Some(_) => {
            return Err(RpcError::invalid_params(
                "additionalDirectories must be an array of absolute paths",
            ))
        }
    };
    if list.len() > EXTRA_ROOTS_CAP {
        return Err(RpcError::invalid_params(format!(
            "additionalDirectories: at most {EXTRA_ROOTS_CAP} folders"
        )));
    }
    let mut roots: Vec<PathBuf> = Vec::new();
    for (index, entry) in list.iter().enumerate() {
        let Some(text) = entry.as_str() else {
            return Err(RpcError::invalid_params(format!(
                "additionalDirectories[{index}] must be a string"
            )));
        };
        let dir = check_cwd(text).map_err(|error| {
            RpcError::invalid_params(format!(
                "additionalDirectories[{index}]: {}",
                error
                    .message
                    .trim_start_matches("Invalid params: ")
                    .replacen("cwd", "the folder", 1)
            ))
        })?;
        let real = crate::os::canonical(&dir).unwrap_or(dir);
        if real == Path::new("/") {
            return Err(RpcError::invalid_params(format!(
                "additionalDirectories[{index}]: the whole file system cannot be a workspace root"
            )));
        }
        if let Some(inner) = forbidden.iter().find(|dir| dir.starts_with(&real)) {
            return Err(RpcError::invalid_params(format!(
                "additionalDirectories[{index}]: {} holds {} (your home folder, or Spindle's own config or sessions), so it cannot be a workspace root; name a folder inside it",
                real.display(),
                inner.display()
            )));
        }
        if !roots.contains(&real) {
            roots.push(real);
        }
    }
    Ok(Some(roots))
}

pub(in crate::agent) fn not_found(session_id: &str) -> RpcError {
    if let Some((parent, _)) = crate::acp::fit::parent_of(session_id) {
        return RpcError::invalid_request(format!(
            "{session_id:?} is a subagent's session inside session {parent:?}: it takes no prompts and cannot be loaded or changed on its own; only session/cancel stops its work. Prompt the parent session instead"
        ))
        .with_data(json!({"code": "subagent_session"}));
    }
    RpcError::new(
        code::RESOURCE_NOT_FOUND,
        format!("Resource not found: there is no session {session_id:?}"),
    )
    .with_data(json!({"uri": format!("spindle:session/{session_id}"), "sessionId": session_id}))
}

pub(in crate::agent) fn internal(error: store::StoreError) -> RpcError {
    RpcError::internal(error.to_string()).with_data(json!({"code": "store_error"}))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;

    #[derive(serde::Deserialize, Debug)]
    #[allow(dead_code)]
    struct Request {
        name: String,
        count: u32,
    }

    #[test]
    fn a_wrong_field_is_named_and_the_params_are_kept() {
        let error = decode::<Request>(json!({"name": "x", "count": "seven"})).unwrap_err();
        assert!(error.message.contains("field `count`"), "{}", error.message);
        let mut params = json!({"name": "x", "count": "seven", "other": [1, 2]});
        let err = Request::deserialize(&params).unwrap_err();
        let text = describe::<Request>(&err, &mut params);
        assert!(text.starts_with("field `count`"), "{text}");
        assert_eq!(
            params,
            json!({"name": "x", "count": "seven", "other": [1, 2]})
        );
    }

    #[test]
    fn many_keys_get_the_plain_message() {
        let mut map = serde_json::Map::new();
        for index in 0..10_000 {
            map.insert(format!("k{index}"), json!(index));
        }
        map.insert("name".into(), json!("x"));
        map.insert("count".into(), json!("seven"));
        let error = decode::<Request>(Value::Object(map)).unwrap_err();
        assert!(!error.message.contains("field `"), "{}", error.message);
        assert!(error.message.contains("invalid type"), "{}", error.message);
    }

    #[test]
    fn cwd_must_be_an_absolute_directory() {
        assert!(check_cwd("relative/dir").is_err());
        assert!(check_cwd("/definitely/not/here/spindle").is_err());
        assert!(check_cwd(&std::env::temp_dir().display().to_string()).is_ok());
    }
}

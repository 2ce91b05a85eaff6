//! Where the tokens of a signed-in MCP server are kept: one private file
//! a server (mode 0600, in a 0700 folder), written whole beside its old
//! self and renamed into place, read within a cap. The folder is the one
//! Spindle keeps provider keys in, which the sandbox hides from commands.

use super::error::{OAuthError, OAuthErrorKind};
use serde::{Deserialize, Serialize};
use std::io::Write;
use std::path::{Path, PathBuf};

/// The largest token file read.
const FILE_CAP: u64 = 256 << 10;

/// What a sign-in left: the tokens and what is needed to refresh them.
/// `Debug` is not derived: the tokens must never be printed.
#[derive(Clone, Serialize, Deserialize)]
pub(crate) struct Tokens {
    /// The MCP server's URL the tokens were issued for; they are sent to
    /// that URL only.
    pub url: String,
    pub access_token: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refresh_token: Option<String>,
    /// Seconds since the Unix epoch after which the access token is stale.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<u64>,
    pub client_id: String,
    pub token_endpoint: String,
    /// The `resource` parameter sent with every token request.
    pub resource: String,
}

impl Tokens {
    /// Whether the access token has expired (a minute early).
    pub(crate) fn stale(&self) -> bool {
        self.expires_at
            .is_some_and(|at| now_secs().saturating_add(60) >= at)
    }
}

pub(crate) fn now_secs() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// The token file of server `name` in `dir`; `None` for a name that cannot
/// be a file name (such a server cannot be signed in to).
pub(crate) fn token_file(dir: &Path, name: &str) -> Option<PathBuf> {
    let plain = !name.is_empty()
        && name.len() <= 64
        && !name.starts_with(['.', '-'])
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'));
    plain.then(|| dir.join(format!("{name}.json")))
}

/// The tokens in `file`: `Ok(None)` when there are none, an error when
/// the file is there but unreadable or damaged.
pub(crate) fn load(file: &Path) -> Result<Option<Tokens>, String> {
    use crate::os::reading::{read_capped, ReadError};
    match read_capped(file, FILE_CAP) {
        Ok(bytes) => serde_json::from_slice(&bytes).map(Some).map_err(|_| {
            format!(
                "the token file {} is damaged (`spindle mcp logout` removes it)",
                file.display()
            )
        }),
        Err(ReadError::Missing) => Ok(None),
        Err(error) => Err(format!(
            "cannot read the token file {}: {}",
            file.display(),
            error.reason(file, FILE_CAP)
        )),
    }
}

/// Writes `tokens` to `file`: a fresh private file renamed into place, so
/// a reader sees the old tokens or the new ones, never half.
pub(crate) fn save(file: &Path, tokens: &Tokens) -> Result<(), OAuthError> {
    save_text(file, tokens).map_err(|message| OAuthError::new(OAuthErrorKind::Storage, message))
}

fn save_text(file: &Path, tokens: &Tokens) -> Result<(), String> {
    let dir = file.parent().ok_or("the token folder has no parent")?;
    crate::os::create_private_dir_all(dir)
        .map_err(|err| format!("cannot create {}: {err}", dir.display()))?;
    let text = serde_json::to_vec(tokens).map_err(|err| err.to_string())?;
    let fresh = file.with_extension(format!("tmp-{}", crate::util::random_hex()));
    let written =
        crate::os::open_private(&fresh, crate::os::Private::CreateNew).and_then(|mut out| {
            out.write_all(&text)?;
            out.sync_all()
        });
    if let Err(err) = written {
        let _ = std::fs::remove_file(&fresh);
        return Err(format!("cannot write {}: {err}", fresh.display()));
    }
    std::fs::rename(&fresh, file).map_err(|err| {
        let _ = std::fs::remove_file(&fresh);
        format!("cannot write {}: {err}", file.display())
    })
}

/// Removes the tokens in `file`; true when there were some.
pub(crate) fn remove(file: &Path) -> Result<bool, OAuthError> {
    match std::fs::remove_file(file) {
        Ok(()) => Ok(true),
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => Ok(false),
        Err(err) => Err(OAuthError::new(
            OAuthErrorKind::Storage,
            format!("cannot remove {}: {err}", file.display()),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_file_stays_in_its_folder() {
        let dir = Path::new("tokens");
        assert_eq!(token_file(dir, "docs.v2"), Some(dir.join("docs.v2.json")));
        for bad in ["", "..", ".hidden", "a/b", "a\\b", "-x", "é"] {
            assert_eq!(token_file(dir, bad), None, "{bad}");
        }
    }
}

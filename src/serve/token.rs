//! The bearer token every request of `serve` must carry: read from a
//! private file, or made (from the system's randomness) into one on the
//! first start. It is compared in constant time, never logged, never put
//! on a command line or in a child's environment.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};

/// Random bytes from the system, in hex: `bytes` of them.
fn random_hex(bytes: usize) -> String {
    use ring::rand::SecureRandom;
    let mut buffer = vec![0u8; bytes];
    if ring::rand::SystemRandom::new().fill(&mut buffer).is_err() {
        // The system's randomness failing is not survivable for a secret.
        panic!("the system's random number source failed");
    }
    buffer.iter().map(|b| format!("{b:02x}")).collect()
}

/// A connection id: 128 random bits.
pub(crate) fn random_id() -> String {
    random_hex(16)
}

/// The default token file: `serve-token` beside the config file.
pub(crate) fn default_path() -> PathBuf {
    let config = crate::config::default_path();
    config.parent().map_or_else(
        || PathBuf::from("serve-token"),
        |dir| dir.join("serve-token"),
    )
}

/// The shortest token taken from a file.
const MIN_LEN: usize = 32;
/// The longest.
const MAX_LEN: usize = 4096;

/// The token in `path`, and whether it was made just now. A file that is
/// not private, not the user's, a link, too short or not plain text is
/// refused with the reason.
pub(crate) fn load_or_make(path: &Path) -> Result<(String, bool), String> {
    match std::fs::symlink_metadata(path) {
        Ok(_) => load(path).map(|token| (token, false)),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
            make(path).map(|token| (token, true))
        }
        Err(error) => Err(format!(
            "cannot read the token file {}: {error}",
            path.display()
        )),
    }
}

pub(crate) fn load(path: &Path) -> Result<String, String> {
    let shown = path.display();
    let file = crate::os::open_read(path, false)
        .map_err(|error| format!("cannot read the token file {shown}: {error}"))?;
    let meta = file
        .metadata()
        .map_err(|error| format!("cannot read the token file {shown}: {error}"))?;
    if !meta.is_file() {
        return Err(format!("the token file {shown} is not a plain file"));
    }
    check_private(&meta).map_err(|why| format!("the token file {shown} {why}"))?;
    let mut text = String::new();
    file.take(MAX_LEN as u64 + 2)
        .read_to_string(&mut text)
        .map_err(|_| format!("the token file {shown} is not text"))?;
    let token = text.trim();
    if token.len() < MIN_LEN || token.len() > MAX_LEN {
        return Err(format!(
            "the token in {shown} must be {MIN_LEN} to {MAX_LEN} characters long"
        ));
    }
    if !token.bytes().all(|b| b.is_ascii_graphic()) {
        return Err(format!(
            "the token in {shown} must be printable characters without spaces"
        ));
    }
    Ok(token.to_string())
}

/// Whether a file is private enough to hold a secret: no other user may
/// read it, and only its owner may change it. Its group may read it (a
/// Kubernetes Secret is mounted 0440 for the pod's group).
#[cfg(unix)]
pub(crate) fn check_private(meta: &std::fs::Metadata) -> Result<(), String> {
    use std::os::unix::fs::MetadataExt;
    let mode = meta.mode() & 0o777;
    if mode & 0o027 != 0 {
        return Err(format!(
            "can be read or changed by other users (mode {mode:o}); make it private: chmod 600"
        ));
    }
    Ok(())
}

/// Whether a file's access admits only its owner: on Windows the files
/// Spindle makes are private by their access list; one given is taken.
#[cfg(not(unix))]
pub(crate) fn check_private(_meta: &std::fs::Metadata) -> Result<(), String> {
    Ok(())
}

fn make(path: &Path) -> Result<String, String> {
    let shown = path.display();
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        crate::os::create_private_dir_all(dir)
            .map_err(|error| format!("cannot create {}: {error}", dir.display()))?;
    }
    let token = random_hex(32);
    let mut file = crate::os::open_private(path, crate::os::Private::CreateNew)
        .map_err(|error| format!("cannot create the token file {shown}: {error}"))?;
    file.write_all(format!("{token}\n").as_bytes())
        .and_then(|()| file.sync_all())
        .map_err(|error| format!("cannot write the token file {shown}: {error}"))?;
    Ok(token)
}

/// Whether `given` (an `Authorization` header's value) carries `token`:
/// `Bearer <token>`, compared in time independent of where they differ.
pub(crate) fn authorized(given: Option<&str>, token: &str) -> bool {
    let Some(given) = given else {
        return false;
    };
    let Some((scheme, value)) = given.split_once(' ') else {
        return false;
    };
    if !scheme.eq_ignore_ascii_case("bearer") {
        return false;
    }
    let (a, b) = (value.trim().as_bytes(), token.as_bytes());
    let mut differ = u8::from(a.len() != b.len());
    for (i, byte) in b.iter().enumerate() {
        differ |= a.get(i).copied().unwrap_or(0) ^ byte;
    }
    differ == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_exact_bearer_token_is_let_in() {
        let token = "a".repeat(64);
        assert!(authorized(Some(&format!("Bearer {token}")), &token));
        assert!(authorized(Some(&format!("bearer {token}")), &token));
        assert!(!authorized(Some(&format!("Bearer {token}x")), &token));
        assert!(!authorized(
            Some(&format!("Bearer {}", &token[1..])),
            &token
        ));
        assert!(!authorized(Some(&format!("Basic {token}")), &token));
        assert!(!authorized(Some("Bearer "), &token));
        assert!(!authorized(None, &token));
    }

    #[test]
    fn a_token_is_made_private_once_and_read_back() {
        let dir = std::env::temp_dir().join(format!("spindle-token-{}", random_id()));
        let path = dir.join("sub").join("serve-token");
        let (made, fresh) = load_or_make(&path).unwrap();
        assert!(fresh);
        assert_eq!(made.len(), 64);
        let (again, fresh) = load_or_make(&path).unwrap();
        assert!(!fresh);
        assert_eq!(made, again);
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
            let refused = load_or_make(&path).unwrap_err();
            assert!(refused.contains("chmod 600"), "{refused}");
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
            std::fs::write(&path, "short\n").unwrap();
            assert!(load_or_make(&path).unwrap_err().contains("32 to 4096"));
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

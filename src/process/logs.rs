//! Where the full output of commands is kept: a private folder per
//! session beside the session database (`logs/<session>/`, mode 0700,
//! files 0600), removed with the session.
//!
//! It exists because command output can hold anything the workspace holds,
//! so it must not sit in a shared, predictable folder of the system's temp
//! directory. A folder that already exists is used only when it is a real
//! directory (not a symlink) owned by this user and closed to others.

use std::fs::{self, File};
use std::io;
use std::path::{Path, PathBuf};

/// The default of the config's `tools.command_log_bytes`.
pub(crate) const DEFAULT_LOG_CAP: u64 = 4 * 1024 * 1024;

/// The folder of every session's logs, beside the database.
pub(crate) fn root(db: &Path) -> PathBuf {
    db.parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or_else(|| Path::new("."))
        .join("logs")
}

/// A session's folder of logs.
pub(crate) fn session_dir(db: &Path, session_id: &str) -> PathBuf {
    root(db).join(safe_name(session_id))
}

/// A name safe as one path component: session and tool call ids come from
/// the client and the model.
pub(crate) fn safe_name(id: &str) -> String {
    let name: String = id
        .chars()
        .take(128)
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect();
    if name.is_empty() {
        "_".into()
    } else {
        name
    }
}

/// Creates `dir` (mode 0700) unless it exists, and checks that it is a
/// private directory of this user.
fn private_dir(dir: &Path) -> io::Result<()> {
    match crate::os::create_private_dir(dir) {
        Ok(()) => {}
        Err(err) if err.kind() == io::ErrorKind::AlreadyExists => {}
        Err(err) => return Err(err),
    }
    let meta = fs::symlink_metadata(dir)?;
    if !meta.is_dir() {
        return Err(io::Error::other(format!(
            "{} is not a directory",
            dir.display()
        )));
    }
    if !crate::os::owned_by_me(&meta) {
        return Err(io::Error::other(format!(
            "{} belongs to another user",
            dir.display()
        )));
    }
    crate::os::make_private_dir(dir, &meta)
}

/// Creates the session's private folder (and the logs folder above it).
pub(crate) fn prepare_session_dir(db: &Path, session_id: &str) -> io::Result<PathBuf> {
    let root = root(db);
    if let Some(parent) = root.parent() {
        fs::create_dir_all(parent)?;
    }
    private_dir(&root)?;
    let dir = session_dir(db, session_id);
    private_dir(&dir)?;
    Ok(dir)
}

/// The folder of every session's sandbox temp folders, beside the
/// database (apart from the logs, which sandboxed commands may not read).
pub(crate) fn temp_root(db: &Path) -> PathBuf {
    root(db).with_file_name("tmp")
}

/// A private temp folder for the session's sandboxed commands.
pub(crate) fn prepare_temp_dir(db: &Path, session_id: &str) -> io::Result<PathBuf> {
    let root = temp_root(db);
    if let Some(parent) = root.parent() {
        fs::create_dir_all(parent)?;
    }
    private_dir(&root)?;
    let dir = root.join(safe_name(session_id));
    private_dir(&dir)?;
    Ok(dir)
}

/// Creates (or truncates) a log file, mode 0600, refusing to follow a
/// symlink planted at its name.
pub(crate) fn create_file(path: &Path) -> io::Result<File> {
    crate::os::open_private(path, crate::os::Private::Truncate)
}

/// Removes a session's logs and temp folder (when the session is deleted).
pub(crate) fn remove_session(db: &Path, session_id: &str) {
    let temp = temp_root(db).join(safe_name(session_id));
    for dir in [session_dir(db, session_id), temp] {
        match fs::remove_dir_all(&dir) {
            Ok(()) => {}
            Err(err) if err.kind() == io::ErrorKind::NotFound => {}
            Err(err) => log::warn!("cannot remove {}: {err}", dir.display()),
        }
    }
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;
    use std::os::unix::fs::{MetadataExt, PermissionsExt};

    #[test]
    fn folders_are_private_and_removed_with_the_session() {
        let base = std::env::temp_dir().join(format!("spindle-logs-{}", crate::util::random_hex()));
        fs::create_dir_all(&base).unwrap();
        let db = base.join("spindle.db");
        let dir = prepare_session_dir(&db, "../evil/id").unwrap();
        assert!(dir.starts_with(base.join("logs")));
        assert_eq!(dir.file_name().unwrap(), "___evil_id");
        for path in [base.join("logs"), dir.clone()] {
            let mode = fs::metadata(&path).unwrap().mode() & 0o777;
            assert_eq!(mode, 0o700, "{}", path.display());
        }
        let file = dir.join("call.log");
        create_file(&file).unwrap();
        assert_eq!(fs::metadata(&file).unwrap().mode() & 0o777, 0o600);
        // A symlink planted at a log's name is not followed.
        let target = base.join("target.txt");
        fs::write(&target, "keep").unwrap();
        std::os::unix::fs::symlink(&target, dir.join("planted.log")).unwrap();
        assert!(create_file(&dir.join("planted.log")).is_err());
        assert_eq!(fs::read_to_string(&target).unwrap(), "keep");
        remove_session(&db, "../evil/id");
        assert!(!dir.exists());
        fs::remove_dir_all(base).unwrap();
    }

    #[test]
    fn a_folder_open_to_others_is_closed() {
        let base = std::env::temp_dir().join(format!("spindle-logs-{}", crate::util::random_hex()));
        fs::create_dir_all(base.join("logs")).unwrap();
        fs::set_permissions(base.join("logs"), fs::Permissions::from_mode(0o777)).unwrap();
        prepare_session_dir(&base.join("db"), "s").unwrap();
        assert_eq!(
            fs::metadata(base.join("logs")).unwrap().mode() & 0o777,
            0o700
        );
        fs::remove_dir_all(base).unwrap();
    }
}

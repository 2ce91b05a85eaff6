//! `spindle doctor`'s check of the session database: opened read-only,
//! its size, sessions and schema, and whether another process holds it.

use super::doctor_lines::Lines;
use std::path::Path;

pub(super) fn check_database(lines: &mut Lines, explicit: Option<&Path>) {
    lines.section("Sessions");
    let path = explicit
        .map(Path::to_path_buf)
        .unwrap_or_else(crate::store::default_path);
    if !path.exists() {
        lines.ok(
            "database",
            &format!("{} does not exist yet (made on first use)", path.display()),
        );
        return;
    }
    let size = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
    let opened = rusqlite::Connection::open_with_flags(
        &path,
        rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY | rusqlite::OpenFlags::SQLITE_OPEN_NO_MUTEX,
    );
    let connection = match opened {
        Ok(connection) => connection,
        Err(error) => {
            lines.bad(
                "database",
                &format!("{} cannot be opened: {error}", path.display()),
                "check its permissions, or use another one with --db",
            );
            return;
        }
    };
    // A Spindle writing to it (or creating it) holds its lock a moment.
    let _ = connection.busy_timeout(std::time::Duration::from_secs(5));
    let locked_out = |lines: &mut Lines| {
        lines.warn(
            "database",
            &format!(
                "{} stayed locked by another process; it was not checked (run doctor again in a moment)",
                path.display()
            ),
        )
    };
    let version: Result<i64, _> = connection.query_row("PRAGMA user_version", [], |r| r.get(0));
    if locked(version.as_ref().err()) {
        return locked_out(lines);
    }
    let integrity: Result<String, _> = connection.query_row("PRAGMA quick_check", [], |r| r.get(0));
    if locked(integrity.as_ref().err()) {
        return locked_out(lines);
    }
    match (version, integrity) {
        (Ok(version), Ok(check)) if check == "ok" && version <= crate::store::SCHEMA_VERSION => {
            lines.ok(
                "database",
                &format!(
                    "{} ({:.1} MiB, schema version {version}, integrity ok)",
                    path.display(),
                    size as f64 / 1_048_576.0
                ),
            )
        }
        (Ok(version), Ok(_)) if version > crate::store::SCHEMA_VERSION => lines.bad(
            "database",
            &format!(
                "{} was written by a newer Spindle (schema version {version})",
                path.display()
            ),
            "upgrade Spindle, or use another database with --db",
        ),
        (_, Ok(check)) => lines.bad(
            "database",
            &format!("{} fails its integrity check: {check}", path.display()),
            "copy it aside and start a new one (the sessions in it may be lost)",
        ),
        (_, Err(error)) => lines.bad(
            "database",
            &format!("{} cannot be read: {error}", path.display()),
            "check that it is a Spindle database, or use another one with --db",
        ),
    }
}

/// Whether `error` is another connection's lock, held past the wait.
fn locked(error: Option<&rusqlite::Error>) -> bool {
    matches!(
        error.and_then(rusqlite::Error::sqlite_error_code),
        Some(rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked)
    )
}

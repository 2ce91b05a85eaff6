//! The store's error: a message for a person, a kind for a caller.

use std::fmt;

/// What went wrong with the store, for a caller that branches on it; the
/// message (`Display`) says it for a person.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StoreErrorKind {
    /// Another connection holds the lock past the busy timeout.
    Busy,
    /// The file is not a SQLite database, or is damaged.
    Corrupt,
    /// Written by a newer Spindle: refused, untouched.
    Newer,
    /// The session (or row) asked for is not there.
    NotFound,
    /// The data changed under the request (a running turn, a moved item).
    Conflict,
    /// The file or its folder cannot be opened, read or written.
    Io,
    Other,
}

#[derive(Debug, Clone, PartialEq)]
pub struct StoreError {
    kind: StoreErrorKind,
    message: String,
}

impl StoreError {
    pub fn new(kind: StoreErrorKind, message: impl Into<String>) -> StoreError {
        StoreError {
            kind,
            message: message.into(),
        }
    }

    /// `message` (`what failed: sqlite's reason`), of the kind SQLite's
    /// error code names.
    pub(super) fn sqlite(message: String, error: &rusqlite::Error) -> StoreError {
        use rusqlite::ErrorCode as Code;
        let kind = match error.sqlite_error_code() {
            Some(Code::DatabaseBusy | Code::DatabaseLocked) => StoreErrorKind::Busy,
            Some(Code::DatabaseCorrupt | Code::NotADatabase) => StoreErrorKind::Corrupt,
            Some(
                Code::CannotOpen
                | Code::SystemIoFailure
                | Code::DiskFull
                | Code::ReadOnly
                | Code::PermissionDenied,
            ) => StoreErrorKind::Io,
            _ => StoreErrorKind::Other,
        };
        StoreError::new(kind, message)
    }

    pub fn kind(&self) -> StoreErrorKind {
        self.kind
    }
}

impl fmt::Display for StoreError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for StoreError {}

impl From<rusqlite::Error> for StoreError {
    fn from(error: rusqlite::Error) -> Self {
        StoreError::sqlite(format!("session database error: {error}"), &error)
    }
}

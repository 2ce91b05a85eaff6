//! Why a file tool failed: a kind a caller can branch on, and the sentence
//! the model (and the user) reads, exactly as the tool words it.

use std::fmt;

/// What went wrong, for a caller that acts on it; the text says the rest.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ToolErrorKind {
    /// The file, folder or job named does not exist.
    NotFound,
    /// A folder where a file was wanted, a file where a folder was, or not
    /// a regular file at all.
    WrongType,
    /// A binary file where text was wanted.
    Binary,
    /// Larger than the tools load whole.
    TooLarge,
    /// An edit's old text is not in the file.
    NoMatch,
    /// An edit's old text is in the file more than once.
    NotUnique,
    /// A file is already where a new one would go (an added file, the
    /// destination of a move).
    Exists,
    /// Arguments that cannot work whatever the files hold: an empty
    /// pattern, no edits, a line past the end, a malformed patch.
    InvalidArguments,
    /// The editor refused or failed a read or a write.
    Editor,
    /// Reading, writing or running failed on this machine.
    Io,
    /// The call was cancelled.
    Cancelled,
}

/// A file tool's failure.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ToolError {
    kind: ToolErrorKind,
    message: String,
}

impl ToolError {
    pub(crate) fn new(kind: ToolErrorKind, message: impl Into<String>) -> ToolError {
        ToolError {
            kind,
            message: message.into(),
        }
    }

    pub(crate) fn not_found(message: impl Into<String>) -> ToolError {
        ToolError::new(ToolErrorKind::NotFound, message)
    }

    pub(crate) fn invalid(message: impl Into<String>) -> ToolError {
        ToolError::new(ToolErrorKind::InvalidArguments, message)
    }

    pub(crate) fn io(message: impl Into<String>) -> ToolError {
        ToolError::new(ToolErrorKind::Io, message)
    }

    pub(crate) fn cancelled(message: impl Into<String>) -> ToolError {
        ToolError::new(ToolErrorKind::Cancelled, message)
    }

    /// The editor's own words for a failed read or write.
    pub(crate) fn editor(message: impl Into<String>) -> ToolError {
        ToolError::new(ToolErrorKind::Editor, message)
    }

    /// What went wrong, for a caller that branches on it (the tools'
    /// callers still show the text only).
    #[cfg_attr(not(test), allow(dead_code))]
    pub(crate) fn kind(&self) -> ToolErrorKind {
        self.kind
    }

    /// The same kind of failure, said with `message` (which usually
    /// quotes this one).
    pub(crate) fn reworded(&self, message: impl Into<String>) -> ToolError {
        ToolError::new(self.kind, message)
    }
}

impl fmt::Display for ToolError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for ToolError {}

/// For a caller that still carries errors as text.
impl From<ToolError> for String {
    fn from(error: ToolError) -> String {
        error.message
    }
}

#[cfg(test)]
impl PartialEq<&str> for ToolError {
    fn eq(&self, other: &&str) -> bool {
        self.message == *other
    }
}

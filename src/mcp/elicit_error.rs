//! Why a server's question did not reach the user, or the answer did not
//! go back: a kind a caller can branch on, and the sentence the server
//! (and the log) reads, exactly as `elicit.rs` words it.

use std::fmt;

/// What went wrong with an elicitation; the text says the rest.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ElicitErrorKind {
    /// What the server sent is not shown: a schema outside the restricted
    /// subset, a URL that is not plain http(s), anything over a cap.
    Refused,
    /// The editor does not take this mode of elicitation.
    Unsupported,
    /// The editor answered the question with an error.
    Editor,
    /// The user's answer is larger than a server is sent.
    TooLarge,
}

impl ElicitErrorKind {
    /// The kind in a few words, for the log.
    pub(crate) fn describe(self) -> &'static str {
        match self {
            ElicitErrorKind::Refused => "the request was refused",
            ElicitErrorKind::Unsupported => "the editor does not take it",
            ElicitErrorKind::Editor => "the editor answered with an error",
            ElicitErrorKind::TooLarge => "the answer was too large",
        }
    }
}

/// An elicitation that could not be asked or answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ElicitError {
    kind: ElicitErrorKind,
    message: String,
}

impl ElicitError {
    pub(crate) fn new(kind: ElicitErrorKind, message: impl Into<String>) -> ElicitError {
        ElicitError {
            kind,
            message: message.into(),
        }
    }

    /// What the server sent is refused.
    pub(crate) fn refused(message: impl Into<String>) -> ElicitError {
        ElicitError::new(ElicitErrorKind::Refused, message)
    }

    pub(crate) fn kind(&self) -> ElicitErrorKind {
        self.kind
    }
}

impl fmt::Display for ElicitError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for ElicitError {}

/// For a caller that still carries errors as text.
impl From<ElicitError> for String {
    fn from(error: ElicitError) -> String {
        error.message
    }
}

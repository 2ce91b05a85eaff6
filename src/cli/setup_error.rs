//! Why `spindle setup` stopped: a kind a caller can branch on, and the
//! sentence stderr gets after `spindle setup: `, exactly as setup words it.

use std::fmt;

/// What stopped the setup; the text says the rest.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SetupErrorKind {
    /// The flags cannot make a provider: a kind missing, a base URL or a
    /// name that is not one, flags that exclude each other, a line on
    /// `--key-stdin` that is no key, no model.
    Arguments,
    /// The input ended, or the person chose to stop; nothing was written.
    Stopped,
    /// The terminal or standard input could not be read.
    Input,
    /// The config file cannot be parsed, or could not be read or written.
    Config,
    /// A key could not be read, or its private file not written or put
    /// in place.
    Key,
    /// The server did not list its models, offered none to use, or the
    /// test request failed.
    Server,
}

/// A setup that could not finish.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SetupError {
    kind: SetupErrorKind,
    message: String,
}

impl SetupError {
    pub(crate) fn new(kind: SetupErrorKind, message: impl Into<String>) -> SetupError {
        SetupError {
            kind,
            message: message.into(),
        }
    }

    pub(crate) fn arguments(message: impl Into<String>) -> SetupError {
        SetupError::new(SetupErrorKind::Arguments, message)
    }

    pub(crate) fn stopped(message: impl Into<String>) -> SetupError {
        SetupError::new(SetupErrorKind::Stopped, message)
    }

    pub(crate) fn input(message: impl Into<String>) -> SetupError {
        SetupError::new(SetupErrorKind::Input, message)
    }

    pub(crate) fn config(message: impl Into<String>) -> SetupError {
        SetupError::new(SetupErrorKind::Config, message)
    }

    pub(crate) fn key(message: impl Into<String>) -> SetupError {
        SetupError::new(SetupErrorKind::Key, message)
    }

    pub(crate) fn server(message: impl Into<String>) -> SetupError {
        SetupError::new(SetupErrorKind::Server, message)
    }

    /// What stopped the setup, for a caller that branches on it.
    pub fn kind(&self) -> SetupErrorKind {
        self.kind
    }

    /// The same failure with `more` after its sentence.
    pub(crate) fn and(self, more: &str) -> SetupError {
        SetupError::new(self.kind, format!("{}{more}", self.message))
    }
}

impl fmt::Display for SetupError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for SetupError {}

/// For a caller that still carries errors as text.
impl From<SetupError> for String {
    fn from(error: SetupError) -> String {
        error.message
    }
}

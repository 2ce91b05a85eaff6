//! Why the config could not be used: a kind a caller can branch on, and
//! the sentence a person reads (the file, the line and column or the
//! field, and what is wrong), exactly as before.

use std::fmt;

/// What is wrong with the config, for a caller that acts on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConfigErrorKind {
    /// An explicit `--config` names no file.
    NotFound,
    /// The file exists but cannot be read (permissions, not UTF-8, too
    /// large, not a regular file).
    Unreadable,
    /// The text is not JSON; `line` and `column` are 1-based.
    Syntax { line: usize, column: usize },
    /// JSON, but a field has a value Spindle does not accept (an unknown
    /// field, a wrong type, a model naming no provider, …); the position
    /// when the JSON reader knew it.
    InvalidValue { at: Option<(usize, usize)> },
}

/// A config that cannot be used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    kind: ConfigErrorKind,
    message: String,
}

impl ConfigError {
    pub(crate) fn new(kind: ConfigErrorKind, message: impl Into<String>) -> ConfigError {
        ConfigError {
            kind,
            message: message.into(),
        }
    }

    /// A field's value that is refused; the message names the file and
    /// the field.
    pub(crate) fn invalid(message: impl Into<String>) -> ConfigError {
        ConfigError::new(ConfigErrorKind::InvalidValue { at: None }, message)
    }

    pub fn kind(&self) -> ConfigErrorKind {
        self.kind
    }
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for ConfigError {}

/// For a caller that still carries errors as text.
impl From<ConfigError> for String {
    fn from(error: ConfigError) -> String {
        error.message
    }
}

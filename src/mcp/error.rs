//! The error of every MCP operation.

use std::fmt;

/// What kind of failure an [`McpError`] is, for a caller that acts on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum McpErrorKind {
    /// The server wants a sign-in (HTTP 401 with no usable tokens).
    SignIn,
    /// The server did not answer in time.
    TimedOut,
    /// The request was cancelled (a turn cancelled, a shutdown).
    Cancelled,
    /// The connection is gone: the process ended, the stream closed.
    Closed,
    /// Anything else: it could not start, be reached, or answered wrongly.
    Failed,
}

/// Why an MCP operation failed; the message is meant for the user or the
/// model and never contains configured secrets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct McpError {
    pub message: String,
    /// The HTTP status that caused the failure, when there was one; used to
    /// fall back from Streamable HTTP to the legacy transport.
    pub(crate) status: Option<u16>,
    pub(crate) kind: McpErrorKind,
}

impl McpError {
    pub(crate) fn new(message: impl Into<String>) -> McpError {
        McpError::of(McpErrorKind::Failed, message)
    }

    pub(crate) fn of(kind: McpErrorKind, message: impl Into<String>) -> McpError {
        McpError {
            message: message.into(),
            status: None,
            kind,
        }
    }

    pub(crate) fn http(status: u16, message: impl Into<String>) -> McpError {
        McpError {
            message: message.into(),
            status: Some(status),
            kind: McpErrorKind::Failed,
        }
    }

    /// Server `name` answered 401 and no token helps: it needs sign-in.
    pub(crate) fn sign_in(name: &str) -> McpError {
        McpError {
            message: super::oauth::needs_sign_in(name),
            status: Some(401),
            kind: McpErrorKind::SignIn,
        }
    }
}

impl fmt::Display for McpError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for McpError {}

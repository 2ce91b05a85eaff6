//! The error of every MCP operation.

use std::fmt;

/// Why an MCP operation failed; the message is meant for the user or the
/// model and never contains configured secrets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct McpError {
    pub message: String,
    /// The HTTP status that caused the failure, when there was one; used to
    /// fall back from Streamable HTTP to the legacy transport.
    pub(crate) status: Option<u16>,
}

impl McpError {
    pub(crate) fn new(message: impl Into<String>) -> McpError {
        McpError {
            message: message.into(),
            status: None,
        }
    }

    pub(crate) fn http(status: u16, message: impl Into<String>) -> McpError {
        McpError {
            message: message.into(),
            status: Some(status),
        }
    }
}

impl fmt::Display for McpError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for McpError {}

//! The size limits of the config file (`limits`).

use serde::{Deserialize, Serialize};

/// Size limits on what model servers and workspace files can make Spindle
/// hold; each default is in docs/reliability.md, and a limit set here may
/// only raise or lower it (zero is ignored).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Limits {
    /// One SSE line from a model server.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sse_line_bytes: Option<u64>,
    /// One SSE event (all its data lines).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sse_event_bytes: Option<u64>,
    /// What one model response may make the agent hold: its text,
    /// thoughts and tool calls, counted as JSON text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response_bytes: Option<u64>,
    /// All the event data one model response may send.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stream_bytes: Option<u64>,
    /// Files `read_file` loads whole (larger ones are streamed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_whole_bytes: Option<u64>,
    /// Files `edit_file` changes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub edit_file_bytes: Option<u64>,
    /// Command output kept for the model (first and last parts).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command_output_bytes: Option<u64>,
    /// One message from an MCP server.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mcp_message_bytes: Option<u64>,
    /// Lines of turn output waiting for stdout.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_queue_lines: Option<u64>,
}

impl Limits {
    pub(super) fn is_default(&self) -> bool {
        *self == Limits::default()
    }

    /// A configured value, or `default` when unset or zero.
    pub fn or(value: Option<u64>, default: usize) -> usize {
        value
            .filter(|v| *v > 0)
            .and_then(|v| usize::try_from(v).ok())
            .unwrap_or(default)
    }

    /// The file tools' limits.
    pub fn files(&self) -> crate::tools::bounded::FileLimits {
        let defaults = crate::tools::bounded::FileLimits::default();
        crate::tools::bounded::FileLimits {
            whole: self
                .read_whole_bytes
                .filter(|v| *v > 0)
                .unwrap_or(defaults.whole),
            edit: self
                .edit_file_bytes
                .filter(|v| *v > 0)
                .unwrap_or(defaults.edit),
            page: defaults.page,
        }
    }

    /// The model streams' limits.
    pub fn streams(&self) -> crate::provider::http::StreamLimits {
        let defaults = crate::provider::http::StreamLimits::default();
        crate::provider::http::StreamLimits {
            line: Limits::or(self.sse_line_bytes, defaults.line),
            event: Limits::or(self.sse_event_bytes, defaults.event),
            response: Limits::or(self.response_bytes, defaults.response),
            stream: Limits::or(self.stream_bytes, defaults.stream),
        }
    }
}

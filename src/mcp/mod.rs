//! The MCP client: connects to the Model Context Protocol servers an ACP
//! client lists in `mcpServers`, turns their tools into tools the model can
//! call, and forwards the model's calls to them.
//!
//! The module is thread-based like the rest of Spindle (no async runtime):
//!
//! - `config` turns ACP `mcpServers` entries into [`ServerConfig`]s.
//! - `rpc` holds the JSON-RPC plumbing shared by every transport: the
//!   `Router` that hands responses to the threads waiting for them
//!   and answers the server's own requests.
//! - `stdio`, `http` and `sse` are the three transports: a child process,
//!   Streamable HTTP and the legacy HTTP+SSE transport.
//! - `elicit` checks a server's questions to the user (form and URL
//!   elicitation) before they are forwarded, and the answers after;
//!   `elicit_error` says why one could not be ([`ElicitError`]).
//! - `client` is one connection to one server ([`Client`]): the handshake,
//!   `tools/list`, `tools/call` and shutdown.
//! - `manager` is the set of servers of one ACP session ([`McpSession`]):
//!   background start-up, restarts of crashed servers and failure reports.
//! - `error` is the error of every MCP operation ([`McpError`]).
//! - `oauth/` is the sign-in to a remote server (`discovery.rs` the
//!   metadata and its URL checks, `loopback.rs` the one-shot callback
//!   listener, `store.rs` the token file) and the tokens the HTTP
//!   transport sends and refreshes.
//!
//! A server's question during a tool call is checked here, handed by the
//! transport's reader thread to the thread waiting for the call (the turn
//! worker), which puts it to the editor (`agent/turn/elicitation.rs`) and
//! answers the server.
//!
//! The protocol is the Model Context Protocol specification
//! (modelcontextprotocol.io), the versions in [`SUPPORTED_VERSIONS`].

mod client;
mod config;
pub(crate) mod elicit;
mod elicit_error;
mod error;
mod http;
mod manager;
pub(crate) mod oauth;
mod rpc;
mod sse;
mod stdio;

#[cfg(test)]
mod tests;

#[cfg(test)]
use client::Client;
#[cfg(test)]
use config::ServerConfig;
pub(crate) use config::{parse_servers, quoted_name, valid_name, TransportConfig, NAME_RULE};
pub(crate) use elicit::{
    check_url, CompletionHook, ElicitAnswer, Elicitation, ElicitationSupport, Elicitor,
};
pub(crate) use elicit_error::{ElicitError, ElicitErrorKind};
pub(crate) use error::{McpError, McpErrorKind};
pub(crate) use manager::McpSession;

use serde_json::Value;
use std::collections::HashSet;
use std::time::Duration;

/// The protocol revision Spindle offers in `initialize`.
pub(crate) const PROTOCOL_VERSION: &str = "2025-06-18";

/// The revisions Spindle accepts when a server answers with another one; a
/// tools-only client handles all of them because newer fields are optional.
pub(crate) const SUPPORTED_VERSIONS: [&str; 4] =
    ["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"];

/// How long the handshake (and each `tools/list` page) may take; package
/// runners such as `npx` can be slow to start a server.
pub(crate) const INIT_TIMEOUT: Duration = Duration::from_secs(30);

/// How long one `tools/call` may take before it is cancelled.
pub(crate) const CALL_TIMEOUT: Duration = Duration::from_secs(120);

/// The longest exposed tool name: the portable limit of the model providers.
pub(crate) const MAX_TOOL_NAME: usize = 64;

/// A tool offered by an MCP server, as the model sees it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct McpTool {
    /// The name of the server (from the configuration) that offers it.
    pub server: String,
    /// The tool's own name, which `tools/call` needs.
    pub name: String,
    /// The name given to the model: `{server}__{tool}` restricted to
    /// `[a-zA-Z0-9_-]` and at most 64 characters, unique within a session.
    pub exposed_name: String,
    pub description: String,
    /// A JSON Schema object with a top-level `"type":"object"` and a
    /// `properties` member, as the providers require.
    pub input_schema: Value,
    /// The server says the tool does not modify its environment
    /// (`readOnlyHint: true`). A hint only: never the sole safety check.
    pub read_only: bool,
    /// The server says the tool may destroy or overwrite data
    /// (`destructiveHint: true`).
    pub destructive: bool,
}

/// What a `tools/call` returned.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct CallResult {
    /// The content blocks (`text`, `image`, `audio`, `resource`,
    /// `resource_link`), passed on as the server sent them.
    pub content: Vec<Value>,
    /// `structuredContent`, when the server sent it.
    pub structured: Option<Value>,
    /// The tool failed (`isError: true`), or the server answered the call
    /// with a JSON-RPC error; either way the model should see the message.
    pub is_error: bool,
}

impl CallResult {
    /// A failed result carrying one text block.
    pub(crate) fn error_text(text: impl Into<String>) -> CallResult {
        CallResult {
            content: vec![serde_json::json!({"type": "text", "text": text.into()})],
            structured: None,
            is_error: true,
        }
    }

    /// The result as plain text, for a model request that cannot carry
    /// images: text blocks as they are, images and audio as placeholders,
    /// resources as their text or URI, and the structured content
    /// serialised when no text block came with it.
    pub(crate) fn text(&self) -> String {
        let mut parts: Vec<String> = Vec::new();
        let mut has_text = false;
        for block in &self.content {
            let kind = block.get("type").and_then(Value::as_str).unwrap_or("");
            let part = match kind {
                "text" => {
                    has_text = true;
                    block
                        .get("text")
                        .and_then(Value::as_str)
                        .unwrap_or("")
                        .to_string()
                }
                "image" | "audio" => {
                    let mime = block
                        .get("mimeType")
                        .and_then(Value::as_str)
                        .unwrap_or("unknown type");
                    let encoded = block.get("data").and_then(Value::as_str).unwrap_or("");
                    let kib = (encoded.len() * 3 / 4).div_ceil(1024);
                    format!("[{kind}: {mime}, {kib} KB]")
                }
                "resource" => {
                    let resource = block.get("resource").unwrap_or(&Value::Null);
                    match resource.get("text").and_then(Value::as_str) {
                        Some(text) => text.to_string(),
                        None => {
                            let uri = resource.get("uri").and_then(Value::as_str).unwrap_or("");
                            format!("[resource {uri}]")
                        }
                    }
                }
                "resource_link" => block
                    .get("uri")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_string(),
                _ => block.to_string(),
            };
            parts.push(part);
        }
        if !has_text {
            if let Some(structured) = &self.structured {
                parts.push(structured.to_string());
            }
        }
        parts.join("\n")
    }
}

/// Replaces every occurrence of each secret in `text` with `***`. Longer
/// secrets go first so that one containing another is hidden whole.
pub(crate) fn redact(text: &str, secrets: &[String]) -> String {
    let mut secrets: Vec<&String> = secrets.iter().filter(|s| !s.is_empty()).collect();
    secrets.sort_by_key(|s| std::cmp::Reverse(s.len()));
    let mut text = text.to_string();
    for secret in secrets {
        if text.contains(secret.as_str()) {
            text = text.replace(secret.as_str(), "***");
        }
    }
    text
}

/// The name a tool is exposed under: `{server}__{tool}` with every
/// character outside `[a-zA-Z0-9_-]` replaced by `_`, and, when longer than
/// 64 characters, cut to 55 and followed by `_` and a hash of the full name
/// so that long names stay distinct.
pub(crate) fn exposed_name(server: &str, tool: &str) -> String {
    let full = format!("{server}__{tool}");
    let clean: String = full
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    if clean.len() <= MAX_TOOL_NAME {
        return clean;
    }
    let hash = format!("{:08x}", fnv1a(full.as_bytes()) as u32);
    format!("{}_{hash}", &clean[..MAX_TOOL_NAME - 1 - hash.len()])
}

/// Makes `base` (an exposed name, so plain ASCII) unique among `taken` by
/// appending `_2`, `_3`, … within the length limit, and records it.
pub(crate) fn unique_name(base: &str, taken: &mut HashSet<String>) -> String {
    if taken.insert(base.to_string()) {
        return base.to_string();
    }
    let mut n = 2u32;
    loop {
        let suffix = format!("_{n}");
        let keep = base.len().min(MAX_TOOL_NAME - suffix.len());
        let candidate = format!("{}{suffix}", &base[..keep]);
        if taken.insert(candidate.clone()) {
            return candidate;
        }
        n += 1;
    }
}

/// The 64-bit FNV-1a hash: small, stable across runs and platforms.
fn fnv1a(bytes: &[u8]) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in bytes {
        hash ^= u64::from(*byte);
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
    hash
}

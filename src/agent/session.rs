//! Session state, owned by the dispatcher alone.

use super::permission::{Approvals, Policy};
use crate::cancel::CancelToken;
use crate::provider::{Message, Usage};
use crate::rpc::RequestId;
use serde_json::Value;
use std::path::PathBuf;
use std::thread::JoinHandle;

pub struct Session {
    pub id: String,
    pub cwd: PathBuf,
    /// Kept for the MCP client, which is not built yet.
    #[allow(dead_code)]
    pub mcp_servers: Vec<Value>,
    /// The conversation as the model sees it.
    pub messages: Vec<Message>,
    pub running: Option<RunningTurn>,
    pub usage: Usage,
    pub policy: Policy,
    pub approvals: Approvals,
}

pub struct RunningTurn {
    pub request_id: RequestId,
    pub cancel: CancelToken,
    pub handle: JoinHandle<()>,
}

impl Session {
    pub fn new(id: String, cwd: PathBuf, mcp_servers: Vec<Value>, policy: Policy) -> Session {
        Session {
            id,
            cwd,
            mcp_servers,
            messages: Vec::new(),
            running: None,
            usage: Usage::default(),
            policy,
            approvals: Approvals::default(),
        }
    }

    pub fn add_usage(&mut self, usage: &Usage) {
        self.usage.input_tokens += usage.input_tokens;
        self.usage.output_tokens += usage.output_tokens;
        self.usage.cached_tokens += usage.cached_tokens;
        self.usage.reasoning_tokens += usage.reasoning_tokens;
    }
}

/// Checks a client-chosen session id: short and safe to show, log and use
/// in file names later.
pub fn valid_client_session_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= 64
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
        && !id.starts_with('.')
}

#[cfg(test)]
mod tests {
    use super::valid_client_session_id;

    #[test]
    fn client_session_ids() {
        assert!(valid_client_session_id("demo"));
        assert!(valid_client_session_id("a-b_c.1"));
        for bad in ["", "../x", "a b", ".hidden", &"x".repeat(65), "é"] {
            assert!(!valid_client_session_id(bad), "{bad}");
        }
    }
}

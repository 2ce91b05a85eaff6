//! What every HTTP client of Spindle shares: model calls, model lists,
//! MCP servers over HTTP and `fetch_url` each build their `ureq` agent
//! from `agent_config`, so they trust the same certificate authorities
//! (`tls.rs`) and send the same User-Agent.

pub mod tls;

/// The User-Agent of every request Spindle makes.
pub const USER_AGENT: &str = concat!("spindle/", env!("CARGO_PKG_VERSION"));

/// The settings every `ureq` agent of Spindle starts from; callers add
/// their timeouts and error handling.
pub fn agent_config() -> ureq::config::ConfigBuilder<ureq::typestate::AgentScope> {
    ureq::Agent::config_builder()
        .tls_config(tls::config())
        .user_agent(USER_AGENT)
}

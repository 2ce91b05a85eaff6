//! What every HTTP client of Spindle shares: model calls, model lists,
//! MCP servers over HTTP and `fetch_url` each build their `ureq` agent
//! from `agent_config`, so they trust the same certificate authorities
//! (`tls.rs`), take the same proxies (`proxy.rs`) and send the same
//! User-Agent.

pub mod proxy;
pub mod tls;

/// The User-Agent of every request Spindle makes.
pub const USER_AGENT: &str = concat!("spindle/", env!("CARGO_PKG_VERSION"));

/// The settings every `ureq` agent of Spindle starts from, for requests
/// to `url` (which decides the proxy); callers add their timeouts and
/// error handling.
pub fn agent_config(url: &str) -> ureq::config::ConfigBuilder<ureq::typestate::AgentScope> {
    ureq::Agent::config_builder()
        .tls_config(tls::config())
        .proxy(proxy::for_url(url).map(|route| route.proxy))
        .user_agent(USER_AGENT)
}

/// What a request to `url` that got no answer says: the proxy when it is
/// the proxy that failed, else `what` at `url`.
pub fn unreachable(what: &str, url: &str, err: &ureq::Error) -> String {
    proxy::failure(url, err).unwrap_or_else(|| format!("cannot reach {what} at {url}: {err}"))
}

//! What every HTTP client of Spindle shares: model calls, model lists,
//! MCP servers over HTTP and `fetch_url` each build their `ureq` agent
//! from `agent_config`, so they trust the same certificate authorities
//! (`tls.rs`), take the same proxies (`proxy.rs`) and send the same
//! User-Agent.
//!
//! `tls.rs` builds the trust once (the bundled roots, `SSL_CERT_FILE`,
//! `SSL_CERT_DIR`, the config's `tls.ca_file`, the system's store) and
//! again only when `tls.ca_file` changes. `proxy.rs` picks each URL's
//! proxy (`HTTPS_PROXY`, `HTTP_PROXY`, `ALL_PROXY`, Spindle's own
//! `NO_PROXY` matching) and names a proxy that failed; `absolute.rs` sends
//! plain `http` to a proxy in absolute form.

mod absolute;
pub(crate) mod proxy;
pub(crate) mod tls;

/// The User-Agent of every request Spindle makes.
pub(crate) const USER_AGENT: &str = concat!("spindle/", env!("CARGO_PKG_VERSION"));

pub(crate) use tls::Trust;

/// The settings every `ureq` agent of Spindle starts from, for requests
/// to `url` (which decides the proxy), trusting what `trust` (the
/// caller's configuration) adds; callers add their timeouts and error
/// handling, and make the agent with [`agent`].
pub(crate) fn agent_config(
    url: &str,
    trust: &Trust,
) -> ureq::config::ConfigBuilder<ureq::typestate::AgentScope> {
    let route = proxy::for_url(url);
    let plain = url
        .get(..7)
        .is_some_and(|s| s.eq_ignore_ascii_case("http://"));
    let tls = match plain && route.is_none() {
        true => tls::bundled_only(),
        false => trust.tls_config(),
    };
    let builder = ureq::Agent::config_builder()
        .tls_config(tls)
        .user_agent(USER_AGENT);
    match route {
        // Plain http through an HTTP proxy is sent to it in absolute form
        // by [`agent`], one request per connection.
        Some(route) if route.absolute_form => builder
            .proxy(None)
            .max_idle_connections(0)
            .max_idle_connections_per_host(0),
        route => builder.proxy(route.map(|route| route.proxy)),
    }
}

/// The agent for requests to `url` with `config` (from [`agent_config`]
/// for the same URL).
pub(crate) fn agent(url: &str, config: ureq::config::Config) -> ureq::Agent {
    match proxy::for_url(url) {
        Some(route) if route.absolute_form => absolute::agent(config, &route.proxy),
        _ => config.into(),
    }
}

/// What a request to `url` that got no answer says: the proxy when it is
/// the proxy that failed, else `what` at `url`.
pub(crate) fn unreachable(what: &str, url: &str, err: &ureq::Error) -> String {
    proxy::failure(url, err).unwrap_or_else(|| format!("cannot reach {what} at {url}: {err}"))
}

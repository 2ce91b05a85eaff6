//! Finding who signs a user in to an MCP server: the server's protected
//! resource metadata (RFC 9728) names its authorization servers, whose own
//! metadata (RFC 8414, or OpenID Connect discovery) names the endpoints.
//! Every URL here comes from a server and is treated as hostile: https
//! only (plain http to this machine alone), no credentials in it, no
//! redirects followed, every body read within a cap.

use crate::net::Trust;
use serde_json::Value;
use std::io::Read;
use std::time::Duration;

/// Longest time of one request to a metadata, registration or token
/// endpoint.
const TIMEOUT: Duration = Duration::from_secs(30);
/// The largest metadata or token answer read.
const BODY_CAP: u64 = 1 << 20;

/// What sign-in needs of the authorization server.
pub(crate) struct Endpoints {
    pub authorization: String,
    pub token: String,
    pub registration: Option<String>,
    /// The `resource` parameter: the MCP server's URL.
    pub resource: String,
    /// The scopes to ask for, space-separated; may be empty.
    pub scope: String,
}

/// Whether `host` (lower case, brackets removed) is this machine.
fn loopback(host: &str) -> bool {
    host == "localhost"
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// A URL's scheme, host (lower case) and the rest from the first `/`.
pub(crate) struct Parts {
    pub scheme: String,
    pub authority: String,
    pub host: String,
    pub path: String,
}

pub(crate) fn parts(url: &str) -> Option<Parts> {
    let (scheme, rest) = url.split_once("://")?;
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let authority = rest[..end].to_ascii_lowercase();
    let host = match authority.strip_prefix('[') {
        Some(bracketed) => bracketed.split(']').next().unwrap_or("").to_string(),
        None => authority.split(':').next().unwrap_or("").to_string(),
    };
    let path = rest[end..].split('#').next().unwrap_or("").to_string();
    Some(Parts {
        scheme: scheme.to_ascii_lowercase(),
        authority,
        host,
        path,
    })
}

/// Refuses a URL Spindle must not send a user, a code or a token to:
/// anything but https, except plain http to this machine; credentials in
/// it; a fragment; characters that are not printable ASCII.
pub(crate) fn check_endpoint(url: &str, what: &str) -> Result<(), String> {
    let refused = |why: String| format!("the {what} URL is refused: {why}");
    crate::mcp::check_url(url).map_err(|why| refused(why.into()))?;
    let parts = parts(url).ok_or_else(|| refused("it is not a URL".into()))?;
    if url.contains('#') {
        return Err(refused("it has a fragment".into()));
    }
    match parts.scheme.as_str() {
        "https" => Ok(()),
        "http" if loopback(&parts.host) => Ok(()),
        _ => Err(refused(
            "it must be https (plain http only to this machine)".into(),
        )),
    }
}

/// Percent-encodes everything but the unreserved characters.
pub(crate) fn encode(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for b in text.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// A form body of `pairs`.
pub(crate) fn form(pairs: &[(&str, &str)]) -> String {
    pairs
        .iter()
        .map(|(name, value)| format!("{}={}", encode(name), encode(value)))
        .collect::<Vec<_>>()
        .join("&")
}

/// An agent for `url` trusting what `trust` (the config's) adds.
fn agent(url: &str, trust: &Trust) -> ureq::Agent {
    let config = crate::net::agent_config(url, trust)
        .http_status_as_error(false)
        .max_redirects(0)
        .timeout_global(Some(TIMEOUT))
        .build();
    crate::net::agent(url, config)
}

/// The status and the JSON body (`Null` when it is not JSON) of an answer.
fn read(response: ureq::http::Response<ureq::Body>) -> (u16, Value) {
    let status = response.status().as_u16();
    let mut bytes = Vec::new();
    let _ = response
        .into_body()
        .into_reader()
        .take(BODY_CAP)
        .read_to_end(&mut bytes);
    (
        status,
        serde_json::from_slice(&bytes).unwrap_or(Value::Null),
    )
}

/// GETs JSON from a checked URL; `Ok(None)` for a 4xx (not there).
fn get_json(url: &str, what: &str, trust: &Trust) -> Result<Option<Value>, String> {
    check_endpoint(url, what)?;
    let response = agent(url, trust)
        .get(url)
        .header("Accept", "application/json")
        .call()
        .map_err(|err| crate::net::unreachable(what, url, &err))?;
    match read(response) {
        (200..=299, value @ Value::Object(_)) => Ok(Some(value)),
        (200..=299, _) => Err(format!("the {what} at {url} is not a JSON object")),
        (400..=499, _) => Ok(None),
        (status, _) => Err(format!("the {what} at {url} answered HTTP {status}")),
    }
}

/// POSTs `body` of `content_type` to a checked URL; the status and JSON.
pub(crate) fn post(
    url: &str,
    trust: &Trust,
    what: &str,
    content_type: &str,
    body: String,
) -> Result<(u16, Value), String> {
    check_endpoint(url, what)?;
    let response = agent(url, trust)
        .post(url)
        .header("Content-Type", content_type)
        .header("Accept", "application/json")
        .send(body)
        .map_err(|err| crate::net::unreachable(what, url, &err))?;
    Ok(read(response))
}

/// A parameter of a `WWW-Authenticate: Bearer …` header.
pub(crate) fn challenge_param(header: &str, name: &str) -> Option<String> {
    let lower = header.to_ascii_lowercase();
    let mut from = 0;
    while let Some(at) = lower[from..].find(name) {
        let start = from + at;
        from = start + name.len();
        let before_ok = start == 0 || matches!(lower.as_bytes()[start - 1], b' ' | b',' | b'\t');
        let rest = header[from..].trim_start();
        let Some(rest) = rest.strip_prefix('=') else {
            continue;
        };
        if !before_ok {
            continue;
        }
        let rest = rest.trim_start();
        let value = match rest.strip_prefix('"') {
            Some(quoted) => quoted.split('"').next().unwrap_or(""),
            None => rest.split([',', ' ']).next().unwrap_or(""),
        };
        return Some(value.to_string());
    }
    None
}

/// What a server's 401 tells: where its resource metadata is and the
/// scope it wants, by a POST of `initialize` without a token.
pub(crate) fn probe(
    server_url: &str,
    trust: &Trust,
) -> Result<(Option<String>, Option<String>), String> {
    let body = serde_json::json!({
        "jsonrpc": "2.0", "id": 0, "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                   "clientInfo": {"name": "spindle", "version": env!("CARGO_PKG_VERSION")}}
    });
    let response = agent(server_url, trust)
        .post(server_url)
        .header("Content-Type", "application/json")
        .header("Accept", "application/json, text/event-stream")
        .send(body.to_string())
        .map_err(|err| crate::net::unreachable("the MCP server", server_url, &err))?;
    let header = response
        .headers()
        .get_all("www-authenticate")
        .iter()
        .filter_map(|value| value.to_str().ok())
        .find(|value| {
            value
                .trim_start()
                .to_ascii_lowercase()
                .starts_with("bearer")
        })
        .map(str::to_string);
    let _ = read(response);
    Ok(match header {
        Some(header) => (
            challenge_param(&header, "resource_metadata"),
            challenge_param(&header, "scope"),
        ),
        None => (None, None),
    })
}

/// The well-known URLs of `url` for `suffix`: path-aware first, then at
/// the root.
fn well_known(url: &str, suffix: &str) -> Vec<String> {
    let Some(parts) = parts(url) else {
        return Vec::new();
    };
    let origin = format!("{}://{}", parts.scheme, parts.authority);
    let path = parts
        .path
        .split('?')
        .next()
        .unwrap_or("")
        .trim_end_matches('/');
    let mut urls = Vec::new();
    if !path.is_empty() {
        urls.push(format!("{origin}/.well-known/{suffix}{path}"));
    }
    urls.push(format!("{origin}/.well-known/{suffix}"));
    urls
}

/// Finds the endpoints for signing in to the MCP server at `server_url`.
pub(crate) fn discover(server_url: &str, trust: &Trust) -> Result<Endpoints, String> {
    let (named, challenge_scope) = probe(server_url, trust)?;
    let candidates = match named {
        Some(url) => vec![url],
        None => well_known(server_url, "oauth-protected-resource"),
    };
    let mut resource_meta = None;
    for url in &candidates {
        if let Some(found) = get_json(url, "protected resource metadata", trust)? {
            resource_meta = Some(found);
            break;
        }
    }
    let meta = resource_meta.ok_or_else(|| {
        format!("the MCP server at {server_url} publishes no protected resource metadata, so Spindle cannot tell where to sign in")
    })?;
    // The metadata speaks for the server's origin only.
    let resource = meta["resource"].as_str().unwrap_or(server_url).to_string();
    let (ours, theirs) = (parts(server_url), parts(&resource));
    if ours.as_ref().map(|p| (&p.scheme, &p.authority))
        != theirs.as_ref().map(|p| (&p.scheme, &p.authority))
    {
        return Err(format!(
            "the protected resource metadata names another server ({}), which is refused",
            crate::mcp::elicit::clip(&resource, 200)
        ));
    }
    let issuer = meta["authorization_servers"]
        .as_array()
        .and_then(|list| list.first())
        .and_then(Value::as_str)
        .ok_or("the protected resource metadata names no authorization server")?
        .to_string();
    check_endpoint(&issuer, "authorization server")?;
    let mut as_meta = None;
    let mut tried = well_known(&issuer, "oauth-authorization-server");
    tried.extend(well_known(&issuer, "openid-configuration"));
    if let Some(p) = parts(&issuer) {
        let path = p.path.trim_end_matches('/');
        if !path.is_empty() {
            tried.push(format!(
                "{}://{}{path}/.well-known/openid-configuration",
                p.scheme, p.authority
            ));
        }
    }
    for url in &tried {
        if let Some(found) = get_json(url, "authorization server metadata", trust)? {
            as_meta = Some(found);
            break;
        }
    }
    let as_meta = as_meta
        .ok_or_else(|| format!("the authorization server {issuer} publishes no metadata"))?;
    let field = |name: &str| as_meta[name].as_str().map(str::to_string);
    let methods: Vec<&str> = as_meta["code_challenge_methods_supported"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    if !methods.contains(&"S256") {
        return Err(format!(
            "the authorization server {issuer} does not say it supports PKCE with S256, which sign-in requires"
        ));
    }
    let authorization = field("authorization_endpoint")
        .ok_or("the authorization server metadata has no authorization_endpoint")?;
    check_endpoint(&authorization, "authorization")?;
    let token =
        field("token_endpoint").ok_or("the authorization server metadata has no token_endpoint")?;
    check_endpoint(&token, "token")?;
    let registration = field("registration_endpoint");
    if let Some(url) = &registration {
        check_endpoint(url, "registration")?;
    }
    let scope = challenge_scope.unwrap_or_else(|| {
        meta["scopes_supported"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .collect::<Vec<_>>()
            .join(" ")
    });
    Ok(Endpoints {
        authorization,
        token,
        registration,
        resource: server_url.to_string(),
        scope,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_https_or_loopback_http_endpoints_pass() {
        for good in [
            "https://auth.example/authorize",
            "http://127.0.0.1:8080/token",
            "http://localhost/x",
            "http://[::1]:9/cb",
        ] {
            assert!(check_endpoint(good, "token").is_ok(), "{good}");
        }
        for bad in [
            "javascript:alert(1)",
            "file:///etc/passwd",
            "http://auth.example/authorize",
            "http://127.0.0.1.evil.example/x",
            "https://user@auth.example/x",
            "https://auth.example/x#frag",
            "https://auth.example/a b",
            "data:text/html,hi",
        ] {
            assert!(check_endpoint(bad, "authorization").is_err(), "{bad}");
        }
    }

    #[test]
    fn challenge_parameters_are_read_quoted_or_bare() {
        let header = r#"Bearer realm="x", resource_metadata="https://s.example/.well-known/oauth-protected-resource/mcp", scope=files:read"#;
        assert_eq!(
            challenge_param(header, "resource_metadata").as_deref(),
            Some("https://s.example/.well-known/oauth-protected-resource/mcp")
        );
        assert_eq!(
            challenge_param(header, "scope").as_deref(),
            Some("files:read")
        );
        assert_eq!(challenge_param(header, "error"), None);
        // A name inside another parameter's name is not it.
        assert_eq!(challenge_param(r#"Bearer xscope="a""#, "scope"), None);
    }

    #[test]
    fn well_known_urls_are_path_aware_first() {
        assert_eq!(
            well_known(
                "https://s.example/tenant/mcp?x=1",
                "oauth-protected-resource"
            ),
            [
                "https://s.example/.well-known/oauth-protected-resource/tenant/mcp",
                "https://s.example/.well-known/oauth-protected-resource",
            ]
        );
        assert_eq!(
            well_known("https://a.example", "oauth-authorization-server"),
            ["https://a.example/.well-known/oauth-authorization-server"]
        );
    }

    #[test]
    fn forms_encode_everything_but_unreserved() {
        assert_eq!(
            form(&[
                ("redirect_uri", "http://127.0.0.1:5/callback"),
                ("scope", "a b")
            ]),
            "redirect_uri=http%3A%2F%2F127.0.0.1%3A5%2Fcallback&scope=a%20b"
        );
    }
}

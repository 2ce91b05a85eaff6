//! Signing in to a remote MCP server (the authorization of the MCP
//! specification): OAuth 2.1's authorization code with PKCE (S256), the
//! `state` checked, the `resource` named, the client registered
//! dynamically (RFC 7591) when the server offers it, the browser sent
//! back to a one-shot listener on 127.0.0.1; then refresh.
//!
//! Tokens are secrets: they go in the `Authorization` header to the one
//! URL they were issued for and in requests to the token endpoint, and
//! nowhere else — no log line, no message, no tool result names them.

pub(crate) mod discovery;
mod error;
mod loopback;
pub(crate) mod store;

pub(crate) use discovery::check_endpoint;
pub(crate) use error::{OAuthError, OAuthErrorKind};
pub(crate) use store::Tokens;

use crate::cancel::{lock, CancelToken};
use crate::net::Trust;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

/// How long the listener waits for the browser.
pub(crate) const CALLBACK_WAIT: Duration = Duration::from_secs(300);

/// What the user's config says of a server's client, when it has no
/// dynamic registration (or the user wants their own).
#[derive(Clone, Default)]
pub(crate) struct ClientChoice {
    pub client_id: Option<String>,
    /// The loopback port to listen on (registered with the client id);
    /// 0 for any.
    pub port: u16,
}

/// A sign-in under way: the URL for the browser, and the listener that
/// waits for its answer.
pub(crate) struct Pending {
    authorization_url: String,
    callback: loopback::Callback,
    state: String,
    verifier: String,
    client_id: String,
    redirect_uri: String,
    endpoints: discovery::Endpoints,
    server_url: String,
    trust: Trust,
}

/// `n` random bytes from the system, as base64url without padding.
fn random_url_safe(n: usize) -> Result<String, String> {
    use ring::rand::SecureRandom;
    let mut bytes = vec![0u8; n];
    ring::rand::SystemRandom::new()
        .fill(&mut bytes)
        .map_err(|_| "the system gave no randomness".to_string())?;
    Ok(url_safe(&bytes))
}

fn url_safe(bytes: &[u8]) -> String {
    crate::util::base64_encode(bytes)
        .trim_end_matches('=')
        .replace('+', "-")
        .replace('/', "_")
}

/// The PKCE challenge of `verifier` (S256).
pub(crate) fn challenge(verifier: &str) -> String {
    url_safe(ring::digest::digest(&ring::digest::SHA256, verifier.as_bytes()).as_ref())
}

/// A value that may go in a header: printable ASCII, within a size.
fn header_safe(text: &str) -> bool {
    !text.is_empty() && text.len() <= 16 * 1024 && text.bytes().all(|b| b.is_ascii_graphic())
}

/// Starts signing in to the MCP server at `server_url`: discovery, the
/// client, the listener, the URL for the browser. HTTPS trusts what
/// `trust` (the config's) adds.
pub(crate) fn begin(
    server_url: &str,
    client: &ClientChoice,
    trust: &Trust,
) -> Result<Pending, OAuthError> {
    use OAuthErrorKind::{Callback, Discovery, Registration};
    let endpoints = discovery::discover(server_url, trust).map_err(OAuthError::wrap(Discovery))?;
    let callback = loopback::Callback::bind(client.port).map_err(OAuthError::wrap(Callback))?;
    let redirect_uri = callback.redirect_uri();
    let client_id = match (&client.client_id, &endpoints.registration) {
        (Some(id), _) => id.clone(),
        (None, Some(url)) => {
            register(url, &redirect_uri, trust).map_err(OAuthError::wrap(Registration))?
        }
        (None, None) => {
            return Err(OAuthError::new(Registration, "the authorization server offers no client registration; give the server's \"oauth\": {\"client_id\": …} in the config"))
        }
    };
    let state = random_url_safe(24).map_err(OAuthError::wrap(Callback))?;
    let verifier = random_url_safe(48).map_err(OAuthError::wrap(Callback))?;
    let mut pairs = vec![
        ("response_type", "code"),
        ("client_id", client_id.as_str()),
        ("redirect_uri", redirect_uri.as_str()),
        ("code_challenge_method", "S256"),
        ("state", state.as_str()),
        ("resource", endpoints.resource.as_str()),
    ];
    let code_challenge = challenge(&verifier);
    pairs.push(("code_challenge", code_challenge.as_str()));
    if !endpoints.scope.is_empty() {
        pairs.push(("scope", endpoints.scope.as_str()));
    }
    let joiner = if endpoints.authorization.contains('?') {
        '&'
    } else {
        '?'
    };
    let authorization_url = format!(
        "{}{joiner}{}",
        endpoints.authorization,
        discovery::form(&pairs)
    );
    check_endpoint(&authorization_url, "authorization").map_err(OAuthError::wrap(Discovery))?;
    Ok(Pending {
        authorization_url,
        callback,
        state,
        verifier,
        client_id,
        redirect_uri,
        endpoints,
        server_url: server_url.to_string(),
        trust: trust.clone(),
    })
}

/// Registers Spindle as a public client (no secret) that comes back to
/// `redirect_uri`; returns its client id.
fn register(url: &str, redirect_uri: &str, trust: &Trust) -> Result<String, String> {
    let body = serde_json::json!({
        "client_name": "Spindle",
        "redirect_uris": [redirect_uri],
        "grant_types": ["authorization_code", "refresh_token"],
        "response_types": ["code"],
        "token_endpoint_auth_method": "none",
    });
    let (status, answer) = discovery::post(
        url,
        trust,
        "registration",
        "application/json",
        body.to_string(),
    )?;
    if !(200..300).contains(&status) {
        return Err(format!(
            "the client registration at {url} was refused (HTTP {status})"
        ));
    }
    answer["client_id"]
        .as_str()
        .filter(|id| header_safe(id))
        .map(str::to_string)
        .ok_or_else(|| format!("the client registration at {url} gave no client_id"))
}

impl Pending {
    /// The URL the user opens: https, or http to this machine.
    pub(crate) fn authorization_url(&self) -> &str {
        &self.authorization_url
    }

    /// Waits for the browser (at most `wait`, or until `cancel`) and
    /// trades its code for tokens.
    pub(crate) fn finish(self, wait: Duration, cancel: &CancelToken) -> Result<Tokens, OAuthError> {
        let code = self.callback.wait(&self.state, wait, cancel)?;
        let body = discovery::form(&[
            ("grant_type", "authorization_code"),
            ("code", &code),
            ("redirect_uri", &self.redirect_uri),
            ("client_id", &self.client_id),
            ("code_verifier", &self.verifier),
            ("resource", &self.endpoints.resource),
        ]);
        let answer = token_request(&self.endpoints.token, body, &self.trust)
            .map_err(OAuthError::wrap(OAuthErrorKind::Token))?;
        tokens_from(
            &answer,
            None,
            Tokens {
                url: self.server_url,
                access_token: String::new(),
                refresh_token: None,
                expires_at: None,
                client_id: self.client_id,
                token_endpoint: self.endpoints.token,
                resource: self.endpoints.resource,
            },
        )
        .map_err(OAuthError::wrap(OAuthErrorKind::Token))
    }
}

fn token_request(url: &str, body: String, trust: &Trust) -> Result<Value, String> {
    let (status, answer) = discovery::post(
        url,
        trust,
        "token",
        "application/x-www-form-urlencoded",
        body,
    )?;
    if (200..300).contains(&status) {
        return Ok(answer);
    }
    // The error code only: the description is the server's prose.
    let code: String = answer["error"]
        .as_str()
        .unwrap_or("")
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || *c == '_')
        .take(60)
        .collect();
    Err(format!(
        "the token endpoint refused (HTTP {status}{})",
        if code.is_empty() {
            String::new()
        } else {
            format!(", {code}")
        }
    ))
}

/// Fills `base` from a token answer; a refresh that brings no new
/// refresh token keeps `old_refresh`.
fn tokens_from(
    answer: &Value,
    old_refresh: Option<String>,
    mut base: Tokens,
) -> Result<Tokens, String> {
    let access = answer["access_token"]
        .as_str()
        .filter(|token| header_safe(token))
        .ok_or("the token endpoint gave no usable access token")?;
    if let Some(kind) = answer["token_type"].as_str() {
        if !kind.eq_ignore_ascii_case("bearer") {
            return Err("the token endpoint gave a token that is not a bearer token".into());
        }
    }
    base.access_token = access.to_string();
    base.refresh_token = answer["refresh_token"]
        .as_str()
        .filter(|token| header_safe(token))
        .map(str::to_string)
        .or(old_refresh);
    base.expires_at = answer["expires_in"]
        .as_u64()
        .map(|seconds| store::now_secs().saturating_add(seconds));
    Ok(base)
}

/// Trades the refresh token of `tokens` for new ones.
pub(crate) fn refresh(tokens: &Tokens, trust: &Trust) -> Result<Tokens, OAuthError> {
    refresh_text(tokens, trust).map_err(OAuthError::wrap(OAuthErrorKind::Token))
}

fn refresh_text(tokens: &Tokens, trust: &Trust) -> Result<Tokens, String> {
    let refresh = tokens
        .refresh_token
        .clone()
        .ok_or("there is no refresh token")?;
    check_endpoint(&tokens.token_endpoint, "token")?;
    let body = discovery::form(&[
        ("grant_type", "refresh_token"),
        ("refresh_token", &refresh),
        ("client_id", &tokens.client_id),
        ("resource", &tokens.resource),
    ]);
    let answer = token_request(&tokens.token_endpoint, body, trust)?;
    tokens_from(&answer, Some(refresh), tokens.clone())
}

/// What a server that wants sign-in says.
pub(crate) fn needs_sign_in(name: &str) -> String {
    format!("MCP server `{name}` needs sign-in: run `spindle mcp login {name}`")
}

/// The tokens of one server for its HTTP transport: read from its file,
/// refreshed when stale or refused, dropped when refresh fails.
pub(crate) struct Auth {
    name: String,
    url: String,
    file: PathBuf,
    tokens: Mutex<Option<Tokens>>,
    /// What the refreshes over HTTPS trust (the config's).
    trust: Trust,
}

impl Auth {
    /// The tokens of server `name` at `url` kept in `dir`; tokens issued
    /// for another URL are not used.
    pub(crate) fn open(name: &str, url: &str, dir: &Path, trust: &Trust) -> Option<Auth> {
        let file = store::token_file(dir, name)?;
        let tokens = match store::load(&file) {
            Ok(tokens) => tokens.filter(|tokens| tokens.url == url),
            Err(error) => {
                log::warn!("{error}");
                None
            }
        };
        Some(Auth {
            name: name.to_string(),
            url: url.to_string(),
            file,
            tokens: Mutex::new(tokens),
            trust: trust.clone(),
        })
    }

    /// The access token held, as it is.
    pub(crate) fn current(&self) -> Option<String> {
        lock(&self.tokens)
            .as_ref()
            .map(|tokens| tokens.access_token.clone())
    }

    /// The access token to send, refreshed first when it has expired.
    pub(crate) fn bearer(&self) -> Option<String> {
        let mut held = lock(&self.tokens);
        if held.as_ref().is_some_and(Tokens::stale) {
            self.renew(&mut held);
        }
        held.as_ref().map(|tokens| tokens.access_token.clone())
    }

    /// After a 401 to a request that carried `sent`: refreshes (unless
    /// another request already did); true when there is a new token to
    /// try again with.
    pub(crate) fn refused(&self, sent: Option<&str>) -> bool {
        let mut held = lock(&self.tokens);
        match held.as_ref() {
            None => false,
            Some(tokens) if Some(tokens.access_token.as_str()) != sent => true,
            Some(_) => {
                self.renew(&mut held);
                held.is_some()
            }
        }
    }

    fn renew(&self, held: &mut Option<Tokens>) {
        let Some(tokens) = held.as_ref() else { return };
        match refresh(tokens, &self.trust) {
            Ok(fresh) if fresh.url == self.url => {
                if let Err(error) = store::save(&self.file, &fresh) {
                    log::warn!(
                        "keeping the new tokens of MCP server `{}`: {error}",
                        self.name
                    );
                }
                log::debug!("MCP server `{}`: the access token was refreshed", self.name);
                *held = Some(fresh);
            }
            Ok(_) => *held = None,
            Err(error) => {
                log::info!(
                    "MCP server `{}`: the tokens could not be refreshed ({error}); they are dropped",
                    self.name
                );
                *held = None;
                if let Err(error) = store::remove(&self.file) {
                    log::warn!("{error}");
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_challenge_is_rfc_7636_s256() {
        // base64url(SHA-256(verifier)) without padding, computed apart.
        assert_eq!(
            challenge("dBjftJeZ4CVP-mJ0kzSwYA6tD9R6OdOqOQmzYTPbsOU"),
            "LrKvOO-A2HTndshaGi6HdmvcddNpJZ_LEz_PTYZU6SI"
        );
        let verifier = random_url_safe(48).unwrap();
        assert_eq!(verifier.len(), 64);
        assert_ne!(verifier, random_url_safe(48).unwrap());
    }

    fn base() -> Tokens {
        Tokens {
            url: "https://s.example/mcp".into(),
            access_token: String::new(),
            refresh_token: None,
            expires_at: None,
            client_id: "c".into(),
            token_endpoint: "https://a.example/token".into(),
            resource: "https://s.example/mcp".into(),
        }
    }

    #[test]
    fn token_answers_are_checked() {
        let good =
            serde_json::json!({"access_token": "abc", "token_type": "Bearer", "expires_in": 60});
        let tokens = tokens_from(&good, Some("old".into()), base()).unwrap();
        assert_eq!(tokens.refresh_token.as_deref(), Some("old"));
        assert!(tokens.stale(), "a token of a minute is refreshed early");
        for bad in [
            serde_json::json!({"token_type": "Bearer"}),
            serde_json::json!({"access_token": "a\r\nX-Evil: 1"}),
            serde_json::json!({"access_token": "abc", "token_type": "mac"}),
        ] {
            assert!(tokens_from(&bad, None, base()).is_err(), "{bad}");
        }
    }

    #[test]
    fn tokens_for_another_url_are_not_used() {
        let dir = std::env::temp_dir().join(format!("spindle-oauth-{}", crate::util::random_hex()));
        let mut tokens = base();
        tokens.access_token = "held".into();
        store::save(&dir.join("srv.json"), &tokens).unwrap();
        let here = Auth::open("srv", "https://s.example/mcp", &dir, &Trust::default()).unwrap();
        assert_eq!(here.bearer().as_deref(), Some("held"));
        let elsewhere =
            Auth::open("srv", "https://other.example/mcp", &dir, &Trust::default()).unwrap();
        assert_eq!(elsewhere.bearer(), None);
        assert!(Auth::open("../up", "https://s.example/mcp", &dir, &Trust::default()).is_none());
        let _ = std::fs::remove_dir_all(&dir);
    }
}

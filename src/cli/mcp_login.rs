//! `spindle mcp login` and `spindle mcp logout`: a remote MCP server's
//! sign-in, and forgetting it.

use std::io::Write;

/// Signs in to server `name` (`login`) or removes its tokens.
pub(crate) fn run(
    loaded: &crate::config::loaded::Loaded,
    name: &str,
    url: Option<String>,
    login: bool,
) -> Result<String, String> {
    let (loaded, path) = loaded.get().map_err(ToString::to_string)?;
    let path = path.map_or_else(crate::config::default_path, std::path::Path::to_path_buf);
    let dir = crate::config::mcp_tokens_dir(&path);
    let file = crate::mcp::oauth::store::token_file(&dir, name).ok_or_else(|| {
        format!(
            "{}: {}",
            crate::mcp::quoted_name(name),
            crate::mcp::NAME_RULE
        )
    })?;
    if !login {
        return Ok(if crate::mcp::oauth::store::remove(&file)? {
            format!(
                "Signed out of MCP server `{name}`: its tokens are removed from this machine. Nothing was revoked at the server; revoke the grant there if it must end now.\n"
            )
        } else {
            format!("No sign-in was kept for MCP server `{name}`.\n")
        });
    }
    let server = find(loaded, name);
    let url = match (url, &server) {
        (Some(url), _) => url,
        (None, Some(server)) => match (server["url"].as_str(), server["type"].as_str()) {
            (Some(_), Some("sse")) => {
                return Err(format!(
                    "MCP server `{name}` uses the legacy SSE transport, which has no sign-in; only Streamable HTTP servers do"
                ))
            }
            (Some(url), _) => url.to_string(),
            (None, _) => {
                return Err(format!(
                    "MCP server `{name}` is a local command; only remote servers sign in"
                ))
            }
        },
        (None, None) => {
            return Err(format!(
                "there is no MCP server `{name}` in your config; `spindle mcp login {name} --url URL` signs in to one your editor names"
            ))
        }
    };
    crate::mcp::check_url(&url).map_err(|why| format!("the server's URL is refused: {why}"))?;
    let oauth = server.as_ref().map(|s| &s["oauth"]);
    let client = crate::mcp::oauth::ClientChoice {
        client_id: oauth
            .and_then(|o| o["client_id"].as_str())
            .map(str::to_string),
        port: oauth
            .and_then(|o| o["callback_port"].as_u64())
            .and_then(|p| u16::try_from(p).ok())
            .unwrap_or(0),
    };
    let pending = crate::mcp::oauth::begin(&url, &client, &loaded.trust)
        .map_err(|why| format!("cannot sign in to MCP server `{name}`: {why}"))?;
    let mut out = std::io::stdout();
    let _ = writeln!(
        out,
        "Open this URL in a browser to sign in to MCP server `{name}`:\n\n  {}\n\nWaiting for the browser (at most {} minutes)…",
        pending.authorization_url(),
        crate::mcp::oauth::CALLBACK_WAIT.as_secs() / 60
    );
    let _ = out.flush();
    let tokens = pending
        .finish(
            crate::mcp::oauth::CALLBACK_WAIT,
            &crate::cancel::CancelToken::new(),
        )
        .map_err(|why| format!("cannot sign in to MCP server `{name}`: {why}"))?;
    crate::mcp::oauth::store::save(&file, &tokens)?;
    Ok(format!(
        "Signed in to MCP server `{name}`; the tokens are kept in {}.\n",
        file.display()
    ))
}

/// The server `name` of the user's config, else of the project here when
/// it is trusted.
fn find(config: &crate::config::Config, name: &str) -> Option<serde_json::Value> {
    let named = |server: &serde_json::Value| server["name"].as_str() == Some(name);
    if let Some(server) = config.mcp_servers.iter().find(|s| named(s)) {
        return Some(server.clone());
    }
    let cwd = std::env::current_dir().ok()?;
    let cwd = crate::os::canonical(&cwd).unwrap_or(cwd);
    if !crate::config::project::project_trusted(config, &cwd) {
        return None;
    }
    let (servers, _) = crate::config::project::project_servers(config, &cwd);
    servers.into_iter().map(|(server, _)| server).find(named)
}

/// Whether a sign-in is kept for server `name` (looked at after a start,
/// which drops tokens that could not be refreshed).
pub(crate) fn held(tokens: &std::path::Path, name: &str) -> bool {
    crate::mcp::oauth::store::token_file(tokens, name).is_some_and(|file| file.is_file())
}

/// The doctor's line (what, and the fix) for a server whose start failed
/// with `reason`: whether tokens are kept when it needs sign-in.
pub(crate) fn failure(
    tokens: &std::path::Path,
    name: &str,
    reason: &crate::mcp::McpError,
) -> (String, String) {
    if reason.kind != crate::mcp::McpErrorKind::SignIn {
        return (
            reason.to_string(),
            "check its command or URL (spindle mcp list)".into(),
        );
    }
    let kept = if held(tokens, name) {
        "tokens are kept but refused"
    } else {
        "no tokens kept"
    };
    (
        format!("{reason} ({kept})"),
        format!("spindle mcp login {name}"),
    )
}

/// The doctor's line for a server that started with `count` tools.
pub(crate) fn started(tokens: &std::path::Path, name: &str, count: usize) -> String {
    let signed = if held(tokens, name) {
        "; signed in"
    } else {
        ""
    };
    format!("started; {count} tools{signed}")
}

//! `spindle mcp list`, `add` and `remove`.

/// `spindle mcp list`: the MCP servers of the config and of the project
/// here, with where they come from and whether they are used.
pub(super) fn mcp_list(
    loaded: &crate::config::loaded::Loaded,
    cwd: Option<std::path::PathBuf>,
) -> Result<String, String> {
    let (config, path) = loaded.get().map_err(ToString::to_string)?;
    let cwd = match cwd {
        Some(cwd) => cwd,
        None => std::env::current_dir().map_err(|e| e.to_string())?,
    };
    let cwd = crate::os::canonical(&cwd).unwrap_or(cwd);
    // A project's `.mcp.json` is the repository's text: its names,
    // commands and URLs are written out on one line each, never obeyed.
    let shown = |text: &str| crate::util::visible(text, false);
    let describe = |server: &serde_json::Value| -> String {
        match (server["command"].as_str(), server["url"].as_str()) {
            (Some(command), _) => {
                let args: Vec<&str> = server["args"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|a| a.as_str())
                    .collect();
                shown(format!("{command} {}", args.join(" ")).trim_end())
            }
            (None, Some(url)) => shown(&format!(
                "{} {url}",
                server["type"].as_str().unwrap_or("http")
            )),
            _ => "?".into(),
        }
    };
    let mut out = String::new();
    let source = path
        .map(|p| shown(&p.display().to_string()))
        .unwrap_or_else(|| "(no config file)".into());
    for server in &config.mcp_servers {
        out.push_str(&format!(
            "{}  {}  (from {source})\n",
            shown(server["name"].as_str().unwrap_or("?")),
            describe(server)
        ));
    }
    let trusted = crate::config::project::project_trusted(config, &cwd);
    let (servers, problems) = crate::config::project::project_servers(config, &cwd);
    let untrusted = format!(
        "; not used: the project {} is not trusted (`spindle trust` there uses it)",
        shown(&crate::config::project::root(&cwd).display().to_string())
    );
    for problem in problems {
        out.push_str(&format!("(not read: {})\n", shown(&problem)));
    }
    for (server, source) in servers {
        out.push_str(&format!(
            "{}  {}  (from {}{})\n",
            shown(server["name"].as_str().unwrap_or("?")),
            describe(&server),
            shown(&source.display().to_string()),
            if trusted { "" } else { untrusted.as_str() }
        ));
    }
    if out.is_empty() {
        out.push_str("No MCP servers configured (editors give theirs per session).\n");
    }
    Ok(out)
}

/// `spindle mcp add` (a server) and `spindle mcp remove` (`None`): the
/// user's config's `mcp_servers`, everything else in it kept.
pub(super) fn mcp_edit(
    config: Option<std::path::PathBuf>,
    name: &str,
    server: Option<serde_json::Value>,
) -> Result<String, String> {
    let path = config.unwrap_or_else(crate::config::default_path);
    let mut config = match crate::config::read_text(&path)? {
        Some(text) => crate::config::Config::parse(&text, &path)?,
        None => crate::config::Config::default(),
    };
    let known = config.mcp_servers.iter().position(|s| s["name"] == name);
    let said = match (server, known) {
        (Some(_), Some(_)) => {
            return Err(format!(
                "{} already has an MCP server named {name:?}; `spindle mcp remove {name}` first",
                path.display()
            ))
        }
        (Some(server), None) => {
            if !crate::mcp::valid_name(name) {
                return Err(format!(
                    "{}: {}",
                    crate::mcp::quoted_name(name),
                    crate::mcp::NAME_RULE
                ));
            }
            config.mcp_servers.push(server);
            crate::config::check_mcp_servers(&config.mcp_servers, "the new server")?;
            if let Some((_, why)) = crate::mcp::parse_servers(&config.mcp_servers).1.first() {
                return Err(why.clone());
            }
            format!(
                "Added the MCP server {} to {}; `spindle doctor` starts it and lists its tools.\n",
                crate::util::visible(name, false),
                crate::util::visible(&path.display().to_string(), false)
            )
        }
        (None, Some(index)) => {
            config.mcp_servers.remove(index);
            format!(
                "Removed the MCP server {} from {}.\n",
                crate::util::visible(name, false),
                crate::util::visible(&path.display().to_string(), false)
            )
        }
        (None, None) => {
            return Err(format!(
                "{} has no MCP server named {name:?} (`spindle mcp list` shows them)",
                path.display()
            ))
        }
    };
    crate::config::save(&path, &config)?;
    Ok(said)
}

/// `spindle mcp add --project` and `remove --project`: the server in the
/// `.mcp.json` of the project here (its repository's root), in Claude
/// Code's form, checked as a server of the user's config is; said with
/// whether the project is trusted, since only then does it run.
pub(super) fn mcp_edit_project(
    loaded: &crate::config::loaded::Loaded,
    name: &str,
    server: Option<serde_json::Value>,
) -> Result<String, String> {
    let (config, _) = loaded.get().map_err(ToString::to_string)?;
    let cwd =
        std::env::current_dir().map_err(|e| format!("cannot tell the current folder: {e}"))?;
    let cwd = crate::os::canonical(&cwd).unwrap_or(cwd);
    let root = crate::config::project::root(&cwd);
    let shown = |text: &str| crate::util::visible(text, false);
    let claude = match &server {
        None => None,
        Some(server) => {
            crate::config::check_mcp_servers(std::slice::from_ref(server), "the new server")?;
            if let Some((_, why)) = crate::mcp::parse_servers(std::slice::from_ref(server))
                .1
                .first()
            {
                return Err(why.clone());
            }
            Some(claude_form(server))
        }
    };
    let path = crate::config::project::edit_mcp_json(&root, name, claude)?;
    let path = shown(&path.display().to_string());
    let name = shown(name);
    if server.is_none() {
        return Ok(format!("Removed the MCP server {name} from {path}.\n"));
    }
    let root = shown(&root.display().to_string());
    let trust = if crate::config::project::project_trusted(config, &cwd) {
        format!("{root} is trusted, so new sessions there start it")
    } else {
        format!("{root} is not trusted yet: `spindle trust` there starts it")
    };
    Ok(format!(
        "Added the MCP server {name} to {path}; a project's servers run only once the project is trusted, and {trust}.\n"
    ))
}

/// A server as `mcp add` builds it (`env` and `headers` lists of
/// `{name, value}`) in `.mcp.json`'s form: `{"command", "args", "env"}`
/// or `{"type", "url", "headers"}`, the lists as objects.
fn claude_form(server: &serde_json::Value) -> serde_json::Value {
    let pairs = |key: &str| -> serde_json::Map<String, serde_json::Value> {
        server[key]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|pair| Some((pair["name"].as_str()?.to_string(), pair["value"].clone())))
            .collect()
    };
    match server["url"].as_str() {
        Some(url) => serde_json::json!({
            "type": server["type"].as_str().unwrap_or("http"),
            "url": url,
            "headers": pairs("headers"),
        }),
        None => serde_json::json!({
            "command": server["command"],
            "args": server["args"],
            "env": pairs("env"),
        }),
    }
}

//! `spindle mcp list`.

/// `spindle mcp list`: the MCP servers of the config and of the project
/// here, with where they come from and whether they are used.
pub fn mcp_list(
    config: Option<std::path::PathBuf>,
    cwd: Option<std::path::PathBuf>,
) -> Result<String, String> {
    let (config, path) = crate::config::Config::load(config.as_deref())?;
    let cwd = match cwd {
        Some(cwd) => cwd,
        None => std::env::current_dir().map_err(|e| e.to_string())?,
    };
    let cwd = crate::os::canonical(&cwd).unwrap_or(cwd);
    let describe = |server: &serde_json::Value| -> String {
        match (server["command"].as_str(), server["url"].as_str()) {
            (Some(command), _) => {
                let args: Vec<&str> = server["args"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|a| a.as_str())
                    .collect();
                format!("{command} {}", args.join(" "))
                    .trim_end()
                    .to_string()
            }
            (None, Some(url)) => format!("{} {url}", server["type"].as_str().unwrap_or("http")),
            _ => "?".into(),
        }
    };
    let mut out = String::new();
    let source = path
        .map(|p| p.display().to_string())
        .unwrap_or_else(|| "(no config file)".into());
    for server in &config.mcp_servers {
        out.push_str(&format!(
            "{}  {}  (from {source})\n",
            server["name"].as_str().unwrap_or("?"),
            describe(server)
        ));
    }
    let trusted = crate::config::project::project_trusted(&config, &cwd);
    for server in crate::config::project::project_mcp_servers(&cwd)? {
        out.push_str(&format!(
            "{}  {}  (from {}/.spindle/config.json{})\n",
            server["name"].as_str().unwrap_or("?"),
            describe(&server),
            cwd.display(),
            if trusted {
                ""
            } else {
                "; not used: the project is not trusted (permissions.projects in your config)"
            }
        ));
    }
    if out.is_empty() {
        out.push_str("No MCP servers configured (editors give theirs per session).\n");
    }
    Ok(out)
}

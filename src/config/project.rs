//! A workspace's own `.spindle/config.json` — its MCP servers, rules and
//! defaults, each read only as far as the user trusts the project — and
//! the user's answers about a project, kept in the user's own config.

use super::{check_mcp_servers, save, Config, Defaults};
use serde_json::Value;
use std::path::Path;

/// The MCP servers of a workspace's own `.spindle/config.json`
/// (`mcp_servers`); used only when the project is trusted (they start
/// commands of the repository's choosing).
pub fn project_mcp_servers(cwd: &Path) -> Result<Vec<Value>, String> {
    let path = cwd.join(".spindle").join("config.json");
    let Some(bytes) = read_project_config(cwd, &path)? else {
        return Ok(Vec::new());
    };
    let value: Value =
        serde_json::from_slice(&bytes).map_err(|err| format!("{}: {err}", path.display()))?;
    let servers: Vec<Value> = match value.get("mcp_servers") {
        None => return Ok(Vec::new()),
        Some(Value::Array(list)) => list.clone(),
        Some(_) => return Err(format!("{}: mcp_servers must be an array", path.display())),
    };
    check_mcp_servers(&servers, &format!("{}: mcp_servers", path.display()))?;
    Ok(servers)
}

/// Whether the user trusts the project at `cwd` (its allow rules and MCP
/// servers count).
pub fn project_trusted(config: &Config, cwd: &Path) -> bool {
    config
        .permissions
        .projects
        .get(&cwd.display().to_string())
        .is_some_and(|p| p.trusted)
}

/// Adds `rule` to the rules answered for `project` in the user's config
/// file at `path` (created when missing), keeping everything else. These
/// answers live in the user's own file, never in the workspace, where
/// anyone who can commit could have written them.
pub fn add_project_rule(
    path: &Path,
    project: &str,
    rule: crate::policy::rules::Rule,
) -> Result<(), String> {
    let mut config = match std::fs::read_to_string(path) {
        Ok(text) => Config::parse(&text, path)?,
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => Config::default(),
        Err(err) => return Err(format!("cannot read {}: {err}", path.display())),
    };
    let rules = &mut config
        .permissions
        .projects
        .entry(project.to_string())
        .or_default()
        .rules;
    if !rules.contains(&rule) {
        rules.push(rule);
    }
    save(path, &config)
}

/// The largest project configuration read.
pub const PROJECT_CONFIG_CAP: u64 = 1024 * 1024;

/// The bytes of a workspace's `.spindle/config.json`, read as every file a
/// repository ships is ([`crate::tools::shipped`]): `None` when missing.
fn read_project_config(cwd: &Path, path: &Path) -> Result<Option<Vec<u8>>, String> {
    crate::tools::shipped::read(path, cwd, PROJECT_CONFIG_CAP)
        .map_err(|why| format!("{} is not read: {}", path.display(), why.reason()))
}

/// The permission rules of a workspace's own `.spindle/config.json`
/// (`permissions.rules`; other keys are not read here). They can only
/// tighten what the user allows, unless the user trusts the project.
pub fn project_rules(cwd: &Path) -> Result<Vec<crate::policy::rules::Rule>, String> {
    let path = cwd.join(".spindle").join("config.json");
    let Some(bytes) = read_project_config(cwd, &path)? else {
        return Ok(Vec::new());
    };
    let value: Value =
        serde_json::from_slice(&bytes).map_err(|err| format!("{}: {err}", path.display()))?;
    match value.get("permissions").and_then(|p| p.get("rules")) {
        None => Ok(Vec::new()),
        Some(rules) => crate::policy::rules::parse_rules(rules)
            .map_err(|problem| format!("{}: {problem}", path.display())),
    }
}

/// Marks the project at `project` trusted (or not) in the user's config
/// file at `path` (created when missing), keeping everything else.
pub fn set_trusted(path: &Path, project: &str, trusted: bool) -> Result<(), String> {
    let mut config = match std::fs::read_to_string(path) {
        Ok(text) => Config::parse(&text, path)?,
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => Config::default(),
        Err(err) => return Err(format!("cannot read {}: {err}", path.display())),
    };
    let projects = &mut config.permissions.projects;
    projects.entry(project.to_string()).or_default().trusted = trusted;
    // Nothing left to say of it: no entry.
    if projects[project] == Default::default() {
        projects.remove(project);
    }
    save(path, &config)
}

/// The `defaults` of a workspace's own `.spindle/config.json` (model,
/// effort, preset, approval), as written; the caller decides whether
/// the project is trusted enough to use them.
pub fn project_defaults(cwd: &Path) -> Result<Option<Defaults>, String> {
    let path = cwd.join(".spindle").join("config.json");
    let Some(bytes) = read_project_config(cwd, &path)? else {
        return Ok(None);
    };
    let value: Value =
        serde_json::from_slice(&bytes).map_err(|err| format!("{}: {err}", path.display()))?;
    match value.get("defaults") {
        None => Ok(None),
        Some(defaults) => serde_json::from_value(defaults.clone())
            .map(Some)
            .map_err(|err| format!("{}: defaults: {err}", path.display())),
    }
}

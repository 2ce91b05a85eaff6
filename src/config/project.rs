//! A workspace's own `.spindle/config.json` — its MCP servers, rules and
//! defaults, each read only as far as the user trusts the project — and
//! the user's answers about a project, kept in the user's own config.

use super::{check_mcp_servers, save, Config, Defaults};
use serde_json::Value;
use std::path::{Path, PathBuf};

/// How many folders above the working folder a project root is looked
/// for: deeper than any checkout, and a bound on a climb over a slow or
/// strange file system.
const ROOT_CLIMB: usize = 40;

/// The project a working folder belongs to: the nearest folder at or
/// above `cwd` holding a `.git` (a folder, a file or a link: only its
/// presence counts, nothing is read through it), else `cwd` itself. Its
/// trust, `.spindle/`, `.claude/`, `.mcp.json` and instruction files
/// are the project's, whichever of its folders Spindle starts in.
///
/// When `cwd` lies inside the home folder the climb stops below it: a
/// home kept in git (dotfiles) must never make the user's own `~/.claude`
/// or `~/.mcp.json` a project's, nor a folder above the home. The home
/// is compared by real path too, so a link to it is no way round.
pub(crate) fn root(cwd: &Path) -> PathBuf {
    let home = crate::os::folders::home();
    root_below(cwd, home.as_deref())
}

/// [`root`] with the home folder given.
fn root_below(cwd: &Path, home: Option<&Path>) -> PathBuf {
    let real = |dir: &Path| crate::os::canonical(dir).unwrap_or_else(|_| dir.to_path_buf());
    let homes: Vec<PathBuf> = home
        .into_iter()
        .flat_map(|h| [h.to_path_buf(), real(h)])
        .collect();
    let real_cwd = real(cwd);
    let fenced: Vec<&PathBuf> = homes
        .iter()
        .filter(|home| cwd.starts_with(home) || real_cwd.starts_with(home))
        .collect();
    for dir in cwd.ancestors().take(ROOT_CLIMB + 1) {
        if dir != cwd && !fenced.is_empty() {
            let real_dir = real(dir);
            let below = |home: &&PathBuf| {
                dir.starts_with(home) && dir != home.as_path()
                    || real_dir.starts_with(home) && real_dir != home.as_path()
            };
            let at_or_above = fenced
                .iter()
                .any(|home| home.starts_with(dir) || home.starts_with(&real_dir));
            if at_or_above || !fenced.iter().any(below) {
                break;
            }
        }
        if std::fs::symlink_metadata(dir.join(".git")).is_ok() {
            return dir.to_path_buf();
        }
    }
    cwd.to_path_buf()
}

/// The MCP servers of a workspace's own `.spindle/config.json`
/// (`mcp_servers`); used only when the project is trusted (they start
/// commands of the repository's choosing).
pub(crate) fn project_mcp_servers(cwd: &Path) -> Result<Vec<Value>, String> {
    let root = root(cwd);
    let path = root.join(".spindle").join("config.json");
    let Some(bytes) = read_project_config(&root, &path)? else {
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

/// Whether the user trusts the project `cwd` belongs to (its allow
/// rules, MCP servers, hooks, skills, commands and defaults count): its
/// [`root`]'s entry decides. An entry for a folder below the root (an
/// older version trusted the working folder itself) does not count: it
/// was given for that folder's settings, never for the root's.
pub(crate) fn project_trusted(config: &Config, cwd: &Path) -> bool {
    config
        .permissions
        .projects
        .get(&key(cwd))
        .is_some_and(|p| p.trusted)
}

/// The name the user's config keeps a project's answers under (its
/// trust, the rules answered for it): its [`root`]'s real path.
pub(crate) fn key(cwd: &Path) -> String {
    let root = root(cwd);
    let root = crate::os::canonical(&root).unwrap_or(root);
    root.display().to_string()
}

/// Whether the user's config trusts exactly the folder `root`.
pub(crate) fn trusted_at(config: &Config, root: &Path) -> bool {
    config
        .permissions
        .projects
        .get(&root.display().to_string())
        .is_some_and(|p| p.trusted)
}

/// A trust given by an older version to the working folder `cwd` itself
/// when it is not its project's root: such a trust no longer counts,
/// and `spindle doctor` says so. `None` when there is none.
pub(crate) fn stale_trust(config: &Config, cwd: &Path) -> Option<PathBuf> {
    let cwd = crate::os::canonical(cwd).unwrap_or_else(|_| cwd.to_path_buf());
    let root = root(&cwd);
    (root != cwd && trusted_at(config, &cwd) && !trusted_at(config, &root)).then_some(cwd)
}

/// Adds `rule` to the rules answered for `project` in the user's config
/// file at `path` (created when missing), keeping everything else. These
/// answers live in the user's own file, never in the workspace, where
/// anyone who can commit could have written them.
pub(crate) fn add_project_rule(
    path: &Path,
    project: &str,
    rule: crate::policy::rules::Rule,
) -> Result<(), String> {
    let mut config = match super::read_text(path)? {
        Some(text) => Config::parse(&text, path)?,
        None => Config::default(),
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
pub(crate) const PROJECT_CONFIG_CAP: u64 = 1024 * 1024;

/// The bytes of a workspace's `.spindle/config.json`, read as every file a
/// repository ships is ([`crate::tools::shipped`]): `None` when missing.
fn read_project_config(cwd: &Path, path: &Path) -> Result<Option<Vec<u8>>, String> {
    crate::tools::shipped::read(path, cwd, PROJECT_CONFIG_CAP)
        .map_err(|why| format!("{} is not read: {}", path.display(), why.reason()))
}

/// The permission rules of a workspace's own `.spindle/config.json`
/// (`permissions.rules`; other keys are not read here). They can only
/// tighten what the user allows, unless the user trusts the project.
pub(crate) fn project_rules(cwd: &Path) -> Result<Vec<crate::policy::rules::Rule>, String> {
    let root = root(cwd);
    let path = root.join(".spindle").join("config.json");
    let Some(bytes) = read_project_config(&root, &path)? else {
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
pub(crate) fn set_trusted(path: &Path, project: &str, trusted: bool) -> Result<(), String> {
    let mut config = match super::read_text(path)? {
        Some(text) => Config::parse(&text, path)?,
        None => Config::default(),
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
pub(crate) fn project_defaults(cwd: &Path) -> Result<Option<Defaults>, String> {
    let root = root(cwd);
    let path = root.join(".spindle").join("config.json");
    let Some(bytes) = read_project_config(&root, &path)? else {
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

/// The project's MCP servers, each with the file it came from: its
/// `.spindle/config.json`'s `mcp_servers`, then `.mcp.json`'s
/// `mcpServers` (Claude Code's project file); on a name used twice the
/// first wins. What could not be read is in the second list. Whether the
/// project is trusted is the caller's question.
pub(crate) fn project_servers(config: &Config, cwd: &Path) -> (Vec<(Value, PathBuf)>, Vec<String>) {
    let mut servers: Vec<(Value, PathBuf)> = Vec::new();
    let mut problems = Vec::new();
    let root = root(cwd);
    let own = root.join(".spindle").join("config.json");
    match project_mcp_servers(&root) {
        Ok(list) => servers.extend(list.into_iter().map(|s| (s, own.clone()))),
        Err(problem) => problems.push(problem),
    }
    let path = root.join(".mcp.json");
    let withheld = config.secrets().to_remove_here();
    match mcp_json_servers(&root, &path, &withheld, &mut problems) {
        Ok(list) => {
            for server in list {
                if !servers.iter().any(|(s, _)| s["name"] == server["name"]) {
                    servers.push((server, path.clone()));
                }
            }
        }
        Err(problem) => problems.push(problem),
    }
    // A name outside the rule is the repository's choice: its server is
    // left out, named (written out) in a problem.
    servers.retain(|(server, source)| {
        let name = server["name"].as_str().unwrap_or_default();
        let valid = crate::mcp::valid_name(name);
        if !valid {
            problems.push(format!(
                "{}: the MCP server {}: {}; not started",
                source.display(),
                crate::mcp::quoted_name(name),
                crate::mcp::NAME_RULE
            ));
        }
        valid
    });
    (servers, problems)
}

/// Adds the server `server` (Claude Code's form) under `name` to the
/// `.mcp.json` of the project at `root`, or removes the one of that name
/// (`None`), keeping every other entry; the file is written anew,
/// indented. Only a regular file is read or replaced: a link (which
/// could lead out of the project), a folder or a FIFO there is refused,
/// and the new file takes the old one's place by a rename, never
/// written through whatever the name points at. Returns the file's path.
pub(crate) fn edit_mcp_json(
    root: &Path,
    name: &str,
    server: Option<Value>,
) -> Result<PathBuf, String> {
    let path = root.join(".mcp.json");
    let shown = crate::util::visible(&path.display().to_string(), false);
    let bytes = match std::fs::symlink_metadata(&path) {
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => None,
        Err(error) => return Err(format!("{shown}: {error}")),
        Ok(meta) if !meta.file_type().is_file() => {
            let what = if meta.file_type().is_symlink() {
                "a symbolic link"
            } else if meta.is_dir() {
                "a folder"
            } else {
                "not a regular file"
            };
            return Err(format!(
                "{shown} is {what}; Spindle writes a project's .mcp.json only as a regular file (replace it with one, or edit what it points at yourself)"
            ));
        }
        Ok(_) => read_project_config(root, &path)?,
    };
    let mut value: Value = match bytes {
        Some(bytes) => {
            serde_json::from_slice(&bytes).map_err(|err| format!("{shown}: {err}; fix it first"))?
        }
        None => Value::Object(Default::default()),
    };
    let Some(top) = value.as_object_mut() else {
        return Err(format!("{shown}: must be a JSON object; fix it first"));
    };
    let listed = top
        .entry("mcpServers")
        .or_insert_with(|| Value::Object(Default::default()));
    let Some(listed) = listed.as_object_mut() else {
        return Err(format!(
            "{shown}: mcpServers must be an object; fix it first"
        ));
    };
    let quoted = crate::util::visible(&format!("{name:?}"), false);
    match server {
        Some(_) if listed.contains_key(name) => {
            return Err(format!(
                "{shown} already has an MCP server named {quoted}; `spindle mcp remove --project {name}` first"
            ))
        }
        Some(server) => {
            listed.insert(name.to_string(), server);
        }
        None => {
            if listed.remove(name).is_none() {
                return Err(format!(
                    "{shown} has no MCP server named {quoted} (`spindle mcp list` shows them)"
                ));
            }
        }
    }
    let text = serde_json::to_string_pretty(&value).map_err(|err| err.to_string())?;
    let temporary = root.join(format!(".mcp.json.{}.tmp", crate::util::random_hex()));
    let written = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&temporary)
        .and_then(|mut file| std::io::Write::write_all(&mut file, format!("{text}\n").as_bytes()))
        .and_then(|()| std::fs::rename(&temporary, &path));
    if let Err(error) = written {
        let _ = std::fs::remove_file(&temporary);
        return Err(format!("cannot write {shown}: {error}"));
    }
    Ok(path)
}

/// `.mcp.json`: `{"mcpServers": {"NAME": {"command", "args", "env"} or
/// {"type": "http"|"sse", "url", "headers"}}}`, with `${VAR}` and
/// `${VAR:-default}` taken from the environment, except the variables
/// commands never get (provider keys): a server naming one, or an unset
/// variable without a default, is left out with a problem saying so.
fn mcp_json_servers(
    cwd: &Path,
    path: &Path,
    withheld: &[std::ffi::OsString],
    problems: &mut Vec<String>,
) -> Result<Vec<Value>, String> {
    let Some(bytes) = read_project_config(cwd, path)? else {
        return Ok(Vec::new());
    };
    let value: Value =
        serde_json::from_slice(&bytes).map_err(|err| format!("{}: {err}", path.display()))?;
    let Some(listed) = value.get("mcpServers") else {
        return Ok(Vec::new());
    };
    let Some(listed) = listed.as_object() else {
        return Err(format!("{}: mcpServers must be an object", path.display()));
    };
    let mut servers = Vec::new();
    for (name, server) in listed {
        let here = format!(
            "{}: mcpServers.{}",
            path.display(),
            crate::util::visible(name, false)
        );
        let Some(fields) = server.as_object() else {
            problems.push(format!("{here}: must be an object"));
            continue;
        };
        let mut server = Value::Object(fields.clone());
        server["name"] = Value::from(name.as_str());
        if server["type"] == "stdio" {
            server.as_object_mut().map(|o| o.remove("type"));
        }
        match expand_all(&mut server, withheld) {
            Ok(()) => servers.push(server),
            Err(problem) => problems.push(format!("{here}: {problem}; not started")),
        }
    }
    check_mcp_servers(&servers, &format!("{}: mcpServers", path.display()))?;
    Ok(servers)
}

/// Expands `${…}` in every string of a server's command, arguments,
/// environment, URL and headers.
fn expand_all(server: &mut Value, withheld: &[std::ffi::OsString]) -> Result<(), String> {
    for key in ["command", "args", "env", "url", "headers"] {
        let Some(field) = server.get_mut(key) else {
            continue;
        };
        let strings: Vec<&mut Value> = match field {
            Value::Array(items) => items.iter_mut().collect(),
            Value::Object(items) => items.values_mut().collect(),
            other => vec![other],
        };
        for value in strings {
            if let Value::String(text) = value {
                *text = expand(text, withheld)?;
            }
        }
    }
    Ok(())
}

/// `${NAME}` and `${NAME:-default}` in `text`, from the environment.
fn expand(text: &str, withheld: &[std::ffi::OsString]) -> Result<String, String> {
    let mut out = String::new();
    let mut rest = text;
    while let Some(start) = rest.find("${") {
        out.push_str(&rest[..start]);
        let Some(end) = rest[start..].find('}') else {
            return Err(format!("an unclosed ${{ in {text:?}"));
        };
        let inner = &rest[start + 2..start + end];
        let (name, default) = match inner.split_once(":-") {
            Some((name, default)) => (name, Some(default)),
            None => (inner, None),
        };
        if withheld.iter().any(|w| w == name) {
            return Err(format!(
                "${{{name}}} is a provider key, which MCP servers never get"
            ));
        }
        match (std::env::var(name).ok().filter(|v| !v.is_empty()), default) {
            (Some(value), _) => out.push_str(&value),
            (None, Some(default)) => out.push_str(default),
            (None, None) => return Err(format!("${{{name}}} is not set")),
        }
        rest = &rest[start + end + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::root_below;
    use std::fs;

    fn scratch(name: &str) -> std::path::PathBuf {
        let dir =
            std::env::temp_dir().join(format!("spindle-root-{name}-{}", crate::util::random_hex()));
        fs::create_dir_all(&dir).unwrap();
        crate::os::canonical(&dir).unwrap()
    }

    #[test]
    fn the_root_is_the_nearest_folder_with_git_else_the_folder() {
        let base = scratch("climb");
        let repo = base.join("repo");
        let deep = repo.join("a").join("b");
        fs::create_dir_all(&deep).unwrap();
        assert_eq!(root_below(&deep, None), deep, "no .git: the folder");
        // A `.git` file (a worktree's) marks the root as a folder does.
        fs::write(repo.join(".git"), "gitdir: /elsewhere\n").unwrap();
        assert_eq!(root_below(&deep, None), repo);
        assert_eq!(root_below(&repo, None), repo);
        fs::remove_dir_all(&base).unwrap();
    }

    #[test]
    fn the_climb_never_reaches_the_home_from_inside_it() {
        let base = scratch("home");
        let home = base.join("home");
        let project = home.join("work").join("project");
        fs::create_dir_all(&project).unwrap();
        fs::create_dir_all(home.join(".git")).unwrap();
        fs::create_dir_all(base.join(".git")).unwrap();
        assert_eq!(root_below(&project, Some(&home)), project);
        // The home itself, started in, is its own folder.
        assert_eq!(root_below(&home, Some(&home)), home);
        // A repository inside the home is found as usual.
        fs::create_dir_all(home.join("work").join(".git")).unwrap();
        assert_eq!(root_below(&project, Some(&home)), home.join("work"));
        // Outside the home, the climb is not fenced.
        let elsewhere = base.join("srv").join("x");
        fs::create_dir_all(&elsewhere).unwrap();
        assert_eq!(root_below(&elsewhere, Some(&home)), base);
        fs::remove_dir_all(&base).unwrap();
    }

    #[cfg(unix)]
    #[test]
    fn a_link_to_the_home_is_no_way_round() {
        let base = scratch("link");
        let home = base.join("home");
        fs::create_dir_all(home.join(".git")).unwrap();
        fs::create_dir_all(home.join("project")).unwrap();
        crate::os::testing::symlink(&home, base.join("alias")).unwrap();
        let through = base.join("alias").join("project");
        assert_eq!(root_below(&through, Some(&home)), through);
        fs::remove_dir_all(&base).unwrap();
    }
}

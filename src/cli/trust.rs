//! `spindle trust [PATH]` / `spindle untrust [PATH]`: whether a project's
//! own settings count, saved in the user's config, and what that turns
//! on or off: the hooks, MCP servers, skills, commands, allow rules and
//! defaults the project brings.

use std::path::{Path, PathBuf};

/// Trusts (or stops trusting) the project `path` (the current folder
/// when none) lies in: its root, said when it is not the folder given.
/// `loaded` is the config as the command loaded it (from `config` or the
/// default file).
pub(super) fn trust(
    trusted: bool,
    path: Option<PathBuf>,
    config: Option<PathBuf>,
    loaded: &crate::config::loaded::Loaded,
) -> Result<String, String> {
    let path = match path {
        Some(path) => path,
        None => {
            std::env::current_dir().map_err(|e| format!("cannot tell the current folder: {e}"))?
        }
    };
    let asked = crate::os::canonical(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    if !asked.is_dir() {
        return Err(format!("{} is not a folder", asked.display()));
    }
    // The project is the repository the folder lies in: its root is
    // trusted, whichever of its folders the command ran in.
    let project = crate::config::project::root(&asked);
    let config_path = config.unwrap_or_else(crate::config::default_path);
    let key = project.display().to_string();
    crate::config::project::set_trusted(&config_path, &key, trusted)?;
    // The folder's name is the repository's (or whoever named it): shown
    // written out, never obeyed.
    let shown = crate::util::visible(&key, false);
    let saved = crate::util::visible(&config_path.display().to_string(), false);
    let mut out = match trusted {
        true => format!("Trusted {shown}"),
        false => format!("No longer trusted: {shown}"),
    };
    if project != asked {
        out.push_str(&format!(
            " (the project root of {}: the nearest folder above it holding .git)",
            crate::util::visible(&asked.display().to_string(), false)
        ));
    }
    out.push_str(&match trusted {
        true => format!(
            ": its .spindle/config.json (permission rules, MCP servers, defaults) and its other project settings now count. Saved in {saved}.\nTrust goes with the path: moving or renaming the folder loses it, and whatever is checked out at this path later is trusted too.\n"
        ),
        false => format!(
            "; its .spindle/config.json can only tighten what you allow. Saved in {saved}.\n"
        ),
    });
    let brings = brings(&project, loaded);
    if brings.is_empty() {
        out.push_str("The project brings no hooks, MCP servers, skills, commands, allow rules or defaults.\n");
    } else {
        out.push_str(match trusted {
            true => "Now turned on:\n",
            false => "Now turned off:\n",
        });
        for line in brings {
            out.push_str(&format!("- {line}\n"));
        }
    }
    Ok(out)
}

/// What the project at `root` brings that trust turns on, a line per
/// kind, its names written out; what could not be read is said too.
fn brings(root: &Path, loaded: &crate::config::loaded::Loaded) -> Vec<String> {
    let shown = |text: &str| crate::util::visible(text, false);
    let names = |list: Vec<String>| {
        list.iter()
            .map(|name| shown(name))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let mut lines = Vec::new();

    let hooks = crate::agent::hooks::Hooks::load(None, root, true);
    if !hooks.list.is_empty() {
        let mut events: Vec<(&str, usize)> = Vec::new();
        let mut origins: Vec<&str> = Vec::new();
        for hook in &hooks.list {
            match events
                .iter_mut()
                .find(|(name, _)| *name == hook.event.name())
            {
                Some((_, count)) => *count += 1,
                None => events.push((hook.event.name(), 1)),
            }
            let origin = hook.origin.trim_start_matches("the project's ");
            if !origins.contains(&origin) {
                origins.push(origin);
            }
        }
        let events: Vec<String> = events
            .iter()
            .map(|(name, count)| format!("{name} {count}"))
            .collect();
        lines.push(format!(
            "{} hook{} ({}) from {}",
            hooks.list.len(),
            plural(hooks.list.len()),
            events.join(", "),
            origins.join(", ")
        ));
    }
    for problem in &hooks.problems {
        lines.push(format!("not read: {}", shown(problem)));
    }

    // The servers as Spindle reads them; the config only says which
    // variables are withheld from them.
    let unusable = crate::config::Config::default();
    let config = loaded.get().map_or_else(
        |error| {
            log::warn!("trust: the servers are listed without your config: {error}");
            &unusable
        },
        |(config, _)| config,
    );
    let (servers, problems) = crate::config::project::project_servers(config, root);
    if !servers.is_empty() {
        let listed: Vec<String> = servers
            .iter()
            .map(|(server, source)| {
                // A project file by its name in the project, written the
                // same on every system (as the other lines name them).
                let file = match source.strip_prefix(root) {
                    Ok(inside) => inside
                        .components()
                        .map(|part| part.as_os_str().to_string_lossy())
                        .collect::<Vec<_>>()
                        .join("/"),
                    Err(_) => source.display().to_string(),
                };
                format!(
                    "{} (from {})",
                    shown(server["name"].as_str().unwrap_or("?")),
                    shown(&file)
                )
            })
            .collect();
        lines.push(format!(
            "{} MCP server{}: {}",
            servers.len(),
            plural(servers.len()),
            listed.join(", ")
        ));
    }
    for problem in problems {
        lines.push(format!("not read: {}", shown(&problem)));
    }

    let found = crate::agent::skills::discover(root, true);
    let skills: Vec<String> = found
        .skills
        .iter()
        .filter(|skill| skill.within.is_some())
        .map(|skill| skill.name.clone())
        .collect();
    if !skills.is_empty() {
        lines.push(format!(
            "{} skill{}: {}",
            skills.len(),
            plural(skills.len()),
            names(skills)
        ));
    }

    let catalog = crate::agent::commands::catalog(root, None, Default::default());
    let folders = [
        root.join(".spindle").join("commands"),
        root.join(".claude").join("commands"),
    ];
    let commands: Vec<String> = catalog
        .commands
        .iter()
        .filter(|command| match &command.kind {
            crate::agent::commands::Kind::Custom { source, .. } => {
                folders.iter().any(|folder| source.starts_with(folder))
            }
            _ => false,
        })
        .map(|command| format!("/{}", command.name))
        .collect();
    if !commands.is_empty() {
        lines.push(format!(
            "{} command{}: {}",
            commands.len(),
            plural(commands.len()),
            names(commands)
        ));
    }

    match crate::config::project::project_rules(root) {
        Ok(rules) => {
            let allow: Vec<String> = rules
                .iter()
                .filter(|rule| rule.decision == crate::policy::rules::Decision::Allow)
                .map(crate::policy::rules::describe)
                .collect();
            if !allow.is_empty() {
                lines.push(format!(
                    "{} allow rule{} of .spindle/config.json: {}",
                    allow.len(),
                    plural(allow.len()),
                    names(allow)
                ));
            }
        }
        Err(problem) => lines.push(format!("not read: {}", shown(&problem))),
    }
    // Claude Code's allow rules, as far as Spindle takes them.
    let claude = crate::config::claude_permissions::ClaudeRules::load(root);
    let allow: Vec<String> = claude
        .rules()
        .iter()
        .filter(|rule| rule.decision == crate::policy::rules::Decision::Allow)
        .map(crate::config::claude_permissions::describe)
        .collect();
    if !allow.is_empty() {
        lines.push(format!(
            "{} allow rule{} of .claude/settings*.json: {}",
            allow.len(),
            plural(allow.len()),
            names(allow)
        ));
    }

    match crate::config::project::project_defaults(root) {
        Ok(Some(defaults)) => {
            let approval = defaults
                .approval
                .and_then(|policy| serde_json::to_value(policy).ok())
                .and_then(|value| value.as_str().map(str::to_string));
            let set: Vec<String> = [
                ("model", defaults.model),
                ("effort", defaults.effort),
                ("preset", defaults.preset),
                ("approval", approval),
            ]
            .into_iter()
            .filter_map(|(key, value)| value.map(|value| format!("{key} {}", shown(&value))))
            .collect();
            if !set.is_empty() {
                lines.push(format!(
                    "defaults of .spindle/config.json: {}",
                    set.join(", ")
                ));
            }
        }
        Ok(None) => {}
        Err(problem) => lines.push(format!("not read: {}", shown(&problem))),
    }

    let agents = claude_agents(root);
    if !agents.is_empty() {
        lines.push(format!(
            "{} agent{} in .claude/agents ({}): Spindle does not run Claude Code's agents, trusted or not",
            agents.len(),
            plural(agents.len()),
            names(agents)
        ));
    }
    lines
}

/// The most entries of `.claude/agents` named.
const AGENTS_MAX: usize = 100;

/// The names of the Markdown files in the project's `.claude/agents`
/// (a folder, not a link), sorted.
fn claude_agents(root: &Path) -> Vec<String> {
    let dir = root.join(".claude").join("agents");
    let is_dir = std::fs::symlink_metadata(&dir).is_ok_and(|meta| meta.is_dir());
    let Some(entries) = is_dir.then(|| std::fs::read_dir(&dir).ok()).flatten() else {
        return Vec::new();
    };
    let mut names: Vec<String> = entries
        .filter_map(|entry| entry.ok())
        .take(AGENTS_MAX)
        .filter_map(|entry| {
            let name = entry.file_name().to_string_lossy().into_owned();
            name.strip_suffix(".md").map(str::to_string)
        })
        .collect();
    names.sort();
    names
}

fn plural(count: usize) -> &'static str {
    if count == 1 {
        ""
    } else {
        "s"
    }
}

//! Slash commands: the built-in ones and custom ones from markdown files
//! (`.spindle/commands/*.md` and `.claude/commands/*.md` in the workspace,
//! `commands/*.md` in the user's config directory and
//! `~/.claude/commands/*.md`), advertised with `available_commands_update`.

use crate::acp::SessionUpdate;
use crate::tools::shipped::Skipped;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Builtin {
    Init,
    Compact,
    Model,
    Mode,
    Clear,
    Cost,
    Help,
    Undo,
    Rewind,
    Redo,
    Reload,
    Allow,
    Memory,
    Skills,
    Hooks,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Kind {
    Builtin(Builtin),
    /// A markdown file: its body is the prompt, `$ARGUMENTS` replaced.
    Custom {
        body: String,
        source: PathBuf,
    },
    /// An Agent Skill: its instructions, with the arguments, are the
    /// prompt.
    Skill(super::skills::Skill),
}

#[derive(Debug, Clone, PartialEq)]
pub struct Command {
    pub name: String,
    pub description: String,
    pub hint: Option<String>,
    pub kind: Kind,
}

const BUILTINS: [(&str, &str, Option<&str>, Builtin); 15] = [
    (
        "init",
        "Write or update AGENTS.md: instructions for coding agents in this workspace",
        None,
        Builtin::Init,
    ),
    (
        "compact",
        "Summarise the conversation so far into a shorter context (the transcript stays)",
        Some("focus"),
        Builtin::Compact,
    ),
    (
        "model",
        "Switch the model",
        Some("provider/model"),
        Builtin::Model,
    ),
    (
        "mode",
        "Switch the mode: normal, plan or goal",
        Some("normal | plan | goal"),
        Builtin::Mode,
    ),
    (
        "clear",
        "Start a fresh conversation context in this session",
        None,
        Builtin::Clear,
    ),
    (
        "cost",
        "Show the tokens used and the cost so far",
        None,
        Builtin::Cost,
    ),
    (
        "undo",
        "Restore the files the last turn changed (asks when you edited them since)",
        None,
        Builtin::Undo,
    ),
    (
        "rewind",
        "Restore the files as they were N turns ago",
        Some("N"),
        Builtin::Rewind,
    ),
    (
        "redo",
        "Apply again the changes the last undo took back",
        None,
        Builtin::Redo,
    ),
    (
        "reload",
        "Read the configuration, commands and AGENTS.md again",
        None,
        Builtin::Reload,
    ),
    (
        "allow",
        "Allow every edit, or commands starting with some words, for this session (--project saves it)",
        Some("edits | command WORDS [--project]"),
        Builtin::Allow,
    ),
    (
        "memory",
        "Show the instruction files in force (yours, the project's, their imports) and where each came from",
        None,
        Builtin::Memory,
    ),
    (
        "skills",
        "List the skills in force, where each came from, and the ones left out",
        None,
        Builtin::Skills,
    ),
    (
        "hooks",
        "List the hooks in force (yours and a trusted project's) and where each came from",
        None,
        Builtin::Hooks,
    ),
    ("help", "List the commands", None, Builtin::Help),
];

/// The prompt behind `/init`.
pub const INIT_PROMPT: &str = "Look at this workspace (its layout, build files, tests, conventions, README) and write AGENTS.md at its root: concise instructions for coding agents working here — how to build, test and lint, the code layout, conventions to follow, and pitfalls. If AGENTS.md exists, read it first and update it, keeping what is still true. Keep it short and specific to this project.";

/// Where the user's own commands live.
pub fn user_dir() -> PathBuf {
    crate::config::default_path()
        .parent()
        .map(|dir| dir.join("commands"))
        .unwrap_or_else(|| PathBuf::from("commands"))
}

/// The largest custom command file read.
pub const COMMAND_FILE_CAP: u64 = 256 * 1024;
/// The most command files read from one folder.
pub const COMMAND_FILES_MAX: usize = 500;

/// Every command available in a workspace: the built-ins, then custom
/// commands (the workspace's win over the agent file's, which win over the
/// user's of the same name; none replaces a built-in), then one for each
/// of `skills` whose name no command took. `agent_dir` is the
/// agent file's `commands/` folder, when `spindle acp PATH` serves an
/// agent folder that has one (`Options::commands_dir`).
pub fn available(
    cwd: &Path,
    agent_dir: Option<&Path>,
    skills: &[super::skills::Skill],
) -> Vec<Command> {
    let mut commands = available_and_skipped(cwd, agent_dir).0;
    for skill in skills {
        if !commands.iter().any(|c| c.name == skill.name) {
            commands.push(Command {
                name: skill.name.clone(),
                description: skill.description.chars().take(200).collect(),
                hint: None,
                kind: Kind::Skill(skill.clone()),
            });
        }
    }
    commands
}

/// [`available`], and the command files left out: the workspace's and the
/// agent folder's are read only as [`crate::tools::shipped`] allows (no
/// link out of their folder, regular files within a cap); the user's own
/// may link anywhere but must be regular files within the cap too.
pub fn available_and_skipped(cwd: &Path, agent_dir: Option<&Path>) -> (Vec<Command>, Vec<Skipped>) {
    let mut commands: Vec<Command> = BUILTINS
        .iter()
        .map(|(name, description, hint, builtin)| Command {
            name: name.to_string(),
            description: description.to_string(),
            hint: hint.map(str::to_string),
            kind: Kind::Builtin(*builtin),
        })
        .collect();
    let mut skipped = Vec::new();
    // The folder, and the folder it must lie in (none for the user's own).
    // Claude Code's command folders too, the project's and the user's.
    let claude = |root: &Path| root.join(".claude").join("commands");
    let dirs = [
        Some((
            cwd.join(".spindle").join("commands"),
            Some(cwd.to_path_buf()),
        )),
        Some((claude(cwd), Some(cwd.to_path_buf()))),
        agent_dir.map(|dir| (dir.to_path_buf(), Some(dir.to_path_buf()))),
        Some((user_dir(), None)),
        crate::os::folders::home().map(|home| (claude(&home), None)),
    ];
    for (dir, within) in dirs.iter().flatten() {
        let Ok(entries) = std::fs::read_dir(dir) else {
            continue;
        };
        let mut files: Vec<PathBuf> = entries
            .filter_map(|entry| entry.ok().map(|e| e.path()))
            .filter(|path| path.extension().is_some_and(|e| e == "md"))
            .take(COMMAND_FILES_MAX * 4)
            .collect();
        files.sort();
        files.truncate(COMMAND_FILES_MAX);
        for path in files {
            let Some(name) = path
                .file_stem()
                .and_then(|s| s.to_str())
                .map(str::to_string)
            else {
                continue;
            };
            if !valid_name(&name) || commands.iter().any(|c| c.name == name) {
                continue;
            }
            let read = match within {
                Some(within) => crate::tools::shipped::read(&path, within, COMMAND_FILE_CAP),
                None => super::skills::own_file(&path, COMMAND_FILE_CAP),
            };
            let bytes = match read {
                Ok(Some(bytes)) => bytes,
                Ok(None) => continue,
                Err(why) => {
                    skipped.push(Skipped::new(path, why));
                    continue;
                }
            };
            let text = String::from_utf8_lossy(&bytes);
            commands.push(parse_custom(&name, &text, path));
        }
    }
    (commands, skipped)
}

fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == ':')
}

/// Reads a custom command: optional front matter (`description:`,
/// `argument-hint:`), else the first line is the description.
pub fn parse_custom(name: &str, text: &str, source: PathBuf) -> Command {
    let mut description = None;
    let mut hint = None;
    let mut body = text;
    if let Some((fields, rest)) = super::skills::front_matter(text) {
        for (key, value) in fields {
            match key.as_str() {
                "description" => description = Some(value),
                "argument-hint" | "argument_hint" | "hint" => hint = Some(value),
                _ => {}
            }
        }
        body = rest;
    }
    let description = description.unwrap_or_else(|| {
        body.lines()
            .map(|line| line.trim().trim_start_matches('#').trim())
            .find(|line| !line.is_empty())
            .unwrap_or(name)
            .chars()
            .take(100)
            .collect()
    });
    Command {
        name: name.to_string(),
        description,
        hint,
        kind: Kind::Custom {
            body: body.to_string(),
            source,
        },
    }
}

/// The `available_commands_update` payload.
pub fn update(commands: &[Command]) -> SessionUpdate {
    let list: Vec<Value> = commands
        .iter()
        .map(|command| {
            let mut value = json!({"name": command.name, "description": command.description});
            if let Some(hint) = &command.hint {
                value["input"] = json!({"hint": hint});
            }
            value
        })
        .collect();
    SessionUpdate::AvailableCommandsUpdate {
        available_commands: list,
    }
}

/// `/name rest…` → (name, rest), for a prompt whose text starts with a
/// slash.
pub fn invocation(text: &str) -> Option<(&str, &str)> {
    let rest = text.trim_start().strip_prefix('/')?;
    let end = rest.find(char::is_whitespace).unwrap_or(rest.len());
    let name = &rest[..end];
    if !valid_name(name) {
        return None;
    }
    Some((name, rest[end..].trim()))
}

/// The prompt of `/skill-name arguments`: the skill's instructions and
/// what the user asked.
pub fn skill_prompt(skill: &super::skills::Skill, arguments: &str) -> Result<String, String> {
    let loaded = skill.load()?;
    Ok(if arguments.is_empty() {
        format!("Use this skill now.\n\n{loaded}")
    } else {
        format!("Use this skill for the request below.\n\n{loaded}\n\nRequest: {arguments}")
    })
}

/// A custom command's prompt with its arguments.
pub fn expand(body: &str, arguments: &str) -> String {
    if body.contains("$ARGUMENTS") {
        body.replace("$ARGUMENTS", arguments)
    } else if arguments.is_empty() {
        body.to_string()
    } else {
        format!("{body}\n\n{arguments}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn invocations() {
        assert_eq!(invocation("/model openai/x"), Some(("model", "openai/x")));
        assert_eq!(invocation("  /help"), Some(("help", "")));
        assert_eq!(invocation("/ not"), None);
        assert_eq!(invocation("no slash"), None);
        assert_eq!(invocation("/path/to/file please"), None);
    }

    #[test]
    fn custom_commands_from_front_matter_or_first_line() {
        let command = parse_custom(
            "review",
            "---\ndescription: Review a file\nargument-hint: path\n---\nReview $ARGUMENTS carefully.\n",
            PathBuf::from("r.md"),
        );
        assert_eq!(command.description, "Review a file");
        assert_eq!(command.hint.as_deref(), Some("path"));
        let Kind::Custom { body, .. } = &command.kind else {
            panic!()
        };
        assert_eq!(expand(body, "src/a.rs"), "Review src/a.rs carefully.\n");
        let plain = parse_custom(
            "fix",
            "# Fix the build\nRun cargo build and fix errors.",
            PathBuf::from("f.md"),
        );
        assert_eq!(plain.description, "Fix the build");
        assert_eq!(plain.hint, None);
    }

    #[test]
    fn workspace_commands_are_listed_after_the_builtins() {
        let dir =
            std::env::temp_dir().join(format!("spindle-commands-{}", crate::util::random_hex()));
        std::fs::create_dir_all(dir.join(".spindle/commands")).unwrap();
        std::fs::write(dir.join(".spindle/commands/deploy.md"), "Deploy it").unwrap();
        std::fs::write(dir.join(".spindle/commands/help.md"), "not the real help").unwrap();
        let commands = available(&dir, None, &[]);
        assert_eq!(commands[0].name, "init");
        let deploy = commands.iter().find(|c| c.name == "deploy").unwrap();
        assert_eq!(deploy.description, "Deploy it");
        assert_eq!(commands.iter().filter(|c| c.name == "help").count(), 1);
        let update = update(&commands).into_value();
        assert_eq!(
            update["availableCommands"][2]["input"]["hint"],
            "provider/model"
        );
    }
}

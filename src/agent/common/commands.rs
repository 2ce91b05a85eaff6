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

/// The names of a workspace: every command (its skills among them), the
/// skills in force (with those left out or shadowed), and the command
/// files refused.
#[derive(Debug, Clone, Default)]
pub struct Catalog {
    pub commands: Vec<Command>,
    pub skills: super::skills::Found,
    pub skipped: Vec<Skipped>,
}

/// The command files of the workspace refused ([`catalog`]'s skipped),
/// with no skill known.
pub fn skipped(cwd: &Path, agent_dir: Option<&Path>) -> Vec<Skipped> {
    catalog(cwd, agent_dir, super::skills::Found::default()).skipped
}

/// A folder of command files: where, the folder they must lie in (none
/// for the user's own), and its words ("your ~/.claude/commands").
struct Folder {
    dir: PathBuf,
    within: Option<PathBuf>,
    origin: String,
}

/// Every name of the workspace at `cwd`, the user's first: the
/// built-ins, the agent file's commands (the user chose the file; its
/// `commands/` is `agent_dir`) and the user's own commands, then the
/// user's skills of `found`; only then the project's commands
/// (`.spindle/commands/`, then `.claude/commands/`) and skills. A name
/// taken on the user's side (a built-in, a command or skill of theirs,
/// in any case of letters) is never the project's: its command or skill
/// is left out and listed as shadowed in `found`, naming both, so the
/// editor never shows the project's words under the user's name and
/// `/name` always sends the user's. On one side the first of a name wins,
/// a command before a skill (a skill whose name a command took stays a
/// skill for the model).
pub fn catalog(cwd: &Path, agent_dir: Option<&Path>, found: super::skills::Found) -> Catalog {
    let own_folders = [
        agent_dir.map(|dir| Folder {
            dir: dir.to_path_buf(),
            within: Some(dir.to_path_buf()),
            origin: "the agent file's commands".into(),
        }),
        Some(Folder {
            dir: user_dir(),
            within: None,
            origin: "your Spindle commands".into(),
        }),
        crate::os::folders::home().map(|home| Folder {
            dir: home.join(".claude").join("commands"),
            within: None,
            origin: "your ~/.claude/commands".into(),
        }),
    ];
    catalog_with(cwd, own_folders.into_iter().flatten().collect(), found)
}

/// [`catalog`] with the user's side's folders of commands given.
fn catalog_with(cwd: &Path, own_folders: Vec<Folder>, found: super::skills::Found) -> Catalog {
    let mut found = found;
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
    for folder in &own_folders {
        read_folder(folder, &mut commands, &mut skipped, |_| None);
    }
    // The user's skills are commands where no command took the name, and
    // their names the user's all the same.
    let own_skills: Vec<super::skills::Skill> = found
        .skills
        .iter()
        .filter(|skill| skill.within.is_none())
        .cloned()
        .collect();
    for skill in &own_skills {
        if !commands.iter().any(|c| c.name == skill.name) {
            commands.push(skill_command(skill));
        }
    }
    // Who holds a name on the user's side, in words.
    let owners: Vec<(String, String)> = commands
        .iter()
        .map(|command| (command.name.clone(), owner(command)))
        .chain(own_skills.iter().map(|skill| {
            let dir = crate::util::visible(&skill.dir.display().to_string(), false);
            (
                skill.name.clone(),
                format!("your skill from {} ({dir})", skill.origin),
            )
        }))
        .collect();
    let taken = |name: &str| {
        owners
            .iter()
            .find(|(own, _)| own.eq_ignore_ascii_case(name))
            .map(|(_, words)| words.clone())
    };
    let root = crate::config::project::root(cwd);
    let project_folders = [
        Folder {
            dir: root.join(".spindle").join("commands"),
            within: Some(root.clone()),
            origin: "the project's .spindle/commands".into(),
        },
        Folder {
            dir: root.join(".claude").join("commands"),
            within: Some(root.clone()),
            origin: "the project's .claude/commands".into(),
        },
    ];
    let mut shadowed = Vec::new();
    for folder in &project_folders {
        shadowed.extend(read_folder(folder, &mut commands, &mut skipped, |name| {
            taken(name).map(|by| (by, folder.origin.clone()))
        }));
    }
    // The project's skills (a trusted project's): none under a name of
    // the user's side.
    let (kept, lost): (Vec<_>, Vec<_>) = std::mem::take(&mut found.skills)
        .into_iter()
        .partition(|skill| skill.within.is_none() || taken(&skill.name).is_none());
    for skill in lost {
        let by = taken(&skill.name).unwrap_or_default();
        shadowed.push(super::skills::Left {
            why: format!(
                "/{} from {} is shadowed by {by}, which is used",
                skill.name, skill.origin
            ),
            path: skill.dir,
        });
    }
    found.skills = kept;
    for skill in found.skills.iter().filter(|skill| skill.within.is_some()) {
        if !commands.iter().any(|c| c.name == skill.name) {
            commands.push(skill_command(skill));
        }
    }
    found.shadowed.extend(shadowed);
    Catalog {
        commands,
        skills: found,
        skipped,
    }
}

/// A skill as a slash command.
fn skill_command(skill: &super::skills::Skill) -> Command {
    Command {
        name: skill.name.clone(),
        description: skill.description.chars().take(200).collect(),
        hint: None,
        kind: Kind::Skill(skill.clone()),
    }
}

/// Who a command of the user's side is, in words.
fn owner(command: &Command) -> String {
    match &command.kind {
        Kind::Builtin(_) => format!("Spindle's built-in /{}", command.name),
        Kind::Custom { source, .. } => format!(
            "your command {}",
            crate::util::visible(&source.display().to_string(), false)
        ),
        Kind::Skill(skill) => format!(
            "your skill from {} ({})",
            skill.origin,
            crate::util::visible(&skill.dir.display().to_string(), false)
        ),
    }
}

/// Reads one folder of command files into `commands` (the first of a
/// name wins; a file refused goes to `skipped`). A name `shadow` gives
/// (who holds it, the folder's words) for is not read but returned as
/// shadowed.
fn read_folder(
    folder: &Folder,
    commands: &mut Vec<Command>,
    skipped: &mut Vec<Skipped>,
    shadow: impl Fn(&str) -> Option<(String, String)>,
) -> Vec<super::skills::Left> {
    let mut shadowed = Vec::new();
    let Ok(entries) = std::fs::read_dir(&folder.dir) else {
        return shadowed;
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
        if !valid_name(&name) {
            continue;
        }
        if let Some((by, origin)) = shadow(&name) {
            shadowed.push(super::skills::Left {
                why: format!("/{name} from {origin} is shadowed by {by}, which is used"),
                path,
            });
            continue;
        }
        if commands.iter().any(|c| c.name == name) {
            continue;
        }
        let read = match &folder.within {
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
    shadowed
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
        let commands = catalog_with(&dir, vec![], Default::default()).commands;
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

    fn skill(name: &str, dir: PathBuf, within: Option<PathBuf>) -> super::super::skills::Skill {
        super::super::skills::Skill {
            name: name.into(),
            description: format!("the {name} skill of {}", dir.display()),
            origin: if within.is_some() {
                "the project's .claude/skills".into()
            } else {
                "your ~/.claude/skills".into()
            },
            dir,
            within,
        }
    }

    /// Every pairing: a project's command or skill under a name of the
    /// user's command or skill, or of a built-in (in any case), is left
    /// out and listed as shadowed, naming both.
    #[test]
    fn the_users_names_and_the_builtins_come_before_the_projects() {
        let root =
            std::env::temp_dir().join(format!("spindle-commands-{}", crate::util::random_hex()));
        let ws = root.join("ws");
        let mine = root.join("mine");
        for (name, text) in [
            (".claude/commands/deploy.md", "PROJECT deploy"),
            (".spindle/commands/standup.md", "PROJECT standup"),
            (".claude/commands/STANDUP.md", "PROJECT shouting standup"),
            (".claude/commands/compact.md", "PROJECT compact"),
            (".spindle/commands/Model.md", "PROJECT model"),
            (".spindle/commands/own.md", "Only the project's"),
        ] {
            let path = ws.join(name);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, text).unwrap();
        }
        std::fs::create_dir_all(&mine).unwrap();
        std::fs::write(mine.join("standup.md"), "USER standup").unwrap();
        std::fs::write(mine.join("lint.md"), "USER lint").unwrap();
        let found = super::super::skills::Found {
            skills: vec![
                skill("deploy", root.join("skills/deploy"), None),
                skill("lint", ws.join(".claude/skills/lint"), Some(ws.clone())),
                skill("undo", ws.join(".claude/skills/undo"), Some(ws.clone())),
                skill("fresh", ws.join(".claude/skills/fresh"), Some(ws.clone())),
            ],
            ..Default::default()
        };
        let own = vec![Folder {
            dir: mine.clone(),
            within: None,
            origin: "your Spindle commands".into(),
        }];
        let catalog = catalog_with(&ws, own, found);
        let named = |name: &str| {
            let all: Vec<&Command> = catalog
                .commands
                .iter()
                .filter(|c| c.name.eq_ignore_ascii_case(name))
                .collect();
            assert_eq!(all.len(), 1, "{name}: {all:?}");
            all[0].clone()
        };
        // User skill vs project command.
        match named("deploy").kind {
            Kind::Skill(skill) => assert!(skill.within.is_none(), "{skill:?}"),
            other => panic!("{other:?}"),
        }
        // User command vs project command, whatever the case.
        match named("standup").kind {
            Kind::Custom { body, source } => {
                assert_eq!(
                    (body.as_str(), source),
                    ("USER standup", mine.join("standup.md"))
                )
            }
            other => panic!("{other:?}"),
        }
        // Built-ins vs project commands and skills.
        assert_eq!(named("compact").kind, Kind::Builtin(Builtin::Compact));
        assert_eq!(named("model").kind, Kind::Builtin(Builtin::Model));
        assert_eq!(named("undo").kind, Kind::Builtin(Builtin::Undo));
        // User command vs project skill: the skill is gone, for the model too.
        assert!(matches!(named("lint").kind, Kind::Custom { .. }));
        let skills: Vec<&str> = catalog
            .skills
            .skills
            .iter()
            .map(|s| s.name.as_str())
            .collect();
        assert_eq!(skills, ["deploy", "fresh"]);
        // What no name of the user's holds is the project's.
        assert!(matches!(named("own").kind, Kind::Custom { .. }));
        assert!(matches!(named("fresh").kind, Kind::Skill(_)));
        let shadowed: Vec<String> = catalog
            .skills
            .shadowed
            .iter()
            .map(|l| l.describe())
            .collect();
        assert_eq!(shadowed.len(), 7, "{shadowed:#?}");
        let says = |file: &str, what: &str| {
            assert!(
                shadowed
                    .iter()
                    .any(|line| line.contains(file) && line.contains(what)),
                "{file} / {what}: {shadowed:#?}"
            )
        };
        says("deploy.md", "from the project's .claude/commands is shadowed by your skill from your ~/.claude/skills");
        says("standup.md", "is shadowed by your command");
        says("STANDUP.md", "is shadowed by your command");
        says("compact.md", "shadowed by Spindle's built-in /compact");
        says("Model.md", "shadowed by Spindle's built-in /model");
        says(
            "skills/lint",
            "/lint from the project's .claude/skills is shadowed by your command",
        );
        says("skills/undo", "shadowed by Spindle's built-in /undo");
        std::fs::remove_dir_all(&root).unwrap();
    }
}

//! The one list of workspace paths whose content Spindle runs or obeys.
//!
//! A repository's files are not all alike: some of them Spindle (or git)
//! *executes* — hooks, MCP servers, the project config, git's own hooks
//! and config — and some *instruct* the model — instruction files, skills,
//! commands. A write to the first kind plants a command that runs later,
//! outside any sandbox; a write to the second changes what every later
//! prompt tells the model. The file tools, `apply_patch`, moves, deletes,
//! `remember`, the sandbox and the command classifier all ask this module,
//! so the list is kept here alone (docs/security.md describes it).
//!
//! Names are matched as a case-insensitive file system and Windows see
//! them (`.CLAUDE/Settings.json`, `.mcp.json.` with a trailing dot); on a
//! file system where those differ this only makes a write ask. A name at
//! the workspace's top level that is a link is followed: writing where a
//! linked `.claude` points is writing `.claude`.

use std::path::{Component, Path};

/// How much a path of the workspace governs the agent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default)]
pub enum Protection {
    /// An ordinary file.
    #[default]
    None,
    /// What the model is told: instruction files, skills and commands. A
    /// write asks under `auto` and `sandbox`, saying so.
    Instructs,
    /// What Spindle or git runs or obeys: hooks, MCP servers, the project
    /// config, git's own files. A write asks under every policy but
    /// `yolo`, no rule allows it, and a sandboxed command cannot change it.
    Executes,
}

impl Protection {
    /// What a permission question adds to its title, `None` for an
    /// ordinary file.
    pub fn warning(self) -> Option<&'static str> {
        match self {
            Protection::None => None,
            Protection::Instructs => Some("this file changes what the agent is told"),
            Protection::Executes => Some("Spindle or git runs what this file says"),
        }
    }
}

/// The top-level names the list starts from, with the level of the name
/// itself and everything under it, unless [`below`] says otherwise.
const TOP: &[(&str, Protection)] = &[
    // The project config (hooks, rules, servers, defaults), its commands,
    // skills and attachments.
    (".spindle", Protection::Executes),
    // Claude Code's project MCP servers, started at every session.
    (".mcp.json", Protection::Executes),
    // Claude Code's settings (hooks) and the scripts hooks keep there;
    // its commands, skills and agents instruct (see `below`).
    (".claude", Protection::Executes),
    // Agent Skills of other agents' layouts.
    (".agents", Protection::Instructs),
    (".codex", Protection::Instructs),
];

/// Instruction files, in any folder of the workspace.
const INSTRUCTION_FILES: &[&str] = &["AGENTS.md", "CLAUDE.md", "GEMINI.md"];

/// The folders of `.claude` that instruct rather than execute.
const CLAUDE_INSTRUCTS: &[&str] = &["commands", "skills", "agents", "CLAUDE.md"];

/// Whether the path component `part` may name `name` on some file system:
/// letters in any case (macOS's and Windows' default file systems ignore
/// it) and trailing dots and spaces ignored (Windows drops them).
pub(crate) fn names(part: &std::ffi::OsStr, name: &str) -> bool {
    part.to_str()
        .is_some_and(|part| part.trim_end_matches(['.', ' ']).eq_ignore_ascii_case(name))
}

/// The level of `relative`, a path inside the workspace relative to its
/// root (lexically normal: no `..`).
pub(crate) fn of_relative(relative: &Path) -> Protection {
    let parts: Vec<&std::ffi::OsStr> = relative
        .components()
        .filter_map(|c| match c {
            Component::Normal(part) => Some(part),
            _ => None,
        })
        .collect();
    // git's own files, in any repository of the workspace.
    if parts.iter().any(|part| names(part, ".git")) {
        return Protection::Executes;
    }
    let mut level = Protection::None;
    if let Some(first) = parts.first() {
        if let Some((name, top)) = TOP.iter().find(|(name, _)| names(first, name)) {
            level = below(name, &parts[1..], *top);
        }
    }
    if let Some(last) = parts.last() {
        if INSTRUCTION_FILES.iter().any(|name| names(last, name)) {
            level = level.max(Protection::Instructs);
        }
    }
    level
}

/// The level of `rest` under the top-level entry `name` of level `top`.
fn below(name: &str, rest: &[&std::ffi::OsStr], top: Protection) -> Protection {
    match (name, rest.first()) {
        (".claude", Some(part)) if CLAUDE_INSTRUCTS.iter().any(|n| names(part, n)) => {
            Protection::Instructs
        }
        _ => top,
    }
}

/// The level of `real`, a real (canonical) path, in the workspace whose
/// canonical root is `real_root`. A top-level protected name that is a
/// link (`.claude -> config/claude`) protects where it points as well.
pub(crate) fn of_real(real_root: &Path, real: &Path) -> Protection {
    let Ok(relative) = real.strip_prefix(real_root) else {
        return Protection::None;
    };
    let mut level = of_relative(relative);
    if level == Protection::Executes {
        return level;
    }
    for (name, _) in TOP.iter().copied().chain(
        INSTRUCTION_FILES
            .iter()
            .map(|n| (*n, Protection::Instructs)),
    ) {
        let entry = real_root.join(name);
        let is_link = std::fs::symlink_metadata(&entry).is_ok_and(|m| m.file_type().is_symlink());
        if !is_link {
            continue;
        }
        let Ok(target) = crate::os::canonical(&entry) else {
            continue;
        };
        if let Ok(rest) = real.strip_prefix(&target) {
            level = level.max(of_relative(&Path::new(name).join(rest)));
        }
    }
    level
}

/// Whether a word of a command line may name a file whose content Spindle
/// runs (`.mcp.json`, `.claude/settings.json`, `.spindle/…`), from any
/// folder: a best-effort look for the classifier, which only makes a
/// command ask (git's own folder is left to the sandbox, which keeps it
/// read-only: git commands read it all the time).
pub(crate) fn names_executed(word: &str) -> bool {
    let path = Path::new(word);
    let parts: Vec<&std::ffi::OsStr> = path
        .components()
        .filter_map(|c| match c {
            Component::Normal(part) => Some(part),
            _ => None,
        })
        .collect();
    (0..parts.len()).any(|start| {
        let first = parts[start];
        TOP.iter()
            .any(|(name, level)| *level == Protection::Executes && names(first, name))
            && of_relative(&parts[start..].iter().collect::<std::path::PathBuf>())
                == Protection::Executes
    })
}

/// The first word of a command line that may name a file whose content
/// Spindle runs ([`names_executed`]), the line split at blanks, quotes,
/// redirections and operators.
pub(crate) fn line_names_executed(line: &str) -> Option<&str> {
    line.split(|c: char| {
        c.is_whitespace()
            || matches!(
                c,
                '<' | '>' | '|' | ';' | '&' | '(' | ')' | '"' | '\'' | '`' | '=' | '$' | '{' | '}'
            )
    })
    .find(|word| names_executed(word))
}

/// The top-level entries of the workspace at `root` whose content Spindle
/// executes, as they are named there when they exist (any spelling), and
/// the names that are missing: what a sandboxed command must not create.
pub(crate) fn executed_entries(root: &Path) -> (Vec<std::path::PathBuf>, Vec<&'static str>) {
    let mut present = Vec::new();
    let mut missing = Vec::new();
    let listed: Vec<std::ffi::OsString> = std::fs::read_dir(root)
        .map(|entries| entries.flatten().map(|e| e.file_name()).collect())
        .unwrap_or_else(|error| {
            log::warn!("cannot list {}: {error}", root.display());
            Vec::new()
        });
    for name in std::iter::once(".git").chain(
        TOP.iter()
            .filter(|(_, level)| *level == Protection::Executes)
            .map(|(name, _)| *name),
    ) {
        let found: Vec<_> = listed.iter().filter(|n| names(n, name)).collect();
        if found.is_empty() {
            missing.push(name);
        }
        present.extend(found.into_iter().map(|n| root.join(n)));
    }
    (present, missing)
}

/// Entries at the top of `root` that now name one of `missing`: created
/// by a sandboxed command where nothing was before.
pub(crate) fn created_since(root: &Path, missing: &[&str]) -> Vec<std::path::PathBuf> {
    let Ok(entries) = std::fs::read_dir(root) else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter(|entry| missing.iter().any(|name| names(&entry.file_name(), name)))
        .map(|entry| root.join(entry.file_name()))
        .collect()
}

/// The executed names missing at the top of each writable root before a
/// sandboxed command ran. The sandbox keeps what exists read-only, but a
/// name that does not exist cannot be mounted over; so what a command
/// creates there is moved aside when it ends, before anything reads it.
#[derive(Debug, Clone, Default)]
pub(crate) struct Watch {
    roots: Vec<(std::path::PathBuf, Vec<&'static str>)>,
}

impl Watch {
    /// What is missing now at the top of each of `roots`. git's own folder
    /// is left out: `git init` makes one, and Spindle runs nothing of a
    /// repository's configuration.
    pub(crate) fn before<'a>(roots: impl IntoIterator<Item = &'a Path>) -> Watch {
        let roots = roots
            .into_iter()
            .map(|root| {
                let (_, mut missing) = executed_entries(root);
                missing.retain(|name| *name != ".git");
                (root.to_path_buf(), missing)
            })
            .filter(|(_, missing)| !missing.is_empty())
            .collect();
        Watch { roots }
    }

    /// Moves each entry created since [`Watch::before`] aside (renamed in
    /// its folder, so nothing is lost) and says what was done, for the
    /// model and the user; `None` when nothing was created.
    pub(crate) fn sweep(&self) -> Option<String> {
        let mut moved = Vec::new();
        for (root, missing) in &self.roots {
            for path in created_since(root, missing) {
                let name = path
                    .file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_default();
                let aside = root.join(format!("{name}.blocked-{}", crate::util::random_hex()));
                let shown = crate::util::visible(&name, false);
                match std::fs::rename(&path, &aside) {
                    Ok(()) => moved.push(format!(
                        "{shown} (moved to {})",
                        crate::util::visible(
                            &aside.file_name().unwrap_or_default().to_string_lossy(),
                            false
                        )
                    )),
                    Err(error) => {
                        log::warn!("cannot move {} aside: {error}", path.display());
                        moved.push(format!("{shown} (could not be moved aside: {error})"));
                    }
                }
            }
        }
        if moved.is_empty() {
            return None;
        }
        Some(format!(
            "The command created {}, whose content Spindle would run (hooks, MCP servers, the project config). A sandboxed command may not create such files; use write_file, which asks the user.",
            moved.join(", ")
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn level(path: &str) -> Protection {
        of_relative(Path::new(path))
    }

    #[test]
    fn the_list_and_its_two_levels() {
        for path in [
            ".git/config",
            "sub/.git/hooks/pre-commit",
            ".spindle/config.json",
            ".spindle/commands/a.md",
            ".mcp.json",
            ".claude/settings.json",
            ".claude/settings.local.json",
            ".claude/hooks/check.sh",
            ".claude",
        ] {
            assert_eq!(level(path), Protection::Executes, "{path}");
        }
        for path in [
            "AGENTS.md",
            "sub/dir/CLAUDE.md",
            "GEMINI.md",
            ".claude/commands/deploy.md",
            ".claude/skills/x/SKILL.md",
            ".claude/agents/a.md",
            ".claude/CLAUDE.md",
            ".agents/skills/x/SKILL.md",
            ".codex/skills/x/SKILL.md",
        ] {
            assert_eq!(level(path), Protection::Instructs, "{path}");
        }
        for path in [
            "src/main.rs",
            ".gitignore",
            "sub/.spindle/x",
            "sub/.mcp.json",
            "docs/claude/settings.json",
            "AGENTS.md.bak",
            ".claudex/settings.json",
        ] {
            assert_eq!(level(path), Protection::None, "{path}");
        }
    }

    #[test]
    fn command_words_that_name_executed_files() {
        for word in [
            ".mcp.json",
            "./.claude/settings.json",
            "../other/.spindle/config.json",
            "/abs/.CLAUDE/hooks/x.sh",
        ] {
            assert!(names_executed(word), "{word}");
        }
        for word in [
            ".git/config",
            ".claude/commands/x.md",
            "mcp.json",
            "AGENTS.md",
            "-la",
        ] {
            assert!(!names_executed(word), "{word}");
        }
    }

    #[test]
    fn case_and_trailing_dots_are_the_same_names() {
        for path in [
            ".MCP.JSON",
            ".mcp.json.",
            ".mcp.json ",
            ".Claude/Settings.json",
            ".claude./settings.local.json",
            ".SPINDLE/config.json",
            ".GIT/config",
        ] {
            assert_eq!(level(path), Protection::Executes, "{path}");
        }
        assert_eq!(level("agents.md"), Protection::Instructs);
        assert_eq!(level(".CLAUDE/Commands/x.md"), Protection::Instructs);
    }

    #[test]
    fn a_linked_top_level_name_protects_where_it_points() {
        let root =
            std::env::temp_dir().join(format!("spindle-protected-{}", crate::util::random_hex()));
        std::fs::create_dir_all(root.join("config/claude")).unwrap();
        std::fs::create_dir_all(root.join("docs")).unwrap();
        let root = crate::os::canonical(&root).unwrap();
        crate::os::testing::symlink(root.join("config/claude"), root.join(".claude")).unwrap();
        crate::os::testing::symlink(root.join("docs/agents.md"), root.join("AGENTS.md")).unwrap();
        let real = |rel: &str| root.join(rel);
        assert_eq!(
            of_real(&root, &real("config/claude/settings.json")),
            Protection::Executes
        );
        assert_eq!(
            of_real(&root, &real("config/claude/commands/a.md")),
            Protection::Instructs
        );
        assert_eq!(
            of_real(&root, &real("docs/agents.md")),
            Protection::Instructs
        );
        assert_eq!(of_real(&root, &real("docs/other.md")), Protection::None);
        std::fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn executed_entries_are_found_in_any_spelling_and_missing_ones_named() {
        let root = std::env::temp_dir().join(format!(
            "spindle-protected-top-{}",
            crate::util::random_hex()
        ));
        std::fs::create_dir_all(root.join(".Git")).unwrap();
        std::fs::write(root.join(".mcp.json"), "{}").unwrap();
        let (present, missing) = executed_entries(&root);
        assert!(present.contains(&root.join(".Git")));
        assert!(present.contains(&root.join(".mcp.json")));
        assert_eq!(missing, [".spindle", ".claude"]);
        // (Windows drops the trailing dot when it makes the folder.)
        std::fs::create_dir_all(root.join(".CLAUDE.")).unwrap();
        let created = created_since(&root, &missing);
        assert_eq!(created.len(), 1, "{created:?}");
        assert!(names(created[0].file_name().unwrap(), ".claude"));
        std::fs::remove_dir_all(&created[0]).unwrap();
        // What a sandboxed command creates is moved aside, not lost.
        let watch = Watch::before([root.as_path()]);
        std::fs::write(root.join(".spindle"), "planted").unwrap();
        let note = watch.sweep().expect("a note");
        assert!(
            note.contains(".spindle (moved to .spindle.blocked-"),
            "{note}"
        );
        assert!(!root.join(".spindle").exists());
        let aside: Vec<_> = std::fs::read_dir(&root)
            .unwrap()
            .flatten()
            .filter(|e| {
                e.file_name()
                    .to_string_lossy()
                    .starts_with(".spindle.blocked-")
            })
            .collect();
        assert_eq!(std::fs::read_to_string(aside[0].path()).unwrap(), "planted");
        assert!(watch.sweep().is_none());
        std::fs::remove_dir_all(&root).unwrap();
    }
}

//! Approval policy: which tool calls run freely and which ask the user,
//! and what "always" answers are remembered.

use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;
use std::path::Path;

/// The session's approval policy.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Policy {
    /// Ask before every edit, write and command; reads and searches inside
    /// the workspace run freely.
    #[default]
    Ask,
    /// Edits inside the workspace and read-only commands run freely; other
    /// commands ask.
    Auto,
    /// Nothing asks.
    Yolo,
}

impl Policy {
    pub fn parse(text: &str) -> Option<Policy> {
        match text {
            "ask" => Some(Policy::Ask),
            "auto" => Some(Policy::Auto),
            "yolo" => Some(Policy::Yolo),
            _ => None,
        }
    }
}

/// What a tool call is about to do, as far as permission goes.
#[derive(Debug, Clone)]
pub enum Action<'a> {
    Read {
        path: &'a Path,
        inside: bool,
    },
    Edit {
        path: &'a Path,
        inside: bool,
        git_internal: bool,
    },
    Command {
        command_line: &'a str,
        cwd: &'a Path,
        inside: bool,
    },
    /// A tool of an MCP server.
    Mcp {
        exposed_name: &'a str,
        read_only: bool,
    },
    /// Updating the plan: nothing to approve.
    Plan,
}

/// "Always" answers, remembered for the rest of the session and scoped
/// exactly: a command by its exact line and working directory, an edit or a
/// read outside the workspace by its file.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Approvals {
    pub allowed: BTreeSet<String>,
    pub rejected: BTreeSet<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    Allow,
    Ask,
    Reject,
}

impl Action<'_> {
    /// The key an "always" answer is remembered under.
    pub fn key(&self) -> Option<String> {
        match self {
            Action::Read { path, .. } => Some(format!("read:{}", path.display())),
            Action::Edit { path, .. } => Some(format!("edit:{}", path.display())),
            Action::Command {
                command_line, cwd, ..
            } => Some(format!("command:{}\u{0}{command_line}", cwd.display())),
            Action::Mcp { exposed_name, .. } => Some(format!("mcp:{exposed_name}")),
            Action::Plan => None,
        }
    }

    /// How the "always" buttons describe their scope.
    pub fn scope(&self) -> String {
        match self {
            Action::Read { path, .. } => format!("reading {}", path.display()),
            Action::Edit { path, .. } => format!("edits to {}", path.display()),
            Action::Command { command_line, .. } => {
                let line: String = command_line.chars().take(60).collect();
                format!("`{line}` here")
            }
            Action::Mcp { exposed_name, .. } => format!("calls to {exposed_name}"),
            Action::Plan => String::new(),
        }
    }
}

pub fn decide(policy: Policy, action: &Action<'_>, approvals: &Approvals) -> Decision {
    if policy == Policy::Yolo {
        return Decision::Allow;
    }
    if let Some(key) = action.key() {
        if approvals.rejected.contains(&key) {
            return Decision::Reject;
        }
        if approvals.allowed.contains(&key) {
            return Decision::Allow;
        }
    }
    match action {
        Action::Plan => Decision::Allow,
        // Read-only MCP tools (by their annotation) run freely in auto.
        Action::Mcp { read_only, .. } => {
            if policy == Policy::Auto && *read_only {
                Decision::Allow
            } else {
                Decision::Ask
            }
        }
        Action::Read { inside, .. } => {
            if *inside {
                Decision::Allow
            } else {
                Decision::Ask
            }
        }
        Action::Edit {
            inside,
            git_internal,
            ..
        } => {
            if policy == Policy::Auto && *inside && !git_internal {
                Decision::Allow
            } else {
                Decision::Ask
            }
        }
        Action::Command {
            command_line,
            inside,
            ..
        } => {
            if policy == Policy::Auto && *inside && is_read_only(command_line) {
                Decision::Allow
            } else {
                Decision::Ask
            }
        }
    }
}

/// Programs that only look: they neither write files nor run other
/// programs (given the argument checks in `simple_is_read_only`).
const READ_ONLY_PROGRAMS: &[&str] = &[
    "ls", "cat", "head", "tail", "wc", "grep", "egrep", "fgrep", "rg", "pwd", "echo", "printf",
    "which", "stat", "du", "df", "cut", "tr", "diff", "cmp", "basename", "dirname", "realpath",
    "readlink", "true", "false", "test", "nl", "sort", "find", "git", "whoami", "uname", "id",
];

/// Read-only git subcommands.
const READ_ONLY_GIT: &[&str] = &[
    "status",
    "diff",
    "log",
    "show",
    "blame",
    "ls-files",
    "rev-parse",
    "grep",
    "shortlog",
    "describe",
    "remote",
    "branch",
];

/// Arguments that make an otherwise read-only program write files or run
/// other programs, by program. A word is refused when it starts with one of
/// these.
fn dangerous_arguments(program: &str) -> &'static [&'static str] {
    match program {
        "find" => &["-exec", "-ok", "-delete", "-fprint", "-fls"],
        "sort" => &[
            "-o",
            "--output",
            "--compress-program",
            "-T",
            "--temporary-directory",
        ],
        "rg" => &["--pre", "-z", "--search-zip"],
        "git" => &[
            "--output",
            "-O",
            "--open-files-in-pager",
            "--ext-diff",
            "--textconv",
            "-c",
            "--exec-path",
            "--git-dir",
            "--work-tree",
        ],
        "diff" => &["--to-file", "--from-file"],
        _ => &[],
    }
}

/// Judges a command line read-only when every simple command in it (split
/// at `|`, `&&`, `||`, `;`) is a known read-only program used in a read-only
/// way, and it has no redirection to files, command substitution or
/// background jobs. Anything unsure counts as not read-only: the cost of a
/// wrong "no" is one question to the user.
pub fn is_read_only(command_line: &str) -> bool {
    if command_line.contains('>')
        || command_line.contains('`')
        || command_line.contains("$(")
        || command_line.contains('\n')
        || command_line.contains("<(")
    {
        return false;
    }
    let normalised = command_line
        .replace("&&", ";")
        .replace("||", ";")
        .replace('|', ";");
    if normalised.contains('&') {
        return false;
    }
    normalised
        .split(';')
        .map(str::trim)
        .filter(|part| !part.is_empty())
        .all(simple_is_read_only)
        && !command_line.trim().is_empty()
}

fn simple_is_read_only(command: &str) -> bool {
    let words: Vec<&str> = command.split_whitespace().collect();
    let Some(program) = words.first() else {
        return false;
    };
    // Environment assignments in front (`LC_ALL=C grep …`) are not allowed:
    // they could set PATH or similar.
    if program.contains('=') || !READ_ONLY_PROGRAMS.contains(program) {
        return false;
    }
    let dangerous = dangerous_arguments(program);
    let unquoted = |word: &str| word.trim_matches(|c| c == '\'' || c == '"').to_string();
    if words[1..]
        .iter()
        .map(|w| unquoted(w))
        .any(|word| dangerous.iter().any(|d| word.starts_with(d)))
    {
        return false;
    }
    if *program == "git" {
        let sub = words.iter().skip(1).find(|w| !w.starts_with('-'));
        return match sub {
            Some(&"branch") => words.len() == 2,
            Some(&"remote") => words.len() == 2 || (words.len() == 3 && words[2] == "-v"),
            Some(sub) => READ_ONLY_GIT.contains(sub),
            None => false,
        };
    }
    true
}

/// Whether every path a command line names stays inside the workspace.
/// Words that look like paths (they contain `/`, start with `~`, or name
/// something that exists relative to `cwd`) are resolved from `cwd`,
/// following symlinks, and checked against `root`; `--flag=value` is
/// judged by its value. A command that reads outside the workspace is not
/// run freely, just like `read_file` outside it.
pub fn command_paths_inside(root: &Path, cwd: &Path, command_line: &str) -> bool {
    let separators =
        |c: char| c.is_whitespace() || matches!(c, ';' | '|' | '&' | '<' | '>' | '(' | ')');
    for word in command_line.split(separators) {
        let word = word.trim_matches(|c| c == '\'' || c == '"');
        let word = match word.split_once('=') {
            Some((flag, value)) if flag.starts_with('-') => value,
            _ => word,
        };
        if word.is_empty() || word.starts_with('-') {
            continue;
        }
        if word.starts_with('~') {
            return false;
        }
        let looks_like_path = word.contains('/') || cwd.join(word).symlink_metadata().is_ok();
        if looks_like_path {
            let absolute = cwd.join(word);
            if !crate::tools::paths::resolve(root, &absolute.to_string_lossy()).inside {
                return false;
            }
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn read_only_commands() {
        for yes in [
            "ls -la",
            "cat src/main.rs | head -5",
            "git status && git diff",
            "grep -rn foo src; wc -l a.rs",
            "find . -name '*.rs'",
        ] {
            assert!(is_read_only(yes), "{yes}");
        }
        for no in [
            "uniq in.txt out.txt",
            "find . -fprint0 found.txt",
            "git diff --no-index --output=diff.txt a b",
            "rg --pre rm hello victim.txt",
            "date -s 2020-01-01",
            "sort --compress-program=sh x",
            "git grep -Ovim x",
            "tree -o out",
            "rm -rf target",
            "cargo test",
            "echo hi > file",
            "cat $(which sh)",
            "find . -delete",
            "git commit -m x",
            "git branch new",
            "sleep 5 &",
            "PATH=/tmp ls",
            "sort -o out.txt in.txt",
            "",
        ] {
            assert!(!is_read_only(no), "{no}");
        }
    }

    #[test]
    fn command_paths_must_stay_inside() {
        let root = std::env::temp_dir().join(format!("spindle-perm-{}", crate::util::random_hex()));
        std::fs::create_dir_all(root.join("sub")).unwrap();
        let root = std::fs::canonicalize(root).unwrap();
        std::os::unix::fs::symlink("/etc", root.join("link")).unwrap();
        let inside = |line: &str| command_paths_inside(&root, &root, line);
        assert!(inside("cat sub/a.txt | grep -n x"));
        assert!(inside("ls -la"));
        assert!(inside("grep --include=*.rs foo ."));
        assert!(!inside("cat ../outside.txt"));
        assert!(!inside("cat /etc/passwd"));
        assert!(!inside("cat link/hosts"));
        assert!(!inside("cat link"));
        assert!(!inside("ls ~"));
        assert!(!inside("grep --file=/etc/passwd x"));
        assert!(command_paths_inside(
            &root,
            &root.join("sub"),
            "cat ../sub/a.txt"
        ));
        std::fs::remove_dir_all(root).unwrap();
    }

    #[test]
    fn policies_and_remembered_answers() {
        let path = Path::new("/w/a.rs");
        let edit = Action::Edit {
            path,
            inside: true,
            git_internal: false,
        };
        let none = Approvals::default();
        assert_eq!(decide(Policy::Ask, &edit, &none), Decision::Ask);
        assert_eq!(decide(Policy::Auto, &edit, &none), Decision::Allow);
        assert_eq!(decide(Policy::Yolo, &edit, &none), Decision::Allow);
        let git = Action::Edit {
            path,
            inside: true,
            git_internal: true,
        };
        assert_eq!(decide(Policy::Auto, &git, &none), Decision::Ask);
        let outside_read = Action::Read {
            path: Path::new("/etc/hosts"),
            inside: false,
        };
        assert_eq!(decide(Policy::Auto, &outside_read, &none), Decision::Ask);
        assert_eq!(decide(Policy::Yolo, &outside_read, &none), Decision::Allow);
        let cwd = Path::new("/w");
        let ls = Action::Command {
            command_line: "ls",
            cwd,
            inside: true,
        };
        assert_eq!(decide(Policy::Ask, &ls, &none), Decision::Ask);
        assert_eq!(decide(Policy::Auto, &ls, &none), Decision::Allow);
        let build = Action::Command {
            command_line: "cargo build",
            cwd,
            inside: true,
        };
        assert_eq!(decide(Policy::Auto, &build, &none), Decision::Ask);
        let mut remembered = Approvals::default();
        remembered.allowed.insert(build.key().unwrap());
        assert_eq!(decide(Policy::Ask, &build, &remembered), Decision::Allow);
        let elsewhere = Action::Command {
            command_line: "cargo build",
            cwd: Path::new("/w/sub"),
            inside: true,
        };
        assert_eq!(decide(Policy::Ask, &elsewhere, &remembered), Decision::Ask);
        remembered.rejected.insert(edit.key().unwrap());
        assert_eq!(decide(Policy::Auto, &edit, &remembered), Decision::Reject);
    }
}

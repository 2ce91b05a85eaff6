//! What a shell command line may do without asking the user.
//!
//! The model's output is untrusted input: a command line it proposes is
//! judged read-only only when every part of it is proven to be a known
//! program used in a known non-writing, non-executing way (`programs.rs`,
//! `git.rs`), on a line the parser fully understands (`shell.rs`), naming
//! only paths inside the workspace. Anything else asks. `secrets.rs` keeps
//! the provider credentials out of every process a tool starts.
//!
//! This file judges a line command by command; `options.rs` reads a
//! program's words against its options (and `find`'s expression, git's
//! subcommands), `reach.rs` checks where the words lead (paths, globs, the
//! folders a program would walk, `cd`), `needs.rs` tells what obviously
//! needs more than the sandbox gives. `git.rs` also checks (and
//! neutralises for the call) the repository configuration a git command
//! would read. `rules/` holds the lasting allow, ask and deny rules of the
//! configuration and of "always" answers.

pub(crate) mod git;
pub(crate) mod needs;
mod options;
pub(crate) mod programs;
mod reach;
pub(crate) mod rules;
pub(crate) mod secrets;
pub(crate) mod shell;

use crate::tools::paths;
use options::refuse_denied;
use programs::{Options, Reach};
use reach::{Checker, Judged};
use shell::{Operator, Redirect};
use std::ffi::OsString;
use std::path::{Path, PathBuf};

/// Where a command line would run.
pub(crate) struct Context<'a> {
    /// The workspace root.
    pub root: &'a Path,
    /// The command's working directory.
    pub cwd: &'a Path,
    /// The `PATH` the command gets, for finding which program a name runs.
    pub path_var: Option<OsString>,
    /// The kind of shell the line runs under: only POSIX sh is parsed.
    pub shell: crate::process::shell::ShellKind,
}

/// The judgement of one command line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// Every part is a known program used in a read-only way. `git_dirs`
    /// are the directories git runs in: their repository configuration
    /// must still be checked (`git::plain_repository_config`) right before
    /// the command runs.
    ReadOnly { git_dirs: Vec<PathBuf> },
    /// The line may write or run something, or cannot be proven not to;
    /// the reason is for logs and tests.
    Ask(String),
}

impl Verdict {
    pub(crate) fn is_read_only(&self) -> bool {
        matches!(self, Verdict::ReadOnly { .. })
    }
}

/// Judges a command line (pure apart from looking at the file system for
/// paths, globs and PATH).
pub(crate) fn classify(line: &str, context: &Context) -> Verdict {
    match classify_inner(line, context) {
        Ok(git_dirs) => Verdict::ReadOnly { git_dirs },
        Err(reason) => Verdict::Ask(reason),
    }
}

/// `classify`, then the repository configuration of every directory git
/// would run in. This is the judgement to use right before running.
#[cfg(test)]
pub(crate) fn judge(line: &str, context: &Context) -> Verdict {
    judge_or_cancel(line, context, None)
}

/// [`judge`], whose git checks stop at a message on, or the disconnection
/// of, `cancel` (the line then asks).
pub(crate) fn judge_or_cancel(
    line: &str,
    context: &Context,
    cancel: Option<&crossbeam_channel::Receiver<()>>,
) -> Verdict {
    let verdict = classify(line, context);
    if let Verdict::ReadOnly { git_dirs } = &verdict {
        for dir in git_dirs {
            if let Err(reason) = git::plain_repository_config_or_cancel(dir, context.root, cancel) {
                return Verdict::Ask(reason);
            }
        }
    }
    verdict
}

fn classify_inner(line: &str, context: &Context) -> Judged<Vec<PathBuf>> {
    if context.shell != crate::process::shell::ShellKind::Posix {
        return Err("commands run under a shell that is not sh, which is not parsed".into());
    }
    let script = shell::parse(line).map_err(|refusal| refusal.0.to_string())?;
    let root = crate::os::canonical(context.root).unwrap_or_else(|_| context.root.to_path_buf());
    let mut check = Checker {
        root,
        cwd: paths::normalise(context.cwd),
        walked: std::cell::Cell::new(0),
    };
    let mut git_dirs = Vec::new();
    let mut previous_piped = false;
    // After a `cd` that fails, the rest of a line joined by `;`, `||` or
    // a newline runs where the line started: a line with `cd` is judged
    // only when every operator in it is `&&`.
    let has_cd = script
        .commands
        .iter()
        .any(|c| c.words.first().is_some_and(|w| w.text == "cd"));
    if has_cd && script.operators.iter().any(|op| *op != Operator::And) {
        return Err("`cd` in a line joined by something other than `&&`".into());
    }
    for simple in &script.commands {
        if !simple.assignments.is_empty() {
            return Err("the command sets variables".into());
        }
        for redirect in &simple.redirects {
            match redirect {
                Redirect::Write(target)
                    if target.text == "/dev/null" && target.glob_at.is_none() => {}
                Redirect::Write(_) => {
                    return Err("the command writes a file through a redirection".into())
                }
                Redirect::Read(target) => check.operand(target)?,
                Redirect::Duplicate | Redirect::HereDoc => {}
            }
        }
        let Some(first) = simple.words.first() else {
            return Err("a redirection without a command".into());
        };
        let name = first.text.as_str();
        if first.glob_at.is_some() || name.contains('/') || name.is_empty() {
            return Err(format!("`{name}` is not a known read-only program"));
        }
        let Some(program) = programs::find(name) else {
            return Err(format!("`{name}` is not a known read-only program"));
        };
        if !program.builtin {
            check.program_outside_workspace(name, context.path_var.as_deref())?;
        }
        let args = &simple.words[1..];
        match &program.options {
            Options::Any => {
                for arg in args {
                    check.any_option_word(arg)?;
                }
            }
            Options::AnyExcept(denied) => {
                let mut options_done = false;
                for arg in args {
                    if arg.text == "--" {
                        options_done = true;
                    } else if !options_done {
                        refuse_denied(name, denied, &arg.text)?;
                    }
                    check.any_option_word(arg)?;
                }
            }
            Options::Only(table) => check.table(name, *table, args, true)?,
            Options::Find => check.find(args)?,
            Options::Git => {
                check.git(args)?;
                git_dirs.push(check.cwd.clone());
            }
        }
        if let Reach::Entries { recursive } = &program.reach {
            check.entries_read(name, recursive, args)?;
        }
        if name == "cd" {
            if simple.piped || previous_piped {
                return Err("`cd` inside a pipeline".into());
            }
            check.change_directory(args)?;
        }
        previous_piped = simple.piped;
    }
    Ok(git_dirs)
}

#[cfg(test)]
mod attack_tests;
#[cfg(test)]
mod tests;

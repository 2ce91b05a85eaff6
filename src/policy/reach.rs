//! Where the words of a command lead: paths resolved the way the kernel
//! does and kept inside the workspace, globs and what they could expand
//! to, the folders a program that opens their entries would walk, the
//! program a name runs through PATH, and `cd`.

use super::programs::{is_one_of, Denied};
use super::shell::Word;
use crate::tools::paths;
use std::path::{Path, PathBuf};

/// A judgement: `Err` says why a command is not proven read-only.
pub(super) type Judged<T> = Result<T, String>;

/// Most directory entries looked at to bound what a glob expands to.
const GLOB_ENTRY_LIMIT: usize = 10_000;

/// Most directory entries looked at, for the whole line, to learn what
/// programs that open the entries of folders (`Reach::Entries`) would
/// read; past it, the line asks.
pub(super) const WALK_ENTRY_LIMIT: usize = 10_000;

/// What judging one line keeps: the workspace, where the line runs, and
/// what it has walked.
pub(super) struct Checker {
    /// The workspace root, canonical.
    pub(super) root: PathBuf,
    /// Where the current part of the line runs (after any `cd`).
    pub(super) cwd: PathBuf,
    /// Directory entries walked so far (`WALK_ENTRY_LIMIT`).
    pub(super) walked: std::cell::Cell<usize>,
}

impl Checker {
    /// Whether a path-like word stays inside the workspace. Words that look
    /// like paths (with a `/`, or naming something that exists) are resolved
    /// from the current directory, following symlinks.
    pub(super) fn path_inside(&self, text: &str) -> bool {
        if text.is_empty() {
            return true;
        }
        let joined = self.cwd.join(text);
        let looks_like_path = text.contains('/') || joined.symlink_metadata().is_ok();
        !looks_like_path || self.leads_inside(&joined)
    }

    /// Whether `path` leads inside the workspace the way the kernel
    /// resolves it (`physical`).
    fn leads_inside(&self, path: &Path) -> bool {
        physical(path).is_some_and(|real| real.starts_with(&self.root))
    }

    /// A word the program takes as an operand (or an option's value).
    pub(super) fn operand(&self, word: &Word) -> Judged<()> {
        self.glob(word)?;
        if !self.path_inside(&word.text) {
            return Err(format!("`{}` is outside the workspace", word.text));
        }
        Ok(())
    }

    /// A word the shell would expand as a glob must expand only to names
    /// inside the workspace that cannot be taken for options: every entry
    /// of the directory it lists is checked (a superset of what matches).
    pub(super) fn glob(&self, word: &Word) -> Judged<()> {
        let Some(at) = word.glob_at else {
            return Ok(());
        };
        let (dir, rest) = match word.text[..at].rfind('/') {
            Some(slash) => (&word.text[..=slash], &word.text[slash + 1..]),
            None => ("", word.text.as_str()),
        };
        if rest.contains('/') {
            return Err(format!("the glob `{}` spans directories", word.text));
        }
        // dash lets `.*` and `.?` match `.` and `..`.
        if rest.starts_with('.') {
            return Err(format!("the glob `{}` can match `..`", word.text));
        }
        let dir_path = self.cwd.join(dir);
        if !self.leads_inside(&dir_path) {
            return Err(format!("`{}` is outside the workspace", word.text));
        }
        let Ok(entries) = std::fs::read_dir(&dir_path) else {
            // Nothing to expand: the shell passes the word as it is.
            return Ok(());
        };
        for (count, entry) in entries.enumerate() {
            if count >= GLOB_ENTRY_LIMIT {
                return Err(format!("the glob `{}` lists too many files", word.text));
            }
            let Ok(entry) = entry else { continue };
            let name = entry.file_name().to_string_lossy().into_owned();
            if name.starts_with('-') {
                return Err(format!(
                    "the glob `{}` could expand to `{name}`, which looks like an option",
                    word.text
                ));
            }
            let path = dir_path.join(&name);
            if !self.leads_inside(&path) {
                return Err(format!(
                    "the glob `{}` could expand to `{name}`, which leads outside the workspace",
                    word.text
                ));
            }
        }
        Ok(())
    }

    /// What a program that opens the entries of the folders it is given
    /// (`Reach::Entries`, following symlinks) would read: every word that
    /// may name a folder (operands, `--option=value` values, and the
    /// folders a glob could expand to) is walked, one level deep or, with
    /// a `recursive` option, all the way; any symlink met there must lead
    /// inside the workspace. Generous: a word that is really an option's
    /// value is walked too, which can only ask more.
    pub(super) fn entries_read(
        &self,
        program: &str,
        recursive: &Denied,
        args: &[Word],
    ) -> Judged<()> {
        let mut options_done = false;
        let deep = args
            .iter()
            .take_while(|w| w.text != "--")
            .any(|w| is_one_of(recursive, &w.text));
        for word in args {
            let text = word.text.as_str();
            if !options_done && text == "--" {
                options_done = true;
                continue;
            }
            let named = if !options_done && text.len() > 1 && text.starts_with('-') {
                match text
                    .strip_prefix("--")
                    .and_then(|long| long.split_once('='))
                {
                    Some((_, value)) => value,
                    None => continue,
                }
            } else {
                text
            };
            if named.is_empty() || named == "-" {
                continue;
            }
            // One level below a folder the glob lists: its entries are
            // what the shell may pass.
            let (start, levels) = match word.glob_at {
                Some(at) if named == text => {
                    let dir = match text[..at].rfind('/') {
                        Some(slash) => &text[..=slash],
                        None => ".",
                    };
                    (self.cwd.join(dir), 2)
                }
                _ => (self.cwd.join(named), 1),
            };
            let levels = if deep { None } else { Some(levels) };
            self.walk_reads(program, named, &start, levels)?;
        }
        Ok(())
    }

    /// Walks the folder `start` leads to (`levels` deep; `None`: every
    /// level), following symlinks as a program that opens what it finds
    /// would; a symlink leading outside the workspace (or nowhere) asks.
    fn walk_reads(
        &self,
        program: &str,
        shown: &str,
        start: &Path,
        levels: Option<usize>,
    ) -> Judged<()> {
        let Some(real) = physical(start) else {
            return Ok(());
        };
        // Each folder once, at the shallowest level it is met.
        let mut seen = std::collections::HashMap::new();
        let mut stack = vec![(real, 1usize)];
        while let Some((dir, level)) = stack.pop() {
            if !dir.is_dir() || seen.get(&dir).is_some_and(|&at| at <= level) {
                continue;
            }
            seen.insert(dir.clone(), level);
            // A folder the program cannot list either.
            let Ok(entries) = std::fs::read_dir(&dir) else {
                continue;
            };
            for entry in entries {
                let walked = self.walked.get() + 1;
                self.walked.set(walked);
                if walked > WALK_ENTRY_LIMIT {
                    return Err(format!(
                        "`{program} {shown}` would open more than {WALK_ENTRY_LIMIT} entries"
                    ));
                }
                let Ok(entry) = entry else { continue };
                let path = entry.path();
                let is_link = entry.file_type().is_ok_and(|t| t.is_symlink());
                let target = if is_link {
                    match physical(&path) {
                        Some(real) if real.starts_with(&self.root) => real,
                        _ => {
                            let inner = path.strip_prefix(&self.root).unwrap_or(&path);
                            return Err(format!(
                                "`{program} {shown}` would follow `{}`, a symlink leading outside the workspace",
                                inner.display()
                            ));
                        }
                    }
                } else {
                    path
                };
                if levels.is_none_or(|most| level < most) {
                    stack.push((target, level + 1));
                }
            }
        }
        Ok(())
    }

    /// The program named resolves, through PATH, to a file outside the
    /// workspace, and PATH has no relative entry (which would make the
    /// name mean a file of the current directory).
    pub(super) fn program_outside_workspace(
        &self,
        name: &str,
        path_var: Option<&std::ffi::OsStr>,
    ) -> Judged<()> {
        let Some(path_var) = path_var else {
            return Ok(());
        };
        for dir in std::env::split_paths(path_var) {
            if dir.as_os_str().is_empty() || dir.is_relative() {
                return Err(
                    "PATH has a relative entry, so a program name may mean a workspace file".into(),
                );
            }
            let candidate = dir.join(name);
            let listed_inside = crate::os::canonical(&dir).is_ok_and(|d| d.starts_with(&self.root));
            if listed_inside && candidate.symlink_metadata().is_ok() {
                return Err(format!("`{name}` is found in a folder of the workspace"));
            }
            if candidate.is_file() {
                let real = crate::os::canonical(&candidate).unwrap_or(candidate);
                if real.starts_with(&self.root) {
                    return Err(format!("`{name}` is a program inside the workspace"));
                }
                return Ok(());
            }
        }
        Ok(())
    }

    /// `cd DIR` (no options): later parts of the line run there. The shell
    /// changes directory logically (`..` taken off the path as written), so
    /// that is the new directory; it must exist and lead inside.
    pub(super) fn change_directory(&mut self, args: &[Word]) -> Judged<()> {
        let [target] = args else {
            return Err("`cd` needs exactly one directory".into());
        };
        if target.text.starts_with('-') || target.glob_at.is_some() || target.text.is_empty() {
            return Err(format!("`cd {}` is not understood", target.text));
        }
        let next = paths::normalise(&self.cwd.join(&target.text));
        if !next.is_dir() || !self.leads_inside(&next) {
            return Err(format!("`cd {}` leaves the workspace", target.text));
        }
        self.cwd = next;
        Ok(())
    }
}

/// Where `path` really leads, resolved the way the kernel does: component
/// by component, a symlink replaced by its target where it stands, so
/// `link/..` is the parent of the link's target, not the folder holding
/// the link. A part that does not exist yet is taken as written; a
/// dangling symlink gives `None`.
pub(super) fn physical(path: &Path) -> Option<PathBuf> {
    use std::path::Component;
    let mut out = PathBuf::from("/");
    let mut missing = false;
    for component in path.components() {
        match component {
            Component::RootDir | Component::Prefix(_) => out = PathBuf::from("/"),
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            Component::Normal(name) => {
                out.push(name);
                if missing {
                    continue;
                }
                match out.symlink_metadata() {
                    Ok(meta) if meta.file_type().is_symlink() => {
                        out = crate::os::canonical(&out).ok()?;
                    }
                    Ok(_) => {}
                    Err(_) => missing = true,
                }
            }
        }
    }
    Some(out)
}

//! What a shell command line may do without asking the user.
//!
//! The model's output is untrusted input: a command line it proposes is
//! judged read-only only when every part of it is proven to be a known
//! program used in a known non-writing, non-executing way (`programs.rs`,
//! `git.rs`), on a line the parser fully understands (`shell.rs`), naming
//! only paths inside the workspace. Anything else asks. `secrets.rs` keeps
//! the provider credentials out of every process a tool starts.

pub mod git;
pub mod programs;
pub mod rules;
pub mod secrets;
pub mod shell;

use crate::tools::paths;
use programs::{Denied, Options, Reach, Table};
use shell::{Operator, Redirect, Word};
use std::ffi::OsString;
use std::path::{Path, PathBuf};

/// Where a command line would run.
pub struct Context<'a> {
    /// The workspace root.
    pub root: &'a Path,
    /// The command's working directory.
    pub cwd: &'a Path,
    /// The `PATH` the command gets, for finding which program a name runs.
    pub path_var: Option<OsString>,
}

/// The judgement of one command line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
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
    pub fn is_read_only(&self) -> bool {
        matches!(self, Verdict::ReadOnly { .. })
    }
}

/// Judges a command line (pure apart from looking at the file system for
/// paths, globs and PATH).
pub fn classify(line: &str, context: &Context) -> Verdict {
    match classify_inner(line, context) {
        Ok(git_dirs) => Verdict::ReadOnly { git_dirs },
        Err(reason) => Verdict::Ask(reason),
    }
}

/// `classify`, then the repository configuration of every directory git
/// would run in. This is the judgement to use right before running.
pub fn judge(line: &str, context: &Context) -> Verdict {
    judge_or_cancel(line, context, None)
}

/// [`judge`], whose git checks stop at a message on, or the disconnection
/// of, `cancel` (the line then asks).
pub fn judge_or_cancel(
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

/// Programs that reach the network, which the sandbox does not allow.
const NETWORK_PROGRAMS: &[&str] = &[
    "curl", "wget", "ssh", "scp", "sftp", "rsync", "nc", "ncat", "netcat", "telnet", "ftp", "ping",
    "dig", "nslookup", "host", "docker", "podman", "kubectl", "gh",
];

/// Programs that ask for privileges, which the sandbox never grants.
const PRIVILEGE_PROGRAMS: &[&str] = &["sudo", "su", "doas", "pkexec"];

/// `program subcommand` pairs that need the network (installing, fetching,
/// publishing).
const NETWORK_SUBCOMMANDS: &[(&str, &[&str])] = &[
    (
        "git",
        &[
            "clone",
            "fetch",
            "pull",
            "push",
            "ls-remote",
            "submodule",
            "remote",
        ],
    ),
    (
        "npm",
        &[
            "install", "i", "ci", "add", "update", "publish", "exec", "x",
        ],
    ),
    ("npx", &[]),
    ("pnpm", &["install", "i", "add", "update", "dlx", "publish"]),
    ("yarn", &["install", "add", "upgrade", "dlx", "publish"]),
    ("bun", &["install", "add", "x"]),
    ("pip", &["install", "download"]),
    ("pip3", &["install", "download"]),
    ("uv", &["pip", "add", "sync", "run", "tool"]),
    ("poetry", &["install", "add", "update"]),
    (
        "cargo",
        &["install", "add", "update", "fetch", "publish", "search"],
    ),
    ("go", &["get", "install", "mod"]),
    ("gem", &["install"]),
    ("bundle", &["install", "update"]),
    ("apt", &[]),
    ("apt-get", &[]),
    ("brew", &[]),
    ("dnf", &[]),
    ("yum", &[]),
    ("pacman", &[]),
    ("apk", &[]),
];

/// Why a command obviously needs more than the sandbox gives (the network,
/// privileges), so it should ask instead of failing inside it. A best-effort
/// look at the words of the line (it need not parse): the sandbox itself is
/// what holds; this only spares the user a command that cannot work.
pub fn needs_more(line: &str) -> Option<String> {
    let words: Vec<&str> = line
        .split(|c: char| !(c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '/')))
        .filter(|w| !w.is_empty())
        .map(|w| w.rsplit('/').next().unwrap_or(w))
        .collect();
    for (index, word) in words.iter().enumerate() {
        if NETWORK_PROGRAMS.contains(word) {
            return Some(format!("`{word}` needs the network"));
        }
        if PRIVILEGE_PROGRAMS.contains(word) {
            return Some(format!("`{word}` asks for privileges"));
        }
        if let Some((_, subcommands)) = NETWORK_SUBCOMMANDS.iter().find(|(p, _)| p == word) {
            let next = words.get(index + 1).copied().unwrap_or("");
            if subcommands.is_empty() || subcommands.contains(&next) {
                return Some(format!("`{word} {next}` needs the network"));
            }
        }
    }
    None
}

type Judged<T> = Result<T, String>;

fn classify_inner(line: &str, context: &Context) -> Judged<Vec<PathBuf>> {
    let script = shell::parse(line).map_err(|refusal| refusal.0.to_string())?;
    let root = std::fs::canonicalize(context.root).unwrap_or_else(|_| context.root.to_path_buf());
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

/// Refuses an option of `denied`, also when a long one is abbreviated
/// (getopt takes any unambiguous prefix) or a short one is clustered.
fn refuse_denied(program: &str, denied: &Denied, text: &str) -> Judged<()> {
    if is_one_of(denied, text) {
        return Err(format!(
            "`{program} {text}` may reach outside what it names"
        ));
    }
    Ok(())
}

/// Whether the word `text` gives an option of `set`: a long one, maybe
/// abbreviated, or a short one, maybe in a cluster. Generous on purpose:
/// a letter that is really the attached value of another option counts.
fn is_one_of(set: &Denied, text: &str) -> bool {
    if text.len() < 2 || !text.starts_with('-') {
        return false;
    }
    if let Some(long) = text.strip_prefix("--") {
        let name = format!("--{}", long.split('=').next().unwrap_or(""));
        return name.len() > 2 && set.long.iter().any(|d| d.starts_with(name.as_str()));
    }
    text[1..].chars().any(|c| set.short.contains(c))
}

/// Options of one program: a plain table or a git subcommand's groups.
trait OptionSet {
    fn short(&self, c: char) -> bool;
    fn short_value(&self, c: char) -> bool;
    fn short_optional(&self, c: char) -> bool;
    fn long(&self, name: &str) -> bool;
    fn long_value(&self, name: &str) -> bool;
    fn long_optional(&self, name: &str) -> bool;
    fn numeric(&self) -> bool;
}

impl OptionSet for Table {
    fn short(&self, c: char) -> bool {
        self.short.contains(c)
    }
    fn short_value(&self, c: char) -> bool {
        self.short_value.contains(c)
    }
    fn short_optional(&self, c: char) -> bool {
        self.short_optional.contains(c)
    }
    fn long(&self, name: &str) -> bool {
        self.long.contains(&name)
    }
    fn long_value(&self, name: &str) -> bool {
        self.long_value.contains(&name)
    }
    fn long_optional(&self, name: &str) -> bool {
        self.long_optional.contains(&name)
    }
    fn numeric(&self) -> bool {
        self.numeric
    }
}

impl OptionSet for git::Subcommand {
    fn short(&self, c: char) -> bool {
        self.table.short.contains(c)
    }
    fn short_value(&self, c: char) -> bool {
        self.table.short_value.contains(c)
    }
    fn short_optional(&self, c: char) -> bool {
        self.table.short_optional.contains(c)
    }
    fn long(&self, name: &str) -> bool {
        git::Subcommand::long(self, name)
    }
    fn long_value(&self, name: &str) -> bool {
        git::Subcommand::long_value(self, name)
    }
    fn long_optional(&self, name: &str) -> bool {
        git::Subcommand::long_optional(self, name)
    }
    fn numeric(&self) -> bool {
        git::Subcommand::numeric(self)
    }
}

/// Most directory entries looked at to bound what a glob expands to.
const GLOB_ENTRY_LIMIT: usize = 10_000;

/// Most directory entries looked at, for the whole line, to learn what
/// programs that open the entries of folders (`Reach::Entries`) would
/// read; past it, the line asks.
pub const WALK_ENTRY_LIMIT: usize = 10_000;

struct Checker {
    /// The workspace root, canonical.
    root: PathBuf,
    /// Where the current part of the line runs (after any `cd`).
    cwd: PathBuf,
    /// Directory entries walked so far (`WALK_ENTRY_LIMIT`).
    walked: std::cell::Cell<usize>,
}

impl Checker {
    /// Whether a path-like word stays inside the workspace. Words that look
    /// like paths (with a `/`, or naming something that exists) are resolved
    /// from the current directory, following symlinks.
    fn path_inside(&self, text: &str) -> bool {
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
    fn operand(&self, word: &Word) -> Judged<()> {
        self.glob(word)?;
        if !self.path_inside(&word.text) {
            return Err(format!("`{}` is outside the workspace", word.text));
        }
        Ok(())
    }

    /// A word the shell would expand as a glob must expand only to names
    /// inside the workspace that cannot be taken for options: every entry
    /// of the directory it lists is checked (a superset of what matches).
    fn glob(&self, word: &Word) -> Judged<()> {
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
    fn entries_read(&self, program: &str, recursive: &Denied, args: &[Word]) -> Judged<()> {
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

    /// A word of a program whose options are all harmless: option values
    /// that name files are still checked (`--file=/etc/passwd`, and any
    /// tail of a short cluster such as `-f/etc/passwd`).
    fn any_option_word(&self, word: &Word) -> Judged<()> {
        self.glob(word)?;
        let text = word.text.as_str();
        if text.len() < 2 || !text.starts_with('-') {
            return self.operand(word);
        }
        if let Some(rest) = text.strip_prefix("--") {
            if let Some((_, value)) = rest.split_once('=') {
                if !self.path_inside(value) {
                    return Err(format!("`{value}` is outside the workspace"));
                }
            }
            return Ok(());
        }
        for (index, _) in text.char_indices().skip(2) {
            if !self.path_inside(&text[index..]) {
                return Err(format!("`{}` is outside the workspace", &text[index..]));
            }
        }
        Ok(())
    }

    /// The program named resolves, through PATH, to a file outside the
    /// workspace, and PATH has no relative entry (which would make the
    /// name mean a file of the current directory).
    fn program_outside_workspace(
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
            let listed_inside =
                std::fs::canonicalize(&dir).is_ok_and(|d| d.starts_with(&self.root));
            if listed_inside && candidate.symlink_metadata().is_ok() {
                return Err(format!("`{name}` is found in a folder of the workspace"));
            }
            if candidate.is_file() {
                let real = std::fs::canonicalize(&candidate).unwrap_or(candidate);
                if real.starts_with(&self.root) {
                    return Err(format!("`{name}` is a program inside the workspace"));
                }
                return Ok(());
            }
        }
        Ok(())
    }

    /// Arguments of a program with an option table.
    fn table(
        &self,
        program: &str,
        options: &dyn OptionSet,
        args: &[Word],
        operands: bool,
    ) -> Judged<()> {
        let refuse =
            |option: &str| Err(format!("`{program} {option}` is not known to be read-only"));
        let mut index = 0;
        let mut options_done = false;
        while index < args.len() {
            let word = &args[index];
            index += 1;
            let text = word.text.as_str();
            if options_done || !text.starts_with('-') || text == "-" {
                if !operands {
                    return Err(format!("`{program}` with operands may change something"));
                }
                self.operand(word)?;
                continue;
            }
            if word.glob_at.is_some() {
                return Err(format!("the option `{text}` is a glob"));
            }
            if text == "--" {
                options_done = true;
                continue;
            }
            if let Some(long) = text.strip_prefix("--") {
                let (name, value) = match long.split_once('=') {
                    Some((name, value)) => (format!("--{name}"), Some(value)),
                    None => (text.to_string(), None),
                };
                if options.long_value(&name) {
                    match value {
                        Some(value) => {
                            if !self.path_inside(value) {
                                return Err(format!("`{value}` is outside the workspace"));
                            }
                        }
                        None => {
                            let Some(next) = args.get(index) else {
                                return refuse(text);
                            };
                            index += 1;
                            separate_value(next)?;
                            self.operand(next)?;
                        }
                    }
                } else if options.long_optional(&name) {
                    if let Some(value) = value {
                        if !self.path_inside(value) {
                            return Err(format!("`{value}` is outside the workspace"));
                        }
                    }
                } else if !(options.long(&name) && value.is_none()) {
                    return refuse(text);
                }
                continue;
            }
            let cluster = &text[1..];
            if options.numeric() && cluster.chars().all(|c| c.is_ascii_digit()) {
                continue;
            }
            for (at, c) in cluster.char_indices() {
                if options.short(c) {
                    continue;
                }
                let attached = &cluster[at + c.len_utf8()..];
                if options.short_value(c) {
                    if attached.is_empty() {
                        let Some(next) = args.get(index) else {
                            return refuse(text);
                        };
                        index += 1;
                        separate_value(next)?;
                        self.operand(next)?;
                    } else if !self.path_inside(attached) {
                        return Err(format!("`{attached}` is outside the workspace"));
                    }
                    break;
                }
                if options.short_optional(c) {
                    if !self.path_inside(attached) {
                        return Err(format!("`{attached}` is outside the workspace"));
                    }
                    break;
                }
                return refuse(&format!("-{c}"));
            }
        }
        Ok(())
    }

    /// `find [-H|-P] [start…] [expression]` with only tests and prints
    /// (not `-L`, which follows symlinks out of the workspace).
    fn find(&self, args: &[Word]) -> Judged<()> {
        let mut index = 0;
        while let Some(word) = args.get(index) {
            if matches!(word.text.as_str(), "-H" | "-P") {
                index += 1;
            } else {
                break;
            }
        }
        // Starting points: until the expression begins.
        while let Some(word) = args.get(index) {
            let text = word.text.as_str();
            if text.starts_with('-') || matches!(text, "(" | ")" | "!" | ",") {
                break;
            }
            self.operand(word)?;
            index += 1;
        }
        while let Some(word) = args.get(index) {
            index += 1;
            let text = word.text.as_str();
            if word.glob_at.is_some() {
                return Err(format!("the find expression word `{text}` is a glob"));
            }
            if programs::FIND_FLAGS.contains(&text) {
                continue;
            }
            let with_value = programs::FIND_WITH_VALUE
                .iter()
                .find(|(name, _)| *name == text)
                .map(|(_, is_file)| *is_file)
                .or_else(|| {
                    // -newerXY: two letters from a, B, c, m (t: a date).
                    let rest = text.strip_prefix("-newer")?;
                    let ok = rest.len() == 2
                        && rest
                            .chars()
                            .all(|c| matches!(c, 'a' | 'B' | 'c' | 'm' | 't'));
                    ok.then_some(!rest.ends_with('t'))
                });
            let Some(is_file) = with_value else {
                return Err(format!("`find {text}` is not known to be read-only"));
            };
            let Some(value) = args.get(index) else {
                return Err(format!("`find {text}` has no argument"));
            };
            index += 1;
            if value.glob_at.is_some() {
                // An unquoted pattern: the shell may expand it first.
                self.glob(value)?;
            }
            if is_file {
                self.operand(value)?;
            }
        }
        Ok(())
    }

    /// `git [harmless global options] SUBCOMMAND [options and operands]`.
    fn git(&self, args: &[Word]) -> Judged<()> {
        // `%G…` format placeholders verify signatures, running gpg.
        if args.iter().any(|w| w.text.contains("%G")) {
            return Err("a git format asks for signatures, which runs gpg".into());
        }
        let mut index = 0;
        while let Some(word) = args.get(index) {
            let text = word.text.as_str();
            if !text.starts_with('-') {
                break;
            }
            if !git::GLOBAL_OPTIONS.contains(&text) {
                return Err(format!(
                    "`git {text}` changes how git reads the repository or its configuration"
                ));
            }
            index += 1;
        }
        let Some(word) = args.get(index) else {
            return Err("`git` without a subcommand".into());
        };
        let Some(subcommand) = git::subcommand(&word.text) else {
            return Err(format!(
                "`git {}` is not a read-only git subcommand",
                word.text
            ));
        };
        let program = format!("git {}", subcommand.name);
        self.table(
            &program,
            subcommand,
            &args[index + 1..],
            subcommand.operands,
        )
    }

    /// `cd DIR` (no options): later parts of the line run there. The shell
    /// changes directory logically (`..` taken off the path as written), so
    /// that is the new directory; it must exist and lead inside.
    fn change_directory(&mut self, args: &[Word]) -> Judged<()> {
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

/// A value given as a separate word: one that looks like an option may be
/// taken by the program as an option (when the value is optional there).
fn separate_value(word: &Word) -> Judged<()> {
    if word.text.starts_with('-') && word.text.len() > 1 {
        return Err(format!(
            "`{}` after an option that takes a value",
            word.text
        ));
    }
    Ok(())
}

/// Where `path` really leads, resolved the way the kernel does: component
/// by component, a symlink replaced by its target where it stands, so
/// `link/..` is the parent of the link's target, not the folder holding
/// the link. A part that does not exist yet is taken as written; a
/// dangling symlink gives `None`.
pub fn physical(path: &Path) -> Option<PathBuf> {
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
                        out = std::fs::canonicalize(&out).ok()?;
                    }
                    Ok(_) => {}
                    Err(_) => missing = true,
                }
            }
        }
    }
    Some(out)
}

#[cfg(test)]
mod attack_tests;
#[cfg(test)]
mod tests;

//! Directory walking for the file tools: a `.gitignore`-aware walker, a small
//! glob matcher, and the engines behind the `list_directory` and `glob` tools.
//!
//! The agent may not depend on the `ignore`, `globset` or `walkdir` crates, so
//! this module implements the part of git's ignore rules that real projects
//! use. Ignore files are read in every directory of the walk and in the
//! ancestors of the starting directory up to the workspace root. In each
//! directory `.gitignore`, `.ignore` and `.rgignore` are read in that order,
//! later files overriding earlier ones as in ripgrep, so that the built-in
//! search and ripgrep skip the same files. `.git` is never entered, directory
//! symlinks are never followed, and an explicitly chosen starting directory is
//! walked even when a rule ignores it; rules still apply to what is inside.
//! The glob matcher and the ignore rules themselves are in `ignore.rs`;
//! `Glob` and `glob_match` are re-exported here.

use super::error::{ToolError, ToolErrorKind};
use super::ignore::Ignores;
use std::ffi::OsString;
use std::fs::{self, FileType};
use std::path::{Path, PathBuf};

pub(crate) use super::ignore::Glob;

/// The kind of a directory entry; symlinks are never followed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum EntryKind {
    File,
    Dir,
    Symlink,
    Other,
}

impl EntryKind {
    fn of(ft: FileType) -> EntryKind {
        if ft.is_symlink() {
            EntryKind::Symlink
        } else if ft.is_dir() {
            EntryKind::Dir
        } else if ft.is_file() {
            EntryKind::File
        } else {
            EntryKind::Other
        }
    }
}

/// What the walker shows the visitor.
pub(crate) struct Entry<'a> {
    /// The full path: the starting directory joined with `rel`.
    pub path: &'a Path,
    /// The path relative to the starting directory, `/`-separated.
    pub rel: &'a str,
    #[cfg_attr(not(test), expect(dead_code, reason = "tests read it"))]
    pub name: &'a str,
    pub kind: EntryKind,
}

/// The visitor's answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Control {
    Continue,
    /// Do not descend into this directory (ignored for other entries).
    SkipDir,
    Stop,
}

#[derive(Default)]
pub(crate) struct WalkOptions<'a> {
    /// Entries deeper than this are not visited; `Some(1)` lists one level.
    pub max_depth: Option<usize>,
    /// Polled every few entries; when it returns true the walk ends.
    pub cancelled: Option<&'a dyn Fn() -> bool>,
}

/// How a walk ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum WalkEnd {
    Finished,
    Stopped,
    Cancelled,
}

/// A directory being walked: its remaining entries, the length of its
/// parent's relative path, and whether it pushed ignore rules.
type Frame = (std::vec::IntoIter<(OsString, FileType)>, usize, bool);

/// Walks `start` depth first, entries in byte order of their names, calling
/// `visit` for every entry that is not ignored. `root` is the workspace root:
/// when `start` is inside it, the ignore files of the directories between
/// them apply too. Unreadable subdirectories are skipped; only an unreadable
/// `start` is an error.
pub(crate) fn walk(
    root: &Path,
    start: &Path,
    options: &WalkOptions,
    visit: &mut dyn FnMut(&Entry) -> Control,
) -> Result<WalkEnd, ToolError> {
    check_dir(root, start)?;
    let (mut ignores, mut rel) = ancestor_ignores(root, start);
    let entries = read_sorted(start)?;
    let start_prefix = if rel.is_empty() { 0 } else { rel.len() + 1 };
    let pushed_rules = push_rules(&mut ignores, start, &rel, &entries);
    let mut stack: Vec<Frame> = vec![(entries.into_iter(), rel.len(), pushed_rules)];
    let mut path = start.to_path_buf();
    let cancelled = || options.cancelled.is_some_and(|c| c());
    let mut seen = 0usize;
    while let Some(frame) = stack.last_mut() {
        seen += 1;
        if seen.is_multiple_of(64) && cancelled() {
            return Ok(WalkEnd::Cancelled);
        }
        let Some((name, ft)) = frame.0.next() else {
            let (_, parent_len, pushed_rules) = stack.pop().expect("stack is not empty");
            if pushed_rules {
                ignores.sets.pop();
            }
            if !stack.is_empty() {
                path.pop();
                rel.truncate(parent_len);
            }
            continue;
        };
        if name == ".git" {
            continue;
        }
        let name_str = name.to_string_lossy();
        let parent_len = rel.len();
        if parent_len > 0 {
            rel.push('/');
        }
        rel.push_str(&name_str);
        let kind = EntryKind::of(ft);
        if ignores.is_ignored(&rel, kind == EntryKind::Dir) {
            rel.truncate(parent_len);
            continue;
        }
        path.push(&name);
        let depth = stack.len();
        let entry = Entry {
            path: &path,
            rel: &rel[start_prefix..],
            name: &name_str,
            kind,
        };
        let descend = match visit(&entry) {
            Control::Continue => {
                kind == EntryKind::Dir && options.max_depth.is_none_or(|m| depth < m)
            }
            Control::SkipDir => false,
            Control::Stop => return Ok(WalkEnd::Stopped),
        };
        if descend {
            if cancelled() {
                return Ok(WalkEnd::Cancelled);
            }
            match read_sorted(&path) {
                Ok(entries) => {
                    let pushed = push_rules(&mut ignores, &path, &rel, &entries);
                    stack.push((entries.into_iter(), parent_len, pushed));
                    continue;
                }
                Err(e) => log::debug!("walk: skipping {e}"),
            }
        }
        path.pop();
        rel.truncate(parent_len);
    }
    Ok(WalkEnd::Finished)
}

/// The rules of the directories from the top of the walk (the root when
/// `start` is inside it, else `start`) down to `start`'s parent, and the
/// path of `start` relative to that top.
fn ancestor_ignores(root: &Path, start: &Path) -> (Ignores, String) {
    let mut ignores = Ignores::default();
    let Ok(inner) = start.strip_prefix(root) else {
        return (ignores, String::new());
    };
    let (mut dir, mut rel) = (root.to_path_buf(), String::new());
    for part in inner.components() {
        ignores.push_dir(&dir, &rel, |_| true);
        dir.push(part);
        if !rel.is_empty() {
            rel.push('/');
        }
        rel.push_str(&part.as_os_str().to_string_lossy());
    }
    (ignores, rel)
}

fn push_rules(
    ignores: &mut Ignores,
    dir: &Path,
    rel: &str,
    entries: &[(OsString, FileType)],
) -> bool {
    let present = |name: &str| entries.iter().any(|(n, ft)| n == name && !ft.is_dir());
    ignores.push_dir(dir, rel, present)
}

fn read_sorted(dir: &Path) -> Result<Vec<(OsString, FileType)>, ToolError> {
    let reader = fs::read_dir(dir)
        .map_err(|e| ToolError::io(format!("cannot read directory {}: {e}", dir.display())))?;
    let mut entries: Vec<(OsString, FileType)> = reader
        .filter_map(|e| e.ok())
        .filter_map(|e| Some((e.file_name(), e.file_type().ok()?)))
        .collect();
    entries.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(entries)
}

/// Explains, for the model, why `dir` cannot be walked.
fn check_dir(root: &Path, dir: &Path) -> Result<(), ToolError> {
    let shown = display_path(root, dir);
    match fs::metadata(dir) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            Err(ToolError::not_found(format!("{shown} does not exist")))
        }
        Err(e) => Err(ToolError::io(format!("cannot read {shown}: {e}"))),
        Ok(meta) if !meta.is_dir() => Err(ToolError::new(
            ToolErrorKind::WrongType,
            format!("{shown} is a file, not a directory"),
        )),
        Ok(_) => Ok(()),
    }
}

/// `path` relative to `root` with `/` separators (`.` for the root itself),
/// or the full path when it is outside the root.
pub(crate) fn display_path(root: &Path, path: &Path) -> String {
    match path.strip_prefix(root) {
        Ok(rel) if rel.as_os_str().is_empty() => ".".to_string(),
        Ok(rel) => rel.to_string_lossy().replace('\\', "/"),
        Err(_) => path.display().to_string(),
    }
}

/// Lists one directory for the model: a header line, then directories (with
/// a trailing `/`) and then everything else, each group sorted by name.
/// Files show their size in bytes and symlinks show `@ -> target`. Entries
/// that the ignore files exclude are listed too, marked `ignored`, so the
/// model knows they exist; `.git` is left out. At most `limit` entries are
/// shown, followed by a note saying how many were not.
pub(crate) fn list_directory(root: &Path, dir: &Path, limit: usize) -> Result<String, ToolError> {
    check_dir(root, dir)?;
    let (mut ignores, rel) = ancestor_ignores(root, dir);
    let entries = read_sorted(dir)?;
    push_rules(&mut ignores, dir, &rel, &entries);
    // Each line with whether it is not a directory, to put directories first.
    let mut lines: Vec<(bool, String)> = Vec::new();
    for (name, ft) in entries.iter().filter(|(n, _)| n != ".git") {
        let (name, kind) = (name.to_string_lossy(), EntryKind::of(*ft));
        let mut notes = Vec::new();
        let mut line = match kind {
            EntryKind::Dir => format!("{name}/"),
            EntryKind::Symlink => match fs::read_link(dir.join(&*name)) {
                Ok(target) => format!("{name}@ -> {}", target.display()),
                Err(_) => format!("{name}@"),
            },
            EntryKind::File => {
                if let Ok(meta) = fs::symlink_metadata(dir.join(&*name)) {
                    let s = if meta.len() == 1 { "" } else { "s" };
                    notes.push(format!("{} byte{s}", meta.len()));
                }
                name.to_string()
            }
            EntryKind::Other => {
                notes.push("special file".to_string());
                name.to_string()
            }
        };
        let full = if rel.is_empty() {
            name.to_string()
        } else {
            format!("{rel}/{name}")
        };
        if ignores.is_ignored(&full, kind == EntryKind::Dir) {
            notes.push("ignored".to_string());
        }
        if !notes.is_empty() {
            line = format!("{line} ({})", notes.join(", "));
        }
        lines.push((kind != EntryKind::Dir, line));
    }
    lines.sort_by_key(|(not_dir, _)| *not_dir);
    let total = lines.len();
    let plural = if total == 1 { "entry" } else { "entries" };
    let mut out = format!("Directory {} ({total} {plural})", display_path(root, dir));
    if total == 0 {
        out.push_str("\n(empty directory)");
    }
    for (_, line) in lines.iter().take(limit) {
        out.push('\n');
        out.push_str(line);
    }
    if total > limit {
        out.push_str(&format!("\n… {} more entries not shown", total - limit));
    }
    Ok(out)
}

/// Files found by [`glob`], as full paths in sorted order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct GlobResult {
    pub paths: Vec<PathBuf>,
    pub truncated: bool,
}

/// Finds the files (and symlinks) under `base`, honouring ignore files, whose
/// path relative to `base` matches `pattern` with [`Glob`] semantics. A
/// pattern ending in `/` means everything below that directory, and a
/// pattern that spells out `base` itself as a prefix has it removed. At most
/// `limit` paths are returned; `truncated` says whether more exist.
pub(crate) fn glob(
    root: &Path,
    base: &Path,
    pattern: &str,
    limit: usize,
    cancelled: &dyn Fn() -> bool,
) -> Result<GlobResult, ToolError> {
    let mut pattern = pattern.trim();
    if let Ok(rest) = Path::new(pattern).strip_prefix(base) {
        pattern = rest.to_str().unwrap_or(pattern);
    }
    if pattern.is_empty() {
        return Err(ToolError::invalid("the glob pattern is empty"));
    }
    let pattern = match pattern.strip_suffix('/') {
        Some(dir) => format!("{dir}/**"),
        None => pattern.to_string(),
    };
    let matcher = Glob::new(&pattern);
    let mut result = GlobResult::default();
    let options = WalkOptions {
        cancelled: Some(cancelled),
        ..WalkOptions::default()
    };
    let end = walk(root, base, &options, &mut |entry| match entry.kind {
        EntryKind::Dir if !matcher.could_match_below(entry.rel) => Control::SkipDir,
        EntryKind::File | EntryKind::Symlink if matcher.is_match(entry.rel) => {
            if result.paths.len() >= limit {
                result.truncated = true;
                return Control::Stop;
            }
            result.paths.push(entry.path.to_path_buf());
            Control::Continue
        }
        _ => Control::Continue,
    })?;
    if end == WalkEnd::Cancelled {
        return Err(ToolError::cancelled("the glob was cancelled"));
    }
    result.paths.sort();
    Ok(result)
}

/// Renders a glob result for the model: one path per line, relative to the
/// root when inside it, and a note when the list was cut short.
pub(crate) fn render_glob(root: &Path, result: &GlobResult) -> String {
    if result.paths.is_empty() {
        return "No matching files.".to_string();
    }
    let mut out: Vec<String> = result.paths.iter().map(|p| display_path(root, p)).collect();
    if result.truncated {
        out.push(format!(
            "… results truncated at {} files; narrow the pattern",
            result.paths.len()
        ));
    }
    out.join("\n")
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A directory tree in a fresh temporary directory, removed on drop.
    pub(crate) struct Tree(pub PathBuf);

    impl Tree {
        /// Creates the empty files named in the whitespace-separated `empty`
        /// (a name ending in `/` is a directory) and the `(path, content)`
        /// files.
        pub(crate) fn new(empty: &str, files: &[(&str, &str)]) -> Tree {
            let dir = std::env::temp_dir().join(crate::util::new_id("spindle-walk-test"));
            fs::create_dir_all(&dir).unwrap();
            let empty = empty.split_whitespace().map(|path| (path, ""));
            for (path, content) in empty.chain(files.iter().copied()) {
                let full = dir.join(path);
                fs::create_dir_all(if path.ends_with('/') {
                    &full
                } else {
                    full.parent().unwrap()
                })
                .unwrap();
                if !path.ends_with('/') {
                    fs::write(&full, content).unwrap();
                }
            }
            Tree(dir)
        }
    }

    impl Drop for Tree {
        fn drop(&mut self) {
            let _ = fs::remove_dir_all(&self.0);
        }
    }

    /// What the walk visits under `start` apart from directories, relative to
    /// `start`, separated by spaces.
    pub(crate) fn files(root: &Path, start: &Path) -> String {
        let mut out = Vec::new();
        walk(root, start, &WalkOptions::default(), &mut |e| {
            if e.kind != EntryKind::Dir {
                out.push(e.rel.to_string());
            }
            Control::Continue
        })
        .unwrap();
        out.join(" ")
    }

    #[test]
    fn nested_ignore_files_override_and_ancestors_apply() {
        let tree = Tree::new(
            "a/x.txt a/b/c.txt a/b/d.txt a/b/secret/s top.txt",
            &[
                (".gitignore", "*.txt\nsecret/\n"),
                ("a/.gitignore", "!*.txt\n"),
                ("a/b/.ignore", "c.txt\n"),
            ],
        );
        let root = &tree.0;
        let all = ".gitignore a/.gitignore a/b/.ignore a/b/d.txt a/x.txt";
        assert_eq!(files(root, root), all);
        // Starting below the root, the rules of the root and of `a` still apply.
        assert_eq!(files(root, &root.join("a/b")), ".ignore d.txt");
        // With the start outside the root, only the start's own rules are read.
        assert_eq!(
            files(&root.join("elsewhere"), &root.join("a/b")),
            ".ignore d.txt secret/s"
        );
    }

    #[cfg(unix)]
    #[test]
    fn symlinks_are_reported_not_followed() {
        let tree = Tree::new("d/f.txt", &[]);
        std::os::unix::fs::symlink(&tree.0, tree.0.join("d/loop")).unwrap();
        let mut seen = Vec::new();
        walk(&tree.0, &tree.0, &WalkOptions::default(), &mut |e| {
            seen.push(format!("{}:{:?}", e.rel, e.kind));
            Control::Continue
        })
        .unwrap();
        assert_eq!(seen.join(" "), "d:Dir d/f.txt:File d/loop:Symlink");
    }

    #[test]
    fn stop_skip_depth_and_cancel() {
        let tree = Tree::new("a/1 b/2 b/3 out/4", &[(".gitignore", "out/\n")]);
        let mut seen = Vec::new();
        let end = walk(&tree.0, &tree.0, &WalkOptions::default(), &mut |e| {
            seen.push(e.rel.to_string());
            match e.name {
                "a" => Control::SkipDir,
                "2" => Control::Stop,
                _ => Control::Continue,
            }
        });
        assert_eq!(end, Ok(WalkEnd::Stopped));
        assert_eq!(seen.join(" "), ".gitignore a b b/2");
        let options = WalkOptions {
            max_depth: Some(1),
            ..Default::default()
        };
        seen.clear();
        walk(&tree.0, &tree.0, &options, &mut |e| {
            seen.push(e.rel.to_string());
            Control::Continue
        })
        .unwrap();
        assert_eq!(seen.join(" "), ".gitignore a b");
        let options = WalkOptions {
            cancelled: Some(&|| true),
            ..Default::default()
        };
        let end = walk(&tree.0, &tree.0, &options, &mut |_| Control::Continue);
        assert_eq!(end, Ok(WalkEnd::Cancelled));
        let end = walk(
            &tree.0,
            &tree.0.join("no"),
            &WalkOptions::default(),
            &mut |_| Control::Continue,
        );
        let error = end.unwrap_err();
        assert_eq!(error.kind(), ToolErrorKind::NotFound);
        assert_eq!(error.to_string(), "no does not exist");
    }

    #[cfg(unix)]
    #[test]
    fn list_directory_format_and_limit() {
        let files = [
            (".gitignore", "*.log\n"),
            ("b.txt", "hello"),
            ("a.log", "x"),
        ];
        let tree = Tree::new("src/main.rs empty/ .git/HEAD", &files);
        std::os::unix::fs::symlink("b.txt", tree.0.join("link")).unwrap();
        let text = list_directory(&tree.0, &tree.0, 100).unwrap();
        let expected = "Directory . (6 entries)\nempty/\nsrc/\n.gitignore (6 bytes)\n\
                        a.log (1 byte, ignored)\nb.txt (5 bytes)\nlink@ -> b.txt";
        assert_eq!(text, expected);
        let text = list_directory(&tree.0, &tree.0, 2).unwrap();
        assert_eq!(
            text,
            "Directory . (6 entries)\nempty/\nsrc/\n… 4 more entries not shown"
        );
        let text = list_directory(&tree.0, &tree.0.join("empty"), 10).unwrap();
        assert_eq!(text, "Directory empty (0 entries)\n(empty directory)");
        let err = list_directory(&tree.0, &tree.0.join("b.txt"), 10).unwrap_err();
        assert_eq!(err, "b.txt is a file, not a directory");
        let outside = list_directory(&tree.0.join("src"), &tree.0, 0).unwrap();
        assert!(
            outside.starts_with(&format!("Directory {} (6", tree.0.display())),
            "{outside}"
        );
    }

    #[test]
    fn glob_patterns_base_and_cap() {
        let tree = Tree::new(
            "Cargo.toml src/main.rs src/tools/walk.rs src/tools/mod.rs target/debug/x.rs tests/it.rs",
            &[(".gitignore", "target/\n")],
        );
        let root = &tree.0;
        let run = |base: &str, pattern: &str, limit: usize| {
            let result = glob(root, &root.join(base), pattern, limit, &|| false).unwrap();
            let paths: Vec<String> = result.paths.iter().map(|p| display_path(root, p)).collect();
            (paths.join(" "), result.truncated)
        };
        let all = "src/main.rs src/tools/mod.rs src/tools/walk.rs tests/it.rs";
        assert_eq!(run("", "*.rs", 100), (all.to_string(), false));
        assert_eq!(run("", "src/*.rs", 100).0, "src/main.rs");
        assert_eq!(
            run("", "src/**/*.rs", 100).0,
            "src/main.rs src/tools/mod.rs src/tools/walk.rs"
        );
        assert_eq!(
            run("src", "tools/*.rs", 100).0,
            "src/tools/mod.rs src/tools/walk.rs"
        );
        assert_eq!(
            run("", "src/tools/", 100).0,
            "src/tools/mod.rs src/tools/walk.rs"
        );
        assert_eq!(
            run("", &format!("{}/tests/*.rs", root.display()), 100).0,
            "tests/it.rs"
        );
        // An ignored directory is searched when it is the base.
        assert_eq!(run("target", "*.rs", 100).0, "target/debug/x.rs");
        assert_eq!(
            run("", "*.rs", 2),
            ("src/main.rs src/tools/mod.rs".to_string(), true)
        );

        let capped = glob(root, root, "*.rs", 2, &|| false).unwrap();
        let text =
            "src/main.rs\nsrc/tools/mod.rs\n… results truncated at 2 files; narrow the pattern";
        assert_eq!(render_glob(root, &capped), text);
        let none = glob(root, root, "*.py", 10, &|| false).unwrap();
        assert_eq!(render_glob(root, &none), "No matching files.");
        assert!(glob(root, root, " ", 10, &|| false).is_err());
        assert!(glob(root, root, "*.rs", 10, &|| true).is_err());
    }
}

//! Text search across the workspace, the engine behind the `search` tool.
//!
//! When ripgrep (`rg`) is installed it does the work, since it is fast and
//! understands regular expressions; otherwise a built-in literal search walks
//! the tree with [`walk`]. Both engines are configured to agree: they honour
//! the same ignore files (even outside a git repository), search hidden files
//! but never `.git`, skip symlinks, binary files and files over 4 MiB, and
//! print the same `path:LINE: text` lines, sorted by path (component by
//! component) and line. Setting the environment variable
//! `SPINDLE_SEARCH=builtin` makes [`ripgrep_available`] answer false, forcing
//! the built-in engine.

use super::error::ToolError;
use super::walk::{self, Control, EntryKind, Glob, WalkEnd, WalkOptions};
use std::borrow::Cow;
use std::io::{BufRead, BufReader, Read};
use std::path::Path;
use std::process::{Child, ChildStderr, ChildStdout, Command, Stdio};
use std::sync::{mpsc, OnceLock};
use std::time::Duration;

/// What to look for.
#[derive(Debug, Clone)]
pub(crate) struct SearchQuery {
    pub pattern: String,
    /// Treat `pattern` as a regular expression. Only ripgrep can; without
    /// it a pattern with no metacharacters is searched literally and any
    /// other is refused.
    pub regex: bool,
    pub case_insensitive: bool,
    /// Only files whose path relative to the search base matches this glob
    /// ([`Glob`] semantics); ignored when the base is a single file.
    pub glob: Option<String>,
    /// The cap on matching lines.
    pub max_results: usize,
}

/// The rendered answer for the model and a few facts about it.
#[derive(Debug, Clone)]
pub(crate) struct SearchResult {
    pub text: String,
    /// Matching lines shown in `text`.
    #[cfg_attr(not(test), expect(dead_code, reason = "tests read it"))]
    pub matches: usize,
    #[cfg_attr(not(test), expect(dead_code, reason = "tests read it"))]
    pub truncated: bool,
    /// `"ripgrep"` or `"builtin"`.
    #[cfg_attr(not(test), expect(dead_code, reason = "tests read it"))]
    pub engine: &'static str,
}

/// Longest line text shown, in characters.
const MAX_LINE_CHARS: usize = 300;
/// Larger files are not searched.
const MAX_FILE_BYTES: u64 = 4 * 1024 * 1024;
/// A NUL byte this early in a file marks it as binary.
const BINARY_PROBE: usize = 8 * 1024;

/// The fixed ripgrep flags. Besides the output format, they make rg agree
/// with the built-in engine: hidden files are searched (`.git` is excluded
/// by a glob added later), ignore files count outside a git repository too,
/// the user's global gitignore and config file do not, large files are
/// skipped, and sorting by path (which makes rg single-threaded) makes the
/// cut at the cap deterministic. Long lines arrive shortened to a preview.
const RG_FLAGS: &str = "--no-config --line-number --with-filename --no-heading --null \
    --color never --hidden --no-require-git --no-ignore-global --max-filesize 4M \
    --sort path --max-columns 2000 --max-columns-preview";

/// One matching line.
struct Hit {
    path: String,
    line: u64,
    text: String,
}

/// Whether ripgrep 11 or newer (the flags used here) can be run, checked
/// once per process; `SPINDLE_SEARCH=builtin` forces false.
pub(crate) fn ripgrep_available() -> bool {
    // Global: whether ripgrep is installed is the machine's, checked once.
    static AVAILABLE: OnceLock<bool> = OnceLock::new();
    *AVAILABLE.get_or_init(|| {
        if std::env::var("SPINDLE_SEARCH").is_ok_and(|v| v == "builtin") {
            return false;
        }
        let mut version = Command::new("rg");
        version.arg("--version");
        let Ok(out) = crate::process::probe::run(version, Duration::from_secs(3), 4096, None)
        else {
            return false;
        };
        let version = String::from_utf8_lossy(&out.stdout);
        let major = version
            .split_whitespace()
            .nth(1)
            .and_then(|v| v.split('.').next()?.parse().ok());
        out.status.success() && major.is_some_and(|m: u32| m >= 11)
    })
}

/// Searches the files under `base` (a directory or a single file) for the
/// query, with ripgrep when available. Paths in the answer are relative to
/// `root` when inside it. Returns an error for an empty or multi-line
/// pattern, a missing `base`, a regular expression without ripgrep, a
/// ripgrep failure, or cancellation.
pub(crate) fn search(
    root: &Path,
    base: &Path,
    query: &SearchQuery,
    cancelled: &dyn Fn() -> bool,
) -> Result<SearchResult, ToolError> {
    check_query(root, base, query)?;
    if ripgrep_available() {
        search_ripgrep(root, base, query, cancelled)
    } else {
        search_builtin(root, base, query, cancelled)
    }
}

fn check_query(root: &Path, base: &Path, query: &SearchQuery) -> Result<(), ToolError> {
    if query.pattern.is_empty() {
        return Err(ToolError::invalid("the search pattern is empty"));
    }
    if query.pattern.contains('\n') {
        return Err(ToolError::invalid(
            "the search pattern must be a single line",
        ));
    }
    if !base.exists() {
        return Err(ToolError::not_found(format!(
            "{} does not exist",
            walk::display_path(root, base)
        )));
    }
    Ok(())
}

/// The literal text a regular expression stands for, when it uses no
/// metacharacters except backslash-escaped punctuation (`foo\.rs`).
fn regex_as_literal(pattern: &str) -> Option<String> {
    let mut out = String::with_capacity(pattern.len());
    let mut chars = pattern.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => match chars.next() {
                Some(n) if n.is_ascii_punctuation() || n == ' ' => out.push(n),
                _ => return None,
            },
            '.' | '^' | '$' | '*' | '+' | '?' | '(' | ')' | '[' | ']' | '{' | '}' | '|' => {
                return None
            }
            _ => out.push(c),
        }
    }
    Some(out)
}

/// Lowercases without context rules, so that the pattern and the text fold
/// the same way; `\n` is left alone, which keeps line numbers intact.
fn fold_case(s: &str) -> String {
    if s.is_ascii() {
        s.to_ascii_lowercase()
    } else {
        s.chars().flat_map(char::to_lowercase).collect()
    }
}

/// Calls `emit` with the number and text of each line of `text` containing
/// `needle` (already folded when `fold`), in order, until it returns false.
/// The needle is looked for in the whole text at once, so lines without a
/// match cost no more than counting their newlines.
fn scan(text: &str, needle: &str, fold: bool, emit: &mut dyn FnMut(u64, &str) -> bool) {
    let folded;
    let hay = if fold {
        folded = fold_case(text);
        folded.as_str()
    } else {
        text
    };
    let (mut line_no, mut counted) = (1u64, 0usize);
    // With folding, byte offsets differ between `hay` and `text`, so a second
    // cursor walks `text` line by line to find the original line.
    let (mut orig_no, mut orig_pos) = (1u64, 0usize);
    let mut from = 0;
    while let Some(offset) = hay[from..].find(needle) {
        let at = from + offset;
        let start = hay[from..at].rfind('\n').map_or(from, |i| from + i + 1);
        line_no += hay.as_bytes()[counted..start]
            .iter()
            .filter(|&&b| b == b'\n')
            .count() as u64;
        counted = start;
        let end = hay[at..].find('\n').map_or(hay.len(), |i| at + i);
        let line = if fold {
            while orig_no < line_no {
                orig_pos = text[orig_pos..]
                    .find('\n')
                    .map_or(text.len(), |i| orig_pos + i + 1);
                orig_no += 1;
            }
            let orig_end = text[orig_pos..]
                .find('\n')
                .map_or(text.len(), |i| orig_pos + i);
            &text[orig_pos..orig_end]
        } else {
            &hay[start..end]
        };
        if !emit(line_no, line) || end >= hay.len() {
            return;
        }
        from = end + 1;
    }
}

/// A line for the model: without its line ending and at most
/// [`MAX_LINE_CHARS`] characters, with `…` when cut.
fn clip(line: &str) -> String {
    let line = line.strip_suffix('\r').unwrap_or(line);
    match line.char_indices().nth(MAX_LINE_CHARS) {
        Some((cut, _)) => format!("{}…", &line[..cut]),
        None => line.to_string(),
    }
}

/// Reads `path` into `buf` unless it is too large or not a regular file
/// (a pipe would block the search); true when it was read.
fn read_candidate(path: &Path, buf: &mut Vec<u8>) -> std::io::Result<bool> {
    let (mut file, size) = match super::bounded::open_regular(path) {
        Ok(opened) => opened,
        Err(super::bounded::ReadError::Io(err)) => return Err(err),
        Err(_) => return Ok(false),
    };
    if size > MAX_FILE_BYTES {
        return Ok(false);
    }
    buf.clear();
    (&mut file).take(MAX_FILE_BYTES + 1).read_to_end(buf)?;
    Ok(buf.len() as u64 <= MAX_FILE_BYTES)
}

/// The search without ripgrep: a literal match on each line.
fn search_builtin(
    root: &Path,
    base: &Path,
    query: &SearchQuery,
    cancelled: &dyn Fn() -> bool,
) -> Result<SearchResult, ToolError> {
    check_query(root, base, query)?;
    let literal: Cow<str> = if query.regex {
        match regex_as_literal(&query.pattern) {
            Some(literal) => Cow::Owned(literal),
            None => {
                return Err(ToolError::invalid(
                    "regular expressions need ripgrep (rg), which is not installed; \
                     search for a literal string instead",
                ))
            }
        }
    } else {
        Cow::Borrowed(&query.pattern)
    };
    let fold = query.case_insensitive;
    let needle = if fold {
        fold_case(&literal)
    } else {
        literal.into_owned()
    };
    let max = query.max_results.max(1);
    let mut hits: Vec<Hit> = Vec::new();
    let mut buf = Vec::new();
    let mut search_file = |path: &Path, hits: &mut Vec<Hit>| {
        match read_candidate(path, &mut buf) {
            Ok(true) => {}
            Ok(false) => return,
            Err(e) => return log::debug!("search: skipping {}: {e}", path.display()),
        }
        if buf[..buf.len().min(BINARY_PROBE)].contains(&0) {
            return;
        }
        let text = String::from_utf8_lossy(&buf);
        let mut shown: Option<String> = None;
        scan(&text, &needle, fold, &mut |line, s| {
            let path = shown
                .get_or_insert_with(|| walk::display_path(root, path))
                .clone();
            hits.push(Hit {
                path,
                line,
                text: clip(s),
            });
            hits.len() <= max
        });
    };
    if base.is_file() {
        search_file(base, &mut hits);
    } else {
        let filter = query.glob.as_deref().map(Glob::new);
        let options = WalkOptions {
            cancelled: Some(cancelled),
            ..WalkOptions::default()
        };
        let end = walk::walk(root, base, &options, &mut |entry| {
            let wanted = filter.as_ref().is_none_or(|g| g.is_match(entry.rel));
            match entry.kind {
                EntryKind::Dir
                    if !filter
                        .as_ref()
                        .is_none_or(|g| g.could_match_below(entry.rel)) =>
                {
                    return Control::SkipDir
                }
                EntryKind::File if wanted => search_file(entry.path, &mut hits),
                _ => {}
            }
            if hits.len() > max {
                Control::Stop
            } else {
                Control::Continue
            }
        })?;
        if end == WalkEnd::Cancelled {
            return Err(ToolError::cancelled("the search was cancelled"));
        }
    }
    Ok(render(hits, query, max, "builtin"))
}

/// Kills and reaps ripgrep however the search ends, so it never outlives it.
struct ChildGuard(Child);

impl Drop for ChildGuard {
    fn drop(&mut self) {
        if let Ok(None) = self.0.try_wait() {
            let _ = self.0.kill();
        }
        let _ = self.0.wait();
    }
}

/// Parses one line of `rg --null --line-number` output: the path, a NUL,
/// the line number, `:` and the text.
fn parse_rg_line(raw: &[u8]) -> Option<(String, u64, String)> {
    let nul = raw.iter().position(|&b| b == 0)?;
    let rest = &raw[nul + 1..];
    let colon = rest.iter().position(|&b| b == b':')?;
    let line = std::str::from_utf8(&rest[..colon]).ok()?.parse().ok()?;
    let text = rest[colon + 1..]
        .strip_suffix(b"\n")
        .unwrap_or(&rest[colon + 1..]);
    let path = String::from_utf8_lossy(&raw[..nul]).into_owned();
    Some((path, line, clip(&String::from_utf8_lossy(text))))
}

/// The search through ripgrep. Its output is read on a helper thread so that
/// this one can poll `cancelled` while rg is quiet; rg is killed as soon as
/// one match more than the cap has arrived or the search is cancelled.
fn search_ripgrep(
    root: &Path,
    base: &Path,
    query: &SearchQuery,
    cancelled: &dyn Fn() -> bool,
) -> Result<SearchResult, ToolError> {
    check_query(root, base, query)?;
    let (mut cmd, filter) = rg_command(root, base, query);
    let mut child = cmd
        .spawn()
        .map_err(|e| ToolError::io(format!("cannot run ripgrep (rg): {e}")))?;
    let stdout = child.stdout.take().expect("stdout is piped");
    let stderr = child.stderr.take().expect("stderr is piped");
    let mut guard = ChildGuard(child);
    let (rx, reader, errors) = start_rg_readers(stdout, stderr)?;
    let max = query.max_results.max(1);
    let found = Found {
        root,
        base,
        filter: filter.as_ref(),
        max,
    };
    let (hits, stopped) = found.collect(&rx, cancelled);
    if stopped {
        let _ = guard.0.kill();
    }
    let status = guard
        .0
        .wait()
        .map_err(|e| ToolError::io(format!("ripgrep failed: {e}")))?;
    drop(rx);
    let _ = reader.join();
    let stderr_text = errors.join().unwrap_or_else(|_| {
        log::warn!("search: ripgrep's error reader failed; its messages are lost");
        String::new()
    });
    if cancelled() {
        return Err(ToolError::cancelled("the search was cancelled"));
    }
    if !stopped && !matches!(status.code(), Some(0 | 1)) {
        // rg also exits with 2 when some file could not be read; the matches
        // it found are still worth showing.
        if hits.is_empty() {
            return Err(ToolError::io(if stderr_text.is_empty() {
                format!("ripgrep failed ({status})")
            } else {
                format!("ripgrep failed: {stderr_text}")
            }));
        }
        log::warn!("search: ripgrep reported errors: {stderr_text}");
    }
    Ok(render(hits, query, max, "ripgrep"))
}

/// The rg command for the query, and the glob its output is matched
/// against again (when a folder is searched with one).
fn rg_command(root: &Path, base: &Path, query: &SearchQuery) -> (Command, Option<Glob>) {
    let base_is_dir = base.is_dir();
    let mut cmd = Command::new("rg");
    cmd.args(RG_FLAGS.split_whitespace());
    if query.case_insensitive {
        cmd.arg("--ignore-case");
    }
    if !query.regex {
        cmd.arg("--fixed-strings");
    }
    // rg's `--glob` is close to ours; matching its output against our glob
    // too makes the two engines agree exactly.
    let filter = match query.glob.as_deref() {
        Some(glob) if base_is_dir => {
            let glob = glob.strip_prefix("./").unwrap_or(glob);
            cmd.arg("--glob").arg(glob);
            Some(Glob::new(glob))
        }
        _ => None,
    };
    cmd.args(["--glob", "!.git", "--regexp", &query.pattern, "--"])
        .arg(base);
    // rg anchors `--glob` patterns at its working directory.
    cmd.current_dir(if base_is_dir {
        base
    } else {
        base.parent().unwrap_or(root)
    });
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    (cmd, filter)
}

/// Starts the helper threads reading rg's output (line by line, into the
/// channel) and its errors (the first 64 KiB, as text).
#[allow(clippy::type_complexity)]
fn start_rg_readers(
    stdout: ChildStdout,
    mut stderr: ChildStderr,
) -> Result<
    (
        mpsc::Receiver<Vec<u8>>,
        std::thread::JoinHandle<()>,
        std::thread::JoinHandle<String>,
    ),
    ToolError,
> {
    let (tx, rx) = mpsc::channel::<Vec<u8>>();
    // Both helpers end when ripgrep's pipes close, which the guard's
    // kill makes sure of on every path.
    let reader = std::thread::Builder::new()
        .name("spindle-rg-out".into())
        .spawn(move || {
            let mut reader = BufReader::new(stdout);
            loop {
                let mut line = Vec::new();
                match reader.read_until(b'\n', &mut line) {
                    Ok(0) | Err(_) => break,
                    Ok(_) if tx.send(line).is_err() => break,
                    Ok(_) => {}
                }
            }
        })
        .map_err(|e| ToolError::io(format!("cannot start ripgrep's reader: {e}")))?;
    let errors = std::thread::Builder::new()
        .name("spindle-rg-err".into())
        .spawn(move || {
            let mut text = Vec::new();
            let _ = (&mut stderr).take(64 * 1024).read_to_end(&mut text);
            let _ = std::io::copy(&mut stderr, &mut std::io::sink());
            String::from_utf8_lossy(&text).trim().to_string()
        })
        .map_err(|e| ToolError::io(format!("cannot start ripgrep's reader: {e}")))?;
    Ok((rx, reader, errors))
}

/// Where rg's matches are taken to: the paths they are shown against, the
/// glob they must match again, and the cap.
struct Found<'a> {
    root: &'a Path,
    base: &'a Path,
    filter: Option<&'a Glob>,
    max: usize,
}

impl Found<'_> {
    /// Takes rg's lines as hits until its output ends, one more than the cap
    /// arrived, or the search is cancelled (then `true`: rg is to be killed).
    fn collect(
        &self,
        rx: &mpsc::Receiver<Vec<u8>>,
        cancelled: &dyn Fn() -> bool,
    ) -> (Vec<Hit>, bool) {
        let mut hits = Vec::new();
        loop {
            if cancelled() {
                return (hits, true);
            }
            let raw = match rx.recv_timeout(Duration::from_millis(20)) {
                Ok(raw) => raw,
                Err(mpsc::RecvTimeoutError::Timeout) => continue,
                Err(mpsc::RecvTimeoutError::Disconnected) => return (hits, false),
            };
            let Some((path, line, text)) = parse_rg_line(&raw) else {
                continue;
            };
            let path = Path::new(&path);
            if let Some(filter) = self.filter {
                let rel = path
                    .strip_prefix(self.base)
                    .map(|r| r.to_string_lossy())
                    .unwrap_or_else(|_| {
                        log::debug!("search: {} is outside the searched folder", path.display());
                        Default::default()
                    });
                if !filter.is_match(&rel) {
                    continue;
                }
            }
            hits.push(Hit {
                path: walk::display_path(self.root, path),
                line,
                text,
            });
            if hits.len() > self.max {
                return (hits, true);
            }
        }
    }
}

/// Formats the hits, sorted by path (component by component, as the walk
/// visits them) and line, keeping at most `max`.
fn render(
    mut hits: Vec<Hit>,
    query: &SearchQuery,
    max: usize,
    engine: &'static str,
) -> SearchResult {
    if hits.is_empty() {
        let mut text = format!("No matches for \"{}\"", query.pattern);
        if let Some(glob) = &query.glob {
            text.push_str(&format!(" in files matching \"{glob}\""));
        }
        text.push('.');
        return SearchResult {
            text,
            matches: 0,
            truncated: false,
            engine,
        };
    }
    hits.sort_by(|a, b| {
        Path::new(&a.path)
            .cmp(Path::new(&b.path))
            .then(a.line.cmp(&b.line))
    });
    let truncated = hits.len() > max;
    hits.truncate(max);
    let mut text = String::new();
    for hit in &hits {
        text.push_str(&format!("{}:{}: {}\n", hit.path, hit.line, hit.text));
    }
    if truncated {
        text.push_str(&format!(
            "… results truncated at {max} matches; narrow the search"
        ));
    } else {
        text.pop();
    }
    SearchResult {
        text,
        matches: hits.len(),
        truncated,
        engine,
    }
}

#[cfg(test)]
#[path = "search_tests.rs"]
mod tests;

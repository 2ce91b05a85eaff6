//! `apply_patch`, `delete_file` and `move_file`: changes to whole files,
//! planned first (every file read, every hunk located) and performed only
//! when the whole plan holds, so a patch with one bad hunk changes nothing.
//!
//! # The patch format
//!
//! The format Codex models are trained on:
//!
//! ```text
//! *** Begin Patch
//! *** Add File: path/new.txt
//! +first line
//! *** Update File: src/lib.rs
//! *** Move to: src/renamed.rs
//! @@ fn locate_me()
//!  unchanged context line
//! -removed line
//! +added line
//! *** End of File
//! *** Delete File: old/file.txt
//! *** End Patch
//! ```
//!
//! [`parse`] is strict and names the patch line of every error. It
//! tolerates CRLF line endings, blank lines before `*** Begin Patch` and
//! after `*** End Patch`, and, as the reference parser does: a first hunk
//! without its `@@` line, and an empty line inside a hunk (read as an empty
//! context line). A unified-diff range (`@@ -3,7 +3,8 @@ fn x()`) is
//! accepted and only the text after it is used as context.
//!
//! # Applying hunks
//!
//! [`plan`] applies the hunks of a file in order, each searched from the
//! end of the previous one:
//! - with `@@ text`, the line `text` is found first (searching forward,
//!   with the fuzz below; failing that, the first line containing `text`),
//!   then the hunk's old lines (context and removed) after it; when they
//!   are not found after it, from that line itself (models often repeat
//!   the `@@` line as the first context line);
//! - the old lines are matched exactly, then ignoring trailing whitespace,
//!   then ignoring leading and trailing whitespace, then also treating
//!   typographic dashes, quotes and spaces as their ASCII forms; when they
//!   occur more than once, **the first occurrence** after the search start
//!   is taken (give more context, or an `@@` line, to pick another);
//! - a hunk that still does not match is retried without trailing empty
//!   context lines, then fails the whole plan;
//! - `*** End of File` makes the hunk match at the very end of the file;
//! - a hunk with no old lines (only `+` lines) inserts right after its
//!   `@@` line, or at the end of the file without one.
//!
//! Matched context lines keep the file's own text (its whitespace, when the
//! match was fuzzy); added lines take the file's line ending (that of its
//! first line: LF or CRLF); the file keeps ending, or not ending, with a
//! newline.
//!
//! # Using it
//!
//! ```text
//! let patch = patch::parse(&text)?;                      // no file touched
//! let changes = patch::plan(&patch, root, cap, &|p| patch::local_read(p, cap))?;
//! // ... permission, diffs from old_text/new_text ...
//! patch::apply(&changes, &mut patch::local_write, &mut patch::local_remove,
//!              &mut patch::local_move)?;
//! ```
//!
//! `delete_file` is [`delete_plan`] then [`local_remove`]; `move_file` is
//! [`move_plan`] then [`local_move`]. Every plan resolves its paths with
//! [`paths::resolve`] and reports in [`FileChange::inside`] and
//! [`FileChange::git_internal`] whether *all* paths the change touches are
//! inside the workspace and whether any is inside a `.git` directory.

use super::bounded::{self, ReadError};
use super::paths;
use std::collections::HashMap;
use std::fs;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

/// The largest patch accepted, in bytes.
pub const PATCH_CAP: usize = 4 * 1024 * 1024;

const BEGIN: &str = "*** Begin Patch";
const END: &str = "*** End Patch";
const ADD: &str = "*** Add File:";
const UPDATE: &str = "*** Update File:";
const DELETE: &str = "*** Delete File:";
const MOVE: &str = "*** Move to:";
const END_OF_FILE: &str = "*** End of File";

/// A parsed patch: its file operations in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Patch {
    pub operations: Vec<Operation>,
}

/// One `*** Add/Update/Delete File:` section.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Operation {
    /// The path as written in the patch.
    pub path: String,
    /// The 1-based patch line of its header.
    pub line: usize,
    pub kind: OperationKind,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OperationKind {
    /// The complete content of the new file (LF line endings).
    Add {
        content: String,
    },
    Delete,
    Update {
        move_to: Option<String>,
        hunks: Vec<Hunk>,
    },
}

/// One `@@` section of an update.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hunk {
    /// The 1-based patch line where it starts.
    pub line: usize,
    /// The text after `@@`, locating the hunk.
    pub context: Option<String>,
    pub lines: Vec<HunkLine>,
    /// Marked `*** End of File`: the hunk is at the end of the file.
    pub end_of_file: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HunkLine {
    Context(String),
    Remove(String),
    Add(String),
}

/// One file changed by a plan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileChange {
    /// The file changed, resolved; for a move, the source.
    pub path: PathBuf,
    pub kind: ChangeKind,
    /// The content before (`None` for an add, and where it is not text
    /// within the cap: a symlink, a binary or very large file).
    pub old_text: Option<String>,
    /// The content after, at the destination for a move (`None` for a
    /// delete, and where `old_text` is `None` for a move).
    pub new_text: Option<String>,
    /// Every path the change touches is inside the workspace.
    pub inside: bool,
    /// Some path the change touches is inside a `.git` directory.
    pub git_internal: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ChangeKind {
    Add,
    Update,
    Delete,
    /// `to` is resolved like `path`.
    Move {
        to: PathBuf,
    },
}

impl FileChange {
    /// The paths the change touches: the file, and a move's destination.
    pub fn paths(&self) -> Vec<&Path> {
        match &self.kind {
            ChangeKind::Move { to } => vec![self.path.as_path(), to.as_path()],
            _ => vec![self.path.as_path()],
        }
    }
}

// ---------------------------------------------------------------------------
// Parsing

fn quoted(line: &str) -> String {
    let mut shown: String = line.chars().take(80).collect();
    if shown.len() < line.len() {
        shown.push('…');
    }
    format!("{shown:?}")
}

fn header_path(rest: &str, number: usize, header: &str) -> Result<String, String> {
    let path = rest.trim();
    if path.is_empty() {
        return Err(format!("line {number}: '{header}' names no path"));
    }
    Ok(path.to_string())
}

/// The text after `@@`, without a unified-diff range (`-3,7 +3,8 @@`).
fn hunk_context(rest: &str) -> Option<String> {
    let rest = rest.trim_end();
    let rest = rest.strip_prefix(' ').unwrap_or(rest);
    let is_range = |part: &str, sign: char| {
        part.strip_prefix(sign).is_some_and(|numbers| {
            !numbers.is_empty()
                && numbers.split(',').count() <= 2
                && numbers
                    .split(',')
                    .all(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
        })
    };
    let mut parts = rest.splitn(3, ' ');
    if let (Some(old), Some(new)) = (parts.next(), parts.next()) {
        if is_range(old, '-') && is_range(new, '+') {
            let after = parts.next().unwrap_or("");
            let after = after.strip_prefix("@@").unwrap_or(after).trim();
            return (!after.is_empty()).then(|| after.to_string());
        }
    }
    (!rest.is_empty()).then(|| rest.to_string())
}

/// Parses a patch. Errors name the 1-based line of the patch.
pub fn parse(text: &str) -> Result<Patch, String> {
    if text.len() > PATCH_CAP {
        return Err(format!(
            "the patch is {} bytes, more than apply_patch accepts ({PATCH_CAP} bytes); split it into several patches",
            text.len()
        ));
    }
    let lines: Vec<&str> = text
        .split('\n')
        .map(|line| line.strip_suffix('\r').unwrap_or(line))
        .collect();
    let count = lines.len();
    // `at(i)` is line i (0-based); numbers shown are 1-based.
    let at = |i: usize| lines.get(i).copied();
    let mut i = 0;
    while at(i).is_some_and(|line| line.trim().is_empty()) {
        i += 1;
    }
    match at(i) {
        Some(line) if line.trim() == BEGIN => i += 1,
        Some(line) => {
            return Err(format!(
                "line {}: the patch must start with '{BEGIN}', found {}",
                i + 1,
                quoted(line)
            ))
        }
        None => return Err(format!("the patch is empty; it must start with '{BEGIN}'")),
    }
    let mut operations = Vec::new();
    loop {
        let Some(raw) = at(i) else {
            return Err(format!(
                "line {}: the patch ends without '{END}'",
                count.max(1)
            ));
        };
        let line = raw.trim_end();
        let number = i + 1;
        if line.trim().is_empty() {
            // Blank lines between sections separate them.
            i += 1;
            continue;
        }
        if line == END {
            i += 1;
            break;
        }
        if let Some(rest) = line.strip_prefix(ADD) {
            let path = header_path(rest, number, ADD)?;
            i += 1;
            let mut content = String::new();
            while let Some(raw) = at(i) {
                if let Some(added) = raw.strip_prefix('+') {
                    content.push_str(added);
                    content.push('\n');
                    i += 1;
                } else if raw.starts_with("***") {
                    break;
                } else if raw.trim().is_empty() && next_is_header(&lines, i) {
                    // Blank lines between sections separate them.
                    i += 1;
                } else {
                    return Err(format!(
                        "line {}: expected a line starting with '+' (the content of the added file {path}) or the next '*** ' header, found {}",
                        i + 1,
                        quoted(raw)
                    ));
                }
            }
            operations.push(Operation {
                path,
                line: number,
                kind: OperationKind::Add { content },
            });
        } else if let Some(rest) = line.strip_prefix(DELETE) {
            let path = header_path(rest, number, DELETE)?;
            i += 1;
            operations.push(Operation {
                path,
                line: number,
                kind: OperationKind::Delete,
            });
        } else if let Some(rest) = line.strip_prefix(UPDATE) {
            let path = header_path(rest, number, UPDATE)?;
            i += 1;
            let mut move_to = None;
            if let Some(rest) = at(i).and_then(|l| l.trim_end().strip_prefix(MOVE)) {
                move_to = Some(header_path(rest, i + 1, MOVE)?);
                i += 1;
            }
            let hunks = parse_hunks(&lines, &mut i, &path)?;
            if hunks.is_empty() && move_to.is_none() {
                return Err(format!(
                    "line {number}: '{UPDATE} {path}' has no hunks; start each hunk with '@@' (an update without hunks is only valid with '{MOVE}')"
                ));
            }
            operations.push(Operation {
                path,
                line: number,
                kind: OperationKind::Update { move_to, hunks },
            });
        } else if line.starts_with(MOVE) {
            return Err(format!(
                "line {number}: '{MOVE}' must come right after its '{UPDATE}' line"
            ));
        } else if line.starts_with(END_OF_FILE) {
            return Err(format!(
                "line {number}: '{END_OF_FILE}' must end a hunk of an '{UPDATE}' section"
            ));
        } else if line.starts_with("***") {
            return Err(format!(
                "line {number}: unknown header {}; expected '{ADD} ', '{UPDATE} ', '{DELETE} ' or '{END}'",
                quoted(line)
            ));
        } else {
            return Err(format!(
                "line {number}: expected a file header ('{ADD} ', '{UPDATE} ', '{DELETE} ') or '{END}', found {}",
                quoted(raw)
            ));
        }
    }
    while let Some(raw) = at(i) {
        if !raw.trim().is_empty() {
            return Err(format!(
                "line {}: text after '{END}': {}",
                i + 1,
                quoted(raw)
            ));
        }
        i += 1;
    }
    if operations.is_empty() {
        return Err("the patch changes no file: add '*** Add File:', '*** Update File:' or '*** Delete File:' sections".into());
    }
    Ok(Patch { operations })
}

/// Whether the lines from `i` on are blank up to a `***` header (or the
/// end of the patch).
fn next_is_header(lines: &[&str], i: usize) -> bool {
    lines[i..]
        .iter()
        .find(|line| !line.trim().is_empty())
        .is_none_or(|line| line.starts_with("***"))
}

/// The hunks of an update section, from line `*i` to the next header.
fn parse_hunks(lines: &[&str], i: &mut usize, path: &str) -> Result<Vec<Hunk>, String> {
    let mut hunks: Vec<Hunk> = Vec::new();
    loop {
        let Some(raw) = lines.get(*i).copied() else {
            return Ok(hunks);
        };
        let number = *i + 1;
        let between = hunks.last().is_none_or(|hunk| hunk.end_of_file);
        if raw.trim().is_empty() && between {
            *i += 1;
            continue;
        }
        let mut hunk = if let Some(rest) = raw.strip_prefix("@@") {
            *i += 1;
            Hunk {
                line: number,
                context: hunk_context(rest),
                lines: Vec::new(),
                end_of_file: false,
            }
        } else if raw.starts_with("***") && !raw.trim_end().starts_with(END_OF_FILE) {
            return Ok(hunks);
        } else if hunks.is_empty() && raw.starts_with([' ', '-', '+']) {
            // The reference parser allows the first hunk without its `@@`.
            Hunk {
                line: number,
                context: None,
                lines: Vec::new(),
                end_of_file: false,
            }
        } else if raw.trim_end() == END_OF_FILE {
            return Err(format!(
                "line {number}: '{END_OF_FILE}' must follow the lines of a hunk"
            ));
        } else if hunks.last().is_some_and(|hunk| hunk.end_of_file) {
            return Err(format!(
                "line {number}: after '{END_OF_FILE}', expected '@@' or the next '*** ' header, found {}",
                quoted(raw)
            ));
        } else {
            return Err(format!(
                "line {number}: expected '@@' to start a hunk of {path}, found {}",
                quoted(raw)
            ));
        };
        while let Some(raw) = lines.get(*i).copied() {
            if raw.starts_with("@@") {
                break;
            }
            if raw.starts_with("***") {
                if raw.trim_end() == END_OF_FILE {
                    hunk.end_of_file = true;
                    *i += 1;
                }
                break;
            }
            let line = match raw.chars().next() {
                None => HunkLine::Context(String::new()),
                Some(' ') => HunkLine::Context(raw[1..].to_string()),
                Some('-') => HunkLine::Remove(raw[1..].to_string()),
                Some('+') => HunkLine::Add(raw[1..].to_string()),
                Some(_) => {
                    return Err(format!(
                        "line {}: expected a hunk line starting with ' ', '-' or '+' (or '@@' for the next hunk, or a '*** ' header), found {}",
                        *i + 1,
                        quoted(raw)
                    ))
                }
            };
            hunk.lines.push(line);
            *i += 1;
        }
        if hunk.lines.is_empty() {
            return Err(format!("line {}: the hunk of {path} is empty", hunk.line));
        }
        if !hunk
            .lines
            .iter()
            .any(|line| !matches!(line, HunkLine::Context(_)))
        {
            return Err(format!(
                "line {}: the hunk of {path} has no '-' or '+' lines, so it changes nothing",
                hunk.line
            ));
        }
        hunks.push(hunk);
    }
}

// ---------------------------------------------------------------------------
// Locating and applying hunks

/// How loosely a patch line may match a file line, tried in this order.
#[derive(Debug, Clone, Copy)]
enum Fuzz {
    Exact,
    TrimEnd,
    Trim,
    /// Trimmed, with typographic dashes, quotes and spaces as ASCII.
    Normalised,
}

const FUZZ: [Fuzz; 4] = [Fuzz::Exact, Fuzz::TrimEnd, Fuzz::Trim, Fuzz::Normalised];

fn ascii_punctuation(c: char) -> char {
    match c {
        '\u{2010}'..='\u{2015}' | '\u{2212}' => '-',
        '\u{2018}'..='\u{201B}' => '\'',
        '\u{201C}'..='\u{201F}' => '"',
        '\u{00A0}' | '\u{2002}'..='\u{200A}' | '\u{202F}' | '\u{205F}' | '\u{3000}' => ' ',
        other => other,
    }
}

fn same(fuzz: Fuzz, file: &str, patch: &str) -> bool {
    match fuzz {
        Fuzz::Exact => file == patch,
        Fuzz::TrimEnd => file.trim_end() == patch.trim_end(),
        Fuzz::Trim => file.trim() == patch.trim(),
        Fuzz::Normalised => file
            .trim()
            .chars()
            .map(ascii_punctuation)
            .eq(patch.trim().chars().map(ascii_punctuation)),
    }
}

/// A file line: its text and its ending ("\n", "\r\n", or "" for a last
/// line without one).
type Line<'a> = (&'a str, &'a str);

fn split_lines(text: &str) -> Vec<Line<'_>> {
    text.split_inclusive('\n')
        .map(|piece| {
            if let Some(line) = piece.strip_suffix("\r\n") {
                (line, "\r\n")
            } else if let Some(line) = piece.strip_suffix('\n') {
                (line, "\n")
            } else {
                (piece, "")
            }
        })
        .collect()
}

/// The first position at or after `start` where `pattern` matches, trying
/// each fuzz level over the whole range before the next; with `eof`, only
/// the position that ends at the end of the file.
fn find(lines: &[Line], pattern: &[&str], start: usize, eof: bool) -> Option<usize> {
    if pattern.len() > lines.len() {
        return None;
    }
    let last = lines.len() - pattern.len();
    let first = if eof { last.max(start) } else { start };
    if first > last {
        return None;
    }
    FUZZ.iter().find_map(|&fuzz| {
        (first..=last).find(|&at| {
            pattern
                .iter()
                .zip(&lines[at..])
                .all(|(patch, (file, _))| same(fuzz, file, patch))
        })
    })
}

fn old_side(lines: &[HunkLine]) -> Vec<&str> {
    lines
        .iter()
        .filter_map(|line| match line {
            HunkLine::Context(text) | HunkLine::Remove(text) => Some(text.as_str()),
            HunkLine::Add(_) => None,
        })
        .collect()
}

/// Where a hunk applies: the first file line its old side covers, and
/// its lines (without trailing empty context lines when those had to go).
fn locate<'h>(
    lines: &[Line],
    hunk: &'h Hunk,
    cursor: usize,
    which: &str,
) -> Result<(usize, &'h [HunkLine]), String> {
    let after = if cursor > 0 {
        format!(" after line {cursor} (where the previous hunk ended)")
    } else {
        String::new()
    };
    let mut start = cursor;
    let mut context_at = None;
    if let Some(context) = &hunk.context {
        // A whole line first; else the first line containing the text
        // (models abbreviate signatures).
        let wanted = context.trim();
        let found = find(lines, &[context.as_str()], cursor, false).or_else(|| {
            lines[cursor..]
                .iter()
                .position(|(line, _)| !wanted.is_empty() && line.contains(wanted))
                .map(|at| cursor + at)
        });
        match found {
            Some(at) => {
                context_at = Some(at);
                start = at + 1;
            }
            None => {
                return Err(format!(
                    "{which}: its '@@ {context}' line was not found in the file{after}"
                ))
            }
        }
    }
    let mut body = &hunk.lines[..];
    loop {
        let old = old_side(body);
        if old.is_empty() {
            // Only added lines: after the @@ line, or at the end.
            let at = match context_at {
                Some(_) if !hunk.end_of_file => start,
                _ => lines.len(),
            };
            return Ok((at, body));
        }
        if let Some(at) = find(lines, &old, start, hunk.end_of_file) {
            return Ok((at, body));
        }
        if let Some(at) = context_at.and_then(|c| find(lines, &old, c, hunk.end_of_file)) {
            return Ok((at, body));
        }
        match body.last() {
            Some(HunkLine::Context(text)) if text.trim().is_empty() => {
                body = &body[..body.len() - 1];
            }
            _ => break,
        }
    }
    let old = old_side(&hunk.lines);
    let mut why = if hunk.end_of_file {
        format!("{which} is marked '{END_OF_FILE}', but the file does not end with its context and removed lines")
    } else {
        format!("{which}: its context and removed lines were not found in the file{after}")
    };
    if context_at.is_some() {
        why.push_str(" following its @@ line");
    }
    if let Some(earlier) = find(lines, &old, 0, false).filter(|&at| at < start) {
        why.push_str(&format!(
            "; they occur earlier, at line {}: hunks must be in file order",
            earlier + 1
        ));
    }
    why.push_str(". The lines it expects:\n");
    for line in old.iter().take(12) {
        why.push_str(&format!("  {line}\n"));
    }
    if old.len() > 12 {
        why.push_str(&format!("  … ({} more)\n", old.len() - 12));
    }
    why.push_str("Read the file again and copy the context and removed lines exactly.");
    Err(why)
}

/// Applies the hunks of one file to its text.
fn apply_hunks(text: &str, hunks: &[Hunk], shown: &str) -> Result<String, String> {
    let lines = split_lines(text);
    let ending = lines
        .iter()
        .map(|(_, ending)| *ending)
        .find(|ending| !ending.is_empty())
        .unwrap_or("\n");
    let ends_with_newline = text.is_empty() || text.ends_with('\n');
    let mut out: Vec<Line> = Vec::with_capacity(lines.len() + 16);
    let mut cursor = 0;
    for (n, hunk) in hunks.iter().enumerate() {
        let which = format!(
            "{shown}: hunk {} of {} (patch line {})",
            n + 1,
            hunks.len(),
            hunk.line
        );
        let (at, body) = locate(&lines, hunk, cursor, &which)?;
        out.extend_from_slice(&lines[cursor..at]);
        let mut next = at;
        for line in body {
            match line {
                HunkLine::Context(_) => {
                    out.push(lines[next]);
                    next += 1;
                }
                HunkLine::Remove(_) => next += 1,
                HunkLine::Add(text) => out.push((text, ending)),
            }
        }
        cursor = next;
    }
    out.extend_from_slice(&lines[cursor..]);
    let mut result = String::with_capacity(text.len() + 256);
    for (index, (line, own)) in out.iter().enumerate() {
        result.push_str(line);
        if index + 1 < out.len() || ends_with_newline {
            result.push_str(if own.is_empty() { ending } else { own });
        }
    }
    Ok(result)
}

// ---------------------------------------------------------------------------
// Planning

fn too_large(text: &str, cap: u64) -> Option<String> {
    (text.len() as u64 > cap).then(|| {
        format!(
            "it is {} bytes, more than the file tools change ({cap} bytes); change it with a command",
            text.len()
        )
    })
}

/// Computes every change of `patch` without writing anything: every file
/// read (through `read`, which returns `None` for a missing file) and every
/// hunk located. Paths resolve against `root`; files over `cap` bytes are
/// refused. Two operations on one path, an add of an existing file, an
/// update or delete of a missing one and a move onto an existing file are
/// errors.
pub fn plan(
    patch: &Patch,
    root: &Path,
    cap: u64,
    read: &dyn Fn(&Path) -> Result<Option<String>, String>,
) -> Result<Vec<FileChange>, String> {
    let mut claimed: HashMap<PathBuf, usize> = HashMap::new();
    let mut claim = |path: &Path, line: usize| -> Result<(), String> {
        match claimed.insert(path.to_path_buf(), line) {
            Some(first) => Err(format!(
                "line {line}: {} is already changed by the operation at line {first}; give each file one operation",
                paths::display(root, path)
            )),
            None => Ok(()),
        }
    };
    let mut changes = Vec::with_capacity(patch.operations.len());
    for operation in &patch.operations {
        let line = operation.line;
        let from = paths::resolve(root, &operation.path);
        let shown = paths::display(root, &from.path);
        if from.path == paths::normalise(root) {
            return Err(format!(
                "line {line}: {:?} is the workspace itself, not a file",
                operation.path
            ));
        }
        claim(&from.path, line)?;
        let existing = |verb: &str| -> Result<Option<String>, String> {
            let text = read(&from.path)
                .map_err(|err| format!("line {line}: cannot {verb} {shown}: {err}"))?;
            if let Some(err) = text.as_deref().and_then(|text| too_large(text, cap)) {
                return Err(format!("line {line}: cannot {verb} {shown}: {err}"));
            }
            Ok(text)
        };
        let change = match &operation.kind {
            OperationKind::Add { content } => {
                if existing("add")?.is_some() {
                    return Err(format!(
                        "line {line}: cannot add {shown}: it already exists; use '{UPDATE} {}' to change it",
                        operation.path
                    ));
                }
                if let Some(err) = too_large(content, cap) {
                    return Err(format!("line {line}: cannot add {shown}: {err}"));
                }
                FileChange {
                    path: from.path.clone(),
                    kind: ChangeKind::Add,
                    old_text: None,
                    new_text: Some(content.clone()),
                    inside: from.inside,
                    git_internal: from.git_internal,
                }
            }
            OperationKind::Delete => {
                let Some(old) = existing("delete")? else {
                    return Err(format!(
                        "line {line}: cannot delete {shown}: it does not exist"
                    ));
                };
                FileChange {
                    path: from.path.clone(),
                    kind: ChangeKind::Delete,
                    old_text: Some(old),
                    new_text: None,
                    inside: from.inside,
                    git_internal: from.git_internal,
                }
            }
            OperationKind::Update { move_to, hunks } => {
                let Some(old) = existing("update")? else {
                    return Err(format!(
                        "line {line}: cannot update {shown}: it does not exist; use '{ADD} {}' to create it",
                        operation.path
                    ));
                };
                let new = apply_hunks(&old, hunks, &shown)?;
                if let Some(err) = too_large(&new, cap) {
                    return Err(format!(
                        "line {line}: cannot update {shown}: the result is too large: {err}"
                    ));
                }
                match move_to {
                    None => FileChange {
                        path: from.path.clone(),
                        kind: ChangeKind::Update,
                        old_text: Some(old),
                        new_text: Some(new),
                        inside: from.inside,
                        git_internal: from.git_internal,
                    },
                    Some(to) => {
                        let to = paths::resolve(root, to);
                        let shown_to = paths::display(root, &to.path);
                        if to.path == from.path {
                            return Err(format!(
                                "line {line}: '{MOVE}' names {shown} itself; leave the move out"
                            ));
                        }
                        claim(&to.path, line)?;
                        match read(&to.path) {
                            Ok(None) => {}
                            Ok(Some(_)) => {
                                return Err(format!(
                                    "line {line}: cannot move {shown} to {shown_to}: {shown_to} already exists"
                                ))
                            }
                            Err(err) => {
                                return Err(format!(
                                    "line {line}: cannot move {shown} to {shown_to}: {err}"
                                ))
                            }
                        }
                        FileChange {
                            path: from.path.clone(),
                            kind: ChangeKind::Move {
                                to: to.path.clone(),
                            },
                            old_text: Some(old),
                            new_text: Some(new),
                            inside: from.inside && to.inside,
                            git_internal: from.git_internal || to.git_internal,
                        }
                    }
                }
            }
        };
        changes.push(change);
    }
    Ok(changes)
}

/// The text of a regular file within `cap` bytes, when it is UTF-8.
fn text_within(path: &Path, cap: u64) -> Option<String> {
    bounded::read_capped(path, cap)
        .ok()
        .and_then(|bytes| String::from_utf8(bytes).ok())
}

/// What a file is, without following a symlink.
fn file_type(path: &Path, shown: &str) -> Result<fs::FileType, String> {
    match fs::symlink_metadata(path) {
        Ok(meta) => Ok(meta.file_type()),
        Err(err) if err.kind() == io::ErrorKind::NotFound => Err(format!("{shown} does not exist")),
        Err(err) => Err(format!("cannot inspect {shown}: {err}")),
    }
}

/// Plans `delete_file`: `given` must be a file or a symlink (removed as a
/// link), not a directory. `old_text` is its text when it is a regular
/// UTF-8 file within `cap`.
pub fn delete_plan(root: &Path, given: &str, cap: u64) -> Result<FileChange, String> {
    if given.trim().is_empty() {
        return Err("the path is empty; name the file to delete".into());
    }
    let resolved = paths::resolve(root, given);
    let shown = paths::display(root, &resolved.path);
    let kind = file_type(&resolved.path, &shown)?;
    if kind.is_dir() {
        return Err(format!(
            "{shown} is a directory; delete_file deletes files only (remove directories with run_command)"
        ));
    }
    let old_text = if kind.is_file() {
        text_within(&resolved.path, cap)
    } else {
        None
    };
    Ok(FileChange {
        path: resolved.path,
        kind: ChangeKind::Delete,
        old_text,
        new_text: None,
        inside: resolved.inside,
        git_internal: resolved.git_internal,
    })
}

/// Plans `move_file`: `from` must exist and not be a directory, `to` must
/// not exist. The texts are the file's when it is a regular UTF-8 file
/// within `cap`.
pub fn move_plan(root: &Path, from: &str, to: &str, cap: u64) -> Result<FileChange, String> {
    if from.trim().is_empty() || to.trim().is_empty() {
        return Err("name both the file to move (from) and its new path (to)".into());
    }
    let source = paths::resolve(root, from);
    let target = paths::resolve(root, to);
    let shown = paths::display(root, &source.path);
    let shown_to = paths::display(root, &target.path);
    let kind = file_type(&source.path, &shown)?;
    if kind.is_dir() {
        return Err(format!(
            "{shown} is a directory; move_file moves files only (move directories with run_command)"
        ));
    }
    if source.path == target.path {
        return Err(format!("{shown} is already at that path"));
    }
    if fs::symlink_metadata(&target.path).is_ok() {
        return Err(format!(
            "{shown_to} already exists; move_file does not replace files (delete it first if that is intended)"
        ));
    }
    let text = if kind.is_file() {
        text_within(&source.path, cap)
    } else {
        None
    };
    Ok(FileChange {
        path: source.path,
        kind: ChangeKind::Move { to: target.path },
        old_text: text.clone(),
        new_text: text,
        inside: source.inside && target.inside,
        git_internal: source.git_internal || target.git_internal,
    })
}

/// One line per change, for the model: "added a.txt", "moved a → b"…
pub fn summary(changes: &[FileChange], root: &Path) -> String {
    let mut lines = Vec::with_capacity(changes.len());
    for change in changes {
        let shown = paths::display(root, &change.path);
        lines.push(match &change.kind {
            ChangeKind::Add => format!(
                "added {shown} ({} lines)",
                change.new_text.as_deref().map_or(0, |t| t.lines().count())
            ),
            ChangeKind::Update => format!("updated {shown}"),
            ChangeKind::Delete => format!("deleted {shown}"),
            ChangeKind::Move { to } => {
                let edited = change.old_text != change.new_text;
                format!(
                    "moved {shown} → {}{}",
                    paths::display(root, to),
                    if edited { " (and updated it)" } else { "" }
                )
            }
        });
    }
    lines.join("\n")
}

// ---------------------------------------------------------------------------
// Performing

/// Performs planned changes in order: `write` for adds and updates,
/// `remove` for deletes, `rename` then `write` (the new text, at the
/// destination) for moves of a patch; a move without texts (from
/// [`move_plan`] of a non-text file) is only renamed. On an error the
/// changes before it stay made, and the message says which.
pub fn apply(
    changes: &[FileChange],
    write: &mut dyn FnMut(&Path, &str) -> Result<(), String>,
    remove: &mut dyn FnMut(&Path) -> Result<(), String>,
    rename: &mut dyn FnMut(&Path, &Path) -> Result<(), String>,
) -> Result<(), String> {
    for (index, change) in changes.iter().enumerate() {
        let path = change.path.as_path();
        let text = change.new_text.as_deref();
        let result = match (&change.kind, text) {
            (ChangeKind::Add | ChangeKind::Update, Some(text)) => write(path, text),
            (ChangeKind::Add | ChangeKind::Update, None) => {
                Err("the change has no new text".to_string())
            }
            (ChangeKind::Delete, _) => remove(path),
            (ChangeKind::Move { to }, text) => rename(path, to).and_then(|()| match text {
                Some(text) if change.old_text.is_some() => write(to, text).map_err(|err| {
                    format!(
                        "{err} (it was moved to {} but its new text was not written)",
                        to.display()
                    )
                }),
                _ => Ok(()),
            }),
        };
        if let Err(err) = result {
            let before = if index == 0 {
                "no other change was made".to_string()
            } else {
                format!(
                    "the {index} change(s) before it were made ({})",
                    changes[..index]
                        .iter()
                        .map(|c| c.path.display().to_string())
                        .collect::<Vec<_>>()
                        .join(", ")
                )
            };
            return Err(format!(
                "{}: {err}; {before}, the {} after it were not",
                path.display(),
                changes.len() - index - 1
            ));
        }
    }
    Ok(())
}

/// `read` for [`plan`] on the local disk: `None` for a missing file; an
/// error for a directory, a pipe or device, a file over `cap` bytes or
/// one that is not UTF-8.
pub fn local_read(path: &Path, cap: u64) -> Result<Option<String>, String> {
    match bounded::read_capped(path, cap) {
        Ok(bytes) => String::from_utf8(bytes).map(Some).map_err(|_| {
            "it is not UTF-8 text; apply_patch changes text files only (delete_file and move_file handle any file)".to_string()
        }),
        Err(ReadError::Missing) => Ok(None),
        Err(ReadError::Directory) => Err("it is a directory".into()),
        Err(ReadError::NotRegular) => {
            Err("it is not a regular file (a pipe, socket or device)".into())
        }
        Err(ReadError::TooLarge(size)) => Err(format!(
            "it is {size} bytes, more than the file tools change ({cap} bytes); change it with a command"
        )),
        Err(ReadError::Io(err)) => Err(format!("cannot read it: {err}")),
    }
}

/// Writes `text` to `path` on the local disk, atomically: into a temporary
/// file in the same directory, then renamed over it. Missing parent
/// directories are created; an existing file keeps its permissions; a
/// symlink is written through (the file it points to changes).
pub fn local_write(path: &Path, text: &str) -> Result<(), String> {
    use std::os::unix::fs::OpenOptionsExt;
    let is_link = fs::symlink_metadata(path).is_ok_and(|meta| meta.file_type().is_symlink());
    let path = match is_link {
        true => fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf()),
        false => path.to_path_buf(),
    };
    let (Some(dir), Some(name)) = (path.parent(), path.file_name()) else {
        return Err(format!("{} is not a file path", path.display()));
    };
    fs::create_dir_all(dir).map_err(|err| format!("cannot create {}: {err}", dir.display()))?;
    let existing = match fs::metadata(&path) {
        Ok(meta) if meta.is_dir() => {
            return Err(format!("{} is a directory", path.display()));
        }
        Ok(meta) => Some(meta.permissions()),
        Err(_) => None,
    };
    let short: String = name.to_string_lossy().chars().take(64).collect();
    let temp = dir.join(format!(".{short}.{}.tmp", crate::util::random_hex()));
    let created = fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o666)
        .open(&temp);
    let mut file = match created {
        Ok(file) => file,
        // A directory that takes no new files may still hold a writable
        // file: written in place then.
        Err(err) if err.kind() == io::ErrorKind::PermissionDenied && existing.is_some() => {
            return fs::write(&path, text)
                .map_err(|err| format!("cannot write {}: {err}", path.display()));
        }
        Err(err) => return Err(format!("cannot write {}: {err}", path.display())),
    };
    let written = (|| -> io::Result<()> {
        file.write_all(text.as_bytes())?;
        if let Some(permissions) = existing {
            file.set_permissions(permissions)?;
        }
        drop(file);
        fs::rename(&temp, &path)
    })();
    written.map_err(|err| {
        let _ = fs::remove_file(&temp);
        format!("cannot write {}: {err}", path.display())
    })
}

/// Removes a file (a symlink as a link, never what it points to); refuses
/// a directory.
pub fn local_remove(path: &Path) -> Result<(), String> {
    let kind = file_type(path, &path.display().to_string())?;
    if kind.is_dir() {
        return Err(format!(
            "{} is a directory, not a file; it was not removed",
            path.display()
        ));
    }
    fs::remove_file(path).map_err(|err| format!("cannot delete {}: {err}", path.display()))
}

/// Renames `from` to `to`, creating the destination's parent directories;
/// refuses a directory and an existing destination. Across file systems a
/// regular file is copied (with its permissions) and the original removed.
pub fn local_move(from: &Path, to: &Path) -> Result<(), String> {
    let kind = file_type(from, &from.display().to_string())?;
    if kind.is_dir() {
        return Err(format!(
            "{} is a directory, not a file; it was not moved",
            from.display()
        ));
    }
    if fs::symlink_metadata(to).is_ok() {
        return Err(format!("{} already exists", to.display()));
    }
    if let Some(dir) = to.parent() {
        fs::create_dir_all(dir).map_err(|err| format!("cannot create {}: {err}", dir.display()))?;
    }
    match fs::rename(from, to) {
        Ok(()) => Ok(()),
        Err(err) if err.kind() == io::ErrorKind::CrossesDevices && kind.is_file() => {
            fs::copy(from, to)
                .and_then(|_| fs::remove_file(from))
                .map_err(|err| format!("cannot move {} to {}: {err}", from.display(), to.display()))
        }
        Err(err) => Err(format!(
            "cannot move {} to {}: {err}",
            from.display(),
            to.display()
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CAP: u64 = 1024 * 1024;

    struct Temp(PathBuf);

    impl Temp {
        fn new(name: &str) -> Temp {
            let dir = std::env::temp_dir().join(format!(
                "spindle-patch-{name}-{}",
                crate::util::random_hex()
            ));
            fs::create_dir_all(&dir).unwrap();
            Temp(fs::canonicalize(dir).unwrap())
        }
        fn put(&self, path: &str, text: &str) {
            let path = self.0.join(path);
            fs::create_dir_all(path.parent().unwrap()).unwrap();
            fs::write(path, text).unwrap();
        }
        fn get(&self, path: &str) -> Option<String> {
            fs::read_to_string(self.0.join(path)).ok()
        }
    }

    impl Drop for Temp {
        fn drop(&mut self) {
            let _ = fs::remove_dir_all(&self.0);
        }
    }

    fn plan_local(text: &str, root: &Path) -> Result<Vec<FileChange>, String> {
        plan(&parse(text)?, root, CAP, &|path| local_read(path, CAP))
    }

    fn apply_local(changes: &[FileChange]) -> Result<(), String> {
        apply(
            changes,
            &mut local_write,
            &mut local_remove,
            &mut local_move,
        )
    }

    fn run(text: &str, root: &Path) -> Result<Vec<FileChange>, String> {
        let changes = plan_local(text, root)?;
        apply_local(&changes)?;
        Ok(changes)
    }

    /// Applies a one-file update to `text` in memory.
    fn update(text: &str, hunks: &str) -> Result<String, String> {
        let patch = parse(&format!(
            "*** Begin Patch\n*** Update File: f\n{hunks}*** End Patch\n"
        ))?;
        let root = Path::new("/nonexistent-root");
        let changes = plan(&patch, root, CAP, &|_| Ok(Some(text.to_string())))?;
        Ok(changes[0].new_text.clone().unwrap())
    }

    fn error(text: &str) -> String {
        parse(text).unwrap_err()
    }

    #[test]
    fn parse_errors_name_the_line() {
        let err = error("*** Update File: a\n@@\n-x\n+y\n*** End Patch\n");
        assert!(
            err.starts_with("line 1:") && err.contains("Begin Patch"),
            "{err}"
        );
        let err = error("*** Begin Patch\n*** Delete File: a\n");
        assert!(err.contains("without '*** End Patch'"), "{err}");
        let err = error(
            "*** Begin Patch\n*** Update File: a\n@@ fn x\n ctx\n-x\n+y\n!oops\n*** End Patch\n",
        );
        assert!(
            err.starts_with("line 7: expected a hunk line starting with ' ', '-' or '+'"),
            "{err}"
        );
        let err = error("*** Begin Patch\n*** Add File: a\n+x\nno plus\n*** End Patch\n");
        assert!(err.starts_with("line 4:") && err.contains("'+'"), "{err}");
        let err = error("*** Begin Patch\n*** Frobnicate File: a\n*** End Patch\n");
        assert!(err.starts_with("line 2: unknown header"), "{err}");
        let err = error("*** Begin Patch\n*** Update File: a\n*** End Patch\n");
        assert!(
            err.starts_with("line 2:") && err.contains("no hunks"),
            "{err}"
        );
        let err = error("*** Begin Patch\n*** Update File: a\n@@\n@@\n-x\n*** End Patch\n");
        assert!(err.starts_with("line 3:") && err.contains("empty"), "{err}");
        let err = error("*** Begin Patch\n*** Update File: a\n@@\n x\n*** End Patch\n");
        assert!(err.contains("changes nothing"), "{err}");
        let err = error("*** Begin Patch\n*** Delete File: a\n*** End Patch\nmore\n");
        assert!(err.starts_with("line 4: text after"), "{err}");
        let err = error("*** Begin Patch\n*** Delete File: a\n*** Move to: b\n*** End Patch\n");
        assert!(
            err.starts_with("line 3:") && err.contains("right after"),
            "{err}"
        );
        let err = error("*** Begin Patch\n*** Add File:  \n*** End Patch\n");
        assert!(
            err.starts_with("line 2:") && err.contains("no path"),
            "{err}"
        );
        let err = error("*** Begin Patch\n*** End Patch\n");
        assert!(err.contains("changes no file"), "{err}");
        let err = error(&format!(
            "*** Begin Patch\n*** Add File: a\n+{}\n*** End Patch",
            "x".repeat(PATCH_CAP)
        ));
        assert!(err.contains("more than apply_patch accepts"), "{err}");
    }

    #[test]
    fn parse_tolerates_crlf_blank_lines_and_a_missing_first_at() {
        let patch = parse(
            "\r\n*** Begin Patch\r\n*** Add File: a.txt\r\n+one\r\n+\r\n\r\n*** Update File: b\r\n -ctx\r\n-old\r\n+new\r\n@@ -10,3 +10,3 @@ fn main() {\r\n x\r\n+y\r\n*** End of File\r\n*** End Patch\r\n\r\n",
        )
        .unwrap();
        assert_eq!(patch.operations.len(), 2);
        assert_eq!(
            patch.operations[0].kind,
            OperationKind::Add {
                content: "one\n\n".into()
            }
        );
        assert_eq!(patch.operations[1].line, 7);
        let OperationKind::Update { move_to, hunks } = &patch.operations[1].kind else {
            panic!("not an update");
        };
        assert_eq!(move_to, &None);
        assert_eq!(hunks.len(), 2);
        assert_eq!(hunks[0].context, None);
        assert_eq!(
            hunks[0].lines,
            vec![
                HunkLine::Context("-ctx".into()),
                HunkLine::Remove("old".into()),
                HunkLine::Add("new".into())
            ]
        );
        assert_eq!(hunks[1].context.as_deref(), Some("fn main() {"));
        assert!(hunks[1].end_of_file && !hunks[0].end_of_file);
        let spaced = parse(
            "*** Begin Patch\n\n*** Update File: a\n\n@@\n-x\n+y\n*** End of File\n\n*** Delete File: b\n\n*** End Patch",
        )
        .unwrap();
        assert_eq!(spaced.operations.len(), 2);
        assert_eq!(hunk_context(" -1 +1 @@"), None);
        assert_eq!(hunk_context(" impl X"), Some("impl X".into()));
    }

    #[test]
    fn add_update_delete_and_move_in_one_patch() {
        let temp = Temp::new("all");
        let root = &temp.0;
        temp.put("src/lib.rs", "fn a() {\n    1\n}\n");
        temp.put("old.txt", "bye\n");
        temp.put("src/mv.rs", "keep\nchange me\n");
        let changes = run(
            "*** Begin Patch
*** Add File: new/dir/hello.txt
+hello
+world
*** Update File: src/lib.rs
@@ fn a() {
-    1
+    2
*** Delete File: old.txt
*** Update File: src/mv.rs
*** Move to: moved/renamed.rs
@@
 keep
-change me
+changed
*** End Patch
",
            root,
        )
        .unwrap();
        assert_eq!(temp.get("new/dir/hello.txt").unwrap(), "hello\nworld\n");
        assert_eq!(temp.get("src/lib.rs").unwrap(), "fn a() {\n    2\n}\n");
        assert_eq!(temp.get("old.txt"), None);
        assert_eq!(temp.get("src/mv.rs"), None);
        assert_eq!(temp.get("moved/renamed.rs").unwrap(), "keep\nchanged\n");
        assert_eq!(changes.len(), 4);
        assert_eq!(changes[0].kind, ChangeKind::Add);
        assert_eq!(changes[0].old_text, None);
        assert_eq!(changes[2].old_text.as_deref(), Some("bye\n"));
        assert_eq!(changes[2].new_text, None);
        assert_eq!(
            changes[3].kind,
            ChangeKind::Move {
                to: root.join("moved/renamed.rs")
            }
        );
        assert!(changes.iter().all(|c| c.inside && !c.git_internal));
        let text = summary(&changes, root);
        assert!(text.contains("added new/dir/hello.txt (2 lines)"), "{text}");
        assert!(text.contains("moved src/mv.rs → moved/renamed.rs (and updated it)"));
        // A pure rename, and absolute paths.
        let changes = run(
            &format!(
                "*** Begin Patch\n*** Update File: {}\n*** Move to: back.rs\n*** End Patch",
                root.join("moved/renamed.rs").display()
            ),
            root,
        )
        .unwrap();
        assert_eq!(changes[0].old_text, changes[0].new_text);
        assert_eq!(temp.get("back.rs").unwrap(), "keep\nchanged\n");
        assert!(!plan_local(
            "*** Begin Patch\n*** Delete File: /etc/hostname\n*** End Patch",
            root
        )
        .map(|c| c[0].inside)
        .unwrap_or(false));
    }

    #[test]
    fn hunks_apply_in_order_located_by_context() {
        let text = "fn one() {\n    x = 1;\n}\n\nfn two() {\n    x = 1;\n}\n\nfn three() {\n    x = 1;\n}\n";
        // @@ picks the second function, although the first matches too.
        let new = update(text, "@@ fn two() {\n-    x = 1;\n+    x = 2;\n").unwrap();
        assert!(new.contains("fn one() {\n    x = 1;") && new.contains("fn two() {\n    x = 2;"));
        // Without @@ the first occurrence is taken.
        let new = update(text, "@@\n-    x = 1;\n+    x = 0;\n").unwrap();
        assert!(new.starts_with("fn one() {\n    x = 0;\n}\n\nfn two() {\n    x = 1;"));
        // Two hunks: the second is searched after the first.
        let new = update(
            text,
            "@@\n-    x = 1;\n+    x = 10;\n@@\n-    x = 1;\n+    x = 20;\n",
        )
        .unwrap();
        assert!(new.contains("one() {\n    x = 10;") && new.contains("two() {\n    x = 20;"));
        assert!(new.contains("three() {\n    x = 1;"));
        // An abbreviated @@ line.
        let new = update(text, "@@ fn two\n-    x = 1;\n+    x = 2;\n").unwrap();
        assert!(new.contains("fn one() {\n    x = 1;") && new.contains("fn two() {\n    x = 2;"));
        // The @@ line repeated as the first context line.
        let new = update(
            text,
            "@@ fn three() {\n fn three() {\n-    x = 1;\n+    x = 3;\n",
        )
        .unwrap();
        assert!(new.contains("fn three() {\n    x = 3;\n}\n"));
        // Out of order: named as such.
        let err = update(
            text,
            "@@ fn three() {\n-    x = 1;\n+    x = 3;\n@@\n fn one() {\n-    x = 1;\n+    x = 9;\n",
        )
        .unwrap_err();
        assert!(
            err.contains("hunk 2 of 2") && err.contains("file order"),
            "{err}"
        );
        let err = update(text, "@@ fn four() {\n-    x = 1;\n+    x = 4;\n").unwrap_err();
        assert!(err.contains("'@@ fn four() {' line was not found"), "{err}");
        // End of File and pure additions.
        let new = update(text, "@@\n }\n+// end\n*** End of File\n").unwrap();
        assert!(new.ends_with("    x = 1;\n}\n// end\n"), "{new:?}");
        let new = update(text, "@@ fn two() {\n+    // first\n").unwrap();
        assert!(new.contains("fn two() {\n    // first\n    x = 1;"));
        let new = update("a\n", "@@\n+b\n").unwrap();
        assert_eq!(new, "a\nb\n");
        let err = update(text, "@@\n-fn one() {\n+fn uno() {\n*** End of File\n").unwrap_err();
        assert!(err.contains("End of File"), "{err}");
    }

    #[test]
    fn whitespace_fuzz_keeps_the_files_own_lines() {
        let text = "if x {\n    call(a);   \n    call(b);\n}\n";
        // Trailing whitespace differs: context keeps the file's spaces.
        let new = update(text, "@@\n     call(a);\n-    call(b);\n+    call(c);\n").unwrap();
        assert_eq!(new, "if x {\n    call(a);   \n    call(c);\n}\n");
        // Indentation differs (tabs for spaces).
        let new = update(text, "@@\n if x {\n-\tcall(a);\n+\tcall(z);\n").unwrap();
        assert_eq!(new, "if x {\n\tcall(z);\n    call(b);\n}\n");
        // Typographic quotes and dashes in the patch.
        let new = update(
            "say(\"hi\") - 1\n",
            "@@\n-say(\u{201c}hi\u{201d}) \u{2013} 1\n+ok\n",
        )
        .unwrap();
        assert_eq!(new, "ok\n");
        // An empty line before the next header, read as empty context.
        let new = update("a\nb\n", "@@\n a\n-b\n+c\n\n").unwrap();
        assert_eq!(new, "a\nc\n");
    }

    #[test]
    fn line_endings_and_the_last_newline_are_kept() {
        let new = update("one\r\ntwo\r\nthree\r\n", "@@\n one\n-two\n+2\n+2.5\n").unwrap();
        assert_eq!(new, "one\r\n2\r\n2.5\r\nthree\r\n");
        let new = update("one\ntwo", "@@\n one\n-two\n+2\n").unwrap();
        assert_eq!(new, "one\n2");
        let new = update("one\ntwo", "@@\n two\n+three\n").unwrap();
        assert_eq!(new, "one\ntwo\nthree");
        let new = update("one\r\ntwo", "@@\n-one\n").unwrap();
        assert_eq!(new, "two");
        let new = update("", "@@\n+first\n").unwrap();
        assert_eq!(new, "first\n");
        let new = update("a\nb\n", "@@\n-a\n-b\n").unwrap();
        assert_eq!(new, "");
    }

    #[test]
    fn a_bad_hunk_anywhere_changes_nothing() {
        let temp = Temp::new("bad");
        let root = &temp.0;
        temp.put("a.txt", "1\n2\n3\n");
        temp.put("b.txt", "x\ny\nz\n");
        let err = run(
            "*** Begin Patch
*** Add File: c.txt
+new
*** Update File: a.txt
@@
-1
+one
*** Update File: b.txt
@@
-x
+ex
@@
-missing
+gone
*** End Patch",
            root,
        )
        .unwrap_err();
        assert!(
            err.contains("b.txt: hunk 2 of 2 (patch line 12)") && err.contains("  missing\n"),
            "{err}"
        );
        assert_eq!(temp.get("a.txt").unwrap(), "1\n2\n3\n");
        assert_eq!(temp.get("b.txt").unwrap(), "x\ny\nz\n");
        assert_eq!(temp.get("c.txt"), None);
    }

    #[test]
    fn apply_uses_the_callbacks_in_order_and_names_what_was_done() {
        let root = Path::new("/r");
        let patch = parse(
            "*** Begin Patch\n*** Add File: a\n+a\n*** Delete File: b\n*** Update File: c\n*** Move to: d\n*** Add File: e\n+e\n*** End Patch",
        )
        .unwrap();
        let changes = plan(&patch, root, CAP, &|path| {
            Ok((path.ends_with("b") || path.ends_with("c")).then(|| "x\n".to_string()))
        })
        .unwrap();
        let log = std::cell::RefCell::new(Vec::new());
        let err = apply(
            &changes,
            &mut |path, text| {
                log.borrow_mut()
                    .push(format!("write {} {text:?}", path.display()));
                match path.ends_with("d") {
                    true => Err("disk full".into()),
                    false => Ok(()),
                }
            },
            &mut |path| {
                log.borrow_mut().push(format!("remove {}", path.display()));
                Ok(())
            },
            &mut |from, to| {
                log.borrow_mut()
                    .push(format!("rename {} {}", from.display(), to.display()));
                Ok(())
            },
        )
        .unwrap_err();
        assert_eq!(
            log.into_inner(),
            [
                "write /r/a \"a\\n\"",
                "remove /r/b",
                "rename /r/c /r/d",
                "write /r/d \"x\\n\""
            ]
        );
        assert!(
            err.starts_with("/r/c: disk full (it was moved to /r/d but its new text was not written); the 2 change(s) before it were made (/r/a, /r/b), the 1 after it were not"),
            "{err}"
        );
    }

    #[test]
    fn existence_and_duplicates_are_checked() {
        let temp = Temp::new("exist");
        let root = &temp.0;
        temp.put("a.txt", "a\n");
        temp.put("b.txt", "b\n");
        let plan = |text: &str| plan_local(text, root).unwrap_err();
        let err = plan("*** Begin Patch\n*** Add File: a.txt\n+x\n*** End Patch");
        assert!(
            err.starts_with("line 2: cannot add a.txt: it already exists"),
            "{err}"
        );
        let err =
            plan("*** Begin Patch\n*** Update File: a.txt\n*** Move to: b.txt\n*** End Patch");
        assert!(err.contains("b.txt already exists"), "{err}");
        let err = plan("*** Begin Patch\n*** Update File: nope.txt\n@@\n-a\n+b\n*** End Patch");
        assert!(err.contains("nope.txt: it does not exist"), "{err}");
        let err = plan("*** Begin Patch\n*** Delete File: nope.txt\n*** End Patch");
        assert!(err.contains("cannot delete nope.txt"), "{err}");
        let err = plan("*** Begin Patch\n*** Delete File: a.txt\n*** Add File: ./x/../a.txt\n+a\n*** End Patch");
        assert!(
            err.starts_with("line 3: a.txt is already changed by the operation at line 2"),
            "{err}"
        );
        let err = plan("*** Begin Patch\n*** Update File: a.txt\n*** Move to: c.txt\n*** Add File: c.txt\n+c\n*** End Patch");
        assert!(err.contains("c.txt is already changed"), "{err}");
        fs::create_dir(root.join("dir")).unwrap();
        let err = plan("*** Begin Patch\n*** Delete File: dir\n*** End Patch");
        assert!(err.contains("directory"), "{err}");
        fs::write(root.join("latin1.txt"), b"caf\xe9\n").unwrap();
        let err = plan("*** Begin Patch\n*** Update File: latin1.txt\n@@\n-x\n+y\n*** End Patch");
        assert!(err.contains("not UTF-8"), "{err}");
        let big = "x".repeat(100);
        temp.put("big.txt", &big);
        let err = plan_with_cap(
            root,
            50,
            "*** Begin Patch\n*** Update File: big.txt\n@@\n-x\n+y\n*** End Patch",
        )
        .unwrap_err();
        assert!(err.contains("more than the file tools change"), "{err}");
        assert_eq!(temp.get("a.txt").unwrap(), "a\n");
    }

    fn plan_with_cap(root: &Path, cap: u64, text: &str) -> Result<Vec<FileChange>, String> {
        plan(&parse(text)?, root, cap, &|path| local_read(path, cap))
    }

    #[test]
    fn delete_file_removes_files_and_links_only() {
        let temp = Temp::new("delete");
        let root = &temp.0;
        temp.put("dir/inner.txt", "in\n");
        let err = delete_plan(root, "dir", CAP).unwrap_err();
        assert!(err.contains("is a directory"), "{err}");
        assert!(local_remove(&root.join("dir")).is_err());
        assert!(delete_plan(root, "missing", CAP)
            .unwrap_err()
            .contains("does not exist"));
        std::os::unix::fs::symlink(root.join("dir/inner.txt"), root.join("link")).unwrap();
        let change = delete_plan(root, "link", CAP).unwrap();
        assert_eq!(change.old_text, None);
        local_remove(&change.path).unwrap();
        assert!(fs::symlink_metadata(root.join("link")).is_err());
        assert_eq!(temp.get("dir/inner.txt").unwrap(), "in\n");
        // A link to a directory is a link, removed as such.
        std::os::unix::fs::symlink(root.join("dir"), root.join("dirlink")).unwrap();
        let change = delete_plan(root, "dirlink", CAP).unwrap();
        local_remove(&change.path).unwrap();
        assert!(root.join("dir/inner.txt").exists());
        let change = delete_plan(root, "dir/inner.txt", CAP).unwrap();
        assert_eq!(change.old_text.as_deref(), Some("in\n"));
        assert_eq!(change.kind, ChangeKind::Delete);
        local_remove(&change.path).unwrap();
        assert_eq!(temp.get("dir/inner.txt"), None);
    }

    #[test]
    fn move_file_renames_without_replacing() {
        let temp = Temp::new("move");
        let root = &temp.0;
        temp.put("a.sh", "#!/bin/sh\n");
        temp.put("b.txt", "b\n");
        fs::create_dir(root.join("dir")).unwrap();
        use std::os::unix::fs::PermissionsExt;
        fs::set_permissions(root.join("a.sh"), fs::Permissions::from_mode(0o755)).unwrap();
        assert!(move_plan(root, "a.sh", "b.txt", CAP)
            .unwrap_err()
            .contains("already exists"));
        assert!(move_plan(root, "dir", "dir2", CAP)
            .unwrap_err()
            .contains("directory"));
        assert!(move_plan(root, "nope", "x", CAP)
            .unwrap_err()
            .contains("does not exist"));
        assert!(local_move(&root.join("a.sh"), &root.join("b.txt")).is_err());
        let change = move_plan(root, "a.sh", "bin/tools/a.sh", CAP).unwrap();
        assert_eq!(change.old_text.as_deref(), Some("#!/bin/sh\n"));
        let ChangeKind::Move { to } = &change.kind else {
            panic!("not a move")
        };
        local_move(&change.path, to).unwrap();
        assert_eq!(temp.get("a.sh"), None);
        assert_eq!(temp.get("bin/tools/a.sh").unwrap(), "#!/bin/sh\n");
        let mode = fs::metadata(root.join("bin/tools/a.sh"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o755);
        // Moving out of the workspace is reported.
        let outside = Temp::new("move-out");
        let change = move_plan(
            root,
            "b.txt",
            &outside.0.join("b.txt").display().to_string(),
            CAP,
        )
        .unwrap();
        assert!(!change.inside);
    }

    #[test]
    fn local_write_is_atomic_keeps_modes_and_follows_links() {
        let temp = Temp::new("write");
        let root = &temp.0;
        temp.put("run.sh", "old\n");
        use std::os::unix::fs::PermissionsExt;
        fs::set_permissions(root.join("run.sh"), fs::Permissions::from_mode(0o750)).unwrap();
        local_write(&root.join("run.sh"), "new\n").unwrap();
        assert_eq!(temp.get("run.sh").unwrap(), "new\n");
        let mode = fs::metadata(root.join("run.sh"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o750);
        std::os::unix::fs::symlink(root.join("run.sh"), root.join("link.sh")).unwrap();
        local_write(&root.join("link.sh"), "through\n").unwrap();
        assert!(fs::symlink_metadata(root.join("link.sh"))
            .unwrap()
            .file_type()
            .is_symlink());
        assert_eq!(temp.get("run.sh").unwrap(), "through\n");
        local_write(&root.join("deep/er/file.txt"), "x").unwrap();
        assert_eq!(temp.get("deep/er/file.txt").unwrap(), "x");
        // No temporary files are left behind.
        let names: Vec<String> = fs::read_dir(root)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert!(names.iter().all(|n| !n.ends_with(".tmp")), "{names:?}");
        assert!(local_write(root, "x").is_err());
    }
}

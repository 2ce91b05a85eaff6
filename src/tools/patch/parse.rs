//! Reading a patch: the format, its headers and hunks.
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

use super::types::{Hunk, HunkLine, Operation, OperationKind, Patch};
use crate::tools::error::{ToolError, ToolErrorKind};

/// The largest patch accepted, in bytes.
pub(crate) const PATCH_CAP: usize = 4 * 1024 * 1024;

const BEGIN: &str = "*** Begin Patch";
const END: &str = "*** End Patch";
pub(super) const ADD: &str = "*** Add File:";
pub(super) const UPDATE: &str = "*** Update File:";
const DELETE: &str = "*** Delete File:";
pub(super) const MOVE: &str = "*** Move to:";
pub(super) const END_OF_FILE: &str = "*** End of File";

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
pub(crate) fn parse(text: &str) -> Result<Patch, ToolError> {
    if text.len() > PATCH_CAP {
        return Err(ToolError::new(
            ToolErrorKind::TooLarge,
            format!(
                "the patch is {} bytes, more than apply_patch accepts ({PATCH_CAP} bytes); split it into several patches",
                text.len()
            ),
        ));
    }
    // Whatever else is wrong is the patch's own form.
    parse_lines(text).map_err(ToolError::invalid)
}

fn parse_lines(text: &str) -> Result<Patch, String> {
    let lines: Vec<&str> = text
        .split('\n')
        .map(|line| line.strip_suffix('\r').unwrap_or(line))
        .collect();
    let count = lines.len();
    // `at(i)` is line i (0-based); numbers shown are 1-based.
    let at = |i: usize| lines.get(i).copied();
    let mut i = after_begin(&lines)?;
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
        let (path, kind) = if let Some(rest) = line.strip_prefix(ADD) {
            let path = header_path(rest, number, ADD)?;
            i += 1;
            let content = added_content(&lines, &mut i, &path)?;
            (path, OperationKind::Add { content })
        } else if let Some(rest) = line.strip_prefix(DELETE) {
            let path = header_path(rest, number, DELETE)?;
            i += 1;
            (path, OperationKind::Delete)
        } else if let Some(rest) = line.strip_prefix(UPDATE) {
            let path = header_path(rest, number, UPDATE)?;
            i += 1;
            let kind = update(&lines, &mut i, number, &path)?;
            (path, kind)
        } else {
            return Err(not_a_header(line, raw, number));
        };
        operations.push(Operation {
            path,
            line: number,
            kind,
        });
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

/// The index of the line after `*** Begin Patch` (blank lines before it
/// are skipped).
fn after_begin(lines: &[&str]) -> Result<usize, String> {
    let at = |i: usize| lines.get(i).copied();
    let mut i = 0;
    while at(i).is_some_and(|line| line.trim().is_empty()) {
        i += 1;
    }
    match at(i) {
        Some(line) if line.trim() == BEGIN => Ok(i + 1),
        Some(line) => Err(format!(
            "line {}: the patch must start with '{BEGIN}', found {}",
            i + 1,
            quoted(line)
        )),
        None => Err(format!("the patch is empty; it must start with '{BEGIN}'")),
    }
}

/// The content of an added file: its `+` lines from `i` up to the next
/// header.
fn added_content(lines: &[&str], i: &mut usize, path: &str) -> Result<String, String> {
    let mut content = String::new();
    while let Some(raw) = lines.get(*i).copied() {
        if let Some(added) = raw.strip_prefix('+') {
            content.push_str(added);
            content.push('\n');
            *i += 1;
        } else if raw.starts_with("***") {
            break;
        } else if raw.trim().is_empty() && next_is_header(lines, *i) {
            // Blank lines between sections separate them.
            *i += 1;
        } else {
            return Err(format!(
                "line {}: expected a line starting with '+' (the content of the added file {path}) or the next '*** ' header, found {}",
                *i + 1,
                quoted(raw)
            ));
        }
    }
    Ok(content)
}

/// An update section from `i`: its optional `*** Move to:` and its hunks.
fn update(
    lines: &[&str],
    i: &mut usize,
    number: usize,
    path: &str,
) -> Result<OperationKind, String> {
    let mut move_to = None;
    if let Some(rest) = lines.get(*i).and_then(|l| l.trim_end().strip_prefix(MOVE)) {
        move_to = Some(header_path(rest, *i + 1, MOVE)?);
        *i += 1;
    }
    let hunks = parse_hunks(lines, i, path)?;
    if hunks.is_empty() && move_to.is_none() {
        return Err(format!(
            "line {number}: '{UPDATE} {path}' has no hunks; start each hunk with '@@' (an update without hunks is only valid with '{MOVE}')"
        ));
    }
    Ok(OperationKind::Update { move_to, hunks })
}

/// The error for a line where a file header or `*** End Patch` belongs.
fn not_a_header(line: &str, raw: &str, number: usize) -> String {
    if line.starts_with(MOVE) {
        format!("line {number}: '{MOVE}' must come right after its '{UPDATE}' line")
    } else if line.starts_with(END_OF_FILE) {
        format!("line {number}: '{END_OF_FILE}' must end a hunk of an '{UPDATE}' section")
    } else if line.starts_with("***") {
        format!(
            "line {number}: unknown header {}; expected '{ADD} ', '{UPDATE} ', '{DELETE} ' or '{END}'",
            quoted(line)
        )
    } else {
        format!(
            "line {number}: expected a file header ('{ADD} ', '{UPDATE} ', '{DELETE} ') or '{END}', found {}",
            quoted(raw)
        )
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    fn error(text: &str) -> String {
        let error = parse(text).unwrap_err();
        assert_eq!(
            error.kind(),
            crate::tools::error::ToolErrorKind::InvalidArguments
        );
        error.to_string()
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
        let err = parse(&format!(
            "*** Begin Patch\n*** Add File: a\n+{}\n*** End Patch",
            "x".repeat(PATCH_CAP)
        ))
        .unwrap_err();
        assert_eq!(err.kind(), crate::tools::error::ToolErrorKind::TooLarge);
        assert!(
            err.to_string().contains("more than apply_patch accepts"),
            "{err}"
        );
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
}

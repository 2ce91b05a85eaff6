//! The file tools: read, write and edit. Text files go through the editor
//! when it offers `fs/read_text_file` / `fs/write_text_file`, so the model
//! sees unsaved changes and the editor shows its own edits; files that are
//! not UTF-8 stay on the local path and keep their bytes exactly.

use super::bounded::{self, FileLimits, ReadError};
use super::endings;
use super::error::{ToolError, ToolErrorKind};
use super::matching;
use std::path::Path;

/// Default number of lines `read_file` returns.
pub(crate) const READ_LINE_DEFAULT: usize = 2000;

/// The editor's file access, when the client offers it.
pub(crate) trait EditorFiles {
    fn can_read(&self) -> bool;
    fn can_write(&self) -> bool;
    /// The file's text as the editor has it (possibly unsaved).
    fn read_text(&self, path: &Path) -> Result<String, String>;
    /// Writes through the editor; returns once the client acknowledged.
    fn write_text(&self, path: &Path, content: &str) -> Result<(), String>;
}

/// No editor access: everything is local.
#[cfg(test)]
pub(crate) struct LocalOnly;

#[cfg(test)]
impl EditorFiles for LocalOnly {
    fn can_read(&self) -> bool {
        false
    }
    fn can_write(&self) -> bool {
        false
    }
    fn read_text(&self, _: &Path) -> Result<String, String> {
        Err("no editor file access".into())
    }
    fn write_text(&self, _: &Path, _: &str) -> Result<(), String> {
        Err("no editor file access".into())
    }
}

/// What a file held before a change, as far as the tools care.
enum Current {
    Missing,
    Text(String),
    /// Not UTF-8 (or binary): only byte-exact local operations apply.
    Bytes(Vec<u8>),
}

fn looks_binary(bytes: &[u8]) -> bool {
    bytes[..bytes.len().min(8192)].contains(&0)
}

/// Reads the file's current content: through the editor for text files
/// when it can, locally otherwise.
fn current(path: &Path, editor: &dyn EditorFiles, cap: u64) -> Result<Current, ToolError> {
    let local = match bounded::read_capped(path, cap) {
        Ok(bytes) => Some(bytes),
        Err(ReadError::Missing) => None,
        Err(error) => return Err(describe(path, error, cap)),
    };
    if path.is_dir() {
        return Err(ToolError::new(
            ToolErrorKind::WrongType,
            format!("{} is a directory, not a file", path.display()),
        ));
    }
    match local {
        Some(bytes) if looks_binary(&bytes) || std::str::from_utf8(&bytes).is_err() => {
            Ok(Current::Bytes(bytes))
        }
        local => {
            if editor.can_read() {
                // The editor may hold a buffer for a file not yet on disk.
                match editor.read_text(path) {
                    Ok(text) => return Ok(Current::Text(text)),
                    Err(err) if local.is_some() => return Err(ToolError::editor(err)),
                    Err(_) => return Ok(Current::Missing),
                }
            }
            Ok(match local {
                Some(bytes) => Current::Text(String::from_utf8(bytes).unwrap_or_default()),
                None => Current::Missing,
            })
        }
    }
}

/// What a person (or the model) should know about a file that could not
/// be read.
fn describe(path: &Path, error: ReadError, cap: u64) -> ToolError {
    let kind = match &error {
        ReadError::Missing => ToolErrorKind::NotFound,
        ReadError::Directory | ReadError::NotRegular => ToolErrorKind::WrongType,
        ReadError::TooLarge(_) => ToolErrorKind::TooLarge,
        ReadError::Io(_) => ToolErrorKind::Io,
    };
    let message = match error {
        ReadError::Missing => format!("{} does not exist", path.display()),
        ReadError::Directory => format!("{} is a directory, not a file", path.display()),
        ReadError::NotRegular => format!(
            "{} is not a regular file (a pipe, socket or device); the file tools read regular files only",
            path.display()
        ),
        ReadError::TooLarge(size) => format!(
            "{} is {size} bytes, more than the file tools load whole ({cap} bytes); change or inspect files this large with a command (sed, grep, head)",
            path.display(),
        ),
        ReadError::Io(err) => format!("cannot read {}: {err}", path.display()),
    };
    ToolError::new(kind, message)
}

/// Writes through the editor when it can (it creates the file as needed),
/// else locally, creating missing parent directories.
fn write(path: &Path, content: &str, editor: &dyn EditorFiles) -> Result<(), ToolError> {
    if editor.can_write() {
        return editor.write_text(path, content).map_err(ToolError::editor);
    }
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)
            .map_err(|err| ToolError::io(format!("cannot create {}: {err}", parent.display())))?;
    }
    std::fs::write(path, content)
        .map_err(|err| ToolError::io(format!("cannot write {}: {err}", path.display())))
}

/// The result of `read_file`.
pub(crate) struct ReadResult {
    pub text: String,
}

/// Reads lines `start_line..start_line + line_count` (1-based), numbered
/// like `cat -n`, with a note when more remains.
pub(crate) fn read_file(
    path: &Path,
    start_line: Option<usize>,
    line_count: Option<usize>,
    editor: &dyn EditorFiles,
    limits: FileLimits,
) -> Result<ReadResult, ToolError> {
    let start = start_line.unwrap_or(1).max(1);
    let count = line_count.unwrap_or(READ_LINE_DEFAULT).max(1);
    // A file too large to hold is read from disk as a stream of lines.
    match bounded::open_regular(path) {
        Ok((_, size)) if size > limits.whole => {
            return read_large(path, start, count, size, limits);
        }
        Err(ReadError::Missing) | Ok(_) => {}
        Err(error) => return Err(describe(path, error, limits.whole)),
    }
    let text = match current(path, editor, limits.whole)? {
        Current::Missing => {
            return Err(ToolError::not_found(format!(
                "{} does not exist",
                path.display()
            )))
        }
        Current::Bytes(bytes) if looks_binary(&bytes) => {
            return Err(ToolError::new(
                ToolErrorKind::Binary,
                format!(
                    "{} is a binary file ({} bytes); read_file only shows text",
                    path.display(),
                    bytes.len()
                ),
            ))
        }
        Current::Bytes(bytes) => {
            let mut text = String::from_utf8_lossy(&bytes).into_owned();
            text.insert_str(
                0,
                "[This file is not valid UTF-8; invalid bytes are shown as \u{fffd}.]\n",
            );
            text
        }
        Current::Text(text) => text,
    };
    let total = text.lines().count();
    if total == 0 {
        return Ok(ReadResult {
            text: "[The file is empty.]".into(),
        });
    }
    if start > total {
        return Err(ToolError::invalid(format!(
            "start_line {start} is past the end of the file ({total} lines)"
        )));
    }
    let mut out = String::new();
    let mut shown_last = start - 1;
    for (index, line) in text.lines().enumerate().skip(start - 1).take(count) {
        if out.len() + line.len() + 8 > limits.page {
            break;
        }
        out.push_str(&format!("{:>6}\t{}\n", index + 1, line));
        shown_last = index + 1;
    }
    if shown_last < start {
        // A single line longer than the cap: show its beginning.
        let line = text.lines().nth(start - 1).unwrap_or("");
        let mut end = limits.page.saturating_sub(200).min(line.len());
        while !line.is_char_boundary(end) {
            end -= 1;
        }
        out.push_str(&format!("{:>6}\t{}…\n", start, &line[..end]));
        out.push_str(&format!(
            "[Line {start} is {} bytes long; only its beginning is shown.]\n",
            line.len()
        ));
        shown_last = start;
    }
    if shown_last < total {
        out.push_str(&format!(
            "[Showing lines {start}-{shown_last} of {total}. Use start_line={} to read more.]\n",
            shown_last + 1
        ));
    }
    Ok(ReadResult { text: out })
}

/// `read_file` of a file over `bounded::WHOLE_READ_CAP`: the window of
/// lines streamed from disk, memory within the output cap.
fn read_large(
    path: &Path,
    start: usize,
    count: usize,
    size: u64,
    limits: FileLimits,
) -> Result<ReadResult, ToolError> {
    let window = bounded::stream_lines(path, start, count, limits.page)
        .map_err(|error| describe(path, error, limits.whole))?;
    if window.binary {
        return Err(ToolError::new(
            ToolErrorKind::Binary,
            format!(
                "{} is a binary file ({size} bytes); read_file only shows text",
                path.display()
            ),
        ));
    }
    if window.last == 0 {
        return Err(ToolError::invalid(format!(
            "start_line {start} is past the end of the file or its lines are too long to show"
        )));
    }
    let mut text = window.text;
    if window.more {
        text.push_str(&format!(
            "[Showing lines {start}-{} of a {size}-byte file. Use start_line={} to read more.]\n",
            window.last,
            window.last + 1
        ));
    }
    Ok(ReadResult { text })
}

/// What a change did, for the editor's diff view and the model.
pub(crate) struct Change {
    /// `None` for a new file.
    pub old_text: Option<String>,
    pub new_text: String,
    pub summary: String,
}

/// What `write_file` would change, computed without writing: for the
/// diff shown when the user is asked.
pub(crate) fn preview_write(
    path: &Path,
    content: &str,
    editor: &dyn EditorFiles,
    limits: FileLimits,
) -> Result<Change, ToolError> {
    let mut new_text = content.to_string();
    let old_text = match bounded::open_regular(path) {
        Ok((_, size)) if size > limits.edit => {
            Some(format!("[the previous {size} bytes are not shown]\n"))
        }
        // A file that is not on disk is new: the editor is not asked to
        // read it (a client answers such a read with an error it shows).
        Err(ReadError::Missing) if std::fs::symlink_metadata(path).is_err() => None,
        _ => match current(path, editor, limits.edit)? {
            Current::Missing => None,
            Current::Text(text) => {
                // An existing file keeps its CRLF endings and its BOM.
                new_text = endings::conform(&text, content);
                Some(text)
            }
            Current::Bytes(bytes) => Some(String::from_utf8_lossy(&bytes).into_owned()),
        },
    };
    Ok(Change {
        old_text,
        new_text,
        summary: String::new(),
    })
}

/// What `edit_file` would change, computed without writing.
pub(crate) fn preview_edit(
    path: &Path,
    edits: &[Edit],
    editor: &dyn EditorFiles,
    limits: FileLimits,
) -> Result<Change, ToolError> {
    if edits.is_empty() {
        return Err(ToolError::invalid("no edits given"));
    }
    let (old, new) = match current(path, editor, limits.edit)? {
        Current::Missing => {
            return Err(ToolError::not_found(format!(
                "{} does not exist; use write_file to create it",
                path.display()
            )))
        }
        Current::Text(text) => {
            let (new_text, _, _) = apply_text_edits(&text, edits)?;
            (text, new_text)
        }
        Current::Bytes(bytes) => {
            let applied = apply_byte_edits(&bytes, edits)?;
            (
                String::from_utf8_lossy(&bytes).into_owned(),
                String::from_utf8_lossy(&applied.content).into_owned(),
            )
        }
    };
    Ok(Change {
        old_text: Some(old),
        new_text: new,
        summary: String::new(),
    })
}

/// Creates or overwrites a file.
pub(crate) fn write_file(
    path: &Path,
    content: &str,
    editor: &dyn EditorFiles,
    limits: FileLimits,
) -> Result<Change, ToolError> {
    // A file too large to load is overwritten without its old content in
    // the diff.
    let mut change = preview_write(path, content, editor, limits)?;
    write(path, &change.new_text, editor)?;
    let lines = content.lines().count();
    change.summary = match &change.old_text {
        None => format!("Created {} ({lines} lines).", path.display()),
        Some(_) => format!("Overwrote {} ({lines} lines).", path.display()),
    };
    Ok(change)
}

/// One search/replace edit.
#[derive(Debug, Clone, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Edit {
    pub old: String,
    pub new: String,
    #[serde(default)]
    pub replace_all: bool,
}

/// Applies every edit in order, all or nothing. Returns the first line
/// touched (1-based) along with the change.
pub(crate) fn edit_file(
    path: &Path,
    edits: &[Edit],
    editor: &dyn EditorFiles,
    limits: FileLimits,
) -> Result<(Change, usize), ToolError> {
    if edits.is_empty() {
        return Err(ToolError::invalid("no edits given"));
    }
    match current(path, editor, limits.edit)? {
        Current::Missing => Err(ToolError::not_found(format!(
            "{} does not exist; use write_file to create it",
            path.display()
        ))),
        Current::Text(text) => {
            let (new_text, first_line, applied) = apply_text_edits(&text, edits)?;
            write(path, &new_text, editor)?;
            Ok((
                Change {
                    summary: format!(
                        "Edited {} ({}).{}",
                        path.display(),
                        crate::util::count(edits.len(), "edit", "edits"),
                        applied.told()
                    ),
                    old_text: Some(text),
                    new_text,
                },
                first_line,
            ))
        }
        Current::Bytes(bytes) => {
            // Not UTF-8: edit the bytes themselves, so everything the edits
            // do not touch stays exactly as it was, and write locally.
            let applied = apply_byte_edits(&bytes, edits)?;
            let (new_bytes, first_line) = (applied.content, applied.first_line);
            std::fs::write(path, &new_bytes)
                .map_err(|err| ToolError::io(format!("cannot write {}: {err}", path.display())))?;
            Ok((
                Change {
                    summary: format!(
                        "Edited {} ({}); the file is not UTF-8 and its other bytes were kept as they were.",
                        path.display(),
                        crate::util::count(edits.len(), "edit", "edits")
                    ),
                    old_text: Some(String::from_utf8_lossy(&bytes).into_owned()),
                    new_text: String::from_utf8_lossy(&new_bytes).into_owned(),
                },
                first_line,
            ))
        }
    }
}

/// What a list of edits made of a file: its new bytes, the first line
/// touched (1-based), and a note for each edit whose old text was found
/// by forgiving a slip.
struct Applied {
    content: Vec<u8>,
    first_line: usize,
    notes: Vec<String>,
}

impl Applied {
    /// The summary's sentence naming the forgiven slips, if any.
    fn told(&self) -> String {
        self.notes.iter().map(|note| format!(" {note}")).collect()
    }
}

pub(crate) fn apply_edits(text: &str, edits: &[Edit]) -> Result<(String, usize), ToolError> {
    apply_text_edits(text, edits).map(|(text, line, _)| (text, line))
}

fn apply_text_edits(text: &str, edits: &[Edit]) -> Result<(String, usize, Applied), ToolError> {
    let mut applied = apply_byte_edits(text.as_bytes(), edits)?;
    // Replacing valid UTF-8 with valid UTF-8 at UTF-8 match positions keeps
    // the text valid.
    let bytes = std::mem::take(&mut applied.content);
    String::from_utf8(bytes)
        .map(|text| (text, applied.first_line, applied))
        .map_err(|_| ToolError::invalid("the edit produced invalid UTF-8"))
}

/// Applies the edits to the bytes: the one function that decides what an
/// edit writes, for the diff shown, the checkpoint and the file alike.
fn apply_byte_edits(original: &[u8], edits: &[Edit]) -> Result<Applied, ToolError> {
    let mut content = original.to_vec();
    let mut first_line = usize::MAX;
    let mut notes = Vec::new();
    for (number, edit) in edits.iter().enumerate() {
        let which = if edits.len() > 1 {
            format!("edit {} of {}: ", number + 1, edits.len())
        } else {
            String::new()
        };
        if edit.old.is_empty() {
            return Err(ToolError::invalid(format!(
                "{which}\"old\" is empty; give the exact text to replace (use write_file for new files)"
            )));
        }
        if edit.old == edit.new {
            return Err(ToolError::invalid(format!(
                "{which}\"old\" and \"new\" are the same; nothing would change"
            )));
        }
        let located = match matching::locate(&content, &edit.old, &edit.new, edit.replace_all) {
            Ok(located) => located,
            Err(refusal) => return Err(refused(&which, number, &content, edit, refusal)),
        };
        if let Some(slip) = located.slip {
            let whose = if edits.len() > 1 {
                format!("Edit {}: the old text", number + 1)
            } else {
                "The old text".into()
            };
            notes.push(format!("{whose} {}.", slip.describe()));
        }
        first_line = first_line.min(matching::line_at(&content, located.spans[0].start));
        content = matching::splice(&content, &located.spans);
    }
    Ok(Applied {
        content,
        first_line,
        notes,
    })
}

/// The error for an edit whose old text was not found once.
fn refused(
    which: &str,
    number: usize,
    content: &[u8],
    edit: &Edit,
    refusal: matching::Refusal,
) -> ToolError {
    let kind = match &refusal {
        matching::Refusal::Ambiguous { .. } | matching::Refusal::Crowded { .. } => {
            ToolErrorKind::NotUnique
        }
        matching::Refusal::TooLarge { .. } => ToolErrorKind::TooLarge,
        matching::Refusal::Missing => ToolErrorKind::NoMatch,
    };
    let message = match refusal {
        matching::Refusal::Ambiguous {
            ranges,
            count,
            slip: None,
        } => {
            let lines: Vec<String> = ranges.iter().map(|(first, _)| first.to_string()).collect();
            format!(
                "{which}the \"old\" text occurs {count} times (lines {}). Nothing was changed. Include more surrounding lines to make it unique, or set replace_all to replace every occurrence.",
                lines.join(", ")
            )
        }
        matching::Refusal::Ambiguous {
            ranges,
            count,
            slip: Some(slip),
        } => {
            let lines: Vec<String> = ranges
                .iter()
                .map(|&(first, last)| {
                    if first == last {
                        format!("line {first}")
                    } else {
                        format!("lines {first}-{last}")
                    }
                })
                .collect();
            format!(
                "{which}the \"old\" text is not in the file as given; {} it matches {count} places ({}). Nothing was changed. Copy the text exactly, with more surrounding lines, to pick one.",
                slip.describe()
                    .trim_start_matches("matched ")
                    .split(" (")
                    .next()
                    .unwrap_or_default(),
                lines.join(" and ")
            )
        }
        matching::Refusal::Crowded { places } => format!(
            "{which}the \"old\" text is not in the file as given, and its lines, indentation aside, occur in at least {places} places: too many to check. Nothing was changed. Copy the text exactly from the file."
        ),
        matching::Refusal::TooLarge { bytes } => format!(
            "{which}the edit would make the file more than {bytes} bytes (the most an edit may write is {} bytes). Nothing was changed.",
            matching::RESULT_CAP
        ),
        matching::Refusal::Missing => {
            let mut why = format!(
                "{which}the \"old\" text was not found in the file{}. Nothing was changed. Read the file again and copy the text exactly, including whitespace and indentation.",
                if number > 0 { " (after the earlier edits)" } else { "" }
            );
            if content.windows(2).any(|w| w == b"\r\n") && !edit.old.contains('\r') {
                why.push_str(
                    " Note: the file uses CRLF line endings (the text was tried with them too).",
                );
            }
            let text = String::from_utf8_lossy(content);
            let lines = matching::Lines::of(&text).texts();
            let (old, _) = matching::old_lines(&edit.old);
            why.push('\n');
            why.push_str(&matching::closest(&lines, &old));
            why
        }
    };
    ToolError::new(kind, message)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn edit(old: &str, new: &str) -> Edit {
        Edit {
            old: old.into(),
            new: new.into(),
            replace_all: false,
        }
    }

    #[test]
    fn edits_apply_in_order_all_or_nothing() {
        let (text, line) = apply_edits("a\nb\nc\n", &[edit("b", "B"), edit("c", "C")]).unwrap();
        assert_eq!(text, "a\nB\nC\n");
        assert_eq!(line, 2);
        let err = apply_edits("x x\n", &[edit("x", "y")]).unwrap_err();
        assert_eq!(err.kind(), ToolErrorKind::NotUnique);
        let err = err.to_string();
        assert!(
            err.contains("2 times") && err.contains("replace_all"),
            "{err}"
        );
        let all = apply_edits(
            "x x\n",
            &[Edit {
                replace_all: true,
                ..edit("x", "y")
            }],
        )
        .unwrap();
        assert_eq!(all.0, "y y\n");
        let err = apply_edits("abc", &[edit("b", "B"), edit("zzz", "q")]).unwrap_err();
        assert_eq!(err.kind(), ToolErrorKind::NoMatch);
        let err = err.to_string();
        assert!(
            err.contains("edit 2 of 2") && err.contains("not found"),
            "{err}"
        );
        assert_eq!(
            apply_edits("abc", &[edit("", "q")]).unwrap_err().kind(),
            ToolErrorKind::InvalidArguments
        );
        let crlf = apply_edits("a\r\nb\r\n", &[edit("a\nc", "x")])
            .unwrap_err()
            .to_string();
        assert!(crlf.contains("CRLF"), "{crlf}");
    }

    #[test]
    fn forgiven_edits_are_named_and_ambiguous_ones_refused_with_both_ranges() {
        let text = "    if a {\n        go();\n    }\n    if a {\n        go();\n    }\n";
        let err = apply_edits(text, &[edit("if a {\n    go();\n}", "x")])
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("after ignoring a change of indentation it matches 2 places (lines 1-3 and lines 4-6)"),
            "{err}"
        );
        let (_, _, applied) =
            apply_text_edits("a  \nb\n", &[edit("b", "B"), edit("a\n", "A\n")]).unwrap();
        assert_eq!(
            applied.told(),
            " Edit 2: the old text matched after ignoring trailing whitespace."
        );
    }

    #[test]
    fn the_summary_counts_edits_in_words() {
        let dir = std::env::temp_dir().join(format!("spindle-edit-count-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("a.txt");
        std::fs::write(&path, "a\nb\n").unwrap();
        let limits = FileLimits::default();
        let (one, _) = edit_file(&path, &[edit("a", "A")], &LocalOnly, limits).unwrap();
        assert!(one.summary.ends_with("(1 edit)."), "{}", one.summary);
        let two = [edit("A", "x"), edit("b", "y")];
        let (two, _) = edit_file(&path, &two, &LocalOnly, limits).unwrap();
        assert!(two.summary.ends_with("(2 edits)."), "{}", two.summary);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn edits_keep_crlf_endings_and_the_bom() {
        // `old` with bare `\n` matches CRLF lines; `new` gets CRLF.
        let (text, line) = apply_edits(
            "\u{feff}a\r\nb\r\nc\r\nd\r\n",
            &[edit("b\nc\n", "B\nC\nC2\n")],
        )
        .unwrap();
        assert_eq!(text, "\u{feff}a\r\nB\r\nC\r\nC2\r\nd\r\n");
        assert_eq!(line, 2);
        // One line changed into two in a CRLF file.
        let (text, _) = apply_edits("a\r\nb\r\n", &[edit("a", "a\nx")]).unwrap();
        assert_eq!(text, "a\r\nx\r\nb\r\n");
        // Mixed endings: the LF part matches as given and stays LF; the
        // CRLF part matches in its CRLF form; other lines are untouched.
        let mixed = "l1\nl2\nc1\r\nc2\r\nl3\n";
        let (text, _) = apply_edits(mixed, &[edit("l1\nl2", "L1\nL2")]).unwrap();
        assert_eq!(text, "L1\nL2\nc1\r\nc2\r\nl3\n");
        let (text, _) = apply_edits(mixed, &[edit("c1\nc2\n", "C1\nC2\n")]).unwrap();
        assert_eq!(text, "l1\nl2\nC1\r\nC2\r\nl3\n");
        // replace_all over the CRLF form.
        let all = Edit {
            replace_all: true,
            ..edit("x\ny", "z")
        };
        let (text, _) = apply_edits("x\r\ny\r\nx\r\ny\r\n", &[all]).unwrap();
        assert_eq!(text, "z\r\nz\r\n");
        // An edit that spells out `\r\n` itself is taken as given.
        let (text, _) = apply_edits("a\r\nb\r\n", &[edit("a\r\nb", "x\r\ny")]).unwrap();
        assert_eq!(text, "x\r\ny\r\n");
        // Bytes that are not UTF-8 take the same way.
        let bytes = apply_byte_edits(b"caf\xe9\r\nold\r\nend\r\n", &[edit("old\nend", "n\ne")])
            .unwrap()
            .content;
        assert_eq!(bytes, b"caf\xe9\r\nn\r\ne\r\n");
    }

    #[test]
    fn byte_edits_keep_other_bytes() {
        let original = b"caf\xe9 = 1\nname = old\n";
        let applied = apply_byte_edits(original, &[edit("old", "new")]).unwrap();
        assert_eq!(applied.content, b"caf\xe9 = 1\nname = new\n");
        assert_eq!(applied.first_line, 2);
    }

    #[test]
    fn read_numbers_lines_and_notes_truncation() {
        let dir = std::env::temp_dir().join(format!("spindle-files-{}", crate::util::random_hex()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("f.txt");
        std::fs::write(&path, "one\ntwo\nthree\n").unwrap();
        let all = read_file(&path, None, None, &LocalOnly, FileLimits::default())
            .unwrap()
            .text;
        assert_eq!(all, "     1\tone\n     2\ttwo\n     3\tthree\n");
        let part = read_file(&path, Some(2), Some(1), &LocalOnly, FileLimits::default())
            .unwrap()
            .text;
        assert!(part.starts_with("     2\ttwo\n"));
        assert!(part.contains("Use start_line=3"), "{part}");
        assert!(read_file(&path, Some(9), None, &LocalOnly, FileLimits::default()).is_err());
        std::fs::write(dir.join("bin"), b"\x00\x01\x02").unwrap();
        let err = read_file(
            &dir.join("bin"),
            None,
            None,
            &LocalOnly,
            FileLimits::default(),
        )
        .err()
        .unwrap();
        assert_eq!(err.kind(), ToolErrorKind::Binary);
        assert!(err.to_string().contains("binary"));
        assert!(read_file(
            &dir.join("missing"),
            None,
            None,
            &LocalOnly,
            FileLimits::default()
        )
        .is_err());
        std::fs::remove_dir_all(dir).unwrap();
    }
}

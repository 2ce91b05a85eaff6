//! Locating and applying the hunks of one file.
//!
//! # Applying hunks
//!
//! `plan` applies the hunks of a file in order, each searched from the
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
//! - each level compares the lines by a key made once per line and
//!   searches them in linear time (`matching::kmp_all`);
//! - a hunk that still does not match is retried without trailing empty
//!   context lines, then fails the whole plan, its error naming the file
//!   and hunk and showing the closest lines of the file and what differs
//!   (`matching::closest`);
//! - `*** End of File` makes the hunk match at the very end of the file;
//! - a hunk with no old lines (only `+` lines) inserts right after its
//!   `@@` line, or at the end of the file without one.
//!
//! Matched context lines keep the file's own text (its whitespace, when the
//! match was fuzzy) and its own ending; lines are compared without their
//! `\r\n` or `\n`; added lines take the file's line ending (CRLF when
//! most of its lines end so, else LF); a byte-order mark stays and is no
//! part of the first line; the file keeps ending, or not ending, with a
//! newline.

use super::parse::END_OF_FILE;
use super::types::{Hunk, HunkLine};
use crate::tools::endings::{Endings, BOM};
use crate::tools::matching;
use std::borrow::Cow;

/// How loosely a patch line may match a file line, tried in this order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fuzz {
    Exact,
    TrimEnd,
    Trim,
    /// Trimmed, with typographic dashes, quotes and spaces as ASCII.
    Normalised,
}

const FUZZ: [Fuzz; 4] = [Fuzz::Exact, Fuzz::TrimEnd, Fuzz::Trim, Fuzz::Normalised];

/// A line as `fuzz` compares it.
fn key(fuzz: Fuzz, line: &str) -> Cow<'_, str> {
    match fuzz {
        Fuzz::Exact => Cow::Borrowed(line),
        Fuzz::TrimEnd => Cow::Borrowed(line.trim_end()),
        Fuzz::Trim => Cow::Borrowed(line.trim()),
        Fuzz::Normalised => match matching::ascii_punctuation(line.trim()) {
            Cow::Borrowed(line) => Cow::Borrowed(line),
            Cow::Owned(line) => Cow::Owned(line.trim().to_string()),
        },
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
/// the position that ends at the end of the file. Each level compares the
/// lines by a key made once per line and searches them in linear time. A
/// forgiving level must find one place only: two or more there (lines
/// alike once whitespace or punctuation is ignored) end the search, so a
/// forgiven hunk never lands on the wrong one of two look-alikes.
fn find(lines: &[Line], pattern: &[&str], start: usize, eof: bool) -> Option<usize> {
    match search(lines, pattern, start, eof) {
        Search::Found(at) => Some(at),
        Search::Missing | Search::Ambiguous(_) => None,
    }
}

/// What [`find`] found, telling a miss from look-alikes.
enum Search {
    Found(usize),
    Missing,
    /// A forgiving level found this many places.
    Ambiguous(usize),
}

fn search(lines: &[Line], pattern: &[&str], start: usize, eof: bool) -> Search {
    if pattern.len() > lines.len() {
        return Search::Missing;
    }
    let last = lines.len() - pattern.len();
    let first = if eof { last.max(start) } else { start };
    if first > last {
        return Search::Missing;
    }
    for fuzz in FUZZ {
        let file: Vec<Cow<str>> = lines[first..].iter().map(|(l, _)| key(fuzz, l)).collect();
        let wanted: Vec<Cow<str>> = pattern.iter().map(|l| key(fuzz, l)).collect();
        let found = matching::kmp_all(&file, &wanted);
        match found.len() {
            0 => continue,
            1 => return Search::Found(first + found[0]),
            // The patch's own order decides between exact copies.
            _ if fuzz == Fuzz::Exact => return Search::Found(first + found[0]),
            many => return Search::Ambiguous(many),
        }
    }
    Search::Missing
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
    if let Search::Ambiguous(count) = search(lines, &old, start, hunk.end_of_file) {
        why.push_str(&format!(
            "; once whitespace and punctuation are ignored they match {count} places, and a forgiven hunk must match one: copy the lines exactly or give more context"
        ));
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
    let texts: Vec<&str> = lines.iter().map(|(line, _)| *line).collect();
    why.push_str(&matching::closest(&texts, &old));
    why.push_str("\nRead the file again and copy the context and removed lines exactly.");
    Err(why)
}

/// Applies the hunks of one file to its text.
pub(super) fn apply_hunks(whole: &str, hunks: &[Hunk], shown: &str) -> Result<String, String> {
    // A byte-order mark is no part of the first line's text.
    let (bom, text) = match whole.strip_prefix(BOM) {
        Some(rest) => (&whole[..BOM.len_utf8()], rest),
        None => ("", whole),
    };
    let lines = split_lines(text);
    let ending = if Endings::of(text.as_bytes()).crlf_dominant() {
        "\r\n"
    } else {
        "\n"
    };
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
    let mut result = String::with_capacity(whole.len() + 256);
    result.push_str(bom);
    for (index, (line, own)) in out.iter().enumerate() {
        result.push_str(line);
        if index + 1 < out.len() || ends_with_newline {
            result.push_str(if own.is_empty() { ending } else { own });
        }
    }
    Ok(result)
}

#[cfg(test)]
mod tests {
    use super::super::tests::CAP;
    use super::super::{parse, plan};
    use std::path::Path;

    /// Applies a one-file update to `text` in memory.
    fn update(text: &str, hunks: &str) -> Result<String, String> {
        let patch = parse(&format!(
            "*** Begin Patch\n*** Update File: f\n{hunks}*** End Patch\n"
        ))?;
        let root = Path::new("/nonexistent-root");
        let changes = plan(&patch, root, CAP, &|_| Ok(Some(text.to_string())))?;
        Ok(changes[0].new_text.clone().unwrap())
    }

    #[test]
    fn a_forgiven_hunk_must_match_one_place() {
        // Alike once trailing spaces are ignored, twice: not guessed.
        let text = "if a:  \n    go()\n\nif a: \n    go()\n";
        let err = update(text, "@@\n-if a:\n-    go()\n+if b:\n+    go()\n").unwrap_err();
        assert!(err.contains("match 2 places"), "{err}");
        // Alike once indentation is ignored, twice: refused too.
        let text = "    x = 1\nx = 1\n";
        let err = update(text, "@@\n-  x = 1\n+  x = 2\n").unwrap_err();
        assert!(err.contains("match 2 places"), "{err}");
        // One place once whitespace is ignored: applied.
        let text = "if a:  \n    go()\n\nif b:\n    stop()\n";
        let new = update(text, "@@\n-if a:\n-    go()\n+if a:\n+    run()\n").unwrap();
        assert_eq!(new, "if a:\n    run()\n\nif b:\n    stop()\n");
        // Exact copies keep the patch's rule: the first after the cursor.
        let text = "x = 1\nx = 1\n";
        assert_eq!(
            update(text, "@@\n-x = 1\n+x = 2\n").unwrap(),
            "x = 2\nx = 1\n"
        );
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
    fn a_failed_hunk_shows_the_closest_lines() {
        let text: String = (1..=30).map(|i| format!("let v{i} = {i};\n")).collect();
        let err = update(&text, "@@\n let v12 = 12;\n-let v13 = 31;\n+let v13 = 0;\n").unwrap_err();
        assert!(err.contains("f: hunk 1 of 1"), "{err}");
        assert!(
            err.contains("    12\tlet v12 = 12;\n    13\tlet v13 = 13;\n"),
            "{err}"
        );
        assert!(err.contains("\"31\" where the file has \"13\""), "{err}");
        // A file of many identical lines and a long hunk that differs in
        // its last line: answered (linearly), not matched.
        let text = "x = 1;\n".repeat(100_000);
        let hunk = format!("@@\n{}-x = 2;\n+y\n", " x = 1;\n".repeat(5_000));
        assert!(update(&text, &hunk).is_err());
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
    fn crlf_files_and_the_bom_are_kept() {
        // The BOM is no part of the first line, and stays.
        let new = update("\u{feff}one\r\ntwo\r\n", "@@\n-one\n+1\n two\n").unwrap();
        assert_eq!(new, "\u{feff}1\r\ntwo\r\n");
        // Added lines take the ending most lines have, not the first's;
        // the other lines keep their own.
        let mixed = "a\nb\r\nc\r\nd\r\n";
        let new = update(mixed, "@@\n a\n-b\n+B\n+B2\n").unwrap();
        assert_eq!(new, "a\nB\r\nB2\r\nc\r\nd\r\n");
        let new = update("a\nb\nc\r\n", "@@\n c\n+d\n").unwrap();
        assert_eq!(new, "a\nb\nc\r\nd\n");
        // A patch written with CRLF itself still matches and adds CRLF.
        let new = update("x\r\ny\r\n", "@@\r\n x\r\n-y\r\n+z\r\n").unwrap();
        assert_eq!(new, "x\r\nz\r\n");
    }
}

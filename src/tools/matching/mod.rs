//! Finding the text an edit replaces, forgiving the few slips models make
//! over and over, and nothing else.
//!
//! `locate` tries the text as given first (and, in a CRLF file, with CRLF
//! endings). When that finds nothing and the file is UTF-8, matchers that
//! each forgive one kind of slip are tried in order; the first that finds
//! anything decides, and its match is taken only when it is unique (every
//! match with `replace_all`). Slips are not combined: a block that needs
//! two different ones is not matched. Nothing fuzzier is tried (no edit
//! distance, no anchoring on the first and last lines).
//!
//! Every search here is linear in the sizes of the file and the old text:
//! KMP over bytes, and over lines compared by a key each matcher computes
//! once per line.

mod closest;
mod indent;
#[cfg(test)]
mod tests;

pub use closest::{closest, numbered};

use super::endings::{self, Endings};
use std::borrow::Cow;
use std::rc::Rc;

/// The most an edit may make a file: a replace_all of a large new text
/// over many matches is refused rather than built.
pub const RESULT_CAP: usize = 64 << 20;
/// Lines compared, beyond the linear searches, checking the indentation
/// of candidates: past it, the indentation matcher refuses.
const CHECK_BUDGET: usize = 1_000_000;

/// A slip forgiven to find the old text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Slip {
    TrailingWhitespace,
    Indentation,
    TabsAndSpaces,
    LineNumbers,
    Punctuation,
    Escapes,
    FinalNewline,
    LineEndings,
}

impl Slip {
    /// How the result names it to the model.
    pub fn describe(self) -> &'static str {
        match self {
            Slip::TrailingWhitespace => "matched after ignoring trailing whitespace",
            Slip::Indentation => {
                "matched after ignoring a change of indentation (the new text was re-indented to the file's)"
            }
            Slip::TabsAndSpaces => {
                "matched after ignoring tabs against spaces in the indentation (the new text was re-indented with the file's)"
            }
            Slip::LineNumbers => {
                "matched after removing the line numbers read_file shows (do not copy them)"
            }
            Slip::Punctuation => {
                "matched after treating typographic quotes, dashes, spaces and ellipses as their ASCII forms"
            }
            Slip::Escapes => {
                "matched after unescaping \\n, \\t and quotes that were escaped once too often"
            }
            Slip::FinalNewline => "matched after ignoring a final newline the file does not have there",
            Slip::LineEndings => "matched after reading its CRLF line endings as the file's LF",
        }
    }
}

/// One place the old text matched: its bytes `start..end` become `new`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Span {
    pub start: usize,
    pub end: usize,
    /// Shared between the spans that replace with the same bytes.
    pub new: Rc<[u8]>,
}

/// Where the old text is, and the slip forgiven to find it (`None`: as
/// given, CRLF aside).
#[derive(Debug)]
pub struct Located {
    pub spans: Vec<Span>,
    pub slip: Option<Slip>,
}

/// Why nothing is replaced.
#[derive(Debug)]
pub enum Refusal {
    /// Found nowhere, with or without forgiving.
    Missing,
    /// Found more than once without `replace_all`: the line ranges
    /// (1-based, inclusive) of the first few, and how many there are.
    Ambiguous {
        ranges: Vec<(usize, usize)>,
        count: usize,
        slip: Option<Slip>,
    },
    /// The old text's lines, indentation aside, occur in so many places
    /// that checking each would take too long.
    Crowded { places: usize },
    /// The edit would make the file larger than `RESULT_CAP`.
    TooLarge { bytes: usize },
}

/// Where `old` is in `content`, and what replaces it.
pub fn locate(content: &[u8], old: &str, new: &str, replace_all: bool) -> Result<Located, Refusal> {
    let decide = |spans: Vec<Span>, slip: Option<Slip>| -> Option<Result<Located, Refusal>> {
        match spans.len() {
            0 => None,
            1 => Some(sized(content, Located { spans, slip })),
            _ if replace_all => Some(sized(content, Located { spans, slip })),
            count => Some(Err(Refusal::Ambiguous {
                ranges: spans
                    .iter()
                    .take(10)
                    .map(|span| line_range(content, span.start, span.end))
                    .collect(),
                count,
                slip,
            })),
        }
    };
    if let Some(outcome) = decide(exact(content, old.as_bytes(), new.as_bytes()), None) {
        return outcome;
    }
    // Forgiving matchers read the file as text; other files stay exact.
    let Ok(text) = std::str::from_utf8(content) else {
        return Err(Refusal::Missing);
    };
    type Matcher = fn(&str, &str, &str, bool) -> Result<(Vec<Span>, Slip), Refusal>;
    let matchers: [Matcher; 7] = [
        |t, o, n, _| Ok((crlf_for_lf(t, o, n), Slip::LineEndings)),
        |t, o, n, _| Ok((trailing_whitespace(t, o, n), Slip::TrailingWhitespace)),
        indent::reindented,
        |t, o, n, _| Ok((line_numbers(t, o, n), Slip::LineNumbers)),
        |t, o, n, _| Ok((punctuation(t, o, n), Slip::Punctuation)),
        |t, o, n, _| Ok((escapes(t, o, n), Slip::Escapes)),
        |t, o, n, _| Ok((final_newline(t, o, n), Slip::FinalNewline)),
    ];
    for matcher in matchers {
        let (spans, slip) = matcher(text, old, new, replace_all)?;
        if let Some(outcome) = decide(spans, Some(slip)) {
            return outcome;
        }
    }
    Err(Refusal::Missing)
}

/// `located`, unless what it writes would exceed `RESULT_CAP`.
fn sized(content: &[u8], located: Located) -> Result<Located, Refusal> {
    let mut bytes = content.len();
    for span in &located.spans {
        bytes = bytes - (span.end - span.start) + span.new.len();
        if bytes > RESULT_CAP {
            return Err(Refusal::TooLarge { bytes });
        }
    }
    Ok(located)
}

/// The 1-based lines the bytes `start..end` cover.
fn line_range(content: &[u8], start: usize, end: usize) -> (usize, usize) {
    let first = line_at(content, start);
    let inner = &content[start..end.saturating_sub(1).max(start)];
    (first, first + inner.iter().filter(|&&b| b == b'\n').count())
}

/// `content` with every span replaced by its new bytes (the spans in
/// order, not overlapping, as `locate` gives them).
pub fn splice(content: &[u8], spans: &[Span]) -> Vec<u8> {
    let mut next = Vec::with_capacity(content.len());
    let mut last = 0;
    for span in spans {
        next.extend_from_slice(&content[last..span.start]);
        next.extend_from_slice(&span.new);
        last = span.end;
    }
    next.extend_from_slice(&content[last..]);
    next
}

/// The 1-based line of byte `offset`.
pub fn line_at(content: &[u8], offset: usize) -> usize {
    content[..offset.min(content.len())]
        .iter()
        .filter(|&&b| b == b'\n')
        .count()
        + 1
}

/// Every start of `needle` in `haystack`, overlapping ones included, in
/// O(n + m) (Knuth–Morris–Pratt).
pub fn kmp_all<T: PartialEq>(haystack: &[T], needle: &[T]) -> Vec<usize> {
    let m = needle.len();
    if m == 0 || m > haystack.len() || m > u32::MAX as usize {
        return Vec::new();
    }
    // The failure table, in u32: four bytes a needle item.
    let mut fail = vec![0u32; m];
    let mut k = 0usize;
    for i in 1..m {
        while k > 0 && needle[i] != needle[k] {
            k = fail[k - 1] as usize;
        }
        if needle[i] == needle[k] {
            k += 1;
        }
        fail[i] = k as u32;
    }
    let mut found = Vec::new();
    let mut k = 0usize;
    for (i, item) in haystack.iter().enumerate() {
        while k > 0 && *item != needle[k] {
            k = fail[k - 1] as usize;
        }
        if *item == needle[k] {
            k += 1;
        }
        if k == m {
            found.push(i + 1 - m);
            k = fail[k - 1] as usize;
        }
    }
    found
}

/// The non-overlapping occurrences of `needle`, left to right, in linear
/// time: the standard library's two-way search when both are UTF-8 (no
/// memory beyond the answer), KMP over the bytes otherwise.
pub fn find_all(haystack: &[u8], needle: &[u8]) -> Vec<usize> {
    if needle.is_empty() || needle.len() > haystack.len() {
        return Vec::new();
    }
    if let (Ok(text), Ok(wanted)) = (std::str::from_utf8(haystack), std::str::from_utf8(needle)) {
        return text.match_indices(wanted).map(|(at, _)| at).collect();
    }
    non_overlapping(kmp_all(haystack, needle), needle.len())
}

fn non_overlapping(starts: Vec<usize>, len: usize) -> Vec<usize> {
    let mut kept: Vec<usize> = Vec::with_capacity(starts.len().min(1024));
    for start in starts {
        if kept.last().is_none_or(|&last| start >= last + len) {
            kept.push(start);
        }
    }
    kept
}

fn bare(text: &[u8]) -> bool {
    Endings::of(text).crlf == 0
}

/// A replacement as written at each match: with the file's line endings
/// where the match has them (CRLF when the matched bytes end lines with
/// CRLF, or hold no line break in a mostly-CRLF file). A `new` that spells
/// out `\r\n` is taken as given. Each form is made once and shared.
pub(crate) struct Replacement<'a> {
    content: &'a [u8],
    new: &'a [u8],
    dominant: Option<bool>,
    plain: Option<Rc<[u8]>>,
    crlf: Option<Rc<[u8]>>,
}

impl<'a> Replacement<'a> {
    pub(crate) fn new(content: &'a [u8], new: &'a [u8]) -> Replacement<'a> {
        Replacement {
            content,
            new,
            dominant: None,
            plain: None,
            crlf: None,
        }
    }

    /// Whether the new text takes CRLF at `start..end`.
    fn wants_crlf(&mut self, start: usize, end: usize) -> bool {
        let matched = &self.content[start..end];
        if matched.contains(&b'\n') {
            !bare(matched)
        } else {
            let content = self.content;
            *self
                .dominant
                .get_or_insert_with(|| Endings::of(content).crlf_dominant())
        }
    }

    /// `own` (a replacement made for this match) in the endings the match
    /// wants.
    pub(crate) fn own(&mut self, start: usize, end: usize, own: String) -> Rc<[u8]> {
        if self.wants_crlf(start, end) && bare(own.as_bytes()) {
            endings::to_crlf(own.as_bytes()).into()
        } else {
            own.into_bytes().into()
        }
    }

    /// The bytes that replace `start..end`.
    pub(crate) fn at(&mut self, start: usize, end: usize) -> Rc<[u8]> {
        if self.wants_crlf(start, end) && bare(self.new) {
            let new = self.new;
            self.crlf
                .get_or_insert_with(|| endings::to_crlf(new).into())
                .clone()
        } else {
            let new = self.new;
            self.plain.get_or_insert_with(|| new.into()).clone()
        }
    }
}

/// The text as given; in a file with CRLF endings, `old` written with
/// bare `\n` is then tried with `\r\n`. Only the matched bytes change:
/// the other lines keep their endings, mixed or not.
fn exact(content: &[u8], old: &[u8], new: &[u8]) -> Vec<Span> {
    let spans = |old: &[u8]| -> Vec<Span> {
        let mut replacement = Replacement::new(content, new);
        find_all(content, old)
            .into_iter()
            .map(|start| Span {
                start,
                end: start + old.len(),
                new: replacement.at(start, start + old.len()),
            })
            .collect()
    };
    let found = spans(old);
    if !found.is_empty() {
        return found;
    }
    if old.contains(&b'\n') && bare(old) && content.windows(2).any(|w| w == b"\r\n") {
        return spans(&endings::to_crlf(old));
    }
    Vec::new()
}

/// A file's lines: the start of each, the end of its text (before `\r\n`
/// or `\n`) and the end with its ending.
pub(crate) struct Lines<'a> {
    pub text: &'a str,
    pub spans: Vec<(usize, usize, usize)>,
}

impl<'a> Lines<'a> {
    pub(crate) fn of(text: &'a str) -> Lines<'a> {
        let mut spans = Vec::new();
        let mut start = 0;
        for piece in text.split_inclusive('\n') {
            let full = start + piece.len();
            let body = piece
                .strip_suffix('\n')
                .map(|p| p.strip_suffix('\r').unwrap_or(p))
                .unwrap_or(piece);
            spans.push((start, start + body.len(), full));
            start = full;
        }
        Lines { text, spans }
    }

    pub(crate) fn line(&self, index: usize) -> &'a str {
        let (start, end, _) = self.spans[index];
        &self.text[start..end]
    }

    pub(crate) fn texts(&self) -> Vec<&'a str> {
        (0..self.spans.len()).map(|i| self.line(i)).collect()
    }
}

/// The old text as whole lines (without `\r`), and whether it ended with
/// a newline.
pub(crate) fn old_lines(old: &str) -> (Vec<&str>, bool) {
    let ends = old.ends_with('\n');
    let body = old.strip_suffix('\n').unwrap_or(old);
    let mut lines: Vec<&str> = body.split('\n').collect();
    // A `\r` is part of a line ending only before a `\n`.
    let count = lines.len();
    for (i, line) in lines.iter_mut().enumerate() {
        if i + 1 < count || ends {
            *line = line.strip_suffix('\r').unwrap_or(line);
        }
    }
    (lines, ends)
}

/// What a line matcher makes of one candidate.
pub(crate) enum Verdict {
    /// Not a match.
    No,
    /// A match replaced by the new text as given.
    Given,
    /// A match replaced by a text of its own (given the file's endings).
    Own(String),
    /// A match whose replacement is never written (an ambiguous one).
    Unused,
}

/// Matches of `old`'s whole lines, lines compared by `key`, each judged
/// by `judge` (non-overlapping, left to right).
pub(crate) fn line_matches<'t>(
    lines: &Lines<'t>,
    old: &str,
    new: &str,
    key: fn(&str) -> Cow<'_, str>,
    mut judge: impl FnMut(usize, &[&'t str]) -> Result<Verdict, Refusal>,
) -> Result<Vec<Span>, Refusal> {
    let (wanted, ends) = old_lines(old);
    let file_keys: Vec<Cow<str>> = (0..lines.spans.len()).map(|i| key(lines.line(i))).collect();
    let wanted_keys: Vec<Cow<str>> = wanted.iter().map(|l| key(l)).collect();
    let m = wanted.len();
    let texts = lines.texts();
    let content = lines.text.as_bytes();
    let mut replacement = Replacement::new(content, new.as_bytes());
    let mut spans: Vec<Span> = Vec::new();
    let mut next_free = 0;
    for at in kmp_all(&file_keys, &wanted_keys) {
        if at < next_free {
            continue;
        }
        let (start, _, _) = lines.spans[at];
        let (_, body_end, full_end) = lines.spans[at + m - 1];
        // A newline the old text ends with must be in the file too.
        if ends && full_end == body_end {
            continue;
        }
        let end = if ends { full_end } else { body_end };
        let new = match judge(at, &texts[at..at + m])? {
            Verdict::No => continue,
            Verdict::Given => replacement.at(start, end),
            Verdict::Own(text) => replacement.own(start, end, text),
            Verdict::Unused => Rc::from(&[][..]),
        };
        spans.push(Span { start, end, new });
        next_free = at + m;
    }
    Ok(spans)
}

fn trim_end_key(line: &str) -> Cow<'_, str> {
    Cow::Borrowed(line.trim_end_matches([' ', '\t']))
}

/// Matcher 0: an old text with CRLF endings where the file has LF: the
/// text and the new one are read with LF (the CRLF file the other way is
/// the exact search's).
fn crlf_for_lf(text: &str, old: &str, new: &str) -> Vec<Span> {
    if !old.contains("\r\n") {
        return Vec::new();
    }
    let (old, new) = (old.replace("\r\n", "\n"), new.replace("\r\n", "\n"));
    exact(text.as_bytes(), old.as_bytes(), new.as_bytes())
        .into_iter()
        .filter(|span| bare(&text.as_bytes()[span.start..span.end]))
        .collect()
}

/// Matcher 1: whitespace at line ends.
fn trailing_whitespace(text: &str, old: &str, new: &str) -> Vec<Span> {
    let lines = Lines::of(text);
    line_matches(&lines, old, new, trim_end_key, |_, _| Ok(Verdict::Given)).unwrap_or_else(
        |refusal| {
            log::debug!("edit: trailing-whitespace matching gave up: {refusal:?}");
            Vec::new()
        },
    )
}

/// `text` with the `read_file` prefix (right-aligned number, tab) taken
/// off every line, when every line has one; with `consecutive`, the
/// numbers must also count up by one.
fn strip_numbers(text: &str, consecutive: bool) -> Option<String> {
    let mut out = String::with_capacity(text.len());
    let mut previous: Option<u64> = None;
    // Each line keeps its own ending.
    for line in text.split_inclusive('\n') {
        let rest = line.trim_start_matches(' ');
        let digits = rest.len() - rest.trim_start_matches(|c: char| c.is_ascii_digit()).len();
        if digits == 0 || digits > 12 || !rest[digits..].starts_with('\t') {
            return None;
        }
        let number: u64 = rest[..digits].parse().ok()?;
        if consecutive && previous.is_some_and(|p| p + 1 != number) {
            return None;
        }
        previous = Some(number);
        out.push_str(&rest[digits + 1..]);
    }
    Some(out)
}

/// Matcher 3: the line numbers `read_file` prints, copied into the old text (and
/// into the new one, taken off there too when every line has them).
fn line_numbers(text: &str, old: &str, new: &str) -> Vec<Span> {
    let Some(stripped) = strip_numbers(old, true) else {
        return Vec::new();
    };
    let new = strip_numbers(new, false).unwrap_or_else(|| new.to_string());
    exact(text.as_bytes(), stripped.as_bytes(), new.as_bytes())
}

/// The ASCII form of a typographic character, if it has one.
fn ascii_form(c: char) -> Option<&'static str> {
    Some(match c {
        '\u{2010}'..='\u{2015}' | '\u{2212}' => "-",
        '\u{2018}'..='\u{201B}' | '\u{2032}' => "'",
        '\u{201C}'..='\u{201F}' | '\u{2033}' => "\"",
        '\u{00A0}' | '\u{2000}'..='\u{200A}' | '\u{202F}' | '\u{205F}' | '\u{3000}' => " ",
        '\u{2026}' => "...",
        _ => return None,
    })
}

/// A line with typographic punctuation as ASCII (for `apply_patch`).
pub fn ascii_punctuation(line: &str) -> Cow<'_, str> {
    if line.is_ascii() || !line.chars().any(|c| ascii_form(c).is_some()) {
        return Cow::Borrowed(line);
    }
    let mut out = String::with_capacity(line.len());
    for c in line.chars() {
        match ascii_form(c) {
            Some(ascii) => out.push_str(ascii),
            None => out.push(c),
        }
    }
    Cow::Owned(out)
}

/// Matcher 4: typographic punctuation against ASCII. The file is seen with each
/// such character (and each `\r` before `\n`) as its ASCII form, with a
/// map back to its own bytes; matches that start or end inside one
/// character's form are not taken.
fn punctuation(text: &str, old: &str, new: &str) -> Vec<Span> {
    let typographic = |s: &str| s.chars().any(|c| ascii_form(c).is_some());
    if text.len() >= u32::MAX as usize || !(typographic(text) || typographic(old)) {
        return Vec::new();
    }
    let mut view = Vec::with_capacity(text.len());
    let mut origin: Vec<u32> = Vec::with_capacity(text.len() + 1);
    let mut whole: Vec<bool> = Vec::with_capacity(text.len() + 1);
    let bytes = text.as_bytes();
    for (at, c) in text.char_indices() {
        if c == '\r' && bytes.get(at + 1) == Some(&b'\n') {
            continue;
        }
        // A `\n` seen for `\r\n` stands for both bytes.
        let from = if c == '\n' && at > 0 && bytes[at - 1] == b'\r' {
            at - 1
        } else {
            at
        };
        let mut buffer = [0u8; 4];
        let form = ascii_form(c).unwrap_or_else(|| c.encode_utf8(&mut buffer));
        for (i, &b) in form.as_bytes().iter().enumerate() {
            view.push(b);
            origin.push(from as u32);
            whole.push(i == 0);
        }
    }
    origin.push(text.len() as u32);
    whole.push(true);
    let wanted = ascii_punctuation(old).replace("\r\n", "\n");
    let mut replacement = Replacement::new(bytes, new.as_bytes());
    let mut spans = Vec::new();
    for at in find_all(&view, wanted.as_bytes()) {
        let end = at + wanted.len();
        if !whole[at] || !whole[end] {
            continue;
        }
        let (start, end) = (origin[at] as usize, origin[end] as usize);
        spans.push(Span {
            start,
            end,
            new: replacement.at(start, end),
        });
    }
    spans
}

/// `text` with `\n`, `\t`, `\r`, `\"`, `\'` and `\\` escapes undone, when
/// it has a newline, tab or quote escape and no real newline.
fn unescape(text: &str) -> Option<String> {
    let escaped = ["\\n", "\\t", "\\\"", "\\'"];
    if text.contains('\n') || !escaped.iter().any(|e| text.contains(e)) {
        return None;
    }
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('n') => out.push('\n'),
            Some('t') => out.push('\t'),
            Some('r') => out.push('\r'),
            Some(q @ ('"' | '\'' | '\\')) => out.push(q),
            Some(other) => {
                out.push('\\');
                out.push(other);
            }
            None => out.push('\\'),
        }
    }
    Some(out)
}

/// Matcher 5: an old text escaped once too often: tried unescaped (the literal
/// text is absent, or the exact search would have found it); the new text
/// is unescaped the same way.
fn escapes(text: &str, old: &str, new: &str) -> Vec<Span> {
    let Some(plain) = unescape(old) else {
        return Vec::new();
    };
    let new = unescape(new).unwrap_or_else(|| new.to_string());
    exact(text.as_bytes(), plain.as_bytes(), new.as_bytes())
}

/// Matcher 6: an old text ending with newlines at the end of a file that has none
/// there: matched without them, and the same newlines come off the end of
/// the new text, so the file still ends as it did.
fn final_newline(text: &str, old: &str, new: &str) -> Vec<Span> {
    let trimmed = old.trim_end_matches(['\n', '\r']);
    if trimmed.len() == old.len() || trimmed.is_empty() {
        return Vec::new();
    }
    let extra = &old[trimmed.len()..];
    let new = new
        .strip_suffix(extra)
        .unwrap_or(new.trim_end_matches(['\n', '\r']));
    exact(text.as_bytes(), trimmed.as_bytes(), new.as_bytes())
        .into_iter()
        .filter(|span| span.end == text.len())
        .collect()
}

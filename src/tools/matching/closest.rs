//! Misses that teach: when the old text is found nowhere, the region of
//! the file most like it, in `read_file`'s numbering, and what differs.
//! Only shown, never applied; found in one pass over the file.

use std::collections::{HashMap, HashSet};

/// Lines of the closest region shown at most.
pub(super) const SHOWN_LINES: usize = 8;
/// Characters of the closest region shown at most.
pub(super) const SHOWN_CHARS: usize = 2000;
/// Characters of one shown line at most.
const LINE_CHARS: usize = 240;
/// Old lines considered as anchors, and compared, at most.
const OLD_LINES: usize = 200;
/// Distinct words of the anchor line compared at most.
const WORDS: usize = 32;
/// Bytes of a file line tokenised at most.
const LINE_BYTES: usize = 4096;
/// Differences named at most.
const NOTES: usize = 3;

/// Lines `first..first + count` (0-based) numbered as `read_file` shows
/// them, within `SHOWN_CHARS`.
pub fn numbered(lines: &[&str], first: usize, count: usize) -> String {
    let mut out = String::new();
    for (index, line) in lines.iter().enumerate().skip(first).take(count) {
        let mut end = line.len().min(LINE_CHARS);
        while !line.is_char_boundary(end) {
            end -= 1;
        }
        let cut = if end < line.len() { "…" } else { "" };
        let row = format!("{:>6}\t{}{cut}\n", index + 1, &line[..end]);
        if out.len() + row.len() > SHOWN_CHARS {
            break;
        }
        out.push_str(&row);
    }
    out
}

fn words(line: &str) -> impl Iterator<Item = &str> {
    let mut end = line.len().min(LINE_BYTES);
    while !line.is_char_boundary(end) {
        end -= 1;
    }
    line[..end]
        .split(|c: char| !(c.is_alphanumeric() || c == '_'))
        .filter(|w| !w.is_empty())
}

/// Where the old text most likely was meant to start (0-based file line):
/// the line of the file equal (trimmed) to the old text's rarest line, or
/// else the one sharing the most words with its longest line.
fn anchor(file: &[&str], old: &[&str]) -> Option<usize> {
    let candidates: Vec<(usize, &str)> = old
        .iter()
        .take(OLD_LINES)
        .enumerate()
        .map(|(i, l)| (i, l.trim()))
        .filter(|(_, l)| !l.is_empty())
        .collect();
    let wanted: HashSet<&str> = candidates.iter().map(|(_, l)| *l).collect();
    // (count, first file line) of each old line found in the file.
    let mut seen: HashMap<&str, (usize, usize)> = HashMap::new();
    for (at, line) in file.iter().enumerate() {
        let line = line.trim();
        if wanted.contains(line) {
            seen.entry(line).or_insert((0, at)).0 += 1;
        }
    }
    let rarest = candidates
        .iter()
        .filter_map(|&(i, l)| {
            seen.get(l)
                .map(|&(count, at)| (count, usize::MAX - l.len(), i, at))
        })
        .min();
    if let Some((_, _, i, at)) = rarest {
        return Some(at.saturating_sub(i));
    }
    let &(i, longest) = candidates.iter().max_by_key(|(_, l)| l.len())?;
    let mut wanted: Vec<&str> = Vec::new();
    for word in words(longest) {
        if wanted.len() < WORDS && !wanted.contains(&word) {
            wanted.push(word);
        }
    }
    let wanted: HashSet<&str> = wanted.into_iter().collect();
    let mut best = (0, 0);
    for (at, line) in file.iter().enumerate() {
        let mut shared: HashSet<&str> = HashSet::new();
        for word in words(line) {
            if wanted.contains(word) {
                shared.insert(word);
            }
        }
        if shared.len() > best.0 {
            best = (shared.len(), at);
        }
    }
    // At least half the words: anything less is not the same line.
    (best.0 > 0 && best.0 * 2 >= wanted.len()).then(|| best.1.saturating_sub(i))
}

/// What differs between the old lines and the file's from `start`.
fn differences(file: &[&str], old: &[&str], start: usize) -> Vec<String> {
    let mut notes = Vec::new();
    for (j, wanted) in old.iter().enumerate().take(OLD_LINES) {
        if notes.len() == NOTES {
            break;
        }
        let number = start + j + 1;
        let Some(have) = file.get(start + j) else {
            notes.push(format!(
                "the file ends at line {}, before the old text's last {} lines",
                file.len(),
                old.len() - j
            ));
            break;
        };
        if have == wanted {
            continue;
        }
        if have.trim() == wanted.trim() {
            let what = if have.trim_start() == wanted.trim_start() {
                "indentation"
            } else if have.trim_end() == wanted.trim_end() {
                "trailing whitespace"
            } else {
                "whitespace"
            };
            notes.push(format!("line {number}: the {what} differs"));
            continue;
        }
        // A line missing on one side shifts the rest: say so and stop.
        if file
            .get(start + j + 1)
            .is_some_and(|next| next.trim() == wanted.trim())
        {
            notes.push(format!(
                "line {number} of the file is missing from the old text"
            ));
            break;
        }
        if old
            .get(j + 1)
            .is_some_and(|next| next.trim() == have.trim())
        {
            notes.push(format!(
                "the old text has a line the file lacks before line {number}: {:?}",
                clip(wanted)
            ));
            break;
        }
        let theirs: Vec<&str> = words(have).collect();
        let ours: Vec<&str> = words(wanted).collect();
        match ours.iter().zip(&theirs).find(|(a, b)| a != b) {
            Some((ours, theirs)) => notes.push(format!(
                "line {number}: the old text has {:?} where the file has {:?}",
                clip(ours),
                clip(theirs)
            )),
            None => notes.push(format!("line {number} differs")),
        }
    }
    notes
}

fn clip(text: &str) -> &str {
    let mut end = text.len().min(80);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

/// The paragraph a miss ends with: the closest lines and what differs, or
/// that nothing like the old text is in the file.
pub fn closest(file: &[&str], old: &[&str]) -> String {
    let Some(start) = anchor(file, old) else {
        return "No line of the old text appears in the file.".into();
    };
    let shown = old.len().clamp(1, SHOWN_LINES);
    let mut out = format!(
        "The closest lines in the file (as read_file shows them; copy without the numbers):\n{}",
        numbered(file, start, shown)
    );
    let notes = differences(file, old, start);
    if !notes.is_empty() {
        out.push_str("What differs: ");
        out.push_str(&notes.join("; "));
        out.push('.');
    }
    out
}

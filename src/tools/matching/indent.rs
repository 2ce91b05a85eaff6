//! Matcher 2: the old text re-indented as a whole (every line moved by the
//! same amount), or indented with tabs where the file has spaces (or the
//! other way round) in the same structure. The new text is re-indented by
//! the same change the other way, so the file keeps its own indentation.

use super::{line_matches, Lines, Refusal, Slip, Span, Verdict, CHECK_BUDGET, RESULT_CAP};
use std::borrow::Cow;

/// The indentation characters of a set of lines.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    None,
    Tabs,
    Spaces,
    Mixed,
}

impl Kind {
    fn of<'a>(indents: impl Iterator<Item = &'a str>) -> Kind {
        let mut kind = Kind::None;
        for indent in indents {
            let this = if indent.is_empty() {
                continue;
            } else if indent.bytes().all(|b| b == b'\t') {
                Kind::Tabs
            } else if indent.bytes().all(|b| b == b' ') {
                Kind::Spaces
            } else {
                return Kind::Mixed;
            };
            if kind != Kind::None && kind != this {
                return Kind::Mixed;
            }
            kind = this;
        }
        kind
    }

    fn char(self) -> Option<char> {
        match self {
            Kind::Tabs => Some('\t'),
            Kind::Spaces => Some(' '),
            _ => None,
        }
    }
}

fn indent_of(line: &str) -> &str {
    &line[..line.len() - line.trim_start_matches([' ', '\t']).len()]
}

fn blank(line: &str) -> bool {
    line.trim().is_empty()
}

/// How the old text's indentation becomes the file's: a column count of
/// the old text's character is scaled, then moved by `delta`.
#[derive(Debug, Clone, Copy)]
struct Reindent {
    from: Option<char>,
    to: char,
    scale: Scale,
    delta: isize,
}

#[derive(Debug, Clone, Copy)]
enum Scale {
    Same,
    /// Old spaces, file tabs: this many spaces a tab.
    Divide(usize),
    /// Old tabs, file spaces: this many spaces a tab.
    Multiply(usize),
}

const TAB_WIDTHS: [usize; 4] = [4, 2, 8, 3];

/// The one re-indentation that turns every non-blank old line's
/// indentation into the file's, if there is one.
fn fit(file: &[&str], old: &[&str]) -> Option<Reindent> {
    let pairs: Vec<(usize, usize)> = file
        .iter()
        .zip(old)
        .filter(|(_, o)| !blank(o))
        .map(|(f, o)| (indent_of(f).len(), indent_of(o).len()))
        .collect();
    let (&(f0, o0), _) = pairs.split_first()?;
    let file_kind = Kind::of(
        file.iter()
            .zip(old)
            .filter(|(_, o)| !blank(o))
            .map(|(f, _)| indent_of(f)),
    );
    let old_kind = Kind::of(old.iter().filter(|o| !blank(o)).map(|o| indent_of(o)));
    if file_kind == Kind::Mixed || old_kind == Kind::Mixed {
        return None;
    }
    let uniform = |scaled: &dyn Fn(usize) -> Option<isize>| -> Option<isize> {
        let delta = f0 as isize - scaled(o0)?;
        pairs
            .iter()
            .all(|&(f, o)| scaled(o).is_some_and(|s| f as isize - s == delta))
            .then_some(delta)
    };
    let to = file_kind.char().or(old_kind.char()).unwrap_or(' ');
    let from = old_kind.char();
    match (file_kind, old_kind) {
        (Kind::Tabs, Kind::Spaces) => TAB_WIDTHS.iter().find_map(|&width| {
            let delta = uniform(&|o| (o % width == 0).then_some((o / width) as isize))?;
            Some(Reindent {
                from,
                to,
                scale: Scale::Divide(width),
                delta,
            })
        }),
        (Kind::Spaces, Kind::Tabs) => TAB_WIDTHS.iter().find_map(|&width| {
            let delta = uniform(&|o| Some((o * width) as isize))?;
            Some(Reindent {
                from,
                to,
                scale: Scale::Multiply(width),
                delta,
            })
        }),
        _ => {
            let delta = uniform(&|o| Some(o as isize))?;
            // No change at all is no slip of indentation.
            (delta != 0).then_some(Reindent {
                from,
                to,
                scale: Scale::Same,
                delta,
            })
        }
    }
}

impl Reindent {
    /// `new` with each line's indentation changed the same way.
    fn apply(self, new: &str) -> String {
        let mut out = String::with_capacity(new.len() + 64);
        for line in new.split_inclusive('\n') {
            let body = line.trim_end_matches(['\n', '\r']);
            if blank(body) {
                out.push_str(line);
                continue;
            }
            // An old text without indentation says nothing of the new
            // text's own: its leading spaces or tabs count as given.
            let own = if body.starts_with('\t') { '\t' } else { ' ' };
            let from = self.from.unwrap_or(own);
            let count = body.len() - body.trim_start_matches(from).len();
            let rest = &line[count..];
            let (columns, spare) = match self.scale {
                Scale::Same => (count as isize, 0),
                Scale::Divide(width) => ((count / width) as isize, count % width),
                Scale::Multiply(width) => ((count * width) as isize, 0),
            };
            let target = (columns + self.delta).max(0) as usize;
            out.extend(std::iter::repeat_n(self.to, target));
            out.extend(std::iter::repeat_n(' ', spare));
            out.push_str(rest);
        }
        out
    }
}

fn trim_start_key(line: &str) -> Cow<'_, str> {
    Cow::Borrowed(line.trim_start_matches([' ', '\t']))
}

/// Matcher 2: the old text's lines equal the file's once their indentation
/// is set aside, and their indentation differs from the file's by one
/// uniform change (named tabs against spaces when that is the change).
///
/// The candidates come from a linear search; checking their indentation
/// costs a pass over the old text each, so the lines checked are capped
/// (`CHECK_BUDGET`): a file where the old text's lines occur in that many
/// places is refused rather than searched for minutes. Only the first
/// match's new text is made unless every match is to be replaced, and
/// those are capped at `RESULT_CAP` bytes in all.
pub(super) fn reindented(
    text: &str,
    old: &str,
    new: &str,
    replace_all: bool,
) -> Result<(Vec<Span>, Slip), Refusal> {
    let lines = Lines::of(text);
    let (wanted, _) = super::old_lines(old);
    let mut swapped = false;
    let mut checked = 0usize;
    let mut places = 0usize;
    let mut made = 0usize;
    let mut accepted = 0usize;
    let spans = line_matches(&lines, old, new, trim_start_key, |_, file| {
        places += 1;
        checked += wanted.len();
        if checked > CHECK_BUDGET && places > 1 {
            return Err(Refusal::Crowded { places });
        }
        let Some(reindent) = fit(file, &wanted) else {
            return Ok(Verdict::No);
        };
        swapped |= !matches!(reindent.scale, Scale::Same);
        accepted += 1;
        if accepted > 1 && !replace_all {
            return Ok(Verdict::Unused);
        }
        let text = reindent.apply(new);
        made += text.len();
        if made > RESULT_CAP {
            return Err(Refusal::TooLarge { bytes: made });
        }
        Ok(Verdict::Own(text))
    })?;
    let slip = if swapped {
        Slip::TabsAndSpaces
    } else {
        Slip::Indentation
    };
    Ok((spans, slip))
}

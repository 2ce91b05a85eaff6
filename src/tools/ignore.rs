//! The glob matcher and the `.gitignore`/`.ignore`/`.rgignore` rules used by
//! the directory walker in `walk.rs`; they live apart so that each file stays
//! short. `Glob` and `glob_match` are also re-exported from `walk`.
//!
//! The agent may not depend on the `ignore` or `globset` crates, so this
//! module implements the part of git's ignore rules that real projects use.

use std::path::Path;

/// The largest ignore file read; a larger one is not used.
const IGNORE_FILE_CAP: u64 = 1024 * 1024;

/// Whether `path` is ignored by the rules of one ignore file's `text` (for
/// the fuzzer: the parser and the matcher together).
pub(crate) fn ignored_by(text: &str, path: &str, is_dir: bool) -> bool {
    let mut rules = Vec::new();
    parse_ignore(text, &mut rules);
    let ignores = Ignores {
        sets: vec![RuleSet { prefix: 0, rules }],
    };
    ignores.is_ignored(path, is_dir)
}

/// Ignore files read in every directory, weakest first.
const IGNORE_FILES: [&str; 3] = [".gitignore", ".ignore", ".rgignore"];

/// One element of a path segment pattern.
#[derive(Debug, Clone)]
enum Tok {
    Char(char),
    Any,
    Star,
    /// A character class: whether it is negated, and its inclusive ranges.
    Class(bool, Vec<(char, char)>),
}

impl Tok {
    fn matches(&self, c: char) -> bool {
        match self {
            Tok::Char(x) => *x == c,
            Tok::Any | Tok::Star => true,
            Tok::Class(negated, ranges) => {
                ranges.iter().any(|&(lo, hi)| lo <= c && c <= hi) != *negated
            }
        }
    }
}

/// One `/`-separated piece of a pattern.
#[derive(Debug, Clone)]
enum Seg {
    /// `**`: any number of whole path segments, including none.
    GlobStar,
    Literal(String),
    Tokens(Vec<Tok>),
}

impl Seg {
    fn matches(&self, s: &str) -> bool {
        match self {
            Seg::GlobStar => true,
            Seg::Literal(l) => l == s,
            Seg::Tokens(toks) => match_tokens(toks, s),
        }
    }
}

/// A compiled glob pattern for `/`-separated relative paths.
///
/// `*` and `?` never cross a `/`, `**` as a whole segment crosses any number
/// of directories (a trailing `/**` needs at least one), `[abc]`, `[a-z]` and
/// `[!a]` are character classes, and a backslash escapes the next character.
/// A pattern without a `/` matches the last path component at any depth; a
/// pattern with one is anchored at the start of the path (a leading `/` or
/// `./` is dropped).
#[derive(Debug, Clone)]
pub(crate) struct Glob {
    segs: Vec<Seg>,
    name_only: bool,
}

impl Glob {
    pub(crate) fn new(pattern: &str) -> Glob {
        let pattern = pattern.strip_prefix("./").unwrap_or(pattern);
        let name_only = !pattern.contains('/');
        let mut segs: Vec<Seg> = Vec::new();
        for piece in pattern.split('/').filter(|s| !s.is_empty()) {
            let seg = compile_segment(piece);
            // Two globstars in a row mean the same as one.
            if !(matches!(seg, Seg::GlobStar) && matches!(segs.last(), Some(Seg::GlobStar))) {
                segs.push(seg);
            }
        }
        if segs.len() > 1 && matches!(segs.last(), Some(Seg::GlobStar)) {
            // A trailing `/**` matches what is inside, not the directory itself.
            segs.push(Seg::Tokens(vec![Tok::Star]));
        }
        Glob { segs, name_only }
    }

    /// Whether the relative path `path` (no leading or trailing `/`) matches.
    pub(crate) fn is_match(&self, path: &str) -> bool {
        let name = path.rsplit('/').next().unwrap_or(path);
        match_path(&self.segs, if self.name_only { name } else { path })
    }

    /// Whether some path strictly inside the directory `dir` could match, so
    /// a walker can skip directories that cannot hold a match.
    pub(crate) fn could_match_below(&self, dir: &str) -> bool {
        if self.name_only {
            return true;
        }
        let (mut p, mut t) = (0, 0);
        while t <= dir.len() {
            match self.segs.get(p) {
                None => return false,
                Some(Seg::GlobStar) => return true,
                Some(seg) => {
                    let (part, next) = segment_at(dir, t);
                    if !seg.matches(part) {
                        return false;
                    }
                    p += 1;
                    t = next;
                }
            }
        }
        p < self.segs.len()
    }
}

/// Matches `path` against `pattern` with the semantics of [`Glob`].
pub(crate) fn glob_match(pattern: &str, path: &str) -> bool {
    Glob::new(pattern).is_match(path)
}

fn compile_segment(s: &str) -> Seg {
    if s == "**" {
        return Seg::GlobStar;
    }
    let cs: Vec<char> = s.chars().collect();
    let (mut toks, mut literal, mut all_literal) = (Vec::new(), String::new(), true);
    let mut i = 0;
    while i < cs.len() {
        let c = cs[i];
        i += 1;
        let tok = match c {
            '\\' if i < cs.len() => {
                i += 1;
                Tok::Char(cs[i - 1])
            }
            '?' => Tok::Any,
            '*' if matches!(toks.last(), Some(Tok::Star)) => continue,
            '*' => Tok::Star,
            '[' => match parse_class(&cs[i..]) {
                Some((tok, used)) => {
                    i += used;
                    tok
                }
                None => Tok::Char('['),
            },
            _ => Tok::Char(c),
        };
        match tok {
            Tok::Char(c) => literal.push(c),
            _ => all_literal = false,
        }
        toks.push(tok);
    }
    if all_literal {
        Seg::Literal(literal)
    } else {
        Seg::Tokens(toks)
    }
}

/// Parses a character class whose `[` has been consumed; returns the token
/// and the number of characters used, or `None` when the class is unclosed.
fn parse_class(cs: &[char]) -> Option<(Tok, usize)> {
    let negated = matches!(cs.first(), Some('!' | '^'));
    let (mut i, mut ranges, mut first) = (usize::from(negated), Vec::new(), true);
    loop {
        let mut lo = *cs.get(i)?;
        i += 1;
        if lo == ']' && !first {
            return Some((Tok::Class(negated, ranges), i));
        }
        first = false;
        if lo == '\\' {
            lo = *cs.get(i)?;
            i += 1;
        }
        let mut hi = lo;
        if cs.get(i) == Some(&'-') && cs.get(i + 1).is_some_and(|&c| c != ']') {
            hi = cs[i + 1];
            i += 2;
            if hi == '\\' {
                hi = *cs.get(i)?;
                i += 1;
            }
        }
        ranges.push((lo, hi));
    }
}

/// Matches one path segment with the classic single-backtrack algorithm,
/// which is exact here because every token but `*` consumes one character.
fn match_tokens(toks: &[Tok], s: &str) -> bool {
    let (mut p, mut i) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while let Some(c) = s[i..].chars().next() {
        match toks.get(p) {
            Some(Tok::Star) => {
                star = Some((p + 1, i));
                p += 1;
                continue;
            }
            Some(tok) if tok.matches(c) => {
                p += 1;
                i += c.len_utf8();
                continue;
            }
            _ => {}
        }
        let Some((sp, si)) = star else { return false };
        let next = si + s[si..].chars().next().map_or(1, char::len_utf8);
        star = Some((sp, next));
        p = sp;
        i = next;
    }
    toks[p..].iter().all(|t| matches!(t, Tok::Star))
}

/// The segment of `path` starting at byte `at`, and where the next one starts.
fn segment_at(path: &str, at: usize) -> (&str, usize) {
    let end = path[at..].find('/').map_or(path.len(), |i| at + i);
    (&path[at..end], end + 1)
}

/// Matches whole segments; `**` plays the role `*` plays inside a segment.
fn match_path(segs: &[Seg], path: &str) -> bool {
    let end = if path.is_empty() { 0 } else { path.len() + 1 };
    let (mut p, mut t) = (0, 0);
    let mut back: Option<(usize, usize)> = None;
    while t < end {
        if let Some(Seg::GlobStar) = segs.get(p) {
            back = Some((p + 1, t));
            p += 1;
            continue;
        }
        let (part, next) = segment_at(path, t);
        if segs.get(p).is_some_and(|s| s.matches(part)) {
            p += 1;
            t = next;
            continue;
        }
        let Some((bp, bt)) = back else { return false };
        let (_, next) = segment_at(path, bt);
        back = Some((bp, next));
        p = bp;
        t = next;
    }
    segs[p..].iter().all(|s| matches!(s, Seg::GlobStar))
}

/// One line of an ignore file.
struct Rule {
    glob: Glob,
    negated: bool,
    dir_only: bool,
}

/// The rules of one directory; `prefix` is how many bytes of a path relative
/// to the walk's top directory to skip to get the path relative to it.
pub(super) struct RuleSet {
    prefix: usize,
    rules: Vec<Rule>,
}

/// The ignore rules in force for the directory being walked, shallowest first.
#[derive(Default)]
pub(super) struct Ignores {
    pub(super) sets: Vec<RuleSet>,
}

impl Ignores {
    /// Deeper sets win over shallower ones and later rules over earlier ones,
    /// so the first match found searching backwards decides.
    pub(super) fn is_ignored(&self, rel: &str, is_dir: bool) -> bool {
        for set in self.sets.iter().rev() {
            let sub = &rel[set.prefix..];
            for rule in set.rules.iter().rev() {
                if (!rule.dir_only || is_dir) && rule.glob.is_match(sub) {
                    return !rule.negated;
                }
            }
        }
        false
    }

    /// Reads the ignore files of `dir` (those for which `present` says yes)
    /// and pushes their rules; returns whether a set was pushed.
    pub(super) fn push_dir(
        &mut self,
        dir: &Path,
        rel: &str,
        present: impl Fn(&str) -> bool,
    ) -> bool {
        let mut rules = Vec::new();
        for name in IGNORE_FILES.iter().filter(|n| present(n)) {
            // A workspace's ignore file is read only if it is a regular
            // file of a sane size (not a pipe, not /dev/zero behind a link).
            if let Ok(bytes) = super::bounded::read_capped(&dir.join(name), IGNORE_FILE_CAP) {
                parse_ignore(&String::from_utf8_lossy(&bytes), &mut rules);
            }
        }
        if rules.is_empty() {
            return false;
        }
        let prefix = if rel.is_empty() { 0 } else { rel.len() + 1 };
        self.sets.push(RuleSet { prefix, rules });
        true
    }
}

fn parse_ignore(text: &str, rules: &mut Vec<Rule>) {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    for line in text.lines() {
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        // Trailing spaces are dropped unless escaped with a backslash.
        let bytes = line.as_bytes();
        let mut end = line.len();
        while end > 0 && bytes[end - 1] == b' ' && !(end >= 2 && bytes[end - 2] == b'\\') {
            end -= 1;
        }
        let line = &line[..end];
        let (negated, line) = match line.strip_prefix('!') {
            Some(rest) => (true, rest),
            None => (false, line),
        };
        let dir_only = line.ends_with('/');
        let line = line.trim_end_matches('/');
        if !line.is_empty() {
            let glob = Glob::new(line);
            rules.push(Rule {
                glob,
                negated,
                dir_only,
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::walk::tests::{files, Tree};

    #[test]
    fn glob_match_table() {
        let cases = [
            ("*.rs", "main.rs", true),
            ("*.rs", "src/deep/main.rs", true),
            ("*.rs", "main.rs.bak", false),
            ("src/*.rs", "src/main.rs", true),
            ("src/*.rs", "src/a/main.rs", false),
            ("src/*.rs", "x/src/main.rs", false),
            ("/src/*.rs", "src/main.rs", true),
            ("./src/*.rs", "src/main.rs", true),
            ("src/**/*.rs", "src/main.rs", true),
            ("src/**/*.rs", "src/a/b/main.rs", true),
            ("src/**/*.rs", "lib/main.rs", false),
            ("**/test", "a/b/test", true),
            ("**/test", "test", true),
            ("a/**", "a/b/c", true),
            ("a/**", "a", false),
            ("a/**/b", "a/b", true),
            ("a/**/b", "a/x/y/b", true),
            ("a/**/b", "a/x/y/c", false),
            ("a/**/**/b", "a/x/b", true),
            ("**", "any/thing", true),
            ("?.txt", "a.txt", true),
            ("?.txt", "ab.txt", false),
            ("a?b", "a/b", false),
            ("a*b/c", "axxb/c", true),
            ("a*", "a/b", false),
            ("[abc].md", "b.md", true),
            ("[abc].md", "d.md", false),
            ("[a-c]x", "bx", true),
            ("[!a]x", "ax", false),
            ("[!a]x", "bx", true),
            ("[]]x", "]x", true),
            ("\\*x", "*x", true),
            ("\\*x", "ax", false),
            ("[unclosed", "[unclosed", true),
            ("é?", "éß", true),
            ("*", ".hidden", true),
            ("*a*b*c", "xaybzc", true),
            ("*a*b*c", "xaybz", false),
        ];
        for (pattern, path, expected) in cases {
            assert_eq!(glob_match(pattern, path), expected, "{pattern} vs {path}");
        }
    }

    #[test]
    fn could_match_below_prunes_directories() {
        let g = Glob::new("src/**/*.rs");
        assert!(g.could_match_below("src") && g.could_match_below("src/a/b"));
        assert!(!g.could_match_below("target"));
        let g = Glob::new("src/*.rs");
        assert!(g.could_match_below("src") && !g.could_match_below("src/a"));
        assert!(Glob::new("*.rs").could_match_below("anything/at/all"));
    }

    #[test]
    fn gitignore_features() {
        // Comments, blank lines, negation, directory-only rules, anchoring by
        // a leading or inner slash, `**` forms, classes, escapes, and
        // trailing spaces.
        let ignore = "# a comment\n\n*.log\n!keep.log\nbuild/\n/top.txt\ndoc/*.tmp\n\
                      **/gen\nvendor/**\n!vendor/ok.txt\n\\#hash\n\\!bang\n[ab].x\n?q\ntrail   \n";
        let tree = Tree::new(
            "a.log keep.log sub/b.log sub/keep.log build/out sub/deeper/build/out build.rs \
             top.txt sub/top.txt doc/a.tmp doc/deep/a.tmp x/gen/g.rs gen/g.rs vendor/lib.rs \
             vendor/ok.txt #hash !bang a.x c.x zq zzq trail .git/config .hidden",
            &[
                (".gitignore", ignore),
                ("sub/build", "a file, so `build/` spares it"),
            ],
        );
        let expected = ".gitignore .hidden build.rs c.x doc/deep/a.tmp keep.log sub/build \
                        sub/keep.log sub/top.txt vendor/ok.txt zzq";
        assert_eq!(files(&tree.0, &tree.0), expected);
    }
}

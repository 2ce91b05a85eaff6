//! Command patterns: a rule's words (an unquoted `*` inside a word
//! matches any characters of that word, a lone `*` any words), the
//! programs that run others, and the narrow match of an allow rule. The
//! model's output is untrusted, so an allow matches only one plain command
//! the parser fully understands, word by word from the first, a `*` never
//! crossing a `/`. Also the prefix an "always allow" answer offers.

use crate::policy::shell::{self, Operator, Redirect, Script, Simple};

/// Programs that run another command given in their arguments (or read a
/// script). A line starting with one matches an allow rule only when its
/// words are exactly the rule's (an allow of `env` must not allow
/// `env rm -rf /`); for deny and ask, the rule is looked for anywhere in
/// the rest of such a line.
pub(super) const RUNS_COMMANDS: &[&str] = &[
    "command", "exec", "env", "builtin", "eval", "nice", "nohup", "timeout", "stdbuf", "setsid",
    "ionice", "chrt", "taskset", "sudo", "doas", "su", "xargs", "chroot", "unshare", "nsenter",
    "flock", "watch", "strace", "ltrace", "time", "busybox", "parallel", "sh", "bash", "dash",
    "zsh", "ksh", "mksh", "fish", "source", ".",
];

/// Programs whose arguments are programs of their own (`find -exec`, sed's
/// `e` and `w`, awk's `system()`): approving one line of them is never
/// offered as a prefix, only as that exact line.
const NO_PREFIX_OFFER: &[&str] = &["find", "fd", "sed", "gsed", "awk", "gawk", "mawk", "nawk"];

/// Programs whose first word decides what they do (a subcommand, a
/// script): with an option there instead, no prefix is offered.
const NEEDS_SUBCOMMAND: &[&str] = &[
    "git",
    "cargo",
    "npm",
    "npx",
    "pnpm",
    "yarn",
    "docker",
    "podman",
    "kubectl",
    "go",
    "gh",
    "python",
    "python3",
    "node",
    "deno",
    "bun",
    "perl",
    "ruby",
    "php",
    "lua",
    "make",
    "ssh",
    "rsync",
    "systemctl",
];

/// Programs that may run a command given in their arguments only for deny
/// and ask (`find -exec`): allowing `find .` stays useful.
pub(super) const RUNS_COMMANDS_DENY_ONLY: &[&str] = &["find", "fd"];

pub(super) fn basename(word: &str) -> &str {
    word.rsplit('/').next().unwrap_or(word)
}

/// One word of a command pattern.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Pattern {
    /// A lone unquoted `*`: any words, none included.
    Rest,
    /// A word, as the literal pieces between its unquoted `*`s (one piece:
    /// no wildcard). A `*` matches any characters within the word; for an
    /// allow, never a `/`.
    Word(Vec<String>),
}

impl Pattern {
    fn from_word(word: &shell::Word) -> Pattern {
        let stars: Vec<usize> = word
            .globs
            .iter()
            .copied()
            .filter(|&at| word.text.as_bytes()[at] == b'*')
            .collect();
        if word.text == "*" && stars == [0] {
            return Pattern::Rest;
        }
        let mut pieces = Vec::new();
        let mut from = 0;
        for at in stars {
            pieces.push(word.text[from..at].to_string());
            from = at + 1;
        }
        pieces.push(word.text[from..].to_string());
        Pattern::Word(pieces)
    }

    /// A word of a rule that fails the check, split at blanks: every `*`
    /// is a wildcard.
    pub(super) fn loose(text: &str) -> Pattern {
        if text == "*" {
            Pattern::Rest
        } else {
            Pattern::Word(text.split('*').map(str::to_string).collect())
        }
    }

    /// The word without wildcards, if it has none.
    pub(super) fn literal(&self) -> Option<&str> {
        match self {
            Pattern::Word(pieces) if pieces.len() == 1 => Some(&pieces[0]),
            _ => None,
        }
    }
}

/// The words of a rule's command pattern: one plain command, no
/// operators, assignments or redirections; `*` is the only wildcard.
pub(super) fn pattern_words(command: &str) -> Result<Vec<Pattern>, String> {
    let script = shell::parse(command).map_err(|refusal| refusal.0.to_string())?;
    let simple = single_command(&script).ok_or("it has more than one command")?;
    if !simple.assignments.is_empty() {
        return Err("it sets variables".into());
    }
    if !simple.redirects.is_empty() {
        return Err("it has a redirection".into());
    }
    if simple.words.is_empty() {
        return Err("it has no words".into());
    }
    for word in &simple.words {
        if let Some(&at) = word
            .globs
            .iter()
            .find(|&&at| word.text.as_bytes()[at] != b'*')
        {
            let c = &word.text[at..at + 1];
            return Err(format!(
                "`{}`: only `*` is a wildcard in a command pattern \
                 (quote `{c}` to match it as written)",
                word.text
            ));
        }
    }
    Ok(simple.words.iter().map(Pattern::from_word).collect())
}

/// The line's only simple command (trailing newlines allowed).
fn single_command(script: &Script) -> Option<&Simple> {
    match script.commands.as_slice() {
        [simple] if script.operators.iter().all(|op| *op == Operator::Newline) => Some(simple),
        _ => None,
    }
}

/// Whether `text` is the pieces with anything between each two.
pub(super) fn star_match(pieces: &[String], text: &str) -> bool {
    match pieces {
        [] => text.is_empty(),
        [only] => text == only,
        [first, middle @ .., last] => {
            let Some(rest) = text.strip_prefix(first.as_str()) else {
                return false;
            };
            if rest.len() < last.len() {
                return false;
            }
            let Some(mut rest) = rest.strip_suffix(last.as_str()) else {
                return false;
            };
            for piece in middle {
                match rest.find(piece.as_str()) {
                    Some(at) => rest = &rest[at + piece.len()..],
                    None => return false,
                }
            }
            true
        }
    }
}

/// `star_match` for an allow: a `*` never matches `/`, so the pattern's
/// slashes are the word's, and a `.` or `..` component of the word must be
/// written in the pattern (`src/*` does not allow `src/..`).
fn strict_match(pieces: &[String], text: &str) -> bool {
    // The parser refuses NUL, so it cannot be in a word of the line.
    let joined = pieces.join("\0");
    let pattern: Vec<&str> = joined.split('/').collect();
    let components: Vec<&str> = text.split('/').collect();
    pattern.len() == components.len()
        && pattern.iter().zip(&components).all(|(p, c)| {
            let pieces: Vec<String> = p.split('\0').map(str::to_string).collect();
            let dots = matches!(*c, "." | "..");
            star_match(&pieces, c) && (!dots || p == c)
        })
}

/// An allow rule's pattern matches: the line parses, is one simple
/// command without assignments, whose redirections only touch `/dev/null`
/// or duplicate descriptors, and whose words are the pattern's, word by
/// word from the first (`strict_match`, never a glob of the line), a lone
/// `*` standing for any words, with any words after. A line of a program
/// in `RUNS_COMMANDS` must be the pattern, with no word more (a `*` there
/// stands for none).
pub(super) fn allow_matches(line: &str, pattern: &[Pattern]) -> bool {
    let Ok(script) = shell::parse(line) else {
        return false;
    };
    let Some(simple) = single_command(&script) else {
        return false;
    };
    if !simple.assignments.is_empty() || simple.piped || pattern.is_empty() {
        return false;
    }
    let harmless = simple.redirects.iter().all(|redirect| match redirect {
        Redirect::Read(target) | Redirect::Write(target) => {
            target.text == "/dev/null" && target.glob_at.is_none()
        }
        Redirect::Duplicate => true,
        Redirect::HereDoc => false,
    });
    let Some(first) = simple.words.first() else {
        return false;
    };
    if !harmless {
        return false;
    }
    let exact = RUNS_COMMANDS.contains(&basename(&first.text));
    let words = &simple.words;
    // matched[i][j]: pattern[i..] matches words[j..].
    let (p, n) = (pattern.len(), words.len());
    let mut matched = vec![vec![false; n + 1]; p + 1];
    for (j, end) in matched[p].iter_mut().enumerate() {
        *end = !exact || j == n;
    }
    for i in (0..p).rev() {
        for j in (0..=n).rev() {
            matched[i][j] = match &pattern[i] {
                Pattern::Rest => matched[i + 1][j] || (!exact && j < n && matched[i][j + 1]),
                Pattern::Word(pieces) => {
                    j < n
                        && words[j].glob_at.is_none()
                        && strict_match(pieces, &words[j].text)
                        && matched[i + 1][j + 1]
                }
            };
        }
    }
    matched[0][0]
}

/// Quotes `word` for a command line when it needs it.
fn quote(word: &str, first: bool) -> String {
    let plain = !word.is_empty()
        && word
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./:@%+,=".contains(c))
        && !(first && word.contains('='));
    if plain {
        word.to_string()
    } else {
        format!("'{}'", word.replace('\'', "'\\''"))
    }
}

/// The prefix an "always allow `X …`" answer offers for `line`: the program
/// and, unless the program is a path or the next word is an option, a glob
/// or empty, the next word (`cargo test --lib x` → `cargo test`, `ls -la` →
/// `ls`, `./x.sh a` → `./x.sh`). `None` unless the line is one simple
/// command without redirections or assignments, of a program that does not
/// run another (`env`, `sudo`, `sh`, …).
pub(crate) fn command_prefix(line: &str) -> Option<String> {
    let script = shell::parse(line).ok()?;
    let simple = single_command(&script)?;
    if !simple.assignments.is_empty() || !simple.redirects.is_empty() {
        return None;
    }
    let first = simple.words.first()?;
    if first.text.is_empty() || first.glob_at.is_some() {
        return None;
    }
    let program = basename(&first.text);
    if RUNS_COMMANDS.contains(&program) || NO_PREFIX_OFFER.contains(&program) {
        return None;
    }
    let mut words = vec![first.text.clone()];
    if !first.text.contains('/') {
        let second = simple.words.get(1).filter(|second| {
            !second.text.is_empty() && !second.text.starts_with('-') && second.glob_at.is_none()
        });
        match second {
            Some(second) => words.push(second.text.clone()),
            // `python -c …`, `git -c … log`: the program alone would
            // allow everything it can do.
            None if NEEDS_SUBCOMMAND.contains(&program) => return None,
            None => {}
        }
    }
    let text = words
        .iter()
        .enumerate()
        .map(|(i, w)| quote(w, i == 0))
        .collect::<Vec<_>>()
        .join(" ");
    // What is offered must read back as these words and match the line.
    let written: Vec<Pattern> = words
        .iter()
        .map(|w| Pattern::Word(vec![w.clone()]))
        .collect();
    let round_trip = pattern_words(&text).is_ok_and(|back| back == written);
    (round_trip && allow_matches(line, &written)).then_some(text)
}

#[cfg(test)]
mod tests {
    use super::super::tests::{decide_line, user};
    use super::super::{Decision, Rule};
    use super::*;

    #[test]
    fn a_lone_star_stands_for_any_words() {
        let set = user(vec![
            Rule::command("cargo test *", Decision::Allow),
            Rule::command("git * --oneline", Decision::Allow),
            Rule::command("env *", Decision::Allow),
        ]);
        for line in [
            "cargo test",
            "cargo test --lib x",
            "git log --oneline",
            "git log -3 --oneline",
            "git --oneline",
            "env",
        ] {
            assert_eq!(decide_line(&set, line), Some(Decision::Allow), "{line:?}");
        }
        for line in [
            "cargo testx",
            "git log",
            "git log --oneline; rm x",
            // A program that runs another: the pattern is the whole line.
            "env rm -rf /",
        ] {
            assert_eq!(decide_line(&set, line), None, "{line:?}");
        }
        let set = user(vec![Rule::command("git push * --force", Decision::Deny)]);
        assert_eq!(
            decide_line(&set, "git push origin --force"),
            Some(Decision::Deny)
        );
        assert_eq!(decide_line(&set, "git push origin"), None);
    }

    #[test]
    fn an_allow_star_stays_in_its_word_and_its_folder() {
        let set = user(vec![
            Rule::command("cat src/*", Decision::Allow),
            Rule::command("touch build-*", Decision::Allow),
            Rule::command("make test-*-fast", Decision::Allow),
        ]);
        for line in [
            "cat src/a.rs",
            "cat src/",
            "touch build-1",
            "touch build-1 build-2",
            "make test-unit-fast",
        ] {
            assert_eq!(decide_line(&set, line), Some(Decision::Allow), "{line:?}");
        }
        for line in [
            "cat src/../secret",
            "cat src/..",
            "cat src/a/b.rs",
            "cat src/*.rs",
            "cat srcx/a.rs",
            "touch build-1/../../x",
            "touch build-*",
            "touch build-1; rm x",
            "touch build-1 && rm x",
            "make test-unit",
        ] {
            assert_eq!(decide_line(&set, line), None, "{line:?}");
        }
    }

    #[test]
    fn star_matching_of_pieces() {
        let pieces = |p: &str| p.split('*').map(str::to_string).collect::<Vec<_>>();
        for (pattern, text, hit) in [
            ("a*", "a", true),
            ("a*", "abc", true),
            ("a*", "ba", false),
            ("*a", "ba", true),
            ("*", "", true),
            ("a*b", "ab", true),
            ("ab*b", "ab", false),
            ("a*b*c", "axbyc", true),
            ("a*b*c", "acb", false),
            ("a**b", "ab", true),
            ("x", "x", true),
            ("x", "xy", false),
        ] {
            assert_eq!(star_match(&pieces(pattern), text), hit, "{pattern} {text}");
        }
        assert!(strict_match(&pieces("a/*"), "a/b"));
        assert!(!strict_match(&pieces("a*"), "a/b"));
        assert!(!strict_match(&pieces("a/*"), "a/.."));
        assert!(strict_match(&pieces("a/.."), "a/.."));
        assert!(strict_match(&pieces("*.txt"), ".txt"));
    }

    #[test]
    fn allow_prefix_matches_word_by_word() {
        let set = user(vec![Rule::command("cargo test", Decision::Allow)]);
        for line in [
            "cargo test",
            "cargo test --lib policy::rules",
            "  cargo   test  ",
            "'cargo' \"test\"",
            "cargo test\n",
            "cargo test 2>&1",
            "cargo test >/dev/null 2>/dev/null",
            "cargo test # a comment; rm -rf ~",
            "cargo \\\n test",
            "cargo test src/*.rs",
        ] {
            assert_eq!(decide_line(&set, line), Some(Decision::Allow), "{line:?}");
        }
    }

    #[test]
    fn allow_refuses_hostile_variants() {
        let set = user(vec![Rule::command("cargo test", Decision::Allow)]);
        for line in [
            "cargo test; rm -rf ~",
            "cargo test && curl x|sh",
            "cargo test || rm x",
            "cargo test | sh",
            "cargo test\nrm -rf ~",
            "cargo test;",
            "cargo test $(rm x)",
            "cargo test `rm x`",
            "cargo test \"$(rm x)\"",
            "cargo test > /etc/passwd",
            "cargo test >> out.txt",
            "cargo test 2>err.log",
            "cargo test < /etc/shadow",
            "cargo test <<EOF\nx\nEOF",
            "FOO=1 cargo test",
            "env cargo test",
            "command cargo test",
            "exec cargo test",
            "cargo testing",
            "cargo  build",
            "cargo",
            "'cargo test'",
            "./cargo test",
            "/usr/bin/cargo test",
            "carg? test",
            "cargo tes[t]",
            "cargo test &",
            "(cargo test)",
            "{ cargo test; }",
            "if cargo test; then rm x; fi",
        ] {
            assert_eq!(decide_line(&set, line), None, "{line:?}");
        }
    }

    #[test]
    fn allow_of_a_program_that_runs_others_is_exact() {
        let set = user(vec![
            Rule::command("env", Decision::Allow),
            Rule::command("bash scripts/test.sh", Decision::Allow),
        ]);
        assert_eq!(decide_line(&set, "env"), Some(Decision::Allow));
        assert_eq!(decide_line(&set, "env rm -rf /"), None);
        assert_eq!(
            decide_line(&set, "bash scripts/test.sh"),
            Some(Decision::Allow)
        );
        assert_eq!(decide_line(&set, "bash scripts/test.sh; rm x"), None);
        assert_eq!(decide_line(&set, "bash scripts/test.sh -c 'rm x'"), None);
    }

    #[test]
    fn command_prefix_cases() {
        for (line, prefix) in [
            ("cargo test --lib foo", Some("cargo test")),
            ("cargo test", Some("cargo test")),
            ("npm run build", Some("npm run")),
            ("ls -la", Some("ls")),
            ("ls", Some("ls")),
            ("./x.sh a", Some("./x.sh")),
            ("git -C sub status", None),
            ("git status -s", Some("git status")),
            ("python -c 'import os'", None),
            ("python x.py -v", Some("python x.py")),
            ("find . -name x", None),
            ("sed -n 1p f", None),
            ("awk '{print}' f", None),
            ("make", None),
            ("ls *.rs", Some("ls")),
            ("ls -- x", Some("ls")),
            ("'my tool' sub x", Some("'my tool' sub")),
            ("python \"it's.py\"", Some("python 'it'\\''s.py'")),
            ("cargo test\n", Some("cargo test")),
            ("cargo test > out.txt", None),
            ("cargo test 2>/dev/null", None),
            ("FOO=1 cargo test", None),
            ("cargo test && ls", None),
            ("cargo test | head", None),
            ("cargo test $(x)", None),
            ("env cargo test", None),
            ("sudo apt install x", None),
            ("bash script.sh", None),
            ("*.sh x", None),
            ("", None),
        ] {
            assert_eq!(command_prefix(line).as_deref(), prefix, "{line:?}");
        }
        // What is offered is a valid rule that allows the line.
        for line in [
            "'my tool' sub x",
            "python \"it's.py\" -v",
            "cargo test --lib",
        ] {
            let rule = Rule::command(command_prefix(line).unwrap(), Decision::Allow);
            rule.check().unwrap();
            assert_eq!(decide_line(&user(vec![rule]), line), Some(Decision::Allow));
        }
    }
}

//! The broad match of a deny or ask rule's command pattern: any command
//! of the line, through wrappers such as `env` or `sh -c`, the loose words
//! of a line the parser refuses; options in any order and cluster, other
//! words in order with anything between. A deny rule is still a
//! convenience, not a boundary: `rm --recursive` is not `rm -r`, and a
//! command can be spelled in ways no pattern sees.

use super::command::{basename, star_match, Pattern, RUNS_COMMANDS, RUNS_COMMANDS_DENY_ONLY};
use crate::policy::shell::{self, Redirect, Simple};

/// A word of the line against a word of a deny rule's pattern: the pattern
/// matches it, or its last path component when the pattern has no `/`
/// (`/bin/rm` is `rm`, `./precious.txt` is `precious.txt`), or it is a
/// glob the shell could expand to the pattern's text.
fn word_hits(word: &str, is_glob: bool, pieces: &[String], program: bool) -> bool {
    let hits = |word: &str| {
        star_match(pieces, word)
            || (is_glob && crate::tools::ignore::glob_match(word, &pieces.join("*")))
    };
    if pieces.iter().any(|p| p.contains('/')) {
        return hits(word);
    }
    let last = basename(word.trim_end_matches('/'));
    (!program && hits(word)) || hits(last)
}

/// Whether a pattern word is an option: `-x…` or `--name…`, without `*`.
fn option_of(pattern: &Pattern) -> Option<&str> {
    pattern
        .literal()
        .filter(|text| text.len() > 1 && text.starts_with('-') && *text != "--")
}

/// The last index of `words` from which on the option `option` of a deny
/// rule is still given (`None`: nowhere): the same word, a long option by
/// its name (abbreviated too: getopt takes any unambiguous prefix), each
/// letter of a short cluster in some cluster of the line (`-rf` is given
/// by `-fr` and by `-r -f`), or a glob that could expand to it.
fn option_latest(option: &str, words: &[(String, bool)]) -> Option<usize> {
    let last = |given: &dyn Fn(&str, bool) -> bool| words.iter().rposition(|(w, g)| given(w, *g));
    let glob_hits =
        |w: &str, glob: bool, text: &str| glob && crate::tools::ignore::glob_match(w, text);
    let whole = last(&|w, glob| w == option || glob_hits(w, glob, option));
    if let Some(long) = option.strip_prefix("--") {
        if long.contains('=') {
            return whole;
        }
        let named = last(&|w, _| {
            let name = w.split('=').next().unwrap_or("");
            name.len() > 2 && name.starts_with("--") && long.starts_with(&name[2..])
        });
        return whole.max(named);
    }
    // Every letter from some word on: the earliest of their last places.
    let mut letters: Option<usize> = Some(usize::MAX);
    for c in option[1..].chars() {
        let short = format!("-{c}");
        let at = last(&|w, glob| {
            (w.len() > 1 && w.starts_with('-') && !w.starts_with("--") && w[1..].contains(c))
                || glob_hits(w, glob, &short)
        });
        letters = letters.zip(at).map(|(a, b)| a.min(b));
    }
    whole.max(letters)
}

/// The last index of `words` from which on the rest of a deny rule's
/// pattern (after its program) is still met (`None`: nowhere): each
/// option given anywhere there (`option_latest`); the other words of the
/// pattern matching words there in the same order, though other words may
/// come between them (`rm -rf /` is met by `-f -r x /`). A lone `*` adds
/// nothing. Linear in the words, so a line of any length is judged fast.
fn rest_latest(words: &[(String, bool)], pattern: &[Pattern]) -> Option<usize> {
    let mut latest = words.len();
    let mut operands = Vec::new();
    for p in pattern {
        match (p, option_of(p)) {
            (Pattern::Rest, _) => {}
            (_, Some(option)) => latest = latest.min(option_latest(option, words)?),
            (Pattern::Word(pieces), None) => operands.push(pieces),
        }
    }
    // The operands matched as late as they can be, from the end.
    let mut wanted = operands.len();
    let mut at = words.len();
    while wanted > 0 {
        at = words[..at]
            .iter()
            .rposition(|(word, glob)| word_hits(word, *glob, operands[wanted - 1], false))?;
        wanted -= 1;
    }
    Some(latest.min(at))
}

/// A deny or ask rule's pattern against words, generously: the program
/// matches a word (the first, or with `anywhere` any word; a pattern that
/// starts with a lone `*` needs none) and the rest of the pattern is met
/// by the words after it (`rest_latest`).
fn hits(words: &[(String, bool)], pattern: &[Pattern], anywhere: bool) -> bool {
    match pattern.split_first() {
        None => true,
        Some((Pattern::Rest, more)) => rest_latest(words, more).is_some(),
        Some((Pattern::Word(program), more)) => {
            let Some(latest) = rest_latest(words, more) else {
                return false;
            };
            let starts = if anywhere { words.len() } else { 1 };
            words
                .iter()
                .take(starts.min(latest))
                .any(|(word, glob)| word_hits(word, *glob, program, true))
        }
    }
}

/// One command's words: the pattern begins at its program.
fn command_hits(words: &[(String, bool)], pattern: &[Pattern]) -> bool {
    hits(words, pattern, false)
}

/// Loose words: the pattern may begin at any of them.
fn hits_anywhere(words: &[(String, bool)], pattern: &[Pattern]) -> bool {
    hits(words, pattern, true)
}

/// Characters that end a word when text is split loosely.
fn loose_break(c: char) -> bool {
    c.is_whitespace()
        || matches!(
            c,
            ';' | '&' | '|' | '(' | ')' | '<' | '>' | '{' | '}' | '`' | '$' | ','
        )
}

/// Characters dropped when text is split loosely.
fn loose_quote(c: char) -> bool {
    matches!(c, '\'' | '"' | '\\')
}

/// The words of text the parser refused (or that a wrapper runs), found
/// loosely: quotes and backslashes dropped, split at blanks and at every
/// shell operator or expansion character. Each word tells whether it could
/// be a glob.
fn raw_words(text: &str) -> Vec<(String, bool)> {
    let mut words = Vec::new();
    let mut current = String::new();
    for c in text.chars() {
        if loose_quote(c) {
            continue;
        }
        if loose_break(c) {
            if !current.is_empty() {
                words.push(std::mem::take(&mut current));
            }
        } else {
            current.push(c);
        }
    }
    if !current.is_empty() {
        words.push(current);
    }
    words
        .into_iter()
        .map(|w| {
            let glob = w.contains(['*', '?', '[']);
            (w, glob)
        })
        .collect()
}

/// A pattern split the way `raw_words` splits a line, so that a quoted
/// word of the rule (`'my tool'`) meets the loose words of a line.
fn raw_pattern(pattern: &[Pattern]) -> Vec<Pattern> {
    let mut out = Vec::new();
    for word in pattern {
        let Pattern::Word(pieces) = word else {
            out.push(Pattern::Rest);
            continue;
        };
        let mut current = vec![String::new()];
        let flush = |current: &mut Vec<String>, out: &mut Vec<Pattern>| {
            if current.len() > 1 || !current[0].is_empty() {
                out.push(Pattern::Word(std::mem::replace(
                    current,
                    vec![String::new()],
                )));
            }
        };
        for (index, piece) in pieces.iter().enumerate() {
            if index > 0 {
                current.push(String::new());
            }
            for c in piece.chars() {
                if loose_quote(c) {
                    continue;
                }
                if loose_break(c) {
                    flush(&mut current, &mut out);
                } else if let Some(last) = current.last_mut() {
                    last.push(c);
                }
            }
        }
        flush(&mut current, &mut out);
    }
    out
}

fn raw_hits(text: &str, pattern: &[Pattern]) -> bool {
    let pattern = raw_pattern(pattern);
    !pattern.is_empty() && hits_anywhere(&raw_words(text), &pattern)
}

/// A deny or ask rule's pattern matches (`command_hits`): some simple
/// command of the line (assignments are not words); or, when a command is
/// a program that runs another, its arguments taken loosely; or, when the
/// line does not parse (or feeds a here-document, which a shell could
/// run), the loose words of the whole line, from any word on.
pub(super) fn deny_matches(line: &str, pattern: &[Pattern]) -> bool {
    if pattern.is_empty() {
        return true;
    }
    let Ok(script) = shell::parse(line) else {
        return raw_hits(line, pattern);
    };
    let simple_hits = |simple: &Simple| {
        let words: Vec<(String, bool)> = simple
            .words
            .iter()
            .map(|w| (w.text.clone(), w.glob_at.is_some()))
            .collect();
        if command_hits(&words, pattern) {
            return true;
        }
        let Some(first) = simple.words.first() else {
            return false;
        };
        let program = basename(&first.text);
        if RUNS_COMMANDS.contains(&program) || RUNS_COMMANDS_DENY_ONLY.contains(&program) {
            let rest: Vec<&str> = simple.words[1..].iter().map(|w| w.text.as_str()).collect();
            return raw_hits(&rest.join(" "), pattern);
        }
        false
    };
    if script.commands.iter().any(simple_hits) {
        return true;
    }
    let heredoc = script
        .commands
        .iter()
        .any(|c| c.redirects.contains(&Redirect::HereDoc));
    heredoc && raw_hits(line, pattern)
}

#[cfg(test)]
mod tests {
    use super::super::tests::{decide_line, user};
    use super::super::{Decision, Rule};
    use crate::policy::shell;

    #[test]
    fn a_star_inside_a_word_matches_within_the_word() {
        let set = user(vec![
            Rule::command("touch build-*", Decision::Deny),
            Rule::command("rm -f precious*", Decision::Deny),
            Rule::command("git push origin release-*-final", Decision::Ask),
        ]);
        for line in [
            "touch build-1",
            "touch build-",
            "touch build-1/x",
            "touch a build-x",
            "rm -f precious.txt",
            "rm -f precious",
            "rm precious.txt -f",
            "rm -f ./precious.txt",
            "rm -f sub/precious.txt",
            "rm -vf precious.txt",
        ] {
            assert_eq!(decide_line(&set, line), Some(Decision::Deny), "{line:?}");
        }
        for line in [
            "git push origin release-1.2-final",
            "git push origin release--final",
        ] {
            assert_eq!(decide_line(&set, line), Some(Decision::Ask), "{line:?}");
        }
        for line in [
            "touch build",
            "touch xbuild-1",
            "touch other",
            "touchy build-1",
            "echo touch build-1",
            "rm precious.txt",
            "rm -f keep.txt",
            "git push origin release-1.2",
            "git push origin release-final",
        ] {
            assert_eq!(decide_line(&set, line), None, "{line:?}");
        }
        // Quoted, a `*` is itself.
        let set = user(vec![Rule::command("echo '*'", Decision::Deny)]);
        assert_eq!(decide_line(&set, "echo '*'"), Some(Decision::Deny));
        assert_eq!(decide_line(&set, "echo a"), None);
    }

    #[test]
    fn deny_and_ask_catch_the_command_wherever_the_line_runs_it() {
        let set = user(vec![Rule::command("touch build-*", Decision::Deny)]);
        for line in [
            "true && touch build-1",
            "echo ok; touch build-2",
            "ls | touch build-3",
            "sh -c 'touch build-1'",
            "bash -c \"cd x && touch build-9\"",
            "env touch build-1",
            "nice -n 5 touch build-1",
            "find . -exec touch build-1 ';'",
            "echo $(touch build-1)",
            "touch build-$N",
            "FOO=1 touch build-1",
            "/usr/bin/touch build-1",
            "t?uch build-1",
            "touch build-?",
            "touch b*",
            "sh <<EOF\ntouch build-1\nEOF",
        ] {
            assert_eq!(decide_line(&set, line), Some(Decision::Deny), "{line:?}");
        }
        let set = user(vec![Rule::command("git push", Decision::Ask)]);
        assert_eq!(
            decide_line(&set, "git status && git push"),
            Some(Decision::Ask)
        );
        assert_eq!(decide_line(&set, "git -C sub push"), Some(Decision::Ask));
    }

    #[test]
    fn deny_options_match_in_any_order_and_spelling_of_the_cluster() {
        let set = user(vec![
            Rule::command("rm -rf /", Decision::Deny),
            Rule::command("git push --force", Decision::Deny),
        ]);
        for line in [
            "rm -rf /",
            "rm -fr /",
            "rm -r -f /",
            "rm -f / -r",
            "rm / -rf",
            "rm -rfv /",
            "rm -rf x /",
            "rm -r* /",
            "git push --force",
            "git push origin main --force",
            "git push --force origin main",
            "git push --forc",
            "git -C sub push --force",
            "git push --force=yes",
        ] {
            assert_eq!(decide_line(&set, line), Some(Decision::Deny), "{line:?}");
        }
        // Not the same option: a long name for a short one, another letter.
        for line in [
            "rm -r /",
            "rm -Rf /",
            "rm --recursive --force /",
            "rm -rf x",
            "git push -f",
            "git push --force-with-lease",
            "git push",
        ] {
            assert_eq!(decide_line(&set, line), None, "{line:?}");
        }
    }

    #[test]
    fn a_long_line_is_judged_whole() {
        // Past what the parser takes, the line's loose words are matched:
        // padding does not hide the command, however much of it there is
        // (and the matching stays linear in the words).
        let set = user(vec![Rule::command("rm -rf /", Decision::Deny)]);
        let padding = "rm -r x; echo -f; ".repeat(50_000);
        let line = format!("{padding}rm -rf /");
        assert!(line.len() > shell::MAX_LINE);
        assert_eq!(decide_line(&set, &line), Some(Decision::Deny));
        let harmless = format!("{padding}ls -rf");
        assert_eq!(decide_line(&set, &harmless), None);
    }

    #[test]
    fn deny_catches_compounds_wrappers_and_unparseable_lines() {
        let set = user(vec![
            Rule::command("cargo", Decision::Allow),
            Rule::command("rm -rf", Decision::Deny),
        ]);
        for line in [
            "rm -rf /",
            "rm -rf",
            "cargo build && rm -rf ~",
            "ls | rm -rf x",
            "cargo test; rm -rf target",
            "FOO=1 rm -rf x",
            "/bin/rm -rf x",
            "\\rm -rf x",
            "'rm' '-rf' x",
            "r? -rf x",
            "rm -r* x",
            "echo $(rm -rf /)",
            "echo \"$(rm -rf /)\"",
            "echo `rm -rf /`",
            "x=$(rm -rf /)",
            "(rm -rf /)",
            "{ rm -rf /; }",
            "if true; then rm -rf /; fi",
            "rm -rf $HOME",
            "r''m -rf $HOME",
            "env rm -rf /",
            "env -i FOO=1 rm -rf /",
            "command rm -rf /",
            "exec rm -rf /",
            "sudo -u root rm -rf /",
            "nice -n 10 rm -rf /",
            "timeout 5 rm -rf /",
            "xargs rm -rf",
            "sh -c 'rm -rf /'",
            "bash -c \"cd /;rm -rf *\"",
            "env sh -c 'rm -rf /'",
            "find . -exec rm -rf '{}' +",
            "find . -exec rm -rf {} +",
            "bash <<EOF\nrm -rf /\nEOF",
            "cargo test & rm -rf /",
        ] {
            assert_eq!(decide_line(&set, line), Some(Decision::Deny), "{line:?}");
        }
        for line in [
            "rm -r x",
            "rm x",
            "echo rm -rf",
            "git commit -m 'rm -rf'",
            "rmdir -rf",
            "cargo test",
        ] {
            assert_ne!(decide_line(&set, line), Some(Decision::Deny), "{line:?}");
        }
        assert_eq!(decide_line(&set, "cargo test"), Some(Decision::Allow));
    }

    #[test]
    fn ask_matches_like_deny() {
        let set = user(vec![
            Rule::command("git", Decision::Allow),
            Rule::command("git push", Decision::Ask),
        ]);
        assert_eq!(decide_line(&set, "git status"), Some(Decision::Allow));
        assert_eq!(decide_line(&set, "git push"), Some(Decision::Ask));
        assert_eq!(
            decide_line(&set, "git add . && git push -f"),
            Some(Decision::Ask)
        );
        assert_eq!(decide_line(&set, "echo $(git push)"), Some(Decision::Ask));
        // Not an allow (the line does not parse), not an ask: no rule.
        assert_eq!(decide_line(&set, "git log $X"), None);
    }
}

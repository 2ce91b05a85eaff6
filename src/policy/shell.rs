//! A parser of shell command lines into words, for judging what a command
//! does before it runs.
//!
//! It exists because the approval policy must know exactly which programs a
//! line runs and with which arguments; matching patterns on the raw string
//! lets a model step around the checks with quotes, escapes or clustered
//! options. The parser understands the part of the POSIX shell language that
//! means the same in `dash` and `bash` — words with quotes and escapes,
//! `;` `&&` `||` `|` and newlines, redirections with file descriptors, and
//! here-documents — and refuses everything else (expansions, substitutions,
//! globs it cannot bound, brace expansion, subshells, background jobs,
//! keywords). A refusal is not an error of the command: it only means the
//! line cannot be proven harmless, so the user is asked.

/// Longest line the parser looks at; longer ones are not judged.
pub(crate) const MAX_LINE: usize = 16 * 1024;
/// Most words (arguments plus redirection targets) in one line.
const MAX_WORDS: usize = 512;

/// One word after quote removal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Word {
    /// The word's text with quotes and escapes removed.
    pub text: String,
    /// Byte offset in `text` of the first unquoted glob character (`*`, `?`,
    /// `[`), if the word has one: the shell expands such a word into file
    /// names.
    pub glob_at: Option<usize>,
    /// Byte offsets in `text` of every unquoted glob character (the first
    /// is `glob_at`); a permission rule's pattern takes its `*`s as
    /// wildcards.
    pub globs: Vec<usize>,
    /// Whether any part of the word was quoted or escaped.
    pub quoted: bool,
}

/// What a redirection does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Redirect {
    /// `< file`: reads a file.
    Read(Word),
    /// `> file`, `>> file`, `>| file`: writes a file.
    Write(Word),
    /// `N>&M`, `N<&M`, `N>&-`: duplicates or closes a descriptor.
    Duplicate,
    /// `<< WORD` with a body that needs no expansion.
    HereDoc,
}

/// One simple command: assignments, words, redirections.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Simple {
    /// `NAME=value` words in front of the command.
    pub assignments: Vec<String>,
    pub words: Vec<Word>,
    pub redirects: Vec<Redirect>,
    /// Whether the command's output is piped into the next one (so it runs
    /// in a subshell of a pipeline).
    pub piped: bool,
}

/// A whole line: its simple commands in order, and the operators that
/// follow them (`operators[i]` after `commands[i]`; the last command may
/// have none).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Script {
    pub commands: Vec<Simple>,
    pub operators: Vec<Operator>,
}

/// Why a line could not be parsed into the supported subset.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Refusal(pub &'static str);

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.0)
    }
}

/// Words that are keywords of the shell at the start of a command.
const KEYWORDS: &[&str] = &[
    "if", "then", "else", "elif", "fi", "do", "done", "case", "esac", "while", "until", "for",
    "in", "function", "select", "time", "coproc", "!", "[[", "]]", "{", "}",
];

/// Operators between commands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Operator {
    Sequence,
    And,
    Or,
    Pipe,
    Newline,
}

#[derive(Debug)]
enum Token {
    Word(Word),
    Operator(Operator),
    Redirect(Redirect),
}

struct Lexer {
    chars: Vec<char>,
    at: usize,
    words: usize,
    /// Here-documents whose bodies start after the next newline: the
    /// delimiter, whether leading tabs are stripped, and whether the body is
    /// expanded (an unquoted delimiter).
    pending_heredocs: Vec<(String, bool, bool)>,
}

/// Parses `line`. Any construct outside the supported subset is refused.
pub(crate) fn parse(line: &str) -> Result<Script, Refusal> {
    if line.len() > MAX_LINE {
        return Err(Refusal("the command line is too long to judge"));
    }
    if line.contains('\0') {
        return Err(Refusal("the command line contains a NUL byte"));
    }
    let mut lexer = Lexer {
        chars: line.chars().collect(),
        at: 0,
        words: 0,
        pending_heredocs: Vec::new(),
    };
    let tokens = lexer.tokens()?;
    assemble(tokens)
}

/// Groups tokens into simple commands, checking that every operator joins
/// two commands.
fn assemble(tokens: Vec<Token>) -> Result<Script, Refusal> {
    let mut script = Script::default();
    let mut simple = Simple::default();
    // Whether the last operator needs a command after it (`&&`, `||`, `|`).
    let mut open = false;
    for token in tokens {
        match token {
            Token::Word(word) => {
                if simple.words.is_empty() && !word.quoted {
                    if KEYWORDS.contains(&word.text.as_str()) {
                        return Err(Refusal(
                            "shell keywords (if, for, while, …) are not understood",
                        ));
                    }
                    if is_assignment(&word.text) {
                        simple.assignments.push(word.text);
                        continue;
                    }
                }
                simple.words.push(word);
            }
            Token::Redirect(redirect) => simple.redirects.push(redirect),
            Token::Operator(operator) => {
                let empty = simple.words.is_empty()
                    && simple.assignments.is_empty()
                    && simple.redirects.is_empty();
                if empty {
                    match operator {
                        // Blank lines, and a line break after `&&`, are fine.
                        Operator::Newline => continue,
                        _ => return Err(Refusal("an operator without a command before it")),
                    }
                }
                simple.piped = operator == Operator::Pipe;
                open = matches!(operator, Operator::And | Operator::Or | Operator::Pipe);
                script.commands.push(std::mem::take(&mut simple));
                script.operators.push(operator);
            }
        }
    }
    let empty =
        simple.words.is_empty() && simple.assignments.is_empty() && simple.redirects.is_empty();
    if empty {
        if open {
            return Err(Refusal("the command line ends with an operator"));
        }
    } else {
        script.commands.push(simple);
    }
    if script.commands.is_empty() {
        return Err(Refusal("the command line is empty"));
    }
    Ok(script)
}

/// `NAME=…` with a valid variable name.
fn is_assignment(text: &str) -> bool {
    let Some((name, _)) = text.split_once('=') else {
        return false;
    };
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

impl Lexer {
    fn peek(&self) -> Option<char> {
        self.chars.get(self.at).copied()
    }

    fn peek_at(&self, offset: usize) -> Option<char> {
        self.chars.get(self.at + offset).copied()
    }

    fn tokens(&mut self) -> Result<Vec<Token>, Refusal> {
        let mut tokens = Vec::new();
        loop {
            self.skip_blanks();
            let Some(c) = self.peek() else {
                if !self.pending_heredocs.is_empty() {
                    return Err(Refusal("a here-document has no body"));
                }
                return Ok(tokens);
            };
            let token = match c {
                '#' => {
                    while self.peek().is_some_and(|c| c != '\n') {
                        self.at += 1;
                    }
                    continue;
                }
                '\n' => {
                    self.at += 1;
                    self.read_heredoc_bodies()?;
                    Token::Operator(Operator::Newline)
                }
                ';' => {
                    if self.peek_at(1) == Some(';') || self.peek_at(1) == Some('&') {
                        return Err(Refusal("`;;` belongs to a case statement"));
                    }
                    self.at += 1;
                    Token::Operator(Operator::Sequence)
                }
                '&' => {
                    if self.peek_at(1) != Some('&') {
                        return Err(Refusal("the command starts a background job"));
                    }
                    self.at += 2;
                    Token::Operator(Operator::And)
                }
                '|' => match self.peek_at(1) {
                    Some('|') => {
                        self.at += 2;
                        Token::Operator(Operator::Or)
                    }
                    Some('&') => return Err(Refusal("`|&` is not understood")),
                    _ => {
                        self.at += 1;
                        Token::Operator(Operator::Pipe)
                    }
                },
                '(' | ')' => return Err(Refusal("subshells and parentheses are not understood")),
                '<' | '>' => Token::Redirect(self.redirect()?),
                _ => {
                    // Digits right before `<` or `>` name the descriptor of
                    // a redirection.
                    let mut end = self.at;
                    while self.chars.get(end).is_some_and(char::is_ascii_digit) {
                        end += 1;
                    }
                    if end > self.at && matches!(self.chars.get(end), Some('<') | Some('>')) {
                        self.at = end;
                        Token::Redirect(self.redirect()?)
                    } else {
                        Token::Word(self.word()?)
                    }
                }
            };
            tokens.push(token);
        }
    }

    /// A redirection operator at the cursor and its target.
    fn redirect(&mut self) -> Result<Redirect, Refusal> {
        let first = self.peek();
        self.at += 1;
        let second = self.peek();
        if first == Some('<') {
            match second {
                Some('<') => {
                    self.at += 1;
                    if self.peek() == Some('<') {
                        return Err(Refusal("here-strings (`<<<`) are not understood"));
                    }
                    let strip = self.peek() == Some('-');
                    if strip {
                        self.at += 1;
                    }
                    self.skip_blanks();
                    let delimiter = self.word()?;
                    if delimiter.text.is_empty() {
                        return Err(Refusal("a here-document has no delimiter"));
                    }
                    let expands = !delimiter.quoted;
                    self.pending_heredocs.push((delimiter.text, strip, expands));
                    return Ok(Redirect::HereDoc);
                }
                Some('&') => {
                    self.at += 1;
                    return self.duplicate();
                }
                Some('>') => return Err(Refusal("`<>` redirections are not understood")),
                Some('(') => return Err(Refusal("process substitution is not understood")),
                _ => {
                    self.skip_blanks();
                    return Ok(Redirect::Read(self.target()?));
                }
            }
        }
        match second {
            Some('>') | Some('|') => self.at += 1,
            Some('&') => {
                self.at += 1;
                return self.duplicate();
            }
            Some('(') => return Err(Refusal("process substitution is not understood")),
            _ => {}
        }
        self.skip_blanks();
        Ok(Redirect::Write(self.target()?))
    }

    /// The rest of `N>&M` or `N<&M`: a descriptor number or `-`.
    fn duplicate(&mut self) -> Result<Redirect, Refusal> {
        let start = self.at;
        if self.peek() == Some('-') {
            self.at += 1;
        } else {
            while self.peek().is_some_and(|c| c.is_ascii_digit()) {
                self.at += 1;
            }
        }
        let ends = self
            .peek()
            .is_none_or(|c| matches!(c, ' ' | '\t' | '\n' | ';' | '&' | '|' | '<' | '>'));
        if self.at == start || !ends {
            // `>&file` writes to a file in bash and is an error in dash.
            return Err(Refusal("`>&` with a file name is not understood"));
        }
        Ok(Redirect::Duplicate)
    }

    fn target(&mut self) -> Result<Word, Refusal> {
        match self.peek() {
            None | Some('\n') | Some(';') | Some('&') | Some('|') | Some('<') | Some('>')
            | Some('(') | Some(')') => Err(Refusal("a redirection has no target")),
            _ => self.word(),
        }
    }

    /// Skips blanks and line continuations (a backslash before a newline).
    fn skip_blanks(&mut self) {
        loop {
            match self.peek() {
                Some(' ') | Some('\t') => self.at += 1,
                Some('\\') if self.peek_at(1) == Some('\n') => self.at += 2,
                _ => return,
            }
        }
    }

    /// One word: characters, quotes and escapes up to a blank or operator.
    fn word(&mut self) -> Result<Word, Refusal> {
        self.words += 1;
        if self.words > MAX_WORDS {
            return Err(Refusal("the command line has too many words to judge"));
        }
        let mut word = Word {
            text: String::new(),
            glob_at: None,
            globs: Vec::new(),
            quoted: false,
        };
        let start = self.at;
        while let Some(c) = self.peek() {
            match c {
                ' ' | '\t' | '\n' | ';' | '&' | '|' | '<' | '>' | '(' | ')' => break,
                '\\' => {
                    self.at += 1;
                    match self.peek() {
                        // A line continuation.
                        Some('\n') => self.at += 1,
                        Some(next) => {
                            word.text.push(next);
                            word.quoted = true;
                            self.at += 1;
                        }
                        None => return Err(Refusal("the command line ends with a backslash")),
                    }
                }
                '\'' => {
                    self.at += 1;
                    word.quoted = true;
                    loop {
                        match self.peek() {
                            None => return Err(Refusal("a single quote is not closed")),
                            Some('\'') => {
                                self.at += 1;
                                break;
                            }
                            Some(inner) => {
                                word.text.push(inner);
                                self.at += 1;
                            }
                        }
                    }
                }
                '"' => {
                    self.at += 1;
                    word.quoted = true;
                    loop {
                        match self.peek() {
                            None => return Err(Refusal("a double quote is not closed")),
                            Some('"') => {
                                self.at += 1;
                                break;
                            }
                            Some('$') | Some('`') => return Err(expansion()),
                            Some('\\') => {
                                self.at += 1;
                                match self.peek() {
                                    Some('\n') => self.at += 1,
                                    Some(next @ ('"' | '\\')) => {
                                        word.text.push(next);
                                        self.at += 1;
                                    }
                                    Some('$') | Some('`') => return Err(expansion()),
                                    // Other backslashes stay as they are.
                                    _ => word.text.push('\\'),
                                }
                            }
                            Some(inner) => {
                                word.text.push(inner);
                                self.at += 1;
                            }
                        }
                    }
                }
                '$' | '`' => return Err(expansion()),
                '{' | '}' => {
                    return Err(Refusal(
                        "braces (groups or brace expansion) are not understood",
                    ))
                }
                '~' if self.at == start => {
                    return Err(Refusal("`~` expands to the home directory"))
                }
                '*' | '?' | '[' => {
                    // `[` opens a bracket expression only when a `]`
                    // closes it within the word; a lone `[` (the test
                    // command) is literal.
                    let closes = c != '[' || self.closes_bracket();
                    if closes {
                        word.glob_at.get_or_insert(word.text.len());
                        word.globs.push(word.text.len());
                    }
                    word.text.push(c);
                    self.at += 1;
                }
                other => {
                    word.text.push(other);
                    self.at += 1;
                }
            }
        }
        Ok(word)
    }

    /// Whether a `]` follows the `[` at the cursor before the word ends
    /// (looking at raw characters, so a quoted `]` also counts: that only
    /// makes the judgement stricter).
    fn closes_bracket(&self) -> bool {
        self.chars[self.at + 1..]
            .iter()
            .take_while(|c| {
                !matches!(
                    c,
                    ' ' | '\t' | '\n' | ';' | '&' | '|' | '<' | '>' | '(' | ')'
                )
            })
            .any(|&c| c == ']')
    }

    /// Reads the bodies of the here-documents opened on the line that just
    /// ended. A body that the shell would expand may contain no `$`, `` ` ``
    /// or `\`.
    fn read_heredoc_bodies(&mut self) -> Result<(), Refusal> {
        for (delimiter, strip, expands) in std::mem::take(&mut self.pending_heredocs) {
            loop {
                if self.at >= self.chars.len() {
                    return Err(Refusal("a here-document is not closed"));
                }
                let mut end = self.at;
                while end < self.chars.len() && self.chars[end] != '\n' {
                    end += 1;
                }
                let line: String = self.chars[self.at..end].iter().collect();
                self.at = (end + 1).min(self.chars.len());
                let compared = if strip {
                    line.trim_start_matches('\t')
                } else {
                    line.as_str()
                };
                if compared == delimiter {
                    break;
                }
                if expands && line.contains(['$', '`', '\\']) {
                    return Err(expansion());
                }
            }
        }
        Ok(())
    }
}

fn expansion() -> Refusal {
    Refusal("the command uses a variable, command substitution or other expansion")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(line: &str) -> Vec<Vec<String>> {
        parse(line)
            .unwrap()
            .commands
            .iter()
            .map(|c| c.words.iter().map(|w| w.text.clone()).collect())
            .collect()
    }

    #[test]
    fn splits_words_and_commands() {
        assert_eq!(
            words(r#"grep -n "a b" 'c d' e\ f | wc -l && ls;pwd"#),
            vec![
                vec!["grep", "-n", "a b", "c d", "e f"],
                vec!["wc", "-l"],
                vec!["ls"],
                vec!["pwd"]
            ]
        );
        assert_eq!(words("ls \\\n -la"), vec![vec!["ls", "-la"]]);
        assert_eq!(words("ls # rm -rf /"), vec![vec!["ls"]]);
        assert_eq!(words("a#b"), vec![vec!["a#b"]]);
        assert_eq!(words("ls &&\n pwd"), vec![vec!["ls"], vec!["pwd"]]);
        assert_eq!(words("\"\""), vec![vec![""]]);
    }

    #[test]
    fn redirections_and_heredocs() {
        let script = parse("cat <in.txt 2>/dev/null >out 2>&1").unwrap();
        let redirects = &script.commands[0].redirects;
        assert_eq!(redirects.len(), 4);
        assert!(matches!(&redirects[0], Redirect::Read(w) if w.text == "in.txt"));
        assert!(matches!(&redirects[1], Redirect::Write(w) if w.text == "/dev/null"));
        assert!(matches!(&redirects[2], Redirect::Write(w) if w.text == "out"));
        assert_eq!(redirects[3], Redirect::Duplicate);
        let script = parse("cat <<'EOF'\n$HOME `x`\nEOF\nls").unwrap();
        assert_eq!(script.commands.len(), 2);
        assert!(parse("cat <<EOF\n$HOME\nEOF").is_err());
        assert!(parse("cat <<EOF\nplain\nEOF").is_ok());
        assert!(parse("cat <<EOF\nnever closed").is_err());
        assert!(parse("echo hi 2>x").is_ok());
        assert!(parse("echo >&file").is_err());
    }

    #[test]
    fn refuses_what_it_does_not_understand() {
        for line in [
            "echo $HOME",
            "echo \"$HOME\"",
            "echo `id`",
            "echo $(id)",
            "echo {a,b}",
            "(ls)",
            "ls &",
            "ls |& cat",
            "if true; then ls; fi",
            "cat <(ls)",
            "cat <<< hi",
            "ls ~",
            "'unclosed",
            "\"unclosed",
            "ls |",
            "ls && ",
            "; ls",
            "",
            "  \n ",
            "a\\",
        ] {
            assert!(parse(line).is_err(), "{line:?} parsed");
        }
    }

    #[test]
    fn marks_globs_and_assignments() {
        let script = parse("A=1 ls src/*.rs 'q*'").unwrap();
        let simple = &script.commands[0];
        assert_eq!(simple.assignments, vec!["A=1"]);
        assert_eq!(simple.words[1].glob_at, Some(4));
        assert_eq!(simple.words[1].globs, [4]);
        assert_eq!(simple.words[2].glob_at, None);
        assert!(simple.words[2].globs.is_empty());
        // Only unquoted characters are globs.
        let script = parse(r#"ls a?*\**'*'"#).unwrap();
        let word = &script.commands[0].words[1];
        assert_eq!(word.text, "a?****");
        assert_eq!(word.glob_at, Some(1));
        assert_eq!(word.globs, [1, 2, 4]);
        assert!(parse("'A=1' ls").unwrap().commands[0]
            .assignments
            .is_empty());
    }
}

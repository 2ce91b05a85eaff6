//! The words of a program read against what it takes: denied options
//! (abbreviated or clustered too), option tables of plain programs and of
//! git subcommands, `find`'s expression and git's global options; option
//! values that name files are checked where they lead.

use super::git;
use super::programs::{self, is_one_of, Denied, Table};
use super::reach::Checker;
use super::reach::Judged;
use super::shell::Word;

/// Refuses an option of `denied`, also when a long one is abbreviated
/// (getopt takes any unambiguous prefix) or a short one is clustered.
pub(super) fn refuse_denied(program: &str, denied: &Denied, text: &str) -> Judged<()> {
    if is_one_of(denied, text) {
        return Err(format!(
            "`{program} {text}` may reach outside what it names"
        ));
    }
    Ok(())
}

/// Options of one program: a plain table or a git subcommand's groups.
pub(super) trait OptionSet {
    fn short(&self, c: char) -> bool;
    fn short_value(&self, c: char) -> bool;
    fn short_optional(&self, c: char) -> bool;
    fn long(&self, name: &str) -> bool;
    fn long_value(&self, name: &str) -> bool;
    fn long_optional(&self, name: &str) -> bool;
    fn numeric(&self) -> bool;
}

impl OptionSet for Table {
    fn short(&self, c: char) -> bool {
        self.short.contains(c)
    }
    fn short_value(&self, c: char) -> bool {
        self.short_value.contains(c)
    }
    fn short_optional(&self, c: char) -> bool {
        self.short_optional.contains(c)
    }
    fn long(&self, name: &str) -> bool {
        self.long.contains(&name)
    }
    fn long_value(&self, name: &str) -> bool {
        self.long_value.contains(&name)
    }
    fn long_optional(&self, name: &str) -> bool {
        self.long_optional.contains(&name)
    }
    fn numeric(&self) -> bool {
        self.numeric
    }
}

impl OptionSet for git::Subcommand {
    fn short(&self, c: char) -> bool {
        self.table.short.contains(c)
    }
    fn short_value(&self, c: char) -> bool {
        self.table.short_value.contains(c)
    }
    fn short_optional(&self, c: char) -> bool {
        self.table.short_optional.contains(c)
    }
    fn long(&self, name: &str) -> bool {
        git::Subcommand::long(self, name)
    }
    fn long_value(&self, name: &str) -> bool {
        git::Subcommand::long_value(self, name)
    }
    fn long_optional(&self, name: &str) -> bool {
        git::Subcommand::long_optional(self, name)
    }
    fn numeric(&self) -> bool {
        git::Subcommand::numeric(self)
    }
}

impl Checker {
    /// A word of a program whose options are all harmless: option values
    /// that name files are still checked (`--file=/etc/passwd`, and any
    /// tail of a short cluster such as `-f/etc/passwd`).
    pub(super) fn any_option_word(&self, word: &Word) -> Judged<()> {
        self.glob(word)?;
        let text = word.text.as_str();
        if text.len() < 2 || !text.starts_with('-') {
            return self.operand(word);
        }
        if let Some(rest) = text.strip_prefix("--") {
            if let Some((_, value)) = rest.split_once('=') {
                if !self.path_inside(value) {
                    return Err(format!("`{value}` is outside the workspace"));
                }
            }
            return Ok(());
        }
        for (index, _) in text.char_indices().skip(2) {
            if !self.path_inside(&text[index..]) {
                return Err(format!("`{}` is outside the workspace", &text[index..]));
            }
        }
        Ok(())
    }

    /// Arguments of a program with an option table.
    pub(super) fn table(
        &self,
        program: &str,
        options: &dyn OptionSet,
        args: &[Word],
        operands: bool,
    ) -> Judged<()> {
        let refuse =
            |option: &str| Err(format!("`{program} {option}` is not known to be read-only"));
        let mut index = 0;
        let mut options_done = false;
        while index < args.len() {
            let word = &args[index];
            index += 1;
            let text = word.text.as_str();
            if options_done || !text.starts_with('-') || text == "-" {
                if !operands {
                    return Err(format!("`{program}` with operands may change something"));
                }
                self.operand(word)?;
                continue;
            }
            if word.glob_at.is_some() {
                return Err(format!("the option `{text}` is a glob"));
            }
            if text == "--" {
                options_done = true;
                continue;
            }
            if let Some(long) = text.strip_prefix("--") {
                let (name, value) = match long.split_once('=') {
                    Some((name, value)) => (format!("--{name}"), Some(value)),
                    None => (text.to_string(), None),
                };
                if options.long_value(&name) {
                    match value {
                        Some(value) => {
                            if !self.path_inside(value) {
                                return Err(format!("`{value}` is outside the workspace"));
                            }
                        }
                        None => {
                            let Some(next) = args.get(index) else {
                                return refuse(text);
                            };
                            index += 1;
                            separate_value(next)?;
                            self.operand(next)?;
                        }
                    }
                } else if options.long_optional(&name) {
                    if let Some(value) = value {
                        if !self.path_inside(value) {
                            return Err(format!("`{value}` is outside the workspace"));
                        }
                    }
                } else if !(options.long(&name) && value.is_none()) {
                    return refuse(text);
                }
                continue;
            }
            let cluster = &text[1..];
            if options.numeric() && cluster.chars().all(|c| c.is_ascii_digit()) {
                continue;
            }
            for (at, c) in cluster.char_indices() {
                if options.short(c) {
                    continue;
                }
                let attached = &cluster[at + c.len_utf8()..];
                if options.short_value(c) {
                    if attached.is_empty() {
                        let Some(next) = args.get(index) else {
                            return refuse(text);
                        };
                        index += 1;
                        separate_value(next)?;
                        self.operand(next)?;
                    } else if !self.path_inside(attached) {
                        return Err(format!("`{attached}` is outside the workspace"));
                    }
                    break;
                }
                if options.short_optional(c) {
                    if !self.path_inside(attached) {
                        return Err(format!("`{attached}` is outside the workspace"));
                    }
                    break;
                }
                return refuse(&format!("-{c}"));
            }
        }
        Ok(())
    }

    /// `find [-H|-P] [start…] [expression]` with only tests and prints
    /// (not `-L`, which follows symlinks out of the workspace).
    pub(super) fn find(&self, args: &[Word]) -> Judged<()> {
        let mut index = 0;
        while let Some(word) = args.get(index) {
            if matches!(word.text.as_str(), "-H" | "-P") {
                index += 1;
            } else {
                break;
            }
        }
        // Starting points: until the expression begins.
        while let Some(word) = args.get(index) {
            let text = word.text.as_str();
            if text.starts_with('-') || matches!(text, "(" | ")" | "!" | ",") {
                break;
            }
            self.operand(word)?;
            index += 1;
        }
        while let Some(word) = args.get(index) {
            index += 1;
            let text = word.text.as_str();
            if word.glob_at.is_some() {
                return Err(format!("the find expression word `{text}` is a glob"));
            }
            if programs::FIND_FLAGS.contains(&text) {
                continue;
            }
            let with_value = programs::FIND_WITH_VALUE
                .iter()
                .find(|(name, _)| *name == text)
                .map(|(_, is_file)| *is_file)
                .or_else(|| {
                    // -newerXY: two letters from a, B, c, m (t: a date).
                    let rest = text.strip_prefix("-newer")?;
                    let ok = rest.len() == 2
                        && rest
                            .chars()
                            .all(|c| matches!(c, 'a' | 'B' | 'c' | 'm' | 't'));
                    ok.then_some(!rest.ends_with('t'))
                });
            let Some(is_file) = with_value else {
                return Err(format!("`find {text}` is not known to be read-only"));
            };
            let Some(value) = args.get(index) else {
                return Err(format!("`find {text}` has no argument"));
            };
            index += 1;
            if value.glob_at.is_some() {
                // An unquoted pattern: the shell may expand it first.
                self.glob(value)?;
            }
            if is_file {
                self.operand(value)?;
            }
        }
        Ok(())
    }

    /// `git [harmless global options] SUBCOMMAND [options and operands]`.
    pub(super) fn git(&self, args: &[Word]) -> Judged<()> {
        // `%G…` format placeholders verify signatures, running gpg.
        if args.iter().any(|w| w.text.contains("%G")) {
            return Err("a git format asks for signatures, which runs gpg".into());
        }
        let mut index = 0;
        while let Some(word) = args.get(index) {
            let text = word.text.as_str();
            if !text.starts_with('-') {
                break;
            }
            if !git::GLOBAL_OPTIONS.contains(&text) {
                return Err(format!(
                    "`git {text}` changes how git reads the repository or its configuration"
                ));
            }
            index += 1;
        }
        let Some(word) = args.get(index) else {
            return Err("`git` without a subcommand".into());
        };
        let Some(subcommand) = git::subcommand(&word.text) else {
            return Err(format!(
                "`git {}` is not a read-only git subcommand",
                word.text
            ));
        };
        let program = format!("git {}", subcommand.name);
        self.table(
            &program,
            subcommand,
            &args[index + 1..],
            subcommand.operands,
        )
    }
}

/// A value given as a separate word: one that looks like an option may be
/// taken by the program as an option (when the value is optional there).
fn separate_value(word: &Word) -> Judged<()> {
    if word.text.starts_with('-') && word.text.len() > 1 {
        return Err(format!(
            "`{}` after an option that takes a value",
            word.text
        ));
    }
    Ok(())
}

//! The chat's line editor: keys decoded from the terminal's bytes, a line
//! edited with the usual keys (arrows, Home/End, Ctrl-A/E/B/F/K/U/W,
//! Alt-B/F, Delete), history (Up/Down, Ctrl-P/N) kept in a private file,
//! Tab completing slash commands, and a bracketed paste taken whole
//! (newlines included) rather than sent line by line. Drawn on one row:
//! a line wider than the terminal scrolls sideways around the cursor, so
//! an 80-column terminal or a narrow SSH window never wraps it. No
//! terminal library: raw mode and the width come from `os/`.

use std::io::Write;
use std::path::{Path, PathBuf};

/// A key, as the editor sees it.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Key {
    Char(char),
    Enter,
    Backspace,
    Delete,
    Left,
    Right,
    WordLeft,
    WordRight,
    Home,
    End,
    Up,
    Down,
    KillEnd,
    KillStart,
    KillWord,
    Tab,
    Interrupt,
    /// Ctrl-D: the end on an empty line, else Delete.
    Eof,
    Clear,
    Suspend,
    Paste(String),
}

/// The most a paste keeps (the rest is dropped).
const PASTE_CAP: usize = 1 << 20;
/// The most one escape sequence may hold before it is dropped.
const SEQUENCE_CAP: usize = 32;

/// Turns the terminal's bytes into keys; a sequence split across reads
/// waits for its rest.
#[derive(Default)]
pub(super) struct Keys {
    pending: Vec<u8>,
    paste: Option<Vec<u8>>,
}

const PASTE_END: &[u8] = b"\x1b[201~";

impl Keys {
    pub(super) fn feed(&mut self, bytes: &[u8]) -> Vec<Key> {
        let mut keys = Vec::new();
        for &byte in bytes {
            if let Some(paste) = &mut self.paste {
                paste.push(byte);
                if paste.ends_with(PASTE_END) {
                    paste.truncate(paste.len() - PASTE_END.len());
                    let text = pasted(paste);
                    self.paste = None;
                    keys.push(Key::Paste(text));
                } else if paste.len() > PASTE_CAP + PASTE_END.len() {
                    // Keep the tail that may hold the end marker.
                    paste.remove(PASTE_CAP);
                }
                continue;
            }
            self.pending.push(byte);
            match self.decode() {
                Decoded::Key(key) => {
                    self.pending.clear();
                    keys.push(key);
                }
                Decoded::PasteStart => {
                    self.pending.clear();
                    self.paste = Some(Vec::new());
                }
                Decoded::Nothing => self.pending.clear(),
                Decoded::More if self.pending.len() > SEQUENCE_CAP => self.pending.clear(),
                Decoded::More => {}
            }
        }
        keys
    }

    fn decode(&self) -> Decoded {
        let bytes = &self.pending[..];
        match bytes {
            [] => Decoded::More,
            [0x1b] => Decoded::More,
            [0x1b, b'[' | b'O', rest @ ..] => escape(bytes[1], rest),
            [0x1b, 0x7f | 0x08] => Decoded::Key(Key::KillWord),
            [0x1b, b'b' | b'B'] => Decoded::Key(Key::WordLeft),
            [0x1b, b'f' | b'F'] => Decoded::Key(Key::WordRight),
            [0x1b, b'\r'] => Decoded::Key(Key::Enter),
            [0x1b, ..] => Decoded::Nothing,
            [byte] if *byte < 0x80 => control(*byte),
            _ => match std::str::from_utf8(bytes) {
                Ok(text) => match text.chars().next() {
                    Some(c) if !crate::util::acts_on_a_terminal(c) => Decoded::Key(Key::Char(c)),
                    _ => Decoded::Nothing,
                },
                Err(error) if error.error_len().is_none() && bytes.len() < 4 => Decoded::More,
                Err(_) => Decoded::Nothing,
            },
        }
    }
}

enum Decoded {
    Key(Key),
    PasteStart,
    More,
    Nothing,
}

fn control(byte: u8) -> Decoded {
    let key = match byte {
        b'\r' | b'\n' => Key::Enter,
        0x7f | 0x08 => Key::Backspace,
        0x01 => Key::Home,
        0x05 => Key::End,
        0x02 => Key::Left,
        0x06 => Key::Right,
        0x10 => Key::Up,
        0x0e => Key::Down,
        0x0b => Key::KillEnd,
        0x15 => Key::KillStart,
        0x17 => Key::KillWord,
        0x09 => Key::Tab,
        0x03 => Key::Interrupt,
        0x04 => Key::Eof,
        0x0c => Key::Clear,
        0x1a => Key::Suspend,
        0x20..=0x7e => Key::Char(char::from(byte)),
        _ => return Decoded::Nothing,
    };
    Decoded::Key(key)
}

/// A CSI (`ESC [`) or SS3 (`ESC O`) sequence: parameters, then a final
/// byte from `@` to `~`.
fn escape(kind: u8, rest: &[u8]) -> Decoded {
    let Some((&last, params)) = rest.split_last() else {
        return Decoded::More;
    };
    if !(0x40..=0x7e).contains(&last) {
        return Decoded::More;
    }
    let modified = params.ends_with(b";5") || params.ends_with(b";3");
    let key = match (kind, params, last) {
        (_, _, b'A') => Key::Up,
        (_, _, b'B') => Key::Down,
        (_, _, b'C') if modified => Key::WordRight,
        (_, _, b'D') if modified => Key::WordLeft,
        (_, _, b'C') => Key::Right,
        (_, _, b'D') => Key::Left,
        (_, _, b'H') => Key::Home,
        (_, _, b'F') => Key::End,
        (b'[', b"1" | b"7", b'~') => Key::Home,
        (b'[', b"4" | b"8", b'~') => Key::End,
        (b'[', b"3", b'~') => Key::Delete,
        (b'[', b"200", b'~') => return Decoded::PasteStart,
        _ => return Decoded::Nothing,
    };
    Decoded::Key(key)
}

/// A paste's text: line ends as `\n`, tabs kept, other controls dropped.
fn pasted(bytes: &[u8]) -> String {
    let text = String::from_utf8_lossy(bytes).replace("\r\n", "\n");
    text.chars()
        .map(|c| if c == '\r' { '\n' } else { c })
        .filter(|&c| matches!(c, '\n' | '\t') || !crate::util::acts_on_a_terminal(c))
        .collect()
}

/// How many columns a character takes: none for combining marks and
/// zero-width ones, two for East Asian wide ones and most emoji.
pub(super) fn columns(c: char) -> usize {
    match u32::from(c) {
        0x300..=0x36f | 0x200b..=0x200f | 0xfe00..=0xfe0f | 0x20d0..=0x20ff => 0,
        0x1100..=0x115f
        | 0x2e80..=0x303e
        | 0x3041..=0xa4cf
        | 0xac00..=0xd7a3
        | 0xf900..=0xfaff
        | 0xfe30..=0xfe4f
        | 0xff00..=0xff60
        | 0xffe0..=0xffe6
        | 0x1f300..=0x1f64f
        | 0x1f900..=0x1f9ff
        | 0x20000..=0x3fffd => 2,
        _ => 1,
    }
}

/// What a character is drawn as on the one row.
fn drawn(c: char) -> char {
    match c {
        '\n' => '⏎',
        '\t' => ' ',
        c => c,
    }
}

/// What a key did.
#[derive(Debug, PartialEq)]
pub(super) enum Step {
    Edited,
    Submit(String),
    Interrupt,
    Eof,
    Clear,
    Suspend,
    /// Tab found several commands and could not extend the line: show
    /// them.
    Choices(Vec<String>),
}

/// History entries kept (in memory and in the file).
const HISTORY_KEPT: usize = 1000;
/// The longest entry kept in history.
const ENTRY_CAP: usize = 16 * 1024;
/// The most of the history file read.
const HISTORY_FILE_CAP: u64 = 4 << 20;

/// Earlier lines, oldest first, and the file they are kept in: one JSON
/// string per line, private to the user. A line starting with a space is
/// not kept (as shells do), so a secret can be typed without landing
/// there.
#[derive(Default)]
pub(super) struct History {
    entries: Vec<String>,
    path: Option<PathBuf>,
}

impl History {
    /// Reads the file (a missing or unreadable one is an empty history);
    /// a file grown past twice what is kept is written back shortened.
    pub(super) fn load(path: &Path) -> History {
        let mut history = History {
            entries: Vec::new(),
            path: Some(path.to_path_buf()),
        };
        // Only a regular file: the open never blocks, but a device
        // would be read all the same.
        let Ok(file) = crate::os::open_read(path, false) else {
            return history;
        };
        if !file.metadata().is_ok_and(|meta| meta.is_file()) {
            log::warn!(
                "{} is not a regular file; no history is read",
                path.display()
            );
            return history;
        }
        let mut text = String::new();
        let _ = std::io::Read::read_to_string(
            &mut std::io::Read::take(file, HISTORY_FILE_CAP),
            &mut text,
        );
        let lines: Vec<&str> = text.lines().collect();
        history.entries = lines
            .iter()
            .filter_map(|line| serde_json::from_str::<String>(line).ok())
            .filter(|entry| entry.len() <= ENTRY_CAP)
            .collect();
        let skip = history.entries.len().saturating_sub(HISTORY_KEPT);
        history.entries.drain(..skip);
        if lines.len() > 2 * HISTORY_KEPT {
            history.rewrite();
        }
        history
    }

    #[cfg(test)]
    pub(super) fn entries(&self) -> &[String] {
        &self.entries
    }

    fn rewrite(&self) {
        let Some(path) = &self.path else { return };
        let text: String = self
            .entries
            .iter()
            .map(|entry| format!("{}\n", serde_json::Value::from(entry.as_str())))
            .collect();
        if let Ok(mut file) = crate::os::open_private(path, crate::os::Private::Truncate) {
            let _ = file.write_all(text.as_bytes());
        }
    }

    /// Adds a line (and appends it to the file).
    pub(super) fn add(&mut self, line: &str) {
        if line.trim().is_empty()
            || line.starts_with(' ')
            || line.len() > ENTRY_CAP
            || self.entries.last().map(String::as_str) == Some(line)
        {
            return;
        }
        self.entries.push(line.to_string());
        if self.entries.len() > HISTORY_KEPT {
            self.entries.remove(0);
        }
        let Some(path) = &self.path else { return };
        if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
            let _ = crate::os::create_private_dir_all(parent);
        }
        if let Ok(mut file) = crate::os::open_private(path, crate::os::Private::Append) {
            let _ = writeln!(file, "{}", serde_json::Value::from(line));
        }
    }
}

/// The line being edited.
#[derive(Default)]
pub(super) struct Editor {
    line: Vec<char>,
    cursor: usize,
    pub history: History,
    /// Which history entry is shown (`None`: the line being typed), and
    /// that line, kept while browsing.
    browsing: Option<usize>,
    draft: Vec<char>,
}

impl Editor {
    pub(super) fn new(history: History) -> Editor {
        Editor {
            history,
            ..Editor::default()
        }
    }

    pub(super) fn text(&self) -> String {
        self.line.iter().collect()
    }

    fn set(&mut self, text: &[char]) {
        self.line = text.to_vec();
        self.cursor = self.line.len();
    }

    fn insert(&mut self, text: &str) {
        for c in text.chars() {
            self.line.insert(self.cursor, c);
            self.cursor += 1;
        }
    }

    /// Where the word before the cursor starts.
    fn word_start(&self) -> usize {
        let mut at = self.cursor;
        while at > 0 && self.line[at - 1].is_whitespace() {
            at -= 1;
        }
        while at > 0 && !self.line[at - 1].is_whitespace() {
            at -= 1;
        }
        at
    }

    fn word_end(&self) -> usize {
        let mut at = self.cursor;
        while at < self.line.len() && self.line[at].is_whitespace() {
            at += 1;
        }
        while at < self.line.len() && !self.line[at].is_whitespace() {
            at += 1;
        }
        at
    }

    /// Applies one key; `commands` are the slash commands Tab completes
    /// (names without the slash).
    pub(super) fn key(&mut self, key: Key, commands: &[String]) -> Step {
        match key {
            Key::Char(c) => self.insert(&c.to_string()),
            Key::Paste(text) => self.insert(&text),
            Key::Enter => {
                let line = self.text();
                self.history.add(&line);
                self.line.clear();
                self.cursor = 0;
                self.browsing = None;
                return Step::Submit(line);
            }
            Key::Backspace if self.cursor > 0 => {
                self.cursor -= 1;
                self.line.remove(self.cursor);
            }
            Key::Delete if self.cursor < self.line.len() => {
                self.line.remove(self.cursor);
            }
            Key::Eof if self.line.is_empty() => return Step::Eof,
            Key::Eof => return self.key(Key::Delete, commands),
            Key::Left => self.cursor = self.cursor.saturating_sub(1),
            Key::Right => self.cursor = (self.cursor + 1).min(self.line.len()),
            Key::WordLeft => self.cursor = self.word_start(),
            Key::WordRight => self.cursor = self.word_end(),
            Key::Home => self.cursor = 0,
            Key::End => self.cursor = self.line.len(),
            Key::KillEnd => self.line.truncate(self.cursor),
            Key::KillStart => {
                self.line.drain(..self.cursor);
                self.cursor = 0;
            }
            Key::KillWord => {
                let start = self.word_start();
                self.line.drain(start..self.cursor);
                self.cursor = start;
            }
            Key::Up => self.browse(true),
            Key::Down => self.browse(false),
            Key::Tab => return self.complete(commands),
            // Ctrl-C clears a line; on an empty one it is the chat's.
            Key::Interrupt if self.line.is_empty() => return Step::Interrupt,
            Key::Interrupt => {
                self.line.clear();
                self.cursor = 0;
                self.browsing = None;
            }
            Key::Clear => return Step::Clear,
            Key::Suspend => return Step::Suspend,
            Key::Backspace | Key::Delete => {}
        }
        Step::Edited
    }

    fn browse(&mut self, back: bool) {
        let count = self.history.entries.len();
        let next = match (self.browsing, back) {
            (None, true) if count > 0 => Some(count - 1),
            (None, _) => return,
            (Some(0), true) => return,
            (Some(at), true) => Some(at - 1),
            (Some(at), false) if at + 1 < count => Some(at + 1),
            (Some(_), false) => None,
        };
        if self.browsing.is_none() {
            self.draft = self.line.clone();
        }
        self.browsing = next;
        let text: Vec<char> = match next {
            Some(at) => self.history.entries[at].chars().collect(),
            None => std::mem::take(&mut self.draft),
        };
        self.set(&text);
    }

    /// Tab: a `/name` being typed at the start of the line is completed
    /// to the one command it begins, or as far as its commands agree.
    fn complete(&mut self, commands: &[String]) -> Step {
        let typed: String = self.line[..self.cursor].iter().collect();
        let Some(word) = typed.strip_prefix('/').filter(|w| !w.contains(' ')) else {
            return Step::Edited;
        };
        let mut matching: Vec<&String> = commands.iter().filter(|c| c.starts_with(word)).collect();
        matching.sort();
        matching.dedup();
        let Some(first) = matching.first() else {
            return Step::Edited;
        };
        let mut common = first.len();
        for other in &matching[1..] {
            common = first
                .char_indices()
                .zip(other.chars())
                .take_while(|((_, a), b)| a == b)
                .last()
                .map_or(0, |((at, a), _)| at + a.len_utf8())
                .min(common);
        }
        let mut added = first[word.len()..common].to_string();
        if matching.len() == 1 {
            added.push(' ');
        }
        if added.is_empty() {
            return Step::Choices(matching.iter().map(|c| format!("/{c}")).collect());
        }
        self.insert(&added);
        Step::Edited
    }

    /// The row as drawn: carriage return, the prompt, the part of the
    /// line that fits in `width` columns around the cursor (`…` where it
    /// is cut), the rest of the row cleared, the cursor put back.
    pub(super) fn render(&self, prompt: &str, width: usize) -> String {
        let prompt_columns: usize = prompt.chars().map(columns).sum();
        // One column stays free so the cursor never sits past the edge.
        let room = width.saturating_sub(prompt_columns + 1).max(8);
        let widths: Vec<usize> = self.line.iter().map(|&c| columns(drawn(c))).collect();
        let total: usize = widths.iter().sum();
        let (mut start, mut end) = (0, self.line.len());
        if total > room {
            // The end when the cursor is near it, the start when it is
            // near that, else the cursor in the middle; a column is left
            // for the mark on each cut side.
            let before: usize = widths[..self.cursor].iter().sum();
            let half = room / 2;
            let mut used = 0;
            start = if total - before <= half {
                let mut at = self.line.len();
                while at > 0 && used + widths[at - 1] < room {
                    at -= 1;
                    used += widths[at];
                }
                at
            } else if before <= half {
                0
            } else {
                let mut at = self.cursor;
                while at > 0 && used + widths[at - 1] < half {
                    at -= 1;
                    used += widths[at];
                }
                at
            };
            let left =
                room - usize::from(start > 0) - widths[start..self.cursor].iter().sum::<usize>();
            if widths[self.cursor..].iter().sum::<usize>() > left {
                let mut fill = 0;
                end = self.cursor;
                while end < self.line.len() && fill + widths[end] < left {
                    fill += widths[end];
                    end += 1;
                }
            }
        }
        let mut row = format!("\r{prompt}");
        if start > 0 {
            row.push('…');
        }
        row.extend(self.line[start..end].iter().map(|&c| drawn(c)));
        if end < self.line.len() {
            row.push('…');
        }
        row.push_str("\x1b[K\r");
        let to_cursor = prompt_columns
            + usize::from(start > 0)
            + widths[start..self.cursor].iter().sum::<usize>();
        if to_cursor > 0 {
            row.push_str(&format!("\x1b[{to_cursor}C"));
        }
        row
    }
}

/// What reading a line came to.
#[derive(Debug, PartialEq)]
pub(super) enum Read {
    Line(String),
    /// Ctrl-C on an empty line.
    Interrupt,
    /// Ctrl-D on an empty line, or input ended.
    Eof,
}

/// The editor on the terminal: standard input in raw mode while a line
/// is read, drawn on standard error.
#[derive(Default)]
pub(super) struct Terminal {
    pub editor: Editor,
    keys: Keys,
    /// Keys typed after Enter in the same read, for the next line.
    queued: std::collections::VecDeque<Key>,
}

impl Terminal {
    pub(super) fn new(history: History) -> Terminal {
        Terminal {
            editor: Editor::new(history),
            ..Terminal::default()
        }
    }

    /// Reads a line at `prompt`; `None` when raw mode cannot be had (the
    /// caller reads plain lines instead).
    pub(super) fn read(&mut self, prompt: &str, commands: &[String]) -> Option<Read> {
        let raw = crate::os::RawMode::new()?;
        let mut out = std::io::stderr();
        // Bracketed paste on while editing: a pasted newline is text.
        let _ = write!(out, "\x1b[?2004h");
        let read = self.edit(&raw, prompt, commands);
        let _ = write!(out, "\x1b[?2004l");
        let _ = out.flush();
        Some(read)
    }

    fn edit(&mut self, raw: &crate::os::RawMode, prompt: &str, commands: &[String]) -> Read {
        let mut out = std::io::stderr();
        let width = || crate::os::terminal_width().unwrap_or(80);
        let _ = out.write_all(self.editor.render(prompt, width()).as_bytes());
        let _ = out.flush();
        let mut buffer = [0u8; 512];
        loop {
            if self.queued.is_empty() {
                let count = match std::io::Read::read(&mut std::io::stdin(), &mut buffer) {
                    Ok(0) | Err(_) => return Read::Eof,
                    Ok(count) => count,
                };
                self.queued.extend(self.keys.feed(&buffer[..count]));
            }
            while let Some(key) = self.queued.pop_front() {
                let mut row = String::new();
                match self.editor.key(key, commands) {
                    Step::Edited => {}
                    Step::Submit(line) => {
                        // The whole line stays on screen as it was sent.
                        let shown: String = line.chars().map(drawn).collect();
                        let _ = write!(out, "\r{prompt}{shown}\x1b[K\n");
                        return Read::Line(line);
                    }
                    Step::Interrupt => {
                        let _ = writeln!(out);
                        return Read::Interrupt;
                    }
                    Step::Eof => {
                        let _ = writeln!(out);
                        return Read::Eof;
                    }
                    Step::Clear => row.push_str("\x1b[H\x1b[2J"),
                    Step::Suspend => {
                        let _ = write!(out, "\r\x1b[K\x1b[?2004l");
                        let _ = out.flush();
                        raw.suspend();
                        let _ = write!(out, "\x1b[?2004h");
                    }
                    Step::Choices(choices) => {
                        row.push_str("\r\x1b[K");
                        row.push_str(&choices.join("  "));
                        row.push('\n');
                    }
                }
                row.push_str(&self.editor.render(prompt, width()));
                let _ = out.write_all(row.as_bytes());
            }
            let _ = out.flush();
        }
    }
}

#[cfg(test)]
mod tests;

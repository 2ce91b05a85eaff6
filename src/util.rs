//! Small helpers with no better home, and `printable.rs`: the one way
//! text from outside reaches a terminal (`visible`, `json_for_terminal`).

mod printable;

pub use printable::{acts_on_a_terminal, json_for_terminal, json_pretty_for_terminal, visible};

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

/// A random-looking hex string of 16 characters, unique within the process
/// and unlikely to repeat across processes. Built from the standard
/// library's randomly keyed hasher, so no extra dependency is needed.
pub fn random_hex() -> String {
    // Global: unique within the process whoever asks, so process-wide.
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let mut hasher = RandomState::new().build_hasher();
    hasher.write_u64(COUNTER.fetch_add(1, Ordering::Relaxed));
    hasher.write_u128(
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos()),
    );
    hasher.write_u32(std::process::id());
    format!("{:016x}", hasher.finish())
}

/// A fresh id with a readable prefix, such as `sess_3f9a0c1d2b4e5f60`.
pub fn new_id(prefix: &str) -> String {
    format!("{prefix}_{}", random_hex())
}

/// A result's value, or its type's default with a warning in the log
/// that says what failed: for a failure no caller can act on that still
/// must not pass unseen (a store that cannot be read, a stored value
/// that no longer parses).
pub(crate) trait OrLogged<T> {
    /// `what` names what failed ("cannot read the jobs of session …");
    /// the error follows it in the log.
    fn or_logged(self, what: impl std::fmt::Display) -> T;
}

impl<T: Default, E: std::fmt::Display> OrLogged<T> for Result<T, E> {
    fn or_logged(self, what: impl std::fmt::Display) -> T {
        self.unwrap_or_else(|error| {
            log::warn!("{what}: {error}");
            T::default()
        })
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_failure_logged_gives_the_default() {
        use super::OrLogged;
        assert_eq!(Ok::<u8, &str>(7).or_logged("never said"), 7);
        assert_eq!(Err::<u8, &str>("broken").or_logged("cannot count"), 0);
    }

    #[test]
    fn ids_do_not_repeat() {
        let ids: std::collections::HashSet<String> =
            (0..1000).map(|_| super::new_id("x")).collect();
        assert_eq!(ids.len(), 1000);
    }
}

/// Writes bytes atomically: to a temporary file beside `path` (its
/// parents created), then renamed over it.
pub fn write_bytes_atomic(path: &std::path::Path, data: &[u8]) -> Result<(), String> {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).map_err(|e| e.to_string())?;
    }
    let temporary = path.with_extension(format!("spindle-{}.tmp", random_hex()));
    std::fs::write(&temporary, data).map_err(|e| e.to_string())?;
    std::fs::rename(&temporary, path).map_err(|e| {
        let _ = std::fs::remove_file(&temporary);
        e.to_string()
    })
}

/// Wraps tool output in a Markdown code fence long enough not to be closed
/// by backticks inside it.
pub fn fence(text: &str) -> String {
    let mut ticks = 3;
    let mut run = 0;
    for ch in text.chars() {
        if ch == '`' {
            run += 1;
            ticks = ticks.max(run + 1);
        } else {
            run = 0;
        }
    }
    let fence = "`".repeat(ticks);
    let newline = if text.ends_with('\n') { "" } else { "\n" };
    format!("{fence}\n{text}{newline}{fence}")
}

/// `text` as Markdown shows it, character for character: each character
/// that could make a link, an image, emphasis, code or HTML of it is
/// escaped with a backslash, and a line break becomes a space (a name or
/// a path quoted in a list or a link's text stays in its place). Its
/// terminal controls are the caller's to write out first ([`visible`]).
pub fn markdown_text(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        match c {
            '\\' | '`' | '*' | '_' | '[' | ']' | '(' | ')' | '<' | '>' | '|' | '~' | '&' | '!'
            | '#' => {
                out.push('\\');
                out.push(c);
            }
            '\n' | '\r' => out.push(' '),
            _ => out.push(c),
        }
    }
    out
}

/// A Markdown link to `url` whose text is `text`, shown as it is: the
/// text escaped ([`markdown_text`], controls written out), the address
/// with every character that could end it or break it (`(`, `)`, `<`,
/// `>`, spaces, backslashes, anything not plain ASCII) percent-encoded.
pub fn markdown_link(text: &str, url: &str) -> String {
    let mut address = String::with_capacity(url.len());
    for byte in url.bytes() {
        if byte.is_ascii_alphanumeric() || b"-._~/:%?#=&+,;@".contains(&byte) {
            address.push(byte as char);
        } else {
            address.push_str(&format!("%{byte:02X}"));
        }
    }
    format!("[{}]({address})", markdown_text(&visible(text, false)))
}

const BASE64: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/// Standard base64 with padding.
pub fn base64_encode(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(BASE64[((n >> (18 - 6 * i)) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// Decodes standard base64 (padding optional, whitespace ignored); `None`
/// for anything else.
pub fn base64_decode(text: &str) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(text.len() / 4 * 3);
    let mut buffer = 0u32;
    let mut bits = 0;
    let mut padding = 0;
    for byte in text.bytes() {
        let value = match byte {
            b'A'..=b'Z' => byte - b'A',
            b'a'..=b'z' => byte - b'a' + 26,
            b'0'..=b'9' => byte - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            b'=' => {
                padding += 1;
                continue;
            }
            b' ' | b'\n' | b'\r' | b'\t' => continue,
            _ => return None,
        };
        if padding > 0 {
            return None;
        }
        buffer = (buffer << 6) | u32::from(value);
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((buffer >> bits) as u8);
            buffer &= (1 << bits) - 1;
        }
    }
    // Leftover bits must be zero padding of at most one incomplete group.
    if bits >= 6 || buffer != 0 || padding > 2 {
        return None;
    }
    Some(out)
}

const K: [u32; 64] = [
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
];

/// SHA-256, fed in pieces (a large file hashed without holding it).
pub struct Sha256 {
    h: [u32; 8],
    pending: Vec<u8>,
    length: u64,
}

impl Default for Sha256 {
    fn default() -> Self {
        Sha256 {
            h: [
                0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab,
                0x5be0cd19,
            ],
            pending: Vec::with_capacity(64),
            length: 0,
        }
    }
}

impl Sha256 {
    pub fn update(&mut self, mut data: &[u8]) {
        self.length = self.length.wrapping_add(data.len() as u64);
        if !self.pending.is_empty() {
            let take = (64 - self.pending.len()).min(data.len());
            self.pending.extend_from_slice(&data[..take]);
            data = &data[take..];
            if self.pending.len() == 64 {
                let block: [u8; 64] = self.pending[..].try_into().unwrap_or([0; 64]);
                compress(&mut self.h, &block);
                self.pending.clear();
            }
        }
        let mut blocks = data.chunks_exact(64);
        for block in &mut blocks {
            compress(&mut self.h, block);
        }
        self.pending.extend_from_slice(blocks.remainder());
    }

    /// The digest as lowercase hex.
    pub fn finish_hex(mut self) -> String {
        let bit_length = self.length.wrapping_mul(8);
        let mut tail = std::mem::take(&mut self.pending);
        tail.push(0x80);
        while tail.len() % 64 != 56 {
            tail.push(0);
        }
        tail.extend_from_slice(&bit_length.to_be_bytes());
        for block in tail.chunks(64) {
            compress(&mut self.h, block);
        }
        self.h.iter().map(|word| format!("{word:08x}")).collect()
    }
}

fn compress(h: &mut [u32; 8], block: &[u8]) {
    let mut w = [0u32; 64];
    for (i, word) in block.chunks(4).enumerate() {
        w[i] = u32::from_be_bytes([word[0], word[1], word[2], word[3]]);
    }
    for i in 16..64 {
        let s0 = w[i - 15].rotate_right(7) ^ w[i - 15].rotate_right(18) ^ (w[i - 15] >> 3);
        let s1 = w[i - 2].rotate_right(17) ^ w[i - 2].rotate_right(19) ^ (w[i - 2] >> 10);
        w[i] = w[i - 16]
            .wrapping_add(s0)
            .wrapping_add(w[i - 7])
            .wrapping_add(s1);
    }
    let mut v = *h;
    for i in 0..64 {
        let s1 = v[4].rotate_right(6) ^ v[4].rotate_right(11) ^ v[4].rotate_right(25);
        let choose = (v[4] & v[5]) ^ (!v[4] & v[6]);
        let t1 = v[7]
            .wrapping_add(s1)
            .wrapping_add(choose)
            .wrapping_add(K[i])
            .wrapping_add(w[i]);
        let s0 = v[0].rotate_right(2) ^ v[0].rotate_right(13) ^ v[0].rotate_right(22);
        let majority = (v[0] & v[1]) ^ (v[0] & v[2]) ^ (v[1] & v[2]);
        let t2 = s0.wrapping_add(majority);
        v = [
            t1.wrapping_add(t2),
            v[0],
            v[1],
            v[2],
            v[3].wrapping_add(t1),
            v[4],
            v[5],
            v[6],
        ];
    }
    for (state, value) in h.iter_mut().zip(v) {
        *state = state.wrapping_add(value);
    }
}

/// SHA-256 of `data`, as lowercase hex: content-addressed file names.
pub fn sha256_hex(data: &[u8]) -> String {
    let mut hasher = Sha256::default();
    hasher.update(data);
    hasher.finish_hex()
}

#[cfg(test)]
mod encoding_tests {
    use super::*;

    #[test]
    fn a_diff_shows_the_changed_middle() {
        let old = "a\nb\nc\nd\n";
        let new = "a\nB\nc2\nd\n";
        assert_eq!(
            diff_lines(old, new, 12),
            ["  - b", "  - c", "  + B", "  + c2"]
        );
        assert_eq!(diff_lines("", "x\ny", 12), ["  + x", "  + y"]);
        assert_eq!(diff_lines("same", "same", 12), Vec::<String>::new());
        let long: String = (0..40).map(|n| format!("{n}\n")).collect();
        let shown = diff_lines("", &long, 12);
        assert_eq!(shown.len(), 13);
        assert_eq!(shown.last().unwrap(), "  + … 28 more lines");
        // A control sequence in a file is written out, not sent.
        assert_eq!(diff_lines("", "\u{1b}[2J", 12), ["  + \\u{1b}[2J"]);
    }

    #[test]
    fn markdown_link_text_and_address_cannot_be_escaped_from() {
        let text = "a](https://evil.example) [b] `c` *d* _e_ <img src=x> ~f~ &lt; \\ !#\nnext";
        let link = markdown_link(text, "file:///ws/x)y (z)<w>\\v/é");
        assert_eq!(
            link,
            "[a\\]\\(https://evil.example\\) \\[b\\] \\`c\\` \\*d\\* \\_e\\_ \\<img src=x\\> \\~f\\~ \\&lt; \\\\ \\!\\#\\\\nnext]\
             (file:///ws/x%29y%20%28z%29%3Cw%3E%5Cv/%C3%A9)"
        );
        // The text holds no unescaped bracket, so the link ends only at
        // its own `](`; the address holds no parenthesis at all.
        let (shown, address) = link.rsplit_once("](").unwrap();
        let bare = shown
            .replace("\\\\", "")
            .replace("\\[", "")
            .replace("\\]", "");
        assert!(!bare[1..].contains(['[', ']']), "{shown}");
        assert!(!address[..address.len() - 1].contains(['(', ')', ' ', '<', '>']));
        // Controls are written out before the escaping.
        assert_eq!(
            markdown_link("a\u{1b}[2J", "file:///a"),
            "[a\\\\u{1b}\\[2J](file:///a)"
        );
        assert_eq!(markdown_text("line\nbreak\r"), "line break ");
    }

    #[test]
    fn a_sentence_ends_in_one_full_stop() {
        assert_eq!(sentence("the session goes on"), "the session goes on.");
        assert_eq!(sentence("the session goes on."), "the session goes on.");
        assert_eq!(sentence("Is it? "), "Is it?");
        assert_eq!(sentence("wait…"), "wait…");
        assert_eq!(sentence("v1.2"), "v1.2.");
    }

    #[test]
    fn base64_round_trips_and_rejects_garbage() {
        for data in [&b""[..], b"f", b"fo", b"foo", b"foob", b"fooba", b"foobar"] {
            let encoded = base64_encode(data);
            assert_eq!(base64_decode(&encoded).unwrap(), data);
        }
        assert_eq!(base64_encode(b"foobar"), "Zm9vYmFy");
        assert_eq!(base64_encode(b"fo"), "Zm8=");
        assert_eq!(base64_decode("Zm8").unwrap(), b"fo");
        assert!(base64_decode("not base64!").is_none());
        assert!(base64_decode("Zm9=v").is_none());
    }

    #[test]
    fn sha256_in_pieces_is_sha256_of_the_whole() {
        let data: Vec<u8> = (0..1000u32).map(|i| (i * 7) as u8).collect();
        for step in [1, 3, 63, 64, 65, 200] {
            let mut hasher = Sha256::default();
            for piece in data.chunks(step) {
                hasher.update(piece);
            }
            assert_eq!(hasher.finish_hex(), sha256_hex(&data), "{step}");
        }
    }

    #[test]
    fn sha256_known_answers() {
        assert_eq!(
            sha256_hex(b""),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
        assert_eq!(
            sha256_hex(b"abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        let long = vec![b'a'; 1000];
        assert_eq!(
            sha256_hex(&long),
            "41edece42d63e8d9bf515a9ba6932e1c20cbc9f5a5d134645adb5db1b9737ea3"
        );
    }
}

/// A log file that starts over when it grows past [`RotatingLog::CAP`]:
/// the full one becomes `PATH.1` (one old file kept).
pub struct RotatingLog {
    path: std::path::PathBuf,
    file: std::fs::File,
    written: u64,
}

impl RotatingLog {
    pub const CAP: u64 = 10 * 1024 * 1024;

    /// Opens (or creates) the log: never through a symbolic link at the
    /// path, only a regular file of the user's own, made private (0600)
    /// whatever mode it had; new folders are private too.
    pub fn open(path: &std::path::Path) -> std::io::Result<RotatingLog> {
        if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
            crate::os::create_private_dir_all(parent)?;
        }
        // Opened without blocking: a FIFO at the name with no reader is
        // refused by the open itself, one with a reader below.
        let not_regular = || {
            crate::os::reading::special_kind(path).map(|kind| {
                std::io::Error::other(format!("{} is {kind}, not a regular file", path.display()))
            })
        };
        let file = crate::os::open_private(path, crate::os::Private::Append).map_err(|error| {
            if crate::os::is_link_refused(&error) {
                std::io::Error::other(format!(
                    "{} is a symbolic link; name the log file itself",
                    path.display()
                ))
            } else {
                not_regular().unwrap_or(error)
            }
        })?;
        let meta = file.metadata()?;
        if !meta.is_file() {
            return Err(not_regular().unwrap_or_else(|| {
                std::io::Error::other(format!("{} is not a regular file", path.display()))
            }));
        }
        if !crate::os::owned_by_me(&meta) {
            return Err(std::io::Error::other(format!(
                "{} is not a regular file of yours",
                path.display()
            )));
        }
        crate::os::make_private(&file)?;
        let written = meta.len();
        Ok(RotatingLog {
            path: path.to_path_buf(),
            file,
            written,
        })
    }

    fn rotate(&mut self) -> std::io::Result<()> {
        let mut old = self.path.clone().into_os_string();
        old.push(".1");
        std::fs::rename(&self.path, &old)?;
        *self = RotatingLog::open(&self.path.clone())?;
        Ok(())
    }
}

impl std::io::Write for RotatingLog {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        if self.written + bytes.len() as u64 > Self::CAP && self.written > 0 {
            // Could not rotate: go on in the full file rather than lose lines.
            let _ = self.rotate();
        }
        let n = self.file.write(bytes)?;
        self.written += n as u64;
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.file.flush()
    }
}

#[cfg(test)]
mod log_tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn the_log_rotates_past_its_cap() {
        let dir = std::env::temp_dir().join(format!("spindle-log-{}", random_hex()));
        let path = dir.join("spindle.log");
        let mut log = RotatingLog::open(&path).unwrap();
        let line = vec![b'x'; 1024 * 1024];
        for _ in 0..11 {
            log.write_all(&line).unwrap();
        }
        log.flush().unwrap();
        let old = std::fs::metadata(dir.join("spindle.log.1")).unwrap().len();
        let now = std::fs::metadata(&path).unwrap().len();
        assert_eq!(old, 10 * 1024 * 1024);
        assert_eq!(now, 1024 * 1024);
        let _ = std::fs::remove_dir_all(&dir);
    }
}

/// The changed lines between two texts, as one hunk: what lies between
/// their common first and last lines, removed then added, at most
/// `shown` of each.
pub fn diff_lines(old: &str, new: &str, shown: usize) -> Vec<String> {
    let old: Vec<&str> = old.lines().collect();
    let new: Vec<&str> = new.lines().collect();
    let same_start = old.iter().zip(&new).take_while(|(a, b)| a == b).count();
    let rest = old.len().min(new.len()) - same_start;
    let same_end = old
        .iter()
        .rev()
        .zip(new.iter().rev())
        .take(rest)
        .take_while(|(a, b)| a == b)
        .count();
    let mut lines = Vec::new();
    for (sign, side) in [("-", &old), ("+", &new)] {
        let changed = &side[same_start..side.len() - same_end];
        for line in changed.iter().take(shown) {
            lines.push(format!("  {sign} {}", visible(line, false)));
        }
        if changed.len() > shown {
            lines.push(format!("  {sign} … {} more lines", changed.len() - shown));
        }
    }
    lines
}

/// `text` as a sentence: closed with a full stop unless it ends one
/// already (`.`, `!`, `?`, `…`). For a message built around text from
/// elsewhere (a provider's error, a hook's failure), which may or may
/// not end in its own full stop: never two.
pub fn sentence(text: &str) -> String {
    let text = text.trim_end();
    match text.chars().last() {
        Some('.' | '!' | '?' | '…') => text.to_string(),
        _ => format!("{text}."),
    }
}

/// What kind of JSON value `value` is, in words for an error: "a
/// string", "an object", "null".
pub fn json_kind(value: &serde_json::Value) -> &'static str {
    use serde_json::Value;
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// `1 file`, `2 files`: a count and its noun, in the plural when it is
/// not one.
pub fn count(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

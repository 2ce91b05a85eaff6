//! A text file's line endings and byte-order mark, as the file tools keep
//! them: a file a Windows editor wrote with CRLF stays CRLF when the model
//! (which writes `\n`) changes it, and a leading BOM stays.

/// The byte-order mark, as the first character of a text.
pub(crate) const BOM: char = '\u{feff}';

/// How many line endings of each kind a text holds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Endings {
    pub crlf: usize,
    /// `\n` without a `\r` before it.
    pub lf: usize,
}

impl Endings {
    pub(crate) fn of(text: &[u8]) -> Endings {
        let mut endings = Endings::default();
        for (at, _) in text.iter().enumerate().filter(|(_, &b)| b == b'\n') {
            if at > 0 && text[at - 1] == b'\r' {
                endings.crlf += 1;
            } else {
                endings.lf += 1;
            }
        }
        endings
    }

    /// More CRLF endings than bare LF ones.
    pub(crate) fn crlf_dominant(self) -> bool {
        self.crlf > self.lf
    }
}

/// `text` with every bare `\n` made `\r\n` (those already CRLF kept).
pub(crate) fn to_crlf(text: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(text.len() + text.len() / 16 + 2);
    for (at, &byte) in text.iter().enumerate() {
        if byte == b'\n' && (at == 0 || text[at - 1] != b'\r') {
            out.push(b'\r');
        }
        out.push(byte);
    }
    out
}

/// The content `write_file` writes over a file that held `old`: CRLF when
/// `old` was mostly CRLF and `new` has only bare `\n` endings, and with
/// `old`'s BOM when `new` lacks one. Anything else is written as given.
pub(crate) fn conform(old: &str, new: &str) -> String {
    let mut out = String::with_capacity(new.len() + new.len() / 16 + 4);
    if old.starts_with(BOM) && !new.starts_with(BOM) {
        out.push(BOM);
    }
    let given = Endings::of(new.as_bytes());
    if Endings::of(old.as_bytes()).crlf_dominant() && given.crlf == 0 && given.lf > 0 {
        // Only `\r` bytes are added before `\n`: the text stays UTF-8.
        out.push_str(&String::from_utf8(to_crlf(new.as_bytes())).unwrap_or_else(|_| new.into()));
    } else {
        out.push_str(new);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endings_are_counted_and_converted() {
        let mixed = Endings::of(b"a\r\nb\nc\r\n");
        assert_eq!(mixed, Endings { crlf: 2, lf: 1 });
        assert!(mixed.crlf_dominant());
        assert!(!Endings::of(b"a\nb\r\n").crlf_dominant());
        assert!(!Endings::of(b"").crlf_dominant());
        assert_eq!(to_crlf(b"\na\nb\r\nc"), b"\r\na\r\nb\r\nc");
    }

    #[test]
    fn writes_over_a_file_keep_its_endings_and_bom() {
        assert_eq!(conform("a\r\nb\r\n", "x\ny\n"), "x\r\ny\r\n");
        // Content that already has CRLF somewhere is the writer's choice.
        assert_eq!(conform("a\r\nb\r\n", "x\r\ny\n"), "x\r\ny\n");
        assert_eq!(conform("a\nb\n", "x\ny\n"), "x\ny\n");
        assert_eq!(conform("\u{feff}a\n", "x\n"), "\u{feff}x\n");
        assert_eq!(conform("\u{feff}a\n", "\u{feff}x\n"), "\u{feff}x\n");
        assert_eq!(conform("\u{feff}a\r\n", "x\n"), "\u{feff}x\r\n");
        assert_eq!(conform("a\n", "\u{feff}x\n"), "\u{feff}x\n");
        assert_eq!(conform("a\r\n", "single"), "single");
    }
}

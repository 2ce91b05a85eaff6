//! Targets of the tools: the glob matcher, ignore rules, the edit applier,
//! the forgiving matchers and inflate, with the small deflate encoder that feeds it.

use super::rng::Rng;

const GLOB_TOKENS: &[&str] = &[
    "*", "**", "?", "[", "]", "!", "^", "-", "/", "\\", "a", "b", ".", "{", "}", ",", "é",
];

pub(super) fn ignore_rules(rng: &mut Rng) -> Result<(), String> {
    let mut text = String::new();
    for _ in 0..rng.below(6) {
        text.push_str(&rng.text(
            &[
                "!", "/", "*", "**", "a", "b", "#", "\\", " ", "?", "[a]", ".",
            ],
            5,
        ));
        text.push('\n');
    }
    let path = rng.text(&["a", "b", "/", ".", "c"], 8);
    let _ = crate::tools::ignore::ignored_by(&text, &path, rng.below(2) == 0);
    // A rule naming a file ignores it, and its negation after it does not.
    // Only letters: the generator mixes in random characters, and a `/`,
    // `*`, `!` or `#` makes the rule mean something else (`baa/` is a
    // folder rule, which a file of that name rightly does not meet).
    let name: String = rng
        .text(&["a", "b", "c"], 4)
        .chars()
        .filter(|c| c.is_alphanumeric())
        .collect();
    if !name.is_empty() {
        if !crate::tools::ignore::ignored_by(&name, &name, false) {
            return Err(format!("{name:?} does not ignore itself"));
        }
        if crate::tools::ignore::ignored_by(&format!("{name}\n!{name}"), &name, false) {
            return Err(format!("!{name} does not un-ignore it"));
        }
    }
    Ok(())
}

pub(super) fn glob_matcher(rng: &mut Rng) -> Result<(), String> {
    let pattern = rng.text(GLOB_TOKENS, 8);
    let path = rng.text(&["a", "b", "/", ".", "é", "-", "c"], 10);
    let _ = crate::tools::ignore::glob_match(&pattern, &path);
    let _ = crate::tools::ignore::Glob::new(&pattern);
    // A pattern without special characters matches exactly itself.
    let literal: String = rng
        .text(&["a", "b", "c", "é"], 6)
        .chars()
        .filter(|c| c.is_alphanumeric())
        .collect();
    if !literal.is_empty() && !crate::tools::ignore::glob_match(&literal, &literal) {
        return Err(format!("{literal:?} does not match itself"));
    }
    Ok(())
}

pub(super) fn edit_applier(rng: &mut Rng) -> Result<(), String> {
    let text = rng.text(&["a", "b", "\n", "é", " ", "ab"], 20);
    let old = if rng.below(2) == 0 && !text.is_empty() {
        let start = rng.below(text.len());
        let end = (start + 1 + rng.below(4)).min(text.len());
        match text.get(start..end) {
            Some(slice) => slice.to_string(),
            None => "a".into(),
        }
    } else {
        rng.text(&["a", "b", "é"], 3)
    };
    let new = rng.text(&["x", "y", "\n"], 3);
    let edit = crate::tools::files::Edit {
        old: old.clone(),
        new: new.clone(),
        replace_all: rng.below(2) == 0,
    };
    // Only the exact path is checked here: without the old text, a slip
    // may be forgiven (src/tools/matching has its own tests).
    let applied = crate::tools::files::apply_edits(&text, std::slice::from_ref(&edit));
    if let (Ok((result, _)), true) = (applied, text.contains(&old)) {
        let expected = if edit.replace_all {
            text.replace(&old, &new)
        } else {
            text.replacen(&old, &new, 1)
        };
        if result != expected {
            return Err(format!("{text:?} with {old:?} -> {new:?} gave {result:?}"));
        }
    }
    Ok(())
}

/// The forgiving matchers over text made of their slips' material (line
/// ends, indentation, typographic punctuation, escapes, read_file
/// prefixes): they never panic, their spans are in order, apart, within
/// the text and on character boundaries, and a match found by forgiving a
/// slip differs from the old text by that slip alone, as checked here by
/// normalisers of this target's own.
pub(super) fn forgiving_matcher(rng: &mut Rng) -> Result<(), String> {
    use crate::tools::matching::{locate, Slip};
    const TOKENS: &[&str] = &[
        "a", "b", " ", "  ", "\t", "\n", "\n", "\r\n", "\u{201c}", "\"", "\u{2014}", "-",
        "\u{2026}", "...", "\\n", "\\t", "\\\"", "     1\t", "     2\t", "\u{a0}",
    ];
    let text = rng.text(TOKENS, 24);
    let old = if rng.below(3) > 0 && !text.is_empty() {
        // A piece of the text, with one token changed now and then.
        let chars: Vec<char> = text.chars().collect();
        let start = rng.below(chars.len());
        let end = (start + 1 + rng.below(12)).min(chars.len());
        let mut piece: String = chars[start..end].iter().collect();
        if rng.below(2) == 0 {
            let (from, to) = (rng.pick(TOKENS), rng.pick(TOKENS));
            piece = piece.replacen(from, to, 1);
        }
        piece
    } else {
        rng.text(TOKENS, 6)
    };
    let new = rng.text(TOKENS, 4);
    if old.is_empty() {
        return Ok(());
    }
    let Ok(located) = locate(text.as_bytes(), &old, &new, rng.below(2) == 0) else {
        return Ok(());
    };
    let mut last = 0;
    for span in &located.spans {
        if span.start < last || span.end < span.start || span.end > text.len() {
            return Err(format!(
                "{text:?} / {old:?}: bad span {}..{}",
                span.start, span.end
            ));
        }
        if !text.is_char_boundary(span.start) || !text.is_char_boundary(span.end) {
            return Err(format!("{text:?} / {old:?}: span off a character boundary"));
        }
        last = span.end;
        let region = &text[span.start..span.end];
        let lf = |s: &str| s.replace("\r\n", "\n");
        let lines = |s: &str, f: fn(&str) -> &str| -> Vec<String> {
            lf(s).split('\n').map(|l| f(l).to_string()).collect()
        };
        // Random characters reach every typographic form: the table is
        // the module's.
        let ascii = |s: &str| lf(&crate::tools::matching::ascii_punctuation(s));
        let agrees = match located.slip {
            None => lf(region) == lf(&old),
            Some(Slip::LineEndings) => region == lf(&old),
            Some(Slip::TrailingWhitespace) => {
                lines(region, |l| l.trim_end_matches([' ', '\t']))
                    == lines(&old, |l| l.trim_end_matches([' ', '\t']))
            }
            Some(Slip::Indentation | Slip::TabsAndSpaces) => {
                lines(region, |l| l.trim_start_matches([' ', '\t']))
                    == lines(&old, |l| l.trim_start_matches([' ', '\t']))
            }
            Some(Slip::LineNumbers) => {
                let strip = |l: &str| -> String {
                    let rest = l.trim_start_matches(' ');
                    let rest = rest.trim_start_matches(|c: char| c.is_ascii_digit());
                    rest.strip_prefix('\t').unwrap_or(rest).to_string()
                };
                let ours: Vec<String> = lf(&old).split('\n').map(strip).collect();
                lf(region).split('\n').map(String::from).collect::<Vec<_>>() == ours
            }
            Some(Slip::Punctuation) => ascii(region) == ascii(&old),
            Some(Slip::Escapes) => {
                let plain = old
                    .replace("\\n", "\n")
                    .replace("\\t", "\t")
                    .replace("\\\"", "\"");
                lf(region) == lf(&plain) || region.contains('\\')
            }
            Some(Slip::FinalNewline) => {
                span.end == text.len() && lf(region) == lf(old.trim_end_matches(['\n', '\r']))
            }
        };
        if !agrees {
            return Err(format!(
                "{text:?} / {old:?}: matched {region:?} forgiving {:?}",
                located.slip
            ));
        }
    }
    Ok(())
}

/// Deflate streams made by a small encoder (stored blocks and fixed
/// Huffman blocks with back references) decode to what was encoded, under
/// any cap; the same streams with bytes changed, cut or appended never
/// panic and never give more than the cap. The gzip and zlib wrappers too.
pub(super) fn inflate(rng: &mut Rng) -> Result<(), String> {
    use crate::tools::inflate::{adler32, crc32, gunzip, zlib_or_raw, Stop};
    let data = rng.text(&["a", "ab", "abc", "\n", "x", "\u{e9}", "aaaaaaaa"], 60);
    let data = data.as_bytes();
    let stream = deflate_for_tests(rng, data);
    let cap = if rng.below(3) == 0 {
        rng.below(data.len() + 1)
    } else {
        usize::MAX
    };
    let decoded = crate::tools::inflate::inflate(&stream, cap)
        .map_err(|e| format!("{data:?} encoded as {stream:?}: {e}"))?;
    let expected = &data[..data.len().min(cap)];
    let stop_ok = match decoded.stop {
        Stop::End => data.len() <= cap,
        Stop::Cap => data.len() > cap,
        Stop::Truncated => false,
    };
    if decoded.bytes != expected || !stop_ok {
        return Err(format!(
            "{data:?} (cap {cap}) encoded as {stream:?} decoded as {:?}, {:?}",
            decoded.bytes, decoded.stop
        ));
    }
    let mut gzip = vec![0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 3];
    gzip.extend_from_slice(&stream);
    gzip.extend_from_slice(&crc32(data).to_le_bytes());
    gzip.extend_from_slice(&(data.len() as u32).to_le_bytes());
    let mut zlib = vec![0x78, 0x9c];
    zlib.extend_from_slice(&stream);
    zlib.extend_from_slice(&adler32(data).to_be_bytes());
    for (name, wrapped) in [
        ("gzip", gunzip(&gzip, usize::MAX)),
        ("zlib", zlib_or_raw(&zlib, usize::MAX)),
    ] {
        match wrapped {
            Ok(inflated) if inflated.bytes == data && inflated.stop == Stop::End => {}
            other => return Err(format!("{data:?} in {name} gave {other:?}")),
        }
    }
    // Broken copies: whatever they decode to stays within the cap.
    let mut broken = if rng.below(2) == 0 { gzip } else { stream };
    for _ in 0..1 + rng.below(4) {
        match rng.below(4) {
            0 if !broken.is_empty() => {
                let at = rng.below(broken.len());
                broken[at] ^= 1 << rng.below(8);
            }
            1 => broken.truncate(rng.below(broken.len() + 1)),
            2 => broken.push(rng.below(256) as u8),
            _ if !broken.is_empty() => {
                let at = rng.below(broken.len());
                broken[at] = rng.below(256) as u8;
            }
            _ => {}
        }
    }
    let cap = 1 + rng.below(200);
    for inflated in [
        crate::tools::inflate::inflate(&broken, cap),
        gunzip(&broken, cap),
        zlib_or_raw(&broken, cap),
    ]
    .into_iter()
    .flatten()
    {
        if inflated.bytes.len() > cap {
            return Err(format!(
                "{broken:?} gave {} bytes over the cap {cap}",
                inflated.bytes.len()
            ));
        }
    }
    Ok(())
}

/// A raw deflate stream of `data` (RFC 1951): a run of blocks, each stored
/// or of the fixed Huffman code with greedy back references (found in the
/// last 300 bytes), so the decoder meets every length and distance path.
pub fn deflate_for_tests(rng: &mut Rng, data: &[u8]) -> Vec<u8> {
    use crate::tools::inflate::{DISTANCE_BASE, DISTANCE_EXTRA, LENGTH_BASE, LENGTH_EXTRA};
    struct Writer {
        out: Vec<u8>,
        bits: u32,
        count: u32,
    }
    impl Writer {
        /// `value`'s `n` low bits, least significant first.
        fn put(&mut self, value: u32, n: u32) {
            for i in 0..n {
                self.bits |= ((value >> i) & 1) << self.count;
                self.count += 1;
                if self.count == 8 {
                    self.out.push(self.bits as u8);
                    self.bits = 0;
                    self.count = 0;
                }
            }
        }
        /// A Huffman code of `n` bits, most significant first.
        fn code(&mut self, code: u32, n: u32) {
            for i in (0..n).rev() {
                self.put((code >> i) & 1, 1);
            }
        }
        fn align(&mut self) {
            if self.count > 0 {
                self.put(0, 8 - self.count);
            }
        }
        fn symbol(&mut self, symbol: u32) {
            match symbol {
                0..=143 => self.code(0x30 + symbol, 8),
                144..=255 => self.code(0x190 + symbol - 144, 9),
                256..=279 => self.code(symbol - 256, 7),
                _ => self.code(0xc0 + symbol - 280, 8),
            }
        }
    }
    let mut writer = Writer {
        out: Vec::new(),
        bits: 0,
        count: 0,
    };
    let mut at = 0;
    loop {
        let end = (at + 1 + rng.below(data.len() + 1)).min(data.len());
        let last = end == data.len();
        writer.put(u32::from(last), 1);
        if rng.below(4) == 0 {
            writer.put(0, 2);
            writer.align();
            let length = (end - at) as u16;
            writer.out.extend_from_slice(&length.to_le_bytes());
            writer.out.extend_from_slice(&(!length).to_le_bytes());
            writer.out.extend_from_slice(&data[at..end]);
        } else {
            writer.put(1, 2);
            let mut i = at;
            while i < end {
                let mut best = (0, 0);
                for distance in 1..=i.min(300) {
                    let mut length = 0;
                    while length < 258
                        && i + length < end
                        && data[i + length - distance] == data[i + length]
                    {
                        length += 1;
                    }
                    if length > best.0 {
                        best = (length, distance);
                    }
                }
                if best.0 >= 3 {
                    let (length, distance) = best;
                    let index = LENGTH_BASE
                        .iter()
                        .rposition(|b| usize::from(*b) <= length)
                        .unwrap_or(0);
                    writer.symbol(257 + index as u32);
                    writer.put(
                        (length - usize::from(LENGTH_BASE[index])) as u32,
                        u32::from(LENGTH_EXTRA[index]),
                    );
                    let code = DISTANCE_BASE
                        .iter()
                        .rposition(|b| usize::from(*b) <= distance)
                        .unwrap_or(0);
                    writer.code(code as u32, 5);
                    writer.put(
                        (distance - usize::from(DISTANCE_BASE[code])) as u32,
                        u32::from(DISTANCE_EXTRA[code]),
                    );
                    i += length;
                } else {
                    writer.symbol(u32::from(data[i]));
                    i += 1;
                }
            }
            writer.symbol(256);
        }
        at = end;
        if last {
            writer.align();
            return writer.out;
        }
    }
}

const JSON_TOKENS: &[&str] = &[
    "{",
    "}",
    "[",
    "]",
    ",",
    ":",
    "'",
    "\"",
    "\\",
    "a",
    "1",
    "-2.5e3",
    "True",
    "None",
    "null",
    " ",
    "\n",
    "\t",
    "```",
    "```json\n",
    "é",
    "\"path\"",
];

/// Almost-JSON arguments: any text gets an answer, never a panic; what
/// strict JSON reads, the lenient reader reads the same, with no repair.
pub(super) fn almost_json(rng: &mut Rng) -> Result<(), String> {
    let text = rng.text(JSON_TOKENS, 24);
    let lenient = crate::tools::lenient::parse(&text);
    if let Ok(strict) = serde_json::from_str::<serde_json::Value>(&text) {
        match lenient {
            Ok(read) if read.value == strict && read.repairs.is_empty() => {}
            other => return Err(format!("{text:?}: strict {strict}, lenient {other:?}")),
        }
    }
    let offered = crate::tools::specs(false, 1000);
    let name = rng.text(&["read", "_", "-", "File", "functions.", "x"], 4);
    let _ = crate::tools::repair::fix_call(&name, &text, &offered);
    Ok(())
}

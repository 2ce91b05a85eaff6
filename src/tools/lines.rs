//! Line windows of large text files without holding them: one streaming
//! pass builds an index (the SHA-256 revision, the line count, and the byte
//! offset of every 1,024th line), kept while the file's size, mtime and
//! inode stay the same; a window then seeks to the nearest mark and reads
//! only its own lines.

use std::fs::File;
use std::io::{BufRead, BufReader, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

/// Lines between two marks.
const STRIDE: u64 = 1024;

/// What one pass over a file learnt.
#[derive(Debug, Clone)]
pub(crate) struct FileIndex {
    stamp: (u64, i64, u64),
    pub revision: String,
    pub total_lines: u64,
    /// `marks[k]`: the byte offset where line `k * STRIDE + 1` starts.
    marks: Vec<u64>,
}

/// Why a file has no window.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum LinesError {
    Unreadable,
    NotText,
    TooLarge,
}

fn stamp(path: &Path) -> Result<(u64, i64, u64), LinesError> {
    let meta = std::fs::metadata(path).map_err(|_| LinesError::Unreadable)?;
    if !meta.is_file() {
        return Err(LinesError::Unreadable);
    }
    let (modified, identity) = crate::os::change_stamp(&meta);
    Ok((meta.len(), modified, identity))
}

/// The files indexed for one session (a few, the newest kept).
#[derive(Default)]
pub(crate) struct Indexes {
    entries: Vec<(PathBuf, FileIndex)>,
}

impl Indexes {
    const KEPT: usize = 8;

    /// The file's index, from the cache while the file is unchanged.
    #[cfg(test)]
    pub(crate) fn get(&mut self, path: &Path, cap: u64) -> Result<FileIndex, LinesError> {
        if let Some(index) = self.cached(path, cap)? {
            return Ok(index);
        }
        let index = index(path, cap)?;
        self.keep(path, index.clone());
        Ok(index)
    }

    /// The cached index while the file is unchanged (`None`: it needs a
    /// pass); only the file's metadata is read.
    pub(crate) fn cached(
        &mut self,
        path: &Path,
        cap: u64,
    ) -> Result<Option<FileIndex>, LinesError> {
        let now = stamp(path)?;
        if now.0 > cap {
            return Err(LinesError::TooLarge);
        }
        let Some(at) = self
            .entries
            .iter()
            .position(|(p, i)| p == path && i.stamp == now)
        else {
            return Ok(None);
        };
        let entry = self.entries.remove(at);
        let index = entry.1.clone();
        self.entries.push(entry);
        Ok(Some(index))
    }

    /// Keeps a fresh index (the newest few are kept).
    pub(crate) fn keep(&mut self, path: &Path, index: FileIndex) {
        self.entries.retain(|(p, _)| p != path);
        if self.entries.len() >= Self::KEPT {
            self.entries.remove(0);
        }
        self.entries.push((path.to_path_buf(), index));
    }
}

/// One pass over a file of at most `cap` bytes: its index.
pub(crate) fn index(path: &Path, cap: u64) -> Result<FileIndex, LinesError> {
    let now = stamp(path)?;
    if now.0 > cap {
        return Err(LinesError::TooLarge);
    }
    build(path, now)
}

fn build(path: &Path, stamp: (u64, i64, u64)) -> Result<FileIndex, LinesError> {
    // Never a blocking open (a FIFO swapped in after the look).
    let (mut file, _) = super::bounded::open_regular(path).map_err(|_| LinesError::Unreadable)?;
    let mut hasher = crate::util::Sha256::default();
    let mut buffer = vec![0u8; 256 * 1024];
    // Bytes of a character cut at the end of the last chunk.
    let mut carry: Vec<u8> = Vec::new();
    let (mut offset, mut newlines, mut last) = (0u64, 0u64, None::<u8>);
    let mut marks = vec![0u64];
    loop {
        let n = file.read(&mut buffer).map_err(|_| LinesError::Unreadable)?;
        if n == 0 {
            break;
        }
        let chunk = &buffer[..n];
        hasher.update(chunk);
        carry.extend_from_slice(chunk);
        match std::str::from_utf8(&carry) {
            Ok(_) => carry.clear(),
            Err(error) if error.error_len().is_none() => {
                let keep = carry.split_off(error.valid_up_to());
                carry = keep;
            }
            Err(_) => return Err(LinesError::NotText),
        }
        for (i, byte) in chunk.iter().enumerate() {
            if *byte == b'\n' {
                newlines += 1;
                if newlines % STRIDE == 0 {
                    marks.push(offset + i as u64 + 1);
                }
            }
        }
        offset += n as u64;
        last = chunk.last().copied();
    }
    if !carry.is_empty() {
        return Err(LinesError::NotText);
    }
    // As `str::lines` counts: a last line without its newline counts too.
    let total_lines = newlines + u64::from(last.is_some_and(|b| b != b'\n'));
    Ok(FileIndex {
        stamp,
        revision: hasher.finish_hex(),
        total_lines,
        marks,
    })
}

/// Lines `start..start + count` (1-based) of the file, at most `cap`
/// bytes of text, without their final newlines.
pub(crate) fn window(
    path: &Path,
    index: &FileIndex,
    start: u64,
    count: u64,
    cap: usize,
) -> Result<Vec<String>, LinesError> {
    let mut lines = Vec::new();
    if start > index.total_lines || count == 0 {
        return Ok(lines);
    }
    let mark = ((start - 1) / STRIDE) as usize;
    // Never a blocking open (a FIFO swapped in after the look).
    let (mut file, _) = super::bounded::open_regular(path).map_err(|_| LinesError::Unreadable)?;
    let from = index.marks.get(mark).copied().unwrap_or(0);
    file.seek(SeekFrom::Start(from))
        .map_err(|_| LinesError::Unreadable)?;
    let mut reader = BufReader::with_capacity(64 * 1024, file);
    let mut line_no = mark as u64 * STRIDE + 1;
    let mut used = 0usize;
    let mut line = Vec::new();
    while line_no < start + count && used <= cap {
        line.clear();
        // A line is read at most to what the window may still show.
        let limit = (cap - used.min(cap)) as u64 + 1;
        let read = (&mut reader)
            .take(limit)
            .read_until(b'\n', &mut line)
            .map_err(|_| LinesError::Unreadable)?;
        if read == 0 {
            break;
        }
        let whole = line.last() == Some(&b'\n');
        if line_no >= start {
            if whole {
                line.pop();
            }
            let text = String::from_utf8_lossy(&line).into_owned();
            used += text.len() + 1;
            lines.push(text);
        }
        if !whole {
            // Over the window's bytes (or the end of the file): skip the
            // rest of this line.
            if line_no >= start {
                break;
            }
            skip_line(&mut reader)?;
        }
        line_no += 1;
    }
    Ok(lines)
}

/// Reads past the rest of a line, in bounded pieces.
fn skip_line(reader: &mut BufReader<File>) -> Result<(), LinesError> {
    loop {
        let buffer = reader.fill_buf().map_err(|_| LinesError::Unreadable)?;
        if buffer.is_empty() {
            return Ok(());
        }
        match buffer.iter().position(|b| *b == b'\n') {
            Some(at) => {
                reader.consume(at + 1);
                return Ok(());
            }
            None => {
                let all = buffer.len();
                reader.consume(all);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(name: &str, text: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("spindle-lines-{}", crate::util::random_hex()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join(name);
        std::fs::write(&path, text).unwrap();
        path
    }

    #[test]
    fn windows_match_str_lines_anywhere_in_the_file() {
        let text: String = (1..=5000).map(|i| format!("line {i} é\n")).collect();
        let path = file("a.txt", &text);
        let mut indexes = Indexes::default();
        let index = indexes.get(&path, u64::MAX).unwrap();
        assert_eq!(index.total_lines, 5000);
        assert_eq!(index.revision, crate::util::sha256_hex(text.as_bytes()));
        let all: Vec<&str> = text.lines().collect();
        for (start, count) in [
            (1, 3),
            (1024, 2),
            (1025, 1),
            (4999, 10),
            (2048, 2000),
            (5001, 5),
        ] {
            let got = window(&path, &index, start, count, 1 << 20).unwrap();
            let want: Vec<&str> = all
                .iter()
                .skip(start as usize - 1)
                .take(count as usize)
                .copied()
                .collect();
            assert_eq!(got, want, "{start} {count}");
        }
        // A last line without a newline counts.
        let path = file("b.txt", "a\nb");
        let index = indexes.get(&path, u64::MAX).unwrap();
        assert_eq!(index.total_lines, 2);
        assert_eq!(window(&path, &index, 2, 1, 100).unwrap(), ["b"]);
        // The byte cap holds, even inside one long line.
        let path = file("c.txt", &format!("{}\nshort\n", "x".repeat(10_000)));
        let index = indexes.get(&path, u64::MAX).unwrap();
        let got = window(&path, &index, 1, 2, 100).unwrap();
        assert_eq!(got.len(), 1);
        assert!(got[0].len() <= 101);
        // Not text, too large.
        let path = file("d.bin", "ok\n\u{0}");
        std::fs::write(&path, [b'a', 0xff, b'\n']).unwrap();
        assert_eq!(
            indexes.get(&path, u64::MAX).unwrap_err(),
            LinesError::NotText
        );
        assert_eq!(indexes.get(&path, 1).unwrap_err(), LinesError::TooLarge);
    }

    #[test]
    fn a_changed_file_is_indexed_again() {
        let path = file("e.txt", "one\n");
        let mut indexes = Indexes::default();
        let first = indexes.get(&path, u64::MAX).unwrap();
        std::fs::write(&path, "one\ntwo\nthree\n").unwrap();
        let second = indexes.get(&path, u64::MAX).unwrap();
        assert_ne!(first.revision, second.revision);
        assert_eq!(second.total_lines, 3);
    }
}

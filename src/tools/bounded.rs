//! Reading workspace files within bounds: only regular files are opened
//! (a named pipe or a device would block a turn or never end), without
//! blocking on the open itself, and never more than a cap of bytes; a file
//! too large to hold is read as a stream of lines instead.

use std::io::{BufRead, BufReader};
use std::path::Path;

/// Largest file `read_file` returns at once, in bytes (a window of a
/// larger one is a page of this size).
pub(crate) const READ_BYTE_CAP: usize = 100 * 1024;

/// Files up to this size are read whole (and may come from the editor's
/// buffer); larger ones are streamed from disk by `read_file`.
pub(crate) const WHOLE_READ_CAP: u64 = 8 * 1024 * 1024;
/// The largest file `edit_file` changes (and `write_file` shows the old
/// content of): bigger ones are changed with a command.
pub(crate) const EDIT_CAP: u64 = 8 * 1024 * 1024;

/// The file tools' size limits (config `limits.read_whole_bytes` and
/// `limits.edit_file_bytes`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileLimits {
    pub whole: u64,
    pub edit: u64,
    /// The most bytes one `read_file` call returns.
    pub page: usize,
}

impl Default for FileLimits {
    fn default() -> Self {
        FileLimits {
            whole: WHOLE_READ_CAP,
            edit: EDIT_CAP,
            page: READ_BYTE_CAP,
        }
    }
}

// The reader of single files lives in `os` so that every tier can use
// it for the files settings and environment variables name.
pub(crate) use crate::os::reading::{open_regular, read_capped, read_capped_here, ReadError};

/// What `stream_lines` found.
pub(crate) struct Window {
    /// The numbered lines (as `read_file` shows them).
    pub text: String,
    /// The last line shown (0 when none).
    pub last: usize,
    /// Whether the file goes on after the last line shown.
    pub more: bool,
    /// Whether the file looks binary (a NUL byte near its start).
    pub binary: bool,
}

/// Lines `start..start + count` (1-based) of a large file, read as a
/// stream: memory stays within `byte_cap` (a line longer than the room
/// left is cut, with a mark) and reading stops after the window.
pub(crate) fn stream_lines(
    path: &Path,
    start: usize,
    count: usize,
    byte_cap: usize,
) -> Result<Window, ReadError> {
    let (file, _) = open_regular(path)?;
    let mut reader = BufReader::with_capacity(64 * 1024, file);
    let mut window = Window {
        text: String::new(),
        last: 0,
        more: false,
        binary: false,
    };
    let end = start.saturating_add(count);
    let mut line = 1;
    let mut kept: Vec<u8> = Vec::new();
    let mut cut = false;
    let mut first_chunk = true;
    loop {
        let chunk = reader.fill_buf().map_err(ReadError::Io)?;
        if chunk.is_empty() {
            break;
        }
        if first_chunk {
            first_chunk = false;
            if chunk[..chunk.len().min(8192)].contains(&0) {
                window.binary = true;
                return Ok(window);
            }
        }
        if line >= end {
            window.more = true;
            break;
        }
        let (piece, ends_line) = match chunk.iter().position(|&b| b == b'\n') {
            Some(at) => (&chunk[..at], true),
            None => (chunk, false),
        };
        let used = piece.len() + usize::from(ends_line);
        if line >= start {
            let room = byte_cap.saturating_sub(window.text.len() + kept.len());
            let take = piece.len().min(room);
            kept.extend_from_slice(&piece[..take]);
            cut |= take < piece.len();
        }
        reader.consume(used);
        if ends_line {
            if line >= start {
                if !push_line(&mut window, line, &kept, cut, byte_cap) {
                    window.more = true;
                    return Ok(window);
                }
                kept.clear();
                cut = false;
            }
            line += 1;
        }
    }
    // A last line without a newline.
    if (!kept.is_empty() || cut) && line >= start && line < end {
        push_line(&mut window, line, &kept, cut, byte_cap);
    }
    Ok(window)
}

/// Adds one numbered line; false when the output is full.
fn push_line(window: &mut Window, number: usize, bytes: &[u8], cut: bool, cap: usize) -> bool {
    if window.text.len() >= cap {
        return false;
    }
    let text = String::from_utf8_lossy(bytes);
    window.text.push_str(&format!(
        "{number:>6}\t{text}{}\n",
        if cut { "…" } else { "" }
    ));
    if cut {
        window.text.push_str(&format!(
            "[Line {number} is longer than what can be shown; only its beginning is.]\n"
        ));
    }
    window.last = number;
    !cut
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch() -> std::path::PathBuf {
        let dir =
            std::env::temp_dir().join(format!("spindle-bounded-{}", crate::util::random_hex()));
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn capped_reads_and_streamed_windows() {
        let dir = scratch();
        let path = dir.join("big.txt");
        let text: String = (1..=1000).map(|n| format!("line {n}\n")).collect();
        std::fs::write(&path, &text).unwrap();
        assert!(matches!(
            read_capped(&path, 100),
            Err(ReadError::TooLarge(_))
        ));
        assert_eq!(read_capped(&path, 1 << 20).unwrap(), text.as_bytes());
        let window = stream_lines(&path, 10, 3, 1 << 20).unwrap();
        assert_eq!(
            window.text,
            "    10\tline 10\n    11\tline 11\n    12\tline 12\n"
        );
        assert_eq!(window.last, 12);
        assert!(window.more);
        let end = stream_lines(&path, 999, 10, 1 << 20).unwrap();
        assert_eq!(end.last, 1000);
        assert!(!end.more);
        // One endless line: memory stays within the cap.
        let long = dir.join("long.txt");
        std::fs::write(&long, "x".repeat(300_000)).unwrap();
        let window = stream_lines(&long, 1, 10, 1000).unwrap();
        assert!(window.text.len() < 1200, "{}", window.text.len());
        assert!(window.text.contains("only its beginning"));
        std::fs::remove_dir_all(dir).unwrap();
    }
}

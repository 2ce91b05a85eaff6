//! Reading a file whose name came from outside — a workspace, a setting,
//! an environment variable — within bounds: only a regular file is read
//! (a FIFO or a device would block whoever opens it, or never end), the
//! open itself never blocks, the type is checked on the opened file (so a
//! FIFO swapped in after a look is no way round it), and no more than a
//! cap of bytes is held.

use std::fs::File;
use std::io::{self, Read};
use std::path::Path;

/// Why a file could not be read.
#[derive(Debug)]
pub(crate) enum ReadError {
    Missing,
    Directory,
    /// A pipe, socket or device: reading it could block or never end.
    NotRegular,
    /// Larger than the cap (its size in bytes).
    TooLarge(u64),
    Io(io::Error),
}

impl ReadError {
    /// Why `path` was not read, in words that follow its name: "is a
    /// FIFO, not a regular file", "is larger than 4 MiB".
    pub(crate) fn reason(&self, path: &Path, cap: u64) -> String {
        match self {
            ReadError::Missing => "does not exist".into(),
            ReadError::Directory => "is a folder, not a file".into(),
            ReadError::NotRegular => {
                let kind = std::fs::metadata(path)
                    .map(|meta| super::sys::special_kind(&meta))
                    .unwrap_or("a special file");
                format!("is {kind}, not a regular file")
            }
            ReadError::TooLarge(_) => format!("is larger than {}", size_words(cap)),
            ReadError::Io(error) => format!("cannot be read ({error})"),
        }
    }
}

/// What lies at `path` when it is neither a regular file nor a folder
/// ("a FIFO", "a socket", "a character device"); `None` otherwise.
pub(crate) fn special_kind(path: &Path) -> Option<&'static str> {
    let meta = std::fs::metadata(path).ok()?;
    (!meta.is_file() && !meta.is_dir()).then(|| super::sys::special_kind(&meta))
}

/// A size in the largest unit that shows it whole: "4 MiB", "64 KiB",
/// "100 bytes".
pub(crate) fn size_words(bytes: u64) -> String {
    match bytes {
        b if b >= 1 << 20 && b % (1 << 20) == 0 => format!("{} MiB", b >> 20),
        b if b >= 1 << 10 && b % (1 << 10) == 0 => format!("{} KiB", b >> 10),
        b => format!("{b} bytes"),
    }
}

/// Opens `path` for reading if it is a regular file. The open cannot block
/// (a FIFO swapped in after a check would), and the type is checked on the
/// opened file itself.
pub(crate) fn open_regular(path: &Path) -> Result<(File, u64), ReadError> {
    let file = super::open_read(path, true).map_err(|err| match err.kind() {
        io::ErrorKind::NotFound => ReadError::Missing,
        io::ErrorKind::IsADirectory => ReadError::Directory,
        // Windows refuses to open a folder as a file ("access denied").
        io::ErrorKind::PermissionDenied if std::fs::metadata(path).is_ok_and(|m| m.is_dir()) => {
            ReadError::Directory
        }
        _ => ReadError::Io(err),
    })?;
    let meta = file.metadata().map_err(ReadError::Io)?;
    if meta.is_dir() {
        return Err(ReadError::Directory);
    }
    if !meta.is_file() {
        return Err(ReadError::NotRegular);
    }
    Ok((file, meta.len()))
}

/// [`read_capped`] of a file that is not a link itself (`O_NOFOLLOW`).
pub(crate) fn read_capped_here(path: &Path, cap: u64) -> Result<Vec<u8>, ReadError> {
    let file = super::open_read(path, false).map_err(|err| match err.kind() {
        io::ErrorKind::NotFound => ReadError::Missing,
        _ => ReadError::Io(err),
    })?;
    let meta = file.metadata().map_err(ReadError::Io)?;
    if !meta.is_file() {
        return Err(ReadError::NotRegular);
    }
    read_within(file, meta.len(), cap)
}

/// The whole content of a regular file of at most `cap` bytes.
pub(crate) fn read_capped(path: &Path, cap: u64) -> Result<Vec<u8>, ReadError> {
    let (file, size) = open_regular(path)?;
    read_within(file, size, cap)
}

/// A file a setting or an environment variable names, read whole within
/// `cap` bytes; the error names the file and says why ("… is a FIFO, not
/// a regular file").
pub(crate) fn read_named(path: &Path, cap: u64) -> Result<Vec<u8>, String> {
    read_capped(path, cap)
        .map_err(|error| format!("{} {}", path.display(), error.reason(path, cap)))
}

/// [`read_named`] of a text file: bytes that are not UTF-8 are an error
/// too.
pub(crate) fn read_named_text(path: &Path, cap: u64) -> Result<String, String> {
    String::from_utf8(read_named(path, cap)?)
        .map_err(|_| format!("{} is not UTF-8 text", path.display()))
}

/// The rest of an opened regular file of `size` bytes, at most `cap` of
/// them.
pub(crate) fn read_within(file: File, size: u64, cap: u64) -> Result<Vec<u8>, ReadError> {
    if size > cap {
        return Err(ReadError::TooLarge(size));
    }
    let mut bytes = Vec::with_capacity(usize::try_from(size).unwrap_or(0));
    // A file that grows while it is read stops at the cap all the same.
    file.take(cap.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(ReadError::Io)?;
    if bytes.len() as u64 > cap {
        return Err(ReadError::TooLarge(bytes.len() as u64));
    }
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch() -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!(
            "spindle-reading-{}-{}",
            std::process::id(),
            crate::clock::now_ms()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    #[cfg_attr(windows, ignore = "FIFOs, /proc and /dev")]
    fn pipes_and_devices_are_refused_without_blocking() {
        let dir = scratch();
        let fifo = dir.join("fifo");
        let made = std::process::Command::new("mkfifo").arg(&fifo).status();
        assert!(made.is_ok_and(|s| s.success()), "mkfifo");
        assert!(matches!(open_regular(&fifo), Err(ReadError::NotRegular)));
        let said = read_named(&fifo, 10).unwrap_err();
        assert!(
            said.ends_with("fifo is a FIFO, not a regular file"),
            "{said}"
        );
        assert!(matches!(
            read_capped(Path::new("/dev/zero"), 10),
            Err(ReadError::NotRegular)
        ));
        let said = read_named(Path::new("/dev/zero"), 10).unwrap_err();
        assert_eq!(said, "/dev/zero is a character device, not a regular file");
        assert!(matches!(open_regular(&dir), Err(ReadError::Directory)));
        assert!(matches!(
            open_regular(&dir.join("none")),
            Err(ReadError::Missing)
        ));
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn a_named_file_over_its_cap_is_refused_with_the_cap() {
        let dir = scratch();
        let path = dir.join("big");
        std::fs::write(&path, vec![b'x'; 3 << 20]).unwrap();
        let said = read_named(&path, 2 << 20).unwrap_err();
        assert!(said.ends_with("big is larger than 2 MiB"), "{said}");
        assert_eq!(read_named(&path, u64::MAX).unwrap().len(), 3 << 20);
        std::fs::write(&path, [0xff, 0xfe]).unwrap();
        let said = read_named_text(&path, 10).unwrap_err();
        assert!(said.ends_with("big is not UTF-8 text"), "{said}");
        assert_eq!(size_words(64 << 10), "64 KiB");
        assert_eq!(size_words(100), "100 bytes");
        std::fs::remove_dir_all(dir).unwrap();
    }
}

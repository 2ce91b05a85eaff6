//! Files a repository ships that Spindle reads on its own behalf — custom
//! commands, instruction files, the project's `.spindle/config.json` — and
//! the attachments it keeps under `.spindle/`. A repository chooses what
//! lies at those names: a link to `~/.ssh/id_rsa` or `/proc/self/environ`,
//! a FIFO that blocks whoever opens it, a device, a file of gigabytes. So
//! such a file is read only when it is a regular file that really lies in
//! the folder it was found in (the opened descriptor's own path is checked,
//! so a link swapped in after a look is no way round it), has no other
//! name (one hard link), and fits a cap; and the open never blocks.

use std::fs::File;
use std::io::Read;
use std::path::{Path, PathBuf};

/// Why a shipped file was not read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refused {
    /// A link to somewhere outside its folder (or its folder is one).
    Link,
    /// It has other names (hard links), perhaps outside the workspace.
    HardLink,
    /// A folder, FIFO, socket or device.
    NotRegular,
    /// Larger than the cap (its size).
    TooLarge(u64),
    /// It could not be opened or read.
    Unreadable(String),
    /// An import that leads out of the folder it must stay in (named).
    Outside(String),
    /// An import of a kind never followed (the whole reason).
    NotAllowed(String),
}

impl Refused {
    /// Why, in words that finish "… is not read: ".
    pub fn reason(&self) -> String {
        match self {
            Refused::Link => "it is a link to a file outside its folder".into(),
            Refused::HardLink => "it has another name (a hard link) elsewhere".into(),
            Refused::NotRegular => "it is not a regular file (a FIFO, socket or device)".into(),
            Refused::TooLarge(size) => format!("it is too large ({size} bytes)"),
            Refused::Unreadable(error) => format!("it cannot be read ({error})"),
            Refused::Outside(place) => format!("it is outside {place}"),
            Refused::NotAllowed(why) => why.clone(),
        }
    }
}

/// One file left out, for notices and `spindle doctor`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Skipped {
    pub path: PathBuf,
    pub why: Refused,
    /// How it was reached, when not by its own name: "@../x in the
    /// project's AGENTS.md".
    pub via: Option<String>,
}

impl Skipped {
    pub fn new(path: PathBuf, why: Refused) -> Skipped {
        Skipped {
            path,
            why,
            via: None,
        }
    }

    pub fn describe(&self) -> String {
        // A repository chooses its file names: none may act on a terminal.
        let path = crate::util::visible(&self.path.display().to_string(), false);
        match &self.via {
            Some(via) => format!(
                "{} ({path}) is not read: {}",
                crate::util::visible(via, false),
                self.why.reason()
            ),
            None => format!("{path} is not read: {}", self.why.reason()),
        }
    }
}

/// Opens `path` if it is a regular file lying in its own folder, and that
/// folder inside `within` (all as real paths). `Ok(None)` when there is
/// nothing at `path`.
pub(crate) fn open(path: &Path, within: &Path) -> Result<Option<(File, u64)>, Refused> {
    use super::bounded::{open_regular, ReadError};
    // A device is never even opened (opening one can act); the type is
    // checked again on the opened file.
    match std::fs::metadata(path) {
        Ok(meta) if !meta.is_file() => return Err(Refused::NotRegular),
        _ => {}
    }
    let (file, size) = match open_regular(path) {
        Ok(opened) => opened,
        Err(ReadError::Missing) => {
            // A dangling link is a link all the same.
            return match std::fs::symlink_metadata(path) {
                Ok(_) => Err(Refused::Link),
                Err(_) => Ok(None),
            };
        }
        Err(ReadError::Directory | ReadError::NotRegular) => return Err(Refused::NotRegular),
        Err(ReadError::TooLarge(size)) => return Err(Refused::TooLarge(size)),
        Err(ReadError::Io(error)) => return Err(Refused::Unreadable(error.to_string())),
    };
    check_place(&file, path, within)?;
    Ok(Some((file, size)))
}

/// The content of a shipped file of at most `cap` bytes (see [`open`]).
pub(crate) fn read(path: &Path, within: &Path, cap: u64) -> Result<Option<Vec<u8>>, Refused> {
    let Some((file, size)) = open(path, within)? else {
        return Ok(None);
    };
    if size > cap {
        return Err(Refused::TooLarge(size));
    }
    let mut bytes = Vec::with_capacity(usize::try_from(size).unwrap_or(0));
    file.take(cap + 1)
        .read_to_end(&mut bytes)
        .map_err(|error| Refused::Unreadable(error.to_string()))?;
    if bytes.len() as u64 > cap {
        return Err(Refused::TooLarge(bytes.len() as u64));
    }
    Ok(Some(bytes))
}

/// Whether the file opened from `path` lies in the folder `path` names,
/// that folder inside `within`, with no other name.
fn check_place(file: &File, path: &Path, within: &Path) -> Result<(), Refused> {
    let links =
        crate::os::link_count(file).map_err(|error| Refused::Unreadable(error.to_string()))?;
    if links > 1 {
        return Err(Refused::HardLink);
    }
    let folder = path
        .parent()
        .and_then(|dir| crate::os::canonical(dir).ok())
        .ok_or(Refused::Link)?;
    let within = crate::os::canonical(within).map_err(|_| Refused::Link)?;
    if !folder.starts_with(&within) {
        return Err(Refused::Link);
    }
    match crate::os::real_path(file) {
        Some(real) if real.starts_with(&folder) => Ok(()),
        _ => Err(Refused::Link),
    }
}

/// Writes `data` as a new file `name` in `folder` (made when missing),
/// which must lie inside `within`: never through a link, never over an
/// existing file (an existing one is left as it is, as the names are
/// content hashes).
pub(crate) fn write_new(
    within: &Path,
    folder: &Path,
    name: &str,
    data: &[u8],
) -> Result<PathBuf, String> {
    use std::io::Write;
    let real_within = crate::os::canonical(within)
        .map_err(|error| format!("cannot find {}: {error}", within.display()))?;
    let relative = folder
        .strip_prefix(within)
        .map_err(|_| format!("{} is not inside {}", folder.display(), within.display()))?;
    // Folder by folder: each one made here or a real folder, never a link
    // (making the folders first would follow one out).
    let mut real_folder = real_within.clone();
    for part in relative.components() {
        real_folder.push(part);
        match std::fs::symlink_metadata(&real_folder) {
            Ok(meta) if meta.is_dir() => {}
            Ok(_) => {
                return Err(format!(
                    "{} leads outside the workspace (a link) or is not a folder; nothing is saved there",
                    real_folder.display()
                ))
            }
            Err(_) => std::fs::create_dir(&real_folder)
                .map_err(|error| format!("cannot create {}: {error}", real_folder.display()))?,
        }
    }
    let path = real_folder.join(name);
    match std::fs::symlink_metadata(&path) {
        Ok(meta) if meta.file_type().is_file() => return Ok(path),
        Ok(_) => {
            return Err(format!(
                "{} exists and is not a regular file; nothing is saved there",
                path.display()
            ))
        }
        Err(_) => {}
    }
    // Created new (never over a link planted meanwhile); anyone may read
    // it, as a file in the workspace.
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&path)
        .map_err(|error| format!("cannot save {}: {error}", path.display()))?;
    file.write_all(data)
        .map_err(|error| format!("cannot save {}: {error}", path.display()))?;
    Ok(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch() -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("spindle-shipped-{}", crate::util::random_hex()));
        std::fs::create_dir_all(dir.join("repo/.spindle/commands")).unwrap();
        std::fs::create_dir_all(dir.join("outside")).unwrap();
        dir
    }

    #[test]
    #[cfg_attr(windows, ignore = "FIFOs, /proc and /dev")]
    fn links_specials_hard_links_and_large_files_are_refused() {
        let dir = scratch();
        let repo = dir.join("repo");
        let commands = repo.join(".spindle/commands");
        std::fs::write(dir.join("outside/secret"), "key").unwrap();
        std::fs::write(commands.join("ok.md"), "fine").unwrap();
        std::fs::write(commands.join("big.md"), "x".repeat(100)).unwrap();
        crate::os::testing::symlink(dir.join("outside/secret"), commands.join("out.md")).unwrap();
        crate::os::testing::symlink("/proc/self/environ", commands.join("env.md")).unwrap();
        crate::os::testing::symlink("ok.md", commands.join("alias.md")).unwrap();
        crate::os::testing::symlink(dir.join("nowhere"), commands.join("dangling.md")).unwrap();
        std::fs::write(dir.join("outside/other"), "key").unwrap();
        std::fs::hard_link(dir.join("outside/other"), commands.join("hard.md")).unwrap();
        let fifo = commands.join("fifo.md");
        assert!(std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap()
            .success());
        let read = |name: &str| read(&commands.join(name), &repo, 50);
        assert_eq!(read("ok.md"), Ok(Some(b"fine".to_vec())));
        // A link that stays in the folder is the same file.
        assert_eq!(read("alias.md"), Ok(Some(b"fine".to_vec())));
        assert_eq!(read("missing.md"), Ok(None));
        assert_eq!(read("out.md"), Err(Refused::Link));
        assert_eq!(read("env.md"), Err(Refused::Link));
        assert_eq!(read("dangling.md"), Err(Refused::Link));
        assert_eq!(read("hard.md"), Err(Refused::HardLink));
        assert_eq!(read("fifo.md"), Err(Refused::NotRegular));
        assert_eq!(read("big.md"), Err(Refused::TooLarge(100)));
        assert_eq!(
            super::read(
                &std::path::PathBuf::from("/dev/zero"),
                Path::new("/dev"),
                50
            ),
            Err(Refused::NotRegular)
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_folder_that_is_a_link_out_is_refused() {
        let dir = scratch();
        let repo = dir.join("repo");
        std::fs::write(dir.join("outside/x.md"), "elsewhere").unwrap();
        crate::os::testing::symlink(dir.join("outside"), repo.join(".spindle/linked")).unwrap();
        assert_eq!(
            read(&repo.join(".spindle/linked/x.md"), &repo, 50),
            Err(Refused::Link)
        );
        let error = write_new(&repo, &repo.join(".spindle/linked"), "a.png", b"data").unwrap_err();
        assert!(error.contains("outside the workspace"), "{error}");
        assert!(!dir.join("outside/a.png").exists());
        // A link planted at the name is never written through.
        let own = repo.join(".spindle/attachments");
        std::fs::create_dir_all(&own).unwrap();
        crate::os::testing::symlink(dir.join("outside/target"), own.join("b.png")).unwrap();
        assert!(write_new(&repo, &own, "b.png", b"data").is_err());
        assert!(!dir.join("outside/target").exists());
        let saved = write_new(&repo, &own, "c.png", b"data").unwrap();
        assert_eq!(std::fs::read(saved).unwrap(), b"data");
        let _ = std::fs::remove_dir_all(&dir);
    }
}

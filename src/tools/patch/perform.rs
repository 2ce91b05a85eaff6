//! Performing a plan: the changes made in order through callbacks, and
//! the callbacks for the local disk (reads within a cap, atomic writes,
//! removes and moves of files only).

use super::plan::file_type;
use super::types::{ChangeKind, FileChange};
use crate::tools::bounded::{self, ReadError};
use crate::tools::error::{ToolError, ToolErrorKind};
use std::fs;
use std::io::{self, Write};
use std::path::Path;

/// Performs planned changes in order: `write` for adds and updates,
/// `remove` for deletes, `rename` then `write` (the new text, at the
/// destination) for moves of a patch; a move without texts (from
/// [`move_plan`] of a non-text file) is only renamed. On an error the
/// changes before it stay made, and the message says which.
pub(crate) fn apply(
    changes: &[FileChange],
    write: &mut dyn FnMut(&Path, &str) -> Result<(), ToolError>,
    remove: &mut dyn FnMut(&Path) -> Result<(), ToolError>,
    rename: &mut dyn FnMut(&Path, &Path) -> Result<(), ToolError>,
) -> Result<(), ToolError> {
    for (index, change) in changes.iter().enumerate() {
        let path = change.path.as_path();
        let text = change.new_text.as_deref();
        let result = match (&change.kind, text) {
            (ChangeKind::Add | ChangeKind::Update, Some(text)) => write(path, text),
            (ChangeKind::Add | ChangeKind::Update, None) => {
                Err(ToolError::invalid("the change has no new text"))
            }
            (ChangeKind::Delete, _) => remove(path),
            (ChangeKind::Move { to }, text) => rename(path, to).and_then(|()| match text {
                Some(text) if change.old_text.is_some() => write(to, text).map_err(|err| {
                    err.reworded(format!(
                        "{err} (it was moved to {} but its new text was not written)",
                        to.display()
                    ))
                }),
                _ => Ok(()),
            }),
        };
        if let Err(err) = result {
            let before = if index == 0 {
                "no other change was made".to_string()
            } else {
                format!(
                    "{} before it {} made ({})",
                    match index {
                        1 => "the change".to_string(),
                        n => format!("the {n} changes"),
                    },
                    if index == 1 { "was" } else { "were" },
                    changes[..index]
                        .iter()
                        .map(|c| c.path.display().to_string())
                        .collect::<Vec<_>>()
                        .join(", ")
                )
            };
            return Err(err.reworded(format!(
                "{}: {err}; {before}, the {} after it were not",
                path.display(),
                changes.len() - index - 1
            )));
        }
    }
    Ok(())
}

/// `read` for [`plan`] on the local disk: `None` for a missing file; an
/// error for a directory, a pipe or device, a file over `cap` bytes or
/// one that is not UTF-8.
pub(crate) fn local_read(path: &Path, cap: u64) -> Result<Option<String>, ToolError> {
    let wrong_type = |message: &str| ToolError::new(ToolErrorKind::WrongType, message);
    match bounded::read_capped(path, cap) {
        Ok(bytes) => String::from_utf8(bytes).map(Some).map_err(|_| {
            ToolError::new(ToolErrorKind::Binary, "it is not UTF-8 text; apply_patch changes text files only (delete_file and move_file handle any file)")
        }),
        Err(ReadError::Missing) => Ok(None),
        Err(ReadError::Directory) => Err(wrong_type("it is a directory")),
        Err(ReadError::NotRegular) => Err(wrong_type(
            "it is not a regular file (a pipe, socket or device)",
        )),
        Err(ReadError::TooLarge(size)) => Err(ToolError::new(ToolErrorKind::TooLarge, format!(
            "it is {size} bytes, more than the file tools change ({cap} bytes); change it with a command"
        ))),
        Err(ReadError::Io(err)) => Err(ToolError::io(format!("cannot read it: {err}"))),
    }
}

/// Writes `text` to `path` on the local disk, atomically: into a temporary
/// file in the same directory, then renamed over it. Missing parent
/// directories are created; an existing file keeps its permissions; a
/// symlink is written through (the file it points to changes).
pub(crate) fn local_write(path: &Path, text: &str) -> Result<(), ToolError> {
    let is_link = fs::symlink_metadata(path).is_ok_and(|meta| meta.file_type().is_symlink());
    let path = match is_link {
        true => crate::os::canonical(path).unwrap_or_else(|_| path.to_path_buf()),
        false => path.to_path_buf(),
    };
    let (Some(dir), Some(name)) = (path.parent(), path.file_name()) else {
        return Err(ToolError::invalid(format!(
            "{} is not a file path",
            path.display()
        )));
    };
    fs::create_dir_all(dir)
        .map_err(|err| ToolError::io(format!("cannot create {}: {err}", dir.display())))?;
    let existing = match fs::metadata(&path) {
        Ok(meta) if meta.is_dir() => {
            return Err(ToolError::new(
                ToolErrorKind::WrongType,
                format!("{} is a directory", path.display()),
            ));
        }
        Ok(meta) => Some(meta.permissions()),
        Err(_) => None,
    };
    let short: String = name.to_string_lossy().chars().take(64).collect();
    let temp = dir.join(format!(".{short}.{}.tmp", crate::util::random_hex()));
    let created = fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&temp);
    let mut file = match created {
        Ok(file) => file,
        // A directory that takes no new files may still hold a writable
        // file: written in place then.
        Err(err) if err.kind() == io::ErrorKind::PermissionDenied && existing.is_some() => {
            return fs::write(&path, text)
                .map_err(|err| ToolError::io(format!("cannot write {}: {err}", path.display())));
        }
        Err(err) => {
            return Err(ToolError::io(format!(
                "cannot write {}: {err}",
                path.display()
            )))
        }
    };
    let written = (|| -> io::Result<()> {
        file.write_all(text.as_bytes())?;
        if let Some(permissions) = existing {
            file.set_permissions(permissions)?;
        }
        drop(file);
        fs::rename(&temp, &path)
    })();
    written.map_err(|err| {
        let _ = fs::remove_file(&temp);
        ToolError::io(format!("cannot write {}: {err}", path.display()))
    })
}

/// Removes a file (a symlink as a link, never what it points to); refuses
/// a directory.
pub(crate) fn local_remove(path: &Path) -> Result<(), ToolError> {
    let kind = file_type(path, &path.display().to_string())?;
    if kind.is_dir() {
        return Err(ToolError::new(
            ToolErrorKind::WrongType,
            format!(
                "{} is a directory, not a file; it was not removed",
                path.display()
            ),
        ));
    }
    fs::remove_file(path)
        .map_err(|err| ToolError::io(format!("cannot delete {}: {err}", path.display())))
}

/// Renames `from` to `to`, creating the destination's parent directories;
/// refuses a directory and an existing destination. Across file systems a
/// regular file is copied (with its permissions) and the original removed.
pub(crate) fn local_move(from: &Path, to: &Path) -> Result<(), ToolError> {
    let kind = file_type(from, &from.display().to_string())?;
    if kind.is_dir() {
        return Err(ToolError::new(
            ToolErrorKind::WrongType,
            format!(
                "{} is a directory, not a file; it was not moved",
                from.display()
            ),
        ));
    }
    if fs::symlink_metadata(to).is_ok() {
        return Err(ToolError::new(
            ToolErrorKind::Exists,
            format!("{} already exists", to.display()),
        ));
    }
    if let Some(dir) = to.parent() {
        fs::create_dir_all(dir)
            .map_err(|err| ToolError::io(format!("cannot create {}: {err}", dir.display())))?;
    }
    match fs::rename(from, to) {
        Ok(()) => Ok(()),
        Err(err) if err.kind() == io::ErrorKind::CrossesDevices && kind.is_file() => {
            fs::copy(from, to)
                .and_then(|_| fs::remove_file(from))
                .map_err(|err| {
                    ToolError::io(format!(
                        "cannot move {} to {}: {err}",
                        from.display(),
                        to.display()
                    ))
                })
        }
        Err(err) => Err(ToolError::io(format!(
            "cannot move {} to {}: {err}",
            from.display(),
            to.display()
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::{Temp, CAP};
    use super::super::{parse, plan};
    use super::*;

    #[test]
    #[cfg_attr(windows, ignore = "expects / in shown paths")]
    fn apply_uses_the_callbacks_in_order_and_names_what_was_done() {
        let root = Path::new("/r");
        let patch = parse(
            "*** Begin Patch\n*** Add File: a\n+a\n*** Delete File: b\n*** Update File: c\n*** Move to: d\n*** Add File: e\n+e\n*** End Patch",
        )
        .unwrap();
        let changes = plan(&patch, root, CAP, &|path| {
            Ok((path.ends_with("b") || path.ends_with("c")).then(|| "x\n".to_string()))
        })
        .unwrap();
        let log = std::cell::RefCell::new(Vec::new());
        let err = apply(
            &changes,
            &mut |path, text| {
                log.borrow_mut()
                    .push(format!("write {} {text:?}", path.display()));
                match path.ends_with("d") {
                    true => Err(ToolError::io("disk full")),
                    false => Ok(()),
                }
            },
            &mut |path| {
                log.borrow_mut().push(format!("remove {}", path.display()));
                Ok(())
            },
            &mut |from, to| {
                log.borrow_mut()
                    .push(format!("rename {} {}", from.display(), to.display()));
                Ok(())
            },
        )
        .unwrap_err();
        assert_eq!(
            log.into_inner(),
            [
                "write /r/a \"a\\n\"",
                "remove /r/b",
                "rename /r/c /r/d",
                "write /r/d \"x\\n\""
            ]
        );
        assert!(
            err.to_string().starts_with("/r/c: disk full (it was moved to /r/d but its new text was not written); the 2 changes before it were made (/r/a, /r/b), the 1 after it were not"),
            "{err}"
        );
        // The kind is the failed step's.
        assert_eq!(err.kind(), ToolErrorKind::Io);
    }

    #[test]
    #[cfg_attr(windows, ignore = "Unix file modes")]
    fn local_write_is_atomic_keeps_modes_and_follows_links() {
        let temp = Temp::new("write");
        let root = &temp.0;
        temp.put("run.sh", "old\n");
        crate::os::testing::set_mode(root.join("run.sh"), 0o750).unwrap();
        local_write(&root.join("run.sh"), "new\n").unwrap();
        assert_eq!(temp.get("run.sh").unwrap(), "new\n");
        assert_eq!(crate::os::testing::mode(root.join("run.sh")), 0o750);
        crate::os::testing::symlink(root.join("run.sh"), root.join("link.sh")).unwrap();
        local_write(&root.join("link.sh"), "through\n").unwrap();
        assert!(fs::symlink_metadata(root.join("link.sh"))
            .unwrap()
            .file_type()
            .is_symlink());
        assert_eq!(temp.get("run.sh").unwrap(), "through\n");
        local_write(&root.join("deep/er/file.txt"), "x").unwrap();
        assert_eq!(temp.get("deep/er/file.txt").unwrap(), "x");
        // No temporary files are left behind.
        let names: Vec<String> = fs::read_dir(root)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert!(names.iter().all(|n| !n.ends_with(".tmp")), "{names:?}");
        assert!(local_write(root, "x").is_err());
    }
}

//! Planning: every change of a patch computed, every file read and every
//! hunk located, before anything is written; the plans of `delete_file`
//! and `move_file`; the summary of a plan for the model.

use super::hunks::apply_hunks;
use super::parse::{ADD, MOVE, UPDATE};
use super::types::{ChangeKind, FileChange, Operation, OperationKind, Patch};
use crate::tools::bounded;
use crate::tools::error::{ToolError, ToolErrorKind};
use crate::tools::paths;
use std::collections::HashMap;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};

fn too_large(text: &str, cap: u64) -> Option<String> {
    (text.len() as u64 > cap).then(|| {
        format!(
            "it is {} bytes, more than the file tools change ({cap} bytes); change it with a command",
            text.len()
        )
    })
}

fn exists(message: String) -> ToolError {
    ToolError::new(ToolErrorKind::Exists, message)
}

fn wrong_type(message: String) -> ToolError {
    ToolError::new(ToolErrorKind::WrongType, message)
}

fn oversized(message: String) -> ToolError {
    ToolError::new(ToolErrorKind::TooLarge, message)
}

/// Computes every change of `patch` without writing anything: every file
/// read (through `read`, which returns `None` for a missing file) and every
/// hunk located. Paths resolve against `root`; files over `cap` bytes are
/// refused. Two operations on one path, an add of an existing file, an
/// update or delete of a missing one and a move onto an existing file are
/// errors.
pub(crate) fn plan(
    patch: &Patch,
    root: &Path,
    cap: u64,
    read: &dyn Fn(&Path) -> Result<Option<String>, ToolError>,
) -> Result<Vec<FileChange>, ToolError> {
    let mut planner = Planner {
        root,
        cap,
        read,
        claimed: HashMap::new(),
    };
    let mut changes = Vec::with_capacity(patch.operations.len());
    for operation in &patch.operations {
        changes.push(planner.change(operation)?);
    }
    Ok(changes)
}

/// What planning one patch needs: where paths resolve, the size cap, how
/// files are read, and which paths an earlier operation already changes.
struct Planner<'a> {
    root: &'a Path,
    cap: u64,
    read: &'a dyn Fn(&Path) -> Result<Option<String>, ToolError>,
    claimed: HashMap<PathBuf, usize>,
}

impl Planner<'_> {
    /// Marks `path` as changed by the operation at `line`; a second
    /// operation on it is an error.
    fn claim(&mut self, path: &Path, line: usize) -> Result<(), ToolError> {
        match self.claimed.insert(path.to_path_buf(), line) {
            Some(first) => Err(ToolError::invalid(format!(
                "line {line}: {} is already changed by the operation at line {first}; give each file one operation",
                paths::display(self.root, path)
            ))),
            None => Ok(()),
        }
    }

    /// The text of the file the operation names (`None`: missing), refused
    /// over the cap.
    fn existing(
        &self,
        from: &paths::Resolved,
        line: usize,
        verb: &str,
    ) -> Result<Option<String>, ToolError> {
        let shown = paths::display(self.root, &from.path);
        let text = (self.read)(&from.path)
            .map_err(|err| err.reworded(format!("line {line}: cannot {verb} {shown}: {err}")))?;
        if let Some(err) = text.as_deref().and_then(|text| too_large(text, self.cap)) {
            return Err(oversized(format!(
                "line {line}: cannot {verb} {shown}: {err}"
            )));
        }
        Ok(text)
    }

    /// The change one operation makes, checked against the files as they are.
    fn change(&mut self, operation: &Operation) -> Result<FileChange, ToolError> {
        let line = operation.line;
        let from = paths::resolve(self.root, &operation.path);
        let shown = paths::display(self.root, &from.path);
        if from.path == paths::normalise(self.root) {
            return Err(wrong_type(format!(
                "line {line}: {:?} is the workspace itself, not a file",
                operation.path
            )));
        }
        self.claim(&from.path, line)?;
        match &operation.kind {
            OperationKind::Add { content } => {
                if self.existing(&from, line, "add")?.is_some() {
                    return Err(exists(format!(
                        "line {line}: cannot add {shown}: it already exists; use '{UPDATE} {}' to change it",
                        operation.path
                    )));
                }
                if let Some(err) = too_large(content, self.cap) {
                    return Err(oversized(format!("line {line}: cannot add {shown}: {err}")));
                }
                Ok(FileChange {
                    path: from.path.clone(),
                    kind: ChangeKind::Add,
                    old_text: None,
                    new_text: Some(content.clone()),
                    inside: from.inside,
                    protection: from.protection,
                })
            }
            OperationKind::Delete => {
                let Some(old) = self.existing(&from, line, "delete")? else {
                    return Err(ToolError::not_found(format!(
                        "line {line}: cannot delete {shown}: it does not exist"
                    )));
                };
                Ok(FileChange {
                    path: from.path.clone(),
                    kind: ChangeKind::Delete,
                    old_text: Some(old),
                    new_text: None,
                    inside: from.inside,
                    protection: from.protection,
                })
            }
            OperationKind::Update { move_to, hunks } => {
                let Some(old) = self.existing(&from, line, "update")? else {
                    return Err(ToolError::not_found(format!(
                        "line {line}: cannot update {shown}: it does not exist; use '{ADD} {}' to create it",
                        operation.path
                    )));
                };
                // A hunk that cannot apply is one whose lines are not there.
                let new = apply_hunks(&old, hunks, &shown)
                    .map_err(|why| ToolError::new(ToolErrorKind::NoMatch, why))?;
                if let Some(err) = too_large(&new, self.cap) {
                    return Err(oversized(format!(
                        "line {line}: cannot update {shown}: the result is too large: {err}"
                    )));
                }
                match move_to {
                    None => Ok(FileChange {
                        path: from.path.clone(),
                        kind: ChangeKind::Update,
                        old_text: Some(old),
                        new_text: Some(new),
                        inside: from.inside,
                        protection: from.protection,
                    }),
                    Some(to) => self.moved(&from, to, line, old, new),
                }
            }
        }
    }

    /// An update that also moves the file: the target must be free and
    /// not the file itself.
    fn moved(
        &mut self,
        from: &paths::Resolved,
        to: &str,
        line: usize,
        old: String,
        new: String,
    ) -> Result<FileChange, ToolError> {
        let shown = paths::display(self.root, &from.path);
        let to = paths::resolve(self.root, to);
        let shown_to = paths::display(self.root, &to.path);
        if to.path == from.path {
            return Err(ToolError::invalid(format!(
                "line {line}: '{MOVE}' names {shown} itself; leave the move out"
            )));
        }
        self.claim(&to.path, line)?;
        match (self.read)(&to.path) {
            Ok(None) => {}
            Ok(Some(_)) => {
                return Err(exists(format!(
                    "line {line}: cannot move {shown} to {shown_to}: {shown_to} already exists"
                )))
            }
            Err(err) => {
                return Err(err.reworded(format!(
                    "line {line}: cannot move {shown} to {shown_to}: {err}"
                )))
            }
        }
        Ok(FileChange {
            path: from.path.clone(),
            kind: ChangeKind::Move {
                to: to.path.clone(),
            },
            old_text: Some(old),
            new_text: Some(new),
            inside: from.inside && to.inside,
            protection: from.protection.max(to.protection),
        })
    }
}

/// The text of a regular file within `cap` bytes, when it is UTF-8.
fn text_within(path: &Path, cap: u64) -> Option<String> {
    bounded::read_capped(path, cap)
        .ok()
        .and_then(|bytes| String::from_utf8(bytes).ok())
}

/// What a file is, without following a symlink.
pub(super) fn file_type(path: &Path, shown: &str) -> Result<fs::FileType, ToolError> {
    match fs::symlink_metadata(path) {
        Ok(meta) => Ok(meta.file_type()),
        Err(err) if err.kind() == io::ErrorKind::NotFound => {
            Err(ToolError::not_found(format!("{shown} does not exist")))
        }
        Err(err) => Err(ToolError::io(format!("cannot inspect {shown}: {err}"))),
    }
}

/// Plans `delete_file`: `given` must be a file or a symlink (removed as a
/// link), not a directory. `old_text` is its text when it is a regular
/// UTF-8 file within `cap`.
pub(crate) fn delete_plan(root: &Path, given: &str, cap: u64) -> Result<FileChange, ToolError> {
    if given.trim().is_empty() {
        return Err(ToolError::invalid(
            "the path is empty; name the file to delete",
        ));
    }
    let resolved = paths::resolve(root, given);
    let shown = paths::display(root, &resolved.path);
    let kind = file_type(&resolved.path, &shown)?;
    if kind.is_dir() {
        return Err(wrong_type(format!(
            "{shown} is a directory; delete_file deletes files only (remove directories with run_command)"
        )));
    }
    let old_text = if kind.is_file() {
        text_within(&resolved.path, cap)
    } else {
        None
    };
    Ok(FileChange {
        path: resolved.path,
        kind: ChangeKind::Delete,
        old_text,
        new_text: None,
        inside: resolved.inside,
        protection: resolved.protection,
    })
}

/// Plans `move_file`: `from` must exist and not be a directory, `to` must
/// not exist. The texts are the file's when it is a regular UTF-8 file
/// within `cap`.
pub(crate) fn move_plan(
    root: &Path,
    from: &str,
    to: &str,
    cap: u64,
) -> Result<FileChange, ToolError> {
    if from.trim().is_empty() || to.trim().is_empty() {
        return Err(ToolError::invalid(
            "name both the file to move (from) and its new path (to)",
        ));
    }
    let source = paths::resolve(root, from);
    let target = paths::resolve(root, to);
    let shown = paths::display(root, &source.path);
    let shown_to = paths::display(root, &target.path);
    let kind = file_type(&source.path, &shown)?;
    if kind.is_dir() {
        return Err(wrong_type(format!(
            "{shown} is a directory; move_file moves files only (move directories with run_command)"
        )));
    }
    if source.path == target.path {
        return Err(ToolError::invalid(format!(
            "{shown} is already at that path"
        )));
    }
    if fs::symlink_metadata(&target.path).is_ok() {
        return Err(exists(format!(
            "{shown_to} already exists; move_file does not replace files (delete it first if that is intended)"
        )));
    }
    let text = if kind.is_file() {
        text_within(&source.path, cap)
    } else {
        None
    };
    Ok(FileChange {
        path: source.path,
        kind: ChangeKind::Move { to: target.path },
        old_text: text.clone(),
        new_text: text,
        inside: source.inside && target.inside,
        protection: source.protection.max(target.protection),
    })
}

/// One line per change, for the model: "added a.txt", "moved a → b"…
pub(crate) fn summary(changes: &[FileChange], root: &Path) -> String {
    let mut lines = Vec::with_capacity(changes.len());
    for change in changes {
        let shown = paths::display(root, &change.path);
        lines.push(match &change.kind {
            ChangeKind::Add => format!(
                "added {shown} ({} lines)",
                change.new_text.as_deref().map_or(0, |t| t.lines().count())
            ),
            ChangeKind::Update => format!("updated {shown}"),
            ChangeKind::Delete => format!("deleted {shown}"),
            ChangeKind::Move { to } => {
                let edited = change.old_text != change.new_text;
                format!(
                    "moved {shown} → {}{}",
                    paths::display(root, to),
                    if edited { " (and updated it)" } else { "" }
                )
            }
        });
    }
    lines.join("\n")
}

#[cfg(test)]
mod tests {
    use super::super::tests::{plan_local, Temp, CAP};
    use super::super::{local_move, local_read, local_remove, parse};
    use super::*;
    use crate::tools::error::ToolErrorKind;

    #[test]
    fn existence_and_duplicates_are_checked() {
        let temp = Temp::new("exist");
        let root = &temp.0;
        temp.put("a.txt", "a\n");
        temp.put("b.txt", "b\n");
        let plan = |text: &str| plan_local(text, root).unwrap_err();
        let err = plan("*** Begin Patch\n*** Add File: a.txt\n+x\n*** End Patch");
        assert!(
            err.to_string()
                .starts_with("line 2: cannot add a.txt: it already exists"),
            "{err}"
        );
        assert_eq!(err.kind(), ToolErrorKind::Exists);
        let err =
            plan("*** Begin Patch\n*** Update File: a.txt\n*** Move to: b.txt\n*** End Patch");
        assert!(err.to_string().contains("b.txt already exists"), "{err}");
        let err = plan("*** Begin Patch\n*** Update File: nope.txt\n@@\n-a\n+b\n*** End Patch");
        assert!(
            err.to_string().contains("nope.txt: it does not exist"),
            "{err}"
        );
        assert_eq!(err.kind(), ToolErrorKind::NotFound);
        let err = plan("*** Begin Patch\n*** Delete File: nope.txt\n*** End Patch");
        assert!(err.to_string().contains("cannot delete nope.txt"), "{err}");
        let err = plan("*** Begin Patch\n*** Delete File: a.txt\n*** Add File: ./x/../a.txt\n+a\n*** End Patch");
        assert!(
            err.to_string()
                .starts_with("line 3: a.txt is already changed by the operation at line 2"),
            "{err}"
        );
        assert_eq!(err.kind(), ToolErrorKind::InvalidArguments);
        let err = plan("*** Begin Patch\n*** Update File: a.txt\n*** Move to: c.txt\n*** Add File: c.txt\n+c\n*** End Patch");
        assert!(
            err.to_string().contains("c.txt is already changed"),
            "{err}"
        );
        fs::create_dir(root.join("dir")).unwrap();
        let err = plan("*** Begin Patch\n*** Delete File: dir\n*** End Patch");
        assert!(err.to_string().contains("directory"), "{err}");
        assert_eq!(err.kind(), ToolErrorKind::WrongType);
        fs::write(root.join("latin1.txt"), b"caf\xe9\n").unwrap();
        let err = plan("*** Begin Patch\n*** Update File: latin1.txt\n@@\n-x\n+y\n*** End Patch");
        assert!(err.to_string().contains("not UTF-8"), "{err}");
        assert_eq!(err.kind(), ToolErrorKind::Binary);
        let big = "x".repeat(100);
        temp.put("big.txt", &big);
        let err = plan_with_cap(
            root,
            50,
            "*** Begin Patch\n*** Update File: big.txt\n@@\n-x\n+y\n*** End Patch",
        )
        .unwrap_err();
        assert!(
            err.to_string().contains("more than the file tools change"),
            "{err}"
        );
        assert_eq!(err.kind(), ToolErrorKind::TooLarge);
        assert_eq!(temp.get("a.txt").unwrap(), "a\n");
    }

    fn plan_with_cap(root: &Path, cap: u64, text: &str) -> Result<Vec<FileChange>, ToolError> {
        plan(&parse(text)?, root, cap, &|path| local_read(path, cap))
    }

    #[test]
    fn delete_file_removes_files_and_links_only() {
        let temp = Temp::new("delete");
        let root = &temp.0;
        temp.put("dir/inner.txt", "in\n");
        let err = delete_plan(root, "dir", CAP).unwrap_err();
        assert!(err.to_string().contains("is a directory"), "{err}");
        assert!(local_remove(&root.join("dir")).is_err());
        assert!(delete_plan(root, "missing", CAP)
            .unwrap_err()
            .to_string()
            .contains("does not exist"));
        crate::os::testing::symlink(root.join("dir/inner.txt"), root.join("link")).unwrap();
        let change = delete_plan(root, "link", CAP).unwrap();
        assert_eq!(change.old_text, None);
        local_remove(&change.path).unwrap();
        assert!(fs::symlink_metadata(root.join("link")).is_err());
        assert_eq!(temp.get("dir/inner.txt").unwrap(), "in\n");
        // A link to a directory is a link, removed as such.
        crate::os::testing::symlink(root.join("dir"), root.join("dirlink")).unwrap();
        let change = delete_plan(root, "dirlink", CAP).unwrap();
        local_remove(&change.path).unwrap();
        assert!(root.join("dir/inner.txt").exists());
        let change = delete_plan(root, "dir/inner.txt", CAP).unwrap();
        assert_eq!(change.old_text.as_deref(), Some("in\n"));
        assert_eq!(change.kind, ChangeKind::Delete);
        local_remove(&change.path).unwrap();
        assert_eq!(temp.get("dir/inner.txt"), None);
    }

    #[test]
    #[cfg_attr(windows, ignore = "Unix file modes")]
    fn move_file_renames_without_replacing() {
        let temp = Temp::new("move");
        let root = &temp.0;
        temp.put("a.sh", "#!/bin/sh\n");
        temp.put("b.txt", "b\n");
        fs::create_dir(root.join("dir")).unwrap();
        crate::os::testing::set_mode(root.join("a.sh"), 0o755).unwrap();
        assert!(move_plan(root, "a.sh", "b.txt", CAP)
            .unwrap_err()
            .to_string()
            .contains("already exists"));
        assert!(move_plan(root, "dir", "dir2", CAP)
            .unwrap_err()
            .to_string()
            .contains("directory"));
        assert!(move_plan(root, "nope", "x", CAP)
            .unwrap_err()
            .to_string()
            .contains("does not exist"));
        assert!(local_move(&root.join("a.sh"), &root.join("b.txt")).is_err());
        let change = move_plan(root, "a.sh", "bin/tools/a.sh", CAP).unwrap();
        assert_eq!(change.old_text.as_deref(), Some("#!/bin/sh\n"));
        let ChangeKind::Move { to } = &change.kind else {
            panic!("not a move")
        };
        local_move(&change.path, to).unwrap();
        assert_eq!(temp.get("a.sh"), None);
        assert_eq!(temp.get("bin/tools/a.sh").unwrap(), "#!/bin/sh\n");
        assert_eq!(crate::os::testing::mode(root.join("bin/tools/a.sh")), 0o755);
        // Moving out of the workspace is reported.
        let outside = Temp::new("move-out");
        let change = move_plan(
            root,
            "b.txt",
            &outside.0.join("b.txt").display().to_string(),
            CAP,
        )
        .unwrap();
        assert!(!change.inside);
    }
}

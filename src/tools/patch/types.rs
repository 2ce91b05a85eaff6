//! What a patch is once read, and what it changes: the types the
//! parser, the planner and the performer share.

use std::path::{Path, PathBuf};

/// A parsed patch: its file operations in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Patch {
    pub operations: Vec<Operation>,
}

/// One `*** Add/Update/Delete File:` section.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Operation {
    /// The path as written in the patch.
    pub path: String,
    /// The 1-based patch line of its header.
    pub line: usize,
    pub kind: OperationKind,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum OperationKind {
    /// The complete content of the new file (LF line endings).
    Add {
        content: String,
    },
    Delete,
    Update {
        move_to: Option<String>,
        hunks: Vec<Hunk>,
    },
}

/// One `@@` section of an update.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Hunk {
    /// The 1-based patch line where it starts.
    pub line: usize,
    /// The text after `@@`, locating the hunk.
    pub context: Option<String>,
    pub lines: Vec<HunkLine>,
    /// Marked `*** End of File`: the hunk is at the end of the file.
    pub end_of_file: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum HunkLine {
    Context(String),
    Remove(String),
    Add(String),
}

/// One file changed by a plan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct FileChange {
    /// The file changed, resolved; for a move, the source.
    pub path: PathBuf,
    pub kind: ChangeKind,
    /// The content before (`None` for an add, and where it is not text
    /// within the cap: a symlink, a binary or very large file).
    pub old_text: Option<String>,
    /// The content after, at the destination for a move (`None` for a
    /// delete, and where `old_text` is `None` for a move).
    pub new_text: Option<String>,
    /// Every path the change touches is inside the workspace.
    pub inside: bool,
    /// The highest protection of the paths the change touches
    /// (`tools::protected`).
    pub protection: crate::tools::protected::Protection,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ChangeKind {
    Add,
    Update,
    Delete,
    /// `to` is resolved like `path`.
    Move {
        to: PathBuf,
    },
}

impl FileChange {
    /// The paths the change touches: the file, and a move's destination.
    pub(crate) fn paths(&self) -> Vec<&Path> {
        match &self.kind {
            ChangeKind::Move { to } => vec![self.path.as_path(), to.as_path()],
            _ => vec![self.path.as_path()],
        }
    }
}

//! The tools that change files: what a change would be (shown when
//! asking), the checkpoint kept around it, and the patch, deletion or
//! move carried out through the editor's files when it offers them.

use super::client::{Client, ClientError};
use super::runner::{failed, text_content, Ending, Runner};
use crate::tools::error::ToolError;
use crate::tools::{files, patch, paths, Tool};
use serde_json::{json, Value};
use std::cell::RefCell;
use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// What a checkpoint kept before a call ran.
pub(super) enum Capture {
    Nothing,
    Files(crate::checkpoint::Pending),
    Workspace(crate::checkpoint::Scan),
}

impl Runner<'_> {
    /// The content a permission request shows besides the title: the
    /// diff an edit would make (computed before asking), or the exact
    /// command line and folder.
    pub(super) fn preview(
        &self,
        tool: &Tool,
        target: Option<&paths::Resolved>,
    ) -> Option<Vec<Value>> {
        if matches!(
            tool,
            Tool::ApplyPatch(_) | Tool::DeleteFile(_) | Tool::MoveFile(_)
        ) {
            let changes = self.plan_files(tool).ok()?;
            return Some(changes.iter().filter_map(change_diff).collect());
        }
        let target = target?;
        let editor = self.editor();
        let limits = self.processes.file_limits;
        let change = match tool {
            Tool::WriteFile(args) => {
                files::preview_write(&target.path, &args.content, &editor, limits)
            }
            Tool::EditFile(args) => files::preview_edit(&target.path, &args.edits, &editor, limits),
            Tool::Remember(args) => {
                let text = self.with_note(&target.path, args).ok()?;
                files::preview_write(&target.path, &text, &editor, limits)
            }
            Tool::RunCommand(args) => {
                let text = format!("```sh\n{}\n```\nin {}", args.command, target.path.display());
                return Some(vec![text_content(&text)]);
            }
            _ => return None,
        };
        // An edit that cannot apply fails when it runs; the request still
        // shows what was asked.
        let change = change.ok()?;
        Some(vec![diff_content(&target.path, &change)])
    }

    /// Where a note of `remember` goes: the user's own `AGENTS.md` (beside
    /// the config), or the project's instruction file at its root (the
    /// `AGENTS.md`, `CLAUDE.md` or `GEMINI.md` in force; a new
    /// `AGENTS.md` when there is none).
    pub(super) fn memory_target(&self, args: &crate::tools::RememberArgs) -> paths::Resolved {
        if !args.project() {
            let global = crate::agent::common::prompt::global_instructions_path();
            return paths::resolve(self.root, &global.display().to_string());
        }
        let name = ["AGENTS.md", "CLAUDE.md", "GEMINI.md"]
            .into_iter()
            .find(|name| std::fs::symlink_metadata(self.root.join(name)).is_ok())
            .unwrap_or("AGENTS.md");
        self.widen(paths::resolve(self.root, name))
    }

    /// The memory file's content with the note added as a list item.
    pub(super) fn with_note(
        &self,
        path: &Path,
        args: &crate::tools::RememberArgs,
    ) -> Result<String, String> {
        use crate::tools::bounded::{read_capped, ReadError};
        let mut text = match read_capped(path, 1024 * 1024) {
            Ok(bytes) => String::from_utf8(bytes)
                .map_err(|_| format!("{} is not UTF-8 text", path.display()))?,
            Err(ReadError::Missing) => String::new(),
            Err(ReadError::TooLarge(size)) => {
                return Err(format!(
                    "{} is too large to add to ({size} bytes)",
                    path.display()
                ))
            }
            Err(_) => {
                return Err(format!(
                    "{} is not a file that can be added to",
                    path.display()
                ))
            }
        };
        if !text.is_empty() && !text.ends_with('\n') {
            text.push('\n');
        }
        text.push_str(&format!("- {}\n", args.line()));
        Ok(text)
    }

    /// Keeps what a call is about to change: the files of a file tool, or
    /// the workspace before a command not proven read-only.
    pub(super) fn capture_before(&self, tool: &Tool, target: Option<&paths::Resolved>) -> Capture {
        let Some(checkpoints) = self.checkpoints else {
            return Capture::Nothing;
        };
        let paths: Vec<std::path::PathBuf> = match (tool, target) {
            (Tool::WriteFile(_) | Tool::EditFile(_), Some(target)) => vec![target.path.clone()],
            (Tool::Remember(_), Some(target)) if target.inside => vec![target.path.clone()],
            (Tool::ApplyPatch(_) | Tool::DeleteFile(_) | Tool::MoveFile(_), _) => {
                match self.plan_files(tool) {
                    Ok(changes) => changes
                        .iter()
                        .flat_map(|c| c.paths().into_iter().map(Path::to_path_buf))
                        .collect(),
                    Err(_) => return Capture::Nothing,
                }
            }
            (Tool::RunCommand(args), Some(cwd)) if self.may_change(&args.command, cwd) => {
                let cancelled = || self.cancel.is_cancelled();
                return match checkpoints
                    .borrow_mut()
                    .before_command(self.root, &cancelled)
                {
                    Some(scan) => Capture::Workspace(scan),
                    None => Capture::Nothing,
                };
            }
            _ => return Capture::Nothing,
        };
        let read = |path: &Path| self.checkpoint_read(path);
        Capture::Files(checkpoints.borrow_mut().before_files(&paths, &read))
    }

    pub(super) fn capture_after(&self, capture: Capture) {
        let Some(checkpoints) = self.checkpoints else {
            return;
        };
        match capture {
            Capture::Nothing => {}
            Capture::Files(pending) => {
                let read = |path: &Path| self.checkpoint_read(path);
                let via_editor = self.client.capabilities.fs.write_text_file;
                checkpoints
                    .borrow_mut()
                    .after_files(pending, &read, via_editor);
            }
            Capture::Workspace(scan) => {
                let cancelled = || false;
                checkpoints
                    .borrow_mut()
                    .after_command(self.root, scan, &cancelled);
            }
        }
    }

    /// A file as a checkpoint keeps it: the editor's text when it reads
    /// (what the user sees), else the bytes on disk.
    fn checkpoint_read(&self, path: &Path) -> crate::checkpoint::Contents {
        use crate::checkpoint::Contents;
        let disk = crate::checkpoint::read_disk(
            path,
            crate::checkpoint::Settings::default().max_file_bytes,
        );
        // Only text files are the editor's (as the file tools do).
        let text = matches!(&disk, Contents::Data(b) if std::str::from_utf8(b).is_ok());
        if text && self.client.capabilities.fs.read_text_file {
            if let Ok(text) = self.editor().read(path) {
                return Contents::Data(text.into_bytes());
            }
        }
        disk
    }

    /// The editor's files, as the call now running sees them.
    pub(super) fn editor(&self) -> EditorAccess<'_> {
        EditorAccess {
            client: self.client,
            texts: &self.editor_texts,
        }
    }

    /// Whether a command may change the workspace: anything not proven
    /// read-only by the policy's parser.
    fn may_change(&self, command_line: &str, cwd: &paths::Resolved) -> bool {
        let context = crate::policy::Context {
            root: self.root,
            cwd: &cwd.path,
            path_var: std::env::var_os("PATH"),
            shell: self.processes.shell.kind,
        };
        let cancel = Some(self.cancel.signal());
        !crate::policy::judge_or_cancel(command_line, &context, cancel).is_read_only()
    }

    /// Every path a patch, a deletion or a move names (a move's both
    /// ends), resolved; an error only for a patch that does not parse.
    pub(super) fn named_paths(&self, tool: &Tool) -> Result<Vec<paths::Resolved>, String> {
        let resolve = |given: &str| self.widen(paths::resolve(self.root, given));
        Ok(match tool {
            Tool::ApplyPatch(args) => {
                let parsed = patch::parse(&args.patch)?;
                let mut named = Vec::new();
                for operation in &parsed.operations {
                    named.push(resolve(&operation.path));
                    if let patch::OperationKind::Update {
                        move_to: Some(to), ..
                    } = &operation.kind
                    {
                        named.push(resolve(to));
                    }
                }
                named
            }
            Tool::DeleteFile(args) => vec![resolve(&args.path)],
            Tool::MoveFile(args) => vec![resolve(&args.from), resolve(&args.to)],
            _ => Vec::new(),
        })
    }

    /// The changes a patch, a deletion or a move would make, computed
    /// without changing anything (a patch's every hunk checked).
    fn plan_files(&self, tool: &Tool) -> Result<Vec<patch::FileChange>, ToolError> {
        let cap = self.processes.file_limits.edit;
        match tool {
            Tool::ApplyPatch(args) => {
                let parsed = patch::parse(&args.patch)?;
                let editor = self.editor();
                let read = |path: &Path| read_for_patch(&editor, path, cap);
                patch::plan(&parsed, self.root, cap, &read)
            }
            Tool::DeleteFile(args) => Ok(vec![patch::delete_plan(self.root, &args.path, cap)?]),
            Tool::MoveFile(args) => Ok(vec![patch::move_plan(
                self.root, &args.from, &args.to, cap,
            )?]),
            _ => Ok(Vec::new()),
        }
    }

    /// Runs a patch, deletion or move: planned again (the files may have
    /// changed while the user was asked), then applied. Text files are
    /// written through the editor when it offers writing.
    pub(super) fn change_files(&self, tool: &Tool, editor: &EditorAccess) -> Ending {
        let changes = match self.plan_files(tool) {
            Ok(changes) => changes,
            Err(error) => return failed(format!("Error: {error}; nothing was changed")),
        };
        let mut write = |path: &Path, text: &str| {
            if files::EditorFiles::can_write(editor) {
                files::EditorFiles::write_text(editor, path, text).map_err(ToolError::editor)
            } else {
                patch::local_write(path, text)
            }
        };
        let applied = patch::apply(
            &changes,
            &mut write,
            &mut patch::local_remove,
            &mut patch::local_move,
        );
        match applied {
            Ok(()) => Ending::Completed {
                text: patch::summary(&changes, self.root),
                content: changes.iter().filter_map(change_diff).collect(),
            },
            Err(error) => failed(format!("Error: {error}")),
        }
    }
}

/// A file for a patch: through the editor when it reads (unsaved changes
/// count), locally otherwise.
fn read_for_patch(
    editor: &EditorAccess,
    path: &Path,
    cap: u64,
) -> Result<Option<String>, ToolError> {
    if files::EditorFiles::can_read(editor) && path.is_file() {
        if let Ok(text) = files::EditorFiles::read_text(editor, path) {
            return Ok(Some(text));
        }
    }
    patch::local_read(path, cap)
}

/// The diff of one planned change: at the destination of a move, empty
/// new text and `deleted` for a deletion (RFD "diff-delete"; only a client
/// that opted in gets the flag, `acp::fit`), none for a file that is not
/// text.
fn change_diff(change: &patch::FileChange) -> Option<Value> {
    let path = match &change.kind {
        patch::ChangeKind::Move { to } => to.as_path(),
        _ => change.path.as_path(),
    };
    let new_text = match change.kind {
        patch::ChangeKind::Delete => {
            change.old_text.as_ref()?;
            String::new()
        }
        _ => change.new_text.clone()?,
    };
    let mut diff = json!({"type": "diff", "path": path, "newText": new_text});
    if let Some(old) = &change.old_text {
        diff["oldText"] = json!(old);
    }
    if let patch::ChangeKind::Delete = change.kind {
        diff["deleted"] = json!(true);
    }
    Some(diff)
}

fn diff_content(path: &Path, change: &files::Change) -> Value {
    let mut diff = json!({"type": "diff", "path": path, "newText": change.new_text});
    if let Some(old) = &change.old_text {
        diff["oldText"] = json!(old);
    }
    diff
}

pub(super) fn changed(path: &Path, change: files::Change) -> Ending {
    Ending::Completed {
        content: vec![diff_content(path, &change)],
        text: change.summary,
    }
}

/// The editor's file access through the client, when it offered it,
/// remembering what the editor said of each file during one call.
pub(super) struct EditorAccess<'a> {
    client: &'a Client,
    texts: &'a RefCell<HashMap<PathBuf, String>>,
}

impl EditorAccess<'_> {
    /// The file's text as the editor holds it, asked once per call.
    fn read(&self, path: &Path) -> Result<String, ClientError> {
        if let Some(text) = self.texts.borrow().get(path) {
            return Ok(text.clone());
        }
        let text = self.client.read_text_file(path)?;
        self.texts
            .borrow_mut()
            .insert(path.to_path_buf(), text.clone());
        Ok(text)
    }
}

impl files::EditorFiles for EditorAccess<'_> {
    fn can_read(&self) -> bool {
        self.client.capabilities.fs.read_text_file
    }
    fn can_write(&self) -> bool {
        self.client.capabilities.fs.write_text_file
    }
    fn read_text(&self, path: &Path) -> Result<String, String> {
        self.read(path).map_err(|e| e.to_string())
    }
    fn write_text(&self, path: &Path, content: &str) -> Result<(), String> {
        // Whatever the answer, the editor's text is what it says next.
        let mut texts = self.texts.borrow_mut();
        texts.remove(path);
        self.client
            .write_text_file(path, content)
            .map_err(|e| e.to_string())?;
        texts.insert(path.to_path_buf(), content.to_string());
        Ok(())
    }
}

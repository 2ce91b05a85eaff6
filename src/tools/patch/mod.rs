//! `apply_patch`, `delete_file` and `move_file`: changes to whole files,
//! planned first (every file read, every hunk located) and performed only
//! when the whole plan holds, so a patch with one bad hunk changes nothing.
//!
//! This file holds the types a patch and a plan are made of; `parse.rs`
//! reads the patch format, `hunks.rs` locates and applies the hunks of one
//! file, `plan.rs` plans every change (and `delete_file`, `move_file`),
//! `perform.rs` performs a plan on the local disk.
//!
//! # Using it
//!
//! ```text
//! let patch = patch::parse(&text)?;                      // no file touched
//! let changes = patch::plan(&patch, root, cap, &|p| patch::local_read(p, cap))?;
//! // ... permission, diffs from old_text/new_text ...
//! patch::apply(&changes, &mut patch::local_write, &mut patch::local_remove,
//!              &mut patch::local_move)?;
//! ```
//!
//! `delete_file` is [`delete_plan`] then [`local_remove`]; `move_file` is
//! [`move_plan`] then [`local_move`]. Every plan resolves its paths with
//! [`paths::resolve`](super::paths::resolve) and reports in
//! [`FileChange::inside`] and [`FileChange::protection`] whether *all*
//! paths the change touches are inside the workspace and the highest
//! protection of any (`tools::protected`).

mod hunks;
mod parse;
mod perform;
mod plan;
mod types;

pub(crate) use parse::parse;
pub(crate) use perform::{apply, local_move, local_read, local_remove, local_write};
pub(crate) use plan::{delete_plan, move_plan, plan, summary};
pub(crate) use types::{ChangeKind, FileChange, OperationKind};

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::error::{ToolError, ToolErrorKind};
    use std::fs;
    use std::path::{Path, PathBuf};

    pub(super) const CAP: u64 = 1024 * 1024;

    pub(super) struct Temp(pub(super) PathBuf);

    impl Temp {
        pub(super) fn new(name: &str) -> Temp {
            let dir = std::env::temp_dir().join(format!(
                "spindle-patch-{name}-{}",
                crate::util::random_hex()
            ));
            fs::create_dir_all(&dir).unwrap();
            Temp(fs::canonicalize(dir).unwrap())
        }
        pub(super) fn put(&self, path: &str, text: &str) {
            let path = self.0.join(path);
            fs::create_dir_all(path.parent().unwrap()).unwrap();
            fs::write(path, text).unwrap();
        }
        pub(super) fn get(&self, path: &str) -> Option<String> {
            fs::read_to_string(self.0.join(path)).ok()
        }
    }

    impl Drop for Temp {
        fn drop(&mut self) {
            let _ = fs::remove_dir_all(&self.0);
        }
    }

    pub(super) fn plan_local(text: &str, root: &Path) -> Result<Vec<FileChange>, ToolError> {
        plan(&parse(text)?, root, CAP, &|path| local_read(path, CAP))
    }

    fn apply_local(changes: &[FileChange]) -> Result<(), ToolError> {
        apply(
            changes,
            &mut local_write,
            &mut local_remove,
            &mut local_move,
        )
    }

    fn run(text: &str, root: &Path) -> Result<Vec<FileChange>, ToolError> {
        let changes = plan_local(text, root)?;
        apply_local(&changes)?;
        Ok(changes)
    }

    #[test]
    #[cfg_attr(windows, ignore = "expects / in shown paths")]
    fn add_update_delete_and_move_in_one_patch() {
        let temp = Temp::new("all");
        let root = &temp.0;
        temp.put("src/lib.rs", "fn a() {\n    1\n}\n");
        temp.put("old.txt", "bye\n");
        temp.put("src/mv.rs", "keep\nchange me\n");
        let changes = run(
            "*** Begin Patch
*** Add File: new/dir/hello.txt
+hello
+world
*** Update File: src/lib.rs
@@ fn a() {
-    1
+    2
*** Delete File: old.txt
*** Update File: src/mv.rs
*** Move to: moved/renamed.rs
@@
 keep
-change me
+changed
*** End Patch
",
            root,
        )
        .unwrap();
        assert_eq!(temp.get("new/dir/hello.txt").unwrap(), "hello\nworld\n");
        assert_eq!(temp.get("src/lib.rs").unwrap(), "fn a() {\n    2\n}\n");
        assert_eq!(temp.get("old.txt"), None);
        assert_eq!(temp.get("src/mv.rs"), None);
        assert_eq!(temp.get("moved/renamed.rs").unwrap(), "keep\nchanged\n");
        assert_eq!(changes.len(), 4);
        assert_eq!(changes[0].kind, ChangeKind::Add);
        assert_eq!(changes[0].old_text, None);
        assert_eq!(changes[2].old_text.as_deref(), Some("bye\n"));
        assert_eq!(changes[2].new_text, None);
        assert_eq!(
            changes[3].kind,
            ChangeKind::Move {
                to: root.join("moved/renamed.rs")
            }
        );
        assert!(changes
            .iter()
            .all(|c| c.inside && c.protection == crate::tools::protected::Protection::None));
        let text = summary(&changes, root);
        assert!(text.contains("added new/dir/hello.txt (2 lines)"), "{text}");
        assert!(text.contains("moved src/mv.rs → moved/renamed.rs (and updated it)"));
        // A pure rename, and absolute paths.
        let changes = run(
            &format!(
                "*** Begin Patch\n*** Update File: {}\n*** Move to: back.rs\n*** End Patch",
                root.join("moved/renamed.rs").display()
            ),
            root,
        )
        .unwrap();
        assert_eq!(changes[0].old_text, changes[0].new_text);
        assert_eq!(temp.get("back.rs").unwrap(), "keep\nchanged\n");
        assert!(!plan_local(
            "*** Begin Patch\n*** Delete File: /etc/hostname\n*** End Patch",
            root
        )
        .map(|c| c[0].inside)
        .unwrap_or(false));
    }

    #[test]
    fn a_bad_hunk_anywhere_changes_nothing() {
        let temp = Temp::new("bad");
        let root = &temp.0;
        temp.put("a.txt", "1\n2\n3\n");
        temp.put("b.txt", "x\ny\nz\n");
        let err = run(
            "*** Begin Patch
*** Add File: c.txt
+new
*** Update File: a.txt
@@
-1
+one
*** Update File: b.txt
@@
-x
+ex
@@
-missing
+gone
*** End Patch",
            root,
        )
        .unwrap_err();
        assert!(
            err.to_string()
                .contains("b.txt: hunk 2 of 2 (patch line 12)")
                && err.to_string().contains("  missing\n"),
            "{err}"
        );
        assert_eq!(err.kind(), ToolErrorKind::NoMatch);
        assert_eq!(temp.get("a.txt").unwrap(), "1\n2\n3\n");
        assert_eq!(temp.get("b.txt").unwrap(), "x\ny\nz\n");
        assert_eq!(temp.get("c.txt"), None);
    }
}

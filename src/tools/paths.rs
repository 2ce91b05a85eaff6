//! Paths the model names: resolved against the workspace, normalised, and
//! checked against the workspace boundary after following symlinks.

use std::path::{Component, Path, PathBuf};

/// A path the model gave, resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resolved {
    /// Absolute and lexically normalised (`.` and `..` removed), but with
    /// symlinks as they are: this is the path shown to the user and used
    /// for the file operation.
    pub path: PathBuf,
    /// Inside the workspace after resolving `..` and every symlink of the
    /// part of the path that exists.
    pub inside: bool,
    /// Inside some `.git` directory of the workspace (writing there can
    /// corrupt a repository), or inside the workspace's own `.spindle/`
    /// (its config, rules and commands: writing there changes what the
    /// agent may do). Such edits always ask, outside yolo.
    pub git_internal: bool,
}

/// Whether the path component `part` may name the folder `name` on some
/// file system: letters in any case (macOS's and Windows' default file
/// systems ignore it, so `.GIT/hooks` is `.git/hooks` there) and trailing
/// dots and spaces ignored (Windows drops them: `.git.` is `.git`). On a
/// file system where they differ this only makes an edit ask.
fn names(part: &std::ffi::OsStr, name: &str) -> bool {
    part.to_str()
        .is_some_and(|part| part.trim_end_matches(['.', ' ']).eq_ignore_ascii_case(name))
}

/// Resolves `given` (relative to `root`, or absolute) and judges it.
pub fn resolve(root: &Path, given: &str) -> Resolved {
    let joined = if Path::new(given).is_absolute() {
        PathBuf::from(given)
    } else {
        root.join(given)
    };
    let path = normalise(&joined);
    let real_root = crate::os::canonical(root).unwrap_or_else(|_| normalise(root));
    let real = real_path(&path);
    let inside = real.starts_with(&real_root);
    let git_internal = inside
        && real
            .strip_prefix(&real_root)
            .map(|rest| {
                rest.components().any(|c| names(c.as_os_str(), ".git"))
                    || rest
                        .components()
                        .next()
                        .is_some_and(|c| names(c.as_os_str(), ".spindle"))
            })
            .unwrap_or(false);
    Resolved {
        path,
        inside,
        git_internal,
    }
}

/// Whether `path` is a regular file with more than one name: another name
/// (a hard link) may be outside the workspace or inside `.git/`, so a write
/// through this one is judged as if it were there.
pub fn hard_linked(path: &Path) -> bool {
    std::fs::metadata(path).is_ok_and(|meta| meta.is_file())
        && crate::os::link_count_at(path).is_ok_and(|links| links > 1)
}

/// Removes `.` and resolves `..` without touching the file system.
pub fn normalise(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for component in path.components() {
        match component {
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            other => out.push(other),
        }
    }
    out
}

/// The real location of `path`: the longest existing prefix canonicalised
/// (following symlinks), with the rest appended. A path that does not exist
/// yet is judged by where it would be created.
fn real_path(path: &Path) -> PathBuf {
    let mut existing = path.to_path_buf();
    let mut rest = Vec::new();
    loop {
        if let Ok(real) = crate::os::canonical(&existing) {
            let mut real = real;
            for part in rest.iter().rev() {
                real.push(part);
            }
            return normalise(&real);
        }
        match (
            existing.file_name().map(|n| n.to_os_string()),
            existing.parent(),
        ) {
            (Some(name), Some(parent)) => {
                rest.push(name);
                existing = parent.to_path_buf();
            }
            _ => return path.to_path_buf(),
        }
    }
}

/// How a path is shown to people: relative to the workspace when inside it.
pub fn display(root: &Path, path: &Path) -> String {
    match path.strip_prefix(root) {
        Ok(rest) if rest.as_os_str().is_empty() => ".".to_string(),
        Ok(rest) => rest.display().to_string(),
        Err(_) => path.display().to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!(
            "spindle-paths-{name}-{}",
            crate::util::random_hex()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::canonicalize(dir).unwrap()
    }

    #[test]
    fn relative_absolute_and_dotdot() {
        let root = temp("rel");
        let inside = resolve(&root, "src/../lib.rs");
        assert_eq!(inside.path, root.join("lib.rs"));
        assert!(inside.inside);
        assert!(!resolve(&root, "../elsewhere.txt").inside);
        assert!(!resolve(&root, "/etc/passwd").inside);
        assert!(resolve(&root, &root.join("new/dir/file").display().to_string()).inside);
        assert!(resolve(&root, ".git/config").git_internal);
        assert!(resolve(&root, "sub/.git/HEAD").git_internal);
        assert!(!resolve(&root, ".gitignore").git_internal);
        assert!(resolve(&root, ".spindle/config.json").git_internal);
        assert!(resolve(&root, "./x/../.spindle/commands/a.md").git_internal);
        assert!(!resolve(&root, "sub/.spindle/notes").git_internal);
        std::fs::remove_dir_all(root).unwrap();
    }

    #[test]
    fn the_protected_folders_are_known_in_any_case_and_with_trailing_dots() {
        let root = temp("case");
        for given in [
            ".GIT/hooks/pre-commit",
            "sub/.Git/config",
            ".git./hooks/post-checkout",
            ".git . /config",
            ".SPINDLE/config.json",
            ".spindle../commands/a.md",
        ] {
            assert!(resolve(&root, given).git_internal, "{given}");
        }
        for given in [".gitx/config", ".GITIGNORE", "git/config", "sub/.SPINDLE/x"] {
            assert!(!resolve(&root, given).git_internal, "{given}");
        }
        std::fs::remove_dir_all(root).unwrap();
    }

    #[test]
    fn symlinks_out_of_the_workspace_are_outside() {
        let root = temp("link");
        let outside = temp("outside");
        crate::os::testing::symlink(&outside, root.join("escape")).unwrap();
        let resolved = resolve(&root, "escape/secret.txt");
        assert_eq!(resolved.path, root.join("escape/secret.txt"));
        assert!(!resolved.inside);
        std::fs::remove_dir_all(root).unwrap();
        std::fs::remove_dir_all(outside).unwrap();
    }

    #[test]
    fn display_is_relative_inside() {
        let root = Path::new("/w");
        assert_eq!(display(root, Path::new("/w/src/a.rs")), "src/a.rs");
        assert_eq!(display(root, Path::new("/w")), ".");
        assert_eq!(display(root, Path::new("/etc/x")), "/etc/x");
    }
}

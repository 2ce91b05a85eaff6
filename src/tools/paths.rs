//! Paths the model names: resolved against the workspace, normalised, and
//! checked against the workspace boundary after following symlinks.

use super::protected::Protection;
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
    /// Whether the workspace's list of protected paths names it
    /// ([`super::protected`]): git's own files, the files whose content
    /// Spindle runs (hooks, servers, the project config) or that instruct
    /// the model. Judged by where the path really leads.
    pub protection: Protection,
}

/// Resolves `given` (relative to `root`, or absolute) and judges it.
pub(crate) fn resolve(root: &Path, given: &str) -> Resolved {
    let joined = if Path::new(given).is_absolute() {
        PathBuf::from(given)
    } else {
        root.join(given)
    };
    let path = normalise(&joined);
    let real_root = crate::os::canonical(root).unwrap_or_else(|_| normalise(root));
    let real = real_path(&path);
    let inside = real.starts_with(&real_root);
    let protection = if inside {
        super::protected::of_real(&real_root, &real)
    } else {
        Protection::None
    };
    Resolved {
        path,
        inside,
        protection,
    }
}

/// Whether `path` is a regular file with more than one name: another name
/// (a hard link) may be outside the workspace or a protected file, so a write
/// through this one is judged as if it were there.
pub(crate) fn hard_linked(path: &Path) -> bool {
    std::fs::metadata(path).is_ok_and(|meta| meta.is_file())
        && crate::os::link_count_at(path).is_ok_and(|links| links > 1)
}

/// Removes `.` and resolves `..` without touching the file system.
pub(crate) fn normalise(path: &Path) -> PathBuf {
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
pub(crate) fn display(root: &Path, path: &Path) -> String {
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
        assert_eq!(
            resolve(&root, ".git/config").protection,
            Protection::Executes
        );
        assert_eq!(
            resolve(&root, "sub/.git/HEAD").protection,
            Protection::Executes
        );
        assert_eq!(resolve(&root, ".gitignore").protection, Protection::None);
        assert_eq!(
            resolve(&root, ".spindle/config.json").protection,
            Protection::Executes
        );
        assert_eq!(
            resolve(&root, "./x/../.spindle/commands/a.md").protection,
            Protection::Executes
        );
        assert_eq!(
            resolve(&root, "sub/.spindle/notes").protection,
            Protection::None
        );
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
            assert_eq!(
                resolve(&root, given).protection,
                Protection::Executes,
                "{given}"
            );
        }
        for given in [".gitx/config", ".GITIGNORE", "git/config", "sub/.SPINDLE/x"] {
            assert_eq!(
                resolve(&root, given).protection,
                Protection::None,
                "{given}"
            );
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

//! How a program named without a folder is found and started. On Unix
//! the system does it (`execvp`). On Windows std finds only `.exe` files,
//! while the tools people name in an MCP server's `command` are often
//! shims: `npx.cmd`, `uvx.cmd`, `something.ps1`. There the name is looked
//! up in each `PATH` folder with each `PATHEXT` extension, as the shell
//! does; a `.ps1` script runs through PowerShell. The lookup is a pure
//! function of `PATH`, `PATHEXT` and what exists, so it is tested on
//! every system.

use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};

/// The program to start for `name`, and arguments to put before the
/// caller's (PowerShell's, for a script).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Resolved {
    pub program: PathBuf,
    pub leading: Vec<OsString>,
}

/// `name` as this system would start it from a shell (unchanged on Unix).
pub(crate) fn resolve(name: &str) -> Resolved {
    if cfg!(windows) {
        let path = std::env::var_os("PATH").unwrap_or_default();
        let pathext = std::env::var_os("PATHEXT");
        resolve_windows(name, &path, pathext.as_deref(), &|p| p.is_file())
    } else {
        plain(name)
    }
}

fn plain(name: &str) -> Resolved {
    Resolved {
        program: PathBuf::from(name),
        leading: Vec::new(),
    }
}

/// The extensions tried when `PATHEXT` is unset (Windows' own default).
const DEFAULT_PATHEXT: &str = ".COM;.EXE;.BAT;.CMD";

fn resolve_windows(
    name: &str,
    path: &OsStr,
    pathext: Option<&OsStr>,
    exists: &dyn Fn(&Path) -> bool,
) -> Resolved {
    let pathext = pathext
        .and_then(OsStr::to_str)
        .filter(|v| !v.is_empty())
        .unwrap_or(DEFAULT_PATHEXT);
    let mut extensions: Vec<String> = pathext
        .split(';')
        .map(str::trim)
        .filter(|e| e.starts_with('.') && e.len() > 1)
        .map(str::to_ascii_lowercase)
        .collect();
    if !extensions.iter().any(|e| e == ".ps1") {
        extensions.push(".ps1".into());
    }
    let given = Path::new(name);
    let has_extension = given.extension().is_some();
    let candidates = |base: &Path| -> Vec<PathBuf> {
        let mut out = Vec::new();
        if has_extension {
            out.push(base.to_path_buf());
        }
        for ext in &extensions {
            let mut file = base.as_os_str().to_os_string();
            file.push(ext);
            out.push(PathBuf::from(file));
        }
        out
    };
    let found = if given.components().count() > 1 || given.is_absolute() {
        candidates(given).into_iter().find(|p| exists(p))
    } else {
        split_path(path)
            .flat_map(|dir| candidates(&dir.join(name)))
            .find(|p| exists(p))
    };
    match found {
        Some(script) if is_ext(&script, "ps1") => Resolved {
            program: PathBuf::from("powershell.exe"),
            leading: [
                "-NoProfile",
                "-NonInteractive",
                "-ExecutionPolicy",
                "Bypass",
                "-File",
            ]
            .iter()
            .map(OsString::from)
            .chain(std::iter::once(script.into_os_string()))
            .collect(),
        },
        Some(program) => Resolved {
            program,
            leading: Vec::new(),
        },
        None => plain(name),
    }
}

fn is_ext(path: &Path, ext: &str) -> bool {
    path.extension()
        .and_then(OsStr::to_str)
        .is_some_and(|e| e.eq_ignore_ascii_case(ext))
}

/// `PATH`'s folders, `;`-separated, quotes around a folder dropped.
fn split_path(path: &OsStr) -> impl Iterator<Item = PathBuf> + '_ {
    path.to_str()
        .unwrap_or("")
        .split(';')
        .map(|dir| dir.trim().trim_matches('"'))
        .filter(|dir| !dir.is_empty())
        .map(PathBuf::from)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lookup(name: &str, present: &'static [&'static str], pathext: Option<&str>) -> Resolved {
        resolve_windows(
            name,
            OsStr::new("/w/node;\"/w/py\";/w/ps"),
            pathext.map(OsStr::new),
            &|p| present.iter().any(|f| Path::new(f) == p),
        )
    }

    #[test]
    fn shims_are_found_through_pathext_in_path_order() {
        let npx = lookup("npx", &["/w/node/npx", "/w/node/npx.cmd"], None);
        assert_eq!(npx.program, PathBuf::from("/w/node/npx.cmd"));
        assert!(npx.leading.is_empty());
        // .EXE comes before .CMD in PATHEXT, and an earlier folder first.
        let uvx = lookup(
            "uvx",
            &["/w/py/uvx.cmd", "/w/py/uvx.exe", "/w/ps/uvx.exe"],
            None,
        );
        assert_eq!(uvx.program, PathBuf::from("/w/py/uvx.exe"));
        // A PATHEXT of the user's, in any case.
        let tool = lookup(
            "tool",
            &["/w/ps/tool.bat", "/w/ps/tool.cmd"],
            Some(".Cmd;.BAT"),
        );
        assert_eq!(tool.program, PathBuf::from("/w/ps/tool.cmd"));
    }

    #[test]
    fn scripts_run_through_powershell_and_unknown_names_stay() {
        let server = lookup("server", &["/w/ps/server.ps1"], None);
        assert_eq!(server.program, PathBuf::from("powershell.exe"));
        assert_eq!(
            server.leading.last().map(PathBuf::from),
            Some(Path::new("/w/ps").join("server.ps1"))
        );
        assert!(server.leading.iter().any(|a| a == "-NoProfile"));
        assert_eq!(lookup("missing", &[], None), plain("missing"));
        // A name with its extension, or a path, is taken as given.
        assert_eq!(
            lookup("npx.cmd", &["/w/node/npx.cmd"], None).program,
            PathBuf::from("/w/node/npx.cmd")
        );
        assert_eq!(
            lookup("/opt/x", &["/opt/x.exe"], None).program,
            PathBuf::from("/opt/x.exe")
        );
    }

    #[test]
    fn unix_names_are_left_to_the_system() {
        if cfg!(unix) {
            assert_eq!(resolve("npx"), plain("npx"));
        }
    }
}

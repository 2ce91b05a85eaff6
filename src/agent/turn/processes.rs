//! How the commands of a turn start: the credentials removed from their
//! environment, where their output is logged, and how they are confined
//! (a read-only sandbox under `auto`, the workspace sandbox under
//! `sandbox`).

use crate::policy::secrets::Secrets;
use crate::sandbox::Profile;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// How a command that may run is confined.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Confinement {
    /// As the user allowed it (or `yolo`): no sandbox.
    None,
    /// Judged read-only under `auto`: git's program-running configuration
    /// turned off and, when a sandbox can be had, nothing writable but a
    /// private temp folder, no network.
    ReadOnly { sandboxed: bool },
    /// Under the `sandbox` policy: the workspace writable except `.git/`,
    /// no network.
    Workspace,
}

/// How the session's commands start.
pub struct Processes {
    /// The credentials removed from every command's environment.
    pub secrets: Arc<Secrets>,
    /// The session's private folder (command logs, and `tmp/` for
    /// sandboxed commands); `None` when it could not be made.
    pub session_dir: Option<PathBuf>,
    /// The most bytes of one command's output kept in its log.
    pub log_cap: u64,
    /// The private temp folder of sandboxed commands (`TMPDIR`).
    pub temp_dir: Option<PathBuf>,
    /// What sandboxed commands must not read: key files, the config file
    /// (and the keys folder beside it), the session database, the command
    /// logs and the agent's own log.
    pub hidden: Vec<PathBuf>,
    /// The Spindle binary, which is also the sandbox launcher.
    pub launcher: Option<PathBuf>,
    /// How large files the file tools load.
    pub file_limits: crate::tools::bounded::FileLimits,
    /// Bytes of a command's output kept for the model.
    pub output_cap: usize,
    /// Whether the machine offers a sandbox.
    pub sandbox: bool,
    /// The session's additional workspace roots: writable in the sandbox
    /// as the workspace is (their `.git` read-only).
    pub extra_roots: Vec<PathBuf>,
    /// The shell commands run under (the config's `shell`).
    pub shell: crate::process::shell::Shell,
}

/// A command runs with nobody at a terminal: pagers print, editors
/// return at once, tools do not prompt or colour their output. Set in
/// local commands and in the editor's terminals alike.
pub const NON_INTERACTIVE: [(&str, &str); 8] = [
    ("PAGER", "cat"),
    ("GIT_PAGER", "cat"),
    ("MANPAGER", "cat"),
    ("GIT_EDITOR", "true"),
    ("EDITOR", "true"),
    ("GIT_TERMINAL_PROMPT", "0"),
    ("DEBIAN_FRONTEND", "noninteractive"),
    ("NO_COLOR", "1"),
];

/// What a command starts with.
pub struct Launch {
    pub env_remove: Vec<OsString>,
    pub env_set: Vec<(OsString, OsString)>,
    pub sandbox: Option<(PathBuf, Profile)>,
    pub shell: crate::process::shell::Shell,
}

impl Processes {
    pub fn sandbox_available(&self) -> bool {
        self.sandbox && self.launcher.is_some()
    }

    /// The environment and sandbox of a command run in `cwd`.
    pub fn launch(
        &self,
        root: &Path,
        cwd: &Path,
        confinement: Confinement,
    ) -> Result<Launch, String> {
        let mut launch = Launch {
            env_remove: self.secrets.to_remove_here(),
            env_set: NON_INTERACTIVE
                .iter()
                .map(|(k, v)| (OsString::from(k), OsString::from(v)))
                .collect(),
            sandbox: None,
            shell: self.shell.clone(),
        };
        let profile = match confinement {
            Confinement::None => return Ok(launch),
            Confinement::ReadOnly { sandboxed } => {
                // The judgement followed `cd` as written; CDPATH would
                // send it elsewhere.
                launch.env_remove.push("CDPATH".into());
                launch.env_set.extend(
                    crate::policy::git::neutralising_env()
                        .into_iter()
                        .map(|(k, v)| (OsString::from(k), OsString::from(v))),
                );
                if !sandboxed {
                    return Ok(launch);
                }
                Profile::default()
            }
            Confinement::Workspace => {
                let mut writable = vec![root.to_path_buf()];
                let mut read_only = git_dirs(root, cwd);
                for extra in &self.extra_roots {
                    writable.push(extra.clone());
                    read_only.extend(git_dirs(extra, cwd));
                }
                Profile {
                    writable,
                    read_only,
                    network: false,
                    hidden: Vec::new(),
                }
            }
        };
        let Some(launcher) = &self.launcher else {
            return Err("the sandbox is not available".into());
        };
        let mut profile = profile;
        profile.hidden = self.hidden.clone();
        if let Some(tmp) = &self.temp_dir {
            launch
                .env_set
                .push(("TMPDIR".into(), tmp.clone().into_os_string()));
            profile.writable.push(tmp.clone());
        }
        launch.sandbox = Some((launcher.clone(), profile));
        Ok(launch)
    }
}

/// The entries that stay read-only in the sandbox: the workspace's `.git`
/// and `.spindle` (its config and commands), and the `.git` of nested
/// repositories between the workspace and `cwd`.
fn git_dirs(root: &Path, cwd: &Path) -> Vec<PathBuf> {
    let mut dirs = vec![root.join(".git"), root.join(".spindle")];
    let mut dir = cwd;
    while dir.starts_with(root) && dir != root {
        dirs.push(dir.join(".git"));
        match dir.parent() {
            Some(parent) => dir = parent,
            None => break,
        }
    }
    dirs.retain(|d| d.symlink_metadata().is_ok());
    dirs
}

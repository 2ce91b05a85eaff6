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
pub(crate) enum Confinement {
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
pub(crate) struct Processes {
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
pub(crate) const NON_INTERACTIVE: [(&str, &str); 8] = [
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
pub(crate) struct Launch {
    pub env_remove: Vec<OsString>,
    pub env_set: Vec<(OsString, OsString)>,
    pub sandbox: Option<(PathBuf, Profile)>,
    pub shell: crate::process::shell::Shell,
    /// Under the `sandbox` policy: the executed files missing before the
    /// command, whatever it creates of them is moved aside at its end.
    pub watch: Option<crate::tools::protected::Watch>,
}

impl Processes {
    pub(crate) fn sandbox_available(&self) -> bool {
        self.sandbox && self.launcher.is_some()
    }

    /// The environment and sandbox of a command run in `cwd`.
    pub(crate) fn launch(
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
            watch: None,
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
                let mut read_only = protected_entries(root, cwd);
                for extra in &self.extra_roots {
                    writable.push(extra.clone());
                    read_only.extend(protected_entries(extra, cwd));
                }
                launch.watch = Some(crate::tools::protected::Watch::before(
                    writable.iter().map(PathBuf::as_path),
                ));
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

/// Where and how the hooks of a session run.
pub(crate) struct HookPlace<'a> {
    pub session_id: &'a str,
    pub root: &'a Path,
    pub policy: crate::modes::Policy,
    pub hooks: &'a crate::agent::common::hooks::Hooks,
}

impl Processes {
    /// Runs the hooks of `event` that match `subject`, one after another,
    /// each with the event as JSON on stdin (`fields` on top of the
    /// session's), and what they decided together. They run as commands
    /// do: without the credentials, non-interactive, in the sandbox
    /// under the `sandbox` policy, killed with their group at their
    /// timeout or a cancel.
    pub(crate) fn fire(
        &self,
        place: &HookPlace,
        event: crate::agent::common::hooks::Event,
        subject: &crate::agent::common::hooks::Subject,
        fields: serde_json::Value,
        cancel: Option<&crossbeam_channel::Receiver<()>>,
    ) -> crate::agent::common::hooks::Verdict {
        use crate::agent::common::hooks::{self, Outcome, Verdict};
        let mut verdict = Verdict::default();
        let matching = place.hooks.matching(event, subject);
        if matching.is_empty() {
            return verdict;
        }
        let policy = serde_json::to_value(place.policy).unwrap_or_default();
        let input = hooks::input(
            event,
            place.session_id,
            place.root,
            policy.as_str().unwrap_or(""),
            fields,
        );
        let input = serde_json::to_vec(&input).unwrap_or_default();
        for hook in matching {
            let outcome = match self.run_hook(place, &hook.command, &input, hook.timeout, cancel) {
                Ok(outcome) => outcome,
                Err(failure) => Outcome {
                    failure: Some(failure),
                    ..Outcome::default()
                },
            };
            log::debug!(
                "{} hook {:?}: exit {:?}, {} bytes out",
                event.name(),
                hook.command,
                outcome.code,
                outcome.stdout.len()
            );
            verdict.take(hook, &outcome);
        }
        verdict
    }

    fn run_hook(
        &self,
        place: &HookPlace,
        line: &str,
        input: &[u8],
        timeout: std::time::Duration,
        cancel: Option<&crossbeam_channel::Receiver<()>>,
    ) -> Result<crate::agent::common::hooks::Outcome, String> {
        let confinement = match place.policy {
            crate::modes::Policy::Sandbox => Confinement::Workspace,
            _ => Confinement::None,
        };
        let launch = self
            .launch(place.root, place.root, confinement)
            .map_err(|error| format!("cannot start: {error}"))?;
        let mut command = match &launch.sandbox {
            Some(sandbox) => {
                let (program, args) =
                    crate::sandbox::shell_argv(line, Some(sandbox), &launch.shell);
                crate::process::guard::command(&program, &args)
            }
            None => launch.shell.command(line),
        };
        command.current_dir(place.root);
        for name in &launch.env_remove {
            command.env_remove(name);
        }
        command.envs(launch.env_set.iter().map(|(k, v)| (k, v)));
        // The project's root, as Claude Code gives it: where the hooks'
        // own scripts are, from whichever of its folders a session runs.
        let project = crate::config::project::root(place.root);
        command
            .env("CLAUDE_PROJECT_DIR", &project)
            .env("SPINDLE_PROJECT_DIR", &project);
        let cap = crate::agent::common::hooks::OUTPUT_CAP;
        match crate::process::probe::run_fed(command, Some(input.to_vec()), timeout, cap, cancel) {
            Ok(output) => Ok(crate::agent::common::hooks::Outcome {
                code: output.status.code(),
                stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
                stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
                failure: None,
            }),
            Err(error) if error.kind() == std::io::ErrorKind::TimedOut => Err(format!(
                "did not finish within {} s and was stopped",
                timeout.as_secs()
            )),
            Err(error) if error.kind() == std::io::ErrorKind::Interrupted => {
                Err("was stopped by the cancel".into())
            }
            Err(error) => Err(format!("cannot start: {error}")),
        }
    }
}

/// The entries that stay read-only in the sandbox: the workspace's own
/// files whose content Spindle or git runs (`.git`, `.spindle`,
/// `.mcp.json`, `.claude`, in any spelling: `tools::protected`), and the
/// `.git` of nested repositories between the workspace and `cwd`.
fn protected_entries(root: &Path, cwd: &Path) -> Vec<PathBuf> {
    let (mut dirs, _) = crate::tools::protected::executed_entries(root);
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

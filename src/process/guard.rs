//! `spindle guard`: the first process of a job's process group, so that no
//! process of the job survives the agent, even an agent killed with
//! SIGKILL. The kernel's parent-death signal reaches only the agent's own
//! child and is not inherited by that child's children; a job's shell
//! (`sh -c "make; make test"`) forks, and its children would outlive the
//! agent. The guard learns when the agent dies, runs the command in its
//! own group, and then kills the whole group. How it learns, and how it
//! finds the processes that left the group, differ per system
//! (`guard/linux.rs`, `guard/macos.rs`); elsewhere the guard is not used.
//!
//! Linux: the guard asks for SIGTERM when the agent dies and is the job's
//! *subreaper*: a process of the job whose parent ends is re-parented to
//! the guard, not to init, so while the command runs every process it
//! started stays a descendant of the guard, even one that left the group
//! (`setsid`, a daemon that detaches twice). When the agent dies, the
//! guard kills the command, stops every descendant it finds in `/proc`,
//! round after round until none runs (a fork racing the sweep is caught
//! in the next round, and a stopped process forks no more), kills them
//! all, then its whole group.
//!
//! macOS has neither the parent-death signal nor subreapers: the guard
//! watches the agent's exit with kqueue, and when it comes stops the
//! command first (so that its children keep their parent), then, round
//! after round, every descendant and group member the system's process
//! list shows, and kills them all. A process that left the group *and*
//! whose parent ended before the agent died is re-parented to launchd,
//! out of the guard's sight.
//!
//! The guard exits with the command's status (a signal re-raised), so
//! whoever waits for the guard sees what it would have seen of the
//! command.
//!
//! When the agent ends a command itself (a timeout, a cancel, its own
//! end), it first asks the guard, with a signal (`END_SIGNAL`, SIGUSR1)
//! from the agent alone (from anyone else it is ignored), to do the same: the
//! command and everything below the guard, those that left the group
//! too, are taken down as at the agent's death; only then is the group
//! killed (a kill of the group alone would end the guard before it
//! could).
//!
//! A command that ends normally takes nothing with it here: the agent
//! kills what is left in the group, and a daemon that detached from the
//! group keeps running once its command has ended (a server started on
//! purpose), out of the guard's reach from then on; the docs say so.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};
use std::sync::OnceLock;

// Global: written once at start (the binary's own path, a fact of the
// process) and read by every place that starts a command.
static GUARD: OnceLock<PathBuf> = OnceLock::new();

/// Names the executable that serves `spindle guard` (the agent's own
/// binary), and ties every process the agent starts to its life where the
/// system does that for the whole agent (Windows' job object). Until it is
/// called, commands run without a guard (the library's own tests, where
/// the running executable is a test program).
pub(crate) fn enable(exe: PathBuf) {
    let _ = GUARD.set(exe);
    if let Err(error) = super::sys::tie_to_agent() {
        log::warn!("cannot tie the agent's processes to its life: {error}");
    }
}

/// A long-lived server the agent starts (an MCP server) as a command:
/// under the guard where nothing else ties it to the agent's life (macOS,
/// which has no parent-death signal: the guard's kqueue watch takes the
/// server's group down with the agent); elsewhere as it is (Linux has the
/// parent-death signal, Windows the agent's job object).
pub(crate) fn server(program: &Path, args: &[OsString]) -> Command {
    if cfg!(target_os = "macos") {
        return command(program, args);
    }
    let mut command = Command::new(program);
    command.args(args);
    command
}

/// Whether `command` runs under the guard (made by [`command`] while the
/// guard is enabled): its tree is then ended through the guard.
pub(crate) fn wraps(command: &Command) -> bool {
    GUARD
        .get()
        .is_some_and(|exe| command.get_program() == exe.as_os_str())
        && command.get_args().next().is_some_and(|arg| arg == "guard")
        && cfg!(any(target_os = "linux", target_os = "macos"))
}

/// `program args…` wrapped in the guard when it is enabled.
pub(crate) fn command(program: &Path, args: &[OsString]) -> Command {
    match GUARD.get() {
        Some(exe) if cfg!(any(target_os = "linux", target_os = "macos")) => {
            let mut command = Command::new(exe);
            command
                .arg("guard")
                .arg("--parent")
                .arg(std::process::id().to_string())
                .arg("--")
                .arg(program)
                .args(args);
            command
        }
        _ => {
            let mut command = Command::new(program);
            command.args(args);
            command
        }
    }
}

#[cfg(target_os = "linux")]
mod linux;
#[cfg(any(target_os = "linux", target_os = "macos"))]
mod termination;
#[cfg(target_os = "linux")]
use linux::{ending, sweep, wait_for, watch_parent};

#[cfg(target_os = "macos")]
mod macos;
#[cfg(target_os = "macos")]
use macos::{ending, sweep, wait_for, watch_parent};

#[cfg(not(any(target_os = "linux", target_os = "macos")))]
use elsewhere::{ending, sweep, wait_for, watch_parent};

/// Systems without a guard: the command runs as a plain child (and
/// nothing calls the guard there).
#[cfg(not(any(target_os = "linux", target_os = "macos")))]
mod elsewhere {
    pub(super) fn wait_for(mut child: std::process::Child) -> Option<std::process::ExitStatus> {
        child.wait().ok()
    }

    pub(super) fn ending() -> bool {
        false
    }

    pub(super) fn sweep() {}

    pub(super) fn watch_parent(_parent: i32) {}
}

const USAGE: &str = "usage: spindle guard --parent PID -- PROGRAM [ARGS...]
(started by the agent for each job; not meant to be run by hand)";

/// The guard's `main`: `args` after `guard`.
pub(crate) fn main(args: Vec<OsString>) -> ExitCode {
    let mut args = args.into_iter();
    let parent = match (args.next(), args.next(), args.next()) {
        (Some(flag), Some(pid), Some(dashes)) if flag == "--parent" && dashes == "--" => {
            pid.to_str().and_then(|p| p.parse::<i32>().ok())
        }
        _ => None,
    };
    let (Some(parent), Some(program)) = (parent, args.next()) else {
        eprintln!("{USAGE}");
        return ExitCode::from(2);
    };
    watch_parent(parent);
    let child = match Command::new(&program).args(args).spawn() {
        Ok(child) => child,
        Err(error) => {
            eprintln!(
                "spindle: cannot run {}: {error}",
                Path::new(&program).display()
            );
            return ExitCode::from(127);
        }
    };
    let status = wait_for(child);
    if ending() {
        sweep();
    }
    match status {
        Some(status) => exit_like(status),
        None => ExitCode::from(1),
    }
}

fn exit_like(status: std::process::ExitStatus) -> ExitCode {
    if let Some(code) = status.code() {
        return ExitCode::from(u8::try_from(code).unwrap_or(1));
    }
    #[cfg(unix)]
    if let Some(signal) = super::sys::exit_signal(&status) {
        // SAFETY: restores the default action and raises the signal on
        // this process, so the parent sees the same signal.
        unsafe {
            libc::signal(signal, libc::SIG_DFL);
            libc::raise(signal);
        }
    }
    ExitCode::from(1)
}

//! `spindle guard`: the first process of a job's process group, so that no
//! process of the job survives the agent, even an agent killed with
//! SIGKILL. The kernel's parent-death signal reaches only the agent's own
//! child and is not inherited by that child's children; a job's shell
//! (`sh -c "make; make test"`) forks, and its children would outlive the
//! agent. The guard asks for SIGTERM when the agent dies, runs the
//! command in its own group, and on that signal kills the whole group.
//! It exits with the command's status (a signal re-raised), so whoever
//! waits for the guard sees what it would have seen of the command.
//!
//! Not covered, and said so in the docs: a process that leaves the group
//! (`setsid`, `setpgid`), and one that outlives the job's shell (the guard
//! has ended with the shell).

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};
use std::sync::OnceLock;

static GUARD: OnceLock<PathBuf> = OnceLock::new();

/// Names the executable that serves `spindle guard` (the agent's own
/// binary). Until it is set, commands run without a guard (the library's
/// own tests, where the running executable is a test program).
pub fn enable(exe: PathBuf) {
    let _ = GUARD.set(exe);
}

/// `program args…` wrapped in the guard when it is enabled.
pub fn command(program: &Path, args: &[OsString]) -> Command {
    match GUARD.get() {
        Some(exe) if cfg!(target_os = "linux") => {
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

const USAGE: &str = "usage: spindle guard --parent PID -- PROGRAM [ARGS...]
(started by the agent for each job; not meant to be run by hand)";

/// The guard's `main`: `args` after `guard`.
pub fn main(args: Vec<OsString>) -> ExitCode {
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
    match Command::new(&program).args(args).status() {
        Ok(status) => exit_like(status),
        Err(error) => {
            eprintln!(
                "spindle: cannot run {}: {error}",
                Path::new(&program).display()
            );
            ExitCode::from(127)
        }
    }
}

/// The agent's pid, for the signal handler.
#[cfg(target_os = "linux")]
static PARENT: std::sync::atomic::AtomicI32 = std::sync::atomic::AtomicI32::new(0);

#[cfg(target_os = "linux")]
extern "C" fn kill_the_group(_signal: libc::c_int) {
    // Only when the agent is gone: a job that signals its own group
    // (`kill 0`, a reload on SIGHUP) must not be hard-killed for it.
    // SAFETY: getppid(2) and kill(2) are async-signal-safe; 0 names the
    // caller's group, the guard included, which is meant.
    unsafe {
        if libc::getppid() != PARENT.load(std::sync::atomic::Ordering::SeqCst) {
            libc::kill(0, libc::SIGKILL);
        }
    }
}

#[cfg(target_os = "linux")]
fn watch_parent(parent: i32) {
    PARENT.store(parent, std::sync::atomic::Ordering::SeqCst);
    // SAFETY: plain system calls with integer arguments; the handler only
    // calls getppid(2) and kill(2).
    unsafe {
        // Only ever its own group: run by hand, it must not kill the
        // shell that started it.
        if libc::getpgrp() != libc::getpid() {
            libc::setpgid(0, 0);
        }
        let handler = kill_the_group as extern "C" fn(libc::c_int) as libc::sighandler_t;
        libc::signal(libc::SIGTERM, handler);
        libc::signal(libc::SIGHUP, handler);
        // The agent's threads block the termination signals (one thread
        // takes them); a mask survives exec, so unblock them here.
        let mut set = std::mem::MaybeUninit::<libc::sigset_t>::uninit();
        libc::sigemptyset(set.as_mut_ptr());
        libc::sigaddset(set.as_mut_ptr(), libc::SIGTERM);
        libc::sigaddset(set.as_mut_ptr(), libc::SIGHUP);
        libc::pthread_sigmask(libc::SIG_UNBLOCK, set.as_ptr(), std::ptr::null_mut());
        libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM);
        // The agent may have died before the prctl.
        if libc::getppid() != parent {
            libc::kill(0, libc::SIGKILL);
        }
    }
}

#[cfg(not(target_os = "linux"))]
fn watch_parent(_parent: i32) {}

fn exit_like(status: std::process::ExitStatus) -> ExitCode {
    use std::os::unix::process::ExitStatusExt;
    if let Some(code) = status.code() {
        return ExitCode::from(u8::try_from(code).unwrap_or(1));
    }
    if let Some(signal) = status.signal() {
        // SAFETY: restores the default action and raises the signal on
        // this process, so the parent sees the same signal.
        unsafe {
            libc::signal(signal, libc::SIG_DFL);
            libc::raise(signal);
        }
    }
    ExitCode::from(1)
}

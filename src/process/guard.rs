//! `spindle guard`: the first process of a job's process group, so that no
//! process of the job survives the agent, even an agent killed with
//! SIGKILL. The kernel's parent-death signal reaches only the agent's own
//! child and is not inherited by that child's children; a job's shell
//! (`sh -c "make; make test"`) forks, and its children would outlive the
//! agent. The guard asks for SIGTERM when the agent dies, runs the
//! command in its own group, and on that signal kills the whole group.
//!
//! It is also the job's *subreaper*: a process of the job whose parent
//! ends is re-parented to the guard, not to init, so while the command
//! runs every process it started stays a descendant of the guard, even
//! one that left the group (`setsid`, a daemon that detaches twice). When
//! the agent dies, the guard kills the command, stops every descendant it
//! finds in `/proc`, round after round until none runs (a fork racing the
//! sweep is caught in the next round, and a stopped process forks no
//! more), kills them all, then its whole group. It exits
//! with the command's status (a signal re-raised), so whoever waits for
//! the guard sees what it would have seen of the command.
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
pub fn enable(exe: PathBuf) {
    let _ = GUARD.set(exe);
    if let Err(error) = super::sys::tie_to_agent() {
        log::warn!("cannot tie the agent's processes to its life: {error}");
    }
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
    if agent_gone() {
        sweep();
    }
    match status {
        Some(status) => exit_like(status),
        None => ExitCode::from(1),
    }
}

// Global, these three: a signal handler sees nothing but statics.

/// The agent's pid, for the signal handler.
#[cfg(target_os = "linux")]
static PARENT: std::sync::atomic::AtomicI32 = std::sync::atomic::AtomicI32::new(0);

/// The command's pid, for the signal handler (0: not started).
#[cfg(target_os = "linux")]
static CHILD: std::sync::atomic::AtomicI32 = std::sync::atomic::AtomicI32::new(0);

/// Set by the handler once the agent is gone.
#[cfg(target_os = "linux")]
static AGENT_GONE: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

#[cfg(target_os = "linux")]
extern "C" fn agent_died(_signal: libc::c_int) {
    use std::sync::atomic::Ordering;
    // Only when the agent is gone: a job that signals its own group
    // (`kill 0`, a reload on SIGHUP) must not be hard-killed for it.
    // SAFETY: getppid(2) and kill(2) are async-signal-safe. Killing the
    // command ends the guard's wait; the sweep after it takes the rest.
    unsafe {
        if libc::getppid() != PARENT.load(Ordering::SeqCst) {
            AGENT_GONE.store(true, Ordering::SeqCst);
            let child = CHILD.load(Ordering::SeqCst);
            if child > 0 {
                libc::kill(child, libc::SIGKILL);
            } else {
                libc::kill(0, libc::SIGKILL);
            }
        }
    }
}

/// Waits for the command, reaping the orphans re-parented to the guard
/// meanwhile; `None` when the agent died first (the command was killed).
#[cfg(target_os = "linux")]
fn wait_for(child: std::process::Child) -> Option<std::process::ExitStatus> {
    use std::os::unix::process::ExitStatusExt;
    use std::sync::atomic::Ordering;
    let pid = i32::try_from(child.id()).unwrap_or(0);
    CHILD.store(pid, Ordering::SeqCst);
    // The agent may have died between the spawn and the store.
    if AGENT_GONE.load(Ordering::SeqCst) {
        // SAFETY: kill(2) on the command this guard started.
        unsafe { libc::kill(pid, libc::SIGKILL) };
    }
    loop {
        let mut raw = 0;
        // SAFETY: waitpid(2) for any child of this process, into a local.
        let reaped = unsafe { libc::waitpid(-1, &mut raw, 0) };
        if reaped == pid {
            // Reaped: the pid is free now, and not the handler's to kill.
            CHILD.store(0, Ordering::SeqCst);
            return (!AGENT_GONE.load(Ordering::SeqCst))
                .then(|| std::process::ExitStatus::from_raw(raw));
        }
        if reaped < 0 && std::io::Error::last_os_error().raw_os_error() == Some(libc::ECHILD) {
            return None;
        }
    }
}

#[cfg(not(target_os = "linux"))]
fn wait_for(mut child: std::process::Child) -> Option<std::process::ExitStatus> {
    child.wait().ok()
}

#[cfg(target_os = "linux")]
fn agent_gone() -> bool {
    AGENT_GONE.load(std::sync::atomic::Ordering::SeqCst)
}

#[cfg(not(target_os = "linux"))]
fn agent_gone() -> bool {
    false
}

/// Kills every descendant of the guard. They are stopped first, round
/// after round, until a round finds none still running (a stopped
/// process forks no more, so a process that forks a successor as fast as
/// it can is caught within a few rounds), then all killed at once and
/// reaped. Every living process the job started is a child of the guard
/// or below one (orphans come to the guard), so when the guard has no
/// child left there is nothing to find, and `/proc` is read only when
/// there is.
#[cfg(target_os = "linux")]
fn sweep() {
    use std::time::{Duration, Instant};
    let me = std::process::id();
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut stopped: std::collections::BTreeSet<u32> = Default::default();
    while reap_ended() && Instant::now() < deadline {
        let running: Vec<u32> = descendants(me)
            .into_iter()
            .filter(|pid| !stopped.contains(pid))
            .collect();
        if running.is_empty() {
            break;
        }
        for pid in running {
            // SAFETY: kill(2) of a process found under this one.
            unsafe { libc::kill(pid as i32, libc::SIGSTOP) };
            stopped.insert(pid);
        }
    }
    for pid in &stopped {
        // SAFETY: kill(2) of a process stopped under this one (a stopped
        // process cannot end by itself, so its pid is still its own).
        unsafe { libc::kill(*pid as i32, libc::SIGKILL) };
    }
    // The killed, and what was re-parented to the guard meanwhile.
    while reap_ended() && Instant::now() < deadline {
        for pid in descendants(me) {
            // SAFETY: as above.
            unsafe { libc::kill(pid as i32, libc::SIGKILL) };
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    // Whatever the sweep missed in the group goes with the guard.
    // SAFETY: kill(2) of the guard's own group, the guard included.
    unsafe { libc::kill(0, libc::SIGKILL) };
}

#[cfg(not(target_os = "linux"))]
fn sweep() {}

/// Reaps every child that has ended; whether some child still lives.
#[cfg(target_os = "linux")]
fn reap_ended() -> bool {
    loop {
        let mut raw = 0;
        // SAFETY: waitpid(2) without blocking, into a local.
        match unsafe { libc::waitpid(-1, &mut raw, libc::WNOHANG) } {
            0 => return true,
            reaped if reaped > 0 => continue,
            _ => return std::io::Error::last_os_error().raw_os_error() != Some(libc::ECHILD),
        }
    }
}

/// The processes below `root`, from `/proc` (each entry's parent).
#[cfg(target_os = "linux")]
fn descendants(root: u32) -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let mut parents: Vec<(u32, u32)> = Vec::new();
    for entry in entries.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        // `pid (comm) state ppid …`; comm may hold spaces and parentheses.
        let Some(rest) = stat.rfind(')').map(|at| &stat[at + 1..]) else {
            continue;
        };
        let mut fields = rest.split_whitespace();
        let state = fields.next().unwrap_or("");
        let Some(ppid) = fields.next().and_then(|p| p.parse::<u32>().ok()) else {
            continue;
        };
        // A zombie is dead already; reaping it is the parent's part.
        if state != "Z" {
            parents.push((pid, ppid));
        }
    }
    let mut below = vec![root];
    let mut at = 0;
    while at < below.len() {
        let parent = below[at];
        below.extend(
            parents
                .iter()
                .filter(|(_, ppid)| *ppid == parent)
                .map(|(pid, _)| *pid),
        );
        at += 1;
    }
    below.remove(0);
    below
}

#[cfg(target_os = "linux")]
fn watch_parent(parent: i32) {
    PARENT.store(parent, std::sync::atomic::Ordering::SeqCst);
    // SAFETY: plain system calls with integer arguments and a sigaction
    // built here; the handler only calls getppid(2) and kill(2).
    unsafe {
        // Only ever its own group: run by hand, it must not kill the
        // shell that started it.
        if libc::getpgrp() != libc::getpid() {
            libc::setpgid(0, 0);
        }
        // Orphans of the job come to the guard, not to init.
        libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1);
        let mut action: libc::sigaction = std::mem::zeroed();
        action.sa_sigaction = agent_died as extern "C" fn(libc::c_int) as libc::sighandler_t;
        libc::sigemptyset(&mut action.sa_mask);
        libc::sigaction(libc::SIGTERM, &action, std::ptr::null_mut());
        libc::sigaction(libc::SIGHUP, &action, std::ptr::null_mut());
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

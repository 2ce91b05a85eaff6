//! Linux: the guard asks for SIGTERM when the agent dies (the kernel's
//! parent-death signal) and is the job's subreaper, so every process the
//! command started stays its descendant and is found in `/proc`. The
//! agent's request to end (`END_SIGNAL`) is handled as the agent's
//! death.

// Global, these three: a signal handler sees nothing but statics.

/// The agent's pid, for the signal handler.
static PARENT: std::sync::atomic::AtomicI32 = std::sync::atomic::AtomicI32::new(0);

/// The command's pid, for the signal handler (0: not started).
static CHILD: std::sync::atomic::AtomicI32 = std::sync::atomic::AtomicI32::new(0);

/// Set by a handler once the job must end whole: the agent is gone, or
/// it asked for the end.
static ENDING: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

extern "C" fn agent_died(_signal: libc::c_int) {
    use std::sync::atomic::Ordering;
    // Only when the agent is gone: a job that signals its own group
    // (`kill 0`, a reload on SIGHUP) must not be hard-killed for it.
    // SAFETY: getppid(2) and kill(2) are async-signal-safe. Killing the
    // command ends the guard's wait; the sweep after it takes the rest.
    unsafe {
        if libc::getppid() != PARENT.load(Ordering::SeqCst) {
            ENDING.store(true, Ordering::SeqCst);
            let child = CHILD.load(Ordering::SeqCst);
            if child > 0 {
                libc::kill(child, libc::SIGKILL);
            } else {
                libc::kill(0, libc::SIGKILL);
            }
        }
    }
}

extern "C" fn asked_to_end(
    _signal: libc::c_int,
    info: *mut libc::siginfo_t,
    _context: *mut libc::c_void,
) {
    use std::sync::atomic::Ordering;
    // SAFETY: `info` is the kernel's; kill(2) is async-signal-safe.
    // Killing the command ends the guard's wait; the sweep after it takes
    // the rest. A command not started yet is killed as soon as it is
    // (the wait checks the flag).
    unsafe {
        if super::termination::sent_by(info, PARENT.load(Ordering::SeqCst)) {
            ENDING.store(true, Ordering::SeqCst);
            let child = CHILD.load(Ordering::SeqCst);
            if child > 0 {
                libc::kill(child, libc::SIGKILL);
            }
        }
    }
}

/// Waits for the command, reaping the orphans re-parented to the guard
/// meanwhile; `None` when the job must end (the command was killed).
pub(super) fn wait_for(child: std::process::Child) -> Option<std::process::ExitStatus> {
    use std::os::unix::process::ExitStatusExt;
    use std::sync::atomic::Ordering;
    let pid = i32::try_from(child.id()).unwrap_or(0);
    CHILD.store(pid, Ordering::SeqCst);
    // The agent may have died, or asked for the end, between the spawn
    // and the store.
    if ENDING.load(Ordering::SeqCst) {
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
            return (!ENDING.load(Ordering::SeqCst))
                .then(|| std::process::ExitStatus::from_raw(raw));
        }
        if reaped < 0 && std::io::Error::last_os_error().raw_os_error() == Some(libc::ECHILD) {
            return None;
        }
    }
}

pub(super) fn ending() -> bool {
    ENDING.load(std::sync::atomic::Ordering::SeqCst)
}

/// Kills every descendant of the guard. They are stopped first, round
/// after round, until a round finds none still running (a stopped
/// process forks no more, so a process that forks a successor as fast as
/// it can is caught within a few rounds), then all killed at once and
/// reaped. Every living process the job started is a child of the guard
/// or below one (orphans come to the guard), so when the guard has no
/// child left there is nothing to find, and `/proc` is read only when
/// there is.
pub(super) fn sweep() {
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

/// Reaps every child that has ended; whether some child still lives.
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

pub(super) fn watch_parent(parent: i32) {
    PARENT.store(parent, std::sync::atomic::Ordering::SeqCst);
    // SAFETY: plain system calls with integer arguments and sigactions
    // built here; the handlers only call getppid(2) and kill(2).
    unsafe {
        super::termination::own_group_and_termination(agent_died);
        super::termination::on_end_request(asked_to_end);
        // Orphans of the job come to the guard, not to init.
        libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1);
        libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM);
        // The agent may have died before the prctl.
        if libc::getppid() != parent {
            libc::kill(0, libc::SIGKILL);
        }
    }
}

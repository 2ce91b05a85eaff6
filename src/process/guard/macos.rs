//! macOS: no parent-death signal and no subreaper. A thread of the guard
//! waits for the agent's exit (kqueue, `EVFILT_PROC` with `NOTE_EXIT`;
//! watching its parent id if kqueue fails) or for the agent's request to
//! end (a byte on a pipe the request's handler writes to), and then takes
//! the job down from the top: the command is stopped first, so that none
//! of its children loses its parent, then, round after round until a
//! round finds nothing new, every process below the guard (the system's
//! list of each process's children) or in its group is stopped; then all
//! are killed, and last the guard's whole group, the guard with it.

use std::collections::BTreeSet;
use std::os::fd::{AsRawFd, FromRawFd, IntoRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::time::{Duration, Instant};

// Global, these five: written by the main thread or a signal handler,
// read by the watcher or a signal handler (which sees nothing but
// statics).

/// The command's pid (0: not started).
static CHILD: AtomicI32 = AtomicI32::new(0);

/// Set once the job must end whole: the agent is gone, or it asked.
static ENDING: AtomicBool = AtomicBool::new(false);

/// The agent's pid, for the end request's handler.
static PARENT: AtomicI32 = AtomicI32::new(0);

/// Set by the end request's handler.
static ASKED: AtomicBool = AtomicBool::new(false);

/// The write end of the pipe that wakes the watcher at the agent's
/// request to end (-1: none).
static WAKE: AtomicI32 = AtomicI32::new(-1);

/// Termination signals to the guard's group (a job's `kill 0`, the
/// agent's polite stop) are for the command: the guard lets them pass
/// and lives on to report the command's status. A handler rather than
/// `SIG_IGN`, which the command would inherit through exec.
extern "C" fn let_pass(_signal: libc::c_int) {}

/// The agent asks for the end: the command is stopped at once (it keeps
/// its children) and the watcher woken, which sweeps.
extern "C" fn asked_to_end(
    _signal: libc::c_int,
    info: *mut libc::siginfo_t,
    _context: *mut libc::c_void,
) {
    // SAFETY: `info` is the kernel's; kill(2) and write(2) are
    // async-signal-safe, on a pid and a descriptor from statics.
    unsafe {
        if !super::termination::sent_by(info, PARENT.load(Ordering::SeqCst)) {
            return;
        }
        let child = CHILD.load(Ordering::SeqCst);
        if child > 0 {
            libc::kill(child, libc::SIGSTOP);
        }
        ASKED.store(true, Ordering::SeqCst);
        let wake = WAKE.load(Ordering::SeqCst);
        if wake >= 0 {
            let byte = 1u8;
            libc::write(wake, std::ptr::addr_of!(byte).cast(), 1);
        }
    }
}

pub(super) fn watch_parent(parent: i32) {
    PARENT.store(parent, Ordering::SeqCst);
    let wake = wake_pipe();
    // SAFETY: plain system calls with integer arguments and sigactions
    // built here; one handler does nothing, the other only kill(2) and
    // write(2).
    unsafe {
        super::termination::own_group_and_termination(let_pass);
        super::termination::on_end_request(asked_to_end);
    }
    let exits = match exit_queue(parent, wake.as_ref()) {
        Ok(queue) => Some(queue),
        // The agent is gone already.
        Err(error) if error.raw_os_error() == Some(libc::ESRCH) => return end_all(),
        Err(_) => None,
    };
    // SAFETY: getppid(2) takes nothing and cannot fail.
    if unsafe { libc::getppid() } != parent {
        // The agent died before the watch began.
        return end_all();
    }
    // Detached: it waits for the agent's end for the life of the guard.
    let spawned = std::thread::Builder::new()
        .name("spindle-guard-watch".into())
        .spawn(move || {
            // The pipe's read end stays open while the queue watches it.
            let _wake = wake;
            wait_for_exit(parent, exits);
            end_all();
        });
    if spawned.is_err() {
        // Without a watcher the guard cannot keep its promise: it ends
        // before the command starts rather than leave it unguarded.
        end_all();
    }
}

/// A pipe whose write end (in [`WAKE`], open for the guard's life, never
/// blocking) the end request's handler writes to; its read end. Neither
/// end reaches the command (closed on exec).
fn wake_pipe() -> Option<OwnedFd> {
    let mut fds = [0; 2];
    // SAFETY: pipe(2) fills the local array.
    if unsafe { libc::pipe(fds.as_mut_ptr()) } != 0 {
        return None;
    }
    // SAFETY: pipe(2) just opened both descriptors, owned by nothing else.
    let (read, write) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    // SAFETY: fcntl(2) with integer arguments on descriptors owned here.
    unsafe {
        for fd in [read.as_raw_fd(), write.as_raw_fd()] {
            libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC);
        }
        let flags = libc::fcntl(write.as_raw_fd(), libc::F_GETFL);
        if flags >= 0 {
            libc::fcntl(write.as_raw_fd(), libc::F_SETFL, flags | libc::O_NONBLOCK);
        }
    }
    WAKE.store(write.into_raw_fd(), Ordering::SeqCst);
    Some(read)
}

/// A kqueue that reports the exit of process `pid` and, when there is
/// one, that `wake` can be read.
fn exit_queue(pid: i32, wake: Option<&OwnedFd>) -> std::io::Result<OwnedFd> {
    // SAFETY: kqueue(2) takes nothing; the descriptor is checked.
    let queue = unsafe { libc::kqueue() };
    if queue < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: kqueue just opened the descriptor, owned by nothing else.
    let queue = unsafe { OwnedFd::from_raw_fd(queue) };
    let change = libc::kevent {
        ident: pid as libc::uintptr_t,
        filter: libc::EVFILT_PROC,
        flags: libc::EV_ADD | libc::EV_ONESHOT,
        fflags: libc::NOTE_EXIT,
        data: 0,
        udata: std::ptr::null_mut(),
    };
    // SAFETY: one change read from a live local, no event list to fill,
    // no timeout; the queue is live.
    let added = unsafe {
        libc::kevent(
            queue.as_raw_fd(),
            &change,
            1,
            std::ptr::null_mut(),
            0,
            std::ptr::null(),
        )
    };
    if added < 0 {
        return Err(std::io::Error::last_os_error());
    }
    if let Some(wake) = wake {
        let change = libc::kevent {
            ident: wake.as_raw_fd() as libc::uintptr_t,
            filter: libc::EVFILT_READ,
            flags: libc::EV_ADD | libc::EV_ONESHOT,
            fflags: 0,
            data: 0,
            udata: std::ptr::null_mut(),
        };
        // SAFETY: as above; the pipe is live while the queue is watched.
        // Should this fail, the agent kills the group after its wait.
        unsafe {
            libc::kevent(
                queue.as_raw_fd(),
                &change,
                1,
                std::ptr::null_mut(),
                0,
                std::ptr::null(),
            )
        };
    }
    Ok(queue)
}

/// Returns once the agent `parent` has exited or asked for the end: an
/// event of the queue, or, with no queue (or a queue that fails), the
/// guard's parent id changing or the request's flag.
fn wait_for_exit(parent: i32, exits: Option<OwnedFd>) {
    if let Some(queue) = exits {
        loop {
            // SAFETY: zeroed is a valid kevent (integers and a null
            // pointer).
            let mut event: libc::kevent = unsafe { std::mem::zeroed() };
            // SAFETY: the queue is live; room for one event in a local;
            // no change list, no timeout.
            let got = unsafe {
                libc::kevent(
                    queue.as_raw_fd(),
                    std::ptr::null(),
                    0,
                    &mut event,
                    1,
                    std::ptr::null(),
                )
            };
            if got > 0 {
                return;
            }
            if got < 0 && std::io::Error::last_os_error().kind() != std::io::ErrorKind::Interrupted
            {
                break;
            }
        }
    }
    // SAFETY: getppid(2) takes nothing and cannot fail.
    while unsafe { libc::getppid() } == parent && !ASKED.load(Ordering::SeqCst) {
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The agent is gone, or asked for the end: the command is stopped at
/// once, then the job swept. Does not return (the sweep ends the
/// guard's group).
fn end_all() {
    ENDING.store(true, Ordering::SeqCst);
    let child = CHILD.load(Ordering::SeqCst);
    if child > 0 {
        // SAFETY: kill(2) of the command this guard started; it is not
        // reaped while stopped (the wait does not report stops), so the
        // pid is still its own.
        unsafe { libc::kill(child, libc::SIGSTOP) };
    }
    sweep();
}

/// Waits for the command; `None` when the job must end (the command was
/// killed).
pub(super) fn wait_for(mut child: std::process::Child) -> Option<std::process::ExitStatus> {
    CHILD.store(i32::try_from(child.id()).unwrap_or(0), Ordering::SeqCst);
    let status = child.wait().ok();
    // Reaped: the pid is free now, and not the watcher's to stop.
    CHILD.store(0, Ordering::SeqCst);
    status.filter(|_| !ENDING.load(Ordering::SeqCst))
}

pub(super) fn ending() -> bool {
    ENDING.load(Ordering::SeqCst)
}

/// Stops every process below the guard or in its group, round after
/// round until a round finds none still running (a stopped process forks
/// no more and keeps its children), then kills them all and the guard's
/// group, the guard included.
pub(super) fn sweep() {
    // SAFETY: getpid(2) and getpgrp(2) take nothing and cannot fail.
    let (me, group) = unsafe { (libc::getpid(), libc::getpgrp()) };
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut stopped: BTreeSet<libc::pid_t> = BTreeSet::new();
    while Instant::now() < deadline {
        let mut running = descendants(me);
        running.extend(listed(Listing::Group, group));
        running.retain(|pid| *pid != me && !stopped.contains(pid));
        if running.is_empty() {
            break;
        }
        for pid in running {
            // SAFETY: kill(2) of a process found below the guard or in
            // its group.
            unsafe { libc::kill(pid, libc::SIGSTOP) };
            stopped.insert(pid);
        }
    }
    for pid in &stopped {
        // SAFETY: kill(2) of a process stopped here (a stopped process
        // cannot end by itself, so its pid is still its own).
        unsafe { libc::kill(*pid, libc::SIGKILL) };
    }
    // SAFETY: kill(2) of the guard's own group, the guard included.
    unsafe { libc::kill(0, libc::SIGKILL) };
}

/// The processes below `root`, each process's children as the system
/// lists them.
fn descendants(root: libc::pid_t) -> Vec<libc::pid_t> {
    let mut below = vec![root];
    let mut at = 0;
    while at < below.len() {
        let children = listed(Listing::Children, below[at]);
        for child in children {
            if !below.contains(&child) {
                below.push(child);
            }
        }
        at += 1;
    }
    below.remove(0);
    below
}

enum Listing {
    /// The children of a process.
    Children,
    /// The members of a process group.
    Group,
}

/// The pids of a listing (at most 4096, far more than a job has).
fn listed(listing: Listing, of: libc::pid_t) -> Vec<libc::pid_t> {
    let mut pids: Vec<libc::pid_t> = vec![0; 4096];
    let bytes = libc::c_int::try_from(std::mem::size_of_val(pids.as_slice())).unwrap_or(0);
    // SAFETY: the buffer is ours, zeroed, and `bytes` long; libproc
    // writes at most that many bytes of pids into it.
    let count = unsafe {
        match listing {
            Listing::Children => libc::proc_listchildpids(of, pids.as_mut_ptr().cast(), bytes),
            Listing::Group => libc::proc_listpgrppids(of, pids.as_mut_ptr().cast(), bytes),
        }
    };
    // The count of pids; read it as at most the buffer (and past the
    // pids written, the zeroes are dropped), whichever unit it is in.
    let count = usize::try_from(count).unwrap_or(0).min(pids.len());
    pids.truncate(count);
    pids.retain(|pid| *pid > 0);
    pids
}

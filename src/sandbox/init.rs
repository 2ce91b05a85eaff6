//! The first process of the sandbox's PID namespace, and the launcher
//! that waits for it outside.
//!
//! After `unshare(CLONE_NEWPID)` the launcher forks: the child is process
//! 1 of the new namespace. It mounts a `/proc` of that namespace (so the
//! command sees only its own processes: not the agent, its environment or
//! command line, nor any other program of the user), confines itself,
//! and runs the program as a child of its own, reaping every orphan of
//! the namespace meanwhile. Process 1 is not the program because the
//! kernel shields a namespace's first process from signals it has no
//! handler for: the program would ignore a terminal's Ctrl-C.
//!
//! When the program ends, the first process hands its wait status to the
//! launcher through a pipe and exits, and the kernel kills whatever is
//! left in the namespace: nothing the command started outlives it. The
//! launcher exits like the program did (the same code, or the same
//! signal). Should the launcher die first, the first process gets SIGKILL
//! (its parent-death signal), which takes the namespace down too.

use std::fs::File;
use std::io::{self, Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::process::ExitCode;

use super::exit::{cannot_apply_code, exec_code, report_cannot_apply};
use super::namespaces;
use super::terms::Launch;

/// Forks the namespace's first process, which runs `confine` and then the
/// program; returns (in the launcher) with the program's status.
pub(super) fn start(confine: impl FnOnce() -> Result<(), String>, launch: &Launch) -> ExitCode {
    let (status_reader, status_writer) = match pipe() {
        Ok(ends) => ends,
        Err(error) => return report_cannot_apply(&format!("pipe: {error}")),
    };
    let (lifeline_reader, lifeline_writer) = match pipe() {
        Ok(ends) => ends,
        Err(error) => return report_cannot_apply(&format!("pipe: {error}")),
    };
    // SAFETY: the launcher is single-threaded (checked before the
    // namespaces), so the child may run ordinary code.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return report_cannot_apply(&format!("fork: {}", io::Error::last_os_error()));
    }
    if pid == 0 {
        drop(status_reader);
        drop(lifeline_writer);
        let code = first_process(confine, launch, &lifeline_reader, status_writer);
        // SAFETY: _exit ends the process at once, without running exit
        // handlers or flushing buffers copied from the launcher.
        unsafe { libc::_exit(code) };
    }
    drop(status_writer);
    drop(lifeline_reader);
    let status = wait(pid);
    // Held until now: the first process learns of the launcher's end.
    drop(lifeline_writer);
    let mut bytes = [0u8; 4];
    let relayed = File::from(status_reader).read_exact(&mut bytes).is_ok();
    match status {
        _ if relayed => exit_like(i32::from_ne_bytes(bytes)),
        Ok(own) => exit_like(own),
        Err(error) => report_cannot_apply(&format!("waitpid: {error}")),
    }
}

/// Process 1: its own `/proc`, the confinement, then the program as its
/// child; returns its own exit code.
fn first_process(
    confine: impl FnOnce() -> Result<(), String>,
    launch: &Launch,
    lifeline: &OwnedFd,
    status: OwnedFd,
) -> libc::c_int {
    // SAFETY: PR_SET_PDEATHSIG takes plain integers.
    if unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) } != 0 {
        eprintln!(
            "spindle sandbox: cannot tie the sandbox to the launcher: {}",
            io::Error::last_os_error()
        );
        return cannot_apply_code();
    }
    // The launcher may have died before the prctl: its end of the
    // lifeline would be closed.
    let mut poll = libc::pollfd {
        fd: lifeline.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one live pollfd, no wait.
    if unsafe { libc::poll(&mut poll, 1, 0) } != 0 {
        return cannot_apply_code();
    }
    if let Err(error) = namespaces::mount_proc() {
        // Landlock's scoping and the dropped capabilities still keep the
        // processes outside out of reach; only their list is visible.
        log::debug!("sandbox: the PID namespace keeps the outer /proc: {error}");
    }
    if let Err(message) = confine() {
        report_cannot_apply(&message);
        return cannot_apply_code();
    }
    // The program shares this process's Landlock domain and uid: it must
    // not be able to trace it (and write a status of its choosing, or take
    // its descriptors), nor find a descriptor inherited from outside here.
    // SAFETY: PR_SET_DUMPABLE takes plain integers.
    if unsafe { libc::prctl(libc::PR_SET_DUMPABLE, 0 as libc::c_ulong) } != 0 {
        report_cannot_apply(&format!(
            "cannot make the sandbox's first process untraceable: {}",
            io::Error::last_os_error()
        ));
        return cannot_apply_code();
    }
    if let Err(error) = close_all_but(&[lifeline.as_raw_fd(), status.as_raw_fd()]) {
        report_cannot_apply(&format!("cannot close inherited descriptors: {error}"));
        return cannot_apply_code();
    }
    // SAFETY: still single-threaded.
    let program = unsafe { libc::fork() };
    if program < 0 {
        report_cannot_apply(&format!("fork: {}", io::Error::last_os_error()));
        return cannot_apply_code();
    }
    if program == 0 {
        drop(status);
        return libc::c_int::from(exec_code(launch));
    }
    // Reap every process of the namespace until the program ends.
    loop {
        let mut raw = 0;
        // SAFETY: waitpid for any child, into a local.
        let reaped = unsafe { libc::waitpid(-1, &mut raw, 0) };
        if reaped == program {
            let _ = File::from(status).write_all(&raw.to_ne_bytes());
            return 0;
        }
        if reaped < 0 && io::Error::last_os_error().kind() != io::ErrorKind::Interrupted {
            return cannot_apply_code();
        }
    }
}

/// Closes every descriptor past stderr but those of `keep`.
fn close_all_but(keep: &[libc::c_int]) -> io::Result<()> {
    let listed = std::fs::read_dir("/proc/self/fd")?
        .flatten()
        .filter_map(|entry| entry.file_name().to_str()?.parse::<libc::c_int>().ok())
        .collect::<Vec<_>>();
    for fd in listed {
        if fd > 2 && !keep.contains(&fd) {
            // SAFETY: closes a descriptor this process owns and no Rust
            // object of this process uses (the listing's own is gone, and
            // closing it again only fails with EBADF).
            unsafe { libc::close(fd) };
        }
    }
    Ok(())
}

fn pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0; 2];
    // SAFETY: `fds` has room for the two descriptors pipe2 writes.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: pipe2 just opened both descriptors, owned by nothing else.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// Waits for `pid`, through interruptions; its raw wait status.
pub(super) fn wait(pid: libc::pid_t) -> io::Result<libc::c_int> {
    let mut status = 0;
    loop {
        // SAFETY: `status` is a live integer waitpid writes into.
        if unsafe { libc::waitpid(pid, &mut status, 0) } == pid {
            return Ok(status);
        }
        let error = io::Error::last_os_error();
        if error.kind() != io::ErrorKind::Interrupted {
            return Err(error);
        }
    }
}

/// Ends like a process with wait status `status` did: its exit code, or
/// its signal raised again here with the default action.
fn exit_like(status: libc::c_int) -> ExitCode {
    if libc::WIFEXITED(status) {
        return ExitCode::from(u8::try_from(libc::WEXITSTATUS(status)).unwrap_or(1));
    }
    if libc::WIFSIGNALED(status) {
        let signal = libc::WTERMSIG(status);
        // SAFETY: restores the default action and raises the signal on
        // this process, so whoever waits sees the same signal.
        unsafe {
            libc::signal(signal, libc::SIG_DFL);
            libc::raise(signal);
        }
        return ExitCode::from(u8::try_from(128 + signal).unwrap_or(1));
    }
    ExitCode::from(1)
}

//! What the guard does with termination signals on every Unix.

/// Makes the guard lead its own group (run by hand, it must not kill the
/// shell that started it), gives SIGTERM and SIGHUP to `handler`, and
/// unblocks them: the agent's threads block the termination signals (one
/// thread takes them) and a mask survives exec.
///
/// # Safety
/// `handler` must do only what a signal handler may (async-signal-safe
/// calls on statics).
pub(super) unsafe fn own_group_and_termination(handler: extern "C" fn(libc::c_int)) {
    // SAFETY: plain system calls with integer arguments, and a sigaction
    // and a signal set built here.
    unsafe {
        if libc::getpgrp() != libc::getpid() {
            libc::setpgid(0, 0);
        }
        let mut action: libc::sigaction = std::mem::zeroed();
        action.sa_sigaction = handler as libc::sighandler_t;
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
    }
}

/// Gives the agent's request to end (`END_SIGNAL`) to `handler`, with
/// the sender's identity (`SA_SIGINFO`), and unblocks it.
///
/// # Safety
/// `handler` must do only what a signal handler may (async-signal-safe
/// calls on statics).
pub(super) unsafe fn on_end_request(
    handler: extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut libc::c_void),
) {
    let signal = crate::process::sys::END_SIGNAL;
    // SAFETY: plain system calls with integer arguments, and a sigaction
    // and a signal set built here.
    unsafe {
        let mut action: libc::sigaction = std::mem::zeroed();
        action.sa_sigaction = handler as libc::sighandler_t;
        action.sa_flags = libc::SA_SIGINFO;
        libc::sigemptyset(&mut action.sa_mask);
        libc::sigaction(signal, &action, std::ptr::null_mut());
        let mut set = std::mem::MaybeUninit::<libc::sigset_t>::uninit();
        libc::sigemptyset(set.as_mut_ptr());
        libc::sigaddset(set.as_mut_ptr(), signal);
        libc::pthread_sigmask(libc::SIG_UNBLOCK, set.as_ptr(), std::ptr::null_mut());
    }
}

/// Whether a signal came from the process `parent` (the agent).
///
/// # Safety
/// `info` is what the kernel passed a `SA_SIGINFO` handler (or null).
pub(super) unsafe fn sent_by(info: *const libc::siginfo_t, parent: libc::pid_t) -> bool {
    // SAFETY: a non-null `info` is the kernel's, valid for the handler's
    // run; si_pid names the sender of a signal sent with kill(2).
    unsafe { !info.is_null() && (*info).si_pid() == parent }
}

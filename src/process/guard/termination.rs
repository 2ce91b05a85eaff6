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

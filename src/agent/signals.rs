//! Termination signals — SIGTERM, SIGINT and SIGHUP, how editors stop
//! their agents — end Spindle the way the end of stdin does: running turns
//! are cancelled (their commands' process groups killed), their prompts
//! answered, output flushed, and the process exits 0.
//!
//! The signals are blocked in the thread that starts the agent, before any
//! other thread exists, so every thread inherits the mask and only the
//! `spindle-signals` thread receives them, with `sigwait`. Child processes
//! start with an empty mask (std resets it), so commands still die of them.
//!
//! The thread depends on nothing else of the agent: when the orderly end
//! does not come within [`GRACE`] (a handler stuck, an editor that stopped
//! reading stdout), or a second signal comes, it ends the process itself.
//! Every child dies with it (commands under the guard, MCP servers and
//! Spindle's own probes are tied to the agent's life).

use super::dispatcher::Event;
use crossbeam_channel::Sender;
use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

const SIGNALS: [libc::c_int; 3] = [libc::SIGTERM, libc::SIGINT, libc::SIGHUP];

/// How long the orderly end may take after a signal.
pub const GRACE: std::time::Duration = std::time::Duration::from_secs(5);

fn signal_set() -> io::Result<libc::sigset_t> {
    let mut set = std::mem::MaybeUninit::<libc::sigset_t>::uninit();
    // SAFETY: sigemptyset initialises the set it is given; sigaddset then
    // only writes into that initialised set.
    unsafe {
        if libc::sigemptyset(set.as_mut_ptr()) != 0 {
            return Err(io::Error::last_os_error());
        }
        for signal in SIGNALS {
            if libc::sigaddset(set.as_mut_ptr(), signal) != 0 {
                return Err(io::Error::last_os_error());
            }
        }
        Ok(set.assume_init())
    }
}

/// Blocks the termination signals in the calling thread and starts the
/// thread that turns them into `Event::Signal`; `stopped` is set when one
/// came. Call before starting any other thread of the agent.
pub fn install(events: Sender<Event>, stopped: Arc<AtomicBool>) -> io::Result<()> {
    let set = signal_set()?;
    // SAFETY: `set` is an initialised signal set; the old mask is not
    // wanted (null).
    let blocked = unsafe { libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut()) };
    if blocked != 0 {
        return Err(io::Error::from_raw_os_error(blocked));
    }
    // Detached: it waits on signals for the life of the process.
    std::thread::Builder::new()
        .name("spindle-signals".into())
        .spawn(move || loop {
            let mut signal: libc::c_int = 0;
            // SAFETY: `set` and `signal` are live for the call; sigwait
            // writes the signal number only.
            let waited = unsafe { libc::sigwait(&set, &mut signal) };
            if waited != 0 {
                log::warn!(
                    "waiting for signals failed: {}",
                    io::Error::from_raw_os_error(waited)
                );
                return;
            }
            if stopped.swap(true, Ordering::SeqCst) {
                log::warn!("signal {signal} again: exiting now");
                std::process::exit(1);
            }
            log::info!("signal {signal}: stopping as at the end of input");
            // Detached: a deadline that ends the process if the orderly
            // stop hangs.
            let deadline = std::thread::Builder::new()
                .name("spindle-signal-deadline".into())
                .spawn(|| {
                    std::thread::sleep(GRACE);
                    log::warn!(
                        "the agent did not stop within {} s of the signal: exiting now",
                        GRACE.as_secs()
                    );
                    std::process::exit(1);
                });
            if deadline.is_err() {
                std::process::exit(1);
            }
            // The dispatcher may be stuck: the signal is not waited on.
            let _ = events.try_send(Event::Signal);
        })?;
    Ok(())
}

//! How `exec` and `chat` end on a termination request (SIGTERM, SIGINT,
//! SIGHUP; Ctrl-C and the console closing on Windows). Their handler only
//! records the request and cancels the running turn; the front-end's own
//! loop notices, joins the in-process agent and drops what it owns (a
//! scripted run's temporary folder goes as the agent ends), and returns
//! `Failure::Signalled`; `main` then ends
//! the process by that same signal, as a shell expects of a program that
//! caught one (`process::die_of`).
//!
//! A hard fallback stays, because people expect it (Ctrl-C twice quits,
//! whatever is running): a second request, or no end within [`GRACE`] of
//! the first (a stuck command, a question nobody answers), ends the
//! process at once through [`force`].

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long the orderly end may take after the first request.
pub(super) const GRACE: Duration = Duration::from_secs(5);

/// How often the main thread's blocking read is interrupted until the
/// loop has noticed (a wake that comes just before the read is lost).
const WAKE_EVERY: Duration = Duration::from_millis(50);

/// Ends the process now, the terminal as it was found: by the signal
/// `name`, or with 0 for a leave the person asked for (`None`).
pub(super) fn force(signal: Option<&'static str>) -> ! {
    crate::os::restore_terminal();
    match signal {
        Some(name) => {
            eprintln!("\nspindle: ended by {name}");
            crate::process::die_of(name);
            std::process::exit(crate::process::signal_exit_code(name).into())
        }
        None => {
            eprintln!();
            std::process::exit(0)
        }
    }
}

/// After a first request: wakes the main thread's blocking read (when a
/// `waker` is given) until `noticed` is set, and ends the process with
/// [`force`] if it is still there after [`GRACE`]. Detached: the process
/// ends before it does, normally.
pub(super) fn watch(
    signal: Option<&'static str>,
    waker: Option<Arc<crate::process::Waker>>,
    noticed: Arc<AtomicBool>,
) {
    let started = std::thread::Builder::new()
        .name("spindle-ending".into())
        .spawn(move || {
            let deadline = Instant::now() + GRACE;
            while Instant::now() < deadline {
                if let Some(waker) = waker.as_deref().filter(|_| !noticed.load(Ordering::SeqCst)) {
                    waker.wake();
                }
                std::thread::sleep(WAKE_EVERY);
            }
            force(signal)
        });
    if started.is_err() {
        force(signal);
    }
}

/// Whether the request is an interrupt from the keyboard (Ctrl-C).
pub(super) fn is_interrupt(name: &str) -> bool {
    matches!(name, "SIGINT" | "Ctrl-C")
}

/// Asks the agent to cancel the running turn of `session`.
pub(super) fn cancel(to: &super::link::Sender, session: &str) {
    let cancel = serde_json::json!({"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": session}});
    super::link::send(to, &cancel);
}

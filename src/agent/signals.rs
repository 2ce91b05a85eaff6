//! Termination requests — SIGTERM, SIGINT and SIGHUP on Unix, Ctrl-C,
//! Ctrl-Break and the console's closing on Windows: how editors and users
//! stop their agents — end Spindle the way the end of stdin does: running
//! turns are cancelled (their commands' process trees killed), their
//! prompts answered, output flushed, and the process exits 0. How each
//! system delivers them is `process::on_termination`'s business.
//!
//! The handling depends on nothing else of the agent: when the orderly end
//! does not come within [`GRACE`] (a handler stuck, an editor that stopped
//! reading stdout), or a second request comes, it ends the process itself.
//! Every child dies with it (commands under the guard, MCP servers and
//! Spindle's own probes are tied to the agent's life).
//!
//! Why `acp` keeps `process::exit` here, when `exec` and `chat` end only
//! through their loop (`cli/ending.rs`): the orderly end already goes
//! through the dispatcher and `serve` returns as at the end of input, with
//! exit 0 (an editor that asked its agent to stop sees a clean end); the
//! exits below are only the fallback. A server on stdio whose parent went
//! away has nobody reading its output: the thread that should end it may
//! be blocked on a write forever, so no path through the owners can be
//! relied on, and waiting longer only leaves an orphan. The fallback
//! loses nothing the orderly end would keep: sessions are stored as they
//! go, and children die with the agent.

use super::dispatcher::Event;
use crossbeam_channel::Sender;
use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// How long the orderly end may take after a signal.
pub(super) const GRACE: std::time::Duration = std::time::Duration::from_secs(5);

/// Turns termination requests into `Event::Signal`; `stopped` is set when
/// one came. Call before starting any other thread of the agent.
pub(super) fn install(events: Sender<Event>, stopped: Arc<AtomicBool>) -> io::Result<()> {
    crate::process::on_termination(move |signal| {
        if stopped.swap(true, Ordering::SeqCst) {
            log::warn!("{signal} again: exiting now");
            std::process::exit(1);
        }
        log::info!("{signal}: stopping as at the end of input");
        // Detached: a deadline that ends the process if the orderly stop
        // hangs.
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
    })
}

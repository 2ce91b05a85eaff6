//! Standard output for every command that prints: one place where a
//! reader that went away (`spindle sessions list | head -1`) ends the
//! printing quietly. Rust ignores SIGPIPE, so such a write fails with
//! `BrokenPipe` instead of killing the process; `print!` would panic on
//! it. Here it is a success: what nobody reads is not written, and the
//! command ends as it would have, with nothing said on stderr.

use std::io::{ErrorKind, Write};
use std::sync::atomic::{AtomicBool, Ordering};

/// Set once a write found the reader gone: later output is dropped.
static CLOSED: AtomicBool = AtomicBool::new(false);

/// Writes `text` and flushes it. `Ok` when the reader went away (now or
/// before); any other failure is returned.
pub(super) fn print(text: &str) -> std::io::Result<()> {
    if CLOSED.load(Ordering::Relaxed) {
        return Ok(());
    }
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Err(error) if error.kind() == ErrorKind::BrokenPipe => {
            CLOSED.store(true, Ordering::Relaxed);
            Ok(())
        }
        ended => ended,
    }
}

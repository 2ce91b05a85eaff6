//! What differs between operating systems outside processes and the
//! sandbox: private files and folders, opening a file without following a
//! link or blocking on it, a file's link count and change stamp, local
//! time, the terminal's echo, raw mode and width. One implementation per
//! system family (`unix.rs`, `windows.rs`, whose private files get an
//! access list admitting the user alone in `windows/acl.rs`) with the same
//! functions, and the shapes they share (`shapes.rs`).
//!
//! Beside them, for every tier: `reading.rs` reads a file whose name came
//! from outside (the workspace, a setting, an environment variable) only
//! when it is a regular file, opened without blocking, within a cap, its
//! refusal in words ("… is a FIFO, not a regular file"); `folders.rs` is
//! where each system keeps the config and data folders; `paths.rs` is
//! canonical paths without Windows' `\\?\` and `file:` URIs, pure string
//! work tested in both styles; `testing.rs` the tests' words for links and
//! modes on every system.

#[cfg(unix)]
mod unix;
#[cfg(unix)]
use unix as sys;
#[cfg(windows)]
mod windows;
#[cfg(windows)]
use windows as sys;

pub use sys::{
    change_stamp, create_private_dir, create_private_dir_all, link_count, link_count_at,
    local_time, make_private, make_private_at, make_private_dir, open_private, open_read,
    owned_by_me, restore_terminal, terminal_width, EchoOff, RawMode,
};

pub(crate) mod folders;
pub mod paths;
pub use paths::canonical;
pub(crate) mod reading;
mod shapes;
pub use shapes::{LocalTime, Private};

use std::io;

/// The path an open file really has, links resolved, in the form
/// [`canonical`] gives (so the two compare).
pub fn real_path(file: &std::fs::File) -> Option<std::path::PathBuf> {
    let real = sys::real_path(file)?;
    match real.to_str() {
        Some(text) if paths::NATIVE == paths::Style::Windows => Some(paths::plain(text).into()),
        _ => Some(real),
    }
}

/// Whether `error` is an open refused because the path is a symbolic link
/// (the opens here never follow one at the file's own name).
pub fn is_link_refused(error: &io::Error) -> bool {
    sys::is_link_refused(error)
}

#[cfg(test)]
mod tests;
// The tests' words for links and modes on every system (also used by the
// integration tests, so not test-only; the linker drops it elsewhere).
#[doc(hidden)]
pub mod testing;

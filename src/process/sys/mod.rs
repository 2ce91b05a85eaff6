//! One implementation per system family of what `process/` needs from
//! the system: a [`Tree`] — every process a command starts, ended in one
//! call (a process group on Unix, a job object on Windows) — how a
//! command's exit reads, how a job's stdin takes writes without blocking,
//! and how the agent's own processes are tied to it.

#[cfg(unix)]
mod unix;
#[cfg(unix)]
pub(crate) use unix::*;
#[cfg(windows)]
mod windows;
#[cfg(windows)]
pub(crate) use windows::*;

//! How the launcher ends when it cannot run the command: the exit codes
//! the launcher and its PID-namespace init share.

use super::terms::Launch;
use std::ffi::OsStr;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::process::CommandExt;
use std::process::{Command, ExitCode};

/// The exit code when the sandbox cannot be applied: the command never
/// ran.
pub(super) const CANNOT_APPLY: u8 = 126;

/// Says why the sandbox cannot be applied; returns the exit code to give.
pub(super) fn report_cannot_apply(message: &str) -> ExitCode {
    eprintln!("spindle sandbox: cannot apply the sandbox, not running the command: {message}");
    ExitCode::from(CANNOT_APPLY)
}

/// [`CANNOT_APPLY`], for a process that ends with `_exit`.
#[cfg(target_os = "linux")]
pub(super) fn cannot_apply_code() -> libc::c_int {
    libc::c_int::from(CANNOT_APPLY)
}

/// Execs the program (execvp: the PATH lookup and the environment are
/// the caller's); returns only on failure, with the exit code to give.
pub(super) fn exec_code(launch: &Launch) -> u8 {
    let error = Command::new(&launch.program).args(&launch.args).exec();
    eprintln!(
        "spindle sandbox: cannot run {}: {error}",
        launch.program.to_string_lossy()
    );
    if missing(&launch.program, &error) {
        127
    } else {
        CANNOT_APPLY
    }
}

/// Whether the exec failed because there is no such program. execvp says
/// EACCES when some directory of PATH cannot be searched, even if the
/// program is nowhere; like a shell, call that "not found".
fn missing(program: &OsStr, error: &io::Error) -> bool {
    match error.kind() {
        io::ErrorKind::NotFound => true,
        io::ErrorKind::PermissionDenied if !program.as_bytes().contains(&b'/') => {
            let path = std::env::var_os("PATH").unwrap_or_default();
            !std::env::split_paths(&path).any(|dir| dir.join(program).exists())
        }
        _ => false,
    }
}

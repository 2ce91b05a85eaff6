//! What this test binary becomes when it is started again, before the test
//! harness runs (Linux: a constructor in `.init_array`, which the loader
//! calls before `main`; other systems come later, and until then keep the
//! `mcp::stdio_server_entry` test and have no stand-in for `spindle`):
//!
//! - with `SPINDLE_IT_MCP_SERVER` set, the tests' stdio MCP server
//!   (`support::mcp_server`), so that the server is no test libtest lists
//!   and counts, and libtest writes nothing on its stdout first;
//! - as `<this binary> sandbox …`, the real `spindle` binary. An agent runs
//!   its own executable again for the sandbox (its probe, its launcher),
//!   and for an agent of the in-process tier (`support::in_process`) that
//!   executable is this binary. The answer of the probe is cached for the
//!   process, so without the stand-in one in-process agent would leave
//!   "no sandbox" behind for every later test of the binary.

#[cfg(target_os = "linux")]
use std::ffi::{c_char, c_int, CStr};

/// The options of `spindle sandbox` that can follow the word `sandbox`
/// when an agent runs itself again. libtest has none of them, so
/// `<this binary> sandbox --probe` is never a test run (while
/// `<this binary> sandbox` alone, a filter, is).
#[cfg(target_os = "linux")]
const SANDBOX_OPTIONS: [&[u8]; 6] = [
    b"--probe",
    b"--write",
    b"--read-only",
    b"--hide",
    b"--network",
    b"--",
];

#[cfg(target_os = "linux")]
#[used]
#[link_section = ".init_array"]
static ENTRY: extern "C" fn(c_int, *const *const c_char, *const *const c_char) = entry;

/// glibc calls the functions of `.init_array` with `main`'s `argc`, `argv`
/// and `envp` (std's own argument capture relies on the same).
#[cfg(target_os = "linux")]
extern "C" fn entry(argc: c_int, argv: *const *const c_char, _envp: *const *const c_char) {
    if std::env::var_os(super::mcp_server::SERVER_ENV).is_some() {
        super::mcp_server::run_stdio_server();
    }
    if argv.is_null() {
        return;
    }
    let args: Vec<&[u8]> = (0..usize::try_from(argc).unwrap_or(0))
        // SAFETY: `argv` holds `argc` valid NUL-terminated strings, alive
        // for the whole process.
        .map(|at| unsafe { CStr::from_ptr(*argv.add(at)) }.to_bytes())
        .collect();
    if args.len() >= 3 && args[1] == b"sandbox" && SANDBOX_OPTIONS.contains(&args[2]) {
        become_spindle(&args[1..]);
    }
}

/// Replaces this process with `spindle ARGS` (same pid, same descriptors).
#[cfg(target_os = "linux")]
fn become_spindle(args: &[&[u8]]) -> ! {
    use std::ffi::OsStr;
    use std::os::unix::ffi::OsStrExt;
    use std::os::unix::process::CommandExt;
    let error = std::process::Command::new(env!("CARGO_BIN_EXE_spindle"))
        .args(args.iter().map(|arg| OsStr::from_bytes(arg)))
        .exec();
    eprintln!("cannot run spindle in place of the test binary: {error}");
    std::process::exit(127);
}

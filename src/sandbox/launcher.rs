//! The launcher proper: applies a profile to this fresh, single-threaded
//! process, layer by layer, then execs the program; and the probe, which
//! tries each layer in a throwaway child.
//!
//! The order matters. no_new_privs comes first (Landlock and seccomp need
//! it, and it stops set-uid programs from shedding the sandbox); the
//! namespaces next, while mounting is still allowed. In a PID namespace
//! the launcher then forks: it stays outside and waits, and its child, the
//! namespace's first process, mounts its own `/proc` and runs the program
//! as a child of its own (see [`init`]). Then Landlock, which from then on
//! also forbids any change to the mounts; seccomp, on every command; the
//! capabilities dropped, every one; descriptors beyond stdin, stdout and
//! stderr closed at the exec.

use std::fs::File;
use std::io::{self, Read, Write};
use std::os::fd::{FromRawFd, OwnedFd};
use std::path::PathBuf;
use std::process::ExitCode;

use super::capabilities;
use super::exit::{exec_code, report_cannot_apply};
use super::init;
use super::landlock::{self, Rules};
use super::namespaces::{self, Entered, Failure};
use super::seccomp;
use super::terms::{Launch, ProbeReport, Profile};

/// Applies `launch.profile` and execs the program; returns only on
/// failure (or, in a PID namespace, with the program's status).
pub(super) fn run(launch: Launch) -> ExitCode {
    let prepared = match prepare(&launch.profile, launch.namespaces) {
        Ok(prepared) => prepared,
        Err(message) => return report_cannot_apply(&message),
    };
    if prepared.entered.pid_namespace {
        return init::start(|| confine(&launch.profile, &prepared), &launch);
    }
    if let Err(message) = confine(&launch.profile, &prepared) {
        return report_cannot_apply(&message);
    }
    ExitCode::from(exec_code(&launch))
}

/// What is done before the program's process is confined.
struct Prepared {
    abi: u32,
    writable: Vec<PathBuf>,
    /// Read-only paths no mount protects, for Landlock to carve out.
    carve_out: Vec<PathBuf>,
    entered: Entered,
}

/// no_new_privs and the namespaces (with their mounts).
fn prepare(profile: &Profile, use_namespaces: bool) -> Result<Prepared, String> {
    single_threaded()?;
    no_new_privs()?;
    let abi = landlock::abi()?;
    let mut writable = Vec::new();
    for dir in &profile.writable {
        let canonical = std::fs::canonicalize(dir)
            .map_err(|error| format!("cannot use {} as writable: {error}", dir.display()))?;
        writable.push(canonical);
    }
    // Only read-only paths inside a writable directory need anything: the
    // rest are read-only already.
    let read_only: Vec<PathBuf> = profile
        .read_only
        .iter()
        .filter_map(|path| std::fs::canonicalize(path).ok())
        .filter(|path| writable.iter().any(|dir| path.starts_with(dir)))
        .collect();

    let mut entered = Entered::default();
    if use_namespaces {
        let hidden: Vec<PathBuf> = profile
            .hidden
            .iter()
            .filter_map(|path| std::fs::canonicalize(path).ok())
            .collect();
        match namespaces::enter(!profile.network, &read_only, &hidden) {
            Ok(done) => entered = done,
            Err(Failure::Unusable(reason)) => log::debug!("sandbox without namespaces: {reason}"),
            Err(Failure::Broken(reason)) => return Err(reason),
        }
        if let Some(error) = &entered.mount_error {
            log::debug!("sandbox: read-only paths carved out by Landlock instead: {error}");
        }
    }
    let carve_out = if entered.mounted_read_only {
        Vec::new()
    } else {
        read_only
    };
    Ok(Prepared {
        abi,
        writable,
        carve_out,
        entered,
    })
}

/// Landlock, seccomp, no capabilities, no inherited descriptors but the
/// standard three: what the program's process gets last, in this order.
fn confine(profile: &Profile, prepared: &Prepared) -> Result<(), String> {
    landlock::restrict(
        prepared.abi,
        &Rules {
            writable: &prepared.writable,
            carve_out: &prepared.carve_out,
            network: profile.network,
        },
    )?;
    seccomp::install(profile.network)?;
    capabilities::drop_all()?;
    close_inherited()
}

/// Marks every descriptor past stderr close-on-exec: one inherited from
/// whoever started the launcher (a socket to a server outside, an open
/// file the sandbox would refuse) does not reach the program.
fn close_inherited() -> Result<(), String> {
    // SAFETY: close_range takes plain integers; with CLOSE_RANGE_CLOEXEC
    // it closes nothing, it only sets the flag.
    let result = unsafe {
        libc::syscall(
            libc::SYS_close_range,
            3 as libc::c_uint,
            libc::c_uint::MAX,
            libc::CLOSE_RANGE_CLOEXEC,
        )
    };
    if result == 0 {
        return Ok(());
    }
    // Kernels before 5.11: each open descriptor, as /proc lists them.
    let entries = std::fs::read_dir("/proc/self/fd")
        .map_err(|error| format!("cannot list the open descriptors: {error}"))?;
    let fds: Vec<libc::c_int> = entries
        .flatten()
        .filter_map(|entry| entry.file_name().to_str()?.parse().ok())
        .filter(|fd| *fd > 2)
        .collect();
    for fd in fds {
        // SAFETY: fcntl on a descriptor number; one that closed meanwhile
        // (the listing's own) fails with EBADF, which is fine.
        let result = unsafe { libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC) };
        if result != 0 && io::Error::last_os_error().raw_os_error() != Some(libc::EBADF) {
            return Err(format!(
                "cannot close descriptor {fd}: {}",
                io::Error::last_os_error()
            ));
        }
    }
    Ok(())
}

/// Landlock and seccomp bind only the calling thread, and a user namespace
/// needs a single-threaded process: make sure nothing started a thread.
fn single_threaded() -> Result<(), String> {
    // Without /proc there is nothing to count; the namespaces would then
    // fail on their own.
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return Ok(());
    };
    let threads = tasks.count();
    if threads > 1 {
        return Err(format!(
            "the launcher must run before any thread starts, and {threads} threads are running"
        ));
    }
    Ok(())
}

fn no_new_privs() -> Result<(), String> {
    // SAFETY: PR_SET_NO_NEW_PRIVS takes plain integers.
    let result = unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1 as libc::c_ulong, 0, 0, 0) };
    if result != 0 {
        return Err(format!(
            "cannot set no_new_privs: {}",
            io::Error::last_os_error()
        ));
    }
    Ok(())
}

/// Tries each layer for real, each in its own child so that nothing sticks
/// to this process.
pub(super) fn probe() -> ProbeReport {
    let mut report = ProbeReport::default();
    if let Err(error) = single_threaded() {
        report.landlock_error = Some(error);
        return report;
    }
    let temp = std::env::temp_dir();
    let dir = if temp.is_dir() {
        temp
    } else {
        PathBuf::from("/")
    };
    let dir = std::fs::canonicalize(&dir).unwrap_or(dir);

    let landlock = landlock::abi().and_then(|abi| {
        in_child(|| {
            no_new_privs()?;
            let rules = Rules {
                writable: std::slice::from_ref(&dir),
                carve_out: &[],
                network: false,
            };
            landlock::restrict(abi, &rules)
        })
        .map(|()| abi)
    });
    match landlock {
        Ok(abi) => report.landlock = Some(abi),
        Err(error) => report.landlock_error = Some(error),
    }
    let namespaces = in_child(|| match namespaces::probe(&dir)? {
        true => Ok(()),
        false => Err(NO_PID_NAMESPACE.into()),
    });
    match namespaces {
        Ok(()) => {
            report.namespaces = true;
            report.pid_namespace = true;
        }
        Err(error) if error == NO_PID_NAMESPACE => report.namespaces = true,
        Err(error) => report.namespaces_error = Some(error),
    }
    let seccomp = in_child(|| {
        no_new_privs()?;
        seccomp::install(false)?;
        seccomp::check_filter()?;
        capabilities::drop_all()
    });
    match seccomp {
        Ok(()) => report.seccomp = true,
        Err(error) => report.seccomp_error = Some(error),
    }
    report
}

/// What the namespaces probe says when all but the PID namespace (with a
/// `/proc` of its own) work.
const NO_PID_NAMESPACE: &str = "no PID namespace with its own /proc";

/// Runs `work` in a forked child and returns its result; the error text
/// comes back through a pipe.
fn in_child(work: impl FnOnce() -> Result<(), String>) -> Result<(), String> {
    let mut fds = [0; 2];
    // SAFETY: `fds` has room for the two descriptors pipe2 writes.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(format!("pipe: {}", io::Error::last_os_error()));
    }
    // SAFETY: pipe2 just opened both descriptors, owned by nothing else.
    let (reader, writer) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    // SAFETY: the probe runs single-threaded (checked first), so the child
    // may run ordinary code: no lock is held by a thread that vanished.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Err(format!("fork: {}", io::Error::last_os_error()));
    }
    if pid == 0 {
        drop(reader);
        // A panic must not unwind out of the child into the parent's code.
        let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(work))
            .unwrap_or_else(|_| Err("the probe panicked".into()));
        let code = match outcome {
            Ok(()) => 0,
            Err(message) => {
                let _ = File::from(writer).write_all(message.as_bytes());
                1
            }
        };
        // SAFETY: _exit ends the child at once, without running exit
        // handlers or flushing stdio buffers copied from the parent.
        unsafe { libc::_exit(code) };
    }
    drop(writer);
    let mut message = Vec::new();
    let _ = File::from(reader).read_to_end(&mut message);
    let status = super::init::wait(pid).map_err(|error| format!("waitpid: {error}"))?;
    if libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0 {
        return Ok(());
    }
    let message = String::from_utf8_lossy(&message).into_owned();
    if message.is_empty() {
        Err(format!("the probe child ended with status {status}"))
    } else {
        Err(message)
    }
}

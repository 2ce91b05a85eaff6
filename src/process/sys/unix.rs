//! Unix: a command leads its own process group, which one signal ends;
//! under `spindle guard`, the guard first takes down every process below
//! it, those that left the group too.

use std::io::{self, Write};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::{Child, ChildStdin, Command, ExitStatus};
use std::time::{Duration, Instant};

/// The signal with which the agent asks a guard (`spindle guard`, the
/// leader of a guarded tree) to take its whole tree down now.
pub(crate) const END_SIGNAL: libc::c_int = libc::SIGUSR1;

/// The longest the agent waits for a guard to take its tree down before
/// it kills the group itself (a guard that was stopped, or hangs). A
/// sweep takes milliseconds.
const GUARD_WAIT: Duration = Duration::from_secs(2);

/// Every process of a command: the process group it leads.
#[derive(Debug)]
pub(crate) struct Tree {
    pgid: u32,
    /// The leader is `spindle guard`, which takes down every process
    /// below it, those that left the group too, when asked.
    guarded: bool,
}

impl Tree {
    /// Makes `command` lead a group of its own once spawned.
    pub(crate) fn prepare(command: &mut Command) {
        command.process_group(0);
    }

    /// The tree of a child spawned after [`Tree::prepare`]; `guarded` when
    /// the child is `spindle guard` (the guard's `wraps` says).
    pub(crate) fn of(child: &Child, guarded: bool) -> io::Result<Tree> {
        Ok(Tree {
            pgid: child.id(),
            guarded,
        })
    }

    /// The leader's process id.
    pub(crate) fn leader(&self) -> u32 {
        self.pgid
    }

    /// Ends every process of the tree (SIGKILL). A guard still running is
    /// asked first to end every process below it, those that left the
    /// group included (a group kill would end the guard before it could),
    /// and waited for a moment; then the whole group is killed.
    pub(crate) fn kill(&self) {
        if self.guarded {
            end_through_guard(self.pgid);
        }
        signal_group(self.pgid, libc::SIGKILL);
    }

    /// Asks every process of the tree to end (SIGTERM).
    pub(crate) fn terminate(&self) {
        signal_group(self.pgid, libc::SIGTERM);
    }
}

/// Sends `signal` to every process in the group `pgid`.
///
/// Ids 0 and 1 are refused: `kill(0, …)` would hit Spindle's own group and
/// `kill(-1, …)` every process the user owns.
fn signal_group(pgid: u32, signal: libc::c_int) {
    let Ok(pgid) = i32::try_from(pgid) else {
        return;
    };
    if pgid <= 1 {
        return;
    }
    // SAFETY: kill(2) takes two plain integers, touches no memory of ours
    // and reports failure (such as an empty group) only through its result.
    let result = unsafe { libc::kill(-pgid, signal) };
    if result != 0 {
        log::debug!(
            "signal {signal} to process group {pgid}: {}",
            io::Error::last_os_error()
        );
    }
}

/// Asks the guard `pid`, a child of the agent, to take down its whole
/// tree ([`END_SIGNAL`]), and waits until it has
/// exited, at most [`GUARD_WAIT`]. Nothing is sent to a guard that has
/// exited already: once reaped, its id could name another process.
fn end_through_guard(pid: u32) {
    let Ok(pid) = libc::pid_t::try_from(pid) else {
        return;
    };
    if pid <= 1 || !running_child(pid) {
        return;
    }
    // SAFETY: kill(2) of the agent's own child, which has not exited
    // (so its id is still its own).
    unsafe { libc::kill(pid, END_SIGNAL) };
    let deadline = Instant::now() + GUARD_WAIT;
    while running_child(pid) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(1));
    }
    if running_child(pid) {
        log::warn!("the guard {pid} did not end its command in time; its group is killed");
    }
}

/// Whether the child `pid` of this process is still running: not exited
/// (reaped or not), without reaping it (whoever waits for it still
/// will). Linux: `waitid` with `WNOWAIT`.
#[cfg(not(target_os = "macos"))]
fn running_child(pid: libc::pid_t) -> bool {
    // SAFETY: zeroed is a valid siginfo_t (integers and unions of them).
    let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
    let Ok(id) = libc::id_t::try_from(pid) else {
        return false;
    };
    // SAFETY: waitid(2) fills the local `info`; WNOWAIT leaves the child
    // waitable, WNOHANG returns at once.
    let waited = unsafe {
        libc::waitid(
            libc::P_PID,
            id,
            &mut info,
            libc::WEXITED | libc::WNOHANG | libc::WNOWAIT,
        )
    };
    // Nothing to report: it runs. ECHILD: reaped already.
    // SAFETY: `info` was filled (or left zeroed) by waitid.
    waited == 0 && unsafe { info.si_pid() } == 0
}

/// macOS, whose `waitid` with `WNOWAIT` is not to be relied on: the
/// process's status in the system's table (a zombie has exited; an
/// unknown pid has been reaped).
#[cfg(target_os = "macos")]
fn running_child(pid: libc::pid_t) -> bool {
    // SAFETY: zeroed is a valid proc_bsdinfo (integers and byte arrays).
    let mut info: libc::proc_bsdinfo = unsafe { std::mem::zeroed() };
    let size = std::mem::size_of::<libc::proc_bsdinfo>() as libc::c_int;
    // SAFETY: proc_pidinfo(3) writes at most `size` bytes into the local.
    let got = unsafe {
        libc::proc_pidinfo(
            pid,
            libc::PROC_PIDTBSDINFO,
            0,
            std::ptr::addr_of_mut!(info).cast(),
            size,
        )
    };
    got == size && info.pbi_status != libc::SZOMB
}

/// Whether a process with id `pid` exists on this machine: `kill(pid, 0)`
/// delivers nothing and only checks, and a process of another user
/// (`EPERM`) exists too. A zombie counts until it is reaped, as
/// `/proc/PID` does on Linux.
pub(crate) fn alive(pid: i64) -> bool {
    let Ok(pid) = libc::pid_t::try_from(pid) else {
        return false;
    };
    if pid <= 0 {
        return false;
    }
    // SAFETY: kill(2) with signal 0 sends nothing; it takes two plain
    // integers and reports only through its result and errno.
    if unsafe { libc::kill(pid, 0) } == 0 {
        return true;
    }
    io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
}

/// The signal that ended a process, if one did.
pub(crate) fn exit_signal(status: &ExitStatus) -> Option<i32> {
    status.signal()
}

/// A child's stdin that takes writes without ever blocking the writer:
/// what a full pipe cannot take is refused (`WouldBlock`).
pub(crate) struct Input(ChildStdin);

impl Input {
    pub(crate) fn new(stdin: ChildStdin) -> Input {
        use std::os::fd::AsRawFd;
        let fd = stdin.as_raw_fd();
        // SAFETY: fcntl(2) on a descriptor we own, with integer arguments
        // only.
        unsafe {
            let flags = libc::fcntl(fd, libc::F_GETFL);
            if flags >= 0 {
                libc::fcntl(fd, libc::F_SETFL, flags | libc::O_NONBLOCK);
            }
        }
        Input(stdin)
    }
}

impl Write for Input {
    /// Writes what the pipe takes now; `WouldBlock` when it takes nothing.
    fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
        self.0.write(bytes)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.0.flush()
    }
}

/// Nothing to do at start on Unix: the guard and the parent-death signal
/// tie each command to the agent.
pub(crate) fn tie_to_agent() -> io::Result<()> {
    Ok(())
}

/// The termination signals editors and users stop an agent with.
const TERMINATION: [(libc::c_int, &str); 3] = [
    (libc::SIGTERM, "SIGTERM"),
    (libc::SIGINT, "SIGINT"),
    (libc::SIGHUP, "SIGHUP"),
];

fn termination_set() -> io::Result<libc::sigset_t> {
    let mut set = std::mem::MaybeUninit::<libc::sigset_t>::uninit();
    // SAFETY: sigemptyset initialises the set it is given; sigaddset then
    // only writes into that initialised set.
    unsafe {
        if libc::sigemptyset(set.as_mut_ptr()) != 0 {
            return Err(io::Error::last_os_error());
        }
        for (signal, _) in TERMINATION {
            if libc::sigaddset(set.as_mut_ptr(), signal) != 0 {
                return Err(io::Error::last_os_error());
            }
        }
        Ok(set.assume_init())
    }
}

/// Calls `handler` with the signal's name, on the `spindle-signals`
/// thread, for each SIGTERM, SIGINT or SIGHUP. The signals are blocked in
/// the calling thread, so call this before any other thread exists: every
/// thread inherits the mask and only `spindle-signals` receives them, with
/// `sigwait`. Child processes start with an empty mask (std resets it), so
/// commands still die of them.
pub(crate) fn on_termination(handler: impl Fn(&'static str) + Send + 'static) -> io::Result<()> {
    let set = termination_set()?;
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
            let name = TERMINATION
                .iter()
                .find(|(number, _)| *number == signal)
                .map_or("a signal", |(_, name)| name);
            handler(name);
        })?;
    Ok(())
}

/// The exit code a shell shows for a death by the termination signal
/// `name` (128 + its number); 1 for a name that is none of them.
pub(crate) fn signal_exit_code(name: &str) -> u8 {
    TERMINATION
        .iter()
        .find(|(_, known)| *known == name)
        .map_or(1, |(number, _)| 128 + *number as u8)
}

/// Ends the process by the termination signal `name`, with the system's
/// default action, so that whoever started it (a shell, a script) sees a
/// death by that signal, as the convention for programs that catch one
/// asks. Returns only when that could not be done.
pub(crate) fn die_of(name: &str) {
    let Some(&(signal, _)) = TERMINATION.iter().find(|(_, known)| *known == name) else {
        return;
    };
    let mut set = std::mem::MaybeUninit::<libc::sigset_t>::uninit();
    // SAFETY: the default action is restored for one signal; the set is
    // initialised by sigemptyset before sigaddset and pthread_sigmask
    // read it; raise sends the signal to this very thread, where it is no
    // longer blocked.
    unsafe {
        libc::signal(signal, libc::SIG_DFL);
        if libc::sigemptyset(set.as_mut_ptr()) != 0
            || libc::sigaddset(set.as_mut_ptr(), signal) != 0
        {
            return;
        }
        libc::pthread_sigmask(libc::SIG_UNBLOCK, set.as_ptr(), std::ptr::null_mut());
        libc::raise(signal);
    }
}

/// The signal that interrupts a thread's blocking read for [`Waker`].
const WAKE_SIGNAL: libc::c_int = libc::SIGUSR2;

extern "C" fn woken(_: libc::c_int) {}

/// Interrupts a blocking read of the thread that made it: the read fails
/// with `ErrorKind::Interrupted` (the signal's handler does nothing and
/// asks for no restart). A front-end's loop blocked on standard input
/// uses it to notice a termination request.
pub(crate) struct Waker(libc::pthread_t);

// SAFETY: a thread's id may be used from any thread (pthread_kill).
unsafe impl Send for Waker {}
unsafe impl Sync for Waker {}

impl Waker {
    /// For the calling thread, which must live as long as the process (the
    /// main thread): waking a thread that ended is undefined.
    pub(crate) fn for_this_thread() -> io::Result<Waker> {
        // SAFETY: a zeroed sigaction is valid; it is filled with a handler
        // that does nothing (async-signal-safe) and an empty mask.
        unsafe {
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = woken as extern "C" fn(libc::c_int) as libc::sighandler_t;
            action.sa_flags = 0;
            libc::sigemptyset(&mut action.sa_mask);
            if libc::sigaction(WAKE_SIGNAL, &action, std::ptr::null_mut()) != 0 {
                return Err(io::Error::last_os_error());
            }
            Ok(Waker(libc::pthread_self()))
        }
    }

    pub(crate) fn wake(&self) {
        // SAFETY: the thread is the process's main thread (see
        // `for_this_thread`), alive while the process is.
        unsafe {
            libc::pthread_kill(self.0, WAKE_SIGNAL);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_process_is_alive_until_it_is_reaped() {
        assert!(alive(i64::from(std::process::id())));
        // PID 1 always runs; for a user other than root it is another
        // user's process (EPERM), alive all the same.
        assert!(alive(1));
        for pid in [0, -1, i64::from(i32::MAX) + 1, i64::MAX] {
            assert!(!alive(pid), "{pid}");
        }
        let mut child = Command::new("sleep").arg("30").spawn().expect("sleep");
        let pid = i64::from(child.id());
        assert!(alive(pid));
        child.kill().expect("kill");
        child.wait().expect("wait");
        assert!(!alive(pid));
    }

    #[test]
    fn refuses_group_ids_that_mean_more_than_one_group() {
        // Signalling "group" 0 or 1 would hit this test process or every
        // process of the user; surviving the calls is the assertion.
        for signal in [libc::SIGTERM, libc::SIGKILL] {
            signal_group(0, signal);
            signal_group(1, signal);
            signal_group(u32::MAX, signal);
        }
        for pgid in [0, 1, u32::MAX] {
            for guarded in [false, true] {
                Tree { pgid, guarded }.kill();
                Tree { pgid, guarded }.terminate();
            }
        }
    }
}

//! Windows: a command runs in a job object of its own, which one call
//! ends (`TerminateJobObject`) and which ends everything in it when its
//! last handle closes; the agent itself runs in such a job, so every
//! process it starts dies with it, however it dies. A command starts
//! suspended and is put in its job before its first instruction, so no
//! process it starts can escape the job.

use std::io::{self, Write};
use std::os::windows::io::AsRawHandle;
use std::os::windows::process::CommandExt;
use std::process::{Child, ChildStdin, Command, ExitStatus};
use windows_sys::Win32::Foundation::{CloseHandle, HANDLE, INVALID_HANDLE_VALUE};
use windows_sys::Win32::System::Diagnostics::ToolHelp::{
    CreateToolhelp32Snapshot, Thread32First, Thread32Next, TH32CS_SNAPTHREAD, THREADENTRY32,
};
use windows_sys::Win32::System::JobObjects::{
    AssignProcessToJobObject, CreateJobObjectW, JobObjectExtendedLimitInformation,
    SetInformationJobObject, TerminateJobObject, JOBOBJECT_EXTENDED_LIMIT_INFORMATION,
    JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE,
};
use windows_sys::Win32::System::Threading::{
    GetCurrentProcess, OpenThread, ResumeThread, CREATE_NEW_PROCESS_GROUP, CREATE_NO_WINDOW,
    CREATE_SUSPENDED, THREAD_SUSPEND_RESUME,
};

/// The exit code of a process ended through its job.
const KILLED: u32 = 1;

/// A handle this module owns and closes.
#[derive(Debug)]
struct Owned(HANDLE);

impl Drop for Owned {
    fn drop(&mut self) {
        // SAFETY: the handle was opened here and is closed once.
        unsafe { CloseHandle(self.0) };
    }
}

/// A job object that ends every process in it when its last handle
/// closes.
fn new_job() -> io::Result<Owned> {
    // SAFETY: default security and no name; the returned handle is
    // checked and owned. The limit structure is ours and fully set.
    unsafe {
        let job = CreateJobObjectW(std::ptr::null(), std::ptr::null());
        if job == 0 {
            return Err(io::Error::last_os_error());
        }
        let job = Owned(job);
        let mut limits: JOBOBJECT_EXTENDED_LIMIT_INFORMATION = std::mem::zeroed();
        limits.BasicLimitInformation.LimitFlags = JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE;
        let done = SetInformationJobObject(
            job.0,
            JobObjectExtendedLimitInformation,
            std::ptr::addr_of!(limits).cast(),
            std::mem::size_of::<JOBOBJECT_EXTENDED_LIMIT_INFORMATION>() as u32,
        );
        if done == 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(job)
    }
}

/// Every process of a command: the job object it runs in.
#[derive(Debug)]
pub(crate) struct Tree {
    leader: u32,
    job: Owned,
}

impl Tree {
    /// Makes `command` start suspended (to be put in its job first), in a
    /// console group of its own (Ctrl-C in the agent's console does not
    /// reach it) and without a console window of its own.
    pub(crate) fn prepare(command: &mut Command) {
        command.creation_flags(CREATE_SUSPENDED | CREATE_NEW_PROCESS_GROUP | CREATE_NO_WINDOW);
    }

    /// Puts a child spawned after [`Tree::prepare`] in a new job and lets
    /// it run; on failure the child is killed and the error returned.
    /// There is no guard here (`_guarded` is always false): the job holds
    /// every process the child starts, and ending it ends them all.
    pub(crate) fn of(child: &Child, _guarded: bool) -> io::Result<Tree> {
        let placed = new_job().and_then(|job| {
            // SAFETY: both handles are live: the job's, and the child's
            // for as long as `child` is.
            if unsafe { AssignProcessToJobObject(job.0, child.as_raw_handle() as HANDLE) } == 0 {
                return Err(io::Error::last_os_error());
            }
            resume(child.id())?;
            Ok(job)
        });
        match placed {
            Ok(job) => Ok(Tree {
                leader: child.id(),
                job,
            }),
            Err(error) => {
                // SAFETY: the child's own handle; it has not run yet.
                unsafe {
                    windows_sys::Win32::System::Threading::TerminateProcess(
                        child.as_raw_handle() as HANDLE,
                        KILLED,
                    )
                };
                Err(error)
            }
        }
    }

    /// The leader's process id.
    pub(crate) fn leader(&self) -> u32 {
        self.leader
    }

    /// Ends every process of the tree at once.
    pub(crate) fn kill(&self) {
        // SAFETY: the job's handle is live while `self` is.
        if unsafe { TerminateJobObject(self.job.0, KILLED) } == 0 {
            log::debug!(
                "ending the job of process {}: {}",
                self.leader,
                io::Error::last_os_error()
            );
        }
    }

    /// Windows has no polite signal for a job: the tree is ended.
    pub(crate) fn terminate(&self) {
        self.kill();
    }
}

/// Resumes the threads of the suspended process `pid` (it has one, its
/// first).
fn resume(pid: u32) -> io::Result<()> {
    // SAFETY: the snapshot handle is checked and owned; the entry is ours
    // with its size set as the API asks; each thread handle is checked,
    // used once and closed.
    unsafe {
        let snapshot = CreateToolhelp32Snapshot(TH32CS_SNAPTHREAD, 0);
        if snapshot == INVALID_HANDLE_VALUE {
            return Err(io::Error::last_os_error());
        }
        let snapshot = Owned(snapshot);
        let mut entry: THREADENTRY32 = std::mem::zeroed();
        entry.dwSize = std::mem::size_of::<THREADENTRY32>() as u32;
        let mut resumed = false;
        let mut more = Thread32First(snapshot.0, &mut entry) != 0;
        while more {
            if entry.th32OwnerProcessID == pid {
                let thread = OpenThread(THREAD_SUSPEND_RESUME, 0, entry.th32ThreadID);
                if thread != 0 {
                    let thread = Owned(thread);
                    resumed |= ResumeThread(thread.0) != u32::MAX;
                }
            }
            more = Thread32Next(snapshot.0, &mut entry) != 0;
        }
        if resumed {
            Ok(())
        } else {
            Err(io::Error::other(format!(
                "cannot start process {pid}'s first thread"
            )))
        }
    }
}

/// Whether a process with id `pid` exists and has not ended on this
/// machine: a handle to it opens and its exit code is still "active" (a
/// process that exited with that very code reads as alive; its id is then
/// soon reused or gone). A process the user may not open at all (another
/// user's, access denied) exists too.
pub(crate) fn alive(pid: i64) -> bool {
    use windows_sys::Win32::Foundation::{ERROR_ACCESS_DENIED, STILL_ACTIVE};
    use windows_sys::Win32::System::Threading::{
        GetExitCodeProcess, OpenProcess, PROCESS_QUERY_LIMITED_INFORMATION,
    };
    let Ok(pid) = u32::try_from(pid) else {
        return false;
    };
    if pid == 0 {
        return false;
    }
    // SAFETY: OpenProcess takes plain integers; the handle it returns is
    // checked and owned (closed on drop); GetExitCodeProcess writes only
    // into the local `code`.
    unsafe {
        let process = OpenProcess(PROCESS_QUERY_LIMITED_INFORMATION, 0, pid);
        if process == 0 {
            return io::Error::last_os_error().raw_os_error() == Some(ERROR_ACCESS_DENIED as i32);
        }
        let process = Owned(process);
        let mut code = 0u32;
        if GetExitCodeProcess(process.0, &mut code) == 0 {
            return true;
        }
        code == STILL_ACTIVE as u32
    }
}

/// A process on Windows ends with a code, never a signal.
pub(crate) fn exit_signal(_status: &ExitStatus) -> Option<i32> {
    None
}

/// The most bytes queued for a job's stdin before writes are refused.
const INPUT_QUEUE: usize = 16;

/// A child's stdin that takes writes without ever blocking the writer:
/// Windows' anonymous pipes cannot be non-blocking, so a helper thread
/// writes and a bounded queue refuses (`WouldBlock`) what it cannot hold.
pub(crate) struct Input(crossbeam_channel::Sender<Vec<u8>>);

impl Input {
    pub(crate) fn new(mut stdin: ChildStdin) -> Input {
        let (sender, chunks) = crossbeam_channel::bounded::<Vec<u8>>(INPUT_QUEUE);
        // Detached: it ends when the queue closes (the job's input is
        // dropped) or the pipe breaks (the job ended).
        let spawned = std::thread::Builder::new()
            .name("spindle-job-input".into())
            .spawn(move || {
                for chunk in chunks {
                    if stdin.write_all(&chunk).is_err() {
                        break;
                    }
                }
            });
        if let Err(error) = spawned {
            log::warn!("cannot start a job's input thread: {error}");
        }
        Input(sender)
    }
}

impl Write for Input {
    fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
        match self.0.try_send(bytes.to_vec()) {
            Ok(()) => Ok(bytes.len()),
            Err(crossbeam_channel::TrySendError::Full(_)) => {
                Err(io::Error::from(io::ErrorKind::WouldBlock))
            }
            Err(crossbeam_channel::TrySendError::Disconnected(_)) => {
                Err(io::Error::from(io::ErrorKind::BrokenPipe))
            }
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// Puts the agent in a job that ends everything in it when the agent
/// ends, however it ends (the system closes the job's last handle, which
/// this process holds for its whole life). Commands' own jobs nest inside.
pub(crate) fn tie_to_agent() -> io::Result<()> {
    let job = new_job()?;
    // SAFETY: the job's handle and this process's pseudo-handle are live.
    if unsafe { AssignProcessToJobObject(job.0, GetCurrentProcess()) } == 0 {
        return Err(io::Error::last_os_error());
    }
    // Held for the life of the process: closing it would end the agent.
    std::mem::forget(job);
    Ok(())
}

/// What [`on_termination`] calls: the console handler sees only statics.
// Global: set once, read by the system's console control handler.
static ON_TERMINATION: std::sync::OnceLock<Box<dyn Fn(&'static str) + Send + Sync>> =
    std::sync::OnceLock::new();

/// How long the handler holds a closing console open for the orderly
/// stop (the system ends the process soon after anyway).
const CLOSE_GRACE: std::time::Duration = std::time::Duration::from_secs(4);

unsafe extern "system" fn console_event(kind: u32) -> i32 {
    use windows_sys::Win32::System::Console::{
        CTRL_BREAK_EVENT, CTRL_CLOSE_EVENT, CTRL_C_EVENT, CTRL_LOGOFF_EVENT, CTRL_SHUTDOWN_EVENT,
    };
    let name = match kind {
        CTRL_C_EVENT => "Ctrl-C",
        CTRL_BREAK_EVENT => "Ctrl-Break",
        CTRL_CLOSE_EVENT => "the console closing",
        CTRL_LOGOFF_EVENT | CTRL_SHUTDOWN_EVENT => "the session ending",
        _ => return 0,
    };
    if let Some(handler) = ON_TERMINATION.get() {
        handler(name);
    }
    if matches!(
        kind,
        CTRL_CLOSE_EVENT | CTRL_LOGOFF_EVENT | CTRL_SHUTDOWN_EVENT
    ) {
        // Returning lets the system end the process at once: the orderly
        // stop gets a moment first.
        std::thread::sleep(CLOSE_GRACE);
    }
    1
}

/// Calls `handler` with the event's name for each Ctrl-C, Ctrl-Break or
/// closing of the console (on the thread the system starts for it).
pub(crate) fn on_termination(handler: impl Fn(&'static str) + Send + 'static) -> io::Result<()> {
    let handler = std::sync::Mutex::new(handler);
    let shared: Box<dyn Fn(&'static str) + Send + Sync> = Box::new(move |name| {
        if let Ok(handler) = handler.lock() {
            handler(name);
        }
    });
    if ON_TERMINATION.set(shared).is_err() {
        return Err(io::Error::other("termination is already handled"));
    }
    // SAFETY: the handler is a plain function that reads a static.
    if unsafe { windows_sys::Win32::System::Console::SetConsoleCtrlHandler(Some(console_event), 1) }
        == 0
    {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// The exit code for an end by a console event: 130, as for Ctrl-C.
pub(crate) fn signal_exit_code(_name: &str) -> u8 {
    130
}

/// Windows has no death by a signal to pass on: the caller exits with
/// [`signal_exit_code`].
pub(crate) fn die_of(_name: &str) {}

/// No blocking read is interrupted on Windows: the front-end's deadline
/// ends the process instead.
pub(crate) struct Waker;

impl Waker {
    pub(crate) fn for_this_thread() -> io::Result<Waker> {
        Ok(Waker)
    }

    pub(crate) fn wake(&self) {}
}

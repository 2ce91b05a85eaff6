//! How Spindle starts and ends processes. This file runs one shell command
//! for `run_command` when the agent runs it itself rather than in the
//! editor's terminal, and holds the spawner whose children die with the
//! agent (Linux). A model-driven command must never hang or outlive its
//! turn: it runs in its own tree (`sys/`: a process group on Unix, a job
//! object on Windows) so a timeout, a cancel, a panic or jobs left behind
//! end with one call; its output is kept bounded for the model (first and
//! last parts), logged in full (`logs.rs`) and streamed at a throttled pace.
//! Two detached helpers, `spindle-cmd-output` (the pipe) and
//! `spindle-cmd-wait` (the shell's exit), let the caller wait on output,
//! exit, cancel and deadline in one `select!`; both end once the tree is
//! killed. A process that leaves the group (`setsid`) is out of this reach;
//! the guard (`guard.rs`) still takes it down with the agent.
//!
//! `sys/` differs per system; `shell.rs` names a line's shell, `program.rs`
//! finds a bare program, `probe.rs` runs Spindle's own short programs. Only
//! `os` and `util` are named here (the sandbox hands it its launcher line).

pub(crate) mod guard;
pub(crate) mod logs;
pub(crate) mod probe;
pub(crate) mod program;
pub(crate) mod shell;
mod sys;

pub(crate) use sys::{
    alive, die_of, exit_signal, on_termination, signal_exit_code, Input, Tree, Waker,
};

use crossbeam_channel::{after, bounded, never, select, Receiver, Sender};
use std::ffi::OsString;
use std::fs::File;
use std::io::{self, PipeReader, PipeWriter, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::thread;
use std::time::{Duration, Instant};

/// What to run and how to keep its output.
#[derive(Debug, Clone)]
pub(crate) struct CommandSpec {
    /// Run under `shell` (`sh -c <command_line>` by default on Unix).
    pub command_line: String,
    pub shell: shell::Shell,
    pub cwd: PathBuf,
    pub timeout: Duration,
    /// Bytes of output kept for the model (e.g. 30_000).
    pub output_cap: usize,
    /// Where the output is written as it arrives (a private file, mode
    /// 0600, in a folder that must exist); `None` keeps no copy.
    pub log_path: Option<PathBuf>,
    /// The most bytes the log keeps: the first and last halves, with a
    /// marker between them.
    pub log_cap: u64,
    /// Variables removed from the inherited environment (credentials).
    pub env_remove: Vec<OsString>,
    /// Variables set for the command.
    pub env_set: Vec<(OsString, OsString)>,
    /// The program and arguments to run instead of the shell's line: the
    /// sandbox launcher's command line for it (`sandbox::shell_argv`).
    pub program: Option<(PathBuf, Vec<OsString>)>,
    /// At its timeout the command is not killed but handed over, still
    /// running (`CommandResult::detached`), to become a background job.
    pub detach_on_timeout: bool,
}

/// A command that outlived its timeout, handed over alive: its process
/// group, the rest of its output, and its exit.
#[derive(Debug, Clone)]
pub(crate) struct Detached {
    pub pid: u32,
    /// Every process it runs, to end together.
    pub tree: std::sync::Arc<Tree>,
    pub chunks: Receiver<Vec<u8>>,
    pub statuses: Receiver<io::Result<ExitStatus>>,
}

impl CommandSpec {
    /// A command with no log, the inherited environment, under the
    /// system's default shell (`sh -c LINE` on Unix).
    pub(crate) fn new(command_line: &str, cwd: &Path, timeout: Duration, cap: usize) -> Self {
        CommandSpec {
            command_line: command_line.to_string(),
            shell: shell::Shell::default_here(),
            cwd: cwd.to_path_buf(),
            timeout,
            output_cap: cap,
            log_path: None,
            log_cap: logs::DEFAULT_LOG_CAP,
            env_remove: Vec::new(),
            env_set: Vec::new(),
            program: None,
            detach_on_timeout: false,
        }
    }
}

/// How a command ended and what it printed.
#[derive(Debug, Clone)]
pub(crate) struct CommandResult {
    /// `None` when the shell was killed by a signal.
    pub exit_code: Option<i32>,
    pub signal: Option<i32>,
    pub timed_out: bool,
    pub cancelled: bool,
    /// Stdout and stderr interleaved in arrival order, decoded lossily; over
    /// the cap, the first and last parts with a marker line between them.
    pub output: String,
    #[cfg_attr(not(test), expect(dead_code, reason = "tests read it"))]
    pub total_bytes: u64,
    #[cfg_attr(not(test), expect(dead_code, reason = "tests read it"))]
    pub truncated: bool,
    /// The command still runs (its timeout came with `detach_on_timeout`).
    pub detached: Option<Detached>,
}

/// How often, at most, `on_output` is called while the command runs.
const STREAM_INTERVAL: Duration = Duration::from_millis(100);
/// The most bytes handed to `on_output` in one call; more than that within
/// one interval is replaced by a marker so a flood cannot flood the editor.
const STREAM_CAP: usize = 64 * 1024;
/// How long the pipe may stay open after the shell exits (background jobs
/// holding it) before the group is killed.
const EXIT_GRACE: Duration = Duration::from_millis(200);
/// How long the reader gets, after a kill, to deliver what is buffered.
const SETTLE: Duration = Duration::from_millis(50);
/// How long to wait for a killed shell to be reaped before giving up on
/// its exit status (the wait thread still reaps it later).
const REAP_WAIT: Duration = Duration::from_secs(1);
/// Size of one read from the pipe.
const CHUNK: usize = 64 * 1024;
/// Chunks queued between the reader and the caller; a full queue makes the
/// command block on its writes, which keeps memory bounded.
const CHUNK_QUEUE: usize = 16;

/// On Linux, the command's shell gets SIGKILL if the agent dies without
/// cleaning up (killed with SIGKILL itself): no command outlives it. The
/// kernel sends it when the spawning thread ends; commands are spawned by
/// the turn worker, which waits for them and kills their group before it
/// ends anyway.
#[cfg(target_os = "linux")]
pub(crate) fn die_with_parent(command: &mut Command) {
    use std::os::unix::process::CommandExt;
    let parent = std::process::id();
    // SAFETY: the closure runs in the child between fork and exec and calls
    // only prctl and getppid, which are async-signal-safe system calls.
    unsafe {
        command.pre_exec(move || {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                return Err(io::Error::last_os_error());
            }
            // The agent may have died before the prctl.
            if u32::try_from(libc::getppid()).ok() != Some(parent) {
                return Err(io::Error::other("the agent is gone"));
            }
            Ok(())
        });
    }
}

#[cfg(not(target_os = "linux"))]
pub(crate) fn die_with_parent(_command: &mut Command) {}

/// A spawn request for the long-lived spawner thread.
type SpawnRequest = (Command, crossbeam_channel::Sender<io::Result<Child>>);

/// Starts `command` so that, on Linux, it dies with the agent even when the
/// agent is killed with SIGKILL. The kernel's parent-death signal follows
/// the *thread* that forked the child, so processes that outlive the thread
/// asking for them (MCP servers, started by short-lived helper threads) are
/// forked by one thread that lives as long as the process: `spindle-spawner`,
/// started on first use. It holds no state but its queue.
pub(crate) fn spawn_tied_to_agent(mut command: Command) -> io::Result<Child> {
    // Global: the one thread that lives as long as the process, for all.
    static SPAWNER: std::sync::OnceLock<Option<crossbeam_channel::Sender<SpawnRequest>>> =
        std::sync::OnceLock::new();
    let spawner = SPAWNER.get_or_init(|| {
        let (sender, requests) = crossbeam_channel::unbounded::<SpawnRequest>();
        thread::Builder::new()
            .name("spindle-spawner".into())
            .spawn(move || {
                for (mut command, reply) in requests {
                    die_with_parent(&mut command);
                    let _ = reply.send(command.spawn());
                }
            })
            .ok()
            .map(|_| sender)
    });
    let Some(spawner) = spawner else {
        return command.spawn();
    };
    let (reply, answer) = bounded(1);
    if let Err(unsent) = spawner.send((command, reply)) {
        command = unsent.into_inner().0;
        return command.spawn();
    }
    answer
        .recv()
        .unwrap_or_else(|_| Err(io::Error::other("the spawner thread is gone")))
}

/// Kills the process tree when dropped, unless it was already killed on
/// purpose; this is what ends the command if `on_output` panics.
struct GroupGuard {
    tree: std::sync::Arc<Tree>,
    armed: bool,
}

impl GroupGuard {
    fn kill_now(&mut self) {
        if self.armed {
            self.armed = false;
            self.tree.kill();
        }
    }
}

impl Drop for GroupGuard {
    fn drop(&mut self) {
        self.kill_now();
    }
}

/// Why the main loop stopped.
#[derive(Clone, Copy, PartialEq)]
enum Ending {
    /// The shell exited and the pipe reached EOF.
    Finished,
    /// The shell exited but something kept the pipe open past the grace.
    Lingering,
    TimedOut,
    Cancelled,
}

/// Runs `spec.command_line` under `sh -c` and waits for it, its timeout or
/// a cancel (a message on, or the disconnection of, `cancel`).
///
/// `on_output` receives the output as text while it arrives: at most about
/// every 100 ms, everything new since the previous call (at most 64 KiB of
/// it per call), and once more at the end. Whatever the outcome, the
/// command's process group is killed before this returns.
pub(crate) fn run(
    spec: &CommandSpec,
    cancel: &Receiver<()>,
    on_output: &mut dyn FnMut(&str),
) -> io::Result<CommandResult> {
    let log = open_log(spec.log_path.as_deref(), spec.log_cap);
    let (reader, writer) = io::pipe()?;
    let writer_err = writer.try_clone()?;
    // The helper threads start before the child, so that failing to start
    // them leaves no process behind.
    let (chunk_rx, child_tx, status_rx) = start_helpers(reader)?;
    let (child, guarded) = spawn_child(spec, writer, writer_err)?;
    let pid = child.id();
    let tree = match Tree::of(&child, guarded) {
        Ok(tree) => std::sync::Arc::new(tree),
        Err(error) => {
            let _ = child_tx.send(child);
            return Err(error);
        }
    };
    let mut guard = GroupGuard {
        tree: tree.clone(),
        armed: true,
    };
    // The wait thread is alive and waiting for exactly this message.
    let _ = child_tx.send(child);

    let mut state = State {
        chunks: chunk_rx,
        statuses: status_rx,
        eof: false,
        shell_done: false,
        status: None,
        exited_at: None,
        buffer: Capped::new(spec.output_cap),
        log,
        stream: Stream::new(on_output),
    };
    let started = Instant::now();
    let ending = state.wait_for_end(started.checked_add(spec.timeout), cancel);
    if ending == Ending::TimedOut && spec.detach_on_timeout && !state.shell_done {
        // Handed over alive: the job keeps reading its output and waits
        // for its exit.
        guard.armed = false;
        return Ok(state.hand_over(pid, tree));
    }
    // Every path kills the group: on timeout and cancel to stop the command,
    // otherwise to end background jobs it left behind. If the shell is
    // already reaped, its id stays reserved while any member of its group
    // lives; once the group is empty the signal finds nobody, short of the
    // id being reused within this instant.
    guard.kill_now();
    if ending != Ending::Finished {
        state.settle(pid);
    }
    Ok(state.ended(ending))
}

/// Starts the two detached helper threads: one reads the pipe, one reaps
/// the child it is sent. Returns their channels.
#[allow(clippy::type_complexity)]
fn start_helpers(
    reader: PipeReader,
) -> io::Result<(
    Receiver<Vec<u8>>,
    Sender<Child>,
    Receiver<io::Result<ExitStatus>>,
)> {
    let (chunk_tx, chunk_rx) = bounded(CHUNK_QUEUE);
    // Detached (both): they end when the command's pipe closes and its wait
    // returns, which the group kill makes sure of; the caller waits on
    // their channels.
    thread::Builder::new()
        .name("spindle-cmd-output".into())
        .spawn(move || read_chunks(reader, chunk_tx))?;
    let (child_tx, child_rx) = bounded::<Child>(1);
    let (status_tx, status_rx) = bounded(1);
    thread::Builder::new()
        .name("spindle-cmd-wait".into())
        .spawn(move || {
            if let Ok(mut child) = child_rx.recv() {
                let _ = status_tx.send(child.wait());
            }
        })?;
    Ok((chunk_rx, child_tx, status_rx))
}

/// Spawns the command in its own process group, its output into the
/// pipe; and whether it runs under the guard.
fn spawn_child(
    spec: &CommandSpec,
    writer: PipeWriter,
    writer_err: PipeWriter,
) -> io::Result<(Child, bool)> {
    let mut command = match &spec.program {
        Some((program, args)) => guard::command(program, args),
        None => spec.shell.command(&spec.command_line),
    };
    for name in &spec.env_remove {
        command.env_remove(name);
    }
    command
        .envs(spec.env_set.iter().map(|(k, v)| (k, v)))
        .current_dir(&spec.cwd)
        .stdin(Stdio::null())
        .stdout(writer)
        .stderr(writer_err);
    Tree::prepare(&mut command);
    let guarded = guard::wraps(&command);
    let child = if spec.detach_on_timeout {
        // It may outlive this thread as a job: tied to the agent's
        // long-lived spawner thread instead (the parent-death signal
        // follows the thread that spawned).
        spawn_tied_to_agent(command)
    } else {
        die_with_parent(&mut command);
        command.spawn()
    };
    child.map(|child| (child, guarded))
    // The command, and with it the parent's copies of the write end,
    // is dropped here; otherwise the pipe would never reach EOF.
}

/// The calling thread's view of a running command.
struct State<'a> {
    chunks: Receiver<Vec<u8>>,
    statuses: Receiver<io::Result<ExitStatus>>,
    eof: bool,
    shell_done: bool,
    /// `None` while running, or if waiting for the shell failed.
    status: Option<ExitStatus>,
    exited_at: Option<Instant>,
    buffer: Capped,
    log: Option<Log>,
    stream: Stream<'a>,
}

impl State<'_> {
    /// Handles events until the command ends, times out, keeps its pipe
    /// open past the exit grace, or is cancelled.
    fn wait_for_end(&mut self, deadline: Option<Instant>, cancel: &Receiver<()>) -> Ending {
        loop {
            if self.eof && self.shell_done {
                return Ending::Finished;
            }
            let now = Instant::now();
            if deadline.is_some_and(|d| now >= d) {
                return Ending::TimedOut;
            }
            let grace_end = self.exited_at.map(|t| t + EXIT_GRACE);
            if grace_end.is_some_and(|g| now >= g) {
                return Ending::Lingering;
            }
            self.stream.flush_if_due(now);
            let wake = [deadline, grace_end, self.stream.due_at(now)]
                .into_iter()
                .flatten()
                .min();
            let timer = wake.map_or_else(never, |w| after(w.saturating_duration_since(now)));
            if self.step(Some(cancel), &timer) {
                return Ending::Cancelled;
            }
        }
    }

    /// The result of a command handed over alive as a job: the output so
    /// far, and the channels its job goes on reading.
    fn hand_over(mut self, pid: u32, tree: std::sync::Arc<Tree>) -> CommandResult {
        self.stream.finish();
        if let Some(log) = &mut self.log {
            let _ = log.finish();
        }
        let (output, truncated) = self
            .buffer
            .finish(self.log.as_ref().map(|l| (l.path.as_path(), l.complete())));
        CommandResult {
            exit_code: None,
            signal: None,
            timed_out: true,
            cancelled: false,
            output,
            total_bytes: self.buffer.total,
            truncated,
            detached: Some(Detached {
                pid,
                tree,
                chunks: std::mem::replace(&mut self.chunks, never()),
                statuses: std::mem::replace(&mut self.statuses, never()),
            }),
        }
    }

    /// After the kill of a command that did not finish: waits a little for
    /// the last output and the shell's exit status.
    fn settle(&mut self, pid: u32) {
        let settle_end = Instant::now() + SETTLE;
        while !(self.eof && self.shell_done) {
            let left = settle_end.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            self.step(None, &after(left));
        }
        if !self.shell_done {
            match self.statuses.recv_timeout(REAP_WAIT) {
                Ok(status) => self.status = status.ok(),
                Err(_) => log::warn!("process {pid} was not reaped in time after SIGKILL"),
            }
        }
    }

    /// Finishes the stream and the log; the result of a command that ended.
    fn ended(mut self, ending: Ending) -> CommandResult {
        self.stream.finish();
        if let Some(log) = &mut self.log {
            if let Err(err) = log.finish() {
                log::warn!("cannot write command log {}: {err}", log.path.display());
                self.log = None;
            }
        }
        let (output, truncated) = self
            .buffer
            .finish(self.log.as_ref().map(|l| (l.path.as_path(), l.complete())));
        CommandResult {
            exit_code: self.status.and_then(|s| s.code()),
            signal: self.status.as_ref().and_then(exit_signal),
            timed_out: ending == Ending::TimedOut,
            cancelled: ending == Ending::Cancelled,
            output,
            total_bytes: self.buffer.total,
            truncated,
            detached: None,
        }
    }

    /// Waits for one event (output, the shell's exit, a cancel, or the
    /// timer) and handles it. Returns true when the command was cancelled.
    fn step(&mut self, cancel: Option<&Receiver<()>>, timer: &Receiver<Instant>) -> bool {
        let no_cancel = never();
        let cancel = cancel.unwrap_or(&no_cancel);
        select! {
            recv(self.chunks) -> chunk => match chunk {
                Ok(chunk) => self.take(&chunk),
                Err(_) => {
                    // The channel is replaced so a closed one does not make
                    // every later `select!` return at once.
                    self.eof = true;
                    self.chunks = never();
                }
            },
            recv(self.statuses) -> status => {
                self.status = match status {
                    Ok(Ok(status)) => Some(status),
                    Ok(Err(err)) => {
                        log::warn!("waiting for the command's shell failed: {err}");
                        None
                    }
                    Err(_) => None,
                };
                self.shell_done = true;
                self.exited_at = Some(Instant::now());
                self.statuses = never();
            },
            recv(cancel) -> _ => return true,
            recv(timer) -> _ => {},
        }
        false
    }

    fn take(&mut self, chunk: &[u8]) {
        self.buffer.push(chunk);
        if let Some(log) = &mut self.log {
            if let Err(err) = log.write(chunk) {
                log::warn!("cannot write command log {}: {err}", log.path.display());
                // The marker must not point at an incomplete log.
                self.log = None;
            }
        }
        self.stream.push(chunk);
        self.stream.flush_if_due(Instant::now());
    }
}

/// The helper thread: reads the pipe until EOF, or until nobody listens.
fn read_chunks(mut reader: PipeReader, chunks: Sender<Vec<u8>>) {
    let mut buf = vec![0; CHUNK];
    loop {
        match reader.read(&mut buf) {
            Ok(0) => return,
            Ok(n) => {
                if chunks.send(buf[..n].to_vec()).is_err() {
                    return;
                }
            }
            Err(err) if err.kind() == io::ErrorKind::Interrupted => {}
            Err(err) => {
                log::warn!("reading command output failed: {err}");
                return;
            }
        }
    }
}

/// The command's log file: the first half of its cap written as output
/// arrives, then a rolling last half kept in memory and written, after a
/// marker, when the command ends.
struct Log {
    file: File,
    path: PathBuf,
    head_left: u64,
    tail: Vec<u8>,
    tail_cap: usize,
    /// Bytes that went to the tail (kept or dropped).
    tail_total: u64,
}

impl Log {
    fn write(&mut self, chunk: &[u8]) -> io::Result<()> {
        let to_head = chunk
            .len()
            .min(usize::try_from(self.head_left).unwrap_or(usize::MAX));
        if to_head > 0 {
            self.file.write_all(&chunk[..to_head])?;
            self.head_left -= to_head as u64;
        }
        let rest = &chunk[to_head..];
        self.tail_total += rest.len() as u64;
        self.tail.extend_from_slice(rest);
        if self.tail.len() > self.tail_cap.max(CHUNK) * 2 {
            self.tail.drain(..self.tail.len() - self.tail_cap);
        }
        Ok(())
    }

    /// Whether the log holds the whole output.
    fn complete(&self) -> bool {
        self.tail.len() as u64 == self.tail_total && self.tail.len() <= self.tail_cap
    }

    fn finish(&mut self) -> io::Result<()> {
        let kept = self.tail.len().min(self.tail_cap);
        let omitted = self.tail_total - kept as u64;
        if omitted > 0 {
            let marker = format!("\n… [{omitted} bytes of output omitted from this log] …\n");
            self.file.write_all(marker.as_bytes())?;
        }
        let tail = &self.tail[self.tail.len() - kept..];
        self.file.write_all(tail)?;
        self.file.flush()
    }
}

/// Creates the log file. A failure is logged and the command runs without
/// a log rather than not at all.
fn open_log(path: Option<&Path>, cap: u64) -> Option<Log> {
    let path = path?;
    match logs::create_file(path) {
        Ok(file) => Some(Log {
            file,
            path: path.to_path_buf(),
            head_left: cap / 2,
            tail: Vec::new(),
            tail_cap: usize::try_from(cap - cap / 2).unwrap_or(usize::MAX),
            tail_total: 0,
        }),
        Err(err) => {
            log::warn!("cannot create command log {}: {err}", path.display());
            None
        }
    }
}

/// The output kept for the model: the first half of the cap and a rolling
/// last half, so memory stays bounded however much the command prints.
struct Capped {
    head: Vec<u8>,
    head_cap: usize,
    tail: Vec<u8>,
    tail_cap: usize,
    total: u64,
}

impl Capped {
    fn new(cap: usize) -> Capped {
        Capped {
            head: Vec::new(),
            head_cap: cap / 2,
            tail: Vec::new(),
            tail_cap: cap - cap / 2,
            total: 0,
        }
    }

    fn push(&mut self, bytes: &[u8]) {
        self.total += bytes.len() as u64;
        let to_head = bytes.len().min(self.head_cap - self.head.len());
        self.head.extend_from_slice(&bytes[..to_head]);
        self.tail.extend_from_slice(&bytes[to_head..]);
        // Trimming only when the tail is twice its size keeps the copying
        // linear in the output.
        if self.tail.len() > self.tail_cap.max(CHUNK) * 2 {
            self.tail.drain(..self.tail.len() - self.tail_cap);
        }
    }

    /// The text for the model and whether anything was left out.
    fn finish(&self, log: Option<(&Path, bool)>) -> (String, bool) {
        let tail = &self.tail[self.tail.len().saturating_sub(self.tail_cap)..];
        if self.total == (self.head.len() + tail.len()) as u64 {
            let mut all = self.head.clone();
            all.extend_from_slice(tail);
            return (String::from_utf8_lossy(&all).into_owned(), false);
        }
        let head = &self.head[..complete_prefix_len(&self.head)];
        let tail = &tail[tail
            .iter()
            .take(3)
            .take_while(|&&b| is_continuation(b))
            .count()..];
        let omitted = self.total - (head.len() + tail.len()) as u64;
        let marker = match log {
            Some((path, true)) => format!(
                "\n… [{omitted} bytes of output omitted; full output in {}] …\n",
                path.display()
            ),
            Some((path, false)) => format!(
                "\n… [{omitted} bytes of output omitted; the first and last parts are in {}] …\n",
                path.display()
            ),
            None => format!("\n… [{omitted} bytes of output omitted] …\n"),
        };
        let mut output = String::from_utf8_lossy(head).into_owned();
        output.push_str(&marker);
        output.push_str(&String::from_utf8_lossy(tail));
        (output, true)
    }
}

fn is_continuation(byte: u8) -> bool {
    byte & 0xC0 == 0x80
}

/// The length of `bytes` without a UTF-8 sequence cut short at its end
/// (which is at most three bytes long).
fn complete_prefix_len(bytes: &[u8]) -> usize {
    (bytes.len().saturating_sub(3)..bytes.len())
        .find(|&i| {
            matches!(std::str::from_utf8(&bytes[i..]),
                Err(err) if err.valid_up_to() == 0 && err.error_len().is_none())
        })
        .unwrap_or(bytes.len())
}

/// Feeds `on_output` at a throttled pace, decoding UTF-8 across chunk
/// boundaries so a character split between two reads stays whole.
struct Stream<'a> {
    on_output: &'a mut dyn FnMut(&str),
    pending: Vec<u8>,
    skipped: u64,
    /// The start of a character whose remaining bytes have not come yet.
    carry: Vec<u8>,
    last_call: Option<Instant>,
}

impl<'a> Stream<'a> {
    fn new(on_output: &'a mut dyn FnMut(&str)) -> Stream<'a> {
        Stream {
            on_output,
            pending: Vec::new(),
            skipped: 0,
            carry: Vec::new(),
            last_call: None,
        }
    }

    fn push(&mut self, bytes: &[u8]) {
        let room = STREAM_CAP
            .saturating_sub(self.pending.len())
            .min(bytes.len());
        self.pending.extend_from_slice(&bytes[..room]);
        self.skipped += (bytes.len() - room) as u64;
    }

    /// When the next call is due, if anything waits to be sent; the first
    /// call is due at once.
    fn due_at(&self, now: Instant) -> Option<Instant> {
        if self.pending.is_empty() && self.skipped == 0 {
            return None;
        }
        Some(self.last_call.map_or(now, |t| t + STREAM_INTERVAL))
    }

    fn flush_if_due(&mut self, now: Instant) {
        if self.due_at(now).is_some_and(|due| now >= due) {
            self.call(now, false);
        }
    }

    /// The final call, with whatever is left.
    fn finish(&mut self) {
        self.call(Instant::now(), true);
    }

    fn call(&mut self, now: Instant, last: bool) {
        let mut text = String::new();
        self.carry.append(&mut self.pending);
        decode_into(&mut self.carry, &mut text);
        if self.skipped > 0 || last {
            // What follows is missing or will never come, so a partial
            // character left over cannot be completed.
            text.push_str(&String::from_utf8_lossy(&self.carry));
            self.carry.clear();
        }
        if self.skipped > 0 {
            text.push_str(&format!("\n… [{} bytes not shown here] …\n", self.skipped));
            self.skipped = 0;
        }
        if !text.is_empty() {
            self.last_call = Some(now);
            (self.on_output)(&text);
        }
    }
}

/// Decodes `bytes` lossily into `out`, leaving in `bytes` only an incomplete
/// character at its end, which the next chunk may complete.
fn decode_into(bytes: &mut Vec<u8>, out: &mut String) {
    let mut rest: &[u8] = bytes;
    loop {
        match std::str::from_utf8(rest) {
            Ok(text) => {
                out.push_str(text);
                rest = &[];
                break;
            }
            Err(err) => {
                let (valid, after) = rest.split_at(err.valid_up_to());
                out.push_str(&String::from_utf8_lossy(valid));
                match err.error_len() {
                    Some(len) => {
                        out.push(char::REPLACEMENT_CHARACTER);
                        rest = &after[len..];
                    }
                    None => {
                        rest = after;
                        break;
                    }
                }
            }
        }
    }
    let keep = rest.len();
    bytes.drain(..bytes.len() - keep);
}

#[cfg(test)]
mod tests;

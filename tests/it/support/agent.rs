//! Drives the real `spindle` binary over stdio, the way an editor does
//! (or, for `support::in_process`, `spindle::agent::serve` on a thread over
//! pipes: the same client side, the same checks).
//!
//! A reader thread takes the child's stdout line by line. Every line must be
//! one JSON-RPC message that passes `validate_agent_message` (responses are
//! checked against the method of the request they answer); anything else is
//! recorded as a failure and makes the next `recv` panic with the offending
//! line, so no test can pass while the agent writes something a client
//! would choke on. Writing to stdin happens on the test's thread, which is
//! safe because the reader thread keeps draining stdout.
//!
//! Each agent gets its own scratch directory holding the stderr log and a
//! private `SPINDLE_HOME`, so tests never read or write the developer's real
//! configuration and database. The directory is removed when the agent is
//! dropped at the end of a passing test and kept (with its path printed) when
//! the test fails.

use std::cell::Cell;
use std::collections::{HashMap, VecDeque};
use std::fs::File;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::schema::validate_agent_message;

/// The `spindle` binary the tests start: the one cargo built for this test
/// run, or the one the environment variable `SPINDLE_TEST_BINARY` names
/// (a cross-built binary, run through qemu's binfmt_misc registration, say).
/// With the variable set, `support::in_process::agent` and
/// `scripted` start that binary too, so the protocol tests run against it.
pub fn spindle_binary() -> PathBuf {
    match std::env::var_os(TEST_BINARY) {
        Some(path) if !path.is_empty() => PathBuf::from(path),
        _ => PathBuf::from(env!("CARGO_BIN_EXE_spindle")),
    }
}

/// Names the binary the tests start instead of cargo's (`spindle_binary`).
pub const TEST_BINARY: &str = "SPINDLE_TEST_BINARY";

/// Default deadline for the convenience calls (`initialize`, `new_session`).
const QUICK: Duration = Duration::from_secs(10);
/// How much of the agent's stderr goes into a panic message.
const STDERR_TAIL: usize = 16 * 1024;

/// What the reader thread hands over, in stdout order.
enum Incoming {
    Message(Value),
    /// A line that is not JSON, or a message that fails validation.
    /// `partial`: the output ended in the middle of this line.
    Invalid {
        line: String,
        problem: String,
        partial: bool,
    },
    /// stdout reached end of file (or failed).
    Closed(Option<String>),
}

/// Bookkeeping for the requests the test sent, shared with the reader
/// thread so that a response is validated against its request's method.
#[derive(Default)]
struct Outstanding {
    /// Canonical JSON of the id → (method, answered yet).
    by_id: HashMap<String, (String, bool)>,
    /// The client advertised an unstable part of ACP in `initialize`, so
    /// messages are validated against the unstable edition of the schema.
    unstable: bool,
    /// What the schema cannot check (`support::rules`).
    rules: super::rules::Rules,
}

/// Whether an `initialize` request advertises a part of ACP that only the
/// unstable schema knows (or one of Spindle's opt-ins to such parts).
/// Notices, compaction and the tool call name are stable: advertising them
/// (or the older opt-ins to the first and the last) is not unstable.
fn advertises_unstable(message: &Value) -> bool {
    let capabilities = &message["params"]["clientCapabilities"];
    let spindle = &capabilities["_meta"]["spindle"];
    capabilities["subagents"].is_object()
        || capabilities["plan"].is_object()
        || ["promptUsage", "diffDeleted"]
            .iter()
            .any(|key| spindle[*key] == true)
}

/// What runs the agent.
pub(super) enum Runner {
    /// A `spindle` process.
    Child(Child),
    /// `spindle::agent::serve` on a thread of the test process; `None`
    /// once joined.
    Thread(Option<thread::JoinHandle<Result<(), String>>>),
}

/// A running agent. See the module documentation.
pub struct Agent {
    runner: Runner,
    stdin: Option<Box<dyn Write + Send>>,
    incoming: Receiver<Incoming>,
    /// Messages read but not yet returned by `recv` (collected while
    /// waiting for the process to exit).
    backlog: VecDeque<Value>,
    received: Vec<Value>,
    outstanding: Arc<Mutex<Outstanding>>,
    next_id: i64,
    stdout_closed: bool,
    /// The harness killed the child, so a cut-off last line is expected.
    killed: bool,
    scratch: PathBuf,
    home: PathBuf,
    /// `None` for an in-process agent.
    stderr_path: Option<PathBuf>,
    /// A panic message already carried the stderr, so `Drop` need not
    /// print it again.
    stderr_shown: Cell<bool>,
}

impl Agent {
    /// Starts the `spindle` binary with `args` (e.g. `["acp"]`).
    ///
    /// The child's environment is `support::isolation::isolate`d for a
    /// fresh directory (`home()`): its `HOME`, `SPINDLE_HOME` and XDG
    /// folders point there, and provider keys, endpoints and `RUST_LOG`
    /// are gone; then `env` is applied on top, so a test can override any
    /// of these.
    pub fn spawn(args: &[&str], env: &[(&str, &str)]) -> Agent {
        Agent::spawn_program(&spindle_binary(), args, env)
    }

    /// Like `spawn`, for another program standing in for the agent (used to
    /// test the harness itself).
    pub fn spawn_program(program: &Path, args: &[&str], env: &[(&str, &str)]) -> Agent {
        let scratch = new_scratch();
        let home = scratch.join("home");
        let stderr_path = scratch.join("stderr.log");
        let stderr_file = File::create(&stderr_path).expect("cannot create the stderr log");

        let mut command = Command::new(program);
        // Its own console group on Windows, as an editor starts it, so
        // that a test's Ctrl-Break reaches the agent alone.
        #[cfg(windows)]
        std::os::windows::process::CommandExt::creation_flags(
            &mut command,
            windows_sys::Win32::System::Threading::CREATE_NEW_PROCESS_GROUP,
        );
        command
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::from(stderr_file));
        super::isolation::isolate(&mut command, &home);
        for (name, value) in env {
            command.env(name, value);
        }
        // Wine now and then fails a start under load (error 1359): once
        // more after a pause.
        let mut child = command
            .spawn()
            .or_else(|err| match err.raw_os_error() {
                Some(1359) if cfg!(windows) => {
                    thread::sleep(Duration::from_millis(200));
                    command.spawn()
                }
                _ => Err(err),
            })
            .unwrap_or_else(|err| panic!("cannot start {} {args:?}: {err}", program.display()));
        let stdin = child.stdin.take().expect("child stdin is piped");
        let stdout = child.stdout.take().expect("child stdout is piped");
        Agent::start(
            Runner::Child(child),
            stdin,
            stdout,
            scratch,
            Some(stderr_path),
        )
    }

    /// Takes over a started agent: reads (and validates) `stdout` on a
    /// thread, writes requests to `stdin`. `scratch` holds its `home` and
    /// is removed with it after a passing test.
    pub(super) fn start(
        runner: Runner,
        stdin: impl Write + Send + 'static,
        stdout: impl Read + Send + 'static,
        scratch: PathBuf,
        stderr_path: Option<PathBuf>,
    ) -> Agent {
        let home = scratch.join("home");
        let outstanding = Arc::new(Mutex::new(Outstanding::default()));
        let (sender, incoming) = mpsc::channel();
        let reader_outstanding = Arc::clone(&outstanding);
        thread::Builder::new()
            .name("agent-stdout".into())
            .spawn(move || read_stdout(stdout, sender, reader_outstanding))
            .expect("cannot spawn the stdout reader thread");

        Agent {
            runner,
            stdin: Some(Box::new(stdin)),
            incoming,
            backlog: VecDeque::new(),
            received: Vec::new(),
            outstanding,
            next_id: 0,
            stdout_closed: false,
            killed: false,
            scratch,
            home,
            stderr_path,
            stderr_shown: Cell::new(false),
        }
    }

    /// The agent's private `SPINDLE_HOME`.
    pub fn home(&self) -> &Path {
        &self.home
    }

    /// The agent's process id.
    pub fn pid(&self) -> u32 {
        self.child().id()
    }

    /// The agent's process; panics for an in-process agent, which has none
    /// of its own.
    fn child(&self) -> &Child {
        match &self.runner {
            Runner::Child(child) => child,
            Runner::Thread(_) => panic!("an in-process agent has no process of its own"),
        }
    }

    /// Kills the agent with SIGKILL (a crash: no cleanup runs), reaps it
    /// so its pid no longer names a process, and keeps what it wrote
    /// before for `recv` (a cut-off last line is dropped). Only for a
    /// process: a thread cannot be killed.
    pub fn kill(&mut self) {
        let Runner::Child(child) = &mut self.runner else {
            panic!("an in-process agent cannot be killed");
        };
        self.killed = true;
        let _ = child.kill();
        let _ = child.wait();
        self.drain(Duration::from_secs(5));
    }

    /// Sends one message as one line. A request (`id` + `method`) is
    /// remembered so that its response is validated against its method.
    pub fn send(&mut self, message: Value) {
        self.remember(&message);
        let line = serde_json::to_string(&message).expect("a Value always serialises");
        self.write_line(&line);
    }

    /// Sends `line` as it is (plus a newline), e.g. to test parse errors.
    /// If it happens to be a JSON request it is remembered like in `send`.
    pub fn send_raw(&mut self, line: &str) {
        if let Ok(message) = serde_json::from_str::<Value>(line) {
            self.remember(&message);
        }
        self.write_line(line);
    }

    /// Sends a request with the next integer id and returns that id.
    pub fn request(&mut self, method: &str, params: Value) -> Value {
        self.next_id += 1;
        let id = json!(self.next_id);
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        id
    }

    /// Sends a notification.
    pub fn notify(&mut self, method: &str, params: Value) {
        self.send(json!({"jsonrpc": "2.0", "method": method, "params": params}));
    }

    /// The next message from the agent (already validated), or `None` if
    /// nothing came within `timeout` or stdout is closed. Panics if the agent
    /// wrote a line that is not a valid ACP message.
    pub fn recv(&mut self, timeout: Duration) -> Option<Value> {
        if let Some(message) = self.backlog.pop_front() {
            return Some(message);
        }
        if self.stdout_closed {
            return None;
        }
        match self.incoming.recv_timeout(timeout) {
            Ok(incoming) => self.accept(incoming),
            Err(RecvTimeoutError::Timeout) => None,
            Err(RecvTimeoutError::Disconnected) => {
                self.stdout_closed = true;
                None
            }
        }
    }

    /// Waits for the response to `id`. Returns it together with every other
    /// message received meanwhile, in order. Panics (with the agent's
    /// stderr) if it does not arrive within `timeout`.
    pub fn response(&mut self, id: &Value, timeout: Duration) -> (Value, Vec<Value>) {
        let deadline = Instant::now() + timeout;
        let mut others = Vec::new();
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let Some(message) = self.recv(left) else {
                let method = self.method_of(id).unwrap_or_else(|| "?".into());
                let why = if self.stdout_closed {
                    "the agent closed its stdout".to_string()
                } else {
                    format!("nothing within {timeout:?}")
                };
                panic!(
                    "no response to request {id} ({method}): {why}\n\
                     other messages meanwhile:\n{}\n{}",
                    render_messages(&others),
                    self.stderr_report()
                );
            };
            if message.get("method").is_none() && message.get("id") == Some(id) {
                return (message, others);
            }
            others.push(message);
        }
    }

    /// Sends a standard `initialize` (protocol version 1, no client
    /// capabilities) and returns its result; panics on an error response.
    pub fn initialize(&mut self) -> Value {
        self.initialize_with(json!({}))
    }

    /// `initialize` with these client capabilities.
    pub fn initialize_with(&mut self, capabilities: Value) -> Value {
        let id = self.request(
            "initialize",
            json!({
                "protocolVersion": 1,
                "clientCapabilities": capabilities,
                "clientInfo": {"name": "spindle-tests", "version": "0.0.0"},
            }),
        );
        let (response, _) = self.response(&id, QUICK);
        self.result_of(response, "initialize")
    }

    /// `initialize` as a client that asks for Spindle's `_spindle/event`
    /// notifications (`clientCapabilities._meta.spindle.events`).
    pub fn initialize_with_events(&mut self) -> Value {
        self.initialize_with(json!({"_meta": {"spindle": {"events": true}}}))
    }

    /// Opens a session in `cwd` with no MCP servers; returns its id.
    pub fn new_session(&mut self, cwd: &Path) -> String {
        let id = self.request(
            "session/new",
            json!({"cwd": cwd.to_str().expect("cwd is UTF-8"), "mcpServers": []}),
        );
        let (response, _) = self.response(&id, QUICK);
        let result = self.result_of(response, "session/new");
        match result.get("sessionId").and_then(Value::as_str) {
            Some(session_id) => session_id.to_string(),
            None => panic!("session/new result has no sessionId: {result}"),
        }
    }

    /// Closes the agent's stdin (EOF tells it to shut down).
    pub fn close_stdin(&mut self) {
        self.stdin.take();
    }

    /// Waits for the process to exit. On timeout kills it and returns `None`.
    /// After an exit, everything left on stdout is read (and validated) into
    /// the backlog that `recv` returns first; panics if any of it is invalid.
    /// An in-process agent "exits" when `serve` returns: status 0 for `Ok`,
    /// 1 for an error; on timeout its thread is left running.
    pub fn wait_exit(&mut self, timeout: Duration) -> Option<ExitStatus> {
        let deadline = Instant::now() + timeout;
        let status = match &mut self.runner {
            Runner::Child(child) => {
                let status = loop {
                    match child.try_wait() {
                        Ok(Some(status)) => break Some(status),
                        Ok(None) if Instant::now() >= deadline => break None,
                        Ok(None) => thread::sleep(Duration::from_millis(10)),
                        Err(err) => panic!("cannot wait for the agent: {err}"),
                    }
                };
                if status.is_none() {
                    self.killed = true;
                    let _ = child.kill();
                    let _ = child.wait();
                }
                status
            }
            Runner::Thread(handle) => join_by(handle, deadline),
        };
        self.drain(Duration::from_secs(5));
        status
    }

    /// Everything the agent wrote to stderr so far. Panics for an
    /// in-process agent, whose log is the test process's: a test that
    /// reads the agent's stderr (even to find nothing there) spawns it.
    pub fn stderr(&self) -> String {
        let Some(path) = &self.stderr_path else {
            panic!("an in-process agent has no stderr of its own (spawn it to read its log)");
        };
        std::fs::read(path)
            .map(|bytes| String::from_utf8_lossy(&bytes).into_owned())
            .unwrap_or_default()
    }

    /// Every message read from stdout so far, in order (including any not
    /// yet returned by `recv`).
    pub fn received(&self) -> &[Value] {
        &self.received
    }

    /// Reads what is left on stdout until it closes or `limit` passes,
    /// keeping the messages for `recv`.
    fn drain(&mut self, limit: Duration) {
        let deadline = Instant::now() + limit;
        while !self.stdout_closed {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.incoming.recv_timeout(left) {
                Ok(incoming) => {
                    if let Some(message) = self.accept(incoming) {
                        self.backlog.push_back(message);
                    }
                }
                Err(RecvTimeoutError::Disconnected) => self.stdout_closed = true,
                Err(RecvTimeoutError::Timeout) => break,
            }
        }
    }

    /// Turns what the reader thread sent into a message, or panics.
    fn accept(&mut self, incoming: Incoming) -> Option<Value> {
        match incoming {
            Incoming::Message(message) => {
                self.received.push(message.clone());
                Some(message)
            }
            Incoming::Invalid { partial: true, .. } if self.killed => {
                self.stdout_closed = true;
                None
            }
            Incoming::Invalid { line, problem, .. } => {
                panic!(
                    "the agent wrote an invalid line on stdout:\n{problem}\nline: {}\n{}",
                    shorten(&line, 4000),
                    self.stderr_report()
                );
            }
            Incoming::Closed(error) => {
                self.stdout_closed = true;
                if let Some(error) = error {
                    eprintln!("reading the agent's stdout failed: {error}");
                }
                None
            }
        }
    }

    fn remember(&mut self, message: &Value) {
        if let (Some(id), Some(method)) = (
            message.get("id"),
            message.get("method").and_then(Value::as_str),
        ) {
            let mut outstanding = lock(&self.outstanding);
            if method == "initialize" && advertises_unstable(message) {
                outstanding.unstable = true;
            }
            outstanding.rules.on_sent(message);
            outstanding
                .by_id
                .insert(id.to_string(), (method.to_string(), false));
        }
    }

    fn method_of(&self, id: &Value) -> Option<String> {
        lock(&self.outstanding)
            .by_id
            .get(&id.to_string())
            .map(|(method, _)| method.clone())
    }

    fn write_line(&mut self, line: &str) {
        let written = match self.stdin.as_mut() {
            Some(stdin) => stdin
                .write_all(line.as_bytes())
                .and_then(|()| stdin.write_all(b"\n"))
                .and_then(|()| stdin.flush()),
            None => panic!("cannot send after close_stdin(): {line}"),
        };
        if let Err(err) = written {
            panic!(
                "cannot write to the agent's stdin ({err}); line: {}\n{}",
                shorten(line, 1000),
                self.stderr_report()
            );
        }
    }

    fn result_of(&self, response: Value, method: &str) -> Value {
        match response.get("result") {
            Some(result) => result.clone(),
            None => panic!("{method} failed: {response}\n{}", self.stderr_report()),
        }
    }

    /// The tail of stderr, framed for a panic message (a note for an
    /// in-process agent).
    pub fn stderr_report(&self) -> String {
        self.stderr_shown.set(true);
        let Some(path) = &self.stderr_path else {
            return "--- an in-process agent: its log is not captured ---".to_string();
        };
        let text = self.stderr();
        let tail = if text.len() > STDERR_TAIL {
            let mut start = text.len() - STDERR_TAIL;
            while !text.is_char_boundary(start) {
                start += 1;
            }
            format!("[… {start} bytes]\n{}", &text[start..])
        } else {
            text
        };
        format!(
            "--- agent stderr ({}) ---\n{tail}\n--- end of agent stderr ---",
            path.display()
        )
    }
}

impl Drop for Agent {
    fn drop(&mut self) {
        self.stdin.take();
        match &mut self.runner {
            Runner::Child(child) => {
                if let Ok(None) = child.try_wait() {
                    self.killed = true;
                    let _ = child.kill();
                }
                let _ = child.wait();
            }
            // The end of its input ends the agent; one that does not end
            // is left to the process exit rather than hang the test.
            Runner::Thread(handle) => {
                join_by(handle, Instant::now() + Duration::from_secs(10));
            }
        }
        if thread::panicking() {
            if !self.stderr_shown.get() {
                eprintln!("{}", self.stderr_report());
            }
            eprintln!("agent scratch directory kept: {}", self.scratch.display());
            return;
        }
        // Messages the test never looked at must still be valid: read what
        // is left and fail the test if any line was not.
        while !self.stdout_closed {
            match self.incoming.recv_timeout(Duration::from_secs(2)) {
                Ok(Incoming::Invalid { partial: true, .. }) if self.killed => {
                    self.stdout_closed = true;
                }
                Ok(Incoming::Invalid { line, problem, .. }) => {
                    // Keep the evidence, then fail the test.
                    eprintln!("agent scratch directory kept: {}", self.scratch.display());
                    panic!(
                        "the agent wrote an invalid line on stdout (not read by the test):\n\
                         {problem}\nline: {}\n{}",
                        shorten(&line, 4000),
                        self.stderr_report()
                    );
                }
                Ok(Incoming::Message(_)) => {}
                Ok(Incoming::Closed(_)) | Err(_) => self.stdout_closed = true,
            }
        }
        let _ = std::fs::remove_dir_all(&self.scratch);
    }
}

/// Joins an in-process agent's thread if it ends by `deadline`: the exit
/// status `wait_exit` reports for it (0 when `serve` returned `Ok`, else 1).
fn join_by(
    handle: &mut Option<thread::JoinHandle<Result<(), String>>>,
    deadline: Instant,
) -> Option<ExitStatus> {
    while !handle.as_ref()?.is_finished() {
        if Instant::now() >= deadline {
            return None;
        }
        thread::sleep(Duration::from_millis(10));
    }
    let code = match handle.take()?.join() {
        Ok(Ok(())) => 0,
        Ok(Err(error)) => {
            eprintln!("the in-process agent failed: {error}");
            1
        }
        Err(_) => {
            eprintln!("the in-process agent panicked");
            1
        }
    };
    #[cfg(unix)]
    return Some(std::os::unix::process::ExitStatusExt::from_raw(code << 8));
    #[cfg(windows)]
    return Some(std::os::windows::process::ExitStatusExt::from_raw(
        code as u32,
    ));
}

/// The reader thread: one line, one message, validated.
fn read_stdout(stdout: impl Read, sender: Sender<Incoming>, outstanding: Arc<Mutex<Outstanding>>) {
    let mut reader = BufReader::new(stdout);
    let mut buffer = Vec::new();
    loop {
        buffer.clear();
        let incoming = match reader.read_until(b'\n', &mut buffer) {
            Ok(0) => {
                let _ = sender.send(Incoming::Closed(None));
                return;
            }
            Ok(_) => check_line(&buffer, &outstanding),
            Err(err) => {
                let _ = sender.send(Incoming::Closed(Some(err.to_string())));
                return;
            }
        };
        if sender.send(incoming).is_err() {
            // The Agent is gone; nobody is listening any more.
            return;
        }
    }
}

fn check_line(raw: &[u8], outstanding: &Mutex<Outstanding>) -> Incoming {
    let invalid = |problem: String| Incoming::Invalid {
        line: String::from_utf8_lossy(raw).into_owned(),
        problem,
        partial: false,
    };
    let Some(body) = raw.strip_suffix(b"\n") else {
        return Incoming::Invalid {
            line: String::from_utf8_lossy(raw).into_owned(),
            problem: "stdout ended in the middle of a line (no final newline)".into(),
            partial: true,
        };
    };
    let text = match std::str::from_utf8(body) {
        Ok(text) => text,
        Err(err) => return invalid(format!("the line is not UTF-8: {err}")),
    };
    let message: Value = match serde_json::from_str(text) {
        Ok(message) => message,
        Err(err) => return invalid(format!("the line is not JSON: {err}")),
    };
    let mut request_method = None;
    let unstable = lock(outstanding).unstable;
    if message.get("method").is_none() {
        if let Some(id) = message.get("id") {
            let mut outstanding = lock(outstanding);
            if let Some((method, answered)) = outstanding.by_id.get_mut(&id.to_string()) {
                if *answered {
                    return invalid(format!(
                        "a second response to request {id} ({method}); each request gets exactly one"
                    ));
                }
                *answered = true;
                request_method = Some(method.clone());
            }
        }
    }
    let checked = super::schema::with_edition(unstable, || {
        validate_agent_message(&message, request_method.as_deref())
    });
    let checked = checked.and_then(|()| lock(outstanding).rules.on_received(&message));
    match checked {
        Ok(()) => Incoming::Message(message),
        Err(problem) => invalid(problem),
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn render_messages(messages: &[Value]) -> String {
    if messages.is_empty() {
        return "  (none)".to_string();
    }
    messages
        .iter()
        .map(|message| format!("  {}", shorten(&message.to_string(), 1000)))
        .collect::<Vec<_>>()
        .join("\n")
}

fn shorten(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_string();
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}… ({} bytes in all)", &text[..end], text.len())
}

/// A fresh scratch directory for an agent, with its empty `home` in it.
pub(super) fn new_scratch() -> PathBuf {
    let scratch = temp_dir("agent");
    std::fs::create_dir_all(scratch.join("home"))
        .expect("cannot create the agent's home directory");
    scratch
}

/// A fresh, empty directory under the system temp directory, unique within
/// and across test processes. It is not removed automatically.
pub fn temp_dir(name: &str) -> PathBuf {
    static COUNTER: AtomicUsize = AtomicUsize::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|elapsed| elapsed.subsec_nanos())
        .unwrap_or(0);
    let path = std::env::temp_dir().join("spindle-tests").join(format!(
        "{name}-{}-{}-{nanos}",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::SeqCst)
    ));
    std::fs::create_dir_all(&path)
        .unwrap_or_else(|err| panic!("cannot create {}: {err}", path.display()));
    path
}

/// Writes `contents` to `dir/name` (creating parent directories) and
/// returns the path.
pub fn write_file(dir: &Path, name: &str, contents: impl AsRef<[u8]>) -> PathBuf {
    let path = dir.join(name);
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)
            .unwrap_or_else(|err| panic!("cannot create {}: {err}", parent.display()));
    }
    std::fs::write(&path, contents)
        .unwrap_or_else(|err| panic!("cannot write {}: {err}", path.display()));
    path
}

/// Concatenates `params.update.content.text` of every `session/update` in
/// `messages` whose `sessionUpdate` is `kind` (e.g. `agent_message_chunk`).
pub fn updates_text(messages: &[Value], kind: &str) -> String {
    messages
        .iter()
        .filter(|message| message.get("method").and_then(Value::as_str) == Some("session/update"))
        .filter_map(|message| message.pointer("/params/update"))
        .filter(|update| update.get("sessionUpdate").and_then(Value::as_str) == Some(kind))
        .filter(|update| !is_notice(update))
        .filter_map(|update| update.pointer("/content/text").and_then(Value::as_str))
        .collect()
}

/// Whether an update is one of the agent's own notices (a policy above
/// `auto` at start, no sandbox available, a retry, a compaction): the
/// unstable `notice` update for a client that opted in, else a message
/// chunk whose `messageId` starts with `notice_`. The text helpers leave
/// them out: they collect what the model said.
pub fn is_notice(update: &Value) -> bool {
    update["sessionUpdate"] == "notice"
        || (update["sessionUpdate"] == "agent_message_chunk"
            && update["messageId"]
                .as_str()
                .is_some_and(|id| id.starts_with("notice_")))
}

/// The text of a notice in either form: a chunk's text, or a `notice`'s
/// title and description on a line each.
pub fn notice_text(update: &Value) -> String {
    if update["sessionUpdate"] == "notice" {
        let mut text = update["title"].as_str().unwrap_or_default().to_string();
        if let Some(description) = update["description"].as_str() {
            text.push('\n');
            text.push_str(description);
        }
        text.push('\n');
        text
    } else {
        update["content"]["text"]
            .as_str()
            .unwrap_or_default()
            .to_string()
    }
}

/// The text of the agent's notices among `messages`.
pub fn notices_text(messages: &[Value]) -> String {
    messages
        .iter()
        .filter(|message| message.get("method").and_then(Value::as_str) == Some("session/update"))
        .filter_map(|message| message.pointer("/params/update"))
        .filter(|update| is_notice(update))
        .map(notice_text)
        .collect()
}

/// Runs `command` with `input` on its stdin (then closed) and its stdout
/// and stderr captured.
pub fn output_with_input(
    command: &mut std::process::Command,
    input: &[u8],
) -> std::process::Output {
    use std::process::Stdio;
    let mut child = command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(input).unwrap();
    child.wait_with_output().unwrap()
}

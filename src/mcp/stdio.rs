//! The stdio transport: the server is a child process that reads JSON-RPC
//! messages from its stdin and writes them to its stdout, one per line.
//!
//! The child runs in its own process group so that shutting it down also
//! ends whatever it started. Three helper threads do the blocking work:
//!
//! - `spindle-mcp-stdin` writes queued lines, so a sender never blocks on a
//!   full pipe; dropping the queue closes the child's stdin.
//! - `spindle-mcp-stdout` reads lines and gives them to the router; lines
//!   that are not JSON (banners some servers print) are logged and skipped.
//!   At EOF it closes the router, which fails every waiting request.
//! - `spindle-mcp-stderr` drains stderr (a full pipe would hang the server)
//!   and logs it at debug level with every configured environment value
//!   replaced by `***`.

use super::rpc::{Router, Transport};
use super::{redact, McpError, McpErrorKind};
use crate::cancel::lock;
use crate::process::Tree;
use crossbeam_channel::{unbounded, Sender};
use serde_json::Value;
use std::io::{self, BufRead, BufReader, Read, Write};
use std::process::{Child, ChildStdin, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

/// How long a server gets to exit by itself once its stdin is closed.
const EXIT_GRACE: Duration = Duration::from_millis(200);
/// How long it gets after SIGTERM before SIGKILL.
const TERM_GRACE: Duration = Duration::from_millis(100);
/// How long to wait for a killed server to be reaped.
const REAP_WAIT: Duration = Duration::from_secs(1);
/// The longest line of stderr or of skipped stdout that is logged.
const LOG_LINE_CAP: usize = 2000;

/// A running stdio server.
pub(crate) struct StdioTransport {
    name: String,
    #[cfg_attr(not(test), expect(dead_code, reason = "tests read it"))]
    pid: u32,
    /// The server and every process it started.
    tree: Tree,
    child: Mutex<Child>,
    /// The queue to the stdin writer; `None` once stdin is closed.
    writer: Arc<Mutex<Option<Sender<String>>>>,
    stdout_open: Arc<AtomicBool>,
    router: Arc<Router>,
    closed: AtomicBool,
}

impl StdioTransport {
    /// Starts `command` with `args`, removing `env_remove` from the
    /// inherited environment and adding `env`, and starts the helper
    /// threads.
    pub(crate) fn spawn(
        name: &str,
        command: &str,
        args: &[String],
        env: &[(String, String)],
        env_remove: &[String],
        router: Arc<Router>,
    ) -> Result<StdioTransport, McpError> {
        // `npx` is `npx.cmd` on Windows: found as a shell would find it.
        let resolved = crate::process::program::resolve(command);
        let mut argv = resolved.leading.clone();
        argv.extend(args.iter().map(std::ffi::OsString::from));
        let mut command_builder = crate::process::guard::server(&resolved.program, &argv);
        for name in env_remove {
            command_builder.env_remove(name);
        }
        command_builder
            .envs(env.iter().map(|(key, value)| (key, value)))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        Tree::prepare(&mut command_builder);
        let guarded = crate::process::guard::wraps(&command_builder);
        // Tied to the agent: a server dies with it, even under SIGKILL.
        let mut child = crate::process::spawn_tied_to_agent(command_builder).map_err(|err| {
            McpError::new(format!(
                "cannot start MCP server `{name}` (`{command}`): {err}"
            ))
        })?;
        let pid = child.id();
        let tree = Tree::of(&child, guarded).map_err(|err| {
            let _ = child.wait();
            McpError::new(format!(
                "cannot start MCP server `{name}` (`{command}`): {err}"
            ))
        })?;
        let secrets: Arc<Vec<String>> = Arc::new(env.iter().map(|(_, v)| v.clone()).collect());
        let (stdin, stdout, stderr) =
            match (child.stdin.take(), child.stdout.take(), child.stderr.take()) {
                (Some(stdin), Some(stdout), Some(stderr)) => (stdin, stdout, stderr),
                _ => {
                    stop_child(&mut child, &tree, false);
                    return Err(McpError::new(format!(
                        "cannot start MCP server `{name}`: its pipes are missing"
                    )));
                }
            };
        let (line_sender, lines) = unbounded::<String>();
        let transport = StdioTransport {
            name: name.to_string(),
            pid,
            tree,
            child: Mutex::new(child),
            writer: Arc::new(Mutex::new(Some(line_sender))),
            stdout_open: Arc::new(AtomicBool::new(true)),
            router,
            closed: AtomicBool::new(false),
        };
        // From here on, dropping `transport` on an error kills the child.
        // Detached (all three): each ends when its pipe or channel closes,
        // which dropping the transport (it kills the server) makes sure of.
        let started = thread::Builder::new()
            .name("spindle-mcp-stdin".into())
            .spawn(move || write_lines(stdin, &lines))
            .and_then(|_| {
                let name = name.to_string();
                let secrets = secrets.clone();
                thread::Builder::new()
                    .name("spindle-mcp-stderr".into())
                    .spawn(move || log_stderr(&name, stderr, &secrets))
            })
            .and_then(|_| {
                let name = name.to_string();
                let router = transport.router.clone();
                let writer = transport.writer.clone();
                let open = transport.stdout_open.clone();
                thread::Builder::new()
                    .name("spindle-mcp-stdout".into())
                    .spawn(move || {
                        read_messages(&name, stdout, &router, &writer, &secrets);
                        // The flag goes down before the router closes, so a
                        // waiter that wakes up already sees a dead server.
                        open.store(false, Ordering::SeqCst);
                        router.close(&format!(
                            "MCP server `{name}` closed its output (it exited or crashed)"
                        ));
                    })
            });
        if let Err(err) = started {
            return Err(McpError::new(format!(
                "cannot start MCP server `{name}`: {err}"
            )));
        }
        Ok(transport)
    }
}

impl Transport for StdioTransport {
    fn send(&self, message: &Value, _request_id: Option<u64>) -> Result<(), McpError> {
        // Compact JSON never contains a raw newline: the ones inside
        // strings are escaped.
        let mut line = message.to_string();
        line.push('\n');
        let sent = lock(&self.writer)
            .as_ref()
            .is_some_and(|writer| writer.send(line).is_ok());
        if sent {
            Ok(())
        } else {
            Err(McpError::of(
                McpErrorKind::Closed,
                format!("MCP server `{}` no longer accepts input", self.name),
            ))
        }
    }

    fn is_alive(&self) -> bool {
        if self.closed.load(Ordering::SeqCst) || !self.stdout_open.load(Ordering::SeqCst) {
            return false;
        }
        matches!(lock(&self.child).try_wait(), Ok(None))
    }

    fn close(&self) {
        if self.closed.swap(true, Ordering::SeqCst) {
            return;
        }
        // Waiters learn the real reason before the server's exit closes
        // its output.
        self.router
            .close(&format!("MCP server `{}` was shut down", self.name));
        // Dropping the queue ends the writer thread, which closes stdin: a
        // well-behaved server exits on EOF.
        drop(lock(&self.writer).take());
        let mut child = lock(&self.child);
        let exited = wait_for_exit(&mut child, EXIT_GRACE);
        stop_child(&mut child, &self.tree, exited);
    }

    #[cfg(test)]
    fn pid(&self) -> Option<u32> {
        Some(self.pid)
    }

    fn queues(&self) -> bool {
        true
    }
}

impl Drop for StdioTransport {
    fn drop(&mut self) {
        self.close();
    }
}

/// Polls for the child's exit for at most `limit`; true if it exited (and
/// was reaped).
fn wait_for_exit(child: &mut Child, limit: Duration) -> bool {
    let deadline = Instant::now() + limit;
    loop {
        match child.try_wait() {
            Ok(Some(_)) => return true,
            Ok(None) => {}
            Err(err) => {
                log::debug!("waiting for an MCP server failed: {err}");
                return false;
            }
        }
        if Instant::now() >= deadline {
            return false;
        }
        thread::sleep(Duration::from_millis(5));
    }
}

/// Ends the child and its process group: SIGTERM with a short grace, then
/// SIGKILL, then reaps the child. When the child already exited, the group
/// still gets SIGKILL to end whatever it left behind; its id cannot have
/// been reused while any member of the group lives.
fn stop_child(child: &mut Child, tree: &Tree, exited: bool) {
    let mut exited = exited;
    if !exited {
        tree.terminate();
        exited = wait_for_exit(child, TERM_GRACE);
    }
    tree.kill();
    if !exited && !wait_for_exit(child, REAP_WAIT) {
        log::warn!(
            "MCP server process {} was not reaped after it was killed",
            tree.leader()
        );
    }
}

/// The stdin writer thread: writes queued lines until the queue closes.
fn write_lines(mut stdin: ChildStdin, lines: &crossbeam_channel::Receiver<String>) {
    for line in lines {
        if let Err(err) = stdin
            .write_all(line.as_bytes())
            .and_then(|()| stdin.flush())
        {
            log::debug!("writing to an MCP server failed: {err}");
            return;
        }
    }
}

/// The stdout reader thread: one JSON-RPC message per line.
fn read_messages(
    name: &str,
    stdout: impl Read,
    router: &Router,
    writer: &Mutex<Option<Sender<String>>>,
    secrets: &[String],
) {
    let mut reader = BufReader::with_capacity(64 * 1024, stdout);
    let mut line = Vec::new();
    loop {
        let limit = router.message_cap();
        match read_capped_line(&mut reader, &mut line, limit) {
            Ok(None) => return,
            Ok(Some(false)) => {}
            Ok(Some(true)) => {
                log::warn!("MCP server `{name}` sent a message over {limit} bytes; skipped");
                continue;
            }
            Err(err) => {
                log::debug!("reading from MCP server `{name}` failed: {err}");
                return;
            }
        }
        let text = line.trim_ascii();
        if text.is_empty() {
            continue;
        }
        let value: Value = match serde_json::from_slice(text) {
            Ok(value) => value,
            Err(_) => {
                let shown = String::from_utf8_lossy(text);
                log::debug!(
                    "MCP server `{name}` printed a line that is not JSON (skipped): {}",
                    cap(&redact(&shown, secrets))
                );
                continue;
            }
        };
        for reply in router.handle(value) {
            let mut reply = reply.to_string();
            reply.push('\n');
            if let Some(writer) = lock(writer).as_ref() {
                let _ = writer.send(reply);
            }
        }
    }
}

/// The most bytes of one message (one line) an MCP server may send.
pub(crate) const MESSAGE_CAP: usize = 16 * 1024 * 1024;

/// Reads one line (through its `\n`) into `line`, keeping at most `cap`
/// bytes and skipping the rest of a longer one, so a server that never
/// ends a line cannot grow the agent's memory. `None` at the end of input;
/// `Some(true)` when the line was cut.
pub(crate) fn read_capped_line(
    reader: &mut impl BufRead,
    line: &mut Vec<u8>,
    cap: usize,
) -> io::Result<Option<bool>> {
    line.clear();
    let mut cut = false;
    let mut any = false;
    loop {
        let buffer = reader.fill_buf()?;
        if buffer.is_empty() {
            return Ok(any.then_some(cut));
        }
        any = true;
        let (chunk, done) = match buffer.iter().position(|&b| b == b'\n') {
            Some(at) => (&buffer[..=at], true),
            None => (buffer, false),
        };
        let room = cap.saturating_sub(line.len());
        if chunk.len() > room {
            cut = true;
            line.extend_from_slice(&chunk[..room]);
        } else {
            line.extend_from_slice(chunk);
        }
        let used = chunk.len();
        reader.consume(used);
        if done {
            return Ok(Some(cut));
        }
    }
}

/// The stderr thread: logs each line, secrets replaced.
fn log_stderr(name: &str, stderr: impl Read, secrets: &[String]) {
    let mut reader = BufReader::new(stderr);
    let mut line = Vec::new();
    loop {
        match read_capped_line(&mut reader, &mut line, LOG_LINE_CAP * 4) {
            Ok(None) | Err(_) => return,
            Ok(Some(_)) => {}
        }
        let text = String::from_utf8_lossy(&line);
        let text = text.trim_end();
        if !text.is_empty() {
            log::debug!(
                "MCP server `{name}` stderr: {}",
                cap(&redact(text, secrets))
            );
        }
    }
}

/// Cuts a log line to a reasonable length on a character boundary.
fn cap(text: &str) -> String {
    if text.len() <= LOG_LINE_CAP {
        return text.to_string();
    }
    let mut end = LOG_LINE_CAP;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &text[..end])
}

#[cfg(test)]
mod capped_line_tests {
    use super::read_capped_line;
    use std::io::BufReader;

    #[test]
    fn long_lines_are_cut_and_the_next_line_is_whole() {
        let input = format!("{}\nok\nlast", "x".repeat(100_000));
        let mut reader = BufReader::with_capacity(16, input.as_bytes());
        let mut line = Vec::new();
        assert_eq!(
            read_capped_line(&mut reader, &mut line, 10).unwrap(),
            Some(true)
        );
        assert_eq!(line.len(), 10);
        assert_eq!(
            read_capped_line(&mut reader, &mut line, 10).unwrap(),
            Some(false)
        );
        assert_eq!(line, b"ok\n");
        assert_eq!(
            read_capped_line(&mut reader, &mut line, 10).unwrap(),
            Some(false)
        );
        assert_eq!(line, b"last");
        assert_eq!(read_capped_line(&mut reader, &mut line, 10).unwrap(), None);
    }
}

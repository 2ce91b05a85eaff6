//! The agent process: spawning it, its stdout reader thread and chunk tally,
//! request/answer over JSON-RPC, memory, exit, and opening a session.

use crate::REQUEST_TIMEOUT;
use crossbeam_channel::{Receiver, RecvTimeoutError, Sender};
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Read, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

const EXIT_TIMEOUT: Duration = Duration::from_secs(5);

/// What the stdout reader thread reports.
enum Out {
    /// A line that is not a message chunk, with the chunk tallies so far.
    Line {
        at: Instant,
        text: String,
        tally: Tally,
    },
    /// Stdout ended.
    Eof,
}

#[derive(Clone, Copy, Default)]
struct Tally {
    chunks: u64,
    bytes: u64,
    /// `tok ` in message chunks: the fake server's pieces of text (figure
    /// 4), however the agent split them into lines.
    pieces: u64,
    /// Lines with `"tool_call"` (a call announced), with
    /// `"tool_call_update"`, and those of them with `"completed"`.
    tool_calls: u64,
    tool_updates: u64,
    tool_completed: u64,
    first: Option<Instant>,
    last: Option<Instant>,
    /// Lines with `"session/update"` (message chunks among them), and when
    /// the first and the last of them were read.
    updates: u64,
    first_update: Option<Instant>,
    last_update: Option<Instant>,
}

pub(crate) struct Answer {
    pub(crate) sent: Instant,
    pub(crate) at: Instant,
    pub(crate) result: Value,
    pub(crate) chunks: u64,
    pub(crate) chunk_bytes: u64,
    pub(crate) pieces: u64,
    pub(crate) first_chunk: Option<Instant>,
    pub(crate) last_chunk: Option<Instant>,
    pub(crate) tool_calls: u64,
    pub(crate) tool_updates: u64,
    pub(crate) tool_completed: u64,
    /// The last `tool_call_update` notification line before the answer.
    pub(crate) last_tool_update: Option<String>,
    /// `session/update` lines read between the request and its answer, and
    /// when the first and the last of them were read.
    pub(crate) updates: u64,
    pub(crate) first_update: Option<Instant>,
    pub(crate) last_update: Option<Instant>,
}

impl Answer {
    /// Seconds from writing the request to reading its answer.
    pub(crate) fn elapsed(&self) -> f64 {
        self.at.duration_since(self.sent).as_secs_f64()
    }

    pub(crate) fn stop_reason(&self) -> String {
        self.result
            .get("stopReason")
            .and_then(Value::as_str)
            .unwrap_or("(none)")
            .to_string()
    }
}

#[derive(Clone, Copy)]
pub(crate) struct ProcMemory {
    pub(crate) hwm_kib: u64,
    pub(crate) rss_kib: u64,
}

/// One running agent. Dropping it kills the process.
pub(crate) struct AgentProcess {
    pub(crate) child: Child,
    stdin: Option<ChildStdin>,
    out: Receiver<Out>,
    stderr: Arc<Mutex<Vec<u8>>>,
    next_id: u64,
    /// Chunk tallies at the last answer, to report per-request counts.
    tally: Tally,
}

const STDERR_KEEP: usize = 16 * 1024;

impl AgentProcess {
    pub(crate) fn spawn(mut command: Command) -> Result<AgentProcess, String> {
        command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = command
            .spawn()
            .map_err(|e| format!("cannot start the agent: {e}"))?;
        let stdin = child.stdin.take();
        let stdout = child.stdout.take();
        let stderr = child.stderr.take();
        let (sender, out) = crossbeam_channel::unbounded();
        let kept = Arc::new(Mutex::new(Vec::new()));
        let mut process = AgentProcess {
            child,
            stdin,
            out,
            stderr: kept.clone(),
            next_id: 0,
            tally: Tally::default(),
        };
        let (Some(stdout), Some(stderr)) = (stdout, stderr) else {
            return Err("the agent's pipes are missing".into());
        };
        if let Err(err) = thread::Builder::new()
            .name("bench-stdout".into())
            .spawn(move || read_stdout(stdout, &sender))
        {
            process.kill();
            return Err(format!("cannot start a reader thread: {err}"));
        }
        if let Err(err) = thread::Builder::new()
            .name("bench-stderr".into())
            .spawn(move || keep_stderr(stderr, &kept))
        {
            process.kill();
            return Err(format!("cannot start a reader thread: {err}"));
        }
        Ok(process)
    }

    /// Sends a request and waits for its answer, up to `timeout`. On a
    /// timeout or a dead agent the process is killed.
    pub(crate) fn request(
        &mut self,
        method: &str,
        params: Value,
        timeout: Duration,
    ) -> Result<Answer, String> {
        self.next_id += 1;
        let id = self.next_id;
        let line = format!(
            "{}\n",
            json!({ "jsonrpc": "2.0", "id": id, "method": method, "params": params })
        );
        let Some(stdin) = self.stdin.as_mut() else {
            return Err("stdin already closed".into());
        };
        let sent = Instant::now();
        if let Err(err) = stdin
            .write_all(line.as_bytes())
            .and_then(|()| stdin.flush())
        {
            let why = format!("writing {method} failed: {err}{}", self.stderr_tail());
            self.kill();
            return Err(why);
        }
        let deadline = sent + timeout;
        let mut last_tool_update = None;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.out.recv_timeout(left) {
                Ok(Out::Line { at, text, tally }) => {
                    if text.contains("\"tool_call_update\"") {
                        last_tool_update = Some(text);
                        continue;
                    }
                    if !text.contains("\"id\"") {
                        // A notification: answers and requests carry an id.
                        continue;
                    }
                    let Ok(message) = serde_json::from_str::<Value>(&text) else {
                        eprintln!("bench: the agent wrote a non-JSON line: {text}");
                        continue;
                    };
                    if message.get("method").is_some() || message.get("id") != Some(&json!(id)) {
                        // A notification or a request to the client: not ours.
                        continue;
                    }
                    let before = std::mem::replace(&mut self.tally, tally);
                    if let Some(error) = message.get("error") {
                        return Err(format!("{method} answered an error: {error}"));
                    }
                    return Ok(Answer {
                        sent,
                        at,
                        result: message.get("result").cloned().unwrap_or(Value::Null),
                        chunks: tally.chunks - before.chunks,
                        chunk_bytes: tally.bytes - before.bytes,
                        pieces: tally.pieces - before.pieces,
                        first_chunk: tally.first.filter(|_| tally.chunks > before.chunks),
                        last_chunk: tally.last.filter(|_| tally.chunks > before.chunks),
                        tool_calls: tally.tool_calls - before.tool_calls,
                        tool_updates: tally.tool_updates - before.tool_updates,
                        tool_completed: tally.tool_completed - before.tool_completed,
                        last_tool_update,
                        updates: tally.updates - before.updates,
                        first_update: tally
                            .first_update
                            .filter(|_| tally.updates > before.updates),
                        last_update: tally.last_update.filter(|_| tally.updates > before.updates),
                    });
                }
                Ok(Out::Eof) | Err(RecvTimeoutError::Disconnected) => {
                    // Give the process a moment to be reaped for its status.
                    let status = self.wait_for_exit(Duration::from_millis(500));
                    let why = format!(
                        "the agent closed stdout before answering {method} (exit: {}){}",
                        status.unwrap_or_else(|| "still running".into()),
                        self.stderr_tail()
                    );
                    self.kill();
                    return Err(why);
                }
                Err(RecvTimeoutError::Timeout) => {
                    let why = format!(
                        "no answer to {method} within {:.0} s; agent killed{}",
                        timeout.as_secs_f64(),
                        self.stderr_tail()
                    );
                    self.kill();
                    return Err(why);
                }
            }
        }
    }

    pub(crate) fn memory(&self) -> Result<ProcMemory, String> {
        let [hwm_kib, rss_kib] = proc_status(self.child.id(), ["VmHWM:", "VmRSS:"])?;
        Ok(ProcMemory { hwm_kib, rss_kib })
    }

    /// Closes stdin and waits for the agent to exit; kills it after
    /// `EXIT_TIMEOUT`. Returns the time the exit took.
    pub(crate) fn close(mut self) -> Result<Duration, String> {
        let started = Instant::now();
        drop(self.stdin.take());
        match self.wait_for_exit(EXIT_TIMEOUT) {
            Some(_) => Ok(started.elapsed()),
            None => {
                let why = format!(
                    "the agent did not exit within {:.0} s of stdin EOF; killed{}",
                    EXIT_TIMEOUT.as_secs_f64(),
                    self.stderr_tail()
                );
                self.kill();
                Err(why)
            }
        }
    }

    /// Polls for the exit status; `None` if still running after `limit`.
    fn wait_for_exit(&mut self, limit: Duration) -> Option<String> {
        let deadline = Instant::now() + limit;
        loop {
            match self.child.try_wait() {
                Ok(Some(status)) => return Some(status.to_string()),
                Ok(None) if Instant::now() < deadline => thread::sleep(Duration::from_micros(200)),
                Ok(None) => return None,
                Err(err) => return Some(format!("unknown ({err})")),
            }
        }
    }

    fn kill(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
        }
        let _ = self.child.wait();
    }

    fn stderr_tail(&self) -> String {
        // Let the stderr thread catch up with a dying process.
        thread::sleep(Duration::from_millis(20));
        let kept = self.stderr.lock().map(|k| k.clone()).unwrap_or_default();
        let text = String::from_utf8_lossy(&kept);
        let text = text.trim();
        if text.is_empty() {
            String::new()
        } else {
            format!("\n    agent stderr: {text}")
        }
    }
}

impl Drop for AgentProcess {
    fn drop(&mut self) {
        drop(self.stdin.take());
        self.kill();
    }
}

/// Reads the agent's stdout. Message and thought chunks are only counted
/// (a substring check, so this thread keeps up with the agent); every other
/// line goes to the requester with the tallies so far.
fn read_stdout(stdout: impl Read, sender: &Sender<Out>) {
    let mut reader = BufReader::with_capacity(256 * 1024, stdout);
    let mut line = Vec::with_capacity(4096);
    let mut tally = Tally::default();
    loop {
        line.clear();
        match reader.read_until(b'\n', &mut line) {
            Ok(0) | Err(_) => break,
            Ok(_) => {}
        }
        let at = Instant::now();
        if contains(&line, b"\"session/update\"") {
            tally.updates += 1;
            tally.first_update.get_or_insert(at);
            tally.last_update = Some(at);
        }
        if contains(&line, b"\"agent_message_chunk\"") {
            tally.chunks += 1;
            tally.bytes += line.len() as u64;
            tally.pieces += count(&line, b"tok ");
            tally.first.get_or_insert(at);
            tally.last = Some(at);
            continue;
        }
        if contains(&line, b"\"agent_thought_chunk\"") {
            // Counted above; nobody waits for them.
            continue;
        }
        if contains(&line, b"\"tool_call\"") {
            tally.tool_calls += 1;
        } else if contains(&line, b"\"tool_call_update\"") {
            tally.tool_updates += 1;
            if contains(&line, b"\"completed\"") {
                tally.tool_completed += 1;
            }
        }
        let text = String::from_utf8_lossy(&line).trim().to_string();
        if text.is_empty() {
            continue;
        }
        if sender.send(Out::Line { at, text, tally }).is_err() {
            return;
        }
    }
    let _ = sender.send(Out::Eof);
}

fn count(haystack: &[u8], needle: &[u8]) -> u64 {
    match (std::str::from_utf8(haystack), std::str::from_utf8(needle)) {
        (Ok(text), Ok(needle)) => text.matches(needle).count() as u64,
        _ => 0,
    }
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    match std::str::from_utf8(haystack) {
        // `str::contains` uses a fast substring search.
        Ok(text) => std::str::from_utf8(needle).is_ok_and(|n| text.contains(n)),
        Err(_) => haystack.windows(needle.len()).any(|w| w == needle),
    }
}

fn keep_stderr(stderr: impl Read, kept: &Mutex<Vec<u8>>) {
    let mut stderr = stderr;
    let mut buffer = [0u8; 4096];
    loop {
        match stderr.read(&mut buffer) {
            Ok(0) | Err(_) => return,
            Ok(n) => {
                let Ok(mut kept) = kept.lock() else { return };
                kept.extend_from_slice(&buffer[..n]);
                if kept.len() > STDERR_KEEP {
                    let cut = kept.len() - STDERR_KEEP;
                    kept.drain(..cut);
                }
            }
        }
    }
}

pub(crate) fn new_session_in(
    process: &mut AgentProcess,
    cwd: &Path,
) -> Result<(String, Duration), String> {
    let answer = process.request(
        "session/new",
        json!({ "cwd": cwd.to_string_lossy(), "mcpServers": [] }),
        REQUEST_TIMEOUT,
    )?;
    let session = answer
        .result
        .get("sessionId")
        .and_then(Value::as_str)
        .ok_or_else(|| {
            format!(
                "session/new answered without a sessionId: {}",
                answer.result
            )
        })?
        .to_string();
    Ok((session, answer.at.duration_since(answer.sent)))
}

/// Numeric fields of `/proc/PID/status` (`VmRSS:` in KiB, `Threads:`, ...),
/// in the order asked.
pub(crate) fn proc_status<const N: usize>(pid: u32, names: [&str; N]) -> Result<[u64; N], String> {
    let path = format!("/proc/{pid}/status");
    let status = std::fs::read_to_string(&path).map_err(|e| format!("cannot read {path}: {e}"))?;
    let mut values = [0; N];
    for (value, name) in values.iter_mut().zip(names) {
        *value = status
            .lines()
            .find_map(|line| line.strip_prefix(name))
            .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
            .ok_or_else(|| format!("no {name} in {path}"))?;
    }
    Ok(values)
}

//! Figure 11: the vendor extensions under load, against the fake Chat
//! Completions server (`chat_server`) with replies of the figure's own.
//! (a) `_spindle/session/status` answered while the model streams: 200
//! requests, one after another (10 ms apart), during a live stream of a
//! content chunk every 5 ms. (b) What one `_spindle/session/steer` costs
//! the agent: a prompt whose first model request is answered with a
//! `list_directory` call after a 300 ms pause, steered 100 ms after it was
//! sent, against the same prompt unsteered; the time from the server
//! finishing the first answer to the second request arriving, the model's
//! time left out.
//!
//! `AgentProcess::request` waits for its answer, and both parts write
//! requests while a prompt is unanswered, so the agent is driven here with
//! raw lines.

use crate::chat_server::{
    content, content_chunk, fake_config, stop_chunk, text_chunks, tool_call_chunks, ChatRequest,
    ChatServer, Sse,
};
use crate::report::{Row, Stats};
use crate::workspace::Bench;
use crate::{INIT_TIMEOUT, REQUEST_TIMEOUT, SCRIPTED_PROMPT_TIMEOUT, SUGGESTED};
use crossbeam_channel::{Receiver, RecvTimeoutError};
use serde_json::{json, Value};
use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

/// Status requests written during the stream.
const STATUS_REQUESTS: usize = 200;
/// The live stream: a chunk every `TICK` for `STREAM_FOR`.
const TICK: Duration = Duration::from_millis(5);
const STREAM_FOR: Duration = Duration::from_secs(3);
/// The pause between one status answer and the next request, so that the
/// 200 requests meet about 2 s of the stream, not its first few chunks.
const STATUS_GAP: Duration = Duration::from_millis(10);
/// Runs with a steer, and as many without.
const STEER_RUNS: usize = 15;
/// The server's pause before the tool call; the bench's before the steer.
const MODEL_PAUSE: Duration = Duration::from_millis(300);
const STEER_AFTER: Duration = Duration::from_millis(100);

/// Suggested targets, in ms: the status answer (median) and the steer's
/// added time.
const SUGGESTED_STATUS_MS: f64 = 5.0;
const SUGGESTED_STEER_MS: f64 = 5.0;

/// How the prompts start: the server answers by them.
const STREAM_PROMPT: &str = "Stream: tell me a long story.";
const RUN_MARK: &str = "Run ";

/// Figure 11: status during a stream and the cost of a steer.
pub(crate) fn report_extensions(bench: &Bench, rows: &mut Vec<Row>, failed: &mut bool) {
    println!(
        "## 11. Extensions: _spindle/session/status during a live stream, the cost of one _spindle/session/steer (fake Chat Completions server)"
    );
    let status_target = format!("< {SUGGESTED_STATUS_MS} ms ({SUGGESTED})");
    let steer_target = format!("< {SUGGESTED_STEER_MS} ms ({SUGGESTED})");
    let fail = |rows: &mut Vec<Row>, failed: &mut bool, figure: &str, err: &str, target: &str| {
        *failed = true;
        println!("  FAILED ({figure}): {err}");
        rows.push(Row::failed(figure, err, target));
    };

    let setup = ExtServer::start().and_then(|server| {
        let dir = bench.extensions_dir()?;
        let agent = Agent::spawn(bench, &server.chat.base_url)?;
        Ok((server, dir, agent))
    });
    let (server, dir, mut agent) = match setup {
        Ok(setup) => setup,
        Err(err) => {
            fail(rows, failed, "extensions figure", &err, &status_target);
            return;
        }
    };

    println!(
        "  (a) {STATUS_REQUESTS} status requests, one after another ({} ms apart), while the model streams a chunk every {} ms for {:.0} s:",
        STATUS_GAP.as_millis(),
        TICK.as_millis(),
        STREAM_FOR.as_secs_f64()
    );
    match status_during_stream(&mut agent, &dir) {
        Ok(run) => {
            let stats = Stats::of(&run.samples);
            let p99 = percentile(&run.samples, 0.99);
            println!("    {}", stats.describe_ms());
            println!(
                "    p99 {:.3} ms; {} of {} answers said the turn was running; {} message chunks read meanwhile; the prompt was {} when the last status was answered",
                p99 * 1e3,
                run.running,
                run.samples.len(),
                run.chunks,
                if run.still_streaming { "still streaming" } else { "already answered" }
            );
            println!(
                "    the prompt: {:.2} s, {} message chunks, stopReason {}",
                run.prompt_secs, run.prompt_chunks, run.stop_reason
            );
            if run.running < run.samples.len() || !run.still_streaming {
                println!("    WARNING: not every status was answered during the stream");
            }
            rows.push(Row::suggested(
                &format!(
                    "_spindle/session/status during a live stream (median of {STATUS_REQUESTS})"
                ),
                format!("{:.3} ms", stats.median * 1e3),
                stats.median * 1e3 < SUGGESTED_STATUS_MS,
                &status_target,
            ));
            rows.push(Row::info(
                &format!("_spindle/session/status during a live stream (p99 of {STATUS_REQUESTS})"),
                format!("{:.3} ms", p99 * 1e3),
            ));
        }
        Err(err) => fail(
            rows,
            failed,
            "_spindle/session/status during a live stream",
            &err,
            &status_target,
        ),
    }

    println!(
        "  (b) {STEER_RUNS} prompts steered {} ms after they were sent and {STEER_RUNS} unsteered (alternating, a fresh session each); the model answers with list_directory after {} ms:",
        STEER_AFTER.as_millis(),
        MODEL_PAUSE.as_millis()
    );
    match steer_runs(&mut agent, &server, &dir) {
        Ok(runs) => {
            let with = Stats::of(&runs.with);
            let without = Stats::of(&runs.without);
            let trip = Stats::of(&runs.steer_trips);
            println!(
                "    first answer written to the second request, with a steer:    {}",
                with.describe_ms()
            );
            println!(
                "    first answer written to the second request, without a steer: {}",
                without.describe_ms()
            );
            println!(
                "    the steer request, written to answered:                      {}",
                trip.describe_ms()
            );
            if !runs.odd.is_empty() {
                println!(
                    "    WARNING: {} runs did not go as planned; first: {}",
                    runs.odd.len(),
                    runs.odd[0]
                );
            }
            let figure = "agent overhead of one steer (model excluded)";
            if runs.with.is_empty() || runs.without.is_empty() {
                fail(
                    rows,
                    failed,
                    figure,
                    &format!(
                        "{} steered and {} unsteered runs measured",
                        runs.with.len(),
                        runs.without.len()
                    ),
                    &steer_target,
                );
            } else {
                let overhead = (with.median - without.median) * 1e3;
                println!("    steer overhead (median with − median without): {overhead:.3} ms");
                rows.push(Row::suggested(
                    figure,
                    format!(
                        "{overhead:.2} ms (with a steer {:.2} ms − without {:.2} ms, medians of {} and {})",
                        with.median * 1e3,
                        without.median * 1e3,
                        runs.with.len(),
                        runs.without.len()
                    ),
                    overhead < SUGGESTED_STEER_MS,
                    &steer_target,
                ));
                rows.push(Row::info(
                    &format!(
                        "_spindle/session/steer round trip (median / p90 of {})",
                        runs.steer_trips.len()
                    ),
                    format!("{:.3} / {:.3} ms", trip.median * 1e3, trip.p90 * 1e3),
                ));
            }
            if !runs.odd.is_empty() {
                *failed = true;
                rows.push(Row::failed(
                    "steered runs as planned",
                    &format!(
                        "{} runs went otherwise; first: {}",
                        runs.odd.len(),
                        runs.odd[0]
                    ),
                    "-",
                ));
            }
        }
        Err(err) => fail(
            rows,
            failed,
            "agent overhead of one steer (model excluded)",
            &err,
            &steer_target,
        ),
    }

    if let Err(err) = agent.close() {
        println!("    WARNING: {err}");
    }
    let (others, errors) = server.finish();
    if !others.is_empty() {
        println!(
            "    other requests to the server (answered 404): {}",
            others.join(", ")
        );
    }
    if let Some(first) = errors.first() {
        println!(
            "    WARNING: the fake server failed {} times; first: {first}",
            errors.len()
        );
    }
}

/// Nearest rank.
fn percentile(samples: &[f64], q: f64) -> f64 {
    let mut sorted = samples.to_vec();
    sorted.sort_by(f64::total_cmp);
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1]
}

// ---------------------------------------------------------------------------
// (a) Status during a stream

struct StatusRun {
    /// Seconds from writing each status request to reading its answer.
    samples: Vec<f64>,
    /// Answers whose `turn.state` was `running`.
    running: usize,
    /// Message chunks read while the status requests ran.
    chunks: u64,
    /// The prompt was unanswered after the last status answer.
    still_streaming: bool,
    prompt_secs: f64,
    prompt_chunks: u64,
    stop_reason: String,
}

fn status_during_stream(agent: &mut Agent, dir: &Path) -> Result<StatusRun, String> {
    let session = agent.new_session(dir)?;
    let chunks_before = agent.chunks();
    let prompt_sent = Instant::now();
    let prompt = agent.send(
        "session/prompt",
        json!({ "sessionId": session, "prompt": [{ "type": "text", "text": STREAM_PROMPT }] }),
    )?;
    // Start once the stream is live: its first chunk was read.
    let deadline = Instant::now() + REQUEST_TIMEOUT;
    while agent.chunks() == chunks_before {
        if Instant::now() > deadline {
            return Err("no message chunk within 10 s of the prompt".into());
        }
        if agent.answered(prompt) {
            let (_, answer) = agent.wait(prompt, REQUEST_TIMEOUT)?;
            return Err(format!("the prompt ended before it streamed: {answer}"));
        }
        thread::sleep(Duration::from_micros(200));
    }
    let chunks_at_start = agent.chunks();
    let mut samples = Vec::with_capacity(STATUS_REQUESTS);
    let mut running = 0;
    for n in 1..=STATUS_REQUESTS {
        if n > 1 {
            thread::sleep(STATUS_GAP);
        }
        let sent = Instant::now();
        let id = agent.send("_spindle/session/status", json!({ "sessionId": session }))?;
        let (at, answer) = agent
            .wait(id, REQUEST_TIMEOUT)
            .map_err(|e| format!("status {n}: {e}"))?;
        let result = answer_result(&answer, "_spindle/session/status")?;
        samples.push(at.duration_since(sent).as_secs_f64());
        if result.pointer("/turn/state").and_then(Value::as_str) == Some("running") {
            running += 1;
        }
    }
    let chunks = agent.chunks() - chunks_at_start;
    let still_streaming = !agent.answered(prompt);
    let (at, answer) = agent.wait(prompt, SCRIPTED_PROMPT_TIMEOUT)?;
    let result = answer_result(&answer, "session/prompt")?;
    Ok(StatusRun {
        samples,
        running,
        chunks,
        still_streaming,
        prompt_secs: at.duration_since(prompt_sent).as_secs_f64(),
        prompt_chunks: agent.chunks() - chunks_before,
        stop_reason: stop_reason(result),
    })
}

// ---------------------------------------------------------------------------
// (b) The cost of one steer

struct SteerRuns {
    /// Seconds from the first answer written to the second request read,
    /// with a steer and without.
    with: Vec<f64>,
    without: Vec<f64>,
    /// Seconds from writing each steer to reading its answer.
    steer_trips: Vec<f64>,
    /// Runs that went otherwise (left out of the figures).
    odd: Vec<String>,
}

fn steer_runs(agent: &mut Agent, server: &ExtServer, dir: &Path) -> Result<SteerRuns, String> {
    let mut runs = SteerRuns {
        with: Vec::new(),
        without: Vec::new(),
        steer_trips: Vec::new(),
        odd: Vec::new(),
    };
    // Run 0 warms up and is not counted; then unsteered and steered runs
    // alternate, so that drift touches both alike.
    for n in 0..=2 * STEER_RUNS {
        let steered = n > 0 && n % 2 == 0;
        let session = agent.new_session(dir)?;
        let text = format!("{RUN_MARK}{n}: list the directory, please.");
        let prompt = agent.send(
            "session/prompt",
            json!({ "sessionId": session, "prompt": [{ "type": "text", "text": text }] }),
        )?;
        let steer_text = format!("steer {n}");
        if steered {
            thread::sleep(STEER_AFTER);
            let sent = Instant::now();
            let id = agent.send(
                "_spindle/session/steer",
                json!({ "sessionId": session, "prompt": [{ "type": "text", "text": steer_text }] }),
            )?;
            let (at, answer) = agent
                .wait(id, REQUEST_TIMEOUT)
                .map_err(|e| format!("run {n}: steer: {e}"))?;
            let result = answer_result(&answer, "_spindle/session/steer")
                .map_err(|e| format!("run {n}: {e}"))?;
            runs.steer_trips.push(at.duration_since(sent).as_secs_f64());
            let disposition = result["disposition"].as_str().unwrap_or("(none)");
            if disposition != "steer_accepted" {
                runs.odd
                    .push(format!("run {n}: the steer was {disposition}"));
            }
        }
        let (_, answer) = agent
            .wait(prompt, SCRIPTED_PROMPT_TIMEOUT)
            .map_err(|e| format!("run {n}: {e}"))?;
        let stop = stop_reason(answer_result(&answer, "session/prompt")?);
        if stop != "end_turn" {
            runs.odd.push(format!("run {n}: stopReason {stop}"));
        }
        let Some(log) = server.run(n) else {
            runs.odd.push(format!("run {n}: the server saw no request"));
            continue;
        };
        let (Some(written), Some(second)) = (log.first_written, log.second.as_ref()) else {
            runs.odd.push(format!(
                "run {n}: the server saw {} first and {} second requests",
                u8::from(log.first_written.is_some()),
                u8::from(log.second.is_some())
            ));
            continue;
        };
        if log.requests != 2 {
            runs.odd
                .push(format!("run {n}: {} model requests, not 2", log.requests));
        }
        let has_steer = second.last_is_user && second.last_user.contains(&steer_text);
        if steered != has_steer {
            runs.odd.push(format!(
                "run {n}: {} the second request ends with {} message {:?}",
                if steered {
                    "steered, but"
                } else {
                    "unsteered, but"
                },
                if second.last_is_user {
                    "the user"
                } else {
                    "a non-user"
                },
                crate::report::one_line(&second.last_user, 60)
            ));
            continue;
        }
        let gap = second
            .received
            .saturating_duration_since(written)
            .as_secs_f64();
        match (n, steered) {
            (0, _) => {}
            (_, true) => runs.with.push(gap),
            (_, false) => runs.without.push(gap),
        }
    }
    Ok(runs)
}

fn answer_result<'a>(answer: &'a Value, method: &str) -> Result<&'a Value, String> {
    if let Some(error) = answer.get("error") {
        return Err(format!("{method} answered an error: {error}"));
    }
    answer
        .get("result")
        .ok_or_else(|| format!("{method} answered without a result: {answer}"))
}

fn stop_reason(result: &Value) -> String {
    result["stopReason"]
        .as_str()
        .unwrap_or("(none)")
        .to_string()
}

impl Bench {
    /// The session cwd of figure 11, with a few files to list.
    fn extensions_dir(&self) -> Result<PathBuf, String> {
        let io = |what: &str, err: std::io::Error| format!("{what}: {err}");
        let dir = self.work.dir.join("extensions");
        std::fs::create_dir_all(dir.join("src"))
            .map_err(|e| io("cannot create the session cwd", e))?;
        for (name, text) in [
            ("README.md", "# A project\n"),
            ("Cargo.toml", "[package]\nname = \"a\"\n"),
            ("src/main.rs", "fn main() {}\n"),
        ] {
            std::fs::write(dir.join(name), text)
                .map_err(|e| io(&format!("cannot write {name}"), e))?;
        }
        dir.canonicalize()
            .map_err(|e| io("cannot resolve the session cwd", e))
    }
}

// ---------------------------------------------------------------------------
// The agent, driven with raw lines

/// What the stdout reader passes on: every line but message chunks, with
/// the time it was read.
struct Line {
    at: Instant,
    text: String,
}

struct Agent {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<Line>,
    /// Message chunk lines read so far.
    chunks: Arc<AtomicU64>,
    /// Answers read while waiting for another one.
    stash: HashMap<u64, (Instant, Value)>,
    next_id: u64,
    stderr: PathBuf,
}

impl Agent {
    fn spawn(bench: &Bench, base_url: &str) -> Result<Agent, String> {
        let config = fake_config(base_url, "BENCH_EXT_KEY", "ext", 128_000);
        let config_path = bench.work.dir.join("extensions.config.json");
        let stderr_path = bench.work.dir.join("extensions.stderr");
        let stderr = std::fs::File::create(&stderr_path)
            .map_err(|e| format!("cannot create {}: {e}", stderr_path.display()))?;
        let mut command = bench.chat_agent(&config_path, &config, "BENCH_EXT_KEY")?;
        command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::from(stderr));
        let mut child = command
            .spawn()
            .map_err(|e| format!("cannot start the agent: {e}"))?;
        let stdin = child.stdin.take();
        let Some(stdout) = child.stdout.take() else {
            let _ = child.kill();
            let _ = child.wait();
            return Err("the agent's stdout is missing".into());
        };
        let (sender, lines) = crossbeam_channel::unbounded();
        let chunks = Arc::new(AtomicU64::new(0));
        let counted = chunks.clone();
        let reader = thread::Builder::new()
            .name("bench-ext-stdout".into())
            .spawn(move || {
                let mut reader = BufReader::with_capacity(256 * 1024, stdout);
                let mut line = String::new();
                loop {
                    line.clear();
                    match reader.read_line(&mut line) {
                        Ok(0) | Err(_) => return,
                        Ok(_) => {}
                    }
                    let at = Instant::now();
                    if line.contains("\"agent_message_chunk\"") {
                        counted.fetch_add(1, Ordering::SeqCst);
                        continue;
                    }
                    let text = line.trim().to_string();
                    if !text.is_empty() && sender.send(Line { at, text }).is_err() {
                        return;
                    }
                }
            });
        let mut agent = Agent {
            child,
            stdin,
            lines,
            chunks,
            stash: HashMap::new(),
            next_id: 0,
            stderr: stderr_path,
        };
        if let Err(err) = reader {
            return Err(format!("cannot start a reader thread: {err}"));
        }
        let id = agent.send("initialize", json!({ "protocolVersion": 1 }))?;
        let (_, answer) = agent.wait(id, INIT_TIMEOUT)?;
        answer_result(&answer, "initialize")?;
        Ok(agent)
    }

    fn chunks(&self) -> u64 {
        self.chunks.load(Ordering::SeqCst)
    }

    /// Writes a request; returns its id.
    fn send(&mut self, method: &str, params: Value) -> Result<u64, String> {
        self.next_id += 1;
        let id = self.next_id;
        let line = format!(
            "{}\n",
            json!({ "jsonrpc": "2.0", "id": id, "method": method, "params": params })
        );
        let stdin = self.stdin.as_mut().ok_or("stdin already closed")?;
        stdin
            .write_all(line.as_bytes())
            .and_then(|()| stdin.flush())
            .map_err(|e| format!("writing {method} failed: {e}{}", self.stderr_tail()))?;
        Ok(id)
    }

    /// Reads what stdout has so far; answers go to the stash.
    fn drain(&mut self) {
        while let Ok(line) = self.lines.try_recv() {
            self.keep(line);
        }
    }

    fn keep(&mut self, line: Line) -> Option<u64> {
        if !line.text.contains("\"id\"") {
            return None;
        }
        let message: Value = serde_json::from_str(&line.text).ok()?;
        if message.get("method").is_some() {
            // A request to the client (none with --permissions yolo).
            return None;
        }
        let id = message.get("id")?.as_u64()?;
        self.stash.insert(id, (line.at, message));
        Some(id)
    }

    /// Whether the answer to `id` was read.
    fn answered(&mut self, id: u64) -> bool {
        self.drain();
        self.stash.contains_key(&id)
    }

    /// Waits for the answer to `id`: when it was read, and the message.
    fn wait(&mut self, id: u64, timeout: Duration) -> Result<(Instant, Value), String> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(answer) = self.stash.remove(&id) {
                return Ok(answer);
            }
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) => {
                    self.keep(line);
                }
                Err(RecvTimeoutError::Timeout) => {
                    return Err(format!(
                        "no answer to request {id} within {:.0} s{}",
                        timeout.as_secs_f64(),
                        self.stderr_tail()
                    ))
                }
                Err(RecvTimeoutError::Disconnected) => {
                    let status = self.child.try_wait().ok().flatten();
                    return Err(format!(
                        "the agent closed stdout before answering request {id} (exit: {}){}",
                        status.map_or("still running".into(), |s| s.to_string()),
                        self.stderr_tail()
                    ));
                }
            }
        }
    }

    fn new_session(&mut self, cwd: &Path) -> Result<String, String> {
        let id = self.send(
            "session/new",
            json!({ "cwd": cwd.to_string_lossy(), "mcpServers": [] }),
        )?;
        let (_, answer) = self.wait(id, REQUEST_TIMEOUT)?;
        answer_result(&answer, "session/new")?
            .get("sessionId")
            .and_then(Value::as_str)
            .map(str::to_string)
            .ok_or_else(|| format!("session/new answered without a sessionId: {answer}"))
    }

    /// Closes stdin and waits up to 5 s for the agent to exit.
    fn close(mut self) -> Result<(), String> {
        drop(self.stdin.take());
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            match self.child.try_wait() {
                Ok(Some(_)) => return Ok(()),
                Ok(None) if Instant::now() < deadline => thread::sleep(Duration::from_millis(1)),
                Ok(None) => {
                    return Err("the agent did not exit within 5 s of stdin EOF; killed".into())
                }
                Err(err) => return Err(format!("cannot wait for the agent: {err}")),
            }
        }
    }

    fn stderr_tail(&self) -> String {
        thread::sleep(Duration::from_millis(20));
        let text = std::fs::read(&self.stderr).unwrap_or_default();
        let text = String::from_utf8_lossy(&text[text.len().saturating_sub(2048)..]);
        let text = text.trim();
        if text.is_empty() {
            String::new()
        } else {
            format!("\n    agent stderr: {text}")
        }
    }
}

impl Drop for Agent {
    fn drop(&mut self) {
        drop(self.stdin.take());
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
        }
        let _ = self.child.wait();
    }
}

// ---------------------------------------------------------------------------
// The fake server's replies

/// The second model request of a run.
struct Second {
    /// When its head was read.
    received: Instant,
    /// Its last message is a user message, and the text of the last user
    /// message.
    last_is_user: bool,
    last_user: String,
}

/// What the server saw of one run (`Run N: …`).
#[derive(Default)]
struct RunLog {
    requests: usize,
    /// When the first answer (the tool call) was written (just before the
    /// write).
    first_written: Option<Instant>,
    second: Option<Second>,
}

type Runs = Mutex<HashMap<usize, RunLog>>;

/// A Chat Completions server: the stream prompt gets a long live stream;
/// a run's first request a `list_directory` call after `MODEL_PAUSE`;
/// anything after a tool result a short text.
struct ExtServer {
    chat: ChatServer<()>,
    runs: Arc<Runs>,
}

impl ExtServer {
    fn start() -> Result<ExtServer, String> {
        let runs = Arc::new(Runs::default());
        let logged = runs.clone();
        let chat = ChatServer::start("ext", move |request, sse| reply(request, sse, &logged))?;
        Ok(ExtServer { chat, runs })
    }

    /// Takes what the server saw of run `n`.
    fn run(&self, n: usize) -> Option<RunLog> {
        self.runs.lock().ok()?.remove(&n)
    }

    /// Waits for the connections in flight, then takes the other requests
    /// and the errors.
    fn finish(&self) -> (Vec<String>, Vec<String>) {
        let log = self.chat.finish();
        (log.others, log.errors)
    }
}

/// Answers a chat request by its first user message and whether a tool
/// result came yet.
fn reply(request: &ChatRequest, sse: &mut Sse, runs: &Runs) -> Result<(), String> {
    let messages = request.messages();
    let first_user = messages
        .iter()
        .find(|m| m["role"] == "user")
        .map(content)
        .unwrap_or_default();
    let after_tool = messages.iter().any(|m| m["role"] == "tool");
    // `Run N: …`: the run it belongs to.
    let run = first_user
        .strip_prefix(RUN_MARK)
        .and_then(|rest| rest.split(':').next())
        .and_then(|n| n.parse::<usize>().ok());

    if first_user == STREAM_PROMPT && !after_tool {
        // A long, live stream.
        sse.send(&[])?;
        sse.send(&[content_chunk("Once upon a time")])?;
        let started = Instant::now();
        while started.elapsed() < STREAM_FOR {
            thread::sleep(TICK);
            sse.send(&[content_chunk(" and then")])?;
        }
        sse.finish(&[stop_chunk()])?;
    } else if let (Some(run), false) = (run, after_tool) {
        if let Ok(mut runs) = runs.lock() {
            runs.entry(run).or_default().requests += 1;
        }
        sse.send(&[])?;
        thread::sleep(MODEL_PAUSE);
        let chunks = tool_call_chunks(&format!("call_{}", request.call), "list_directory", "{}");
        // Taken just before the write (a few hundred bytes to a local
        // socket, microseconds): after it, this thread may lose the CPU to
        // the agent reacting, and the second request would seem to arrive
        // before the first answer was written.
        let written = Instant::now();
        sse.finish(&chunks)?;
        if let Ok(mut runs) = runs.lock() {
            runs.entry(run).or_default().first_written = Some(written);
        }
    } else {
        if let Some(run) = run {
            let last = messages.last().unwrap_or(&Value::Null);
            let last_user = request.last_user().into_owned();
            if let Ok(mut runs) = runs.lock() {
                let entry = runs.entry(run).or_default();
                entry.requests += 1;
                if entry.second.is_none() {
                    entry.second = Some(Second {
                        received: request.received,
                        last_is_user: last["role"] == "user",
                        last_user,
                    });
                }
            }
        }
        sse.finish(&text_chunks("Listed."))?;
    }
    Ok(())
}

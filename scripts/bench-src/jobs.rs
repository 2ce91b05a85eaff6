//! Figure 13: background jobs through the release binary, the way an
//! editor sees them. The scripted model starts each job with one
//! `run_command` call of `background: true` (`--permissions yolo`); the
//! bench then polls `_spindle/job` until the job is no longer `running`.
//! (a) The agent's peak memory (`VmHWM`) while a job writes 1 GB of
//! output, against its `VmHWM` just before, at the default log cap
//! (`tools.command_log_bytes` unset), with the size of the job's log.
//! (b) With `tools.command_log_bytes` at 200 MB, a job that writes a
//! 100 MB log: the latency of `_spindle/job/transcript` windows near its
//! start, middle and end, of a `shell-log:` resource window at its end,
//! and of `workspace:` resource windows of the last 2,000 lines of a
//! 100 MB text file (over the agent's cap on the files a window reads) and
//! of a file just under that cap.

use crate::agent::{new_session_in, AgentProcess};
use crate::report::{group, one_line, Row, Stats};
use crate::workspace::Bench;
use crate::{INIT_TIMEOUT, MIB, REQUEST_TIMEOUT, SCRIPTED_PROMPT_TIMEOUT, SUGGESTED};
use serde_json::{json, Value};
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::thread;
use std::time::{Duration, Instant};

/// What the big job writes, and its command.
const BIG_JOB_BYTES: u64 = 1_000_000_000;
const BIG_JOB: &str = "yes xxxxxxxx | head -c 1000000000";
/// The job whose log the windows read, and the log cap that keeps it all.
const LOG_JOB_BYTES: u64 = 100_000_000;
const LOG_JOB: &str =
    "yes 'spindle bench: one line of a background job log, written over and over' | head -c 100000000";
const BIG_LOG_CAP: u64 = 200_000_000;
/// The small job of the warm-up prompt.
const WARM_JOB: &str = "echo warm";
/// The agent's default `tools.command_log_bytes` (src/process/logs.rs).
const DEFAULT_LOG_CAP: u64 = 4 * 1024 * 1024;

/// The workspace files: 100 MB, and just under the agent's cap on the
/// files a resource window reads (`RESOURCE_FILE_CAP`,
/// src/agent/handlers/extensions.rs).
const BIG_FILE_BYTES: u64 = 100_000_000;
const RESOURCE_FILE_CAP: u64 = 16 * 1024 * 1024;
const UNDER_CAP_BYTES: u64 = RESOURCE_FILE_CAP - 64 * 1024;

/// The prompts the script answers with a job.
const WARM_PROMPT: &str = "Start the warm-up job.";
const BIG_PROMPT: &str = "Start the 1 GB job.";
const LOG_PROMPT: &str = "Start the 100 MB job.";

/// How long a job may run, and how often it is polled.
const JOB_TIMEOUT: Duration = Duration::from_secs(120);
const POLL: Duration = Duration::from_millis(20);
/// How long the bench waits for the turn a job's end starts to be over.
const SETTLE_TIMEOUT: Duration = Duration::from_secs(1);

/// Timed calls per window kind (after one discarded warm-up call).
const CALLS: usize = 20;
/// `_spindle/job/transcript`'s default `limit`; the largest `byteCount`
/// of a `shell-log:` window; the largest `lineCount` of a `workspace:` one.
const TRANSCRIPT_LIMIT: u64 = 65_536;
const SHELL_LOG_COUNT: u64 = 262_144;
const WINDOW_LINES: u64 = 2_000;

/// Suggested targets.
const SUGGESTED_GROWTH_MIB: f64 = 16.0;
const SUGGESTED_WINDOW_MS: f64 = 50.0;

/// Figure 13: runs both parts, prints them and adds their rows.
pub(crate) fn report_jobs(bench: &Bench, rows: &mut Vec<Row>, failed: &mut bool) {
    println!(
        "## 13. Background jobs: agent memory while a job writes 1 GB; transcript and resource windows of a 100 MB log and file (scripted run_command background: true)"
    );
    let (dir, workspace) = match bench.jobs_dir() {
        Ok(dirs) => dirs,
        Err(err) => {
            *failed = true;
            println!("  FAILED: {err}");
            rows.push(Row::failed("background jobs figure", &err, "-"));
            return;
        }
    };

    let growth_target = format!("< {SUGGESTED_GROWTH_MIB} MiB above the idle agent ({SUGGESTED})");
    let growth_figure = "agent VmHWM growth while a background job writes 1 GB";
    println!(
        "  (a) one job writes {} bytes (`{BIG_JOB}`), tools.command_log_bytes at its default ({} bytes):",
        group(BIG_JOB_BYTES),
        group(DEFAULT_LOG_CAP)
    );
    match big_job(bench, &dir, &workspace) {
        Ok(run) => {
            run.print();
            let growth = run.growth_mib();
            rows.push(Row::suggested(
                growth_figure,
                format!(
                    "{growth:+.2} MiB (VmHWM {:.2} MiB idle, {:.2} MiB after the job)",
                    run.idle.hwm_kib as f64 / 1024.0,
                    run.after.hwm_kib as f64 / 1024.0
                ),
                growth < SUGGESTED_GROWTH_MIB,
                &growth_target,
            ));
            rows.push(Row::info(
                "job log after 1 GB of output, default cap (totalBytes)",
                format!(
                    "{} bytes ({:.2} MiB)",
                    group(run.log_bytes),
                    run.log_bytes as f64 / MIB
                ),
            ));
        }
        Err(err) => {
            *failed = true;
            println!("    FAILED: {err}");
            rows.push(Row::failed(growth_figure, &err, &growth_target));
        }
    }

    let window_target = format!("< {SUGGESTED_WINDOW_MS} ms ({SUGGESTED})");
    println!(
        "  (b) tools.command_log_bytes {}; one job writes a {}-byte log (`{LOG_JOB}`); {CALLS} calls per window after one warm-up, one after another:",
        group(BIG_LOG_CAP),
        group(LOG_JOB_BYTES)
    );
    match windows(bench, &dir, &workspace) {
        Ok(kinds) => {
            for kind in &kinds {
                kind.print();
                rows.push(kind.row(&window_target));
            }
        }
        Err(err) => {
            *failed = true;
            println!("    FAILED: {err}");
            rows.push(Row::failed(
                "transcript and resource windows, 100 MB log",
                &err,
                &window_target,
            ));
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

// ---------------------------------------------------------------------------
// The agent and its jobs

/// An agent of figure 13: a scripted model, a config file, a session
/// database in the figure's folder, and one session in `dir`.
struct JobsAgent {
    process: AgentProcess,
    session: String,
    /// The session's folder of job logs.
    logs: PathBuf,
}

/// One job as `_spindle/job` last showed it, with how long it ran as the
/// bench saw it and the agent's largest `VmRSS` sampled meanwhile.
struct Ended {
    id: String,
    item: Value,
    seconds: f64,
    /// The agent's `VmHWM` when the prompt that started the job was
    /// answered.
    hwm_at_answer_kib: u64,
    max_rss_kib: u64,
    polls: usize,
}

impl Bench {
    /// The figure's folder (the scripts, configs and session databases,
    /// with the jobs' logs beside them) and in it the sessions' cwd,
    /// `workspace`: only the files the windows read, so that the
    /// checkpoint scans around a command read neither the databases nor
    /// the logs.
    fn jobs_dir(&self) -> Result<(PathBuf, PathBuf), String> {
        let dir = self.work.dir.join("jobs");
        let workspace = dir.join("workspace");
        std::fs::create_dir_all(&workspace)
            .map_err(|e| format!("cannot create {}: {e}", workspace.display()))?;
        let resolve = |path: &Path| {
            path.canonicalize()
                .map_err(|e| format!("cannot resolve {}: {e}", path.display()))
        };
        Ok((resolve(&dir)?, resolve(&workspace)?))
    }
}

/// The script: each prompt is answered by a rule with its job's
/// `run_command` call, then a short text; anything else (the turns a
/// job's end starts) by the fallback text.
fn write_jobs_script(path: &Path) -> Result<(), String> {
    let rule = |prompt: &str, command: &str| {
        json!({
            "when": { "equals": prompt },
            "replies": [
                { "tool_calls": [{ "name": "run_command",
                                   "arguments": { "command": command, "background": true } }] },
                { "text": "Started." }
            ]
        })
    };
    let script = json!({
        "rules": [
            rule(WARM_PROMPT, WARM_JOB),
            rule(BIG_PROMPT, BIG_JOB),
            rule(LOG_PROMPT, LOG_JOB),
        ],
        "fallback": { "text": "Noted." }
    });
    std::fs::write(path, script.to_string())
        .map_err(|e| format!("cannot write {}: {e}", path.display()))
}

impl JobsAgent {
    /// Starts an agent (`--script`, `--config` with `config`, `--db` in
    /// the folder `name` of `dir`, `--permissions yolo`), initializes it
    /// and opens a session in `workspace`.
    fn start(
        bench: &Bench,
        dir: &Path,
        workspace: &Path,
        name: &str,
        config: &Value,
    ) -> Result<JobsAgent, String> {
        let script = dir.join("jobs.script.json");
        write_jobs_script(&script)?;
        let db_dir = dir.join(name);
        std::fs::create_dir_all(&db_dir)
            .map_err(|e| format!("cannot create {}: {e}", db_dir.display()))?;
        let db = db_dir.join("spindle.db");
        let config_path = dir.join(format!("{name}.config.json"));
        let mut command = bench.chat_agent(&config_path, config, "BENCH_JOBS_KEY")?;
        command
            .arg("--script")
            .arg(&script)
            .arg("--db")
            .arg(&db)
            .args(["--max-steps", "10"]);
        let mut process = AgentProcess::spawn(command)?;
        process.request("initialize", json!({ "protocolVersion": 1 }), INIT_TIMEOUT)?;
        let (session, _) = new_session_in(&mut process, workspace)?;
        let logs = db_dir.join("logs").join(&session);
        Ok(JobsAgent {
            process,
            session,
            logs,
        })
    }

    fn call(&mut self, method: &str, mut params: Value) -> Result<Value, String> {
        params["sessionId"] = json!(self.session);
        Ok(self
            .process
            .request(method, params, REQUEST_TIMEOUT)?
            .result)
    }

    /// The turn counter and state of `_spindle/session/status`.
    fn turn(&mut self) -> Result<(u64, String), String> {
        let status = self.call("_spindle/session/status", json!({}))?;
        Ok((
            status
                .pointer("/turn/epoch")
                .and_then(Value::as_u64)
                .unwrap_or(0),
            status
                .pointer("/turn/state")
                .and_then(Value::as_str)
                .unwrap_or("(none)")
                .to_string(),
        ))
    }

    /// Sends `prompt` (which the script answers with a background job) and
    /// returns the new job's id, from `_spindle/jobs`.
    fn start_job(&mut self, prompt: &str, command: &str) -> Result<String, String> {
        let answer = self.process.request(
            "session/prompt",
            json!({ "sessionId": self.session, "prompt": [{ "type": "text", "text": prompt }] }),
            SCRIPTED_PROMPT_TIMEOUT,
        )?;
        if answer.stop_reason() != "end_turn" || answer.tool_calls != 1 {
            println!(
                "    WARNING: the prompt ended with {} after {} tool calls, expected end_turn after 1",
                answer.stop_reason(),
                answer.tool_calls
            );
        }
        let jobs = self.call("_spindle/jobs", json!({}))?;
        jobs["items"]
            .as_array()
            .and_then(|items| {
                items
                    .iter()
                    .rev()
                    .find(|item| item["command"] == command)
                    .and_then(|item| item["jobId"].as_str())
            })
            .map(str::to_string)
            .ok_or_else(|| format!("no job with command {command:?} in _spindle/jobs: {jobs}"))
    }

    /// Polls `_spindle/job` every `POLL` until the job is not `running`;
    /// past `JOB_TIMEOUT` the job is cancelled and this fails.
    fn wait_for_end(&mut self, id: &str) -> Result<Ended, String> {
        let started = Instant::now();
        let hwm_at_answer_kib = self.process.memory()?.hwm_kib;
        let mut max_rss_kib = 0;
        let mut polls = 0;
        loop {
            let item = self.call("_spindle/job", json!({ "jobId": id }))?;
            polls += 1;
            if let Ok(memory) = self.process.memory() {
                max_rss_kib = max_rss_kib.max(memory.rss_kib);
            }
            if item["state"] != "running" {
                return Ok(Ended {
                    id: id.to_string(),
                    item,
                    seconds: started.elapsed().as_secs_f64(),
                    hwm_at_answer_kib,
                    max_rss_kib,
                    polls,
                });
            }
            if started.elapsed() > JOB_TIMEOUT {
                let _ = self.call("_spindle/job/cancel", json!({ "jobId": id }));
                return Err(format!(
                    "job {id} still running after {:.0} s (cancelled); last: {item}",
                    JOB_TIMEOUT.as_secs_f64()
                ));
            }
            thread::sleep(POLL);
        }
    }

    /// Waits for the turn a job's end starts (the turn counter past
    /// `epoch`, then idle), up to `SETTLE_TIMEOUT`, so that it is not
    /// measured with what follows. Returns what it saw, for the output.
    fn settle(&mut self, epoch: u64) -> Result<String, String> {
        let started = Instant::now();
        loop {
            let (now, state) = self.turn()?;
            if now > epoch && state != "running" {
                return Ok(format!(
                    "the job's end started turn {now}, over {:.0} ms after the job was seen ended",
                    started.elapsed().as_secs_f64() * 1e3
                ));
            }
            if started.elapsed() > SETTLE_TIMEOUT {
                return Ok(format!(
                    "no turn for the job's end within {:.0} s (still turn {now}, {state}: the job ended while the turn that started it ran)",
                    SETTLE_TIMEOUT.as_secs_f64()
                ));
            }
            thread::sleep(Duration::from_millis(5));
        }
    }

    /// Runs one job to its end (and the turn its end starts).
    fn run_job(&mut self, prompt: &str, command: &str) -> Result<(Ended, String), String> {
        let id = self.start_job(prompt, command)?;
        let (epoch, _) = self.turn()?;
        let ended = self.wait_for_end(&id)?;
        let settled = self.settle(epoch)?;
        Ok((ended, settled))
    }

    /// The size of a job's log as a `shell-log:` window tells it.
    fn log_total(&mut self, id: &str) -> Result<u64, String> {
        let window = self.call(
            "_spindle/resource",
            json!({ "uri": format!("shell-log:{id}"), "byteOffset": 0, "byteCount": 0 }),
        )?;
        window["totalBytes"]
            .as_u64()
            .ok_or_else(|| format!("a shell-log window without totalBytes: {window}"))
    }

    /// The size of the job's log file on disk, if it is where it should be.
    fn log_file_bytes(&self, id: &str) -> Option<u64> {
        std::fs::metadata(self.logs.join(format!("{id}.log")))
            .ok()
            .map(|m| m.len())
    }
}

// ---------------------------------------------------------------------------
// (a) Memory while a job writes 1 GB

struct BigJob {
    idle: crate::agent::ProcMemory,
    after: crate::agent::ProcMemory,
    ended: Ended,
    warm_settled: String,
    settled: String,
    log_bytes: u64,
    log_file: Option<u64>,
    log_path: PathBuf,
    tail: String,
}

impl BigJob {
    fn growth_mib(&self) -> f64 {
        (self.after.hwm_kib as f64 - self.idle.hwm_kib as f64) / 1024.0
    }

    fn print(&self) {
        let item = &self.ended.item;
        let output = item["outputBytes"].as_u64().unwrap_or(0);
        println!(
            "    warm-up prompt with a small job (`{WARM_JOB}`) first; {}",
            self.warm_settled
        );
        println!(
            "    idle agent before the job: VmHWM {:.2} MiB, VmRSS {:.2} MiB",
            self.idle.hwm_kib as f64 / 1024.0,
            self.idle.rss_kib as f64 / 1024.0
        );
        println!(
            "    the job: state {}, exitCode {}, outputBytes {}, seen ended after {:.2} s ({:.0} MB/s; {} polls of _spindle/job)",
            item["state"].as_str().unwrap_or("(none)"),
            item["exitCode"],
            group(output),
            self.ended.seconds,
            output as f64 / 1e6 / self.ended.seconds.max(1e-9),
            self.ended.polls
        );
        println!(
            "    agent VmHWM when the prompt that started it was answered (the job running): {:.2} MiB",
            self.ended.hwm_at_answer_kib as f64 / 1024.0
        );
        println!("    {}", self.settled);
        println!(
            "    its log: totalBytes {} ({:.2} MiB); the file {}: {}",
            group(self.log_bytes),
            self.log_bytes as f64 / MIB,
            self.log_path.display(),
            self.log_file
                .map_or("not found".to_string(), |n| format!("{} bytes", group(n)))
        );
        println!("    the log ends with: {}", one_line(&self.tail, 120));
        println!(
            "    agent after the job: VmHWM {:.2} MiB ({:+.2} MiB), VmRSS {:.2} MiB; largest VmRSS sampled during the job {:.2} MiB",
            self.after.hwm_kib as f64 / 1024.0,
            self.growth_mib(),
            self.after.rss_kib as f64 / 1024.0,
            self.ended.max_rss_kib as f64 / 1024.0
        );
        if output != BIG_JOB_BYTES {
            println!(
                "    WARNING: the job wrote {} bytes, not {}",
                group(output),
                group(BIG_JOB_BYTES)
            );
        }
        if item["state"] != "exited" || item["exitCode"] != 0 {
            println!("    WARNING: the job did not exit with 0: {item}");
        }
    }
}

fn big_job(bench: &Bench, dir: &Path, workspace: &Path) -> Result<BigJob, String> {
    let mut agent = JobsAgent::start(bench, dir, workspace, "default-cap", &json!({}))?;
    let (_, warm_settled) = agent.run_job(WARM_PROMPT, WARM_JOB)?;
    let idle = agent.process.memory()?;
    let (ended, settled) = agent.run_job(BIG_PROMPT, BIG_JOB)?;
    let after = agent.process.memory()?;
    let log_bytes = agent.log_total(&ended.id)?;
    let tail = agent.call(
        "_spindle/resource",
        json!({
            "uri": format!("shell-log:{}", ended.id),
            "byteOffset": log_bytes.saturating_sub(120),
            "byteCount": 120
        }),
    )?;
    let log_file = agent.log_file_bytes(&ended.id);
    let log_path = agent.logs.join(format!("{}.log", ended.id));
    agent.process.close()?;
    Ok(BigJob {
        idle,
        after,
        ended,
        warm_settled,
        settled,
        log_bytes,
        log_file,
        log_path,
        tail: tail["text"].as_str().unwrap_or_default().to_string(),
    })
}

// ---------------------------------------------------------------------------
// (b) Windows of a 100 MB log and of large workspace files

/// One kind of window: its calls' times, and what the answers said.
struct WindowKind {
    figure: String,
    /// What was asked, for the output.
    asked: String,
    samples: Vec<f64>,
    /// What the first timed answer held, or the error it was refused with.
    served: Result<String, String>,
    /// Answers that differed from the first (in size or error).
    odd: usize,
    /// The untimed warm-up call (for a `workspace:` window: the one that
    /// indexes the file).
    first: f64,
}

impl WindowKind {
    fn print(&self) {
        let stats = Stats::of(&self.samples);
        println!("    {}: {}", self.figure, self.asked);
        match &self.served {
            Ok(served) => println!("      served: {served}"),
            Err(refused) => println!("      REFUSED: {refused}"),
        }
        println!("      {}", stats.describe_ms());
        println!("      first call: {:.3} ms", self.first * 1e3);
        if self.odd > 0 {
            println!(
                "      WARNING: {} answers differed from the first",
                self.odd
            );
        }
    }

    fn row(&self, target: &str) -> Row {
        let stats = Stats::of(&self.samples);
        let times = format!(
            "{:.3} / {:.3} ms (first call {:.1} ms)",
            stats.median * 1e3,
            stats.max * 1e3,
            self.first * 1e3
        );
        let figure = format!("{} (median / max of {})", self.figure, self.samples.len());
        match &self.served {
            Ok(_) => Row::suggested(
                &figure,
                times,
                stats.median * 1e3 < SUGGESTED_WINDOW_MS,
                target,
            ),
            Err(refused) => Row::suggested(
                &figure,
                format!(
                    "refused ({}), answered in {times}",
                    refused.replace('|', "/")
                ),
                false,
                target,
            ),
        }
    }
}

/// What an error answer says, from `AgentProcess::request`'s error: the
/// code in its data and its message. `None` for any other failure (the
/// agent died or timed out).
fn refusal(err: &str) -> Option<String> {
    let (_, error) = err.split_once(" answered an error: ")?;
    let error: Value = serde_json::from_str(error).ok()?;
    Some(format!(
        "{} {}: {}",
        error["code"],
        error
            .pointer("/data/code")
            .and_then(Value::as_str)
            .unwrap_or("-"),
        error["message"].as_str().unwrap_or_default()
    ))
}

/// Times `CALLS` calls of `method` with `params` after one warm-up call;
/// `describe` says what an answer held.
fn time_window(
    agent: &mut JobsAgent,
    figure: &str,
    asked: String,
    method: &str,
    params: &Value,
    describe: fn(&Value) -> String,
) -> Result<WindowKind, String> {
    let mut params = params.clone();
    params["sessionId"] = json!(agent.session);
    let mut samples = Vec::with_capacity(CALLS);
    let mut served: Option<Result<String, String>> = None;
    let mut odd = 0;
    let mut first = 0.0;
    for call in 0..=CALLS {
        let started = Instant::now();
        let result = agent
            .process
            .request(method, params.clone(), REQUEST_TIMEOUT);
        let seconds = started.elapsed().as_secs_f64();
        let outcome = match result {
            Ok(answer) => Ok(describe(&answer.result)),
            Err(err) => Err(refusal(&err).ok_or(err)?),
        };
        if call == 0 {
            first = seconds;
            continue;
        }
        samples.push(seconds);
        match &served {
            None => served = Some(outcome),
            Some(first) if *first != outcome => odd += 1,
            Some(_) => {}
        }
    }
    Ok(WindowKind {
        figure: figure.to_string(),
        asked,
        samples,
        served: served.unwrap_or_else(|| Err("no call made".into())),
        odd,
        first,
    })
}

/// Writes a text file of numbered lines of about 70 bytes, as many as fit
/// in `bytes`; returns its size and its number of lines.
fn write_text_file(path: &Path, bytes: u64) -> Result<(u64, u64), String> {
    let io = |e: std::io::Error| format!("cannot write {}: {e}", path.display());
    let file = std::fs::File::create(path).map_err(io)?;
    let mut out = BufWriter::with_capacity(1 << 20, file);
    let (mut size, mut lines) = (0u64, 0u64);
    loop {
        let line = format!(
            "line {:>9}: a line of a large workspace file the editor scrolls.\n",
            lines + 1
        );
        if size + line.len() as u64 > bytes {
            break;
        }
        out.write_all(line.as_bytes()).map_err(io)?;
        size += line.len() as u64;
        lines += 1;
    }
    out.flush().map_err(io)?;
    Ok((size, lines))
}

fn describe_transcript(result: &Value) -> String {
    format!(
        "{} bytes of text from offset {}, nextOffset {}, total {}, complete {}",
        group(result["text"].as_str().map_or(0, str::len) as u64),
        group(result["offset"].as_u64().unwrap_or(0)),
        result["nextOffset"]
            .as_u64()
            .map_or("null".to_string(), group),
        group(result["total"].as_u64().unwrap_or(0)),
        result["complete"]
    )
}

fn describe_shell_log(result: &Value) -> String {
    format!(
        "{} bytes of text (byteCount {}) from byteOffset {}, totalBytes {}",
        group(result["text"].as_str().map_or(0, str::len) as u64),
        group(result["byteCount"].as_u64().unwrap_or(0)),
        group(result["byteOffset"].as_u64().unwrap_or(0)),
        group(result["totalBytes"].as_u64().unwrap_or(0))
    )
}

fn describe_workspace(result: &Value) -> String {
    format!(
        "{} lines ({} bytes of text) from line {} of {}, revision {}…",
        group(result["lineCount"].as_u64().unwrap_or(0)),
        group(result["text"].as_str().map_or(0, str::len) as u64),
        group(result["startLine"].as_u64().unwrap_or(0)),
        group(result["totalLines"].as_u64().unwrap_or(0)),
        result["revision"]
            .as_str()
            .unwrap_or("(none)")
            .chars()
            .take(12)
            .collect::<String>()
    )
}

fn windows(bench: &Bench, dir: &Path, workspace: &Path) -> Result<Vec<WindowKind>, String> {
    let big = workspace.join("big.txt");
    let under = workspace.join("under-cap.txt");
    let (big_size, big_lines) = write_text_file(&big, BIG_FILE_BYTES)?;
    let (under_size, under_lines) = write_text_file(&under, UNDER_CAP_BYTES)?;
    println!(
        "    workspace files: big.txt {} bytes ({} lines), under-cap.txt {} bytes ({} lines; the agent's cap on files a window reads is {} bytes)",
        group(big_size),
        group(big_lines),
        group(under_size),
        group(under_lines),
        group(RESOURCE_FILE_CAP)
    );

    let config = json!({ "tools": { "command_log_bytes": BIG_LOG_CAP } });
    let mut agent = JobsAgent::start(bench, dir, workspace, "big-cap", &config)?;
    let (ended, settled) = agent.run_job(LOG_PROMPT, LOG_JOB)?;
    let total = agent.log_total(&ended.id)?;
    println!(
        "    the job: state {}, exitCode {}, outputBytes {}, seen ended after {:.2} s; its log {} bytes; {settled}",
        ended.item["state"].as_str().unwrap_or("(none)"),
        ended.item["exitCode"],
        group(ended.item["outputBytes"].as_u64().unwrap_or(0)),
        ended.seconds,
        group(total)
    );
    println!(
        "    agent VmHWM after the job: {:.2} MiB; the windows follow",
        agent.process.memory()?.hwm_kib as f64 / 1024.0
    );
    if total != LOG_JOB_BYTES {
        println!(
            "    WARNING: the log holds {} bytes, not {}",
            group(total),
            group(LOG_JOB_BYTES)
        );
    }

    let mut kinds = Vec::new();
    let job = ended.id.clone();
    for (place, offset) in [
        ("start", 0),
        ("middle", total / 2),
        ("end", total.saturating_sub(TRANSCRIPT_LIMIT)),
    ] {
        kinds.push(time_window(
            &mut agent,
            &format!("_spindle/job/transcript, 100 MB log, {place}"),
            format!(
                "offset {}, limit {}",
                group(offset),
                group(TRANSCRIPT_LIMIT)
            ),
            "_spindle/job/transcript",
            &json!({ "jobId": job, "offset": offset, "limit": TRANSCRIPT_LIMIT }),
            describe_transcript,
        )?);
    }
    let offset = total.saturating_sub(SHELL_LOG_COUNT);
    kinds.push(time_window(
        &mut agent,
        "_spindle/resource shell-log:, 100 MB log, end",
        format!(
            "byteOffset {}, byteCount {}",
            group(offset),
            group(SHELL_LOG_COUNT)
        ),
        "_spindle/resource",
        &json!({ "uri": format!("shell-log:{job}"), "byteOffset": offset, "byteCount": SHELL_LOG_COUNT }),
        describe_shell_log,
    )?);
    for (name, what, lines) in [
        ("big.txt", "100 MB file", big_lines),
        ("under-cap.txt", "file just under 16 MiB", under_lines),
    ] {
        let start = lines.saturating_sub(WINDOW_LINES) + 1;
        kinds.push(time_window(
            &mut agent,
            &format!("_spindle/resource workspace:, {what}, last {WINDOW_LINES} lines"),
            format!(
                "workspace:{name}, startLine {}, lineCount {}",
                group(start),
                group(WINDOW_LINES)
            ),
            "_spindle/resource",
            &json!({ "uri": format!("workspace:{name}"), "startLine": start, "lineCount": WINDOW_LINES }),
            describe_workspace,
        )?);
    }
    if let Ok(memory) = agent.process.memory() {
        println!(
            "    agent VmHWM after the windows: {:.2} MiB (informational; a workspace: window holds the whole file, up to the cap)",
            memory.hwm_kib as f64 / 1024.0
        );
    }
    agent.process.close()?;
    let _ = std::fs::remove_file(&big);
    let _ = std::fs::remove_file(&under);
    Ok(kinds)
}

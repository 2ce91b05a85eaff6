//! Figures 1-3: `initialize` and `session/new` latency in fresh processes
//! beside the floor of any process answering over pipes, and peak RSS after
//! one scripted prompt with what the process holds at each step.

use crate::agent::{AgentProcess, ProcMemory};
use crate::holdings::{self, Holdings};
use crate::report::{Row, Stats};
use crate::workspace::Bench;
use crate::{INIT_TIMEOUT, SCRIPTED_PROMPT_TIMEOUT};
use serde_json::json;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Fresh processes for the start-up latencies.
const LATENCY_SAMPLES: usize = 30;

/// Targets: `initialize` within 5 ms, and within 1.5 times the floor of
/// spawning a trivial process that answers one line over pipes; peak RSS
/// after one scripted prompt within 6 MiB.
const TARGET_INIT_MS: f64 = 5.0;
const TARGET_INIT_RATIO: f64 = 1.5;
const TARGET_RSS_MIB: f64 = 6.0;

/// The floor: `sh` reads one line and answers it with the smallest
/// JSON-RPC result. It is spawned, piped and read exactly as the agent is
/// (the same reader threads, the same JSON parse of the answer), so the
/// ratio is what the agent itself adds: loading its image, its start-up,
/// and answering `initialize`. A shell is the smallest process at hand
/// that reads a line before it answers (a builtin `read` and `echo`).
const FLOOR_SHELL: &str = "/bin/sh";
const FLOOR_SCRIPT: &str = r#"read -r line; echo '{"jsonrpc":"2.0","id":1,"result":{}}'"#;

/// Figures 1 and 2: measures the start-up latencies, prints them and adds
/// their rows.
pub(crate) fn report_latencies(bench: &Bench, rows: &mut Vec<Row>, failed: &mut bool) {
    println!("## 1-2. initialize and session/new latency ({LATENCY_SAMPLES} fresh processes, after 1 discarded warm-up)");
    for (binary, label) in bench.binaries() {
        latencies_of(bench, &binary, label, rows, failed);
    }
}

fn latencies_of(bench: &Bench, binary: &Path, label: &str, rows: &mut Vec<Row>, failed: &mut bool) {
    if !label.is_empty() {
        println!("  {}:", label.trim());
    }
    match bench.startup_latencies(binary) {
        Ok(startup) => {
            let init = Stats::of(&startup.initialize);
            let new = Stats::of(&startup.session_new);
            let exit = Stats::of(&startup.exit);
            let floor = Stats::of(&startup.floor);
            let version = Stats::of(&startup.version);
            let ratio = init.median / floor.median;
            println!("  initialize   {}", init.describe_ms());
            println!(
                "  floor: {FLOOR_SHELL} answering one line over pipes  {}",
                floor.describe_ms()
            );
            println!(
                "  the binary's `--version`, spawn to exit (informational)  {}",
                version.describe_ms()
            );
            println!(
                "  initialize: {:.2} ms vs spawn-and-pipe floor {:.2} ms = {ratio:.2}x (target <= {TARGET_INIT_RATIO}), medians, samples interleaved",
                init.median * 1e3,
                floor.median * 1e3,
            );
            println!(
                "  (the least disturbed samples: {:.2} ms vs {:.2} ms = {:.2}x; the spread shows how noisy the machine is)",
                init.min * 1e3,
                floor.min * 1e3,
                init.min / floor.min
            );
            println!("  session/new  {}", new.describe_ms());
            println!(
                "  exit after stdin EOF (informational)  {}",
                exit.describe_ms()
            );
            rows.push(Row::lower(
                &format!("initialize latency (median){label}"),
                format!("{:.2} ms", init.median * 1e3),
                init.median * 1e3,
                TARGET_INIT_MS,
                "ms",
            ));
            rows.push(Row::lower(
                &format!("initialize latency (p90){label}"),
                format!("{:.2} ms", init.p90 * 1e3),
                init.p90 * 1e3,
                TARGET_INIT_MS,
                "ms",
            ));
            rows.push(Row::lower(
                &format!("initialize / spawn-and-pipe floor (medians){label}"),
                format!(
                    "{ratio:.2}x ({:.2} ms / {:.2} ms)",
                    init.median * 1e3,
                    floor.median * 1e3
                ),
                ratio,
                TARGET_INIT_RATIO,
                "x",
            ));
            rows.push(Row::info(
                &format!("session/new latency (median / p90){label}"),
                format!("{:.3} / {:.3} ms", new.median * 1e3, new.p90 * 1e3),
            ));
        }
        Err(err) => {
            *failed = true;
            println!("  FAILED: {err}");
            rows.push(Row::failed(
                &format!("initialize latency (median){label}"),
                &err,
                "< 5 ms",
            ));
            rows.push(Row::failed(
                &format!("initialize / spawn-and-pipe floor (medians){label}"),
                &err,
                "< 1.5x",
            ));
            rows.push(Row::failed(
                &format!("session/new latency{label}"),
                &err,
                "-",
            ));
        }
    }
}

/// Figure 3: measures the memory after one scripted prompt, prints it and
/// adds its row.
pub(crate) fn report_memory(bench: &Bench, rows: &mut Vec<Row>, failed: &mut bool) {
    println!("## 3. Memory after one scripted prompt");
    for (binary, label) in bench.binaries() {
        memory_of(bench, &binary, label, rows, failed);
    }
}

fn memory_of(bench: &Bench, binary: &Path, label: &str, rows: &mut Vec<Row>, failed: &mut bool) {
    if !label.is_empty() {
        println!("  {}:", label.trim());
    }
    match bench.memory_after_prompt(binary) {
        Ok(memory) => {
            let mib = memory.after_prompt.hwm_kib as f64 / 1024.0;
            println!("  RSS after one turn: {mib:.2} MiB (target <= {TARGET_RSS_MIB}), VmHWM");
            if holdings::is_dynamic(binary) == Some(true) {
                println!("  (this binary is dynamically linked: the shared libraries' code counts in its RSS; the Linux release is the static binary of scripts/build-static, measured beside it once built)");
            }
            println!("  What the session holds (resident, from smaps):");
            for (step, held) in [
                ("after initialize ", &memory.held_initialized),
                ("after session/new", &memory.held_session),
                ("after the prompt ", &memory.held_prompt),
            ] {
                println!("    {step}  {}", held.describe());
            }
            println!(
                "    the turn added {:+.2} MiB anonymous, {:+.2} MiB of the binary's code",
                (memory.held_prompt.anonymous_kib as f64
                    - memory.held_session.anonymous_kib as f64)
                    / 1024.0,
                (memory.held_prompt.own_code_kib as f64 - memory.held_session.own_code_kib as f64)
                    / 1024.0,
            );
            println!(
                "  VmHWM (peak RSS) {:.2} MiB   VmRSS {:.2} MiB   (VmRSS after session/new: {:.2} MiB)",
                memory.after_prompt.hwm_kib as f64 / 1024.0,
                memory.after_prompt.rss_kib as f64 / 1024.0,
                memory.after_session.rss_kib as f64 / 1024.0,
            );
            println!(
                "  answer: {} message chunks, stopReason {}",
                memory.chunks, memory.stop_reason
            );
            rows.push(Row::lower(
                &format!("peak RSS (VmHWM) after one prompt{label}"),
                format!("{mib:.2} MiB"),
                mib,
                TARGET_RSS_MIB,
                "MiB",
            ));
        }
        Err(err) => {
            *failed = true;
            println!("  FAILED: {err}");
            rows.push(Row::failed(
                &format!("peak RSS (VmHWM) after one prompt{label}"),
                &err,
                "< 6 MiB",
            ));
        }
    }
}

struct Startup {
    initialize: Vec<f64>,
    floor: Vec<f64>,
    version: Vec<f64>,
    session_new: Vec<f64>,
    exit: Vec<f64>,
}

struct Memory {
    held_initialized: Holdings,
    held_session: Holdings,
    held_prompt: Holdings,
    after_session: ProcMemory,
    after_prompt: ProcMemory,
    chunks: u64,
    stop_reason: String,
}

impl Bench {
    /// Spawns one scripted agent and writes `initialize` right away;
    /// returns the process and the spawn-to-response time.
    fn start_scripted(&self, binary: &Path) -> Result<(AgentProcess, Duration), String> {
        let mut command = Command::new(binary);
        command
            .arg("acp")
            .arg("--script")
            .arg(&self.work.script)
            .env_remove("RUST_LOG")
            .env("SPINDLE_HOME", self.work.home())
            .env("OPENAI_API_KEY", "bench-key")
            .env("OPENAI_BASE_URL", "http://127.0.0.1:9/v1");
        let started = Instant::now();
        let mut process = AgentProcess::spawn(command)?;
        let answer =
            process.request("initialize", json!({ "protocolVersion": 1 }), INIT_TIMEOUT)?;
        Ok((process, answer.at.duration_since(started)))
    }

    fn startup_latencies(&self, binary: &Path) -> Result<Startup, String> {
        let mut startup = Startup {
            initialize: Vec::new(),
            floor: Vec::new(),
            version: Vec::new(),
            session_new: Vec::new(),
            exit: Vec::new(),
        };
        for round in 0..=LATENCY_SAMPLES {
            // The floor and the binary's bare start, interleaved with the
            // agents so that the machine's noise falls on all of them.
            let floor = spawn_and_pipe_floor().map_err(|e| format!("floor {round}: {e}"))?;
            let version = self
                .version_run(binary)
                .map_err(|e| format!("--version {round}: {e}"))?;
            let (mut process, init) = self
                .start_scripted(binary)
                .map_err(|e| format!("process {round}: {e}"))?;
            let (_, new) = self
                .new_session(&mut process)
                .map_err(|e| format!("process {round}: {e}"))?;
            let exit = process
                .close()
                .map_err(|e| format!("process {round}: {e}"))?;
            if round > 0 {
                startup.floor.push(floor.as_secs_f64());
                startup.version.push(version.as_secs_f64());
                startup.initialize.push(init.as_secs_f64());
                startup.session_new.push(new.as_secs_f64());
                startup.exit.push(exit.as_secs_f64());
            }
        }
        Ok(startup)
    }

    fn memory_after_prompt(&self, binary: &Path) -> Result<Memory, String> {
        let (mut process, _) = self.start_scripted(binary)?;
        let pid = process.child.id();
        let held_initialized = holdings::of(pid, binary)?;
        let (session, _) = self.new_session(&mut process)?;
        let after_session = process.memory()?;
        let held_session = holdings::of(pid, binary)?;
        let answer = process.request(
            "session/prompt",
            json!({ "sessionId": session, "prompt": [{ "type": "text", "text": "hi" }] }),
            SCRIPTED_PROMPT_TIMEOUT,
        )?;
        let after_prompt = process.memory()?;
        let held_prompt = holdings::of(pid, binary)?;
        let stop_reason = answer.stop_reason();
        process.close()?;
        Ok(Memory {
            held_initialized,
            held_session,
            held_prompt,
            after_session,
            after_prompt,
            chunks: answer.chunks,
            stop_reason,
        })
    }
}

impl Bench {
    /// The binaries figures 1 and 3 measure, with the label their rows
    /// carry: the one named, and the static binary `scripts/build-static`
    /// leaves beside a release build (`target/static/spindle`), when it is
    /// there: the Linux release is that one, and a dynamically linked
    /// agent starts slower and holds the C library's code besides.
    fn binaries(&self) -> Vec<(PathBuf, &'static str)> {
        let mut binaries = vec![(self.binary.clone(), "")];
        let twin = self
            .binary
            .parent()
            .and_then(Path::parent)
            .map(|target| target.join("static").join("spindle"))
            .and_then(|path| path.canonicalize().ok())
            .filter(|path| *path != self.binary && path.is_file());
        if let Some(twin) = twin {
            let age = |path: &Path| std::fs::metadata(path).and_then(|m| m.modified()).ok();
            if let (Some(twin_time), Some(own_time)) = (age(&twin), age(&self.binary)) {
                if let Ok(older) = own_time.duration_since(twin_time) {
                    if older > Duration::from_secs(60) {
                        println!(
                            "  (the static binary {} is {:.0} min older than the one measured first: rebuild it with scripts/build-static for today's figures)",
                            twin.display(),
                            older.as_secs_f64() / 60.0
                        );
                    }
                }
            }
            binaries.push((twin, " (static binary)"));
        }
        binaries
    }

    /// The agent's binary run with `--version`: spawn to exit, its output
    /// read. What loading and starting this image costs, before any ACP.
    fn version_run(&self, binary: &Path) -> Result<Duration, String> {
        let started = Instant::now();
        let output = Command::new(binary)
            .arg("--version")
            .env_remove("RUST_LOG")
            .env("SPINDLE_HOME", self.work.home())
            .stdin(Stdio::null())
            .output()
            .map_err(|e| format!("cannot start the agent: {e}"))?;
        if !output.status.success() {
            return Err(format!("--version ended with {}", output.status));
        }
        Ok(started.elapsed())
    }
}

/// Spawns the floor's shell through the same `AgentProcess` as the agent
/// and times spawn to its one-line answer.
fn spawn_and_pipe_floor() -> Result<Duration, String> {
    let mut command = Command::new(FLOOR_SHELL);
    command.arg("-c").arg(FLOOR_SCRIPT);
    let started = Instant::now();
    let mut process = AgentProcess::spawn(command)?;
    let answer = process.request("initialize", json!({ "protocolVersion": 1 }), INIT_TIMEOUT)?;
    let took = answer.at.duration_since(started);
    process.close()?;
    Ok(took)
}

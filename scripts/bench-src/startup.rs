//! Figures 1-3: `initialize` and `session/new` latency in fresh processes,
//! and peak RSS after one scripted prompt.

use crate::agent::{AgentProcess, ProcMemory};
use crate::report::{Row, Stats};
use crate::workspace::Bench;
use crate::{INIT_TIMEOUT, SCRIPTED_PROMPT_TIMEOUT};
use serde_json::json;
use std::process::Command;
use std::time::{Duration, Instant};

/// Fresh processes for the start-up latencies.
const LATENCY_SAMPLES: usize = 30;

/// Targets.
const TARGET_INIT_MS: f64 = 5.0;
const TARGET_RSS_MIB: f64 = 10.0;

/// Figures 1 and 2: measures the start-up latencies, prints them and adds
/// their rows.
pub(crate) fn report_latencies(bench: &Bench, rows: &mut Vec<Row>, failed: &mut bool) {
    println!("## 1-2. initialize and session/new latency ({LATENCY_SAMPLES} fresh processes, after 1 discarded warm-up)");
    match bench.startup_latencies() {
        Ok(startup) => {
            let init = Stats::of(&startup.initialize);
            let new = Stats::of(&startup.session_new);
            let exit = Stats::of(&startup.exit);
            println!("  initialize   {}", init.describe_ms());
            println!("  session/new  {}", new.describe_ms());
            println!(
                "  exit after stdin EOF (informational)  {}",
                exit.describe_ms()
            );
            rows.push(Row::lower(
                "initialize latency (median)",
                format!("{:.2} ms", init.median * 1e3),
                init.median * 1e3,
                TARGET_INIT_MS,
                "ms",
            ));
            rows.push(Row::lower(
                "initialize latency (p90)",
                format!("{:.2} ms", init.p90 * 1e3),
                init.p90 * 1e3,
                TARGET_INIT_MS,
                "ms",
            ));
            rows.push(Row::info(
                "session/new latency (median / p90)",
                format!("{:.3} / {:.3} ms", new.median * 1e3, new.p90 * 1e3),
            ));
        }
        Err(err) => {
            *failed = true;
            println!("  FAILED: {err}");
            rows.push(Row::failed("initialize latency (median)", &err, "< 5 ms"));
            rows.push(Row::failed("session/new latency", &err, "-"));
        }
    }
}

/// Figure 3: measures the memory after one scripted prompt, prints it and
/// adds its row.
pub(crate) fn report_memory(bench: &Bench, rows: &mut Vec<Row>, failed: &mut bool) {
    println!("## 3. Memory after one scripted prompt");
    match bench.memory_after_prompt() {
        Ok(memory) => {
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
            let mib = memory.after_prompt.hwm_kib as f64 / 1024.0;
            rows.push(Row::lower(
                "peak RSS (VmHWM) after one prompt",
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
                "peak RSS (VmHWM) after one prompt",
                &err,
                "< 10 MiB",
            ));
        }
    }
}

struct Startup {
    initialize: Vec<f64>,
    session_new: Vec<f64>,
    exit: Vec<f64>,
}

struct Memory {
    after_session: ProcMemory,
    after_prompt: ProcMemory,
    chunks: u64,
    stop_reason: String,
}

impl Bench {
    /// Spawns one scripted agent and writes `initialize` right away;
    /// returns the process and the spawn-to-response time.
    fn start_scripted(&self) -> Result<(AgentProcess, Duration), String> {
        let mut command = Command::new(&self.binary);
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

    fn startup_latencies(&self) -> Result<Startup, String> {
        let mut startup = Startup {
            initialize: Vec::new(),
            session_new: Vec::new(),
            exit: Vec::new(),
        };
        for round in 0..=LATENCY_SAMPLES {
            let (mut process, init) = self
                .start_scripted()
                .map_err(|e| format!("process {round}: {e}"))?;
            let (_, new) = self
                .new_session(&mut process)
                .map_err(|e| format!("process {round}: {e}"))?;
            let exit = process
                .close()
                .map_err(|e| format!("process {round}: {e}"))?;
            if round > 0 {
                startup.initialize.push(init.as_secs_f64());
                startup.session_new.push(new.as_secs_f64());
                startup.exit.push(exit.as_secs_f64());
            }
        }
        Ok(startup)
    }

    fn memory_after_prompt(&self) -> Result<Memory, String> {
        let (mut process, _) = self.start_scripted()?;
        let (session, _) = self.new_session(&mut process)?;
        let after_session = process.memory()?;
        let answer = process.request(
            "session/prompt",
            json!({ "sessionId": session, "prompt": [{ "type": "text", "text": "hi" }] }),
            SCRIPTED_PROMPT_TIMEOUT,
        )?;
        let after_prompt = process.memory()?;
        let stop_reason = answer.stop_reason();
        process.close()?;
        Ok(Memory {
            after_session,
            after_prompt,
            chunks: answer.chunks,
            stop_reason,
        })
    }
}

//! Figure 4: streaming throughput, 100,000 content chunks from the fake Chat
//! Completions server, with a timeline and CPU split of each run.

use crate::agent::AgentProcess;
use crate::cpu::{ticks_ms, CpuSampler};
use crate::fake_server::FakeServer;
use crate::report::{Row, Stats};
use crate::workspace::Bench;
use crate::{INIT_TIMEOUT, MIB};
use serde_json::json;
use std::process::Command;
use std::time::{Duration, Instant};

/// Content chunks the fake server streams per throughput run.
const STREAM_CHUNKS: u64 = 100_000;
/// Throughput runs.
const STREAM_RUNS: usize = 3;

const STREAM_PROMPT_TIMEOUT: Duration = Duration::from_secs(120);

/// Target.
const TARGET_CHUNKS_PER_SEC: f64 = 100_000.0;

/// Figure 4: measures the throughput, prints it and adds its rows.
pub(crate) fn report_throughput(bench: &Bench, rows: &mut Vec<Row>, failed: &mut bool) {
    println!(
        "## 4. Streaming throughput ({STREAM_CHUNKS} chunks from a fake Chat Completions server, {STREAM_RUNS} runs)"
    );
    match bench.throughput() {
        Ok(runs) => {
            let rates: Vec<f64> = runs.iter().map(|r| r.rate).collect();
            let stats = Stats::of(&rates);
            println!(
                "  best {:.0} chunks/s   median {:.0} chunks/s",
                stats.max, stats.median
            );
            let best = format!("{:.0} chunks/s", stats.max);
            let median = format!("{:.0} chunks/s", stats.median);
            rows.push(Row::higher(
                "streaming throughput (best of 3)",
                best,
                stats.max,
                TARGET_CHUNKS_PER_SEC,
                "chunks/s",
            ));
            rows.push(Row::higher(
                "streaming throughput (median of 3)",
                median,
                stats.median,
                TARGET_CHUNKS_PER_SEC,
                "chunks/s",
            ));
            let peak = runs.iter().map(|r| r.hwm_kib).max().unwrap_or(0);
            rows.push(Row::info(
                "peak RSS after the 100,000-chunk prompt (max of 3)",
                format!("{:.2} MiB", peak as f64 / 1024.0),
            ));
        }
        Err(err) => {
            *failed = true;
            println!("  FAILED: {err}");
            rows.push(Row::failed(
                "streaming throughput",
                &err,
                "> 100,000 chunks/s",
            ));
        }
    }
}

struct StreamRun {
    rate: f64,
    hwm_kib: u64,
}

impl Bench {
    fn spawn(&self, env: &[(&str, String)]) -> Result<AgentProcess, String> {
        let mut command = Command::new(&self.binary);
        command
            .args(["acp", "--model", "bench-model"])
            .env_remove("RUST_LOG")
            // Sessions go to a database in the workspace, removed with it,
            // never to the user's own (`~/.local/share/spindle`).
            .env("SPINDLE_HOME", self.work.home())
            .env("OPENAI_API_KEY", "bench-key");
        if env.iter().all(|(name, _)| *name != "OPENAI_BASE_URL") {
            // Nothing should reach the network in scripted runs; if it
            // tries, it fails fast instead of calling a real provider.
            command.env("OPENAI_BASE_URL", "http://127.0.0.1:9/v1");
        }
        for (name, value) in env {
            command.env(name, value);
        }
        AgentProcess::spawn(command)
    }

    fn throughput(&self) -> Result<Vec<StreamRun>, String> {
        let server = FakeServer::start(STREAM_CHUNKS)?;
        println!(
            "  fake server on {} ({:.1} MiB response pre-rendered)",
            server.base_url,
            server.body_len as f64 / MIB
        );
        let mut runs = Vec::new();
        for run in 1..=STREAM_RUNS {
            let mut process = self.spawn(&[("OPENAI_BASE_URL", server.base_url.clone())])?;
            process.request("initialize", json!({ "protocolVersion": 1 }), INIT_TIMEOUT)?;
            let (session, _) = self.new_session(&mut process)?;
            let prompt = json!({
                "sessionId": session,
                "prompt": [{ "type": "text", "text": "stream please" }],
            });
            let sampler = CpuSampler::start(process.child.id());
            let own = CpuSampler::start(std::process::id());
            let answer = process
                .request("session/prompt", prompt, STREAM_PROMPT_TIMEOUT)
                .map_err(|e| format!("run {run}: {e}"))?;
            let cpu = sampler.finish();
            let own = own.finish();
            let hwm_kib = process.memory().map(|m| m.hwm_kib).unwrap_or(0);
            let stop_reason = answer.stop_reason();
            let served = server.served.recv_timeout(Duration::from_secs(5)).ok();
            process.close().map_err(|e| format!("run {run}: {e}"))?;

            let total = answer.at.duration_since(answer.sent).as_secs_f64();
            let rate = STREAM_CHUNKS as f64 / total;
            println!(
                "  run {run}: {rate:>9.0} chunks/s  ({:.1} ms, {} chunks, stopReason {stop_reason}, peak RSS {:.2} MiB)",
                total * 1e3,
                answer.chunks,
                hwm_kib as f64 / 1024.0
            );
            if answer.chunks != STREAM_CHUNKS {
                println!(
                    "    WARNING: counted {} agent_message_chunk lines, expected {STREAM_CHUNKS}",
                    answer.chunks
                );
            }
            if stop_reason != "end_turn" {
                println!("    WARNING: stopReason {stop_reason}, expected end_turn");
            }
            // Where the time went, to find the slow stage.
            let ms = |at: Instant| at.duration_since(answer.sent).as_secs_f64() * 1e3;
            let mut stages = Vec::new();
            match &served {
                Some(Ok(served)) => {
                    stages.push(format!("request at server {:.1} ms", ms(served.request_at)));
                    stages.push(format!(
                        "server finished writing {:.1} ms",
                        ms(served.written_at)
                    ));
                }
                Some(Err(err)) => println!("    WARNING: the fake server failed: {err}"),
                None => println!("    WARNING: the fake server reported no request"),
            }
            if let Some(first) = answer.first_chunk {
                stages.push(format!("first chunk on stdout {:.1} ms", ms(first)));
            }
            if let Some(last) = answer.last_chunk {
                stages.push(format!("last chunk on stdout {:.1} ms", ms(last)));
            }
            stages.push(format!("prompt answer {:.1} ms", ms(answer.at)));
            println!("    timeline: {}", stages.join(", "));
            if !cpu.is_empty() {
                let total: u64 = cpu.iter().map(|(_, ticks)| ticks).sum();
                let threads: Vec<String> = cpu
                    .iter()
                    .filter(|(_, ticks)| *ticks > 0)
                    .map(|(name, ticks)| format!("{name} {}", ticks_ms(*ticks)))
                    .collect();
                println!(
                    "    agent CPU during the prompt (10 ms ticks): {} ({})",
                    ticks_ms(total),
                    threads.join(", ")
                );
            }
            let client = |name: &str| {
                own.iter()
                    .filter(|(n, _)| n == name || n.starts_with(&format!("{name}-")))
                    .map(|(_, ticks)| ticks)
                    .sum::<u64>()
            };
            println!(
                "    bench CPU (10 ms ticks): stdout reader {}, fake server {}",
                ticks_ms(client("bench-stdout")),
                ticks_ms(client("bench-conn"))
            );
            println!(
                "    stdout: {:.1} MiB of message chunks ({:.0} bytes per chunk line)",
                answer.chunk_bytes as f64 / MIB,
                answer.chunk_bytes as f64 / answer.chunks.max(1) as f64
            );
            runs.push(StreamRun { rate, hwm_kib });
        }
        Ok(runs)
    }
}

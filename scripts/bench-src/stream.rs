//! Figure 4: streaming throughput, 100,000 content chunks from the fake Chat
//! Completions server, with a timeline and CPU split of each run, against
//! the same stream read directly: a client of the fake server that parses
//! every chunk and keeps its text, with no agent between.

use crate::agent::AgentProcess;
use crate::cpu::{ticks_ms, CpuSampler};
use crate::fake_server::FakeServer;
use crate::report::{Row, Stats};
use crate::workspace::Bench;
use crate::{INIT_TIMEOUT, MIB};
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::process::Command;
use std::time::{Duration, Instant};

/// Content chunks the fake server streams per throughput run.
const STREAM_CHUNKS: u64 = 100_000;
/// Throughput runs.
const STREAM_RUNS: usize = 3;

const STREAM_PROMPT_TIMEOUT: Duration = Duration::from_secs(120);

/// Target.
const TARGET_CHUNKS_PER_SEC: f64 = 100_000.0;
/// The agent's pipeline against the fake server read directly.
const TARGET_DIRECT_RATIO: f64 = 0.9;

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
            report_direct(stats.median, rows, failed);
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

/// The fake server read directly, and the agent's median against it.
fn report_direct(agent_median: f64, rows: &mut Vec<Row>, failed: &mut bool) {
    let rates = match direct_rates() {
        Ok(rates) => rates,
        Err(err) => {
            *failed = true;
            println!("  FAILED reading the fake server directly: {err}");
            rows.push(Row::failed(
                "streaming pipeline / fake server direct",
                &err,
                "> 0.9",
            ));
            return;
        }
    };
    let direct = Stats::of(&rates);
    let ratio = agent_median / direct.median;
    println!(
        "  fake server direct: best {:.0} chunks/s   median {:.0} chunks/s   pipeline/direct {ratio:.2}",
        direct.max, direct.median
    );
    rows.push(Row::info(
        "fake server read directly (median of 3)",
        format!("{:.0} chunks/s", direct.median),
    ));
    rows.push(Row::suggested(
        "streaming pipeline / fake server direct (medians)",
        format!("{ratio:.2}"),
        ratio >= TARGET_DIRECT_RATIO,
        "≥ 0.9",
    ));
}

/// Reads the fake server's stream `STREAM_RUNS` times without the agent:
/// one request, then every `data:` line parsed as JSON and its
/// `choices[0].delta.content` kept, as the agent's SSE reader does.
fn direct_rates() -> Result<Vec<f64>, String> {
    let server = FakeServer::start(STREAM_CHUNKS)?;
    let address = server
        .base_url
        .trim_start_matches("http://")
        .trim_end_matches("/v1")
        .to_string();
    let mut rates = Vec::new();
    for run in 1..=STREAM_RUNS {
        let started = Instant::now();
        let (chunks, text) = read_direct(&address).map_err(|e| format!("run {run}: {e}"))?;
        let total = started.elapsed().as_secs_f64();
        if chunks != STREAM_CHUNKS {
            return Err(format!(
                "run {run}: read {chunks} chunks, expected {STREAM_CHUNKS}"
            ));
        }
        let rate = STREAM_CHUNKS as f64 / total;
        println!(
            "  direct run {run}: {rate:>9.0} chunks/s  ({:.1} ms, {chunks} chunks, {text} bytes of text)",
            total * 1e3
        );
        rates.push(rate);
    }
    Ok(rates)
}

/// One request to the fake server; the chunks read and the text's length.
fn read_direct(address: &str) -> Result<(u64, usize), String> {
    let mut socket = TcpStream::connect(address).map_err(|e| format!("connect: {e}"))?;
    socket
        .set_read_timeout(Some(STREAM_PROMPT_TIMEOUT))
        .map_err(|e| format!("timeout: {e}"))?;
    let body = json!({
        "model": "bench-model",
        "stream": true,
        "messages": [{ "role": "user", "content": "stream please" }],
    })
    .to_string();
    let head = format!(
        "POST /v1/chat/completions HTTP/1.1\r\nHost: {address}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    socket
        .write_all(head.as_bytes())
        .and_then(|()| socket.write_all(body.as_bytes()))
        .map_err(|e| format!("send: {e}"))?;
    let mut reader = BufReader::with_capacity(64 * 1024, socket);
    let mut line = String::new();
    let mut in_body = false;
    let mut chunks = 0;
    let mut text = String::new();
    loop {
        line.clear();
        if reader
            .read_line(&mut line)
            .map_err(|e| format!("read: {e}"))?
            == 0
        {
            return Err("the stream ended before [DONE]".into());
        }
        let trimmed = line.trim_end();
        if !in_body {
            in_body = trimmed.is_empty();
            continue;
        }
        let Some(data) = trimmed.strip_prefix("data: ") else {
            continue;
        };
        if data == "[DONE]" {
            return Ok((chunks, text.len()));
        }
        let chunk: Value = serde_json::from_str(data).map_err(|e| format!("chunk: {e}"))?;
        if let Some(content) = chunk["choices"][0]["delta"]["content"].as_str() {
            text.push_str(content);
            chunks += 1;
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
            // A burst the client cannot keep up with reaches it in fewer,
            // merged updates: every piece of text must still be there.
            println!(
                "  run {run}: {rate:>9.0} chunks/s  ({:.1} ms, {} pieces of text in {} agent_message_chunk lines, stopReason {stop_reason}, peak RSS {:.2} MiB)",
                total * 1e3,
                answer.pieces,
                answer.chunks,
                hwm_kib as f64 / 1024.0
            );
            if answer.pieces != STREAM_CHUNKS {
                return Err(format!(
                    "run {run}: {} pieces of text reached the client, expected {STREAM_CHUNKS}",
                    answer.pieces
                ));
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

//! Figure 9: memory and cancel under hostile input. Peak RSS while the model
//! server streams a 1 GB event, while `read_file` scans a 4 GB file, and
//! while the client does not read stdout for 10 s of a fast stream; and the
//! time to answer `session/cancel` right after a 60 MB line.

use crate::fake_server::FakeServer;
use crate::flood::{flood_config, flood_server, Flood, Wire};
use crate::report::Row;
use crate::workspace::Bench;
use crossbeam_channel::Receiver;
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

/// Target for every memory figure here.
const TARGET_MIB: f64 = 64.0;
/// Target for the cancel answer.
const TARGET_CANCEL_MS: f64 = 1000.0;

/// An agent driven with raw lines; its stdout is read only once
/// `start_reading` is called (the slow-client figure).
struct Raw {
    child: Child,
    stdin: ChildStdin,
    lines: Option<Receiver<Value>>,
}

impl Raw {
    fn spawn(bench: &Bench, args: &[&str], env: &[(&str, String)]) -> Result<Raw, String> {
        let mut command = Command::new(&bench.binary);
        command
            .args(args)
            .env_remove("RUST_LOG")
            .env("SPINDLE_HOME", bench.work.home())
            .env_remove("OPENAI_API_KEY")
            .env_remove("ANTHROPIC_API_KEY")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        for (name, value) in env {
            command.env(name, value);
        }
        let mut child = command.spawn().map_err(|e| format!("cannot start: {e}"))?;
        let stdin = child.stdin.take().ok_or("no stdin")?;
        Ok(Raw {
            child,
            stdin,
            lines: None,
        })
    }

    fn start_reading(&mut self) {
        let Some(stdout) = self.child.stdout.take() else {
            return;
        };
        let (sender, lines) = crossbeam_channel::unbounded();
        thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { return };
                // Chunks are many and uninteresting: only other lines.
                if line.contains("agent_message_chunk") || line.contains("agent_thought_chunk") {
                    continue;
                }
                if let Ok(value) = serde_json::from_str::<Value>(&line) {
                    if sender.send(value).is_err() {
                        return;
                    }
                }
            }
        });
        self.lines = Some(lines);
    }

    fn send(&mut self, message: &Value) -> Result<(), String> {
        let mut line = message.to_string();
        line.push('\n');
        self.stdin
            .write_all(line.as_bytes())
            .map_err(|e| format!("cannot write to the agent: {e}"))
    }

    /// Waits for the answer to request `id`.
    fn answer(&self, id: u64, timeout: Duration) -> Result<Value, String> {
        let lines = self.lines.as_ref().ok_or("stdout is not read")?;
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match lines.recv_timeout(left) {
                Ok(message) if message["id"] == id && message.get("method").is_none() => {
                    return Ok(message)
                }
                Ok(_) => {}
                Err(_) => return Err(format!("no answer to request {id} in time")),
            }
        }
    }

    fn hwm_mib(&self) -> Result<f64, String> {
        let path = format!("/proc/{}/status", self.child.id());
        let status = std::fs::read_to_string(&path).map_err(|e| format!("{path}: {e}"))?;
        status
            .lines()
            .find_map(|line| line.strip_prefix("VmHWM:"))
            .and_then(|rest| {
                rest.trim()
                    .trim_end_matches("kB")
                    .trim()
                    .parse::<f64>()
                    .ok()
            })
            .map(|kib| kib / 1024.0)
            .ok_or_else(|| "no VmHWM".to_string())
    }

    /// initialize and session/new; returns the session id.
    fn open(&mut self, cwd: &std::path::Path) -> Result<String, String> {
        self.send(&json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                          "params": {"protocolVersion": 1}}))?;
        self.send(&json!({"jsonrpc": "2.0", "id": 2, "method": "session/new",
                          "params": {"cwd": cwd, "mcpServers": []}}))?;
        self.answer(1, Duration::from_secs(10))?;
        let opened = self.answer(2, Duration::from_secs(10))?;
        opened["result"]["sessionId"]
            .as_str()
            .map(str::to_string)
            .ok_or_else(|| format!("session/new failed: {opened}"))
    }

    fn prompt(&mut self, id: u64, session: &str, text: &str) -> Result<(), String> {
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": "session/prompt",
                          "params": {"sessionId": session, "prompt": [{"type": "text", "text": text}]}}))
    }
}

impl Drop for Raw {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A model server that answers every POST with an SSE event that never
/// ends: `data: ` and then up to 1 GB of `x`.
fn giant_event_server() -> Result<String, String> {
    let listener = TcpListener::bind("127.0.0.1:0").map_err(|e| e.to_string())?;
    let address = listener.local_addr().map_err(|e| e.to_string())?;
    thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            thread::spawn(move || {
                let mut head = [0u8; 8192];
                let read = stream.read(&mut head).unwrap_or(0);
                if !head[..read].starts_with(b"POST") {
                    let _ =
                        stream.write_all(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n");
                    return;
                }
                let _ = stream.write_all(
                    b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\ndata: ",
                );
                let block = vec![b'x'; 64 * 1024];
                for _ in 0..(1024 * 1024 * 1024 / block.len()) {
                    if stream.write_all(&block).is_err() {
                        return;
                    }
                }
            });
        }
    });
    Ok(format!("http://{address}/v1"))
}

fn giant_event(bench: &Bench) -> Result<(f64, String), String> {
    let base = giant_event_server()?;
    let mut agent = Raw::spawn(
        bench,
        &["acp", "--model", "bench-model", "--retries", "0"],
        &[
            ("OPENAI_BASE_URL", base),
            ("OPENAI_API_KEY", "sk-bench".into()),
        ],
    )?;
    agent.start_reading();
    let session = agent.open(&bench.work.dir)?;
    agent.prompt(3, &session, "hello")?;
    let answer = agent.answer(3, Duration::from_secs(120))?;
    let code = answer["error"]["data"]["code"]
        .as_str()
        .unwrap_or("(no error)")
        .to_string();
    Ok((agent.hwm_mib()?, code))
}

/// An agent whose model server streams `flood` deltas of `text` in
/// `wire`'s format forever: its peak RSS once the prompt is answered, and
/// how the prompt ended (the error code, or the stop reason).
fn flood(bench: &Bench, wire: Wire, flood: Flood, text: &str) -> Result<(f64, String), String> {
    let base = flood_server(wire, flood, text)?;
    let config = bench.work.dir.join("flood.config.json");
    std::fs::write(&config, flood_config(wire, &base).to_string()).map_err(|e| e.to_string())?;
    let config = config.to_string_lossy().into_owned();
    let mut agent = Raw::spawn(
        bench,
        &[
            "acp",
            "--config",
            &config,
            "--model",
            "flood/bench-model",
            "--retries",
            "0",
        ],
        &[("FLOOD_BENCH_KEY", "sk-bench".into())],
    )?;
    agent.start_reading();
    let session = agent.open(&bench.work.dir)?;
    agent.prompt(3, &session, "hello")?;
    let answer = agent.answer(3, Duration::from_secs(600))?;
    let ended = match answer["error"]["data"]["code"].as_str() {
        Some(code) => code.to_string(),
        None => format!(
            "stop reason {}",
            answer["result"]["stopReason"].as_str().unwrap_or("(none)")
        ),
    };
    Ok((agent.hwm_mib()?, ended))
}

fn huge_file(bench: &Bench) -> Result<(f64, f64), String> {
    let path = bench.work.dir.join("huge.log");
    {
        let mut file = std::fs::File::create(&path).map_err(|e| e.to_string())?;
        for n in 0..1000 {
            writeln!(file, "line {n}").map_err(|e| e.to_string())?;
        }
        // The rest is a hole: 4 GB that cost no disk.
        file.set_len(4 * 1024 * 1024 * 1024)
            .map_err(|e| e.to_string())?;
    }
    let script = bench.work.dir.join("huge-script.json");
    let reply = json!({"replies": [
        {"tool_calls": [{"id": "r1", "name": "read_file",
                         "arguments": {"path": "huge.log", "start_line": 5_000_000}}]},
        {"text": "Done."}
    ]});
    std::fs::write(&script, reply.to_string()).map_err(|e| e.to_string())?;
    let mut agent = Raw::spawn(bench, &["acp", "--script", &script.to_string_lossy()], &[])?;
    agent.start_reading();
    let session = agent.open(&bench.work.dir)?;
    let started = Instant::now();
    agent.prompt(3, &session, "go")?;
    agent.answer(3, Duration::from_secs(300))?;
    let seconds = started.elapsed().as_secs_f64();
    let hwm = agent.hwm_mib()?;
    let _ = std::fs::remove_file(&path);
    Ok((hwm, seconds))
}

fn slow_client(bench: &Bench) -> Result<(f64, u64), String> {
    let server = FakeServer::start(1_000_000)?;
    let mut agent = Raw::spawn(
        bench,
        &["acp", "--model", "bench-model", "--retries", "0"],
        &[
            ("OPENAI_BASE_URL", server.base_url.clone()),
            ("OPENAI_API_KEY", "sk-bench".into()),
        ],
    )?;
    // Nobody reads the agent's stdout for 10 s while it streams.
    agent.send(&json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                       "params": {"protocolVersion": 1}}))?;
    agent.send(&json!({"jsonrpc": "2.0", "id": 2, "method": "session/new",
                       "params": {"cwd": bench.work.dir, "mcpServers": [],
                                  "_meta": {"spindle": {"sessionId": "slow"}}}}))?;
    agent.prompt(3, "slow", "stream a lot")?;
    thread::sleep(Duration::from_secs(10));
    let hwm = agent.hwm_mib()?;
    agent.start_reading();
    let started = Instant::now();
    agent.send(&json!({"jsonrpc": "2.0", "method": "session/cancel",
                       "params": {"sessionId": "slow"}}))?;
    agent.answer(3, Duration::from_secs(60))?;
    Ok((hwm, started.elapsed().as_millis() as u64))
}

fn cancel_after_a_big_line(bench: &Bench) -> Result<f64, String> {
    let script = bench.work.dir.join("sleep-script.json");
    let reply = json!({"replies": [
        {"tool_calls": [{"id": "s1", "name": "run_command", "arguments": {"command": "sleep 30"}}]},
        {"text": "Done."}
    ]});
    std::fs::write(&script, reply.to_string()).map_err(|e| e.to_string())?;
    let mut agent = Raw::spawn(
        bench,
        &[
            "acp",
            "--script",
            &script.to_string_lossy(),
            "--permissions",
            "yolo",
        ],
        &[],
    )?;
    agent.start_reading();
    let session = agent.open(&bench.work.dir)?;
    agent.prompt(3, &session, "go")?;
    thread::sleep(Duration::from_millis(500));
    let big = json!({"jsonrpc": "2.0", "id": 4, "method": "session/list",
                     "params": {"padding": "x".repeat(60 * 1024 * 1024)}});
    agent.send(&big)?;
    let started = Instant::now();
    agent.send(&json!({"jsonrpc": "2.0", "method": "session/cancel",
                       "params": {"sessionId": session}}))?;
    let answer = agent.answer(3, Duration::from_secs(30))?;
    if answer["result"]["stopReason"] != "cancelled" {
        return Err(format!("the prompt ended with {answer}"));
    }
    Ok(started.elapsed().as_secs_f64() * 1000.0)
}

/// Figure 9: prints the figures and adds their rows.
pub(crate) fn report_hostile(bench: &Bench, rows: &mut Vec<Row>, failed: &mut bool) {
    println!("## 9. Under hostile input (memory targets < {TARGET_MIB} MiB)");
    let mut memory = |figure: &str, result: Result<(f64, String), String>| match result {
        Ok((mib, detail)) => {
            println!("  {figure}: peak RSS {mib:.2} MiB ({detail})");
            rows.push(Row::lower(
                figure,
                format!("{mib:.2} MiB"),
                mib,
                TARGET_MIB,
                "MiB",
            ));
        }
        Err(err) => {
            *failed = true;
            println!("  {figure}: FAILED: {err}");
            rows.push(Row::failed(figure, &err, "< 64 MiB"));
        }
    };
    memory(
        "peak RSS, the model streams a 1 GB event",
        giant_event(bench).map(|(mib, code)| (mib, format!("the call failed with {code}"))),
    );
    // Small deltas of plain words, and deltas of control characters (each
    // one written as six bytes of JSON wherever the text is stored).
    let words = "lorem ipsum ".repeat(1000 / 12);
    for wire in Wire::ALL {
        for kind in Flood::ALL {
            let figure = format!(
                "peak RSS, endless {} deltas of 1,000 bytes, {}",
                kind.name(),
                wire.name()
            );
            memory(
                &figure,
                flood(bench, wire, kind, &words)
                    .map(|(mib, ended)| (mib, format!("ended: {ended}"))),
            );
        }
    }
    memory(
        "peak RSS, endless content deltas of 10 bytes, Chat Completions",
        flood(bench, Wire::Chat, Flood::Content, "0123456789")
            .map(|(mib, ended)| (mib, format!("ended: {ended}"))),
    );
    memory(
        "peak RSS, endless content deltas of 1,000 control characters, Chat Completions",
        flood(bench, Wire::Chat, Flood::Content, &"\u{1}".repeat(1000))
            .map(|(mib, ended)| (mib, format!("ended: {ended}"))),
    );
    memory(
        "peak RSS, read_file scans a 4 GB file",
        huge_file(bench).map(|(mib, s)| (mib, format!("{s:.1} s"))),
    );
    memory(
        "peak RSS, the client reads nothing for 10 s of a stream",
        slow_client(bench).map(|(mib, ms)| {
            (
                mib,
                format!("cancel answered {ms} ms after reading resumed"),
            )
        }),
    );
    match cancel_after_a_big_line(bench) {
        Ok(ms) => {
            println!("  session/cancel right after a 60 MB line: answered in {ms:.0} ms");
            rows.push(Row::lower(
                "session/cancel answered after a 60 MB line",
                format!("{ms:.0} ms"),
                ms,
                TARGET_CANCEL_MS,
                "ms",
            ));
        }
        Err(err) => {
            *failed = true;
            println!("  session/cancel after a 60 MB line: FAILED: {err}");
            rows.push(Row::failed(
                "session/cancel after a 60 MB line",
                &err,
                "< 1 s",
            ));
        }
    }
}

//! Figure 16: `spindle serve` with many connections. What 100 idle HTTP
//! connections (each initialized, each with its event stream open) cost the
//! server in memory and threads, and the time from writing a prompt to its
//! first message chunk over HTTP beside the same over stdio.
//!
//! The client is a small one over raw sockets: `initialize` by POST, the
//! streams by GET with `Accept: text/event-stream`, every other request a
//! POST answered 202 with the answer on a stream.

use crate::agent::AgentProcess;
use crate::report::{Row, Stats};
use crate::workspace::Bench;
use crate::{INIT_TIMEOUT, REQUEST_TIMEOUT, SCRIPTED_PROMPT_TIMEOUT};
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{channel, Receiver};
use std::thread;
use std::time::{Duration, Instant};

/// Idle connections held open at once.
const CONNECTIONS: usize = 100;
/// Timed prompts per transport, after one discarded warm-up.
const SAMPLES: usize = 10;
/// Settling time before reading the server's memory and threads.
const SETTLE: Duration = Duration::from_millis(300);
/// Any prompt is answered with one word: one message chunk, so that over
/// stdio the prompt's last chunk (what the agent's tally keeps per
/// request) is its first.
const SCRIPT: &str = r#"{"rules":[{"when":{"contains":""},"reply":{"text":"Hello"}}]}"#;
/// The largest HTTP answer head or body read.
const ANSWER_CAP: usize = 1 << 20;

/// Figure 16: measures, prints and adds its rows.
pub(crate) fn report_serve(bench: &Bench, rows: &mut Vec<Row>, failed: &mut bool) {
    println!("## 16. serve: connections");
    let script = bench.work.dir.join("serve-script.json");
    if let Err(err) = std::fs::write(&script, SCRIPT) {
        fail(rows, failed, &format!("cannot write the script: {err}"));
        return;
    }
    match connections(bench, &script) {
        Ok(held) => {
            let per_kib = (held.rss100_kib as f64 - held.rss0_kib as f64) / CONNECTIONS as f64;
            let per_threads = (held.threads100 as f64 - held.threads0 as f64) / CONNECTIONS as f64;
            println!(
                "  idle server:           VmRSS {:.2} MiB, {} threads",
                held.rss0_kib as f64 / 1024.0,
                held.threads0
            );
            println!(
                "  {CONNECTIONS} connections open:  VmRSS {:.2} MiB, {} threads (each initialized, its event stream open)",
                held.rss100_kib as f64 / 1024.0,
                held.threads100
            );
            println!("  per connection: {per_kib:.1} KiB, {per_threads:.2} threads");
            rows.push(Row::info(
                "serve: memory per idle connection",
                format!("{per_kib:.1} KiB"),
            ));
            rows.push(Row::info(
                "serve: threads per idle connection",
                format!("{per_threads:.2}"),
            ));
        }
        Err(err) => fail(rows, failed, &err),
    }
    let http = first_updates_http(bench, &script);
    let stdio = first_updates_stdio(bench, &script);
    match (http, stdio) {
        (Ok(http), Ok(stdio)) => {
            let http = Stats::of(&http);
            let stdio = Stats::of(&stdio);
            println!("  time to the first message chunk, prompt written to chunk read ({SAMPLES} runs each, after 1 warm-up):");
            println!("    HTTP   {}", http.describe_ms());
            println!("    stdio  {}", stdio.describe_ms());
            println!(
                "    HTTP / stdio (medians): {:.3} ms / {:.3} ms = {:.2}x",
                http.median * 1e3,
                stdio.median * 1e3,
                http.median / stdio.median
            );
            rows.push(Row::info(
                "serve: first chunk, HTTP vs stdio (medians)",
                format!(
                    "{:.3} ms vs {:.3} ms = {:.2}x",
                    http.median * 1e3,
                    stdio.median * 1e3,
                    http.median / stdio.median
                ),
            ));
        }
        (Err(err), _) | (_, Err(err)) => fail(rows, failed, &err),
    }
}

fn fail(rows: &mut Vec<Row>, failed: &mut bool, err: &str) {
    *failed = true;
    println!("  FAILED: {err}");
    rows.push(Row::failed("serve: connections", err, "-"));
}

struct Held {
    rss0_kib: u64,
    threads0: u64,
    rss100_kib: u64,
    threads100: u64,
}

fn connections(bench: &Bench, script: &std::path::Path) -> Result<Held, String> {
    let server = Server::start(bench, script)?;
    thread::sleep(SETTLE);
    let (rss0_kib, threads0) = server.status()?;
    let mut streams = Vec::with_capacity(CONNECTIONS);
    for n in 0..CONNECTIONS {
        let connection = server
            .initialize()
            .map_err(|e| format!("connection {n}: {e}"))?;
        let stream = server
            .open_stream(&connection, None)
            .map_err(|e| format!("connection {n}: {e}"))?;
        // Held open and quiet, as an editor left idle.
        streams.push(stream);
    }
    thread::sleep(SETTLE);
    let (rss100_kib, threads100) = server.status()?;
    drop(streams);
    Ok(Held {
        rss0_kib,
        threads0,
        rss100_kib,
        threads100,
    })
}

/// Seconds from writing the prompt's POST to reading the first
/// `agent_message_chunk` on the session's stream, one new connection and
/// session each run, on one server.
fn first_updates_http(bench: &Bench, script: &std::path::Path) -> Result<Vec<f64>, String> {
    let server = Server::start(bench, script)?;
    let cwd = bench.work.dir.to_string_lossy().to_string();
    let mut samples = Vec::with_capacity(SAMPLES);
    for run in 0..=SAMPLES {
        let sample = http_run(&server, &cwd).map_err(|e| format!("HTTP run {run}: {e}"))?;
        if run > 0 {
            samples.push(sample);
        }
    }
    Ok(samples)
}

fn http_run(server: &Server, cwd: &str) -> Result<f64, String> {
    let connection = server.initialize()?;
    let events = server.open_stream(&connection, None)?;
    server.send(
        &connection,
        None,
        &json!({"jsonrpc": "2.0", "id": 1, "method": "session/new",
            "params": {"cwd": cwd, "mcpServers": []}}),
    )?;
    let (_, answer) = events.wait_for(REQUEST_TIMEOUT, |m| m["id"] == 1)?;
    let session = answer["result"]["sessionId"]
        .as_str()
        .ok_or_else(|| format!("session/new answered without a session: {answer}"))?
        .to_string();
    let updates = server.open_stream(&connection, Some(&session))?;
    let sent = Instant::now();
    server.send(
        &connection,
        Some(&session),
        &json!({"jsonrpc": "2.0", "id": 2, "method": "session/prompt",
            "params": {"sessionId": session, "prompt": [{"type": "text", "text": "hello"}]}}),
    )?;
    let (at, _) = updates.wait_for(SCRIPTED_PROMPT_TIMEOUT, |m| {
        m["method"] == "session/update"
            && m["params"]["update"]["sessionUpdate"] == "agent_message_chunk"
    })?;
    let (_, answer) = updates.wait_for(SCRIPTED_PROMPT_TIMEOUT, |m| m["id"] == 2)?;
    if answer.get("error").is_some() {
        return Err(format!("the prompt answered an error: {answer}"));
    }
    // The connection ends as at the end of stdin; its streams close.
    let _ = server.request("DELETE", &connection, None, "");
    Ok(at.duration_since(sent).as_secs_f64())
}

/// The same over stdio: one `spindle acp`, a new session each run, so that
/// both sides measure a process that is already warm.
fn first_updates_stdio(bench: &Bench, script: &std::path::Path) -> Result<Vec<f64>, String> {
    let mut command = Command::new(&bench.binary);
    command
        .arg("acp")
        .arg("--script")
        .arg(script)
        .env_remove("RUST_LOG")
        .env("SPINDLE_HOME", bench.work.home());
    let mut process = AgentProcess::spawn(command)?;
    process.request("initialize", json!({ "protocolVersion": 1 }), INIT_TIMEOUT)?;
    let mut samples = Vec::with_capacity(SAMPLES);
    for run in 0..=SAMPLES {
        let sample = stdio_run(bench, &mut process).map_err(|e| format!("stdio run {run}: {e}"))?;
        if run > 0 {
            samples.push(sample);
        }
    }
    process.close()?;
    Ok(samples)
}

fn stdio_run(bench: &Bench, process: &mut AgentProcess) -> Result<f64, String> {
    let (session, _) = bench.new_session(process)?;
    let answer = process.request(
        "session/prompt",
        json!({"sessionId": session, "prompt": [{"type": "text", "text": "hello"}]}),
        SCRIPTED_PROMPT_TIMEOUT,
    )?;
    if answer.chunks != 1 {
        return Err(format!(
            "the prompt was answered with {} message chunks, not 1",
            answer.chunks
        ));
    }
    let first = answer
        .last_chunk
        .ok_or("the prompt was answered without a message chunk")?;
    Ok(first.duration_since(answer.sent).as_secs_f64())
}

// ---------------------------------------------------------------------------
// The server and a raw-socket client

/// A running `spindle serve`; dropping it kills the process.
struct Server {
    child: Child,
    address: SocketAddr,
    token: String,
}

impl Server {
    /// `spindle serve --listen 127.0.0.1:0 --script S` in the bench's
    /// home; waits for the address it prints and reads its token.
    fn start(bench: &Bench, script: &std::path::Path) -> Result<Server, String> {
        let home = bench.work.home();
        let mut command = Command::new(&bench.binary);
        command
            .arg("serve")
            .args(["--listen", "127.0.0.1:0", "--script"])
            .arg(script)
            .current_dir(&bench.work.dir)
            .env_remove("RUST_LOG")
            .env("SPINDLE_HOME", &home)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        let mut child = command
            .spawn()
            .map_err(|e| format!("cannot start spindle serve: {e}"))?;
        let Some(stderr) = child.stderr.take() else {
            let _ = child.kill();
            let _ = child.wait();
            return Err("spindle serve has no stderr".into());
        };
        let (sender, receiver) = channel();
        thread::spawn(move || {
            let mut said = String::new();
            for line in BufReader::new(stderr).lines() {
                let Ok(line) = line else { break };
                if let Some(rest) = line.split("listening on http://").nth(1) {
                    let _ = sender.send(Ok(rest.trim_end_matches("/acp").to_string()));
                } else if said.len() < 4096 {
                    said.push_str(&line);
                    said.push('\n');
                }
            }
            let _ = sender.send(Err(said));
        });
        let mut server = Server {
            child,
            address: SocketAddr::from(([127, 0, 0, 1], 0)),
            token: String::new(),
        };
        let address = match receiver.recv_timeout(INIT_TIMEOUT) {
            Ok(Ok(address)) => address,
            Ok(Err(said)) => return Err(format!("spindle serve did not start: {}", said.trim())),
            Err(_) => return Err("spindle serve printed no address in time".into()),
        };
        server.address = address
            .parse()
            .map_err(|_| format!("spindle serve printed an odd address: {address}"))?;
        let token_file: PathBuf = home.join("serve-token");
        server.token = std::fs::read_to_string(&token_file)
            .map_err(|e| format!("cannot read the serve token: {e}"))?
            .trim()
            .to_string();
        Ok(server)
    }

    /// VmRSS (KiB) and threads, from /proc.
    fn status(&self) -> Result<(u64, u64), String> {
        let [rss, threads] = crate::agent::proc_status(self.child.id(), ["VmRSS:", "Threads:"])?;
        Ok((rss, threads))
    }

    fn connect(&self) -> Result<TcpStream, String> {
        let socket = TcpStream::connect(self.address)
            .map_err(|e| format!("cannot connect to the server: {e}"))?;
        socket
            .set_read_timeout(Some(REQUEST_TIMEOUT))
            .and_then(|()| socket.set_write_timeout(Some(REQUEST_TIMEOUT)))
            .map_err(|e| format!("cannot set a timeout: {e}"))?;
        Ok(socket)
    }

    /// One request on a new socket: its status, head and body.
    fn request(
        &self,
        method: &str,
        connection: &str,
        session: Option<&str>,
        body: &str,
    ) -> Result<(u16, String, String), String> {
        let mut head = format!(
            "{method} /acp HTTP/1.1\r\nHost: {}\r\nAuthorization: Bearer {}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: {}\r\nConnection: close\r\n",
            self.address,
            self.token,
            body.len()
        );
        if !connection.is_empty() {
            head.push_str(&format!("Acp-Connection-Id: {connection}\r\n"));
        }
        if let Some(session) = session {
            head.push_str(&format!("Acp-Session-Id: {session}\r\n"));
        }
        head.push_str("\r\n");
        head.push_str(body);
        let mut socket = self.connect()?;
        socket
            .write_all(head.as_bytes())
            .map_err(|e| format!("writing {method} failed: {e}"))?;
        read_answer(&mut socket)
    }

    /// `initialize` by POST: the new connection's id.
    fn initialize(&self) -> Result<String, String> {
        let body = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize",
            "params": {"protocolVersion": 1, "clientCapabilities": {}}})
        .to_string();
        let (status, head, answer) = self.request("POST", "", None, &body)?;
        if status != 200 {
            return Err(format!("initialize answered {status}: {answer}"));
        }
        head.lines()
            .find_map(|line| {
                let (name, value) = line.split_once(':')?;
                name.eq_ignore_ascii_case("acp-connection-id")
                    .then(|| value.trim().to_string())
            })
            .ok_or_else(|| "initialize answered without Acp-Connection-Id".into())
    }

    /// A POST of one message after `initialize`: 202 expected.
    fn send(&self, connection: &str, session: Option<&str>, message: &Value) -> Result<(), String> {
        let (status, _, answer) =
            self.request("POST", connection, session, &message.to_string())?;
        if status != 202 {
            return Err(format!("a POST answered {status}: {answer}"));
        }
        Ok(())
    }

    /// Opens the event stream of `connection` (or of its `session`) and
    /// reads its head; a thread reads its messages on.
    fn open_stream(&self, connection: &str, session: Option<&str>) -> Result<Stream, String> {
        let mut socket = self.connect()?;
        let mut head = format!(
            "GET /acp HTTP/1.1\r\nHost: {}\r\nAuthorization: Bearer {}\r\nAccept: text/event-stream\r\nAcp-Connection-Id: {connection}\r\n",
            self.address, self.token
        );
        if let Some(session) = session {
            head.push_str(&format!("Acp-Session-Id: {session}\r\n"));
        }
        head.push_str("\r\n");
        socket
            .write_all(head.as_bytes())
            .map_err(|e| format!("opening a stream failed: {e}"))?;
        let mut reader = BufReader::new(
            socket
                .try_clone()
                .map_err(|e| format!("cannot clone a socket: {e}"))?,
        );
        let mut status_line = String::new();
        reader
            .read_line(&mut status_line)
            .map_err(|e| format!("no answer to a stream's GET: {e}"))?;
        if status_line.split(' ').nth(1) != Some("200") {
            return Err(format!("a stream's GET answered: {}", status_line.trim()));
        }
        // From here the thread waits as long as the stream lasts; dropping
        // the `Stream` shuts the socket down and ends it.
        socket
            .set_read_timeout(None)
            .map_err(|e| format!("cannot clear a timeout: {e}"))?;
        let (sender, messages) = channel();
        thread::spawn(move || {
            // The head's end, then `data:` lines until the socket ends.
            let mut line = String::new();
            loop {
                line.clear();
                match reader.read_line(&mut line) {
                    Ok(0) => return,
                    Ok(_) => {}
                    Err(_) => return,
                }
                let at = Instant::now();
                if let Some(data) = line.trim_end().strip_prefix("data:") {
                    if let Ok(value) = serde_json::from_str::<Value>(data.trim_start()) {
                        if sender.send((at, value)).is_err() {
                            return;
                        }
                    }
                }
            }
        });
        Ok(Stream { socket, messages })
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// An open event stream: its socket (shut down on drop, which ends its
/// reader thread) and the messages read on it with when they were read.
struct Stream {
    socket: TcpStream,
    messages: Receiver<(Instant, Value)>,
}

impl Stream {
    fn wait_for(
        &self,
        limit: Duration,
        mut wanted: impl FnMut(&Value) -> bool,
    ) -> Result<(Instant, Value), String> {
        let deadline = Instant::now() + limit;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.messages.recv_timeout(left) {
                Ok((at, message)) if wanted(&message) => return Ok((at, message)),
                Ok(_) => {}
                Err(_) => {
                    return Err(format!(
                        "the awaited message did not come within {:.0} s",
                        limit.as_secs_f64()
                    ))
                }
            }
        }
    }
}

impl Drop for Stream {
    fn drop(&mut self) {
        let _ = self.socket.shutdown(Shutdown::Both);
    }
}

/// Reads one HTTP answer: its status, head and body (by its length, or to
/// the socket's end).
fn read_answer(socket: &mut TcpStream) -> Result<(u16, String, String), String> {
    let mut bytes = Vec::new();
    let mut buffer = [0u8; 8192];
    let mut body_at = None;
    loop {
        if let Some(at) = body_at {
            let head = String::from_utf8_lossy(&bytes[..at]).to_string();
            let length = head.lines().find_map(|line| {
                let (name, value) = line.split_once(':')?;
                name.eq_ignore_ascii_case("content-length")
                    .then(|| value.trim().parse::<usize>().ok())?
            });
            if length.is_some_and(|length| bytes.len() >= at + length) {
                break;
            }
        }
        match socket.read(&mut buffer) {
            Ok(0) => break,
            Ok(n) => bytes.extend_from_slice(&buffer[..n]),
            Err(err) => return Err(format!("reading an answer failed: {err}")),
        }
        if bytes.len() > ANSWER_CAP {
            return Err("an answer over 1 MiB".into());
        }
        if body_at.is_none() {
            body_at = bytes
                .windows(4)
                .position(|w| w == b"\r\n\r\n")
                .map(|p| p + 4);
        }
    }
    let Some(at) = body_at else {
        return Err("an answer without a whole head".into());
    };
    let head = String::from_utf8_lossy(&bytes[..at]).to_string();
    let body = String::from_utf8_lossy(&bytes[at..]).to_string();
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| format!("an answer without a status: {}", head.trim()))?;
    Ok((status, head, body))
}

//! Background jobs in the editor's terminal, with a test client that runs
//! terminals for real (child processes whose output it keeps): a dev
//! server started in the terminal without waiting for its exit, its output
//! read with `terminal/output` into the job's log, stopped with
//! `terminal/kill` and `terminal/release`; a job that exits by itself ends
//! with its code and starts a `job` turn.

use super::{call, calls, say, script, Space, WAIT};
use crate::support::{Agent, Answer};
use serde_json::{json, Value};
use std::collections::HashMap;
use std::io::Read;
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// A terminal the test client runs.
struct Term {
    child: Child,
    output: Arc<Mutex<Vec<u8>>>,
    /// The thread copying the command's stdout to `output`: done at its
    /// end of file.
    reader: std::thread::JoinHandle<()>,
    exit: Option<Value>,
    released: bool,
}

/// The client side of `terminal/*`, for real.
#[derive(Default)]
struct Host {
    terms: HashMap<String, Term>,
    log: Vec<String>,
}

impl Host {
    fn answer(&mut self, request: &Value) -> Answer {
        let params = &request["params"];
        let id = params["terminalId"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        let method = request["method"].as_str().unwrap_or_default();
        self.log.push(format!("{method} {id}"));
        match method {
            "terminal/create" => {
                let args: Vec<String> = params["args"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|a| a.as_str().unwrap().to_string())
                    .collect();
                let mut child = Command::new(params["command"].as_str().unwrap())
                    .args(&args)
                    .current_dir(params["cwd"].as_str().unwrap())
                    .stdin(Stdio::null())
                    .stdout(Stdio::piped())
                    .stderr(Stdio::null())
                    .process_group(0)
                    .spawn()
                    .unwrap();
                let output = Arc::new(Mutex::new(Vec::new()));
                let mut stdout = child.stdout.take().unwrap();
                let sink = output.clone();
                let reader = std::thread::spawn(move || {
                    let mut buffer = [0u8; 4096];
                    while let Ok(n) = stdout.read(&mut buffer) {
                        if n == 0 {
                            break;
                        }
                        sink.lock().unwrap().extend_from_slice(&buffer[..n]);
                    }
                });
                let id = format!("term-{}", self.terms.len() + 1);
                self.terms.insert(
                    id.clone(),
                    Term {
                        child,
                        output,
                        reader,
                        exit: None,
                        released: false,
                    },
                );
                Answer::Result(json!({"terminalId": id}))
            }
            "terminal/output" => {
                let Some(term) = self.terms.get_mut(&id).filter(|t| !t.released) else {
                    return Answer::error(-32602, "no such terminal");
                };
                if term.exit.is_none() {
                    if let Ok(Some(status)) = term.child.try_wait() {
                        use std::os::unix::process::ExitStatusExt;
                        // The last bytes are in once the reader sees the
                        // end of file (or, should a process the command
                        // left behind keep the pipe open, after a while).
                        let deadline = std::time::Instant::now() + Duration::from_secs(2);
                        while !term.reader.is_finished() && std::time::Instant::now() < deadline {
                            std::thread::sleep(Duration::from_millis(5));
                        }
                        term.exit = Some(json!({
                            "exitCode": status.code(),
                            "signal": status.signal().map(|s| s.to_string()),
                        }));
                    }
                }
                let output = String::from_utf8_lossy(&term.output.lock().unwrap()).into_owned();
                let mut answer = json!({"output": output, "truncated": false});
                if let Some(exit) = &term.exit {
                    answer["exitStatus"] = exit.clone();
                }
                Answer::Result(answer)
            }
            "terminal/kill" => {
                if let Some(term) = self.terms.get_mut(&id) {
                    kill_group(term.child.id());
                }
                Answer::Result(json!({}))
            }
            "terminal/release" => {
                if let Some(term) = self.terms.get_mut(&id) {
                    kill_group(term.child.id());
                    term.released = true;
                }
                Answer::Result(json!({}))
            }
            other => panic!("unexpected request {other}: {request}"),
        }
    }

    fn running(&mut self, id: &str) -> bool {
        self.terms
            .get_mut(id)
            .is_some_and(|t| matches!(t.child.try_wait(), Ok(None)))
    }
}

/// Sends a request and serves the agent's terminal requests until its
/// answer comes; every other message is returned.
fn call_serving(
    agent: &mut Agent,
    host: &mut Host,
    method: &str,
    params: Value,
) -> (Value, Vec<Value>) {
    let id = agent.request(method, params);
    let deadline = Instant::now() + WAIT;
    let mut others = Vec::new();
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let message = agent
            .recv(left)
            .unwrap_or_else(|| panic!("no answer to {method}"));
        if message.get("method").is_none() && message["id"] == id {
            return (message, others);
        }
        serve(agent, host, &message);
        others.push(message);
    }
}

fn serve(agent: &mut Agent, host: &mut Host, message: &Value) {
    let (Some(_), Some(id)) = (message.get("method"), message.get("id")) else {
        return;
    };
    match host.answer(message) {
        Answer::Result(result) => agent.send(json!({"jsonrpc": "2.0", "id": id, "result": result})),
        Answer::Error { code, message } => agent.send(json!({
            "jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message},
        })),
        Answer::Ignore => {}
    }
}

/// Serves requests until `check` holds.
fn serve_until(
    agent: &mut Agent,
    host: &mut Host,
    what: &str,
    mut check: impl FnMut(&mut Agent, &mut Host, &[Value]) -> bool,
) -> Vec<Value> {
    let deadline = Instant::now() + WAIT;
    let mut seen = Vec::new();
    while !check(agent, host, &seen) {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        if let Some(message) = agent.recv(Duration::from_millis(50)) {
            serve(agent, host, &message);
            seen.push(message);
        }
    }
    seen
}

fn job_item(agent: &mut Agent, host: &mut Host, session: &str) -> Value {
    let (answer, _) = call_serving(agent, host, "_spindle/jobs", json!({"sessionId": session}));
    answer["result"]["items"][0].clone()
}

#[test]
fn a_background_job_runs_in_the_editors_terminal_and_is_stopped_there() {
    let space = Space::new("term-jobs");
    let (mut agent, session) = space.start(
        &script(vec![
            calls(vec![call(
                "j1",
                "run_command",
                json!({"command": "echo serving on 127.0.0.1:8000; sleep 30", "background": true}),
            )]),
            say("The server runs."),
        ]),
        &["--permissions", "yolo"],
        json!({"terminal": true}),
    );
    let mut host = Host::default();
    let (answer, messages) = call_serving(
        &mut agent,
        &mut host,
        "session/prompt",
        json!({"sessionId": session, "prompt": [{"type": "text", "text": "start the server"}]}),
    );
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    // The terminal was created, and nothing waited for its exit.
    assert_eq!(
        host.log.first().map(String::as_str),
        Some("terminal/create ")
    );
    assert!(!host
        .log
        .iter()
        .any(|l| l.starts_with("terminal/wait_for_exit")));
    assert!(host.running("term-1"));
    // The tool call shows the terminal.
    let shown = messages.iter().any(|m| {
        m["params"]["update"]["toolCallId"] == "j1"
            && m["params"]["update"]["content"]
                .as_array()
                .is_some_and(|c| {
                    c.iter()
                        .any(|b| b["type"] == "terminal" && b["terminalId"] == "term-1")
                })
    });
    assert!(shown, "{messages:?}");

    // Listed with its terminal; its output reaches the job's log.
    let item = job_item(&mut agent, &mut host, &session);
    assert_eq!(item["state"], "running", "{item}");
    assert_eq!(item["terminalId"], "term-1");
    let job = item["jobId"].as_str().unwrap().to_string();
    let mut text = String::new();
    serve_until(
        &mut agent,
        &mut host,
        "the output in the log",
        |agent, host, _| {
            let (page, _) = call_serving(
                agent,
                host,
                "_spindle/job/transcript",
                json!({"sessionId": session, "jobId": job}),
            );
            text = page["result"]["text"]
                .as_str()
                .unwrap_or_default()
                .to_string();
            text.contains("serving on 127.0.0.1:8000")
        },
    );
    assert_eq!(text.matches("serving on").count(), 1, "read once: {text:?}");
    // Input goes through the editor's terminal, not job/send.
    let (answer, _) = call_serving(
        &mut agent,
        &mut host,
        "_spindle/job/send",
        json!({"sessionId": session, "jobId": job, "text": "x\n"}),
    );
    assert!(
        answer["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .contains("terminal"),
        "{answer}"
    );

    // Cancelled: the terminal is killed and released, the job is killed.
    call_serving(
        &mut agent,
        &mut host,
        "_spindle/job/cancel",
        json!({"sessionId": session, "jobId": job}),
    );
    serve_until(&mut agent, &mut host, "the killed job", |agent, host, _| {
        job_item(agent, host, &session)["state"] == "killed"
    });
    let kill = host.log.iter().position(|l| l == "terminal/kill term-1");
    let release = host.log.iter().position(|l| l == "terminal/release term-1");
    assert!(kill.is_some() && release > kill, "{:?}", host.log);
    serve_until(&mut agent, &mut host, "the terminal's end", |_, host, _| {
        !host.running("term-1")
    });
}

#[test]
fn a_terminal_job_that_exits_reports_its_code_and_starts_a_job_turn() {
    let space = Space::new("term-jobs-exit");
    let (mut agent, session) = space.start(
        &script(vec![
            calls(vec![call(
                "j1",
                "run_command",
                json!({"command": "sleep 0.8; echo 3 tests failed; exit 3", "background": true}),
            )]),
            say("Running the tests."),
            say("The tests failed: 3 of them."),
        ]),
        &["--permissions", "yolo"],
        json!({"terminal": true, "_meta": {"spindle": {"events": true}}}),
    );
    let mut host = Host::default();
    call_serving(
        &mut agent,
        &mut host,
        "session/prompt",
        json!({"sessionId": session, "prompt": [{"type": "text", "text": "test in the background"}]}),
    );
    let seen = serve_until(&mut agent, &mut host, "the job turn", |_, _, seen| {
        seen.iter().any(|m| {
            m["method"] == "_spindle/event"
                && m["params"]["kind"] == "turn"
                && m["params"]["data"]["state"] == "idle"
                && m["params"]["data"]["source"] == "job"
        })
    });
    let said: String = seen
        .iter()
        .filter_map(|m| m["params"]["update"]["content"]["text"].as_str())
        .collect();
    assert!(said.contains("3 of them"), "{seen:?}");
    let item = job_item(&mut agent, &mut host, &session);
    assert_eq!(item["state"], "exited", "{item}");
    assert_eq!(item["exitCode"], 3);
    assert!(
        host.log.iter().any(|l| l == "terminal/release term-1"),
        "{:?}",
        host.log
    );
}

fn kill_group(pgid: u32) {
    // SAFETY: kill(2) with plain integers.
    unsafe {
        libc::kill(-(pgid as i32), libc::SIGKILL);
    }
}

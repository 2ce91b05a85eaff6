//! Background jobs and resource windows through the real binary: a job
//! started by the model, read, sent input, listed, cancelled and gone by
//! pid; a job that ends while idle starts a `job` turn; cancel kills only
//! the jobs of its turn, close the rest; windows of workspace files and
//! job logs with their bounds; what a full log did not keep is told.

use super::{err, ok, text_prompt, Space, WAIT};
use crate::support::fake_openai::{chat_text, chunk_content, chunk_role, chunk_tool_call};
use crate::support::fake_openai::{chunk_finish, done};
use crate::support::{Agent, FakeServer, Reply, Step};
use serde_json::{json, Value};
use std::io::Write;
use std::time::{Duration, Instant};

/// An agent whose model starts `command` as job `j1` and then says
/// `said`, after the prompt `asked`: the server, the agent, the session
/// and the prompt's answer.
fn with_a_job(
    space: &Space,
    command: &str,
    said: &str,
    asked: &str,
) -> (FakeServer, Agent, String, Value) {
    let server = FakeServer::start();
    server.push(start_job("j1", command));
    server.push(Reply::Sse(chat_text(&[said])));
    let mut agent = space.openai(&server);
    let session = agent.new_session(&space.ws);
    let (answer, _) = prompt(&mut agent, &session, asked);
    (server, agent, session, answer)
}

fn start_job(id: &str, command: &str) -> Reply {
    Reply::Sse(vec![
        chunk_role(),
        chunk_tool_call(
            0,
            Some(id),
            Some("run_command"),
            &json!({"command": command, "background": true}).to_string(),
        ),
        chunk_finish("tool_calls"),
        done(),
    ])
}

fn prompt(agent: &mut Agent, session: &str, text: &str) -> (Value, Vec<Value>) {
    let id = agent.request("session/prompt", text_prompt(session, text));
    agent.response(&id, WAIT)
}

fn alive(pid: u64) -> bool {
    std::path::Path::new(&format!("/proc/{pid}")).exists()
        && !std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .unwrap_or_default()
            .contains(") Z ")
}

fn wait_until(what: &str, mut check: impl FnMut() -> bool) {
    let deadline = Instant::now() + WAIT;
    while !check() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn jobs(agent: &mut Agent, session: &str) -> Vec<Value> {
    ok(agent, "_spindle/jobs", json!({"sessionId": session}))["items"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

#[test]
#[cfg_attr(windows, ignore = "sh command lines")]
fn a_background_job_is_read_fed_listed_and_cancelled() {
    let space = Space::new("jobs-basic");
    let (server, mut agent, session, answer) = with_a_job(
        &space,
        "echo ready; echo pid $$ > job.pid; cat",
        "Started it.",
        "start the echo server",
    );
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    // The tool answered at once with the job and its first output.
    let result = server.requests()[1].body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["role"] == "tool")
        .and_then(|m| m["content"].as_str())
        .unwrap()
        .to_string();
    assert!(result.contains("Started job job_"), "{result}");
    assert!(result.contains("ready"), "{result}");
    let listed = jobs(&mut agent, &session);
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0]["state"], "running");
    let job = listed[0]["jobId"].as_str().unwrap().to_string();
    let pid: u64 = std::fs::read_to_string(space.ws.join("job.pid"))
        .unwrap()
        .trim()
        .trim_start_matches("pid ")
        .parse()
        .unwrap();
    assert!(alive(pid));
    // Input reaches it; its output is paged.
    ok(
        &mut agent,
        "_spindle/job/send",
        json!({"sessionId": session, "jobId": job, "text": "hello job\n"}),
    );
    wait_until("the echo", || {
        let page = ok(
            &mut agent,
            "_spindle/job/transcript",
            json!({"sessionId": session, "jobId": job}),
        );
        page["text"]
            .as_str()
            .unwrap_or_default()
            .contains("hello job")
    });
    let page = ok(
        &mut agent,
        "_spindle/job/transcript",
        json!({"sessionId": session, "jobId": job, "offset": 2, "limit": 3}),
    );
    assert_eq!(page["text"], "ady");
    assert_eq!(page["nextOffset"], 5);
    assert_eq!(page["complete"], false);
    let error = err(
        &mut agent,
        "_spindle/job/transcript",
        json!({"sessionId": session, "jobId": job, "output": "structured"}),
    );
    assert!(
        error["message"].as_str().unwrap().contains("text"),
        "{error}"
    );
    let error = err(
        &mut agent,
        "_spindle/job/transcript",
        json!({"sessionId": session, "jobId": job, "limit": -1}),
    );
    assert_eq!(error["code"], -32602);
    // The log as a resource window.
    let log = ok(
        &mut agent,
        "_spindle/resource",
        json!({"sessionId": session, "uri": format!("shell-log:{job}"), "byteOffset": 0, "byteCount": 5}),
    );
    assert_eq!(log["text"], "ready");
    // Cancel: the whole group dies.
    let cancelled = ok(
        &mut agent,
        "_spindle/job/cancel",
        json!({"sessionId": session, "jobId": job}),
    );
    assert_eq!(cancelled["jobId"], job);
    wait_until("the job to die", || !alive(pid));
    wait_until("the killed state", || {
        ok(
            &mut agent,
            "_spindle/job",
            json!({"sessionId": session, "jobId": job}),
        )["state"]
            == "killed"
    });
    let page = ok(
        &mut agent,
        "_spindle/job/transcript",
        json!({"sessionId": session, "jobId": job, "offset": 1_000_000}),
    );
    assert_eq!(
        (page["text"].clone(), page["complete"].clone()),
        (json!(""), json!(true))
    );
    let error = err(
        &mut agent,
        "_spindle/job/send",
        json!({"sessionId": session, "jobId": job, "text": "late"}),
    );
    assert_eq!(error["code"], -32600);
    let error = err(
        &mut agent,
        "_spindle/job",
        json!({"sessionId": session, "jobId": "job_nope"}),
    );
    assert_eq!(error["data"]["code"], "unknown_job");
}

#[test]
#[cfg_attr(windows, ignore = "sh command lines")]
fn a_job_that_ends_while_idle_starts_a_job_turn() {
    let space = Space::new("jobs-idle");
    let server = FakeServer::start();
    server.push(start_job("j1", "sleep 0.6; echo all 12 tests passed"));
    server.push(Reply::Sse(chat_text(&[
        "Running the tests in the background.",
    ])));
    server.push(Reply::Sse(chat_text(&["The tests passed."])));
    let mut agent = space.openai_with_events(&server);
    let session = agent.new_session(&space.ws);
    prompt(&mut agent, &session, "run the tests in the background");
    let deadline = Instant::now() + WAIT;
    loop {
        let message = agent.recv(deadline - Instant::now()).expect("a job turn");
        if message["method"] == "_spindle/event"
            && message["params"]["kind"] == "turn"
            && message["params"]["data"]["state"] == "idle"
            && message["params"]["data"]["source"] == "job"
        {
            break;
        }
    }
    let last = server.requests().pop().unwrap();
    let user = last.body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .rev()
        .find(|m| m["role"] == "user")
        .and_then(|m| m["content"].as_str())
        .unwrap()
        .to_string();
    assert!(user.contains("ended: exit code 0"), "{user}");
    assert!(user.contains("all 12 tests passed"), "{user}");
}

#[test]
#[cfg_attr(windows, ignore = "sh command lines")]
fn cancel_kills_the_jobs_of_its_turn_and_close_kills_the_rest() {
    let space = Space::new("jobs-owner");
    let server = FakeServer::start();
    server.push(start_job("a", "echo $$ > a.pid; sleep 60"));
    server.push(Reply::Sse(chat_text(&["A runs."])));
    server.push(start_job("b", "echo $$ > b.pid; sleep 60"));
    server.push(Reply::Sse(vec![
        chunk_role(),
        chunk_content("Waiting"),
        Step::Stall,
    ]));
    let mut agent = space.openai(&server);
    let session = agent.new_session(&space.ws);
    prompt(&mut agent, &session, "start a");
    let read_pid = |name: &str| -> u64 {
        std::fs::read_to_string(space.ws.join(name))
            .unwrap()
            .trim()
            .parse()
            .unwrap()
    };
    let a = read_pid("a.pid");
    let id = agent.request("session/prompt", text_prompt(&session, "start b"));
    loop {
        let message = agent.recv(WAIT).expect("the stream");
        if message["params"]["update"]["content"]["text"] == "Waiting" {
            break;
        }
    }
    let b = read_pid("b.pid");
    agent.notify("session/cancel", json!({"sessionId": session}));
    agent.response(&id, WAIT);
    wait_until("b to die", || !alive(b));
    assert!(
        alive(a),
        "the first turn's job survives the second turn's cancel"
    );
    ok(&mut agent, "session/close", json!({"sessionId": session}));
    wait_until("a to die", || !alive(a));
}

#[test]
#[cfg_attr(windows, ignore = "FIFOs and devices are Unix files")]
fn workspace_windows_have_bounds_and_a_revision() {
    let space = Space::new("jobs-resource");
    let lines: String = (1..=10).map(|n| format!("line {n}\n")).collect();
    std::fs::write(space.ws.join("ten.txt"), &lines).unwrap();
    std::fs::write(space.base.join("outside.txt"), "secret").unwrap();
    std::fs::write(space.ws.join("bin.dat"), [0xff, 0xfe, 0x00]).unwrap();
    spindle::os::testing::symlink(space.base.join("outside.txt"), space.ws.join("link.txt"))
        .unwrap();
    let mut agent = space.reader();
    let session = agent.new_session(&space.ws);
    let window = ok(
        &mut agent,
        "_spindle/resource",
        json!({"sessionId": session, "uri": "workspace:ten.txt", "startLine": 3, "lineCount": 2}),
    );
    assert_eq!(window["text"], "line 3\nline 4");
    assert_eq!(window["totalLines"], 10);
    assert_eq!(window["revision"].as_str().unwrap().len(), 64);
    let past = ok(
        &mut agent,
        "_spindle/resource",
        json!({"sessionId": session, "uri": "workspace:ten.txt", "startLine": 50}),
    );
    assert_eq!(past["text"], "");
    for (uri, extra) in [
        ("workspace:../outside.txt", json!({})),
        ("workspace:link.txt", json!({})),
        ("workspace:bin.dat", json!({})),
        ("workspace:ten.txt", json!({"lineCount": 5000})),
        ("ftp:x", json!({})),
    ] {
        let mut params = json!({"sessionId": session, "uri": uri});
        for (key, value) in extra.as_object().unwrap() {
            params[key] = value.clone();
        }
        let error = err(&mut agent, "_spindle/resource", params);
        assert_eq!(error["code"], -32602, "{uri}: {error}");
    }
    // A FIFO is answered (not opened for good by the reading thread).
    let fifo = space.ws.join("pipe.txt");
    assert!(std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap()
        .success());
    let error = err(
        &mut agent,
        "_spindle/resource",
        json!({"sessionId": session, "uri": "workspace:pipe.txt"}),
    );
    assert!(error["message"].is_string(), "{error}");
}

/// A large file is read for its window off the dispatcher: other requests
/// are answered while the pass runs; the next window of the unchanged file
/// comes from the index; a change is seen; and no more than four files are
/// read at once.
#[test]
fn large_workspace_files_are_indexed_without_holding_the_agent() {
    let space = Space::new("jobs-resource-large");
    // 16 MiB of lines (sparse: cheap to make, as long to read as any).
    let big = space.ws.join("big.log");
    {
        let file = std::fs::File::create(&big).unwrap();
        file.set_len(16 << 20).unwrap();
        use std::io::{Seek, Write};
        let mut file = file;
        file.seek(std::io::SeekFrom::End(0)).unwrap();
        file.write_all(b"\nthe end\n").unwrap();
    }
    let mut agent = space.reader();
    let session = agent.new_session(&space.ws);
    let window = agent.request(
        "_spindle/resource",
        json!({"sessionId": session, "uri": "workspace:big.log", "startLine": 2}),
    );
    let status = agent.request("_spindle/session/status", json!({"sessionId": session}));
    let mut order = Vec::new();
    let mut answer = Value::Null;
    let deadline = Instant::now() + WAIT * 3;
    while order.len() < 2 {
        assert!(Instant::now() < deadline, "answers: {order:?}");
        let Some(message) = agent.recv(Duration::from_millis(100)) else {
            continue;
        };
        if message["id"] == window {
            answer = message.clone();
            order.push("window");
        } else if message["id"] == status {
            order.push("status");
        }
    }
    assert_eq!(order, ["status", "window"], "the pass held the dispatcher");
    assert_eq!(answer["result"]["text"], "the end", "{answer}");
    assert_eq!(answer["result"]["totalLines"], 2);
    let revision = answer["result"]["revision"].clone();
    // Unchanged: from the index, the same revision.
    let again = ok(
        &mut agent,
        "_spindle/resource",
        json!({"sessionId": session, "uri": "workspace:big.log", "startLine": 2}),
    );
    assert_eq!(again["revision"], revision);
    // Changed: read again.
    std::fs::OpenOptions::new()
        .append(true)
        .open(&big)
        .unwrap()
        .write_all(b"more\n")
        .unwrap();
    let changed = ok(
        &mut agent,
        "_spindle/resource",
        json!({"sessionId": session, "uri": "workspace:big.log", "startLine": 3}),
    );
    assert_eq!(changed["text"], "more");
    assert_ne!(changed["revision"], revision);

    // Five large files asked for at once: four are read, the fifth is
    // told to ask again.
    for n in 0..5 {
        let path = space.ws.join(format!("big{n}.log"));
        std::fs::File::create(&path)
            .unwrap()
            .set_len(8 << 20)
            .unwrap();
    }
    let mut ids = Vec::new();
    for n in 0..5 {
        ids.push(agent.request(
            "_spindle/resource",
            json!({"sessionId": session, "uri": format!("workspace:big{n}.log")}),
        ));
    }
    let mut busy = 0;
    let mut answered = 0;
    let deadline = Instant::now() + WAIT * 6;
    while answered < 5 {
        assert!(Instant::now() < deadline, "{answered} answered");
        let Some(message) = agent.recv(Duration::from_millis(100)) else {
            continue;
        };
        if !ids.contains(&message["id"]) {
            continue;
        }
        answered += 1;
        if message["error"]["data"]["code"] == "busy" {
            assert_eq!(message["error"]["code"], -32600, "{message}");
            busy += 1;
        } else {
            assert_eq!(message["result"]["totalLines"], 1, "{message}");
        }
    }
    assert_eq!(busy, 1);
}

#[test]
#[cfg_attr(windows, ignore = "sh command lines")]
fn job_records_and_logs_survive_kill_9_and_reload() {
    let space = Space::processes("jobs-durable");
    let (server, mut agent, session, _) = with_a_job(
        &space,
        "echo kept output; echo $$ > j.pid; sleep 60 & echo $! > g.pid; wait",
        "It runs.",
        "start it",
    );
    let pid: u64 = std::fs::read_to_string(space.ws.join("j.pid"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let read_pid = |name: &str| -> u64 {
        let path = space.ws.join(name);
        wait_until(name, || {
            std::fs::read_to_string(&path).is_ok_and(|t| t.ends_with('\n'))
        });
        std::fs::read_to_string(&path)
            .unwrap()
            .trim()
            .parse()
            .unwrap()
    };
    let grandchild = read_pid("g.pid");
    assert!(alive(grandchild));
    agent.kill();
    // The job died with the agent (SIGKILL): its shell, and the shell's
    // own children, which the kernel's parent-death signal does not reach.
    wait_until("the job to die with the agent", || !alive(pid));
    wait_until("the job's child to die with the agent", || {
        !alive(grandchild)
    });
    let mut agent = space.openai(&server);
    super::load(&mut agent, &session, space.ws());
    let listed = jobs(&mut agent, &session);
    assert_eq!(listed.len(), 1, "{listed:?}");
    assert_eq!(listed[0]["state"], "killed");
    let job = listed[0]["jobId"].clone();
    let page = ok(
        &mut agent,
        "_spindle/job/transcript",
        json!({"sessionId": session, "jobId": job}),
    );
    assert!(
        page["text"].as_str().unwrap().contains("kept output"),
        "{page}"
    );
    assert_eq!(page["complete"], true);
    space.db.assert_sound();
}

#[test]
#[cfg_attr(windows, ignore = "sh command lines")]
fn input_to_a_job_that_does_not_read_never_stalls_the_agent() {
    // Review finding: a blocking write to a full pipe froze the dispatcher.
    let space = Space::new("jobs-stdin");
    let (_server, mut agent, session, _) = with_a_job(&space, "sleep 60", "Started.", "start it");
    let job = jobs(&mut agent, &session)[0]["jobId"]
        .as_str()
        .unwrap()
        .to_string();
    let chunk = "y".repeat(16 * 1024);
    let mut refused = None;
    // A pipe holds 64 KiB: well before 40 sends it is full.
    for _ in 0..40 {
        let id = agent.request(
            "_spindle/job/send",
            json!({"sessionId": session, "jobId": job, "text": chunk}),
        );
        let (answer, _) = agent.response(&id, WAIT);
        if let Some(error) = answer.get("error") {
            refused = Some(error.clone());
            break;
        }
    }
    let error = refused.expect("a full pipe is refused");
    assert!(
        error["message"].as_str().unwrap().contains("not reading"),
        "{error}"
    );
    // Over the cap: refused outright.
    let error = err(
        &mut agent,
        "_spindle/job/send",
        json!({"sessionId": session, "jobId": job, "text": "z".repeat(17 * 1024)}),
    );
    assert_eq!(error["code"], -32602, "{error}");
    // The agent still answers.
    assert_eq!(jobs(&mut agent, &session)[0]["state"], "running");
    ok(
        &mut agent,
        "_spindle/job/cancel",
        json!({"sessionId": session, "jobId": job}),
    );
}

/// An agent against `server` with a config file (`extra` merged in).
fn configured(space: &Space, server: &FakeServer, extra: Value) -> Agent {
    let mut config = json!({
        "providers": {"fake": {"kind": "openai", "base_url": server.base_url(),
                               "requires_key": false}},
        "defaults": {"model": "fake/test-model"},
    });
    for (key, value) in extra.as_object().unwrap() {
        config[key] = value.clone();
    }
    let path = space.base.join("config.json");
    std::fs::write(&path, config.to_string()).unwrap();
    let db = space.db.arg();
    let tmp = space.tmpdir();
    let mut agent = Agent::spawn(
        &[
            "acp",
            "--db",
            &db,
            "--permissions",
            "yolo",
            "--config",
            path.to_str().unwrap(),
        ],
        &[("TMPDIR", &tmp)],
    );
    // The job tests watch `job` and `turn` events.
    agent.initialize_with_events();
    agent
}

fn vm_hwm_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

#[test]
#[cfg_attr(windows, ignore = "sh command lines")]
fn a_job_that_floods_its_output_keeps_a_capped_log_and_bounded_memory() {
    let space = Space::new("jobs-flood");
    let server = FakeServer::start();
    // 100 MB of output against a 1 MiB log.
    server.push(start_job(
        "j1",
        "yes 0123456789abcdef | head -c 100000000; echo; echo finished",
    ));
    server.push(Reply::Sse(chat_text(&["Started."])));
    server.push(Reply::Sse(chat_text(&["It finished."])));
    let mut agent = configured(
        &space,
        &server,
        json!({"tools": {"command_log_bytes": 1_048_576}}),
    );
    let session = agent.new_session(&space.ws);
    prompt(&mut agent, &session, "flood");
    let job = jobs(&mut agent, &session)[0]["jobId"]
        .as_str()
        .unwrap()
        .to_string();
    wait_until("the job's end", || {
        ok(
            &mut agent,
            "_spindle/job",
            json!({"sessionId": session, "jobId": job}),
        )["state"]
            != "running"
    });
    let item = ok(
        &mut agent,
        "_spindle/job",
        json!({"sessionId": session, "jobId": job}),
    );
    assert_eq!(item["state"], "exited", "{item}");
    assert_eq!(
        item["outputBytes"],
        100_000_000u64 + "\nfinished\n".len() as u64
    );
    let window = ok(
        &mut agent,
        "_spindle/resource",
        json!({"sessionId": session, "uri": format!("shell-log:{job}"), "byteOffset": 1_048_000, "byteCount": 4096}),
    );
    let total = window["totalBytes"].as_u64().unwrap();
    assert!(
        (1_048_576..1_048_576 + 200).contains(&total),
        "the log is capped: {total}"
    );
    assert!(
        window["text"]
            .as_str()
            .unwrap()
            .contains("later output is not kept"),
        "{window}"
    );
    // Nothing like the output was held in memory (a debug build idles
    // well under this).
    let peak = vm_hwm_kib(agent.pid());
    assert!(peak > 0 && peak < 96 * 1024, "peak RSS {peak} KiB");
}

#[test]
#[cfg_attr(windows, ignore = "sh command lines")]
fn cancelling_a_job_that_forked_kills_its_whole_group() {
    let space = Space::new("jobs-fork");
    let (_server, mut agent, session, _) = with_a_job(
        &space,
        "sleep 60 & echo $! > a.pid; (sleep 61 & echo $! > b.pid; wait) & wait",
        "Started.",
        "fork",
    );
    let read = |name: &str| -> u64 {
        let path = space.ws.join(name);
        wait_until(name, || {
            std::fs::read_to_string(&path).is_ok_and(|t| t.ends_with('\n'))
        });
        std::fs::read_to_string(&path)
            .unwrap()
            .trim()
            .parse()
            .unwrap()
    };
    let (a, b) = (read("a.pid"), read("b.pid"));
    assert!(alive(a) && alive(b));
    let job = jobs(&mut agent, &session)[0]["jobId"].clone();
    ok(
        &mut agent,
        "_spindle/job/cancel",
        json!({"sessionId": session, "jobId": job}),
    );
    wait_until("the children to die", || !alive(a) && !alive(b));
}

/// A model reply that calls `name` with `args` as call `id`.
fn tool_call(id: &str, name: &str, args: Value) -> Reply {
    Reply::Sse(vec![
        chunk_role(),
        chunk_tool_call(0, Some(id), Some(name), &args.to_string()),
        chunk_finish("tool_calls"),
        done(),
    ])
}

/// The result the model was given for tool call `id`.
fn tool_result(server: &FakeServer, id: &str) -> String {
    server
        .requests()
        .iter()
        .flat_map(|r| r.body["messages"].as_array().cloned().unwrap_or_default())
        .find(|m| m["role"] == "tool" && m["tool_call_id"] == id)
        .and_then(|m| m["content"].as_str().map(str::to_string))
        .unwrap_or_else(|| panic!("no result for {id}"))
}

/// Once the job's log is full, what it prints later is not kept; the
/// model's next `job_output` says how much, not "no new output".
#[test]
#[cfg_attr(windows, ignore = "sh command lines")]
fn job_output_tells_how_much_output_a_full_log_did_not_keep() {
    let space = Space::new("jobs-not-kept");
    let server = FakeServer::start();
    server.push(start_job(
        "j1",
        "head -c 1500 /dev/zero | tr '\\0' a; read go; head -c 3000 /dev/zero | tr '\\0' b",
    ));
    server.push(Reply::Sse(chat_text(&["Started."])));
    let mut agent = configured(
        &space,
        &server,
        json!({"tools": {"command_log_bytes": 1000}}),
    );
    let session = agent.new_session(&space.ws);
    prompt(&mut agent, &session, "start it");
    let job = jobs(&mut agent, &session)[0]["jobId"]
        .as_str()
        .unwrap()
        .to_string();
    let item = |agent: &mut Agent| {
        ok(
            agent,
            "_spindle/job",
            json!({"sessionId": session, "jobId": job}),
        )
    };
    wait_until("the first 1,500 bytes", || {
        item(&mut agent)["outputBytes"] == 1500
    });
    // The model reads the full log: the first 1,000 bytes and the marker.
    server.push(tool_call("o1", "job_output", json!({"jobId": job})));
    server.push(Reply::Sse(chat_text(&["Read."])));
    prompt(&mut agent, &session, "read it");
    // 3,000 more bytes, none of them kept; the job's end starts a turn,
    // in which the model reads again.
    server.push(tool_call("o2", "job_output", json!({"jobId": job})));
    server.push(Reply::Sse(chat_text(&["Read again."])));
    ok(
        &mut agent,
        "_spindle/job/send",
        json!({"sessionId": session, "jobId": job, "text": "go\n"}),
    );
    let deadline = Instant::now() + WAIT;
    loop {
        let message = agent.recv(deadline - Instant::now()).expect("a job turn");
        if message["method"] == "_spindle/event"
            && message["params"]["kind"] == "turn"
            && message["params"]["data"]["state"] == "idle"
            && message["params"]["data"]["source"] == "job"
        {
            break;
        }
    }
    assert_eq!(item(&mut agent)["outputBytes"], 4500);
    let second = tool_result(&server, "o2");
    assert!(
        second.contains("[3000 bytes of new output were not kept: the job's log is full]"),
        "{second}"
    );
    assert!(!second.contains("no new output"), "{second}");
    // Nothing new since: now that is what it says.
    server.push(tool_call("o3", "job_output", json!({"jobId": job})));
    server.push(Reply::Sse(chat_text(&["Nothing."])));
    prompt(&mut agent, &session, "and again");
    let third = tool_result(&server, "o3");
    assert!(third.starts_with("(no new output)"), "{third}");
}

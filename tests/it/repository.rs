//! What a hostile repository ships for Spindle to read or run on its own
//! behalf: command files that are links (to files outside, to
//! `/proc/self/environ`), FIFOs and devices where files are expected, a
//! `.spindle/` that leads outside, a `.git/config` that makes git hang,
//! and a `.gitattributes` that has git run a filter that leaves a process
//! behind. Each attack runs through the real binary.

use crate::support::fake_openai::chat_text;
use crate::support::prelude::WAIT;
use crate::support::{run_prompt, temp_dir, Agent, Answer, FakeServer, Reply};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

const MARKER: &str = "marker-env-5521";

fn space(name: &str) -> PathBuf {
    spindle::os::canonical(temp_dir(name)).unwrap()
}

fn mkfifo(path: &Path) {
    assert!(Command::new("mkfifo").arg(path).status().unwrap().success());
}

fn fake_model_agent(server: &FakeServer, extra: &[&str]) -> Agent {
    let base = server.base_url();
    let mut args = vec!["acp", "--model", "test-model"];
    args.extend_from_slice(extra);
    let mut agent = Agent::spawn(
        &args,
        &[
            ("OPENAI_BASE_URL", &base),
            ("OPENAI_API_KEY", "sk-test"),
            ("SPINDLE_TEST_MARKER", MARKER),
        ],
    );
    agent.initialize();
    agent
}

/// Opens a session and returns its id and the commands it was offered.
fn session_with_commands(agent: &mut Agent, ws: &Path) -> (String, Vec<String>) {
    let id = agent.request(
        "session/new",
        json!({"cwd": ws.to_str().unwrap(), "mcpServers": []}),
    );
    let (response, mut seen) = agent.response(&id, WAIT);
    let session = response["result"]["sessionId"]
        .as_str()
        .unwrap_or_else(|| panic!("session/new failed: {response}"))
        .to_string();
    // The commands follow the answer.
    let deadline = Instant::now() + WAIT;
    let find = |seen: &[Value]| {
        seen.iter()
            .filter_map(|m| m.pointer("/params/update"))
            .find(|u| u["sessionUpdate"] == "available_commands_update")
            .cloned()
    };
    while find(&seen).is_none() && Instant::now() < deadline {
        if let Some(message) = agent.recv(Duration::from_millis(50)) {
            seen.push(message);
        }
    }
    let update = find(&seen).expect("no available_commands_update");
    let names = update["availableCommands"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap().to_string())
        .collect();
    (session, names)
}

/// Command files that link out of `.spindle/commands/` (to a file
/// outside, to the agent's own environment), a FIFO and a device are
/// neither offered nor sent to the model; the session opens at once, the
/// user is told which files were left out, and SIGTERM still works.
#[test]
#[cfg_attr(windows, ignore = "FIFOs and devices are Unix files")]
fn command_files_that_are_links_fifos_or_devices_are_refused() {
    let dir = space("repo-commands");
    let ws = dir.join("ws");
    let commands = ws.join(".spindle/commands");
    std::fs::create_dir_all(&commands).unwrap();
    std::fs::write(dir.join("secret.txt"), "OUTSIDE-SECRET-7731\nmore").unwrap();
    std::fs::write(commands.join("fine.md"), "Say fine.").unwrap();
    spindle::os::testing::symlink("../../../secret.txt", commands.join("leak.md")).unwrap();
    spindle::os::testing::symlink("/proc/self/environ", commands.join("env.md")).unwrap();
    spindle::os::testing::symlink("/dev/zero", commands.join("zero.md")).unwrap();
    mkfifo(&commands.join("pipe.md"));
    let server = FakeServer::start();
    server.push(Reply::Sse(chat_text(&["ok"])));
    server.push(Reply::Sse(chat_text(&["ok"])));
    let mut agent = fake_model_agent(&server, &[]);
    let (session, names) = session_with_commands(&mut agent, &ws);
    assert!(names.contains(&"fine".to_string()), "{names:?}");
    for refused in ["leak", "env", "zero", "pipe"] {
        assert!(
            !names.contains(&refused.to_string()),
            "{refused} offered: {names:?}"
        );
    }
    let turn = run_prompt(&mut agent, &session, "/env", WAIT, |r| {
        panic!("unexpected request {r}")
    });
    assert_eq!(turn.stop_reason(), "end_turn");
    let notices = turn.notices();
    for name in ["leak.md", "env.md", "zero.md", "pipe.md"] {
        assert!(notices.contains(name), "{name} not named: {notices}");
    }
    assert!(
        notices.contains("a link to a file outside its folder"),
        "{notices}"
    );
    assert!(notices.contains("not a regular file"), "{notices}");
    // Named once: the next turn is quiet.
    let turn = run_prompt(&mut agent, &session, "/leak", WAIT, |r| {
        panic!("unexpected request {r}")
    });
    assert!(turn.notices().is_empty(), "{}", turn.notices());
    let requests = server.wait_requests(2, WAIT);
    for request in &requests {
        let body = request.body.to_string();
        assert!(
            !body.contains(MARKER),
            "the agent's environment reached the model"
        );
        assert!(
            !body.contains("OUTSIDE-SECRET-7731"),
            "an outside file reached the model"
        );
    }
    // The typed text goes to the model as it was typed.
    assert!(requests[0].body.to_string().contains("/env"));
    // SIGTERM is still handled (a FIFO once blocked the dispatcher).
    #[cfg(unix)]
    {
        unsafe { libc::kill(agent.pid() as i32, libc::SIGTERM) };
        assert!(agent.wait_exit(WAIT).is_some_and(|s| s.success()));
    }
}

/// `spindle doctor`, run in the workspace, names the refused files.
#[test]
#[cfg_attr(windows, ignore = "FIFOs and devices are Unix files")]
fn doctor_names_the_workspace_files_it_refuses() {
    let dir = space("repo-doctor");
    let ws = dir.join("ws");
    std::fs::create_dir_all(ws.join(".spindle/commands")).unwrap();
    spindle::os::testing::symlink("/etc/passwd", ws.join("AGENTS.md")).unwrap();
    mkfifo(&ws.join(".spindle/config.json"));
    spindle::os::testing::symlink("/etc/hostname", ws.join(".spindle/commands/host.md")).unwrap();
    let home = dir.join("home");
    let mut command = crate::support::spindle_command(&home);
    command.arg("doctor").current_dir(&ws);
    let output = command.output().unwrap();
    let text = String::from_utf8_lossy(&output.stdout);
    for name in ["AGENTS.md", "config.json", "host.md"] {
        assert!(text.contains(name), "{name} missing:\n{text}");
    }
    assert!(text.contains("Workspace"), "{text}");
}

/// A `.spindle/` that links outside the workspace gets no attachment
/// written through it; the prompt gets a clear error instead.
#[test]
fn attachments_are_never_written_through_a_link_out_of_the_workspace() {
    let dir = space("repo-attach");
    let ws = dir.join("ws");
    let outside = dir.join("outside");
    std::fs::create_dir_all(&ws).unwrap();
    std::fs::create_dir_all(&outside).unwrap();
    spindle::os::testing::symlink(&outside, ws.join(".spindle")).unwrap();
    let server = FakeServer::start();
    server.push(Reply::Sse(chat_text(&["ok"])));
    let mut agent = fake_model_agent(&server, &[]);
    let session = agent.new_session(&ws);
    // A one-pixel PNG.
    let png = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==";
    let id = agent.request(
        "session/prompt",
        json!({"sessionId": session, "prompt": [
            {"type": "text", "text": "look"},
            {"type": "image", "mimeType": "image/png", "data": png},
        ]}),
    );
    let (response, _) = agent.response(&id, WAIT);
    let message = response["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("outside the workspace"), "{response}");
    assert!(
        std::fs::read_dir(&outside).unwrap().next().is_none(),
        "something was written outside the workspace"
    );
}

/// A git repository whose own configuration includes a FIFO (git blocks
/// opening it): under `auto`, a git command is not judged until git
/// answers, so the check stops at its time limit (the command then asks)
/// or at a cancel, and leaves no git behind.
#[test]
#[cfg_attr(windows, ignore = "FIFOs and devices are Unix files")]
fn a_git_config_that_includes_a_fifo_neither_hangs_a_prompt_nor_leaves_git_behind() {
    let dir = space("repo-git-fifo");
    let ws = dir.join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    let git = |args: &[&str]| {
        let status = Command::new("git")
            .args(args)
            .current_dir(&ws)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("HOME", &dir)
            .output()
            .unwrap();
        assert!(status.status.success(), "git {args:?}");
    };
    git(&["init", "-q"]);
    let fifo = dir.join("config-fifo");
    mkfifo(&fifo);
    git(&["config", "include.path", fifo.to_str().unwrap()]);
    let server = FakeServer::start();
    server.push(Reply::Sse(crate::support::fake_openai::chat_tool_calls(&[
        ("run_command", json!({"command": "git log --oneline"})),
    ])));
    server.push(Reply::Sse(crate::support::fake_openai::chat_tool_calls(&[
        ("run_command", json!({"command": "git status"})),
    ])));
    let mut agent = fake_model_agent(&server, &["--permissions", "auto"]);
    let session = agent.new_session(&ws);
    let mut asked = 0;
    let turn = run_prompt(&mut agent, &session, "log", WAIT, |request| {
        assert_eq!(request["method"], "session/request_permission", "{request}");
        asked += 1;
        Answer::select("reject_once")
    });
    assert_eq!(
        asked,
        1,
        "the git command was not asked about: {}",
        turn.dump()
    );
    // A cancel while git hangs answers at once.
    let exchange = crate::support::Exchange::prompt(&mut agent, &session, "status");
    let id = exchange.id.clone();
    server.wait_requests(2, WAIT);
    // git hangs once it is running in the workspace (on the FIFO).
    let deadline = Instant::now() + WAIT;
    while git_processes_in(&ws).is_empty() {
        assert!(Instant::now() < deadline, "git never ran in the workspace");
        std::thread::sleep(Duration::from_millis(20));
    }
    let sent = Instant::now();
    agent.notify("session/cancel", json!({"sessionId": session}));
    let mut answer = None;
    while answer.is_none() && sent.elapsed() < WAIT {
        if let Some(message) = agent.recv(Duration::from_millis(50)) {
            if message.get("id") == Some(&id) && message.get("method").is_none() {
                answer = Some(message);
            } else if message.get("method") == Some(&json!("session/request_permission")) {
                agent.send(json!({"jsonrpc": "2.0", "id": message["id"],
                    "result": {"outcome": {"outcome": "cancelled"}}}));
            }
        }
    }
    let answer = answer.expect("the cancelled prompt was not answered");
    assert_eq!(answer["result"]["stopReason"], "cancelled", "{answer}");
    agent.close_stdin();
    assert!(agent.wait_exit(WAIT).is_some());
    // No git is left running in the workspace.
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut left = git_processes_in(&ws);
    while !left.is_empty() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
        left = git_processes_in(&ws);
    }
    assert!(left.is_empty(), "git left behind: {left:?}");
}

/// Pids of live (not zombie) processes whose working folder is `dir`.
fn git_processes_in(dir: &Path) -> Vec<u32> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<u32>().ok())
        else {
            continue;
        };
        let cwd = std::fs::read_link(format!("/proc/{pid}/cwd"));
        if cwd.ok().as_deref() != Some(dir) {
            continue;
        }
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        let state = stat
            .rsplit(')')
            .next()
            .and_then(|r| r.split_whitespace().next());
        if state != Some("Z") {
            found.push(pid);
        }
    }
    found
}

/// Spindle's own `git status` (for the system prompt) runs the clean
/// filter that the user's git configuration defines for the files a
/// repository's `.gitattributes` picks. A filter that leaves a process in
/// a session of its own and hangs is stopped at git's time limit, and
/// that process with it: git runs under the guard, as commands do.
#[test]
#[cfg(target_os = "linux")]
fn a_git_filter_that_leaves_a_detached_process_behind_takes_it_along() {
    let dir = space("repo-git-filter");
    let ws = dir.join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    let git = |args: &[&str]| {
        let status = Command::new("git")
            .args(args)
            .current_dir(&ws)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("HOME", &dir)
            .output()
            .unwrap();
        assert!(status.status.success(), "git {args:?}");
    };
    git(&["init", "-q"]);
    std::fs::write(ws.join("a.txt"), "aaaa\n").unwrap();
    git(&["add", "a.txt"]);
    // The same size, other bytes: git must read it, through the filter.
    std::fs::write(ws.join("a.txt"), "bbbb\n").unwrap();
    std::fs::write(ws.join(".gitattributes"), "a.txt filter=slow\n").unwrap();
    let pidfile = dir.join("daemon.pid");
    let filter = dir.join("filter.sh");
    std::fs::write(
        &filter,
        format!(
            "#!/bin/sh\nsetsid sh -c 'echo $$ > {}; exec sleep 120' &\nsleep 30\n",
            pidfile.display()
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&filter, std::fs::Permissions::from_mode(0o755)).unwrap();
    let config = dir.join("gitconfig");
    std::fs::write(
        &config,
        format!("[filter \"slow\"]\n\tclean = {}\n", filter.display()),
    )
    .unwrap();
    let server = FakeServer::start();
    server.push(Reply::Sse(chat_text(&["ok"])));
    let base = server.base_url();
    let config_path = config.to_str().unwrap();
    let mut agent = Agent::spawn(
        &["acp", "--model", "test-model"],
        &[
            ("OPENAI_BASE_URL", &base),
            ("OPENAI_API_KEY", "sk-test"),
            ("GIT_CONFIG_GLOBAL", config_path),
        ],
    );
    agent.initialize();
    let session = agent.new_session(&ws);
    let turn = run_prompt(&mut agent, &session, "hi", WAIT, |request| {
        panic!("unexpected request: {request}")
    });
    assert_eq!(turn.stop_reason(), "end_turn", "{}", turn.dump());
    let pid: i32 = std::fs::read_to_string(&pidfile)
        .ok()
        .and_then(|text| text.trim().parse().ok())
        .expect("the filter did not run");
    let ended = || {
        std::fs::read_to_string(format!("/proc/{pid}/stat")).map_or(true, |s| s.contains(") Z "))
    };
    let deadline = Instant::now() + Duration::from_secs(10);
    while !ended() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    if !ended() {
        // SAFETY: kill(2) of this test's own leftover process.
        unsafe { libc::kill(pid, libc::SIGKILL) };
        panic!("the filter's detached process ({pid}) outlived git's time limit");
    }
}

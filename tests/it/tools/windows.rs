//! Windows as Windows is: commands under cmd whose whole tree ends with a
//! cancel, with EOF and with the agent itself (the job object closes with
//! it), paths with drive letters and `file:///C:/` URIs, and the sandbox
//! refused at start. Run under Wine in CI (scripts/test-windows).

use super::{call, calls, say, script, Space, WAIT};
use crate::support::client::no_requests;
use crate::support::{Agent, Exchange};
use serde_json::json;
use std::path::Path;
use std::time::{Duration, Instant};

/// A cmd line whose background cmd appends a line to `file` every second
/// for a minute while the line itself waits a minute.
fn growing_tree(file: &Path) -> String {
    format!(
        "start /b cmd /d /c \"for /l %i in (1,1,60) do (echo %i>>{} & ping -n 2 127.0.0.1 >nul)\" & ping -n 60 127.0.0.1 >nul",
        file.display()
    )
}

fn length(file: &Path) -> u64 {
    std::fs::metadata(file).map_or(0, |m| m.len())
}

/// Starts a prompt whose command is `growing_tree` and waits until the
/// tree has written its first line.
fn with_a_growing_tree(space: &Space) -> (Agent, String, Exchange, std::path::PathBuf) {
    let file = space.path("ticks.txt");
    // A process of its own: these tests kill it, or signal it.
    let (mut agent, session) = space.start_process(
        &script(vec![
            calls(vec![call(
                "c1",
                "run_command",
                json!({"command": growing_tree(&file)}),
            )]),
            say("done"),
        ]),
        &["--permissions", "yolo"],
        json!({}),
    );
    let mut exchange = Exchange::prompt(&mut agent, &session, "go");
    let started = exchange.until(&mut agent, WAIT, &mut no_requests, &mut |_: &Exchange| {
        length(&file) > 0
    });
    assert!(started, "the command never started its tree");
    (agent, session, exchange, file)
}

fn assert_stops_growing(file: &Path) {
    // A process that was being ended may finish its last line.
    std::thread::sleep(Duration::from_millis(1500));
    let before = length(file);
    std::thread::sleep(Duration::from_secs(3));
    assert_eq!(
        length(file),
        before,
        "a process of the command's tree survived"
    );
}

#[test]
fn cancel_ends_the_commands_whole_tree() {
    let space = Space::new("win-cancel");
    let (mut agent, session, exchange, file) = with_a_growing_tree(&space);
    agent.notify("session/cancel", json!({"sessionId": session}));
    let turn = exchange.finish(&mut agent, WAIT, &mut no_requests);
    assert_eq!(turn.stop_reason(), "cancelled");
    assert_stops_growing(&file);
}

#[test]
fn eof_ends_the_agent_and_the_commands_tree() {
    let space = Space::new("win-eof");
    let (mut agent, _session, _exchange, file) = with_a_growing_tree(&space);
    let closed = Instant::now();
    agent.close_stdin();
    let status = agent
        .wait_exit(Duration::from_secs(10))
        .expect("no exit after EOF");
    assert!(status.success(), "{status:?}");
    eprintln!("exited {:?} after EOF", closed.elapsed());
    assert_stops_growing(&file);
}

/// The agent killed outright (TerminateProcess, no chance to clean up):
/// the job object it holds closes with it and ends every command.
#[test]
fn a_killed_agent_takes_its_commands_with_it() {
    let space = Space::new("win-kill");
    let (mut agent, _session, _exchange, file) = with_a_growing_tree(&space);
    agent.kill();
    assert_stops_growing(&file);
}

/// Ctrl-Break (and Ctrl-C, console close) ends the agent as SIGTERM does
/// on Unix: the turn is cancelled, the agent exits, the tree is gone.
#[test]
fn ctrl_break_ends_the_agent_and_the_commands_tree() {
    use windows_sys::Win32::System::Console::{
        AllocConsole, GenerateConsoleCtrlEvent, CTRL_BREAK_EVENT,
    };
    // Console events travel through a console the agent shares with the
    // test: one is made when the tests run without (as under CI).
    // SAFETY: no arguments; fails harmlessly when there is one already.
    unsafe { AllocConsole() };
    let space = Space::new("win-break");
    let (mut agent, _session, _exchange, file) = with_a_growing_tree(&space);
    // SAFETY: a plain call with integers; the group is the agent's own.
    let sent = unsafe { GenerateConsoleCtrlEvent(CTRL_BREAK_EVENT, agent.pid()) };
    assert_ne!(sent, 0, "{}", std::io::Error::last_os_error());
    let status = agent
        .wait_exit(Duration::from_secs(15))
        .expect("the agent did not exit after Ctrl-Break");
    eprintln!("exit after Ctrl-Break: {status:?}");
    assert_stops_growing(&file);
}

/// Drive-letter paths, with either slash, and `file:///C:/` links reach
/// the files; a path on another drive is outside the workspace.
#[test]
fn drive_letter_paths_and_file_uris_name_workspace_files() {
    let space = Space::new("win-paths");
    space.write("src/lib.rs", "pub fn windows_marker_4471() {}\n");
    let native = space.abs("src/lib.rs");
    assert!(
        native.as_bytes().get(1) == Some(&b':'),
        "not a drive path: {native}"
    );
    let forward = native.replace('\\', "/");
    let (mut agent, session) = space.start(
        &script(vec![
            calls(vec![
                call("r1", "read_file", json!({"path": native})),
                call("r2", "read_file", json!({"path": forward})),
            ]),
            say("read"),
        ]),
        &["--permissions", "ask"],
        json!({}),
    );
    let uri = spindle::os::paths::to_file_uri(&native, spindle::os::paths::Style::Windows);
    assert!(uri.starts_with("file:///"), "{uri}");
    let id = agent.request(
        "session/prompt",
        json!({"sessionId": session, "prompt": [
            {"type": "text", "text": "look"},
            {"type": "resource_link", "uri": uri, "name": "lib.rs"},
        ]}),
    );
    let exchange = Exchange {
        id,
        messages: Vec::new(),
        response: None,
    };
    let turn = exchange.finish(&mut agent, WAIT, &mut no_requests);
    assert_eq!(turn.stop_reason(), "end_turn", "{}", turn.dump());
    for id in ["r1", "r2"] {
        assert_eq!(turn.final_status(id), "completed", "{id}: {}", turn.dump());
        assert!(
            turn.final_text(id).contains("windows_marker_4471"),
            "{id}: {}",
            turn.dump()
        );
    }
}

#[test]
fn the_sandbox_is_refused_at_start_with_what_to_use_instead() {
    let out = crate::support::spindle_command(&crate::support::temp_dir("home"))
        .args(["acp", "--permissions", "sandbox"])
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(stderr.contains("Windows"), "{stderr}");
    assert!(out.stdout.is_empty(), "stdout carries protocol only");
}

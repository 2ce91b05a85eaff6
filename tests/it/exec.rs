//! `spindle exec`: one prompt through the real binary, without a terminal:
//! the answer on stdout, tool lines on stderr, `--json` updates, exit codes
//! 0, 1 and 3, a prompt from stdin, and permission requests rejected when
//! there is no terminal to ask on.

use crate::support::temp_dir;
use serde_json::{json, Value};
use std::path::Path;
use std::process::{Output, Stdio};

fn exec(dir: &Path, script: &Value, args: &[&str], stdin: &str) -> Output {
    run_exec(dir, script, args, stdin, false)
}

/// `exec` with `--script`; `alone`: with no controlling terminal (a new
/// session), whatever runs the tests, so that nobody can be asked.
fn run_exec(dir: &Path, script: &Value, args: &[&str], stdin: &str, alone: bool) -> Output {
    let script_path = dir.join("script.json");
    std::fs::write(&script_path, script.to_string()).unwrap();
    let mut command = crate::support::spindle_command(&dir.join("home"));
    #[cfg(unix)]
    if alone {
        use std::os::unix::process::CommandExt;
        // SAFETY: setsid(2) between fork and exec, nothing else.
        unsafe {
            command.pre_exec(|| {
                libc::setsid();
                Ok(())
            });
        }
    }
    #[cfg(not(unix))]
    let _ = alone;
    command
        .arg("exec")
        .arg("--script")
        .arg(&script_path)
        .args(args)
        .current_dir(dir)
        .env_remove("RUST_LOG");
    crate::support::agent::output_with_input(&mut command, stdin.as_bytes())
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[test]
fn exec_prints_the_answer_and_the_tool_lines_and_exits_0() {
    let dir = temp_dir("exec");
    std::fs::write(dir.join("a.txt"), "alpha\n").unwrap();
    let script = json!({"replies": [
        {"thought": "Read it first.", "tool_calls": [{"id": "r1", "name": "read_file", "arguments": {"path": "a.txt"}}]},
        {"text": "The file says alpha."},
    ]});
    let out = exec(&dir, &script, &["what does a.txt say?"], "");
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), "The file says alpha.\n");
    let stderr = text(&out.stderr);
    assert!(stderr.contains("✓ Read a.txt"), "{stderr}");
    assert!(stderr.contains("Read it first."), "{stderr}");

    // --quiet: the answer only.
    let out = exec(&dir, &script, &["--quiet", "what does a.txt say?"], "");
    assert_eq!(text(&out.stdout), "The file says alpha.\n");
    assert!(text(&out.stderr).is_empty(), "{}", text(&out.stderr));

    // --json: one update a line, then the stop reason.
    let out = exec(&dir, &script, &["--json", "-"], "what does a.txt say?");
    assert_eq!(out.status.code(), Some(0));
    let lines: Vec<Value> = text(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).expect("JSON lines"))
        .collect();
    assert!(lines.iter().any(|u| u["sessionUpdate"] == "tool_call"));
    assert_eq!(lines.last().unwrap()["stopReason"], "end_turn");
}

#[test]
fn exec_rejects_permission_requests_without_a_terminal_and_reports_stops() {
    let dir = temp_dir("exec-ask");
    let script = json!({"replies": [
        {"tool_calls": [{"id": "w1", "name": "write_file", "arguments": {"path": "b.txt", "content": "x"}}]},
        {"text": "unused"},
    ]});
    let mut command = crate::support::spindle_command(&dir.join("home"));
    // No controlling terminal, whatever runs the tests: a new session.
    // SAFETY: setsid(2) between fork and exec, nothing else.
    #[cfg(unix)]
    unsafe {
        use std::os::unix::process::CommandExt;
        command.pre_exec(|| {
            libc::setsid();
            Ok(())
        });
    }
    let out = command
        .args(["exec", "--permissions", "ask", "--script"])
        .arg({
            let path = dir.join("script.json");
            std::fs::write(&path, script.to_string()).unwrap();
            path
        })
        .arg("write b")
        .current_dir(&dir)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("Write b.txt needed approval and nobody could be asked (no terminal)"),
        "{stderr}"
    );
    assert!(stderr.contains("--permissions auto lets edits"), "{stderr}");
    assert!(!dir.join("b.txt").exists());
    // Nobody could be asked: its own outcome, exit 3.
    assert_eq!(out.status.code(), Some(3), "{stderr}");
    // Another stop reason: exit 3.
    let stop = json!({"replies": [{"text": "cut", "stop": "max_tokens"}]});
    let out = exec(&dir, &stop, &["go"], "");
    assert_eq!(out.status.code(), Some(3), "{}", text(&out.stderr));
    // An error: exit 1.
    let broken = json!({"replies": [{"text": "x", "error": {"code": "provider_http_500", "message": "boom"}}]});
    let out = exec(&dir, &broken, &["go"], "");
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    assert!(text(&out.stderr).contains("boom"), "{}", text(&out.stderr));
    // No prompt: a usage error.
    let out = exec(&dir, &stop, &[], "");
    assert_eq!(out.status.code(), Some(2));
}

/// `exec` that nobody can be asked from.
fn exec_alone(dir: &Path, script: &Value, args: &[&str], stdin: &str) -> Output {
    run_exec(dir, script, args, stdin, true)
}

#[test]
fn exec_says_what_answered_and_sets_messages_apart() {
    let dir = temp_dir("exec-header");
    let script = json!({"replies": [
        {"text": "First, a look.", "tool_calls": [{"id": "l1", "name": "list_directory", "arguments": {}}]},
        {"text": "Then the answer."},
    ]});
    let out = exec(&dir, &script, &["look"], "");
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), "First, a look.\n\nThen the answer.\n");
    let stderr = text(&out.stderr);
    let header = stderr.lines().next().unwrap_or_default();
    assert!(
        header.starts_with("spindle: script/scenario · approval ask · session sess_"),
        "{stderr}"
    );
    // --quiet: the answer alone, byte for byte.
    let out = exec(&dir, &script, &["--quiet", "look"], "");
    assert_eq!(out.stdout, b"First, a look.\n\nThen the answer.\n");
    assert_eq!(out.stderr, b"", "{}", text(&out.stderr));
}

#[test]
fn exec_continues_a_session_and_its_slash_commands_work() {
    let dir = temp_dir("exec-continue");
    // A scripted run keeps its sessions only in a database it is given.
    let db = dir.join("sessions.db");
    let db = db.to_str().unwrap();
    let write = json!({"replies": [
        {"tool_calls": [{"id": "w1", "name": "write_file", "arguments": {"path": "made.txt", "content": "new\n"}}]},
        {"text": "Wrote it."},
    ]});
    let out = exec(
        &dir,
        &write,
        &["--db", db, "--permissions", "yolo", "make a file"],
        "",
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(dir.join("made.txt").exists());
    let first = text(&out.stderr);
    let session = first
        .split("session ")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .expect("the header names the session")
        .to_string();
    // The latest session of this folder, and its /undo.
    let nothing = json!({"replies": []});
    let out = exec(&dir, &nothing, &["--db", db, "--continue", "/undo"], "");
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(!dir.join("made.txt").exists(), "{}", text(&out.stdout));
    assert!(text(&out.stderr).contains(&format!("session {session}, continued")));
    // By id, /redo brings it back.
    let out = exec(
        &dir,
        &nothing,
        &["--db", db, "--session", &session, "/redo"],
        "",
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(dir.join("made.txt").exists());
    // A unique prefix names it too, its sess_ left out, as in `spindle
    // sessions show`.
    let short = &session.strip_prefix("sess_").expect("a sess_ id")[..6];
    let out = exec(
        &dir,
        &nothing,
        &["--db", db, "--session", short, "/undo"],
        "",
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(!dir.join("made.txt").exists(), "{}", text(&out.stdout));
    assert!(
        text(&out.stderr).contains(&format!("session {session}")),
        "{}",
        text(&out.stderr)
    );
    let shown = crate::support::spindle_command(&dir.join("home"))
        .args(["sessions", "show", short, "--db", db])
        .output()
        .unwrap();
    assert!(shown.status.success(), "{}", text(&shown.stderr));
    assert!(
        text(&shown.stdout).contains("make a file"),
        "{}",
        text(&shown.stdout)
    );
    // A folder with no session, and an unknown id, say so.
    let other = temp_dir("exec-continue-none");
    let out = exec(&other, &nothing, &["--db", db, "--continue", "hello"], "");
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("no earlier session in"),
        "{}",
        text(&out.stderr)
    );
    let out = exec(
        &dir,
        &nothing,
        &["--db", db, "--session", "sess_nope", "hello"],
        "",
    );
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
}

#[test]
fn exec_without_a_terminal_names_what_needed_approval_under_each_policy() {
    let dir = temp_dir("exec-unasked");
    let command = json!({"replies": [
        {"tool_calls": [{"id": "c1", "name": "run_command", "arguments": {"command": "cargo publish --dry-run"}}]},
        {"text": "unused"},
    ]});
    for (policy, hint) in [
        ("ask", "--permissions auto runs read-only commands"),
        ("auto", "it is not read-only"),
    ] {
        let out = exec_alone(&dir, &command, &["--permissions", policy, "publish"], "");
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(3), "{policy}: {stderr}");
        assert!(
            stderr.contains("Run cargo publish --dry-run needed approval"),
            "{stderr}"
        );
        assert!(stderr.contains(hint), "{policy}: {stderr}");
        assert!(
            stderr.contains("/allow command cargo publish --project"),
            "{policy}: {stderr}"
        );
        // Not "you declined": nobody was asked.
        assert!(
            !text(&out.stdout).contains("You declined"),
            "{}",
            text(&out.stdout)
        );
        assert!(
            text(&out.stdout).contains("nobody could be asked"),
            "{}",
            text(&out.stdout)
        );
    }
    // A question with choices: the turn ends with it; exec says how to answer.
    let question = json!({"replies": [
        {"tool_calls": [{"id": "q1", "name": "ask_user", "arguments": {"question": "Which branch?", "choices": ["main", "dev"]}}]},
    ]});
    let out = exec_alone(&dir, &question, &["pick one"], "");
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{stderr}");
    assert!(
        stderr.contains("spindle exec --continue \"YOUR ANSWER\""),
        "{stderr}"
    );
    assert!(
        text(&out.stdout).contains("Which branch?"),
        "{}",
        text(&out.stdout)
    );
    assert!(
        !text(&out.stdout).contains("chose none"),
        "{}",
        text(&out.stdout)
    );
}

#[test]
fn exec_takes_piped_input_as_context_and_names_running_jobs() {
    let dir = temp_dir("exec-stdin");
    let db = dir.join("sessions.db");
    let db = db.to_str().unwrap();
    let script = json!({"replies": [
        {"tool_calls": [{"id": "j1", "name": "run_command", "arguments": {"command": "sleep 30", "background": true}}]},
        {"text": "Started."},
    ]});
    let out = exec(
        &dir,
        &script,
        &["--db", db, "--permissions", "yolo", "--json", "review this"],
        "diff --git a b\n",
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    // The session's transcript has the prompt with the piped text.
    let lines: Vec<Value> = stdout
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    let session = lines.last().unwrap()["sessionId"]
        .as_str()
        .unwrap()
        .to_string();
    let out = crate::support::spindle_command(&dir.join("home"))
        .args(["sessions", "export", &session, "--db", db])
        .current_dir(&dir)
        .output()
        .unwrap();
    let exported = text(&out.stdout);
    assert!(
        exported.contains(r"review this\n\n<stdin>\ndiff --git a b\n</stdin>"),
        "{exported}"
    );
    // The job is a sh command line (cmd has no sleep).
    if cfg!(windows) {
        return;
    }
    let out = exec(&dir, &script, &["--permissions", "yolo", "review this"], "");
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("Stopping 1 background job still running as exec ends"),
        "{stderr}"
    );
    assert!(stderr.contains("`sleep 30`"), "{stderr}");
}

/// A pipe that stays open and silent (a parent that never writes nor
/// closes it) is not waited for: exec answers from the prompt alone.
#[test]
fn a_silent_open_pipe_is_not_waited_for() {
    let dir = temp_dir("exec-silent-pipe");
    let script = json!({"replies": [{"text": "Answered."}]});
    let script_path = dir.join("script.json");
    std::fs::write(&script_path, script.to_string()).unwrap();
    let mut child = crate::support::spindle_command(&dir.join("home"))
        .args(["exec", "--script"])
        .arg(&script_path)
        .arg("hello")
        .current_dir(&dir)
        .env_remove("RUST_LOG")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Held open, never written.
    let _stdin = child.stdin.take();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while child.try_wait().unwrap().is_none() {
        assert!(
            std::time::Instant::now() < deadline,
            "exec waited for the silent pipe"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), "Answered.\n");
}

//! `spindle exec`: one prompt through the real binary, without a terminal:
//! the answer on stdout, tool lines on stderr, `--json` updates, exit codes
//! 0, 1 and 3, a prompt from stdin, and permission requests rejected when
//! there is no terminal to ask on.

use crate::support::temp_dir;
use serde_json::{json, Value};
use std::io::Write;
use std::path::Path;
use std::process::{Command, Output, Stdio};

fn exec(dir: &Path, script: &Value, args: &[&str], stdin: &str) -> Output {
    let script_path = dir.join("script.json");
    std::fs::write(&script_path, script.to_string()).unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_spindle"))
        .arg("exec")
        .arg("--script")
        .arg(&script_path)
        .args(args)
        .current_dir(dir)
        .env("SPINDLE_HOME", dir.join("home"))
        .env_remove("RUST_LOG")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(stdin.as_bytes())
        .unwrap();
    child.wait_with_output().unwrap()
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
    let mut command = Command::new(env!("CARGO_BIN_EXE_spindle"));
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
        .env("SPINDLE_HOME", dir.join("home"))
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stderr = text(&out.stderr);
    assert!(stderr.contains("rejected (no terminal"), "{stderr}");
    assert!(!dir.join("b.txt").exists());
    // The rejection ends the turn (the default --on-reject stop).
    assert_eq!(out.status.code(), Some(0), "{stderr}");
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

//! `spindle chat`: a conversation through the real binary, without a
//! terminal (plain output): prompts line by line, slash commands
//! (`/undo`), `/exit`, and `--continue` showing the conversation first.

use crate::support::temp_dir;
use serde_json::json;
use std::io::Write;
use std::path::Path;
use std::process::{Command, Output, Stdio};

fn chat(dir: &Path, script: &serde_json::Value, args: &[&str], typed: &str) -> Output {
    let script_path = dir.join("script.json");
    std::fs::write(&script_path, script.to_string()).unwrap();
    let db = dir.join("sessions.db");
    let mut child = Command::new(env!("CARGO_BIN_EXE_spindle"))
        .arg("chat")
        .arg("--script")
        .arg(&script_path)
        .arg("--db")
        .arg(&db)
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
        .write_all(typed.as_bytes())
        .unwrap();
    child.wait_with_output().unwrap()
}

#[test]
fn a_chat_takes_prompts_and_commands_and_goes_on_later() {
    let dir = temp_dir("chat");
    let script = json!({"replies": [
        {"tool_calls": [{"id": "w1", "name": "write_file", "arguments": {"path": "made.txt", "content": "x\n"}}]},
        {"text": "Made it."},
    ]});
    let out = chat(
        &dir,
        &script,
        &["--permissions", "yolo"],
        "make a file\n\n/undo\n/exit\nnot sent\n",
    );
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    );
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(stdout.contains("Made it."), "{stdout}");
    assert!(stderr.contains("approval yolo · session sess_"), "{stderr}");
    assert!(stderr.contains("✓ Write made.txt"), "{stderr}");
    // /undo took the file back; nothing after /exit was sent.
    assert!(!dir.join("made.txt").exists(), "{stdout}\n{stderr}");
    assert!(!stdout.contains("not sent"), "{stdout}");

    // Later: the latest session of this folder, its conversation first.
    let nothing = json!({"replies": []});
    let out = chat(&dir, &nothing, &["--continue"], "");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let asked = stdout
        .find("› make a file")
        .expect("the user's prompt shown");
    let answered = stdout.find("Made it.").expect("the answer shown");
    assert!(asked < answered, "{stdout}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains(", continued"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

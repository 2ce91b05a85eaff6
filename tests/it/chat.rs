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
    let mut command = Command::new(env!("CARGO_BIN_EXE_spindle"));
    command
        .arg("chat")
        .arg("--script")
        .arg(&script_path)
        .arg("--db")
        .arg(&db)
        .args(args)
        .current_dir(dir)
        .env("SPINDLE_HOME", dir.join("home"))
        .env_remove("RUST_LOG");
    crate::support::agent::output_with_input(&mut command, typed.as_bytes())
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

/// On a terminal: the question shows the command, `y` runs it, and
/// Ctrl-C at the prompt warns once, then leaves.
#[cfg(unix)]
#[test]
fn a_chat_on_a_terminal_asks_with_the_command_and_leaves_on_ctrl_c_twice() {
    use std::io::Read;
    use std::sync::{Arc, Mutex};
    use std::time::{Duration, Instant};
    let dir = temp_dir("chat-tty");
    let script = json!({"replies": [
        {"tool_calls": [{"id": "c1", "name": "run_command", "arguments": {"command": "echo from-the-shell"}}]},
        {"text": "Ran it."},
    ]});
    let script_path = dir.join("script.json");
    std::fs::write(&script_path, script.to_string()).unwrap();
    let (mut master, slave) = crate::support::pty::open();
    let mut command = Command::new(env!("CARGO_BIN_EXE_spindle"));
    command
        .args(["chat", "--permissions", "ask", "--script"])
        .arg(&script_path)
        .current_dir(&dir)
        .env("SPINDLE_HOME", dir.join("home"))
        .env("TERM", "dumb")
        .env_remove("RUST_LOG")
        .stdin(Stdio::from(slave.try_clone().unwrap()))
        .stdout(Stdio::from(slave.try_clone().unwrap()))
        .stderr(Stdio::from(slave));
    // SAFETY: setsid and ioctl between fork and exec, nothing else: the
    // pty (its stdin by now) becomes the controlling terminal.
    unsafe {
        use std::os::unix::process::CommandExt;
        command.pre_exec(|| {
            libc::setsid();
            if libc::ioctl(0, libc::TIOCSCTTY as _, 0) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let mut child = command.spawn().unwrap();
    drop(command);
    let screen = Arc::new(Mutex::new(String::new()));
    {
        let sink = screen.clone();
        let mut reader = master.try_clone().unwrap();
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok(n @ 1..) = reader.read(&mut buf) {
                sink.lock()
                    .unwrap()
                    .push_str(&String::from_utf8_lossy(&buf[..n]));
            }
        });
    }
    let mut seen = 0;
    let mut expect = |text: &str| {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let shown = screen.lock().unwrap().clone();
            if let Some(at) = shown[seen..].find(text) {
                seen += at + text.len();
                return;
            }
            assert!(
                Instant::now() < deadline,
                "{text:?} never showed:\n{}",
                &shown[seen..]
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    };
    expect("› ");
    master.write_all(b"run the echo\r").unwrap();
    expect("$ echo from-the-shell");
    expect("Allow Run echo from-the-shell? [y]es, [a]lways, [N]o: ");
    master.write_all(b"y\r").unwrap();
    expect("from-the-shell");
    expect("Ran it.");
    expect("› ");
    master.write_all(b"\x03").unwrap();
    expect("Ctrl-C again");
    master.write_all(b"\x03").unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        assert!(
            Instant::now() < deadline,
            "chat did not leave:\n{}",
            screen.lock().unwrap()
        );
        std::thread::sleep(Duration::from_millis(10));
    };
    assert_eq!(status.code(), Some(0));
}

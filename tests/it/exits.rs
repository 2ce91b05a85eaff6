//! How the commands end: a reader of stdout that went away
//! (`spindle sessions list | head -1`) is a quiet success, and `exec` and
//! `chat` stopped by a signal leave nothing of theirs behind.

#[cfg(unix)]
use crate::support::{spindle_command, temp_dir};
#[cfg(unix)]
use serde_json::json;
#[cfg(unix)]
use std::path::Path;
#[cfg(unix)]
use std::process::{Command, Output, Stdio};

/// Runs `command` with a stdout whose reading end is closed before it
/// starts: every write to it fails (EPIPE), whenever it happens.
#[cfg(unix)]
fn with_stdout_closed(command: &mut Command, input: &[u8]) -> Output {
    use std::io::Write;
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    let mut child = command
        .stdin(Stdio::piped())
        .stdout(writer)
        .stderr(Stdio::piped())
        .env_remove("RUST_LOG")
        .spawn()
        .unwrap();
    // The child may have ended already (a closed stdin is fine then).
    let _ = child.stdin.take().unwrap().write_all(input);
    child.wait_with_output().unwrap()
}

#[cfg(unix)]
fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// A stored session in `db`, made by a scripted `exec`.
#[cfg(unix)]
fn a_session(dir: &Path, db: &Path) {
    let script = dir.join("script.json");
    std::fs::write(
        &script,
        json!({"replies": [{"text": "Stored."}]}).to_string(),
    )
    .unwrap();
    let out = spindle_command(&dir.join("home"))
        .args(["exec", "--script", script.to_str().unwrap()])
        .args(["--db", db.to_str().unwrap(), "remember this"])
        .current_dir(dir)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
}

/// Every command that prints, its stdout closed: no panic ("failed
/// printing to stdout"), nothing on stderr, and the exit code it has
/// with a reader (0; the doctor's own verdict for `doctor`).
#[cfg(unix)]
#[test]
fn a_closed_stdout_ends_printing_commands_quietly() {
    let dir = temp_dir("closed-stdout");
    let home = dir.join("home");
    let db = dir.join("sessions.db");
    a_session(&dir, &db);
    let db = db.to_str().unwrap();
    let commands: Vec<Vec<&str>> = vec![
        vec!["--help"],
        vec!["help", "exec"],
        vec!["--version"],
        vec!["completions", "bash"],
        vec!["sessions", "list", "--db", db],
        vec!["sessions", "show", "sess_", "--db", db],
        vec!["sessions", "export", "sess_", "--db", db],
        vec!["mcp", "list"],
        vec!["doctor"],
    ];
    for args in commands {
        let reading = spindle_command(&home)
            .args(&args)
            .current_dir(&dir)
            .env_remove("RUST_LOG")
            .stdin(Stdio::null())
            .output()
            .unwrap();
        assert!(!reading.stdout.is_empty(), "{args:?} prints nothing");
        let out = with_stdout_closed(spindle_command(&home).args(&args).current_dir(&dir), b"");
        let stderr = text(&out.stderr);
        assert_eq!(
            out.status.code(),
            reading.status.code(),
            "{args:?}: {stderr}"
        );
        assert_eq!(stderr, "", "{args:?}");
    }
}

/// `exec --quiet` and `chat` stream the answer to a closed stdout: the
/// turn ends as usual, exit 0, no panic.
#[cfg(unix)]
#[test]
fn a_closed_stdout_ends_exec_and_chat_quietly() {
    let dir = temp_dir("closed-stdout-exec");
    let home = dir.join("home");
    let script = dir.join("script.json");
    let reply = json!({"replies": [{"text": "An answer nobody reads.\nOn two lines."}]});
    std::fs::write(&script, reply.to_string()).unwrap();
    let script = script.to_str().unwrap();

    let out = with_stdout_closed(
        spindle_command(&home)
            .args(["exec", "--quiet", "--script", script, "hi"])
            .current_dir(&dir),
        b"",
    );
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert_eq!(stderr, "");

    let out = with_stdout_closed(
        spindle_command(&home)
            .args(["exec", "--json", "--script", script, "hi"])
            .current_dir(&dir),
        b"",
    );
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");

    let out = with_stdout_closed(
        spindle_command(&home)
            .args(["chat", "--script", script])
            .current_dir(&dir),
        b"hi\n/exit\n",
    );
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(!stderr.contains("Broken pipe"), "{stderr}");
}

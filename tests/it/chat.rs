//! `spindle chat`: a conversation through the real binary, without a
//! terminal (plain output): prompts line by line, slash commands
//! (`/undo`), `/exit`, and `--continue` showing the conversation first.

use crate::support::temp_dir;
use serde_json::json;
use std::path::Path;
use std::process::Output;

fn chat(dir: &Path, script: &serde_json::Value, args: &[&str], typed: &str) -> Output {
    let script_path = dir.join("script.json");
    std::fs::write(&script_path, script.to_string()).unwrap();
    let db = dir.join("sessions.db");
    let mut command = crate::support::spindle_command(&dir.join("home"));
    command
        .arg("chat")
        .arg("--script")
        .arg(&script_path)
        .arg("--db")
        .arg(&db)
        .args(args)
        .current_dir(dir)
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

/// `spindle chat` on a pseudo-terminal that is its controlling terminal
/// (Ctrl-C there is SIGINT to it), the scripted provider answering.
#[cfg(unix)]
fn chat_on_a_terminal(
    dir: &Path,
    script: &serde_json::Value,
    args: &[&str],
    term: &str,
) -> crate::support::pty::Pty {
    let script_path = dir.join("script.json");
    std::fs::write(&script_path, script.to_string()).unwrap();
    let mut command = crate::support::spindle_command(&dir.join("home"));
    command
        .arg("chat")
        .args(args)
        .arg("--script")
        .arg(&script_path)
        .current_dir(dir)
        .env("TERM", term)
        .env_remove("NO_COLOR")
        .env_remove("RUST_LOG");
    crate::support::pty::Pty::spawn_controlling(command)
}

/// On a terminal without the line editor (TERM=dumb, as in Emacs'
/// shell): the question shows the command and every scope the editor
/// gets (the project one saves a rule), an edit's question shows its
/// diff, and Ctrl-C at the prompt warns once, then leaves.
#[cfg(unix)]
#[test]
fn a_chat_on_a_terminal_asks_with_the_command_and_leaves_on_ctrl_c_twice() {
    let dir = temp_dir("chat-tty");
    let script = json!({"replies": [
        {"tool_calls": [{"id": "c1", "name": "run_command", "arguments": {"command": "echo from-the-shell"}}]},
        {"tool_calls": [{"id": "w1", "name": "write_file", "arguments": {"path": "notes.txt", "content": "first line\n"}}]},
        {"text": "Ran it."},
    ]});
    let mut pty = chat_on_a_terminal(&dir, &script, &["--permissions", "ask"], "dumb");
    pty.expect("› ");
    pty.send("run the echo");
    pty.expect("$ echo from-the-shell");
    pty.expect("1. Allow");
    pty.expect("4. Always allow `echo from-the-shell …` in this project (saved in ");
    pty.expect("5. Reject");
    pty.expect("Allow Run echo from-the-shell? [y]es, [a]lways, [N]o or 1-6: ");
    pty.send("4");
    pty.expect("│ from-the-shell");
    pty.expect("/notes.txt");
    pty.expect("+ first line");
    pty.expect("4. Always allow every edit in this project");
    pty.expect("Allow Write notes.txt? [y]es, [a]lways, [N]o or 1-");
    pty.send("y");
    pty.expect("Ran it.");
    pty.expect("› ");
    pty.type_bytes(b"\x03");
    pty.expect("Ctrl-C again");
    pty.type_bytes(b"\x03");
    let (code, screen) = pty.wait();
    assert_eq!(code, Some(0), "{screen}");
    assert_eq!(
        std::fs::read_to_string(dir.join("notes.txt")).unwrap(),
        "first line\n"
    );
    let config = std::fs::read_to_string(dir.join("home/config.json")).unwrap();
    assert!(config.contains("echo from-the-shell"), "{config}");
    // No line editor under TERM=dumb: nothing switched bracketed paste on.
    assert!(!screen.contains("\x1b[?2004h"), "{screen:?}");
}

/// With the line editor: Ctrl-C cancels a running turn, a paste is one
/// prompt with its newline, Tab completes `/un` to `/undo`, which undoes,
/// Up brings back earlier prompts (kept in a private file), Ctrl-C clears
/// a typed line and Ctrl-D on an empty one leaves.
#[cfg(unix)]
#[test]
fn a_chat_edits_lines_with_history_and_completion_and_cancels_a_turn() {
    let dir = temp_dir("chat-editor");
    let script = json!({"replies": [
        {"chunks": [{"text": "Working on it"}, {"sleep_ms": 60000}]},
        {"tool_calls": [{"id": "w1", "name": "write_file", "arguments": {"path": "made.txt", "content": "x\n"}}]},
        {"text": "Made it."},
    ]});
    let mut pty = chat_on_a_terminal(&dir, &script, &["--permissions", "yolo"], "xterm");
    pty.expect("\x1b[?2004h");
    pty.expect("› ");
    pty.send("take long");
    pty.expect("Working on it");
    pty.type_bytes(b"\x03");
    pty.expect("(cancelled)");
    pty.expect("› ");
    // A paste: its newline does not send it; Enter does.
    pty.type_bytes(b"\x1b[200~make\r\na file\x1b[201~");
    pty.expect("make⏎a file");
    pty.type_bytes(b"\r");
    pty.expect("Made it.");
    assert!(dir.join("made.txt").exists(), "{}", pty.screen());
    pty.expect("› ");
    pty.type_bytes(b"/un\t");
    pty.expect("/undo ");
    pty.type_bytes(b"\r");
    pty.expect("› ");
    let deadline = std::time::Instant::now() + crate::support::prelude::WAIT;
    while dir.join("made.txt").exists() && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    assert!(!dir.join("made.txt").exists(), "{}", pty.screen());
    // Up twice: the pasted prompt again, drawn on the prompt's row.
    pty.type_bytes(b"\x1b[A\x1b[A");
    pty.expect("\r› make⏎a file");
    // Ctrl-C clears the line and does not leave; Ctrl-D then does.
    pty.type_bytes(b"\x03");
    pty.expect("\r› \x1b[K");
    pty.type_bytes(b"\x04");
    let (code, screen) = pty.wait();
    assert_eq!(code, Some(0), "{screen}");
    assert!(screen.ends_with("\x1b[?2004l"), "{screen:?}");
    let history = std::fs::read_to_string(dir.join("home/chat_history")).unwrap();
    assert_eq!(
        history.lines().collect::<Vec<_>>(),
        ["\"take long\"", "\"make\\na file\"", "\"/undo \""]
    );
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(dir.join("home/chat_history"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o077, 0, "{mode:o}");
    }
}

#[test]
fn a_mistyped_command_is_said_not_sent_to_the_model() {
    let dir = temp_dir("chat-unknown");
    let script = json!({"replies": [{"text": "First reply."}, {"text": "Second reply."}]});
    let out = chat(
        &dir,
        &script,
        &[],
        "/help\n/nosuch thing\n//nosuch as text\n/exit\n",
    );
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    );
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains("Unknown command /nosuch: /help lists the commands"),
        "{stderr}"
    );
    // The first scripted reply went to the line sent with `//`: had the
    // mistyped line been sent, it would have taken it.
    assert!(stdout.contains("First reply."), "{stdout}\n{stderr}");
    assert!(!stdout.contains("Second reply."), "{stdout}\n{stderr}");
}

/// A warning during a chat (here: the history file is a folder) never
/// reaches the screen; with a log file it is written there.
#[cfg(unix)]
#[test]
fn a_chat_keeps_log_lines_off_the_screen() {
    let dir = temp_dir("chat-log");
    std::fs::create_dir_all(dir.join("home/chat_history")).unwrap();
    let script = json!({"replies": [{"text": "Hello."}]});
    let mut pty = chat_on_a_terminal(&dir, &script, &[], "xterm");
    pty.expect("› ");
    pty.send("hi");
    pty.expect("Hello.");
    pty.expect("› ");
    pty.type_bytes(b"\x04");
    let (code, screen) = pty.wait();
    assert_eq!(code, Some(0), "{screen}");
    assert!(!screen.contains("[WARN"), "{screen}");
    assert!(!screen.contains("not a regular file"), "{screen}");

    let log = dir.join("chat.log");
    let log_arg = log.to_str().unwrap().to_string();
    let mut pty = chat_on_a_terminal(&dir, &script, &["--log-file", &log_arg], "xterm");
    pty.expect("› ");
    pty.type_bytes(b"\x04");
    let (code, screen) = pty.wait();
    assert_eq!(code, Some(0), "{screen}");
    assert!(!screen.contains("[WARN"), "{screen}");
    let logged = std::fs::read_to_string(&log).unwrap();
    assert!(logged.contains("is not a regular file"), "{logged}");
}

/// A turn that writes text before its tool calls, sets the same plan
/// twice and runs a command: the screen of it on a terminal.
#[cfg(unix)]
fn a_turn_with_a_plan_and_a_command(name: &str) -> String {
    let dir = temp_dir(name);
    let todos = json!([{"content": "look around", "status": "in_progress"}, {"content": "fix it", "status": "pending"}]);
    let script = json!({"replies": [
        {"text": "Let me plan this first.", "tool_calls": [{"id": "t1", "name": "todo_write", "arguments": {"todos": todos}}]},
        {"text": "Same plan.", "tool_calls": [{"id": "t2", "name": "todo_write", "arguments": {"todos": todos}}]},
        {"text": "Now run.", "tool_calls": [{"id": "c1", "name": "run_command", "arguments": {"command": "echo from-the-shell"}}]},
        {"text": "Done."},
    ]});
    let mut pty = chat_on_a_terminal(&dir, &script, &["--permissions", "yolo"], "xterm");
    pty.expect("› ");
    pty.send("go");
    pty.expect("Done.");
    pty.expect("› ");
    pty.type_bytes(b"\x04");
    let (code, screen) = pty.wait();
    assert_eq!(code, Some(0), "{screen}");
    screen
}

/// A plan, a tool's line or a notice after text that did not end a line
/// starts a line of its own.
#[cfg(unix)]
#[test]
fn a_chat_starts_each_block_on_its_own_line() {
    let screen = a_turn_with_a_plan_and_a_command("chat-lines");
    for text in ["Let me plan this first.", "Same plan.", "Now run."] {
        assert!(
            screen.contains(&format!("{text}\r\n")),
            "{text}: {screen:?}"
        );
    }
}

/// A command's output shows without the Markdown fence the model gets
/// it in.
#[cfg(unix)]
#[test]
fn a_chat_shows_command_output_without_its_fence() {
    let screen = a_turn_with_a_plan_and_a_command("chat-fence");
    assert!(screen.contains("│ from-the-shell"), "{screen}");
    assert!(!screen.contains("```"), "{screen}");
}

/// The plan shows once: not also as its tool's line, and not again when
/// it did not change.
#[cfg(unix)]
#[test]
fn a_chat_shows_a_plan_once() {
    let screen = a_turn_with_a_plan_and_a_command("chat-plan");
    assert_eq!(screen.matches("Plan:").count(), 1, "{screen}");
    assert!(screen.contains("▸ look around"), "{screen}");
    assert!(!screen.contains("Update plan"), "{screen}");
}

/// Ctrl-C at an approval question answers at once: the turn is
/// cancelled, said, and the prompt is back; Ctrl-D there does the same.
/// The command asked about never runs, and no log line shows.
#[cfg(unix)]
#[test]
fn ctrl_c_or_ctrl_d_at_a_question_cancels_the_turn_at_once() {
    let dir = temp_dir("chat-ask-cancel");
    let script = json!({"replies": [
        {"text": "Running it.", "tool_calls": [{"id": "c1", "name": "run_command", "arguments": {"command": "touch first.txt"}}]},
        {"tool_calls": [{"id": "c2", "name": "run_command", "arguments": {"command": "touch second.txt"}}]},
        {"text": "Still here."},
    ]});
    let log = dir.join("chat.log");
    let log_arg = log.to_str().unwrap().to_string();
    let args = ["--permissions", "ask", "--log-file", &log_arg];
    let mut pty = chat_on_a_terminal(&dir, &script, &args, "xterm");
    pty.expect("› ");
    pty.send("make the first");
    pty.expect("[N]o or 1-");
    pty.type_bytes(b"\x03");
    pty.expect("(cancelled)");
    pty.expect("› ");
    pty.send("make the second");
    pty.expect("[N]o or 1-");
    pty.type_bytes(b"\x04");
    pty.expect("(cancelled)");
    pty.expect("› ");
    pty.send("still there?");
    pty.expect("Still here.");
    pty.expect("› ");
    pty.type_bytes(b"\x04");
    let (code, screen) = pty.wait();
    assert_eq!(code, Some(0), "{screen}");
    assert!(!dir.join("first.txt").exists(), "{screen}");
    assert!(!dir.join("second.txt").exists(), "{screen}");
    assert!(!screen.contains("[WARN"), "{screen}");
    // Answered as a cancel is: nothing the agent did not expect.
    let logged = std::fs::read_to_string(&log).unwrap();
    assert!(!logged.contains("WARN"), "{logged}");
}

/// The mode shows: said when it changes, named in the prompt marker, and
/// in the header of a session continued in it.
#[cfg(unix)]
#[test]
fn a_chat_shows_the_mode_it_is_in() {
    let dir = temp_dir("chat-mode");
    let script = json!({"replies": [{"text": "Looked."}]});
    let db = dir.join("sessions.db");
    let db = db.to_str().unwrap();
    let mut pty = chat_on_a_terminal(&dir, &script, &["--db", db], "xterm");
    pty.expect("› ");
    pty.send("/mode plan");
    pty.expect("Mode: plan");
    pty.expect("plan › ");
    pty.send("look around");
    pty.expect("Looked.");
    pty.expect("plan › ");
    pty.type_bytes(b"\x04");
    let (code, screen) = pty.wait();
    assert_eq!(code, Some(0), "{screen}");

    let mut pty = chat_on_a_terminal(&dir, &script, &["--db", db, "--continue"], "xterm");
    pty.expect("· mode plan · session");
    pty.expect("plan › ");
    pty.type_bytes(b"\x04");
    let (code, screen) = pty.wait();
    assert_eq!(code, Some(0), "{screen}");
}

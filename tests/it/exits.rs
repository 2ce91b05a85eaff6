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

/// A scripted `exec` or `chat` running with its own temp folder (TMPDIR),
/// stdin kept open, its stdout read line by line.
#[cfg(unix)]
struct Running {
    child: std::process::Child,
    lines: crossbeam_channel::Receiver<String>,
    stderr: std::sync::Arc<std::sync::Mutex<String>>,
    stderr_reader: std::thread::JoinHandle<()>,
    tmp: std::path::PathBuf,
}

#[cfg(unix)]
impl Running {
    fn start(name: &str, args: &[&str], reply: serde_json::Value) -> Running {
        use std::io::BufRead;
        let dir = temp_dir(name);
        let tmp = dir.join("tmp");
        std::fs::create_dir_all(&tmp).unwrap();
        let script = dir.join("script.json");
        std::fs::write(&script, json!({"replies": [reply]}).to_string()).unwrap();
        let mut child = spindle_command(&dir.join("home"))
            .args(args)
            .args(["--script", script.to_str().unwrap()])
            .current_dir(&dir)
            .env("TMPDIR", &tmp)
            .env_remove("RUST_LOG")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let (sender, lines) = crossbeam_channel::unbounded();
        let stdout = child.stdout.take().unwrap();
        std::thread::spawn(move || {
            for line in std::io::BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if sender.send(line).is_err() {
                    break;
                }
            }
        });
        let stderr = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
        let stderr_reader = {
            let stderr = stderr.clone();
            let mut from = child.stderr.take().unwrap();
            std::thread::spawn(move || {
                let mut buffer = [0u8; 4096];
                while let Ok(count @ 1..) = std::io::Read::read(&mut from, &mut buffer) {
                    stderr
                        .lock()
                        .unwrap()
                        .push_str(&String::from_utf8_lossy(&buffer[..count]));
                }
            })
        };
        Running {
            child,
            lines,
            stderr,
            stderr_reader,
            tmp,
        }
    }

    fn type_line(&mut self, line: &str) {
        use std::io::Write;
        let stdin = self.child.stdin.as_mut().unwrap();
        stdin.write_all(format!("{line}\n").as_bytes()).unwrap();
    }

    /// Waits (generously: a hang is what fails) for a stdout line with
    /// `text`.
    fn expect(&self, text: &str) {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        loop {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) if line.contains(text) => return,
                Ok(_) => {}
                Err(_) => panic!("{text:?} never came on stdout"),
            }
        }
    }

    /// The scripted run's private folders (`spindle-scripted-…`) in its
    /// temp folder.
    fn scripted_folders(&self) -> Vec<String> {
        std::fs::read_dir(&self.tmp)
            .unwrap()
            .filter_map(|entry| entry.ok())
            .map(|entry| entry.file_name().to_string_lossy().into_owned())
            .filter(|name| name.starts_with("spindle-scripted-"))
            .collect()
    }

    fn signal(&self, signal: libc::c_int) {
        // SAFETY: kill(2) on the child's pid, which it still holds (not
        // waited for yet).
        unsafe { libc::kill(self.child.id() as i32, signal) };
    }

    /// Waits (generously) until stderr shows `text`.
    fn expect_stderr(&self, text: &str) {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        while !self.stderr.lock().unwrap().contains(text) {
            assert!(
                std::time::Instant::now() < deadline,
                "{text:?} never came on stderr"
            );
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
    }

    /// Waits for the end: the exit status, stderr, and the private
    /// folders left behind.
    fn end(mut self) -> (std::process::ExitStatus, String, Vec<String>) {
        // Open until the end: the end of input is not what ends it.
        let stdin = self.child.stdin.take();
        let status = self.child.wait().unwrap();
        drop(stdin);
        let left = self.scripted_folders();
        self.stderr_reader.join().unwrap();
        let stderr = self.stderr.lock().unwrap().clone();
        (status, stderr, left)
    }
}

/// A turn that answers a first line, then waits a minute.
#[cfg(unix)]
fn a_long_turn() -> serde_json::Value {
    json!({"chunks": [{"text": "Started.\n"}, {"sleep_ms": 60000}]})
}

/// SIGTERM during `exec`'s turn: the turn is cancelled, the agent ends
/// in order (its temporary folder removed), and exec dies of SIGTERM, as
/// a shell expects; SIGINT still ends with 130 and "cancelled".
#[cfg(unix)]
#[test]
fn exec_stopped_by_a_signal_cleans_up_and_passes_it_on() {
    use std::os::unix::process::ExitStatusExt;
    for (signal, name) in [(libc::SIGTERM, "SIGTERM"), (libc::SIGHUP, "SIGHUP")] {
        let run = Running::start("exec-sigterm", &["exec", "go"], a_long_turn());
        run.expect("Started.");
        assert_eq!(run.scripted_folders().len(), 1, "the run's temp folder");
        run.signal(signal);
        let (status, stderr, left) = run.end();
        assert_eq!(status.signal(), Some(signal), "{stderr}");
        assert!(
            stderr.contains(&format!("spindle: ended by {name}")),
            "{stderr}"
        );
        assert!(left.is_empty(), "left behind: {left:?}");
    }

    let run = Running::start("exec-sigint", &["exec", "go"], a_long_turn());
    run.expect("Started.");
    assert_eq!(run.scripted_folders().len(), 1, "the run's temp folder");
    run.signal(libc::SIGINT);
    let (status, stderr, left) = run.end();
    assert_eq!(status.code(), Some(130), "{stderr}");
    assert!(stderr.contains("spindle: cancelled"), "{stderr}");
    assert!(left.is_empty(), "left behind: {left:?}");
}

/// SIGTERM to `chat`, while it waits for a line and during a turn: the
/// chat ends in order (the temporary folder removed) and dies of SIGTERM;
/// Ctrl-C twice at the prompt leaves with 0, also in order.
#[cfg(unix)]
#[test]
fn chat_stopped_by_a_signal_cleans_up_and_passes_it_on() {
    use std::os::unix::process::ExitStatusExt;
    let answered = json!({"text": "Answered."});
    for (reply, waiting) in [(answered, "Answered."), (a_long_turn(), "Started.")] {
        let mut run = Running::start("chat-sigterm", &["chat"], reply);
        run.type_line("hi");
        run.expect(waiting);
        assert_eq!(run.scripted_folders().len(), 1, "the run's temp folder");
        run.signal(libc::SIGTERM);
        let (status, stderr, left) = run.end();
        assert_eq!(status.signal(), Some(libc::SIGTERM), "{stderr}");
        assert!(stderr.contains("spindle: ended by SIGTERM"), "{stderr}");
        assert!(left.is_empty(), "left behind: {left:?}");
    }

    let mut run = Running::start("chat-sigint", &["chat"], json!({"text": "Answered."}));
    run.type_line("hi");
    run.expect("Answered.");
    run.signal(libc::SIGINT);
    // The second one once the first was seen (two pending at once would
    // be one).
    run.expect_stderr("Ctrl-C again");
    run.signal(libc::SIGINT);
    let (status, stderr, left) = run.end();
    assert_eq!(status.code(), Some(0), "{stderr}");
    assert!(left.is_empty(), "left behind: {left:?}");
}

/// SIGTERM to `chat` at its line editor (raw mode on a terminal): the
/// read of the keys is interrupted, the chat ends in order (its temporary
/// folder removed, the terminal's settings back) and dies of SIGTERM.
#[cfg(unix)]
#[test]
fn chat_at_its_line_editor_ends_in_order_on_sigterm() {
    let dir = temp_dir("chat-tty-sigterm");
    let tmp = dir.join("tmp");
    std::fs::create_dir_all(&tmp).unwrap();
    let script = dir.join("script.json");
    std::fs::write(&script, json!({"replies": []}).to_string()).unwrap();
    let mut command = spindle_command(&dir.join("home"));
    command
        .args(["chat", "--script", script.to_str().unwrap()])
        .current_dir(&dir)
        .env("TMPDIR", &tmp)
        .env("TERM", "xterm")
        .env_remove("RUST_LOG");
    let mut pty = crate::support::pty::Pty::spawn_controlling(command);
    pty.expect("Type a prompt");
    pty.expect("› ");
    let scripted = || {
        std::fs::read_dir(&tmp)
            .unwrap()
            .filter_map(|entry| entry.ok())
            .filter(|entry| {
                entry
                    .file_name()
                    .to_string_lossy()
                    .starts_with("spindle-scripted-")
            })
            .count()
    };
    assert_eq!(scripted(), 1, "the run's temp folder");
    // SAFETY: kill(2) on the child's pid, which it still holds.
    unsafe { libc::kill(pty.child.id() as i32, libc::SIGTERM) };
    let (code, screen) = pty.wait();
    assert_eq!(code, None, "not a death by the signal: {screen}");
    assert!(screen.contains("spindle: ended by SIGTERM"), "{screen}");
    assert_eq!(scripted(), 0, "left behind: {screen}");
}

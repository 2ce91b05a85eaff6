//! A newcomer's first day on the command line: a chat with no model set
//! up offers the setup there, errors say what is missing in plain words.

use crate::support::temp_dir;
use std::path::Path;
use std::process::{Command, Output, Stdio};

/// The binary with a private home whose config and database are under
/// `home/sp` (no provider set up unless the test writes one).
fn spindle(home: &Path) -> Command {
    let mut command = crate::support::spindle_command(home);
    command.env("SPINDLE_HOME", home.join("sp"));
    command
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Runs `spindle ARGS` with stdin closed and the outputs piped.
fn piped(home: &Path, cwd: &Path, args: &[&str]) -> Output {
    spindle(home)
        .args(args)
        .current_dir(cwd)
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

/// No: the chat ends with one line naming `spindle setup`.
#[cfg(unix)]
#[test]
fn declining_the_setup_ends_with_a_pointer_to_it() {
    let dir = temp_dir("first-day-no");
    let home = dir.join("home");
    let mut command = spindle(&home);
    command.arg("chat").current_dir(&dir).env("TERM", "dumb");
    let mut pty = crate::support::pty::Pty::spawn(command);
    pty.expect("Set up a model provider now (spindle setup)? [Y/n] ");
    pty.send("n");
    pty.expect("run `spindle setup` to choose a provider and a model, then `spindle chat`");
    let (code, screen) = pty.wait();
    assert_eq!(code, Some(1), "{screen}");
    assert!(!screen.contains("authenticate again"), "{screen}");
    assert!(!home.join("sp").join("config.json").exists());
}

/// Not on a terminal: a chat without a model says the one line that
/// names `spindle setup`, asking nothing.
#[test]
fn off_a_terminal_nothing_is_asked() {
    let dir = temp_dir("first-day-piped");
    let home = dir.join("home");
    let chat = piped(&home, &dir, &["chat"]);
    assert_eq!(chat.status.code(), Some(1));
    let said = text(&chat.stderr);
    assert!(said.contains("Run `spindle setup`"), "{said}");
    assert!(!said.contains("authenticate again"), "{said}");
    assert!(!said.contains("[Y/n]"), "{said}");
}

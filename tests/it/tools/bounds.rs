//! File tools on hostile files: a named pipe is refused at once (it used
//! to block the turn until someone wrote to it), a file too large to hold
//! is read as a window of lines, and an edit of one is refused with advice.

use super::{call, calls, say, script, Space, WAIT};
use crate::support::client::no_requests;
use crate::support::run_prompt;
use serde_json::json;
use std::fs;
use std::io::Write;

#[test]
#[cfg_attr(windows, ignore = "FIFOs and devices are Unix files")]
fn pipes_large_files_and_large_edits() {
    let space = Space::new("bounds");
    let fifo = space.path("pipe");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .expect("mkfifo runs");
    assert!(made.success());
    spindle::os::testing::symlink(&fifo, space.path("pipe-link.txt")).unwrap();
    // A text file over the whole-read cap (8 MiB): 200,000 lines.
    {
        let mut file = fs::File::create(space.path("big.log")).unwrap();
        for n in 1..=200_000 {
            writeln!(file, "entry {n:06} {}", "x".repeat(40)).unwrap();
        }
    }
    let (mut agent, session) = space.start(
        &script(vec![
            calls(vec![
                call("p1", "read_file", json!({"path": "pipe"})),
                call(
                    "b1",
                    "read_file",
                    json!({"path": "big.log", "start_line": 150000, "line_count": 2}),
                ),
                call(
                    "e1",
                    "edit_file",
                    json!({"path": "big.log", "edits": [{"old": "entry 000001", "new": "first"}]}),
                ),
                call("s1", "search", json!({"pattern": "entry 199999"})),
            ]),
            say("Done."),
        ]),
        &["--permissions", "yolo"],
        json!({}),
    );
    let turn = run_prompt(&mut agent, &session, "go", WAIT, no_requests);
    assert_eq!(turn.stop_reason(), "end_turn", "{}", turn.dump());
    assert_eq!(turn.final_status("p1"), "failed");
    assert!(
        turn.final_text("p1").contains("not a regular file"),
        "{}",
        turn.final_text("p1")
    );
    let window = turn.final_text("b1");
    assert!(window.contains("150000\tentry 150000"), "{window}");
    assert!(window.contains("150001\tentry 150001"), "{window}");
    assert!(!window.contains("entry 150002"), "{window}");
    assert!(window.contains("start_line=150002"), "{window}");
    // A search walks past the pipe (and a link to it) instead of blocking.
    assert_eq!(turn.final_status("s1"), "completed", "{}", turn.dump());
    assert_eq!(turn.final_status("e1"), "failed");
    assert!(
        turn.final_text("e1").contains("with a command"),
        "{}",
        turn.final_text("e1")
    );
}

/// The limits can be set in the config file: a lower edit limit refuses
/// an edit the default would allow.
#[test]
fn file_limits_come_from_the_config() {
    let space = Space::new("bounds-config");
    space.write("notes.txt", "x".repeat(2000) + "\nend\n");
    let config = space.base.join("config.json");
    fs::write(
        &config,
        json!({"limits": {"edit_file_bytes": 1000, "read_whole_bytes": 1000}}).to_string(),
    )
    .unwrap();
    let (mut agent, session) = space.start(
        &script(vec![
            calls(vec![
                call(
                    "e1",
                    "edit_file",
                    json!({"path": "notes.txt", "edits": [{"old": "end", "new": "fin"}]}),
                ),
                call(
                    "r1",
                    "read_file",
                    json!({"path": "notes.txt", "start_line": 2}),
                ),
            ]),
            say("Done."),
        ]),
        &[
            "--permissions",
            "yolo",
            "--config",
            config.to_str().unwrap(),
        ],
        json!({}),
    );
    let turn = run_prompt(&mut agent, &session, "go", WAIT, no_requests);
    assert_eq!(turn.stop_reason(), "end_turn", "{}", turn.dump());
    assert_eq!(turn.final_status("e1"), "failed", "{}", turn.dump());
    assert!(
        turn.final_text("e1").contains("1000 bytes"),
        "{}",
        turn.final_text("e1")
    );
    // Streamed from disk: the window still shows the line asked for.
    assert!(
        turn.final_text("r1").contains("2\tend"),
        "{}",
        turn.final_text("r1")
    );
    assert_eq!(space.read("notes.txt").lines().last(), Some("end"));
}

/// The command output kept for the model comes from the config too.
#[test]
#[cfg_attr(windows, ignore = "sh command lines")]
fn command_output_limit_comes_from_the_config() {
    let space = Space::new("bounds-output");
    let config = space.base.join("config.json");
    fs::write(
        &config,
        json!({"limits": {"command_output_bytes": 1000}}).to_string(),
    )
    .unwrap();
    let (mut agent, session) = space.start(
        &script(vec![
            calls(vec![call(
                "c1",
                "run_command",
                json!({"command": "yes abc | head -c 5000"}),
            )]),
            say("Done."),
        ]),
        &[
            "--permissions",
            "yolo",
            "--config",
            config.to_str().unwrap(),
        ],
        json!({}),
    );
    let turn = run_prompt(&mut agent, &session, "go", WAIT, no_requests);
    assert_eq!(turn.stop_reason(), "end_turn", "{}", turn.dump());
    let text = turn.final_text("c1");
    assert!(text.contains("bytes of output omitted"), "{text}");
    assert!(text.len() < 1600, "{} bytes: {text}", text.len());
}

//! run_command through the real binary (`--permissions yolo`): exit
//! codes, stdout and stderr, the `cwd` argument, the output cap with its
//! full log, the timeout, and background jobs dying with the command.

use super::{assert_group_gone, call, calls, read_pid, say, script, Space, WAIT};
use crate::support::client::no_requests;
use crate::support::run_prompt;
use serde_json::json;
use std::fs;
use std::time::{Duration, Instant};

#[test]
#[cfg_attr(windows, ignore = "sh command lines")]
fn run_command_reports_exit_code_output_cap_and_timeout() {
    let space = Space::new("tools-run");
    fs::create_dir_all(space.path("sub")).unwrap();
    // A process of its own: the job dies with the agent's process, the
    // guard included.
    let (mut agent, session) = space.start_process(
        &script(vec![
            calls(vec![
                call(
                    "c1",
                    "run_command",
                    json!({"command": "echo out; echo err >&2; exit 3"}),
                ),
                call("c2", "run_command", json!({"command": "pwd", "cwd": "sub"})),
                call(
                    "c3",
                    "run_command",
                    json!({"command": "head -c 100000 /dev/zero | tr '\\0' a"}),
                ),
                call(
                    "c4",
                    "run_command",
                    json!({"command": "echo $$ > c4.pid; sleep 30", "timeout_seconds": 1}),
                ),
                // Background jobs die with the command, whether or not they
                // keep its output pipe open.
                call(
                    "c5",
                    "run_command",
                    json!({"command": "sleep 60 >/dev/null 2>&1 & echo $! > c5.pid; echo started"}),
                ),
                call(
                    "c6",
                    "run_command",
                    json!({"command": "sleep 60 & echo $! > c6.pid; echo lingering"}),
                ),
            ]),
            say("Ran."),
        ]),
        &["--permissions", "yolo"],
        json!({}),
    );
    let started = Instant::now();
    let turn = run_prompt(&mut agent, &session, "run", WAIT, no_requests);
    assert_eq!(turn.stop_reason(), "end_turn", "{}", turn.dump());
    turn.assert_every_tool_call_finished();

    let announce = turn.tool_call("c1");
    assert_eq!(announce["title"], "Run echo out; echo err >&2; exit 3");
    assert_eq!(announce["kind"], "execute");
    assert_eq!(
        announce["rawInput"],
        json!({"command": "echo out; echo err >&2; exit 3"})
    );
    assert_eq!(turn.final_status("c1"), "failed");
    let text = turn.final_text("c1");
    assert!(text.contains("Exit code: 3"), "{text}");
    assert!(text.contains("out") && text.contains("err"), "{text}");

    assert_eq!(turn.final_status("c2"), "completed");
    let text = turn.final_text("c2");
    assert!(text.contains("Exit code: 0"), "{text}");
    assert!(text.contains(&space.abs("sub")), "{text}");

    assert_eq!(turn.final_status("c3"), "completed");
    let text = turn.final_text("c3");
    assert!(
        text.len() < 40_000,
        "output not capped: {} bytes",
        text.len()
    );
    let marker = "bytes of output omitted; full output in ";
    let at = text
        .find(marker)
        .unwrap_or_else(|| panic!("no truncation marker: {}", &text[..text.len().min(500)]));
    let rest = &text[at + marker.len()..];
    let log = &rest[..rest.find(']').expect("the marker ends with ]")];
    let full = fs::read(log).unwrap_or_else(|err| panic!("cannot read the log {log}: {err}"));
    assert_eq!(full.len(), 100_000, "{log}");
    assert!(full.iter().all(|&b| b == b'a'));

    // Past its timeout a command is not killed: it goes on as a job the
    // session owns (and dies with it).
    assert_eq!(turn.final_status("c4"), "completed");
    let text = turn.final_text("c4");
    assert!(text.contains("Still running after 1 s"), "{text}");
    assert!(text.contains("as job job_"), "{text}");
    let c4 = read_pid(&space.path("c4.pid")).expect("c4.pid");
    assert!(
        fs::metadata(format!("/proc/{c4}")).is_ok(),
        "the job still runs after the turn"
    );

    for id in ["c5", "c6"] {
        assert_eq!(turn.final_status(id), "completed", "{id}\n{}", turn.dump());
        let pid = read_pid(&space.path(&format!("{id}.pid"))).expect("pid file");
        assert_group_gone(pid);
    }
    assert!(turn.final_text("c6").contains("lingering"));
    assert!(started.elapsed() < Duration::from_secs(15));
    // The agent's end ends the job, its whole group.
    agent.close_stdin();
    agent
        .wait_exit(WAIT)
        .expect("the agent exits at the end of input");
    assert_group_gone(c4);
}

#[test]
#[cfg_attr(windows, ignore = "sh command lines")]
fn a_command_that_signals_its_own_group_is_not_hard_killed() {
    // The guard takes SIGTERM as the agent's death only when the agent is
    // really gone.
    let space = Space::new("tools-kill-0");
    // A process of its own: the guard stands only between a spawned agent
    // and its commands.
    let (mut agent, session) = space.start_process(
        &script(vec![
            calls(vec![call(
                "c1",
                "run_command",
                json!({"command": "trap 'echo trapped' TERM; kill -TERM 0; echo after"}),
            )]),
            say("Done."),
        ]),
        &["--permissions", "yolo"],
        json!({}),
    );
    let turn = run_prompt(&mut agent, &session, "go", WAIT, no_requests);
    assert_eq!(turn.final_status("c1"), "completed", "{}", turn.dump());
    let text = turn.final_text("c1");
    assert!(text.contains("trapped") && text.contains("after"), "{text}");
}

#[test]
#[cfg_attr(windows, ignore = "sh command lines")]
fn commands_run_with_a_non_interactive_environment() {
    let space = Space::new("tools-pager");
    let (mut agent, session) = space.start(
        &script(vec![
            calls(vec![call(
                "c1",
                "run_command",
                json!({"command": "echo \"$PAGER $GIT_PAGER $GIT_EDITOR $GIT_TERMINAL_PROMPT\""}),
            )]),
            say("Done."),
        ]),
        &["--permissions", "yolo"],
        json!({}),
    );
    let turn = run_prompt(&mut agent, &session, "go", WAIT, no_requests);
    assert!(
        turn.final_text("c1").contains("cat cat true 0"),
        "{}",
        turn.dump()
    );
}

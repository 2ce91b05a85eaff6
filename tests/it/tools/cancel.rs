//! Cancellation and EOF in the middle of a tool: a cancel kills a local
//! command and ends every tool call, a cancel while a permission request
//! is pending answers promptly, and EOF during a long command or a pending
//! permission request (with or without `--drain`) still exits 0.
//!
//! A cancel is the agent's own doing, so those tests run it in process;
//! the rest are about what ends with the agent's process (EOF, signals,
//! SIGKILL, the guard) and give it a process of its own.

#[cfg(target_os = "linux")]
use super::group_of;
#[cfg(any(target_os = "linux", target_os = "macos"))]
use super::waits_until;
use super::{assert_group_gone, call, calls, read_pid, say, script, Space, WAIT};
use crate::support::client::no_requests;
use crate::support::{run_prompt, Answer, Exchange, Turn};
use serde_json::{json, Value};
use std::fs;
use std::time::{Duration, Instant};

// ---------------------------------------------------------------------------
// Cancel during a local command and during a permission request
// ---------------------------------------------------------------------------

#[test]
#[cfg_attr(windows, ignore = "sh command lines")]
fn cancel_during_a_local_command_kills_it_and_ends_every_tool_call() {
    let space = Space::new("tools-cancel-cmd");
    let (mut agent, session) = space.start(
        &script(vec![
            calls(vec![
                call(
                    "c0",
                    "todo_write",
                    json!({"todos": [{"content": "wait", "status": "in_progress"}]}),
                ),
                call(
                    "c1",
                    "run_command",
                    json!({"command": "echo $$ > pidfile; sleep 60"}),
                ),
                call("c2", "read_file", json!({"path": "pidfile"})),
            ]),
            say("Back."),
        ]),
        &["--permissions", "yolo"],
        json!({}),
    );
    let pidfile = space.path("pidfile");
    let mut answer = no_requests;
    let mut exchange = Exchange::prompt(&mut agent, &session, "go");
    let started = exchange.until(&mut agent, WAIT, &mut answer, &mut |_: &Exchange| {
        read_pid(&pidfile).is_some()
    });
    assert!(started, "the prompt ended before the command started");
    let pid = read_pid(&pidfile).unwrap();
    let cancelled_at = Instant::now();
    agent.notify("session/cancel", json!({"sessionId": session}));
    let turn = exchange.finish(&mut agent, WAIT, &mut answer);
    let elapsed = cancelled_at.elapsed();
    eprintln!("cancel answered after {elapsed:?}");
    assert_eq!(turn.stop_reason(), "cancelled", "{}", turn.dump());
    assert!(elapsed < Duration::from_secs(3), "cancel took {elapsed:?}");
    assert_group_gone(pid);
    turn.assert_every_tool_call_finished();
    assert_eq!(turn.final_status("c0"), "completed");
    assert_eq!(turn.final_status("c1"), "failed");
    assert!(!turn.tool_call_ids().contains(&"c2".to_string()));

    // The session still works.
    let turn = run_prompt(&mut agent, &session, "again", WAIT, no_requests);
    assert_eq!(turn.stop_reason(), "end_turn", "{}", turn.dump());
    assert_eq!(turn.text(), "Back.");
}

#[test]
fn cancel_while_a_permission_request_is_pending_answers_promptly() {
    let space = Space::new("tools-cancel-perm");
    let (mut agent, session) = space.start(
        &script(vec![
            calls(vec![call(
                "c1",
                "run_command",
                json!({"command": "touch never"}),
            )]),
            say("Back."),
        ]),
        &["--permissions", "ask"],
        json!({}),
    );
    // The user never clicks.
    let mut answer = |request: &Value| {
        assert_eq!(request["method"], "session/request_permission", "{request}");
        Answer::Ignore
    };
    let mut exchange = Exchange::prompt(&mut agent, &session, "go");
    let asked = exchange.until(&mut agent, WAIT, &mut answer, &mut |ex: &Exchange| {
        !ex.requests("session/request_permission").is_empty()
    });
    assert!(asked, "the prompt ended without asking");
    let permission_id = exchange.requests("session/request_permission")[0]["id"].clone();
    let cancelled_at = Instant::now();
    agent.notify("session/cancel", json!({"sessionId": session}));
    let turn = exchange.finish(&mut agent, WAIT, &mut answer);
    let elapsed = cancelled_at.elapsed();
    eprintln!("cancel answered after {elapsed:?}");
    assert_eq!(turn.stop_reason(), "cancelled", "{}", turn.dump());
    assert!(elapsed < Duration::from_secs(2), "cancel took {elapsed:?}");
    turn.assert_every_tool_call_finished();
    assert_eq!(turn.final_status("c1"), "failed");
    assert!(!space.exists("never"));

    // A late answer to the abandoned request changes nothing.
    agent.send(json!({
        "jsonrpc": "2.0",
        "id": permission_id,
        "result": {"outcome": {"outcome": "selected", "optionId": "allow_once"}},
    }));
    let turn = run_prompt(&mut agent, &session, "again", WAIT, no_requests);
    assert_eq!(turn.stop_reason(), "end_turn", "{}", turn.dump());
    assert_eq!(turn.text(), "Back.");
    assert!(!space.exists("never"));
}

// ---------------------------------------------------------------------------
// EOF during a long command or a permission request
// ---------------------------------------------------------------------------

#[test]
#[cfg_attr(windows, ignore = "sh command lines")]
fn eof_during_a_long_command_kills_it_and_exits_zero() {
    let space = Space::new("tools-eof");
    let (mut agent, exchange, pid) = with_a_long_command(
        &space,
        "echo $$ > pidfile; sleep 60",
        &["--permissions", "yolo"],
    );
    let closed_at = Instant::now();
    agent.close_stdin();
    let status = agent
        .wait_exit(Duration::from_secs(5))
        .expect("the agent did not exit after EOF");
    eprintln!("exited {:?} after stdin closed", closed_at.elapsed());
    assert!(status.success(), "{status:?}");
    assert!(closed_at.elapsed() < Duration::from_secs(3));
    assert_group_gone(pid);

    // What the agent wrote before exiting: the prompt's cancelled answer
    // and a final status for the command.
    let received = agent.received().to_vec();
    let answer = received
        .iter()
        .find(|m| m.get("id") == Some(&exchange.id) && m.get("method").is_none())
        .cloned()
        .expect("the running prompt was not answered");
    assert_eq!(answer["result"]["stopReason"], "cancelled");
    let turn = Turn {
        response: answer,
        messages: received
            .into_iter()
            .filter(|m| m["method"] == "session/update")
            .collect(),
    };
    turn.assert_every_tool_call_finished();
    assert_eq!(turn.final_status("c1"), "failed");
}

/// Closes stdin while a permission request waits for an answer that can
/// never come, and checks that the agent still exits 0 promptly, with the
/// prompt answered and the tool call ended.
fn eof_while_asking(extra: &[&str]) {
    let space = Space::new("tools-eof-ask");
    let mut args = vec!["--permissions", "ask"];
    args.extend_from_slice(extra);
    let (mut agent, session) = space.start_process(
        &script(vec![
            calls(vec![call(
                "c1",
                "run_command",
                json!({"command": "touch never"}),
            )]),
            say("Done."),
        ]),
        &args,
        json!({}),
    );
    let mut answer = |request: &Value| {
        assert_eq!(request["method"], "session/request_permission", "{request}");
        Answer::Ignore
    };
    let mut exchange = Exchange::prompt(&mut agent, &session, "go");
    let asked = exchange.until(&mut agent, WAIT, &mut answer, &mut |ex: &Exchange| {
        !ex.requests("session/request_permission").is_empty()
    });
    assert!(asked, "the prompt ended without asking");
    let closed_at = Instant::now();
    agent.close_stdin();
    let status = agent.wait_exit(Duration::from_secs(5));
    let status = status.unwrap_or_else(|| {
        panic!(
            "the agent did not exit within 5 s of EOF while a permission request was \
             pending (args {args:?}); it was killed"
        )
    });
    eprintln!("exited {:?} after stdin closed", closed_at.elapsed());
    assert!(status.success(), "{status:?}");
    let received = agent.received().to_vec();
    let answer = received
        .iter()
        .find(|m| m.get("id") == Some(&exchange.id) && m.get("method").is_none())
        .cloned()
        .expect("the running prompt was not answered");
    assert_eq!(answer["result"]["stopReason"], "cancelled", "{answer}");
    let turn = Turn {
        response: answer,
        messages: received
            .into_iter()
            .filter(|m| m["method"] == "session/update")
            .collect(),
    };
    turn.assert_every_tool_call_finished();
    assert_eq!(turn.final_status("c1"), "failed");
    assert!(!space.exists("never"));
}

#[test]
fn eof_while_a_permission_request_is_pending_exits_zero() {
    eof_while_asking(&[]);
}

#[test]
fn eof_with_drain_while_a_permission_request_is_pending_still_exits() {
    // Nobody can answer after EOF, so draining cannot wait for the answer.
    eof_while_asking(&["--drain"]);
}

/// SIGTERM (or SIGINT, SIGHUP) while a command runs: as at stdin EOF, the
/// command's group is killed, the prompt answered `cancelled`, and the
/// agent exits 0 — even with `--drain`, which only EOF honours.
#[test]
#[cfg_attr(windows, ignore = "sh command lines")]
fn a_termination_signal_during_a_long_command_ends_like_eof() {
    for signal in ["TERM", "INT", "HUP"] {
        let space = Space::new("tools-signal");
        let (mut agent, exchange, pid) = with_a_long_command(
            &space,
            "echo $$ > pidfile; sleep 60",
            &["--permissions", "yolo", "--drain"],
        );
        let sent = std::process::Command::new("kill")
            .arg(format!("-{signal}"))
            .arg(agent.pid().to_string())
            .status()
            .unwrap();
        assert!(sent.success());
        let status = agent
            .wait_exit(Duration::from_secs(5))
            .unwrap_or_else(|| panic!("the agent did not exit after SIG{signal}"));
        assert!(status.success(), "SIG{signal}: {status:?}");
        assert_group_gone(pid);
        let answered = agent
            .received()
            .iter()
            .find(|m| m.get("id") == Some(&exchange.id) && m.get("method").is_none())
            .cloned()
            .unwrap_or_else(|| panic!("SIG{signal}: the running prompt was not answered"));
        assert_eq!(answered["result"]["stopReason"], "cancelled", "SIG{signal}");
    }
}

/// An agent killed with SIGKILL cannot clean up: the kernel still kills
/// the command it was running (Linux's parent-death signal).
#[cfg(target_os = "linux")]
#[test]
fn a_command_does_not_outlive_an_agent_killed_with_sigkill() {
    let space = Space::new("tools-sigkill");
    let (mut agent, _exchange, pid) = with_a_long_command(
        &space,
        "echo $$ > pidfile; exec sleep 60",
        &["--permissions", "yolo"],
    );
    agent.kill();
    assert_group_gone(pid);
    // A shell that forks: its child is out of reach of the kernel's
    // parent-death signal, but not of the guard's group kill.
    let space = Space::new("tools-sigkill-fork");
    let (mut agent, _exchange, pid) = with_a_long_command(
        &space,
        "sleep 60 & echo $! > child; echo $$ > pidfile; wait",
        &["--permissions", "yolo"],
    );
    let child = read_pid(&space.path("child")).expect("the child's pid");
    assert_eq!(group_of(child), group_of(pid));
    agent.kill();
    assert_group_gone(pid);
    assert!(
        waits_until(Duration::from_secs(2), || group_of(child).is_none()
            || fs::read_to_string(format!("/proc/{child}/stat"))
                .is_ok_and(|s| s.contains(") Z "))),
        "the forked child outlived the agent"
    );
}

/// A process that left the command's group (`setsid`), even one whose
/// parent ended at once (a detached daemon), is still the guard's while
/// the command runs: it dies with an agent killed with SIGKILL.
#[cfg(target_os = "linux")]
#[test]
fn a_process_that_left_the_group_dies_with_an_agent_killed_with_sigkill() {
    let gone = |pid: u32| {
        waits_until(Duration::from_secs(3), || {
            fs::read_to_string(format!("/proc/{pid}/stat")).map_or(true, |s| s.contains(") Z "))
        })
    };
    // Detached: its parent (a subshell) ends at once.
    let space = Space::new("tools-sigkill-setsid");
    let (mut agent, _exchange, pid) = with_a_long_command(
        &space,
        "(setsid sleep 61 & echo $! > escaped); echo $$ > pidfile; exec sleep 60",
        &["--permissions", "yolo"],
    );
    let escaped = waits_until(WAIT, || read_pid(&space.path("escaped")).is_some())
        .then(|| read_pid(&space.path("escaped")).unwrap())
        .expect("the detached process's pid");
    assert!(
        waits_until(WAIT, || group_of(escaped) != group_of(pid)),
        "setsid did not leave the group"
    );
    agent.kill();
    assert_group_gone(pid);
    assert!(gone(escaped), "the detached process outlived the agent");
}

/// A process that left the command's group (`setsid`) ends at a cancel
/// too: the agent asks the guard to take down everything below it before
/// it kills the group (which alone would end the guard first).
#[cfg(target_os = "linux")]
#[test]
fn a_process_that_left_the_group_ends_at_a_cancel() {
    let space = Space::new("tools-cancel-setsid");
    let (mut agent, session) = space.start_process(
        &script(vec![calls(vec![call(
            "c1",
            "run_command",
            json!({"command": "setsid sh -c 'echo $$ > escaped; exec sleep 61' & \
                               echo $$ > pidfile; exec sleep 60"}),
        )])]),
        &["--permissions", "yolo"],
        json!({}),
    );
    let escaped = space.path("escaped");
    let mut answer = no_requests;
    let mut exchange = Exchange::prompt(&mut agent, &session, "go");
    let started = exchange.until(&mut agent, WAIT, &mut answer, &mut |_: &Exchange| {
        read_pid(&escaped).is_some() && read_pid(&space.path("pidfile")).is_some()
    });
    assert!(started, "the prompt ended before the command started");
    let (pid, escaped) = (
        read_pid(&space.path("pidfile")).unwrap(),
        read_pid(&escaped).unwrap(),
    );
    assert_ne!(
        group_of(escaped),
        group_of(pid),
        "setsid did not leave the group"
    );
    agent.notify("session/cancel", json!({"sessionId": session}));
    let turn = exchange.finish(&mut agent, WAIT, &mut answer);
    assert_eq!(turn.stop_reason(), "cancelled", "{}", turn.dump());
    assert_group_gone(pid);
    let ended = waits_until(Duration::from_secs(10), || {
        fs::read_to_string(format!("/proc/{escaped}/stat")).map_or(true, |s| s.contains(") Z "))
    });
    if !ended {
        // SAFETY: kill(2) of this test's own leftover process.
        unsafe { libc::kill(escaped as libc::pid_t, libc::SIGKILL) };
    }
    assert!(ended, "the process that left the group outlived the cancel");
}

/// A detached chain of processes in which none lives long (each starts its
/// successor and ends, as fast as it can) is still caught whole when the
/// agent dies: the guard stops what it finds until nothing runs, then
/// kills it all.
#[cfg(target_os = "linux")]
#[test]
fn a_detached_chain_of_short_lived_processes_dies_with_the_agent() {
    let space = Space::new("tools-sigkill-hopper");
    fs::write(
        space.path("hop.sh"),
        "echo $$ >> \"$1\"\nsh \"$0\" \"$1\" &\n",
    )
    .unwrap();
    let hops = space.path("hops");
    let count = || fs::read_to_string(&hops).map_or(0, |text| text.lines().count());
    let (mut agent, _exchange, pid) = with_a_long_command(
        &space,
        "setsid sh hop.sh hops & echo $$ > pidfile; exec sleep 60",
        &["--permissions", "yolo"],
    );
    assert!(
        waits_until(WAIT, || count() > 50),
        "the chain did not start"
    );
    agent.kill();
    assert_group_gone(pid);
    // Once the sweep is over, the chain grows no more.
    let settled = waits_until(WAIT, || {
        let before = count();
        // Settled means no new hop within a while: there is no event for
        // a chain that has stopped.
        std::thread::sleep(Duration::from_millis(500));
        count() == before
    });
    assert!(settled, "the chain outlived the agent ({} hops)", count());
}

/// macOS has no parent-death signal nor subreaper: the guard watches the
/// agent's exit and takes the job down from the top, so a grandchild in
/// the group and a process that left it (its parent still running) die
/// with an agent killed with SIGKILL.
#[cfg(target_os = "macos")]
#[test]
fn a_command_s_whole_tree_dies_with_an_agent_killed_with_sigkill_on_macos() {
    let perl = std::process::Command::new("perl")
        .args(["-e", "use POSIX;"])
        .output()
        .is_ok_and(|output| output.status.success());
    if !perl {
        eprintln!("a_command_s_whole_tree_dies_on_macos: skipped, no perl to call setsid");
        return;
    }
    let alive = |pid: u32| {
        // SAFETY: kill(2) with signal 0 sends nothing, it only checks.
        unsafe { libc::kill(pid as libc::pid_t, 0) == 0 }
    };
    let space = Space::new("tools-sigkill-macos");
    let (mut agent, _exchange, pid) = with_a_long_command(
        &space,
        "(sleep 61 & echo $! > grandchild; wait) & \
         perl -e 'use POSIX; POSIX::setsid(); open(F, \">escaped\"); print F \"$$\\n\"; \
         close F; sleep 62' & \
         echo $$ > pidfile; wait",
        &["--permissions", "yolo"],
    );
    let pid_in = |name: &str| {
        let path = space.path(name);
        assert!(
            waits_until(WAIT, || read_pid(&path).is_some()),
            "no pid in {name}"
        );
        read_pid(&path).unwrap()
    };
    let grandchild = pid_in("grandchild");
    let escaped = pid_in("escaped");
    assert!(alive(grandchild) && alive(escaped));
    agent.kill();
    for (name, pid) in [
        ("shell", pid),
        ("grandchild", grandchild),
        ("process that left the group", escaped),
    ] {
        assert!(
            waits_until(Duration::from_secs(3), || !alive(pid)),
            "the {name} ({pid}) outlived the agent"
        );
    }
}

/// Starts an agent whose prompt runs `command` (which writes its shell's
/// pid to `pidfile`) and returns once the command runs: the agent, the
/// exchange of the prompt, and the pid.
fn with_a_long_command(
    space: &Space,
    command: &str,
    args: &[&str],
) -> (crate::support::Agent, Exchange, u32) {
    let (mut agent, session) = space.start_process(
        &script(vec![calls(vec![call(
            "c1",
            "run_command",
            json!({ "command": command }),
        )])]),
        args,
        json!({}),
    );
    let pidfile = space.path("pidfile");
    let mut answer = no_requests;
    let mut exchange = Exchange::prompt(&mut agent, &session, "go");
    let started = exchange.until(&mut agent, WAIT, &mut answer, &mut |_: &Exchange| {
        read_pid(&pidfile).is_some()
    });
    assert!(started, "the prompt ended before the command started");
    let pid = read_pid(&pidfile).unwrap();
    (agent, exchange, pid)
}

/// An editor that stopped reading stdout (the agent's writes block) and
/// then sends SIGTERM: the agent does not wait for it for ever; it ends
/// within its grace, and a second signal ends it at once.
// Windows has no SIGTERM; its console events are not sent to a pipe child.
#[cfg(unix)]
#[test]
fn a_termination_signal_ends_the_agent_even_when_the_editor_stopped_reading() {
    use std::io::Write;
    use std::process::Stdio;
    for signals in [1, 2] {
        let space = Space::new("tools-signal-stuck");
        let script_path = space.path("script.json");
        fs::write(
            &script_path,
            json!({ "replies": [{"text": "a"}] }).to_string(),
        )
        .unwrap();
        let home = space.path("home");
        let mut command = crate::support::spindle_command(&home);
        command
            .args(["acp", "--script", script_path.to_str().unwrap()])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        let mut child = command.spawn().unwrap();
        // stdout is never read.
        let _stdout = child.stdout.take();
        let mut stdin = child.stdin.take().unwrap();
        let cwd = space.abs("");
        for line in [
            json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": 1}}),
            json!({"jsonrpc": "2.0", "id": 1, "method": "session/new", "params": {"cwd": cwd, "mcpServers": []}}),
        ] {
            writeln!(stdin, "{line}").unwrap();
        }
        // Answers nobody reads fill the pipe, and then the agent's writes
        // block.
        for id in 2..2000 {
            let line = json!({"jsonrpc": "2.0", "id": id, "method": "session/list", "params": {}});
            if writeln!(stdin, "{line}").is_err() {
                break;
            }
        }
        // Nothing outside the agent shows its writer blocked on the full
        // pipe; the answers above fill it well within this time.
        std::thread::sleep(Duration::from_millis(500));
        for _ in 0..signals {
            unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
        }
        let deadline = Instant::now() + Duration::from_secs(30);
        let mut exited = false;
        while !exited && Instant::now() < deadline {
            exited = child.try_wait().unwrap().is_some();
            std::thread::sleep(Duration::from_millis(20));
        }
        if !exited {
            let _ = child.kill();
        }
        let _ = child.wait();
        assert!(
            exited,
            "the agent did not exit after SIGTERM ({signals} sent)"
        );
        drop(stdin);
    }
}

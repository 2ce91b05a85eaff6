//! The agent harness, with a shell script standing in for the agent, and
//! the small helpers.

use std::time::{Duration, Instant};

use serde_json::json;

use super::schema::message_chunk;
use crate::support::{temp_dir, updates_text, write_file, Agent};

/// An `Agent` whose "agent" is `sh -c script`.
#[cfg(unix)]
fn scripted_agent(script: &str, env: &[(&str, &str)]) -> Agent {
    Agent::spawn_program(std::path::Path::new("/bin/sh"), &["-c", script], env)
}

#[cfg(unix)]
const INITIALIZED: &str = r#"{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":1}}"#;

#[cfg(unix)]
#[test]
fn runs_a_conversation_and_captures_stderr() {
    let script = format!(
        "read line; echo 'starting' >&2; printf '%s\\n' '{INITIALIZED}'; \
         read line; printf '%s\\n' '{}'; read line; printf '%s\\n' '{}'; \
         cat >/dev/null; exit 0",
        r#"{"jsonrpc":"2.0","id":2,"result":{"sessionId":"s"}}"#,
        r#"{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"hi"}}}}"#
    );
    let mut agent = scripted_agent(&script, &[]);
    assert_eq!(agent.initialize()["protocolVersion"], 1);
    assert_eq!(agent.new_session(&std::env::temp_dir()), "s");
    agent.notify("session/cancel", json!({"sessionId": "s"}));
    let update = agent.recv(Duration::from_secs(5)).expect("an update");
    assert_eq!(updates_text(&[update], "agent_message_chunk"), "hi");
    assert!(agent.recv(Duration::from_millis(100)).is_none());
    agent.close_stdin();
    let status = agent.wait_exit(Duration::from_secs(5));
    assert!(status.is_some_and(|status| status.success()), "{status:?}");
    assert_eq!(agent.received().len(), 3);
    assert!(agent.stderr().contains("starting"), "{}", agent.stderr());
}

/// The in-process tier: `serve` on a thread, its lines checked like a
/// process's, its end of input its exit.
#[test]
fn serves_in_process_until_the_input_ends() {
    let mut agent = crate::support::in_process::agent();
    assert_eq!(agent.initialize()["protocolVersion"], 1);
    assert_eq!(agent.received().len(), 1);
    assert!(agent.home().join("config.json").is_file());
    agent.close_stdin();
    let status = agent.wait_exit(Duration::from_secs(10));
    assert!(status.is_some_and(|status| status.success()), "{status:?}");
    // Its log is the test process's: reading "its" stderr is refused, so
    // that no test finds nothing there and passes.
    let read = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| agent.stderr()));
    assert!(
        read.is_err(),
        "an in-process agent's stderr read as {read:?}"
    );
}

#[cfg(unix)]
#[test]
fn isolates_the_environment() {
    let script = r#"read line; printf '{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":1,"_meta":{"home":"%s","log":"%s","extra":"%s"}}}\n' "$SPINDLE_HOME" "${RUST_LOG-unset}" "$EXTRA"; cat >/dev/null"#;
    let mut agent = scripted_agent(script, &[("EXTRA", "yes")]);
    let result = agent.initialize();
    assert_eq!(result["_meta"]["home"], agent.home().to_str().unwrap());
    assert_eq!(result["_meta"]["log"], "unset");
    assert_eq!(result["_meta"]["extra"], "yes");

    let mut agent = scripted_agent(script, &[("RUST_LOG", "debug")]);
    assert_eq!(agent.initialize()["_meta"]["log"], "debug");
}

#[cfg(unix)]
#[test]
fn rejects_stdout_that_is_not_json() {
    let message = super::panic_of(|| {
        let mut agent = scripted_agent("echo 'Starting spindle...'; cat >/dev/null", &[]);
        agent.recv(Duration::from_secs(5));
    });
    assert!(message.contains("the line is not JSON"), "{message}");
}

#[cfg(unix)]
#[test]
fn validates_responses_against_their_method() {
    let message = super::panic_of(|| {
        let mut agent = scripted_agent(
            r#"read line; printf '%s\n' '{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":"1"}}'; cat >/dev/null"#,
            &[],
        );
        agent.initialize();
    });
    assert!(message.contains("$defs/InitializeResponse"), "{message}");
}

#[cfg(unix)]
#[test]
fn rejects_a_second_response() {
    let message = super::panic_of(|| {
        let script = format!(
            "read line; printf '%s\\n%s\\n' '{INITIALIZED}' '{INITIALIZED}'; cat >/dev/null"
        );
        let mut agent = scripted_agent(&script, &[]);
        agent.initialize();
        agent.recv(Duration::from_secs(5));
    });
    assert!(
        message.contains("a second response to request 1"),
        "{message}"
    );
}

#[cfg(unix)]
#[test]
fn reports_a_missing_response() {
    let message = super::panic_of(|| {
        let mut agent = scripted_agent("cat >/dev/null", &[]);
        let id = agent.request("initialize", json!({"protocolVersion": 1}));
        agent.response(&id, Duration::from_millis(200));
    });
    assert!(
        message.contains("no response to request 1 (initialize)"),
        "{message}"
    );
}

#[cfg(unix)]
#[test]
fn fails_on_an_unread_invalid_line() {
    let message = super::panic_of(|| {
        let written = temp_dir("unread-invalid").join("written");
        let script = format!(
            "read line; printf '%s\\n%s\\n' '{INITIALIZED}' 'oops'; : > '{}'; cat >/dev/null",
            written.display()
        );
        let mut agent = scripted_agent(&script, &[]);
        agent.initialize();
        // The second line is in the pipe once the script goes on to mark it
        // written, before the harness kills the child.
        let deadline = Instant::now() + Duration::from_secs(5);
        while !written.exists() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
        drop(agent);
    });
    assert!(message.contains("not read by the test"), "{message}");
}

#[cfg(unix)]
#[test]
fn kills_an_agent_that_does_not_exit() {
    let mut agent = scripted_agent("trap '' TERM; while true; do sleep 1; done", &[]);
    agent.close_stdin();
    let started = Instant::now();
    assert!(agent.wait_exit(Duration::from_millis(200)).is_none());
    assert!(started.elapsed() < Duration::from_secs(5));
}

#[test]
fn temp_dirs_are_fresh_and_files_land_in_them() {
    let first = temp_dir("selftest");
    let second = temp_dir("selftest");
    assert_ne!(first, second);
    assert!(first.is_dir() && second.is_dir());
    assert_eq!(std::fs::read_dir(&first).unwrap().count(), 0);
    let path = write_file(&first, "nested/dir/file.txt", "contents");
    assert_eq!(path, first.join("nested/dir/file.txt"));
    assert_eq!(std::fs::read_to_string(&path).unwrap(), "contents");
    std::fs::remove_dir_all(&first).unwrap();
    std::fs::remove_dir_all(&second).unwrap();
}

#[test]
fn updates_text_joins_chunks_of_one_kind() {
    let mut thought = message_chunk("hmm");
    thought["params"]["update"]["sessionUpdate"] = json!("agent_thought_chunk");
    let messages = vec![
        message_chunk("Hel"),
        thought,
        json!({"jsonrpc": "2.0", "id": 2, "result": {"stopReason": "end_turn"}}),
        message_chunk("lo"),
    ];
    assert_eq!(updates_text(&messages, "agent_message_chunk"), "Hello");
    assert_eq!(updates_text(&messages, "agent_thought_chunk"), "hmm");
    assert_eq!(updates_text(&messages, "user_message_chunk"), "");
}

/// A script that answers `initialize` and one `session/new` (session
/// `s`), then writes `update` for that session.
#[cfg(unix)]
fn one_update_after_new(update: serde_json::Value) -> String {
    let update = json!({"jsonrpc": "2.0", "method": "session/update",
                        "params": {"sessionId": "s", "update": update}});
    format!(
        "read line; printf '%s\\n' '{INITIALIZED}'; read line; \
         printf '%s\\n%s\\n' '{}' '{update}'; cat >/dev/null",
        r#"{"jsonrpc":"2.0","id":2,"result":{"sessionId":"s"}}"#
    )
}

/// Starts `script`, initializes with `capabilities`, opens a session and
/// reads the update that follows.
#[cfg(unix)]
fn receive_one_update(script: &str, capabilities: serde_json::Value) {
    let mut agent = scripted_agent(script, &[]);
    agent.initialize_with(capabilities);
    assert_eq!(agent.new_session(&std::env::temp_dir()), "s");
    agent.recv(Duration::from_secs(5)).expect("the update");
}

/// `notice` and the compaction updates are stable now, so the schema lets
/// them through for any client: the harness itself fails one sent to a
/// client that did not advertise it, and accepts it for one that did.
#[cfg(unix)]
#[test]
fn fails_an_opt_in_update_the_client_did_not_ask_for() {
    let notice = one_update_after_new(
        json!({"sessionUpdate": "notice", "severity": "info", "title": "Hello"}),
    );
    let message = super::panic_of(|| receive_one_update(&notice, json!({})));
    assert!(
        message.contains("a `notice` update to a client that advertised neither"),
        "{message}"
    );
    // `null` and a non-object do not advertise it.
    let message = super::panic_of(|| {
        receive_one_update(
            &notice,
            json!({"session": {"notices": null, "compaction": {}}}),
        )
    });
    assert!(message.contains("`notice` update"), "{message}");
    receive_one_update(&notice, json!({"session": {"notices": {}}}));
    receive_one_update(&notice, json!({"_meta": {"spindle": {"notices": true}}}));

    let compaction = one_update_after_new(json!({"sessionUpdate": "compaction_update",
        "compactionId": "cmp_1", "status": "in_progress"}));
    let message =
        super::panic_of(|| receive_one_update(&compaction, json!({"session": {"notices": {}}})));
    assert!(
        message.contains("a `compaction_update` update to a client that did not advertise"),
        "{message}"
    );
    receive_one_update(&compaction, json!({"session": {"compaction": {}}}));
}

/// A `session/update` for a session before the answer that opens it fails
/// the test: Zed drops such an update (zed-industries/zed#60199). After
/// the answer it passes; a load's replay may come before its answer.
#[cfg(unix)]
#[test]
fn fails_an_update_before_its_session_is_answered() {
    let chunk = r#"{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"early"}}}}"#;
    let answer =
        |id: u8, result: &str| format!(r#"{{"jsonrpc":"2.0","id":{id},"result":{result}}}"#);
    for (method, params, result) in [
        (
            "session/new",
            json!({"cwd": "/", "mcpServers": []}),
            r#"{"sessionId":"s"}"#,
        ),
        (
            "session/resume",
            json!({"sessionId": "s", "cwd": "/"}),
            "{}",
        ),
        (
            "session/fork",
            json!({"sessionId": "p", "cwd": "/"}),
            r#"{"sessionId":"s"}"#,
        ),
    ] {
        let script = format!(
            "read line; printf '%s\\n' '{INITIALIZED}'; read line; \
             printf '%s\\n%s\\n' '{chunk}' '{}'; cat >/dev/null",
            answer(2, result)
        );
        let message = super::panic_of(|| {
            let mut agent = scripted_agent(&script, &[]);
            agent.initialize();
            let id = agent.request(method, params.clone());
            agent.response(&id, Duration::from_secs(5));
        });
        assert!(
            message.contains("a session/update for session \"s\" before the client learnt"),
            "{method}: {message}"
        );
        // The same update after the answer is fine.
        let script = format!(
            "read line; printf '%s\\n' '{INITIALIZED}'; read line; \
             printf '%s\\n%s\\n' '{}' '{chunk}'; cat >/dev/null",
            answer(2, result)
        );
        let mut agent = scripted_agent(&script, &[]);
        agent.initialize();
        let id = agent.request(method, params.clone());
        agent.response(&id, Duration::from_secs(5));
        agent.recv(Duration::from_secs(5)).expect("the update");
    }
    // A load's replay comes before its answer.
    let script = format!(
        "read line; printf '%s\\n' '{INITIALIZED}'; read line; \
         printf '%s\\n%s\\n' '{chunk}' '{}'; cat >/dev/null",
        answer(2, "{}")
    );
    let mut agent = scripted_agent(&script, &[]);
    agent.initialize();
    let id = agent.request(
        "session/load",
        json!({"sessionId": "s", "cwd": "/", "mcpServers": []}),
    );
    let (_, before) = agent.response(&id, Duration::from_secs(5));
    assert_eq!(before.len(), 1, "{before:?}");
    // An update for a session the client never heard of fails too.
    let script =
        format!("read line; printf '%s\\n%s\\n' '{INITIALIZED}' '{chunk}'; cat >/dev/null");
    let message = super::panic_of(|| {
        let mut agent = scripted_agent(&script, &[]);
        agent.initialize();
        agent.recv(Duration::from_secs(5));
    });
    assert!(message.contains("before the client learnt"), "{message}");
}

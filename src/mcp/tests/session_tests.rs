//! The session manager: background start-up, failures, restarts.

use super::fake_stdio::config;
use super::{eventually, first_text, process_gone, unique};
use crate::cancel::CancelToken;
use crate::mcp::*;
use serde_json::json;
use std::path::PathBuf;
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

fn bad_config(name: &str) -> ServerConfig {
    ServerConfig {
        name: name.into(),
        transport: TransportConfig::Stdio {
            command: "/nonexistent/spindle-mcp-server".into(),
            args: vec![],
            env: vec![],
        },
        env_remove: Vec::new(),
        message_cap: None,
        elicitation: Default::default(),
        tokens: None,
        trust: Default::default(),
    }
}

fn temp_path(prefix: &str) -> PathBuf {
    std::env::temp_dir().join(unique(prefix))
}

fn call(session: &McpSession, tool: &str) -> Result<CallResult, McpError> {
    session.call(tool, json!({}), &CancelToken::new())
}

#[test]
fn start_reports_each_failure_once() {
    let session = McpSession::start(
        vec![config("fake", &[]), bad_config("ghost")],
        Duration::from_secs(20),
    );
    assert_eq!(session.server_names(), ["fake", "ghost"]);
    let tools = session.tools();
    assert_eq!(tools.len(), 12);
    assert!(tools.iter().all(|tool| tool.server == "fake"));
    let failures = session.take_failures();
    assert_eq!(failures.len(), 1, "{failures:?}");
    assert_eq!(failures[0].0, "ghost");
    assert!(
        failures[0].1.message.contains("cannot start"),
        "{failures:?}"
    );
    assert!(session.take_failures().is_empty());

    let echo = session.find("fake__echo").expect("found");
    assert_eq!((echo.server.as_str(), echo.name.as_str()), ("fake", "echo"));
    assert!(session.find("ghost__echo").is_none());
    let result = session
        .call(
            "fake__echo",
            json!({"text": "through the session"}),
            &CancelToken::new(),
        )
        .unwrap();
    assert_eq!(first_text(&result), "through the session");
    assert!(call(&session, "fake__missing").is_err());
}

#[test]
fn a_slow_server_keeps_starting_in_the_background() {
    let pid_file = temp_path("slow-pid");
    let pid_text = pid_file.to_string_lossy().into_owned();
    let started = Instant::now();
    let session = McpSession::start(
        vec![config(
            "slow",
            &[("FAKE_DELAY_MS", "1500"), ("FAKE_PID_FILE", &pid_text)],
        )],
        Duration::from_millis(200),
    );
    let waited = started.elapsed();
    assert!(waited < Duration::from_secs(1), "start waited {waited:?}");
    assert!(session.tools().is_empty());
    assert!(
        eventually(Duration::from_secs(20), || !session.tools().is_empty()),
        "the slow server never came up"
    );
    assert_eq!(session.tools().len(), 12);
    assert!(session.take_failures().is_empty());
    let pid: u32 = std::fs::read_to_string(&pid_file).unwrap().parse().unwrap();
    session.shutdown();
    assert!(process_gone(pid));
    let _ = std::fs::remove_file(pid_file);
}

#[test]
fn shutdown_abandons_servers_still_starting() {
    let pid_file = temp_path("abandoned-pid");
    let pid_text = pid_file.to_string_lossy().into_owned();
    let session = McpSession::start(
        vec![config(
            "sleepy",
            &[("FAKE_DELAY_MS", "30000"), ("FAKE_PID_FILE", &pid_text)],
        )],
        Duration::from_millis(100),
    );
    assert!(eventually(Duration::from_secs(10), || pid_file.exists()));
    thread::sleep(Duration::from_millis(50));
    let pid: u32 = std::fs::read_to_string(&pid_file).unwrap().parse().unwrap();
    let started = Instant::now();
    drop(session);
    assert!(started.elapsed() < Duration::from_secs(2));
    assert!(
        eventually(Duration::from_secs(3), || process_gone(pid)),
        "the abandoned server survived"
    );
    let _ = std::fs::remove_file(pid_file);
}

#[test]
fn a_crash_is_survived_once_per_turn() {
    let marker = temp_path("crash-marker");
    let marker_text = marker.to_string_lossy().into_owned();
    let session = McpSession::start(
        vec![config("fake", &[("FAKE_MARKER", &marker_text)])],
        Duration::from_secs(20),
    );
    session.begin_turn();
    // The server crashes; it is restarted and the call retried.
    let result = call(&session, "fake__crash_once").unwrap();
    assert_eq!(first_text(&result), "recovered");
    assert!(session.take_failures().is_empty());
    assert_eq!(session.tools().len(), 12);

    // Another crash in the same turn is a failure: the tools go away.
    let error = call(&session, "fake__crash").unwrap_err();
    assert!(error.message.contains("closed its output"), "{error}");
    let failures = session.take_failures();
    assert_eq!(failures.len(), 1, "{failures:?}");
    assert_eq!(failures[0].0, "fake");
    assert!(
        failures[0]
            .1
            .message
            .contains("crashed again in the same turn")
            && failures[0].1.kind == crate::mcp::McpErrorKind::Closed,
        "{failures:?}"
    );
    assert!(session.tools().is_empty());
    assert!(call(&session, "fake__echo").is_err());
    assert!(session.take_failures().is_empty());
    let _ = std::fs::remove_file(marker);
}

#[test]
fn a_server_that_crashes_again_after_its_restart_is_withdrawn() {
    let session = McpSession::start(vec![config("fake", &[])], Duration::from_secs(20));
    session.begin_turn();
    assert_eq!(session.tools().len(), 12);
    let error = call(&session, "fake__crash").unwrap_err();
    assert!(error.message.contains("closed its output"), "{error}");
    let failures = session.take_failures();
    assert_eq!(failures.len(), 1, "{failures:?}");
    assert!(
        failures[0].1.message.contains("after a restart"),
        "{failures:?}"
    );
    assert_eq!(failures[0].1.kind, crate::mcp::McpErrorKind::Closed);
    assert!(session.tools().is_empty());
}

#[test]
fn a_new_turn_allows_a_new_restart() {
    let marker = temp_path("turn-marker");
    let marker_text = marker.to_string_lossy().into_owned();
    let session = McpSession::start(
        vec![config("fake", &[("FAKE_MARKER", &marker_text)])],
        Duration::from_secs(20),
    );
    session.begin_turn();
    assert_eq!(
        first_text(&call(&session, "fake__crash_once").unwrap()),
        "recovered"
    );
    session.begin_turn();
    // The server exits between calls; the next call brings it back.
    assert_eq!(first_text(&call(&session, "fake__quit").unwrap()), "bye");
    let result = session
        .call("fake__echo", json!({"text": "back"}), &CancelToken::new())
        .unwrap();
    assert_eq!(first_text(&result), "back");
    assert!(session.take_failures().is_empty());
    let _ = std::fs::remove_file(marker);
}

#[test]
fn names_stay_unique_across_servers() {
    let session = McpSession::start(
        vec![config("a.b", &[]), config("a_b", &[])],
        Duration::from_secs(20),
    );
    let tools = session.tools();
    assert_eq!(tools.len(), 24);
    let echoes: Vec<(&str, &str)> = tools
        .iter()
        .filter(|tool| tool.name == "echo")
        .map(|tool| (tool.server.as_str(), tool.exposed_name.as_str()))
        .collect();
    assert_eq!(echoes, [("a.b", "a_b__echo"), ("a_b", "a_b__echo_2")]);
    let names: std::collections::HashSet<&str> = tools
        .iter()
        .map(|tool| tool.exposed_name.as_str())
        .collect();
    assert_eq!(names.len(), 24);
    assert_eq!(session.find("a_b__echo_2").unwrap().server, "a_b");
    // The same lists give the same names.
    assert_eq!(session.tools(), tools);
}

#[test]
fn a_cancelled_call_returns_at_once_and_keeps_the_server() {
    let session: Arc<McpSession> =
        McpSession::start(vec![config("fake", &[])], Duration::from_secs(20));
    session.begin_turn();
    let cancel = CancelToken::new();
    {
        let cancel = cancel.clone();
        thread::spawn(move || {
            thread::sleep(Duration::from_millis(200));
            cancel.cancel();
        });
    }
    let started = Instant::now();
    let error = session
        .call("fake__slow", json!({"ms": 1500}), &cancel)
        .unwrap_err();
    let took = started.elapsed();
    assert!(took < Duration::from_secs(2), "cancel took {took:?}");
    assert!(error.message.contains("cancelled"), "{error}");
    assert!(session.take_failures().is_empty());
    // The server finishes its sleep, then answers the next call.
    let result = call(&session, "fake__structured").unwrap();
    assert_eq!(result.structured, Some(json!({"answer": 42})));
}

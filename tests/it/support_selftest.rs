//! Tests of the test support itself: the schema validator, the fake model
//! server (driven by a plain `std::net` client), the agent harness (with a
//! shell script standing in for the agent) and the small helpers. Only
//! `agent_harness_initialize` needs a working `spindle` binary.

mod fake_server;
mod harness;
mod schema;

use std::time::Duration;

use crate::support::Agent;

/// The message `f` panics with; fails the test when it does not panic.
/// The harness's checks are panics, so this is how their tests see them.
pub fn panic_of(f: impl FnOnce()) -> String {
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)) {
        Ok(()) => panic!("expected a panic, and none came"),
        Err(payload) => payload
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| payload.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_default(),
    }
}

// The harness against the real binary.
#[test]
fn agent_harness_initialize() {
    let mut agent = Agent::spawn(&["acp"], &[]);
    let result = agent.initialize();
    assert_eq!(result["protocolVersion"], 1, "{result}");
    agent.close_stdin();
    let status = agent.wait_exit(Duration::from_secs(5));
    assert!(
        status.is_some_and(|status| status.success()),
        "spindle should exit 0 on stdin EOF, got {status:?}\n{}",
        agent.stderr()
    );
}

/// A developer's shell, as the tests inherit it: a home with a Spindle
/// config naming a provider, `SPINDLE_HOME` and a provider key. Through
/// `isolate` (what `spindle_command` and `Agent::spawn` apply) the real
/// binary sees none of it: its config is the private home's, and no
/// provider is set up.
#[test]
fn an_isolated_start_sees_nothing_of_the_developers_home() {
    use crate::support::isolation::{assert_process_private, isolate, spindle_path};
    assert_process_private();
    let dir = crate::support::temp_dir("isolation");
    let developer = dir.join("developer");
    crate::support::write_file(
        &developer,
        ".config/spindle/config.json",
        r#"{"providers": {"mine": {"kind": "openai", "base_url": "http://127.0.0.1:9/v1"}}, "defaults": {"model": "mine/m"}}"#,
    );
    let home = dir.join("private");
    let program = spindle_path();
    let mut command = std::process::Command::new(&program);
    command
        .env("HOME", &developer)
        .env("SPINDLE_HOME", developer.join(".config/spindle"))
        .env("XDG_CONFIG_HOME", developer.join(".config"))
        .env("OPENAI_API_KEY", "sk-developers-own-key")
        .env("ANTHROPIC_API_KEY", "sk-developers-other-key");
    isolate(&mut command, &home);
    let out = command.arg("doctor").output().unwrap();
    let report = String::from_utf8_lossy(&out.stdout).replace('\\', "/");
    let private = home.to_string_lossy().replace('\\', "/");
    assert!(
        report.contains(&format!("no file at {private}")),
        "{report}"
    );
    assert!(report.contains("none is configured"), "{report}");
    assert!(!report.contains("developer"), "{report}");
}

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

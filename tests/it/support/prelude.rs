//! What most test modules start with: the deadline they wait under and
//! the request helpers that turn a round trip into a value or a panic.
//!
//! `use crate::support::prelude::*;` brings them in; a module that needs a
//! helper of its own builds it from these instead of copying them.

use std::time::Duration;

use serde_json::Value;

use super::agent::Agent;

/// How long a test waits for something the agent must do: an answer, an
/// update, an exit. Generous, since the machine may be busy; a passing test
/// never waits this long.
pub const WAIT: Duration = Duration::from_secs(30);

/// `WAIT` for turns that stream a flood of output up to the response cap
/// (`memory.rs`: megabytes through a debug build while its peak memory is
/// measured), which on a loaded machine can take a minute or more.
pub const SLOW_WAIT: Duration = Duration::from_secs(120);

/// Sends a request and waits (up to `WAIT`) for its answer: `Ok(result)` or
/// `Err(error)`, with every message received before it.
pub fn call(agent: &mut Agent, method: &str, params: Value) -> (Result<Value, Value>, Vec<Value>) {
    let id = agent.request(method, params);
    let (response, before) = agent.response(&id, WAIT);
    let outcome = match (response.get("result"), response.get("error")) {
        (Some(result), None) => Ok(result.clone()),
        (None, Some(error)) => Err(error.clone()),
        _ => panic!("a response with neither result nor error: {response}"),
    };
    (outcome, before)
}

/// The result of a request that must succeed.
pub fn ok(agent: &mut Agent, method: &str, params: Value) -> Value {
    ok_with(agent, method, params).0
}

/// The result of a request that must succeed, and every message received
/// before it.
pub fn ok_with(agent: &mut Agent, method: &str, params: Value) -> (Value, Vec<Value>) {
    match call(agent, method, params.clone()) {
        (Ok(result), before) => (result, before),
        (Err(error), _) => panic!("{method} {params} failed: {error}"),
    }
}

/// The error of a request that must fail.
pub fn err(agent: &mut Agent, method: &str, params: Value) -> Value {
    match call(agent, method, params.clone()).0 {
        Ok(result) => panic!("{method} {params} succeeded with {result}, expected an error"),
        Err(error) => error,
    }
}

/// Asserts that a JSON number is `expected` (costs: within 1e-9).
pub fn approx(actual: &Value, expected: f64) {
    let actual = actual
        .as_f64()
        .unwrap_or_else(|| panic!("not a number: {actual}"));
    assert!(
        (actual - expected).abs() < 1e-9,
        "expected {expected}, got {actual}"
    );
}

/// A config naming one model, `fake/alpha`, of the fake server `model`
/// (no key needed); with `trusted`, the user trusts the project at it.
pub fn one_model_config(model: &super::FakeServer, trusted: Option<&std::path::Path>) -> Value {
    let mut config = serde_json::json!({
        "providers": {"fake": {"kind": "openai", "base_url": model.base_url(),
                               "requires_key": false}},
        "models": {"fake/alpha": {"context_window": 64000}},
        "defaults": {"model": "fake/alpha"},
    });
    if let Some(ws) = trusted {
        config["permissions"] =
            serde_json::json!({"projects": {ws.display().to_string(): {"trusted": true}}});
    }
    config
}

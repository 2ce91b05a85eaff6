//! Requests a helper thread answers, through the real binary: a
//! `resource` window read off the dispatcher is answered once its pass is
//! done; cancelled first (`$/cancel_request`), it is answered -32800 at
//! once and the pass's late result is dropped, not sent as a second
//! answer: the helper posts its result to the dispatcher, which alone
//! answers.

use super::{Space, WAIT};
use crate::support::prelude::ok_with;
use crate::support::Agent;
use serde_json::{json, Value};
use std::path::Path;
use std::time::{Duration, Instant};

/// -32800, "request cancelled".
const REQUEST_CANCELLED: i64 = -32800;

/// Opens the gate of the next index pass and waits until that pass has
/// posted its result (it removes the gate then).
fn release(gate: &Path) {
    std::fs::write(gate, "").unwrap();
    let deadline = Instant::now() + WAIT;
    while gate.exists() {
        assert!(Instant::now() < deadline, "the index pass never ended");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn window(session: &str, file: &str) -> Value {
    json!({"sessionId": session, "uri": format!("workspace:{file}"), "startLine": 1, "lineCount": 2})
}

#[test]
fn a_cancelled_window_is_answered_once_with_request_cancelled() {
    let space = Space::new("helper-answers");
    std::fs::write(space.ws.join("first.txt"), "one\ntwo\n").unwrap();
    std::fs::write(space.ws.join("second.txt"), "three\nfour\n").unwrap();
    let gate = space.base.join("gate");
    let (script, db, tmp) = (
        space.script(&json!({"replies": []})),
        space.db.arg(),
        space.tmpdir(),
    );
    let mut agent = Agent::spawn(
        &["acp", "--script", &script, "--db", &db],
        &[
            ("TMPDIR", &tmp),
            ("SPINDLE_TEST_HOOKS", "1"),
            ("SPINDLE_TEST_INDEX_GATE", gate.to_str().unwrap()),
        ],
    );
    agent.initialize();
    let session = agent.new_session(&space.ws);

    // Not cancelled: the pass's answer arrives when it is done.
    let first = agent.request("_spindle/resource", window(&session, "first.txt"));
    release(&gate);
    let (answer, _) = agent.response(&first, WAIT);
    assert_eq!(answer["result"]["text"], "one\ntwo", "{answer}");

    // Cancelled while its pass waits: answered at once, -32800.
    let second = agent.request("_spindle/resource", window(&session, "second.txt"));
    agent.notify("$/cancel_request", json!({"requestId": second}));
    let (answer, _) = agent.response(&second, WAIT);
    assert_eq!(answer["error"]["code"], REQUEST_CANCELLED, "{answer}");
    assert_eq!(answer["error"]["message"], "request cancelled");

    // The pass goes on and posts its result; a request sent after that
    // is answered after it would have been, and nothing more came for
    // the cancelled one.
    release(&gate);
    ok_with(
        &mut agent,
        "_spindle/session/status",
        json!({"sessionId": session}),
    );
    let answers = agent
        .received()
        .iter()
        .filter(|message| message.get("method").is_none() && message["id"] == second)
        .count();
    assert_eq!(answers, 1, "{:?}", agent.received());
    // The file's index was kept by the pass all the same: read again, it
    // is answered at once, with no gate to wait for.
    let (again, _) = ok_with(
        &mut agent,
        "_spindle/resource",
        window(&session, "second.txt"),
    );
    assert_eq!(again["text"], "three\nfour", "{again}");
}

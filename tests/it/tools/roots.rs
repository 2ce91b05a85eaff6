//! `additionalDirectories`: more workspace roots. Edits inside them run
//! as edits in the workspace do (no question under `auto`), their `.git`
//! and `.spindle` stay protected, paths outside every root still ask, the
//! model is told of them, a reload keeps them; bad entries are -32602.

use super::{call, calls, initialize, permissions, say, script, Space, WAIT};
use crate::support::client::no_requests;
use crate::support::{run_prompt, Answer};
use serde_json::json;
use std::fs;

#[test]
fn edits_in_an_additional_root_are_workspace_edits() {
    let space = Space::new("roots");
    let extra = space.base.join("extra");
    fs::create_dir_all(extra.join(".git")).unwrap();
    let outside = space.base.join("outside.txt");
    let mut agent = space.spawn(
        &script(vec![
            calls(vec![
                call(
                    "w1",
                    "write_file",
                    json!({"path": extra.join("lib.rs"), "content": "pub fn f() {}\n"}),
                ),
                call(
                    "w2",
                    "write_file",
                    json!({"path": extra.join(".git/config"), "content": "x"}),
                ),
                call("w3", "write_file", json!({"path": outside, "content": "x"})),
            ]),
            say("Done."),
        ]),
        &["--permissions", "auto", "--on-reject", "continue"],
    );
    initialize(&mut agent, json!({}));
    let id = agent.request(
        "session/new",
        json!({"cwd": space.ws, "mcpServers": [], "additionalDirectories": [extra]}),
    );
    let (answer, _) = agent.response(&id, WAIT);
    let session = answer["result"]["sessionId"].as_str().unwrap().to_string();
    let turn = run_prompt(
        &mut agent,
        &session,
        "edit",
        WAIT,
        permissions(vec![
            ("w2", Answer::select("reject_once")),
            ("w3", Answer::select("reject_once")),
        ]),
    );
    assert_eq!(turn.permission_ids(), ["w2", "w3"], "{}", turn.dump());
    assert_eq!(
        fs::read_to_string(extra.join("lib.rs")).unwrap(),
        "pub fn f() {}\n"
    );
    assert!(!outside.exists());
}

#[test]
#[cfg_attr(windows, ignore = "requests name Unix paths (/tmp, /)")]
fn bad_additional_directories_are_refused() {
    let space = Space::new("roots-bad");
    // A process of its own: its session database is under its TMPDIR.
    let mut agent = space.spawn_with_env(&script(vec![say("unused")]), &[], &[]);
    initialize(&mut agent, json!({}));
    let file = space.write("file.txt", "x");
    for (roots, expected) in [
        (json!(["relative/dir"]), "additionalDirectories[0]"),
        (
            json!([space.base.join("missing")]),
            "additionalDirectories[0]",
        ),
        (json!([space.ws, file]), "additionalDirectories[1]"),
        (json!(["/"]), "whole file system"),
        // It holds the agent's session database (under its TMPDIR here).
        (json!([space.base]), "so it cannot be a workspace root"),
        (json!("not a list"), "must be an array"),
    ] {
        let id = agent.request(
            "session/new",
            json!({"cwd": space.ws, "mcpServers": [], "additionalDirectories": roots}),
        );
        let (answer, _) = agent.response(&id, WAIT);
        assert_eq!(answer["error"]["code"], -32602, "{answer}");
        let message = answer["error"]["message"].as_str().unwrap();
        assert!(message.contains(expected), "{message}");
    }
    let _ = no_requests;
}

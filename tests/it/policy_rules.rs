//! The command classifier and lasting rules through the real binary:
//! under `auto`, `diff` of workspace folders asks when a symlink inside
//! them leads outside (and runs unasked when none does); under `yolo`, a
//! deny rule from the config file whose pattern ends inside a word
//! refuses the commands it names, alone, inside a compound line or a
//! shell it starts, with its options moved.

use crate::support::client::no_requests;
use crate::support::prelude::WAIT;
use crate::support::{in_process, run_prompt, temp_dir, write_file, Agent, Answer, Turn};
use serde_json::{json, Value};
use std::path::PathBuf;

/// A test's directory: `ws/` is the workspace, the rest is outside it.
struct Space {
    base: PathBuf,
    ws: PathBuf,
}

impl Space {
    fn new(name: &str) -> Space {
        let base = spindle::os::canonical(temp_dir(name)).expect("the temp dir resolves");
        let ws = base.join("ws");
        std::fs::create_dir_all(&ws).expect("the workspace is created");
        std::fs::create_dir_all(base.join("tmp")).expect("the agent's TMPDIR is created");
        Space { base, ws }
    }

    fn write(&self, rel: &str, contents: &str) -> PathBuf {
        write_file(&self.ws, rel, contents)
    }

    fn exists(&self, rel: &str) -> bool {
        self.ws.join(rel).exists()
    }

    /// Writes the user's config file (outside the workspace); its path.
    fn config(&self, value: Value) -> String {
        let path = self.base.join("config.json");
        std::fs::write(&path, value.to_string()).unwrap();
        path.to_str().expect("UTF-8 path").to_string()
    }

    /// Starts `spindle acp --script` with the scripted `replies` and
    /// `args`, initialised, with a session in the workspace.
    fn start(&self, replies: Vec<Value>, args: &[&str]) -> (Agent, String) {
        let script = self.base.join("script.json");
        std::fs::write(&script, json!({ "replies": replies }).to_string()).unwrap();
        let script = script.to_str().expect("UTF-8 path").to_string();
        let mut all = vec!["--script", script.as_str()];
        all.extend_from_slice(args);
        let mut agent = in_process::acp(&all);
        agent.initialize();
        let session = agent.new_session(&self.ws);
        (agent, session)
    }
}

impl Drop for Space {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            let _ = std::fs::remove_dir_all(&self.base);
        }
    }
}

fn run(id: &str, command: &str) -> Value {
    json!({"id": id, "name": "run_command", "arguments": {"command": command}})
}

/// Answers the permission request of `asked` with "reject once"; any
/// other request fails the test.
fn reject(asked: &'static str) -> impl FnMut(&Value) -> Answer {
    move |request: &Value| {
        assert_eq!(request["method"], "session/request_permission", "{request}");
        assert_eq!(
            request["params"]["toolCall"]["toolCallId"], asked,
            "{request}"
        );
        Answer::select("reject_once")
    }
}

fn assert_never_shown(turn: &Turn, secret: &str) {
    for message in &turn.messages {
        assert!(
            !message.to_string().contains(secret),
            "the secret reached the editor: {message}"
        );
    }
}

#[test]
#[cfg_attr(windows, ignore = "auto asks for every command under cmd")]
fn auto_asks_before_diff_follows_a_folders_symlink_out_of_the_workspace() {
    let space = Space::new("policy-diff-folders");
    let secret = "OUTSIDE-SECRET-7c1f";
    let outside = space.base.join("secret.txt");
    std::fs::write(&outside, format!("{secret}\n")).unwrap();
    space.write("left/notes.txt", "left\n");
    space.write("right/notes.txt", "right\n");
    space.write("right/leak", "plain\n");
    spindle::os::testing::symlink(&outside, space.ws.join("left/leak")).unwrap();
    space.write("clean-a/notes.txt", "one\n");
    space.write("clean-b/notes.txt", "two\n");
    let (mut agent, session) = space.start(
        vec![
            json!({"tool_calls": [run("clean", "diff clean-a clean-b"), run("leaky", "diff left right")]}),
            json!({"text": "Compared."}),
        ],
        &["--permissions", "auto", "--on-reject", "continue"],
    );
    let turn = run_prompt(&mut agent, &session, "compare", WAIT, reject("leaky"));
    assert_eq!(turn.stop_reason(), "end_turn", "{}", turn.dump());
    assert_eq!(turn.permission_ids(), ["leaky"], "{}", turn.dump());
    // Folders whose entries stay inside are compared without a question
    // (diff exits 1: they differ).
    assert!(
        turn.final_text("clean").contains("> two"),
        "{}",
        turn.dump()
    );
    assert_eq!(turn.final_status("leaky"), "failed", "{}", turn.dump());
    assert_never_shown(&turn, secret);
}

#[test]
#[cfg_attr(windows, ignore = "sh command lines")]
fn yolo_refuses_what_a_deny_rule_with_a_star_inside_a_word_names() {
    let space = Space::new("policy-deny-star");
    space.write("precious.txt", "keep\n");
    space.write("precious-2.txt", "keep\n");
    let config = space.config(json!({"permissions": {"rules": [
        {"tool": "run_command", "command": "touch build-*", "decision": "deny"},
        // The agent files' names of the fields work in the config too.
        {"tool": "run_command", "match": "rm -f precious*", "action": "deny"},
    ]}}));
    let denied = [
        ("d1", "touch build-1"),
        ("d2", "true && touch build-2"),
        ("d3", "sh -c 'touch build-3'"),
        ("d4", "rm -f precious.txt"),
        ("d5", "rm precious-2.txt -f"),
        ("d6", "touch build-$(echo 4)"),
    ];
    let mut calls: Vec<Value> = denied.iter().map(|(id, line)| run(id, line)).collect();
    calls.push(run("ok", "touch other-1"));
    let (mut agent, session) = space.start(
        vec![json!({ "tool_calls": calls }), json!({"text": "Tried."})],
        &["--permissions", "yolo", "--config", &config],
    );
    let turn = run_prompt(&mut agent, &session, "build", WAIT, no_requests);
    assert_eq!(turn.stop_reason(), "end_turn", "{}", turn.dump());
    for (id, line) in denied {
        assert_eq!(turn.final_status(id), "failed", "{line}: {}", turn.dump());
        assert!(
            turn.final_text(id).contains("permission rule"),
            "{line}: {}",
            turn.dump()
        );
    }
    for made in ["build-1", "build-2", "build-3", "build-4"] {
        assert!(!space.exists(made), "{made} was made");
    }
    assert!(space.exists("precious.txt") && space.exists("precious-2.txt"));
    // What no rule names runs, unasked.
    assert_eq!(turn.final_status("ok"), "completed", "{}", turn.dump());
    assert!(space.exists("other-1"));
}

//! Checkpoints through the real binary: `/undo`, `/rewind N` and `/redo`
//! after edits by the file tools, by commands (`sed -i`, `rm`) and through
//! the editor's files; a file the user changed since asks first (and a
//! rejection keeps the user's version); checkpoints survive a reload in
//! another process; pruning by size.

use super::{call, calls, permissions, say, script, Space, WAIT};
use crate::support::client::no_requests;
use crate::support::{run_prompt, Answer, Turn};
use serde_json::{json, Value};
use std::collections::HashMap;

fn undo_diffs(turn: &Turn) -> Vec<Value> {
    let id = turn
        .tool_call_ids()
        .into_iter()
        .find(|id| id.starts_with("undo_"))
        .unwrap_or_else(|| panic!("no undo tool call: {}", turn.dump()));
    turn.final_content(&id)
        .into_iter()
        .filter(|c| c["type"] == "diff")
        .collect()
}

#[test]
fn undo_redo_and_rewind_after_file_tools() {
    let space = Space::new("ckpt-tools");
    let (mut agent, session) = space.start(
        &script(vec![
            calls(vec![call(
                "w1",
                "write_file",
                json!({"path": "a.txt", "content": "v1\n"}),
            )]),
            say("Wrote."),
            calls(vec![call(
                "e1",
                "edit_file",
                json!({"path": "a.txt", "edits": [{"old": "v1", "new": "v2"}]}),
            )]),
            say("Edited."),
        ]),
        &["--permissions", "yolo"],
        json!({}),
    );
    run_prompt(&mut agent, &session, "write", WAIT, no_requests);
    run_prompt(&mut agent, &session, "edit", WAIT, no_requests);
    assert_eq!(space.read("a.txt"), "v2\n");

    let turn = run_prompt(&mut agent, &session, "/undo", WAIT, no_requests);
    assert_eq!(turn.stop_reason(), "end_turn", "{}", turn.dump());
    assert_eq!(space.read("a.txt"), "v1\n");
    let diffs = undo_diffs(&turn);
    assert_eq!(diffs.len(), 1);
    assert_eq!(diffs[0]["oldText"], "v2\n");
    assert_eq!(diffs[0]["newText"], "v1\n");
    assert!(turn.text().contains("restored"), "{}", turn.dump());

    // Further back: the file did not exist before the first turn.
    run_prompt(&mut agent, &session, "/undo", WAIT, no_requests);
    assert!(!space.exists("a.txt"));
    let turn = run_prompt(&mut agent, &session, "/redo", WAIT, no_requests);
    assert_eq!(space.read("a.txt"), "v1\n", "{}", turn.dump());
    run_prompt(&mut agent, &session, "/redo", WAIT, no_requests);
    assert_eq!(space.read("a.txt"), "v2\n");
    let turn = run_prompt(&mut agent, &session, "/redo", WAIT, no_requests);
    assert!(turn.text().contains("nothing to redo"), "{}", turn.dump());

    // Two turns back at once.
    let turn = run_prompt(&mut agent, &session, "/rewind 2", WAIT, no_requests);
    assert!(!space.exists("a.txt"), "{}", turn.dump());
    let turn = run_prompt(&mut agent, &session, "/rewind lots", WAIT, no_requests);
    assert!(turn.text().contains("takes a number"), "{}", turn.dump());
}

#[test]
#[cfg_attr(windows, ignore = "sh command lines")]
fn undo_after_commands_that_edit_and_delete() {
    let space = Space::new("ckpt-commands");
    space.write("f.txt", "hello world\n");
    space.write("g.txt", "doomed\n");
    space.write("ignored.log", "noise\n");
    space.write(".gitignore", "*.log\n");
    let (mut agent, session) = space.start(
        &script(vec![
            calls(vec![call(
                "c1",
                "run_command",
                json!({"command": "sed -i 's/world/there/' f.txt && rm g.txt && echo new > h.txt"}),
            )]),
            say("Ran."),
        ]),
        &["--permissions", "yolo"],
        json!({}),
    );
    run_prompt(&mut agent, &session, "run", WAIT, no_requests);
    assert_eq!(space.read("f.txt"), "hello there\n");
    assert!(!space.exists("g.txt"));
    let turn = run_prompt(&mut agent, &session, "/undo", WAIT, no_requests);
    assert_eq!(space.read("f.txt"), "hello world\n", "{}", turn.dump());
    assert_eq!(space.read("g.txt"), "doomed\n");
    assert!(!space.exists("h.txt"), "a file the command created goes");
    assert_eq!(space.read("ignored.log"), "noise\n");
    assert_eq!(undo_diffs(&turn).len(), 3, "{}", turn.dump());
}

#[test]
fn a_file_changed_since_asks_and_a_rejection_keeps_it() {
    let space = Space::new("ckpt-conflict");
    let (mut agent, session) = space.start(
        &script(vec![
            calls(vec![
                call(
                    "w1",
                    "write_file",
                    json!({"path": "mine.txt", "content": "agent\n"}),
                ),
                call(
                    "w2",
                    "write_file",
                    json!({"path": "other.txt", "content": "agent\n"}),
                ),
            ]),
            say("Wrote."),
        ]),
        &["--permissions", "yolo"],
        json!({}),
    );
    run_prompt(&mut agent, &session, "write", WAIT, no_requests);
    // The user edits one of the files afterwards.
    space.write("mine.txt", "user edit\n");
    let asked = |request: &Value| {
        assert_eq!(request["method"], "session/request_permission");
        let tool_call = &request["params"]["toolCall"];
        assert!(tool_call["title"].as_str().unwrap().contains("mine.txt"));
        assert_eq!(tool_call["content"][0]["type"], "diff");
        assert_eq!(tool_call["content"][0]["oldText"], "user edit\n");
        Answer::select("reject_once")
    };
    let turn = run_prompt(&mut agent, &session, "/undo", WAIT, asked);
    assert_eq!(turn.stop_reason(), "end_turn", "{}", turn.dump());
    assert_eq!(
        space.read("mine.txt"),
        "user edit\n",
        "the user's version stays"
    );
    assert!(!space.exists("other.txt"), "the untouched file is undone");
    assert!(turn.text().contains("kept your version"), "{}", turn.dump());
}

#[test]
fn undo_through_the_editor_and_after_a_reload() {
    let space = Space::new("ckpt-editor");
    space.write("buf.txt", "on disk\n");
    let db = space.base.join("db").join("spindle.db");
    let db_arg = db.to_str().unwrap().to_string();
    let (mut agent, session) = space.start(
        &script(vec![
            calls(vec![call(
                "e1",
                "edit_file",
                json!({"path": "buf.txt", "edits": [{"old": "buffer", "new": "edited"}]}),
            )]),
            say("Edited."),
        ]),
        &["--permissions", "yolo", "--db", &db_arg],
        json!({"fs": {"readTextFile": true, "writeTextFile": true}}),
    );
    let path = space.abs("buf.txt");
    let mut buffers: HashMap<String, String> = HashMap::new();
    buffers.insert(path.clone(), "buffer text\n".into());
    let editor = |buffers: &mut HashMap<String, String>, request: &Value| {
        let params = &request["params"];
        let path = params["path"].as_str().unwrap_or_default().to_string();
        match request["method"].as_str().unwrap_or_default() {
            "fs/read_text_file" => match buffers.get(&path) {
                Some(text) => Answer::Result(json!({"content": text})),
                None => Answer::error(-32002, "not found"),
            },
            "fs/write_text_file" => {
                buffers.insert(path, params["content"].as_str().unwrap().to_string());
                Answer::Result(json!({}))
            }
            other => panic!("unexpected {other}"),
        }
    };
    run_prompt(&mut agent, &session, "edit", WAIT, |r: &Value| {
        editor(&mut buffers, r)
    });
    assert_eq!(buffers[&path], "edited text\n");
    drop(agent);

    // Another process on the same database: load the session, undo.
    let mut agent = space.spawn(&script(vec![]), &["--permissions", "yolo", "--db", &db_arg]);
    super::initialize(
        &mut agent,
        json!({"fs": {"readTextFile": true, "writeTextFile": true}}),
    );
    let id = agent.request(
        "session/load",
        json!({"sessionId": session, "cwd": space.ws, "mcpServers": []}),
    );
    let (loaded, _) = agent.response(&id, WAIT);
    assert!(loaded.get("result").is_some(), "{loaded}");
    let turn = run_prompt(&mut agent, &session, "/undo", WAIT, |r: &Value| {
        editor(&mut buffers, r)
    });
    assert_eq!(turn.stop_reason(), "end_turn", "{}", turn.dump());
    assert_eq!(
        buffers[&path], "buffer text\n",
        "restored through the editor"
    );
    assert_eq!(
        space.read("buf.txt"),
        "on disk\n",
        "the disk was not touched"
    );
    assert!(!turn.requests("fs/write_text_file").is_empty());
}

#[test]
fn old_checkpoints_are_pruned_by_size() {
    let space = Space::new("ckpt-prune");
    let config = space.base.join("config.json");
    std::fs::write(&config, r#"{"checkpoints": {"max_bytes": 3000}}"#).unwrap();
    let big = "x".repeat(2000);
    let (mut agent, session) = space.start(
        &script(vec![
            calls(vec![call(
                "w1",
                "write_file",
                json!({"path": "one.txt", "content": big}),
            )]),
            say("One."),
            calls(vec![call(
                "w2",
                "write_file",
                json!({"path": "two.txt", "content": "y".repeat(2000)}),
            )]),
            say("Two."),
        ]),
        &[
            "--permissions",
            "yolo",
            "--config",
            config.to_str().unwrap(),
        ],
        json!({}),
    );
    run_prompt(&mut agent, &session, "one", WAIT, no_requests);
    run_prompt(&mut agent, &session, "two", WAIT, no_requests);
    // Only the newest checkpoint fits: a rewind of two undoes one turn.
    let turn = run_prompt(&mut agent, &session, "/rewind 2", WAIT, no_requests);
    assert!(!space.exists("two.txt"), "{}", turn.dump());
    assert!(space.exists("one.txt"), "its checkpoint was pruned");
    let _ = permissions(vec![]);
}

#[test]
fn undo_never_writes_through_a_folder_that_became_a_symlink_out() {
    let space = Space::new("ckpt-symlink");
    space.write("sub/x.txt", "secret-free\n");
    let outside = space.base.join("outside");
    std::fs::create_dir_all(&outside).unwrap();
    let (mut agent, session) = space.start(
        &script(vec![
            calls(vec![call(
                "d1",
                "delete_file",
                json!({"path": "sub/x.txt"}),
            )]),
            say("Deleted."),
        ]),
        &["--permissions", "yolo"],
        json!({}),
    );
    run_prompt(&mut agent, &session, "delete", WAIT, no_requests);
    // The folder is swapped for a link out of the workspace.
    std::fs::remove_dir_all(space.ws.join("sub")).unwrap();
    spindle::os::testing::symlink(&outside, space.ws.join("sub")).unwrap();
    let turn = run_prompt(&mut agent, &session, "/undo", WAIT, no_requests);
    assert!(turn.text().contains("leads outside"), "{}", turn.dump());
    assert!(!outside.join("x.txt").exists());
}

#[test]
#[cfg_attr(windows, ignore = "sh command lines")]
fn a_file_too_large_to_keep_is_never_deleted_by_an_undo() {
    // Review finding: an over-cap file used to be recorded as "absent
    // before", so /undo deleted the user's file.
    let space = Space::new("ckpt-unkept");
    let config = space.base.join("config.json");
    std::fs::write(&config, r#"{"checkpoints": {"max_file_bytes": 100}}"#).unwrap();
    let big = "b".repeat(500);
    space.write("big.txt", &big);
    space.write("huge.txt", &big);
    let (mut agent, session) = space.start(
        &script(vec![
            calls(vec![call(
                "c1",
                "run_command",
                json!({"command": "echo more >> big.txt && echo small > small.txt"}),
            )]),
            say("Ran."),
            calls(vec![call(
                "w1",
                "write_file",
                json!({"path": "huge.txt", "content": "replaced\n"}),
            )]),
            say("Wrote."),
        ]),
        &[
            "--permissions",
            "yolo",
            "--config",
            config.to_str().unwrap(),
        ],
        json!({}),
    );
    run_prompt(&mut agent, &session, "run", WAIT, no_requests);
    run_prompt(&mut agent, &session, "write", WAIT, no_requests);

    let turn = run_prompt(&mut agent, &session, "/undo", WAIT, no_requests);
    assert_eq!(space.read("huge.txt"), "replaced\n", "{}", turn.dump());
    assert!(turn.text().contains("not restored"), "{}", turn.dump());

    let turn = run_prompt(&mut agent, &session, "/undo", WAIT, no_requests);
    assert!(
        space.exists("big.txt"),
        "the big file survives: {}",
        turn.dump()
    );
    assert_eq!(space.read("big.txt"), format!("{big}more\n"));
    assert!(!space.exists("small.txt"), "{}", turn.dump());
}

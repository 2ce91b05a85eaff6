//! The editor's files (`fs/read_text_file`, `fs/write_text_file`): reads,
//! edits and writes through the editor's buffers, files that are not UTF-8
//! edited locally byte for byte, editor errors failing the tool call but
//! not the turn, and a cancel while the editor has not answered a read.

use super::{call, calls, diff_of, position, say, script, Space, WAIT};
use crate::support::client::no_requests;
use crate::support::{run_prompt, Answer, Exchange};
use serde_json::{json, Value};
use std::collections::HashMap;
use std::fs;
use std::time::{Duration, Instant};

/// An editor with open buffers: serves `fs/read_text_file` from them (or
/// -32002 for a file it does not know) and stores `fs/write_text_file`.
fn editor(buffers: &mut HashMap<String, String>) -> impl FnMut(&Value) -> Answer + '_ {
    move |request: &Value| {
        let params = &request["params"];
        let path = params["path"].as_str().unwrap_or_default().to_string();
        match request["method"].as_str().unwrap_or_default() {
            "fs/read_text_file" => match buffers.get(&path) {
                Some(text) => Answer::Result(json!({"content": text})),
                None => Answer::error(-32002, &format!("Resource not found: {path}")),
            },
            "fs/write_text_file" => {
                let content = params["content"].as_str().unwrap_or_default().to_string();
                buffers.insert(path, content);
                Answer::Result(json!({}))
            }
            _ => panic!("unexpected request: {request}"),
        }
    }
}

/// Client capabilities offering both file methods.
fn fs_caps() -> Value {
    json!({"fs": {"readTextFile": true, "writeTextFile": true}})
}

#[test]
fn reads_edits_and_writes_go_through_the_editor() {
    let space = Space::new("tools-fs");
    space.write("buf.txt", "disk line\n");
    let buffer = "buffer line one\nbuffer line two\n";
    let (mut agent, session) = space.start(
        &script(vec![
            calls(vec![
                call("r1", "read_file", json!({"path": "buf.txt"})),
                call(
                    "e1",
                    "edit_file",
                    json!({"path": "buf.txt", "edits": [{"old": "line two", "new": "line 2"}]}),
                ),
                call(
                    "w1",
                    "write_file",
                    json!({"path": "made.txt", "content": "made\n"}),
                ),
            ]),
            say("Done."),
        ]),
        &["--permissions", "yolo"],
        fs_caps(),
    );
    let mut buffers = HashMap::from([(space.abs("buf.txt"), buffer.to_string())]);
    let turn = run_prompt(&mut agent, &session, "go", WAIT, editor(&mut buffers));
    assert_eq!(turn.stop_reason(), "end_turn", "{}", turn.dump());
    turn.assert_every_tool_call_finished();

    // The model read the editor's buffer, not the disk.
    let text = turn.final_text("r1");
    assert!(
        text.contains("     1\tbuffer line one\n     2\tbuffer line two"),
        "{text}"
    );
    assert!(!text.contains("disk line"), "{text}");

    // The edit read the buffer and wrote the result back through the editor.
    let edited = "buffer line one\nbuffer line 2\n";
    let diff = diff_of(&turn, "e1");
    assert_eq!(diff["oldText"], buffer);
    assert_eq!(diff["newText"], edited);
    assert_eq!(buffers[&space.abs("buf.txt")], edited);
    assert_eq!(
        space.read("buf.txt"),
        "disk line\n",
        "the disk must not change"
    );

    // The new file went to the editor, not the disk.
    assert_eq!(buffers[&space.abs("made.txt")], "made\n");
    assert!(!space.exists("made.txt"), "write_file bypassed the editor");
    let diff = diff_of(&turn, "w1");
    assert_eq!(diff["newText"], "made\n");

    let writes = turn.requests("fs/write_text_file");
    assert_eq!(writes.len(), 2, "{}", turn.dump());
    assert_eq!(
        writes[0]["params"],
        json!({"sessionId": session, "path": space.abs("buf.txt"), "content": edited})
    );
    assert_eq!(
        writes[1]["params"],
        json!({"sessionId": session, "path": space.abs("made.txt"), "content": "made\n"})
    );
    let reads = turn.requests("fs/read_text_file");
    assert!(reads.len() >= 2, "{}", turn.dump());
    // A file not on disk is new: nobody asks the editor to read it.
    assert!(
        !reads
            .iter()
            .any(|r| r["params"]["path"] == space.abs("made.txt")),
        "{}",
        turn.dump()
    );
    assert_eq!(reads[0]["params"]["sessionId"], session);
    assert_eq!(reads[0]["params"]["path"], space.abs("buf.txt"));
    // Each write came after the read of that call.
    let first_read = position(&turn, |m| m["method"] == "fs/read_text_file");
    let first_write = position(&turn, |m| m["method"] == "fs/write_text_file");
    assert!(first_read < first_write);
}

#[test]
fn a_file_that_is_not_utf8_is_edited_locally_byte_for_byte() {
    let space = Space::new("tools-latin1");
    let original: &[u8] = b"caf\xe9 = 1\nname = old\nna\xefve = \xff\n";
    space.write("latin.txt", original);
    let (mut agent, session) = space.start(
        &script(vec![
            calls(vec![
                call("r1", "read_file", json!({"path": "latin.txt"})),
                call("e1", "edit_file", json!({"path": "latin.txt", "edits": [{"old": "name = old", "new": "name = new"}]})),
            ]),
            say("Done."),
        ]),
        &["--permissions", "yolo"],
        fs_caps(),
    );
    let turn = run_prompt(&mut agent, &session, "go", WAIT, |request: &Value| {
        panic!("no editor request expected for a non-UTF-8 file: {request}")
    });
    assert_eq!(turn.stop_reason(), "end_turn", "{}", turn.dump());
    turn.assert_every_tool_call_finished();
    assert_eq!(turn.final_status("r1"), "completed");
    assert!(turn.final_text("r1").contains("name = old"));
    assert_eq!(turn.final_status("e1"), "completed", "{}", turn.dump());
    assert_eq!(
        fs::read(space.path("latin.txt")).unwrap(),
        b"caf\xe9 = 1\nname = new\nna\xefve = \xff\n"
    );
    assert!(turn.all_requests().is_empty());
}

#[test]
fn editor_errors_on_fs_requests_fail_the_tool_call_not_the_turn() {
    let space = Space::new("tools-fs-error");
    space.write("a.txt", "on disk\n");
    let (mut agent, session) = space.start(
        &script(vec![
            calls(vec![
                call("r1", "read_file", json!({"path": "a.txt"})),
                call(
                    "e1",
                    "edit_file",
                    json!({"path": "a.txt", "edits": [{"old": "disk", "new": "paper"}]}),
                ),
                call(
                    "w1",
                    "write_file",
                    json!({"path": "b.txt", "content": "b\n"}),
                ),
                call(
                    "t1",
                    "todo_write",
                    json!({"todos": [{"content": "go on", "status": "in_progress"}]}),
                ),
            ]),
            say("Carried on."),
        ]),
        &["--permissions", "yolo"],
        fs_caps(),
    );
    let turn = run_prompt(
        &mut agent,
        &session,
        "go",
        WAIT,
        |request: &Value| match request["method"].as_str().unwrap_or_default() {
            "fs/read_text_file" => Answer::error(-32603, "the buffer is unavailable"),
            "fs/write_text_file" => Answer::error(-32603, "the disk is full"),
            _ => panic!("unexpected request: {request}"),
        },
    );
    assert_eq!(turn.stop_reason(), "end_turn", "{}", turn.dump());
    assert_eq!(turn.text(), "Carried on.");
    turn.assert_every_tool_call_finished();
    assert_eq!(turn.final_status("r1"), "failed");
    assert!(
        turn.final_text("r1").contains("the buffer is unavailable"),
        "{}",
        turn.dump()
    );
    assert_eq!(turn.final_status("e1"), "failed");
    assert_eq!(turn.final_status("w1"), "failed");
    assert!(
        turn.final_text("w1").contains("the disk is full"),
        "{}",
        turn.dump()
    );
    assert_eq!(turn.final_status("t1"), "completed");
    assert_eq!(space.read("a.txt"), "on disk\n");
    assert!(!space.exists("b.txt"));
    // The failed read of e1 means nothing was written for it.
    let writes = turn.requests("fs/write_text_file");
    assert!(
        writes
            .iter()
            .all(|w| w["params"]["path"] != space.abs("a.txt")),
        "{}",
        turn.dump()
    );
}

#[test]
fn cancel_while_the_editor_has_not_answered_a_file_read() {
    let space = Space::new("tools-fs-cancel");
    space.write("a.txt", "on disk\n");
    let (mut agent, session) = space.start(
        &script(vec![
            calls(vec![
                call(
                    "e1",
                    "edit_file",
                    json!({"path": "a.txt", "edits": [{"old": "disk", "new": "paper"}]}),
                ),
                call("r1", "read_file", json!({"path": "a.txt"})),
            ]),
            say("Back."),
        ]),
        &["--permissions", "yolo"],
        fs_caps(),
    );
    // The editor never answers.
    let mut answer = |request: &Value| {
        assert_eq!(request["method"], "fs/read_text_file", "{request}");
        Answer::Ignore
    };
    let mut exchange = Exchange::prompt(&mut agent, &session, "go");
    let reading = exchange.until(&mut agent, WAIT, &mut answer, &mut |ex: &Exchange| {
        !ex.requests("fs/read_text_file").is_empty()
    });
    assert!(
        reading,
        "the prompt ended before reading through the editor"
    );
    let cancelled_at = Instant::now();
    agent.notify("session/cancel", json!({"sessionId": session}));
    let turn = exchange.finish(&mut agent, WAIT, &mut answer);
    let elapsed = cancelled_at.elapsed();
    assert_eq!(turn.stop_reason(), "cancelled", "{}", turn.dump());
    assert!(elapsed < Duration::from_secs(2), "cancel took {elapsed:?}");
    turn.assert_every_tool_call_finished();
    assert_eq!(turn.final_status("e1"), "failed");
    assert!(!turn.tool_call_ids().contains(&"r1".to_string()));
    assert!(turn.requests("fs/write_text_file").is_empty());
    assert_eq!(space.read("a.txt"), "on disk\n");

    let turn = run_prompt(&mut agent, &session, "again", WAIT, no_requests);
    assert_eq!(turn.stop_reason(), "end_turn", "{}", turn.dump());
    assert_eq!(turn.text(), "Back.");
}

/// Writes then edits an open file under `policy`, and returns how many
/// times the editor was asked for it.
fn editor_reads_for_a_write_and_an_edit(policy: &str) -> usize {
    let space = Space::new("tools-fs-reads");
    space.write("open.txt", "disk\n");
    let (mut agent, session) = space.start(
        &script(vec![
            calls(vec![call(
                "w1",
                "write_file",
                json!({"path": "open.txt", "content": "new\n"}),
            )]),
            calls(vec![call(
                "e1",
                "edit_file",
                json!({"path": "open.txt", "edits": [{"old": "new", "new": "newer"}]}),
            )]),
            say("Done."),
        ]),
        &["--permissions", policy],
        fs_caps(),
    );
    let mut buffers = HashMap::from([(space.abs("open.txt"), "buffer\n".to_string())]);
    let mut serve = editor(&mut buffers);
    let turn = run_prompt(&mut agent, &session, "go", WAIT, |request: &Value| {
        if request["method"] == "session/request_permission" {
            // The question shows the diff against the editor's buffer.
            let diff = &request["params"]["toolCall"]["content"][0];
            assert_eq!(diff["type"], "diff", "{request}");
            return Answer::Result(
                json!({"outcome": {"outcome": "selected", "optionId": "allow_once"}}),
            );
        }
        serve(request)
    });
    assert_eq!(turn.stop_reason(), "end_turn", "{}", turn.dump());
    turn.assert_every_tool_call_finished();
    drop(serve);
    assert_eq!(buffers[&space.abs("open.txt")], "newer\n");
    // The checkpoint kept the buffer as it was: undo gives it back.
    assert_eq!(diff_of(&turn, "w1")["oldText"], "buffer\n");
    turn.requests("fs/read_text_file").len()
}

#[test]
fn a_change_to_an_open_file_asks_the_editor_for_it_once() {
    // The checkpoint before, the change itself and the checkpoint after
    // share one read; asking the user costs one more (they may type in
    // the buffer while asked).
    assert_eq!(editor_reads_for_a_write_and_an_edit("yolo"), 2);
    assert_eq!(editor_reads_for_a_write_and_an_edit("ask"), 4);
}

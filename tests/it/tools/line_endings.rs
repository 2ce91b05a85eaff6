//! Line endings and byte-order marks through the real binary: a file a
//! Windows editor saved with CRLF (and perhaps a BOM) keeps them when the
//! scripted model, writing `\n`, changes it with edit_file, write_file or
//! apply_patch; a file with mixed endings changes only where edited; and
//! the diffs shown hold only the real change.

use super::{call, calls, say, script, Space, WAIT};
use crate::support::client::{no_requests, run_prompt, Answer, Turn};
use serde_json::{json, Value};
use std::collections::HashMap;
use std::fs;
use std::path::PathBuf;

/// The bytes of `rel` in the workspace, whatever their encoding.
fn bytes(space: &Space, rel: &str) -> Vec<u8> {
    fs::read(space.path(rel)).expect("the file is there")
}

/// Runs one turn in which the scripted model makes `calls`, then
/// answers, with every tool allowed.
fn run(space: &Space, made: Vec<Value>) -> Turn {
    run_with(space, made, json!({}), no_requests)
}

/// `run` with these client capabilities, answering the agent's requests
/// with `answer`.
fn run_with(
    space: &Space,
    made: Vec<Value>,
    capabilities: Value,
    answer: impl FnMut(&Value) -> Answer,
) -> Turn {
    let replies = script(vec![calls(made), say("Done.")]);
    let (mut agent, session) = space.start(&replies, &["--permissions", "yolo"], capabilities);
    let turn = run_prompt(&mut agent, &session, "change the files", WAIT, answer);
    assert_eq!(turn.stop_reason(), "end_turn", "{}", turn.dump());
    turn.assert_every_tool_call_finished();
    turn
}

/// The diff blocks of the final update of `id`.
fn diffs(turn: &Turn, id: &str) -> Vec<Value> {
    let content = turn.final_content(id);
    assert!(
        !content.is_empty() && content.iter().all(|c| c["type"] == "diff"),
        "{id}: {content:?}"
    );
    content
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8(bytes.to_vec()).expect("UTF-8")
}

#[test]
fn edit_file_keeps_crlf_the_bom_and_mixed_endings() {
    let space = Space::new("endings-edit");
    let crlf = b"\xef\xbb\xbf[section]\r\nname = old\r\nsize = 1\r\n\r\nend\r\n";
    space.write("win.ini", crlf);
    let mixed = b"lf one\nlf two\ncrlf one\r\ncrlf two\r\ntail\n";
    space.write("mixed.txt", mixed);
    let turn = run(
        &space,
        vec![
            call(
                "e1",
                "edit_file",
                json!({"path": "win.ini", "edits": [
                    {"old": "name = old\nsize = 1\n", "new": "name = new\nsize = 2\ncolour = red\n"},
                    {"old": "end", "new": "end\n; done"}
                ]}),
            ),
            call(
                "e2",
                "edit_file",
                json!({"path": "mixed.txt", "edits": [
                    {"old": "lf one\nlf two", "new": "LF ONE\nLF TWO"},
                    {"old": "crlf one\ncrlf two", "new": "CRLF ONE\nCRLF TWO"}
                ]}),
            ),
        ],
    );
    let expected =
        b"\xef\xbb\xbf[section]\r\nname = new\r\nsize = 2\r\ncolour = red\r\n\r\nend\r\n; done\r\n";
    assert_eq!(text(&bytes(&space, "win.ini")), text(expected));
    assert_eq!(
        text(&bytes(&space, "mixed.txt")),
        "LF ONE\nLF TWO\nCRLF ONE\r\nCRLF TWO\r\ntail\n"
    );
    // The diff is old and new as they are on disk: no line but the edited
    // ones differs.
    let diff = &diffs(&turn, "e1")[0];
    assert_eq!(diff["oldText"], text(crlf));
    assert_eq!(diff["newText"], text(expected));
}

#[test]
fn write_file_over_a_crlf_file_writes_crlf_and_keeps_the_bom() {
    let space = Space::new("endings-write");
    space.write("win.txt", b"\xef\xbb\xbfone\r\ntwo\r\n");
    space.write("unix.txt", b"one\ntwo\n");
    let turn = run(
        &space,
        vec![
            call(
                "w1",
                "write_file",
                json!({"path": "win.txt", "content": "uno\ndos\ntres\n"}),
            ),
            call(
                "w2",
                "write_file",
                json!({"path": "unix.txt", "content": "uno\ndos\n"}),
            ),
            call(
                "w3",
                "write_file",
                json!({"path": "new.txt", "content": "a\r\nb\n"}),
            ),
        ],
    );
    let win = "\u{feff}uno\r\ndos\r\ntres\r\n";
    assert_eq!(text(&bytes(&space, "win.txt")), win);
    assert_eq!(text(&bytes(&space, "unix.txt")), "uno\ndos\n");
    // A new file is written as given.
    assert_eq!(text(&bytes(&space, "new.txt")), "a\r\nb\n");
    let diff = &diffs(&turn, "w1")[0];
    assert_eq!(diff["oldText"], "\u{feff}one\r\ntwo\r\n");
    assert_eq!(diff["newText"], win, "the diff shows what was written");
    assert_eq!(diff["path"], space.abs("win.txt"));
}

#[test]
fn apply_patch_matches_and_keeps_crlf_and_the_bom() {
    let space = Space::new("endings-patch");
    let before = "\u{feff}fn main() {\r\n    let x = 1;\r\n    println!(\"{x}\");\r\n}\r\n";
    space.write("src/main.rs", before.as_bytes());
    space.write("mixed.txt", b"first\nsecond\r\nthird\r\nfourth\r\n");
    let patch = "*** Begin Patch
*** Update File: src/main.rs
@@
 fn main() {
-    let x = 1;
+    let x = 2;
+    let y = 3;
     println!(\"{x}\");
*** Update File: mixed.txt
@@
 first
-second
+2nd
*** End Patch";
    let turn = run(
        &space,
        vec![call("p1", "apply_patch", json!({"patch": patch}))],
    );
    let after =
        "\u{feff}fn main() {\r\n    let x = 2;\r\n    let y = 3;\r\n    println!(\"{x}\");\r\n}\r\n";
    assert_eq!(text(&bytes(&space, "src/main.rs")), after);
    assert_eq!(
        text(&bytes(&space, "mixed.txt")),
        "first\n2nd\r\nthird\r\nfourth\r\n"
    );
    let shown = diffs(&turn, "p1");
    let main = shown
        .iter()
        .find(|d| d["path"].as_str().map(PathBuf::from) == Some(space.path("src/main.rs")))
        .expect("a diff for main.rs");
    assert_eq!(main["oldText"], before);
    assert_eq!(main["newText"], after);
}

#[test]
fn edits_through_the_editor_keep_its_buffers_crlf() {
    let space = Space::new("endings-editor");
    space.write("buf.txt", b"on disk\n");
    let buffer = "\u{feff}one\r\ntwo\r\nthree\r\n";
    let mut buffers = HashMap::from([(space.abs("buf.txt"), buffer.to_string())]);
    let editor = |request: &Value| {
        let path = request["params"]["path"].as_str().unwrap_or_default();
        match request["method"].as_str().unwrap_or_default() {
            "fs/read_text_file" => match buffers.get(path) {
                Some(text) => Answer::Result(json!({"content": text})),
                None => Answer::error(-32002, "Resource not found"),
            },
            "fs/write_text_file" => {
                let content = request["params"]["content"].as_str().unwrap_or_default();
                buffers.insert(path.to_string(), content.to_string());
                Answer::Result(json!({}))
            }
            _ => panic!("unexpected request: {request}"),
        }
    };
    let turn = run_with(
        &space,
        vec![call(
            "e1",
            "edit_file",
            json!({"path": "buf.txt", "edits": [{"old": "one\ntwo", "new": "1\n2"}]}),
        )],
        json!({"fs": {"readTextFile": true, "writeTextFile": true}}),
        editor,
    );
    let edited = "\u{feff}1\r\n2\r\nthree\r\n";
    let writes = turn.requests("fs/write_text_file");
    assert_eq!(writes.len(), 1, "{}", turn.dump());
    assert_eq!(writes[0]["params"]["content"], edited);
    assert_eq!(diffs(&turn, "e1")[0]["oldText"], buffer);
    assert_eq!(text(&bytes(&space, "buf.txt")), "on disk\n");
}

//! The file tools through the real binary: read_file, write_file,
//! edit_file, list_directory, glob and search on their happy paths
//! (`--permissions yolo`), and failing tool calls (missing or binary files,
//! edits that do not apply, unknown tools, malformed arguments) that fail
//! the call but not the turn.

use super::{call, calls, diff_of, ripgrep_installed, say, script, Space, WAIT};
use crate::support::client::no_requests;
use crate::support::run_prompt;
use serde_json::{json, Value};

// ---------------------------------------------------------------------------
// Happy paths (--permissions yolo)
// ---------------------------------------------------------------------------

#[test]
fn read_file_shows_numbered_lines_and_says_what_remains() {
    let space = Space::new("tools-read");
    space.write("notes.txt", "one\ntwo\nthree\nfour\nfive\n");
    let window = json!({"path": "notes.txt", "start_line": 2, "line_count": 2});
    let whole = json!({"path": space.abs("notes.txt")});
    let (mut agent, session) = space.start(
        &script(vec![
            calls(vec![
                call("r1", "read_file", window.clone()),
                call("r2", "read_file", whole.clone()),
            ]),
            say("Read it."),
        ]),
        &["--permissions", "yolo"],
        json!({}),
    );
    let turn = run_prompt(&mut agent, &session, "read", WAIT, no_requests);
    assert_eq!(turn.stop_reason(), "end_turn", "{}", turn.dump());
    assert_eq!(turn.text(), "Read it.");
    assert_eq!(turn.tool_call_ids(), ["r1", "r2"]);

    let announce = turn.tool_call("r1");
    assert_eq!(announce["title"], "Read notes.txt (lines 2-3)");
    assert_eq!(announce["kind"], "read");
    assert_eq!(announce["status"], "pending");
    assert_eq!(
        announce["locations"],
        json!([{"path": space.abs("notes.txt"), "line": 2}])
    );
    assert_eq!(announce["rawInput"], window);
    assert_eq!(turn.statuses("r1"), ["pending", "in_progress", "completed"]);
    let text = turn.final_text("r1");
    assert!(text.contains("     2\ttwo\n     3\tthree\n"), "{text}");
    assert!(!text.contains("one") && !text.contains("four"), "{text}");
    assert!(
        text.contains("[Showing lines 2-3 of 5. Use start_line=4 to read more.]"),
        "{text}"
    );

    let announce = turn.tool_call("r2");
    assert_eq!(announce["title"], "Read notes.txt");
    assert_eq!(
        announce["locations"],
        json!([{"path": space.abs("notes.txt")}])
    );
    assert_eq!(announce["rawInput"], whole);
    let text = turn.final_text("r2");
    assert!(
        text.contains("     1\tone\n     2\ttwo\n     3\tthree\n     4\tfour\n     5\tfive\n"),
        "{text}"
    );
    assert!(!text.contains("Showing"), "{text}");
    turn.assert_every_tool_call_finished();
}

#[test]
#[cfg_attr(windows, ignore = "expects / in shown paths")]
fn write_file_creates_parent_directories_and_overwrites() {
    let space = Space::new("tools-write");
    space.write("old.txt", "old content\n");
    let (mut agent, session) = space.start(
        &script(vec![
            calls(vec![
                call(
                    "w1",
                    "write_file",
                    json!({"path": "deep/er/new.txt", "content": "fresh\n"}),
                ),
                call(
                    "w2",
                    "write_file",
                    json!({"path": "old.txt", "content": "new content\n"}),
                ),
            ]),
            say("Written."),
        ]),
        &["--permissions", "yolo"],
        json!({}),
    );
    let turn = run_prompt(&mut agent, &session, "write", WAIT, no_requests);
    assert_eq!(turn.stop_reason(), "end_turn", "{}", turn.dump());
    assert_eq!(space.read("deep/er/new.txt"), "fresh\n");
    assert_eq!(space.read("old.txt"), "new content\n");

    let announce = turn.tool_call("w1");
    assert_eq!(announce["title"], "Write deep/er/new.txt");
    assert_eq!(announce["kind"], "edit");
    assert_eq!(
        announce["locations"],
        json!([{"path": space.abs("deep/er/new.txt")}])
    );
    assert_eq!(turn.statuses("w1"), ["pending", "in_progress", "completed"]);
    let diff = diff_of(&turn, "w1");
    assert_eq!(diff["path"], space.abs("deep/er/new.txt"));
    assert_eq!(diff["newText"], "fresh\n");
    assert!(
        diff.get("oldText").is_none_or(Value::is_null),
        "a new file has no old text: {diff}"
    );

    let diff = diff_of(&turn, "w2");
    assert_eq!(diff["path"], space.abs("old.txt"));
    assert_eq!(diff["oldText"], "old content\n");
    assert_eq!(diff["newText"], "new content\n");
    turn.assert_every_tool_call_finished();
}

#[test]
fn edit_file_single_multiple_in_order_and_replace_all() {
    let space = Space::new("tools-edit");
    let a = "fn main() {\n    let x = 1;\n    let y = 2;\n}\n";
    space.write("a.rs", a);
    space.write("b.txt", "alpha\nbeta\ngamma\n");
    space.write("c.txt", "foo bar foo baz foo\n");
    space.write("d.txt", "start\n");
    let (mut agent, session) = space.start(
        &script(vec![
            calls(vec![
                call(
                    "e1",
                    "edit_file",
                    json!({"path": "a.rs", "edits": [{"old": "let x = 1;", "new": "let x = 10;"}]}),
                ),
                call(
                    "e2",
                    "edit_file",
                    json!({"path": "b.txt", "edits": [
                        {"old": "alpha", "new": "ALPHA"},
                        {"old": "gamma", "new": "GAMMA"}
                    ]}),
                ),
                call(
                    "e3",
                    "edit_file",
                    json!({"path": "c.txt", "edits": [{"old": "foo", "new": "qux", "replace_all": true}]}),
                ),
                // The second edit only matches after the first one.
                call(
                    "e4",
                    "edit_file",
                    json!({"path": "d.txt", "edits": [
                        {"old": "start", "new": "middle"},
                        {"old": "middle", "new": "end"}
                    ]}),
                ),
            ]),
            say("Edited."),
        ]),
        &["--permissions", "yolo"],
        json!({}),
    );
    let turn = run_prompt(&mut agent, &session, "edit", WAIT, no_requests);
    assert_eq!(turn.stop_reason(), "end_turn", "{}", turn.dump());
    turn.assert_every_tool_call_finished();

    let expected = [
        (
            "e1",
            "a.rs",
            a,
            "fn main() {\n    let x = 10;\n    let y = 2;\n}\n",
        ),
        (
            "e2",
            "b.txt",
            "alpha\nbeta\ngamma\n",
            "ALPHA\nbeta\nGAMMA\n",
        ),
        (
            "e3",
            "c.txt",
            "foo bar foo baz foo\n",
            "qux bar qux baz qux\n",
        ),
        ("e4", "d.txt", "start\n", "end\n"),
    ];
    for (id, file, old, new) in expected {
        assert_eq!(space.read(file), new, "{file}");
        assert_eq!(turn.final_status(id), "completed", "{}", turn.dump());
        assert_eq!(turn.tool_call(id)["title"], format!("Edit {file}"));
        assert_eq!(turn.tool_call(id)["kind"], "edit");
        let diff = diff_of(&turn, id);
        assert_eq!(diff["path"], space.abs(file));
        assert_eq!(diff["oldText"], old, "{id}");
        assert_eq!(diff["newText"], new, "{id}");
    }
}

#[test]
fn list_directory_glob_and_search() {
    let space = Space::new("tools-find");
    space.write("README.md", "# Demo\n");
    space.write("src/lib.rs", "pub fn needle() {}\n// Needle again\n");
    space.write("src/main.rs", "fn main() { needle(); }\n");
    space.write("docs/guide.txt", "find the needle here\n");
    space.write(".gitignore", "target/\n");
    space.write("target/junk.rs", "needle\n");
    let (mut agent, session) = space.start(
        &script(vec![
            calls(vec![
                call("l1", "list_directory", json!({})),
                call("l2", "list_directory", json!({"path": "src"})),
                call("g1", "glob", json!({"pattern": "**/*.rs"})),
                call("g2", "glob", json!({"pattern": "*.txt", "path": "docs"})),
                call("s1", "search", json!({"pattern": "needle"})),
                call(
                    "s2",
                    "search",
                    json!({"pattern": "NEEDLE", "case_insensitive": true, "glob": "*.rs"}),
                ),
                call(
                    "s3",
                    "search",
                    json!({"pattern": "ne+dle\\(\\)", "regex": true}),
                ),
                call("s4", "search", json!({"pattern": "ne+dle\\(\\)"})),
            ]),
            say("Found."),
        ]),
        &["--permissions", "yolo"],
        json!({}),
    );
    let turn = run_prompt(&mut agent, &session, "find", WAIT, no_requests);
    assert_eq!(turn.stop_reason(), "end_turn", "{}", turn.dump());
    turn.assert_every_tool_call_finished();
    for id in ["l1", "l2", "g1", "g2", "s1", "s2", "s4"] {
        assert_eq!(turn.final_status(id), "completed", "{id}\n{}", turn.dump());
    }
    let regex_status = if ripgrep_installed() {
        "completed"
    } else {
        "failed"
    };
    assert_eq!(turn.final_status("s3"), regex_status, "{}", turn.dump());
    assert_eq!(turn.tool_call("l1")["kind"], "read");
    assert_eq!(turn.tool_call("l1")["title"], "List .");
    assert_eq!(
        turn.tool_call("l1")["locations"],
        json!([{"path": space.ws}])
    );
    assert_eq!(turn.tool_call("g1")["kind"], "search");
    assert_eq!(turn.tool_call("g1")["title"], "Find **/*.rs");
    assert_eq!(turn.tool_call("s1")["kind"], "search");
    assert_eq!(turn.tool_call("s1")["title"], "Search for \"needle\"");

    // One entry per line: directories end in `/`, files show their size,
    // ignored entries are listed and marked.
    let listing = turn.final_text("l1");
    let line_of = |listing: &str, start: &str| -> String {
        listing
            .lines()
            .find(|line| line.starts_with(start))
            .unwrap_or_else(|| panic!("no line for {start:?} in:\n{listing}"))
            .to_string()
    };
    line_of(&listing, "docs/");
    line_of(&listing, "src/");
    line_of(&listing, ".gitignore");
    assert!(
        line_of(&listing, "README.md").contains("7 bytes"),
        "{listing}"
    );
    assert!(
        line_of(&listing, "target/").contains("ignored"),
        "{listing}"
    );
    // Directories first.
    assert!(
        listing.find("src/").unwrap() < listing.find("README.md").unwrap(),
        "{listing}"
    );
    let listing = turn.final_text("l2");
    assert!(
        line_of(&listing, "lib.rs").contains("35 bytes"),
        "{listing}"
    );
    assert!(
        line_of(&listing, "main.rs").contains("24 bytes"),
        "{listing}"
    );
    assert!(!listing.contains("README"), "{listing}");

    let found = turn.final_text("g1");
    assert!(found.contains("src/lib.rs"), "{found}");
    assert!(found.contains("src/main.rs"), "{found}");
    assert!(
        !found.contains("junk.rs"),
        "ignored files are not found: {found}"
    );
    let found = turn.final_text("g2");
    assert!(found.contains("docs/guide.txt"), "{found}");
    assert!(!found.contains(".rs"), "{found}");

    let hits = turn.final_text("s1");
    for expected in [
        "docs/guide.txt:1: find the needle here",
        "src/lib.rs:1: pub fn needle() {}",
        "src/main.rs:1: fn main() { needle(); }",
    ] {
        assert!(hits.contains(expected), "{expected:?} missing:\n{hits}");
    }
    assert!(
        !hits.contains("Needle again"),
        "case-sensitive by default: {hits}"
    );
    assert!(
        !hits.contains("target"),
        "ignored files are not searched: {hits}"
    );
    let hits = turn.final_text("s2");
    assert!(hits.contains("src/lib.rs:2: // Needle again"), "{hits}");
    assert!(hits.contains("src/lib.rs:1:"), "{hits}");
    assert!(
        !hits.contains("guide.txt"),
        "the glob limits the files: {hits}"
    );
    let hits = turn.final_text("s3");
    if ripgrep_installed() {
        assert!(hits.contains("src/lib.rs:1:"), "{hits}");
        assert!(hits.contains("src/main.rs:1:"), "{hits}");
        assert!(!hits.contains("guide.txt"), "{hits}");
    } else {
        // Without ripgrep, regular expressions are refused, not misread.
        assert!(hits.contains("ripgrep"), "{hits}");
    }
    let hits = turn.final_text("s4");
    assert!(hits.contains("No matches"), "literal by default: {hits}");
}

// ---------------------------------------------------------------------------
// Tool failures
// ---------------------------------------------------------------------------

#[test]
fn failing_tool_calls_are_failed_and_the_turn_goes_on() {
    let space = Space::new("tools-fail");
    let a = "let x = 1;\nlet x = 1;\nlet y = 2;\n";
    space.write("a.txt", a);
    space.write("blob.bin", b"\x7fELF\x00\x01\x02\x03binary");
    let (mut agent, session) = space.start(
        &script(vec![
            json!({
                "text": "Trying things.",
                "tool_calls": [
                    call("f1", "read_file", json!({"path": "missing.txt"})),
                    call("f2", "read_file", json!({"path": "blob.bin"})),
                    call("f3", "edit_file", json!({"path": "a.txt", "edits": [{"old": "let z", "new": "let w"}]})),
                    call("f4", "edit_file", json!({"path": "a.txt", "edits": [{"old": "let x = 1;", "new": "let x = 3;"}]})),
                    // All or nothing: the first edit would apply, the second cannot.
                    call("f5", "edit_file", json!({"path": "a.txt", "edits": [
                        {"old": "let y = 2;", "new": "let y = 5;"},
                        {"old": "nowhere", "new": "x"}
                    ]})),
                    call("f6", "fly", json!({"to": "the moon"})),
                    {"id": "f7", "name": "read_file", "raw_arguments": "{\"path\": "},
                    call("f8", "edit_file", json!({"path": "missing.txt", "edits": [{"old": "a", "new": "b"}]})),
                    call("ok", "read_file", json!({"path": "a.txt"}))
                ]
            }),
            say("Recovered."),
        ]),
        &["--permissions", "yolo"],
        json!({}),
    );
    let turn = run_prompt(&mut agent, &session, "try", WAIT, no_requests);
    assert_eq!(turn.stop_reason(), "end_turn", "{}", turn.dump());
    assert_eq!(turn.text(), "Trying things.Recovered.");
    turn.assert_every_tool_call_finished();
    assert_eq!(
        turn.tool_call_ids(),
        ["f1", "f2", "f3", "f4", "f5", "f6", "f7", "f8", "ok"]
    );
    let expectations = [
        ("f1", "does not exist"),
        ("f2", "binary"),
        ("f3", "not found"),
        ("f4", "occurs 2 times"),
        ("f5", "edit 2 of 2"),
        ("f6", "no tool named \"fly\""),
        ("f7", "not valid JSON"),
        ("f8", "does not exist"),
    ];
    for (id, expected) in expectations {
        assert_eq!(turn.final_status(id), "failed", "{id}\n{}", turn.dump());
        let text = turn.final_text(id);
        assert!(
            text.contains(expected),
            "{id}: {expected:?} not in {text:?}"
        );
    }
    assert!(turn.final_text("f3").contains("Nothing was changed"));
    assert!(turn.final_text("f4").contains("replace_all"));
    assert_eq!(turn.tool_call("f6")["title"], "fly (invalid call)");
    assert_eq!(turn.tool_call("f6")["rawInput"], json!({"to": "the moon"}));
    assert_eq!(turn.tool_call("f7")["rawInput"], "{\"path\": ");
    assert_eq!(turn.final_status("ok"), "completed");
    assert_eq!(space.read("a.txt"), a, "failed edits must change nothing");
    assert!(!space.exists("missing.txt"));
}

//! Tool calls through the real binary: every tool's happy path and
//! failures, the approval policies and permission answers, the workspace
//! boundary, the editor's files and terminals, cancellation and EOF in the
//! middle of a tool, the per-turn step limit, and tool calls streamed by a
//! Chat Completions server.
//!
//! Most tests play a scripted model (`--script`, docs/scripted-provider.md):
//! its ordered replies are consumed one per model call, so a scenario is
//! "reply 1 makes tool calls, reply 2 answers their results". Each test has
//! its own canonical temporary workspace and points the agent's `TMPDIR`
//! into it, so command logs stay inside the test's directory.

use crate::support::client::no_requests;
use crate::support::fake_openai::{
    chat_text, chat_tool_calls, chunk_finish, chunk_role, chunk_tool_call, chunk_usage, done,
};
use crate::support::{
    run_prompt, temp_dir, write_file, Agent, Answer, Exchange, FakeServer, Reply, Turn,
};
use serde_json::{json, Value};
use std::collections::HashMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::thread;
use std::time::{Duration, Instant};

const WAIT: Duration = Duration::from_secs(20);

/// The four permission options, whose ids are also their kinds.
const OPTIONS: [&str; 4] = ["allow_once", "allow_always", "reject_once", "reject_always"];

/// A test's directory: `ws/` is the workspace (canonical, since /tmp may be
/// a symlink), the rest is outside it. Removed when the test passes.
struct Space {
    base: PathBuf,
    ws: PathBuf,
}

impl Space {
    fn new(name: &str) -> Space {
        let base = fs::canonicalize(temp_dir(name)).expect("cannot canonicalize the temp dir");
        let ws = base.join("ws");
        fs::create_dir_all(&ws).expect("cannot create the workspace");
        fs::create_dir_all(base.join("tmp")).expect("cannot create the agent's TMPDIR");
        Space { base, ws }
    }

    /// `rel` inside the workspace.
    fn path(&self, rel: &str) -> PathBuf {
        self.ws.join(rel)
    }

    /// The absolute path of `rel` inside the workspace, as a string.
    fn abs(&self, rel: &str) -> String {
        self.path(rel).to_str().expect("UTF-8 path").to_string()
    }

    fn write(&self, rel: &str, contents: impl AsRef<[u8]>) -> PathBuf {
        write_file(&self.ws, rel, contents)
    }

    fn read(&self, rel: &str) -> String {
        let path = self.path(rel);
        fs::read_to_string(&path)
            .unwrap_or_else(|err| panic!("cannot read {}: {err}", path.display()))
    }

    fn exists(&self, rel: &str) -> bool {
        self.path(rel).exists()
    }

    /// Environment for the agent: its temp directory inside this space.
    fn tmpdir(&self) -> String {
        self.base
            .join("tmp")
            .to_str()
            .expect("UTF-8 path")
            .to_string()
    }

    /// Starts `spindle acp --script <script> <args>`.
    fn spawn(&self, script: &Value, args: &[&str]) -> Agent {
        let script_path = self.base.join("script.json");
        fs::write(&script_path, serde_json::to_string_pretty(script).unwrap())
            .expect("cannot write the script");
        let script_path = script_path.to_str().expect("UTF-8 path").to_string();
        let mut all = vec!["acp", "--script", script_path.as_str()];
        all.extend_from_slice(args);
        let tmp = self.tmpdir();
        Agent::spawn(&all, &[("TMPDIR", tmp.as_str())])
    }

    /// Spawns, initializes with `capabilities` and opens a session in the
    /// workspace.
    fn start(&self, script: &Value, args: &[&str], capabilities: Value) -> (Agent, String) {
        let mut agent = self.spawn(script, args);
        initialize(&mut agent, capabilities);
        let session = agent.new_session(&self.ws);
        (agent, session)
    }
}

impl Drop for Space {
    fn drop(&mut self) {
        if thread::panicking() {
            eprintln!("test directory kept: {}", self.base.display());
        } else {
            let _ = fs::remove_dir_all(&self.base);
        }
    }
}

fn initialize(agent: &mut Agent, capabilities: Value) {
    let id = agent.request(
        "initialize",
        json!({
            "protocolVersion": 1,
            "clientCapabilities": capabilities,
            "clientInfo": {"name": "spindle-tool-tests", "version": "0.0.0"},
        }),
    );
    let (response, _) = agent.response(&id, WAIT);
    assert!(
        response.get("result").is_some(),
        "initialize failed: {response}"
    );
}

/// A scripted tool call with a fixed id.
fn call(id: &str, name: &str, arguments: Value) -> Value {
    json!({"id": id, "name": name, "arguments": arguments})
}

/// A scripted reply making these tool calls.
fn calls(list: Vec<Value>) -> Value {
    json!({"tool_calls": list})
}

/// A scripted reply with text only.
fn say(text: &str) -> Value {
    json!({"text": text})
}

/// A script of ordered replies.
fn script(replies: Vec<Value>) -> Value {
    json!({"replies": replies})
}

/// Checks the options of a permission request: exactly the four ids, each
/// with the same kind, each with a label.
fn check_options(request: &Value) {
    let options = request["params"]["options"]
        .as_array()
        .unwrap_or_else(|| panic!("no options: {request}"));
    let ids: Vec<&str> = options
        .iter()
        .map(|o| o["optionId"].as_str().unwrap_or_default())
        .collect();
    assert_eq!(ids, OPTIONS, "{request}");
    for option in options {
        assert_eq!(option["kind"], option["optionId"], "{request}");
        assert!(
            option["name"].as_str().is_some_and(|n| !n.is_empty()),
            "{request}"
        );
    }
}

/// Answers permission requests by tool call id from `table`; any other
/// request, or a permission request for another call, fails the test.
fn permissions(table: Vec<(&'static str, Answer)>) -> impl FnMut(&Value) -> Answer {
    move |request: &Value| {
        assert_eq!(
            request["method"], "session/request_permission",
            "unexpected request: {request}"
        );
        check_options(request);
        let id = request["params"]["toolCall"]["toolCallId"]
            .as_str()
            .unwrap_or_default();
        table
            .iter()
            .find(|(known, _)| *known == id)
            .map(|(_, answer)| answer.clone())
            .unwrap_or_else(|| panic!("unexpected permission request for {id}: {request}"))
    }
}

/// Answers every permission request with `option`.
fn always_answer(option: &'static str) -> impl FnMut(&Value) -> Answer {
    move |request: &Value| {
        assert_eq!(
            request["method"], "session/request_permission",
            "unexpected request: {request}"
        );
        check_options(request);
        Answer::select(option)
    }
}

/// The position of the first message matching `pred` in the turn.
fn position(turn: &Turn, pred: impl Fn(&Value) -> bool) -> usize {
    turn.messages
        .iter()
        .position(pred)
        .unwrap_or_else(|| panic!("no such message\n{}", turn.dump()))
}

/// The position of the `tool_call` announcement of `id`.
fn announced_at(turn: &Turn, id: &str) -> usize {
    position(turn, |m| {
        m["params"]["update"]["sessionUpdate"] == "tool_call"
            && m["params"]["update"]["toolCallId"] == id
    })
}

/// The position of the final update of `id`.
fn finished_at(turn: &Turn, id: &str) -> usize {
    position(turn, |m| {
        m["params"]["update"]["sessionUpdate"] == "tool_call_update"
            && m["params"]["update"]["toolCallId"] == id
            && (m["params"]["update"]["status"] == "completed"
                || m["params"]["update"]["status"] == "failed")
    })
}

/// The single diff block of the final update of `id`.
fn diff_of(turn: &Turn, id: &str) -> Value {
    let content = turn.final_content(id);
    assert_eq!(content.len(), 1, "{id}: {content:?}");
    assert_eq!(content[0]["type"], "diff", "{id}: {content:?}");
    content[0].clone()
}

/// Whether the agent's search can use ripgrep (11 or later, on the PATH,
/// not switched off with SPINDLE_SEARCH=builtin); it needs it for regular
/// expressions.
fn ripgrep_installed() -> bool {
    if std::env::var("SPINDLE_SEARCH").is_ok_and(|v| v == "builtin") {
        return false;
    }
    std::process::Command::new("rg")
        .arg("--version")
        .output()
        .is_ok_and(|out| out.status.success())
}

fn waits_until(timeout: Duration, mut condition: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + timeout;
    loop {
        if condition() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        thread::sleep(Duration::from_millis(20));
    }
}

/// The processes in process group `pgid` that are still running (not
/// zombies), as `(pid, state)`.
fn live_group_members(pgid: u32) -> Vec<(u32, String)> {
    let mut live = Vec::new();
    let Ok(entries) = fs::read_dir("/proc") else {
        return live;
    };
    for entry in entries.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        let Ok(stat) = fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        // "pid (comm) state ppid pgrp ...": comm may hold spaces and
        // parentheses, so split after the last ')'.
        let Some(close) = stat.rfind(')') else {
            continue;
        };
        let fields: Vec<&str> = stat[close + 1..].split_whitespace().collect();
        let (Some(state), Some(pgrp)) = (fields.first(), fields.get(2)) else {
            continue;
        };
        let comm = &stat[..close + 1];
        if (pgrp.parse::<u32>().ok() == Some(pgid) || pid == pgid) && *state != "Z" {
            live.push((pid, format!("{state} {comm}")));
        }
    }
    live
}

/// Reads a pid the shell wrote with `echo $$ > file`, once it is complete.
fn read_pid(path: &Path) -> Option<u32> {
    let text = fs::read_to_string(path).ok()?;
    if !text.ends_with('\n') {
        return None;
    }
    text.trim().parse().ok()
}

/// Fails unless the process group `pgid` is gone (or only zombies) within
/// two seconds.
fn assert_group_gone(pgid: u32) {
    let gone = waits_until(Duration::from_secs(2), || {
        live_group_members(pgid).is_empty()
    });
    assert!(
        gone,
        "the command's processes are still running: {:?}",
        live_group_members(pgid)
    );
}

// ---------------------------------------------------------------------------
// 1. Happy paths (--permissions yolo)
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

#[test]
fn run_command_reports_exit_code_output_cap_and_timeout() {
    let space = Space::new("tools-run");
    fs::create_dir_all(space.path("sub")).unwrap();
    let (mut agent, session) = space.start(
        &script(vec![
            calls(vec![
                call(
                    "c1",
                    "run_command",
                    json!({"command": "echo out; echo err >&2; exit 3"}),
                ),
                call("c2", "run_command", json!({"command": "pwd", "cwd": "sub"})),
                call(
                    "c3",
                    "run_command",
                    json!({"command": "head -c 100000 /dev/zero | tr '\\0' a"}),
                ),
                call(
                    "c4",
                    "run_command",
                    json!({"command": "echo $$ > c4.pid; sleep 30", "timeout_seconds": 1}),
                ),
                // Background jobs die with the command, whether or not they
                // keep its output pipe open.
                call(
                    "c5",
                    "run_command",
                    json!({"command": "sleep 60 >/dev/null 2>&1 & echo $! > c5.pid; echo started"}),
                ),
                call(
                    "c6",
                    "run_command",
                    json!({"command": "sleep 60 & echo $! > c6.pid; echo lingering"}),
                ),
            ]),
            say("Ran."),
        ]),
        &["--permissions", "yolo"],
        json!({}),
    );
    let started = Instant::now();
    let turn = run_prompt(&mut agent, &session, "run", WAIT, no_requests);
    assert_eq!(turn.stop_reason(), "end_turn", "{}", turn.dump());
    turn.assert_every_tool_call_finished();

    let announce = turn.tool_call("c1");
    assert_eq!(announce["title"], "Run echo out; echo err >&2; exit 3");
    assert_eq!(announce["kind"], "execute");
    assert_eq!(
        announce["rawInput"],
        json!({"command": "echo out; echo err >&2; exit 3"})
    );
    assert_eq!(turn.final_status("c1"), "failed");
    let text = turn.final_text("c1");
    assert!(text.contains("Exit code: 3"), "{text}");
    assert!(text.contains("out") && text.contains("err"), "{text}");

    assert_eq!(turn.final_status("c2"), "completed");
    let text = turn.final_text("c2");
    assert!(text.contains("Exit code: 0"), "{text}");
    assert!(text.contains(&space.abs("sub")), "{text}");

    assert_eq!(turn.final_status("c3"), "completed");
    let text = turn.final_text("c3");
    assert!(
        text.len() < 40_000,
        "output not capped: {} bytes",
        text.len()
    );
    let marker = "bytes of output omitted; full output in ";
    let at = text
        .find(marker)
        .unwrap_or_else(|| panic!("no truncation marker: {}", &text[..text.len().min(500)]));
    let rest = &text[at + marker.len()..];
    let log = &rest[..rest.find(']').expect("the marker ends with ]")];
    let full = fs::read(log).unwrap_or_else(|err| panic!("cannot read the log {log}: {err}"));
    assert_eq!(full.len(), 100_000, "{log}");
    assert!(full.iter().all(|&b| b == b'a'));

    assert_eq!(turn.final_status("c4"), "failed");
    let text = turn.final_text("c4");
    assert!(text.contains("Timed out after 1 s"), "{text}");
    assert_group_gone(read_pid(&space.path("c4.pid")).expect("c4.pid"));

    for id in ["c5", "c6"] {
        assert_eq!(turn.final_status(id), "completed", "{id}\n{}", turn.dump());
        let pid = read_pid(&space.path(&format!("{id}.pid"))).expect("pid file");
        assert_group_gone(pid);
    }
    assert!(turn.final_text("c6").contains("lingering"));
    assert!(started.elapsed() < Duration::from_secs(15));
}

#[test]
fn todo_write_becomes_a_plan_update() {
    let space = Space::new("tools-todo");
    let (mut agent, session) = space.start(
        &script(vec![
            calls(vec![call(
                "t1",
                "todo_write",
                json!({"todos": [
                    {"content": "Write the tests", "status": "completed", "priority": "high"},
                    {"content": "Run them", "status": "in_progress"},
                    {"content": "Report", "status": "pending", "priority": "low"}
                ]}),
            )]),
            say("Planned."),
        ]),
        &["--permissions", "yolo"],
        json!({}),
    );
    let turn = run_prompt(&mut agent, &session, "plan", WAIT, no_requests);
    assert_eq!(turn.stop_reason(), "end_turn", "{}", turn.dump());
    let plans = turn.plans();
    assert_eq!(plans.len(), 1, "{}", turn.dump());
    assert_eq!(
        *plans[0],
        json!([
            {"content": "Write the tests", "priority": "high", "status": "completed"},
            {"content": "Run them", "priority": "medium", "status": "in_progress"},
            {"content": "Report", "priority": "low", "status": "pending"}
        ])
    );
    let announce = turn.tool_call("t1");
    assert_eq!(announce["kind"], "think");
    assert_eq!(announce["title"], "Update plan");
    assert_eq!(turn.final_status("t1"), "completed");
    let plan_at = position(&turn, |m| m["params"]["update"]["sessionUpdate"] == "plan");
    assert!(plan_at < finished_at(&turn, "t1"));
    turn.assert_every_tool_call_finished();
}

// ---------------------------------------------------------------------------
// 2. Tool failures
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

#[test]
fn chat_completions_tool_errors_go_back_to_the_model() {
    let space = Space::new("tools-chat-errors");
    space.write("src/main.rs", "fn main() {}\n");
    let server = FakeServer::start();
    server.push(Reply::Sse(vec![
        chunk_role(),
        // One call streamed in pieces, as real servers do.
        chunk_tool_call(0, Some("call_x"), Some("read_file"), ""),
        chunk_tool_call(0, None, None, "{\"path\":\"src/"),
        chunk_tool_call(0, None, None, "main.rs\"}"),
        chunk_tool_call(1, Some("call_y"), Some("fly"), "{}"),
        chunk_tool_call(2, Some("call_z"), Some("read_file"), "{\"path\":"),
        chunk_finish("tool_calls"),
        chunk_usage(10, 5),
        done(),
    ]));
    server.push(Reply::Sse(chat_text(&["Handled."])));
    let (mut agent, session) = start_chat(&space, &server, &["--permissions", "yolo"]);
    let turn = run_prompt(&mut agent, &session, "go", WAIT, no_requests);
    assert_eq!(turn.stop_reason(), "end_turn", "{}", turn.dump());
    assert_eq!(turn.text(), "Handled.");
    turn.assert_every_tool_call_finished();
    assert_eq!(turn.tool_call_ids(), ["call_x", "call_y", "call_z"]);
    assert_eq!(
        turn.tool_call("call_x")["rawInput"],
        json!({"path": "src/main.rs"})
    );
    assert_eq!(turn.final_status("call_x"), "completed");
    assert_eq!(turn.final_status("call_y"), "failed");
    assert_eq!(turn.final_status("call_z"), "failed");

    let requests = server.wait_requests(2, WAIT);
    let messages = requests[1].body["messages"].as_array().unwrap().clone();
    let tool_messages: Vec<&Value> = messages.iter().filter(|m| m["role"] == "tool").collect();
    assert_eq!(tool_messages.len(), 3, "{messages:?}");
    assert_eq!(tool_messages[0]["tool_call_id"], "call_x");
    let read = tool_messages[0]["content"].as_str().unwrap();
    assert!(read.contains("     1\tfn main() {}"), "{read}");
    assert_eq!(tool_messages[1]["tool_call_id"], "call_y");
    let unknown = tool_messages[1]["content"].as_str().unwrap();
    assert!(unknown.contains("no tool named \"fly\""), "{unknown}");
    assert!(
        unknown.contains("read_file"),
        "names the real tools: {unknown}"
    );
    assert_eq!(tool_messages[2]["tool_call_id"], "call_z");
    let malformed = tool_messages[2]["content"].as_str().unwrap();
    assert!(malformed.contains("not valid JSON"), "{malformed}");
    // The malformed arguments go back exactly as the model sent them.
    let assistant = messages
        .iter()
        .find(|m| m["role"] == "assistant")
        .expect("no assistant message");
    assert_eq!(
        assistant["tool_calls"][2]["function"]["arguments"],
        "{\"path\":"
    );
    assert_eq!(
        assistant["tool_calls"][0]["function"]["arguments"],
        "{\"path\":\"src/main.rs\"}"
    );
}

// ---------------------------------------------------------------------------
// 3. Approval policies and permission answers
// ---------------------------------------------------------------------------

#[test]
fn ask_policy_is_the_default_and_asks_for_edits_writes_and_commands() {
    let space = Space::new("tools-ask");
    space.write("a.txt", "hello\n");
    let (mut agent, session) = space.start(
        &script(vec![
            calls(vec![
                call("p1", "read_file", json!({"path": "a.txt"})),
                call(
                    "p2",
                    "edit_file",
                    json!({"path": "a.txt", "edits": [{"old": "hello", "new": "bye"}]}),
                ),
                call("p3", "run_command", json!({"command": "echo hi > ran.txt"})),
                call(
                    "p4",
                    "write_file",
                    json!({"path": "new.txt", "content": "new\n"}),
                ),
                call("p5", "glob", json!({"pattern": "*.txt"})),
                call("p6", "search", json!({"pattern": "hello"})),
                call("p7", "list_directory", json!({})),
                call(
                    "p8",
                    "todo_write",
                    json!({"todos": [{"content": "x", "status": "pending"}]}),
                ),
                call("p9", "run_command", json!({"command": "ls"})),
            ]),
            say("Done."),
        ]),
        &[],
        json!({}),
    );
    let turn = run_prompt(
        &mut agent,
        &session,
        "go",
        WAIT,
        always_answer("allow_once"),
    );
    assert_eq!(turn.stop_reason(), "end_turn", "{}", turn.dump());
    turn.assert_every_tool_call_finished();
    assert_eq!(turn.permission_ids(), ["p2", "p3", "p4", "p9"]);
    for id in ["p1", "p2", "p3", "p4", "p5", "p6", "p7", "p8", "p9"] {
        assert_eq!(turn.final_status(id), "completed", "{id}\n{}", turn.dump());
    }
    assert_eq!(space.read("a.txt"), "bye\n");
    assert_eq!(space.read("ran.txt"), "hi\n");
    assert_eq!(space.read("new.txt"), "new\n");

    // The request describes the call and comes after its announcement.
    let request = turn.requests("session/request_permission")[0];
    assert_eq!(request["params"]["sessionId"], session);
    let tool_call = &request["params"]["toolCall"];
    assert_eq!(tool_call["title"], "Edit a.txt");
    assert_eq!(tool_call["kind"], "edit");
    let asked_at = position(&turn, |m| m["method"] == "session/request_permission");
    assert!(announced_at(&turn, "p2") < asked_at);
    assert!(asked_at < finished_at(&turn, "p2"));
    assert_eq!(turn.statuses("p2"), ["pending", "in_progress", "completed"]);
}

#[test]
fn auto_policy_runs_edits_and_read_only_commands_and_asks_for_others() {
    let space = Space::new("tools-auto");
    space.write("a.txt", "hello\n");
    let (mut agent, session) = space.start(
        &script(vec![
            calls(vec![
                call(
                    "e1",
                    "edit_file",
                    json!({"path": "a.txt", "edits": [{"old": "hello", "new": "bye"}]}),
                ),
                call(
                    "w1",
                    "write_file",
                    json!({"path": "dir/new.txt", "content": "new\n"}),
                ),
                call("c1", "run_command", json!({"command": "ls"})),
                call(
                    "c2",
                    "run_command",
                    json!({"command": "cat a.txt | head -1"}),
                ),
                call("c3", "run_command", json!({"command": "touch x"})),
                call("c4", "run_command", json!({"command": "echo hi > y"})),
            ]),
            say("Done."),
        ]),
        &["--permissions", "auto"],
        json!({}),
    );
    let turn = run_prompt(
        &mut agent,
        &session,
        "go",
        WAIT,
        always_answer("allow_once"),
    );
    assert_eq!(turn.stop_reason(), "end_turn", "{}", turn.dump());
    turn.assert_every_tool_call_finished();
    assert_eq!(turn.permission_ids(), ["c3", "c4"]);
    assert_eq!(space.read("a.txt"), "bye\n");
    assert_eq!(space.read("dir/new.txt"), "new\n");
    assert!(turn.final_text("c1").contains("a.txt"));
    assert!(turn.final_text("c2").contains("bye"));
    assert!(space.exists("x"));
    assert_eq!(space.read("y"), "hi\n");
}

#[test]
fn yolo_policy_never_asks() {
    let space = Space::new("tools-yolo");
    space.write("a.txt", "hello\n");
    fs::write(space.base.join("outside.txt"), "outside\n").unwrap();
    let outside = space.base.join("outside.txt").to_str().unwrap().to_string();
    let (mut agent, session) = space.start(
        &script(vec![
            calls(vec![
                call(
                    "e1",
                    "edit_file",
                    json!({"path": "a.txt", "edits": [{"old": "hello", "new": "bye"}]}),
                ),
                call("c1", "run_command", json!({"command": "touch x"})),
                call("r1", "read_file", json!({"path": outside})),
                call(
                    "w1",
                    "write_file",
                    json!({"path": "../yolo.txt", "content": "yolo\n"}),
                ),
                call(
                    "g1",
                    "write_file",
                    json!({"path": ".git/config", "content": "[core]\n"}),
                ),
            ]),
            say("Done."),
        ]),
        &["--permissions", "yolo"],
        json!({}),
    );
    let turn = run_prompt(&mut agent, &session, "go", WAIT, no_requests);
    assert_eq!(turn.stop_reason(), "end_turn", "{}", turn.dump());
    turn.assert_every_tool_call_finished();
    assert!(turn.all_requests().is_empty());
    for id in ["e1", "c1", "r1", "w1", "g1"] {
        assert_eq!(turn.final_status(id), "completed", "{id}\n{}", turn.dump());
    }
    assert!(turn.final_text("r1").contains("1\toutside"));
    assert_eq!(
        fs::read_to_string(space.base.join("yolo.txt")).unwrap(),
        "yolo\n"
    );
    assert_eq!(space.read(".git/config"), "[core]\n");
}

#[test]
fn reject_once_fails_the_call_and_is_not_remembered() {
    let space = Space::new("tools-reject-once");
    space.write("a.txt", "hello\n");
    let edit = json!({"path": "a.txt", "edits": [{"old": "hello", "new": "bye"}]});
    let (mut agent, session) = space.start(
        &script(vec![
            calls(vec![call("e1", "edit_file", edit.clone())]),
            say("Declined."),
            calls(vec![call("e2", "edit_file", edit.clone())]),
            say("Edited."),
        ]),
        &["--permissions", "ask"],
        json!({}),
    );
    let turn = run_prompt(
        &mut agent,
        &session,
        "first",
        WAIT,
        permissions(vec![("e1", Answer::select("reject_once"))]),
    );
    assert_eq!(turn.stop_reason(), "end_turn", "{}", turn.dump());
    assert_eq!(turn.text(), "Declined.");
    assert_eq!(turn.statuses("e1"), ["pending", "failed"]);
    assert!(
        turn.final_text("e1").contains("declined"),
        "{}",
        turn.dump()
    );
    assert_eq!(space.read("a.txt"), "hello\n");

    // Once means once: the same edit asks again.
    let turn = run_prompt(
        &mut agent,
        &session,
        "second",
        WAIT,
        permissions(vec![("e2", Answer::select("allow_once"))]),
    );
    assert_eq!(turn.stop_reason(), "end_turn", "{}", turn.dump());
    assert_eq!(turn.permission_ids(), ["e2"]);
    assert_eq!(turn.final_status("e2"), "completed");
    assert_eq!(space.read("a.txt"), "bye\n");
}

#[test]
fn allow_always_is_remembered_for_the_exact_command_and_cwd_and_the_file() {
    let space = Space::new("tools-allow-always");
    fs::create_dir_all(space.path("sub")).unwrap();
    space.write("a.txt", "a0\n");
    space.write("b.txt", "b0\n");
    let (mut agent, session) = space.start(
        &script(vec![
            calls(vec![
                call(
                    "c1",
                    "run_command",
                    json!({"command": "echo one >> log.txt"}),
                ),
                call(
                    "e1",
                    "edit_file",
                    json!({"path": "a.txt", "edits": [{"old": "a0", "new": "a1"}]}),
                ),
            ]),
            say("First."),
            calls(vec![
                call(
                    "c2",
                    "run_command",
                    json!({"command": "echo one >> log.txt"}),
                ),
                call(
                    "c3",
                    "run_command",
                    json!({"command": "echo one >> log.txt", "cwd": "."}),
                ),
                call(
                    "c4",
                    "run_command",
                    json!({"command": "echo one >> log.txt", "cwd": "sub"}),
                ),
                call(
                    "c5",
                    "run_command",
                    json!({"command": "echo two >> log.txt"}),
                ),
                call(
                    "e2",
                    "edit_file",
                    json!({"path": "a.txt", "edits": [{"old": "a1", "new": "a2"}]}),
                ),
                call(
                    "e3",
                    "edit_file",
                    json!({"path": "b.txt", "edits": [{"old": "b0", "new": "b1"}]}),
                ),
            ]),
            say("Second."),
        ]),
        &["--permissions", "ask"],
        json!({}),
    );
    let turn = run_prompt(
        &mut agent,
        &session,
        "first",
        WAIT,
        permissions(vec![
            ("c1", Answer::select("allow_always")),
            ("e1", Answer::select("allow_always")),
        ]),
    );
    assert_eq!(turn.stop_reason(), "end_turn", "{}", turn.dump());
    assert_eq!(turn.permission_ids(), ["c1", "e1"]);
    assert_eq!(turn.final_status("c1"), "completed");

    let turn = run_prompt(
        &mut agent,
        &session,
        "second",
        WAIT,
        permissions(vec![
            ("c4", Answer::select("allow_once")),
            ("c5", Answer::select("allow_once")),
            ("e3", Answer::select("allow_once")),
        ]),
    );
    assert_eq!(turn.stop_reason(), "end_turn", "{}", turn.dump());
    turn.assert_every_tool_call_finished();
    // The same command line in the same directory ran without asking; another
    // directory, another command and another file asked.
    assert_eq!(turn.permission_ids(), ["c4", "c5", "e3"]);
    for id in ["c2", "c3", "c4", "c5", "e2", "e3"] {
        assert_eq!(turn.final_status(id), "completed", "{id}\n{}", turn.dump());
    }
    assert_eq!(space.read("log.txt"), "one\none\none\ntwo\n");
    assert_eq!(space.read("sub/log.txt"), "one\n");
    assert_eq!(space.read("a.txt"), "a2\n");
    assert_eq!(space.read("b.txt"), "b1\n");
}

#[test]
fn reject_always_refuses_the_same_file_and_command_without_asking() {
    let space = Space::new("tools-reject-always");
    space.write("a.txt", "a0\n");
    space.write("b.txt", "b0\n");
    let edit_a = json!({"path": "a.txt", "edits": [{"old": "a0", "new": "a1"}]});
    let (mut agent, session) = space.start(
        &script(vec![
            calls(vec![
                call("e1", "edit_file", edit_a.clone()),
                call("c1", "run_command", json!({"command": "touch r"})),
            ]),
            say("First."),
            calls(vec![
                call("e2", "edit_file", edit_a.clone()),
                call(
                    "w2",
                    "write_file",
                    json!({"path": "a.txt", "content": "overwritten\n"}),
                ),
                call(
                    "e3",
                    "edit_file",
                    json!({"path": "b.txt", "edits": [{"old": "b0", "new": "b1"}]}),
                ),
                call("c2", "run_command", json!({"command": "touch r"})),
            ]),
            say("Second."),
        ]),
        &["--permissions", "ask"],
        json!({}),
    );
    let turn = run_prompt(
        &mut agent,
        &session,
        "first",
        WAIT,
        permissions(vec![
            ("e1", Answer::select("reject_always")),
            ("c1", Answer::select("reject_always")),
        ]),
    );
    assert_eq!(turn.stop_reason(), "end_turn", "{}", turn.dump());
    assert_eq!(turn.final_status("e1"), "failed");
    assert_eq!(turn.final_status("c1"), "failed");

    let turn = run_prompt(
        &mut agent,
        &session,
        "second",
        WAIT,
        permissions(vec![("e3", Answer::select("allow_once"))]),
    );
    assert_eq!(turn.stop_reason(), "end_turn", "{}", turn.dump());
    turn.assert_every_tool_call_finished();
    assert_eq!(turn.permission_ids(), ["e3"]);
    for id in ["e2", "w2", "c2"] {
        assert_eq!(
            turn.statuses(id),
            ["pending", "failed"],
            "{id}\n{}",
            turn.dump()
        );
        assert!(
            turn.final_text(id).contains("declined"),
            "{id}\n{}",
            turn.dump()
        );
    }
    assert_eq!(turn.final_status("e3"), "completed");
    assert_eq!(space.read("a.txt"), "a0\n");
    assert_eq!(space.read("b.txt"), "b1\n");
    assert!(!space.exists("r"));
}

#[test]
fn a_cancelled_permission_outcome_ends_the_turn_cancelled() {
    let space = Space::new("tools-perm-cancelled");
    space.write("a.txt", "hello\n");
    let (mut agent, session) = space.start(
        &script(vec![
            calls(vec![
                call("c1", "run_command", json!({"command": "touch z"})),
                call("r1", "read_file", json!({"path": "a.txt"})),
            ]),
            say("Still here."),
        ]),
        &["--permissions", "ask"],
        json!({}),
    );
    let turn = run_prompt(
        &mut agent,
        &session,
        "go",
        WAIT,
        permissions(vec![("c1", Answer::cancelled())]),
    );
    assert_eq!(turn.stop_reason(), "cancelled", "{}", turn.dump());
    turn.assert_every_tool_call_finished();
    assert_eq!(turn.final_status("c1"), "failed");
    assert!(
        !turn.tool_call_ids().contains(&"r1".to_string()),
        "a call after the cancel ran: {}",
        turn.dump()
    );
    assert!(!space.exists("z"));

    // The session goes on.
    let turn = run_prompt(&mut agent, &session, "again", WAIT, no_requests);
    assert_eq!(turn.stop_reason(), "end_turn", "{}", turn.dump());
    assert_eq!(turn.text(), "Still here.");
}

// ---------------------------------------------------------------------------
// 4. The workspace boundary
// ---------------------------------------------------------------------------

#[test]
fn paths_outside_the_workspace_and_git_internals_ask_in_auto() {
    let space = Space::new("tools-boundary");
    fs::write(space.base.join("outside.txt"), "outside text\n").unwrap();
    fs::create_dir_all(space.base.join("outdir")).unwrap();
    fs::write(space.base.join("outdir/secret.txt"), "secret text\n").unwrap();
    std::os::unix::fs::symlink(space.base.join("outdir"), space.path("link")).unwrap();
    std::os::unix::fs::symlink(space.base.join("outside.txt"), space.path("alias.txt")).unwrap();
    space.write(".git/config", "[core]\n");
    space.write("inside.txt", "inside\n");
    let absolute = space.base.join("outside.txt").to_str().unwrap().to_string();
    let outdir = space.base.join("outdir").to_str().unwrap().to_string();
    let (mut agent, session) = space.start(
        &script(vec![
            calls(vec![
                call("b1", "read_file", json!({"path": "../outside.txt"})),
                call("b2", "read_file", json!({"path": "link/secret.txt"})),
                call("b3", "read_file", json!({"path": absolute})),
                call("b4", "write_file", json!({"path": ".git/config", "content": "[evil]\n"})),
                call("b5", "write_file", json!({"path": "link/planted.txt", "content": "x\n"})),
                call("b6", "edit_file", json!({"path": "sub/../../outside.txt", "edits": [{"old": "outside", "new": "changed"}]})),
                call("b7", "edit_file", json!({"path": "alias.txt", "edits": [{"old": "outside", "new": "changed"}]})),
                call("b8", "list_directory", json!({"path": ".."})),
                call("b9", "search", json!({"pattern": "secret", "path": "link"})),
                call("b10", "glob", json!({"pattern": "*.txt", "path": outdir})),
                call("b11", "run_command", json!({"command": "ls", "cwd": ".."})),
                // Controls: inside the workspace nothing asks in auto.
                call("i1", "read_file", json!({"path": "inside.txt"})),
                call("i2", "write_file", json!({"path": "inside.txt", "content": "edited\n"})),
                call("i3", "run_command", json!({"command": "cat inside.txt"})),
            ]),
            say("Done."),
        ]),
        &["--permissions", "auto"],
        json!({}),
    );
    let turn = run_prompt(
        &mut agent,
        &session,
        "go",
        WAIT,
        permissions(vec![
            ("b1", Answer::select("allow_once")),
            ("b2", Answer::select("allow_once")),
            ("b3", Answer::select("allow_once")),
            ("b4", Answer::select("reject_once")),
            ("b5", Answer::select("reject_once")),
            ("b6", Answer::select("reject_once")),
            ("b7", Answer::select("reject_once")),
            ("b8", Answer::select("allow_once")),
            ("b9", Answer::select("allow_once")),
            ("b10", Answer::select("allow_once")),
            ("b11", Answer::select("reject_once")),
        ]),
    );
    assert_eq!(turn.stop_reason(), "end_turn", "{}", turn.dump());
    turn.assert_every_tool_call_finished();
    assert_eq!(
        turn.permission_ids(),
        ["b1", "b2", "b3", "b4", "b5", "b6", "b7", "b8", "b9", "b10", "b11"]
    );
    // `..` is resolved in what the editor is shown; a symlink stays as named.
    let outside = space.base.join("outside.txt").to_str().unwrap().to_string();
    assert_eq!(
        turn.tool_call("b1")["locations"],
        json!([{"path": outside}])
    );
    assert_eq!(
        turn.tool_call("b2")["locations"],
        json!([{"path": space.abs("link/secret.txt")}])
    );
    assert!(turn.final_text("b1").contains("1\toutside text"));
    assert!(turn.final_text("b2").contains("1\tsecret text"));
    assert!(turn.final_text("b3").contains("1\toutside text"));
    assert!(
        turn.final_text("b8").contains("outside.txt"),
        "{}",
        turn.dump()
    );
    assert!(
        turn.final_text("b9").contains("secret text"),
        "{}",
        turn.dump()
    );
    assert!(
        turn.final_text("b10").contains("secret.txt"),
        "{}",
        turn.dump()
    );
    for id in ["b4", "b5", "b6", "b7", "b11"] {
        assert_eq!(turn.final_status(id), "failed", "{id}");
    }
    for id in ["i1", "i2", "i3"] {
        assert_eq!(turn.final_status(id), "completed", "{id}");
    }
    assert_eq!(space.read(".git/config"), "[core]\n");
    assert!(!space.base.join("outdir/planted.txt").exists());
    assert_eq!(
        fs::read_to_string(space.base.join("outside.txt")).unwrap(),
        "outside text\n"
    );
    assert_eq!(space.read("inside.txt"), "edited\n");
}

#[test]
fn auto_policy_asks_for_commands_that_write_even_with_a_read_only_program() {
    // Each of these starts with a program the auto policy trusts as
    // read-only, but writes or deletes files.
    let space = Space::new("tools-auto-writers");
    space.write("in.txt", "a\na\n");
    space.write("other.txt", "b\n");
    space.write("victim.txt", "hello\n");
    let commands = [
        ("w1", "uniq in.txt out.txt"),
        ("w2", "find . -name in.txt -fprint0 found.txt"),
        (
            "w3",
            "git diff --no-index --output=diff.txt in.txt other.txt",
        ),
        ("w4", "rg --pre rm hello victim.txt"),
    ];
    let (mut agent, session) = space.start(
        &script(vec![
            calls(
                commands
                    .iter()
                    .map(|(id, command)| call(id, "run_command", json!({"command": command})))
                    .collect(),
            ),
            say("Done."),
        ]),
        &["--permissions", "auto"],
        json!({}),
    );
    let turn = run_prompt(
        &mut agent,
        &session,
        "go",
        WAIT,
        always_answer("reject_once"),
    );
    assert_eq!(turn.stop_reason(), "end_turn", "{}", turn.dump());
    turn.assert_every_tool_call_finished();
    let asked = turn.permission_ids();
    let unasked: Vec<&str> = commands
        .iter()
        .filter(|(id, _)| !asked.iter().any(|a| a == id))
        .map(|(_, command)| *command)
        .collect();
    assert!(
        unasked.is_empty(),
        "these commands ran in auto without asking, yet they write or delete files: {unasked:?}"
    );
    assert!(!space.exists("out.txt"));
    assert!(!space.exists("found.txt"));
    assert!(!space.exists("diff.txt"));
    assert!(space.exists("victim.txt"));
}

#[test]
fn auto_policy_asks_before_a_command_reads_outside_the_workspace() {
    let space = Space::new("tools-auto-outside-cmd");
    fs::write(space.base.join("outside.txt"), "outside text\n").unwrap();
    fs::create_dir_all(space.base.join("outdir")).unwrap();
    fs::write(space.base.join("outdir/secret.txt"), "secret text\n").unwrap();
    std::os::unix::fs::symlink(space.base.join("outdir"), space.path("link")).unwrap();
    let absolute = space.base.join("outside.txt").to_str().unwrap().to_string();
    let commands = [
        ("o1", "cat ../outside.txt".to_string()),
        ("o2", format!("cat {absolute}")),
        ("o3", "cat link/secret.txt".to_string()),
    ];
    let (mut agent, session) = space.start(
        &script(vec![
            calls(
                commands
                    .iter()
                    .map(|(id, command)| call(id, "run_command", json!({"command": command})))
                    .collect(),
            ),
            say("Done."),
        ]),
        &["--permissions", "auto"],
        json!({}),
    );
    let turn = run_prompt(
        &mut agent,
        &session,
        "go",
        WAIT,
        always_answer("reject_once"),
    );
    assert_eq!(turn.stop_reason(), "end_turn", "{}", turn.dump());
    turn.assert_every_tool_call_finished();
    let asked = turn.permission_ids();
    let unasked: Vec<&str> = commands
        .iter()
        .filter(|(id, _)| !asked.iter().any(|a| a == id))
        .map(|(_, command)| command.as_str())
        .collect();
    assert!(
        unasked.is_empty(),
        "these commands read outside the workspace without asking (read_file of the same \
         paths asks): {unasked:?}"
    );
    for (id, _) in &commands {
        let text = turn.final_text(id);
        assert!(
            !text.contains("outside text") && !text.contains("secret text"),
            "{id}: {text}"
        );
    }
}

#[test]
fn a_permission_request_answered_with_an_error_is_a_rejection() {
    let space = Space::new("tools-perm-error");
    space.write("a.txt", "hello\n");
    let (mut agent, session) = space.start(
        &script(vec![
            calls(vec![call(
                "e1",
                "edit_file",
                json!({"path": "a.txt", "edits": [{"old": "hello", "new": "bye"}]}),
            )]),
            say("Went on."),
        ]),
        &["--permissions", "ask"],
        json!({}),
    );
    let turn = run_prompt(
        &mut agent,
        &session,
        "go",
        WAIT,
        permissions(vec![("e1", Answer::error(-32603, "the dialog crashed"))]),
    );
    assert_eq!(turn.stop_reason(), "end_turn", "{}", turn.dump());
    assert_eq!(turn.text(), "Went on.");
    turn.assert_every_tool_call_finished();
    assert_eq!(turn.statuses("e1"), ["pending", "failed"]);
    assert_eq!(space.read("a.txt"), "hello\n");
}

// ---------------------------------------------------------------------------
// 5. The editor's files (fs/*)
// ---------------------------------------------------------------------------

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

// ---------------------------------------------------------------------------
// 6. The editor's terminals (terminal/*)
// ---------------------------------------------------------------------------

/// A fake terminal host: each command line maps to (exit code, output).
/// Records nothing itself; the turn keeps the requests.
fn terminals(results: Vec<(&'static str, i64, &'static str)>) -> impl FnMut(&Value) -> Answer {
    let mut created: HashMap<String, &'static str> = HashMap::new();
    let mut next = 0;
    move |request: &Value| {
        let params = &request["params"];
        let terminal = params["terminalId"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        match request["method"].as_str().unwrap_or_default() {
            "terminal/create" => {
                let line = params["args"][1].as_str().unwrap_or_default();
                let Some(&(line, _, _)) = results.iter().find(|(l, _, _)| *l == line) else {
                    return Answer::error(-32603, "cannot start a shell");
                };
                next += 1;
                let id = format!("term-{next}");
                created.insert(id.clone(), line);
                Answer::Result(json!({"terminalId": id}))
            }
            "terminal/wait_for_exit" => {
                let line = created[&terminal];
                let (_, code, _) = results.iter().find(|(l, _, _)| *l == line).unwrap();
                Answer::Result(json!({"exitCode": code, "signal": null}))
            }
            "terminal/output" => {
                let line = created[&terminal];
                let (_, code, output) = results.iter().find(|(l, _, _)| *l == line).unwrap();
                Answer::Result(json!({
                    "output": output,
                    "truncated": false,
                    "exitStatus": {"exitCode": code, "signal": null},
                }))
            }
            "terminal/release" | "terminal/kill" => Answer::Result(json!({})),
            _ => panic!("unexpected request: {request}"),
        }
    }
}

#[test]
fn run_command_uses_the_editors_terminal() {
    let space = Space::new("tools-term");
    fs::create_dir_all(space.path("sub")).unwrap();
    let (mut agent, session) = space.start(
        &script(vec![
            calls(vec![
                call(
                    "x1",
                    "run_command",
                    json!({"command": "touch ran-locally", "cwd": "sub"}),
                ),
                call("x2", "run_command", json!({"command": "make lint"})),
            ]),
            say("Done."),
        ]),
        &["--permissions", "yolo"],
        json!({"terminal": true}),
    );
    let turn = run_prompt(
        &mut agent,
        &session,
        "go",
        WAIT,
        terminals(vec![
            ("touch ran-locally", 0, "all good\n"),
            ("make lint", 2, "lint failed\n"),
        ]),
    );
    assert_eq!(turn.stop_reason(), "end_turn", "{}", turn.dump());
    turn.assert_every_tool_call_finished();
    assert!(
        !space.exists("sub/ran-locally"),
        "the command ran locally instead of in the editor's terminal"
    );

    let creates = turn.requests("terminal/create");
    assert_eq!(creates.len(), 2, "{}", turn.dump());
    let params = &creates[0]["params"];
    assert_eq!(params["sessionId"], session);
    assert_eq!(params["command"], "sh");
    assert_eq!(params["args"], json!(["-c", "touch ran-locally"]));
    assert_eq!(params["cwd"], space.abs("sub"));
    assert_eq!(params["outputByteLimit"], 30_000);
    assert_eq!(
        creates[1]["params"]["cwd"],
        json!(space.ws),
        "{}",
        turn.dump()
    );

    // Per terminal: create, wait, output, release; no kill.
    let methods: Vec<(String, String)> = turn
        .all_requests()
        .iter()
        .map(|r| {
            (
                r["method"].as_str().unwrap_or_default().to_string(),
                r["params"]["terminalId"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
            )
        })
        .collect();
    let expected: Vec<(String, String)> = [
        ("terminal/create", ""),
        ("terminal/wait_for_exit", "term-1"),
        ("terminal/output", "term-1"),
        ("terminal/release", "term-1"),
        ("terminal/create", ""),
        ("terminal/wait_for_exit", "term-2"),
        ("terminal/output", "term-2"),
        ("terminal/release", "term-2"),
    ]
    .iter()
    .map(|(m, t)| (m.to_string(), t.to_string()))
    .collect();
    assert_eq!(methods, expected, "{}", turn.dump());

    // The editor was told to show the terminal while the command ran, and
    // the final update keeps it.
    let shown = turn.updates_of("x1").iter().any(|u| {
        u["sessionUpdate"] == "tool_call_update"
            && u.get("status").is_none_or(|s| s == "in_progress")
            && u["content"]
                .as_array()
                .is_some_and(|c| c.contains(&json!({"type": "terminal", "terminalId": "term-1"})))
    });
    assert!(shown, "no terminal block before the end\n{}", turn.dump());
    assert_eq!(turn.final_status("x1"), "completed");
    assert!(turn
        .final_content("x1")
        .contains(&json!({"type": "terminal", "terminalId": "term-1"})));
    assert!(turn.final_text("x1").contains("Exit code: 0"));
    assert_eq!(turn.final_status("x2"), "failed");
    assert!(turn.final_text("x2").contains("Exit code: 2"));
}

#[test]
fn a_terminal_create_error_fails_the_call() {
    let space = Space::new("tools-term-error");
    let (mut agent, session) = space.start(
        &script(vec![
            calls(vec![
                call("x1", "run_command", json!({"command": "no such terminal"})),
                call("x2", "run_command", json!({"command": "echo fine"})),
            ]),
            say("Went on."),
        ]),
        &["--permissions", "yolo"],
        json!({"terminal": true}),
    );
    let turn = run_prompt(
        &mut agent,
        &session,
        "go",
        WAIT,
        terminals(vec![("echo fine", 0, "fine\n")]),
    );
    assert_eq!(turn.stop_reason(), "end_turn", "{}", turn.dump());
    assert_eq!(turn.text(), "Went on.");
    turn.assert_every_tool_call_finished();
    assert_eq!(turn.final_status("x1"), "failed");
    assert!(
        turn.final_text("x1").contains("cannot start a shell"),
        "{}",
        turn.dump()
    );
    assert_eq!(turn.final_status("x2"), "completed");
    // Only the terminal that exists is released.
    let released: Vec<&Value> = turn
        .requests("terminal/release")
        .iter()
        .map(|r| &r["params"]["terminalId"])
        .collect();
    assert_eq!(released, [&json!("term-1")]);
}

#[test]
fn cancel_while_an_editor_terminal_runs_kills_and_releases_it() {
    let space = Space::new("tools-term-cancel");
    let (mut agent, session) = space.start(
        &script(vec![calls(vec![
            call("x1", "run_command", json!({"command": "sleep 100"})),
            call("x2", "run_command", json!({"command": "echo after"})),
        ])]),
        &["--permissions", "yolo"],
        json!({"terminal": true}),
    );
    let mut answer = |request: &Value| match request["method"].as_str().unwrap_or_default() {
        "terminal/create" => Answer::Result(json!({"terminalId": "term-c"})),
        // The command never exits by itself.
        "terminal/wait_for_exit" => Answer::Ignore,
        "terminal/kill" | "terminal/release" => Answer::Result(json!({})),
        "terminal/output" => Answer::Result(json!({"output": "partial\n", "truncated": false})),
        _ => panic!("unexpected request: {request}"),
    };
    let mut exchange = Exchange::prompt(&mut agent, &session, "go");
    let waiting = exchange.until(&mut agent, WAIT, &mut answer, &mut |ex: &Exchange| {
        !ex.requests("terminal/wait_for_exit").is_empty()
    });
    assert!(waiting, "the prompt ended before waiting for the terminal");
    let cancelled_at = Instant::now();
    agent.notify("session/cancel", json!({"sessionId": session}));
    let turn = exchange.finish(&mut agent, WAIT, &mut answer);
    eprintln!("cancel answered after {:?}", cancelled_at.elapsed());
    assert_eq!(turn.stop_reason(), "cancelled", "{}", turn.dump());
    assert!(cancelled_at.elapsed() < Duration::from_secs(5));
    turn.assert_every_tool_call_finished();
    assert_eq!(turn.final_status("x1"), "failed");
    assert!(!turn.tool_call_ids().contains(&"x2".to_string()));
    let kill = position(&turn, |m| m["method"] == "terminal/kill");
    let release = position(&turn, |m| m["method"] == "terminal/release");
    assert!(kill < release, "{}", turn.dump());
    for method in ["terminal/kill", "terminal/release"] {
        let requests = turn.requests(method);
        assert_eq!(requests.len(), 1, "{method}\n{}", turn.dump());
        assert_eq!(requests[0]["params"]["terminalId"], "term-c");
    }
    // Nothing more after the answer.
    if let Some(late) = agent.recv(Duration::from_millis(300)) {
        panic!("a message after the cancelled answer: {late}");
    }
}

#[test]
fn a_terminal_created_after_a_cancel_is_still_released() {
    let space = Space::new("tools-term-late");
    let (mut agent, session) = space.start(
        &script(vec![calls(vec![call(
            "x1",
            "run_command",
            json!({"command": "sleep 100"}),
        )])]),
        &["--permissions", "yolo"],
        json!({"terminal": true}),
    );
    // The editor is slow to create the terminal: the user cancels first.
    let mut answer = |request: &Value| match request["method"].as_str().unwrap_or_default() {
        "terminal/create" => Answer::Ignore,
        "terminal/kill" | "terminal/release" => Answer::Result(json!({})),
        "terminal/output" => Answer::Result(json!({"output": "", "truncated": false})),
        "terminal/wait_for_exit" => Answer::Ignore,
        _ => panic!("unexpected request: {request}"),
    };
    let mut exchange = Exchange::prompt(&mut agent, &session, "go");
    let creating = exchange.until(&mut agent, WAIT, &mut answer, &mut |ex: &Exchange| {
        !ex.requests("terminal/create").is_empty()
    });
    assert!(creating, "the prompt ended before creating a terminal");
    let create_id = exchange.requests("terminal/create")[0]["id"].clone();
    agent.notify("session/cancel", json!({"sessionId": session}));
    // The editor's answer comes late: after the cancelled answer if the
    // agent gives that at once, or after half a second if the agent waits
    // for it. Either way the terminal exists now.
    let asked_at = Instant::now();
    exchange.until(&mut agent, WAIT, &mut answer, &mut |_: &Exchange| {
        asked_at.elapsed() > Duration::from_millis(500)
    });
    agent.send(json!({"jsonrpc": "2.0", "id": create_id, "result": {"terminalId": "term-late"}}));
    let turn = exchange.finish(&mut agent, WAIT, &mut answer);
    assert_eq!(turn.stop_reason(), "cancelled", "{}", turn.dump());
    turn.assert_every_tool_call_finished();

    // ACP: every terminal the agent created must be released, so the
    // editor can stop the command and free it.
    let is_release =
        |m: &Value| m["method"] == "terminal/release" && m["params"]["terminalId"] == "term-late";
    let mut released = turn.messages.iter().any(is_release);
    let deadline = Instant::now() + Duration::from_secs(3);
    while !released && Instant::now() < deadline {
        let Some(message) = agent.recv(Duration::from_millis(100)) else {
            continue;
        };
        if let Some(id) = message
            .get("id")
            .filter(|_| message.get("method").is_some())
        {
            agent.send(json!({"jsonrpc": "2.0", "id": id, "result": {}}));
        }
        released = is_release(&message);
    }
    assert!(
        released,
        "terminal term-late, created for the cancelled call, was never released\n{}",
        turn.dump()
    );
}

#[test]
fn a_terminal_that_outlives_its_timeout_is_killed_and_released() {
    let space = Space::new("tools-term-timeout");
    let (mut agent, session) = space.start(
        &script(vec![
            calls(vec![call(
                "x1",
                "run_command",
                json!({"command": "sleep 100", "timeout_seconds": 1}),
            )]),
            say("Timed out."),
        ]),
        &["--permissions", "yolo"],
        json!({"terminal": true}),
    );
    let started = Instant::now();
    let turn = run_prompt(
        &mut agent,
        &session,
        "go",
        WAIT,
        |request: &Value| match request["method"].as_str().unwrap_or_default() {
            "terminal/create" => Answer::Result(json!({"terminalId": "term-t"})),
            "terminal/wait_for_exit" => Answer::Ignore,
            "terminal/kill" | "terminal/release" => Answer::Result(json!({})),
            "terminal/output" => Answer::Result(json!({"output": "zzz\n", "truncated": false})),
            _ => panic!("unexpected request: {request}"),
        },
    );
    assert_eq!(turn.stop_reason(), "end_turn", "{}", turn.dump());
    assert!(started.elapsed() < Duration::from_secs(10));
    turn.assert_every_tool_call_finished();
    assert_eq!(turn.final_status("x1"), "failed");
    assert!(
        turn.final_text("x1").contains("Timed out after 1 s"),
        "{}",
        turn.dump()
    );
    let methods: Vec<&str> = turn
        .all_requests()
        .iter()
        .map(|r| r["method"].as_str().unwrap_or_default())
        .collect();
    assert_eq!(
        methods,
        [
            "terminal/create",
            "terminal/wait_for_exit",
            "terminal/kill",
            "terminal/output",
            "terminal/release"
        ]
    );
}

// ---------------------------------------------------------------------------
// 7. Cancel during a local command and during a permission request
// ---------------------------------------------------------------------------

#[test]
fn cancel_during_a_local_command_kills_it_and_ends_every_tool_call() {
    let space = Space::new("tools-cancel-cmd");
    let (mut agent, session) = space.start(
        &script(vec![
            calls(vec![
                call(
                    "c0",
                    "todo_write",
                    json!({"todos": [{"content": "wait", "status": "in_progress"}]}),
                ),
                call(
                    "c1",
                    "run_command",
                    json!({"command": "echo $$ > pidfile; sleep 60"}),
                ),
                call("c2", "read_file", json!({"path": "pidfile"})),
            ]),
            say("Back."),
        ]),
        &["--permissions", "yolo"],
        json!({}),
    );
    let pidfile = space.path("pidfile");
    let mut answer = no_requests;
    let mut exchange = Exchange::prompt(&mut agent, &session, "go");
    let started = exchange.until(&mut agent, WAIT, &mut answer, &mut |_: &Exchange| {
        read_pid(&pidfile).is_some()
    });
    assert!(started, "the prompt ended before the command started");
    let pid = read_pid(&pidfile).unwrap();
    let cancelled_at = Instant::now();
    agent.notify("session/cancel", json!({"sessionId": session}));
    let turn = exchange.finish(&mut agent, WAIT, &mut answer);
    let elapsed = cancelled_at.elapsed();
    eprintln!("cancel answered after {elapsed:?}");
    assert_eq!(turn.stop_reason(), "cancelled", "{}", turn.dump());
    assert!(elapsed < Duration::from_secs(3), "cancel took {elapsed:?}");
    assert_group_gone(pid);
    turn.assert_every_tool_call_finished();
    assert_eq!(turn.final_status("c0"), "completed");
    assert_eq!(turn.final_status("c1"), "failed");
    assert!(!turn.tool_call_ids().contains(&"c2".to_string()));

    // The session still works.
    let turn = run_prompt(&mut agent, &session, "again", WAIT, no_requests);
    assert_eq!(turn.stop_reason(), "end_turn", "{}", turn.dump());
    assert_eq!(turn.text(), "Back.");
}

#[test]
fn cancel_while_a_permission_request_is_pending_answers_promptly() {
    let space = Space::new("tools-cancel-perm");
    let (mut agent, session) = space.start(
        &script(vec![
            calls(vec![call(
                "c1",
                "run_command",
                json!({"command": "touch never"}),
            )]),
            say("Back."),
        ]),
        &["--permissions", "ask"],
        json!({}),
    );
    // The user never clicks.
    let mut answer = |request: &Value| {
        assert_eq!(request["method"], "session/request_permission", "{request}");
        Answer::Ignore
    };
    let mut exchange = Exchange::prompt(&mut agent, &session, "go");
    let asked = exchange.until(&mut agent, WAIT, &mut answer, &mut |ex: &Exchange| {
        !ex.requests("session/request_permission").is_empty()
    });
    assert!(asked, "the prompt ended without asking");
    let permission_id = exchange.requests("session/request_permission")[0]["id"].clone();
    let cancelled_at = Instant::now();
    agent.notify("session/cancel", json!({"sessionId": session}));
    let turn = exchange.finish(&mut agent, WAIT, &mut answer);
    let elapsed = cancelled_at.elapsed();
    eprintln!("cancel answered after {elapsed:?}");
    assert_eq!(turn.stop_reason(), "cancelled", "{}", turn.dump());
    assert!(elapsed < Duration::from_secs(2), "cancel took {elapsed:?}");
    turn.assert_every_tool_call_finished();
    assert_eq!(turn.final_status("c1"), "failed");
    assert!(!space.exists("never"));

    // A late answer to the abandoned request changes nothing.
    agent.send(json!({
        "jsonrpc": "2.0",
        "id": permission_id,
        "result": {"outcome": {"outcome": "selected", "optionId": "allow_once"}},
    }));
    let turn = run_prompt(&mut agent, &session, "again", WAIT, no_requests);
    assert_eq!(turn.stop_reason(), "end_turn", "{}", turn.dump());
    assert_eq!(turn.text(), "Back.");
    assert!(!space.exists("never"));
}

// ---------------------------------------------------------------------------
// 8. The step limit
// ---------------------------------------------------------------------------

#[test]
fn a_model_that_keeps_calling_tools_stops_at_max_steps() {
    let space = Space::new("tools-max-steps");
    space.write("a.txt", "again\n");
    let looping = json!({
        "fallback": {
            "text": "Once more.",
            "tool_calls": [{"name": "read_file", "arguments": {"path": "a.txt"}}]
        }
    });
    let (mut agent, session) = space.start(
        &looping,
        &["--permissions", "yolo", "--max-steps", "2"],
        json!({}),
    );
    let turn = run_prompt(&mut agent, &session, "loop", WAIT, no_requests);
    assert_eq!(turn.stop_reason(), "max_turn_requests", "{}", turn.dump());
    turn.assert_every_tool_call_finished();
    let ids = turn.tool_call_ids();
    assert_eq!(
        ids.len(),
        2,
        "two model calls, each with one tool call\n{}",
        turn.dump()
    );
    assert_ne!(ids[0], ids[1], "tool call ids must be unique");
    assert_eq!(turn.text(), "Once more.Once more.");
}

// ---------------------------------------------------------------------------
// 9. Chat Completions tool calls end to end
// ---------------------------------------------------------------------------

#[test]
fn chat_completions_parallel_tool_calls_run_in_order_and_go_back() {
    let space = Space::new("tools-chat");
    let server = FakeServer::start();
    let write_args = json!({"path": "notes/todo.txt", "content": "first\n"});
    let read_args = json!({"path": "notes/todo.txt"});
    server.push(Reply::Sse(chat_tool_calls(&[
        ("write_file", write_args.clone()),
        ("read_file", read_args.clone()),
    ])));
    server.push(Reply::Sse(chat_text(&["All ", "done."])));
    let (mut agent, session) = start_chat(&space, &server, &["--permissions", "yolo"]);
    let turn = run_prompt(&mut agent, &session, "Write and read", WAIT, no_requests);
    assert_eq!(turn.stop_reason(), "end_turn", "{}", turn.dump());
    assert_eq!(turn.text(), "All done.");
    turn.assert_every_tool_call_finished();
    assert_eq!(turn.tool_call_ids(), ["call_1", "call_2"]);
    // In order: the write ended before the read began, and the read saw it.
    assert!(finished_at(&turn, "call_1") < announced_at(&turn, "call_2"));
    assert_eq!(turn.final_status("call_1"), "completed");
    assert_eq!(turn.final_status("call_2"), "completed");
    assert!(turn.final_text("call_2").contains("     1\tfirst"));
    assert_eq!(space.read("notes/todo.txt"), "first\n");

    let requests = server.wait_requests(2, WAIT);
    let names: Vec<&str> = requests[0].body["tools"]
        .as_array()
        .expect("the first request offers tools")
        .iter()
        .filter_map(|t| t["function"]["name"].as_str())
        .collect();
    for name in [
        "read_file",
        "write_file",
        "edit_file",
        "run_command",
        "todo_write",
    ] {
        assert!(names.contains(&name), "{name} not offered: {names:?}");
    }
    let messages = requests[1].body["messages"].as_array().unwrap();
    assert_eq!(messages.len(), 5, "{messages:?}");
    assert_eq!(messages[0]["role"], "system");
    assert_eq!(
        messages[1],
        json!({"role": "user", "content": "Write and read"})
    );
    let assistant = &messages[2];
    assert_eq!(assistant["role"], "assistant");
    let calls = assistant["tool_calls"].as_array().expect("tool_calls");
    assert_eq!(calls.len(), 2, "{assistant}");
    for (call, (id, name, args)) in calls.iter().zip([
        ("call_1", "write_file", &write_args),
        ("call_2", "read_file", &read_args),
    ]) {
        assert_eq!(call["id"], id);
        assert_eq!(call["type"], "function");
        assert_eq!(call["function"]["name"], name);
        let sent = call["function"]["arguments"]
            .as_str()
            .expect("arguments go back as a string");
        assert_eq!(&serde_json::from_str::<Value>(sent).unwrap(), args);
    }
    assert_eq!(messages[3]["role"], "tool");
    assert_eq!(messages[3]["tool_call_id"], "call_1");
    assert!(messages[3]["content"]
        .as_str()
        .unwrap()
        .contains("notes/todo.txt"));
    assert_eq!(messages[4]["role"], "tool");
    assert_eq!(messages[4]["tool_call_id"], "call_2");
    assert!(messages[4]["content"]
        .as_str()
        .unwrap()
        .contains("     1\tfirst"));
}

// ---------------------------------------------------------------------------
// 10. EOF during a long command
// ---------------------------------------------------------------------------

#[test]
fn eof_during_a_long_command_kills_it_and_exits_zero() {
    let space = Space::new("tools-eof");
    let (mut agent, session) = space.start(
        &script(vec![calls(vec![call(
            "c1",
            "run_command",
            json!({"command": "echo $$ > pidfile; sleep 60"}),
        )])]),
        &["--permissions", "yolo"],
        json!({}),
    );
    let pidfile = space.path("pidfile");
    let mut answer = no_requests;
    let mut exchange = Exchange::prompt(&mut agent, &session, "go");
    let started = exchange.until(&mut agent, WAIT, &mut answer, &mut |_: &Exchange| {
        read_pid(&pidfile).is_some()
    });
    assert!(started, "the prompt ended before the command started");
    let pid = read_pid(&pidfile).unwrap();
    let closed_at = Instant::now();
    agent.close_stdin();
    let status = agent
        .wait_exit(Duration::from_secs(5))
        .expect("the agent did not exit after EOF");
    eprintln!("exited {:?} after stdin closed", closed_at.elapsed());
    assert!(status.success(), "{status:?}");
    assert!(closed_at.elapsed() < Duration::from_secs(3));
    assert_group_gone(pid);

    // What the agent wrote before exiting: the prompt's cancelled answer
    // and a final status for the command.
    let received = agent.received().to_vec();
    let answer = received
        .iter()
        .find(|m| m.get("id") == Some(&exchange.id) && m.get("method").is_none())
        .cloned()
        .expect("the running prompt was not answered");
    assert_eq!(answer["result"]["stopReason"], "cancelled");
    let turn = Turn {
        response: answer,
        messages: received
            .into_iter()
            .filter(|m| m["method"] == "session/update")
            .collect(),
    };
    turn.assert_every_tool_call_finished();
    assert_eq!(turn.final_status("c1"), "failed");
}

/// Closes stdin while a permission request waits for an answer that can
/// never come, and checks that the agent still exits 0 promptly, with the
/// prompt answered and the tool call ended.
fn eof_while_asking(extra: &[&str]) {
    let space = Space::new("tools-eof-ask");
    let mut args = vec!["--permissions", "ask"];
    args.extend_from_slice(extra);
    let (mut agent, session) = space.start(
        &script(vec![
            calls(vec![call(
                "c1",
                "run_command",
                json!({"command": "touch never"}),
            )]),
            say("Done."),
        ]),
        &args,
        json!({}),
    );
    let mut answer = |request: &Value| {
        assert_eq!(request["method"], "session/request_permission", "{request}");
        Answer::Ignore
    };
    let mut exchange = Exchange::prompt(&mut agent, &session, "go");
    let asked = exchange.until(&mut agent, WAIT, &mut answer, &mut |ex: &Exchange| {
        !ex.requests("session/request_permission").is_empty()
    });
    assert!(asked, "the prompt ended without asking");
    let closed_at = Instant::now();
    agent.close_stdin();
    let status = agent.wait_exit(Duration::from_secs(5));
    let status = status.unwrap_or_else(|| {
        panic!(
            "the agent did not exit within 5 s of EOF while a permission request was \
             pending (args {args:?}); it was killed"
        )
    });
    eprintln!("exited {:?} after stdin closed", closed_at.elapsed());
    assert!(status.success(), "{status:?}");
    let received = agent.received().to_vec();
    let answer = received
        .iter()
        .find(|m| m.get("id") == Some(&exchange.id) && m.get("method").is_none())
        .cloned()
        .expect("the running prompt was not answered");
    assert_eq!(answer["result"]["stopReason"], "cancelled", "{answer}");
    let turn = Turn {
        response: answer,
        messages: received
            .into_iter()
            .filter(|m| m["method"] == "session/update")
            .collect(),
    };
    turn.assert_every_tool_call_finished();
    assert_eq!(turn.final_status("c1"), "failed");
    assert!(!space.exists("never"));
}

#[test]
fn eof_while_a_permission_request_is_pending_exits_zero() {
    eof_while_asking(&[]);
}

#[test]
fn eof_with_drain_while_a_permission_request_is_pending_still_exits() {
    // Nobody can answer after EOF, so draining cannot wait for the answer.
    eof_while_asking(&["--drain"]);
}

// ---------------------------------------------------------------------------
// Chat Completions: what the model hears about declined and cancelled calls
// ---------------------------------------------------------------------------

/// Starts the agent against `server` with `args` after `acp`.
fn start_chat(space: &Space, server: &FakeServer, args: &[&str]) -> (Agent, String) {
    let base = server.base_url();
    let tmp = space.tmpdir();
    let mut all = vec!["acp", "--model", "test-model"];
    all.extend_from_slice(args);
    let mut agent = Agent::spawn(
        &all,
        &[
            ("OPENAI_BASE_URL", base.as_str()),
            ("OPENAI_API_KEY", "sk-test"),
            ("TMPDIR", tmp.as_str()),
        ],
    );
    initialize(&mut agent, json!({}));
    let session = agent.new_session(&space.ws);
    (agent, session)
}

#[test]
fn chat_completions_a_declined_call_tells_the_model() {
    let space = Space::new("tools-chat-declined");
    let server = FakeServer::start();
    server.push(Reply::Sse(chat_tool_calls(&[(
        "run_command",
        json!({"command": "touch nope"}),
    )])));
    server.push(Reply::Sse(chat_text(&["Understood."])));
    let (mut agent, session) = start_chat(&space, &server, &["--permissions", "ask"]);
    let turn = run_prompt(
        &mut agent,
        &session,
        "go",
        WAIT,
        permissions(vec![("call_1", Answer::select("reject_once"))]),
    );
    assert_eq!(turn.stop_reason(), "end_turn", "{}", turn.dump());
    assert_eq!(turn.final_status("call_1"), "failed");
    assert!(!space.exists("nope"));
    let requests = server.wait_requests(2, WAIT);
    let messages = requests[1].body["messages"].as_array().unwrap();
    let tool = messages
        .iter()
        .find(|m| m["role"] == "tool")
        .expect("no tool message");
    assert_eq!(tool["tool_call_id"], "call_1");
    let content = tool["content"].as_str().unwrap();
    assert!(content.contains("declined"), "{content}");
}

#[test]
fn chat_completions_every_call_of_a_cancelled_turn_is_answered_next_time() {
    let space = Space::new("tools-chat-cancel");
    let server = FakeServer::start();
    server.push(Reply::Sse(chat_tool_calls(&[
        (
            "run_command",
            json!({"command": "echo $$ > pidfile; sleep 60"}),
        ),
        ("read_file", json!({"path": "pidfile"})),
    ])));
    server.push(Reply::Sse(chat_text(&["Fine."])));
    let (mut agent, session) = start_chat(&space, &server, &["--permissions", "yolo"]);
    let pidfile = space.path("pidfile");
    let mut answer = no_requests;
    let mut exchange = Exchange::prompt(&mut agent, &session, "go");
    let started = exchange.until(&mut agent, WAIT, &mut answer, &mut |_: &Exchange| {
        read_pid(&pidfile).is_some()
    });
    assert!(started, "the prompt ended before the command started");
    let pid = read_pid(&pidfile).unwrap();
    agent.notify("session/cancel", json!({"sessionId": session}));
    let turn = exchange.finish(&mut agent, WAIT, &mut answer);
    assert_eq!(turn.stop_reason(), "cancelled", "{}", turn.dump());
    turn.assert_every_tool_call_finished();
    assert_group_gone(pid);

    let turn = run_prompt(&mut agent, &session, "again", WAIT, no_requests);
    assert_eq!(turn.stop_reason(), "end_turn", "{}", turn.dump());
    let requests = server.wait_requests(2, WAIT);
    let messages = requests[1].body["messages"].as_array().unwrap();
    let roles: Vec<&str> = messages
        .iter()
        .map(|m| m["role"].as_str().unwrap_or_default())
        .collect();
    assert_eq!(
        roles,
        ["system", "user", "assistant", "tool", "tool", "user"],
        "{messages:?}"
    );
    let ids: Vec<&Value> = messages[2]["tool_calls"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| &c["id"])
        .collect();
    assert_eq!(ids, [&json!("call_1"), &json!("call_2")]);
    assert_eq!(messages[3]["tool_call_id"], "call_1");
    assert!(messages[3]["content"]
        .as_str()
        .unwrap()
        .contains("Cancelled"));
    assert_eq!(messages[4]["tool_call_id"], "call_2");
    assert!(messages[4]["content"].as_str().unwrap().contains("Not run"));
    assert_eq!(messages[5]["content"], "again");
}

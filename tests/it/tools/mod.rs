//! Tool calls through the real binary: every tool's happy path and
//! failures, the approval policies and permission answers, the workspace
//! boundary, the editor's files and terminals, cancellation and EOF in the
//! middle of a tool, the per-turn step limit, and tool calls streamed by a
//! Chat Completions server.
//!
//! Most tests play a scripted model (`--script`, docs/scripted-provider.md):
//! its ordered replies are consumed one per model call, so a scenario is
//! "reply 1 makes tool calls, reply 2 answers their results". Each test has
//! its own canonical temporary workspace. The agent runs in process
//! (`support::in_process`) unless the test is about its process (what dies
//! with it, signals, the guard, its memory, its `TMPDIR`): then it is a
//! process of its own whose `TMPDIR` is inside the test's directory.
//!
//! This file holds the helpers the tests share; the tests themselves live
//! in the submodules, one per area.

mod approvals;
mod bounds;
mod cancel;
mod chat;
mod checkpoints;
mod commands;
mod editor_files;
mod editor_terminals;
mod fetch;
mod files;
mod forgiving;
mod line_endings;
mod patching;
mod plan_and_steps;
mod policy;
mod protected;
mod questions;
mod roots;
mod rules;
mod subagent_sessions;
mod subagents;
// The test client's terminals are Unix process groups.
#[cfg(unix)]
mod terminal_jobs;
// Commands, trees and paths on Windows (under Wine in CI).
#[cfg(windows)]
mod windows;
mod workspace;

use crate::support::prelude::WAIT;
use crate::support::{temp_dir, write_file, Agent, Answer, Turn};
use serde_json::{json, Value};
use std::fs;
use std::path::{Path, PathBuf};
use std::thread;
use std::time::{Duration, Instant};

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
        let base =
            spindle::os::canonical(temp_dir(name)).expect("cannot canonicalize the temp dir");
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

    /// Writes `script` to the space's script file; returns its path.
    fn script_file(&self, script: &Value) -> String {
        let script_path = self.base.join("script.json");
        fs::write(&script_path, serde_json::to_string_pretty(script).unwrap())
            .expect("cannot write the script");
        script_path.to_str().expect("UTF-8 path").to_string()
    }

    /// `spindle acp --script <script> <args>`, in process
    /// (`support::in_process`): its commands' `TMPDIR` is the test
    /// process's, and no `spindle guard` stands between it and them.
    fn spawn(&self, script: &Value, args: &[&str]) -> Agent {
        let script_path = self.script_file(script);
        let mut all = vec!["--script", script_path.as_str()];
        all.extend_from_slice(args);
        crate::support::in_process::acp(&all)
    }

    /// `spindle acp --script <script> <args>` as a process of its own,
    /// with more environment for it (and its `TMPDIR` in this space).
    fn spawn_with_env(&self, script: &Value, args: &[&str], env: &[(&str, &str)]) -> Agent {
        let script_path = self.script_file(script);
        let mut all = vec!["acp", "--script", script_path.as_str()];
        all.extend_from_slice(args);
        let tmp = self.tmpdir();
        let mut all_env = vec![("TMPDIR", tmp.as_str())];
        all_env.extend_from_slice(env);
        Agent::spawn(&all, &all_env)
    }

    /// Starts the agent (`spawn`: in process), initializes it with
    /// `capabilities` and opens a session in the workspace.
    fn start(&self, script: &Value, args: &[&str], capabilities: Value) -> (Agent, String) {
        let agent = self.spawn(script, args);
        self.open(agent, capabilities)
    }

    /// `start` for a test about the agent's process (a signal, a kill,
    /// what dies with it): a process of its own.
    fn start_process(&self, script: &Value, args: &[&str], capabilities: Value) -> (Agent, String) {
        let agent = self.spawn_with_env(script, args, &[]);
        self.open(agent, capabilities)
    }

    /// Initializes `agent` with `capabilities` and opens a session in the
    /// workspace.
    fn open(&self, mut agent: Agent, capabilities: Value) -> (Agent, String) {
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
    // The four answers always, in order; broader "always" answers (a
    // command prefix or all edits, for the session or the project) may
    // come between them.
    let ids: Vec<&str> = options
        .iter()
        .map(|o| o["optionId"].as_str().unwrap_or_default())
        .filter(|id| !BROADER.contains(id))
        .collect();
    assert_eq!(ids, OPTIONS, "{request}");
    for option in options {
        let id = option["optionId"].as_str().unwrap_or_default();
        let kind = if BROADER.contains(&id) {
            json!("allow_always")
        } else {
            option["optionId"].clone()
        };
        assert_eq!(option["kind"], kind, "{request}");
        assert!(
            option["name"].as_str().is_some_and(|n| !n.is_empty()),
            "{request}"
        );
    }
}

/// The broader "always allow" answers.
const BROADER: [&str; 2] = ["allow_rule", "allow_project"];

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

/// The process group of a live process.
fn group_of(pid: u32) -> Option<u32> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let close = stat.rfind(')')?;
    stat[close + 1..].split_whitespace().nth(2)?.parse().ok()
}

/// Fails unless the process `pid` (a command's shell) and its whole
/// process group (the guard's, which the shell is in) are gone (or only
/// zombies) within two seconds.
fn assert_group_gone(pid: u32) {
    let group = group_of(pid).unwrap_or(pid);
    let live = || {
        let mut live = live_group_members(pid);
        live.extend(live_group_members(group));
        live
    };
    let gone = waits_until(Duration::from_secs(2), || live().is_empty());
    assert!(
        gone,
        "the command's processes are still running: {:?}",
        live()
    );
}

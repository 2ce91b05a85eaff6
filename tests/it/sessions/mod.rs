//! Durable sessions through the real binary: the SQLite store shared by
//! processes (`--db`), replay on `session/load`, `session/resume`, list
//! with pagination, close and delete, titles, leases between processes,
//! crash recovery after `kill -9`, databases from a newer Spindle, and the
//! `spindle sessions` command.
//!
//! Every agent gets `--db` pointing into the test's own directory (two
//! agents share a database only when given the same path), `--permissions
//! yolo` (nobody answers permission requests here), and a `TMPDIR` inside
//! the test's directory. The database is inspected directly with rusqlite
//! (`support::store::Db`).
//!
//! This file holds the helpers the tests share; the tests themselves live
//! in the submodules, one per area.

mod cli;
mod context;
mod crash;
mod database;
mod extensions;
mod fork;
mod goals;
mod helper_answers;
mod jobs;
mod lifecycle;
mod list;
mod loops;
mod opt_in;
mod order;
mod processes;
mod replay;
mod rewind;
mod system_prompt;
mod titles;
mod waiting;

use crate::support::fake_openai::{
    chunk_content, chunk_finish, chunk_role, chunk_tool_call, chunk_usage, done,
};
use crate::support::prelude::{call, err, ok, WAIT};
use crate::support::store::{merge_chunks, session_updates, Db};
use crate::support::{in_process, temp_dir, Agent, FakeServer, Reply, Step};
use serde_json::{json, Value};
use std::collections::{HashMap, HashSet};
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::thread;
use std::time::{Duration, Instant};

/// -32002, "resource not found" (an unknown session id).
const NOT_FOUND: i64 = -32002;

const INVALID_REQUEST: i64 = -32600;

const INVALID_PARAMS: i64 = -32602;

/// A test's directory: `ws/` is the workspace (canonical, since /tmp may
/// be a symlink), `db/spindle.db` the shared database, `tmp/` the spawned
/// agents' `TMPDIR`. Removed when the test passes.
struct Space {
    base: PathBuf,
    ws: PathBuf,
    db: Db,
    /// The agents of `scripted`, `openai` and `reader` are processes of
    /// their own (`Space::processes`), else they run in process.
    processes: bool,
}

impl Space {
    /// A space whose agents run in process (`support::in_process`).
    fn new(name: &str) -> Space {
        Space::make(name, false)
    }

    /// A space whose agents are processes of their own: for a test of a
    /// crash (`kill -9`), of several processes sharing the database (their
    /// leases name a process), or of the agent's stderr.
    fn processes(name: &str) -> Space {
        Space::make(name, true)
    }

    fn make(name: &str, processes: bool) -> Space {
        let base =
            spindle::os::canonical(temp_dir(name)).expect("cannot canonicalize the temp dir");
        let ws = base.join("ws");
        fs::create_dir_all(&ws).expect("cannot create the workspace");
        fs::create_dir_all(base.join("tmp")).expect("cannot create the agents' TMPDIR");
        let db = Db::new(base.join("db").join("spindle.db"));
        Space {
            base,
            ws,
            db,
            processes,
        }
    }

    /// Another workspace next to `ws`.
    fn workspace(&self, name: &str) -> PathBuf {
        let path = self.base.join(name);
        fs::create_dir_all(&path).expect("cannot create a workspace");
        path
    }

    fn ws(&self) -> &str {
        self.ws.to_str().expect("UTF-8 path")
    }

    fn tmpdir(&self) -> String {
        self.base
            .join("tmp")
            .to_str()
            .expect("UTF-8 path")
            .to_string()
    }

    /// Writes a script to a fresh file and returns its path.
    fn script(&self, script: &Value) -> String {
        static COUNTER: AtomicUsize = AtomicUsize::new(0);
        let path = self.base.join(format!(
            "script-{}.json",
            COUNTER.fetch_add(1, Ordering::SeqCst)
        ));
        fs::write(&path, serde_json::to_string_pretty(script).unwrap())
            .expect("cannot write the script");
        path.to_str().expect("UTF-8 path").to_string()
    }

    /// `spindle acp --script … --db <db> --permissions yolo`, initialized.
    fn scripted(&self, script: &Value) -> Agent {
        self.scripted_on(&self.db, script)
    }

    /// Like `scripted`, on another database.
    fn scripted_on(&self, db: &Db, script: &Value) -> Agent {
        let mut agent = match self.processes {
            true => self.spawn_scripted(db, script),
            false => self.in_process_scripted(db, script),
        };
        agent.initialize();
        agent
    }

    /// The agent of `scripted_on`, in process (`support::in_process`),
    /// not initialized: its `TMPDIR` is the test process's.
    fn in_process_scripted(&self, db: &Db, script: &Value) -> Agent {
        let script = self.script(script);
        let db = db.arg();
        in_process::acp(&["--script", &script, "--db", &db, "--permissions", "yolo"])
    }

    /// The agent of `scripted_on` as a process of its own, not
    /// initialized.
    fn spawn_scripted(&self, db: &Db, script: &Value) -> Agent {
        let script = self.script(script);
        let db = db.arg();
        let tmp = self.tmpdir();
        Agent::spawn(
            &[
                "acp",
                "--script",
                &script,
                "--db",
                &db,
                "--permissions",
                "yolo",
            ],
            &[("TMPDIR", &tmp)],
        )
    }

    /// A scripted agent that is only used to list, load and inspect.
    fn reader(&self) -> Agent {
        self.scripted(&json!({"replies": []}))
    }

    /// `reader`, in process (`support::in_process`), initialized: for the
    /// dispatcher's answers, which need no environment of their own.
    fn reader_in_process(&self) -> Agent {
        let script = self.script(&json!({"replies": []}));
        let db = self.db.path().to_path_buf();
        let mut agent = in_process::with_options(|options| {
            options.script = Some(script.into());
            options.db = Some(db);
            options.permissions = Some(spindle::modes::Policy::Yolo);
        });
        agent.initialize();
        agent
    }

    /// `spindle acp --model test-model --db <db> --permissions yolo`
    /// against the fake server, initialized.
    fn openai(&self, server: &FakeServer) -> Agent {
        self.openai_on(&self.db, server)
    }

    fn openai_on(&self, db: &Db, server: &FakeServer) -> Agent {
        let mut agent = self.openai_agent(db, server);
        agent.initialize();
        agent
    }

    /// Like `openai`, for a client that asks for `_spindle/event`s.
    fn openai_with_events(&self, server: &FakeServer) -> Agent {
        let mut agent = self.openai_agent(&self.db, server);
        agent.initialize_with_events();
        agent
    }

    /// The agent of `openai_on`, not initialized.
    fn openai_agent(&self, db: &Db, server: &FakeServer) -> Agent {
        match self.processes {
            true => self.spawn_openai(db, server),
            false => self.in_process_openai(db, server, &[]),
        }
    }

    /// The agent of `openai_on` with `more` arguments, in process
    /// (`support::in_process`), not initialized: the fake server is the
    /// config's `openai` provider instead of the environment's.
    fn in_process_openai(&self, db: &Db, server: &FakeServer, more: &[&str]) -> Agent {
        let config = in_process::openai_config(&self.base, &server.base_url(), "sk-test");
        let config = config.to_str().expect("UTF-8 path");
        let db = db.arg();
        let mut args = vec![
            "--model",
            "test-model",
            "--db",
            &db,
            "--permissions",
            "yolo",
            "--config",
            config,
        ];
        args.extend_from_slice(more);
        in_process::acp(&args)
    }

    fn spawn_openai(&self, db: &Db, server: &FakeServer) -> Agent {
        self.spawn_openai_with(db, server, &[])
    }

    /// `spawn_openai` with more arguments.
    fn spawn_openai_with(&self, db: &Db, server: &FakeServer, more: &[&str]) -> Agent {
        let base = server.base_url();
        let db = db.arg();
        let tmp = self.tmpdir();
        let mut args = vec![
            "acp",
            "--model",
            "test-model",
            "--db",
            &db,
            "--permissions",
            "yolo",
        ];
        args.extend_from_slice(more);
        Agent::spawn(
            &args,
            &[
                ("OPENAI_BASE_URL", &base),
                ("OPENAI_API_KEY", "sk-test"),
                ("TMPDIR", &tmp),
            ],
        )
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

// ---------------------------------------------------------------------------
// Small protocol helpers.

fn message(error: &Value) -> String {
    error["message"].as_str().unwrap_or_default().to_string()
}

fn text_prompt(session: &str, text: &str) -> Value {
    json!({"sessionId": session, "prompt": [{"type": "text", "text": text}]})
}

/// Runs a prompt turn to its answer (no client requests are expected):
/// returns the answer and this session's updates during the turn, without
/// the live-only ones (an `available_commands_update` announced after an
/// earlier `session/new` may arrive here).
fn prompt(agent: &mut Agent, session: &str, text: &str) -> (Value, Vec<Value>) {
    let id = agent.request("session/prompt", text_prompt(session, text));
    let (response, others) = agent.response(&id, WAIT);
    (response, live_history(&session_updates(&others, session)))
}

/// Runs a prompt that must end with `end_turn`; returns its updates.
fn prompt_ok(agent: &mut Agent, session: &str, text: &str) -> Vec<Value> {
    let (response, updates) = prompt(agent, session, text);
    assert_eq!(
        response["result"]["stopReason"], "end_turn",
        "prompt {text:?} in {session}: {response}\nupdates: {updates:#?}"
    );
    updates
}

/// The answer to `session/load` and `session/resume`: `{}` plus, at most,
/// the session's modes and config options (the schema check of the
/// harness covers their shape).
fn assert_setup_result(result: &Value, method: &str) {
    let object = result
        .as_object()
        .unwrap_or_else(|| panic!("{method} result is not an object: {result}"));
    for key in object.keys() {
        assert!(
            matches!(key.as_str(), "modes" | "configOptions" | "_meta"),
            "{method} result has an unexpected field {key:?}: {result}"
        );
    }
}

/// `session/load`: asserts the answer and returns the replayed updates
/// of that session, in order (only `session/update`s of that session come
/// before the answer).
fn load(agent: &mut Agent, session: &str, cwd: &str) -> Vec<Value> {
    let (outcome, others) = call(
        agent,
        "session/load",
        json!({"sessionId": session, "cwd": cwd, "mcpServers": []}),
    );
    let result = outcome.unwrap_or_else(|error| panic!("session/load {session}: {error}"));
    assert_setup_result(&result, "session/load");
    // Live-only announcements that followed earlier answers may arrive
    // before this one; they are not part of the replay.
    let others: Vec<Value> = others
        .into_iter()
        .filter(|m| !is_live_only(&m["params"]["update"]))
        .collect();
    let foreign: Vec<&Value> = others
        .iter()
        .filter(|m| m["method"] != "session/update" || m["params"]["sessionId"] != session)
        .collect();
    assert!(
        foreign.is_empty(),
        "session/load sent other messages: {foreign:#?}"
    );
    session_updates(&others, session)
}

/// `session/resume`: asserts `{}` and that no update came before it.
fn resume(agent: &mut Agent, session: &str, cwd: &str) {
    let (outcome, others) = call(
        agent,
        "session/resume",
        json!({"sessionId": session, "cwd": cwd}),
    );
    let result = outcome.unwrap_or_else(|error| panic!("session/resume {session}: {error}"));
    assert_setup_result(&result, "session/resume");
    // Only live-only announcements that followed earlier answers may come
    // before the answer; no history.
    let replayed: Vec<&Value> = others
        .iter()
        .filter(|m| !is_live_only(&m["params"]["update"]))
        .collect();
    assert!(
        replayed.is_empty(),
        "session/resume must not replay anything: {replayed:#?}"
    );
}

/// One `session/list` page.
fn list_page(agent: &mut Agent, cwd: Option<&str>, cursor: Option<&str>) -> Value {
    let mut params = json!({});
    if let Some(cwd) = cwd {
        params["cwd"] = json!(cwd);
    }
    if let Some(cursor) = cursor {
        params["cursor"] = json!(cursor);
    }
    ok(agent, "session/list", params)
}

/// Every session `session/list` shows, following `nextCursor`; also
/// returns the page sizes.
fn list_all(agent: &mut Agent, cwd: Option<&str>) -> (Vec<Value>, Vec<usize>) {
    let mut sessions = Vec::new();
    let mut sizes = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let page = list_page(agent, cwd, cursor.as_deref());
        let entries = page["sessions"]
            .as_array()
            .unwrap_or_else(|| panic!("session/list without sessions: {page}"))
            .clone();
        sizes.push(entries.len());
        sessions.extend(entries);
        match page.get("nextCursor").and_then(Value::as_str) {
            Some(next) => cursor = Some(next.to_string()),
            None => return (sessions, sizes),
        }
        assert!(sizes.len() < 100, "session/list does not end");
    }
}

fn ids_of(sessions: &[Value]) -> Vec<String> {
    sessions
        .iter()
        .map(|s| s["sessionId"].as_str().unwrap_or_default().to_string())
        .collect()
}

/// The `session/list` entry of one session (None if not listed).
fn listed(agent: &mut Agent, session: &str) -> Option<Value> {
    list_all(agent, None)
        .0
        .into_iter()
        .find(|s| s["sessionId"] == session)
}

/// `2026-11-30T03:57:14.123Z`-like.
fn looks_like_rfc3339(text: &str) -> bool {
    let bytes = text.as_bytes();
    text.len() >= 20
        && bytes[4] == b'-'
        && bytes[7] == b'-'
        && bytes[10] == b'T'
        && bytes[13] == b':'
        && (text.ends_with('Z') || text.contains('+'))
}

fn kind(update: &Value) -> &str {
    update["sessionUpdate"].as_str().unwrap_or_default()
}

fn chunk_text(update: &Value) -> &str {
    update["content"]["text"].as_str().unwrap_or_default()
}

/// The interrupted-turn note the agent adds when it closes a cut-off turn.
fn is_interrupted_note(update: &Value) -> bool {
    kind(update) == "agent_message_chunk" && chunk_text(update).contains("interrupted")
}

/// Updates that describe the session's state rather than its history:
/// shown live, never replayed (`available_commands_update` follows
/// `session/new`, `load` and `resume`; `usage_update` follows model calls;
/// the agent's notices, such as the `yolo` these sessions start in).
fn is_live_only(update: &Value) -> bool {
    matches!(kind(update), "usage_update" | "available_commands_update")
        || crate::support::agent::is_notice(update)
}

/// A live turn's updates without the live-only ones.
fn live_history(updates: &[Value]) -> Vec<Value> {
    updates
        .iter()
        .filter(|u| !is_live_only(u))
        .cloned()
        .collect()
}

fn without_user_chunks(updates: &[Value]) -> Vec<Value> {
    updates
        .iter()
        .filter(|u| kind(u) != "user_message_chunk")
        .cloned()
        .collect()
}

/// The texts of one kind of chunk, merged per message; the agent's own
/// notices are not among them.
fn texts_of(updates: &[Value], of_kind: &str) -> Vec<String> {
    merge_chunks(updates)
        .iter()
        .filter(|u| kind(u) == of_kind && !crate::support::agent::is_notice(u))
        .map(|u| chunk_text(u).to_string())
        .collect()
}

/// Every tool call announced in `updates` ends exactly once with
/// `completed` or `failed`, nothing of it comes after, and every update
/// names an announced call. Returns the final status by id.
fn check_tool_calls(updates: &[Value]) -> HashMap<String, String> {
    let mut finals: HashMap<String, String> = HashMap::new();
    let mut announced: HashSet<String> = HashSet::new();
    for update in updates {
        let id = update["toolCallId"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        match kind(update) {
            "tool_call" => {
                assert!(
                    announced.insert(id.clone()),
                    "tool call {id} announced twice: {updates:#?}"
                );
            }
            "tool_call_update" => {
                assert!(
                    announced.contains(&id),
                    "update of unannounced tool call {id}: {updates:#?}"
                );
            }
            _ => continue,
        }
        assert!(
            !finals.contains_key(&id),
            "tool call {id} updated after its final status: {updates:#?}"
        );
        if let Some(status @ ("completed" | "failed")) = update["status"].as_str() {
            finals.insert(id, status.to_string());
        }
    }
    for id in &announced {
        assert!(
            finals.contains_key(id),
            "tool call {id} never got a final status: {updates:#?}"
        );
    }
    finals
}

/// The messages (without the system prompt) of a recorded Chat
/// Completions request.
fn conversation(body: &Value) -> Vec<Value> {
    let messages = body["messages"]
        .as_array()
        .unwrap_or_else(|| panic!("a request without messages: {body}"));
    assert_eq!(messages[0]["role"], "system", "{body}");
    messages[1..].to_vec()
}

/// Waits until `agent` has shown an update of `session` that satisfies
/// `wanted`; returns everything received meanwhile.
fn wait_for_update(
    agent: &mut Agent,
    session: &str,
    wanted: impl Fn(&Value) -> bool,
) -> Vec<Value> {
    let deadline = Instant::now() + WAIT;
    let mut seen = Vec::new();
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let Some(message) = agent.recv(left) else {
            panic!("the awaited update of {session} never came; got: {seen:#?}");
        };
        let hit = message["method"] == "session/update"
            && message["params"]["sessionId"] == session
            && wanted(&message["params"]["update"]);
        seen.push(message);
        if hit {
            return seen;
        }
    }
}

/// Waits for a message matching `wanted`; returns everything read.
fn wait_for(agent: &mut Agent, wanted: impl Fn(&Value) -> bool) -> Vec<Value> {
    let deadline = Instant::now() + WAIT;
    let mut seen = Vec::new();
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let message = agent
            .recv(left)
            .unwrap_or_else(|| panic!("never came; got {seen:#?}"));
        let hit = wanted(&message);
        seen.push(message);
        if hit {
            return seen;
        }
    }
}

/// Waits for the answers to all `ids`; returns them by id (as JSON text)
/// together with everything else received meanwhile.
fn wait_answers(agent: &mut Agent, ids: &[Value]) -> (HashMap<String, Value>, Vec<Value>) {
    let deadline = Instant::now() + WAIT;
    let wanted: HashSet<String> = ids.iter().map(Value::to_string).collect();
    let mut answers = HashMap::new();
    let mut others = Vec::new();
    while answers.len() < wanted.len() {
        let left = deadline.saturating_duration_since(Instant::now());
        let Some(message) = agent.recv(left) else {
            panic!("answers to {ids:?} did not all come; got {answers:#?}\nmeanwhile: {others:#?}");
        };
        let key = message.get("id").map(Value::to_string);
        match key {
            Some(key) if message.get("method").is_none() && wanted.contains(&key) => {
                answers.insert(key, message);
            }
            _ => others.push(message),
        }
    }
    (answers, others)
}

/// Ends an agent normally: EOF, exit status 0.
fn finish(mut agent: Agent) {
    agent.close_stdin();
    let status = agent.wait_exit(Duration::from_secs(10));
    assert!(
        status.is_some_and(|s| s.success()),
        "the agent did not exit cleanly: {status:?}\n{}",
        agent.stderr_report()
    );
}

/// A streamed Chat Completions reply: optional text, then tool calls with
/// the given ids.
fn tool_reply(text: &str, calls: &[(&str, &str, Value)]) -> Reply {
    let mut steps = vec![chunk_role()];
    if !text.is_empty() {
        steps.push(chunk_content(text));
    }
    for (index, (id, name, arguments)) in calls.iter().enumerate() {
        steps.push(chunk_tool_call(
            index as u32,
            Some(id),
            Some(name),
            &arguments.to_string(),
        ));
    }
    steps.push(chunk_finish("tool_calls"));
    steps.push(chunk_usage(10, 5));
    steps.push(done());
    Reply::Sse(steps)
}

/// A text reply streamed in two halves with a pause between them.
fn slow_text(first: &str, pause: Duration, second: &str) -> Reply {
    Reply::Sse(vec![
        chunk_role(),
        chunk_content(first),
        Step::Sleep(pause),
        chunk_content(second),
        chunk_finish("stop"),
        chunk_usage(10, 2),
        done(),
    ])
}

/// Kills a process by pid (the `sleep` a killed agent's command left).
fn kill_pid(pid: &str) {
    let _ = Command::new("kill").args(["-9", pid.trim()]).status();
}

/// Waits until `path` exists and is not empty; returns its contents.
fn wait_file(path: &Path) -> String {
    let deadline = Instant::now() + WAIT;
    loop {
        if let Ok(text) = fs::read_to_string(path) {
            if !text.trim().is_empty() {
                return text;
            }
        }
        assert!(
            Instant::now() < deadline,
            "{} never appeared",
            path.display()
        );
        thread::sleep(Duration::from_millis(20));
    }
}

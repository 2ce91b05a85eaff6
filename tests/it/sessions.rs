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

use crate::support::fake_openai::{
    chat_text, chunk_content, chunk_finish, chunk_reasoning, chunk_role, chunk_tool_call,
    chunk_usage, done,
};
use crate::support::store::{
    assert_same_updates, assert_tool_calls_answered, merge_chunks, session_updates, Db,
};
use crate::support::{temp_dir, write_file, Agent, FakeServer, Reply, Step};
use serde_json::{json, Value};
use std::collections::{HashMap, HashSet};
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::thread;
use std::time::{Duration, Instant};

const WAIT: Duration = Duration::from_secs(20);

/// -32002, "resource not found" (an unknown session id).
const NOT_FOUND: i64 = -32002;
const INVALID_REQUEST: i64 = -32600;
const INVALID_PARAMS: i64 = -32602;

/// A test's directory: `ws/` is the workspace (canonical, since /tmp may
/// be a symlink), `db/spindle.db` the shared database, `tmp/` the agents'
/// `TMPDIR`. Removed when the test passes.
struct Space {
    base: PathBuf,
    ws: PathBuf,
    db: Db,
}

impl Space {
    fn new(name: &str) -> Space {
        let base = fs::canonicalize(temp_dir(name)).expect("cannot canonicalize the temp dir");
        let ws = base.join("ws");
        fs::create_dir_all(&ws).expect("cannot create the workspace");
        fs::create_dir_all(base.join("tmp")).expect("cannot create the agents' TMPDIR");
        let db = Db::new(base.join("db").join("spindle.db"));
        Space { base, ws, db }
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
        let script = self.script(script);
        let db = db.arg();
        let tmp = self.tmpdir();
        let mut agent = Agent::spawn(
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
        );
        agent.initialize();
        agent
    }

    /// A scripted agent that is only used to list, load and inspect.
    fn reader(&self) -> Agent {
        self.scripted(&json!({"replies": []}))
    }

    /// `spindle acp --model test-model --db <db> --permissions yolo`
    /// against the fake server, initialized.
    fn openai(&self, server: &FakeServer) -> Agent {
        self.openai_on(&self.db, server)
    }

    fn openai_on(&self, db: &Db, server: &FakeServer) -> Agent {
        let base = server.base_url();
        let db = db.arg();
        let tmp = self.tmpdir();
        let mut agent = Agent::spawn(
            &[
                "acp",
                "--model",
                "test-model",
                "--db",
                &db,
                "--permissions",
                "yolo",
            ],
            &[
                ("OPENAI_BASE_URL", &base),
                ("OPENAI_API_KEY", "sk-test"),
                ("TMPDIR", &tmp),
            ],
        );
        agent.initialize();
        agent
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

/// Sends a request and waits for its answer: `Ok(result)` or `Err(error)`,
/// with everything received meanwhile.
fn call(agent: &mut Agent, method: &str, params: Value) -> (Result<Value, Value>, Vec<Value>) {
    let id = agent.request(method, params);
    let (response, others) = agent.response(&id, WAIT);
    let outcome = match (response.get("result"), response.get("error")) {
        (Some(result), _) => Ok(result.clone()),
        (None, Some(error)) => Err(error.clone()),
        _ => panic!("a response with neither result nor error: {response}"),
    };
    (outcome, others)
}

/// The result of a request that must succeed.
fn ok(agent: &mut Agent, method: &str, params: Value) -> Value {
    match call(agent, method, params.clone()).0 {
        Ok(result) => result,
        Err(error) => panic!("{method} {params} failed: {error}"),
    }
}

/// The error of a request that must fail.
fn err(agent: &mut Agent, method: &str, params: Value) -> Value {
    match call(agent, method, params.clone()).0 {
        Ok(result) => panic!("{method} {params} succeeded with {result}, expected an error"),
        Err(error) => error,
    }
}

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
/// `session/new`, `load` and `resume`; `usage_update` follows model calls).
fn is_live_only(update: &Value) -> bool {
    matches!(kind(update), "usage_update" | "available_commands_update")
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

fn texts_of(updates: &[Value], of_kind: &str) -> Vec<String> {
    merge_chunks(updates)
        .iter()
        .filter(|u| kind(u) == of_kind)
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
        agent.stderr()
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

// ---------------------------------------------------------------------------
// Capabilities.

#[test]
fn initialize_advertises_load_and_the_session_capabilities() {
    let space = Space::new("caps");
    let script = space.script(&json!({"replies": []}));
    let db = space.db.arg();
    let mut agent = Agent::spawn(&["acp", "--script", &script, "--db", &db], &[]);
    let result = agent.initialize();
    let capabilities = &result["agentCapabilities"];
    assert_eq!(capabilities["loadSession"], true, "{result}");
    for name in ["list", "resume", "close", "delete"] {
        assert!(
            capabilities["sessionCapabilities"][name].is_object(),
            "sessionCapabilities.{name} missing: {result}"
        );
    }
    finish(agent);
}

// ---------------------------------------------------------------------------
// 1. A live turn replays identically in another process.

#[test]
fn a_live_turn_replays_the_same_in_another_process() {
    let space = Space::new("replay");
    let script = json!({"replies": [
        {
            "thought": "Plan first, then write the file.",
            "text": "I will write the notes. ",
            "tool_calls": [
                {"id": "plan_1", "name": "todo_write", "arguments": {"todos": [
                    {"content": "Write notes.txt", "status": "in_progress", "priority": "high"},
                    {"content": "Check it", "status": "pending"}
                ]}},
                {"id": "write_1", "name": "write_file",
                 "arguments": {"path": "notes.txt", "content": "alpha\nbeta\n"}}
            ]
        },
        {
            "text": "Reading it back.",
            "tool_calls": [
                {"id": "read_1", "name": "read_file", "arguments": {"path": "notes.txt"}},
                {"id": "run_1", "name": "run_command",
                 "arguments": {"command": "echo counted; wc -l < notes.txt"}}
            ]
        },
        {
            "tool_calls": [
                {"id": "plan_2", "name": "todo_write", "arguments": {"todos": [
                    {"content": "Write notes.txt", "status": "completed", "priority": "high"},
                    {"content": "Check it", "status": "completed"}
                ]}}
            ]
        },
        {"thought": "Both steps are done.", "text": "Done: notes.txt has two lines."}
    ], "fallback": {"text": "Again."}});
    let mut a = space.scripted(&script);
    let session = a.new_session(&space.ws);
    let blocks = json!([
        {"type": "text", "text": "Write notes\nthen check them"},
        {"type": "resource_link", "uri": format!("file://{}/notes.txt", space.ws()), "name": "notes.txt"}
    ]);
    let id = a.request(
        "session/prompt",
        json!({"sessionId": session, "prompt": blocks}),
    );
    let (response, others) = a.response(&id, WAIT);
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    let live = live_history(&session_updates(&others, &session));

    // The live turn shows what the replay must reproduce.
    assert_eq!(kind(&live[0]), "session_info_update", "{live:#?}");
    assert_eq!(live[0]["title"], "Write notes");
    let finals = check_tool_calls(&live);
    for id in ["plan_1", "write_1", "read_1", "run_1", "plan_2"] {
        assert_eq!(
            finals.get(id).map(String::as_str),
            Some("completed"),
            "{live:#?}"
        );
    }
    assert!(
        live.iter().any(|u| u["content"]
            .as_array()
            .is_some_and(|c| c.iter().any(|b| b["type"] == "diff"))),
        "no diff in the live turn: {live:#?}"
    );
    assert!(
        live.iter()
            .any(|u| kind(u) == "tool_call" && u["locations"].is_array()),
        "no locations in the live turn: {live:#?}"
    );
    assert_eq!(live.iter().filter(|u| kind(u) == "plan").count(), 2);
    assert_eq!(
        texts_of(&live, "agent_message_chunk").concat(),
        "I will write the notes. Reading it back.Done: notes.txt has two lines."
    );

    // Process B, same database: list, then load.
    let mut b = space.reader();
    let entry = listed(&mut b, &session).expect("B does not list the session");
    assert_eq!(entry["title"], "Write notes", "{entry}");
    assert_eq!(entry["cwd"], space.ws(), "{entry}");
    let updated_at = entry["updatedAt"].as_str().unwrap_or_default();
    assert!(looks_like_rfc3339(updated_at), "{entry}");
    assert!(
        updated_at >= live[0]["updatedAt"].as_str().unwrap_or_default(),
        "updatedAt {updated_at} is older than the title update {}",
        live[0]
    );

    let replay = load(&mut b, &session, space.ws());
    // The user's prompt: one chunk per block, first, as sent.
    let users: Vec<&Value> = replay
        .iter()
        .filter(|u| kind(u) == "user_message_chunk")
        .collect();
    assert_eq!(users.len(), 2, "{replay:#?}");
    assert_eq!(kind(&replay[0]), "user_message_chunk");
    assert_eq!(kind(&replay[1]), "user_message_chunk");
    assert_eq!(users[0]["content"], blocks[0]);
    assert_eq!(users[1]["content"], blocks[1]);
    // The rest: exactly what the editor saw live, chunks merged.
    assert_same_updates(
        &merge_chunks(&live),
        &merge_chunks(&without_user_chunks(&replay)),
        "live turn vs replay in another process",
    );

    // A load in the process where the session is live attaches to it and
    // replays the same; the session is not duplicated.
    let again = load(&mut a, &session, space.ws());
    assert_same_updates(&replay, &again, "replay in B vs replay in A");
    let (all, _) = list_all(&mut a, None);
    assert_eq!(ids_of(&all), vec![session.clone()]);
    // And it still takes prompts, without a second title.
    let more = prompt_ok(&mut a, &session, "more");
    assert_eq!(texts_of(&more, "agent_message_chunk"), ["Again."]);
    assert!(!more.iter().any(|u| kind(u) == "session_info_update"));
    finish(a);
    finish(b);
    space.db.assert_sound();
}

// ---------------------------------------------------------------------------
// 2. Resume (and load) in a new process continue the conversation exactly
//    as the same process would.

const FIRST_PROMPT: &str = "What does data.txt say?";
const FOLLOW_UP: &str = "Thanks. Anything else?";

/// Queues the replies of the first turn (a tool round with reasoning, then
/// text) and of the follow-up.
fn queue_conversation(server: &FakeServer) {
    server.push(Reply::Sse(vec![
        chunk_role(),
        chunk_reasoning("I should read "),
        chunk_reasoning("the file."),
        chunk_content("Reading."),
        chunk_tool_call(
            0,
            Some("call_read"),
            Some("read_file"),
            r#"{"path":"data.txt"}"#,
        ),
        chunk_tool_call(
            1,
            Some("call_plan"),
            Some("todo_write"),
            r#"{"todos":[{"content":"Answer","status":"in_progress"}]}"#,
        ),
        chunk_finish("tool_calls"),
        chunk_usage(10, 5),
        done(),
    ]));
    server.push(Reply::Sse(chat_text(&["The file ", "says hello."])));
    server.push(Reply::Sse(chat_text(&["Nothing else."])));
}

#[test]
fn resume_and_load_continue_the_conversation_as_the_same_process_would() {
    let space = Space::new("resume");
    write_file(&space.ws, "data.txt", "hello from data\n");

    // Same process: two prompts.
    let same_db = Db::new(space.base.join("same.db"));
    let server = FakeServer::start();
    queue_conversation(&server);
    let mut agent = space.openai_on(&same_db, &server);
    let session = agent.new_session(&space.ws);
    prompt_ok(&mut agent, &session, FIRST_PROMPT);
    let updates = prompt_ok(&mut agent, &session, FOLLOW_UP);
    assert!(
        !updates.iter().any(|u| kind(u) == "session_info_update"),
        "the title is sent once: {updates:#?}"
    );
    finish(agent);
    let expected = server.wait_requests(3, WAIT)[2].body.clone();
    let messages = conversation(&expected);
    assert_eq!(messages.len(), 6, "{messages:#?}");
    assert_eq!(
        messages[0],
        json!({"role": "user", "content": FIRST_PROMPT})
    );
    assert_eq!(messages[1]["role"], "assistant");
    assert_eq!(messages[1]["reasoning_content"], "I should read the file.");
    assert_eq!(messages[1]["tool_calls"][0]["id"], "call_read");
    assert_eq!(
        messages[1]["tool_calls"][0]["function"]["arguments"],
        r#"{"path":"data.txt"}"#
    );
    assert_eq!(messages[1]["tool_calls"][1]["id"], "call_plan");
    assert_eq!(messages[2]["tool_call_id"], "call_read");
    assert!(
        messages[2]["content"]
            .as_str()
            .unwrap_or_default()
            .contains("hello from data"),
        "{messages:#?}"
    );
    assert_eq!(messages[3]["tool_call_id"], "call_plan");
    assert_eq!(
        messages[4],
        json!({"role": "assistant", "content": "The file says hello."})
    );
    assert_eq!(messages[5], json!({"role": "user", "content": FOLLOW_UP}));

    for method in ["session/resume", "session/load"] {
        let db = Db::new(space.base.join(format!("{}.db", method.replace('/', "-"))));
        let server = FakeServer::start();
        queue_conversation(&server);
        let mut first = space.openai_on(&db, &server);
        let session = first.new_session(&space.ws);
        prompt_ok(&mut first, &session, FIRST_PROMPT);
        finish(first);

        let mut second = space.openai_on(&db, &server);
        if method == "session/resume" {
            resume(&mut second, &session, space.ws());
        } else {
            let replay = load(&mut second, &session, space.ws());
            assert!(!replay.is_empty());
        }
        let updates = prompt_ok(&mut second, &session, FOLLOW_UP);
        assert!(
            !updates.iter().any(|u| kind(u) == "session_info_update"),
            "{method}: the title was already set: {updates:#?}"
        );
        let body = server.wait_requests(3, WAIT)[2].body.clone();
        assert_eq!(
            conversation(&body),
            messages,
            "{method}: the follow-up's conversation differs from the same-process one"
        );
        assert_eq!(
            body, expected,
            "{method}: the follow-up request differs from the same-process one"
        );
        finish(second);
        db.assert_sound();
    }
}

// ---------------------------------------------------------------------------
// 3. Close and delete.

/// Prompts containing "slow" stream ten words, 300 ms apart; everything
/// else gets a quick answer.
fn slow_script() -> Value {
    json!({
        "rules": [{"when": {"contains": "slow"}, "reply": {
            "text": "one two three four five six seven eight nine ten",
            "chunk_delay_ms": 300
        }}],
        "fallback": {"text": "Quick answer."}
    })
}

#[test]
fn close_frees_the_session_and_keeps_its_history() {
    let space = Space::new("close");
    let mut agent = space.scripted(&slow_script());

    // An idle session.
    let idle = agent.new_session(&space.ws);
    prompt_ok(&mut agent, &idle, "quick one");
    let closed = ok(&mut agent, "session/close", json!({"sessionId": idle}));
    assert_eq!(closed, json!({}));
    let error = err(&mut agent, "session/prompt", text_prompt(&idle, "again"));
    assert_eq!(error["code"], INVALID_REQUEST, "{error}");
    let text = message(&error);
    assert!(
        text.contains("session/load") || text.contains("session/resume"),
        "the error should tell to load or resume: {error}"
    );
    assert!(
        listed(&mut agent, &idle).is_some(),
        "a closed session stays listed"
    );
    let replay = load(&mut agent, &idle, space.ws());
    assert_eq!(texts_of(&replay, "user_message_chunk"), ["quick one"]);
    assert_eq!(texts_of(&replay, "agent_message_chunk"), ["Quick answer."]);
    prompt_ok(&mut agent, &idle, "after reopening");

    // A session running a turn.
    let busy = agent.new_session(&space.ws);
    let id = agent.request("session/prompt", text_prompt(&busy, "slow please"));
    let mut seen = wait_for_update(&mut agent, &busy, |u| kind(u) == "agent_message_chunk");
    let close = agent.request("session/close", json!({"sessionId": busy}));
    let (answers, others) = wait_answers(&mut agent, &[id.clone(), close.clone()]);
    assert_eq!(answers[&close.to_string()]["result"], json!({}));
    assert_eq!(
        answers[&id.to_string()]["result"]["stopReason"],
        "cancelled",
        "{answers:#?}"
    );
    seen.extend(others);
    let live = live_history(&session_updates(&seen, &busy));
    let error = err(&mut agent, "session/prompt", text_prompt(&busy, "more"));
    assert_eq!(error["code"], INVALID_REQUEST, "{error}");
    let turns = space.db.turns(&busy);
    assert_eq!(turns.len(), 1, "{turns:?}");
    assert_eq!(turns[0].state, "ended", "{turns:?}");
    assert_eq!(
        turns[0].stop_reason.as_deref(),
        Some("cancelled"),
        "{turns:?}"
    );

    // Its history, in a fresh process: the prompt and what was streamed
    // before the cancel; the turn was cancelled, not interrupted.
    let mut other = space.reader();
    let replay = load(&mut other, &busy, space.ws());
    assert_eq!(texts_of(&replay, "user_message_chunk"), ["slow please"]);
    assert!(!replay.iter().any(is_interrupted_note), "{replay:#?}");
    assert_same_updates(
        &merge_chunks(&live),
        &merge_chunks(&without_user_chunks(&replay)),
        "cancelled turn vs its replay",
    );
    finish(agent);
    finish(other);
    space.db.assert_sound();
}

#[test]
fn delete_removes_sessions_for_good() {
    let space = Space::new("delete");
    let mut agent = space.scripted(&slow_script());
    let gone = agent.new_session(&space.ws);
    prompt_ok(&mut agent, &gone, "quick one");
    let keep = agent.new_session(&space.ws);
    prompt_ok(&mut agent, &keep, "quick two");

    assert_eq!(
        ok(&mut agent, "session/delete", json!({"sessionId": gone})),
        json!({})
    );
    let (all, _) = list_all(&mut agent, None);
    assert_eq!(ids_of(&all), vec![keep.clone()]);
    for method in ["session/load", "session/resume"] {
        let error = err(
            &mut agent,
            method,
            json!({"sessionId": gone, "cwd": space.ws(), "mcpServers": []}),
        );
        assert_eq!(error["code"], NOT_FOUND, "{method}: {error}");
        assert!(message(&error).contains(&gone), "{method}: {error}");
    }
    let error = err(&mut agent, "session/prompt", text_prompt(&gone, "hello?"));
    assert_eq!(error["code"], NOT_FOUND, "{error}");
    // Deleting again, or something that never existed, succeeds quietly.
    assert_eq!(
        ok(&mut agent, "session/delete", json!({"sessionId": gone})),
        json!({})
    );
    assert_eq!(
        ok(
            &mut agent,
            "session/delete",
            json!({"sessionId": "sess_never_was"})
        ),
        json!({})
    );
    for table in ["events", "messages", "turns"] {
        assert_eq!(space.db.rows_of(table, &gone), 0, "{table} left behind");
    }

    // A session in the middle of a turn.
    let busy = agent.new_session(&space.ws);
    let id = agent.request("session/prompt", text_prompt(&busy, "slow please"));
    wait_for_update(&mut agent, &busy, |u| kind(u) == "agent_message_chunk");
    let delete = agent.request("session/delete", json!({"sessionId": busy}));
    let (answers, _) = wait_answers(&mut agent, &[id.clone(), delete.clone()]);
    assert_eq!(answers[&delete.to_string()]["result"], json!({}));
    assert_eq!(
        answers[&id.to_string()]["result"]["stopReason"],
        "cancelled",
        "{answers:#?}"
    );
    let error = err(
        &mut agent,
        "session/load",
        json!({"sessionId": busy, "cwd": space.ws(), "mcpServers": []}),
    );
    assert_eq!(error["code"], NOT_FOUND, "{error}");
    // The turn's end must not bring anything of it back.
    for table in ["events", "messages", "turns"] {
        assert_eq!(space.db.rows_of(table, &busy), 0, "{table} left behind");
    }

    // Another process sees the same.
    let mut other = space.reader();
    let (all, _) = list_all(&mut other, None);
    assert_eq!(ids_of(&all), vec![keep.clone()]);
    let error = err(
        &mut other,
        "session/load",
        json!({"sessionId": gone, "cwd": space.ws(), "mcpServers": []}),
    );
    assert_eq!(error["code"], NOT_FOUND, "{error}");
    let replay = load(&mut other, &keep, space.ws());
    assert_eq!(texts_of(&replay, "user_message_chunk"), ["quick two"]);
    finish(agent);
    finish(other);
    assert_eq!(space.db.session_ids(), vec![keep]);
    space.db.assert_sound();
}

/// Starts a turn that streams "Working" and then stalls, on a server whose
/// next replies are `then`; returns the agent, the session and the id of
/// the running prompt.
fn stalled_turn(space: &Space, server: &FakeServer) -> (Agent, String, Value) {
    server.push(Reply::Sse(vec![
        chunk_role(),
        chunk_content("Working"),
        Step::Stall,
    ]));
    let mut agent = space.openai(server);
    let session = agent.new_session(&space.ws);
    let first = agent.request("session/prompt", text_prompt(&session, "first"));
    wait_for_update(&mut agent, &session, |u| kind(u) == "agent_message_chunk");
    (agent, session, first)
}

/// An editor closing a tab with a running turn and reopening it at once
/// (close, load, prompt back to back): the new turn runs while the
/// cancelled one winds down. The agent must keep answering other requests
/// meanwhile, and each prompt gets its own answer.
///
/// The requests are sent together, so the dispatcher normally handles all
/// of them before the cancelled turn reports its end; if the turn happens
/// to report first, the faulty path is not taken and the test passes.
#[test]
fn a_session_reopened_while_its_closed_turn_winds_down_takes_prompts() {
    let space = Space::new("reopen-prompt");
    let server = FakeServer::start();
    let (mut agent, session, first) = stalled_turn(&space, &server);
    server.push(slow_text("New ", Duration::from_secs(3), "answer"));

    let close = agent.request("session/close", json!({"sessionId": session}));
    let reload = agent.request(
        "session/load",
        json!({"sessionId": session, "cwd": space.ws(), "mcpServers": []}),
    );
    let second = agent.request("session/prompt", text_prompt(&session, "second"));
    let list = agent.request("session/list", json!({}));
    let started = Instant::now();
    let (answers, mut seen) = wait_answers(
        &mut agent,
        &[close.clone(), reload.clone(), first.clone(), list.clone()],
    );
    let waited = started.elapsed();
    assert_eq!(answers[&close.to_string()]["result"], json!({}));
    assert_setup_result(&answers[&reload.to_string()]["result"], "session/load");
    assert_eq!(
        answers[&first.to_string()]["result"]["stopReason"],
        "cancelled",
        "{answers:#?}"
    );
    assert!(
        answers[&list.to_string()]["result"]["sessions"].is_array(),
        "{answers:#?}"
    );
    assert!(
        waited < Duration::from_millis(1500),
        "the agent answered nothing for {waited:?}: the closed turn's end blocked the \
         dispatcher until the reopened session's turn was over"
    );
    let (response, updates) = agent.response(&second, WAIT);
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    seen.extend(updates);
    let texts = texts_of(&session_updates(&seen, &session), "agent_message_chunk");
    assert_eq!(
        texts.last().map(String::as_str),
        Some("New answer"),
        "{seen:#?}"
    );
    let turns = space.db.turns(&session);
    assert_eq!(turns.len(), 2, "{turns:?}");
    assert_eq!(
        turns[1].stop_reason.as_deref(),
        Some("end_turn"),
        "{turns:?}"
    );
    finish(agent);
    space.db.assert_sound();
}

/// Closing a running turn and loading the session at once (before the
/// cancelled turn has finished storing its end): the turn was cancelled,
/// not cut off, and must not be closed as interrupted.
///
/// To make the window certain, the test holds the database's write lock
/// for a moment, as another Spindle process committing a step would: the
/// cancelled turn cannot store its end before the load has looked.
#[test]
fn a_session_loaded_right_after_close_keeps_its_cancelled_turn() {
    let space = Space::new("reopen-load");
    let server = FakeServer::start();
    let (mut agent, session, first) = stalled_turn(&space, &server);
    server.push(Reply::Sse(chat_text(&["Second."])));

    let blocker = space.db.connect();
    blocker
        .execute_batch("BEGIN IMMEDIATE")
        .expect("cannot take the write lock");
    let close = agent.request("session/close", json!({"sessionId": session}));
    let reload = agent.request(
        "session/load",
        json!({"sessionId": session, "cwd": space.ws(), "mcpServers": []}),
    );
    thread::sleep(Duration::from_millis(500));
    blocker
        .execute_batch("COMMIT")
        .expect("cannot release the write lock");
    drop(blocker);
    let (answers, _) = wait_answers(&mut agent, &[close.clone(), reload.clone(), first.clone()]);
    assert_setup_result(&answers[&reload.to_string()]["result"], "session/load");
    assert_eq!(
        answers[&first.to_string()]["result"]["stopReason"],
        "cancelled",
        "{answers:#?}"
    );
    let turns = space.db.turns(&session);
    assert_eq!(turns.len(), 1, "{turns:?}");
    assert_eq!(
        (turns[0].state.as_str(), turns[0].stop_reason.as_deref()),
        ("ended", Some("cancelled")),
        "{turns:?}"
    );
    let mut other = space.reader();
    let replay = load(&mut other, &session, space.ws());
    assert!(
        !replay.iter().any(is_interrupted_note),
        "a cancelled turn is shown as interrupted: {replay:#?}"
    );

    // The conversation the model gets next has everything once.
    prompt_ok(&mut agent, &session, "second");
    let body = server.wait_requests(2, WAIT)[1].body.clone();
    let messages = conversation(&body);
    assert_eq!(
        messages,
        [
            json!({"role": "user", "content": "first"}),
            json!({"role": "assistant", "content": "Working"}),
            json!({"role": "user", "content": "second"}),
        ]
    );
    finish(agent);
    finish(other);
    space.db.assert_sound();
}

// ---------------------------------------------------------------------------
// 4. Listing: pages, cursors, cwd filter.

#[test]
fn list_pages_newest_first_with_cursors_and_filters_by_cwd() {
    let space = Space::new("list");
    let left = space.workspace("left");
    let right = space.workspace("right");
    let left_str = left.to_str().expect("UTF-8").to_string();
    let mut agent = space.scripted(&json!({"fallback": {"text": "Awake."}}));
    let mut created = Vec::new();
    for index in 0..120 {
        let cwd = if index % 2 == 0 { &left } else { &right };
        created.push(agent.new_session(cwd));
    }

    let (all, sizes) = list_all(&mut agent, None);
    assert_eq!(sizes, [50, 50, 20]);
    let newest_first: Vec<String> = created.iter().rev().cloned().collect();
    assert_eq!(
        ids_of(&all),
        newest_first,
        "newest first, no gaps, no repeats"
    );
    for (index, entry) in all.iter().enumerate() {
        // Newest first: entry `index` is the one created
        // `created.len() - 1 - index`-th; the even ones went left.
        let cwd = if (created.len() - 1 - index) % 2 == 0 {
            &left
        } else {
            &right
        };
        assert_eq!(entry["cwd"], cwd.to_str().unwrap(), "{entry}");
        assert!(
            looks_like_rfc3339(entry["updatedAt"].as_str().unwrap_or_default()),
            "{entry}"
        );
        assert!(entry.get("title").is_none(), "untitled yet: {entry}");
    }
    let stamps: Vec<&str> = all
        .iter()
        .map(|e| e["updatedAt"].as_str().unwrap_or_default())
        .collect();
    assert!(
        stamps.windows(2).all(|w| w[0] >= w[1]),
        "updatedAt must not increase down the list: {stamps:?}"
    );

    // Only one workspace.
    let (lefts, sizes) = list_all(&mut agent, Some(&left_str));
    assert_eq!(sizes, [50, 10]);
    let expected: Vec<String> = created.iter().step_by(2).rev().cloned().collect();
    assert_eq!(ids_of(&lefts), expected);
    let empty_ws = space.workspace("empty");
    let page = list_page(&mut agent, empty_ws.to_str(), None);
    assert_eq!(page, json!({"sessions": []}));

    // Bad cursors and a relative cwd.
    for cursor in ["", "garbage", "o0", "o-3", "o1x", "99", "o"] {
        let error = err(&mut agent, "session/list", json!({"cursor": cursor}));
        assert_eq!(error["code"], INVALID_PARAMS, "cursor {cursor:?}: {error}");
    }
    let error = err(&mut agent, "session/list", json!({"cwd": "relative/dir"}));
    assert_eq!(error["code"], INVALID_PARAMS, "{error}");

    // A prompt moves a session to the front and gives it a title.
    let oldest = created[0].clone();
    prompt_ok(&mut agent, &oldest, "wake up");
    let first = list_page(&mut agent, None, None);
    assert_eq!(first["sessions"][0]["sessionId"], oldest.as_str());
    assert_eq!(first["sessions"][0]["title"], "wake up");

    // Another process sees the same list.
    let (now, _) = list_all(&mut agent, None);
    let mut other = space.reader();
    let (seen, _) = list_all(&mut other, None);
    assert_eq!(seen, now);
    finish(agent);
    finish(other);
}

/// Sessions created by two processes at the same moment all show up when
/// paging through `session/list`: the order the list pages by must not
/// give two sessions the same position.
#[test]
fn sessions_created_by_two_processes_at_once_page_without_gaps() {
    const EACH: usize = 100;
    let space = Space::new("list-race");
    // The database exists before the race (creating it at once is
    // `agents_started_at_once_on_a_new_database_all_work`'s subject).
    let mut first = space.reader();
    list_page(&mut first, None, None);
    finish(first);
    let agents: Vec<Agent> = (0..2).map(|_| space.reader()).collect();
    let workers: Vec<thread::JoinHandle<Vec<String>>> = agents
        .into_iter()
        .map(|mut agent| {
            let ws = space.ws().to_string();
            thread::spawn(move || {
                // All requests at once, then the answers.
                let ids: Vec<Value> = (0..EACH)
                    .map(|_| agent.request("session/new", json!({"cwd": ws, "mcpServers": []})))
                    .collect();
                let (answers, _) = wait_answers(&mut agent, &ids);
                let created = ids
                    .iter()
                    .map(|id| {
                        let answer = &answers[&id.to_string()];
                        answer["result"]["sessionId"]
                            .as_str()
                            .unwrap_or_else(|| panic!("session/new failed: {answer}"))
                            .to_string()
                    })
                    .collect();
                finish(agent);
                created
            })
        })
        .collect();
    let mut created: HashSet<String> = HashSet::new();
    for worker in workers {
        created.extend(worker.join().expect("a worker failed"));
    }
    assert_eq!(created.len(), 2 * EACH);
    let duplicates: Vec<(i64, i64)> = {
        let connection = space.db.connect();
        let mut statement = connection
            .prepare(
                "SELECT updated_order, COUNT(*) FROM sessions GROUP BY updated_order HAVING COUNT(*) > 1",
            )
            .expect("cannot prepare");
        let rows = statement
            .query_map([], |row| Ok((row.get(0)?, row.get(1)?)))
            .expect("cannot query")
            .collect::<rusqlite::Result<Vec<_>>>()
            .expect("cannot query");
        rows
    };
    // Two sessions at one position are a gap waiting for a page boundary:
    // move the boundary onto such a pair (deleting newer sessions or
    // prompting older ones) and page through.
    let mut agent = space.scripted(&json!({"fallback": {"text": "Moved."}}));
    if let Some(&(order, _)) = duplicates.last() {
        let connection = space.db.connect();
        let ids_where = |sql: &str| -> Vec<String> {
            let mut statement = connection.prepare(sql).expect("cannot prepare");
            let rows = statement
                .query_map([order], |row| row.get::<_, String>(0))
                .expect("cannot query")
                .collect::<rusqlite::Result<Vec<_>>>()
                .expect("cannot query");
            rows
        };
        let newer = ids_where(
            "SELECT id FROM sessions WHERE updated_order > ?1 ORDER BY updated_order DESC",
        );
        let older = ids_where(
            "SELECT id FROM sessions WHERE updated_order < ?1 ORDER BY updated_order DESC",
        );
        if newer.len() >= 49 {
            for id in &newer[..newer.len() - 49] {
                ok(&mut agent, "session/delete", json!({"sessionId": id}));
                created.remove(id);
            }
        } else {
            for id in &older[..49 - newer.len()] {
                resume(&mut agent, id, space.ws());
                prompt_ok(&mut agent, id, "move up");
            }
        }
    }
    let (all, sizes) = list_all(&mut agent, None);
    finish(agent);
    let listed: HashSet<String> = ids_of(&all).into_iter().collect();
    let missing = created.difference(&listed).count();
    assert!(
        duplicates.is_empty() && missing == 0 && all.len() == created.len(),
        "sessions created at once share a list position (updated_order, count): {duplicates:?}; \
         paging ({sizes:?}) then misses {missing} of {} sessions",
        created.len()
    );
    space.db.assert_sound();
}

// ---------------------------------------------------------------------------
// 5. kill -9 in the middle of a turn.

/// After a crash: the file is sound, a fresh process loads the session,
/// the cut-off turn is closed as interrupted (the note is the last update,
/// every tool call has a final status), no turn stays running, and a
/// second fresh process replays exactly the same. Returns the replay.
fn recover(space: &Space, session: &str) -> Vec<Value> {
    space.db.assert_sound();
    let mut reader = space.reader();
    let replay = load(&mut reader, session, space.ws());
    check_tool_calls(&replay);
    assert!(
        replay.last().is_some_and(is_interrupted_note),
        "the replay should end with the interrupted note: {replay:#?}"
    );
    assert_eq!(
        replay.iter().filter(|u| is_interrupted_note(u)).count(),
        1,
        "{replay:#?}"
    );
    let turns = space.db.turns(session);
    assert!(
        turns.iter().all(|t| t.state != "running"),
        "a turn stays running after the load: {turns:?}"
    );
    assert_eq!(
        turns.last().map(|t| t.state.as_str()),
        Some("interrupted"),
        "{turns:?}"
    );
    assert_tool_calls_answered(&space.db.messages(session));
    finish(reader);
    let mut again = space.reader();
    let second = load(&mut again, session, space.ws());
    assert_same_updates(&replay, &second, "first and second load after the crash");
    finish(again);
    space.db.assert_sound();
    replay
}

#[test]
fn kill_before_the_provider_answers() {
    let space = Space::new("kill-before");
    let server = FakeServer::start();
    server.push(Reply::Sse(vec![Step::Stall]));
    let mut agent = space.openai(&server);
    let session = agent.new_session(&space.ws);
    let _prompt = agent.request("session/prompt", text_prompt(&session, "Before the answer"));
    server.wait_requests(1, WAIT);
    agent.kill();

    let replay = recover(&space, &session);
    assert_eq!(
        texts_of(&replay, "user_message_chunk"),
        ["Before the answer"]
    );
    assert_eq!(
        texts_of(&replay, "agent_message_chunk").len(),
        1,
        "{replay:#?}"
    );
    assert_eq!(
        space.db.title(&session).as_deref(),
        Some("Before the answer")
    );

    // The session goes on in a new process.
    server.push(Reply::Sse(chat_text(&["Back."])));
    let mut next = space.openai(&server);
    resume(&mut next, &session, space.ws());
    prompt_ok(&mut next, &session, "Are you there?");
    let body = server.wait_requests(2, WAIT)[1].body.clone();
    let messages = conversation(&body);
    assert_eq!(
        messages.first(),
        Some(&json!({"role": "user", "content": "Before the answer"})),
        "{messages:#?}"
    );
    assert_eq!(
        messages.last(),
        Some(&json!({"role": "user", "content": "Are you there?"})),
        "{messages:#?}"
    );
    assert_tool_calls_answered(&messages);
    finish(next);
}

#[test]
fn kill_in_the_middle_of_a_stream() {
    let space = Space::new("kill-mid");
    let server = FakeServer::start();
    server.push(Reply::Sse(vec![
        chunk_role(),
        chunk_reasoning("Thinking it over. "),
        chunk_content("Partial "),
        chunk_content("answer"),
        Step::Stall,
    ]));
    let mut agent = space.openai(&server);
    let session = agent.new_session(&space.ws);
    let _prompt = agent.request("session/prompt", text_prompt(&session, "Stream something"));
    wait_for_update(&mut agent, &session, |u| chunk_text(u) == "answer");
    agent.kill();

    let replay = recover(&space, &session);
    assert_eq!(
        texts_of(&replay, "user_message_chunk"),
        ["Stream something"]
    );
    // The uncommitted step may be lost; if anything of it is there, it is
    // what was streamed.
    let texts = texts_of(&replay, "agent_message_chunk");
    assert!(
        texts.len() == 1 || (texts.len() == 2 && texts[0] == "Partial answer"),
        "{replay:#?}"
    );

    server.push(Reply::Sse(chat_text(&["Fine."])));
    let mut next = space.openai(&server);
    load(&mut next, &session, space.ws());
    prompt_ok(&mut next, &session, "Again");
    let body = server.wait_requests(2, WAIT)[1].body.clone();
    let messages = conversation(&body);
    assert_eq!(
        messages.last(),
        Some(&json!({"role": "user", "content": "Again"}))
    );
    assert_tool_calls_answered(&messages);
    finish(next);
}

#[test]
fn kill_during_a_tool_after_a_completed_step() {
    let space = Space::new("kill-tool");
    write_file(&space.ws, "data.txt", "some data\n");
    let server = FakeServer::start();
    server.push(tool_reply(
        "Looking.",
        &[("call_read", "read_file", json!({"path": "data.txt"}))],
    ));
    server.push(tool_reply(
        "Now the slow part.",
        &[(
            "call_sleep",
            "run_command",
            json!({"command": "echo $$ > sleeper.pid; exec sleep 30"}),
        )],
    ));
    let mut agent = space.openai(&server);
    let session = agent.new_session(&space.ws);
    let _prompt = agent.request("session/prompt", text_prompt(&session, "Read, then wait"));
    let sleeper = wait_file(&space.ws.join("sleeper.pid"));
    wait_for_update(&mut agent, &session, |u| {
        u["toolCallId"] == "call_sleep" && u["status"] == "in_progress"
    });
    agent.kill();
    kill_pid(&sleeper);

    let replay = recover(&space, &session);
    assert_eq!(texts_of(&replay, "user_message_chunk"), ["Read, then wait"]);
    let finals = check_tool_calls(&replay);
    assert_eq!(
        finals.get("call_read").map(String::as_str),
        Some("completed"),
        "the completed step is replayed with its final status: {replay:#?}"
    );
    if let Some(status) = finals.get("call_sleep") {
        assert_eq!(status, "failed", "{replay:#?}");
    }
    assert!(
        texts_of(&replay, "agent_message_chunk")[0] == "Looking.",
        "{replay:#?}"
    );

    // The session is usable, and the model gets a well-formed conversation.
    server.push(Reply::Sse(chat_text(&["Recovered."])));
    let mut next = space.openai(&server);
    let before = load(&mut next, &session, space.ws());
    assert_same_updates(&replay, &before, "replay before the next prompt");
    let updates = prompt_ok(&mut next, &session, "Continue");
    assert_eq!(texts_of(&updates, "agent_message_chunk"), ["Recovered."]);
    let body = server.wait_requests(3, WAIT)[2].body.clone();
    let messages = conversation(&body);
    assert_tool_calls_answered(&messages);
    assert_eq!(
        messages[0],
        json!({"role": "user", "content": "Read, then wait"})
    );
    assert_eq!(
        messages[1]["tool_calls"][0]["id"], "call_read",
        "{messages:#?}"
    );
    assert_eq!(messages[2]["tool_call_id"], "call_read", "{messages:#?}");
    assert_eq!(
        messages.last(),
        Some(&json!({"role": "user", "content": "Continue"}))
    );
    finish(next);

    // Later loads replay the crash the same way, then the new turn.
    let mut later = space.reader();
    let after = load(&mut later, &session, space.ws());
    assert_same_updates(
        &replay,
        &after[..replay.len().min(after.len())],
        "the interrupted turn replays the same later",
    );
    assert_eq!(
        texts_of(&after, "user_message_chunk"),
        ["Read, then wait", "Continue"]
    );
    finish(later);
    space.db.assert_sound();
}

/// Kills a many-step turn at a range of moments, each in its own session
/// of one database; after each, the database is sound and the session
/// loads consistently in fresh processes.
#[test]
fn kill_at_any_moment_leaves_a_loadable_database() {
    let space = Space::new("kill-any");
    let mut replies: Vec<Value> = (1..=10)
        .map(|step| {
            json!({
                "text": format!("Step {step} of the long task. "),
                "chunk_delay_ms": 4,
                "tool_calls": [{"id": format!("plan_{step}"), "name": "todo_write", "arguments": {"todos": [
                    {"content": format!("Step {step}"), "status": "completed"},
                    {"content": "The rest", "status": "pending"}
                ]}}]
            })
        })
        .collect();
    replies.push(json!({"text": "All steps done."}));
    let script = json!({"rules": [{"when": {"contains": "stress"}, "replies": replies}]});
    let delays = [0u64, 15, 40, 80, 130, 200, 280, 400, 2000];
    for delay in delays {
        let mut agent = space.scripted(&script);
        let session = agent.new_session(&space.ws);
        let _prompt = agent.request("session/prompt", text_prompt(&session, "stress test"));
        thread::sleep(Duration::from_millis(delay));
        agent.kill();
        space.db.assert_sound();
        let was = space.db.turns(&session);

        let mut reader = space.reader();
        let replay = load(&mut reader, &session, space.ws());
        finish(reader);
        space.db.assert_sound();
        let turns = space.db.turns(&session);
        assert!(
            turns.iter().all(|t| t.state != "running"),
            "delay {delay}: {turns:?}"
        );
        check_tool_calls(&replay);
        assert_tool_calls_answered(&space.db.messages(&session));
        match was.first().map(|t| t.state.as_str()) {
            None => assert!(replay.is_empty(), "delay {delay}: {replay:#?}"),
            Some("running") => {
                assert_eq!(
                    texts_of(&replay, "user_message_chunk"),
                    ["stress test"],
                    "delay {delay}"
                );
                assert!(
                    replay.last().is_some_and(is_interrupted_note),
                    "delay {delay}: {replay:#?}"
                );
                assert_eq!(turns[0].state, "interrupted", "delay {delay}");
            }
            Some(_) => {
                assert!(
                    !replay.iter().any(is_interrupted_note),
                    "delay {delay}: {replay:#?}"
                );
                assert_eq!(
                    texts_of(&replay, "agent_message_chunk")
                        .last()
                        .map(String::as_str),
                    Some("All steps done."),
                    "delay {delay}"
                );
            }
        }
        let mut again = space.reader();
        let second = load(&mut again, &session, space.ws());
        finish(again);
        assert_same_updates(&replay, &second, &format!("delay {delay}: two loads"));
    }
    let mut reader = space.reader();
    let (all, _) = list_all(&mut reader, None);
    assert_eq!(all.len(), delays.len());
    finish(reader);
}

/// The pid of a process that has exited (and been reaped).
fn dead_pid() -> i64 {
    let mut child = Command::new("true").spawn().expect("cannot run true");
    let pid = child.id();
    let _ = child.wait();
    i64::from(pid)
}

/// Leases in the database, set by hand: a live holder with an unexpired
/// lease is respected (by load and prompt), an expired one is not, and a
/// turn left running by a dead holder with a tool call that never got a
/// final status is closed on load: the call is marked failed, the note is
/// added, and the model's conversation gets an answer for the call.
///
/// The agent commits a tool call only together with its result, so a
/// crash cannot leave this state behind today; the database is written
/// here directly (in the store's message format) to cover that path.
#[test]
fn leases_and_unfinished_tool_calls_in_a_hand_made_database() {
    let space = Space::new("leases");
    let server = FakeServer::start();
    server.push(Reply::Sse(chat_text(&["Hello."])));
    let mut agent = space.openai(&server);
    let session = agent.new_session(&space.ws);
    prompt_ok(&mut agent, &session, "Start");
    finish(agent);

    // Turn 2, cut off while `call_x` was running.
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock")
        .as_millis() as i64;
    let connection = space.db.connect();
    let user = json!({"sessionUpdate": "user_message_chunk", "content": {"type": "text", "text": "Run it"}, "messageId": "user_x"});
    let announce = json!({"sessionUpdate": "tool_call", "toolCallId": "call_x", "title": "Run make", "kind": "execute", "status": "pending", "rawInput": {"command": "make"}});
    let running = json!({"sessionUpdate": "tool_call_update", "toolCallId": "call_x", "status": "in_progress"});
    let messages = [
        json!({"role": "user", "text": "Run it"}),
        json!({"role": "assistant", "text": "", "tool_calls": [{"id": "call_x", "name": "run_command", "arguments": "{\"command\":\"make\"}"}]}),
    ];
    connection
        .execute(
            "INSERT INTO turns (session_id, turn, state, started_at) VALUES (?1, 2, 'running', '2026-01-01T00:00:00.000Z')",
            [&session],
        )
        .expect("cannot insert the turn");
    let base_events: i64 = connection
        .query_row(
            "SELECT MAX(seq) FROM events WHERE session_id = ?1",
            [&session],
            |row| row.get(0),
        )
        .expect("no events");
    for (offset, event) in [user, announce, running].iter().enumerate() {
        connection
            .execute(
                "INSERT INTO events (session_id, seq, turn, body) VALUES (?1, ?2, 2, ?3)",
                rusqlite::params![session, base_events + 1 + offset as i64, event.to_string()],
            )
            .expect("cannot insert an event");
    }
    let base_messages: i64 = connection
        .query_row(
            "SELECT MAX(seq) FROM messages WHERE session_id = ?1",
            [&session],
            |row| row.get(0),
        )
        .expect("no messages");
    for (offset, message) in messages.iter().enumerate() {
        connection
            .execute(
                "INSERT INTO messages (session_id, seq, body) VALUES (?1, ?2, ?3)",
                rusqlite::params![
                    session,
                    base_messages + 1 + offset as i64,
                    message.to_string()
                ],
            )
            .expect("cannot insert a message");
    }
    let set_lease = |pid: i64, expires: i64| {
        connection
            .execute(
                "UPDATE sessions SET lease_pid = ?2, lease_expires_ms = ?3 WHERE id = ?1",
                rusqlite::params![session, pid, expires],
            )
            .expect("cannot set the lease");
    };

    // PID 1 is always alive: its unexpired lease holds.
    set_lease(1, now_ms + 600_000);
    let mut agent = space.openai(&server);
    let replay = load(&mut agent, &session, space.ws());
    assert!(
        !replay.iter().any(is_interrupted_note),
        "a turn leased to a live process is not interrupted: {replay:#?}"
    );
    let error = err(&mut agent, "session/prompt", text_prompt(&session, "Me?"));
    assert_eq!(error["code"], INVALID_REQUEST, "{error}");
    assert_eq!(error["data"]["code"], "session_busy", "{error}");
    assert_eq!(error["data"]["holderPid"], 1, "{error}");
    finish(agent);

    // Its holder died: the next load closes the turn.
    set_lease(dead_pid(), now_ms + 600_000);
    let replay = recover(&space, &session);
    let finals = check_tool_calls(&replay);
    assert_eq!(finals["call_x"], "failed", "{replay:#?}");
    let stored = space.db.messages(&session);
    assert_tool_calls_answered(&stored);

    // The session goes on; the model sees an answer for call_x.
    server.push(Reply::Sse(chat_text(&["Moving on."])));
    let mut agent = space.openai(&server);
    resume(&mut agent, &session, space.ws());
    prompt_ok(&mut agent, &session, "Next");
    let body = server.wait_requests(2, WAIT)[1].body.clone();
    let conversation = conversation(&body);
    assert_tool_calls_answered(&conversation);
    assert!(
        conversation.iter().any(|m| m["tool_call_id"] == "call_x"),
        "{conversation:#?}"
    );
    finish(agent);

    // An expired lease is taken over even if its holder lives.
    set_lease(1, now_ms - 1);
    server.push(Reply::Sse(chat_text(&["Expired."])));
    let mut agent = space.openai(&server);
    resume(&mut agent, &session, space.ws());
    prompt_ok(&mut agent, &session, "After expiry");
    assert_eq!(space.db.lease(&session), (None, None));
    finish(agent);
    space.db.assert_sound();
}

// ---------------------------------------------------------------------------
// 6. Two processes on one database.

#[test]
fn a_session_busy_in_one_process_is_refused_in_another_until_it_ends() {
    let space = Space::new("busy");
    let server = FakeServer::start();
    server.push(Reply::Sse(chat_text(&["First answer."])));
    server.push(slow_text("A is ", Duration::from_millis(2500), "done."));
    server.push(Reply::Sse(chat_text(&["B answers."])));
    server.push(Reply::Sse(chat_text(&["A again."])));
    let mut a = space.openai(&server);
    let session = a.new_session(&space.ws);
    // B starts once the database exists (two agents starting together on
    // a new database is `agents_started_at_once_on_a_new_database_all_work`).
    let mut b = space.openai(&server);
    prompt_ok(&mut a, &session, "Start here");

    // Both list the same and can load it.
    let (listed_a, _) = list_all(&mut a, None);
    let (listed_b, _) = list_all(&mut b, None);
    assert_eq!(listed_a, listed_b);
    assert_eq!(listed_b[0]["title"], "Start here");
    let replay = load(&mut b, &session, space.ws());
    assert_eq!(texts_of(&replay, "agent_message_chunk"), ["First answer."]);

    // A runs a slow turn; B's prompt is refused, naming A.
    let slow = a.request("session/prompt", text_prompt(&session, "Take your time"));
    wait_for_update(&mut a, &session, |u| chunk_text(u) == "A is ");
    let error = err(&mut b, "session/prompt", text_prompt(&session, "Me too"));
    assert_eq!(error["code"], INVALID_REQUEST, "{error}");
    assert_eq!(error["data"]["code"], "session_busy", "{error}");
    assert_eq!(error["data"]["holderPid"], a.pid(), "{error}");
    assert!(message(&error).contains(&a.pid().to_string()), "{error}");
    assert_eq!(space.db.lease(&session).0, Some(i64::from(a.pid())));
    let (response, _) = a.response(&slow, WAIT);
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    assert_eq!(
        space.db.lease(&session),
        (None, None),
        "the lease is released"
    );

    // Now B may prompt, and its model request includes A's turn.
    prompt_ok(&mut b, &session, "My turn");
    let body = server.wait_requests(3, WAIT)[2].body.clone();
    assert_eq!(
        conversation(&body),
        [
            json!({"role": "user", "content": "Start here"}),
            json!({"role": "assistant", "content": "First answer."}),
            json!({"role": "user", "content": "Take your time"}),
            json!({"role": "assistant", "content": "A is done."}),
            json!({"role": "user", "content": "My turn"}),
        ]
    );
    // And A's next request includes B's.
    prompt_ok(&mut a, &session, "Back to A");
    let body = server.wait_requests(4, WAIT)[3].body.clone();
    let messages = conversation(&body);
    assert_eq!(messages.len(), 7, "{messages:#?}");
    assert_eq!(
        messages[5],
        json!({"role": "assistant", "content": "B answers."})
    );
    assert_eq!(messages[6], json!({"role": "user", "content": "Back to A"}));
    finish(a);
    finish(b);
    space.db.assert_sound();
}

#[test]
fn the_lease_of_a_killed_process_is_taken_over() {
    let space = Space::new("takeover");
    let server = FakeServer::start();
    server.push(Reply::Sse(vec![
        chunk_role(),
        chunk_content("Half"),
        Step::Stall,
    ]));
    server.push(Reply::Sse(chat_text(&["B took over."])));
    let mut a = space.openai(&server);
    let session = a.new_session(&space.ws);
    let _prompt = a.request("session/prompt", text_prompt(&session, "A starts"));
    wait_for_update(&mut a, &session, |u| chunk_text(u) == "Half");
    let a_pid = i64::from(a.pid());
    assert_eq!(space.db.lease(&session).0, Some(a_pid));
    a.kill();
    space.db.assert_sound();

    let mut b = space.openai(&server);
    let replay = load(&mut b, &session, space.ws());
    assert!(
        replay.last().is_some_and(is_interrupted_note),
        "{replay:#?}"
    );
    prompt_ok(&mut b, &session, "B continues");
    assert_eq!(space.db.lease(&session), (None, None));
    let body = server.wait_requests(2, WAIT)[1].body.clone();
    let messages = conversation(&body);
    assert_eq!(messages[0], json!({"role": "user", "content": "A starts"}));
    assert_eq!(
        messages.last(),
        Some(&json!({"role": "user", "content": "B continues"}))
    );
    finish(b);
    space.db.assert_sound();
}

/// B opened the session while A was alive and running a turn; A then dies
/// and B's prompt takes the lease over. A's cut-off turn must be closed as
/// interrupted at that point, before B's turn, not left running (to be
/// closed after B's turn by some later load).
#[test]
fn a_turn_cut_off_while_another_process_had_the_session_open_is_closed_in_order() {
    let space = Space::new("takeover-open");
    let server = FakeServer::start();
    server.push(Reply::Sse(vec![
        chunk_role(),
        chunk_content("Half"),
        Step::Stall,
    ]));
    server.push(Reply::Sse(chat_text(&["B took over."])));
    let mut a = space.openai(&server);
    let session = a.new_session(&space.ws);
    let mut b = space.openai(&server);
    let _prompt = a.request("session/prompt", text_prompt(&session, "A starts"));
    wait_for_update(&mut a, &session, |u| chunk_text(u) == "Half");

    // A is alive and holds the lease: B's load does not close its turn.
    let replay = load(&mut b, &session, space.ws());
    assert!(!replay.iter().any(is_interrupted_note), "{replay:#?}");
    assert_eq!(texts_of(&replay, "user_message_chunk"), ["A starts"]);
    a.kill();

    prompt_ok(&mut b, &session, "B continues");
    let turns = space.db.turns(&session);
    assert!(
        turns.iter().all(|t| t.state != "running"),
        "A's turn stays running after B took the session over: {turns:?}"
    );
    finish(b);
    let mut c = space.reader();
    let replay = load(&mut c, &session, space.ws());
    let note = replay.iter().position(is_interrupted_note);
    let b_prompt = replay
        .iter()
        .position(|u| kind(u) == "user_message_chunk" && chunk_text(u) == "B continues");
    assert!(
        note.is_some() && b_prompt.is_some() && note < b_prompt,
        "the interrupted note must close A's turn before B's turn: {replay:#?}"
    );
    finish(c);
    space.db.assert_sound();
}

/// Two processes, two sessions each, all prompting at the same time.
#[test]
fn concurrent_turns_in_two_processes_all_land() {
    const ROUNDS: usize = 20;
    let space = Space::new("concurrent");
    let script = json!({"rules": [{"when": {"starts_with": "round"}, "replies": [
        {"text": "Planning. ", "tool_calls": [{"name": "todo_write", "arguments": {"todos": [
            {"content": "Answer", "status": "in_progress"}
        ]}}]},
        {"text": "Round done."}
    ]}]});
    let workers: Vec<thread::JoinHandle<(u32, Vec<String>)>> = (0..2)
        .map(|_| {
            let mut agent = space.scripted(&script);
            let sessions = vec![agent.new_session(&space.ws), agent.new_session(&space.ws)];
            thread::spawn(move || {
                for round in 0..ROUNDS {
                    let ids: Vec<Value> = sessions
                        .iter()
                        .map(|s| {
                            agent.request(
                                "session/prompt",
                                text_prompt(s, &format!("round {round}")),
                            )
                        })
                        .collect();
                    let (answers, _) = wait_answers(&mut agent, &ids);
                    for answer in answers.values() {
                        assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
                    }
                }
                let pid = agent.pid();
                finish(agent);
                (pid, sessions)
            })
        })
        .collect();
    let mut sessions = Vec::new();
    for worker in workers {
        let (_, mine) = worker.join().expect("a worker failed");
        sessions.extend(mine);
    }
    space.db.assert_sound();
    let mut reader = space.reader();
    for session in &sessions {
        let turns = space.db.turns(session);
        assert_eq!(turns.len(), ROUNDS, "{session}: {turns:?}");
        assert!(
            turns
                .iter()
                .all(|t| t.state == "ended" && t.stop_reason.as_deref() == Some("end_turn")),
            "{session}: {turns:?}"
        );
        assert!(space.db.seq_is_contiguous("events", session));
        assert!(space.db.seq_is_contiguous("messages", session));
        let messages = space.db.messages(session);
        assert_eq!(messages.len(), ROUNDS * 4, "{session}");
        assert_tool_calls_answered(&messages);
        let replay = load(&mut reader, session, space.ws());
        let users = texts_of(&replay, "user_message_chunk");
        let expected: Vec<String> = (0..ROUNDS).map(|r| format!("round {r}")).collect();
        assert_eq!(users, expected, "{session}");
        let texts = texts_of(&replay, "agent_message_chunk");
        assert_eq!(
            texts.iter().filter(|t| *t == "Round done.").count(),
            ROUNDS,
            "{session}"
        );
        check_tool_calls(&replay);
    }
    finish(reader);
}

/// Several agents started at once on a database that does not exist yet
/// (an editor opening a few windows): every one of them can use it.
#[test]
fn agents_started_at_once_on_a_new_database_all_work() {
    const AGENTS: usize = 6;
    let space = Space::new("first-open");
    let mut agents: Vec<Agent> = (0..AGENTS).map(|_| space.reader()).collect();
    let ids: Vec<Value> = agents
        .iter_mut()
        .map(|agent| agent.request("session/new", json!({"cwd": space.ws(), "mcpServers": []})))
        .collect();
    let mut failures = Vec::new();
    for (index, (agent, id)) in agents.iter_mut().zip(&ids).enumerate() {
        let (response, _) = agent.response(id, WAIT);
        if response.get("result").is_none() {
            failures.push(format!("agent {index}, session/new: {}", response["error"]));
        }
    }
    // And afterwards, once nobody else is opening it.
    for (index, agent) in agents.iter_mut().enumerate() {
        if let (Err(error), _) = call(agent, "session/list", json!({})) {
            failures.push(format!("agent {index}, a later session/list: {error}"));
        }
    }
    assert!(
        failures.is_empty(),
        "agents could not use the new database:\n{}",
        failures.join("\n")
    );
    for agent in agents {
        finish(agent);
    }
    space.db.assert_sound();
    assert_eq!(space.db.session_ids().len(), AGENTS);
}

// ---------------------------------------------------------------------------
// 7. A database written by a newer Spindle.

/// Makes a database with one session through `spindle`, then lets `alter`
/// change it with rusqlite. Returns the session id.
fn made_database(space: &Space, db: &Db, alter: &str) -> String {
    let mut agent = space.scripted_on(db, &json!({"fallback": {"text": "Hi."}}));
    let session = agent.new_session(&space.ws);
    prompt_ok(&mut agent, &session, "hello");
    finish(agent);
    db.connect()
        .execute_batch(alter)
        .unwrap_or_else(|e| panic!("cannot alter the database: {e}"));
    session
}

/// Every session request fails with a message naming the newer Spindle;
/// the agent keeps answering, and the file is left byte for byte.
fn assert_refused_untouched(space: &Space, db: &Db, session: &str) {
    let before = fs::read(db.path()).expect("cannot read the database");
    let mut agent = space.scripted_on(db, &json!({"replies": []}));
    let requests = [
        ("session/new", json!({"cwd": space.ws(), "mcpServers": []})),
        ("session/list", json!({})),
        (
            "session/load",
            json!({"sessionId": session, "cwd": space.ws(), "mcpServers": []}),
        ),
        (
            "session/resume",
            json!({"sessionId": session, "cwd": space.ws()}),
        ),
        ("session/delete", json!({"sessionId": session})),
        ("session/new", json!({"cwd": space.ws(), "mcpServers": []})),
    ];
    for (method, params) in requests {
        let error = err(&mut agent, method, params);
        assert!(
            message(&error).contains("newer Spindle"),
            "{method}: {error}"
        );
    }
    // Still alive and answering.
    agent.initialize();
    finish(agent);
    assert!(
        fs::read(db.path()).expect("cannot read the database") == before,
        "the database file was changed"
    );
}

#[test]
fn a_database_from_a_newer_spindle_is_refused_and_left_alone() {
    let space = Space::new("newer");
    let db = Db::new(space.base.join("newer.db"));
    let session = made_database(&space, &db, "PRAGMA user_version = 99");
    assert_eq!(db.user_version(), 99);
    assert_refused_untouched(&space, &db, &session);
    assert_eq!(db.user_version(), 99);
    assert_eq!(db.integrity_check(), "ok");
}

/// The same with a database in rollback-journal mode (a newer Spindle, or
/// another tool, may well use it): refusing it must not switch it to WAL
/// first.
#[test]
fn a_newer_database_in_rollback_journal_mode_is_left_alone_too() {
    let space = Space::new("newer-journal");
    let db = Db::new(space.base.join("newer.db"));
    let session = made_database(
        &space,
        &db,
        "PRAGMA journal_mode = DELETE; PRAGMA user_version = 99;",
    );
    let mode: String = db
        .connect()
        .query_row("PRAGMA journal_mode", [], |row| row.get(0))
        .expect("cannot read journal_mode");
    assert_eq!(mode, "delete");
    assert_refused_untouched(&space, &db, &session);
}

#[test]
fn a_file_that_is_not_a_database_is_reported_and_left_alone() {
    let space = Space::new("not-db");
    let db = Db::new(space.base.join("notes.db"));
    let junk = "These are my notes, not a database.\n".repeat(200);
    fs::write(db.path(), &junk).expect("cannot write");
    let mut agent = space.scripted_on(&db, &json!({"replies": []}));
    for _ in 0..2 {
        let error = err(
            &mut agent,
            "session/new",
            json!({"cwd": space.ws(), "mcpServers": []}),
        );
        assert!(message(&error).contains(&db.arg()), "{error}");
    }
    finish(agent);
    assert_eq!(fs::read_to_string(db.path()).unwrap(), junk);
}

// ---------------------------------------------------------------------------
// 8. Titles.

#[test]
fn the_first_prompt_titles_the_session_once() {
    let space = Space::new("titles");
    let mut agent = space.scripted(&json!({"fallback": {"text": "Sure."}}));
    let session = agent.new_session(&space.ws);
    let first = prompt_ok(
        &mut agent,
        &session,
        "  \n   Refactor   the parser module  \nand keep the tests green",
    );
    assert_eq!(kind(&first[0]), "session_info_update", "{first:#?}");
    assert_eq!(first[0]["title"], "Refactor the parser module");
    assert!(looks_like_rfc3339(
        first[0]["updatedAt"].as_str().unwrap_or_default()
    ));
    assert_eq!(
        first
            .iter()
            .filter(|u| kind(u) == "session_info_update")
            .count(),
        1
    );
    let second = prompt_ok(&mut agent, &session, "Another thing entirely");
    assert!(
        !second.iter().any(|u| kind(u) == "session_info_update"),
        "{second:#?}"
    );
    let entry = listed(&mut agent, &session).expect("listed");
    assert_eq!(entry["title"], "Refactor the parser module");

    // A long first line is cut short, at a word boundary.
    let long = agent.new_session(&space.ws);
    let words = "supercalifragilistic word ".repeat(8);
    let updates = prompt_ok(&mut agent, &long, &words);
    let title = updates[0]["title"].as_str().unwrap_or_default().to_string();
    let stem = title.trim_end_matches('…');
    assert!(
        stem.chars().count() <= 60 && !stem.is_empty(),
        "title {title:?} is too long"
    );
    assert!(words.starts_with(stem), "title {title:?}");

    // The title survives a reload, and is not sent again by another process.
    finish(agent);
    let mut other = space.scripted(&json!({"fallback": {"text": "Yes."}}));
    let entry = listed(&mut other, &session).expect("listed");
    assert_eq!(entry["title"], "Refactor the parser module");
    let replay = load(&mut other, &session, space.ws());
    assert_eq!(
        replay
            .iter()
            .filter(|u| kind(u) == "session_info_update")
            .count(),
        1,
        "{replay:#?}"
    );
    let third = prompt_ok(&mut other, &session, "Third");
    assert!(
        !third.iter().any(|u| kind(u) == "session_info_update"),
        "{third:#?}"
    );
    // A session opened in another process before its first prompt gets
    // its title there.
    let fresh = other.new_session(&space.ws);
    finish(other);
    let mut third_process = space.scripted(&json!({"fallback": {"text": "Ok."}}));
    resume(&mut third_process, &fresh, space.ws());
    let updates = prompt_ok(&mut third_process, &fresh, "Named late");
    assert_eq!(updates[0]["title"], "Named late", "{updates:#?}");
    finish(third_process);
    assert_eq!(space.db.title(&fresh).as_deref(), Some("Named late"));
}

// ---------------------------------------------------------------------------
// 9. Unknown ids and sessions that are stored but not open.

#[test]
fn unknown_session_ids_are_not_found_and_stored_ones_must_be_opened_first() {
    let space = Space::new("unknown");
    let mut agent = space.scripted(&json!({"fallback": {"text": "Hi."}}));
    let unknown = "sess_does_not_exist";
    let requests = [
        (
            "session/load",
            json!({"sessionId": unknown, "cwd": space.ws(), "mcpServers": []}),
        ),
        (
            "session/resume",
            json!({"sessionId": unknown, "cwd": space.ws()}),
        ),
        ("session/close", json!({"sessionId": unknown})),
        ("session/prompt", text_prompt(unknown, "hi")),
    ];
    for (method, params) in requests {
        let error = err(&mut agent, method, params);
        assert_eq!(error["code"], NOT_FOUND, "{method}: {error}");
        assert!(message(&error).contains(unknown), "{method}: {error}");
    }
    // Bad params of load and resume.
    let error = err(
        &mut agent,
        "session/load",
        json!({"sessionId": unknown, "cwd": space.ws()}),
    );
    assert_eq!(
        error["code"], INVALID_PARAMS,
        "load needs mcpServers: {error}"
    );
    let error = err(
        &mut agent,
        "session/resume",
        json!({"sessionId": unknown, "cwd": "relative"}),
    );
    assert_eq!(error["code"], INVALID_PARAMS, "{error}");

    // Stored, but not open in this process.
    let session = agent.new_session(&space.ws);
    prompt_ok(&mut agent, &session, "hello");
    finish(agent);
    let mut other = space.scripted(&json!({"fallback": {"text": "Hi again."}}));
    let error = err(&mut other, "session/prompt", text_prompt(&session, "hi"));
    assert_eq!(error["code"], INVALID_REQUEST, "{error}");
    let text = message(&error);
    assert!(
        text.contains("session/load") && text.contains("session/resume"),
        "{error}"
    );
    // Closing a stored session that is not open is harmless.
    assert_eq!(
        ok(&mut other, "session/close", json!({"sessionId": session})),
        json!({})
    );
    resume(&mut other, &session, space.ws());
    prompt_ok(&mut other, &session, "hi");
    finish(other);
}

// ---------------------------------------------------------------------------
// Where the database lives without --db.

#[test]
fn without_db_scripted_runs_use_a_temporary_database_and_others_spindle_home() {
    let space = Space::new("default-db");
    let script = space.script(&json!({"fallback": {"text": "Hi."}}));
    let tmp = space.tmpdir();
    let mut agent = Agent::spawn(&["acp", "--script", &script], &[("TMPDIR", &tmp)]);
    agent.initialize();
    let session = agent.new_session(&space.ws);
    prompt_ok(&mut agent, &session, "hello");
    let home = agent.home().to_path_buf();
    let temporary: Vec<String> = fs::read_dir(&tmp)
        .expect("cannot read TMPDIR")
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|name| name.starts_with("spindle-scripted"))
        .collect();
    assert!(!temporary.is_empty(), "no temporary database in TMPDIR");
    finish(agent);
    assert!(!home.join("spindle.db").exists());
    let left: Vec<String> = fs::read_dir(&tmp)
        .expect("cannot read TMPDIR")
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|name| name.starts_with("spindle-scripted"))
        .collect();
    assert!(left.is_empty(), "the temporary database was left: {left:?}");

    // A model-backed agent uses $SPINDLE_HOME/spindle.db.
    let server = FakeServer::start();
    let base = server.base_url();
    let mut agent = Agent::spawn(
        &["acp"],
        &[("OPENAI_BASE_URL", &base), ("OPENAI_API_KEY", "sk-test")],
    );
    agent.initialize();
    let session = agent.new_session(&space.ws);
    let db = Db::new(agent.home().join("spindle.db"));
    assert!(db.path().exists(), "no database in SPINDLE_HOME");
    assert_eq!(db.session_ids(), vec![session]);
    finish(agent);
}

// ---------------------------------------------------------------------------
// 10. `spindle sessions`.

struct CliRun {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

impl std::fmt::Display for CliRun {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "exit {:?}\n--- stdout ---\n{}--- stderr ---\n{}",
            self.code, self.stdout, self.stderr
        )
    }
}

/// Runs `spindle <args>` to its end (UTC, a private SPINDLE_HOME).
fn cli(space: &Space, args: &[&str]) -> CliRun {
    let home = space.base.join("cli-home");
    fs::create_dir_all(&home).expect("cannot create the CLI home");
    let output = Command::new(env!("CARGO_BIN_EXE_spindle"))
        .args(args)
        .env_remove("RUST_LOG")
        .env("SPINDLE_HOME", &home)
        .env("XDG_DATA_HOME", home.join("data"))
        .env("XDG_CONFIG_HOME", home.join("config"))
        .env("TZ", "UTC")
        .env("NO_COLOR", "1")
        .stdin(std::process::Stdio::null())
        .output()
        .expect("cannot run spindle");
    CliRun {
        code: output.status.code(),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    }
}

/// Two stored sessions: one with a tool round, one plain. Returns their
/// ids and `session/list` entries.
fn cli_fixture(space: &Space) -> (String, String, Vec<Value>) {
    let script = json!({"rules": [
        {"when": {"contains": "notes"}, "replies": [
            {"text": "Writing the notes.", "tool_calls": [
                {"id": "write_1", "name": "write_file",
                 "arguments": {"path": "notes.txt", "content": "alpha\n"}}
            ]},
            {"text": "The notes are written."}
        ]},
        {"when": {"contains": "weather"}, "reply": {"text": "Sunny, probably."}}
    ]});
    let mut agent = space.scripted(&script);
    let tools = agent.new_session(&space.ws);
    prompt_ok(&mut agent, &tools, "Write the notes file");
    let plain = agent.new_session(&space.ws);
    prompt_ok(&mut agent, &plain, "How is the weather?");
    let (entries, _) = list_all(&mut agent, None);
    finish(agent);
    (tools, plain, entries)
}

#[test]
fn the_sessions_command_lists_shows_and_deletes() {
    let space = Space::new("cli");
    let (tools, plain, entries) = cli_fixture(&space);
    let db = space.db.arg();

    for args in [
        vec!["sessions", "--db", db.as_str()],
        vec!["sessions", "list", "--db", db.as_str()],
    ] {
        let run = cli(&space, &args);
        assert_eq!(run.code, Some(0), "spindle {args:?}\n{run}");
        for entry in &entries {
            let id = entry["sessionId"].as_str().unwrap_or_default();
            let lines: Vec<&str> = run.stdout.lines().filter(|l| l.contains(id)).collect();
            assert_eq!(lines.len(), 1, "one line for {id}\n{run}");
            let title = entry["title"].as_str().unwrap_or_default();
            assert!(lines[0].contains(title), "{id}: no title {title:?}\n{run}");
            let updated = entry["updatedAt"].as_str().unwrap_or_default();
            assert!(
                lines[0].contains(&updated[..10]),
                "{id}: no updated time ({updated})\n{run}"
            );
        }
    }

    let run = cli(&space, &["sessions", "show", &tools, "--db", &db]);
    assert_eq!(run.code, Some(0), "{run}");
    for expected in [
        "Write the notes file",
        "Writing the notes.",
        "The notes are written.",
        "notes.txt",
        "completed",
    ] {
        assert!(run.stdout.contains(expected), "no {expected:?}\n{run}");
    }
    assert!(
        !run.stdout.contains("How is the weather?"),
        "another session's text\n{run}"
    );

    let run = cli(&space, &["sessions", "delete", &plain, "--db", &db]);
    assert_eq!(run.code, Some(0), "{run}");
    assert!(
        run.stdout.contains(&plain),
        "no confirmation naming the session\n{run}"
    );
    assert_eq!(space.db.session_ids(), vec![tools.clone()]);
    let run = cli(&space, &["sessions", "--db", &db]);
    assert!(
        !run.stdout.contains(&plain) && run.stdout.contains(&tools),
        "{run}"
    );
    let mut agent = space.reader();
    let (all, _) = list_all(&mut agent, None);
    assert_eq!(ids_of(&all), vec![tools.clone()]);
    finish(agent);
    space.db.assert_sound();
}

#[test]
fn the_sessions_command_reports_failures_with_exit_codes() {
    let space = Space::new("cli-errors");
    let (tools, _, _) = cli_fixture(&space);
    let db = space.db.arg();
    for action in ["show", "delete"] {
        let run = cli(&space, &["sessions", action, "sess_nope", "--db", &db]);
        assert_eq!(run.code, Some(1), "{action} of an unknown id\n{run}");
        assert!(run.stderr.contains("sess_nope"), "{action}\n{run}");
    }
    for args in [
        vec!["sessions", "show", "--db", db.as_str()],
        vec!["sessions", "frobnicate", "--db", db.as_str()],
        vec!["sessions", "--no-such-flag"],
        vec!["sessions", "list", "--db"],
    ] {
        let run = cli(&space, &args);
        assert_eq!(run.code, Some(2), "usage error: spindle {args:?}\n{run}");
        assert!(!run.stderr.is_empty(), "{run}");
    }
    // A database from a newer Spindle: a runtime failure, file untouched.
    space.db.set_user_version(99);
    let before = fs::read(space.db.path()).unwrap();
    for args in [
        vec!["sessions", "--db", db.as_str()],
        vec!["sessions", "show", tools.as_str(), "--db", db.as_str()],
        vec!["sessions", "delete", tools.as_str(), "--db", db.as_str()],
    ] {
        let run = cli(&space, &args);
        assert_eq!(run.code, Some(1), "spindle {args:?}\n{run}");
        assert!(run.stderr.contains("newer Spindle"), "{run}");
    }
    assert!(fs::read(space.db.path()).unwrap() == before);
}

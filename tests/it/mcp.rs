//! MCP servers through the real binary: the three transports (stdio,
//! Streamable HTTP, legacy HTTP+SSE, each served by the tests' own small
//! server in `support::mcp_server`), the tools as the model sees them,
//! calls end to end with their updates and results, permissions, servers
//! that fail to start, crash, or start slowly, the environment and secrets
//! of a server, its life ending with the session or the agent, and
//! `session/load` replacing a session's servers.
//!
//! The model is the fake Chat Completions server (named in a config file,
//! `--model m`): each test queues replies that call `server__tool` tools
//! and then looks at the request bodies the agent sent.

use crate::support::client::no_requests;
use crate::support::fake_openai::{
    chat_text, chunk_finish, chunk_role, chunk_tool_call, chunk_usage, done,
};
use crate::support::mcp_server::{
    data_value, echo_schema, picture_png, stdio_args, stdio_command, stdio_server,
    stdio_server_env_map, tool_names, HttpMcp, CUSTOM_ENV, EVENTS_FILE_ENV, FAIL_TEXT,
    INIT_DELAY_ENV, PID_FILE_ENV, TOKEN_ENV,
};
use crate::support::media::base64;
use crate::support::prelude::WAIT;
use crate::support::{
    in_process, run_prompt, temp_dir, Agent, Answer, Exchange, FakeServer, Reply, Turn,
};
use serde_json::{json, Value};
use std::fs;
use std::path::{Path, PathBuf};
use std::thread;
use std::time::{Duration, Instant};

mod elicitation;
mod oauth;

/// Not a test: the stdio MCP server, when this binary is started again by
/// the agent with `SPINDLE_IT_MCP_SERVER` set (see `support::mcp_server`),
/// on systems that have no constructor for it yet.
#[cfg(not(target_os = "linux"))]
#[test]
fn stdio_server_entry() {
    use crate::support::mcp_server::{run_stdio_server, SERVER_ENV};
    if std::env::var_os(SERVER_ENV).is_none() {
        return;
    }
    run_stdio_server();
}

// ---------------------------------------------------------------------------
// The bench: a fake model, a workspace, a database, files for the servers.

struct Bench {
    model: FakeServer,
    base: PathBuf,
    ws: PathBuf,
    db: PathBuf,
}

impl Bench {
    fn new(name: &str) -> Bench {
        let base =
            spindle::os::canonical(temp_dir(name)).expect("cannot canonicalize the temp dir");
        let ws = base.join("ws");
        fs::create_dir_all(&ws).expect("cannot create the workspace");
        fs::create_dir_all(base.join("tmp")).expect("cannot create the agent's TMPDIR");
        Bench {
            model: FakeServer::start(),
            db: base.join("spindle.db"),
            base,
            ws,
        }
    }

    /// A path in the bench's directory (outside the workspace), as text.
    fn file(&self, name: &str) -> String {
        self.base
            .join(name)
            .to_str()
            .expect("UTF-8 path")
            .to_string()
    }

    /// `spindle acp --model m --db … --permissions PERMISSIONS`, not yet
    /// initialized: in process (`support::in_process`, the fake model
    /// named in a config file), or a process of its own when `env` sets
    /// variables for it.
    fn launch(&self, permissions: &str, env: &[(&str, &str)]) -> Agent {
        let db = self.db.to_str().expect("UTF-8 path");
        if env.is_empty() {
            let config =
                in_process::openai_config(&self.base, &self.model.base_url(), "sk-it-model");
            return in_process::acp(&[
                "--model",
                "m",
                "--db",
                db,
                "--permissions",
                permissions,
                "--config",
                config.to_str().expect("UTF-8 path"),
            ]);
        }
        let base_url = self.model.base_url();
        let tmp = self.file("tmp");
        let mut all_env = vec![
            ("OPENAI_BASE_URL", base_url.as_str()),
            ("OPENAI_API_KEY", "sk-it-model"),
            ("TMPDIR", tmp.as_str()),
        ];
        all_env.extend_from_slice(env);
        Agent::spawn(
            &[
                "acp",
                "--model",
                "m",
                "--db",
                db,
                "--permissions",
                permissions,
            ],
            &all_env,
        )
    }

    fn agent(&self, permissions: &str, env: &[(&str, &str)]) -> Agent {
        let mut agent = self.launch(permissions, env);
        agent.initialize();
        agent
    }

    /// The bodies of the model requests so far.
    fn bodies(&self) -> Vec<Value> {
        self.model.requests().into_iter().map(|r| r.body).collect()
    }

    /// The body of the last model request.
    fn last_body(&self) -> Value {
        self.bodies()
            .pop()
            .expect("the model got no request at all")
    }
}

impl Drop for Bench {
    fn drop(&mut self) {
        if thread::panicking() {
            eprintln!("test directory kept: {}", self.base.display());
        } else {
            let _ = fs::remove_dir_all(&self.base);
        }
    }
}

// ---------------------------------------------------------------------------
// Protocol helpers.

fn is_update(message: &Value, session: &str, kind: &str) -> bool {
    message["method"] == "session/update"
        && message["params"]["sessionId"] == session
        && message["params"]["update"]["sessionUpdate"] == kind
}

/// Receives until `done` holds for a message (which is included); panics
/// with what came if that takes longer than `timeout`.
fn collect_until(
    agent: &mut Agent,
    timeout: Duration,
    mut done: impl FnMut(&Value) -> bool,
) -> Vec<Value> {
    let deadline = Instant::now() + timeout;
    let mut seen = Vec::new();
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let Some(message) = agent.recv(left) else {
            panic!(
                "the awaited message did not come within {timeout:?}; got:\n{}",
                seen.iter()
                    .map(|m: &Value| format!("  {m}"))
                    .collect::<Vec<_>>()
                    .join("\n")
            );
        };
        let stop = done(&message);
        seen.push(message);
        if stop {
            return seen;
        }
    }
}

/// What `session/new` (or load) gave: the session id, the messages before
/// and after its answer (up to the session's `available_commands_update`,
/// which the agent sends last), and how long the answer took.
struct Opened {
    session: String,
    messages: Vec<Value>,
    took: Duration,
}

impl Opened {
    /// The text of the agent messages that mention the MCP server `name`.
    fn notes_about(&self, name: &str) -> Vec<String> {
        notes_about(&self.messages, name)
    }
}

fn notes_about(messages: &[Value], name: &str) -> Vec<String> {
    let needle = format!("`{name}`");
    messages
        .iter()
        .filter(|m| m["method"] == "session/update")
        .map(|m| &m["params"]["update"])
        .filter(|u| u["sessionUpdate"] == "agent_message_chunk")
        .filter_map(|u| u["content"]["text"].as_str())
        .filter(|text| text.contains(&needle))
        .map(str::to_string)
        .collect()
}

fn open(agent: &mut Agent, cwd: &Path, servers: Value) -> Opened {
    let started = Instant::now();
    let id = agent.request(
        "session/new",
        json!({"cwd": cwd.to_str().expect("UTF-8 path"), "mcpServers": servers}),
    );
    let (response, mut messages) = agent.response(&id, WAIT);
    let took = started.elapsed();
    let session = response["result"]["sessionId"]
        .as_str()
        .unwrap_or_else(|| panic!("session/new failed: {response}"))
        .to_string();
    let after = collect_until(agent, WAIT, |m| {
        is_update(m, &session, "available_commands_update")
    });
    messages.extend(after);
    Opened {
        session,
        messages,
        took,
    }
}

/// `session/load` with these servers; like `open`.
fn load(agent: &mut Agent, session: &str, cwd: &Path, servers: Value) -> Opened {
    let started = Instant::now();
    let id = agent.request(
        "session/load",
        json!({"sessionId": session, "cwd": cwd.to_str().expect("UTF-8 path"),
               "mcpServers": servers}),
    );
    let (response, mut messages) = agent.response(&id, WAIT);
    let took = started.elapsed();
    assert!(
        response.get("result").is_some(),
        "session/load failed: {response}"
    );
    let after = collect_until(agent, WAIT, |m| {
        is_update(m, session, "available_commands_update")
    });
    messages.extend(after);
    Opened {
        session: session.to_string(),
        messages,
        took,
    }
}

fn request_ok(agent: &mut Agent, method: &str, params: Value) -> Value {
    let id = agent.request(method, params.clone());
    let (response, _) = agent.response(&id, WAIT);
    match response.get("result") {
        Some(result) => result.clone(),
        None => panic!("{method} {params} failed: {response}"),
    }
}

// ---------------------------------------------------------------------------
// Model replies and requests.

/// A model reply calling tools: `(call id, tool name, arguments)`.
fn call_tools(calls: &[(&str, &str, Value)]) -> Reply {
    let mut steps = vec![chunk_role()];
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

fn say(text: &str) -> Reply {
    Reply::Sse(chat_text(&[text]))
}

/// The function names offered in a request.
fn offered(body: &Value) -> Vec<String> {
    body["tools"]
        .as_array()
        .map(|tools| {
            tools
                .iter()
                .filter_map(|t| t["function"]["name"].as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

/// The `function` object of the tool `name` in a request.
fn function<'a>(body: &'a Value, name: &str) -> &'a Value {
    body["tools"]
        .as_array()
        .and_then(|tools| tools.iter().find(|t| t["function"]["name"] == name))
        .map(|t| &t["function"])
        .unwrap_or_else(|| panic!("the request offers no tool {name}: {:?}", offered(body)))
}

/// Prompts until a request's body satisfies `ready` (or the usual wait
/// ends) and returns the last body: a server slower than the session's
/// first second (a loaded machine, Wine) joins later by design.
fn prompt_until(
    bench: &Bench,
    agent: &mut Agent,
    session: &str,
    ready: impl Fn(&Value) -> bool,
) -> Value {
    let deadline = std::time::Instant::now() + WAIT;
    loop {
        bench.model.push(say("Listed."));
        run_prompt(agent, session, "list", WAIT, no_requests);
        let body = bench.last_body();
        if ready(&body) || std::time::Instant::now() > deadline {
            return body;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The MCP tools (names with `__`) of a server offered in a request.
fn offered_of(body: &Value, server: &str) -> Vec<String> {
    let prefix = format!("{server}__");
    offered(body)
        .into_iter()
        .filter(|name| name.starts_with(&prefix))
        .collect()
}

fn expected_tools(server: &str, full: bool) -> Vec<String> {
    tool_names(full)
        .iter()
        .map(|tool| format!("{server}__{tool}"))
        .collect()
}

/// The content of the tool message answering `call` in a request.
fn tool_result(body: &Value, call: &str) -> String {
    body["messages"]
        .as_array()
        .and_then(|messages| {
            messages
                .iter()
                .find(|m| m["role"] == "tool" && m["tool_call_id"] == call)
        })
        .map(|m| match &m["content"] {
            Value::String(text) => text.clone(),
            other => other.to_string(),
        })
        .unwrap_or_else(|| panic!("no tool message for {call} in {body}"))
}

/// The JSON inside the first fenced block of `text`.
fn fenced_json(text: &str) -> Value {
    let start = text
        .find("```")
        .unwrap_or_else(|| panic!("no fence in {text:?}"));
    let rest = &text[start..];
    let body_start = rest.find('\n').map_or(rest.len(), |n| n + 1);
    let rest = &rest[body_start..];
    let end = rest
        .find("```")
        .unwrap_or_else(|| panic!("unclosed fence in {text:?}"));
    serde_json::from_str(&rest[..end]).unwrap_or_else(|err| panic!("{err}: {text:?}"))
}

/// Answers permission requests with `option`; any other request fails the
/// test.
fn permit(option: &'static str) -> impl FnMut(&Value) -> Answer {
    move |request: &Value| {
        assert_eq!(
            request["method"], "session/request_permission",
            "unexpected request {request}"
        );
        Answer::select(option)
    }
}

// ---------------------------------------------------------------------------
// Processes and files.

/// The pids in a pid file, one per start of the server.
fn pids(file: &str) -> Vec<u32> {
    fs::read_to_string(file)
        .unwrap_or_default()
        .lines()
        .filter_map(|line| line.trim().parse().ok())
        .collect()
}

fn wait_pids(file: &str, count: usize) -> Vec<u32> {
    let deadline = Instant::now() + WAIT;
    loop {
        let found = pids(file);
        if found.len() >= count {
            return found;
        }
        assert!(
            Instant::now() < deadline,
            "{file} got {found:?}, expected {count} pids"
        );
        thread::sleep(Duration::from_millis(20));
    }
}

/// Whether process `pid` is gone (no entry, or a zombie nobody reaped yet).
#[cfg(not(windows))]
fn gone(pid: u32) -> bool {
    match fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => stat
            .rsplit_once(") ")
            .is_some_and(|(_, rest)| rest.starts_with('Z')),
    }
}

/// Whether process `pid` is gone: it cannot be opened, or it has ended.
/// (Not `/proc`: under Wine that is the host's, whose numbers are not
/// Windows process ids.)
#[cfg(windows)]
fn gone(pid: u32) -> bool {
    use windows_sys::Win32::Foundation::{CloseHandle, STILL_ACTIVE};
    use windows_sys::Win32::System::Threading::{
        GetExitCodeProcess, OpenProcess, PROCESS_QUERY_LIMITED_INFORMATION,
    };
    // SAFETY: plain calls on a handle this function opens and closes.
    unsafe {
        let handle = OpenProcess(PROCESS_QUERY_LIMITED_INFORMATION, 0, pid);
        if handle == 0 {
            return true;
        }
        let mut code = 0u32;
        let asked = GetExitCodeProcess(handle, &mut code);
        CloseHandle(handle);
        asked == 0 || code != STILL_ACTIVE as u32
    }
}

fn wait_gone(pid: u32, limit: Duration) -> bool {
    let deadline = Instant::now() + limit;
    while Instant::now() < deadline {
        if gone(pid) {
            return true;
        }
        thread::sleep(Duration::from_millis(20));
    }
    gone(pid)
}

/// The lines of a server's event file.
fn events(file: &str) -> Vec<String> {
    fs::read_to_string(file)
        .unwrap_or_default()
        .lines()
        .map(str::to_string)
        .collect()
}

fn wait_event(file: &str, wanted: impl Fn(&str) -> bool) -> Vec<String> {
    let deadline = Instant::now() + WAIT;
    loop {
        let lines = events(file);
        if lines.iter().any(|line| wanted(line)) {
            return lines;
        }
        assert!(
            Instant::now() < deadline,
            "the awaited event never came; events of {file}: {lines:?}"
        );
        thread::sleep(Duration::from_millis(20));
    }
}

fn final_text_of(turn: &Turn, id: &str) -> String {
    turn.final_text(id)
}

// ---------------------------------------------------------------------------
// Capabilities and tool lists.

#[test]
fn initialize_advertises_http_and_sse_mcp_servers() {
    let bench = Bench::new("mcp-init");
    let mut agent = bench.launch("yolo", &[]);
    let result = agent.initialize();
    assert_eq!(
        result["agentCapabilities"]["mcpCapabilities"],
        json!({"http": true, "sse": true}),
        "{result}"
    );
}

#[test]
fn stdio_tools_are_offered_namespaced_with_the_server_schemas() {
    let bench = Bench::new("mcp-list");
    let mut agent = bench.launch("yolo", &[]);
    agent.initialize_with_events();
    let opened = open(&mut agent, &bench.ws, json!([stdio_server("local", &[])]));
    assert!(
        opened.notes_about("local").is_empty(),
        "the server started fine, yet: {:?}",
        opened.notes_about("local")
    );
    // The server's state: an `mcp` event after the answer, and in status.
    let event = collect_until(&mut agent, WAIT, |m| {
        m["method"] == "_spindle/event" && m["params"]["kind"] == "mcp"
    });
    let servers = &event.last().unwrap()["params"]["data"]["servers"];
    assert_eq!(servers[0]["name"], "local");
    assert_eq!(servers[0]["state"], "ready");
    let status = request_ok(
        &mut agent,
        "_spindle/session/status",
        json!({"sessionId": opened.session}),
    );
    assert_eq!(status["mcp"][0]["state"], "ready");
    assert!(status["mcp"][0]["tools"].as_u64().unwrap() > 0, "{status}");
    bench.model.push(say("I see them."));
    let turn = run_prompt(
        &mut agent,
        &opened.session,
        "Which tools do you have?",
        WAIT,
        no_requests,
    );
    assert_eq!(turn.stop_reason(), "end_turn", "{}", turn.dump());

    let body = bench.last_body();
    let mut listed = offered_of(&body, "local");
    listed.sort();
    let mut expected = expected_tools("local", true);
    expected.sort();
    // Both pages of tools/list, each tool once.
    assert_eq!(listed, expected, "offered: {:?}", offered(&body));
    assert!(
        offered(&body).iter().any(|name| name == "read_file"),
        "the built-in tools stay: {:?}",
        offered(&body)
    );
    assert_eq!(
        function(&body, "local__echo"),
        &json!({"name": "local__echo", "description": "Says the text back",
                "parameters": echo_schema()}),
    );
    // A bare object schema gets the `properties` OpenAI insists on.
    assert_eq!(
        function(&body, "local__picture")["parameters"],
        json!({"type": "object", "properties": {}})
    );
    assert_eq!(
        function(&body, "local__crash")["parameters"],
        json!({"type": "object", "properties": {"marker": {"type": "string"}}})
    );
}

// ---------------------------------------------------------------------------
// Calls end to end.

#[test]
fn stdio_tool_calls_show_text_images_structured_data_and_errors() {
    let bench = Bench::new("mcp-calls");
    let mut agent = bench.agent("yolo", &[]);
    let opened = open(&mut agent, &bench.ws, json!([stdio_server("local", &[])]));
    bench.model.push(call_tools(&[
        ("c-echo", "local__echo", json!({"text": "hi there"})),
        ("c-pic", "local__picture", json!({})),
        ("c-data", "local__data", json!({})),
        ("c-fail", "local__fail", json!({})),
    ]));
    bench.model.push(say("All done."));
    let turn = run_prompt(
        &mut agent,
        &opened.session,
        "Use them all",
        WAIT,
        no_requests,
    );
    assert_eq!(turn.stop_reason(), "end_turn", "{}", turn.dump());
    turn.assert_every_tool_call_finished();
    assert_eq!(
        turn.tool_call_ids(),
        ["c-echo", "c-pic", "c-data", "c-fail"],
        "{}",
        turn.dump()
    );

    // Announcements: kind from readOnlyHint, a title naming server and
    // tool, the arguments as rawInput.
    let echo = turn.tool_call("c-echo");
    assert_eq!(echo["kind"], "read", "{echo}");
    assert_eq!(echo["status"], "pending", "{echo}");
    assert_eq!(echo["rawInput"], json!({"text": "hi there"}), "{echo}");
    let title = echo["title"].as_str().unwrap_or_default();
    assert!(
        title.contains("local") && title.contains("echo"),
        "title {title:?}"
    );
    for id in ["c-pic", "c-data", "c-fail"] {
        assert_eq!(
            turn.tool_call(id)["kind"],
            "other",
            "{}",
            turn.tool_call(id)
        );
    }

    assert_eq!(
        turn.statuses("c-echo"),
        ["pending", "in_progress", "completed"]
    );
    assert_eq!(final_text_of(&turn, "c-echo"), "stdio echo: hi there");

    assert_eq!(turn.final_status("c-pic"), "completed");
    let picture = turn.final_content("c-pic");
    assert!(
        picture.contains(&json!({"type": "content", "content": {
            "type": "image", "data": base64(&picture_png()), "mimeType": "image/png"}})),
        "the image block is shown as it came: {picture:?}"
    );
    assert!(final_text_of(&turn, "c-pic").contains("a red dot"));

    assert_eq!(turn.final_status("c-data"), "completed");
    assert_eq!(fenced_json(&final_text_of(&turn, "c-data")), data_value());

    assert_eq!(turn.final_status("c-fail"), "failed", "{}", turn.dump());
    assert!(
        final_text_of(&turn, "c-fail").contains(FAIL_TEXT),
        "{}",
        turn.dump()
    );

    // What the model got back.
    let body = bench.last_body();
    assert_eq!(tool_result(&body, "c-echo"), "stdio echo: hi there");
    let picture = tool_result(&body, "c-pic");
    assert!(
        picture.contains("a red dot") && picture.contains("image/png"),
        "{picture:?}"
    );
    assert!(
        !picture.contains(&base64(&picture_png())),
        "no base64 in a text-only tool result: {picture:?}"
    );
    let data = tool_result(&body, "c-data");
    let parsed: Value = serde_json::from_str(data.trim())
        .or_else(|_| Ok::<Value, ()>(fenced_json(&data)))
        .unwrap();
    assert_eq!(parsed, data_value(), "{data:?}");
    assert!(tool_result(&body, "c-fail").contains(FAIL_TEXT));
}

/// the MCP specification, `tools/call`: `isError` results go to the model marked as errors ("for
/// OpenAI formats, prefix the text with an error marker"), as the built-in
/// tools' failures are ("Error: …").
#[test]
fn an_mcp_tool_error_reaches_the_model_marked_as_an_error() {
    let bench = Bench::new("mcp-iserror");
    let mut agent = bench.agent("yolo", &[]);
    let opened = open(&mut agent, &bench.ws, json!([stdio_server("local", &[])]));
    bench
        .model
        .push(call_tools(&[("c-fail", "local__fail", json!({}))]));
    bench.model.push(say("I see."));
    let turn = run_prompt(&mut agent, &opened.session, "Fail", WAIT, no_requests);
    assert_eq!(turn.stop_reason(), "end_turn", "{}", turn.dump());
    assert_eq!(turn.final_status("c-fail"), "failed");
    let result = tool_result(&bench.last_body(), "c-fail");
    assert!(result.contains(FAIL_TEXT), "{result:?}");
    assert!(
        result.to_lowercase().contains("error"),
        "the model cannot tell this result from a success: {result:?}"
    );
}

#[test]
fn cancelling_a_slow_mcp_call_answers_promptly_and_tells_the_server() {
    let bench = Bench::new("mcp-cancel");
    let events_file = bench.file("events.log");
    let mut agent = bench.agent("yolo", &[]);
    let opened = open(
        &mut agent,
        &bench.ws,
        json!([stdio_server("local", &[(EVENTS_FILE_ENV, &events_file)])]),
    );
    bench.model.push(call_tools(&[(
        "c-slow",
        "local__slow",
        json!({"ms": 30000}),
    )]));
    let mut exchange = Exchange::prompt(&mut agent, &opened.session, "Take your time");
    let running = exchange.until(&mut agent, WAIT, &mut no_requests, &mut |x: &Exchange| {
        x.messages.iter().any(|m| {
            m["params"]["update"]["toolCallId"] == "c-slow"
                && m["params"]["update"]["status"] == "in_progress"
        })
    });
    assert!(running, "the slow call never started");
    wait_event(&events_file, |line| line == "tools/call slow");
    let cancelled_at = Instant::now();
    agent.notify("session/cancel", json!({"sessionId": opened.session}));
    let turn = exchange.finish(&mut agent, WAIT, &mut no_requests);
    assert!(
        cancelled_at.elapsed() < Duration::from_secs(5),
        "the cancel took {:?}",
        cancelled_at.elapsed()
    );
    assert_eq!(turn.stop_reason(), "cancelled", "{}", turn.dump());
    assert_eq!(turn.final_status("c-slow"), "failed");
    turn.assert_every_tool_call_finished();
    wait_event(&events_file, |line| {
        line.starts_with("notifications/cancelled")
    });
}

// ---------------------------------------------------------------------------
// Permissions.

#[test]
fn in_ask_mode_an_mcp_tool_asks_first_and_a_rejected_call_never_reaches_the_server() {
    let bench = Bench::new("mcp-ask");
    let events_file = bench.file("events.log");
    let mut agent = bench.agent("ask", &[]);
    let opened = open(
        &mut agent,
        &bench.ws,
        json!([stdio_server("local", &[(EVENTS_FILE_ENV, &events_file)])]),
    );

    bench
        .model
        .push(call_tools(&[("c-1", "local__env", json!({}))]));
    bench.model.push(say("ok"));
    let turn = run_prompt(
        &mut agent,
        &opened.session,
        "env please",
        WAIT,
        permit("allow_once"),
    );
    assert_eq!(turn.stop_reason(), "end_turn", "{}", turn.dump());
    let asked = turn.requests("session/request_permission");
    assert_eq!(asked.len(), 1, "{}", turn.dump());
    let tool_call = &asked[0]["params"]["toolCall"];
    assert_eq!(tool_call["toolCallId"], "c-1");
    assert_eq!(tool_call["kind"], "other");
    assert!(
        tool_call["title"]
            .as_str()
            .is_some_and(|t| t.contains("env")),
        "{tool_call}"
    );
    assert_eq!(turn.final_status("c-1"), "completed", "{}", turn.dump());

    // A rejection ends the turn: no second model request.
    bench
        .model
        .push(call_tools(&[("c-2", "local__env", json!({}))]));
    let turn = run_prompt(
        &mut agent,
        &opened.session,
        "env again",
        WAIT,
        permit("reject_once"),
    );
    assert_eq!(turn.permission_ids(), ["c-2"], "{}", turn.dump());
    assert_eq!(turn.final_status("c-2"), "failed", "{}", turn.dump());
    assert!(
        !turn.statuses("c-2").iter().any(|s| s == "in_progress"),
        "{}",
        turn.dump()
    );
    let calls: Vec<String> = events(&events_file)
        .into_iter()
        .filter(|line| line.starts_with("tools/call"))
        .collect();
    assert_eq!(
        calls,
        ["tools/call env"],
        "only the allowed call reached the server"
    );

    // "Always allow" covers later calls of that tool in the session.
    bench
        .model
        .push(call_tools(&[("c-3", "local__env", json!({}))]));
    bench.model.push(say("ok"));
    let turn = run_prompt(
        &mut agent,
        &opened.session,
        "env, always",
        WAIT,
        permit("allow_always"),
    );
    assert_eq!(turn.permission_ids(), ["c-3"], "{}", turn.dump());
    assert_eq!(turn.final_status("c-3"), "completed");
    bench.model.push(call_tools(&[
        ("c-4", "local__env", json!({})),
        ("c-5", "local__fail", json!({})),
    ]));
    bench.model.push(say("ok"));
    let turn = run_prompt(
        &mut agent,
        &opened.session,
        "env, again",
        WAIT,
        permit("allow_once"),
    );
    assert_eq!(
        turn.permission_ids(),
        ["c-5"],
        "only the other tool asks: {}",
        turn.dump()
    );
    assert_eq!(turn.final_status("c-4"), "completed");
}

#[test]
fn plan_mode_offers_only_the_read_only_mcp_tools() {
    let bench = Bench::new("mcp-plan");
    let mut agent = bench.agent("yolo", &[]);
    let opened = open(&mut agent, &bench.ws, json!([stdio_server("local", &[])]));
    request_ok(
        &mut agent,
        "session/set_mode",
        json!({"sessionId": opened.session, "modeId": "plan"}),
    );
    bench.model.push(call_tools(&[
        ("c-echo", "local__echo", json!({"text": "plan"})),
        ("c-env", "local__env", json!({})),
    ]));
    bench.model.push(say("Planned."));
    let turn = run_prompt(&mut agent, &opened.session, "plan", WAIT, no_requests);
    assert_eq!(turn.stop_reason(), "end_turn", "{}", turn.dump());
    let first = &bench.bodies()[0];
    assert_eq!(offered_of(first, "local"), ["local__echo"]);
    assert_eq!(turn.final_status("c-echo"), "completed");
    assert_eq!(
        turn.final_status("c-env"),
        "failed",
        "a tool that may change things is refused in plan mode: {}",
        turn.dump()
    );
}

#[test]
fn exposed_names_are_sanitised_and_deduplicated_and_calls_reach_the_right_server() {
    let bench = Bench::new("mcp-names");
    let mut agent = bench.agent("yolo", &[]);
    let opened = open(
        &mut agent,
        &bench.ws,
        json!([
            stdio_server("a.b", &[(CUSTOM_ENV, "dotted")]),
            stdio_server("a_b", &[(CUSTOM_ENV, "underscored")]),
        ]),
    );
    assert!(opened.notes_about("a.b").is_empty() && opened.notes_about("a_b").is_empty());
    let body = prompt_until(&bench, &mut agent, &opened.session, |body| {
        offered(body)
            .iter()
            .filter(|n| n.starts_with("a_b__env"))
            .count()
            >= 2
    });
    let names = offered(&body);
    for name in &names {
        assert!(
            !name.is_empty()
                && name.len() <= 64
                && name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-'),
            "{name:?} is not a portable tool name"
        );
    }
    let mut unique = names.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(unique.len(), names.len(), "duplicate names: {names:?}");
    let envs: Vec<String> = names
        .iter()
        .filter(|n| n.starts_with("a_b__env"))
        .cloned()
        .collect();
    assert_eq!(envs.len(), 2, "{names:?}");

    let calls: Vec<(String, String, Value)> = envs
        .iter()
        .enumerate()
        .map(|(i, name)| (format!("c-{i}"), name.clone(), json!({})))
        .collect();
    let borrowed: Vec<(&str, &str, Value)> = calls
        .iter()
        .map(|(id, name, args)| (id.as_str(), name.as_str(), args.clone()))
        .collect();
    bench.model.push(call_tools(&borrowed));
    bench.model.push(say("Both."));
    let turn = run_prompt(&mut agent, &opened.session, "both envs", WAIT, no_requests);
    let mut customs: Vec<String> = ["c-0", "c-1"]
        .iter()
        .map(|id| {
            let report: Value = serde_json::from_str(&turn.final_text(id))
                .unwrap_or_else(|_| panic!("{}", turn.dump()));
            report["custom"].as_str().unwrap_or_default().to_string()
        })
        .collect();
    customs.sort();
    assert_eq!(customs, ["dotted", "underscored"], "{}", turn.dump());
}

#[test]
fn in_auto_mode_read_only_mcp_tools_run_freely_and_the_others_ask() {
    let bench = Bench::new("mcp-auto");
    let mut agent = bench.agent("auto", &[]);
    let opened = open(&mut agent, &bench.ws, json!([stdio_server("local", &[])]));
    bench.model.push(call_tools(&[
        ("c-echo", "local__echo", json!({"text": "free"})),
        ("c-env", "local__env", json!({})),
    ]));
    bench.model.push(say("ok"));
    let turn = run_prompt(
        &mut agent,
        &opened.session,
        "both",
        WAIT,
        permit("allow_once"),
    );
    assert_eq!(turn.stop_reason(), "end_turn", "{}", turn.dump());
    assert_eq!(turn.permission_ids(), ["c-env"], "{}", turn.dump());
    assert_eq!(turn.final_status("c-echo"), "completed");
    assert_eq!(turn.final_text("c-echo"), "stdio echo: free");
    assert_eq!(turn.final_status("c-env"), "completed");
}

// ---------------------------------------------------------------------------
// Servers that fail, crash or start slowly.

#[test]
fn a_server_that_cannot_start_is_named_once_and_the_session_still_opens() {
    let bench = Bench::new("mcp-broken");
    let missing = bench.file("no-such-mcp-server");
    let mut agent = bench.agent("yolo", &[]);
    let opened = open(
        &mut agent,
        &bench.ws,
        json!([
            {"name": "ghost", "command": missing, "args": [], "env": []},
            {"type": "http", "name": "odd", "url": "ftp://127.0.0.1/mcp", "headers": []},
            stdio_server("local", &[]),
        ]),
    );
    assert!(
        opened.took < Duration::from_secs(5),
        "session/new took {:?}",
        opened.took
    );
    let ghost = opened.notes_about("ghost");
    assert_eq!(ghost.len(), 1, "{:?}", opened.messages);
    assert!(
        ghost[0].contains("No such file") || ghost[0].contains("no-such-mcp-server"),
        "the reason is given: {ghost:?}"
    );
    let odd = opened.notes_about("odd");
    assert_eq!(odd.len(), 1, "{:?}", opened.messages);
    assert!(odd[0].contains("ftp://"), "{odd:?}");

    bench.model.push(say("Working."));
    let turn = run_prompt(&mut agent, &opened.session, "go", WAIT, no_requests);
    assert_eq!(turn.stop_reason(), "end_turn", "{}", turn.dump());
    assert!(
        notes_about(&turn.messages, "ghost").is_empty(),
        "said only once: {}",
        turn.dump()
    );
    let body = bench.last_body();
    assert_eq!(offered_of(&body, "local").len(), tool_names(true).len());
    assert!(offered_of(&body, "ghost").is_empty() && offered_of(&body, "odd").is_empty());
}

#[test]
fn a_crashed_server_is_restarted_once_per_turn() {
    let bench = Bench::new("mcp-restart");
    let pid_file = bench.file("pids");
    let mut agent = bench.agent("yolo", &[]);
    let opened = open(
        &mut agent,
        &bench.ws,
        json!([stdio_server("local", &[(PID_FILE_ENV, &pid_file)])]),
    );
    let first = wait_pids(&pid_file, 1)[0];

    bench.model.push(call_tools(&[(
        "c-crash",
        "local__crash",
        json!({"marker": bench.file("marker-1")}),
    )]));
    bench
        .model
        .push(call_tools(&[("c-env", "local__env", json!({}))]));
    bench.model.push(say("It came back."));
    let turn = run_prompt(&mut agent, &opened.session, "crash it", WAIT, no_requests);
    assert_eq!(turn.stop_reason(), "end_turn", "{}", turn.dump());
    assert_eq!(turn.final_status("c-crash"), "completed", "{}", turn.dump());
    assert_eq!(turn.final_text("c-crash"), "survived the crash");
    assert_eq!(turn.final_status("c-env"), "completed", "{}", turn.dump());
    let report: Value = serde_json::from_str(&turn.final_text("c-env")).unwrap();
    let second = wait_pids(&pid_file, 2)[1];
    assert_eq!(
        report["pid"], second,
        "the later call ran on the new server"
    );
    assert_ne!(first, second);
    assert!(
        wait_gone(first, Duration::from_secs(5)),
        "pid {first} lives"
    );
    assert!(
        notes_about(&turn.messages, "local").is_empty(),
        "{}",
        turn.dump()
    );

    // A new turn may restart it again.
    bench.model.push(call_tools(&[(
        "c-crash-2",
        "local__crash",
        json!({"marker": bench.file("marker-2")}),
    )]));
    bench.model.push(say("Again."));
    let turn = run_prompt(&mut agent, &opened.session, "once more", WAIT, no_requests);
    assert_eq!(
        turn.final_status("c-crash-2"),
        "completed",
        "{}",
        turn.dump()
    );
    assert_eq!(wait_pids(&pid_file, 3).len(), 3);
    assert!(
        notes_about(&turn.messages, "local").is_empty(),
        "{}",
        turn.dump()
    );
    assert_eq!(
        offered_of(&bench.last_body(), "local").len(),
        tool_names(true).len()
    );
}

/// Runs `calls` (one model reply each) in one turn, then a second turn,
/// and checks that the server was withdrawn: said once, tools gone.
fn assert_withdrawn_after(bench: &Bench, agent: &mut Agent, session: &str, calls: Vec<Reply>) {
    let count = calls.len();
    for reply in calls {
        bench.model.push(reply);
    }
    bench.model.push(say("It is gone."));
    let first = run_prompt(agent, session, "crash it", WAIT, no_requests);
    assert_eq!(first.stop_reason(), "end_turn", "{}", first.dump());
    first.assert_every_tool_call_finished();
    let ids = first.tool_call_ids();
    assert_eq!(ids.len(), count, "{}", first.dump());
    let last = ids.last().expect("a call");
    assert_eq!(first.final_status(last), "failed", "{}", first.dump());

    bench.model.push(say("Without it."));
    let second = run_prompt(agent, session, "and now?", WAIT, no_requests);
    assert_eq!(second.stop_reason(), "end_turn", "{}", second.dump());
    let notes: Vec<String> = notes_about(&first.messages, "local")
        .into_iter()
        .chain(notes_about(&second.messages, "local"))
        .collect();
    assert_eq!(
        notes.len(),
        1,
        "one message names the withdrawn server\nfirst turn: {}\nsecond turn: {}",
        first.dump(),
        second.dump()
    );
    assert!(notes[0].contains("withdrawn"), "{notes:?}");
    assert!(
        offered_of(&bench.last_body(), "local").is_empty(),
        "withdrawn tools are not offered: {:?}",
        offered(&bench.last_body())
    );
}

#[test]
fn a_second_crash_in_the_same_turn_withdraws_the_server() {
    let bench = Bench::new("mcp-withdraw");
    let pid_file = bench.file("pids");
    let mut agent = bench.agent("yolo", &[]);
    let opened = open(
        &mut agent,
        &bench.ws,
        json!([stdio_server("local", &[(PID_FILE_ENV, &pid_file)])]),
    );
    let calls = vec![
        call_tools(&[(
            "c-1",
            "local__crash",
            json!({"marker": bench.file("marker-1")}),
        )]),
        call_tools(&[(
            "c-2",
            "local__crash",
            json!({"marker": bench.file("marker-2")}),
        )]),
    ];
    assert_withdrawn_after(&bench, &mut agent, &opened.session, calls);
    for pid in pids(&pid_file) {
        assert!(wait_gone(pid, Duration::from_secs(5)), "pid {pid} lives");
    }
}

#[test]
#[cfg_attr(windows, ignore = "reads /proc")]
fn a_server_that_crashes_again_right_after_its_restart_is_withdrawn() {
    let bench = Bench::new("mcp-crash-twice");
    let pid_file = bench.file("pids");
    let mut agent = bench.agent("yolo", &[]);
    let opened = open(
        &mut agent,
        &bench.ws,
        json!([stdio_server("local", &[(PID_FILE_ENV, &pid_file)])]),
    );
    let calls = vec![call_tools(&[("c-1", "local__crash", json!({}))])];
    assert_withdrawn_after(&bench, &mut agent, &opened.session, calls);
    let started = pids(&pid_file);
    assert_eq!(started.len(), 2, "started, restarted once: {started:?}");
    for pid in started {
        assert!(wait_gone(pid, Duration::from_secs(5)), "pid {pid} lives");
    }
}

#[test]
#[cfg_attr(windows, ignore = "reads /proc")]
fn a_slow_server_does_not_hold_up_session_new_and_joins_later() {
    let bench = Bench::new("mcp-slow");
    let events_file = bench.file("events.log");
    let mut agent = bench.agent("yolo", &[]);
    let opened = open(
        &mut agent,
        &bench.ws,
        json!([
            stdio_server(
                "slow",
                &[(INIT_DELAY_ENV, "6000"), (EVENTS_FILE_ENV, &events_file)]
            ),
            stdio_server("quick", &[]),
        ]),
    );
    // About a second by design; loosely here, but well below the delay.
    assert!(
        opened.took < Duration::from_secs(5),
        "session/new took {:?}",
        opened.took
    );
    assert!(
        opened.notes_about("slow").is_empty(),
        "{:?}",
        opened.messages
    );

    bench.model.push(say("Early."));
    let turn = run_prompt(&mut agent, &opened.session, "early", WAIT, no_requests);
    assert_eq!(turn.stop_reason(), "end_turn", "{}", turn.dump());
    let early = bench.last_body();
    assert_eq!(offered_of(&early, "quick").len(), tool_names(true).len());

    // The second tools/list page is the last step of its start-up.
    let deadline = Instant::now() + WAIT;
    while events(&events_file)
        .iter()
        .filter(|line| *line == "tools/list")
        .count()
        < 2
    {
        assert!(Instant::now() < deadline, "{:?}", events(&events_file));
        thread::sleep(Duration::from_millis(50));
    }
    // The agent takes the page in and adds the tools on its own thread;
    // status says when the server is ready with all of them (the list the
    // next prompt offers), and the next prompt must see them.
    let deadline = Instant::now() + WAIT;
    loop {
        let status = request_ok(
            &mut agent,
            "_spindle/session/status",
            json!({"sessionId": opened.session}),
        );
        let servers = status["mcp"].as_array().cloned().unwrap_or_default();
        let slow = servers.iter().find(|server| server["name"] == "slow");
        if slow
            .is_some_and(|slow| slow["state"] == "ready" && slow["tools"] == tool_names(true).len())
        {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the slow server never came with its tools: {status}"
        );
        thread::sleep(Duration::from_millis(20));
    }

    bench.model.push(call_tools(&[(
        "c-late",
        "slow__echo",
        json!({"text": "late"}),
    )]));
    bench.model.push(say("There it is."));
    let turn = run_prompt(&mut agent, &opened.session, "now", WAIT, no_requests);
    assert_eq!(turn.stop_reason(), "end_turn", "{}", turn.dump());
    let bodies = bench.bodies();
    let later = &bodies[bodies.len() - 2];
    assert_eq!(
        offered_of(later, "slow").len(),
        tool_names(true).len(),
        "{:?}",
        offered(later)
    );
    assert_eq!(turn.final_status("c-late"), "completed", "{}", turn.dump());
    assert_eq!(turn.final_text("c-late"), "stdio echo: late");
    assert!(notes_about(&turn.messages, "slow").is_empty());
}

// ---------------------------------------------------------------------------
// Environment and secrets.

#[test]
fn env_is_added_to_the_inherited_environment_in_both_shapes() {
    let bench = Bench::new("mcp-env");
    let mut agent = bench.agent("yolo", &[]);
    let opened = open(
        &mut agent,
        &bench.ws,
        json!([
            stdio_server("arr", &[(CUSTOM_ENV, "from-array")]),
            stdio_server_env_map("map", &[(CUSTOM_ENV, "from-map")]),
        ]),
    );
    assert!(opened.notes_about("arr").is_empty() && opened.notes_about("map").is_empty());
    bench.model.push(call_tools(&[
        ("c-arr", "arr__env", json!({})),
        ("c-map", "map__env", json!({})),
    ]));
    bench.model.push(say("ok"));
    let turn = run_prompt(&mut agent, &opened.session, "env", WAIT, no_requests);
    assert_eq!(turn.stop_reason(), "end_turn", "{}", turn.dump());
    let path = std::env::var("PATH").expect("the tests run with a PATH");
    for (id, custom) in [("c-arr", "from-array"), ("c-map", "from-map")] {
        assert_eq!(turn.final_status(id), "completed", "{}", turn.dump());
        let report: Value = serde_json::from_str(&turn.final_text(id)).unwrap();
        assert_eq!(report["custom"], custom, "{report}");
        assert_eq!(report["path"], path.as_str(), "PATH survives: {report}");
    }
}

#[test]
fn secrets_stay_out_of_output_logs_database_and_model_requests() {
    const ENV_SECRET: &str = "s3cr3t-env-value";
    const HEADER_SECRET: &str = "Bearer s3cr3t-header";
    let bench = Bench::new("mcp-secrets");
    let remote = HttpMcp::streamable(HEADER_SECRET);
    let mut agent = bench.agent("yolo", &[("RUST_LOG", "debug")]);
    let opened = open(
        &mut agent,
        &bench.ws,
        json!([
            stdio_server("local", &[(TOKEN_ENV, ENV_SECRET)]),
            {"type": "http", "name": "remote", "url": remote.url(),
             "headers": [{"name": "Authorization", "value": HEADER_SECRET}]},
        ]),
    );
    assert!(
        opened.notes_about("local").is_empty() && opened.notes_about("remote").is_empty(),
        "{:?}",
        opened.messages
    );
    bench.model.push(call_tools(&[
        ("c-local", "local__echo", json!({"text": "one"})),
        ("c-remote", "remote__echo", json!({"text": "two"})),
    ]));
    bench.model.push(say("Both answered."));
    let turn = run_prompt(&mut agent, &opened.session, "call both", WAIT, no_requests);
    assert_eq!(turn.stop_reason(), "end_turn", "{}", turn.dump());
    assert_eq!(turn.final_text("c-local"), "stdio echo: one");
    assert_eq!(turn.final_text("c-remote"), "http echo: two");
    // Load it once more, so the stored descriptors are read back too.
    load(
        &mut agent,
        &opened.session,
        &bench.ws,
        json!([stdio_server("local", &[(TOKEN_ENV, ENV_SECRET)])]),
    );
    agent.close_stdin();
    assert!(agent.wait_exit(Duration::from_secs(10)).is_some());

    let stdout: String = agent
        .received()
        .iter()
        .map(|m| m.to_string())
        .collect::<Vec<_>>()
        .join("\n");
    let stderr = agent.stderr();
    assert!(
        stderr.contains("loaded token=***"),
        "the server's stderr is logged with the secret hidden:\n{stderr}"
    );
    let mut database = Vec::new();
    for suffix in ["", "-wal", "-shm", "-journal"] {
        if let Ok(bytes) = fs::read(format!("{}{suffix}", bench.db.display())) {
            database.extend(bytes);
        }
    }
    assert!(
        !database.is_empty(),
        "no database at {}",
        bench.db.display()
    );
    let requests: String = bench
        .bodies()
        .iter()
        .map(Value::to_string)
        .collect::<Vec<_>>()
        .join("\n");

    let mut leaks = Vec::new();
    for secret in [ENV_SECRET, "s3cr3t-header"] {
        if stdout.contains(secret) {
            leaks.push(format!("stdout has {secret:?}"));
        }
        if let Some(at) = stderr.find(secret) {
            let line_start = stderr[..at].rfind('\n').map_or(0, |n| n + 1);
            let line_end = stderr[at..].find('\n').map_or(stderr.len(), |n| at + n);
            let line: String = stderr[line_start..line_end].chars().take(300).collect();
            leaks.push(format!("stderr (RUST_LOG=debug) has {secret:?}: {line}"));
        }
        if database
            .windows(secret.len())
            .any(|window| window == secret.as_bytes())
        {
            leaks.push(format!("the database has {secret:?}"));
        }
        if requests.contains(secret) {
            leaks.push(format!("a model request has {secret:?}"));
        }
    }
    assert!(leaks.is_empty(), "secrets leaked:\n{}", leaks.join("\n"));
}

// ---------------------------------------------------------------------------
// The server's life.

#[test]
#[cfg_attr(windows, ignore = "reads /proc")]
fn close_delete_and_stdin_eof_stop_the_servers() {
    let bench = Bench::new("mcp-stop");
    let remote = HttpMcp::streamable("Bearer it-token");
    let (pid_a, pid_b, pid_c) = (
        bench.file("a.pid"),
        bench.file("b.pid"),
        bench.file("c.pid"),
    );
    let mut agent = bench.agent("yolo", &[]);
    let a = open(
        &mut agent,
        &bench.ws,
        json!([
            stdio_server("local", &[(PID_FILE_ENV, &pid_a)]),
            {"type": "http", "name": "remote", "url": remote.url(),
             "headers": [{"name": "Authorization", "value": "Bearer it-token"}]},
        ]),
    );
    let b = open(
        &mut agent,
        &bench.ws,
        json!([stdio_server("local", &[(PID_FILE_ENV, &pid_b)])]),
    );
    let c = open(
        &mut agent,
        &bench.ws,
        json!([stdio_server("local", &[(PID_FILE_ENV, &pid_c)])]),
    );
    let (a_pid, b_pid, c_pid) = (
        wait_pids(&pid_a, 1)[0],
        wait_pids(&pid_b, 1)[0],
        wait_pids(&pid_c, 1)[0],
    );
    assert!(!gone(a_pid) && !gone(b_pid) && !gone(c_pid));

    request_ok(&mut agent, "session/close", json!({"sessionId": a.session}));
    assert!(
        wait_gone(a_pid, Duration::from_secs(5)),
        "session/close left pid {a_pid}"
    );
    let deadline = Instant::now() + Duration::from_secs(5);
    while !remote.requests().iter().any(|r| r.method == "DELETE") {
        assert!(
            Instant::now() < deadline,
            "no DELETE ended the HTTP session: {:?}",
            remote.requests()
        );
        thread::sleep(Duration::from_millis(20));
    }
    let delete = remote
        .requests()
        .into_iter()
        .find(|r| r.method == "DELETE")
        .unwrap();
    assert_eq!(delete.header("mcp-session-id"), Some("it-session-1"));
    assert!(!gone(b_pid) && !gone(c_pid), "other sessions keep theirs");

    request_ok(
        &mut agent,
        "session/delete",
        json!({"sessionId": b.session}),
    );
    assert!(
        wait_gone(b_pid, Duration::from_secs(5)),
        "session/delete left pid {b_pid}"
    );
    assert!(!gone(c_pid));

    let _ = c;
    agent.close_stdin();
    let status = agent.wait_exit(Duration::from_secs(10));
    assert!(status.is_some_and(|s| s.success()), "exit: {status:?}");
    assert!(
        wait_gone(c_pid, Duration::from_secs(5)),
        "stdin EOF left pid {c_pid}"
    );
}

/// A server still in its (slow) handshake is stopped too: by
/// `session/close`, and by stdin EOF, long before it would have answered.
#[test]
#[cfg_attr(windows, ignore = "reads /proc")]
fn servers_still_starting_are_stopped_with_their_session_or_the_agent() {
    let bench = Bench::new("mcp-stop-starting");
    let (pid_a, pid_b) = (bench.file("a.pid"), bench.file("b.pid"));
    let mut agent = bench.agent("yolo", &[]);
    let a = open(
        &mut agent,
        &bench.ws,
        json!([stdio_server(
            "late",
            &[(INIT_DELAY_ENV, "20000"), (PID_FILE_ENV, &pid_a)]
        )]),
    );
    let _b = open(
        &mut agent,
        &bench.ws,
        json!([stdio_server(
            "late",
            &[(INIT_DELAY_ENV, "20000"), (PID_FILE_ENV, &pid_b)]
        )]),
    );
    let (a_pid, b_pid) = (wait_pids(&pid_a, 1)[0], wait_pids(&pid_b, 1)[0]);

    request_ok(&mut agent, "session/close", json!({"sessionId": a.session}));
    assert!(
        wait_gone(a_pid, Duration::from_secs(5)),
        "session/close left the starting server {a_pid}"
    );
    assert!(!gone(b_pid));

    agent.close_stdin();
    let status = agent.wait_exit(Duration::from_secs(10));
    assert!(status.is_some_and(|s| s.success()), "exit: {status:?}");
    assert!(
        wait_gone(b_pid, Duration::from_secs(5)),
        "the agent exited, yet the server it was starting ({b_pid}) still runs"
    );
}

#[test]
fn session_load_with_new_servers_replaces_the_old_ones() {
    let bench = Bench::new("mcp-load");
    let (first_pids, second_pids) = (bench.file("first.pid"), bench.file("second.pid"));
    let mut agent = bench.agent("yolo", &[]);
    let opened = open(
        &mut agent,
        &bench.ws,
        json!([stdio_server("first", &[(PID_FILE_ENV, &first_pids)])]),
    );
    let first = wait_pids(&first_pids, 1)[0];
    let body = prompt_until(&bench, &mut agent, &opened.session, |body| {
        !offered_of(body, "first").is_empty()
    });
    assert!(!offered_of(&body, "first").is_empty());

    // Loaded again in the same process, with another server.
    let loaded = load(
        &mut agent,
        &opened.session,
        &bench.ws,
        json!([stdio_server("second", &[(PID_FILE_ENV, &second_pids)])]),
    );
    assert!(
        loaded.notes_about("second").is_empty(),
        "{:?}",
        loaded.messages
    );
    assert!(
        wait_gone(first, Duration::from_secs(5)),
        "the replaced server {first} still runs"
    );
    let second = wait_pids(&second_pids, 1)[0];
    prompt_until(&bench, &mut agent, &opened.session, |body| {
        offered_of(body, "second").len() == tool_names(true).len()
    });
    bench.model.push(call_tools(&[(
        "c-second",
        "second__echo",
        json!({"text": "swapped"}),
    )]));
    bench.model.push(say("second"));
    let turn = run_prompt(&mut agent, &opened.session, "two", WAIT, no_requests);
    assert_eq!(turn.final_text("c-second"), "stdio echo: swapped");
    let bodies = bench.bodies();
    let body = &bodies[bodies.len() - 2];
    assert!(offered_of(body, "first").is_empty(), "{:?}", offered(body));
    assert_eq!(offered_of(body, "second").len(), tool_names(true).len());
    agent.close_stdin();
    agent.wait_exit(Duration::from_secs(10));
    assert!(wait_gone(second, Duration::from_secs(5)));

    // Loaded in a new process, with yet another server.
    let mut agent = bench.agent("yolo", &[]);
    let loaded = load(
        &mut agent,
        &opened.session,
        &bench.ws,
        json!([stdio_server("third", &[])]),
    );
    assert!(
        loaded.notes_about("third").is_empty(),
        "{:?}",
        loaded.messages
    );
    let body = prompt_until(&bench, &mut agent, &opened.session, |body| {
        offered_of(body, "third").len() == tool_names(true).len()
    });
    assert!(offered_of(&body, "first").is_empty() && offered_of(&body, "second").is_empty());
    assert_eq!(offered_of(&body, "third").len(), tool_names(true).len());
}

// ---------------------------------------------------------------------------
// HTTP transports.

#[test]
fn streamable_http_servers_work_end_to_end_with_auth_and_a_session_id() {
    let bench = Bench::new("mcp-http");
    let remote = HttpMcp::streamable("Bearer it-token");
    let mut agent = bench.agent("yolo", &[]);
    let opened = open(
        &mut agent,
        &bench.ws,
        json!([
            {"type": "http", "name": "remote", "url": remote.url(),
             "headers": [{"name": "Authorization", "value": "Bearer it-token"}]},
            {"type": "http", "name": "locked", "url": remote.url(),
             "headers": [{"name": "Authorization", "value": "Bearer wrong"}]},
        ]),
    );
    assert!(
        opened.notes_about("remote").is_empty(),
        "{:?}",
        opened.messages
    );
    let locked = opened.notes_about("locked");
    assert_eq!(locked.len(), 1, "{:?}", opened.messages);
    assert!(locked[0].contains("401"), "{locked:?}");

    bench.model.push(call_tools(&[
        ("h-echo", "remote__echo", json!({"text": "over http"})),
        ("h-pic", "remote__picture", json!({})),
        ("h-data", "remote__data", json!({})),
        ("h-fail", "remote__fail", json!({})),
    ]));
    bench.model.push(say("Done."));
    let turn = run_prompt(&mut agent, &opened.session, "remote", WAIT, no_requests);
    assert_eq!(turn.stop_reason(), "end_turn", "{}", turn.dump());
    let bodies = bench.bodies();
    let first = &bodies[bodies.len() - 2];
    let mut listed = offered_of(first, "remote");
    listed.sort();
    let mut expected = expected_tools("remote", false);
    expected.sort();
    assert_eq!(listed, expected);
    assert!(offered_of(first, "locked").is_empty());
    assert_eq!(function(first, "remote__echo")["parameters"], echo_schema());

    assert_eq!(turn.tool_call("h-echo")["kind"], "read");
    assert_eq!(turn.final_text("h-echo"), "http echo: over http");
    assert_eq!(turn.final_status("h-pic"), "completed");
    assert!(turn.final_content("h-pic").iter().any(|block| {
        block["content"]["type"] == "image" && block["content"]["data"] == base64(&picture_png())
    }));
    assert_eq!(fenced_json(&turn.final_text("h-data")), data_value());
    assert_eq!(turn.final_status("h-fail"), "failed");

    let requests: Vec<_> = remote
        .requests()
        .into_iter()
        .filter(|r| r.header("authorization") == Some("Bearer it-token"))
        .collect();
    let init = requests
        .iter()
        .position(|r| r.rpc_method().as_deref() == Some("initialize"))
        .expect("an initialize");
    assert_eq!(requests[init].header("mcp-session-id"), None);
    for request in &requests {
        let accept = request.header("accept").unwrap_or_default();
        if request.method == "POST" {
            assert!(
                accept.contains("application/json") && accept.contains("text/event-stream"),
                "{request:?}"
            );
        }
    }
    for request in &requests[init + 1..] {
        assert_eq!(
            request.header("mcp-session-id"),
            Some("it-session-1"),
            "{request:?}"
        );
        assert!(
            request.header("mcp-protocol-version").is_some(),
            "{request:?}"
        );
    }
    let calls = requests
        .iter()
        .filter(|r| r.rpc_method().as_deref() == Some("tools/call"))
        .count();
    assert_eq!(calls, 4);
}

#[test]
fn legacy_sse_servers_work_end_to_end_and_http_falls_back_to_them() {
    let bench = Bench::new("mcp-sse");
    let legacy = HttpMcp::legacy("Bearer it-token");
    let auth = json!([{"name": "Authorization", "value": "Bearer it-token"}]);
    let mut agent = bench.agent("yolo", &[]);
    let opened = open(
        &mut agent,
        &bench.ws,
        json!([
            {"type": "sse", "name": "old", "url": legacy.url(), "headers": auth},
            {"type": "http", "name": "guess", "url": legacy.url(), "headers": auth},
        ]),
    );
    assert!(
        opened.notes_about("old").is_empty() && opened.notes_about("guess").is_empty(),
        "{:?}",
        opened.messages
    );
    bench.model.push(call_tools(&[
        ("s-echo", "old__echo", json!({"text": "streamed"})),
        ("s-pic", "old__picture", json!({})),
        ("g-echo", "guess__echo", json!({"text": "fell back"})),
    ]));
    bench.model.push(say("Done."));
    let turn = run_prompt(&mut agent, &opened.session, "legacy", WAIT, no_requests);
    assert_eq!(turn.stop_reason(), "end_turn", "{}", turn.dump());
    let bodies = bench.bodies();
    let first = &bodies[bodies.len() - 2];
    assert_eq!(offered_of(first, "old").len(), tool_names(false).len());
    assert_eq!(offered_of(first, "guess").len(), tool_names(false).len());
    assert_eq!(turn.final_text("s-echo"), "sse echo: streamed");
    assert!(turn
        .final_content("s-pic")
        .iter()
        .any(|block| block["content"]["type"] == "image"));
    assert_eq!(turn.final_text("g-echo"), "sse echo: fell back");

    let requests = legacy.requests();
    assert!(
        requests
            .iter()
            .all(|r| r.header("authorization") == Some("Bearer it-token")),
        "{requests:?}"
    );
    let streams: Vec<_> = requests.iter().filter(|r| r.method == "GET").collect();
    assert_eq!(streams.len(), 2, "{requests:?}");
    assert!(streams.iter().all(|r| r
        .header("accept")
        .unwrap_or_default()
        .contains("text/event-stream")));
    assert!(requests
        .iter()
        .any(|r| r.method == "POST" && r.target.starts_with("/messages?sessionId=")));
}

#[test]
fn permission_rules_name_mcp_servers_and_tools_as_configured() {
    // Rules name the configured server ("a.b") and the tool's own name,
    // not the sanitised name the model sees ("a_b__env").
    let bench = Bench::new("mcp-rules");
    let config = bench.base.join("config.json");
    fs::write(
        &config,
        json!({
            "providers": {"fake": {"kind": "openai", "base_url": bench.model.base_url(),
                                   "requires_key": false}},
            "defaults": {"model": "fake/m"},
            "permissions": {"rules": [
            {"tool": "mcp", "server": "a.b", "name": "env", "decision": "deny"},
            {"tool": "mcp", "server": "a.b", "name": "echo", "decision": "allow"},
        ]}})
        .to_string(),
    )
    .unwrap();
    let base_url = bench.model.base_url();
    let tmp = bench.file("tmp");
    let mut agent = Agent::spawn(
        &[
            "acp",
            "--db",
            bench.db.to_str().unwrap(),
            "--permissions",
            "ask",
            "--on-reject",
            "continue",
            "--config",
            config.to_str().unwrap(),
        ],
        &[
            ("OPENAI_BASE_URL", base_url.as_str()),
            ("OPENAI_API_KEY", "sk-it-model"),
            ("TMPDIR", tmp.as_str()),
        ],
    );
    agent.initialize();
    let opened = open(&mut agent, &bench.ws, json!([stdio_server("a.b", &[])]));
    bench.model.push(call_tools(&[
        ("c-env", "a_b__env", json!({})),
        ("c-echo", "a_b__echo", json!({"text": "hi"})),
    ]));
    bench.model.push(say("ok"));
    let turn = run_prompt(&mut agent, &opened.session, "go", WAIT, no_requests);
    assert!(turn.permission_ids().is_empty(), "{}", turn.dump());
    assert_eq!(turn.final_status("c-env"), "failed", "{}", turn.dump());
    assert_eq!(turn.final_status("c-echo"), "completed", "{}", turn.dump());
}

/// MCP servers from the config file join the editor's; a project's own
/// (its `.spindle/config.json`, and Claude Code's `.mcp.json` with its
/// `${VAR:-default}`s) only when the user trusts the project, and never
/// one that names a provider key; `spindle mcp list` names them all.
#[test]
fn mcp_servers_from_the_config_and_a_trusted_project() {
    let bench = Bench::new("mcp-config");
    let spindle_dir = bench.ws.join(".spindle");
    fs::create_dir_all(&spindle_dir).unwrap();
    fs::write(
        spindle_dir.join("config.json"),
        json!({"mcp_servers": [stdio_server("repo", &[])]}).to_string(),
    )
    .unwrap();
    let on = "${SPINDLE_IT_UNSET_VARIABLE:-1}";
    fs::write(
        bench.ws.join(".mcp.json"),
        json!({"mcpServers": {
            "claude": {"type": "stdio", "command": stdio_command(), "args": stdio_args(),
                       "env": {crate::support::mcp_server::SERVER_ENV: on}},
            "leaky": {"command": stdio_command(), "args": stdio_args(),
                      "env": {"STOLEN": "${OPENAI_API_KEY}"}},
            "repo": {"command": "shadowed-by-the-first"},
        }})
        .to_string(),
    )
    .unwrap();
    let config = bench.base.join("config.json");
    let write = |trusted: bool| {
        let mut value = json!({
            "providers": {"fake": {"kind": "openai", "base_url": bench.model.base_url(),
                                   "requires_key": false}},
            "defaults": {"model": "fake/m"},
            "mcp_servers": [stdio_server("fromconfig", &[])],
        });
        if trusted {
            value["permissions"] =
                json!({"projects": {bench.ws.display().to_string(): {"trusted": true}}});
        }
        fs::write(&config, value.to_string()).unwrap();
    };
    let offered_servers = |trusted: bool| -> Vec<String> {
        write(trusted);
        let tmp = bench.file("tmp");
        let mut agent = Agent::spawn(
            &[
                "acp",
                "--db",
                bench.db.to_str().unwrap(),
                "--permissions",
                "yolo",
                "--config",
                config.to_str().unwrap(),
            ],
            &[("TMPDIR", tmp.as_str())],
        );
        agent.initialize();
        let opened = open(&mut agent, &bench.ws, json!([stdio_server("editor", &[])]));
        let deadline = std::time::Instant::now() + WAIT;
        loop {
            bench.model.push(say("ok"));
            run_prompt(&mut agent, &opened.session, "list", WAIT, no_requests);
            let mut servers: Vec<String> = offered(&bench.last_body())
                .iter()
                .filter_map(|n| n.split_once("__").map(|(s, _)| s.to_string()))
                .collect();
            servers.sort();
            servers.dedup();
            let want = if trusted { 4 } else { 2 };
            if servers.len() >= want || std::time::Instant::now() > deadline {
                return servers;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    };
    assert_eq!(offered_servers(false), ["editor", "fromconfig"]);
    assert_eq!(
        offered_servers(true),
        ["claude", "editor", "fromconfig", "repo"]
    );

    let out = crate::support::spindle_command(&crate::support::temp_dir("home"))
        .args(["mcp", "list", "--config", config.to_str().unwrap(), "--cwd"])
        .arg(&bench.ws)
        .output()
        .unwrap();
    let listed = String::from_utf8_lossy(&out.stdout);
    assert!(
        listed.contains("fromconfig") && listed.contains("repo"),
        "{listed}"
    );
    assert!(
        listed.contains("claude ") && listed.contains(".mcp.json)"),
        "{listed}"
    );
    assert!(
        listed.contains("mcpServers.leaky: ${OPENAI_API_KEY} is a provider key"),
        "{listed}"
    );
    assert!(!listed.contains("shadowed"), "{listed}");
    write(false);
    let out = crate::support::spindle_command(&crate::support::temp_dir("home"))
        .args(["mcp", "list", "--config", config.to_str().unwrap(), "--cwd"])
        .arg(&bench.ws)
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&out.stdout)
        .contains("is not trusted (`spindle trust` there uses it)"));
}

/// `spindle doctor` starts the config's MCP servers and lists their tools.
#[test]
fn doctor_starts_the_configured_mcp_servers() {
    let bench = Bench::new("mcp-doctor");
    bench.model.serve_models(json!({"data": [{"id": "m"}]}));
    let config = bench.base.join("config.json");
    fs::write(
        &config,
        json!({
            "providers": {"fake": {"kind": "openai", "base_url": bench.model.base_url(),
                                   "requires_key": false}},
            "mcp_servers": [stdio_server("fromconfig", &[]),
                            {"name": "broken", "command": "/nonexistent/mcp-server"}],
        })
        .to_string(),
    )
    .unwrap();
    let out = crate::support::spindle_command(&crate::support::temp_dir("home"))
        .args(["doctor", "--config", config.to_str().unwrap(), "--db"])
        .arg(bench.base.join("none.db"))
        .current_dir(&bench.ws)
        .output()
        .unwrap();
    let report = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{report}");
    assert!(report.contains("ok    fromconfig: started;"), "{report}");
    assert!(report.contains("FAIL  broken"), "{report}");
}

/// `spindle mcp add` and `remove` edit the user's config (everything else
/// in it kept): a local server with its environment after `--`, a remote
/// one with a header; a second server of a name, a server that is not
/// there and a half-given one are refused with a sentence.
#[test]
fn mcp_add_and_remove_edit_the_users_config() {
    let dir = temp_dir("mcp-add");
    let config = dir.join("config.json");
    fs::write(&config, r#"{"defaults": {"model": "fake/m"}}"#).unwrap();
    let spindle = |args: &[&str]| {
        // The config named before `--`, which ends the options; a home of
        // its own should it ever not be.
        let (action, rest) = args.split_first().unwrap();
        let out = crate::support::spindle_command(&dir.join("home"))
            .args(["mcp", action, "--config"])
            .arg(&config)
            .args(rest)
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout).into_owned()
            + &String::from_utf8_lossy(&out.stderr);
        (out.status.code(), text)
    };
    let (code, said) = spindle(&[
        "add",
        "files",
        "--env",
        "ROOT=/srv",
        "--",
        "npx",
        "-y",
        "@scope/files",
        "--root",
        ".",
    ]);
    assert_eq!(code, Some(0), "{said}");
    assert!(said.contains("Added the MCP server files"), "{said}");
    let (code, said) = spindle(&[
        "add",
        "docs",
        "--url",
        "https://mcp.example/mcp",
        "--header",
        "Authorization: Bearer t",
    ]);
    assert_eq!(code, Some(0), "{said}");
    let saved: Value = serde_json::from_str(&fs::read_to_string(&config).unwrap()).unwrap();
    assert_eq!(saved["defaults"]["model"], "fake/m");
    assert_eq!(
        saved["mcp_servers"][0],
        json!({"name": "files", "command": "npx", "args": ["-y", "@scope/files", "--root", "."],
               "env": [{"name": "ROOT", "value": "/srv"}]})
    );
    assert_eq!(
        saved["mcp_servers"][1],
        json!({"name": "docs", "type": "http", "url": "https://mcp.example/mcp",
               "headers": [{"name": "Authorization", "value": "Bearer t"}]})
    );
    let (code, said) = spindle(&["list"]);
    assert_eq!(code, Some(0), "{said}");
    assert!(
        said.contains("files  npx -y @scope/files --root ."),
        "{said}"
    );
    let (code, said) = spindle(&["add", "files", "--", "other"]);
    assert_eq!(code, Some(1), "{said}");
    assert!(
        said.contains("already has an MCP server named \"files\""),
        "{said}"
    );
    for bad in [
        &["add", "x"][..],
        &["add", "x", "--url", "https://a", "--", "cmd"],
        &["add", "x", "--env", "NOEQUALS", "--", "cmd"],
        &["add", "--url", "https://a"],
        &["frobnicate"],
    ] {
        let (code, said) = spindle(bad);
        assert_eq!(code, Some(2), "{bad:?}: {said}");
    }
    let (code, said) = spindle(&["remove", "files"]);
    assert_eq!(code, Some(0), "{said}");
    let (code, said) = spindle(&["remove", "files"]);
    assert_eq!(code, Some(1), "{said}");
    assert!(said.contains("has no MCP server named \"files\""), "{said}");
    let saved: Value = serde_json::from_str(&fs::read_to_string(&config).unwrap()).unwrap();
    assert_eq!(saved["mcp_servers"].as_array().unwrap().len(), 1);
    assert_eq!(saved["mcp_servers"][0]["name"], "docs");
}

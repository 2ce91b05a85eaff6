//! Agents as files through the real binary: `spindle acp PATH` with an
//! agent file or folder — its name in `initialize`, its model,
//! instructions and commands, a tool allow-list the model cannot escape, a
//! deny rule that holds in yolo, `maxSteps` and `limits` ending turns, the
//! editor's MCP servers merged with the file's, sessions that remember the
//! agent, a reload that reads the file again; and every bad file refused
//! with exit code 1 and one line naming the file and the field.

use crate::support::fake_openai::{chat_text, chat_tool_calls};
use crate::support::prelude::WAIT;
use crate::support::{in_process, temp_dir, write_file, Agent, FakeServer, Reply};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

struct Bench {
    server: FakeServer,
    base: PathBuf,
    ws: PathBuf,
    config: PathBuf,
    db: PathBuf,
}

impl Bench {
    fn new(name: &str) -> Bench {
        let server = FakeServer::start();
        let base = spindle::os::canonical(temp_dir(name)).unwrap();
        let ws = base.join("ws");
        std::fs::create_dir_all(&ws).unwrap();
        let config = base.join("config.json");
        std::fs::write(
            &config,
            json!({
                "providers": {"fake": {"kind": "openai", "base_url": server.base_url(),
                                       "requires_key": false}},
                "models": {"fake/alpha": {}, "fake/beta": {}},
                "defaults": {"model": "fake/alpha"},
            })
            .to_string(),
        )
        .unwrap();
        Bench {
            server,
            db: base.join("s.db"),
            base,
            ws,
            config,
        }
    }

    /// `spindle acp AGENT --config … --db … EXTRA…`, in process
    /// (`support::in_process`).
    fn agent(&self, agent_path: &Path, extra: &[&str]) -> Agent {
        let mut args = vec![
            agent_path.to_str().unwrap(),
            "--config",
            self.config.to_str().unwrap(),
            "--db",
            self.db.to_str().unwrap(),
        ];
        args.extend_from_slice(extra);
        in_process::acp(&args)
    }

    /// `spindle acp AGENT --permissions yolo`, initialized, with a session
    /// in the workspace.
    fn session(&self, agent_path: &Path) -> (Agent, String) {
        let mut agent = self.agent(agent_path, &["--permissions", "yolo"]);
        agent.initialize();
        let session = agent.new_session(&self.ws);
        (agent, session)
    }

    /// `n` replies that each call `list_directory` (a model that loops).
    fn push_tool_loops(&self, n: usize) {
        for _ in 0..n {
            self.server.push(Reply::Sse(chat_tool_calls(&[(
                "list_directory",
                json!({}),
            )])));
        }
    }

    fn bodies(&self) -> Vec<Value> {
        self.server.requests().into_iter().map(|r| r.body).collect()
    }
}

fn prompt(agent: &mut Agent, session: &str, text: &str) -> (Value, Vec<Value>) {
    let id = agent.request(
        "session/prompt",
        json!({"sessionId": session, "prompt": [{"type": "text", "text": text}]}),
    );
    agent.response(&id, WAIT)
}

fn tool_names(body: &Value) -> Vec<String> {
    let mut names: Vec<String> = body["tools"]
        .as_array()
        .map(|tools| {
            tools
                .iter()
                .map(|t| t["function"]["name"].as_str().unwrap().to_string())
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}

fn final_status(messages: &[Value], call: &str) -> String {
    messages
        .iter()
        .filter(|m| m["params"]["update"]["toolCallId"] == call)
        .filter_map(|m| m["params"]["update"]["status"].as_str())
        .next_back()
        .unwrap_or_default()
        .to_string()
}

fn tool_text(body: &Value, call: &str) -> String {
    body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["role"] == "tool" && m["tool_call_id"] == call)
        .and_then(|m| m["content"].as_str())
        .unwrap_or_default()
        .to_string()
}

#[test]
fn an_agent_file_sets_name_model_instructions_tools_and_rules() {
    let bench = Bench::new("agents-full");
    let dir = bench.base.join("reviewer");
    write_file(
        &dir,
        "agent.json",
        json!({
            "name": "reviewer",
            "model": "fake/beta",
            "tools": ["read_file", "list_directory", "run_command"],
            "permissions": [
                {"tool": "run_command", "match": "rm*", "action": "deny"},
                {"tool": "run_command", "match": "echo*", "action": "allow"},
            ],
            "onReject": "continue",
        })
        .to_string(),
    );
    write_file(
        &dir,
        "instructions.md",
        "Always answer like a careful reviewer.",
    );
    write_file(
        &dir,
        "commands/triage.md",
        "Triage the open issues: $ARGUMENTS",
    );
    write_file(&bench.ws, "keep.txt", "precious\n");
    bench.server.push(Reply::Sse(chat_tool_calls(&[
        ("write_file", json!({"path": "new.txt", "content": "x"})),
        ("run_command", json!({"command": "rm keep.txt"})),
        ("run_command", json!({"command": "echo allowed"})),
    ])));
    bench.server.push(Reply::Sse(chat_text(&["Reviewed."])));
    // yolo: the file's deny rule still holds; ask: its allow rule lets
    // `echo` run without a question.
    let mut agent = bench.agent(&dir, &["--permissions", "ask"]);
    let init = agent.initialize();
    assert_eq!(init["agentInfo"]["name"], "reviewer", "{init}");
    let session = agent.new_session(&bench.ws);
    let (answer, messages) = prompt(&mut agent, &session, "review");
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    let commands = messages
        .iter()
        .filter(|m| m["params"]["update"]["sessionUpdate"] == "available_commands_update")
        .flat_map(|m| {
            m["params"]["update"]["availableCommands"]
                .as_array()
                .cloned()
                .unwrap_or_default()
        })
        .any(|c| c["name"] == "triage");
    assert!(commands, "the folder's commands are offered");
    let bodies = bench.bodies();
    assert_eq!(bodies[0]["model"], "beta");
    assert_eq!(
        tool_names(&bodies[0]),
        ["list_directory", "read_file", "run_command"]
    );
    let system = bodies[0]["messages"][0]["content"].as_str().unwrap();
    assert!(system.contains("careful reviewer"), "{system}");
    // The model called a tool it was not given: not run.
    assert_eq!(final_status(&messages, "call_1"), "failed");
    assert!(tool_text(&bodies[1], "call_1").contains("may not use write_file"));
    assert!(!bench.ws.join("new.txt").exists());
    // The deny rule: not run; the allow rule: run without asking.
    assert_eq!(final_status(&messages, "call_2"), "failed");
    assert_eq!(
        std::fs::read_to_string(bench.ws.join("keep.txt")).unwrap(),
        "precious\n"
    );
    assert_eq!(final_status(&messages, "call_3"), "completed");
    assert!(tool_text(&bodies[1], "call_3").contains("allowed"));
    assert!(
        !messages
            .iter()
            .any(|m| m["method"] == "session/request_permission"),
        "nothing asked"
    );

    // --model still overrides the file, and yolo does not lift the deny.
    let mut agent = bench.agent(&dir, &["--permissions", "yolo", "--model", "fake/alpha"]);
    agent.initialize();
    let session = agent.new_session(&bench.ws);
    bench.server.push(Reply::Sse(chat_tool_calls(&[(
        "run_command",
        json!({"command": "rm keep.txt"}),
    )])));
    bench.server.push(Reply::Sse(chat_text(&["No."])));
    let (_, messages) = prompt(&mut agent, &session, "delete it");
    assert_eq!(final_status(&messages, "call_1"), "failed");
    assert!(bench.ws.join("keep.txt").exists(), "deny holds in yolo");
    let last = bench.bodies();
    assert_eq!(last[last.len() - 2]["model"], "alpha");

    // The sessions remember the agent.
    drop(agent);
    let out = crate::support::spindle_command(&crate::support::temp_dir("home"))
        .args([
            "sessions",
            "list",
            "--db",
            bench.db.to_str().unwrap(),
            "--agent",
        ])
        .arg(&dir)
        .output()
        .unwrap();
    let listed = String::from_utf8_lossy(&out.stdout);
    assert_eq!(listed.matches("[agent reviewer]").count(), 2, "{listed}");
}

#[test]
fn max_steps_and_limits_end_the_turn() {
    let bench = Bench::new("agents-limits");
    let steps = write_file(
        &bench.base,
        "steps.json",
        json!({"name": "stepper", "maxSteps": 2}).to_string(),
    );
    for _ in 0..3 {
        bench.server.push(Reply::Sse(chat_tool_calls(&[(
            "list_directory",
            json!({}),
        )])));
    }
    let (mut agent, session) = bench.session(&steps);
    let (answer, _) = prompt(&mut agent, &session, "loop");
    assert_eq!(
        answer["result"]["stopReason"], "max_turn_requests",
        "{answer}"
    );
    assert_eq!(bench.server.requests().len(), 2);
    drop(agent);

    // Each call reports 15 tokens: a limit of 20 trips after the second.
    let limited = write_file(
        &bench.base,
        "limited.json",
        json!({"name": "frugal", "limits": {"tokens": 20}}).to_string(),
    );
    let bench = Bench::new("agents-limits-2");
    bench.push_tool_loops(4);
    let (mut agent, session) = bench.session(&limited);
    let (answer, messages) = prompt(&mut agent, &session, "loop");
    assert_eq!(answer["result"]["stopReason"], "max_tokens", "{answer}");
    assert_eq!(bench.server.requests().len(), 2);
    let said: String = messages
        .iter()
        .filter_map(|m| m["params"]["update"]["content"]["text"].as_str())
        .collect();
    assert!(said.contains("limit of 20 tokens"), "{said}");
}

#[test]
fn a_reload_reads_the_agent_file_again_and_a_broken_one_changes_nothing() {
    let bench = Bench::new("agents-reload");
    let file = write_file(
        &bench.base,
        "agent.json",
        json!({"name": "first", "instructions": "Version one."}).to_string(),
    );
    let (mut agent, session) = bench.session(&file);
    std::fs::write(
        &file,
        json!({"name": "first", "instructions": "Version two."}).to_string(),
    )
    .unwrap();
    let id = agent.request("_spindle/session/reload", json!({"sessionId": session}));
    let (answer, _) = agent.response(&id, WAIT);
    assert_eq!(answer["result"]["reloaded"], true, "{answer}");
    bench.server.push(Reply::Sse(chat_text(&["ok"])));
    prompt(&mut agent, &session, "hi");
    let system = bench.bodies()[0]["messages"][0]["content"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(system.contains("Version two."), "{system}");
    std::fs::write(&file, "{\"name\": \"first\", \"tools\": [\"nope\"]}").unwrap();
    let id = agent.request("_spindle/session/reload", json!({"sessionId": session}));
    let (answer, _) = agent.response(&id, WAIT);
    let message = answer["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("/tools/0") && message.contains("old settings stay"),
        "{answer}"
    );
    bench.server.push(Reply::Sse(chat_text(&["ok"])));
    prompt(&mut agent, &session, "again");
    let system = bench.bodies()[1]["messages"][0]["content"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(system.contains("Version two."), "{system}");
}

#[test]
fn a_bad_agent_file_exits_1_with_one_line_before_any_protocol_output() {
    let dir = temp_dir("agents-bad");
    for (text, field) in [
        (r#"{"name": "a", "tool": []}"#, "/tool: unknown field"),
        (r#"{"name": "a", "tools": ["read_file", 7]}"#, "/tools/1"),
        (
            r#"{"name": "a", "permissions": [{"tool": "run_command", "match": "x", "action": "allow", "path": "y"}]}"#,
            "/permissions/0",
        ),
        (r#"{"name": "a", "maxSteps": 5000}"#, "/maxSteps"),
        (
            r#"{"name": "a", "permissions": [{"tool": "edit", "action": "maybe"}]}"#,
            "/permissions/0/action: takes allow, ask or deny",
        ),
        (
            r#"{"name": "a", "subagents": {"x": {"name": "y"}}}"#,
            "/subagents/x/name: \"y\" is not this subagent's key",
        ),
        (
            r#"{"name": "a", "limits": {"cost": "lots"}}"#,
            "/limits/cost",
        ),
        ("not json", "not valid JSON"),
    ] {
        let file = write_file(&dir, "agent.json", text);
        let out = crate::support::spindle_command(&crate::support::temp_dir("home"))
            .arg("acp")
            .arg(&file)
            .stdin(Stdio::null())
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{text}: {stderr}");
        assert!(out.stdout.is_empty(), "no protocol output");
        assert_eq!(stderr.trim_end().lines().count(), 1, "{stderr}");
        assert!(
            stderr.contains(&file.display().to_string()) && stderr.contains(field),
            "{text}: {stderr}"
        );
    }
    // A folder without agent.json, and a path that does not exist.
    for path in [dir.join("empty"), dir.join("missing.json")] {
        std::fs::create_dir_all(dir.join("empty")).unwrap();
        let out = crate::support::spindle_command(&crate::support::temp_dir("home"))
            .arg("acp")
            .arg(&path)
            .stdin(Stdio::null())
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(1));
        assert!(String::from_utf8_lossy(&out.stderr).contains("cannot be read"));
    }
}

#[test]
fn the_files_mcp_servers_join_the_editors_and_the_allow_list_covers_them() {
    use crate::support::mcp_server::{stdio_server, CUSTOM_ENV};
    let bench = Bench::new("agents-mcp");
    let file = write_file(
        &bench.base,
        "agent.json",
        json!({
            "name": "mcp-user",
            "tools": ["read_file", "mcp:fromfile/echo", "mcp:editor"],
            "mcpServers": [
                stdio_server("fromfile", &[]),
                stdio_server("editor", &[(CUSTOM_ENV, "the file's")]),
            ],
        })
        .to_string(),
    );
    let mut agent = bench.agent(&file, &["--permissions", "yolo"]);
    agent.initialize();
    // The editor's "editor" server wins over the file's of that name.
    let id = agent.request(
        "session/new",
        json!({"cwd": bench.ws, "mcpServers": [stdio_server("editor", &[(CUSTOM_ENV, "the editor's")])]}),
    );
    let (answer, _) = agent.response(&id, WAIT);
    let session = answer["result"]["sessionId"].as_str().unwrap().to_string();
    // The servers start in the background: wait until both are offered.
    let deadline = std::time::Instant::now() + WAIT;
    let names = loop {
        bench.server.push(Reply::Sse(chat_text(&["ok"])));
        prompt(&mut agent, &session, "list");
        let names = tool_names(&bench.bodies().pop().unwrap());
        if names.iter().any(|n| n.starts_with("fromfile__"))
            && names.iter().any(|n| n.starts_with("editor__"))
        {
            break names;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "servers not offered: {names:?}"
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    let from_file: Vec<&String> = names
        .iter()
        .filter(|n| n.starts_with("fromfile__"))
        .collect();
    assert_eq!(from_file, ["fromfile__echo"], "{names:?}");
    assert!(
        names.iter().filter(|n| n.starts_with("editor__")).count() > 1,
        "{names:?}"
    );
    assert!(names.contains(&"read_file".to_string()) && !names.contains(&"write_file".to_string()));
    // The editor's server of that name is the one that runs.
    bench
        .server
        .push(Reply::Sse(chat_tool_calls(&[("editor__env", json!({}))])));
    bench.server.push(Reply::Sse(chat_text(&["ok"])));
    prompt(&mut agent, &session, "env");
    let bodies = bench.bodies();
    let report = tool_text(&bodies[bodies.len() - 1], "call_1");
    assert!(
        report.contains("the editor's") && !report.contains("the file's"),
        "{report}"
    );
}

#[test]
fn a_cost_limit_ends_the_turn_with_max_tokens() {
    let bench = Bench::new("agents-cost");
    // 10 input and 5 output tokens a call at 1,000,000 a million: 15 a call.
    std::fs::write(
        &bench.config,
        json!({
            "providers": {"fake": {"kind": "openai", "base_url": bench.server.base_url(),
                                   "requires_key": false}},
            "models": {"fake/alpha": {"price": {"input": 1_000_000.0, "output": 1_000_000.0}}},
            "defaults": {"model": "fake/alpha"},
        })
        .to_string(),
    )
    .unwrap();
    let file = write_file(
        &bench.base,
        "agent.json",
        json!({"name": "budget", "limits": {"cost": 25}}).to_string(),
    );
    bench.push_tool_loops(4);
    let (mut agent, session) = bench.session(&file);
    let (answer, _) = prompt(&mut agent, &session, "spend");
    assert_eq!(answer["result"]["stopReason"], "max_tokens", "{answer}");
    assert_eq!(bench.server.requests().len(), 2, "15, then 30: over 25");
}

#[test]
fn the_allow_list_holds_for_task_too() {
    let bench = Bench::new("agents-task");
    let file = write_file(
        &bench.base,
        "agent.json",
        json!({"name": "reader", "tools": ["read_file"]}).to_string(),
    );
    bench.server.push(Reply::Sse(chat_tool_calls(&[(
        "task",
        json!({"description": "escape", "prompt": "write files"}),
    )])));
    bench.server.push(Reply::Sse(chat_text(&["ok"])));
    let (mut agent, session) = bench.session(&file);
    let (_, messages) = prompt(&mut agent, &session, "go");
    assert_eq!(final_status(&messages, "call_1"), "failed");
    let bodies = bench.bodies();
    assert_eq!(bodies.len(), 2, "no subagent ran");
    assert!(tool_text(&bodies[1], "call_1").contains("may not use task"));
}

#[test]
fn a_subagent_spends_from_its_parents_limits() {
    let bench = Bench::new("agents-task-limits");
    let file = write_file(
        &bench.base,
        "agent.json",
        json!({"name": "frugal", "limits": {"tokens": 20}}).to_string(),
    );
    bench.server.push(Reply::Sse(chat_tool_calls(&[(
        "task",
        json!({"description": "dig", "prompt": "list everything"}),
    )])));
    bench.push_tool_loops(4);
    let (mut agent, session) = bench.session(&file);
    let (answer, _) = prompt(&mut agent, &session, "go");
    assert_eq!(answer["result"]["stopReason"], "max_tokens", "{answer}");
    // 15 tokens for the parent's call, 15 for the subagent's first: over.
    assert_eq!(bench.server.requests().len(), 2);
}

/// An inline subagent is named by its key in `subagents`: it needs no
/// `name` of its own, and `task` finds it by that key.
#[test]
fn an_inline_subagent_is_named_by_its_key() {
    let bench = Bench::new("agents-inline-sub");
    let file = write_file(
        &bench.base,
        "agent.json",
        json!({"name": "lead", "subagents": {
            "reviewer": {"instructions": "You review diffs and nothing else.", "tools": ["read_file"]},
        }})
        .to_string(),
    );
    bench.server.push(Reply::Sse(chat_tool_calls(&[(
        "task",
        json!({"description": "review", "prompt": "review the diff", "agent": "reviewer"}),
    )])));
    bench.server.push(Reply::Sse(chat_text(&["Looks fine."])));
    bench.server.push(Reply::Sse(chat_text(&["Reviewed."])));
    let (mut agent, session) = bench.session(&file);
    let (answer, messages) = prompt(&mut agent, &session, "get it reviewed");
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    assert_eq!(final_status(&messages, "call_1"), "completed");
    let bodies = bench.bodies();
    let system = bodies[1]["messages"][0]["content"]
        .as_str()
        .unwrap_or_default();
    assert!(
        system.contains("You review diffs and nothing else."),
        "{system}"
    );
    assert_eq!(tool_names(&bodies[1]), ["read_file"]);
}

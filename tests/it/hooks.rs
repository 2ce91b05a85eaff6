//! Hooks in Claude Code's format through the real binary: each event with
//! its exit codes and JSON answers, what a hook is given on stdin, the
//! bounds (a hook that hangs, floods, or blocks every stop), and a
//! project's hooks running only when the user trusts it. The hooks are
//! `sh` lines (Unix): Windows runs them under its own shell.

use crate::support::client::no_requests;
use crate::support::fake_openai::{chat_text, chat_tool_calls};
use crate::support::prelude::{ok_with, one_model_config, WAIT};
use crate::support::{
    in_process, run_prompt, temp_dir, write_file, Agent, Answer, FakeServer, Reply,
};
use serde_json::{json, Value};
use std::fs;
use std::path::PathBuf;

struct Bench {
    model: FakeServer,
    base: PathBuf,
    ws: PathBuf,
    config: PathBuf,
}

impl Bench {
    /// A workspace and a config whose `hooks` are `hooks`; `trusted`
    /// trusts the workspace.
    fn new(name: &str, hooks: Value, trusted: bool) -> Bench {
        let model = FakeServer::start();
        let base = spindle::os::canonical(temp_dir(name)).unwrap();
        let ws = base.join("ws");
        fs::create_dir_all(&ws).unwrap();
        let mut config = one_model_config(&model, trusted.then_some(ws.as_path()));
        if !hooks.is_null() {
            config["hooks"] = hooks;
        }
        let path = base.join("config.json");
        fs::write(&path, config.to_string()).unwrap();
        Bench {
            model,
            base,
            ws,
            config: path,
        }
    }

    /// `spindle acp --config … --permissions POLICY`, in process
    /// (`support::in_process`), initialized.
    fn agent(&self, policy: &str) -> Agent {
        let config = self.config.to_str().unwrap();
        let mut agent = in_process::acp(&["--config", config, "--permissions", policy]);
        agent.initialize();
        agent
    }

    /// `agent` as a process of its own: for the tests of what outlives a
    /// hook, which the agent's process (its guard, its end) takes along
    /// (Unix: those tests are about process groups).
    #[cfg(unix)]
    fn process_agent(&self, policy: &str) -> Agent {
        let config = self.config.to_str().unwrap();
        let mut agent = Agent::spawn(&["acp", "--config", config, "--permissions", policy], &[]);
        agent.initialize();
        agent
    }

    fn open(&self, agent: &mut Agent) -> String {
        let (result, _) = ok_with(
            agent,
            "session/new",
            json!({"cwd": self.ws.to_str().unwrap(), "mcpServers": []}),
        );
        result["sessionId"].as_str().unwrap().to_string()
    }

    /// A file of the bench, as a path for a hook's command line.
    fn file(&self, name: &str) -> String {
        self.base.join(name).display().to_string()
    }

    fn read(&self, name: &str) -> String {
        fs::read_to_string(self.base.join(name)).unwrap_or_default()
    }

    fn bodies(&self) -> Vec<Value> {
        self.model.requests().into_iter().map(|r| r.body).collect()
    }
}

impl Drop for Bench {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            let _ = fs::remove_dir_all(&self.base);
        }
    }
}

fn say(text: &str) -> Reply {
    Reply::Sse(chat_text(&[text]))
}

fn calls(calls: &[(&str, Value)]) -> Reply {
    Reply::Sse(chat_tool_calls(calls))
}

fn hook(command: &str) -> Value {
    json!({"type": "command", "command": command})
}

/// The text of the last message of a request (the user's, or a tool's).
fn last_message(body: &Value) -> String {
    let last = body["messages"].as_array().unwrap().last().unwrap();
    match &last["content"] {
        Value::String(text) => text.clone(),
        other => other.to_string(),
    }
}

#[test]
#[cfg_attr(windows, ignore = "sh command lines")]
fn pre_tool_use_blocks_with_exit_2_or_deny_and_gets_the_call_as_json() {
    let bench = Bench::new("hooks-pre", Value::Null, false);
    let seen = bench.file("pre.json");
    let guard = format!(
        "cat > {seen}; if grep -q 'rm -rf' {seen}; then echo 'no rm -rf here' >&2; exit 2; fi"
    );
    let deny = r#"echo '{"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "deny", "permissionDecisionReason": "secrets stay unread"}}'"#;
    let config: Value = serde_json::from_str(&fs::read_to_string(&bench.config).unwrap()).unwrap();
    let mut config = config;
    config["hooks"] = json!({"PreToolUse": [
        {"matcher": "Bash", "hooks": [hook(&guard)]},
        {"matcher": "Read", "hooks": [hook(deny)]},
        {"matcher": "Glob", "hooks": [{"type": "command", "command": "sleep 30", "timeout": 1}]},
    ]});
    fs::write(&bench.config, config.to_string()).unwrap();
    let mut agent = bench.agent("yolo");
    let session = bench.open(&mut agent);
    bench.model.push(calls(&[
        ("run_command", json!({"command": "rm -rf build"})),
        ("run_command", json!({"command": "echo fine"})),
        ("read_file", json!({"path": ".env"})),
        ("glob", json!({"pattern": "*.md"})),
    ]));
    bench.model.push(say("done"));
    let turn = run_prompt(&mut agent, &session, "clean up", WAIT, no_requests);
    assert_eq!(turn.final_status("call_1"), "failed");
    assert!(turn.final_text("call_1").contains("no rm -rf here"));
    assert_eq!(turn.final_status("call_2"), "completed");
    assert!(turn.final_text("call_2").contains("fine"));
    assert_eq!(turn.final_status("call_3"), "failed");
    assert!(turn.final_text("call_3").contains("secrets stay unread"));
    // A hook that hangs is stopped at its timeout; the call goes on.
    assert_eq!(turn.final_status("call_4"), "completed");
    assert!(
        turn.notices().contains("did not finish within 1 s"),
        "{}",
        turn.notices()
    );
    // The model is told why.
    let bodies = bench.bodies();
    let sent = bodies.last().unwrap().to_string();
    assert!(
        sent.contains("a PreToolUse hook blocked this call: no rm -rf here"),
        "{sent}"
    );
    // The last Bash call's event, as Claude Code's hooks read it.
    let event: Value = serde_json::from_str(&bench.read("pre.json")).unwrap();
    assert_eq!(event["hook_event_name"], "PreToolUse");
    assert_eq!(event["tool_name"], "Bash");
    assert_eq!(event["spindle_tool_name"], "run_command");
    assert_eq!(event["tool_input"]["command"], "echo fine");
    assert_eq!(event["session_id"], session.as_str());
    assert_eq!(event["cwd"], bench.ws.display().to_string());
    assert_eq!(event["permission_mode"], "yolo");
    assert_eq!(event["tool_use_id"], "call_2");
}

#[test]
#[cfg_attr(windows, ignore = "sh command lines")]
fn allow_from_a_hook_loosens_nothing_and_ask_asks_even_in_yolo() {
    let allow = r#"echo '{"hookSpecificOutput": {"permissionDecision": "allow"}}'"#;
    let ask = r#"echo '{"hookSpecificOutput": {"permissionDecision": "ask"}}'"#;
    let bench = Bench::new(
        "hooks-allow",
        json!({"PreToolUse": [
            {"matcher": "Write", "hooks": [hook(allow)]},
            {"matcher": "Bash", "hooks": [hook(ask)]},
        ]}),
        false,
    );
    // Under ask, the hook's allow does not spare the question.
    let mut agent = bench.agent("ask");
    let session = bench.open(&mut agent);
    bench.model.push(calls(&[(
        "write_file",
        json!({"path": "a.txt", "content": "x"}),
    )]));
    // (A rejection ends the turn: no second answer is needed.)
    let turn = run_prompt(&mut agent, &session, "write", WAIT, |_| {
        Answer::select("reject_once")
    });
    assert_eq!(turn.permission_ids().len(), 1, "{}", turn.dump());
    assert!(!bench.ws.join("a.txt").exists());
    drop(agent);
    // Under yolo, the hook's ask asks.
    let mut agent = bench.agent("yolo");
    let session = bench.open(&mut agent);
    bench
        .model
        .push(calls(&[("run_command", json!({"command": "echo hi"}))]));
    bench.model.push(say("ok"));
    let turn = run_prompt(&mut agent, &session, "run", WAIT, |_| {
        Answer::select("allow_once")
    });
    assert_eq!(turn.permission_ids().len(), 1, "{}", turn.dump());
    assert_eq!(turn.final_status("call_1"), "completed");
}

#[test]
#[cfg_attr(windows, ignore = "sh command lines")]
fn post_tool_use_feedback_and_context_reach_the_model() {
    let feedback = r#"echo '{"decision": "block", "reason": "run the formatter on it", "hookSpecificOutput": {"additionalContext": "style: tabs"}}'"#;
    let bench = Bench::new(
        "hooks-post",
        json!({"PostToolUse": [
            {"matcher": "Edit|Write", "hooks": [hook(feedback)]},
            {"matcher": "Bash", "hooks": [hook("echo broken >&2; exit 1")]},
        ]}),
        false,
    );
    let mut agent = bench.agent("yolo");
    let session = bench.open(&mut agent);
    bench.model.push(calls(&[
        ("write_file", json!({"path": "a.txt", "content": "x"})),
        ("run_command", json!({"command": "echo hi"})),
    ]));
    bench.model.push(say("ok"));
    let turn = run_prompt(&mut agent, &session, "write", WAIT, no_requests);
    assert_eq!(fs::read_to_string(bench.ws.join("a.txt")).unwrap(), "x");
    let sent = bench.bodies().last().unwrap().to_string();
    assert!(
        sent.contains("A PostToolUse hook says: run the formatter on it"),
        "{sent}"
    );
    assert!(sent.contains("Context from a hook: style: tabs"), "{sent}");
    // Another exit code is reported to the user and changes nothing.
    assert_eq!(turn.final_status("call_2"), "completed");
    assert!(
        turn.notices().contains("failed (exit 1): broken"),
        "{}",
        turn.notices()
    );
}

/// The events a hook appended to `log` (one JSON object a line).
fn events(log: &str) -> Vec<Value> {
    fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .filter(|line| !line.is_empty())
        .map(|line| serde_json::from_str(line).unwrap())
        .collect()
}

#[test]
#[cfg_attr(windows, ignore = "sh command lines")]
fn post_tool_use_runs_after_a_successful_call_only() {
    let bench = Bench::new("hooks-post-success", Value::Null, false);
    let post = bench.file("post.log");
    let config = fs::read_to_string(&bench.config).unwrap();
    let mut config: Value = serde_json::from_str(&config).unwrap();
    config["hooks"] = json!({
        "PostToolUse": [{"hooks": [hook(&format!("cat >> {post}; echo >> {post}"))]}],
    });
    fs::write(&bench.config, config.to_string()).unwrap();
    fs::write(bench.ws.join("a.txt"), "one\n").unwrap();
    let mut agent = bench.agent("yolo");
    let session = bench.open(&mut agent);
    bench.model.push(calls(&[
        (
            "edit_file",
            json!({"path": "a.txt", "edits": [{"old": "missing", "new": "x"}]}),
        ),
        (
            "edit_file",
            json!({"path": "a.txt", "edits": [{"old": "one", "new": "two"}]}),
        ),
        ("read_file", json!({"path": "nowhere.txt"})),
    ]));
    bench.model.push(say("done"));
    let turn = run_prompt(&mut agent, &session, "edit", WAIT, no_requests);
    assert_eq!(turn.final_status("call_1"), "failed", "{}", turn.dump());
    assert_eq!(turn.final_status("call_2"), "completed");
    assert_eq!(turn.final_status("call_3"), "failed");
    assert_eq!(fs::read_to_string(bench.ws.join("a.txt")).unwrap(), "two\n");
    // Not after the failed edit nor the failed read; after the edit that
    // worked.
    let after = events(&post);
    assert_eq!(after.len(), 1, "{after:?}");
    assert_eq!(after[0]["hook_event_name"], "PostToolUse");
    assert_eq!(after[0]["tool_name"], "Edit");
    assert_eq!(after[0]["tool_use_id"], "call_2");
    assert_eq!(after[0]["tool_response"]["success"], true);
}

#[test]
#[cfg_attr(windows, ignore = "sh command lines")]
fn a_task_runs_its_tool_hooks_under_claude_codes_name() {
    let bench = Bench::new("hooks-task", Value::Null, false);
    let (post, pre) = (bench.file("post.log"), bench.file("pre.log"));
    let config = fs::read_to_string(&bench.config).unwrap();
    let mut config: Value = serde_json::from_str(&config).unwrap();
    config["hooks"] = json!({
        "PostToolUse": [{"matcher": "Task", "hooks": [hook(&format!("cat >> {post}; echo >> {post}"))]}],
        "PreToolUse": [{"matcher": "Task", "hooks": [hook(&format!("cat >> {pre}; echo >> {pre}"))]}],
    });
    fs::write(&bench.config, config.to_string()).unwrap();
    let mut agent = bench.agent("yolo");
    let session = bench.open(&mut agent);
    bench.model.push(calls(&[(
        "task",
        json!({"description": "look around", "prompt": "Say what you see."}),
    )]));
    // The subagent's answer, then the parent's.
    bench.model.push(say("I see nothing."));
    bench.model.push(say("done"));
    let turn = run_prompt(&mut agent, &session, "delegate", WAIT, no_requests);
    assert_eq!(turn.final_status("call_1"), "completed", "{}", turn.dump());
    for (log, event) in [(&pre, "PreToolUse"), (&post, "PostToolUse")] {
        let seen = events(log);
        assert_eq!(seen.len(), 1, "{event}: {seen:?}");
        assert_eq!(seen[0]["hook_event_name"], event);
        assert_eq!(seen[0]["tool_name"], "Task");
        assert_eq!(seen[0]["spindle_tool_name"], "task");
        assert_eq!(seen[0]["tool_input"]["prompt"], "Say what you see.");
    }
    let response = &events(&post)[0]["tool_response"];
    assert!(
        response["content"]
            .as_str()
            .unwrap()
            .contains("I see nothing."),
        "{response}"
    );
}

#[test]
#[cfg_attr(windows, ignore = "sh command lines")]
fn pre_tool_use_blocks_a_task_or_has_the_user_asked_about_it() {
    let gate = r#"if grep -q forbidden; then echo 'not that task' >&2; exit 2; fi; echo '{"hookSpecificOutput": {"permissionDecision": "ask"}}'"#;
    let bench = Bench::new(
        "hooks-pre-task",
        json!({"PreToolUse": [{"matcher": "Task", "hooks": [hook(gate)]}]}),
        false,
    );
    let mut agent = bench.agent("yolo");
    let session = bench.open(&mut agent);
    bench.model.push(calls(&[
        (
            "task",
            json!({"description": "bad", "prompt": "Do the forbidden thing."}),
        ),
        (
            "task",
            json!({"description": "good", "prompt": "Do the fine thing."}),
        ),
    ]));
    bench.model.push(say("Fine thing done."));
    bench.model.push(say("done"));
    let turn = run_prompt(&mut agent, &session, "delegate", WAIT, |request| {
        assert_eq!(request["method"], "session/request_permission", "{request}");
        assert_eq!(request["params"]["toolCall"]["toolCallId"], "call_2");
        // Nothing an "always" could be remembered by: none is offered.
        let options: Vec<&str> = request["params"]["options"]
            .as_array()
            .unwrap()
            .iter()
            .map(|o| o["optionId"].as_str().unwrap())
            .collect();
        assert_eq!(options, ["allow_once", "reject_once"], "{request}");
        Answer::select("allow_once")
    });
    assert_eq!(turn.final_status("call_1"), "failed", "{}", turn.dump());
    assert!(turn.final_text("call_1").contains("not that task"));
    // Yolo asks nothing, but the hook's ask does.
    assert_eq!(turn.permission_ids().len(), 1, "{}", turn.dump());
    assert_eq!(turn.final_status("call_2"), "completed");
    assert!(turn.final_text("call_2").contains("Fine thing done."));
    // The blocked task never reached the model: one subagent, one parent.
    let bodies = bench.bodies();
    assert_eq!(bodies.len(), 3, "{bodies:?}");
    assert!(!bodies[1].to_string().contains("forbidden thing"));
}

#[test]
#[cfg_attr(windows, ignore = "sh command lines")]
fn user_prompt_submit_blocks_a_prompt_or_adds_context_within_a_cap() {
    let gate = "if grep -q SECRET; then echo 'the prompt holds a secret' >&2; exit 2; fi; echo 'Branch: main'; head -c 100000 /dev/zero | tr '\\0' z";
    let bench = Bench::new(
        "hooks-prompt",
        json!({"UserPromptSubmit": [{"hooks": [hook(gate)]}]}),
        false,
    );
    let mut agent = bench.agent("yolo");
    let session = bench.open(&mut agent);
    let turn = run_prompt(&mut agent, &session, "my SECRET is 42", WAIT, no_requests);
    assert_eq!(turn.stop_reason(), "end_turn");
    assert!(
        turn.text().contains("the prompt holds a secret"),
        "{}",
        turn.text()
    );
    assert!(bench.model.requests().is_empty(), "the model was asked");

    bench.model.push(say("ok"));
    run_prompt(&mut agent, &session, "hello", WAIT, no_requests);
    let body = bench.bodies().pop().unwrap();
    assert!(
        !body.to_string().contains("SECRET"),
        "the blocked prompt reached the model"
    );
    let prompt = last_message(&body);
    assert!(
        prompt.starts_with("hello") && prompt.contains("Branch: main"),
        "{prompt:.200}"
    );
    // Context is capped.
    assert!(prompt.len() < 10_000, "{}", prompt.len());
}

#[test]
#[cfg_attr(windows, ignore = "sh command lines")]
fn a_stop_hook_sends_the_model_back_but_only_three_times() {
    let bench = Bench::new(
        "hooks-stop",
        json!({"Stop": [{"hooks": [hook("cat >> STOPS; echo 'the tests fail' >&2; exit 2")]}]}),
        false,
    );
    let mut agent = bench.agent("yolo");
    let session = bench.open(&mut agent);
    for _ in 0..4 {
        bench.model.push(say("done"));
    }
    let turn = run_prompt(&mut agent, &session, "fix it", WAIT, no_requests);
    assert_eq!(turn.stop_reason(), "end_turn");
    let bodies = bench.bodies();
    assert_eq!(bodies.len(), 4, "one answer and three continuations");
    assert!(last_message(&bodies[1]).contains("the tests fail"));
    assert!(turn
        .notices()
        .contains("blocked the end of the turn 3 times"));
    let stops = fs::read_to_string(bench.ws.join("STOPS")).unwrap();
    assert!(stops.contains("\"stop_hook_active\":false"), "{stops}");
    assert!(stops.contains("\"stop_hook_active\":true"), "{stops}");
}

#[test]
#[cfg_attr(windows, ignore = "sh command lines")]
fn session_start_end_and_notification_hooks_run() {
    let bench = Bench::new("hooks-session", Value::Null, false);
    let log = bench.file("events.log");
    let record = format!("cat >> {log}; echo >> {log}");
    let mut config: Value =
        serde_json::from_str(&fs::read_to_string(&bench.config).unwrap()).unwrap();
    config["hooks"] = json!({
        "SessionStart": [{"matcher": "startup", "hooks": [hook(&format!("{record}; echo 'Started on a Tuesday'"))]}],
        "SessionEnd": [{"hooks": [hook(&record)]}],
        "Notification": [{"hooks": [hook(&record)]}],
        "PreCompact": [{"hooks": [hook(&record)]}],
    });
    fs::write(&bench.config, config.to_string()).unwrap();
    let mut agent = bench.agent("ask");
    let session = bench.open(&mut agent);
    bench.model.push(calls(&[(
        "write_file",
        json!({"path": "a.txt", "content": "x"}),
    )]));
    bench.model.push(say("ok"));
    run_prompt(&mut agent, &session, "write", WAIT, |_| {
        Answer::select("reject_once")
    });
    let first = bench.bodies()[0].clone();
    assert!(last_message(&first).contains("Started on a Tuesday"));
    bench.model.push(say("summary"));
    run_prompt(&mut agent, &session, "/compact", WAIT, no_requests);
    ok_with(&mut agent, "session/close", json!({"sessionId": session}));
    let deadline = std::time::Instant::now() + WAIT;
    while !bench.read("events.log").contains("SessionEnd") && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let events: Vec<Value> = bench
        .read("events.log")
        .lines()
        .filter(|l| !l.is_empty())
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let names: Vec<&str> = events
        .iter()
        .map(|e| e["hook_event_name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        ["SessionStart", "Notification", "PreCompact", "SessionEnd"]
    );
    assert_eq!(events[0]["source"], "startup");
    assert!(events[1]["message"]
        .as_str()
        .unwrap()
        .contains("permission"));
    assert_eq!(events[2]["trigger"], "manual");
    assert_eq!(events[3]["reason"], "close");
}

#[test]
#[cfg_attr(windows, ignore = "sh command lines")]
fn a_projects_hooks_run_only_when_it_is_trusted() {
    for trusted in [false, true] {
        let bench = Bench::new("hooks-project", Value::Null, trusted);
        let marker = bench.file("ran");
        write_file(
            &bench.ws,
            ".claude/settings.json",
            json!({"hooks": {"PreToolUse": [{"matcher": "Bash",
                "hooks": [hook(&format!("touch {marker}"))]}]}})
            .to_string(),
        );
        write_file(
            &bench.ws,
            ".spindle/config.json",
            json!({"hooks": {"UserPromptSubmit": [{"hooks": [hook(&format!("touch {marker}.prompt"))]}]}})
            .to_string(),
        );
        let mut agent = bench.agent("yolo");
        let session = bench.open(&mut agent);
        bench
            .model
            .push(calls(&[("run_command", json!({"command": "echo hi"}))]));
        bench.model.push(say("ok"));
        run_prompt(&mut agent, &session, "go", WAIT, no_requests);
        assert_eq!(bench.base.join("ran").exists(), trusted);
        assert_eq!(bench.base.join("ran.prompt").exists(), trusted);
        let turn = run_prompt(&mut agent, &session, "/hooks", WAIT, no_requests);
        let reply = turn.text();
        if trusted {
            assert!(
                reply.contains("PreToolUse [Bash]")
                    && reply.contains("the project's .claude/settings.json"),
                "{reply}"
            );
        } else {
            assert!(
                reply.contains("not trusted") && reply.contains(".claude/settings.json"),
                "{reply}"
            );
            assert!(reply.contains("No hooks are in force"), "{reply}");
        }
    }
}

#[test]
#[cfg_attr(windows, ignore = "sh command lines")]
fn a_blocked_answer_to_the_models_question_is_withheld_not_lost() {
    let gate = "if grep -q SECRET; then echo 'no secrets' >&2; exit 2; fi";
    let bench = Bench::new(
        "hooks-answer",
        json!({"UserPromptSubmit": [{"hooks": [hook(gate)]}]}),
        false,
    );
    let mut agent = bench.agent("yolo");
    let session = bench.open(&mut agent);
    bench.model.push(calls(&[(
        "ask_user",
        json!({"question": "Which password?"}),
    )]));
    run_prompt(&mut agent, &session, "log in", WAIT, no_requests);
    let turn = run_prompt(&mut agent, &session, "SECRET hunter2", WAIT, no_requests);
    assert!(turn.text().contains("no secrets"), "{}", turn.text());
    bench.model.push(say("ok"));
    run_prompt(&mut agent, &session, "go on", WAIT, no_requests);
    let body = bench.bodies().pop().unwrap();
    let sent = body.to_string();
    assert!(!sent.contains("hunter2"), "{sent}");
    // The question's call keeps an answer, so the conversation stays valid.
    let messages = body["messages"].as_array().unwrap();
    let answer = messages
        .iter()
        .find(|m| m["role"] == "tool")
        .expect("the call's answer");
    assert!(
        answer.to_string().contains("withheld by a hook"),
        "{answer}"
    );
}

// ---------------------------------------------------------------------------
// A hook's processes, those that left its process group too
// ---------------------------------------------------------------------------

/// A shell line that starts, in the background, a process in a session
/// of its own (out of the hook's process group, as a daemon is) which
/// writes its pid to `pidfile` and sleeps. macOS has no `setsid`
/// program: perl's POSIX module makes the call there.
#[cfg(unix)]
fn detached(pidfile: &str) -> String {
    if cfg!(target_os = "macos") {
        format!(
            "perl -e 'use POSIX; POSIX::setsid(); open(F, \">{pidfile}\"); print F \"$$\\n\"; close F; sleep 120' &"
        )
    } else {
        format!("setsid sh -c 'echo $$ > {pidfile}; exec sleep 120' &")
    }
}

/// The pid written to `path`, once the line is complete.
#[cfg(unix)]
fn pid_in(path: &str) -> Option<i32> {
    let text = fs::read_to_string(path).ok()?;
    text.ends_with('\n').then(|| text.trim().parse().ok())?
}

/// Whether process `pid` has ended (a zombie has: only its parent's
/// reaping is left).
#[cfg(unix)]
fn ended(pid: i32) -> bool {
    if cfg!(target_os = "linux") {
        return fs::read_to_string(format!("/proc/{pid}/stat")).map_or(true, |stat| {
            stat.rsplit(')')
                .next()
                .and_then(|rest| rest.split_whitespace().next())
                == Some("Z")
        });
    }
    // SAFETY: kill(2) with signal 0 sends nothing, it only checks.
    unsafe { libc::kill(pid, 0) != 0 }
}

/// Fails unless the process whose pid is in `pidfile` ends within 10 s
/// (generous: a hang is what is tested); a survivor is killed first, so
/// a failing test leaves nothing running.
#[cfg(unix)]
fn assert_ends(pidfile: &str, what: &str) {
    let pid = pid_in(pidfile).unwrap_or_else(|| panic!("{what}: no pid in {pidfile}"));
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while !ended(pid) && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    if !ended(pid) {
        // SAFETY: kill(2) of the test's own leftover process.
        unsafe { libc::kill(pid, libc::SIGKILL) };
        panic!("{what}: the process that left the hook's group ({pid}) outlived it");
    }
}

#[test]
#[cfg_attr(windows, ignore = "sh command lines")]
fn a_process_that_left_a_hooks_group_ends_at_the_hooks_timeout() {
    #[cfg(unix)]
    {
        let bench = Bench::new("hooks-detached", Value::Null, false);
        let pidfile = bench.file("daemon.pid");
        let line = format!("{} sleep 30", detached(&pidfile));
        let config = fs::read_to_string(&bench.config).unwrap();
        let mut config: Value = serde_json::from_str(&config).unwrap();
        config["hooks"] = json!({"UserPromptSubmit": [{"hooks": [
            {"type": "command", "command": line, "timeout": 3}
        ]}]});
        fs::write(&bench.config, config.to_string()).unwrap();
        let mut agent = bench.process_agent("yolo");
        let session = bench.open(&mut agent);
        bench.model.push(say("ok"));
        let turn = run_prompt(&mut agent, &session, "go", WAIT, no_requests);
        assert!(
            turn.notices().contains("did not finish within 3 s"),
            "{}",
            turn.notices()
        );
        assert_ends(&pidfile, "at the timeout");
        // The agent still serves.
        assert_eq!(turn.text(), "ok");
    }
}

/// The process of this machine whose arguments are exactly `argv`.
#[cfg(target_os = "linux")]
fn process_with(argv: &[&str]) -> Option<i32> {
    let wanted: Vec<u8> = argv
        .iter()
        .flat_map(|a| [a.as_bytes(), b"\0"].concat())
        .collect();
    fs::read_dir("/proc").ok()?.flatten().find_map(|entry| {
        let pid: i32 = entry.file_name().to_str()?.parse().ok()?;
        let cmdline = fs::read(format!("/proc/{pid}/cmdline")).ok()?;
        (cmdline == wanted).then_some(pid)
    })
}

/// Inside the sandbox (the `sandbox` policy) too, where a hook sees
/// other pids than this machine's: the detached process is found here by
/// its arguments.
#[cfg(target_os = "linux")]
#[test]
fn a_process_that_left_a_sandboxed_hooks_group_ends_at_the_hooks_timeout() {
    let probe = crate::support::spindle_command(&crate::support::temp_dir("home"))
        .args(["sandbox", "--probe"])
        .output()
        .unwrap();
    let report: Value = serde_json::from_slice(&probe.stdout).unwrap_or_default();
    if report["landlock"].as_u64().unwrap_or(0) < 1 || report["seccomp"] != true {
        eprintln!("sandboxed hook: skipped, the sandbox here is {report}");
        return;
    }
    let bench = Bench::new("hooks-detached-sandbox", Value::Null, false);
    // Unique to this test's run: the bench's folder name.
    let marker = bench
        .base
        .file_name()
        .unwrap()
        .to_str()
        .unwrap()
        .to_string();
    let line = format!("setsid sh -c 'sleep 120; :' {marker} & sleep 30");
    let config = fs::read_to_string(&bench.config).unwrap();
    let mut config: Value = serde_json::from_str(&config).unwrap();
    config["hooks"] = json!({"UserPromptSubmit": [{"hooks": [
        {"type": "command", "command": line, "timeout": 3}
    ]}]});
    fs::write(&bench.config, config.to_string()).unwrap();
    let mut agent = bench.process_agent("sandbox");
    let session = bench.open(&mut agent);
    bench.model.push(say("ok"));
    let argv = ["sh", "-c", "sleep 120; :", marker.as_str()];
    let mut exchange = crate::support::Exchange::prompt(&mut agent, &session, "go");
    let started = exchange.until(&mut agent, WAIT, &mut no_requests, &mut |_| {
        process_with(&argv).is_some()
    });
    let turn = exchange.finish(&mut agent, WAIT, &mut no_requests);
    assert!(
        started,
        "the detached process never ran: {}",
        turn.notices()
    );
    assert!(
        turn.notices().contains("did not finish within 3 s"),
        "{}",
        turn.notices()
    );
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while process_with(&argv).is_some_and(|pid| !ended(pid)) && std::time::Instant::now() < deadline
    {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    if let Some(pid) = process_with(&argv).filter(|pid| !ended(*pid)) {
        // SAFETY: kill(2) of this test's own leftover process.
        unsafe { libc::kill(pid, libc::SIGKILL) };
        panic!("the sandboxed hook's detached process ({pid}) outlived its timeout");
    }
}

/// Starts an agent whose `UserPromptSubmit` hook leaves a detached
/// process behind and then hangs (within a long timeout), sends a
/// prompt, and returns once the detached process runs.
#[cfg(unix)]
fn with_a_hanging_hook(bench: &Bench, pidfile: &str, end_pidfile: &str) -> Agent {
    let config = fs::read_to_string(&bench.config).unwrap();
    let mut config: Value = serde_json::from_str(&config).unwrap();
    config["hooks"] = json!({
        "UserPromptSubmit": [{"hooks": [
            {"type": "command", "command": format!("{} sleep 60", detached(pidfile)), "timeout": 120}
        ]}],
        // At the agent's end too: past its timeout.
        "SessionEnd": [{"hooks": [
            {"type": "command", "command": format!("{} sleep 60", detached(end_pidfile)), "timeout": 2}
        ]}],
    });
    fs::write(&bench.config, config.to_string()).unwrap();
    let mut agent = bench.process_agent("yolo");
    let session = bench.open(&mut agent);
    let mut exchange = crate::support::Exchange::prompt(&mut agent, &session, "go");
    let started = exchange.until(&mut agent, WAIT, &mut no_requests, &mut |_| {
        pid_in(pidfile).is_some()
    });
    assert!(started, "the prompt ended before the hook ran");
    agent
}

#[test]
#[cfg_attr(windows, ignore = "sh command lines")]
fn a_process_that_left_a_hooks_group_ends_with_the_agent() {
    #[cfg(unix)]
    for ending in ["EOF", "SIGTERM"] {
        let bench = Bench::new("hooks-detached-end", Value::Null, false);
        let (pidfile, end_pidfile) = (bench.file("prompt.pid"), bench.file("end.pid"));
        let mut agent = with_a_hanging_hook(&bench, &pidfile, &end_pidfile);
        if ending == "EOF" {
            agent.close_stdin();
        } else {
            let sent = std::process::Command::new("kill")
                .args(["-TERM", &agent.pid().to_string()])
                .status()
                .unwrap();
            assert!(sent.success());
        }
        let status = agent
            .wait_exit(std::time::Duration::from_secs(20))
            .unwrap_or_else(|| panic!("{ending}: the agent did not exit"));
        assert!(status.success(), "{ending}: {status:?}");
        assert_ends(&pidfile, ending);
        // The session's end hook ran at the agent's end and timed out.
        assert_ends(&end_pidfile, &format!("{ending}, the SessionEnd hook"));
    }
}

/// An agent killed with SIGKILL cleans nothing up: the guard the hook runs
/// under takes its whole tree down (as a command's, `tools/cancel.rs`).
#[cfg(any(target_os = "linux", target_os = "macos"))]
#[test]
fn a_process_that_left_a_hooks_group_ends_with_an_agent_killed_with_sigkill() {
    let bench = Bench::new("hooks-detached-kill", Value::Null, false);
    let (pidfile, end_pidfile) = (bench.file("prompt.pid"), bench.file("end.pid"));
    let mut agent = with_a_hanging_hook(&bench, &pidfile, &end_pidfile);
    agent.kill();
    assert_ends(&pidfile, "SIGKILL");
}

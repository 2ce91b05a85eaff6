//! Session controls against the fake server: the config options (mode,
//! model, effort, agent_preset, tool_approval) and their answers, modes
//! with their notifications, plan mode's read-only tools, choices kept
//! with the session and as workspace defaults, command-line flags, and
//! usage with cost.

use crate::support::client::no_requests;
use crate::support::fake_openai::{chat_text, chunk_finish, chunk_role, chunk_tool_call, done};
use crate::support::prelude::{approx, call, ok_with, WAIT};
use crate::support::wire::chat_usage;
use crate::support::{
    in_process, run_prompt, temp_dir, updates_text, write_file, Agent, Answer, FakeServer, Reply,
    Step,
};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};

/// The option ids, in the order the agent lists them.
const IDS: [&str; 5] = ["mode", "model", "effort", "agent_preset", "tool_approval"];

/// The tools plan mode offers (`exit_plan` asks to leave it).
const READ_ONLY_TOOLS: [&str; 9] = [
    "ask_user",
    "exit_plan",
    "fetch_url",
    "glob",
    "list_directory",
    "read_file",
    "search",
    "task",
    "todo_write",
];

/// A fake server, a config file naming it with two models (`fake/alpha`
/// reasons and has prices, `fake/beta` neither), and a session database,
/// all in one scratch directory.
struct Bench {
    server: FakeServer,
    root: PathBuf,
    config: PathBuf,
    db: PathBuf,
}

impl Bench {
    fn new(name: &str) -> Bench {
        Bench::with_defaults(name, json!({"model": "fake/alpha"}))
    }

    fn with_defaults(name: &str, defaults: Value) -> Bench {
        let server = FakeServer::start();
        let root = temp_dir(name);
        let config = root.join("config.json");
        // The key in a file, which an in-process agent reads as a process
        // would (a variable would have to be the test process's).
        let key = write_file(&root, "fake.key", "sk-controls");
        spindle::os::testing::set_mode(&key, 0o600).unwrap();
        let text = json!({
            "providers": {"fake": {"kind": "openai", "base_url": server.base_url(),
                                   "api_key_file": key}},
            "models": {
                "fake/alpha": {"name": "Alpha", "context_window": 64000,
                               "reasoning": true, "efforts": ["low", "medium", "high"],
                               "price": {"input": 2.0, "output": 8.0, "cached_input": 0.5,
                                         "currency": "EUR"}},
                "fake/beta": {"context_window": 32000},
            },
            "defaults": defaults,
        });
        std::fs::write(&config, serde_json::to_string_pretty(&text).unwrap()).unwrap();
        let db = root.join("sessions.db");
        Bench {
            server,
            root,
            config,
            db,
        }
    }

    /// `spindle acp --config … --db … EXTRA…`, in process
    /// (`support::in_process`), initialized.
    fn agent(&self, extra: &[&str]) -> Agent {
        let config = self.config.to_str().unwrap();
        let db = self.db.to_str().unwrap();
        let mut args = vec!["--config", config, "--db", db];
        args.extend_from_slice(extra);
        let mut agent = in_process::acp(&args);
        agent.initialize();
        agent
    }

    fn workspace(&self, name: &str) -> PathBuf {
        let dir = self.root.join(name);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }
}

impl Drop for Bench {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            let _ = std::fs::remove_dir_all(&self.root);
        }
    }
}

fn new_session(agent: &mut Agent, cwd: &Path) -> (String, Value) {
    let (result, _) = ok_with(
        agent,
        "session/new",
        json!({"cwd": cwd.to_str().unwrap(), "mcpServers": []}),
    );
    let id = result["sessionId"].as_str().unwrap().to_string();
    (id, result)
}

/// `session/set_config_option`; the result's option list (checked to be
/// complete) and the notifications sent before the answer.
fn set(agent: &mut Agent, session: &str, id: &str, value: &str) -> (Value, Vec<Value>) {
    let (result, others) = ok_with(
        agent,
        "session/set_config_option",
        json!({"sessionId": session, "configId": id, "value": value}),
    );
    let options = result["configOptions"].clone();
    assert_complete(&options);
    (options, others)
}

fn set_err(agent: &mut Agent, session: &str, id: &str, value: Value) -> Value {
    match call(
        agent,
        "session/set_config_option",
        json!({"sessionId": session, "configId": id, "value": value}),
    ) {
        (Err(error), _) => error,
        (Ok(result), _) => panic!("{id} = {value} should fail: {result}"),
    }
}

fn set_mode(agent: &mut Agent, session: &str, mode: &str) -> Result<Vec<Value>, Value> {
    match call(
        agent,
        "session/set_mode",
        json!({"sessionId": session, "modeId": mode}),
    ) {
        (Ok(result), others) => {
            assert_eq!(result, json!({}));
            Ok(others)
        }
        (Err(error), _) => Err(error),
    }
}

/// Every option, in order, each a `select` whose current value is one of
/// its values.
fn assert_complete(options: &Value) {
    let list = options.as_array().expect("configOptions is an array");
    let ids: Vec<&str> = list.iter().map(|o| o["id"].as_str().unwrap()).collect();
    assert_eq!(ids, IDS, "{options}");
    for option in list {
        assert_eq!(option["type"], "select", "{option}");
        let current = option["currentValue"].as_str().unwrap();
        assert!(
            values(options, option["id"].as_str().unwrap()).contains(&current.to_string()),
            "{option}"
        );
    }
}

fn values(options: &Value, id: &str) -> Vec<String> {
    option(options, id)["options"]
        .as_array()
        .unwrap()
        .iter()
        .map(|choice| choice["value"].as_str().unwrap().to_string())
        .collect()
}

fn option<'a>(options: &'a Value, id: &str) -> &'a Value {
    options
        .as_array()
        .unwrap()
        .iter()
        .find(|o| o["id"] == id)
        .unwrap_or_else(|| panic!("no option {id}: {options}"))
}

/// `{id: currentValue}` of every option.
fn currents(options: &Value) -> Value {
    let mut map = serde_json::Map::new();
    for option in options.as_array().unwrap() {
        map.insert(
            option["id"].as_str().unwrap().to_string(),
            option["currentValue"].clone(),
        );
    }
    Value::Object(map)
}

fn choices(mode: &str, model: &str, effort: &str, preset: &str, approval: &str) -> Value {
    json!({"mode": mode, "model": model, "effort": effort,
           "agent_preset": preset, "tool_approval": approval})
}

/// The `update`s of the `session/update`s of this kind.
fn updates_of<'a>(messages: &'a [Value], kind: &str) -> Vec<&'a Value> {
    messages
        .iter()
        .filter(|m| m["method"] == "session/update")
        .map(|m| &m["params"]["update"])
        .filter(|u| u["sessionUpdate"] == kind)
        .collect()
}

fn prompt_ok(agent: &mut Agent, session: &str, text: &str) -> (Value, Vec<Value>) {
    let id = agent.request(
        "session/prompt",
        json!({"sessionId": session, "prompt": [{"type": "text", "text": text}]}),
    );
    let (response, others) = agent.response(&id, WAIT);
    match response.get("result") {
        Some(result) => (result.clone(), others),
        None => panic!("the prompt failed: {response}"),
    }
}

/// One tool call reply (`call_N`), usage included.
fn tool_reply(id: &str, name: &str, arguments: Value, usage: Step) -> Reply {
    Reply::Sse(vec![
        chunk_role(),
        chunk_tool_call(0, Some(id), Some(name), &arguments.to_string()),
        chunk_finish("tool_calls"),
        usage,
        done(),
    ])
}

fn text_reply(text: &str, usage: Step) -> Reply {
    Reply::Sse(vec![
        chunk_role(),
        crate::support::fake_openai::chunk_content(text),
        chunk_finish("stop"),
        usage,
        done(),
    ])
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

fn close(mut agent: Agent) {
    agent.close_stdin();
    let status = agent.wait_exit(WAIT).expect("the agent did not exit");
    assert!(status.success(), "{status:?}");
}

// ---------------------------------------------------------------------
// Config options
// ---------------------------------------------------------------------

#[test]
fn a_new_session_offers_modes_and_every_control() {
    let bench = Bench::new("controls-offer");
    let mut agent = bench.agent(&[]);
    let (_, result) = new_session(&mut agent, &bench.workspace("ws"));
    let modes = &result["modes"];
    assert_eq!(modes["currentModeId"], "normal");
    let mode_ids: Vec<&Value> = modes["availableModes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| &m["id"])
        .collect();
    assert_eq!(mode_ids, [&json!("normal"), &json!("plan"), &json!("goal")]);

    let options = &result["configOptions"];
    assert_complete(options);
    assert_eq!(
        currents(options),
        choices("normal", "fake/alpha", "auto", "balanced", "ask")
    );
    assert_eq!(option(options, "mode")["category"], "mode");
    assert_eq!(option(options, "model")["category"], "model");
    assert_eq!(option(options, "effort")["category"], "thought_level");
    assert_eq!(values(options, "mode"), ["normal", "plan", "goal"]);
    assert_eq!(values(options, "model"), ["fake/alpha", "fake/beta"]);
    assert_eq!(values(options, "effort"), ["auto", "low", "medium", "high"]);
    assert_eq!(
        values(options, "agent_preset"),
        ["light", "balanced", "delivery"]
    );
    assert_eq!(
        values(options, "tool_approval"),
        ["ask", "auto", "sandbox", "yolo"]
    );
    let names: Vec<&Value> = option(options, "model")["options"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| &c["name"])
        .collect();
    assert_eq!(names, [&json!("Alpha"), &json!("fake/beta")]);
}

#[test]
fn every_option_change_answers_the_complete_list() {
    let bench = Bench::new("controls-change");
    let mut agent = bench.agent(&[]);
    let (session, _) = new_session(&mut agent, &bench.workspace("ws"));
    let steps = [
        (
            "mode",
            "plan",
            choices("plan", "fake/alpha", "auto", "balanced", "ask"),
        ),
        (
            "effort",
            "high",
            choices("plan", "fake/alpha", "high", "balanced", "ask"),
        ),
        (
            "agent_preset",
            "delivery",
            choices("plan", "fake/alpha", "high", "delivery", "ask"),
        ),
        (
            "tool_approval",
            "yolo",
            choices("plan", "fake/alpha", "high", "delivery", "yolo"),
        ),
        (
            "tool_approval",
            "auto",
            choices("plan", "fake/alpha", "high", "delivery", "auto"),
        ),
        (
            "agent_preset",
            "light",
            choices("plan", "fake/alpha", "high", "light", "auto"),
        ),
        (
            "effort",
            "low",
            choices("plan", "fake/alpha", "low", "light", "auto"),
        ),
        (
            "model",
            "fake/beta",
            choices("plan", "fake/beta", "auto", "light", "auto"),
        ),
        (
            "mode",
            "normal",
            choices("normal", "fake/beta", "auto", "light", "auto"),
        ),
    ];
    for (id, value, expected) in steps {
        let (options, notes) = set(&mut agent, &session, id, value);
        assert_eq!(currents(&options), expected, "after {id} = {value}");
        let mode_updates = updates_of(&notes, "current_mode_update");
        if id == "mode" {
            assert_eq!(
                mode_updates,
                [&json!({"sessionUpdate": "current_mode_update", "currentModeId": value})],
                "{notes:?}"
            );
        } else {
            assert!(mode_updates.is_empty(), "{notes:?}");
        }
    }
}

#[test]
fn unknown_ids_and_values_are_invalid_params_and_change_nothing() {
    let bench = Bench::new("controls-invalid");
    let mut agent = bench.agent(&[]);
    let (session, _) = new_session(&mut agent, &bench.workspace("ws"));
    let error = set_err(&mut agent, &session, "temperature", json!("0.2"));
    assert_eq!(error["code"], -32602);
    assert!(error["message"].as_str().unwrap().contains("temperature"));
    for (id, value) in [
        ("mode", json!("yolo")),
        ("mode", json!("Plan")),
        ("model", json!("fake/gamma")),
        ("model", json!("alpha")),
        ("effort", json!("extreme")),
        ("agent_preset", json!("turbo")),
        ("work_mode", json!("fast")),
        ("tool_approval", json!("never")),
        ("mode", json!(true)),
        ("effort", json!(null)),
    ] {
        let error = set_err(&mut agent, &session, id, value.clone());
        assert_eq!(error["code"], -32602, "{id} = {value}: {error}");
    }
    let error = set_err(&mut agent, "sess_nope", "mode", json!("plan"));
    assert_eq!(error["code"], -32002, "{error}");
    let error = set_mode(&mut agent, &session, "code").unwrap_err();
    assert_eq!(error["code"], -32602, "{error}");
    let (options, _) = set(&mut agent, &session, "mode", "normal");
    assert_eq!(
        currents(&options),
        choices("normal", "fake/alpha", "auto", "balanced", "ask")
    );
}

#[test]
fn legacy_work_mode_and_economy_are_accepted() {
    let bench = Bench::new("controls-legacy");
    let mut agent = bench.agent(&[]);
    let (session, _) = new_session(&mut agent, &bench.workspace("ws"));
    let (options, _) = set(&mut agent, &session, "work_mode", "delivery");
    assert_eq!(currents(&options)["agent_preset"], "delivery");
    let (options, _) = set(&mut agent, &session, "agent_preset", "economy");
    assert_eq!(currents(&options)["agent_preset"], "light");
    let (options, _) = set(&mut agent, &session, "work_mode", "balanced");
    assert_eq!(currents(&options)["agent_preset"], "balanced");
    let (options, _) = set(&mut agent, &session, "work_mode", "economy");
    assert_eq!(currents(&options)["agent_preset"], "light");
    // The list always names the current id, never the legacy one.
    assert!(options
        .as_array()
        .unwrap()
        .iter()
        .all(|o| o["id"] != "work_mode"));
}

#[test]
fn a_model_change_resets_an_effort_the_new_model_does_not_take() {
    let bench = Bench::new("controls-effort");
    let mut agent = bench.agent(&[]);
    let (session, _) = new_session(&mut agent, &bench.workspace("ws"));
    let (options, _) = set(&mut agent, &session, "effort", "high");
    assert_eq!(currents(&options)["effort"], "high");
    let (options, _) = set(&mut agent, &session, "model", "fake/beta");
    assert_eq!(currents(&options)["effort"], "auto");
    assert_eq!(values(&options, "effort"), ["auto"]);
    let error = set_err(&mut agent, &session, "effort", json!("high"));
    assert_eq!(error["code"], -32602);
    let (options, _) = set(&mut agent, &session, "model", "fake/alpha");
    assert_eq!(currents(&options)["effort"], "auto");
    assert_eq!(
        values(&options, "effort"),
        ["auto", "low", "medium", "high"]
    );
    let (options, _) = set(&mut agent, &session, "effort", "low");
    assert_eq!(currents(&options)["effort"], "low");
    // Choosing the same model keeps an effort it takes.
    let (options, _) = set(&mut agent, &session, "model", "fake/alpha");
    assert_eq!(currents(&options)["effort"], "low");
}

#[test]
fn effort_and_preset_decide_the_reasoning_effort_sent() {
    let bench = Bench::new("controls-effort-sent");
    for _ in 0..5 {
        bench.server.push(Reply::Sse(chat_text(&["ok"])));
    }
    let mut agent = bench.agent(&[]);
    let (session, _) = new_session(&mut agent, &bench.workspace("ws"));
    // auto + balanced → medium
    prompt_ok(&mut agent, &session, "one");
    set(&mut agent, &session, "effort", "high");
    prompt_ok(&mut agent, &session, "two");
    set(&mut agent, &session, "effort", "auto");
    set(&mut agent, &session, "agent_preset", "light");
    prompt_ok(&mut agent, &session, "three");
    set(&mut agent, &session, "agent_preset", "delivery");
    prompt_ok(&mut agent, &session, "four");
    set(&mut agent, &session, "model", "fake/beta");
    prompt_ok(&mut agent, &session, "five");
    let requests = bench.server.wait_requests(5, WAIT);
    let sent: Vec<(&Value, &Value)> = requests
        .iter()
        .map(|r| (&r.body["model"], &r.body["reasoning_effort"]))
        .collect();
    assert_eq!(
        sent,
        [
            (&json!("alpha"), &json!("medium")),
            (&json!("alpha"), &json!("high")),
            (&json!("alpha"), &json!("low")),
            (&json!("alpha"), &json!("high")),
            (&json!("beta"), &Value::Null),
        ]
    );
    // The preset's instructions reach the system prompt.
    let system = |n: usize| requests[n].body["messages"][0]["content"].as_str().unwrap();
    assert_ne!(system(0), system(2));
    assert!(
        system(3).contains("run the relevant tests"),
        "{}",
        system(3)
    );
}

#[test]
fn tool_approval_changes_forget_remembered_answers() {
    let bench = Bench::new("controls-approvals");
    let usage = || chat_usage(10, 1, 0, 0);
    for content in ["one", "two", "three"] {
        bench.server.push(tool_reply(
            &format!("call_{content}"),
            "write_file",
            json!({"path": "a.txt", "content": content}),
            usage(),
        ));
        bench.server.push(text_reply("written", usage()));
    }
    let mut agent = bench.agent(&[]);
    let ws = bench.workspace("ws");
    let (session, _) = new_session(&mut agent, &ws);
    let turn = run_prompt(&mut agent, &session, "write one", WAIT, |request| {
        assert_eq!(request["method"], "session/request_permission");
        Answer::select("allow_always")
    });
    assert_eq!(turn.stop_reason(), "end_turn");
    assert_eq!(turn.permission_ids(), ["call_one"]);
    assert_eq!(std::fs::read_to_string(ws.join("a.txt")).unwrap(), "one");

    // Remembered: no question.
    let turn = run_prompt(&mut agent, &session, "write two", WAIT, no_requests);
    assert_eq!(turn.stop_reason(), "end_turn");
    assert_eq!(std::fs::read_to_string(ws.join("a.txt")).unwrap(), "two");

    set(&mut agent, &session, "tool_approval", "auto");
    set(&mut agent, &session, "tool_approval", "ask");
    let turn = run_prompt(&mut agent, &session, "write three", WAIT, |_| {
        Answer::select("allow_once")
    });
    assert_eq!(turn.stop_reason(), "end_turn");
    assert_eq!(turn.permission_ids(), ["call_three"]);
    assert_eq!(std::fs::read_to_string(ws.join("a.txt")).unwrap(), "three");
}

// ---------------------------------------------------------------------
// Modes
// ---------------------------------------------------------------------

#[test]
fn set_mode_notifies_and_keeps_the_mode_option_in_sync() {
    let bench = Bench::new("controls-modes");
    let mut agent = bench.agent(&[]);
    let (session, _) = new_session(&mut agent, &bench.workspace("ws"));
    let cases = [
        ("plan", "plan", "ask"),
        ("normal", "normal", "ask"),
        ("auto", "normal", "yolo"),
        ("plan", "plan", "yolo"),
        ("default", "normal", "ask"),
    ];
    for (requested, mode, approval) in cases {
        let notes = set_mode(&mut agent, &session, requested).unwrap();
        // The session's command list follows session/new's answer and
        // may arrive while the first mode change is waited for.
        let mine: Vec<Value> = notes
            .iter()
            .filter(|m| m["params"]["sessionId"] == session.as_str())
            .filter(|m| m["params"]["update"]["sessionUpdate"] != "available_commands_update")
            .cloned()
            .collect();
        assert_eq!(
            updates_of(&mine, "current_mode_update"),
            [&json!({"sessionUpdate": "current_mode_update", "currentModeId": mode})],
            "{requested}: {notes:?}"
        );
        let options = updates_of(&mine, "config_option_update");
        assert_eq!(options.len(), 1, "{requested}: {notes:?}");
        let options = &options[0]["configOptions"];
        assert_complete(options);
        assert_eq!(
            currents(options),
            choices(mode, "fake/alpha", "auto", "balanced", approval),
            "{requested}"
        );
        // The mode is the current_mode_update's, before the other updates.
        let first = &mine[0]["params"]["update"]["sessionUpdate"];
        assert_eq!(first, "current_mode_update", "{requested}");
    }
}

#[test]
fn plan_mode_offers_read_only_tools_and_refuses_writes() {
    let bench = Bench::new("controls-plan");
    let usage = || chat_usage(10, 1, 0, 0);
    bench.server.push(tool_reply(
        "call_write",
        "write_file",
        json!({"path": "plan.txt", "content": "x"}),
        usage(),
    ));
    bench.server.push(text_reply("Here is the plan.", usage()));
    bench.server.push(text_reply("Doing it.", usage()));
    let mut agent = bench.agent(&["--permissions", "yolo"]);
    let ws = bench.workspace("ws");
    let (session, _) = new_session(&mut agent, &ws);
    set_mode(&mut agent, &session, "plan").unwrap();

    let turn = run_prompt(&mut agent, &session, "Plan the change", WAIT, no_requests);
    assert_eq!(turn.stop_reason(), "end_turn");
    assert_eq!(turn.tool_call_ids(), ["call_write"]);
    let updates = turn.updates();
    let last = updates
        .iter()
        .rfind(|u| u["sessionUpdate"] == "tool_call_update" && u["toolCallId"] == "call_write")
        .expect("a final status");
    assert_eq!(last["status"], "failed", "{last}");
    assert!(last.to_string().contains("plan mode"), "{last}");
    assert!(!ws.join("plan.txt").exists());

    let requests = bench.server.wait_requests(2, WAIT);
    assert_eq!(tool_names(&requests[0].body), READ_ONLY_TOOLS);
    let system = requests[0].body["messages"][0]["content"].as_str().unwrap();
    assert!(system.contains("plan mode"), "{system}");
    let messages = requests[1].body["messages"].as_array().unwrap();
    let answer = messages.last().unwrap();
    assert_eq!(answer["role"], "tool");
    assert!(
        answer["content"].as_str().unwrap().contains("plan mode"),
        "{answer}"
    );

    set_mode(&mut agent, &session, "normal").unwrap();
    prompt_ok(&mut agent, &session, "Carry it out");
    let requests = bench.server.wait_requests(3, WAIT);
    let names = tool_names(&requests[2].body);
    for tool in ["write_file", "edit_file"] {
        assert!(names.contains(&tool.to_string()), "{names:?}");
    }
    let system = requests[2].body["messages"][0]["content"].as_str().unwrap();
    assert!(!system.contains("The session is in plan mode"), "{system}");
}

// ---------------------------------------------------------------------
// Persistence and defaults
// ---------------------------------------------------------------------

#[test]
fn choices_come_back_on_load_and_resume_in_a_new_process() {
    let bench = Bench::new("controls-reload");
    bench.server.push(Reply::Sse(chat_text(&["planned"])));
    let ws = bench.workspace("ws");
    let expected = choices("plan", "fake/alpha", "high", "delivery", "auto");
    let mut agent = bench.agent(&[]);
    let (session, _) = new_session(&mut agent, &ws);
    set(&mut agent, &session, "effort", "high");
    set(&mut agent, &session, "agent_preset", "delivery");
    set(&mut agent, &session, "tool_approval", "auto");
    set_mode(&mut agent, &session, "plan").unwrap();
    close(agent);

    let params = json!({"sessionId": session, "cwd": ws.to_str().unwrap(), "mcpServers": []});
    let mut agent = bench.agent(&[]);
    let (result, _) = ok_with(&mut agent, "session/load", params.clone());
    assert_eq!(result["modes"]["currentModeId"], "plan");
    assert_complete(&result["configOptions"]);
    assert_eq!(currents(&result["configOptions"]), expected);
    close(agent);

    let mut agent = bench.agent(&[]);
    let (result, _) = ok_with(&mut agent, "session/resume", params);
    assert_eq!(result["modes"]["currentModeId"], "plan");
    assert_eq!(currents(&result["configOptions"]), expected);
    // And they take effect.
    prompt_ok(&mut agent, &session, "plan it");
    let request = &bench.server.wait_requests(1, WAIT)[0];
    assert_eq!(request.body["reasoning_effort"], "high");
    assert_eq!(tool_names(&request.body), READ_ONLY_TOOLS);
}

#[test]
fn the_last_choices_in_a_workspace_are_the_next_sessions_defaults() {
    let bench = Bench::with_defaults(
        "controls-workspace",
        json!({"model": "fake/alpha", "effort": "medium", "preset": "delivery", "approval": "auto"}),
    );
    let ws = bench.workspace("ws");
    let other = bench.workspace("other");
    let configured = choices("normal", "fake/alpha", "medium", "delivery", "auto");
    let mut agent = bench.agent(&[]);
    let (first, result) = new_session(&mut agent, &ws);
    assert_eq!(currents(&result["configOptions"]), configured);
    set(&mut agent, &first, "model", "fake/beta");
    set(&mut agent, &first, "agent_preset", "light");
    set(&mut agent, &first, "tool_approval", "yolo");
    // The approval policy carries over only up to auto: yolo once is not
    // yolo forever.
    let remembered = choices("normal", "fake/beta", "auto", "light", "auto");
    let (second, result) = new_session(&mut agent, &ws);
    assert_eq!(currents(&result["configOptions"]), remembered);
    let (_, result) = new_session(&mut agent, &other);
    assert_eq!(currents(&result["configOptions"]), configured);

    // The last session changed wins, with all of its choices.
    set(&mut agent, &second, "model", "fake/alpha");
    set(&mut agent, &second, "effort", "high");
    let remembered = choices("normal", "fake/alpha", "high", "light", "auto");
    close(agent);

    let mut agent = bench.agent(&[]);
    let (_, result) = new_session(&mut agent, &ws);
    assert_eq!(currents(&result["configOptions"]), remembered);
    let (_, result) = new_session(&mut agent, &other);
    assert_eq!(currents(&result["configOptions"]), configured);
}

#[test]
fn command_line_flags_win_over_workspace_and_config_defaults() {
    let bench = Bench::with_defaults(
        "controls-flags",
        json!({"model": "fake/alpha", "preset": "delivery", "approval": "auto"}),
    );
    let ws = bench.workspace("ws");
    let other = bench.workspace("other");
    let mut agent = bench.agent(&[]);
    let (session, _) = new_session(&mut agent, &ws);
    set(&mut agent, &session, "model", "fake/beta");
    set(&mut agent, &session, "agent_preset", "light");
    set(&mut agent, &session, "tool_approval", "yolo");
    close(agent);

    let flags = [
        "--model",
        "fake/alpha",
        "--preset",
        "balanced",
        "--permissions",
        "ask",
    ];
    let mut agent = bench.agent(&flags);
    let flagged = choices("normal", "fake/alpha", "auto", "balanced", "ask");
    let (_, result) = new_session(&mut agent, &ws);
    assert_eq!(currents(&result["configOptions"]), flagged);
    let (_, result) = new_session(&mut agent, &other);
    assert_eq!(currents(&result["configOptions"]), flagged);
    close(agent);

    // One flag wins; the rest still comes from the workspace.
    let mut agent = bench.agent(&["--profile", "economy"]);
    let (_, result) = new_session(&mut agent, &ws);
    assert_eq!(
        currents(&result["configOptions"]),
        choices("normal", "fake/beta", "auto", "light", "auto")
    );
    let mut agent2 = bench.agent(&["--permissions", "auto", "--model", "beta"]);
    let (_, result) = new_session(&mut agent2, &ws);
    assert_eq!(
        currents(&result["configOptions"]),
        choices("normal", "fake/beta", "auto", "light", "auto")
    );
    let (_, result) = new_session(&mut agent2, &other);
    assert_eq!(
        currents(&result["configOptions"]),
        choices("normal", "fake/beta", "auto", "delivery", "auto")
    );
}

// ---------------------------------------------------------------------
// Usage and cost
// ---------------------------------------------------------------------

#[test]
fn usage_updates_and_the_prompt_meta_carry_tokens_and_cost() {
    let bench = Bench::new("controls-usage");
    let server = &bench.server;
    server.push(tool_reply(
        "call_ls",
        "list_directory",
        json!({}),
        chat_usage(1000, 100, 400, 30),
    ));
    server.push(text_reply("Listed.", chat_usage(1200, 50, 0, 0)));
    server.push(text_reply("Again.", chat_usage(500, 10, 0, 0)));
    server.push(text_reply("Unpriced.", chat_usage(300, 20, 0, 0)));
    server.push(text_reply("Reloaded.", chat_usage(100, 10, 0, 0)));
    let ws = bench.workspace("ws");
    let mut agent = bench.agent(&["--permissions", "yolo"]);
    let (session, _) = new_session(&mut agent, &ws);

    // Priced at 2 / 8 per million, cached input at 0.5, in EUR.
    let (result, messages) = prompt_ok(&mut agent, &session, "list");
    assert_eq!(result["stopReason"], "end_turn");
    assert_eq!(updates_text(&messages, "agent_message_chunk"), "Listed.");
    let usage = updates_of(&messages, "usage_update");
    assert_eq!(usage.len(), 2, "{usage:?}");
    assert_eq!(
        (&usage[0]["used"], &usage[0]["size"]),
        (&json!(1100), &json!(64000))
    );
    assert_eq!(usage[0]["cost"]["currency"], "EUR");
    // 600 × 2 + 400 × 0.5 + 100 × 8 = 2200 per million
    approx(&usage[0]["cost"]["amount"], 0.0022);
    assert_eq!(
        (&usage[1]["used"], &usage[1]["size"]),
        (&json!(1250), &json!(64000))
    );
    // + 1200 × 2 + 50 × 8 = 2800: the session's cost so far
    approx(&usage[1]["cost"]["amount"], 0.005);
    let meta = &result["_meta"]["spindle"]["usage"];
    assert_eq!(meta["inputTokens"], 2200);
    assert_eq!(meta["outputTokens"], 150);
    assert_eq!(meta["cachedReadTokens"], 400);
    assert_eq!(meta["thoughtTokens"], 30);
    assert_eq!(meta["totalTokens"], 2350);
    approx(&meta["cost"], 0.005);

    // The next turn: its own cost in _meta, the session's in usage_update.
    let (result, messages) = prompt_ok(&mut agent, &session, "again");
    let usage = updates_of(&messages, "usage_update");
    assert_eq!(usage.len(), 1);
    approx(&usage[0]["cost"]["amount"], 0.00608);
    approx(&result["_meta"]["spindle"]["usage"]["cost"], 0.00108);
    assert_eq!(result["_meta"]["spindle"]["usage"]["totalTokens"], 510);

    // A model without prices: no cost.
    set(&mut agent, &session, "model", "fake/beta");
    let (result, messages) = prompt_ok(&mut agent, &session, "unpriced");
    let usage = updates_of(&messages, "usage_update");
    assert_eq!(usage.len(), 1);
    assert_eq!(
        (&usage[0]["used"], &usage[0]["size"]),
        (&json!(320), &json!(32000))
    );
    assert!(usage[0].get("cost").is_none(), "{:?}", usage[0]);
    // Unknown, not free.
    assert_eq!(result["_meta"]["spindle"]["usage"]["cost"], Value::Null);
    set(&mut agent, &session, "model", "fake/alpha");
    close(agent);

    // The session's cost is stored with it, the unknown call too: its
    // total stays unknown, and /cost says what the priced calls came to.
    let mut agent = bench.agent(&[]);
    ok_with(
        &mut agent,
        "session/resume",
        json!({"sessionId": session, "cwd": ws.to_str().unwrap()}),
    );
    let (result, messages) = prompt_ok(&mut agent, &session, "after reload");
    let usage = updates_of(&messages, "usage_update");
    assert_eq!(usage.len(), 1);
    assert!(usage[0].get("cost").is_none(), "{:?}", usage[0]);
    // The turn's own calls are priced: + 100 × 2 + 10 × 8 = 280
    approx(&result["_meta"]["spindle"]["usage"]["cost"], 0.00028);
    let (_, messages) = prompt_ok(&mut agent, &session, "/cost");
    let text = updates_text(&messages, "agent_message_chunk");
    assert!(text.contains("no price for 1 of 5 model calls"), "{text}");
    assert!(text.contains("the other calls cost 0.0064 EUR"), "{text}");
    assert!(!text.contains("0.0000"), "{text}");
}

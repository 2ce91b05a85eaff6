//! Which choice wins, through the real binary: every command-line flag
//! beats every configured value (a trusted project's defaults, the
//! workspace's last choices, the user's config), as the table in
//! docs/configuration.md says, one test per row. Each test's user config
//! points `defaults.model` at a decoy server that must get no model call
//! (unless the row is about that server's own retries).

use crate::support::client::no_requests;
use crate::support::fake_openai::chat_text;
use crate::support::prelude::{ok, WAIT};
use crate::support::{run_prompt, temp_dir, write_file, Agent, Answer, FakeServer, Reply};
use serde_json::{json, Value};
use std::fs;
use std::path::{Path, PathBuf};

/// A user's machine after `spindle setup`: a config whose
/// `defaults.model` names the decoy server (with `defaults` besides),
/// the workspace a trusted project whose own defaults name the decoy too.
struct Machine {
    decoy: FakeServer,
    base: PathBuf,
    home: PathBuf,
    ws: PathBuf,
}

impl Machine {
    fn new(name: &str, defaults: Value, extra: Value) -> Machine {
        let decoy = FakeServer::start();
        let base = spindle::os::canonical(temp_dir(name)).unwrap();
        let (home, ws) = (base.join("home"), base.join("ws"));
        fs::create_dir_all(&home).unwrap();
        fs::create_dir_all(&ws).unwrap();
        let mut config = json!({
            "providers": {"decoy": {"kind": "openai", "base_url": decoy.base_url(),
                                     "requires_key": false}},
            "models": {"decoy/alpha": {"context_window": 64000}},
            "permissions": {"projects": {ws.display().to_string(): {"trusted": true}}},
        });
        let mut all = json!({"model": "decoy/alpha"});
        for (key, value) in defaults.as_object().unwrap() {
            all[key] = value.clone();
        }
        config["defaults"] = all;
        for (key, value) in extra.as_object().unwrap() {
            match (config.get_mut(key), value) {
                (Some(Value::Object(have)), Value::Object(more)) => {
                    have.extend(more.clone());
                }
                _ => config[key] = value.clone(),
            }
        }
        write_file(&home, "config.json", config.to_string());
        write_file(
            &ws,
            ".spindle/config.json",
            json!({"defaults": {"model": "decoy/alpha", "approval": "ask"}}).to_string(),
        );
        Machine {
            decoy,
            base,
            home,
            ws,
        }
    }

    fn home_env(&self) -> [(&str, &str); 1] {
        [("SPINDLE_HOME", self.home.to_str().unwrap())]
    }

    /// `spindle acp` with `args` on this machine, initialized.
    fn agent(&self, args: &[&str]) -> Agent {
        let mut agent = Agent::spawn(args, &self.home_env());
        agent.initialize();
        agent
    }

    /// A session in the workspace: its id and its config options.
    fn session(&self, agent: &mut Agent) -> (String, Value) {
        let result = ok(
            agent,
            "session/new",
            json!({"cwd": self.ws.to_str().unwrap(), "mcpServers": []}),
        );
        let id = result["sessionId"].as_str().unwrap().to_string();
        (id, result["configOptions"].clone())
    }

    /// Makes the workspace remember choices of a session there: the decoy's
    /// model, `preset` and `approval`, as a user who changed them would.
    fn remember(&self, preset: &str, approval: &str) {
        let mut agent = self.agent(&["acp"]);
        let (session, _) = self.session(&mut agent);
        for (id, value) in [
            ("model", "decoy/alpha"),
            ("agent_preset", preset),
            ("tool_approval", approval),
        ] {
            ok(
                &mut agent,
                "session/set_config_option",
                json!({"sessionId": session, "configId": id, "value": value}),
            );
        }
        agent.close_stdin();
        assert!(
            agent.wait_exit(WAIT).is_some(),
            "the first agent did not end"
        );
    }

    /// The database of the user's sessions (`--db` makes a scripted run
    /// use it, and read what the workspace remembers).
    fn db(&self) -> String {
        self.home.join("spindle.db").to_str().unwrap().to_string()
    }

    /// Changes the user's config file.
    fn configure(&self, change: impl FnOnce(&mut Value)) {
        let path = self.home.join("config.json");
        let mut config: Value = serde_json::from_str(&fs::read_to_string(&path).unwrap()).unwrap();
        change(&mut config);
        fs::write(&path, config.to_string()).unwrap();
    }

    /// A scenario file in the base folder.
    fn script(&self, replies: Value) -> PathBuf {
        write_file(
            &self.base,
            "script.json",
            json!({"replies": replies}).to_string(),
        )
    }

    /// A command other than `acp` on this machine, in the workspace.
    fn run(&self, args: &[&str], stdin: &str) -> std::process::Output {
        let mut command = crate::support::spindle_command(&self.home);
        command.args(args).current_dir(&self.ws);
        // With no controlling terminal, whatever runs the tests: a
        // question would be refused, never wait for an answer.
        #[cfg(unix)]
        {
            use std::os::unix::process::CommandExt;
            // SAFETY: only setsid(2) runs between fork and exec.
            unsafe {
                command.pre_exec(|| {
                    libc::setsid();
                    Ok(())
                });
            }
        }
        crate::support::agent::output_with_input(&mut command, stdin.as_bytes())
    }

    /// The decoy got no model call.
    fn untouched(&self) {
        let requests = self.decoy.requests();
        assert!(
            requests.is_empty(),
            "the configured default model was called: {:?}",
            requests.iter().map(|r| &r.path).collect::<Vec<_>>()
        );
    }
}

impl Drop for Machine {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            let _ = fs::remove_dir_all(&self.base);
        }
    }
}

/// A config option's current value.
fn current(options: &Value, id: &str) -> String {
    options
        .as_array()
        .unwrap()
        .iter()
        .find(|o| o["id"] == id)
        .map(|o| o["currentValue"].as_str().unwrap_or_default().to_string())
        .unwrap_or_else(|| panic!("no option {id} in {options}"))
}

fn out(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[test]
fn script_beats_the_users_the_projects_and_an_agent_files_model_in_acp() {
    let machine = Machine::new("prec-script-acp", json!({}), json!({}));
    let script = machine.script(json!([{"text": "scripted hello"}]));
    // An agent file naming the decoy's model does not win either.
    let file = write_file(
        &machine.base,
        "agent/agent.json",
        json!({"name": "decoyed", "model": "decoy/alpha"}).to_string(),
    );
    let script = script.to_str().unwrap();
    for args in [
        vec!["acp", "--script", script],
        vec![
            "acp",
            file.parent().unwrap().to_str().unwrap(),
            "--script",
            script,
        ],
    ] {
        let mut agent = machine.agent(&args);
        let (session, options) = machine.session(&mut agent);
        assert_eq!(current(&options, "model"), "script/scenario", "{args:?}");
        let turn = run_prompt(&mut agent, &session, "hi", WAIT, no_requests);
        assert_eq!(turn.stop_reason(), "end_turn", "{}", turn.dump());
        assert!(turn.text().contains("scripted hello"), "{}", turn.dump());
    }
    machine.untouched();
}

#[test]
fn script_with_yolo_runs_the_readmes_tools_demo_whatever_the_config_says() {
    let machine = Machine::new("prec-script-yolo", json!({"approval": "ask"}), json!({}));
    let demo = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/tools.script.json");
    let mut agent = machine.agent(&[
        "acp",
        "--script",
        demo.to_str().unwrap(),
        "--permissions",
        "yolo",
    ]);
    let (session, options) = machine.session(&mut agent);
    assert_eq!(current(&options, "tool_approval"), "yolo");
    // No permission request may come: yolo asks nothing.
    let turn = run_prompt(&mut agent, &session, "show me the tools", WAIT, no_requests);
    assert_eq!(turn.stop_reason(), "end_turn", "{}", turn.dump());
    assert!(turn.text().contains("Hello, Spindle!"), "{}", turn.dump());
    let written = fs::read_to_string(machine.ws.join("spindle-demo.txt")).unwrap();
    assert_eq!(written, "Hello, Spindle!\n");
    machine.untouched();
}

#[test]
fn script_beats_the_default_model_in_exec_and_chat() {
    let machine = Machine::new("prec-script-exec", json!({}), json!({}));
    let script = machine.script(json!([{"text": "scripted exec"}, {"text": "scripted chat"}]));
    let path = script.to_str().unwrap();
    let exec = machine.run(&["exec", "--script", path, "hi"], "");
    assert!(exec.status.success(), "{}", out(&exec.stderr));
    assert!(
        out(&exec.stdout).contains("scripted exec"),
        "{}",
        out(&exec.stdout)
    );
    let script = machine.script(json!([{"text": "scripted chat"}]));
    let chat = machine.run(&["chat", "--script", script.to_str().unwrap()], "hi\n");
    assert!(chat.status.success(), "{}", out(&chat.stderr));
    assert!(
        out(&chat.stdout).contains("scripted chat"),
        "{}",
        out(&chat.stdout)
    );
    machine.untouched();
}

#[test]
fn retries_flag_beats_a_gateways_single_retry() {
    let machine = Machine::new("prec-retries", json!({}), json!({}));
    // The decoy is this test's model: a gateway the config marks as
    // retrying by itself, which fails twice before it answers.
    machine.configure(|config| config["providers"]["decoy"]["gateway"] = json!(true));
    for _ in 0..2 {
        machine.decoy.push(Reply::Status {
            code: 503,
            body: json!({"error": {"message": "busy", "type": "server_error"}}).to_string(),
            headers: vec![("retry-after-ms".into(), "10".into())],
        });
    }
    machine.decoy.push(Reply::Sse(chat_text(&["third time"])));
    let mut agent = machine.agent(&["acp", "--retries", "2"]);
    let (session, _) = machine.session(&mut agent);
    let turn = run_prompt(&mut agent, &session, "hi", WAIT, no_requests);
    assert_eq!(turn.stop_reason(), "end_turn", "{}", turn.dump());
    assert!(turn.text().contains("third time"), "{}", turn.dump());
    assert_eq!(machine.decoy.requests().len(), 3);
}

#[test]
fn flags_beat_what_a_session_gone_on_with_chose_in_exec_and_chat() {
    let chosen = FakeServer::start();
    let providers = json!({"providers": {"chosen": {"kind": "openai",
        "base_url": chosen.base_url(), "requires_key": false}}});
    let machine = Machine::new("prec-continue", json!({"approval": "ask"}), providers);
    let db = machine.base.join("sessions.db");
    let db = db.to_str().unwrap();
    let first = machine.script(json!([{"text": "first answer"}]));
    let run = machine.run(
        &[
            "exec",
            "--script",
            first.to_str().unwrap(),
            "--db",
            db,
            "--permissions",
            "ask",
            "one",
        ],
        "",
    );
    assert!(run.status.success(), "{}", out(&run.stderr));
    // Going on under yolo: the write runs though the session chose ask.
    let write = machine.script(json!([
        {"tool_calls": [{"name": "write_file",
                         "arguments": {"path": "made.txt", "content": "made\n"}}]},
        {"text": "written"}
    ]));
    let run = machine.run(
        &[
            "exec",
            "--script",
            write.to_str().unwrap(),
            "--db",
            db,
            "--continue",
            "--permissions",
            "yolo",
            "two",
        ],
        "",
    );
    assert!(run.status.success(), "{}", out(&run.stderr));
    assert!(out(&run.stdout).contains("written"), "{}", out(&run.stdout));
    assert_eq!(
        fs::read_to_string(machine.ws.join("made.txt")).unwrap(),
        "made\n"
    );
    // Going on with --model (a bare name): that model answers, not the
    // user's default that replaces the scenario no longer offered.
    chosen.push(Reply::Sse(chat_text(&["the chosen model answers"])));
    let run = machine.run(
        &["exec", "--db", db, "--continue", "--model", "beta", "three"],
        "",
    );
    assert!(run.status.success(), "{}", out(&run.stderr));
    assert!(
        out(&run.stdout).contains("the chosen model answers"),
        "{}",
        out(&run.stdout)
    );
    chosen.push(Reply::Sse(chat_text(&["chat goes on"])));
    let run = machine.run(
        &["chat", "--db", db, "--continue", "--model", "chosen/beta"],
        "four\n",
    );
    assert!(run.status.success(), "{}", out(&run.stderr));
    assert!(
        out(&run.stdout).contains("chat goes on"),
        "{}",
        out(&run.stdout)
    );
    assert_eq!(chosen.requests().len(), 2);
    machine.untouched();
}

#[test]
fn model_flag_beats_the_project_the_workspace_and_the_users_default() {
    let chosen = FakeServer::start();
    let providers = json!({"providers": {"chosen": {"kind": "openai",
        "base_url": chosen.base_url(), "requires_key": false}}});
    let machine = Machine::new("prec-model", json!({}), providers);
    machine.remember("balanced", "ask");
    chosen.push(Reply::Sse(chat_text(&["the chosen model answers"])));
    let mut agent = machine.agent(&["acp", "--model", "chosen/beta"]);
    let (session, options) = machine.session(&mut agent);
    assert_eq!(current(&options, "model"), "chosen/beta");
    let turn = run_prompt(&mut agent, &session, "hi", WAIT, no_requests);
    assert!(
        turn.text().contains("the chosen model answers"),
        "{}",
        turn.dump()
    );
    assert_eq!(chosen.requests().len(), 1);
    machine.untouched();
}

#[test]
fn permissions_flag_beats_the_project_the_workspace_and_the_users_default() {
    let machine = Machine::new("prec-permissions", json!({"approval": "ask"}), json!({}));
    machine.remember("balanced", "auto");
    let script = machine.script(json!([
        {"tool_calls": [{"name": "write_file",
                         "arguments": {"path": "made.txt", "content": "made\n"}}]},
        {"text": "written"}
    ]));
    let db = machine.db();
    let mut agent = machine.agent(&[
        "acp",
        "--script",
        script.to_str().unwrap(),
        "--db",
        &db,
        "--permissions",
        "yolo",
    ]);
    let (session, options) = machine.session(&mut agent);
    assert_eq!(current(&options, "tool_approval"), "yolo");
    let turn = run_prompt(&mut agent, &session, "make it", WAIT, no_requests);
    assert!(turn.text().contains("written"), "{}", turn.dump());
    assert_eq!(
        fs::read_to_string(machine.ws.join("made.txt")).unwrap(),
        "made\n"
    );
    machine.untouched();
}

#[test]
fn preset_flag_beats_the_workspace_and_the_users_default() {
    let machine = Machine::new("prec-preset", json!({"preset": "delivery"}), json!({}));
    machine.remember("delivery", "ask");
    let script = machine.script(json!([]));
    let db = machine.db();
    let mut agent = machine.agent(&[
        "acp",
        "--script",
        script.to_str().unwrap(),
        "--db",
        &db,
        "--preset",
        "light",
    ]);
    let (_, options) = machine.session(&mut agent);
    assert_eq!(current(&options, "agent_preset"), "light");
    machine.untouched();
}

#[test]
fn max_steps_flag_beats_the_step_budget_of_the_users_preset() {
    let machine = Machine::new("prec-steps", json!({"preset": "delivery"}), json!({}));
    write_file(&machine.ws, "a.txt", "a\n");
    let read = json!({"tool_calls": [{"name": "read_file", "arguments": {"path": "a.txt"}}]});
    let script = machine.script(json!([read, read, {"text": "read twice"}]));
    let mut agent = machine.agent(&[
        "acp",
        "--script",
        script.to_str().unwrap(),
        "--max-steps",
        "1",
    ]);
    let (session, _) = machine.session(&mut agent);
    let turn = run_prompt(&mut agent, &session, "read", WAIT, no_requests);
    assert_eq!(turn.stop_reason(), "max_turn_requests", "{}", turn.dump());
    assert!(!turn.text().contains("read twice"), "{}", turn.dump());
    // The stop is said in the conversation, not only in the stop reason.
    assert!(
        turn.notices()
            .contains("It made 1 model request, the most one turn may make"),
        "{}",
        turn.dump()
    );
    machine.untouched();
}

#[test]
fn on_reject_flag_beats_the_users_permissions_on_reject() {
    let stop = json!({"permissions": {"on_reject": "stop"}});
    let machine = Machine::new("prec-on-reject", json!({}), stop);
    let script = machine.script(json!([
        {"tool_calls": [{"name": "write_file",
                         "arguments": {"path": "no.txt", "content": "no\n"}}]},
        {"text": "went on without it"}
    ]));
    let mut agent = machine.agent(&[
        "acp",
        "--script",
        script.to_str().unwrap(),
        "--permissions",
        "ask",
        "--on-reject",
        "continue",
    ]);
    let (session, _) = machine.session(&mut agent);
    let turn = run_prompt(&mut agent, &session, "write", WAIT, |_| {
        Answer::select("reject_once")
    });
    assert_eq!(
        turn.requests("session/request_permission").len(),
        1,
        "{}",
        turn.dump()
    );
    assert!(
        turn.text().contains("went on without it"),
        "{}",
        turn.dump()
    );
    assert!(!machine.ws.join("no.txt").exists());
    machine.untouched();
}

#[test]
fn log_file_flag_beats_the_users_log_file() {
    let machine = Machine::new("prec-log", json!({}), json!({}));
    let configured = machine.base.join("configured.log");
    let flagged = machine.base.join("flagged.log");
    machine.configure(|config| config["log_file"] = json!(configured.to_str().unwrap()));
    let script = machine.script(json!([]));
    let mut agent = machine.agent(&[
        "acp",
        "--script",
        script.to_str().unwrap(),
        "--log-file",
        flagged.to_str().unwrap(),
    ]);
    machine.session(&mut agent);
    agent.close_stdin();
    assert!(agent.wait_exit(WAIT).is_some(), "the agent did not end");
    assert!(flagged.exists(), "the flag's log file was not written");
    assert!(!configured.exists(), "the config's log file was used");
    // exec takes the flag too (it was ignored there).
    let exec_log = machine.base.join("exec.log");
    let script = machine.script(json!([{"text": "logged"}]));
    let run = machine.run(
        &[
            "exec",
            "--script",
            script.to_str().unwrap(),
            "--log-file",
            exec_log.to_str().unwrap(),
            "hi",
        ],
        "",
    );
    assert!(run.status.success(), "{}", out(&run.stderr));
    assert!(exec_log.exists(), "exec's --log-file was not written");
    assert!(!configured.exists(), "the config's log file was used");
    machine.untouched();
}

#[test]
fn db_flag_beats_the_default_database_and_a_scripted_runs_throwaway_one() {
    let machine = Machine::new("prec-db", json!({}), json!({}));
    let script = machine.script(json!([{"text": "kept"}]));
    let db = machine.base.join("chosen.db");
    let mut agent = machine.agent(&[
        "acp",
        "--script",
        script.to_str().unwrap(),
        "--db",
        db.to_str().unwrap(),
    ]);
    let (session, _) = machine.session(&mut agent);
    run_prompt(&mut agent, &session, "keep it", WAIT, no_requests);
    agent.close_stdin();
    assert!(agent.wait_exit(WAIT).is_some(), "the agent did not end");
    assert!(db.exists(), "the session was not kept in --db's file");
    assert!(
        !machine.home.join("spindle.db").exists(),
        "the default database was used"
    );
    machine.untouched();
}

//! The unstable parts of ACP and Spindle's opt-ins to them, through the
//! real binary: each goes only to a client that advertised it in
//! `initialize`, every other client sees what it always did (the harness
//! validates an opted-in client against the unstable edition of the
//! schema, every other one against the stable edition), and a session
//! recorded by one kind of client replays right to the other.

use crate::support::agent::is_notice;
use crate::support::fake_openai::chat_text;
use crate::support::{run_prompt, temp_dir, Agent, Answer, FakeServer, Reply, Turn};
use serde_json::{json, Value};
use std::path::PathBuf;
use std::time::Duration;

const WAIT: Duration = Duration::from_secs(20);

/// A test's folder: a workspace, a database shared by the agents it
/// starts one after the other, and their temp folder.
struct Bench {
    base: PathBuf,
    ws: PathBuf,
}

impl Bench {
    fn new(name: &str) -> Bench {
        let base = std::fs::canonicalize(temp_dir(name)).expect("the temp dir");
        let ws = base.join("ws");
        std::fs::create_dir_all(&ws).expect("the workspace");
        std::fs::create_dir_all(base.join("tmp")).expect("the agent's TMPDIR");
        Bench { base, ws }
    }

    fn path(&self, name: &str) -> String {
        self.base.join(name).to_str().expect("UTF-8").to_string()
    }

    fn ws(&self) -> &str {
        self.ws.to_str().expect("UTF-8")
    }

    /// `spindle acp --db <db> ARGS`, initialized with `capabilities`.
    fn agent(&self, args: &[&str], env: &[(&str, &str)], capabilities: Value) -> Agent {
        let db = self.path("sessions.db");
        let mut all = vec!["acp", "--db", db.as_str()];
        all.extend_from_slice(args);
        let tmp = self.path("tmp");
        let mut all_env = vec![("TMPDIR", tmp.as_str())];
        all_env.extend_from_slice(env);
        let mut agent = Agent::spawn(&all, &all_env);
        let id = agent.request(
            "initialize",
            json!({"protocolVersion": 1, "clientCapabilities": capabilities,
                   "clientInfo": {"name": "spindle-unstable-tests", "version": "0.0.0"}}),
        );
        let (response, _) = agent.response(&id, WAIT);
        assert!(response.get("result").is_some(), "{response}");
        agent
    }

    /// A scripted agent in `yolo` (the script's replies in order).
    fn scripted(&self, script: &Value, capabilities: Value) -> Agent {
        let path = self.path("script.json");
        std::fs::write(&path, script.to_string()).expect("the script");
        self.agent(
            &["--script", &path, "--permissions", "yolo"],
            &[],
            capabilities,
        )
    }

    /// An agent on a fake Chat Completions server.
    fn on_server(&self, server: &FakeServer, capabilities: Value) -> Agent {
        let base = server.base_url();
        self.agent(
            &["--model", "test-model"],
            &[("OPENAI_BASE_URL", &base), ("OPENAI_API_KEY", "sk-test")],
            capabilities,
        )
    }

    fn session(&self, agent: &mut Agent) -> String {
        agent.new_session(&self.ws)
    }

    /// `session/load`: the replayed updates of the session.
    fn load(&self, agent: &mut Agent, session: &str) -> Vec<Value> {
        let id = agent.request(
            "session/load",
            json!({"sessionId": session, "cwd": self.ws(), "mcpServers": []}),
        );
        let (response, others) = agent.response(&id, WAIT);
        assert!(response.get("result").is_some(), "{response}");
        others
            .iter()
            .filter(|m| m["method"] == "session/update" && m["params"]["sessionId"] == session)
            .map(|m| m["params"]["update"].clone())
            .filter(|u| u["sessionUpdate"] != "available_commands_update")
            .collect()
    }
}

impl Drop for Bench {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            let _ = std::fs::remove_dir_all(&self.base);
        }
    }
}

fn no_requests(request: &Value) -> Answer {
    panic!("unexpected request {request}")
}

fn say(text: &str) -> Value {
    json!({"text": text})
}

/// `_meta.spindle` opt-ins as client capabilities.
fn opt_in(key: &str) -> Value {
    json!({"_meta": {"spindle": {key: true}}})
}

/// The updates of a turn of this kind.
fn of_kind<'a>(turn: &'a Turn, kind: &str) -> Vec<&'a Value> {
    turn.updates()
        .into_iter()
        .filter(|u| u["sessionUpdate"] == kind)
        .collect()
}

fn text_chunks(updates: &[Value]) -> String {
    updates
        .iter()
        .filter(|u| u["sessionUpdate"] == "agent_message_chunk")
        .filter_map(|u| u["content"]["text"].as_str())
        .collect()
}

// ----- notices -----

/// A client that opted in gets the start notice as a `notice`; one that
/// did not gets it as a chunk of its own; neither replays it.
#[test]
fn notices_are_live_only_in_either_form() {
    let bench = Bench::new("unstable-notices");
    let script = json!({"replies": [say("One.")], "fallback": say("Again.")});
    let mut opted = bench.scripted(&script, opt_in("notices"));
    let session = bench.session(&mut opted);
    let turn = run_prompt(&mut opted, &session, "one", WAIT, no_requests);
    assert_eq!(turn.stop_reason(), "end_turn", "{}", turn.dump());
    let notices = of_kind(&turn, "notice");
    assert_eq!(notices.len(), 1, "{}", turn.dump());
    assert_eq!(notices[0]["severity"], "warning");
    assert_eq!(notices[0]["title"], "This session runs in yolo");
    assert!(
        notices[0]["description"]
            .as_str()
            .is_some_and(|d| d.contains("--permissions flag")),
        "{}",
        notices[0]
    );
    // Not among the answer's chunks.
    assert_eq!(
        text_chunks(&turn.updates().into_iter().cloned().collect::<Vec<_>>()),
        "One."
    );
    drop(opted);

    let mut plain = bench.scripted(&script, json!({}));
    let replayed = bench.load(&mut plain, &session);
    assert!(!replayed.iter().any(is_notice), "{replayed:#?}");
    assert_eq!(text_chunks(&replayed), "One.");
    // The plain client's own session shows it as a chunk of its own.
    let other = bench.session(&mut plain);
    let turn = run_prompt(&mut plain, &other, "two", WAIT, no_requests);
    assert!(of_kind(&turn, "notice").is_empty(), "{}", turn.dump());
    let chunks: Vec<&Value> = of_kind(&turn, "agent_message_chunk")
        .into_iter()
        .filter(|u| is_notice(u))
        .collect();
    assert_eq!(chunks.len(), 1, "{}", turn.dump());
    assert!(
        chunks[0]["content"]["text"]
            .as_str()
            .is_some_and(|t| t.contains("This session runs in yolo")),
        "{}",
        chunks[0]
    );
    assert_eq!(turn.text(), "One.");
    drop(plain);

    // Replayed to either kind of client, neither session has a notice.
    let mut opted = bench.scripted(&script, opt_in("notices"));
    for id in [&session, &other] {
        let replayed = bench.load(&mut opted, id);
        assert!(!replayed.iter().any(is_notice), "{replayed:#?}");
        assert!(!text_chunks(&replayed).contains("yolo"), "{replayed:#?}");
    }
}

/// A retry's status line is a notice: not a thought of the model, not in
/// the conversation the model is sent next, not replayed.
#[test]
fn a_retry_notice_stays_out_of_the_conversation() {
    let bench = Bench::new("unstable-retry");
    let server = FakeServer::start();
    server.push(Reply::openai_error(
        500,
        "The server had an error",
        "server_error",
        "server_error",
    ));
    server.push(Reply::Sse(chat_text(&["Recovered."])));
    server.push(Reply::Sse(chat_text(&["Second."])));
    let mut agent = bench.on_server(&server, opt_in("notices"));
    let session = bench.session(&mut agent);
    let turn = run_prompt(&mut agent, &session, "hello", WAIT, no_requests);
    assert_eq!(turn.stop_reason(), "end_turn", "{}", turn.dump());
    let notices = of_kind(&turn, "notice");
    assert_eq!(notices.len(), 1, "{}", turn.dump());
    assert_eq!(notices[0]["severity"], "warning");
    assert_eq!(notices[0]["title"], "Retrying the model request");
    let description = notices[0]["description"].as_str().unwrap_or_default();
    assert!(
        description.contains("The server had an error") && description.contains("retrying in"),
        "{description}"
    );
    assert!(
        of_kind(&turn, "agent_thought_chunk").is_empty(),
        "{}",
        turn.dump()
    );
    assert_eq!(turn.text(), "Recovered.");
    let turn = run_prompt(&mut agent, &session, "again", WAIT, no_requests);
    assert_eq!(turn.text(), "Second.");
    let requests = server.requests();
    assert_eq!(requests.len(), 3);
    let sent = requests[2].body.to_string();
    assert!(
        sent.contains("Recovered.") && !sent.contains("retrying"),
        "{sent}"
    );
    drop(agent);

    let mut plain = bench.on_server(&server, json!({}));
    let replayed = bench.load(&mut plain, &session);
    let all = Value::Array(replayed.clone()).to_string();
    assert!(!all.contains("retrying"), "{replayed:#?}");
    assert_eq!(text_chunks(&replayed), "Recovered.Second.");
}

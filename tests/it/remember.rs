//! The `remember` tool through the real binary: a note asked about
//! outside yolo (under `auto` too, though the project's file is in the
//! workspace), written to the user's own `AGENTS.md` or the project's
//! instruction file, read into later prompts and shown by `/memory`;
//! never through a link out of the workspace.

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
    fn new(name: &str) -> Bench {
        let model = FakeServer::start();
        let base = spindle::os::canonical(temp_dir(name)).unwrap();
        let ws = base.join("ws");
        fs::create_dir_all(&ws).unwrap();
        let config = one_model_config(&model, None);
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
    /// (`support::in_process`), with a session in the workspace.
    fn agent(&self, policy: &str) -> (Agent, String) {
        let config = self.config.to_str().unwrap();
        self.open(in_process::acp(&[
            "--config",
            config,
            "--permissions",
            policy,
        ]))
    }

    /// `agent` as a process of its own, whose `SPINDLE_HOME` (where the
    /// user's `AGENTS.md` is) is its own.
    fn agent_process(&self, policy: &str) -> (Agent, String) {
        let config = self.config.to_str().unwrap();
        self.open(Agent::spawn(
            &["acp", "--config", config, "--permissions", policy],
            &[],
        ))
    }

    /// Initializes `agent` and opens a session in the workspace.
    fn open(&self, mut agent: Agent) -> (Agent, String) {
        agent.initialize();
        let (result, _) = ok_with(
            &mut agent,
            "session/new",
            json!({"cwd": self.ws.to_str().unwrap(), "mcpServers": []}),
        );
        let session = result["sessionId"].as_str().unwrap().to_string();
        (agent, session)
    }

    fn remember(&self, arguments: Value) {
        self.model
            .push(Reply::Sse(chat_tool_calls(&[("remember", arguments)])));
        self.model.push(Reply::Sse(chat_text(&["noted"])));
    }
}

impl Drop for Bench {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            let _ = fs::remove_dir_all(&self.base);
        }
    }
}

#[test]
fn a_note_for_every_workspace_is_asked_about_kept_and_read_again() {
    let bench = Bench::new("remember-user");
    let (mut agent, session) = bench.agent_process("auto");
    bench.remember(json!({"note": "The user prefers tabs\nover spaces."}));
    let mut asked = Vec::new();
    let turn = run_prompt(&mut agent, &session, "remember tabs", WAIT, |request| {
        asked.push(request.clone());
        Answer::select("allow_once")
    });
    assert_eq!(asked.len(), 1, "{}", turn.dump());
    let shown = asked[0]["params"]["toolCall"].to_string();
    assert!(
        shown.contains("The user prefers tabs over spaces."),
        "{shown}"
    );
    assert_eq!(turn.final_status("call_1"), "completed");
    let global = agent.home().join("AGENTS.md");
    assert_eq!(
        fs::read_to_string(&global).unwrap(),
        "- The user prefers tabs over spaces.\n"
    );
    // Read into the next turn's prompt, and listed by /memory.
    bench.model.push(Reply::Sse(chat_text(&["ok"])));
    run_prompt(&mut agent, &session, "hello", WAIT, no_requests);
    let body = bench.model.requests().pop().unwrap().body;
    assert!(body["messages"][0]["content"]
        .as_str()
        .unwrap()
        .contains("The user prefers tabs over spaces."));
    let turn = run_prompt(&mut agent, &session, "/memory", WAIT, no_requests);
    assert!(turn.text().contains("AGENTS.md"), "{}", turn.text());
}

#[test]
fn a_project_note_asks_under_auto_and_goes_to_the_file_in_force() {
    let bench = Bench::new("remember-project");
    write_file(&bench.ws, "CLAUDE.md", "# Project\n");
    let (mut agent, session) = bench.agent("auto");
    // (A rejection ends the turn: no answer after the call.)
    bench.model.push(Reply::Sse(chat_tool_calls(&[(
        "remember",
        json!({"note": "Run make check before committing", "scope": "project"}),
    )])));
    let turn = run_prompt(&mut agent, &session, "remember", WAIT, |_| {
        Answer::select("reject_once")
    });
    assert_eq!(turn.permission_ids().len(), 1, "asked under auto");
    assert_eq!(
        fs::read_to_string(bench.ws.join("CLAUDE.md")).unwrap(),
        "# Project\n"
    );
    drop(agent);
    let (mut agent, session) = bench.agent("yolo");
    bench.remember(json!({"note": "Run make check before committing", "scope": "project"}));
    run_prompt(&mut agent, &session, "remember", WAIT, no_requests);
    assert_eq!(
        fs::read_to_string(bench.ws.join("CLAUDE.md")).unwrap(),
        "# Project\n- Run make check before committing\n"
    );
    assert!(!bench.ws.join("AGENTS.md").exists());
    // A bad call is refused with a reason.
    bench.remember(json!({"note": "x", "scope": "everywhere"}));
    let turn = run_prompt(&mut agent, &session, "remember", WAIT, no_requests);
    assert!(turn.final_text("call_1").contains("scope must be"));
}

#[test]
#[cfg(unix)]
fn a_project_file_that_links_out_is_never_written() {
    let bench = Bench::new("remember-link");
    let outside = bench.base.join("outside.md");
    fs::write(&outside, "outside\n").unwrap();
    std::os::unix::fs::symlink(&outside, bench.ws.join("AGENTS.md")).unwrap();
    let (mut agent, session) = bench.agent("yolo");
    bench.remember(json!({"note": "leak", "scope": "project"}));
    let turn = run_prompt(&mut agent, &session, "remember", WAIT, no_requests);
    assert_eq!(turn.final_status("call_1"), "failed");
    assert!(turn
        .final_text("call_1")
        .contains("links out of the workspace"));
    assert_eq!(fs::read_to_string(&outside).unwrap(), "outside\n");
}

//! The unstable parts of ACP and Spindle's opt-ins to them, through the
//! real binary: each goes only to a client that advertised it in
//! `initialize`, every other client sees what it always did (the harness
//! validates an opted-in client against the unstable edition of the
//! schema, every other one against the stable edition), and a session
//! recorded by one kind of client replays right to the other.

use crate::support::agent::is_notice;
use crate::support::fake_openai::chat_text;
use crate::support::prelude::WAIT;
use crate::support::{
    in_process, run_prompt, temp_dir, Agent, Answer, Exchange, FakeServer, Reply, Turn,
};
use serde_json::{json, Value};
use std::path::PathBuf;

/// A test's folder: a workspace, a database shared by the agents it
/// starts one after the other, and their temp folder.
struct Bench {
    base: PathBuf,
    ws: PathBuf,
}

impl Bench {
    fn new(name: &str) -> Bench {
        let base = spindle::os::canonical(temp_dir(name)).expect("the temp dir");
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

    /// `spindle acp --db <db> ARGS`, initialized with `capabilities`: in
    /// process (`support::in_process`), or a process of its own (its
    /// `TMPDIR` in the test's folder) when `env` sets variables for it.
    fn agent(&self, args: &[&str], env: &[(&str, &str)], capabilities: Value) -> Agent {
        let db = self.path("sessions.db");
        let mut all = vec!["--db", db.as_str()];
        all.extend_from_slice(args);
        let mut agent = if env.is_empty() {
            in_process::acp(&all)
        } else {
            all.insert(0, "acp");
            let tmp = self.path("tmp");
            let mut all_env = vec![("TMPDIR", tmp.as_str())];
            all_env.extend_from_slice(env);
            Agent::spawn(&all, &all_env)
        };
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

    /// An agent on a fake Chat Completions server (named in a config
    /// file as `OPENAI_BASE_URL` would name it).
    fn on_server(&self, server: &FakeServer, capabilities: Value) -> Agent {
        let config = in_process::openai_config(&self.base, &server.base_url(), "sk-test");
        let config = config.to_str().expect("UTF-8");
        self.agent(
            &["--model", "test-model", "--config", config],
            &[],
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

/// The stable opt-in, `session.notices`, gets the same `notice` as the
/// older vendor one; a client with `session.notices: null` gets a chunk.
#[test]
fn the_stable_notices_capability_gets_notices() {
    let bench = Bench::new("stable-notices");
    let script = json!({"replies": [say("One.")], "fallback": say("Again.")});
    let mut stable = bench.scripted(&script, json!({"session": {"notices": {}}}));
    let session = bench.session(&mut stable);
    let turn = run_prompt(&mut stable, &session, "one", WAIT, no_requests);
    let notices = of_kind(&turn, "notice");
    assert_eq!(notices.len(), 1, "{}", turn.dump());
    assert_eq!(notices[0]["title"], "This session runs in yolo");
    assert!(!turn
        .updates()
        .iter()
        .any(|u| u["sessionUpdate"] == "agent_message_chunk" && is_notice(u)));
    drop(stable);

    let mut null = bench.scripted(&script, json!({"session": {"notices": null}}));
    let other = bench.session(&mut null);
    let turn = run_prompt(&mut null, &other, "two", WAIT, no_requests);
    assert!(of_kind(&turn, "notice").is_empty(), "{}", turn.dump());
    assert_eq!(
        of_kind(&turn, "agent_message_chunk")
            .into_iter()
            .filter(|u| is_notice(u))
            .count(),
        1,
        "{}",
        turn.dump()
    );
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

// ----- compaction -----

fn compaction() -> Value {
    json!({"session": {"compaction": {}}})
}

fn is_compaction(update: &Value) -> bool {
    matches!(
        update["sessionUpdate"].as_str(),
        Some("compaction_update" | "compaction_summary_chunk")
    )
}

/// Checks one compaction's live updates (in progress, chunks, one
/// terminal status) and returns the terminal one and the streamed text.
fn one_compaction(updates: &[&Value]) -> (Value, String) {
    let seen: Vec<&&Value> = updates.iter().filter(|u| is_compaction(u)).collect();
    assert!(seen.len() >= 2, "{updates:#?}");
    let first = seen[0];
    assert_eq!(first["sessionUpdate"], "compaction_update", "{first}");
    assert_eq!(first["status"], "in_progress", "{first}");
    let id = first["compactionId"].as_str().expect("an id");
    assert!(seen.iter().all(|u| u["compactionId"] == id), "{seen:#?}");
    let last = seen[seen.len() - 1];
    assert_eq!(last["sessionUpdate"], "compaction_update", "{last}");
    let middle = &seen[1..seen.len() - 1];
    assert!(
        middle
            .iter()
            .all(|u| u["sessionUpdate"] == "compaction_summary_chunk"),
        "{seen:#?}"
    );
    let streamed = middle
        .iter()
        .filter_map(|u| u["content"]["text"].as_str())
        .collect();
    ((*last).clone(), streamed)
}

/// `/compact` to a client that takes compaction updates: one compaction,
/// its summary streamed into it rather than into the answer, replayed as
/// the terminal update it ended with; a client without the capability
/// gets neither live nor on replay.
#[test]
fn compact_is_one_compaction_for_a_client_that_takes_it() {
    let bench = Bench::new("unstable-compact");
    let summary = "The user designs an API; nothing is decided yet.";
    let script = json!({"replies": [say("First answer."), say(summary), say("After.")],
                        "fallback": say("Again.")});
    let mut agent = bench.scripted(&script, compaction());
    let session = bench.session(&mut agent);
    run_prompt(&mut agent, &session, "Design the API", WAIT, no_requests);
    let turn = run_prompt(&mut agent, &session, "/compact", WAIT, no_requests);
    assert_eq!(turn.stop_reason(), "end_turn", "{}", turn.dump());
    let (terminal, streamed) = one_compaction(&turn.updates());
    assert_eq!(streamed, summary);
    assert_eq!(terminal["status"], "completed");
    assert_eq!(
        terminal["summary"],
        json!([{"type": "text", "text": summary}])
    );
    let meta = &terminal["_meta"]["spindle"];
    assert!(
        meta["tokensBefore"].as_u64().is_some() && meta["tokensAfter"].as_u64().is_some(),
        "{terminal}"
    );
    // Neither the summary nor a notice is the answer.
    assert!(
        of_kind(&turn, "agent_message_chunk").is_empty(),
        "{}",
        turn.dump()
    );
    // The conversation goes on from the summary.
    let next = run_prompt(&mut agent, &session, "and now?", WAIT, no_requests);
    assert_eq!(next.text(), "After.");
    drop(agent);

    let mut again = bench.scripted(&script, compaction());
    let replayed = bench.load(&mut again, &session);
    let compactions: Vec<&Value> = replayed.iter().filter(|u| is_compaction(u)).collect();
    assert_eq!(compactions, vec![&terminal], "{replayed:#?}");
    drop(again);

    // A client without the capability: none of it on replay, and its own
    // /compact shows the summary as the answer and a notice.
    let mut plain = bench.scripted(&script, json!({}));
    let replayed = bench.load(&mut plain, &session);
    assert!(!replayed.iter().any(is_compaction), "{replayed:#?}");
    assert_eq!(text_chunks(&replayed), "First answer.After.");
    let other = bench.session(&mut plain);
    run_prompt(&mut plain, &other, "Design the API", WAIT, no_requests);
    let turn = run_prompt(&mut plain, &other, "/compact", WAIT, no_requests);
    assert!(
        !turn.updates().iter().any(|u| is_compaction(u)),
        "{}",
        turn.dump()
    );
    assert_eq!(turn.text(), summary, "{}", turn.dump());
    assert!(
        turn.notices().contains("Context compacted"),
        "{}",
        turn.dump()
    );
}

/// A summary that fails ends its compaction `failed`, with the error.
#[test]
fn a_failed_compact_ends_its_compaction_failed() {
    let bench = Bench::new("unstable-compact-failed");
    let script = json!({"replies": [
        say("First answer."),
        {"text": "Half a", "error": {"code": "provider_http_500", "message": "The server broke"}},
    ], "fallback": say("Again.")});
    let mut agent = bench.scripted(&script, compaction());
    let session = bench.session(&mut agent);
    run_prompt(&mut agent, &session, "Design the API", WAIT, no_requests);
    let turn = run_prompt(&mut agent, &session, "/compact", WAIT, no_requests);
    assert_eq!(turn.response["error"]["code"], -32603, "{}", turn.dump());
    let (terminal, streamed) = one_compaction(&turn.updates());
    assert_eq!(streamed, "Half a");
    assert_eq!(terminal["status"], "failed");
    assert_eq!(terminal["error"], "The server broke");
    assert!(terminal.get("summary").is_none(), "{terminal}");
    drop(agent);
    let mut again = bench.scripted(&script, compaction());
    let replayed = bench.load(&mut again, &session);
    let compactions: Vec<&Value> = replayed.iter().filter(|u| is_compaction(u)).collect();
    assert_eq!(compactions, vec![&terminal], "{replayed:#?}");
}

/// Automatic compaction past the threshold, to a client that takes
/// compaction updates: one compaction instead of the notice.
#[test]
fn automatic_compaction_is_a_compaction_update() {
    let bench = Bench::new("unstable-auto-compaction");
    let server = FakeServer::start();
    for _ in 0..6 {
        server.push(Reply::Sse(chat_text(&["Noted."])));
    }
    let config = bench.path("config.json");
    std::fs::write(
        &config,
        json!({
            "providers": {"fake": {"kind": "openai", "base_url": server.base_url(),
                                   "api_key_env": "FAKE_CTX_KEY"}},
            "models": {"fake/ctx": {"context_window": 16000}},
            "defaults": {"model": "fake/ctx"},
        })
        .to_string(),
    )
    .unwrap();
    let mut agent = bench.agent(
        &["--config", &config, "--permissions", "yolo"],
        &[("FAKE_CTX_KEY", "k")],
        compaction(),
    );
    let session = bench.session(&mut agent);
    let mut compacted = Vec::new();
    for n in 0..5 {
        let text = format!("Prompt {n}: {}", "lorem ipsum ".repeat(640));
        let turn = run_prompt(&mut agent, &session, &text, WAIT, no_requests);
        assert_eq!(turn.stop_reason(), "end_turn", "{}", turn.dump());
        assert!(!turn.notices().contains("compacted"), "{}", turn.dump());
        if turn.updates().iter().any(|u| is_compaction(u)) {
            compacted.push(one_compaction(&turn.updates()));
        }
    }
    assert_eq!(compacted.len(), 1, "{compacted:#?}");
    let (terminal, streamed) = compacted.remove(0);
    assert_eq!(streamed, "Noted.");
    assert_eq!(terminal["status"], "completed");
    assert_eq!(terminal["summary"][0]["text"], "Noted.");
    let meta = &terminal["_meta"]["spindle"];
    assert!(
        meta["tokensAfter"].as_u64() < meta["tokensBefore"].as_u64(),
        "{terminal}"
    );
    drop(agent);
    let mut again = bench.agent(
        &["--config", &config, "--permissions", "yolo"],
        &[("FAKE_CTX_KEY", "k")],
        compaction(),
    );
    let replayed = bench.load(&mut again, &session);
    let compactions: Vec<&Value> = replayed.iter().filter(|u| is_compaction(u)).collect();
    assert_eq!(compactions, vec![&terminal], "{replayed:#?}");
}

/// A cancel during a compaction still ends it, `cancelled`.
#[test]
fn a_cancelled_compact_ends_its_compaction_cancelled() {
    let bench = Bench::new("unstable-compact-cancel");
    let script = json!({"replies": [
        say("First answer."),
        {"text": "one two three four five six seven eight", "chunk_delay_ms": 300},
    ], "fallback": say("Again.")});
    let mut agent = bench.scripted(&script, compaction());
    let session = bench.session(&mut agent);
    run_prompt(&mut agent, &session, "Design the API", WAIT, no_requests);
    let mut exchange = Exchange::prompt(&mut agent, &session, "/compact");
    let mut answer = no_requests;
    let started = exchange.until(&mut agent, WAIT, &mut answer, &mut |e: &Exchange| {
        e.messages
            .iter()
            .any(|m| m["params"]["update"]["sessionUpdate"] == "compaction_summary_chunk")
    });
    assert!(started, "the compaction did not stream");
    agent.notify("session/cancel", json!({"sessionId": session}));
    let turn = exchange.finish(&mut agent, WAIT, &mut answer);
    assert_eq!(turn.stop_reason(), "cancelled", "{}", turn.dump());
    let (terminal, _) = one_compaction(&turn.updates());
    assert_eq!(terminal["status"], "cancelled", "{}", turn.dump());
}

// ----- tool call names -----

/// The `tool_call` updates of these updates, by id.
fn announced<'a>(updates: impl IntoIterator<Item = &'a Value>) -> Vec<&'a Value> {
    updates
        .into_iter()
        .filter(|u| u["sessionUpdate"] == "tool_call")
        .collect()
}

/// Whether any tool call report or permission request names its tool.
fn names_a_tool(messages: &[Value]) -> bool {
    messages.iter().any(|m| {
        let update = &m["params"]["update"];
        let reported = matches!(
            update["sessionUpdate"].as_str(),
            Some("tool_call" | "tool_call_update")
        ) && update.get("name").is_some();
        reported || m["params"]["toolCall"].get("name").is_some()
    })
}

/// The tool's name is stable: every client sees it in each tool's first
/// report and in the permission request, live and replayed, whether it
/// set the old `toolCallName` opt-in or not.
#[test]
fn tool_names_go_to_every_client() {
    let bench = Bench::new("stable-tool-name");
    std::fs::write(bench.ws.join("a.txt"), "alpha\n").unwrap();
    let path = bench.path("script.json");
    let script = json!({"replies": [
        {"tool_calls": [
            {"id": "read_1", "name": "read_file", "arguments": {"path": "a.txt"}},
            {"id": "write_1", "name": "write_file", "arguments": {"path": "b.txt", "content": "x\n"}},
        ]},
        say("Done."),
    ], "fallback": say("Again.")});
    std::fs::write(&path, script.to_string()).unwrap();
    let allow = |request: &Value| {
        assert_eq!(request["method"], "session/request_permission", "{request}");
        Answer::select("allow_once")
    };
    for capabilities in [json!({}), opt_in("toolCallName")] {
        let mut agent = bench.agent(&["--script", &path], &[], capabilities.clone());
        let session = bench.session(&mut agent);
        let turn = run_prompt(&mut agent, &session, "read and write", WAIT, allow);
        assert_eq!(turn.stop_reason(), "end_turn", "{}", turn.dump());
        let updates = turn.updates();
        let live = announced(updates.iter().copied());
        assert_eq!(live.len(), 2, "{}", turn.dump());
        assert_eq!(live[0]["name"], "read_file", "{capabilities}");
        assert_eq!(live[1]["name"], "write_file", "{capabilities}");
        let asked = turn.requests("session/request_permission");
        assert_eq!(asked.len(), 1, "{}", turn.dump());
        assert_eq!(asked[0]["params"]["toolCall"]["name"], "write_file");
        assert!(names_a_tool(&turn.messages));
        assert!(bench.ws.join("b.txt").exists());
        std::fs::remove_file(bench.ws.join("b.txt")).unwrap();
        drop(agent);

        // Replayed to the other kind of client, the names are there.
        let other = if capabilities == json!({}) {
            opt_in("toolCallName")
        } else {
            json!({})
        };
        let mut again = bench.agent(&["--script", &path], &[], other);
        let replayed = bench.load(&mut again, &session);
        assert_eq!(announced(&replayed), live, "{replayed:#?}");
    }
}

// ----- end-of-turn usage -----

/// A scripted turn's answer, for a client with or without `promptUsage`.
fn answered(bench: &Bench, replies: Value, capabilities: Value) -> Value {
    let script = json!({"replies": replies, "fallback": say("Again.")});
    let mut agent = bench.scripted(&script, capabilities);
    let session = bench.session(&mut agent);
    let turn = run_prompt(&mut agent, &session, "go", WAIT, no_requests);
    assert_eq!(turn.stop_reason(), "end_turn", "{}", turn.dump());
    turn.response["result"].clone()
}

/// The prompt's answer carries the turn's `usage` for a client that set
/// `promptUsage`: summed over its model calls, a count only when every
/// call gave it, none at all when a call said nothing.
#[test]
fn the_turn_usage_is_on_the_answer_for_a_client_that_asked() {
    let bench = Bench::new("unstable-usage");
    std::fs::write(bench.ws.join("a.txt"), "alpha\n").unwrap();
    let two_calls = json!([
        {"tool_calls": [{"id": "read_1", "name": "read_file", "arguments": {"path": "a.txt"}}],
         "usage": {"input_tokens": 100, "output_tokens": 10, "cached_tokens": 40,
                   "reasoning_tokens": 3}},
        {"text": "Done.", "usage": {"input_tokens": 150, "output_tokens": 5, "reasoning_tokens": 2}},
    ]);
    let result = answered(&bench, two_calls.clone(), opt_in("promptUsage"));
    // Cache reads were reported by one call only: unknown, so left out.
    assert_eq!(
        result["usage"],
        json!({"totalTokens": 265, "inputTokens": 250, "outputTokens": 15, "thoughtTokens": 5}),
        "{result}"
    );
    // Spindle's own `_meta` usage is there for every client.
    assert_eq!(result["_meta"]["spindle"]["usage"]["inputTokens"], 250);
    let plain = answered(&bench, two_calls, json!({}));
    assert!(plain.get("usage").is_none(), "{plain}");
    assert_eq!(plain["_meta"]["spindle"]["usage"]["inputTokens"], 250);

    // A call that said nothing: the turn's usage is not known.
    let partly = json!([
        {"tool_calls": [{"id": "read_1", "name": "read_file", "arguments": {"path": "a.txt"}}],
         "usage": {"input_tokens": 100, "output_tokens": 10}},
        say("Done."),
    ]);
    let result = answered(&bench, partly, opt_in("promptUsage"));
    assert!(result.get("usage").is_none(), "{result}");
    let silent = answered(&bench, json!([say("Done.")]), opt_in("promptUsage"));
    assert!(silent.get("usage").is_none(), "{silent}");
}

/// Counts a provider reports as 0 are 0; what it never reports (cache
/// writes, for Chat Completions) is left out.
#[test]
fn reported_zeros_are_kept_and_unreported_counts_left_out() {
    let bench = Bench::new("unstable-usage-wire");
    let server = FakeServer::start();
    server.push(Reply::Sse(chat_text(&["Hello."])));
    let mut agent = bench.on_server(&server, opt_in("promptUsage"));
    let session = bench.session(&mut agent);
    let turn = run_prompt(&mut agent, &session, "hi", WAIT, no_requests);
    let usage = &turn.response["result"]["usage"];
    let input = usage["inputTokens"].as_u64().expect("input tokens");
    let output = usage["outputTokens"].as_u64().expect("output tokens");
    assert_eq!(usage["totalTokens"], input + output, "{usage}");
    assert_eq!(usage["cachedReadTokens"], 0, "{usage}");
    assert_eq!(usage["thoughtTokens"], 0, "{usage}");
    assert!(usage.get("cachedWriteTokens").is_none(), "{usage}");
}

// ----- the diff's deleted flag -----

/// Every diff among these messages' tool calls and permission requests.
fn diffs(messages: &[Value]) -> Vec<Value> {
    messages
        .iter()
        .flat_map(|m| {
            let update = m["params"]["update"]["content"].as_array().cloned();
            let asked = m["params"]["toolCall"]["content"].as_array().cloned();
            update.into_iter().chain(asked).flatten()
        })
        .filter(|block| block["type"] == "diff")
        .collect()
}

fn as_messages(updates: &[Value]) -> Vec<Value> {
    updates
        .iter()
        .map(|u| json!({"params": {"update": u}}))
        .collect()
}

/// `delete_file`'s diff says `deleted: true` to a client that set
/// `diffDeleted` (when asked and when done, live and replayed); any other
/// client gets the plain diff.
#[test]
fn a_deleted_file_diff_is_flagged_for_a_client_that_asked() {
    let bench = Bench::new("unstable-diff-deleted");
    std::fs::write(bench.ws.join("a.txt"), "alpha\n").unwrap();
    let path = bench.path("script.json");
    let script = json!({"replies": [
        {"tool_calls": [{"id": "del_1", "name": "delete_file", "arguments": {"path": "a.txt"}}]},
        say("Deleted."),
    ], "fallback": say("Again.")});
    std::fs::write(&path, script.to_string()).unwrap();
    let allow = |_: &Value| Answer::select("allow_once");
    let mut opted = bench.agent(&["--script", &path], &[], opt_in("diffDeleted"));
    let session = bench.session(&mut opted);
    let turn = run_prompt(&mut opted, &session, "delete a.txt", WAIT, allow);
    assert_eq!(turn.stop_reason(), "end_turn", "{}", turn.dump());
    assert!(!bench.ws.join("a.txt").exists());
    assert_eq!(turn.requests("session/request_permission").len(), 1);
    let live = diffs(&turn.messages);
    assert!(live.len() >= 2, "{}", turn.dump());
    let path_a = bench.ws.join("a.txt").to_str().unwrap().to_string();
    for diff in &live {
        assert_eq!(diff["deleted"], true, "{diff}");
        assert_eq!(diff["oldText"], "alpha\n", "{diff}");
        assert_eq!(diff["newText"], "", "{diff}");
        assert_eq!(diff["path"], path_a.as_str(), "{diff}");
    }
    drop(opted);

    let mut again = bench.agent(&["--script", &path], &[], opt_in("diffDeleted"));
    let replayed = diffs(&as_messages(&bench.load(&mut again, &session)));
    assert!(!replayed.is_empty() && replayed.iter().all(|d| d["deleted"] == true));
    drop(again);

    let mut plain = bench.agent(&["--script", &path], &[], json!({}));
    let replayed = diffs(&as_messages(&bench.load(&mut plain, &session)));
    assert!(!replayed.is_empty(), "no diff replayed");
    assert!(
        replayed.iter().all(|d| d.get("deleted").is_none()),
        "{replayed:#?}"
    );
    std::fs::write(bench.ws.join("a.txt"), "alpha\n").unwrap();
    let other = bench.session(&mut plain);
    let turn = run_prompt(&mut plain, &other, "delete a.txt", WAIT, allow);
    assert_eq!(turn.stop_reason(), "end_turn", "{}", turn.dump());
    assert!(!bench.ws.join("a.txt").exists());
    let live = diffs(&turn.messages);
    assert!(live.len() >= 2, "{}", turn.dump());
    assert!(live.iter().all(|d| d.get("deleted").is_none()), "{live:#?}");
}

// ----- plan_update -----

/// `todo_write`'s plan is a `plan_update` of items for a client that
/// advertised `plan`, live and replayed; the same entries as `plan` for
/// any other client.
#[test]
fn the_plan_is_a_plan_update_for_a_client_that_takes_them() {
    let bench = Bench::new("unstable-plan");
    let todos = json!([
        {"content": "Write notes.txt", "status": "in_progress", "priority": "high"},
        {"content": "Check it", "status": "pending", "priority": "medium"},
    ]);
    let script = json!({"replies": [
        {"tool_calls": [{"id": "plan_1", "name": "todo_write", "arguments": {"todos": todos}}]},
        say("Planned."),
    ], "fallback": say("Again.")});
    let mut opted = bench.scripted(&script, json!({"plan": {}}));
    let session = bench.session(&mut opted);
    let turn = run_prompt(&mut opted, &session, "plan it", WAIT, no_requests);
    assert_eq!(turn.stop_reason(), "end_turn", "{}", turn.dump());
    assert!(of_kind(&turn, "plan").is_empty(), "{}", turn.dump());
    let live: Vec<Value> = of_kind(&turn, "plan_update").into_iter().cloned().collect();
    assert_eq!(live.len(), 1, "{}", turn.dump());
    assert_eq!(live[0]["plan"]["type"], "items");
    assert_eq!(live[0]["plan"]["planId"], "todo");
    let entries = live[0]["plan"]["entries"].clone();
    assert_eq!(entries.as_array().map(Vec::len), Some(2), "{}", live[0]);
    assert_eq!(entries[0]["content"], "Write notes.txt");
    assert_eq!(entries[0]["status"], "in_progress");
    assert_eq!(entries[1]["priority"], "medium");
    drop(opted);

    let mut again = bench.scripted(&script, json!({"plan": {}}));
    let replayed = bench.load(&mut again, &session);
    let plans: Vec<Value> = replayed
        .iter()
        .filter(|u| {
            u["sessionUpdate"]
                .as_str()
                .is_some_and(|k| k.starts_with("plan"))
        })
        .cloned()
        .collect();
    assert_eq!(plans, live, "{replayed:#?}");
    drop(again);

    let mut plain = bench.scripted(&script, json!({}));
    let replayed = bench.load(&mut plain, &session);
    let plans: Vec<&Value> = replayed
        .iter()
        .filter(|u| {
            u["sessionUpdate"]
                .as_str()
                .is_some_and(|k| k.starts_with("plan"))
        })
        .collect();
    assert_eq!(plans.len(), 1, "{replayed:#?}");
    assert_eq!(plans[0]["sessionUpdate"], "plan");
    assert_eq!(plans[0]["entries"], entries);
    let other = bench.session(&mut plain);
    let turn = run_prompt(&mut plain, &other, "plan it", WAIT, no_requests);
    assert!(of_kind(&turn, "plan_update").is_empty(), "{}", turn.dump());
    let plans = of_kind(&turn, "plan");
    assert_eq!(plans.len(), 1, "{}", turn.dump());
    assert_eq!(plans[0]["entries"], entries);
}

// ----- one fitting for every door -----

/// What one client saw of a session through each door.
struct Doors {
    /// A turn's updates as they came (the job's among them).
    live: Vec<Value>,
    /// The background job's transcript (`_spindle/job/transcript`).
    transcript: Vec<Value>,
    /// The agent's own update outside a turn (a mode change).
    outside: Vec<Value>,
    /// `session/load` in a new process.
    replay: Vec<Value>,
}

/// Runs the same session for a client with `capabilities`: a plan of the
/// session's and one of a background job, `/compact`, a mode change, then
/// a reload in a new process.
fn through_every_door(bench: &Bench, script: &Value, capabilities: Value) -> Doors {
    let mut agent = bench.scripted(script, capabilities.clone());
    let session = bench.session(&mut agent);
    let turn = run_prompt(&mut agent, &session, "plan it", WAIT, no_requests);
    assert_eq!(turn.stop_reason(), "end_turn", "{}", turn.dump());
    let mut live: Vec<Value> = turn.updates().into_iter().cloned().collect();
    // The job's updates are live ones too. A job that ends after the
    // prompt's answer gets a turn of its own (source `job`), awaited here;
    // one that ended before it was told within the prompt's turn.
    let job_ended = |message: &Value| {
        message["method"] == "_spindle/event"
            && message["params"]["kind"] == "turn"
            && message["params"]["data"]["state"] == "idle"
            && message["params"]["data"]["source"] == "job"
    };
    let ended_within = turn.messages.iter().any(|message| {
        message["method"] == "_spindle/event"
            && message["params"]["kind"] == "job"
            && !message["params"]["data"]["endedAt"].is_null()
    });
    let deadline = std::time::Instant::now() + WAIT;
    let mut ended = ended_within || turn.messages.iter().any(job_ended);
    while !ended {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        let message = agent.recv(left).unwrap_or_else(|| {
            panic!(
                "the job's turn did not end; the prompt's turn:\n{}",
                turn.dump()
            )
        });
        if message["method"] == "session/update" {
            live.push(message["params"]["update"].clone());
        }
        ended = job_ended(&message);
    }
    let id = agent.request("_spindle/jobs", json!({"sessionId": session}));
    let (answer, _) = agent.response(&id, WAIT);
    let job = answer["result"]["items"][0]["jobId"].clone();
    assert!(job.is_string(), "{answer}");
    let id = agent.request(
        "_spindle/job/transcript",
        json!({"sessionId": session, "jobId": job}),
    );
    let (answer, _) = agent.response(&id, WAIT);
    let transcript = answer["result"]["updates"]
        .as_array()
        .unwrap_or_else(|| panic!("{answer}"))
        .clone();
    let turn = run_prompt(&mut agent, &session, "/compact", WAIT, no_requests);
    assert_eq!(turn.stop_reason(), "end_turn", "{}", turn.dump());
    live.extend(turn.updates().into_iter().cloned());
    let id = agent.request(
        "session/set_config_option",
        json!({"sessionId": session, "configId": "mode", "value": "plan"}),
    );
    let (answer, others) = agent.response(&id, WAIT);
    assert!(answer.get("result").is_some(), "{answer}");
    let outside = others
        .iter()
        .filter(|m| m["method"] == "session/update")
        .map(|m| m["params"]["update"].clone())
        .collect();
    drop(agent);
    let mut again = bench.scripted(script, capabilities);
    let replay = bench.load(&mut again, &session);
    Doors {
        live,
        transcript,
        outside,
        replay,
    }
}

fn kinds(updates: &[Value]) -> Vec<&str> {
    updates
        .iter()
        .filter_map(|u| u["sessionUpdate"].as_str())
        .collect()
}

/// A plan, a compaction and a notice go the same way through every door
/// that sends updates (a turn, a background job's transcript, the agent
/// outside a turn, a replay on `session/load`): to a client without the
/// opt-ins, a `plan`, no compaction and a notice only as a chunk of its
/// own, live; to one with them, a `plan_update`, the compaction and a
/// `notice`. No door lets through what another leaves out.
#[test]
fn every_door_fits_an_update_alike() {
    let bench = Bench::new("unstable-doors");
    let todos = json!([{"content": "Survey", "status": "in_progress", "priority": "high"}]);
    let plan = |id: &str| {
        json!({"tool_calls": [{"id": id, "name": "todo_write",
                                                  "arguments": {"todos": todos}}]})
    };
    let script = json!({"rules": [
        {"when": {"contains": "plan it"}, "replies": [
            plan("plan_1"),
            {"tool_calls": [{"id": "t1", "name": "task", "arguments": {
                "description": "Survey", "prompt": "JOB-TASK: plan too.", "background": true}}]},
            say("Planned."),
        ]},
        {"when": {"contains": "JOB-TASK"}, "replies": [plan("j1"), say("Job planned.")]},
    ], "fallback": say("The user plans a survey.")});
    let events = json!({"events": true});
    let plain = through_every_door(&bench, &script, json!({"_meta": {"spindle": events}}));
    let opted = through_every_door(
        &bench,
        &script,
        json!({"plan": {}, "session": {"compaction": {}, "notices": {}},
               "_meta": {"spindle": events}}),
    );
    for (doors, taken) in [(&plain, false), (&opted, true)] {
        let all = [
            ("live", &doors.live),
            ("transcript", &doors.transcript),
            ("outside", &doors.outside),
            ("replay", &doors.replay),
        ];
        for (door, updates) in all {
            let kinds = kinds(updates);
            let (kept, left_out) = if taken {
                ("plan_update", "plan")
            } else {
                ("plan", "plan_update")
            };
            assert!(!kinds.contains(&left_out), "{door}: {updates:#?}");
            if door != "outside" {
                assert!(kinds.contains(&kept), "{door}: {updates:#?}");
            }
            let compaction = kinds.iter().any(|k| k.starts_with("compaction_"));
            assert_eq!(
                compaction,
                taken && (door == "live" || door == "replay"),
                "{door}: {updates:#?}"
            );
            // A notice is live only, in the form this client takes.
            let notices: Vec<&Value> = updates.iter().filter(|u| is_notice(u)).collect();
            assert_eq!(!notices.is_empty(), door == "live", "{door}: {updates:#?}");
            for notice in notices {
                assert_eq!(notice["sessionUpdate"] == "notice", taken, "{notice}");
            }
        }
        // The mode change went out, and is replayed the same.
        assert_eq!(kinds(&doors.outside), vec!["current_mode_update"]);
        let replayed_mode: Vec<&Value> = doors
            .replay
            .iter()
            .filter(|u| u["sessionUpdate"] == "current_mode_update")
            .collect();
        assert_eq!(replayed_mode, vec![&doors.outside[0]]);
        // The job's plan is in its transcript as it went out live.
        let job_plan = |updates: &[Value]| -> Vec<Value> {
            updates
                .iter()
                .filter(|u| {
                    u["sessionUpdate"]
                        .as_str()
                        .is_some_and(|k| k.starts_with("plan"))
                })
                .filter(|u| u["_meta"]["spindle"]["parentToolCallId"] == "t1")
                .cloned()
                .collect()
        };
        assert_eq!(job_plan(&doors.live).len(), 1, "{:#?}", doors.live);
        assert_eq!(job_plan(&doors.transcript), job_plan(&doors.live));
    }
}

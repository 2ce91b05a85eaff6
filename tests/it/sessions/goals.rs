//! Goals (docs/extensions.md, "Goals") through the real binary: a goal that takes
//! continuations and completes, blocked with a question and answered, a
//! budget that runs out, pause during a long step, resume and pause
//! errors, steering a running goal, recovery after kill -9, the mode on
//! replay, and a continuation message that does not grow.

use super::{call, err, load, ok, text_prompt, Space, WAIT};
use crate::support::fake_openai::{chat_text, chunk_content, chunk_role, chunk_tool_call};
use crate::support::fake_openai::{chunk_finish, done};
use crate::support::{Agent, FakeServer, Reply, Step};
use serde_json::{json, Value};
use std::time::Duration;

const CONTINUATION: &str = "(Goal continuation.)";

fn goal_update(status: &str, extra: Value) -> Reply {
    let mut arguments = json!({"status": status});
    for (key, value) in extra.as_object().into_iter().flatten() {
        arguments[key] = value.clone();
    }
    Reply::Sse(vec![
        chunk_role(),
        chunk_tool_call(0, Some("g1"), Some("goal_update"), &arguments.to_string()),
        chunk_finish("tool_calls"),
        done(),
    ])
}

fn goal_mode(agent: &mut Agent, session: &str) {
    ok(
        agent,
        "session/set_mode",
        json!({"sessionId": session, "modeId": "goal"}),
    );
}

fn status_goal(agent: &mut Agent, session: &str) -> Value {
    ok(
        agent,
        "_spindle/session/status",
        json!({"sessionId": session}),
    )["goal"]
        .clone()
}

fn last_user(body: &Value) -> String {
    body["messages"]
        .as_array()
        .and_then(|m| m.iter().rev().find(|m| m["role"] == "user"))
        .and_then(|m| m["content"].as_str())
        .unwrap_or_default()
        .to_string()
}

fn prompt(agent: &mut Agent, session: &str, text: &str) -> (Value, Vec<Value>) {
    let id = agent.request("session/prompt", text_prompt(session, text));
    agent.response(&id, WAIT)
}

#[test]
fn a_goal_continues_four_times_then_completes() {
    let space = Space::new("goal-complete");
    let server = FakeServer::start();
    for n in 1..=4 {
        server.push(Reply::Sse(chat_text(&[&format!("Step {n} done.")])));
    }
    server.push(goal_update(
        "complete",
        json!({"checkpoint": "All four steps delivered.",
               "todos": [{"content": "step 4", "status": "completed"}]}),
    ));
    let mut agent = space.openai_with_events(&server);
    let session = agent.new_session(&space.ws);
    goal_mode(&mut agent, &session);
    assert_eq!(status_goal(&mut agent, &session)["status"], "drafting");
    let (answer, messages) = prompt(&mut agent, &session, "make the suite pass");
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    let goal = status_goal(&mut agent, &session);
    assert_eq!(goal["status"], "complete", "{goal}");
    assert_eq!(goal["objective"], "make the suite pass");
    assert_eq!(goal["counters"]["continuations"], 4);
    assert_eq!(goal["counters"]["modelCalls"], 5);
    assert_eq!(goal["checkpoint"], "All four steps delivered.");
    assert_eq!(goal["lastTurn"], "end_turn");
    // One prompt, one answer; the plan followed the todos.
    assert!(messages
        .iter()
        .any(|m| m["params"]["update"]["sessionUpdate"] == "plan"));
    let goal_events = messages
        .iter()
        .filter(|m| m["method"] == "_spindle/event" && m["params"]["kind"] == "goal")
        .count();
    assert!(goal_events >= 5, "a goal event per boundary: {goal_events}");
    let requests = server.requests();
    assert_eq!(requests.len(), 5);
    for request in &requests[1..] {
        assert!(last_user(&request.body).starts_with(CONTINUATION));
        let tools: Vec<&str> = request.body["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["function"]["name"].as_str().unwrap())
            .collect();
        assert!(tools.contains(&"goal_update"));
    }
    // Finished: a prompt is an ordinary turn, not a new goal.
    server.push(Reply::Sse(chat_text(&["Anything else?"])));
    let (answer, _) = prompt(&mut agent, &session, "thanks");
    assert_eq!(answer["result"]["stopReason"], "end_turn");
    assert_eq!(server.requests().len(), 6);
    assert_eq!(status_goal(&mut agent, &session)["status"], "complete");
}

#[test]
fn a_blocked_goal_asks_and_the_next_prompt_answers() {
    let space = Space::new("goal-blocked");
    let server = FakeServer::start();
    server.push(goal_update(
        "blocked",
        json!({"question": "Which database should I use?"}),
    ));
    server.push(goal_update(
        "complete",
        json!({"checkpoint": "Done with SQLite."}),
    ));
    let mut agent = space.openai(&server);
    let session = agent.new_session(&space.ws);
    goal_mode(&mut agent, &session);
    let (answer, messages) = prompt(&mut agent, &session, "store the users");
    assert_eq!(answer["result"]["stopReason"], "end_turn");
    let text: String = messages
        .iter()
        .filter(|m| m["params"]["update"]["sessionUpdate"] == "agent_message_chunk")
        .filter_map(|m| m["params"]["update"]["content"]["text"].as_str())
        .collect();
    assert!(text.contains("Which database should I use?"), "{text}");
    let goal = status_goal(&mut agent, &session);
    assert_eq!(goal["status"], "blocked");
    assert_eq!(goal["question"], "Which database should I use?");
    let (answer, _) = prompt(&mut agent, &session, "Use SQLite.");
    assert_eq!(answer["result"]["stopReason"], "end_turn");
    assert_eq!(status_goal(&mut agent, &session)["status"], "complete");
    assert_eq!(last_user(&server.requests()[1].body), "Use SQLite.");
}

#[test]
fn a_budget_runs_out_and_the_goal_resumes() {
    let space = Space::new("goal-budget");
    let server = FakeServer::start();
    for _ in 0..3 {
        server.push(Reply::Sse(chat_text(&["Still working."])));
    }
    server.push(goal_update("complete", json!({})));
    let config = space.base.join("config.json");
    std::fs::write(
        &config,
        json!({
            "providers": {"fake": {"kind": "openai", "base_url": server.base_url(), "api_key_env": "K"}},
            "models": {"fake/m": {}},
            "defaults": {"model": "fake/m"},
            "goal": {"max_continuations": 2},
        })
        .to_string(),
    )
    .unwrap();
    let db = space.db.arg();
    let mut agent = Agent::spawn(
        &[
            "acp",
            "--config",
            config.to_str().unwrap(),
            "--db",
            &db,
            "--permissions",
            "yolo",
        ],
        &[("K", "k")],
    );
    agent.initialize();
    let session = agent.new_session(&space.ws);
    goal_mode(&mut agent, &session);
    let (answer, _) = prompt(&mut agent, &session, "go on forever");
    assert_eq!(
        answer["result"]["stopReason"], "max_turn_requests",
        "{answer}"
    );
    let goal = status_goal(&mut agent, &session);
    assert_eq!(goal["status"], "budget_exhausted");
    assert_eq!(goal["counters"]["continuations"], 2);
    assert!(goal["checkpoint"]
        .as_str()
        .unwrap()
        .contains("continuations"));
    // Pause has nothing to pause; resume brings it back.
    let error = err(
        &mut agent,
        "_spindle/session/goal/pause",
        json!({"sessionId": session}),
    );
    assert_eq!(
        (error["code"].clone(), error["data"]["code"].clone()),
        (json!(-32011), json!("no_running_goal"))
    );
    let resumed = ok(
        &mut agent,
        "_spindle/session/goal/resume",
        json!({"sessionId": session}),
    );
    assert_eq!(resumed["goal"]["status"], "running");
    let error = err(
        &mut agent,
        "_spindle/session/goal/resume",
        json!({"sessionId": session}),
    );
    assert_eq!(
        (error["code"].clone(), error["data"]["code"].clone()),
        (json!(-32010), json!("no_resumable_goal"))
    );
}

#[test]
fn pause_takes_effect_after_the_step_in_flight() {
    let space = Space::new("goal-pause");
    let server = FakeServer::start();
    server.push(Reply::Sse(vec![
        chunk_role(),
        chunk_content("Long step"),
        Step::Sleep(Duration::from_millis(700)),
        chunk_content(" finished."),
        chunk_finish("stop"),
        done(),
    ]));
    let mut agent = space.openai(&server);
    let session = agent.new_session(&space.ws);
    // Nothing to resume or pause before a goal runs.
    let error = err(
        &mut agent,
        "_spindle/session/goal/resume",
        json!({"sessionId": session}),
    );
    assert_eq!(error["code"], -32010);
    goal_mode(&mut agent, &session);
    let id = agent.request("session/prompt", text_prompt(&session, "a long job"));
    loop {
        let message = agent.recv(WAIT).expect("the stream");
        if message["params"]["update"]["content"]["text"] == "Long step" {
            break;
        }
    }
    let paused = ok(
        &mut agent,
        "_spindle/session/goal/pause",
        json!({"sessionId": session}),
    );
    assert_eq!(paused["pausing"], true);
    let (answer, messages) = agent.response(&id, WAIT);
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    let text: String = messages
        .iter()
        .filter_map(|m| m["params"]["update"]["content"]["text"].as_str())
        .collect();
    assert!(text.contains("finished."), "the step in flight finished");
    assert_eq!(
        server.requests().len(),
        1,
        "no continuation after the pause"
    );
    assert_eq!(status_goal(&mut agent, &session)["status"], "paused");
    // A prompt while paused resumes it, with the text as guidance.
    server.push(goal_update("complete", json!({})));
    let (answer, _) = prompt(&mut agent, &session, "carry on, quickly");
    assert_eq!(answer["result"]["stopReason"], "end_turn");
    assert_eq!(status_goal(&mut agent, &session)["status"], "complete");
}

#[test]
fn a_running_goal_is_steered_and_comes_back_paused_after_kill_9() {
    let space = Space::processes("goal-recover");
    let server = FakeServer::start();
    server.push(Reply::Sse(vec![
        chunk_role(),
        chunk_content("Working"),
        Step::Sleep(Duration::from_millis(500)),
        chunk_finish("stop"),
        done(),
    ]));
    server.push(Reply::Sse(vec![
        chunk_role(),
        chunk_content("Stuck"),
        Step::Stall,
    ]));
    let mut agent = space.openai(&server);
    let session = agent.new_session(&space.ws);
    goal_mode(&mut agent, &session);
    let _prompt = agent.request("session/prompt", text_prompt(&session, "port the module"));
    loop {
        let message = agent.recv(WAIT).expect("the stream");
        if message["params"]["update"]["content"]["text"] == "Working" {
            break;
        }
    }
    let steer = ok(
        &mut agent,
        "_spindle/session/steer",
        json!({"sessionId": session, "prompt": [{"type": "text", "text": "skip the tests folder"}]}),
    );
    assert_eq!(steer["disposition"], "steer_accepted");
    loop {
        let message = agent.recv(WAIT).expect("the stream");
        if message["params"]["update"]["content"]["text"] == "Stuck" {
            break;
        }
    }
    // The steer reached the continuation's request.
    let requests = server.wait_requests(2, WAIT);
    let texts: Vec<String> = requests[1].body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "user")
        .filter_map(|m| m["content"].as_str().map(str::to_string))
        .collect();
    assert!(
        texts.iter().any(|t| t.ends_with("skip the tests folder")),
        "{texts:?}"
    );
    agent.kill();
    space.db.assert_sound();

    let mut agent = space.openai(&server);
    let id = agent.request(
        "session/load",
        json!({"sessionId": session, "cwd": space.ws(), "mcpServers": []}),
    );
    let (loaded, _) = agent.response(&id, WAIT);
    assert_eq!(
        loaded["result"]["modes"]["currentModeId"], "goal",
        "{loaded}"
    );
    let goal = status_goal(&mut agent, &session);
    assert_eq!(goal["status"], "paused", "{goal}");
    assert_eq!(goal["objective"], "port the module");
    assert_eq!(goal["counters"]["continuations"], 1);
    let _ = load;
    let _ = call;
}

#[test]
fn the_continuation_message_does_not_grow() {
    let space = Space::new("goal-size");
    let server = FakeServer::start();
    for n in 0..20 {
        server.push(Reply::Sse(chat_text(&[&format!("Part {n}.")])));
    }
    server.push(goal_update("complete", json!({})));
    let mut agent = space.openai(&server);
    let session = agent.new_session(&space.ws);
    goal_mode(&mut agent, &session);
    let (answer, _) = prompt(&mut agent, &session, "twenty parts");
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    let requests = server.requests();
    assert_eq!(requests.len(), 21);
    let sizes: Vec<usize> = requests[1..]
        .iter()
        .map(|r| last_user(&r.body).len())
        .collect();
    assert!(sizes.iter().all(|s| *s == sizes[0]), "{sizes:?}");
}

#[test]
fn delivery_says_when_a_goal_was_declared_complete_unverified() {
    let space = Space::new("goal-delivery");
    let server = FakeServer::start();
    server.push(goal_update("complete", json!({"checkpoint": "Wrote it."})));
    let base = server.base_url();
    let db = space.db.arg();
    let mut agent = Agent::spawn(
        &[
            "acp",
            "--model",
            "m",
            "--db",
            &db,
            "--permissions",
            "yolo",
            "--preset",
            "delivery",
        ],
        &[("OPENAI_BASE_URL", &base), ("OPENAI_API_KEY", "k")],
    );
    agent.initialize();
    let session = agent.new_session(&space.ws);
    goal_mode(&mut agent, &session);
    let (answer, _) = prompt(&mut agent, &session, "ship it");
    assert_eq!(answer["result"]["stopReason"], "end_turn");
    let goal = status_goal(&mut agent, &session);
    assert_eq!(goal["status"], "complete");
    assert!(
        goal["checkpoint"]
            .as_str()
            .unwrap()
            .contains("without a verification step"),
        "{goal}"
    );
    assert!(goal["budget"]["maxContinuations"].as_u64().unwrap() >= 100);
}

/// Each budget trips the same way: model calls, tokens and cost here
/// (continuations above), through the config's `goal` settings.
#[test]
fn model_call_token_and_cost_budgets_trip() {
    for (limit, why) in [
        (json!({"max_model_calls": 2}), "model calls"),
        (json!({"max_tokens": 1000}), "tokens"),
        (json!({"max_cost": 0.001}), "cost"),
    ] {
        let space = Space::new("goal-budgets");
        let server = FakeServer::start();
        for _ in 0..4 {
            // Each answer reports 600 tokens.
            server.push(Reply::Sse(vec![
                chunk_role(),
                chunk_content("More."),
                chunk_finish("stop"),
                crate::support::fake_openai::chunk_usage(500, 100),
                done(),
            ]));
        }
        let config = space.base.join("config.json");
        std::fs::write(
            &config,
            json!({
                "providers": {"fake": {"kind": "openai", "base_url": server.base_url(), "api_key_env": "K"}},
                "models": {"fake/m": {"price": {"input": 1.0, "output": 1.0}}},
                "defaults": {"model": "fake/m"},
                "goal": limit,
            })
            .to_string(),
        )
        .unwrap();
        let db = space.db.arg();
        let mut agent = Agent::spawn(
            &[
                "acp",
                "--config",
                config.to_str().unwrap(),
                "--db",
                &db,
                "--permissions",
                "yolo",
            ],
            &[("K", "k")],
        );
        agent.initialize();
        let session = agent.new_session(&space.ws);
        goal_mode(&mut agent, &session);
        let (answer, _) = prompt(&mut agent, &session, "spend");
        assert_eq!(
            answer["result"]["stopReason"], "max_turn_requests",
            "{why}: {answer}"
        );
        let goal = status_goal(&mut agent, &session);
        assert_eq!(goal["status"], "budget_exhausted", "{why}");
        assert!(
            goal["checkpoint"].as_str().unwrap().contains(why),
            "{why}: {goal}"
        );
        assert!(server.requests().len() <= 2, "{why}: stopped early");
    }
}

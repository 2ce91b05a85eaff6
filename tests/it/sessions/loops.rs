//! A stuck model through the real binary: the same `read_file` call told
//! at the third and stopped at the fifth (the turn ends `end_turn` with a
//! notice, its work kept and replayed); an answer streaming the same
//! paragraph cut on the spot, the model told, and the turn ended when
//! it does so again; polling a running job is no loop; the
//! `loops` setting moves both limits and turns them off; a goal repeating
//! one call across its continuations is stopped as well.

use super::{kind, load, text_prompt, Space, WAIT};
use crate::support::agent::{notices_text, updates_text};
use crate::support::fake_openai::{chat_text, chunk_content, chunk_role, chunk_tool_call};
use crate::support::fake_openai::{chunk_finish, done};
use crate::support::{Agent, FakeServer, Reply, Step};
use serde_json::{json, Value};

/// `spindle acp` on the fake server, with `loops` in its config file
/// (`Null`: none).
fn agent_with(space: &Space, server: &FakeServer, loops: Value) -> Agent {
    let mut config = json!({
        "providers": {"fake": {"kind": "openai", "base_url": server.base_url(),
                               "requires_key": false}},
        "defaults": {"model": "fake/test-model"},
    });
    if !loops.is_null() {
        config["loops"] = loops;
    }
    let path = space.base.join("config.json");
    std::fs::write(&path, config.to_string()).unwrap();
    let db = space.db.arg();
    let tmp = space.tmpdir();
    let mut agent = Agent::spawn(
        &[
            "acp",
            "--db",
            &db,
            "--permissions",
            "yolo",
            "--config",
            path.to_str().unwrap(),
        ],
        &[("TMPDIR", &tmp)],
    );
    agent.initialize();
    agent
}

fn tool_call(id: &str, name: &str, args: &Value) -> Reply {
    Reply::Sse(vec![
        chunk_role(),
        chunk_tool_call(0, Some(id), Some(name), &args.to_string()),
        chunk_finish("tool_calls"),
        done(),
    ])
}

/// The prompt's answer and everything sent before it.
fn prompt(agent: &mut Agent, session: &str, text: &str) -> (Value, Vec<Value>) {
    let id = agent.request("session/prompt", text_prompt(session, text));
    agent.response(&id, WAIT)
}

/// The result the model was given for tool call `id`, if it was.
fn tool_result(server: &FakeServer, id: &str) -> Option<String> {
    server
        .requests()
        .iter()
        .flat_map(|r| r.body["messages"].as_array().cloned().unwrap_or_default())
        .find(|m| m["role"] == "tool" && m["tool_call_id"] == id)
        .map(|m| m["content"].as_str().unwrap_or_default().to_string())
}

const TOLD: &str = "with the same arguments";

/// The model reads the same file `calls` times (call ids `r1`, `r2`, …),
/// then would say "Done.": the answer, the updates, and the session.
fn read_again_and_again(
    space: &Space,
    server: &FakeServer,
    loops: Value,
    calls: usize,
) -> (Agent, String, Value, Vec<Value>) {
    std::fs::write(space.ws.join("notes.txt"), "the same every time\n").unwrap();
    for n in 1..=calls {
        // Keys in another order each time: the same call all the same.
        let args = match n % 2 {
            0 => json!({"path": "notes.txt"}),
            _ => serde_json::from_str(r#"{ "path" : "notes.txt" }"#).unwrap(),
        };
        server.push(tool_call(&format!("r{n}"), "read_file", &args));
    }
    server.push(Reply::Sse(chat_text(&["Done."])));
    let mut agent = agent_with(space, server, loops);
    let session = agent.new_session(&space.ws);
    let (answer, updates) = prompt(&mut agent, &session, "read notes.txt");
    (agent, session, answer, updates)
}

#[test]
fn the_same_read_is_told_at_the_third_and_stopped_at_the_fifth() {
    let space = Space::new("loops-same-call");
    let server = FakeServer::start();
    let (agent, session, answer, updates) = read_again_and_again(&space, &server, Value::Null, 6);
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    // Told with the third result and the fourth, not before.
    for id in ["r1", "r2"] {
        let result = tool_result(&server, id).expect("a result");
        assert!(result.contains("the same every time"), "{result}");
        assert!(!result.contains(TOLD), "{id}: {result}");
    }
    for (id, times) in [("r3", 3), ("r4", 4)] {
        let result = tool_result(&server, id).expect("a result");
        assert!(
            result.contains(&format!(
                "You have called read_file {TOLD} {times} times in a row; the result will not change."
            )),
            "{id}: {result}"
        );
    }
    // The fifth never ran, and nobody asked the model again: the sixth
    // call and the last answer are still waiting.
    assert_eq!(server.requests().len(), 5);
    assert_eq!(server.pending_replies(), 2);
    let notices = notices_text(&updates);
    assert!(
        notices.contains("repeats itself") && notices.contains("read_file"),
        "{notices}"
    );
    let said = updates_text(&updates, "agent_message_chunk");
    assert!(said.contains("5 times in a row"), "{said}");
    // Everything up to there is kept: a load replays four reads and why
    // the turn stopped.
    drop(agent);
    let mut reader = space.reader();
    let replay = load(&mut reader, &session, space.ws());
    let reads: Vec<&Value> = replay
        .iter()
        .filter(|u| kind(u) == "tool_call_update" && u["status"] == "completed")
        .collect();
    assert_eq!(reads.len(), 4, "{replay:#?}");
    let replayed: String = replay
        .iter()
        .filter(|u| kind(u) == "agent_message_chunk")
        .map(|u| u["content"]["text"].as_str().unwrap_or_default())
        .collect();
    assert!(replayed.contains("5 times in a row"), "{replayed}");
}

#[test]
fn the_loops_setting_moves_the_limits_and_zero_turns_them_off() {
    let space = Space::new("loops-configured");
    let server = FakeServer::start();
    let loops = json!({"same_call_warn": 2, "same_call_stop": 3});
    let (_agent, _session, answer, _) = read_again_and_again(&space, &server, loops, 4);
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    assert!(!tool_result(&server, "r1").unwrap().contains(TOLD));
    assert!(tool_result(&server, "r2").unwrap().contains(TOLD));
    assert_eq!(tool_result(&server, "r3"), None, "the third must not run");
    assert_eq!(server.requests().len(), 3);

    let space = Space::new("loops-off");
    let server = FakeServer::start();
    let loops = json!({"same_call_warn": 0, "same_call_stop": 0, "same_text_stop": 0});
    let (mut agent, session, answer, updates) = read_again_and_again(&space, &server, loops, 7);
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    assert_eq!(server.requests().len(), 8);
    assert!(!tool_result(&server, "r7").unwrap().contains(TOLD));
    assert!(!notices_text(&updates).contains("repeats itself"));
    // Nor is a repeated paragraph cut.
    let line = "I should check the configuration file once more to be sure.\n";
    let lines = vec![line; 15];
    server.push(Reply::Sse(chat_text(&lines)));
    let (answer, updates) = prompt(&mut agent, &session, "go on");
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    assert_eq!(
        updates_text(&updates, "agent_message_chunk")
            .matches(line)
            .count(),
        15
    );
}

#[test]
fn an_answer_streaming_the_same_paragraph_is_cut_told_then_the_turn_ends() {
    let space = Space::new("loops-same-text");
    let server = FakeServer::start();
    let paragraph = "Let me look at the file again.\nIt says the same thing as before.\n\n";
    // Twice: an answer that repeats itself, the model told, and again.
    for opening in ["Reading it.\n\n", "Again.\n\n"] {
        let mut steps = vec![chunk_role(), chunk_content(opening)];
        for _ in 0..12 {
            steps.push(chunk_content(paragraph));
        }
        // Past the repeats the server would hold the answer open: only a
        // cut ends it.
        steps.push(chunk_content("NEVER SHOWN"));
        steps.push(Step::Stall);
        server.push(Reply::Sse(steps));
    }
    let mut agent = agent_with(&space, &server, Value::Null);
    let session = agent.new_session(&space.ws);
    let (answer, updates) = prompt(&mut agent, &session, "what does it say?");
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    assert!(server.wait_disconnect(WAIT), "the model call was not cut");
    let said = updates_text(&updates, "agent_message_chunk");
    assert!(!said.contains("NEVER SHOWN"), "{said}");
    assert_eq!(said.matches(paragraph).count(), 20, "{said}");
    assert!(said.contains("repeated the same text 10 times"), "{said}");
    let notices = notices_text(&updates);
    assert!(notices.contains("The model repeated itself"), "{notices}");
    assert!(notices.contains("repeats itself"), "{notices}");
    // The second request told the model what it repeated.
    let second = &server.requests()[1];
    assert!(
        second
            .raw
            .contains("Your last answer repeated the same text 10 times"),
        "{}",
        second.raw
    );
    // The text so far is kept, and the next prompt goes on from it.
    server.push(Reply::Sse(chat_text(&["Sorry."])));
    let (answer, _) = prompt(&mut agent, &session, "stop that");
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    let last = server.requests().pop().unwrap();
    let messages = last.body["messages"].as_array().unwrap().clone();
    let assistant = messages
        .iter()
        .rev()
        .find(|m| m["role"] == "assistant")
        .expect("the cut answer is in the conversation");
    let text = assistant["content"].as_str().unwrap_or_default();
    assert!(text.starts_with("Again."), "{text}");
    assert_eq!(text.matches(paragraph).count(), 10, "{text}");
}

#[test]
#[cfg_attr(windows, ignore = "sh command lines")]
fn polling_a_running_job_six_times_is_no_loop() {
    let space = Space::new("loops-polling");
    let server = FakeServer::start();
    server.push(tool_call(
        "j1",
        "run_command",
        &json!({"command": "sleep 60", "background": true}),
    ));
    let mut agent = agent_with(&space, &server, Value::Null);
    let session = agent.new_session(&space.ws);
    // The job's id is what the model was told when it started.
    server.push(Reply::Sse(chat_text(&["Started."])));
    let (answer, _) = prompt(&mut agent, &session, "start it");
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    let started = tool_result(&server, "j1").expect("the start's result");
    let job = super::ok(&mut agent, "_spindle/jobs", json!({"sessionId": session}))["items"][0]
        ["jobId"]
        .as_str()
        .unwrap_or_else(|| panic!("no job: {started}"))
        .to_string();
    for n in 1..=6 {
        server.push(tool_call(
            &format!("p{n}"),
            "job_output",
            &json!({"jobId": job}),
        ));
    }
    server.push(Reply::Sse(chat_text(&["Still running."])));
    let (answer, updates) = prompt(&mut agent, &session, "wait for it");
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    for n in 1..=6 {
        let result = tool_result(&server, &format!("p{n}")).expect("every poll ran");
        assert!(result.contains("running"), "{result}");
        assert!(!result.contains(TOLD), "{result}");
    }
    assert!(updates_text(&updates, "agent_message_chunk").contains("Still running."));
    assert!(!notices_text(&updates).contains("repeats itself"));
}

#[test]
fn a_goal_repeating_one_call_across_continuations_is_stopped() {
    let space = Space::new("loops-goal");
    let server = FakeServer::start();
    std::fs::write(space.ws.join("notes.txt"), "unchanged\n").unwrap();
    // Each continuation the same read, then a step's end: the goal would
    // go on for ever.
    for n in 1..=6 {
        server.push(tool_call(
            &format!("r{n}"),
            "read_file",
            &json!({"path": "notes.txt"}),
        ));
        server.push(Reply::Sse(chat_text(&[&format!("Step {n}: no change.")])));
    }
    let mut agent = space.openai(&server);
    let session = agent.new_session(&space.ws);
    super::ok(
        &mut agent,
        "session/set_mode",
        json!({"sessionId": session, "modeId": "goal"}),
    );
    let (answer, updates) = prompt(&mut agent, &session, "make notes.txt change");
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    assert!(tool_result(&server, "r3").unwrap().contains(TOLD));
    assert_eq!(tool_result(&server, "r5"), None, "the fifth must not run");
    // Four reads and four step ends asked for, then the fifth read.
    assert_eq!(server.requests().len(), 9);
    let said = updates_text(&updates, "agent_message_chunk");
    assert!(said.contains("5 times in a row"), "{said}");
}

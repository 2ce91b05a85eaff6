//! The `task` tool: a subagent reads and edits with its own conversation;
//! its updates reach the editor marked with the parent's tool call, under
//! ids of their own; its permission request carries the mark too; the
//! parent's call shows its progress and ends with its answer; a cancel
//! stops parent and child; a load replays the subagent's updates as they
//! were shown live.

use super::{call, calls, permissions, say, script, Space, WAIT};
use crate::support::{run_prompt, Answer, Exchange};
use serde_json::{json, Value};

/// The parent a subagent's update names; it names it under both keys
/// (Spindle's, and the one clients fold another agent's subagents under)
/// or under neither.
fn meta_parent(update: &Value) -> Option<&str> {
    let parent = update["_meta"]["spindle"]["parentToolCallId"].as_str();
    assert_eq!(
        parent,
        update["_meta"]["claudeCode"]["parentToolUseId"].as_str(),
        "{update}"
    );
    parent
}

/// A model that hands a subagent a task (read a.txt, write b.txt), the
/// subagent's two calls and answer, then the parent's answer.
pub(super) fn copy_greeting() -> Value {
    script(vec![
        calls(vec![call(
            "t1",
            "task",
            json!({"description": "Copy a greeting", "prompt": "Read a.txt, then write its words to b.txt."}),
        )]),
        calls(vec![call("c1", "read_file", json!({"path": "a.txt"}))]),
        calls(vec![call(
            "c2",
            "write_file",
            json!({"path": "b.txt", "content": "hello from the subagent\n"}),
        )]),
        say("a.txt says hello; I wrote b.txt."),
        say("The subagent copied it."),
    ])
}

#[test]
fn a_subagent_reads_and_edits_and_its_updates_carry_the_parent() {
    let space = Space::new("subagent");
    space.write("a.txt", "hello from a\n");
    let db = space.base.join("db").join("spindle.db");
    let db_arg = db.to_str().unwrap().to_string();
    let (mut agent, session) = space.start(
        &copy_greeting(),
        &["--permissions", "ask", "--db", &db_arg],
        json!({}),
    );
    let turn = run_prompt(
        &mut agent,
        &session,
        "copy it",
        WAIT,
        permissions(vec![("t1/c2", Answer::select("allow_once"))]),
    );
    assert_eq!(turn.stop_reason(), "end_turn", "{}", turn.dump());
    // The parent's call: a `think` call, its progress, the child's answer.
    assert_eq!(turn.tool_call("t1")["kind"], "think");
    assert_eq!(turn.final_status("t1"), "completed", "{}", turn.dump());
    assert!(
        turn.final_text("t1").contains("I wrote b.txt"),
        "{}",
        turn.dump()
    );
    let progress = turn.updates().into_iter().any(|u| {
        u["toolCallId"] == "t1"
            && u["content"][0]["content"]["text"]
                .as_str()
                .is_some_and(|t| t.contains("Read a.txt") && t.contains("Write b.txt"))
    });
    assert!(progress, "{}", turn.dump());
    // The child's calls: under ids of their own, marked with the parent.
    for id in ["t1/c1", "t1/c2"] {
        assert_eq!(turn.final_status(id), "completed", "{id}: {}", turn.dump());
        let announced = turn.tool_call(id);
        assert_eq!(meta_parent(announced), Some("t1"), "{announced}");
    }
    assert_eq!(space.read("b.txt"), "hello from the subagent\n");
    let asked = turn.requests("session/request_permission");
    assert_eq!(asked.len(), 1);
    let tool_call = &asked[0]["params"]["toolCall"];
    assert_eq!(tool_call["toolCallId"], "t1/c2");
    assert_eq!(meta_parent(tool_call), Some("t1"));
    // The child's words are marked; the parent's are not.
    let chunks: Vec<&Value> = turn
        .updates()
        .into_iter()
        .filter(|u| u["sessionUpdate"] == "agent_message_chunk")
        .collect();
    assert!(chunks.iter().any(|u| meta_parent(u) == Some("t1")));
    assert!(chunks.iter().any(|u| meta_parent(u).is_none()
        && u["content"]["text"]
            .as_str()
            .is_some_and(|t| t.contains("copied"))));
    // A client that does not take subagents gets no child session.
    assert!(turn
        .messages
        .iter()
        .filter(|m| m["method"] == "session/update")
        .all(|m| m["params"]["sessionId"] == session.as_str()
            && m["params"]["update"]["sessionUpdate"] != "subagent_update"
            && !m.to_string().contains("subagentSession")));
    assert_eq!(
        turn.requests("session/request_permission")[0]["params"]["sessionId"],
        session.as_str()
    );
    let live: Vec<Value> = turn
        .updates()
        .into_iter()
        .filter(|u| u["sessionUpdate"] != "usage_update")
        .cloned()
        .collect();
    drop(agent);

    // Another process loads the session: the same updates, marks included.
    let mut agent = space.spawn(&script(vec![]), &["--permissions", "yolo", "--db", &db_arg]);
    super::initialize(&mut agent, json!({}));
    let id = agent.request(
        "session/load",
        json!({"sessionId": session, "cwd": space.ws, "mcpServers": []}),
    );
    let (loaded, others) = agent.response(&id, WAIT);
    assert!(loaded.get("result").is_some(), "{loaded}");
    let replayed: Vec<Value> = others
        .iter()
        .filter(|m| m["method"] == "session/update")
        .map(|m| m["params"]["update"].clone())
        .filter(|u| {
            u["sessionUpdate"] != "user_message_chunk"
                && u["sessionUpdate"] != "available_commands_update"
        })
        .collect();
    let marked = |updates: &[Value]| -> Vec<Value> {
        updates
            .iter()
            .filter(|u| meta_parent(u).is_some() && u["sessionUpdate"] != "agent_message_chunk")
            .cloned()
            .collect()
    };
    assert!(others.iter().all(|m| m["method"] != "session/update"
        || (m["params"]["sessionId"] == session.as_str()
            && m["params"]["update"]["sessionUpdate"] != "subagent_update"
            && !m.to_string().contains("subagentSession"))));
    assert_eq!(
        marked(&replayed),
        marked(&live),
        "the subagent's calls replay as they were shown"
    );
    assert!(replayed
        .iter()
        .any(|u| u["sessionUpdate"] == "agent_message_chunk" && meta_parent(u) == Some("t1")));
}

#[test]
#[cfg_attr(windows, ignore = "sh command lines")]
fn a_subagent_cannot_nest_or_ask_and_a_cancel_stops_both() {
    let space = Space::new("subagent-cancel");
    let (mut agent, session) = space.start(
        &script(vec![
            calls(vec![call(
                "t1",
                "task",
                json!({"description": "Loop", "prompt": "Run things."}),
            )]),
            calls(vec![
                call(
                    "n1",
                    "task",
                    json!({"description": "deeper", "prompt": "x"}),
                ),
                call("n2", "ask_user", json!({"question": "?"})),
                call(
                    "n3",
                    "run_command",
                    json!({"command": "echo started > started.txt; sleep 30"}),
                ),
            ]),
            say("unused"),
        ]),
        &["--permissions", "yolo"],
        json!({}),
    );
    let mut exchange = Exchange::prompt(&mut agent, &session, "go");
    let mut answer = |_: &Value| Answer::Ignore;
    let started = exchange.until(&mut agent, WAIT, &mut answer, &mut |_: &Exchange| {
        space.exists("started.txt")
    });
    assert!(started);
    agent.notify("session/cancel", json!({"sessionId": session}));
    let turn = exchange.finish(&mut agent, WAIT, &mut answer);
    assert_eq!(turn.stop_reason(), "cancelled", "{}", turn.dump());
    assert_eq!(turn.final_status("t1"), "failed");
    for id in ["t1/n1", "t1/n2"] {
        assert_eq!(turn.final_status(id), "failed", "{id}: {}", turn.dump());
        assert!(
            turn.final_text(id).contains("subagent cannot"),
            "{}",
            turn.dump()
        );
    }
    assert_eq!(turn.final_status("t1/n3"), "failed", "{}", turn.dump());
}

#[test]
fn an_unknown_subagent_or_an_empty_task_fails() {
    let space = Space::new("subagent-bad");
    let (mut agent, session) = space.start(
        &script(vec![
            calls(vec![
                call(
                    "t1",
                    "task",
                    json!({"description": "x", "prompt": "y", "agent": "ghost"}),
                ),
                call("t2", "task", json!({"description": "x", "prompt": " "})),
            ]),
            say("ok"),
        ]),
        &["--permissions", "yolo"],
        json!({}),
    );
    let turn = run_prompt(
        &mut agent,
        &session,
        "go",
        WAIT,
        crate::support::client::no_requests,
    );
    assert_eq!(turn.final_status("t1"), "failed");
    assert!(
        turn.final_text("t1").contains("no subagent \"ghost\""),
        "{}",
        turn.dump()
    );
    assert_eq!(turn.final_status("t2"), "failed");
}

#[test]
fn in_plan_mode_the_subagent_only_reads() {
    let space = Space::new("subagent-plan");
    let (mut agent, session) = space.start(
        &script(vec![
            calls(vec![call(
                "t1",
                "task",
                json!({"description": "Look around", "prompt": "Survey, and write notes.txt."}),
            )]),
            calls(vec![
                call("c1", "list_directory", json!({})),
                call(
                    "c2",
                    "write_file",
                    json!({"path": "notes.txt", "content": "x"}),
                ),
            ]),
            say("Surveyed; writing is not allowed here."),
            say("Planned."),
        ]),
        &["--permissions", "yolo"],
        json!({}),
    );
    let id = agent.request(
        "session/set_mode",
        json!({"sessionId": session, "modeId": "plan"}),
    );
    agent.response(&id, WAIT);
    let turn = run_prompt(
        &mut agent,
        &session,
        "plan",
        WAIT,
        crate::support::client::no_requests,
    );
    assert_eq!(turn.final_status("t1/c1"), "completed", "{}", turn.dump());
    assert_eq!(turn.final_status("t1/c2"), "failed", "{}", turn.dump());
    assert!(!space.exists("notes.txt"));
    assert_eq!(turn.final_status("t1"), "completed");
}

/// Receives messages until a turn with source `job` is idle again.
fn until_job_turn_ends(agent: &mut crate::support::Agent) -> Vec<Value> {
    let deadline = std::time::Instant::now() + WAIT;
    let mut seen = Vec::new();
    loop {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        let message = agent.recv(left).expect("the job's turn");
        let done = message["method"] == "_spindle/event"
            && message["params"]["kind"] == "turn"
            && message["params"]["data"]["state"] == "idle"
            && message["params"]["data"]["source"] == "job";
        seen.push(message);
        if done {
            return seen;
        }
    }
}

fn rule(contains: &str, replies: Vec<Value>) -> Value {
    json!({"when": {"contains": contains}, "replies": replies})
}

#[test]
fn a_background_task_is_an_agent_job_with_a_structured_transcript() {
    let space = Space::new("subagent-job");
    let script = json!({"rules": [
        rule("start the survey", vec![
            calls(vec![call("t1", "task", json!({
                "description": "Survey", "prompt": "SURVEY-TASK: count the files.", "background": true}))]),
            say("It runs in the background."),
        ]),
        rule("SURVEY-TASK", vec![
            calls(vec![call("c1", "run_command", json!({"command": "sleep 0.3; echo surveyed"}))]),
            say("Survey: 3 files."),
        ]),
        rule("background job", vec![say("The survey found 3 files.")]),
    ]});
    let mut agent = space.spawn(&script, &["--permissions", "yolo"]);
    super::initialize(&mut agent, json!({"_meta": {"spindle": {"events": true}}}));
    let session = agent.new_session(&space.ws);
    let turn = run_prompt(
        &mut agent,
        &session,
        "start the survey",
        WAIT,
        crate::support::client::no_requests,
    );
    assert_eq!(turn.stop_reason(), "end_turn", "{}", turn.dump());
    assert!(
        turn.final_text("t1").contains("Started job job_"),
        "{}",
        turn.dump()
    );
    let seen = until_job_turn_ends(&mut agent);
    // Its updates went out live, marked with the parent's call.
    assert!(seen
        .iter()
        .any(|m| m["params"]["update"]["toolCallId"] == "t1/c1"
            && meta_parent(&m["params"]["update"]) == Some("t1")));
    let said: String = seen
        .iter()
        .filter(|m| meta_parent(&m["params"]["update"]).is_none())
        .filter_map(|m| m["params"]["update"]["content"]["text"].as_str())
        .collect();
    assert!(said.contains("found 3 files"), "the job turn: {seen:?}");
    let id = agent.request("_spindle/jobs", json!({"sessionId": session}));
    let (answer, _) = agent.response(&id, WAIT);
    let item = answer["result"]["items"][0].clone();
    assert_eq!(item["kind"], "agent", "{item}");
    assert_eq!(item["state"], "exited", "{item}");
    assert_eq!(item["exitCode"], 0);
    let job = item["jobId"].clone();
    let id = agent.request(
        "_spindle/job/transcript",
        json!({"sessionId": session, "jobId": job}),
    );
    let (answer, _) = agent.response(&id, WAIT);
    let page = &answer["result"];
    let updates = page["updates"]
        .as_array()
        .unwrap_or_else(|| panic!("{answer}"));
    assert_eq!(page["complete"], true, "{page}");
    assert_eq!(page["total"], json!(updates.len()));
    assert!(updates
        .iter()
        .any(|u| u["toolCallId"] == "t1/c1" && u["sessionUpdate"] == "tool_call"));
    // The tool's name is stable ACP: the transcript carries it, as a
    // live update does, for a client that never asked for it.
    let command = updates
        .iter()
        .find(|u| u["toolCallId"] == "t1/c1" && u["sessionUpdate"] == "tool_call");
    assert_eq!(
        command.map(|u| &u["name"]),
        Some(&json!("run_command")),
        "{page}"
    );
    let last = updates.last().unwrap();
    assert_eq!(last["toolCallId"], "t1");
    assert_eq!(last["content"][0]["content"]["text"], "Survey: 3 files.");
    // A window of two, then the rest; text output does not apply.
    let id = agent.request(
        "_spindle/job/transcript",
        json!({"sessionId": session, "jobId": job, "offset": 1, "limit": 2}),
    );
    let (answer, _) = agent.response(&id, WAIT);
    assert_eq!(answer["result"]["updates"].as_array().unwrap().len(), 2);
    assert_eq!(answer["result"]["nextOffset"], 3);
    let id = agent.request(
        "_spindle/job/transcript",
        json!({"sessionId": session, "jobId": job, "output": "text"}),
    );
    let (answer, _) = agent.response(&id, WAIT);
    assert_eq!(answer["error"]["code"], -32602, "{answer}");
}

#[test]
#[cfg_attr(windows, ignore = "sh command lines")]
fn an_agent_job_takes_a_message_and_stops_when_cancelled() {
    let space = Space::new("subagent-job-send");
    let script = json!({"rules": [
        rule("start it", vec![
            calls(vec![call("t1", "task", json!({
                "description": "Wait", "prompt": "WAIT-TASK", "background": true}))]),
            say("Started."),
        ]),
        rule("WAIT-TASK", vec![
            calls(vec![call("c1", "run_command", json!({"command": "sleep 1"}))]),
            calls(vec![call("c2", "run_command", json!({"command": "echo $$ > sub.pid; sleep 30"}))]),
        ]),
    ], "fallback": calls(vec![call("c9", "run_command", json!({"command": "echo $$ > sub.pid; sleep 30"}))])});
    // A process of its own: in process, this test failed now and then.
    let mut agent = space.spawn_with_env(&script, &["--permissions", "yolo"], &[]);
    super::initialize(&mut agent, json!({}));
    let session = agent.new_session(&space.ws);
    run_prompt(
        &mut agent,
        &session,
        "start it",
        WAIT,
        crate::support::client::no_requests,
    );
    let id = agent.request("_spindle/jobs", json!({"sessionId": session}));
    let (answer, _) = agent.response(&id, WAIT);
    let job = answer["result"]["items"][0]["jobId"].clone();
    let id = agent.request(
        "_spindle/job/send",
        json!({"sessionId": session, "jobId": job, "text": "also count the tests"}),
    );
    let (answer, mut seen) = agent.response(&id, WAIT);
    assert!(answer.get("result").is_some(), "{answer}");
    // The message reaches the subagent at its next step, shown as the
    // user's words under the parent's call; the step then writes sub.pid.
    // Both are waited for: the file may appear before the update is read.
    let shown = |seen: &[Value]| {
        seen.iter().any(|m| {
            m["params"]["update"]["sessionUpdate"] == "user_message_chunk"
                && m["params"]["update"]["content"]["text"] == "also count the tests"
                && meta_parent(&m["params"]["update"]) == Some("t1")
        })
    };
    let deadline = std::time::Instant::now() + WAIT;
    while !(space.exists("sub.pid") && shown(&seen)) {
        assert!(
            std::time::Instant::now() < deadline,
            "the subagent did not go on with the message: {seen:?}"
        );
        if let Some(message) = agent.recv(std::time::Duration::from_millis(50)) {
            seen.push(message);
        }
    }
    let id = agent.request(
        "_spindle/job/cancel",
        json!({"sessionId": session, "jobId": job}),
    );
    agent.response(&id, WAIT);
    let deadline = std::time::Instant::now() + WAIT;
    loop {
        let id = agent.request("_spindle/job", json!({"sessionId": session, "jobId": job}));
        let (answer, _) = agent.response(&id, WAIT);
        if answer["result"]["state"] == "killed" {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "{answer}");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let pid: u32 = std::fs::read_to_string(space.path("sub.pid"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!(
        super::waits_until(WAIT, || !std::path::Path::new(&format!("/proc/{pid}"))
            .exists()
            || std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .is_ok_and(|s| s.contains(") Z "))),
        "the subagent's command died with the job"
    );
}

#[test]
fn a_background_subagents_permission_request_outlives_the_turn_that_started_it() {
    let space = Space::new("subagent-job-ask");
    let script = json!({"rules": [
        rule("start it", vec![
            calls(vec![call("t1", "task", json!({
                "description": "Write", "prompt": "WRITE-TASK", "background": true}))]),
            // Slow, so the subagent asks while this turn still streams.
            json!({"text": "Started it in the background, now.", "chunk_delay_ms": 150}),
        ]),
        rule("WRITE-TASK", vec![
            calls(vec![call("c1", "write_file", json!({"path": "late.txt", "content": "written later\n"}))]),
            say("Wrote it."),
        ]),
        rule("background job", vec![say("ok")]),
    ]});
    let mut agent = space.spawn(&script, &["--permissions", "ask"]);
    super::initialize(&mut agent, json!({}));
    let session = agent.new_session(&space.ws);
    // The subagent asks while the parent's turn is still on; nobody answers
    // until that turn is over.
    let mut exchange = Exchange::prompt(&mut agent, &session, "start it");
    let mut later = |_: &Value| Answer::Ignore;
    let asked = exchange.until(&mut agent, WAIT, &mut later, &mut |e: &Exchange| {
        !e.requests("session/request_permission").is_empty()
    });
    let mut pending: Vec<Value> = Vec::new();
    let turn = if asked {
        pending.extend(
            exchange
                .requests("session/request_permission")
                .into_iter()
                .cloned(),
        );
        exchange.finish(&mut agent, WAIT, &mut later)
    } else {
        let turn = exchange.finish(&mut agent, WAIT, &mut later);
        pending.extend(
            turn.requests("session/request_permission")
                .into_iter()
                .cloned(),
        );
        turn
    };
    assert_eq!(turn.stop_reason(), "end_turn", "{}", turn.dump());
    let deadline = std::time::Instant::now() + WAIT;
    while pending.is_empty() {
        assert!(
            std::time::Instant::now() < deadline,
            "the subagent never asked"
        );
        if let Some(message) = agent.recv(std::time::Duration::from_millis(50)) {
            if message["method"] == "session/request_permission" {
                pending.push(message);
            }
        }
    }
    assert_eq!(pending[0]["params"]["toolCall"]["toolCallId"], "t1/c1");
    agent.send(json!({"jsonrpc": "2.0", "id": pending[0]["id"],
        "result": {"outcome": {"outcome": "selected", "optionId": "allow_once"}}}));
    let deadline = std::time::Instant::now() + WAIT;
    // The file shows before its bytes do (written in place): wait for both.
    while !(space.exists("late.txt") && space.read("late.txt") == "written later\n") {
        assert!(
            std::time::Instant::now() < deadline,
            "the answer never reached the subagent"
        );
        let _ = agent.recv(std::time::Duration::from_millis(50));
    }
}

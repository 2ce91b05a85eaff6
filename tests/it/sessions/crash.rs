//! Crash recovery after `kill -9` in the middle of a turn (before the
//! provider answers, mid-stream, during a tool, at any moment), and leases
//! and unfinished tool calls in a hand-made database.

use super::{
    check_tool_calls, chunk_text, conversation, err, finish, ids_of, is_interrupted_note, kill_pid,
    list_all, load, prompt_ok, resume, text_prompt, texts_of, tool_reply, wait_file,
    wait_for_update, Space, INVALID_REQUEST, WAIT,
};
use crate::support::fake_openai::{chat_text, chunk_content, chunk_reasoning, chunk_role};
use crate::support::store::{assert_same_updates, assert_tool_calls_answered};
use crate::support::{write_file, FakeServer, Reply, Step};
use serde_json::{json, Value};
use std::process::Command;
use std::thread;
use std::time::Duration;

/// After a crash: the file is sound, a fresh process loads the session,
/// the cut-off turn is closed as interrupted (the note is the last update,
/// every tool call has a final status), no turn stays running, and a
/// second fresh process replays exactly the same. Returns the replay.
fn recover(space: &Space, session: &str) -> Vec<Value> {
    space.db.assert_sound();
    let mut reader = space.reader();
    let replay = load(&mut reader, session, space.ws());
    check_tool_calls(&replay);
    assert!(
        replay.last().is_some_and(is_interrupted_note),
        "the replay should end with the interrupted note: {replay:#?}"
    );
    assert_eq!(
        replay.iter().filter(|u| is_interrupted_note(u)).count(),
        1,
        "{replay:#?}"
    );
    let turns = space.db.turns(session);
    assert!(
        turns.iter().all(|t| t.state != "running"),
        "a turn stays running after the load: {turns:?}"
    );
    assert_eq!(
        turns.last().map(|t| t.state.as_str()),
        Some("interrupted"),
        "{turns:?}"
    );
    assert_tool_calls_answered(&space.db.messages(session));
    finish(reader);
    let mut again = space.reader();
    let second = load(&mut again, session, space.ws());
    assert_same_updates(&replay, &second, "first and second load after the crash");
    finish(again);
    space.db.assert_sound();
    replay
}

#[test]
fn kill_before_the_provider_answers() {
    let space = Space::processes("kill-before");
    let server = FakeServer::start();
    server.push(Reply::Sse(vec![Step::Stall]));
    let mut agent = space.openai(&server);
    let session = agent.new_session(&space.ws);
    let _prompt = agent.request("session/prompt", text_prompt(&session, "Before the answer"));
    server.wait_requests(1, WAIT);
    agent.kill();

    let replay = recover(&space, &session);
    assert_eq!(
        texts_of(&replay, "user_message_chunk"),
        ["Before the answer"]
    );
    assert_eq!(
        texts_of(&replay, "agent_message_chunk").len(),
        1,
        "{replay:#?}"
    );
    assert_eq!(
        space.db.title(&session).as_deref(),
        Some("Before the answer")
    );

    // The session goes on in a new process.
    server.push(Reply::Sse(chat_text(&["Back."])));
    let mut next = space.openai(&server);
    resume(&mut next, &session, space.ws());
    prompt_ok(&mut next, &session, "Are you there?");
    let body = server.wait_requests(2, WAIT)[1].body.clone();
    let messages = conversation(&body);
    // The unanswered prompt and the new one are one user message: strict
    // chat templates take no user message after a user message.
    assert_eq!(
        messages,
        [json!({"role": "user", "content": "Before the answer\n\nAre you there?"})],
        "{messages:#?}"
    );
    assert_tool_calls_answered(&messages);
    finish(next);
}

#[test]
fn kill_in_the_middle_of_a_stream() {
    let space = Space::processes("kill-mid");
    let server = FakeServer::start();
    server.push(Reply::Sse(vec![
        chunk_role(),
        chunk_reasoning("Thinking it over. "),
        chunk_content("Partial "),
        chunk_content("answer"),
        Step::Stall,
    ]));
    let mut agent = space.openai(&server);
    let session = agent.new_session(&space.ws);
    let _prompt = agent.request("session/prompt", text_prompt(&session, "Stream something"));
    // Chunks that come together may reach the client merged.
    wait_for_update(&mut agent, &session, |u| chunk_text(u).ends_with("answer"));
    agent.kill();

    let replay = recover(&space, &session);
    assert_eq!(
        texts_of(&replay, "user_message_chunk"),
        ["Stream something"]
    );
    // The uncommitted step may be lost; if anything of it is there, it is
    // what was streamed.
    let texts = texts_of(&replay, "agent_message_chunk");
    assert!(
        texts.len() == 1 || (texts.len() == 2 && texts[0] == "Partial answer"),
        "{replay:#?}"
    );

    server.push(Reply::Sse(chat_text(&["Fine."])));
    let mut next = space.openai(&server);
    load(&mut next, &session, space.ws());
    prompt_ok(&mut next, &session, "Again");
    let body = server.wait_requests(2, WAIT)[1].body.clone();
    let messages = conversation(&body);
    let last = messages.last().unwrap();
    assert_eq!(last["role"], "user");
    assert!(
        last["content"].as_str().unwrap().ends_with("Again"),
        "{messages:#?}"
    );
    assert_tool_calls_answered(&messages);
    finish(next);
}

#[test]
#[cfg_attr(windows, ignore = "sh command lines")]
fn kill_during_a_tool_after_a_completed_step() {
    let space = Space::processes("kill-tool");
    write_file(&space.ws, "data.txt", "some data\n");
    let server = FakeServer::start();
    server.push(tool_reply(
        "Looking.",
        &[("call_read", "read_file", json!({"path": "data.txt"}))],
    ));
    server.push(tool_reply(
        "Now the slow part.",
        &[(
            "call_sleep",
            "run_command",
            json!({"command": "echo $$ > sleeper.pid; exec sleep 30"}),
        )],
    ));
    let mut agent = space.openai(&server);
    let session = agent.new_session(&space.ws);
    let _prompt = agent.request("session/prompt", text_prompt(&session, "Read, then wait"));
    let sleeper = wait_file(&space.ws.join("sleeper.pid"));
    wait_for_update(&mut agent, &session, |u| {
        u["toolCallId"] == "call_sleep" && u["status"] == "in_progress"
    });
    agent.kill();
    kill_pid(&sleeper);

    let replay = recover(&space, &session);
    assert_eq!(texts_of(&replay, "user_message_chunk"), ["Read, then wait"]);
    let finals = check_tool_calls(&replay);
    assert_eq!(
        finals.get("call_read").map(String::as_str),
        Some("completed"),
        "the completed step is replayed with its final status: {replay:#?}"
    );
    if let Some(status) = finals.get("call_sleep") {
        assert_eq!(status, "failed", "{replay:#?}");
    }
    assert!(
        texts_of(&replay, "agent_message_chunk")[0] == "Looking.",
        "{replay:#?}"
    );

    // The session is usable, and the model gets a well-formed conversation.
    server.push(Reply::Sse(chat_text(&["Recovered."])));
    let mut next = space.openai(&server);
    let before = load(&mut next, &session, space.ws());
    assert_same_updates(&replay, &before, "replay before the next prompt");
    let updates = prompt_ok(&mut next, &session, "Continue");
    assert_eq!(texts_of(&updates, "agent_message_chunk"), ["Recovered."]);
    let body = server.wait_requests(3, WAIT)[2].body.clone();
    let messages = conversation(&body);
    assert_tool_calls_answered(&messages);
    assert_eq!(
        messages[0],
        json!({"role": "user", "content": "Read, then wait"})
    );
    assert_eq!(
        messages[1]["tool_calls"][0]["id"], "call_read",
        "{messages:#?}"
    );
    assert_eq!(messages[2]["tool_call_id"], "call_read", "{messages:#?}");
    assert_eq!(
        messages.last(),
        Some(&json!({"role": "user", "content": "Continue"}))
    );
    finish(next);

    // Later loads replay the crash the same way, then the new turn.
    let mut later = space.reader();
    let after = load(&mut later, &session, space.ws());
    assert_same_updates(
        &replay,
        &after[..replay.len().min(after.len())],
        "the interrupted turn replays the same later",
    );
    assert_eq!(
        texts_of(&after, "user_message_chunk"),
        ["Read, then wait", "Continue"]
    );
    finish(later);
    space.db.assert_sound();
}

/// Kills a many-step turn at a range of moments, each in its own session
/// of one database; after each, the database is sound and the session
/// loads consistently in fresh processes.
#[test]
fn kill_at_any_moment_leaves_a_loadable_database() {
    let space = Space::processes("kill-any");
    let mut replies: Vec<Value> = (1..=10)
        .map(|step| {
            json!({
                "text": format!("Step {step} of the long task. "),
                "chunk_delay_ms": 4,
                "tool_calls": [{"id": format!("plan_{step}"), "name": "todo_write", "arguments": {"todos": [
                    {"content": format!("Step {step}"), "status": "completed"},
                    {"content": "The rest", "status": "pending"}
                ]}}]
            })
        })
        .collect();
    replies.push(json!({"text": "All steps done."}));
    let script = json!({"rules": [{"when": {"contains": "stress"}, "replies": replies}]});
    let delays = [0u64, 15, 40, 80, 130, 200, 280, 400, 2000];
    // The sessions whose prompt was committed before the kill: those are
    // listed (a session the user never sent anything to is not).
    let mut prompted = Vec::new();
    for delay in delays {
        let mut agent = space.scripted(&script);
        let session = agent.new_session(&space.ws);
        let _prompt = agent.request("session/prompt", text_prompt(&session, "stress test"));
        // The delay is the point: the kill lands at a different moment of
        // the turn each time.
        thread::sleep(Duration::from_millis(delay));
        agent.kill();
        space.db.assert_sound();
        let was = space.db.turns(&session);

        let mut reader = space.reader();
        let replay = load(&mut reader, &session, space.ws());
        finish(reader);
        space.db.assert_sound();
        let turns = space.db.turns(&session);
        assert!(
            turns.iter().all(|t| t.state != "running"),
            "delay {delay}: {turns:?}"
        );
        if !turns.is_empty() {
            prompted.push(session.clone());
        }
        check_tool_calls(&replay);
        assert_tool_calls_answered(&space.db.messages(&session));
        match was.first().map(|t| t.state.as_str()) {
            None => assert!(replay.is_empty(), "delay {delay}: {replay:#?}"),
            Some("running") => {
                assert_eq!(
                    texts_of(&replay, "user_message_chunk"),
                    ["stress test"],
                    "delay {delay}"
                );
                assert!(
                    replay.last().is_some_and(is_interrupted_note),
                    "delay {delay}: {replay:#?}"
                );
                assert_eq!(turns[0].state, "interrupted", "delay {delay}");
            }
            Some(_) => {
                assert!(
                    !replay.iter().any(is_interrupted_note),
                    "delay {delay}: {replay:#?}"
                );
                assert_eq!(
                    texts_of(&replay, "agent_message_chunk")
                        .last()
                        .map(String::as_str),
                    Some("All steps done."),
                    "delay {delay}"
                );
            }
        }
        let mut again = space.reader();
        let second = load(&mut again, &session, space.ws());
        finish(again);
        assert_same_updates(&replay, &second, &format!("delay {delay}: two loads"));
    }
    let mut reader = space.reader();
    let (all, _) = list_all(&mut reader, None);
    let mut listed = ids_of(&all);
    listed.sort();
    prompted.sort();
    assert_eq!(listed, prompted);
    assert!(!prompted.is_empty());
    finish(reader);
}

/// The pid of a process that has exited (and been reaped).
fn dead_pid() -> i64 {
    let mut child = if cfg!(windows) {
        Command::new("cmd").args(["/d", "/c", "exit"]).spawn()
    } else {
        Command::new("true").spawn()
    }
    .expect("cannot run a program that exits at once");
    let pid = child.id();
    let _ = child.wait();
    i64::from(pid)
}

/// Leases in the database, set by hand: a live holder with an unexpired
/// lease is respected (by load and prompt), an expired one is not, and a
/// turn left running by a dead holder with a tool call that never got a
/// final status is closed on load: the call is marked failed, the note is
/// added, and the model's conversation gets an answer for the call.
///
/// The agent commits a tool call only together with its result, so a
/// crash cannot leave this state behind today; the database is written
/// here directly (in the store's message format) to cover that path.
#[test]
fn leases_and_unfinished_tool_calls_in_a_hand_made_database() {
    let space = Space::processes("leases");
    let server = FakeServer::start();
    server.push(Reply::Sse(chat_text(&["Hello."])));
    let mut agent = space.openai(&server);
    let session = agent.new_session(&space.ws);
    prompt_ok(&mut agent, &session, "Start");
    finish(agent);

    // Turn 2, cut off while `call_x` was running.
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock")
        .as_millis() as i64;
    let connection = space.db.connect();
    let user = json!({"sessionUpdate": "user_message_chunk", "content": {"type": "text", "text": "Run it"}, "messageId": "user_x"});
    let announce = json!({"sessionUpdate": "tool_call", "toolCallId": "call_x", "title": "Run make", "kind": "execute", "status": "pending", "rawInput": {"command": "make"}});
    let running = json!({"sessionUpdate": "tool_call_update", "toolCallId": "call_x", "status": "in_progress"});
    let messages = [
        json!({"role": "user", "text": "Run it"}),
        json!({"role": "assistant", "text": "", "tool_calls": [{"id": "call_x", "name": "run_command", "arguments": "{\"command\":\"make\"}"}]}),
    ];
    connection
        .execute(
            "INSERT INTO turns (session_id, turn, state, started_at) VALUES (?1, 2, 'running', '2026-01-01T00:00:00.000Z')",
            [&session],
        )
        .expect("cannot insert the turn");
    let base_events: i64 = connection
        .query_row(
            "SELECT MAX(seq) FROM events WHERE session_id = ?1",
            [&session],
            |row| row.get(0),
        )
        .expect("no events");
    for (offset, event) in [user, announce, running].iter().enumerate() {
        connection
            .execute(
                "INSERT INTO events (session_id, seq, turn, body) VALUES (?1, ?2, 2, ?3)",
                rusqlite::params![session, base_events + 1 + offset as i64, event.to_string()],
            )
            .expect("cannot insert an event");
    }
    let base_messages: i64 = connection
        .query_row(
            "SELECT MAX(seq) FROM messages WHERE session_id = ?1",
            [&session],
            |row| row.get(0),
        )
        .expect("no messages");
    for (offset, message) in messages.iter().enumerate() {
        connection
            .execute(
                "INSERT INTO messages (session_id, seq, body) VALUES (?1, ?2, ?3)",
                rusqlite::params![
                    session,
                    base_messages + 1 + offset as i64,
                    message.to_string()
                ],
            )
            .expect("cannot insert a message");
    }
    let set_lease = |pid: i64, expires: i64| {
        connection
            .execute(
                "UPDATE sessions SET lease_pid = ?2, lease_expires_ms = ?3 WHERE id = ?1",
                rusqlite::params![session, pid, expires],
            )
            .expect("cannot set the lease");
    };

    // This test's own process is alive: its unexpired lease holds.
    set_lease(i64::from(std::process::id()), now_ms + 600_000);
    let mut agent = space.openai(&server);
    let replay = load(&mut agent, &session, space.ws());
    assert!(
        !replay.iter().any(is_interrupted_note),
        "a turn leased to a live process is not interrupted: {replay:#?}"
    );
    let error = err(&mut agent, "session/prompt", text_prompt(&session, "Me?"));
    assert_eq!(error["code"], INVALID_REQUEST, "{error}");
    assert_eq!(error["data"]["code"], "session_busy", "{error}");
    assert_eq!(error["data"]["holderPid"], std::process::id(), "{error}");
    finish(agent);

    // Its holder died: the next load closes the turn.
    set_lease(dead_pid(), now_ms + 600_000);
    let replay = recover(&space, &session);
    let finals = check_tool_calls(&replay);
    assert_eq!(finals["call_x"], "failed", "{replay:#?}");
    let stored = space.db.messages(&session);
    assert_tool_calls_answered(&stored);

    // The session goes on; the model sees an answer for call_x.
    server.push(Reply::Sse(chat_text(&["Moving on."])));
    let mut agent = space.openai(&server);
    resume(&mut agent, &session, space.ws());
    prompt_ok(&mut agent, &session, "Next");
    let body = server.wait_requests(2, WAIT)[1].body.clone();
    let conversation = conversation(&body);
    assert_tool_calls_answered(&conversation);
    assert!(
        conversation.iter().any(|m| m["tool_call_id"] == "call_x"),
        "{conversation:#?}"
    );
    finish(agent);

    // An expired lease is taken over even if its holder lives.
    set_lease(1, now_ms - 1);
    server.push(Reply::Sse(chat_text(&["Expired."])));
    let mut agent = space.openai(&server);
    resume(&mut agent, &session, space.ws());
    prompt_ok(&mut agent, &session, "After expiry");
    assert_eq!(space.db.lease(&session), (None, None));
    finish(agent);
    space.db.assert_sound();
}

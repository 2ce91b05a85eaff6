//! Two or more processes on one database: a busy session is refused
//! elsewhere, a killed process's lease is taken over and its cut-off turn
//! closed in order, concurrent turns all land, and agents started at once
//! on a new database all work, round after round, and also while another
//! process holds its write lock.

use super::{
    call, check_tool_calls, chunk_text, conversation, err, finish, is_interrupted_note, kind,
    list_all, load, message, prompt_ok, slow_text, text_prompt, texts_of, wait_answers,
    wait_for_update, Space, INVALID_REQUEST, WAIT,
};
use crate::support::fake_openai::{chat_text, chunk_content, chunk_role};
use crate::support::store::{assert_tool_calls_answered, Db};
use crate::support::{Agent, FakeServer, Reply, Step};
use serde_json::{json, Value};
use std::fs;
use std::thread;
use std::time::Duration;

#[test]
fn a_session_busy_in_one_process_is_refused_in_another_until_it_ends() {
    let space = Space::processes("busy");
    let server = FakeServer::start();
    server.push(Reply::Sse(chat_text(&["First answer."])));
    server.push(slow_text("A is ", Duration::from_millis(2500), "done."));
    server.push(Reply::Sse(chat_text(&["B answers."])));
    server.push(Reply::Sse(chat_text(&["A again."])));
    let mut a = space.openai(&server);
    let session = a.new_session(&space.ws);
    // B starts once the database exists (two agents starting together on
    // a new database is `agents_started_at_once_on_a_new_database_all_work`).
    let mut b = space.openai(&server);
    prompt_ok(&mut a, &session, "Start here");

    // Both list the same and can load it.
    let (listed_a, _) = list_all(&mut a, None);
    let (listed_b, _) = list_all(&mut b, None);
    assert_eq!(listed_a, listed_b);
    assert_eq!(listed_b[0]["title"], "Start here");
    let replay = load(&mut b, &session, space.ws());
    assert_eq!(texts_of(&replay, "agent_message_chunk"), ["First answer."]);

    // A runs a slow turn; B's prompt is refused, naming A.
    let slow = a.request("session/prompt", text_prompt(&session, "Take your time"));
    wait_for_update(&mut a, &session, |u| chunk_text(u) == "A is ");
    let error = err(&mut b, "session/prompt", text_prompt(&session, "Me too"));
    assert_eq!(error["code"], INVALID_REQUEST, "{error}");
    assert_eq!(error["data"]["code"], "session_busy", "{error}");
    assert_eq!(error["data"]["holderPid"], a.pid(), "{error}");
    assert!(message(&error).contains(&a.pid().to_string()), "{error}");
    assert_eq!(space.db.lease(&session).0, Some(i64::from(a.pid())));
    let (response, _) = a.response(&slow, WAIT);
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    assert_eq!(
        space.db.lease(&session),
        (None, None),
        "the lease is released"
    );

    // Now B may prompt, and its model request includes A's turn.
    prompt_ok(&mut b, &session, "My turn");
    let body = server.wait_requests(3, WAIT)[2].body.clone();
    assert_eq!(
        conversation(&body),
        [
            json!({"role": "user", "content": "Start here"}),
            json!({"role": "assistant", "content": "First answer."}),
            json!({"role": "user", "content": "Take your time"}),
            json!({"role": "assistant", "content": "A is done."}),
            json!({"role": "user", "content": "My turn"}),
        ]
    );
    // And A's next request includes B's.
    prompt_ok(&mut a, &session, "Back to A");
    let body = server.wait_requests(4, WAIT)[3].body.clone();
    let messages = conversation(&body);
    assert_eq!(messages.len(), 7, "{messages:#?}");
    assert_eq!(
        messages[5],
        json!({"role": "assistant", "content": "B answers."})
    );
    assert_eq!(messages[6], json!({"role": "user", "content": "Back to A"}));
    finish(a);
    finish(b);
    space.db.assert_sound();
}

#[test]
fn the_lease_of_a_killed_process_is_taken_over() {
    let space = Space::processes("takeover");
    let server = FakeServer::start();
    server.push(Reply::Sse(vec![
        chunk_role(),
        chunk_content("Half"),
        Step::Stall,
    ]));
    server.push(Reply::Sse(chat_text(&["B took over."])));
    let mut a = space.openai(&server);
    let session = a.new_session(&space.ws);
    let _prompt = a.request("session/prompt", text_prompt(&session, "A starts"));
    wait_for_update(&mut a, &session, |u| chunk_text(u) == "Half");
    let a_pid = i64::from(a.pid());
    assert_eq!(space.db.lease(&session).0, Some(a_pid));
    a.kill();
    space.db.assert_sound();

    let mut b = space.openai(&server);
    let replay = load(&mut b, &session, space.ws());
    assert!(
        replay.last().is_some_and(is_interrupted_note),
        "{replay:#?}"
    );
    prompt_ok(&mut b, &session, "B continues");
    assert_eq!(space.db.lease(&session), (None, None));
    let body = server.wait_requests(2, WAIT)[1].body.clone();
    let messages = conversation(&body);
    // A's unanswered prompt and B's are one user message (strict chat
    // templates take no user message after a user message).
    assert_eq!(
        messages,
        [json!({"role": "user", "content": "A starts\n\nB continues"})]
    );
    finish(b);
    space.db.assert_sound();
}

/// B opened the session while A was alive and running a turn; A then dies
/// and B's prompt takes the lease over. A's cut-off turn must be closed as
/// interrupted at that point, before B's turn, not left running (to be
/// closed after B's turn by some later load).
#[test]
fn a_turn_cut_off_while_another_process_had_the_session_open_is_closed_in_order() {
    let space = Space::processes("takeover-open");
    let server = FakeServer::start();
    server.push(Reply::Sse(vec![
        chunk_role(),
        chunk_content("Half"),
        Step::Stall,
    ]));
    server.push(Reply::Sse(chat_text(&["B took over."])));
    let mut a = space.openai(&server);
    let session = a.new_session(&space.ws);
    let mut b = space.openai(&server);
    let _prompt = a.request("session/prompt", text_prompt(&session, "A starts"));
    wait_for_update(&mut a, &session, |u| chunk_text(u) == "Half");

    // A is alive and holds the lease: B's load does not close its turn.
    let replay = load(&mut b, &session, space.ws());
    assert!(!replay.iter().any(is_interrupted_note), "{replay:#?}");
    assert_eq!(texts_of(&replay, "user_message_chunk"), ["A starts"]);
    a.kill();

    prompt_ok(&mut b, &session, "B continues");
    let turns = space.db.turns(&session);
    assert!(
        turns.iter().all(|t| t.state != "running"),
        "A's turn stays running after B took the session over: {turns:?}"
    );
    finish(b);
    let mut c = space.reader();
    let replay = load(&mut c, &session, space.ws());
    let note = replay.iter().position(is_interrupted_note);
    let b_prompt = replay
        .iter()
        .position(|u| kind(u) == "user_message_chunk" && chunk_text(u) == "B continues");
    assert!(
        note.is_some() && b_prompt.is_some() && note < b_prompt,
        "the interrupted note must close A's turn before B's turn: {replay:#?}"
    );
    finish(c);
    space.db.assert_sound();
}

/// Two processes, two sessions each, all prompting at the same time.
#[test]
fn concurrent_turns_in_two_processes_all_land() {
    const ROUNDS: usize = 20;
    let space = Space::processes("concurrent");
    let script = json!({"rules": [{"when": {"starts_with": "round"}, "replies": [
        {"text": "Planning. ", "tool_calls": [{"name": "todo_write", "arguments": {"todos": [
            {"content": "Answer", "status": "in_progress"}
        ]}}]},
        {"text": "Round done."}
    ]}]});
    let workers: Vec<thread::JoinHandle<(u32, Vec<String>)>> = (0..2)
        .map(|_| {
            let mut agent = space.scripted(&script);
            let sessions = vec![agent.new_session(&space.ws), agent.new_session(&space.ws)];
            thread::spawn(move || {
                for round in 0..ROUNDS {
                    let ids: Vec<Value> = sessions
                        .iter()
                        .map(|s| {
                            agent.request(
                                "session/prompt",
                                text_prompt(s, &format!("round {round}")),
                            )
                        })
                        .collect();
                    let (answers, _) = wait_answers(&mut agent, &ids);
                    for answer in answers.values() {
                        assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
                    }
                }
                let pid = agent.pid();
                finish(agent);
                (pid, sessions)
            })
        })
        .collect();
    let mut sessions = Vec::new();
    for worker in workers {
        let (_, mine) = worker.join().expect("a worker failed");
        sessions.extend(mine);
    }
    space.db.assert_sound();
    let mut reader = space.reader();
    for session in &sessions {
        let turns = space.db.turns(session);
        assert_eq!(turns.len(), ROUNDS, "{session}: {turns:?}");
        assert!(
            turns
                .iter()
                .all(|t| t.state == "ended" && t.stop_reason.as_deref() == Some("end_turn")),
            "{session}: {turns:?}"
        );
        assert!(space.db.seq_is_contiguous("events", session));
        assert!(space.db.seq_is_contiguous("messages", session));
        let messages = space.db.messages(session);
        assert_eq!(messages.len(), ROUNDS * 4, "{session}");
        assert_tool_calls_answered(&messages);
        let replay = load(&mut reader, session, space.ws());
        let users = texts_of(&replay, "user_message_chunk");
        let expected: Vec<String> = (0..ROUNDS).map(|r| format!("round {r}")).collect();
        assert_eq!(users, expected, "{session}");
        let texts = texts_of(&replay, "agent_message_chunk");
        assert_eq!(
            texts.iter().filter(|t| *t == "Round done.").count(),
            ROUNDS,
            "{session}"
        );
        check_tool_calls(&replay);
    }
    finish(reader);
}

/// Several agents started at once on a database that does not exist yet,
/// nor its folder (an editor opening a few windows together), each asking
/// `initialize` and `session/new` at once: every one of them can use it,
/// round after round (the race is won differently each time). Switching a
/// new database to WAL mode used to fail now and then in one of them, and
/// that agent then refused every session request until restarted.
#[test]
fn agents_started_at_once_on_a_new_database_all_work() {
    const AGENTS: usize = 4;
    const ROUNDS: usize = 8;
    let space = Space::processes("first-open");
    for round in 0..ROUNDS {
        let db = Db::new(
            space
                .base
                .join(format!("round-{round}"))
                .join("new")
                .join("spindle.db"),
        );
        let failures = open_at_once(&space, &db, AGENTS, || {});
        assert!(
            failures.is_empty(),
            "round {round}: agents could not use the new database:\n{}",
            failures.join("\n")
        );
        assert_eq!(db.session_ids().len(), AGENTS, "round {round}");
    }
}

/// Agents starting while another process holds the write lock of a new
/// database (it is creating it, say) wait for it, and then all work. Here
/// the switch to WAL mode failed at once, every time, whatever the busy
/// timeout: SQLite does not wait for the write lock while it holds a read
/// lock. The file, made by another program with the usual mode, becomes
/// the user's alone.
#[test]
fn agents_wait_for_a_new_database_another_process_is_writing() {
    const AGENTS: usize = 3;
    let space = Space::processes("held-open");
    let db = Db::new(space.base.join("held").join("spindle.db"));
    fs::create_dir_all(db.path().parent().unwrap()).unwrap();
    let holder = db.connect();
    holder.execute_batch("BEGIN IMMEDIATE").unwrap();
    let failures = open_at_once(&space, &db, AGENTS, move || {
        // Long enough for the agents to reach the lock on most machines,
        // well within the wait they allow.
        thread::sleep(Duration::from_millis(1500));
        holder.execute_batch("COMMIT").unwrap();
    });
    assert!(
        failures.is_empty(),
        "agents could not use the new database:\n{}",
        failures.join("\n")
    );
    assert_eq!(db.session_ids().len(), AGENTS);
}

/// Starts `count` agents on `db` together, sends each `initialize` and
/// `session/new` without waiting, runs `meanwhile`, then collects the
/// answers and a later `session/list` of each. Returns what failed; the
/// agents have ended, and the database was checked when nothing did.
fn open_at_once(space: &Space, db: &Db, count: usize, meanwhile: impl FnOnce()) -> Vec<String> {
    let script = json!({"replies": []});
    let mut agents: Vec<Agent> = (0..count)
        .map(|_| space.spawn_scripted(db, &script))
        .collect();
    let hello = json!({"protocolVersion": 1, "clientCapabilities": {},
                       "clientInfo": {"name": "spindle-tests", "version": "0.0.0"}});
    let new = json!({"cwd": space.ws(), "mcpServers": []});
    let asked: Vec<[(&str, Value); 2]> = agents
        .iter_mut()
        .map(|agent| {
            let hello = agent.request("initialize", hello.clone());
            let new = agent.request("session/new", new.clone());
            [("initialize", hello), ("session/new", new)]
        })
        .collect();
    meanwhile();
    let mut failures = Vec::new();
    for (index, (agent, ids)) in agents.iter_mut().zip(&asked).enumerate() {
        for (method, id) in ids {
            let (response, _) = agent.response(id, WAIT);
            if response.get("result").is_none() {
                failures.push(format!("agent {index}, {method}: {}", response["error"]));
            }
        }
    }
    // And afterwards, once nobody else is opening it.
    for (index, agent) in agents.iter_mut().enumerate() {
        if let (Err(error), _) = call(agent, "session/list", json!({})) {
            failures.push(format!("agent {index}, a later session/list: {error}"));
        }
    }
    for agent in agents {
        finish(agent);
    }
    if failures.is_empty() {
        db.assert_sound();
        // The user's alone, whoever made it.
        if cfg!(unix) {
            assert_eq!(spindle::os::testing::mode(db.path()), 0o600);
        }
    }
    failures
}

/// Agents racing to create the same client-chosen session ids on one
/// database: each id is created once, and every other attempt is refused
/// as "already in use" (-32602), never as a store failure.
#[test]
fn racing_for_one_client_chosen_id_gives_in_use_not_a_store_error() {
    const AGENTS: usize = 4;
    const IDS: usize = 15;
    let space = Space::processes("id-race");
    let mut agents: Vec<Agent> = (0..AGENTS).map(|_| space.reader()).collect();
    let mut created = vec![0; IDS];
    let mut failures = Vec::new();
    for (round, count) in created.iter_mut().enumerate() {
        let params = json!({"cwd": space.ws(), "mcpServers": [],
                            "_meta": {"spindle": {"sessionId": format!("race-{round}")}}});
        let ids: Vec<Value> = agents
            .iter_mut()
            .map(|agent| agent.request("session/new", params.clone()))
            .collect();
        for (agent, id) in agents.iter_mut().zip(&ids) {
            let (response, _) = agent.response(id, WAIT);
            if response.get("result").is_some() {
                *count += 1;
            } else if response["error"]["code"] != -32602
                || !response["error"]["message"]
                    .as_str()
                    .unwrap_or_default()
                    .contains("already in use")
            {
                failures.push(response.to_string());
            }
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
    assert!(created.iter().all(|n| *n == 1), "{created:?}");
    for agent in agents {
        finish(agent);
    }
    space.db.assert_sound();
}

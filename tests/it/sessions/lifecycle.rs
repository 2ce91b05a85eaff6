//! A session's life through the real binary: the capabilities
//! `initialize` advertises, close and delete (also while a turn runs or
//! winds down), the title the first prompt gives, and unknown ids and
//! stored sessions that must be opened first.

use super::{
    assert_setup_result, conversation, err, finish, ids_of, is_interrupted_note, kind, list_all,
    listed, live_history, load, looks_like_rfc3339, message, ok, prompt_ok, resume, slow_text,
    text_prompt, texts_of, wait_answers, wait_for_update, without_user_chunks, Space,
    INVALID_PARAMS, INVALID_REQUEST, NOT_FOUND, WAIT,
};
use crate::support::fake_openai::{chat_text, chunk_content, chunk_role};
use crate::support::store::{assert_same_updates, merge_chunks, session_updates};
use crate::support::{in_process, Agent, FakeServer, Reply, Step};
use serde_json::{json, Value};
use std::thread;
use std::time::{Duration, Instant};

// ---------------------------------------------------------------------------
// Capabilities.

#[test]
fn initialize_advertises_load_and_the_session_capabilities() {
    let space = Space::new("caps");
    let script = space.script(&json!({"replies": []}));
    let db = space.db.path().to_path_buf();
    let mut agent = in_process::with_options(|options| {
        options.script = Some(script.into());
        options.db = Some(db);
    });
    let result = agent.initialize();
    let capabilities = &result["agentCapabilities"];
    assert_eq!(capabilities["loadSession"], true, "{result}");
    for name in ["list", "resume", "close", "delete"] {
        assert!(
            capabilities["sessionCapabilities"][name].is_object(),
            "sessionCapabilities.{name} missing: {result}"
        );
    }
    finish(agent);
}

// ---------------------------------------------------------------------------
// Close and delete.

/// Prompts containing "slow" stream ten words, 300 ms apart; everything
/// else gets a quick answer.
fn slow_script() -> Value {
    json!({
        "rules": [{"when": {"contains": "slow"}, "reply": {
            "text": "one two three four five six seven eight nine ten",
            "chunk_delay_ms": 300
        }}],
        "fallback": {"text": "Quick answer."}
    })
}

#[test]
fn close_frees_the_session_and_keeps_its_history() {
    let space = Space::new("close");
    let mut agent = space.scripted(&slow_script());

    // An idle session.
    let idle = agent.new_session(&space.ws);
    prompt_ok(&mut agent, &idle, "quick one");
    let closed = ok(&mut agent, "session/close", json!({"sessionId": idle}));
    assert_eq!(closed, json!({}));
    let error = err(&mut agent, "session/prompt", text_prompt(&idle, "again"));
    assert_eq!(error["code"], INVALID_REQUEST, "{error}");
    let text = message(&error);
    assert!(
        text.contains("session/load") || text.contains("session/resume"),
        "the error should tell to load or resume: {error}"
    );
    assert!(
        listed(&mut agent, &idle).is_some(),
        "a closed session stays listed"
    );
    let replay = load(&mut agent, &idle, space.ws());
    assert_eq!(texts_of(&replay, "user_message_chunk"), ["quick one"]);
    assert_eq!(texts_of(&replay, "agent_message_chunk"), ["Quick answer."]);
    prompt_ok(&mut agent, &idle, "after reopening");

    // A session running a turn.
    let busy = agent.new_session(&space.ws);
    let id = agent.request("session/prompt", text_prompt(&busy, "slow please"));
    let mut seen = wait_for_update(&mut agent, &busy, |u| {
        kind(u) == "agent_message_chunk" && !crate::support::agent::is_notice(u)
    });
    let close = agent.request("session/close", json!({"sessionId": busy}));
    let (answers, others) = wait_answers(&mut agent, &[id.clone(), close.clone()]);
    assert_eq!(answers[&close.to_string()]["result"], json!({}));
    assert_eq!(
        answers[&id.to_string()]["result"]["stopReason"],
        "cancelled",
        "{answers:#?}"
    );
    seen.extend(others);
    let live = live_history(&session_updates(&seen, &busy));
    let error = err(&mut agent, "session/prompt", text_prompt(&busy, "more"));
    assert_eq!(error["code"], INVALID_REQUEST, "{error}");
    let turns = space.db.turns(&busy);
    assert_eq!(turns.len(), 1, "{turns:?}");
    assert_eq!(turns[0].state, "ended", "{turns:?}");
    assert_eq!(
        turns[0].stop_reason.as_deref(),
        Some("cancelled"),
        "{turns:?}"
    );

    // Its history, in a fresh process: the prompt and what was streamed
    // before the cancel; the turn was cancelled, not interrupted.
    let mut other = space.reader();
    let replay = load(&mut other, &busy, space.ws());
    assert_eq!(texts_of(&replay, "user_message_chunk"), ["slow please"]);
    assert!(!replay.iter().any(is_interrupted_note), "{replay:#?}");
    assert_same_updates(
        &merge_chunks(&live),
        &merge_chunks(&without_user_chunks(&replay)),
        "cancelled turn vs its replay",
    );
    finish(agent);
    finish(other);
    space.db.assert_sound();
}

#[test]
fn delete_removes_sessions_for_good() {
    let space = Space::new("delete");
    let mut agent = space.scripted(&slow_script());
    let gone = agent.new_session(&space.ws);
    prompt_ok(&mut agent, &gone, "quick one");
    let keep = agent.new_session(&space.ws);
    prompt_ok(&mut agent, &keep, "quick two");

    assert_eq!(
        ok(&mut agent, "session/delete", json!({"sessionId": gone})),
        json!({})
    );
    let (all, _) = list_all(&mut agent, None);
    assert_eq!(ids_of(&all), vec![keep.clone()]);
    for method in ["session/load", "session/resume"] {
        let error = err(
            &mut agent,
            method,
            json!({"sessionId": gone, "cwd": space.ws(), "mcpServers": []}),
        );
        assert_eq!(error["code"], NOT_FOUND, "{method}: {error}");
        assert!(message(&error).contains(&gone), "{method}: {error}");
    }
    let error = err(&mut agent, "session/prompt", text_prompt(&gone, "hello?"));
    assert_eq!(error["code"], NOT_FOUND, "{error}");
    // Deleting again, or something that never existed, succeeds quietly.
    assert_eq!(
        ok(&mut agent, "session/delete", json!({"sessionId": gone})),
        json!({})
    );
    assert_eq!(
        ok(
            &mut agent,
            "session/delete",
            json!({"sessionId": "sess_never_was"})
        ),
        json!({})
    );
    for table in ["events", "messages", "turns"] {
        assert_eq!(space.db.rows_of(table, &gone), 0, "{table} left behind");
    }

    // A session in the middle of a turn.
    let busy = agent.new_session(&space.ws);
    let id = agent.request("session/prompt", text_prompt(&busy, "slow please"));
    wait_for_update(&mut agent, &busy, |u| {
        kind(u) == "agent_message_chunk" && !crate::support::agent::is_notice(u)
    });
    let delete = agent.request("session/delete", json!({"sessionId": busy}));
    let (answers, _) = wait_answers(&mut agent, &[id.clone(), delete.clone()]);
    assert_eq!(answers[&delete.to_string()]["result"], json!({}));
    assert_eq!(
        answers[&id.to_string()]["result"]["stopReason"],
        "cancelled",
        "{answers:#?}"
    );
    let error = err(
        &mut agent,
        "session/load",
        json!({"sessionId": busy, "cwd": space.ws(), "mcpServers": []}),
    );
    assert_eq!(error["code"], NOT_FOUND, "{error}");
    // The turn's end must not bring anything of it back.
    for table in ["events", "messages", "turns"] {
        assert_eq!(space.db.rows_of(table, &busy), 0, "{table} left behind");
    }

    // Another process sees the same.
    let mut other = space.reader();
    let (all, _) = list_all(&mut other, None);
    assert_eq!(ids_of(&all), vec![keep.clone()]);
    let error = err(
        &mut other,
        "session/load",
        json!({"sessionId": gone, "cwd": space.ws(), "mcpServers": []}),
    );
    assert_eq!(error["code"], NOT_FOUND, "{error}");
    let replay = load(&mut other, &keep, space.ws());
    assert_eq!(texts_of(&replay, "user_message_chunk"), ["quick two"]);
    finish(agent);
    finish(other);
    assert_eq!(space.db.session_ids(), vec![keep]);
    space.db.assert_sound();
}

/// Starts a turn that streams "Working" and then stalls, on a server whose
/// next replies are `then`; returns the agent, the session and the id of
/// the running prompt.
fn stalled_turn(space: &Space, server: &FakeServer) -> (Agent, String, Value) {
    server.push(Reply::Sse(vec![
        chunk_role(),
        chunk_content("Working"),
        Step::Stall,
    ]));
    let mut agent = space.openai(server);
    let session = agent.new_session(&space.ws);
    let first = agent.request("session/prompt", text_prompt(&session, "first"));
    // The model's first words (not the agent's start notice).
    wait_for_update(&mut agent, &session, |u| {
        kind(u) == "agent_message_chunk" && !crate::support::agent::is_notice(u)
    });
    (agent, session, first)
}

/// An editor closing a tab with a running turn and reopening it at once
/// (close, load, prompt back to back): the new turn runs while the
/// cancelled one winds down. The agent must keep answering other requests
/// meanwhile, and each prompt gets its own answer.
///
/// The requests are sent together, so the dispatcher normally handles all
/// of them before the cancelled turn reports its end; if the turn happens
/// to report first, the faulty path is not taken and the test passes.
#[test]
fn a_session_reopened_while_its_closed_turn_winds_down_takes_prompts() {
    let space = Space::new("reopen-prompt");
    let server = FakeServer::start();
    let (mut agent, session, first) = stalled_turn(&space, &server);
    server.push(slow_text("New ", Duration::from_secs(3), "answer"));

    let close = agent.request("session/close", json!({"sessionId": session}));
    let reload = agent.request(
        "session/load",
        json!({"sessionId": session, "cwd": space.ws(), "mcpServers": []}),
    );
    let second = agent.request("session/prompt", text_prompt(&session, "second"));
    let list = agent.request("session/list", json!({}));
    let started = Instant::now();
    let (answers, mut seen) = wait_answers(
        &mut agent,
        &[close.clone(), reload.clone(), first.clone(), list.clone()],
    );
    let waited = started.elapsed();
    assert_eq!(answers[&close.to_string()]["result"], json!({}));
    assert_setup_result(&answers[&reload.to_string()]["result"], "session/load");
    assert_eq!(
        answers[&first.to_string()]["result"]["stopReason"],
        "cancelled",
        "{answers:#?}"
    );
    assert!(
        answers[&list.to_string()]["result"]["sessions"].is_array(),
        "{answers:#?}"
    );
    assert!(
        waited < Duration::from_millis(1500),
        "the agent answered nothing for {waited:?}: the closed turn's end blocked the \
         dispatcher until the reopened session's turn was over"
    );
    let (response, updates) = agent.response(&second, WAIT);
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    seen.extend(updates);
    let texts = texts_of(&session_updates(&seen, &session), "agent_message_chunk");
    assert_eq!(
        texts.last().map(String::as_str),
        Some("New answer"),
        "{seen:#?}"
    );
    let turns = space.db.turns(&session);
    assert_eq!(turns.len(), 2, "{turns:?}");
    assert_eq!(
        turns[1].stop_reason.as_deref(),
        Some("end_turn"),
        "{turns:?}"
    );
    finish(agent);
    space.db.assert_sound();
}

/// Closing a running turn and loading the session at once (before the
/// cancelled turn has finished storing its end): the turn was cancelled,
/// not cut off, and must not be closed as interrupted.
///
/// To make the window certain, the test holds the database's write lock
/// for a moment, as another Spindle process committing a step would: the
/// cancelled turn cannot store its end before the load has looked.
#[test]
fn a_session_loaded_right_after_close_keeps_its_cancelled_turn() {
    let space = Space::new("reopen-load");
    let server = FakeServer::start();
    let (mut agent, session, first) = stalled_turn(&space, &server);
    server.push(Reply::Sse(chat_text(&["Second."])));

    let blocker = space.db.connect();
    blocker
        .execute_batch("BEGIN IMMEDIATE")
        .expect("cannot take the write lock");
    let close = agent.request("session/close", json!({"sessionId": session}));
    let reload = agent.request(
        "session/load",
        json!({"sessionId": session, "cwd": space.ws(), "mcpServers": []}),
    );
    // No event tells that the close has reached the database and waits on
    // the lock (the load's answer may itself wait on it), so the lock is
    // held long enough for both requests to get there.
    thread::sleep(Duration::from_millis(500));
    blocker
        .execute_batch("COMMIT")
        .expect("cannot release the write lock");
    drop(blocker);
    let (answers, _) = wait_answers(&mut agent, &[close.clone(), reload.clone(), first.clone()]);
    assert_setup_result(&answers[&reload.to_string()]["result"], "session/load");
    assert_eq!(
        answers[&first.to_string()]["result"]["stopReason"],
        "cancelled",
        "{answers:#?}"
    );
    let turns = space.db.turns(&session);
    assert_eq!(turns.len(), 1, "{turns:?}");
    assert_eq!(
        (turns[0].state.as_str(), turns[0].stop_reason.as_deref()),
        ("ended", Some("cancelled")),
        "{turns:?}"
    );
    let mut other = space.reader();
    let replay = load(&mut other, &session, space.ws());
    assert!(
        !replay.iter().any(is_interrupted_note),
        "a cancelled turn is shown as interrupted: {replay:#?}"
    );

    // The conversation the model gets next has everything once.
    prompt_ok(&mut agent, &session, "second");
    let body = server.wait_requests(2, WAIT)[1].body.clone();
    let messages = conversation(&body);
    assert_eq!(
        messages,
        [
            json!({"role": "user", "content": "first"}),
            json!({"role": "assistant", "content": "Working"}),
            json!({"role": "user", "content": "second"}),
        ]
    );
    finish(agent);
    finish(other);
    space.db.assert_sound();
}

// ---------------------------------------------------------------------------
// Titles.

#[test]
fn the_first_prompt_titles_the_session_once() {
    let space = Space::new("titles");
    let mut agent = space.scripted(&json!({"fallback": {"text": "Sure."}}));
    let session = agent.new_session(&space.ws);
    let first = prompt_ok(
        &mut agent,
        &session,
        "  \n   Refactor   the parser module  \nand keep the tests green",
    );
    assert_eq!(kind(&first[0]), "session_info_update", "{first:#?}");
    assert_eq!(first[0]["title"], "Refactor the parser module");
    assert!(looks_like_rfc3339(
        first[0]["updatedAt"].as_str().unwrap_or_default()
    ));
    assert_eq!(
        first
            .iter()
            .filter(|u| kind(u) == "session_info_update")
            .count(),
        1
    );
    let second = prompt_ok(&mut agent, &session, "Another thing entirely");
    assert!(
        !second.iter().any(|u| kind(u) == "session_info_update"),
        "{second:#?}"
    );
    let entry = listed(&mut agent, &session).expect("listed");
    assert_eq!(entry["title"], "Refactor the parser module");

    // A long first line is cut short, at a word boundary.
    let long = agent.new_session(&space.ws);
    let words = "supercalifragilistic word ".repeat(8);
    let updates = prompt_ok(&mut agent, &long, &words);
    let title = updates[0]["title"].as_str().unwrap_or_default().to_string();
    let stem = title.trim_end_matches('…');
    assert!(
        stem.chars().count() <= 60 && !stem.is_empty(),
        "title {title:?} is too long"
    );
    assert!(words.starts_with(stem), "title {title:?}");

    // The title survives a reload, and is not sent again by another process.
    finish(agent);
    let mut other = space.scripted(&json!({"fallback": {"text": "Yes."}}));
    let entry = listed(&mut other, &session).expect("listed");
    assert_eq!(entry["title"], "Refactor the parser module");
    let replay = load(&mut other, &session, space.ws());
    assert_eq!(
        replay
            .iter()
            .filter(|u| kind(u) == "session_info_update")
            .count(),
        1,
        "{replay:#?}"
    );
    let third = prompt_ok(&mut other, &session, "Third");
    assert!(
        !third.iter().any(|u| kind(u) == "session_info_update"),
        "{third:#?}"
    );
    // A session opened in another process before its first prompt gets
    // its title there.
    let fresh = other.new_session(&space.ws);
    finish(other);
    let mut third_process = space.scripted(&json!({"fallback": {"text": "Ok."}}));
    resume(&mut third_process, &fresh, space.ws());
    let updates = prompt_ok(&mut third_process, &fresh, "Named late");
    assert_eq!(updates[0]["title"], "Named late", "{updates:#?}");
    finish(third_process);
    assert_eq!(space.db.title(&fresh).as_deref(), Some("Named late"));
}

// ---------------------------------------------------------------------------
// Unknown ids and sessions that are stored but not open.

#[test]
fn unknown_session_ids_are_not_found_and_stored_ones_must_be_opened_first() {
    let space = Space::new("unknown");
    let mut agent = space.scripted(&json!({"fallback": {"text": "Hi."}}));
    let unknown = "sess_does_not_exist";
    let requests = [
        (
            "session/load",
            json!({"sessionId": unknown, "cwd": space.ws(), "mcpServers": []}),
        ),
        (
            "session/resume",
            json!({"sessionId": unknown, "cwd": space.ws()}),
        ),
        ("session/close", json!({"sessionId": unknown})),
        ("session/prompt", text_prompt(unknown, "hi")),
    ];
    for (method, params) in requests {
        let error = err(&mut agent, method, params);
        assert_eq!(error["code"], NOT_FOUND, "{method}: {error}");
        assert!(message(&error).contains(unknown), "{method}: {error}");
    }
    // Bad params of load and resume.
    let error = err(
        &mut agent,
        "session/load",
        json!({"sessionId": unknown, "cwd": space.ws()}),
    );
    assert_eq!(
        error["code"], INVALID_PARAMS,
        "load needs mcpServers: {error}"
    );
    let error = err(
        &mut agent,
        "session/resume",
        json!({"sessionId": unknown, "cwd": "relative"}),
    );
    assert_eq!(error["code"], INVALID_PARAMS, "{error}");

    // Stored, but not open in this process.
    let session = agent.new_session(&space.ws);
    prompt_ok(&mut agent, &session, "hello");
    finish(agent);
    let mut other = space.scripted(&json!({"fallback": {"text": "Hi again."}}));
    let error = err(&mut other, "session/prompt", text_prompt(&session, "hi"));
    assert_eq!(error["code"], INVALID_REQUEST, "{error}");
    let text = message(&error);
    assert!(
        text.contains("session/load") && text.contains("session/resume"),
        "{error}"
    );
    // Closing a stored session that is not open is harmless.
    assert_eq!(
        ok(&mut other, "session/close", json!({"sessionId": session})),
        json!({})
    );
    resume(&mut other, &session, space.ws());
    prompt_ok(&mut other, &session, "hi");
    finish(other);
}

//! `session/set_title` and `session/status` (unstable ACP) through the
//! real binary. The client advertises `plan`, an unstable part, so the
//! harness checks the answers against the unstable schema's
//! `SetSessionTitleResponse` and `SessionStatusResponse`.

use super::{list_all, listed, load, prompt_ok, Space, INVALID_PARAMS, NOT_FOUND, WAIT};
use crate::support::prelude::{call, err, ok};
use crate::support::Agent;
use serde_json::{json, Value};

/// A scripted agent initialized as a client of the unstable schema.
fn unstable_client(space: &Space) -> Agent {
    let mut agent = space.spawn_scripted(
        &space.db,
        &json!({"replies": [{"text": "Done."}], "fallback": {"text": "Again."}}),
    );
    agent.initialize_with(json!({"plan": {}}));
    agent
}

/// The titles of the `session_info_update`s among `messages` for `session`.
fn info_titles(messages: &[Value], session: &str) -> Vec<String> {
    messages
        .iter()
        .filter(|m| m["method"] == "session/update" && m["params"]["sessionId"] == session)
        .map(|m| &m["params"]["update"])
        .filter(|u| u["sessionUpdate"] == "session_info_update")
        .filter_map(|u| u["title"].as_str().map(str::to_string))
        .collect()
}

/// Reads what follows until `session`'s `session_info_update` with a
/// title comes, and returns that title.
fn next_info_title(agent: &mut Agent, session: &str) -> String {
    let deadline = std::time::Instant::now() + WAIT;
    loop {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        let message = agent
            .recv(left)
            .unwrap_or_else(|| panic!("no session_info_update for {session}"));
        if let Some(title) = info_titles(&[message], session).pop() {
            return title;
        }
    }
}

#[test]
fn initialize_advertises_title_and_status() {
    let space = Space::new("title-caps");
    let mut agent = space.spawn_scripted(&space.db, &json!({"replies": []}));
    let result = agent.initialize();
    let capabilities = &result["agentCapabilities"]["sessionCapabilities"];
    assert_eq!(capabilities["title"], json!({}), "{result}");
    assert_eq!(capabilities["status"], json!({}), "{result}");
}

/// The title is normalised and stored, `session/list` shows it, the open
/// session hears of it after the answer, and the first prompt's automatic
/// title does not replace it; a load replays it.
#[test]
fn a_set_title_is_stored_shown_and_kept() {
    let space = Space::new("set-title");
    let mut agent = unstable_client(&space);
    let session = agent.new_session(&space.ws);
    let (outcome, before) = call(
        &mut agent,
        "session/set_title",
        json!({"sessionId": session, "title": "  Fix the\nparser  "}),
    );
    assert_eq!(
        outcome.expect("set_title"),
        json!({"title": "Fix the parser"})
    );
    assert!(info_titles(&before, &session).is_empty(), "{before:#?}");
    assert_eq!(next_info_title(&mut agent, &session), "Fix the parser");
    // Titled, the session is listed before any prompt.
    let entry = listed(&mut agent, &session).expect("listed once titled");
    assert_eq!(entry["title"], "Fix the parser");

    let updates = prompt_ok(&mut agent, &session, "please do something else");
    assert!(info_titles(&updates, &session).is_empty(), "{updates:#?}");
    let entry = listed(&mut agent, &session).expect("still listed");
    assert_eq!(entry["title"], "Fix the parser");
    drop(agent);

    let mut other = unstable_client(&space);
    let replayed: Vec<Value> = load(&mut other, &session, space.ws())
        .into_iter()
        .map(|update| {
            json!({"method": "session/update",
                             "params": {"sessionId": session, "update": update}})
        })
        .collect();
    assert_eq!(
        info_titles(&replayed, &session).last().map(String::as_str),
        Some("Fix the parser")
    );
}

/// A session only in the store is retitled too, without any update to a
/// connection that does not have it open; an automatic title of another
/// process never replaces it.
#[test]
fn a_stored_session_is_retitled_without_an_update() {
    let space = Space::new("set-title-stored");
    let mut first = unstable_client(&space);
    let session = first.new_session(&space.ws);
    let mut second = unstable_client(&space);
    let (outcome, before) = call(
        &mut second,
        "session/set_title",
        json!({"sessionId": session, "title": "Chosen"}),
    );
    assert_eq!(outcome.expect("set_title")["title"], "Chosen");
    assert!(before.is_empty(), "{before:#?}");
    let status = ok(&mut second, "session/status", json!({"sessionId": session}));
    assert_eq!(status, json!({"status": "saved"}));
    // The first process still had no title in memory: its prompt finds
    // the stored one and keeps it.
    let updates = prompt_ok(&mut first, &session, "an automatic title would be this");
    assert!(info_titles(&updates, &session).is_empty(), "{updates:#?}");
    let (sessions, _) = list_all(&mut second, None);
    let entry = sessions.iter().find(|s| s["sessionId"] == session);
    assert_eq!(entry.map(|s| &s["title"]), Some(&json!("Chosen")));
    // Nothing reached the connection that never opened it.
    assert!(second.recv(std::time::Duration::from_millis(200)).is_none());
}

#[test]
fn bad_titles_and_unknown_sessions_are_refused() {
    let space = Space::new("set-title-bad");
    let mut agent = unstable_client(&space);
    let session = agent.new_session(&space.ws);
    for params in [
        json!({"sessionId": session, "title": " \n\t "}),
        json!({"sessionId": session, "title": ""}),
        json!({"sessionId": session}),
        json!({"sessionId": session, "title": null}),
        json!({"sessionId": session, "title": 7}),
        json!({"title": "No session"}),
        json!([]),
    ] {
        let error = err(&mut agent, "session/set_title", params.clone());
        assert_eq!(error["code"], INVALID_PARAMS, "{params}: {error}");
        assert!(error["message"].as_str().is_some_and(|m| !m.is_empty()));
    }
    let error = err(
        &mut agent,
        "session/set_title",
        json!({"sessionId": "sess_nope", "title": "Hello"}),
    );
    assert_eq!(error["code"], NOT_FOUND, "{error}");
    assert_eq!(error["data"]["sessionId"], "sess_nope", "{error}");
    // None of it titled the session.
    assert!(listed(&mut agent, &session).is_none());
}

/// `open` while in memory here, `saved` once closed (kept, since it was
/// used) or seen from another process, -32002 for an unknown id; asking
/// changes nothing: the other process still has to open it to prompt.
#[test]
fn status_says_open_or_saved_and_changes_nothing() {
    let space = Space::new("session-status");
    let mut agent = unstable_client(&space);
    let session = agent.new_session(&space.ws);
    let status = ok(&mut agent, "session/status", json!({"sessionId": session}));
    assert_eq!(status, json!({"status": "open"}));
    prompt_ok(&mut agent, &session, "use it");

    let mut other = unstable_client(&space);
    let status = ok(&mut other, "session/status", json!({"sessionId": session}));
    assert_eq!(status, json!({"status": "saved"}));
    let status = ok(&mut other, "session/status", json!({"sessionId": session}));
    assert_eq!(
        status,
        json!({"status": "saved"}),
        "asking twice is the same"
    );
    let error = err(
        &mut other,
        "session/prompt",
        json!({"sessionId": session, "prompt": [{"type": "text", "text": "hi"}]}),
    );
    assert_ne!(error["code"], json!(null), "{error}");

    ok(&mut agent, "session/close", json!({"sessionId": session}));
    let status = ok(&mut agent, "session/status", json!({"sessionId": session}));
    assert_eq!(status, json!({"status": "saved"}));

    let error = err(
        &mut agent,
        "session/status",
        json!({"sessionId": "sess_nope"}),
    );
    assert_eq!(error["code"], NOT_FOUND, "{error}");
    assert_eq!(error["data"]["sessionId"], "sess_nope", "{error}");
    for params in [json!({}), json!({"sessionId": 5}), json!(null)] {
        let error = err(&mut agent, "session/status", params.clone());
        assert_eq!(error["code"], INVALID_PARAMS, "{params}: {error}");
    }
}

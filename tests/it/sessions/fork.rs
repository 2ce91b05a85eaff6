//! `session/fork` (unstable) and `session/set_model` (unstable, older
//! clients): a fork holds the conversation and transcript so far, loads
//! with the same transcript in another process, and diverges afterwards;
//! forking a running or unknown session is refused.

use super::{err, load, ok, text_prompt, Space, WAIT};
use crate::support::fake_openai::chat_text;
use crate::support::{FakeServer, Reply};
use serde_json::{json, Value};

fn user_texts(body: &Value) -> Vec<String> {
    body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "user")
        .map(|m| match &m["content"] {
            Value::String(text) => text.clone(),
            other => other.to_string(),
        })
        .collect()
}

/// A transcript without its session ids, for comparing two sessions.
fn without_ids(updates: &[Value]) -> Vec<Value> {
    updates
        .iter()
        .map(|u| {
            let mut u = u.clone();
            if let Some(object) = u.as_object_mut() {
                object.remove("sessionId");
            }
            u
        })
        .collect()
}

#[test]
fn a_fork_has_the_conversation_so_far_and_then_goes_its_own_way() {
    let space = Space::new("fork");
    let server = FakeServer::start();
    server.push(Reply::Sse(chat_text(&["The answer is 42."])));
    let mut agent = space.openai(&server);
    let initialized = agent.received().first().cloned().unwrap_or_default();
    assert_eq!(
        initialized["result"]["agentCapabilities"]["sessionCapabilities"]["fork"],
        json!({}),
        "{initialized}"
    );
    let original = agent.new_session(&space.ws);
    let id = agent.request(
        "session/prompt",
        text_prompt(&original, "what is the answer?"),
    );
    agent.response(&id, WAIT);

    let forked = ok(
        &mut agent,
        "session/fork",
        json!({"sessionId": original, "cwd": space.ws(), "mcpServers": []}),
    );
    let fork = forked["sessionId"].as_str().unwrap().to_string();
    assert_ne!(fork, original);
    assert!(forked["configOptions"].is_array(), "{forked}");

    // The fork goes on from the copied conversation.
    server.push(Reply::Sse(chat_text(&["Forty-two, doubled: 84."])));
    let id = agent.request("session/prompt", text_prompt(&fork, "double it"));
    agent.response(&id, WAIT);
    let sent = server.requests().pop().unwrap().body;
    assert_eq!(
        user_texts(&sent),
        ["what is the answer?", "double it"],
        "{sent}"
    );
    // The original is as it was.
    server.push(Reply::Sse(chat_text(&["Still 42."])));
    let id = agent.request("session/prompt", text_prompt(&original, "and now?"));
    agent.response(&id, WAIT);
    let sent = server.requests().pop().unwrap().body;
    assert_eq!(
        user_texts(&sent),
        ["what is the answer?", "and now?"],
        "{sent}"
    );
    drop(agent);

    // Another process loads both: the fork's transcript starts with the
    // original's first turn and then diverges.
    let mut reader = space.reader();
    let a = load(&mut reader, &original, space.ws());
    let b = load(&mut reader, &fork, space.ws());
    let first_turn = a.len() / 2;
    assert!(first_turn > 0);
    assert_eq!(
        without_ids(&a[..first_turn]),
        without_ids(&b[..first_turn]),
        "the copied turn replays the same"
    );
    let text = |updates: &[Value]| -> String {
        updates
            .iter()
            .filter_map(|u| {
                u["update"]["content"]["text"]
                    .as_str()
                    .or(u["content"]["text"].as_str())
            })
            .collect()
    };
    assert!(text(&b).contains("84") && !text(&b).contains("Still 42"));
    assert!(text(&a).contains("Still 42") && !text(&a).contains("84"));
    space.db.assert_sound();
}

#[test]
fn forking_an_unknown_or_busy_session_is_refused() {
    let space = Space::new("fork-bad");
    let server = FakeServer::start();
    let mut agent = space.openai(&server);
    let error = err(
        &mut agent,
        "session/fork",
        json!({"sessionId": "sess_nope", "cwd": space.ws()}),
    );
    assert_eq!(error["code"], -32002, "{error}");
    let session = agent.new_session(&space.ws);
    let error = err(
        &mut agent,
        "session/fork",
        json!({"sessionId": session, "cwd": "relative/dir"}),
    );
    assert_eq!(error["code"], -32602, "{error}");
    // Busy: a stream that is slow to come.
    server.push(Reply::Sse(vec![crate::support::Step::Stall]));
    let before = server.requests().len();
    let id = agent.request("session/prompt", text_prompt(&session, "slow"));
    // The turn runs once its request reaches the model.
    server.wait_requests(before + 1, WAIT);
    let error = err(
        &mut agent,
        "session/fork",
        json!({"sessionId": session, "cwd": space.ws()}),
    );
    assert_eq!(error["code"], -32600, "{error}");
    assert!(error["message"]
        .as_str()
        .unwrap()
        .contains("running a turn"));
    agent.notify("session/cancel", json!({"sessionId": session}));
    agent.response(&id, WAIT);
}

#[test]
fn set_model_is_the_model_config_option() {
    let space = Space::new("set-model");
    let server = FakeServer::start();
    server.serve_models(json!({"data": [{"id": "test-model"}, {"id": "other-model"}]}));
    let mut agent = space.openai(&server);
    let session = agent.new_session(&space.ws);
    let id = agent.request(
        "session/set_model",
        json!({"sessionId": session, "modelId": "openai/other-model"}),
    );
    let (answer, others) = agent.response(&id, WAIT);
    assert_eq!(answer["result"], json!({}), "{answer}");
    let update = others
        .iter()
        .find(|m| m["params"]["update"]["sessionUpdate"] == "config_option_update")
        .unwrap_or_else(|| panic!("no config_option_update: {others:?}"));
    let model = update["params"]["update"]["configOptions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|o| o["id"] == "model")
        .unwrap();
    assert_eq!(model["currentValue"], "openai/other-model", "{model}");
    let error = err(
        &mut agent,
        "session/set_model",
        json!({"sessionId": session}),
    );
    assert_eq!(error["code"], -32602);
    let error = err(
        &mut agent,
        "session/set_model",
        json!({"sessionId": "sess_nope", "modelId": "x"}),
    );
    assert_eq!(error["code"], -32002, "{error}");
}

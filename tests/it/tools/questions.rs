//! `ask_user`: through form elicitation when the client offers it, through
//! a permission request whose options are the choices, and otherwise as
//! the turn's last message, answered by the next prompt (the tool's result
//! for the model); a cancel while the question waits ends the turn
//! cancelled.

use super::{call, calls, say, script, Space, WAIT};
use crate::support::client::no_requests;
use crate::support::{run_prompt, Answer, Exchange};
use serde_json::{json, Value};

fn ask(question: &str, choices: &[&str]) -> Value {
    calls(vec![call(
        "q1",
        "ask_user",
        json!({"question": question, "choices": choices}),
    )])
}

#[test]
fn a_question_goes_through_a_form_when_the_editor_offers_one() {
    let space = Space::new("ask-form");
    let (mut agent, session) = space.start(
        &script(vec![
            ask("Which database?", &["sqlite", "postgres"]),
            say("Postgres it is."),
        ]),
        &["--permissions", "ask"],
        json!({"elicitation": {"form": {}}}),
    );
    let mut asked = None;
    let turn = run_prompt(
        &mut agent,
        &session,
        "set it up",
        WAIT,
        |request: &Value| {
            assert_eq!(request["method"], "elicitation/create", "{request}");
            asked = Some(request.clone());
            Answer::Result(json!({"action": "accept", "content": {"answer": "postgres"}}))
        },
    );
    assert_eq!(turn.stop_reason(), "end_turn", "{}", turn.dump());
    let asked = asked.unwrap();
    let params = &asked["params"];
    assert_eq!(params["mode"], "form");
    assert_eq!(params["message"], "Which database?");
    assert_eq!(
        params["requestedSchema"]["properties"]["answer"]["enum"],
        json!(["sqlite", "postgres"])
    );
    assert!(params["requestedSchema"]["properties"]["other"].is_object());
    assert_eq!(turn.final_status("q1"), "completed");
    assert!(
        turn.final_text("q1").contains("postgres"),
        "{}",
        turn.dump()
    );
}

#[test]
fn a_declined_form_tells_the_model_so() {
    let space = Space::new("ask-form-decline");
    let (mut agent, session) = space.start(
        &script(vec![ask("Delete the cache?", &[]), say("I will leave it.")]),
        &["--permissions", "ask"],
        json!({"elicitation": {"form": {}}}),
    );
    let turn = run_prompt(&mut agent, &session, "tidy", WAIT, |_: &Value| {
        Answer::Result(json!({"action": "decline"}))
    });
    assert!(
        turn.final_text("q1").contains("declined"),
        "{}",
        turn.dump()
    );
}

#[test]
fn choices_without_a_form_are_permission_options() {
    let space = Space::new("ask-options");
    let (mut agent, session) = space.start(
        &script(vec![
            ask("Which branch?", &["main", "develop"]),
            say("On develop."),
            ask("Which branch again?", &["main", "develop"]),
            say("Neither then."),
        ]),
        &["--permissions", "ask"],
        json!({}),
    );
    let mut options = Value::Null;
    let mut asked = Value::Null;
    let turn = run_prompt(&mut agent, &session, "branch", WAIT, |request: &Value| {
        assert_eq!(request["method"], "session/request_permission");
        options = request["params"]["options"].clone();
        asked = request["params"]["toolCall"].clone();
        Answer::select("choice_2")
    });
    // The request names the call as the call was shown.
    assert_eq!(turn.tool_call("q1")["title"], "Question: Which branch?");
    assert_eq!(asked["title"], turn.tool_call("q1")["title"], "{asked}");
    assert!(asked.get("content").is_none(), "shown whole: {asked}");
    assert_eq!(
        options,
        json!([
            {"optionId": "choice_1", "name": "main", "kind": "allow_once"},
            {"optionId": "choice_2", "name": "develop", "kind": "allow_once"},
            {"optionId": "none", "name": "None of these", "kind": "reject_once"},
        ])
    );
    assert!(
        turn.final_text("q1").contains("chose: develop"),
        "{}",
        turn.dump()
    );
    let turn = run_prompt(&mut agent, &session, "again", WAIT, |_: &Value| {
        Answer::select("none")
    });
    assert!(
        turn.final_text("q1").contains("none of these"),
        "{}",
        turn.dump()
    );
}

/// A long question of several lines: the call and its permission request
/// carry one title, shortened the same way, and the request the whole
/// question as its content.
#[test]
fn a_long_question_has_one_title_and_is_asked_whole() {
    let long = format!(
        "{} and which of them should stay?\nThe second line explains why.",
        "Which of the three storage back ends should the importer write to".repeat(2)
    );
    let space = Space::new("ask-long");
    let (mut agent, session) = space.start(
        &script(vec![ask(&long, &["sqlite", "files"]), say("Files then.")]),
        &["--permissions", "ask"],
        json!({}),
    );
    let mut asked = Value::Null;
    let turn = run_prompt(&mut agent, &session, "import", WAIT, |request: &Value| {
        asked = request["params"]["toolCall"].clone();
        Answer::select("choice_2")
    });
    assert_eq!(turn.stop_reason(), "end_turn", "{}", turn.dump());
    let title = turn.tool_call("q1")["title"].as_str().unwrap().to_string();
    assert_eq!(asked["title"], title.as_str(), "{asked}");
    assert!(title.starts_with("Question: Which of the three"), "{title}");
    assert!(
        title.ends_with('…') && title.chars().count() < 100,
        "{title}"
    );
    assert_eq!(
        asked["content"],
        json!([{"type": "content", "content": {"type": "text", "text": long}}]),
        "{asked}"
    );
    assert!(
        turn.final_text("q1").contains("chose: files"),
        "{}",
        turn.dump()
    );
}

#[test]
fn without_a_way_to_ask_the_turn_ends_with_the_question() {
    let space = Space::new("ask-end-turn");
    let (mut agent, session) = space.start(
        &script(vec![
            ask("What should the module be called?", &[]),
            say("Naming it billing."),
        ]),
        &["--permissions", "ask"],
        json!({}),
    );
    let turn = run_prompt(&mut agent, &session, "make a module", WAIT, no_requests);
    assert_eq!(turn.stop_reason(), "end_turn", "{}", turn.dump());
    assert!(
        turn.text().contains("What should the module be called?"),
        "{}",
        turn.dump()
    );
    // The next prompt is the answer; the model goes on.
    let turn = run_prompt(&mut agent, &session, "billing", WAIT, no_requests);
    assert!(turn.text().contains("Naming it billing"), "{}", turn.dump());
}

#[test]
fn bad_questions_fail_and_a_cancel_while_asking_ends_the_turn() {
    let space = Space::new("ask-bad");
    let long = "x".repeat(3000);
    let (mut agent, session) = space.start(
        &script(vec![
            calls(vec![
                call("b1", "ask_user", json!({"question": long})),
                call(
                    "b2",
                    "ask_user",
                    json!({"question": "?", "choices": ["a", "a"]}),
                ),
                call("b3", "ask_user", json!({"question": "?", "extra": 1})),
            ]),
            ask("Go on?", &["yes", "no"]),
            say("unused"),
        ]),
        &["--permissions", "ask"],
        json!({}),
    );
    let mut exchange = Exchange::prompt(&mut agent, &session, "go");
    let mut waiting = |_: &Value| Answer::Ignore;
    let asked = exchange.until(&mut agent, WAIT, &mut waiting, &mut |e: &Exchange| {
        !e.requests("session/request_permission").is_empty()
    });
    assert!(asked);
    agent.notify("session/cancel", json!({"sessionId": session}));
    let turn = exchange.finish(&mut agent, WAIT, &mut waiting);
    assert_eq!(turn.stop_reason(), "cancelled", "{}", turn.dump());
    for id in ["b1", "b2", "b3"] {
        assert_eq!(turn.final_status(id), "failed", "{id}: {}", turn.dump());
    }
}

/// Without a way to ask, the user's next prompt reaches the model as the
/// `ask_user` call's result (the calls after it answered unrun, in order),
/// not as a user message after a placeholder.
#[test]
fn without_a_way_to_ask_the_next_prompt_is_the_tools_result() {
    use crate::support::fake_openai::{chat_text, chat_tool_calls};
    use crate::support::{Agent, FakeServer, Reply};
    let space = Space::new("ask-result");
    let server = FakeServer::start();
    server.push(Reply::Sse(chat_tool_calls(&[
        (
            "ask_user",
            json!({"question": "What should the module be called?"}),
        ),
        ("list_directory", json!({})),
    ])));
    server.push(Reply::Sse(chat_text(&["Naming it billing."])));
    server.push(Reply::Sse(chat_text(&["You are welcome."])));
    let base = server.base_url();
    let tmp = space.tmpdir();
    let mut agent = Agent::spawn(
        &["acp", "--model", "test-model"],
        &[
            ("OPENAI_BASE_URL", &base),
            ("OPENAI_API_KEY", "sk-test"),
            ("TMPDIR", &tmp),
        ],
    );
    agent.initialize();
    let session = agent.new_session(&space.ws);
    let turn = run_prompt(&mut agent, &session, "make a module", WAIT, no_requests);
    assert_eq!(turn.stop_reason(), "end_turn", "{}", turn.dump());
    assert!(turn.text().contains("What should the module be called?"));
    let turn = run_prompt(&mut agent, &session, "billing", WAIT, no_requests);
    assert!(turn.text().contains("Naming it billing"), "{}", turn.dump());
    let requests = server.wait_requests(2, WAIT);
    let messages = requests[1].body["messages"].as_array().unwrap().clone();
    let tail: Vec<(Value, Value, Value)> = messages[messages.len() - 3..]
        .iter()
        .map(|m| {
            (
                m["role"].clone(),
                m["tool_call_id"].clone(),
                m["content"].clone(),
            )
        })
        .collect();
    assert_eq!(tail[0].0, "assistant", "{messages:#?}");
    assert_eq!(
        tail[1],
        (
            json!("tool"),
            json!("call_1"),
            json!("The user answered: billing")
        ),
        "{messages:#?}"
    );
    assert_eq!(
        (tail[2].0.clone(), tail[2].1.clone()),
        (json!("tool"), json!("call_2"))
    );
    assert!(
        !messages
            .iter()
            .any(|m| m["role"] == "user" && m["content"] == "billing"),
        "{messages:#?}"
    );
    // The answer stays the tool's result, once, in the conversation after.
    run_prompt(&mut agent, &session, "thanks", WAIT, no_requests);
    let later = server.wait_requests(3, WAIT)[2].body["messages"].clone();
    let answers = later
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["tool_call_id"] == "call_1")
        .count();
    assert_eq!(answers, 1, "{later:#}");
}

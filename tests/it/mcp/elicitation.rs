//! An MCP server asking the user during one of its tool calls: its
//! `elicitation/create` forwarded to the editor tied to the tool call
//! (form and URL mode), the answer back to the server, a URL flow's
//! completion told to the editor once, and everything that must not get
//! through refused with an error the server sees: hostile URLs, a
//! question outside a call, a question to an editor that takes no
//! elicitation. A cancel while the user is asked answers the server
//! `cancel`.

use super::{call_tools, open, say, tool_result, wait_event, Bench, WAIT};
use crate::support::client::no_requests;
use crate::support::mcp_server::{stdio_server, EVENTS_FILE_ENV};
use crate::support::{run_prompt, Agent, Answer, Exchange};
use serde_json::{json, Value};

/// `spindle acp` (every tool allowed) initialised with these client
/// capabilities.
fn agent_taking(bench: &Bench, capabilities: Value) -> Agent {
    let mut agent = bench.launch("yolo", &[]);
    let id = agent.request(
        "initialize",
        json!({"protocolVersion": 1, "clientCapabilities": capabilities,
               "clientInfo": {"name": "spindle-tests", "version": "0.0.0"}}),
    );
    let (response, _) = agent.response(&id, WAIT);
    assert!(response.get("result").is_some(), "{response}");
    agent
}

/// The capabilities the server got in `initialize`.
fn declared(events_file: &str) -> Value {
    let lines = wait_event(events_file, |line| line.starts_with("initialize "));
    let line = lines
        .iter()
        .find_map(|line| line.strip_prefix("initialize "))
        .unwrap_or_default();
    serde_json::from_str(line).unwrap_or_else(|err| panic!("{err}: {line}"))
}

/// The answers the server got to its questions, in order.
fn answers(lines: &[String]) -> Vec<Value> {
    lines
        .iter()
        .filter_map(|line| line.strip_prefix("elicitation answer "))
        .map(|json| serde_json::from_str(json).unwrap_or_else(|err| panic!("{err}: {json}")))
        .collect()
}

/// What the `ask` tool returned to the model: the answer it got.
fn answer_in_result(bench: &Bench, call: &str) -> Value {
    let text = tool_result(&bench.last_body(), call);
    let json = text
        .strip_prefix("answer: ")
        .unwrap_or_else(|| panic!("not an answer: {text}"));
    serde_json::from_str(json).unwrap_or_else(|err| panic!("{err}: {json}"))
}

fn server(events_file: &str) -> Value {
    json!([stdio_server("local", &[(EVENTS_FILE_ENV, events_file)])])
}

#[test]
fn a_servers_form_reaches_the_editor_cleaned_and_the_answer_reaches_the_server() {
    let bench = Bench::new("mcp-elicit-form");
    let events_file = bench.file("events.log");
    let mut agent = agent_taking(&bench, json!({"elicitation": {"form": {}}}));
    let opened = open(&mut agent, &bench.ws, server(&events_file));
    assert_eq!(declared(&events_file), json!({"elicitation": {"form": {}}}));
    let request = json!({
        "message": "Who are you?\u{1b}[2J",
        "requestedSchema": {
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "type": "object",
            "additionalProperties": false,
            "properties": {
                "name": {"type": "string", "title": "Name", "pattern": "(a+)+$"},
                "size": {"type": "string", "enum": ["s", "m"], "enumNames": ["Small", "Medium"]},
            },
            "required": ["name"],
        },
    });
    bench.model.push(call_tools(&[(
        "c-ask",
        "local__ask",
        json!({ "request": request }),
    )]));
    bench.model.push(say("Hello, Ada."));
    let mut asked = Vec::new();
    let turn = run_prompt(
        &mut agent,
        &opened.session,
        "Ask me",
        WAIT,
        |request: &Value| {
            asked.push(request.clone());
            Answer::Result(json!({"action": "accept",
                                  "content": {"name": "Ada", "size": "m", "admin": true}}))
        },
    );
    assert_eq!(turn.stop_reason(), "end_turn", "{}", turn.dump());
    assert_eq!(asked.len(), 1, "{asked:?}");
    assert_eq!(asked[0]["method"], "elicitation/create");
    let params = &asked[0]["params"];
    assert_eq!(params["sessionId"], opened.session.as_str());
    assert_eq!(params["toolCallId"], "c-ask");
    assert_eq!(params["mode"], "form");
    assert_eq!(params["message"], "Who are you?[2J");
    assert_eq!(
        params["requestedSchema"],
        json!({
            "type": "object",
            "properties": {
                "name": {"type": "string", "title": "Name"},
                "size": {"type": "string", "oneOf": [{"const": "s", "title": "Small"},
                                                      {"const": "m", "title": "Medium"}]},
            },
            "required": ["name"],
        })
    );
    // Only the form's fields go back: `admin` was never asked for.
    let expected = json!({"action": "accept", "content": {"name": "Ada", "size": "m"}});
    assert_eq!(
        answers(&wait_event(&events_file, |l| l.starts_with("elicitation answer"))),
        vec![expected.clone()]
    );
    assert_eq!(answer_in_result(&bench, "c-ask"), expected);
    assert_eq!(turn.final_status("c-ask"), "completed");
}

#[test]
fn a_url_elicitation_is_forwarded_and_its_completion_told_once() {
    let bench = Bench::new("mcp-elicit-url");
    let events_file = bench.file("events.log");
    let mut agent = agent_taking(&bench, json!({"elicitation": {"form": {}, "url": {}}}));
    let opened = open(&mut agent, &bench.ws, server(&events_file));
    assert_eq!(
        declared(&events_file),
        json!({"elicitation": {"form": {}, "url": {}}})
    );
    let url = "https://auth.example/connect?elicitation=srv-1";
    bench.model.push(call_tools(&[(
        "c-url",
        "local__ask",
        json!({"request": {"mode": "url", "message": "Sign in to the tracker",
                           "url": url, "elicitationId": "srv-1"},
               "complete": true}),
    )]));
    bench.model.push(say("Signed in."));
    let turn = run_prompt(
        &mut agent,
        &opened.session,
        "Sign me in",
        WAIT,
        |request: &Value| {
            assert_eq!(request["method"], "elicitation/create", "{request}");
            Answer::Result(json!({"action": "accept"}))
        },
    );
    assert_eq!(turn.stop_reason(), "end_turn", "{}", turn.dump());
    let asked = turn.requests("elicitation/create");
    assert_eq!(asked.len(), 1);
    let params = &asked[0]["params"];
    assert_eq!(params["mode"], "url");
    assert_eq!(params["url"], url);
    assert_eq!(params["toolCallId"], "c-url");
    assert_eq!(params["message"], "Sign in to the tracker");
    let id = params["elicitationId"].as_str().expect("an elicitation id");
    // The server completed an id it never asked with too: only its own
    // elicitation is told to the editor, once, before the call's result.
    let completions: Vec<(usize, &Value)> = turn
        .messages
        .iter()
        .enumerate()
        .filter(|(_, m)| m["method"] == "elicitation/complete")
        .collect();
    assert_eq!(completions.len(), 1, "{}", turn.dump());
    assert_eq!(completions[0].1["params"], json!({"elicitationId": id}));
    let result_at = turn
        .messages
        .iter()
        .position(|m| {
            m["params"]["update"]["toolCallId"] == "c-url"
                && m["params"]["update"]["status"] == "completed"
        })
        .expect("the call completed");
    assert!(completions[0].0 < result_at, "{}", turn.dump());
    assert_eq!(
        answer_in_result(&bench, "c-url"),
        json!({"action": "accept"})
    );
}

#[test]
fn urls_an_editor_must_not_open_are_refused_before_it_sees_them() {
    let bench = Bench::new("mcp-elicit-bad-url");
    let events_file = bench.file("events.log");
    let mut agent = agent_taking(&bench, json!({"elicitation": {"url": {}}}));
    let opened = open(&mut agent, &bench.ws, server(&events_file));
    let ask = |url: &str| {
        json!({"request": {"mode": "url", "message": "Open this", "url": url,
                           "elicitationId": "e"}})
    };
    bench.model.push(call_tools(&[
        (
            "c-js",
            "local__ask",
            ask("javascript:alert(document.cookie)"),
        ),
        ("c-file", "local__ask", ask("file:///etc/passwd")),
        (
            "c-user",
            "local__ask",
            ask("https://tracker.example@evil.example/"),
        ),
        (
            "c-form",
            "local__ask",
            json!({"request": {"message": "m",
            "requestedSchema": {"type": "object", "properties": {}}}}),
        ),
    ]));
    bench.model.push(say("None of that worked."));
    let turn = run_prompt(&mut agent, &opened.session, "Go", WAIT, no_requests);
    assert_eq!(turn.stop_reason(), "end_turn", "{}", turn.dump());
    for (call, says) in [
        ("c-js", "only http and https"),
        ("c-file", "only http and https"),
        ("c-user", "credentials"),
        // The editor takes URL mode only: no form reaches it either.
        ("c-form", "does not take form"),
    ] {
        let answer = answer_in_result(&bench, call);
        assert_eq!(answer["code"], -32602, "{call}: {answer}");
        let message = answer["message"].as_str().unwrap_or_default();
        assert!(message.contains(says), "{call}: {answer}");
    }
}

#[test]
fn without_elicitation_the_server_is_told_nothing_and_its_question_fails() {
    let bench = Bench::new("mcp-elicit-none");
    let events_file = bench.file("events.log");
    let mut agent = bench.agent("yolo", &[]);
    let opened = open(&mut agent, &bench.ws, server(&events_file));
    assert_eq!(declared(&events_file), json!({}));
    bench.model.push(call_tools(&[(
        "c-ask",
        "local__ask",
        json!({"request": {"message": "Name?",
                           "requestedSchema": {"type": "object", "properties": {}}}}),
    )]));
    bench.model.push(say("Never mind."));
    let turn = run_prompt(&mut agent, &opened.session, "Go", WAIT, no_requests);
    assert_eq!(turn.stop_reason(), "end_turn", "{}", turn.dump());
    assert_eq!(answer_in_result(&bench, "c-ask")["code"], -32601);
}

#[test]
fn a_question_outside_a_tool_call_is_refused() {
    let bench = Bench::new("mcp-elicit-late");
    let events_file = bench.file("events.log");
    let mut agent = agent_taking(&bench, json!({"elicitation": {"form": {}}}));
    let opened = open(&mut agent, &bench.ws, server(&events_file));
    bench
        .model
        .push(call_tools(&[("c-late", "local__late_ask", json!({}))]));
    bench.model.push(say("Done."));
    let turn = run_prompt(&mut agent, &opened.session, "Go", WAIT, no_requests);
    assert_eq!(turn.stop_reason(), "end_turn", "{}", turn.dump());
    let lines = wait_event(&events_file, |line| line.starts_with("elicitation answer"));
    let answer = &answers(&lines)[0];
    assert_eq!(answer["code"], -32600, "{answer}");
    assert!(
        answer["message"]
            .as_str()
            .is_some_and(|m| m.contains("only while one of this server's tools is being called")),
        "{answer}"
    );
}

#[test]
fn a_cancel_while_the_user_is_asked_answers_the_server_cancel() {
    let bench = Bench::new("mcp-elicit-cancel");
    let events_file = bench.file("events.log");
    let mut agent = agent_taking(&bench, json!({"elicitation": {"form": {}}}));
    let opened = open(&mut agent, &bench.ws, server(&events_file));
    bench.model.push(call_tools(&[(
        "c-ask",
        "local__ask",
        json!({"request": {"message": "Name?",
                           "requestedSchema": {"type": "object",
                                               "properties": {"name": {"type": "string"}}}}}),
    )]));
    let mut exchange = Exchange::prompt(&mut agent, &opened.session, "Ask me");
    // The user never answers.
    let mut ignore = |_: &Value| Answer::Ignore;
    let asked = exchange.until(&mut agent, WAIT, &mut ignore, &mut |x: &Exchange| {
        !x.requests("elicitation/create").is_empty()
    });
    assert!(asked, "the question never reached the editor");
    agent.notify("session/cancel", json!({"sessionId": opened.session}));
    let turn = exchange.finish(&mut agent, WAIT, &mut ignore);
    assert_eq!(turn.stop_reason(), "cancelled", "{}", turn.dump());
    assert_eq!(turn.final_status("c-ask"), "failed");
    turn.assert_every_tool_call_finished();
    let lines = wait_event(&events_file, |line| {
        line.starts_with("notifications/cancelled")
    });
    assert_eq!(
        answers(&lines),
        vec![json!({"action": "cancel"})],
        "{lines:?}"
    );
    let answered = lines
        .iter()
        .position(|l| l.starts_with("elicitation answer"));
    let cancelled = lines
        .iter()
        .position(|l| l.starts_with("notifications/cancelled"));
    assert!(answered < cancelled, "{lines:?}");
}

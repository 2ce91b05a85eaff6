//! Tool calls as mid-size and local models write them: arguments that are
//! almost JSON, names with a prefix or another case, and calls written
//! into the message's text, on each wire format. Repaired or recovered
//! calls go through the same policy, rules and plan mode as any call; a
//! form only mentioned in prose is never run.

use crate::support::fake_openai::{
    chat_text, chunk_content, chunk_finish, chunk_role, chunk_tool_call, chunk_usage, done,
};
use crate::support::prelude::{self, WAIT};
use crate::support::wire::{
    anthropic_answer, anthropic_end, anthropic_start, anthropic_text, anthropic_tool_use,
    responses_answer, responses_completed, responses_created, responses_function_call,
    responses_message, responses_usage,
};
use crate::support::{
    in_process, run_prompt, temp_dir, updates_text, write_file, Agent, FakeServer, Reply, Step,
    Turn,
};
use serde_json::{json, Value};
use std::path::Path;

/// `spindle acp --model test-model EXTRA…` against `server`, named as
/// `OPENAI_BASE_URL` would name it (`in_process::openai_config`), in
/// process, initialized.
fn chat_agent(server: &FakeServer, extra: &[&str]) -> Agent {
    let config =
        in_process::openai_config(&temp_dir("forgiving-chat"), &server.base_url(), "sk-test");
    let mut args = vec![
        "--model",
        "test-model",
        "--config",
        config.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    let mut agent = in_process::acp(&args);
    agent.initialize();
    agent
}

fn config_agent(config: Value, key: (&str, &str)) -> Agent {
    let path = write_file(
        &temp_dir("forgiving-config"),
        "config.json",
        config.to_string(),
    );
    let path = path.to_str().expect("UTF-8 test paths");
    let mut agent = Agent::spawn(&["acp", "--config", path, "--permissions", "yolo"], &[key]);
    agent.initialize();
    agent
}

fn session(agent: &mut Agent, cwd: &Path) -> String {
    let result = prelude::ok(
        agent,
        "session/new",
        json!({"cwd": cwd.to_str().unwrap(), "mcpServers": []}),
    );
    result["sessionId"].as_str().unwrap().to_string()
}

fn prompt(agent: &mut Agent, session: &str, text: &str) -> Turn {
    run_prompt(
        agent,
        session,
        text,
        WAIT,
        crate::support::client::no_requests,
    )
}

/// A Chat Completions answer whose one call streams its arguments as
/// they are written, not as a JSON value.
fn chat_raw_call(id: &str, name: &str, arguments: &str) -> Vec<Step> {
    vec![
        chunk_role(),
        chunk_tool_call(0, Some(id), Some(name), arguments),
        chunk_finish("tool_calls"),
        chunk_usage(10, 5),
        done(),
    ]
}

fn tool_calls(turn: &Turn) -> Vec<&Value> {
    turn.updates()
        .into_iter()
        .filter(|u| u["sessionUpdate"] == "tool_call")
        .collect()
}

fn workspace(name: &str) -> std::path::PathBuf {
    let dir = temp_dir(name);
    write_file(&dir, "notes.txt", "alpha\nbeta\n");
    dir
}

#[test]
fn a_trailing_comma_call_runs_and_is_shown_repaired() {
    let server = FakeServer::start();
    server.push(Reply::Sse(chat_raw_call(
        "c1",
        "read_file",
        "{\"path\": \"notes.txt\",}",
    )));
    server.push(Reply::Sse(chat_text(&["Read."])));
    let mut agent = chat_agent(&server, &["--permissions", "yolo"]);
    let dir = workspace("forgiving-comma");
    let session = session(&mut agent, &dir);
    let turn = prompt(&mut agent, &session, "read it");
    assert_eq!(turn.stop_reason(), "end_turn", "{}", turn.dump());
    assert_eq!(
        turn.tool_call("c1")["rawInput"],
        json!({"path": "notes.txt"})
    );
    // The editor is shown that the call was repaired.
    let title = turn.tool_call("c1")["title"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(title.ends_with("(arguments repaired)"), "{title}");
    assert_eq!(turn.final_status("c1"), "completed", "{}", turn.dump());
    let requests = server.wait_requests(2, WAIT);
    let sent = requests[1].body["messages"].as_array().unwrap();
    let call = &sent[sent.len() - 2]["tool_calls"][0]["function"];
    assert_eq!(call["arguments"], "{\"path\":\"notes.txt\"}");
    let result = sent.last().unwrap()["content"].as_str().unwrap();
    assert!(result.contains("beta"), "{result}");
    assert!(
        result.ends_with("(arguments repaired: trailing comma)"),
        "{result}"
    );
}

#[test]
fn an_unknown_tool_or_a_broken_argument_fails_the_call_not_the_turn() {
    let server = FakeServer::start();
    server.push(Reply::Sse(chat_raw_call(
        "c1",
        "reed_file",
        "{\"path\": \"a\"}",
    )));
    server.push(Reply::Sse(chat_raw_call(
        "c2",
        "functions.Read-File",
        "{\"path\": \"notes.txt\" \"start_line\": 1}",
    )));
    server.push(Reply::Sse(chat_raw_call(
        "c3",
        "read_file",
        "{\"path\": \"notes.txt\", \"start_line\": \"one\"}",
    )));
    server.push(Reply::Sse(chat_text(&["Gave up."])));
    let mut agent = chat_agent(&server, &["--permissions", "yolo"]);
    let dir = workspace("forgiving-unknown");
    let session = session(&mut agent, &dir);
    let turn = prompt(&mut agent, &session, "read it");
    assert_eq!(turn.stop_reason(), "end_turn", "{}", turn.dump());
    for id in ["c1", "c2", "c3"] {
        assert_eq!(turn.final_status(id), "failed", "{}", turn.dump());
    }
    assert!(turn
        .final_text("c1")
        .contains("no tool named \"reed_file\"; the nearest offered tools are read_file"));
    assert!(turn
        .final_text("c2")
        .contains("not valid JSON: expected `,` or `}` at line 1, column 22"));
    assert!(turn
        .final_text("c3")
        .contains("the field `start_line` of read_file must be an integer, not a string"));
    assert_eq!(server.wait_requests(4, WAIT).len(), 4);
}

/// A Hermes-style call in the text, streamed in small pieces.
fn hermes(before: &str, name: &str, arguments: Value) -> Vec<Step> {
    let text = format!(
        "{before}<tool_call>\n{}\n</tool_call>",
        json!({"name": name, "arguments": arguments})
    );
    let pieces: Vec<String> = text
        .as_bytes()
        .chunks(7)
        .map(|c| String::from_utf8(c.to_vec()).unwrap())
        .collect();
    let mut steps = vec![chunk_role()];
    steps.extend(pieces.iter().map(|p| chunk_content(p)));
    steps.extend([chunk_finish("stop"), chunk_usage(10, 5), done()]);
    steps
}

#[test]
fn a_hermes_call_in_the_text_runs_as_a_tool_call() {
    let server = FakeServer::start();
    server.push(Reply::Sse(hermes(
        "Let me read it.\n",
        "read_file",
        json!({"path": "notes.txt"}),
    )));
    server.push(Reply::Sse(chat_text(&["It says alpha."])));
    let mut agent = chat_agent(&server, &["--permissions", "yolo"]);
    let dir = workspace("forgiving-hermes");
    let session = session(&mut agent, &dir);
    let turn = prompt(&mut agent, &session, "read it");
    assert_eq!(turn.stop_reason(), "end_turn", "{}", turn.dump());
    let text = updates_text(&turn.messages, "agent_message_chunk");
    assert_eq!(text, "Let me read it.\nIt says alpha.");
    let calls = tool_calls(&turn);
    assert_eq!(calls.len(), 1, "{}", turn.dump());
    assert_eq!(calls[0]["rawInput"], json!({"path": "notes.txt"}));
    let id = calls[0]["toolCallId"].as_str().unwrap();
    assert_eq!(turn.final_status(id), "completed");

    let requests = server.wait_requests(2, WAIT);
    let sent = requests[1].body["messages"].as_array().unwrap();
    let assistant = &sent[sent.len() - 2];
    assert_eq!(assistant["content"], "Let me read it.");
    assert_eq!(assistant["tool_calls"][0]["id"], id);
    assert_eq!(assistant["tool_calls"][0]["function"]["name"], "read_file");
    assert_eq!(
        assistant["tool_calls"][0]["function"]["arguments"],
        "{\"path\":\"notes.txt\"}"
    );
    let result = sent.last().unwrap();
    assert_eq!(result["role"], "tool");
    assert_eq!(result["tool_call_id"], id);
    assert!(result["content"].as_str().unwrap().contains("beta"));
}

#[test]
fn a_call_only_mentioned_in_prose_is_not_run() {
    let server = FakeServer::start();
    let prose = "A server runs a call written as <tool_call>{\"name\": \"write_file\", \"arguments\": {\"path\": \"made.txt\", \"content\": \"x\"}}</tool_call> when its template knows the tag. Most do.";
    server.push(Reply::Sse(chat_text(&[&prose[..30], &prose[30..]])));
    let mut agent = chat_agent(&server, &["--permissions", "yolo"]);
    let dir = workspace("forgiving-prose");
    let session = session(&mut agent, &dir);
    let turn = prompt(&mut agent, &session, "explain");
    assert_eq!(turn.stop_reason(), "end_turn", "{}", turn.dump());
    assert!(tool_calls(&turn).is_empty(), "{}", turn.dump());
    assert_eq!(updates_text(&turn.messages, "agent_message_chunk"), prose);
    assert!(!dir.join("made.txt").exists());
    assert_eq!(server.requests().len(), 1);
}

#[test]
fn a_recovered_edit_call_in_plan_mode_is_refused_like_any_other() {
    let server = FakeServer::start();
    server.push(Reply::Sse(hermes(
        "",
        "write_file",
        json!({"path": "notes.txt", "content": "gone"}),
    )));
    server.push(Reply::Sse(chat_raw_call(
        "c2",
        "Write-File",
        "{'path': 'notes.txt', 'content': 'gone',}",
    )));
    server.push(Reply::Sse(chat_text(&["Planned."])));
    let mut agent = chat_agent(&server, &["--permissions", "yolo"]);
    let dir = workspace("forgiving-plan");
    let session = session(&mut agent, &dir);
    prelude::ok(
        &mut agent,
        "session/set_mode",
        json!({"sessionId": session, "modeId": "plan"}),
    );
    let turn = prompt(&mut agent, &session, "change it");
    assert_eq!(turn.stop_reason(), "end_turn", "{}", turn.dump());
    let calls = tool_calls(&turn);
    assert_eq!(calls.len(), 2, "{}", turn.dump());
    let first = calls[0]["toolCallId"].as_str().unwrap();
    assert_eq!(turn.final_status(first), "failed");
    assert!(
        turn.final_text(first).contains("plan mode"),
        "{}",
        turn.dump()
    );
    // Another spelling never reaches a tool plan mode does not offer.
    assert_eq!(turn.final_status("c2"), "failed");
    assert!(turn
        .final_text("c2")
        .contains("no tool named \"Write-File\""));
    assert_eq!(
        std::fs::read_to_string(dir.join("notes.txt")).unwrap(),
        "alpha\nbeta\n"
    );
}

#[test]
#[cfg_attr(windows, ignore = "sh command lines")]
fn a_deny_rule_applies_to_a_recovered_call() {
    let server = FakeServer::start();
    let call = json!({"name": "run_command", "arguments": {"command": "touch denied.txt"}});
    server.push(Reply::Sse(chat_text(&[&format!("```json\n{call}\n```")])));
    server.push(Reply::Sse(chat_raw_call(
        "c2",
        "default_api:run_command",
        "{\"command\": \"touch denied-2.txt\",}",
    )));
    server.push(Reply::Sse(chat_text(&["Stopped."])));
    let dir = workspace("forgiving-deny");
    let config = in_process::openai_config_with(
        &temp_dir("forgiving-deny-config"),
        &server.base_url(),
        "sk-test",
        json!({"permissions": {"rules": [
            {"tool": "run_command", "command": "touch *", "decision": "deny"}
        ]}}),
    );
    let mut agent = in_process::acp(&[
        "--model",
        "test-model",
        "--permissions",
        "yolo",
        "--config",
        config.to_str().unwrap(),
    ]);
    agent.initialize();
    let session = session(&mut agent, &dir);
    let turn = prompt(&mut agent, &session, "make files");
    assert_eq!(turn.stop_reason(), "end_turn", "{}", turn.dump());
    let calls = tool_calls(&turn);
    assert_eq!(calls.len(), 2, "{}", turn.dump());
    assert_eq!(
        calls[1]["rawInput"],
        json!({"command": "touch denied-2.txt"})
    );
    for call in calls {
        let id = call["toolCallId"].as_str().unwrap();
        assert_eq!(turn.final_status(id), "failed", "{}", turn.dump());
        assert!(
            turn.final_text(id).contains("permission rule"),
            "{}",
            turn.dump()
        );
    }
    assert!(!dir.join("denied.txt").exists() && !dir.join("denied-2.txt").exists());
    assert_eq!(
        updates_text(&turn.messages, "agent_message_chunk"),
        "Stopped."
    );
}

#[test]
fn anthropic_repairs_and_text_calls() {
    let server = FakeServer::start();
    let mut first = vec![anthropic_start(10, 0)];
    first.extend(anthropic_tool_use(
        0,
        "toolu_1",
        "Read_File",
        &["{'path': ", "'notes.txt'}"],
    ));
    first.extend(anthropic_end("tool_use", 5));
    server.push(Reply::Sse(first));
    let mut second = vec![anthropic_start(10, 0)];
    second.extend(anthropic_text(
        0,
        &[
            "On it.\n<tool_",
            "call>{\"name\": \"read_file\", \"arguments\": {\"path\": \"notes.txt\"}}</tool_call>",
        ],
    ));
    second.extend(anthropic_end("end_turn", 5));
    server.push(Reply::Sse(second));
    server.push(Reply::Sse(anthropic_answer("Done.", "end_turn")));
    let mut agent = config_agent(
        json!({
            "providers": {"claude": {"kind": "anthropic",
                                     "base_url": format!("http://{}", server.address()),
                                     "api_key_env": "FAKE_ANTHROPIC_KEY"}},
            "models": {"claude/claude-fake": {"context_window": 200000, "max_output_tokens": 1000}},
        }),
        ("FAKE_ANTHROPIC_KEY", "sk-ant-fake"),
    );
    let dir = workspace("forgiving-anthropic");
    let session = session(&mut agent, &dir);
    let turn = prompt(&mut agent, &session, "read it");
    assert_eq!(turn.stop_reason(), "end_turn", "{}", turn.dump());
    assert_eq!(
        turn.tool_call("toolu_1")["rawInput"],
        json!({"path": "notes.txt"})
    );
    assert_eq!(turn.final_status("toolu_1"), "completed");
    assert_eq!(
        updates_text(&turn.messages, "agent_message_chunk"),
        "On it.\nDone."
    );
    let requests = server.wait_requests(3, WAIT);
    let sent = requests[1].body["messages"].as_array().unwrap();
    assert_eq!(
        sent[1]["content"][0],
        json!({"type": "tool_use", "id": "toolu_1", "name": "read_file", "input": {"path": "notes.txt"}})
    );
    let result = sent[2]["content"][0]["content"].as_str().unwrap();
    assert!(
        result.ends_with(
            "(arguments repaired: tool name \"Read_File\" read as read_file, single quotes)"
        ),
        "{result}"
    );
    let sent = requests[2].body["messages"].as_array().unwrap();
    let assistant = &sent[sent.len() - 2]["content"];
    assert_eq!(assistant[0], json!({"type": "text", "text": "On it."}));
    assert_eq!(assistant[1]["type"], "tool_use");
    assert_eq!(assistant[1]["input"], json!({"path": "notes.txt"}));
    assert_eq!(sent.last().unwrap()["content"][0]["type"], "tool_result");
}

#[test]
fn responses_repairs_and_text_calls() {
    let server = FakeServer::start();
    let mut first = vec![responses_created()];
    first.extend(responses_function_call(
        0,
        "fc_1",
        "call_1",
        "read_file",
        &["\"{\\\"path\\\": ", "\\\"notes.txt\\\"}\""],
    ));
    first.push(responses_completed(responses_usage(10, 0, 5, 0)));
    server.push(Reply::Sse(first));
    let mut second = vec![responses_created()];
    second.extend(responses_message(
        0,
        "msg_1",
        &["[TOOL_CALLS][{\"name\": \"read_file\", \"arguments\": {\"path\": \"notes.txt\"}}]"],
    ));
    second.push(responses_completed(responses_usage(10, 0, 5, 0)));
    server.push(Reply::Sse(second));
    server.push(Reply::Sse(responses_answer("Done.")));
    let mut agent = config_agent(
        json!({
            "providers": {"r": {"kind": "responses", "base_url": server.base_url(),
                                "api_key_env": "FAKE_RESPONSES_KEY"}},
            "models": {"r/gpt-fake": {"context_window": 400000, "max_output_tokens": 1000}},
        }),
        ("FAKE_RESPONSES_KEY", "sk-resp"),
    );
    let dir = workspace("forgiving-responses");
    let session = session(&mut agent, &dir);
    let turn = prompt(&mut agent, &session, "read it");
    assert_eq!(turn.stop_reason(), "end_turn", "{}", turn.dump());
    assert_eq!(
        turn.tool_call("call_1")["rawInput"],
        json!({"path": "notes.txt"})
    );
    assert_eq!(turn.final_status("call_1"), "completed");
    assert_eq!(tool_calls(&turn).len(), 2, "{}", turn.dump());
    assert_eq!(updates_text(&turn.messages, "agent_message_chunk"), "Done.");
    let requests = server.wait_requests(3, WAIT);
    let input = requests[2].body["input"].as_array().unwrap();
    let call = input
        .iter()
        .rfind(|i| i["type"] == "function_call")
        .expect("the recovered call goes back as a function call");
    assert_eq!(call["name"], "read_file");
    assert_eq!(call["arguments"], "{\"path\":\"notes.txt\"}");
    let output = input.last().unwrap();
    assert_eq!(output["type"], "function_call_output");
    assert_eq!(output["call_id"], call["call_id"]);
    assert!(
        !input.iter().any(|i| i.to_string().contains("TOOL_CALLS")),
        "{input:#?}"
    );
}

#[test]
fn a_json_answer_that_is_not_a_call_is_shown_whole() {
    let server = FakeServer::start();
    let answer = "{\"name\": \"release\", \"arguments\": {\"version\": \"1.2\"}}";
    server.push(Reply::Sse(chat_text(&["{\"name\": ", &answer[9..]])));
    let held = "Done. [TOOL_CALLS] is how Mistral marks a call.";
    server.push(Reply::Sse(chat_text(&[held])));
    let mut agent = chat_agent(&server, &["--permissions", "yolo"]);
    let dir = workspace("forgiving-json-answer");
    let session = session(&mut agent, &dir);
    let turn = prompt(&mut agent, &session, "as JSON");
    assert_eq!(turn.stop_reason(), "end_turn", "{}", turn.dump());
    assert!(tool_calls(&turn).is_empty(), "{}", turn.dump());
    assert_eq!(updates_text(&turn.messages, "agent_message_chunk"), answer);
    let turn = prompt(&mut agent, &session, "and?");
    assert_eq!(updates_text(&turn.messages, "agent_message_chunk"), held);
    assert_eq!(server.requests().len(), 2);
}

#[test]
fn thousands_of_tags_get_a_bounded_answer() {
    let server = FakeServer::start();
    let tag = "<tool_call>{\"name\": \"write_file\", \"arguments\": {\"path\": \"t.txt\", \"content\": \"x\"}}</tool_call>";
    // Seventeen calls (one past the cap), then ten thousand.
    server.push(Reply::Sse(chat_text(&[&tag.repeat(17)])));
    let many = tag.repeat(10_000);
    let pieces: Vec<&str> = (0..many.len())
        .step_by(64 * 1024)
        .map(|at| &many[at..(at + 64 * 1024).min(many.len())])
        .collect();
    server.push(Reply::Sse(chat_text(&pieces)));
    let mut agent = chat_agent(&server, &["--permissions", "yolo"]);
    let dir = workspace("forgiving-many");
    let session = session(&mut agent, &dir);
    let turn = prompt(&mut agent, &session, "go");
    assert_eq!(turn.stop_reason(), "end_turn", "{}", turn.dump());
    assert!(tool_calls(&turn).is_empty());
    assert_eq!(
        updates_text(&turn.messages, "agent_message_chunk"),
        tag.repeat(17)
    );
    let turn = prompt(&mut agent, &session, "again");
    assert_eq!(turn.stop_reason(), "end_turn", "{}", turn.dump());
    assert!(tool_calls(&turn).is_empty());
    assert_eq!(
        updates_text(&turn.messages, "agent_message_chunk").len(),
        many.len()
    );
    assert!(!dir.join("t.txt").exists());
}

#[test]
fn a_refused_call_does_not_refuse_another_with_the_same_id() {
    let server = FakeServer::start();
    server.push(Reply::Sse(vec![
        chunk_role(),
        chunk_tool_call(0, Some("dup"), Some("read_file"), "{\"path\": "),
        chunk_tool_call(
            1,
            Some("dup"),
            Some("write_file"),
            "{\"path\": \"made.txt\", \"content\": \"ok\",}",
        ),
        chunk_finish("tool_calls"),
        chunk_usage(10, 5),
        done(),
    ]));
    server.push(Reply::Sse(chat_text(&["Done."])));
    let mut agent = chat_agent(&server, &["--permissions", "yolo"]);
    let dir = workspace("forgiving-dup");
    let session = session(&mut agent, &dir);
    let turn = prompt(&mut agent, &session, "go");
    assert_eq!(turn.stop_reason(), "end_turn", "{}", turn.dump());
    assert_eq!(std::fs::read_to_string(dir.join("made.txt")).unwrap(), "ok");
    let requests = server.wait_requests(2, WAIT);
    let sent = requests[1].body["messages"].as_array().unwrap();
    let results: Vec<&str> = sent
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| m["content"].as_str().unwrap())
        .collect();
    assert_eq!(results.len(), 2, "{sent:#?}");
    assert!(results[0].contains("not valid JSON"), "{}", results[0]);
    assert!(
        results[1].ends_with("(arguments repaired: trailing comma)"),
        "{}",
        results[1]
    );
}

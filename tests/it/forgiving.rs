//! Tool calls as mid-size and local models write them: arguments that are
//! almost JSON and names with a prefix or another case are repaired; what
//! cannot be repaired fails the call, not the turn.

use crate::support::fake_openai::{
    chat_text, chunk_finish, chunk_role, chunk_tool_call, chunk_usage, done,
};
use crate::support::prelude::{self, WAIT};
use crate::support::{run_prompt, temp_dir, write_file, Agent, FakeServer, Reply, Step, Turn};
use serde_json::json;
use std::path::Path;

fn chat_agent(server: &FakeServer, extra: &[&str]) -> Agent {
    let mut args = vec!["acp", "--model", "test-model"];
    args.extend_from_slice(extra);
    let base = server.base_url();
    let mut agent = Agent::spawn(
        &args,
        &[("OPENAI_BASE_URL", &base), ("OPENAI_API_KEY", "sk-test")],
    );
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

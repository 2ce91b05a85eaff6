//! Tool calls streamed by a Chat Completions server (the fake OpenAI
//! server): tool errors and malformed arguments go back to the model,
//! parallel calls run in order, and the model hears about declined calls
//! and about every call of a cancelled turn.

use super::{
    announced_at, assert_group_gone, finished_at, initialize, permissions, read_pid, Space, WAIT,
};
use crate::support::client::no_requests;
use crate::support::fake_openai::{
    chat_text, chat_tool_calls, chunk_finish, chunk_role, chunk_tool_call, chunk_usage, done,
};
use crate::support::{run_prompt, Agent, Answer, Exchange, FakeServer, Reply};
use serde_json::{json, Value};

/// Starts the agent against `server` with `args` after `acp`.
fn start_chat(space: &Space, server: &FakeServer, args: &[&str]) -> (Agent, String) {
    let base = server.base_url();
    let tmp = space.tmpdir();
    let mut all = vec!["acp", "--model", "test-model"];
    all.extend_from_slice(args);
    let mut agent = Agent::spawn(
        &all,
        &[
            ("OPENAI_BASE_URL", base.as_str()),
            ("OPENAI_API_KEY", "sk-test"),
            ("TMPDIR", tmp.as_str()),
        ],
    );
    initialize(&mut agent, json!({}));
    let session = agent.new_session(&space.ws);
    (agent, session)
}

// ---------------------------------------------------------------------------
// Tool failures
// ---------------------------------------------------------------------------

#[test]
fn chat_completions_tool_errors_go_back_to_the_model() {
    let space = Space::new("tools-chat-errors");
    space.write("src/main.rs", "fn main() {}\n");
    let server = FakeServer::start();
    server.push(Reply::Sse(vec![
        chunk_role(),
        // One call streamed in pieces, as real servers do.
        chunk_tool_call(0, Some("call_x"), Some("read_file"), ""),
        chunk_tool_call(0, None, None, "{\"path\":\"src/"),
        chunk_tool_call(0, None, None, "main.rs\"}"),
        chunk_tool_call(1, Some("call_y"), Some("fly"), "{}"),
        chunk_tool_call(2, Some("call_z"), Some("read_file"), "{\"path\":"),
        chunk_finish("tool_calls"),
        chunk_usage(10, 5),
        done(),
    ]));
    server.push(Reply::Sse(chat_text(&["Handled."])));
    let (mut agent, session) = start_chat(&space, &server, &["--permissions", "yolo"]);
    let turn = run_prompt(&mut agent, &session, "go", WAIT, no_requests);
    assert_eq!(turn.stop_reason(), "end_turn", "{}", turn.dump());
    assert_eq!(turn.text(), "Handled.");
    turn.assert_every_tool_call_finished();
    assert_eq!(turn.tool_call_ids(), ["call_x", "call_y", "call_z"]);
    assert_eq!(
        turn.tool_call("call_x")["rawInput"],
        json!({"path": "src/main.rs"})
    );
    assert_eq!(turn.final_status("call_x"), "completed");
    assert_eq!(turn.final_status("call_y"), "failed");
    assert_eq!(turn.final_status("call_z"), "failed");

    let requests = server.wait_requests(2, WAIT);
    let messages = requests[1].body["messages"].as_array().unwrap().clone();
    let tool_messages: Vec<&Value> = messages.iter().filter(|m| m["role"] == "tool").collect();
    assert_eq!(tool_messages.len(), 3, "{messages:?}");
    assert_eq!(tool_messages[0]["tool_call_id"], "call_x");
    let read = tool_messages[0]["content"].as_str().unwrap();
    assert!(read.contains("     1\tfn main() {}"), "{read}");
    assert_eq!(tool_messages[1]["tool_call_id"], "call_y");
    let unknown = tool_messages[1]["content"].as_str().unwrap();
    assert!(unknown.contains("no tool named \"fly\""), "{unknown}");
    assert!(
        unknown.contains("read_file"),
        "names the real tools: {unknown}"
    );
    assert_eq!(tool_messages[2]["tool_call_id"], "call_z");
    let malformed = tool_messages[2]["content"].as_str().unwrap();
    assert!(malformed.contains("not valid JSON"), "{malformed}");
    // The malformed arguments go back exactly as the model sent them.
    let assistant = messages
        .iter()
        .find(|m| m["role"] == "assistant")
        .expect("no assistant message");
    assert_eq!(
        assistant["tool_calls"][2]["function"]["arguments"],
        "{\"path\":"
    );
    assert_eq!(
        assistant["tool_calls"][0]["function"]["arguments"],
        "{\"path\":\"src/main.rs\"}"
    );
}

// ---------------------------------------------------------------------------
// Tool calls end to end
// ---------------------------------------------------------------------------

#[test]
#[cfg_attr(windows, ignore = "expects / in shown paths")]
fn chat_completions_parallel_tool_calls_run_in_order_and_go_back() {
    let space = Space::new("tools-chat");
    let server = FakeServer::start();
    let write_args = json!({"path": "notes/todo.txt", "content": "first\n"});
    let read_args = json!({"path": "notes/todo.txt"});
    server.push(Reply::Sse(chat_tool_calls(&[
        ("write_file", write_args.clone()),
        ("read_file", read_args.clone()),
    ])));
    server.push(Reply::Sse(chat_text(&["All ", "done."])));
    let (mut agent, session) = start_chat(&space, &server, &["--permissions", "yolo"]);
    let turn = run_prompt(&mut agent, &session, "Write and read", WAIT, no_requests);
    assert_eq!(turn.stop_reason(), "end_turn", "{}", turn.dump());
    assert_eq!(turn.text(), "All done.");
    turn.assert_every_tool_call_finished();
    assert_eq!(turn.tool_call_ids(), ["call_1", "call_2"]);
    // In order: the write ended before the read began, and the read saw it.
    assert!(finished_at(&turn, "call_1") < announced_at(&turn, "call_2"));
    assert_eq!(turn.final_status("call_1"), "completed");
    assert_eq!(turn.final_status("call_2"), "completed");
    assert!(turn.final_text("call_2").contains("     1\tfirst"));
    assert_eq!(space.read("notes/todo.txt"), "first\n");

    let requests = server.wait_requests(2, WAIT);
    let names: Vec<&str> = requests[0].body["tools"]
        .as_array()
        .expect("the first request offers tools")
        .iter()
        .filter_map(|t| t["function"]["name"].as_str())
        .collect();
    for name in [
        "read_file",
        "write_file",
        "edit_file",
        "run_command",
        "todo_write",
    ] {
        assert!(names.contains(&name), "{name} not offered: {names:?}");
    }
    let messages = requests[1].body["messages"].as_array().unwrap();
    assert_eq!(messages.len(), 5, "{messages:?}");
    assert_eq!(messages[0]["role"], "system");
    assert_eq!(
        messages[1],
        json!({"role": "user", "content": "Write and read"})
    );
    let assistant = &messages[2];
    assert_eq!(assistant["role"], "assistant");
    let calls = assistant["tool_calls"].as_array().expect("tool_calls");
    assert_eq!(calls.len(), 2, "{assistant}");
    for (call, (id, name, args)) in calls.iter().zip([
        ("call_1", "write_file", &write_args),
        ("call_2", "read_file", &read_args),
    ]) {
        assert_eq!(call["id"], id);
        assert_eq!(call["type"], "function");
        assert_eq!(call["function"]["name"], name);
        let sent = call["function"]["arguments"]
            .as_str()
            .expect("arguments go back as a string");
        assert_eq!(&serde_json::from_str::<Value>(sent).unwrap(), args);
    }
    assert_eq!(messages[3]["role"], "tool");
    assert_eq!(messages[3]["tool_call_id"], "call_1");
    assert!(messages[3]["content"]
        .as_str()
        .unwrap()
        .contains("notes/todo.txt"));
    assert_eq!(messages[4]["role"], "tool");
    assert_eq!(messages[4]["tool_call_id"], "call_2");
    assert!(messages[4]["content"]
        .as_str()
        .unwrap()
        .contains("     1\tfirst"));
}

// ---------------------------------------------------------------------------
// What the model hears about declined and cancelled calls
// ---------------------------------------------------------------------------

#[test]
fn chat_completions_a_declined_call_tells_the_model() {
    let space = Space::new("tools-chat-declined");
    let server = FakeServer::start();
    server.push(Reply::Sse(chat_tool_calls(&[(
        "run_command",
        json!({"command": "touch nope"}),
    )])));
    server.push(Reply::Sse(chat_text(&["Understood."])));
    let (mut agent, session) = start_chat(&space, &server, &["--permissions", "ask"]);
    let turn = run_prompt(
        &mut agent,
        &session,
        "go",
        WAIT,
        permissions(vec![("call_1", Answer::select("reject_once"))]),
    );
    // The rejection ends the turn: no second model request in it.
    assert_eq!(turn.stop_reason(), "end_turn", "{}", turn.dump());
    assert_eq!(turn.final_status("call_1"), "failed");
    assert!(turn.text().contains("You declined"), "{}", turn.dump());
    assert!(!space.exists("nope"));
    assert_eq!(server.requests().len(), 1);
    // The next prompt's request tells the model what happened.
    let turn = run_prompt(&mut agent, &session, "ok, so?", WAIT, permissions(vec![]));
    assert_eq!(turn.stop_reason(), "end_turn", "{}", turn.dump());
    let requests = server.wait_requests(2, WAIT);
    let messages = requests[1].body["messages"].as_array().unwrap();
    let tool = messages
        .iter()
        .find(|m| m["role"] == "tool")
        .expect("no tool message");
    assert_eq!(tool["tool_call_id"], "call_1");
    let content = tool["content"].as_str().unwrap();
    assert!(content.contains("declined"), "{content}");
}

/// A rejection with the user's reason (`_meta.spindle.feedback` on the
/// answer) lets the turn go on, and the model reads the reason.
#[test]
fn chat_completions_a_rejection_with_feedback_goes_on() {
    let space = Space::new("tools-chat-feedback");
    let server = FakeServer::start();
    server.push(Reply::Sse(chat_tool_calls(&[(
        "run_command",
        json!({"command": "rm -rf build"}),
    )])));
    server.push(Reply::Sse(chat_text(&["Using cargo clean."])));
    let (mut agent, session) = start_chat(&space, &server, &["--permissions", "ask"]);
    let answer = Answer::Result(json!({
        "outcome": {"outcome": "selected", "optionId": "reject_once"},
        "_meta": {"spindle": {"feedback": "use cargo clean instead"}},
    }));
    let turn = run_prompt(
        &mut agent,
        &session,
        "clean up",
        WAIT,
        permissions(vec![("call_1", answer)]),
    );
    assert_eq!(turn.stop_reason(), "end_turn", "{}", turn.dump());
    assert_eq!(turn.text(), "Using cargo clean.");
    let requests = server.wait_requests(2, WAIT);
    let messages = requests[1].body["messages"].as_array().unwrap();
    let tool = messages.iter().find(|m| m["role"] == "tool").unwrap();
    let content = tool["content"].as_str().unwrap();
    assert!(content.contains("use cargo clean instead"), "{content}");
    // The approval showed the exact command line and folder.
    let asked = turn.requests("session/request_permission");
    let shown = asked[0]["params"]["toolCall"]["content"][0]["content"]["text"]
        .as_str()
        .unwrap_or_default();
    assert!(shown.contains("rm -rf build"), "{shown}");
    assert!(shown.contains(space.ws.to_str().unwrap()), "{shown}");
}

#[test]
#[cfg_attr(windows, ignore = "sh command lines")]
fn chat_completions_every_call_of_a_cancelled_turn_is_answered_next_time() {
    let space = Space::new("tools-chat-cancel");
    let server = FakeServer::start();
    server.push(Reply::Sse(chat_tool_calls(&[
        (
            "run_command",
            json!({"command": "echo $$ > pidfile; sleep 60"}),
        ),
        ("read_file", json!({"path": "pidfile"})),
    ])));
    server.push(Reply::Sse(chat_text(&["Fine."])));
    let (mut agent, session) = start_chat(&space, &server, &["--permissions", "yolo"]);
    let pidfile = space.path("pidfile");
    let mut answer = no_requests;
    let mut exchange = Exchange::prompt(&mut agent, &session, "go");
    let started = exchange.until(&mut agent, WAIT, &mut answer, &mut |_: &Exchange| {
        read_pid(&pidfile).is_some()
    });
    assert!(started, "the prompt ended before the command started");
    let pid = read_pid(&pidfile).unwrap();
    agent.notify("session/cancel", json!({"sessionId": session}));
    let turn = exchange.finish(&mut agent, WAIT, &mut answer);
    assert_eq!(turn.stop_reason(), "cancelled", "{}", turn.dump());
    turn.assert_every_tool_call_finished();
    assert_group_gone(pid);

    let turn = run_prompt(&mut agent, &session, "again", WAIT, no_requests);
    assert_eq!(turn.stop_reason(), "end_turn", "{}", turn.dump());
    let requests = server.wait_requests(2, WAIT);
    let messages = requests[1].body["messages"].as_array().unwrap();
    let roles: Vec<&str> = messages
        .iter()
        .map(|m| m["role"].as_str().unwrap_or_default())
        .collect();
    assert_eq!(
        roles,
        ["system", "user", "assistant", "tool", "tool", "user"],
        "{messages:?}"
    );
    let ids: Vec<&Value> = messages[2]["tool_calls"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| &c["id"])
        .collect();
    assert_eq!(ids, [&json!("call_1"), &json!("call_2")]);
    assert_eq!(messages[3]["tool_call_id"], "call_1");
    assert!(messages[3]["content"]
        .as_str()
        .unwrap()
        .contains("Cancelled"));
    assert_eq!(messages[4]["tool_call_id"], "call_2");
    assert!(messages[4]["content"].as_str().unwrap().contains("Not run"));
    assert_eq!(messages[5]["content"], "again");
}

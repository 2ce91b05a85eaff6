//! Replay and continuation in another process: a live turn replays the
//! same on `session/load`, and `session/resume` (and load) in a new
//! process continue the conversation exactly as the same process would.

use super::{
    check_tool_calls, conversation, finish, ids_of, kind, list_all, listed, live_history, load,
    looks_like_rfc3339, prompt_ok, resume, texts_of, without_user_chunks, Space, WAIT,
};
use crate::support::fake_openai::{
    chat_text, chunk_content, chunk_finish, chunk_reasoning, chunk_role, chunk_tool_call,
    chunk_usage, done,
};
use crate::support::store::{assert_same_updates, merge_chunks, session_updates, Db};
use crate::support::{write_file, FakeServer, Reply};
use serde_json::{json, Value};

#[test]
fn a_live_turn_replays_the_same_in_another_process() {
    let space = Space::new("replay");
    let script = json!({"replies": [
        {
            "thought": "Plan first, then write the file.",
            "text": "I will write the notes. ",
            "tool_calls": [
                {"id": "plan_1", "name": "todo_write", "arguments": {"todos": [
                    {"content": "Write notes.txt", "status": "in_progress", "priority": "high"},
                    {"content": "Check it", "status": "pending"}
                ]}},
                {"id": "write_1", "name": "write_file",
                 "arguments": {"path": "notes.txt", "content": "alpha\nbeta\n"}}
            ]
        },
        {
            "text": "Reading it back.",
            "tool_calls": [
                {"id": "read_1", "name": "read_file", "arguments": {"path": "notes.txt"}},
                {"id": "run_1", "name": "run_command",
                 "arguments": {"command": "echo counted; wc -l < notes.txt"}}
            ]
        },
        {
            "tool_calls": [
                {"id": "plan_2", "name": "todo_write", "arguments": {"todos": [
                    {"content": "Write notes.txt", "status": "completed", "priority": "high"},
                    {"content": "Check it", "status": "completed"}
                ]}}
            ]
        },
        {"thought": "Both steps are done.", "text": "Done: notes.txt has two lines."}
    ], "fallback": {"text": "Again."}});
    let mut a = space.scripted(&script);
    let session = a.new_session(&space.ws);
    let blocks = json!([
        {"type": "text", "text": "Write notes\nthen check them"},
        {"type": "resource_link", "uri": format!("file://{}/notes.txt", space.ws()), "name": "notes.txt"}
    ]);
    let id = a.request(
        "session/prompt",
        json!({"sessionId": session, "prompt": blocks}),
    );
    let (response, others) = a.response(&id, WAIT);
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    let live = live_history(&session_updates(&others, &session));

    // The live turn shows what the replay must reproduce.
    assert_eq!(kind(&live[0]), "session_info_update", "{live:#?}");
    assert_eq!(live[0]["title"], "Write notes");
    let finals = check_tool_calls(&live);
    for id in ["plan_1", "write_1", "read_1", "run_1", "plan_2"] {
        assert_eq!(
            finals.get(id).map(String::as_str),
            Some("completed"),
            "{live:#?}"
        );
    }
    assert!(
        live.iter().any(|u| u["content"]
            .as_array()
            .is_some_and(|c| c.iter().any(|b| b["type"] == "diff"))),
        "no diff in the live turn: {live:#?}"
    );
    assert!(
        live.iter()
            .any(|u| kind(u) == "tool_call" && u["locations"].is_array()),
        "no locations in the live turn: {live:#?}"
    );
    assert_eq!(live.iter().filter(|u| kind(u) == "plan").count(), 2);
    assert_eq!(
        texts_of(&live, "agent_message_chunk").concat(),
        "I will write the notes. Reading it back.Done: notes.txt has two lines."
    );

    // Process B, same database: list, then load.
    let mut b = space.reader();
    let entry = listed(&mut b, &session).expect("B does not list the session");
    assert_eq!(entry["title"], "Write notes", "{entry}");
    assert_eq!(entry["cwd"], space.ws(), "{entry}");
    let updated_at = entry["updatedAt"].as_str().unwrap_or_default();
    assert!(looks_like_rfc3339(updated_at), "{entry}");
    assert!(
        updated_at >= live[0]["updatedAt"].as_str().unwrap_or_default(),
        "updatedAt {updated_at} is older than the title update {}",
        live[0]
    );

    let replay = load(&mut b, &session, space.ws());
    // The user's prompt: one chunk per block, first, as sent.
    let users: Vec<&Value> = replay
        .iter()
        .filter(|u| kind(u) == "user_message_chunk")
        .collect();
    assert_eq!(users.len(), 2, "{replay:#?}");
    assert_eq!(kind(&replay[0]), "user_message_chunk");
    assert_eq!(kind(&replay[1]), "user_message_chunk");
    assert_eq!(users[0]["content"], blocks[0]);
    assert_eq!(users[1]["content"], blocks[1]);
    // The rest: exactly what the editor saw live, chunks merged.
    assert_same_updates(
        &merge_chunks(&live),
        &merge_chunks(&without_user_chunks(&replay)),
        "live turn vs replay in another process",
    );

    // A load in the process where the session is live attaches to it and
    // replays the same; the session is not duplicated.
    let again = load(&mut a, &session, space.ws());
    assert_same_updates(&replay, &again, "replay in B vs replay in A");
    let (all, _) = list_all(&mut a, None);
    assert_eq!(ids_of(&all), vec![session.clone()]);
    // And it still takes prompts, without a second title.
    let more = prompt_ok(&mut a, &session, "more");
    assert_eq!(texts_of(&more, "agent_message_chunk"), ["Again."]);
    assert!(!more.iter().any(|u| kind(u) == "session_info_update"));
    finish(a);
    finish(b);
    space.db.assert_sound();
}

const FIRST_PROMPT: &str = "What does data.txt say?";

const FOLLOW_UP: &str = "Thanks. Anything else?";

/// Queues the replies of the first turn (a tool round with reasoning, then
/// text) and of the follow-up.
fn queue_conversation(server: &FakeServer) {
    server.push(Reply::Sse(vec![
        chunk_role(),
        chunk_reasoning("I should read "),
        chunk_reasoning("the file."),
        chunk_content("Reading."),
        chunk_tool_call(
            0,
            Some("call_read"),
            Some("read_file"),
            r#"{"path":"data.txt"}"#,
        ),
        chunk_tool_call(
            1,
            Some("call_plan"),
            Some("todo_write"),
            r#"{"todos":[{"content":"Answer","status":"in_progress"}]}"#,
        ),
        chunk_finish("tool_calls"),
        chunk_usage(10, 5),
        done(),
    ]));
    server.push(Reply::Sse(chat_text(&["The file ", "says hello."])));
    server.push(Reply::Sse(chat_text(&["Nothing else."])));
}

#[test]
fn resume_and_load_continue_the_conversation_as_the_same_process_would() {
    let space = Space::new("resume");
    write_file(&space.ws, "data.txt", "hello from data\n");

    // Same process: two prompts.
    let same_db = Db::new(space.base.join("same.db"));
    let server = FakeServer::start();
    queue_conversation(&server);
    let mut agent = space.openai_on(&same_db, &server);
    let session = agent.new_session(&space.ws);
    prompt_ok(&mut agent, &session, FIRST_PROMPT);
    let updates = prompt_ok(&mut agent, &session, FOLLOW_UP);
    assert!(
        !updates.iter().any(|u| kind(u) == "session_info_update"),
        "the title is sent once: {updates:#?}"
    );
    finish(agent);
    let expected = server.wait_requests(3, WAIT)[2].body.clone();
    let messages = conversation(&expected);
    assert_eq!(messages.len(), 6, "{messages:#?}");
    assert_eq!(
        messages[0],
        json!({"role": "user", "content": FIRST_PROMPT})
    );
    assert_eq!(messages[1]["role"], "assistant");
    assert_eq!(messages[1]["reasoning_content"], "I should read the file.");
    assert_eq!(messages[1]["tool_calls"][0]["id"], "call_read");
    assert_eq!(
        messages[1]["tool_calls"][0]["function"]["arguments"],
        r#"{"path":"data.txt"}"#
    );
    assert_eq!(messages[1]["tool_calls"][1]["id"], "call_plan");
    assert_eq!(messages[2]["tool_call_id"], "call_read");
    assert!(
        messages[2]["content"]
            .as_str()
            .unwrap_or_default()
            .contains("hello from data"),
        "{messages:#?}"
    );
    assert_eq!(messages[3]["tool_call_id"], "call_plan");
    assert_eq!(
        messages[4],
        json!({"role": "assistant", "content": "The file says hello."})
    );
    assert_eq!(messages[5], json!({"role": "user", "content": FOLLOW_UP}));

    for method in ["session/resume", "session/load"] {
        let db = Db::new(space.base.join(format!("{}.db", method.replace('/', "-"))));
        let server = FakeServer::start();
        queue_conversation(&server);
        let mut first = space.openai_on(&db, &server);
        let session = first.new_session(&space.ws);
        prompt_ok(&mut first, &session, FIRST_PROMPT);
        finish(first);

        let mut second = space.openai_on(&db, &server);
        if method == "session/resume" {
            resume(&mut second, &session, space.ws());
        } else {
            let replay = load(&mut second, &session, space.ws());
            assert!(!replay.is_empty());
        }
        let updates = prompt_ok(&mut second, &session, FOLLOW_UP);
        assert!(
            !updates.iter().any(|u| kind(u) == "session_info_update"),
            "{method}: the title was already set: {updates:#?}"
        );
        let body = server.wait_requests(3, WAIT)[2].body.clone();
        assert_eq!(
            conversation(&body),
            messages,
            "{method}: the follow-up's conversation differs from the same-process one"
        );
        assert_eq!(
            body, expected,
            "{method}: the follow-up request differs from the same-process one"
        );
        finish(second);
        db.assert_sound();
    }
}

/// A prompt of several blocks is one user message: replayed in another
/// process, its chunks share one `messageId` and carry the blocks in
/// order; the next prompt is another message.
#[test]
fn a_prompt_of_several_blocks_replays_as_one_user_message() {
    let space = Space::new("replay-blocks");
    write_file(&space.ws, "notes.txt", "alpha\n");
    let mut agent = space.scripted(&json!({"fallback": {"text": "Read both."}}));
    let session = agent.new_session(&space.ws);
    let blocks = json!([
        {"type": "text", "text": "First part."},
        {"type": "text", "text": "Second part."},
        {"type": "resource_link", "uri": format!("file://{}/notes.txt", space.ws()), "name": "notes.txt"}
    ]);
    let id = agent.request(
        "session/prompt",
        json!({"sessionId": session, "prompt": blocks}),
    );
    let (answer, _) = agent.response(&id, WAIT);
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    prompt_ok(&mut agent, &session, "Another prompt.");
    finish(agent);

    let mut other = space.reader();
    let replay = load(&mut other, &session, space.ws());
    finish(other);
    let user: Vec<&Value> = replay
        .iter()
        .filter(|u| kind(u) == "user_message_chunk")
        .collect();
    let contents: Vec<Value> = user.iter().map(|u| u["content"].clone()).collect();
    assert_eq!(
        contents,
        [
            blocks[0].clone(),
            blocks[1].clone(),
            blocks[2].clone(),
            json!({"type": "text", "text": "Another prompt."}),
        ],
        "{replay:#?}"
    );
    let ids: Vec<&str> = user
        .iter()
        .map(|u| u["messageId"].as_str().expect("a messageId"))
        .collect();
    assert!(ids[..3].iter().all(|id| *id == ids[0]), "{ids:?}");
    assert_ne!(ids[3], ids[0], "{ids:?}");
}

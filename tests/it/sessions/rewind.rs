//! Rewind over the protocol (`_session/rewind_points`, `_session/rewind`)
//! through the real binary, against the fake model server: the points a
//! session lists, each mode, a dry run that changes nothing, a file the
//! user changed since refusing the whole rewind, the next model request
//! without the removed messages, the replay of a fresh process showing
//! the rewound conversation, bad inputs and a running turn.

use super::{call, err, load, ok, text_prompt, Space, WAIT};
use crate::support::fake_openai::{chat_text, chat_tool_calls, chunk_role};
use crate::support::{Agent, FakeServer, Reply, Step};
use serde_json::{json, Value};
use std::fs;

const INVALID_PARAMS: i64 = -32602;

/// Three prompts: the first writes `a.txt`; the second rewrites it,
/// creates `b.txt` and deletes `c.txt` (there before the session); the
/// third only talks.
fn three_turns(space: &Space, server: &FakeServer) -> (Agent, String) {
    fs::write(space.ws.join("c.txt"), "sea\n").unwrap();
    server.push(Reply::Sse(chat_tool_calls(&[(
        "write_file",
        json!({"path": "a.txt", "content": "one\n"}),
    )])));
    server.push(Reply::Sse(chat_text(&["Wrote a."])));
    server.push(Reply::Sse(chat_tool_calls(&[
        ("write_file", json!({"path": "a.txt", "content": "two\n"})),
        ("write_file", json!({"path": "b.txt", "content": "bee\n"})),
        ("delete_file", json!({"path": "c.txt"})),
    ])));
    server.push(Reply::Sse(chat_text(&["Changed them."])));
    server.push(Reply::Sse(chat_text(&["Just talking."])));
    let mut agent = space.openai(server);
    let session = agent.new_session(&space.ws);
    for text in ["make a", "edit a and make b", "just talk"] {
        let id = agent.request("session/prompt", text_prompt(&session, text));
        let (response, _) = agent.response(&id, WAIT);
        assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    }
    assert_eq!(space.read("a.txt"), "two\n");
    assert!(!space.ws.join("c.txt").exists());
    (agent, session)
}

fn points(agent: &mut Agent, session: &str) -> Vec<Value> {
    let result = ok(
        agent,
        "_session/rewind_points",
        json!({"sessionId": session}),
    );
    result["points"].as_array().expect("points").clone()
}

fn rewind(agent: &mut Agent, session: &str, message: &Value, mode: &str, dry: bool) -> Value {
    ok(
        agent,
        "_session/rewind",
        json!({"sessionId": session, "messageId": message, "mode": mode, "dryRun": dry}),
    )
}

fn actions(result: &Value) -> Vec<(String, String)> {
    let mut files: Vec<(String, String)> = result["files"]["files"]
        .as_array()
        .expect("files")
        .iter()
        .map(|f| {
            let path = f["path"].as_str().unwrap();
            let name = path.rsplit(['/', '\\']).next().unwrap().to_string();
            (name, f["action"].as_str().unwrap().to_string())
        })
        .collect();
    files.sort();
    files
}

impl Space {
    fn read(&self, name: &str) -> String {
        fs::read_to_string(self.ws.join(name)).unwrap_or_else(|e| panic!("{name}: {e}"))
    }
}

#[test]
fn points_are_listed_and_files_mode_puts_the_files_back() {
    let space = Space::new("rewind-files");
    let server = FakeServer::start();
    let (mut agent, session) = three_turns(&space, &server);

    let list = points(&mut agent, &session);
    let texts: Vec<&str> = list.iter().map(|p| p["text"].as_str().unwrap()).collect();
    assert_eq!(texts, ["make a", "edit a and make b", "just talk"]);
    for (index, point) in list.iter().enumerate() {
        assert_eq!(point["index"], index);
        assert!(point["messageId"].as_str().is_some_and(|id| !id.is_empty()));
        assert_eq!(point["canRewindFiles"], true, "{point}");
        assert_eq!(point["canRewindConversation"], true, "{point}");
    }
    assert_eq!(list[0]["filesChanged"], 3);
    assert_eq!(list[1]["filesChanged"], 3);
    assert_eq!(list[2]["filesChanged"], 0);

    // A dry run says what would happen and changes nothing.
    let dry = rewind(&mut agent, &session, &list[1]["messageId"], "files", true);
    assert_eq!(dry["dryRun"], true);
    assert_eq!(dry["files"]["canRewind"], true);
    let expected = vec![
        ("a.txt".to_string(), "restored".to_string()),
        ("b.txt".to_string(), "deleted".to_string()),
        ("c.txt".to_string(), "recreated".to_string()),
    ];
    assert_eq!(actions(&dry), expected, "{dry}");
    assert!(dry.get("conversation").is_none(), "{dry}");
    assert_eq!(space.read("a.txt"), "two\n");
    assert_eq!(space.read("b.txt"), "bee\n");
    assert!(!space.ws.join("c.txt").exists());

    let done = rewind(&mut agent, &session, &list[1]["messageId"], "files", false);
    assert_eq!(done["dryRun"], false);
    assert_eq!(actions(&done), expected, "{done}");
    assert_eq!(space.read("a.txt"), "one\n");
    assert!(!space.ws.join("b.txt").exists());
    assert_eq!(space.read("c.txt"), "sea\n");
    // The conversation is untouched; the changes put back are no longer
    // counted.
    let after = points(&mut agent, &session);
    assert_eq!(after.len(), 3);
    assert_eq!(after[1]["filesChanged"], 0);
    assert_eq!(after[0]["filesChanged"], 1);

    // The conversation stays, so the model is told what changed.
    server.push(Reply::Sse(chat_text(&["Noted."])));
    let id = agent.request("session/prompt", text_prompt(&session, "next"));
    agent.response(&id, WAIT);
    let sent = server.requests().pop().unwrap().body["messages"].to_string();
    assert!(sent.contains("rewound the workspace files"), "{sent}");
    assert!(
        sent.contains("b.txt: deleted") && sent.contains("c.txt: recreated"),
        "{sent}"
    );
    assert!(sent.contains("edit a and make b"), "{sent}");

    // Back to the start: the first turn's file goes too.
    let first = rewind(&mut agent, &session, &list[0]["messageId"], "files", false);
    let expected = vec![("a.txt".to_string(), "deleted".to_string())];
    assert_eq!(actions(&first), expected, "{first}");
    assert!(!space.ws.join("a.txt").exists());
}

#[test]
fn conversation_rewind_cuts_the_context_and_the_replay() {
    let space = Space::new("rewind-conversation");
    let server = FakeServer::start();
    let (mut agent, session) = three_turns(&space, &server);
    let list = points(&mut agent, &session);

    // Conversation only, at the last prompt: its two messages go, the
    // files stay.
    let dry = rewind(
        &mut agent,
        &session,
        &list[2]["messageId"],
        "conversation",
        true,
    );
    assert_eq!(
        dry["conversation"],
        json!({"rewound": false, "messagesDropped": 2})
    );
    assert!(dry.get("files").is_none());
    assert_eq!(
        points(&mut agent, &session).len(),
        3,
        "a dry run cuts nothing"
    );
    let cut = rewind(
        &mut agent,
        &session,
        &list[2]["messageId"],
        "conversation",
        false,
    );
    assert_eq!(
        cut["conversation"],
        json!({"rewound": true, "messagesDropped": 2})
    );
    assert_eq!(space.read("a.txt"), "two\n");
    assert_eq!(points(&mut agent, &session).len(), 2);

    // Both, at the second prompt.
    let both = rewind(&mut agent, &session, &list[1]["messageId"], "both", false);
    assert_eq!(both["conversation"]["rewound"], true, "{both}");
    assert!(
        both["conversation"]["messagesDropped"].as_i64().unwrap() >= 4,
        "{both}"
    );
    assert_eq!(
        both["files"]["files"].as_array().unwrap().len(),
        3,
        "{both}"
    );
    assert_eq!(space.read("a.txt"), "one\n");
    assert_eq!(space.read("c.txt"), "sea\n");
    let left = points(&mut agent, &session);
    assert_eq!(left.len(), 1);
    assert_eq!(left[0]["text"], "make a");

    // The next prompt continues from before the second one.
    server.push(Reply::Sse(chat_text(&["Again."])));
    let id = agent.request("session/prompt", text_prompt(&session, "again"));
    let (response, _) = agent.response(&id, WAIT);
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    let sent = server.requests().pop().unwrap().body["messages"].to_string();
    assert!(
        sent.contains("make a") && sent.contains("Wrote a."),
        "{sent}"
    );
    assert!(sent.contains("again"), "{sent}");
    for gone in [
        "edit a and make b",
        "Changed them.",
        "just talk",
        "Just talking.",
    ] {
        assert!(!sent.contains(gone), "{gone:?} is still sent: {sent}");
    }
    drop(agent);

    // A fresh process replays the rewound conversation.
    let mut reader = space.reader();
    let replay = load(&mut reader, &session, space.ws());
    let shown = replay
        .iter()
        .map(|u| u["content"]["text"].as_str().unwrap_or_default())
        .collect::<Vec<_>>()
        .join("|");
    assert!(
        shown.contains("make a") && shown.contains("again"),
        "{shown}"
    );
    for gone in [
        "edit a and make b",
        "Changed them.",
        "just talk",
        "Just talking.",
    ] {
        assert!(!shown.contains(gone), "{gone:?} is replayed: {shown}");
    }
    let ids: Vec<Value> = points(&mut reader, &session)
        .iter()
        .map(|p| p["text"].clone())
        .collect();
    assert_eq!(ids, [json!("make a"), json!("again")]);
}

#[test]
fn a_file_the_user_changed_refuses_the_whole_rewind() {
    let space = Space::new("rewind-conflict");
    let server = FakeServer::start();
    let (mut agent, session) = three_turns(&space, &server);
    let list = points(&mut agent, &session);
    fs::write(space.ws.join("b.txt"), "mine\n").unwrap();

    for dry in [true, false] {
        let error = err(
            &mut agent,
            "_session/rewind",
            json!({"sessionId": session, "messageId": list[1]["messageId"],
                   "mode": "both", "dryRun": dry}),
        );
        assert_eq!(error["data"]["code"], "files_conflict", "{error}");
        let message = error["message"].as_str().unwrap();
        assert!(
            message.contains("b.txt") && message.contains("changed since"),
            "{message}"
        );
        assert!(!message.contains("a.txt"), "{message}");
    }
    // Nothing changed: not the files, not the conversation.
    assert_eq!(space.read("b.txt"), "mine\n");
    assert_eq!(space.read("a.txt"), "two\n");
    assert!(!space.ws.join("c.txt").exists());
    assert_eq!(points(&mut agent, &session).len(), 3);
    // The conversation alone can still go back.
    let cut = rewind(
        &mut agent,
        &session,
        &list[1]["messageId"],
        "conversation",
        false,
    );
    assert_eq!(cut["conversation"]["rewound"], true);
    assert_eq!(space.read("b.txt"), "mine\n");
}

#[test]
fn bad_inputs_and_a_running_turn_are_refused() {
    let space = Space::new("rewind-bad");
    let server = FakeServer::start();
    let mut agent = space.spawn_openai(&space.db, &server);
    let init = agent.initialize();
    assert_eq!(init["_meta"]["rewind"]["supported"], true, "{init}");
    assert_eq!(init["_meta"]["steering"]["supported"], true, "{init}");
    let methods = &init["agentCapabilities"]["_meta"]["spindle"]["methods"];
    assert_eq!(methods["rewind"], "_session/rewind", "{init}");
    assert_eq!(methods["rewindPoints"], "_session/rewind_points", "{init}");

    let session = agent.new_session(&space.ws);
    server.push(Reply::Sse(chat_text(&["Hi."])));
    let id = agent.request("session/prompt", text_prompt(&session, "hello"));
    agent.response(&id, WAIT);
    let message = points(&mut agent, &session)[0]["messageId"].clone();

    let unknown = err(
        &mut agent,
        "_session/rewind_points",
        json!({"sessionId": "nope"}),
    );
    assert_eq!(unknown["code"], INVALID_PARAMS);
    assert_eq!(unknown["data"]["code"], "unknown_session", "{unknown}");
    let unknown = err(
        &mut agent,
        "_session/rewind",
        json!({"sessionId": "nope", "messageId": message}),
    );
    assert_eq!(unknown["data"]["code"], "unknown_session", "{unknown}");
    for (params, says) in [
        (
            json!({"sessionId": session, "messageId": "user_0"}),
            "messageId",
        ),
        (json!({"sessionId": session}), "messageId: is missing"),
        (
            json!({"sessionId": session, "messageId": message, "mode": "all"}),
            "mode",
        ),
        (
            json!({"sessionId": session, "messageId": message, "dryRun": "yes"}),
            "dryRun",
        ),
    ] {
        let error = err(&mut agent, "_session/rewind", params.clone());
        assert_eq!(error["code"], INVALID_PARAMS, "{params}: {error}");
        assert!(error["message"].as_str().unwrap().contains(says), "{error}");
    }

    // While a turn runs.
    server.push(Reply::Sse(vec![chunk_role(), Step::Stall]));
    let running = agent.request("session/prompt", text_prompt(&session, "wait"));
    server.wait_requests(2, WAIT);
    let (outcome, _) = call(
        &mut agent,
        "_session/rewind",
        json!({"sessionId": session, "messageId": message, "mode": "both"}),
    );
    let error = outcome.expect_err("a rewind during a turn");
    assert_eq!(error["data"]["code"], "busy", "{error}");
    assert!(error["message"]
        .as_str()
        .unwrap()
        .contains("running a turn"));
    agent.notify("session/cancel", json!({"sessionId": session}));
    let (response, _) = agent.response(&running, WAIT);
    assert_eq!(response["result"]["stopReason"], "cancelled", "{response}");
}

#[test]
fn a_client_message_id_names_the_prompt() {
    let space = Space::new("rewind-client-id");
    let server = FakeServer::start();
    server.push(Reply::Sse(chat_text(&["One."])));
    server.push(Reply::Sse(chat_text(&["Two."])));
    let mut agent = space.openai(&server);
    let session = agent.new_session(&space.ws);
    for (text, message_id) in [("first", json!("client-1")), ("second", Value::Null)] {
        let mut params = text_prompt(&session, text);
        params["messageId"] = message_id;
        let id = agent.request("session/prompt", params);
        let (response, _) = agent.response(&id, WAIT);
        assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    }
    let list = points(&mut agent, &session);
    assert_eq!(list[0]["messageId"], "client-1");
    let own = list[1]["messageId"].as_str().unwrap();
    assert!(own.starts_with("user_"), "{own}");
    let cut = rewind(
        &mut agent,
        &session,
        &json!("client-1"),
        "conversation",
        false,
    );
    assert_eq!(cut["conversation"]["messagesDropped"], 4, "{cut}");
    assert!(points(&mut agent, &session).is_empty());

    // An id that is not a string, or is too long, refuses the prompt.
    for bad in [json!(7), json!("x".repeat(129)), json!("")] {
        let mut params = text_prompt(&session, "third");
        params["messageId"] = bad;
        let error = err(&mut agent, "session/prompt", params);
        assert_eq!(error["code"], INVALID_PARAMS, "{error}");
        assert!(
            error["message"].as_str().unwrap().contains("messageId"),
            "{error}"
        );
    }
    assert_eq!(
        server.requests().len(),
        2,
        "no refused prompt reached the model"
    );
}

#[test]
fn a_file_whose_earlier_content_was_not_kept_refuses_the_rewind() {
    let space = Space::new("rewind-unkept");
    let server = FakeServer::start();
    let big = "x".repeat(200);
    fs::write(space.ws.join("big.txt"), &big).unwrap();
    let config = space.base.join("config.json");
    let file = json!({
        "providers": {"fake": {"kind": "openai", "base_url": server.base_url(),
                               "api_key_env": "FAKE_REWIND_KEY"}},
        "models": {"fake/m": {"context_window": 64000}},
        "defaults": {"model": "fake/m"},
        "checkpoints": {"max_file_bytes": 64},
    });
    fs::write(&config, file.to_string()).unwrap();
    let (db, tmp) = (space.db.arg(), space.tmpdir());
    let mut agent = Agent::spawn(
        &[
            "acp",
            "--config",
            config.to_str().unwrap(),
            "--db",
            &db,
            "--permissions",
            "yolo",
        ],
        &[("FAKE_REWIND_KEY", "k"), ("TMPDIR", &tmp)],
    );
    agent.initialize();
    let session = agent.new_session(&space.ws);
    server.push(Reply::Sse(chat_tool_calls(&[(
        "write_file",
        json!({"path": "big.txt", "content": "small\n"}),
    )])));
    server.push(Reply::Sse(chat_text(&["Shrunk it."])));
    let id = agent.request("session/prompt", text_prompt(&session, "shrink it"));
    let (response, _) = agent.response(&id, WAIT);
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    assert_eq!(space.read("big.txt"), "small\n");

    let list = points(&mut agent, &session);
    assert_eq!(list[0]["filesChanged"], 1, "{list:?}");
    assert_eq!(list[0]["canRewindFiles"], false, "{list:?}");
    let error = err(
        &mut agent,
        "_session/rewind",
        json!({"sessionId": session, "messageId": list[0]["messageId"], "mode": "both"}),
    );
    assert_eq!(error["data"]["code"], "files_conflict", "{error}");
    assert!(
        error["message"]
            .as_str()
            .unwrap()
            .contains("too large to keep"),
        "{error}"
    );
    assert_eq!(space.read("big.txt"), "small\n");
    assert_eq!(
        points(&mut agent, &session).len(),
        1,
        "the conversation stays"
    );
}

//! Context that never overflows: automatic compaction past the threshold
//! (the transcript and its replay untouched), `/compact` with focus text,
//! the fallback to elision when the summary fails, large tool outputs
//! spilled to a file the model can read, the window a server's model list
//! reports, a byte-stable request prefix, and cached tokens priced at
//! their rate.

use super::{live_history, load, text_prompt, without_user_chunks, Space, WAIT};
use crate::support::fake_openai::{chat_text, chunk_tool_call, chunk_usage};
use crate::support::fake_openai::{chunk_finish, chunk_role, done};
use crate::support::store::{assert_same_updates, merge_chunks, session_updates};
use crate::support::{write_file, Agent, FakeServer, Reply};
use serde_json::{json, Value};

/// What the summary request says, to find it among the requests.
const SUMMARY_ASK: &str = "about to be replaced by your summary";

/// The first words of the message a summary becomes.
const SUMMARY_START: &str = "(The earlier conversation was compacted";

/// An agent on the fake server through a config file: one model `fake/ctx`
/// with `model` settings, and `extra` top-level sections (`context`,
/// `limits`).
fn configured(space: &Space, server: &FakeServer, model: Value, extra: Value) -> Agent {
    configured_with(space, server, model, extra, &[])
}

/// [`configured`], with more flags for `spindle acp`.
fn configured_with(
    space: &Space,
    server: &FakeServer,
    model: Value,
    extra: Value,
    flags: &[&str],
) -> Agent {
    let config = space.base.join("config.json");
    let mut file = json!({
        "providers": {"fake": {"kind": "openai", "base_url": server.base_url(),
                               "api_key_env": "FAKE_CTX_KEY"}},
        "models": {"fake/ctx": model},
        "defaults": {"model": "fake/ctx"},
    });
    for (key, value) in extra.as_object().into_iter().flatten() {
        file[key] = value.clone();
    }
    std::fs::write(&config, file.to_string()).unwrap();
    let db = space.db.arg();
    let tmp = space.tmpdir();
    let mut args = vec![
        "acp",
        "--config",
        config.to_str().unwrap(),
        "--db",
        &db,
        "--permissions",
        "yolo",
    ];
    args.extend_from_slice(flags);
    let mut agent = Agent::spawn(&args, &[("FAKE_CTX_KEY", "k"), ("TMPDIR", &tmp)]);
    agent.initialize();
    agent
}

/// A prompt to its end: the answer and every message meanwhile.
fn run(agent: &mut Agent, session: &str, text: &str) -> (Value, Vec<Value>) {
    let id = agent.request("session/prompt", text_prompt(session, text));
    agent.response(&id, WAIT)
}

fn updates<'a>(messages: &'a [Value], kind: &str) -> Vec<&'a Value> {
    messages
        .iter()
        .filter(|m| m["method"] == "session/update")
        .map(|m| &m["params"]["update"])
        .filter(|u| u["sessionUpdate"] == kind)
        .collect()
}

fn message_text(messages: &[Value]) -> String {
    updates(messages, "agent_message_chunk")
        .iter()
        .filter_map(|u| u["content"]["text"].as_str())
        .collect()
}

/// A text answer without usage: the agent then estimates every size from
/// the bytes (the fake usage of `chat_text` would calibrate it wrongly).
fn plain(text: &str) -> Reply {
    Reply::Sse(vec![
        chunk_role(),
        crate::support::fake_openai::chunk_content(text),
        chunk_finish("stop"),
        done(),
    ])
}

/// The text of a Chat Completions message (string content).
fn content(message: &Value) -> &str {
    message["content"].as_str().unwrap_or_default()
}

/// Whether the roles of a Chat Completions request alternate the way strict
/// chat templates need: never a user message after a user message.
fn alternates(sent: &[Value]) -> bool {
    sent.windows(2)
        .all(|pair| !(pair[0]["role"] == "user" && pair[1]["role"] == "user"))
}

fn is_summary_request(body: &Value) -> bool {
    body["messages"]
        .as_array()
        .and_then(|m| m.last())
        .is_some_and(|m| content(m).contains(SUMMARY_ASK))
}

#[test]
fn a_long_session_compacts_once_and_its_transcript_stays_whole() {
    let space = Space::new("ctx-long");
    let server = FakeServer::start();
    for _ in 0..6 {
        server.push(plain("Noted."));
    }
    let mut agent = configured(
        &space,
        &server,
        json!({"context_window": 16000}),
        Value::Null,
    );
    let session = agent.new_session(&space.ws);
    let prompts: Vec<String> = (0..5)
        .map(|n| format!("Prompt {n}: {}", "lorem ipsum ".repeat(640)))
        .collect();
    let mut live = Vec::new();
    let mut compacted_in = Vec::new();
    for (n, text) in prompts.iter().enumerate() {
        let (response, messages) = run(&mut agent, &session, text);
        assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
        if message_text(&messages).contains("Context compacted") {
            compacted_in.push(n);
            // The editor sees the new, smaller size.
            let sizes: Vec<u64> = updates(&messages, "usage_update")
                .iter()
                .filter_map(|u| u["used"].as_u64())
                .collect();
            assert!(
                sizes.iter().any(|used| *used < 10_000),
                "no usage_update with the drop: {sizes:?}"
            );
            assert!(updates(&messages, "usage_update")
                .iter()
                .all(|u| u["size"] == 16000));
        }
        live.extend(live_history(&session_updates(&messages, &session)));
    }
    let sizes: Vec<usize> = server.requests().iter().map(|r| r.raw.len()).collect();
    assert_eq!(
        compacted_in.len(),
        1,
        "compacted in {compacted_in:?}, request sizes {sizes:?}"
    );

    let requests = server.requests();
    assert_eq!(requests.len(), 6);
    let summaries: Vec<usize> = (0..requests.len())
        .filter(|&i| is_summary_request(&requests[i].body))
        .collect();
    assert_eq!(summaries.len(), 1);
    let at = summaries[0];
    // The summary request carries no tools and ends with the instruction.
    assert!(requests[at].body.get("tools").is_none());
    let before = &requests[at - 1];
    let after = &requests[at + 1];
    assert!(
        after.raw.len() < before.raw.len(),
        "the request after compaction is not smaller: {} vs {}",
        after.raw.len(),
        before.raw.len()
    );
    let sent = after.body["messages"].as_array().unwrap();
    assert_eq!(sent[0]["role"], "system");
    assert!(
        content(&sent[1]).starts_with(SUMMARY_START),
        "{:#?}",
        sent[1]
    );
    assert!(content(&sent[1]).contains("Noted."));
    // The current prompt is there verbatim, and last: in the summary's
    // message, which it follows, so that the roles alternate.
    let current = &prompts[compacted_in[0]];
    assert!(content(sent.last().unwrap()).ends_with(current.as_str()));
    assert!(alternates(sent), "two user messages in a row");

    // The transcript keeps everything: every prompt replays, and the
    // replay in another process is what the editor saw live.
    let mut reader = space.reader();
    let replay = load(&mut reader, &session, space.ws());
    let users: String = replay
        .iter()
        .filter(|u| u["sessionUpdate"] == "user_message_chunk")
        .filter_map(|u| u["content"]["text"].as_str())
        .collect();
    for text in &prompts {
        assert!(users.contains(text.as_str()));
    }
    assert_same_updates(
        &merge_chunks(&without_user_chunks(&live)),
        &merge_chunks(&without_user_chunks(&replay)),
        "live vs replay after compaction",
    );

    // The next prompt goes on from the compacted conversation.
    server.push(plain("Still here."));
    let (response, _) = run(&mut agent, &session, "and now?");
    assert_eq!(response["result"]["stopReason"], "end_turn");
    let last = server.requests().pop().unwrap();
    let sent = last.body["messages"].as_array().unwrap();
    assert!(content(&sent[1]).starts_with(SUMMARY_START));
    assert!(content(sent.last().unwrap()).ends_with("and now?"));
    assert!(alternates(sent), "two user messages in a row");
    space.db.assert_sound();
}

/// A local server that counts tokens (llama.cpp's `/tokenize`) is asked
/// before the estimate, which errs high, compacts: here it counts fewer,
/// so the same session as above is never compacted.
#[test]
fn a_server_that_counts_tokens_is_asked_before_compacting() {
    let space = Space::new("ctx-tokenize");
    let server = FakeServer::start();
    server.serve_tokenizer(8);
    for _ in 0..5 {
        server.push(plain("Noted."));
    }
    let mut agent = configured(
        &space,
        &server,
        json!({"context_window": 16000}),
        Value::Null,
    );
    let session = agent.new_session(&space.ws);
    for n in 0..5 {
        let text = format!("Prompt {n}: {}", "lorem ipsum ".repeat(640));
        let (response, messages) = run(&mut agent, &session, &text);
        assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
        let said = message_text(&messages);
        assert!(!said.contains("Context compacted"), "turn {n}: {said}");
    }
    let requests = server.requests();
    assert_eq!(requests.len(), 5, "no summary was asked for");
    assert!(!requests.iter().any(|r| is_summary_request(&r.body)));
    let counted = server.tokenized();
    assert!(!counted.is_empty(), "the server was never asked to count");
    // Asked only near the threshold, at most once a request.
    assert!(counted.len() <= 5, "{}", counted.len());
    assert!(counted.iter().all(|text| text.contains("Prompt 0")));
}

#[test]
fn compact_takes_focus_text() {
    let space = Space::new("ctx-focus");
    let server = FakeServer::start();
    server.push(Reply::Sse(chat_text(&["First answer."])));
    server.push(Reply::Sse(chat_text(&["The summary."])));
    server.push(Reply::Sse(chat_text(&["After."])));
    let mut agent = configured(&space, &server, json!({}), Value::Null);
    let session = agent.new_session(&space.ws);
    run(&mut agent, &session, "Design the API");
    let (response, messages) = run(&mut agent, &session, "/compact keep the API design details");
    assert_eq!(response["result"]["stopReason"], "end_turn");
    let shown = message_text(&messages);
    assert!(shown.contains("The summary."), "{shown}");
    assert!(shown.contains("Context compacted"), "{shown}");
    let requests = server.requests();
    let ask = requests[1].body["messages"].as_array().unwrap();
    let instruction = content(ask.last().unwrap());
    assert!(instruction.contains(SUMMARY_ASK));
    assert!(
        instruction.contains("Give particular attention to: keep the API design details"),
        "{instruction}"
    );
    run(&mut agent, &session, "next");
    let sent = server.requests()[2].body["messages"].clone();
    // The summary and the next prompt are one user message (strict
    // templates take no user message after a user message).
    assert_eq!(sent.as_array().unwrap().len(), 2, "{sent:#?}");
    assert!(content(&sent[1]).starts_with(SUMMARY_START));
    assert!(content(&sent[1]).contains("The summary."));
    assert!(content(&sent[1]).ends_with("\n\nnext"), "{sent:#?}");
}

/// A step that reads `path` with `read_file`.
/// A summary cut off at the output limit (`finish_reason: length`) is used
/// and said to be partial, to the model and to the user.
#[test]
fn a_summary_cut_off_at_the_output_limit_says_so() {
    let space = Space::new("ctx-cut");
    let server = FakeServer::start();
    server.push(Reply::Sse(chat_text(&["First answer."])));
    server.push(Reply::Sse(vec![
        chunk_role(),
        crate::support::fake_openai::chunk_content("1. Goal: design the API. 2. Decis"),
        chunk_finish("length"),
        done(),
    ]));
    server.push(Reply::Sse(chat_text(&["After."])));
    let mut agent = configured(&space, &server, json!({}), Value::Null);
    let session = agent.new_session(&space.ws);
    run(&mut agent, &session, "Design the API");
    let (response, messages) = run(&mut agent, &session, "/compact");
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    let shown = message_text(&messages);
    assert!(shown.contains("Summary cut off"), "{shown}");
    run(&mut agent, &session, "next");
    let sent = server.requests()[2].body["messages"].clone();
    let summary = content(&sent[1]);
    assert!(summary.contains("2. Decis"), "{summary}");
    assert!(
        summary.contains("cut off at the output limit"),
        "the model is told: {summary}"
    );
}

fn read_step(id: &str, path: &str) -> Reply {
    Reply::Sse(vec![
        chunk_role(),
        chunk_tool_call(
            0,
            Some(id),
            Some("read_file"),
            &json!({"path": path}).to_string(),
        ),
        chunk_finish("tool_calls"),
        done(),
    ])
}

#[test]
fn a_failing_summary_falls_back_to_eliding_old_outputs() {
    let space = Space::new("ctx-fallback");
    let line = "some file content that the model read earlier\n";
    write_file(&space.ws, "big.txt", line.repeat(200));
    let server = FakeServer::start();
    // Two reads; past the threshold after the second, the summary is
    // asked for and fails (a 400 is not retried).
    for n in 0..2 {
        server.push(read_step(&format!("r{n}"), "big.txt"));
    }
    server.push(Reply::openai_error(
        400,
        "summaries are not allowed here",
        "invalid_request_error",
        "bad",
    ));
    server.push(Reply::Sse(chat_text(&["Done reading."])));
    let mut agent = configured(
        &space,
        &server,
        json!({"context_window": 20000}),
        json!({"context": {"auto_compact": 0.5}}),
    );
    let session = agent.new_session(&space.ws);
    let big_prompt = format!("Read big.txt many times. {}", "context ".repeat(3000));
    let (response, messages) = run(&mut agent, &session, &big_prompt);
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    let shown = message_text(&messages);
    assert!(shown.contains("Context compaction failed"), "{shown}");
    assert!(shown.contains("summaries are not allowed here"), "{shown}");
    assert!(shown.contains("Done reading."), "{shown}");
    let requests = server.requests();
    assert_eq!(requests.len(), 4);
    let failed = requests
        .iter()
        .position(|r| is_summary_request(&r.body))
        .expect("a summary was asked for");
    assert_eq!(failed, 2);
    let next = &requests[failed + 1].body["messages"];
    let stubs: Vec<&str> = next
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(content)
        .filter(|text| text.contains("elided to save context"))
        .collect();
    assert!(!stubs.is_empty(), "{next:#}");
    assert!(stubs[0].contains("read_file `big.txt`"), "{}", stubs[0]);
    // The stub says where the whole output is, and it is there.
    let path = stubs[0]
        .split("the full text is in ")
        .nth(1)
        .and_then(|rest| rest.split(". Read it").next())
        .unwrap();
    assert!(std::fs::read_to_string(path).unwrap().contains(line));
    // The prompt itself is never elided.
    assert!(next
        .as_array()
        .unwrap()
        .iter()
        .any(|m| content(m) == big_prompt));
}

#[test]
#[cfg_attr(windows, ignore = "sh command lines")]
fn a_megabyte_of_tool_output_reaches_the_model_as_head_and_tail() {
    let space = Space::new("ctx-spill");
    let server = FakeServer::start();
    let command = "seq 1 150000";
    server.push(Reply::Sse(vec![
        chunk_role(),
        chunk_tool_call(
            0,
            Some("big_run"),
            Some("run_command"),
            &json!({ "command": command }).to_string(),
        ),
        chunk_finish("tool_calls"),
        done(),
    ]));
    server.push(Reply::Sse(chat_text(&["Ran."])));
    // Commands keep all their output here, so only the spill cuts it.
    let mut agent = configured(
        &space,
        &server,
        json!({"context_window": 1000000}),
        json!({"limits": {"command_output_bytes": 2_000_000}}),
    );
    let session = agent.new_session(&space.ws);
    let (response, _) = run(&mut agent, &session, "count");
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    let requests = server.requests();
    let sent = requests[1].body["messages"].as_array().unwrap();
    let result = content(sent.last().unwrap()).to_string();
    assert!(result.len() <= 32 * 1024, "{}", result.len());
    assert!(result.contains("\n1\n2\n3\n"), "the head is there");
    assert!(result.contains("149999\n150000"), "the tail is there");
    assert!(result.contains("bytes left out here"), "{result}");
    let path = result
        .split("The whole output (")
        .nth(1)
        .and_then(|rest| rest.split(") is in ").nth(1))
        .and_then(|rest| rest.split(": read it with read_file").next())
        .unwrap()
        .to_string();
    assert!(!path.starts_with(space.ws()), "kept outside the workspace");
    let kept = std::fs::read_to_string(&path).unwrap();
    assert!(kept.contains("\n75000\n"));

    // The model reads the rest with read_file and a line range, without
    // being asked to approve (the session's own folder).
    server.push(Reply::Sse(vec![
        chunk_role(),
        chunk_tool_call(
            0,
            Some("read_rest"),
            Some("read_file"),
            &json!({"path": path, "start_line": 75000, "line_count": 3}).to_string(),
        ),
        chunk_finish("tool_calls"),
        done(),
    ]));
    server.push(Reply::Sse(chat_text(&["Read it."])));
    let (response, _) = run(&mut agent, &session, "read the middle");
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    let last = server.requests().pop().unwrap();
    let read = content(last.body["messages"].as_array().unwrap().last().unwrap()).to_string();
    assert!(read.contains("74999"), "{read}");
    assert!(read.contains("75001"), "{read}");
}

#[test]
fn the_window_comes_from_the_servers_model_list() {
    let space = Space::new("ctx-window");
    let server = FakeServer::start();
    server.serve_models(json!({"data": [
        {"id": "listed-model", "context_length": 20000},
        {"id": "other", "max_model_len": 4096},
    ]}));
    server.push(Reply::Sse(vec![
        chunk_role(),
        crate::support::fake_openai::chunk_content("Hi."),
        chunk_finish("stop"),
        chunk_usage(120, 3),
        done(),
    ]));
    let db = space.db.arg();
    let base = server.base_url();
    let mut agent = Agent::spawn(
        &["acp", "--db", &db, "--model", "listed-model"],
        &[("OPENAI_BASE_URL", &base), ("OPENAI_API_KEY", "k")],
    );
    agent.initialize();
    let session = agent.new_session(&space.ws);
    let (_, messages) = run(&mut agent, &session, "hi");
    let usage = updates(&messages, "usage_update");
    assert_eq!(usage.len(), 1, "{messages:#?}");
    assert_eq!(usage[0]["size"], 20000);
    assert_eq!(usage[0]["used"], 123);
}

/// A window `spindle setup` recorded, larger than the one the server now
/// lists (it was restarted with a smaller context), gives way to the
/// server's; a smaller configured one stays the user's.
#[test]
fn the_servers_window_wins_over_a_larger_configured_one() {
    let space = Space::new("ctx-stale");
    let server = FakeServer::start();
    server.serve_models(json!({"data": [{"id": "ctx", "meta": {"n_ctx": 8192}}]}));
    for _ in 0..2 {
        server.push(Reply::Sse(vec![
            chunk_role(),
            crate::support::fake_openai::chunk_content("Hi."),
            chunk_finish("stop"),
            chunk_usage(120, 3),
            done(),
        ]));
    }
    for (window, expected) in [(64000, 8192), (6000, 6000)] {
        let mut agent = configured(
            &space,
            &server,
            json!({"context_window": window}),
            json!({}),
        );
        let session = agent.new_session(&space.ws);
        let (_, messages) = run(&mut agent, &session, "hi");
        let usage = updates(&messages, "usage_update");
        assert!(
            usage.iter().all(|u| u["size"] == expected),
            "configured {window}: {usage:#?}"
        );
        assert!(!usage.is_empty());
    }
}

#[test]
fn request_prefixes_stay_byte_for_byte_the_same() {
    let space = Space::new("ctx-prefix");
    let server = FakeServer::start();
    server.push(Reply::Sse(vec![
        chunk_role(),
        chunk_tool_call(
            0,
            Some("l1"),
            Some("list_directory"),
            &json!({"path": "."}).to_string(),
        ),
        chunk_finish("tool_calls"),
        done(),
    ]));
    server.push(Reply::Sse(chat_text(&["One."])));
    server.push(Reply::Sse(chat_text(&["Two."])));
    server.push(Reply::Sse(chat_text(&["Three."])));
    let mut agent = space.openai(&server);
    let session = agent.new_session(&space.ws);
    for text in ["first", "second", "third"] {
        run(&mut agent, &session, text);
    }
    let requests = server.requests();
    assert_eq!(requests.len(), 4);
    for pair in requests.windows(2) {
        let earlier = &pair[0].raw;
        let cut = earlier
            .find("],\"model\"")
            .expect("the messages come first in the body");
        assert!(
            pair[1].raw.starts_with(&earlier[..cut]),
            "request {} does not start with the bytes of the one before",
            pair[1].raw.len()
        );
        // The tools too, byte for byte.
        let tools = |raw: &str| raw[raw.find("\"tools\":").unwrap()..].to_string();
        assert_eq!(tools(earlier), tools(&pair[1].raw));
    }
}

#[test]
fn cached_tokens_are_priced_at_the_cached_rate() {
    let space = Space::new("ctx-price");
    let server = FakeServer::start();
    server.push(Reply::Sse(vec![
        chunk_role(),
        crate::support::fake_openai::chunk_content("Priced."),
        chunk_finish("stop"),
        crate::support::wire::chat_usage(1_000_000, 100_000, 800_000, 0),
        done(),
    ]));
    let mut agent = configured(
        &space,
        &server,
        json!({"context_window": 2000000,
               "price": {"input": 2.0, "output": 8.0, "cached_input": 0.5}}),
        Value::Null,
    );
    let session = agent.new_session(&space.ws);
    let (response, messages) = run(&mut agent, &session, "price it");
    // 200k fresh at 2, 800k cached at 0.5, 100k out at 8 (per million).
    let expected = 0.2 * 2.0 + 0.8 * 0.5 + 0.1 * 8.0;
    let usage = updates(&messages, "usage_update");
    let amount = usage[0]["cost"]["amount"].as_f64().unwrap();
    assert!((amount - expected).abs() < 1e-9, "{amount} vs {expected}");
    let meta = &response["result"]["_meta"]["spindle"]["usage"];
    assert_eq!(meta["cachedReadTokens"], 800_000);
    assert!((meta["cost"].as_f64().unwrap() - expected).abs() < 1e-9);
    // /cost says the same.
    let (_, messages) = run(&mut agent, &session, "/cost");
    let text = message_text(&messages);
    assert!(text.contains("800000 cached"), "{text}");
    assert!(text.contains(&format!("{expected:.4}")), "{text}");
    assert!(
        text.contains("Context: about 1100000 of 2000000 tokens in use (45% left)"),
        "{text}"
    );
    assert!(
        text.contains("Prompt before your first word: about ")
            && text.contains(" tokens (profile full, 17 tools)."),
        "{text}"
    );
}

/// A window that the tools and a few results fill: one summary per turn
/// at most, not one before every step.
#[test]
fn a_tight_window_asks_for_at_most_one_summary_per_turn() {
    let space = Space::new("ctx-tight");
    // Six files, not one read six times (that would be a loop).
    for n in 0..6 {
        write_file(
            &space.ws,
            &format!("big{n}.txt"),
            "a line of some length here\n".repeat(300),
        );
    }
    let server = FakeServer::start();
    for n in 0..6 {
        server.push(read_step(&format!("t{n}"), &format!("big{n}.txt")));
    }
    server.push(plain("Finished."));
    let mut agent = configured(&space, &server, json!({"context_window": 12000}), json!({}));
    let session = agent.new_session(&space.ws);
    let (response, _) = run(&mut agent, &session, "read it over and over");
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    let summaries = server
        .requests()
        .iter()
        .filter(|r| is_summary_request(&r.body))
        .count();
    assert_eq!(summaries, 1);
    assert_eq!(server.pending_replies(), 0);
}

/// llama.cpp started with a smaller context than the config says: its
/// refusal (`exceed_context_size_error`, with the counts) is taken as
/// "too long", the window it names is believed, and the conversation is
/// compacted to fit it and sent again, once.
#[test]
fn a_local_servers_too_long_refusal_compacts_to_the_window_it_names() {
    let space = Space::new("ctx-llama");
    let server = FakeServer::start();
    server.push(plain("Noted."));
    server.push(plain("Noted again."));
    server.push(Reply::status(
        400,
        json!({"error": {"code": 400, "type": "exceed_context_size_error",
                         "message": "request (9120 tokens) exceeds the available context size (8192 tokens), try increasing it",
                         "n_prompt_tokens": 9120, "n_ctx": 8192}})
        .to_string(),
    ));
    server.push(plain("The user sent two long prompts; both were noted."));
    server.push(plain("Done."));
    let mut agent = configured(&space, &server, json!({"context_window": 64000}), json!({}));
    let session = agent.new_session(&space.ws);
    for n in 0..2 {
        let text = format!("Prompt {n}: {}", "lorem ipsum ".repeat(1500));
        let (response, _) = run(&mut agent, &session, &text);
        assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    }
    let (response, messages) = run(&mut agent, &session, "and the third?");
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    let said = message_text(&messages);
    assert!(said.contains("8192 tokens"), "the user is told: {said}");
    let requests = server.requests();
    assert_eq!(requests.len(), 5);
    assert!(is_summary_request(&requests[3].body));
    assert!(
        requests[4].raw.len() < requests[2].raw.len() / 2,
        "the request sent again is not smaller: {} vs {}",
        requests[4].raw.len(),
        requests[2].raw.len()
    );
    let sent = requests[4].body["messages"].as_array().unwrap();
    assert!(content(sent.last().unwrap()).ends_with("and the third?"));
    assert!(alternates(sent), "two user messages in a row");
    // The editor's meter shows the window the server has.
    assert!(updates(&messages, "usage_update")
        .iter()
        .any(|u| u["size"] == 8192));
    // Believed for the session: /cost, status and the next turn use it.
    let (_, messages) = run(&mut agent, &session, "/cost");
    let said = message_text(&messages);
    assert!(said.contains("of 8192 tokens"), "{said}");
    let status = crate::support::prelude::ok(
        &mut agent,
        "_spindle/session/status",
        json!({"sessionId": session}),
    );
    assert_eq!(status["usage"]["contextSize"], 8192, "{status}");
    server.push(Reply::Sse(vec![
        chunk_role(),
        crate::support::fake_openai::chunk_content("Fourth."),
        chunk_finish("stop"),
        chunk_usage(2000, 3),
        done(),
    ]));
    let (_, messages) = run(&mut agent, &session, "and a fourth");
    let sizes: Vec<Value> = updates(&messages, "usage_update")
        .iter()
        .map(|u| u["size"].clone())
        .collect();
    assert!(
        !sizes.is_empty() && sizes.iter().all(|s| *s == 8192),
        "{sizes:?}"
    );
}

#[test]
fn the_system_prompt_knows_the_date_the_repository_and_nested_instructions() {
    let space = Space::new("prompt-env");
    let ws = std::path::PathBuf::from(space.ws());
    let git = std::process::Command::new("git")
        .args(["init", "-q", "-b", "trunk"])
        .current_dir(&ws)
        .status()
        .is_ok_and(|s| s.success());
    if !git {
        std::fs::create_dir_all(ws.join(".git")).unwrap();
        std::fs::write(ws.join(".git/HEAD"), "ref: refs/heads/trunk\n").unwrap();
    }
    std::fs::write(ws.join("AGENTS.md"), "Use tabs in this repository.").unwrap();
    std::fs::create_dir_all(ws.join("pkg")).unwrap();
    std::fs::write(ws.join("pkg/CLAUDE.md"), "The pkg folder holds the parser.").unwrap();
    std::fs::write(ws.join("new.txt"), "untracked").unwrap();
    let server = FakeServer::start();
    server.push(Reply::Sse(chat_text(&["ok"])));
    server.push(Reply::Sse(chat_text(&["ok again"])));
    let mut agent = space.openai(&server);
    let session = agent.new_session(&ws.join("pkg"));
    for text in ["hello", "again"] {
        let id = agent.request("session/prompt", text_prompt(&session, text));
        agent.response(&id, WAIT);
    }
    let requests = server.requests();
    let system = requests[0].body["messages"][0]["content"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(system.contains(&utc_today()), "{system}");
    assert!(system.contains("branch trunk"), "{system}");
    if git {
        assert!(system.contains("changed file"), "{system}");
    }
    let tabs = system.find("Use tabs").expect("the root AGENTS.md");
    let parser = system
        .find("holds the parser")
        .expect("the folder's CLAUDE.md");
    assert!(tabs < parser, "root first");
    assert!(system.contains("How to use the tools"));
    // Taken once: the second turn's prompt is the same bytes.
    assert_eq!(requests[1].body["messages"][0]["content"], json!(system));
}

/// Today's date in UTC, as YYYY-MM-DD.
fn utc_today() -> String {
    let days = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64
        / 86_400;
    // Civil date from days since 1970-01-01.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!("{year:04}-{month:02}-{day:02}")
}

/// A prompt that leaves no room for an answer is not sent, says so, and
/// is not carried into the next request.
#[test]
fn a_prompt_larger_than_the_window_is_refused_and_not_kept() {
    let space = Space::new("ctx-too-large");
    let server = FakeServer::start();
    server.push(plain("Small one answered."));
    let mut agent = configured(&space, &server, json!({"context_window": 8192}), json!({}));
    let session = agent.new_session(&space.ws);
    // Dense digits: about 40,000 bytes, far past an 8,192-token window.
    let huge: String = (0..8000).map(|i| format!("{:04} ", i % 10000)).collect();
    let (answer, _) = run(&mut agent, &session, &huge);
    assert_eq!(
        answer["error"]["data"]["code"], "prompt_too_large",
        "{answer}"
    );
    let message = answer["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("window is 8192"), "{message}");
    assert!(
        !server
            .requests()
            .iter()
            .any(|r| r.path.ends_with("/chat/completions")),
        "the prompt was sent"
    );

    // The next prompt goes out alone: the refused one is not merged in.
    let (answer, _) = run(&mut agent, &session, "A small question.");
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    let sent = server.requests();
    let chat = sent
        .iter()
        .find(|r| r.path.ends_with("/chat/completions"))
        .expect("the small prompt was sent");
    assert!(
        !chat.raw.contains("0007 0008"),
        "the refused prompt came back"
    );
    assert!(chat.raw.contains("A small question."));
}

/// The output cap is never more than half of what the request leaves of
/// the window: a small local model caught in a loop stops well before it
/// fills its window with one answer.
#[test]
fn the_output_cap_is_a_share_of_what_the_window_has_left() {
    let space = Space::new("ctx-output-cap");
    let server = FakeServer::start();
    server.push(plain("Short."));
    server.push(plain("Short again."));
    let mut agent = configured(&space, &server, json!({"context_window": 16384}), json!({}));
    let session = agent.new_session(&space.ws);
    let (answer, _) = run(&mut agent, &session, "A small question.");
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    let long: String = "word ".repeat(4000);
    let (answer, _) = run(&mut agent, &session, &long);
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    let caps: Vec<u64> = server
        .requests()
        .iter()
        .filter(|r| r.path.ends_with("/chat/completions"))
        .map(|r| r.body["max_completion_tokens"].as_u64().unwrap_or(0))
        .collect();
    assert_eq!(caps.len(), 2, "{caps:?}");
    // An unknown model's default cap is 8,192; the window leaves less.
    assert!(caps[0] < 8192 && caps[0] >= 512, "{caps:?}");
    // A longer request leaves less room still.
    assert!(caps[1] < caps[0] && caps[1] >= 512, "{caps:?}");
}

/// Dense digits run a token a byte, three times the estimate's rate: a
/// server that counts is asked when the worst case could overflow, and
/// its count decides.
#[test]
fn a_prompt_of_digits_is_counted_by_a_server_that_counts() {
    let space = Space::new("ctx-digits");
    let server = FakeServer::start();
    server.serve_tokenizer(1);
    server.push(plain("Never sent."));
    let mut agent = configured(&space, &server, json!({"context_window": 16384}), json!({}));
    let session = agent.new_session(&space.ws);
    let digits: String = (0..2400)
        .map(|i| format!("{:05} ", i * 7 % 100_000))
        .collect();
    let (answer, _) = run(&mut agent, &session, &digits);
    assert_eq!(
        answer["error"]["data"]["code"], "prompt_too_large",
        "{answer}"
    );
    assert!(
        !server.tokenized().is_empty(),
        "the server was not asked to count"
    );
    assert!(
        !server
            .requests()
            .iter()
            .any(|r| r.path.ends_with("/chat/completions")),
        "the prompt was sent"
    );
}

/// A server that never says what a request used: `/cost` says so, not 0.
#[test]
fn cost_says_when_the_provider_reported_no_usage() {
    let space = Space::new("ctx-no-usage");
    let server = FakeServer::start();
    server.push(plain("No usage from me."));
    let mut agent = configured(&space, &server, json!({"context_window": 16000}), json!({}));
    let session = agent.new_session(&space.ws);
    let (answer, _) = run(&mut agent, &session, "hi");
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    let (_, messages) = run(&mut agent, &session, "/cost");
    let text = message_text(&messages);
    assert!(
        text.contains(
            "Tokens so far: not reported — the provider said nothing of what 1 model call used."
        ),
        "{text}"
    );
    assert!(!text.contains("0 input"), "{text}");
}

/// A model of a 16k window is sent the core tools only and the short
/// prompt; one of 128k, or the 16k one with `--profile full`, or with
/// `"profile": "full"` in the config, every tool; `"profile": "lean"`
/// makes the large one lean.
#[test]
fn a_small_window_is_sent_the_lean_profile_unless_full_is_chosen() {
    let core = [
        "edit_file",
        "glob",
        "list_directory",
        "read_file",
        "run_command",
        "search",
        "todo_write",
        "write_file",
    ];
    let cases: [(u64, &[&str], Value, bool); 5] = [
        (16_384, &[], json!({}), true),
        (128_000, &[], json!({}), false),
        (16_384, &["--profile", "full"], json!({}), false),
        (16_384, &[], json!({"profile": "full"}), false),
        (128_000, &[], json!({"profile": "lean"}), true),
    ];
    for (window, flags, extra, lean) in cases {
        let space = Space::new("ctx-profile");
        let server = FakeServer::start();
        server.push(plain("Hello."));
        let mut agent = configured_with(
            &space,
            &server,
            json!({"context_window": window}),
            extra.clone(),
            flags,
        );
        let session = agent.new_session(&space.ws);
        let (answer, _) = run(&mut agent, &session, "hello");
        assert!(answer["error"].is_null(), "{answer}");
        let requests = server.requests();
        let body = &requests
            .iter()
            .find(|r| r.path.ends_with("/chat/completions"))
            .expect("a model request")
            .body;
        let mut names: Vec<&str> = body["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|tool| tool["function"]["name"].as_str().unwrap())
            .collect();
        names.sort();
        let system = body["messages"][0]["content"].as_str().unwrap();
        let case = format!("window {window}, {flags:?}, {extra}");
        if lean {
            assert_eq!(names, core, "{case}");
            assert!(!system.contains("How to use the tools"), "{case}");
        } else {
            assert_eq!(names.len(), 17, "{case}: {names:?}");
            for name in core
                .iter()
                .chain(&["apply_patch", "task", "ask_user", "fetch_url"])
            {
                assert!(names.contains(name), "{case}: {name} missing: {names:?}");
            }
            assert!(system.contains("How to use the tools"), "{case}");
        }
    }
}

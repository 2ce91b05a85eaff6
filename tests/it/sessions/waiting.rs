//! Waiting out a provider's limit: a 429 whose reset is further away than
//! a normal retry parks the turn (a notice, status `waiting` with the
//! time, a record in the store), cancel ends the wait, the wait survives
//! `kill -9` and goes on by itself after `session/load`, the configured
//! fallback models are asked first, and a reset beyond the longest wait
//! fails the turn naming the time.

use super::{conversation, load, text_prompt, wait_for, wait_for_update, Space, WAIT};
use crate::support::agent::notice_text;
use crate::support::fake_openai::chat_text;
use crate::support::prelude::ok;
use crate::support::{Agent, FakeServer, Reply};
use serde_json::{json, Value};
use std::time::{Duration, Instant};

/// A 429 whose limit resets `seconds` from now (`Retry-After`).
fn limited(seconds: u64) -> Reply {
    Reply::Status {
        code: 429,
        body: json!({"error": {"message": "Rate limit reached for requests",
                               "type": "requests", "code": "rate_limit_exceeded"}})
        .to_string(),
        headers: vec![("Retry-After".into(), seconds.to_string())],
    }
}

fn is_wait_notice(update: &Value) -> bool {
    notice_text(update).contains("Waiting for the limit to reset at")
}

fn status(agent: &mut Agent, session: &str) -> Value {
    ok(
        agent,
        "_spindle/session/status",
        json!({"sessionId": session}),
    )
}

/// Waits for a `turn` event saying the session is idle again.
fn wait_idle(agent: &mut Agent, session: &str) -> Vec<Value> {
    wait_for(agent, |message| {
        message["method"] == "_spindle/event"
            && message["params"]["sessionId"] == session
            && message["params"]["kind"] == "turn"
            && message["params"]["data"]["state"] == "idle"
    })
}

#[test]
fn a_limit_that_resets_later_parks_the_turn_until_then() {
    let space = Space::new("wait-live");
    let server = FakeServer::start();
    server.push(limited(3));
    server.push(Reply::Sse(chat_text(&["After the wait."])));
    let mut agent = space.spawn_openai_with(&space.db, &server, &["--retries", "0"]);
    agent.initialize();
    let session = agent.new_session(&space.ws);
    let started = Instant::now();
    let prompt = agent.request("session/prompt", text_prompt(&session, "Hello"));
    let seen = wait_for_update(&mut agent, &session, is_wait_notice);
    let notice = notice_text(&seen[seen.len() - 1]["params"]["update"]);
    assert!(notice.contains("Rate limit reached"), "{notice}");
    let snapshot = status(&mut agent, &session);
    assert_eq!(snapshot["health"]["provider"], "waiting", "{snapshot}");
    let until = snapshot["health"]["until"].as_str().unwrap_or_default();
    let until_ms = spindle::clock::parse_rfc3339(until).expect("an RFC 3339 time");
    let ahead = until_ms - spindle::clock::now_ms();
    assert!((0..=4000).contains(&ahead), "{snapshot}");
    assert_eq!(space.db.rows_of("waits", &session), 1);
    // One request so far: nothing is sent while the turn waits.
    assert_eq!(server.requests().len(), 1);

    let (answer, _) = agent.response(&prompt, WAIT);
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    assert!(started.elapsed() >= Duration::from_millis(2500));
    let requests = server.wait_requests(2, WAIT);
    assert_eq!(requests.len(), 2);
    // The same request, sent once more.
    assert_eq!(
        conversation(&requests[0].body),
        conversation(&requests[1].body)
    );
    assert_eq!(space.db.rows_of("waits", &session), 0);
    assert_eq!(status(&mut agent, &session)["health"]["provider"], "ok");
}

#[test]
fn cancel_ends_the_wait() {
    let space = Space::new("wait-cancel");
    let server = FakeServer::start();
    server.push(limited(3600));
    let mut agent = space.spawn_openai_with(&space.db, &server, &["--retries", "0"]);
    agent.initialize();
    let session = agent.new_session(&space.ws);
    let prompt = agent.request("session/prompt", text_prompt(&session, "Hello"));
    wait_for_update(&mut agent, &session, is_wait_notice);
    let started = Instant::now();
    agent.notify("session/cancel", json!({"sessionId": session}));
    let (answer, _) = agent.response(&prompt, WAIT);
    assert_eq!(answer["result"]["stopReason"], "cancelled", "{answer}");
    assert!(started.elapsed() < Duration::from_secs(10));
    assert_eq!(space.db.rows_of("waits", &session), 0);
    assert_eq!(server.requests().len(), 1);
}

#[test]
fn a_wait_survives_kill_and_goes_on_after_load() {
    let space = Space::new("wait-kill");
    let server = FakeServer::start();
    server.push(limited(3));
    server.push(Reply::Sse(chat_text(&["Back after the wait."])));
    let mut first = space.spawn_openai_with(&space.db, &server, &["--retries", "0"]);
    first.initialize();
    let session = first.new_session(&space.ws);
    let _prompt = first.request("session/prompt", text_prompt(&session, "Hello"));
    wait_for_update(&mut first, &session, is_wait_notice);
    first.kill();
    assert_eq!(space.db.rows_of("waits", &session), 1);

    let mut second = space.spawn_openai_with(&space.db, &server, &[]);
    second.initialize_with_events();
    let replay = load(&mut second, &session, space.ws());
    assert!(!replay.is_empty());
    // The wait goes on by itself, then the same request goes out once.
    let seen = wait_idle(&mut second, &session);
    let texts: String = seen
        .iter()
        .filter(|m| m["params"]["update"]["sessionUpdate"] == "agent_message_chunk")
        .filter_map(|m| m["params"]["update"]["content"]["text"].as_str())
        .collect();
    assert!(texts.contains("Back after the wait."), "{seen:#?}");
    assert!(seen.iter().any(|m| is_wait_notice(&m["params"]["update"])));
    let source = seen
        .iter()
        .find(|m| m["params"]["kind"] == "turn")
        .map(|m| m["params"]["data"]["source"].clone());
    assert_eq!(source, Some(json!("wait")), "{seen:#?}");
    let requests = server.wait_requests(2, WAIT);
    assert_eq!(
        conversation(&requests[0].body),
        conversation(&requests[1].body)
    );
    assert_eq!(space.db.rows_of("waits", &session), 0);

    // A third process finds nothing left to wait for.
    let mut third = space.spawn_openai_with(&space.db, &server, &[]);
    third.initialize();
    let replay = load(&mut third, &session, space.ws());
    let shown: String = replay
        .iter()
        .filter(|u| u["sessionUpdate"] == "agent_message_chunk")
        .filter_map(|u| u["content"]["text"].as_str())
        .collect();
    assert!(shown.contains("Back after the wait."), "{replay:#?}");
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(server.requests().len(), 2);
}

/// Three fake servers behind a config: `main/m` (the session's model),
/// then `spare/a` and `spare2/b` as fallbacks, in that order.
struct Chain {
    main: FakeServer,
    spare: FakeServer,
    spare2: FakeServer,
    config: std::path::PathBuf,
}

impl Chain {
    fn new(space: &Space, more: Value) -> Chain {
        let (main, spare, spare2) = (
            FakeServer::start(),
            FakeServer::start(),
            FakeServer::start(),
        );
        let provider = |server: &FakeServer| json!({"kind": "openai", "base_url": server.base_url(), "api_key_env": "CHAIN_KEY"});
        let mut config = json!({
            "providers": {"main": provider(&main), "spare": provider(&spare),
                          "spare2": provider(&spare2)},
            "models": {"main/m": {}, "spare/a": {}, "spare2/b": {}},
            "defaults": {"model": "main/m"},
        });
        for (key, value) in more.as_object().into_iter().flatten() {
            config[key] = value.clone();
        }
        let path = space.base.join("config.json");
        std::fs::write(&path, config.to_string()).unwrap();
        Chain {
            main,
            spare,
            spare2,
            config: path,
        }
    }

    fn agent(&self, space: &Space) -> Agent {
        let db = space.db.arg();
        let tmp = space.tmpdir();
        let config = self.config.to_str().unwrap();
        let args = [
            "acp",
            "--config",
            config,
            "--db",
            &db,
            "--permissions",
            "yolo",
        ];
        let mut agent = Agent::spawn(&args, &[("CHAIN_KEY", "sk-chain"), ("TMPDIR", &tmp)]);
        agent.initialize();
        agent
    }
}

#[test]
fn fallback_models_are_asked_in_turn_while_the_model_is_limited() {
    let space = Space::new("wait-fallback");
    let chain = Chain::new(&space, json!({"fallback": ["spare/a", "spare2/b"]}));
    let later = spindle::clock::rfc3339(spindle::clock::now_ms() + 3_600_000);
    // The reset in OpenAI's and Anthropic's rate-limit headers, no
    // Retry-After.
    chain.main.push(Reply::Status {
        code: 429,
        body: json!({"error": {"message": "Main is out of requests"}}).to_string(),
        headers: vec![
            ("x-ratelimit-remaining-requests".into(), "0".into()),
            ("x-ratelimit-reset-requests".into(), "59m59s".into()),
        ],
    });
    chain.spare.push(Reply::Status {
        code: 429,
        body: json!({"error": {"message": "Spare is out of tokens"}}).to_string(),
        headers: vec![
            ("anthropic-ratelimit-tokens-remaining".into(), "0".into()),
            ("anthropic-ratelimit-tokens-reset".into(), later),
        ],
    });
    chain
        .spare2
        .push(Reply::Sse(chat_text(&["From the second spare."])));
    chain.main.push(Reply::Sse(chat_text(&["Main is back."])));
    let mut agent = chain.agent(&space);
    let session = agent.new_session(&space.ws);
    let prompt = agent.request("session/prompt", text_prompt(&session, "Hello"));
    let (answer, seen) = agent.response(&prompt, WAIT);
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    let notices: Vec<String> = seen
        .iter()
        .map(|m| notice_text(&m["params"]["update"]))
        .filter(|text| text.contains("Limit reached"))
        .collect();
    assert_eq!(notices.len(), 2, "{seen:#?}");
    assert!(notices[0].contains("Main is out of requests") && notices[0].contains("spare/a"));
    assert!(notices[1].contains("Spare is out of tokens") && notices[1].contains("spare2/b"));
    assert!(!seen.iter().any(|m| is_wait_notice(&m["params"]["update"])));
    let answered = seen
        .iter()
        .filter(|m| m["params"]["update"]["sessionUpdate"] == "agent_message_chunk")
        .filter_map(|m| m["params"]["update"]["content"]["text"].as_str())
        .collect::<String>();
    assert!(answered.contains("From the second spare."), "{seen:#?}");
    assert_eq!(chain.spare2.requests()[0].body["model"], "b");
    // The next turn asks the session's own model first again.
    let prompt = agent.request("session/prompt", text_prompt(&session, "Again"));
    let (answer, _) = agent.response(&prompt, WAIT);
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    assert_eq!(chain.main.requests().len(), 2);
    assert_eq!(chain.main.requests()[1].body["model"], "m");
    assert_eq!(
        (chain.spare.requests().len(), chain.spare2.requests().len()),
        (1, 1)
    );
}

#[test]
fn a_reset_beyond_the_longest_wait_fails_naming_the_time() {
    let space = Space::new("wait-too-long");
    let chain = Chain::new(&space, json!({"max_wait_minutes": 60}));
    chain.main.push(limited(7200));
    let mut agent = chain.agent(&space);
    let session = agent.new_session(&space.ws);
    let prompt = agent.request("session/prompt", text_prompt(&session, "Hello"));
    let (answer, _) = agent.response(&prompt, WAIT);
    let error = &answer["error"];
    assert_eq!(error["data"]["code"], "provider_limit", "{answer}");
    let message = error["message"].as_str().unwrap_or_default();
    assert!(message.contains("the limit resets at"), "{message}");
    assert!(message.contains("max_wait_minutes"), "{message}");
    let resets = error["data"]["resetsAt"].as_str().unwrap_or_default();
    let resets = spindle::clock::parse_rfc3339(resets).expect("resetsAt");
    assert!((resets - spindle::clock::now_ms() - 7_200_000).abs() < 10_000);
    assert_eq!(space.db.rows_of("waits", &session), 0);
    assert_eq!(chain.main.requests().len(), 1);
}

#[test]
fn with_waiting_off_a_limit_fails_as_before() {
    let space = Space::new("wait-off");
    let chain = Chain::new(&space, json!({"max_wait_minutes": 0}));
    chain.main.push(limited(600));
    let mut agent = chain.agent(&space);
    let session = agent.new_session(&space.ws);
    let prompt = agent.request("session/prompt", text_prompt(&session, "Hello"));
    let (answer, _) = agent.response(&prompt, WAIT);
    assert_eq!(
        answer["error"]["data"]["code"], "provider_http_429",
        "{answer}"
    );
}

#[test]
fn a_waiting_follow_up_is_applied_once_after_kill_and_load() {
    let space = Space::new("wait-item");
    let server = FakeServer::start();
    server.push(limited(3));
    server.push(Reply::Sse(chat_text(&["The follow-up, answered."])));
    let mut first = space.spawn_openai_with(&space.db, &server, &["--retries", "0"]);
    first.initialize();
    let session = first.new_session(&space.ws);
    let queued = ok(
        &mut first,
        "_spindle/session/inbox/enqueue",
        json!({"sessionId": session, "text": "A follow-up"}),
    );
    let item = queued["itemId"].as_str().unwrap().to_string();
    wait_for_update(&mut first, &session, is_wait_notice);
    first.kill();

    let mut second = space.spawn_openai_with(&space.db, &server, &[]);
    second.initialize_with_events();
    load(&mut second, &session, space.ws());
    let seen = wait_idle(&mut second, &session);
    assert!(seen.iter().any(|m| m["params"]["update"]["content"]["text"]
        .as_str()
        .is_some_and(|t| t.contains("The follow-up, answered."))));
    let list = ok(
        &mut second,
        "_spindle/session/inbox/list",
        json!({"sessionId": session}),
    );
    // Applied: it is no longer listed as waiting, nor uncertain.
    assert_eq!(list["items"], json!([]), "{list}");
    let got = ok(
        &mut second,
        "_spindle/session/inbox/get",
        json!({"sessionId": session, "itemId": item}),
    );
    assert_eq!(got["item"]["state"], "applied", "{got}");
    assert_eq!(list["recovered"], false, "{list}");
    let requests = server.wait_requests(2, WAIT);
    let sent = conversation(&requests[1].body);
    let asked = sent
        .iter()
        .filter(|m| m["content"] == "A follow-up")
        .count();
    assert_eq!(asked, 1, "{sent:#?}");
}

#[test]
fn a_waiting_goal_goes_on_after_kill_and_load() {
    use crate::support::fake_openai::{chunk_finish, chunk_role, chunk_tool_call, done};
    let space = Space::new("wait-goal");
    let server = FakeServer::start();
    server.push(limited(3));
    let complete = json!({"status": "complete", "checkpoint": "Ported."}).to_string();
    server.push(Reply::Sse(vec![
        chunk_role(),
        chunk_tool_call(0, Some("g1"), Some("goal_update"), &complete),
        chunk_finish("tool_calls"),
        done(),
    ]));
    let mut first = space.spawn_openai_with(&space.db, &server, &["--retries", "0"]);
    first.initialize();
    let session = first.new_session(&space.ws);
    ok(
        &mut first,
        "session/set_mode",
        json!({"sessionId": session, "modeId": "goal"}),
    );
    let _prompt = first.request("session/prompt", text_prompt(&session, "port the module"));
    wait_for_update(&mut first, &session, is_wait_notice);
    first.kill();

    let mut second = space.spawn_openai_with(&space.db, &server, &[]);
    second.initialize_with_events();
    // (The goal comes back paused first, with an event before the answer.)
    second.request(
        "session/load",
        json!({"sessionId": session, "cwd": space.ws(), "mcpServers": []}),
    );
    wait_idle(&mut second, &session);
    let goal = status(&mut second, &session)["goal"].clone();
    assert_eq!(goal["status"], "complete", "{goal}");
    assert_eq!(goal["objective"], "port the module");
    let requests = server.wait_requests(2, WAIT);
    assert_eq!(
        conversation(&requests[0].body),
        conversation(&requests[1].body)
    );
    let tools = requests[1].body["tools"].to_string();
    assert!(tools.contains("goal_update"), "{tools}");
}

#[test]
fn doctor_names_the_fallbacks_and_the_longest_wait() {
    let space = Space::new("wait-doctor");
    let chain = Chain::new(
        &space,
        json!({"fallback": ["spare/a", "ghost/x"], "max_wait_minutes": 45}),
    );
    for server in [&chain.main, &chain.spare, &chain.spare2] {
        server.serve_models(json!({"data": [{"id": "m"}, {"id": "a"}, {"id": "b"}]}));
    }
    let out = crate::support::spindle_command(&crate::support::temp_dir("home"))
        .args(["doctor", "--config", chain.config.to_str().unwrap(), "--db"])
        .arg(space.base.join("none.db"))
        .env("CHAIN_KEY", "sk-chain")
        .output()
        .unwrap();
    let report = String::from_utf8_lossy(&out.stdout);
    assert!(
        report.contains("asked in turn while a model is limited: spare/a, ghost/x"),
        "{report}"
    );
    assert!(
        report.contains("ghost/x: no provider \"ghost\" in the config"),
        "{report}"
    );
    assert!(report.contains("waits up to 45 minutes"), "{report}");
}

#[test]
fn a_fallback_that_is_not_provider_slash_model_is_refused_at_start() {
    let space = Space::new("wait-bad-fallback");
    let chain = Chain::new(&space, json!({"fallback": ["just-a-name"]}));
    let out = crate::support::spindle_command(&crate::support::temp_dir("home"))
        .args(["doctor", "--config", chain.config.to_str().unwrap()])
        .output()
        .unwrap();
    let report =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    assert!(
        report.contains("fallback: \"just-a-name\" must be named provider/model"),
        "{report}"
    );
    assert_ne!(out.status.code(), Some(0));
}

#[test]
fn a_wait_survives_the_editor_closing_and_goes_on_after_load() {
    let space = Space::new("wait-eof");
    let server = FakeServer::start();
    server.push(limited(3));
    server.push(Reply::Sse(chat_text(&["Still here."])));
    let mut first = space.spawn_openai_with(&space.db, &server, &["--retries", "0"]);
    first.initialize();
    let session = first.new_session(&space.ws);
    let _prompt = first.request("session/prompt", text_prompt(&session, "Hello"));
    wait_for_update(&mut first, &session, is_wait_notice);
    first.close_stdin();
    let status = first.wait_exit(Duration::from_secs(10));
    assert!(status.is_some_and(|s| s.success()), "{}", first.stderr());
    // The editor went away, the user did not cancel: the wait is kept.
    assert_eq!(space.db.rows_of("waits", &session), 1);

    let mut second = space.spawn_openai_with(&space.db, &server, &[]);
    second.initialize_with_events();
    load(&mut second, &session, space.ws());
    let seen = wait_idle(&mut second, &session);
    assert!(seen
        .iter()
        .any(|m| m["params"]["update"]["content"]["text"] == "Still here."));
    assert_eq!(space.db.rows_of("waits", &session), 0);
    assert_eq!(server.requests().len(), 2);
}

#[test]
fn a_limit_that_is_still_there_after_the_wait_ends_the_turn() {
    // A gateway that keeps saying "retry in 2 s": the retries honour it,
    // the turn then waits once, asks once more (no retries of its own)
    // and stops — not hours of requests.
    let space = Space::new("wait-again");
    let server = FakeServer::start();
    for _ in 0..20 {
        server.push(limited(2));
    }
    let mut agent = space.spawn_openai_with(&space.db, &server, &["--retries", "1"]);
    agent.initialize();
    let session = agent.new_session(&space.ws);
    let prompt = agent.request("session/prompt", text_prompt(&session, "Hello"));
    // While the first retry waits, status says until when.
    server.wait_requests(1, WAIT);
    let deadline = Instant::now() + WAIT;
    let snapshot = loop {
        let snapshot = status(&mut agent, &session);
        if snapshot["health"]["provider"] == "retrying" || Instant::now() > deadline {
            break snapshot;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(snapshot["health"]["provider"], "retrying", "{snapshot}");
    let until = snapshot["health"]["until"].as_str().unwrap_or_default();
    let until_ms = spindle::clock::parse_rfc3339(until).expect("an RFC 3339 time");
    assert!(until_ms > spindle::clock::now_ms() - 1000, "{snapshot}");
    let (answer, seen) = agent.response(&prompt, WAIT);
    let message = answer["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("still refused after waiting"), "{answer}");
    assert_eq!(
        answer["error"]["data"]["code"], "provider_limit",
        "{answer}"
    );
    assert_eq!(
        seen.iter()
            .filter(|m| is_wait_notice(&m["params"]["update"]))
            .count(),
        1
    );
    // Two tries, the wait, one try: the retries do not start over.
    assert_eq!(server.requests().len(), 3);
    assert_eq!(space.db.rows_of("waits", &session), 0);
    assert_eq!(status(&mut agent, &session)["health"]["until"], Value::Null);
}

#[test]
fn a_model_that_is_down_goes_to_the_fallbacks() {
    let space = Space::new("down-fallback");
    let chain = Chain::new(&space, json!({"fallback": ["spare/a"]}));
    // The main model's gateway retries by itself: Spindle tries twice.
    let mut config: Value =
        serde_json::from_str(&std::fs::read_to_string(&chain.config).unwrap()).unwrap();
    config["providers"]["main"]["gateway"] = json!(true);
    std::fs::write(&chain.config, config.to_string()).unwrap();
    let down = || Reply::Status {
        code: 503,
        body: json!({"error": {"message": "Main is down"}}).to_string(),
        headers: vec![],
    };
    chain.main.push(down());
    chain.main.push(down());
    chain
        .spare
        .push(Reply::Sse(chat_text(&["From the spare."])));
    let mut agent = chain.agent(&space);
    let session = agent.new_session(&space.ws);
    let prompt = agent.request("session/prompt", text_prompt(&session, "Hello"));
    let (answer, seen) = agent.response(&prompt, WAIT);
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    let notice = seen
        .iter()
        .map(|m| notice_text(&m["params"]["update"]))
        .find(|text| text.contains("Model unavailable"))
        .unwrap_or_else(|| panic!("{seen:#?}"));
    assert!(
        notice.contains("Main is down") && notice.contains("spare/a"),
        "{notice}"
    );
    assert_eq!(chain.main.requests().len(), 2);
    assert_eq!(chain.spare.requests().len(), 1);

    // Down, and the spare down too: the turn fails with the error, no wait.
    chain.main.push(down());
    chain.main.push(down());
    chain.spare.push(down());
    chain.spare.push(down());
    chain.spare.push(down());
    chain.spare.push(down());
    let prompt = agent.request("session/prompt", text_prompt(&session, "Again"));
    let (answer, seen) = agent.response(&prompt, WAIT);
    let message = answer["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("HTTP 503"), "{answer}");
    assert!(!seen.iter().any(|m| is_wait_notice(&m["params"]["update"])));
    assert_eq!(space.db.rows_of("waits", &session), 0);
}

#[test]
fn fallbacks_are_asked_even_with_waiting_off() {
    let space = Space::new("wait-off-fallback");
    let chain = Chain::new(
        &space,
        json!({"fallback": ["spare/a"], "max_wait_minutes": 0}),
    );
    chain.main.push(limited(600));
    chain
        .spare
        .push(Reply::Sse(chat_text(&["The spare answers."])));
    chain.main.push(limited(600));
    chain.spare.push(limited(600));
    let mut agent = chain.agent(&space);
    let session = agent.new_session(&space.ws);
    let prompt = agent.request("session/prompt", text_prompt(&session, "Hello"));
    let (answer, _) = agent.response(&prompt, WAIT);
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    // Both limited, and no waiting: the turn says so at once.
    let prompt = agent.request("session/prompt", text_prompt(&session, "Again"));
    let (answer, _) = agent.response(&prompt, WAIT);
    assert_eq!(
        answer["error"]["data"]["code"], "provider_limit",
        "{answer}"
    );
    let message = answer["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("waiting for it is off"), "{message}");
    assert_eq!(space.db.rows_of("waits", &session), 0);
}

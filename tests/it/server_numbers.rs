//! Numbers a model server sends, taken at their word nowhere: a 429 whose
//! `Retry-After` or `retry-after-ms` is 1e300 (which once panicked the
//! HTTP thread: "stream ended unexpectedly") or 1e17 (a reset shown in
//! the year 246105631), and token counts that are negative, fractional or
//! past `u64`. Each prompt is answered — a clear error naming a sane
//! date, or the answer — and the agent goes on serving.

use crate::support::fake_openai::{chat_text, chunk_content, done};
use crate::support::prelude::WAIT;
use crate::support::{temp_dir, Agent, FakeServer, Reply, Step};
use serde_json::{json, Value};

fn agent_for(server: &FakeServer) -> Agent {
    let base = server.base_url();
    let mut agent = Agent::spawn(
        &["acp", "--model", "test-model", "--retries", "0"],
        &[
            ("OPENAI_BASE_URL", base.as_str()),
            ("OPENAI_API_KEY", "sk-test"),
        ],
    );
    agent.initialize();
    agent
}

fn prompt(agent: &mut Agent, session: &str) -> (Value, Vec<Value>) {
    let id = agent.request(
        "session/prompt",
        json!({"sessionId": session, "prompt": [{"type": "text", "text": "hello"}]}),
    );
    agent.response(&id, WAIT)
}

/// A 429 with one absurd header.
fn limited(header: &str, value: &str) -> Reply {
    Reply::Status {
        code: 429,
        body: json!({"error": {"message": "Rate limit reached for requests",
                               "type": "requests", "code": "rate_limit_exceeded"}})
        .to_string(),
        headers: vec![(header.into(), value.into())],
    }
}

/// The years of every `YYYY-MM-DD` date in `text` (any number of digits
/// before the first dash).
fn years_in(text: &str) -> Vec<u64> {
    let bytes = text.as_bytes();
    let mut years = Vec::new();
    let mut at = 0;
    while at < bytes.len() {
        if !bytes[at].is_ascii_digit() || (at > 0 && bytes[at - 1].is_ascii_digit()) {
            at += 1;
            continue;
        }
        let end = at
            + bytes[at..]
                .iter()
                .take_while(|b| b.is_ascii_digit())
                .count();
        let rest = &bytes[end..];
        let dated = rest.len() >= 6
            && rest[0] == b'-'
            && rest[1..3].iter().all(u8::is_ascii_digit)
            && rest[3] == b'-'
            && rest[4..6].iter().all(u8::is_ascii_digit);
        if dated && end - at >= 4 {
            years.push(text[at..end].parse().unwrap_or(u64::MAX));
        }
        at = end;
    }
    years
}

/// One absurd wait: the prompt fails with a clear error and a sane
/// date, nothing panics, and the next prompt is answered.
fn an_absurd_wait_is_a_clear_error(header: &str, value: &str) {
    let server = FakeServer::start();
    server.push(limited(header, value));
    server.push(Reply::Sse(chat_text(&["Still here."])));
    let mut agent = agent_for(&server);
    let session = agent.new_session(&temp_dir("absurd-wait"));
    let (answer, _) = prompt(&mut agent, &session);
    let message = answer["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("Rate limit reached"), "{answer}");
    assert!(message.contains("later than the longest wait"), "{answer}");
    let years = years_in(message);
    assert!(!years.is_empty(), "no date in {message}");
    assert!(years.iter().all(|year| *year <= 9999), "{message}");
    let (answer, _) = prompt(&mut agent, &session);
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    agent.close_stdin();
    assert!(agent.wait_exit(WAIT).is_some());
    let stderr = agent.stderr();
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(!stderr.contains("stream ended unexpectedly"), "{stderr}");
    assert!(
        years_in(&stderr).iter().all(|year| *year <= 9999),
        "{stderr}"
    );
}

#[test]
fn a_retry_after_of_1e300_seconds_is_a_clear_error() {
    an_absurd_wait_is_a_clear_error("Retry-After", "1e300");
}

#[test]
fn a_retry_after_ms_of_1e300_is_a_clear_error() {
    an_absurd_wait_is_a_clear_error("retry-after-ms", "1e300");
}

#[test]
fn a_retry_after_of_1e17_seconds_shows_a_sane_date() {
    an_absurd_wait_is_a_clear_error("Retry-After", "1e17");
}

#[test]
fn a_rate_limit_reset_of_1e300_shows_a_sane_date() {
    an_absurd_wait_is_a_clear_error("x-ratelimit-reset", "1e300");
}

#[test]
fn absurd_token_counts_are_no_counts_and_the_answer_stands() {
    let server = FakeServer::start();
    let usage = |prompt: &str, completion: &str| {
        Step::Raw(format!(
            "data: {{\"choices\":[],\"usage\":{{\"prompt_tokens\":{prompt},\"completion_tokens\":{completion}}}}}\n\n"
        ))
    };
    for (prompt, completion) in [
        ("-1", "1.5"),
        ("1e300", "18446744073709551616"),
        ("18446744073709551615", "18446744073709551615"),
    ] {
        server.push(Reply::Sse(vec![
            chunk_content("Counted."),
            usage(prompt, completion),
            done(),
        ]));
    }
    let mut agent = agent_for(&server);
    let session = agent.new_session(&temp_dir("absurd-usage"));
    for _ in 0..3 {
        let (answer, _) = prompt(&mut agent, &session);
        assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
        let total = &answer["result"]["_meta"]["spindle"]["usage"]["totalTokens"];
        assert!(
            total.as_u64().is_none_or(|t| t <= 2_000_000_000),
            "{answer}"
        );
    }
    agent.close_stdin();
    assert!(agent.wait_exit(WAIT).is_some());
    let stderr = agent.stderr();
    assert!(!stderr.contains("panicked"), "{stderr}");
}

//! What a model call cost, against the fake OpenAI server: a gateway's
//! own report (the stream's `usage.cost`, or LiteLLM's
//! `x-litellm-response-cost` header) wins, then the configured price;
//! with neither the cost is unknown — absent from `usage_update`, null in
//! the prompt's `_meta`, "no price" in `/cost` — never 0.

use crate::support::fake_openai::{chunk_content, chunk_finish, chunk_role, done};
use crate::support::prelude::{approx, ok, ok_with};
use crate::support::{temp_dir, updates_text, Agent, FakeServer, Reply, Step};
use serde_json::{json, Value};
use std::path::PathBuf;

/// A fake server, a config with `fake/usd` (priced: 2 and 8 USD per
/// million tokens) and `fake/free` (no price), a database, a workspace.
struct Bench {
    server: FakeServer,
    root: PathBuf,
}

impl Bench {
    fn new(name: &str) -> Bench {
        let server = FakeServer::start();
        let root = temp_dir(name);
        let config = json!({
            "providers": {"fake": {"kind": "openai", "base_url": server.base_url(),
                                   "api_key_env": "FAKE_COST_KEY"}},
            "models": {
                "fake/usd": {"context_window": 64000,
                             "price": {"input": 2.0, "output": 8.0}},
                "fake/free": {"context_window": 32000},
            },
        });
        std::fs::write(root.join("config.json"), config.to_string()).unwrap();
        std::fs::create_dir_all(root.join("ws")).unwrap();
        Bench { server, root }
    }

    /// An agent on `model` with a session open: the agent and the session.
    fn session(&self, model: &str) -> (Agent, String) {
        let config = self.root.join("config.json");
        let db = self.root.join("sessions.db");
        let args = [
            "acp",
            "--config",
            config.to_str().unwrap(),
            "--db",
            db.to_str().unwrap(),
            "--model",
            model,
        ];
        let mut agent = Agent::spawn(&args, &[("FAKE_COST_KEY", "sk-cost")]);
        agent.initialize();
        let cwd = self.root.join("ws");
        let result = ok(
            &mut agent,
            "session/new",
            json!({"cwd": cwd.to_str().unwrap(), "mcpServers": []}),
        );
        let session = result["sessionId"].as_str().unwrap().to_string();
        (agent, session)
    }
}

impl Drop for Bench {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            let _ = std::fs::remove_dir_all(&self.root);
        }
    }
}

/// A text answer whose final usage chunk holds `usage` (tokens, and a
/// gateway's `cost` if the test puts one in).
fn answer(usage: Value) -> Vec<Step> {
    vec![
        chunk_role(),
        chunk_content("Done."),
        chunk_finish("stop"),
        Step::Event(json!({"choices": [], "usage": usage}).to_string()),
        done(),
    ]
}

/// The prompt's answer and the `usage_update`s before it.
fn prompt(agent: &mut Agent, session: &str, text: &str) -> (Value, Vec<Value>) {
    let (result, messages) = ok_with(
        agent,
        "session/prompt",
        json!({"sessionId": session, "prompt": [{"type": "text", "text": text}]}),
    );
    let usage = messages
        .iter()
        .filter(|m| m["method"] == "session/update")
        .map(|m| m["params"]["update"].clone())
        .filter(|u| u["sessionUpdate"] == "usage_update")
        .collect();
    (result, usage)
}

/// What `/cost` says.
fn cost_command(agent: &mut Agent, session: &str) -> String {
    let (_, messages) = ok_with(
        agent,
        "session/prompt",
        json!({"sessionId": session, "prompt": [{"type": "text", "text": "/cost"}]}),
    );
    updates_text(&messages, "agent_message_chunk")
}

fn turn_cost(result: &Value) -> &Value {
    &result["_meta"]["spindle"]["usage"]["cost"]
}

#[test]
fn the_cost_in_the_stream_usage_wins_over_the_price() {
    let bench = Bench::new("cost-stream");
    // Priced, 1000 + 100 tokens would be 0.0028; the gateway says 0.0421.
    bench.server.push(Reply::Sse(answer(
        json!({"prompt_tokens": 1000, "completion_tokens": 100, "cost": 0.0421}),
    )));
    let (mut agent, session) = bench.session("fake/usd");
    let (result, usage) = prompt(&mut agent, &session, "hi");
    assert_eq!(usage.len(), 1, "{usage:?}");
    approx(&usage[0]["cost"]["amount"], 0.0421);
    assert_eq!(usage[0]["cost"]["currency"], "USD");
    approx(turn_cost(&result), 0.0421);

    // On a model without a price, the report is the cost all the same.
    let bench = Bench::new("cost-stream-free");
    bench.server.push(Reply::Sse(answer(
        json!({"prompt_tokens": 10, "completion_tokens": 2, "cost": 0.0005}),
    )));
    let (mut agent, session) = bench.session("fake/free");
    let (result, usage) = prompt(&mut agent, &session, "hi");
    approx(&usage[0]["cost"]["amount"], 0.0005);
    approx(turn_cost(&result), 0.0005);
    let text = cost_command(&mut agent, &session);
    assert!(text.contains("Cost: 0.0005 USD."), "{text}");
}

#[test]
fn the_cost_header_counts_when_the_stream_has_none() {
    let bench = Bench::new("cost-header");
    let header = |value: &str| vec![("x-litellm-response-cost".to_string(), value.to_string())];
    bench.server.push(Reply::SseWithHeaders {
        headers: header("0.0125"),
        steps: answer(json!({"prompt_tokens": 10, "completion_tokens": 2})),
    });
    // Both: the stream's own figure is the call's.
    bench.server.push(Reply::SseWithHeaders {
        headers: header("9.5"),
        steps: answer(json!({"prompt_tokens": 10, "completion_tokens": 2, "cost": 0.5})),
    });
    let (mut agent, session) = bench.session("fake/free");
    let (result, usage) = prompt(&mut agent, &session, "one");
    approx(&usage[0]["cost"]["amount"], 0.0125);
    assert_eq!(usage[0]["cost"]["currency"], "USD");
    approx(turn_cost(&result), 0.0125);
    let (result, usage) = prompt(&mut agent, &session, "two");
    approx(turn_cost(&result), 0.5);
    // The session's total.
    approx(&usage[0]["cost"]["amount"], 0.5125);
}

#[test]
fn without_any_price_the_cost_is_unknown_not_zero() {
    let bench = Bench::new("cost-unknown");
    bench.server.push(Reply::Sse(answer(
        json!({"prompt_tokens": 10, "completion_tokens": 2}),
    )));
    // A header that is no number is no report.
    bench.server.push(Reply::SseWithHeaders {
        headers: vec![("x-litellm-response-cost".into(), "n/a".into())],
        steps: answer(json!({"prompt_tokens": 10, "completion_tokens": 2, "cost": -3})),
    });
    bench.server.push(Reply::Sse(answer(
        json!({"prompt_tokens": 10, "completion_tokens": 2, "cost": 0.25}),
    )));
    let (mut agent, session) = bench.session("fake/free");
    let (result, usage) = prompt(&mut agent, &session, "one");
    assert_eq!(usage.len(), 1, "{usage:?}");
    assert!(usage[0].get("cost").is_none(), "{:?}", usage[0]);
    assert_eq!(turn_cost(&result), &Value::Null, "{result}");
    assert_eq!(result["_meta"]["spindle"]["usage"]["inputTokens"], 10);
    let text = cost_command(&mut agent, &session);
    assert!(text.contains("no price for 1 of 1 model calls"), "{text}");
    assert!(!text.contains("0.0000"), "{text}");
    let status = ok(
        &mut agent,
        "_spindle/session/status",
        json!({"sessionId": session}),
    );
    assert_eq!(status["usage"]["cost"], Value::Null, "{status}");

    let (result, usage) = prompt(&mut agent, &session, "two");
    assert!(usage[0].get("cost").is_none(), "{:?}", usage[0]);
    assert_eq!(turn_cost(&result), &Value::Null, "{result}");

    // A priced call does not make the session's total known: the earlier
    // calls' cost is still unknown. The turn's own cost is known.
    let (result, usage) = prompt(&mut agent, &session, "three");
    assert!(usage[0].get("cost").is_none(), "{:?}", usage[0]);
    approx(turn_cost(&result), 0.25);
    let text = cost_command(&mut agent, &session);
    assert!(text.contains("no price for 2 of 3 model calls"), "{text}");
    assert!(text.contains("the other calls cost 0.2500 USD"), "{text}");

    // A model without a price and no call yet: no price, not 0.
    let (mut agent, session) = bench.session("fake/free");
    let text = cost_command(&mut agent, &session);
    assert!(text.contains("no price"), "{text}");
    assert!(!text.contains("0.0000"), "{text}");
}

#[test]
fn the_configured_price_counts_when_the_server_reports_none() {
    let bench = Bench::new("cost-price");
    bench.server.push(Reply::Sse(answer(
        json!({"prompt_tokens": 1000, "completion_tokens": 100}),
    )));
    bench.server.push(Reply::Sse(answer(
        json!({"prompt_tokens": 500, "completion_tokens": 10}),
    )));
    let (mut agent, session) = bench.session("fake/usd");
    // 1000 × 2 + 100 × 8 = 2800 per million
    let (result, usage) = prompt(&mut agent, &session, "one");
    approx(&usage[0]["cost"]["amount"], 0.0028);
    assert_eq!(usage[0]["cost"]["currency"], "USD");
    approx(turn_cost(&result), 0.0028);
    // + 500 × 2 + 10 × 8 = 1080
    let (result, usage) = prompt(&mut agent, &session, "two");
    approx(&usage[0]["cost"]["amount"], 0.00388);
    approx(turn_cost(&result), 0.00108);
    let text = cost_command(&mut agent, &session);
    assert!(text.contains("Cost: 0.0039 USD."), "{text}");
}

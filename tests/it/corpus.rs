//! The corpus of model slips (`tests/data/corpus/*.json`, one case a
//! file), each run through the real binary against a fake server of every
//! wire format Spindle speaks: Chat Completions, Anthropic Messages and
//! Responses. A case gives the workspace's files before, what the model
//! sent (a tool call with its arguments exactly as the provider streamed
//! them, or an answer's text), and what must follow: the files after, or
//! that nothing changed and what the model was told.
//!
//! Case fields: `about` (one line), `files` (path → text before), either
//! `call` (`name`, `arguments` as raw text) or `text` (the answer's text),
//! and `expect`: `files` (path → text after), `status` of the call
//! (`completed`, `failed`, or `none` when no call may run), `told` (words
//! the model must be told in the call's result), `shown` / `not_shown`
//! (words the answer's text shown to the editor must or must not hold),
//! and `unchanged: true` when no file may change.

use crate::support::fake_openai::{chat_text, chunk_finish, chunk_role, chunk_tool_call, done};
use crate::support::prelude::WAIT;
use crate::support::wire::{
    anthropic_answer, anthropic_end, anthropic_start, anthropic_tool_use, responses_answer,
    responses_completed, responses_created, responses_function_call, responses_usage,
};
use crate::support::{temp_dir, Agent, FakeServer, Reply, Step};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};

#[derive(Clone, Copy, Debug)]
enum Wire {
    Chat,
    Anthropic,
    Responses,
}

const WIRES: [Wire; 3] = [Wire::Chat, Wire::Anthropic, Wire::Responses];

/// The model's one answer: a tool call with raw arguments, or text.
fn answer(wire: Wire, case: &Value) -> Vec<Step> {
    if let Some(text) = case["text"].as_str() {
        return match wire {
            Wire::Chat => chat_text(&[text]),
            Wire::Anthropic => anthropic_answer(text, "end_turn"),
            Wire::Responses => responses_answer(text),
        };
    }
    let name = case["call"]["name"].as_str().unwrap();
    let arguments = case["call"]["arguments"].as_str().unwrap();
    match wire {
        Wire::Chat => vec![
            chunk_role(),
            chunk_tool_call(0, Some("call_1"), Some(name), arguments),
            chunk_finish("tool_calls"),
            done(),
        ],
        Wire::Anthropic => {
            let mut steps = vec![anthropic_start(10, 0)];
            steps.extend(anthropic_tool_use(0, "call_1", name, &[arguments]));
            steps.extend(anthropic_end("tool_use", 5));
            steps
        }
        Wire::Responses => {
            let mut steps = vec![responses_created()];
            steps.extend(responses_function_call(
                0,
                "fc_1",
                "call_1",
                name,
                &[arguments],
            ));
            steps.push(responses_completed(responses_usage(10, 0, 5, 0)));
            steps
        }
    }
}

fn done_answer(wire: Wire) -> Vec<Step> {
    match wire {
        Wire::Chat => chat_text(&["Done."]),
        Wire::Anthropic => anthropic_answer("Done.", "end_turn"),
        Wire::Responses => responses_answer("Done."),
    }
}

/// An agent on `server` speaking `wire`, approving everything (the
/// policy's own tests are elsewhere: this corpus is about the slips).
fn agent(wire: Wire, server: &FakeServer, dir: &Path) -> Agent {
    let (kind, base) = match wire {
        Wire::Chat => ("openai", server.base_url()),
        Wire::Anthropic => ("anthropic", format!("http://{}", server.address())),
        Wire::Responses => ("responses", server.base_url()),
    };
    let config = json!({
        "providers": {"fake": {"kind": kind, "base_url": base, "api_key_env": "CORPUS_KEY"}},
        "models": {"fake/model": {"context_window": 128000, "max_output_tokens": 4000}},
        "defaults": {"model": "fake/model"},
    });
    let path = dir.join("config.json");
    std::fs::write(&path, config.to_string()).unwrap();
    let mut agent = Agent::spawn(
        &[
            "acp",
            "--config",
            path.to_str().unwrap(),
            "--permissions",
            "yolo",
            "--retries",
            "0",
        ],
        &[("CORPUS_KEY", "k")],
    );
    agent.initialize();
    agent
}

/// The tool results a request carries back, in any of the three wire
/// formats: a `tool` message, a `tool_result` block, a
/// `function_call_output` item.
fn tool_results(value: &Value) -> Vec<&Value> {
    let mut found = Vec::new();
    let mut stack = vec![value];
    while let Some(value) = stack.pop() {
        match value {
            Value::Object(map) => {
                let is_result = map.get("role").is_some_and(|r| r == "tool")
                    || map
                        .get("type")
                        .is_some_and(|t| t == "tool_result" || t == "function_call_output");
                if is_result {
                    found.push(value);
                } else {
                    stack.extend(map.values());
                }
            }
            Value::Array(items) => stack.extend(items),
            _ => {}
        }
    }
    found
}

fn cases() -> Vec<(String, Value)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/corpus");
    let mut paths: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    paths.sort();
    paths
        .into_iter()
        .map(|path| {
            let text = std::fs::read_to_string(&path).unwrap();
            let case: Value = serde_json::from_str(&text)
                .unwrap_or_else(|err| panic!("{}: {err}", path.display()));
            (
                path.file_name().unwrap().to_string_lossy().into_owned(),
                case,
            )
        })
        .collect()
}

/// Runs one case on one wire; what went wrong, if anything.
fn run(name: &str, case: &Value, wire: Wire) -> Result<(), String> {
    let dir = temp_dir(&format!("corpus-{wire:?}"));
    let ws = dir.join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    for (path, text) in case["files"].as_object().into_iter().flatten() {
        let target = ws.join(path);
        std::fs::create_dir_all(target.parent().unwrap()).unwrap();
        std::fs::write(target, text.as_str().unwrap()).unwrap();
    }
    let server = FakeServer::start();
    server.push(Reply::Sse(answer(wire, case)));
    server.push(Reply::Sse(done_answer(wire)));
    let mut agent = agent(wire, &server, &dir);
    let session = agent.new_session(&ws);
    let id = agent.request(
        "session/prompt",
        json!({"sessionId": session, "prompt": [{"type": "text", "text": "Go."}]}),
    );
    let (response, messages) = agent.response(&id, WAIT);
    let said = || format!("{name} on {wire:?}");
    if response["result"]["stopReason"] != "end_turn" {
        return Err(format!("{}: the turn ended {response}", said()));
    }
    let expect = &case["expect"];
    // The call's last status and the text its result carried.
    let updates: Vec<&Value> = messages
        .iter()
        .filter(|m| m["method"] == "session/update")
        .map(|m| &m["params"]["update"])
        .filter(|u| u["sessionUpdate"] == "tool_call" || u["sessionUpdate"] == "tool_call_update")
        .collect();
    let status = updates
        .iter()
        .rev()
        .find_map(|u| u["status"].as_str())
        .unwrap_or("none");
    // What the model was told: the result as the next request carries it
    // (an edit's result is a diff for the editor, words for the model),
    // and any text the editor was shown.
    let mut told: String = updates
        .iter()
        .flat_map(|u| u["content"].as_array().into_iter().flatten())
        .filter_map(|c| c["content"]["text"].as_str())
        .collect::<Vec<_>>()
        .join("\n");
    for request in server.requests().iter().skip(1) {
        for result in tool_results(&request.body) {
            told.push('\n');
            told.push_str(&result.to_string());
        }
    }
    if let Some(wanted) = expect["status"].as_str() {
        if status != wanted {
            return Err(format!(
                "{}: status {status}, not {wanted}; told: {told}",
                said()
            ));
        }
    }
    for words in expect["told"].as_array().into_iter().flatten() {
        let words = words.as_str().unwrap();
        if !told.contains(words) {
            return Err(format!(
                "{}: the result does not say {words:?}: {told}",
                said()
            ));
        }
    }
    // What the editor was shown as the answer's text.
    let shown: String = messages
        .iter()
        .filter(|m| m["method"] == "session/update")
        .map(|m| &m["params"]["update"])
        .filter(|u| u["sessionUpdate"] == "agent_message_chunk")
        .filter_map(|u| u["content"]["text"].as_str())
        .collect();
    for words in expect["shown"].as_array().into_iter().flatten() {
        let words = words.as_str().unwrap();
        if !shown.contains(words) {
            return Err(format!("{}: not shown {words:?}: {shown}", said()));
        }
    }
    for words in expect["not_shown"].as_array().into_iter().flatten() {
        let words = words.as_str().unwrap();
        if shown.contains(words) {
            return Err(format!("{}: shown {words:?}: {shown}", said()));
        }
    }
    let after = |path: &str| std::fs::read_to_string(ws.join(path)).unwrap_or_default();
    for (path, text) in expect["files"].as_object().into_iter().flatten() {
        if after(path) != text.as_str().unwrap() {
            return Err(format!(
                "{}: {path} is\n{}\nnot\n{}\n(told: {told})",
                said(),
                after(path),
                text.as_str().unwrap()
            ));
        }
    }
    if expect["unchanged"] == true {
        for (path, text) in case["files"].as_object().into_iter().flatten() {
            if after(path) != text.as_str().unwrap() {
                return Err(format!("{}: {path} changed: {}", said(), after(path)));
            }
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}

#[test]
fn every_case_of_the_corpus_on_every_wire() {
    let cases = cases();
    assert!(!cases.is_empty());
    let mut failures = Vec::new();
    for (name, case) in &cases {
        for wire in WIRES {
            if let Err(why) = run(name, case, wire) {
                failures.push(why);
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} runs failed:\n\n{}",
        failures.len(),
        cases.len() * WIRES.len(),
        failures.join("\n\n")
    );
}

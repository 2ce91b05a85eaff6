//! Invariant 7 under attack: a model server that never stops streaming
//! small deltas, of text, of reasoning or of one tool call's arguments,
//! in each wire format. The turn must end (with `provider_response_too_large`,
//! the response cap) and the agent's peak memory (`VmHWM`) stay under
//! 64 MiB. The agent here is the debug build; its peak under these floods
//! is about 39 MiB (release: about 30 MiB, `scripts/bench --figure 9`), so
//! the bound is the design's own 64 MiB.

use crate::support::fake_openai::{chunk, Step};
use crate::support::prelude::SLOW_WAIT;
use crate::support::wire::named_event;
use crate::support::{temp_dir, updates_text, write_file, Agent};
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::path::Path;

/// The bound on the agent's peak RSS, in KiB.
const PEAK_KIB: u64 = 64 * 1024;
/// The default response cap (`limits.response_bytes`).
const CAP: usize = 4 * 1024 * 1024;

#[derive(Clone, Copy, Debug)]
enum Wire {
    Chat,
    Anthropic,
    Responses,
}

#[derive(Clone, Copy, Debug)]
enum Flood {
    Text,
    Reasoning,
    Arguments,
}

/// The bytes a step of the fake servers stands for.
fn bytes(step: Step) -> String {
    match step {
        Step::Event(payload) => format!("data: {payload}\n\n"),
        Step::Raw(raw) => raw,
        other => panic!("not a payload: {other:?}"),
    }
}

/// The opening events of a response of `wire`, and the delta event that
/// carries `piece` as `flood`.
fn stream_parts(wire: Wire, flood: Flood, piece: &str) -> (String, String) {
    let call_start = "{\"path\":\"flood.txt\",\"content\":\"";
    match wire {
        Wire::Chat => {
            let (start, delta) = match flood {
                Flood::Text => (
                    json!({"role": "assistant", "content": ""}),
                    json!({"content": piece}),
                ),
                Flood::Reasoning => (
                    json!({"role": "assistant", "content": ""}),
                    json!({"reasoning_content": piece}),
                ),
                Flood::Arguments => (
                    json!({"tool_calls": [{"index": 0, "id": "call_1", "type": "function",
                        "function": {"name": "write_file", "arguments": call_start}}]}),
                    json!({"tool_calls": [{"index": 0, "function": {"arguments": piece}}]}),
                ),
            };
            (bytes(chunk(start, None)), bytes(chunk(delta, None)))
        }
        Wire::Anthropic => {
            let (block, delta) = match flood {
                Flood::Text => (
                    json!({"type": "text", "text": ""}),
                    json!({"type": "text_delta", "text": piece}),
                ),
                Flood::Reasoning => (
                    json!({"type": "thinking", "thinking": "", "signature": ""}),
                    json!({"type": "thinking_delta", "thinking": piece}),
                ),
                Flood::Arguments => (
                    json!({"type": "tool_use", "id": "toolu_1", "name": "write_file", "input": {}}),
                    json!({"type": "input_json_delta", "partial_json": piece}),
                ),
            };
            let start = bytes(named_event(json!({"type": "message_start", "message": {
                "id": "msg_flood", "type": "message", "role": "assistant", "content": [],
                "usage": {"input_tokens": 10, "output_tokens": 1}}})))
                + &bytes(named_event(
                    json!({"type": "content_block_start", "index": 0, "content_block": block}),
                ));
            let delta =
                named_event(json!({"type": "content_block_delta", "index": 0, "delta": delta}));
            (start, bytes(delta))
        }
        Wire::Responses => {
            let mut start = bytes(named_event(json!({"type": "response.created",
                "response": {"id": "resp_flood", "status": "in_progress", "output": []}})));
            let delta = match flood {
                Flood::Text => json!({"type": "response.output_text.delta",
                    "item_id": "msg_1", "output_index": 0, "content_index": 0, "delta": piece}),
                Flood::Reasoning => json!({"type": "response.reasoning_text.delta",
                    "item_id": "rs_1", "output_index": 0, "content_index": 0, "delta": piece}),
                Flood::Arguments => {
                    start += &bytes(named_event(json!({"type": "response.output_item.added",
                        "output_index": 0, "item": {"id": "fc_1", "type": "function_call",
                        "call_id": "call_1", "name": "write_file", "arguments": call_start}})));
                    json!({"type": "response.function_call_arguments.delta",
                        "item_id": "fc_1", "output_index": 0, "delta": piece})
                }
            };
            (start, bytes(named_event(delta)))
        }
    }
}

/// A model server on 127.0.0.1 that answers every model call (any POST)
/// with the opening events and then the delta event forever, until the client goes
/// away (or 1 GB was sent, far past any cap). Returns its address.
fn flood_server(start: String, delta: String) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let address = listener.local_addr().unwrap().to_string();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let (start, delta) = (start.clone(), delta.clone());
            std::thread::spawn(move || {
                let mut reader = BufReader::new(stream.try_clone().unwrap());
                let mut first = String::new();
                let _ = reader.read_line(&mut first);
                let mut length = 0;
                let mut line = String::new();
                while reader.read_line(&mut line).is_ok_and(|n| n > 2) {
                    let lower = line.to_ascii_lowercase();
                    if let Some(value) = lower.strip_prefix("content-length:") {
                        length = value.trim().parse().unwrap_or(0);
                    }
                    line.clear();
                }
                let mut body = vec![0; length];
                if reader.read_exact(&mut body).is_err() {
                    return;
                }
                let mut out = std::io::BufWriter::new(stream);
                // Only model calls are flooded: a model list is refused.
                if !first.starts_with("POST ") {
                    let _ = out.write_all(
                        b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
                    );
                    return;
                }
                let head = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n";
                if out.write_all(head.as_bytes()).is_err()
                    || out.write_all(start.as_bytes()).is_err()
                {
                    return;
                }
                let mut sent = 0;
                while sent < 1 << 30 && out.write_all(delta.as_bytes()).is_ok() {
                    sent += delta.len();
                }
            });
        }
    });
    address
}

/// An agent whose one model is served by `address` in `wire`'s format.
fn agent_for(wire: Wire, address: &str) -> Agent {
    agent_with_limits(wire, address, json!({}))
}

/// Like `agent_for`, with `limits` in the config file.
fn agent_with_limits(wire: Wire, address: &str, limits: Value) -> Agent {
    let (kind, base_url) = match wire {
        Wire::Chat => ("openai", format!("http://{address}/v1")),
        Wire::Anthropic => ("anthropic", format!("http://{address}")),
        Wire::Responses => ("responses", format!("http://{address}/v1")),
    };
    let config = json!({
        "providers": {"flood": {"kind": kind, "base_url": base_url, "api_key_env": "FLOOD_KEY"}},
        "models": {"flood/flood-model": {"context_window": 200000, "max_output_tokens": 16000}},
        "limits": limits,
    });
    let config = write_file(
        &temp_dir("memory-config"),
        "config.json",
        config.to_string(),
    );
    let mut agent = Agent::spawn(
        &[
            "acp",
            "--config",
            config.to_str().unwrap(),
            "--model",
            "flood/flood-model",
            "--retries",
            "0",
        ],
        &[("FLOOD_KEY", "sk-flood")],
    );
    agent.initialize();
    agent
}

/// The agent's peak resident memory so far, in KiB.
fn peak_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmHWM:"))
        .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or_else(|| panic!("no VmHWM in {status}"))
}

/// Floods one prompt with `piece` deltas and checks the turn's end and
/// the agent's peak memory; returns the messages streamed meanwhile.
fn flood(wire: Wire, kind: Flood, piece: &str) -> Vec<Value> {
    let (start, delta) = stream_parts(wire, kind, piece);
    let address = flood_server(start, delta);
    let mut agent = agent_for(wire, &address);
    let dir = temp_dir("memory-ws");
    let session = agent.new_session(&dir);
    let id = agent.request(
        "session/prompt",
        json!({"sessionId": session, "prompt": [{"type": "text", "text": "go"}]}),
    );
    let (answer, streamed) = agent.response(&id, SLOW_WAIT);
    assert_eq!(
        answer["error"]["data"]["code"], "provider_response_too_large",
        "{wire:?} {kind:?}: {answer}"
    );
    let peak = peak_kib(agent.pid());
    assert!(
        peak < PEAK_KIB,
        "{wire:?} {kind:?}: peak RSS {peak} KiB, over {PEAK_KIB} KiB"
    );
    // The agent goes on: it answers the next request.
    let listed = agent.request("session/list", json!({"cwd": dir_str(&dir)}));
    let (list, _) = agent.response(&listed, SLOW_WAIT);
    assert!(list["result"]["sessions"].is_array(), "{list}");
    streamed
}

fn dir_str(dir: &Path) -> &str {
    dir.to_str().unwrap()
}

/// What a flood showed of the text or thought: some of it, never more
/// than the cap.
fn assert_shown(streamed: &[Value], kind: &str, wire: Wire) {
    let shown = updates_text(streamed, kind);
    assert!(
        !shown.is_empty() && shown.len() <= CAP,
        "{wire:?}: {} bytes of {kind}",
        shown.len()
    );
}

fn words() -> String {
    "lorem ipsum ".repeat(1000 / 12)
}

fn each_flood(wire: Wire) {
    let streamed = flood(wire, Flood::Text, &words());
    assert_shown(&streamed, "agent_message_chunk", wire);
    let streamed = flood(wire, Flood::Reasoning, &words());
    assert_shown(&streamed, "agent_thought_chunk", wire);
    let streamed = flood(wire, Flood::Arguments, &words());
    assert!(
        !streamed
            .iter()
            .any(|m| m["params"]["update"]["sessionUpdate"] == "tool_call"),
        "{wire:?}: a call cut off at the cap must not run"
    );
}

#[test]
#[cfg_attr(windows, ignore = "reads /proc")]
fn endless_chat_completions_deltas_end_at_the_cap_within_64_mib() {
    each_flood(Wire::Chat);
    // Control characters: six bytes each wherever the text is JSON.
    let streamed = flood(Wire::Chat, Flood::Text, &"\u{1}".repeat(1000));
    let shown = updates_text(&streamed, "agent_message_chunk");
    assert!(
        !shown.is_empty() && shown.len() * 6 <= CAP,
        "{}",
        shown.len()
    );
}

#[test]
#[cfg_attr(windows, ignore = "reads /proc")]
fn endless_anthropic_deltas_end_at_the_cap_within_64_mib() {
    each_flood(Wire::Anthropic);
}

#[test]
#[cfg_attr(windows, ignore = "reads /proc")]
fn endless_responses_deltas_end_at_the_cap_within_64_mib() {
    each_flood(Wire::Responses);
}

/// Both response caps come from the config file: what a response holds
/// (`limits.response_bytes`), and what it sends (`limits.stream_bytes`),
/// which ends a stream of events that carry nothing to keep.
#[test]
fn the_response_caps_come_from_the_config() {
    let (start, delta) = stream_parts(Wire::Chat, Flood::Text, &words());
    let address = flood_server(start.clone(), delta);
    let mut agent = agent_with_limits(Wire::Chat, &address, json!({"response_bytes": 20000}));
    let session = agent.new_session(&temp_dir("memory-ws"));
    let id = agent.request(
        "session/prompt",
        json!({"sessionId": session, "prompt": [{"type": "text", "text": "go"}]}),
    );
    let (answer, streamed) = agent.response(&id, SLOW_WAIT);
    assert_eq!(
        answer["error"]["data"]["code"], "provider_response_too_large",
        "{answer}"
    );
    let shown = updates_text(&streamed, "agent_message_chunk");
    assert!(!shown.is_empty() && shown.len() <= 20000, "{}", shown.len());

    // Empty deltas forever: nothing is held, the bytes received end it.
    let empty = bytes(chunk(json!({"content": ""}), None));
    let address = flood_server(start, empty);
    let mut agent = agent_with_limits(Wire::Chat, &address, json!({"stream_bytes": 1_000_000}));
    let session = agent.new_session(&temp_dir("memory-ws"));
    let id = agent.request(
        "session/prompt",
        json!({"sessionId": session, "prompt": [{"type": "text", "text": "go"}]}),
    );
    let (answer, _) = agent.response(&id, SLOW_WAIT);
    assert_eq!(
        answer["error"]["data"]["code"], "provider_response_too_large",
        "{answer}"
    );
    assert!(
        answer["error"]["message"]
            .as_str()
            .unwrap_or("")
            .contains("1000000 bytes of events"),
        "{answer}"
    );
}

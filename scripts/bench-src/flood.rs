//! Figure 9, endless responses: a model server that never stops streaming
//! small deltas of text, of reasoning or of one tool call's arguments, in
//! each wire format, and the agent's peak RSS until it gives the response
//! up (`provider_response_too_large`).

use crate::chat_server::{not_found, read_request};
use serde_json::{json, Value};
use std::io::{BufWriter, Write};
use std::net::TcpListener;
use std::thread;
use std::time::Duration;

/// The wire formats a model server speaks.
#[derive(Clone, Copy)]
pub(crate) enum Wire {
    Chat,
    Anthropic,
    Responses,
}

/// What the endless deltas carry.
#[derive(Clone, Copy)]
pub(crate) enum Flood {
    Content,
    Reasoning,
    Arguments,
}

impl Wire {
    pub(crate) const ALL: [Wire; 3] = [Wire::Chat, Wire::Anthropic, Wire::Responses];

    pub(crate) fn name(self) -> &'static str {
        match self {
            Wire::Chat => "Chat Completions",
            Wire::Anthropic => "Anthropic Messages",
            Wire::Responses => "Responses",
        }
    }

    /// The provider kind in the config file.
    fn kind(self) -> &'static str {
        match self {
            Wire::Chat => "openai",
            Wire::Anthropic => "anthropic",
            Wire::Responses => "responses",
        }
    }

    /// The base URL the provider is given for a server at `address`.
    fn base_url(self, address: &str) -> String {
        match self {
            Wire::Anthropic => format!("http://{address}"),
            _ => format!("http://{address}/v1"),
        }
    }
}

impl Flood {
    pub(crate) const ALL: [Flood; 3] = [Flood::Content, Flood::Reasoning, Flood::Arguments];

    pub(crate) fn name(self) -> &'static str {
        match self {
            Flood::Content => "content",
            Flood::Reasoning => "reasoning",
            Flood::Arguments => "tool-call arguments",
        }
    }
}

/// One SSE event: its `event:` line when the format names events.
fn event(wire: Wire, data: &Value) -> String {
    match wire {
        Wire::Chat => format!("data: {data}\n\n"),
        _ => format!(
            "event: {}\ndata: {data}\n\n",
            data["type"].as_str().unwrap_or("")
        ),
    }
}

/// The events before the deltas, and one delta event carrying `text`.
fn stream_parts(wire: Wire, flood: Flood, text: &str) -> (String, String) {
    let chat = |delta: Value| {
        json!({"id": "chatcmpl-flood", "object": "chat.completion.chunk",
               "choices": [{"index": 0, "delta": delta, "finish_reason": null}]})
    };
    let call = "{\"path\":\"flood.txt\",\"content\":\"";
    match wire {
        Wire::Chat => {
            let (start, delta) = match flood {
                Flood::Content => (
                    chat(json!({"role": "assistant", "content": ""})),
                    chat(json!({"content": text})),
                ),
                Flood::Reasoning => (
                    chat(json!({"role": "assistant", "content": ""})),
                    chat(json!({"reasoning_content": text})),
                ),
                Flood::Arguments => (
                    chat(
                        json!({"tool_calls": [{"index": 0, "id": "call_1", "type": "function",
                        "function": {"name": "write_file", "arguments": call}}]}),
                    ),
                    chat(json!({"tool_calls": [{"index": 0, "function": {"arguments": text}}]})),
                ),
            };
            (event(wire, &start), event(wire, &delta))
        }
        Wire::Anthropic => {
            let (block, delta) = match flood {
                Flood::Content => (
                    json!({"type": "text", "text": ""}),
                    json!({"type": "text_delta", "text": text}),
                ),
                Flood::Reasoning => (
                    json!({"type": "thinking", "thinking": "", "signature": ""}),
                    json!({"type": "thinking_delta", "thinking": text}),
                ),
                Flood::Arguments => (
                    json!({"type": "tool_use", "id": "toolu_1", "name": "write_file", "input": {}}),
                    json!({"type": "input_json_delta", "partial_json": text}),
                ),
            };
            let start = event(
                wire,
                &json!({"type": "message_start", "message": {"id": "msg_flood", "type": "message",
                    "role": "assistant", "content": [], "usage": {"input_tokens": 10, "output_tokens": 1}}}),
            ) + &event(
                wire,
                &json!({"type": "content_block_start", "index": 0, "content_block": block}),
            );
            let delta = json!({"type": "content_block_delta", "index": 0, "delta": delta});
            (start, event(wire, &delta))
        }
        Wire::Responses => {
            let mut start = event(
                wire,
                &json!({"type": "response.created", "response": {"id": "resp_flood",
                    "status": "in_progress", "output": []}}),
            );
            let delta = match flood {
                Flood::Content => json!({"type": "response.output_text.delta",
                    "item_id": "msg_1", "output_index": 0, "content_index": 0, "delta": text}),
                Flood::Reasoning => json!({"type": "response.reasoning_text.delta",
                    "item_id": "rs_1", "output_index": 0, "content_index": 0, "delta": text}),
                Flood::Arguments => {
                    start += &event(
                        wire,
                        &json!({"type": "response.output_item.added", "output_index": 0,
                            "item": {"id": "fc_1", "type": "function_call", "call_id": "call_1",
                                     "name": "write_file", "arguments": call}}),
                    );
                    json!({"type": "response.function_call_arguments.delta",
                        "item_id": "fc_1", "output_index": 0, "delta": text})
                }
            };
            (start, event(wire, &delta))
        }
    }
}

/// A model server that answers every model call (any POST) with `wire`'s
/// opening events and then the same delta event, again and again, until the client
/// goes away (or 4 GB were sent). Returns the base URL.
pub(crate) fn flood_server(wire: Wire, flood: Flood, text: &str) -> Result<String, String> {
    let listener = TcpListener::bind("127.0.0.1:0").map_err(|e| format!("cannot bind: {e}"))?;
    let address = listener.local_addr().map_err(|e| e.to_string())?;
    let (start, delta) = stream_parts(wire, flood, text);
    thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let (start, delta) = (start.clone(), delta.clone());
            thread::spawn(move || {
                let Ok(request) = read_request(&mut stream, Duration::from_secs(120)) else {
                    return;
                };
                // Only model calls are flooded: a model list is refused.
                if !request.line.starts_with("POST ") {
                    not_found(&mut stream);
                    return;
                }
                let mut out = BufWriter::with_capacity(64 * 1024, stream);
                let head = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n";
                if out.write_all(head.as_bytes()).is_err()
                    || out.write_all(start.as_bytes()).is_err()
                {
                    return;
                }
                let mut sent = 0usize;
                while sent < 4 << 30 {
                    if out.write_all(delta.as_bytes()).is_err() {
                        return;
                    }
                    sent += delta.len();
                }
            });
        }
    });
    Ok(wire.base_url(&address.to_string()))
}

/// The config file of an agent whose model `flood/bench-model` is served
/// by `base_url` in `wire`'s format.
pub(crate) fn flood_config(wire: Wire, base_url: &str) -> Value {
    json!({
        "providers": {"flood": {"kind": wire.kind(), "base_url": base_url,
                                "api_key_env": "FLOOD_BENCH_KEY"}},
        "models": {"flood/bench-model": {"context_window": 200000, "max_output_tokens": 16000}},
    })
}

//! Builders of Anthropic Messages and OpenAI Responses stream payloads
//! (WIRE.md §3 and §4), plus a Chat Completions usage chunk with cache and
//! reasoning details, as `Step`s ready to put in a `Reply::Sse`.
//!
//! Anthropic and Responses events are written with their `event:` line, as
//! the real servers send them; the JSON `type` repeats the name.

use serde_json::{json, Value};

use super::fake_openai::Step;

/// One named SSE event: `event: {type}\ndata: {json}\n\n`.
pub fn named_event(value: Value) -> Step {
    let name = value["type"].as_str().unwrap_or("message").to_string();
    Step::Raw(format!("event: {name}\ndata: {value}\n\n"))
}

/// A Chat Completions usage chunk (`choices: []`) with cached prompt
/// tokens and reasoning tokens filled in.
pub fn chat_usage(prompt: u64, completion: u64, cached: u64, reasoning: u64) -> Step {
    Step::Event(
        json!({
            "id": "chatcmpl-fake",
            "object": "chat.completion.chunk",
            "created": 1_767_000_000,
            "model": "fake-model",
            "choices": [],
            "usage": {
                "prompt_tokens": prompt,
                "completion_tokens": completion,
                "total_tokens": prompt + completion,
                "prompt_tokens_details": {"cached_tokens": cached},
                "completion_tokens_details": {"reasoning_tokens": reasoning},
            },
        })
        .to_string(),
    )
}

// ---------------------------------------------------------------------
// Anthropic Messages
// ---------------------------------------------------------------------

/// `message_start` with the input side of the usage.
pub fn anthropic_start(input_tokens: u64, cache_read: u64) -> Step {
    named_event(json!({
        "type": "message_start",
        "message": {
            "id": "msg_fake", "type": "message", "role": "assistant",
            "model": "claude-fake", "content": [],
            "stop_reason": null, "stop_sequence": null,
            "usage": {
                "input_tokens": input_tokens,
                "cache_creation_input_tokens": 0,
                "cache_read_input_tokens": cache_read,
                "output_tokens": 1,
            },
        },
    }))
}

/// `ping`, which may come at any time.
pub fn anthropic_ping() -> Step {
    named_event(json!({"type": "ping"}))
}

/// A whole thinking block: start, one `thinking_delta` per piece, the
/// `signature_delta`, stop.
pub fn anthropic_thinking(index: u64, pieces: &[&str], signature: &str) -> Vec<Step> {
    let mut steps = vec![named_event(json!({
        "type": "content_block_start", "index": index,
        "content_block": {"type": "thinking", "thinking": "", "signature": ""},
    }))];
    for piece in pieces {
        steps.push(named_event(json!({
            "type": "content_block_delta", "index": index,
            "delta": {"type": "thinking_delta", "thinking": piece},
        })));
    }
    steps.push(named_event(json!({
        "type": "content_block_delta", "index": index,
        "delta": {"type": "signature_delta", "signature": signature},
    })));
    steps.push(anthropic_block_stop(index));
    steps
}

/// A whole text block: start, one `text_delta` per piece, stop.
pub fn anthropic_text(index: u64, pieces: &[&str]) -> Vec<Step> {
    let mut steps = vec![named_event(json!({
        "type": "content_block_start", "index": index,
        "content_block": {"type": "text", "text": ""},
    }))];
    for piece in pieces {
        steps.push(named_event(json!({
            "type": "content_block_delta", "index": index,
            "delta": {"type": "text_delta", "text": piece},
        })));
    }
    steps.push(anthropic_block_stop(index));
    steps
}

/// A whole `tool_use` block: start (with the placeholder `input: {}`), one
/// `input_json_delta` per piece of the arguments, stop.
pub fn anthropic_tool_use(index: u64, id: &str, name: &str, json_pieces: &[&str]) -> Vec<Step> {
    let mut steps = vec![named_event(json!({
        "type": "content_block_start", "index": index,
        "content_block": {"type": "tool_use", "id": id, "name": name, "input": {}},
    }))];
    for piece in json_pieces {
        steps.push(named_event(json!({
            "type": "content_block_delta", "index": index,
            "delta": {"type": "input_json_delta", "partial_json": piece},
        })));
    }
    steps.push(anthropic_block_stop(index));
    steps
}

pub fn anthropic_block_stop(index: u64) -> Step {
    named_event(json!({"type": "content_block_stop", "index": index}))
}

/// `message_delta` with the stop reason and the final output count, then
/// `message_stop`.
pub fn anthropic_end(stop_reason: &str, output_tokens: u64) -> Vec<Step> {
    vec![
        named_event(json!({
            "type": "message_delta",
            "delta": {"stop_reason": stop_reason, "stop_sequence": null},
            "usage": {"output_tokens": output_tokens},
        })),
        named_event(json!({"type": "message_stop"})),
    ]
}

/// A complete answer of one text block ending for `stop_reason`.
pub fn anthropic_answer(text: &str, stop_reason: &str) -> Vec<Step> {
    let mut steps = vec![anthropic_start(10, 0)];
    steps.extend(anthropic_text(0, &[text]));
    steps.extend(anthropic_end(stop_reason, 3));
    steps
}

/// An `error` event sent after the 200, such as `overloaded_error`.
pub fn anthropic_stream_error(kind: &str, message: &str) -> Step {
    named_event(json!({"type": "error", "error": {"type": kind, "message": message}}))
}

/// An Anthropic error body: `{"type":"error","error":{"type":…,"message":…}}`.
pub fn anthropic_error_body(kind: &str, message: &str) -> String {
    json!({"type": "error", "error": {"type": kind, "message": message}, "request_id": "req_fake"})
        .to_string()
}

// ---------------------------------------------------------------------
// OpenAI Responses
// ---------------------------------------------------------------------

/// `response.created`.
pub fn responses_created() -> Step {
    named_event(json!({
        "type": "response.created", "sequence_number": 0,
        "response": {"id": "resp_fake", "object": "response", "status": "in_progress",
                     "output": [], "usage": null},
    }))
}

/// A reasoning item with one summary paragraph streamed in `pieces`; the
/// finished item carries `encrypted`. Returns the steps and the finished
/// item (what must be replayed).
pub fn responses_reasoning(
    output_index: u64,
    id: &str,
    pieces: &[&str],
    encrypted: &str,
) -> (Vec<Step>, Value) {
    let summary: String = pieces.concat();
    let done = json!({
        "id": id, "type": "reasoning",
        "summary": [{"type": "summary_text", "text": summary}],
        "encrypted_content": encrypted,
    });
    let mut steps = vec![
        named_event(json!({
            "type": "response.output_item.added", "output_index": output_index,
            "item": {"id": id, "type": "reasoning", "summary": []},
        })),
        named_event(json!({
            "type": "response.reasoning_summary_part.added", "item_id": id,
            "output_index": output_index, "summary_index": 0,
            "part": {"type": "summary_text", "text": ""},
        })),
    ];
    for piece in pieces {
        steps.push(named_event(json!({
            "type": "response.reasoning_summary_text.delta", "item_id": id,
            "output_index": output_index, "summary_index": 0, "delta": piece,
        })));
    }
    steps.push(named_event(json!({
        "type": "response.output_item.done", "output_index": output_index, "item": done,
    })));
    (steps, done)
}

/// An assistant message item with its text streamed in `pieces`.
pub fn responses_message(output_index: u64, id: &str, pieces: &[&str]) -> Vec<Step> {
    let text: String = pieces.concat();
    let mut steps = vec![named_event(json!({
        "type": "response.output_item.added", "output_index": output_index,
        "item": {"id": id, "type": "message", "role": "assistant",
                 "status": "in_progress", "content": []},
    }))];
    for piece in pieces {
        steps.push(named_event(json!({
            "type": "response.output_text.delta", "item_id": id,
            "output_index": output_index, "content_index": 0,
            "delta": piece, "logprobs": [],
        })));
    }
    steps.push(named_event(json!({
        "type": "response.output_item.done", "output_index": output_index,
        "item": {"id": id, "type": "message", "role": "assistant", "status": "completed",
                 "content": [{"type": "output_text", "text": text, "annotations": []}]},
    })));
    steps
}

/// A function call item (`fc_…` item id, `call_…` call id) with its
/// arguments streamed in `pieces`.
pub fn responses_function_call(
    output_index: u64,
    item_id: &str,
    call_id: &str,
    name: &str,
    pieces: &[&str],
) -> Vec<Step> {
    let arguments: String = pieces.concat();
    let mut steps = vec![named_event(json!({
        "type": "response.output_item.added", "output_index": output_index,
        "item": {"id": item_id, "type": "function_call", "call_id": call_id,
                 "name": name, "arguments": "", "status": "in_progress"},
    }))];
    for piece in pieces {
        steps.push(named_event(json!({
            "type": "response.function_call_arguments.delta", "item_id": item_id,
            "output_index": output_index, "delta": piece,
        })));
    }
    steps.push(named_event(json!({
        "type": "response.function_call_arguments.done", "item_id": item_id,
        "output_index": output_index, "arguments": arguments,
    })));
    steps.push(named_event(json!({
        "type": "response.output_item.done", "output_index": output_index,
        "item": {"id": item_id, "type": "function_call", "call_id": call_id,
                 "name": name, "arguments": arguments, "status": "completed"},
    })));
    steps
}

/// The usage object of a finished response.
pub fn responses_usage(input: u64, cached: u64, output: u64, reasoning: u64) -> Value {
    json!({
        "input_tokens": input,
        "input_tokens_details": {"cached_tokens": cached},
        "output_tokens": output,
        "output_tokens_details": {"reasoning_tokens": reasoning},
        "total_tokens": input + output,
    })
}

/// `response.completed` with the usage.
pub fn responses_completed(usage: Value) -> Step {
    named_event(json!({
        "type": "response.completed",
        "response": {"id": "resp_fake", "object": "response", "status": "completed",
                     "usage": usage},
    }))
}

/// `response.incomplete` for `reason` (`max_output_tokens`,
/// `content_filter`).
pub fn responses_incomplete(reason: &str, usage: Value) -> Step {
    named_event(json!({
        "type": "response.incomplete",
        "response": {"id": "resp_fake", "object": "response", "status": "incomplete",
                     "incomplete_details": {"reason": reason}, "usage": usage},
    }))
}

/// A complete answer of one text message, completed.
pub fn responses_answer(text: &str) -> Vec<Step> {
    let mut steps = vec![responses_created()];
    steps.extend(responses_message(0, "msg_fake", &[text]));
    steps.push(responses_completed(responses_usage(10, 0, 3, 0)));
    steps
}

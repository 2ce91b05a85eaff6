//! Builders of OpenAI Chat Completions stream payloads (WIRE.md §2), as
//! `Step`s ready to put in a `Reply::Sse`.

use serde_json::{json, Value};

use super::Step;

/// A `chat.completion.chunk` with one choice carrying `delta` and
/// `finish_reason` (null when `None`), and `"usage": null` as servers send
/// it when usage was requested.
pub fn chunk(delta: Value, finish_reason: Option<&str>) -> Step {
    Step::Event(
        json!({
            "id": "chatcmpl-fake",
            "object": "chat.completion.chunk",
            "created": 1_767_000_000,
            "model": "fake-model",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}],
            "usage": null,
        })
        .to_string(),
    )
}

/// The opening chunk: `delta: {"role":"assistant","content":""}`.
pub fn chunk_role() -> Step {
    chunk(json!({"role": "assistant", "content": ""}), None)
}

/// A text delta.
pub fn chunk_content(text: &str) -> Step {
    chunk(json!({"content": text}), None)
}

/// A reasoning delta in `delta.reasoning_content` (DeepSeek, llama.cpp).
pub fn chunk_reasoning(text: &str) -> Step {
    chunk(json!({"reasoning_content": text}), None)
}

/// A tool-call delta. The first delta of a call carries `id` and `name`;
/// later ones only append `arguments`.
pub fn chunk_tool_call(index: u32, id: Option<&str>, name: Option<&str>, arguments: &str) -> Step {
    let mut call = json!({"index": index, "function": {"arguments": arguments}});
    if let Some(id) = id {
        call["id"] = json!(id);
        call["type"] = json!("function");
    }
    if let Some(name) = name {
        call["function"]["name"] = json!(name);
    }
    chunk(json!({"tool_calls": [call]}), None)
}

/// The chunk that ends the choice: empty delta, `finish_reason` set.
pub fn chunk_finish(reason: &str) -> Step {
    chunk(json!({}), Some(reason))
}

/// The usage chunk sent with `stream_options.include_usage`: `choices: []`.
pub fn chunk_usage(prompt_tokens: u64, completion_tokens: u64) -> Step {
    Step::Event(
        json!({
            "id": "chatcmpl-fake",
            "object": "chat.completion.chunk",
            "created": 1_767_000_000,
            "model": "fake-model",
            "choices": [],
            "usage": {
                "prompt_tokens": prompt_tokens,
                "completion_tokens": completion_tokens,
                "total_tokens": prompt_tokens + completion_tokens,
                "prompt_tokens_details": {"cached_tokens": 0},
                "completion_tokens_details": {"reasoning_tokens": 0},
            },
        })
        .to_string(),
    )
}

/// A mid-stream error event, as OpenAI sends after a 200.
pub fn chunk_error(message: &str, code: &str) -> Step {
    Step::Event(
        json!({"error": {"message": message, "type": "server_error", "param": null, "code": code}})
            .to_string(),
    )
}

/// The terminal marker `data: [DONE]`.
pub fn done() -> Step {
    Step::Raw("data: [DONE]\n\n".to_string())
}

/// A complete text answer: role chunk, one content delta per text, a
/// `stop` chunk, a usage chunk, `[DONE]`.
pub fn chat_text(texts: &[&str]) -> Vec<Step> {
    let mut steps = vec![chunk_role()];
    steps.extend(texts.iter().map(|text| chunk_content(text)));
    steps.push(chunk_finish("stop"));
    steps.push(chunk_usage(10, texts.len() as u64));
    steps.push(done());
    steps
}

/// A complete tool-call answer: role chunk, each call as one delta
/// (`call_1`, `call_2`, …), a `tool_calls` finish, usage, `[DONE]`.
pub fn chat_tool_calls(calls: &[(&str, Value)]) -> Vec<Step> {
    let mut steps = vec![chunk_role()];
    for (index, (name, arguments)) in calls.iter().enumerate() {
        let id = format!("call_{}", index + 1);
        steps.push(chunk_tool_call(
            index as u32,
            Some(&id),
            Some(name),
            &arguments.to_string(),
        ));
    }
    steps.push(chunk_finish("tool_calls"));
    steps.push(chunk_usage(10, 5));
    steps.push(done());
    steps
}

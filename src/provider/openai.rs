//! OpenAI Chat Completions, streamed: the wire format spoken by OpenAI and
//! by most local and hosted compatible servers (Ollama, llama.cpp, vLLM,
//! DeepSeek, OpenRouter...).

use super::http::{EventStream, Timeouts, WireState};
use super::sse::SseEvent;
use super::ImageData;
use super::{
    json_len, value_held, Finish, Message, ModelRequest, Outcome, Provider, ProviderError, Role,
    Sink, StreamError, ToolCallRequest, Usage,
};
use crate::cancel::CancelToken;
use serde::Deserialize;
use serde_json::{json, Value};
use std::borrow::Cow;

pub(crate) struct ChatCompletions {
    pub base_url: String,
    pub api_key: Option<String>,
    pub timeouts: Timeouts,
    /// What its HTTPS connections trust (the config's).
    pub trust: crate::net::Trust,
    /// A local server's own token count, when it has one.
    pub tokenizer: super::tokenize::Tokenizer,
}

impl ChatCompletions {
    fn body(&self, request: &ModelRequest<'_>) -> Value {
        let mut messages = Vec::with_capacity(request.messages.len() + 1);
        messages.push(json!({ "role": "system", "content": request.system }));
        // Strict chat templates take no user message after a user message.
        for message in crate::conversation::alternating(request.messages).iter() {
            messages.push(message_json(message));
        }
        let mut body = json!({
            "model": request.model,
            "stream": true,
            "stream_options": { "include_usage": true },
            "messages": messages,
        });
        if let Some(max) = request.max_output_tokens {
            body["max_completion_tokens"] = json!(max);
        }
        if let Some(effort) = request.effort {
            body["reasoning_effort"] = json!(effort);
        }
        if !request.tools.is_empty() {
            let tools: Vec<Value> = request
                .tools
                .iter()
                .map(|tool| {
                    json!({
                        "type": "function",
                        "function": {
                            "name": tool.name,
                            "description": tool.description,
                            "parameters": tool.parameters,
                        }
                    })
                })
                .collect();
            body["tools"] = Value::Array(tools);
            body["tool_choice"] = json!("auto");
        }
        body
    }
}

fn message_json(message: &Message) -> Value {
    match message.role {
        Role::User if message.images.is_empty() => {
            json!({ "role": "user", "content": message.text })
        }
        Role::User => {
            let mut parts = vec![json!({"type": "text", "text": message.text})];
            for image in &message.images {
                if let Some(url) = image.data_url() {
                    parts.push(json!({"type": "image_url", "image_url": {"url": url}}));
                }
            }
            json!({ "role": "user", "content": parts })
        }
        Role::Assistant => {
            let mut value = json!({ "role": "assistant", "content": message.text });
            if !message.tool_calls.is_empty() {
                if message.text.is_empty() {
                    value["content"] = Value::Null;
                }
                value["tool_calls"] = message
                    .tool_calls
                    .iter()
                    .map(|call| {
                        json!({
                            "id": call.id,
                            "type": "function",
                            "function": { "name": call.name, "arguments": call.arguments },
                        })
                    })
                    .collect();
                // Servers that stream reasoning (DeepSeek, vLLM, llama.cpp)
                // want it back on assistant messages that call tools.
                // Under the name it came in (newer vLLM reads `reasoning`).
                if !message.thought.is_empty() {
                    let field = match message.provider_data["chat"]["reasoning_field"].as_str() {
                        Some("reasoning") => "reasoning",
                        _ => "reasoning_content",
                    };
                    value[field] = json!(message.thought);
                }
            }
            // Signed or encrypted reasoning a gateway handed over goes back
            // exactly as it came, on every assistant message that had it.
            for key in OPAQUE_FIELDS {
                let kept = &message.provider_data["chat"][key];
                if kept.as_array().is_some_and(|items| !items.is_empty()) {
                    value[key] = kept.clone();
                }
            }
            value
        }
        Role::Tool => json!({
            "role": "tool",
            "tool_call_id": message.tool_call_id.as_deref().unwrap_or(""),
            "content": message.text,
        }),
    }
}

/// The reasoning fields of Chat Completions that gateways fill with opaque
/// data that must be sent back verbatim: `thinking_blocks` (LiteLLM's
/// Anthropic thinking, text plus signature, or redacted data) and
/// `reasoning_details` (OpenRouter's reasoning items, signed or
/// encrypted).
const OPAQUE_FIELDS: [&str; 2] = ["thinking_blocks", "reasoning_details"];

/// Opaque reasoning collected from a stream, block by block.
#[derive(Default)]
pub(crate) struct Opaque {
    thinking_blocks: Vec<Value>,
    reasoning_details: Vec<Value>,
    /// Whether the reasoning text came as `reasoning` rather than
    /// `reasoning_content`.
    reasoning_field: bool,
    /// What the pieces folded in so far hold (an upper bound).
    held: usize,
}

fn text_of<'a>(value: &'a Value, key: &str) -> &'a str {
    value[key].as_str().unwrap_or("")
}

/// Appends `extra[key]` to `into[key]` when both are strings (or `into`
/// has none yet), in place: a long block grows without being copied.
fn append_text(into: &mut Value, extra: &Value, key: &str) {
    let Some(more) = extra[key].as_str() else {
        return;
    };
    match &mut into[key] {
        Value::String(text) => text.push_str(more),
        slot => *slot = json!(more),
    }
}

impl Opaque {
    /// Folds one streamed thinking block. A thinking delta continues the
    /// last thinking block until that block is signed; a delta carrying
    /// only a signature (or a piece of one) signs the last thinking block;
    /// redacted and unknown blocks stand alone, verbatim.
    fn add_thinking_block(&mut self, block: Value) {
        if !block.is_object() {
            return;
        }
        self.held += value_held(&block);
        let kind = block["type"].as_str().unwrap_or("thinking");
        let last_thinking = self
            .thinking_blocks
            .last_mut()
            .filter(|last| last["type"] == "thinking");
        if kind == "thinking" {
            if let Some(last) = last_thinking {
                let signed = !text_of(last, "signature").is_empty();
                let text = text_of(&block, "thinking");
                if text.is_empty() || !signed {
                    append_text(last, &block, "thinking");
                    append_text(last, &block, "signature");
                    return;
                }
            }
            let mut block = block;
            block["type"] = json!("thinking");
            self.thinking_blocks.push(block);
        } else {
            self.thinking_blocks.push(block);
        }
    }

    /// Folds one streamed reasoning detail: pieces with the same `index`
    /// and type are one item (their text, summary and data joined, the
    /// last signature kept); items without an index stand alone.
    fn add_reasoning_detail(&mut self, detail: Value) {
        if !detail.is_object() {
            return;
        }
        self.held += value_held(&detail);
        let same = detail["index"].as_u64().and_then(|index| {
            self.reasoning_details.iter_mut().find(|item| {
                item["index"].as_u64() == Some(index) && item["type"] == detail["type"]
            })
        });
        let Some(item) = same else {
            self.reasoning_details.push(detail);
            return;
        };
        for key in ["text", "summary", "data"] {
            append_text(item, &detail, key);
        }
        if let (Some(map), Some(extra)) = (item.as_object_mut(), detail.as_object()) {
            for (key, value) in extra {
                let joined = ["text", "summary", "data"].contains(&key.as_str());
                if !joined && !value.is_null() {
                    map.insert(key.clone(), value.clone());
                }
            }
        }
    }

    /// What the assistant message keeps for the next request (null when
    /// nothing came).
    fn into_provider_data(self) -> Value {
        let mut chat = serde_json::Map::new();
        if !self.thinking_blocks.is_empty() {
            chat.insert("thinking_blocks".into(), Value::Array(self.thinking_blocks));
        }
        if !self.reasoning_details.is_empty() {
            chat.insert(
                "reasoning_details".into(),
                Value::Array(self.reasoning_details),
            );
        }
        if self.reasoning_field {
            chat.insert("reasoning_field".into(), json!("reasoning"));
        }
        if chat.is_empty() {
            Value::Null
        } else {
            json!({ "chat": chat })
        }
    }
}

/// Collects streamed tool-call deltas. Calls are keyed by `index`; servers
/// that omit it (older Ollama) are matched by `id`, and a delta with
/// neither continues the last call.
#[derive(Default)]
pub(crate) struct ToolCalls {
    calls: Vec<(Option<u64>, ToolCallRequest)>,
    /// What the calls hold, as JSON text, plus a fixed cost per call.
    held: usize,
}

/// What one call costs beyond its strings.
const CALL_BYTES: usize = 128;

impl ToolCalls {
    fn add(&mut self, delta: ToolCallDelta) {
        let position = match (delta.index, delta.id.as_deref()) {
            (Some(index), _) => self.calls.iter().position(|(i, _)| *i == Some(index)),
            (None, Some(id)) => self.calls.iter().position(|(_, call)| call.id == id),
            (None, None) => self.calls.len().checked_sub(1),
        };
        let position = position.unwrap_or_else(|| {
            self.calls.push((
                delta.index,
                ToolCallRequest {
                    id: String::new(),
                    name: String::new(),
                    arguments: String::new(),
                },
            ));
            self.held += CALL_BYTES;
            self.calls.len() - 1
        });
        let call = &mut self.calls[position].1;
        if let Some(id) = delta.id {
            if call.id.is_empty() {
                self.held += json_len(&id);
                call.id = id;
            }
        }
        if let Some(function) = delta.function {
            if let Some(name) = function.name {
                // Some servers repeat the name on every delta.
                if call.name.is_empty() {
                    self.held += json_len(&name);
                    call.name = name;
                }
            }
            if let Some(arguments) = function.arguments {
                self.held += json_len(&arguments);
                call.arguments.push_str(&arguments);
            }
        }
    }

    pub(crate) fn finish(self) -> Vec<ToolCallRequest> {
        self.calls
            .into_iter()
            .enumerate()
            .map(|(position, (_, mut call))| {
                if call.id.is_empty() {
                    call.id = format!("call_{position}_{}", crate::util::random_hex());
                }
                call
            })
            .collect()
    }
}

/// A non-streamed completion as the one chunk that would carry it all,
/// then `[DONE]`.
pub(crate) fn whole_answer(body: &Value) -> Vec<String> {
    let choice = &body["choices"][0];
    let message = &choice["message"];
    let mut delta = serde_json::json!({});
    for key in ["content", "reasoning_content", "reasoning", "refusal"] {
        if message[key].is_string() {
            delta[key] = message[key].clone();
        }
    }
    for key in OPAQUE_FIELDS {
        if message[key].is_array() {
            delta[key] = message[key].clone();
        }
    }
    if let Some(calls) = message["tool_calls"].as_array() {
        let calls: Vec<Value> = calls
            .iter()
            .enumerate()
            .map(|(index, call)| {
                let mut call = call.clone();
                call["index"] = serde_json::json!(index);
                call
            })
            .collect();
        delta["tool_calls"] = Value::Array(calls);
    }
    let chunk = serde_json::json!({
        "choices": [{"delta": delta, "finish_reason": choice["finish_reason"]}],
        "usage": body["usage"],
    });
    vec![chunk.to_string(), "[DONE]".to_string()]
}

/// Decodes one streamed chunk and folds its tool-call deltas into
/// `calls`, as the stream loop does per event (for the fuzzer); false when
/// the data is not a chunk.
pub(crate) fn fold_chunk(data: &str, calls: &mut ToolCalls) -> bool {
    let Ok(chunk) = serde_json::from_str::<Chunk>(data) else {
        return false;
    };
    for choice in chunk.choices {
        for delta in choice.delta.and_then(|d| d.tool_calls).unwrap_or_default() {
            calls.add(delta);
        }
    }
    true
}

/// One streamed chunk. Its texts borrow from the event where they need no
/// unescaping: most chunks then parse without allocating their text.
#[derive(Deserialize)]
struct Chunk<'a> {
    #[serde(default, borrow)]
    choices: Vec<Choice<'a>>,
    #[serde(default)]
    usage: Option<RawUsage>,
    #[serde(default)]
    error: Option<Value>,
}

#[derive(Deserialize)]
struct Choice<'a> {
    #[serde(default, borrow)]
    delta: Option<Delta<'a>>,
    #[serde(default)]
    finish_reason: Option<String>,
}

/// A text of a chunk: borrowed from the event when it has no escapes
/// (serde borrows a `Cow` only where it is the field's whole type, not
/// inside an `Option`).
#[derive(Default)]
struct Text<'a>(Cow<'a, str>);

impl std::ops::Deref for Text<'_> {
    type Target = str;
    fn deref(&self) -> &str {
        &self.0
    }
}

impl<'de: 'a, 'a> Deserialize<'de> for Text<'a> {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Visit;
        impl<'de> serde::de::Visitor<'de> for Visit {
            type Value = Cow<'de, str>;
            fn expecting(&self, out: &mut std::fmt::Formatter) -> std::fmt::Result {
                out.write_str("a string")
            }
            fn visit_borrowed_str<E>(self, text: &'de str) -> Result<Self::Value, E> {
                Ok(Cow::Borrowed(text))
            }
            fn visit_str<E>(self, text: &str) -> Result<Self::Value, E> {
                Ok(Cow::Owned(text.to_string()))
            }
            fn visit_string<E>(self, text: String) -> Result<Self::Value, E> {
                Ok(Cow::Owned(text))
            }
        }
        deserializer.deserialize_str(Visit).map(Text)
    }
}

#[derive(Deserialize, Default)]
struct Delta<'a> {
    #[serde(default, borrow)]
    content: Option<Text<'a>>,
    #[serde(default, borrow)]
    reasoning_content: Option<Text<'a>>,
    #[serde(default, borrow)]
    reasoning: Option<Text<'a>>,
    #[serde(default, borrow)]
    refusal: Option<Text<'a>>,
    #[serde(default)]
    tool_calls: Option<Vec<ToolCallDelta>>,
    /// Kept as any value: a gateway's odd shape here is dropped, not
    /// taken for a broken chunk.
    #[serde(default)]
    thinking_blocks: Value,
    #[serde(default)]
    reasoning_details: Value,
}

#[derive(Deserialize)]
struct ToolCallDelta {
    #[serde(default)]
    index: Option<u64>,
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    function: Option<FunctionDelta>,
}

#[derive(Deserialize)]
struct FunctionDelta {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    arguments: Option<String>,
}

#[derive(Deserialize)]
struct RawUsage {
    #[serde(default, deserialize_with = "super::lenient_tokens")]
    prompt_tokens: Option<u64>,
    #[serde(default, deserialize_with = "super::lenient_tokens")]
    completion_tokens: Option<u64>,
    #[serde(default)]
    prompt_tokens_details: Option<PromptDetails>,
    #[serde(default)]
    completion_tokens_details: Option<CompletionDetails>,
    /// A gateway's cost of the call (LiteLLM's `usage.cost`, USD).
    #[serde(default)]
    cost: Value,
}

#[derive(Deserialize)]
struct PromptDetails {
    #[serde(default, deserialize_with = "super::lenient_tokens")]
    cached_tokens: Option<u64>,
}

#[derive(Deserialize)]
struct CompletionDetails {
    #[serde(default, deserialize_with = "super::lenient_tokens")]
    reasoning_tokens: Option<u64>,
}

impl From<RawUsage> for Usage {
    fn from(raw: RawUsage) -> Usage {
        let cached = raw.prompt_tokens_details.and_then(|d| d.cached_tokens);
        let reasoning = raw
            .completion_tokens_details
            .and_then(|d| d.reasoning_tokens);
        Usage {
            input_tokens: raw.prompt_tokens.unwrap_or(0),
            output_tokens: raw.completion_tokens.unwrap_or(0),
            cached_tokens: cached.unwrap_or(0),
            reasoning_tokens: reasoning.unwrap_or(0),
            cache_write_tokens: 0,
            unreported: crate::provider::Unreported::of(
                cached.is_some(),
                false,
                reasoning.is_some(),
            ),
        }
    }
}

fn finish_of(reason: &str) -> Finish {
    match reason {
        "length" => Finish::MaxTokens,
        "content_filter" => Finish::Refusal,
        "tool_calls" | "function_call" => Finish::ToolUse,
        _ => Finish::EndTurn,
    }
}

impl Provider for ChatCompletions {
    fn stream(
        &self,
        request: &ModelRequest<'_>,
        sink: &mut dyn Sink,
        cancel: &CancelToken,
    ) -> Result<Outcome, StreamError> {
        let url = format!("{}/chat/completions", self.base_url.trim_end_matches('/'));
        let mut headers = vec![("Content-Type", "application/json".to_string())];
        if let Some(key) = &self.api_key {
            headers.push(("Authorization", format!("Bearer {key}")));
        }
        super::trace::add_headers(&mut headers, request.trace);
        let body = self.body(request).to_string();
        let stream = EventStream::open(
            &url,
            &self.trust,
            &headers,
            body,
            self.timeouts.at_most(request.max_attempts),
            cancel,
            sink,
            whole_answer,
        )?;
        stream.drive(cancel, sink, &mut StreamState::default())
    }

    fn count_tokens(&self, text: &str, cancel: &CancelToken) -> Option<u64> {
        self.tokenizer
            .count(&self.base_url, &self.trust, text, cancel)
    }
}

/// The parse of one streamed completion, fed one SSE event at a time.
#[derive(Default)]
pub(crate) struct StreamState {
    finish: Option<Finish>,
    usage: Option<Usage>,
    cost: Option<f64>,
    refused: bool,
    tool_calls: ToolCalls,
    opaque: Opaque,
}

impl StreamState {
    fn outcome(&mut self) -> Outcome {
        let state = std::mem::take(self);
        let mut outcome = outcome(
            state.finish,
            state.refused,
            state.usage,
            state.tool_calls,
            state.opaque,
        );
        outcome.cost = state.cost;
        outcome
    }
}

impl WireState for StreamState {
    /// Handles one chunk; the outcome comes with `[DONE]`.
    fn handle(
        &mut self,
        event: &SseEvent,
        sink: &mut dyn Sink,
    ) -> Result<Option<Outcome>, ProviderError> {
        if event.data == "[DONE]" {
            return Ok(Some(self.outcome()));
        }
        let chunk: Chunk = serde_json::from_str(&event.data).map_err(|err| {
            ProviderError::new(
                "provider_bad_response",
                format!("the provider sent a chunk that is not valid JSON: {err}"),
            )
        })?;
        if let Some(error) = chunk.error {
            let message = super::http::errors::provider_message(
                json!({ "error": error }).to_string().as_bytes(),
            )
            .unwrap_or_else(|| error.to_string());
            return Err(ProviderError::new(
                "provider_stream_error",
                format!("the model provider reported an error mid-stream: {message}"),
            ));
        }
        if let Some(raw) = chunk.usage {
            if let Some(cost) = super::reported_cost(&raw.cost) {
                self.cost = Some(cost);
            }
            self.usage = Some(raw.into());
        }
        for choice in chunk.choices {
            if let Some(delta) = choice.delta {
                let blocks = match delta.thinking_blocks {
                    Value::Array(blocks) => blocks,
                    _ => Vec::new(),
                };
                let named = delta.reasoning_content.is_none() && delta.reasoning.is_some();
                match delta.reasoning_content.or(delta.reasoning) {
                    Some(text) if !text.is_empty() => {
                        sink.thought(&text);
                        self.opaque.reasoning_field |= named;
                    }
                    Some(_) => {}
                    // A gateway that sends only the blocks: their text
                    // is the thought.
                    None => {
                        for block in &blocks {
                            let text = text_of(block, "thinking");
                            if !text.is_empty() {
                                sink.thought(text);
                            }
                        }
                    }
                }
                for block in blocks {
                    self.opaque.add_thinking_block(block);
                }
                let details = match delta.reasoning_details {
                    Value::Array(details) => details,
                    _ => Vec::new(),
                };
                for detail in details {
                    self.opaque.add_reasoning_detail(detail);
                }
                if let Some(text) = delta.content {
                    if !text.is_empty() {
                        sink.text(&text);
                    }
                }
                if let Some(text) = delta.refusal {
                    self.refused = true;
                    if !text.is_empty() {
                        sink.text(&text);
                    }
                }
                for call in delta.tool_calls.into_iter().flatten() {
                    self.tool_calls.add(call);
                }
            }
            if let Some(reason) = choice.finish_reason {
                self.finish = Some(finish_of(&reason));
            }
        }
        Ok(None)
    }

    fn held(&self) -> usize {
        self.tool_calls.held + self.opaque.held
    }

    /// Some servers end without `[DONE]`: that is fine after a finish
    /// reason, and a truncated stream otherwise.
    fn end(&mut self) -> Option<Outcome> {
        self.finish.is_some().then(|| self.outcome())
    }
}

/// The outcome of a finished stream. Any tool call makes it a tool turn,
/// whatever the finish reason said: several servers send `stop` with calls.
fn outcome(
    finish: Option<Finish>,
    refused: bool,
    usage: Option<Usage>,
    tool_calls: ToolCalls,
    opaque: Opaque,
) -> Outcome {
    let tool_calls = tool_calls.finish();
    let finish = if refused {
        Finish::Refusal
    } else if !tool_calls.is_empty() {
        Finish::ToolUse
    } else {
        match finish.unwrap_or(Finish::EndTurn) {
            // A tool finish without any call has nothing to run.
            Finish::ToolUse => Finish::EndTurn,
            other => other,
        }
    };
    Outcome {
        finish,
        usage,
        cost: None,
        tool_calls,
        provider_data: opaque.into_provider_data(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_chunk_text_is_borrowed_unless_it_has_escapes() {
        let text = |data: &str| -> Option<(String, bool)> {
            let chunk: Chunk = serde_json::from_str(data).ok()?;
            let delta = chunk.choices.into_iter().next()?.delta?;
            let content = delta.content?;
            Some((content.to_string(), matches!(content.0, Cow::Borrowed(_))))
        };
        let plain = r#"{"choices":[{"delta":{"content":"tok "}}]}"#;
        assert_eq!(text(plain), Some(("tok ".into(), true)));
        let escaped = r#"{"choices":[{"delta":{"content":"a\n\"b\" \u00e9"}}]}"#;
        assert_eq!(text(escaped), Some(("a\n\"b\" é".into(), false)));
        let null = r#"{"choices":[{"delta":{"content":null,"refusal":"no"}}]}"#;
        let chunk: Chunk = serde_json::from_str(null).unwrap();
        let delta = chunk.choices.into_iter().next().unwrap().delta.unwrap();
        assert!(delta.content.is_none());
        assert_eq!(delta.refusal.as_deref(), Some("no"));
        // Not a string: the chunk is refused, as before.
        let number = r#"{"choices":[{"delta":{"content":5}}]}"#;
        assert!(serde_json::from_str::<Chunk>(number).is_err());
    }

    fn delta(
        index: Option<u64>,
        id: Option<&str>,
        name: Option<&str>,
        args: &str,
    ) -> ToolCallDelta {
        ToolCallDelta {
            index,
            id: id.map(str::to_string),
            function: Some(FunctionDelta {
                name: name.map(str::to_string),
                arguments: Some(args.to_string()),
            }),
        }
    }

    #[test]
    fn tool_call_deltas_accumulate_by_index_then_id() {
        let mut calls = ToolCalls::default();
        calls.add(delta(Some(0), Some("a"), Some("read_file"), "{\"pa"));
        calls.add(delta(Some(1), Some("b"), Some("search"), "{}"));
        calls.add(delta(Some(0), None, None, "th\":1}"));
        calls.add(delta(Some(0), Some("a"), Some("read_file"), ""));
        let calls = calls.finish();
        assert_eq!(calls.len(), 2);
        assert_eq!(calls[0].name, "read_file");
        assert_eq!(calls[0].arguments, "{\"path\":1}");
        assert_eq!(calls[1].id, "b");

        let mut calls = ToolCalls::default();
        calls.add(delta(None, Some("x"), Some("a"), "{"));
        calls.add(delta(None, Some("x"), None, "}"));
        calls.add(delta(None, Some("y"), Some("b"), "{}"));
        let calls = calls.finish();
        assert_eq!(calls.len(), 2);
        assert_eq!(calls[0].arguments, "{}");
    }

    #[test]
    fn any_tool_call_makes_a_tool_turn() {
        let mut calls = ToolCalls::default();
        calls.add(delta(Some(0), None, Some("list_directory"), ""));
        let outcome = outcome(Some(Finish::EndTurn), false, None, calls, Opaque::default());
        assert_eq!(outcome.finish, Finish::ToolUse);
        assert!(outcome.tool_calls[0].id.starts_with("call_"));
        let none = super::outcome(
            Some(Finish::ToolUse),
            false,
            None,
            ToolCalls::default(),
            Opaque::default(),
        );
        assert_eq!(none.finish, Finish::EndTurn);
    }

    #[test]
    fn thinking_blocks_join_until_signed_and_redacted_ones_stand_alone() {
        let mut opaque = Opaque::default();
        for block in [
            json!({"type": "thinking", "thinking": "Let me ", "signature": ""}),
            json!({"type": "thinking", "thinking": "see."}),
            json!({"type": "thinking", "thinking": "", "signature": "sig"}),
            json!({"type": "thinking", "signature": "-part2"}),
            json!({"type": "redacted_thinking", "data": "opaque=="}),
            json!({"type": "thinking", "thinking": "Second.", "signature": "s2"}),
            json!({"type": "thinking", "thinking": " More."}),
            json!("not a block"),
        ] {
            opaque.add_thinking_block(block);
        }
        assert_eq!(
            opaque.into_provider_data()["chat"]["thinking_blocks"],
            json!([
                {"type": "thinking", "thinking": "Let me see.", "signature": "sig-part2"},
                {"type": "redacted_thinking", "data": "opaque=="},
                {"type": "thinking", "thinking": "Second.", "signature": "s2"},
                {"type": "thinking", "thinking": " More."},
            ])
        );
    }

    #[test]
    fn reasoning_details_join_by_index_and_type() {
        let mut opaque = Opaque::default();
        for detail in [
            json!({"type": "reasoning.text", "index": 0, "text": "A", "format": "f"}),
            json!({"type": "reasoning.text", "index": 0, "text": "B", "signature": null}),
            json!({"type": "reasoning.text", "index": 0, "signature": "sig"}),
            json!({"type": "reasoning.encrypted", "index": 1, "data": "x"}),
            json!({"type": "reasoning.encrypted", "index": 1, "data": "y"}),
            json!({"type": "reasoning.summary", "summary": "s"}),
        ] {
            opaque.add_reasoning_detail(detail);
        }
        assert_eq!(
            opaque.into_provider_data()["chat"]["reasoning_details"],
            json!([
                {"type": "reasoning.text", "index": 0, "text": "AB", "format": "f", "signature": "sig"},
                {"type": "reasoning.encrypted", "index": 1, "data": "xy"},
                {"type": "reasoning.summary", "summary": "s"},
            ])
        );
        assert_eq!(Opaque::default().into_provider_data(), Value::Null);
    }

    #[test]
    fn kept_reasoning_goes_back_verbatim_on_the_assistant_message() {
        let mut message = Message::assistant("Done.", "thought");
        message.provider_data = json!({"chat": {
            "thinking_blocks": [{"type": "thinking", "thinking": "t", "signature": "s"}],
            "reasoning_details": [],
        }});
        let value = message_json(&message);
        assert_eq!(
            value["thinking_blocks"],
            json!([{"type": "thinking", "thinking": "t", "signature": "s"}])
        );
        assert!(value.get("reasoning_details").is_none());
        assert!(value.get("reasoning_content").is_none(), "no tool call");
    }

    #[test]
    fn reasoning_goes_back_under_the_name_it_came_in() {
        use crate::provider::testing::Collect;
        for (field, kept) in [
            (
                "reasoning",
                json!({"chat": {"reasoning_field": "reasoning"}}),
            ),
            ("reasoning_content", Value::Null),
        ] {
            let mut state = StreamState::default();
            let mut sink = Collect::default();
            for data in [
                json!({"choices": [{"delta": {field: "Look."}}]}).to_string(),
                json!({"choices": [{"delta": {"tool_calls": [{"index": 0, "id": "call_1",
                    "function": {"name": "list_directory", "arguments": "{}"}}]},
                    "finish_reason": "tool_calls"}]})
                .to_string(),
            ] {
                let event = SseEvent { event: None, data };
                assert!(state.handle(&event, &mut sink).unwrap().is_none());
            }
            let event = SseEvent {
                event: None,
                data: "[DONE]".into(),
            };
            let outcome = state.handle(&event, &mut sink).unwrap().unwrap();
            assert_eq!(
                (sink.thought.as_str(), &outcome.provider_data),
                ("Look.", &kept)
            );
            let mut message = Message::assistant("", "Look.");
            message.tool_calls = outcome.tool_calls;
            message.provider_data = outcome.provider_data;
            let value = message_json(&message);
            assert_eq!(value[field], "Look.", "{value}");
            let other = if field == "reasoning" {
                "reasoning_content"
            } else {
                "reasoning"
            };
            assert!(value.get(other).is_none(), "{value}");
        }
    }

    #[test]
    fn responses_past_the_cap_are_cut_off_whatever_they_hold() {
        use crate::provider::testing::{assert_cut_off, capped, flood, serve_once, Collect};
        let call = r#"data: {"choices":[{"delta":{"tool_calls":[{"index":0,"id":"c","function":{"name":"write_file","arguments":""}}]}}]}

"#;
        let piece = "x".repeat(100);
        for (start, delta) in [
            ("", json!({"content": piece})),
            ("", json!({"reasoning_content": piece})),
            (
                call,
                json!({"tool_calls": [{"index": 0, "function": {"arguments": piece}}]}),
            ),
            (
                "",
                json!({"thinking_blocks": [{"type": "redacted_thinking", "data": piece}]}),
            ),
        ] {
            let event = format!("data: {}\n\n", json!({"choices": [{"delta": delta}]}));
            let (base_url, _server) = serve_once(flood(start, &event), "/v1");
            let provider = ChatCompletions {
                base_url,
                api_key: None,
                timeouts: capped(5000),
                trust: Default::default(),
                tokenizer: Default::default(),
            };
            let messages = [Message::user("go")];
            let request = ModelRequest {
                session_id: "s",
                model: "m",
                system: "",
                messages: &messages,
                tools: &[],
                effort: None,
                max_output_tokens: None,
                trace: None,
                max_attempts: None,
            };
            let mut sink = Collect::default();
            let result = provider.stream(&request, &mut sink, &CancelToken::new());
            assert_cut_off(result, &sink, 5000);
        }
    }

    #[test]
    fn a_gateway_cost_in_the_final_usage_is_the_calls() {
        let mut state = StreamState::default();
        let mut sink = crate::provider::testing::Collect::default();
        let mut feed = |data: &str| {
            let event = crate::provider::sse::SseEvent {
                event: None,
                data: data.into(),
            };
            state.handle(&event, &mut sink).unwrap()
        };
        feed(r#"{"choices":[{"delta":{"content":"Hi"},"finish_reason":"stop"}]}"#);
        feed(r#"{"choices":[],"usage":{"prompt_tokens":7,"completion_tokens":2,"cost":0.00042}}"#);
        let outcome = feed("[DONE]").unwrap();
        assert_eq!(outcome.cost, Some(0.00042));
        assert_eq!(outcome.usage.unwrap().input_tokens, 7);
        // Without a figure (or with a broken one) the call has no cost.
        let mut state = StreamState::default();
        let event = |data: &str| crate::provider::sse::SseEvent {
            event: None,
            data: data.into(),
        };
        let usage =
            r#"{"choices":[],"usage":{"prompt_tokens":7,"completion_tokens":2,"cost":"free"}}"#;
        state.handle(&event(usage), &mut sink).unwrap();
        assert_eq!(
            state
                .handle(&event("[DONE]"), &mut sink)
                .unwrap()
                .unwrap()
                .cost,
            None
        );
    }

    #[test]
    fn absurd_usage_counts_are_no_counts_and_never_fail_the_stream() {
        let event = |data: &str| crate::provider::sse::SseEvent {
            event: None,
            data: data.into(),
        };
        let mut sink = crate::provider::testing::Collect::default();
        for counts in [
            r#""prompt_tokens":-1,"completion_tokens":1.5"#,
            r#""prompt_tokens":1e300,"completion_tokens":18446744073709551616"#,
            r#""prompt_tokens":"NaN","completion_tokens":null"#,
        ] {
            let mut state = StreamState::default();
            let usage = format!(
                r#"{{"choices":[],"usage":{{{counts},"prompt_tokens_details":{{"cached_tokens":-5}}}}}}"#
            );
            state.handle(&event(&usage), &mut sink).unwrap();
            let outcome = state.handle(&event("[DONE]"), &mut sink).unwrap().unwrap();
            let usage = outcome.usage.unwrap();
            assert_eq!(
                (usage.input_tokens, usage.output_tokens),
                (0, 0),
                "{counts}"
            );
            assert_eq!(usage.unreported.cached, 1, "{counts}");
        }
    }
}

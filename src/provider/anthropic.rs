//! Anthropic Messages, streamed: Claude's own wire format.
//!
//! The system prompt travels apart from the conversation, tool calls and
//! their results are content blocks, and the signed thinking blocks of a
//! turn that called tools must be sent back unchanged with it. This module
//! builds the request and drives the call; `stream` parses the answer.

pub(crate) mod stream;

use super::http::{EventStream, Timeouts};
use super::ImageData;
use super::{Message, ModelRequest, Outcome, Provider, Role, Sink, StreamError};
use crate::cancel::CancelToken;
use serde_json::{json, Value};
use stream::StreamState;

/// The API version every request names.
pub(crate) const API_VERSION: &str = "2023-06-01";

/// The answer cap when the model has none configured: the API requires one.
const DEFAULT_MAX_TOKENS: u32 = 8192;

/// The smallest thinking budget the API accepts.
const MIN_THINKING_BUDGET: u32 = 1024;

/// Room left for the answer when `max_tokens` has to grow to fit thinking.
const ANSWER_ROOM: u32 = 4096;

/// The least room thinking leaves for the visible answer.
const ANSWER_FLOOR: u32 = 1024;

/// The Anthropic Messages provider.
pub(crate) struct Messages {
    /// The API root, such as `https://api.anthropic.com` (a trailing `/v1`
    /// is accepted too).
    pub base_url: String,
    pub api_key: Option<String>,
    pub timeouts: Timeouts,
    /// What its HTTPS connections trust (the config's).
    pub trust: crate::net::Trust,
}

impl Messages {
    fn url(&self) -> String {
        let base = self.base_url.trim_end_matches('/');
        if base.ends_with("/v1") {
            format!("{base}/messages")
        } else {
            format!("{base}/v1/messages")
        }
    }

    fn headers(&self) -> Vec<(&'static str, String)> {
        let mut headers = vec![
            ("content-type", "application/json".to_string()),
            ("anthropic-version", API_VERSION.to_string()),
        ];
        if let Some(key) = &self.api_key {
            headers.push(("x-api-key", key.clone()));
        }
        headers
    }
}

impl Provider for Messages {
    fn stream(
        &self,
        request: &ModelRequest<'_>,
        sink: &mut dyn Sink,
        cancel: &CancelToken,
    ) -> Result<Outcome, StreamError> {
        let body = body(request).to_string();
        let mut headers = self.headers();
        super::trace::add_headers(&mut headers, request.trace);
        let stream = EventStream::open(
            &self.url(),
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
}

/// A non-streamed message as the events that would have streamed it:
/// `message_start`, a start, delta(s) and stop per content block,
/// `message_delta` with the stop reason and usage, `message_stop`.
fn whole_answer(body: &Value) -> Vec<String> {
    let mut events = vec![json!({"type": "message_start", "message": {
        "id": body["id"], "role": "assistant", "usage": body["usage"]}})];
    for (index, block) in body["content"].as_array().into_iter().flatten().enumerate() {
        let (start, deltas): (Value, Vec<Value>) = match block["type"].as_str() {
            Some("text") => (
                json!({"type": "text", "text": ""}),
                vec![json!({"type": "text_delta", "text": block["text"]})],
            ),
            Some("thinking") => (
                json!({"type": "thinking", "thinking": ""}),
                vec![
                    json!({"type": "thinking_delta", "thinking": block["thinking"]}),
                    json!({"type": "signature_delta", "signature": block["signature"]}),
                ],
            ),
            Some("tool_use") => (
                json!({"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}),
                vec![
                    json!({"type": "input_json_delta", "partial_json": block["input"].to_string()}),
                ],
            ),
            // Redacted thinking and anything else: as it is.
            _ => (block.clone(), Vec::new()),
        };
        events.push(json!({"type": "content_block_start", "index": index, "content_block": start}));
        for delta in deltas {
            events.push(json!({"type": "content_block_delta", "index": index, "delta": delta}));
        }
        events.push(json!({"type": "content_block_stop", "index": index}));
    }
    events.push(json!({"type": "message_delta",
        "delta": {"stop_reason": body["stop_reason"]}, "usage": body["usage"]}));
    events.push(json!({"type": "message_stop"}));
    events.iter().map(Value::to_string).collect()
}

/// The JSON body of one request.
fn body(request: &ModelRequest<'_>) -> Value {
    let (max_tokens, budget) = token_limits(request.max_output_tokens, request.effort);
    let mut messages = messages_json(request.messages);
    mark_cache_points(&mut messages);
    let mut body = json!({
        "model": request.model,
        "max_tokens": max_tokens,
        "stream": true,
        "messages": messages,
    });
    if !request.system.is_empty() {
        body["system"] = json!([{
            "type": "text",
            "text": request.system,
            "cache_control": cache_point(),
        }]);
    }
    if let Some(budget) = budget {
        body["thinking"] = json!({ "type": "enabled", "budget_tokens": budget });
    }
    if !request.tools.is_empty() {
        let tools: Vec<Value> = request
            .tools
            .iter()
            .map(|tool| {
                json!({
                    "name": tool.name,
                    "description": tool.description,
                    "input_schema": tool.parameters,
                })
            })
            .collect();
        let mut tools = tools;
        if let Some(last) = tools.last_mut() {
            last["cache_control"] = cache_point();
        }
        body["tools"] = Value::Array(tools);
        // With thinking on, only `auto` and `none` are accepted.
        body["tool_choice"] = json!({ "type": "auto" });
    }
    body
}

/// The API allows four breakpoints: the tools and the system prompt take
/// two, the conversation the other two.
const CONVERSATION_CACHE_POINTS: usize = 2;

/// A prompt-cache breakpoint: everything up to the marked block is cached
/// for the next request (five minutes, refreshed on each hit).
fn cache_point() -> Value {
    json!({"type": "ephemeral"})
}

/// Marks the last block of the last user turn (the whole conversation is
/// the prefix of the next request) and of the user turn before it (what
/// the previous request cached, found again even when many blocks were
/// added since). Thinking blocks cannot be marked; user turns end with
/// text, images or tool results, which can.
fn mark_cache_points(messages: &mut [Value]) {
    let mut marked = 0;
    for message in messages.iter_mut().rev() {
        if marked == CONVERSATION_CACHE_POINTS {
            break;
        }
        if message["role"] != "user" {
            continue;
        }
        if let Some(block) = message["content"].as_array_mut().and_then(|c| c.last_mut()) {
            block["cache_control"] = cache_point();
            marked += 1;
        }
    }
}

/// The thinking budget an effort level asks for, or `None` when thinking
/// stays off. Levels beyond the three usual ones get the nearest budget;
/// an unknown level gets the medium one.
fn thinking_budget(effort: Option<&str>) -> Option<u32> {
    match effort? {
        "none" | "auto" | "" => None,
        "minimal" => Some(1024),
        "low" => Some(2048),
        "medium" => Some(8192),
        "high" => Some(16384),
        "xhigh" | "max" => Some(32768),
        other => {
            log::warn!("unknown reasoning effort {other:?}; thinking with a medium budget");
            Some(8192)
        }
    }
}

/// `max_tokens` and the thinking budget, which must satisfy
/// 1024 ≤ budget and leave the visible answer at least `ANSWER_FLOOR`
/// tokens. A configured cap bounds the budget first (cap − floor); when
/// even the smallest budget does not fit that way (or no cap was
/// configured and the budget exceeds the default), `max_tokens` grows to
/// budget + 4096.
fn token_limits(max_output_tokens: Option<u32>, effort: Option<&str>) -> (u32, Option<u32>) {
    let mut max_tokens = max_output_tokens.unwrap_or(DEFAULT_MAX_TOKENS).max(1);
    let Some(mut budget) = thinking_budget(effort) else {
        return (max_tokens, None);
    };
    if max_output_tokens.is_some() {
        budget = budget.min(max_tokens.saturating_sub(ANSWER_FLOOR));
    }
    budget = budget.max(MIN_THINKING_BUDGET);
    if budget + ANSWER_FLOOR > max_tokens {
        max_tokens = budget + ANSWER_ROOM;
    }
    (max_tokens, Some(budget))
}

/// The conversation as the API wants it: roles alternate (consecutive
/// messages of one role are merged), each turn a list of content blocks,
/// and tool results open the user turn that follows the calls.
fn messages_json(messages: &[Message]) -> Vec<Value> {
    let mut turns: Vec<(&'static str, Vec<Value>)> = Vec::new();
    for message in messages {
        match message.role {
            Role::User => {
                for image in &message.images {
                    if let Some(data) = image.base64() {
                        let block = json!({
                            "type": "image",
                            "source": {"type": "base64", "media_type": image.mime_type, "data": data},
                        });
                        push_block(&mut turns, "user", block);
                    }
                }
                // The API rejects empty text blocks.
                if !message.text.is_empty() {
                    let block = json!({ "type": "text", "text": message.text });
                    push_block(&mut turns, "user", block);
                }
            }
            Role::Assistant => {
                for block in kept_thinking(message) {
                    push_block(&mut turns, "assistant", block.clone());
                }
                if !message.text.is_empty() {
                    let block = json!({ "type": "text", "text": message.text });
                    push_block(&mut turns, "assistant", block);
                }
                for call in &message.tool_calls {
                    let input = serde_json::from_str::<Value>(&call.arguments)
                        .ok()
                        .filter(Value::is_object)
                        .unwrap_or_else(|| json!({}));
                    let block = json!({
                        "type": "tool_use",
                        "id": call.id,
                        "name": call.name,
                        "input": input,
                    });
                    push_block(&mut turns, "assistant", block);
                }
            }
            Role::Tool => push_tool_result(&mut turns, message),
        }
    }
    turns
        .into_iter()
        .map(|(role, content)| json!({ "role": role, "content": content }))
        .collect()
}

fn push_block(turns: &mut Vec<(&'static str, Vec<Value>)>, role: &'static str, block: Value) {
    match turns.last_mut() {
        Some((last, blocks)) if *last == role => blocks.push(block),
        _ => turns.push((role, vec![block])),
    }
}

/// Adds a tool result to the user turn, after any results already there
/// but before other content: the turn must start with the results.
fn push_tool_result(turns: &mut Vec<(&'static str, Vec<Value>)>, message: &Message) {
    let mut block = json!({
        "type": "tool_result",
        "tool_use_id": message.tool_call_id.as_deref().unwrap_or(""),
        "content": message.text,
    });
    // The tool runner words every failure "Error: ...".
    if message.text.starts_with("Error:") {
        block["is_error"] = json!(true);
    }
    match turns.last_mut() {
        Some((last, blocks)) if *last == "user" => {
            let position = blocks
                .iter()
                .take_while(|b| b["type"] == "tool_result")
                .count();
            blocks.insert(position, block);
        }
        _ => turns.push(("user", vec![block])),
    }
}

/// The thinking and redacted thinking blocks kept with an assistant
/// message, in their original order.
fn kept_thinking(message: &Message) -> impl Iterator<Item = &Value> {
    message.provider_data["anthropic"]["thinking"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|block| {
            matches!(
                block["type"].as_str(),
                Some("thinking" | "redacted_thinking")
            )
        })
}

#[cfg(test)]
mod tests {
    use super::stream::tests::{Collect, TOOL_TURN};
    use super::*;
    use crate::provider::{Finish, ToolCallRequest, ToolSpec};

    fn request<'a>(messages: &'a [Message], tools: &'a [ToolSpec]) -> ModelRequest<'a> {
        ModelRequest {
            session_id: "s",
            model: "claude-test",
            system: "Be brief.",
            messages,
            tools,
            effort: None,
            max_output_tokens: None,
            trace: None,
            max_attempts: None,
        }
    }

    #[test]
    fn body_alternates_roles_and_groups_tool_results() {
        let thinking = json!([
            { "type": "thinking", "thinking": "Need it.", "signature": "sig" },
            { "type": "redacted_thinking", "data": "opaque" },
        ]);
        let mut assistant = Message::assistant("Reading.", "Need it.");
        assistant.provider_data = json!({ "anthropic": { "thinking": thinking.clone() } });
        for (id, arguments) in [("t1", r#"{"path":"a"}"#), ("t2", "not json")] {
            assistant.tool_calls.push(ToolCallRequest {
                id: id.into(),
                name: "read_file".into(),
                arguments: arguments.into(),
            });
        }
        let messages = [
            Message::user("Fix it."),
            Message::user("Please."),
            assistant,
            Message::tool_result("t1", "fn main() {}"),
            Message::tool_result("t2", "Error: no such file"),
            Message::user("And then?"),
        ];
        let tools = [ToolSpec {
            name: "read_file".into(),
            description: "Read a file".into(),
            parameters: json!({ "type": "object" }),
        }];
        let body = body(&request(&messages, &tools));
        assert_eq!(body["model"], "claude-test");
        assert_eq!(body["max_tokens"], 8192);
        assert_eq!(body["stream"], true);
        let cached = json!({"type": "ephemeral"});
        assert_eq!(
            body["system"],
            json!([{"type": "text", "text": "Be brief.", "cache_control": cached}])
        );
        assert!(body.get("thinking").is_none());
        assert_eq!(
            body["tools"],
            json!([{ "name": "read_file", "description": "Read a file",
                     "input_schema": { "type": "object" }, "cache_control": cached }])
        );
        assert_eq!(body["tool_choice"], json!({ "type": "auto" }));
        assert_eq!(
            body["messages"],
            json!([
                { "role": "user", "content": [
                    { "type": "text", "text": "Fix it." },
                    { "type": "text", "text": "Please.", "cache_control": cached },
                ] },
                { "role": "assistant", "content": [
                    thinking[0], thinking[1],
                    { "type": "text", "text": "Reading." },
                    { "type": "tool_use", "id": "t1", "name": "read_file", "input": { "path": "a" } },
                    { "type": "tool_use", "id": "t2", "name": "read_file", "input": {} },
                ] },
                { "role": "user", "content": [
                    { "type": "tool_result", "tool_use_id": "t1", "content": "fn main() {}" },
                    { "type": "tool_result", "tool_use_id": "t2", "content": "Error: no such file",
                      "is_error": true },
                    { "type": "text", "text": "And then?", "cache_control": cached },
                ] },
            ])
        );
    }

    #[test]
    fn at_most_four_cache_points_and_never_on_thinking() {
        let mut messages = Vec::new();
        for n in 0..10 {
            messages.push(Message::user(format!("question {n}")));
            let mut answer = Message::assistant(format!("answer {n}"), "");
            answer.provider_data = json!({"anthropic": {"thinking": [
                {"type": "thinking", "thinking": "t", "signature": "s"}]}});
            messages.push(answer);
        }
        messages.push(Message::user("last"));
        let tools = [ToolSpec {
            name: "a".into(),
            description: "b".into(),
            parameters: json!({"type": "object"}),
        }];
        let body = body(&request(&messages, &tools)).to_string();
        assert_eq!(body.matches("cache_control").count(), 4, "{body}");
        let value: Value = serde_json::from_str(&body).unwrap();
        for message in value["messages"].as_array().unwrap() {
            for block in message["content"].as_array().unwrap() {
                if block.get("cache_control").is_some() {
                    assert_eq!(message["role"], "user");
                    assert_ne!(block["type"], "thinking");
                }
            }
        }
    }

    #[test]
    fn effort_sets_a_thinking_budget_below_max_tokens() {
        assert_eq!(token_limits(None, None), (8192, None));
        assert_eq!(token_limits(None, Some("none")), (8192, None));
        assert_eq!(token_limits(None, Some("auto")), (8192, None));
        assert_eq!(token_limits(None, Some("low")), (8192, Some(2048)));
        assert_eq!(token_limits(None, Some("medium")), (12288, Some(8192)));
        assert_eq!(token_limits(None, Some("high")), (20480, Some(16384)));
        assert_eq!(
            token_limits(Some(32000), Some("high")),
            (32000, Some(16384))
        );
        // The answer keeps at least 1024 tokens of a small cap.
        assert_eq!(token_limits(Some(4000), Some("high")), (4000, Some(2976)));
        assert_eq!(token_limits(Some(2100), Some("high")), (2100, Some(1076)));
        assert_eq!(token_limits(Some(1000), Some("low")), (5120, Some(1024)));
        let messages = [Message::user("hi")];
        let mut request = request(&messages, &[]);
        request.effort = Some("high");
        let body = body(&request);
        assert_eq!(
            body["thinking"],
            json!({ "type": "enabled", "budget_tokens": 16384 })
        );
        assert!(body.get("tools").is_none() && body.get("tool_choice").is_none());
    }

    #[test]
    fn url_adds_v1_once() {
        for base in [
            "https://api.anthropic.com",
            "https://api.anthropic.com/",
            "https://api.anthropic.com/v1",
        ] {
            let provider = Messages {
                base_url: base.into(),
                api_key: None,
                timeouts: Timeouts::default(),
                trust: Default::default(),
            };
            assert_eq!(provider.url(), "https://api.anthropic.com/v1/messages");
        }
    }

    #[test]
    fn streams_from_a_local_server() {
        let (base_url, server) = crate::provider::testing::serve_once(TOOL_TURN, "");
        let provider = Messages {
            base_url,
            api_key: Some("sk-ant-test".into()),
            timeouts: Timeouts::default(),
            trust: Default::default(),
        };
        let messages = [Message::user("Fix main.rs")];
        let mut sink = Collect::default();
        let outcome = provider
            .stream(&request(&messages, &[]), &mut sink, &CancelToken::new())
            .unwrap();
        let received = server.join().unwrap();
        let (head, body) = received.split_once("\r\n\r\n").unwrap();
        let head = head.to_lowercase();
        assert!(head.starts_with("post /v1/messages http/1.1"), "{head}");
        assert!(head.contains("\r\nx-api-key: sk-ant-test"), "{head}");
        assert!(head.contains("\r\nanthropic-version: 2023-06-01"), "{head}");
        assert!(
            head.contains("\r\ncontent-type: application/json"),
            "{head}"
        );
        let body: Value = serde_json::from_str(body).unwrap();
        assert_eq!(body["messages"][0]["content"][0]["text"], "Fix main.rs");
        assert_eq!(
            (sink.text.as_str(), sink.thought.as_str()),
            ("Reading it.", "Need the file.")
        );
        assert_eq!(outcome.finish, Finish::ToolUse);
        assert_eq!(outcome.tool_calls[0].id, "toolu_1");
    }

    #[test]
    fn responses_past_the_cap_are_cut_off_whatever_they_hold() {
        use crate::provider::testing::{assert_cut_off, capped, flood, serve_once};
        let piece = "x".repeat(100);
        for (block, delta) in [
            (
                json!({"type": "text", "text": ""}),
                json!({"type": "text_delta", "text": piece}),
            ),
            (
                json!({"type": "thinking", "thinking": "", "signature": ""}),
                json!({"type": "thinking_delta", "thinking": piece}),
            ),
            (
                json!({"type": "tool_use", "id": "t", "name": "write_file", "input": {}}),
                json!({"type": "input_json_delta", "partial_json": piece}),
            ),
            // Blocks that hold nothing but themselves count too.
            (json!({"type": "text", "text": ""}), Value::Null),
        ] {
            let start = json!({"type": "content_block_start", "index": 0, "content_block": block});
            let event = if delta.is_null() {
                format!("data: {start}\n\n")
            } else {
                let delta = json!({"type": "content_block_delta", "index": 0, "delta": delta});
                format!("data: {delta}\n\n")
            };
            let (base_url, _server) = serve_once(flood(&format!("data: {start}\n\n"), &event), "");
            let provider = Messages {
                base_url,
                api_key: None,
                timeouts: capped(5000),
                trust: Default::default(),
            };
            let messages = [Message::user("go")];
            let mut sink = Collect::default();
            let result = provider.stream(&request(&messages, &[]), &mut sink, &CancelToken::new());
            assert_cut_off(result, &sink, 5000);
        }
    }
}

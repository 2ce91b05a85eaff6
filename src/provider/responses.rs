//! OpenAI Responses API, streamed and stateless: every request replays the
//! conversation (`store: false`), and the reasoning of a turn goes back as
//! the encrypted reasoning items the API returned with it. This module
//! builds the request and drives the call; `stream` parses the answer.
//!
//! A server that ignores `stream: true` answers 200 with a JSON body; that
//! body has no events, so such a call ends as `provider_stream_broken`.

pub(crate) mod stream;

use super::http::{EventStream, Timeouts};
use super::ImageData;
use super::{Message, ModelRequest, Outcome, Provider, Role, Sink, StreamError};
use crate::cancel::CancelToken;
use serde_json::{json, Value};
use stream::StreamState;

pub const DEFAULT_BASE_URL: &str = "https://api.openai.com/v1";

/// The OpenAI Responses provider.
pub struct Responses {
    /// The API root, such as `https://api.openai.com/v1`.
    pub base_url: String,
    pub api_key: Option<String>,
    pub timeouts: Timeouts,
}

impl Responses {
    fn url(&self) -> String {
        format!("{}/responses", self.base_url.trim_end_matches('/'))
    }

    fn headers(&self) -> Vec<(&'static str, String)> {
        let mut headers = vec![("Content-Type", "application/json".to_string())];
        if let Some(key) = &self.api_key {
            headers.push(("Authorization", format!("Bearer {key}")));
        }
        headers
    }
}

impl Provider for Responses {
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
            &headers,
            body,
            self.timeouts,
            cancel,
            sink,
            whole_answer,
        )?;
        stream.drive(cancel, sink, &mut StreamState::default())
    }
}

/// A non-streamed response as the events that would have streamed it:
/// the text, refusal and reasoning summary of its items as deltas, each
/// item done, then the response completed (or incomplete, or failed).
fn whole_answer(body: &Value) -> Vec<String> {
    let mut events = Vec::new();
    for (index, item) in body["output"].as_array().into_iter().flatten().enumerate() {
        for part in item["content"].as_array().into_iter().flatten() {
            match part["type"].as_str() {
                Some("output_text") => events.push(json!({"type": "response.output_text.delta",
                    "output_index": index, "delta": part["text"]})),
                Some("refusal") => events.push(json!({"type": "response.refusal.delta",
                    "output_index": index, "delta": part["refusal"]})),
                _ => {}
            }
        }
        for part in item["summary"].as_array().into_iter().flatten() {
            events.push(json!({"type": "response.reasoning_summary_text.delta",
                "output_index": index, "delta": part["text"]}));
        }
        events.push(
            json!({"type": "response.output_item.done", "output_index": index, "item": item}),
        );
    }
    let kind = match body["status"].as_str() {
        Some("incomplete") => "response.incomplete",
        Some("failed") => "response.failed",
        _ => "response.completed",
    };
    events.push(json!({"type": kind, "response": body}));
    events.iter().map(Value::to_string).collect()
}

/// The JSON body of one request.
fn body(request: &ModelRequest<'_>) -> Value {
    let mut body = json!({
        "model": request.model,
        "stream": true,
        "input": input_json(request.messages),
        // Stateless: nothing is kept on the server, so the reasoning must
        // come back encrypted for us to replay.
        "store": false,
        "include": ["reasoning.encrypted_content"],
    });
    if !request.system.is_empty() {
        body["instructions"] = json!(request.system);
    }
    if !request.tools.is_empty() {
        let tools: Vec<Value> = request
            .tools
            .iter()
            .map(|tool| {
                json!({
                    "type": "function",
                    "name": tool.name,
                    "description": tool.description,
                    "parameters": tool.parameters,
                    "strict": false,
                })
            })
            .collect();
        body["tools"] = Value::Array(tools);
        body["tool_choice"] = json!("auto");
        body["parallel_tool_calls"] = json!(true);
    }
    if let Some(max) = request.max_output_tokens {
        body["max_output_tokens"] = json!(max);
    }
    if let Some(effort) = request.effort.filter(|effort| *effort != "auto") {
        // Summaries stream only when asked for.
        body["reasoning"] = json!({ "effort": effort, "summary": "auto" });
    }
    body
}

/// The conversation as input items. Replayed items carry no `id` (with
/// `store: false` an id names server state that does not exist), except the
/// reasoning items, which go back exactly as received.
fn input_json(messages: &[Message]) -> Vec<Value> {
    let mut items = Vec::with_capacity(messages.len());
    for message in messages {
        match message.role {
            Role::User if message.images.is_empty() => items.push(json!({
                "type": "message",
                "role": "user",
                "content": message.text,
            })),
            Role::User => {
                let mut parts = vec![json!({"type": "input_text", "text": message.text})];
                for image in &message.images {
                    if let Some(url) = image.data_url() {
                        parts.push(json!({"type": "input_image", "image_url": url}));
                    }
                }
                items.push(json!({"type": "message", "role": "user", "content": parts}));
            }
            Role::Assistant => {
                items.extend(kept_reasoning(message).cloned());
                if !message.text.is_empty() {
                    items.push(json!({
                        "type": "message",
                        "role": "assistant",
                        "content": [{ "type": "output_text", "text": message.text }],
                    }));
                }
                for call in &message.tool_calls {
                    items.push(json!({
                        "type": "function_call",
                        "call_id": call.id,
                        "name": call.name,
                        "arguments": call.arguments,
                    }));
                }
            }
            Role::Tool => items.push(json!({
                "type": "function_call_output",
                "call_id": message.tool_call_id.as_deref().unwrap_or(""),
                "output": message.text,
            })),
        }
    }
    items
}

/// The reasoning items kept with an assistant message. Only those with
/// their encrypted content can be replayed: without it the API looks the
/// item up by id and fails with a 404.
fn kept_reasoning(message: &Message) -> impl Iterator<Item = &Value> {
    message.provider_data["responses"]["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|item| replayable(item))
}

fn replayable(item: &Value) -> bool {
    item["type"] == "reasoning" && item["encrypted_content"].is_string()
}

#[cfg(test)]
mod tests {
    use super::stream::tests::{Collect, TOOL_TURN};
    use super::*;
    use crate::provider::{Finish, ToolCallRequest, ToolSpec};

    fn request<'a>(messages: &'a [Message], tools: &'a [ToolSpec]) -> ModelRequest<'a> {
        ModelRequest {
            session_id: "s",
            model: "gpt-test",
            system: "Be brief.",
            messages,
            tools,
            effort: Some("medium"),
            max_output_tokens: Some(8000),
            trace: None,
        }
    }

    #[test]
    fn body_replays_reasoning_calls_and_results() {
        let reasoning = json!({ "id": "rs_1", "type": "reasoning", "summary": [],
                                "encrypted_content": "gAAAA" });
        let mut assistant = Message::assistant("Reading it.", "Need the file.");
        assistant.provider_data = json!({ "responses": { "items": [
            reasoning.clone(),
            // Without its encrypted content an item cannot be replayed.
            { "id": "rs_0", "type": "reasoning", "summary": [] },
        ] } });
        assistant.tool_calls.push(ToolCallRequest {
            id: "call_1".into(),
            name: "read_file".into(),
            arguments: r#"{"path":"src/main.rs"}"#.into(),
        });
        let messages = [
            Message::user("Fix main.rs"),
            assistant,
            Message::tool_result("call_1", "fn main() {}"),
        ];
        let tools = [ToolSpec {
            name: "read_file".into(),
            description: "Read a file".into(),
            parameters: json!({ "type": "object" }),
        }];
        let body = body(&request(&messages, &tools));
        assert_eq!(
            body,
            json!({
                "model": "gpt-test",
                "stream": true,
                "instructions": "Be brief.",
                "input": [
                    { "type": "message", "role": "user", "content": "Fix main.rs" },
                    reasoning,
                    { "type": "message", "role": "assistant",
                      "content": [{ "type": "output_text", "text": "Reading it." }] },
                    { "type": "function_call", "call_id": "call_1", "name": "read_file",
                      "arguments": "{\"path\":\"src/main.rs\"}" },
                    { "type": "function_call_output", "call_id": "call_1", "output": "fn main() {}" },
                ],
                "tools": [{ "type": "function", "name": "read_file", "description": "Read a file",
                            "parameters": { "type": "object" }, "strict": false }],
                "tool_choice": "auto",
                "parallel_tool_calls": true,
                "max_output_tokens": 8000,
                "reasoning": { "effort": "medium", "summary": "auto" },
                "store": false,
                "include": ["reasoning.encrypted_content"],
            })
        );
        let plain = [Message::user("hi")];
        let mut request = request(&plain, &[]);
        request.effort = Some("auto");
        request.max_output_tokens = None;
        let body = super::body(&request);
        for absent in ["reasoning", "tools", "tool_choice", "max_output_tokens"] {
            assert!(body.get(absent).is_none(), "{absent}");
        }
    }

    #[test]
    fn streams_from_a_local_server() {
        let (base_url, server) = crate::provider::testing::serve_once(TOOL_TURN, "/v1");
        let provider = Responses {
            base_url,
            api_key: Some("sk-test".into()),
            timeouts: Timeouts::default(),
        };
        let messages = [Message::user("Fix main.rs")];
        let mut sink = Collect::default();
        let outcome = provider
            .stream(&request(&messages, &[]), &mut sink, &CancelToken::new())
            .unwrap();
        let received = server.join().unwrap();
        let (head, body) = received.split_once("\r\n\r\n").unwrap();
        let head = head.to_lowercase();
        assert!(head.starts_with("post /v1/responses http/1.1"), "{head}");
        assert!(head.contains("\r\nauthorization: bearer sk-test"), "{head}");
        assert!(
            head.contains("\r\ncontent-type: application/json"),
            "{head}"
        );
        let body: Value = serde_json::from_str(body).unwrap();
        assert_eq!(body["input"][0]["content"], "Fix main.rs");
        assert_eq!(
            (sink.text.as_str(), sink.thought.as_str()),
            ("Reading it.", "Need the file.")
        );
        assert_eq!(outcome.finish, Finish::ToolUse);
        assert_eq!(outcome.tool_calls[0].id, "call_1");
        assert!(outcome.provider_data["responses"]["items"].is_array());
    }

    #[test]
    fn responses_past_the_cap_are_cut_off_whatever_they_hold() {
        use crate::provider::testing::{assert_cut_off, capped, flood, serve_once};
        let piece = "x".repeat(100);
        let call = json!({"type": "response.output_item.added", "output_index": 0,
            "item": {"id": "fc_1", "type": "function_call", "call_id": "c", "name": "write_file",
                     "arguments": ""}});
        for (start, delta) in [
            (
                Value::Null,
                json!({"type": "response.output_text.delta", "delta": piece}),
            ),
            (
                Value::Null,
                json!({"type": "response.reasoning_text.delta", "delta": piece}),
            ),
            (
                call,
                json!({"type": "response.function_call_arguments.delta", "item_id": "fc_1",
                       "delta": piece}),
            ),
            (
                Value::Null,
                json!({"type": "response.output_item.done",
                       "item": {"type": "reasoning", "encrypted_content": piece}}),
            ),
        ] {
            let start = if start.is_null() {
                String::new()
            } else {
                format!("data: {start}\n\n")
            };
            let (base_url, _server) =
                serve_once(flood(&start, &format!("data: {delta}\n\n")), "/v1");
            let provider = Responses {
                base_url,
                api_key: None,
                timeouts: capped(5000),
            };
            let messages = [Message::user("go")];
            let mut sink = Collect::default();
            let result = provider.stream(&request(&messages, &[]), &mut sink, &CancelToken::new());
            assert_cut_off(result, &sink, 5000);
        }
    }
}

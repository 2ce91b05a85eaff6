//! OpenAI Responses API, streamed and stateless: every request replays the
//! conversation (`store: false`), and the reasoning of a turn goes back as
//! the encrypted reasoning items the API returned with it. This module
//! builds the request and drives the call; `stream` parses the answer.
//!
//! A server that ignores `stream: true` answers 200 with a JSON body; that
//! body has no events, so such a call ends as `provider_stream_broken`.

mod raw;
pub(crate) mod stream;

use super::http::{EventStream, Timeouts};
use super::ImageData;
use super::{Message, ModelRequest, Outcome, Provider, Role, Sink, StreamError};
use crate::cancel::CancelToken;
use serde_json::{json, Value};
use stream::{replayable, StreamState};

/// The OpenAI Responses provider.
pub(crate) struct Responses {
    /// The API root, such as `https://api.openai.com/v1`.
    pub base_url: String,
    pub api_key: Option<String>,
    pub timeouts: Timeouts,
    /// What its HTTPS connections trust (the config's).
    pub trust: crate::net::Trust,
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
        let body = body(request);
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

/// The JSON text of one request. The input goes last, spliced in as text:
/// replayed reasoning items are the server's own bytes.
fn body(request: &ModelRequest<'_>) -> String {
    let mut body = json!({
        "model": request.model,
        "stream": true,
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
    let mut text = body.to_string();
    // `body` is an object with members, so it ends in `}`.
    text.pop();
    text.push_str(",\"input\":[");
    for (at, item) in input_json(request.messages).iter().enumerate() {
        if at > 0 {
            text.push(',');
        }
        match item {
            Item::Built(value) => text.push_str(&value.to_string()),
            Item::Kept(raw) => text.push_str(raw),
        }
    }
    text.push_str("]}");
    text
}

/// One input item: built here, or kept from an answer as its text.
enum Item<'a> {
    Built(Value),
    Kept(std::borrow::Cow<'a, str>),
}

/// The conversation as input items. Replayed items carry no `id` (with
/// `store: false` an id names server state that does not exist), except the
/// reasoning items, which go back exactly as received.
fn input_json(messages: &[Message]) -> Vec<Item<'_>> {
    let mut items = Vec::with_capacity(messages.len());
    for message in messages {
        match message.role {
            Role::User if message.images.is_empty() => items.push(Item::Built(json!({
                "type": "message",
                "role": "user",
                "content": message.text,
            }))),
            Role::User => {
                let mut parts = vec![json!({"type": "input_text", "text": message.text})];
                for image in &message.images {
                    if let Some(url) = image.data_url() {
                        parts.push(json!({"type": "input_image", "image_url": url}));
                    }
                }
                items.push(Item::Built(
                    json!({"type": "message", "role": "user", "content": parts}),
                ));
            }
            Role::Assistant => {
                items.extend(kept_reasoning(message));
                if !message.text.is_empty() {
                    items.push(Item::Built(json!({
                        "type": "message",
                        "role": "assistant",
                        "content": [{ "type": "output_text", "text": message.text }],
                    })));
                }
                for call in &message.tool_calls {
                    items.push(Item::Built(json!({
                        "type": "function_call",
                        "call_id": call.id,
                        "name": call.name,
                        "arguments": call.arguments,
                    })));
                }
            }
            Role::Tool => items.push(Item::Built(json!({
                "type": "function_call_output",
                "call_id": message.tool_call_id.as_deref().unwrap_or(""),
                "output": message.text,
            }))),
        }
    }
    items
}

/// The reasoning items kept with an assistant message, as the server
/// wrote them (`raw_items`; sessions stored before kept their values as
/// `items`). Only those with their encrypted content can be replayed:
/// without it the API looks the item up by id and fails with a 404. A
/// kept text that is not one such item (a store edited by hand) is left
/// out rather than spliced into the request.
fn kept_reasoning(message: &Message) -> impl Iterator<Item = Item<'_>> {
    let kept = &message.provider_data["responses"];
    let raw = kept["raw_items"].as_array().into_iter().flatten();
    let raw = raw.filter_map(|text| {
        let text = text.as_str()?;
        let item = serde_json::from_str::<Value>(text).ok()?;
        replayable(&item).then_some(Item::Kept(text.into()))
    });
    let items = kept["items"].as_array().into_iter().flatten();
    let items = items
        .filter(|item| replayable(item))
        .map(|item| Item::Kept(item.to_string().into()));
    raw.chain(items)
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
            max_attempts: None,
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
        let body: Value = serde_json::from_str(&body(&request(&messages, &tools))).unwrap();
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
        let body: Value = serde_json::from_str(&super::body(&request)).unwrap();
        for absent in ["reasoning", "tools", "tool_choice", "max_output_tokens"] {
            assert!(body.get(absent).is_none(), "{absent}");
        }
    }

    #[test]
    fn kept_reasoning_goes_back_byte_for_byte() {
        // Key order, spacing and number spelling as the server wrote them.
        let raw = r#"{"type":"reasoning", "id":"rs_7","summary":[],"encrypted_content":"sig\u002Bx","n":1.50}"#;
        let mut assistant = Message::assistant("", "");
        assistant.provider_data = json!({ "responses": { "raw_items": [
            raw,
            // Not an item that can go back: left out.
            r#"{"type":"reasoning","id":"rs_8","summary":[]}"#,
            r#"{"type":"reasoning","encrypted_content":"x"} trailing"#,
            "not json",
            7,
        ] } });
        let messages = [Message::user("go"), assistant];
        let text = body(&request(&messages, &[]));
        assert!(text.contains(&format!(",{raw}]")), "{text}");
        let body: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(body["input"].as_array().unwrap().len(), 2, "{text}");
        assert_eq!(body["input"][1]["encrypted_content"], "sig+x");
        assert_eq!(body["model"], "gpt-test");
    }

    #[test]
    fn streams_from_a_local_server() {
        let (base_url, server) = crate::provider::testing::serve_once(TOOL_TURN, "/v1");
        let provider = Responses {
            base_url,
            api_key: Some("sk-test".into()),
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
        assert!(outcome.provider_data["responses"]["raw_items"].is_array());
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
            // Copies of one item are kept once: distinct items fill up.
            (
                Value::Array(
                    (0..100)
                        .map(|n| {
                            json!({"type": "response.output_item.done",
                            "item": {"id": format!("rs_{n}"), "type": "reasoning",
                                     "encrypted_content": piece}})
                        })
                        .collect(),
                ),
                json!({"type": "response.in_progress"}),
            ),
        ] {
            let start = match start {
                Value::Null => String::new(),
                Value::Array(events) => events.iter().map(|e| format!("data: {e}\n\n")).collect(),
                start => format!("data: {start}\n\n"),
            };
            let (base_url, _server) =
                serve_once(flood(&start, &format!("data: {delta}\n\n")), "/v1");
            let provider = Responses {
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

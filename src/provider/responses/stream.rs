//! The parse of an OpenAI Responses stream: a state machine fed one SSE
//! event at a time, so it can be tested without a network.

use super::raw;
use crate::provider::http::WireState;
use crate::provider::sse::SseEvent;
use crate::provider::{
    json_len, value_held, Finish, Outcome, ProviderError, Sink, ToolCallRequest, Usage,
};
use serde_json::{json, Value};

/// A function call being streamed, known by its item id (`fc_…`) in the
/// stream and by its call id (`call_…`) in the conversation.
struct Call {
    item_id: String,
    call_id: String,
    name: String,
    arguments: String,
    /// Whether `response.output_item.done` delivered the finished item.
    done: bool,
}

/// A reasoning item as the server sent it: its text, byte for byte, for
/// replay, and its value, to match copies of it.
struct Reasoning {
    value: Value,
    raw: String,
}

impl Reasoning {
    fn cost(&self) -> usize {
        value_held(&self.value) + self.raw.len()
    }
}

/// Whether a reasoning item can go back: without its encrypted content
/// the API looks it up by id and fails with a 404.
pub(crate) fn replayable(item: &Value) -> bool {
    item["type"] == "reasoning" && item["encrypted_content"].is_string()
}

/// The parse of one streamed answer, fed one SSE event at a time.
#[derive(Default)]
pub(crate) struct StreamState {
    calls: Vec<Call>,
    reasoning: Vec<Reasoning>,
    refused: bool,
    /// What the calls and reasoning items hold, as JSON text, plus a
    /// fixed cost per call.
    held: usize,
}

/// What one call costs beyond its strings.
const CALL_BYTES: usize = 128;

impl WireState for StreamState {
    fn handle(
        &mut self,
        event: &SseEvent,
        sink: &mut dyn Sink,
    ) -> Result<Option<Outcome>, ProviderError> {
        StreamState::handle(self, event, sink)
    }

    fn held(&self) -> usize {
        self.held
    }
}

impl StreamState {
    /// Handles one event. Returns the outcome at `response.completed` or
    /// `response.incomplete`, an error for `response.failed`, an `error`
    /// event or data that is not JSON, and `None` otherwise. Events are told
    /// apart by their JSON `type`; unknown types are ignored.
    pub(crate) fn handle(
        &mut self,
        event: &SseEvent,
        sink: &mut dyn Sink,
    ) -> Result<Option<Outcome>, ProviderError> {
        let value: Value = serde_json::from_str(&event.data).map_err(|err| {
            ProviderError::new(
                "provider_bad_response",
                format!("the provider sent an event that is not valid JSON: {err}"),
            )
        })?;
        let delta = value["delta"].as_str().unwrap_or("");
        match value["type"].as_str().unwrap_or("") {
            "response.output_text.delta" if !delta.is_empty() => sink.text(delta),
            "response.reasoning_summary_text.delta" | "response.reasoning_text.delta"
                if !delta.is_empty() =>
            {
                sink.thought(delta)
            }
            // Summary parts are paragraphs: keep them apart.
            "response.reasoning_summary_part.added"
                if value["summary_index"].as_u64() > Some(0) =>
            {
                sink.thought("\n\n")
            }
            "response.refusal.delta" => {
                self.refused = true;
                if !delta.is_empty() {
                    sink.text(delta);
                }
            }
            "response.output_item.added" => {
                let item = &value["item"];
                if item["type"] == "function_call" {
                    let at = self.call(item);
                    self.set_arguments(at, item["arguments"].as_str().unwrap_or(""));
                }
                // Usually a bare start, replaced by the finished item; a
                // bridge may put the whole item here instead.
                self.keep_reasoning(item, raw::member(&event.data, "item"));
            }
            "response.function_call_arguments.delta" => {
                let at = self.call_by_item(&value);
                self.held += json_len(delta);
                self.calls[at].arguments.push_str(delta);
            }
            "response.function_call_arguments.done" => {
                let at = self.call_by_item(&value);
                if let Some(arguments) = value["arguments"].as_str() {
                    self.set_arguments(at, arguments);
                }
                if self.calls[at].name.is_empty() {
                    let name = text(&value["name"]);
                    self.held += json_len(&name);
                    self.calls[at].name = name;
                }
            }
            "response.output_item.done" => {
                let item = &value["item"];
                self.keep_reasoning(item, raw::member(&event.data, "item"));
                self.item_done(item);
            }
            "response.completed" => {
                self.keep_final_reasoning(&value["response"], &event.data);
                return Ok(Some(self.outcome(&value["response"], None)));
            }
            "response.incomplete" => {
                let response = &value["response"];
                let finish = match response["incomplete_details"]["reason"].as_str() {
                    Some("content_filter") => Finish::Refusal,
                    // `max_output_tokens`, and any reason added later: the
                    // answer was cut short.
                    _ => Finish::MaxTokens,
                };
                self.keep_final_reasoning(response, &event.data);
                return Ok(Some(self.outcome(response, Some(finish))));
            }
            "response.failed" => return Err(stream_error(&value["response"]["error"])),
            "error" => {
                let error = if value["error"].is_object() {
                    &value["error"]
                } else {
                    &value
                };
                return Err(stream_error(error));
            }
            _ => {}
        }
        Ok(None)
    }

    /// Takes a finished item: a function call gets its final name and
    /// arguments.
    fn item_done(&mut self, item: &Value) {
        if item["type"] == "function_call" {
            let at = self.call(item);
            if let Some(arguments) = item["arguments"].as_str() {
                self.set_arguments(at, arguments);
            }
            self.calls[at].done = true;
        }
    }

    /// Keeps a reasoning item (anything else is passed over) as the
    /// server wrote it: `raw` is its text in the event, when found. A copy
    /// of an item already kept (the same id, or the same content when it
    /// has none) is kept once: a later copy replaces an earlier one that
    /// could not be replayed, never one that could.
    fn keep_reasoning(&mut self, item: &Value, raw: Option<&str>) {
        if item["type"] != "reasoning" {
            return;
        }
        let kept = Reasoning {
            raw: raw.map_or_else(|| item.to_string(), str::to_string),
            value: item.clone(),
        };
        let id = item["id"].as_str().filter(|id| !id.is_empty());
        let same = self.reasoning.iter().position(|old| match id {
            Some(id) => old.value["id"] == id,
            None => old.value == *item,
        });
        match same {
            Some(at) if !replayable(&self.reasoning[at].value) => {
                self.held = self.held.saturating_sub(self.reasoning[at].cost()) + kept.cost();
                self.reasoning[at] = kept;
            }
            Some(_) => {}
            None => {
                self.held += kept.cost();
                self.reasoning.push(kept);
            }
        }
    }

    /// Keeps the reasoning items of the finished response's `output`
    /// (some bridges send a signed item only there), in its order: the
    /// items it lists first, then those only the events brought.
    fn keep_final_reasoning(&mut self, response: &Value, data: &str) {
        let Some(output) = response["output"].as_array() else {
            return;
        };
        let texts = raw::member(data, "response")
            .and_then(|response| raw::member(response, "output"))
            .map(raw::elements)
            .filter(|texts| texts.len() == output.len());
        let streamed = std::mem::take(&mut self.reasoning);
        let streamed_cost: usize = streamed.iter().map(Reasoning::cost).sum();
        self.held = self.held.saturating_sub(streamed_cost);
        for (at, item) in output.iter().enumerate() {
            let text = texts.as_ref().map(|texts| texts[at]);
            self.keep_reasoning(item, text);
        }
        for item in streamed {
            let id = item.value["id"].as_str().filter(|id| !id.is_empty());
            let listed = self.reasoning.iter_mut().find(|new| match id {
                Some(id) => new.value["id"] == id,
                None => new.value == item.value,
            });
            match listed {
                // The streamed copy stands unless only the final one can
                // be replayed.
                Some(new) if replayable(&item.value) || !replayable(&new.value) => {
                    self.held = self.held.saturating_sub(new.cost()) + item.cost();
                    *new = item;
                }
                Some(_) => {}
                None => {
                    self.held += item.cost();
                    self.reasoning.push(item);
                }
            }
        }
    }

    /// Replaces the arguments of the call at `at` (the finished value
    /// wins over the streamed pieces).
    fn set_arguments(&mut self, at: usize, arguments: &str) {
        let call = &mut self.calls[at];
        self.held = self.held.saturating_sub(json_len(&call.arguments)) + json_len(arguments);
        call.arguments.clear();
        call.arguments.push_str(arguments);
    }

    /// The call an item describes, matched by item id, else by call id;
    /// new when neither is known. Fills in the ids and the name. Returns
    /// its position.
    fn call(&mut self, item: &Value) -> usize {
        let item_id = item["id"].as_str().unwrap_or("");
        let call_id = item["call_id"].as_str().unwrap_or("");
        let position = self.calls.iter().position(|call| {
            (!item_id.is_empty() && call.item_id == item_id)
                || (!call_id.is_empty() && call.call_id == call_id)
        });
        let at = self.entry(position, item_id);
        let call = &mut self.calls[at];
        if call.call_id.is_empty() && !call_id.is_empty() {
            self.held += json_len(call_id);
            call.call_id = call_id.to_string();
        }
        if call.name.is_empty() {
            call.name = text(&item["name"]);
            self.held += json_len(&call.name);
        }
        at
    }

    /// The call an argument event points at by `item_id`.
    fn call_by_item(&mut self, value: &Value) -> usize {
        let item_id = value["item_id"].as_str().unwrap_or("");
        let position = self.calls.iter().position(|call| call.item_id == item_id);
        self.entry(position, item_id)
    }

    fn entry(&mut self, position: Option<usize>, item_id: &str) -> usize {
        let position = position.unwrap_or_else(|| {
            self.calls.push(Call {
                item_id: String::new(),
                call_id: String::new(),
                name: String::new(),
                arguments: String::new(),
                done: false,
            });
            self.held += CALL_BYTES;
            self.calls.len() - 1
        });
        let call = &mut self.calls[position];
        if call.item_id.is_empty() && !item_id.is_empty() {
            self.held += json_len(item_id);
            call.item_id = item_id.to_string();
        }
        position
    }

    /// The outcome of a finished stream: `finish` is set for an incomplete
    /// response, and a completed one is a tool turn when it holds calls.
    fn outcome(&mut self, response: &Value, finish: Option<Finish>) -> Outcome {
        // The finished response lists every output item: a proxy that
        // dropped the item events still gets its calls and reasoning through.
        let output = response["output"].as_array().map_or(&[][..], Vec::as_slice);
        let complete = finish.is_none();
        if complete {
            for item in output.iter().filter(|item| item["type"] == "function_call") {
                self.item_done(item);
            }
        }
        let tool_calls: Vec<ToolCallRequest> = std::mem::take(&mut self.calls)
            .into_iter()
            // An incomplete response may have cut a call short.
            .filter(|call| complete || call.done)
            .enumerate()
            .map(|(position, call)| ToolCallRequest {
                id: if call.call_id.is_empty() {
                    format!("call_{position}_{}", crate::util::random_hex())
                } else {
                    call.call_id
                },
                name: call.name,
                arguments: if call.arguments.trim().is_empty() {
                    "{}".to_string()
                } else {
                    call.arguments
                },
            })
            .collect();
        let finish = if self.refused {
            Finish::Refusal
        } else if let Some(finish) = finish {
            finish
        } else if tool_calls.is_empty() {
            Finish::EndTurn
        } else {
            Finish::ToolUse
        };
        // Kept as text: what goes back is what came.
        let reasoning: Vec<String> = std::mem::take(&mut self.reasoning)
            .into_iter()
            .map(|item| item.raw)
            .collect();
        Outcome {
            finish,
            usage: usage(&response["usage"]),
            cost: crate::provider::reported_cost(&response["usage"]["cost"]),
            tool_calls,
            provider_data: if reasoning.is_empty() {
                Value::Null
            } else {
                json!({ "responses": { "raw_items": reasoning } })
            },
        }
    }
}

fn text(value: &Value) -> String {
    value.as_str().unwrap_or("").to_string()
}

fn usage(usage: &Value) -> Option<Usage> {
    if !usage.is_object() {
        return None;
    }
    let count = |value: &Value| crate::provider::reported_tokens(value).unwrap_or(0);
    let cached = &usage["input_tokens_details"]["cached_tokens"];
    let reasoning = &usage["output_tokens_details"]["reasoning_tokens"];
    Some(Usage {
        // Unlike Anthropic's, this input count already includes the cached
        // tokens.
        input_tokens: count(&usage["input_tokens"]),
        output_tokens: count(&usage["output_tokens"]),
        cached_tokens: count(cached),
        reasoning_tokens: count(reasoning),
        cache_write_tokens: 0,
        unreported: crate::provider::Unreported::of(
            crate::provider::reported_tokens(cached).is_some(),
            false,
            crate::provider::reported_tokens(reasoning).is_some(),
        ),
    })
}

/// The error of `response.failed` (`response.error`) or of an `error`
/// event, both `{code, message}`.
fn stream_error(error: &Value) -> ProviderError {
    let code = error["code"]
        .as_str()
        .or(error["type"].as_str())
        .unwrap_or("error");
    let message = error["message"].as_str().unwrap_or("no details given");
    let mut error = ProviderError::new(
        "provider_stream_error",
        format!("the model provider reported an error mid-stream: {message} ({code})"),
    );
    error.retryable = matches!(code, "server_error" | "rate_limit_exceeded");
    error
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use crate::provider::sse::{Line, SseParser};

    /// The example stream of WIRE.md: a reasoning summary, text, one call.
    pub(in crate::provider::responses) const TOOL_TURN: &str = r##"event: response.created
data: {"type":"response.created","sequence_number":0,"response":{"id":"resp_1","object":"response","status":"in_progress","output":[],"usage":null}}

event: response.output_item.added
data: {"type":"response.output_item.added","output_index":0,"item":{"id":"rs_1","type":"reasoning","summary":[]}}

event: response.reasoning_summary_part.added
data: {"type":"response.reasoning_summary_part.added","item_id":"rs_1","output_index":0,"summary_index":0,"part":{"type":"summary_text","text":""}}

event: response.reasoning_summary_text.delta
data: {"type":"response.reasoning_summary_text.delta","item_id":"rs_1","output_index":0,"summary_index":0,"delta":"Need the file."}

event: response.output_item.done
data: {"type":"response.output_item.done","output_index":0,"item":{"id":"rs_1","type":"reasoning","summary":[{"type":"summary_text","text":"Need the file."}],"encrypted_content":"gAAAA"}}

event: response.output_item.added
data: {"type":"response.output_item.added","output_index":1,"item":{"id":"msg_1","type":"message","role":"assistant","status":"in_progress","content":[]}}

event: response.output_text.delta
data: {"type":"response.output_text.delta","item_id":"msg_1","output_index":1,"content_index":0,"delta":"Reading it.","logprobs":[]}

event: response.output_item.done
data: {"type":"response.output_item.done","output_index":1,"item":{"id":"msg_1","type":"message","role":"assistant","status":"completed","content":[{"type":"output_text","text":"Reading it.","annotations":[]}]}}

event: response.output_item.added
data: {"type":"response.output_item.added","output_index":2,"item":{"id":"fc_1","type":"function_call","call_id":"call_1","name":"read_file","arguments":"","status":"in_progress"}}

event: response.function_call_arguments.delta
data: {"type":"response.function_call_arguments.delta","item_id":"fc_1","output_index":2,"delta":"{\"path\":\"src/"}

event: response.function_call_arguments.delta
data: {"type":"response.function_call_arguments.delta","item_id":"fc_1","output_index":2,"delta":"main.rs\"}"}

event: response.function_call_arguments.done
data: {"type":"response.function_call_arguments.done","item_id":"fc_1","output_index":2,"arguments":"{\"path\":\"src/main.rs\"}"}

event: response.output_item.done
data: {"type":"response.output_item.done","output_index":2,"item":{"id":"fc_1","type":"function_call","call_id":"call_1","name":"read_file","arguments":"{\"path\":\"src/main.rs\"}","status":"completed"}}

event: response.completed
data: {"type":"response.completed","response":{"id":"resp_1","status":"completed","usage":{"input_tokens":812,"input_tokens_details":{"cached_tokens":512},"output_tokens":41,"output_tokens_details":{"reasoning_tokens":5},"total_tokens":853}}}

"##;

    pub(in crate::provider::responses) use crate::provider::testing::Collect;

    /// Feeds recorded SSE text through the parser and the state machine
    /// until the stream ends, fails or runs out.
    fn run(sse: &str) -> (Collect, Result<Option<Outcome>, ProviderError>) {
        let mut parser = SseParser::new();
        let mut state = StreamState::default();
        let mut sink = Collect::default();
        for line in sse.split('\n') {
            if let Line::Event(event) = parser.line(line.as_bytes()) {
                match state.handle(&event, &mut sink) {
                    Ok(None) => {}
                    other => return (sink, other),
                }
            }
        }
        (sink, Ok(None))
    }

    fn outcome(sse: &str) -> Outcome {
        run(sse)
            .1
            .unwrap()
            .expect("the stream reaches its terminal event")
    }

    /// The reasoning items kept for replay, as text.
    fn kept(outcome: &Outcome) -> Vec<&str> {
        let items = outcome.provider_data["responses"]["raw_items"].as_array();
        items
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .collect()
    }

    /// A stream of text that ends with `terminal` (the data of the last
    /// event).
    fn ending(terminal: &str) -> String {
        format!(
            "data: {{\"type\":\"response.output_text.delta\",\"item_id\":\"msg_1\",\"delta\":\"Hi\"}}\n\n\
             data: {terminal}\n\n"
        )
    }

    #[test]
    fn streams_reasoning_text_and_a_tool_call() {
        let (sink, result) = run(TOOL_TURN);
        let outcome = result.unwrap().unwrap();
        assert_eq!(sink.thought, "Need the file.");
        assert_eq!(sink.text, "Reading it.");
        assert_eq!(outcome.finish, Finish::ToolUse);
        assert_eq!(
            outcome.tool_calls,
            vec![ToolCallRequest {
                id: "call_1".into(),
                name: "read_file".into(),
                arguments: r#"{"path":"src/main.rs"}"#.into(),
            }]
        );
        assert_eq!(
            outcome.usage,
            Some(Usage {
                input_tokens: 812,
                output_tokens: 41,
                cached_tokens: 512,
                reasoning_tokens: 5,
                cache_write_tokens: 0,
                unreported: crate::provider::Unreported::of(true, false, true),
            })
        );
        assert_eq!(
            kept(&outcome),
            [
                r#"{"id":"rs_1","type":"reasoning","summary":[{"type":"summary_text","text":"Need the file."}],"encrypted_content":"gAAAA"}"#
            ]
        );
    }

    #[test]
    fn terminal_events_map_to_finishes() {
        let completed =
            r#"{"type":"response.completed","response":{"status":"completed","output":[]}}"#;
        let plain = outcome(&ending(completed));
        assert_eq!(plain.finish, Finish::EndTurn);
        assert_eq!((plain.usage, plain.provider_data), (None, Value::Null));
        for (reason, finish) in [
            ("max_output_tokens", Finish::MaxTokens),
            ("content_filter", Finish::Refusal),
        ] {
            let incomplete = format!(
                r#"{{"type":"response.incomplete","response":{{"status":"incomplete","incomplete_details":{{"reason":"{reason}"}},"usage":{{"input_tokens":3,"output_tokens":9}}}}}}"#
            );
            let outcome = outcome(&ending(&incomplete));
            assert_eq!(outcome.finish, finish, "{reason}");
            assert_eq!(outcome.usage.unwrap().output_tokens, 9);
        }
        let refusal = "data: {\"type\":\"response.refusal.delta\",\"delta\":\"No.\"}\n\n";
        let (sink, result) = run(&format!("{refusal}{}", ending(completed)));
        assert_eq!(result.unwrap().unwrap().finish, Finish::Refusal);
        assert_eq!(sink.text, "No.Hi");
    }

    #[test]
    fn incomplete_responses_drop_unfinished_calls() {
        let cut = TOOL_TURN
            .split("event: response.output_item.done\ndata: {\"type\":\"response.output_item.done\",\"output_index\":2")
            .next()
            .unwrap()
            .to_string()
            + "data: {\"type\":\"response.incomplete\",\"response\":{\"incomplete_details\":{\"reason\":\"max_output_tokens\"}}}\n\n";
        let outcome = outcome(&cut);
        assert_eq!(outcome.finish, Finish::MaxTokens);
        assert!(outcome.tool_calls.is_empty());
        assert!(kept(&outcome)[0].contains(r#""encrypted_content":"gAAAA""#));
    }

    #[test]
    fn completed_output_fills_in_what_the_events_missed() {
        let completed = r#"{"type":"response.completed","response":{"output":[
            {"id":"rs_9","type":"reasoning","summary":[],"encrypted_content":"enc"},
            {"id":"fc_9","type":"function_call","call_id":"call_9","name":"list_directory","arguments":""}]}}"#
            .replace('\n', "");
        let outcome = outcome(&ending(&completed));
        assert_eq!(outcome.finish, Finish::ToolUse);
        assert_eq!(outcome.tool_calls[0].id, "call_9");
        assert_eq!(outcome.tool_calls[0].arguments, "{}");
        assert_eq!(
            kept(&outcome),
            [r#"{"id":"rs_9","type":"reasoning","summary":[],"encrypted_content":"enc"}"#]
        );
    }

    #[test]
    fn signed_reasoning_only_in_the_completed_response_is_kept_as_written() {
        // A bridge streams a bare reasoning item, then puts the signed one
        // in the finished response only, in its own key order.
        let signed = r#"{"type":"reasoning","id":"rs_c","encrypted_content":"EqQB+sig=","summary":[{"text":"Hm.","type":"summary_text"}]}"#;
        let sse = format!(
            "data: {{\"type\":\"response.output_item.added\",\"item\":{{\"id\":\"rs_c\",\"type\":\"reasoning\",\"summary\":[]}}}}\n\n\
             data: {{\"type\":\"response.reasoning_text.delta\",\"item_id\":\"rs_c\",\"delta\":\"Hm.\"}}\n\n\
             data: {{\"type\":\"response.output_item.done\",\"item\":{{\"id\":\"rs_c\",\"type\":\"reasoning\",\"summary\":[]}}}}\n\n\
             data: {{\"type\":\"response.completed\",\"response\":{{\"output\": [ {signed} ,\
             {{\"type\":\"function_call\",\"id\":\"fc_1\",\"call_id\":\"call_1\",\"name\":\"f\",\"arguments\":\"{{}}\"}}]}}}}\n\n"
        );
        let (sink, result) = run(&sse);
        let outcome = result.unwrap().unwrap();
        assert_eq!(sink.thought, "Hm.");
        assert_eq!(outcome.finish, Finish::ToolUse);
        assert_eq!(kept(&outcome), [signed]);
    }

    #[test]
    fn an_item_streamed_and_completed_is_kept_once_in_output_order() {
        let streamed = r#"{"id":"rs_1","type":"reasoning","summary":[],"encrypted_content":"one"}"#;
        let bare = r#"{"type":"reasoning","summary":[],"encrypted_content":"no id"}"#;
        let first = r#"{"id":"rs_0","type":"reasoning","summary":[],"encrypted_content":"zero"}"#;
        let done = |item: &str| {
            format!("data: {{\"type\":\"response.output_item.done\",\"item\":{item}}}\n\n")
        };
        // The completed copies differ in spacing only (and rs_0 is new).
        let completed = format!(
            "data: {{\"type\":\"response.completed\",\"response\":{{\"output\":[{first},{},{}]}}}}\n\n",
            streamed.replace(',', ", "),
            bare.replace(':', ": "),
        );
        let both = outcome(&format!("{}{}{completed}", done(streamed), done(bare)));
        assert_eq!(kept(&both), [first, streamed, bare]);
        // The same in an incomplete response, and a repeated event.
        let incomplete = completed.replace("response.completed", "response.incomplete");
        let outcome = outcome(&format!("{}{}{incomplete}", done(streamed), done(streamed)));
        assert_eq!(outcome.finish, Finish::MaxTokens);
        assert_eq!(
            kept(&outcome),
            [first, streamed, &bare.replace(':', ": ")[..]]
        );
    }

    #[test]
    fn unknown_events_are_ignored() {
        let completed = r#"{"type":"response.completed","response":{}}"#;
        let sse = format!(
            "event: response.in_progress\ndata: {{\"type\":\"response.in_progress\",\"delta\":{{}}}}\n\n\
             data: {{\"type\":\"response.brand_new\",\"item\":7}}\n\n\
             data: {{\"type\":\"response.reasoning_text.delta\",\"delta\":\"raw\"}}\n\n{}",
            ending(completed)
        );
        let (sink, result) = run(&sse);
        assert_eq!(result.unwrap().unwrap().finish, Finish::EndTurn);
        assert_eq!((sink.text.as_str(), sink.thought.as_str()), ("Hi", "raw"));
    }

    #[test]
    fn failures_and_bad_json_fail_the_stream() {
        let failed = r#"data: {"type":"response.failed","response":{"status":"failed","error":{"code":"server_error","message":"The server had an error."}}}"#;
        let error = run(&format!("{failed}\n\n")).1.unwrap_err();
        assert_eq!(error.code, "provider_stream_error");
        assert!(error.retryable);
        assert!(error.message.contains("The server had an error."));
        let standalone = r#"data: {"type":"error","code":"rate_limit_exceeded","message":"Slow down.","param":null}"#;
        let error = run(&format!("{standalone}\n\n")).1.unwrap_err();
        assert!(error.retryable && error.message.contains("Slow down."));
        let invalid = standalone.replace("rate_limit_exceeded", "invalid_prompt");
        assert!(!run(&format!("{invalid}\n\n")).1.unwrap_err().retryable);
        let bad = run("data: not json\n\n").1.unwrap_err();
        assert_eq!(bad.code, "provider_bad_response");
    }

    #[test]
    fn a_gateway_cost_in_the_usage_is_the_calls() {
        let completed = r#"{"type":"response.completed","response":{"status":"completed","output":[],"usage":{"input_tokens":3,"output_tokens":9,"cost":"0.25"}}}"#;
        assert_eq!(outcome(&ending(completed)).cost, Some(0.25));
        let broken = completed.replace("\"0.25\"", "-1");
        assert_eq!(outcome(&ending(&broken)).cost, None);
    }
}

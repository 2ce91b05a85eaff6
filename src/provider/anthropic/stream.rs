//! The parse of an Anthropic Messages stream: a state machine fed one SSE
//! event at a time, so it can be tested without a network.

use crate::provider::http::WireState;
use crate::provider::sse::SseEvent;
use crate::provider::{
    json_len, value_held, Finish, Outcome, ProviderError, Sink, ToolCallRequest, Usage,
};
use serde_json::{json, Value};

/// One content block of the answer being streamed.
enum Block {
    Text,
    /// A thinking block: as it started (so fields we do not know survive),
    /// plus its streamed text and signature.
    Thinking {
        start: Value,
        thinking: String,
        signature: String,
    },
    /// Arrives whole and goes back whole.
    Redacted(Value),
    ToolUse {
        id: String,
        name: String,
        json: String,
    },
    Other,
}

struct Slot {
    index: u64,
    block: Block,
    stopped: bool,
}

/// Token counts as reported so far; later reports override earlier ones.
#[derive(Default)]
struct Counts {
    input: Option<u64>,
    cache_creation: Option<u64>,
    cache_read: Option<u64>,
    output: Option<u64>,
    /// A gateway's cost of the call (`usage.cost`, USD), if it gave one.
    cost: Option<f64>,
}

impl Counts {
    fn update(&mut self, usage: &Value) {
        let fields = [
            (&mut self.input, "input_tokens"),
            (&mut self.cache_creation, "cache_creation_input_tokens"),
            (&mut self.cache_read, "cache_read_input_tokens"),
            (&mut self.output, "output_tokens"),
        ];
        for (slot, name) in fields {
            if let Some(count) = crate::provider::reported_tokens(&usage[name]) {
                *slot = Some(count);
            }
        }
        if let Some(cost) = crate::provider::reported_cost(&usage["cost"]) {
            self.cost = Some(cost);
        }
    }

    /// The usage in Spindle's terms: input counts every prompt token,
    /// cached or not (Anthropic's `input_tokens` excludes cache reads and
    /// writes).
    fn usage(&self) -> Option<Usage> {
        if self.input.is_none() && self.output.is_none() {
            return None;
        }
        let cache_read = self.cache_read.unwrap_or(0);
        let cache_write = self.cache_creation.unwrap_or(0);
        Some(Usage {
            input_tokens: self
                .input
                .unwrap_or(0)
                .saturating_add(cache_write)
                .saturating_add(cache_read),
            output_tokens: self.output.unwrap_or(0),
            cached_tokens: cache_read,
            reasoning_tokens: 0,
            cache_write_tokens: cache_write,
            // Thinking is counted in the output, never apart.
            unreported: crate::provider::Unreported::of(
                self.cache_read.is_some(),
                self.cache_creation.is_some(),
                false,
            ),
        })
    }
}

/// The parse of one streamed answer, fed one SSE event at a time.
#[derive(Default)]
pub(crate) struct StreamState {
    blocks: Vec<Slot>,
    stop_reason: Option<String>,
    counts: Counts,
    /// What the blocks hold (thinking, signatures, tool input), as JSON
    /// text, plus a fixed cost per block.
    held: usize,
}

/// What one content block costs beyond its strings.
const BLOCK_BYTES: usize = 128;

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
    /// Handles one event. Returns the outcome at `message_stop`, an error
    /// for an `error` event or data that is not JSON, and `None` otherwise.
    /// Events are told apart by their JSON `type` (proxies sometimes drop
    /// the `event:` line); unknown types are ignored.
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
        match value["type"].as_str().unwrap_or("") {
            "message_start" => self.counts.update(&value["message"]["usage"]),
            "content_block_start" => self.start(&value),
            "content_block_delta" => self.delta(&value, sink),
            "content_block_stop" => {
                if let Some(slot) = self.slot(&value) {
                    slot.stopped = true;
                }
            }
            "message_delta" => {
                if let Some(reason) = value["delta"]["stop_reason"].as_str() {
                    self.stop_reason = Some(reason.to_string());
                }
                self.counts.update(&value["usage"]);
            }
            "message_stop" => return Ok(Some(std::mem::take(self).outcome())),
            "error" => return Err(stream_error(&value)),
            // `ping` and whatever the API adds later.
            _ => {}
        }
        Ok(None)
    }

    fn start(&mut self, value: &Value) {
        let index = value["index"].as_u64().unwrap_or(self.blocks.len() as u64);
        let start = &value["content_block"];
        let text = |field: &str| start[field].as_str().unwrap_or("").to_string();
        let block = match start["type"].as_str().unwrap_or("") {
            "text" => Block::Text,
            "thinking" => Block::Thinking {
                start: start.clone(),
                thinking: text("thinking"),
                signature: text("signature"),
            },
            "redacted_thinking" => Block::Redacted(start.clone()),
            // The `input: {}` of the start is a placeholder: the input
            // streams as JSON text.
            "tool_use" => Block::ToolUse {
                id: text("id"),
                name: text("name"),
                json: String::new(),
            },
            _ => Block::Other,
        };
        self.held += BLOCK_BYTES
            + match &block {
                Block::Thinking { start, .. } | Block::Redacted(start) => value_held(start),
                Block::ToolUse { id, name, .. } => json_len(id) + json_len(name),
                _ => 0,
            };
        self.blocks.push(Slot {
            index,
            block,
            stopped: false,
        });
    }

    /// The block an event points at by `index`, or the latest one when the
    /// event has none.
    fn slot(&mut self, value: &Value) -> Option<&mut Slot> {
        match value["index"].as_u64() {
            Some(index) => self.blocks.iter_mut().rev().find(|s| s.index == index),
            None => self.blocks.last_mut(),
        }
    }

    fn delta(&mut self, value: &Value, sink: &mut dyn Sink) {
        let delta = &value["delta"];
        let field = |name: &str| delta[name].as_str().unwrap_or("");
        let mut held = 0;
        let block = self.slot(value).map(|slot| &mut slot.block);
        match (delta["type"].as_str().unwrap_or(""), block) {
            ("text_delta", _) => {
                let text = field("text");
                if !text.is_empty() {
                    sink.text(text);
                }
            }
            ("thinking_delta", block) => {
                let text = field("thinking");
                if let Some(Block::Thinking { thinking, .. }) = block {
                    held = json_len(text);
                    thinking.push_str(text);
                }
                if !text.is_empty() {
                    sink.thought(text);
                }
            }
            ("signature_delta", Some(Block::Thinking { signature, .. })) => {
                held = json_len(field("signature"));
                signature.push_str(field("signature"));
            }
            ("input_json_delta", Some(Block::ToolUse { json, .. })) => {
                held = json_len(field("partial_json"));
                json.push_str(field("partial_json"));
            }
            // Citations and delta types added later.
            _ => {}
        }
        self.held += held;
    }

    /// The outcome of a stream that reached `message_stop`.
    fn outcome(mut self) -> Outcome {
        let mut finish = match self.stop_reason.as_deref().unwrap_or("end_turn") {
            "tool_use" => Finish::ToolUse,
            "max_tokens" | "model_context_window_exceeded" => Finish::MaxTokens,
            "refusal" => Finish::Refusal,
            // `pause_turn` comes from long server-side tool loops, which
            // Spindle does not use: the answer so far stands as the turn's
            // end, unless it called tools (then it is a tool turn, below).
            // `end_turn`, `stop_sequence` and unknown reasons end the turn.
            _ => Finish::EndTurn,
        };
        self.blocks.sort_by_key(|slot| slot.index);
        let last = self.blocks.last().map(|slot| slot.index);
        let mut thinking = Vec::new();
        let mut tool_calls = Vec::new();
        for slot in self.blocks {
            match slot.block {
                // A thinking block without its signature (cut off) would be
                // refused if sent back, so it is not kept.
                Block::Thinking {
                    mut start,
                    thinking: text,
                    signature,
                } if !signature.is_empty() => {
                    if !start.is_object() {
                        start = json!({ "type": "thinking" });
                    }
                    start["thinking"] = json!(text);
                    start["signature"] = json!(signature);
                    thinking.push(start);
                }
                Block::Redacted(block) => thinking.push(block),
                Block::ToolUse { id, name, json } => {
                    // A call whose input was cut off must not run.
                    let cut_off = finish == Finish::MaxTokens && Some(slot.index) == last;
                    if cut_off || !slot.stopped {
                        log::debug!("dropping the incomplete call {id} of {name}");
                        continue;
                    }
                    let id = if id.is_empty() {
                        format!("toolu_{}_{}", tool_calls.len(), crate::util::random_hex())
                    } else {
                        id
                    };
                    let arguments = if json.trim().is_empty() {
                        "{}".to_string()
                    } else {
                        json
                    };
                    tool_calls.push(ToolCallRequest {
                        id,
                        name,
                        arguments,
                    });
                }
                _ => {}
            }
        }
        finish = match finish {
            Finish::ToolUse if tool_calls.is_empty() => Finish::EndTurn,
            Finish::EndTurn if !tool_calls.is_empty() => Finish::ToolUse,
            other => other,
        };
        Outcome {
            finish,
            usage: self.counts.usage(),
            cost: self.counts.cost,
            tool_calls,
            provider_data: if thinking.is_empty() {
                Value::Null
            } else {
                json!({ "anthropic": { "thinking": thinking } })
            },
        }
    }
}

/// The error of an `error` event sent after the 200:
/// `{"type":"error","error":{"type":"overloaded_error","message":"…"}}`.
fn stream_error(value: &Value) -> ProviderError {
    let error = &value["error"];
    let kind = error["type"].as_str().unwrap_or("error");
    let message = error["message"]
        .as_str()
        .or(error.as_str())
        .or(value["message"].as_str())
        .unwrap_or("no details given");
    let mut error = ProviderError::new(
        "provider_stream_error",
        format!("the model provider reported an error mid-stream: {message} ({kind})"),
    );
    error.retryable = matches!(kind, "overloaded_error" | "api_error");
    error
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use crate::provider::sse::{Line, SseParser};

    /// The example stream of WIRE.md: thinking, text, one tool call.
    pub(in crate::provider::anthropic) const TOOL_TURN: &str = r##"event: message_start
data: {"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":812,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"output_tokens":1}}}

event: ping
data: {"type":"ping"}

event: content_block_start
data: {"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":"","signature":""}}

event: content_block_delta
data: {"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"Need the file."}}

event: content_block_delta
data: {"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature":"EqQBCkYI"}}

event: content_block_stop
data: {"type":"content_block_stop","index":0}

event: content_block_start
data: {"type":"content_block_start","index":1,"content_block":{"type":"text","text":""}}

event: content_block_delta
data: {"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"Reading it."}}

event: content_block_stop
data: {"type":"content_block_stop","index":1}

event: content_block_start
data: {"type":"content_block_start","index":2,"content_block":{"type":"tool_use","id":"toolu_1","name":"read_file","input":{}}}

event: content_block_delta
data: {"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":"{\"path\":\"src/"}}

event: content_block_delta
data: {"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":"main.rs\"}"}}

event: content_block_stop
data: {"type":"content_block_stop","index":2}

event: message_delta
data: {"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},"usage":{"output_tokens":41}}

event: message_stop
data: {"type":"message_stop"}

"##;

    pub(in crate::provider::anthropic) use crate::provider::testing::Collect;

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
            .expect("the stream reaches message_stop")
    }

    /// A stream of one text block ending for `reason`.
    fn ending(reason: &str) -> String {
        format!(
            "data: {{\"type\":\"message_start\",\"message\":{{\"usage\":{{\"input_tokens\":5}}}}}}\n\n\
             data: {{\"type\":\"content_block_start\",\"index\":0,\"content_block\":{{\"type\":\"text\",\"text\":\"\"}}}}\n\n\
             data: {{\"type\":\"content_block_delta\",\"index\":0,\"delta\":{{\"type\":\"text_delta\",\"text\":\"Hi\"}}}}\n\n\
             data: {{\"type\":\"content_block_stop\",\"index\":0}}\n\n\
             data: {{\"type\":\"message_delta\",\"delta\":{{\"stop_reason\":\"{reason}\"}},\"usage\":{{\"output_tokens\":3}}}}\n\n\
             data: {{\"type\":\"message_stop\"}}\n\n"
        )
    }

    #[test]
    fn streams_thinking_text_and_a_tool_call() {
        let (sink, result) = run(TOOL_TURN);
        let outcome = result.unwrap().unwrap();
        assert_eq!(sink.thought, "Need the file.");
        assert_eq!(sink.text, "Reading it.");
        assert_eq!(outcome.finish, Finish::ToolUse);
        assert_eq!(
            outcome.tool_calls,
            vec![ToolCallRequest {
                id: "toolu_1".into(),
                name: "read_file".into(),
                arguments: r#"{"path":"src/main.rs"}"#.into(),
            }]
        );
        let usage = outcome.usage.unwrap();
        assert_eq!((usage.input_tokens, usage.output_tokens), (812, 41));
        assert_eq!(
            outcome.provider_data,
            json!({ "anthropic": { "thinking": [
                { "type": "thinking", "thinking": "Need the file.", "signature": "EqQBCkYI" }
            ] } })
        );
    }

    #[test]
    fn stop_reasons_map_to_finishes() {
        for (reason, finish) in [
            ("end_turn", Finish::EndTurn),
            ("stop_sequence", Finish::EndTurn),
            ("max_tokens", Finish::MaxTokens),
            ("model_context_window_exceeded", Finish::MaxTokens),
            ("refusal", Finish::Refusal),
            ("pause_turn", Finish::EndTurn),
            // A tool stop without any call has nothing to run.
            ("tool_use", Finish::EndTurn),
        ] {
            let outcome = outcome(&ending(reason));
            assert_eq!(outcome.finish, finish, "{reason}");
            assert_eq!(outcome.provider_data, Value::Null);
        }
        // `pause_turn` with a finished call is a tool turn.
        let paused = TOOL_TURN.replace(
            "\"stop_reason\":\"tool_use\"",
            "\"stop_reason\":\"pause_turn\"",
        );
        assert_eq!(outcome(&paused).finish, Finish::ToolUse);
    }

    #[test]
    fn max_tokens_inside_a_tool_call_drops_that_call() {
        let cut = TOOL_TURN
            .replace(
                "\"stop_reason\":\"tool_use\"",
                "\"stop_reason\":\"max_tokens\"",
            )
            .replace("main.rs\\\"}", "mai");
        let outcome = outcome(&cut);
        assert_eq!(outcome.finish, Finish::MaxTokens);
        assert!(outcome.tool_calls.is_empty());
    }

    #[test]
    fn redacted_thinking_is_kept_and_cache_counts_as_input() {
        let sse = r##"data: {"type":"message_start","message":{"usage":{"input_tokens":10,"cache_creation_input_tokens":20,"cache_read_input_tokens":30,"output_tokens":1}}}

data: {"type":"content_block_start","index":0,"content_block":{"type":"redacted_thinking","data":"EmwKAhgB"}}

data: {"type":"content_block_stop","index":0}

data: {"type":"content_block_start","index":1,"content_block":{"type":"thinking","thinking":"","signature":""}}

data: {"type":"content_block_delta","index":1,"delta":{"type":"thinking_delta","thinking":"Hm."}}

data: {"type":"content_block_delta","index":1,"delta":{"type":"signature_delta","signature":"c2ln"}}

data: {"type":"content_block_stop","index":1}

data: {"type":"content_block_start","index":2,"content_block":{"type":"tool_use","id":"toolu_2","name":"list_directory","input":{}}}

data: {"type":"content_block_stop","index":2}

data: {"type":"message_delta","delta":{"stop_reason":"tool_use"},"usage":{"output_tokens":7}}

data: {"type":"message_stop"}

"##;
        let outcome = outcome(sse);
        assert_eq!(
            outcome.usage,
            Some(Usage {
                input_tokens: 60,
                output_tokens: 7,
                cached_tokens: 30,
                reasoning_tokens: 0,
                cache_write_tokens: 20,
                unreported: crate::provider::Unreported::of(true, true, false),
            })
        );
        assert_eq!(outcome.tool_calls[0].arguments, "{}");
        assert_eq!(
            outcome.provider_data["anthropic"]["thinking"],
            json!([
                { "type": "redacted_thinking", "data": "EmwKAhgB" },
                { "type": "thinking", "thinking": "Hm.", "signature": "c2ln" },
            ])
        );
    }

    #[test]
    fn unknown_events_and_deltas_are_ignored() {
        let sse = ending("end_turn").replace(
            "data: {\"type\":\"content_block_stop\"",
            "event: brand_new\ndata: {\"type\":\"brand_new\",\"index\":\"x\"}\n\n\
             data: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"citations_delta\",\"citation\":{}}}\n\n\
             data: {\"type\":\"ping\"}\n\n\
             data: {\"type\":\"content_block_stop\"",
        );
        let (sink, result) = run(&sse);
        assert_eq!(result.unwrap().unwrap().finish, Finish::EndTurn);
        assert_eq!(sink.text, "Hi");
    }

    #[test]
    fn error_events_and_bad_json_fail_the_stream() {
        let overloaded = "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\n\n";
        let error = run(overloaded).1.unwrap_err();
        assert_eq!(error.code, "provider_stream_error");
        assert!(error.retryable);
        assert!(error.message.contains("Overloaded"), "{}", error.message);
        let invalid = overloaded.replace("overloaded_error", "invalid_request_error");
        assert!(!run(&invalid).1.unwrap_err().retryable);
        let bad = run("data: {\"type\":\n\n").1.unwrap_err();
        assert_eq!(bad.code, "provider_bad_response");
        // Without `message_stop` nothing is finished.
        let truncated = ending("end_turn").replace("data: {\"type\":\"message_stop\"}\n\n", "");
        assert_eq!(run(&truncated).1, Ok(None));
    }

    #[test]
    fn a_gateway_cost_in_the_usage_is_the_calls() {
        let plain = outcome(&ending("end_turn"));
        assert_eq!(plain.cost, None, "no report, no cost");
        let priced = ending("end_turn").replace(
            "\"usage\":{\"output_tokens\":3}",
            "\"usage\":{\"output_tokens\":3,\"cost\":0.0125}",
        );
        assert_eq!(outcome(&priced).cost, Some(0.0125));
    }

    #[test]
    fn absurd_usage_counts_are_no_counts() {
        for counts in [
            "\"output_tokens\":-1,\"input_tokens\":1.5",
            "\"output_tokens\":1e300,\"cache_read_input_tokens\":18446744073709551615",
            "\"output_tokens\":18446744073709551616,\"input_tokens\":18446744073709551615",
        ] {
            let absurd = ending("end_turn").replace("\"output_tokens\":3", counts);
            // A broken count leaves the last believable one (the start's
            // 5 input tokens) in place.
            let usage = outcome(&absurd).usage.unwrap();
            assert_eq!(
                (usage.input_tokens, usage.output_tokens, usage.cached_tokens),
                (5, 0, 0),
                "{counts}"
            );
        }
        // Believable counts that sum past u64 cannot: each is capped.
        let mut counts = Counts::default();
        counts.update(&serde_json::json!({"input_tokens": 1_000_000_000u64,
            "cache_read_input_tokens": 1_000_000_000u64, "output_tokens": 5}));
        assert_eq!(counts.usage().unwrap().input_tokens, 2_000_000_000);
    }
}

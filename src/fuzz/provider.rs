//! Targets of the provider layer: the SSE parser, the stream state
//! machines of each wire format, and the trace context.

use super::rng::Rng;
use super::rpc::JSON_TOKENS;
use crate::provider::sse::{Line, SseParser, EVENT_CAP};
use crate::provider::Sink;

const SSE_TOKENS: &[&str] = &[
    "data:",
    "data: ",
    "event: ",
    ": ping",
    "id: 3",
    "retry: 10",
    "\r",
    "{\"a\":1}",
    "x",
    "\u{feff}",
    "[DONE]",
    ":",
];

pub(super) fn sse_parser(rng: &mut Rng) -> Result<(), String> {
    let mut parser = SseParser::new();
    for _ in 0..rng.below(30) {
        let line = if rng.below(4) == 0 {
            String::new()
        } else {
            rng.text(SSE_TOKENS, 6)
        };
        match parser.line(line.as_bytes()) {
            Line::Event(event) if event.data.len() > EVENT_CAP => {
                return Err(format!("an event of {} bytes", event.data.len()))
            }
            _ => {}
        }
    }
    Ok(())
}

/// A sink that only counts (and checks the text is whole characters).
#[derive(Default)]
struct Count(usize);

impl Sink for Count {
    fn text(&mut self, delta: &str) {
        self.0 += delta.len();
    }
    fn thought(&mut self, delta: &str) {
        self.0 += delta.len();
    }
}

/// A JSON object made of random fields from `keys` with random values.
fn json_event(rng: &mut Rng, types: &[&str], keys: &[&str]) -> String {
    let mut object = serde_json::Map::new();
    object.insert("type".into(), rng.pick(types).into());
    for _ in 0..rng.below(5) {
        let value: serde_json::Value = match rng.below(6) {
            0 => serde_json::json!(rng.below(4)),
            1 => serde_json::json!(rng.text(&["a", "{", "\"", "é", " "], 4)),
            2 => serde_json::json!({"type": rng.pick(types), "text": "t", "id": "i", "name": "n",
                                    "index": rng.below(3), "partial_json": "{\"", "thinking": "x",
                                    "arguments": "{}", "item_id": "i", "call_id": "c"}),
            3 => serde_json::json!(null),
            4 => serde_json::json!([1, {"type": "x"}]),
            _ => serde_json::json!({"input_tokens": rng.below(9), "output_tokens": -1}),
        };
        object.insert(rng.pick(keys).into(), value);
    }
    serde_json::Value::Object(object).to_string()
}

pub(super) fn anthropic_stream(rng: &mut Rng) -> Result<(), String> {
    const TYPES: &[&str] = &[
        "message_start",
        "content_block_start",
        "content_block_delta",
        "content_block_stop",
        "message_delta",
        "message_stop",
        "ping",
        "error",
        "text_delta",
        "thinking_delta",
        "input_json_delta",
        "signature_delta",
        "tool_use",
        "thinking",
        "text",
    ];
    const KEYS: &[&str] = &[
        "index",
        "delta",
        "content_block",
        "message",
        "usage",
        "error",
    ];
    let mut state = crate::provider::anthropic::stream::StreamState::default();
    feed(rng, TYPES, KEYS, |event, sink| {
        matches!(state.handle(event, sink), Ok(None))
    });
    Ok(())
}

/// Feeds up to 20 random events to a stream state machine (`handle` says
/// whether the stream goes on).
fn feed(
    rng: &mut Rng,
    types: &[&str],
    keys: &[&str],
    mut handle: impl FnMut(&crate::provider::sse::SseEvent, &mut Count) -> bool,
) {
    let mut sink = Count::default();
    for _ in 0..rng.below(20) {
        let event = crate::provider::sse::SseEvent {
            event: None,
            data: json_event(rng, types, keys),
        };
        if !handle(&event, &mut sink) {
            break;
        }
    }
}

pub(super) fn responses_stream(rng: &mut Rng) -> Result<(), String> {
    const TYPES: &[&str] = &[
        "response.created",
        "response.output_item.added",
        "response.output_item.done",
        "response.output_text.delta",
        "response.reasoning_summary_text.delta",
        "response.function_call_arguments.delta",
        "response.function_call_arguments.done",
        "response.completed",
        "response.incomplete",
        "response.failed",
        "function_call",
        "reasoning",
        "message",
        "error",
    ];
    const KEYS: &[&str] = &[
        "item",
        "delta",
        "item_id",
        "output_index",
        "response",
        "arguments",
    ];
    let mut state = crate::provider::responses::stream::StreamState::default();
    feed(rng, TYPES, KEYS, |event, sink| {
        matches!(state.handle(event, sink), Ok(None))
    });
    Ok(())
}

pub(super) fn chat_chunks(rng: &mut Rng) -> Result<(), String> {
    let mut calls = crate::provider::openai::ToolCalls::default();
    for _ in 0..rng.below(12) {
        let delta = serde_json::json!({
            "index": if rng.below(3) == 0 { serde_json::Value::Null } else { serde_json::json!(rng.below(3)) },
            "id": if rng.below(2) == 0 { serde_json::Value::Null } else { serde_json::json!(format!("c{}", rng.below(3))) },
            "function": {"name": rng.pick(&["read_file", "", "x"]), "arguments": rng.text(&["{", "\"", "a", "}"], 3)},
        });
        let chunk = serde_json::json!({"choices": [{"delta": {"content": "t", "tool_calls": [delta]},
                                                     "finish_reason": rng.pick(&["stop", "tool_calls", "length"])}]});
        let text = if rng.below(8) == 0 {
            rng.text(JSON_TOKENS, 10)
        } else {
            chunk.to_string()
        };
        crate::provider::openai::fold_chunk(&text, &mut calls);
    }
    let _ = calls.finish();
    Ok(())
}

pub(super) fn trace_context(rng: &mut Rng) -> Result<(), String> {
    const PARTS: &[&str] = &[
        "00",
        "-",
        "4bf92f3577b34da6",
        "a3ce929d0e0e4736",
        "00f067aa0ba902b7",
        "01",
        "0",
        "f",
        "A",
        "\r\n",
        "\n",
        " ",
        ",",
        "=",
        "rojo",
        "@",
        "é",
        "ff",
    ];
    let traceparent = if rng.below(2) == 0 {
        format!(
            "00-{}{}-{}-{}",
            rng.pick(&["4bf92f3577b34da6", "0000000000000000", "4BF92F3577B34DA6"]),
            rng.pick(&["a3ce929d0e0e4736", "0000000000000000", "a3ce929d0e0e473"]),
            rng.pick(&["00f067aa0ba902b7", "0000000000000000"]),
            rng.pick(&["01", "00", "1", "01\r\nx: y"])
        )
    } else {
        rng.text(PARTS, 12)
    };
    let tracestate = rng.text(
        &["rojo", "=", "1", ",", " ", "\r\n", "@", "A", "é", "t"],
        10,
    );
    let Ok(trace) = crate::provider::trace::TraceContext::parse(&traceparent, Some(&tracestate))
    else {
        return Ok(());
    };
    for (name, value) in trace.headers() {
        if !value
            .bytes()
            .all(|b| (0x20..=0x7e).contains(&b) || b == b'\t')
        {
            return Err(format!("{name} {value:?} holds bytes a header cannot"));
        }
    }
    if trace.traceparent().len() != 55 || trace.trace_id().bytes().all(|b| b == b'0') {
        return Err(format!("{traceparent:?} was accepted"));
    }
    Ok(())
}

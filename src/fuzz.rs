//! Fuzz targets on the stable toolchain: each parser or state machine that
//! reads outside input gets random input built from the tokens it cares
//! about, and must neither panic nor break its stated property.
//! `cargo test` runs a bounded number of cases of each (see the test at the
//! end); `scripts/fuzz` runs them for longer and prints cases per second.
//! A failure names the target, the seed and the input, so it can be
//! replayed.

use crate::provider::sse::{Line, SseParser, EVENT_CAP};
use crate::provider::Sink;
use std::panic::{catch_unwind, AssertUnwindSafe};

/// A small, fast pseudo-random generator (xorshift), so a case can be
/// replayed from its seed.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed.max(1))
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n.max(1) as u64) as usize
    }

    fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[self.below(items.len())]
    }

    /// A string of `max` pieces drawn from `tokens`, with random bytes
    /// (as lossy text) now and then.
    fn text(&mut self, tokens: &[&str], max: usize) -> String {
        let mut out = String::new();
        for _ in 0..self.below(max + 1) {
            if self.below(10) == 0 {
                out.push(char::from_u32(self.below(0x3000) as u32).unwrap_or('?'));
            } else {
                out.push_str(self.pick(tokens));
            }
        }
        out
    }
}

/// One fuzz target: builds an input from the generator and checks it.
pub struct Target {
    pub name: &'static str,
    /// `Err` names the broken property; a panic is caught by `run`.
    pub case: fn(&mut Rng) -> Result<(), String>,
}

/// Every target.
pub const TARGETS: &[Target] = &[
    Target {
        name: "json-rpc classifier",
        case: rpc_classifier,
    },
    Target {
        name: "stdin line reader",
        case: line_reader,
    },
    Target {
        name: "sse parser",
        case: sse_parser,
    },
    Target {
        name: "chat completions chunks",
        case: chat_chunks,
    },
    Target {
        name: "anthropic stream",
        case: anthropic_stream,
    },
    Target {
        name: "responses stream",
        case: responses_stream,
    },
    Target {
        name: "glob matcher",
        case: glob_matcher,
    },
    Target {
        name: "ignore rules",
        case: ignore_rules,
    },
    Target {
        name: "edit applier",
        case: edit_applier,
    },
    Target {
        name: "command classifier",
        case: command_classifier,
    },
    Target {
        name: "inflate",
        case: inflate,
    },
    Target {
        name: "mcp elicitation",
        case: mcp_elicitation,
    },
    Target {
        name: "trace context",
        case: trace_context,
    },
];

/// A failed case.
#[derive(Debug)]
pub struct Failure {
    pub target: &'static str,
    pub seed: u64,
    pub problem: String,
}

/// Runs `cases` cases of `target` from `seed` (each case has its own seed,
/// `seed + i`, so a failure replays alone).
pub fn run(target: &Target, seed: u64, cases: u64) -> Result<(), Failure> {
    for index in 0..cases {
        let case_seed = seed.wrapping_add(index);
        let mut rng = Rng::new(case_seed);
        let outcome = catch_unwind(AssertUnwindSafe(|| (target.case)(&mut rng)));
        let problem = match outcome {
            Ok(Ok(())) => continue,
            Ok(Err(problem)) => problem,
            Err(panic) => format!(
                "panicked: {}",
                panic
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                    .unwrap_or_default()
            ),
        };
        return Err(Failure {
            target: target.name,
            seed: case_seed,
            problem,
        });
    }
    Ok(())
}

const JSON_TOKENS: &[&str] = &[
    "{",
    "}",
    "[",
    "]",
    ",",
    ":",
    "\"",
    "\"jsonrpc\"",
    "\"2.0\"",
    "\"id\"",
    "\"method\"",
    "\"params\"",
    "\"result\"",
    "\"error\"",
    "1",
    "-7",
    "1e400",
    "null",
    "true",
    "\"a\"",
    "\\u",
    "\\ud83d",
    "\\ude00",
    "\\\\",
    "\\\"",
    " ",
    "\u{fffd}",
    "\"session/prompt\"",
];

fn rpc_classifier(rng: &mut Rng) -> Result<(), String> {
    let line = rng.text(JSON_TOKENS, 40);
    let classified = crate::rpc::classify(line.as_bytes());
    if serde_json::from_str::<serde_json::Value>(&line).is_err()
        && !line.contains("\\u")
        && !matches!(classified, crate::rpc::Incoming::Invalid { .. })
    {
        return Err(format!("not JSON, yet accepted: {line:?}"));
    }
    Ok(())
}

fn line_reader(rng: &mut Rng) -> Result<(), String> {
    let mut input = Vec::new();
    let mut lines = 0;
    for _ in 0..rng.below(8) {
        let line = rng.text(JSON_TOKENS, 12);
        input.extend_from_slice(line.as_bytes());
        if rng.below(4) == 0 {
            input.push(0xff);
        }
        if rng.below(3) != 0 {
            input.extend_from_slice(if rng.below(2) == 0 { b"\n" } else { b"\r\n" });
            lines += 1;
        }
    }
    // Random characters may hold line breaks of their own.
    let lines = lines.max(input.iter().filter(|&&b| b == b'\n').count());
    let (sender, receiver) = crossbeam_channel::unbounded::<crate::rpc::stdio::Input>();
    let handle = crate::rpc::stdio::spawn_reader(std::io::Cursor::new(input), sender)
        .map_err(|e| e.to_string())?;
    let _ = handle.join();
    let received: Vec<_> = receiver.try_iter().collect();
    let ends = received
        .iter()
        .filter(|i| matches!(i, crate::rpc::stdio::Input::Eof))
        .count();
    if ends != 1 || !matches!(received.last(), Some(crate::rpc::stdio::Input::Eof)) {
        return Err(format!("{ends} ends of input, not one at the end"));
    }
    if received.len() > lines + 2 {
        return Err(format!("{} messages from {lines} lines", received.len()));
    }
    Ok(())
}

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

fn sse_parser(rng: &mut Rng) -> Result<(), String> {
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

fn anthropic_stream(rng: &mut Rng) -> Result<(), String> {
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

fn responses_stream(rng: &mut Rng) -> Result<(), String> {
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

fn chat_chunks(rng: &mut Rng) -> Result<(), String> {
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

const GLOB_TOKENS: &[&str] = &[
    "*", "**", "?", "[", "]", "!", "^", "-", "/", "\\", "a", "b", ".", "{", "}", ",", "é",
];

fn ignore_rules(rng: &mut Rng) -> Result<(), String> {
    let mut text = String::new();
    for _ in 0..rng.below(6) {
        text.push_str(&rng.text(
            &[
                "!", "/", "*", "**", "a", "b", "#", "\\", " ", "?", "[a]", ".",
            ],
            5,
        ));
        text.push('\n');
    }
    let path = rng.text(&["a", "b", "/", ".", "c"], 8);
    let _ = crate::tools::ignore::ignored_by(&text, &path, rng.below(2) == 0);
    // A rule naming a file ignores it, and its negation after it does not.
    // Only letters: the generator mixes in random characters, and a `/`,
    // `*`, `!` or `#` makes the rule mean something else (`baa/` is a
    // folder rule, which a file of that name rightly does not meet).
    let name: String = rng
        .text(&["a", "b", "c"], 4)
        .chars()
        .filter(|c| c.is_alphanumeric())
        .collect();
    if !name.is_empty() {
        if !crate::tools::ignore::ignored_by(&name, &name, false) {
            return Err(format!("{name:?} does not ignore itself"));
        }
        if crate::tools::ignore::ignored_by(&format!("{name}\n!{name}"), &name, false) {
            return Err(format!("!{name} does not un-ignore it"));
        }
    }
    Ok(())
}

/// A random JSON value built from the words an elicitation uses.
fn elicitation_value(rng: &mut Rng, depth: usize) -> serde_json::Value {
    use serde_json::{json, Value};
    const WORDS: &[&str] = &[
        "type",
        "object",
        "string",
        "integer",
        "number",
        "boolean",
        "array",
        "properties",
        "items",
        "enum",
        "enumNames",
        "oneOf",
        "anyOf",
        "const",
        "title",
        "default",
        "required",
        "format",
        "email",
        "minimum",
        "maxLength",
        "mode",
        "form",
        "url",
        "message",
        "requestedSchema",
        "elicitationId",
        "https://",
        "http://",
        "javascript:",
        "file:",
        "@",
        "/",
        "\\",
        "\u{1b}",
        "\n",
        " ",
        "é",
        "[",
        "]",
        ":",
    ];
    let choice = if depth == 0 {
        rng.below(5)
    } else {
        rng.below(8)
    };
    match choice {
        0 => json!(rng.text(WORDS, 6)),
        1 => json!(rng.below(100) as i64 - 50),
        2 => json!(rng.below(2) == 0),
        3 => Value::Null,
        4 => json!(1.5),
        5 => Value::Array(
            (0..rng.below(4))
                .map(|_| elicitation_value(rng, depth - 1))
                .collect(),
        ),
        _ => {
            let mut object = serde_json::Map::new();
            for _ in 0..rng.below(6) {
                object.insert(
                    rng.pick(WORDS).to_string(),
                    elicitation_value(rng, depth - 1),
                );
            }
            Value::Object(object)
        }
    }
}

fn mcp_elicitation(rng: &mut Rng) -> Result<(), String> {
    use crate::mcp::elicit::{self, Elicitation, ElicitationSupport};
    let support = ElicitationSupport {
        form: rng.below(2) == 0,
        url: rng.below(2) == 0,
        on_complete: None,
    };
    let mut params = elicitation_value(rng, 4);
    if rng.below(2) == 0 {
        // Often a plausible request, with random parts.
        let url = format!(
            "{}{}",
            rng.pick(&[
                "https://",
                "http://",
                "javascript:",
                "HTTPS://",
                "file://",
                ""
            ]),
            rng.text(&["a", ".", "@", "/", ":", "[", "]", "\\", " ", "é", "?"], 8)
        );
        params = serde_json::json!({
            "mode": rng.pick(&["form", "url", "other"]),
            "message": rng.text(&["a", "\n", "\u{1b}", "é"], 8),
            "url": url,
            "elicitationId": "e",
            "requestedSchema": {"type": "object", "properties": {
                "f": elicitation_value(rng, 3), "g": elicitation_value(rng, 2)}},
        });
    }
    let Ok(parsed) = elicit::parse(&params, &support) else {
        return Ok(());
    };
    let shown_ok = |text: &str| {
        !text
            .chars()
            .any(|c| c.is_control() && c != '\n' && c != '\t')
    };
    match parsed.elicitation {
        Elicitation::Url { message, url, .. } => {
            let lower = url.to_ascii_lowercase();
            if !support.url || !(lower.starts_with("https://") || lower.starts_with("http://")) {
                return Err(format!("{params} gave the URL {url:?}"));
            }
            if !shown_ok(&message) {
                return Err(format!("{params} kept control characters"));
            }
        }
        Elicitation::Form { message, schema } => {
            if !support.form || !shown_ok(&message) {
                return Err(format!("{params} gave the form {message:?}"));
            }
            let fields = schema["properties"]
                .as_object()
                .cloned()
                .unwrap_or_default();
            for field in fields.values() {
                let kind = field["type"].as_str().unwrap_or("");
                if !["string", "number", "integer", "boolean", "array"].contains(&kind) {
                    return Err(format!("{params} kept a field of type {kind:?}"));
                }
            }
        }
    }
    Ok(())
}

fn trace_context(rng: &mut Rng) -> Result<(), String> {
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

fn glob_matcher(rng: &mut Rng) -> Result<(), String> {
    let pattern = rng.text(GLOB_TOKENS, 8);
    let path = rng.text(&["a", "b", "/", ".", "é", "-", "c"], 10);
    let _ = crate::tools::ignore::glob_match(&pattern, &path);
    let _ = crate::tools::ignore::Glob::new(&pattern);
    // A pattern without special characters matches exactly itself.
    let literal: String = rng
        .text(&["a", "b", "c", "é"], 6)
        .chars()
        .filter(|c| c.is_alphanumeric())
        .collect();
    if !literal.is_empty() && !crate::tools::ignore::glob_match(&literal, &literal) {
        return Err(format!("{literal:?} does not match itself"));
    }
    Ok(())
}

fn edit_applier(rng: &mut Rng) -> Result<(), String> {
    let text = rng.text(&["a", "b", "\n", "é", " ", "ab"], 20);
    let old = if rng.below(2) == 0 && !text.is_empty() {
        let start = rng.below(text.len());
        let end = (start + 1 + rng.below(4)).min(text.len());
        match text.get(start..end) {
            Some(slice) => slice.to_string(),
            None => "a".into(),
        }
    } else {
        rng.text(&["a", "b", "é"], 3)
    };
    let new = rng.text(&["x", "y", "\n"], 3);
    let edit = crate::tools::files::Edit {
        old: old.clone(),
        new: new.clone(),
        replace_all: rng.below(2) == 0,
    };
    if let Ok((result, _)) = crate::tools::files::apply_edits(&text, std::slice::from_ref(&edit)) {
        let expected = if edit.replace_all {
            text.replace(&old, &new)
        } else {
            text.replacen(&old, &new, 1)
        };
        if result != expected {
            return Err(format!("{text:?} with {old:?} -> {new:?} gave {result:?}"));
        }
    }
    Ok(())
}

fn command_classifier(rng: &mut Rng) -> Result<(), String> {
    const TOKENS: &[&str] = &[
        "ls", "cat", "git", "log", "sort", "-o", "rg", "--pre", " ", "'", "\"", "\\", "$", "`",
        "(", ")", "{", "}", ";", "&", "|", ">", "<", "<<", "*", "?", "[", "~", "#", "\n", "=",
        "cd", "..", "/", "a", "-",
    ];
    let line = rng.text(TOKENS, 16);
    let root = std::env::temp_dir();
    let verdict = crate::policy::classify(
        &line,
        &crate::policy::Context {
            root: &root,
            cwd: &root,
            path_var: None,
        },
    );
    // Whatever writes with `>` (outside quotes it would be an operator) or
    // expands must ask; a line with neither quotes nor escapes is simple to
    // check.
    let plain = !line.contains(['\'', '"', '\\', '#']);
    if plain && verdict.is_read_only() && (line.contains('$') || line.contains('`')) {
        return Err(format!("judged read-only with an expansion: {line:?}"));
    }
    Ok(())
}

/// Deflate streams made by a small encoder (stored blocks and fixed
/// Huffman blocks with back references) decode to what was encoded, under
/// any cap; the same streams with bytes changed, cut or appended never
/// panic and never give more than the cap. The gzip and zlib wrappers too.
fn inflate(rng: &mut Rng) -> Result<(), String> {
    use crate::tools::inflate::{adler32, crc32, gunzip, zlib_or_raw, Stop};
    let data = rng.text(&["a", "ab", "abc", "\n", "x", "\u{e9}", "aaaaaaaa"], 60);
    let data = data.as_bytes();
    let stream = deflate_for_tests(rng, data);
    let cap = if rng.below(3) == 0 {
        rng.below(data.len() + 1)
    } else {
        usize::MAX
    };
    let decoded = crate::tools::inflate::inflate(&stream, cap)
        .map_err(|e| format!("{data:?} encoded as {stream:?}: {e}"))?;
    let expected = &data[..data.len().min(cap)];
    let stop_ok = match decoded.stop {
        Stop::End => data.len() <= cap,
        Stop::Cap => data.len() > cap,
        Stop::Truncated => false,
    };
    if decoded.bytes != expected || !stop_ok {
        return Err(format!(
            "{data:?} (cap {cap}) encoded as {stream:?} decoded as {:?}, {:?}",
            decoded.bytes, decoded.stop
        ));
    }
    let mut gzip = vec![0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 3];
    gzip.extend_from_slice(&stream);
    gzip.extend_from_slice(&crc32(data).to_le_bytes());
    gzip.extend_from_slice(&(data.len() as u32).to_le_bytes());
    let mut zlib = vec![0x78, 0x9c];
    zlib.extend_from_slice(&stream);
    zlib.extend_from_slice(&adler32(data).to_be_bytes());
    for (name, wrapped) in [
        ("gzip", gunzip(&gzip, usize::MAX)),
        ("zlib", zlib_or_raw(&zlib, usize::MAX)),
    ] {
        match wrapped {
            Ok(inflated) if inflated.bytes == data && inflated.stop == Stop::End => {}
            other => return Err(format!("{data:?} in {name} gave {other:?}")),
        }
    }
    // Broken copies: whatever they decode to stays within the cap.
    let mut broken = if rng.below(2) == 0 { gzip } else { stream };
    for _ in 0..1 + rng.below(4) {
        match rng.below(4) {
            0 if !broken.is_empty() => {
                let at = rng.below(broken.len());
                broken[at] ^= 1 << rng.below(8);
            }
            1 => broken.truncate(rng.below(broken.len() + 1)),
            2 => broken.push(rng.below(256) as u8),
            _ if !broken.is_empty() => {
                let at = rng.below(broken.len());
                broken[at] = rng.below(256) as u8;
            }
            _ => {}
        }
    }
    let cap = 1 + rng.below(200);
    for inflated in [
        crate::tools::inflate::inflate(&broken, cap),
        gunzip(&broken, cap),
        zlib_or_raw(&broken, cap),
    ]
    .into_iter()
    .flatten()
    {
        if inflated.bytes.len() > cap {
            return Err(format!(
                "{broken:?} gave {} bytes over the cap {cap}",
                inflated.bytes.len()
            ));
        }
    }
    Ok(())
}

/// A raw deflate stream of `data` (RFC 1951): a run of blocks, each stored
/// or of the fixed Huffman code with greedy back references (found in the
/// last 300 bytes), so the decoder meets every length and distance path.
pub fn deflate_for_tests(rng: &mut Rng, data: &[u8]) -> Vec<u8> {
    use crate::tools::inflate::{DISTANCE_BASE, DISTANCE_EXTRA, LENGTH_BASE, LENGTH_EXTRA};
    struct Writer {
        out: Vec<u8>,
        bits: u32,
        count: u32,
    }
    impl Writer {
        /// `value`'s `n` low bits, least significant first.
        fn put(&mut self, value: u32, n: u32) {
            for i in 0..n {
                self.bits |= ((value >> i) & 1) << self.count;
                self.count += 1;
                if self.count == 8 {
                    self.out.push(self.bits as u8);
                    self.bits = 0;
                    self.count = 0;
                }
            }
        }
        /// A Huffman code of `n` bits, most significant first.
        fn code(&mut self, code: u32, n: u32) {
            for i in (0..n).rev() {
                self.put((code >> i) & 1, 1);
            }
        }
        fn align(&mut self) {
            if self.count > 0 {
                self.put(0, 8 - self.count);
            }
        }
        fn symbol(&mut self, symbol: u32) {
            match symbol {
                0..=143 => self.code(0x30 + symbol, 8),
                144..=255 => self.code(0x190 + symbol - 144, 9),
                256..=279 => self.code(symbol - 256, 7),
                _ => self.code(0xc0 + symbol - 280, 8),
            }
        }
    }
    let mut writer = Writer {
        out: Vec::new(),
        bits: 0,
        count: 0,
    };
    let mut at = 0;
    loop {
        let end = (at + 1 + rng.below(data.len() + 1)).min(data.len());
        let last = end == data.len();
        writer.put(u32::from(last), 1);
        if rng.below(4) == 0 {
            writer.put(0, 2);
            writer.align();
            let length = (end - at) as u16;
            writer.out.extend_from_slice(&length.to_le_bytes());
            writer.out.extend_from_slice(&(!length).to_le_bytes());
            writer.out.extend_from_slice(&data[at..end]);
        } else {
            writer.put(1, 2);
            let mut i = at;
            while i < end {
                let mut best = (0, 0);
                for distance in 1..=i.min(300) {
                    let mut length = 0;
                    while length < 258
                        && i + length < end
                        && data[i + length - distance] == data[i + length]
                    {
                        length += 1;
                    }
                    if length > best.0 {
                        best = (length, distance);
                    }
                }
                if best.0 >= 3 {
                    let (length, distance) = best;
                    let index = LENGTH_BASE
                        .iter()
                        .rposition(|b| usize::from(*b) <= length)
                        .unwrap_or(0);
                    writer.symbol(257 + index as u32);
                    writer.put(
                        (length - usize::from(LENGTH_BASE[index])) as u32,
                        u32::from(LENGTH_EXTRA[index]),
                    );
                    let code = DISTANCE_BASE
                        .iter()
                        .rposition(|b| usize::from(*b) <= distance)
                        .unwrap_or(0);
                    writer.code(code as u32, 5);
                    writer.put(
                        (distance - usize::from(DISTANCE_BASE[code])) as u32,
                        u32::from(DISTANCE_EXTRA[code]),
                    );
                    i += length;
                } else {
                    writer.symbol(u32::from(data[i]));
                    i += 1;
                }
            }
            writer.symbol(256);
        }
        at = end;
        if last {
            writer.align();
            return writer.out;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A bounded pass of every target (scripts/fuzz runs them longer).
    #[test]
    fn every_fuzz_target_holds_for_a_bounded_number_of_cases() {
        for target in TARGETS {
            let cases = if target.name == "stdin line reader" {
                300
            } else {
                3000
            };
            if let Err(failure) = run(target, 0x5eed, cases) {
                panic!("{failure:?}");
            }
        }
    }
}

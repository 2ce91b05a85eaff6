//! The conversation's size and how it is made smaller: the estimate of
//! the next request, large tool results spilled to a file (head and tail
//! for the model), old tool results elided to one-line stubs, and where
//! compaction may cut the conversation.
//!
//! Sizes are estimated without a tokenizer: three bytes of JSON text per
//! token, calibrated by what the provider reported for the last request
//! (and, before compacting, by a local server's own count when it has
//! one).

pub(super) use super::report::Known;
use crate::provider::{Message, Role, ToolCallRequest, ToolSpec};
use std::path::{Path, PathBuf};

/// Bytes of text per token, on the safe side: code and dense text run
/// about three, English about four, CJK about three (one a character);
/// an estimate too small sends a request the server refuses or cuts.
const BYTES_PER_TOKEN: u64 = 3;

/// What one image costs, roughly (a 1,000 px picture is about 1,500
/// tokens at the common providers).
const IMAGE_BYTES: usize = 6_000;

pub(super) fn tokens_of(bytes: u64) -> u64 {
    bytes.div_ceil(BYTES_PER_TOKEN)
}

/// The bytes one message adds to a request, as estimated.
pub(super) fn message_bytes(message: &Message) -> usize {
    let calls: usize = message
        .tool_calls
        .iter()
        .map(|call| call.id.len() + call.name.len() + call.arguments.len() + 32)
        .sum();
    let opaque = if message.provider_data.is_null() {
        0
    } else {
        message.provider_data.to_string().len()
    };
    16 + message.text.len()
        + message.thought.len()
        + calls
        + opaque
        + message.images.len() * IMAGE_BYTES
}

/// The bytes every request of the turn carries besides the conversation.
pub(super) fn fixed_bytes(system: &str, tools: &[ToolSpec]) -> usize {
    system.len()
        + tools
            .iter()
            .map(|tool| {
                tool.name.len() + tool.description.len() + tool.parameters.to_string().len() + 32
            })
            .sum::<usize>()
}

/// The estimate bytes of a whole request.
pub(super) fn request_bytes(fixed: usize, messages: &[Message]) -> u64 {
    (fixed + messages.iter().map(message_bytes).sum::<usize>()) as u64
}

/// The estimated tokens of a request of `bytes`: what the provider
/// reported last time plus an estimate of what changed since (which may
/// be negative, after elision), or an estimate of everything.
/// The bytes per token of what was added are the last count's own when
/// it shows denser text than three (a conversation of digits runs nearer
/// one), never fewer than one.
pub(super) fn estimate(known: Option<Known>, bytes: u64) -> u64 {
    match known {
        Some(known) => {
            // What was taken off (elided) counts at the safe rate: the
            // estimate errs high.
            let per = match known.tokens {
                _ if bytes < known.bytes => BYTES_PER_TOKEN,
                0 => BYTES_PER_TOKEN,
                tokens => known.bytes.div_ceil(tokens).clamp(1, BYTES_PER_TOKEN),
            };
            changed(known, bytes, per)
        }
        None => tokens_of(bytes),
    }
}

/// The most tokens a request of `bytes` could be: what changed since the
/// last count at a token a byte (dense digits, some scripts), or all of
/// it so when nothing was counted yet.
pub(super) fn worst_case(known: Option<Known>, bytes: u64) -> u64 {
    match known {
        Some(known) => changed(known, bytes, 1),
        None => bytes,
    }
}

fn changed(known: Known, bytes: u64, per: u64) -> u64 {
    let change = bytes as i64 - known.bytes as i64;
    let tokens =
        known.tokens as i64 + change.signum() * change.unsigned_abs().div_ceil(per.max(1)) as i64;
    tokens.max(0) as u64
}

/// Whether a reported token count can belong to a request of `bytes`:
/// text takes at least a token per twelve bytes, whatever the tokenizer.
pub(super) fn plausible(tokens: u64, bytes: u64) -> bool {
    tokens.saturating_mul(12) >= bytes
}

/// A person's way of writing a size: `812 B`, `41 KB`, `1.2 MB`.
pub(super) fn size_text(bytes: usize) -> String {
    match bytes {
        0..=999 => format!("{bytes} B"),
        1_000..=999_999 => format!("{} KB", bytes.div_ceil(1_000)),
        _ => format!("{:.1} MB", bytes as f64 / 1e6),
    }
}

/// A token count the way the notice shows it: `812`, `23k`, `151k`.
pub(super) fn tokens_text(tokens: u64) -> String {
    if tokens < 1_000 {
        tokens.to_string()
    } else {
        format!("{}k", (tokens + 500) / 1_000)
    }
}

/// The longest prefix of `text` of at most `max` bytes that ends on a
/// character boundary.
fn head_of(text: &str, max: usize) -> &str {
    let mut end = max.min(text.len());
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

/// The longest suffix of `text` of at most `max` bytes that starts on a
/// character boundary.
fn tail_of(text: &str, max: usize) -> &str {
    let mut start = text.len().saturating_sub(max);
    while !text.is_char_boundary(start) {
        start += 1;
    }
    &text[start..]
}

/// Where the whole of large tool results is kept: the session's private
/// folder (`logs/<session>/`), which `read_file` may read.
pub(super) struct Keeper<'a> {
    pub dir: Option<&'a Path>,
}

impl Keeper<'_> {
    /// Writes `text` to a new private file named after the call; `None`
    /// when there is no folder or the write fails (the model is told).
    pub(super) fn keep(&self, call_id: &str, text: &str) -> Option<PathBuf> {
        let dir = self.dir?;
        let name = format!(
            "{}-{}.txt",
            crate::process::logs::safe_name(call_id),
            crate::util::random_hex()
        );
        let path = dir.join(name);
        let written = crate::process::logs::create_file(&path).and_then(|mut file| {
            use std::io::Write;
            file.write_all(text.as_bytes())
        });
        match written {
            Ok(()) => Some(path),
            Err(err) => {
                log::warn!("cannot keep a tool output in {}: {err}", path.display());
                None
            }
        }
    }
}

/// A tool result as the model gets it: whole when it fits `cap`, else its
/// head and tail around a line that says how much was left out and where
/// the whole is. The whole is kept in a file first.
pub(super) fn spill(message: &mut Message, cap: usize, keeper: &Keeper<'_>) {
    let total = message.text.len();
    if total <= cap {
        return;
    }
    let call_id = message.tool_call_id.clone().unwrap_or_default();
    let kept = keeper.keep(&call_id, &message.text);
    let lines = message.text.lines().count();
    // The marker takes its own room out of the cap.
    let room = cap.saturating_sub(400);
    let head = head_of(&message.text, room * 2 / 3);
    let tail = tail_of(&message.text, room - head.len());
    let omitted = total - head.len() - tail.len();
    let marker = match &kept {
        Some(path) => format!(
            "\n… [{omitted} of {total} bytes left out here. The whole output ({lines} lines) is in {}: read it with read_file, using start_line and line_count for the part you need.] …\n",
            path.display()
        ),
        None => format!("\n… [{omitted} of {total} bytes left out here; the whole output could not be kept.] …\n"),
    };
    message.text = format!("{head}{marker}{tail}");
    message.full_output = kept;
}

/// What a tool call was, in a few words: its name and main argument.
pub(super) fn describe_call(call: &ToolCallRequest) -> String {
    let arguments: serde_json::Value = serde_json::from_str(&call.arguments).unwrap_or_default();
    let main = ["command", "path", "pattern", "query", "url", "name"]
        .iter()
        .find_map(|key| arguments[*key].as_str());
    match main {
        Some(value) => {
            let value: String = value.chars().take(80).collect();
            format!("{} `{}`", call.name, value.replace('`', "'"))
        }
        None => format!("`{}`", call.name),
    }
}

/// Results smaller than this are never elided: the stub would not save
/// much.
const ELIDE_MIN_BYTES: usize = 600;

/// Replaces the results of tool calls older than the last `keep_steps`
/// steps (assistant messages with tool calls) by one-line stubs that say
/// where the whole text is. Returns the bytes saved.
pub(super) fn elide_old_results(
    messages: &mut [Message],
    keep_steps: usize,
    keeper: &Keeper<'_>,
) -> usize {
    let steps: Vec<usize> = messages
        .iter()
        .enumerate()
        .filter(|(_, m)| m.role == Role::Assistant && !m.tool_calls.is_empty())
        .map(|(i, _)| i)
        .collect();
    let Some(&boundary) = steps
        .len()
        .checked_sub(keep_steps)
        .and_then(|n| steps.get(n))
    else {
        return 0;
    };
    let mut saved = 0;
    for index in 0..boundary {
        let message = &messages[index];
        if message.role != Role::Tool || message.text.len() < ELIDE_MIN_BYTES || is_stub(message) {
            continue;
        }
        let call_id = message.tool_call_id.clone().unwrap_or_default();
        let what = messages[..index]
            .iter()
            .rev()
            .flat_map(|m| m.tool_calls.iter())
            .find(|call| call.id == call_id)
            .map(describe_call)
            .unwrap_or_else(|| "a tool call".into());
        let size = messages[index].text.len();
        let path = match messages[index].full_output.clone() {
            Some(path) => Some(path),
            None => keeper.keep(&call_id, &messages[index].text),
        };
        let stub = match &path {
            Some(path) => format!(
                "{STUB_START}Output of {what} ({}) elided to save context; the full text is in {}. Read it with read_file if you need it again.]",
                size_text(size),
                path.display()
            ),
            None => format!(
                "{STUB_START}Output of {what} ({}) elided to save context.]",
                size_text(size)
            ),
        };
        let message = &mut messages[index];
        saved += message.text.len().saturating_sub(stub.len());
        message.text = stub;
        message.full_output = path;
    }
    saved
}

const STUB_START: &str = "[";

fn is_stub(message: &Message) -> bool {
    message.text.starts_with("[Output of ") && message.text.contains(" elided to save context")
}

/// Where compaction cuts: the index of the first message kept verbatim.
/// Cuts fall where a prompt of the user starts or, inside a long turn,
/// where a model step starts after its tool results; the verbatim part is
/// the longest that fits `keep_bytes`, and holds at least the last step.
/// `None` when there is nothing before the last step to summarise.
pub(super) fn cut_point(messages: &[Message], keep_bytes: usize) -> Option<usize> {
    let cuts: Vec<usize> = (1..messages.len())
        .filter(|&i| {
            let message = &messages[i];
            let previous = &messages[i - 1];
            match message.role {
                Role::User => previous.role != Role::User,
                Role::Assistant => previous.role == Role::Tool,
                Role::Tool => false,
            }
        })
        .collect();
    let last = *cuts.last()?;
    let mut tail = 0usize;
    let mut best = last;
    let mut next = messages.len();
    for &cut in cuts.iter().rev() {
        tail += messages[cut..next].iter().map(message_bytes).sum::<usize>();
        next = cut;
        if tail > keep_bytes {
            break;
        }
        best = cut;
    }
    Some(best)
}

/// The last user prompt at or before `index` (not a tool result).
pub(super) fn prompt_before(messages: &[Message], index: usize) -> Option<usize> {
    (0..index.min(messages.len()))
        .rev()
        .find(|&i| messages[i].role == Role::User)
}

/// The messages of the summary request: the part to summarise with large
/// tool results cut to their head and tail (the summary needs what they
/// showed, not every byte), then dropped from the front while the whole
/// is larger than `max_bytes` (the first prompt stays: it says what the
/// work is for).
pub(super) fn summary_input(older: &[Message], max_bytes: usize) -> Vec<Message> {
    let mut messages: Vec<Message> = older.to_vec();
    for message in messages.iter_mut().filter(|m| m.role == Role::Tool) {
        if message.text.len() > 4_096 {
            let head = head_of(&message.text, 2_048);
            let tail = tail_of(&message.text, 1_024);
            message.text = format!("{head}\n… [output shortened for the summary] …\n{tail}");
        }
    }
    let bytes = |m: &[Message]| m.iter().map(message_bytes).sum::<usize>();
    while bytes(&messages) > max_bytes && messages.len() > 2 {
        // Drop the oldest step after the first message, with the tool
        // results that answer it, so calls and results stay paired.
        let mut end = 2;
        while end < messages.len() && messages[end].role == Role::Tool {
            end += 1;
        }
        messages.drain(1..end);
    }
    messages
}

/// What the model is asked when it summarises.
pub(super) fn summary_instruction(focus: &str) -> String {
    let mut text = String::from(
        "The conversation above is about to be replaced by your summary of it, to make room in your context. Write that summary now, for yourself, to continue the work without the original messages. Use these headings:\n\
         1. Goal and requests: what the user wants, and every request they made (their words where the wording matters).\n\
         2. Decisions: what was decided and why.\n\
         3. Files: each file read or changed, with what matters about it (paths exact).\n\
         4. Commands: commands run and their outcomes (exact errors when they matter).\n\
         5. Todo state: what is done, in progress and left.\n\
         6. Open questions and the next step.\n\
         Be complete and concrete; plain text; no tool calls.",
    );
    if !focus.trim().is_empty() {
        text.push_str("\nGive particular attention to: ");
        text.push_str(focus.trim());
    }
    text
}

/// The message the summary becomes.
pub(super) fn summary_message(summary: &str, current_request: Option<&str>) -> Message {
    let mut text = format!(
        "(The earlier conversation was compacted to save context. Your summary of it:)\n\n{}",
        summary.trim()
    );
    if let Some(request) = current_request {
        text.push_str("\n\n(The user's current request, verbatim:)\n\n");
        text.push_str(request);
    }
    Message::user(text)
}

/// Whether a provider's refusal says the request was longer than the
/// model's window.
pub(super) fn is_too_long(status: Option<u16>, code: &str, message: &str) -> bool {
    if !matches!(status, Some(400 | 413 | 422) | None) {
        return false;
    }
    let text = format!("{code} {message}").to_ascii_lowercase();
    [
        "context_length_exceeded",
        "context length",
        "context window",
        "maximum context",
        "prompt is too long",
        "prompt too long",
        "too many tokens",
        "input is too long",
        "exceeds the context",
        // llama.cpp: `exceed_context_size_error`, "request (8445 tokens)
        // exceeds the available context size (8192 tokens)".
        "exceed_context_size",
        "available context size",
        // LM Studio: "… greater than the context length"; vLLM and Ollama
        // say "context length" too.
        "context overflow",
        "request too large",
        "reduce the length",
        "string_above_max_length",
    ]
    .iter()
    .any(|needle| text.contains(needle))
}

/// The window, in tokens, that a "too long" refusal names, where it
/// names one: llama.cpp's "available context size (8192 tokens)", the
/// OpenAI and vLLM "maximum context length is 4096 tokens", Anthropic's
/// "… tokens > 200000 maximum".
pub(super) fn window_named(message: &str) -> Option<u64> {
    let text = message.to_ascii_lowercase();
    let number_after = |marker: &str| -> Option<u64> {
        let at = text.find(marker)? + marker.len();
        let digits: String = text[at..]
            .trim_start_matches(['(', ' '])
            .chars()
            .take_while(|c| c.is_ascii_digit() || *c == ',')
            .filter(char::is_ascii_digit)
            .collect();
        digits.parse().ok().filter(|n| *n > 0)
    };
    number_after("available context size")
        .or_else(|| number_after("maximum context length is"))
        .or_else(|| number_after("context length of"))
        .or_else(|| {
            let before = text.find(" maximum")?;
            let start = text[..before].rfind("> ")? + 2;
            text[start..before].trim().parse().ok()
        })
}

#[cfg(test)]
mod tests {

    #[test]
    fn a_count_of_dense_text_calibrates_what_was_added_since() {
        // English-like: 4 bytes a token counted; what is added is still
        // estimated at 3 (the safe side).
        let english = Known {
            tokens: 1_000,
            bytes: 4_000,
        };
        assert_eq!(estimate(Some(english), 7_000), 2_000);
        // Digits: a token a byte counted; what is added is too.
        let digits = Known {
            tokens: 4_000,
            bytes: 4_000,
        };
        assert_eq!(estimate(Some(digits), 7_000), 7_000);
        // Smaller since (elided): taken off at the safe rate.
        assert_eq!(estimate(Some(digits), 1_000), 3_000);
        // The worst case counts a token a byte.
        assert_eq!(worst_case(Some(english), 7_000), 4_000);
        assert_eq!(worst_case(None, 9_000), 9_000);
        assert_eq!(
            estimate(
                Some(Known {
                    tokens: 0,
                    bytes: 0
                }),
                300
            ),
            100
        );
    }

    use super::*;
    use serde_json::json;

    fn call(id: &str, name: &str, arguments: serde_json::Value) -> ToolCallRequest {
        ToolCallRequest {
            id: id.into(),
            name: name.into(),
            arguments: arguments.to_string(),
        }
    }

    fn step(id: &str, output: &str) -> Vec<Message> {
        let mut assistant = Message::assistant("", "");
        assistant.tool_calls = vec![call(id, "run_command", json!({"command": "cargo test"}))];
        vec![assistant, Message::tool_result(id, output)]
    }

    fn temp() -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("spindle-context-{}", crate::util::random_hex()));
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn the_estimate_is_calibrated_by_the_last_report() {
        // Three bytes a token: safe for code, dense text and CJK (English
        // runs nearer four).
        assert_eq!(estimate(None, 3_000), 1_000);
        let known = Some(Known {
            tokens: 5_000,
            bytes: 8_000,
        });
        assert_eq!(estimate(known, 8_000), 5_000);
        // 1.6 bytes a token counted: what is added counts at two.
        assert_eq!(estimate(known, 11_000), 6_500);
        assert_eq!(estimate(known, 5_000), 4_000);
        assert_eq!(estimate(known, 2_000), 3_000);
        assert_eq!(
            estimate(
                Some(Known {
                    tokens: 10,
                    bytes: 100_000
                }),
                0
            ),
            0
        );
        assert_eq!(tokens_text(151_400), "151k");
        assert!(plausible(1_000, 4_000) && !plausible(10, 40_000));
        assert_eq!(size_text(41_000), "41 KB");
    }

    #[test]
    fn a_large_result_spills_head_and_tail_with_the_path() {
        let dir = temp();
        let keeper = Keeper { dir: Some(&dir) };
        let big: String = (0..50_000).map(|i| format!("line {i}\n")).collect();
        let mut message = Message::tool_result("call/1", big.clone());
        spill(&mut message, 32 * 1024, &keeper);
        assert!(message.text.len() <= 32 * 1024, "{}", message.text.len());
        assert!(message.text.starts_with("line 0\n"));
        assert!(message.text.ends_with("line 49999\n"));
        let path = message.full_output.clone().unwrap();
        assert!(message.text.contains(&path.display().to_string()));
        assert!(message.text.contains("read_file"));
        assert_eq!(std::fs::read_to_string(&path).unwrap(), big);
        assert!(path.starts_with(&dir));
        // Small results are untouched; multi-byte text is cut on boundaries.
        let mut small = Message::tool_result("c", "ok");
        spill(&mut small, 4096, &keeper);
        assert_eq!(small.text, "ok");
        let mut wide = Message::tool_result("w", "é".repeat(10_000));
        spill(&mut wide, 4096, &Keeper { dir: None });
        assert!(wide.text.contains("could not be kept"));
        assert!(wide.full_output.is_none());
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn old_results_become_stubs_and_recent_steps_stay() {
        let dir = temp();
        let keeper = Keeper { dir: Some(&dir) };
        let mut messages = vec![Message::user("go")];
        for n in 0..5 {
            messages.extend(step(&format!("c{n}"), &"x".repeat(5_000)));
        }
        messages.push(Message::tool_result("tiny", "short"));
        let saved = elide_old_results(&mut messages, 3, &keeper);
        assert!(saved > 9_000, "{saved}");
        let stubs: Vec<&Message> = messages.iter().filter(|m| is_stub(m)).collect();
        assert_eq!(stubs.len(), 2);
        assert!(
            stubs[0].text.contains("run_command `cargo test`"),
            "{}",
            stubs[0].text
        );
        assert!(stubs[0].text.contains("5 KB"));
        let kept = stubs[0].full_output.clone().unwrap();
        assert_eq!(std::fs::read_to_string(kept).unwrap().len(), 5_000);
        assert_eq!(messages[6].text.len(), 5_000, "the last three steps stay");
        // Eliding again saves nothing more.
        assert_eq!(elide_old_results(&mut messages, 3, &keeper), 0);
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn cuts_fall_on_prompts_or_step_starts_and_keep_the_last_step() {
        let mut messages = vec![Message::user("first"), Message::assistant("a", "")];
        messages.push(Message::user("second"));
        messages.extend(step("s1", &"y".repeat(1_000)));
        messages.extend(step("s2", &"z".repeat(1_000)));
        // Everything fits: the cut is the earliest one.
        assert_eq!(cut_point(&messages, 1_000_000), Some(2));
        // Little room: only the last step (its assistant message) stays.
        assert_eq!(cut_point(&messages, 10), Some(5));
        assert_eq!(messages[5].role, Role::Assistant);
        assert_eq!(prompt_before(&messages, 5), Some(2));
        assert_eq!(cut_point(&[Message::user("only")], 10), None);
    }

    #[test]
    fn the_summary_input_is_shortened_and_stays_paired() {
        let mut older = vec![Message::user("the task")];
        for n in 0..20 {
            older.extend(step(&format!("c{n}"), &"o".repeat(50_000)));
        }
        let input = summary_input(&older, 20_000);
        assert_eq!(input[0].text, "the task");
        assert!(input.iter().map(message_bytes).sum::<usize>() <= 20_000);
        for pair in input[1..].chunks(2) {
            assert_eq!(pair[0].role, Role::Assistant);
            assert_eq!(
                pair[1].tool_call_id.as_deref(),
                Some(pair[0].tool_calls[0].id.as_str())
            );
        }
    }

    #[test]
    fn too_long_refusals_are_recognised() {
        assert!(is_too_long(
            Some(400),
            "context_length_exceeded",
            "This model's maximum context length is 128000 tokens"
        ));
        assert!(is_too_long(
            Some(400),
            "provider_http_400",
            "prompt is too long: 210000 tokens > 200000 maximum"
        ));
        assert!(!is_too_long(
            Some(400),
            "invalid_request_error",
            "Unknown model"
        ));
        assert!(!is_too_long(Some(500), "", "context length"));
        // The local servers, in their own words.
        for (code, message) in [
            ("exceed_context_size_error", "request (8445 tokens) exceeds the available context size (8192 tokens), try increasing it"),
            ("BadRequestError", "This model's maximum context length is 4096 tokens. However, you requested 5000 tokens (4000 in the messages, 1000 in the completion)."),
            ("", "the input length exceeds the context length"),
            ("", "The number of tokens to keep from the initial prompt is greater than the context length"),
        ] {
            assert!(is_too_long(Some(400), code, message), "{message}");
        }
    }

    #[test]
    fn the_window_a_refusal_names_is_read() {
        let cases = [
            ("request (8445 tokens) exceeds the available context size (8192 tokens), try increasing it", Some(8192)),
            ("This model's maximum context length is 4,096 tokens. However, you requested 5000", Some(4096)),
            ("prompt is too long: 210000 tokens > 200000 maximum", Some(200_000)),
            ("the input length exceeds the context length", None),
            ("maximum context length is zero tokens", None),
        ];
        for (message, window) in cases {
            assert_eq!(window_named(message), window, "{message}");
        }
    }
}

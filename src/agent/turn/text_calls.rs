//! Tool calls a model wrote into its message's text, for servers that do
//! not turn them into the API's tool calls: Hermes/Qwen's
//! `<tool_call>{…}</tool_call>` (one or several), Mistral's
//! `[TOOL_CALLS][{…}]` (or `[TOOL_CALLS]name[ARGS]{…}`), Llama 3's
//! `<|python_tag|>{…}`, and a message that is nothing but one
//! `{"name": …, "arguments": {…}}` object (bare or in one code fence). Only a form that fills the rest of the message and
//! names a tool the model may call counts; text that mentions a form among
//! other words stays text. Pure functions: the `Holder` decides what of a
//! streaming message may be shown now, `recover` reads the calls at the
//! message's end.

use crate::tools::lenient;
use serde_json::Value;

/// The markers a call form starts with inside a message.
const MARKERS: [&str; 3] = ["<tool_call>", "[TOOL_CALLS]", "<|python_tag|>"];

/// The most calls one message may hold.
pub(super) const MAX_CALLS: usize = 16;

/// The most bytes held back from the editor in case they are calls: past
/// it the text is shown, and is not read as calls.
pub(super) const MAX_HELD: usize = 256 * 1024;

/// How long a message's start may stay undecided (blank, or a fence's
/// first line).
const UNDECIDED: usize = 1024;

/// What of a streaming message is shown, and from where it is held back
/// because a call form may start there. Each byte is looked at a bounded
/// number of times.
#[derive(Default)]
pub(super) struct Holder {
    shown: usize,
    held_from: Option<usize>,
    /// The start of the message is decided (not a call object).
    started: bool,
    /// Held too long: the rest is shown as it comes.
    released: bool,
}

impl Holder {
    /// The bytes of `text` (the whole message so far) to show now.
    pub(super) fn advance(&mut self, text: &str) -> std::ops::Range<usize> {
        let from = self.shown;
        if self.released {
            self.shown = text.len();
            return from..text.len();
        }
        if let Some(held) = self.held_from {
            if text.len() - held > MAX_HELD {
                self.released = true;
                self.held_from = None;
                self.shown = text.len();
                return from..text.len();
            }
            return from..from;
        }
        if !self.started {
            match start_of(text) {
                Start::Undecided if text.len() <= UNDECIDED => return from..from,
                Start::Object => {
                    self.held_from = Some(0);
                    return self.advance(text);
                }
                _ => self.started = true,
            }
        }
        // A marker, or the start of one at the end, is held. Every marker
        // starts with `<` or `[`: without either there is none.
        let tail = &text[self.shown..];
        if !tail.bytes().any(|b| b == b'<' || b == b'[') {
            self.shown = text.len();
            return from..self.shown;
        }
        let found = MARKERS.iter().filter_map(|m| tail.find(m)).min();
        match found {
            Some(at) => {
                self.held_from = Some(self.shown + at);
                self.shown += at;
            }
            None => {
                let partial = (1..=tail.len().min(13))
                    .rev()
                    .find(|&n| {
                        tail.is_char_boundary(tail.len() - n)
                            && MARKERS
                                .iter()
                                .any(|m| m.starts_with(&tail[tail.len() - n..]))
                    })
                    .unwrap_or(0);
                self.shown = text.len() - partial;
            }
        }
        from..self.shown
    }

    /// Where the text held back starts, at the message's end.
    pub(super) fn held(&self, text: &str) -> Option<usize> {
        match self.held_from {
            Some(at) => Some(at),
            None if self.shown < text.len() => Some(self.shown),
            None => None,
        }
    }
}

enum Start {
    Undecided,
    Object,
    Prose,
}

/// Whether a message starts as a bare or fenced JSON object would.
fn start_of(text: &str) -> Start {
    let trimmed = text.trim_start();
    if trimmed.is_empty() {
        return Start::Undecided;
    }
    if trimmed.starts_with('{') {
        return Start::Object;
    }
    if "```".starts_with(trimmed) {
        return Start::Undecided;
    }
    let Some(fenced) = trimmed.strip_prefix("```") else {
        return Start::Prose;
    };
    let Some(newline) = fenced.find('\n') else {
        return Start::Undecided;
    };
    let body = fenced[newline + 1..].trim_start();
    match body.chars().next() {
        None => Start::Undecided,
        Some('{') => Start::Object,
        Some(_) => Start::Prose,
    }
}

/// A call read from text: the tool's name as written, and its arguments
/// as a JSON object's text.
#[derive(Debug, PartialEq)]
pub(super) struct TextCall {
    pub name: String,
    pub arguments: String,
}

/// The calls `text[from..]` holds, when it is nothing but call forms and
/// every one names a tool `known` accepts; `None` otherwise (it stays
/// text). Past `MAX_CALLS` calls or `MAX_HELD` bytes, nothing is read.
pub(super) fn recover(
    text: &str,
    from: usize,
    known: impl Fn(&str) -> bool,
) -> Option<Vec<TextCall>> {
    let held = text.get(from..)?;
    if held.len() > MAX_HELD {
        return None;
    }
    let body = held.trim();
    let calls = if let Some(rest) = body.strip_prefix("<tool_call>") {
        tagged(rest)?
    } else if body.starts_with("[TOOL_CALLS]") {
        mistral(body)?
    } else if let Some(rest) = body.strip_prefix("<|python_tag|>") {
        let rest = rest.trim_end();
        let rest = ["<|eom_id|>", "<|eot_id|>"]
            .iter()
            .find_map(|end| rest.strip_suffix(end))
            .unwrap_or(rest);
        vec![parse(rest)?]
    } else if from == 0 && (body.starts_with('{') || body.starts_with("```")) {
        let (inner, _, _) = lenient::unfence(body);
        vec![parse(inner)?]
    } else {
        return None;
    };
    if calls.is_empty() {
        return None;
    }
    calls.into_iter().map(|call| one(call, &known)).collect()
}

/// The bodies of `<tool_call>…</tool_call>` tags after the first opening
/// one, with nothing but white space between and after them. The last
/// tag may go unclosed (servers that stop at the closing tag drop it)
/// when its whole rest is the call.
fn tagged(mut rest: &str) -> Option<Vec<Value>> {
    let mut calls = Vec::new();
    loop {
        if calls.len() == MAX_CALLS {
            return None;
        }
        let Some(end) = rest.find("</tool_call>") else {
            calls.push(parse(rest)?);
            return Some(calls);
        };
        calls.push(parse(&rest[..end])?);
        rest = rest[end + "</tool_call>".len()..].trim_start();
        if rest.is_empty() {
            return Some(calls);
        }
        rest = rest.strip_prefix("<tool_call>")?;
    }
}

/// Mistral's calls: `[TOOL_CALLS][{…}, …]`, or one call a marker in its
/// newer form, `[TOOL_CALLS]name[ARGS]{…}`.
fn mistral(body: &str) -> Option<Vec<Value>> {
    let mut calls = Vec::new();
    for segment in body.split("[TOOL_CALLS]").skip(1) {
        let segment = segment.trim();
        if segment.starts_with('[') || segment.starts_with('{') {
            match parse(segment)? {
                Value::Array(items) => calls.extend(items),
                item @ Value::Object(_) => calls.push(item),
                _ => return None,
            }
        } else {
            let (name, arguments) = segment.split_once("[ARGS]")?;
            let mut call = serde_json::Map::new();
            call.insert("name".into(), Value::String(name.trim().to_string()));
            call.insert("arguments".into(), parse(arguments)?);
            calls.push(Value::Object(call));
        }
        if calls.len() > MAX_CALLS {
            return None;
        }
    }
    Some(calls)
}

fn parse(text: &str) -> Option<Value> {
    match serde_json::from_str(text.trim()) {
        Ok(value) => Some(value),
        Err(_) => lenient::parse(text.trim()).ok().map(|read| read.value),
    }
}

/// One call object: its name (a known tool) and its arguments (an object,
/// or a string holding one), and nothing else.
fn one(call: Value, known: &impl Fn(&str) -> bool) -> Option<TextCall> {
    let Value::Object(fields) = call else {
        return None;
    };
    // Llama 3.2 may add `"type": "function"`; nothing else may be there.
    if fields.iter().any(|(k, v)| match k.as_str() {
        "name" | "arguments" | "parameters" => false,
        "type" => v != "function",
        _ => true,
    }) {
        return None;
    }
    let name = fields.get("name")?.as_str()?;
    if !known(name) {
        return None;
    }
    let arguments = match (fields.get("arguments"), fields.get("parameters")) {
        (Some(arguments), None) | (None, Some(arguments)) => arguments,
        (None, None) => &Value::Object(Default::default()),
        (Some(_), Some(_)) => return None,
    };
    let arguments = match arguments {
        Value::Object(_) => arguments.to_string(),
        Value::String(text) if text.trim_start().starts_with('{') => text.clone(),
        _ => return None,
    };
    Some(TextCall {
        name: name.to_string(),
        arguments,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_marker_starts_with_what_the_holder_looks_for() {
        assert!(MARKERS
            .iter()
            .all(|m| m.starts_with('<') || m.starts_with('[')));
    }

    fn known(name: &str) -> bool {
        matches!(name, "read_file" | "edit_file" | "Read_File")
    }

    fn calls(text: &str) -> Option<Vec<(String, Value)>> {
        let mut holder = Holder::default();
        // Streamed a few bytes at a time, as a server sends it.
        let mut shown = String::new();
        let mut end = 0;
        while end < text.len() {
            end = (end + 3).min(text.len());
            while !text.is_char_boundary(end) {
                end += 1;
            }
            shown.push_str(&text[holder.advance(&text[..end])]);
        }
        let from = holder.held(text).unwrap_or(text.len());
        assert_eq!(
            shown,
            text[..from],
            "shown is everything before the held part"
        );
        let found = recover(text, from, known)?;
        Some(
            found
                .into_iter()
                .map(|c| (c.name, serde_json::from_str(&c.arguments).unwrap()))
                .collect(),
        )
    }

    fn read(path: &str) -> (String, Value) {
        ("read_file".into(), serde_json::json!({"path": path}))
    }

    #[test]
    fn hermes_tags_are_calls_and_the_text_before_them_is_shown() {
        let text = "Let me look.\n<tool_call>\n{\"name\": \"read_file\", \"arguments\": {\"path\": \"a\"}}\n</tool_call>\n<tool_call>{\"name\": \"read_file\", \"arguments\": \"{\\\"path\\\": \\\"b\\\"}\"}</tool_call>\n";
        assert_eq!(calls(text), Some(vec![read("a"), read("b")]));
        let mut holder = Holder::default();
        let range = holder.advance(text);
        assert_eq!(&text[range], "Let me look.\n");
    }

    #[test]
    fn the_last_tag_may_go_unclosed() {
        let one = "<tool_call>{\"name\": \"read_file\", \"arguments\": {\"path\": \"a\"}}";
        assert_eq!(calls(one), Some(vec![read("a")]));
        let two = format!("{one}</tool_call>\n{one}\n");
        assert_eq!(calls(&two), Some(vec![read("a"), read("a")]));
        // Unclosed in the middle, or followed by words: text.
        assert_eq!(calls(&format!("{one}\n{one}</tool_call>")), None);
        assert_eq!(calls(&format!("{one} and more")), None);
    }

    #[test]
    fn mistral_and_llama_forms_are_calls() {
        let text = "[TOOL_CALLS][{\"name\": \"read_file\", \"arguments\": {\"path\": \"a\"}}, {\"name\": \"read_file\", \"arguments\": {\"path\": \"b\"}}]";
        assert_eq!(calls(text), Some(vec![read("a"), read("b")]));
        let text =
            "<|python_tag|>{\"name\": \"read_file\", \"parameters\": {\"path\": \"a\"}}<|eom_id|>";
        assert_eq!(calls(text), Some(vec![read("a")]));
    }

    #[test]
    fn a_message_that_is_one_call_object_is_a_call() {
        let text = "{\"name\": \"read_file\", \"arguments\": {\"path\": \"a\",}}";
        assert_eq!(calls(text), Some(vec![read("a")]));
        let text = "```json\n{\"name\": \"read_file\", \"arguments\": {\"path\": \"a\"}}\n```\n";
        assert_eq!(calls(text), Some(vec![read("a")]));
    }

    #[test]
    fn prose_that_mentions_a_form_stays_text() {
        let text = "To call a tool, write `<tool_call>{\"name\": \"read_file\", \"arguments\": {\"path\": \"a\"}}</tool_call>` on a line of its own. Then the server runs it.";
        assert_eq!(calls(text), None);
        let text = "Here is an example object:\n{\"name\": \"read_file\", \"arguments\": {\"path\": \"a\"}}";
        assert_eq!(calls(text), None);
        let text = "{\"name\": \"read_file\", \"arguments\": {\"path\": \"a\"}}\nThat is how a call looks.";
        assert_eq!(calls(text), None);
        let text =
            "```json\n{\"name\": \"read_file\", \"arguments\": {}}\n```\nand another\n```\n{}\n```";
        assert_eq!(calls(text), None);
        let text = "{\"name\": \"read_file\", \"arguments\": {\"path\": \"a\"}, \"why\": \"x\"}";
        assert_eq!(calls(text), None);
    }

    #[test]
    fn a_tool_not_offered_is_not_a_call() {
        let text = "<tool_call>{\"name\": \"rm_rf\", \"arguments\": {}}</tool_call>";
        assert_eq!(calls(text), None);
        let text = "<tool_call>{\"name\": \"read_file\", \"arguments\": {\"path\": \"a\"}}</tool_call><tool_call>{\"name\": \"nope\", \"arguments\": {}}</tool_call>";
        assert_eq!(calls(text), None);
    }

    #[test]
    fn a_broken_form_stays_text() {
        assert_eq!(
            calls("<tool_call>{\"name\": \"read_file\", \"arguments\": {\"path\": \"a\"}"),
            None
        );
        assert_eq!(
            calls("<tool_call>{\"name\" \"read_file\"}</tool_call>"),
            None
        );
        assert_eq!(calls("[TOOL_CALLS] not json"), None);
        assert_eq!(
            calls("<tool_call>{\"name\": \"read_file\", \"arguments\": [1]}</tool_call>"),
            None
        );
    }

    #[test]
    fn prose_is_shown_as_it_comes() {
        let mut holder = Holder::default();
        assert_eq!(holder.advance("Hello"), 0..5);
        assert_eq!(holder.advance("Hello <tool"), 5..6);
        assert_eq!(holder.advance("Hello <tools are fine"), 6..21);
        let mut holder = Holder::default();
        assert_eq!(holder.advance("  "), 0..0);
        assert_eq!(holder.advance("  ``"), 0..0);
        assert_eq!(holder.advance("  ```rust\nfn"), 0..12);
        let mut holder = Holder::default();
        assert_eq!(holder.advance("{"), 0..0);
        assert_eq!(holder.held("{\"a\""), Some(0));
    }

    #[test]
    fn hostile_messages_get_a_bounded_answer() {
        let one =
            "<tool_call>{\"name\": \"read_file\", \"arguments\": {\"path\": \"a\"}}</tool_call>";
        let many = one.repeat(10_000);
        assert_eq!(recover(&many, 0, known), None);
        let sixteen = one.repeat(MAX_CALLS);
        assert_eq!(
            recover(&sixteen, 0, known).map(|c| c.len()),
            Some(MAX_CALLS)
        );
        // Held past the cap, the text is shown and never read as calls.
        let mut holder = Holder::default();
        let huge = format!("<tool_call>{}", "x".repeat(MAX_HELD + 10));
        holder.advance(&huge[..20]);
        assert_eq!(holder.advance(&huge), 0..huge.len());
        assert_eq!(holder.held(&huge), None);
        let ten_mb = format!(
            "{{\"name\": \"read_file\", \"arguments\": {{\"p\": \"{}\"}}}}",
            "y".repeat(10 << 20)
        );
        assert_eq!(recover(&ten_mb, 0, known), None);
        let deep = format!("<tool_call>{}</tool_call>", "[".repeat(100_000));
        assert_eq!(recover(&deep, 0, known), None);
        let mistral = "[TOOL_CALLS]read_file[ARGS]{}".repeat(10_000);
        assert_eq!(recover(&mistral, 0, known), None);
        let tags = "<tool_call>".repeat(10_000);
        assert_eq!(recover(&tags, 0, known), None);
    }
}

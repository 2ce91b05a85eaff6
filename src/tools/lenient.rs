//! JSON as models write it when they almost write JSON: a parser that
//! takes what strict JSON refuses only where the meaning is certain
//! (trailing commas, single quotes, Python's `True`/`False`/`None`, raw
//! newlines and tabs inside strings, one code fence around the whole),
//! names each repair, and refuses anything else with the line and column
//! of the first fault. It never recurses (an explicit stack, at most
//! `MAX_DEPTH` deep) and reads its input once, so any input gets a
//! linear, bounded answer.

use serde_json::{Map, Value};

/// The largest text a repair is tried on; strict JSON of any size is
/// read as it is elsewhere.
pub(crate) const MAX_REPAIR_BYTES: usize = 1 << 20;

/// The deepest nesting a repaired value may have.
pub(crate) const MAX_DEPTH: usize = 64;

/// A value read leniently, and what had to be forgiven to read it.
#[derive(Debug)]
pub(crate) struct Lenient {
    pub value: Value,
    /// The repairs, each named once, in the order first met.
    pub repairs: Vec<&'static str>,
}

pub(crate) const TRAILING_COMMA: &str = "trailing comma";
pub(crate) const SINGLE_QUOTES: &str = "single quotes";
pub(crate) const PYTHON_LITERAL: &str = "Python literal";
pub(crate) const RAW_NEWLINE: &str = "unescaped newline in a string";
pub(crate) const RAW_TAB: &str = "unescaped tab in a string";
pub(crate) const RAW_CONTROL: &str = "unescaped control character in a string";
pub(crate) const CODE_FENCE: &str = "code fence";

enum Frame {
    Array(Vec<Value>),
    Object(Map<String, Value>, Option<String>),
}

#[derive(Clone, Copy, PartialEq)]
enum Want {
    Value,
    ValueOrClose,
    KeyOrClose,
    Colon,
    CommaOrClose,
}

struct Parser<'t> {
    text: &'t str,
    /// Where `text` starts in what the caller gave (after a fence).
    base: usize,
    whole: &'t str,
    pos: usize,
    repairs: Vec<&'static str>,
}

/// Reads `text` as one JSON value, forgiving what the module names.
pub(crate) fn parse(whole: &str) -> Result<Lenient, String> {
    if whole.len() > MAX_REPAIR_BYTES {
        return Err(format!(
            "it is {} bytes, more than the {MAX_REPAIR_BYTES} Spindle tries to repair",
            whole.len()
        ));
    }
    let (text, base, fenced) = unfence(whole);
    let mut parser = Parser {
        text,
        base,
        whole,
        pos: 0,
        repairs: Vec::new(),
    };
    if fenced {
        parser.note(CODE_FENCE);
    }
    let value = parser.run()?;
    Ok(Lenient {
        value,
        repairs: parser.repairs,
    })
}

/// The text inside one code fence that wraps all of it (```` ```json ````
/// or bare), with its offset; the text itself otherwise.
pub(crate) fn unfence(whole: &str) -> (&str, usize, bool) {
    let trimmed = whole.trim();
    let Some(rest) = trimmed.strip_prefix("```") else {
        return (whole, 0, false);
    };
    let Some(newline) = rest.find('\n') else {
        return (whole, 0, false);
    };
    let label = rest[..newline].trim();
    if !label.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
        return (whole, 0, false);
    }
    let body = &rest[newline + 1..];
    let Some(inner) = body.trim_end().strip_suffix("```") else {
        return (whole, 0, false);
    };
    if inner.contains("```") {
        return (whole, 0, false);
    }
    let start = whole.len() - whole.trim_start().len() + 3 + newline + 1;
    (inner, start, true)
}

/// Line and column (1-based, in characters) of a byte offset.
pub(crate) fn place(text: &str, offset: usize) -> (usize, usize) {
    let before = &text[..offset.min(text.len())];
    let line = before.bytes().filter(|b| *b == b'\n').count() + 1;
    let start = before.rfind('\n').map_or(0, |n| n + 1);
    (line, before[start..].chars().count() + 1)
}

impl Parser<'_> {
    fn note(&mut self, repair: &'static str) {
        if !self.repairs.contains(&repair) {
            self.repairs.push(repair);
        }
    }

    fn fail(&self, what: impl std::fmt::Display) -> String {
        let (line, column) = place(self.whole, self.base + self.pos);
        format!("{what} at line {line}, column {column}")
    }

    fn skip_space(&mut self) {
        let bytes = self.text.as_bytes();
        while self.pos < bytes.len() && bytes[self.pos].is_ascii_whitespace() {
            self.pos += 1;
        }
    }

    fn run(&mut self) -> Result<Value, String> {
        let mut stack: Vec<Frame> = Vec::new();
        let mut want = Want::Value;
        let mut after_comma = false;
        loop {
            self.skip_space();
            let Some(&byte) = self.text.as_bytes().get(self.pos) else {
                return Err(match stack.last() {
                    None => self.fail("the JSON is empty or ends early"),
                    Some(Frame::Array(_)) => self.fail("the JSON ends before its `]`"),
                    Some(Frame::Object(..)) => self.fail("the JSON ends before its `}`"),
                });
            };
            let done: Option<Value> = match want {
                Want::ValueOrClose if byte == b']' => {
                    if after_comma {
                        self.note(TRAILING_COMMA);
                    }
                    self.pos += 1;
                    match stack.pop() {
                        Some(Frame::Array(items)) => Some(Value::Array(items)),
                        _ => return Err(self.fail("an unexpected `]`")),
                    }
                }
                Want::Value | Want::ValueOrClose => match byte {
                    b'{' | b'[' => {
                        if stack.len() >= MAX_DEPTH {
                            return Err(
                                self.fail(format!("nesting deeper than {MAX_DEPTH} levels"))
                            );
                        }
                        self.pos += 1;
                        if byte == b'{' {
                            stack.push(Frame::Object(Map::new(), None));
                            want = Want::KeyOrClose;
                        } else {
                            stack.push(Frame::Array(Vec::new()));
                            want = Want::ValueOrClose;
                        }
                        after_comma = false;
                        None
                    }
                    b'"' | b'\'' => Some(Value::String(self.string()?)),
                    b'-' | b'0'..=b'9' => Some(self.number()?),
                    b'a'..=b'z' | b'A'..=b'Z' => Some(self.word()?),
                    _ => return Err(self.fail(format!("unexpected {}", shown(byte)))),
                },
                Want::KeyOrClose => match byte {
                    b'}' => {
                        if after_comma {
                            self.note(TRAILING_COMMA);
                        }
                        self.pos += 1;
                        match stack.pop() {
                            Some(Frame::Object(map, _)) => Some(Value::Object(map)),
                            _ => return Err(self.fail("an unexpected `}`")),
                        }
                    }
                    b'"' | b'\'' => {
                        let key = self.string()?;
                        if let Some(Frame::Object(_, slot)) = stack.last_mut() {
                            *slot = Some(key);
                        }
                        want = Want::Colon;
                        None
                    }
                    _ => return Err(self.fail("expected a key in quotes")),
                },
                Want::Colon => {
                    if byte != b':' {
                        return Err(self.fail("expected `:` after the key"));
                    }
                    self.pos += 1;
                    want = Want::Value;
                    None
                }
                Want::CommaOrClose => {
                    self.pos += 1;
                    match (byte, stack.last()) {
                        (b',', Some(Frame::Object(..))) => {
                            want = Want::KeyOrClose;
                            after_comma = true;
                            None
                        }
                        (b',', Some(Frame::Array(_))) => {
                            want = Want::ValueOrClose;
                            after_comma = true;
                            None
                        }
                        (b'}', Some(Frame::Object(..))) => match stack.pop() {
                            Some(Frame::Object(map, _)) => Some(Value::Object(map)),
                            _ => None,
                        },
                        (b']', Some(Frame::Array(_))) => match stack.pop() {
                            Some(Frame::Array(items)) => Some(Value::Array(items)),
                            _ => None,
                        },
                        (_, Some(Frame::Object(..))) => {
                            self.pos -= 1;
                            return Err(self.fail("expected `,` or `}`"));
                        }
                        _ => {
                            self.pos -= 1;
                            return Err(self.fail("expected `,` or `]`"));
                        }
                    }
                }
            };
            let Some(value) = done else {
                continue;
            };
            after_comma = false;
            match stack.last_mut() {
                None => {
                    self.skip_space();
                    if self.pos < self.text.len() {
                        return Err(self.fail("more text after the JSON value"));
                    }
                    return Ok(value);
                }
                Some(Frame::Array(items)) => items.push(value),
                Some(Frame::Object(map, key)) => {
                    map.insert(key.take().unwrap_or_default(), value);
                }
            }
            want = Want::CommaOrClose;
        }
    }

    /// A string in double or single quotes; raw control characters in it
    /// are escaped.
    fn string(&mut self) -> Result<String, String> {
        let start = self.pos;
        let bytes = self.text.as_bytes();
        let quote = bytes[start];
        if quote == b'\'' {
            self.note(SINGLE_QUOTES);
        }
        let mut out = String::from("\"");
        let mut run = start + 1;
        let mut at = start + 1;
        while at < bytes.len() {
            let byte = bytes[at];
            let replace: Option<&str> = match byte {
                _ if byte == quote => {
                    out.push_str(&self.text[run..at]);
                    out.push('"');
                    self.pos = at + 1;
                    return serde_json::from_str::<String>(&out).map_err(|_| {
                        self.pos = start;
                        self.fail("a bad escape in the string")
                    });
                }
                b'\\' => {
                    let Some(&next) = bytes.get(at + 1) else {
                        break;
                    };
                    if quote == b'\'' && next == b'\'' {
                        out.push_str(&self.text[run..at]);
                        out.push('\'');
                        at += 2;
                        run = at;
                        continue;
                    }
                    // Copied as it is (checked when the string is read);
                    // an escaped quote must not end the string.
                    at += if next.is_ascii() { 2 } else { 1 };
                    continue;
                }
                b'"' => Some("\\\""),
                b'\n' => {
                    self.note(RAW_NEWLINE);
                    Some("\\n")
                }
                b'\r' => {
                    self.note(RAW_NEWLINE);
                    Some("\\r")
                }
                b'\t' => {
                    self.note(RAW_TAB);
                    Some("\\t")
                }
                0..=0x1f => {
                    self.note(RAW_CONTROL);
                    None
                }
                _ => {
                    at += 1;
                    continue;
                }
            };
            out.push_str(&self.text[run..at]);
            match replace {
                Some(escaped) => out.push_str(escaped),
                None => out.push_str(&format!("\\u{byte:04x}")),
            }
            at += 1;
            run = at;
        }
        self.pos = start;
        Err(self.fail("a string that is never closed"))
    }

    fn number(&mut self) -> Result<Value, String> {
        let start = self.pos;
        let bytes = self.text.as_bytes();
        let mut end = start;
        while end < bytes.len()
            && matches!(bytes[end], b'0'..=b'9' | b'-' | b'+' | b'.' | b'e' | b'E')
        {
            end += 1;
        }
        match serde_json::from_str::<serde_json::Number>(&self.text[start..end]) {
            Ok(number) => {
                self.pos = end;
                Ok(Value::Number(number))
            }
            Err(_) => Err(self.fail("a malformed number")),
        }
    }

    fn word(&mut self) -> Result<Value, String> {
        let start = self.pos;
        let bytes = self.text.as_bytes();
        let mut end = start;
        while end < bytes.len() && (bytes[end].is_ascii_alphanumeric() || bytes[end] == b'_') {
            end += 1;
        }
        let value = match &self.text[start..end] {
            "true" => Value::Bool(true),
            "false" => Value::Bool(false),
            "null" => Value::Null,
            "True" => {
                self.note(PYTHON_LITERAL);
                Value::Bool(true)
            }
            "False" => {
                self.note(PYTHON_LITERAL);
                Value::Bool(false)
            }
            "None" => {
                self.note(PYTHON_LITERAL);
                Value::Null
            }
            other => {
                let other: String = other.chars().take(24).collect();
                return Err(self.fail(format!("the bare word `{other}` (strings need quotes)")));
            }
        };
        self.pos = end;
        Ok(value)
    }
}

fn shown(byte: u8) -> String {
    if byte.is_ascii_graphic() {
        format!("`{}`", byte as char)
    } else {
        format!("byte 0x{byte:02x}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn ok(text: &str) -> (Value, Vec<&'static str>) {
        let read = parse(text).unwrap_or_else(|e| panic!("{text:?}: {e}"));
        (read.value, read.repairs)
    }

    #[test]
    fn strict_json_needs_no_repair() {
        let (value, repairs) = ok(r#"{"a": [1, 2.5, -3e2], "b": {"c": null, "d": "x\"y\u00e9"}}"#);
        assert_eq!(
            value,
            json!({"a": [1, 2.5, -300.0], "b": {"c": null, "d": "x\"yé"}})
        );
        assert!(repairs.is_empty());
    }

    #[test]
    fn trailing_commas_are_dropped() {
        let (value, repairs) = ok(r#"{"path": "a.rs", "lines": [1, 2,],}"#);
        assert_eq!(value, json!({"path": "a.rs", "lines": [1, 2]}));
        assert_eq!(repairs, [TRAILING_COMMA]);
    }

    #[test]
    fn single_quotes_become_double() {
        let (value, repairs) = ok(r#"{'path': 'it\'s "here".rs'}"#);
        assert_eq!(value, json!({"path": "it's \"here\".rs"}));
        assert_eq!(repairs, [SINGLE_QUOTES]);
    }

    #[test]
    fn python_literals_are_read() {
        let (value, repairs) = ok(r#"{"a": True, "b": False, "c": None}"#);
        assert_eq!(value, json!({"a": true, "b": false, "c": null}));
        assert_eq!(repairs, [PYTHON_LITERAL]);
    }

    #[test]
    fn raw_newlines_and_tabs_in_strings_are_escaped() {
        let (value, repairs) = ok("{\"content\": \"line 1\n\tline 2\r\n\u{1}\"}");
        assert_eq!(value, json!({"content": "line 1\n\tline 2\r\n\u{1}"}));
        assert_eq!(repairs, [RAW_NEWLINE, RAW_TAB, RAW_CONTROL]);
    }

    #[test]
    fn one_code_fence_around_the_whole_is_removed() {
        let (value, repairs) = ok("```json\n{\"path\": \"a\"}\n```");
        assert_eq!(value, json!({"path": "a"}));
        assert_eq!(repairs, [CODE_FENCE]);
        let (value, _) = ok("  ```\n{\"path\": \"a\"}\n```  ");
        assert_eq!(value, json!({"path": "a"}));
    }

    #[test]
    fn a_real_syntax_error_is_refused_with_its_place() {
        let error = parse("{\"path\": \"a\",\n \"limit\" 5}").unwrap_err();
        assert_eq!(error, "expected `:` after the key at line 2, column 10");
        let error = parse("{\"a\": 1 \"b\": 2}").unwrap_err();
        assert_eq!(error, "expected `,` or `}` at line 1, column 9");
        let error = parse("{\"a\": undefined}").unwrap_err();
        assert!(error.starts_with("the bare word `undefined`"), "{error}");
        let error = parse("{\"a\": \"x\\q\"}").unwrap_err();
        assert!(
            error.starts_with("a bad escape in the string at line 1, column 7"),
            "{error}"
        );
        assert!(parse("{\"a\": 1} trailing").is_err());
        assert!(parse("{\"a\": 1")
            .unwrap_err()
            .contains("ends before its `}`"));
        assert!(parse("{,}").is_err());
        assert!(parse("[1,,2]").is_err());
        assert!(parse("{\"a\": 01}")
            .unwrap_err()
            .contains("malformed number"));
    }

    #[test]
    fn a_fence_with_more_inside_is_not_taken_away() {
        assert!(parse("```\n{\"a\": 1}\n```\ntext\n```\n{}\n```").is_err());
    }

    #[test]
    fn hostile_inputs_get_a_bounded_answer() {
        let deep = "[".repeat(100_000);
        assert!(parse(&deep).unwrap_err().contains("nesting deeper than 64"));
        let deep = format!("{}1{}", "[".repeat(MAX_DEPTH), "]".repeat(MAX_DEPTH));
        assert!(parse(&deep).is_ok());
        let huge = format!("{{\"a\": \"{}\",}}", "x".repeat(10 << 20));
        assert!(parse(&huge).unwrap_err().contains("more than the"));
        let open = format!("{{\"a\": \"{}", "y".repeat(MAX_REPAIR_BYTES - 16));
        assert!(parse(&open).unwrap_err().contains("never closed"));
        let many = format!("[{}]", "'a',".repeat(200_000));
        assert!(parse(&many).is_ok());
    }

    #[test]
    fn places_count_characters() {
        assert_eq!(place("ab\ncé\nx", 6), (2, 3));
        assert_eq!(place("", 0), (1, 1));
    }
}

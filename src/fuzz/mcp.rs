//! Target of the MCP client: a server's elicitation, checked before it is
//! shown.

use super::rng::Rng;

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

pub(super) fn mcp_elicitation(rng: &mut Rng) -> Result<(), String> {
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

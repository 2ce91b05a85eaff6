//! Elicitation: an MCP server asking the user something while one of its
//! tools is being called (`elicitation/create`, form or URL mode).
//!
//! Spindle declares the capability only for the modes the editor takes,
//! and hands each request to the tool call it came during: the thread
//! that waits for that call asks the user through an [`Elicitor`] (the
//! turn forwards it to the editor) and answers the server. What a server
//! sends is checked here first, because it goes on to the editor: the
//! message and every text shown are capped and stripped of control
//! characters, a form's schema is rebuilt from what the restricted schema
//! of both protocols allows (anything else refused with a reason the
//! server can read), and a URL must be plain `http`/`https` without
//! credentials, so a hostile server cannot make the editor open a
//! `file:` or `javascript:` URL. The user's answer is checked against
//! the form before it goes back.

use super::elicit_error::{ElicitError, ElicitErrorKind};
use crate::cancel::CancelToken;
use serde_json::{json, Map, Value};
use std::fmt;
use std::sync::Arc;
use std::time::Instant;

/// The longest message, in bytes.
pub(crate) const MESSAGE_CAP: usize = 8 * 1024;
/// The most bytes of a form's schema as the server sent it.
pub(crate) const SCHEMA_CAP: usize = 64 * 1024;
/// The longest URL, in bytes.
pub(crate) const URL_CAP: usize = 4096;
/// The most fields of one form.
pub(crate) const MAX_FIELDS: usize = 32;
/// The most choices of one field.
pub(crate) const MAX_OPTIONS: usize = 100;
/// The longest title, description, field name or choice, in bytes.
pub(crate) const TEXT_CAP: usize = 1024;
/// The longest elicitation id a server may give, in bytes.
pub(crate) const ID_CAP: usize = 256;
/// The most bytes of the user's answer to one form.
pub(crate) const ANSWER_CAP: usize = 64 * 1024;
/// URL elicitations remembered per server for their completion.
pub(crate) const REMEMBERED: usize = 16;

/// Called with Spindle's id of a URL elicitation the server said is
/// complete (the session owner tells the editor).
pub(crate) type CompletionHook = Arc<dyn Fn(&str) + Send + Sync>;

/// Which elicitation modes the editor takes, and where completions go.
#[derive(Clone, Default)]
pub(crate) struct ElicitationSupport {
    pub form: bool,
    pub url: bool,
    pub on_complete: Option<CompletionHook>,
}

impl ElicitationSupport {
    /// Whether any mode is on.
    pub(crate) fn any(&self) -> bool {
        self.form || self.url
    }

    /// The client capability Spindle declares in `initialize`: exactly
    /// the modes the editor takes, none when it takes neither.
    pub(crate) fn capabilities(&self) -> Value {
        if !self.any() {
            return json!({});
        }
        let mut modes = Map::new();
        if self.form {
            modes.insert("form".into(), json!({}));
        }
        if self.url {
            modes.insert("url".into(), json!({}));
        }
        json!({"elicitation": modes})
    }
}

impl PartialEq for ElicitationSupport {
    fn eq(&self, other: &Self) -> bool {
        let same_hook = match (&self.on_complete, &other.on_complete) {
            (None, None) => true,
            (Some(one), Some(two)) => Arc::ptr_eq(one, two),
            _ => false,
        };
        self.form == other.form && self.url == other.url && same_hook
    }
}

impl Eq for ElicitationSupport {}

impl fmt::Debug for ElicitationSupport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ElicitationSupport")
            .field("form", &self.form)
            .field("url", &self.url)
            .field("on_complete", &self.on_complete.is_some())
            .finish()
    }
}

/// What a server asks the user, checked and cleaned.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Elicitation {
    /// Fill in a form: `schema` is the restricted schema, rebuilt.
    Form { message: String, schema: Value },
    /// Open a URL. `id` is Spindle's own id for it (unique among the
    /// agent's elicitations, whatever the server chose); the server's is
    /// kept by the connection.
    Url {
        message: String,
        id: String,
        url: String,
    },
}

/// The user's answer.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum ElicitAnswer {
    /// Accepted; for a form, the values given.
    Accept(Map<String, Value>),
    Decline,
    /// Dismissed, or no answer came (cancel, timeout, the server gave up).
    Cancel,
}

/// Asks the user on behalf of a server, during one tool call. `Err` is
/// why the question could not be asked (the editor refused it).
pub(crate) trait Elicitor {
    /// Waits for the answer, at most until `deadline` and never past one
    /// of `stops` (the turn's cancel, the server withdrawing the question):
    /// those give [`ElicitAnswer::Cancel`].
    fn elicit(
        &self,
        request: &Elicitation,
        stops: &[&CancelToken],
        deadline: Instant,
    ) -> Result<ElicitAnswer, ElicitError>;
}

/// A request refused before it reaches the user: the JSON-RPC error for
/// the server.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Refusal {
    pub code: i64,
    pub message: String,
}

impl Refusal {
    pub(crate) fn invalid(message: impl Into<String>) -> Refusal {
        Refusal {
            code: -32602,
            message: message.into(),
        }
    }
}

/// A request as it came, parsed: the elicitation and, for URL mode, the
/// server's own id.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Parsed {
    pub elicitation: Elicitation,
    pub server_id: Option<String>,
}

/// Reads the params of `elicitation/create`: the mode (absent means form,
/// as in revision 2025-06-18), which the editor must take, the message,
/// and the schema or the URL and id.
pub(crate) fn parse(params: &Value, support: &ElicitationSupport) -> Result<Parsed, Refusal> {
    let Some(params) = params.as_object() else {
        return Err(Refusal::invalid("elicitation/create needs params"));
    };
    let mode = match params.get("mode") {
        None | Some(Value::Null) => "form",
        Some(Value::String(mode)) => mode.as_str(),
        Some(_) => return Err(Refusal::invalid("`mode` must be a string")),
    };
    let message = match params.get("message") {
        Some(Value::String(message)) => message,
        _ => return Err(Refusal::invalid("`message` must be a string")),
    };
    if message.len() > MESSAGE_CAP {
        return Err(Refusal::invalid(format!(
            "`message` is longer than {MESSAGE_CAP} bytes"
        )));
    }
    let message = shown(message);
    match mode {
        "form" if support.form => {
            let schema = params
                .get("requestedSchema")
                .ok_or_else(|| Refusal::invalid("form mode needs `requestedSchema`"))?;
            let schema = form_schema(schema).map_err(Refusal::invalid)?;
            Ok(Parsed {
                elicitation: Elicitation::Form { message, schema },
                server_id: None,
            })
        }
        "url" if support.url => {
            let url = match params.get("url") {
                Some(Value::String(url)) => url,
                _ => return Err(Refusal::invalid("URL mode needs `url` as a string")),
            };
            check_url(url).map_err(Refusal::invalid)?;
            let server_id = match params.get("elicitationId") {
                Some(Value::String(id)) if !id.is_empty() && id.len() <= ID_CAP => id.clone(),
                _ => {
                    return Err(Refusal::invalid(format!(
                        "URL mode needs `elicitationId`, a string of 1 to {ID_CAP} bytes"
                    )))
                }
            };
            Ok(Parsed {
                elicitation: Elicitation::Url {
                    message,
                    id: format!("mcp-{}", crate::util::random_hex()),
                    url: url.clone(),
                },
                server_id: Some(server_id),
            })
        }
        "form" | "url" => Err(Refusal::invalid(format!(
            "the editor does not take {mode} elicitation (the client capability says which modes it takes)"
        ))),
        other => Err(Refusal::invalid(format!(
            "unknown elicitation mode `{}`",
            shown(&clip(other, 64))
        ))),
    }
}

/// Only `http` and `https` URLs with a host and no credentials, in
/// printable ASCII (anything else percent-encoded), within [`URL_CAP`].
/// Credentials are refused because `https://trusted@evil.example/` shows
/// a host it does not go to.
pub(crate) fn check_url(url: &str) -> Result<(), ElicitError> {
    if url.len() > URL_CAP {
        return Err(ElicitError::refused(format!(
            "the URL is longer than {URL_CAP} bytes"
        )));
    }
    if !url.bytes().all(|b| b.is_ascii_graphic()) {
        return Err(ElicitError::refused(
            "the URL must be printable ASCII without spaces (percent-encode the rest)",
        ));
    }
    let lower = url.to_ascii_lowercase();
    let rest = if let Some(rest) = lower.strip_prefix("https://") {
        rest
    } else if let Some(rest) = lower.strip_prefix("http://") {
        rest
    } else {
        let scheme = url.split(':').next().unwrap_or("");
        return Err(ElicitError::refused(format!(
            "only http and https URLs are opened, not `{}:`",
            clip(scheme, 32)
        )));
    };
    let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
    if authority.contains('@') {
        return Err(ElicitError::refused(
            "the URL must not carry credentials (`user@host`)",
        ));
    }
    if authority.contains('\\') {
        return Err(ElicitError::refused("the URL's host must not contain `\\`"));
    }
    let host = match authority.strip_prefix('[') {
        Some(bracketed) => bracketed.split(']').next().unwrap_or(""),
        None => authority.split(':').next().unwrap_or(""),
    };
    if host.is_empty() {
        return Err(ElicitError::refused("the URL has no host"));
    }
    if !host
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b':'))
    {
        return Err(ElicitError::refused(
            "the URL's host has characters a host name cannot have",
        ));
    }
    Ok(())
}

/// Rebuilds a form's schema from the restricted subset: a flat object of
/// string, number, integer, boolean and multi-select fields. Keywords
/// outside it are dropped (`$schema`, `additionalProperties`, `pattern`,
/// unknown formats); MCP's legacy `enumNames` becomes titled choices;
/// nested objects, other types and anything over a cap are refused.
pub(crate) fn form_schema(raw: &Value) -> Result<Value, ElicitError> {
    form_subset(raw).map_err(ElicitError::refused)
}

fn form_subset(raw: &Value) -> Result<Value, String> {
    let size = serde_json::to_string(raw).map_or(usize::MAX, |text| text.len());
    if size > SCHEMA_CAP {
        return Err(format!(
            "`requestedSchema` is larger than {SCHEMA_CAP} bytes"
        ));
    }
    let Some(raw) = raw.as_object() else {
        return Err("`requestedSchema` must be an object".into());
    };
    match raw.get("type") {
        None => {}
        Some(Value::String(kind)) if kind == "object" => {}
        Some(_) => return Err("`requestedSchema` must have `\"type\": \"object\"`".into()),
    }
    let properties = match raw.get("properties") {
        Some(Value::Object(properties)) => properties,
        None => return Err("`requestedSchema` needs `properties`".into()),
        Some(_) => return Err("`requestedSchema.properties` must be an object".into()),
    };
    if properties.len() > MAX_FIELDS {
        return Err(format!("a form may have at most {MAX_FIELDS} fields"));
    }
    let mut fields = Map::new();
    for (name, field) in properties {
        if name.is_empty() || name.len() > TEXT_CAP || name.chars().any(char::is_control) {
            return Err(format!(
                "the field name `{}` is empty, too long or has control characters",
                shown(&clip(name, 64))
            ));
        }
        let field = form_field(field).map_err(|why| format!("field `{name}`: {why}"))?;
        fields.insert(name.clone(), field);
    }
    let mut schema = Map::new();
    schema.insert("type".into(), json!("object"));
    for key in ["title", "description"] {
        if let Some(text) = text_of(raw, key)? {
            schema.insert(key.into(), json!(text));
        }
    }
    if let Some(required) = raw.get("required") {
        let Some(required) = required.as_array() else {
            return Err("`required` must be an array of field names".into());
        };
        let names: Vec<Value> = required
            .iter()
            .filter_map(Value::as_str)
            .filter(|name| fields.contains_key(*name))
            .map(|name| json!(name))
            .collect();
        schema.insert("required".into(), Value::Array(names));
    }
    schema.insert("properties".into(), Value::Object(fields));
    Ok(Value::Object(schema))
}

/// One field of a form, rebuilt.
fn form_field(raw: &Value) -> Result<Value, String> {
    let Some(raw) = raw.as_object() else {
        return Err("must be an object".into());
    };
    let kind = match raw.get("type") {
        Some(Value::String(kind)) => kind.as_str(),
        _ => return Err("needs a `type`".into()),
    };
    let mut field = Map::new();
    field.insert("type".into(), json!(kind));
    for key in ["title", "description"] {
        if let Some(text) = text_of(raw, key)? {
            field.insert(key.into(), json!(text));
        }
    }
    match kind {
        "string" => {
            for key in ["minLength", "maxLength"] {
                if let Some(value) = raw.get(key) {
                    let length = value
                        .as_u64()
                        .filter(|n| u32::try_from(*n).is_ok())
                        .ok_or_else(|| format!("`{key}` must be a small whole number"))?;
                    field.insert(key.into(), json!(length));
                }
            }
            if let Some(Value::String(format)) = raw.get("format") {
                if ["email", "uri", "date", "date-time"].contains(&format.as_str()) {
                    field.insert("format".into(), json!(format));
                }
            }
            if let Some(default) = raw.get("default") {
                let default = default.as_str().ok_or("`default` must be a string")?;
                field.insert("default".into(), json!(choice(default)?));
            }
            if let Some(values) = raw.get("enum") {
                let values = choices(values)?;
                match raw.get("enumNames").and_then(Value::as_array) {
                    // MCP's legacy titled enum: titled choices in ACP.
                    Some(names) if names.len() == values.len() => {
                        let mut options = Vec::new();
                        for (value, name) in values.iter().zip(names) {
                            let title = name.as_str().ok_or("`enumNames` must be strings")?;
                            options.push(json!({"const": value, "title": title_text(title)?}));
                        }
                        field.insert("oneOf".into(), Value::Array(options));
                    }
                    _ => {
                        field.insert("enum".into(), json!(values));
                    }
                }
            } else if let Some(options) = raw.get("oneOf") {
                field.insert("oneOf".into(), titled(options)?);
            }
        }
        "number" | "integer" => {
            for key in ["minimum", "maximum", "default"] {
                if let Some(value) = raw.get(key) {
                    let fits = if kind == "integer" {
                        value.is_i64() || value.is_u64()
                    } else {
                        value.is_number()
                    };
                    if !fits {
                        return Err(format!("`{key}` must be a {kind}"));
                    }
                    field.insert(key.into(), value.clone());
                }
            }
        }
        "boolean" => {
            if let Some(default) = raw.get("default") {
                let default = default.as_bool().ok_or("`default` must be true or false")?;
                field.insert("default".into(), json!(default));
            }
        }
        "array" => {
            let items = raw
                .get("items")
                .and_then(Value::as_object)
                .ok_or("a multi-select field needs `items`")?;
            let items = if let Some(values) = items.get("enum") {
                if items.get("type").and_then(Value::as_str) != Some("string") {
                    return Err("multi-select items must be strings".into());
                }
                json!({"type": "string", "enum": choices(values)?})
            } else if let Some(options) = items.get("anyOf") {
                json!({"anyOf": titled(options)?})
            } else {
                return Err("a multi-select field needs `items.enum` or `items.anyOf`".into());
            };
            field.insert("items".into(), items);
            for key in ["minItems", "maxItems"] {
                if let Some(value) = raw.get(key) {
                    let count = value
                        .as_u64()
                        .ok_or_else(|| format!("`{key}` must be a whole number"))?;
                    field.insert(key.into(), json!(count));
                }
            }
            if let Some(default) = raw.get("default") {
                field.insert("default".into(), json!(choices(default)?));
            }
        }
        "object" => return Err("nested objects cannot be shown in a form".into()),
        other => {
            return Err(format!(
                "the type `{}` cannot be shown in a form",
                shown(&clip(other, 64))
            ))
        }
    }
    Ok(Value::Object(field))
}

/// Plain choices: an array of at most [`MAX_OPTIONS`] strings.
fn choices(raw: &Value) -> Result<Vec<String>, String> {
    let Some(values) = raw.as_array() else {
        return Err("choices must be an array of strings".into());
    };
    if values.len() > MAX_OPTIONS {
        return Err(format!("at most {MAX_OPTIONS} choices"));
    }
    values
        .iter()
        .map(|value| {
            value
                .as_str()
                .ok_or_else(|| "choices must be strings".to_string())
                .and_then(choice)
        })
        .collect()
}

/// Titled choices: `[{const, title, description?}]`.
fn titled(raw: &Value) -> Result<Value, String> {
    let Some(options) = raw.as_array() else {
        return Err("titled choices must be an array".into());
    };
    if options.len() > MAX_OPTIONS {
        return Err(format!("at most {MAX_OPTIONS} choices"));
    }
    let mut rebuilt = Vec::new();
    for option in options {
        let Some(option) = option.as_object() else {
            return Err("a titled choice must be an object".into());
        };
        let value = option
            .get("const")
            .and_then(Value::as_str)
            .ok_or("a titled choice needs `const`, a string")?;
        let title = option
            .get("title")
            .and_then(Value::as_str)
            .ok_or("a titled choice needs `title`, a string")?;
        let mut entry = json!({"const": choice(value)?, "title": title_text(title)?});
        if let Some(description) = text_of(option, "description")? {
            entry["description"] = json!(description);
        }
        rebuilt.push(entry);
    }
    Ok(Value::Array(rebuilt))
}

/// A value the user can pick and the server gets back: kept as it is, so
/// it must be short and free of control characters.
fn choice(value: &str) -> Result<String, String> {
    if value.len() > TEXT_CAP || value.chars().any(char::is_control) {
        return Err(format!(
            "a choice is longer than {TEXT_CAP} bytes or has control characters"
        ));
    }
    Ok(value.to_string())
}

fn title_text(text: &str) -> Result<String, String> {
    if text.len() > TEXT_CAP {
        return Err(format!("a title is longer than {TEXT_CAP} bytes"));
    }
    Ok(shown(text))
}

/// An optional text member (`title`, `description`), capped and cleaned.
fn text_of(object: &Map<String, Value>, key: &str) -> Result<Option<String>, String> {
    match object.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(text)) if text.len() <= TEXT_CAP => Ok(Some(shown(text))),
        Some(Value::String(_)) => Err(format!("`{key}` is longer than {TEXT_CAP} bytes")),
        Some(_) => Err(format!("`{key}` must be a string")),
    }
}

/// Text the user will see: control characters other than line breaks
/// and tabs removed (escape sequences could drive a terminal).
fn shown(text: &str) -> String {
    text.chars()
        .filter(|c| !c.is_control() || *c == '\n' || *c == '\t')
        .collect()
}

/// At most `bytes` bytes of `text`, cut on a character boundary.
pub(crate) fn clip(text: &str, bytes: usize) -> String {
    let mut end = text.len().min(bytes);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text[..end].to_string()
}

/// The result for the server: MCP's `ElicitResult`. A form's values are
/// kept only for the form's fields and only in the field's kind; `Err`
/// when what is left is still over [`ANSWER_CAP`].
pub(crate) fn result_for_server(
    request: &Elicitation,
    answer: ElicitAnswer,
) -> Result<Value, ElicitError> {
    let content = match (answer, request) {
        (ElicitAnswer::Decline, _) => return Ok(json!({"action": "decline"})),
        (ElicitAnswer::Cancel, _) => return Ok(json!({"action": "cancel"})),
        (ElicitAnswer::Accept(_), Elicitation::Url { .. }) => {
            return Ok(json!({"action": "accept"}))
        }
        (ElicitAnswer::Accept(content), Elicitation::Form { schema, .. }) => {
            let fields = schema["properties"].as_object();
            let mut kept = Map::new();
            for (name, value) in content {
                let Some(field) = fields.and_then(|fields| fields.get(&name)) else {
                    log::debug!("the editor answered a form with the unknown field `{name}`");
                    continue;
                };
                if fits(field, &value) {
                    kept.insert(name, value);
                } else {
                    log::debug!("the editor answered the form field `{name}` with the wrong kind");
                }
            }
            kept
        }
    };
    let size = serde_json::to_string(&content).map_or(usize::MAX, |text| text.len());
    if size > ANSWER_CAP {
        return Err(ElicitError::new(
            ElicitErrorKind::TooLarge,
            format!("the answer is larger than {ANSWER_CAP} bytes"),
        ));
    }
    Ok(json!({"action": "accept", "content": content}))
}

/// Whether `value` is of the kind `field` asks for.
fn fits(field: &Value, value: &Value) -> bool {
    match field["type"].as_str() {
        Some("string") => value.is_string(),
        Some("number") => value.is_number(),
        Some("integer") => value.is_i64() || value.is_u64(),
        Some("boolean") => value.is_boolean(),
        Some("array") => value
            .as_array()
            .is_some_and(|items| items.iter().all(Value::is_string)),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn both() -> ElicitationSupport {
        ElicitationSupport {
            form: true,
            url: true,
            on_complete: None,
        }
    }

    #[test]
    fn capabilities_name_exactly_the_editors_modes() {
        assert_eq!(ElicitationSupport::default().capabilities(), json!({}));
        let form = ElicitationSupport {
            form: true,
            ..Default::default()
        };
        assert_eq!(form.capabilities(), json!({"elicitation": {"form": {}}}));
        assert_eq!(
            both().capabilities(),
            json!({"elicitation": {"form": {}, "url": {}}})
        );
    }

    #[test]
    fn only_plain_web_urls_pass() {
        for good in [
            "https://example.com/auth?x=1",
            "http://127.0.0.1:8080/",
            "HTTPS://Example.COM",
            "https://[::1]:9/x",
        ] {
            assert_eq!(check_url(good), Ok(()), "{good}");
        }
        for bad in [
            "javascript:alert(1)",
            "file:///etc/passwd",
            "data:text/html,hi",
            "https://",
            "https://user:pw@evil.example/",
            "https://trusted.example@evil.example/",
            "https://exa mple.com/",
            "https://example.com/\r\nX: y",
            "https://exämple.com/",
            "https:\\\\evil.example",
            "https://evil.example\\@good.example/",
            "vscode://open?file=/etc",
        ] {
            let err = check_url(bad).unwrap_err();
            assert_eq!(err.kind(), ElicitErrorKind::Refused, "{bad}");
        }
        assert!(check_url(&format!("https://e.com/{}", "a".repeat(URL_CAP))).is_err());
    }

    #[test]
    fn form_schemas_are_rebuilt_from_the_restricted_subset() {
        let raw = json!({
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "type": "object",
            "additionalProperties": false,
            "properties": {
                "name": {"type": "string", "title": "Name\u{1b}[31m", "pattern": "(a+)+$",
                         "format": "hostname", "maxLength": 40},
                "mail": {"type": "string", "format": "email"},
                "size": {"type": "string", "enum": ["s", "m"], "enumNames": ["Small", "Medium"]},
                "age": {"type": "integer", "minimum": 0, "default": 30},
                "ok": {"type": "boolean", "default": true},
                "tags": {"type": "array", "items": {"type": "string", "enum": ["a", "b"]}},
            },
            "required": ["name", "ghost"],
        });
        let schema = form_schema(&raw).unwrap();
        assert_eq!(
            schema,
            json!({
                "type": "object",
                "required": ["name"],
                "properties": {
                    "name": {"type": "string", "title": "Name[31m", "maxLength": 40},
                    "mail": {"type": "string", "format": "email"},
                    "size": {"type": "string", "oneOf": [{"const": "s", "title": "Small"},
                                                          {"const": "m", "title": "Medium"}]},
                    "age": {"type": "integer", "minimum": 0, "default": 30},
                    "ok": {"type": "boolean", "default": true},
                    "tags": {"type": "array", "items": {"type": "string", "enum": ["a", "b"]}},
                },
            })
        );
    }

    #[test]
    fn what_a_form_cannot_show_is_refused_with_the_reason() {
        let refused = |raw: Value| {
            let err = form_schema(&raw).unwrap_err();
            assert_eq!(err.kind(), ElicitErrorKind::Refused, "{err}");
            err.to_string()
        };
        assert!(refused(json!({"type": "object", "properties": {
            "inner": {"type": "object", "properties": {}}}}))
        .contains("field `inner`: nested objects"));
        assert!(
            refused(json!({"type": "object", "properties": {"f": {"type": "file"}}}))
                .contains("`file`")
        );
        assert!(refused(json!({"type": "object"})).contains("properties"));
        assert!(refused(json!({"type": "string", "properties": {}})).contains("object"));
        let many: Map<String, Value> = (0..=MAX_FIELDS)
            .map(|i| (format!("f{i}"), json!({"type": "boolean"})))
            .collect();
        assert!(refused(json!({"type": "object", "properties": many})).contains("fields"));
        let options: Vec<String> = (0..=MAX_OPTIONS).map(|i| i.to_string()).collect();
        assert!(refused(json!({"type": "object", "properties": {
            "pick": {"type": "string", "enum": options}}}))
        .contains("choices"));
        let huge = "x".repeat(SCHEMA_CAP);
        assert!(
            refused(json!({"type": "object", "properties": {}, "title": huge})).contains("larger")
        );
        assert!(refused(json!({"type": "object", "properties": {
            "pick": {"type": "string", "enum": ["a\nb"]}}}))
        .contains("control"));
    }

    #[test]
    fn parse_reads_each_mode_and_refuses_modes_the_editor_lacks() {
        let form = parse(
            &json!({"message": "Hi\u{7}", "requestedSchema": {"type": "object", "properties": {}}}),
            &both(),
        )
        .unwrap();
        assert_eq!(
            form.elicitation,
            Elicitation::Form {
                message: "Hi".into(),
                schema: json!({"type": "object", "properties": {}})
            }
        );
        let url = parse(
            &json!({"mode": "url", "message": "Sign in", "url": "https://a.example/x",
                    "elicitationId": "e1"}),
            &both(),
        )
        .unwrap();
        assert_eq!(url.server_id.as_deref(), Some("e1"));
        let Elicitation::Url { id, .. } = &url.elicitation else {
            panic!("not a URL elicitation")
        };
        assert!(id.starts_with("mcp-") && id != "e1");
        let form_only = ElicitationSupport {
            form: true,
            ..Default::default()
        };
        let refused = parse(
            &json!({"mode": "url", "message": "m", "url": "https://a.example", "elicitationId": "e"}),
            &form_only,
        )
        .unwrap_err();
        assert_eq!(refused.code, -32602);
        assert!(refused.message.contains("does not take url"));
        let script = parse(
            &json!({"mode": "url", "message": "m", "url": "javascript:alert(1)", "elicitationId": "e"}),
            &both(),
        )
        .unwrap_err();
        assert!(script.message.contains("only http and https"), "{script:?}");
        assert!(parse(
            &json!({"message": "x".repeat(MESSAGE_CAP + 1),
                              "requestedSchema": {"properties": {}}}),
            &both()
        )
        .is_err());
        assert!(parse(&json!({"mode": "_other", "message": "m"}), &both())
            .unwrap_err()
            .message
            .contains("unknown"));
    }

    #[test]
    fn answers_keep_only_the_forms_fields_in_their_kinds() {
        let request = Elicitation::Form {
            message: "m".into(),
            schema: json!({"type": "object", "properties": {
                "name": {"type": "string"}, "n": {"type": "integer"},
                "tags": {"type": "array", "items": {"type": "string", "enum": ["a"]}}}}),
        };
        let content: Map<String, Value> = serde_json::from_value(json!({
            "name": "Ada", "n": 1.5, "tags": ["a"], "extra": "x"}))
        .unwrap();
        assert_eq!(
            result_for_server(&request, ElicitAnswer::Accept(content)).unwrap(),
            json!({"action": "accept", "content": {"name": "Ada", "tags": ["a"]}})
        );
        assert_eq!(
            result_for_server(&request, ElicitAnswer::Cancel).unwrap(),
            json!({"action": "cancel"})
        );
        let big: Map<String, Value> =
            serde_json::from_value(json!({"name": "x".repeat(ANSWER_CAP)})).unwrap();
        let err = result_for_server(&request, ElicitAnswer::Accept(big)).unwrap_err();
        assert_eq!(err.kind(), ElicitErrorKind::TooLarge);
        assert_eq!(
            err.to_string(),
            format!("the answer is larger than {ANSWER_CAP} bytes")
        );
    }
}

//! Validation of every message the agent writes against the official ACP
//! schema (`tests/data/acp-schema.json`), or against its unstable edition
//! (`tests/data/acp-schema.unstable.json`) for a client that advertised
//! an unstable part in `initialize`.
//!
//! The schema's envelopes (`AgentResponse`, `AgentNotification`,
//! `AgentRequest`) accept any payload through their extension branches, so
//! on their own they prove little. Each message is therefore checked twice:
//! the envelope as a whole, then the payload against the one definition whose
//! `x-method` names the method. Compiling a definition takes a noticeable
//! moment, so compiled validators are cached for the whole test process.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::sync::{Arc, Mutex, OnceLock};

use jsonschema::error::{TypeKind, ValidationErrorKind};
use jsonschema::{ValidationError, Validator};
use serde_json::{json, Map, Value};

/// The pinned schema, embedded so that tests do not depend on the working
/// directory.
const SCHEMA_TEXT: &str = include_str!("../../data/acp-schema.json");
const UNSTABLE_TEXT: &str = include_str!("../../data/acp-schema.unstable.json");

thread_local! {
    /// Whether this thread validates against the unstable edition.
    static UNSTABLE: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Runs `f` with the unstable edition of the schema (or the stable one).
pub fn with_edition<T>(unstable: bool, f: impl FnOnce() -> T) -> T {
    let before = UNSTABLE.with(|cell| cell.replace(unstable));
    let result = f();
    UNSTABLE.with(|cell| cell.set(before));
    result
}

/// At most this many lines of validation errors go into one report.
const MAX_REPORT_LINES: usize = 60;

struct Schema {
    defs: Map<String, Value>,
    /// `(method, "Request" | "Response" | "Notification")` → definition name.
    by_method: HashMap<(String, &'static str), String>,
    compiled: Mutex<HashMap<String, Arc<Validator>>>,
}

fn schema() -> &'static Schema {
    static STABLE: OnceLock<Schema> = OnceLock::new();
    static UNSTABLE_SCHEMA: OnceLock<Schema> = OnceLock::new();
    if UNSTABLE.with(std::cell::Cell::get) {
        UNSTABLE_SCHEMA.get_or_init(|| load(UNSTABLE_TEXT))
    } else {
        STABLE.get_or_init(|| load(SCHEMA_TEXT))
    }
}

fn load(text: &str) -> Schema {
    {
        let root: Value = serde_json::from_str(text).expect("a vendored ACP schema is not JSON");
        let defs = root
            .get("$defs")
            .and_then(Value::as_object)
            .cloned()
            .expect("a vendored ACP schema has no $defs");
        let mut by_method = HashMap::new();
        for (name, def) in &defs {
            let Some(method) = def.get("x-method").and_then(Value::as_str) else {
                continue;
            };
            for suffix in ["Request", "Response", "Notification"] {
                if name.ends_with(suffix) {
                    let previous = by_method.insert((method.to_string(), suffix), name.clone());
                    assert!(
                        previous.is_none(),
                        "schema has two {suffix} definitions for {method}: {name} and {previous:?}"
                    );
                }
            }
        }
        Schema {
            defs,
            by_method,
            compiled: Mutex::new(HashMap::new()),
        }
    }
}

/// The compiled validator for `$defs/<name>`, compiled on first use.
fn validator(name: &str) -> Arc<Validator> {
    let schema = schema();
    // A panic while compiling (in another test thread) poisons the lock; the
    // cache itself is still consistent, so keep using it.
    let mut compiled = schema
        .compiled
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    if let Some(found) = compiled.get(name) {
        return Arc::clone(found);
    }
    assert!(
        schema.defs.contains_key(name),
        "the ACP schema has no definition named {name}"
    );
    let wrapper = json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$ref": format!("#/$defs/{name}"),
        "$defs": schema.defs,
    });
    let built = jsonschema::draft202012::options()
        .build(&wrapper)
        .unwrap_or_else(|err| panic!("cannot compile $defs/{name} of the ACP schema: {err}"));
    let built = Arc::new(built);
    compiled.insert(name.to_string(), Arc::clone(&built));
    built
}

/// The name of the payload definition for `method` with the given suffix
/// (`Request`, `Response` or `Notification`), if the schema has one.
pub fn payload_definition(method: &str, suffix: &'static str) -> Option<&'static str> {
    schema()
        .by_method
        .get(&(method.to_string(), suffix))
        .map(String::as_str)
}

/// The `x-side` of a definition: `agent` if the agent handles that method,
/// `client` if the client does, `protocol` for the rest.
fn side_of(name: &str) -> Option<&'static str> {
    schema().defs.get(name)?.get("x-side")?.as_str()
}

/// Validates `instance` against `$defs/<name>`. `location` is the JSON
/// pointer of `instance` inside the whole message (empty for the message
/// itself), so that reported paths point into the message.
pub fn validate_against(name: &str, instance: &Value, location: &str) -> Result<(), String> {
    let validator = validator(name);
    let errors: Vec<ValidationError<'_>> = validator.iter_errors(instance).collect();
    if errors.is_empty() {
        return Ok(());
    }
    let shown = if location.is_empty() {
        "the message"
    } else {
        location
    };
    let mut report = format!("{shown} does not match $defs/{name}:\n");
    let mut lines = 0;
    for error in &errors {
        describe(error, location, 1, &mut report, &mut lines);
    }
    if lines > MAX_REPORT_LINES {
        let _ = writeln!(report, "  ... ({} more lines)", lines - MAX_REPORT_LINES);
    }
    Err(report)
}

/// Validates one message written by the agent on its stdout.
///
/// `request_method` is the method of the client request this message
/// answers, if it is a response and the caller knows it. Errors name the
/// definition that failed and every violation with its path in the message.
pub fn validate_agent_message(msg: &Value, request_method: Option<&str>) -> Result<(), String> {
    validate_inner(msg, request_method).map_err(|report| {
        format!(
            "invalid ACP message from the agent: {report}\nmessage: {}",
            truncate(&msg.to_string(), 4000)
        )
    })
}

fn validate_inner(msg: &Value, request_method: Option<&str>) -> Result<(), String> {
    let Some(object) = msg.as_object() else {
        return Err("a JSON-RPC message must be an object".to_string());
    };
    match object.get("jsonrpc") {
        Some(Value::String(version)) if version == "2.0" => {}
        Some(other) => return Err(format!("\"jsonrpc\" must be \"2.0\", found {other}")),
        None => return Err("\"jsonrpc\": \"2.0\" is missing".to_string()),
    }

    if let Some(method) = object.get("method") {
        let Some(method) = method.as_str() else {
            return Err(format!("\"method\" must be a string, found {method}"));
        };
        for key in ["result", "error"] {
            if object.contains_key(key) {
                return Err(format!(
                    "a request or notification must not carry \"{key}\""
                ));
            }
        }
        let params = object.get("params").unwrap_or(&Value::Null);
        // Specific parts first, for precise reports; then the envelope.
        if let Some(id) = object.get("id") {
            validate_against("RequestId", id, "/id")?;
            validate_payload(method, "Request", params)?;
            validate_against("AgentRequest", msg, "")
        } else {
            validate_payload(method, "Notification", params)?;
            validate_against("AgentNotification", msg, "")
        }
    } else if object.contains_key("id") {
        // `id: null` is allowed by RequestId, so a parse-error answer with a
        // null id goes through the same envelope as any other response.
        match (object.get("result"), object.get("error")) {
            (Some(_), Some(_)) => {
                return Err("a response must not carry both \"result\" and \"error\"".to_string())
            }
            (None, None) => return Err("a response needs \"result\" or \"error\"".to_string()),
            _ => {}
        }
        // The specific parts first, for precise reports; then the envelope,
        // which would otherwise report them as "no alternative matched".
        validate_against("RequestId", &object["id"], "/id")?;
        if let Some(error) = object.get("error") {
            validate_against("Error", error, "/error")?;
        } else if let Some(name) =
            request_method.and_then(|method| payload_definition(method, "Response"))
        {
            validate_against(name, &object["result"], "/result")?;
        }
        // Unknown or extension methods have no specific result definition:
        // the envelope is all there is to check.
        validate_against("AgentResponse", msg, "")
    } else {
        Err("a message needs \"method\" (request, notification) or \"id\" (response)".to_string())
    }
}

/// Validates the params of a request or notification the agent sent.
fn validate_payload(method: &str, suffix: &'static str, params: &Value) -> Result<(), String> {
    let kind = suffix.to_lowercase();
    let Some(name) = payload_definition(method, suffix) else {
        if method.starts_with('_') {
            // Extension methods are free-form by definition.
            return Ok(());
        }
        return Err(format!(
            "the agent sent a {kind} with method {method:?}, which the schema does not define \
             (and it is not an `_` extension method)"
        ));
    };
    if side_of(name) == Some("agent") {
        return Err(format!(
            "the agent sent a {kind} {method:?}, but that method is handled by the agent \
             ($defs/{name} has x-side \"agent\"): only the client may send it"
        ));
    }
    validate_against(name, params, "/params")
}

/// Appends one validation error to `report`. For an `anyOf`/`oneOf` it
/// either summarises what would have been accepted (a union of constants or
/// types) or shows the failures of the alternatives that were plausibly
/// meant.
fn describe(
    error: &ValidationError<'_>,
    location: &str,
    depth: usize,
    report: &mut String,
    lines: &mut usize,
) {
    let base = error.instance_path().as_str();
    let path = format!("{location}{base}");
    let path = if path.is_empty() { "(root)" } else { &path };
    let indent = "  ".repeat(depth);
    let schema_path = error.evaluation_path();
    let branches = match error.kind() {
        ValidationErrorKind::AnyOf { context } | ValidationErrorKind::OneOfNotValid { context } => {
            context
        }
        _ => {
            let text = truncate(&error.to_string(), 300);
            push_line(
                report,
                lines,
                format!("{indent}- at {path}: {text} (schema: {schema_path})"),
            );
            return;
        }
    };
    let instance = truncate(&error.instance().to_string(), 120);

    // A union of plain values: say what is allowed instead of listing each
    // alternative's failure.
    if let Some(allowed) = accepted_values(error, base) {
        push_line(
            report,
            lines,
            format!(
                "{indent}- at {path}: {instance} is not one of: {} (schema: {schema_path})",
                allowed.join(", ")
            ),
        );
        return;
    }

    push_line(
        report,
        lines,
        format!(
            "{indent}- at {path}: {} (schema: {schema_path})",
            truncate(&error.masked_with("value").to_string(), 300)
        ),
    );
    if depth >= 8 {
        return;
    }
    // A tagged union fails every branch whose tag differs; those failures
    // are noise. Keep the branches that did not fail on a `const`/`enum` of
    // a direct property (the tag), if any.
    let mut candidates: Vec<(usize, &Vec<ValidationError<'static>>)> = branches
        .iter()
        .enumerate()
        .filter(|(_, errors)| !errors.iter().any(|e| tag_mismatch(e, base).is_some()))
        .collect();
    if candidates.is_empty() {
        if let Some(line) = unknown_tag(branches, base, location) {
            push_line(report, lines, format!("{indent}  {line}"));
            return;
        }
        candidates = branches.iter().enumerate().collect();
    }
    candidates.sort_by_key(|(_, errors)| errors.len());
    const SHOWN: usize = 3;
    for (index, errors) in candidates.iter().take(SHOWN) {
        push_line(
            report,
            lines,
            format!("{indent}  alternative #{index} fails with:"),
        );
        for inner in errors.iter() {
            describe(inner, location, depth + 2, report, lines);
        }
    }
    if candidates.len() > SHOWN {
        push_line(
            report,
            lines,
            format!(
                "{indent}  ... and {} more failing alternatives",
                candidates.len() - SHOWN
            ),
        );
    }
}

/// If `error` (at instance path `base`) only says "not this constant / not
/// this type", possibly through nested unions, the accepted values.
fn accepted_values(error: &ValidationError<'_>, base: &str) -> Option<Vec<String>> {
    if error.instance_path().as_str() != base {
        return None;
    }
    let mut values = Vec::new();
    match error.kind() {
        ValidationErrorKind::Constant { expected_value } => values.push(expected_value.to_string()),
        ValidationErrorKind::Enum { options } => {
            values.extend(options.as_array()?.iter().map(Value::to_string));
        }
        ValidationErrorKind::Type { kind } => {
            let types: Vec<String> = match kind {
                TypeKind::Single(single) => vec![single.to_string()],
                TypeKind::Multiple(set) => set.iter().map(|t| t.to_string()).collect(),
            };
            values.extend(types.into_iter().map(
                |t| {
                    if t == "null" {
                        t
                    } else {
                        format!("any {t}")
                    }
                },
            ));
        }
        ValidationErrorKind::AnyOf { context } | ValidationErrorKind::OneOfNotValid { context } => {
            for branch in context {
                let mut constants = Vec::new();
                let mut types = Vec::new();
                for inner in branch {
                    let found = accepted_values(inner, base)?;
                    match inner.kind() {
                        ValidationErrorKind::Type { .. } => types.extend(found),
                        _ => constants.extend(found),
                    }
                }
                // "must be an integer" and "must be -32700" together mean
                // the constant.
                values.extend(if constants.is_empty() {
                    types
                } else {
                    constants
                });
            }
        }
        _ => return None,
    }
    let mut unique = Vec::new();
    for value in values {
        if !unique.contains(&value) {
            unique.push(value);
        }
    }
    Some(unique)
}

/// If `error` is a `const`/`enum` failure on a direct property of the
/// union's instance (at `base`), that property's path and what it expected.
fn tag_mismatch(error: &ValidationError<'_>, base: &str) -> Option<(String, Vec<String>)> {
    let rest = error.instance_path().as_str().strip_prefix(base)?;
    if rest.matches('/').count() != 1 {
        return None;
    }
    let expected = match error.kind() {
        ValidationErrorKind::Constant { expected_value } => vec![expected_value.to_string()],
        ValidationErrorKind::Enum { options } => {
            options.as_array()?.iter().map(Value::to_string).collect()
        }
        _ => return None,
    };
    Some((error.instance_path().to_string(), expected))
}

/// When every alternative of a union failed on the same tag property, one
/// line naming the tag, its value and the known tags.
fn unknown_tag(
    branches: &[Vec<ValidationError<'static>>],
    base: &str,
    location: &str,
) -> Option<String> {
    let mut tag_path = None;
    let mut actual = String::new();
    let mut known = Vec::new();
    for branch in branches {
        let error = branch.iter().find(|e| tag_mismatch(e, base).is_some())?;
        let (path, expected) = tag_mismatch(error, base)?;
        if tag_path.get_or_insert_with(|| path.clone()) != &path {
            return None;
        }
        actual = truncate(&error.instance().to_string(), 120);
        known.extend(expected);
    }
    Some(format!(
        "at {location}{}: {actual} is not one of the known tags: {}",
        tag_path?,
        known.join(", ")
    ))
}

fn push_line(report: &mut String, lines: &mut usize, line: String) {
    *lines += 1;
    if *lines <= MAX_REPORT_LINES {
        report.push_str(&line);
        report.push('\n');
    }
}

/// Shortens `text` to about `max` bytes, on a character boundary.
fn truncate(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_string();
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}… ({} bytes in all)", &text[..end], text.len())
}

//! A model's tool call made whole before it is judged: its tool's name
//! read as the one offered tool it can mean (a `functions.` or
//! `default_api:` prefix, another case, `-` for `_`), its arguments
//! read leniently (`lenient.rs`) when they are not strict JSON, a JSON
//! object sent as a string taken as the object, and a field given in the
//! other of the two shapes its schema allows for certain (an object for
//! a string: its JSON text; a string of JSON for an object or array: the
//! value). What cannot be read with certainty is refused with a message
//! that names the field, the place or the nearest tools. Pure functions.

use super::lenient::{self, MAX_REPAIR_BYTES};
use crate::conversation::ToolSpec;
use serde_json::{Map, Value};

/// A call as it will be judged and run, and what was repaired.
#[derive(Debug, PartialEq)]
pub struct Fixed {
    pub name: String,
    pub arguments: String,
    pub repairs: Vec<String>,
}

/// Makes a call whole. `Ok(None)`: nothing to repair (the call is kept
/// byte for byte). A name that is exactly a built-in is kept (whether it
/// is offered is judged when the call runs, with the reason).
pub fn fix_call(
    name: &str,
    arguments: &str,
    offered: &[ToolSpec],
) -> Result<Option<Fixed>, String> {
    let (tool, renamed) = resolve_name(name, offered)?;
    let mut repairs: Vec<String> = renamed.into_iter().collect();
    let spec = offered.iter().find(|t| t.name == tool);
    let builtin = super::NAMES.contains(&tool.as_str());
    let mut object = read_arguments(&tool, arguments, &mut repairs)?;
    if let Some(spec) = spec {
        fit_fields(&mut object, &spec.parameters, &mut repairs);
        if builtin {
            check_fields(&tool, &object, &spec.parameters)?;
        }
    }
    if repairs.is_empty() {
        return Ok(None);
    }
    Ok(Some(Fixed {
        name: tool,
        arguments: Value::Object(object).to_string(),
        repairs,
    }))
}

/// The offered tool a name means, and the repair said when it is not
/// the name itself.
pub fn resolve_name(name: &str, offered: &[ToolSpec]) -> Result<(String, Option<String>), String> {
    if offered.iter().any(|t| t.name == name) || super::NAMES.contains(&name) {
        return Ok((name.to_string(), None));
    }
    let wanted = normalise(name);
    let matches: Vec<&str> = offered
        .iter()
        .map(|t| t.name.as_str())
        .filter(|candidate| normalise(candidate) == wanted)
        .collect();
    let shown = short(name);
    match matches.as_slice() {
        [one] => Ok((
            one.to_string(),
            Some(format!("tool name {shown} read as {one}")),
        )),
        [] if offered.is_empty() => Err(format!(
            "there is no tool named {shown}, and no tools are offered"
        )),
        [] => {
            let near = nearest(&wanted, offered);
            Err(match near.is_empty() {
                false => format!(
                    "there is no tool named {shown}; the nearest offered tools are {}",
                    near.join(", ")
                ),
                true => {
                    let names: Vec<&str> = offered.iter().map(|t| t.name.as_str()).collect();
                    let more = names.len().saturating_sub(40);
                    let mut listed = names[..names.len().min(40)].join(", ");
                    if more > 0 {
                        listed.push_str(&format!(" and {more} more"));
                    }
                    format!("there is no tool named {shown}; the offered tools are {listed}")
                }
            })
        }
        many => Err(format!(
            "the tool name {shown} could mean {}; call one by its exact name",
            many.join(" or ")
        )),
    }
}

/// A name as written in any of the ways models write it.
fn normalise(name: &str) -> String {
    let mut name = name.trim();
    for prefix in ["functions.", "functions:", "default_api:", "default_api."] {
        if name.len() >= prefix.len()
            && name.is_char_boundary(prefix.len())
            && name[..prefix.len()].eq_ignore_ascii_case(prefix)
        {
            name = &name[prefix.len()..];
            break;
        }
    }
    name.chars()
        .take(128)
        .map(|c| match c {
            '-' | ' ' => '_',
            c => c.to_ascii_lowercase(),
        })
        .collect()
}

/// Up to three offered tools near a name (at most half its length of
/// edits away), nearest first, by edit distance of normalised names.
fn nearest(wanted: &str, offered: &[ToolSpec]) -> Vec<String> {
    let wanted: Vec<char> = wanted.chars().take(64).collect();
    let close = (wanted.len() / 2).max(2);
    let mut scored: Vec<(usize, &str)> = offered
        .iter()
        .map(|t| {
            let theirs: Vec<char> = normalise(&t.name).chars().take(64).collect();
            (distance(&wanted, &theirs), t.name.as_str())
        })
        .collect();
    scored.sort();
    scored
        .into_iter()
        .filter(|(d, _)| *d <= close)
        .take(3)
        .map(|(_, n)| n.to_string())
        .collect()
}

fn distance(a: &[char], b: &[char]) -> usize {
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.iter().enumerate() {
        let mut diagonal = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let above = row[j + 1];
            row[j + 1] = (diagonal + usize::from(ca != cb))
                .min(above + 1)
                .min(row[j] + 1);
            diagonal = above;
        }
    }
    row[b.len()]
}

fn short(text: &str) -> String {
    let cut: String = text.chars().take(64).collect();
    match cut.len() < text.len() {
        true => format!("{cut:?}…"),
        false => format!("{cut:?}"),
    }
}

/// The arguments as an object, read leniently when they must be.
fn read_arguments(
    tool: &str,
    arguments: &str,
    repairs: &mut Vec<String>,
) -> Result<Map<String, Value>, String> {
    if arguments.trim().is_empty() {
        return Ok(Map::new());
    }
    let value = match serde_json::from_str::<Value>(arguments) {
        Ok(value) => value,
        Err(strict) if arguments.len() > MAX_REPAIR_BYTES => {
            return Err(format!(
                "the arguments of {tool} are not valid JSON ({strict}), and at {} bytes too large to repair; send one JSON object",
                arguments.len()
            ))
        }
        Err(_) => match lenient::parse(arguments) {
            Ok(read) => {
                repairs.extend(read.repairs.iter().map(|r| r.to_string()));
                read.value
            }
            Err(error) => {
                return Err(format!(
                    "the arguments of {tool} are not valid JSON: {error}; send one JSON object"
                ))
            }
        },
    };
    match value {
        Value::Object(object) => Ok(object),
        Value::String(text) => match object_in(&text) {
            Some((object, inner)) => {
                repairs.push("arguments sent as a JSON string".into());
                repairs.extend(inner.iter().map(|r| r.to_string()));
                Ok(object)
            }
            None => Err(format!(
                "the arguments of {tool} are a string, not a JSON object; send the fields as an object"
            )),
        },
        other => Err(format!(
            "the arguments of {tool} are {}, not a JSON object; send the fields as an object",
            crate::util::json_kind(&other)
        )),
    }
}

/// The object a string holds, strictly or leniently written.
fn object_in(text: &str) -> Option<(Map<String, Value>, Vec<&'static str>)> {
    let (value, repairs) = match serde_json::from_str::<Value>(text) {
        Ok(value) => (value, Vec::new()),
        Err(_) => {
            let read = lenient::parse(text).ok()?;
            (read.value, read.repairs)
        }
    };
    match value {
        Value::Object(object) => Some((object, repairs)),
        _ => None,
    }
}

/// The type a schema gives a field, when it is one plain type.
fn field_type<'s>(schema: &'s Value, field: &str) -> Option<&'s str> {
    schema.get("properties")?.get(field)?.get("type")?.as_str()
}

/// Fields given in the other shape where the schema leaves no doubt.
fn fit_fields(object: &mut Map<String, Value>, schema: &Value, repairs: &mut Vec<String>) {
    for (field, value) in object.iter_mut() {
        let Some(wanted) = field_type(schema, field) else {
            continue;
        };
        let has_enum = schema["properties"][field.as_str()].get("enum").is_some();
        let fitted = match (wanted, &*value) {
            ("string", Value::Object(_) | Value::Array(_)) if !has_enum => {
                Some(Value::String(value.to_string()))
            }
            ("object" | "array", Value::String(text)) => {
                match serde_json::from_str::<Value>(text) {
                    Ok(inner @ Value::Object(_)) if wanted == "object" => Some(inner),
                    Ok(inner @ Value::Array(_)) if wanted == "array" => Some(inner),
                    _ => None,
                }
            }
            _ => None,
        };
        if let Some(fitted) = fitted {
            repairs.push(format!(
                "`{field}` was {}, read as {}",
                crate::util::json_kind(value),
                crate::util::json_kind(&fitted)
            ));
            *value = fitted;
        }
    }
}

/// A required field missing, or a field of another type than its
/// schema's, named with the type it needs.
fn check_fields(tool: &str, object: &Map<String, Value>, schema: &Value) -> Result<(), String> {
    let required = schema.get("required").and_then(Value::as_array);
    for field in required.into_iter().flatten().filter_map(Value::as_str) {
        if object.get(field).is_none_or(Value::is_null) {
            let wanted = field_type(schema, field).map(a_type).unwrap_or("a value");
            return Err(format!("{tool} needs the field `{field}` ({wanted})"));
        }
    }
    for (field, value) in object {
        let Some(wanted) = field_type(schema, field) else {
            continue;
        };
        let fits = match wanted {
            "string" => value.is_string(),
            "integer" => value.is_i64() || value.is_u64(),
            "number" => value.is_number(),
            "boolean" => value.is_boolean(),
            "object" => value.is_object(),
            "array" => value.is_array(),
            _ => true,
        };
        if !fits && !value.is_null() {
            return Err(format!(
                "the field `{field}` of {tool} must be {}, not {}",
                a_type(wanted),
                crate::util::json_kind(value)
            ));
        }
    }
    Ok(())
}

fn a_type(wanted: &str) -> &'static str {
    match wanted {
        "string" => "a string",
        "integer" => "an integer",
        "number" => "a number",
        "boolean" => "true or false",
        "object" => "an object",
        "array" => "an array",
        _ => "a value",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn tools() -> Vec<ToolSpec> {
        crate::tools::specs(false, 1000)
    }

    fn spec(name: &str) -> ToolSpec {
        ToolSpec {
            name: name.into(),
            description: String::new(),
            parameters: json!({"type": "object"}),
        }
    }

    fn fixed(name: &str, arguments: &str) -> Fixed {
        fix_call(name, arguments, &tools())
            .unwrap_or_else(|e| panic!("{e}"))
            .expect("a repair")
    }

    #[test]
    fn a_whole_call_is_kept_as_it_is() {
        assert_eq!(
            fix_call("read_file", r#"{"path": "a"}"#, &tools()),
            Ok(None)
        );
        assert_eq!(fix_call("list_directory", "", &tools()).unwrap(), None);
    }

    #[test]
    fn names_are_read_as_the_one_offered_tool_they_mean() {
        for name in [
            "Read_File",
            "read-file",
            "functions.read_file",
            "default_api:READ-FILE",
        ] {
            let call = fixed(name, r#"{"path": "a"}"#);
            assert_eq!(call.name, "read_file");
            assert_eq!(
                call.repairs,
                [format!("tool name {name:?} read as read_file")]
            );
        }
    }

    #[test]
    fn two_plausible_targets_or_none_are_refused() {
        let offered = [spec("read_file"), spec("Read-File"), spec("grep")];
        let error = resolve_name("READ_FILE", &offered).unwrap_err();
        assert!(
            error.contains("could mean read_file or Read-File"),
            "{error}"
        );
        let error = resolve_name("reed_file", &tools()).unwrap_err();
        assert!(
            error.starts_with(
                "there is no tool named \"reed_file\"; the nearest offered tools are read_file"
            ),
            "{error}"
        );
        assert!(resolve_name("anything", &[])
            .unwrap_err()
            .contains("no tools are offered"));
        let error = resolve_name("fly", &tools()).unwrap_err();
        assert!(
            error.starts_with("there is no tool named \"fly\"; the offered tools are read_file, "),
            "{error}"
        );
    }

    #[test]
    fn a_tool_not_offered_is_never_reached_by_another_spelling() {
        let plan: Vec<ToolSpec> = tools()
            .into_iter()
            .filter(|t| crate::tools::READ_ONLY.contains(&t.name.as_str()))
            .collect();
        assert!(resolve_name("Edit_File", &plan).is_err());
        // The exact name goes on, to be refused with its reason.
        assert_eq!(
            resolve_name("edit_file", &plan).unwrap(),
            ("edit_file".into(), None)
        );
    }

    #[test]
    fn almost_json_arguments_are_repaired_and_named() {
        let call = fixed("read_file", r#"{"path": "a.rs",}"#);
        assert_eq!(call.arguments, r#"{"path":"a.rs"}"#);
        assert_eq!(call.repairs, ["trailing comma"]);
        let call = fixed("search", "{'pattern': 'x', 'regex': True}");
        assert_eq!(
            serde_json::from_str::<Value>(&call.arguments).unwrap(),
            json!({"pattern": "x", "regex": true})
        );
        assert_eq!(call.repairs, ["single quotes", "Python literal"]);
        let call = fixed(
            "write_file",
            "```json\n{\"path\": \"a\", \"content\": \"x\ny\"}\n```",
        );
        assert_eq!(
            call.repairs,
            ["code fence", "unescaped newline in a string"]
        );
    }

    #[test]
    fn an_object_sent_as_a_string_is_taken_as_the_object() {
        let call = fixed("read_file", r#""{\"path\": \"a\"}""#);
        assert_eq!(call.arguments, r#"{"path":"a"}"#);
        assert_eq!(call.repairs, ["arguments sent as a JSON string"]);
        let error = fix_call("read_file", r#""a.rs""#, &tools()).unwrap_err();
        assert!(error.contains("are a string, not a JSON object"), "{error}");
        let error = fix_call("read_file", "[1]", &tools()).unwrap_err();
        assert!(error.contains("are an array"), "{error}");
    }

    #[test]
    fn a_field_in_the_other_shape_is_fitted_to_its_schema() {
        let call = fixed("write_file", r#"{"path": "a.json", "content": {"k": [1]}}"#);
        let args: Value = serde_json::from_str(&call.arguments).unwrap();
        assert_eq!(args["content"], json!(r#"{"k":[1]}"#));
        assert_eq!(call.repairs, ["`content` was an object, read as a string"]);
        let call = fixed(
            "todo_write",
            r#"{"todos": "[{\"content\": \"x\", \"status\": \"pending\"}]"}"#,
        );
        let args: Value = serde_json::from_str(&call.arguments).unwrap();
        assert!(args["todos"].is_array());
        // A string that is not JSON of the wanted shape stays, and is refused.
        let error = fix_call("todo_write", r#"{"todos": "do x"}"#, &tools()).unwrap_err();
        assert_eq!(
            error,
            "the field `todos` of todo_write must be an array, not a string"
        );
    }

    #[test]
    fn missing_and_mistyped_fields_are_named_with_their_type() {
        let error = fix_call("read_file", r#"{"start_line": 1}"#, &tools()).unwrap_err();
        assert_eq!(error, "read_file needs the field `path` (a string)");
        let error = fix_call(
            "read_file",
            r#"{"path": "a", "line_count": "ten"}"#,
            &tools(),
        )
        .unwrap_err();
        assert_eq!(
            error,
            "the field `line_count` of read_file must be an integer, not a string"
        );
    }

    #[test]
    fn a_missing_field_is_refused_only_where_the_tool_would_refuse_it() {
        // Every built-in's required field, left out, is one its parser
        // refuses too: the check says it better, and refuses no more.
        for spec in tools() {
            let required: Vec<&str> = spec.parameters["required"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .collect();
            for left_out in &required {
                let mut object = Map::new();
                for field in required.iter().filter(|f| *f != left_out) {
                    let value = match field_type(&spec.parameters, field) {
                        Some("array") => json!([]),
                        Some("object") => json!({}),
                        Some("integer" | "number") => json!(1),
                        Some("boolean") => json!(true),
                        _ => json!("x"),
                    };
                    object.insert(field.to_string(), value);
                }
                let arguments = Value::Object(object).to_string();
                assert!(fix_call(&spec.name, &arguments, &tools()).is_err());
                assert!(
                    crate::tools::parse(&spec.name, &arguments).is_err(),
                    "{} takes {arguments} without {left_out}",
                    spec.name
                );
            }
        }
    }

    #[test]
    fn a_real_syntax_error_is_refused_with_its_place() {
        let error = fix_call("read_file", "{\"path\": \"a\" \"limit\": 3}", &tools()).unwrap_err();
        assert_eq!(
            error,
            "the arguments of read_file are not valid JSON: expected `,` or `}` at line 1, column 14; send one JSON object"
        );
    }

    #[test]
    fn huge_or_deep_arguments_get_a_bounded_answer() {
        let huge = format!("{{\"path\": \"{}\",}}", "x".repeat(10 << 20));
        let error = fix_call("read_file", &huge, &tools()).unwrap_err();
        assert!(error.contains("too large to repair"), "{error}");
        let deep = format!("{{\"path\": {}", "[".repeat(100_000));
        let error = fix_call("read_file", &deep, &tools()).unwrap_err();
        assert!(error.contains("nesting deeper than"), "{error}");
        let strict_deep = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
        assert!(fix_call("read_file", &strict_deep, &tools()).is_err());
        let long_name = "x".repeat(1 << 20);
        assert!(resolve_name(&long_name, &tools()).unwrap_err().len() < 400);
    }
}

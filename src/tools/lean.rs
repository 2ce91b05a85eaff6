//! The lean profile's tools: the core ones only (and `exit_plan`, which
//! plan mode needs), with short descriptions and no words on their
//! parameters, for models whose context window is small.

use crate::conversation::ToolSpec;
use serde_json::Value;

/// The tools a lean session offers (and `exit_plan` in plan mode).
#[cfg(test)]
pub(crate) const CORE: [&str; 8] = [
    "read_file",
    "edit_file",
    "write_file",
    "list_directory",
    "glob",
    "search",
    "run_command",
    "todo_write",
];

/// The short description of a tool the lean profile offers.
fn description(name: &str, ripgrep: bool) -> Option<&'static str> {
    Some(match name {
        "read_file" => "Read a text file as numbered lines (number and tab are not part of the file). At most 2000 lines a call; start_line (1-based) and line_count page.",
        "edit_file" => "Replace exact text in a file, edits in order, all or nothing. Each old must match exactly once (unless replace_all), copied without read_file's line numbers.",
        "write_file" => "Create a file or replace all of it. Prefer edit_file for small changes.",
        "list_directory" => "List a folder (default: the workspace).",
        "glob" => "Find files by name pattern (\"*.rs\", \"src/**/*.rs\"); at most 500.",
        "search" if ripgrep => "Find text in files: path:line: text, at most 200. Literal unless regex is true.",
        "search" => "Find literal text in files: path:line: text, at most 200.",
        "run_command" => "Run a shell command; returns its exit code and output. Timeout 120 s unless timeout_seconds (at most 1800). No interactive input.",
        "todo_write" => "Your task list, shown as a plan: send the whole list each time, one item in_progress.",
        "exit_plan" => "Ask the user to approve your plan and leave plan mode.",
        _ => return None,
    })
}

/// The lean profile's tools out of the full `specs`: the core ones and
/// `exit_plan`, in their order, each with its short description and its
/// schema without descriptions (its types and required fields kept).
pub(crate) fn narrow(specs: Vec<ToolSpec>, ripgrep: bool) -> Vec<ToolSpec> {
    specs
        .into_iter()
        .filter_map(|mut spec| {
            spec.description = description(&spec.name, ripgrep)?.to_string();
            strip(&mut spec.parameters);
            Some(spec)
        })
        .collect()
}

/// Removes the descriptions of a schema and of the schemas inside it
/// (a property named "description" is a schema, kept).
fn strip(schema: &mut Value) {
    let Some(object) = schema.as_object_mut() else {
        return;
    };
    if object.get("description").is_some_and(Value::is_string) {
        object.remove("description");
    }
    if let Some(Value::Object(properties)) = object.get_mut("properties") {
        properties.values_mut().for_each(strip);
    }
    if let Some(items) = object.get_mut("items") {
        strip(items);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lean_tools_are_the_core_and_exit_plan_with_their_schemas_kept() {
        let full = super::super::specs(true, super::super::COMMAND_OUTPUT_CAP);
        let lean = narrow(full.clone(), true);
        let names: Vec<&str> = lean.iter().map(|tool| tool.name.as_str()).collect();
        let mut expected: Vec<&str> = CORE.to_vec();
        expected.push("exit_plan");
        expected.sort();
        let mut sorted = names.clone();
        sorted.sort();
        assert_eq!(sorted, expected);
        for tool in &lean {
            let whole = full.iter().find(|t| t.name == tool.name).unwrap();
            assert!(tool.description.len() < whole.description.len().max(200));
            assert!(!tool.parameters.to_string().contains("\"description\":\""));
            assert_eq!(tool.parameters["required"], whole.parameters["required"]);
            assert_eq!(
                tool.parameters["properties"]
                    .as_object()
                    .unwrap()
                    .keys()
                    .collect::<Vec<_>>(),
                whole.parameters["properties"]
                    .as_object()
                    .unwrap()
                    .keys()
                    .collect::<Vec<_>>()
            );
        }
        // A property named "description" stays: it is a parameter.
        let mut task = serde_json::json!({"type": "object", "description": "x", "properties": {
            "description": {"type": "string", "description": "A few words."}}});
        strip(&mut task);
        assert_eq!(
            task,
            serde_json::json!({"type": "object", "properties": {
            "description": {"type": "string"}}})
        );
    }
}

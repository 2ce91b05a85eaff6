//! A permission rule as written, in its one format (`tool`, `command`,
//! `path`, `server`, `name`, `decision`, with `match` and `action` as
//! other names): reading it with errors that name the field, checking it,
//! and naming it for the permission dialog.

use super::command::pattern_words;
use serde::{Deserialize, Serialize};

/// What a rule decides. Ordered from the most to the least permissive.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Decision {
    Allow,
    Ask,
    Deny,
}

/// Which tool calls a rule is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolClass {
    /// `run_command`.
    RunCommand,
    /// `write_file`, `edit_file`, `apply_patch`, `delete_file`, `move_file`.
    Edit,
    /// `read_file`, `list_directory`, `glob`, `search`.
    Read,
    /// Tools of MCP servers.
    Mcp,
    /// Every tool call.
    Any,
}

impl ToolClass {
    /// The class of a built-in tool, by its name (`None` for tools no rule
    /// is about, such as `todo_write`, and for unknown names; MCP tools are
    /// known by where they come from, not by name).
    pub fn of_tool(name: &str) -> Option<ToolClass> {
        match name {
            "run_command" => Some(ToolClass::RunCommand),
            "write_file" | "edit_file" | "apply_patch" | "delete_file" | "move_file" => {
                Some(ToolClass::Edit)
            }
            "read_file" | "list_directory" | "glob" | "search" => Some(ToolClass::Read),
            _ => None,
        }
    }

    fn name(self) -> &'static str {
        match self {
            ToolClass::RunCommand => "run_command",
            ToolClass::Edit => "edit",
            ToolClass::Read => "read",
            ToolClass::Mcp => "mcp",
            ToolClass::Any => "any",
        }
    }
}

/// One rule, as written in `permissions.rules` or an agent file's
/// `permissions` (read by `Rule::from_json`, which also takes the other
/// names of its fields; written with these names).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
pub struct Rule {
    pub tool: ToolClass,
    /// `run_command`: the command's pattern of words (`*` a wildcard).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    /// `edit`, `read`: a glob; relative to the workspace root unless it
    /// starts with `/`. Absent: every path.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// `mcp`: the server's name as configured, or `*`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub server: Option<String>,
    /// `mcp`: the tool's name on its server, or `*`. Absent: every tool.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    pub decision: Decision,
}

/// A rule's fields, as written.
const FIELDS: &[&str] = &["tool", "command", "path", "server", "name", "decision"];

/// Other names of fields: `action` is `decision`; `match` is the field
/// that says what the tool call is about (`command`, `path`, `name`).
const ACTION: &str = "action";
const MATCH: &str = "match";

/// What is wrong with a rule as written: the field at fault (spelled as
/// the rule spells it), when one is, and the problem.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuleProblem {
    pub field: Option<String>,
    pub problem: String,
}

impl RuleProblem {
    fn at(field: &str, problem: impl Into<String>) -> RuleProblem {
        RuleProblem {
            field: Some(field.to_string()),
            problem: problem.into(),
        }
    }
}

impl std::fmt::Display for RuleProblem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.field {
            Some(field) => write!(f, "\"{field}\": {}", self.problem),
            None => f.write_str(&self.problem),
        }
    }
}

fn describe_value(value: &serde_json::Value) -> String {
    match value {
        serde_json::Value::String(text) => format!("{text:?}"),
        serde_json::Value::Null => "null".into(),
        serde_json::Value::Bool(_) => "a boolean".into(),
        serde_json::Value::Number(_) => "a number".into(),
        serde_json::Value::Array(_) => "an array".into(),
        serde_json::Value::Object(_) => "an object".into(),
    }
}

impl Rule {
    /// Reads a rule in its one format: `tool`; then `command`
    /// (`run_command`), `path` (`edit`, `read`) or `server` and `name`
    /// (`mcp`); and `decision`. `action` is another name for `decision`,
    /// and `match` for whichever of `command`, `path` or `name` the tool
    /// takes. A field given under both names, a field no rule has, or a
    /// value of the wrong kind is an error naming the field. The shape
    /// only: `check` judges the rule.
    pub fn from_json(value: &serde_json::Value) -> Result<Rule, RuleProblem> {
        use serde_json::Value;
        let Some(object) = value.as_object() else {
            return Err(RuleProblem {
                field: None,
                problem: format!("a rule is a JSON object, not {}", describe_value(value)),
            });
        };
        if let Some(unknown) = object
            .keys()
            .find(|key| !FIELDS.contains(&key.as_str()) && *key != ACTION && *key != MATCH)
        {
            return Err(RuleProblem::at(
                unknown,
                "is not a field of a rule; they are tool, command, path, server, name \
                 and decision (match and action are other names)",
            ));
        }
        let tool = match object.get("tool") {
            None | Some(Value::Null) => {
                return Err(RuleProblem::at(
                    "tool",
                    "is required: run_command, edit, read, mcp or any",
                ))
            }
            Some(value) => match value.as_str() {
                Some("run_command") => ToolClass::RunCommand,
                Some("edit") => ToolClass::Edit,
                Some("read") => ToolClass::Read,
                Some("mcp") => ToolClass::Mcp,
                Some("any") => ToolClass::Any,
                _ => {
                    return Err(RuleProblem::at(
                        "tool",
                        format!(
                            "takes run_command, edit, read, mcp or any, not {}",
                            describe_value(value)
                        ),
                    ))
                }
            },
        };
        let both = |one: &str, other: &str| {
            RuleProblem::at(
                one,
                format!("is another name for \"{other}\"; give one of them"),
            )
        };
        let decision_field = match (object.contains_key(ACTION), object.contains_key("decision")) {
            (true, true) => return Err(both(ACTION, "decision")),
            (true, false) => ACTION,
            _ => "decision",
        };
        let decision = match object.get(decision_field) {
            None | Some(Value::Null) => {
                return Err(RuleProblem::at(
                    decision_field,
                    "is required: allow, ask or deny",
                ))
            }
            Some(value) => match value.as_str() {
                Some("allow") => Decision::Allow,
                Some("ask") => Decision::Ask,
                Some("deny") => Decision::Deny,
                _ => {
                    return Err(RuleProblem::at(
                        decision_field,
                        format!("takes allow, ask or deny, not {}", describe_value(value)),
                    ))
                }
            },
        };
        let text = |field: &str| -> Result<Option<String>, RuleProblem> {
            match object.get(field) {
                None | Some(Value::Null) => Ok(None),
                Some(Value::String(text)) => Ok(Some(text.clone())),
                Some(other) => Err(RuleProblem::at(
                    field,
                    format!("must be a string, not {}", describe_value(other)),
                )),
            }
        };
        let mut rule = Rule {
            tool,
            command: text("command")?,
            path: text("path")?,
            server: text("server")?,
            name: text("name")?,
            decision,
        };
        if let Some(pattern) = text(MATCH)? {
            let slot = match tool {
                ToolClass::RunCommand => ("command", &mut rule.command),
                ToolClass::Edit | ToolClass::Read => ("path", &mut rule.path),
                ToolClass::Mcp => ("name", &mut rule.name),
                ToolClass::Any => {
                    return Err(RuleProblem::at(
                        MATCH,
                        "is for run_command, edit, read and mcp rules, not any",
                    ))
                }
            };
            if slot.1.is_some() {
                return Err(both(MATCH, slot.0));
            }
            *slot.1 = Some(pattern);
        }
        Ok(rule)
    }
}

impl<'de> Deserialize<'de> for Rule {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Rule, D::Error> {
        let value = serde_json::Value::deserialize(deserializer)?;
        Rule::from_json(&value)
            .map_err(|problem| serde::de::Error::custom(format!("permission rule: {problem}")))
    }
}

impl Rule {
    /// A `run_command` rule for the command prefix `prefix`.
    pub fn command(prefix: impl Into<String>, decision: Decision) -> Rule {
        Rule {
            tool: ToolClass::RunCommand,
            command: Some(prefix.into()),
            path: None,
            server: None,
            name: None,
            decision,
        }
    }

    /// An `edit` or `read` rule for the glob `pattern`.
    pub fn path(tool: ToolClass, pattern: impl Into<String>, decision: Decision) -> Rule {
        Rule {
            tool,
            command: None,
            path: Some(pattern.into()),
            server: None,
            name: None,
            decision,
        }
    }

    /// Whether the rule is well formed; the message names what is wrong.
    pub fn check(&self) -> Result<(), String> {
        let tool = self.tool.name();
        let only = |field: &str, for_what: &str| {
            Err(format!(
                "\"{field}\" is only for {for_what} rules, not {tool}"
            ))
        };
        if self.command.is_some() && self.tool != ToolClass::RunCommand {
            return only("command", "run_command");
        }
        if self.path.is_some() && !matches!(self.tool, ToolClass::Edit | ToolClass::Read) {
            return only("path", "edit and read");
        }
        if self.server.is_some() && self.tool != ToolClass::Mcp {
            return only("server", "mcp");
        }
        if self.name.is_some() && self.tool != ToolClass::Mcp {
            return only("name", "mcp");
        }
        match self.tool {
            ToolClass::RunCommand => {
                let Some(command) = &self.command else {
                    return Err("a run_command rule needs \"command\"".into());
                };
                pattern_words(command).map_err(|reason| {
                    format!(
                        "\"command\" {command:?} is not a plain command pattern such as \
                         \"cargo test\" or \"touch build-*\": {reason}"
                    )
                })?;
            }
            ToolClass::Edit | ToolClass::Read => {
                if let Some(pattern) = &self.path {
                    check_pattern(pattern)?;
                }
            }
            ToolClass::Mcp => {
                let Some(server) = &self.server else {
                    return Err("an mcp rule needs \"server\" (\"*\" means every server)".into());
                };
                if server.is_empty() {
                    return Err("\"server\" is empty".into());
                }
                if self.name.as_deref() == Some("") {
                    return Err("\"name\" is empty".into());
                }
            }
            ToolClass::Any => {}
        }
        Ok(())
    }
}

fn check_pattern(pattern: &str) -> Result<(), String> {
    if pattern.is_empty() {
        return Err("\"path\" is empty".into());
    }
    if pattern.starts_with('~') {
        return Err(format!(
            "\"path\" {pattern:?} starts with \"~\"; write the absolute path"
        ));
    }
    if pattern.split('/').any(|part| part == "..") {
        return Err(format!("\"path\" {pattern:?} may not contain \"..\""));
    }
    if pattern.len() > 1 && pattern.ends_with('/') {
        return Err(format!(
            "\"path\" {pattern:?} ends with \"/\"; write \"{pattern}**\" for everything inside"
        ));
    }
    Ok(())
}

/// Checks every rule of `permissions.rules`; the error names the first bad
/// one: `permissions.rules[2]: a run_command rule needs "command"`.
pub(crate) fn validate_rules(rules: &[Rule]) -> Result<(), String> {
    for (index, rule) in rules.iter().enumerate() {
        rule.check()
            .map_err(|problem| format!("permissions.rules[{index}]: {problem}"))?;
    }
    Ok(())
}

/// Reads and checks the value of `permissions.rules` (an array), with
/// errors that name the rule: `permissions.rules[1]: unknown field …`.
pub(crate) fn parse_rules(value: &serde_json::Value) -> Result<Vec<Rule>, String> {
    let Some(items) = value.as_array() else {
        return Err("permissions.rules: expected an array of rules".into());
    };
    let mut rules = Vec::with_capacity(items.len());
    for (index, item) in items.iter().enumerate() {
        let rule = Rule::from_json(item)
            .map_err(|problem| format!("permissions.rules[{index}]: {problem}"))?;
        rule.check()
            .map_err(|problem| format!("permissions.rules[{index}]: {problem}"))?;
        rules.push(rule);
    }
    Ok(rules)
}

/// How a rule is named in the permission dialog and in messages:
/// "`cargo test …`", "edits in src/**".
pub(crate) fn describe(rule: &Rule) -> String {
    match rule.tool {
        ToolClass::RunCommand => match &rule.command {
            Some(command) => format!("`{} …`", command.trim()),
            None => "every command".into(),
        },
        // Patterns stand in backticks: a client that renders Markdown
        // would take a bare `**` for emphasis and show nothing.
        ToolClass::Edit => match rule.path.as_deref() {
            None | Some("**") => "every edit".into(),
            Some(pattern) => format!("edits in `{pattern}`"),
        },
        ToolClass::Read => match rule.path.as_deref() {
            None | Some("**") => "every read".into(),
            Some(pattern) => format!("reads in `{pattern}`"),
        },
        ToolClass::Mcp => {
            let server = match rule.server.as_deref() {
                None | Some("*") => "any MCP server".to_string(),
                Some(server) => format!("the MCP server `{server}`"),
            };
            match rule.name.as_deref() {
                None | Some("*") => format!("every tool of {server}"),
                Some(name) => format!("`{name}` of {server}"),
            }
        }
        ToolClass::Any => "every tool call".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn validation_errors_name_the_rule() {
        let error = |rules: serde_json::Value| parse_rules(&rules).unwrap_err();
        assert_eq!(
            error(json!([
                {"tool": "edit", "path": "src/**", "decision": "allow"},
                {"tool": "read", "decision": "ask"},
                {"tool": "run_command", "decision": "allow"}
            ])),
            "permissions.rules[2]: a run_command rule needs \"command\""
        );
        assert!(
            error(json!([{"tool": "edit", "path": "a", "decision": "allow", "x": 1}]))
                .starts_with("permissions.rules[0]: \"x\": is not a field of a rule")
        );
        assert_eq!(
            error(json!([{"tool": "write_file", "decision": "allow"}])),
            "permissions.rules[0]: \"tool\": takes run_command, edit, read, mcp or any, \
             not \"write_file\""
        );
        assert_eq!(
            error(json!([{"tool": "edit", "path": "a", "decision": "maybe"}])),
            "permissions.rules[0]: \"decision\": takes allow, ask or deny, not \"maybe\""
        );
        assert_eq!(
            error(json!([{"tool": "edit", "path": "a"}])),
            "permissions.rules[0]: \"decision\": is required: allow, ask or deny"
        );
        assert_eq!(
            error(json!({"tool": "edit"})),
            "permissions.rules: expected an array of rules"
        );
        let problem = |rule: serde_json::Value| {
            let rule: Rule = serde_json::from_value(rule).unwrap();
            validate_rules(&[rule]).unwrap_err()
        };
        assert_eq!(
            problem(
                json!({"tool": "run_command", "command": "ls", "path": "a", "decision": "allow"})
            ),
            "permissions.rules[0]: \"path\" is only for edit and read rules, not run_command"
        );
        assert_eq!(
            problem(json!({"tool": "edit", "command": "ls", "decision": "allow"})),
            "permissions.rules[0]: \"command\" is only for run_command rules, not edit"
        );
        assert_eq!(
            problem(json!({"tool": "read", "server": "gh", "decision": "deny"})),
            "permissions.rules[0]: \"server\" is only for mcp rules, not read"
        );
        assert_eq!(
            problem(json!({"tool": "any", "name": "x", "decision": "deny"})),
            "permissions.rules[0]: \"name\" is only for mcp rules, not any"
        );
        assert_eq!(
            problem(json!({"tool": "mcp", "name": "x", "decision": "deny"})),
            "permissions.rules[0]: an mcp rule needs \"server\" (\"*\" means every server)"
        );
        for (command, reason) in [
            ("cargo test; ls", "more than one command"),
            ("FOO=1 cargo", "sets variables"),
            ("ls > x", "redirection"),
            ("ls file?", "only `*` is a wildcard"),
            ("ls [ab]", "only `*` is a wildcard"),
            ("ls *[ab]", "only `*` is a wildcard"),
            ("echo $HOME", "expansion"),
            ("", "empty"),
        ] {
            let message =
                problem(json!({"tool": "run_command", "command": command, "decision": "deny"}));
            assert!(message.contains(reason), "{command:?}: {message}");
        }
        for (pattern, reason) in [
            ("", "empty"),
            ("~/.ssh/**", "absolute"),
            ("src/../..", "\"..\""),
            ("src/", "src/**"),
        ] {
            let message = problem(json!({"tool": "edit", "path": pattern, "decision": "allow"}));
            assert!(message.contains(reason), "{pattern:?}: {message}");
        }
        // Quoted words are fine in a pattern, and so is `*`.
        validate_rules(&[Rule::command("git commit -m 'wip *'", Decision::Allow)]).unwrap();
        validate_rules(&[Rule::command("touch build-* *", Decision::Deny)]).unwrap();
        validate_rules(&[Rule::command("ls '[ab]' 'x?'", Decision::Deny)]).unwrap();
    }

    #[test]
    fn one_format_with_other_names_for_two_fields() {
        let read = |value: serde_json::Value| Rule::from_json(&value);
        // `match` and `action`, as agent files write them, anywhere.
        for (written, rule) in [
            (
                json!({"tool": "run_command", "match": "cargo test", "action": "allow"}),
                Rule::command("cargo test", Decision::Allow),
            ),
            (
                json!({"tool": "run_command", "command": "rm", "action": "deny"}),
                Rule::command("rm", Decision::Deny),
            ),
            (
                json!({"tool": "edit", "match": "src/**", "decision": "ask"}),
                Rule::path(ToolClass::Edit, "src/**", Decision::Ask),
            ),
            (
                json!({"tool": "read", "match": "/etc/**", "action": "deny"}),
                Rule::path(ToolClass::Read, "/etc/**", Decision::Deny),
            ),
        ] {
            assert_eq!(read(written.clone()).unwrap(), rule, "{written}");
            // Through serde too (the config file's path), and written back
            // with the first names.
            let back: Rule = serde_json::from_value(written).unwrap();
            assert_eq!(back, rule);
        }
        let mcp =
            read(json!({"tool": "mcp", "server": "gh", "match": "x", "action": "ask"})).unwrap();
        assert_eq!(mcp.name.as_deref(), Some("x"));
        assert_eq!(
            serde_json::to_value(Rule::command("ls", Decision::Ask)).unwrap(),
            json!({"tool": "run_command", "command": "ls", "decision": "ask"})
        );
        // Null is an absent field, as before.
        assert_eq!(
            read(json!({"tool": "run_command", "command": "ls", "path": null, "decision": "ask"}))
                .unwrap(),
            Rule::command("ls", Decision::Ask)
        );

        let problem = |value: serde_json::Value| read(value).unwrap_err().to_string();
        for (written, expected) in [
            (
                json!({"tool": "run_command", "command": "rm", "decision": "deny", "action": "allow"}),
                "\"action\": is another name for \"decision\"; give one of them",
            ),
            (
                json!({"tool": "run_command", "command": "rm", "decision": "deny", "action": "deny"}),
                "\"action\": is another name for \"decision\"",
            ),
            (
                json!({"tool": "run_command", "command": "rm", "match": "ls", "decision": "deny"}),
                "\"match\": is another name for \"command\"; give one of them",
            ),
            (
                json!({"tool": "edit", "path": "a", "match": "b", "decision": "deny"}),
                "\"match\": is another name for \"path\"",
            ),
            (
                json!({"tool": "mcp", "server": "s", "name": "a", "match": "b", "decision": "deny"}),
                "\"match\": is another name for \"name\"",
            ),
            (
                json!({"tool": "any", "match": "x", "decision": "deny"}),
                "\"match\": is for run_command, edit, read and mcp rules, not any",
            ),
            (
                json!({"tool": "run_command", "match": 3, "decision": "deny"}),
                "\"match\": must be a string, not a number",
            ),
            (
                json!({"tool": "run_command", "command": ["rm"], "decision": "deny"}),
                "\"command\": must be a string, not an array",
            ),
            (
                json!({"tool": "run_command", "command": "rm", "action": "never"}),
                "\"action\": takes allow, ask or deny, not \"never\"",
            ),
            (
                json!({"tool": "run_command", "command": "rm", "action": true}),
                "\"action\": takes allow, ask or deny, not a boolean",
            ),
            (
                json!({"command": "rm", "decision": "deny"}),
                "\"tool\": is required",
            ),
            (
                json!({"tool": "run_command", "command": "rm", "decison": "deny"}),
                "\"decison\": is not a field of a rule",
            ),
            (
                json!(["run_command"]),
                "a rule is a JSON object, not an array",
            ),
        ] {
            let message = problem(written.clone());
            assert!(message.starts_with(expected), "{written}: {message}");
        }
        // Through serde, the message still names the field.
        let error = serde_json::from_value::<Rule>(
            json!({"tool": "edit", "path": "a", "decision": "allow", "action": "deny"}),
        )
        .unwrap_err()
        .to_string();
        assert!(error.contains("\"action\": is another name"), "{error}");
    }

    #[test]
    fn describes_rules() {
        let mcp = |server: &str, name: Option<&str>| Rule {
            tool: ToolClass::Mcp,
            command: None,
            path: None,
            server: Some(server.into()),
            name: name.map(str::to_string),
            decision: Decision::Ask,
        };
        assert_eq!(
            describe(&Rule::command("cargo test", Decision::Allow)),
            "`cargo test …`"
        );
        assert_eq!(
            describe(&Rule::path(ToolClass::Edit, "src/**", Decision::Allow)),
            "edits in `src/**`"
        );
        assert_eq!(
            describe(&Rule::path(ToolClass::Read, "/etc/**", Decision::Deny)),
            "reads in `/etc/**`"
        );
        assert_eq!(
            describe(&mcp("github", Some("create_issue"))),
            "`create_issue` of the MCP server `github`"
        );
        assert_eq!(describe(&mcp("*", None)), "every tool of any MCP server");
        // No pattern is left bare for Markdown to swallow.
        assert_eq!(
            describe(&Rule::path(ToolClass::Edit, "**", Decision::Allow)),
            "every edit"
        );
        for pattern in ["**/*.rs", "src/*"] {
            let shown = describe(&Rule::path(ToolClass::Edit, pattern, Decision::Allow));
            assert!(shown.contains(&format!("`{pattern}`")), "{shown}");
        }
    }

    #[test]
    fn tool_classes_of_the_built_in_tools() {
        assert_eq!(
            ToolClass::of_tool("run_command"),
            Some(ToolClass::RunCommand)
        );
        for name in [
            "write_file",
            "edit_file",
            "apply_patch",
            "delete_file",
            "move_file",
        ] {
            assert_eq!(ToolClass::of_tool(name), Some(ToolClass::Edit));
        }
        for name in ["read_file", "list_directory", "glob", "search"] {
            assert_eq!(ToolClass::of_tool(name), Some(ToolClass::Read));
        }
        assert_eq!(ToolClass::of_tool("todo_write"), None);
    }
}

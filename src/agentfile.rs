//! Agents as files: `spindle acp PATH` serves the agent that `PATH` (an
//! `agent.json`, or a folder holding one with an optional
//! `instructions.md` and `commands/*.md`) describes — its name,
//! instructions, model, preset, tool allow-list, MCP servers, permission
//! rules, rejection behaviour, step budget and limits.
//!
//! Every field is checked before any protocol output; a problem is one
//! line naming the file, the field (a JSON pointer) and what is wrong.
//! Unknown fields are errors.
//!
//! How the rest takes it: `Options::adopt` takes its model, preset,
//! on-reject and step budget where the command line gave none; the
//! dispatcher adds its instructions to the system prompt, its rules to the
//! user's layer, its MCP servers after the editor's (on a name used twice
//! the earlier wins), and its `commands/` after the built-ins, before the
//! user's own; the turn filters the offered tools by its allow-list,
//! refuses any other call in the runner, and ends a turn past its limits
//! with `max_tokens`. A reload reads it again; a broken one changes nothing.

use crate::config::OnReject;
#[cfg(test)]
use crate::policy::rules::Decision;
use crate::policy::rules::Rule;
use serde_json::{Map, Value};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The most bytes of an agent file and of its instructions.
const FILE_CAP: u64 = 1024 * 1024;

/// An agent, as its file describes it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct AgentSpec {
    pub name: String,
    pub description: Option<String>,
    pub instructions: Option<String>,
    pub model: Option<String>,
    pub preset: Option<String>,
    /// `lean` or `full`: what the model is told before the first word.
    pub profile: Option<crate::modes::Profile>,
    /// `None`: every tool. Built-in names, `mcp:SERVER`, `mcp:SERVER/TOOL`.
    pub tools: Option<Vec<String>>,
    pub mcp_servers: Vec<Value>,
    pub permissions: Vec<Rule>,
    pub on_reject: Option<OnReject>,
    pub max_steps: Option<usize>,
    pub limits: Limits,
    pub subagents: BTreeMap<String, AgentSpec>,
    /// The file it was read from, and the folder of its commands.
    pub path: PathBuf,
    pub commands_dir: Option<PathBuf>,
}

/// Per-turn limits: tripping either ends the turn with `max_tokens`.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Limits {
    pub tokens: Option<u64>,
    pub cost: Option<f64>,
}

/// A problem with an agent file: the file, the field and what is wrong,
/// as one message (`Display`). No caller branches on what kind of
/// problem it is: each shows it and stops.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct AgentFileError(String);

impl std::fmt::Display for AgentFileError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for AgentFileError {}

/// Fields a subagent has no use for.
const SUBAGENT_UNUSED: [&str; 8] = [
    "model",
    "preset",
    "profile",
    "mcpServers",
    "permissions",
    "onReject",
    "limits",
    "subagents",
];

/// The most subagents an agent names.
const SUBAGENTS_CAP: usize = 32;

const FIELDS: [&str; 14] = [
    "name",
    "description",
    "instructions",
    "model",
    "preset",
    "profile",
    "tools",
    "mcpServers",
    "permissions",
    "onReject",
    "maxSteps",
    "limits",
    "subagents",
    "$schema",
];

/// Reads the agent at `path`: a file, or a folder holding `agent.json`.
pub(crate) fn load(path: &Path) -> Result<AgentSpec, AgentFileError> {
    let (file, dir) = if path.is_dir() {
        (path.join("agent.json"), Some(path.to_path_buf()))
    } else {
        (path.to_path_buf(), None)
    };
    load_file(&file, dir.as_deref(), 0)
}

fn load_file(file: &Path, dir: Option<&Path>, depth: usize) -> Result<AgentSpec, AgentFileError> {
    let shown = file.display().to_string();
    let fail = |pointer: &str, problem: String| {
        AgentFileError(if pointer.is_empty() {
            format!("agent file {shown}: {problem}")
        } else {
            format!("agent file {shown}: {pointer}: {problem}")
        })
    };
    let text = read_capped(file).map_err(|problem| fail("", problem))?;
    let value: Value = serde_json::from_str(&text).map_err(|error| {
        fail(
            "",
            format!(
                "not valid JSON (line {}, column {}): {error}",
                error.line(),
                error.column()
            ),
        )
    })?;
    let base = file.parent().unwrap_or(Path::new("."));
    let mut spec = parse(&value, "", base, depth, None)
        .map_err(|(pointer, problem)| fail(&pointer, problem))?;
    spec.path = file.to_path_buf();
    if let Some(dir) = dir {
        if spec.instructions.is_none() {
            let extra = dir.join("instructions.md");
            if extra.is_file() {
                spec.instructions = Some(read_capped(&extra).map_err(|problem| {
                    AgentFileError(format!("agent file {}: {problem}", extra.display()))
                })?);
            }
        }
        let commands = dir.join("commands");
        if commands.is_dir() {
            spec.commands_dir = Some(commands);
        }
    }
    Ok(spec)
}

fn read_capped(file: &Path) -> Result<String, String> {
    let bytes =
        crate::tools::bounded::read_capped(file, FILE_CAP).map_err(|error| match error {
            crate::tools::bounded::ReadError::TooLarge(size) => {
                format!("the file is {size} bytes, over the limit of {FILE_CAP}")
            }
            crate::tools::bounded::ReadError::Missing => {
                "cannot be read: there is no such file".into()
            }
            crate::tools::bounded::ReadError::Directory => "cannot be read: it is a folder".into(),
            crate::tools::bounded::ReadError::NotRegular => {
                "cannot be read: not a regular file".into()
            }
            crate::tools::bounded::ReadError::Io(error) => format!("cannot be read: {error}"),
        })?;
    String::from_utf8(bytes).map_err(|_| "not UTF-8 text".to_string())
}

type Problem = (String, String);

/// An agent at JSON pointer `at`. An inline subagent (`key`: its key in
/// `subagents`) is named by its key: a `name` of its own may repeat it,
/// and one that differs is an error (which of the two would `task` use?).
fn parse(
    value: &Value,
    at: &str,
    base: &Path,
    depth: usize,
    key: Option<&str>,
) -> Result<AgentSpec, Problem> {
    let Some(object) = value.as_object() else {
        return Err((at.to_string(), "an agent is a JSON object".into()));
    };
    for key in object.keys() {
        if !FIELDS.contains(&key.as_str()) {
            return Err((
                format!("{at}/{}", escape(key)),
                format!("unknown field; the fields are {}", FIELDS[..12].join(", ")),
            ));
        }
    }
    // A subagent uses its instructions, tools and step budget; the rest
    // would silently do nothing, so it is refused.
    if depth > 0 {
        for field in SUBAGENT_UNUSED {
            if object.contains_key(field) {
                return Err((
                    format!("{at}/{field}"),
                    "is not used by a subagent (it runs on its parent's model, MCP servers, rules and limits); leave it out".into(),
                ));
            }
        }
    }
    let pointer = |field: &str| format!("{at}/{field}");
    let text = |field: &str, max: usize| -> Result<Option<String>, Problem> {
        match object.get(field) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) if s.trim().is_empty() => {
                Err((pointer(field), "must not be empty".into()))
            }
            Some(Value::String(s)) if s.chars().count() > max => {
                Err((pointer(field), format!("is over {max} characters")))
            }
            Some(Value::String(s)) => Ok(Some(s.clone())),
            Some(other) => Err((
                pointer(field),
                format!("must be a string, not {}", crate::util::json_kind(other)),
            )),
        }
    };
    let own = text("name", 64)?;
    let name = match (key, own) {
        (Some(key), Some(own)) if own != key => {
            return Err((
                pointer("name"),
                format!("{own:?} is not this subagent's key {key:?}; an inline subagent is named by its key, so leave \"name\" out"),
            ))
        }
        (Some(key), _) => {
            if key.trim().is_empty() || key.chars().count() > 64 {
                return Err((at.to_string(), "a subagent's name (its key) is 1 to 64 characters".into()));
            }
            key.to_string()
        }
        (None, Some(own)) => own,
        (None, None) => return Err((pointer("name"), "is required".to_string())),
    };
    if !name
        .chars()
        .all(|c| c.is_alphanumeric() || matches!(c, '-' | '_' | '.' | ' '))
    {
        return Err((
            if key.is_some() && !object.contains_key("name") {
                at.to_string()
            } else {
                pointer("name")
            },
            "use letters, digits, spaces, '-', '_' or '.'".into(),
        ));
    }
    let model = text("model", 200)?;
    if let Some(model) = &model {
        if !model.contains('/') || model.starts_with('/') || model.ends_with('/') {
            return Err((pointer("model"), format!("{model:?} is not provider/model")));
        }
    }
    let preset = text("preset", 20)?;
    if let Some(preset) = &preset {
        if crate::modes::Preset::parse(preset).is_none() {
            return Err((
                pointer("preset"),
                "takes light, balanced or delivery".into(),
            ));
        }
    }
    let profile = match text("profile", 20)? {
        None => None,
        Some(profile) => Some(
            crate::modes::Profile::parse(&profile)
                .ok_or_else(|| (pointer("profile"), "takes lean or full".to_string()))?,
        ),
    };
    let tools = match object.get("tools") {
        None | Some(Value::Null) => None,
        Some(Value::Array(items)) => {
            let mut tools = Vec::new();
            for (index, item) in items.iter().enumerate() {
                let here = format!("{at}/tools/{index}");
                let Some(name) = item.as_str() else {
                    return Err((here, "must be a tool name (a string)".into()));
                };
                check_tool(name).map_err(|problem| (here, problem))?;
                tools.push(name.to_string());
            }
            Some(tools)
        }
        Some(other) => {
            return Err((
                pointer("tools"),
                format!("must be an array, not {}", crate::util::json_kind(other)),
            ))
        }
    };
    let mcp_servers = match object.get("mcpServers") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(items)) => {
            for (index, item) in items.iter().enumerate() {
                let here = format!("{at}/mcpServers/{index}");
                match item.get("name") {
                    Some(Value::String(name)) if !name.is_empty() => {}
                    _ => return Err((format!("{here}/name"), "is required (a string)".into())),
                }
                if !item.get("command").is_some_and(Value::is_string)
                    && !item.get("url").is_some_and(Value::is_string)
                {
                    return Err((
                        here,
                        "needs \"command\" (stdio) or \"url\" (http, sse)".into(),
                    ));
                }
            }
            items.clone()
        }
        Some(other) => {
            return Err((
                pointer("mcpServers"),
                format!("must be an array, not {}", crate::util::json_kind(other)),
            ))
        }
    };
    let permissions = match object.get("permissions") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(items)) => {
            let mut rules = Vec::new();
            for (index, item) in items.iter().enumerate() {
                let here = format!("{at}/permissions/{index}");
                rules.push(rule(item).map_err(|(field, problem)| {
                    (
                        if field.is_empty() {
                            here.clone()
                        } else {
                            format!("{here}/{field}")
                        },
                        problem,
                    )
                })?);
            }
            rules
        }
        Some(other) => {
            return Err((
                pointer("permissions"),
                format!("must be an array, not {}", crate::util::json_kind(other)),
            ))
        }
    };
    let on_reject = match text("onReject", 20)?.as_deref() {
        None => None,
        Some("stop") => Some(OnReject::Stop),
        Some("continue") => Some(OnReject::Continue),
        Some(_) => return Err((pointer("onReject"), "takes stop or continue".into())),
    };
    let max_steps = match object.get("maxSteps") {
        None | Some(Value::Null) => None,
        Some(value) => match value.as_u64() {
            Some(n @ 1..=1000) => Some(n as usize),
            _ => {
                return Err((
                    pointer("maxSteps"),
                    "must be a whole number from 1 to 1000".into(),
                ))
            }
        },
    };
    let limits = match object.get("limits") {
        None | Some(Value::Null) => Limits::default(),
        Some(Value::Object(limits)) => parse_limits(limits, &pointer("limits"))?,
        Some(other) => {
            return Err((
                pointer("limits"),
                format!("must be an object, not {}", crate::util::json_kind(other)),
            ))
        }
    };
    let mut subagents = BTreeMap::new();
    match object.get("subagents") {
        None | Some(Value::Null) => {}
        Some(Value::Object(entries)) => {
            if entries.len() > SUBAGENTS_CAP {
                return Err((
                    pointer("subagents"),
                    format!("at most {SUBAGENTS_CAP} subagents"),
                ));
            }
            for (name, entry) in entries {
                let here = format!("{at}/subagents/{}", escape(name));
                let spec = match entry {
                    Value::String(file) => {
                        let path = base.join(file);
                        let (file, dir) = if path.is_dir() {
                            (path.join("agent.json"), Some(path.clone()))
                        } else {
                            (path, None)
                        };
                        load_file(&file, dir.as_deref(), depth + 1)
                            .map_err(|e| (here.clone(), e.to_string()))?
                    }
                    Value::Object(_) => {
                        let mut spec = parse(entry, &here, base, depth + 1, Some(name))?;
                        spec.path = PathBuf::new();
                        spec
                    }
                    other => {
                        return Err((
                            here,
                            format!(
                                "must be an agent file's path or an agent, not {}",
                                crate::util::json_kind(other)
                            ),
                        ))
                    }
                };
                subagents.insert(name.clone(), spec);
            }
        }
        Some(other) => {
            return Err((
                pointer("subagents"),
                format!("must be an object, not {}", crate::util::json_kind(other)),
            ))
        }
    }
    Ok(AgentSpec {
        name,
        description: text("description", 2_000)?,
        instructions: text("instructions", FILE_CAP as usize)?,
        model,
        preset,
        profile,
        tools,
        mcp_servers,
        permissions,
        on_reject,
        max_steps,
        limits,
        subagents,
        path: PathBuf::new(),
        commands_dir: None,
    })
}

fn parse_limits(limits: &Map<String, Value>, at: &str) -> Result<Limits, Problem> {
    let mut out = Limits::default();
    for (key, value) in limits {
        let here = format!("{at}/{}", escape(key));
        match key.as_str() {
            "tokens" => match value.as_u64() {
                Some(n) if n > 0 => out.tokens = Some(n),
                _ => return Err((here, "must be a positive whole number".into())),
            },
            "cost" => match value.as_f64() {
                Some(x) if x > 0.0 && x.is_finite() => out.cost = Some(x),
                _ => return Err((here, "must be a positive number".into())),
            },
            _ => return Err((here, "unknown field; the fields are tokens, cost".into())),
        }
    }
    Ok(out)
}

/// A permission rule, in the one format the config also reads
/// (`Rule::from_json`: `match` and `action` are other names of fields),
/// checked as the config checks its rules.
fn rule(item: &Value) -> Result<Rule, Problem> {
    let rule = Rule::from_json(item).map_err(|problem| {
        (
            problem.field.as_deref().map(escape).unwrap_or_default(),
            problem.problem,
        )
    })?;
    rule.check().map_err(|problem| (String::new(), problem))?;
    Ok(rule)
}

fn check_tool(name: &str) -> Result<(), String> {
    if let Some(rest) = name.strip_prefix("mcp:") {
        let (server, tool) = rest.split_once('/').unwrap_or((rest, "*"));
        if server.is_empty() || tool.is_empty() {
            return Err(format!("{name:?} is not mcp:SERVER or mcp:SERVER/TOOL"));
        }
        return Ok(());
    }
    if crate::tools::NAMES.contains(&name) {
        return Ok(());
    }
    Err(format!(
        "there is no tool {name:?}; the tools are {}, and mcp:SERVER or mcp:SERVER/TOOL",
        crate::tools::NAMES.join(", ")
    ))
}

/// JSON pointer escaping of one key.
fn escape(key: &str) -> String {
    key.replace('~', "~0").replace('/', "~1")
}

impl AgentSpec {
    /// Whether the agent may use the built-in tool `name`.
    pub fn allows_tool(&self, name: &str) -> bool {
        self.tools
            .as_ref()
            .is_none_or(|tools| tools.iter().any(|t| t == name))
    }

    /// Whether the agent may use the MCP tool `tool` of `server`.
    pub fn allows_mcp(&self, server: &str, tool: &str) -> bool {
        let Some(tools) = &self.tools else {
            return true;
        };
        tools.iter().any(|entry| {
            entry
                .strip_prefix("mcp:")
                .is_some_and(|rest| match rest.split_once('/') {
                    Some((s, t)) => s == server && (t == tool || t == "*"),
                    None => rest == server,
                })
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
        let path = dir.join(name);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).unwrap();
        }
        std::fs::write(&path, text).unwrap();
        path
    }

    fn dir() -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("spindle-agentfile-{}", crate::util::random_hex()));
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn a_full_agent_file_reads() {
        let dir = dir();
        let file = write(
            &dir,
            "agent.json",
            r#"{"name": "tester", "description": "Runs the tests", "model": "fake/alpha",
                "preset": "delivery", "tools": ["read_file", "run_command", "mcp:github/list_issues"],
                "mcpServers": [{"name": "github", "command": "gh-mcp", "args": [], "env": []}],
                "permissions": [{"tool": "run_command", "match": "cargo test*", "action": "allow"},
                                {"tool": "run_command", "command": "rm", "decision": "deny"}],
                "onReject": "continue", "maxSteps": 7, "limits": {"tokens": 1000, "cost": 0.5},
                "subagents": {"reader": {"name": "reader", "tools": ["read_file"]}}}"#,
        );
        write(&dir, "instructions.md", "Be careful.");
        write(&dir, "commands/check.md", "Run the checks.");
        let spec = load(&dir).unwrap();
        assert_eq!(spec.name, "tester");
        assert_eq!(spec.instructions.as_deref(), Some("Be careful."));
        // `*` is a wildcard of the pattern, as in the config.
        assert_eq!(
            spec.permissions[0],
            Rule::command("cargo test*", Decision::Allow)
        );
        assert_eq!(spec.on_reject, Some(OnReject::Continue));
        assert_eq!(spec.max_steps, Some(7));
        assert_eq!(spec.limits.tokens, Some(1000));
        assert!(spec.allows_tool("read_file") && !spec.allows_tool("write_file"));
        assert!(spec.allows_mcp("github", "list_issues") && !spec.allows_mcp("github", "delete"));
        assert_eq!(
            spec.subagents["reader"].tools.as_deref(),
            Some(&["read_file".to_string()][..])
        );
        assert_eq!(spec.commands_dir, Some(dir.join("commands")));
        assert_eq!(spec.path, file);
    }

    #[test]
    fn every_bad_field_is_named_by_its_pointer() {
        let dir = dir();
        for (text, expected) in [
            (r#"{"name": "a", "colour": 1}"#, "/colour: unknown field"),
            (r#"{"description": "x"}"#, "/name: is required"),
            (r#"{"name": 3}"#, "/name: must be a string, not a number"),
            (
                r#"{"name": "a", "model": "gpt"}"#,
                "/model: \"gpt\" is not provider/model",
            ),
            (r#"{"name": "a", "preset": "fast"}"#, "/preset: takes light"),
            (
                r#"{"name": "a", "profile": "tiny"}"#,
                "/profile: takes lean or full",
            ),
            (
                r#"{"name": "a", "tools": ["read_file", "rm_rf"]}"#,
                "/tools/1: there is no tool \"rm_rf\"",
            ),
            (
                r#"{"name": "a", "tools": ["mcp:"]}"#,
                "/tools/0: \"mcp:\" is not mcp:SERVER",
            ),
            (
                r#"{"name": "a", "mcpServers": [{"command": "x"}]}"#,
                "/mcpServers/0/name: is required",
            ),
            (
                r#"{"name": "a", "permissions": [{"tool": "run_command", "decision": "allow"}]}"#,
                "/permissions/0: a run_command rule needs \"command\"",
            ),
            (
                r#"{"name": "a", "permissions": [{"tool": "edit", "action": "maybe"}]}"#,
                "/permissions/0/action: takes allow, ask or deny, not \"maybe\"",
            ),
            (
                r#"{"name": "a", "subagents": {"x": {"name": "y"}}}"#,
                "/subagents/x/name: \"y\" is not this subagent's key \"x\"",
            ),
            (
                r#"{"name": "a", "subagents": {"x/y": {"tools": []}}}"#,
                "/subagents/x~1y: use letters",
            ),
            (
                r#"{"name": "a", "onReject": "retry"}"#,
                "/onReject: takes stop or continue",
            ),
            (
                r#"{"name": "a", "maxSteps": 0}"#,
                "/maxSteps: must be a whole number from 1 to 1000",
            ),
            (
                r#"{"name": "a", "limits": {"tokens": -1}}"#,
                "/limits/tokens: must be a positive whole number",
            ),
            (
                r#"{"name": "a", "limits": {"time": 1}}"#,
                "/limits/time: unknown field",
            ),
            (
                r#"{"name": "a", "subagents": {"x": {"name": "x", "maxSteps": "many"}}}"#,
                "/subagents/x/maxSteps: must be a whole number",
            ),
            (
                r#"{"name": "a", "subagents": {"x": "missing.json"}}"#,
                "/subagents/x: agent file",
            ),
            (
                r#"{"name": "a", "subagents": {"x": {"name": "x", "permissions": []}}}"#,
                "/subagents/x/permissions: is not used by a subagent",
            ),
            (
                r#"{"name": "a", "permissions": [{"tool": "edit", "action": "deny", "decision": "allow"}]}"#,
                "/permissions/0/action: is another name for \"decision\"; give one of them",
            ),
            (
                r#"{"name": "a", "permissions": [{"tool": "run_command", "match": "ls", "command": "rm", "action": "deny"}]}"#,
                "/permissions/0/match: is another name for \"command\"",
            ),
            (
                r#"{"name": "a", "permissions": [{"tool": "run_command", "match": "ls", "decision": "deny", "when": 1}]}"#,
                "/permissions/0/when: is not a field of a rule",
            ),
            (
                r#"{"name": "a", "permissions": [{"tool": "run_command", "command": "ls", "decision": "deny"}, 7]}"#,
                "/permissions/1: a rule is a JSON object, not a number",
            ),
            (r#"[1]"#, "an agent is a JSON object"),
            (r#"{"name": "a",}"#, "not valid JSON (line 1"),
        ] {
            let file = write(&dir, "bad.json", text);
            let error = load(&file).unwrap_err().to_string();
            assert!(
                error.starts_with(&format!("agent file {}", file.display()))
                    && error.contains(expected),
                "{text}: {error}"
            );
        }
        let error = load(&dir.join("nope.json")).unwrap_err().to_string();
        assert!(error.contains("cannot be read"), "{error}");
    }
}

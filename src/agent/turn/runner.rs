//! Runs the tool calls of a turn: shows each one to the editor, asks
//! permission where the policy says so, executes it (through the editor's
//! files and terminals when offered), and reports its final status.
//!
//! Every tool call that is shown also ends with `completed` or `failed`,
//! whatever happens (rejection, error, cancel).

use super::client::{Client, ClientError};
use super::processes::{Confinement, Processes};
use super::updates::Updates;
use crate::agent::common::permission::{decide, Action, Approvals, Decision, Policy};
use crate::cancel::CancelToken;
use crate::provider::ToolCallRequest;
use crate::tools::{self, files, paths, search, walk, Tool};
use crate::util::fence;
use serde_json::{json, Value};
use std::cell::RefCell;
use std::path::Path;
use std::time::Duration;

/// What a tool call gave the model, and whether the turn must stop.
pub struct CallResult {
    pub text: String,
    pub cancelled: bool,
}

pub struct Runner<'a> {
    pub session_id: &'a str,
    pub root: &'a Path,
    pub client: &'a Client,
    pub updates: &'a RefCell<Updates>,
    pub cancel: &'a CancelToken,
    /// The session's MCP servers.
    pub mcp: Option<&'a crate::mcp::McpSession>,
    /// Plan mode: tools that change things are refused.
    pub read_only: bool,
    pub policy: Policy,
    pub approvals: &'a mut Approvals,
    /// How commands start: credentials removed, logs, the sandbox.
    pub processes: &'a Processes,
}

/// How one call ended, before it is reported.
pub(in crate::agent) enum Ending {
    Completed { text: String, content: Vec<Value> },
    Failed { text: String, content: Vec<Value> },
    Cancelled,
}

pub(in crate::agent) fn text_content(text: &str) -> Value {
    json!({"type": "content", "content": {"type": "text", "text": text}})
}

pub(in crate::agent) fn failed(text: impl Into<String>) -> Ending {
    let text = text.into();
    Ending::Failed {
        content: vec![text_content(&text)],
        text,
    }
}

impl Runner<'_> {
    pub(in crate::agent) fn update(&self, update: Value) {
        self.updates.borrow_mut().send(update);
    }

    /// Runs one call and returns what the model gets back.
    pub fn run(&mut self, call: &ToolCallRequest) -> CallResult {
        let raw_input = serde_json::from_str::<Value>(&call.arguments)
            .unwrap_or_else(|_| Value::String(call.arguments.clone()));
        if !tools::NAMES.contains(&call.name.as_str()) {
            if let Some(tool) = self.mcp.and_then(|mcp| mcp.find(&call.name)) {
                return self.run_mcp(call, &tool, raw_input);
            }
        }
        let tool = match tools::parse(&call.name, &call.arguments) {
            Ok(tool) => tool,
            Err(error) => {
                self.update(json!({
                    "sessionUpdate": "tool_call",
                    "toolCallId": call.id,
                    "title": format!("{} (invalid call)", call.name),
                    "kind": "other",
                    "status": "pending",
                    "rawInput": raw_input,
                }));
                return self.finish(call, failed(format!("Error: {error}")));
            }
        };
        let target = tools::target(&tool, self.root);
        if self.read_only && !tools::READ_ONLY.contains(&call.name.as_str()) {
            self.update(json!({
                "sessionUpdate": "tool_call",
                "toolCallId": call.id,
                "title": tools::title(&tool, self.root),
                "kind": tools::kind(&tool),
                "status": "pending",
                "rawInput": raw_input,
            }));
            return self.finish(
                call,
                failed("Error: the session is in plan mode, where only read-only tools run. Write the plan with todo_write instead of changing anything."),
            );
        }
        let mut announce = json!({
            "sessionUpdate": "tool_call",
            "toolCallId": call.id,
            "title": tools::title(&tool, self.root),
            "kind": tools::kind(&tool),
            "status": "pending",
            "rawInput": raw_input,
        });
        if let Some(location) = location(&tool, target.as_ref()) {
            announce["locations"] = json!([location]);
        }
        self.update(announce.clone());

        let confinement = match self.permit(call, &tool, target.as_ref(), &announce) {
            Permit::Allowed(confinement) => confinement,
            Permit::Rejected => {
                return self.finish(
                    call,
                    failed("The user declined this tool call. Do not retry it; ask or try another approach."),
                )
            }
            Permit::Cancelled => return self.finish(call, Ending::Cancelled),
        };
        self.update(json!({
            "sessionUpdate": "tool_call_update",
            "toolCallId": call.id,
            "status": "in_progress",
        }));
        let ending = self.execute(call, &tool, target.as_ref(), confinement);
        let ending = if self.cancel.is_cancelled() {
            Ending::Cancelled
        } else {
            ending
        };
        self.finish(call, ending)
    }

    /// A call to an MCP server's tool: shown, judged by the policy (its
    /// read-only annotation counts in auto), forwarded, and its result
    /// shown as text, images and structured JSON.
    fn run_mcp(
        &mut self,
        call: &ToolCallRequest,
        tool: &crate::mcp::McpTool,
        raw_input: Value,
    ) -> CallResult {
        let announce = json!({
            "sessionUpdate": "tool_call",
            "toolCallId": call.id,
            "title": format!("{}: {}", tool.server, tool.name),
            "kind": if tool.read_only { "read" } else { "other" },
            "status": "pending",
            "rawInput": raw_input,
        });
        self.update(announce.clone());
        if self.read_only && !tool.read_only {
            return self.finish(
                call,
                failed("Error: the session is in plan mode, where only read-only tools run."),
            );
        }
        let arguments = match &raw_input {
            Value::Object(_) => raw_input.clone(),
            Value::String(text) if text.trim().is_empty() => json!({}),
            _ => {
                return self.finish(
                    call,
                    failed(format!(
                        "Error: the arguments of {} must be a JSON object",
                        call.name
                    )),
                )
            }
        };
        let action = Action::Mcp {
            exposed_name: &tool.exposed_name,
            read_only: tool.read_only,
        };
        match self.ask(call, &action, &announce) {
            Permit::Allowed(_) => {}
            Permit::Rejected => {
                return self.finish(
                    call,
                    failed("The user declined this tool call. Do not retry it; ask or try another approach."),
                )
            }
            Permit::Cancelled => return self.finish(call, Ending::Cancelled),
        }
        self.update(json!({
            "sessionUpdate": "tool_call_update",
            "toolCallId": call.id,
            "status": "in_progress",
        }));
        let Some(mcp) = self.mcp else {
            return self.finish(call, failed("Error: the MCP server is gone"));
        };
        let ending = match mcp.call(&tool.exposed_name, arguments, self.cancel) {
            Err(_) if self.cancel.is_cancelled() => Ending::Cancelled,
            Err(error) => failed(format!("Error: {error}")),
            Ok(result) => {
                let mut content: Vec<Value> = Vec::new();
                for block in &result.content {
                    match block.get("type").and_then(Value::as_str) {
                        Some("text") | Some("image") | Some("resource_link") => {
                            content.push(json!({"type": "content", "content": block}));
                        }
                        _ => {}
                    }
                }
                if let Some(structured) = &result.structured {
                    let pretty = serde_json::to_string_pretty(structured).unwrap_or_default();
                    content.push(text_content(&fence(&pretty)));
                }
                let mut text = result.text();
                if result.is_error {
                    // The model must know the tool failed, as for built-in tools.
                    text.insert_str(0, "Error: ");
                }
                if content.is_empty() {
                    content.push(text_content(&text));
                }
                if result.is_error {
                    Ending::Failed { text, content }
                } else {
                    Ending::Completed { text, content }
                }
            }
        };
        self.finish(call, ending)
    }

    fn finish(&self, call: &ToolCallRequest, ending: Ending) -> CallResult {
        let (status, content, text, cancelled) = match ending {
            Ending::Completed { text, content } => ("completed", content, text, false),
            Ending::Failed { text, content } => ("failed", content, text, false),
            Ending::Cancelled => {
                let text = "Cancelled by the user.".to_string();
                ("failed", vec![text_content(&text)], text, true)
            }
        };
        self.update(json!({
            "sessionUpdate": "tool_call_update",
            "toolCallId": call.id,
            "status": status,
            "content": content,
        }));
        CallResult { text, cancelled }
    }

    fn permit(
        &mut self,
        call: &ToolCallRequest,
        tool: &Tool,
        target: Option<&paths::Resolved>,
        announce: &Value,
    ) -> Permit {
        let action = match (tool, target) {
            (Tool::TodoWrite(_), _) | (_, None) => Action::Plan,
            (Tool::WriteFile(_) | Tool::EditFile(_), Some(target)) => Action::Edit {
                path: &target.path,
                // A file with other hard links may be a name for a file
                // outside the workspace or inside `.git/`.
                inside: target.inside && !paths::hard_linked(&target.path),
                git_internal: target.git_internal,
            },
            (Tool::RunCommand(args), Some(target)) => {
                let (read_only, sandboxable) = self.judge_command(&args.command, target);
                Action::Command {
                    command_line: &args.command,
                    cwd: &target.path,
                    read_only,
                    sandboxable,
                }
            }
            (_, Some(target)) => Action::Read {
                path: &target.path,
                inside: target.inside
                    || self
                        .processes
                        .session_dir
                        .as_ref()
                        .is_some_and(|dir| target.path.starts_with(dir)),
            },
        };
        // What the policy alone allows runs confined; what the user allowed
        // (now or with "always") runs as asked.
        let confinement = match action {
            Action::Command {
                read_only,
                sandboxable,
                ..
            } if decide(self.policy, &action, &Approvals::default()) == Decision::Allow => {
                match self.policy {
                    Policy::Auto if read_only => Confinement::ReadOnly {
                        sandboxed: self.processes.sandbox_available(),
                    },
                    Policy::Sandbox if sandboxable => Confinement::Workspace,
                    _ => Confinement::None,
                }
            }
            _ => Confinement::None,
        };
        match self.ask(call, &action, announce) {
            Permit::Allowed(Confinement::None) => Permit::Allowed(confinement),
            other => other,
        }
    }

    /// Whether a command is proven read-only (under `auto`), and whether it
    /// can run in the sandbox (under `sandbox`).
    fn judge_command(&self, command_line: &str, cwd: &paths::Resolved) -> (bool, bool) {
        if !cwd.inside {
            return (false, false);
        }
        match self.policy {
            Policy::Auto => {
                let context = crate::policy::Context {
                    root: self.root,
                    cwd: &cwd.path,
                    path_var: std::env::var_os("PATH"),
                };
                let verdict = crate::policy::judge(command_line, &context);
                if let crate::policy::Verdict::Ask(reason) = &verdict {
                    log::debug!("command asks: {reason}");
                }
                (verdict.is_read_only(), false)
            }
            Policy::Sandbox => {
                let needs = crate::policy::needs_more(command_line);
                if let Some(reason) = &needs {
                    log::debug!("command asks in the sandbox: {reason}");
                }
                (false, self.processes.sandbox_available() && needs.is_none())
            }
            Policy::Ask | Policy::Yolo => (false, false),
        }
    }

    /// Applies the policy to an action and asks the user when it says so.
    fn ask(&mut self, call: &ToolCallRequest, action: &Action<'_>, announce: &Value) -> Permit {
        match decide(self.policy, action, self.approvals) {
            Decision::Allow => return Permit::Allowed(Confinement::None),
            Decision::Reject => return Permit::Rejected,
            Decision::Ask => {}
        }
        let scope = action.scope();
        let mut tool_call = json!({
            "toolCallId": call.id,
            "title": announce["title"],
            "kind": announce["kind"],
            "status": "pending",
            "rawInput": announce["rawInput"],
        });
        if let Some(locations) = announce.get("locations") {
            tool_call["locations"] = locations.clone();
        }
        let params = json!({
            "sessionId": self.session_id,
            "toolCall": tool_call,
            "options": [
                {"optionId": "allow_once", "name": "Allow", "kind": "allow_once"},
                {"optionId": "allow_always", "name": format!("Always allow {scope}"), "kind": "allow_always"},
                {"optionId": "reject_once", "name": "Reject", "kind": "reject_once"},
                {"optionId": "reject_always", "name": format!("Always reject {scope}"), "kind": "reject_always"},
            ],
        });
        let answer = match self.client.request("session/request_permission", params) {
            Ok(answer) => answer,
            Err(ClientError::Cancelled) | Err(ClientError::Gone) => return Permit::Cancelled,
            Err(ClientError::Rpc(error)) => {
                log::warn!("permission request failed: {}", error.message);
                return Permit::Rejected;
            }
        };
        let outcome = &answer["outcome"];
        if outcome["outcome"] == "cancelled" {
            return Permit::Cancelled;
        }
        let key = action.key();
        match outcome["optionId"].as_str() {
            Some("allow_once") => Permit::Allowed(Confinement::None),
            Some("allow_always") => {
                if let Some(key) = key {
                    self.approvals.rejected.remove(&key);
                    self.approvals.allowed.insert(key);
                }
                Permit::Allowed(Confinement::None)
            }
            Some("reject_always") => {
                if let Some(key) = key {
                    self.approvals.allowed.remove(&key);
                    self.approvals.rejected.insert(key);
                }
                Permit::Rejected
            }
            _ => Permit::Rejected,
        }
    }

    fn execute(
        &self,
        call: &ToolCallRequest,
        tool: &Tool,
        target: Option<&paths::Resolved>,
        confinement: Confinement,
    ) -> Ending {
        let editor = EditorAccess {
            client: self.client,
        };
        let cancelled = || self.cancel.is_cancelled();
        let path = target
            .map(|t| t.path.clone())
            .unwrap_or_else(|| self.root.to_path_buf());
        match tool {
            Tool::ReadFile(args) => {
                match files::read_file(
                    &path,
                    args.start_line,
                    args.line_count,
                    &editor,
                    self.processes.file_limits,
                ) {
                    Ok(result) => Ending::Completed {
                        content: vec![text_content(&fence(&result.text))],
                        text: result.text,
                    },
                    Err(error) => failed(format!("Error: {error}")),
                }
            }
            Tool::WriteFile(args) => {
                match files::write_file(&path, &args.content, &editor, self.processes.file_limits) {
                    Ok(change) => changed(&path, change),
                    Err(error) => failed(format!("Error: {error}")),
                }
            }
            Tool::EditFile(args) => {
                match files::edit_file(&path, &args.edits, &editor, self.processes.file_limits) {
                    Ok((change, _line)) => changed(&path, change),
                    Err(error) => failed(format!("Error: {error}")),
                }
            }
            Tool::ListDirectory(_) => {
                match walk::list_directory(self.root, &path, tools::LIST_LIMIT) {
                    Ok(text) => completed_text(text),
                    Err(error) => failed(format!("Error: {error}")),
                }
            }
            Tool::Glob(args) => {
                match walk::glob(
                    self.root,
                    &path,
                    &args.pattern,
                    tools::GLOB_LIMIT,
                    &cancelled,
                ) {
                    Ok(result) => completed_text(walk::render_glob(self.root, &result)),
                    Err(error) => failed(format!("Error: {error}")),
                }
            }
            Tool::Search(args) => {
                let query = search::SearchQuery {
                    pattern: args.pattern.clone(),
                    regex: args.regex,
                    case_insensitive: args.case_insensitive,
                    glob: args.glob.clone(),
                    max_results: tools::SEARCH_LIMIT,
                };
                match search::search(self.root, &path, &query, &cancelled) {
                    Ok(result) => completed_text(result.text),
                    Err(error) => failed(format!("Error: {error}")),
                }
            }
            Tool::RunCommand(args) => {
                if !path.is_dir() {
                    return failed(format!(
                        "Error: the working directory {} does not exist",
                        path.display()
                    ));
                }
                let timeout = Duration::from_secs(
                    args.timeout_seconds
                        .unwrap_or(tools::COMMAND_TIMEOUT_DEFAULT)
                        .clamp(1, tools::COMMAND_TIMEOUT_MAX),
                );
                let launch = match self.processes.launch(self.root, &path, confinement) {
                    Ok(launch) => launch,
                    Err(error) => return failed(format!("Error: {error}")),
                };
                if self.client.capabilities.terminal {
                    self.run_in_terminal(call, &args.command, &path, timeout, &launch)
                } else {
                    self.run_locally(call, &args.command, &path, timeout, launch)
                }
            }
            Tool::TodoWrite(args) => {
                let entries: Vec<Value> = args
                    .todos
                    .iter()
                    .map(|todo| {
                        json!({
                            "content": todo.content,
                            "priority": todo.priority.unwrap_or(tools::TodoPriority::Medium),
                            "status": todo.status,
                        })
                    })
                    .collect();
                self.update(json!({"sessionUpdate": "plan", "entries": entries}));
                let done = args
                    .todos
                    .iter()
                    .filter(|t| t.status == tools::TodoStatus::Completed)
                    .count();
                completed_text(format!(
                    "Plan updated: {} items, {done} completed.",
                    args.todos.len()
                ))
            }
        }
    }
}

enum Permit {
    Allowed(Confinement),
    Rejected,
    Cancelled,
}

/// The tool call's location: the file (with a line) or directory it works on.
fn location(tool: &Tool, target: Option<&paths::Resolved>) -> Option<Value> {
    let target = target?;
    if matches!(tool, Tool::RunCommand(_)) {
        return None;
    }
    let mut location = json!({"path": target.path});
    if let Tool::ReadFile(args) = tool {
        if let Some(line) = args.start_line {
            location["line"] = json!(line.max(1));
        }
    }
    Some(location)
}

fn changed(path: &Path, change: files::Change) -> Ending {
    let mut diff = json!({"type": "diff", "path": path, "newText": change.new_text});
    if let Some(old) = &change.old_text {
        diff["oldText"] = json!(old);
    }
    Ending::Completed {
        text: change.summary,
        content: vec![diff],
    }
}

fn completed_text(text: String) -> Ending {
    Ending::Completed {
        content: vec![text_content(&fence(&text))],
        text,
    }
}

/// The editor's file access through the client, when it offered it.
struct EditorAccess<'a> {
    client: &'a Client,
}

impl files::EditorFiles for EditorAccess<'_> {
    fn can_read(&self) -> bool {
        self.client.capabilities.fs.read_text_file
    }
    fn can_write(&self) -> bool {
        self.client.capabilities.fs.write_text_file
    }
    fn read_text(&self, path: &Path) -> Result<String, String> {
        self.client.read_text_file(path).map_err(|e| e.to_string())
    }
    fn write_text(&self, path: &Path, content: &str) -> Result<(), String> {
        self.client
            .write_text_file(path, content)
            .map_err(|e| e.to_string())
    }
}

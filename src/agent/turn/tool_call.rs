//! One tool call from start to end: checked against what the session
//! offers, shown to the editor, permitted, executed, and reported with
//! its final status. Every call that is shown ends `completed` or
//! `failed`, whatever happens (rejection, error, cancel).

use super::permission::Permit;
use super::runner::{failed, text_content, CallResult, Ending, Runner};
use crate::acp::{SessionUpdate, ToolCall, ToolCallStatus, ToolCallUpdate, ToolKind};
use crate::agent::common::permission::Action;
use crate::provider::ToolCallRequest;
use crate::tools::{self, paths, Tool};
use crate::util::fence;
use serde_json::{json, Value};

impl Runner<'_> {
    /// Runs one call and returns what the model gets back.
    pub(super) fn run(&mut self, call: &ToolCallRequest) -> CallResult {
        self.run_hooked(call, |runner, raw_input, mcp_tool| {
            runner.run_call(call, raw_input, mcp_tool)
        })
    }

    /// Runs one call with its hooks: the `PreToolUse` hooks first (they
    /// may block it, or have the user asked: `hook_ask` while `execute`
    /// runs), the call (`execute`, given its input and its MCP tool), then,
    /// when it succeeded, the `PostToolUse` hooks (what they say is added
    /// for the model), as Claude Code runs them: never after a call that
    /// failed, was refused or cancelled.
    pub(super) fn run_hooked(
        &mut self,
        call: &ToolCallRequest,
        execute: impl FnOnce(&mut Self, Value, Option<crate::mcp::McpTool>) -> CallResult,
    ) -> CallResult {
        use crate::agent::common::hooks::{self, Event};
        let raw_input = serde_json::from_str::<Value>(&call.arguments)
            .unwrap_or_else(|_| Value::String(call.arguments.clone()));
        let builtin = tools::NAMES.contains(&call.name.as_str());
        let mcp_tool = if builtin {
            None
        } else {
            self.mcp.and_then(|mcp| mcp.find(&call.name))
        };
        if let Some(refused) = self.not_offered(call, builtin, mcp_tool.as_ref(), &raw_input) {
            return refused;
        }
        let shown = hooks::shown_name(
            &call.name,
            mcp_tool
                .as_ref()
                .map(|t| (t.server.as_str(), t.name.as_str())),
        );
        let mut fields = json!({
            "tool_name": shown,
            "spindle_tool_name": call.name,
            "tool_input": hooks::tool_input(&raw_input, self.root),
            "tool_use_id": call.id,
        });
        let pre = self.fire_tool(Event::PreToolUse, call, &shown, fields.clone());
        if let Some(reason) = pre.block {
            let title = format!("{} (blocked by a hook)", call.name);
            let error = format!("Error: a PreToolUse hook blocked this call: {reason}");
            return self.refuse(call, title, ToolKind::Other, &raw_input, error);
        }
        self.hook_ask = pre.ask;
        let mut result = execute(self, raw_input, mcp_tool);
        self.hook_ask = false;
        if result.cancelled || self.cancel.is_cancelled() {
            return result;
        }
        fields["tool_response"] = json!({
            "content": result.text,
            "success": result.succeeded,
        });
        let post = if result.succeeded && self.hooks.any(Event::PostToolUse) {
            self.fire_tool(Event::PostToolUse, call, &shown, fields)
        } else {
            Default::default()
        };
        if let Some(reason) = post.block {
            result
                .text
                .push_str(&format!("\n\nA PostToolUse hook says: {reason}"));
        }
        for context in pre.context.iter().chain(&post.context) {
            result
                .text
                .push_str(&format!("\n\nContext from a hook: {context}"));
        }
        result
    }

    /// Runs the hooks of `event` for `call`; their notes go to the user.
    fn fire_tool(
        &self,
        event: crate::agent::common::hooks::Event,
        call: &ToolCallRequest,
        shown: &str,
        fields: Value,
    ) -> crate::agent::common::hooks::Verdict {
        let subject = crate::agent::common::hooks::Subject::Tool {
            spindle: &call.name,
            shown,
            edits: crate::agent::common::hooks::edits(&call.name),
        };
        let place = super::processes::HookPlace {
            session_id: self.session_id,
            root: self.root,
            policy: self.policy,
            hooks: self.hooks,
        };
        let verdict =
            self.processes
                .fire(&place, event, &subject, fields, Some(self.cancel.signal()));
        for note in &verdict.notes {
            self.updates
                .borrow_mut()
                .notice(&crate::acp::fit::Notice::new(
                    crate::acp::Severity::Warning,
                    note.clone(),
                    None,
                ));
        }
        verdict
    }

    /// A call that no permission question covers (a `task`) when a
    /// `PreToolUse` hook asked that the user be asked: shown pending and
    /// put to the user as a rule's "ask" would be. `None` when the user
    /// lets it run; else how the call ended.
    pub(super) fn asked_by_hook(
        &mut self,
        call: &ToolCallRequest,
        title: String,
        raw_input: Value,
    ) -> Option<CallResult> {
        let shown = pending(call, title.clone(), ToolKind::Think, raw_input);
        self.update(SessionUpdate::ToolCall(shown.clone()));
        let announce = SessionUpdate::ToolCall(shown).into_value();
        match self.ask(call, &Action::Plan, &announce) {
            Permit::Allowed(_) => None,
            Permit::Rejected(rejection) => Some(self.rejected(call, rejection, title)),
            Permit::Cancelled => Some(self.finish(call, Ending::Cancelled)),
        }
    }

    /// The `Notification` hooks, when the user is about to be asked.
    pub(super) fn notify(&self, message: &str, kind: &str) {
        use crate::agent::common::hooks::{Event, Subject};
        if !self.hooks.any(Event::Notification) {
            return;
        }
        let place = super::processes::HookPlace {
            session_id: self.session_id,
            root: self.root,
            policy: self.policy,
            hooks: self.hooks,
        };
        let fields = json!({"message": message, "notification_type": kind});
        let subject = Subject::Word(kind);
        let verdict = self.processes.fire(
            &place,
            Event::Notification,
            &subject,
            fields,
            Some(self.cancel.signal()),
        );
        for note in verdict.notes {
            log::warn!("{note}");
        }
    }

    fn run_call(
        &mut self,
        call: &ToolCallRequest,
        raw_input: Value,
        mcp_tool: Option<crate::mcp::McpTool>,
    ) -> CallResult {
        if let Some(tool) = mcp_tool {
            return self.run_mcp(call, &tool, raw_input);
        }
        let tool = match tools::parse(&call.name, &call.arguments) {
            Ok(tool) => tool,
            Err(error) => {
                let title = format!("{} (invalid call)", call.name);
                return self.refuse(
                    call,
                    title,
                    ToolKind::Other,
                    &raw_input,
                    format!("Error: {error}"),
                );
            }
        };
        let target = match &tool {
            Tool::Remember(args) => Some(self.memory_target(args)),
            _ => tools::target(&tool, self.root).map(|t| self.widen(t)),
        };
        if self.read_only && !tools::READ_ONLY.contains(&call.name.as_str()) {
            return self.refuse(
                call,
                tools::title(&tool, self.root),
                tools::kind(&tool),
                &raw_input,
                "Error: the session is in plan mode, where only read-only tools run. Write the plan with todo_write instead of changing anything.",
            );
        }
        let announce = self.announce(call, &tool, target.as_ref(), raw_input);
        if let Tool::ExitPlan(args) = &tool {
            return self.exit_plan(call, &args.plan, &announce);
        }
        if let Tool::AskUser(args) = &tool {
            return self.ask_user(call, args, &announce);
        }
        self.permit_and_execute(call, &tool, target.as_ref(), &announce)
    }

    /// A call that could not be made whole (an unknown tool, arguments
    /// that cannot be read): shown and failed with the reason, the turn
    /// going on.
    pub(super) fn refuse_unreadable(&self, call: &ToolCallRequest, error: &str) -> CallResult {
        let raw_input = serde_json::from_str::<Value>(&call.arguments)
            .unwrap_or_else(|_| Value::String(call.arguments.clone()));
        let name: String = call.name.chars().take(64).collect();
        let title = format!("{name} (invalid call)");
        self.refuse(
            call,
            title,
            ToolKind::Other,
            &raw_input,
            format!("Error: {error}"),
        )
    }

    /// A call the session does not offer: a tool a subagent may not use,
    /// or one outside an agent file's allow-list (whatever the model
    /// calls, a tool it was not offered is not run). Shown and failed.
    fn not_offered(
        &self,
        call: &ToolCallRequest,
        builtin: bool,
        mcp_tool: Option<&crate::mcp::McpTool>,
        raw_input: &Value,
    ) -> Option<CallResult> {
        let title = || format!("{} (not available)", call.name);
        if self.client.parent.is_some() && tools::NOT_FOR_SUBAGENTS.contains(&call.name.as_str()) {
            let error = format!(
                "Error: a subagent cannot use {}; finish the task with your answer",
                call.name
            );
            return Some(self.refuse(call, title(), ToolKind::Other, raw_input, error));
        }
        for agent in self.agent.into_iter().chain(self.subagent) {
            let allowed = match mcp_tool {
                Some(tool) => agent.allows_mcp(&tool.server, &tool.name),
                None => !builtin || agent.allows_tool(&call.name),
            };
            if !allowed {
                let error = format!(
                    "Error: the agent {} may not use {}; use the tools you were given",
                    agent.name, call.name
                );
                return Some(self.refuse(call, title(), ToolKind::Other, raw_input, error));
            }
        }
        None
    }

    /// Shows a call that is not run, and fails it with `error`.
    fn refuse(
        &self,
        call: &ToolCallRequest,
        title: String,
        kind: ToolKind,
        raw_input: &Value,
        error: impl Into<String>,
    ) -> CallResult {
        self.update(SessionUpdate::ToolCall(pending(
            call,
            title,
            kind,
            raw_input.clone(),
        )));
        self.finish(call, failed(error))
    }

    /// Shows a built-in call to the editor (with its location), pending;
    /// what was shown is what a permission request repeats.
    fn announce(
        &self,
        call: &ToolCallRequest,
        tool: &Tool,
        target: Option<&paths::Resolved>,
        raw_input: Value,
    ) -> Value {
        let mut title = tools::title(tool, self.root);
        if self.repaired {
            title.push_str(" (arguments repaired)");
        }
        let mut announce = pending(call, title, tools::kind(tool), raw_input);
        announce.locations = location(tool, target).map(|location| vec![location]);
        self.update(SessionUpdate::ToolCall(announce.clone()));
        SessionUpdate::ToolCall(announce).into_value()
    }

    /// Asks permission (showing what the user approves: the diff of an
    /// edit, the exact line and folder of a command), runs the call with
    /// a checkpoint around it, and reports how it ended.
    fn permit_and_execute(
        &mut self,
        call: &ToolCallRequest,
        tool: &Tool,
        target: Option<&paths::Resolved>,
        announce: &Value,
    ) -> CallResult {
        let confinement = match self.permit(call, tool, target, announce) {
            Permit::Allowed(confinement) => confinement,
            Permit::Rejected(rejection) => {
                let title = announce["title"].as_str().unwrap_or(&call.name).to_string();
                return self.rejected(call, rejection, title);
            }
            Permit::Cancelled => return self.finish(call, Ending::Cancelled),
        };
        self.mark_in_progress(call);
        self.editor_texts.borrow_mut().clear();
        let capture = self.capture_before(tool, target);
        let ending = self.execute(call, tool, target, confinement);
        self.capture_after(capture);
        self.editor_texts.borrow_mut().clear();
        let ending = if self.cancel.is_cancelled() {
            Ending::Cancelled
        } else {
            ending
        };
        self.finish(call, ending)
    }

    fn mark_in_progress(&self, call: &ToolCallRequest) {
        self.update(SessionUpdate::ToolCallUpdate(ToolCallUpdate {
            tool_call_id: call.id.clone(),
            status: Some(ToolCallStatus::InProgress),
            content: None,
        }));
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
        let kind = if tool.read_only {
            ToolKind::Read
        } else {
            ToolKind::Other
        };
        let mut title = format!("{}: {}", tool.server, tool.name);
        if self.repaired {
            title.push_str(" (arguments repaired)");
        }
        let shown = pending(call, title, kind, raw_input.clone());
        self.update(SessionUpdate::ToolCall(shown.clone()));
        let announce = SessionUpdate::ToolCall(shown).into_value();
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
            server: &tool.server,
            tool: &tool.name,
            read_only: tool.read_only,
        };
        match self.ask(call, &action, &announce) {
            Permit::Allowed(_) => {}
            Permit::Rejected(rejection) => {
                let title = announce["title"].as_str().unwrap_or(&call.name).to_string();
                return self.rejected(call, rejection, title);
            }
            Permit::Cancelled => return self.finish(call, Ending::Cancelled),
        }
        self.mark_in_progress(call);
        let Some(mcp) = self.mcp else {
            return self.finish(call, failed("Error: the MCP server is gone"));
        };
        // The server's questions during the call go to the editor, tied to
        // this tool call.
        let forward = super::elicitation::Forward {
            client: self.client,
            tool_call_id: &call.id,
        };
        let ending =
            match mcp.call_asking(&tool.exposed_name, arguments, self.cancel, Some(&forward)) {
                Err(_) if self.cancel.is_cancelled() => Ending::Cancelled,
                Err(error) => failed(format!("Error: {error}")),
                Ok(result) => mcp_ending(&result),
            };
        self.finish(call, ending)
    }
}

/// What an MCP tool's result shows: its text, images and links, its
/// structured JSON, and an error marked as one for the model.
fn mcp_ending(result: &crate::mcp::CallResult) -> Ending {
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

/// A call as first shown: pending, with the model's name and input.
fn pending(call: &ToolCallRequest, title: String, kind: ToolKind, raw_input: Value) -> ToolCall {
    ToolCall {
        tool_call_id: call.id.clone(),
        name: Some(call.name.clone()),
        title,
        kind,
        status: ToolCallStatus::Pending,
        locations: None,
        raw_input: Some(raw_input),
    }
}

/// The tool call's location: the file (with a line) or directory it works on.
fn location(tool: &Tool, target: Option<&paths::Resolved>) -> Option<Value> {
    let target = target?;
    if matches!(tool, Tool::RunCommand(_) | Tool::ApplyPatch(_)) {
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

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
use crate::policy::rules::{self, Rule, RuleSet, Subject, ToolClass};
use crate::provider::ToolCallRequest;
use crate::tools::{self, files, patch, paths, search, walk, Tool};
use crate::util::fence;
use serde_json::{json, Value};
use std::cell::RefCell;
use std::path::Path;
use std::time::Duration;

/// What a tool call gave the model, and whether the turn must stop.
pub struct CallResult {
    pub text: String,
    pub cancelled: bool,
    /// The user declined the call and the turn stops here: what was
    /// declined, in a few words.
    pub declined: Option<String>,
    /// The user left plan mode (`exit_plan`) for normal mode with this
    /// approval policy.
    pub switched: Option<Policy>,
    /// A question the editor could not put to the user itself: the turn
    /// ends with it as the agent's message, and the next prompt answers.
    pub question: Option<String>,
}

/// The most bytes of feedback a rejection passes to the model.
const FEEDBACK_CAP: usize = 4_000;

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
    /// Whether a rejection ends the turn.
    pub on_reject: crate::config::OnReject,
    /// The turn's checkpoint: what file tools and commands change is kept.
    pub checkpoints: Option<&'a RefCell<crate::checkpoint::Checkpoints>>,
    /// Lasting permission rules: the user's and the project's.
    pub rules: &'a RuleSet,
    /// Where "always, in this project" answers are saved: the user's
    /// config file.
    pub config_path: Option<&'a Path>,
    /// Where the plan is published for status.
    pub live: &'a super::report::SharedLive,
    /// The model's goal reports of this step, for the turn to apply.
    pub goal_updates: RefCell<Vec<tools::GoalUpdateArgs>>,
    /// The session's background jobs, and this turn's epoch (a cancel
    /// kills the jobs of its turn).
    pub jobs: &'a std::sync::Arc<crate::tools::jobs::Jobs>,
    /// The agent file's agent, whose tool allow-list holds, and a
    /// subagent's spec, whose allow-list narrows it.
    pub agent: Option<&'a crate::agentfile::AgentSpec>,
    pub subagent: Option<&'a crate::agentfile::AgentSpec>,
    /// `additionalDirectories`: paths inside them count as the workspace.
    pub extra_roots: &'a [std::path::PathBuf],
    pub epoch: u64,
}

/// What a checkpoint kept before a call ran.
enum Capture {
    Nothing,
    Files(crate::checkpoint::Pending),
    Workspace(crate::checkpoint::Scan),
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
        let builtin = tools::NAMES.contains(&call.name.as_str());
        if self.client.parent.is_some() && tools::NOT_FOR_SUBAGENTS.contains(&call.name.as_str()) {
            self.update(json!({
                "sessionUpdate": "tool_call",
                "toolCallId": call.id,
                "name": call.name,
                "title": format!("{} (not available)", call.name),
                "kind": "other",
                "status": "pending",
                "rawInput": raw_input,
            }));
            return self.finish(
                call,
                failed(format!(
                    "Error: a subagent cannot use {}; finish the task with your answer",
                    call.name
                )),
            );
        }
        let mcp_tool = if builtin {
            None
        } else {
            self.mcp.and_then(|mcp| mcp.find(&call.name))
        };
        // An agent file's allow-list holds whatever the model calls: a
        // tool it was not offered is not run.
        for agent in self.agent.into_iter().chain(self.subagent) {
            let allowed = match &mcp_tool {
                Some(tool) => agent.allows_mcp(&tool.server, &tool.name),
                None => !builtin || agent.allows_tool(&call.name),
            };
            if !allowed {
                self.update(json!({
                    "sessionUpdate": "tool_call",
                    "toolCallId": call.id,
                    "name": call.name,
                    "title": format!("{} (not available)", call.name),
                    "kind": "other",
                    "status": "pending",
                    "rawInput": raw_input,
                }));
                return self.finish(
                    call,
                    failed(format!(
                        "Error: the agent {} may not use {}; use the tools you were given",
                        agent.name, call.name
                    )),
                );
            }
        }
        if let Some(tool) = mcp_tool {
            return self.run_mcp(call, &tool, raw_input);
        }
        let tool = match tools::parse(&call.name, &call.arguments) {
            Ok(tool) => tool,
            Err(error) => {
                self.update(json!({
                    "sessionUpdate": "tool_call",
                    "toolCallId": call.id,
                    "name": call.name,
                    "title": format!("{} (invalid call)", call.name),
                    "kind": "other",
                    "status": "pending",
                    "rawInput": raw_input,
                }));
                return self.finish(call, failed(format!("Error: {error}")));
            }
        };
        let target = tools::target(&tool, self.root).map(|t| self.widen(t));
        if self.read_only && !tools::READ_ONLY.contains(&call.name.as_str()) {
            self.update(json!({
                "sessionUpdate": "tool_call",
                "toolCallId": call.id,
                "name": call.name,
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
            "name": call.name,
            "title": tools::title(&tool, self.root),
            "kind": tools::kind(&tool),
            "status": "pending",
            "rawInput": raw_input,
        });
        if let Some(location) = location(&tool, target.as_ref()) {
            announce["locations"] = json!([location]);
        }
        self.update(announce.clone());
        if let Tool::ExitPlan(args) = &tool {
            return self.exit_plan(call, &args.plan, &announce);
        }
        if let Tool::AskUser(args) = &tool {
            return self.ask_user(call, args, &announce);
        }
        // What the user approves: the diff of an edit, the exact line and
        // folder of a command.
        let mut asked = announce.clone();
        if let Some(content) = self.preview(&tool, target.as_ref()) {
            asked["content"] = json!(content);
        }

        let confinement = match self.permit(call, &tool, target.as_ref(), &asked) {
            Permit::Allowed(confinement) => confinement,
            Permit::Rejected(rejection) => {
                let title = announce["title"].as_str().unwrap_or(&call.name).to_string();
                return self.rejected(call, rejection, title);
            }
            Permit::Cancelled => return self.finish(call, Ending::Cancelled),
        };
        self.update(json!({
            "sessionUpdate": "tool_call_update",
            "toolCallId": call.id,
            "status": "in_progress",
        }));
        let capture = self.capture_before(&tool, target.as_ref());
        let ending = self.execute(call, &tool, target.as_ref(), confinement);
        self.capture_after(capture);
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
            "name": call.name,
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
        self.update(json!({
            "sessionUpdate": "tool_call_update",
            "toolCallId": call.id,
            "status": "in_progress",
        }));
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
        CallResult {
            text,
            cancelled,
            declined: None,
            switched: None,
            question: None,
        }
    }

    /// A declined call: with the user's feedback the model reads it and
    /// the turn goes on; an answer the user gave now stops the turn (unless
    /// configured otherwise); a remembered rejection only tells the model.
    fn rejected(&self, call: &ToolCallRequest, rejection: Rejection, title: String) -> CallResult {
        if let Some(feedback) = rejection.feedback {
            return self.finish(
                call,
                failed(format!(
                    "The user declined this tool call and said:\n{feedback}"
                )),
            );
        }
        let stops = rejection.asked && self.on_reject == crate::config::OnReject::Stop;
        let text = if rejection.by_rule {
            "A permission rule denies this tool call. Do not retry it or work around it; tell the user if it is needed."
        } else if stops {
            "The user declined this tool call; the turn stops here."
        } else {
            "The user declined this tool call. Do not retry it; ask or try another approach."
        };
        let mut result = self.finish(call, failed(text));
        if stops {
            result.declined = Some(title);
        }
        result
    }

    /// Shows the todo list as the plan, and keeps it for status.
    fn publish_plan(&self, todos: &[tools::Todo]) {
        let entries: Vec<Value> = todos
            .iter()
            .map(|todo| {
                json!({
                    "content": todo.content,
                    "priority": todo.priority.unwrap_or(tools::TodoPriority::Medium),
                    "status": todo.status,
                })
            })
            .collect();
        if let Ok(mut live) = self.live.lock() {
            live.plan = Value::Array(entries.clone());
        }
        self.update(json!({"sessionUpdate": "plan", "entries": entries}));
    }

    /// `exit_plan`: the user approves the plan and picks how normal mode
    /// asks, or keeps planning. Asked in every policy: leaving plan mode
    /// is the user's call.
    /// `ask_user`: through a form when the editor offers form
    /// elicitation, else as a permission request whose options are the
    /// choices, else the turn ends with the question and the user's next
    /// prompt is the answer.
    fn ask_user(
        &mut self,
        call: &ToolCallRequest,
        asked: &tools::AskUserArgs,
        announce: &Value,
    ) -> CallResult {
        let answered = |text: String| Ending::Completed {
            content: vec![text_content(&text)],
            text,
        };
        if self.client.capabilities.elicitation.form {
            let mut answer =
                json!({"type": "string", "title": "Answer", "maxLength": FEEDBACK_CAP});
            if !asked.choices.is_empty() {
                answer["enum"] = json!(asked.choices);
            }
            let mut properties = json!({"answer": answer});
            let mut required = vec!["answer"];
            if !asked.choices.is_empty() && asked.allow_free_text {
                properties["other"] = json!({"type": "string", "title": "Or, in your words", "maxLength": FEEDBACK_CAP});
                required.clear();
            }
            let params = json!({
                "sessionId": self.session_id,
                "toolCallId": call.id,
                "mode": "form",
                "message": asked.question,
                "requestedSchema": {"type": "object", "properties": properties, "required": required},
            });
            let ending = match self.client.request("elicitation/create", params) {
                Ok(reply) if reply["action"] == "accept" => {
                    let pick = |key: &str| {
                        reply["content"][key]
                            .as_str()
                            .map(cap_feedback)
                            .filter(|t| !t.trim().is_empty())
                    };
                    match (pick("other"), pick("answer")) {
                        (Some(own), _) => answered(format!("The user answered: {own}")),
                        (None, Some(answer)) => answered(format!("The user answered: {answer}")),
                        (None, None) => answered("The user gave no answer.".into()),
                    }
                }
                Ok(reply) if reply["action"] == "decline" => {
                    answered("The user declined to answer.".into())
                }
                Ok(_) => answered("The user dismissed the question without answering.".into()),
                Err(ClientError::Cancelled) | Err(ClientError::Gone) => Ending::Cancelled,
                Err(ClientError::Rpc(error)) => failed(format!(
                    "Error: the editor could not ask: {}",
                    error.message
                )),
            };
            return self.finish(call, ending);
        }
        if !asked.choices.is_empty() {
            let mut options: Vec<Value> = asked
                .choices
                .iter()
                .enumerate()
                .map(|(i, choice)| json!({"optionId": format!("choice_{}", i + 1), "name": choice, "kind": "allow_once"}))
                .collect();
            options
                .push(json!({"optionId": "none", "name": "None of these", "kind": "reject_once"}));
            // The title the tool call was shown with (the question's
            // first line, shortened), so the editor sees one call; a
            // question the title does not show whole is the content.
            let mut tool_call = json!({
                "toolCallId": call.id,
                "name": call.name,
                "title": announce["title"],
                "kind": "other",
                "status": "pending",
                "rawInput": announce["rawInput"],
            });
            let whole = announce["title"]
                .as_str()
                .is_some_and(|title| title.ends_with(asked.question.as_str()));
            if !whole {
                tool_call["content"] = json!([text_content(&asked.question)]);
            }
            let params = json!({
                "sessionId": self.session_id,
                "toolCall": tool_call,
                "options": options,
            });
            let ending = match self.client.request("session/request_permission", params) {
                Ok(reply) if reply["outcome"]["outcome"] == "cancelled" => Ending::Cancelled,
                Ok(reply) => {
                    let chosen = reply["outcome"]["optionId"]
                        .as_str()
                        .and_then(|id| id.strip_prefix("choice_"))
                        .and_then(|n| n.parse::<usize>().ok())
                        .and_then(|n| asked.choices.get(n.wrapping_sub(1)));
                    match chosen {
                        Some(choice) => answered(format!("The user chose: {choice}")),
                        None => answered("The user chose none of these.".into()),
                    }
                }
                Err(ClientError::Cancelled) | Err(ClientError::Gone) => Ending::Cancelled,
                Err(ClientError::Rpc(error)) => failed(format!(
                    "Error: the editor could not ask: {}",
                    error.message
                )),
            };
            return self.finish(call, ending);
        }
        // The editor has no way to ask: the question is the turn's last
        // message, and the user's next prompt is the answer.
        let mut result = self.finish(
            call,
            answered("The question is shown to the user; their next message is the answer.".into()),
        );
        let mut question = asked.question.trim().to_string();
        for (i, choice) in asked.choices.iter().enumerate() {
            question.push_str(&format!("\n{}. {choice}", i + 1));
        }
        result.question = Some(question);
        result
    }

    fn exit_plan(&mut self, call: &ToolCallRequest, plan: &str, announce: &Value) -> CallResult {
        if !self.read_only {
            return self.finish(call, failed("Error: the session is not in plan mode."));
        }
        let params = json!({
            "sessionId": self.session_id,
            "toolCall": {
                "toolCallId": call.id,
                "name": call.name,
                "title": announce["title"],
                "kind": "switch_mode",
                "status": "pending",
                "rawInput": announce["rawInput"],
                "content": [text_content(plan)],
            },
            "options": [
                {"optionId": "normal_ask", "name": "Carry it out; edits and commands ask first", "kind": "allow_once"},
                {"optionId": "normal_auto", "name": "Carry it out; edits in the workspace run freely (auto)", "kind": "allow_once"},
                {"optionId": "keep_planning", "name": "Keep planning", "kind": "reject_once"},
            ],
        });
        let answer = match self.client.request("session/request_permission", params) {
            Ok(answer) => answer,
            Err(ClientError::Cancelled) | Err(ClientError::Gone) => {
                return self.finish(call, Ending::Cancelled)
            }
            Err(ClientError::Rpc(error)) => {
                log::warn!("the plan question failed: {}", error.message);
                Value::Null
            }
        };
        if answer["outcome"]["outcome"] == "cancelled" {
            return self.finish(call, Ending::Cancelled);
        }
        let policy = match answer["outcome"]["optionId"].as_str() {
            Some("normal_ask") => Policy::Ask,
            Some("normal_auto") => Policy::Auto,
            _ => {
                let text = "The user wants to keep planning: stay in plan mode, refine the plan, and ask again with exit_plan when it is ready.";
                return self.finish(
                    call,
                    Ending::Completed {
                        content: vec![text_content(text)],
                        text: text.into(),
                    },
                );
            }
        };
        self.read_only = false;
        self.policy = policy;
        let text = format!(
            "The user approved the plan. The session is now in normal mode (approval policy: {}); every tool is available. Carry out the plan.",
            if policy == Policy::Ask { "ask" } else { "auto" }
        );
        let mut result = self.finish(
            call,
            Ending::Completed {
                content: vec![text_content(&text)],
                text,
            },
        );
        result.switched = Some(policy);
        result
    }

    /// The content a permission request shows besides the title: the
    /// diff an edit would make (computed before asking), or the exact
    /// command line and folder.
    fn preview(&self, tool: &Tool, target: Option<&paths::Resolved>) -> Option<Vec<Value>> {
        if matches!(
            tool,
            Tool::ApplyPatch(_) | Tool::DeleteFile(_) | Tool::MoveFile(_)
        ) {
            let changes = self.plan_files(tool).ok()?;
            return Some(changes.iter().filter_map(change_diff).collect());
        }
        let target = target?;
        let editor = EditorAccess {
            client: self.client,
        };
        let limits = self.processes.file_limits;
        let change = match tool {
            Tool::WriteFile(args) => {
                files::preview_write(&target.path, &args.content, &editor, limits)
            }
            Tool::EditFile(args) => files::preview_edit(&target.path, &args.edits, &editor, limits),
            Tool::RunCommand(args) => {
                let text = format!("```sh\n{}\n```\nin {}", args.command, target.path.display());
                return Some(vec![text_content(&text)]);
            }
            _ => return None,
        };
        // An edit that cannot apply fails when it runs; the request still
        // shows what was asked.
        let change = change.ok()?;
        Some(vec![diff_content(&target.path, &change)])
    }

    fn permit(
        &mut self,
        call: &ToolCallRequest,
        tool: &Tool,
        target: Option<&paths::Resolved>,
        announce: &Value,
    ) -> Permit {
        // The file tools that change several paths are judged by what
        // they would change: every file a patch touches, both ends of a
        // move. A plan that fails asks nothing; the call then fails.
        // Judged by the paths they name, whether or not the plan works:
        // a failing plan must not become a free probe of files the policy
        // would ask about (its error says what the file holds).
        if matches!(
            tool,
            Tool::ApplyPatch(_) | Tool::DeleteFile(_) | Tool::MoveFile(_)
        ) {
            let named = match self.named_paths(tool) {
                Ok(named) => named,
                // A patch that does not even parse touches nothing.
                Err(_) => return Permit::Allowed(Confinement::None),
            };
            return self.permit_changes(call, &named, announce);
        }
        let action = match (tool, target) {
            (Tool::FetchUrl(args), _) => Action::Fetch { url: &args.url },
            (Tool::TodoWrite(_) | Tool::GoalUpdate(_), _) | (_, None) => Action::Plan,
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

    /// Keeps what a call is about to change: the files of a file tool, or
    /// the workspace before a command not proven read-only.
    fn capture_before(&self, tool: &Tool, target: Option<&paths::Resolved>) -> Capture {
        let Some(checkpoints) = self.checkpoints else {
            return Capture::Nothing;
        };
        let paths: Vec<std::path::PathBuf> = match (tool, target) {
            (Tool::WriteFile(_) | Tool::EditFile(_), Some(target)) => vec![target.path.clone()],
            (Tool::ApplyPatch(_) | Tool::DeleteFile(_) | Tool::MoveFile(_), _) => {
                match self.plan_files(tool) {
                    Ok(changes) => changes
                        .iter()
                        .flat_map(|c| c.paths().into_iter().map(Path::to_path_buf))
                        .collect(),
                    Err(_) => return Capture::Nothing,
                }
            }
            (Tool::RunCommand(args), Some(cwd)) if self.may_change(&args.command, cwd) => {
                let cancelled = || self.cancel.is_cancelled();
                return match checkpoints
                    .borrow_mut()
                    .before_command(self.root, &cancelled)
                {
                    Some(scan) => Capture::Workspace(scan),
                    None => Capture::Nothing,
                };
            }
            _ => return Capture::Nothing,
        };
        let read = |path: &Path| self.checkpoint_read(path);
        Capture::Files(checkpoints.borrow_mut().before_files(&paths, &read))
    }

    fn capture_after(&self, capture: Capture) {
        let Some(checkpoints) = self.checkpoints else {
            return;
        };
        match capture {
            Capture::Nothing => {}
            Capture::Files(pending) => {
                let read = |path: &Path| self.checkpoint_read(path);
                let via_editor = self.client.capabilities.fs.write_text_file;
                checkpoints
                    .borrow_mut()
                    .after_files(pending, &read, via_editor);
            }
            Capture::Workspace(scan) => {
                let cancelled = || false;
                checkpoints
                    .borrow_mut()
                    .after_command(self.root, scan, &cancelled);
            }
        }
    }

    /// A file as a checkpoint keeps it: the editor's text when it reads
    /// (what the user sees), else the bytes on disk.
    fn checkpoint_read(&self, path: &Path) -> crate::checkpoint::Contents {
        use crate::checkpoint::Contents;
        let disk = crate::checkpoint::read_disk(
            path,
            crate::checkpoint::Settings::default().max_file_bytes,
        );
        // Only text files are the editor's (as the file tools do).
        let text = matches!(&disk, Contents::Data(b) if std::str::from_utf8(b).is_ok());
        if text && self.client.capabilities.fs.read_text_file {
            if let Ok(text) = self.client.read_text_file(path) {
                return Contents::Data(text.into_bytes());
            }
        }
        disk
    }

    /// Whether a command may change the workspace: anything not proven
    /// read-only by the policy's parser.
    fn may_change(&self, command_line: &str, cwd: &paths::Resolved) -> bool {
        let context = crate::policy::Context {
            root: self.root,
            cwd: &cwd.path,
            path_var: std::env::var_os("PATH"),
        };
        let cancel = Some(self.cancel.signal());
        !crate::policy::judge_or_cancel(command_line, &context, cancel).is_read_only()
    }

    /// A path outside the workspace that lies inside one of the session's
    /// additional roots (after symlinks) counts as inside.
    fn widen(&self, mut target: paths::Resolved) -> paths::Resolved {
        if target.inside {
            return target;
        }
        let shown = target.path.display().to_string();
        for root in self.extra_roots {
            let there = paths::resolve(root, &shown);
            if there.inside {
                target.inside = true;
                target.git_internal = there.git_internal;
                break;
            }
        }
        target
    }

    /// Every path a patch, a deletion or a move names (a move's both
    /// ends), resolved; an error only for a patch that does not parse.
    fn named_paths(&self, tool: &Tool) -> Result<Vec<paths::Resolved>, String> {
        let resolve = |given: &str| self.widen(paths::resolve(self.root, given));
        Ok(match tool {
            Tool::ApplyPatch(args) => {
                let parsed = patch::parse(&args.patch)?;
                let mut named = Vec::new();
                for operation in &parsed.operations {
                    named.push(resolve(&operation.path));
                    if let patch::OperationKind::Update {
                        move_to: Some(to), ..
                    } = &operation.kind
                    {
                        named.push(resolve(to));
                    }
                }
                named
            }
            Tool::DeleteFile(args) => vec![resolve(&args.path)],
            Tool::MoveFile(args) => vec![resolve(&args.from), resolve(&args.to)],
            _ => Vec::new(),
        })
    }

    /// The changes a patch, a deletion or a move would make, computed
    /// without changing anything (a patch's every hunk checked).
    fn plan_files(&self, tool: &Tool) -> Result<Vec<patch::FileChange>, String> {
        let cap = self.processes.file_limits.edit;
        match tool {
            Tool::ApplyPatch(args) => {
                let parsed = patch::parse(&args.patch)?;
                let editor = EditorAccess {
                    client: self.client,
                };
                let read = |path: &Path| read_for_patch(&editor, path, cap);
                patch::plan(&parsed, self.root, cap, &read)
            }
            Tool::DeleteFile(args) => Ok(vec![patch::delete_plan(self.root, &args.path, cap)?]),
            Tool::MoveFile(args) => Ok(vec![patch::move_plan(
                self.root, &args.from, &args.to, cap,
            )?]),
            _ => Ok(Vec::new()),
        }
    }

    /// Asks once for all the changes of a file tool: allowed when the
    /// policy allows every path, refused when it refuses one, else asked
    /// with every diff shown.
    fn permit_changes(
        &mut self,
        call: &ToolCallRequest,
        named: &[paths::Resolved],
        announce: &Value,
    ) -> Permit {
        let mut asking: Option<Action> = None;
        for target in named {
            let path = target.path.as_path();
            let action = Action::Edit {
                path,
                inside: target.inside && !paths::hard_linked(path),
                git_internal: target.git_internal,
            };
            let decision = match self.rule_for(&action) {
                Some(rules::Decision::Deny) => return Permit::Rejected(Rejection::by_rule()),
                Some(rules::Decision::Allow) => Decision::Allow,
                Some(rules::Decision::Ask) => Decision::Ask,
                None => decide(self.policy, &action, self.approvals),
            };
            match decision {
                Decision::Allow => {}
                Decision::Reject => return Permit::Rejected(Rejection::automatic()),
                Decision::Ask => {
                    asking.get_or_insert(action);
                }
            }
        }
        match asking {
            None => Permit::Allowed(Confinement::None),
            Some(action) => self.ask(call, &action, announce),
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
                let cancel = Some(self.cancel.signal());
                let verdict = crate::policy::judge_or_cancel(command_line, &context, cancel);
                if let crate::policy::Verdict::Ask(reason) = &verdict {
                    log::debug!("command asks: {reason}");
                }
                (verdict.is_read_only(), false)
            }
            Policy::Sandbox => {
                let needs = crate::policy::needs::needs_more(command_line);
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
        // Lasting rules first: a deny is final whatever the policy, an
        // ask asks even where the policy would not, an allow answers.
        match self.rule_for(action) {
            Some(rules::Decision::Deny) => return Permit::Rejected(Rejection::by_rule()),
            Some(rules::Decision::Allow) => return Permit::Allowed(Confinement::None),
            Some(rules::Decision::Ask) => {}
            None => match decide(self.policy, action, self.approvals) {
                Decision::Allow => return Permit::Allowed(Confinement::None),
                Decision::Reject => return Permit::Rejected(Rejection::automatic()),
                Decision::Ask => {}
            },
        }
        let scope = action.scope();
        let mut tool_call = json!({
            "toolCallId": call.id,
            "title": announce["title"],
            "kind": announce["kind"],
            "status": "pending",
            "rawInput": announce["rawInput"],
        });
        for key in ["name", "locations", "content"] {
            if let Some(value) = announce.get(key) {
                tool_call[key] = value.clone();
            }
        }
        let offered = self.options_for(action, &scope);
        let options: Vec<Value> = offered
            .iter()
            .map(|(id, kind, name, _)| json!({"optionId": id, "name": name, "kind": kind}))
            .collect();
        let params = json!({
            "sessionId": self.session_id,
            "toolCall": tool_call,
            "options": options,
        });
        let answer = match self.client.request("session/request_permission", params) {
            Ok(answer) => answer,
            Err(ClientError::Cancelled) | Err(ClientError::Gone) => return Permit::Cancelled,
            // The user did not decline: the question failed. The model is
            // told the call did not run.
            Err(ClientError::Rpc(error)) => {
                log::warn!("permission request failed: {}", error.message);
                return Permit::Rejected(Rejection::automatic());
            }
        };
        let outcome = &answer["outcome"];
        if outcome["outcome"] == "cancelled" {
            return Permit::Cancelled;
        }
        let key = action.key();
        let feedback = feedback_of(&answer);
        // Only an option this request offered counts; anything else the
        // client sends is a refusal.
        let chosen = outcome["optionId"]
            .as_str()
            .and_then(|id| offered.into_iter().find(|(offered, ..)| *offered == id))
            .map(|(.., grant)| grant);
        match chosen {
            Some(Grant::Once) => Permit::Allowed(Confinement::None),
            Some(Grant::Exact) => {
                if let Some(key) = key {
                    self.approvals.rejected.remove(&key);
                    self.approvals.allowed.insert(key);
                }
                Permit::Allowed(Confinement::None)
            }
            Some(Grant::Session(rule)) => {
                self.approvals.rules.push(rule);
                Permit::Allowed(Confinement::None)
            }
            Some(Grant::Project(rule)) => {
                self.save_project_rule(&rule);
                self.approvals.rules.push(rule);
                Permit::Allowed(Confinement::None)
            }
            Some(Grant::RejectAlways) => {
                if let Some(key) = key {
                    self.approvals.allowed.remove(&key);
                    self.approvals.rejected.insert(key);
                }
                Permit::Rejected(Rejection::asked(feedback))
            }
            Some(Grant::RejectWithFeedback) if feedback.is_none() => {
                match self.ask_feedback(call, announce) {
                    Ok(feedback) => Permit::Rejected(Rejection::asked(feedback)),
                    Err(()) => Permit::Cancelled,
                }
            }
            _ => Permit::Rejected(Rejection::asked(feedback)),
        }
    }

    /// The options a permission request offers, each with what choosing
    /// it grants. A client that binds one key per kind (the first or the
    /// last option of a kind) must never grant more than the narrowest
    /// lasting answer, so by default there is one option of each kind, the
    /// "always" one scoped to this command's prefix (or this exact line)
    /// or this file, for the session. The broader answers (every edit,
    /// this project, saved) and the feedback form are for a client that
    /// shows every option by its name and asked for them
    /// (`_meta.spindle.permissionScopes`).
    fn options_for(
        &self,
        action: &Action<'_>,
        scope: &str,
    ) -> Vec<(&'static str, &'static str, String, Grant)> {
        let mut options = vec![("allow_once", "allow_once", "Allow".to_string(), Grant::Once)];
        let broader = self.broader_rule(action);
        if self.client.capabilities.meta.spindle.permission_scopes {
            options.push((
                "allow_always",
                "allow_always",
                format!("Always allow {scope}"),
                Grant::Exact,
            ));
            if let Some(rule) = broader {
                let saved = self
                    .config_path
                    .map(|path| path.display().to_string())
                    .unwrap_or_else(|| "your config file".into());
                let what = rules::describe(&rule);
                options.push((
                    "allow_rule",
                    "allow_always",
                    format!("Always allow {what} in this session"),
                    Grant::Session(rule.clone()),
                ));
                options.push((
                    "allow_project",
                    "allow_always",
                    format!("Always allow {what} in this project (saved in {saved})"),
                    Grant::Project(rule),
                ));
            }
            options.push((
                "reject_once",
                "reject_once",
                "Reject".into(),
                Grant::RejectOnce,
            ));
            if self.client.capabilities.elicitation.form {
                options.push((
                    "reject_with_feedback",
                    "reject_once",
                    "Reject, and say what to do instead…".into(),
                    Grant::RejectWithFeedback,
                ));
            }
        } else {
            // A command's prefix is the one broader answer narrow enough
            // to offer alone; "every edit" is not.
            let always = match broader {
                Some(rule) if matches!(action, Action::Command { .. }) => (
                    format!("Always allow {} in this session", rules::describe(&rule)),
                    Grant::Session(rule),
                ),
                _ => (
                    format!("Always allow {scope} in this session"),
                    Grant::Exact,
                ),
            };
            options.push(("allow_always", "allow_always", always.0, always.1));
            options.push((
                "reject_once",
                "reject_once",
                "Reject".into(),
                Grant::RejectOnce,
            ));
        }
        options.push((
            "reject_always",
            "reject_always",
            format!("Always reject {scope}"),
            Grant::RejectAlways,
        ));
        options
    }

    /// What the lasting rules (with this session's) say of an action.
    fn rule_for(&self, action: &Action<'_>) -> Option<rules::Decision> {
        let (subject, may_allow) = match action {
            Action::Command { command_line, .. } => (Subject::Command { line: command_line }, true),
            Action::Edit {
                path,
                inside,
                git_internal,
            } => {
                // A symlink out of the workspace, or a repository's own
                // files, are never allowed by a pattern.
                let escapes = !inside && path.starts_with(self.root);
                (Subject::Edit { path }, !git_internal && !escapes)
            }
            Action::Read { path, inside } => {
                let escapes = !inside && path.starts_with(self.root);
                (Subject::Read { path }, !escapes)
            }
            Action::Mcp { server, tool, .. } => (Subject::Mcp { server, tool }, true),
            Action::Fetch { .. } | Action::Plan => return None,
        };
        let decision = if self.approvals.rules.is_empty() {
            self.rules.decide(&subject, self.root)
        } else {
            let mut set = self.rules.clone();
            for rule in &self.approvals.rules {
                set.with_session(rule.clone());
            }
            set.decide(&subject, self.root)
        };
        match decision {
            Some(rules::Decision::Allow) if !may_allow => None,
            other => other,
        }
    }

    /// The broader answer the dialog offers besides "always this exact
    /// call": every command with the same start (`cargo test …`), or every
    /// edit inside the workspace.
    fn broader_rule(&self, action: &Action<'_>) -> Option<Rule> {
        match action {
            Action::Command { command_line, .. } => rules::command_prefix(command_line)
                .map(|prefix| Rule::command(prefix, rules::Decision::Allow)),
            Action::Edit {
                inside: true,
                git_internal: false,
                ..
            } => Some(Rule::path(ToolClass::Edit, "**", rules::Decision::Allow)),
            _ => None,
        }
    }

    /// Saves a rule for this workspace in the user's config file.
    fn save_project_rule(&self, rule: &Rule) {
        let Some(path) = self.config_path else {
            return;
        };
        let project = self.root.display().to_string();
        if let Err(error) = crate::config::add_project_rule(path, &project, rule.clone()) {
            log::warn!("cannot save the permission rule: {error}");
            self.updates
                .borrow_mut()
                .notice(&crate::acp::fit::Notice::warning(
                    "The rule could not be saved",
                    format!("{error}. It holds for this session."),
                ));
        }
    }

    /// Asks what to do instead, through a form (the client offers form
    /// elicitation). `Err` when the turn was cancelled meanwhile.
    fn ask_feedback(&self, call: &ToolCallRequest, announce: &Value) -> Result<Option<String>, ()> {
        let title = announce["title"].as_str().unwrap_or(&call.name);
        let params = json!({
            "sessionId": self.session_id,
            "toolCallId": call.id,
            "mode": "form",
            "message": format!("You declined: {title}. What should the agent do instead?"),
            "requestedSchema": {
                "type": "object",
                "properties": {"feedback": {
                    "type": "string",
                    "title": "Instead",
                    "description": "Told to the model, which then carries on",
                    "maxLength": FEEDBACK_CAP,
                }},
                "required": ["feedback"],
            },
        });
        match self.client.request("elicitation/create", params) {
            Ok(answer) if answer["action"] == "accept" => Ok(answer["content"]["feedback"]
                .as_str()
                .map(cap_feedback)
                .filter(|text| !text.is_empty())),
            Ok(_) => Ok(None),
            Err(ClientError::Cancelled) | Err(ClientError::Gone) => Err(()),
            Err(ClientError::Rpc(error)) => {
                log::warn!("the feedback form failed: {}", error.message);
                Ok(None)
            }
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
            Tool::ApplyPatch(_) | Tool::DeleteFile(_) | Tool::MoveFile(_) => {
                self.change_files(tool, &editor)
            }
            Tool::ExitPlan(_) => failed("Error: exit_plan is answered by the user"),
            Tool::AskUser(_) => failed("Error: ask_user is answered by the user"),
            Tool::Task(_) => {
                failed("Error: a subagent cannot hand out tasks of its own; do the work yourself")
            }
            Tool::FetchUrl(args) => {
                let max = args
                    .max_chars
                    .unwrap_or(tools::fetch::TEXT_CAP)
                    .clamp(1, tools::fetch::TEXT_CAP);
                let url = args.url.clone();
                // The request runs beside the turn, which waits for it or
                // for a cancel, whichever comes first.
                let (done, answer) = crossbeam_channel::bounded(1);
                let spawned = std::thread::Builder::new()
                    .name("spindle-fetch".into())
                    .spawn(move || {
                        let _ = done.send(tools::fetch::fetch(&url, max));
                    });
                if spawned.is_err() {
                    return failed("Error: cannot start the fetch");
                }
                crossbeam_channel::select! {
                    recv(answer) -> result => match result {
                        Ok(Ok(text)) => completed_text(text),
                        Ok(Err(error)) => failed(format!("Error: {error}")),
                        Err(_) => failed("Error: the fetch failed"),
                    },
                    recv(self.cancel.signal()) -> _ => Ending::Cancelled,
                }
            }
            Tool::JobOutput(args) => {
                match self
                    .jobs
                    .read_for_model(&args.job_id, args.offset, JOB_READ)
                {
                    Ok(read) => {
                        let info = read.info;
                        // A subagent's updates, as readable text.
                        let text = if info.kind == "agent" {
                            super::agent_log::render_updates(&read.text)
                        } else {
                            read.text
                        };
                        let mut out = String::new();
                        if read.skipped > 0 {
                            out.push_str(&format!("[{} bytes skipped]\n", read.skipped));
                        }
                        if !text.is_empty() {
                            out.push_str(&text);
                        } else if read.not_kept == 0 {
                            out.push_str("(no new output)");
                        }
                        if read.not_kept > 0 {
                            // The log is full: what came since was counted,
                            // not kept.
                            out.push_str(&format!(
                                "{}[{} bytes of new output were not kept: the job's log is full]",
                                if text.is_empty() { "" } else { "\n" },
                                read.not_kept
                            ));
                        }
                        out.push_str(&format!(
                            "\n[job {}: {}{}]",
                            info.job_id,
                            info.state,
                            info.exit_code
                                .map(|c| format!(", exit code {c}"))
                                .unwrap_or_default()
                        ));
                        completed_text(out)
                    }
                    Err(error) => failed(format!("Error: {error}")),
                }
            }
            Tool::JobStop(args) => match self.jobs.kill(&args.job_id) {
                Ok(info) => {
                    completed_text(format!("Stopped job {} (`{}`).", info.job_id, info.command))
                }
                Err(error) => failed(format!("Error: {error}")),
            },
            Tool::GoalUpdate(args) => {
                if let Some(todos) = &args.todos {
                    self.publish_plan(todos);
                }
                self.goal_updates.borrow_mut().push(args.clone());
                completed_text("Goal update recorded.".into())
            }
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
                if args.background {
                    // In the editor's terminal when it offers one: a dev
                    // server the user can watch there.
                    if self.client.capabilities.terminal {
                        return self.start_terminal_job(&args.command, &path, &launch);
                    }
                    return self.start_job(&args.command, &path, launch);
                }
                if self.client.capabilities.terminal {
                    self.run_in_terminal(call, &args.command, &path, timeout, &launch)
                } else {
                    self.run_locally(call, &args.command, &path, timeout, launch)
                }
            }
            Tool::TodoWrite(args) => {
                self.publish_plan(&args.todos);
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

impl Runner<'_> {
    /// Runs a patch, deletion or move: planned again (the files may have
    /// changed while the user was asked), then applied. Text files are
    /// written through the editor when it offers writing.
    fn change_files(&self, tool: &Tool, editor: &EditorAccess) -> Ending {
        let changes = match self.plan_files(tool) {
            Ok(changes) => changes,
            Err(error) => return failed(format!("Error: {error}; nothing was changed")),
        };
        let mut write = |path: &Path, text: &str| {
            if files::EditorFiles::can_write(editor) {
                files::EditorFiles::write_text(editor, path, text)
            } else {
                patch::local_write(path, text)
            }
        };
        let applied = patch::apply(
            &changes,
            &mut write,
            &mut patch::local_remove,
            &mut patch::local_move,
        );
        match applied {
            Ok(()) => Ending::Completed {
                text: patch::summary(&changes, self.root),
                content: changes.iter().filter_map(change_diff).collect(),
            },
            Err(error) => failed(format!("Error: {error}")),
        }
    }
}

/// A file for a patch: through the editor when it reads (unsaved changes
/// count), locally otherwise.
fn read_for_patch(editor: &EditorAccess, path: &Path, cap: u64) -> Result<Option<String>, String> {
    if files::EditorFiles::can_read(editor) && path.is_file() {
        if let Ok(text) = files::EditorFiles::read_text(editor, path) {
            return Ok(Some(text));
        }
    }
    patch::local_read(path, cap)
}

/// The most bytes of a job's output one `job_output` returns.
const JOB_READ: usize = 16 * 1024;

impl Runner<'_> {
    /// Starts a background job and answers at once with its id and first
    /// output.
    fn start_job(
        &self,
        command_line: &str,
        cwd: &Path,
        launch: super::processes::Launch,
    ) -> Ending {
        let Some(log_dir) = self.processes.session_dir.clone() else {
            return failed(
                "Error: background jobs need the session's folder, which is not available",
            );
        };
        let spec = crate::tools::jobs::JobSpec {
            command_line: command_line.to_string(),
            cwd: cwd.to_path_buf(),
            env_remove: launch.env_remove,
            env_set: launch.env_set,
            sandbox: launch.sandbox,
            log_dir,
            log_cap: self.processes.log_cap,
            epoch: self.epoch,
        };
        match self.jobs.start(spec) {
            Ok(info) => {
                let Some(first) = self.first_output(&info.job_id, Duration::from_millis(300))
                else {
                    return Ending::Cancelled;
                };
                let text = format!(
                    "Started job {} (pid {}): `{}`. Read its output with job_output, stop it with job_stop.\nFirst output:\n{first}",
                    info.job_id, info.pid, info.command,
                );
                Ending::Completed {
                    content: vec![text_content(&text)],
                    text,
                }
            }
            Err(error) => failed(format!("Error: {error}")),
        }
    }
}

impl Runner<'_> {
    /// What a job just started printed within `wait` (a server's address),
    /// for the model; `None` when the turn was cancelled meanwhile.
    pub(in crate::agent) fn first_output(&self, job_id: &str, wait: Duration) -> Option<String> {
        if self.cancel.sleep(wait) {
            return None;
        }
        let first = self
            .jobs
            .read_for_model(job_id, None, 2_048)
            .map(|read| read.text)
            .unwrap_or_default();
        Some(if first.is_empty() {
            "(none yet)".into()
        } else {
            first
        })
    }
}

/// The diff of one planned change: at the destination of a move, empty
/// new text and `deleted` for a deletion (RFD "diff-delete"; only a client
/// that opted in gets the flag, `acp::fit`), none for a file that is not
/// text.
fn change_diff(change: &patch::FileChange) -> Option<Value> {
    let path = match &change.kind {
        patch::ChangeKind::Move { to } => to.as_path(),
        _ => change.path.as_path(),
    };
    let new_text = match change.kind {
        patch::ChangeKind::Delete => {
            change.old_text.as_ref()?;
            String::new()
        }
        _ => change.new_text.clone()?,
    };
    let mut diff = json!({"type": "diff", "path": path, "newText": new_text});
    if let Some(old) = &change.old_text {
        diff["oldText"] = json!(old);
    }
    if let patch::ChangeKind::Delete = change.kind {
        diff["deleted"] = json!(true);
    }
    Some(diff)
}

/// What a permission option grants when the user picks it.
enum Grant {
    Once,
    /// This exact call (its key) for the session.
    Exact,
    /// A rule for the session.
    Session(Rule),
    /// A rule for this workspace, saved in the user's config.
    Project(Rule),
    RejectOnce,
    /// Reject and ask, through a form, what to do instead.
    RejectWithFeedback,
    RejectAlways,
}

enum Permit {
    Allowed(Confinement),
    Rejected(Rejection),
    Cancelled,
}

/// A rejection: whether the user gave it now (rather than a remembered
/// answer or a rule), and what they said to do instead.
struct Rejection {
    asked: bool,
    feedback: Option<String>,
    /// A `deny` rule refused it.
    by_rule: bool,
}

impl Rejection {
    fn asked(feedback: Option<String>) -> Rejection {
        Rejection {
            asked: true,
            feedback,
            by_rule: false,
        }
    }

    fn automatic() -> Rejection {
        Rejection {
            asked: false,
            feedback: None,
            by_rule: false,
        }
    }

    fn by_rule() -> Rejection {
        Rejection {
            asked: false,
            feedback: None,
            by_rule: true,
        }
    }
}

/// The user's reason for a rejection, sent by the client as
/// `_meta.spindle.feedback` on the permission answer (or its outcome).
fn feedback_of(answer: &Value) -> Option<String> {
    [&answer["_meta"], &answer["outcome"]["_meta"]]
        .iter()
        .find_map(|meta| meta["spindle"]["feedback"].as_str())
        .map(cap_feedback)
        .filter(|text| !text.is_empty())
}

fn cap_feedback(text: &str) -> String {
    let text = text.trim();
    let mut end = text.len().min(FEEDBACK_CAP);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text[..end].to_string()
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

fn diff_content(path: &Path, change: &files::Change) -> Value {
    let mut diff = json!({"type": "diff", "path": path, "newText": change.new_text});
    if let Some(old) = &change.old_text {
        diff["oldText"] = json!(old);
    }
    diff
}

fn changed(path: &Path, change: files::Change) -> Ending {
    Ending::Completed {
        content: vec![diff_content(path, &change)],
        text: change.summary,
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

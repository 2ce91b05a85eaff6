//! Whether a tool call may run: the lasting rules, the approval policy
//! and, where they say so, the user, asked with options scoped to the
//! call; and what the model is told of a rejection.

use super::client::ClientError;
use super::processes::Confinement;
use super::runner::{failed, CallResult, Runner};
use crate::agent::common::permission::{decide, Action, Approvals, Decision, Policy, Protection};
use crate::policy::rules::{self, Rule, Subject, ToolClass};
use crate::provider::ToolCallRequest;
use crate::tools::{paths, Tool};
use serde_json::{json, Value};

/// The most bytes of feedback a rejection passes to the model.
pub(super) const FEEDBACK_CAP: usize = 4_000;

impl Runner<'_> {
    pub(super) fn permit(
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
            return self.permit_changes(call, tool, &named, announce);
        }
        let action = match (tool, target) {
            (Tool::FetchUrl(args), _) => Action::Fetch { url: &args.url },
            // A note for every later session asks outside yolo, wherever
            // it goes (as an edit outside the workspace does).
            (Tool::Remember(_), Some(target)) => Action::Edit {
                path: &target.path,
                inside: false,
                protection: target.protection.max(Protection::Instructs),
            },
            (Tool::TodoWrite(_) | Tool::GoalUpdate(_), _) | (_, None) => Action::Plan,
            (Tool::WriteFile(_) | Tool::EditFile(_), Some(target)) => Action::Edit {
                path: &target.path,
                // A file with other hard links may be a name for a file
                // outside the workspace or a protected file.
                inside: target.inside && !paths::hard_linked(&target.path),
                protection: target.protection,
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
        // The diff is shown only to a person asked: computing it reads the
        // file, through the editor when it offers its buffers.
        let permit = match self.settle(&action) {
            Some(permit) => permit,
            None => {
                let asked = self.with_preview(tool, target, announce);
                self.question(call, &action, &asked)
            }
        };
        match permit {
            Permit::Allowed(Confinement::None) => Permit::Allowed(confinement),
            other => other,
        }
    }

    /// The request's tool call with what the user approves besides the
    /// title: the diff, or the exact command line and folder.
    fn with_preview(
        &self,
        tool: &Tool,
        target: Option<&paths::Resolved>,
        announce: &Value,
    ) -> Value {
        let mut asked = announce.clone();
        if let Some(content) = self.preview(tool, target) {
            asked["content"] = json!(content);
        }
        asked
    }

    /// Asks once for all the changes of a file tool: allowed when the
    /// policy allows every path, refused when it refuses one, else asked
    /// with every diff shown.
    fn permit_changes(
        &mut self,
        call: &ToolCallRequest,
        tool: &Tool,
        named: &[paths::Resolved],
        announce: &Value,
    ) -> Permit {
        let mut asking: Option<Action> = None;
        for target in named {
            let path = target.path.as_path();
            let action = Action::Edit {
                path,
                inside: target.inside && !paths::hard_linked(path),
                protection: target.protection,
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
        if self.hook_ask && asking.is_none() {
            asking = named.first().map(|target| Action::Edit {
                path: target.path.as_path(),
                inside: target.inside,
                protection: target.protection,
            });
        }
        match asking {
            None => Permit::Allowed(Confinement::None),
            Some(action) => {
                let asked = self.with_preview(tool, None, announce);
                self.ask(call, &action, &asked)
            }
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
                    shell: self.processes.shell.kind,
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
    pub(super) fn ask(
        &mut self,
        call: &ToolCallRequest,
        action: &Action<'_>,
        announce: &Value,
    ) -> Permit {
        if let Some(permit) = self.settle(action) {
            return permit;
        }
        self.question(call, action, announce)
    }

    /// What the rules and the policy decide without asking anyone: `None`
    /// when the user is to be asked. Lasting rules first: a deny is final
    /// whatever the policy, an ask asks even where the policy would not,
    /// an allow answers. A hook's "ask" asks as a rule's would.
    fn settle(&self, action: &Action<'_>) -> Option<Permit> {
        let allow = !self.hook_ask;
        match self.rule_for(action) {
            Some(rules::Decision::Deny) => Some(Permit::Rejected(Rejection::by_rule())),
            Some(rules::Decision::Allow) if allow => Some(Permit::Allowed(Confinement::None)),
            Some(rules::Decision::Allow | rules::Decision::Ask) => None,
            None => match decide(self.policy, action, self.approvals) {
                Decision::Allow if allow => Some(Permit::Allowed(Confinement::None)),
                Decision::Allow | Decision::Ask => None,
                Decision::Reject => Some(Permit::Rejected(Rejection::automatic())),
            },
        }
    }

    /// Puts the call to the user.
    fn question(
        &mut self,
        call: &ToolCallRequest,
        action: &Action<'_>,
        announce: &Value,
    ) -> Permit {
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
        // A protected file says why it asks, in the title every client
        // shows.
        if let Action::Edit { protection, .. } = action {
            if let Some(warning) = protection.warning() {
                let shown = announce["title"].as_str().unwrap_or(&call.name);
                tool_call["title"] = json!(format!("{shown} ({warning})"));
            }
        }
        let title = tool_call["title"]
            .as_str()
            .unwrap_or(&call.name)
            .to_string();
        self.notify(
            &format!("Spindle needs your permission: {title}"),
            "permission_prompt",
        );
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
        // A subagent's child session waits on the user meanwhile.
        self.updates
            .borrow_mut()
            .subagent_update(json!({"state": {"state": "requires_action"}}));
        let asked = self.client.request("session/request_permission", params);
        self.updates
            .borrow_mut()
            .subagent_update(json!({"state": {"state": "running"}}));
        let answer = match asked {
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
        if unasked(&answer) {
            return Permit::Rejected(Rejection {
                unasked: true,
                ..Rejection::automatic()
            });
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
        // A call with nothing to remember an answer by (a plan, a task a
        // hook asks about) offers no "always": it would grant nothing.
        if action.key().is_none() {
            options.push((
                "reject_once",
                "reject_once",
                "Reject".into(),
                Grant::RejectOnce,
            ));
            return options;
        }
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
            // Nor is a line that names a file Spindle runs: "always allow
            // `cp …`" was not an answer about `.claude/settings.json`.
            Action::Command { command_line, .. } => (
                Subject::Command { line: command_line },
                crate::tools::protected::line_names_executed(command_line).is_none(),
            ),
            Action::Edit {
                path,
                inside,
                protection,
            } => {
                // A symlink out of the workspace, or a protected file (git's
                // own, what Spindle runs, what instructs the model), are
                // never allowed by a pattern.
                let escapes = !inside && path.starts_with(self.root);
                (
                    Subject::Edit { path },
                    *protection == Protection::None && !escapes,
                )
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
                protection: Protection::None,
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
        let project = crate::config::project::key(self.root);
        if let Err(error) = crate::config::project::add_project_rule(path, &project, rule.clone()) {
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

    /// A declined call: with the user's feedback the model reads it and
    /// the turn goes on; an answer the user gave now stops the turn (unless
    /// configured otherwise); a remembered rejection only tells the model.
    pub(super) fn rejected(
        &self,
        call: &ToolCallRequest,
        rejection: Rejection,
        title: String,
    ) -> CallResult {
        if let Some(feedback) = rejection.feedback {
            return self.finish(
                call,
                failed(format!(
                    "The user declined this tool call and said:\n{feedback}"
                )),
            );
        }
        if rejection.unasked {
            let mut result = self.finish(
                call,
                failed("Nobody could be asked to approve this tool call (there is no terminal or editor to ask), so it did not run; the turn stops here."),
            );
            result.declined = Some(title);
            result.unasked = true;
            return result;
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

pub(super) enum Permit {
    Allowed(Confinement),
    Rejected(Rejection),
    Cancelled,
}

/// A rejection: whether the user gave it now (rather than a remembered
/// answer or a rule), and what they said to do instead.
pub(super) struct Rejection {
    asked: bool,
    feedback: Option<String>,
    /// A `deny` rule refused it.
    by_rule: bool,
    /// Nobody could be asked (`_meta.spindle.unasked` on the answer).
    unasked: bool,
}

impl Rejection {
    fn asked(feedback: Option<String>) -> Rejection {
        Rejection {
            asked: true,
            feedback,
            by_rule: false,
            unasked: false,
        }
    }

    fn automatic() -> Rejection {
        Rejection {
            asked: false,
            feedback: None,
            by_rule: false,
            unasked: false,
        }
    }

    fn by_rule() -> Rejection {
        Rejection {
            asked: false,
            feedback: None,
            by_rule: true,
            unasked: false,
        }
    }
}

/// Whether the client answered that nobody could be asked (`spindle exec`
/// without a terminal): `_meta.spindle.unasked` on the answer or its
/// outcome.
pub(super) fn unasked(answer: &Value) -> bool {
    [&answer["_meta"], &answer["outcome"]["_meta"]]
        .iter()
        .any(|meta| meta["spindle"]["unasked"] == true)
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

pub(super) fn cap_feedback(text: &str) -> String {
    let text = text.trim();
    let mut end = text.len().min(FEEDBACK_CAP);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text[..end].to_string()
}

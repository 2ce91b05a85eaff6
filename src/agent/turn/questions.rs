//! The tools the user answers: `ask_user` (a form, a choice, or the
//! turn's last message) and `exit_plan` (approve the plan and leave plan
//! mode).

use super::client::ClientError;
use super::permission::{cap_feedback, FEEDBACK_CAP};
use super::runner::{failed, text_content, CallResult, Ending, Runner};
use crate::agent::common::permission::Policy;
use crate::provider::ToolCallRequest;
use crate::tools;
use serde_json::{json, Value};

impl Runner<'_> {
    /// `ask_user`: through a form when the editor offers form
    /// elicitation, else as a permission request whose options are the
    /// choices, else the turn ends with the question and the user's next
    /// prompt is the answer.
    pub(super) fn ask_user(
        &mut self,
        call: &ToolCallRequest,
        asked: &tools::AskUserArgs,
        announce: &Value,
    ) -> CallResult {
        self.notify(
            &format!("Spindle has a question: {}", asked.question.trim()),
            "question",
        );
        if self.client.capabilities.elicitation.form {
            let ending = self.ask_by_form(call, asked);
            return self.finish(call, ending);
        }
        if !asked.choices.is_empty() {
            if let Some(ending) = self.ask_by_choices(call, asked, announce) {
                return self.finish(call, ending);
            }
        }
        // The editor has no way to ask (or nobody is there to answer):
        // the question is the turn's last message, and the user's next
        // prompt is the answer.
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

    /// The question as a form: a free answer, or one of the choices
    /// (with a field of the user's own words when the model allows it).
    fn ask_by_form(&self, call: &ToolCallRequest, asked: &tools::AskUserArgs) -> Ending {
        let mut answer = json!({"type": "string", "title": "Answer", "maxLength": FEEDBACK_CAP});
        if !asked.choices.is_empty() {
            answer["enum"] = json!(asked.choices);
        }
        let mut properties = json!({"answer": answer});
        let mut required = vec!["answer"];
        if !asked.choices.is_empty() && asked.allow_free_text {
            properties["other"] =
                json!({"type": "string", "title": "Or, in your words", "maxLength": FEEDBACK_CAP});
            required.clear();
        }
        let params = json!({
            "sessionId": self.session_id,
            "toolCallId": call.id,
            "mode": "form",
            "message": asked.question,
            "requestedSchema": {"type": "object", "properties": properties, "required": required},
        });
        match self.client.request("elicitation/create", params) {
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
        }
    }

    /// The question as a permission request whose options are the
    /// choices (and "None of these").
    fn ask_by_choices(
        &self,
        call: &ToolCallRequest,
        asked: &tools::AskUserArgs,
        announce: &Value,
    ) -> Option<Ending> {
        let mut options: Vec<Value> = asked
            .choices
            .iter()
            .enumerate()
            .map(|(i, choice)| json!({"optionId": format!("choice_{}", i + 1), "name": choice, "kind": "allow_once"}))
            .collect();
        options.push(json!({"optionId": "none", "name": "None of these", "kind": "reject_once"}));
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
        Some(
            match self.client.request("session/request_permission", params) {
                Ok(reply) if reply["outcome"]["outcome"] == "cancelled" => Ending::Cancelled,
                Ok(reply) if super::permission::unasked(&reply) => return None,
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
            },
        )
    }

    /// `exit_plan`: the user approves the plan and picks how normal mode
    /// asks, or keeps planning. Asked in every policy: leaving plan mode
    /// is the user's call.
    pub(super) fn exit_plan(
        &mut self,
        call: &ToolCallRequest,
        plan: &str,
        announce: &Value,
    ) -> CallResult {
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
}

/// An answer the model reads as the tool's result.
fn answered(text: String) -> Ending {
    Ending::Completed {
        content: vec![text_content(&text)],
        text,
    }
}

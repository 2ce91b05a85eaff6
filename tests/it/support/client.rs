//! The client side of a prompt turn: sends `session/prompt`, answers every
//! request the agent makes meanwhile (permissions, `fs/*`, `terminal/*`)
//! with a closure, and collects what the turn showed.
//!
//! `Exchange` is the step-by-step form (for tests that act in the middle of
//! a turn, e.g. to cancel it); `run_prompt` runs a whole turn in one call.
//! Both return a `Turn`, whose helpers pick tool calls, their statuses and
//! the requests out of the messages, in the order they arrived.

use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::agent::Agent;

/// How the test client answers one request from the agent.
#[derive(Debug, Clone)]
pub enum Answer {
    /// `{"result": value}`.
    Result(Value),
    /// `{"error": {"code": code, "message": message}}`.
    Error { code: i64, message: String },
    /// No answer at all (a user who never clicks, a command that never
    /// exits).
    Ignore,
}

impl Answer {
    /// A permission answer selecting `option_id`.
    pub fn select(option_id: &str) -> Answer {
        Answer::Result(json!({"outcome": {"outcome": "selected", "optionId": option_id}}))
    }

    /// The permission answer a client sends after `session/cancel`.
    pub fn cancelled() -> Answer {
        Answer::Result(json!({"outcome": {"outcome": "cancelled"}}))
    }

    pub fn error(code: i64, message: &str) -> Answer {
        Answer::Error {
            code,
            message: message.to_string(),
        }
    }
}

/// The closure type that answers the agent's requests: it gets the whole
/// request message (`id`, `method`, `params`).
pub type Answerer<'a> = dyn FnMut(&Value) -> Answer + 'a;

/// An answerer for turns that must not make any request: fails the test on
/// the first one.
pub fn no_requests(request: &Value) -> Answer {
    panic!("the agent made an unexpected request: {request}");
}

/// A prompt in flight.
pub struct Exchange {
    /// The id of the `session/prompt` request.
    pub id: Value,
    /// Everything received since the prompt was sent, except its answer:
    /// notifications and the agent's requests, in order.
    pub messages: Vec<Value>,
    /// The prompt's answer, once it came.
    pub response: Option<Value>,
}

impl Exchange {
    /// Sends a text prompt to `session`.
    pub fn prompt(agent: &mut Agent, session: &str, text: &str) -> Exchange {
        let id = agent.request(
            "session/prompt",
            json!({"sessionId": session, "prompt": [{"type": "text", "text": text}]}),
        );
        Exchange {
            id,
            messages: Vec::new(),
            response: None,
        }
    }

    /// Receives messages, answering the agent's requests with `answer`,
    /// until `stop` holds (checked after every message and at least every
    /// 50 ms) or the prompt is answered. Returns whether `stop` held. Panics
    /// if neither happens within `timeout`.
    pub fn until(
        &mut self,
        agent: &mut Agent,
        timeout: Duration,
        answer: &mut Answerer<'_>,
        stop: &mut dyn FnMut(&Exchange) -> bool,
    ) -> bool {
        let deadline = Instant::now() + timeout;
        loop {
            if stop(self) {
                return true;
            }
            if self.response.is_some() {
                return false;
            }
            let now = Instant::now();
            if now >= deadline {
                panic!(
                    "the awaited condition did not hold within {timeout:?}; messages so far:\n{}",
                    render(&self.messages)
                );
            }
            let tick = (deadline - now).min(Duration::from_millis(50));
            if let Some(message) = agent.recv(tick) {
                self.take(agent, message, answer);
            }
        }
    }

    /// Receives messages, answering requests, until the prompt's answer
    /// arrives; panics if it does not within `timeout`.
    pub fn finish(
        mut self,
        agent: &mut Agent,
        timeout: Duration,
        answer: &mut Answerer<'_>,
    ) -> Turn {
        let deadline = Instant::now() + timeout;
        while self.response.is_none() {
            let left = deadline.saturating_duration_since(Instant::now());
            match agent.recv(left) {
                Some(message) => self.take(agent, message, answer),
                None => panic!(
                    "no answer to the prompt within {timeout:?}; messages so far:\n{}",
                    render(&self.messages)
                ),
            }
        }
        Turn {
            response: self.response.take().unwrap_or(Value::Null),
            messages: self.messages,
        }
    }

    /// The requests received so far with this method (whole messages).
    pub fn requests(&self, method: &str) -> Vec<&Value> {
        self.messages
            .iter()
            .filter(|m| m.get("id").is_some() && m["method"] == method)
            .collect()
    }

    fn take(&mut self, agent: &mut Agent, message: Value, answer: &mut Answerer<'_>) {
        if message.get("method").is_none() {
            if message.get("id") == Some(&self.id) {
                self.response = Some(message);
                return;
            }
            panic!("an answer to a request this exchange did not send: {message}");
        }
        if let Some(id) = message.get("id").cloned() {
            match answer(&message) {
                Answer::Result(result) => {
                    agent.send(json!({"jsonrpc": "2.0", "id": id, "result": result}));
                }
                Answer::Error { code, message } => agent.send(json!({
                    "jsonrpc": "2.0",
                    "id": id,
                    "error": {"code": code, "message": message},
                })),
                Answer::Ignore => {}
            }
        }
        self.messages.push(message);
    }
}

/// Sends a prompt and runs the turn to its answer.
pub fn run_prompt(
    agent: &mut Agent,
    session: &str,
    text: &str,
    timeout: Duration,
    mut answer: impl FnMut(&Value) -> Answer,
) -> Turn {
    Exchange::prompt(agent, session, text).finish(agent, timeout, &mut answer)
}

/// A finished prompt turn.
#[derive(Debug, Clone)]
pub struct Turn {
    /// The prompt's answer (the whole response message).
    pub response: Value,
    /// Everything else received during the turn, in order.
    pub messages: Vec<Value>,
}

/// Statuses that end a tool call.
fn is_final(status: &Value) -> bool {
    status == "completed" || status == "failed"
}

impl Turn {
    /// The stop reason; panics (showing the turn) if the prompt failed.
    pub fn stop_reason(&self) -> &str {
        self.response["result"]["stopReason"]
            .as_str()
            .unwrap_or_else(|| panic!("the prompt has no stop reason\n{}", self.dump()))
    }

    /// Every `session/update`'s `update`, in order.
    pub fn updates(&self) -> Vec<&Value> {
        self.messages
            .iter()
            .filter(|m| m["method"] == "session/update" && m.get("id").is_none())
            .map(|m| &m["params"]["update"])
            .collect()
    }

    /// The agent's requests with this method (whole messages), in order.
    pub fn requests(&self, method: &str) -> Vec<&Value> {
        self.messages
            .iter()
            .filter(|m| m.get("id").is_some() && m["method"] == method)
            .collect()
    }

    /// Every request the agent made, in order (whole messages).
    pub fn all_requests(&self) -> Vec<&Value> {
        self.messages
            .iter()
            .filter(|m| m.get("id").is_some())
            .collect()
    }

    /// The `toolCall.toolCallId`s of the permission requests, in order.
    pub fn permission_ids(&self) -> Vec<String> {
        self.requests("session/request_permission")
            .iter()
            .map(|r| {
                r["params"]["toolCall"]["toolCallId"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string()
            })
            .collect()
    }

    /// The text of the agent's message chunks, joined.
    /// What the model said (the agent's own notices left out).
    pub fn text(&self) -> String {
        self.updates()
            .iter()
            .filter(|u| u["sessionUpdate"] == "agent_message_chunk")
            .filter(|u| !super::agent::is_notice(u))
            .filter_map(|u| u["content"]["text"].as_str())
            .collect()
    }

    /// The agent's own notices in this turn.
    pub fn notices(&self) -> String {
        self.updates()
            .iter()
            .filter(|u| super::agent::is_notice(u))
            .map(|u| super::agent::notice_text(u))
            .collect()
    }

    /// The ids of the announced tool calls (`tool_call` updates), in order.
    pub fn tool_call_ids(&self) -> Vec<String> {
        self.updates()
            .iter()
            .filter(|u| u["sessionUpdate"] == "tool_call")
            .map(|u| u["toolCallId"].as_str().unwrap_or_default().to_string())
            .collect()
    }

    /// The `tool_call` announcement of `id`; panics if there is none or
    /// more than one.
    pub fn tool_call(&self, id: &str) -> &Value {
        let found: Vec<&Value> = self
            .updates()
            .into_iter()
            .filter(|u| u["sessionUpdate"] == "tool_call" && u["toolCallId"] == id)
            .collect();
        assert_eq!(
            found.len(),
            1,
            "expected one tool_call announcement of {id}\n{}",
            self.dump()
        );
        found[0]
    }

    /// The `tool_call` and `tool_call_update`s of `id`, in order.
    pub fn updates_of(&self, id: &str) -> Vec<&Value> {
        self.updates()
            .into_iter()
            .filter(|u| {
                (u["sessionUpdate"] == "tool_call" || u["sessionUpdate"] == "tool_call_update")
                    && u["toolCallId"] == id
            })
            .collect()
    }

    /// The statuses reported for `id`, in order.
    pub fn statuses(&self, id: &str) -> Vec<String> {
        self.updates_of(id)
            .iter()
            .filter_map(|u| u["status"].as_str().map(str::to_string))
            .collect()
    }

    /// The update that ended `id` (status `completed` or `failed`). Panics
    /// unless there is exactly one and nothing of `id` comes after it.
    pub fn final_update(&self, id: &str) -> &Value {
        let updates = self.updates_of(id);
        let finals: Vec<usize> = updates
            .iter()
            .enumerate()
            .filter(|(_, u)| is_final(&u["status"]))
            .map(|(index, _)| index)
            .collect();
        assert_eq!(
            finals.len(),
            1,
            "tool call {id} must end exactly once (completed or failed)\n{}",
            self.dump()
        );
        assert_eq!(
            finals[0] + 1,
            updates.len(),
            "tool call {id} was updated after its final status\n{}",
            self.dump()
        );
        updates[finals[0]]
    }

    /// The final status of `id`.
    pub fn final_status(&self, id: &str) -> String {
        self.final_update(id)["status"]
            .as_str()
            .unwrap_or_default()
            .to_string()
    }

    /// The text blocks of the final update of `id`, joined with newlines.
    pub fn final_text(&self, id: &str) -> String {
        content_text(self.final_update(id))
    }

    /// The `content` array of the final update of `id`.
    pub fn final_content(&self, id: &str) -> Vec<Value> {
        self.final_update(id)["content"]
            .as_array()
            .cloned()
            .unwrap_or_default()
    }

    /// Every `plan` update's entries, in order.
    pub fn plans(&self) -> Vec<&Value> {
        self.updates()
            .into_iter()
            .filter(|u| u["sessionUpdate"] == "plan")
            .map(|u| &u["entries"])
            .collect()
    }

    /// Every announced tool call ended with exactly one final status, and
    /// every update names an announced call.
    pub fn assert_every_tool_call_finished(&self) {
        let ids = self.tool_call_ids();
        for id in &ids {
            self.final_update(id);
        }
        for update in self.updates() {
            if update["sessionUpdate"] == "tool_call_update" {
                let id = update["toolCallId"].as_str().unwrap_or_default();
                assert!(
                    ids.iter().any(|known| known == id),
                    "an update of a tool call that was never announced: {update}\n{}",
                    self.dump()
                );
            }
        }
    }

    /// The turn rendered for a failure message.
    pub fn dump(&self) -> String {
        format!(
            "response: {}\nmessages:\n{}",
            self.response,
            render(&self.messages)
        )
    }
}

/// The text blocks (`{"type":"content","content":{"type":"text"}}`) of a
/// tool call update's content, joined with newlines.
pub fn content_text(update: &Value) -> String {
    update["content"]
        .as_array()
        .map(|blocks| {
            blocks
                .iter()
                .filter(|b| b["type"] == "content")
                .filter_map(|b| b["content"]["text"].as_str())
                .collect::<Vec<_>>()
                .join("\n")
        })
        .unwrap_or_default()
}

fn render(messages: &[Value]) -> String {
    if messages.is_empty() {
        return "  (none)".to_string();
    }
    messages
        .iter()
        .map(|m| {
            let text = m.to_string();
            if text.len() > 1500 {
                let mut end = 1500;
                while !text.is_char_boundary(end) {
                    end -= 1;
                }
                format!("  {}… ({} bytes)", &text[..end], text.len())
            } else {
                format!("  {text}")
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}

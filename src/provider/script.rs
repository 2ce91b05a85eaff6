//! The scripted provider: a JSON scenario played through the real pipeline
//! instead of a network model. It is the offline demo, the test bed for the
//! agent itself, and a deterministic agent for people who build ACP clients.
//!
//! The format is documented in docs/scripted-provider.md.

use super::{
    Finish, ModelRequest, Outcome, Provider, ProviderError, Role, Sink, StreamError,
    ToolCallRequest, Usage,
};
use crate::cancel::{lock, CancelToken};
use serde::Deserialize;
use std::collections::HashMap;
use std::path::Path;
use std::sync::Mutex;
use std::time::Duration;

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Script {
    /// Replies used in order, one per model call, when no rule matches.
    #[serde(default)]
    pub replies: Vec<Reply>,
    /// Replies chosen by the last user message, checked first, in order.
    #[serde(default)]
    pub rules: Vec<Rule>,
    /// The reply once `replies` are used up and no rule matches.
    #[serde(default)]
    pub fallback: Option<Reply>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Rule {
    #[serde(rename = "when")]
    pub condition: Condition,
    /// The reply to the first model call of a matching turn.
    pub reply: Option<Reply>,
    /// Replies to the model calls of a matching turn, in order: the first
    /// answers the prompt, the next ones answer after each round of tool
    /// results.
    #[serde(default)]
    pub replies: Vec<Reply>,
}

/// A test on the last user message. Every field given must hold;
/// comparisons ignore case.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Condition {
    pub contains: Option<String>,
    pub equals: Option<String>,
    pub starts_with: Option<String>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Reply {
    /// Reasoning, streamed first as thought chunks split at word ends.
    pub thought: Option<String>,
    /// The answer, streamed as message chunks split at word ends.
    pub text: Option<String>,
    /// Explicit chunks, played after `thought` and `text`.
    #[serde(default)]
    pub chunks: Vec<Chunk>,
    /// A pause before every chunk, in milliseconds.
    #[serde(default)]
    pub chunk_delay_ms: u64,
    /// How the model stops: `end_turn` (default), `max_tokens`, `refusal`.
    pub stop: Option<Finish>,
    pub usage: Option<Usage>,
    /// Tool calls the model makes after its text; the turn goes on with
    /// their results.
    #[serde(default)]
    pub tool_calls: Vec<ScriptedToolCall>,
    /// Fail the call with this error after the chunks were streamed.
    pub error: Option<ScriptedError>,
    /// Panic inside the turn: a way to prove that a bug in a turn becomes
    /// an error answer instead of a dead agent.
    pub panic: Option<String>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "snake_case")]
pub(crate) enum Chunk {
    Text(String),
    Thought(String),
    /// A pause, in milliseconds.
    SleepMs(u64),
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ScriptedToolCall {
    /// The call id; generated when absent.
    pub id: Option<String>,
    pub name: String,
    /// The arguments as JSON (default `{}`).
    #[serde(default)]
    pub arguments: Option<serde_json::Value>,
    /// Arguments sent verbatim instead, to play a model that produces
    /// malformed JSON.
    pub raw_arguments: Option<String>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ScriptedError {
    /// A stable code such as `provider_http_429`.
    pub code: String,
    pub message: String,
}

/// The largest script file read.
const SCRIPT_CAP: u64 = 16 << 20;

impl Script {
    pub(crate) fn load(path: &Path) -> Result<Script, String> {
        // Never a FIFO or a device (the open would block), within a cap.
        let text = crate::os::reading::read_named_text(path, SCRIPT_CAP)
            .map_err(|why| format!("cannot read the script: {why}"))?;
        Script::parse(&text).map_err(|err| format!("script {}: {err}", path.display()))
    }

    pub(crate) fn parse(text: &str) -> Result<Script, String> {
        let script: Script = serde_json::from_str(text).map_err(|err| err.to_string())?;
        for (index, rule) in script.rules.iter().enumerate() {
            if rule.reply.is_none() && rule.replies.is_empty() {
                return Err(format!(
                    "rule {index} has neither \"reply\" nor \"replies\""
                ));
            }
        }
        Ok(script)
    }
}

impl Rule {
    /// The reply for model call `step` of a matching turn, if the rule has
    /// one.
    fn reply_for(&self, step: usize) -> Option<&Reply> {
        if self.replies.is_empty() {
            self.reply.as_ref().filter(|_| step == 0)
        } else {
            self.replies.get(step)
        }
    }
}

impl Condition {
    fn holds(&self, message: &str) -> bool {
        let message = message.to_lowercase();
        self.contains
            .as_ref()
            .is_none_or(|c| message.contains(&c.to_lowercase()))
            && self
                .equals
                .as_ref()
                .is_none_or(|c| message.trim() == c.to_lowercase().trim())
            && self
                .starts_with
                .as_ref()
                .is_none_or(|c| message.trim_start().starts_with(&c.to_lowercase()))
    }
}

/// Plays a script. Keeps, per session, how many ordered replies were used.
pub(crate) struct ScriptProvider {
    script: Script,
    positions: Mutex<HashMap<String, usize>>,
}

impl ScriptProvider {
    pub(crate) fn new(script: Script) -> ScriptProvider {
        ScriptProvider {
            script,
            positions: Mutex::new(HashMap::new()),
        }
    }

    fn choose(&self, request: &ModelRequest<'_>) -> Option<Reply> {
        let last_user = request.messages.iter().rposition(|m| m.role == Role::User);
        let text = last_user.map_or("", |i| request.messages[i].text.as_str());
        // How many model calls this turn already made.
        let step = request.messages[last_user.map_or(0, |i| i + 1)..]
            .iter()
            .filter(|m| m.role == Role::Assistant)
            .count();
        let matched = self
            .script
            .rules
            .iter()
            .filter(|rule| rule.condition.holds(text))
            .find_map(|rule| rule.reply_for(step));
        if let Some(reply) = matched {
            return Some(reply.clone());
        }
        let mut positions = lock(&self.positions);
        let position = positions.entry(request.session_id.to_string()).or_insert(0);
        if let Some(reply) = self.script.replies.get(*position) {
            *position += 1;
            return Some(reply.clone());
        }
        self.script.fallback.clone()
    }
}

/// Splits text after each run of whitespace, so chunks look like a model's
/// and join back to the exact text.
pub(crate) fn word_chunks(text: &str) -> Vec<&str> {
    let mut chunks = Vec::new();
    let mut start = 0;
    let mut in_space = false;
    for (index, ch) in text.char_indices() {
        if ch.is_whitespace() {
            in_space = true;
        } else if in_space {
            chunks.push(&text[start..index]);
            start = index;
            in_space = false;
        }
    }
    if start < text.len() {
        chunks.push(&text[start..]);
    }
    chunks
}

impl Provider for ScriptProvider {
    fn stream(
        &self,
        request: &ModelRequest<'_>,
        sink: &mut dyn Sink,
        cancel: &CancelToken,
    ) -> Result<Outcome, StreamError> {
        let Some(reply) = self.choose(request) else {
            return Err(ProviderError::new(
                "script_exhausted",
                "the script has no reply left for this request (add more replies, a rule or a fallback)",
            )
            .into());
        };
        if let Some(message) = &reply.panic {
            panic!("scripted panic: {message}");
        }
        let delay = Duration::from_millis(reply.chunk_delay_ms);
        let mut play = |chunk: Chunk| -> Result<(), StreamError> {
            if !delay.is_zero() && cancel.sleep(delay) {
                return Err(StreamError::Cancelled);
            }
            if cancel.is_cancelled() {
                return Err(StreamError::Cancelled);
            }
            match chunk {
                Chunk::Text(text) => sink.text(&text),
                Chunk::Thought(text) => sink.thought(&text),
                Chunk::SleepMs(ms) => {
                    if cancel.sleep(Duration::from_millis(ms)) {
                        return Err(StreamError::Cancelled);
                    }
                }
            }
            Ok(())
        };
        for piece in reply
            .thought
            .as_deref()
            .map(word_chunks)
            .unwrap_or_default()
        {
            play(Chunk::Thought(piece.to_string()))?;
        }
        for piece in reply.text.as_deref().map(word_chunks).unwrap_or_default() {
            play(Chunk::Text(piece.to_string()))?;
        }
        for chunk in reply.chunks {
            play(chunk)?;
        }
        if let Some(error) = reply.error {
            return Err(ProviderError::new(error.code, error.message).into());
        }
        let tool_calls: Vec<ToolCallRequest> = reply
            .tool_calls
            .into_iter()
            .map(|call| ToolCallRequest {
                id: call
                    .id
                    .unwrap_or_else(|| format!("call_{}", crate::util::random_hex())),
                name: call.name,
                arguments: call.raw_arguments.unwrap_or_else(|| {
                    call.arguments
                        .unwrap_or_else(|| serde_json::json!({}))
                        .to_string()
                }),
            })
            .collect();
        let finish = if tool_calls.is_empty() {
            reply.stop.unwrap_or(Finish::EndTurn)
        } else {
            Finish::ToolUse
        };
        Ok(Outcome {
            finish,
            usage: reply.usage,
            cost: None,
            tool_calls,
            provider_data: serde_json::Value::Null,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::provider::Message;

    #[test]
    fn word_chunks_join_back_exactly() {
        for text in ["Hello there,  world!\n", "  lead", "one", ""] {
            let chunks = word_chunks(text);
            assert_eq!(chunks.concat(), text);
        }
        assert_eq!(word_chunks("a b  c"), vec!["a ", "b  ", "c"]);
    }

    struct Collect(String);
    impl Sink for Collect {
        fn text(&mut self, delta: &str) {
            self.0.push_str(delta);
        }
        fn thought(&mut self, delta: &str) {
            self.0.push('[');
            self.0.push_str(delta);
            self.0.push(']');
        }
    }

    #[test]
    fn rules_first_then_replies_in_order_then_fallback() {
        let script = Script::parse(
            r#"{"replies":[{"text":"one"},{"text":"two"}],
                "rules":[{"when":{"contains":"PING"},"reply":{"text":"pong"}}],
                "fallback":{"text":"done"}}"#,
        )
        .unwrap();
        let provider = ScriptProvider::new(script);
        let cancel = CancelToken::new();
        let mut answers = Vec::new();
        for prompt in ["hi", "say ping", "hi", "hi"] {
            let messages = [Message::user(prompt)];
            let request = ModelRequest {
                session_id: "s",
                model: "script",
                system: "",
                messages: &messages,
                tools: &[],
                effort: None,
                max_output_tokens: None,
                trace: None,
                max_attempts: None,
            };
            let mut sink = Collect(String::new());
            provider.stream(&request, &mut sink, &cancel).unwrap();
            answers.push(sink.0);
        }
        assert_eq!(answers, ["one", "pong", "two", "done"]);
    }

    #[test]
    fn unknown_fields_are_reported() {
        let err = Script::parse(r#"{"replies":[{"txt":"x"}]}"#).unwrap_err();
        assert!(err.contains("txt"), "{err}");
    }
}

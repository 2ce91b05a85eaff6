//! The conversation in the provider-neutral form every layer shares: who
//! said what (text, images, tool calls and their results) and the tools
//! offered. Providers translate it to their wire format; the store keeps
//! it; the tools describe themselves in it.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Who said a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    User,
    Assistant,
    /// The result of one tool call, answering the assistant's request.
    Tool,
}

/// A tool call the model asked for, exactly as it asked: the arguments stay
/// the raw string the model produced (it may not even be valid JSON).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolCallRequest {
    pub id: String,
    pub name: String,
    pub arguments: String,
}

/// One message of the conversation, as the model sees it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Message {
    pub role: Role,
    pub text: String,
    /// The model's reasoning that came with an assistant message, kept so
    /// providers that need it echoed back can do so.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub thought: String,
    /// The tool calls of an assistant message, in the order the model gave.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<ToolCallRequest>,
    /// For a tool message: the call it answers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
    /// What a provider needs echoed back verbatim with this message, under
    /// a key of its own (Anthropic's signed thinking blocks, the Responses
    /// API's encrypted reasoning items). Other providers ignore it.
    #[serde(default, skip_serializing_if = "Value::is_null")]
    pub provider_data: Value,
    /// Images of a user message, kept as files (never as base64 in the
    /// store); providers read them when they build a request.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub images: Vec<Image>,
    /// For a tool result cut to its head and tail, or elided: the file
    /// that holds the whole output.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub full_output: Option<std::path::PathBuf>,
}

/// An image attached to a message.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Image {
    pub path: std::path::PathBuf,
    pub mime_type: String,
}

impl Message {
    pub fn user(text: impl Into<String>) -> Message {
        Message {
            role: Role::User,
            text: text.into(),
            thought: String::new(),
            tool_calls: Vec::new(),
            tool_call_id: None,
            provider_data: Value::Null,
            images: Vec::new(),
            full_output: None,
        }
    }

    pub fn assistant(text: impl Into<String>, thought: impl Into<String>) -> Message {
        Message {
            role: Role::Assistant,
            text: text.into(),
            thought: thought.into(),
            tool_calls: Vec::new(),
            tool_call_id: None,
            provider_data: Value::Null,
            images: Vec::new(),
            full_output: None,
        }
    }

    pub fn tool_result(call_id: impl Into<String>, text: impl Into<String>) -> Message {
        Message {
            role: Role::Tool,
            text: text.into(),
            thought: String::new(),
            tool_calls: Vec::new(),
            tool_call_id: Some(call_id.into()),
            provider_data: Value::Null,
            images: Vec::new(),
            full_output: None,
        }
    }
}

/// A tool offered to the model: its name, a description written for the
/// model, and the JSON schema of its arguments.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolSpec {
    pub name: String,
    pub description: String,
    pub parameters: Value,
}

/// The conversation with no two user messages in a row: each run of them
/// joined into one (texts with a blank line between, images in order).
/// Strict chat templates (Mistral's, and others llama.cpp and vLLM apply)
/// refuse a user message after a user message, which a compaction
/// summary, a cancelled turn or a queued follow-up can leave; borrowed as
/// it is when there is none.
pub fn alternating(messages: &[Message]) -> std::borrow::Cow<'_, [Message]> {
    let consecutive = messages
        .windows(2)
        .any(|pair| pair[0].role == Role::User && pair[1].role == Role::User);
    if !consecutive {
        return std::borrow::Cow::Borrowed(messages);
    }
    let mut joined: Vec<Message> = Vec::with_capacity(messages.len());
    for message in messages {
        match joined.last_mut() {
            Some(last) if last.role == Role::User && message.role == Role::User => {
                if !last.text.is_empty() && !message.text.is_empty() {
                    last.text.push_str("\n\n");
                }
                last.text.push_str(&message.text);
                last.images.extend(message.images.iter().cloned());
            }
            _ => joined.push(message.clone()),
        }
    }
    std::borrow::Cow::Owned(joined)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_of_user_messages_are_joined_and_the_rest_kept() {
        let plain = [
            Message::user("a"),
            Message::assistant("b", ""),
            Message::user("c"),
        ];
        assert!(matches!(alternating(&plain), std::borrow::Cow::Borrowed(_)));
        let runs = [
            Message::user("summary"),
            Message::user("prompt"),
            Message::assistant("answer", ""),
            Message::user(""),
            Message::user("next"),
        ];
        let joined = alternating(&runs);
        let texts: Vec<(&str, Role)> = joined.iter().map(|m| (m.text.as_str(), m.role)).collect();
        assert_eq!(
            texts,
            [
                ("summary\n\nprompt", Role::User),
                ("answer", Role::Assistant),
                ("next", Role::User)
            ]
        );
    }
}

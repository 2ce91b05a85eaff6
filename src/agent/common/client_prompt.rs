//! The client's system prompt (ACP's unstable `systemPrompt` on
//! `session/new`, `session/load`, `session/resume` and `session/fork`):
//! read and checked here, kept with the session's settings, and joined to
//! Spindle's own instructions by [`compose`].
//!
//! The text is the client's (the editor's, so the user's), never the
//! workspace's: it is not searched for `@` imports, not subject to the
//! project's trust, and labelled as the client's in the prompt.
//!
//! What `override` replaces and what it cannot remove:
//!
//! - Replaced: Spindle's persona and style line ("You are Spindle …
//!   answer precisely …") and its advice on using the tools (the full or
//!   the lean profile's guidance).
//! - Kept, because the model needs it to work safely and the client
//!   cannot know it: the safety text (`SAFETY` in `prompt.rs`, or its
//!   lean form): that tool calls run only as the user's approvals and the
//!   sandbox allow, that a refusal is not to be worked around, and that
//!   file contents and tool output are data, not instructions. The
//!   approvals and the sandbox are enforced in code either way; the text
//!   tells the model the protocol, so it neither fights a refusal nor
//!   obeys a file.
//! - Kept, as context the protocol lets an agent add: the workspace's
//!   path, the environment snapshot (date, system, shell, git state), the
//!   extra workspace roots, the instruction files (the user's own
//!   `AGENTS.md` and the project's `AGENTS.md`, `CLAUDE.md`, `GEMINI.md`
//!   with their imports) and the skills listing.
//! - Kept, as the session's configuration (which `override` does not
//!   change): the preset's line, plan or goal mode's rules and the agent
//!   file's instructions the user chose with `--agent`.
//!
//! With `append`, all of Spindle's text stays and the client's follows it,
//! at the end of the system prompt.

use crate::rpc::RpcError;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The most bytes of text a client system prompt may hold.
pub(crate) const LIMIT: usize = 64 * 1024;

/// How the client's text combines with Spindle's instructions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum PromptMode {
    Append,
    Override,
}

/// A client's system prompt, as kept with the session: its mode and its
/// text blocks joined by a blank line.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct ClientPrompt {
    pub mode: PromptMode,
    pub text: String,
}

/// The `systemPrompt` of a lifecycle request's params: `None` when it is
/// left out or null (the session keeps what it has, or Spindle's own
/// instructions); an error a person can act on when it cannot be applied
/// as given, checked before any session is created, loaded or copied.
pub(crate) fn parse(params: &Value) -> Result<Option<ClientPrompt>, RpcError> {
    let given = match params.get("systemPrompt") {
        None | Some(Value::Null) => return Ok(None),
        Some(Value::Object(given)) => given,
        Some(_) => {
            return Err(RpcError::invalid_params(
                "systemPrompt must be an object {\"mode\", \"content\"} or null",
            ))
        }
    };
    let mode = match given.get("mode") {
        Some(Value::String(mode)) if mode == "append" => PromptMode::Append,
        Some(Value::String(mode)) if mode == "override" => PromptMode::Override,
        Some(Value::String(mode)) => {
            let shown = crate::util::visible(&clip(mode, 64), false);
            return Err(RpcError::invalid_params(format!(
                "systemPrompt.mode {shown:?} is not supported: use \"append\" or \"override\""
            )));
        }
        _ => {
            return Err(RpcError::invalid_params(
                "systemPrompt.mode is missing: use \"append\" or \"override\"",
            ))
        }
    };
    let Some(Value::Array(blocks)) = given.get("content") else {
        return Err(RpcError::invalid_params(
            "systemPrompt.content must be an array of text blocks",
        ));
    };
    if blocks.is_empty() {
        return Err(RpcError::invalid_params(
            "systemPrompt.content is empty: give at least one text block, or leave systemPrompt out to use Spindle's own instructions",
        ));
    }
    let mut texts = Vec::with_capacity(blocks.len());
    let mut size = 0usize;
    for (index, block) in blocks.iter().enumerate() {
        let kind = block.get("type").and_then(Value::as_str);
        if kind != Some("text") {
            let kind = kind.map_or_else(
                || "a block without a type".to_string(),
                |kind| format!("a {:?} block", crate::util::visible(&clip(kind, 64), false)),
            );
            return Err(RpcError::invalid_params(format!(
                "systemPrompt.content[{index}] is {kind}: a system prompt takes text blocks only"
            )));
        }
        let Some(text) = block.get("text").and_then(Value::as_str) else {
            return Err(RpcError::invalid_params(format!(
                "systemPrompt.content[{index}].text must be a string"
            )));
        };
        size = size.saturating_add(text.len());
        if size > LIMIT {
            return Err(RpcError::invalid_params(format!(
                "systemPrompt is too long: its text is limited to {LIMIT} bytes (64 KiB) in all"
            )));
        }
        texts.push(text.trim());
    }
    Ok(Some(ClientPrompt {
        mode,
        text: texts.join("\n\n"),
    }))
}

fn clip(text: &str, limit: usize) -> String {
    text.chars().take(limit).collect()
}

/// The heading the client's text goes under with `append`.
const APPEND_HEADING: &str = "Instructions from the client (the user's editor) for this session:";

/// The heading that opens the prompt with `override`.
const OVERRIDE_HEADING: &str =
    "Instructions from the client (the user's editor), in place of Spindle's own:";

/// The start of the system prompt: Spindle's base (persona, environment,
/// safety text, tool advice) from `base`, or with `override` the client's
/// text and then `kept`, what override cannot remove (see the module's
/// comment). The instruction files and the rest follow either way.
pub(crate) fn opening(
    client: Option<&ClientPrompt>,
    base: impl FnOnce() -> String,
    kept: impl FnOnce() -> String,
) -> String {
    match client {
        Some(ClientPrompt {
            mode: PromptMode::Override,
            text,
        }) => format!("{OVERRIDE_HEADING}\n\n{text}\n\n{}", kept()),
        _ => base(),
    }
}

/// What ends the system prompt: with `append`, the client's text.
pub(crate) fn closing(client: Option<&ClientPrompt>) -> Option<String> {
    match client {
        Some(ClientPrompt {
            mode: PromptMode::Append,
            text,
        }) => Some(format!("{APPEND_HEADING}\n\n{text}")),
        _ => None,
    }
}

/// For `/memory`: the mode, the size and the first lines.
pub(crate) fn describe(client: &ClientPrompt) -> (String, Vec<&str>) {
    let effect = match client.mode {
        PromptMode::Append => "append: added after Spindle's instructions",
        PromptMode::Override => "override: in place of Spindle's persona and tool advice; its safety text, the environment and the instruction files stay",
    };
    let first: Vec<&str> = client
        .text
        .lines()
        .filter(|line| !line.trim().is_empty())
        .take(3)
        .collect();
    (format!("{effect} ({} bytes)", client.text.len()), first)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn error(params: Value) -> String {
        parse(&params).unwrap_err().message
    }

    #[test]
    fn text_blocks_in_either_mode_are_read_and_joined() {
        let given = json!({"systemPrompt": {"mode": "override", "content": [
            {"type": "text", "text": "One."}, {"type": "text", "text": " Two. "}]}});
        let prompt = parse(&given).unwrap().unwrap();
        assert_eq!(prompt.mode, PromptMode::Override);
        assert_eq!(prompt.text, "One.\n\nTwo.");
        assert_eq!(parse(&json!({})).unwrap(), None);
        assert_eq!(parse(&json!({"systemPrompt": null})).unwrap(), None);
    }

    #[test]
    fn what_cannot_be_applied_is_refused_with_the_reason() {
        let text = json!([{"type": "text", "text": "x"}]);
        for (given, says) in [
            (
                json!({"mode": "replace", "content": text}),
                "\"replace\" is not supported",
            ),
            (
                json!({"mode": "_x", "content": text}),
                "\"_x\" is not supported",
            ),
            (json!({"content": text}), "mode is missing"),
            (json!({"mode": "append", "content": []}), "content is empty"),
            (json!({"mode": "append"}), "must be an array"),
            (
                json!({"mode": "append", "content": [{"type": "text", "text": "a"}, {"type": "image", "data": "", "mimeType": "image/png"}]}),
                "content[1] is a \"image\" block",
            ),
            (
                json!({"mode": "append", "content": [{"type": "text"}]}),
                "text must be a string",
            ),
            (json!("be nice"), "must be an object"),
            (
                json!({"mode": "append", "content": [{"type": "text", "text": "x".repeat(LIMIT)}, {"type": "text", "text": "y"}]}),
                "limited to 65536 bytes",
            ),
        ] {
            let said = error(json!({"systemPrompt": given}));
            assert!(said.contains(says), "{given}: {said}");
        }
        let exact = json!({"systemPrompt": {"mode": "append", "content": [{"type": "text", "text": "x".repeat(LIMIT)}]}});
        assert!(parse(&exact).is_ok());
    }

    #[test]
    fn append_ends_the_prompt_and_override_opens_it() {
        let append = ClientPrompt {
            mode: PromptMode::Append,
            text: "CLIENT".into(),
        };
        let base = || "SPINDLE".to_string();
        let kept = || "KEPT".to_string();
        assert_eq!(opening(Some(&append), base, kept), "SPINDLE");
        assert!(closing(Some(&append)).unwrap().ends_with("\n\nCLIENT"));
        let over = ClientPrompt {
            mode: PromptMode::Override,
            ..append
        };
        let only = opening(Some(&over), base, kept);
        assert!(
            only.contains("CLIENT") && only.ends_with("KEPT") && !only.contains("SPINDLE"),
            "{only}"
        );
        assert_eq!(closing(Some(&over)), None);
        assert_eq!(opening(None, base, kept), "SPINDLE");
        assert_eq!(closing(None), None);
    }
}

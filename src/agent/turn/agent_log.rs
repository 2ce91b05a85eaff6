//! An agent job's log (its subagent's updates, one JSON object a line),
//! read back: as text for the model, and its final answer.

use serde_json::Value;

/// An agent job's answer: the text of the last line of its log (the
/// parent's call, as it ended), from the end of the log.
pub(crate) fn agent_answer(tail: &str) -> String {
    tail.lines()
        .rev()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .find(|update| update["sessionUpdate"] == "tool_call_update" && update["_meta"].is_null())
        .and_then(|update| {
            update["content"][0]["content"]["text"]
                .as_str()
                .map(str::to_string)
        })
        .unwrap_or_else(|| "(no answer)".to_string())
}

/// An agent job's updates (JSON lines) as the model reads them: what it
/// said, and each tool call with its end.
pub(super) fn render_updates(lines: &str) -> String {
    let mut out = String::new();
    for line in lines.lines() {
        let Ok(update) = serde_json::from_str::<Value>(line) else {
            continue;
        };
        match update["sessionUpdate"].as_str().unwrap_or_default() {
            "agent_message_chunk" => {
                out.push_str(update["content"]["text"].as_str().unwrap_or_default())
            }
            "tool_call" => {
                let title = update["title"].as_str().unwrap_or("a tool call");
                out.push_str(&format!("\n- {title}\n"));
            }
            "tool_call_update" if update["_meta"].is_null() => {
                let text = update["content"][0]["content"]["text"]
                    .as_str()
                    .unwrap_or_default();
                out.push_str(&format!("\n[answer]\n{text}\n"));
            }
            "tool_call_update" => {
                if let Some(status @ ("completed" | "failed")) = update["status"].as_str() {
                    out.push_str(&format!("  ({status})\n"));
                }
            }
            _ => {}
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn an_agent_jobs_log_reads_as_text_and_ends_with_its_answer() {
        let meta = json!({"spindle": {"parentToolCallId": "t1"}});
        let lines = [
            json!({"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "Looking."}, "_meta": meta}),
            json!({"sessionUpdate": "tool_call", "toolCallId": "t1/c1", "title": "Read a.txt", "_meta": meta}),
            json!({"sessionUpdate": "tool_call_update", "toolCallId": "t1/c1", "status": "completed", "_meta": meta}),
            json!({"sessionUpdate": "tool_call_update", "toolCallId": "t1", "status": "completed",
                   "content": [{"type": "content", "content": {"type": "text", "text": "All good."}}]}),
        ]
        .iter()
        .map(|l| l.to_string())
        .collect::<Vec<_>>()
        .join("\n");
        let text = render_updates(&lines);
        assert!(
            text.contains("Looking.")
                && text.contains("- Read a.txt")
                && text.contains("(completed)")
        );
        assert!(text.ends_with("[answer]\nAll good.\n"), "{text}");
        assert_eq!(agent_answer(&format!("garbage\n{lines}")), "All good.");
        assert_eq!(agent_answer("{cut"), "(no answer)");
    }
}

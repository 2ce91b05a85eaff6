//! Readable views of stored sessions, for `spindle sessions`: people who
//! want to see or clean their history without an editor.

use crate::store::{Result, Store};
use serde_json::Value;
use std::fmt::Write;

/// One line per session, newest first: id, last update, title, workspace.
pub fn list(store: &Store, cwd: Option<&str>, agent: Option<&str>) -> Result<String> {
    let mut out = String::new();
    let mut before = None;
    loop {
        let page = store.list_sessions(cwd, before, 500)?;
        if page.is_empty() {
            break;
        }
        for row in &page {
            // Which agent file's agent served it (none: the built-in one).
            let served_by = row.settings["agent"].as_str();
            if agent.is_some() && served_by != agent {
                continue;
            }
            let _ = writeln!(
                out,
                "{}  {}  {}  {}{}",
                row.id,
                &row.updated_at[..row.updated_at.len().min(19)].replace('T', " "),
                row.title.as_deref().unwrap_or("(untitled)"),
                row.cwd,
                served_by
                    .map(|name| format!("  [agent {name}]"))
                    .unwrap_or_default()
            );
        }
        before = page.last().map(|row| row.updated_order);
    }
    if out.is_empty() {
        out.push_str("No sessions.\n");
    }
    Ok(printable(&out))
}

/// The whole transcript of a session as text, or `None` when there is no
/// such session.
pub fn show(store: &Store, id: &str) -> Result<Option<String>> {
    let Some(row) = store.session(id)? else {
        return Ok(None);
    };
    let mut out = String::new();
    let _ = writeln!(out, "Session {}", row.id);
    if let Some(title) = &row.title {
        let _ = writeln!(out, "Title:   {title}");
    }
    let _ = writeln!(out, "Folder:  {}", row.cwd);
    let _ = writeln!(out, "Created: {}", row.created_at);
    let _ = writeln!(out, "Updated: {}", row.updated_at);
    let mut titles: std::collections::HashMap<String, String> = Default::default();
    for body in store.events(id)? {
        let Ok(event) = serde_json::from_str::<Value>(&body) else {
            continue;
        };
        render(&event, &mut titles, &mut out);
    }
    Ok(Some(printable(&out)))
}

/// `text` safe to print on a terminal: stored prompts and model output
/// may hold escape sequences (which a terminal would obey) and bidi
/// controls (which reorder what is shown); each is shown as `\u{…}`.
/// Line breaks and tabs stay.
pub fn printable(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        let control = (c.is_control() && c != '\n' && c != '\t')
            || matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}' | '\u{200e}' | '\u{200f}');
        if control {
            let _ = write!(out, "\\u{{{:x}}}", c as u32);
        } else {
            out.push(c);
        }
    }
    out
}

fn text_of(content: &Value) -> String {
    match content["type"].as_str() {
        Some("text") => content["text"].as_str().unwrap_or("").to_string(),
        Some("resource_link") => format!(
            "[@{}]({})",
            content["name"].as_str().unwrap_or(""),
            content["uri"].as_str().unwrap_or("")
        ),
        Some(other) => format!("[{other}]"),
        None => String::new(),
    }
}

fn indent(text: &str) -> String {
    text.trim_end()
        .lines()
        .map(|line| format!("  {line}\n"))
        .collect()
}

fn render(event: &Value, titles: &mut std::collections::HashMap<String, String>, out: &mut String) {
    match event["sessionUpdate"].as_str() {
        Some("user_message_chunk") => {
            let _ = write!(out, "\nUser:\n{}", indent(&text_of(&event["content"])));
        }
        Some("agent_message_chunk") => {
            let _ = write!(out, "\nAgent:\n{}", indent(&text_of(&event["content"])));
        }
        Some("agent_thought_chunk") => {
            let _ = write!(out, "\nThought:\n{}", indent(&text_of(&event["content"])));
        }
        Some("tool_call") => {
            let id = event["toolCallId"].as_str().unwrap_or("").to_string();
            let title = event["title"].as_str().unwrap_or("tool call").to_string();
            titles.insert(id, title);
        }
        Some("tool_call_update") => {
            let status = event["status"].as_str().unwrap_or("");
            if matches!(status, "completed" | "failed") {
                let id = event["toolCallId"].as_str().unwrap_or("");
                let title = titles.get(id).map(String::as_str).unwrap_or(id);
                let _ = writeln!(out, "\nTool: {title} — {status}");
                for item in event["content"].as_array().into_iter().flatten() {
                    match item["type"].as_str() {
                        Some("diff") => {
                            let _ = writeln!(
                                out,
                                "  (changed {})",
                                item["path"].as_str().unwrap_or("")
                            );
                        }
                        Some("content") => {
                            let text = text_of(&item["content"]);
                            let short: String =
                                text.lines().take(12).collect::<Vec<_>>().join("\n");
                            out.push_str(&indent(&short));
                        }
                        _ => {}
                    }
                }
            }
        }
        Some("plan") => {
            out.push_str("\nPlan:\n");
            for entry in event["entries"].as_array().into_iter().flatten() {
                let mark = match entry["status"].as_str() {
                    Some("completed") => "[x]",
                    Some("in_progress") => "[~]",
                    _ => "[ ]",
                };
                let _ = writeln!(out, "  {mark} {}", entry["content"].as_str().unwrap_or(""));
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::provider::Message;
    use serde_json::json;

    #[test]
    fn escape_sequences_are_shown_not_obeyed() {
        assert_eq!(
            printable("a\u{1b}[2Jb\r\u{7}\u{202e}c\n\td"),
            "a\\u{1b}[2Jb\\u{d}\\u{7}\\u{202e}c\n\td"
        );
    }

    #[test]
    fn shows_a_transcript_as_text() {
        let path = std::env::temp_dir()
            .join(format!("spindle-history-{}", crate::util::random_hex()))
            .join("db");
        let mut store = Store::open(&path).unwrap();
        store
            .create_session("s1", "/w", &json!({}), &json!([]))
            .unwrap();
        store.set_title("s1", "Fix it").unwrap();
        let events: Vec<String> = [
            json!({"sessionUpdate": "user_message_chunk", "content": {"type": "text", "text": "Fix it"}}),
            json!({"sessionUpdate": "tool_call", "toolCallId": "c1", "title": "Read a.rs", "kind": "read", "status": "pending"}),
            json!({"sessionUpdate": "tool_call_update", "toolCallId": "c1", "status": "completed", "content": []}),
            json!({"sessionUpdate": "plan", "entries": [{"content": "Step", "priority": "high", "status": "completed"}]}),
            json!({"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "Done."}}),
        ]
        .iter()
        .map(Value::to_string)
        .collect();
        store
            .begin_turn("s1", &events, &[Message::user("Fix it")])
            .unwrap();
        let text = show(&store, "s1").unwrap().unwrap();
        for needle in [
            "Title:   Fix it",
            "User:\n  Fix it",
            "Tool: Read a.rs — completed",
            "[x] Step",
            "Agent:\n  Done.",
        ] {
            assert!(text.contains(needle), "{needle:?} in\n{text}");
        }
        assert!(show(&store, "nope").unwrap().is_none());
        assert!(list(&store, None, None).unwrap().contains("s1"));
        assert!(list(&store, Some("/elsewhere"), None)
            .unwrap()
            .contains("No sessions"));
    }
}

//! Readable views of stored sessions, for `spindle sessions`: people who
//! want to see or clean their history without an editor.

use crate::store::{Result, Store};
use serde_json::Value;
use std::fmt::Write;

/// Every stored session, newest first (those of `cwd`, of the agent
/// named `agent`); those the user never sent anything to only
/// `with_unused`, as `session/list` does.
fn rows(
    store: &Store,
    cwd: Option<&str>,
    agent: Option<&str>,
    with_unused: bool,
) -> Result<Vec<crate::store::SessionRow>> {
    let mut all = Vec::new();
    let mut before = None;
    loop {
        let page = store.list_sessions(cwd, before, 500, with_unused)?;
        if page.is_empty() {
            break;
        }
        before = page.last().map(|row| row.updated_order);
        // Which agent file's agent served it (none: the built-in one).
        all.extend(
            page.into_iter()
                .filter(|row| agent.is_none() || row.settings["agent"].as_str() == agent),
        );
    }
    Ok(all)
}

/// A table of sessions, newest first: id, last update (local time),
/// title, model, folder, and the agent that served it.
pub(crate) fn list(store: &Store, cwd: Option<&str>, agent: Option<&str>) -> Result<String> {
    let rows = rows(store, cwd, agent, false)?;
    if rows.is_empty() {
        return Ok("No sessions.\n".into());
    }
    let id_width = rows.iter().map(|r| r.id.len()).max().unwrap_or(2).max(2);
    // The session's model, `provider/model` (at most 40 characters shown).
    let model_of = |row: &crate::store::SessionRow| -> String {
        let model = row.settings["model"].as_str().unwrap_or("-");
        one_line(&model.chars().take(40).collect::<String>())
    };
    let model_width = rows
        .iter()
        .map(|row| model_of(row).chars().count())
        .max()
        .unwrap_or(5)
        .max(5);
    let mut out = format!(
        "{:<id_width$}  {:<22}  {:<40}  {:<model_width$}  FOLDER\n",
        "ID", "UPDATED", "TITLE", "MODEL"
    );
    for row in &rows {
        // Each field on its one line: a title or folder cannot start a
        // row of its own.
        let title: String = row
            .title
            .as_deref()
            .unwrap_or("(untitled)")
            .chars()
            .take(40)
            .collect();
        let _ = writeln!(
            out,
            "{:<id_width$}  {:<22}  {:<40}  {:<model_width$}  {}{}",
            one_line(&row.id),
            local_time(&row.updated_at),
            one_line(&title),
            model_of(row),
            one_line(&row.cwd),
            row.settings["agent"]
                .as_str()
                .map(|name| format!("  [agent {}]", one_line(name)))
                .unwrap_or_default()
        );
    }
    Ok(crate::util::visible(&out, true))
}

/// Outside text (a title, a folder, a tool's title) on one line, safe to
/// print.
fn one_line(text: &str) -> String {
    crate::util::visible(text, false)
}

/// The sessions as a JSON array, for scripts.
pub(crate) fn list_json(store: &Store, cwd: Option<&str>, agent: Option<&str>) -> Result<String> {
    let items: Vec<Value> = rows(store, cwd, agent, false)?
        .into_iter()
        .map(|row| {
            serde_json::json!({
                "sessionId": row.id,
                "title": row.title,
                "cwd": row.cwd,
                "createdAt": row.created_at,
                "updatedAt": row.updated_at,
                "agent": row.settings["agent"],
                "model": row.settings["model"],
            })
        })
        .collect();
    // Titles and folders are outside text: a terminal's controls and the
    // bidi overrides in them become `\uXXXX` escapes.
    let mut text = crate::util::json_pretty_for_terminal(&Value::Array(items));
    text.push('\n');
    Ok(text)
}

/// The session an id or a unique prefix of one names, the id's `sess_`
/// given or not (`3f9a` finds `sess_3f9a…`): `Err` with the candidates
/// when the prefix is ambiguous, `Ok(None)` when nothing matches.
pub(crate) fn resolve_id(
    store: &Store,
    given: &str,
) -> std::result::Result<Option<String>, String> {
    if store.session(given).map_err(|e| e.to_string())?.is_some() {
        return Ok(Some(given.to_string()));
    }
    if given.len() < 4 {
        return Ok(None);
    }
    // An id names any stored session, listed or not.
    let matches: Vec<String> = rows(store, None, None, true)
        .map_err(|e| e.to_string())?
        .into_iter()
        .map(|row| row.id)
        .filter(|id| {
            id.starts_with(given)
                || id
                    .strip_prefix("sess_")
                    .is_some_and(|rest| rest.starts_with(given))
        })
        .collect();
    match matches.len() {
        0 => Ok(None),
        1 => Ok(matches.into_iter().next()),
        _ => Err(format!(
            "{given:?} names {} sessions ({}); give more of the id",
            matches.len(),
            matches
                .iter()
                .take(5)
                .cloned()
                .collect::<Vec<_>>()
                .join(", ")
        )),
    }
}

/// A session's transcript as NDJSON: one stored `SessionUpdate` a line,
/// as `session/load` replays them.
pub(crate) fn export(store: &Store, id: &str) -> Result<Option<String>> {
    if store.session(id)?.is_none() {
        return Ok(None);
    }
    let mut out = String::new();
    for body in store.events(id)? {
        // One line each, whatever the stored spacing.
        match serde_json::from_str::<Value>(&body) {
            Ok(value) => out.push_str(&crate::util::json_for_terminal(&value)),
            Err(_) => continue,
        }
        out.push('\n');
    }
    Ok(Some(out))
}

/// A stored UTC time (RFC 3339) as local time with its zone:
/// "2026-12-01 14:03 CET".
pub(crate) fn local_time(utc: &str) -> String {
    let fallback = || format!("{} UTC", utc.get(..16).unwrap_or(utc).replace('T', " "));
    let Some(seconds) = crate::clock::parse_rfc3339(utc).map(|ms| ms.div_euclid(1000)) else {
        return fallback();
    };
    let Some(time) = crate::os::local_time(seconds) else {
        return fallback();
    };
    format!(
        "{:04}-{:02}-{:02} {:02}:{:02} {}",
        time.year, time.month, time.day, time.hour, time.minute, time.zone
    )
    .trim_end()
    .to_string()
}

/// The whole transcript of a session as text, or `None` when there is no
/// such session.
pub(crate) fn show(store: &Store, id: &str) -> Result<Option<String>> {
    let Some(row) = store.session(id)? else {
        return Ok(None);
    };
    let mut out = String::new();
    let _ = writeln!(out, "Session {}", one_line(&row.id));
    if let Some(title) = &row.title {
        let _ = writeln!(out, "Title:   {}", one_line(title));
    }
    let _ = writeln!(out, "Folder:  {}", one_line(&row.cwd));
    let _ = writeln!(out, "Created: {}", local_time(&row.created_at));
    let _ = writeln!(out, "Updated: {}", local_time(&row.updated_at));
    let mut titles: std::collections::HashMap<String, String> = Default::default();
    for body in store.events(id)? {
        let Ok(event) = serde_json::from_str::<Value>(&body) else {
            continue;
        };
        render(&event, &mut titles, &mut out);
    }
    Ok(Some(crate::util::visible(&out, true)))
}

fn text_of(content: &Value) -> String {
    match content["type"].as_str() {
        Some("text") => content["text"].as_str().unwrap_or("").to_string(),
        Some("resource_link") => format!(
            "[@{}]({})",
            one_line(content["name"].as_str().unwrap_or("")),
            one_line(content["uri"].as_str().unwrap_or(""))
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
                let _ = writeln!(out, "\nTool: {} — {status}", one_line(title));
                for item in event["content"].as_array().into_iter().flatten() {
                    match item["type"].as_str() {
                        Some("diff") => {
                            let _ = writeln!(
                                out,
                                "  (changed {})",
                                one_line(item["path"].as_str().unwrap_or(""))
                            );
                            for line in crate::util::diff_lines(
                                item["oldText"].as_str().unwrap_or_default(),
                                item["newText"].as_str().unwrap_or_default(),
                                40,
                            ) {
                                let _ = writeln!(out, "{line}");
                            }
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
                let content = one_line(entry["content"].as_str().unwrap_or(""));
                let _ = writeln!(out, "  {mark} {content}");
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::conversation::Message;
    use serde_json::json;

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
        // A title's controls are written out, on its one line, in the
        // table and the transcript; the JSON keeps it exactly.
        let hostile = "a\u{85}b\u{9b}2J\u{202e}c\nUser:";
        store.set_title("s1", hostile).unwrap();
        let table = list(&store, None, None).unwrap();
        let transcript = show(&store, "s1").unwrap().unwrap();
        for text in [&table, &transcript] {
            assert!(!text.contains(['\u{85}', '\u{9b}', '\u{202e}']), "{text}");
            assert!(
                text.contains("a\\u{85}b\\u{9b}2J\\u{202e}c\\nUser:"),
                "{text}"
            );
        }
        assert!(!transcript.contains("\nUser:\n\nUser:"), "{transcript}");
        let json = list_json(&store, None, None).unwrap();
        assert!(!json.contains(['\u{85}', '\u{9b}', '\u{202e}']), "{json}");
        let parsed: Value = serde_json::from_str(&json).unwrap();
        assert_eq!(parsed[0]["title"], hostile);
        assert!(list(&store, None, None).unwrap().contains("s1"));
        assert!(list(&store, Some("/elsewhere"), None)
            .unwrap()
            .contains("No sessions"));
    }
}

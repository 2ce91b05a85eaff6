//! The last line of `spindle exec --json`: one JSON object a machine
//! reads (`"type": "result"`): the session, the stop reason, the answer's
//! last message, the files the turn changed with their lines added and
//! removed (from the session's checkpoints, the record `/undo` uses), the
//! turn's tokens and cost, the budget that ended it, and the exit code.
//! What is not known is `null`, never a made-up 0. [`Watch`] is the
//! client exec prompts through: it prints as the printer does and keeps
//! what the line needs.

use super::budget::CostWatch;
use super::failure::Failure;
use super::link::{Client, Link};
use super::printer::Printer;
use crate::store::Store;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// What the run came to, filled in as it goes.
#[derive(Debug, Default)]
pub(super) struct Report {
    pub session: Option<String>,
    pub stop: Option<String>,
    /// The agent's error when the prompt failed.
    pub error: Option<String>,
    pub message: String,
    /// `_meta.spindle.usage` of the prompt's answer.
    pub usage: Value,
    /// The currency the session's costs are in.
    pub currency: String,
    /// The session's last turn with a checkpoint before this run.
    pub turn_before: i64,
    /// The budget that ended the run.
    pub budget: Option<&'static str>,
}

/// What exec's client sees of the turn besides printing it: the text of
/// the answer's last message, and (with `--max-cost`) what it spends.
pub(super) struct Watch<'a> {
    pub printer: &'a mut Printer,
    /// The answer's last message: its id and text.
    message: (Option<String>, String),
    pub cost: Option<CostWatch>,
}

impl<'a> Watch<'a> {
    pub(super) fn new(printer: &'a mut Printer) -> Watch<'a> {
        Watch {
            printer,
            message: (None, String::new()),
            cost: None,
        }
    }

    /// The text of the answer's last message.
    pub(super) fn last_message(&self) -> &str {
        &self.message.1
    }
}

impl Client for Watch<'_> {
    fn update(&mut self, update: &Value) {
        let top = update["_meta"]["spindle"]["parentToolCallId"].is_null();
        if update["sessionUpdate"] == "agent_message_chunk" && top {
            // Another message: the last one is what the answer ends with.
            let id = update["messageId"].as_str().map(String::from);
            if id.is_some() && id != self.message.0 {
                self.message = (id, String::new());
            }
            if let Some(text) = update["content"]["text"].as_str() {
                self.message.1.push_str(text);
            }
        }
        if let Some(cost) = self.cost.as_mut() {
            cost.seen(update);
        }
        self.printer.update(update);
    }

    fn permission(&mut self, params: &Value) -> Value {
        self.printer.permission(params)
    }

    fn answer(&mut self, message: &Value) {
        if let Some(cost) = self.cost.as_mut() {
            cost.answered(message);
        }
    }
}

/// Asks the agent for the session's status: its costs' currency goes
/// into `report` (USD without a price: only a cost the provider reports
/// counts then); what the session has cost so far, when known, is
/// returned.
pub(super) fn session_cost(
    link: &mut Link,
    printer: &mut Printer,
    session: &str,
    report: &mut Report,
) -> Result<Option<f64>, Failure> {
    let params = json!({"sessionId": session});
    let status = link
        .call("_spindle/session/status", params, printer)?
        .unwrap_or_default();
    let usage = &status["usage"];
    report.currency = usage["costQuote"]["currency"]
        .as_str()
        .unwrap_or("USD")
        .to_string();
    Ok(usage["cost"]["amount"].as_f64())
}

/// The result line.
pub(super) fn line(report: &Report, files: Option<Vec<Value>>, exit_code: u8) -> Value {
    let usage = &report.usage;
    let cost = match report.currency.as_str() {
        "USD" => usage["cost"].clone(),
        _ => Value::Null,
    };
    json!({
        "type": "result",
        "sessionId": report.session,
        "stopReason": report.stop,
        "error": report.error,
        "message": report.message,
        "files": files,
        "usage": {
            "inputTokens": usage["inputTokens"],
            "outputTokens": usage["outputTokens"],
            "cachedInputTokens": usage["cachedReadTokens"],
            "costUsd": cost,
        },
        "budget": report.budget,
        "exitCode": exit_code,
    })
}

/// The last turn of `session` that changed files, 0 for none.
pub(super) fn last_turn(db: &Path, session: &str) -> i64 {
    Store::open(db)
        .and_then(|store| store.checkpoints(session))
        .map_or(0, |rows| rows.iter().map(|row| row.turn).max().unwrap_or(0))
}

/// The files the turns after `turn_before` changed, sorted by path, with
/// their lines added and removed (`null` for a file whose contents were
/// not kept, or that is not text); `None` when the store cannot tell.
pub(super) fn files_changed(
    db: &Path,
    session: &str,
    turn_before: i64,
    cwd: &Path,
) -> Option<Vec<Value>> {
    let store = Store::open(db).ok()?;
    let rows = store.checkpoints(session).ok()?;
    // Each file: what the first of the turns found, what the last left.
    let mut changed: BTreeMap<PathBuf, (Option<String>, Option<String>)> = BTreeMap::new();
    for row in rows.iter().filter(|row| row.turn > turn_before) {
        for file in &row.files {
            changed
                .entry(file.path.clone())
                .or_insert((file.before.clone(), None))
                .1 = file.after.clone();
        }
    }
    let canonical = std::fs::canonicalize(cwd).ok();
    let mut files: Vec<(String, Value)> = changed
        .into_iter()
        .filter(|(_, (before, after))| before != after)
        .map(|(path, (before, after))| {
            let shown = relative(&path, cwd, canonical.as_deref());
            let read = |key: &Option<String>| -> Option<Option<Vec<u8>>> {
                match key.as_deref() {
                    None => Some(None),
                    Some(crate::checkpoint::UNKEPT) => None,
                    Some(key) => store.blob(session, key).ok().flatten().map(Some),
                }
            };
            let counts = match (read(&before), read(&after)) {
                (Some(old), Some(new)) => line_counts(
                    old.as_deref().unwrap_or_default(),
                    new.as_deref().unwrap_or_default(),
                ),
                _ => None,
            };
            let (added, removed) = match counts {
                Some((added, removed)) => (json!(added), json!(removed)),
                None => (Value::Null, Value::Null),
            };
            let entry = json!({"path": shown, "added": added, "removed": removed});
            (shown, entry)
        })
        .collect();
    files.sort_by(|a, b| a.0.cmp(&b.0));
    Some(files.into_iter().map(|(_, entry)| entry).collect())
}

/// `path` relative to the workspace when inside it, with `/` between
/// its parts; else as it is.
fn relative(path: &Path, cwd: &Path, canonical: Option<&Path>) -> String {
    let inside = path
        .strip_prefix(cwd)
        .ok()
        .or_else(|| canonical.and_then(|c| path.strip_prefix(c).ok()));
    match inside {
        Some(rest) => rest
            .components()
            .map(|part| part.as_os_str().to_string_lossy())
            .collect::<Vec<_>>()
            .join("/"),
        None => path.display().to_string(),
    }
}

/// Lines added and removed from `old` to `new`, as `git diff --numstat`
/// counts them; `None` when either is not text (not UTF-8, or holds a
/// NUL byte).
pub(super) fn line_counts(old: &[u8], new: &[u8]) -> Option<(usize, usize)> {
    let (old, new) = (text(old)?, text(new)?);
    let old: Vec<&str> = old.split_inclusive('\n').collect();
    let new: Vec<&str> = new.split_inclusive('\n').collect();
    let start = old.iter().zip(&new).take_while(|(a, b)| a == b).count();
    let end = old[start..]
        .iter()
        .rev()
        .zip(new[start..].iter().rev())
        .take_while(|(a, b)| a == b)
        .count();
    let (a, b) = (&old[start..old.len() - end], &new[start..new.len() - end]);
    // A bounded search: past it, every line between counts as changed.
    let most = (20_000_000 / (a.len() + b.len()).max(1)).min(2_000);
    let common = match edit_distance(a, b, most) {
        Some(d) => (a.len() + b.len() - d) / 2,
        None => 0,
    };
    Some((b.len() - common, a.len() - common))
}

/// `bytes` as text: UTF-8 without a NUL byte.
fn text(bytes: &[u8]) -> Option<&str> {
    match bytes.contains(&0) {
        true => None,
        false => std::str::from_utf8(bytes).ok(),
    }
}

/// The fewest lines removed and added that turn `a` into `b` (Myers'
/// greedy search), when no more than `most`.
fn edit_distance(a: &[&str], b: &[&str], most: usize) -> Option<usize> {
    let (n, m) = (a.len() as isize, b.len() as isize);
    let max = (n + m).min(most as isize);
    let offset = max + 1;
    let mut furthest = vec![0isize; 2 * max as usize + 3];
    for d in 0..=max {
        for k in (-d..=d).step_by(2) {
            let at = (k + offset) as usize;
            let mut x = if k == -d || (k != d && furthest[at - 1] < furthest[at + 1]) {
                furthest[at + 1]
            } else {
                furthest[at - 1] + 1
            };
            let mut y = x - k;
            while x < n && y < m && a[x as usize] == b[y as usize] {
                x += 1;
                y += 1;
            }
            furthest[at] = x;
            if x >= n && y >= m {
                return Some(d as usize);
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_counted_as_a_diff_counts_them() {
        assert_eq!(line_counts(b"", b"a\nb\nc\n"), Some((3, 0)));
        assert_eq!(line_counts(b"a\nb\nc\n", b""), Some((0, 3)));
        assert_eq!(line_counts(b"a\nb\nc\n", b"a\nB\nc\n"), Some((1, 1)));
        assert_eq!(line_counts(b"a\nb\nc\n", b"a\nc\nd\ne\n"), Some((2, 1)));
        assert_eq!(line_counts(b"same\n", b"same\n"), Some((0, 0)));
        // A last line that gains its newline changed.
        assert_eq!(line_counts(b"a", b"a\n"), Some((1, 1)));
        // Moved lines: one removed, one added.
        assert_eq!(line_counts(b"x\ny\nz\n", b"y\nz\nx\n"), Some((1, 1)));
        assert_eq!(line_counts(b"a\0b", b"a"), None);
        assert_eq!(line_counts(b"a", &[0xff, 0xfe]), None);
    }

    #[test]
    fn a_large_change_is_counted_without_a_long_search() {
        let old: String = (0..50_000).map(|i| format!("{i}\n")).collect();
        let new: String = (0..50_000).map(|i| format!("n{i}\n")).collect();
        assert_eq!(
            line_counts(old.as_bytes(), new.as_bytes()),
            Some((50_000, 50_000))
        );
    }

    #[test]
    fn paths_are_shown_from_the_workspace() {
        let cwd = Path::new("/w/project");
        assert_eq!(
            relative(Path::new("/w/project/src/a.rs"), cwd, None),
            "src/a.rs"
        );
        assert_eq!(
            relative(Path::new("/elsewhere/b"), cwd, None),
            "/elsewhere/b"
        );
    }
}

//! `/undo`, `/rewind N` and `/redo`: the files of checkpointed turns put
//! back as they were before (or, for redo, after) those turns. A file the
//! user changed since is only overwritten when they say so. What was
//! restored is shown as `diff` content of one tool call, and the model is
//! told in the conversation.

use super::client::ClientError;
use super::runner::text_content;
use super::spec::Turn;
use super::state::State;
use super::updates::UpdateSink;
use crate::acp::{SessionUpdate, StopReason, ToolCall, ToolCallStatus, ToolKind};
use crate::provider::Message;
use crate::rpc::RpcError;
use crate::store::checkpoints::CheckpointState;
use crate::store::checkpoints::{CheckpointRow, FileRecord};
use crate::store::Store;
use serde_json::{json, Value};
use std::path::Path;

pub(super) use super::report::Rewind;

/// What happened to one file.
struct Outcome {
    diff: Option<Value>,
    line: String,
}

pub(super) fn run(
    turn: &Turn,
    sink: &mut UpdateSink,
    state: &mut State,
    rewind: Rewind,
) -> Result<StopReason, RpcError> {
    let say = |sink: &mut UpdateSink, text: &str| {
        sink.begin_message();
        sink.updates
            .borrow_mut()
            .chunk(false, &sink.message_id, text);
    };
    let Some(store) = turn
        .workspace
        .db
        .as_deref()
        .and_then(|db| Store::open(db).ok())
    else {
        say(
            sink,
            "Checkpoints need the session database, which is not available.",
        );
        return Ok(StopReason::EndTurn);
    };
    let all = store
        .checkpoints(&turn.io.session_id)
        .map_err(|e| RpcError::internal(e.to_string()))?;
    let targets: Vec<CheckpointRow> = match rewind {
        Rewind::Undo(n) => all
            .iter()
            .rev()
            .filter(|c| c.state == CheckpointState::Applied)
            .take(n.max(1))
            .cloned()
            .collect(),
        Rewind::Redo => {
            // The undone run at the end; its first turn is the next redo.
            let undone: Vec<&CheckpointRow> = all
                .iter()
                .rev()
                .take_while(|c| c.state == CheckpointState::Undone)
                .collect();
            undone.last().map(|c| (*c).clone()).into_iter().collect()
        }
    };
    if targets.is_empty() {
        let text = match rewind {
            Rewind::Undo(_) => "There is nothing to undo: no turn of this session changed files (or its checkpoint was pruned).",
            Rewind::Redo => "There is nothing to redo.",
        };
        say(sink, text);
        return Ok(StopReason::EndTurn);
    }
    let call_id = format!("undo_{}", crate::util::random_hex());
    let verb = match rewind {
        Rewind::Undo(_) => "Undo",
        Rewind::Redo => "Redo",
    };
    let files: usize = targets.iter().map(|c| c.files.len()).sum();
    let title = format!(
        "{verb}: {} of {}",
        crate::util::count(files, "file", "files"),
        crate::util::count(targets.len(), "turn", "turns")
    );
    let locations = targets
        .iter()
        .flat_map(|c| &c.files)
        .map(|f| json!({"path": f.path}));
    sink.updates
        .borrow_mut()
        .send(SessionUpdate::ToolCall(ToolCall {
            tool_call_id: call_id.clone(),
            name: None,
            title,
            kind: ToolKind::Edit,
            status: ToolCallStatus::InProgress,
            locations: Some(locations.collect()),
            raw_input: None,
        }));
    let mut diffs = Vec::new();
    let mut lines = Vec::new();
    for checkpoint in &targets {
        for file in &checkpoint.files {
            let (want, expect) = match rewind {
                Rewind::Undo(_) => (&file.before, &file.after),
                Rewind::Redo => (&file.after, &file.before),
            };
            match restore(
                turn,
                &store,
                &call_id,
                file,
                want.as_deref(),
                expect.as_deref(),
            ) {
                Ok(outcome) => {
                    diffs.extend(outcome.diff);
                    lines.push(outcome.line);
                }
                Err(()) => {
                    finish(sink, &call_id, ToolCallStatus::Failed, diffs, "Cancelled.");
                    return Ok(StopReason::Cancelled);
                }
            }
        }
        let next = match rewind {
            Rewind::Undo(_) => CheckpointState::Undone,
            Rewind::Redo => CheckpointState::Applied,
        };
        if let Err(error) = store.set_checkpoint_state(&turn.io.session_id, checkpoint.turn, next) {
            log::warn!("cannot mark the checkpoint: {error}");
        }
    }
    let summary = lines.join("\n");
    finish(sink, &call_id, ToolCallStatus::Completed, diffs, &summary);
    say(sink, &format!("{verb} done:\n{summary}"));
    // The model must know its earlier changes are gone (or back).
    state.added.push(Message::user(format!(
        "(The user ran /{}: the workspace files changed as follows; take it into account.)\n{summary}",
        verb.to_lowercase()
    )));
    Ok(StopReason::EndTurn)
}

fn finish(
    sink: &mut UpdateSink,
    call_id: &str,
    status: ToolCallStatus,
    mut content: Vec<Value>,
    text: &str,
) {
    content.push(text_content(text));
    sink.updates
        .borrow_mut()
        .send(SessionUpdate::tool_call_ended(call_id, status, content));
}

/// The file's content now, as the user sees it (`Ok(None)`: absent;
/// `Err`: there is a file, too large or unreadable to compare).
fn current(turn: &Turn, path: &Path, via_editor: bool) -> Result<Option<Vec<u8>>, ()> {
    use crate::checkpoint::Contents;
    let disk = match crate::checkpoint::read_disk(path, turn.workspace.checkpoints.max_file_bytes) {
        Contents::Absent => None,
        Contents::Data(data) => Some(data),
        Contents::Unkept => return Err(()),
    };
    let text = disk
        .as_deref()
        .is_some_and(|b| std::str::from_utf8(b).is_ok());
    if via_editor && text && turn.io.client.capabilities.fs.read_text_file {
        if let Ok(text) = turn.io.client.read_text_file(path) {
            return Ok(Some(text.into_bytes()));
        }
    }
    Ok(disk)
}

fn text(bytes: Option<&[u8]>) -> String {
    bytes
        .map(|b| String::from_utf8_lossy(b).into_owned())
        .unwrap_or_default()
}

/// Puts one file back to `want` (a content key; `None`: absent), first
/// checking it still is `expect`; asks when it is not. `Err` when the
/// turn was cancelled.
fn restore(
    turn: &Turn,
    store: &Store,
    call_id: &str,
    file: &FileRecord,
    want: Option<&str>,
    expect: Option<&str>,
) -> Result<Outcome, ()> {
    let path = &file.path;
    let shown = path.display().to_string();
    // A folder replaced by a symlink since must not carry the restore out
    // of the workspace.
    if path.starts_with(&turn.workspace.root)
        && !crate::tools::paths::resolve(&turn.workspace.root, &shown).inside
    {
        return Ok(Outcome {
            diff: None,
            line: format!("- {shown}: not restored (its folder now leads outside the workspace)"),
        });
    }
    let load = |key: Option<&str>| -> Result<Option<Vec<u8>>, ()> {
        match key {
            None => Ok(None),
            // Existed but was not kept: never restored, never deleted.
            Some(crate::checkpoint::UNKEPT) => Err(()),
            Some(key) => match store.blob(&turn.io.session_id, key) {
                Ok(Some(data)) => Ok(Some(data)),
                _ => Err(()),
            },
        }
    };
    let Ok(wanted) = load(want) else {
        return Ok(Outcome {
            diff: None,
            line: format!(
                "- {shown}: not restored (its earlier content was too large to keep, or pruned)"
            ),
        });
    };
    let expected = load(expect);
    let Ok(now) = current(turn, path, file.via_editor) else {
        return Ok(Outcome {
            diff: None,
            line: format!("- {shown}: not restored (it is now too large to compare)"),
        });
    };
    if now == wanted {
        return Ok(Outcome {
            diff: None,
            line: format!("- {shown}: already as it was"),
        });
    }
    let diff = {
        let mut diff = json!({"type": "diff", "path": path, "newText": text(wanted.as_deref())});
        if now.is_some() {
            diff["oldText"] = json!(text(now.as_deref()));
        }
        diff
    };
    if expected.as_ref().map_or(true, |e| *e != now) {
        // Changed since the agent's turn (by the user, or another tool):
        // only with their word.
        let params = json!({
            "sessionId": turn.io.session_id,
            "toolCall": {
                "toolCallId": call_id,
                "title": format!("{shown} changed since; restore it anyway?"),
                "kind": "edit",
                "status": "pending",
                "content": [diff.clone()],
                "locations": [{"path": path}],
            },
            "options": [
                {"optionId": "allow_once", "name": "Restore it (your changes are lost)", "kind": "allow_once"},
                {"optionId": "reject_once", "name": "Keep my version", "kind": "reject_once"},
            ],
        });
        match turn.io.client.request("session/request_permission", params) {
            Ok(answer) if answer["outcome"]["optionId"] == "allow_once" => {}
            Ok(answer) if answer["outcome"]["outcome"] == "cancelled" => return Err(()),
            Ok(_) | Err(ClientError::Rpc(_)) => {
                return Ok(Outcome {
                    diff: None,
                    line: format!("- {shown}: kept your version (it changed since)"),
                })
            }
            Err(ClientError::Cancelled) | Err(ClientError::Gone) => return Err(()),
        }
    }
    let written = match &wanted {
        None => crate::tools::patch::local_remove(path).or_else(|e| {
            if path.exists() {
                Err(e.to_string())
            } else {
                Ok(())
            }
        }),
        Some(data) => match std::str::from_utf8(data) {
            Ok(text) if file.via_editor && turn.io.client.capabilities.fs.write_text_file => turn
                .io
                .client
                .write_text_file(path, text)
                .map_err(|e| e.to_string()),
            Ok(text) => crate::tools::patch::local_write(path, text).map_err(String::from),
            Err(_) => crate::util::write_bytes_atomic(path, data),
        },
    };
    Ok(match written {
        Ok(()) => Outcome {
            diff: Some(diff),
            line: match wanted {
                None => format!("- {shown}: removed"),
                Some(_) if now.is_none() => format!("- {shown}: recreated"),
                Some(_) => format!("- {shown}: restored"),
            },
        },
        Err(error) => Outcome {
            diff: None,
            line: format!("- {shown}: not restored ({error})"),
        },
    })
}

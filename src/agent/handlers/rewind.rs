//! Rewind over the protocol (`_session/rewind_points`, `_session/rewind`;
//! docs/extensions.md "Rewind"): back to one of the session's prompts,
//! putting back the files its turn and the later ones changed (from the
//! checkpoints `/undo` uses), cutting the conversation before it, or both.
//!
//! All or nothing: every file is checked before any is written, and a
//! file that is no longer as the agent left it (the user changed it
//! since), or whose earlier content was not kept, refuses the whole
//! rewind, naming the files. The files are read from the disk: unsaved
//! changes in the editor are not seen.

use super::ext_params::{bad, store_error};
use crate::acp::spindle::results::to_json;
use crate::acp::spindle::rewind::{
    RewindConversation, RewindFiles, RewindParams, RewindPoint, RewindPointsParams,
    RewindPointsResult, RewindResult, RewoundFile,
};
use crate::agent::dispatcher::Dispatcher;
use crate::checkpoint::{Contents, UNKEPT};
use crate::rpc::RpcError;
use crate::store::checkpoints::{CheckpointRow, CheckpointState};
use crate::store::Store;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// A file as a rewind would leave it: the content the first of the turns
/// found (`want`), and the one the last of them left (`expect`); content
/// keys, `None` for no file.
struct Change {
    want: Option<String>,
    expect: Option<String>,
}

/// The files changed by the turns from `turn` on whose changes are still
/// in the workspace (not undone), by path.
fn changes(checkpoints: &[CheckpointRow], turn: i64) -> BTreeMap<PathBuf, Change> {
    let mut files = BTreeMap::new();
    for checkpoint in checkpoints
        .iter()
        .filter(|c| c.turn >= turn && c.state == CheckpointState::Applied)
    {
        for file in &checkpoint.files {
            files
                .entry(file.path.clone())
                .or_insert(Change {
                    want: file.before.clone(),
                    expect: None,
                })
                .expect = file.after.clone();
        }
    }
    files
}

/// A file's content from the store by key (`Ok(None)`: no file); `Err`
/// when it was not kept, or is gone.
fn load(store: &Store, session: &str, key: Option<&str>) -> Result<Option<Vec<u8>>, ()> {
    match key {
        None => Ok(None),
        Some(UNKEPT) => Err(()),
        Some(key) => match store.blob(session, key) {
            Ok(Some(data)) => Ok(Some(data)),
            _ => Err(()),
        },
    }
}

/// What putting one file back does, or why it cannot be.
enum Step {
    Write(PathBuf, Option<Vec<u8>>, &'static str),
    Unchanged,
    Refused(String),
}

fn plan(store: &Store, session: &str, root: &Path, max: u64, path: &Path, change: &Change) -> Step {
    let shown = path.display().to_string();
    // A folder replaced by a symlink since must not carry the write out
    // of the workspace.
    if path.starts_with(root) && !crate::tools::paths::resolve(root, &shown).inside {
        return Step::Refused(format!(
            "{shown} (its folder now leads outside the workspace)"
        ));
    }
    let Ok(wanted) = load(store, session, change.want.as_deref()) else {
        return Step::Refused(format!(
            "{shown} (its earlier content was too large to keep, or was pruned)"
        ));
    };
    let now = match crate::checkpoint::read_disk(path, max) {
        Contents::Absent => None,
        Contents::Data(data) => Some(data),
        Contents::Unkept => {
            return Step::Refused(format!("{shown} (it is now too large to compare)"));
        }
    };
    if now == wanted {
        return Step::Unchanged;
    }
    match load(store, session, change.expect.as_deref()) {
        Ok(left) if left == now => {}
        Ok(_) => return Step::Refused(format!("{shown} (changed since the agent last wrote it)")),
        Err(()) => {
            return Step::Refused(format!(
                "{shown} (what the agent left in it was too large to keep, so a change since cannot be ruled out)"
            ))
        }
    }
    let action = match (&wanted, &now) {
        (None, _) => "deleted",
        (Some(_), None) => "recreated",
        (Some(_), Some(_)) => "restored",
    };
    Step::Write(path.to_path_buf(), wanted, action)
}

/// Writes bytes atomically beside the file (parents created), or removes
/// it for `None`.
fn put_back(path: &Path, data: Option<&[u8]>) -> Result<(), String> {
    let Some(data) = data else {
        return crate::tools::patch::local_remove(path).or_else(|error| {
            if path.exists() {
                Err(error.into())
            } else {
                Ok(())
            }
        });
    };
    if let Ok(text) = std::str::from_utf8(data) {
        return crate::tools::patch::local_write(path, text).map_err(String::from);
    }
    crate::util::write_bytes_atomic(path, data)
}

pub(super) fn rewind_points(
    d: &mut Dispatcher,
    params: RewindPointsParams,
) -> Result<Value, RpcError> {
    let id = params.session_id;
    let store = d.store()?;
    let prompts = store.rewind_points(id).map_err(store_error)?;
    let checkpoints = store.checkpoints(id).map_err(store_error)?;
    let points = prompts
        .into_iter()
        .enumerate()
        .map(|(index, prompt)| {
            let files = changes(&checkpoints, prompt.turn);
            let kept = |key: &Option<String>| load(store, id, key.as_deref()).is_ok();
            RewindPoint {
                message_id: prompt.message_id,
                text: prompt.text,
                index,
                files_changed: files.len(),
                can_rewind_files: files.values().all(|c| kept(&c.want)),
                can_rewind_conversation: prompt.messages_after.is_some(),
            }
        })
        .collect();
    Ok(to_json(RewindPointsResult { points }))
}

pub(super) fn rewind(d: &mut Dispatcher, params: RewindParams) -> Result<Value, RpcError> {
    let id = params.session_id;
    if d.checked(id).running.is_some() {
        return Err(busy(id));
    }
    let max = d
        .registry()
        .map(|r| r.config.checkpoints.settings().max_file_bytes)
        .unwrap_or_else(|_| crate::checkpoint::Settings::default().max_file_bytes);
    let root = d.checked(id).cwd().to_path_buf();
    let store = d.store()?;
    if !store.running_turns(id).map_err(store_error)?.is_empty() {
        return Err(busy(id));
    }
    let prompts = store.rewind_points(id).map_err(store_error)?;
    // Ids are meant to be unique; a client that reused one means its
    // latest prompt.
    let found = prompts
        .iter()
        .rev()
        .find(|p| p.message_id == params.message_id);
    let Some(prompt) = found else {
        return Err(bad(
            "messageId",
            &format!(
                "no prompt of session {id} has id {:?}; _session/rewind_points lists them",
                params.message_id
            ),
        ));
    };
    let turn = prompt.turn;
    let conversation = match (params.mode.conversation(), prompt.messages_after) {
        (false, _) => None,
        (true, Some(count)) => Some(count),
        (true, None) => {
            return Err(RpcError::invalid_request(
                "the conversation cannot be cut before this message: it was compacted or cleared since (or the message was a command the model never saw). The files can still be rewound (mode \"files\").",
            )
            .with_data(json!({"code": "conversation_compacted"})))
        }
    };
    // Every file is planned (and checked) before any is written.
    let mut writes = Vec::new();
    let mut refused = Vec::new();
    let checkpoints = store.checkpoints(id).map_err(store_error)?;
    let mut undone: Vec<i64> = Vec::new();
    if params.mode.files() {
        for (path, change) in changes(&checkpoints, turn) {
            match plan(store, id, &root, max, &path, &change) {
                Step::Write(path, data, action) => writes.push((path, data, action)),
                Step::Unchanged => {}
                Step::Refused(why) => refused.push(why),
            }
        }
        undone = checkpoints
            .iter()
            .filter(|c| c.turn >= turn && c.state == CheckpointState::Applied)
            .map(|c| c.turn)
            .collect();
    }
    if !refused.is_empty() {
        return Err(RpcError::invalid_request(format!(
            "nothing was rewound: these files cannot be put back safely: {}. Save a copy of your changes, or rewind the conversation only (mode \"conversation\").",
            refused.join("; ")
        ))
        .with_data(json!({"code": "files_conflict", "files": refused})));
    }
    let files = params.mode.files().then(|| RewindFiles {
        can_rewind: true,
        files_changed: writes
            .iter()
            .map(|(path, _, _)| path.display().to_string())
            .collect(),
        files: writes
            .iter()
            .map(|(path, _, action)| RewoundFile {
                path: path.display().to_string(),
                action,
            })
            .collect(),
    });
    if params.dry_run {
        return Ok(to_json(RewindResult {
            dry_run: true,
            files,
            conversation: conversation.map(|count| RewindConversation {
                rewound: false,
                messages_dropped: count,
            }),
        }));
    }
    // The cut first: the store refuses it if a turn started meanwhile
    // (in another process), and then no file has been touched.
    let dropped = match conversation {
        Some(_) => Some(store.rewind_conversation(id, turn).map_err(store_error)?),
        None => None,
    };
    let mut failed = Vec::new();
    for (path, data, _) in &writes {
        if let Err(error) = put_back(path, data.as_deref()) {
            failed.push(format!("{}: {error}", path.display()));
        }
    }
    for checkpoint in undone {
        if let Err(error) = store.set_checkpoint_state(id, checkpoint, CheckpointState::Undone) {
            log::warn!("cannot mark the checkpoint: {error}");
        }
    }
    // Files put back under a conversation that stays: the model must
    // know its later changes are gone, as after `/undo`.
    let written = writes.len() - failed.len();
    if dropped.is_none() && written > 0 {
        let lines: Vec<String> = writes
            .iter()
            .map(|(path, _, action)| format!("- {}: {action}", path.display()))
            .collect();
        let note = crate::provider::Message::user(format!(
            "(The user rewound the workspace files to how they were before an earlier message of this conversation; take it into account.)\n{}",
            lines.join("\n")
        ));
        store
            .append(id, 0, &[], std::slice::from_ref(&note))
            .map_err(store_error)?;
    }
    if dropped.is_some() || written > 0 {
        let messages = store.messages(id).map_err(store_error)?;
        if let Some(session) = d.session_mut(id) {
            session.stored_messages = messages.len() as i64;
            session.messages = messages;
            session.known = None;
        }
    }
    if !failed.is_empty() {
        return Err(RpcError::failed(format!(
            "Some files could not be written back{}: {}",
            if dropped.is_some() {
                " (the conversation was cut)"
            } else {
                ""
            },
            failed.join("; ")
        ))
        .with_data(json!({"code": "files_unwritten", "files": failed})));
    }
    Ok(to_json(RewindResult {
        dry_run: false,
        files,
        conversation: dropped.map(|count| RewindConversation {
            rewound: true,
            messages_dropped: count,
        }),
    }))
}

fn busy(id: &str) -> RpcError {
    RpcError::invalid_request(format!(
        "session {id} is running a turn; cancel it or wait for it to end, then rewind"
    ))
    .with_data(json!({"code": "busy"}))
}

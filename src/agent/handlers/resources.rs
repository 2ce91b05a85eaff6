//! Resource windows (`_spindle/resource`): a window of lines of a
//! workspace file (with its revision) or of bytes of a job's log, and the
//! line indexes they are read through, made on a thread of their own so a
//! long pass never holds the dispatcher.

use crate::acp::spindle::results::{to_json, FileWindowResult, LogWindowResult};
use crate::acp::spindle::{ResourceParams, Window, WINDOW_CAP};
use crate::agent::dispatcher::Dispatcher;
use crate::rpc::RpcError;
use serde_json::{json, Value};

/// The largest workspace file a `resource` window reads (it is indexed in
/// one streaming pass, never held).
const RESOURCE_FILE_CAP: u64 = 4 * 1024 * 1024 * 1024;

/// Answers from `file`'s line index: at once when the session has it
/// (and the file is unchanged); else a thread of its own makes it and
/// posts the answer back (`Ok(None)`; the request stays open until
/// then, and a `$/cancel_request` answers it first), so a long pass
/// never holds the dispatcher. At most [`INDEXING_AT_ONCE`] such threads at a time.
pub(super) fn answer_when_indexed(
    d: &mut Dispatcher,
    request: &crate::rpc::RequestId,
    indexes: std::sync::Arc<std::sync::Mutex<crate::tools::lines::Indexes>>,
    file: std::path::PathBuf,
    failure: impl Fn(crate::tools::lines::LinesError) -> RpcError + Send + 'static,
    answer: impl FnOnce(&crate::tools::lines::FileIndex) -> Result<Value, RpcError> + Send + 'static,
) -> Result<Option<Value>, RpcError> {
    use std::sync::atomic::Ordering;
    let cached = indexes
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
        .cached(&file, RESOURCE_FILE_CAP)
        .map_err(&failure)?;
    if let Some(index) = cached {
        return answer(&index).map(Some);
    }
    let busy = d.indexing();
    if busy.fetch_add(1, Ordering::SeqCst) >= INDEXING_AT_ONCE {
        busy.fetch_sub(1, Ordering::SeqCst);
        return Err(RpcError::invalid_request(format!(
            "{INDEXING_AT_ONCE} files are being read for windows already; ask again when one is answered"
        ))
        .with_data(json!({"code": "busy"})));
    }
    let busy = busy.clone();
    let later = d.answer_later(request);
    let gate = d.test_hooks().then(index_gate).flatten();
    let spawned = std::thread::Builder::new()
        .name("spindle-index".into())
        .spawn(move || {
            if let Some(gate) = &gate {
                wait_for_gate(gate);
            }
            // Whatever happens in the pass, the request is answered
            // and the slot given back.
            let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                crate::tools::lines::index(&file, RESOURCE_FILE_CAP)
                    .map_err(&failure)
                    .and_then(|index| {
                        indexes
                            .lock()
                            .unwrap_or_else(|poisoned| poisoned.into_inner())
                            .keep(&file, index.clone());
                        answer(&index)
                    })
            }))
            .unwrap_or_else(|_| {
                Err(RpcError::internal("reading a file for a window failed")
                    .with_data(json!({"code": "internal_panic"})))
            });
            busy.fetch_sub(1, Ordering::SeqCst);
            later.answer(result);
            if let Some(gate) = &gate {
                let _ = std::fs::remove_file(gate);
            }
        });
    if spawned.is_err() {
        d.withdraw_later(request);
        d.indexing().fetch_sub(1, Ordering::SeqCst);
        return Err(RpcError::internal("cannot start a thread to read the file"));
    }
    Ok(None)
}

/// `_spindle/resource`: a window of a workspace file (with its
/// revision) or of a job's log. A workspace file not indexed yet (or
/// changed since) is read on a thread of its own, which answers: a pass
/// over a file of gigabytes never holds the dispatcher. `None`: that
/// thread answers.
pub(in crate::agent) fn resource(
    d: &mut Dispatcher,
    request: &crate::rpc::RequestId,
    params: ResourceParams,
) -> Option<Result<Value, RpcError>> {
    match workspace_window(d, request, params) {
        Ok(Some(answer)) => Some(Ok(answer)),
        Ok(None) => None,
        Err(error) => Some(Err(error)),
    }
}

fn workspace_window(
    d: &mut Dispatcher,
    request: &crate::rpc::RequestId,
    params: ResourceParams,
) -> Result<Option<Value>, RpcError> {
    let id = params.session_id;
    let (path, start, lines) = match params.window {
        Window::Log {
            job_id,
            byte_offset,
            byte_count,
        } => return log_window(d, id, job_id, byte_offset, byte_count).map(Some),
        Window::File {
            path,
            start_line,
            line_count,
        } => (path, start_line, line_count),
    };
    let root = d.checked(id).cwd().to_path_buf();
    let resolved = crate::tools::paths::resolve(&root, path);
    if !resolved.inside {
        return Err(
            RpcError::invalid_params(format!("uri: {path} is outside the workspace"))
                .with_data(json!({"code": "outside_workspace"})),
        );
    }
    let indexes = d.checked(id).line_indexes().clone();
    let shown = path.to_string();
    let file = resolved.path.clone();
    let failure = {
        let shown = shown.clone();
        move |error| lines_failure(&shown, error)
    };
    answer_when_indexed(d, request, indexes, resolved.path, failure, move |index| {
        file_window(&shown, &file, index, start, lines)
    })
}

/// A window of a job's log, by bytes.
fn log_window(
    d: &mut Dispatcher,
    id: &str,
    job_id: &str,
    offset: u64,
    wanted: u64,
) -> Result<Value, RpcError> {
    let job = d.checked(id).jobs().get(job_id).ok_or_else(|| {
        RpcError::invalid_params(format!("uri: no job {job_id:?}"))
            .with_data(json!({"code": "unknown_job"}))
    })?;
    let (text, next, total) = log_bytes(&job.log_path, offset, wanted)?;
    Ok(to_json(LogWindowResult {
        text,
        byte_offset: offset,
        byte_count: next - offset,
        total_bytes: total,
    }))
}

/// `wanted` bytes of a job's log from `offset`, as text: the text, the
/// offset after it and the log's size.
pub(super) fn log_bytes(
    path: &std::path::Path,
    offset: u64,
    wanted: u64,
) -> Result<(String, u64, u64), RpcError> {
    let total = std::fs::metadata(path).map(|m| m.len()).unwrap_or(0);
    if offset >= total {
        return Ok((String::new(), total, total));
    }
    let (text, next) = crate::tools::jobs::read_window(path, offset, wanted as usize)
        .map_err(RpcError::internal)?;
    Ok((text, next, total))
}

/// With test hooks on, `SPINDLE_TEST_INDEX_GATE` names a file an index
/// pass waits for before it reads, and removes once it has posted its
/// answer: a test holds a pass open, and learns when its answer is in.
fn index_gate() -> Option<std::path::PathBuf> {
    std::env::var_os("SPINDLE_TEST_INDEX_GATE").map(Into::into)
}

fn wait_for_gate(gate: &std::path::Path) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while !gate.exists() && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}

/// How many files may be read for windows at once.
const INDEXING_AT_ONCE: usize = 4;

/// Why a workspace file has no window, for the client.
fn lines_failure(path: &str, error: crate::tools::lines::LinesError) -> RpcError {
    use crate::tools::lines::LinesError;
    match error {
        LinesError::NotText => RpcError::invalid_params(format!("uri: {path} is not UTF-8 text"))
            .with_data(json!({"code": "not_text"})),
        LinesError::TooLarge => RpcError::invalid_params(format!(
            "uri: {path} is over {} MiB, too large for a window",
            RESOURCE_FILE_CAP >> 20
        ))
        .with_data(json!({"code": "too_large"})),
        LinesError::Unreadable => RpcError::invalid_params(format!("uri: {path} cannot be read"))
            .with_data(json!({"code": "unreadable"})),
    }
}

/// The answer for lines `start..start + lines` of an indexed file.
fn file_window(
    shown: &str,
    path: &std::path::Path,
    index: &crate::tools::lines::FileIndex,
    start: u64,
    lines: u64,
) -> Result<Value, RpcError> {
    let window = crate::tools::lines::window(path, index, start, lines, WINDOW_CAP as usize)
        .map_err(|error| lines_failure(shown, error))?;
    let mut text = window.join("\n");
    if text.len() > WINDOW_CAP as usize {
        let mut end = WINDOW_CAP as usize;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        text.truncate(end);
    }
    Ok(to_json(FileWindowResult {
        text,
        start_line: start,
        line_count: window.len(),
        total_lines: index.total_lines,
        revision: &index.revision,
    }))
}

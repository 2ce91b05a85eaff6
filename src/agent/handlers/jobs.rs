//! Background jobs (docs/extensions.md, "Background jobs"): their records, the events and the
//! turn a job's end starts, the `_spindle/job*` methods, and an agent
//! job's transcript (its log's updates, fitted to the client).

use super::events;
use super::ext_params::bad;
use super::prompting;
use super::prompting::TurnStart;
use super::resources;
use super::resources::log_bytes;
use crate::acp::spindle::results::{
    to_json, JobResult, JobsResult, TextTranscriptResult, UpdatesTranscriptResult,
};
use crate::acp::spindle::{JobParams, JobSendParams, JobTranscriptParams, JobsParams, WINDOW_CAP};
use crate::agent::dispatcher::session::Outcome;
use crate::agent::dispatcher::Dispatcher;
use crate::rpc::RpcError;
use crate::tools::jobs::{JobKind, JobState};
use crate::util::OrLogged;
use serde_json::{json, Value};

fn job_json(job: &crate::tools::jobs::JobInfo) -> Value {
    to_json(JobResult {
        job_id: &job.job_id,
        kind: job.kind.as_str(),
        title: job.command.chars().take(80).collect(),
        command: &job.command,
        cwd: &job.cwd,
        state: job.state.as_str(),
        exit_code: job.exit_code,
        started_at: &job.started_at,
        ended_at: job.ended_at.as_deref(),
        output_bytes: job.output_bytes,
        // Where the editor shows it (a job in its terminal).
        terminal_id: job.terminal_id.as_deref(),
    })
}

/// A job started or ended: its record is committed; an end is told.
pub(super) fn job_changed(d: &mut Dispatcher, id: &str, job_id: &str, ended: bool) {
    let Some(job) = d.session(id).and_then(|s| s.jobs().get(job_id)) else {
        return;
    };
    let record = serde_json::to_value(&job).or_logged(format_args!("cannot record job {job_id}"));
    if let Ok(store) = d.store() {
        if let Err(error) = store.save_job(id, job_id, &record) {
            log::warn!("cannot store job {job_id}: {error}");
        }
    }
    if ended {
        job_ended(d, id, job_id);
    } else {
        events::event(d, id, "job", job_json(&job));
    }
}

/// Makes the session's jobs tell the dispatcher when they end.
pub(in crate::agent) fn own_jobs(d: &mut Dispatcher, id: &str) {
    let Some(session) = d.session(id) else {
        return;
    };
    let events = d.events();
    let session_id = id.to_string();
    session
        .jobs()
        .set_on_end(std::sync::Arc::new(move |job: &str, ended: bool| {
            let _ = events.send(crate::agent::dispatcher::Event::JobChanged {
                session_id: session_id.clone(),
                job_id: job.to_string(),
                ended,
            });
        }));
    // Jobs of an earlier process: their records, ended.
    let records: Vec<crate::tools::jobs::JobInfo> = d
        .store()
        .ok()
        .map(|store| store.jobs(id).or_logged("cannot read a session's jobs"))
        .unwrap_or_default()
        .into_iter()
        .filter_map(|v| serde_json::from_value(v).ok())
        .collect();
    if records.is_empty() {
        return;
    }
    let jobs = d.checked(id).jobs().clone();
    jobs.adopt(records);
    for job in jobs.list() {
        if let Ok(store) = d.store() {
            let record = serde_json::to_value(&job).or_logged("cannot record an earlier job");
            let _ = store.save_job(id, &job.job_id, &record);
        }
    }
}

/// A job ended: the client hears of it; in an idle session whose inbox
/// runs and whose last turn ended normally, the model is told (a turn
/// with source `job`).
fn job_ended(d: &mut Dispatcher, id: &str, job_id: &str) {
    let Some(session) = d.session(id) else {
        return;
    };
    let Some(job) = session.jobs().get(job_id) else {
        return;
    };
    events::event(d, id, "job", job_json(&job));
    let session = d.checked(id);
    let quiet = session.running.is_some()
        || session.is_closed()
        || session.inbox_held()
        || !session.last_outcome().is_some_and(Outcome::is_end_turn)
        || job.state == JobState::Killed;
    if quiet || d.closing() {
        return;
    }
    let size = std::fs::metadata(&job.log_path)
        .map(|m| m.len())
        .unwrap_or(0);
    // An agent job's log ends with its answer (one JSON line).
    let window: u64 = if job.kind == JobKind::Agent {
        262_144
    } else {
        2_048
    };
    let tail = crate::tools::jobs::read_window(
        &job.log_path,
        size.saturating_sub(window),
        window as usize,
    )
    .map(|(text, _)| text)
    .or_logged(format_args!("cannot read the end of job {job_id}'s log"));
    let tail = if job.kind == JobKind::Agent {
        crate::agent::turn::agent_answer(&tail)
    } else {
        tail
    };
    let text = format!(
        "(The background job {} `{}` ended: {}.) The end of its output:\n{}",
        job.job_id,
        job.command,
        job.exit_code
            .map(|c| format!("exit code {c}"))
            .unwrap_or_else(|| job.state.to_string()),
        if tail.is_empty() {
            "(no output)"
        } else {
            &tail
        }
    );
    let start = TurnStart {
        request: None,
        source: crate::agent::dispatcher::session::TurnSource::Job,
        item: None,
        wait: None,
        message_id: None,
    };
    if let Err(error) =
        prompting::start_turn(d, id, &[json!({"type": "text", "text": text})], start)
    {
        log::warn!(
            "cannot tell the model that job {job_id} ended: {}",
            error.message
        );
    }
}

fn session_job(
    d: &mut Dispatcher,
    params: &JobParams,
) -> Result<crate::tools::jobs::JobInfo, RpcError> {
    let JobParams { session_id, job_id } = params;
    d.checked(session_id).jobs().get(job_id).ok_or_else(|| {
        RpcError::invalid_params(format!("jobId: no job {job_id:?} in session {session_id}"))
            .with_data(json!({"code": "unknown_job"}))
    })
}

pub(super) fn jobs_list(d: &mut Dispatcher, params: JobsParams) -> Result<Value, RpcError> {
    let JobsParams {
        session_id: id,
        start,
        limit,
    } = params;
    let jobs = d.checked(id).jobs().list();
    let items: Vec<Value> = jobs.iter().skip(start).take(limit).map(job_json).collect();
    let next = (start + items.len() < jobs.len()).then(|| (start + items.len()).to_string());
    Ok(to_json(JobsResult {
        items,
        next_cursor: next,
    }))
}

pub(super) fn job_item(d: &mut Dispatcher, params: JobParams) -> Result<Value, RpcError> {
    let job = session_job(d, &params)?;
    Ok(job_json(&job))
}

/// `_spindle/job/transcript`; `None`: a thread indexing the log of an
/// agent job answers.
pub(in crate::agent) fn job_transcript(
    d: &mut Dispatcher,
    request: &crate::rpc::RequestId,
    params: JobTranscriptParams,
) -> Option<Result<Value, RpcError>> {
    transcript(d, request, params).transpose()
}

fn transcript(
    d: &mut Dispatcher,
    request: &crate::rpc::RequestId,
    params: JobTranscriptParams,
) -> Result<Option<Value>, RpcError> {
    let job = session_job(d, &params.job)?;
    let agent = job.kind == JobKind::Agent;
    match (params.output, agent) {
        (None | Some("text"), false) => {}
        (None | Some("structured"), true) => return structured_transcript(d, request, job, params),
        (Some(other), false) => {
            return Err(bad(
                "output",
                &format!("{other:?} does not apply to a command job; use \"text\""),
            ))
        }
        (Some(other), true) => {
            return Err(bad(
                "output",
                &format!("{other:?} does not apply to an agent job; use \"structured\""),
            ))
        }
    }
    let offset = params.offset;
    let limit = params.limit.within(65_536, WINDOW_CAP)?;
    let (text, next, total) = log_bytes(&job.log_path, offset, limit)?;
    let complete = next >= total && job.state != JobState::Running;
    Ok(Some(to_json(TextTranscriptResult {
        text,
        offset,
        next_offset: (!complete).then_some(next),
        total,
        complete,
    })))
}

/// An agent job's updates, from update `offset`: at most `limit`
/// (default 100, at most 200) and 262,144 bytes; an update larger
/// than that alone is -32600 `too_large`, without advancing.
fn structured_transcript(
    d: &mut Dispatcher,
    request: &crate::rpc::RequestId,
    job: crate::tools::jobs::JobInfo,
    params: JobTranscriptParams,
) -> Result<Option<Value>, RpcError> {
    let offset = params.offset;
    let limit = params.limit.within(100, 200)?;
    let indexes = d.checked(params.job.session_id).line_indexes().clone();
    let path = job.log_path.clone();
    let unreadable = {
        let job_id = job.job_id.clone();
        move |_| RpcError::internal(format!("the log of job {job_id} cannot be read"))
    };
    let capabilities = d.capabilities();
    resources::answer_when_indexed(
        d,
        request,
        indexes,
        path,
        unreadable.clone(),
        move |index| structured_updates(&job, index, offset, limit, &capabilities, unreadable),
    )
}

pub(super) fn job_send(d: &mut Dispatcher, params: JobSendParams) -> Result<Value, RpcError> {
    let job = session_job(d, &params.job)?;
    let id = params.job.session_id;
    // The text's size was checked with the params.
    d.checked(id)
        .jobs()
        .send(&job.job_id, params.text)
        .map_err(|problem| {
            let code = if job.terminal_id.is_some() {
                "in_terminal"
            } else if job.state != JobState::Running {
                "not_running"
            } else {
                "not_reading"
            };
            RpcError::invalid_request(problem).with_data(json!({"code": code}))
        })?;
    Ok(job_json(
        &d.checked(id).jobs().get(&job.job_id).unwrap_or(job),
    ))
}

pub(super) fn job_cancel(d: &mut Dispatcher, params: JobParams) -> Result<Value, RpcError> {
    let job = session_job(d, &params)?;
    let info = d
        .checked(params.session_id)
        .jobs()
        .kill(&job.job_id)
        .map_err(RpcError::internal)?;
    Ok(job_json(&info))
}

/// The updates of an agent job's log from `offset` (see
/// `structured_transcript`).
/// Each update is fitted to the client as a live one would be (the log
/// holds the stored form), and one it must not get is left out; offsets
/// count the log's updates either way.
fn structured_updates(
    job: &crate::tools::jobs::JobInfo,
    index: &crate::tools::lines::FileIndex,
    offset: u64,
    limit: u64,
    capabilities: &crate::acp::ClientCapabilities,
    unreadable: impl Fn(crate::tools::lines::LinesError) -> RpcError,
) -> Result<Value, RpcError> {
    let total = index.total_lines;
    let lines = crate::tools::lines::window(
        &job.log_path,
        index,
        offset + 1,
        limit,
        WINDOW_CAP as usize + 1,
    )
    .map_err(unreadable)?;
    if lines.first().is_some_and(|l| l.len() > WINDOW_CAP as usize) {
        return Err(RpcError::invalid_request(format!(
            "update {offset} of job {} is over {WINDOW_CAP} bytes",
            job.job_id
        ))
        .with_data(json!({"code": "too_large"})));
    }
    let mut updates = Vec::new();
    let mut used = 0usize;
    let mut read = 0u64;
    for line in &lines {
        if used + line.len() > WINDOW_CAP as usize {
            break;
        }
        used += line.len();
        read += 1;
        updates.extend(crate::acp::fit::transcript_update(line, capabilities));
    }
    let next = offset + read;
    let complete = next >= total && job.state != JobState::Running;
    Ok(to_json(UpdatesTranscriptResult {
        updates,
        offset,
        next_offset: (!complete).then_some(next),
        total,
        complete,
    }))
}

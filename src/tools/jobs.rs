//! Background jobs: commands a session owns that run beyond one step (dev
//! servers, watchers, long test runs). Each runs in its own process group,
//! tied to the agent (it dies with it), its stdin kept for `job/send`, its
//! output copied to a private log file up to a cap (then a marker; the
//! rest is read and dropped, so the job never blocks and memory stays
//! bounded). A watcher thread reports the end.

use super::error::ToolError;
use crate::cancel::{lock, CancelToken};
use std::ffi::OsString;
use std::fs::File;
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;

/// What starts a job.
pub(crate) struct JobSpec {
    pub command_line: String,
    pub cwd: PathBuf,
    pub env_remove: Vec<OsString>,
    pub env_set: Vec<(OsString, OsString)>,
    pub sandbox: Option<(PathBuf, crate::sandbox::Profile)>,
    /// The shell the line runs under.
    pub shell: crate::process::shell::Shell,
    /// The folder of the session's logs.
    pub log_dir: PathBuf,
    /// The most bytes of output kept in the log.
    pub log_cap: u64,
    /// The turn (epoch) that started it: a cancel of that turn kills it.
    pub epoch: u64,
    /// Under the `sandbox` policy: the executed files missing when it
    /// started; what it creates of them is moved aside when it ends.
    pub watch: Option<super::protected::Watch>,
}

/// A job as clients and the model see it (and as the store keeps it).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub(crate) struct JobInfo {
    pub job_id: String,
    pub command: String,
    pub cwd: PathBuf,
    pub state: JobState,
    pub exit_code: Option<i32>,
    pub started_at: String,
    pub ended_at: Option<String>,
    pub output_bytes: u64,
    pub pid: u32,
    pub epoch: u64,
    pub log_path: PathBuf,
    /// The editor's terminal the job runs in (then `pid` is 0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub terminal_id: Option<String>,
    #[serde(default)]
    pub kind: JobKind,
}

/// Where a job is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum JobState {
    Running,
    /// It ended by itself (with a code).
    Exited,
    /// It was ended: by a kill, a cancel, or the end of the agent that ran it.
    Killed,
    /// It could not go on: a state the contract (docs/extensions.md, "Background jobs") names,
    /// which Spindle does not set today.
    Failed,
}

impl JobState {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            JobState::Running => "running",
            JobState::Exited => "exited",
            JobState::Killed => "killed",
            JobState::Failed => "failed",
        }
    }
}

impl std::fmt::Display for JobState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What a job runs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum JobKind {
    /// A command (Spindle's, or in the editor's terminal).
    #[default]
    Command,
    /// A subagent: its log holds its updates, one JSON object a line.
    Agent,
}

impl JobKind {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            JobKind::Command => "command",
            JobKind::Agent => "agent",
        }
    }
}

impl JobInfo {
    /// A command job of `spec` that starts now.
    fn running(job_id: &str, spec: &JobSpec, pid: u32, log_path: PathBuf) -> JobInfo {
        JobInfo {
            job_id: job_id.to_string(),
            command: spec.command_line.clone(),
            cwd: spec.cwd.clone(),
            state: JobState::Running,
            exit_code: None,
            started_at: crate::clock::now_rfc3339(),
            ended_at: None,
            output_bytes: 0,
            pid,
            epoch: spec.epoch,
            log_path,
            terminal_id: None,
            kind: JobKind::Command,
        }
    }
}

/// A new job's id, and its private log (created).
fn new_log(spec: &JobSpec) -> Result<(String, PathBuf, std::fs::File), ToolError> {
    let job_id = format!("job_{}", crate::util::random_hex());
    let log_path = spec.log_dir.join(format!("{job_id}.log"));
    let log = crate::process::logs::create_file(&log_path).map_err(|e| {
        ToolError::io(format!(
            "cannot create the job's log {}: {e}",
            log_path.display()
        ))
    })?;
    Ok((job_id, log_path, log))
}

/// How a message reaches an agent job (`job/send`).
pub(crate) type Deliver = Arc<dyn Fn(&str) -> Result<(), String> + Send + Sync>;

struct Job {
    info: JobInfo,
    stdin: Option<crate::process::Input>,
    /// Every process of a job this process started, to end together.
    tree: Option<Arc<crate::process::Tree>>,
    /// Bytes of output seen (kept or not).
    seen: Arc<AtomicU64>,
    /// Bytes of output the log did not keep (past its cap).
    dropped: Arc<AtomicU64>,
    /// What `job_output` has shown the model so far.
    model_offset: u64,
    /// `dropped` when `job_output` last read, so the model is told what
    /// was lost since.
    model_dropped: u64,
    killed: bool,
    /// For a job in the editor's terminal or an agent job: raised to stop
    /// it (whoever drives it ends it).
    stop: Option<CancelToken>,
    deliver: Option<Deliver>,
    /// Under the `sandbox` policy: swept when it ends.
    watch: Option<super::protected::Watch>,
}

/// A job's log as it is written: up to a cap, then one marker, and the
/// rest counted but not kept.
pub(crate) struct LogSink {
    log: File,
    cap: u64,
    kept: u64,
    marked: bool,
    seen: Arc<AtomicU64>,
    dropped: Arc<AtomicU64>,
}

impl LogSink {
    fn new(log: File, cap: u64, counts: &Counts) -> LogSink {
        LogSink {
            log,
            cap,
            kept: 0,
            marked: false,
            seen: counts.seen.clone(),
            dropped: counts.dropped.clone(),
        }
    }

    /// Writes past the cap (an agent job's closing answer).
    pub(crate) fn write_always(&mut self, bytes: &[u8]) {
        self.seen.fetch_add(bytes.len() as u64, Ordering::SeqCst);
        let _ = self.log.write_all(bytes);
    }

    pub(crate) fn write(&mut self, bytes: &[u8]) {
        self.seen.fetch_add(bytes.len() as u64, Ordering::SeqCst);
        if self.kept < self.cap {
            let take = ((self.cap - self.kept) as usize).min(bytes.len());
            let _ = self.log.write_all(&bytes[..take]);
            self.kept += take as u64;
            self.dropped
                .fetch_add((bytes.len() - take) as u64, Ordering::SeqCst);
        } else {
            self.dropped.fetch_add(bytes.len() as u64, Ordering::SeqCst);
        }
        if self.kept >= self.cap && !self.marked && !bytes.is_empty() {
            self.marked = true;
            let cap = self.cap;
            let _ = self.log.write_all(
                format!("\n[… the log keeps the first {cap} bytes; later output is not kept …]\n")
                    .as_bytes(),
            );
        }
    }
}

/// A job's counters of output, shared by its record and its log.
#[derive(Default)]
struct Counts {
    seen: Arc<AtomicU64>,
    dropped: Arc<AtomicU64>,
}

/// What `job_output` reads for the model.
pub(crate) struct ModelRead {
    pub text: String,
    /// Bytes of the log passed over to keep within the read's limit.
    pub skipped: u64,
    /// Bytes of output since the last read that the log did not keep
    /// (it was full).
    pub not_kept: u64,
    pub info: JobInfo,
}

/// A job that runs elsewhere (the editor's terminal): its driver feeds
/// its output, watches `stop`, and reports its end.
pub(crate) struct External {
    pub job_id: String,
    pub sink: Arc<Mutex<LogSink>>,
    pub stop: CancelToken,
    jobs: Arc<Jobs>,
}

impl External {
    /// The job ended: with an exit code, or `None` (killed, or lost).
    pub(crate) fn finish(self, code: Option<i32>) {
        self.jobs.ended(&self.job_id, code);
    }
}

/// Called when a job starts (`false`) or ends (`true`), with its id.
pub(crate) type OnEnd = Arc<dyn Fn(&str, bool) + Send + Sync>;

/// A session's jobs.
#[derive(Default)]
pub(crate) struct Jobs {
    jobs: Mutex<Vec<Job>>,
    on_end: Mutex<Option<OnEnd>>,
}

impl Job {
    fn stop_it(&mut self) {
        self.killed = true;
        match (&self.stop, &self.tree) {
            (Some(stop), _) => stop.cancel(),
            (None, Some(tree)) => tree.kill(),
            (None, None) => {}
        }
    }
}

impl Jobs {
    /// Registers a job that runs in the editor's terminal `terminal_id`;
    /// the caller drives it through the returned handle.
    pub(crate) fn start_external(
        self: &Arc<Self>,
        spec: &JobSpec,
        terminal_id: &str,
    ) -> Result<(JobInfo, External), ToolError> {
        self.register_external(spec, Some(terminal_id), JobKind::Command, None)
    }

    /// Registers a subagent running as a job; `deliver` gives it a
    /// message (`job/send`).
    pub(crate) fn start_agent(
        self: &Arc<Self>,
        spec: &JobSpec,
        deliver: Deliver,
    ) -> Result<(JobInfo, External), ToolError> {
        self.register_external(spec, None, JobKind::Agent, Some(deliver))
    }

    fn register_external(
        self: &Arc<Self>,
        spec: &JobSpec,
        terminal_id: Option<&str>,
        kind: JobKind,
        deliver: Option<Deliver>,
    ) -> Result<(JobInfo, External), ToolError> {
        let (job_id, log_path, log) = new_log(spec)?;
        let counts = Counts::default();
        let stop = CancelToken::new();
        let info = JobInfo {
            terminal_id: terminal_id.map(str::to_string),
            kind,
            ..JobInfo::running(&job_id, spec, 0, log_path)
        };
        lock(&self.jobs).push(Job {
            info: info.clone(),
            stdin: None,
            tree: None,
            seen: counts.seen.clone(),
            dropped: counts.dropped.clone(),
            model_offset: 0,
            model_dropped: 0,
            killed: false,
            stop: Some(stop.clone()),
            deliver,
            watch: spec.watch.clone(),
        });
        let on_change = lock(&self.on_end).clone();
        if let Some(on_change) = on_change {
            on_change(&job_id, false);
        }
        let external = External {
            job_id,
            sink: Arc::new(Mutex::new(LogSink::new(log, spec.log_cap, &counts))),
            stop,
            jobs: Arc::clone(self),
        };
        Ok((info, external))
    }

    pub(crate) fn set_on_end(&self, on_end: OnEnd) {
        *lock(&self.on_end) = Some(on_end);
    }

    /// Starts a job; returns it as it is once started.
    pub(crate) fn start(self: &Arc<Self>, spec: JobSpec) -> Result<JobInfo, ToolError> {
        let (job_id, log_path, log) = new_log(&spec)?;
        let mut command = match &spec.sandbox {
            Some(sandbox) => {
                let (program, args) =
                    crate::sandbox::shell_argv(&spec.command_line, Some(sandbox), &spec.shell);
                crate::process::guard::command(&program, &args)
            }
            None => spec.shell.command(&spec.command_line),
        };
        for name in &spec.env_remove {
            command.env_remove(name);
        }
        let (reader, writer) = io::pipe().map_err(|e| ToolError::io(e.to_string()))?;
        let writer_err = writer
            .try_clone()
            .map_err(|e| ToolError::io(e.to_string()))?;
        command
            .envs(spec.env_set.iter().map(|(k, v)| (k, v)))
            .current_dir(&spec.cwd)
            .stdin(Stdio::piped())
            .stdout(writer)
            .stderr(writer_err);
        crate::process::Tree::prepare(&mut command);
        let guarded = crate::process::guard::wraps(&command);
        let mut child = crate::process::spawn_tied_to_agent(command)
            .map_err(|e| ToolError::io(format!("cannot start the job: {e}")))?;
        let tree = match crate::process::Tree::of(&child, guarded) {
            Ok(tree) => Arc::new(tree),
            Err(error) => {
                let _ = child.wait();
                return Err(ToolError::io(format!("cannot start the job: {error}")));
            }
        };
        let pid = child.id();
        // Writes to a job that does not read must never block the agent.
        let stdin = child.stdin.take().map(crate::process::Input::new);
        let counts = Counts::default();
        let info = JobInfo::running(&job_id, &spec, pid, log_path.clone());
        lock(&self.jobs).push(Job {
            info: info.clone(),
            stdin,
            tree: Some(tree.clone()),
            seen: counts.seen.clone(),
            dropped: counts.dropped.clone(),
            model_offset: 0,
            model_dropped: 0,
            killed: false,
            stop: None,
            deliver: None,
            watch: spec.watch.clone(),
        });
        let sink = LogSink::new(log, spec.log_cap, &counts);
        let copier = thread::Builder::new()
            .name("spindle-job-output".into())
            .spawn(move || copy_output(reader, sink));
        let jobs = Arc::clone(self);
        let id = job_id.clone();
        // Detached: it lives as long as the job's process and records its
        // end itself.
        let watcher = thread::Builder::new()
            .name("spindle-job-wait".into())
            .spawn(move || {
                let status = child.wait();
                if let Ok(copier) = copier {
                    let _ = copier.join();
                }
                jobs.ended(&id, status.ok().and_then(|s| s.code()));
            });
        if watcher.is_err() {
            tree.kill();
            return Err(ToolError::io("cannot watch the job"));
        }
        let on_change = lock(&self.on_end).clone();
        if let Some(on_change) = on_change {
            on_change(&job_id, false);
        }
        Ok(info)
    }

    /// Takes over a foreground command that outlived its timeout: it goes
    /// on as a job, its log starting with the output so far.
    pub(crate) fn adopt_running(
        self: &Arc<Self>,
        spec: &JobSpec,
        so_far: &str,
        detached: crate::process::Detached,
    ) -> Result<JobInfo, ToolError> {
        let (job_id, log_path, log) = new_log(spec)?;
        let counts = Counts::default();
        let mut sink = LogSink::new(log, spec.log_cap, &counts);
        sink.write(so_far.as_bytes());
        let info = JobInfo {
            output_bytes: so_far.len() as u64,
            ..JobInfo::running(&job_id, spec, detached.pid, log_path)
        };
        let tree = detached.tree.clone();
        lock(&self.jobs).push(Job {
            info: info.clone(),
            stdin: None,
            tree: Some(tree.clone()),
            seen: counts.seen.clone(),
            dropped: counts.dropped.clone(),
            model_offset: 0,
            model_dropped: 0,
            killed: false,
            stop: None,
            deliver: None,
            watch: spec.watch.clone(),
        });
        let jobs = Arc::clone(self);
        let id = job_id.clone();
        // Detached: it lives as long as the adopted process and records its
        // end itself.
        let spawned = thread::Builder::new()
            .name("spindle-job-adopted".into())
            .spawn(move || {
                for chunk in detached.chunks.iter() {
                    sink.write(&chunk);
                }
                let code = detached
                    .statuses
                    .recv()
                    .ok()
                    .and_then(|s| s.ok())
                    .and_then(|s| s.code());
                jobs.ended(&id, code);
            });
        if spawned.is_err() {
            tree.kill();
            return Err(ToolError::io("cannot watch the job"));
        }
        let on_change = lock(&self.on_end).clone();
        if let Some(on_change) = on_change {
            on_change(&job_id, false);
        }
        Ok(info)
    }

    /// Takes back the records of an earlier process's jobs: ended (their
    /// processes died with it), their logs still readable.
    pub(crate) fn adopt(&self, records: Vec<JobInfo>) {
        let mut jobs = lock(&self.jobs);
        for mut info in records {
            if jobs.iter().any(|j| j.info.job_id == info.job_id) {
                continue;
            }
            if info.state == JobState::Running {
                info.state = JobState::Killed;
                info.ended_at.get_or_insert_with(crate::clock::now_rfc3339);
            }
            let seen = Arc::new(AtomicU64::new(info.output_bytes));
            jobs.push(Job {
                info,
                stdin: None,
                tree: None,
                seen,
                dropped: Arc::default(),
                model_offset: 0,
                model_dropped: 0,
                killed: true,
                stop: None,
                deliver: None,
                watch: None,
            });
        }
    }

    fn ended(&self, id: &str, code: Option<i32>) {
        let swept = {
            let mut jobs = lock(&self.jobs);
            let Some(job) = jobs.iter_mut().find(|j| j.info.job_id == id) else {
                return;
            };
            job.info.exit_code = code;
            job.info.state = if job.killed || code.is_none() {
                JobState::Killed
            } else {
                JobState::Exited
            };
            job.info.ended_at = Some(crate::clock::now_rfc3339());
            job.info.output_bytes = job.seen.load(Ordering::SeqCst);
            job.stdin = None;
            job.watch
                .take()
                .map(|watch| (watch, job.info.log_path.clone()))
        };
        if let Some((watch, log)) = swept {
            sweep_into_log(&watch, &log);
        }
        let on_end = lock(&self.on_end).clone();
        if let Some(on_end) = on_end {
            on_end(id, true);
        }
    }

    pub(crate) fn list(&self) -> Vec<JobInfo> {
        lock(&self.jobs)
            .iter()
            .map(|job| {
                let mut info = job.info.clone();
                info.output_bytes = job.seen.load(Ordering::SeqCst);
                info
            })
            .collect()
    }

    pub(crate) fn get(&self, id: &str) -> Option<JobInfo> {
        self.list().into_iter().find(|j| j.job_id == id)
    }

    /// New output for the model since its last read, at most `limit`
    /// bytes (from `offset` when given), with what was skipped and what
    /// the log did not keep.
    pub(crate) fn read_for_model(
        &self,
        id: &str,
        offset: Option<u64>,
        limit: usize,
    ) -> Result<ModelRead, ToolError> {
        let (path, from, info) = {
            let jobs = lock(&self.jobs);
            let job = jobs
                .iter()
                .find(|j| j.info.job_id == id)
                .ok_or_else(|| ToolError::not_found(format!("there is no job {id:?}")))?;
            (
                job.info.log_path.clone(),
                offset.unwrap_or(job.model_offset),
                job.info.clone(),
            )
        };
        let size = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
        // Only the last `limit` bytes of what is new: the rest is skipped.
        let start = from.max(size.saturating_sub(limit as u64));
        let skipped = start.saturating_sub(from);
        let (text, end) = read_window(&path, start, limit)?;
        let mut not_kept = 0;
        if let Some(job) = lock(&self.jobs).iter_mut().find(|j| j.info.job_id == id) {
            job.model_offset = end;
            let dropped = job.dropped.load(Ordering::SeqCst);
            not_kept = dropped.saturating_sub(job.model_dropped);
            job.model_dropped = dropped;
        }
        Ok(ModelRead {
            text,
            skipped,
            not_kept,
            info,
        })
    }

    /// Writes to the job's stdin.
    pub(crate) fn send(&self, id: &str, text: &str) -> Result<(), ToolError> {
        let mut jobs = lock(&self.jobs);
        let job = jobs
            .iter_mut()
            .find(|j| j.info.job_id == id)
            .ok_or_else(|| ToolError::not_found(format!("there is no job {id:?}")))?;
        if job.info.state != JobState::Running {
            return Err(ToolError::invalid(format!(
                "job {id} has {}; it takes no input",
                job.info.state
            )));
        }
        if job.info.terminal_id.is_some() {
            return Err(ToolError::invalid(format!(
                "job {id} runs in the editor's terminal; type its input there"
            )));
        }
        if let Some(deliver) = job.deliver.clone() {
            drop(jobs);
            return deliver(text).map_err(ToolError::io);
        }
        let stdin = job
            .stdin
            .as_mut()
            .ok_or_else(|| ToolError::invalid(format!("job {id} has no input")))?;
        match stdin.write_all(text.as_bytes()) {
            Ok(()) => Ok(()),
            Err(error) if error.kind() == io::ErrorKind::WouldBlock => Err(ToolError::io(format!(
                "job {id} is not reading its input (its input pipe is full); part of the text may have been written"
            ))),
            Err(error) => Err(ToolError::io(format!("cannot write to job {id}: {error}"))),
        }
    }

    /// Kills a job's whole process group.
    pub(crate) fn kill(&self, id: &str) -> Result<JobInfo, ToolError> {
        let mut jobs = lock(&self.jobs);
        let job = jobs
            .iter_mut()
            .find(|j| j.info.job_id == id)
            .ok_or_else(|| ToolError::not_found(format!("there is no job {id:?}")))?;
        if job.info.state == JobState::Running {
            job.stop_it();
        }
        Ok(job.info.clone())
    }

    /// Kills every running job (or those of one turn).
    pub(crate) fn kill_all(&self, epoch: Option<u64>) {
        for job in lock(&self.jobs).iter_mut() {
            if job.info.state == JobState::Running && epoch.is_none_or(|e| e == job.info.epoch) {
                job.stop_it();
            }
        }
    }
}

/// Copies the job's output into its log (capped; the rest is drained).
fn copy_output(mut reader: io::PipeReader, mut sink: LogSink) {
    let mut buffer = vec![0u8; 64 * 1024];
    loop {
        match reader.read(&mut buffer) {
            Ok(0) | Err(_) => break,
            Ok(n) => sink.write(&buffer[..n]),
        }
    }
}

/// `limit` bytes of a file from `offset`, as text (cut back to a
/// character boundary); returns the text and the offset after it.
pub(crate) fn read_window(
    path: &Path,
    offset: u64,
    limit: usize,
) -> Result<(String, u64), ToolError> {
    use std::io::{Seek, SeekFrom};
    let mut file = File::open(path)
        .map_err(|e| ToolError::io(format!("cannot read {}: {e}", path.display())))?;
    file.seek(SeekFrom::Start(offset))
        .map_err(|e| ToolError::io(format!("cannot read {}: {e}", path.display())))?;
    let mut bytes = Vec::with_capacity(limit.min(1 << 20));
    file.take(limit as u64)
        .read_to_end(&mut bytes)
        .map_err(|e| ToolError::io(format!("cannot read {}: {e}", path.display())))?;
    let valid = match std::str::from_utf8(&bytes) {
        Ok(_) => bytes.len(),
        // A character cut at the end waits for the next window, unless
        // the window holds nothing else (then it goes out as is, so a
        // reader always advances).
        Err(error) if error.error_len().is_none() && error.valid_up_to() > 0 => error.valid_up_to(),
        Err(_) => bytes.len(),
    };
    let text = String::from_utf8_lossy(&bytes[..valid]).into_owned();
    Ok((text, offset + valid as u64))
}

/// Moves aside what a sandboxed job created of the files Spindle runs
/// (see `protected::Watch`), and says so at the end of its log, which is
/// what the model reads of it.
fn sweep_into_log(watch: &super::protected::Watch, log: &Path) {
    let Some(note) = watch.sweep() else {
        return;
    };
    log::warn!("{note}");
    let appended = std::fs::OpenOptions::new()
        .append(true)
        .open(log)
        .and_then(|mut file| io::Write::write_all(&mut file, format!("\n{note}\n").as_bytes()));
    if let Err(error) = appended {
        log::warn!("cannot note it in {}: {error}", log.display());
    }
}

//! Background jobs from the model's side: starting one, its first
//! output, and reading or stopping it later.

use super::runner::{completed_text, failed, text_content, Ending, Runner};
use std::path::Path;
use std::time::Duration;

/// The most bytes of a job's output one `job_output` returns.
const JOB_READ: usize = 16 * 1024;

impl Runner<'_> {
    /// Starts a background job and answers at once with its id and first
    /// output.
    pub(super) fn start_job(
        &self,
        command_line: &str,
        cwd: &Path,
        launch: super::processes::Launch,
    ) -> Ending {
        let Some(log_dir) = self.processes.session_dir.clone() else {
            return failed(
                "Error: background jobs need the session's folder, which is not available",
            );
        };
        let spec = crate::tools::jobs::JobSpec {
            command_line: command_line.to_string(),
            cwd: cwd.to_path_buf(),
            env_remove: launch.env_remove,
            env_set: launch.env_set,
            sandbox: launch.sandbox,
            shell: launch.shell,
            log_dir,
            log_cap: self.processes.log_cap,
            epoch: self.epoch,
            watch: launch.watch,
        };
        match self.jobs.start(spec) {
            Ok(info) => {
                let Some(first) = self.first_output(&info.job_id, Duration::from_millis(300))
                else {
                    return Ending::Cancelled;
                };
                let text = format!(
                    "Started job {} (pid {}): `{}`. Read its output with job_output, stop it with job_stop.\nFirst output:\n{first}",
                    info.job_id, info.pid, info.command,
                );
                Ending::Completed {
                    content: vec![text_content(&text)],
                    text,
                }
            }
            Err(error) => failed(format!("Error: {error}")),
        }
    }

    /// What a job just started printed within `wait` (a server's address),
    /// for the model; `None` when the turn was cancelled meanwhile.
    pub(in crate::agent) fn first_output(&self, job_id: &str, wait: Duration) -> Option<String> {
        if self.cancel.sleep(wait) {
            return None;
        }
        let first = self
            .jobs
            .read_for_model(job_id, None, 2_048)
            .map(|read| read.text)
            .unwrap_or_else(|error| {
                log::warn!("job {job_id}: its first output could not be read: {error}");
                String::new()
            });
        Some(if first.is_empty() {
            "(none yet)".into()
        } else {
            first
        })
    }

    /// `job_output`: what the job printed since `offset` (a subagent's
    /// updates as readable text), what was skipped or not kept, and its
    /// state.
    pub(super) fn job_output(&self, args: &crate::tools::JobOutputArgs) -> Ending {
        match self
            .jobs
            .read_for_model(&args.job_id, args.offset, JOB_READ)
        {
            Ok(read) => {
                let info = read.info;
                // A subagent's updates, as readable text.
                let text = if info.kind == crate::tools::jobs::JobKind::Agent {
                    super::agent_log::render_updates(&read.text)
                } else {
                    read.text
                };
                let mut out = String::new();
                if read.skipped > 0 {
                    out.push_str(&format!("[{} bytes skipped]\n", read.skipped));
                }
                if !text.is_empty() {
                    out.push_str(&text);
                } else if read.not_kept == 0 {
                    out.push_str("(no new output)");
                }
                if read.not_kept > 0 {
                    // The log is full: what came since was counted,
                    // not kept.
                    out.push_str(&format!(
                        "{}[{} bytes of new output were not kept: the job's log is full]",
                        if text.is_empty() { "" } else { "\n" },
                        read.not_kept
                    ));
                }
                out.push_str(&format!(
                    "\n[job {}: {}{}]",
                    info.job_id,
                    info.state,
                    info.exit_code
                        .map(|c| format!(", exit code {c}"))
                        .unwrap_or_default()
                ));
                completed_text(out)
            }
            Err(error) => failed(format!("Error: {error}")),
        }
    }
}

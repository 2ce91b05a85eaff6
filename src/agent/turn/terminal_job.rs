//! A background job in the editor's terminal: a dev server the user can
//! watch in their editor. `terminal/create` starts it and nothing waits
//! for its exit; a driver thread polls `terminal/output` (which carries
//! the exit status once there is one), appends what is new to the job's
//! log, so the model and clients read it like any job's, and at the end
//! (exit, `job_stop`, cancel of its step, close) kills and releases the
//! terminal.

use super::client::{Client, ClientError};
use super::processes::Launch;
use super::runner::{failed, text_content, Ending, Runner};
use crate::tools::jobs::External;
use serde_json::{json, Value};
use std::path::Path;
use std::time::Duration;

/// How often the driver reads the terminal's output.
const POLL: Duration = Duration::from_millis(500);
/// How long one request to the editor may take before the job counts as
/// lost.
const ANSWER_WITHIN: Duration = Duration::from_secs(10);
/// The output the editor keeps for the terminal (the driver reads new
/// output well within it).
const TERMINAL_WINDOW: u64 = 256 * 1024;
/// How much of the next output is looked for in the previous, to find
/// where new output starts once the editor drops old output.
const PROBE: usize = 64;

impl Runner<'_> {
    pub(in crate::agent) fn start_terminal_job(
        &self,
        command_line: &str,
        cwd: &Path,
        launch: &Launch,
    ) -> Ending {
        let Some(log_dir) = self.processes.session_dir.clone() else {
            return failed(
                "Error: background jobs need the session's folder, which is not available",
            );
        };
        let mut params = super::shell::terminal_request(command_line, launch);
        params.insert("sessionId".into(), json!(self.session_id));
        params.insert("cwd".into(), json!(cwd));
        params.insert("outputByteLimit".into(), json!(TERMINAL_WINDOW));
        let created = self
            .client
            .request("terminal/create", serde_json::Value::Object(params));
        let terminal_id = match created {
            Ok(answer) => match answer["terminalId"].as_str() {
                Some(id) => id.to_string(),
                None => return failed("Error: the editor did not return a terminal id"),
            },
            Err(ClientError::Cancelled) => return Ending::Cancelled,
            Err(error) => {
                return failed(format!(
                    "Error: the editor could not start a terminal: {error}"
                ))
            }
        };
        let spec = crate::tools::jobs::JobSpec {
            command_line: command_line.to_string(),
            cwd: cwd.to_path_buf(),
            env_remove: Vec::new(),
            env_set: Vec::new(),
            sandbox: None,
            shell: self.processes.shell.clone(),
            log_dir,
            log_cap: self.processes.log_cap,
            epoch: self.epoch,
            watch: launch.watch.clone(),
        };
        let params = json!({"sessionId": self.session_id, "terminalId": terminal_id});
        let (info, external) = match self.jobs.start_external(&spec, &terminal_id) {
            Ok(started) => started,
            Err(error) => {
                let _ = self.client.request_cleanup("terminal/kill", params.clone());
                let _ = self.client.request_cleanup("terminal/release", params);
                return failed(format!("Error: {error}"));
            }
        };
        let client = self.client.clone();
        let driver = std::thread::Builder::new()
            .name("spindle-terminal-job".into())
            .spawn(move || drive(&client, &params, external));
        if driver.is_err() {
            let _ = self.jobs.kill(&info.job_id);
            return failed("Error: cannot watch the job");
        }
        let Some(first) = self.first_output(&info.job_id, Duration::from_millis(400)) else {
            return Ending::Cancelled;
        };
        let text = format!(
            "Started job {} in the editor's terminal: `{}`. Read its output with job_output, stop it with job_stop.\nFirst output:\n{first}",
            info.job_id, info.command,
        );
        Ending::Completed {
            content: vec![
                json!({"type": "terminal", "terminalId": terminal_id}),
                text_content(&text),
            ],
            text,
        }
    }
}

/// Polls the terminal until it exits or the job is stopped; then kills
/// (when stopped) and releases it, and reports the end.
fn drive(client: &Client, params: &Value, mut job: External) {
    let mut seen = Seen::default();
    let code = loop {
        if job.stop.sleep(POLL) {
            let _ = client.request_lasting("terminal/kill", params.clone(), ANSWER_WITHIN);
            if let Ok(answer) =
                client.request_lasting("terminal/output", params.clone(), ANSWER_WITHIN)
            {
                seen.take(&answer, &mut job);
            }
            break None;
        }
        match client.request_lasting("terminal/output", params.clone(), ANSWER_WITHIN) {
            Ok(answer) => {
                seen.take(&answer, &mut job);
                if let Some(status) = answer.get("exitStatus").filter(|s| s.is_object()) {
                    break status["exitCode"]
                        .as_i64()
                        .and_then(|c| i32::try_from(c).ok());
                }
            }
            // The editor released it, answers no more, or is gone.
            Err(error) => {
                log::debug!("a job's terminal is lost: {error}");
                break None;
            }
        }
    };
    let _ = client.request_lasting("terminal/release", params.clone(), ANSWER_WITHIN);
    job.finish(code);
}

/// The terminal's output as last read, to tell what is new.
#[derive(Default)]
struct Seen {
    last: String,
}

impl Seen {
    fn take(&mut self, answer: &Value, job: &mut External) {
        let now = answer["output"].as_str().unwrap_or_default();
        let new = new_part(&self.last, now);
        let mut sink = crate::cancel::lock(&job.sink);
        if let Some(dropped) = new.dropped {
            sink.write(dropped.as_bytes());
        }
        sink.write(new.text.as_bytes());
        self.last = now.to_string();
    }
}

struct New<'a> {
    /// A marker when output went unseen (the editor dropped it first).
    dropped: Option<&'static str>,
    text: &'a str,
}

/// What `now` adds to `last`: the editor keeps a window of the newest
/// output, so `now` may have lost its start since `last`.
fn new_part<'a>(last: &str, now: &'a str) -> New<'a> {
    if let Some(rest) = now.strip_prefix(last) {
        return New {
            dropped: None,
            text: rest,
        };
    }
    // `now` is then a suffix of `last` followed by what is new: the
    // longest such suffix, found where `now`'s first bytes occur in
    // `last` (then, for a short overlap, by trying each short suffix).
    let (old, next) = (last.as_bytes(), now.as_bytes());
    let probe = &next[..next.len().min(PROBE)];
    let long = (!probe.is_empty())
        .then(|| {
            (0..old.len().saturating_sub(probe.len() - 1))
                .filter(|&at| old[at..].starts_with(probe))
                .find(|&at| next.starts_with(&old[at..]))
        })
        .flatten();
    let short = || {
        (1..probe.len().min(old.len() + 1))
            .rev()
            .find(|&k| next.starts_with(&old[old.len() - k..]))
            .map(|k| old.len() - k)
    };
    if let Some(text) = long.or_else(short).and_then(|at| now.get(old.len() - at..)) {
        return New {
            dropped: None,
            text,
        };
    }
    New {
        dropped: Some(
            "\n[… some output was dropped by the editor's terminal before it was read …]\n",
        ),
        text: now,
    }
}

#[cfg(test)]
mod tests {
    use super::new_part;

    #[test]
    fn new_output_is_found_after_the_editor_drops_old_output() {
        let grown = new_part("abc", "abcdef");
        assert_eq!((grown.dropped, grown.text), (None, "def"));
        // The window slid: the old tail is found, what follows is new.
        let slid = new_part("0123456789", "6789XYZ");
        assert_eq!((slid.dropped, slid.text), (None, "XYZ"));
        // Nothing in common: all of it is new, with a marker.
        let lost = new_part("aaaa", "zzzz");
        assert!(lost.dropped.is_some());
        assert_eq!(lost.text, "zzzz");
        // A long overlap, found by its first bytes.
        let last: String = (0..2000).map(|i| format!("line {i}\n")).collect();
        let now = format!("{}NEW\n", &last[5000..]);
        let long = new_part(&last, &now);
        assert_eq!((long.dropped, long.text), (None, "NEW\n"));
        let first = new_part("", "hello");
        assert_eq!((first.dropped, first.text), (None, "hello"));
    }
}

//! Running `run_command`: locally in its own process group, or in the
//! editor's terminal when the client offers one; in both cases without the
//! provider credentials, and inside the sandbox when the policy says so.

use super::client::ClientError;
use super::processes::Launch;
use super::runner::{failed, text_content, Ending, Runner};
use crate::acp::{SessionUpdate, ToolCallUpdate};
use crate::cancel::CancelToken;
use crate::process::shell::ShellKind;
use crate::process::{self, logs};
use crate::provider::ToolCallRequest;
use crate::util::fence;
use serde_json::json;
use std::ffi::OsString;
use std::path::Path;
use std::time::{Duration, Instant};

impl Runner<'_> {
    pub(in crate::agent) fn run_locally(
        &self,
        call: &ToolCallRequest,
        command_line: &str,
        cwd: &Path,
        timeout: Duration,
        launch: Launch,
    ) -> Ending {
        let mut spec =
            process::CommandSpec::new(command_line, cwd, timeout, self.processes.output_cap);
        spec.log_path = self
            .processes
            .session_dir
            .as_ref()
            .map(|dir| dir.join(format!("{}.log", logs::safe_name(&call.id))));
        spec.log_cap = self.processes.log_cap;
        spec.env_remove = launch.env_remove;
        spec.env_set = launch.env_set;
        spec.program = launch
            .sandbox
            .as_ref()
            .map(|sandbox| crate::sandbox::shell_argv(command_line, Some(sandbox), &launch.shell));
        spec.shell = launch.shell.clone();
        // A slow build is never lost to its timeout: it goes on as a job.
        spec.detach_on_timeout = self.processes.session_dir.is_some();
        // The editor sees the tail of the output as it arrives.
        let mut shown = String::new();
        let mut on_output = |text: &str| {
            shown.push_str(text);
            if shown.len() > 8 * 1024 {
                let mut cut = shown.len() - 8 * 1024;
                while !shown.is_char_boundary(cut) {
                    cut += 1;
                }
                shown.drain(..cut);
            }
            self.update(SessionUpdate::ToolCallUpdate(ToolCallUpdate {
                tool_call_id: call.id.clone(),
                status: None,
                content: Some(vec![text_content(&fence(&shown))]),
            }));
        };
        let started = Instant::now();
        let result = match process::run(&spec, self.cancel.signal(), &mut on_output) {
            Ok(result) => result,
            Err(error) => return failed(format!("Error: cannot run the command: {error}")),
        };
        if result.cancelled {
            return Ending::Cancelled;
        }
        if let (Some(detached), Some(log_dir)) = (result.detached, &self.processes.session_dir) {
            let spec = crate::tools::jobs::JobSpec {
                command_line: command_line.to_string(),
                cwd: cwd.to_path_buf(),
                env_remove: Vec::new(),
                env_set: Vec::new(),
                sandbox: None,
                shell: self.processes.shell.clone(),
                log_dir: log_dir.clone(),
                log_cap: self.processes.log_cap,
                epoch: self.epoch,
                watch: launch.watch.clone(),
            };
            let adopted = self.jobs.adopt_running(&spec, &result.output, detached);
            return match adopted {
                Ok(job) => {
                    let text = format!(
                        "Still running after {} s, so it goes on in the background as job {} (pid {}); wait for it with job_output, or stop it with job_stop. Its output so far:\n{}",
                        timeout.as_secs(),
                        job.job_id,
                        job.pid,
                        if result.output.is_empty() { "(none)" } else { &result.output }
                    );
                    Ending::Completed {
                        content: vec![text_content(&text)],
                        text,
                    }
                }
                Err(error) => failed(format!("Error: {error}")),
            };
        }
        let status = if result.timed_out {
            format!(
                "Timed out after {} s; the command was killed.",
                timeout.as_secs()
            )
        } else if let Some(code) = result.exit_code {
            format!("Exit code: {code}")
        } else {
            format!("Killed by signal {}", result.signal.unwrap_or(0))
        };
        let text = format!(
            "{status} ({:.1} s)\n{}",
            started.elapsed().as_secs_f64(),
            if result.output.is_empty() {
                "(no output)".to_string()
            } else {
                result.output.clone()
            }
        );
        let content = vec![text_content(&format!(
            "{status}\n{}",
            fence(&result.output)
        ))];
        if result.exit_code == Some(0) && !result.timed_out {
            Ending::Completed { text, content }
        } else {
            Ending::Failed { text, content }
        }
    }

    /// Runs the command in the editor's terminal: creates it, shows it on
    /// the call, waits for the exit, then reads the output and releases it.
    pub(in crate::agent) fn run_in_terminal(
        &self,
        call: &ToolCallRequest,
        command_line: &str,
        cwd: &Path,
        timeout: Duration,
        launch: &Launch,
    ) -> Ending {
        let terminal_id = match self.create_terminal(command_line, cwd, launch) {
            Ok(id) => id,
            Err(ending) => return ending,
        };
        self.update(SessionUpdate::ToolCallUpdate(ToolCallUpdate {
            tool_call_id: call.id.clone(),
            status: None,
            content: Some(vec![json!({"type": "terminal", "terminalId": terminal_id})]),
        }));
        let id_params = json!({"sessionId": self.session_id, "terminalId": terminal_id});
        let (exit, killed) = match self.wait_for_exit(&id_params, timeout) {
            Ok(exit) => (Some(exit), false),
            Err(ClientError::Cancelled) => {
                let _ = self
                    .client
                    .request_cleanup("terminal/kill", id_params.clone());
                (None, true)
            }
            Err(error) => {
                let _ = self.client.request_cleanup("terminal/release", id_params);
                return failed(format!("Error: the terminal failed: {error}"));
            }
        };
        let output = self
            .client
            .request_cleanup("terminal/output", id_params.clone());
        let _ = self.client.request_cleanup("terminal/release", id_params);
        if self.cancel.is_cancelled() {
            return Ending::Cancelled;
        }
        terminal_ending(
            &terminal_id,
            exit.as_ref(),
            killed,
            output.as_ref().ok(),
            timeout,
        )
    }

    /// Asks the editor for a terminal running the command; its id, or how
    /// the call ends when there is none.
    fn create_terminal(
        &self,
        command_line: &str,
        cwd: &Path,
        launch: &Launch,
    ) -> Result<String, Ending> {
        let mut params = terminal_request(command_line, launch);
        params.insert("sessionId".into(), json!(self.session_id));
        params.insert("cwd".into(), json!(cwd));
        params.insert("outputByteLimit".into(), json!(self.processes.output_cap));
        let created = self
            .client
            .request("terminal/create", serde_json::Value::Object(params));
        match created {
            Ok(answer) => match answer["terminalId"].as_str() {
                Some(id) => Ok(id.to_string()),
                None => Err(failed("Error: the editor did not return a terminal id")),
            },
            Err(ClientError::Cancelled) => Err(Ending::Cancelled),
            Err(error) => Err(failed(format!(
                "Error: the editor could not start a terminal: {error}"
            ))),
        }
    }

    /// Waits for the terminal's exit; the wait ends at the exit, the
    /// timeout or the turn's cancel (both `Cancelled`).
    fn wait_for_exit(
        &self,
        id_params: &serde_json::Value,
        timeout: Duration,
    ) -> Result<serde_json::Value, ClientError> {
        let wait_cancel = CancelToken::new();
        {
            let wait_cancel = wait_cancel.clone();
            self.cancel.on_cancel(move || wait_cancel.cancel());
        }
        let timer = {
            let wait_cancel = wait_cancel.clone();
            std::thread::Builder::new()
                .name("spindle-terminal-timer".into())
                .spawn(move || {
                    if !wait_cancel.sleep(timeout) {
                        wait_cancel.cancel();
                    }
                })
        };
        let waited =
            self.client
                .request_with("terminal/wait_for_exit", id_params.clone(), &wait_cancel);
        wait_cancel.cancel();
        if let Ok(timer) = timer {
            let _ = timer.join();
        }
        waited
    }
}

/// How a command in the editor's terminal ended: its status, its output
/// as text, and the terminal block so the editor keeps showing it.
fn terminal_ending(
    terminal_id: &str,
    exit: Option<&serde_json::Value>,
    killed: bool,
    output: Option<&serde_json::Value>,
    timeout: Duration,
) -> Ending {
    let (text, truncated) = match output {
        Some(answer) => (
            answer["output"].as_str().unwrap_or("").to_string(),
            answer["truncated"].as_bool().unwrap_or(false),
        ),
        None => (String::new(), false),
    };
    let exit_code = exit.and_then(|e| e["exitCode"].as_i64());
    let status = if killed {
        format!(
            "Timed out after {} s; the command was killed.",
            timeout.as_secs()
        )
    } else if let Some(code) = exit_code {
        format!("Exit code: {code}")
    } else {
        format!(
            "Killed by signal {}",
            exit.and_then(|e| e["signal"].as_str()).unwrap_or("?")
        )
    };
    let note = if truncated {
        "[The beginning of the output was dropped by the editor's output limit.]\n"
    } else {
        ""
    };
    let body = format!(
        "{status}\n{note}{}",
        if text.is_empty() {
            "(no output)"
        } else {
            &text
        }
    );
    // The terminal block stays, so the editor keeps showing the output;
    // the output is kept as text too, for a replay (the terminal is gone
    // by then) and `spindle sessions show`.
    let content = vec![
        json!({"type": "terminal", "terminalId": terminal_id}),
        text_content(&format!("{status}\n{note}{}", fence(&text))),
    ];
    if exit_code == Some(0) && !killed {
        Ending::Completed {
            text: body,
            content,
        }
    } else {
        Ending::Failed {
            text: body,
            content,
        }
    }
}

/// The `command`, `args` (and `env`) of a `terminal/create` request for
/// a command in the editor's terminal. The editor's environment is not
/// ours to clean, so under a POSIX shell the command is started through
/// `env -u NAME …`, which removes the credentials (and sets the
/// confinement's variables) in the terminal's process. Other shells run
/// on Windows, which has no `env`: the request's `env` sets the variables
/// there and blanks the credentials.
pub(super) fn terminal_request(
    command_line: &str,
    launch: &Launch,
) -> serde_json::Map<String, serde_json::Value> {
    let shell = &launch.shell;
    let lossy = |args: &[OsString]| -> Vec<String> {
        args.iter()
            .map(|arg| arg.to_string_lossy().into_owned())
            .collect()
    };
    let mut request = serde_json::Map::new();
    if shell.kind != ShellKind::Posix {
        let blank = OsString::new();
        let env: Vec<serde_json::Value> = (launch.env_remove.iter().map(|name| (name, &blank)))
            .chain(launch.env_set.iter().map(|(name, value)| (name, value)))
            .map(|(name, value)| {
                json!({"name": name.to_string_lossy(), "value": value.to_string_lossy()})
            })
            .collect();
        request.insert("command".into(), json!(shell.program.to_string_lossy()));
        request.insert("args".into(), json!(lossy(&shell.argv(command_line))));
        request.insert("env".into(), json!(env));
        return request;
    }
    let mut args: Vec<OsString> = Vec::new();
    for name in &launch.env_remove {
        args.push("-u".into());
        args.push(name.clone());
    }
    for (name, value) in &launch.env_set {
        let mut pair = name.clone();
        pair.push("=");
        pair.push(value);
        args.push(pair);
    }
    let shell_args = shell.argv(command_line);
    match &launch.sandbox {
        Some((launcher, profile)) => {
            let (program, launcher_args) = crate::sandbox::launcher_command_here(
                launcher,
                profile,
                shell.program.as_os_str(),
                &shell_args,
            );
            args.push(program.into_os_string());
            args.extend(launcher_args);
        }
        None => {
            args.push(shell.program.clone().into_os_string());
            args.extend(shell_args);
        }
    }
    request.insert("command".into(), json!("env"));
    request.insert("args".into(), json!(lossy(&args)));
    request
}

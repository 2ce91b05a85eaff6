//! Running `run_command`: locally in its own process group, or in the
//! editor's terminal when the client offers one.

use super::client::ClientError;
use super::runner::{failed, safe_name, text_content, Ending, Runner};
use crate::cancel::CancelToken;
use crate::provider::ToolCallRequest;
use crate::tools::{self, process};
use crate::util::fence;
use serde_json::json;
use std::path::Path;
use std::time::{Duration, Instant};

impl Runner<'_> {
    pub(super) fn run_locally(
        &self,
        call: &ToolCallRequest,
        command_line: &str,
        cwd: &Path,
        timeout: Duration,
    ) -> Ending {
        let log_path =
            tools::output_dir(self.session_id).join(format!("{}.log", safe_name(&call.id)));
        let spec = process::CommandSpec {
            command_line: command_line.to_string(),
            cwd: cwd.to_path_buf(),
            timeout,
            output_cap: tools::COMMAND_OUTPUT_CAP,
            log_path: Some(log_path),
        };
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
            self.update(json!({
                "sessionUpdate": "tool_call_update",
                "toolCallId": call.id,
                "content": [text_content(&fence(&shown))],
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

    pub(super) fn run_in_terminal(
        &self,
        call: &ToolCallRequest,
        command_line: &str,
        cwd: &Path,
        timeout: Duration,
    ) -> Ending {
        let created = self.client.request(
            "terminal/create",
            json!({
                "sessionId": self.session_id,
                "command": "sh",
                "args": ["-c", command_line],
                "cwd": cwd,
                "outputByteLimit": tools::COMMAND_OUTPUT_CAP,
            }),
        );
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
        self.update(json!({
            "sessionUpdate": "tool_call_update",
            "toolCallId": call.id,
            "content": [{"type": "terminal", "terminalId": terminal_id}],
        }));
        let id_params = json!({"sessionId": self.session_id, "terminalId": terminal_id});
        // Waiting ends at the exit, the timeout or the turn's cancel.
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
        let (exit, killed) = match waited {
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
        let (text, truncated) = match &output {
            Ok(answer) => (
                answer["output"].as_str().unwrap_or("").to_string(),
                answer["truncated"].as_bool().unwrap_or(false),
            ),
            Err(_) => (String::new(), false),
        };
        let exit_code = exit.as_ref().and_then(|e| e["exitCode"].as_i64());
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
                exit.as_ref()
                    .and_then(|e| e["signal"].as_str())
                    .unwrap_or("?")
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
        // The terminal block stays, so the editor keeps showing the output.
        let content = vec![
            json!({"type": "terminal", "terminalId": terminal_id}),
            text_content(&status),
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
}

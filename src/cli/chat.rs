//! `spindle chat`: a conversation in the terminal through the same
//! in-process client as `exec` (`link.rs`, `printer.rs`): a line at the
//! `›` prompt is a prompt (slash commands included: `/undo`, `/compact`,
//! `/help`, custom ones), the answer streams on stdout, thoughts, tool
//! calls and the plan on stderr, approvals are asked on the terminal with
//! the command or the diff. Ctrl-C cancels the running turn; at the
//! prompt a second one (or `/exit`, or Ctrl-D) leaves. `--continue` and
//! `--session ID` go on with an earlier session, its conversation shown
//! first.

use super::exec::{header, open_session, said, unasked_words, ExecArgs};
use super::failure::Failure;
use super::link::{Link, Sender};
use super::printer::Printer;
use crate::agent::Options;
use serde_json::json;
use std::io::{BufRead, Write};
use std::sync::{Arc, Mutex};

/// What the Ctrl-C handler needs: the running turn to cancel, and
/// whether one Ctrl-C at the prompt was seen.
#[derive(Default)]
struct Interrupt {
    running: Option<(Sender, String)>,
    armed: bool,
}

pub fn run(mut options: Options, args: ExecArgs) -> Result<(), Failure> {
    // Termination signals are the chat's to handle, not the agent's.
    options.signals = false;
    let cwd = std::env::current_dir()
        .map_err(|error| Failure::Failed(format!("cannot tell the current folder: {error}")))?;
    let interrupt: Arc<Mutex<Interrupt>> = Arc::default();
    {
        let interrupt = interrupt.clone();
        // Installed before the agent's threads start.
        let _ = crate::process::on_termination(move |_| {
            let Ok(mut state) = interrupt.lock() else {
                std::process::exit(130);
            };
            if let Some((to, session)) = &state.running {
                let cancel = json!({"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": session}});
                super::link::send(to, &cancel);
            } else if state.armed {
                eprintln!();
                std::process::exit(0);
            } else {
                state.armed = true;
                eprint!("\n(Ctrl-C again, /exit or Ctrl-D leaves)\n› ");
            }
        });
    }
    let mut link = Link::start(options)?;
    let mut printer = Printer::new(false, args.quiet);
    printer.user = true;
    let (session, opened) = open_session(
        &mut link,
        &mut printer,
        &cwd,
        args.resume.as_ref(),
        true,
        "spindle-chat",
    )?;
    printer.finish();
    printer.user = false;
    let policy = header(&mut printer, &opened, &session, args.resume.is_some());
    printer.note("Type a prompt; /help lists the commands, /exit leaves.");
    let mut first = args.prompt.clone();
    let stdin = std::io::stdin();
    let mut lines = stdin.lock();
    loop {
        let line = match first.take() {
            Some(line) => line,
            None => {
                eprint!("\n› ");
                let _ = std::io::stderr().flush();
                let mut line = String::new();
                match lines.read_line(&mut line) {
                    Ok(0) | Err(_) => break,
                    Ok(_) => line,
                }
            }
        };
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        if matches!(line, "/exit" | "/quit") {
            break;
        }
        if let Ok(mut state) = interrupt.lock() {
            state.armed = false;
            state.running = Some((link.sender(), session.clone()));
        }
        let params = json!({"sessionId": session, "prompt": [{"type": "text", "text": line}]});
        let answer = link.call("session/prompt", params, &mut printer);
        if let Ok(mut state) = interrupt.lock() {
            state.running = None;
        }
        printer.finish();
        match answer? {
            Ok(result) => match result["stopReason"].as_str().unwrap_or_default() {
                "end_turn" => {}
                "cancelled" => printer.note("(cancelled)"),
                other => printer.note(&format!("(stopped: {other})")),
            },
            Err(error) => {
                let _ = said(&mut printer, error);
            }
        }
        for call in std::mem::take(&mut printer.unasked) {
            printer.note(&unasked_words(&call, &policy));
        }
    }
    link.close()
}

//! `spindle chat`: a conversation in the terminal through the same
//! in-process client as `exec` (`link.rs`, `printer.rs`): a line at the
//! `›` prompt is a prompt (slash commands included: `/undo`, `/compact`,
//! `/help`, custom ones), the answer streams on stdout, thoughts, tool
//! calls and the plan on stderr, approvals are asked on the terminal with
//! the command or the diff. On a terminal lines are edited with history
//! and Tab completing slash commands (`line.rs`). Ctrl-C cancels the
//! running turn (at an approval question too, as Ctrl-D there does); at
//! an empty prompt a second one (or `/exit`, or Ctrl-D) leaves. A mode
//! other than normal is named in the header and before the prompt
//! marker. No log line reaches the screen (`logging.rs`). `--continue`
//! and `--session ID` go on with an earlier session, its conversation
//! shown first.

use super::exec::{header, open_session, said, unasked_words, ExecArgs};
use super::failure::Failure;
use super::line::{History, Read, Terminal};
use super::link::{Link, Sender};
use super::printer::Printer;
use crate::agent::Options;
use serde_json::json;
use std::io::{BufRead, IsTerminal, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

/// What the termination handler shares with the loop: the running turn
/// to cancel, whether one Ctrl-C at the prompt was seen, and whether the
/// chat is to end (`ending.rs`).
#[derive(Default)]
struct Interrupt {
    running: Option<(Sender, String)>,
    armed: bool,
    leaving: Option<Leave>,
}

/// Why the chat ends before its input does.
#[derive(Clone, Copy)]
enum Leave {
    /// Ctrl-C twice at the prompt, as `/exit`: exit 0.
    Asked,
    /// A termination request: passed on by `main`.
    Signal(&'static str),
}

pub(super) fn run(mut options: Options, mut args: ExecArgs) -> Result<(), Failure> {
    // Termination signals are the chat's to handle, not the agent's.
    options.signals = false;
    super::exec::resolve_session(&options, &mut args)?;
    let cwd = std::env::current_dir()
        .map_err(|error| Failure::Failed(format!("cannot tell the current folder: {error}")))?;
    let interrupt: Arc<Mutex<Interrupt>> = Arc::default();
    // Set once the loop saw that the chat is to end: the handler's
    // watcher stops interrupting its reads.
    let noticed: Arc<AtomicBool> = Arc::default();
    {
        let interrupt = interrupt.clone();
        let noticed = noticed.clone();
        // The main thread's read of a line is interrupted so that the loop
        // notices a request that comes while it waits for one.
        let waker = crate::process::Waker::for_this_thread().ok().map(Arc::new);
        // Installed before the agent's threads start.
        let _ = crate::process::on_termination(move |name| {
            let Ok(mut state) = interrupt.lock() else {
                super::ending::force(Some(name));
            };
            // A second request while the chat ends: at once.
            if let Some(leave) = state.leaving {
                super::ending::force(match leave {
                    Leave::Asked => None,
                    Leave::Signal(first) => Some(first),
                });
            }
            let leave = if super::ending::is_interrupt(name) {
                if let Some((to, session)) = &state.running {
                    super::ending::cancel(to, session);
                    return;
                }
                if !state.armed {
                    state.armed = true;
                    eprint!("\n(Ctrl-C again, /exit or Ctrl-D leaves)\n› ");
                    return;
                }
                Leave::Asked
            } else {
                // Hung up, terminated, the console closing.
                if let Some((to, session)) = &state.running {
                    super::ending::cancel(to, session);
                }
                Leave::Signal(name)
            };
            state.leaving = Some(leave);
            let signal = match leave {
                Leave::Asked => None,
                Leave::Signal(name) => Some(name),
            };
            super::ending::watch(signal, waker.clone(), noticed.clone());
        });
    }
    let history = options
        .db
        .clone()
        .unwrap_or_else(crate::store::default_path)
        .with_file_name("chat_history");
    let flags = super::exec::flag_choices(&options);
    let store = super::exec::stored_in(&options);
    let mut printer = Printer::new(false, args.quiet);
    let mut offered = false;
    let (mut link, session, opened) = loop {
        let mut link = Link::start(options.clone())?;
        printer.user = true;
        let opening = open_session(
            &mut link,
            &mut printer,
            &cwd,
            args.resume.as_ref(),
            true,
            "spindle-chat",
            &flags,
        );
        match opening {
            Ok((session, opened)) => break (link, session, opened),
            Err(Failure::NoModel(why)) if !offered && on_terminal() => {
                let _ = link.close();
                offered = true;
                offer_setup(&options, &why)?;
                // Setup wrote the config: the one reload of this start.
                options.loaded = Some(crate::config::loaded::Loaded::load(
                    options.config.as_deref(),
                ));
            }
            Err(failure) => {
                let _ = link.close();
                return Err(failure);
            }
        }
    };
    printer.finish();
    printer.user = false;
    printer.keys = true;
    printer.show_mode = true;
    if let Some(mode) = opened["modes"]["currentModeId"].as_str() {
        printer.mode = mode.to_string();
    }
    let mode = (!matches!(printer.mode.as_str(), "" | "normal")).then(|| printer.mode.clone());
    let policy = header(
        &mut printer,
        &opened,
        &session,
        args.resume.is_some(),
        mode.as_deref(),
    );
    printer.note("Type a prompt; /help lists the commands, /exit leaves.");
    let mut first = args.prompt.clone();
    // The line editor when both ends are a terminal that draws; plain
    // lines else (and under TERM=dumb: Emacs' shell edits lines itself).
    let dumb = std::env::var("TERM").is_ok_and(|term| term == "dumb");
    let mut terminal = (std::io::stdin().is_terminal() && std::io::stderr().is_terminal() && !dumb)
        .then(|| Terminal::new(History::load(&history)));
    let leaving = || {
        let leave = interrupt.lock().ok().and_then(|state| state.leaving);
        if leave.is_some() {
            noticed.store(true, Ordering::SeqCst);
        }
        leave
    };
    loop {
        if leaving().is_some() {
            break;
        }
        let line = match first.take() {
            Some(line) => line,
            None => match read(&mut terminal, &printer.commands, &printer.mode, &leaving) {
                Read::Line(line) => line,
                Read::Eof => break,
                Read::Interrupt => {
                    let Ok(mut state) = interrupt.lock() else {
                        break;
                    };
                    if state.armed {
                        break;
                    }
                    state.armed = true;
                    printer.note("(Ctrl-C again, /exit or Ctrl-D leaves)");
                    continue;
                }
            },
        };
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        if matches!(line, "/exit" | "/quit") {
            break;
        }
        // A mistyped command is said, not sent to the model as a prompt;
        // `//` sends a line that starts with `/` as it is.
        if let Some(name) = unknown_command(line, &printer.commands) {
            printer.note(&format!(
                "Unknown command /{}: /help lists the commands (start the line with // to send it to the model as it is).",
                crate::util::visible(name, false)
            ));
            continue;
        }
        let line = line
            .strip_prefix('/')
            .filter(|rest| rest.starts_with('/'))
            .unwrap_or(line);
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
    let closed = link.close();
    if let (Some(store), None) = (&store, &args.resume) {
        super::exec::forget_if_only_commands(store, &session);
    }
    match leaving() {
        Some(Leave::Signal(name)) => Err(Failure::Signalled(name)),
        Some(Leave::Asked) | None => closed,
    }
}

/// Whether a person is there to answer: standard input and output both
/// a terminal.
fn on_terminal() -> bool {
    std::io::stdin().is_terminal() && std::io::stdout().is_terminal()
}

/// No model is set up, and a person is at the terminal: offers to run
/// `spindle setup` here. `Ok` once it wrote a config (the chat then
/// starts again); a no, or a setup that did not finish, ends the chat
/// with the way to do it later.
fn offer_setup(options: &Options, why: &str) -> Result<(), Failure> {
    let later = || {
        Failure::NoModel(
            "no model is set up; run `spindle setup` to choose a provider and a model, then `spindle chat`".into(),
        )
    };
    eprintln!("spindle: {}", crate::util::visible(why, true));
    eprint!("Set up a model provider now (spindle setup)? [Y/n] ");
    let _ = std::io::stderr().flush();
    let mut answer = String::new();
    if std::io::stdin().lock().read_line(&mut answer).unwrap_or(0) == 0 {
        return Err(later());
    }
    if !matches!(
        answer.trim().to_ascii_lowercase().as_str(),
        "" | "y" | "yes"
    ) {
        return Err(later());
    }
    let args = super::setup::SetupArgs {
        config: options.config.clone(),
        ..Default::default()
    };
    let mut output = std::io::stdout();
    let summary = super::setup::run(args, true, &mut std::io::stdin().lock(), &mut output)
        .map_err(|error| Failure::SetupFailed(error.into()))?;
    let _ = super::stdout::print(&crate::util::visible(&summary, true));
    Ok(())
}

/// The command a line names when it is none of `commands` (the agent's
/// list, once it has sent one): `/name` where the name is a word, not a
/// path (`/etc/hosts is broken` is a prompt).
fn unknown_command<'a>(line: &'a str, commands: &[String]) -> Option<&'a str> {
    let name = line.strip_prefix('/')?.split_whitespace().next()?;
    let word = name
        .chars()
        .all(|c| c.is_alphanumeric() || matches!(c, '-' | '_' | ':' | '.'));
    let known = commands.iter().any(|command| command == name);
    (word && !commands.is_empty() && !known).then_some(name)
}

/// The next line: through the editor on a terminal, else a plain line
/// from standard input. A read interrupted while the chat is `leaving`
/// ends the input.
fn read(
    terminal: &mut Option<Terminal>,
    commands: &[String],
    mode: &str,
    leaving: &dyn Fn() -> Option<Leave>,
) -> Read {
    let mut names: Vec<String> = commands.to_vec();
    names.extend(["exit".to_string(), "quit".to_string()]);
    eprintln!();
    // A mode other than the usual one is named before the marker.
    let prompt = match mode {
        "" | "normal" => "› ".to_string(),
        mode => format!("{} › ", crate::util::visible(mode, false)),
    };
    if let Some(read) = terminal.as_mut().and_then(|t| t.read(&prompt, &names)) {
        return read;
    }
    eprint!("{prompt}");
    let _ = std::io::stderr().flush();
    plain_line(&mut std::io::stdin().lock(), leaving)
}

/// One line of `input` (`read_line` would retry an interrupted read):
/// the end of input when it ends, fails, or is interrupted because the
/// chat is leaving.
fn plain_line(input: &mut dyn BufRead, leaving: &dyn Fn() -> Option<Leave>) -> Read {
    let mut line = Vec::new();
    loop {
        let available = match input.fill_buf() {
            Ok(available) => available,
            Err(error) if error.kind() == std::io::ErrorKind::Interrupted => {
                if leaving().is_some() {
                    return Read::Eof;
                }
                continue;
            }
            Err(_) => return Read::Eof,
        };
        if available.is_empty() {
            break;
        }
        let (taken, ended) = match available.iter().position(|&byte| byte == b'\n') {
            Some(at) => (at + 1, true),
            None => (available.len(), false),
        };
        line.extend_from_slice(&available[..taken]);
        input.consume(taken);
        if ended {
            break;
        }
    }
    match String::from_utf8(line) {
        Ok(line) if !line.is_empty() => Read::Line(line),
        _ => Read::Eof,
    }
}

#[cfg(test)]
mod tests {
    use super::{plain_line, unknown_command, Leave, Read};

    #[test]
    fn plain_lines_are_read_one_at_a_time_to_the_end() {
        let mut input: &[u8] = b"first\nsecond";
        let staying = || None::<Leave>;
        let mut lines = Vec::new();
        loop {
            match plain_line(&mut input, &staying) {
                Read::Line(line) => lines.push(line),
                Read::Eof => break,
                Read::Interrupt => panic!("no interrupt without a terminal"),
            }
        }
        assert_eq!(lines, ["first\n", "second"]);
    }

    #[test]
    fn mistyped_commands_are_told_from_prompts() {
        let known = vec!["help".to_string(), "undo".to_string()];
        assert_eq!(unknown_command("/halp me", &known), Some("halp"));
        assert_eq!(unknown_command("/help", &known), None);
        assert_eq!(unknown_command("/undo 2", &known), None);
        // Paths, the escape and plain prompts are prompts.
        assert_eq!(unknown_command("/etc/hosts is broken", &known), None);
        assert_eq!(unknown_command("//halp", &known), None);
        assert_eq!(unknown_command("fix /halp", &known), None);
        // Before the agent sent its list, nothing is judged.
        assert_eq!(unknown_command("/halp", &[]), None);
    }
}

//! `spindle exec "PROMPT"`: one prompt, here, through the same agent and
//! session store as `spindle acp`, with a small ACP client in front of it
//! that prints what happens. The answer goes to stdout; thoughts, tool
//! calls and the plan to stderr (dimmed on a terminal); `--quiet` leaves
//! only the answer, `--json` prints the raw updates instead.
//!
//! Permission requests are asked on the terminal (`/dev/tty`) when there
//! is one, and rejected otherwise, so a script never hangs on a question.

use super::failure::Failure;
use crate::agent::Options;
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, IsTerminal, Read, Write};

/// What `exec` was asked besides the agent's options.
#[derive(Debug, Clone, Default)]
pub struct ExecArgs {
    /// The prompt, or `-` for standard input.
    pub prompt: Option<String>,
    pub json: bool,
    pub quiet: bool,
}

/// The most bytes of a prompt read from standard input.
const PROMPT_CAP: u64 = 1024 * 1024;

/// Runs the prompt: `Ok` after `end_turn`, [`Failure::Stopped`] (exit
/// code 3) on any other stop reason, another failure (1) on an error.
pub fn run(options: Options, args: ExecArgs) -> Result<(), Failure> {
    let prompt = match args.prompt.as_deref() {
        Some("-") => {
            let mut bytes = Vec::new();
            if let Err(error) = std::io::stdin()
                .take(PROMPT_CAP + 1)
                .read_to_end(&mut bytes)
            {
                return Err(Failure::Failed(format!(
                    "cannot read the prompt from stdin: {error}"
                )));
            }
            if bytes.len() as u64 > PROMPT_CAP {
                return Err(Failure::Failed(format!("the prompt on stdin is over {} MiB; give a shorter one (or put the text in a file and name the file in the prompt)", PROMPT_CAP >> 20)));
            }
            match String::from_utf8(bytes) {
                Ok(text) => text,
                Err(_) => {
                    return Err(Failure::Failed(
                        "the prompt on stdin must be UTF-8 text".into(),
                    ));
                }
            }
        }
        Some(text) => text.to_string(),
        None => String::new(),
    };
    if prompt.trim().is_empty() {
        return Err(Failure::Failed("the prompt is empty".into()));
    }
    let cwd = match std::env::current_dir() {
        Ok(dir) => dir,
        Err(error) => {
            return Err(Failure::Failed(format!(
                "cannot tell the current folder: {error}"
            )));
        }
    };
    let pipe = || std::io::pipe().map_err(|error| Failure::Failed(error.to_string()));
    let (to_agent_reader, mut to_agent) = pipe()?;
    let (from_agent, from_agent_writer) = pipe()?;
    let agent = std::thread::Builder::new()
        .name("spindle-exec-agent".into())
        .spawn(move || crate::agent::serve(options, to_agent_reader, from_agent_writer));
    let agent = match agent {
        Ok(agent) => agent,
        Err(error) => {
            return Err(Failure::Failed(format!(
                "cannot start the agent thread: {error}"
            )));
        }
    };
    let mut printer = Printer::new(args.json, args.quiet);
    let ended = drive(&mut to_agent, from_agent, &cwd, &prompt, &mut printer);
    drop(to_agent);
    match agent.join() {
        Ok(Ok(())) => {}
        Ok(Err(message)) => return Err(Failure::Failed(message)),
        Err(_) => {
            return Err(Failure::Failed("the agent thread panicked".into()));
        }
    }
    ended
}

fn send(to_agent: &mut impl Write, message: Value) -> bool {
    let mut line = message.to_string();
    line.push('\n');
    to_agent.write_all(line.as_bytes()).is_ok() && to_agent.flush().is_ok()
}

/// The client's side of the conversation: initialize, a session in
/// `cwd`, the prompt; every update printed, every question answered.
fn drive(
    to_agent: &mut impl Write,
    from_agent: impl Read,
    cwd: &std::path::Path,
    prompt: &str,
    printer: &mut Printer,
) -> Result<(), Failure> {
    let mut lines = BufReader::new(from_agent).lines();
    let request = |to: &mut dyn Write, id: u64, method: &str, params: Value| {
        let mut line =
            json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}).to_string();
        line.push('\n');
        to.write_all(line.as_bytes()).is_ok() && to.flush().is_ok()
    };
    if !request(
        to_agent,
        0,
        "initialize",
        // Notices are not the answer: they go to stderr.
        json!({"protocolVersion": 1,
               "clientCapabilities": {"_meta": {"spindle": {"notices": true}}},
               "clientInfo": {"name": "spindle-exec", "version": env!("CARGO_PKG_VERSION")}}),
    ) {
        return Err(Failure::Broken);
    }
    let mut session: Option<String> = None;
    while let Some(Ok(line)) = lines.next() {
        let Ok(message) = serde_json::from_str::<Value>(&line) else {
            continue;
        };
        // The agent's own requests: permissions (asked or rejected); any
        // other is refused (no files or terminals are offered).
        if let (Some(method), Some(id)) = (message["method"].as_str(), message.get("id")) {
            let answer = if method == "session/request_permission" {
                json!({"jsonrpc": "2.0", "id": id, "result": {"outcome": printer.permission(&message["params"])}})
            } else {
                json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32601, "message": format!("spindle exec does not offer {method}")}})
            };
            if !send(to_agent, answer) {
                return Err(Failure::Broken);
            }
            continue;
        }
        if message["method"] == "session/update" {
            printer.update(&message["params"]["update"]);
            continue;
        }
        if message.get("method").is_some() {
            continue;
        }
        if let Some(error) = message.get("error") {
            printer.finish();
            eprintln!(
                "spindle: {}",
                crate::util::visible(
                    error["message"].as_str().unwrap_or("the agent failed"),
                    true
                )
            );
            return Err(Failure::Broken);
        }
        match message["id"].as_u64() {
            Some(0)
                if !request(
                    to_agent,
                    1,
                    "session/new",
                    json!({"cwd": cwd, "mcpServers": []}),
                ) =>
            {
                return Err(Failure::Broken);
            }
            Some(1) => {
                let id = message["result"]["sessionId"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string();
                let params = json!({"sessionId": id, "prompt": [{"type": "text", "text": prompt}]});
                session = Some(id);
                if !request(to_agent, 2, "session/prompt", params) {
                    return Err(Failure::Broken);
                }
            }
            Some(2) => {
                printer.finish();
                let stop = message["result"]["stopReason"].as_str().unwrap_or_default();
                if printer.json {
                    println!(
                        "{}",
                        json_for_terminal(&json!({"stopReason": stop, "sessionId": session}))
                    );
                } else if stop != "end_turn" {
                    eprintln!("(stopped: {})", crate::util::visible(stop, false));
                }
                return if stop == "end_turn" {
                    Ok(())
                } else {
                    Err(Failure::Stopped)
                };
            }
            _ => {}
        }
    }
    printer.finish();
    eprintln!("spindle: the agent ended before answering");
    Err(Failure::Broken)
}

/// How updates and questions reach the person (or script) at the other
/// end.
struct Printer {
    json: bool,
    quiet: bool,
    /// Dim thoughts and tool lines: stderr is a terminal.
    dim: bool,
    /// What was last printed on stdout ended a line.
    answer_open: bool,
    /// In the middle of a thought on stderr.
    thinking: bool,
    titles: std::collections::HashMap<String, String>,
}

impl Printer {
    fn new(json: bool, quiet: bool) -> Printer {
        Printer {
            json,
            quiet,
            dim: std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none(),
            answer_open: false,
            thinking: false,
            titles: Default::default(),
        }
    }

    fn note(&mut self, text: &str) {
        if self.quiet {
            return;
        }
        let text = &crate::util::visible(text, true);
        self.end_thought();
        if self.dim {
            eprintln!("\x1b[2m{text}\x1b[0m");
        } else {
            eprintln!("{text}");
        }
    }

    fn end_thought(&mut self) {
        if self.thinking {
            self.thinking = false;
            eprintln!();
        }
    }

    fn update(&mut self, update: &Value) {
        if self.json {
            println!("{}", json_for_terminal(update));
            return;
        }
        // The model's words reach a terminal: no control sequence of
        // theirs does (a cleared line, a moved cursor, a fake prompt).
        let text =
            &crate::util::visible(update["content"]["text"].as_str().unwrap_or_default(), true);
        match update["sessionUpdate"].as_str().unwrap_or_default() {
            "agent_message_chunk" if update["_meta"]["spindle"]["parentToolCallId"].is_null() => {
                self.end_thought();
                print!("{text}");
                let _ = std::io::stdout().flush();
                if !text.is_empty() {
                    self.answer_open = !text.ends_with('\n');
                }
            }
            "notice" if !self.quiet => {
                self.end_thought();
                let title =
                    crate::util::visible(update["title"].as_str().unwrap_or_default(), true);
                match update["description"].as_str() {
                    Some(description) => {
                        eprintln!("{title}: {}", crate::util::visible(description, true))
                    }
                    None => eprintln!("{title}"),
                }
            }
            "agent_thought_chunk" if !self.quiet => {
                if !self.thinking {
                    self.thinking = true;
                }
                if self.dim {
                    eprint!("\x1b[2m{text}\x1b[0m");
                } else {
                    eprint!("{text}");
                }
            }
            "tool_call" => {
                let id = update["toolCallId"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string();
                let title = update["title"]
                    .as_str()
                    .unwrap_or("a tool call")
                    .to_string();
                self.titles.insert(id, title);
            }
            "tool_call_update" => {
                let Some(status @ ("completed" | "failed")) = update["status"].as_str() else {
                    return;
                };
                let id = update["toolCallId"].as_str().unwrap_or_default();
                let title = self
                    .titles
                    .get(id)
                    .cloned()
                    .unwrap_or_else(|| id.to_string());
                let mark = if status == "completed" { "✓" } else { "✗" };
                self.note(&format!("{mark} {title}"));
            }
            "plan" => {
                let entries: Vec<String> = update["entries"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(|e| {
                        let mark = match e["status"].as_str() {
                            Some("completed") => "✓",
                            Some("in_progress") => "▸",
                            _ => "○",
                        };
                        format!("  {mark} {}", e["content"].as_str().unwrap_or_default())
                    })
                    .collect();
                self.note(&format!("Plan:\n{}", entries.join("\n")));
            }
            _ => {}
        }
    }

    /// Asks on the terminal when there is one; rejects otherwise.
    fn permission(&mut self, params: &Value) -> Value {
        // What the model chose, shown as it is: one line, control
        // characters written out, and the whole command when the title
        // shortens it.
        let title = &crate::util::visible(
            params["toolCall"]["title"]
                .as_str()
                .unwrap_or("a tool call"),
            false,
        );
        let command = params["toolCall"]["rawInput"]["command"]
            .as_str()
            .map(|c| crate::util::visible(c, false))
            .filter(|c| !title.contains(c.as_str()));
        let options = params["options"].as_array().cloned().unwrap_or_default();
        let pick = |kind: &str| -> Option<String> {
            options
                .iter()
                .find(|o| o["kind"] == kind)
                .and_then(|o| o["optionId"].as_str())
                .map(str::to_string)
        };
        let reject = || match pick("reject_once") {
            Some(id) => json!({"outcome": "selected", "optionId": id}),
            None => json!({"outcome": "cancelled"}),
        };
        self.end_thought();
        let tty = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open("/dev/tty");
        let Ok(mut tty) = tty else {
            eprintln!("✗ {title}: rejected (no terminal to ask on; use --permissions auto or yolo to allow)");
            return reject();
        };
        if let Some(command) = &command {
            let _ = writeln!(tty, "  $ {command}");
        }
        let _ = write!(tty, "Allow {title}? [y]es, [a]lways, [N]o: ");
        let _ = tty.flush();
        let mut answer = String::new();
        let _ = BufReader::new(&mut tty).read_line(&mut answer);
        let chosen = match answer.trim().to_ascii_lowercase().as_str() {
            "y" | "yes" => pick("allow_once"),
            "a" | "always" => pick("allow_always").or_else(|| pick("allow_once")),
            _ => None,
        };
        match chosen {
            Some(id) => json!({"outcome": "selected", "optionId": id}),
            None => reject(),
        }
    }

    fn finish(&mut self) {
        self.end_thought();
        if self.answer_open && !self.json {
            println!();
            self.answer_open = false;
        }
    }
}

/// A JSON line whose every character that a terminal would act on (DEL,
/// the C1 controls, bidirectional overrides; serde escapes C0 already) is
/// a `\uXXXX` escape: the same JSON to a program, inert on a terminal.
/// Such characters occur only inside strings, where the escape is valid.
fn json_for_terminal(value: &Value) -> String {
    let text = value.to_string();
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if crate::util::acts_on_a_terminal(c) {
            for unit in c.encode_utf16(&mut [0; 2]) {
                out.push_str(&format!("\\u{unit:04x}"));
            }
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_lines_carry_no_raw_terminal_controls() {
        let value = json!({"text": "a\u{9b}2J\u{7f}\u{202e}b\nc"});
        let line = json_for_terminal(&value);
        assert!(
            !line.chars().any(|c| c.is_control() || c == '\u{202e}'),
            "{line}"
        );
        assert_eq!(serde_json::from_str::<Value>(&line).unwrap(), value);
    }
}

//! What the terminal client shows and asks: the answer on stdout;
//! thoughts, notices, tool calls (with a command's last lines of output)
//! and the plan on stderr, dimmed on a terminal unless `NO_COLOR`;
//! permission questions on the terminal itself (`/dev/tty`), with the
//! command and its folder or the edit's diff. Without a terminal nobody
//! is asked: the agent is told so (`_meta.spindle.unasked`), and what
//! needed approval is kept for the end.
//!
//! The model's words reach a terminal without any control sequence of
//! theirs (a cleared line, a moved cursor, a fake prompt).

use super::line::{Key, Keys};
use serde_json::{json, Value};
use std::collections::HashMap;
use std::io::{BufRead, BufReader, IsTerminal, Read, Write};

/// The most lines of a diff or of a command's output shown.
const SHOWN_LINES: usize = 12;

/// A call that needed approval when nobody could be asked.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Unasked {
    pub title: String,
    /// The ACP tool kind (`edit`, `execute`, `fetch`, …), or `question`.
    pub kind: String,
    pub command: Option<String>,
}

pub(super) struct Printer {
    pub json: bool,
    pub quiet: bool,
    /// Dim thoughts and tool lines: stderr is a terminal.
    dim: bool,
    /// What was last printed on stdout did not end a line.
    answer_open: bool,
    /// Stdout and stderr are one screen: a block on stderr starts on a
    /// line of its own after an answer that did not end one.
    shared: bool,
    /// The answer's last message, to set the next one apart.
    message: Option<String>,
    /// In the middle of a thought on stderr.
    thinking: bool,
    /// Tool calls by id: their title, kind and command.
    calls: HashMap<String, (String, String)>,
    /// The calls that only set the plan (`todo_write`): the plan shown
    /// is their line.
    plan_calls: Vec<String>,
    /// The plan last shown, by owner (the session's, or a subagent's
    /// call): the same plan again is not shown twice.
    plans: HashMap<String, String>,
    /// The session's mode (`normal`, `plan`, `goal`), once known.
    pub mode: String,
    /// A change of mode is said (the chat).
    pub show_mode: bool,
    /// A question is answered key by key, Ctrl-C or Ctrl-D cancelling
    /// the turn (the chat); else it reads a plain line.
    pub keys: bool,
    pub unasked: Vec<Unasked>,
    /// Show the user's messages too (a replayed conversation).
    pub user: bool,
    /// The slash commands the agent last advertised (names only).
    pub commands: Vec<String>,
}

/// Writes on stdout; a reader gone away is not an error
/// (`super::stdout`), nor is a failed write worth more than the answer.
fn out(text: &str) {
    let _ = super::stdout::print(text);
}

fn visible(text: &str) -> String {
    crate::util::visible(text, true)
}

impl Printer {
    pub(super) fn new(json: bool, quiet: bool) -> Printer {
        Printer {
            json,
            quiet,
            dim: std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none(),
            answer_open: false,
            shared: std::io::stdout().is_terminal() && std::io::stderr().is_terminal(),
            message: None,
            thinking: false,
            calls: HashMap::new(),
            plan_calls: Vec::new(),
            plans: HashMap::new(),
            mode: String::new(),
            show_mode: false,
            keys: false,
            unasked: Vec::new(),
            user: false,
            commands: Vec::new(),
        }
    }

    /// A line on stderr (dimmed on a terminal); nothing under `--quiet`.
    pub(super) fn note(&mut self, text: &str) {
        if self.quiet || self.json {
            return;
        }
        let text = visible(text);
        self.end_thought();
        self.break_line();
        if self.dim {
            eprintln!("\x1b[2m{text}\x1b[0m");
        } else {
            eprintln!("{text}");
        }
    }

    /// On a shared screen, ends the answer's open line, so what comes
    /// next starts a line of its own.
    fn break_line(&mut self) {
        if self.shared && self.answer_open && !self.json {
            out("\n");
            self.answer_open = false;
        }
    }

    fn end_thought(&mut self) {
        if self.thinking {
            self.thinking = false;
            eprintln!();
        }
    }

    pub(super) fn finish(&mut self) {
        self.end_thought();
        if self.answer_open && !self.json {
            out("\n");
            self.answer_open = false;
        }
    }

    fn answer(&mut self, message_id: Option<&str>, text: &str) {
        self.end_thought();
        // Another message of the answer: set apart by a blank line.
        if let (Some(id), Some(last)) = (message_id, self.message.as_deref()) {
            if id != last && !text.is_empty() {
                out(if self.answer_open { "\n\n" } else { "\n" });
            }
        }
        if let Some(id) = message_id {
            self.message = Some(id.to_string());
        }
        out(text);
        if !text.is_empty() {
            self.answer_open = !text.ends_with('\n');
        }
    }

    fn finished_call(&mut self, update: &Value, status: &str) {
        let id = update["toolCallId"].as_str().unwrap_or_default();
        let (title, kind) = self
            .calls
            .get(id)
            .cloned()
            .unwrap_or_else(|| (id.to_string(), String::new()));
        let mark = if status == "completed" { "✓" } else { "✗" };
        // A call that set the plan is shown by the plan itself.
        let planned = self.plan_calls.iter().any(|call| call == id);
        self.plan_calls.retain(|call| call != id);
        if planned && status == "completed" {
            return;
        }
        self.note(&format!("{mark} {title}"));
        if kind != "execute" {
            return;
        }
        // A command's last lines of output.
        let output: String = update["content"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|c| c["content"]["text"].as_str())
            .collect();
        let lines = unfenced(output.lines().collect());
        let skipped = lines.len().saturating_sub(SHOWN_LINES);
        if skipped > 0 {
            self.note(&format!("  │ … {skipped} lines before"));
        }
        for line in &lines[skipped..] {
            self.note(&format!("  │ {line}"));
        }
    }

    pub(super) fn update(&mut self, update: &Value) {
        if update["sessionUpdate"] == "available_commands_update" {
            self.commands = update["availableCommands"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|command| command["name"].as_str().map(String::from))
                .collect();
        }
        if self.json {
            out(&format!("{}\n", crate::util::json_for_terminal(update)));
            return;
        }
        let text = &visible(update["content"]["text"].as_str().unwrap_or_default());
        match update["sessionUpdate"].as_str().unwrap_or_default() {
            "agent_message_chunk" if update["_meta"]["spindle"]["parentToolCallId"].is_null() => {
                self.answer(update["messageId"].as_str(), text)
            }
            "user_message_chunk" if self.user => {
                self.finish();
                out(&format!("\n› {text}\n"));
                self.message = None;
            }
            "notice" => {
                let title = visible(update["title"].as_str().unwrap_or_default());
                match update["description"].as_str() {
                    Some(description) => self.note(&format!(
                        "{}: {description}",
                        title.trim_end().trim_end_matches('.')
                    )),
                    None => self.note(&title),
                }
            }
            "agent_thought_chunk" if !self.quiet => {
                if !self.thinking {
                    self.break_line();
                }
                self.thinking = true;
                if self.dim {
                    eprint!("\x1b[2m{text}\x1b[0m");
                } else {
                    eprint!("{text}");
                }
            }
            "tool_call" => {
                let id = update["toolCallId"].as_str().unwrap_or_default();
                let title = update["title"].as_str().unwrap_or("a tool call");
                let kind = update["kind"].as_str().unwrap_or("other");
                self.calls
                    .insert(id.to_string(), (title.to_string(), kind.to_string()));
                if update["rawInput"]["todos"].is_array() && kind == "think" {
                    self.plan_calls.push(id.to_string());
                }
            }
            "tool_call_update" => {
                if let Some(status @ ("completed" | "failed")) = update["status"].as_str() {
                    self.finished_call(update, status);
                }
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
                let shown = format!("Plan:\n{}", entries.join("\n"));
                let owner = update["_meta"]["spindle"]["parentToolCallId"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string();
                // An unchanged plan is not shown again.
                if self.plans.get(&owner) != Some(&shown) {
                    self.note(&shown);
                    self.plans.insert(owner, shown);
                }
            }
            "current_mode_update" => {
                let mode = update["currentModeId"].as_str().unwrap_or_default();
                if mode != self.mode {
                    self.mode = mode.to_string();
                    if self.show_mode {
                        self.note(&format!("Mode: {}", mode_words(mode)));
                    }
                }
            }
            _ => {}
        }
    }

    /// Asks on the terminal when there is one; else nobody is asked.
    pub(super) fn permission(&mut self, params: &Value) -> Value {
        let call = &params["toolCall"];
        // What the model chose, shown as it is: one line, control
        // characters written out, and the whole command.
        let title = crate::util::visible(call["title"].as_str().unwrap_or("a tool call"), false);
        let command = call["rawInput"]["command"]
            .as_str()
            .map(|c| crate::util::visible(c, false));
        let options = params["options"].as_array().cloned().unwrap_or_default();
        let pick = |kind: &str| -> Option<String> {
            options
                .iter()
                .find(|o| o["kind"] == kind)
                .and_then(|o| o["optionId"].as_str())
                .map(str::to_string)
        };
        let question = options.iter().any(|o| o["optionId"] == "choice_1");
        self.end_thought();
        self.break_line();
        let tty = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open("/dev/tty");
        let Ok(mut tty) = tty else {
            let kind = match question {
                true => "question".to_string(),
                false => call["kind"].as_str().unwrap_or("other").to_string(),
            };
            self.unasked.push(Unasked {
                title: title.clone(),
                kind,
                command,
            });
            let outcome = match pick("reject_once") {
                Some(id) => json!({"outcome": "selected", "optionId": id}),
                None => json!({"outcome": "cancelled"}),
            };
            return json!({"outcome": outcome, "_meta": {"spindle": {"unasked": true}}});
        };
        let _ = writeln!(tty, "{}", shown_request(call, command.as_deref()));
        // Every option by its name, numbered: the broader scopes (this
        // project, saved) are the terminal's too; y, a and n stay the
        // quick answers.
        let choices: Vec<(String, String)> = options
            .iter()
            .enumerate()
            .map(|(n, o)| {
                let name = crate::util::visible(o["name"].as_str().unwrap_or_default(), false);
                (format!("{}", n + 1), name)
            })
            .collect();
        for (key, name) in &choices {
            let _ = writeln!(tty, "  {key}. {name}");
        }
        let prompt = match question {
            true => format!("{title} [1-{}]: ", choices.len()),
            false => format!(
                "Allow {title}? [y]es, [a]lways, [N]o or 1-{}: ",
                choices.len()
            ),
        };
        let _ = write!(tty, "{prompt}");
        let _ = tty.flush();
        let answer = match self.keys {
            true => answer_keys(&mut tty),
            false => {
                let mut answer = String::new();
                let _ = BufReader::new(&mut tty).read_line(&mut answer);
                Some(answer)
            }
        };
        let Some(answer) = answer else {
            // Ctrl-C or Ctrl-D: the question is answered as cancelled,
            // which ends the turn as a cancel does (the agent still
            // waits for this answer: a `session/cancel` first would
            // leave it an answer to a request it dropped).
            return json!({"outcome": {"outcome": "cancelled"}});
        };
        let answer = answer.trim().to_ascii_lowercase();
        let numbered = answer
            .parse::<usize>()
            .ok()
            .and_then(|n| options.get(n.wrapping_sub(1)))
            .and_then(|o| o["optionId"].as_str())
            .map(str::to_string);
        let chosen = match answer.as_str() {
            _ if question || numbered.is_some() => numbered,
            "y" | "yes" => pick("allow_once"),
            "a" | "always" => pick("allow_always").or_else(|| pick("allow_once")),
            _ => None,
        };
        let outcome = match chosen.or_else(|| pick("reject_once")) {
            Some(id) => json!({"outcome": "selected", "optionId": id}),
            None => json!({"outcome": "cancelled"}),
        };
        json!({ "outcome": outcome })
    }
}

impl super::link::Client for Printer {
    fn update(&mut self, update: &Value) {
        Printer::update(self, update)
    }
    fn permission(&mut self, params: &Value) -> Value {
        Printer::permission(self, params)
    }
}

/// The answer to a question typed on the terminal, each key as it comes
/// (raw mode, so Ctrl-C is a key rather than a signal that would wait
/// for Enter): the line at Enter, `None` at Ctrl-C, at Ctrl-D on an empty
/// line or at the input's end. A plain line when standard input is no
/// terminal.
fn answer_keys(tty: &mut std::fs::File) -> Option<String> {
    let raw = std::io::stdin()
        .is_terminal()
        .then(crate::os::RawMode::new)
        .flatten();
    let Some(_raw) = raw else {
        let mut answer = String::new();
        return match BufReader::new(tty).read_line(&mut answer) {
            Ok(0) | Err(_) => None,
            Ok(_) => Some(answer),
        };
    };
    let mut keys = Keys::default();
    let mut typed = String::new();
    let mut buffer = [0u8; 256];
    loop {
        let count = match std::io::stdin().read(&mut buffer) {
            Ok(0) | Err(_) => return None,
            Ok(count) => count,
        };
        for key in keys.feed(&buffer[..count]) {
            match key {
                Key::Enter => {
                    let _ = writeln!(tty);
                    return Some(typed);
                }
                Key::Interrupt => {
                    let _ = writeln!(tty, "^C");
                    return None;
                }
                Key::Eof if typed.is_empty() => {
                    let _ = writeln!(tty);
                    return None;
                }
                Key::Backspace if typed.pop().is_some() => {
                    let _ = write!(tty, "\x08 \x08");
                }
                // An answer is a word or a number: a few printable keys.
                Key::Char(c) if c.is_ascii_graphic() && typed.len() < 16 => {
                    typed.push(c);
                    let _ = write!(tty, "{c}");
                }
                _ => {}
            }
        }
        let _ = tty.flush();
    }
}

/// A command's output without the Markdown fence the agent wraps it in
/// for the model: the first line of backticks and the last line that
/// closes it.
fn unfenced(mut lines: Vec<&str>) -> Vec<&str> {
    let is_fence = |line: &str| line.len() >= 3 && line.bytes().all(|b| b == b'`');
    let Some(open) = lines.iter().position(|line| is_fence(line)) else {
        return lines;
    };
    let fence = lines[open];
    let Some(close) = lines
        .iter()
        .rposition(|line| *line == fence)
        .filter(|&at| at > open)
    else {
        return lines;
    };
    lines.remove(close);
    lines.remove(open);
    lines
}

/// How the chat names a mode.
pub(super) fn mode_words(mode: &str) -> String {
    match mode {
        "plan" => "plan (read-only: explore and plan, change nothing)".to_string(),
        "goal" => "goal (the next prompt is worked on until done)".to_string(),
        other => crate::util::visible(other, false),
    }
}

/// What a permission question shows before asking: the command and its
/// folder, or the diff of each file the call changes.
fn shown_request(call: &Value, command: Option<&str>) -> String {
    let mut lines = Vec::new();
    if let Some(command) = command {
        lines.push(format!("  $ {command}"));
        if let Some(folder) = call["rawInput"]["cwd"].as_str() {
            lines.push(format!("    in {}", crate::util::visible(folder, false)));
        }
    }
    for content in call["content"].as_array().into_iter().flatten() {
        if content["type"] == "diff" {
            let path = crate::util::visible(content["path"].as_str().unwrap_or_default(), false);
            lines.push(format!("  {path}"));
            lines.extend(crate::util::diff_lines(
                content["oldText"].as_str().unwrap_or_default(),
                content["newText"].as_str().unwrap_or_default(),
                SHOWN_LINES,
            ));
        }
    }
    lines.join("\n")
}

#[cfg(test)]
mod tests {
    use super::unfenced;

    #[test]
    fn command_output_loses_only_its_wrapping_fence() {
        let wrapped = vec!["Exit code: 0", "````", "a ``` inside", "````"];
        assert_eq!(unfenced(wrapped), ["Exit code: 0", "a ``` inside"]);
        // An opening fence never closed, or none: the lines as they are.
        assert_eq!(unfenced(vec!["```", "x"]), ["```", "x"]);
        assert_eq!(unfenced(vec!["plain"]), ["plain"]);
    }
}

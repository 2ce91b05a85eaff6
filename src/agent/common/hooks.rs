//! Hooks in Claude Code's format: commands the user (or a trusted
//! project) asks to run at points of a session — before and after a tool
//! call, when a prompt is sent, when the model would stop — each given
//! the event as JSON on stdin, and answering with its exit code and,
//! optionally, JSON on stdout. This file reads them and judges what a
//! hook answered; running them is the turn's (`turn/hooks.rs`).
//!
//! A hook can only hold things back: block a call, a prompt or a stop,
//! add context, force a question. It never allows what the session's own
//! policy and rules would not (`allow` from a hook means "no objection").

use serde_json::{json, Value};
use std::path::Path;
use std::time::Duration;

/// The events hooks run at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Event {
    SessionStart,
    UserPromptSubmit,
    PreToolUse,
    PostToolUse,
    Stop,
    PreCompact,
    SessionEnd,
    Notification,
}

const EVENTS: [(&str, Event); 8] = [
    ("SessionStart", Event::SessionStart),
    ("UserPromptSubmit", Event::UserPromptSubmit),
    ("PreToolUse", Event::PreToolUse),
    ("PostToolUse", Event::PostToolUse),
    ("Stop", Event::Stop),
    ("PreCompact", Event::PreCompact),
    ("SessionEnd", Event::SessionEnd),
    ("Notification", Event::Notification),
];

impl Event {
    pub fn name(self) -> &'static str {
        EVENTS
            .iter()
            .find(|(_, event)| *event == self)
            .map(|(name, _)| *name)
            .unwrap_or("")
    }
}

/// The default and the longest time a hook may run.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);
pub const MAX_TIMEOUT: Duration = Duration::from_secs(600);
/// The longest a `Notification` or `SessionEnd` hook may run.
pub const BRIEF_TIMEOUT: Duration = Duration::from_secs(10);
/// The most bytes kept of a hook's stdout and of its stderr.
pub const OUTPUT_CAP: usize = 64 * 1024;
/// The most hooks read from all places together.
const HOOKS_MAX: usize = 100;
/// The largest settings file read for hooks.
const SETTINGS_CAP: u64 = 256 * 1024;

/// One command hook.
#[derive(Debug, Clone, PartialEq)]
pub struct Hook {
    pub event: Event,
    /// Which tools (or sources, triggers) it runs for; empty or `*` is all.
    pub matcher: String,
    pub command: String,
    pub timeout: Duration,
    /// Where it came from, in words: "your config", "the project's
    /// .claude/settings.json".
    pub origin: String,
}

/// The hooks in force in a workspace, and what was wrong or left out.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Hooks {
    pub list: Vec<Hook>,
    pub problems: Vec<String>,
}

impl Hooks {
    /// The user's (`user`: the `hooks` of their config), then a trusted
    /// project's: `.spindle/config.json`, `.claude/settings.json` and
    /// `.claude/settings.local.json`. An untrusted project's are named
    /// in `problems` and never run.
    pub fn load(user: Option<&Value>, cwd: &Path, trusted: bool) -> Hooks {
        let mut hooks = Hooks::default();
        if let Some(value) = user {
            hooks.read(value, "your config");
        }
        // The project's settings are its root's, from any of its folders.
        let cwd = &crate::config::project::root(cwd);
        for (path, words) in [
            (
                cwd.join(".spindle").join("config.json"),
                ".spindle/config.json",
            ),
            (
                cwd.join(".claude").join("settings.json"),
                ".claude/settings.json",
            ),
            (
                cwd.join(".claude").join("settings.local.json"),
                ".claude/settings.local.json",
            ),
        ] {
            hooks.read_project(&path, words, cwd, trusted);
        }
        hooks
    }

    fn read_project(&mut self, path: &Path, words: &str, cwd: &Path, trusted: bool) {
        let origin = format!("the project's {words}");
        let bytes = match crate::tools::shipped::read(path, cwd, SETTINGS_CAP) {
            Ok(Some(bytes)) => bytes,
            Ok(None) => return,
            Err(why) => {
                self.problems
                    .push(format!("{origin} is not read: {}", why.reason()));
                return;
            }
        };
        let value: Value = match serde_json::from_slice(&bytes) {
            Ok(value) => value,
            Err(error) => {
                // Only a file that is there to give hooks counts as broken.
                if String::from_utf8_lossy(&bytes).contains("\"hooks\"") {
                    self.problems.push(format!(
                        "{origin} is not valid JSON ({error}); its hooks do not run"
                    ));
                }
                return;
            }
        };
        let Some(section) = value.get("hooks") else {
            return;
        };
        if !trusted {
            self.problems.push(format!(
                "{origin} has hooks; they do not run because the project is not trusted (spindle trust)"
            ));
            return;
        }
        self.read(section, &origin);
    }

    /// Reads one `hooks` object: `{EVENT: [{matcher, hooks: [{type:
    /// "command", command, timeout}]}]}`.
    fn read(&mut self, section: &Value, origin: &str) {
        let Some(events) = section.as_object() else {
            self.problems
                .push(format!("{origin}: hooks must be an object of events"));
            return;
        };
        for (name, groups) in events {
            let Some(event) = EVENTS.iter().find(|(n, _)| n == name).map(|(_, e)| *e) else {
                self.problems.push(format!(
                    "{origin}: {name:?} is not an event Spindle runs hooks at (it runs {})",
                    EVENTS.map(|(n, _)| n).join(", ")
                ));
                continue;
            };
            for (at, group) in groups.as_array().into_iter().flatten().enumerate() {
                let matcher = group
                    .get("matcher")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_string();
                let Some(entries) = group.get("hooks").and_then(Value::as_array) else {
                    self.problems
                        .push(format!("{origin}: {name}[{at}] has no \"hooks\" list"));
                    continue;
                };
                for entry in entries {
                    self.read_entry(entry, event, &matcher, origin, name);
                }
            }
            if !groups.is_array() {
                self.problems
                    .push(format!("{origin}: {name} must be a list of matcher groups"));
            }
        }
    }

    fn read_entry(&mut self, entry: &Value, event: Event, matcher: &str, origin: &str, name: &str) {
        let kind = entry
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or("command");
        let command = entry.get("command").and_then(Value::as_str).unwrap_or("");
        if kind != "command" || command.trim().is_empty() {
            self.problems.push(format!(
                "{origin}: a {name} hook of type {kind:?} is skipped (only \"command\" hooks with a command run)"
            ));
            return;
        }
        if self.list.len() >= HOOKS_MAX {
            self.problems.push(format!(
                "{origin}: more than {HOOKS_MAX} hooks; the rest are skipped"
            ));
            return;
        }
        let timeout = entry
            .get("timeout")
            .and_then(Value::as_f64)
            .filter(|seconds| *seconds > 0.0)
            .map(|seconds| Duration::from_secs_f64(seconds.min(MAX_TIMEOUT.as_secs_f64())))
            .unwrap_or(DEFAULT_TIMEOUT);
        // What runs before a question or at the end waits briefly.
        let timeout = match event {
            Event::Notification | Event::SessionEnd => timeout.min(BRIEF_TIMEOUT),
            _ => timeout,
        };
        self.list.push(Hook {
            event,
            matcher: matcher.to_string(),
            command: command.to_string(),
            timeout,
            origin: origin.to_string(),
        });
    }

    /// The hooks of `event` whose matcher takes `subject` (a tool call's
    /// names, a session start's source, a compaction's trigger).
    pub fn matching(&self, event: Event, subject: &Subject) -> Vec<&Hook> {
        self.list
            .iter()
            .filter(|hook| hook.event == event && subject.matches(&hook.matcher))
            .collect()
    }

    pub fn any(&self, event: Event) -> bool {
        self.list.iter().any(|hook| hook.event == event)
    }

    /// `/hooks` and `spindle doctor`: each hook in force and where it came
    /// from, and the problems.
    pub fn report(&self) -> String {
        let mut out = String::new();
        if self.list.is_empty() {
            out.push_str("No hooks are in force. Hooks are read from the \"hooks\" of your config and, in a trusted project, of .spindle/config.json, .claude/settings.json and .claude/settings.local.json.");
        } else {
            out.push_str("Hooks in force, in the order they run:\n");
            for hook in &self.list {
                out.push_str(&format!("- {}\n", hook.describe()));
            }
        }
        if !self.problems.is_empty() {
            out.push_str("\nLeft out:\n");
            for problem in &self.problems {
                out.push_str(&format!("- {}\n", crate::util::visible(problem, false)));
            }
        }
        out.trim_end().to_string()
    }
}

impl Hook {
    pub fn describe(&self) -> String {
        let matcher = match self.matcher.as_str() {
            "" | "*" => String::new(),
            other => format!(" [{other}]"),
        };
        let command: String = self.command.chars().take(120).collect();
        crate::util::visible(
            &format!(
                "{}{matcher}: {command} (from {}, {} s at most)",
                self.event.name(),
                self.origin,
                self.timeout.as_secs()
            ),
            false,
        )
    }
}

/// What a hook's matcher is compared with.
pub enum Subject<'a> {
    /// Events without a matcher.
    None,
    /// A tool call: Spindle's name, the name hooks are told, and whether
    /// it changes files.
    Tool {
        spindle: &'a str,
        shown: &'a str,
        edits: bool,
    },
    /// A session start's source or a compaction's trigger.
    Word(&'a str),
}

impl Subject<'_> {
    /// Claude Code's matchers: `|`-separated alternatives, `*` or empty
    /// for all, `.*` (or `*`) inside one for any text. A tool call is
    /// taken by its own name, the name hooks are told (`Bash`, `Read`,
    /// `mcp__server__tool`, …), and any of `Edit`, `Write`, `MultiEdit`
    /// when it changes files.
    fn matches(&self, matcher: &str) -> bool {
        let matcher = matcher.trim();
        if matcher.is_empty() || matcher == "*" || matches!(self, Subject::None) {
            return true;
        }
        matcher
            .split('|')
            .map(str::trim)
            .any(|alternative| match self {
                Subject::None => true,
                Subject::Word(word) => wildcard(alternative, word),
                Subject::Tool {
                    spindle,
                    shown,
                    edits,
                } => {
                    wildcard(alternative, spindle)
                        || wildcard(alternative, shown)
                        || (*edits && matches!(alternative, "Edit" | "Write" | "MultiEdit"))
                }
            })
    }
}

/// `pattern` matches all of `text`, where `.*` and `*` stand for any run
/// of characters (and a leading `^`, a trailing `$` are dropped).
fn wildcard(pattern: &str, text: &str) -> bool {
    let pattern = pattern.trim_start_matches('^').trim_end_matches('$');
    let pattern = pattern.replace(".*", "*");
    let mut parts = pattern.split('*');
    let first = parts.next().unwrap_or("");
    let Some(mut rest) = text.strip_prefix(first) else {
        return false;
    };
    let parts: Vec<&str> = parts.collect();
    if parts.is_empty() {
        return rest.is_empty();
    }
    for (at, part) in parts.iter().enumerate() {
        if at == parts.len() - 1 {
            return rest.ends_with(part);
        }
        match rest.find(part) {
            Some(found) => rest = &rest[found + part.len()..],
            None => return false,
        }
    }
    true
}

/// The name a tool call is given to hooks: Claude Code's for the tools it
/// has too, `mcp__server__tool` for an MCP server's, else Spindle's.
pub fn shown_name(spindle: &str, mcp: Option<(&str, &str)>) -> String {
    if let Some((server, tool)) = mcp {
        return format!("mcp__{server}__{tool}");
    }
    let claude = match spindle {
        "run_command" => "Bash",
        "read_file" => "Read",
        "write_file" => "Write",
        "edit_file" => "Edit",
        "apply_patch" => "MultiEdit",
        "glob" => "Glob",
        "search" => "Grep",
        "list_directory" => "LS",
        "fetch_url" => "WebFetch",
        "todo_write" => "TodoWrite",
        "task" => "Task",
        "skill" => "Skill",
        "exit_plan" => "ExitPlanMode",
        other => other,
    };
    claude.to_string()
}

/// Whether a built-in tool changes files.
pub fn edits(spindle: &str) -> bool {
    matches!(
        spindle,
        "write_file" | "edit_file" | "apply_patch" | "delete_file" | "move_file"
    )
}

/// A tool call's input as hooks get it: Spindle's arguments, with
/// `file_path` (absolute) beside a `path`, and `command` as it is.
pub fn tool_input(arguments: &Value, root: &Path) -> Value {
    let mut input = match arguments {
        Value::Object(_) => arguments.clone(),
        other => json!({ "arguments": other }),
    };
    if let Some(path) = input.get("path").and_then(Value::as_str) {
        let absolute = crate::tools::paths::resolve(root, path).path;
        input["file_path"] = json!(absolute.display().to_string());
    }
    input
}

/// How one run of a hook ended.
#[derive(Debug, Clone, Default)]
pub struct Outcome {
    /// `None` when it did not exit by itself (timed out, killed, not
    /// started).
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
    /// Why it did not finish: "timed out after 60 s", "cannot start: …".
    pub failure: Option<String>,
}

/// What the hooks of one event decided, together.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Verdict {
    /// Blocked (exit 2, `decision: "block"`, `permissionDecision:
    /// "deny"`): the reason, for the model or the user.
    pub block: Option<String>,
    /// `permissionDecision: "ask"`: the user is asked even where the
    /// policy would not ask.
    pub ask: bool,
    /// Context for the model (`additionalContext`, or the plain stdout of
    /// a prompt or session start hook).
    pub context: Vec<String>,
    /// For the user: failures, `systemMessage`, a non-blocking event's
    /// exit 2.
    pub notes: Vec<String>,
}

impl Verdict {
    /// Adds what `hook` answered with `outcome`.
    pub fn take(&mut self, hook: &Hook, outcome: &Outcome) {
        let event = hook.event;
        let blocking = matches!(
            event,
            Event::PreToolUse | Event::PostToolUse | Event::UserPromptSubmit | Event::Stop
        );
        let stderr = outcome.stderr.trim();
        let short = |text: &str| -> String { text.chars().take(2000).collect() };
        if let Some(failure) = &outcome.failure {
            self.notes.push(format!(
                "The {} hook `{}` {failure}; the session goes on.",
                event.name(),
                short(&hook.command)
            ));
            return;
        }
        match outcome.code {
            Some(0) => self.take_stdout(event, outcome.stdout.trim()),
            Some(2) if blocking => {
                let reason = if stderr.is_empty() {
                    format!(
                        "the {} hook `{}` said no",
                        event.name(),
                        short(&hook.command)
                    )
                } else {
                    short(stderr)
                };
                self.block_with(reason);
            }
            code => self.notes.push(format!(
                "The {} hook `{}` failed (exit {}){}",
                event.name(),
                short(&hook.command),
                code.map_or("?".to_string(), |c| c.to_string()),
                if stderr.is_empty() {
                    String::new()
                } else {
                    format!(": {}", short(stderr))
                }
            )),
        }
    }

    fn block_with(&mut self, reason: String) {
        match &mut self.block {
            Some(reasons) => {
                reasons.push('\n');
                reasons.push_str(&reason);
            }
            None => self.block = Some(reason),
        }
    }

    fn take_stdout(&mut self, event: Event, stdout: &str) {
        let short = |text: &str| -> String { text.chars().take(8000).collect() };
        let Some(answer) = stdout
            .starts_with('{')
            .then(|| serde_json::from_str::<Value>(stdout).ok())
            .flatten()
        else {
            if !stdout.is_empty() && matches!(event, Event::UserPromptSubmit | Event::SessionStart)
            {
                self.context.push(short(stdout));
            }
            return;
        };
        let text = |value: &Value, key: &str| value.get(key).and_then(Value::as_str).map(short);
        let specific = answer
            .get("hookSpecificOutput")
            .cloned()
            .unwrap_or_default();
        if let Some(message) = text(&answer, "systemMessage") {
            self.notes.push(message);
        }
        if let Some(context) = text(&specific, "additionalContext") {
            self.context.push(context);
        }
        let reason = text(&specific, "permissionDecisionReason")
            .or_else(|| text(&answer, "reason"))
            .or_else(|| text(&answer, "stopReason"));
        let reason = || {
            reason
                .clone()
                .unwrap_or_else(|| format!("a {} hook said no", event.name()))
        };
        let blocks = matches!(
            event,
            Event::PreToolUse | Event::PostToolUse | Event::UserPromptSubmit | Event::Stop
        );
        let decision = text(&specific, "permissionDecision").or_else(|| text(&answer, "decision"));
        match decision.as_deref() {
            Some("block" | "deny") if blocks => self.block_with(reason()),
            Some("ask") if event == Event::PreToolUse => self.ask = true,
            _ => {}
        }
        // `continue: false` stops what the event is about.
        if answer.get("continue") == Some(&Value::Bool(false)) && blocks {
            self.block_with(reason());
        }
    }
}

/// The JSON every hook gets on stdin: the session, the folder, the event
/// and the policy, with `fields` (the event's own) on top.
pub fn input(event: Event, session_id: &str, cwd: &Path, policy: &str, fields: Value) -> Value {
    let mut input = json!({
        "session_id": session_id,
        "transcript_path": Value::Null,
        "cwd": cwd.display().to_string(),
        "hook_event_name": event.name(),
        "permission_mode": policy,
    });
    if let (Value::Object(all), Value::Object(extra)) = (&mut input, fields) {
        all.extend(extra);
    }
    input
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hook(event: Event, matcher: &str) -> Hook {
        Hook {
            event,
            matcher: matcher.into(),
            command: "check".into(),
            timeout: DEFAULT_TIMEOUT,
            origin: "test".into(),
        }
    }

    fn outcome(code: i32, stdout: &str, stderr: &str) -> Outcome {
        Outcome {
            code: Some(code),
            stdout: stdout.into(),
            stderr: stderr.into(),
            failure: None,
        }
    }

    #[test]
    fn matchers_take_claude_names_spindle_names_and_the_edit_group() {
        let bash = Subject::Tool {
            spindle: "run_command",
            shown: "Bash",
            edits: false,
        };
        let patch = Subject::Tool {
            spindle: "apply_patch",
            shown: "MultiEdit",
            edits: true,
        };
        let delete = Subject::Tool {
            spindle: "delete_file",
            shown: "delete_file",
            edits: true,
        };
        let mcp = Subject::Tool {
            spindle: "memory__store",
            shown: "mcp__memory__store",
            edits: false,
        };
        assert!(bash.matches("Bash") && bash.matches("run_command") && bash.matches(""));
        assert!(bash.matches("*") && bash.matches("Edit|Bash") && !bash.matches("Edit|Write"));
        assert!(patch.matches("Edit|Write") && delete.matches("Write") && !delete.matches("Bash"));
        assert!(mcp.matches("mcp__memory__.*") && mcp.matches("mcp__.*__store"));
        assert!(!mcp.matches("mcp__github__.*") && !bash.matches("Bas"));
        assert!(Subject::Word("startup").matches("startup|resume"));
        assert!(!Subject::Word("clear").matches("startup"));
    }

    #[test]
    fn exit_codes_and_json_answers_decide() {
        let pre = hook(Event::PreToolUse, "Bash");
        let mut verdict = Verdict::default();
        verdict.take(&pre, &outcome(2, "", "rm is not allowed here\n"));
        assert_eq!(verdict.block.as_deref(), Some("rm is not allowed here"));

        let mut verdict = Verdict::default();
        verdict.take(&pre, &outcome(1, "", "oops"));
        assert_eq!(verdict.block, None);
        assert!(
            verdict.notes[0].contains("failed (exit 1): oops"),
            "{:?}",
            verdict.notes
        );

        let mut verdict = Verdict::default();
        let deny = r#"{"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "deny", "permissionDecisionReason": "no network"}}"#;
        verdict.take(&pre, &outcome(0, deny, ""));
        assert_eq!(verdict.block.as_deref(), Some("no network"));

        let mut verdict = Verdict::default();
        let ask =
            r#"{"hookSpecificOutput": {"permissionDecision": "ask"}, "systemMessage": "careful"}"#;
        verdict.take(&pre, &outcome(0, ask, ""));
        assert!(verdict.ask && verdict.block.is_none());
        assert_eq!(verdict.notes, ["careful"]);

        let mut verdict = Verdict::default();
        let allow = r#"{"hookSpecificOutput": {"permissionDecision": "allow", "additionalContext": "ctx"}}"#;
        verdict.take(&pre, &outcome(0, allow, ""));
        assert_eq!(
            verdict,
            Verdict {
                context: vec!["ctx".into()],
                ..Verdict::default()
            }
        );

        let prompt = hook(Event::UserPromptSubmit, "");
        let mut verdict = Verdict::default();
        verdict.take(&prompt, &outcome(0, "Today is a holiday.\n", ""));
        assert_eq!(verdict.context, ["Today is a holiday."]);
        verdict.take(
            &prompt,
            &outcome(0, r#"{"decision": "block", "reason": "secret"}"#, ""),
        );
        assert_eq!(verdict.block.as_deref(), Some("secret"));

        // A session end cannot block: its exit 2 is a note.
        let end = hook(Event::SessionEnd, "");
        let mut verdict = Verdict::default();
        verdict.take(&end, &outcome(2, "", "nope"));
        assert!(verdict.block.is_none() && verdict.notes.len() == 1);

        let mut verdict = Verdict::default();
        let timed_out = Outcome {
            failure: Some("timed out after 1 s".into()),
            ..Outcome::default()
        };
        verdict.take(&pre, &timed_out);
        assert!(verdict.block.is_none() && verdict.notes[0].contains("timed out"));
    }

    #[test]
    fn settings_are_read_with_their_problems_named() {
        let mut hooks = Hooks::default();
        hooks.read(
            &json!({
                "PreToolUse": [{"matcher": "Bash", "hooks": [
                    {"type": "command", "command": "guard.sh", "timeout": 5},
                    {"type": "prompt", "prompt": "judge it"}
                ]}],
                "Stop": [{"hooks": [{"type": "command", "command": "check.sh", "timeout": 99999}]}],
                "SubagentStop": [],
                "PostToolUse": [{"matcher": "Edit"}]
            }),
            "your config",
        );
        assert_eq!(hooks.list.len(), 2, "{hooks:?}");
        assert_eq!(hooks.list[0].timeout, Duration::from_secs(5));
        assert_eq!(hooks.list[1].timeout, MAX_TIMEOUT);
        let problems = hooks.problems.join("\n");
        assert!(
            problems.contains("\"SubagentStop\" is not an event"),
            "{problems}"
        );
        assert!(
            problems.contains("type \"prompt\" is skipped"),
            "{problems}"
        );
        assert!(
            problems.contains("PostToolUse[0] has no \"hooks\" list"),
            "{problems}"
        );
        let report = hooks.report();
        assert!(
            report.contains("PreToolUse [Bash]: guard.sh (from your config, 5 s at most)"),
            "{report}"
        );
    }

    #[test]
    fn tool_input_names_the_file_as_claude_hooks_read_it() {
        let input = tool_input(
            &json!({"path": "src/a.rs", "content": "x"}),
            Path::new("/ws"),
        );
        assert!(input["file_path"].as_str().unwrap().ends_with("a.rs"));
        assert_eq!(input["content"], "x");
        assert_eq!(shown_name("run_command", None), "Bash");
        assert_eq!(shown_name("x__y", Some(("srv", "y"))), "mcp__srv__y");
        assert_eq!(shown_name("delete_file", None), "delete_file");
    }
}

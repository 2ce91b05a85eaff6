//! Slash commands through the real binary: `available_commands_update`
//! after `session/new`, `session/load` and `session/resume` (the built-ins
//! and custom commands from `<cwd>/.spindle/commands/*.md` and
//! `$SPINDLE_HOME/commands/*.md`), each built-in (`/help`, `/cost`,
//! `/model`, `/mode`, `/clear`, `/compact`, `/init`), a custom command
//! with `$ARGUMENTS`, and an unknown command going to the model as text.
//!
//! The model is the fake Chat Completions server, named in a config file
//! with two models: `fake/alpha` (no price) and `fake/beta` (priced).

use crate::support::client::no_requests;
use crate::support::fake_openai::chat_text;
use crate::support::prelude::{ok_with, WAIT};
use crate::support::{run_prompt, temp_dir, write_file, Agent, FakeServer, Reply, Turn};
use serde_json::{json, Value};
use std::fs;
use std::path::PathBuf;
use std::thread;
use std::time::{Duration, Instant};

const BUILTINS: [&str; 15] = [
    "init", "compact", "model", "mode", "clear", "cost", "undo", "rewind", "redo", "reload",
    "allow", "memory", "skills", "hooks", "help",
];

const REVIEW: &str = "---\ndescription: Review a file carefully\nargument-hint: <path>\n---\nReview $ARGUMENTS and list every problem.\n";

struct Bench {
    model: FakeServer,
    base: PathBuf,
    ws: PathBuf,
    config: PathBuf,
    db: PathBuf,
}

impl Bench {
    fn new(name: &str) -> Bench {
        let model = FakeServer::start();
        let base =
            spindle::os::canonical(temp_dir(name)).expect("cannot canonicalize the temp dir");
        let ws = base.join("ws");
        fs::create_dir_all(&ws).expect("cannot create the workspace");
        let config = base.join("config.json");
        let text = json!({
            "providers": {"fake": {"kind": "openai", "base_url": model.base_url(),
                                   "requires_key": false}},
            "models": {
                "fake/alpha": {"context_window": 64000},
                "fake/beta": {"context_window": 32000,
                              "price": {"input": 2.0, "output": 8.0, "currency": "EUR"}},
            },
            "defaults": {"model": "fake/alpha"},
        });
        fs::write(&config, serde_json::to_string_pretty(&text).unwrap())
            .expect("cannot write the config");
        write_file(&ws, ".spindle/commands/review.md", REVIEW);
        write_file(
            &ws,
            ".spindle/commands/plain.md",
            "# Summarise the diff\nSummarise the current diff in three lines.\n",
        );
        Bench {
            model,
            db: base.join("spindle.db"),
            base,
            ws,
            config,
        }
    }

    /// `spindle acp --config … --db … EXTRA…`, initialized, with user
    /// commands in its `SPINDLE_HOME`.
    fn agent(&self, extra: &[&str]) -> Agent {
        let config = self.config.to_str().expect("UTF-8 path");
        let db = self.db.to_str().expect("UTF-8 path");
        let mut args = vec!["acp", "--config", config, "--db", db];
        args.extend_from_slice(extra);
        // A home folder of its own: no ~/.claude of the machine's.
        let home = self.base.join("user");
        fs::create_dir_all(&home).expect("cannot create the home folder");
        let home = home.to_str().expect("UTF-8 path");
        let mut agent = Agent::spawn(&args, &[("HOME", home), ("USERPROFILE", home)]);
        write_file(
            agent.home(),
            "commands/standup.md",
            "---\ndescription: Write my standup note\n---\nWrite a standup note about $ARGUMENTS.\n",
        );
        agent.initialize();
        agent
    }

    fn cwd(&self) -> &str {
        self.ws.to_str().expect("UTF-8 path")
    }

    fn requests(&self) -> usize {
        self.model.requests().len()
    }

    fn last_body(&self) -> Value {
        self.model
            .requests()
            .pop()
            .expect("the model got no request")
            .body
    }
}

impl Drop for Bench {
    fn drop(&mut self) {
        if thread::panicking() {
            eprintln!("test directory kept: {}", self.base.display());
        } else {
            let _ = fs::remove_dir_all(&self.base);
        }
    }
}

fn say(text: &str) -> Reply {
    Reply::Sse(chat_text(&[text]))
}

fn is_update(message: &Value, session: &str, kind: &str) -> bool {
    message["method"] == "session/update"
        && message["params"]["sessionId"] == session
        && message["params"]["update"]["sessionUpdate"] == kind
}

/// Waits for the session's next `available_commands_update` and returns
/// its commands; panics if it does not come within `WAIT`.
fn next_commands(agent: &mut Agent, session: &str) -> Vec<Value> {
    let deadline = Instant::now() + WAIT;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let message = agent
            .recv(left)
            .unwrap_or_else(|| panic!("no available_commands_update for {session}"));
        if is_update(&message, session, "available_commands_update") {
            return message["params"]["update"]["availableCommands"]
                .as_array()
                .cloned()
                .unwrap_or_default();
        }
    }
}

/// Opens a session; returns its id and the commands announced after the
/// answer (none may come before it: the client learns the id from it).
fn open(agent: &mut Agent, bench: &Bench) -> (String, Vec<Value>) {
    let (result, before) = ok_with(
        agent,
        "session/new",
        json!({"cwd": bench.cwd(), "mcpServers": []}),
    );
    let session = result["sessionId"].as_str().unwrap().to_string();
    assert!(
        !before
            .iter()
            .any(|m| is_update(m, &session, "available_commands_update")),
        "an update before the session's id is known: {before:?}"
    );
    let commands = next_commands(agent, &session);
    (session, commands)
}

fn names(commands: &[Value]) -> Vec<String> {
    commands
        .iter()
        .map(|c| c["name"].as_str().unwrap_or_default().to_string())
        .collect()
}

fn command<'a>(commands: &'a [Value], name: &str) -> &'a Value {
    commands
        .iter()
        .find(|c| c["name"] == name)
        .unwrap_or_else(|| panic!("no command {name} in {:?}", names(commands)))
}

fn assert_full_list(commands: &[Value]) {
    let listed = names(commands);
    assert_eq!(&listed[..BUILTINS.len()], BUILTINS, "{listed:?}");
    for custom in ["review", "plain", "standup"] {
        assert_eq!(
            listed.iter().filter(|n| *n == custom).count(),
            1,
            "{custom} once in {listed:?}"
        );
    }
    let review = command(commands, "review");
    assert_eq!(review["description"], "Review a file carefully");
    assert_eq!(review["input"], json!({"hint": "<path>"}));
    let plain = command(commands, "plain");
    assert_eq!(plain["description"], "Summarise the diff");
    assert!(plain.get("input").is_none(), "{plain}");
    assert_eq!(
        command(commands, "standup")["description"],
        "Write my standup note"
    );
    assert_eq!(
        command(commands, "model")["input"],
        json!({"hint": "provider/model"})
    );
}

fn prompt(agent: &mut Agent, session: &str, text: &str) -> Turn {
    let turn = run_prompt(agent, session, text, WAIT, no_requests);
    assert_eq!(turn.stop_reason(), "end_turn", "{text:?}: {}", turn.dump());
    turn
}

/// The messages of a request as (role, text) pairs, system prompt left out.
fn conversation(body: &Value) -> Vec<(String, String)> {
    body["messages"]
        .as_array()
        .map(|messages| {
            messages
                .iter()
                .filter(|m| m["role"] != "system")
                .map(|m| {
                    let text = match &m["content"] {
                        Value::String(text) => text.clone(),
                        Value::Null => String::new(),
                        other => other.to_string(),
                    };
                    (m["role"].as_str().unwrap_or_default().to_string(), text)
                })
                .collect()
        })
        .unwrap_or_default()
}

fn last_user_text(body: &Value) -> String {
    conversation(body)
        .into_iter()
        .rev()
        .find(|(role, _)| role == "user")
        .map(|(_, text)| text)
        .unwrap_or_else(|| panic!("no user message in {body}"))
}

fn pairs(list: &[(&str, &str)]) -> Vec<(String, String)> {
    list.iter()
        .map(|(role, text)| (role.to_string(), text.to_string()))
        .collect()
}

fn option_value(options: &Value, id: &str) -> Value {
    options
        .as_array()
        .and_then(|list| list.iter().find(|o| o["id"] == id))
        .map(|o| o["currentValue"].clone())
        .unwrap_or(Value::Null)
}

// ---------------------------------------------------------------------------

#[test]
fn commands_are_announced_after_new_load_and_resume() {
    let bench = Bench::new("commands-announce");
    let mut agent = bench.agent(&[]);
    let (session, commands) = open(&mut agent, &bench);
    assert_full_list(&commands);

    // The same process: load and resume of a live session.
    let params = json!({"sessionId": session, "cwd": bench.cwd(), "mcpServers": []});
    let (_, before) = ok_with(&mut agent, "session/load", params.clone());
    assert!(!before
        .iter()
        .any(|m| is_update(m, &session, "available_commands_update")));
    assert_full_list(&next_commands(&mut agent, &session));
    ok_with(&mut agent, "session/resume", params.clone());
    assert_full_list(&next_commands(&mut agent, &session));
    agent.close_stdin();
    agent.wait_exit(Duration::from_secs(10));

    // Another process: load and resume from the database.
    let mut agent = bench.agent(&[]);
    let (_, before) = ok_with(&mut agent, "session/load", params.clone());
    assert!(!before
        .iter()
        .any(|m| is_update(m, &session, "available_commands_update")));
    assert_full_list(&next_commands(&mut agent, &session));
    agent.close_stdin();
    agent.wait_exit(Duration::from_secs(10));
    let mut agent = bench.agent(&[]);
    ok_with(&mut agent, "session/resume", params);
    assert_full_list(&next_commands(&mut agent, &session));
}

#[test]
fn help_lists_the_commands_without_calling_the_model() {
    let bench = Bench::new("commands-help");
    let mut agent = bench.agent(&[]);
    let (session, _) = open(&mut agent, &bench);
    let turn = prompt(&mut agent, &session, "/help");
    let text = turn.text();
    for name in BUILTINS.iter().chain(&["review", "plain", "standup"]) {
        assert!(text.contains(&format!("/{name}")), "/{name} in {text:?}");
    }
    assert!(text.contains("<path>"), "hints are shown: {text:?}");
    assert_eq!(bench.requests(), 0, "/help needs no model");
}

/// `/memory` names each instruction file in force with where it came
/// from, imports included, and one left out with why; no model call.
#[test]
fn memory_lists_the_instruction_files_and_their_imports() {
    let bench = Bench::new("commands-memory");
    std::fs::create_dir_all(bench.ws.join("docs")).unwrap();
    std::fs::write(
        bench.ws.join("CLAUDE.md"),
        "Follow @docs/style.md and @../secret.md.\n",
    )
    .unwrap();
    std::fs::write(bench.ws.join("docs/style.md"), "Tabs, not spaces.\n").unwrap();
    std::fs::write(
        bench.ws.parent().unwrap().join("secret.md"),
        "not for the model",
    )
    .unwrap();
    let mut agent = bench.agent(&[]);
    let (session, _) = open(&mut agent, &bench);
    let text = prompt(&mut agent, &session, "/memory").text();
    // Paths end as named here; their start is the system's form of the
    // workspace.
    let claude = "- the project's CLAUDE.md: ";
    let style = "- @docs/style.md, imported by the project's CLAUDE.md: ";
    // (The reply is Markdown: a parenthesis or a backslash in it is
    // escaped.)
    let sep = if cfg!(windows) { "\\\\" } else { "/" };
    assert!(
        text.contains(&format!("{sep}ws{sep}CLAUDE.md \\(40 bytes\\)")),
        "{text}"
    );
    assert!(
        text.contains(&format!("{sep}docs{sep}style.md \\(17 bytes\\)")),
        "{text}"
    );
    assert!(text.contains(claude) && text.contains(style), "{text}");
    assert!(text.find(claude) < text.find(style), "{text}");
    assert!(
        text.contains("Not imported: @../secret.md from the project's CLAUDE.md: it is outside the workspace."),
        "{text}"
    );
    assert!(!text.contains("not for the model"), "{text}");
    // Each file one may edit is a link the editor opens.
    let claude_uri = spindle::os::paths::to_file_uri(
        &bench.ws.join("CLAUDE.md").to_string_lossy(),
        spindle::os::paths::NATIVE,
    );
    assert!(
        text.contains(&format!("CLAUDE.md]({claude_uri})")),
        "{text}"
    );
    assert!(text.contains("AGENTS.md](file:"), "the global file: {text}");
    assert_eq!(bench.requests(), 0, "/memory needs no model");
}

/// A folder of the repository named like Markdown (a link of its own, a
/// bracket, code, emphasis, HTML): `/memory`'s list and links show the
/// name as it is, and each link still ends where it should, at the
/// file's percent-encoded address.
#[test]
#[cfg_attr(windows, ignore = "Windows refuses <, > and * in file names")]
fn memory_shows_a_markdown_like_folder_name_as_text() {
    let bench = Bench::new("commands-memory-markdown");
    fs::create_dir_all(bench.ws.join(".git")).unwrap();
    let name = "x](https:evil.example) [y] `z` *v* _w_ <b>!";
    let folder = bench.ws.join(name);
    write_file(&folder, "CLAUDE.md", "Be brief.\n");
    let mut agent = bench.agent(&[]);
    let (result, _) = ok_with(
        &mut agent,
        "session/new",
        json!({"cwd": folder.to_str().unwrap(), "mcpServers": []}),
    );
    let session = result["sessionId"].as_str().unwrap().to_string();
    let text = prompt(&mut agent, &session, "/memory").text();
    let escaped = "x\\]\\(https:evil.example\\) \\[y\\] \\`z\\` \\*v\\* \\_w\\_ \\<b\\>\\!";
    let uri = spindle::os::paths::to_file_uri(
        &folder.join("CLAUDE.md").to_string_lossy(),
        spindle::os::paths::NATIVE,
    );
    assert!(!uri.contains(['(', ')', ' ']), "{uri}");
    assert!(
        text.contains(&format!("{escaped}/CLAUDE.md]({uri})")),
        "the link: {text}"
    );
    // In the list of files in force too.
    assert!(
        text.contains(&format!("{escaped}/CLAUDE.md \\(9 bytes\\)")),
        "{text}"
    );
    // Every link Markdown would see (a `](` not escaped) is one of ours.
    let links: Vec<&str> = text
        .match_indices("](")
        .filter(|(at, _)| !text[..*at].ends_with('\\'))
        .map(|(at, _)| &text[at + 2..])
        .collect();
    assert_eq!(links.len(), 2, "the global file and the folder's: {text}");
    assert!(links.iter().all(|rest| rest.starts_with("file:")), "{text}");
    assert_eq!(bench.requests(), 0, "/memory needs no model");
}

#[test]
fn cost_shows_the_tokens_and_the_cost_so_far() {
    let bench = Bench::new("commands-cost");
    let mut agent = bench.agent(&["--model", "fake/beta"]);
    let (session, _) = open(&mut agent, &bench);
    bench.model.push(say("Hello there."));
    prompt(&mut agent, &session, "hi");
    let turn = prompt(&mut agent, &session, "/cost");
    assert_eq!(bench.requests(), 1, "/cost needs no model");
    let text = turn.text();
    assert!(text.contains("10 input"), "{text:?}");
    assert!(text.contains("1 output"), "{text:?}");
    assert!(
        text.contains("EUR"),
        "a priced model shows its cost: {text:?}"
    );

    let mut agent = bench.agent(&["--model", "fake/alpha"]);
    let (session, _) = open(&mut agent, &bench);
    let turn = prompt(&mut agent, &session, "/cost");
    let text = turn.text();
    assert!(text.contains("none (no model request yet)"), "{text:?}");
    assert!(!text.contains("0 input"), "{text:?}");
    assert!(!text.contains("EUR"), "{text:?}");
}

#[test]
fn model_switches_the_model_and_names_the_choices_when_unknown() {
    let bench = Bench::new("commands-model");
    let mut agent = bench.agent(&[]);
    let (session, _) = open(&mut agent, &bench);

    // Alone, it says the model in use and lists the choices.
    let turn = prompt(&mut agent, &session, "/model");
    let text = turn.text();
    assert!(
        text.contains("The choices are: ")
            && text.contains("fake/alpha")
            && text.contains("fake/beta"),
        "{text:?}"
    );

    let turn = prompt(&mut agent, &session, "/model fake/beta");
    assert_eq!(bench.requests(), 0);
    let updates = turn.updates();
    let change = updates
        .iter()
        .find(|u| u["sessionUpdate"] == "config_option_update")
        .unwrap_or_else(|| panic!("no config_option_update: {}", turn.dump()));
    assert_eq!(option_value(&change["configOptions"], "model"), "fake/beta");
    assert!(turn.text().contains("fake/beta"), "{}", turn.text());
    bench.model.push(say("Beta here."));
    prompt(&mut agent, &session, "who are you?");
    assert_eq!(bench.last_body()["model"], "beta");

    // The bare model name works too.
    let turn = prompt(&mut agent, &session, "/model alpha");
    assert!(turn.text().contains("fake/alpha"), "{}", turn.text());
    bench.model.push(say("Alpha here."));
    prompt(&mut agent, &session, "and now?");
    assert_eq!(bench.last_body()["model"], "alpha");

    let before = bench.requests();
    let turn = prompt(&mut agent, &session, "/model nope/none");
    assert_eq!(bench.requests(), before);
    let text = turn.text();
    assert!(
        text.contains("fake/alpha") && text.contains("fake/beta"),
        "the choices are named: {text:?}"
    );
    assert!(
        !turn
            .updates()
            .iter()
            .any(|u| u["sessionUpdate"] == "config_option_update"),
        "{}",
        turn.dump()
    );
    bench.model.push(say("Still alpha."));
    prompt(&mut agent, &session, "still?");
    assert_eq!(bench.last_body()["model"], "alpha");
}

#[test]
fn mode_plan_switches_the_mode_and_the_tools() {
    let bench = Bench::new("commands-mode");
    let mut agent = bench.agent(&[]);
    let (session, _) = open(&mut agent, &bench);
    let turn = prompt(&mut agent, &session, "/mode plan");
    assert_eq!(bench.requests(), 0);
    let updates = turn.updates();
    assert!(
        updates
            .iter()
            .any(|u| u["sessionUpdate"] == "current_mode_update" && u["currentModeId"] == "plan"),
        "{}",
        turn.dump()
    );
    let change = updates
        .iter()
        .find(|u| u["sessionUpdate"] == "config_option_update")
        .unwrap_or_else(|| panic!("no config_option_update: {}", turn.dump()));
    assert_eq!(option_value(&change["configOptions"], "mode"), "plan");

    bench.model.push(say("A plan."));
    prompt(&mut agent, &session, "plan the work");
    let tools: Vec<String> = bench.last_body()["tools"]
        .as_array()
        .map(|tools| {
            tools
                .iter()
                .filter_map(|t| t["function"]["name"].as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default();
    assert!(tools.iter().any(|t| t == "read_file"), "{tools:?}");
    for writer in ["write_file", "edit_file", "run_command"] {
        assert!(!tools.iter().any(|t| t == writer), "{writer} in {tools:?}");
    }

    let turn = prompt(&mut agent, &session, "/mode normal");
    assert!(turn
        .updates()
        .iter()
        .any(|u| u["sessionUpdate"] == "current_mode_update" && u["currentModeId"] == "normal"));
}

#[test]
fn clear_starts_a_fresh_context_and_the_transcript_keeps_the_past() {
    let bench = Bench::new("commands-clear");
    let mut agent = bench.agent(&[]);
    let (session, _) = open(&mut agent, &bench);
    bench.model.push(say("Noted: 4417."));
    prompt(&mut agent, &session, "remember the number 4417");
    let turn = prompt(&mut agent, &session, "/clear");
    assert_eq!(bench.requests(), 1, "/clear needs no model");
    assert!(!turn.text().is_empty());
    bench.model.push(say("I do not know."));
    prompt(&mut agent, &session, "what was the number?");
    assert_eq!(
        conversation(&bench.last_body()),
        pairs(&[("user", "what was the number?")]),
        "nothing from before /clear"
    );
    agent.close_stdin();
    agent.wait_exit(Duration::from_secs(10));

    let mut agent = bench.agent(&[]);
    let (_, replayed) = ok_with(
        &mut agent,
        "session/load",
        json!({"sessionId": session, "cwd": bench.cwd(), "mcpServers": []}),
    );
    let transcript: String = replayed
        .iter()
        .filter_map(|m| m["params"]["update"]["content"]["text"].as_str())
        .collect::<Vec<_>>()
        .join("|");
    for needle in ["remember the number 4417", "Noted: 4417.", "/clear"] {
        assert!(
            transcript.contains(needle),
            "{needle:?} in the transcript: {transcript}"
        );
    }
    bench.model.push(say("Still no idea."));
    prompt(&mut agent, &session, "really?");
    let after = conversation(&bench.last_body());
    assert!(
        !format!("{after:?}").contains("4417"),
        "a reloaded session stays cleared: {after:?}"
    );
}

#[test]
fn compact_replaces_the_conversation_with_the_model_summary() {
    let bench = Bench::new("commands-compact");
    let mut agent = bench.agent(&[]);
    let (session, _) = open(&mut agent, &bench);
    bench.model.push(say("Got it: marmalade."));
    prompt(&mut agent, &session, "the secret word is marmalade");

    bench
        .model
        .push(say("SUMMARY-7781: the user shared a word."));
    let turn = prompt(&mut agent, &session, "/compact");
    assert!(turn.text().contains("SUMMARY-7781"), "{}", turn.dump());
    let summarise = bench.last_body();
    let asked = conversation(&summarise);
    assert!(
        format!("{asked:?}").contains("marmalade"),
        "the summary request has the conversation: {asked:?}"
    );
    assert!(
        !last_user_text(&summarise).contains("/compact"),
        "{asked:?}"
    );

    bench.model.push(say("Go on."));
    prompt(&mut agent, &session, "next step");
    let after = format!("{:?}", conversation(&bench.last_body()));
    assert!(after.contains("SUMMARY-7781"), "{after}");
    assert!(!after.contains("marmalade"), "{after}");
    assert!(after.contains("next step"), "{after}");
    agent.close_stdin();
    agent.wait_exit(Duration::from_secs(10));

    let mut agent = bench.agent(&[]);
    ok_with(
        &mut agent,
        "session/load",
        json!({"sessionId": session, "cwd": bench.cwd(), "mcpServers": []}),
    );
    bench.model.push(say("Resumed."));
    prompt(&mut agent, &session, "after a reload");
    let reloaded = format!("{:?}", conversation(&bench.last_body()));
    assert!(reloaded.contains("SUMMARY-7781"), "{reloaded}");
    assert!(!reloaded.contains("marmalade"), "{reloaded}");
}

#[test]
fn init_asks_the_model_to_write_agents_md() {
    let bench = Bench::new("commands-init");
    let mut agent = bench.agent(&[]);
    let (session, _) = open(&mut agent, &bench);
    bench.model.push(say("Written."));
    prompt(&mut agent, &session, "/init");
    let asked = last_user_text(&bench.last_body());
    assert!(asked.contains("AGENTS.md"), "{asked:?}");
    assert!(!asked.starts_with("/init"), "{asked:?}");

    bench.model.push(say("Updated."));
    prompt(&mut agent, &session, "/init mention the fuzz tests");
    let asked = last_user_text(&bench.last_body());
    assert!(
        asked.contains("AGENTS.md") && asked.contains("mention the fuzz tests"),
        "{asked:?}"
    );
}

#[test]
fn custom_commands_send_their_body_with_the_arguments() {
    let bench = Bench::new("commands-custom");
    let mut agent = bench.agent(&[]);
    let (session, _) = open(&mut agent, &bench);
    bench.model.push(say("Reviewed."));
    prompt(&mut agent, &session, "/review src/lib.rs");
    assert_eq!(
        last_user_text(&bench.last_body()).trim(),
        "Review src/lib.rs and list every problem."
    );
    bench.model.push(say("Standup."));
    prompt(&mut agent, &session, "/standup the parser work");
    assert_eq!(
        last_user_text(&bench.last_body()).trim(),
        "Write a standup note about the parser work."
    );
    bench.model.push(say("Summary."));
    prompt(&mut agent, &session, "/plain");
    assert_eq!(
        last_user_text(&bench.last_body()).trim(),
        "# Summarise the diff\nSummarise the current diff in three lines."
    );
}

/// Claude Code's project command folder is read like `.spindle/commands/`
/// (which wins on a name both have).
#[test]
fn claude_code_project_commands_are_commands_too() {
    let bench = Bench::new("commands-claude");
    write_file(
        &bench.ws,
        ".claude/commands/fix-lint.md",
        "---\ndescription: Fix the lint warnings\n---\nFix every lint warning in $ARGUMENTS.\n",
    );
    write_file(&bench.ws, ".claude/commands/review.md", "Claude's review");
    let mut agent = bench.agent(&[]);
    let (session, commands) = open(&mut agent, &bench);
    assert_eq!(
        command(&commands, "fix-lint")["description"],
        "Fix the lint warnings"
    );
    assert_eq!(
        command(&commands, "review")["description"],
        "Review a file carefully"
    );
    bench.model.push(say("Fixed."));
    prompt(&mut agent, &session, "/fix-lint src/");
    assert_eq!(
        last_user_text(&bench.last_body()).trim(),
        "Fix every lint warning in src/."
    );
}

/// A project's command never takes a built-in's name nor the user's, in
/// any case of letters: `/compact` still compacts, `/standup` sends the
/// user's text, the editor sees the user's words, and `/skills` lists the
/// project's files as shadowed.
#[test]
fn a_projects_command_never_replaces_a_builtin_or_the_users() {
    let bench = Bench::new("commands-shadow");
    write_file(
        &bench.ws,
        ".claude/commands/compact.md",
        "---\ndescription: REPO-COMPACT-WORDS\n---\nREPO-COMPACT-TEXT\n",
    );
    write_file(&bench.ws, ".spindle/commands/Clear.md", "REPO-CLEAR-TEXT");
    write_file(
        &bench.ws,
        ".spindle/commands/standup.md",
        "---\ndescription: REPO-STANDUP-WORDS\n---\nREPO-STANDUP-TEXT\n",
    );
    let mut agent = bench.agent(&[]);
    let (session, commands) = open(&mut agent, &bench);
    let listed = names(&commands);
    assert_eq!(&listed[..BUILTINS.len()], BUILTINS, "{listed:?}");
    for name in ["compact", "clear", "standup"] {
        assert_eq!(
            listed
                .iter()
                .filter(|n| n.eq_ignore_ascii_case(name))
                .count(),
            1,
            "{listed:?}"
        );
    }
    assert!(!format!("{commands:?}").contains("REPO-"), "{commands:?}");
    assert_eq!(
        command(&commands, "standup")["description"],
        "Write my standup note"
    );

    bench.model.push(say("Noted."));
    prompt(&mut agent, &session, "the word is quince");
    bench.model.push(say("SUMMARY-4410"));
    let turn = prompt(&mut agent, &session, "/compact");
    assert!(turn.text().contains("SUMMARY-4410"), "{}", turn.dump());
    bench.model.push(say("Standup."));
    prompt(&mut agent, &session, "/standup the parser");
    let sent = last_user_text(&bench.last_body());
    assert!(
        sent.trim_end()
            .ends_with("Write a standup note about the parser."),
        "{sent}"
    );
    for request in bench.model.requests() {
        assert!(
            !request.body.to_string().contains("REPO-"),
            "a shadowed command reached the model"
        );
    }

    let text = prompt(&mut agent, &session, "/skills").text();
    assert!(text.contains("Shadowed"), "{text}");
    for (file, by) in [
        ("compact.md", "Spindle's built-in /compact"),
        ("Clear.md", "Spindle's built-in /clear"),
        ("standup.md", "your command"),
    ] {
        assert!(
            text.lines()
                .any(|line| line.contains(file) && line.contains(by)),
            "{file} not shadowed by {by}: {text}"
        );
    }
}

#[test]
fn an_unknown_command_goes_to_the_model_as_plain_text() {
    let bench = Bench::new("commands-unknown");
    let mut agent = bench.agent(&[]);
    let (session, _) = open(&mut agent, &bench);
    for text in ["/foo bar baz", "/src/main.rs looks odd"] {
        bench.model.push(say("Hm."));
        prompt(&mut agent, &session, text);
        assert_eq!(last_user_text(&bench.last_body()), text);
    }
}

/// A command Spindle answers itself adds nothing to what the model sees,
/// neither in this process nor after the session is loaded elsewhere.
#[test]
fn local_commands_leave_the_stored_conversation_alone() {
    let bench = Bench::new("commands-local");
    let mut agent = bench.agent(&[]);
    let (session, _) = open(&mut agent, &bench);
    bench.model.push(say("first answer"));
    prompt(&mut agent, &session, "first question");
    for command in ["/help", "/cost", "/model fake/alpha", "/mode normal"] {
        prompt(&mut agent, &session, command);
    }
    bench.model.push(say("second answer"));
    prompt(&mut agent, &session, "second question");
    let expected = pairs(&[
        ("user", "first question"),
        ("assistant", "first answer"),
        ("user", "second question"),
    ]);
    assert_eq!(conversation(&bench.last_body()), expected, "live");
    agent.close_stdin();
    agent.wait_exit(Duration::from_secs(10));

    let mut agent = bench.agent(&[]);
    ok_with(
        &mut agent,
        "session/load",
        json!({"sessionId": session, "cwd": bench.cwd(), "mcpServers": []}),
    );
    bench.model.push(say("third answer"));
    prompt(&mut agent, &session, "third question");
    let mut expected = expected;
    expected.extend(pairs(&[
        ("assistant", "second answer"),
        ("user", "third question"),
    ]));
    assert_eq!(
        conversation(&bench.last_body()),
        expected,
        "after loading the session in another process"
    );
}

/// `/mode` is described with all three modes, and `/mode goal` switches
/// to goal mode as the config option does.
#[test]
fn mode_names_and_takes_goal() {
    let bench = Bench::new("commands-mode-goal");
    let mut agent = bench.agent(&[]);
    let (session, commands) = open(&mut agent, &bench);
    let mode = command(&commands, "mode");
    assert!(
        mode["description"].as_str().unwrap().contains("goal"),
        "{mode}"
    );
    let turn = prompt(&mut agent, &session, "/mode goal");
    let updates = turn.updates();
    let change = updates
        .iter()
        .find(|u| u["sessionUpdate"] == "config_option_update")
        .unwrap_or_else(|| panic!("no config_option_update: {}", turn.dump()));
    assert_eq!(option_value(&change["configOptions"], "mode"), "goal");
}

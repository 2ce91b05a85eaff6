//! A newcomer's first day on the command line: `spindle` alone opens the
//! conversation on a terminal, a chat with no model set up offers the
//! setup there, errors say what is missing in plain words.

use crate::support::fake_openai::chat_text;
use crate::support::{temp_dir, FakeServer, Reply};
use serde_json::json;
use std::path::Path;
use std::process::{Command, Output, Stdio};

/// The binary with a private home whose config and database are under
/// `home/sp` (no provider set up unless the test writes one).
fn spindle(home: &Path) -> Command {
    let mut command = crate::support::spindle_command(home);
    command.env("SPINDLE_HOME", home.join("sp"));
    command
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Runs `spindle ARGS` with stdin closed and the outputs piped.
fn piped(home: &Path, cwd: &Path, args: &[&str]) -> Output {
    spindle(home)
        .args(args)
        .current_dir(cwd)
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

/// Bare `spindle` on a terminal with nothing set up: the chat starts,
/// finds no model, offers the setup; yes runs the wizard right there
/// and the conversation goes on with the model it set up.
#[cfg(unix)]
#[test]
fn bare_spindle_on_a_terminal_offers_setup_then_chats() {
    let server = FakeServer::start();
    server.serve_models(json!({"data": [{"id": "qwen-coder-32k", "context_length": 32768}]}));
    server.push(Reply::Sse(chat_text(&["OK"])));
    server.push(Reply::Sse(chat_text(&["Hello from the new model."])));
    let dir = temp_dir("first-day-bare");
    let home = dir.join("home");
    let mut command = spindle(&home);
    command.current_dir(&dir).env("TERM", "dumb");
    let mut pty = crate::support::pty::Pty::spawn(command);
    pty.expect("no model provider is set up");
    pty.expect("Set up a model provider now (spindle setup)? [Y/n] ");
    pty.send("");
    pty.expect("Provider kind");
    pty.send("openai");
    pty.expect("Base URL");
    pty.send(&server.base_url());
    pty.expect("The API key");
    pty.send("3");
    pty.expect("Model (a number or a name)");
    pty.send("1");
    pty.expect("The model answered: OK");
    pty.expect("local/qwen-coder-32k");
    pty.expect("› ");
    pty.send("hello");
    pty.expect("Hello from the new model.");
    pty.expect("› ");
    pty.type_bytes(b"\x04");
    let (code, screen) = pty.wait();
    assert_eq!(code, Some(0), "{screen}");
    assert!(!screen.contains("authenticate again"), "{screen}");
    // The server listed the window: nothing is assumed.
    assert!(!screen.contains("context window unknown"), "{screen}");
    let written = std::fs::read_to_string(home.join("sp").join("config.json")).unwrap();
    assert!(written.contains("local/qwen-coder-32k"), "{written}");
}

/// No: the chat ends with one line naming `spindle setup`.
#[cfg(unix)]
#[test]
fn declining_the_setup_ends_with_a_pointer_to_it() {
    let dir = temp_dir("first-day-no");
    let home = dir.join("home");
    let mut command = spindle(&home);
    command.arg("chat").current_dir(&dir).env("TERM", "dumb");
    let mut pty = crate::support::pty::Pty::spawn(command);
    pty.expect("Set up a model provider now (spindle setup)? [Y/n] ");
    pty.send("n");
    pty.expect("run `spindle setup` to choose a provider and a model, then `spindle chat`");
    let (code, screen) = pty.wait();
    assert_eq!(code, Some(1), "{screen}");
    assert!(!screen.contains("authenticate again"), "{screen}");
    assert!(!home.join("sp").join("config.json").exists());
}

/// Not on a terminal: a chat without a model says the one line that
/// names `spindle setup`, asking nothing.
#[test]
fn off_a_terminal_nothing_is_asked() {
    let dir = temp_dir("first-day-piped");
    let home = dir.join("home");
    let chat = piped(&home, &dir, &["chat"]);
    assert_eq!(chat.status.code(), Some(1));
    let said = text(&chat.stderr);
    assert!(said.contains("Run `spindle setup`"), "{said}");
    assert!(!said.contains("authenticate again"), "{said}");
    assert!(!said.contains("[Y/n]"), "{said}");
}

/// Bare `spindle` off a terminal (an editor set up without `acp`, a
/// pipe) is still a usage error, which now names both ways in.
#[test]
fn bare_spindle_off_a_terminal_is_a_usage_error() {
    let dir = temp_dir("first-day-bare-piped");
    let bare = piped(&dir.join("home"), &dir, &[]);
    assert_eq!(bare.status.code(), Some(2));
    let said = text(&bare.stderr);
    assert!(said.contains("missing command"), "{said}");
    assert!(said.contains("'spindle acp'"), "{said}");
    assert!(said.contains("'spindle chat'"), "{said}");
    assert!(bare.stdout.is_empty());
}

/// `--session` with an id nobody has: said in plain words, not in the
/// protocol's ("Resource not found:"), by exec and by chat.
#[test]
fn an_unknown_session_is_said_in_plain_words() {
    let dir = temp_dir("first-day-no-session");
    let home = dir.join("home");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/hello.script.json");
    let script = script.to_str().unwrap();
    for command in [
        &["exec", "--script", script, "--session", "sess_nope", "hi"][..],
        &["chat", "--script", script, "--session", "sess_nope"],
    ] {
        let out = piped(&home, &dir, command);
        assert_eq!(out.status.code(), Some(1), "{command:?}");
        let said = text(&out.stderr);
        assert!(!said.contains("Resource not found"), "{said}");
        assert!(
            said.contains("no session with the id \"sess_nope\"; `spindle sessions` lists them"),
            "{said}"
        );
    }
}

/// "OpenAI" is the kind openai wherever a person types it: at the
/// wizard's question, in `--kind`, and as the provider of `--model`.
#[cfg(unix)]
#[test]
fn provider_kinds_and_names_match_in_any_case() {
    let server = FakeServer::start();
    server.push(Reply::Sse(chat_text(&["Answered in any case."])));
    let dir = temp_dir("first-day-case");
    let home = dir.join("home");

    let mut command = spindle(&home);
    command.arg("setup").env("TERM", "dumb");
    let mut pty = crate::support::pty::Pty::spawn(command);
    pty.expect("Provider kind");
    pty.send("OpenAI");
    pty.expect("Base URL");
    assert!(!pty.screen().contains("is not a kind"), "{}", pty.screen());
    let _ = pty.child.kill();
    let _ = pty.wait();

    let base = server.base_url();
    let flags = [
        "setup",
        "--kind",
        "OpenAI",
        "--name",
        "openai",
        "--base-url",
    ];
    let rest = ["--no-key", "--model", "m1", "--no-test"];
    let setup = piped(
        &home,
        &dir,
        &[&flags[..], &[base.as_str()], &rest[..]].concat(),
    );
    assert_eq!(setup.status.code(), Some(0), "{}", text(&setup.stderr));

    let exec = piped(&home, &dir, &["exec", "--model", "OpenAI/m1", "hello"]);
    assert_eq!(exec.status.code(), Some(0), "{}", text(&exec.stderr));
    assert!(text(&exec.stdout).contains("Answered in any case."));
    let asked = server.requests();
    assert_eq!(asked.last().unwrap().body["model"], "m1");
}

/// A server that is not on this machine (a company's gateway) is not
/// named `local` without asking: setup offers a name from its host and
/// takes the one typed. (Stopped before any request leaves the machine.)
#[cfg(unix)]
#[test]
fn a_remote_gateway_is_named_by_asking() {
    let dir = temp_dir("first-day-gateway");
    let mut command = spindle(&dir.join("home"));
    command.arg("setup").env("TERM", "dumb");
    let mut pty = crate::support::pty::Pty::spawn(command);
    pty.expect("Provider kind");
    pty.send("openai");
    pty.expect("Base URL");
    pty.send("https://llm.corp.example.com/v1");
    pty.expect("A name for this provider [corp]: ");
    pty.send("work/gw");
    pty.expect("a name is one word, without '/'");
    pty.expect("A name for this provider [corp]: ");
    pty.send("workgw");
    pty.expect("The API key");
    assert!(!pty.screen().contains("\"local\""), "{}", pty.screen());
    let _ = pty.child.kill();
    let _ = pty.wait();
}

/// A model whose context window nobody knows (not configured, not
/// listed by the server, not a known model): setup and doctor say the
/// window assumed and the setting that sizes it.
#[test]
fn an_unknown_context_window_is_said() {
    let server = FakeServer::start();
    server.serve_models(json!({"data": [{"id": "tiny-fake-model"}]}));
    for _ in 0..3 {
        server.push(Reply::Sse(chat_text(&["OK"])));
    }
    let dir = temp_dir("first-day-window");
    let home = dir.join("home");
    let base = server.base_url();
    let args = [
        "setup",
        "--kind",
        "openai",
        "--no-key",
        "--model",
        "tiny-fake-model",
        "--base-url",
        &base,
    ];
    let setup = piped(&home, &dir, &args);
    assert_eq!(setup.status.code(), Some(0), "{}", text(&setup.stderr));
    let said = "context window unknown for local/tiny-fake-model; assuming 32768 tokens — set it with models.\"local/tiny-fake-model\".context_window in ";
    let out = text(&setup.stdout);
    assert!(out.contains(said), "{out}");
    assert!(out.contains("config.json"), "{out}");

    let doctor = piped(&home, &dir, &["doctor"]);
    let out = text(&doctor.stdout);
    assert!(
        out.contains(&format!("warn  context window: {said}")),
        "{out}"
    );
}

/// Sets up provider `local` at the fake server with model `m1`.
fn set_up(home: &Path, dir: &Path, server: &FakeServer) {
    let base = server.base_url();
    let args = [
        "setup",
        "--kind",
        "openai",
        "--no-key",
        "--model",
        "m1",
        "--no-test",
        "--base-url",
        &base,
    ];
    let setup = piped(home, dir, &args);
    assert_eq!(setup.status.code(), Some(0), "{}", text(&setup.stderr));
}

/// `exec "/help"` and `exec "/model"` never reach the model: their
/// sessions hold nothing to go on with and are not kept, so they do not
/// pile up in `spindle sessions`; a prompt's session is.
#[test]
fn one_shot_slash_commands_leave_no_session() {
    let server = FakeServer::start();
    server.push(Reply::Sse(chat_text(&["A real answer."])));
    let dir = temp_dir("first-day-slash");
    let home = dir.join("home");
    set_up(&home, &dir, &server);
    let before = piped(&home, &dir, &["sessions"]);
    for command in ["/help", "/help", "/model"] {
        let out = piped(&home, &dir, &["exec", command]);
        assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
        assert!(!out.stdout.is_empty());
    }
    let after = piped(&home, &dir, &["sessions"]);
    assert_eq!(text(&after.stdout), text(&before.stdout));
    assert_eq!(text(&after.stdout), "No sessions.\n");
    let listed = piped(&home, &dir, &["sessions", "--json"]);
    assert_eq!(text(&listed.stdout).trim(), "[]");

    let out = piped(&home, &dir, &["exec", "hello"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let listed = text(&piped(&home, &dir, &["sessions"]).stdout);
    assert_eq!(listed.lines().count(), 2, "{listed}");
    assert!(listed.contains("hello"), "{listed}");
}

/// `spindle sessions` shows each session's model in a column of its
/// own; `--json` keeps its fields, the model among them.
#[test]
fn the_session_list_names_the_model() {
    let server = FakeServer::start();
    server.push(Reply::Sse(chat_text(&["A real answer."])));
    let dir = temp_dir("first-day-model-column");
    let home = dir.join("home");
    set_up(&home, &dir, &server);
    let out = piped(&home, &dir, &["exec", "hello there"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let listed = text(&piped(&home, &dir, &["sessions"]).stdout);
    let mut lines = listed.lines();
    let head: Vec<&str> = lines.next().unwrap().split_whitespace().collect();
    assert_eq!(
        head,
        ["ID", "UPDATED", "TITLE", "MODEL", "FOLDER"],
        "{listed}"
    );
    let row = lines.next().unwrap();
    assert!(row.contains("hello there"), "{listed}");
    assert!(row.contains("  local/m1  "), "{listed}");
    let json: serde_json::Value =
        serde_json::from_str(&text(&piped(&home, &dir, &["sessions", "--json"]).stdout)).unwrap();
    let keys: Vec<&String> = json[0].as_object().unwrap().keys().collect();
    for key in [
        "sessionId",
        "title",
        "cwd",
        "createdAt",
        "updatedAt",
        "agent",
        "model",
    ] {
        assert!(keys.iter().any(|k| *k == key), "{key}: {json}");
    }
    assert_eq!(json[0]["model"], "local/m1");
}

/// The README's chat demo, run as written (the binary in place of
/// `cargo run`) from a copy of the clone: the scripted model's file
/// lands in a temporary folder, and the clone is left as it was.
#[cfg(unix)]
#[test]
fn the_readme_chat_demo_leaves_the_clone_alone() {
    let readme = include_str!("../../README.md");
    let line = readme
        .lines()
        .find(|line| line.contains(" chat --script ") && line.contains("tools.script.json"))
        .expect("the README's chat demo");
    let cargo = cargo_prefix(line);
    let demo = line.replacen(&cargo, "\"$SPINDLE\"", 1);
    let dir = temp_dir("first-day-readme");
    let clone = dir.join("clone");
    std::fs::create_dir_all(clone.join("examples")).unwrap();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/tools.script.json");
    std::fs::copy(&script, clone.join("examples/tools.script.json")).unwrap();
    let temp = dir.join("tmp");
    std::fs::create_dir_all(&temp).unwrap();
    let mut command = Command::new("sh");
    crate::support::isolation::isolate(&mut command, &dir.join("home"));
    let out = command
        .args(["-c", &demo])
        .current_dir(&clone)
        .env("SPINDLE", crate::support::isolation::spindle_path())
        .env("TMPDIR", &temp)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .and_then(|mut child| {
            use std::io::Write;
            child
                .stdin
                .take()
                .unwrap()
                .write_all(b"show me the tools\n")?;
            child.wait_with_output()
        })
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{demo}\n{}", text(&out.stderr));
    let left: Vec<_> = std::fs::read_dir(&clone)
        .unwrap()
        .flatten()
        .map(|e| e.file_name())
        .collect();
    assert_eq!(left, ["examples"], "the demo wrote into the clone");
    let made: Vec<_> = std::fs::read_dir(&temp)
        .unwrap()
        .flatten()
        .filter(|e| e.path().join("spindle-demo.txt").is_file())
        .collect();
    assert_eq!(made.len(), 1, "{}", text(&out.stdout));
}

/// The `cargo run … --` that starts a README command, as written.
#[cfg(unix)]
fn cargo_prefix(line: &str) -> String {
    let start = line.find("cargo run").expect("a cargo run command");
    let end = line[start..].find(" -- ").expect("cargo run … --") + start + 3;
    line[start..end].to_string()
}

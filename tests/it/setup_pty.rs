//! `spindle setup` as a person meets it: on a pseudo-terminal, with typos
//! asked again, the server's models as a numbered list, a pasted key that
//! is never echoed and is kept in a file only its owner reads, and a
//! provider of the same name replaced only when the user says so.

use crate::support::fake_openai::chat_text;
use crate::support::prelude::WAIT;
use crate::support::pty::Pty;
use crate::support::{temp_dir, FakeServer, Reply};
use serde_json::{json, Value};
use std::path::Path;

fn setup_on_a_terminal(config: &Path, home: &Path) -> Pty {
    let mut command = crate::support::spindle_command(home);
    command.args(["setup", "--config"]).arg(config);
    command.env("TERM", "dumb");
    Pty::spawn(command)
}

#[test]
fn setup_on_a_terminal_forgives_typos_lists_models_and_hides_the_key() {
    let server = FakeServer::start();
    server.serve_models(json!({"data": [
        {"id": "qwen-coder-32k", "context_length": 32768},
        {"id": "llama-8b"},
    ]}));
    server.push(Reply::Sse(chat_text(&["OK from qwen"])));
    let base = server.base_url();
    let dir = temp_dir("setup-pty");
    let home = dir.join("home");
    let config = dir.join("config.json");
    // A provider already named as the wizard would name this one.
    let first = json!({"providers": {"local": {"kind": "openai",
        "base_url": "http://127.0.0.1:9/v1", "requires_key": false}}});
    std::fs::write(&config, first.to_string()).unwrap();

    let mut pty = setup_on_a_terminal(&config, &home);
    pty.expect("Provider kind");
    pty.send("opneai");
    pty.expect("is not a kind");
    pty.expect("Provider kind");
    pty.send("openai");
    pty.expect("Base URL");
    pty.send("localhost:8080");
    pty.expect("starts with http");
    pty.expect("Base URL");
    pty.send(&base);
    pty.expect("A provider named \"local\" exists (http://127.0.0.1:9/v1)");
    pty.expect("Replace it");
    pty.send("n");
    pty.expect("Another name [local2]");
    pty.send("mine");
    pty.expect("The API key");
    pty.send("4");
    pty.expect("answer 1, 2 or 3");
    pty.expect("The API key");
    pty.send("1");
    pty.expect("API key (not shown): ");
    pty.send("sk-pasted-secret-42");
    pty.expect(" 1) qwen-coder-32k");
    pty.expect(" 2) llama-8b");
    pty.expect("Model (a number or a name)");
    pty.send("qwen-codr-32k");
    pty.expect("did you mean \"qwen-coder-32k\"?");
    pty.expect("Model (a number or a name)");
    pty.send("1");
    pty.expect("The model answered: OK from qwen");
    let (code, screen) = pty.wait();
    assert_eq!(code, Some(0), "{screen}");
    assert!(
        !screen.contains("sk-pasted-secret-42"),
        "the key was echoed:\n{screen}"
    );
    // The HTTP and TLS libraries stay quiet without RUST_LOG.
    assert!(
        !screen.contains("DEBUG") && !screen.contains("TRACE"),
        "{screen}"
    );

    // The key: sent with the test request, kept owner-only.
    let sent = server.requests();
    let chat = sent
        .iter()
        .find(|r| r.path.ends_with("/chat/completions"))
        .expect("the test request");
    assert_eq!(chat.body["model"], "qwen-coder-32k");
    assert_eq!(
        chat.header("authorization"),
        Some("Bearer sk-pasted-secret-42")
    );
    let key = dir.join("keys").join("mine.key");
    assert_eq!(
        std::fs::read_to_string(&key).unwrap().trim(),
        "sk-pasted-secret-42"
    );
    assert_eq!(spindle::os::testing::mode(&key), 0o600);
    // The first provider stayed; the new one is the default, its window
    // recorded from the list.
    let written: Value = serde_json::from_str(&std::fs::read_to_string(&config).unwrap()).unwrap();
    assert_eq!(written["providers"]["local"], first["providers"]["local"]);
    assert_eq!(written["providers"]["mine"]["base_url"], json!(base));
    assert_eq!(written["defaults"]["model"], "mine/qwen-coder-32k");
    assert_eq!(
        written["models"]["mine/qwen-coder-32k"]["context_window"],
        32768
    );
    assert!(
        !std::fs::read_to_string(&config)
            .unwrap()
            .contains("sk-pasted"),
        "the key is in the config file"
    );

    // Run again and say yes: the provider of that name is replaced.
    server.push(Reply::Sse(chat_text(&["OK again"])));
    let mut pty = setup_on_a_terminal(&config, &home);
    pty.expect("Provider kind");
    pty.send("");
    pty.expect("Base URL");
    pty.send(&base);
    pty.expect("A provider named \"local\" exists");
    pty.send("y");
    pty.expect("The API key");
    pty.send("3");
    pty.expect("Model (a number or a name)");
    pty.send("2");
    // A default exists: changing it is asked.
    pty.expect("Make local/llama-8b the default model instead of mine/qwen-coder-32k?");
    pty.send("y");
    pty.expect("The model answered: OK again");
    let (code, screen) = pty.wait();
    assert_eq!(code, Some(0), "{screen}");
    let written: Value = serde_json::from_str(&std::fs::read_to_string(&config).unwrap()).unwrap();
    assert_eq!(written["providers"]["local"]["base_url"], json!(base));
    assert_eq!(written["providers"]["mine"]["base_url"], json!(base));
    assert_eq!(written["defaults"]["model"], "local/llama-8b");
    let _ = std::fs::remove_dir_all(&dir);
}

/// An empty or malformed pasted key is asked again on the terminal (the
/// user never typed `--key-stdin`, so that flag is not what they hear of);
/// the key then given is the one kept and sent.
#[test]
fn an_empty_pasted_key_is_asked_again() {
    let server = FakeServer::start();
    server.push(Reply::Sse(chat_text(&["OK"])));
    let dir = temp_dir("setup-pty-empty-key");
    let home = dir.join("home");
    let config = dir.join("config.json");
    let mut pty = setup_on_a_terminal(&config, &home);
    pty.expect("Provider kind");
    pty.send("openai");
    pty.expect("Base URL");
    pty.send(&server.base_url());
    pty.expect("The API key");
    pty.send("1");
    pty.expect("API key (not shown): ");
    pty.send("");
    pty.expect("that was empty; paste the key again");
    pty.expect("API key (not shown): ");
    pty.send("two words");
    pty.expect("a key is one word");
    pty.expect("API key (not shown): ");
    pty.send("sk-second-try");
    pty.expect("Model");
    pty.send("test-model");
    pty.expect("The model answered: OK");
    let (code, screen) = pty.wait();
    assert_eq!(code, Some(0), "{screen}");
    assert!(!screen.contains("--key-stdin"), "{screen}");
    assert!(
        !screen.contains("sk-second-try"),
        "the key was echoed:\n{screen}"
    );
    let chat = server
        .requests()
        .into_iter()
        .find(|r| r.path.ends_with("/chat/completions"))
        .expect("the test request");
    assert_eq!(chat.header("authorization"), Some("Bearer sk-second-try"));
    let _ = std::fs::remove_dir_all(&dir);
}

/// End of input on the terminal (Ctrl-D) stops the wizard without writing.
#[test]
fn setup_on_a_terminal_stops_cleanly_on_end_of_input() {
    let dir = temp_dir("setup-pty-eof");
    let home = dir.join("home");
    let config = dir.join("config.json");
    let mut pty = setup_on_a_terminal(&config, &home);
    pty.expect("Provider kind");
    // Ctrl-D at the start of a line: a read of zero bytes.
    pty.type_bytes(&[4]);
    let (code, screen) = pty.wait();
    assert_eq!(code, Some(1), "{screen}");
    assert!(screen.contains("aborted"), "{screen}");
    assert!(!config.exists());
    let _ = std::fs::remove_dir_all(&dir);
}

/// An interrupt while the key is being typed puts the terminal's echo
/// back: the user's shell is not left typing blind.
#[test]
fn an_interrupt_at_the_key_prompt_leaves_the_echo_on() {
    use std::os::fd::AsRawFd;
    let server = FakeServer::start();
    let dir = temp_dir("setup-pty-interrupt");
    let home = dir.join("home");
    let config = dir.join("config.json");
    let mut pty = setup_on_a_terminal(&config, &home);
    let echo_on = |pty: &Pty| {
        // SAFETY: tcgetattr on the master, into a local (on Linux the two
        // sides share their settings).
        unsafe {
            let mut settings = std::mem::zeroed::<libc::termios>();
            assert_eq!(libc::tcgetattr(pty.master.as_raw_fd(), &mut settings), 0);
            settings.c_lflag & libc::ECHO != 0
        }
    };
    pty.expect("Provider kind");
    pty.send("openai");
    pty.expect("Base URL");
    pty.send(&server.base_url());
    pty.expect("The API key");
    pty.send("1");
    pty.expect("API key (not shown): ");
    assert!(!echo_on(&pty), "the echo is on while the key is typed");
    // SAFETY: kill(2) of the child this test started.
    unsafe { libc::kill(pty.child.id() as i32, libc::SIGINT) };
    let (code, screen) = pty.wait();
    assert_eq!(code, None, "not ended by the interrupt: {screen}");
    assert!(echo_on(&pty), "the echo stayed off: {screen}");
    assert!(!config.exists());
    let _ = std::fs::remove_dir_all(&dir);
}

/// The terminal auth method works the way the schema says a client runs
/// it: the method's `args` appended to the agent's own command line
/// (`spindle acp --model … --setup`) start the wizard, on that config.
#[test]
fn the_terminal_auth_method_starts_the_wizard() {
    use crate::support::Agent;
    let dir = temp_dir("setup-terminal-auth");
    let home = dir.join("home");
    let config = dir.join("config.json");
    let mut agent = Agent::spawn(&["acp"], &[]);
    let id = agent.request(
        "initialize",
        json!({"protocolVersion": 1, "clientCapabilities": {"auth": {"terminal": true}}}),
    );
    let (response, _) = agent.response(&id, WAIT);
    let methods = response["result"]["authMethods"]
        .as_array()
        .unwrap()
        .clone();
    let terminal = methods
        .iter()
        .find(|m| m["type"] == "terminal")
        .unwrap_or_else(|| panic!("no terminal method: {methods:?}"));
    let args: Vec<String> = terminal["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap().to_string())
        .collect();
    let mut command = crate::support::spindle_command(&home);
    command
        .args(["acp", "--model", "local/some-model", "--config"])
        .arg(&config)
        .args(&args);
    command.env("TERM", "dumb");
    let mut pty = Pty::spawn(command);
    pty.expect("Provider kind");
    pty.type_bytes(&[4]);
    let (code, screen) = pty.wait();
    assert_eq!(code, Some(1), "{screen}");
    assert!(screen.contains("aborted"), "{screen}");
    // A client that cannot run a terminal is not offered the method.
    let mut agent = Agent::spawn(&["acp"], &[]);
    let result = agent.initialize();
    assert!(
        !result["authMethods"].to_string().contains("terminal"),
        "{result}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

fn refused() -> Reply {
    Reply::openai_error(
        401,
        "Incorrect API key provided",
        "invalid_request_error",
        "invalid_api_key",
    )
}

/// A key the server refuses at the test request is not the end of the
/// setup: the key is asked again, and the right one is kept and written.
#[test]
fn a_refused_key_is_asked_again_and_the_right_one_written() {
    let server = FakeServer::start();
    server.push(refused());
    server.push(Reply::Sse(chat_text(&["OK with the right key"])));
    let dir = temp_dir("setup-pty-refused");
    let home = dir.join("home");
    let config = dir.join("config.json");
    let mut pty = setup_on_a_terminal(&config, &home);
    pty.expect("Provider kind");
    pty.send("openai");
    pty.expect("Base URL");
    pty.send(&server.base_url());
    pty.expect("The API key");
    pty.send("1");
    pty.expect("API key (not shown): ");
    pty.send("sk-wrong-key-1");
    pty.expect("Model");
    pty.send("test-model");
    pty.expect("HTTP 401");
    pty.expect("1) enter the API key again");
    pty.send("1");
    pty.expect("API key (not shown): ");
    pty.send("sk-right-key-2");
    pty.expect("The model answered: OK with the right key");
    let (code, screen) = pty.wait();
    assert_eq!(code, Some(0), "{screen}");
    assert!(!screen.contains("nothing was written"), "{screen}");
    assert!(
        !screen.contains("sk-wrong-key-1") && !screen.contains("sk-right-key-2"),
        "a key was echoed:\n{screen}"
    );
    let sent: Vec<_> = server
        .requests()
        .into_iter()
        .filter(|r| r.path.ends_with("/chat/completions"))
        .collect();
    assert_eq!(sent.len(), 2, "{screen}");
    assert_eq!(
        sent[0].header("authorization"),
        Some("Bearer sk-wrong-key-1")
    );
    assert_eq!(
        sent[1].header("authorization"),
        Some("Bearer sk-right-key-2")
    );
    let key = dir.join("keys").join("local.key");
    let written: Value = serde_json::from_str(&std::fs::read_to_string(&config).unwrap()).unwrap();
    assert_eq!(written["providers"]["local"]["api_key_file"], json!(key));
    assert_eq!(written["defaults"]["model"], "local/test-model");
    assert_eq!(std::fs::read_to_string(&key).unwrap(), "sk-right-key-2\n");
    assert_eq!(spindle::os::testing::mode(&key), 0o600);
    // Only the key kept: no file of the refused one is left.
    let files: Vec<_> = std::fs::read_dir(dir.join("keys"))
        .unwrap()
        .flatten()
        .map(|e| e.file_name())
        .collect();
    assert_eq!(files.len(), 1, "{files:?}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// After a refused test request the user may try another base URL, and
/// write the config anyway: it is written, saying the test failed, with
/// the key's variable kept.
#[test]
fn after_a_refused_key_the_config_can_be_written_anyway() {
    let server = FakeServer::start();
    server.push(refused());
    let dir = temp_dir("setup-pty-anyway");
    let home = dir.join("home");
    let config = dir.join("config.json");
    server.push(refused());
    let mut command = crate::support::spindle_command(&home);
    command.args(["setup", "--config"]).arg(&config);
    command
        .env("TERM", "dumb")
        .env("SETUP_WRONG_TOKEN", "sk-wrong-key-3");
    let mut pty = Pty::spawn(command);
    pty.expect("Provider kind");
    pty.send("openai");
    pty.expect("Base URL");
    pty.send(&server.base_url());
    pty.expect("The API key");
    pty.send("2");
    pty.expect("The variable");
    pty.send("SETUP_WRONG_TOKEN");
    pty.expect("Model");
    pty.send("test-model");
    pty.expect("HTTP 401");
    pty.expect("4) stop without writing");
    pty.send("9");
    pty.expect("answer 1, 2, 3 or 4");
    // Another base URL is asked for and tried: refused again.
    pty.send("2");
    pty.expect("Base URL");
    pty.send(&server.base_url());
    pty.expect("HTTP 401");
    pty.expect("4) stop without writing");
    pty.send("3");
    pty.expect("the config is written anyway");
    let (code, screen) = pty.wait();
    assert_eq!(code, Some(0), "{screen}");
    let written: Value = serde_json::from_str(&std::fs::read_to_string(&config).unwrap()).unwrap();
    assert_eq!(
        written["providers"]["local"]["api_key_env"],
        "SETUP_WRONG_TOKEN"
    );
    assert_eq!(written["defaults"]["model"], "local/test-model");
    assert!(!dir.join("keys").exists(), "{screen}");
    let tried = server
        .requests()
        .into_iter()
        .filter(|r| r.path.ends_with("/chat/completions"))
        .count();
    assert_eq!(tried, 2, "{screen}");
    let _ = std::fs::remove_dir_all(&dir);
}

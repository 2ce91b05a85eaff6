//! The provider key is out of reach of the commands Spindle runs, even of
//! those that run outside any sandbox (every command under `yolo`, every
//! command the user approves): the key is not in the agent's own
//! environment (kept in memory only), and the agent is non-dumpable, so a
//! process of the same user reads neither its `environ` nor its memory.

use crate::support::fake_openai::{chat_text, chat_tool_calls};
use crate::support::isolation::spindle_path;
use crate::support::prelude::WAIT;
use crate::support::{run_prompt, temp_dir, Agent, FakeServer, Reply};
use serde_json::json;
use std::path::{Path, PathBuf};

const KEY: &str = "sk-test-environ-key-8841";
const NAMED_KEY: &str = "corp-token-value-5512";

/// What an approved command printed when it read the agent's `/proc`
/// files; `program` and `prefix` start the agent (as another user, say).
fn what_a_command_reads_of_the_agent(program: &Path, prefix: &[&str], dir: &Path) -> String {
    let ws = dir.join("ws");
    let home = dir.join("home");
    for folder in [&ws, &home, &home.join("config"), &home.join("data")] {
        std::fs::create_dir_all(folder).unwrap();
        spindle::os::testing::set_mode(folder, 0o777).unwrap();
    }
    let server = FakeServer::start();
    // A provider whose key variable only the config names.
    let config = json!({
        "providers": {
            "corp": {"kind": "openai", "base_url": server.base_url(), "api_key_env": "CORP_LLM_TOKEN"}
        },
        "defaults": {"model": "corp/test-model"},
    });
    std::fs::write(home.join("config.json"), config.to_string()).unwrap();
    let mut args: Vec<&str> = prefix.to_vec();
    args.extend(["acp", "--permissions", "yolo"]);
    let home_text = home.to_str().unwrap().to_string();
    let config_home = home.join("config").to_str().unwrap().to_string();
    let data_home = home.join("data").to_str().unwrap().to_string();
    let mut agent = Agent::spawn_program(
        program,
        &args,
        &[
            ("SPINDLE_HOME", &home_text),
            ("XDG_CONFIG_HOME", &config_home),
            ("XDG_DATA_HOME", &data_home),
            ("OPENAI_API_KEY", KEY),
            ("CORP_LLM_TOKEN", NAMED_KEY),
            ("COPY_OF_THE_KEY", NAMED_KEY),
        ],
    );
    agent.initialize();
    let session = agent.new_session(&ws);
    let pid = agent.pid();
    let line = format!(
        "tr '\\0' '\\n' < /proc/{pid}/environ; echo environ-done; \
         head -c 64 /proc/{pid}/mem; echo mem-done; \
         ls -l /proc/{pid}/fd/ | head -3; echo fd-done"
    );
    server.push(Reply::Sse(chat_tool_calls(&[(
        "run_command",
        json!({"command": line}),
    )])));
    server.push(Reply::Sse(chat_text(&["done"])));
    let turn = run_prompt(&mut agent, &session, "look", WAIT, |r| {
        panic!("unexpected request {r}")
    });
    assert_eq!(turn.stop_reason(), "end_turn", "{}", turn.dump());
    let id = turn.tool_call_ids()[0].clone();
    let output = turn.final_text(&id);
    assert!(
        output.contains("fd-done"),
        "the command did not run: {output}"
    );
    // The key still works for the model calls.
    let requests = server.wait_requests(1, WAIT);
    assert_eq!(
        requests[0].header("authorization"),
        Some(format!("Bearer {NAMED_KEY}").as_str())
    );
    output
}

fn space(name: &str) -> PathBuf {
    let dir = spindle::os::canonical(temp_dir(name)).unwrap();
    // Another user must reach it.
    let mut up = dir.as_path();
    while let Some(parent) = up.parent() {
        if parent == std::env::temp_dir() || parent == Path::new("/") {
            break;
        }
        let _ = spindle::os::testing::set_mode(parent, 0o755);
        up = parent;
    }
    spindle::os::testing::set_mode(&dir, 0o755).unwrap();
    dir
}

/// As the agent's own user (root here, as in CI): the agent's environment
/// holds no key, neither the standard variable nor the one the config
/// names, nor a copy of a key under another name.
#[test]
fn an_approved_command_finds_no_key_in_the_agents_environment() {
    let dir = space("credentials-environ");
    let output = what_a_command_reads_of_the_agent(&spindle_path(), &[], &dir);
    assert!(output.contains("environ-done"), "{output}");
    for secret in [KEY, NAMED_KEY] {
        assert!(!output.contains(secret), "a key was read: {output}");
    }
    // The environment was read (it is not simply unreadable to root).
    assert!(output.contains("SPINDLE_HOME="), "{output}");
}

/// As an unprivileged user, where the machine lets this test switch to
/// one: the agent is non-dumpable, so a command of the same user cannot
/// read its environment, its memory or its descriptors.
#[test]
fn an_unprivileged_agents_proc_files_are_closed_to_its_own_commands() {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 || !Path::new("/usr/bin/setpriv").exists() {
        eprintln!("skipped: switching to another user needs root and setpriv");
        return;
    }
    let dir = space("credentials-nobody");
    let spindle = spindle_path();
    let output = what_a_command_reads_of_the_agent(
        Path::new("/usr/bin/setpriv"),
        &[
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            "--",
            spindle.to_str().unwrap(),
        ],
        &dir,
    );
    for secret in [KEY, NAMED_KEY] {
        assert!(!output.contains(secret), "a key was read: {output}");
    }
    assert!(
        !output.contains("SPINDLE_HOME="),
        "environ was readable: {output}"
    );
    assert!(output.matches("Permission denied").count() >= 2, "{output}");
}

//! The approval policy as a hostile model meets it: under `auto` every
//! class of command that could write, run code or read secrets asks;
//! provider credentials never reach a command, an editor terminal or an
//! MCP server; the `sandbox` policy confines commands (and says so when it
//! cannot); command logs are private, capped and removed with the session.

use super::{always_answer, call, calls, permissions, say, script, Space, WAIT};
use crate::support::client::no_requests;
use crate::support::mcp_server::{stdio_server, CUSTOM_ENV};
use crate::support::{run_prompt, Answer, Turn};
use serde_json::{json, Value};
use std::fs;
use std::io::ErrorKind;
use std::net::TcpListener;
use std::path::Path;
use std::process::Command;
use std::sync::{Arc, Mutex};

const KEY: &str = "sk-it-live-0123456789abcdef";
const CORP_KEY: &str = "corp-secret-abcdefgh123";

/// Runs git for a test's fixture, without the user's configuration.
fn git(dir: &Path, args: &[&str]) {
    let output = Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .output()
        .expect("git runs");
    assert!(output.status.success(), "git {args:?}: {output:?}");
}

fn sandbox_available() -> bool {
    let output = crate::support::spindle_command(&crate::support::temp_dir("home"))
        .args(["sandbox", "--probe"])
        .output()
        .expect("the probe runs");
    let report: Value = serde_json::from_slice(&output.stdout).unwrap_or(Value::Null);
    report["landlock"].is_u64() && report["seccomp"] == true
}

#[test]
#[cfg_attr(windows, ignore = "sh command lines")]
fn auto_asks_for_every_class_of_hostile_command() {
    let space = Space::new("policy-auto");
    space.write("data.txt", "b\na\n");
    space.write("evil.sh", "#!/bin/sh\ntouch pwned-by-script\n");
    spindle::os::testing::set_mode(space.path("evil.sh"), 0o755).unwrap();
    git(&space.ws, &["init", "-q"]);
    let config_before = space.read(".git/config");
    // A nested repository whose own configuration runs a program on
    // `git status`, as a hostile workspace could ship it.
    fs::create_dir_all(space.path("evil")).unwrap();
    git(&space.path("evil"), &["init", "-q"]);
    git(
        &space.path("evil"),
        &[
            "config",
            "core.fsmonitor",
            "touch ../pwned-by-fsmonitor; false",
        ],
    );
    spindle::os::testing::symlink("/etc", space.path("link")).unwrap();
    let hostile = [
        ("a1", "sort -uo .git/hooks/pre-commit data.txt", "."),
        ("a2", "sort --output=.git/config data.txt", "."),
        ("a3", "echo $OPENAI_API_KEY", "."),
        ("a4", "cat $(which sh)", "."),
        ("a5", "git -c core.pager='touch pwned-pager' log", "."),
        ("a6", "find . -name data.txt -delete", "."),
        ("a7", "rg --pre ./evil.sh b", "."),
        ("a8", "echo pwned > pwned-by-redirect", "."),
        ("a9", "GIT_EXTERNAL_DIFF=./evil.sh git diff", "."),
        ("a10", "git status", "evil"),
        ("a11", "cat ~/.ssh/id_rsa", "."),
        ("a12", "cat link/passwd", "."),
        ("a13", "sort data.txt --out=pwned-by-abbreviation", "."),
        ("a14", "ls && ./evil.sh", "."),
    ];
    let mut tool_calls: Vec<Value> = hostile
        .iter()
        .map(|(id, line, cwd)| call(id, "run_command", json!({"command": line, "cwd": cwd})))
        .collect();
    tool_calls.push(call(
        "ok1",
        "run_command",
        json!({"command": "git status --short"}),
    ));
    tool_calls.push(call(
        "ok2",
        "run_command",
        json!({"command": "sort -u data.txt"}),
    ));
    let (mut agent, session) = space.start(
        &script(vec![calls(tool_calls), say("Done.")]),
        &["--permissions", "auto", "--on-reject", "continue"],
        json!({}),
    );
    let turn = run_prompt(
        &mut agent,
        &session,
        "go",
        WAIT,
        always_answer("reject_once"),
    );
    assert_eq!(turn.stop_reason(), "end_turn", "{}", turn.dump());
    turn.assert_every_tool_call_finished();
    let expected: Vec<String> = hostile.iter().map(|(id, _, _)| id.to_string()).collect();
    assert_eq!(turn.permission_ids(), expected, "{}", turn.dump());
    assert_eq!(turn.final_status("ok1"), "completed", "{}", turn.dump());
    assert_eq!(turn.final_status("ok2"), "completed", "{}", turn.dump());
    assert!(turn.final_text("ok2").contains("a\nb"), "{}", turn.dump());
    for marker in [
        "pwned-by-script",
        "pwned-by-fsmonitor",
        "pwned-pager",
        "pwned-by-redirect",
        "pwned-by-abbreviation",
        ".git/hooks/pre-commit",
    ] {
        assert!(!space.exists(marker), "{marker} exists");
    }
    assert!(space.exists("data.txt"));
    assert_eq!(space.read(".git/config"), config_before);
}

/// Writes the config naming a provider whose key is in `CORP_TOKEN`.
fn corp_config(space: &Space, tools: Value) -> String {
    let path = space.base.join("config.json");
    let config = json!({
        "providers": {"corp": {"kind": "openai", "base_url": "http://127.0.0.1:9/v1", "api_key_env": "CORP_TOKEN"}},
        "tools": tools,
    });
    fs::write(&path, config.to_string()).unwrap();
    path.to_str().unwrap().to_string()
}

fn assert_no_secret(text: &str, what: &str) {
    for secret in [KEY, CORP_KEY] {
        assert!(!text.contains(secret), "{what} holds a key:\n{text}");
    }
}

#[test]
#[cfg_attr(windows, ignore = "sh command lines")]
fn commands_never_see_the_provider_keys_and_their_logs_are_private() {
    let space = Space::new("policy-secrets");
    let config = corp_config(&space, json!({"command_log_bytes": 10000}));
    let db = space.base.join("db").join("spindle.db");
    fs::create_dir_all(db.parent().unwrap()).unwrap();
    let db_arg = db.to_str().unwrap().to_string();
    let agent_env = [
        ("OPENAI_API_KEY", KEY),
        ("CORP_TOKEN", CORP_KEY),
        ("A_COPY_OF_THE_KEY", KEY),
    ];
    let mut agent = space.spawn_with_env(
        &script(vec![
            calls(vec![
                call("e1", "run_command", json!({"command": "env"})),
                call(
                    "e2",
                    "run_command",
                    json!({"command": "yes spindle | head -c 200000"}),
                ),
            ]),
            say("Done."),
        ]),
        &[
            "--permissions",
            "yolo",
            "--config",
            &config,
            "--db",
            &db_arg,
        ],
        &agent_env,
    );
    super::initialize(&mut agent, json!({}));
    let session = agent.new_session(&space.ws);
    let turn = run_prompt(&mut agent, &session, "go", WAIT, no_requests);
    assert_eq!(turn.stop_reason(), "end_turn", "{}", turn.dump());
    let env_output = turn.final_text("e1");
    assert!(env_output.contains("PATH="), "{env_output}");
    assert_no_secret(&env_output, "the command's output");
    for name in ["OPENAI_API_KEY=", "CORP_TOKEN=", "A_COPY_OF_THE_KEY="] {
        assert!(!env_output.contains(name), "{name} reached the command");
    }
    // Every message the editor got is clean too.
    for message in &turn.messages {
        assert_no_secret(&message.to_string(), "a message to the editor");
    }

    // The logs: a private folder beside the database, one 0600 file per
    // command, capped with head and tail kept.
    let dir = db.parent().unwrap().join("logs").join(&session);
    let mode = |path: &Path| spindle::os::testing::mode(path);
    assert_eq!(mode(&db.parent().unwrap().join("logs")), 0o700);
    assert_eq!(mode(&dir), 0o700);
    let env_log = dir.join("e1.log");
    assert_eq!(mode(&env_log), 0o600);
    assert_no_secret(&fs::read_to_string(&env_log).unwrap(), "the log");
    let big = fs::read_to_string(dir.join("e2.log")).unwrap();
    assert!(
        big.len() < 10_200,
        "the log is not capped: {} bytes",
        big.len()
    );
    assert!(big.starts_with("spindle\nspindle\n"));
    assert!(
        big.contains("bytes of output omitted from this log"),
        "{big}"
    );
    assert!(!std::env::temp_dir()
        .join(format!(
            "spindle-output-{}",
            std::env::var("USER").unwrap_or_default()
        ))
        .join(&session)
        .exists());

    // The logs go with the session.
    let id = agent.request("session/delete", json!({"sessionId": session}));
    let (response, _) = agent.response(&id, WAIT);
    assert!(response.get("result").is_some(), "{response}");
    assert!(!dir.exists(), "the logs outlived their session");
    drop(agent);
    let store = fs::read(&db).unwrap_or_default();
    assert!(!String::from_utf8_lossy(&store).contains(KEY));
}

/// An editor terminal that really runs what it is given, in an environment
/// that (like an editor started from a shell) holds the provider key.
fn real_terminals(seen: Arc<Mutex<Vec<String>>>) -> impl FnMut(&Value) -> Answer {
    let mut outputs: Vec<String> = Vec::new();
    move |request: &Value| {
        let params = &request["params"];
        match request["method"].as_str().unwrap_or_default() {
            "terminal/create" => {
                let args: Vec<String> = params["args"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|a| a.as_str().unwrap().to_string())
                    .collect();
                let output = Command::new(params["command"].as_str().unwrap())
                    .args(&args)
                    .current_dir(params["cwd"].as_str().unwrap())
                    .env("OPENAI_API_KEY", KEY)
                    .output()
                    .expect("the terminal's command starts");
                let mut text = String::from_utf8_lossy(&output.stdout).into_owned();
                text.push_str(&String::from_utf8_lossy(&output.stderr));
                seen.lock().unwrap().push(text.clone());
                outputs.push(text);
                Answer::Result(json!({"terminalId": format!("t{}", outputs.len() - 1)}))
            }
            "terminal/wait_for_exit" => Answer::Result(json!({"exitCode": 0, "signal": null})),
            "terminal/output" => {
                let index: usize = params["terminalId"].as_str().unwrap()[1..].parse().unwrap();
                Answer::Result(json!({"output": outputs[index], "truncated": false}))
            }
            "terminal/release" | "terminal/kill" => Answer::Result(json!({})),
            other => panic!("unexpected request {other}"),
        }
    }
}

#[test]
#[cfg_attr(windows, ignore = "sh command lines")]
fn editor_terminals_start_without_the_provider_keys() {
    let space = Space::new("policy-terminal");
    let (mut agent, session) = space.start(
        &script(vec![
            calls(vec![call("t1", "run_command", json!({"command": "env"}))]),
            say("Done."),
        ]),
        &["--permissions", "yolo"],
        json!({"terminal": true}),
    );
    let seen = Arc::new(Mutex::new(Vec::new()));
    let turn = run_prompt(
        &mut agent,
        &session,
        "go",
        WAIT,
        real_terminals(seen.clone()),
    );
    assert_eq!(turn.stop_reason(), "end_turn", "{}", turn.dump());
    let output = seen.lock().unwrap().concat();
    assert!(output.contains("PATH="), "{output}");
    assert!(
        !output.contains(KEY),
        "the key reached the terminal: {output}"
    );
}

#[test]
fn mcp_servers_start_without_the_provider_keys_but_keep_their_own_env() {
    let space = Space::new("policy-mcp");
    let mut agent = space.spawn_with_env(
        &script(vec![
            calls(vec![
                call("m1", "plain__env", json!({})),
                call("m2", "own__env", json!({})),
            ]),
            say("Done."),
        ]),
        &["--permissions", "yolo"],
        &[("OPENAI_API_KEY", KEY)],
    );
    super::initialize(&mut agent, json!({}));
    let id = agent.request(
        "session/new",
        json!({
            "cwd": space.ws.to_str().unwrap(),
            "mcpServers": [
                stdio_server("plain", &[(CUSTOM_ENV, "mine")]),
                stdio_server("own", &[("OPENAI_API_KEY", "the-servers-own-key")]),
            ],
        }),
    );
    let (response, _) = agent.response(&id, WAIT);
    let session = response["result"]["sessionId"]
        .as_str()
        .unwrap()
        .to_string();
    let turn = run_prompt(&mut agent, &session, "go", WAIT, no_requests);
    assert_eq!(turn.stop_reason(), "end_turn", "{}", turn.dump());
    let report = |id: &str| -> Value {
        serde_json::from_str(&turn.final_text(id)).unwrap_or_else(|_| panic!("{}", turn.dump()))
    };
    let plain = report("m1");
    assert_eq!(plain["custom"], "mine", "{plain}");
    assert_eq!(plain["openai_key"], Value::Null, "{plain}");
    // A server configured with the variable gets its configured value.
    assert_eq!(report("m2")["openai_key"], "the-servers-own-key");
}

/// Accepts nothing: whether any connection reached the listener.
fn was_reached(listener: &TcpListener) -> bool {
    listener.set_nonblocking(true).unwrap();
    match listener.accept() {
        Ok(_) => true,
        Err(err) if err.kind() == ErrorKind::WouldBlock => false,
        Err(err) => panic!("accept failed: {err}"),
    }
}

#[test]
fn the_sandbox_policy_confines_commands_without_asking() {
    if !sandbox_available() {
        eprintln!("no sandbox on this machine; the fallback test covers it");
        return;
    }
    let space = Space::new("policy-sandbox");
    git(&space.ws, &["init", "-q"]);
    let config_before = space.read(".git/config");
    space.write(
        "main.c",
        "#include <stdio.h>\nint main(void) { puts(\"built and ran\"); return 0; }\n",
    );
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let outside = space.base.join("outside.txt");
    let (mut agent, session) = space.start(
        &script(vec![
            calls(vec![
                call("s1", "run_command", json!({"command": "touch inside.txt"})),
                call(
                    "s2",
                    "run_command",
                    json!({"command": format!("echo x > {}", outside.display())}),
                ),
                call(
                    "s3",
                    "run_command",
                    json!({"command": "echo x >> .git/config"}),
                ),
                call(
                    "s4",
                    "run_command",
                    json!({"command": format!("bash -c 'echo hi > /dev/tcp/127.0.0.1/{port}'")}),
                ),
                call(
                    "s5",
                    "run_command",
                    json!({"command": "cc -o main main.c && ./main"}),
                ),
                call(
                    "s6",
                    "run_command",
                    json!({"command": format!("curl -s http://127.0.0.1:{port}/")}),
                ),
                call(
                    "s7",
                    "write_file",
                    json!({"path": ".git/description", "content": "x"}),
                ),
                call(
                    "s8",
                    "write_file",
                    json!({"path": "notes.txt", "content": "x"}),
                ),
            ]),
            say("Done."),
        ]),
        &["--permissions", "sandbox", "--on-reject", "continue"],
        json!({}),
    );
    let turn = run_prompt(
        &mut agent,
        &session,
        "go",
        WAIT,
        permissions(vec![
            ("s6", Answer::select("reject_once")),
            ("s7", Answer::select("reject_once")),
        ]),
    );
    assert_eq!(turn.stop_reason(), "end_turn", "{}", turn.dump());
    turn.assert_every_tool_call_finished();
    assert_eq!(turn.permission_ids(), ["s6", "s7"], "{}", turn.dump());
    assert_eq!(turn.final_status("s1"), "completed", "{}", turn.dump());
    assert!(space.exists("inside.txt"));
    assert_eq!(turn.final_status("s2"), "failed", "{}", turn.dump());
    assert!(
        !outside.exists(),
        "a write outside the workspace got through"
    );
    assert_eq!(turn.final_status("s3"), "failed", "{}", turn.dump());
    assert_eq!(space.read(".git/config"), config_before);
    assert_eq!(turn.final_status("s4"), "failed", "{}", turn.dump());
    assert!(!was_reached(&listener), "a connection left the sandbox");
    assert_eq!(turn.final_status("s5"), "completed", "{}", turn.dump());
    assert!(turn.final_text("s5").contains("built and ran"));
    assert_eq!(space.read("notes.txt"), "x");
}

#[test]
#[cfg_attr(
    windows,
    ignore = "Windows has no sandbox: the agent refuses to start (see windows::)"
)]
fn without_a_sandbox_the_sandbox_policy_says_so_and_every_command_asks() {
    let space = Space::new("policy-no-sandbox");
    let mut agent = space.spawn_with_env(
        &script(vec![
            calls(vec![call("f1", "run_command", json!({"command": "ls"}))]),
            say("First."),
            calls(vec![call("f2", "run_command", json!({"command": "pwd"}))]),
            say("Second."),
        ]),
        &["--permissions", "sandbox"],
        &[("SPINDLE_SANDBOX", "off")],
    );
    super::initialize(&mut agent, json!({}));
    let id = agent.request(
        "session/new",
        json!({"cwd": space.ws.to_str().unwrap(), "mcpServers": []}),
    );
    let (response, _) = agent.response(&id, WAIT);
    let result = &response["result"];
    let session = result["sessionId"].as_str().unwrap().to_string();
    let approval = result["configOptions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|o| o["id"] == "tool_approval")
        .unwrap();
    assert_eq!(approval["currentValue"], "sandbox");
    let choice = approval["options"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["value"] == "sandbox")
        .unwrap();
    assert!(
        choice["description"]
            .as_str()
            .unwrap()
            .contains("No sandbox is available here"),
        "{choice}"
    );
    let notice = |turn: &Turn| turn.notices().contains("No sandbox is available here");
    let first = run_prompt(
        &mut agent,
        &session,
        "one",
        WAIT,
        always_answer("allow_once"),
    );
    assert_eq!(first.permission_ids(), ["f1"], "{}", first.dump());
    assert!(notice(&first), "{}", first.dump());
    let second = run_prompt(
        &mut agent,
        &session,
        "two",
        WAIT,
        always_answer("allow_once"),
    );
    assert_eq!(second.permission_ids(), ["f2"], "{}", second.dump());
    assert!(!notice(&second), "said twice: {}", second.dump());
}

#[test]
fn a_write_through_a_hard_link_asks_under_auto() {
    let space = Space::new("policy-hardlink");
    let outside = space.base.join("outside.txt");
    fs::write(&outside, "original\n").unwrap();
    fs::hard_link(&outside, space.path("linked.txt")).unwrap();
    let (mut agent, session) = space.start(
        &script(vec![
            calls(vec![call(
                "h1",
                "write_file",
                json!({"path": "linked.txt", "content": "changed\n"}),
            )]),
            say("Done."),
        ]),
        &["--permissions", "auto"],
        json!({}),
    );
    let turn = run_prompt(
        &mut agent,
        &session,
        "go",
        WAIT,
        always_answer("reject_once"),
    );
    assert_eq!(turn.permission_ids(), ["h1"], "{}", turn.dump());
    assert_eq!(fs::read_to_string(&outside).unwrap(), "original\n");
}

#[test]
fn sandboxed_commands_cannot_read_key_files_or_the_session_database() {
    if !sandbox_available() {
        eprintln!("no sandbox on this machine");
        return;
    }
    let space = Space::new("policy-hidden");
    let key_file = space.base.join("provider.key");
    fs::write(&key_file, format!("{KEY}\n")).unwrap();
    spindle::os::testing::set_mode(&key_file, 0o600).unwrap();
    let config = space.base.join("config.json");
    fs::write(
        &config,
        json!({"providers": {"corp": {"kind": "openai", "base_url": "http://127.0.0.1:9/v1", "api_key_file": key_file}}})
            .to_string(),
    )
    .unwrap();
    let db = space.base.join("db").join("spindle.db");
    fs::create_dir_all(db.parent().unwrap()).unwrap();
    let line = format!(
        "cat {key}; grep -a -o -h PLATYPUS {db} {db}-wal; ls -A {logs}; echo ran",
        key = key_file.display(),
        db = db.display(),
        logs = db.parent().unwrap().join("logs").display()
    );
    let (mut agent, session) = space.start(
        &script(vec![
            calls(vec![call("k1", "run_command", json!({"command": line}))]),
            say("Done."),
        ]),
        &[
            "--permissions",
            "sandbox",
            "--config",
            config.to_str().unwrap(),
            "--db",
            db.to_str().unwrap(),
        ],
        json!({}),
    );
    let turn = run_prompt(
        &mut agent,
        &session,
        "remember the word PLATYPUS",
        WAIT,
        no_requests,
    );
    assert_eq!(turn.stop_reason(), "end_turn", "{}", turn.dump());
    let output = turn.final_text("k1");
    assert!(output.contains("ran"), "{output}");
    assert!(!output.contains(KEY), "the key file was read: {output}");
    assert!(
        !output.contains("PLATYPUS"),
        "the database was read: {output}"
    );
    // Outside the sandbox the word is there to be found.
    let stored: Vec<u8> = [fs::read(&db).unwrap_or_default(), {
        let mut wal = db.clone().into_os_string();
        wal.push("-wal");
        fs::read(wal).unwrap_or_default()
    }]
    .concat();
    assert!(String::from_utf8_lossy(&stored).contains("PLATYPUS"));
}

/// An MCP server that ignores the end of its stdin still dies with an
/// agent killed by SIGKILL (Linux's parent-death signal, from a spawner
/// thread that lives as long as the agent).
#[cfg(target_os = "linux")]
#[test]
fn an_mcp_server_does_not_outlive_an_agent_killed_with_sigkill() {
    use crate::support::mcp_server::{IGNORE_EOF_ENV, PID_FILE_ENV};
    let space = Space::new("policy-mcp-kill");
    let pid_file = space.base.join("mcp.pid");
    let pid_file_text = pid_file.to_str().unwrap().to_string();
    let mut agent = space.spawn_with_env(&script(vec![say("Hi.")]), &[], &[]);
    super::initialize(&mut agent, json!({}));
    let id = agent.request(
        "session/new",
        json!({
            "cwd": space.ws.to_str().unwrap(),
            "mcpServers": [stdio_server("stubborn", &[(IGNORE_EOF_ENV, "1"), (PID_FILE_ENV, &pid_file_text)])],
        }),
    );
    let (response, _) = agent.response(&id, WAIT);
    assert!(response.get("result").is_some(), "{response}");
    let pid: u32 = fs::read_to_string(&pid_file)
        .unwrap()
        .lines()
        .next()
        .unwrap()
        .parse()
        .unwrap();
    agent.kill();
    let gone = super::waits_until(std::time::Duration::from_secs(3), || {
        !std::path::Path::new(&format!("/proc/{pid}")).exists()
            || fs::read_to_string(format!("/proc/{pid}/stat"))
                .is_ok_and(|stat| stat.split(") ").nth(1).unwrap_or("").starts_with('Z'))
    });
    assert!(gone, "the MCP server {pid} outlived the agent");
}

//! The config's `shell`: commands run under the shell it names (bash
//! here, through `spindle exec` and the fake model), the system prompt
//! names it, and a shell Spindle cannot hand a line to is refused at
//! load.

use crate::support::{temp_dir, FakeServer};
use serde_json::json;
use std::path::Path;
use std::process::Output;

fn write_config(dir: &Path, model: &FakeServer, shell: &str) -> std::path::PathBuf {
    let config = dir.join("config.json");
    let text = json!({
        "providers": {"fake": {"kind": "openai", "base_url": model.base_url(),
                               "requires_key": false}},
        "models": {"fake/alpha": {"context_window": 64000}},
        "defaults": {"model": "fake/alpha"},
        "shell": shell,
    });
    std::fs::write(&config, text.to_string()).unwrap();
    config
}

fn exec(dir: &Path, config: &Path, prompt: &str) -> Output {
    crate::support::spindle_command(&dir.join("home"))
        .arg("exec")
        .arg("--config")
        .arg(config)
        .args(["--permissions", "yolo", prompt])
        .current_dir(dir)
        .env_remove("RUST_LOG")
        .output()
        .unwrap()
}

#[cfg(target_os = "linux")]
#[test]
fn a_configured_bash_runs_the_commands_and_is_named_in_the_prompt() {
    use crate::support::fake_openai::{chat_text, chat_tool_calls};
    use crate::support::Reply;
    use std::time::Duration;
    let dir = temp_dir("shell-bash");
    let model = FakeServer::start();
    let config = write_config(&dir, &model, "bash");
    // `[[ ]]` and $BASH_VERSION exist in bash only, not in sh (dash).
    let line = "[[ -n $BASH_VERSION ]] && echo \"in bash ${BASH_VERSION%%.*}\"";
    model.push(Reply::Sse(chat_tool_calls(&[(
        "run_command",
        json!({"command": line}),
    )])));
    model.push(Reply::Sse(chat_text(&["Done."])));
    let out = exec(&dir, &config, "run it");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let requests = model.wait_requests(2, Duration::from_secs(10));
    let system = requests[0].body["messages"][0]["content"].to_string();
    assert!(
        system.contains("Shell: bash (commands run with bash -c)"),
        "{system}"
    );
    let second = requests[1].body["messages"].to_string();
    assert!(second.contains("in bash "), "{second}");
    assert!(second.contains("Exit code: 0"), "{second}");
}

#[test]
fn an_unknown_shell_is_refused_at_load() {
    let dir = temp_dir("shell-fish");
    let model = FakeServer::start();
    let config = write_config(&dir, &model, "fish");
    let out = exec(&dir, &config, "hello");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_ne!(out.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains("shell: \"fish\" is not a shell"),
        "{stderr}"
    );
    assert!(stderr.contains("pwsh, powershell or cmd"), "{stderr}");
    assert!(model.requests().is_empty());
}

//! `spindle trust` / `untrust`, and a project's own defaults
//! (`defaults` in `.spindle/config.json`): used only when the project is
//! trusted, an approval policy only up to `auto`, each case said in a
//! notice and by `spindle doctor`.

use crate::support::agent::notice_text;
use crate::support::prelude::WAIT;
use crate::support::{temp_dir, Agent};
use serde_json::{json, Value};
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

fn spindle(dir: &Path, args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_spindle"))
        .args(args)
        .current_dir(dir)
        .env("SPINDLE_HOME", dir.join("home"))
        .env_remove("RUST_LOG")
        .output()
        .unwrap()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// A new session in `project`: its config options by id, and the
/// notices that followed the answer.
fn open(dir: &Path, project: &Path) -> (Value, String) {
    let script = dir.join("script.json");
    std::fs::write(&script, r#"{"replies": []}"#).unwrap();
    let config = dir.join("config.json");
    let mut agent = Agent::spawn(
        &[
            "acp",
            "--script",
            script.to_str().unwrap(),
            "--config",
            config.to_str().unwrap(),
        ],
        &[],
    );
    agent.initialize();
    let id = agent.request(
        "session/new",
        json!({"cwd": project.to_str().unwrap(), "mcpServers": []}),
    );
    let (answer, _) = agent.response(&id, WAIT);
    let mut options = json!({});
    for option in answer["result"]["configOptions"].as_array().unwrap() {
        options[option["id"].as_str().unwrap()] = option["currentValue"].clone();
    }
    let mut notices = String::new();
    let deadline = Instant::now() + Duration::from_millis(1500);
    while let Some(message) = agent.recv(deadline.saturating_duration_since(Instant::now())) {
        notices.push_str(&notice_text(&message["params"]["update"]));
    }
    (options, notices)
}

#[test]
fn trust_and_untrust_edit_the_users_config() {
    let dir = temp_dir("trust-cli");
    let project = dir.join("project");
    std::fs::create_dir_all(&project).unwrap();
    let config = dir.join("config.json");
    std::fs::write(&config, r#"{"defaults": {"preset": "light"}}"#).unwrap();
    let key = spindle::os::canonical(&project)
        .unwrap()
        .display()
        .to_string();
    let out = spindle(&project, &["trust", "--config", config.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).starts_with(&format!("Trusted {key}")),
        "{}",
        text(&out.stdout)
    );
    // Trust is the path's: said where it is given.
    assert!(
        text(&out.stdout).contains("moving or renaming the folder loses it"),
        "{}",
        text(&out.stdout)
    );
    let saved: Value = serde_json::from_slice(&std::fs::read(&config).unwrap()).unwrap();
    assert_eq!(
        saved["permissions"]["projects"][&key]["trusted"], true,
        "{saved}"
    );
    assert_eq!(
        saved["defaults"]["preset"], "light",
        "the rest is kept: {saved}"
    );
    let out = spindle(
        &dir,
        &[
            "untrust",
            project.to_str().unwrap(),
            "--config",
            config.to_str().unwrap(),
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let saved: Value = serde_json::from_slice(&std::fs::read(&config).unwrap()).unwrap();
    assert!(
        saved["permissions"]["projects"].get(&key).is_none(),
        "{saved}"
    );
    // Not a folder: said, and nothing written.
    let out = spindle(
        &dir,
        &["trust", "nowhere", "--config", config.to_str().unwrap()],
    );
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("nowhere"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn a_projects_defaults_count_only_when_it_is_trusted() {
    let dir = temp_dir("trust-defaults");
    let project = spindle::os::canonical(dir.join("."))
        .unwrap()
        .join("project");
    std::fs::create_dir_all(project.join(".spindle")).unwrap();
    std::fs::write(
        project.join(".spindle/config.json"),
        r#"{"defaults": {"approval": "auto", "preset": "delivery"}}"#,
    )
    .unwrap();
    std::fs::write(dir.join("config.json"), "{}").unwrap();
    let (options, notices) = open(&dir, &project);
    assert_eq!(options["tool_approval"], "ask", "{options}");
    assert_eq!(options["agent_preset"], "balanced", "{options}");
    assert!(
        notices.contains("The project's defaults are ignored"),
        "{notices}"
    );
    assert!(notices.contains("spindle trust"), "{notices}");
    let doctor = spindle(
        &project,
        &[
            "doctor",
            "--config",
            dir.join("config.json").to_str().unwrap(),
        ],
    );
    let report = text(&doctor.stdout);
    assert!(
        report.contains("ignored: the project is not trusted"),
        "{report}"
    );

    let config = dir.join("config.json");
    let out = spindle(&project, &["trust", "--config", config.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let (options, notices) = open(&dir, &project);
    assert_eq!(options["tool_approval"], "auto", "{options}");
    assert_eq!(options["agent_preset"], "delivery", "{options}");
    assert!(notices.contains("Project defaults"), "{notices}");
    assert!(notices.contains("approval auto"), "{notices}");
    let doctor = spindle(&project, &["doctor", "--config", config.to_str().unwrap()]);
    assert!(
        text(&doctor.stdout).contains("the project is trusted"),
        "{}",
        text(&doctor.stdout)
    );

    // Even trusted, a project does not start sessions in yolo.
    std::fs::write(
        project.join(".spindle/config.json"),
        r#"{"defaults": {"approval": "yolo"}}"#,
    )
    .unwrap();
    let (options, notices) = open(&dir, &project);
    assert_eq!(options["tool_approval"], "ask", "{options}");
    assert!(notices.contains("ask or auto at most"), "{notices}");
}

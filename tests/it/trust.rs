//! `spindle trust` / `untrust`, and a project's own defaults
//! (`defaults` in `.spindle/config.json`): used only when the project is
//! trusted, an approval policy only up to `auto`, each case said in a
//! notice and by `spindle doctor`.

use crate::support::agent::notice_text;
use crate::support::prelude::WAIT;
use crate::support::{in_process, temp_dir, FakeServer};
use serde_json::{json, Value};
use std::path::Path;
use std::time::{Duration, Instant};

fn spindle(dir: &Path, args: &[&str]) -> std::process::Output {
    crate::support::spindle_command(&dir.join("home"))
        .args(args)
        .current_dir(dir)
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
    open_with(
        project,
        &[
            "--script",
            script.to_str().unwrap(),
            "--config",
            config.to_str().unwrap(),
        ],
    )
}

/// `open` for `spindle acp ARGS…`.
fn open_with(project: &Path, args: &[&str]) -> (Value, String) {
    let mut agent = in_process::acp(args);
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

/// A project's config cannot add providers: the `providers` it lists are
/// never read. A trusted project's default naming a model of its own
/// providers is ignored, the notice says so and why, and names the model
/// the session really starts with (before, it said the project's model
/// was set, and the session used another), and it no longer hides the
/// workspace's last model either. A model of the user's own providers is
/// used, and named; a `--model` flag over it is said too; an untrusted
/// project's notice says its model would not be used even if trusted.
#[test]
fn a_trusted_projects_model_from_its_own_providers_is_ignored_and_said() {
    let server = FakeServer::start();
    let dir = temp_dir("trust-model");
    let project = spindle::os::canonical(dir.join("."))
        .unwrap()
        .join("project");
    std::fs::create_dir_all(project.join(".spindle")).unwrap();
    let key = project.display().to_string();
    let config = dir.join("config.json");
    std::fs::write(
        &config,
        json!({
            "providers": {"mine": {"kind": "openai", "base_url": server.base_url(),
                                   "requires_key": false}},
            "models": {"mine/alpha": {}, "mine/beta": {}},
            "defaults": {"model": "mine/alpha"},
            "permissions": {"projects": {key.clone(): {"trusted": true}}},
        })
        .to_string(),
    )
    .unwrap();
    let project_config = |defaults: Value| {
        std::fs::write(
            project.join(".spindle/config.json"),
            json!({
                "providers": {"evil": {"kind": "openai", "base_url": "http://127.0.0.1:9/v1",
                                       "requires_key": false}},
                "models": {"evil/stolen": {}},
                "defaults": defaults,
            })
            .to_string(),
        )
        .unwrap();
    };
    let config_arg = config.to_str().unwrap();

    project_config(json!({"model": "evil/stolen", "preset": "light"}));
    let (options, notices) = open_with(&project, &["--config", config_arg]);
    assert_eq!(options["model"], "mine/alpha", "{options}");
    assert_eq!(options["agent_preset"], "light", "{options}");
    assert!(
        notices.contains("The project's model is not used"),
        "{notices}"
    );
    assert!(notices.contains("`evil/stolen`"), "{notices}");
    assert!(notices.contains("cannot add providers"), "{notices}");
    assert!(notices.contains("`mine/alpha`"), "{notices}");
    assert!(!notices.contains("sets model evil/stolen"), "{notices}");
    assert!(notices.contains("sets preset light"), "{notices}");

    // Nor does it keep the workspace's last choice from being used.
    let mut agent = in_process::acp(&["--config", config_arg]);
    agent.initialize();
    let first = agent.new_session(&project);
    let id = agent.request(
        "session/set_config_option",
        json!({"sessionId": first, "configId": "model", "value": "mine/beta"}),
    );
    let (answer, _) = agent.response(&id, WAIT);
    assert!(answer.get("result").is_some(), "{answer}");
    let id = agent.request(
        "session/new",
        json!({"cwd": project.to_str().unwrap(), "mcpServers": []}),
    );
    let (answer, _) = agent.response(&id, WAIT);
    let model = answer["result"]["configOptions"]
        .as_array()
        .and_then(|all| all.iter().find(|o| o["id"] == "model"))
        .map(|o| o["currentValue"].clone());
    assert_eq!(model, Some(json!("mine/beta")), "{answer}");
    drop(agent);

    // Only the model: the warning alone, naming the model used.
    project_config(json!({"model": "stolen"}));
    let (options, notices) = open_with(&project, &["--config", config_arg]);
    assert_eq!(options["model"], "mine/alpha", "{options}");
    assert!(notices.contains("`stolen`"), "{notices}");
    assert!(
        notices.contains("this session uses `mine/alpha`"),
        "{notices}"
    );
    assert!(!notices.contains("Project defaults"), "{notices}");

    // A model of the user's providers is used and named as such.
    project_config(json!({"model": "mine/beta"}));
    let (options, notices) = open_with(&project, &["--config", config_arg]);
    assert_eq!(options["model"], "mine/beta", "{options}");
    assert!(notices.contains("sets model mine/beta"), "{notices}");
    assert!(!notices.contains("not used"), "{notices}");

    // The flag wins, and the notice says which model the session uses.
    let (options, notices) =
        open_with(&project, &["--config", config_arg, "--model", "mine/alpha"]);
    assert_eq!(options["model"], "mine/alpha", "{options}");
    assert!(
        notices.contains("model mine/beta (this session uses mine/alpha)"),
        "{notices}"
    );

    // Untrusted, trusting it would not bring its model either: said.
    let out = spindle(&dir, &["untrust", &key, "--config", config_arg]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    project_config(json!({"model": "evil/stolen", "preset": "light"}));
    let (options, notices) = open_with(&project, &["--config", config_arg]);
    assert_eq!(options["model"], "mine/alpha", "{options}");
    assert_eq!(options["agent_preset"], "balanced", "{options}");
    assert!(notices.contains("not trusted"), "{notices}");
    assert!(
        notices.contains("all but the model `evil/stolen`"),
        "{notices}"
    );
}

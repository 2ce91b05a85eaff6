//! A repository set up for Claude Code, with Spindle started in one of
//! its subfolders: the root's `.claude/`, `.mcp.json` and trust are the
//! project's, and `spindle trust` there trusts the root. A home folder
//! kept in git is never a project root found by climbing: the user's own
//! `~/.claude` and `~/CLAUDE.md` are not a project's. The hooks are `sh`
//! lines (Unix).

use crate::support::client::no_requests;
use crate::support::fake_openai::chat_text;
use crate::support::prelude::{ok_with, one_model_config, WAIT};
use crate::support::{run_prompt, temp_dir, write_file, Agent, FakeServer, Reply};
use serde_json::{json, Value};
use std::fs;
use std::path::Path;

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// `spindle ARGS…` run in `cwd` with the home `home`.
fn spindle(home: &Path, cwd: &Path, args: &[&str]) -> std::process::Output {
    crate::support::spindle_command(home)
        .args(args)
        .current_dir(cwd)
        .output()
        .unwrap()
}

/// One prompt in a session at `cwd`; the model's request bodies.
fn prompt_in(cwd: &Path, config: &Path, env: &[(&str, &str)], model: &FakeServer) -> Vec<Value> {
    let before = model.requests().len();
    model.push(Reply::Sse(chat_text(&["ok"])));
    let config = config.to_str().unwrap();
    let mut agent = Agent::spawn(&["acp", "--config", config, "--permissions", "yolo"], env);
    agent.initialize();
    let (result, _) = ok_with(
        &mut agent,
        "session/new",
        json!({"cwd": cwd.to_str().unwrap(), "mcpServers": []}),
    );
    let session = result["sessionId"].as_str().unwrap().to_string();
    run_prompt(&mut agent, &session, "go", WAIT, no_requests);
    model.requests()[before..]
        .iter()
        .map(|r| r.body.clone())
        .collect()
}

#[test]
#[cfg_attr(windows, ignore = "sh command lines")]
fn a_subfolder_uses_the_roots_claude_settings_and_trust() {
    let model = FakeServer::start();
    let base = spindle::os::canonical(temp_dir("project-root")).unwrap();
    let root = base.join("repo");
    let sub = root.join("sub");
    fs::create_dir_all(root.join(".git")).unwrap();
    fs::create_dir_all(&sub).unwrap();
    let marker = base.join("hook-ran");
    let hook = json!({"type": "command", "command": format!("touch {}", marker.display())});
    write_file(
        &root,
        ".claude/settings.json",
        json!({"hooks": {"UserPromptSubmit": [{"hooks": [hook]}]}}).to_string(),
    );
    write_file(
        &root,
        ".mcp.json",
        json!({"mcpServers": {"team": {"command": "team-server"}}}).to_string(),
    );
    // An older version's trust of the subfolder itself: it was never
    // given for the root's settings, so it does not count for them.
    let config = base.join("config.json");
    fs::write(&config, one_model_config(&model, Some(&sub)).to_string()).unwrap();

    // Untrusted: the root's hook does not run from the subfolder.
    prompt_in(&sub, &config, &[], &model);
    assert!(!marker.exists(), "an untrusted project's hook ran");
    let home = base.join("home");
    let config_arg = config.to_str().unwrap();
    let db = base.join("none.db");
    let db_arg = db.to_str().unwrap();
    let out = spindle(
        &home,
        &sub,
        &["doctor", "--config", config_arg, "--db", db_arg],
    );
    let doctor = text(&out.stdout);
    assert!(
        doctor.contains(&format!(
            "{} was trusted by an older Spindle; trust now goes with the project root, {}",
            sub.display(),
            root.display()
        )),
        "{doctor}"
    );

    // `spindle trust` in the subfolder trusts the root, and says so.
    let out = spindle(&home, &sub, &["trust", "--config", config_arg]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let said = text(&out.stdout);
    assert!(
        said.starts_with(&format!("Trusted {}", root.display()))
            && said.contains(&format!("the project root of {}", sub.display())),
        "{said}"
    );
    let saved: Value = serde_json::from_slice(&fs::read(&config).unwrap()).unwrap();
    let projects = &saved["permissions"]["projects"];
    assert_eq!(
        projects[root.display().to_string()]["trusted"],
        true,
        "{saved}"
    );
    assert_eq!(projects.as_object().unwrap().len(), 2, "{saved}");

    // Trusted: the root's hook runs from the subfolder, and `mcp list`
    // there names the root's `.mcp.json` server as used.
    prompt_in(&sub, &config, &[], &model);
    assert!(marker.exists(), "the trusted root's hook did not run");
    let out = spindle(&home, &sub, &["mcp", "list", "--config", config_arg]);
    let listed = text(&out.stdout);
    let mcp_json = root.join(".mcp.json");
    assert!(
        listed.contains(&format!(
            "team  team-server  (from {})\n",
            mcp_json.display()
        )),
        "{listed}"
    );
}

#[test]
#[cfg_attr(windows, ignore = "sh command lines")]
fn a_home_kept_in_git_is_not_the_project_of_its_folders() {
    let model = FakeServer::start();
    let base = spindle::os::canonical(temp_dir("project-home")).unwrap();
    // The user's home is a dotfiles repository with their own Claude
    // settings and instructions; the project below it has no `.git`.
    let home = base.join("home");
    let project = home.join("project");
    fs::create_dir_all(home.join(".git")).unwrap();
    fs::create_dir_all(&project).unwrap();
    let marker = base.join("home-hook-ran");
    let hook = json!({"type": "command", "command": format!("touch {}", marker.display())});
    write_file(
        &home,
        ".claude/settings.json",
        json!({"hooks": {"UserPromptSubmit": [{"hooks": [hook]}]}}).to_string(),
    );
    write_file(&home, "CLAUDE.md", "HOME-INSTRUCTIONS-MARKER\n");
    write_file(
        &home,
        ".mcp.json",
        json!({"mcpServers": {"dotfiles": {"command": "home-server"}}}).to_string(),
    );
    // The user trusts both their home and the project.
    let mut settings = one_model_config(&model, Some(&home));
    settings["permissions"]["projects"][project.display().to_string()] = json!({"trusted": true});
    let config = base.join("config.json");
    fs::write(&config, settings.to_string()).unwrap();

    let home_text = home.to_str().unwrap();
    let env = [("HOME", home_text), ("USERPROFILE", home_text)];
    let bodies = prompt_in(&project, &config, &env, &model);
    assert!(!bodies.is_empty());
    assert!(
        !marker.exists(),
        "the home's .claude/settings.json ran as the project's"
    );
    for body in &bodies {
        assert!(
            !body.to_string().contains("HOME-INSTRUCTIONS-MARKER"),
            "the home's CLAUDE.md was read as the project's: {body}"
        );
    }
    // `mcp list` and `trust` see the project folder alone.
    let config_arg = config.to_str().unwrap();
    let out = spindle(&home, &project, &["mcp", "list", "--config", config_arg]);
    let listed = text(&out.stdout);
    assert!(!listed.contains("dotfiles"), "{listed}");
    let out = spindle(&home, &project, &["trust", "--config", config_arg]);
    let said = text(&out.stdout);
    assert!(
        said.starts_with(&format!("Trusted {}:", project.display())),
        "{said}"
    );
}

#[test]
fn trust_says_what_it_turns_on_and_doctor_and_mcp_list_point_at_it() {
    let base = spindle::os::canonical(temp_dir("project-brings")).unwrap();
    let root = base.join("repo");
    let sub = root.join("sub");
    fs::create_dir_all(root.join(".git")).unwrap();
    fs::create_dir_all(&sub).unwrap();
    let hook = json!({"type": "command", "command": "true"});
    write_file(
        &root,
        ".claude/settings.json",
        json!({"hooks": {
            "PreToolUse": [{"matcher": "Bash", "hooks": [hook.clone()]},
                           {"matcher": "Edit", "hooks": [hook.clone()]}],
            "Stop": [{"hooks": [hook]}],
        },
        "permissions": {"allow": ["Bash(cargo test:*)"], "deny": ["Bash(curl:*)"]}})
        .to_string(),
    );
    write_file(
        &root,
        ".mcp.json",
        json!({"mcpServers": {"team": {"command": "/nonexistent/team"}}}).to_string(),
    );
    write_file(
        &root,
        ".spindle/config.json",
        json!({
            "mcp_servers": [{"name": "own", "command": "/nonexistent/own"}],
            "permissions": {"rules": [
                {"tool": "run_command", "command": "make test", "decision": "allow"},
                {"tool": "run_command", "command": "rm", "decision": "deny"},
            ]},
            "defaults": {"model": "fake/alpha"},
        })
        .to_string(),
    );
    write_file(
        &root,
        ".claude/skills/release/SKILL.md",
        "---\nname: release\ndescription: Cut a release\n---\nSteps.\n",
    );
    write_file(&root, ".claude/commands/ship.md", "Ship it.\n");
    write_file(&root, ".claude/agents/reviewer.md", "Review.\n");
    let config = base.join("config.json");
    fs::write(&config, "{}").unwrap();
    let config_arg = config.to_str().unwrap();
    let home = base.join("home");
    let mcp_json = root.join(".mcp.json");

    // Untrusted: doctor names the servers it does not start, and both it
    // and `mcp list` point at `spindle trust`.
    let db = base.join("none.db");
    let out = spindle(
        &home,
        &sub,
        &[
            "doctor",
            "--config",
            config_arg,
            "--db",
            db.to_str().unwrap(),
        ],
    );
    let doctor = text(&out.stdout);
    assert!(
        doctor.contains(&format!(
            "warn  team: from {}; not started: the project {} is not trusted (`spindle trust` there starts it)",
            mcp_json.display(),
            root.display()
        )) && doctor.contains("warn  own: from "),
        "{doctor}"
    );
    let out = spindle(&home, &sub, &["mcp", "list", "--config", config_arg]);
    let listed = text(&out.stdout);
    assert!(
        listed.contains(&format!(
            "team  /nonexistent/team  (from {}; not used: the project {} is not trusted (`spindle trust` there uses it))",
            mcp_json.display(),
            root.display()
        )),
        "{listed}"
    );
    assert!(!listed.contains("permissions.projects"), "{listed}");

    // Trust says what it turns on, untrust what it turns off.
    let brings = [
        "- 3 hooks (PreToolUse 2, Stop 1) from .claude/settings.json\n",
        "- 2 MCP servers: own (from .spindle/config.json), team (from .mcp.json)\n",
        "- 1 skill: release\n",
        "- 1 command: /ship\n",
        "- 1 allow rule of .spindle/config.json: `make test …`\n",
        "- 1 allow rule of .claude/settings*.json: `cargo test …`\n",
        "- defaults of .spindle/config.json: model fake/alpha\n",
        "- 1 agent in .claude/agents (reviewer): Spindle does not run Claude Code's agents",
    ];
    for (command, heading) in [
        ("trust", "Now turned on:\n"),
        ("untrust", "Now turned off:\n"),
    ] {
        let out = spindle(&home, &sub, &[command, "--config", config_arg]);
        assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
        let said = text(&out.stdout);
        assert!(said.contains(heading), "{said}");
        for line in brings {
            assert!(said.contains(line), "{line:?} in\n{said}");
        }
    }
}

#[test]
fn mcp_add_project_writes_the_roots_mcp_json_and_never_through_a_link() {
    let base = spindle::os::canonical(temp_dir("project-mcp-add")).unwrap();
    let root = base.join("repo");
    let sub = root.join("sub");
    fs::create_dir_all(root.join(".git")).unwrap();
    fs::create_dir_all(&sub).unwrap();
    let mcp_json = root.join(".mcp.json");
    fs::write(
        &mcp_json,
        r#"{"mcpServers": {"other": {"command": "other-server"}}, "extra": 1}"#,
    )
    .unwrap();
    let config = base.join("config.json");
    fs::write(&config, "{}").unwrap();
    let config_arg = config.to_str().unwrap();
    let home = base.join("home");
    let add = |args: &[&str]| {
        let mut all = vec!["mcp", "add", "--project", "--config", config_arg];
        all.extend_from_slice(args);
        spindle(&home, &sub, &all)
    };

    let out = add(&[
        "team",
        "--env",
        "LEVEL=debug",
        "--",
        "/opt/team",
        "serve",
        "-v",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let said = text(&out.stdout);
    assert!(
        said.starts_with(&format!(
            "Added the MCP server team to {}; a project's servers run only once the project is trusted",
            mcp_json.display()
        )) && said.contains(&format!(
            "{} is not trusted yet: `spindle trust` there starts it",
            root.display()
        )),
        "{said}"
    );
    let out = add(&[
        "web",
        "--url",
        "http://127.0.0.1:9/mcp",
        "--header",
        "X-Team: blue",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let written = fs::read_to_string(&mcp_json).unwrap();
    assert!(
        written.contains("\n  \"mcpServers\": {\n"),
        "indented: {written}"
    );
    let value: Value = serde_json::from_str(&written).unwrap();
    assert_eq!(value["extra"], 1, "{value}");
    assert_eq!(
        value["mcpServers"]["other"]["command"], "other-server",
        "{value}"
    );
    assert_eq!(
        value["mcpServers"]["team"],
        json!({"command": "/opt/team", "args": ["serve", "-v"], "env": {"LEVEL": "debug"}})
    );
    assert_eq!(
        value["mcpServers"]["web"],
        json!({"type": "http", "url": "http://127.0.0.1:9/mcp", "headers": {"X-Team": "blue"}})
    );
    // Spindle reads back what it wrote.
    let out = spindle(&home, &sub, &["mcp", "list", "--config", config_arg]);
    let listed = text(&out.stdout);
    assert!(
        listed.contains(&format!(
            "team  /opt/team serve -v  (from {}",
            mcp_json.display()
        )),
        "{listed}"
    );

    // A name already there is refused, as in your config.
    let out = add(&["team", "--", "/opt/else"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("already has an MCP server named \"team\""),
        "{}",
        text(&out.stderr)
    );
    assert_eq!(fs::read_to_string(&mcp_json).unwrap(), written);

    // Once trusted, it says so; remove --project takes one out.
    let out = spindle(&home, &sub, &["trust", "--config", config_arg]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let out = add(&["more", "--", "/opt/more"]);
    let said = text(&out.stdout);
    assert!(
        said.contains(&format!(
            "{} is trusted, so new sessions there start it",
            root.display()
        )),
        "{said}"
    );
    let out = spindle(
        &home,
        &sub,
        &["mcp", "remove", "more", "--project", "--config", config_arg],
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let value: Value = serde_json::from_slice(&fs::read(&mcp_json).unwrap()).unwrap();
    assert!(value["mcpServers"].get("more").is_none(), "{value}");
    assert!(value["mcpServers"].get("team").is_some(), "{value}");

    // A `.mcp.json` that is a link out of the project is never written
    // through: refused, the file it points at untouched.
    let outside = base.join("outside.json");
    fs::write(&outside, "{}").unwrap();
    fs::remove_file(&mcp_json).unwrap();
    spindle::os::testing::symlink(&outside, &mcp_json).unwrap();
    let out = add(&["evil", "--", "/opt/evil"]);
    assert_eq!(out.status.code(), Some(1));
    let error = text(&out.stderr);
    assert!(
        error.contains(&format!("{} is a symbolic link", mcp_json.display()))
            && error.contains("only as a regular file"),
        "{error}"
    );
    assert_eq!(fs::read_to_string(&outside).unwrap(), "{}");
    assert!(fs::symlink_metadata(&mcp_json)
        .unwrap()
        .file_type()
        .is_symlink());
}

//! The `@path` imports of instruction files under attack, through the real
//! binary: a workspace two levels inside a larger git repository (a home
//! folder kept as a dotfiles repository), whose `AGENTS.md` imports the
//! outer repository's secret by `..`, by an absolute path, by `~`, through
//! a link, through a hard link placed in the workspace, and a FIFO. The
//! secret never reaches the model; `/memory` and `spindle doctor` name
//! each refused import with why.

use crate::support::client::no_requests;
use crate::support::fake_openai::chat_text;
use crate::support::prelude::{one_model_config, WAIT};
use crate::support::{run_prompt, temp_dir, write_file, Agent, FakeServer, Reply};
use std::path::Path;
use std::process::Command;

const SECRET: &str = "OUTER-SECRET-5150";

fn git_init(dir: &Path) {
    let output = Command::new("git")
        .args(["init", "-q"])
        .current_dir(dir)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("HOME", dir)
        .output()
        .expect("git runs");
    assert!(output.status.success(), "git init failed: {output:?}");
}

#[test]
#[cfg_attr(windows, ignore = "FIFOs, links and hard links as Unix makes them")]
fn imports_never_leave_the_workspace_inside_a_larger_repository() {
    let outer = spindle::os::canonical(temp_dir("imports-outer")).unwrap();
    git_init(&outer);
    write_file(&outer, "secret", format!("{SECRET}\n"));
    write_file(&outer, "secret-too", format!("{SECRET}\n"));
    let home = outer.join("home");
    std::fs::create_dir_all(&home).unwrap();
    let ws = outer.join("projects").join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    write_file(&ws, "docs/fine.md", "FINE-RULE: tabs.\n");
    spindle::os::testing::symlink("../../secret", ws.join("escape.md")).unwrap();
    std::fs::hard_link(outer.join("secret-too"), ws.join("hard.md")).unwrap();
    #[cfg(unix)]
    assert!(Command::new("mkfifo")
        .arg(ws.join("pipe.md"))
        .status()
        .unwrap()
        .success());
    let absolute = outer.join("secret").display().to_string();
    write_file(
        &ws,
        "AGENTS.md",
        format!(
            "Team rules: @docs/fine.md\nAlso @../../secret, @{absolute}, @~/secret, \
             @escape.md, @hard.md and @pipe.md.\n"
        ),
    );
    // A file between the repository root and the workspace: read, but
    // its imports stay in the workspace too.
    write_file(&outer, "projects/AGENTS.md", "MIDDLE-RULE @../secret\n");

    let model = FakeServer::start();
    let config = outer.join("config.json");
    std::fs::write(&config, one_model_config(&model, None).to_string()).unwrap();
    let home_str = home.to_str().unwrap();
    let mut agent = Agent::spawn(
        &["acp", "--config", config.to_str().unwrap()],
        &[("HOME", home_str), ("USERPROFILE", home_str)],
    );
    agent.initialize();
    let session = agent.new_session(&ws);
    model.push(Reply::Sse(chat_text(&["ok"])));
    let turn = run_prompt(&mut agent, &session, "hello", WAIT, no_requests);
    assert_eq!(turn.stop_reason(), "end_turn", "{}", turn.dump());
    let requests = model.wait_requests(1, WAIT);
    let body = requests[0].body.to_string();
    assert!(
        body.contains("FINE-RULE") && body.contains("MIDDLE-RULE"),
        "{body:.2000}"
    );
    for request in model.requests() {
        assert!(
            !request.body.to_string().contains(SECRET),
            "the outer secret reached the model"
        );
    }
    // The session's notice names them too; never their content.
    let notices = turn.notices();
    assert!(
        notices.contains("@escape.md in the project's AGENTS.md"),
        "{notices}"
    );
    assert!(!notices.contains(SECRET), "{notices}");

    let memory = run_prompt(&mut agent, &session, "/memory", WAIT, no_requests).text();
    assert!(!memory.contains(SECRET), "{memory}");
    // /memory is Markdown: its lines are escaped (`\(`, `\~`); the
    // words are matched without the escapes.
    let plain = memory.replace('\\', "");
    let named = |name: &str, why: &str| {
        plain.lines().any(|line| {
            line.contains(&format!(
                "Not imported: @{name} from the project's AGENTS.md"
            )) && line.contains(why)
        })
    };
    for (name, why) in [
        ("../../secret", "outside the workspace"),
        (absolute.as_str(), "absolute path is never imported"),
        ("~/secret", "home folder"),
        ("escape.md", "a link to a file outside its folder"),
        ("hard.md", "another name (a hard link)"),
        ("pipe.md", "not a regular file"),
    ] {
        assert!(named(name, why), "@{name} ({why}) not named:\n{memory}");
    }
    assert!(
        memory.contains("Not imported: @../secret from the project's ")
            && memory.contains("it is outside the workspace"),
        "{memory}"
    );
    assert_eq!(model.requests().len(), 1, "/memory calls no model");

    // spindle doctor, run in the workspace, names them with why.
    let mut command = crate::support::spindle_command(&home.join(".spindle"));
    command
        .args(["doctor", "--config", config.to_str().unwrap()])
        .current_dir(&ws)
        .env("HOME", &home);
    let output = command.output().unwrap();
    let report = String::from_utf8_lossy(&output.stdout);
    assert!(!report.contains(SECRET), "{report}");
    for (name, why) in [
        ("../../secret", "outside the workspace"),
        ("hard.md", "hard link"),
        ("pipe.md", "not a regular file"),
        ("escape.md", "a link"),
    ] {
        assert!(
            report.lines().any(|line| line
                .contains(&format!("@{name} in the project's AGENTS.md"))
                && line.contains(why)),
            "@{name} not in:\n{report}"
        );
    }
    let _ = std::fs::remove_dir_all(&outer);
}

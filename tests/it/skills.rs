//! Agent Skills through the real binary: a Claude-Code-shaped project
//! (`.claude/skills/review/SKILL.md` and a file beside it) and the user's
//! own skills (`~/.claude/skills/`, `$SPINDLE_HOME/skills/`). Listed in the
//! system prompt by name and description, loaded with the `skill` tool,
//! run as slash commands, listed by `/skills` and `_spindle/operations`;
//! a project's only when the user trusts it, and never through a link out.

use crate::support::client::no_requests;
use crate::support::fake_openai::{chat_text, chat_tool_calls};
use crate::support::prelude::{ok_with, one_model_config, WAIT};
use crate::support::{run_prompt, temp_dir, write_file, Agent, FakeServer, Reply};
use serde_json::{json, Value};
use std::fs;
use std::path::{Path, PathBuf};

const REVIEW: &str = "---\nname: review\ndescription: Review code the team's way\n---\n# Review\nCheck SECRET-REVIEW-STEPS, then read reference.md.\n";

struct Bench {
    model: FakeServer,
    base: PathBuf,
    ws: PathBuf,
    home: PathBuf,
    config: PathBuf,
}

impl Bench {
    fn new(name: &str, trusted: bool) -> Bench {
        let model = FakeServer::start();
        let base = spindle::os::canonical(temp_dir(name)).unwrap();
        let ws = base.join("ws");
        let home = base.join("user");
        fs::create_dir_all(&ws).unwrap();
        write_file(&ws, ".claude/skills/review/SKILL.md", REVIEW);
        write_file(&ws, ".claude/skills/review/reference.md", "REFERENCE-TEXT");
        write_file(
            &home,
            ".claude/skills/notes/SKILL.md",
            "---\nname: notes\ndescription: Keep meeting notes\n---\nWrite NOTES-BODY.\n",
        );
        let config = one_model_config(&model, trusted.then_some(ws.as_path()));
        let path = base.join("config.json");
        fs::write(&path, config.to_string()).unwrap();
        Bench {
            model,
            base,
            ws,
            home,
            config: path,
        }
    }

    fn agent(&self) -> Agent {
        let config = self.config.to_str().unwrap();
        let home = self.home.to_str().unwrap();
        let mut agent = Agent::spawn(
            &["acp", "--config", config, "--permissions", "yolo"],
            &[("HOME", home), ("USERPROFILE", home)],
        );
        write_file(
            agent.home(),
            "skills/deploy/SKILL.md",
            "---\nname: deploy\ndescription: Deploy the service\n---\nDEPLOY-BODY\n",
        );
        agent.initialize();
        agent
    }

    fn last_body(&self) -> Value {
        self.model.requests().pop().expect("no model request").body
    }
}

impl Drop for Bench {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            let _ = fs::remove_dir_all(&self.base);
        }
    }
}

fn system(body: &Value) -> String {
    body["messages"][0]["content"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

fn offered(body: &Value) -> Vec<String> {
    body["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|t| t["function"]["name"].as_str().map(str::to_string))
        .collect()
}

/// Opens a session and returns its id and the commands first announced.
fn open(agent: &mut Agent, cwd: &Path) -> (String, Vec<String>) {
    let (result, _) = ok_with(
        agent,
        "session/new",
        json!({"cwd": cwd.to_str().unwrap(), "mcpServers": []}),
    );
    let session = result["sessionId"].as_str().unwrap().to_string();
    let deadline = std::time::Instant::now() + WAIT;
    loop {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        let message = agent.recv(left).expect("no available_commands_update");
        let update = &message["params"]["update"];
        if update["sessionUpdate"] == "available_commands_update" {
            let names = update["availableCommands"]
                .as_array()
                .unwrap()
                .iter()
                .map(|c| c["name"].as_str().unwrap().to_string())
                .collect();
            return (session, names);
        }
    }
}

#[test]
fn an_untrusted_projects_skills_are_left_out_and_never_reach_the_model() {
    let bench = Bench::new("skills-untrusted", false);
    let mut agent = bench.agent();
    let (session, commands) = open(&mut agent, &bench.ws);
    assert!(commands.contains(&"notes".to_string()), "{commands:?}");
    assert!(commands.contains(&"deploy".to_string()), "{commands:?}");
    assert!(!commands.contains(&"review".to_string()), "{commands:?}");

    bench.model.push(Reply::Sse(chat_text(&["hi"])));
    run_prompt(&mut agent, &session, "hello", WAIT, no_requests);
    let body = bench.last_body();
    let prompt = system(&body);
    assert!(prompt.contains("- notes: Keep meeting notes"), "{prompt}");
    assert!(prompt.contains("- deploy: Deploy the service"), "{prompt}");
    assert!(!prompt.contains("the team's way"), "{prompt}");
    assert!(!body.to_string().contains("SECRET-REVIEW-STEPS"));
    assert!(offered(&body).contains(&"skill".to_string()));

    // Asked for by name, the project's skill is not there.
    bench.model.push(Reply::Sse(chat_tool_calls(&[(
        "skill",
        json!({"name": "review"}),
    )])));
    bench.model.push(Reply::Sse(chat_text(&["ok"])));
    let turn = run_prompt(&mut agent, &session, "review", WAIT, no_requests);
    let text = turn.final_text("call_1");
    assert!(text.contains("there is no skill \"review\""), "{text}");
    assert!(!text.contains("SECRET"), "{text}");

    let turn = run_prompt(&mut agent, &session, "/skills", WAIT, no_requests);
    let reply = turn.text();
    assert!(
        reply.contains("/notes") && reply.contains("your ~/.claude/skills"),
        "{reply}"
    );
    assert!(
        reply.contains("/deploy") && reply.contains("your Spindle skills"),
        "{reply}"
    );
    assert!(reply.contains("Left out"), "{reply}");
    assert!(
        reply.contains("review") && reply.contains("not trusted"),
        "{reply}"
    );
}

#[test]
fn a_trusted_projects_skills_load_on_demand_and_run_as_commands() {
    let bench = Bench::new("skills-trusted", true);
    let mut agent = bench.agent();
    let (session, commands) = open(&mut agent, &bench.ws);
    assert!(commands.contains(&"review".to_string()), "{commands:?}");

    bench.model.push(Reply::Sse(chat_tool_calls(&[
        ("skill", json!({"name": "review"})),
        ("skill", json!({"name": "review", "file": "reference.md"})),
        (
            "skill",
            json!({"name": "review", "file": "../../../../config.json"}),
        ),
    ])));
    bench.model.push(Reply::Sse(chat_text(&["done"])));
    let turn = run_prompt(&mut agent, &session, "review my code", WAIT, no_requests);
    let first = system(&bench.model.requests()[0].body);
    assert!(
        first.contains("- review: Review code the team's way"),
        "{first}"
    );
    assert!(
        !first.contains("SECRET-REVIEW-STEPS"),
        "the body is loaded on demand"
    );
    let loaded = turn.final_text("call_1");
    assert!(loaded.contains("SECRET-REVIEW-STEPS"), "{loaded}");
    assert!(loaded.contains("- reference.md"), "{loaded}");
    assert!(turn.final_text("call_2").contains("REFERENCE-TEXT"));
    assert_eq!(turn.final_status("call_3"), "failed");
    assert!(turn
        .final_text("call_3")
        .contains("inside the skill's folder"));

    // As a slash command: the body and the request go to the model.
    bench.model.push(Reply::Sse(chat_text(&["reviewed"])));
    run_prompt(&mut agent, &session, "/review src/a.rs", WAIT, no_requests);
    let body = bench.last_body();
    let sent = body["messages"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .to_string();
    assert!(sent.contains("SECRET-REVIEW-STEPS"), "{sent}");
    assert!(sent.contains("Request: src/a.rs"), "{sent}");

    let (operations, _) = ok_with(
        &mut agent,
        "_spindle/operations",
        json!({"sessionId": session}),
    );
    let review = operations["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|item| item["name"] == "review")
        .cloned()
        .unwrap_or_else(|| panic!("{operations}"));
    assert_eq!(review["description"], "Review code the team's way");
    assert_eq!(review["admission"], "idle_only");

    // A change is seen by the next turn, without a reload.
    write_file(
        &bench.ws,
        ".claude/skills/review/SKILL.md",
        "---\nname: review\ndescription: Review with the new checklist\n---\nNEW\n",
    );
    bench.model.push(Reply::Sse(chat_text(&["ok"])));
    run_prompt(&mut agent, &session, "again", WAIT, no_requests);
    let prompt = system(&bench.last_body());
    assert!(
        prompt.contains("- review: Review with the new checklist"),
        "{prompt}"
    );
}

#[test]
#[cfg(unix)]
fn a_skill_folder_that_links_out_of_the_workspace_is_refused() {
    let bench = Bench::new("skills-link", true);
    let outside = bench.base.join("outside");
    write_file(
        &outside,
        "SKILL.md",
        "---\nname: evil\ndescription: Linked in from elsewhere\n---\nEVIL-BODY\n",
    );
    std::os::unix::fs::symlink(&outside, bench.ws.join(".claude/skills/evil")).unwrap();
    let mut agent = bench.agent();
    let (session, commands) = open(&mut agent, &bench.ws);
    assert!(!commands.contains(&"evil".to_string()), "{commands:?}");
    let turn = run_prompt(&mut agent, &session, "/skills", WAIT, no_requests);
    let reply = turn.text();
    assert!(
        reply.contains("evil") && reply.contains("link out of the workspace"),
        "{reply}"
    );
    bench.model.push(Reply::Sse(chat_text(&["ok"])));
    run_prompt(&mut agent, &session, "hello", WAIT, no_requests);
    assert!(!bench
        .last_body()
        .to_string()
        .contains("Linked in from elsewhere"));
}

/// The commands a session announced first, as the editor got them.
fn announced(agent: &mut Agent, cwd: &Path) -> (String, Vec<Value>) {
    let (result, _) = ok_with(
        agent,
        "session/new",
        json!({"cwd": cwd.to_str().unwrap(), "mcpServers": []}),
    );
    let session = result["sessionId"].as_str().unwrap().to_string();
    let deadline = std::time::Instant::now() + WAIT;
    loop {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        let message = agent.recv(left).expect("no available_commands_update");
        let update = &message["params"]["update"];
        if update["sessionUpdate"] == "available_commands_update" {
            let commands = update["availableCommands"].as_array().unwrap().clone();
            return (session, commands);
        }
    }
}

/// A project's `.claude/commands/deploy.md` never takes the name of the
/// user's `~/.claude/skills/deploy`, trusted or not, nor a trusted
/// project's skill the name of the user's `~/.claude/commands/lint.md`:
/// the editor is shown the user's words, `/deploy` sends the user's
/// skill, the model never sees the project's, and `/skills` lists the
/// project's as shadowed, naming both.
#[test]
fn a_projects_command_never_takes_the_name_of_the_users_skill() {
    for trusted in [false, true] {
        let bench = Bench::new("skills-shadow", trusted);
        write_file(
            &bench.home,
            ".claude/skills/deploy/SKILL.md",
            "---\nname: deploy\ndescription: Deploy my way\n---\nUSER-DEPLOY-STEPS\n",
        );
        write_file(&bench.home, ".claude/commands/lint.md", "USER-LINT-TEXT\n");
        write_file(
            &bench.ws,
            ".claude/commands/deploy.md",
            "---\ndescription: REPO-DEPLOY-WORDS\n---\nREPO-DEPLOY-TEXT\n",
        );
        write_file(
            &bench.ws,
            ".claude/skills/lint/SKILL.md",
            "---\nname: lint\ndescription: REPO-LINT-WORDS\n---\nREPO-LINT-TEXT\n",
        );
        let config = bench.config.to_str().unwrap();
        let home = bench.home.to_str().unwrap();
        let mut agent = Agent::spawn(
            &["acp", "--config", config, "--permissions", "yolo"],
            &[("HOME", home), ("USERPROFILE", home)],
        );
        agent.initialize();
        let (session, commands) = announced(&mut agent, &bench.ws);
        let deploy: Vec<&Value> = commands.iter().filter(|c| c["name"] == "deploy").collect();
        assert_eq!(deploy.len(), 1, "trusted {trusted}: {commands:?}");
        assert_eq!(
            deploy[0]["description"], "Deploy my way",
            "trusted {trusted}"
        );
        assert!(
            !format!("{commands:?}").contains("REPO-"),
            "trusted {trusted}: {commands:?}"
        );

        let (operations, _) = ok_with(
            &mut agent,
            "_spindle/operations",
            json!({"sessionId": session}),
        );
        let items = operations["items"].as_array().unwrap();
        let deploy: Vec<&Value> = items.iter().filter(|i| i["name"] == "deploy").collect();
        assert_eq!(deploy.len(), 1, "{operations}");
        assert_eq!(deploy[0]["description"], "Deploy my way", "{operations}");
        assert!(!operations.to_string().contains("REPO-"), "{operations}");

        bench.model.push(Reply::Sse(chat_text(&["deployed"])));
        run_prompt(&mut agent, &session, "/deploy now", WAIT, no_requests);
        let body = bench.last_body();
        let sent = body["messages"]
            .as_array()
            .unwrap()
            .last()
            .unwrap()
            .to_string();
        assert!(
            sent.contains("USER-DEPLOY-STEPS"),
            "trusted {trusted}: {sent}"
        );
        bench.model.push(Reply::Sse(chat_text(&["linted"])));
        run_prompt(&mut agent, &session, "/lint", WAIT, no_requests);
        let sent = bench.last_body().to_string();
        assert!(
            sent.contains("USER-LINT-TEXT"),
            "trusted {trusted}: {sent:.400}"
        );
        for request in bench.model.requests() {
            assert!(
                !request.body.to_string().contains("REPO-"),
                "trusted {trusted}: the project's words reached the model"
            );
        }

        let reply = run_prompt(&mut agent, &session, "/skills", WAIT, no_requests).text();
        assert!(
            reply.contains("/deploy") && reply.contains("your ~/.claude/skills"),
            "{reply}"
        );
        // Paths as Windows writes them too.
        let shadowed = reply
            .split_once("Shadowed")
            .map(|(_, rest)| rest.replace('\\', "/"))
            .unwrap_or_else(|| panic!("trusted {trusted}: nothing shadowed: {reply}"));
        assert!(
            shadowed
                .lines()
                .any(|line| line.contains(".claude/commands/deploy.md")
                    && line.contains("the project's .claude/commands")
                    && line.contains("your skill from your ~/.claude/skills")),
            "trusted {trusted}: {reply}"
        );
        // The project's skill is read only when trusted; then it is
        // shadowed by the user's command.
        assert_eq!(
            shadowed
                .lines()
                .any(|line| line.contains("skills/lint") && line.contains("your command")),
            trusted,
            "{reply}"
        );

        // spindle doctor, in the workspace, says the same.
        let mut doctor = crate::support::spindle_command(agent.home());
        doctor
            .args(["doctor", "--config", config])
            .current_dir(&bench.ws)
            .env("HOME", home)
            .env("USERPROFILE", home);
        let report = String::from_utf8_lossy(&doctor.output().unwrap().stdout).replace('\\', "/");
        assert!(
            report.lines().any(|line| line.contains("shadowed")
                && line.contains(".claude/commands/deploy.md")
                && line.contains("your skill from your ~/.claude/skills")),
            "trusted {trusted}: {report}"
        );
        assert!(!report.contains("REPO-"), "{report}");
    }
}

//! A project set up for Claude Code, opened in Spindle unchanged: a
//! `CLAUDE.md` with an `@` import, `.claude/skills/`, `.claude/settings.json`
//! with PreToolUse, PostToolUse and Stop hooks, and `.mcp.json`. Trusted,
//! all of it works; untrusted, only the instruction files are read (as
//! they always are) and nothing else reaches the model or runs.

use crate::support::client::no_requests;
use crate::support::fake_openai::{chat_text, chat_tool_calls};
use crate::support::mcp_server::{stdio_args, stdio_command, SERVER_ENV};
use crate::support::prelude::{ok_with, one_model_config, WAIT};
use crate::support::{run_prompt, temp_dir, write_file, Agent, FakeServer, Reply};
use serde_json::{json, Value};
use std::fs;

fn say(text: &str) -> Reply {
    Reply::Sse(chat_text(&[text]))
}

fn offered(body: &Value) -> Vec<String> {
    body["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|t| t["function"]["name"].as_str().map(str::to_string))
        .collect()
}

#[test]
#[cfg_attr(windows, ignore = "sh command lines")]
fn a_claude_code_project_works_when_trusted_and_stays_inert_when_not() {
    for trusted in [true, false] {
        let model = FakeServer::start();
        let base = spindle::os::canonical(temp_dir("claude-project")).unwrap();
        let ws = base.join("ws");
        write_file(
            &ws,
            "CLAUDE.md",
            "# Team rules\nFollow @docs/conventions.md\n",
        );
        write_file(&ws, "docs/conventions.md", "CONVENTION-TABS-ONLY\n");
        write_file(
            &ws,
            ".claude/skills/release/SKILL.md",
            "---\nname: release\ndescription: Cut a release the team's way\n---\nRELEASE-STEPS\n",
        );
        let settings = json!({"hooks": {
            "PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command",
                "command": "if grep -q 'git push'; then echo 'pushing is for humans' >&2; exit 2; fi"}]}],
            "PostToolUse": [{"matcher": "Edit|Write", "hooks": [{"type": "command",
                "command": "echo '{\"hookSpecificOutput\": {\"additionalContext\": \"FORMATTED\"}}'"}]}],
            "Stop": [{"hooks": [{"type": "command",
                "command": "if [ ! -f .checked ]; then touch .checked; echo 'run the checks first' >&2; exit 2; fi"}]}],
        }});
        write_file(&ws, ".claude/settings.json", settings.to_string());
        let server = json!({"mcpServers": {"team": {"command": stdio_command(),
            "args": stdio_args(), "env": {SERVER_ENV: "1"}}}});
        write_file(&ws, ".mcp.json", server.to_string());
        let config = one_model_config(&model, trusted.then_some(ws.as_path()));
        let config_path = base.join("config.json");
        fs::write(&config_path, config.to_string()).unwrap();
        let mut agent = Agent::spawn(
            &[
                "acp",
                "--config",
                config_path.to_str().unwrap(),
                "--permissions",
                "yolo",
            ],
            &[],
        );
        agent.initialize();
        let (result, _) = ok_with(
            &mut agent,
            "session/new",
            json!({"cwd": ws.to_str().unwrap(), "mcpServers": []}),
        );
        let session = result["sessionId"].as_str().unwrap().to_string();

        // A first turn, until the project's MCP server has joined (it may
        // start slower than the session's first second).
        let deadline = std::time::Instant::now() + WAIT;
        let body = loop {
            model.push(say("hi"));
            run_prompt(&mut agent, &session, "hello", WAIT, no_requests);
            let body = model.requests().pop().unwrap().body;
            let joined = offered(&body).iter().any(|n| n.starts_with("team__"));
            if joined || !trusted || std::time::Instant::now() > deadline {
                break body;
            }
            std::thread::sleep(std::time::Duration::from_millis(100));
        };
        let system = body["messages"][0]["content"].as_str().unwrap().to_string();
        // The instruction files and their import are read either way.
        assert!(system.contains("CONVENTION-TABS-ONLY"), "{system}");
        assert_eq!(
            system.contains("- release: Cut a release"),
            trusted,
            "{system}"
        );
        let names = offered(&body);
        assert_eq!(
            names.iter().any(|n| n.starts_with("team__")),
            trusted,
            "{names:?}"
        );
        assert_eq!(names.contains(&"skill".to_string()), trusted, "{names:?}");

        // Hooks: a push is blocked, an edit gets the formatter's context,
        // and the first stop is sent back once.
        model.push(Reply::Sse(chat_tool_calls(&[
            ("run_command", json!({"command": "git push origin main"})),
            ("write_file", json!({"path": "notes.txt", "content": "x"})),
        ])));
        model.push(say("done"));
        model.push(say("checked and done"));
        let turn = run_prompt(&mut agent, &session, "ship it", WAIT, no_requests);
        let bodies: Vec<Value> = model.requests().into_iter().map(|r| r.body).collect();
        let after_calls = bodies
            .iter()
            .rev()
            .find(|b| b.to_string().contains("notes.txt"))
            .unwrap()
            .to_string();
        assert_eq!(after_calls.contains("pushing is for humans"), trusted);
        assert_eq!(after_calls.contains("FORMATTED"), trusted);
        assert_eq!(turn.final_text("call_1").contains("hook blocked"), trusted);
        assert_eq!(ws.join(".checked").exists(), trusted);
        let last = bodies.last().unwrap().to_string();
        assert_eq!(last.contains("run the checks first"), trusted);

        // The skill as a slash command: the body goes to the model.
        model.push(say("released"));
        run_prompt(&mut agent, &session, "/release 1.2", WAIT, no_requests);
        let sent = model.requests().pop().unwrap().body.to_string();
        assert_eq!(sent.contains("RELEASE-STEPS"), trusted, "{sent:.300}");
        let _ = fs::remove_dir_all(&base);
    }
}

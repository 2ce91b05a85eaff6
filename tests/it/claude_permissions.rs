//! Claude Code's permission rules (`.claude/settings.json` and
//! `settings.local.json`) through the real binary: a trusted project's
//! `Bash(cargo test:*)` runs `cargo test --lib` unasked but asks for a
//! compound line that starts the same way; its `Edit(.claude/**)` and
//! `Bash(cp:*)` never reach a protected file; an untrusted project's
//! allow counts for nothing while its deny and ask apply; and what is
//! read and what is left out is listed by `/allow` and `spindle doctor`.

use crate::support::prelude::WAIT;
use crate::support::{
    in_process, run_prompt, spindle_command, temp_dir, write_file, Agent, Answer,
};
use serde_json::{json, Value};
use std::path::PathBuf;
use std::process::Stdio;

/// A test's directory: `ws/` is the workspace, the rest is outside it.
struct Space {
    base: PathBuf,
    ws: PathBuf,
}

impl Space {
    fn new(name: &str, settings: Value, trusted: bool) -> Space {
        let base = spindle::os::canonical(temp_dir(name)).expect("the temp dir resolves");
        let ws = base.join("ws");
        std::fs::create_dir_all(&ws).expect("the workspace is created");
        std::fs::create_dir_all(base.join("tmp")).expect("the agent's TMPDIR is created");
        write_file(&ws, ".claude/settings.json", settings.to_string());
        let config = if trusted {
            json!({"permissions": {"projects": {ws.display().to_string(): {"trusted": true}}}})
        } else {
            json!({})
        };
        std::fs::write(base.join("config.json"), config.to_string()).unwrap();
        Space { base, ws }
    }

    fn config(&self) -> String {
        let path = self.base.join("config.json");
        path.to_str().expect("UTF-8 path").to_string()
    }

    /// Starts `spindle acp --script` with the scripted `replies` under the
    /// approval `policy`, initialised, with a session in the workspace.
    fn start(&self, replies: Vec<Value>, policy: &str) -> (Agent, String) {
        let script = self.base.join("script.json");
        std::fs::write(&script, json!({ "replies": replies }).to_string()).unwrap();
        let script = script.to_str().expect("UTF-8 path").to_string();
        let config = self.config();
        let args = [
            "--script",
            script.as_str(),
            "--config",
            config.as_str(),
            "--permissions",
            policy,
            "--on-reject",
            "continue",
        ];
        let mut agent = in_process::acp(&args);
        agent.initialize();
        let session = agent.new_session(&self.ws);
        (agent, session)
    }
}

impl Drop for Space {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            let _ = std::fs::remove_dir_all(&self.base);
        }
    }
}

fn run(id: &str, command: &str) -> Value {
    json!({"id": id, "name": "run_command", "arguments": {"command": command}})
}

fn write(id: &str, path: &str) -> Value {
    json!({"id": id, "name": "write_file", "arguments": {"path": path, "content": "changed\n"}})
}

/// Rejects every permission request; any other request fails the test.
fn reject_all(request: &Value) -> Answer {
    assert_eq!(request["method"], "session/request_permission", "{request}");
    Answer::select("reject_once")
}

fn sorted(mut ids: Vec<String>) -> Vec<String> {
    ids.sort();
    ids
}

#[test]
#[cfg_attr(windows, ignore = "sh command lines")]
fn a_trusted_projects_prefix_allows_one_plain_command_and_never_a_protected_file() {
    let space = Space::new(
        "claude-perms-trusted",
        json!({"permissions": {"allow": [
            "Bash(cargo test:*)", "Bash(touch made:*)", "Bash(cp:*)",
            "Edit(src/**)", "Edit(.claude/**)"
        ]}}),
        true,
    );
    write_file(&space.ws, "x/keep", "keep\n");
    write_file(&space.ws, "src/a.txt", "a\n");
    let settings = std::fs::read_to_string(space.ws.join(".claude/settings.json")).unwrap();
    let calls = vec![
        run("plain", "cargo test --lib"),
        run("made", "touch made"),
        run("semi", "cargo test; rm -rf x"),
        run("and", "cargo test && rm -rf x"),
        run("subst", "cargo test$(rm -rf x)"),
        run("pipe", "cargo test --lib | sh"),
        run("cp", "cp src/a.txt .claude/settings.json"),
        write("src", "src/b.txt"),
        write("settings", ".claude/settings.json"),
        write("hook", ".claude/hooks/pre.sh"),
    ];
    let (mut agent, session) = space.start(
        vec![json!({ "tool_calls": calls }), json!({"text": "Done."})],
        "ask",
    );
    let turn = run_prompt(&mut agent, &session, "go", WAIT, reject_all);
    assert_eq!(turn.stop_reason(), "end_turn", "{}", turn.dump());
    // The plain lines and the edit under src/ ran unasked; every line that
    // adds a command, and every protected file, asked.
    assert_eq!(
        sorted(turn.permission_ids()),
        ["and", "cp", "hook", "pipe", "semi", "settings", "subst"],
        "{}",
        turn.dump()
    );
    assert_eq!(turn.final_status("made"), "completed", "{}", turn.dump());
    assert_eq!(turn.final_status("src"), "completed", "{}", turn.dump());
    assert!(space.ws.join("made").exists() && space.ws.join("src/b.txt").exists());
    assert!(space.ws.join("x/keep").exists(), "a compound line ran");
    assert_eq!(
        std::fs::read_to_string(space.ws.join(".claude/settings.json")).unwrap(),
        settings
    );
    assert!(!space.ws.join(".claude/hooks/pre.sh").exists());
    // Every rule was read: nothing is said to be left out.
    assert!(!turn.notices().contains("left out"), "{}", turn.notices());
}

#[test]
#[cfg_attr(windows, ignore = "sh command lines")]
fn an_untrusted_projects_allow_is_ignored_and_its_deny_and_ask_apply() {
    let space = Space::new(
        "claude-perms-untrusted",
        json!({"permissions": {
            "allow": ["Bash(touch made:*)", "Bash"],
            "deny": ["Bash(rm:*)"]
        }}),
        false,
    );
    write_file(
        &space.ws,
        ".claude/settings.local.json",
        json!({"permissions": {"ask": ["Bash(touch other)"]}}).to_string(),
    );
    write_file(&space.ws, "keep.txt", "keep\n");
    // Under `ask`: the allow does not spare the question; the deny
    // refuses without one, also inside a compound line.
    let calls = vec![
        run("made", "touch made"),
        run("rm", "rm -f keep.txt"),
        run("rm2", "true && rm -f keep.txt"),
    ];
    let (mut agent, session) = space.start(
        vec![json!({ "tool_calls": calls }), json!({"text": "Done."})],
        "ask",
    );
    let turn = run_prompt(&mut agent, &session, "go", WAIT, reject_all);
    assert_eq!(turn.permission_ids(), ["made"], "{}", turn.dump());
    for id in ["rm", "rm2"] {
        assert_eq!(turn.final_status(id), "failed", "{}", turn.dump());
        assert!(
            turn.final_text(id).contains("permission rule"),
            "{}",
            turn.dump()
        );
    }
    assert!(!space.ws.join("made").exists());
    assert!(space.ws.join("keep.txt").exists());
    drop(agent);
    // Under `yolo`: the ask rule of settings.local.json still asks.
    let calls = vec![run("other", "touch other"), run("free", "touch free")];
    let (mut agent, session) = space.start(
        vec![json!({ "tool_calls": calls }), json!({"text": "Done."})],
        "yolo",
    );
    let turn = run_prompt(&mut agent, &session, "go", WAIT, reject_all);
    assert_eq!(turn.permission_ids(), ["other"], "{}", turn.dump());
    assert!(!space.ws.join("other").exists());
    assert!(space.ws.join("free").exists());
}

#[test]
fn doctor_and_allow_list_what_is_read_and_what_is_left_out() {
    let space = Space::new(
        "claude-perms-listed",
        json!({"permissions": {
            "allow": ["Bash(cargo test:*)", "WebSearch", "Frobnicate(x)", "Bash(git diff)"],
            "deny": ["Bash(git push)", "Read(./.env)"]
        }}),
        false,
    );
    let output = spindle_command(&space.base.join("home"))
        .args(["doctor", "--config", &space.config()])
        .current_dir(&space.ws)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let report = String::from_utf8_lossy(&output.stdout);
    let section = report
        .split("\nClaude Code permissions\n")
        .nth(1)
        .unwrap_or_else(|| panic!("no section: {report}"));
    for said in [
        "ok    read: Bash(git push) (.claude/settings.json): denies `git push …`",
        "ok    read: Read(./.env) (.claude/settings.json): denies reads in `.env`",
        "warn  ignored: Bash(cargo test:*) (.claude/settings.json): would allow `cargo test …`; the project is not trusted",
        "warn  left out: WebSearch (allow, .claude/settings.json): Spindle's rules have no class for web fetches",
        "warn  left out: Frobnicate(x) (allow, .claude/settings.json): Spindle has no counterpart of Claude Code's tool Frobnicate",
        "warn  left out: Bash(git diff) (allow, .claude/settings.json): it allows exactly `git diff`",
    ] {
        assert!(section.contains(said), "{said}\n{report}");
    }
    // A session says how many are left out in its first turn, once, and
    // `/allow` lists them.
    let (mut agent, session) = space.start(
        vec![json!({"text": "Hi."}), json!({"text": "Again."})],
        "ask",
    );
    let turn = run_prompt(&mut agent, &session, "hello", WAIT, reject_all);
    assert!(
        turn.notices()
            .contains("3 permission rules of .claude/settings.json"),
        "{}",
        turn.dump()
    );
    let turn = run_prompt(&mut agent, &session, "again", WAIT, reject_all);
    assert!(!turn.notices().contains("left out"), "{}", turn.dump());
    let turn = run_prompt(&mut agent, &session, "/allow", WAIT, reject_all);
    let reply = turn.text();
    for said in [
        "denies `git push …`, reads in `.env`",
        "allows `cargo test …` (ignored: the project is not trusted",
        "left out: WebSearch (allow, .claude/settings.json)",
        "left out: Frobnicate(x)",
    ] {
        assert!(reply.contains(said), "{said}\n{reply}");
    }
}

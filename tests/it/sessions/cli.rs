//! The `spindle sessions` command: listing, showing and deleting stored
//! sessions, and failures reported with exit codes.

use super::{finish, ids_of, list_all, prompt_ok, Space};
use serde_json::{json, Value};
use std::fs;

struct CliRun {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

impl std::fmt::Display for CliRun {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "exit {:?}\n--- stdout ---\n{}--- stderr ---\n{}",
            self.code, self.stdout, self.stderr
        )
    }
}

/// Runs `spindle <args>` to its end (UTC, a private SPINDLE_HOME).
fn cli(space: &Space, args: &[&str]) -> CliRun {
    let home = space.base.join("cli-home");
    fs::create_dir_all(&home).expect("cannot create the CLI home");
    let output = crate::support::spindle_command(&home)
        .args(args)
        .env_remove("RUST_LOG")
        .env("XDG_DATA_HOME", home.join("data"))
        .env("XDG_CONFIG_HOME", home.join("config"))
        .env("TZ", "UTC")
        .env("NO_COLOR", "1")
        .stdin(std::process::Stdio::null())
        .output()
        .expect("cannot run spindle");
    CliRun {
        code: output.status.code(),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    }
}

/// Two stored sessions: one with a tool round, one plain. Returns their
/// ids and `session/list` entries.
fn cli_fixture(space: &Space) -> (String, String, Vec<Value>) {
    let script = json!({"rules": [
        {"when": {"contains": "notes"}, "replies": [
            {"text": "Writing the notes.", "tool_calls": [
                {"id": "write_1", "name": "write_file",
                 "arguments": {"path": "notes.txt", "content": "alpha\n"}}
            ]},
            {"text": "The notes are written."}
        ]},
        {"when": {"contains": "weather"}, "reply": {"text": "Sunny, probably."}}
    ]});
    let mut agent = space.scripted(&script);
    let tools = agent.new_session(&space.ws);
    prompt_ok(&mut agent, &tools, "Write the notes file");
    let plain = agent.new_session(&space.ws);
    prompt_ok(&mut agent, &plain, "How is the weather?");
    let (entries, _) = list_all(&mut agent, None);
    finish(agent);
    (tools, plain, entries)
}

#[test]
fn the_sessions_command_lists_shows_and_deletes() {
    let space = Space::new("cli");
    let (tools, plain, entries) = cli_fixture(&space);
    let db = space.db.arg();
    // Stored (a setting was changed), never prompted: not listed, as in
    // `session/list`, yet an id still names it.
    let mut agent = space.reader();
    let tuned = agent.new_session(&space.ws);
    super::ok(
        &mut agent,
        "session/set_mode",
        json!({"sessionId": tuned, "modeId": "plan"}),
    );
    finish(agent);
    assert!(space.db.session_ids().contains(&tuned));

    for args in [
        vec!["sessions", "--db", db.as_str()],
        vec!["sessions", "list", "--db", db.as_str()],
    ] {
        let run = cli(&space, &args);
        assert_eq!(run.code, Some(0), "spindle {args:?}\n{run}");
        assert!(!run.stdout.contains(&tuned), "never prompted\n{run}");
        for entry in &entries {
            let id = entry["sessionId"].as_str().unwrap_or_default();
            let lines: Vec<&str> = run.stdout.lines().filter(|l| l.contains(id)).collect();
            assert_eq!(lines.len(), 1, "one line for {id}\n{run}");
            let title = entry["title"].as_str().unwrap_or_default();
            assert!(lines[0].contains(title), "{id}: no title {title:?}\n{run}");
            let updated = entry["updatedAt"].as_str().unwrap_or_default();
            assert!(
                lines[0].contains(&updated[..10]),
                "{id}: no updated time ({updated})\n{run}"
            );
        }
    }

    let run = cli(&space, &["sessions", "show", &tools, "--db", &db]);
    assert_eq!(run.code, Some(0), "{run}");
    for expected in [
        "Write the notes file",
        "Writing the notes.",
        "The notes are written.",
        "notes.txt",
        "completed",
        // The edit itself, not only its file's name.
        "  + alpha",
    ] {
        assert!(run.stdout.contains(expected), "no {expected:?}\n{run}");
    }
    assert!(
        !run.stdout.contains("How is the weather?"),
        "another session's text\n{run}"
    );

    let run = cli(&space, &["sessions", "--json", "--db", &db]);
    assert_eq!(run.code, Some(0), "{run}");
    assert!(
        !run.stdout.contains(&tuned) && run.stdout.contains(&tools),
        "{run}"
    );
    let run = cli(&space, &["sessions", "show", &tuned, "--db", &db]);
    assert_eq!(run.code, Some(0), "{run}");
    let run = cli(&space, &["sessions", "delete", &tuned, "--db", &db]);
    assert_eq!(run.code, Some(0), "{run}");
    let run = cli(&space, &["sessions", "delete", &plain, "--db", &db]);
    assert_eq!(run.code, Some(0), "{run}");
    assert!(
        run.stdout.contains(&plain),
        "no confirmation naming the session\n{run}"
    );
    assert_eq!(space.db.session_ids(), vec![tools.clone()]);
    let run = cli(&space, &["sessions", "--db", &db]);
    assert!(
        !run.stdout.contains(&plain) && run.stdout.contains(&tools),
        "{run}"
    );
    let mut agent = space.reader();
    let (all, _) = list_all(&mut agent, None);
    assert_eq!(ids_of(&all), vec![tools.clone()]);
    finish(agent);
    space.db.assert_sound();
}

#[test]
fn the_sessions_command_reports_failures_with_exit_codes() {
    let space = Space::new("cli-errors");
    let (tools, _, _) = cli_fixture(&space);
    let db = space.db.arg();
    for action in ["show", "delete"] {
        let run = cli(&space, &["sessions", action, "sess_nope", "--db", &db]);
        assert_eq!(run.code, Some(1), "{action} of an unknown id\n{run}");
        assert!(run.stderr.contains("sess_nope"), "{action}\n{run}");
    }
    for args in [
        vec!["sessions", "show", "--db", db.as_str()],
        vec!["sessions", "frobnicate", "--db", db.as_str()],
        vec!["sessions", "--no-such-flag"],
        vec!["sessions", "list", "--db"],
    ] {
        let run = cli(&space, &args);
        assert_eq!(run.code, Some(2), "usage error: spindle {args:?}\n{run}");
        assert!(!run.stderr.is_empty(), "{run}");
    }
    // A database from a newer Spindle: a runtime failure, file untouched.
    space.db.set_user_version(99);
    let before = fs::read(space.db.path()).unwrap();
    for args in [
        vec!["sessions", "--db", db.as_str()],
        vec!["sessions", "show", tools.as_str(), "--db", db.as_str()],
        vec!["sessions", "delete", tools.as_str(), "--db", db.as_str()],
    ] {
        let run = cli(&space, &args);
        assert_eq!(run.code, Some(1), "spindle {args:?}\n{run}");
        assert!(run.stderr.contains("newer Spindle"), "{run}");
    }
    assert!(fs::read(space.db.path()).unwrap() == before);
}

#[test]
fn sessions_have_a_header_json_an_export_and_take_id_prefixes() {
    let space = Space::new("cli-more");
    let (tools, plain, _) = cli_fixture(&space);
    let db = space.db.arg();
    let run = cli(&space, &["sessions", "--db", &db]);
    assert!(run.stdout.starts_with("ID "), "{run}");
    assert!(
        run.stdout.lines().next().unwrap().contains("UPDATED"),
        "{run}"
    );
    assert!(
        run.stdout.contains(" UTC "),
        "local time with its zone\n{run}"
    );

    let run = cli(&space, &["sessions", "--json", "--db", &db]);
    assert_eq!(run.code, Some(0), "{run}");
    let items: Value = serde_json::from_str(&run.stdout).unwrap();
    let ids: Vec<&str> = items
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["sessionId"].as_str().unwrap())
        .collect();
    assert_eq!(ids.len(), 2);
    assert!(ids.contains(&tools.as_str()) && ids.contains(&plain.as_str()));

    // A unique prefix names the session.
    let prefix = &tools[..tools.len() - 6];
    let others_share = plain.starts_with(prefix);
    let run = cli(&space, &["sessions", "export", prefix, "--db", &db]);
    if others_share {
        assert_eq!(run.code, Some(1), "{run}");
    } else {
        assert_eq!(run.code, Some(0), "{run}");
        let lines: Vec<Value> = run
            .stdout
            .lines()
            .map(|l| serde_json::from_str(l).expect("one JSON object a line"))
            .collect();
        assert!(
            lines.iter().any(|u| u["sessionUpdate"] == "tool_call"),
            "{run}"
        );
        assert!(
            lines
                .iter()
                .any(|u| u["sessionUpdate"] == "user_message_chunk"),
            "{run}"
        );
    }
    // Too short, or shared by both: refused with the candidates.
    let run = cli(&space, &["sessions", "show", "sess_", "--db", &db]);
    assert_eq!(run.code, Some(1), "{run}");
    assert!(run.stderr.contains("names 2 sessions"), "{run}");
}

#[test]
fn prune_removes_empty_old_and_surplus_sessions() {
    let space = Space::new("cli-prune");
    let mut agent = space.reader();
    let empty = agent.new_session(&space.ws);
    finish(agent);
    let mut ids = Vec::new();
    for n in 0..3 {
        let mut agent = space.scripted(&json!({"replies": [{"text": "ok"}]}));
        let session = agent.new_session(&space.ws);
        prompt_ok(&mut agent, &session, &format!("prompt {n}"));
        finish(agent);
        ids.push(session);
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let db = space.db.arg();
    let run = |args: &[&str]| {
        let out = crate::support::spindle_command(&crate::support::temp_dir("home"))
            .args(["sessions", "prune", "--db", &db])
            .args(args)
            .output()
            .unwrap();
        assert_eq!(
            out.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let said = run(&["--keep", "1", "--dry-run"]);
    assert!(said.contains(&format!("would remove {empty}")), "{said}");
    assert!(said.contains("Would remove 3 sessions."), "{said}");
    assert_eq!(space.db.session_ids().len(), 4);
    let said = run(&["--keep", "1"]);
    assert!(
        said.contains(&format!(
            "removed {} — prompt 0 (older than the newest kept)",
            ids[0]
        )),
        "{said}"
    );
    assert!(said.contains("(empty)"), "{said}");
    assert_eq!(space.db.session_ids(), [ids[2].clone()]);
    // Nothing is older than a day here.
    assert!(run(&["--older-than", "1"]).contains("Removed 0 sessions."));
}

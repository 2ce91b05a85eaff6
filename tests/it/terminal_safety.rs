//! What the commands besides the agent print, when what they print came
//! from outside: a repository's `.mcp.json`, skills and hooks, a folder's
//! name, a session's title. Each is planted with escape sequences (an OSC
//! 52 clipboard write, a title change, a screen clear), C1 controls and
//! bidirectional overrides, and the real binary's output must hold none
//! of them raw: they are written out (`\u{1b}`), and JSON escapes them
//! as `\uXXXX` and still parses to the original text.

use crate::support::{temp_dir, write_file};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};

/// An OSC 52 clipboard write, a window title change, a screen clear (7-
/// and 8-bit), a next line, a right-to-left override and an isolate.
const HOSTILE: &str =
    "\u{1b}]52;c;cm0gLXJmIH4=\u{7}\u{1b}]0;owned\u{7}\u{1b}[2J\u{9b}2J\u{85}\u{202e}\u{2067}x";

/// The characters none of the output may hold.
fn acts(c: char) -> bool {
    (c.is_control() && c != '\n' && c != '\t')
        || matches!(
            c,
            '\u{61c}' | '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}'
        )
}

fn assert_inert(what: &str, text: &str) {
    if let Some(c) = text.chars().find(|&c| acts(c)) {
        panic!(
            "{what} holds U+{:04X} raw:\n{}",
            c as u32,
            text.escape_debug()
        );
    }
}

struct Run {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

/// Runs `spindle ARGS` in `cwd`, on a fresh machine whose home is
/// `home` (and `HOME`, so no skills or instructions of the developer's
/// are read); both streams are checked inert.
fn spindle(cwd: &Path, home: &Path, args: &[&str]) -> Run {
    let mut command = crate::support::spindle_command(home);
    let output = command
        .args(args)
        .current_dir(cwd)
        .env("HOME", home)
        .env("USERPROFILE", home)
        .env("XDG_DATA_HOME", home.join("data"))
        .stdin(std::process::Stdio::null())
        .output()
        .expect("cannot run spindle");
    let run = Run {
        code: output.status.code(),
        stdout: String::from_utf8(output.stdout).expect("UTF-8 stdout"),
        stderr: String::from_utf8(output.stderr).expect("UTF-8 stderr"),
    };
    assert_inert(&format!("stdout of spindle {args:?}"), &run.stdout);
    assert_inert(&format!("stderr of spindle {args:?}"), &run.stderr);
    run
}

/// A project whose `.mcp.json` names a server with `HOSTILE` in its
/// name and one with it in its command and arguments, whose skill and
/// hook carry it too, and a user config with a server of its own named
/// with it; the project trusted or not.
fn hostile_project(name: &str, trusted: bool) -> (PathBuf, PathBuf, PathBuf) {
    let base = spindle::os::canonical(temp_dir(name)).unwrap();
    let project = base.join("project");
    let home = base.join("home");
    std::fs::create_dir_all(&home).unwrap();
    write_file(
        &project,
        ".mcp.json",
        json!({"mcpServers": {
            format!("named{HOSTILE}"): {"command": "/nonexistent/named"},
            "plain": {"command": format!("/nonexistent/run{HOSTILE}"), "args": [HOSTILE]},
            "remote": {"type": "http", "url": format!("http://127.0.0.1:9/{HOSTILE}")},
        }})
        .to_string(),
    );
    write_file(
        &project,
        ".claude/skills/tidy/SKILL.md",
        format!("---\nname: tidy{HOSTILE}\ndescription: Tidy up{HOSTILE}\n---\nTidy.\n"),
    );
    write_file(
        &project,
        ".claude/settings.json",
        json!({"hooks": {"PreToolUse": [{"matcher": "Bash",
            "hooks": [{"type": "command", "command": format!("echo {HOSTILE}")}]}]}})
        .to_string(),
    );
    let mut config = json!({"mcp_servers": [
        {"name": format!("mine{HOSTILE}"), "command": format!("/nonexistent/mine{HOSTILE}")}
    ]});
    if trusted {
        config["permissions"] =
            json!({"projects": {project.display().to_string(): {"trusted": true}}});
    }
    let config_path = base.join("config.json");
    std::fs::write(&config_path, config.to_string()).unwrap();
    (project, home, config_path)
}

#[test]
fn mcp_list_writes_out_a_projects_names_and_commands() {
    for trusted in [false, true] {
        let (project, home, config) = hostile_project("safe-mcp-list", trusted);
        let run = spindle(
            &project,
            &home,
            &["mcp", "list", "--config", config.to_str().unwrap()],
        );
        assert_eq!(run.code, Some(0), "{}", run.stderr);
        // The command, its argument and the URL are shown, written out.
        for shown in [
            "/nonexistent/run\\u{1b}]52;c;cm0gLXJmIH4=\\u{7}",
            "\\u{9b}2J\\u{85}\\u{202e}\\u{2067}x",
            "http://127.0.0.1:9/\\u{1b}]52",
            "mine\\u{1b}]52",
        ] {
            assert!(run.stdout.contains(shown), "{shown} in\n{}", run.stdout);
        }
        assert_eq!(
            run.stdout
                .contains("is not trusted (`spindle trust` there uses it)"),
            !trusted,
            "{}",
            run.stdout
        );
    }
}

#[test]
fn doctor_writes_out_what_a_repository_and_its_servers_said() {
    let (project, home, config) = hostile_project("safe-doctor", true);
    let db = home.join("none.db");
    let run = spindle(
        &project,
        &home,
        &[
            "doctor",
            "--config",
            config.to_str().unwrap(),
            "--db",
            db.to_str().unwrap(),
        ],
    );
    // No provider is configured: broken, yet every section is there.
    assert_eq!(run.code, Some(1), "{}", run.stderr);
    for section in ["MCP servers", "Skills", "Hooks"] {
        assert!(
            run.stdout.contains(&format!("\n{section}\n")),
            "{section} in\n{}",
            run.stdout
        );
    }
    for shown in [
        "echo \\u{1b}]52",
        "mine\\u{1b}]52",
        "/nonexistent/run\\u{1b}]52",
    ] {
        assert!(run.stdout.contains(shown), "{shown} in\n{}", run.stdout);
    }
    // The skill's name is refused, quoted written out.
    let skills = run.stdout.split("\nSkills\n").nth(1).unwrap_or_default();
    let skills = skills.split("\n\n").next().unwrap_or_default();
    assert!(
        skills.contains("left out") && skills.contains("tidy") && skills.contains("u{1b}]52"),
        "{skills}"
    );
}

#[test]
#[cfg_attr(windows, ignore = "Windows refuses control characters in file names")]
fn trust_writes_out_the_folders_name_and_keeps_it_exact() {
    let base = spindle::os::canonical(temp_dir("safe-trust")).unwrap();
    let home = base.join("home");
    std::fs::create_dir_all(&home).unwrap();
    let project = base.join(format!("project{HOSTILE}"));
    std::fs::create_dir_all(&project).unwrap();
    let config = base.join("config.json");
    for (verb, said) in [("trust", "Trusted "), ("untrust", "No longer trusted: ")] {
        let run = spindle(
            &base,
            &home,
            &[
                verb,
                project.to_str().unwrap(),
                "--config",
                config.to_str().unwrap(),
            ],
        );
        assert_eq!(run.code, Some(0), "{}", run.stderr);
        assert!(run.stdout.starts_with(said), "{}", run.stdout);
        assert!(
            run.stdout
                .contains("project\\u{1b}]52;c;cm0gLXJmIH4=\\u{7}"),
            "{}",
            run.stdout
        );
        if verb == "trust" {
            // Only the words are escaped: the saved key is the folder.
            let saved: Value = serde_json::from_slice(&std::fs::read(&config).unwrap()).unwrap();
            let key = project.display().to_string();
            assert_eq!(
                saved["permissions"]["projects"][key.as_str()]["trusted"],
                true,
                "{saved}"
            );
        }
    }
}

#[test]
fn sessions_list_and_show_write_out_a_title_and_json_keeps_it() {
    let base = spindle::os::canonical(temp_dir("safe-sessions")).unwrap();
    let home = base.join("home");
    std::fs::create_dir_all(&home).unwrap();
    let db = base.join("sessions.db");
    // A title with a next line, an 8-bit CSI and a right-to-left override
    // (a prompt's first line could not carry U+0085: it is whitespace).
    let title = "Fix\u{85}it\u{9b}2J now\u{202e}gnp.exe";
    {
        let mut store = spindle::store::Store::open(&db).unwrap();
        store
            .create_session("sess_hostile", "/w", &json!({}), &json!([]))
            .unwrap();
        store.set_title("sess_hostile", title).unwrap();
        store
            .begin_turn(
                "sess_hostile",
                &[json!({"sessionUpdate": "user_message_chunk",
                    "content": {"type": "text", "text": title}})
                .to_string()],
                &[spindle::conversation::Message::user(title)],
            )
            .unwrap();
    }
    let db = db.to_str().unwrap();
    let written = "Fix\\u{85}it\\u{9b}2J now\\u{202e}gnp.exe";
    for args in [
        &["sessions", "list", "--db", db][..],
        &["sessions", "show", "sess_hostile", "--db", db],
    ] {
        let run = spindle(&base, &home, args);
        assert_eq!(run.code, Some(0), "{}", run.stderr);
        assert!(run.stdout.contains(written), "{}", run.stdout);
    }
    for args in [
        &["sessions", "list", "--json", "--db", db][..],
        &["sessions", "export", "sess_hostile", "--db", db],
    ] {
        let run = spindle(&base, &home, args);
        assert_eq!(run.code, Some(0), "{}", run.stderr);
        for c in ['\u{85}', '\u{9b}', '\u{202e}'] {
            assert!(!run.stdout.contains(c), "{}", run.stdout);
        }
        let first = run.stdout.lines().next().unwrap_or_default();
        let parsed: Value = if args[1] == "export" {
            serde_json::from_str(first).unwrap()
        } else {
            serde_json::from_str(&run.stdout).unwrap()
        };
        let read = match args[1] {
            "export" => &parsed["content"]["text"],
            _ => &parsed[0]["title"],
        };
        assert_eq!(read, title, "{}", run.stdout);
    }
}

/// `spindle mcp add` refuses a name outside the rule (too long, a `__`
/// that would blur `mcp__NAME__TOOL` rules, one read as an option,
/// controls) with a usage error naming the rule, and writes nothing; a
/// project's `.mcp.json` entry of such a name is left out, said and
/// written out, while its others are used.
#[test]
fn mcp_names_outside_the_rule_are_refused_or_left_out() {
    let base = spindle::os::canonical(temp_dir("safe-mcp-names")).unwrap();
    let home = base.join("home");
    std::fs::create_dir_all(&home).unwrap();
    let config = base.join("config.json");
    let config_arg = config.to_str().unwrap();
    let long = "x".repeat(5000);
    let hostile_name = format!("esc{HOSTILE}");
    for name in [
        long.as_str(),
        "a__b",
        "--",
        "-x",
        "tab\there",
        "sp ace",
        hostile_name.as_str(),
    ] {
        let run = spindle(
            &base,
            &home,
            &["mcp", "add", "--config", config_arg, "--", name, "cmd"],
        );
        assert_eq!(run.code, Some(2), "{name:?}: {}", run.stderr);
        assert!(
            run.stderr
                .contains("1 to 64 letters, digits, '-', '_' and '.', does not start with '-' and holds no '__'"),
            "{name:?}: {}",
            run.stderr
        );
        assert!(run.stderr.len() < 1000, "{}", run.stderr);
        assert!(!config.exists(), "{name:?} was saved");
    }
    let run = spindle(
        &base,
        &home,
        &[
            "mcp",
            "add",
            "--config",
            config_arg,
            "--",
            "v1.files-2_x",
            "cmd",
        ],
    );
    assert_eq!(run.code, Some(0), "{}", run.stderr);

    let project = base.join("project");
    write_file(
        &project,
        ".mcp.json",
        json!({"mcpServers": {
            "a__b": {"command": "cmd"},
            "-x": {"command": "cmd"},
            hostile_name.clone(): {"command": "cmd"},
            "fine": {"command": "cmd"},
        }})
        .to_string(),
    );
    let run = spindle(&project, &home, &["mcp", "list", "--config", config_arg]);
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    assert!(run.stdout.contains("\nfine  cmd  (from "), "{}", run.stdout);
    for name in ["\"a__b\"", "\"-x\"", "\"esc\\u{1b}]52;c;"] {
        let said = run
            .stdout
            .lines()
            .find(|line| line.contains(name))
            .unwrap_or_else(|| panic!("{name} in\n{}", run.stdout));
        assert!(
            said.starts_with("(not read: ") && said.contains("not started"),
            "{said}"
        );
    }
}

//! The command line's help: `--help` on every command, `spindle help
//! [COMMAND]`, shell completions that the shells accept, and usage errors
//! with exit code 2.

use std::process::{Command, Stdio};

fn run(args: &[&str]) -> (Option<i32>, String, String) {
    let out = crate::support::spindle_command(&crate::support::temp_dir("home"))
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn every_command_has_help() {
    for (args, expected) in [
        (vec!["--help"], "spindle acp"),
        (vec!["help"], "spindle sessions"),
        (vec!["help", "acp"], "--permissions"),
        (vec!["acp", "--help"], "--permissions"),
        (vec!["setup", "--help"], "--key-stdin"),
        (vec!["help", "setup"], "--base-url"),
        (vec!["sessions", "--help"], "spindle sessions show ID"),
        (vec!["help", "sessions"], "spindle sessions delete ID"),
        (vec!["help", "completions"], "bash|zsh|fish"),
        (vec!["completions", "--help"], "bash|zsh|fish"),
        (vec!["sandbox", "--help"], "spindle sandbox"),
        (vec!["help", "--help"], "spindle help [COMMAND]"),
        (vec!["help", "-h"], "spindle help [COMMAND]"),
        (vec!["trust", "--help"], "spindle untrust"),
        (vec!["help", "untrust"], "spindle trust [PATH]"),
        (vec!["exec", "--help"], "--continue"),
    ] {
        let (code, stdout, stderr) = run(&args);
        assert_eq!(code, Some(0), "{args:?}: {stderr}");
        let shown = format!("{stdout}{stderr}");
        assert!(shown.contains(expected), "{args:?}: {shown}");
    }
    // The acp help says nothing of setup's flags, and the other way round.
    let (_, acp, _) = run(&["help", "acp"]);
    assert!(!acp.contains("--key-env"));
    let (_, setup, _) = run(&["help", "setup"]);
    assert!(!setup.contains("--drain"));
}

#[test]
fn bad_commands_are_usage_errors() {
    for args in [
        vec!["help", "frobnicate"],
        vec!["completions"],
        vec!["completions", "tcsh"],
        vec!["frobnicate"],
        vec!["sessions", "--colour"],
    ] {
        let (code, _, stderr) = run(&args);
        assert_eq!(code, Some(2), "{args:?}: {stderr}");
        assert!(stderr.starts_with("spindle: "), "{stderr}");
    }
}

#[test]
fn completion_scripts_parse_in_their_shells() {
    for (shell, check) in [
        ("bash", ["bash", "-n"]),
        ("zsh", ["zsh", "-n"]),
        ("fish", ["fish", "-n"]),
    ] {
        let (code, script, _) = run(&["completions", shell]);
        assert_eq!(code, Some(0));
        assert!(
            script.contains("acp") && script.contains("permissions"),
            "{script}"
        );
        // Checked by the shell itself when it is installed here.
        let path =
            std::env::temp_dir().join(format!("spindle-completion-{}.{shell}", std::process::id()));
        std::fs::write(&path, &script).unwrap();
        match Command::new(check[0]).arg(check[1]).arg(&path).output() {
            Ok(out) => assert!(
                out.status.success(),
                "{shell}: {}",
                String::from_utf8_lossy(&out.stderr)
            ),
            Err(_) => eprintln!("{shell} is not installed; its script was not parsed"),
        }
        let _ = std::fs::remove_file(&path);
    }
}

#[test]
#[cfg_attr(windows, ignore = "Unix file modes")]
fn a_log_file_takes_the_log_instead_of_stderr() {
    let dir = std::env::temp_dir().join(format!("spindle-logfile-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let log = dir.join("logs/spindle.log");
    let out = crate::support::spindle_command(&crate::support::temp_dir("home"))
        .args(["acp", "--script", "/nonexistent/script.json", "--log-file"])
        .arg(&log)
        .env_remove("RUST_LOG")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    // The script problem still reaches the user on stderr (it is not a log
    // line), and the file exists, private.
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("script"));
    let mode = spindle::os::testing::mode(&log);
    assert_eq!(mode, 0o600);
    // A session writes info lines there, and nothing to stderr.
    let out = crate::support::spindle_command(&crate::support::temp_dir("home"))
        .args([
            "acp",
            "--script",
            "examples/hello.script.json",
            "--drain",
            "--log-file",
        ])
        .arg(&log)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .env_remove("RUST_LOG")
        .stdin(
            std::fs::File::open(concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/examples/hello.ndjson"
            ))
            .unwrap(),
        )
        .output()
        .unwrap();
    assert!(out.status.success());
    assert!(
        out.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(text.contains("INFO"), "{text}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// What bash offers, asked the way bash asks: a flag's values, a
/// command's own commands, exec's flags.
#[cfg(unix)]
#[test]
fn bash_completes_values_subcommands_and_exec_flags() {
    let (_, script, _) = run(&["completions", "bash"]);
    let path = std::env::temp_dir().join(format!("spindle-complete-{}.bash", std::process::id()));
    std::fs::write(&path, &script).unwrap();
    let ask = |words: &str| -> String {
        let line = format!(
            "source {}; COMP_WORDS=({words}); COMP_CWORD=$((${{#COMP_WORDS[@]}} - 1)); _spindle; echo \"${{COMPREPLY[*]}}\"",
            path.display()
        );
        match Command::new("bash").arg("-c").arg(&line).output() {
            Ok(out) => String::from_utf8_lossy(&out.stdout).trim().to_string(),
            Err(_) => String::from("(no bash)"),
        }
    };
    if ask("spindle ''") == "(no bash)" {
        eprintln!("bash is not installed; completions not tried");
        return;
    }
    assert_eq!(ask("spindle acp --permissions ''"), "ask auto sandbox yolo");
    assert_eq!(ask("spindle exec --preset d"), "delivery");
    assert!(ask("spindle sessions ''").contains("export"));
    assert_eq!(ask("spindle exec --cont"), "--continue");
    let exec = ask("spindle exec --");
    for flag in ["--json", "--quiet", "--session", "--agent"] {
        assert!(exec.split(' ').any(|w| w == flag), "{flag}: {exec}");
    }
    assert!(!exec.contains("--setup"), "{exec}");
    assert_eq!(ask("spindle chat --hide"), "--hide-thoughts");
    assert!(ask("spindle ''").contains("untrust"));
    let _ = std::fs::remove_file(&path);
}

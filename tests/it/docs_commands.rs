//! The commands README.md and docs/*.md show: every line of a shell block
//! (`sh`, `bash`, `shell`; the `$ ` lines of a `console` block) is either
//! run here, offline and with a private home, or named below with the
//! reason it cannot be (a new command in the docs fails this test until
//! it is one or the other). Unix only: the commands are shell lines.
//!
//! A command runs in a scratch folder holding a copy of `examples/`, so a
//! demo never writes into the checkout; `cargo run --release --` is the
//! binary under test. A demo's session folder (`"cwd":"/tmp"` in its
//! `.ndjson`) is that scratch folder too.

use crate::support::{spindle_command, temp_dir, validate_agent_message};
use serde_json::Value;
use std::path::{Path, PathBuf};

/// Commands shown that cannot run here, by how they start, with why.
const NOT_RUN: &[(&str, &str)] = &[
    ("cargo test", "the suite this check is part of"),
    ("cargo install", "installs into the reader's machine"),
    (
        "cargo build --release",
        "a release build; .ci/run makes it (scripts/release)",
    ),
    (
        "MACOSX_DEPLOYMENT_TARGET=",
        "a release build; .ci/run makes it (scripts/release)",
    ),
    (
        "scripts/build-static",
        "a release build; .ci/run makes it (scripts/test-aarch64, scripts/interop)",
    ),
    (
        "scripts/container-image",
        "packs a release build; fleets::the_container_image_is_a_valid_oci_layout runs it on the test binary",
    ),
    (
        "skopeo inspect oci:",
        "reads the image of a release build; fleets::the_container_image_is_a_valid_oci_layout runs it when skopeo is installed",
    ),
    (
        "podman load",
        "loads an image into the reader's container storage",
    ),
    (
        "scripts/bench",
        "takes minutes and prints figures; nothing to check",
    ),
    (
        "spindle setup",
        "tests the reader's key against their provider over the network",
    ),
    ("spindle acp ./agents/", "names the reader's own agent file"),
    (
        "bash scripts/interop --deps-only",
        "installs the Python SDK from the package registry; .ci/run runs it before cargo test",
    ),
    (
        "spindle serve",
        "serves until stopped; tests/it/serve starts it and drives it",
    ),
    (
        "spindle doctor --serve",
        "names the reader's own certificate and key; tests/it/serve/doctor.rs runs it",
    ),
    (
        "spindle acp --script my-scenario.json",
        "names the reader's own script",
    ),
    ("export ", "sets the reader's own keys and servers"),
    ("sha256sum ", "checks a downloaded release archive"),
    (
        "tar -xzf spindle-VERSION",
        "unpacks a downloaded release archive",
    ),
    (
        "install -m 755 spindle",
        "installs into the reader's machine",
    ),
    (
        "printf '%s\\n' \"$MY_KEY\" | spindle setup",
        "sends the reader's key to their gateway",
    ),
    (
        "acpx ",
        "another client; scripts/interop drives Spindle through acpx in CI",
    ),
    (
        "(cd \"$(mktemp -d)\" && cargo run --release --manifest-path",
        "run from a copy of the checkout by first_day::the_readme_chat_demo_leaves_the_clone_alone",
    ),
];

/// How a command that runs starts with: the rest is Spindle's arguments.
const SPINDLE: &[&str] = &["cargo run --release -- ", "spindle "];

/// What a chat demo is typed.
const TYPED: &str = "Show me the tools\n/exit\n";

struct Shown {
    file: String,
    command: String,
}

/// Every command line in a shell block of README.md and docs/*.md.
fn shown() -> Vec<Shown> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = vec![root.join("README.md")];
    let mut docs: Vec<PathBuf> = std::fs::read_dir(root.join("docs"))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    docs.sort();
    files.extend(docs);
    let mut out = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(&file).unwrap();
        let mut shell = false;
        let mut console = false;
        let mut in_block = false;
        for line in text.lines() {
            let trimmed = line.trim();
            if let Some(info) = trimmed.strip_prefix("```") {
                in_block = !in_block;
                console = in_block && info.trim() == "console";
                shell = in_block && matches!(info.trim(), "sh" | "bash" | "shell" | "console");
                continue;
            }
            if !(in_block && shell) || trimmed.is_empty() || trimmed.starts_with('#') {
                continue;
            }
            // A console block shows output too: its commands start with `$ `.
            let command = match (console, trimmed.strip_prefix("$ ")) {
                (_, Some(command)) => command,
                (true, None) => continue,
                (false, None) => trimmed,
            };
            let command = match command.find(" #") {
                Some(at) => command[..at].trim_end(),
                None => command,
            };
            out.push(Shown {
                file: file.strip_prefix(root).unwrap().display().to_string(),
                command: command.to_string(),
            });
        }
    }
    out
}

/// Splits a command line the simple way the docs write them: words,
/// double quotes, and one `< file`.
fn words(line: &str) -> (Vec<String>, Option<String>) {
    let mut words = Vec::new();
    let mut word = String::new();
    let mut quoted = false;
    let mut any = false;
    for c in line.chars() {
        match c {
            '"' => {
                quoted = !quoted;
                any = true;
            }
            c if c.is_whitespace() && !quoted => {
                if any || !word.is_empty() {
                    words.push(std::mem::take(&mut word));
                }
                any = false;
            }
            c => word.push(c),
        }
    }
    if any || !word.is_empty() {
        words.push(word);
    }
    let mut input = None;
    if let Some(at) = words.iter().position(|w| w == "<") {
        input = words.get(at + 1).cloned();
        words.truncate(at);
    }
    (words, input)
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap().flatten() {
        let path = entry.path();
        let target = to.join(entry.file_name());
        if path.is_dir() {
            copy_dir(&path, &target);
        } else {
            std::fs::copy(&path, &target).unwrap();
        }
    }
}

/// Runs one shown command; an error says what went wrong.
fn run(command: &str, args: &str, dir: &Path) -> Result<(), String> {
    let (args, input) = words(args);
    let input = match input {
        Some(file) => {
            let text = std::fs::read_to_string(dir.join(&file))
                .map_err(|err| format!("cannot read {file}: {err}"))?;
            text.replace(
                "\"cwd\":\"/tmp\"",
                &format!("\"cwd\":{:?}", dir.display().to_string()),
            )
        }
        None if args.first().is_some_and(|a| a == "chat") => TYPED.to_string(),
        None => String::new(),
    };
    let mut spindle = spindle_command(&dir.join("home"));
    spindle.args(&args).current_dir(dir).env_remove("RUST_LOG");
    let out = crate::support::agent::output_with_input(&mut spindle, input.as_bytes());
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    let said = || format!("{command}\nstdout:\n{stdout}\nstderr:\n{stderr}");
    if !out.status.success() {
        return Err(format!("exit {:?}: {}", out.status.code(), said()));
    }
    if stderr.contains("panicked") || stderr.contains("ERROR") {
        return Err(format!("an error on stderr: {}", said()));
    }
    if args.first().is_some_and(|a| a == "acp") {
        // Protocol only, every message as the schema says, no error.
        for line in stdout.lines() {
            let message: Value = serde_json::from_str(line)
                .map_err(|err| format!("not JSON ({err}): {line}\n{}", said()))?;
            validate_agent_message(&message, None).map_err(|err| format!("{err}: {line}"))?;
            if message.get("error").is_some() {
                return Err(format!("an error answer: {line}\n{}", said()));
            }
        }
    } else if stdout.trim().is_empty() {
        return Err(format!("nothing on stdout: {}", said()));
    }
    Ok(())
}

#[test]
fn every_command_the_docs_show_runs_or_says_why_not() {
    let shown = shown();
    // The README's demos at least: a parser that finds nothing proves
    // nothing.
    assert!(shown.len() >= 20, "{}", shown.len());
    let dir = temp_dir("docs-commands");
    let examples = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples");
    let mut failures = Vec::new();
    let mut ran = 0;
    for item in &shown {
        let command = item.command.as_str();
        if NOT_RUN.iter().any(|(start, _)| command.starts_with(start)) {
            continue;
        }
        let Some(args) = SPINDLE.iter().find_map(|s| command.strip_prefix(s)) else {
            failures.push(format!(
                "{}: `{command}` is neither run nor named in NOT_RUN with a reason",
                item.file
            ));
            continue;
        };
        // Each command in a scratch folder of its own.
        let scratch = dir.join(format!("run-{ran}"));
        copy_dir(&examples, &scratch.join("examples"));
        if let Err(why) = run(command, args, &scratch) {
            failures.push(format!("{}: {why}", item.file));
        }
        ran += 1;
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
    assert!(ran >= 8, "only {ran} commands ran");
    // A demo never wrote into the checkout.
    assert!(!Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("spindle-demo.txt")
        .exists());
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn the_command_splitter_keeps_quotes_and_the_input_file() {
    let (args, input) = words(r#"exec --script x.json "Say hello" < in.ndjson"#);
    assert_eq!(args, ["exec", "--script", "x.json", "Say hello"]);
    assert_eq!(input.as_deref(), Some("in.ndjson"));
    let (args, input) = words("--version");
    assert_eq!(args, ["--version"]);
    assert_eq!(input, None);
}

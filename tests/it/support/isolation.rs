//! The one way a test starts Spindle: [`spindle_command`], whose child
//! sees a private home and none of the developer's keys, endpoints or
//! folders. `architecture::every_start_of_spindle_goes_through_the_harness`
//! fails when a test names the binary anywhere else.
//!
//! The test process itself is made private too, before any test runs
//! (Linux: a constructor in `.init_array`; elsewhere the first call of
//! [`process_home`]): its `HOME`, XDG and Windows folders point into a
//! directory of its own and the variables of [`SCRUBBED`] are gone. So
//! the in-process agent (`support::in_process`), which reads the
//! environment of the test process, never finds the developer's config,
//! skills, hooks, commands or keys, and neither does a child a test
//! forgot to route through here.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// The folders a program finds a user's files through, each pointed into
/// the private home (the value is the sub-folder, `""` for the home).
pub const FOLDERS: [(&str, &str); 9] = [
    ("HOME", ""),
    ("USERPROFILE", ""),
    ("SPINDLE_HOME", ""),
    ("XDG_CONFIG_HOME", "config"),
    ("XDG_DATA_HOME", "data"),
    ("XDG_STATE_HOME", "state"),
    ("XDG_CACHE_HOME", "cache"),
    ("APPDATA", "AppData/Roaming"),
    ("LOCALAPPDATA", "AppData/Local"),
];

/// What Spindle reads from the environment besides folders, none of which
/// may reach a test from the developer's shell: provider keys
/// (`credentials::STANDARD`) and endpoints, proxies, certificates, the log
/// switch, git's and the editor's variables. A test that wants one sets it on the command.
pub const SCRUBBED: [&str; 41] = [
    "OPENAI_API_KEY",
    "OPENAI_BASE_URL",
    "OPENAI_ORG_ID",
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_AUTH_TOKEN",
    "ANTHROPIC_BASE_URL",
    "AZURE_OPENAI_API_KEY",
    "OPENROUTER_API_KEY",
    "DEEPSEEK_API_KEY",
    "GROQ_API_KEY",
    "MISTRAL_API_KEY",
    "GEMINI_API_KEY",
    "GOOGLE_API_KEY",
    "XAI_API_KEY",
    "TOGETHER_API_KEY",
    "FIREWORKS_API_KEY",
    "COHERE_API_KEY",
    "PERPLEXITY_API_KEY",
    "CEREBRAS_API_KEY",
    "HF_TOKEN",
    "HUGGING_FACE_HUB_TOKEN",
    "OLLAMA_HOST",
    "HTTP_PROXY",
    "http_proxy",
    "HTTPS_PROXY",
    "https_proxy",
    "ALL_PROXY",
    "all_proxy",
    "NO_PROXY",
    "no_proxy",
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
    "RUST_LOG",
    "GIT_CONFIG_GLOBAL",
    "GIT_CONFIG_SYSTEM",
    "GIT_DIR",
    "GIT_WORK_TREE",
    "CLAUDE_PROJECT_DIR",
    "SPINDLE_PROJECT_DIR",
    "EDITOR",
    "PAGER",
];

/// Set in the test process once it is private, so that a copy of the test
/// binary started again (the stdio MCP server, the sandbox stand-in)
/// keeps the home it was given.
const MARK: &str = "SPINDLE_IT_PRIVATE_HOME";

/// `spindle` (`agent::spindle_binary`) with [`isolate`] applied for
/// `home`: the only way the tests start the binary.
pub fn spindle_command(home: &Path) -> Command {
    let mut command = Command::new(super::agent::spindle_binary());
    isolate(&mut command, home);
    command
}

/// The binary's path, for a test that runs it through another program
/// (`setpriv`, the sandbox's launcher): that command must be isolated all
/// the same, with `Agent::spawn_program` or [`isolate`] (the architecture
/// test checks that a file using this does one of them).
pub fn spindle_path() -> PathBuf {
    super::agent::spindle_binary()
}

/// Points every folder of [`FOLDERS`] into `home` (created) and removes
/// the variables of [`SCRUBBED`]. A test may set any of them again after.
pub fn isolate(command: &mut Command, home: &Path) {
    std::fs::create_dir_all(home)
        .unwrap_or_else(|err| panic!("cannot create {}: {err}", home.display()));
    for name in SCRUBBED {
        command.env_remove(name);
    }
    for (name, sub) in FOLDERS {
        command.env(name, folder(home, sub));
    }
}

fn folder(home: &Path, sub: &str) -> PathBuf {
    if sub.is_empty() {
        home.to_path_buf()
    } else {
        home.join(sub)
    }
}

/// The private home of the test process (made private on first call when
/// no constructor did it at start).
pub fn process_home() -> &'static Path {
    static HOME: OnceLock<PathBuf> = OnceLock::new();
    HOME.get_or_init(|| {
        make_private();
        PathBuf::from(std::env::var_os(MARK).expect("the test process is private"))
    })
}

/// Panics unless the test process is private: its `HOME` and
/// `SPINDLE_HOME` are its own, no provider key is set.
pub fn assert_process_private() {
    let home = process_home();
    for name in ["HOME", "SPINDLE_HOME"] {
        let value = std::env::var_os(name).map(PathBuf::from);
        assert!(
            value.as_deref().is_some_and(|v| v.starts_with(home)),
            "the test process's {name} is {value:?}, not under its private home {}",
            home.display()
        );
    }
    for name in SCRUBBED {
        assert!(
            std::env::var_os(name).is_none(),
            "the test process still has {name} from the developer's environment"
        );
    }
}

/// Makes the test process private, once (see the module documentation).
/// The real `CARGO_HOME` and `RUSTUP_HOME` are kept, derived from the old
/// home when unset, so a tool a test runs still finds its toolchain.
fn make_private() {
    if std::env::var_os(MARK).is_some() {
        return;
    }
    let old = std::env::var_os("HOME")
        .or_else(|| std::env::var_os("USERPROFILE"))
        .map(PathBuf::from);
    if let Some(old) = &old {
        for (name, dir) in [("CARGO_HOME", ".cargo"), ("RUSTUP_HOME", ".rustup")] {
            if std::env::var_os(name).is_none() {
                std::env::set_var(name, old.join(dir));
            }
        }
    }
    let home = std::env::temp_dir()
        .join("spindle-tests")
        .join(format!("process-{}", std::process::id()))
        .join("home");
    if std::fs::create_dir_all(&home).is_err() {
        // Nothing is set: `assert_process_private` then says so.
        return;
    }
    for name in SCRUBBED {
        std::env::remove_var(name);
    }
    for (name, sub) in FOLDERS {
        std::env::set_var(name, folder(&home, sub));
    }
    std::env::set_var(MARK, &home);
}

#[cfg(target_os = "linux")]
#[used]
#[link_section = ".init_array"]
static PRIVATE: extern "C" fn() = private_at_start;

/// Runs before `main`, while the process has one thread, so that changing
/// the environment races with nothing.
#[cfg(target_os = "linux")]
extern "C" fn private_at_start() {
    make_private();
}

//! The unit tests' process is private (Linux: a constructor in
//! `.init_array`, run before `main` while the process has one thread):
//! its `HOME`, `SPINDLE_HOME`, XDG and Windows folders point into a
//! directory of its own and the provider keys, endpoints and proxies of
//! the developer's shell are gone. So no unit test reaches the
//! developer's config, skills, commands, instructions, keys or database
//! through `config::default_path`, `folders::home` or the environment.
//! The integration tests do the same in `tests/it/support/isolation.rs`.

#[used]
#[link_section = ".init_array"]
static PRIVATE: extern "C" fn() = private_at_start;

extern "C" fn private_at_start() {
    make_private();
}

/// The folders pointed into the private home (sub-folder, `""` for it).
const FOLDERS: [(&str, &str); 9] = [
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

/// Endpoints, proxies and the log switch, removed with the keys of
/// `credentials::STANDARD` (here the front ends' tier: it may reach both).
const SCRUBBED: [&str; 15] = [
    "OPENAI_BASE_URL",
    "OPENAI_ORG_ID",
    "ANTHROPIC_BASE_URL",
    "OLLAMA_HOST",
    "HTTP_PROXY",
    "http_proxy",
    "HTTPS_PROXY",
    "https_proxy",
    "ALL_PROXY",
    "all_proxy",
    "NO_PROXY",
    "no_proxy",
    "RUST_LOG",
    "CLAUDE_PROJECT_DIR",
    "SPINDLE_PROJECT_DIR",
];

fn make_private() {
    let old = std::env::var_os("HOME")
        .or_else(|| std::env::var_os("USERPROFILE"))
        .map(std::path::PathBuf::from);
    if let Some(old) = &old {
        // The toolchain stays where it is for a test that runs a tool.
        for (name, dir) in [("CARGO_HOME", ".cargo"), ("RUSTUP_HOME", ".rustup")] {
            if std::env::var_os(name).is_none() {
                std::env::set_var(name, old.join(dir));
            }
        }
    }
    let home = std::env::temp_dir()
        .join("spindle-unit-tests")
        .join(format!("process-{}", std::process::id()));
    if std::fs::create_dir_all(&home).is_err() {
        return;
    }
    for name in crate::credentials::STANDARD.iter().chain(SCRUBBED.iter()) {
        std::env::remove_var(name);
    }
    for (name, sub) in FOLDERS {
        let dir = if sub.is_empty() {
            home.clone()
        } else {
            home.join(sub)
        };
        std::env::set_var(name, dir);
    }
}

#[test]
fn the_unit_tests_run_with_a_private_home_and_no_keys() {
    let home = std::env::temp_dir().join("spindle-unit-tests");
    for name in ["HOME", "SPINDLE_HOME", "XDG_CONFIG_HOME"] {
        let value = std::env::var_os(name).map(std::path::PathBuf::from);
        assert!(
            value.as_deref().is_some_and(|v| v.starts_with(&home)),
            "{name} is {value:?}"
        );
    }
    assert!(crate::config::default_path().starts_with(&home));
    for name in crate::credentials::STANDARD {
        assert!(std::env::var_os(name).is_none(), "{name} is set");
    }
}

//! The in-process tier: `spindle::agent::serve` on a thread of the test
//! process, over a pair of pipes — the seam `spindle exec` drives — behind
//! the same `Agent` as the subprocess harness, so every line the agent
//! writes is validated against the ACP schema just the same.
//!
//! No process starts, so these agents are cheap, and this is the default
//! tier for an integration test: `acp(args)` takes the flags of
//! `spindle acp` that `Options` carries (and an agent file's path),
//! `agent()` and `scripted(path)` are its common cases. The price is that
//! they share the test process: its environment (which a test cannot
//! change for itself), its working directory and its log. So everything a
//! test gives the agent goes by a path it names: a private database and
//! config file (see `options`), a script, a key file. The fake model that
//! a spawned agent would find through `OPENAI_BASE_URL` goes into a config
//! file as the same provider (`openai_config`). What the agent finds
//! through the environment (`HOME`, `SPINDLE_HOME`, keys) is the test
//! process's own private one (`support::isolation`).
//!
//! A test spawns the binary with `Agent::spawn` instead when it needs:
//! an environment variable (`RUST_LOG`, a key in a variable, `TMPDIR`);
//! the agent's stderr (`Agent::stderr` panics here, so no test finds
//! nothing there and passes); a signal, a kill or a pid; an exit code or a
//! refusal of the command line; a file found through `$SPINDLE_HOME` or
//! `HOME` (the user's `AGENTS.md`, commands, skills); what ends with the
//! agent's process (its commands under `spindle guard`, a hook's or a
//! job's leftovers); the agent's own memory; several agents sharing a
//! database (their leases name a process); or its command line itself
//! (the terminal auth method repeats it).
//!
//! The agent's own executable is the test binary here; when the agent runs
//! it again for the sandbox, `support::reexec` hands that run to the real
//! `spindle` (Linux).

use std::path::Path;
use std::thread;

use spindle::agent::Options;

use super::agent::{new_scratch, Agent, Runner, TEST_BINARY};
use super::write_file;

/// The options of a plain `spindle acp` whose state lives under `home`: its
/// own database and an empty config file there, and no signal handlers
/// (the test process's signals are not the agent's).
pub fn options(home: &Path) -> Options {
    let config = write_file(home, "config.json", "{}");
    Options {
        db: Some(home.join("spindle.db")),
        config: Some(config),
        signals: false,
        ..Options::default()
    }
}

/// An in-process `spindle acp` (a spawned one when `SPINDLE_TEST_BINARY`
/// names another binary to test: see `agent::spindle_binary`).
pub fn agent() -> Agent {
    if other_binary() {
        return Agent::spawn(&["acp"], &[]);
    }
    with_options(|_| {})
}

/// An in-process `spindle acp --script SCRIPT` (or a spawned one, as for
/// `agent`).
pub fn scripted(script: &Path) -> Agent {
    if other_binary() {
        let script = script.to_str().expect("the script's path is UTF-8");
        return Agent::spawn(&["acp", "--script", script], &[]);
    }
    with_options(|options| options.script = Some(script.to_path_buf()))
}

/// `spindle acp ARGS`, in process: an agent file's path and the command
/// line's flags that `Options` carries (`--script`, `--db`, `--config`, `--model`,
/// `--permissions`, `--preset`, `--profile`, `--retries`, `--max-steps`,
/// `--on-reject`, `--drain`, `--connect-timeout`, `--stall-timeout`) set
/// the same fields `spindle acp` would; any other flag panics (a test
/// that needs it spawns the binary). A spawned agent when
/// `SPINDLE_TEST_BINARY` names another binary, as for `agent`.
pub fn acp(args: &[&str]) -> Agent {
    if other_binary() {
        let mut all = vec!["acp"];
        all.extend_from_slice(args);
        return Agent::spawn(&all, &[]);
    }
    let args: Vec<String> = args.iter().map(|arg| arg.to_string()).collect();
    with_options(move |options| apply_args(options, &args))
}

/// Sets in `options` what the flags `args` of `spindle acp` choose.
fn apply_args(options: &mut Options, args: &[String]) {
    use spindle::modes::{Policy, Preset, Profile};
    let mut words = args.iter();
    while let Some(flag) = words.next() {
        if flag == "--drain" {
            options.drain = true;
            continue;
        }
        if !flag.starts_with("--") && options.agent_path.is_none() {
            options.agent_path = Some(flag.into());
            continue;
        }
        let value = words
            .next()
            .unwrap_or_else(|| panic!("{flag} takes a value in {args:?}"))
            .clone();
        match flag.as_str() {
            "--script" => options.script = Some(value.into()),
            "--db" => options.db = Some(value.into()),
            "--config" => options.config = Some(value.into()),
            "--model" => options.model = Some(value),
            "--permissions" => {
                options.permissions =
                    Some(Policy::parse(&value).unwrap_or_else(|| refused(flag, &value)))
            }
            "--preset" => {
                options.preset =
                    Some(Preset::parse(&value).unwrap_or_else(|| refused(flag, &value)))
            }
            // `--profile` still takes a preset, as the command line does.
            "--profile" => match (Profile::parse(&value), Preset::parse(&value)) {
                (Some(profile), _) => options.profile = Some(profile),
                (None, Some(preset)) => options.preset = Some(preset),
                (None, None) => refused(flag, &value),
            },
            "--max-steps" => {
                options.max_steps = value.parse().unwrap_or_else(|_| refused(flag, &value))
            }
            "--on-reject" => {
                options.on_reject = Some(match value.as_str() {
                    "stop" => spindle::config::OnReject::Stop,
                    "continue" => spindle::config::OnReject::Continue,
                    _ => refused(flag, &value),
                })
            }
            "--retries" => {
                let retries: u32 = value.parse().unwrap_or_else(|_| refused(flag, &value));
                options.timeouts.attempts = retries + 1;
                options.retries_given = true;
            }
            "--connect-timeout" => options.timeouts.connect = seconds(&value),
            "--stall-timeout" => options.timeouts.stall = seconds(&value),
            _ => panic!("{flag}: not a flag the in-process agent takes (spawn the binary)"),
        }
    }
    // The agent file, read before any protocol as `spindle acp PATH` does.
    if let Err(err) = options.adopt_agent_file() {
        panic!("the agent file: {err}");
    }
}

/// Panics: `value` is not one that `flag` takes.
fn refused<T>(flag: &str, value: &str) -> T {
    panic!("{flag} {value}: not a value spindle acp takes")
}

/// A number of seconds, as `--connect-timeout` takes it.
fn seconds(value: &str) -> std::time::Duration {
    let seconds: f64 = value
        .parse()
        .unwrap_or_else(|_| panic!("{value}: not a number of seconds"));
    std::time::Duration::from_secs_f64(seconds)
}

/// A config file in `dir` that stands for the environment's OpenAI
/// provider (`OPENAI_BASE_URL=base OPENAI_API_KEY=key`), which an
/// in-process agent cannot be given: a provider named `openai` at `base`,
/// its key in a file next to the config. Returns the config's path.
pub fn openai_config(dir: &Path, base: &str, key: &str) -> std::path::PathBuf {
    openai_config_with(dir, base, key, serde_json::json!({}))
}

/// `openai_config` with the settings of `more` (an object) besides.
pub fn openai_config_with(
    dir: &Path,
    base: &str,
    key: &str,
    more: serde_json::Value,
) -> std::path::PathBuf {
    let key_file = write_file(dir, "openai.key", key);
    // A key file others can read is refused.
    spindle::os::testing::set_mode(&key_file, 0o600).expect("cannot make the key file private");
    let mut config = serde_json::json!({"providers": {"openai": {
        "kind": "openai",
        "base_url": base,
        "api_key_file": key_file,
        "requires_key": false,
    }}});
    let more = more.as_object().expect("more settings are an object");
    for (name, value) in more {
        config[name] = value.clone();
    }
    write_file(dir, "openai-config.json", config.to_string())
}

/// Whether the tests are pointed at a binary other than cargo's, whose
/// code is not the one linked into this test process.
fn other_binary() -> bool {
    std::env::var_os(TEST_BINARY).is_some_and(|path| !path.is_empty())
}

/// An in-process agent with `options(home)` changed by `configure`.
pub fn with_options(configure: impl FnOnce(&mut Options)) -> Agent {
    // The agent reads the environment of this process (the user's
    // folders, keys): it must be the private one.
    super::isolation::assert_process_private();
    let scratch = new_scratch();
    let mut options = options(&scratch.join("home"));
    configure(&mut options);
    let pipe = || std::io::pipe().expect("cannot create a pipe");
    let (to_agent_reader, to_agent) = pipe();
    let (from_agent, from_agent_writer) = pipe();
    let handle = thread::Builder::new()
        .name("in-process-agent".into())
        .spawn(move || {
            spindle::agent::serve(options, to_agent_reader, from_agent_writer)
                .map_err(|error| error.to_string())
        })
        .expect("cannot start the agent thread");
    Agent::start(
        Runner::Thread(Some(handle)),
        to_agent,
        from_agent,
        scratch,
        None,
    )
}

//! The front-ends: the command line (`args.rs`, lexopt), its help and
//! completions (`help.rs`), and every command besides `acp`, which is
//! `agent::serve`. `exec.rs` and `chat.rs` run an in-process agent and speak
//! ACP to it through `link.rs`; `printer.rs` is what they show and ask, and
//! `line.rs` the chat's line editor (raw mode and the width come from
//! `os/`); `budget.rs` holds exec's budgets and `exec_result.rs` its
//! `--json` result line. `doctor.rs`, `setup.rs` (its questions in `setup_ask.rs`),
//! `sessions.rs`, `mcp_list.rs` (`mcp list`, `add`, `remove`),
//! `mcp_login.rs` (`mcp login`, `logout`), `trust.rs` (`trust`, `untrust`)
//! are the others; `logging.rs` is Spindle's own logger (stderr,
//! `RUST_LOG`). `stdout.rs` prints, a reader that went away being a quiet
//! success; `ending.rs` is how exec and chat end on a signal (in order,
//! then the signal passed on). `private_home.rs` gives the unit tests'
//! process a private home (test builds, Linux).
//!
//! Each command ends in `Ok` (what to print) or a [`Failure`]
//! (`failure.rs`); `main` here is the one place an exit code is chosen, by
//! [`Failure::exit_code`].

pub(crate) mod args;
mod budget;
mod chat;
pub(crate) mod doctor;
mod doctor_lines;
mod doctor_store;
mod ending;
pub(crate) mod exec;
mod exec_result;
mod failure;
mod help;
mod line;
mod link;
mod logging;
mod mcp_list;
pub(crate) mod mcp_login;
mod printer;
// The unit tests run with a private home (a constructor; Linux).
#[cfg(all(test, target_os = "linux"))]
mod private_home;
mod sessions;
pub mod setup;
mod setup_ask;
mod setup_error;
mod setup_key;
mod stdout;
mod trust;

use crate::config::loaded::Loaded;
use args::{parse_args, Command, Usage};
pub use failure::Failure;
use help::{command_help, completions, HELP};
use logging::{init_logging, log_file_of};
use mcp_list::mcp_list;
use sessions::run_sessions;
use std::process::ExitCode;

/// The config of the command, loaded once for the whole process (every
/// command but the sandbox launcher and the guard, which read none): the
/// credentials guard, the log and the agent's start all use this one.
fn load_config(command: &Result<Command, Usage>) -> Option<Loaded> {
    let config = match command {
        Ok(Command::Sandbox(_) | Command::Guard(_)) => return None,
        Ok(Command::Acp(options)) => options.config.clone(),
        Ok(Command::Exec(options, _)) => options.config.clone(),
        Ok(Command::Serve(options, _)) => options.config.clone(),
        Ok(Command::Doctor(args)) => args.config.clone(),
        Ok(Command::McpList { config, .. }) => config.clone(),
        Ok(Command::McpEdit { config, .. }) => config.clone(),
        Ok(Command::McpSignIn { config, .. }) => config.clone(),
        Ok(Command::Trust { config, .. }) => config.clone(),
        _ => None,
    };
    Some(Loaded::load(config.as_deref()))
}

/// Takes the provider keys out of the environment (kept in memory) and
/// makes the process non-dumpable, for every command but the sandbox
/// launcher and the guard (no `loaded`), which hand their environment on
/// as it is.
fn guard_credentials(loaded: Option<&Loaded>) {
    let Some(loaded) = loaded else {
        return;
    };
    let unusable = crate::config::Config::default();
    let config = loaded.config().unwrap_or(&unusable);
    let names: Vec<String> = config
        .providers
        .values()
        .filter_map(|provider| provider.api_key_env.clone())
        .collect();
    crate::credentials::withdraw(&names, &config.tools.pass_env);
    crate::credentials::guard_process();
}

pub fn main() -> ExitCode {
    let command = parse_args();
    // While the process has one thread.
    let loaded = load_config(&command);
    guard_credentials(loaded.as_ref());
    // Before anything large is allocated (a session loaded, a model list).
    crate::provider::http::map_large_buffers();
    // `exec` shows each retry itself: its stderr log leaves them out.
    let shows_retries = matches!(command, Ok(Command::Exec(..)));
    // The chat's screen is the conversation: no log line lands there.
    let chat = matches!(&command, Ok(Command::Exec(_, args)) if args.chat);
    init_logging(log_file_of(&command, loaded.as_ref()), shows_retries, chat);
    let ended = match command {
        // First, while the process has a single thread: the launcher
        // confines this very process and then execs the command. It and
        // the guard end as their child did, so they choose their own code.
        Ok(Command::Sandbox(args)) => {
            return crate::sandbox::launcher_main(args, &mut std::io::stdout())
        }
        Ok(Command::Guard(args)) => return crate::process::guard::main(args),
        Err(Usage(message)) => Err(Failure::Usage(message)),
        Ok(command) => run(command, loaded),
    };
    match ended.and_then(|text| print_out(&text)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(failure) => {
            failure.report();
            // Everything the command owned is dropped by now: the signal
            // that ended it ends the process too.
            if let Failure::Signalled(name) = failure {
                crate::process::die_of(name);
            }
            ExitCode::from(failure.exit_code())
        }
    }
}

/// What a command printed, on stdout. Each command writes out the outside
/// text it quotes (names, paths, titles) on its own line already; this is
/// the net under them: nothing a terminal would act on leaves here, line
/// breaks and tabs aside. JSON is escaped already, and stays valid. A
/// reader that went away is a success (`stdout.rs`).
fn print_out(text: &str) -> Result<(), Failure> {
    stdout::print(&crate::util::visible(text, true))
        .map_err(|error| Failure::Failed(format!("cannot write to standard output: {error}")))
}

/// Runs one command: `Ok` with what stdout gets. `loaded` is its config,
/// which the agent's start takes over instead of reading it again.
fn run(command: Command, loaded: Option<Loaded>) -> Result<String, Failure> {
    // Every command but the launcher and the guard (handled before) has
    // its config loaded.
    let config = || loaded.clone().expect("the command's config is loaded");
    match command {
        Command::Sandbox(_) | Command::Guard(_) => unreachable!("handled in main"),
        Command::Help(topic) => Ok(topic
            .as_deref()
            .and_then(command_help)
            .unwrap_or_else(|| HELP.to_string())),
        Command::McpList { cwd, .. } => mcp_list(&config(), cwd).map_err(Failure::Failed),
        Command::McpEdit {
            config,
            name,
            server,
            project: false,
        } => mcp_list::mcp_edit(config, &name, server).map_err(Failure::Failed),
        Command::McpEdit {
            name,
            server,
            project: true,
            ..
        } => mcp_list::mcp_edit_project(&config(), &name, server).map_err(Failure::Failed),
        Command::McpSignIn {
            name, url, login, ..
        } => crate::cli::mcp_login::run(&config(), &name, url, login).map_err(Failure::Failed),
        Command::Doctor(args) => {
            let report = crate::cli::doctor::run(&args, &config());
            if report.broken {
                print_out(&report.text)?;
                Err(Failure::Broken)
            } else {
                Ok(report.text)
            }
        }
        Command::Completions(shell) => Ok(completions(&shell)),
        Command::Trust {
            trusted,
            path,
            config: path_of_config,
        } => trust::trust(trusted, path, path_of_config, &config()).map_err(Failure::Failed),
        Command::Version => Ok(match option_env!("SPINDLE_BUILD_COMMIT") {
            Some(commit) => format!("spindle {} (commit {commit})\n", env!("CARGO_PKG_VERSION")),
            None => format!("spindle {}\n", env!("CARGO_PKG_VERSION")),
        }),
        Command::Setup(args) => {
            use std::io::IsTerminal;
            let interactive = std::io::stdin().is_terminal();
            let mut input = std::io::stdin().lock();
            let mut output = std::io::stdout();
            crate::cli::setup::run(args, interactive, &mut input, &mut output)
                .map_err(|error| Failure::SetupFailed(error.into()))
        }
        Command::Sessions(command) => run_sessions(command).map_err(Failure::Failed),
        Command::Exec(options, args) => {
            // The chat reads the file anew only after its `setup` wrote it.
            let options = agent_options(*options, loaded)?;
            match args.chat {
                true => crate::cli::chat::run(options, args),
                false => crate::cli::exec::run(options, args),
            }
            .map(|()| String::new())
        }
        Command::Serve(options, args) => {
            let options = agent_options(*options, loaded)?;
            crate::serve::run(options, args).map_err(|error| match error {
                crate::serve::ServeError::Setup(why) => Failure::Refused(why),
                crate::serve::ServeError::Listen(why) => Failure::Failed(why),
            })?;
            Ok(String::new())
        }
        Command::Acp(options) => {
            // An agent file or a provider typo in --model stops here,
            // before any protocol output.
            let options = agent_options(options, loaded)?;
            // Typed in a terminal: say what this is, once, on stderr.
            {
                use std::io::IsTerminal;
                if std::io::stdin().is_terminal() {
                    eprintln!(
                        "spindle acp speaks the Agent Client Protocol (JSON-RPC, one message a line) on stdin: editors start it. See 'spindle help acp'; Ctrl-D ends it."
                    );
                }
            }
            crate::agent::serve(options, std::io::stdin(), std::io::stdout())
                .map_err(|error| Failure::Failed(error.to_string()))?;
            Ok(String::new())
        }
    }
}

/// The agent's options as a command that runs agents starts them: with
/// the config it loaded, its agent file read and checked, the model's
/// provider checked; and every command and job runs under `spindle guard`
/// (this very binary), so none outlives its agent.
fn agent_options(
    mut options: crate::agent::Options,
    loaded: Option<Loaded>,
) -> Result<crate::agent::Options, Failure> {
    options.loaded = loaded;
    options.adopt_agent_file().map_err(Failure::Failed)?;
    check_model_provider(&mut options)?;
    if let Ok(exe) = std::env::current_exe() {
        crate::process::guard::enable(exe);
    }
    Ok(options)
}

/// A provider typo in `--model` (one the config does not name) is refused
/// before anything starts; a provider typed in another case
/// (`OpenAI/gpt-4.1`) is the one of that name.
fn check_model_provider(options: &mut crate::agent::Options) -> Result<(), Failure> {
    if let Some(model) = &options.model {
        let loaded = options
            .loaded
            .get_or_insert_with(|| Loaded::load(options.config.as_deref()));
        if let Some(config) = loaded.config() {
            let providers: Vec<String> = config.providers.keys().cloned().collect();
            let model = same_provider_spelled(model, &providers);
            crate::config::check_model_provider(&model, &providers).map_err(Failure::Refused)?;
            options.model = Some(model);
        }
    }
    Ok(())
}

/// `provider/model` with the provider spelled as `providers` spells it,
/// when they name it in another case only (and no other way).
fn same_provider_spelled(model: &str, providers: &[String]) -> String {
    let Some((provider, name)) = model.split_once('/') else {
        return model.to_string();
    };
    if providers.iter().any(|p| p == provider) {
        return model.to_string();
    }
    let mut same = providers
        .iter()
        .filter(|p| p.eq_ignore_ascii_case(provider));
    match (same.next(), same.next()) {
        (Some(spelled), None) => format!("{spelled}/{name}"),
        _ => model.to_string(),
    }
}

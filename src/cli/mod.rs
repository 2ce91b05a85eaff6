//! The front-ends: the command line (`args`), its help and completions,
//! and the commands that are not the agent's protocol — `exec`, `doctor`,
//! `setup`, `sessions`, `mcp list`. `main` here is the one place an exit
//! code is chosen.

pub mod args;
pub mod doctor;
pub mod exec;
mod help;
mod logging;
mod mcp_list;
mod sessions;
pub mod setup;

use args::{parse_args, Command, Usage};
use help::{command_help, completions, HELP};
use logging::{init_logging, log_file_of};
use mcp_list::mcp_list;
use sessions::run_sessions;
use std::process::ExitCode;

/// Takes the provider keys out of the environment (kept in memory) and
/// makes the process non-dumpable, for every command but the sandbox
/// launcher and the guard, which hand their environment on as it is.
fn guard_credentials(command: &Result<Command, Usage>) {
    let config = match command {
        Ok(Command::Sandbox(_) | Command::Guard(_)) => return,
        Ok(Command::Acp(options)) => options.config.clone(),
        Ok(Command::Exec(options, _)) => options.config.clone(),
        Ok(Command::Doctor(args)) => args.config.clone(),
        Ok(Command::McpList { config, .. }) => config.clone(),
        _ => None,
    };
    let config = crate::config::Config::load(config.as_deref())
        .map(|(config, _)| config)
        .unwrap_or_default();
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
    guard_credentials(&command);
    // Before anything large is allocated (a session loaded, a model list).
    crate::provider::http::map_large_buffers();
    init_logging(log_file_of(&command));
    match command {
        // First, while the process has a single thread: the launcher
        // confines this very process and then execs the command.
        Ok(Command::Sandbox(args)) => crate::sandbox::launcher_main(args, &mut std::io::stdout()),
        Ok(Command::Guard(args)) => crate::process::guard::main(args),
        Err(Usage(message)) => {
            eprintln!("spindle: {message}\nRun 'spindle --help' for usage.");
            ExitCode::from(2)
        }
        Ok(Command::Help(topic)) => {
            match topic.as_deref().and_then(command_help) {
                Some(text) => print!("{text}"),
                None => print!("{HELP}"),
            }
            ExitCode::SUCCESS
        }
        Ok(Command::McpList { config, cwd }) => match mcp_list(config, cwd) {
            Ok(text) => {
                print!("{text}");
                ExitCode::SUCCESS
            }
            Err(message) => {
                eprintln!("spindle: {message}");
                ExitCode::from(1)
            }
        },
        Ok(Command::Doctor(args)) => {
            let report = crate::cli::doctor::run(&args);
            print!("{}", report.text);
            if report.broken {
                ExitCode::from(1)
            } else {
                ExitCode::SUCCESS
            }
        }
        Ok(Command::Completions(shell)) => {
            print!("{}", completions(&shell));
            ExitCode::SUCCESS
        }
        Ok(Command::Version) => {
            match option_env!("SPINDLE_BUILD_COMMIT") {
                Some(commit) => println!("spindle {} (commit {commit})", env!("CARGO_PKG_VERSION")),
                None => println!("spindle {}", env!("CARGO_PKG_VERSION")),
            }
            ExitCode::SUCCESS
        }
        Ok(Command::Setup(args)) => {
            use std::io::IsTerminal;
            let interactive = std::io::stdin().is_terminal();
            let mut input = std::io::stdin().lock();
            let mut output = std::io::stdout();
            match crate::cli::setup::run(args, interactive, &mut input, &mut output) {
                Ok(summary) => {
                    print!("{summary}");
                    ExitCode::SUCCESS
                }
                Err(message) => {
                    eprintln!("spindle setup: {message}");
                    ExitCode::from(1)
                }
            }
        }
        Ok(Command::Sessions(command)) => match run_sessions(command) {
            Ok(text) => {
                print!("{text}");
                ExitCode::SUCCESS
            }
            Err(message) => {
                eprintln!("spindle: {message}");
                ExitCode::from(1)
            }
        },
        Ok(Command::Exec(options, args)) => {
            let mut options = *options;
            if let Some(path) = options.agent_path.clone() {
                match crate::agentfile::load(&path) {
                    Ok(spec) => options.adopt(spec),
                    Err(error) => {
                        eprintln!("spindle: {error}");
                        return ExitCode::from(1);
                    }
                }
            }
            if let Ok(exe) = std::env::current_exe() {
                crate::process::guard::enable(exe);
            }
            ExitCode::from(crate::cli::exec::run(options, args))
        }
        Ok(Command::Acp(mut options)) => {
            // An agent file: read and checked before any protocol output.
            if let Some(path) = options.agent_path.clone() {
                match crate::agentfile::load(&path) {
                    Ok(spec) => options.adopt(spec),
                    Err(error) => {
                        eprintln!("spindle: {error}");
                        return ExitCode::from(1);
                    }
                }
            }
            // A provider typo in --model stops here, before any protocol.
            if let Some(model) = &options.model {
                if let Ok((config, _)) = crate::config::Config::load(options.config.as_deref()) {
                    let providers: Vec<String> = config.providers.keys().cloned().collect();
                    if let Err(problem) = crate::config::check_model_provider(model, &providers) {
                        eprintln!("spindle: {problem}");
                        return ExitCode::from(2);
                    }
                }
            }
            // Typed in a terminal: say what this is, once, on stderr.
            {
                use std::io::IsTerminal;
                if std::io::stdin().is_terminal() {
                    eprintln!(
                        "spindle acp speaks the Agent Client Protocol (JSON-RPC, one message a line) on stdin: editors start it. See 'spindle help acp'; Ctrl-D ends it."
                    );
                }
            }
            // Every command and job runs under `spindle guard` (this very
            // binary), so none outlives the agent.
            if let Ok(exe) = std::env::current_exe() {
                crate::process::guard::enable(exe);
            }
            match crate::agent::serve(options, std::io::stdin(), std::io::stdout()) {
                Ok(()) => ExitCode::SUCCESS,
                Err(message) => {
                    eprintln!("spindle: {message}");
                    ExitCode::from(1)
                }
            }
        }
    }
}

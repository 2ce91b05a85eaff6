//! The `spindle` command: flags, logging and the exit code. Everything else
//! lives in the library.

use spindle::agent::permission::Policy;
use spindle::agent::{self, Options};
use std::process::ExitCode;
use std::time::Duration;

const HELP: &str = "\
spindle — a coding agent for editors, speaking the Agent Client Protocol

USAGE:
    spindle acp [OPTIONS]     serve ACP (JSON-RPC, one message per line) on stdin/stdout
    spindle --help            print this help
    spindle --version         print the version

OPTIONS (acp):
    --model MODEL             the model to ask (default: gpt-4.1-mini)
    --script FILE             play a JSON scenario instead of calling a model
                              (see docs/scripted-provider.md)
    --permissions POLICY      when tools ask first: ask (every edit and command),
                              auto (edits in the workspace and read-only commands
                              run freely), yolo (nothing asks); default ask
    --max-steps N             the most model calls one prompt may make (default 50)
    --db PATH                 the session database (default $SPINDLE_HOME/spindle.db,
                              else $XDG_DATA_HOME/spindle/spindle.db, else
                              ~/.local/share/spindle/spindle.db; with --script and
                              no --db, a temporary database removed at exit)
    --drain                   on stdin EOF, let running turns finish before exiting
                              (default: cancel them)
    --connect-timeout SECS    longest wait to connect to the model server (default 10)
    --stall-timeout SECS      longest silence of a model stream (default 120)

ENVIRONMENT:
    OPENAI_BASE_URL           base URL of an OpenAI-compatible server
                              (default https://api.openai.com/v1)
    OPENAI_API_KEY            its API key
    SPINDLE_HOME              where Spindle keeps its database (see --db)
    RUST_LOG                  log filter for stderr (error, warn, info, debug, trace)

Exit codes: 0 normal end, 1 runtime failure, 2 usage error.
";

/// A usage error: printed with a hint, exit code 2.
struct Usage(String);

enum Command {
    Help,
    Version,
    Acp(Options),
}

fn parse_args() -> Result<Command, Usage> {
    use lexopt::prelude::*;
    let mut parser = lexopt::Parser::from_env();
    let usage = |err: lexopt::Error| Usage(err.to_string());
    let Some(first) = parser.next().map_err(usage)? else {
        return Err(Usage("missing command; try 'spindle acp'".into()));
    };
    match first {
        Short('h') | Long("help") => return Ok(Command::Help),
        Short('V') | Long("version") => return Ok(Command::Version),
        Value(command) if command == "acp" => {}
        Value(command) => {
            return Err(Usage(format!(
                "unknown command '{}'",
                command.to_string_lossy()
            )))
        }
        other => return Err(usage(other.unexpected())),
    }
    let mut options = Options::default();
    while let Some(arg) = parser.next().map_err(usage)? {
        match arg {
            Long("model") => {
                options.model = Some(parser.value().map_err(usage)?.string().map_err(usage)?)
            }
            Long("script") => options.script = Some(parser.value().map_err(usage)?.into()),
            Long("drain") => options.drain = true,
            Long("db") => options.db = Some(parser.value().map_err(usage)?.into()),
            Long("permissions") => {
                let value = parser.value().map_err(usage)?.string().map_err(usage)?;
                options.permissions = Policy::parse(&value).ok_or_else(|| {
                    Usage(format!(
                        "--permissions takes ask, auto or yolo, got '{value}'"
                    ))
                })?;
            }
            Long("max-steps") => {
                let value = parser.value().map_err(usage)?.string().map_err(usage)?;
                options.max_steps = match value.parse::<usize>() {
                    Ok(steps) if steps > 0 => steps,
                    _ => {
                        return Err(Usage(format!(
                            "--max-steps takes a positive number, got '{value}'"
                        )))
                    }
                };
            }
            Long("connect-timeout") => {
                options.timeouts.connect = seconds(&mut parser, "--connect-timeout")?
            }
            Long("stall-timeout") => {
                options.timeouts.stall = seconds(&mut parser, "--stall-timeout")?
            }
            Short('h') | Long("help") => return Ok(Command::Help),
            other => return Err(usage(other.unexpected())),
        }
    }
    Ok(Command::Acp(options))
}

fn seconds(parser: &mut lexopt::Parser, flag: &str) -> Result<Duration, Usage> {
    use lexopt::ValueExt;
    let value = parser
        .value()
        .map_err(|e| Usage(e.to_string()))?
        .string()
        .map_err(|e| Usage(e.to_string()))?;
    match value.parse::<f64>() {
        Ok(secs) if secs.is_finite() && secs > 0.0 && secs < 1e6 => {
            Ok(Duration::from_secs_f64(secs))
        }
        _ => Err(Usage(format!(
            "{flag} takes a positive number of seconds, got '{value}'"
        ))),
    }
}

fn main() -> ExitCode {
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("warn"))
        .target(env_logger::Target::Stderr)
        .init();
    match parse_args() {
        Err(Usage(message)) => {
            eprintln!("spindle: {message}\nRun 'spindle --help' for usage.");
            ExitCode::from(2)
        }
        Ok(Command::Help) => {
            print!("{HELP}");
            ExitCode::SUCCESS
        }
        Ok(Command::Version) => {
            println!("spindle {}", env!("CARGO_PKG_VERSION"));
            ExitCode::SUCCESS
        }
        Ok(Command::Acp(options)) => {
            match agent::serve(options, std::io::stdin(), std::io::stdout()) {
                Ok(()) => ExitCode::SUCCESS,
                Err(message) => {
                    eprintln!("spindle: {message}");
                    ExitCode::from(1)
                }
            }
        }
    }
}

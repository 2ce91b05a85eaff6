//! The command line: lexopt parsing into a `Command`, with usage errors
//! that name the flag.

use super::help::{command_help, COMMANDS};
use crate::agent::Options;
use crate::modes::Policy;
use crate::modes::Preset;
use crate::modes::Profile;
use std::time::Duration;

/// What a subcommand's parser answers for `--help`.
const HELP_REQUESTED: &str = "\u{0}help";

fn help_instead(error: Usage, topic: &str) -> Result<Command, Usage> {
    if error.0 == HELP_REQUESTED {
        Ok(Command::Help(Some(topic.into())))
    } else {
        Err(error)
    }
}

/// A usage error: printed with a hint, exit code 2.
pub(crate) struct Usage(pub String);

pub(crate) enum Command {
    Help(Option<String>),
    Version,
    Acp(Options),
    Sessions(SessionsCommand),
    Setup(crate::cli::setup::SetupArgs),
    Sandbox(Vec<std::ffi::OsString>),
    Guard(Vec<std::ffi::OsString>),
    Completions(String),
    Exec(Box<Options>, crate::cli::exec::ExecArgs),
    /// `spindle serve`: the agent's options and the server's own.
    Serve(Box<Options>, crate::serve::ServeArgs),
    Doctor(crate::cli::doctor::DoctorArgs),
    McpList {
        config: Option<std::path::PathBuf>,
        cwd: Option<std::path::PathBuf>,
    },
    /// `spindle mcp add NAME …` (a server) and `spindle mcp remove NAME`
    /// (`None`).
    McpEdit {
        config: Option<std::path::PathBuf>,
        name: String,
        server: Option<serde_json::Value>,
        /// `--project`: the project's `.mcp.json`, not the user's config.
        project: bool,
    },
    /// `spindle mcp login NAME [--url URL]` (true) and `spindle mcp
    /// logout NAME`.
    McpSignIn {
        config: Option<std::path::PathBuf>,
        name: String,
        url: Option<String>,
        login: bool,
    },
    /// `spindle trust [PATH]` (true) and `spindle untrust [PATH]`.
    Trust {
        trusted: bool,
        path: Option<std::path::PathBuf>,
        config: Option<std::path::PathBuf>,
    },
}

/// `spindle sessions …`.
pub(crate) struct SessionsCommand {
    pub action: SessionsAction,
    pub db: Option<std::path::PathBuf>,
    pub cwd: Option<String>,
    /// `--agent PATH`: only the sessions that agent file's agent served.
    pub agent: Option<String>,
    /// `--json`: for scripts.
    pub json: bool,
}

pub(crate) enum SessionsAction {
    List,
    /// Removes the empty sessions, and those past an age or a count.
    Prune {
        older_than_days: Option<u64>,
        keep: Option<usize>,
        dry_run: bool,
    },
    Show(String),
    Delete(String),
    Export(String),
}

pub(crate) fn parse_args() -> Result<Command, Usage> {
    use std::io::IsTerminal;
    // Bare `spindle` typed at a terminal opens the conversation; anywhere
    // else (an editor set up without `acp`, a pipe) it stays a usage error.
    let bare = std::env::args_os().len() <= 1;
    if bare && std::io::stdin().is_terminal() && std::io::stdout().is_terminal() {
        return parse(lexopt::Parser::from_args(["chat"]));
    }
    parse(lexopt::Parser::from_env())
}

/// The command line `words` (the program's name left out).
#[cfg(test)]
pub(crate) fn parse_words(words: &[&str]) -> Result<Command, Usage> {
    parse(lexopt::Parser::from_args(words.iter().copied()))
}

fn parse(mut parser: lexopt::Parser) -> Result<Command, Usage> {
    use lexopt::prelude::*;
    let usage = |err: lexopt::Error| Usage(err.to_string());
    let mut exec: Option<crate::cli::exec::ExecArgs> = None;
    let mut serve: Option<crate::serve::ServeArgs> = None;
    let Some(first) = parser.next().map_err(usage)? else {
        return Err(Usage(
            "missing command: editors start 'spindle acp'; in a terminal, 'spindle' alone (or 'spindle chat') opens a conversation".into(),
        ));
    };
    match first {
        Short('h') | Long("help") => return Ok(Command::Help(None)),
        Short('V') | Long("version") => return Ok(Command::Version),
        // The terminal auth method's arguments may replace the agent's own
        // (the ACP registry's reading), so `spindle --setup` is the wizard
        // as well as `spindle acp --setup`.
        Long("setup") => {
            return parse_setup(parser)
                .map(Command::Setup)
                .or_else(|e| help_instead(e, "setup"))
        }
        Value(command) if command == "help" => {
            let topic = match parser.next().map_err(usage)? {
                Some(Value(topic)) => Some(topic.string().map_err(usage)?),
                None => None,
                Some(Short('h') | Long("help")) => Some("help".to_string()),
                Some(other) => return Err(usage(other.unexpected())),
            };
            if let Some(topic) = &topic {
                if command_help(topic).is_none() {
                    return Err(Usage(format!(
                        "no help for '{topic}'; the commands are {}",
                        COMMANDS.join(", ")
                    )));
                }
            }
            return Ok(Command::Help(topic));
        }
        Value(command) if command == "mcp" => return parse_mcp(parser),
        Value(command) if command == "doctor" => {
            let mut args = crate::cli::doctor::DoctorArgs::default();
            while let Some(arg) = parser.next().map_err(usage)? {
                match arg {
                    Long("config") => args.config = Some(parser.value().map_err(usage)?.into()),
                    Long("db") => args.db = Some(parser.value().map_err(usage)?.into()),
                    Long("serve") => {
                        args.serve.get_or_insert_with(Default::default);
                    }
                    Long(
                        flag @ ("listen" | "token-file" | "tls-cert" | "tls-key"
                        | "insecure-network" | "max-connections"),
                    ) => {
                        let flag = flag.to_string();
                        let serve = args.serve.get_or_insert_with(Default::default);
                        serve_flag(serve, &flag, &mut parser)?;
                    }
                    Short('h') | Long("help") => return Ok(Command::Help(Some("doctor".into()))),
                    other => return Err(usage(other.unexpected())),
                }
            }
            return Ok(Command::Doctor(args));
        }
        Value(command) if command == "trust" || command == "untrust" => {
            let trusted = command == "trust";
            let (mut path, mut config) = (None, None);
            while let Some(arg) = parser.next().map_err(usage)? {
                match arg {
                    Long("config") => config = Some(parser.value().map_err(usage)?.into()),
                    Short('h') | Long("help") => return Ok(Command::Help(Some("trust".into()))),
                    Value(value) if path.is_none() => path = Some(value.into()),
                    other => return Err(usage(other.unexpected())),
                }
            }
            return Ok(Command::Trust {
                trusted,
                path,
                config,
            });
        }
        Value(command) if command == "completions" => {
            let shell = match parser.next().map_err(usage)? {
                Some(Value(shell)) => shell.string().map_err(usage)?,
                Some(Short('h') | Long("help")) => {
                    return Ok(Command::Help(Some("completions".into())))
                }
                Some(other) => return Err(usage(other.unexpected())),
                None => {
                    return Err(Usage(
                        "'spindle completions' takes bash, zsh or fish".into(),
                    ))
                }
            };
            if !["bash", "zsh", "fish"].contains(&shell.as_str()) {
                return Err(Usage(format!(
                    "'spindle completions' takes bash, zsh or fish, got '{shell}'"
                )));
            }
            return Ok(Command::Completions(shell));
        }
        Value(command) if command == "acp" => {}
        Value(command) if command == "serve" => serve = Some(crate::serve::ServeArgs::default()),
        Value(command) if command == "exec" => exec = Some(crate::cli::exec::ExecArgs::default()),
        Value(command) if command == "chat" => {
            exec = Some(crate::cli::exec::ExecArgs {
                chat: true,
                ..Default::default()
            })
        }
        Value(command) if command == "sessions" => {
            return parse_sessions(parser)
                .map(Command::Sessions)
                .or_else(|e| help_instead(e, "sessions"))
        }
        Value(command) if command == "setup" => {
            return parse_setup(parser)
                .map(Command::Setup)
                .or_else(|e| help_instead(e, "setup"))
        }
        Value(command) if command == "sandbox" => {
            let args = parser.raw_args().map_err(usage)?.collect();
            return Ok(Command::Sandbox(args));
        }
        Value(command) if command == "guard" => {
            let args = parser.raw_args().map_err(usage)?.collect();
            return Ok(Command::Guard(args));
        }
        Value(command) => {
            return Err(Usage(format!(
                "unknown command '{}'",
                command.to_string_lossy()
            )))
        }
        other => return Err(usage(other.unexpected())),
    }
    let mut options = Options {
        signals: true,
        ..Options::default()
    };
    // `--setup`: the terminal auth method. A client that appends the
    // method's arguments to the agent's command line starts the wizard
    // from `spindle acp … --setup`.
    let mut setup = false;
    while let Some(arg) = parser.next().map_err(usage)? {
        match arg {
            Long("setup") if exec.is_none() && serve.is_none() => setup = true,
            Long("model") => {
                options.model = Some(parser.value().map_err(usage)?.string().map_err(usage)?)
            }
            Long("script") => options.script = Some(parser.value().map_err(usage)?.into()),
            Long("drain") => options.drain = true,
            Long("log-file") => options.log_file = Some(parser.value().map_err(usage)?.into()),
            Long("db") => options.db = Some(parser.value().map_err(usage)?.into()),
            Long("permissions") => {
                let value = parser.value().map_err(usage)?.string().map_err(usage)?;
                let policy = Policy::parse(&value).ok_or_else(|| {
                    Usage(format!(
                        "--permissions takes ask, auto, sandbox or yolo, got '{value}'"
                    ))
                })?;
                if cfg!(windows) && policy == Policy::Sandbox {
                    return Err(Usage(
                        "--permissions sandbox: there is no sandbox on Windows yet; use ask, auto or yolo".into(),
                    ));
                }
                options.permissions = Some(policy);
            }
            Long("preset") => {
                let value = parser.value().map_err(usage)?.string().map_err(usage)?;
                options.preset = Some(Preset::parse(&value).ok_or_else(|| {
                    Usage(format!(
                        "--preset takes light, balanced or delivery, got '{value}'"
                    ))
                })?);
            }
            // `--profile` once named a preset, and still takes one.
            Long("profile") => {
                let value = parser.value().map_err(usage)?.string().map_err(usage)?;
                match (Profile::parse(&value), Preset::parse(&value)) {
                    (Some(profile), _) => options.profile = Some(profile),
                    (None, Some(preset)) => options.preset = Some(preset),
                    (None, None) => {
                        return Err(Usage(format!(
                            "--profile takes lean or full (or a preset: light, balanced, delivery), got '{value}'"
                        )))
                    }
                }
            }
            Long("config") => {
                options.config = Some(parser.value().map_err(usage)?.into());
            }
            Long("max-steps") => {
                let value = parser.value().map_err(usage)?.string().map_err(usage)?;
                let most = crate::cli::budget::MOST_STEPS;
                options.max_steps = match value.trim().parse::<usize>() {
                    Ok(steps) if steps > 0 && steps <= most => steps,
                    _ => {
                        return Err(Usage(format!(
                            "--max-steps takes a whole number from 1 to {most}, got '{value}'"
                        )))
                    }
                };
                if let Some(exec) = exec.as_mut() {
                    exec.budgets.steps = Some(options.max_steps);
                }
            }
            Long("max-cost") if exec.as_ref().is_some_and(|e| !e.chat) => {
                let value = parser.value().map_err(usage)?.string().map_err(usage)?;
                let cost = crate::cli::budget::parse_cost(&value).map_err(Usage)?;
                if let Some(exec) = exec.as_mut() {
                    exec.budgets.cost = Some(cost);
                }
            }
            Long("max-minutes") if exec.as_ref().is_some_and(|e| !e.chat) => {
                let value = parser.value().map_err(usage)?.string().map_err(usage)?;
                let minutes = crate::cli::budget::parse_minutes(&value).map_err(Usage)?;
                if let Some(exec) = exec.as_mut() {
                    exec.budgets.minutes = Some(minutes);
                }
            }
            Long("on-reject") => {
                let value = parser.value().map_err(usage)?.string().map_err(usage)?;
                options.on_reject = Some(match value.as_str() {
                    "stop" => crate::config::OnReject::Stop,
                    "continue" => crate::config::OnReject::Continue,
                    _ => {
                        return Err(Usage(format!(
                            "--on-reject takes stop or continue, got '{value}'"
                        )))
                    }
                });
            }
            Long("connect-timeout") => {
                options.timeouts.connect = seconds(&mut parser, "--connect-timeout")?
            }
            Long("stall-timeout") => {
                options.timeouts.stall = seconds(&mut parser, "--stall-timeout")?
            }
            Long("retries") => {
                let value = parser.value().map_err(usage)?.string().map_err(usage)?;
                options.timeouts.attempts = match value.parse::<u32>() {
                    Ok(retries) if retries <= 10 => {
                        options.retries_given = true;
                        retries + 1
                    }
                    _ => {
                        return Err(Usage(format!(
                            "--retries takes a number from 0 to 10, got '{value}'"
                        )))
                    }
                };
            }
            Short('h') | Long("help") if exec.as_ref().is_some_and(|e| e.chat) => {
                return Ok(Command::Help(Some("chat".into())))
            }
            Long("hide-thoughts") if exec.as_ref().is_some_and(|e| e.chat) => {
                if let Some(exec) = exec.as_mut() {
                    exec.quiet = true;
                }
            }
            Short('h') | Long("help") if exec.is_some() => {
                return Ok(Command::Help(Some("exec".into())))
            }
            Short('h') | Long("help") if serve.is_some() => {
                return Ok(Command::Help(Some("serve".into())))
            }
            Short('h') | Long("help") => return Ok(Command::Help(Some("acp".into()))),
            Long(
                flag @ ("listen" | "token-file" | "tls-cert" | "tls-key" | "insecure-network"
                | "max-connections"),
            ) if serve.is_some() => {
                let flag = flag.to_string();
                if let Some(serve) = serve.as_mut() {
                    serve_flag(serve, &flag, &mut parser)?;
                }
            }
            Long("json") if exec.is_some() => {
                if let Some(exec) = exec.as_mut() {
                    exec.json = true;
                }
            }
            Short('q') | Long("quiet") if exec.is_some() => {
                if let Some(exec) = exec.as_mut() {
                    exec.quiet = true;
                }
            }
            Long("continue") if exec.is_some() => {
                if let Some(exec) = exec.as_mut() {
                    exec.resume = Some(crate::cli::exec::Resume::Latest);
                }
            }
            Long("session") if exec.is_some() => {
                let id = parser.value().map_err(usage)?.string().map_err(usage)?;
                if let Some(exec) = exec.as_mut() {
                    exec.resume = Some(crate::cli::exec::Resume::Id(id));
                }
            }
            Long("agent") if exec.is_some() => {
                options.agent_path = Some(parser.value().map_err(usage)?.into());
            }
            Value(prompt) if exec.as_ref().is_some_and(|e| e.prompt.is_none()) => {
                if let Some(exec) = exec.as_mut() {
                    exec.prompt = Some(prompt.string().map_err(usage)?);
                }
            }
            Value(path) if options.agent_path.is_none() && exec.is_none() => {
                options.agent_path = Some(path.into());
            }
            other => return Err(usage(other.unexpected())),
        }
    }
    if let Some(exec) = exec {
        if exec.prompt.is_none() && !exec.chat {
            return Err(Usage(
                "'spindle exec' needs a prompt: spindle exec \"what to do\" (or - to read it from stdin)".into(),
            ));
        }
        return Ok(Command::Exec(Box::new(options), exec));
    }
    if let Some(serve) = serve {
        return Ok(Command::Serve(Box::new(options), serve));
    }
    if setup {
        return Ok(Command::Setup(crate::cli::setup::SetupArgs {
            config: options.config,
            ..Default::default()
        }));
    }
    Ok(Command::Acp(options))
}

/// One of `spindle serve`'s own flags (`Long("listen")`, `Long("token-file")`,
/// `Long("tls-cert")`, `Long("tls-key")`, `Long("insecure-network")`,
/// `Long("max-connections")`), with its value.
fn serve_flag(
    serve: &mut crate::serve::ServeArgs,
    flag: &str,
    parser: &mut lexopt::Parser,
) -> Result<(), Usage> {
    use lexopt::ValueExt;
    let usage = |err: lexopt::Error| Usage(err.to_string());
    if flag == "insecure-network" {
        serve.insecure_network = true;
        return Ok(());
    }
    let value = parser.value().map_err(usage)?;
    match flag {
        "listen" => serve.listen = Some(value.string().map_err(usage)?),
        "token-file" => serve.token_file = Some(value.into()),
        "tls-cert" => serve.tls_cert = Some(value.into()),
        "tls-key" => serve.tls_key = Some(value.into()),
        _ => {
            let text = value.string().map_err(usage)?;
            serve.max_connections = match text.parse::<usize>() {
                Ok(n) if (1..=100_000).contains(&n) => Some(n),
                _ => {
                    return Err(Usage(format!(
                        "--max-connections takes a number from 1 to 100000, got '{text}'"
                    )))
                }
            };
        }
    }
    Ok(())
}

fn parse_setup(mut parser: lexopt::Parser) -> Result<crate::cli::setup::SetupArgs, Usage> {
    use lexopt::prelude::*;
    let usage = |err: lexopt::Error| Usage(err.to_string());
    let mut args = crate::cli::setup::SetupArgs::default();
    while let Some(arg) = parser.next().map_err(usage)? {
        match arg {
            Long("kind") => {
                let value = parser.value().map_err(usage)?.string().map_err(usage)?;
                args.kind = Some(crate::cli::setup::parse_kind(&value).ok_or_else(|| {
                    Usage(format!(
                        "--kind takes openai, anthropic or responses, got '{value}'"
                    ))
                })?);
            }
            Long("name") => {
                args.name = Some(parser.value().map_err(usage)?.string().map_err(usage)?)
            }
            Long("base-url") => {
                args.base_url = Some(parser.value().map_err(usage)?.string().map_err(usage)?)
            }
            Long("key-env") => {
                args.key_env = Some(parser.value().map_err(usage)?.string().map_err(usage)?)
            }
            Long("key-file") => args.key_file = Some(parser.value().map_err(usage)?.into()),
            Long("key-stdin") => args.key_stdin = true,
            Long("no-key") => args.no_key = true,
            Long("model") => {
                args.model = Some(parser.value().map_err(usage)?.string().map_err(usage)?)
            }
            Long("config") => args.config = Some(parser.value().map_err(usage)?.into()),
            Long("no-test") => args.no_test = true,
            Short('h') | Long("help") => return Err(Usage(HELP_REQUESTED.into())),
            other => return Err(usage(other.unexpected())),
        }
    }
    Ok(args)
}

fn parse_sessions(mut parser: lexopt::Parser) -> Result<SessionsCommand, Usage> {
    use lexopt::prelude::*;
    let usage = |err: lexopt::Error| Usage(err.to_string());
    let mut words: Vec<String> = Vec::new();
    let mut db = None;
    let mut cwd = None;
    let mut agent = None;
    let mut json = false;
    let (mut older_than_days, mut keep, mut dry_run) = (None, None, false);
    let number = |parser: &mut lexopt::Parser, flag: &str| -> Result<u64, Usage> {
        let value = parser.value().map_err(usage)?.string().map_err(usage)?;
        value
            .parse::<u64>()
            .map_err(|_| Usage(format!("{flag} takes a whole number, got '{value}'")))
    };
    while let Some(arg) = parser.next().map_err(usage)? {
        match arg {
            Short('h') | Long("help") => return Err(Usage(HELP_REQUESTED.into())),
            Long("json") => json = true,
            Long("older-than") => older_than_days = Some(number(&mut parser, "--older-than")?),
            Long("keep") => keep = Some(number(&mut parser, "--keep")? as usize),
            Long("dry-run") => dry_run = true,
            Long("db") => db = Some(parser.value().map_err(usage)?.into()),
            Long("cwd") => cwd = Some(parser.value().map_err(usage)?.string().map_err(usage)?),
            Long("agent") => {
                let path: std::path::PathBuf = parser.value().map_err(usage)?.into();
                let spec = crate::agentfile::load(&path).map_err(|e| Usage(e.to_string()))?;
                agent = Some(spec.name);
            }
            Value(word) => words.push(word.string().map_err(usage)?),
            other => return Err(usage(other.unexpected())),
        }
    }
    let action = match words.as_slice() {
        [] => SessionsAction::List,
        [list] if list == "list" => SessionsAction::List,
        [prune] if prune == "prune" => SessionsAction::Prune {
            older_than_days,
            keep,
            dry_run,
        },
        [show, id] if show == "show" => SessionsAction::Show(id.clone()),
        [delete, id] if delete == "delete" => SessionsAction::Delete(id.clone()),
        [export, id] if export == "export" => SessionsAction::Export(id.clone()),
        [verb] if verb == "show" || verb == "delete" || verb == "export" => {
            return Err(Usage(format!(
                "'spindle sessions {verb}' needs a session id"
            )))
        }
        _ => {
            return Err(Usage(format!(
                "unknown sessions command '{}'; use list, show ID, export ID, delete ID or prune",
                words.join(" ")
            )))
        }
    };
    Ok(SessionsCommand {
        action,
        db,
        cwd,
        agent,
        json,
    })
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

/// `spindle mcp list|add|remove|login|logout …`.
fn parse_mcp(mut parser: lexopt::Parser) -> Result<Command, Usage> {
    use lexopt::prelude::*;
    let usage = |err: lexopt::Error| Usage(err.to_string());
    let (mut config, mut cwd, mut project) = (None, None, false);
    let (mut action, mut name, mut url, mut kind) = (None::<String>, None::<String>, None, None);
    let (mut env, mut headers, mut command) = (Vec::new(), Vec::new(), Vec::<String>::new());
    let text = |value: std::ffi::OsString| {
        value
            .into_string()
            .map_err(|_| Usage("arguments must be UTF-8".into()))
    };
    let pair = |value: String, separator: char, what: &str| -> Result<serde_json::Value, Usage> {
        match value.split_once(separator) {
            Some((key, val)) if !key.trim().is_empty() => {
                Ok(serde_json::json!({"name": key.trim(), "value": val.trim_start()}))
            }
            _ => Err(Usage(format!(
                "{what} takes NAME{separator}VALUE, not {value:?}"
            ))),
        }
    };
    while let Some(arg) = parser.next().map_err(usage)? {
        match arg {
            Value(word) if action.is_none() => action = Some(text(word)?),
            Value(word) if name.is_none() && action.as_deref() != Some("list") => {
                name = Some(text(word)?)
            }
            Value(word) if action.as_deref() == Some("add") => command.push(text(word)?),
            Long("config") => config = Some(parser.value().map_err(usage)?.into()),
            Long("project") if matches!(action.as_deref(), Some("add" | "remove")) => {
                project = true
            }
            Long("cwd") if action.as_deref() == Some("list") => {
                cwd = Some(parser.value().map_err(usage)?.into())
            }
            Long("url") => url = Some(text(parser.value().map_err(usage)?)?),
            Long("type") => kind = Some(text(parser.value().map_err(usage)?)?),
            Long("env") | Short('e') => {
                env.push(pair(text(parser.value().map_err(usage)?)?, '=', "--env")?)
            }
            Long("header") | Short('H') => headers.push(pair(
                text(parser.value().map_err(usage)?)?,
                ':',
                "--header",
            )?),
            Short('h') | Long("help") => return Ok(Command::Help(Some("mcp".into()))),
            other => return Err(usage(other.unexpected())),
        }
    }
    let needs_name =
        || Usage("name the server: spindle mcp add NAME -- COMMAND ARGS… (or --url URL)".into());
    match action.as_deref() {
        Some("list") => Ok(Command::McpList { config, cwd }),
        Some("remove") if env.is_empty() && headers.is_empty() && url.is_none() => {
            let name = name.ok_or_else(needs_name)?;
            Ok(Command::McpEdit {
                config,
                name,
                server: None,
                project,
            })
        }
        Some("add") => {
            let name = name.ok_or_else(needs_name)?;
            if !crate::mcp::valid_name(&name) {
                return Err(Usage(format!(
                    "{}: {}",
                    crate::mcp::quoted_name(&name),
                    crate::mcp::NAME_RULE
                )));
            }
            let server = match (url, command.split_first()) {
                (Some(_), Some(_)) => {
                    return Err(Usage("give --url or a command after --, not both".into()))
                }
                (None, None) => return Err(needs_name()),
                (Some(url), None) => {
                    let kind = kind.unwrap_or_else(|| "http".into());
                    if !matches!(kind.as_str(), "http" | "sse") || !env.is_empty() {
                        return Err(Usage(
                            "a server at a URL takes --type http or sse and --header, not --env"
                                .into(),
                        ));
                    }
                    serde_json::json!({"name": name, "type": kind, "url": url, "headers": headers})
                }
                (None, Some((program, args))) => {
                    if kind.is_some() || !headers.is_empty() {
                        return Err(Usage(
                            "a local server takes --env, not --type or --header".into(),
                        ));
                    }
                    serde_json::json!({"name": name, "command": program, "args": args, "env": env})
                }
            };
            Ok(Command::McpEdit {
                config,
                name,
                server: Some(server),
                project,
            })
        }
        Some(which @ ("login" | "logout"))
            if env.is_empty() && headers.is_empty() && kind.is_none() && !project =>
        {
            let name =
                name.ok_or_else(|| Usage(format!("name the server: spindle mcp {which} NAME")))?;
            if which == "logout" && url.is_some() {
                return Err(Usage("'spindle mcp logout' takes a name only".into()));
            }
            Ok(Command::McpSignIn {
                config,
                name,
                url,
                login: which == "login",
            })
        }
        _ => Err(Usage(
            "'spindle mcp' takes list, add, remove, login or logout".into(),
        )),
    }
}

//! The `spindle` command: flags, logging and the exit code. Everything else
//! lives in the library.

use spindle::agent::controls::Preset;
use spindle::agent::permission::Policy;
use spindle::agent::{self, Options};
use std::process::ExitCode;
use std::time::Duration;

const HELP: &str = "\
spindle — a coding agent for editors, speaking the Agent Client Protocol

USAGE:
    spindle acp [OPTIONS] [AGENT]
                              serve ACP (JSON-RPC, one message per line) on stdin/stdout;
                              AGENT: an agent file (agent.json) or a folder holding one
                              (see docs/agents.md)
    spindle exec [OPTIONS] PROMPT
                              run one prompt here and print what happens: the
                              answer on stdout; thoughts, tool calls and the plan
                              on stderr (--quiet: answer only; --json: the raw
                              updates as NDJSON); PROMPT - reads it from stdin;
                              takes acp's options (--agent FILE for an agent
                              file); exit 0 when the turn ends normally, 1 on an
                              error, 3 on another stop reason (cancelled, a limit)
    spindle mcp list [--cwd DIR] [--config PATH]
                              the MCP servers of the config (mcp_servers) and of
                              the project's .spindle/config.json (used only when
                              the project is trusted); the editor's join them
    spindle doctor [--config PATH] [--db PATH]
                              check the config, each provider (key, reachable,
                              models), the session database and the sandbox;
                              exit 1 when something is broken, saying what to do
    spindle sessions [list] [--cwd DIR] [--agent FILE] [--json] [--db PATH]
                              list stored sessions, newest first, times local
                              (--agent: those an agent file's agent served;
                              --json: an array for scripts)
    spindle sessions show ID [--db PATH]
                              print a session's transcript as text (ID: the id,
                              or a unique prefix of it, here and below)
    spindle sessions export ID [--db PATH]
                              print a session's transcript as NDJSON (one stored
                              session/update a line, as a load replays it)
    spindle sessions delete ID [--db PATH]
                              delete a session and its history
    spindle setup [OPTIONS]   add a model provider to the config file: asks on a
                              terminal, or takes everything from flags; tests it
                              with one small request before writing
    spindle sandbox [OPTIONS] -- PROGRAM [ARGS...]
                              run PROGRAM in the OS sandbox the agent uses for its
                              commands (--write DIR, --read-only PATH, --network;
                              --probe prints what this machine supports)
    spindle completions bash|zsh|fish
                              print a shell completion script
    spindle help [COMMAND]    this help, or one command's (also COMMAND --help)
    spindle --help            print this help
    spindle --version         print the version

OPTIONS (acp):
    --model MODEL             the model to ask, as provider/model or a bare name
                              (default: the config's default, else the first
                              provider's usual model)
    --preset PRESET           light, balanced (default) or delivery: step budget,
                              default effort and how much the agent verifies
                              (--profile economy|balanced|delivery also works)
    --config PATH             the config file (default $SPINDLE_HOME/config.json,
                              else $XDG_CONFIG_HOME/spindle/config.json)
    --script FILE             play a JSON scenario instead of calling a model
                              (see docs/scripted-provider.md)
    --permissions POLICY      when tools ask first: ask (every edit and command),
                              auto (edits in the workspace and read-only commands
                              run freely), sandbox (edits in the workspace, and
                              commands inside an OS sandbox: no network, nothing
                              writable outside the workspace or in .git), yolo
                              (nothing asks); default ask
    --max-steps N             the most model calls one prompt may make (default:
                              the preset's budget: 20, 50 or 100)
    --on-reject WHAT          when the user declines a tool call: stop (end the
                              turn; the default) or continue (the model is told
                              and carries on)
    --db PATH                 the session database (default $SPINDLE_HOME/spindle.db,
                              else $XDG_DATA_HOME/spindle/spindle.db, else
                              ~/.local/share/spindle/spindle.db; with --script and
                              no --db, a temporary database removed at exit)
    --log-file PATH           log to this file (info and up, or as RUST_LOG says;
                              rotated at 10 MiB, one old file kept as PATH.1)
                              instead of stderr; the config's log_file too
    --drain                   on stdin EOF, let running turns finish before exiting
                              (default: cancel them)
    --connect-timeout SECS    longest wait to connect to the model server (default 10)
    --stall-timeout SECS      longest silence of a model stream (default 120)
    --retries N               retries of a failed model call before its first
                              streamed byte (default 3; 0 to 10)
    --setup                   (acp) run the setup wizard instead, with --config:
                              what an editor's terminal sign-in starts

OPTIONS (setup):
    --kind KIND               openai (Chat Completions: OpenAI, Ollama, llama.cpp,
                              vLLM, OpenRouter…), anthropic or responses
    --name NAME               the provider's name in model ids (default: the kind,
                              or local for another OpenAI-compatible server)
    --base-url URL            the server (default: the kind's official API)
    --key-env VAR             the environment variable holding the key
    --key-file PATH           a file holding the key (mode 600)
    --key-stdin               read the key itself from standard input; Spindle keeps
                              it in keys/NAME.key beside the config (mode 600), and
                              the ACP `logout` method forgets it
    --no-key                  the server needs no key
    --model MODEL             the default model
    --config PATH             the config file to write
    --no-test                 write without testing the connection

ENVIRONMENT:
    OPENAI_API_KEY            used when there is no config file: an OpenAI provider
    OPENAI_BASE_URL           … at this base URL (any OpenAI-compatible server)
    ANTHROPIC_API_KEY         … an Anthropic provider (ANTHROPIC_BASE_URL)
    OLLAMA_HOST               … an Ollama server
    SPINDLE_HOME              where Spindle keeps its database (see --db)
    RUST_LOG                  log filter for stderr (error, warn, info, debug, trace)

Exit codes: 0 normal end, 1 runtime failure, 2 usage error.
";

/// What a subcommand's parser answers for `--help`.
const HELP_REQUESTED: &str = "\u{0}help";

fn help_instead(error: Usage, topic: &str) -> Result<Command, Usage> {
    if error.0 == HELP_REQUESTED {
        Ok(Command::Help(Some(topic.into())))
    } else {
        Err(error)
    }
}

/// The commands `spindle help` knows.
const COMMANDS: [&str; 9] = [
    "acp",
    "exec",
    "doctor",
    "mcp",
    "sessions",
    "setup",
    "sandbox",
    "completions",
    "help",
];

/// `spindle mcp list`: the MCP servers of the config and of the project
/// here, with where they come from and whether they are used.
fn mcp_list(
    config: Option<std::path::PathBuf>,
    cwd: Option<std::path::PathBuf>,
) -> Result<String, String> {
    let (config, path) = spindle::config::Config::load(config.as_deref())?;
    let cwd = match cwd {
        Some(cwd) => cwd,
        None => std::env::current_dir().map_err(|e| e.to_string())?,
    };
    let cwd = std::fs::canonicalize(&cwd).unwrap_or(cwd);
    let describe = |server: &serde_json::Value| -> String {
        match (server["command"].as_str(), server["url"].as_str()) {
            (Some(command), _) => {
                let args: Vec<&str> = server["args"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|a| a.as_str())
                    .collect();
                format!("{command} {}", args.join(" "))
                    .trim_end()
                    .to_string()
            }
            (None, Some(url)) => format!("{} {url}", server["type"].as_str().unwrap_or("http")),
            _ => "?".into(),
        }
    };
    let mut out = String::new();
    let source = path
        .map(|p| p.display().to_string())
        .unwrap_or_else(|| "(no config file)".into());
    for server in &config.mcp_servers {
        out.push_str(&format!(
            "{}  {}  (from {source})\n",
            server["name"].as_str().unwrap_or("?"),
            describe(server)
        ));
    }
    let trusted = spindle::config::project_trusted(&config, &cwd);
    for server in spindle::config::project_mcp_servers(&cwd)? {
        out.push_str(&format!(
            "{}  {}  (from {}/.spindle/config.json{})\n",
            server["name"].as_str().unwrap_or("?"),
            describe(&server),
            cwd.display(),
            if trusted {
                ""
            } else {
                "; not used: the project is not trusted (permissions.projects in your config)"
            }
        ));
    }
    if out.is_empty() {
        out.push_str("No MCP servers configured (editors give theirs per session).\n");
    }
    Ok(out)
}

/// The part of the help about one command.
fn command_help(topic: &str) -> Option<String> {
    let section = |start: &str, end: &str| -> String {
        let from = HELP.find(start).unwrap_or(0);
        let to = HELP[from..].find(end).map_or(HELP.len(), |i| from + i);
        HELP[from..to].trim_end().to_string()
    };
    let usage_lines = |prefix: &str| -> String {
        let usage = section("USAGE:", "OPTIONS (acp):");
        let mut out = String::from("USAGE:\n");
        let mut keep = false;
        for line in usage.lines().skip(1) {
            if line.starts_with("    spindle ") {
                keep = line.starts_with(&format!("    spindle {prefix}"));
            }
            if keep {
                out.push_str(line);
                out.push('\n');
            }
        }
        out
    };
    let text = match topic {
        "acp" => format!(
            "{}\n{}\n\n{}\n",
            usage_lines("acp"),
            section("OPTIONS (acp):", "OPTIONS (setup):"),
            section("ENVIRONMENT:", "Exit codes:")
        ),
        "exec" => format!(
            "{}\n{}\n",
            usage_lines("exec"),
            section("OPTIONS (acp):", "OPTIONS (setup):")
        ),
        "setup" => format!(
            "{}\n{}\n",
            usage_lines("setup"),
            section("OPTIONS (setup):", "ENVIRONMENT:")
        ),
        "sessions" | "sandbox" | "doctor" | "mcp" => usage_lines(topic),
        "completions" => "USAGE:\n    spindle completions bash|zsh|fish\n                              print a shell completion script, e.g.\n                              spindle completions bash > ~/.local/share/bash-completion/completions/spindle\n".into(),
        "help" => "USAGE:\n    spindle help [COMMAND]    this help, or one command's\n".into(),
        _ => return None,
    };
    Some(text)
}

/// A completion script for `shell`: the commands and each one's flags.
fn completions(shell: &str) -> String {
    let flags = |topic: &str| -> Vec<String> {
        let mut flags: Vec<String> = command_help(topic)
            .unwrap_or_default()
            .split_whitespace()
            .filter(|w| w.starts_with("--") && w.len() > 2)
            .map(|w| w.trim_end_matches([',', ')', ';', '.']).to_string())
            .filter(|w| {
                w.chars()
                    .skip(2)
                    .all(|c| c.is_ascii_lowercase() || c == '-')
            })
            .collect();
        flags.push("--help".into());
        flags.sort();
        flags.dedup();
        flags
    };
    let commands = COMMANDS.join(" ");
    match shell {
        "bash" => {
            let mut cases = String::new();
            for topic in COMMANDS {
                cases.push_str(&format!(
                    "        {topic}) COMPREPLY=($(compgen -W \"{}\" -- \"$cur\")) ;;\n",
                    flags(topic).join(" ")
                ));
            }
            format!(
                "# bash completion for spindle\n_spindle() {{\n    local cur=${{COMP_WORDS[COMP_CWORD]}}\n    if [ \"$COMP_CWORD\" -eq 1 ]; then\n        COMPREPLY=($(compgen -W \"{commands} --help --version\" -- \"$cur\"))\n        return\n    fi\n    case ${{COMP_WORDS[1]}} in\n{cases}    esac\n}}\ncomplete -o default -F _spindle spindle\n"
            )
        }
        "zsh" => {
            let mut cases = String::new();
            for topic in COMMANDS {
                cases.push_str(&format!(
                    "    {topic}) compadd -- {} ;;\n",
                    flags(topic).join(" ")
                ));
            }
            format!(
                "#compdef spindle\n_spindle() {{\n  if (( CURRENT == 2 )); then\n    compadd -- {commands} --help --version\n    return\n  fi\n  case $words[2] in\n{cases}  esac\n  _files\n}}\ncompdef _spindle spindle\n"
            )
        }
        _ => {
            let mut out = String::from("# fish completion for spindle\n");
            out.push_str(&format!(
                "complete -c spindle -n '__fish_use_subcommand' -f -a '{commands}'\n"
            ));
            for topic in COMMANDS {
                for flag in flags(topic) {
                    out.push_str(&format!(
                        "complete -c spindle -n '__fish_seen_subcommand_from {topic}' -l {}\n",
                        flag.trim_start_matches("--")
                    ));
                }
            }
            out
        }
    }
}

/// A usage error: printed with a hint, exit code 2.
struct Usage(String);

enum Command {
    Help(Option<String>),
    Version,
    Acp(Options),
    Sessions(SessionsCommand),
    Setup(spindle::setup::SetupArgs),
    Sandbox(Vec<std::ffi::OsString>),
    Guard(Vec<std::ffi::OsString>),
    Completions(String),
    Exec(Box<Options>, spindle::exec::ExecArgs),
    Doctor(spindle::doctor::DoctorArgs),
    McpList {
        config: Option<std::path::PathBuf>,
        cwd: Option<std::path::PathBuf>,
    },
}

/// `spindle sessions …`.
struct SessionsCommand {
    action: SessionsAction,
    db: Option<std::path::PathBuf>,
    cwd: Option<String>,
    /// `--agent PATH`: only the sessions that agent file's agent served.
    agent: Option<String>,
    /// `--json`: for scripts.
    json: bool,
}

enum SessionsAction {
    List,
    Show(String),
    Delete(String),
    Export(String),
}

fn parse_args() -> Result<Command, Usage> {
    use lexopt::prelude::*;
    let mut parser = lexopt::Parser::from_env();
    let usage = |err: lexopt::Error| Usage(err.to_string());
    let mut exec: Option<spindle::exec::ExecArgs> = None;
    let Some(first) = parser.next().map_err(usage)? else {
        return Err(Usage("missing command; try 'spindle acp'".into()));
    };
    match first {
        Short('h') | Long("help") => return Ok(Command::Help(None)),
        Short('V') | Long("version") => return Ok(Command::Version),
        Value(command) if command == "help" => {
            let topic = match parser.next().map_err(usage)? {
                Some(Value(topic)) => Some(topic.string().map_err(usage)?),
                None => None,
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
        Value(command) if command == "mcp" => {
            let (mut config, mut cwd, mut listed) = (None, None, false);
            while let Some(arg) = parser.next().map_err(usage)? {
                match arg {
                    Value(word) if word == "list" && !listed => listed = true,
                    Long("config") => config = Some(parser.value().map_err(usage)?.into()),
                    Long("cwd") => cwd = Some(parser.value().map_err(usage)?.into()),
                    Short('h') | Long("help") => return Ok(Command::Help(Some("mcp".into()))),
                    other => return Err(usage(other.unexpected())),
                }
            }
            if !listed {
                return Err(Usage("'spindle mcp' takes list".into()));
            }
            return Ok(Command::McpList { config, cwd });
        }
        Value(command) if command == "doctor" => {
            let mut args = spindle::doctor::DoctorArgs::default();
            while let Some(arg) = parser.next().map_err(usage)? {
                match arg {
                    Long("config") => args.config = Some(parser.value().map_err(usage)?.into()),
                    Long("db") => args.db = Some(parser.value().map_err(usage)?.into()),
                    Short('h') | Long("help") => return Ok(Command::Help(Some("doctor".into()))),
                    other => return Err(usage(other.unexpected())),
                }
            }
            return Ok(Command::Doctor(args));
        }
        Value(command) if command == "completions" => {
            let shell = match parser.next().map_err(usage)? {
                Some(Value(shell)) => shell.string().map_err(usage)?,
                Some(Short('h') | Long("help")) => {
                    return Ok(Command::Help(Some("completions".into())))
                }
                _ => {
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
        Value(command) if command == "exec" => exec = Some(spindle::exec::ExecArgs::default()),
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
    // `--setup`: the terminal auth method. A client runs the agent's own
    // command line with the method's arguments appended, so the wizard
    // starts from `spindle acp … --setup`.
    let mut setup = false;
    while let Some(arg) = parser.next().map_err(usage)? {
        match arg {
            Long("setup") if exec.is_none() => setup = true,
            Long("model") => {
                options.model = Some(parser.value().map_err(usage)?.string().map_err(usage)?)
            }
            Long("script") => options.script = Some(parser.value().map_err(usage)?.into()),
            Long("drain") => options.drain = true,
            Long("log-file") => options.log_file = Some(parser.value().map_err(usage)?.into()),
            Long("db") => options.db = Some(parser.value().map_err(usage)?.into()),
            Long("permissions") => {
                let value = parser.value().map_err(usage)?.string().map_err(usage)?;
                options.permissions = Some(Policy::parse(&value).ok_or_else(|| {
                    Usage(format!(
                        "--permissions takes ask, auto, sandbox or yolo, got '{value}'"
                    ))
                })?);
            }
            Long("preset") | Long("profile") => {
                let value = parser.value().map_err(usage)?.string().map_err(usage)?;
                options.preset = Some(Preset::parse(&value).ok_or_else(|| {
                    Usage(format!(
                        "--preset takes light, balanced or delivery, got '{value}'"
                    ))
                })?);
            }
            Long("config") => {
                options.config = Some(parser.value().map_err(usage)?.into());
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
            Long("on-reject") => {
                let value = parser.value().map_err(usage)?.string().map_err(usage)?;
                options.on_reject = Some(match value.as_str() {
                    "stop" => spindle::config::OnReject::Stop,
                    "continue" => spindle::config::OnReject::Continue,
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
                    Ok(retries) if retries <= 10 => retries + 1,
                    _ => {
                        return Err(Usage(format!(
                            "--retries takes a number from 0 to 10, got '{value}'"
                        )))
                    }
                };
            }
            Short('h') | Long("help") if exec.is_some() => {
                return Ok(Command::Help(Some("exec".into())))
            }
            Short('h') | Long("help") => return Ok(Command::Help(Some("acp".into()))),
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
        if exec.prompt.is_none() {
            return Err(Usage(
                "'spindle exec' needs a prompt: spindle exec \"what to do\" (or - to read it from stdin)".into(),
            ));
        }
        return Ok(Command::Exec(Box::new(options), exec));
    }
    if setup {
        return Ok(Command::Setup(spindle::setup::SetupArgs {
            config: options.config,
            ..Default::default()
        }));
    }
    Ok(Command::Acp(options))
}

fn parse_setup(mut parser: lexopt::Parser) -> Result<spindle::setup::SetupArgs, Usage> {
    use lexopt::prelude::*;
    let usage = |err: lexopt::Error| Usage(err.to_string());
    let mut args = spindle::setup::SetupArgs::default();
    while let Some(arg) = parser.next().map_err(usage)? {
        match arg {
            Long("kind") => {
                let value = parser.value().map_err(usage)?.string().map_err(usage)?;
                args.kind = Some(spindle::setup::parse_kind(&value).ok_or_else(|| {
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
    while let Some(arg) = parser.next().map_err(usage)? {
        match arg {
            Short('h') | Long("help") => return Err(Usage(HELP_REQUESTED.into())),
            Long("json") => json = true,
            Long("db") => db = Some(parser.value().map_err(usage)?.into()),
            Long("cwd") => cwd = Some(parser.value().map_err(usage)?.string().map_err(usage)?),
            Long("agent") => {
                let path: std::path::PathBuf = parser.value().map_err(usage)?.into();
                let spec = spindle::agentfile::load(&path).map_err(|e| Usage(e.0))?;
                agent = Some(spec.name);
            }
            Value(word) => words.push(word.string().map_err(usage)?),
            other => return Err(usage(other.unexpected())),
        }
    }
    let action = match words.as_slice() {
        [] => SessionsAction::List,
        [list] if list == "list" => SessionsAction::List,
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
                "unknown sessions command '{}'; use list, show ID, export ID or delete ID",
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

/// Runs `spindle sessions …`; the error is a message for stderr.
fn run_sessions(command: SessionsCommand) -> Result<String, String> {
    let path = command.db.unwrap_or_else(spindle::store::default_path);
    let store = spindle::store::Store::open(&path).map_err(|e| e.0)?;
    // An id, or a unique prefix of one.
    let find = |given: &str| -> Result<String, String> {
        spindle::history::resolve_id(&store, given)?
            .ok_or_else(|| format!("there is no session {given:?} in {}", path.display()))
    };
    match command.action {
        SessionsAction::List if command.json => {
            spindle::history::list_json(&store, command.cwd.as_deref(), command.agent.as_deref())
                .map_err(|e| e.0)
        }
        SessionsAction::List => {
            spindle::history::list(&store, command.cwd.as_deref(), command.agent.as_deref())
                .map_err(|e| e.0)
        }
        SessionsAction::Show(given) => {
            let id = find(&given)?;
            spindle::history::show(&store, &id)
                .map_err(|e| e.0)?
                .ok_or_else(|| format!("there is no session {id:?} in {}", path.display()))
        }
        SessionsAction::Export(given) => {
            let id = find(&given)?;
            spindle::history::export(&store, &id)
                .map_err(|e| e.0)?
                .ok_or_else(|| format!("there is no session {id:?} in {}", path.display()))
        }
        SessionsAction::Delete(given) => {
            let id = find(&given)?;
            if store.delete_session(&id).map_err(|e| e.0)? {
                spindle::tools::logs::remove_session(&path, &id);
                Ok(format!("Deleted session {id}.\n"))
            } else {
                Err(format!("there is no session {id:?} in {}", path.display()))
            }
        }
    }
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

/// Sets up logging: stderr, or the log file (`--log-file`, else the
/// config's `log_file`) rotated by size.
fn init_logging(log_file: Option<std::path::PathBuf>) {
    // The HTTP and TLS libraries log only when RUST_LOG names them, and
    // never above debug: at trace they dump raw requests, API keys in
    // their headers included.
    let asked = std::env::var("RUST_LOG").unwrap_or_default();
    let library = |name: &str, cap: log::LevelFilter| {
        if asked.contains(name) {
            cap
        } else {
            log::LevelFilter::Warn
        }
    };
    let mut builder =
        env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("warn"));
    // What is logged may quote a model server's or a file's bytes: their
    // control characters are written out, so a log on a terminal cannot
    // be made to move the cursor, retitle the window or fake a line.
    builder.format(|out, record| {
        use std::io::Write;
        writeln!(
            out,
            "[{:<5} {}] {}",
            record.level(),
            record.target(),
            spindle::util::visible(&record.args().to_string(), true)
        )
    });
    builder
        .filter_module("ureq_proto", library("ureq", log::LevelFilter::Debug))
        .filter_module("ureq", library("ureq", log::LevelFilter::Debug))
        .filter_module("rustls", library("rustls", log::LevelFilter::Info));
    let file = log_file.and_then(|path| match spindle::util::RotatingLog::open(&path) {
        Ok(file) => Some(file),
        Err(error) => {
            eprintln!(
                "spindle: cannot log to {}: {error}; logging to stderr",
                path.display()
            );
            None
        }
    });
    match file {
        // A file keeps the levels asked for, and `info` by default.
        Some(file) => {
            if std::env::var_os("RUST_LOG").is_none() {
                builder.filter_module("spindle", log::LevelFilter::Info);
            }
            builder.target(env_logger::Target::Pipe(Box::new(file)))
        }
        None => builder.target(env_logger::Target::Stderr),
    };
    builder.init();
}

/// The log file the command line or the config names, for `spindle acp`.
fn log_file_of(command: &Result<Command, Usage>) -> Option<std::path::PathBuf> {
    let Ok(Command::Acp(options)) = command else {
        return None;
    };
    if let Some(path) = &options.log_file {
        return Some(path.clone());
    }
    let path = options
        .config
        .clone()
        .unwrap_or_else(spindle::config::default_path);
    let text = std::fs::read_to_string(path).ok()?;
    let value: serde_json::Value = serde_json::from_str(&text).ok()?;
    value["log_file"].as_str().map(std::path::PathBuf::from)
}

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
    let config = spindle::config::Config::load(config.as_deref())
        .map(|(config, _)| config)
        .unwrap_or_default();
    let names: Vec<String> = config
        .providers
        .values()
        .filter_map(|provider| provider.api_key_env.clone())
        .collect();
    spindle::credentials::withdraw(&names, &config.tools.pass_env);
    spindle::credentials::guard_process();
}

fn main() -> ExitCode {
    let command = parse_args();
    // While the process has one thread.
    guard_credentials(&command);
    // Before anything large is allocated (a session loaded, a model list).
    spindle::provider::http::map_large_buffers();
    init_logging(log_file_of(&command));
    match command {
        // First, while the process has a single thread: the launcher
        // confines this very process and then execs the command.
        Ok(Command::Sandbox(args)) => spindle::sandbox::launcher_main(args, &mut std::io::stdout()),
        Ok(Command::Guard(args)) => spindle::tools::guard::main(args),
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
            let report = spindle::doctor::run(&args);
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
            match spindle::setup::run(args, interactive, &mut input, &mut output) {
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
                match spindle::agentfile::load(&path) {
                    Ok(spec) => options.adopt(spec),
                    Err(error) => {
                        eprintln!("spindle: {error}");
                        return ExitCode::from(1);
                    }
                }
            }
            if let Ok(exe) = std::env::current_exe() {
                spindle::tools::guard::enable(exe);
            }
            ExitCode::from(spindle::exec::run(options, args))
        }
        Ok(Command::Acp(mut options)) => {
            // An agent file: read and checked before any protocol output.
            if let Some(path) = options.agent_path.clone() {
                match spindle::agentfile::load(&path) {
                    Ok(spec) => options.adopt(spec),
                    Err(error) => {
                        eprintln!("spindle: {error}");
                        return ExitCode::from(1);
                    }
                }
            }
            // A provider typo in --model stops here, before any protocol.
            if let Some(model) = &options.model {
                if let Ok((config, _)) = spindle::config::Config::load(options.config.as_deref()) {
                    let providers: Vec<String> = config.providers.keys().cloned().collect();
                    if let Err(problem) = spindle::config::check_model_provider(model, &providers) {
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
                spindle::tools::guard::enable(exe);
            }
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

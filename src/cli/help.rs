//! The help text, each command's part of it, and shell completions.

pub(super) const HELP: &str = "\
spindle — a coding agent for editors, speaking the Agent Client Protocol

USAGE:
    spindle                   on a terminal: the same as spindle chat
    spindle acp [OPTIONS] [AGENT]
                              serve ACP (JSON-RPC, one message per line) on stdin/stdout;
                              AGENT: an agent file (agent.json) or a folder holding one
                              (see docs/agents.md)
    spindle serve [OPTIONS] [--listen ADDR:PORT] [--token-file F]
                  [--tls-cert F --tls-key F]
                              serve ACP over the network: Streamable HTTP and
                              WebSocket at /acp, each connection a whole agent
                              as over stdio (see docs/serve.md); takes acp's
                              options
    spindle exec [OPTIONS] PROMPT
                              run one prompt here and print what happens: the
                              answer on stdout; the model, policy and session,
                              thoughts, tool calls and the plan on stderr
                              (--quiet: answer only; --json: the raw updates as
                              NDJSON); PROMPT - reads it from stdin, and input
                              piped in with a PROMPT is its context; --continue
                              goes on with this folder's latest session,
                              --session ID with that one (slash commands too:
                              /undo); takes acp's options (--agent FILE for an
                              agent file); asks on the terminal, and without one
                              names what needed approval and what would allow it;
                              --max-cost USD, --max-steps N, --max-minutes M:
                              budgets that stop the turn (as Ctrl-C does, the
                              session kept) and say which ran out; --json ends
                              with one result line, a JSON object of type result:
                              stop reason, last message, files changed with lines
                              added and removed, tokens, cost, budget, exit code;
                              exit 0 when the turn ends normally, 1 on an error,
                              3 on another stop reason (a preset's or agent
                              file's limit, approval nobody could give), 4 when
                              a budget ran out, 130 after Ctrl-C
    spindle chat [OPTIONS] [--continue | --session ID] [--hide-thoughts] [PROMPT]
                              a conversation here, in the terminal: each line a
                              prompt or a slash command (/undo, /compact, /help),
                              edited with history and Tab completing commands,
                              the answer streamed, approvals asked with the diff
                              or the command; Ctrl-C cancels a turn (at an
                              approval too), twice at the prompt (or /exit,
                              Ctrl-D) leaves; a mode other than normal shows
                              before the prompt (plan ›); history in
                              chat_history beside the database; --continue and
                              --session show the conversation, then go on; takes
                              acp's options
    spindle mcp list [--cwd DIR] [--config PATH]
                              the MCP servers of the config (mcp_servers) and of
                              the project's .spindle/config.json and .mcp.json
                              (used only when the project is trusted); the
                              editor's join them
    spindle mcp add NAME [--env K=V]… -- COMMAND [ARGS…]
    spindle mcp add NAME --url URL [--type http|sse] [--header 'K: V']…
    spindle mcp remove NAME   [--config PATH] an MCP server in your config;
                              --project: in the project's .mcp.json instead
                              (its repository's root), which runs only once
                              the project is trusted
    spindle mcp login NAME [--url URL] [--config PATH]
                              signs in to a remote MCP server that asks for it
                              (prints the URL to open, waits for the browser);
                              --url for a server only the editor names
    spindle mcp logout NAME   removes the server's sign-in tokens from this
                              machine (nothing is revoked at the server)
    spindle trust [PATH] [--config PATH], spindle untrust [PATH]
                              whether the project at PATH (default: here; its
                              repository's root) is trusted: its rules, MCP
                              servers, hooks, skills, commands and defaults
                              count, each listed (saved in your config)
    spindle doctor [--config PATH] [--db PATH] [--serve [serve's flags]]
                              check the config, each provider (key, reachable,
                              models), the session database and the sandbox;
                              --serve: a spindle serve setup too (address, port
                              free, token file private, certificate and key);
                              exit 1 when something is broken, saying what to do
    spindle sessions [list] [--cwd DIR] [--agent FILE] [--json] [--db PATH]
                              list stored sessions, newest first, times local,
                              with each one's title, model and folder
                              (--agent: those an agent file's agent served;
                              --json: an array for scripts)
    spindle sessions show ID [--db PATH]
                              print a session's transcript as text (ID: the id,
                              or a unique prefix of it, sess_ or not, here, below
                              and in --session)
    spindle sessions export ID [--db PATH]
                              print a session's transcript as NDJSON (one stored
                              session/update a line, as a load replays it)
    spindle sessions delete ID [--db PATH]
                              delete a session and its history
    spindle sessions prune [--older-than DAYS] [--keep N] [--cwd DIR] [--dry-run]
                              remove the sessions nobody sent anything to, and
                              those unused for DAYS or past the newest N
                              (--dry-run: only say which); never a running one
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
    --profile lean|full       what the model is told before your first word: lean
                              (the core tools, short texts) or full; default lean
                              for a context window of 16k tokens or less
    --config PATH             the config file (default $SPINDLE_HOME/config.json,
                              else $XDG_CONFIG_HOME/spindle/config.json, else
                              ~/.config/spindle (%APPDATA%\\spindle on Windows))
    --script FILE             play a JSON scenario instead of calling a model,
                              whatever the config's default model
                              (see docs/scripted-provider.md)
    --permissions POLICY      when tools ask first: ask (every edit and command),
                              auto (edits in the workspace and read-only commands
                              run freely), sandbox (edits in the workspace, and
                              commands inside an OS sandbox: no network, nothing
                              writable outside the workspace or in .git), yolo
                              (nothing asks); default ask
    --max-steps N             the most model calls one prompt may make, up to
                              100000 (default: the preset's budget: 20, 50 or
                              100; exec: a budget, exit 4 when it runs out)
    --on-reject WHAT          when the user declines a tool call: stop (end the
                              turn; the default) or continue (the model is told
                              and carries on)
    --db PATH                 the session database (default $SPINDLE_HOME/spindle.db,
                              else $XDG_DATA_HOME/spindle/spindle.db, else
                              ~/.local/share/spindle/spindle.db (on Windows
                              %LOCALAPPDATA%\\spindle\\spindle.db); with --script and
                              no --db, a temporary database removed at exit)
    --log-file PATH           log to this file (info and up, or as RUST_LOG says;
                              rotated at 10 MiB, one old file kept as PATH.1)
                              instead of stderr (acp, chat: else the config's
                              log_file; chat without one logs nothing)
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

OPTIONS (serve):
    --listen ADDR:PORT        where to listen (default 127.0.0.1:8719; port 0
                              picks a free one, printed on stderr)
    --token-file F            the bearer token every request must carry (default:
                              serve-token beside the config; made, private, on the
                              first start)
    --tls-cert F, --tls-key F serve HTTPS and WSS with this PEM certificate chain
                              and private key
    --insecure-network        allow plain HTTP on an address other machines reach
    --max-connections N       ACP connections at once (default 256)

ENVIRONMENT:
    OPENAI_API_KEY            an OpenAI provider, beside the config file's (the
                              file's wins on a name both use)
    OPENAI_BASE_URL           … at this base URL (any OpenAI-compatible server)
    ANTHROPIC_API_KEY         … an Anthropic provider (ANTHROPIC_BASE_URL)
    OLLAMA_HOST               … an Ollama server
    SPINDLE_HOME              where Spindle keeps its database and, first of
                              all places, looks for config.json (see --db, --config)
    RUST_LOG                  log filter for stderr (error, warn, info, debug, trace)

Exit codes: 0 normal end, 1 runtime failure, 2 usage error; exec also 3 (the
turn stopped for another reason), 4 (a budget of exec's ran out), 130 (Ctrl-C).
";

/// The commands `spindle help` knows.
pub(super) const COMMANDS: [&str; 13] = [
    "acp",
    "serve",
    "exec",
    "chat",
    "trust",
    "untrust",
    "doctor",
    "mcp",
    "sessions",
    "setup",
    "sandbox",
    "completions",
    "help",
];

/// The part of the help about one command.
pub(super) fn command_help(topic: &str) -> Option<String> {
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
        "exec" | "chat" => format!(
            "{}\n{}\n",
            usage_lines(topic),
            section("OPTIONS (acp):", "OPTIONS (setup):")
        ),
        "setup" => format!(
            "{}\n{}\n",
            usage_lines("setup"),
            section("OPTIONS (setup):", "OPTIONS (serve):")
        ),
        "serve" => format!(
            "{}\n{}\n\n{}\n",
            usage_lines("serve"),
            section("OPTIONS (serve):", "ENVIRONMENT:"),
            section("OPTIONS (acp):", "OPTIONS (setup):")
        ),
        "sessions" | "sandbox" | "doctor" | "mcp" | "trust" => usage_lines(topic),
        "untrust" => usage_lines("trust"),
        "completions" => "USAGE:\n    spindle completions bash|zsh|fish\n                              print a shell completion script, e.g.\n                              spindle completions bash > ~/.local/share/bash-completion/completions/spindle\n".into(),
        "help" => "USAGE:\n    spindle help [COMMAND]    this help, or one command's\n".into(),
        _ => return None,
    };
    Some(text)
}

/// The options of acp, exec and chat (the agent's).
macro_rules! agent_flags {
    () => {
        "--model --preset --profile --config --script --permissions --max-steps \
         --on-reject --db --log-file --drain --connect-timeout --stall-timeout --retries"
    };
}

/// Each command's flags, offered by the completions. The test below holds
/// them to what the parser accepts, both ways.
const FLAGS: [(&str, &str); 13] = [
    ("acp", concat!(agent_flags!(), " --setup --help")),
    (
        "serve",
        concat!(
            agent_flags!(),
            " --listen --token-file --tls-cert --tls-key --insecure-network --max-connections --help"
        ),
    ),
    (
        "exec",
        concat!(
            agent_flags!(),
            " --json --quiet --continue --session --agent --max-cost --max-minutes --help"
        ),
    ),
    (
        "chat",
        concat!(
            agent_flags!(),
            " --json --quiet --continue --session --agent --hide-thoughts --help"
        ),
    ),
    ("trust", "--config --help"),
    ("untrust", "--config --help"),
    (
        "doctor",
        "--config --db --serve --listen --token-file --tls-cert --tls-key --insecure-network \
         --max-connections --help",
    ),
    (
        "mcp",
        "--config --cwd --project --url --type --env --header --help",
    ),
    (
        "sessions",
        "--json --older-than --keep --dry-run --db --cwd --agent --help",
    ),
    (
        "setup",
        "--kind --name --base-url --key-env --key-file --key-stdin --no-key --model \
         --config --no-test --help",
    ),
    (
        "sandbox",
        "--write --read-only --hide --network --probe --help",
    ),
    ("completions", "--help"),
    ("help", "--help"),
];

/// The values a flag takes, offered after it.
const VALUES: [(&str, &str); 6] = [
    ("--permissions", "ask auto sandbox yolo"),
    ("--preset", "light balanced delivery"),
    ("--profile", "lean full"),
    ("--kind", "openai anthropic responses"),
    ("--on-reject", "stop continue"),
    ("--type", "http sse"),
];

/// The words a command takes first (its own commands).
const SUBCOMMANDS: [(&str, &str); 4] = [
    ("sessions", "list show delete export prune"),
    ("mcp", "list add remove login logout"),
    ("completions", "bash zsh fish"),
    (
        "help",
        "acp serve exec chat trust untrust doctor mcp sessions setup sandbox completions help",
    ),
];

/// A completion script for `shell`: the commands, each one's own
/// commands and flags, and the values of the flags that take a few.
pub(super) fn completions(shell: &str) -> String {
    let subs = |topic: &str| {
        SUBCOMMANDS
            .iter()
            .find(|(command, _)| *command == topic)
            .map_or("", |(_, words)| words)
    };
    let flags = |topic: &str| -> Vec<&str> {
        let mut flags: Vec<&str> = FLAGS
            .iter()
            .find(|(command, _)| *command == topic)
            .map_or("", |(_, flags)| flags)
            .split_whitespace()
            .collect();
        flags.sort();
        flags
    };
    let commands = COMMANDS.join(" ");
    match shell {
        "bash" => {
            let mut cases = String::new();
            for topic in COMMANDS {
                cases.push_str(&format!(
                    "        {topic}) COMPREPLY=($(compgen -W \"{} {}\" -- \"$cur\")) ;;\n",
                    subs(topic),
                    flags(topic).join(" ")
                ));
            }
            let mut values = String::new();
            for (flag, words) in VALUES {
                values.push_str(&format!(
                    "        {flag}) COMPREPLY=($(compgen -W \"{words}\" -- \"$cur\")); return ;;\n"
                ));
            }
            format!(
                "# bash completion for spindle\n_spindle() {{\n    local cur=${{COMP_WORDS[COMP_CWORD]}}\n    if [ \"$COMP_CWORD\" -eq 1 ]; then\n        COMPREPLY=($(compgen -W \"{commands} --help --version\" -- \"$cur\"))\n        return\n    fi\n    case ${{COMP_WORDS[COMP_CWORD-1]}} in\n{values}    esac\n    case ${{COMP_WORDS[1]}} in\n{cases}    esac\n}}\ncomplete -o default -F _spindle spindle\n"
            )
        }
        "zsh" => {
            let mut cases = String::new();
            for topic in COMMANDS {
                cases.push_str(&format!(
                    "    {topic}) compadd -- {} {} ;;\n",
                    subs(topic),
                    flags(topic).join(" ")
                ));
            }
            let mut values = String::new();
            for (flag, words) in VALUES {
                values.push_str(&format!("    {flag}) compadd -- {words}; return ;;\n"));
            }
            format!(
                "#compdef spindle\n_spindle() {{\n  if (( CURRENT == 2 )); then\n    compadd -- {commands} --help --version\n    return\n  fi\n  case $words[CURRENT-1] in\n{values}  esac\n  case $words[2] in\n{cases}  esac\n  _files\n}}\ncompdef _spindle spindle\n"
            )
        }
        _ => {
            let mut out = String::from("# fish completion for spindle\n");
            out.push_str(&format!(
                "complete -c spindle -n '__fish_use_subcommand' -f -a '{commands}'\n"
            ));
            for topic in COMMANDS {
                if !subs(topic).is_empty() {
                    out.push_str(&format!(
                        "complete -c spindle -n '__fish_seen_subcommand_from {topic}' -f -a '{}'\n",
                        subs(topic)
                    ));
                }
                for flag in flags(topic) {
                    let name = flag.trim_start_matches("--");
                    let values = VALUES.iter().find(|(f, _)| *f == flag);
                    match values {
                        Some((_, words)) => out.push_str(&format!(
                            "complete -c spindle -n '__fish_seen_subcommand_from {topic}' -l {name} -x -a '{words}'\n"
                        )),
                        None => out.push_str(&format!(
                            "complete -c spindle -n '__fish_seen_subcommand_from {topic}' -l {name}\n"
                        )),
                    }
                }
            }
            out
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::args::{parse_words, Usage};

    /// Every `Long("…")` flag named in `source`.
    fn named_flags(source: &str) -> Vec<String> {
        let mut flags: Vec<String> = source
            .split("Long(\"")
            .skip(1)
            .filter_map(|rest| rest.split_once('"'))
            .map(|(name, _)| format!("--{name}"))
            .collect();
        flags.sort();
        flags.dedup();
        flags
    }

    /// Whether the parser takes `flag` after `words`: a flag it does not
    /// know is an "invalid option"; one missing its value, or a command
    /// missing its prompt, is known.
    fn accepts(words: &[&str], flag: &str) -> bool {
        let mut line = words.to_vec();
        line.push(flag);
        match parse_words(&line) {
            Ok(_) => true,
            Err(Usage(message)) => !message.contains(&format!("invalid option '{flag}'")),
        }
    }

    /// Where a command's flags are tried: after the command alone, and
    /// after each of its own commands (mcp's `--cwd` follows `list`).
    fn prefixes(command: &str) -> Vec<Vec<&str>> {
        let subs = SUBCOMMANDS
            .iter()
            .find(|(c, _)| *c == command)
            .map_or("", |(_, words)| *words);
        let mut out = vec![vec![command]];
        if command != "help" && command != "completions" {
            out.extend(subs.split_whitespace().map(|sub| vec![command, sub]));
        }
        out
    }

    /// `--profile` takes lean or full, and still a preset's name (its
    /// old meaning); anything else is a usage error naming both.
    #[test]
    fn profile_takes_lean_or_full_and_still_a_preset() {
        use crate::modes::{Preset, Profile};
        let options = |words: &[&str]| match parse_words(words) {
            Ok(crate::cli::args::Command::Acp(options)) => options,
            _ => panic!("{words:?}"),
        };
        let lean = options(&["acp", "--profile", "lean"]);
        assert_eq!((lean.profile, lean.preset), (Some(Profile::Lean), None));
        assert_eq!(
            options(&["acp", "--profile", "full"]).profile,
            Some(Profile::Full)
        );
        let old = options(&["acp", "--profile", "economy"]);
        assert_eq!((old.profile, old.preset), (None, Some(Preset::Light)));
        match parse_words(&["exec", "--profile", "tiny", "hi"]) {
            Err(Usage(message)) => assert!(
                message.contains("lean or full") && message.contains("'tiny'"),
                "{message}"
            ),
            Ok(_) => panic!("--profile tiny was taken"),
        }
    }

    /// The terminal auth method's `--setup` works whether a client appends
    /// it to `spindle acp` or puts it in place of the agent's arguments.
    #[test]
    fn setup_flag_runs_the_wizard_in_either_position() {
        use crate::cli::args::Command;
        for words in [
            &["--setup"][..],
            &["acp", "--setup"],
            &["--setup", "--kind", "openai"],
        ] {
            assert!(
                matches!(parse_words(words), Ok(Command::Setup(_))),
                "{words:?}"
            );
        }
        assert!(parse_words(&["--setup", "--bogus"]).is_err());
    }

    #[test]
    fn each_command_completes_exactly_the_flags_its_parser_takes() {
        let candidates = named_flags(include_str!("args.rs"));
        assert!(candidates.contains(&"--json".to_string()), "{candidates:?}");
        for command in COMMANDS {
            let offered: Vec<&str> = FLAGS
                .iter()
                .find(|(c, _)| *c == command)
                .map(|(_, flags)| flags.split_whitespace().collect())
                .unwrap_or_else(|| panic!("no completions for {command}"));
            if command == "sandbox" {
                // Its arguments go whole to the sandbox's own parser.
                let mut taken = named_flags(include_str!("../sandbox/mod.rs"));
                // Hidden: what the agent adds when the probe says so.
                taken.retain(|flag| flag != "--no-namespaces");
                let mut offered: Vec<String> = offered.iter().map(|f| f.to_string()).collect();
                offered.sort();
                assert_eq!(offered, taken, "sandbox");
                continue;
            }
            for flag in &candidates {
                let taken = prefixes(command).iter().any(|words| accepts(words, flag));
                assert_eq!(
                    offered.contains(&flag.as_str()),
                    taken,
                    "spindle {command} {flag}: taken by the parser: {taken}, completed: {}",
                    !taken
                );
            }
            for flag in &offered {
                assert!(
                    candidates.iter().any(|c| c == flag),
                    "spindle {command} completes {flag}, which no parser names"
                );
            }
        }
    }

    #[test]
    fn the_scripts_offer_exec_json_and_quiet() {
        for shell in ["bash", "zsh", "fish"] {
            let script = completions(shell);
            for flag in ["json", "quiet", "session", "agent"] {
                assert!(
                    script.contains(&format!("--{flag}")) || script.contains(&format!("-l {flag}")),
                    "{shell}: {flag}"
                );
            }
        }
        assert!(completions("fish").contains("__fish_seen_subcommand_from chat' -l hide-thoughts"));
    }
}

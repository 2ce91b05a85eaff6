//! `spindle doctor`: what this machine's Spindle would use, checked, with
//! what to do about each problem. It changes nothing: the config is only
//! read, the database is opened read-only, the providers are asked for
//! their model lists (and an OpenAI-compatible one's default model one
//! tiny question with a tool).

use super::doctor_lines::Lines;
use crate::config::loaded::Loaded;
use crate::config::Config;
use std::path::{Path, PathBuf};

/// What `doctor` was told.
#[derive(Debug, Default, Clone)]
pub(crate) struct DoctorArgs {
    pub config: Option<PathBuf>,
    pub db: Option<PathBuf>,
    /// `--serve` (and serve's flags): check a `spindle serve` setup too.
    pub serve: Option<crate::serve::ServeArgs>,
}

/// The report, and whether anything is broken.
pub(crate) struct Report {
    pub text: String,
    pub broken: bool,
}

/// Runs every check.
pub(crate) fn run(args: &DoctorArgs, loaded: &Loaded) -> Report {
    let mut lines = Lines {
        text: format!(
            "spindle {} ({} {}){}\n",
            env!("CARGO_PKG_VERSION"),
            std::env::consts::OS,
            std::env::consts::ARCH,
            option_env!("SPINDLE_BUILD_COMMIT")
                .map(|c| format!(", commit {c}"))
                .unwrap_or_default()
        ),
        broken: false,
    };
    let config = check_config(&mut lines, args.config.as_deref(), loaded);
    let config_path = args
        .config
        .clone()
        .unwrap_or_else(crate::config::default_path);
    if let Some(config) = &config {
        check_providers(&mut lines, config, &config_path);
        check_waiting(&mut lines, config);
        check_trust(&mut lines, &config.trust);
    }
    if let Some(config) = &config {
        check_mcp(&mut lines, config, &config_path);
    }
    crate::cli::doctor_store::check_database(&mut lines, args.db.as_deref());
    check_sandbox(&mut lines);
    check_shell(&mut lines, config.as_ref());
    check_workspace(&mut lines, config.as_ref());
    check_prompt(&mut lines, config.as_ref());
    check_skills(&mut lines, config.as_ref());
    check_hooks(&mut lines, config.as_ref());
    check_claude_permissions(&mut lines, config.as_ref());
    if let Some(serve) = &args.serve {
        lines.section("Serve");
        for (what, finding) in crate::serve::check(serve) {
            match finding {
                Ok(detail) => lines.ok(&what, &detail),
                Err((problem, fix)) => lines.bad(&what, &problem, &fix),
            }
        }
    }
    lines.section("Logs");
    match config.as_ref().and_then(|c| c.log_file.clone()) {
        Some(path) => lines.ok(
            "log",
            &format!("to {} (the config's log_file)", path.display()),
        ),
        None => lines.ok(
            "log",
            "to stderr, which editors show in their agent log (--log-file PATH for a file)",
        ),
    }
    lines.text.push('\n');
    lines.text.push_str(if lines.broken {
        "Something is broken: see the FAIL lines above.\n"
    } else {
        "Everything Spindle needs is in place.\n"
    });
    Report {
        text: lines.text,
        broken: lines.broken,
    }
}

/// The config the command loaded (from `explicit` or the default file).
fn check_config(lines: &mut Lines, explicit: Option<&Path>, loaded: &Loaded) -> Option<Config> {
    lines.section("Configuration");
    let path = explicit.map_or_else(crate::config::default_path, Path::to_path_buf);
    match loaded.get() {
        Ok((config, Some(path))) => {
            lines.ok("config", &format!("{} parses", path.display()));
            Some(config.clone())
        }
        Ok((config, None)) => {
            lines.ok(
                "config",
                &format!(
                    "no file at {} (providers come from the environment)",
                    path.display()
                ),
            );
            Some(config.clone())
        }
        Err(problem) => {
            lines.bad(
                "config",
                &problem.to_string(),
                "fix the file at the place named, or move it away and run spindle setup",
            );
            None
        }
    }
}

/// A key the server refused (HTTP 401 or 403): a failure that names
/// where the key came from, since that is what to fix.
fn key_refused(lines: &mut Lines, config: &Config, config_path: &Path, name: &str, said: &str) {
    let source = config
        .key_source(name, config_path)
        .unwrap_or_else(|| "nowhere: no key was sent".into());
    lines.bad(
        name,
        &format!("the server refused the API key ({said}); the key came from {source}"),
        "put the right key there, or run spindle setup again",
    );
}

/// Whether a model list's error is the server refusing the key.
fn list_refused(problem: &crate::provider::models::ListError) -> bool {
    use crate::provider::models::ListErrorKind;
    matches!(problem.kind, ListErrorKind::Status(401 | 403))
}

fn check_providers(lines: &mut Lines, config: &Config, config_path: &Path) {
    lines.section("Providers");
    if config.providers.is_empty() {
        lines.bad(
            "providers",
            "none is configured",
            "run spindle setup, or set OPENAI_API_KEY, ANTHROPIC_API_KEY or OLLAMA_HOST",
        );
        return;
    }
    for (name, provider) in &config.providers {
        let key = match config.api_key(name) {
            Ok(key) => key,
            Err(problem) => {
                lines.bad(
                    name,
                    &problem,
                    "fix the key file, or run spindle setup again",
                );
                continue;
            }
        };
        if provider.requires_key && key.is_none() {
            lines.bad(
                name,
                "no API key",
                &format!(
                    "set {} or run spindle setup --name {name} --key-stdin",
                    provider
                        .api_key_env
                        .as_deref()
                        .unwrap_or("its key variable")
                ),
            );
            continue;
        }
        let base = provider
            .base_url
            .clone()
            .unwrap_or_else(|| provider.kind.default_base_url().to_string());
        match crate::provider::models::list(provider.kind, &base, key.as_deref(), &config.trust) {
            Ok(models) => {
                lines.ok(
                    name,
                    &format!(
                        "{base} answers; {} listed",
                        crate::util::count(models.len(), "model", "models")
                    ),
                );
                if provider.gateway {
                    lines.ok(
                        name,
                        "a gateway (\"gateway\": true): it retries by itself, so Spindle retries a call once at most",
                    );
                }
                check_default(lines, config, name, &models);
                check_window(lines, config, config_path, name, &models);
                if provider.kind == crate::config::ProviderKind::Openai {
                    let refused = check_tools(lines, config, name, &base, key, &models);
                    if let Some(said) = refused {
                        key_refused(lines, config, config_path, name, &said);
                    }
                }
            }
            Err(problem) if list_refused(&problem) => {
                key_refused(lines, config, config_path, name, &problem.to_string())
            }
            Err(problem) => lines.bad(
                name,
                &format!("{base} does not list its models: {problem}"),
                "check the base URL (does it need /v1?), the key, and that the server runs",
            ),
        }
    }
}

/// The certificate files and folders the environment and the config add
/// to the trusted roots: each readable, each giving certificates.
fn check_trust(lines: &mut Lines, trust: &crate::net::Trust) {
    let sources = crate::net::tls::check(trust);
    if sources.is_empty() {
        return;
    }
    lines.section("Trusted certificates");
    for (what, found) in sources {
        match found {
            Ok(detail) => lines.ok(&what, &detail),
            Err(problem) => lines.bad(
                &what,
                &format!("{problem}; HTTPS goes on without it"),
                &match what.as_str() {
                    "SSL_CERT_DIR" => "point SSL_CERT_DIR at folders of PEM files".to_string(),
                    _ => format!("point {what} at a PEM file of certificates (a regular file)"),
                },
            ),
        }
    }
}

/// What happens when a provider refuses with a limit that resets later:
/// the fallback models, in order, and the longest wait.
fn check_waiting(lines: &mut Lines, config: &Config) {
    for id in &config.fallback {
        let provider = id.split_once('/').map_or("", |(p, _)| p);
        if !config.providers.contains_key(provider) {
            lines.warn(
                "fallback",
                &format!("{id}: no provider {provider:?} in the config, so it is never asked"),
            );
        }
    }
    if !config.fallback.is_empty() {
        lines.ok(
            "fallback",
            &format!(
                "asked in turn while a model is limited: {}",
                config.fallback.join(", ")
            ),
        );
    }
    let detail = match config.max_wait_minutes.unwrap_or(300) {
        0 => "a turn never waits for a provider's limit to reset (max_wait_minutes 0)".to_string(),
        minutes => format!(
            "a turn waits up to {minutes} minutes for a provider's limit to reset (max_wait_minutes)"
        ),
    };
    lines.ok("limits", &detail);
}

/// The provider and model `defaults.model` names: `provider/model`, or a
/// bare name on the first provider as the agent qualifies it.
fn default_of(config: &Config) -> Option<(String, String)> {
    let wanted = config.defaults.model.as_deref()?;
    if let Some((provider, model)) = wanted.split_once('/') {
        if config.providers.contains_key(provider) {
            return Some((provider.to_string(), model.to_string()));
        }
    }
    let provider = config
        .providers
        .keys()
        .min_by_key(|name| (name.as_str() != "openai", name.as_str()))?;
    Some((provider.clone(), wanted.to_string()))
}

/// A provider that lists its models must list the default model, or the
/// first prompt fails; says which listed ones would do.
fn check_default(
    lines: &mut Lines,
    config: &Config,
    name: &str,
    models: &[crate::provider::models::Listed],
) {
    let Some((provider, model)) = default_of(config) else {
        return;
    };
    if provider != name || models.is_empty() || models.iter().any(|m| m.id == model) {
        return;
    }
    let kind = config.providers[name].kind;
    let mut usable: Vec<&crate::provider::models::Listed> = models
        .iter()
        .filter(|m| crate::provider::models::takes_tools(&m.id, m.tools))
        .collect();
    usable.sort_by_key(|m| crate::provider::models::default_rank(kind, &m.id, m.tools));
    let names: Vec<String> = usable
        .iter()
        .take(3)
        .map(|m| format!("{name}/{}", m.id))
        .collect();
    let fix = match names.is_empty() {
        true => "set defaults.model to a model the server serves".to_string(),
        false => format!(
            "set defaults.model to one it lists, such as {}",
            names.join(", ")
        ),
    };
    lines.bad(
        "default model",
        &format!(
            "{name} does not list {model:?} (defaults.model), so requests for it will be refused"
        ),
        &fix,
    );
}

/// The default model of this provider whose context window nobody gave:
/// the window the agent assumes is said, with the setting that sizes it.
fn check_window(
    lines: &mut Lines,
    config: &Config,
    config_path: &Path,
    name: &str,
    models: &[crate::provider::models::Listed],
) {
    let Some((provider, model)) = default_of(config).filter(|(p, _)| p == name) else {
        return;
    };
    let listed = models.iter().find(|m| m.id == model);
    // One the server does not list fails already (`check_default`).
    if listed.is_none() && !models.is_empty() {
        return;
    }
    let id = format!("{provider}/{model}");
    let window = listed.and_then(|m| m.context_window);
    if let Some(note) = super::setup_ask::unknown_window(config, &id, window, config_path) {
        lines.warn("context window", &note);
    }
}

/// Asks an OpenAI-compatible provider's default model one tiny question
/// with one tool: a llama.cpp server without `--jinja`, or a model
/// without tool support, refuses every request Spindle makes. Returns
/// what the server said when it refused the key.
fn check_tools(
    lines: &mut Lines,
    config: &Config,
    name: &str,
    base: &str,
    api_key: Option<String>,
    listed: &[crate::provider::models::Listed],
) -> Option<String> {
    use crate::provider::probe::{self, ToolsProbe};
    let prefix = format!("{name}/");
    let model = config
        .defaults
        .model
        .iter()
        .chain(config.models.keys())
        .find_map(|id| id.strip_prefix(&prefix).map(str::to_string))
        .or_else(|| {
            // As the agent would choose: by the stable rule, not the
            // server's order.
            let kind = config.providers.get(name)?.kind;
            listed
                .iter()
                .filter(|m| crate::provider::models::takes_tools(&m.id, m.tools))
                .min_by_key(|m| crate::provider::models::default_rank(kind, &m.id, m.tools))
                .map(|m| m.id.clone())
        });
    let model = model?;
    let provider = crate::provider::openai::ChatCompletions {
        base_url: base.to_string(),
        api_key,
        timeouts: crate::provider::http::Timeouts {
            connect: probe::PROBE_CONNECT,
            stall: probe::PROBE_STALL,
            attempts: 1,
            ..Default::default()
        },
        trust: config.trust.clone(),
        tokenizer: Default::default(),
    };
    let what = format!("{name} tools");
    match probe::tools(&provider, &model) {
        ToolsProbe::Takes => lines.ok(&what, &format!("{model} answers a request with a tool")),
        ToolsProbe::Refused { said, fix } => {
            lines.bad(&what, &format!("{model} refuses tools: {said}"), &fix)
        }
        ToolsProbe::Denied(said) => {
            return Some(format!("a test request to {model}: {said}"));
        }
        ToolsProbe::Failed(why) => lines.warn(
            &what,
            &format!("a test request with a tool to {model} failed: {why}"),
        ),
    }
    None
}

/// Starts the config's MCP servers (and a trusted project's, here), lists
/// their tools, and stops them.
fn check_mcp(lines: &mut Lines, config: &Config, config_path: &std::path::Path) {
    let tokens = &crate::config::mcp_tokens_dir(config_path);
    let mut servers = config.mcp_servers.clone();
    let mut problems = Vec::new();
    // An untrusted project's servers are named, not started.
    let mut held = Vec::new();
    if let Ok(cwd) = std::env::current_dir() {
        let (project, unread) = crate::config::project::project_servers(config, &cwd);
        problems = unread;
        if crate::config::project::project_trusted(config, &cwd) {
            servers.extend(project.into_iter().map(|(server, _)| server));
        } else if !project.is_empty() {
            let root = crate::config::project::root(&cwd);
            held = project
                .into_iter()
                .map(|(server, source)| {
                    let name = server["name"].as_str().unwrap_or("?").to_string();
                    let why = format!(
                        "from {}; not started: the project {} is not trusted (`spindle trust` there starts it)",
                        source.display(),
                        root.display()
                    );
                    (name, why)
                })
                .collect();
        }
        if let Some(older) = crate::config::project::stale_trust(config, &cwd) {
            problems.push(format!(
                "{} was trusted by an older Spindle; trust now goes with the project root, {} (`spindle trust` there)",
                older.display(),
                crate::config::project::root(&cwd).display()
            ));
        }
    }
    if servers.is_empty() && problems.is_empty() && held.is_empty() {
        return;
    }
    lines.section("MCP servers");
    for problem in problems {
        lines.warn("project", &problem);
    }
    for (name, why) in &held {
        lines.warn(name, why);
    }
    // Your own config's names are used as written, but said when they
    // break the rule `spindle mcp add` holds names to.
    for server in &config.mcp_servers {
        let name = server["name"].as_str().unwrap_or_default();
        if !crate::mcp::valid_name(name) {
            lines.warn(
                &crate::mcp::quoted_name(name),
                &format!(
                    "{}; rename it in mcp_servers, or the tools of two servers may be confused",
                    crate::mcp::NAME_RULE
                ),
            );
        }
    }
    let (mut configs, failures) = crate::mcp::parse_servers(&servers);
    configs
        .iter_mut()
        .for_each(|c| c.tokens = Some(tokens.clone()));
    for (server, reason) in failures {
        lines.bad(&server, &reason, "fix its entry in mcp_servers");
    }
    if configs.is_empty() {
        return;
    }
    let names: Vec<String> = configs.iter().map(|c| c.name.clone()).collect();
    let session = crate::mcp::McpSession::start(configs, std::time::Duration::from_secs(10));
    let failed: Vec<(String, crate::mcp::McpError)> = session.take_failures();
    let tools = session.tools();
    for name in names {
        if let Some((_, reason)) = failed.iter().find(|(server, _)| *server == name) {
            let (detail, fix) = crate::cli::mcp_login::failure(tokens, &name, reason);
            lines.bad(&name, &detail, &fix);
            continue;
        }
        let count = tools.iter().filter(|t| t.server == name).count();
        lines.ok(&name, &crate::cli::mcp_login::started(tokens, &name, count));
    }
    session.shutdown();
}

/// The files of the current folder's workspace that Spindle refuses to
/// read on the repository's behalf (links out, FIFOs, devices, …).
fn check_workspace(lines: &mut Lines, config: Option<&Config>) {
    let Ok(cwd) = std::env::current_dir() else {
        return;
    };
    let skipped = crate::agent::skipped_files(&cwd, None);
    let defaults = crate::config::project::project_defaults(&cwd);
    if skipped.is_empty() && matches!(defaults, Ok(None)) {
        return;
    }
    lines.section("Workspace");
    for file in skipped {
        lines.warn("left out", &file.describe());
    }
    let trusted = config.is_some_and(|c| crate::config::project::project_trusted(c, &cwd));
    match defaults {
        Ok(None) => {}
        Err(problem) => lines.warn("project defaults", &problem),
        Ok(Some(defaults)) => {
            let set = serde_json::to_string(&defaults)
                .inspect_err(|error| log::warn!("doctor: cannot show the defaults: {error}"))
                .unwrap_or_default();
            match trusted {
                true => lines.ok(
                    "project defaults",
                    &format!("{set} (the project is trusted; approval counts up to auto)"),
                ),
                false => lines.warn(
                    "project defaults",
                    &format!(
                        "{set} ignored: the project is not trusted (spindle trust here uses them)"
                    ),
                ),
            }
        }
    }
}

/// What the default model is sent before the user's first word, as the
/// agent estimates it (the configured window, else the catalog's, else
/// the one assumed, picks the profile unless the config names one).
fn check_prompt(lines: &mut Lines, config: Option<&Config>) {
    let cwd = std::env::current_dir()
        .inspect_err(|error| log::warn!("doctor: the current folder is unknown: {error}"))
        .unwrap_or_default();
    let default = config.and_then(default_of);
    let window = default
        .as_ref()
        .and_then(|(provider, model)| {
            let id = format!("{provider}/{model}");
            config
                .and_then(|c| c.models.get(&id))
                .and_then(|m| m.context_window)
                .or_else(|| crate::provider::models::known_limits(model).map(|(w, _)| w))
        })
        .unwrap_or(crate::agent::models::DEFAULT_CONTEXT_WINDOW);
    let lean = crate::agent::is_lean(config.and_then(|c| c.profile), window);
    let ripgrep = crate::tools::search::ripgrep_available();
    let (tokens, count) = crate::agent::first_request(&cwd, lean, ripgrep);
    lines.section("Prompt");
    lines.ok(
        "prompt before your first word",
        &format!(
            "about {tokens} tokens (profile {}, {count} tools)",
            if lean { "lean" } else { "full" }
        ),
    );
}

/// The skills in force, where each came from, and the ones left out
/// (untrusted, malformed, too large, a link out, a name taken first), and
/// the project's commands and skills shadowed by a name of the user's.
fn check_skills(lines: &mut Lines, config: Option<&Config>) {
    let Ok(cwd) = std::env::current_dir() else {
        return;
    };
    let trusted = config.is_some_and(|c| crate::config::project::project_trusted(c, &cwd));
    let found = crate::agent::skills::discover(&cwd, trusted);
    let found = crate::agent::commands::catalog(&cwd, None, found).skills;
    if found.skills.is_empty() && found.left.is_empty() && found.shadowed.is_empty() {
        return;
    }
    lines.section("Skills");
    for skill in &found.skills {
        let dir = skill.dir.display();
        lines.ok(&skill.name, &format!("from {} ({dir})", skill.origin));
    }
    for left in &found.left {
        lines.warn("left out", &left.describe());
    }
    for shadowed in &found.shadowed {
        lines.warn("shadowed", &shadowed.describe());
    }
}

/// The hooks in force and where each came from, and what was left out
/// (an untrusted project's, malformed entries).
fn check_hooks(lines: &mut Lines, config: Option<&Config>) {
    let Ok(cwd) = std::env::current_dir() else {
        return;
    };
    let trusted = config.is_some_and(|c| crate::config::project::project_trusted(c, &cwd));
    let user = config.and_then(|c| c.hooks.as_ref());
    let hooks = crate::agent::hooks::Hooks::load(user, &cwd, trusted);
    if hooks.list.is_empty() && hooks.problems.is_empty() {
        return;
    }
    lines.section("Hooks");
    for hook in &hooks.list {
        lines.ok("hook", &hook.describe());
    }
    for problem in &hooks.problems {
        lines.warn("left out", problem);
    }
}

/// The permission rules of the project's Claude Code settings: each one
/// read, as the Spindle rule it became (an allow only counts in a
/// trusted project), and each one left out, with why.
fn check_claude_permissions(lines: &mut Lines, config: Option<&Config>) {
    let Ok(cwd) = std::env::current_dir() else {
        return;
    };
    let trusted = config.is_some_and(|c| crate::config::project::project_trusted(c, &cwd));
    let claude = crate::config::claude_permissions::ClaudeRules::load(&cwd);
    if claude.read.is_empty() && claude.left_out.is_empty() && claude.problems.is_empty() {
        return;
    }
    lines.section("Claude Code permissions");
    for read in &claude.read {
        let rule = crate::config::claude_permissions::describe(&read.rule);
        let what = format!("{} ({})", read.text, read.origin);
        match read.rule.decision {
            crate::policy::rules::Decision::Allow if !trusted => lines.warn(
                "ignored",
                &format!(
                    "{what}: would allow {rule}; the project is not trusted (spindle trust here uses it)"
                ),
            ),
            crate::policy::rules::Decision::Allow => {
                lines.ok("read", &format!("{what}: allows {rule}"))
            }
            crate::policy::rules::Decision::Ask => {
                lines.ok("read", &format!("{what}: asks before {rule}"))
            }
            crate::policy::rules::Decision::Deny => {
                lines.ok("read", &format!("{what}: denies {rule}"))
            }
        }
    }
    for left in &claude.left_out {
        lines.warn("left out", &left.describe());
    }
    for problem in &claude.problems {
        lines.warn("not read", problem);
    }
}

/// The shell commands run under, and what that means for `auto`.
fn check_shell(lines: &mut Lines, config: Option<&Config>) {
    use crate::process::shell::{Shell, ShellKind};
    lines.section("Commands");
    let shell = config.map_or_else(|| Shell::configured(None), Config::shell);
    let mut text = format!("{} (commands run with {})", shell.name(), shell.describe());
    if shell.kind != ShellKind::Posix {
        text.push_str("; under auto every command asks (its read-only proofs read sh lines only)");
    }
    lines.ok("shell", &text);
}

fn check_sandbox(lines: &mut Lines) {
    lines.section("Sandbox");
    match std::env::current_exe() {
        Ok(exe) => {
            let support = crate::sandbox::support(&exe);
            if support.available() {
                lines.ok("sandbox", &support.describe());
            } else {
                let consequence = if cfg!(windows) {
                    "--permissions sandbox is refused"
                } else {
                    "under --permissions sandbox every command asks"
                };
                lines.warn("sandbox", &format!("{}: {consequence}", support.describe()));
            }
        }
        Err(error) => lines.warn("sandbox", &format!("cannot find Spindle's binary: {error}")),
    }
}

//! Configuration: which model providers exist, which models they offer,
//! and the defaults for new sessions. Read from `config.json`
//! (`$SPINDLE_HOME/config.json`, else the system's config folder,
//! `crate::os::folders`, or `--config PATH`); without a file, providers are found from the
//! environment. API keys come from environment variables or key files with
//! 0600 permissions and are never logged or written anywhere.
//!
//! This file holds the config file itself (providers, models, prices,
//! defaults, tool settings, context, permissions, the profile,
//! checkpoints, fallback models, the longest wait); `limits.rs` its size
//! limits and `loops.rs` when a stuck model is told and stopped.
//! `project.rs` is the project: its root (`root`, the nearest folder
//! holding `.git`, never the home folder or above from inside it; every
//! reader of a project's settings, instruction files and trust starts
//! there), its `.spindle/config.json` and `.mcp.json`, trust, and rules
//! saved for a project; `claude_permissions.rs` translates Claude Code's
//! permission rules where the meaning is the same and lists the others.

use crate::modes::Policy;
pub use crate::provider::kind::{Price, ProviderKind};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

pub(crate) mod claude_permissions;
mod error;
mod limits;
pub mod loaded;
mod loops;
pub(crate) mod project;
pub use error::{ConfigError, ConfigErrorKind};
pub use limits::Limits;
pub use loops::LoopSettings;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProviderConfig {
    pub kind: ProviderKind,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base_url: Option<String>,
    /// The environment variable holding the key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_key_env: Option<String>,
    /// A file holding the key; it must not be readable by others.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_key_file: Option<PathBuf>,
    /// Servers that need no key (local ones) set this to false.
    #[serde(default = "yes", skip_serializing_if = "is_true")]
    pub requires_key: bool,
    /// A gateway that retries by itself: Spindle retries a call once at most.
    #[serde(default, skip_serializing_if = "is_false")]
    pub gateway: bool,
}

fn yes() -> bool {
    true
}

fn is_true(value: &bool) -> bool {
    *value
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelConfig {
    /// A human name for menus (default: the id).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context_window: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_output_tokens: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub price: Option<Price>,
    /// Whether the model reasons (thinks) and which effort levels it takes;
    /// unset, the built-in catalog decides for models it knows.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning: Option<bool>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub efforts: Vec<String>,
    /// Whether it takes images; unset, the catalog decides.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub images: Option<bool>,
}

fn is_false(value: &bool) -> bool {
    !*value
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Defaults {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub effort: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preset: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approval: Option<Policy>,
}

/// The file's shape.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    #[serde(default)]
    pub providers: BTreeMap<String, ProviderConfig>,
    /// Keyed by `provider/model`.
    #[serde(default)]
    pub models: BTreeMap<String, ModelConfig>,
    #[serde(default)]
    pub defaults: Defaults,
    #[serde(default, skip_serializing_if = "ToolSettings::is_default")]
    pub tools: ToolSettings,
    #[serde(default, skip_serializing_if = "Limits::is_default")]
    pub limits: Limits,
    #[serde(default, skip_serializing_if = "ContextSettings::is_default")]
    pub context: ContextSettings,
    #[serde(default, skip_serializing_if = "PermissionSettings::is_default")]
    pub permissions: PermissionSettings,
    #[serde(default, skip_serializing_if = "CheckpointSettings::is_default")]
    pub checkpoints: CheckpointSettings,
    #[serde(default, skip_serializing_if = "GoalSettings::is_default")]
    pub goal: GoalSettings,
    #[serde(default, skip_serializing_if = "LoopSettings::is_default")]
    pub loops: LoopSettings,
    #[serde(default, skip_serializing_if = "TlsSettings::is_default")]
    pub tls: TlsSettings,
    /// What HTTPS trusts under this config (its `tls.ca_file`, made
    /// absolute when the file was loaded); every HTTP client built for
    /// this config takes it from here.
    #[serde(skip)]
    pub trust: crate::net::Trust,
    /// Where `spindle acp` logs instead of stderr (`--log-file` wins).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub log_file: Option<PathBuf>,
    /// MCP servers for every session, in the ACP shape (`name`, then
    /// `command`/`args`/`env`, or `type`/`url`/`headers`); the editor's
    /// win on a name both use.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub mcp_servers: Vec<Value>,
    /// The shell commands run under (a name or a path; the default is
    /// `sh` on Unix, PowerShell or `cmd` on Windows).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shell: Option<String>,
    /// Models (`provider/model`) asked in turn when the session's model
    /// refuses with a limit that resets later.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub fallback: Vec<String>,
    /// `lean` (the core tools, short texts) or `full`: what the model is
    /// told before the first word; unset, lean for a window of 16k tokens
    /// or less.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub profile: Option<crate::modes::Profile>,
    /// The longest a turn waits for a provider's limit to reset, in
    /// minutes (default 300; 0 never waits).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_wait_minutes: Option<u64>,
    /// Hooks in Claude Code's format (`{EVENT: [{matcher, hooks}]}`), read
    /// by the agent; kept as written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hooks: Option<Value>,
}

/// Checks MCP server entries in the ACP shape, naming a bad entry.
pub fn check_mcp_servers(servers: &[Value], what: &str) -> Result<(), String> {
    for (index, server) in servers.iter().enumerate() {
        let here = format!("{what}[{index}]");
        let Some(name) = server
            .get("name")
            .and_then(Value::as_str)
            .filter(|n| !n.is_empty())
        else {
            return Err(format!("{here}: an MCP server needs \"name\" (a string)"));
        };
        let stdio = server.get("command").is_some_and(Value::is_string);
        let remote = server.get("url").is_some_and(Value::is_string);
        if !stdio && !remote {
            return Err(format!(
                "{here} ({name}): needs \"command\" (a local server) or \"url\" (http or sse)"
            ));
        }
        if servers[..index]
            .iter()
            .any(|s| s.get("name") == server.get("name"))
        {
            return Err(format!("{here}: a second server named {name:?}"));
        }
    }
    Ok(())
}

/// What HTTPS trusts besides the bundled roots, the environment's
/// `SSL_CERT_FILE`/`SSL_CERT_DIR` and the system's store (`tls` in
/// config.json).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TlsSettings {
    /// A PEM file of certificate authorities to trust (a relative path
    /// is taken from the config file's folder).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ca_file: Option<PathBuf>,
}

impl TlsSettings {
    fn is_default(&self) -> bool {
        *self == TlsSettings::default()
    }
}

/// Goal budgets overriding the preset's (`goal` in config.json).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GoalSettings {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_continuations: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_model_calls: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_cost: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_minutes: Option<u64>,
}

impl GoalSettings {
    fn is_default(&self) -> bool {
        *self == GoalSettings::default()
    }
}

/// Checkpoints (`/undo`, `/rewind`, `/redo`): on by default.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CheckpointSettings {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
    /// Checkpoints older than this many days are pruned (default 7).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_age_days: Option<u64>,
    /// The most bytes of kept contents per session (default 512 MiB).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_bytes: Option<u64>,
    /// Larger files are not kept (default 8 MiB).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_file_bytes: Option<u64>,
}

impl CheckpointSettings {
    fn is_default(&self) -> bool {
        *self == CheckpointSettings::default()
    }

    pub fn settings(&self) -> crate::checkpoint::Settings {
        let defaults = crate::checkpoint::Settings::default();
        crate::checkpoint::Settings {
            enabled: self.enabled.unwrap_or(defaults.enabled),
            max_age_days: self.max_age_days.unwrap_or(defaults.max_age_days),
            max_bytes: self.max_bytes.unwrap_or(defaults.max_bytes),
            max_file_bytes: self.max_file_bytes.unwrap_or(defaults.max_file_bytes),
            ..defaults
        }
    }
}

/// How approvals behave beyond the policy.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PermissionSettings {
    /// What a rejected tool call does to the turn: `stop` (the default:
    /// the turn ends) or `continue` (the model is told and carries on).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on_reject: Option<OnReject>,
    /// Lasting rules: allow, ask or deny by tool and pattern.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rules: Vec<crate::policy::rules::Rule>,
    /// Per workspace (its absolute path): the rules answered "always, in
    /// this project", and whether the workspace's own
    /// `.spindle/config.json` may loosen (allow), not only tighten.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub projects: BTreeMap<String, ProjectPermissions>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProjectPermissions {
    #[serde(default, skip_serializing_if = "is_false")]
    pub trusted: bool,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rules: Vec<crate::policy::rules::Rule>,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OnReject {
    #[default]
    Stop,
    Continue,
}

impl PermissionSettings {
    fn is_default(&self) -> bool {
        *self == PermissionSettings::default()
    }
}

/// How the conversation is kept inside the model's window.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ContextSettings {
    /// Compact automatically when the next request would pass this share
    /// of the window: a number from 0.3 to 0.95 (default 0.8), or "off".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auto_compact: Option<Value>,
    /// Tool results larger than this go to the model as head and tail,
    /// with the whole kept in a file (default 32 KiB; at least 4 KiB).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_output_bytes: Option<u64>,
}

/// The default share of the window that triggers compaction.
pub const DEFAULT_COMPACT_AT: f64 = 0.8;
/// The default cap of one tool result as the model sees it.
pub const DEFAULT_TOOL_OUTPUT_BYTES: usize = 32 * 1024;

impl ContextSettings {
    fn is_default(&self) -> bool {
        *self == ContextSettings::default()
    }

    /// The share of the window that triggers compaction, `None` for off.
    pub fn compact_at(&self) -> Option<f64> {
        match &self.auto_compact {
            None => Some(DEFAULT_COMPACT_AT),
            Some(value) => value.as_f64(),
        }
    }

    /// The cap of one tool result as the model sees it.
    pub fn tool_output_bytes(&self) -> usize {
        self.tool_output_bytes
            .and_then(|v| usize::try_from(v).ok())
            .unwrap_or(DEFAULT_TOOL_OUTPUT_BYTES)
    }

    fn check(&self) -> Result<(), String> {
        match &self.auto_compact {
            None => {}
            Some(Value::String(word)) if word == "off" => {}
            Some(value) if value.as_f64().is_some_and(|v| (0.3..=0.95).contains(&v)) => {}
            Some(other) => {
                return Err(format!(
                    "context.auto_compact must be a number from 0.3 to 0.95 or \"off\", not {other}"
                ))
            }
        }
        if self.tool_output_bytes.is_some_and(|v| v < 4096) {
            return Err("context.tool_output_bytes must be at least 4096".into());
        }
        Ok(())
    }
}

/// How tools run: which credential variables they may still see and how
/// much of a command's output is logged.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolSettings {
    /// Variables that commands, terminals, MCP servers and jobs get even
    /// though Spindle would remove them as credentials.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pass_env: Vec<String>,
    /// The most bytes of one command's output kept in its log file
    /// (default 4 MiB; head and tail are kept, with a marker between).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command_log_bytes: Option<u64>,
}

impl ToolSettings {
    fn is_default(&self) -> bool {
        *self == ToolSettings::default()
    }
}

/// Where the config file lives when no `--config` is given:
/// `$SPINDLE_HOME/config.json`, else `config.json` in the system's config
/// folder ([`crate::os::folders`]).
pub fn default_path() -> PathBuf {
    match std::env::var_os("SPINDLE_HOME").filter(|v| !v.is_empty()) {
        Some(home) => PathBuf::from(home).join("config.json"),
        None => crate::os::folders::config_dir().join("config.json"),
    }
}

impl Config {
    /// What tools must not get of this configuration: its key variables
    /// and keys, past its `tools.pass_env`.
    pub fn secrets(&self) -> crate::policy::secrets::Secrets {
        let variables = self
            .providers
            .values()
            .filter_map(|provider| provider.api_key_env.clone());
        let keys = self
            .providers
            .keys()
            .filter_map(|name| self.api_key(name).ok().flatten());
        crate::policy::secrets::Secrets::new(variables, keys, self.tools.pass_env.iter().cloned())
    }

    /// The shell commands run under.
    pub fn shell(&self) -> crate::process::shell::Shell {
        crate::process::shell::Shell::configured(self.shell.as_deref())
    }

    /// Parses a config file's text; errors name the file, line and column.
    pub fn parse(text: &str, path: &Path) -> Result<Config, ConfigError> {
        let mut config: Config = serde_json::from_str(text).map_err(|err| {
            let (line, column) = (err.line(), err.column());
            let kind = match err.classify() {
                serde_json::error::Category::Syntax | serde_json::error::Category::Eof => {
                    ConfigErrorKind::Syntax { line, column }
                }
                _ => ConfigErrorKind::InvalidValue {
                    at: Some((line, column)),
                },
            };
            ConfigError::new(
                kind,
                format!(
                    "{}:{line}:{column}: {}",
                    path.display(),
                    describe(&err, text)
                ),
            )
        })?;
        // What the HTTP clients built for this config trust (and no
        // others): its `ca_file`, taken from the file's folder.
        let folder = path.parent().unwrap_or(Path::new("."));
        config.trust = crate::net::Trust::new(config.tls.ca_file.as_ref().map(|f| folder.join(f)));
        check_mcp_servers(
            &config.mcp_servers,
            &format!("{}: mcp_servers", path.display()),
        )
        .map_err(ConfigError::invalid)?;
        if let Some(shell) = &config.shell {
            crate::process::shell::Shell::named(shell).map_err(|problem| {
                ConfigError::invalid(format!("{}: shell: {problem}", path.display()))
            })?;
        }
        for id in config.models.keys() {
            let Some((provider, model)) = id.split_once('/') else {
                return Err(ConfigError::invalid(format!(
                    "{}: model {id:?} must be named provider/model",
                    path.display()
                )));
            };
            if model.is_empty() || !config.providers.contains_key(provider) {
                return Err(ConfigError::invalid(format!(
                    "{}: model {id:?} names provider {provider:?}, which is not in \"providers\"",
                    path.display()
                )));
            }
        }
        if let Some(bad) = config.fallback.iter().find(|id| {
            !id.split_once('/')
                .is_some_and(|(p, m)| !p.is_empty() && !m.is_empty())
        }) {
            return Err(ConfigError::invalid(format!(
                "{}: fallback: {bad:?} must be named provider/model",
                path.display()
            )));
        }
        config
            .context
            .check()
            .map_err(|problem| ConfigError::invalid(format!("{}: {problem}", path.display())))?;
        crate::policy::rules::validate_rules(&config.permissions.rules)
            .map_err(|problem| ConfigError::invalid(format!("{}: {problem}", path.display())))?;
        for (project, settings) in &config.permissions.projects {
            crate::policy::rules::validate_rules(&settings.rules).map_err(|problem| {
                ConfigError::invalid(format!(
                    "{}: permissions.projects[{project:?}]: {problem}",
                    path.display()
                ))
            })?;
        }
        Ok(config)
    }

    /// Loads `path` (an explicit `--config`, which must exist) or the
    /// default file (which may be missing: then the environment decides).
    pub fn load(explicit: Option<&Path>) -> Result<(Config, Option<PathBuf>), ConfigError> {
        let path = explicit.map(Path::to_path_buf).unwrap_or_else(default_path);
        let text = match read_text(&path)? {
            Some(text) => text,
            None if explicit.is_none() => return Ok((Config::from_env(), None)),
            None => {
                return Err(ConfigError::new(
                    ConfigErrorKind::NotFound,
                    format!("cannot read {}: no such file", path.display()),
                ))
            }
        };
        let mut config = Config::parse(&text, &path)?;
        // The environment's providers join the file's; the file wins on a
        // name both use.
        for (name, provider) in Config::from_env().providers {
            config.providers.entry(name).or_insert(provider);
        }
        Ok((config, Some(path)))
    }

    /// Providers found from the environment: `OPENAI_API_KEY` (with
    /// `OPENAI_BASE_URL`), `ANTHROPIC_API_KEY` (with `ANTHROPIC_BASE_URL`),
    /// `OLLAMA_HOST`.
    pub fn from_env() -> Config {
        let env = |name: &str| crate::credentials::var(name).filter(|v| !v.trim().is_empty());
        let mut config = Config::default();
        if env("OPENAI_API_KEY").is_some() || env("OPENAI_BASE_URL").is_some() {
            config.providers.insert(
                "openai".into(),
                ProviderConfig {
                    kind: ProviderKind::Openai,
                    base_url: env("OPENAI_BASE_URL"),
                    api_key_env: Some("OPENAI_API_KEY".into()),
                    api_key_file: None,
                    // A custom base URL is often a local server without keys.
                    requires_key: env("OPENAI_BASE_URL").is_none(),
                    gateway: false,
                },
            );
        }
        if env("ANTHROPIC_API_KEY").is_some() {
            config.providers.insert(
                "anthropic".into(),
                ProviderConfig {
                    kind: ProviderKind::Anthropic,
                    base_url: env("ANTHROPIC_BASE_URL"),
                    api_key_env: Some("ANTHROPIC_API_KEY".into()),
                    api_key_file: None,
                    requires_key: true,
                    gateway: false,
                },
            );
        }
        if let Some(host) = env("OLLAMA_HOST") {
            let host = if host.starts_with("http") {
                host
            } else {
                format!("http://{host}")
            };
            config.providers.insert(
                "ollama".into(),
                ProviderConfig {
                    kind: ProviderKind::Openai,
                    base_url: Some(format!("{}/v1", host.trim_end_matches('/'))),
                    api_key_env: None,
                    api_key_file: None,
                    requires_key: false,
                    gateway: false,
                },
            );
        }
        config
    }

    /// The provider's key, from its variable or key file.
    pub fn api_key(&self, provider: &str) -> Result<Option<String>, String> {
        let Some(config) = self.providers.get(provider) else {
            return Ok(None);
        };
        if let Some(name) = &config.api_key_env {
            if let Some(value) = crate::credentials::var(name) {
                if !value.trim().is_empty() {
                    return Ok(Some(value.trim().to_string()));
                }
            }
        }
        if let Some(path) = &config.api_key_file {
            return read_key_file(path).map(Some);
        }
        Ok(None)
    }

    /// Where the provider's key comes from, as [`Config::api_key`] finds
    /// it, in words: "the environment variable NAME", "the key file
    /// PATH", or the file `spindle setup` keeps. `None` without a key.
    pub fn key_source(&self, provider: &str, config_path: &Path) -> Option<String> {
        let config = self.providers.get(provider)?;
        if let Some(name) = &config.api_key_env {
            if crate::credentials::var(name).is_some_and(|v| !v.trim().is_empty()) {
                return Some(format!("the environment variable {name}"));
            }
        }
        let file = config.api_key_file.as_ref()?;
        Some(
            match file.parent() == Some(managed_keys_dir(config_path).as_path()) {
                true => format!(
                    "the key file {} (the key spindle setup keeps)",
                    file.display()
                ),
                false => format!("the key file {}", file.display()),
            },
        )
    }

    /// Whether the provider can be called: it has a key or needs none.
    pub fn usable(&self, provider: &str) -> bool {
        match self.providers.get(provider) {
            Some(config) => !config.requires_key || matches!(self.api_key(provider), Ok(Some(_))),
            None => false,
        }
    }
}

fn describe(err: &serde_json::Error, file: &str) -> String {
    // A comment where the error is: JSON has none, and serde's words
    // ("key must be a string") do not say so.
    let line = file
        .lines()
        .nth(err.line().saturating_sub(1))
        .unwrap_or_default();
    let from = line
        .char_indices()
        .nth(err.column().saturating_sub(1))
        .map_or(line.len(), |(at, _)| at);
    let before = line.get(..from.min(line.len())).unwrap_or_default();
    let near = line.get(from.saturating_sub(1)..).unwrap_or_default();
    if near.trim_start().starts_with("//")
        || near.trim_start().starts_with("/*")
        || before.trim_end().ends_with('/')
    {
        return "comments are not allowed: the config file is plain JSON; remove the comment (keep notes in another file)".into();
    }
    let text = err.to_string();
    // serde appends " at line L column C"; the prefix already says where.
    match text.rfind(" at line ") {
        Some(at) => text[..at].to_string(),
        None => text,
    }
}

/// A `--model` whose provider part looks like a typo of a configured
/// provider (`opnai/gpt-4.1` with `openai` configured): the message says
/// which providers there are. Other names pass (a bare model id may hold a
/// `/` of its own, as OpenRouter's do).
pub fn check_model_provider(model: &str, providers: &[String]) -> Result<(), String> {
    let Some((provider, _)) = model.split_once('/') else {
        return Ok(());
    };
    if providers.iter().any(|p| p == provider) || providers.is_empty() {
        return Ok(());
    }
    let close = providers
        .iter()
        .find(|p| edit_distance(p, provider) <= 2 || p.eq_ignore_ascii_case(provider));
    match close {
        Some(near) => Err(format!(
            "--model {model}: there is no provider {provider:?} (did you mean {near:?}?); the providers are {}",
            providers.join(", ")
        )),
        None => Ok(()),
    }
}

/// Levenshtein distance, for "did you mean".
pub fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut previous = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let current = row[j + 1];
            row[j + 1] = (previous + usize::from(ca != *cb))
                .min(row[j] + 1)
                .min(current + 1);
            previous = current;
        }
    }
    row[b.len()]
}

/// Where Spindle keeps the keys it was given itself (`spindle setup
/// --key-stdin`): `keys/` beside the config file. `logout` forgets them.
pub fn managed_keys_dir(config_path: &Path) -> PathBuf {
    config_path
        .parent()
        .map(|dir| dir.join("keys"))
        .unwrap_or_else(|| PathBuf::from("keys"))
}

/// Where Spindle keeps the sign-in tokens of MCP servers: inside the keys
/// folder, so whatever hides the keys hides them too.
pub fn mcp_tokens_dir(config_path: &Path) -> PathBuf {
    managed_keys_dir(config_path).join("mcp")
}

/// Forgets the keys Spindle keeps itself for the providers of `config`
/// (never a variable, never a key file the user named elsewhere); returns
/// the providers whose key is gone.
pub fn forget_managed_keys(config: &Config, config_path: &Path) -> Vec<String> {
    let dir = managed_keys_dir(config_path);
    let mut forgotten = Vec::new();
    for (name, provider) in &config.providers {
        let Some(file) = &provider.api_key_file else {
            continue;
        };
        if file.parent() == Some(dir.as_path()) && std::fs::remove_file(file).is_ok() {
            forgotten.push(name.clone());
        }
    }
    forgotten
}

/// The largest config file read.
const CONFIG_CAP: u64 = 4 << 20;

/// The config file's text; `None` when there is none. It is read as
/// every file a setting names is: never a FIFO or a device (the open
/// would block), within a cap.
pub fn read_text(path: &Path) -> Result<Option<String>, ConfigError> {
    use crate::os::reading::{read_capped, ReadError};
    let unreadable = |message| ConfigError::new(ConfigErrorKind::Unreadable, message);
    match read_capped(path, CONFIG_CAP) {
        Ok(bytes) => String::from_utf8(bytes).map(Some).map_err(|_| {
            unreadable(format!(
                "cannot read {}: it is not UTF-8 text",
                path.display()
            ))
        }),
        Err(ReadError::Missing) => Ok(None),
        Err(ReadError::Io(err)) => {
            Err(unreadable(format!("cannot read {}: {err}", path.display())))
        }
        Err(error) => Err(unreadable(format!(
            "cannot read the config file: {} {}",
            path.display(),
            error.reason(path, CONFIG_CAP)
        ))),
    }
}

/// The largest key file read: a key is a line, a few hundred bytes.
const KEY_FILE_CAP: u64 = 64 << 10;

fn read_key_file(path: &Path) -> Result<String, String> {
    // Opened without blocking and only as a regular file (a FIFO at the
    // name would hold the agent at its first model call), within a cap.
    use crate::os::reading::{open_regular, read_within};
    let why = |error: crate::os::reading::ReadError| {
        format!(
            "cannot read the key file: {} {}",
            path.display(),
            error.reason(path, KEY_FILE_CAP)
        )
    };
    let (file, size) = open_regular(path).map_err(why)?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let meta = file
            .metadata()
            .map_err(|err| format!("cannot read the key file {}: {err}", path.display()))?;
        if meta.permissions().mode() & 0o077 != 0 {
            return Err(format!(
                "the key file {} can be read by others; run chmod 600 on it",
                path.display()
            ));
        }
    }
    let bytes = read_within(file, size, KEY_FILE_CAP).map_err(why)?;
    let key = String::from_utf8(bytes)
        .map_err(|_| format!("the key file {} is not UTF-8 text", path.display()))?;
    Ok(key.trim().to_string())
}

/// Writes the file through a temporary file and a rename, so a crash never
/// leaves half a config behind.
pub fn save(path: &Path, config: &Config) -> Result<(), String> {
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent)
            .map_err(|err| format!("cannot create {}: {err}", parent.display()))?;
    }
    let text = serde_json::to_string_pretty(config).map_err(|err| err.to_string())?;
    let temporary = path.with_extension(format!("json.{}.tmp", std::process::id()));
    std::fs::write(&temporary, format!("{text}\n"))
        .map_err(|err| format!("cannot write {}: {err}", temporary.display()))?;
    std::fs::rename(&temporary, path).map_err(|err| {
        let _ = std::fs::remove_file(&temporary);
        format!("cannot write {}: {err}", path.display())
    })
}

#[cfg(test)]
mod tests {

    #[test]
    fn a_provider_typo_in_the_model_is_named() {
        let providers = vec!["openai".to_string(), "anthropic".to_string()];
        assert!(check_model_provider("openai/gpt-4.1", &providers).is_ok());
        assert!(check_model_provider("gpt-4.1", &providers).is_ok());
        // A bare id with a slash of its own (OpenRouter's) passes.
        assert!(check_model_provider("meta-llama/llama-3.1-8b", &providers).is_ok());
        let error = check_model_provider("opnai/gpt-4.1", &providers).unwrap_err();
        assert!(
            error.contains("did you mean \"openai\"") && error.contains("anthropic"),
            "{error}"
        );
        assert!(check_model_provider("Anthropic/claude", &providers).is_err());
    }

    use super::*;

    #[test]
    fn a_comment_is_named_as_such() {
        let path = Path::new("config.json");
        for text in [
            "{\n  // my providers\n  \"providers\": {}\n}",
            "{\"providers\": {} // trailing\n}",
            "/* all */ {}",
            "{\n  \"providers\": {}, /* x */\n  \"models\": {}\n}",
        ] {
            let error = Config::parse(text, path).unwrap_err();
            assert!(
                matches!(error.kind(), ConfigErrorKind::Syntax { line, .. } if line >= 1),
                "{error:?}"
            );
            let error = error.to_string();
            assert!(
                error.contains("comments are not allowed"),
                "{text:?}: {error}"
            );
            assert!(error.starts_with("config.json:"), "{error}");
        }
        let error = Config::parse("{\"providers\": 3}", path).unwrap_err();
        assert_eq!(
            error.kind(),
            ConfigErrorKind::InvalidValue { at: Some((1, 15)) }
        );
        assert!(!error.to_string().contains("comments"), "{error}");
    }

    #[test]
    fn parses_a_full_file() {
        let text = r#"{
            "providers": {"openai": {"kind": "openai", "api_key_env": "MY_KEY"},
                          "local": {"kind": "openai", "base_url": "http://localhost:11434/v1", "requires_key": false}},
            "models": {"openai/gpt-x": {"context_window": 128000, "price": {"input": 1.0, "output": 4.0}, "reasoning": true, "efforts": ["low", "high"]},
                       "local/qwen3:8b": {}},
            "defaults": {"model": "local/qwen3:8b", "approval": "auto"}
        }"#;
        let config = Config::parse(text, Path::new("c.json")).unwrap();
        assert_eq!(
            config.models["openai/gpt-x"]
                .price
                .as_ref()
                .unwrap()
                .currency,
            "USD"
        );
        assert_eq!(config.defaults.approval, Some(Policy::Auto));
        assert!(config.usable("local"));
    }

    #[test]
    fn errors_name_the_file_line_and_reason() {
        let err = Config::parse(
            "{\n  \"providers\": {\n    \"x\": {\"kind\": \"nope\"}\n  }\n}",
            Path::new("/c/config.json"),
        )
        .unwrap_err()
        .to_string();
        assert!(err.starts_with("/c/config.json:3:"), "{err}");
        assert!(err.contains("nope"), "{err}");
        let err =
            Config::parse("{\"models\": {\"ghost/m\": {}}}", Path::new("c.json")).unwrap_err();
        assert_eq!(err.kind(), ConfigErrorKind::InvalidValue { at: None });
        let err = err.to_string();
        assert!(err.contains("ghost"), "{err}");
        let err = Config::parse("{\"modles\": {}}", Path::new("c.json"))
            .unwrap_err()
            .to_string();
        assert!(err.contains("modles"), "{err}");
    }

    #[test]
    fn the_profile_is_lean_or_full() {
        let config = Config::parse("{\"profile\": \"lean\"}", Path::new("c.json")).unwrap();
        assert_eq!(config.profile, Some(crate::modes::Profile::Lean));
        let err = Config::parse("{\"profile\": \"tiny\"}", Path::new("c.json"))
            .unwrap_err()
            .to_string();
        assert!(
            err.starts_with("c.json:1:") && err.contains("tiny") && err.contains("lean"),
            "{err}"
        );
    }

    #[test]
    fn rules_read_in_one_format_with_the_other_names() {
        use crate::policy::rules::{Decision, Rule, ToolClass};
        let text = r#"{"permissions": {
            "rules": [
                {"tool": "run_command", "match": "touch build-*", "action": "deny"},
                {"tool": "edit", "path": "src/**", "decision": "allow"}
            ],
            "projects": {"/p": {"rules": [{"tool": "read", "match": "/etc/**", "action": "ask"}]}}
        }}"#;
        let config = Config::parse(text, Path::new("c.json")).unwrap();
        assert_eq!(
            config.permissions.rules,
            [
                Rule::command("touch build-*", Decision::Deny),
                Rule::path(ToolClass::Edit, "src/**", Decision::Allow),
            ]
        );
        assert_eq!(
            config.permissions.projects["/p"].rules,
            [Rule::path(ToolClass::Read, "/etc/**", Decision::Ask)]
        );
        // Saved with the first names.
        let saved = serde_json::to_value(&config.permissions.rules[0]).unwrap();
        assert_eq!(saved["command"], "touch build-*");
        assert_eq!(saved["decision"], "deny");
        for (rule, expected) in [
            (
                r#"{"tool": "run_command", "command": "rm", "decision": "deny", "action": "allow"}"#,
                "\"action\": is another name for \"decision\"",
            ),
            (
                r#"{"tool": "run_command", "command": "rm", "when": "always", "decision": "deny"}"#,
                "\"when\": is not a field of a rule",
            ),
            (
                r#"{"tool": "run_command", "command": "rm", "decision": "never"}"#,
                "\"decision\": takes allow, ask or deny",
            ),
        ] {
            let text = format!("{{\"permissions\": {{\"rules\": [\n{rule}]}}}}");
            let err = Config::parse(&text, Path::new("c.json"))
                .unwrap_err()
                .to_string();
            // The rule is on line 2.
            assert!(
                err.starts_with("c.json:2:") && err.contains(expected),
                "{err}"
            );
        }
        // A rule of the right shape that fails the check is named by its
        // place.
        let text = r#"{"permissions": {"rules": [{"tool": "run_command", "command": "ls ?", "decision": "deny"}]}}"#;
        let err = Config::parse(text, Path::new("c.json"))
            .unwrap_err()
            .to_string();
        assert!(
            err.starts_with("c.json: permissions.rules[0]: \"command\" \"ls ?\""),
            "{err}"
        );
    }

    #[test]
    #[cfg_attr(windows, ignore = "Unix file modes")]
    fn key_files_must_be_private() {
        use crate::os::testing::set_mode;
        let dir = std::env::temp_dir().join(format!("spindle-key-{}", crate::util::random_hex()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("key");
        std::fs::write(&path, "sk-secret\n").unwrap();
        set_mode(&path, 0o644).unwrap();
        assert!(read_key_file(&path).unwrap_err().contains("chmod 600"));
        set_mode(&path, 0o600).unwrap();
        assert_eq!(read_key_file(&path).unwrap(), "sk-secret");
        // A FIFO, a huge file: refused by name, never waited on.
        let fifo = dir.join("fifo");
        let made = std::process::Command::new("mkfifo").arg(&fifo).status();
        assert!(made.is_ok_and(|s| s.success()), "mkfifo");
        let said = read_key_file(&fifo).unwrap_err();
        assert!(
            said.ends_with("fifo is a FIFO, not a regular file"),
            "{said}"
        );
        let said = read_text(&fifo).unwrap_err();
        assert_eq!(said.kind(), ConfigErrorKind::Unreadable);
        let said = said.to_string();
        assert!(
            said.ends_with("fifo is a FIFO, not a regular file"),
            "{said}"
        );
        std::fs::write(&path, vec![b'k'; KEY_FILE_CAP as usize + 1]).unwrap();
        let said = read_key_file(&path).unwrap_err();
        assert!(said.ends_with("key is larger than 64 KiB"), "{said}");
        assert_eq!(read_text(&dir.join("none")), Ok(None));
        let missing = Config::load(Some(&dir.join("none"))).unwrap_err();
        assert_eq!(missing.kind(), ConfigErrorKind::NotFound);
        assert!(
            missing.to_string().ends_with("none: no such file"),
            "{missing}"
        );
        std::fs::remove_dir_all(dir).unwrap();
    }
}

//! `spindle setup`: adds a model provider to the config file — asking on a
//! terminal, or entirely from flags — after testing it with one small
//! request. A config file that cannot be parsed is never overwritten.

use crate::cancel::CancelToken;
use crate::config::{Config, ModelConfig, ProviderConfig, ProviderKind};
use crate::provider::http::Timeouts;
use crate::provider::{Message, ModelRequest, Provider, Sink};
use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};

/// What the flags said; anything missing is asked for (on a terminal) or
/// defaulted.
#[derive(Debug, Default, Clone)]
pub struct SetupArgs {
    pub name: Option<String>,
    pub kind: Option<ProviderKind>,
    pub base_url: Option<String>,
    pub key_env: Option<String>,
    pub key_file: Option<PathBuf>,
    /// A server that needs no key (a local one).
    pub no_key: bool,
    /// The key itself, read from standard input and kept by Spindle in a
    /// private file beside the config (`keys/NAME.key`, mode 600), which
    /// `logout` forgets.
    pub key_stdin: bool,
    pub model: Option<String>,
    pub config: Option<PathBuf>,
    /// Skip the test request.
    pub no_test: bool,
}

pub fn parse_kind(text: &str) -> Option<ProviderKind> {
    match text {
        "openai" | "chat" => Some(ProviderKind::Openai),
        "anthropic" => Some(ProviderKind::Anthropic),
        "responses" => Some(ProviderKind::Responses),
        _ => None,
    }
}

fn kind_name(kind: ProviderKind) -> &'static str {
    match kind {
        ProviderKind::Openai => "openai",
        ProviderKind::Anthropic => "anthropic",
        ProviderKind::Responses => "responses",
    }
}

fn default_model(kind: ProviderKind) -> &'static str {
    match kind {
        ProviderKind::Openai => "gpt-4.1-mini",
        ProviderKind::Anthropic => "claude-sonnet-4-5",
        ProviderKind::Responses => "gpt-5-mini",
    }
}

fn default_key_env(kind: ProviderKind) -> &'static str {
    match kind {
        ProviderKind::Anthropic => "ANTHROPIC_API_KEY",
        _ => "OPENAI_API_KEY",
    }
}

/// Asks one question on the terminal; an empty answer takes the default.
fn ask(
    input: &mut dyn BufRead,
    output: &mut dyn Write,
    question: &str,
    default: &str,
) -> Result<String, String> {
    if default.is_empty() {
        let _ = write!(output, "{question}: ");
    } else {
        let _ = write!(output, "{question} [{default}]: ");
    }
    let _ = output.flush();
    let mut line = String::new();
    let read = input
        .read_line(&mut line)
        .map_err(|err| format!("cannot read the answer: {err}"))?;
    if read == 0 {
        return Err("setup was aborted (end of input)".into());
    }
    let answer = line.trim();
    Ok(if answer.is_empty() {
        default.to_string()
    } else {
        answer.to_string()
    })
}

/// Runs the setup. Returns the summary to print; errors are messages for
/// stderr (exit code 1).
pub fn run(
    mut args: SetupArgs,
    interactive: bool,
    input: &mut dyn BufRead,
    output: &mut dyn Write,
) -> Result<String, String> {
    let path = args
        .config
        .clone()
        .unwrap_or_else(crate::config::default_path);
    // Read the existing file first: a file we cannot parse stops us
    // before any question.
    let mut config = match std::fs::read_to_string(&path) {
        Ok(text) => Config::parse(&text, &path).map_err(|err| {
            format!("{err}\nFix or move the file first; setup does not overwrite a file it cannot read.")
        })?,
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => Config::default(),
        Err(err) => return Err(format!("cannot read {}: {err}", path.display())),
    };
    if interactive {
        let _ = writeln!(
            output,
            "Spindle setup — adds a model provider to {}",
            path.display()
        );
        if args.kind.is_none() {
            let answer = ask(input, output, "Provider kind: openai (Chat Completions, also Ollama, llama.cpp, vLLM, OpenRouter…), anthropic, responses", "openai")?;
            args.kind = Some(
                parse_kind(&answer).ok_or_else(|| format!("unknown provider kind {answer:?}"))?,
            );
        }
        let kind = args.kind.unwrap_or(ProviderKind::Openai);
        if args.base_url.is_none() {
            let answer = ask(input, output, "Base URL", kind.default_base_url())?;
            args.base_url = Some(answer);
        }
        if args.key_env.is_none() && args.key_file.is_none() && !args.no_key && !args.key_stdin {
            let answer = ask(
                input,
                output,
                "Environment variable holding the API key (- for none)",
                default_key_env(kind),
            )?;
            if answer == "-" {
                args.no_key = true;
            } else {
                args.key_env = Some(answer);
            }
        }
    }
    let kind = args.kind.ok_or(
        "--kind is required when setup does not run on a terminal (openai, anthropic or responses)",
    )?;
    let base_url = args
        .base_url
        .clone()
        .filter(|url| !url.trim().is_empty())
        .unwrap_or_else(|| kind.default_base_url().to_string());
    if !base_url.starts_with("http://") && !base_url.starts_with("https://") {
        return Err(format!(
            "the base URL must start with http:// or https://, got {base_url:?}"
        ));
    }
    let name = args.name.clone().unwrap_or_else(|| match kind {
        ProviderKind::Openai if base_url != kind.default_base_url() => "local".into(),
        other => kind_name(other).into(),
    });
    if name.is_empty() || name.contains('/') {
        return Err(format!(
            "the provider name {name:?} must be non-empty and without '/'"
        ));
    }
    // A key given on stdin: kept in Spindle's own key folder.
    let mut written_key = None;
    // Removed on every way out but success.
    let mut leftover = Leftover(None);
    if args.key_stdin {
        if args.key_env.is_some() || args.key_file.is_some() || args.no_key {
            return Err("--key-stdin takes the place of --key-env, --key-file and --no-key".into());
        }
        if interactive {
            let _ = write!(output, "API key: ");
            let _ = output.flush();
        }
        let mut line = String::new();
        input
            .read_line(&mut line)
            .map_err(|err| format!("cannot read the key: {err}"))?;
        let key = line.trim();
        if key.is_empty() || key.len() > 4096 || key.chars().any(char::is_whitespace) {
            return Err(
                "--key-stdin reads one line holding the API key, and it was empty or not a key"
                    .into(),
            );
        }
        // Written beside the key it replaces, and put in its place only
        // once the test and the config write succeed.
        let file = crate::config::managed_keys_dir(&path).join(format!("{name}.key"));
        let fresh = file.with_extension(format!("key.new-{}", crate::util::random_hex()));
        write_private(&fresh, key)?;
        args.key_file = Some(fresh.clone());
        leftover.arm(fresh.clone());
        written_key = Some((fresh, file));
    }
    let key_env = if args.no_key || args.key_file.is_some() {
        args.key_env.clone()
    } else {
        Some(
            args.key_env
                .clone()
                .unwrap_or_else(|| default_key_env(kind).into()),
        )
    };
    let provider = ProviderConfig {
        kind,
        base_url: Some(base_url.clone()),
        api_key_env: key_env.clone(),
        api_key_file: args.key_file.clone(),
        requires_key: !args.no_key,
    };
    config.providers.insert(name.clone(), provider);
    let model = match args.model.clone() {
        Some(model) => model,
        None => {
            let suggested = suggested_model(&config, &name, &base_url);
            if interactive {
                if let Err(why) = &suggested {
                    let _ = writeln!(output, "({why})");
                }
                let default = suggested.unwrap_or_default();
                ask(input, output, "Model", &default)?
            } else {
                suggested?
            }
        }
    };
    if model.trim().is_empty() {
        return Err("a model is needed: name one with --model".into());
    }
    let model = model
        .strip_prefix(&format!("{name}/"))
        .unwrap_or(&model)
        .to_string();
    let id = format!("{name}/{model}");
    config
        .models
        .entry(id.clone())
        .or_insert_with(ModelConfig::default);
    config.defaults.model = Some(id.clone());

    let mut summary = String::new();
    if !args.no_test {
        let answer = test_connection(&config, &name, &model).inspect_err(|_| {
            // Nothing stays behind when the test fails, and an earlier key
            // is untouched.
            if let Some((fresh, _)) = &written_key {
                let _ = std::fs::remove_file(fresh);
            }
        })?;
        summary.push_str(&format!("The model answered: {answer}\n"));
    }
    if let Some((fresh, file)) = &written_key {
        if let Some(provider) = config.providers.get_mut(&name) {
            provider.api_key_file = Some(file.clone());
        }
        if let Err(error) = write_config(&path, &config) {
            let _ = std::fs::remove_file(fresh);
            return Err(error);
        }
        std::fs::rename(fresh, file)
            .map_err(|err| format!("cannot put the key in {}: {err}", file.display()))?;
        leftover.disarm();
    } else {
        write_config(&path, &config)?;
    }
    summary.push_str(&format!(
        "Wrote {}: provider {name} ({}, {base_url}{}), default model {id}.\n",
        path.display(),
        kind_name(kind),
        match &key_env {
            Some(var) => format!(", key from ${var}"),
            None if args.key_file.is_some() => ", key from a file".into(),
            None => ", no key".into(),
        }
    ));
    Ok(summary)
}

/// The model to suggest when none was named: the kind's usual model on
/// its official endpoint; on any other server, the first chat model that
/// server lists (an official model name means nothing to a gateway).
fn suggested_model(config: &Config, name: &str, base_url: &str) -> Result<String, String> {
    let kind = config.providers[name].kind;
    if base_url.trim_end_matches('/') == kind.default_base_url() {
        return Ok(default_model(kind).into());
    }
    let key = config.api_key(name).ok().flatten();
    let listed = crate::provider::models::list(kind, base_url, key.as_deref()).map_err(|why| {
        format!("the server did not list its models: {why}; name one with --model")
    })?;
    listed
        .into_iter()
        .next()
        .map(|model| model.id)
        .ok_or_else(|| "the server lists no chat model; name one with --model".into())
}

struct Collect(String);

impl Sink for Collect {
    fn text(&mut self, delta: &str) {
        self.0.push_str(delta);
    }
    fn thought(&mut self, _: &str) {}
    fn notice(&mut self, _: &str) {}
}

/// One small request through the provider, exactly as a session would
/// make it.
fn test_connection(config: &Config, name: &str, model: &str) -> Result<String, String> {
    let provider_config = &config.providers[name];
    let api_key = config.api_key(name)?;
    if provider_config.requires_key && api_key.is_none() {
        return Err(format!(
            "the API key is missing: set {} (or run setup with --no-test to write the file anyway)",
            provider_config
                .api_key_env
                .as_deref()
                .unwrap_or("the key variable")
        ));
    }
    let base_url = provider_config
        .base_url
        .clone()
        .unwrap_or_else(|| provider_config.kind.default_base_url().to_string());
    let timeouts = Timeouts {
        attempts: 1,
        ..Timeouts::default()
    };
    let provider: Box<dyn Provider> = match provider_config.kind {
        ProviderKind::Openai => Box::new(crate::provider::openai::ChatCompletions {
            base_url,
            api_key,
            timeouts,
        }),
        ProviderKind::Anthropic => Box::new(crate::provider::anthropic::Messages {
            base_url,
            api_key,
            timeouts,
        }),
        ProviderKind::Responses => Box::new(crate::provider::responses::Responses {
            base_url,
            api_key,
            timeouts,
        }),
    };
    let messages = [Message::user("Reply with the single word OK.")];
    let request = ModelRequest {
        session_id: "setup",
        model,
        system: "You are a connection test. Reply with the single word OK.",
        messages: &messages,
        tools: &[],
        effort: None,
        max_output_tokens: Some(16),
    };
    let mut sink = Collect(String::new());
    match provider.stream(&request, &mut sink, &CancelToken::new()) {
        Ok(_) => Ok(if sink.0.trim().is_empty() {
            "(an empty answer, but the connection works)".into()
        } else {
            sink.0.trim().chars().take(80).collect()
        }),
        Err(crate::provider::StreamError::Failed(error)) => Err(format!(
            "the test request failed: {} ({}); nothing was written",
            error.message, error.code
        )),
        Err(crate::provider::StreamError::Cancelled) => {
            Err("the test request was cancelled".into())
        }
    }
}

fn write_config(path: &Path, config: &Config) -> Result<(), String> {
    crate::config::save(path, config)
}

/// A file to remove unless the setup gets to the end.
struct Leftover(Option<PathBuf>);

impl Leftover {
    fn arm(&mut self, path: PathBuf) {
        self.0 = Some(path);
    }

    fn disarm(&mut self) {
        self.0 = None;
    }
}

impl Drop for Leftover {
    fn drop(&mut self) {
        if let Some(path) = self.0.take() {
            let _ = std::fs::remove_file(path);
        }
    }
}

/// Writes a key file readable by its owner only (created so from the
/// start, never world-readable for a moment).
fn write_private(file: &Path, key: &str) -> Result<(), String> {
    use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
    let dir = file.parent().ok_or("the key folder has no parent")?;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(|err| format!("cannot create {}: {err}", dir.display()))?;
    let temporary = file.with_extension(format!("tmp-{}", crate::util::random_hex()));
    let mut out = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&temporary)
        .map_err(|err| format!("cannot write {}: {err}", temporary.display()))?;
    out.write_all(format!("{key}\n").as_bytes())
        .and_then(|()| out.sync_all())
        .map_err(|err| format!("cannot write {}: {err}", temporary.display()))?;
    std::fs::rename(&temporary, file).map_err(|err| {
        let _ = std::fs::remove_file(&temporary);
        format!("cannot write {}: {err}", file.display())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp_config() -> PathBuf {
        std::env::temp_dir()
            .join(format!("spindle-setup-{}", crate::util::random_hex()))
            .join("config.json")
    }

    #[test]
    fn flags_alone_write_a_config() {
        let path = temp_config();
        let args = SetupArgs {
            kind: Some(ProviderKind::Openai),
            base_url: Some("http://127.0.0.1:9/v1".into()),
            no_key: true,
            model: Some("qwen3:8b".into()),
            config: Some(path.clone()),
            no_test: true,
            ..SetupArgs::default()
        };
        let summary = run(args, false, &mut std::io::empty(), &mut Vec::new()).unwrap();
        assert!(summary.contains("local/qwen3:8b"), "{summary}");
        let config = Config::parse(&std::fs::read_to_string(&path).unwrap(), &path).unwrap();
        assert_eq!(config.defaults.model.as_deref(), Some("local/qwen3:8b"));
        assert!(!config.providers["local"].requires_key);
    }

    #[test]
    fn answers_on_a_terminal_fill_the_gaps() {
        let path = temp_config();
        let args = SetupArgs {
            config: Some(path.clone()),
            no_test: true,
            ..SetupArgs::default()
        };
        let mut answers = std::io::Cursor::new("anthropic\n\nMY_KEY\nclaude-x\n");
        let mut shown = Vec::new();
        run(args, true, &mut answers, &mut shown).unwrap();
        let config = Config::parse(&std::fs::read_to_string(&path).unwrap(), &path).unwrap();
        assert_eq!(
            config.providers["anthropic"].api_key_env.as_deref(),
            Some("MY_KEY")
        );
        assert_eq!(config.defaults.model.as_deref(), Some("anthropic/claude-x"));
        assert!(String::from_utf8(shown).unwrap().contains("Model"));
    }

    #[test]
    fn an_unparseable_file_is_never_overwritten() {
        let path = temp_config();
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, "{ not json").unwrap();
        let args = SetupArgs {
            kind: Some(ProviderKind::Openai),
            config: Some(path.clone()),
            no_test: true,
            ..SetupArgs::default()
        };
        let err = run(args, false, &mut std::io::empty(), &mut Vec::new()).unwrap_err();
        assert!(err.contains("does not overwrite"), "{err}");
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "{ not json");
    }
}

//! `spindle setup`: adds a model provider to the config file — asking on a
//! terminal, or entirely from flags — after testing it with one small
//! request. On a terminal a failed test asks what to do (the key again,
//! another base URL, write anyway, stop); from flags it stops the setup.
//! A config file that cannot be parsed is never overwritten.

pub use super::setup_ask::parse_kind;
use super::setup_ask::{ask, ask_after_failure, ask_base_url, ask_kind, AfterFailure};
pub use super::setup_error::{SetupError, SetupErrorKind};
use super::setup_key::{read_key, write_private, Leftover};
use crate::config::{Config, ProviderConfig, ProviderKind};
use crate::provider::http::Timeouts;
use crate::provider::{Provider, Sink};
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

/// The provider's name when none is given: the kind's, or for another
/// OpenAI-compatible server `local` on this machine, else its host's.
fn default_name(kind: ProviderKind, base_url: &str) -> String {
    match kind {
        ProviderKind::Openai if base_url.trim_end_matches('/') != kind.default_base_url() => {
            super::setup_ask::name_from_url(base_url)
        }
        other => kind_name(other).into(),
    }
}

/// Whether `base_url` is the kind's own endpoint.
fn official(kind: ProviderKind, base_url: Option<&str>) -> bool {
    base_url.is_none_or(|url| url.trim_end_matches('/') == kind.default_base_url())
}

fn default_key_env(kind: ProviderKind) -> &'static str {
    match kind {
        ProviderKind::Anthropic => "ANTHROPIC_API_KEY",
        _ => "OPENAI_API_KEY",
    }
}

/// Runs the setup. Returns the summary to print; errors are messages for
/// stderr (exit code 1).
pub fn run(
    mut args: SetupArgs,
    interactive: bool,
    input: &mut dyn BufRead,
    output: &mut dyn Write,
) -> Result<String, SetupError> {
    let path = args
        .config
        .clone()
        .unwrap_or_else(crate::config::default_path);
    let mut config = read_config(&path)?;
    if interactive {
        let _ = writeln!(
            output,
            "Spindle setup — adds a model provider to {}",
            path.display()
        );
        ask_missing(&mut args, &config, input, output)?;
    }
    let (kind, base_url, name) = checked_provider(&args)?;
    // Removed on every way out but success.
    let mut leftover = Leftover::default();
    let mut written_key = if args.key_stdin {
        let key = keep_stdin_key(&mut args, &path, &name, interactive, input, output)?;
        leftover.arm(key.0.clone());
        Some(key)
    } else {
        None
    };
    let mut key_env = add_provider(&mut config, &args, kind, &name, &base_url);
    let (model, id) = set_default_model(
        &mut config,
        &args,
        interactive,
        &name,
        &base_url,
        input,
        output,
    )?;

    let mut summary = String::new();
    if let Some(note) = super::setup_ask::unknown_window(&config, &id, None, &path) {
        summary.push_str(&format!("Note: {note}.\n"));
    }
    while !args.no_test {
        let why = match test_connection(&config, &name, &model) {
            Ok(answer) => {
                summary.push_str(&format!(
                    "The model answered: {}\n",
                    crate::util::visible(&answer, false)
                ));
                break;
            }
            Err(why) => why,
        };
        // Without a terminal nothing stays behind when the test fails,
        // and an earlier key is untouched (the leftover goes on return).
        if !interactive {
            return Err(why.and("; nothing was written"));
        }
        let _ = writeln!(
            output,
            "  {}",
            crate::util::visible(&why.to_string(), false)
        );
        match ask_after_failure(input, output)? {
            AfterFailure::Key => {
                let line = read_key(input, output, true)?;
                let (fresh, file) = match written_key.take() {
                    Some(kept) => kept,
                    None => {
                        let file =
                            crate::config::managed_keys_dir(&path).join(format!("{name}.key"));
                        let fresh =
                            file.with_extension(format!("key.new-{}", crate::util::random_hex()));
                        (fresh, file)
                    }
                };
                write_private(&fresh, line.trim())?;
                leftover.arm(fresh.clone());
                if let Some(provider) = config.providers.get_mut(&name) {
                    provider.api_key_env = None;
                    provider.api_key_file = Some(fresh.clone());
                    provider.requires_key = true;
                }
                args.key_file = Some(fresh.clone());
                key_env = None;
                written_key = Some((fresh, file));
            }
            AfterFailure::BaseUrl => {
                let mut asked = None;
                ask_base_url(&mut asked, kind, input, output)?;
                if let Some(provider) = config.providers.get_mut(&name) {
                    provider.base_url = asked;
                }
            }
            AfterFailure::Write => {
                summary.push_str("The test request failed; the config is written anyway.\n");
                break;
            }
            AfterFailure::Stop => {
                return Err(SetupError::stopped("setup stopped; nothing was written"))
            }
        }
    }
    save(
        &path,
        &mut config,
        &name,
        written_key.as_ref(),
        &mut leftover,
    )?;
    let default = config.defaults.model.clone().unwrap_or_default();
    let base_url = config
        .providers
        .get(&name)
        .and_then(|p| p.base_url.clone())
        .unwrap_or(base_url);
    summary.push_str(&format!(
        "Wrote {}: provider {name} ({}, {base_url}{}), {}.\n",
        path.display(),
        kind_name(kind),
        match &key_env {
            Some(var) => format!(", key from ${var}"),
            None if args.key_file.is_some() => ", key from a file".into(),
            None => ", no key".into(),
        },
        match default == id {
            true => format!("default model {id}"),
            false => format!("model {id}; the default model stays {default}"),
        }
    ));
    summary.push_str("Next: `spindle doctor` checks the whole setup; `spindle exec \"hello\"` asks the model here; editors start `spindle acp` (docs/editors.md has each editor's settings).\n");
    Ok(summary)
}

/// The config file as it is, or an empty one where none exists; a file
/// that cannot be parsed stops the setup before any question.
fn read_config(path: &Path) -> Result<Config, SetupError> {
    let text = crate::config::read_text(path).map_err(SetupError::config)?;
    match text {
        Some(text) => Config::parse(&text, path).map_err(|err| {
            SetupError::config(format!("{err}\nFix or move the file first; setup does not overwrite a file it cannot read."))
        }),
        None => Ok(Config::default()),
    }
}

/// On a terminal: asks for what the flags left out, in order — kind,
/// base URL, name, where the key comes from.
fn ask_missing(
    args: &mut SetupArgs,
    config: &Config,
    input: &mut dyn BufRead,
    output: &mut dyn Write,
) -> Result<(), SetupError> {
    ask_kind(&mut args.kind, &mut args.base_url, input, output)?;
    let kind = args.kind.unwrap_or(ProviderKind::Openai);
    ask_base_url(&mut args.base_url, kind, input, output)?;
    if kind == ProviderKind::Openai && !official(kind, args.base_url.as_deref()) {
        let base = args.base_url.as_deref().unwrap_or_default();
        super::setup_ask::ask_remote_name(&mut args.name, base, input, output)?;
    }
    ask_name(args, config, kind, input, output)?;
    if args.key_env.is_none() && args.key_file.is_none() && !args.no_key && !args.key_stdin {
        ask_key_source(args, kind, input, output)?;
    }
    Ok(())
}

/// Settles the provider's name; one that exists is replaced only when the
/// user says so.
fn ask_name(
    args: &mut SetupArgs,
    config: &Config,
    kind: ProviderKind,
    input: &mut dyn BufRead,
    output: &mut dyn Write,
) -> Result<(), SetupError> {
    let base = args.base_url.clone().unwrap_or_default();
    loop {
        let default = args
            .name
            .clone()
            .unwrap_or_else(|| default_name(kind, &base));
        let Some(existing) = config.providers.get(&default) else {
            args.name = Some(default);
            return Ok(());
        };
        let _ = writeln!(
            output,
            "  A provider named {default:?} exists ({}).",
            existing
                .base_url
                .as_deref()
                .unwrap_or(existing.kind.default_base_url())
        );
        let mut answer = ask(input, output, "Replace it (y), or give another name", "y")?;
        if answer.eq_ignore_ascii_case("y") || answer.eq_ignore_ascii_case("yes") {
            args.name = Some(default);
            return Ok(());
        }
        if answer.eq_ignore_ascii_case("n") || answer.eq_ignore_ascii_case("no") {
            answer = ask(input, output, "Another name", &format!("{default}2"))?;
        }
        if answer.is_empty() || answer.contains('/') {
            let _ = writeln!(output, "  a name is non-empty and without '/'");
            continue;
        }
        args.name = Some(answer);
    }
}

/// Asks where the API key comes from: pasted now, a variable, or none.
fn ask_key_source(
    args: &mut SetupArgs,
    kind: ProviderKind,
    input: &mut dyn BufRead,
    output: &mut dyn Write,
) -> Result<(), SetupError> {
    let variable = default_key_env(kind);
    let default = if crate::credentials::var(variable).is_some() {
        "2"
    } else {
        "1"
    };
    loop {
        let answer = ask(
            input,
            output,
            &format!("The API key: 1) paste it now (kept in a private file), 2) from an environment variable (like {variable}), 3) the server needs none"),
            default,
        )?;
        match answer.as_str() {
            "1" => args.key_stdin = true,
            "2" => {
                let name = ask(input, output, "The variable", variable)?;
                args.key_env = Some(name);
            }
            "3" | "-" => args.no_key = true,
            _ => {
                let _ = writeln!(output, "  answer 1, 2 or 3");
                continue;
            }
        }
        return Ok(());
    }
}

/// The kind, base URL and name the provider gets, each checked.
fn checked_provider(args: &SetupArgs) -> Result<(ProviderKind, String, String), SetupError> {
    let kind = args.kind.ok_or_else(|| {
        SetupError::arguments("--kind is required when setup does not run on a terminal (openai, anthropic or responses)")
    })?;
    let base_url = args
        .base_url
        .clone()
        .filter(|url| !url.trim().is_empty())
        .unwrap_or_else(|| kind.default_base_url().to_string());
    if !base_url.starts_with("http://") && !base_url.starts_with("https://") {
        return Err(SetupError::arguments(format!(
            "the base URL must start with http:// or https://, got {base_url:?}"
        )));
    }
    let name = args
        .name
        .clone()
        .unwrap_or_else(|| default_name(kind, &base_url));
    if name.is_empty() || name.contains('/') {
        return Err(SetupError::arguments(format!(
            "the provider name {name:?} must be non-empty and without '/'"
        )));
    }
    Ok((kind, base_url, name))
}

/// Reads the key from stdin into a fresh private file in Spindle's own key
/// folder; returns that file and the one it will replace.
fn keep_stdin_key(
    args: &mut SetupArgs,
    path: &Path,
    name: &str,
    interactive: bool,
    input: &mut dyn BufRead,
    output: &mut dyn Write,
) -> Result<(PathBuf, PathBuf), SetupError> {
    if args.key_env.is_some() || args.key_file.is_some() || args.no_key {
        return Err(SetupError::arguments(
            "--key-stdin takes the place of --key-env, --key-file and --no-key",
        ));
    }
    let line = read_key(input, output, interactive)?;
    let key = line.trim();
    // Written beside the key it replaces, and put in its place only
    // once the test and the config write succeed.
    let file = crate::config::managed_keys_dir(path).join(format!("{name}.key"));
    let fresh = file.with_extension(format!("key.new-{}", crate::util::random_hex()));
    write_private(&fresh, key)?;
    args.key_file = Some(fresh.clone());
    Ok((fresh, file))
}

/// Puts the provider in the config; returns the variable its key is read
/// from, if any.
fn add_provider(
    config: &mut Config,
    args: &SetupArgs,
    kind: ProviderKind,
    name: &str,
    base_url: &str,
) -> Option<String> {
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
        base_url: Some(base_url.to_string()),
        api_key_env: key_env.clone(),
        api_key_file: args.key_file.clone(),
        requires_key: !args.no_key,
        gateway: false,
    };
    config.providers.insert(name.to_string(), provider);
    key_env
}

/// Picks the model (the flag's, asked, or suggested) and makes it the
/// default; returns the model and its `provider/model` id.
fn set_default_model(
    config: &mut Config,
    args: &SetupArgs,
    interactive: bool,
    name: &str,
    base_url: &str,
    input: &mut dyn BufRead,
    output: &mut dyn Write,
) -> Result<(String, String), SetupError> {
    // What the server serves (not asked of an official endpoint).
    let mut listed = listed_models(config, name, base_url);
    // A URL without /v1 that lists nothing: offered with /v1 when that
    // one answers.
    let with_v1 = format!("{}/v1", base_url.trim_end_matches('/'));
    if interactive && listed.is_err() && !base_url.trim_end_matches('/').ends_with("/v1") {
        let there = listed_models(config, name, &with_v1);
        if there.is_ok() {
            let answer = ask(
                input,
                output,
                &format!("{base_url} lists no models, {with_v1} does; use {with_v1}? [Y/n]"),
                "y",
            )?;
            if matches!(answer.to_ascii_lowercase().as_str(), "y" | "yes") {
                if let Some(provider) = config.providers.get_mut(name) {
                    provider.base_url = Some(with_v1.clone());
                }
                listed = there;
            }
        }
    }
    let base_url = config.providers[name]
        .base_url
        .clone()
        .unwrap_or_else(|| base_url.to_string());
    let base_url = base_url.as_str();
    let model = match args.model.clone() {
        Some(model) => model,
        None if interactive => choose_model(input, output, config, name, base_url, &listed)?,
        None => suggested_model(config, name, base_url)?,
    };
    if model.trim().is_empty() {
        return Err(SetupError::arguments(
            "a model is needed: name one with --model",
        ));
    }
    let model = model
        .strip_prefix(&format!("{name}/"))
        .unwrap_or(&model)
        .to_string();
    let id = format!("{name}/{model}");
    let entry = config.models.entry(id.clone()).or_default();
    // The window the server reports, kept: the meter and compaction use it.
    if entry.context_window.is_none() {
        entry.context_window = listed
            .as_ref()
            .ok()
            .and_then(|list| list.iter().find(|m| m.id == model))
            .and_then(|m| m.context_window);
    }
    // Another default already: it changes only when the user says so
    // (or named the model with --model).
    let earlier = config
        .defaults
        .model
        .clone()
        .filter(|earlier| *earlier != id && config.models.contains_key(earlier));
    let replace = match &earlier {
        None => true,
        Some(_) if args.model.is_some() => true,
        Some(earlier) if interactive => {
            let answer = ask(
                input,
                output,
                &format!("Make {id} the default model instead of {earlier}? [y/N]"),
                "n",
            )?;
            matches!(answer.to_ascii_lowercase().as_str(), "y" | "yes")
        }
        Some(_) => false,
    };
    if replace {
        config.defaults.model = Some(id.clone());
    }
    Ok((model, id))
}

/// Writes the config and, for a key given on stdin, puts the fresh key
/// file in its place.
fn save(
    path: &Path,
    config: &mut Config,
    name: &str,
    written_key: Option<&(PathBuf, PathBuf)>,
    leftover: &mut Leftover,
) -> Result<(), SetupError> {
    let Some((fresh, file)) = written_key else {
        return write_config(path, config);
    };
    if let Some(provider) = config.providers.get_mut(name) {
        provider.api_key_file = Some(file.clone());
    }
    if let Err(error) = write_config(path, config) {
        let _ = std::fs::remove_file(fresh);
        return Err(error);
    }
    std::fs::rename(fresh, file).map_err(|err| {
        SetupError::key(format!("cannot put the key in {}: {err}", file.display()))
    })?;
    leftover.disarm();
    Ok(())
}

/// The chat models a server lists (not asked of an official endpoint:
/// `Ok(empty)`); the error says what to check.
fn listed_models(
    config: &Config,
    name: &str,
    base_url: &str,
) -> Result<Vec<crate::provider::models::Listed>, SetupError> {
    let kind = config.providers[name].kind;
    if base_url.trim_end_matches('/') == kind.default_base_url() {
        return Ok(Vec::new());
    }
    let key = config.api_key(name).ok().flatten();
    crate::provider::models::list(kind, base_url, key.as_deref(), &config.trust).map_err(|why| {
        use crate::provider::models::ListErrorKind;
        // A page that is not there, or a web page instead of the API.
        let hint = match why.kind {
            ListErrorKind::Status(404) | ListErrorKind::NotJson => " (does the URL need /v1?)",
            _ => "",
        };
        SetupError::server(format!("the server did not list its models: {why}{hint}"))
    })
}

/// On a terminal: the server's models as a numbered list; a number or a
/// name; a name the server does not list is asked again, with the
/// closest one it does.
fn choose_model(
    input: &mut dyn BufRead,
    output: &mut dyn Write,
    config: &Config,
    name: &str,
    base_url: &str,
    listed: &Result<Vec<crate::provider::models::Listed>, SetupError>,
) -> Result<String, SetupError> {
    let models: Vec<String> = match listed {
        Ok(list) => list.iter().map(|m| m.id.clone()).collect(),
        Err(why) => {
            let _ = writeln!(
                output,
                "({})",
                crate::util::visible(&why.to_string(), false)
            );
            Vec::new()
        }
    };
    if models.is_empty() {
        let default = suggested_model(config, name, base_url).unwrap_or_else(|why| {
            log::info!("setup: no model to suggest: {why}");
            String::new()
        });
        return ask(input, output, "Model", &default);
    }
    for (index, model) in models.iter().take(30).enumerate() {
        // The server's names: written out, never obeyed.
        let model = crate::util::visible(model, false);
        let _ = writeln!(output, "  {:>2}) {model}", index + 1);
    }
    if models.len() > 30 {
        let _ = writeln!(output, "  … and {} more (type a name)", models.len() - 30);
    }
    loop {
        let answer = ask(input, output, "Model (a number or a name)", "1")?;
        if let Ok(number) = answer.parse::<usize>() {
            match models.get(number.wrapping_sub(1)) {
                Some(model) => return Ok(model.clone()),
                None => {
                    let _ = writeln!(output, "  choose 1 to {}", models.len());
                    continue;
                }
            }
        }
        let wanted = answer.strip_prefix(&format!("{name}/")).unwrap_or(&answer);
        if models.iter().any(|m| m == wanted) {
            return Ok(wanted.to_string());
        }
        let closest = models
            .iter()
            .min_by_key(|m| crate::config::edit_distance(m, wanted))
            .cloned()
            .unwrap_or_default();
        let _ = writeln!(
            output,
            "  the server does not list {wanted:?}; did you mean {closest:?}?"
        );
    }
}

/// The model to suggest when none was named: the kind's usual model on
/// its official endpoint; on any other server, the listed model the
/// agent's own default rule picks (an official model name means nothing
/// to a gateway).
fn suggested_model(config: &Config, name: &str, base_url: &str) -> Result<String, SetupError> {
    let kind = config.providers[name].kind;
    if base_url.trim_end_matches('/') == kind.default_base_url() {
        return Ok(default_model(kind).into());
    }
    let key = config.api_key(name).ok().flatten();
    let listed = crate::provider::models::list(kind, base_url, key.as_deref(), &config.trust)
        .map_err(|why| {
            SetupError::server(format!(
                "the server did not list its models: {why}; name one with --model"
            ))
        })?;
    crate::provider::models::pick_default(kind, &listed)
        .map(|model| model.id.clone())
        .ok_or_else(|| {
            SetupError::server(
                "the server lists no chat model that takes tools; name one with --model",
            )
        })
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
fn test_connection(config: &Config, name: &str, model: &str) -> Result<String, SetupError> {
    let provider_config = &config.providers[name];
    let api_key = config.api_key(name).map_err(SetupError::key)?;
    if provider_config.requires_key && api_key.is_none() {
        return Err(SetupError::key(format!(
            "the API key is missing: set {} (or run setup with --no-test to write the file anyway)",
            provider_config
                .api_key_env
                .as_deref()
                .unwrap_or("the key variable")
        )));
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
            trust: config.trust.clone(),
            tokenizer: Default::default(),
        }),
        ProviderKind::Anthropic => Box::new(crate::provider::anthropic::Messages {
            base_url,
            api_key,
            timeouts,
            trust: config.trust.clone(),
        }),
        ProviderKind::Responses => Box::new(crate::provider::responses::Responses {
            base_url,
            api_key,
            timeouts,
            trust: config.trust.clone(),
        }),
    };
    // One tool, as every session sends: a server that refuses tools
    // (llama.cpp without --jinja) fails here, with what to do.
    let mut sink = Collect(String::new());
    match crate::provider::probe::ask(provider.as_ref(), model, &mut sink) {
        Ok(_) => Ok(if sink.0.trim().is_empty() {
            "(an empty answer, but the connection works)".into()
        } else {
            sink.0.trim().chars().take(80).collect()
        }),
        Err(crate::provider::StreamError::Failed(error)) => Err(SetupError::server(format!(
            "the test request failed: {} ({})",
            error.message, error.code
        ))),
        Err(crate::provider::StreamError::Cancelled) => {
            Err(SetupError::stopped("the test request was cancelled"))
        }
    }
}

fn write_config(path: &Path, config: &Config) -> Result<(), SetupError> {
    crate::config::save(path, config).map_err(SetupError::config)
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
    fn the_wizard_asks_again_after_a_bad_answer_and_keeps_a_pasted_key() {
        let path = temp_config();
        let answers =
            "opnai\nopenai\nlocalhost:9\nhttp://127.0.0.1:9/v1\n4\n1\nsk-pasted-key\nmy-model\n";
        let mut input = std::io::Cursor::new(answers.as_bytes().to_vec());
        let mut output = Vec::new();
        let args = SetupArgs {
            config: Some(path.clone()),
            no_test: true,
            ..SetupArgs::default()
        };
        let summary = run(args, true, &mut input, &mut output).unwrap();
        let shown = String::from_utf8_lossy(&output);
        assert!(shown.contains("\"opnai\" is not a kind"), "{shown}");
        assert!(shown.contains("starts with http://"), "{shown}");
        assert!(shown.contains("answer 1, 2 or 3"), "{shown}");
        assert!(!shown.contains("sk-pasted-key"), "the key is never shown");
        let config = Config::parse(&std::fs::read_to_string(&path).unwrap(), &path).unwrap();
        let local = &config.providers["local"];
        let key_file = local.api_key_file.clone().unwrap();
        assert!(key_file.ends_with("keys/local.key"), "{key_file:?}");
        assert_eq!(
            std::fs::read_to_string(&key_file).unwrap(),
            "sk-pasted-key\n"
        );
        assert!(summary.contains("local/my-model"), "{summary}");
        assert!(summary.contains("Next: `spindle doctor`"), "{summary}");

        // A second run with the same name asks before replacing it, and
        // before changing the default model (no, here).
        let answers = "ollama\nhttp://127.0.0.1:9/v1\nn\nsecond\n3\nother-model\n\n";
        let mut input = std::io::Cursor::new(answers.as_bytes().to_vec());
        let mut output = Vec::new();
        let args = SetupArgs {
            config: Some(path.clone()),
            no_test: true,
            ..SetupArgs::default()
        };
        run(args, true, &mut input, &mut output).unwrap();
        let shown = String::from_utf8_lossy(&output);
        assert!(
            shown.contains("A provider named \"local\" exists"),
            "{shown}"
        );
        assert!(shown.contains("ollama speaks Chat Completions"), "{shown}");
        assert!(
            shown.contains("Make second/other-model the default model instead of local/my-model?"),
            "{shown}"
        );
        let config = Config::parse(&std::fs::read_to_string(&path).unwrap(), &path).unwrap();
        assert!(config.providers.contains_key("local") && config.providers.contains_key("second"));
        assert_eq!(config.defaults.model.as_deref(), Some("local/my-model"));
    }

    /// A server that lists its models at /v1/models only.
    fn serve_v1_only() -> String {
        use std::io::{Read, Write};
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let address = listener.local_addr().unwrap();
        std::thread::spawn(move || {
            for socket in listener.incoming().take(8) {
                let Ok(mut socket) = socket else { return };
                let mut buffer = [0u8; 4096];
                let read = socket.read(&mut buffer).unwrap_or(0);
                let head = String::from_utf8_lossy(&buffer[..read]).to_string();
                let (status, body) = match head.starts_with("GET /v1/models") {
                    true => ("200 OK", r#"{"data":[{"id":"tiny"}]}"#),
                    false => ("404 Not Found", "not here"),
                };
                let _ = write!(
                    socket,
                    "HTTP/1.1 {status}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                );
            }
        });
        format!("http://{address}")
    }

    #[test]
    fn a_base_url_without_v1_is_offered_with_it() {
        let path = temp_config();
        let base = serve_v1_only();
        let mut input = std::io::Cursor::new(b"\n1\n".to_vec());
        let mut output = Vec::new();
        let args = SetupArgs {
            config: Some(path.clone()),
            kind: Some(ProviderKind::Openai),
            base_url: Some(base.clone()),
            name: Some("local".into()),
            no_key: true,
            no_test: true,
            ..SetupArgs::default()
        };
        let summary = run(args, true, &mut input, &mut output).unwrap();
        let shown = String::from_utf8_lossy(&output);
        assert!(
            shown.contains(&format!("{base} lists no models, {base}/v1 does")),
            "{shown}"
        );
        let config = Config::parse(&std::fs::read_to_string(&path).unwrap(), &path).unwrap();
        assert_eq!(
            config.providers["local"].base_url.as_deref(),
            Some(format!("{base}/v1").as_str())
        );
        assert!(summary.contains(&format!("{base}/v1")), "{summary}");
        assert_eq!(config.defaults.model.as_deref(), Some("local/tiny"));
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
        let mut answers = std::io::Cursor::new("anthropic\n\n2\nMY_KEY\nclaude-x\n");
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
        assert!(err.to_string().contains("does not overwrite"), "{err}");
        assert_eq!(err.kind(), SetupErrorKind::Config);
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "{ not json");
    }

    #[test]
    fn each_failure_says_what_kind_it_is() {
        let args = SetupArgs {
            config: Some(temp_config()),
            no_test: true,
            ..SetupArgs::default()
        };
        let err = run(args.clone(), false, &mut std::io::empty(), &mut Vec::new()).unwrap_err();
        assert_eq!(err.kind(), SetupErrorKind::Arguments);
        assert!(err.to_string().starts_with("--kind is required"), "{err}");
        let err = run(args.clone(), true, &mut std::io::empty(), &mut Vec::new()).unwrap_err();
        assert_eq!(err.kind(), SetupErrorKind::Stopped);
        assert_eq!(err.to_string(), "setup was aborted (end of input)");
        let args = SetupArgs {
            kind: Some(ProviderKind::Openai),
            key_stdin: true,
            ..args
        };
        let mut input = std::io::Cursor::new("two words\n");
        let err = run(args, false, &mut input, &mut Vec::new()).unwrap_err();
        assert_eq!(err.kind(), SetupErrorKind::Arguments);
        assert!(
            err.to_string().starts_with("--key-stdin reads one line"),
            "{err}"
        );
    }
}

//! The questions `spindle setup` asks on a terminal: one answer with a
//! default, the provider kind (or a local server by its name), the base
//! URL; each asked again until it is one.

use super::setup_error::SetupError;
use crate::config::ProviderKind;
use std::io::{BufRead, Write};

/// The kind a person named, in any case (`OpenAI` is `openai`).
pub fn parse_kind(text: &str) -> Option<ProviderKind> {
    match text.trim().to_ascii_lowercase().as_str() {
        "openai" | "chat" => Some(ProviderKind::Openai),
        "anthropic" => Some(ProviderKind::Anthropic),
        "responses" => Some(ProviderKind::Responses),
        _ => None,
    }
}

/// The context window the agent assumes for a model nobody sized: its
/// `DEFAULT_CONTEXT_WINDOW`, said here so setup and doctor can name it.
pub(super) const ASSUMED_WINDOW: u64 = 32_768;

/// When the agent would assume [`ASSUMED_WINDOW`] for `id`
/// (`provider/model`) — the config gives no window, the server listed
/// none (`listed`) and the table of known models lacks it — the words
/// that say so and name the setting, in the config at `path`.
pub(super) fn unknown_window(
    config: &crate::config::Config,
    id: &str,
    listed: Option<u64>,
    path: &std::path::Path,
) -> Option<String> {
    let model = id.split_once('/').map_or(id, |(_, model)| model);
    let configured = config.models.get(id).and_then(|m| m.context_window);
    if configured.or(listed).is_some() || crate::provider::catalog::known_limits(model).is_some() {
        return None;
    }
    Some(format!(
        "context window unknown for {id}; assuming {ASSUMED_WINDOW} tokens — set it with models.\"{id}\".context_window in {}",
        path.display()
    ))
}

/// The host of an http(s) URL, lowercase, without user, port or path
/// (an IPv6 address keeps its brackets).
fn host_of(url: &str) -> Option<String> {
    let rest = url.split_once("://")?.1;
    let authority = rest.split(['/', '?', '#']).next()?;
    let host = authority
        .rsplit_once('@')
        .map_or(authority, |(_, host)| host);
    let host = match host.strip_prefix('[') {
        Some(v6) => format!("[{}]", v6.split(']').next()?),
        None => host.split(':').next()?.to_string(),
    };
    Some(host.to_ascii_lowercase()).filter(|host| !host.is_empty())
}

/// Whether the URL is on this machine (localhost, 127.x, ::1).
pub(super) fn is_loopback(url: &str) -> bool {
    host_of(url).is_some_and(|host| {
        host == "localhost"
            || host.ends_with(".localhost")
            || host == "[::1]"
            || host.starts_with("127.")
    })
}

/// The name offered for an OpenAI-compatible provider at `url`: `local`
/// on this machine; else the first telling label of its host
/// (`api.deepseek.com` is `deepseek`, `llm.corp.example.com` is `corp`),
/// else `gateway`.
pub(super) fn name_from_url(url: &str) -> String {
    if is_loopback(url) {
        return "local".into();
    }
    let Some(host) = host_of(url) else {
        return "gateway".into();
    };
    if host.starts_with('[') || host.parse::<std::net::Ipv4Addr>().is_ok() {
        return "gateway".into();
    }
    let labels: Vec<&str> = host.split('.').collect();
    let named = match labels.len() {
        1 => &labels[..],
        n => &labels[..n - 1],
    };
    let generic = [
        "api", "www", "llm", "llms", "ai", "gateway", "gw", "proxy", "v1",
    ];
    named
        .iter()
        .find(|label| !generic.contains(label))
        .map(|label| label.replace(|c: char| !c.is_ascii_alphanumeric() && c != '-', ""))
        .filter(|name| !name.is_empty())
        .unwrap_or_else(|| "gateway".into())
}

/// For a server that is not on this machine, asks its name, offering
/// the one its host suggests (a company's gateway is not "local").
pub(super) fn ask_remote_name(
    name: &mut Option<String>,
    base_url: &str,
    input: &mut dyn BufRead,
    output: &mut dyn Write,
) -> Result<(), SetupError> {
    if name.is_some() || is_loopback(base_url) {
        return Ok(());
    }
    let offered = name_from_url(base_url);
    loop {
        let answer = ask(input, output, "A name for this provider", &offered)?;
        if answer.contains('/') || answer.chars().any(char::is_whitespace) {
            let _ = writeln!(output, "  a name is one word, without '/'");
            continue;
        }
        *name = Some(answer);
        return Ok(());
    }
}

/// Asks one question on the terminal; an empty answer takes the default.
pub(super) fn ask(
    input: &mut dyn BufRead,
    output: &mut dyn Write,
    question: &str,
    default: &str,
) -> Result<String, SetupError> {
    // A default may be a server's model name, a question its URL.
    let question = crate::util::visible(question, false);
    let default_shown = crate::util::visible(default, false);
    if default.is_empty() {
        let _ = write!(output, "{question}: ");
    } else {
        let _ = write!(output, "{question} [{default_shown}]: ");
    }
    let _ = output.flush();
    let mut line = String::new();
    let read = input
        .read_line(&mut line)
        .map_err(|err| SetupError::input(format!("cannot read the answer: {err}")))?;
    if read == 0 {
        return Err(SetupError::stopped("setup was aborted (end of input)"));
    }
    let answer = line.trim();
    Ok(if answer.is_empty() {
        default.to_string()
    } else {
        answer.to_string()
    })
}

/// Asks for the provider kind until the answer is one.
pub(super) fn ask_kind(
    kind: &mut Option<ProviderKind>,
    base_url: &mut Option<String>,
    input: &mut dyn BufRead,
    output: &mut dyn Write,
) -> Result<(), SetupError> {
    // A bad answer is asked again, with what was wrong.
    while kind.is_none() {
        let answer = ask(input, output, "Provider kind: openai (Chat Completions, also Ollama, llama.cpp, vLLM, OpenRouter…), anthropic, responses; or a local server's name: ollama, llama.cpp, lmstudio, vllm", "openai")?;
        // A local server by its name: Chat Completions at its usual place.
        let local = match answer
            .to_ascii_lowercase()
            .replace([' ', '-', '_'], "")
            .as_str()
        {
            "ollama" => Some("http://localhost:11434/v1"),
            "llama.cpp" | "llamacpp" | "llamaserver" => Some("http://localhost:8080/v1"),
            "lmstudio" => Some("http://localhost:1234/v1"),
            "vllm" => Some("http://localhost:8000/v1"),
            _ => None,
        };
        if let Some(url) = local {
            *kind = Some(ProviderKind::Openai);
            if base_url.is_none() {
                let _ = writeln!(
                    output,
                    "  {answer} speaks Chat Completions (kind openai), usually at {url}"
                );
                let base = ask(input, output, "Base URL", url)?;
                *base_url = Some(base);
            }
            continue;
        }
        match parse_kind(&answer) {
            Some(parsed) => *kind = Some(parsed),
            None => {
                let _ = writeln!(
                    output,
                    "  {answer:?} is not a kind: answer openai, anthropic or responses (or ollama, llama.cpp, lmstudio, vllm)."
                );
            }
        }
    }
    Ok(())
}

/// Asks for the base URL until it is an http(s) one.
pub(super) fn ask_base_url(
    base_url: &mut Option<String>,
    kind: ProviderKind,
    input: &mut dyn BufRead,
    output: &mut dyn Write,
) -> Result<(), SetupError> {
    while base_url.is_none() {
        let answer = ask(input, output, "Base URL", kind.default_base_url())?;
        if answer.starts_with("http://") || answer.starts_with("https://") {
            *base_url = Some(answer);
        } else {
            let _ = writeln!(output, "  the base URL starts with http:// or https:// (for example http://localhost:11434/v1)");
        }
    }
    Ok(())
}

/// What to do after the test request failed, on a terminal.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum AfterFailure {
    /// Paste the API key again (kept in a private file).
    Key,
    /// Give another base URL.
    BaseUrl,
    /// Write the config as it is.
    Write,
    /// Stop; nothing is written.
    Stop,
}

/// Asks what to do after a failed test request until the answer is one.
pub(super) fn ask_after_failure(
    input: &mut dyn BufRead,
    output: &mut dyn Write,
) -> Result<AfterFailure, SetupError> {
    loop {
        let answer = ask(
            input,
            output,
            "1) enter the API key again, 2) change the base URL, 3) write the config anyway, 4) stop without writing",
            "1",
        )?;
        match answer.as_str() {
            "1" => return Ok(AfterFailure::Key),
            "2" => return Ok(AfterFailure::BaseUrl),
            "3" => return Ok(AfterFailure::Write),
            "4" => return Ok(AfterFailure::Stop),
            _ => {
                let _ = writeln!(output, "  answer 1, 2, 3 or 4");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{is_loopback, name_from_url};

    #[test]
    fn only_this_machine_is_local() {
        for url in [
            "http://localhost:11434/v1",
            "http://127.0.0.1:8080/v1",
            "http://[::1]:8000/v1",
            "http://user@LOCALHOST/v1",
        ] {
            assert!(is_loopback(url), "{url}");
            assert_eq!(name_from_url(url), "local", "{url}");
        }
        assert!(!is_loopback("https://localhost.example.com/v1"));
        assert_eq!(name_from_url("https://api.deepseek.com/v1"), "deepseek");
        assert_eq!(name_from_url("https://openrouter.ai/api/v1"), "openrouter");
        assert_eq!(name_from_url("https://llm.corp.example.com/v1"), "corp");
        assert_eq!(name_from_url("https://gw.example/v1"), "gateway");
        assert_eq!(name_from_url("http://10.0.0.5:8000/v1"), "gateway");
        assert_eq!(name_from_url("http://inference:8000/v1"), "inference");
    }
}

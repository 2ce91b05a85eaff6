//! The questions `spindle setup` asks on a terminal: one answer with a
//! default, the provider kind (or a local server by its name), the base
//! URL; each asked again until it is one.

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

/// Asks one question on the terminal; an empty answer takes the default.
pub fn ask(
    input: &mut dyn BufRead,
    output: &mut dyn Write,
    question: &str,
    default: &str,
) -> Result<String, String> {
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

/// Asks for the provider kind until the answer is one.
pub fn ask_kind(
    kind: &mut Option<ProviderKind>,
    base_url: &mut Option<String>,
    input: &mut dyn BufRead,
    output: &mut dyn Write,
) -> Result<(), String> {
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
pub fn ask_base_url(
    base_url: &mut Option<String>,
    kind: ProviderKind,
    input: &mut dyn BufRead,
    output: &mut dyn Write,
) -> Result<(), String> {
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
pub enum AfterFailure {
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
pub fn ask_after_failure(
    input: &mut dyn BufRead,
    output: &mut dyn Write,
) -> Result<AfterFailure, String> {
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

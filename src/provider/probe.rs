//! A tiny model call with one tool, to learn whether a server and model
//! take tools at all: llama.cpp's server started without `--jinja`, and
//! Ollama models without tool support, refuse every request that has
//! them. `spindle doctor` and `spindle setup` make it.

use super::http::errors::tools_refused;
use super::{ModelRequest, Provider, Sink, StreamError};
use crate::cancel::CancelToken;
use crate::conversation::{Message, ToolSpec};
use serde_json::json;
use std::time::Duration;

/// The longest silence the probe waits through (the connection's own
/// wait is shorter); with its few output tokens the call stays short.
pub(crate) const PROBE_STALL: Duration = Duration::from_secs(20);

/// The connection timeout of the probe.
pub(crate) const PROBE_CONNECT: Duration = Duration::from_secs(5);

/// What the probe learnt.
#[derive(Debug, PartialEq)]
pub(crate) enum ToolsProbe {
    /// The model answered a request with a tool.
    Takes,
    /// The server or model refuses tools: what it said, and what to do.
    Refused { said: String, fix: String },
    /// The server refused the key (HTTP 401 or 403): what it said.
    Denied(String),
    /// The call failed for another reason (it says nothing of tools).
    Failed(String),
}

/// The one tool the probe offers.
fn probe_tool() -> ToolSpec {
    ToolSpec {
        name: "get_time".into(),
        description: "Tells the current time.".into(),
        parameters: json!({"type": "object", "properties": {}}),
    }
}

struct Quiet;

impl Sink for Quiet {
    fn text(&mut self, _: &str) {}
    fn thought(&mut self, _: &str) {}
    fn notice(&mut self, _: &str) {}
}

/// Sends `model` one short test request with [`probe_tool`] through
/// `provider`, its answer into `sink` (`spindle setup` shows it).
pub(crate) fn ask(
    provider: &dyn Provider,
    model: &str,
    sink: &mut dyn Sink,
) -> Result<super::Outcome, StreamError> {
    let messages = [Message::user("Reply with the single word OK.")];
    let tools = [probe_tool()];
    let request = ModelRequest {
        session_id: "probe",
        model,
        system: "You are a connection test. Reply with the single word OK.",
        messages: &messages,
        tools: &tools,
        effort: None,
        max_output_tokens: Some(16),
        trace: None,
        max_attempts: None,
    };
    provider.stream(&request, sink, &CancelToken::new())
}

/// [`ask`], to learn whether the model takes tools (`provider` made with
/// `attempts: 1` and the probe's timeouts by the caller).
pub(crate) fn tools(provider: &dyn Provider, model: &str) -> ToolsProbe {
    match ask(provider, model, &mut Quiet) {
        Ok(_) => ToolsProbe::Takes,
        Err(StreamError::Failed(error)) if matches!(error.status, Some(401 | 403)) => {
            ToolsProbe::Denied(error.message)
        }
        Err(StreamError::Failed(error)) => match tools_refused(&error.message) {
            Some(fix) => ToolsProbe::Refused {
                said: error
                    .message
                    .rsplit_once(" — ")
                    .map_or(error.message.as_str(), |(said, _)| said)
                    .to_string(),
                fix: fix.to_string(),
            },
            None => ToolsProbe::Failed(error.message),
        },
        Err(StreamError::Cancelled) => ToolsProbe::Failed("cancelled".into()),
    }
}

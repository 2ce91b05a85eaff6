//! Model providers: one module per wire format, all behind one small trait.
//!
//! A provider turns a provider-neutral request (system prompt plus
//! conversation) into a stream of text and thought deltas and a final
//! outcome. Providers know nothing of ACP: the turn worker maps what they
//! report onto session updates.
//!
//! The wire formats: `openai.rs` (Chat Completions), `anthropic.rs`
//! (Messages), `responses.rs` (the Responses API), each a state machine fed
//! one SSE event at a time (for the last two in their `stream.rs`;
//! `responses/raw.rs` finds an item's text in an event, so reasoning is
//! sent back as the server wrote it), and `script.rs`, the scripted
//! provider. Under them: `sse.rs` the SSE parser, and `http/` the streaming
//! POST on a helper thread with cancel, stall handling, retries before the
//! first event (backoff with jitter, `Retry-After`), the cap on what one
//! response holds, and when a limit resets (`reset.rs`). Around them:
//! `kind.rs` (a provider's wire format and a model's price, as the
//! configuration names them), `models.rs` (model lists and the filter of
//! non-chat ids), `catalog.rs` (the built-in catalog of well-known models,
//! matched by the words of an id), `probe.rs` (the one-tool request
//! `doctor` and `setup` make), `tokenize.rs` (a local llama.cpp server's own
//! token count), `trace.rs` (the W3C trace context a prompt hands to its
//! model requests).

pub(crate) mod anthropic;
pub(crate) mod catalog;
pub(crate) mod http;
pub(crate) mod kind;
pub(crate) mod models;
pub(crate) mod openai;
pub(crate) mod probe;
pub(crate) mod responses;
pub(crate) mod script;
pub(crate) mod sse;
#[cfg(test)]
mod testing;
pub(crate) mod tokenize;
pub(crate) mod trace;

use crate::cancel::CancelToken;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use std::fmt;

pub(crate) use crate::conversation::{Image, Message, Role, ToolCallRequest, ToolSpec};

/// The largest attachment sent to a model.
const IMAGE_CAP: u64 = 64 * 1024 * 1024;

/// How a provider sends an image: read at the moment of the request,
/// as a file the repository ships (see `tools::shipped`).
pub(crate) trait ImageData {
    fn data_url(&self) -> Option<String>;
    fn base64(&self) -> Option<String>;
}

impl ImageData for Image {
    /// The image as a `data:` URL, or `None` when its file is gone.
    fn data_url(&self) -> Option<String> {
        self.base64()
            .map(|data| format!("data:{};base64,{data}", self.mime_type))
    }

    fn base64(&self) -> Option<String> {
        // Saved by Spindle under `.spindle/attachments/`, which the
        // workspace can change since: read as a file the repository ships.
        let folder = self.path.parent().unwrap_or(std::path::Path::new("/"));
        let read = crate::tools::shipped::read(&self.path, folder, IMAGE_CAP)
            .map_err(|why| why.reason())
            .and_then(|bytes| bytes.ok_or_else(|| "it is gone".to_string()));
        match read {
            Ok(bytes) => Some(crate::util::base64_encode(&bytes)),
            Err(err) => {
                log::warn!(
                    "image {} is not readable any more: {err}",
                    self.path.display()
                );
                None
            }
        }
    }
}

/// Everything a provider needs for one model call.
pub struct ModelRequest<'a> {
    /// The session the call belongs to (the scripted provider keys its
    /// position in the scenario by it).
    pub session_id: &'a str,
    /// The model's name as the provider knows it (without `provider/`).
    pub model: &'a str,
    pub system: &'a str,
    pub messages: &'a [Message],
    pub tools: &'a [ToolSpec],
    /// Reasoning effort (`low`, `medium`, `high`, ...), when chosen.
    pub effort: Option<&'a str>,
    /// Cap on the answer's tokens, when the model has one configured.
    pub max_output_tokens: Option<u32>,
    /// The editor's trace context, sent as `traceparent`/`tracestate`.
    pub trace: Option<&'a trace::TraceContext>,
    /// At most this many tries of the request, fewer than the provider's
    /// own when set (the request after a wait for a limit is tried once:
    /// the retries do not start over).
    pub max_attempts: Option<u32>,
}

/// Where a provider reports what it streams, as it arrives.
pub trait Sink {
    fn text(&mut self, delta: &str);
    fn thought(&mut self, delta: &str);
    /// A short status line for the user (a retry, a wait), not part of the
    /// model's answer.
    fn notice(&mut self, text: &str) {
        self.thought(text);
    }
    /// The request failed and goes out again at `until_ms`: a status
    /// line, and status says until when.
    fn retrying(&mut self, text: &str, until_ms: i64) {
        let _ = until_ms;
        self.notice(text);
    }
    /// Whether more of the answer is already read and waiting: while it
    /// is, a sink may hold what it writes and send it together; `false`
    /// (always given before the stream waits, and when it ends) sends what
    /// it holds.
    fn more_waiting(&mut self, more: bool) {
        let _ = more;
    }
}

/// The bytes `text` takes written as a JSON string's content, as the
/// editor and the store get it: a quote, a backslash or a short-escaped
/// control character counts 2, any other control character 6 (`\u0001`).
/// What a response holds is counted this way, so every copy of it the agent
/// writes out stays within the response cap.
pub(crate) fn json_len(text: &str) -> usize {
    text.len()
        + text
            .bytes()
            .map(|byte| match byte {
                b'"' | b'\\' | b'\n' | b'\r' | b'\t' | 0x08 | 0x0c => 1,
                0..=0x1f => 5,
                _ => 0,
            })
            .sum::<usize>()
}

/// What a parsed JSON value costs to hold, roughly: its strings (as JSON)
/// and keys, and a fixed cost per node.
pub(crate) fn value_held(value: &Value) -> usize {
    const NODE: usize = 32;
    NODE + match value {
        Value::String(text) => json_len(text),
        Value::Array(items) => items.iter().map(value_held).sum(),
        Value::Object(map) => map
            .iter()
            .map(|(key, value)| json_len(key) + value_held(value))
            .sum(),
        _ => 0,
    }
}

/// Why the model stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Finish {
    EndTurn,
    /// The model asked for tools; the turn goes on once they answered.
    ToolUse,
    MaxTokens,
    Refusal,
}

/// Token counts of one model call (or a sum of them), when the provider
/// reports them. Input counts every prompt token, cached or not; output
/// counts reasoning too. The finer counts are 0 when a provider leaves
/// them out, and `unreported` says so: unknown is never shown as 0.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(from = "ReportedUsage")]
pub struct Usage {
    pub input_tokens: u64,
    pub output_tokens: u64,
    /// Prompt tokens read from the provider's cache.
    pub cached_tokens: u64,
    pub reasoning_tokens: u64,
    /// Prompt tokens written to the provider's cache.
    #[serde(skip_serializing_if = "is_zero")]
    pub cache_write_tokens: u64,
    #[serde(skip)]
    pub unreported: Unreported,
}

/// How many of the model calls a usage sums left a finer count out.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Unreported {
    pub cached: u32,
    pub cache_write: u32,
    pub reasoning: u32,
}

impl Unreported {
    /// One call's: which of the three counts it gave.
    pub fn of(cached: bool, cache_write: bool, reasoning: bool) -> Unreported {
        Unreported {
            cached: u32::from(!cached),
            cache_write: u32::from(!cache_write),
            reasoning: u32::from(!reasoning),
        }
    }
}

fn is_zero(count: &u64) -> bool {
    *count == 0
}

impl Usage {
    /// Adds another call's (or sum's) counts.
    /// The sums saturate: counts come from servers and from the store.
    pub fn add(&mut self, other: &Usage) {
        let add = |sum: &mut u64, more: u64| *sum = sum.saturating_add(more);
        add(&mut self.input_tokens, other.input_tokens);
        add(&mut self.output_tokens, other.output_tokens);
        add(&mut self.cached_tokens, other.cached_tokens);
        add(&mut self.reasoning_tokens, other.reasoning_tokens);
        add(&mut self.cache_write_tokens, other.cache_write_tokens);
        let add = |sum: &mut u32, more: u32| *sum = sum.saturating_add(more);
        add(&mut self.unreported.cached, other.unreported.cached);
        add(
            &mut self.unreported.cache_write,
            other.unreported.cache_write,
        );
        add(&mut self.unreported.reasoning, other.unreported.reasoning);
    }

    /// What was added since `before` (a sum this one started from).
    pub fn since(&self, before: &Usage) -> Usage {
        Usage {
            input_tokens: self.input_tokens.saturating_sub(before.input_tokens),
            output_tokens: self.output_tokens.saturating_sub(before.output_tokens),
            cached_tokens: self.cached_tokens.saturating_sub(before.cached_tokens),
            reasoning_tokens: self
                .reasoning_tokens
                .saturating_sub(before.reasoning_tokens),
            cache_write_tokens: self
                .cache_write_tokens
                .saturating_sub(before.cache_write_tokens),
            unreported: Unreported {
                cached: self
                    .unreported
                    .cached
                    .saturating_sub(before.unreported.cached),
                cache_write: self
                    .unreported
                    .cache_write
                    .saturating_sub(before.unreported.cache_write),
                reasoning: self
                    .unreported
                    .reasoning
                    .saturating_sub(before.unreported.reasoning),
            },
        }
    }
}

/// The most one model call may report costing (USD): a larger or
/// negative or non-numeric figure is taken for a broken report and
/// ignored, never summed.
pub(crate) const MAX_REPORTED_COST: f64 = 100_000.0;

/// A provider-reported cost (a JSON number, or a string holding one, as
/// headers and some gateways give it), when it is believable.
pub(crate) fn reported_cost(value: &Value) -> Option<f64> {
    let cost = match value {
        Value::Number(number) => number.as_f64()?,
        Value::String(text) => text.trim().parse::<f64>().ok()?,
        _ => return None,
    };
    (cost.is_finite() && (0.0..=MAX_REPORTED_COST).contains(&cost)).then_some(cost)
}

/// The most tokens one model call may report in one count: no model reads
/// or writes that many, so a larger figure is a broken report.
pub(crate) const MAX_REPORTED_TOKENS: u64 = 1_000_000_000;

/// A provider-reported token count, when it is believable: a
/// non-negative whole number (a float with nothing after the point
/// counts) of at most [`MAX_REPORTED_TOKENS`]; a negative, fractional,
/// huge or non-numeric one is no count.
pub(crate) fn reported_tokens(value: &Value) -> Option<u64> {
    let count = match value {
        Value::Number(number) => match number.as_u64() {
            Some(count) => count,
            None => {
                let float = number.as_f64()?;
                if !(float >= 0.0 && float.fract() == 0.0 && float <= MAX_REPORTED_TOKENS as f64) {
                    return None;
                }
                float as u64
            }
        },
        _ => return None,
    };
    (count <= MAX_REPORTED_TOKENS).then_some(count)
}

/// A token count field of a usage object, read with [`reported_tokens`]
/// (serde's `deserialize_with`): a broken count is `None` rather than an
/// error that would throw the whole event away.
pub(crate) fn lenient_tokens<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> Result<Option<u64>, D::Error> {
    Ok(reported_tokens(&Value::deserialize(d)?))
}

/// Usage as a script writes it: a count left out is unreported.
#[derive(Deserialize)]
struct ReportedUsage {
    #[serde(default)]
    input_tokens: u64,
    #[serde(default)]
    output_tokens: u64,
    cached_tokens: Option<u64>,
    reasoning_tokens: Option<u64>,
    cache_write_tokens: Option<u64>,
}

impl From<ReportedUsage> for Usage {
    fn from(raw: ReportedUsage) -> Usage {
        Usage {
            input_tokens: raw.input_tokens,
            output_tokens: raw.output_tokens,
            cached_tokens: raw.cached_tokens.unwrap_or(0),
            reasoning_tokens: raw.reasoning_tokens.unwrap_or(0),
            cache_write_tokens: raw.cache_write_tokens.unwrap_or(0),
            unreported: Unreported::of(
                raw.cached_tokens.is_some(),
                raw.cache_write_tokens.is_some(),
                raw.reasoning_tokens.is_some(),
            ),
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Outcome {
    pub finish: Finish,
    pub usage: Option<Usage>,
    /// What the call cost in USD, when the provider (a gateway such as
    /// LiteLLM) said so in its usage or a response header; it wins over
    /// any price Spindle knows.
    pub cost: Option<f64>,
    /// The tool calls the model asked for, in order.
    pub tool_calls: Vec<ToolCallRequest>,
    /// Kept with the assistant message (see `Message::provider_data`).
    pub provider_data: Value,
}

/// A failed model call, with a stable machine-readable code such as
/// `provider_http_401` or `provider_unreachable` and a message for people.
#[derive(Debug, Clone, PartialEq)]
pub struct ProviderError {
    pub code: String,
    pub message: String,
    pub status: Option<u16>,
    /// Whether trying again may help (connection failures, 408, 409, 429,
    /// 5xx, overloaded): only before anything of the answer was streamed.
    pub retryable: bool,
    /// How long the server asked us to wait before retrying.
    pub retry_after: Option<std::time::Duration>,
    /// A gateway in front said it already retried the call upstream
    /// (LiteLLM's `x-litellm-attempted-retries`): ours are fewer.
    pub upstream_retried: bool,
    /// A rate or usage limit that resets at a known time (`retry_after`
    /// from now): a turn may wait for it instead of failing.
    pub limited: bool,
}

impl ProviderError {
    pub fn new(code: impl Into<String>, message: impl Into<String>) -> ProviderError {
        ProviderError {
            code: code.into(),
            message: message.into(),
            status: None,
            retryable: false,
            retry_after: None,
            upstream_retried: false,
            limited: false,
        }
    }

    pub fn retryable(mut self) -> ProviderError {
        self.retryable = true;
        self
    }

    /// The `data` object of the JSON-RPC error that carries this failure.
    pub fn data(&self) -> Value {
        let mut data = json!({ "code": self.code });
        if let Some(status) = self.status {
            data["status"] = json!(status);
        }
        data
    }
}

impl fmt::Display for ProviderError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.message, self.code)
    }
}

/// How a model call can end other than with an outcome.
#[derive(Debug, Clone, PartialEq)]
pub enum StreamError {
    Cancelled,
    Failed(ProviderError),
}

impl From<ProviderError> for StreamError {
    fn from(error: ProviderError) -> Self {
        StreamError::Failed(error)
    }
}

pub trait Provider: Send + Sync {
    /// Streams one model call into `sink`. Must return promptly (well under
    /// 100 ms) with `StreamError::Cancelled` once `cancel` fires, whatever
    /// the network is doing.
    fn stream(
        &self,
        request: &ModelRequest<'_>,
        sink: &mut dyn Sink,
        cancel: &CancelToken,
    ) -> Result<Outcome, StreamError>;

    /// The tokens of `text` as the server counts them, when it can say
    /// (a local llama.cpp server's `/tokenize`); `None` otherwise.
    fn count_tokens(&self, _text: &str, _cancel: &CancelToken) -> Option<u64> {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reported_cost_is_taken_only_when_believable() {
        assert_eq!(reported_cost(&json!(0.0031)), Some(0.0031));
        assert_eq!(reported_cost(&json!(" 1.5 ")), Some(1.5));
        assert_eq!(reported_cost(&json!(0)), Some(0.0), "free is known");
        for bad in [
            json!(-0.01),
            json!("NaN"),
            json!("inf"),
            json!("lots"),
            json!(MAX_REPORTED_COST * 2.0),
            json!(null),
            json!({"amount": 1}),
        ] {
            assert_eq!(reported_cost(&bad), None, "{bad}");
        }
    }

    #[test]
    fn a_reported_token_count_is_taken_only_when_believable() {
        assert_eq!(reported_tokens(&json!(1234)), Some(1234));
        assert_eq!(reported_tokens(&json!(12.0)), Some(12));
        assert_eq!(reported_tokens(&json!(0)), Some(0));
        let huge: Value = serde_json::from_str("18446744073709551616").unwrap();
        let far: Value = serde_json::from_str("1e300").unwrap();
        for bad in [
            json!(-1),
            json!(1.5),
            json!(u64::MAX),
            json!(MAX_REPORTED_TOKENS + 1),
            huge,
            far,
            json!("12"),
            json!(null),
        ] {
            assert_eq!(reported_tokens(&bad), None, "{bad}");
        }
        // Sums saturate.
        let mut sum = Usage {
            input_tokens: u64::MAX - 1,
            ..Usage::default()
        };
        sum.add(&Usage {
            input_tokens: 10,
            output_tokens: 3,
            ..Usage::default()
        });
        assert_eq!((sum.input_tokens, sum.output_tokens), (u64::MAX, 3));
    }
}

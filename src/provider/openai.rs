//! OpenAI Chat Completions, streamed: the wire format spoken by OpenAI and
//! by most local and hosted compatible servers (Ollama, llama.cpp, vLLM,
//! DeepSeek, OpenRouter...).

use super::http::{EventStream, Next, StreamItem, Timeouts};
use super::{
    Finish, Message, ModelRequest, Outcome, Provider, ProviderError, Role, Sink, StreamError, Usage,
};
use crate::cancel::CancelToken;
use serde::Deserialize;
use serde_json::{json, Value};

pub const DEFAULT_BASE_URL: &str = "https://api.openai.com/v1";

pub struct ChatCompletions {
    pub base_url: String,
    pub api_key: Option<String>,
    pub model: String,
    pub timeouts: Timeouts,
}

impl ChatCompletions {
    fn body(&self, request: &ModelRequest<'_>) -> Value {
        let mut messages = Vec::with_capacity(request.messages.len() + 1);
        messages.push(json!({ "role": "system", "content": request.system }));
        for message in request.messages {
            messages.push(message_json(message));
        }
        json!({
            "model": self.model,
            "stream": true,
            "stream_options": { "include_usage": true },
            "messages": messages,
        })
    }
}

fn message_json(message: &Message) -> Value {
    match message.role {
        Role::User => json!({ "role": "user", "content": message.text }),
        Role::Assistant => json!({ "role": "assistant", "content": message.text }),
    }
}

#[derive(Deserialize)]
struct Chunk {
    #[serde(default)]
    choices: Vec<Choice>,
    #[serde(default)]
    usage: Option<RawUsage>,
    #[serde(default)]
    error: Option<Value>,
}

#[derive(Deserialize)]
struct Choice {
    #[serde(default)]
    delta: Option<Delta>,
    #[serde(default)]
    finish_reason: Option<String>,
}

#[derive(Deserialize, Default)]
struct Delta {
    #[serde(default)]
    content: Option<String>,
    #[serde(default)]
    reasoning_content: Option<String>,
    #[serde(default)]
    reasoning: Option<String>,
    #[serde(default)]
    refusal: Option<String>,
}

#[derive(Deserialize)]
struct RawUsage {
    #[serde(default)]
    prompt_tokens: u64,
    #[serde(default)]
    completion_tokens: u64,
    #[serde(default)]
    prompt_tokens_details: Option<PromptDetails>,
    #[serde(default)]
    completion_tokens_details: Option<CompletionDetails>,
}

#[derive(Deserialize)]
struct PromptDetails {
    #[serde(default)]
    cached_tokens: u64,
}

#[derive(Deserialize)]
struct CompletionDetails {
    #[serde(default)]
    reasoning_tokens: u64,
}

impl From<RawUsage> for Usage {
    fn from(raw: RawUsage) -> Usage {
        Usage {
            input_tokens: raw.prompt_tokens,
            output_tokens: raw.completion_tokens,
            cached_tokens: raw.prompt_tokens_details.map_or(0, |d| d.cached_tokens),
            reasoning_tokens: raw
                .completion_tokens_details
                .map_or(0, |d| d.reasoning_tokens),
        }
    }
}

fn finish_of(reason: &str) -> Finish {
    match reason {
        "length" => Finish::MaxTokens,
        "content_filter" => Finish::Refusal,
        _ => Finish::EndTurn,
    }
}

impl Provider for ChatCompletions {
    fn stream(
        &self,
        request: &ModelRequest<'_>,
        sink: &mut dyn Sink,
        cancel: &CancelToken,
    ) -> Result<Outcome, StreamError> {
        let url = format!("{}/chat/completions", self.base_url.trim_end_matches('/'));
        let mut headers = vec![("Content-Type", "application/json".to_string())];
        if let Some(key) = &self.api_key {
            headers.push(("Authorization", format!("Bearer {key}")));
        }
        let body = self.body(request).to_string();
        let stream = EventStream::post(&url, &headers, body, self.timeouts, cancel)?;
        let mut finish: Option<Finish> = None;
        let mut usage = None;
        let mut refused = false;
        loop {
            let item = match stream.next(cancel) {
                Next::Cancelled => return Err(StreamError::Cancelled),
                Next::Item(item) => item,
            };
            let event = match item {
                StreamItem::Event(event) => event,
                StreamItem::Alive => continue,
                StreamItem::End => break,
                StreamItem::Failed(error) => {
                    return Err(if cancel.is_cancelled() {
                        StreamError::Cancelled
                    } else {
                        StreamError::Failed(error)
                    })
                }
            };
            if event.data == "[DONE]" {
                return Ok(Outcome {
                    finish: finish_or_refusal(finish, refused),
                    usage,
                });
            }
            let chunk: Chunk = serde_json::from_str(&event.data).map_err(|err| {
                ProviderError::new(
                    "provider_bad_response",
                    format!("the provider sent a chunk that is not valid JSON: {err}"),
                )
            })?;
            if let Some(error) = chunk.error {
                let message =
                    super::http::provider_message(json!({ "error": error }).to_string().as_bytes())
                        .unwrap_or_else(|| error.to_string());
                return Err(ProviderError::new(
                    "provider_stream_error",
                    format!("the model provider reported an error mid-stream: {message}"),
                )
                .into());
            }
            if let Some(raw) = chunk.usage {
                usage = Some(raw.into());
            }
            for choice in chunk.choices {
                if let Some(delta) = choice.delta {
                    if let Some(text) = delta.reasoning_content.or(delta.reasoning) {
                        if !text.is_empty() {
                            sink.thought(&text);
                        }
                    }
                    if let Some(text) = delta.content {
                        if !text.is_empty() {
                            sink.text(&text);
                        }
                    }
                    if let Some(text) = delta.refusal {
                        refused = true;
                        if !text.is_empty() {
                            sink.text(&text);
                        }
                    }
                }
                if let Some(reason) = choice.finish_reason {
                    finish = Some(finish_of(&reason));
                }
            }
        }
        // Some servers end without `[DONE]`: that is fine after a finish
        // reason, and a truncated stream otherwise.
        match finish {
            Some(finish) => Ok(Outcome {
                finish: finish_or_refusal(Some(finish), refused),
                usage,
            }),
            None => Err(ProviderError::new(
                "provider_stream_broken",
                "the provider stream ended before the model finished",
            )
            .into()),
        }
    }
}

fn finish_or_refusal(finish: Option<Finish>, refused: bool) -> Finish {
    if refused {
        Finish::Refusal
    } else {
        finish.unwrap_or(Finish::EndTurn)
    }
}

//! What a failed call says and whether it may pass: the errors of a
//! connection, a non-2xx answer (with the provider's own message, from
//! JSON, SSE-framed JSON or an HTML page) and an error event of any wire
//! format; the server's retry hints and the backoff between attempts.

use crate::provider::ProviderError;
use std::io::Read;
use std::time::Duration;

/// The largest error body we read to find the provider's message.
const ERROR_BODY_LIMIT: u64 = 64 * 1024;

pub(super) fn connect_error(url: &str, err: ureq::Error) -> ProviderError {
    ProviderError::new(
        "provider_unreachable",
        crate::net::unreachable("the model provider", url, &err),
    )
    .retryable()
}

/// An error sent as a stream's first event, in any of the three wire
/// formats: Chat's `{"error": …}`, Anthropic's `{"type": "error", "error":
/// …}`, the Responses API's `error` and `response.failed`. Overloaded,
/// server and rate-limit errors may pass, so they are retryable.
pub(super) fn error_event(data: &str) -> Option<ProviderError> {
    if !data.contains("error") {
        return None;
    }
    error_value(&serde_json::from_str(data).ok()?)
}

/// `error_event` of parsed data.
pub(super) fn error_value(value: &serde_json::Value) -> Option<ProviderError> {
    let kind = value.get("type").and_then(|t| t.as_str()).unwrap_or("");
    let error = match kind {
        "response.failed" => value.get("response")?.get("error")?,
        "error" => value.get("error").unwrap_or(value),
        "" => value.get("error")?,
        _ => return None,
    };
    let message = error
        .get("message")
        .and_then(|m| m.as_str())
        .unwrap_or("the provider reported an error");
    let code = ["type", "code"]
        .iter()
        .filter_map(|key| error.get(*key).and_then(|c| c.as_str()))
        .collect::<Vec<_>>()
        .join(" ");
    // A status in the event (a gateway's `"code": 408` for its upstream's
    // timeout) is retried as the same HTTP status would be.
    let status = ["code", "status"].iter().find_map(|key| {
        let value = error.get(*key)?;
        let number = value.as_u64().or_else(|| value.as_str()?.parse().ok())?;
        u16::try_from(number)
            .ok()
            .filter(|n| (100..600).contains(n))
    });
    let retryable = [
        "overloaded",
        "server_error",
        "api_error",
        "rate_limit",
        "timeout",
    ]
    .iter()
    .any(|word| code.contains(word))
        || status.is_some_and(|status| matches!(status, 408 | 409 | 429) || status >= 500);
    if let Some(hint) = tools_refused(message) {
        let mut error = ProviderError::new(
            TOOLS_UNSUPPORTED,
            format!("the model provider reported an error: {message} — {hint}"),
        );
        error.status = status;
        return Some(error);
    }
    let mut error = ProviderError::new(
        "provider_stream_error",
        format!("the model provider reported an error: {message}"),
    );
    error.status = status;
    Some(if retryable { error.retryable() } else { error })
}

/// The code of a refusal of the request's tools (by the server or the
/// model): never retried, since the same request fails the same way.
pub(crate) const TOOLS_UNSUPPORTED: &str = "provider_tools_unsupported";

/// What to do when a provider's message says it cannot take tools:
/// llama.cpp's server started without `--jinja` ("tools param requires
/// --jinja flag"), Ollama's "registry.ollama.ai/library/x does not support
/// tools", and the "tool use is not supported" of other servers.
pub(crate) fn tools_refused(message: &str) -> Option<&'static str> {
    let lower = message.to_ascii_lowercase();
    if lower.contains("--jinja") || lower.contains("requires jinja") {
        return Some(
            "this llama.cpp server takes no tools: restart it with --jinja \
             (llama-server --jinja …), or use a model that takes tools",
        );
    }
    let refusals = [
        "does not support tools",
        "doesn't support tools",
        "does not support tool",
        "tool use is not supported",
        "tools are not supported",
        "tool calling is not supported",
        "tool calls are not supported",
        "does not support function calling",
        "function calling is not supported",
    ];
    refusals.iter().any(|r| lower.contains(r)).then_some(
        "this model takes no tools, which Spindle needs: pick a model that supports \
         tool calls (in Ollama, one tagged \"tools\" on ollama.com)",
    )
}

/// Whether an event's data shows nothing of an answer yet: no text,
/// reasoning, tool call or end in it (a role, a stream's start, an empty
/// delta, a keep-alive), in any of the three formats. Such events before
/// an error leave it an error before any output.
pub(super) fn shows_nothing(data: &str) -> bool {
    const SHOWN: [&str; 12] = [
        "text",
        "content",
        "delta",
        "arguments",
        "partial_json",
        "thinking",
        "reasoning",
        "reasoning_content",
        "refusal",
        "tool_calls",
        "finish_reason",
        "stop_reason",
    ];
    fn shows(value: &serde_json::Value, depth: usize) -> bool {
        use serde_json::Value;
        match value {
            _ if depth > 8 => true,
            Value::Object(map) => map.iter().any(|(key, value)| {
                let filled = match value {
                    Value::Null | Value::Bool(false) => false,
                    Value::String(text) => !text.is_empty(),
                    Value::Array(items) => !items.is_empty(),
                    _ => true,
                };
                (SHOWN.contains(&key.as_str()) && filled && !value.is_object())
                    || shows(value, depth + 1)
            }),
            Value::Array(items) => items.iter().any(|item| shows(item, depth + 1)),
            _ => false,
        }
    }
    data.len() <= 64 * 1024
        && serde_json::from_str::<serde_json::Value>(data).is_ok_and(|value| !shows(&value, 0))
}

/// Exponential backoff: 0.5 s × 2ⁿ, at most 8 s, times a jitter factor in
/// (0.75, 1] so that many clients do not retry in step.
pub(super) fn backoff(attempt: u32) -> Duration {
    let base = 0.5 * 2f64.powi(attempt.saturating_sub(1).min(8) as i32);
    let random = u64::from_str_radix(&crate::util::random_hex(), 16).unwrap_or(0);
    let jitter = 0.75 + 0.25 * ((random % 1000) as f64 + 1.0) / 1000.0;
    Duration::from_secs_f64(base.min(8.0) * jitter)
}

/// What the response headers say about retrying.
#[derive(Debug, Default, PartialEq)]
pub(super) struct RetryAdvice {
    delay: Option<Duration>,
    /// `x-should-retry`, which overrides the status-code rules.
    should_retry: Option<bool>,
    /// A gateway said it retried upstream already.
    upstream_retried: bool,
    /// When the rate-limit headers say the limit resets.
    reset: Option<Duration>,
}

impl RetryAdvice {
    pub(super) fn from_headers(headers: &ureq::http::HeaderMap) -> RetryAdvice {
        // Gateways (LiteLLM's proxy) forward the upstream's hints with an
        // `llm_provider-` prefix; the gateway's own header wins.
        let get = |name: &str| {
            headers
                .get(name)
                .or_else(|| headers.get(format!("llm_provider-{name}").as_str()))
                .and_then(|v| v.to_str().ok())
        };
        let mut advice = RetryAdvice::parse(
            get("retry-after-ms"),
            get("retry-after"),
            get("x-should-retry"),
        );
        advice.reset = super::reset::from_headers(&|name| get(name).map(str::to_string));
        advice.upstream_retried = headers
            .get("x-litellm-attempted-retries")
            .and_then(|v| v.to_str().ok()?.trim().parse::<u32>().ok())
            .is_some_and(|retries| retries > 0);
        advice
    }

    fn parse(
        retry_after_ms: Option<&str>,
        retry_after: Option<&str>,
        should_retry: Option<&str>,
    ) -> RetryAdvice {
        // Every number is checked before it becomes a wait: negative or
        // not a number is no hint, and a wait past a year is a year
        // (`reset::seconds`); `Duration::from_secs_f64` would panic on
        // 1e300.
        use super::reset::seconds;
        let from_ms = retry_after_ms
            .and_then(|v| v.trim().parse::<f64>().ok())
            .and_then(|ms| seconds(ms / 1000.0));
        let from_header = retry_after.and_then(|v| {
            let v = v.trim();
            match v.parse::<f64>() {
                Ok(secs) => seconds(secs),
                Err(_) => parse_http_date(v).and_then(|at| {
                    let now = crate::clock::now_ms() / 1000;
                    seconds(at.saturating_sub(now).max(0) as f64)
                }),
            }
        });
        RetryAdvice {
            delay: from_ms.or(from_header),
            should_retry: should_retry.map(|v| v.trim().eq_ignore_ascii_case("true")),
            upstream_retried: false,
            reset: None,
        }
    }
}

/// Parses an IMF-fixdate such as `Wed, 21 Oct 2026 07:28:00 GMT` into
/// seconds since the epoch.
fn parse_http_date(text: &str) -> Option<i64> {
    let parts: Vec<&str> = text.split_whitespace().collect();
    let [_, day, month, year, clock, zone] = parts.as_slice() else {
        return None;
    };
    if *zone != "GMT" {
        return None;
    }
    let months = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let month = months.iter().position(|m| m == month)? as i64 + 1;
    let day: i64 = day.parse().ok().filter(|d| (1..=31).contains(d))?;
    // Four digits, as the format has them: no sum below can overflow.
    let year: i64 = year.parse().ok().filter(|y| (1..=9999).contains(y))?;
    let mut clock = clock.split(':').map(|p| p.parse::<i64>().ok());
    let (hour, minute, second) = (clock.next()??, clock.next()??, clock.next()??);
    if !(0..=23).contains(&hour) || !(0..=59).contains(&minute) || !(0..=60).contains(&second) {
        return None;
    }
    let days = crate::clock::days_from_civil(year, month, day);
    Some(days * 86_400 + hour * 3600 + minute * 60 + second)
}

/// Builds the error for a non-2xx answer, with the provider's own message
/// when the body has one.
pub(super) fn status_error(status: u16, advice: &RetryAdvice, body: ureq::Body) -> ProviderError {
    let mut bytes = Vec::new();
    let _ = body
        .into_reader()
        .take(ERROR_BODY_LIMIT)
        .read_to_end(&mut bytes);
    let message = provider_message(&bytes).unwrap_or_else(|| {
        let text = visible_text(&String::from_utf8_lossy(&bytes));
        if text.is_empty() {
            "no details given".to_string()
        } else {
            text.chars().take(300).collect()
        }
    });
    if let Some(hint) = tools_refused(&message) {
        let mut error = ProviderError::new(
            TOOLS_UNSUPPORTED,
            format!("the model provider answered HTTP {status}: {message} — {hint}"),
        );
        error.status = Some(status);
        return error;
    }
    // Billing problems look like rate limits but waiting does not help.
    let quota = String::from_utf8_lossy(&bytes).contains("insufficient_quota");
    let by_status = matches!(status, 408 | 409 | 429) || status >= 500;
    // A limit that passes at a known time: the turn may wait it out.
    // (Rate-limit headers come with every answer; they say when to come
    // back only on a 429.)
    let limit = || advice.reset.or_else(|| super::reset::from_body(&bytes));
    let retry_after = advice
        .delay
        .or_else(|| (status == 429).then(limit).flatten());
    ProviderError {
        code: format!("provider_http_{status}"),
        message: format!("the model provider answered HTTP {status}: {message}"),
        status: Some(status),
        retryable: advice.should_retry.unwrap_or(by_status && !quota),
        retry_after,
        upstream_retried: advice.upstream_retried,
        limited: status == 429 && !quota && retry_after.is_some(),
    }
}

/// The readable text of an error body: an HTML page (a proxy's error page)
/// loses its markup, scripts and styles, and white space is folded.
fn visible_text(body: &str) -> String {
    if !body.trim_start().starts_with('<') {
        return body.split_whitespace().collect::<Vec<_>>().join(" ");
    }
    let mut text = String::new();
    let mut rest = body;
    while let Some(open) = rest.find('<') {
        text.push_str(&rest[..open]);
        text.push(' ');
        let tag = &rest[open..];
        let lower = tag.get(..8).unwrap_or(tag).to_ascii_lowercase();
        let skip_to = if lower.starts_with("<script") {
            tag.to_ascii_lowercase().find("</script>").map(|at| at + 9)
        } else if lower.starts_with("<style") {
            tag.to_ascii_lowercase().find("</style>").map(|at| at + 8)
        } else {
            tag.find('>').map(|at| at + 1)
        };
        match skip_to {
            Some(end) => rest = &tag[end..],
            None => {
                rest = "";
                break;
            }
        }
    }
    text.push_str(rest);
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Finds the message in an error body of any of the common shapes:
/// `{"error":{"message":…}}`, `{"error":"…"}`, `{"message":…}`.
pub(crate) fn provider_message(bytes: &[u8]) -> Option<String> {
    // Some servers frame an error body as SSE: `data: {…}` lines and a
    // `[DONE]`; the JSON is in the first data line that parses.
    let value: serde_json::Value = serde_json::from_slice(bytes).ok().or_else(|| {
        String::from_utf8_lossy(bytes)
            .lines()
            .filter_map(|line| line.trim().strip_prefix("data:"))
            .find_map(|data| serde_json::from_str(data.trim()).ok())
    })?;
    let error = value.get("error").unwrap_or(&value);
    if let Some(text) = error.as_str() {
        return Some(text.to_string());
    }
    error
        .get("message")
        .and_then(|m| m.as_str())
        .map(str::to_string)
}

#[cfg(test)]
mod blank_tests {
    use super::*;

    #[test]
    fn refusals_of_tools_are_named_and_not_retried() {
        let jinja = error_event(
            r#"{"error":{"code":500,"message":"tools param requires --jinja flag","type":"server_error"}}"#,
        )
        .unwrap();
        assert!(!jinja.retryable, "{jinja:?}");
        assert_eq!(jinja.code, TOOLS_UNSUPPORTED);
        assert!(
            jinja.message.contains("restart it with --jinja"),
            "{}",
            jinja.message
        );
        let ollama =
            tools_refused("registry.ollama.ai/library/gemma:2b does not support tools").unwrap();
        assert!(ollama.contains("pick a model"), "{ollama}");
        assert!(tools_refused("Tool use is not supported for this model").is_some());
        assert!(tools_refused("the server is overloaded").is_none());
        assert!(tools_refused("unknown tool: read_file").is_none());
    }

    #[test]
    fn events_that_show_nothing_are_told_apart() {
        for blank in [
            r#"{"choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}"#,
            r#"{"choices":[]}"#,
            r#"{"type":"message_start","message":{"id":"m","role":"assistant","content":[],"usage":{"input_tokens":3}}}"#,
            r#"{"type":"ping"}"#,
            r#"{"type":"response.created","response":{"id":"r","output":[],"instructions":"be brief"}}"#,
        ] {
            assert!(shows_nothing(blank), "{blank}");
        }
        for shown in [
            r#"{"choices":[{"delta":{"content":"Hi"}}]}"#,
            r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"id":"c","function":{"name":"f"}}]}}]}"#,
            r#"{"choices":[{"delta":{},"finish_reason":"stop"}]}"#,
            r#"{"type":"content_block_delta","delta":{"type":"text_delta","text":"x"}}"#,
            r#"{"type":"response.output_text.delta","delta":"x"}"#,
            "not json",
        ] {
            assert!(!shows_nothing(shown), "{shown}");
        }
    }

    #[test]
    fn a_status_in_an_error_event_is_retried_as_that_status() {
        let timeout =
            error_event(r#"{"error":{"message":"upstream timed out","code":408}}"#).unwrap();
        assert!(timeout.retryable && timeout.status == Some(408));
        let bad = error_event(r#"{"error":{"message":"bad tool schema","code":"400"}}"#).unwrap();
        assert!(!bad.retryable && bad.status == Some(400));
        let unavailable = error_event(r#"{"error":{"message":"no","status":503}}"#).unwrap();
        assert!(unavailable.retryable);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_bodies_are_read_whatever_their_framing() {
        assert_eq!(
            provider_message(
                b"data: {\"error\": {\"message\": \"Key expired\"}}\n\ndata: [DONE]\n\n"
            ),
            Some("Key expired".to_string())
        );
        assert_eq!(
            visible_text("<html><head><style>p{}</style><script>x()</script></head><body><h1>502 Bad Gateway</h1>\n<p>nginx</p></body></html>"),
            "502 Bad Gateway nginx"
        );
        assert_eq!(visible_text("plain\n  words"), "plain words");
    }

    #[test]
    fn gateway_prefixed_retry_hints_count() {
        let mut headers = ureq::http::HeaderMap::new();
        headers.insert("llm_provider-retry-after", "3".parse().unwrap());
        assert_eq!(
            RetryAdvice::from_headers(&headers).delay,
            Some(Duration::from_secs(3))
        );
        headers.insert("retry-after-ms", "250".parse().unwrap());
        assert_eq!(
            RetryAdvice::from_headers(&headers).delay,
            Some(Duration::from_millis(250))
        );
    }

    #[test]
    fn retry_advice_from_headers() {
        let advice = RetryAdvice::parse(None, Some("2"), None);
        assert_eq!(advice.delay, Some(Duration::from_secs(2)));
        let advice = RetryAdvice::parse(Some("1500"), Some("9"), Some("false"));
        assert_eq!(advice.delay, Some(Duration::from_millis(1500)));
        assert_eq!(advice.should_retry, Some(false));
        let past = RetryAdvice::parse(None, Some("Wed, 21 Oct 2015 07:28:00 GMT"), None);
        assert_eq!(past.delay, Some(Duration::ZERO));
        assert_eq!(RetryAdvice::parse(None, Some("soon"), None).delay, None);
        // Absurd numbers and dates: never a panic, never past a year.
        let longest = Duration::from_secs_f64(super::super::reset::LONGEST);
        let year = Some(longest);
        for far in ["1e300", "inf", "1e17", "18446744073709551616"] {
            assert_eq!(
                RetryAdvice::parse(Some(far), None, None).delay,
                year,
                "{far}"
            );
            assert_eq!(
                RetryAdvice::parse(None, Some(far), None).delay,
                year,
                "{far}"
            );
        }
        for bad in ["-1", "NaN", "-inf", "", "1e300e"] {
            assert_eq!(
                RetryAdvice::parse(Some(bad), None, None).delay,
                None,
                "{bad}"
            );
            assert_eq!(
                RetryAdvice::parse(None, Some(bad), None).delay,
                None,
                "{bad}"
            );
        }
        for date in [
            "Fri, 31 Dec 9999 23:59:59 GMT",
            "Wed, 21 Oct 999999999999999 07:28:00 GMT",
            "Wed, 99999999999 Oct 2030 07:28:00 GMT",
            "Wed, 21 Oct 2030 9999999999999:28:00 GMT",
        ] {
            let delay = RetryAdvice::parse(None, Some(date), None).delay;
            assert!(delay.is_none_or(|d| d <= longest), "{date}: {delay:?}");
        }
        let far = RetryAdvice::parse(None, Some("Fri, 31 Dec 9999 23:59:59 GMT"), None);
        assert_eq!(far.delay, year);
    }

    #[test]
    fn error_events_of_each_wire_format() {
        let anthropic = error_event(
            r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#,
        )
        .unwrap();
        assert!(anthropic.retryable && anthropic.message.contains("Overloaded"));
        let chat =
            error_event(r#"{"error":{"message":"bad","type":"invalid_request_error"}}"#).unwrap();
        assert!(!chat.retryable);
        let failed = error_event(r#"{"type":"response.failed","response":{"error":{"code":"server_error","message":"oops"}}}"#).unwrap();
        assert!(failed.retryable);
        assert!(error_event(r#"{"type":"message_start","message":{}}"#).is_none());
        assert!(error_event(r#"{"choices":[{"delta":{"content":"error"}}]}"#).is_none());
    }

    #[test]
    fn http_dates() {
        assert_eq!(parse_http_date("Thu, 01 Jan 1970 00:00:00 GMT"), Some(0));
        assert_eq!(
            parse_http_date("Wed, 21 Oct 2026 07:28:00 GMT"),
            Some(1_792_567_680)
        );
        assert_eq!(parse_http_date("Wed, 21 Oct 2026 07:28:00 CET"), None);
    }

    #[test]
    fn backoff_grows_and_is_capped() {
        for attempt in 1..12 {
            let delay = backoff(attempt).as_secs_f64();
            let base = (0.5 * 2f64.powi(attempt as i32 - 1)).min(8.0);
            assert!(
                delay > base * 0.75 - 1e-9 && delay <= base + 1e-9,
                "{attempt}: {delay}"
            );
        }
    }
}

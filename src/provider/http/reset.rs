//! When a provider's limit resets, from what a refusal says: the
//! rate-limit headers of OpenAI (`x-ratelimit-reset-requests` and
//! `-tokens`, as durations such as `6m0s`), Anthropic
//! (`anthropic-ratelimit-*-reset`, RFC 3339 times) and others
//! (`x-ratelimit-reset`, seconds or an epoch time), and the body's
//! fields (`resets_at`, `resets_in_seconds`, Gemini's `retryDelay`) or
//! words ("try again in 6m12s", "resets at 2026-12-02T14:05:00Z").
//! The answer is how long from now; a time already past is zero.

use std::time::Duration;

/// The longest wait a server is taken at its word for: a year (usage
/// limits of subscriptions reset weekly or monthly). A longer one, an
/// infinite one included, is read as a year: the limit is real, only the
/// number is not, and whether the turn waits that long is the config's
/// `max_wait_minutes` to say (five hours by default), so such a refusal
/// fails the turn with a date that can be shown.
pub(super) const LONGEST: f64 = 365.0 * 86_400.0;

/// How long until the limit the headers describe resets: of the limits
/// with nothing remaining, the one that resets last (the request needs
/// them all); when none says it is exhausted, the latest of all.
pub(super) fn from_headers(get: &dyn Fn(&str) -> Option<String>) -> Option<Duration> {
    const KINDS: [&str; 4] = ["requests", "tokens", "input-tokens", "output-tokens"];
    let mut all = Vec::new();
    for kind in KINDS {
        for (prefix, is_time) in [("x-ratelimit", false), ("anthropic-ratelimit", true)] {
            let Some(value) = get(&format!("{prefix}-reset-{kind}"))
                .or_else(|| get(&format!("{prefix}-{kind}-reset")))
            else {
                continue;
            };
            let reset = match is_time {
                true => crate::clock::parse_rfc3339(&value).and_then(until),
                false => duration(&value),
            };
            let remaining = get(&format!("{prefix}-remaining-{kind}"))
                .or_else(|| get(&format!("{prefix}-{kind}-remaining")));
            let exhausted = remaining.is_some_and(|r| r.trim().parse::<f64>() == Ok(0.0));
            if let Some(reset) = reset {
                all.push((exhausted, reset));
            }
        }
    }
    if let Some(value) = get("x-ratelimit-reset") {
        let reset = value.trim().parse().ok().and_then(seconds_or_epoch);
        all.extend(reset.map(|r| (false, r)));
    }
    let exhausted = all.iter().filter(|(e, _)| *e).map(|(_, r)| *r).max();
    exhausted.or_else(|| all.iter().map(|(_, r)| *r).max())
}

/// How long until the limit an error body names resets.
pub(super) fn from_body(bytes: &[u8]) -> Option<Duration> {
    let text = String::from_utf8_lossy(bytes);
    let value = serde_json::from_str::<serde_json::Value>(&text).ok();
    value
        .as_ref()
        .and_then(|value| from_fields(value, 0))
        .or_else(|| from_words(&text))
}

fn from_fields(value: &serde_json::Value, depth: usize) -> Option<Duration> {
    use serde_json::Value;
    match value {
        Value::Object(map) if depth < 6 => {
            map.iter()
                .find_map(|(key, field)| match (key.as_str(), field) {
                    ("resets_at" | "reset_at" | "resetsAt" | "resetAt", Value::Number(n)) => {
                        seconds_or_epoch(n.as_f64()?)
                    }
                    ("resets_at" | "reset_at" | "resetsAt" | "resetAt", Value::String(s)) => {
                        until(crate::clock::parse_rfc3339(s)?)
                    }
                    (
                        "resets_in_seconds" | "reset_in_seconds" | "retry_after" | "retryAfter",
                        Value::Number(n),
                    ) => seconds(n.as_f64()?),
                    ("retryDelay" | "retry_delay", Value::String(s)) => duration(s),
                    _ => from_fields(field, depth + 1),
                })
        }
        Value::Array(items) if depth < 6 => items
            .iter()
            .take(16)
            .find_map(|v| from_fields(v, depth + 1)),
        Value::String(s) => from_words(s),
        _ => None,
    }
}

/// "try again in 6m12.5s", "retry after 20 seconds", "resets at
/// 2026-12-02T14:05:00Z" and their kin.
fn from_words(text: &str) -> Option<Duration> {
    let lower = text.get(..text.len().min(4096))?.to_ascii_lowercase();
    for phrase in ["try again in ", "retry in ", "retry after ", "resets in "] {
        if let Some(at) = lower.find(phrase) {
            let rest = &lower[at + phrase.len()..];
            let token: String = rest
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '.' || *c == ' ')
                .take(32)
                .collect();
            if let Some(found) = duration(&token.replace(' ', "")) {
                return Some(found);
            }
        }
    }
    for phrase in ["try again at ", "resets at ", "reset at "] {
        if let Some(at) = lower.find(phrase) {
            let rest = &text[at + phrase.len()..];
            let end = rest.find(|c: char| c.is_whitespace() || c == '"' || c == ',');
            let time = rest[..end.unwrap_or(rest.len())].trim_end_matches('.');
            if let Some(found) = crate::clock::parse_rfc3339(time).and_then(until) {
                return Some(found);
            }
        }
    }
    None
}

/// `6m0s`, `1h2m3.5s`, `20ms`, `36s`, `1.5` (seconds), and words:
/// `20seconds`, `5minutes`, `2hours` (spaces already removed).
pub(super) fn duration(text: &str) -> Option<Duration> {
    let text = text.trim();
    if let Ok(plain) = text.parse::<f64>() {
        return seconds(plain);
    }
    let mut total = 0.0;
    let mut rest = text;
    let mut any = false;
    while let Some(first) = rest.chars().next() {
        if !first.is_ascii_digit() {
            // The end of the duration: "6m12s." or "20s, please".
            match any {
                true => break,
                false => return None,
            }
        }
        let digits = rest
            .find(|c: char| !c.is_ascii_digit() && c != '.')
            .unwrap_or(rest.len());
        let number: f64 = rest[..digits].parse().ok()?;
        rest = &rest[digits..];
        let unit = rest
            .find(|c: char| !c.is_ascii_alphabetic())
            .unwrap_or(rest.len());
        let scale = match &rest[..unit] {
            "ms" | "milliseconds" => 0.001,
            "s" | "sec" | "secs" | "second" | "seconds" => 1.0,
            "m" | "min" | "mins" | "minute" | "minutes" => 60.0,
            "h" | "hr" | "hour" | "hours" => 3600.0,
            _ => return None,
        };
        total += number * scale;
        any = true;
        rest = &rest[unit..];
    }
    any.then_some(())?;
    seconds(total)
}

/// A number of seconds a server sent, as a wait: none when it is
/// negative or not a number, at most [`LONGEST`]. Never a panic
/// (`Duration::from_secs_f64` panics past its range).
pub(super) fn seconds(value: f64) -> Option<Duration> {
    if value.is_nan() || value < 0.0 {
        return None;
    }
    Some(Duration::from_secs_f64(value.min(LONGEST)))
}

/// A number that is either a delay in seconds or a time since the epoch
/// (in seconds past 10⁹, in milliseconds past 10¹²).
fn seconds_or_epoch(value: f64) -> Option<Duration> {
    match value {
        v if v >= 1e12 => until(v as i64),
        v if v >= 1e9 => until((v * 1000.0) as i64),
        v => seconds(v),
    }
}

/// From now until a time in milliseconds since the epoch (zero if past).
fn until(ms: i64) -> Option<Duration> {
    let left = ms.saturating_sub(crate::clock::now_ms()).max(0) as f64 / 1000.0;
    seconds(left)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn near(found: Option<Duration>, secs: f64) -> bool {
        found.is_some_and(|d| (d.as_secs_f64() - secs).abs() < 2.0)
    }

    fn headers<'a>(pairs: &'a [(&'a str, String)]) -> impl Fn(&str) -> Option<String> + 'a {
        move |name| {
            pairs
                .iter()
                .find(|(n, _)| *n == name)
                .map(|(_, v)| v.clone())
        }
    }

    #[test]
    fn durations_in_every_spelling() {
        assert_eq!(duration("6m0s"), Some(Duration::from_secs(360)));
        assert_eq!(duration("1h2m3.5s"), Some(Duration::from_secs_f64(3723.5)));
        assert_eq!(duration("20ms"), Some(Duration::from_millis(20)));
        assert_eq!(duration("36s"), Some(Duration::from_secs(36)));
        assert_eq!(duration("1.5"), Some(Duration::from_millis(1500)));
        assert_eq!(duration("20seconds."), Some(Duration::from_secs(20)));
        for bad in ["", "soon", "-5", "5x", "NaN", "-inf", "1e300s", "1.2.3s"] {
            assert_eq!(duration(bad), None, "{bad}");
        }
        // Absurdly long: a year, the longest wait believed.
        let year = Some(Duration::from_secs_f64(LONGEST));
        for far in [
            "99999999999",
            "inf",
            "1e300",
            "18446744073709551616",
            "9999999999h",
        ] {
            assert_eq!(duration(far), year, "{far}");
        }
    }

    #[test]
    fn the_exhausted_limit_decides() {
        let now = crate::clock::now_ms();
        let pairs = [
            ("x-ratelimit-remaining-requests", "0".to_string()),
            ("x-ratelimit-reset-requests", "6m0s".to_string()),
            ("x-ratelimit-remaining-tokens", "4000".to_string()),
            ("x-ratelimit-reset-tokens", "2h".to_string()),
        ];
        assert!(near(from_headers(&headers(&pairs)), 360.0));
        let anthropic = [
            (
                "anthropic-ratelimit-tokens-reset",
                crate::clock::rfc3339(now + 600_000),
            ),
            ("anthropic-ratelimit-tokens-remaining", "0".to_string()),
            (
                "anthropic-ratelimit-requests-reset",
                crate::clock::rfc3339(now + 60_000),
            ),
        ];
        assert!(near(from_headers(&headers(&anthropic)), 600.0));
        let epoch = [("x-ratelimit-reset", ((now / 1000) + 120).to_string())];
        assert!(near(from_headers(&headers(&epoch)), 120.0));
        let delta = [("x-ratelimit-reset", "45".to_string())];
        assert!(near(from_headers(&headers(&delta)), 45.0));
        assert_eq!(from_headers(&headers(&[])), None);
        let garbage = [("anthropic-ratelimit-tokens-reset", "tomorrow".to_string())];
        assert_eq!(from_headers(&headers(&garbage)), None);
    }

    #[test]
    fn bodies_name_resets_in_fields_and_words() {
        let now = crate::clock::now_ms();
        let codex = format!(
            r#"{{"error":{{"type":"usage_limit_reached","resets_at":{}}}}}"#,
            now / 1000 + 900
        );
        assert!(near(from_body(codex.as_bytes()), 900.0));
        let gemini = br#"{"error":{"code":429,"status":"RESOURCE_EXHAUSTED","details":[{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"36s"}]}}"#;
        assert!(near(from_body(gemini), 36.0));
        let openai = br#"{"error":{"message":"Rate limit reached for gpt-4.1 on tokens per min. Please try again in 6m12.5s. Visit ...","code":"rate_limit_exceeded"}}"#;
        assert!(near(from_body(openai), 372.5));
        let at = format!(
            "Usage limit reached; it resets at {}.",
            crate::clock::rfc3339(now + 3_600_000)
        );
        assert!(near(from_body(at.as_bytes()), 3600.0));
        assert!(near(from_body(b"please retry after 20 seconds"), 20.0));
        assert_eq!(from_body(br#"{"error":{"message":"slow down"}}"#), None);
        assert_eq!(from_body(b"try again in a while"), None);
        let past = format!(r#"{{"resets_at":"{}"}}"#, crate::clock::rfc3339(now - 5000));
        assert_eq!(from_body(past.as_bytes()), Some(Duration::ZERO));
    }

    #[test]
    fn absurd_resets_are_at_most_a_year_and_never_panic() {
        let year = LONGEST;
        let absurd = [
            "1e300",
            "-1",
            "NaN",
            "inf",
            "-inf",
            "18446744073709551616",
            "99999999999999999999999",
            "1e17",
        ];
        for value in absurd {
            for name in [
                "x-ratelimit-reset",
                "x-ratelimit-reset-requests",
                "anthropic-ratelimit-tokens-reset",
            ] {
                let pairs = [(name, value.to_string())];
                let found = from_headers(&headers(&pairs));
                assert!(
                    found.is_none_or(|d| d.as_secs_f64() <= year),
                    "{name}: {value} gave {found:?}"
                );
            }
            let body =
                format!(r#"{{"error":{{"resets_in_seconds":{value},"resets_at":{value}}}}}"#);
            let found = from_body(body.as_bytes());
            assert!(found.is_none_or(|d| d.as_secs_f64() <= year), "{body}");
        }
        // Far in the future, as an epoch time or a date: a year at most.
        let far = [("x-ratelimit-reset", "1e300".to_string())];
        assert!(near(from_headers(&headers(&far)), year));
        let date = [(
            "anthropic-ratelimit-tokens-reset",
            "9999-12-31T23:59:59Z".to_string(),
        )];
        assert!(near(from_headers(&headers(&date)), year));
        assert!(near(from_body(b"it resets at 9999-12-31T23:59:59Z"), year));
        assert!(near(from_body(br#"{"resets_at": 1e300}"#), year));
        assert_eq!(from_body(br#"{"resets_in_seconds": -1}"#), None);
    }
}

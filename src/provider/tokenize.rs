//! A local server's own token count: llama.cpp's `POST /tokenize`
//! (`{"content": …}` → `{"tokens": […]}`), asked only of a server on
//! this machine (127.0.0.1, localhost, ::1), for at most 2 MiB of text,
//! with a short timeout that a cancel cuts; a server without it (any
//! other answer) is not asked again, and the last count is kept.

use crate::cancel::CancelToken;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Mutex;
use std::time::Duration;

/// The most text sent to be counted.
const TEXT_LIMIT: usize = 2 << 20;

/// The most bytes of the answer read (a few bytes per token).
const ANSWER_LIMIT: u64 = 32 << 20;

const TIMEOUT: Duration = Duration::from_secs(5);

/// Whether the server counts tokens, as learnt (0: not asked yet).
const OFFERED: u8 = 1;
const ABSENT: u8 = 2;

#[derive(Default)]
pub(crate) struct Tokenizer {
    state: AtomicU8,
    /// The last text's hash and its count.
    last: Mutex<Option<(u64, u64)>>,
}

impl Tokenizer {
    /// The tokens of `text` as the server at `base_url` counts them;
    /// `None` when it is not local, has no tokenizer, or did not answer
    /// in time.
    pub(crate) fn count(
        &self,
        base_url: &str,
        trust: &crate::net::Trust,
        text: &str,
        cancel: &CancelToken,
    ) -> Option<u64> {
        if self.state.load(Ordering::Relaxed) == ABSENT || text.len() > TEXT_LIMIT {
            return None;
        }
        let root = base_url.trim_end_matches('/').trim_end_matches("/v1");
        let host = root.split("://").nth(1)?.split('/').next()?;
        let local = ["127.0.0.1", "localhost", "[::1]"]
            .iter()
            .any(|name| host == *name || host.starts_with(&format!("{name}:")));
        if !local {
            return None;
        }
        let hash = {
            use std::hash::{Hash, Hasher};
            let mut hasher = std::collections::hash_map::DefaultHasher::new();
            text.hash(&mut hasher);
            hasher.finish()
        };
        if let Some((seen, tokens)) = *self.last.lock().ok()? {
            if seen == hash {
                return Some(tokens);
            }
        }
        let url = format!("{root}/tokenize");
        let agent = crate::net::agent(
            &url,
            crate::net::agent_config(&url, trust)
                .timeout_global(Some(TIMEOUT))
                .http_status_as_error(false)
                .build(),
        );
        {
            let agent = agent.clone();
            cancel.on_cancel(move || agent.shutdown());
        }
        let body = serde_json::json!({ "content": text }).to_string();
        let answer = agent
            .post(&url)
            .header("Content-Type", "application/json")
            .send(body);
        let tokens = match answer {
            Ok(mut response) if response.status() == 200 => response
                .body_mut()
                .with_config()
                .limit(ANSWER_LIMIT)
                .read_to_string()
                .ok()
                .and_then(|text| serde_json::from_str::<serde_json::Value>(&text).ok())
                .and_then(|value| Some(value.get("tokens")?.as_array()?.len() as u64)),
            Ok(_) => None,
            // Not reached, or cancelled: maybe next time.
            Err(error) => {
                log::debug!("{url}: {error}");
                return None;
            }
        };
        let Some(tokens) = tokens else {
            log::debug!("{url} counts no tokens; the estimate is used");
            self.state.store(ABSENT, Ordering::Relaxed);
            return None;
        };
        self.state.store(OFFERED, Ordering::Relaxed);
        if let Ok(mut last) = self.last.lock() {
            *last = Some((hash, tokens));
        }
        Some(tokens)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_local_server_with_a_tokenizer_is_asked_and_once_without() {
        let cancel = CancelToken::new();
        let tokenizer = Tokenizer::default();
        // Not local: nothing is sent (the name does not even resolve).
        assert_eq!(
            tokenizer.count(
                "http://models.invalid/v1",
                &Default::default(),
                "hi",
                &cancel
            ),
            None
        );
        assert_eq!(tokenizer.state.load(Ordering::Relaxed), 0);
        let huge = "x".repeat(TEXT_LIMIT + 1);
        assert_eq!(
            tokenizer.count("http://127.0.0.1:9/v1", &Default::default(), &huge, &cancel),
            None
        );
        // A server whose answer counts nothing is not asked again.
        let (base, server) = crate::provider::testing::serve_once("data: nope\n\n", "/v1");
        assert_eq!(
            tokenizer.count(&base, &Default::default(), "hello", &cancel),
            None
        );
        let request = server.join().unwrap();
        assert!(request.starts_with("POST /tokenize "), "{request}");
        assert!(request.ends_with(r#"{"content":"hello"}"#), "{request}");
        assert_eq!(tokenizer.state.load(Ordering::Relaxed), ABSENT);
        assert_eq!(
            tokenizer.count(&base, &Default::default(), "hello", &cancel),
            None
        );
    }
}

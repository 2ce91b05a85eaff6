//! Model lists: what a provider's list endpoint says it serves, and which
//! of those ids are chat models at all.
//!
//! Chat Completions and Responses servers answer `GET {base}/models` with
//! `{"data": [{"id": …}]}` and a bearer key; Anthropic-style servers answer
//! `GET {base}/v1/models` with `{"data": [{"id": …, "display_name": …}]}`
//! and take the key as `x-api-key` with an `anthropic-version` header.

use crate::provider::kind::ProviderKind;
use serde_json::Value;
use std::io::Read;
use std::time::Duration;

/// How long a list request may take: it runs while the agent starts.
const LIST_TIMEOUT: Duration = Duration::from_secs(3);

/// The most bytes of a model list read (a gateway with wildcard routes
/// lists thousands of ids; that is well under this).
const LIST_BYTES: u64 = 4 * 1024 * 1024;

/// One model a server lists.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct Listed {
    pub id: String,
    /// A name for people, when the server gives one.
    pub name: Option<String>,
    /// The context window, when the server says (in tokens).
    pub context_window: Option<u64>,
    /// The most output tokens, when the server says.
    pub max_output: Option<u64>,
    /// Whether it takes tools, when the server says (see [`tools_of`]).
    pub tools: Option<bool>,
}

/// Where servers put a model's context window in their list entries:
/// OpenRouter, LM Studio and Together (`context_length`), OpenRouter's
/// `top_provider`, Groq and others (`context_window`), vLLM
/// (`max_model_len`), LM Studio's native list (`max_context_length`),
/// llama.cpp (`meta.n_ctx_train`, or `n_ctx`), gateways' model info
/// (`max_input_tokens`, at the top or under LiteLLM's `model_info`).
const WINDOW_FIELDS: [&[&str]; 9] = [
    &["context_length"],
    &["top_provider", "context_length"],
    &["context_window"],
    &["max_model_len"],
    &["max_context_length"],
    &["meta", "n_ctx"],
    &["meta", "n_ctx_train"],
    &["max_input_tokens"],
    &["model_info", "max_input_tokens"],
];

/// Where they put the output limit. LiteLLM's `model_info.max_tokens` is
/// its older name for the output limit (the window is `max_input_tokens`);
/// a bare `max_tokens` is read only in Anthropic's shape of a model
/// (`"type": "model"`, as Anthropic and LiteLLM's Anthropic route list
/// them), where it is the output limit; elsewhere servers mean either.
const OUTPUT_FIELDS: [&[&str]; 5] = [
    &["top_provider", "max_completion_tokens"],
    &["max_output_tokens"],
    &["max_completion_tokens"],
    &["model_info", "max_output_tokens"],
    &["model_info", "max_tokens"],
];

/// Whether an entry says it takes tools: LiteLLM's
/// `supports_function_calling` (at the top or under `model_info`),
/// OpenRouter's `supported_parameters` (`tools` among them or not), a
/// `capabilities` list (`tools`, `tool_use`, `function_calling`) or object
/// (Mistral's `function_calling`). `None` when it says nothing.
pub(crate) fn tools_of(entry: &Value) -> Option<bool> {
    let flag = entry["supports_function_calling"]
        .as_bool()
        .or_else(|| entry["model_info"]["supports_function_calling"].as_bool())
        .or_else(|| entry["capabilities"]["function_calling"].as_bool());
    if flag.is_some() {
        return flag;
    }
    let names = |list: &Value| -> Option<bool> {
        let list = list.as_array().filter(|list| !list.is_empty())?;
        Some(list.iter().filter_map(Value::as_str).any(|name| {
            matches!(
                name,
                "tools" | "tool_use" | "tool_choice" | "function_calling"
            )
        }))
    };
    names(&entry["supported_parameters"]).or_else(|| names(&entry["capabilities"]))
}

/// Whether an entry's `mode` (LiteLLM's model info: `chat`, `embedding`,
/// `image_generation`, `audio_speech`, `rerank`, …) says it does not chat.
fn mode_is_not_chat(entry: &Value) -> bool {
    let mode = entry["mode"]
        .as_str()
        .or_else(|| entry["model_info"]["mode"].as_str());
    mode.is_some_and(|mode| !matches!(mode, "chat" | "responses"))
}

/// The first plausible token count at one of `fields`.
fn limit_of(entry: &Value, fields: &[&[&str]]) -> Option<u64> {
    fields.iter().find_map(|path| {
        let value = path.iter().fold(entry, |value, key| &value[*key]);
        value
            .as_u64()
            .or_else(|| value.as_str().and_then(|text| text.parse().ok()))
            .filter(|tokens| (1_024..=20_000_000).contains(tokens))
    })
}

pub(crate) use super::catalog::{known_limits, known_price};

/// The list endpoint of a provider kind at `base`.
pub(crate) fn list_url(kind: ProviderKind, base: &str) -> String {
    let base = base.trim_end_matches('/');
    match kind {
        ProviderKind::Anthropic if base.ends_with("/v1") => format!("{base}/models?limit=1000"),
        ProviderKind::Anthropic => format!("{base}/v1/models?limit=1000"),
        ProviderKind::Openai | ProviderKind::Responses => format!("{base}/models"),
    }
}

/// Why a model list could not be had, for a caller that acts on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ListErrorKind {
    /// No answer: the connection, the proxy or the reading failed.
    Unreachable,
    /// An answer with this HTTP status other than 200.
    Status(u16),
    /// An answer larger than the cap.
    TooLarge,
    /// An answer that is not JSON (often an HTML page: a wrong path).
    NotJson,
}

/// Why a model list could not be had: the kind, and the words a person
/// can act on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ListError {
    pub(crate) kind: ListErrorKind,
    message: String,
}

impl ListError {
    fn new(kind: ListErrorKind, message: String) -> ListError {
        ListError { kind, message }
    }
}

impl std::fmt::Display for ListError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for ListError {}

impl From<ListError> for String {
    fn from(error: ListError) -> String {
        error.message
    }
}

/// Asks the server which models it serves, in the server's own order,
/// chat models only. An error says why in words a person can act on.
pub(crate) fn list(
    kind: ProviderKind,
    base: &str,
    key: Option<&str>,
    trust: &crate::net::Trust,
) -> Result<Vec<Listed>, ListError> {
    use ListErrorKind::{NotJson, Status, TooLarge, Unreachable};
    let url = list_url(kind, base);
    let agent = crate::net::agent(
        &url,
        super::http::agent_config(&url, trust)
            .timeout_global(Some(LIST_TIMEOUT))
            .http_status_as_error(false)
            .build(),
    );
    super::http::map_large_buffers();
    let mut request = agent.get(&url);
    match (kind, key) {
        (ProviderKind::Anthropic, key) => {
            request = request.header("anthropic-version", super::anthropic::API_VERSION);
            if let Some(key) = key {
                request = request.header("x-api-key", key);
            }
        }
        (_, Some(key)) => request = request.header("Authorization", format!("Bearer {key}")),
        (_, None) => {}
    }
    let response = request.call().map_err(|err| {
        ListError::new(
            Unreachable,
            crate::net::proxy::failure(&url, &err)
                .unwrap_or_else(|| format!("GET {url} failed: {err}")),
        )
    })?;
    let status = response.status().as_u16();
    let mut bytes = Vec::new();
    response
        .into_body()
        .into_reader()
        .take(LIST_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|err| {
            ListError::new(
                Unreachable,
                format!("reading the model list of {url} failed: {err}"),
            )
        })?;
    if status != 200 {
        return Err(ListError::new(
            Status(status),
            format!("GET {url} answered HTTP {status}"),
        ));
    }
    if bytes.len() as u64 > LIST_BYTES {
        return Err(ListError::new(
            TooLarge,
            format!("the model list of {url} is larger than 4 MiB"),
        ));
    }
    let value: Value = serde_json::from_slice(&bytes).map_err(|err| {
        ListError::new(
            NotJson,
            format!("the model list of {url} is not JSON: {err}"),
        )
    })?;
    Ok(parse(&value))
}

/// The chat models of a list answer, in its order, without repeats.
pub(crate) fn parse(value: &Value) -> Vec<Listed> {
    let mut listed: Vec<Listed> = Vec::new();
    let entries = value["data"]
        .as_array()
        .or_else(|| value["models"].as_array());
    for entry in entries.into_iter().flatten() {
        let Some(id) = entry["id"]
            .as_str()
            .or_else(|| entry["name"].as_str())
            .or_else(|| entry["model_name"].as_str())
        else {
            continue;
        };
        if id.is_empty() || id.len() > 200 || id.chars().any(char::is_control) {
            continue;
        }
        if !is_chat_model(id) || mode_is_not_chat(entry) || listed.iter().any(|l| l.id == id) {
            continue;
        }
        let name = entry["display_name"]
            .as_str()
            .filter(|name| !name.is_empty() && name.len() <= 200)
            .map(str::to_string);
        listed.push(Listed {
            id: id.to_string(),
            name,
            context_window: limit_of(entry, &WINDOW_FIELDS),
            max_output: limit_of(entry, &OUTPUT_FIELDS).or_else(|| {
                (entry["type"] == "model")
                    .then(|| limit_of(entry, &[&["max_tokens"]]))
                    .flatten()
            }),
            tools: tools_of(entry),
        });
    }
    listed
}

/// Words that mark a model that does not chat: embeddings, speech and
/// transcription, images and video, moderation, realtime audio, rerankers
/// and the old completion-only engines.
const NOT_CHAT: [&str; 22] = [
    "embed",
    "tts",
    "speech",
    "whisper",
    "transcri",
    "audio",
    "dall-e",
    "image",
    "imagen",
    "stable-diffusion",
    "sdxl",
    "flux",
    "sora",
    "video",
    "moderation",
    "realtime",
    "rerank",
    "davinci",
    "babbage",
    "ada-0",
    "guard",
    "ocr",
];

/// Whether an id names a model that takes a conversation. Gateways list
/// routes such as `1024-x-1024/dall-e-3` or `hd/…`: a size or quality
/// segment marks an image route.
pub(crate) fn is_chat_model(id: &str) -> bool {
    let lower = id.to_ascii_lowercase();
    if NOT_CHAT.iter().any(|word| lower.contains(word)) {
        return false;
    }
    !lower.split('/').any(|segment| {
        matches!(segment, "hd" | "standard" | "low" | "medium" | "high") || is_size(segment)
    })
}

/// Words that mark a model that chats but takes no tools: search-only
/// models (`gpt-4o-search-preview`, Perplexity's `sonar`), deep research
/// and computer use (they need their own built-in tools), and ChatGPT's
/// own `chatgpt-4o-latest`.
const NO_TOOLS: [&str; 5] = [
    "search",
    "sonar",
    "deep-research",
    "computer-use",
    "chatgpt-",
];

/// Whether a model may be the default: a chat model whose id does not
/// mark it as taking no tools, and whose list entry does not say so.
pub(crate) fn takes_tools(id: &str, tools: Option<bool>) -> bool {
    let lower = id.to_ascii_lowercase();
    is_chat_model(id) && tools != Some(false) && !NO_TOOLS.iter().any(|word| lower.contains(word))
}

/// How good a default a model is, lowest first, so the same ids give the
/// same default whatever order a server lists them in: the catalog's
/// usual models of the provider's kind (in that order), then those of the
/// other kinds, then a model the list says takes tools, then one the
/// catalog knows, then by id.
pub(crate) fn default_rank(
    kind: ProviderKind,
    id: &str,
    tools: Option<bool>,
) -> (usize, bool, bool, String) {
    use super::catalog::official_models;
    let name = id.rsplit('/').next().unwrap_or(id);
    let others = [
        ProviderKind::Openai,
        ProviderKind::Responses,
        ProviderKind::Anthropic,
    ]
    .into_iter()
    .filter(|other| *other != kind);
    let usual = std::iter::once(kind)
        .chain(others)
        .enumerate()
        .find_map(|(at, kind)| {
            let place = official_models(kind).iter().position(|m| *m == name)?;
            Some(at * 100 + place)
        })
        .unwrap_or(usize::MAX);
    (
        usual,
        tools != Some(true),
        super::catalog::known(id).is_none(),
        id.to_string(),
    )
}

/// The default among the models a server lists: the best by
/// [`default_rank`] of those that [`takes_tools`]; `None` when none does.
pub(crate) fn pick_default(kind: ProviderKind, listed: &[Listed]) -> Option<&Listed> {
    listed
        .iter()
        .filter(|l| takes_tools(&l.id, l.tools))
        .min_by_key(|l| default_rank(kind, &l.id, l.tools))
}

/// `1024-x-1024`, `512x512`, `1792-x-1024`.
fn is_size(segment: &str) -> bool {
    let compact = segment.replace("-x-", "x");
    let Some((width, height)) = compact.split_once('x') else {
        return false;
    };
    !width.is_empty()
        && !height.is_empty()
        && width.bytes().all(|b| b.is_ascii_digit())
        && height.bytes().all(|b| b.is_ascii_digit())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn absurd_context_windows_are_no_windows() {
        for absurd in [
            "1e300",
            "-1",
            "\"NaN\"",
            "18446744073709551616",
            "18446744073709551615",
            "\"99999999999999999999\"",
            "0",
            "131072.5",
        ] {
            let entry: Value =
                serde_json::from_str(&format!(r#"{{"context_length": {absurd}}}"#)).unwrap();
            assert_eq!(limit_of(&entry, &WINDOW_FIELDS), None, "{absurd}");
        }
        let entry = json!({"context_length": "131072"});
        assert_eq!(limit_of(&entry, &WINDOW_FIELDS), Some(131_072));
    }

    #[test]
    fn non_chat_ids_are_filtered() {
        for id in [
            "text-embedding-3-small",
            "tts-1-hd",
            "whisper-1",
            "gpt-4o-transcribe",
            "gpt-4o-mini-tts",
            "dall-e-3",
            "gpt-image-1",
            "1024-x-1024/dall-e-2",
            "256x256/some-model",
            "hd/1792-x-1024/dall-e-3",
            "omni-moderation-latest",
            "gpt-4o-realtime-preview",
            "gpt-4o-audio-preview",
            "babbage-002",
            "cohere/rerank-v3.5",
            "sora-2",
            "nomic-embed-text:latest",
        ] {
            assert!(!is_chat_model(id), "{id}");
        }
        for id in [
            "gpt-4.1-mini",
            "claude-sonnet-4-5",
            "anthropic/claude-3-7-sonnet",
            "qwen3:8b",
            "deepseek-r1",
            "o3-mini",
            "llama-3.3-70b-instruct",
            "mistral-large-2411",
        ] {
            assert!(is_chat_model(id), "{id}");
        }
    }

    #[test]
    fn both_list_shapes_parse_in_server_order_without_repeats() {
        let openai = json!({"object": "list", "data": [
            {"id": "zeta", "object": "model"}, {"id": "alpha"}, {"id": "zeta"},
            {"id": "text-embedding-3-large"}, {"object": "no id"}, {"id": "bad\nid"}
        ]});
        let ids: Vec<String> = parse(&openai).into_iter().map(|l| l.id).collect();
        assert_eq!(ids, ["zeta", "alpha"]);
        let anthropic = json!({"data": [
            {"type": "model", "id": "claude-opus-4-1", "display_name": "Claude Opus 4.1"}
        ], "has_more": false});
        assert_eq!(
            parse(&anthropic),
            [Listed {
                id: "claude-opus-4-1".into(),
                name: Some("Claude Opus 4.1".into()),
                ..Listed::default()
            }]
        );
        assert!(parse(&json!({"data": "nope"})).is_empty());
        assert_eq!(
            list_url(ProviderKind::Anthropic, "http://gw/v1/"),
            "http://gw/v1/models?limit=1000"
        );
        assert_eq!(
            list_url(ProviderKind::Anthropic, "http://gw"),
            "http://gw/v1/models?limit=1000"
        );
        assert_eq!(
            list_url(ProviderKind::Openai, "http://gw/v1"),
            "http://gw/v1/models"
        );
    }

    #[test]
    fn windows_come_from_the_servers_own_fields_or_the_table() {
        let list = json!({"data": [
            {"id": "a", "context_length": 131072, "top_provider": {"max_completion_tokens": 8192}},
            {"id": "b", "max_model_len": 32768},
            {"id": "c", "meta": {"n_ctx_train": 4096}},
            {"id": "d", "context_window": "65536"},
            {"id": "e", "context_length": 12},
            {"id": "f"}
        ]});
        let windows: Vec<Option<u64>> = parse(&list).iter().map(|l| l.context_window).collect();
        assert_eq!(
            windows,
            [
                Some(131072),
                Some(32768),
                Some(4096),
                Some(65536),
                None,
                None
            ]
        );
        assert_eq!(parse(&list)[0].max_output, Some(8192));
        assert_eq!(
            known_limits("anthropic/claude-sonnet-4-5-20250929"),
            Some((200_000, 64_000))
        );
        assert_eq!(known_limits("some-private-model"), None);
    }

    #[test]
    fn capability_info_and_litellm_model_info_are_read() {
        let list = json!({"data": [
            {"model_name": "gw-chat", "model_info": {"mode": "chat", "max_input_tokens": 128000,
             "max_output_tokens": 16384, "supports_function_calling": true}},
            {"model_name": "old-info", "model_info": {"mode": "chat", "max_tokens": 4096}},
            {"model_name": "gw-embed", "model_info": {"mode": "embedding"}},
            {"id": "router/x", "supported_parameters": ["temperature", "tools"]},
            {"id": "router/y", "supported_parameters": ["temperature"]},
            {"id": "mistral-z", "capabilities": {"completion_chat": true, "function_calling": false}},
            {"id": "plain"}
        ]});
        let parsed = parse(&list);
        let ids: Vec<&str> = parsed.iter().map(|l| l.id.as_str()).collect();
        assert_eq!(
            ids,
            [
                "gw-chat",
                "old-info",
                "router/x",
                "router/y",
                "mistral-z",
                "plain"
            ]
        );
        assert_eq!(
            (
                parsed[0].context_window,
                parsed[0].max_output,
                parsed[0].tools
            ),
            (Some(128000), Some(16384), Some(true))
        );
        assert_eq!(parsed[1].max_output, Some(4096));
        let tools: Vec<Option<bool>> = parsed.iter().map(|l| l.tools).collect();
        assert_eq!(
            tools,
            [Some(true), None, Some(true), Some(false), Some(false), None]
        );
    }

    #[test]
    fn an_anthropic_shaped_entry_gives_its_max_tokens_as_the_output_limit() {
        let list = json!({"data": [
            {"type": "model", "id": "claude-x", "display_name": "Claude X",
             "max_input_tokens": 200000, "max_tokens": 4096},
            {"id": "other-model", "max_tokens": 4096},
        ]});
        let parsed = parse(&list);
        assert_eq!(parsed[0].max_output, Some(4096));
        assert_eq!(parsed[0].context_window, Some(200000));
        // Not Anthropic's shape: a bare max_tokens may mean the window.
        assert_eq!(parsed[1].max_output, None);
    }

    #[test]
    fn the_default_is_stable_and_takes_tools() {
        let listed = |ids: &[&str]| -> Vec<Listed> {
            ids.iter()
                .map(|id| Listed {
                    id: id.to_string(),
                    ..Listed::default()
                })
                .collect()
        };
        let pick =
            |ids: &[&str]| pick_default(ProviderKind::Openai, &listed(ids)).map(|l| l.id.clone());
        // The same ids in any order give the same default.
        let ids = [
            "zeta-chat",
            "gpt-4o-search-preview",
            "alpha-chat",
            "gpt-3.5-turbo",
            "gpt-4.1-mini",
        ];
        let mut reversed = ids;
        reversed.reverse();
        assert_eq!(pick(&ids).as_deref(), Some("gpt-4.1-mini"));
        assert_eq!(pick(&reversed).as_deref(), Some("gpt-4.1-mini"));
        // A catalog model before an unknown one; unknown ones by id.
        assert_eq!(
            pick(&["zeta-chat", "qwen3:8b", "alpha"]).as_deref(),
            Some("qwen3:8b")
        );
        assert_eq!(pick(&["zeta-chat", "alpha"]).as_deref(), Some("alpha"));
        // A vendor prefix still finds the usual model.
        assert_eq!(
            pick(&["openai/gpt-4o", "openai/gpt-4.1-mini"]).as_deref(),
            Some("openai/gpt-4.1-mini")
        );
        // Never a model that takes no tools.
        for id in [
            "gpt-4o-search-preview",
            "perplexity/sonar-pro",
            "o3-deep-research",
            "chatgpt-4o-latest",
            "text-embedding-3-small",
        ] {
            assert!(!takes_tools(id, None), "{id}");
            assert_eq!(pick(&[id]), None, "{id}");
        }
        assert!(!takes_tools("house-model", Some(false)));
        let mut with_info = listed(&["a-model", "b-model"]);
        with_info[0].tools = Some(false);
        assert_eq!(
            pick_default(ProviderKind::Openai, &with_info).unwrap().id,
            "b-model"
        );
    }

    /// A server on 127.0.0.1 that answers one request with `status` and
    /// `body`; its base URL.
    fn answering(status: &'static str, body: &'static str) -> String {
        use std::io::{Read, Write};
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        std::thread::spawn(move || {
            if let Ok((mut stream, _)) = listener.accept() {
                let mut request = [0u8; 4096];
                let _ = stream.read(&mut request);
                let _ = write!(
                    stream,
                    "HTTP/1.1 {status}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                    body.len()
                );
            }
        });
        format!("http://127.0.0.1:{port}/v1")
    }

    #[test]
    fn a_failed_list_says_what_kind_of_failure() {
        let trust = crate::net::Trust::default();
        let base = answering("401 Unauthorized", "{}");
        let refused = list(ProviderKind::Openai, &base, Some("k"), &trust).unwrap_err();
        assert_eq!(refused.kind, ListErrorKind::Status(401));
        assert!(
            refused.to_string().ends_with("answered HTTP 401"),
            "{refused}"
        );
        let base = answering("200 OK", "<html>hello</html>");
        let page = list(ProviderKind::Openai, &base, None, &trust).unwrap_err();
        assert_eq!(page.kind, ListErrorKind::NotJson);
        assert!(page.to_string().contains("is not JSON"), "{page}");
    }
}

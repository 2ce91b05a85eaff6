//! The built-in catalog of well-known models: OpenAI's and Anthropic's, and
//! the open models people commonly serve locally (Ollama, llama.cpp, vLLM,
//! LM Studio). For each family: the context window, the output limit,
//! whether it takes images, whether it reasons and at which effort levels,
//! and the price per million tokens (input, cached input, output) as the
//! providers published it on [`PRICES_TAKEN`]. Open models carry no price:
//! served locally they cost nothing, and a host's own price is the user's
//! to configure.
//!
//! What the config file says of a model overrides the catalog, and what a
//! server's model list reports of the window overrides it too. Lookups go
//! by family, so a gateway's `vendor/` prefix, a date suffix or a size tag
//! (`qwen3:8b`) still finds the entry; the first family that matches
//! wins, so more specific families come first (a unit test checks that no
//! family hides a later one).

/// One model family.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Known {
    /// Matched by words against the model id without its vendor prefix
    /// (see [`words`]). A family starting with `o` (OpenAI's reasoning
    /// models) matches only at the start of the name, others anywhere.
    pub family: &'static str,
    pub window: u64,
    pub output: u64,
    pub images: bool,
    pub reasoning: bool,
    /// The effort levels it takes (empty: it reasons, but has no levels).
    pub efforts: &'static [&'static str],
    /// USD per million tokens: input, cached input, output.
    pub price: Option<(f64, Option<f64>, f64)>,
}

const GPT5: &[&str] = &["minimal", "low", "medium", "high"];
const THREE: &[&str] = &["low", "medium", "high"];
const NONE: &[&str] = &[];

const fn model(
    family: &'static str,
    window: u64,
    output: u64,
    images: bool,
    efforts: Option<&'static [&'static str]>,
    price: Option<(f64, Option<f64>, f64)>,
) -> Known {
    Known {
        family,
        window,
        output,
        images,
        reasoning: efforts.is_some(),
        efforts: match efforts {
            Some(levels) => levels,
            None => NONE,
        },
        price,
    }
}

/// The catalog, most specific families first: family, window, output
/// limit, images, effort levels (`None`: it does not reason), price.
#[rustfmt::skip]
pub(crate) const CATALOG: &[Known] = &[
    // OpenAI
    model("gpt-5-codex", 400_000, 128_000, true, Some(THREE), Some((1.25, Some(0.125), 10.00))),
    model("gpt-5-chat", 128_000, 16_384, true, None, Some((1.25, Some(0.125), 10.00))),
    model("gpt-5-nano", 400_000, 128_000, true, Some(GPT5), Some((0.05, Some(0.005), 0.40))),
    model("gpt-5-mini", 400_000, 128_000, true, Some(GPT5), Some((0.25, Some(0.025), 2.00))),
    model("gpt-5", 400_000, 128_000, true, Some(GPT5), Some((1.25, Some(0.125), 10.00))),
    model("gpt-4.1-nano", 1_047_576, 32_768, true, None, Some((0.10, Some(0.025), 0.40))),
    model("gpt-4.1-mini", 1_047_576, 32_768, true, None, Some((0.40, Some(0.10), 1.60))),
    model("gpt-4.1", 1_047_576, 32_768, true, None, Some((2.00, Some(0.50), 8.00))),
    model("gpt-4o-mini", 128_000, 16_384, true, None, Some((0.15, Some(0.075), 0.60))),
    model("gpt-4o", 128_000, 16_384, true, None, Some((2.50, Some(1.25), 10.00))),
    model("gpt-4-turbo", 128_000, 4_096, true, None, Some((10.00, None, 30.00))),
    model("gpt-3.5-turbo", 16_385, 4_096, false, None, Some((0.50, None, 1.50))),
    model("gpt-oss", 131_072, 32_768, false, Some(THREE), None),
    model("codex-mini", 200_000, 100_000, true, Some(THREE), Some((1.50, Some(0.375), 6.00))),
    model("o4-mini", 200_000, 100_000, true, Some(THREE), Some((1.10, Some(0.275), 4.40))),
    model("o3-pro", 200_000, 100_000, true, Some(THREE), Some((20.00, None, 80.00))),
    model("o3-mini", 200_000, 100_000, false, Some(THREE), Some((1.10, Some(0.55), 4.40))),
    model("o3", 200_000, 100_000, true, Some(THREE), Some((2.00, Some(0.50), 8.00))),
    model("o1-mini", 128_000, 65_536, false, Some(NONE), Some((1.10, Some(0.55), 4.40))),
    model("o1", 200_000, 100_000, true, Some(THREE), Some((15.00, Some(7.50), 60.00))),
    // Anthropic (effort levels become thinking budgets)
    model("claude-opus-4", 200_000, 32_000, true, Some(THREE), Some((15.00, Some(1.50), 75.00))),
    model("claude-4-opus", 200_000, 32_000, true, Some(THREE), Some((15.00, Some(1.50), 75.00))),
    model("claude-sonnet-4", 200_000, 64_000, true, Some(THREE), Some((3.00, Some(0.30), 15.00))),
    model("claude-4-sonnet", 200_000, 64_000, true, Some(THREE), Some((3.00, Some(0.30), 15.00))),
    model("claude-haiku-4", 200_000, 64_000, true, Some(THREE), Some((1.00, Some(0.10), 5.00))),
    model("claude-3-7-sonnet", 200_000, 64_000, true, Some(THREE), Some((3.00, Some(0.30), 15.00))),
    model("claude-3-5-haiku", 200_000, 8_192, true, None, Some((0.80, Some(0.08), 4.00))),
    model("claude-3-5-sonnet", 200_000, 8_192, true, None, Some((3.00, Some(0.30), 15.00))),
    model("claude-3-opus", 200_000, 4_096, true, None, Some((15.00, Some(1.50), 75.00))),
    model("claude-3-haiku", 200_000, 4_096, true, None, Some((0.25, Some(0.03), 1.25))),
    model("claude", 200_000, 4_096, false, None, None),
    // Open models, as served locally (their native windows; a server that
    // reports a smaller one, as llama.cpp and LM Studio do, is believed)
    model("qwen3-coder", 262_144, 65_536, false, None, None),
    model("qwen3", 32_768, 8_192, false, Some(NONE), None),
    model("qwq", 131_072, 32_768, false, Some(NONE), None),
    model("qwen2.5-vl", 32_768, 8_192, true, None, None),
    model("qwen2.5-coder", 32_768, 8_192, false, None, None),
    model("qwen2.5", 32_768, 8_192, false, None, None),
    model("deepseek-r1", 131_072, 32_768, false, Some(NONE), None),
    model("deepseek-v3", 131_072, 8_192, false, None, None),
    model("llama-3.2-vision", 131_072, 8_192, true, None, None),
    model("llama-3.3", 131_072, 8_192, false, None, None),
    model("llama-3.2", 131_072, 8_192, false, None, None),
    model("llama-3.1", 131_072, 8_192, false, None, None),
    model("gemma3", 131_072, 8_192, true, None, None),
    model("devstral", 131_072, 8_192, false, None, None),
    model("mistral-small", 32_768, 8_192, false, None, None),
    model("phi-4", 16_384, 4_096, false, None, None),
];

/// The id as words: without its vendor prefix, in lower case, split at
/// every separator and wherever letters meet digits, so `llama3.1:8b`,
/// `Llama-3.1-8B` and `llama-3.1` agree, while `gpt-4.1` stays apart from
/// `gpt-4-1106`.
fn words(id: &str) -> Vec<String> {
    let name = id.rsplit('/').next().unwrap_or(id).to_ascii_lowercase();
    let mut words: Vec<String> = Vec::new();
    let mut previous: Option<bool> = None;
    for c in name.chars() {
        if !c.is_ascii_alphanumeric() {
            previous = None;
            continue;
        }
        let digit = c.is_ascii_digit();
        match words.last_mut() {
            Some(word) if previous == Some(digit) => word.push(c),
            _ => words.push(c.to_string()),
        }
        previous = Some(digit);
    }
    words
}

/// Whether a family's words appear in a name's, in a row (at the start
/// for OpenAI's `o` models, so `llama-o3` is not `o3`).
fn matches(family: &[String], name: &[String]) -> bool {
    if family.is_empty() || family.len() > name.len() {
        return false;
    }
    if family[0] == "o" {
        return name.starts_with(family);
    }
    name.windows(family.len()).any(|window| window == family)
}

/// The catalog's entry for a model id, if it knows the family.
pub(crate) fn known(id: &str) -> Option<&'static Known> {
    let name = words(id);
    CATALOG
        .iter()
        .find(|entry| matches(&words(entry.family), &name))
}

/// The price of a well-known model, as published on [`PRICES_TAKEN`].
pub(crate) fn known_price(id: &str) -> Option<crate::provider::kind::Price> {
    let (input, cached, output) = known(id)?.price?;
    Some(crate::provider::kind::Price {
        input,
        output,
        cached_input: cached,
        currency: "USD".into(),
    })
}

/// The context window and output limit of a well-known model.
pub(crate) fn known_limits(id: &str) -> Option<(u64, u64)> {
    known(id).map(|entry| (entry.window, entry.output))
}

/// The models offered for a provider's official endpoint (which is not
/// asked for its list: the agent starts without a network call), its
/// usual model first.
pub(crate) fn official_models(
    kind: crate::provider::kind::ProviderKind,
) -> &'static [&'static str] {
    use crate::provider::kind::ProviderKind;
    match kind {
        ProviderKind::Openai => &[
            "gpt-4.1-mini",
            "gpt-4.1",
            "gpt-4.1-nano",
            "gpt-4o",
            "gpt-5",
            "gpt-5-mini",
            "gpt-5-nano",
            "o3",
            "o4-mini",
        ],
        ProviderKind::Responses => &[
            "gpt-5-mini",
            "gpt-5",
            "gpt-5-nano",
            "gpt-5-codex",
            "gpt-4.1",
            "gpt-4.1-mini",
            "o3",
            "o4-mini",
        ],
        ProviderKind::Anthropic => &[
            "claude-sonnet-4-5",
            "claude-opus-4-1",
            "claude-haiku-4-5",
            "claude-sonnet-4-0",
            "claude-3-7-sonnet-latest",
        ],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_family_hides_a_later_one() {
        for (i, earlier) in CATALOG.iter().enumerate() {
            for later in &CATALOG[i + 1..] {
                assert!(
                    !matches(&words(earlier.family), &words(later.family)),
                    "{} comes before {} and takes its ids",
                    earlier.family,
                    later.family
                );
            }
        }
        // Each family finds itself.
        for entry in CATALOG {
            assert_eq!(known(entry.family), Some(entry), "{}", entry.family);
        }
    }

    #[test]
    fn ids_as_servers_spell_them_find_their_family() {
        let family = |id: &str| known(id).map(|k| k.family);
        assert_eq!(
            family("openai/gpt-4.1-mini-2025-04-14"),
            Some("gpt-4.1-mini")
        );
        assert_eq!(family("gpt-4.1"), Some("gpt-4.1"));
        assert_eq!(
            family("anthropic/claude-sonnet-4-5-20250929"),
            Some("claude-sonnet-4")
        );
        assert_eq!(family("qwen3:8b"), Some("qwen3"));
        assert_eq!(family("qwen3-coder:30b"), Some("qwen3-coder"));
        assert_eq!(
            family("Qwen/Qwen2.5-Coder-32B-Instruct"),
            Some("qwen2.5-coder")
        );
        assert_eq!(
            family("meta-llama/Llama-3.3-70B-Instruct"),
            Some("llama-3.3")
        );
        assert_eq!(family("llama3.1:8b"), Some("llama-3.1"));
        assert_eq!(family("gpt-oss:20b"), Some("gpt-oss"));
        assert_eq!(family("phi4:14b"), Some("phi-4"));
        assert_eq!(family("o3-mini"), Some("o3-mini"));
        assert_eq!(family("llama-o3-chat"), None);
        assert_eq!(family("some-private-model"), None);
        assert_eq!(family("gpt-4-1106-preview"), None);
        assert_eq!(
            family("anthropic/claude-3.5-sonnet"),
            Some("claude-3-5-sonnet")
        );
        assert_eq!(family("gpt-3.5-turbo-0125"), Some("gpt-3.5-turbo"));
        assert_eq!(family("llama3.2-vision:11b"), Some("llama-3.2-vision"));
        assert_eq!(family("deepseek-r1:14b"), Some("deepseek-r1"));
        // Open models are not priced; the others are.
        assert!(known_price("qwen3:8b").is_none());
        let mini = known_price("gpt-4.1-mini").unwrap();
        assert_eq!(
            (mini.input, mini.cached_input, mini.output),
            (0.40, Some(0.10), 1.60)
        );
        let gpt5 = known("gpt-5").unwrap();
        assert!(gpt5.reasoning && gpt5.images);
        assert_eq!(gpt5.efforts, GPT5);
        assert!(!known("gpt-4.1").unwrap().reasoning);
        assert!(!known("o3-mini").unwrap().images);
    }

    #[test]
    fn official_models_are_in_the_catalog() {
        use crate::provider::kind::ProviderKind;
        for kind in [
            ProviderKind::Openai,
            ProviderKind::Responses,
            ProviderKind::Anthropic,
        ] {
            for id in official_models(kind) {
                assert!(known(id).is_some_and(|k| k.price.is_some()), "{id}");
            }
        }
    }
}

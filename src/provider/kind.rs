//! What a provider is as configuration names it: its wire format and a
//! model's price. The configuration reads them; the provider layer uses
//! them, without knowing the configuration.

use serde::{Deserialize, Serialize};

/// A provider's wire format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ProviderKind {
    /// OpenAI Chat Completions and every compatible server.
    Openai,
    /// Anthropic Messages.
    Anthropic,
    /// The OpenAI Responses API.
    Responses,
}

impl ProviderKind {
    pub fn default_base_url(self) -> &'static str {
        match self {
            ProviderKind::Openai | ProviderKind::Responses => "https://api.openai.com/v1",
            ProviderKind::Anthropic => "https://api.anthropic.com",
        }
    }
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Price {
    /// Per million input tokens.
    pub input: f64,
    /// Per million output tokens.
    pub output: f64,
    /// Per million cached input tokens (default: the input price).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cached_input: Option<f64>,
    /// ISO 4217 (default USD).
    #[serde(default = "usd")]
    pub currency: String,
}

fn usd() -> String {
    "USD".into()
}

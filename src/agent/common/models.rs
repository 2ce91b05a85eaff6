//! The model registry: the providers that can be called right now and the
//! models they offer, built from the config file (or the environment) and
//! the command line. Model ids are `provider/model`.

use super::options::Options;
use crate::config::{Config, ModelConfig, ProviderKind};
use crate::provider::http::Timeouts;
use crate::provider::openai::ChatCompletions;
use crate::provider::script::{Script, ScriptProvider};
use crate::provider::Provider;
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// The scripted provider's one model.
pub const SCRIPT_MODEL: &str = "script/scenario";

/// Context window assumed for models whose size nobody configured.
pub const DEFAULT_CONTEXT_WINDOW: u64 = 128_000;

#[derive(Debug, Clone)]
pub struct ModelEntry {
    /// `provider/model`.
    pub id: String,
    pub provider: String,
    /// The name the provider knows.
    pub model: String,
    pub config: ModelConfig,
}

impl ModelEntry {
    pub fn display_name(&self) -> String {
        self.config.name.clone().unwrap_or_else(|| self.id.clone())
    }

    pub fn context_window(&self) -> u64 {
        self.config.context_window.unwrap_or(DEFAULT_CONTEXT_WINDOW)
    }

    /// The effort levels the model takes (empty when it does not reason).
    pub fn efforts(&self) -> &[String] {
        if self.config.reasoning {
            &self.config.efforts
        } else {
            &[]
        }
    }
}

pub struct Registry {
    pub config: Config,
    pub config_path: Option<PathBuf>,
    providers: HashMap<String, Arc<dyn Provider>>,
    pub models: Vec<ModelEntry>,
    pub default_model: Option<String>,
    /// Why no provider is usable, for the -32000 answer.
    pub problems: Vec<String>,
    /// The credentials to keep out of every process a tool starts.
    pub secrets: Arc<crate::policy::secrets::Secrets>,
}

/// The model a kind of provider gets when nobody named one.
fn fallback_model(kind: ProviderKind) -> &'static str {
    match kind {
        ProviderKind::Openai => "gpt-4.1-mini",
        ProviderKind::Anthropic => "claude-sonnet-4-5",
        ProviderKind::Responses => "gpt-5-mini",
    }
}

impl Registry {
    /// Builds the registry. Fails only on a config file that cannot be
    /// read or parsed (the message names the file, line and reason).
    pub fn build(options: &Options) -> Result<Registry, String> {
        let (config, config_path) = Config::load(options.config.as_deref())?;
        let secrets = Arc::new(crate::policy::secrets::Secrets::from_config(&config));
        let mut registry = Registry {
            secrets,
            config,
            config_path,
            providers: HashMap::new(),
            models: Vec::new(),
            default_model: None,
            problems: Vec::new(),
        };
        if let Some(path) = &options.script {
            let script = Script::load(path)?;
            registry
                .providers
                .insert("script".into(), Arc::new(ScriptProvider::new(script)));
            registry.models.push(ModelEntry {
                id: SCRIPT_MODEL.into(),
                provider: "script".into(),
                model: "scenario".into(),
                config: ModelConfig {
                    name: Some("Scripted scenario".into()),
                    ..ModelConfig::default()
                },
            });
            registry.default_model = Some(SCRIPT_MODEL.into());
        }
        let names: Vec<String> = registry.config.providers.keys().cloned().collect();
        for name in names {
            if !registry.config.usable(&name) {
                let hint = match registry.config.api_key(&name) {
                    Err(problem) => problem,
                    Ok(_) => format!(
                        "provider {name:?} has no API key (set {})",
                        registry.config.providers[&name]
                            .api_key_env
                            .clone()
                            .unwrap_or_else(|| "its api_key_env variable".into())
                    ),
                };
                registry.problems.push(hint);
                continue;
            }
            let provider = registry.make_provider(&name, options.timeouts)?;
            registry.providers.insert(name, provider);
        }
        let configured: Vec<(String, ModelConfig)> = registry
            .config
            .models
            .iter()
            .map(|(id, config)| (id.clone(), config.clone()))
            .collect();
        for (id, config) in configured {
            registry.add(&id, config);
        }
        let wanted = options
            .model
            .clone()
            .or_else(|| registry.config.defaults.model.clone());
        // Providers nobody listed models for get their kind's usual model,
        // or — when nobody named a model either — what their server lists.
        let bare: Vec<String> = registry
            .providers
            .keys()
            .filter(|name| *name != "script")
            .filter(|name| !registry.models.iter().any(|m| &m.provider == *name))
            .cloned()
            .collect();
        for name in bare {
            let kind = registry.config.providers[&name].kind;
            let discovered = if wanted.is_none() {
                registry.discover(&name)
            } else {
                Vec::new()
            };
            if discovered.is_empty() {
                registry.add(
                    &format!("{name}/{}", fallback_model(kind)),
                    ModelConfig::default(),
                );
            }
            for model in discovered {
                registry.add(&format!("{name}/{model}"), ModelConfig::default());
            }
        }
        if let Some(wanted) = wanted {
            match registry.qualify(&wanted) {
                Some(id) => {
                    if registry.model(&id).is_none() {
                        registry.add(&id, ModelConfig::default());
                    }
                    registry.default_model = Some(id);
                }
                None => registry
                    .problems
                    .push(format!("model {wanted:?} names no usable provider")),
            }
        }
        if registry.default_model.is_none() {
            registry.default_model = registry.models.first().map(|m| m.id.clone());
        }
        Ok(registry)
    }

    fn make_provider(&self, name: &str, timeouts: Timeouts) -> Result<Arc<dyn Provider>, String> {
        let mut timeouts = timeouts;
        timeouts.limits = self.config.limits.streams();
        let config = &self.config.providers[name];
        let base_url = config
            .base_url
            .clone()
            .unwrap_or_else(|| config.kind.default_base_url().to_string());
        let api_key = self.config.api_key(name)?;
        Ok(match config.kind {
            ProviderKind::Openai => Arc::new(ChatCompletions {
                base_url,
                api_key,
                timeouts,
            }),
            ProviderKind::Anthropic => Arc::new(crate::provider::anthropic::Messages {
                base_url,
                api_key,
                timeouts,
            }),
            ProviderKind::Responses => Arc::new(crate::provider::responses::Responses {
                base_url,
                api_key,
                timeouts,
            }),
        })
    }

    /// Asks an OpenAI-compatible server that is not OpenAI itself (a local
    /// one, a gateway) which models it has: `GET {base}/models`.
    fn discover(&self, name: &str) -> Vec<String> {
        let config = &self.config.providers[name];
        let Some(base) = &config.base_url else {
            return Vec::new();
        };
        if config.kind == ProviderKind::Anthropic {
            return Vec::new();
        }
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .timeout_global(Some(Duration::from_secs(2)))
            .user_agent(crate::provider::http::USER_AGENT)
            .build()
            .into();
        let mut request = agent.get(format!("{}/models", base.trim_end_matches('/')));
        if let Ok(Some(key)) = self.config.api_key(name) {
            request = request.header("Authorization", format!("Bearer {key}"));
        }
        let Ok(mut response) = request.call() else {
            return Vec::new();
        };
        let Ok(body) = response.body_mut().read_to_string() else {
            return Vec::new();
        };
        let Ok(value) = serde_json::from_str::<serde_json::Value>(&body) else {
            return Vec::new();
        };
        let mut models: Vec<String> = value["data"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|m| m["id"].as_str().map(str::to_string))
            .collect();
        models.sort();
        models.truncate(50);
        models
    }

    fn add(&mut self, id: &str, config: ModelConfig) {
        let Some((provider, model)) = id.split_once('/') else {
            return;
        };
        if !self.providers.contains_key(provider) || self.model(id).is_some() {
            return;
        }
        self.models.push(ModelEntry {
            id: id.to_string(),
            provider: provider.to_string(),
            model: model.to_string(),
            config,
        });
    }

    /// `provider/model` for a name given with or without its provider: a
    /// bare name goes to the first usable provider (OpenAI's first).
    pub fn qualify(&self, name: &str) -> Option<String> {
        if let Some((provider, _)) = name.split_once('/') {
            if self.providers.contains_key(provider) {
                return Some(name.to_string());
            }
        }
        let mut names: Vec<&String> = self.providers.keys().filter(|n| *n != "script").collect();
        names.sort_by_key(|n| (n.as_str() != "openai", n.as_str()));
        names.first().map(|provider| format!("{provider}/{name}"))
    }

    pub fn usable(&self) -> bool {
        !self.models.is_empty()
    }

    pub fn model(&self, id: &str) -> Option<&ModelEntry> {
        self.models.iter().find(|m| m.id == id)
    }

    pub fn provider(&self, name: &str) -> Option<Arc<dyn Provider>> {
        self.providers.get(name).cloned()
    }

    /// What to tell someone who has no usable provider.
    pub fn setup_hint(&self) -> String {
        let mut hint = String::from(
            "no model provider is set up. Run `spindle setup` in a terminal, or set OPENAI_API_KEY (with OPENAI_BASE_URL for a compatible server), ANTHROPIC_API_KEY or OLLAMA_HOST, then authenticate again",
        );
        if !self.problems.is_empty() {
            hint.push_str(" (");
            hint.push_str(&self.problems.join("; "));
            hint.push(')');
        }
        hint
    }
}

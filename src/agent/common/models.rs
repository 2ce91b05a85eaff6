//! The model registry: the providers that can be called right now and the
//! models they offer, built from the config file (or the environment) and
//! the command line. Model ids are `provider/model`.

use super::options::Options;
use crate::config::{Config, ModelConfig, ProviderKind};
use crate::provider::catalog::known;
use crate::provider::http::Timeouts;
use crate::provider::models::{known_limits, Listed};
use crate::provider::openai::ChatCompletions;
use crate::provider::script::{Script, ScriptProvider};
use crate::provider::Provider;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

pub use super::options::SCRIPT_MODEL;

/// Context window assumed for models whose size nobody configured, no
/// server reported and the table does not know: small on purpose, since
/// compacting early costs little and overflowing costs the turn.
pub const DEFAULT_CONTEXT_WINDOW: u64 = 32_768;

/// Output limit assumed likewise.
pub const DEFAULT_OUTPUT_LIMIT: u64 = 8_192;

#[derive(Debug, Clone)]
pub struct ModelEntry {
    /// `provider/model`.
    pub id: String,
    pub provider: String,
    /// The name the provider knows.
    pub model: String,
    pub config: ModelConfig,
    /// What the provider's model list said of the window and output limit.
    pub listed_window: Option<u64>,
    pub listed_output: Option<u64>,
}

impl ModelEntry {
    pub fn display_name(&self) -> String {
        self.config.name.clone().unwrap_or_else(|| self.id.clone())
    }

    /// The context window: configured (but never more than the provider
    /// lists), else as the provider listed it, else the table of known
    /// models, else a small default.
    pub fn context_window(&self) -> u64 {
        // The server's own window wins over a larger configured one (a
        // window `spindle setup` recorded before the server was restarted
        // with a smaller context); a smaller configured one is the user's.
        let configured = match (self.config.context_window, self.listed_window) {
            (Some(configured), Some(listed)) => Some(configured.min(listed)),
            (configured, _) => configured,
        };
        configured
            .or(self.listed_window)
            .or_else(|| known_limits(&self.model).map(|(window, _)| window))
            .unwrap_or(DEFAULT_CONTEXT_WINDOW)
    }

    /// The output cap sent with each request: configured, else as the
    /// provider listed it (the catalog's and the fallback limit only size
    /// the reserve; a request without a cap leaves it to the server).
    pub fn request_output_cap(&self) -> Option<u32> {
        self.config.max_output_tokens.or_else(|| {
            self.listed_output
                .map(|tokens| u32::try_from(tokens).unwrap_or(u32::MAX))
        })
    }

    /// The output limit, found the same way.
    pub fn output_limit(&self) -> u64 {
        self.config
            .max_output_tokens
            .map(u64::from)
            .or(self.listed_output)
            .or_else(|| known_limits(&self.model).map(|(_, output)| output))
            .unwrap_or(DEFAULT_OUTPUT_LIMIT)
    }

    /// The output limit a request carries: [`Self::request_output_cap`];
    /// else, for Chat Completions when the catalog does not know the
    /// model's either, [`DEFAULT_OUTPUT_LIMIT`], so a model that loops
    /// stops there; else none (the server's own applies). Other kinds keep
    /// their own rule (Anthropic always sends a limit).
    pub fn sent_output_limit(&self, kind: Option<ProviderKind>) -> Option<u32> {
        self.request_output_cap().or_else(|| {
            let unknown = known_limits(&self.model).is_none();
            (unknown && kind == Some(ProviderKind::Openai)).then_some(DEFAULT_OUTPUT_LIMIT as u32)
        })
    }

    /// Whether the model reasons: configured, else as the catalog knows it.
    pub fn reasoning(&self) -> bool {
        self.config
            .reasoning
            .or_else(|| known(&self.model).map(|k| k.reasoning))
            .unwrap_or(false)
    }

    /// Whether the model takes images: configured, else the catalog.
    pub fn images(&self) -> bool {
        self.config
            .images
            .or_else(|| known(&self.model).map(|k| k.images))
            .unwrap_or(false)
    }

    /// The effort levels the model takes (empty when it does not reason):
    /// the configured list, else the catalog's.
    pub fn efforts(&self) -> Vec<String> {
        if !self.reasoning() {
            return Vec::new();
        }
        if !self.config.efforts.is_empty() {
            return self.config.efforts.clone();
        }
        known(&self.model)
            .map(|k| k.efforts.iter().map(|e| e.to_string()).collect())
            .unwrap_or_default()
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
    /// Chat models servers listed beyond [`DISCOVERED_CAP`], not offered.
    pub more_models: usize,
    /// What servers listed, with the limits they gave.
    listed: Vec<(String, Listed)>,
}

/// The most models taken from one server's list.
pub const DISCOVERED_CAP: usize = 200;

impl Registry {
    /// Builds the registry from the config file, read now (`authenticate`,
    /// a reload). Fails only on a config file that cannot be read or
    /// parsed (the message names the file, line and reason).
    pub fn build(options: &Options) -> Result<Registry, String> {
        Registry::build_from(
            options,
            Config::load(options.config.as_deref()).map_err(String::from),
        )
    }

    /// Builds the registry from a config already loaded (`Config::load`'s
    /// answer), as the agent's start does with the one it loaded.
    pub fn build_from(
        options: &Options,
        loaded: Result<(Config, Option<PathBuf>), String>,
    ) -> Result<Registry, String> {
        let (config, config_path) = loaded?;
        let secrets = Arc::new(config.secrets());
        let mut registry = Registry {
            secrets,
            config,
            config_path,
            providers: HashMap::new(),
            models: Vec::new(),
            default_model: None,
            problems: Vec::new(),
            more_models: 0,
            listed: Vec::new(),
        };
        if let Some(path) = &options.script {
            registry.add_script(path)?;
        }
        registry.start_providers(options.timeouts, options.retries_given)?;
        let configured: Vec<(String, ModelConfig)> = registry
            .config
            .models
            .iter()
            .map(|(id, config)| (id.clone(), config.clone()))
            .collect();
        for (id, config) in configured {
            registry.add(&id, config);
        }
        // The command line's model, else the config's; `--script` without
        // `--model` keeps its scenario the default.
        let wanted = match (&options.model, &options.script) {
            (Some(model), _) => Some(model.clone()),
            (None, Some(_)) => None,
            (None, None) => registry.config.defaults.model.clone(),
        };
        registry.add_offered(wanted.as_deref());
        registry.choose_default(wanted);
        registry.add_limits_and_prices();
        Ok(registry)
    }

    /// Adds the scripted scenario's provider and model, the default.
    fn add_script(&mut self, path: &Path) -> Result<(), String> {
        let script = Script::load(path)?;
        self.providers
            .insert("script".into(), Arc::new(ScriptProvider::new(script)));
        self.models.push(ModelEntry {
            id: SCRIPT_MODEL.into(),
            provider: "script".into(),
            model: "scenario".into(),
            config: ModelConfig {
                name: Some("Scripted scenario".into()),
                ..ModelConfig::default()
            },
            listed_window: None,
            listed_output: None,
        });
        self.default_model = Some(SCRIPT_MODEL.into());
        Ok(())
    }

    /// Makes a provider of every usable one in the config; of the others,
    /// notes why not.
    fn start_providers(&mut self, timeouts: Timeouts, retries_given: bool) -> Result<(), String> {
        let names: Vec<String> = self.config.providers.keys().cloned().collect();
        for name in names {
            if !self.config.usable(&name) {
                let hint = match self.config.api_key(&name) {
                    Err(problem) => problem,
                    Ok(_) => format!(
                        "provider {name:?} has no API key (set {})",
                        self.config.providers[&name]
                            .api_key_env
                            .clone()
                            .unwrap_or_else(|| "its api_key_env variable".into())
                    ),
                };
                self.problems.push(hint);
                continue;
            }
            let provider = self.make_provider(&name, timeouts, retries_given)?;
            self.providers.insert(name, provider);
        }
        Ok(())
    }

    /// Adds the models each provider offers beyond the configured ones.
    fn add_offered(&mut self, wanted: Option<&str>) {
        // An official endpoint nobody listed models for gets the catalog's
        // current models of its kind; any other server (a local one, a
        // gateway) is asked what it serves, beside what the config names,
        // and never offered an official model it may not have.
        let mut bare: Vec<String> = self
            .providers
            .keys()
            .filter(|name| *name != "script")
            .cloned()
            .collect();
        bare.sort();
        let named_provider = wanted
            .and_then(|wanted| self.qualify(wanted))
            .and_then(|id| id.split_once('/').map(|(p, _)| p.to_string()));
        for name in bare {
            let config = &self.config.providers[&name];
            let kind = config.kind;
            let official = config
                .base_url
                .as_deref()
                .is_none_or(|base| base.trim_end_matches('/') == kind.default_base_url());
            let configured = self.models.iter().any(|m| m.provider == name);
            if official {
                if configured {
                    continue;
                }
                // The catalog's current models, the usual one first: an
                // official endpoint is not asked (no network call at start).
                for model in crate::provider::catalog::official_models(kind) {
                    self.add(&format!("{name}/{model}"), ModelConfig::default());
                }
                continue;
            }
            let named = named_provider.as_deref() == Some(name.as_str());
            self.add_discovered(&name, configured, named);
        }
    }

    /// Asks a server what it serves and adds that (up to
    /// [`DISCOVERED_CAP`]); a failure is a problem only when nothing else
    /// offers the provider a model.
    fn add_discovered(&mut self, name: &str, configured: bool, named: bool) {
        match self.discover(name) {
            Ok(listed) => {
                self.listed
                    .extend(listed.iter().map(|l| (name.to_string(), l.clone())));
                let extra = listed.len().saturating_sub(DISCOVERED_CAP);
                self.more_models += extra;
                let mut kept: Vec<Listed> = listed.into_iter().take(DISCOVERED_CAP).collect();
                kept.sort_by(|a, b| a.id.cmp(&b.id));
                for model in kept {
                    let config = ModelConfig {
                        name: model.name.clone(),
                        ..ModelConfig::default()
                    };
                    let id = format!("{name}/{}", model.id);
                    self.add(&id, config);
                }
            }
            Err(problem) if configured => {
                log::info!(
                    "provider {name:?} lists no models beyond its configured ones: {problem}"
                );
            }
            Err(problem) if !named => {
                self.problems.push(format!(
                    "provider {name:?} offers no model: {problem}; name one with --model or under \"models\" in the config file"
                ));
            }
            Err(problem) => log::info!("provider {name:?} lists no models: {problem}"),
        }
    }

    /// The default model: the one wanted, else the best one that takes
    /// tools by a rule that does not depend on a server's order: a model
    /// the config file names first, then the providers in the order
    /// [`Registry::qualify`] uses, then
    /// [`crate::provider::models::default_rank`]. A listed model beyond the
    /// cap can still be the default (it is then offered too).
    fn choose_default(&mut self, wanted: Option<String>) {
        if let Some(wanted) = wanted {
            match self.qualify(&wanted) {
                Some(id) => {
                    if self.model(&id).is_none() {
                        self.add(&id, ModelConfig::default());
                    }
                    self.default_model = Some(id);
                }
                None => self
                    .problems
                    .push(format!("model {wanted:?} names no usable provider")),
            }
        }
        if self.default_model.is_some() {
            return;
        }
        let mut pool: Vec<(String, String, Option<bool>)> = self
            .models
            .iter()
            .map(|m| {
                (
                    m.provider.clone(),
                    m.model.clone(),
                    self.listed_tools(&m.provider, &m.model),
                )
            })
            .collect();
        pool.extend(
            self.listed
                .iter()
                .map(|(p, l)| (p.clone(), l.id.clone(), l.tools)),
        );
        let best = pool
            .into_iter()
            .filter(|(_, model, tools)| crate::provider::models::takes_tools(model, *tools))
            .min_by_key(|(provider, model, tools)| {
                let configured = self
                    .config
                    .models
                    .contains_key(&format!("{provider}/{model}"));
                let kind = self.config.providers.get(provider).map(|p| p.kind);
                let rank = crate::provider::models::default_rank(
                    kind.unwrap_or(ProviderKind::Openai),
                    model,
                    *tools,
                );
                (!configured, provider != "openai", provider.clone(), rank)
            });
        match best {
            Some((provider, model, _)) => {
                let id = format!("{provider}/{model}");
                if self.model(&id).is_none() {
                    let name = self.listed.iter().find(|(p, l)| *p == provider && l.id == model);
                    let name = name.and_then(|(_, l)| l.name.clone());
                    self.add(&id, ModelConfig { name, ..ModelConfig::default() });
                }
                self.default_model = Some(id);
            }
            None if !self.models.is_empty() => self.problems.push(
                "none of the models offered takes tools (search-only, embedding, image and audio models are never a default); name one with --model or defaults.model in the config file".into(),
            ),
            None => {}
        }
    }

    /// Whether a server's list says a model takes tools.
    fn listed_tools(&self, provider: &str, model: &str) -> Option<bool> {
        self.listed
            .iter()
            .find(|(p, l)| p == provider && l.id == model)
            .and_then(|(_, l)| l.tools)
    }

    /// Gives each model the limits its server listed and, when well known
    /// and unpriced, its price.
    fn add_limits_and_prices(&mut self) {
        for entry in &mut self.models {
            let listed = self
                .listed
                .iter()
                .find(|(provider, l)| *provider == entry.provider && l.id == entry.model);
            if let Some((_, listed)) = listed {
                entry.listed_window = listed.context_window;
                entry.listed_output = listed.max_output;
            }
        }
        // Well-known models are priced without configuration.
        for entry in &mut self.models {
            if entry.config.price.is_none() {
                entry.config.price = crate::provider::models::known_price(&entry.model);
            }
        }
    }

    /// A provider of the config; a gateway retries once at most, unless
    /// the command line's `--retries` says otherwise.
    fn make_provider(
        &self,
        name: &str,
        timeouts: Timeouts,
        retries_given: bool,
    ) -> Result<Arc<dyn Provider>, String> {
        let mut timeouts = timeouts;
        timeouts.limits = self.config.limits.streams();
        let config = &self.config.providers[name];
        if config.gateway && !retries_given {
            timeouts.attempts = timeouts.attempts.min(2);
        }
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
                trust: self.config.trust.clone(),
                tokenizer: Default::default(),
            }),
            ProviderKind::Anthropic => Arc::new(crate::provider::anthropic::Messages {
                base_url,
                api_key,
                timeouts,
                trust: self.config.trust.clone(),
            }),
            ProviderKind::Responses => Arc::new(crate::provider::responses::Responses {
                base_url,
                api_key,
                timeouts,
                trust: self.config.trust.clone(),
            }),
        })
    }

    /// Asks a server that is not an official endpoint (a local one, a
    /// gateway) which chat models it has, in its own order.
    fn discover(&self, name: &str) -> Result<Vec<Listed>, String> {
        let config = &self.config.providers[name];
        let base = config
            .base_url
            .clone()
            .unwrap_or_else(|| config.kind.default_base_url().to_string());
        let key = self.config.api_key(name).ok().flatten();
        crate::provider::models::list(config.kind, &base, key.as_deref(), &self.config.trust)
            .map_err(String::from)
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
            listed_window: None,
            listed_output: None,
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

    /// Whether a session can start: some model is offered and one is the
    /// default.
    pub fn usable(&self) -> bool {
        !self.models.is_empty() && self.default_model.is_some()
    }

    pub fn model(&self, id: &str) -> Option<&ModelEntry> {
        self.models.iter().find(|m| m.id == id)
    }

    pub fn provider(&self, name: &str) -> Option<Arc<dyn Provider>> {
        self.providers.get(name).cloned()
    }

    /// What to tell someone who has no usable provider.
    pub fn setup_hint(&self) -> String {
        if self.providers.keys().any(|name| name != "script") {
            // Providers are set up, but none of them offers a model.
            return format!(
                "no model can be offered: {} Then authenticate again",
                crate::util::sentence(&self.problems.join("; "))
            );
        }
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

//! The start-up choices of `spindle acp`, as the command line gives them.

use super::permission::Policy;
use crate::modes::Preset;
use crate::provider::http::Timeouts;
use std::path::PathBuf;

/// Start-up choices of `spindle acp`.
#[derive(Debug, Clone, Default)]
pub struct Options {
    pub model: Option<String>,
    pub script: Option<PathBuf>,
    /// On stdin EOF, let running turns finish instead of cancelling them.
    pub drain: bool,
    pub timeouts: Timeouts,
    /// `--retries` was given: it holds even for a provider the config
    /// marks as a gateway (which otherwise gets one retry at most).
    pub retries_given: bool,
    /// The approval policy new sessions start with (else a trusted
    /// project's, the workspace's last choice, the config file's default,
    /// or ask).
    pub permissions: Option<Policy>,
    /// The execution preset new sessions start with.
    pub preset: Option<Preset>,
    /// `--profile lean|full`: what the model is told before the user's
    /// first word (else the agent file's, the config's, or by the
    /// model's context window).
    pub profile: Option<crate::modes::Profile>,
    /// The config file (default: `config::default_path()`).
    pub config: Option<PathBuf>,
    /// What a declined tool call does (else the config's choice, else
    /// stop).
    pub on_reject: Option<crate::config::OnReject>,
    /// The most model calls one turn may make (0: the default).
    pub max_steps: usize,
    /// The session database (default: `store::default_path()`).
    pub db: Option<PathBuf>,
    /// Whether SIGTERM, SIGINT and SIGHUP end the agent as the end of
    /// input does (`spindle acp`; off for agents embedded in tests).
    pub signals: bool,
    /// `--log-file`: where the log goes instead of stderr.
    pub log_file: Option<PathBuf>,
    /// `spindle acp PATH`: the agent file, and the agent it describes.
    pub agent_path: Option<PathBuf>,
    pub agent: Option<std::sync::Arc<crate::agentfile::AgentSpec>>,
    /// The command line's own choices, before an agent file's were taken
    /// (a reload takes the file's again).
    pub before_agent: Option<Box<Options>>,
    /// The config as the command's start loaded it (`cli`), for the
    /// agent's start to use instead of reading the file again; `None`:
    /// `serve` loads it, once. A reload always reads the file.
    pub loaded: Option<crate::config::loaded::Loaded>,
    /// Files no sandboxed command may read besides Spindle's own (`serve`
    /// adds its token file and TLS key).
    pub secret_files: Vec<PathBuf>,
}

impl Options {
    /// The agent file's `commands/` folder, if it has one: its commands
    /// join the workspace's and the user's.
    pub fn commands_dir(&self) -> Option<&std::path::Path> {
        self.agent.as_ref()?.commands_dir.as_deref()
    }

    /// The model the command line chose: `--model`, else `--script`'s
    /// scenario. It comes before every configured default (a project's,
    /// the user's, the workspace's last choice, an agent file's).
    pub fn chosen_model(&self) -> Option<String> {
        self.model
            .clone()
            .or_else(|| self.script.as_ref().map(|_| SCRIPT_MODEL.to_string()))
    }

    /// Reads the agent file `agent_path` names, if any, and takes its
    /// choices (`adopt`); why it cannot be used, in words for the user.
    pub fn adopt_agent_file(&mut self) -> Result<(), String> {
        if let Some(path) = self.agent_path.clone() {
            let spec = crate::agentfile::load(&path).map_err(|error| error.to_string())?;
            self.adopt(spec);
        }
        Ok(())
    }

    /// Takes an agent file's choices where the command line made none
    /// (`--model`, `--script`, `--preset`, `--on-reject`, `--max-steps`
    /// still win).
    pub(crate) fn adopt(&mut self, spec: crate::agentfile::AgentSpec) {
        if self.before_agent.is_none() {
            self.before_agent = Some(Box::new(self.clone()));
        }
        if self.chosen_model().is_none() {
            self.model = spec.model.clone();
        }
        if self.preset.is_none() {
            self.preset = spec.preset.as_deref().and_then(Preset::parse);
        }
        if self.on_reject.is_none() {
            self.on_reject = spec.on_reject;
        }
        if self.profile.is_none() {
            self.profile = spec.profile;
        }
        if self.max_steps == 0 {
            self.max_steps = spec.max_steps.unwrap_or(0);
        }
        self.agent = Some(std::sync::Arc::new(spec));
    }

    /// The options with the agent file read again: `Err` names the
    /// problem, and nothing changes.
    pub fn reread_agent(&self) -> Result<Option<Options>, String> {
        let Some(path) = &self.agent_path else {
            return Ok(None);
        };
        let spec = crate::agentfile::load(path).map_err(|e| e.to_string())?;
        let mut fresh = self
            .before_agent
            .as_deref()
            .cloned()
            .unwrap_or_else(|| self.clone());
        fresh.before_agent = None;
        fresh.adopt(spec);
        Ok(Some(fresh))
    }
}

/// The scripted provider's one model (`--script`): here, below the
/// registry that serves it, since the options name it as the model chosen.
pub const SCRIPT_MODEL: &str = "script/scenario";

/// Model calls per turn when nothing else says.
pub const DEFAULT_MAX_STEPS: usize = 50;

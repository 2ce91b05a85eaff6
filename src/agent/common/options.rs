//! The start-up choices of `spindle acp`, as the command line gives them.

use super::controls::Preset;
use super::permission::Policy;
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
    /// The approval policy new sessions start with (else the workspace's
    /// last choice, the config file's default, or ask).
    pub permissions: Option<Policy>,
    /// The execution preset new sessions start with.
    pub preset: Option<Preset>,
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
}

/// Model calls per turn when nothing else says.
pub const DEFAULT_MAX_STEPS: usize = 50;

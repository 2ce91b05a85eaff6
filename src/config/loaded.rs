//! The config as one start of Spindle loaded it: read once where the
//! command starts (`cli`) and handed down, so the agent's start does not
//! read the file again; only an explicit reload does.

use super::{Config, ConfigError};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// A config file loaded once (with the file it came from, `None` when no
/// file exists and the environment decides), or why it cannot be used.
/// Cheap to clone; its `Debug` shows no value of the config (header
/// values of MCP servers may be secrets).
#[derive(Clone)]
pub struct Loaded(Arc<Result<(Config, Option<PathBuf>), ConfigError>>);

impl Loaded {
    /// Loads `explicit` or the default file, as [`Config::load`] does.
    pub fn load(explicit: Option<&Path>) -> Loaded {
        Loaded(Arc::new(Config::load(explicit)))
    }

    /// The config, when it could be loaded.
    pub fn config(&self) -> Option<&Config> {
        self.0.as_ref().as_ref().ok().map(|(config, _)| config)
    }

    /// What [`Config::load`] gave: the config and its file, or why it
    /// cannot be used.
    pub(crate) fn get(&self) -> Result<(&Config, Option<&Path>), &ConfigError> {
        match self.0.as_ref() {
            Ok((config, path)) => Ok((config, path.as_deref())),
            Err(problem) => Err(problem),
        }
    }

    /// What [`Config::load`] gave, as an owned value (the error as its
    /// text).
    pub fn result(&self) -> Result<(Config, Option<PathBuf>), String> {
        self.0.as_ref().clone().map_err(String::from)
    }
}

impl std::fmt::Debug for Loaded {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.0.as_ref() {
            Ok((_, path)) => write!(f, "Loaded({path:?})"),
            Err(_) => write!(f, "Loaded(unusable)"),
        }
    }
}

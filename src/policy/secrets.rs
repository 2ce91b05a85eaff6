//! Provider credentials kept out of every process a tool starts.
//!
//! Spindle's environment holds the keys of the model providers it calls.
//! A command, an editor terminal, an MCP server or a job started for the
//! model must not see them: the model could print one (`env`, `echo`),
//! and from its output the key would reach the model, the editor, the
//! session database and the command's log. Removed are every configured
//! `api_key_env` name, the usual provider variables, and any variable whose
//! value equals a key Spindle knows; a user who wants one passed lists it in
//! the config's `tools.pass_env`.

use std::collections::BTreeSet;
use std::ffi::OsString;

pub(crate) use crate::credentials::STANDARD;

/// Values shorter than this are never matched by value: they are not keys,
/// and matching them would remove ordinary variables.
const MIN_KEY_LEN: usize = 8;

/// What to remove from the environments of tools.
#[derive(Clone, Default)]
pub struct Secrets {
    names: BTreeSet<String>,
    /// The keys themselves, to find variables that hold one under another
    /// name. Never logged (see the `Debug` impl).
    values: Vec<String>,
    pass: BTreeSet<String>,
}

impl std::fmt::Debug for Secrets {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Secrets")
            .field("names", &self.names)
            .field("values", &format_args!("[{} redacted]", self.values.len()))
            .field("pass", &self.pass)
            .finish()
    }
}

impl Secrets {
    /// The standard names plus the variables and keys given (a
    /// configuration's `api_key_env` names and the keys it resolves), and
    /// the names the user passes on anyway (`tools.pass_env`). The
    /// configuration builds it (`Config::secrets`).
    pub fn new(
        variables: impl IntoIterator<Item = String>,
        keys: impl IntoIterator<Item = String>,
        pass: impl IntoIterator<Item = String>,
    ) -> Secrets {
        let mut secrets = Secrets {
            names: STANDARD.iter().map(|s| s.to_string()).collect(),
            values: Vec::new(),
            pass: pass.into_iter().collect(),
        };
        secrets.names.extend(variables);
        for key in keys {
            secrets.add_value(key);
        }
        for name in STANDARD {
            if let Some(value) = crate::credentials::var(name) {
                secrets.add_value(value);
            }
        }
        secrets
    }

    fn add_value(&mut self, value: String) {
        let value = value.trim().to_string();
        if value.len() >= MIN_KEY_LEN && !self.values.contains(&value) {
            self.values.push(value);
        }
    }

    /// The variables of `environment` a tool must not get.
    pub fn to_remove<I>(&self, environment: I) -> Vec<OsString>
    where
        I: IntoIterator<Item = (OsString, OsString)>,
    {
        let mut remove: BTreeSet<OsString> = self
            .names
            .iter()
            .filter(|name| !self.pass.contains(*name))
            .map(OsString::from)
            .collect();
        for (name, value) in environment {
            let name_text = name.to_string_lossy();
            if self.pass.contains(name_text.as_ref()) {
                continue;
            }
            let value = value.to_string_lossy();
            if self.values.iter().any(|key| value.trim() == key) {
                remove.insert(name);
            }
        }
        remove.into_iter().collect()
    }

    /// The variables of this process's environment that tools must not get.
    pub fn to_remove_here(&self) -> Vec<OsString> {
        self.to_remove(std::env::vars_os())
    }

    /// Removes the credentials from a command's environment.
    pub fn scrub(&self, command: &mut std::process::Command) {
        for name in self.to_remove_here() {
            command.env_remove(name);
        }
    }

    /// Whether `text` contains one of the known keys, for tests and for
    /// redacting output.
    pub fn redact(&self, text: &str) -> String {
        let mut text = text.to_string();
        for key in &self.values {
            if text.contains(key.as_str()) {
                text = text.replace(key.as_str(), "[redacted]");
            }
        }
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{Config, ProviderConfig};
    use crate::provider::kind::ProviderKind;

    #[test]
    fn names_values_and_the_pass_list() {
        let mut config = Config::default();
        config.providers.insert(
            "corp".into(),
            ProviderConfig {
                kind: ProviderKind::Openai,
                base_url: None,
                api_key_env: Some("CORP_LLM_TOKEN".into()),
                api_key_file: None,
                requires_key: true,
                gateway: false,
            },
        );
        config.tools.pass_env = vec!["HF_TOKEN".into()];
        let mut secrets = config.secrets();
        secrets.add_value("sk-test-1234567890".into());
        let env = vec![
            (
                OsString::from("COPY_OF_KEY"),
                OsString::from("sk-test-1234567890"),
            ),
            (OsString::from("SHORT"), OsString::from("abc")),
            (OsString::from("HOME"), OsString::from("/home/u")),
        ];
        let removed = secrets.to_remove(env);
        assert!(removed.contains(&OsString::from("CORP_LLM_TOKEN")));
        assert!(removed.contains(&OsString::from("OPENAI_API_KEY")));
        assert!(removed.contains(&OsString::from("COPY_OF_KEY")));
        assert!(!removed.contains(&OsString::from("HOME")));
        assert!(!removed.contains(&OsString::from("SHORT")));
        assert!(!removed.contains(&OsString::from("HF_TOKEN")));
        assert_eq!(secrets.redact("key=sk-test-1234567890!"), "key=[redacted]!");
        assert!(!format!("{secrets:?}").contains("sk-test"));
    }
}

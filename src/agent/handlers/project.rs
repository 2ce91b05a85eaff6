//! A project's own defaults (`defaults` in its `.spindle/config.json`)
//! for a new session: used when the user trusts the project, an approval
//! policy only up to `auto`, a model only when one of the user's own
//! providers offers it (a project's config cannot add providers: the
//! `providers` it lists are never read, since they could send the prompts
//! anywhere); else ignored. The notices say what the session really
//! starts with, once its choices are made: the project's value, or what
//! is used instead and why.

use crate::acp::fit::Notice;
use crate::agent::common::models::Registry;
use crate::agent::dispatcher::session::Settings;
use crate::agent::handlers::controls::policy_id;
use crate::config::Defaults;
use crate::modes::Policy;
use std::path::Path;

/// What a project's defaults bring to a new session.
pub(super) struct ProjectDefaults {
    /// What the session's choices start from: nothing unless the project
    /// is trusted, and never an approval above `auto` nor a model that
    /// none of the user's providers offers.
    pub(super) defaults: Defaults,
    /// What the project's config sets, as written (its model qualified
    /// when one of the user's providers offers it); empty when it is not
    /// in force.
    asked: Defaults,
    /// The model the project names that none of the user's providers
    /// offers.
    unknown_model: Option<String>,
    /// Notices already decided: a config that cannot be read, an
    /// untrusted project.
    notices: Vec<Notice>,
}

impl ProjectDefaults {
    /// The project's defaults at `cwd`, as far as they can be used.
    pub(super) fn read(cwd: &Path, registry: &Registry) -> ProjectDefaults {
        let mut result = ProjectDefaults {
            defaults: Defaults::default(),
            asked: Defaults::default(),
            unknown_model: None,
            notices: Vec::new(),
        };
        let mut asked = match crate::config::project::project_defaults(cwd) {
            Ok(Some(defaults)) => defaults,
            Ok(None) => return result,
            Err(problem) => {
                result.notices.push(Notice::warning(
                    "The project's defaults are not used",
                    problem,
                ));
                return result;
            }
        };
        let named = named(&asked);
        if named.is_empty() {
            return result;
        }
        if let Some(model) = asked.model.take() {
            match registry
                .qualify(&model)
                .filter(|qualified| registry.model(qualified).is_some())
            {
                Some(qualified) => asked.model = Some(qualified),
                None => result.unknown_model = Some(model),
            }
        }
        if !crate::config::project::project_trusted(&registry.config, cwd) {
            let mut text = format!(
                "its .spindle/config.json sets {}, but the project is not trusted; run `spindle trust` in {} to use them",
                named.join(", "),
                crate::config::project::root(cwd).display()
            );
            if let Some(model) = &result.unknown_model {
                text.push_str(&format!(
                    " (all but the model `{model}`, which none of your providers offers: a project's config cannot add providers)"
                ));
            }
            result
                .notices
                .push(Notice::info("The project's defaults are ignored", text));
            result.unknown_model = None;
            return result;
        }
        result.defaults = asked.clone();
        if matches!(asked.approval, Some(Policy::Yolo | Policy::Sandbox)) {
            result.defaults.approval = None;
        }
        result.asked = asked;
        result
    }

    /// The notices of the project's defaults, now that the session's
    /// choices (`used`) are made: each value the project sets, with what
    /// the session uses instead when that differs.
    pub(super) fn notices(mut self, used: &Settings) -> Vec<Notice> {
        let model_used = match used.model.as_str() {
            "" => "no model".to_string(),
            model => format!("`{model}`"),
        };
        if let Some(model) = &self.unknown_model {
            self.notices.push(Notice::warning(
                "The project's model is not used",
                format!(
                    "its .spindle/config.json names the model `{model}`, which none of your providers offers; a project's config cannot add providers (the ones it lists are never read), so this session uses {model_used}"
                ),
            ));
        }
        let asked = &self.asked;
        let mut said = Vec::new();
        let mut say = |key: &str, asked: Option<&str>, used: &str| {
            if let Some(asked) = asked {
                if asked == used {
                    said.push(format!("{key} {asked}"));
                } else {
                    said.push(format!("{key} {asked} (this session uses {used})"));
                }
            }
        };
        say("model", asked.model.as_deref(), &used.model);
        say("effort", asked.effort.as_deref(), &used.effort);
        say("preset", asked.preset.as_deref(), used.preset.id());
        say(
            "approval",
            asked.approval.map(policy_id),
            policy_id(used.policy),
        );
        if !said.is_empty() {
            let mut text = format!("its .spindle/config.json sets {}", said.join(", "));
            if asked.model.is_none() {
                text.push_str(&format!("; this session's model is {model_used}"));
            }
            self.notices
                .insert(0, Notice::info("Project defaults", text));
        }
        if matches!(asked.approval, Some(Policy::Yolo | Policy::Sandbox)) {
            self.notices.push(Notice::warning(
                "The project's approval policy is not used",
                "a project may start sessions in ask or auto at most; choose sandbox or yolo yourself (--permissions, or the session's tool approval)",
            ));
        }
        self.notices
    }
}

/// What `defaults` sets, as `key value` each.
fn named(defaults: &Defaults) -> Vec<String> {
    let approval = defaults.approval.map(policy_id);
    [
        ("model", defaults.model.as_deref()),
        ("effort", defaults.effort.as_deref()),
        ("preset", defaults.preset.as_deref()),
        ("approval", approval),
    ]
    .into_iter()
    .filter_map(|(key, value)| value.map(|value| format!("{key} {value}")))
    .collect()
}

//! When a stuck model is told and stopped (`loops` in config.json).

use serde::{Deserialize, Serialize};

/// The repeats a turn allows before it tells the model (`same_call_warn`)
/// or ends (`same_call_stop`, `same_text_stop`); unset takes the default,
/// 0 turns the check off. The defaults are in docs/configuration.md.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LoopSettings {
    /// The identical tool call in a row at which the model is told.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub same_call_warn: Option<usize>,
    /// The identical tool call in a row that ends the turn (not run).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub same_call_stop: Option<usize>,
    /// How often one line, sentence or paragraph may come in one answer
    /// before the answer is cut and the turn ends.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub same_text_stop: Option<usize>,
}

impl LoopSettings {
    pub const CALL_WARN: usize = 3;
    pub const CALL_STOP: usize = 5;
    pub const TEXT_STOP: usize = 10;

    pub(super) fn is_default(&self) -> bool {
        *self == LoopSettings::default()
    }

    pub fn call_warn(&self) -> usize {
        self.same_call_warn.unwrap_or(Self::CALL_WARN)
    }

    pub fn call_stop(&self) -> usize {
        self.same_call_stop.unwrap_or(Self::CALL_STOP)
    }

    pub fn text_stop(&self) -> usize {
        self.same_text_stop.unwrap_or(Self::TEXT_STOP)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unset_takes_the_defaults_zero_turns_off_and_a_typo_is_refused() {
        let config: super::super::Config =
            serde_json::from_str(r#"{"loops": {"same_call_stop": 0, "same_text_stop": 4}}"#)
                .unwrap();
        assert_eq!(config.loops.call_warn(), LoopSettings::CALL_WARN);
        assert_eq!(config.loops.call_stop(), 0);
        assert_eq!(config.loops.text_stop(), 4);
        let typo = serde_json::from_str::<super::super::Config>(r#"{"loops": {"same_call": 2}}"#);
        assert!(typo.unwrap_err().to_string().contains("same_call"));
        let default: super::super::Config = serde_json::from_str("{}").unwrap();
        assert_eq!(default.loops.call_stop(), 5);
        assert!(!serde_json::to_string(&default).unwrap().contains("loops"));
    }
}

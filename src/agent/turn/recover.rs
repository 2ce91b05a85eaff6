//! The one place a model's answer is made whole before any of its tool
//! calls is judged: every call's name and arguments are repaired where
//! the repair is certain (`tools::repair`). What is repaired is
//! what the editor is shown, what the policy, the rules, the hooks and the
//! sandbox judge, and what the conversation keeps; a call that cannot be
//! made whole is refused with the reason, and the turn goes on.

use crate::provider::{Outcome, ToolSpec};
use crate::tools::repair;
use std::collections::HashMap;

/// What was done to a step's calls, by call id.
#[derive(Default)]
pub(super) struct Repairs {
    /// What was repaired, in a few words, for the call's result.
    notes: HashMap<String, String>,
    /// Why a call cannot run.
    refused: HashMap<String, String>,
}

impl Repairs {
    /// Why the call cannot run, if it cannot.
    pub(super) fn refused(&self, id: &str) -> Option<&str> {
        self.refused.get(id).map(String::as_str)
    }

    /// What the call's result says was repaired.
    pub(super) fn note(&self, id: &str) -> Option<String> {
        self.notes
            .get(id)
            .map(|what| format!("(arguments repaired: {what})"))
    }
}

/// Repairs every call of the answer against the tools offered.
pub(super) fn recover(tools: &[ToolSpec], outcome: &mut Outcome) -> Repairs {
    let mut repairs = Repairs::default();
    for call in &mut outcome.tool_calls {
        match repair::fix_call(&call.name, &call.arguments, tools) {
            Ok(None) => {}
            Ok(Some(fixed)) => {
                log::info!(
                    "tool call {} repaired: {}",
                    call.id,
                    fixed.repairs.join(", ")
                );
                call.name = fixed.name;
                call.arguments = fixed.arguments;
                repairs
                    .notes
                    .insert(call.id.clone(), fixed.repairs.join(", "));
            }
            Err(error) => {
                repairs.refused.insert(call.id.clone(), error);
            }
        }
    }
    repairs
}

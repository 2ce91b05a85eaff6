//! The one place a model's answer is made whole before any of its tool
//! calls is judged: calls written into its text become tool calls
//! (`text_calls.rs`), and every call's name and arguments are repaired
//! where the repair is certain (`tools::repair`). What is repaired is
//! what the editor is shown, what the policy, the rules, the hooks and the
//! sandbox judge, and what the conversation keeps; a call that cannot be
//! made whole is refused with the reason, and the turn goes on.

use super::text_calls;
use super::updates::UpdateSink;
use crate::provider::{Finish, Message, Outcome, ToolCallRequest, ToolSpec};
use crate::tools::repair;
use std::collections::HashMap;

/// What was done to a step's calls, by their place in the answer (ids
/// from a careless server may repeat).
#[derive(Default)]
pub(super) struct Repairs {
    /// What was repaired, in a few words, for the call's result.
    notes: HashMap<usize, String>,
    /// Why a call cannot run.
    refused: HashMap<usize, String>,
}

impl Repairs {
    /// Why the answer's call at `index` cannot run, if it cannot.
    pub(super) fn refused(&self, index: usize) -> Option<&str> {
        self.refused.get(&index).map(String::as_str)
    }

    /// What the result of the call at `index` says was repaired.
    pub(super) fn note(&self, index: usize) -> Option<String> {
        self.notes
            .get(&index)
            .map(|what| format!("(arguments repaired: {what})"))
    }
}

/// Reads the calls in the answer's text (the text held back from the
/// editor), or shows that text; then repairs every call against the
/// tools offered.
pub(super) fn recover(
    tools: &[ToolSpec],
    sink: &mut UpdateSink,
    outcome: &mut Outcome,
    assistant: &mut Option<Message>,
) -> Repairs {
    let held = sink.take_held();
    let mut read = false;
    if let (Some(held), Some(message)) = (&held, assistant.as_mut()) {
        let from = message.text.len().saturating_sub(held.len());
        let may = outcome.tool_calls.is_empty()
            && outcome.finish == Finish::EndTurn
            && !sink.cancel_raised()
            && message.text.ends_with(held.as_str());
        let known = |name: &str| repair::resolve_name(name, tools).is_ok();
        if let Some(calls) = may
            .then(|| text_calls::recover(&message.text, from, known))
            .flatten()
        {
            message.text.truncate(from);
            message.text.truncate(message.text.trim_end().len());
            log::info!("{} tool calls read from the model's text", calls.len());
            for call in calls {
                outcome.tool_calls.push(ToolCallRequest {
                    id: format!("call_{}", crate::util::random_hex()),
                    name: call.name,
                    arguments: call.arguments,
                });
            }
            outcome.finish = Finish::ToolUse;
            read = true;
        }
    }
    if !read {
        if let Some(held) = held {
            sink.show(&held);
        }
    }
    let mut repairs = Repairs::default();
    for (index, call) in outcome.tool_calls.iter_mut().enumerate() {
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
                repairs.notes.insert(index, fixed.repairs.join(", "));
            }
            Err(error) => {
                repairs.refused.insert(index, error);
            }
        }
    }
    repairs
}

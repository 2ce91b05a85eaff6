//! The hooks a turn runs besides the tool calls' (those are in
//! `tool_call.rs`): `SessionStart` and `UserPromptSubmit` before the
//! prompt is recorded, `Stop` when the model would end the turn, and
//! `PreCompact` before a summary. What a hook says to the user is a
//! notice; what it says to the model joins the conversation.

use super::processes::HookPlace;
use super::spec::Turn;
use super::state::State;
use super::updates::Updates;
use crate::agent::common::hooks::{Event, Subject, Verdict};
use crate::conversation::Message;
use serde_json::{json, Value};
use std::cell::RefCell;

/// How many times `Stop` hooks may send the model back to work in one
/// turn; past that the turn ends all the same (a hook that always blocks
/// cannot hold a turn forever).
pub(super) const STOP_CONTINUATIONS: usize = 3;

fn fire(
    turn: &Turn,
    updates: &RefCell<Updates>,
    event: Event,
    subject: &Subject,
    fields: Value,
) -> Verdict {
    let place = HookPlace {
        session_id: &turn.io.session_id,
        root: &turn.workspace.root,
        policy: turn.rights.policy,
        hooks: &turn.workspace.hooks,
    };
    let verdict = turn.workspace.processes.fire(
        &place,
        event,
        subject,
        fields,
        Some(turn.io.cancel.signal()),
    );
    for note in &verdict.notes {
        updates.borrow_mut().notice(&crate::acp::fit::Notice::new(
            crate::acp::Severity::Warning,
            note.clone(),
            None,
        ));
    }
    verdict
}

/// Before a model turn is recorded: the session's first turn here runs
/// `SessionStart`, a new prompt runs `UserPromptSubmit`. Their context is
/// added to the prompt the model gets (and kept); a blocked prompt is
/// taken out of the conversation and the reason returned.
pub(super) fn before_prompt(turn: &mut Turn, updates: &RefCell<Updates>) -> Option<String> {
    let mut context = Vec::new();
    if let Some(source) = turn.opening.session_start {
        let verdict = fire(
            turn,
            updates,
            Event::SessionStart,
            &Subject::Word(source),
            json!({ "source": source }),
        );
        context.extend(verdict.context);
    }
    let fresh = turn.conversation.fresh;
    let at = turn.conversation.messages.len().saturating_sub(fresh);
    let prompt = match turn.conversation.messages.get(at) {
        Some(message) if fresh > 0 => message.text.clone(),
        _ => String::new(),
    };
    if fresh > 0 && turn.workspace.hooks.any(Event::UserPromptSubmit) {
        let verdict = fire(
            turn,
            updates,
            Event::UserPromptSubmit,
            &Subject::None,
            json!({ "prompt": prompt }),
        );
        if let Some(reason) = verdict.block {
            // An answer to the model's question stays, emptied: its call
            // must still have an answer.
            let answer = turn.conversation.messages[at].role != crate::conversation::Role::User;
            if answer {
                turn.conversation.messages.truncate(at + 1);
                turn.conversation.messages[at].text =
                    "(The user's answer was withheld by a hook.)".into();
            } else {
                turn.conversation.messages.truncate(at);
            }
            turn.conversation.fresh = 0;
            return Some(reason);
        }
        context.extend(verdict.context);
    }
    if !context.is_empty() {
        let target = turn
            .conversation
            .messages
            .get_mut(at)
            .filter(|_| fresh > 0)
            .map(|message| &mut message.text);
        let added = format!(
            "\n\n(Context from the user's hooks:)\n{}",
            context.join("\n\n")
        );
        match target {
            Some(text) => text.push_str(&added),
            // No new prompt (a turn that resumes a wait): its own message.
            None => {
                turn.conversation
                    .messages
                    .push(Message::user(added.trim_start()));
                turn.conversation.fresh += 1;
            }
        }
        turn.conversation.rewritten = true;
    }
    None
}

/// Whether the `Stop` hooks have a say when the model would end the
/// turn: some are set, and the turn is not a subagent's (whose end is
/// its parent's step, not the turn's).
pub(super) fn stop_hooks_set(turn: &Turn) -> bool {
    turn.workspace.hooks.any(Event::Stop) && turn.io.client.parent.is_none()
}

/// What the `Stop` hooks' verdict leads to.
#[derive(Debug, PartialEq)]
pub(super) enum StopHook {
    /// No hook blocked: the turn ends.
    Ends,
    /// A hook blocked: the model goes back to work, told this reason.
    Back(String),
    /// A hook blocked once more than it may: the turn ends all the same,
    /// and says so with the hook's reason.
    Overruled(String),
}

/// Decides what the `Stop` hooks' verdict (the reason a hook blocked
/// with) leads to, after `blocks` earlier blocks in this turn.
pub(super) fn stop_hook(block: Option<String>, blocks: usize) -> StopHook {
    match block {
        None => StopHook::Ends,
        Some(reason) if blocks >= STOP_CONTINUATIONS => StopHook::Overruled(reason),
        Some(reason) => StopHook::Back(reason),
    }
}

/// When the model would end the turn: runs the `Stop` hooks, and does
/// what `stop_hook` decided; the message the model goes back to work
/// with, if it does.
pub(super) fn stop_blocked(
    turn: &Turn,
    updates: &RefCell<Updates>,
    state: &mut State,
) -> Option<Message> {
    let verdict = fire(
        turn,
        updates,
        Event::Stop,
        &Subject::None,
        json!({ "stop_hook_active": state.stop_blocks > 0 }),
    );
    match stop_hook(verdict.block, state.stop_blocks) {
        StopHook::Ends => None,
        StopHook::Overruled(reason) => {
            updates.borrow_mut().notice(&crate::acp::fit::Notice::new(
                crate::acp::Severity::Warning,
                format!(
                    "A Stop hook blocked the end of the turn {STOP_CONTINUATIONS} times; the turn ends here."
                ),
                Some(reason),
            ));
            None
        }
        StopHook::Back(reason) => {
            state.stop_blocks += 1;
            updates.borrow_mut().notice(&crate::acp::fit::Notice::new(
                crate::acp::Severity::Info,
                "A Stop hook sent the model back to work.",
                Some(reason.clone()),
            ));
            Some(Message::user(format!(
                "A hook did not let you stop yet; do what it says, then finish:\n{reason}"
            )))
        }
    }
}

/// Before the conversation is summarised (`manual` or `auto`).
pub(super) fn pre_compact(turn: &Turn, updates: &RefCell<Updates>, trigger: &str, focus: &str) {
    if turn.workspace.hooks.any(Event::PreCompact) {
        fire(
            turn,
            updates,
            Event::PreCompact,
            &Subject::Word(trigger),
            json!({ "trigger": trigger, "custom_instructions": focus }),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stop_hook_that_does_not_block_lets_the_turn_end() {
        assert_eq!(stop_hook(None, 0), StopHook::Ends);
        assert_eq!(stop_hook(None, STOP_CONTINUATIONS), StopHook::Ends);
    }

    #[test]
    fn a_blocking_stop_hook_sends_the_model_back_a_few_times_only() {
        for blocks in 0..STOP_CONTINUATIONS {
            assert_eq!(
                stop_hook(Some("run the tests".into()), blocks),
                StopHook::Back("run the tests".into())
            );
        }
        assert_eq!(
            stop_hook(Some("run the tests".into()), STOP_CONTINUATIONS),
            StopHook::Overruled("run the tests".into())
        );
    }
}

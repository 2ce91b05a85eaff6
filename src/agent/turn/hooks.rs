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

/// When the model would end the turn: whether a `Stop` hook sends it back
/// to work, with the message it gets.
pub(super) fn stop_blocked(
    turn: &Turn,
    updates: &RefCell<Updates>,
    state: &mut State,
) -> Option<Message> {
    // A subagent's end is its parent's step, not the turn's.
    if !turn.workspace.hooks.any(Event::Stop) || turn.io.client.parent.is_some() {
        return None;
    }
    let verdict = fire(
        turn,
        updates,
        Event::Stop,
        &Subject::None,
        json!({ "stop_hook_active": state.stop_blocks > 0 }),
    );
    let reason = verdict.block?;
    if state.stop_blocks >= STOP_CONTINUATIONS {
        updates.borrow_mut().notice(&crate::acp::fit::Notice::new(
            crate::acp::Severity::Warning,
            format!(
                "A Stop hook blocked the end of the turn {STOP_CONTINUATIONS} times; the turn ends here."
            ),
            Some(reason),
        ));
        return None;
    }
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

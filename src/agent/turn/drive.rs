//! The model/tool loop: a model turn's conversation and checkpoints set
//! up, the steps (in `step.rs`) run one after the other, and what the
//! turn leaves of the conversation. A subagent's turn runs the same loop
//! (handed to it as a `Drive`, so that `subagent.rs` need not name this
//! file).

use super::model_call::{self, Called};
use super::record::Record;
use super::spec::Turn;
use super::state::{answer_unrun, State, Step};
use super::step::AfterAnswer;
use super::updates::UpdateSink;
use super::{recover, step, waiting};
use crate::acp::StopReason;
use crate::rpc::RpcError;
use std::cell::RefCell;

/// A model turn: its checkpoints opened, its steps run, and the
/// conversation it leaves when it replaced the session's.
pub(super) fn run(
    turn: &Turn,
    sink: &mut UpdateSink,
    state: &mut State,
    record: &mut Option<Record>,
) -> Result<StopReason, RpcError> {
    let mut messages = turn.conversation.messages.clone();
    let checkpoints = match (turn.workspace.db.as_deref(), record.as_ref()) {
        (Some(db), Some(record)) => crate::checkpoint::Checkpoints::open(
            db,
            &turn.io.session_id,
            record.turn,
            turn.workspace.scan_cache.clone(),
            turn.workspace.checkpoints,
        )
        .map(RefCell::new),
        _ => None,
    };
    let result = steps(&mut Step {
        turn,
        sink,
        state,
        record,
        messages: &mut messages,
        checkpoints: checkpoints.as_ref(),
    });
    if let Some(checkpoints) = checkpoints {
        checkpoints.into_inner().finish();
    }
    if state.prompt_dropped {
        messages.truncate(messages.len().saturating_sub(turn.conversation.fresh));
        state.replaced = Some(messages);
    } else if state.compacted || turn.conversation.rewritten {
        state.replaced = Some(messages);
    }
    result
}

/// The model/tool loop over `messages`, the conversation as the model
/// sees it: each step checks it may go on, asks the model, takes its
/// answer, and runs the tools it called (the steps are in `step.rs`).
fn steps(cx: &mut Step) -> Result<StopReason, RpcError> {
    step::prepare(cx);
    let turn = cx.turn;
    let mut run = step::Loop::new(turn, cx.state, steps);
    // A turn that a stopped process left waiting waits out the rest.
    if let Some(wait) = &turn.start.wait {
        cx.state.waiting_since = Some(wait.since_ms);
        cx.state.limit_reset = Some(wait.until_ms);
        if let Err(stop) = waiting::park(cx, wait.until_ms, &wait.reason) {
            return stop;
        }
    }
    loop {
        if let Some(stop) = step::before_request(cx, &mut run) {
            return stop;
        }
        // What the model call gave decides here how the loop goes on.
        let (mut outcome, mut assistant) = match model_call::call_model(cx, &mut run) {
            Called::Answer(answer) => *answer,
            Called::Again => continue,
            Called::Limited(error) => {
                if let Err(stop) = waiting::on_limited(cx, &error) {
                    return stop;
                }
                run.send_again();
                continue;
            }
            Called::TooLong(error) => {
                if let Err(stop) = model_call::after_too_long(cx, &mut run, &error) {
                    return stop;
                }
                run.send_again();
                continue;
            }
            Called::Stop(stop) => return stop,
        };
        // Calls written into the text, and calls almost right, made whole
        // before anything judges them.
        let repairs = recover::recover(run.tools(), cx.sink, &mut outcome, &mut assistant);
        let stop = step::take_answer(cx, &run, &outcome, assistant);
        // What follows the answer is decided from what is known of it,
        // and done here.
        match step::after_answer(step::answered(cx, &outcome, stop)) {
            AfterAnswer::Calls => {}
            AfterAnswer::Cancelled => {
                answer_unrun(&outcome.tool_calls, cx.messages, cx.state);
                return Ok(StopReason::Cancelled);
            }
            AfterAnswer::GoalBoundary => match step::goal_boundary(cx, &mut run) {
                Some(end) => return Ok(end),
                None => continue,
            },
            AfterAnswer::StopHooks => match step::stop_hooks(cx) {
                true => continue,
                false => return Ok(StopReason::EndTurn),
            },
            AfterAnswer::Stop(stop) => {
                // Calls made by a model that then ran out of tokens or
                // refused do not run, but still need answers for the next
                // request.
                answer_unrun(&outcome.tool_calls, cx.messages, cx.state);
                return Ok(stop);
            }
            AfterAnswer::LimitReached(reached) => {
                // An agent file's per-turn limits: past either, the turn
                // ends with `max_tokens` before the next step.
                answer_unrun(&outcome.tool_calls, cx.messages, cx.state);
                step::say_limit_reached(cx.sink, &reached);
                return Ok(StopReason::MaxTokens);
            }
        }
        let calls = step::run_calls(cx, &mut run, (&outcome.tool_calls, &repairs));
        if let Some(stop) = step::after_calls(cx, &mut run, &outcome, calls) {
            return stop;
        }
    }
}

//! A goal across the turn's steps: whether it runs, its continuation
//! boundaries (pause and budgets), the model's `goal_update` reports
//! applied, and the goal committed to the store and shown.

use super::record::Record;
use super::report;
use super::spec::{Turn, TurnGoal};
use super::state::State;
use super::updates::{UpdateSink, Updates};
use crate::acp::StopReason;
use serde_json::json;
use std::cell::RefCell;

pub(super) fn goal_running(state: &State) -> bool {
    state
        .goal
        .as_ref()
        .is_some_and(|g| g.status == crate::agent::common::goal::Status::Running)
}

/// At a continuation boundary: the stop reason when the goal stops here
/// (paused by the user, or a budget ran out), else `None` (it goes on,
/// counted).
pub(super) fn goal_boundary(
    turn: &Turn,
    state: &mut State,
    started: (std::time::Instant, u64),
) -> Option<StopReason> {
    use crate::agent::common::goal::Status;
    let pause = turn
        .io
        .live
        .lock()
        .map(|mut live| std::mem::take(&mut live.goal_pause))
        .unwrap_or(false);
    let goal = state.goal.as_mut()?;
    goal.counters.elapsed_ms = started.1 + started.0.elapsed().as_millis() as u64;
    if pause {
        goal.status = Status::Paused;
        return Some(StopReason::EndTurn);
    }
    goal.counters.continuations += 1;
    if let Some(what) = goal.budget.exhausted(&goal.counters) {
        goal.status = Status::BudgetExhausted;
        goal.checkpoint = format!(
            "{} (Stopped: the budget of {what} ran out.)",
            goal.checkpoint
        )
        .trim()
        .to_string();
        return Some(StopReason::MaxTurnRequests);
    }
    None
}

/// Applies the model's `goal_update` reports of a step; the stop reason
/// when the goal is complete or blocked (the turn ends with the step).
pub(super) fn apply_goal_reports(
    spec: &TurnGoal,
    sink: &mut UpdateSink,
    state: &mut State,
    reports: Vec<crate::tools::GoalUpdateArgs>,
) -> Option<StopReason> {
    use crate::agent::common::goal::Status;
    use crate::tools::GoalReport;
    let goal = state.goal.as_mut()?;
    let mut end = None;
    for report in reports {
        if let Some(checkpoint) = report.checkpoint {
            goal.checkpoint = checkpoint.chars().take(4_000).collect();
        }
        if let Some(todos) = report.todos {
            goal.todos = serde_json::to_value(
                todos
                    .iter()
                    .map(|t| json!({"content": t.content, "status": t.status}))
                    .collect::<Vec<_>>(),
            )
            .unwrap_or_default();
        }
        match report.status {
            GoalReport::Working => {}
            GoalReport::Complete => {
                goal.status = Status::Complete;
                if spec.delivery && !goal.verified {
                    goal.checkpoint.push_str(
                        " (Declared complete without a verification step: no command ran during the goal.)",
                    );
                }
                end = Some(StopReason::EndTurn);
            }
            GoalReport::Blocked => {
                goal.status = Status::Blocked;
                let question = report
                    .question
                    .unwrap_or_else(|| "The goal is blocked; what should I do?".into());
                goal.question = Some(question.chars().take(4_000).collect());
                // The question reaches the user as the agent's message.
                sink.begin_message();
                sink.updates
                    .borrow_mut()
                    .chunk(false, &sink.message_id, &question);
                end = Some(StopReason::EndTurn);
            }
        }
    }
    goal.touch();
    end
}

/// Commits the goal (its state at this boundary) and tells the
/// dispatcher; the running turn's copy is what status shows.
pub(super) fn commit_goal(
    turn: &Turn,
    state: &mut State,
    record: &mut Option<Record>,
    updates: &RefCell<Updates>,
) {
    let Some(goal) = state.goal.as_mut() else {
        return;
    };
    goal.touch();
    let value = goal.json();
    if let Some(record) = record.as_mut() {
        record.step_marking(&turn.io.session_id, updates, &state.added, &[]);
        if let Err(error) = record.store.save_goal(&turn.io.session_id, &value) {
            log::warn!(
                "cannot store the goal of session {}: {error}",
                turn.io.session_id
            );
        }
    }
    if let Ok(mut live) = turn.io.live.lock() {
        live.goal = Some(value);
    }
    turn.io.client.report(report::Report::GoalProgress {
        session_id: turn.io.session_id.clone(),
        goal: Box::new(goal.clone()),
    });
}

//! A goal across the turn's steps: whether it runs, its continuation
//! boundaries (pause and budgets), the model's `goal_update` reports
//! applied, and the goal committed to the store and shown.

use super::record::Record;
use super::report;
use super::spec::{Turn, TurnGoal};
use super::state::State;
use super::updates::{UpdateSink, Updates};
use crate::acp::StopReason;
use crate::agent::common::goal::{Goal, Status};
use serde_json::json;
use std::cell::RefCell;

pub(super) fn goal_running(state: &State) -> bool {
    state
        .goal
        .as_ref()
        .is_some_and(|g| g.status == Status::Running)
}

/// What a running goal does at a continuation boundary.
#[derive(Debug, PartialEq)]
pub(super) enum Boundary {
    /// The user paused it: the turn ends.
    Paused,
    /// This part of its budget ran out, the continuation counted: the
    /// turn ends.
    OutOf(&'static str),
    /// It goes on, the continuation counted.
    GoesOn,
}

/// Decides what a running goal does at a continuation boundary: a pause
/// first, then its budget with this continuation counted.
pub(super) fn boundary(paused: bool, goal: &Goal) -> Boundary {
    if paused {
        return Boundary::Paused;
    }
    let mut counters = goal.counters;
    counters.continuations += 1;
    match goal.budget.exhausted(&counters) {
        Some(what) => Boundary::OutOf(what),
        None => Boundary::GoesOn,
    }
}

/// At a continuation boundary: does what `boundary` decided. The stop
/// reason when the goal stops here (paused by the user, or a budget ran
/// out), else `None` (it goes on, counted).
pub(super) fn goal_boundary(
    turn: &Turn,
    state: &mut State,
    started: (std::time::Instant, u64),
) -> Option<StopReason> {
    let pause = turn
        .io
        .live
        .lock()
        .map(|mut live| std::mem::take(&mut live.goal_pause))
        .unwrap_or(false);
    let goal = state.goal.as_mut()?;
    goal.counters.elapsed_ms = started.1 + started.0.elapsed().as_millis() as u64;
    match boundary(pause, goal) {
        Boundary::Paused => {
            goal.status = Status::Paused;
            Some(StopReason::EndTurn)
        }
        Boundary::OutOf(what) => {
            goal.counters.continuations += 1;
            goal.status = Status::BudgetExhausted;
            goal.checkpoint = format!(
                "{} (Stopped: the budget of {what} ran out.)",
                goal.checkpoint
            )
            .trim()
            .to_string();
            Some(StopReason::MaxTurnRequests)
        }
        Boundary::GoesOn => {
            goal.counters.continuations += 1;
            None
        }
    }
}

/// Applies the model's `goal_update` reports of a step; the stop reason
/// when the goal is complete or blocked (the turn ends with the step).
pub(super) fn apply_goal_reports(
    spec: &TurnGoal,
    sink: &mut UpdateSink,
    state: &mut State,
    reports: Vec<crate::tools::GoalUpdateArgs>,
) -> Option<StopReason> {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::common::goal::Budget;

    fn at_most(continuations: u64) -> Goal {
        let mut goal = Goal::draft(Budget {
            max_continuations: Some(continuations),
            max_model_calls: None,
            max_tokens: None,
            max_cost: None,
            max_minutes: None,
        });
        goal.status = Status::Running;
        goal
    }

    #[test]
    fn a_paused_goal_stops_even_with_budget_left() {
        assert_eq!(boundary(true, &at_most(10)), Boundary::Paused);
    }

    #[test]
    fn a_goal_with_budget_left_goes_on() {
        let mut goal = at_most(3);
        goal.counters.continuations = 1;
        assert_eq!(boundary(false, &goal), Boundary::GoesOn);
    }

    #[test]
    fn the_continuation_that_reaches_the_budget_stops_the_goal() {
        let mut goal = at_most(3);
        goal.counters.continuations = 2;
        assert_eq!(boundary(false, &goal), Boundary::OutOf("continuations"));
        // Deciding counts nothing: the caller counts what it does.
        assert_eq!(goal.counters.continuations, 2);
    }
}

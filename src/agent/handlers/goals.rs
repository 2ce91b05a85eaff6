//! Goals (docs/extensions.md, "Goals"): pausing and resuming a session's goal,
//! committing it and telling the client when it changes, and bringing it
//! back when a session is loaded.

use super::events;
use crate::acp::spindle::{
    results::{to_json, GoalPauseResult, GoalResumeResult},
    GoalPauseParams, GoalResumeParams,
};
use crate::agent::common::goal::Goal;
use crate::agent::dispatcher::Dispatcher;
use crate::rpc::RpcError;
use serde_json::{json, Value};

/// Commits the session's goal and tells the client (`goal` event),
/// when it changed.
pub(super) fn goal_changed(d: &mut Dispatcher, id: &str) {
    let Some(session) = d.session_mut(id) else {
        return;
    };
    if !session.take_goal_change() {
        return;
    }
    let goal = session
        .goal
        .as_ref()
        .map(|g| g.json())
        .unwrap_or(Value::Null);
    if let Ok(store) = d.store() {
        if let Err(error) = store.save_goal(id, &goal) {
            log::warn!("cannot store the goal of session {id}: {error}");
        }
    }
    events::event(d, id, "goal", json!({"goal": goal}));
}

/// A turn's goal moved on: kept in the session, committed and told.
pub(super) fn goal_progress(d: &mut Dispatcher, id: &str, goal: Goal) {
    if let Some(session) = d.session_mut(id) {
        session.goal = Some(goal);
        session.mark_goal_changed();
    }
    goal_changed(d, id);
}

/// `_spindle/session/goal/pause`: the running goal stops at its next
/// continuation boundary (the step in flight finishes).
pub(super) fn goal_pause(d: &mut Dispatcher, params: GoalPauseParams) -> Result<Value, RpcError> {
    use crate::agent::common::goal::Status;
    let id = params.session_id;
    let session = d.session_mut(id).expect("checked");
    let running = session
        .goal
        .as_ref()
        .is_some_and(|g| g.status == Status::Running);
    if !running {
        return Err(RpcError::new(-32011, "no goal is running in this session")
            .with_data(json!({"code": "no_running_goal"})));
    }
    if session.running.is_some() {
        // The turn stops at the boundary and reports the paused goal.
        if let Ok(mut live) = session.live().lock() {
            live.goal_pause = true;
        }
    } else if let Some(goal) = session.goal.as_mut() {
        goal.status = Status::Paused;
        goal.touch();
        session.mark_goal_changed();
    }
    let goal = session.goal.as_ref().map(|g| g.json());
    goal_changed(d, id);
    Ok(to_json(GoalPauseResult {
        goal,
        pausing: d.checked(id).running.is_some(),
    }))
}

/// `_spindle/session/goal/resume`: a paused, blocked, cancelled or
/// budget-exhausted goal runs again; the next prompt continues it.
pub(super) fn goal_resume(d: &mut Dispatcher, params: GoalResumeParams) -> Result<Value, RpcError> {
    use crate::agent::common::goal::Status;
    let id = params.session_id.to_string();
    let session = d.session_mut(&id).expect("checked");
    let Some(goal) = session.goal.as_mut().filter(|g| g.resumable()) else {
        return Err(RpcError::new(
            -32010,
            "there is no paused, blocked, cancelled or budget-exhausted goal to resume",
        )
        .with_data(json!({"code": "no_resumable_goal"})));
    };
    goal.status = Status::Running;
    goal.question = None;
    goal.touch();
    let value = goal.json();
    session.mark_goal_changed();
    let mode_changed = session.settings.mode != crate::modes::Mode::Goal;
    session.settings.mode = crate::modes::Mode::Goal;
    if mode_changed {
        d.send_update(
            &id,
            crate::acp::SessionUpdate::CurrentModeUpdate {
                current_mode_id: "goal".into(),
            },
        );
    }
    goal_changed(d, &id);
    Ok(to_json(GoalResumeResult { goal: value }))
}

/// On load or resume: the session's goal comes back; one that was
/// running when its process stopped is paused (the user looks first).
pub(super) fn recover_goal(d: &mut Dispatcher, id: &str) {
    use crate::agent::common::goal::{Goal, Status};
    let stored = d
        .store()
        .ok()
        .and_then(|store| store.goal(id).ok().flatten());
    let Some(mut goal) = stored.and_then(|v| serde_json::from_value::<Goal>(v).ok()) else {
        return;
    };
    let Some(session) = d.session_mut(id) else {
        return;
    };
    if goal.status == Status::Running {
        goal.status = Status::Paused;
        session.mark_goal_changed();
    }
    session.goal = Some(goal);
    if session.goal_pending() {
        goal_changed(d, id);
    }
}

//! Goals (docs/extensions.md, "Goals"): an objective the agent works on across many
//! model calls, continuing by itself until it is complete, blocked, out
//! of budget, paused or cancelled. This is the goal's state and rules;
//! the turn worker runs the continuation loop, the dispatcher owns the
//! state between turns.

use crate::modes::Preset;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

/// The longest objective, checkpoint and todo text a continuation message
/// carries: it stays the same size however long the goal runs.
const OBJECTIVE_CAP: usize = 2_000;
const CHECKPOINT_CAP: usize = 1_500;
const LEFT_CAP: usize = 1_000;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Status {
    Drafting,
    Running,
    Paused,
    Blocked,
    Complete,
    Cancelled,
    BudgetExhausted,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Counters {
    pub continuations: u64,
    pub model_calls: u64,
    pub tool_calls: u64,
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub cost: f64,
    pub elapsed_ms: u64,
}

/// Limits; `None` is unlimited.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Budget {
    pub max_continuations: Option<u64>,
    pub max_model_calls: Option<u64>,
    pub max_tokens: Option<u64>,
    pub max_cost: Option<f64>,
    pub max_minutes: Option<u64>,
}

impl Budget {
    /// The preset's budget: light < balanced < delivery.
    pub(crate) fn of(preset: Preset) -> Budget {
        let (continuations, calls, tokens, minutes) = match preset {
            Preset::Light => (10, 60, 2_000_000, 30),
            Preset::Balanced => (30, 200, 8_000_000, 120),
            Preset::Delivery => (100, 600, 30_000_000, 480),
        };
        Budget {
            max_continuations: Some(continuations),
            max_model_calls: Some(calls),
            max_tokens: Some(tokens),
            max_cost: None,
            max_minutes: Some(minutes),
        }
    }

    /// The preset's budget with the config's overrides.
    pub(crate) fn configured(preset: Preset, config: &crate::config::GoalSettings) -> Budget {
        let mut budget = Budget::of(preset);
        if let Some(n) = config.max_continuations {
            budget.max_continuations = Some(n);
        }
        if let Some(n) = config.max_model_calls {
            budget.max_model_calls = Some(n);
        }
        if let Some(n) = config.max_tokens {
            budget.max_tokens = Some(n);
        }
        if let Some(n) = config.max_cost {
            budget.max_cost = Some(n);
        }
        if let Some(n) = config.max_minutes {
            budget.max_minutes = Some(n);
        }
        budget
    }

    /// What ran out, if anything.
    pub(crate) fn exhausted(&self, counters: &Counters) -> Option<&'static str> {
        if self
            .max_continuations
            .is_some_and(|max| counters.continuations >= max)
        {
            return Some("continuations");
        }
        if self
            .max_model_calls
            .is_some_and(|max| counters.model_calls >= max)
        {
            return Some("model calls");
        }
        if self
            .max_tokens
            .is_some_and(|max| counters.input_tokens.saturating_add(counters.output_tokens) >= max)
        {
            return Some("tokens");
        }
        if self.max_cost.is_some_and(|max| counters.cost >= max) {
            return Some("cost");
        }
        if self
            .max_minutes
            .is_some_and(|max| counters.elapsed_ms >= max * 60_000)
        {
            return Some("time");
        }
        None
    }
}

/// A goal's whole state (durable; sent as the status `goal` field).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Goal {
    pub objective: String,
    pub status: Status,
    /// The last turn's outcome (`failed` labels the turn, not the goal).
    pub last_turn: Option<String>,
    pub counters: Counters,
    pub budget: Budget,
    pub todos: Value,
    pub checkpoint: String,
    /// The question of a blocked goal.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub question: Option<String>,
    pub started_at: Option<String>,
    pub updated_at: String,
    /// A command ran while the goal worked (delivery wants verification).
    #[serde(default)]
    pub verified: bool,
}

impl Goal {
    pub(crate) fn draft(budget: Budget) -> Goal {
        Goal {
            objective: String::new(),
            status: Status::Drafting,
            last_turn: None,
            counters: Counters::default(),
            budget,
            todos: json!([]),
            checkpoint: String::new(),
            question: None,
            started_at: None,
            updated_at: crate::clock::now_rfc3339(),
            verified: false,
        }
    }

    pub(crate) fn json(&self) -> Value {
        serde_json::to_value(self).unwrap_or(Value::Null)
    }

    pub(crate) fn touch(&mut self) {
        self.updated_at = crate::clock::now_rfc3339();
    }

    /// Whether `resume` applies.
    pub(crate) fn resumable(&self) -> bool {
        matches!(
            self.status,
            Status::Paused | Status::Blocked | Status::Cancelled | Status::BudgetExhausted
        )
    }

    /// The message that continues the goal: the objective, the checkpoint
    /// and what is left, each capped, so it is the same size at the
    /// fiftieth continuation as at the first.
    pub(crate) fn continuation(&self) -> String {
        let left: Vec<String> = self
            .todos
            .as_array()
            .into_iter()
            .flatten()
            .filter(|t| t["status"] != "completed")
            .filter_map(|t| t["content"].as_str().map(|c| format!("- {c}")))
            .collect();
        let left = if left.is_empty() {
            "(no open todos)".to_string()
        } else {
            cap(&left.join("\n"), LEFT_CAP)
        };
        let checkpoint = if self.checkpoint.is_empty() {
            "(none yet)".to_string()
        } else {
            cap(&self.checkpoint, CHECKPOINT_CAP)
        };
        format!(
            "(Goal continuation.) Keep working on the goal.\n\nObjective: {}\n\nCheckpoint: {checkpoint}\n\nLeft:\n{left}\n\nContinue with the next step. Call goal_update with status \"complete\" once the objective is done and verified, \"blocked\" with a question if you need the user, or \"working\" with a new checkpoint as you go.",
            cap(&self.objective, OBJECTIVE_CAP)
        )
    }
}

fn cap(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_string();
    }
    let mut cut: String = text.chars().take(max).collect();
    cut.push('…');
    cut
}

/// What the system prompt adds in goal mode.
pub(crate) const INSTRUCTIONS: &str = "The session is in goal mode: you work on the objective across many steps until it is done. Report progress with the goal_update tool: status \"working\" with a short checkpoint (what is delivered and verified so far) and your todo list; \"complete\" only when the objective is done and verified; \"blocked\" with a question when you need the user.";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn budgets_grow_with_the_preset_and_trip_on_each_limit() {
        let light = Budget::of(Preset::Light);
        let delivery = Budget::of(Preset::Delivery);
        assert!(light.max_continuations < Budget::of(Preset::Balanced).max_continuations);
        assert!(Budget::of(Preset::Balanced).max_continuations < delivery.max_continuations);
        let mut counters = Counters::default();
        assert_eq!(light.exhausted(&counters), None);
        counters.continuations = 10;
        assert_eq!(light.exhausted(&counters), Some("continuations"));
        let tight = Budget {
            max_continuations: None,
            max_model_calls: None,
            max_tokens: Some(100),
            max_cost: Some(0.5),
            max_minutes: Some(1),
        };
        let mut counters = Counters {
            input_tokens: 90,
            output_tokens: 10,
            ..Counters::default()
        };
        assert_eq!(tight.exhausted(&counters), Some("tokens"));
        counters.input_tokens = 0;
        counters.cost = 0.5;
        assert_eq!(tight.exhausted(&counters), Some("cost"));
        counters.cost = 0.0;
        counters.elapsed_ms = 60_000;
        assert_eq!(tight.exhausted(&counters), Some("time"));
    }

    #[test]
    fn the_continuation_stays_the_same_size() {
        let mut goal = Goal::draft(Budget::of(Preset::Balanced));
        goal.objective = "make the tests pass".repeat(500);
        goal.checkpoint = "x".repeat(10_000);
        goal.todos = json!((0..200)
            .map(|n| json!({"content": format!("todo {n}"), "status": "pending"}))
            .collect::<Vec<_>>());
        let first = goal.continuation().len();
        goal.counters.continuations = 50;
        goal.checkpoint = "y".repeat(20_000);
        assert_eq!(goal.continuation().len(), first);
        assert!(first < 6_000, "{first}");
    }
}

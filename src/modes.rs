//! The session's controls as values, with no dependencies: the mode, the
//! execution preset and the approval policy, and what each means for a
//! turn. How they are shown and changed is the agent's
//! (`agent/handlers/controls.rs`).

use serde::{Deserialize, Serialize};

/// Session modes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// Full tools.
    #[default]
    Normal,
    /// Read-only tools; the model plans with todo_write and changes nothing.
    Plan,
    /// Full tools, and the turn continues by itself until the goal is
    /// complete, blocked, out of budget, paused or cancelled.
    Goal,
}

impl Mode {
    pub fn id(self) -> &'static str {
        match self {
            Mode::Normal => "normal",
            Mode::Plan => "plan",
            Mode::Goal => "goal",
        }
    }
}

/// Execution presets: how long a turn may run, how hard the model thinks
/// by default, and how much it verifies before answering.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Preset {
    Light,
    #[default]
    Balanced,
    Delivery,
}

impl Preset {
    pub fn parse(text: &str) -> Option<Preset> {
        match text {
            "light" | "economy" => Some(Preset::Light),
            "balanced" => Some(Preset::Balanced),
            "delivery" => Some(Preset::Delivery),
            _ => None,
        }
    }

    pub fn id(self) -> &'static str {
        match self {
            Preset::Light => "light",
            Preset::Balanced => "balanced",
            Preset::Delivery => "delivery",
        }
    }

    /// Model calls per turn.
    pub fn step_budget(self) -> usize {
        match self {
            Preset::Light => 20,
            Preset::Balanced => 50,
            Preset::Delivery => 100,
        }
    }

    /// The effort used when the session's effort is `auto`.
    pub fn default_effort(self) -> &'static str {
        match self {
            Preset::Light => "low",
            Preset::Balanced => "medium",
            Preset::Delivery => "high",
        }
    }

    /// What the system prompt asks about verification.
    pub fn instructions(self) -> &'static str {
        match self {
            Preset::Light => "Work economically: make the change asked for with as few steps as possible; verify only when it is cheap.",
            Preset::Balanced => "Verify your changes where it is reasonable (build or run the relevant tests) before you answer.",
            Preset::Delivery => "Deliver finished work: after changing code, build it and run the relevant tests, fix what fails, and only then answer, saying what you verified.",
        }
    }
}

/// How much the model is told before the user's first word: `full` (every
/// tool, the whole guidance) or `lean` (the core tools, short texts), for
/// models with a small context window.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Profile {
    Lean,
    Full,
}

impl Profile {
    pub fn parse(text: &str) -> Option<Profile> {
        match text {
            "lean" => Some(Profile::Lean),
            "full" => Some(Profile::Full),
            _ => None,
        }
    }

    pub fn id(self) -> &'static str {
        match self {
            Profile::Lean => "lean",
            Profile::Full => "full",
        }
    }
}

/// The session's approval policy.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Policy {
    /// Ask before every edit, write and command; reads and searches inside
    /// the workspace run freely.
    #[default]
    Ask,
    /// Edits inside the workspace and read-only commands run freely; other
    /// commands ask.
    Auto,
    /// Edits inside the workspace run freely, and so do commands, inside an
    /// operating-system sandbox (the workspace writable except `.git/` and
    /// the files Spindle runs, nothing else, no network). Commands that
    /// need more, and every command when no sandbox can be had, ask.
    Sandbox,
    /// Nothing asks.
    Yolo,
}

impl Policy {
    pub fn parse(text: &str) -> Option<Policy> {
        match text {
            "ask" => Some(Policy::Ask),
            "auto" => Some(Policy::Auto),
            "sandbox" => Some(Policy::Sandbox),
            "yolo" => Some(Policy::Yolo),
            _ => None,
        }
    }
}

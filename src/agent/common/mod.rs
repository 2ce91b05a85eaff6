//! What the dispatcher side and the turn side both use: the start-up
//! options, the model registry, the session controls' values, the approval
//! policy, slash commands, prompt content and the system prompt, and what model
//! calls cost.

pub mod client_prompt;
pub mod commands;
pub mod content;
pub mod goal;
pub mod hooks;
pub mod models;
pub mod options;
pub mod permission;
pub mod prompt;
pub mod skills;
pub mod spend;

//! What the dispatcher side and the turn side both use: the start-up
//! options (`options.rs`), the model registry (`models.rs`), the approval
//! policy and remembered answers (`permission.rs`), slash commands
//! (`commands.rs`, the one place names are given out: the user's and the
//! built-ins before a project's, a shadowed one listed), prompt content
//! (`content.rs`: prompt blocks, images and blobs saved under
//! `.spindle/attachments/`), the system prompt (`prompt.rs`: with
//! `AGENTS.md` and its `@` imports, kept inside the workspace or the user's
//! config folder) and the editor's own (`client_prompt.rs`), Agent Skills
//! (`skills.rs`), Claude Code's hooks read, matched and their answers judged
//! (`hooks.rs`; `turn/hooks.rs` and `Processes::fire` run them), goals
//! (`goal.rs`), and what model calls cost (`spend.rs`: sums stay unknown
//! when one call's cost is).

pub(super) mod client_prompt;
pub mod commands;
pub(super) mod content;
pub(super) mod goal;
pub mod hooks;
pub mod models;
pub(super) mod options;
pub mod permission;
pub(super) mod prompt;
pub mod skills;
pub(super) mod spend;

//! The single integration-test binary: every test module lives under
//! `tests/it/`, sharing the helpers in `support`.

mod agents;
mod architecture;
mod attacks;
mod commands;
mod content;
mod controls;
mod credentials;
mod exec;
mod help;
mod line_endings;
mod mcp;
mod memory;
mod network;
mod policy_rules;
mod protocol;
mod providers;
// The release script is bash, run where Unix shells are.
#[cfg(unix)]
mod release;
mod repository;
mod sandbox;
mod sessions;
mod setup_pty;
mod shell_choice;
mod streaming;
mod support;
mod support_selftest;
mod tools;
mod trace_context;
mod unstable;

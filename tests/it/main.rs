//! The single integration-test binary: every test module lives under
//! `tests/it/`, sharing the helpers in `support`.

// Imports used only by the tests of Unix-only behaviour.
#![cfg_attr(windows, allow(unused_imports))]

mod agents;
mod architecture;
mod attacks;
mod chat;
mod claude_permissions;
mod claude_project;
mod commands;
mod content;
mod controls;
mod corpus;
mod cost;
// What a command can read of the agent through /proc (Linux and Unix).
#[cfg(unix)]
mod credentials;
// Shell lines of the docs, run as a shell would.
#[cfg(unix)]
mod docs_commands;
mod docs_config;
mod exec;
mod exec_result;
mod exits;
mod first_day;
// The fleet recipes and the container image script (bash, ELF images).
#[cfg(unix)]
mod fleets;
mod forgiving;
mod help;
mod hooks;
mod imports;
mod local_servers;
mod mcp;
// FIFOs where a setting names a file (Unix).
mod memory;
#[cfg(unix)]
mod named_files;
mod network;
mod policy_rules;
mod precedence;
mod project_root;
mod protocol;
mod providers;
// The release script is bash, run where Unix shells are.
#[cfg(unix)]
mod release;
mod remember;
mod repository;
// The Linux and macOS sandboxes; Windows has none (refused at start).
#[cfg(unix)]
mod sandbox;
mod serve;
mod server_numbers;
mod sessions;
// Terminals (ptys) are a Unix thing; the Windows console is not tested.
#[cfg(unix)]
mod setup_pty;
mod shell_choice;
mod skills;
mod streaming;
mod support;
mod support_selftest;
mod terminal_safety;
mod tools;
mod trace_context;
mod trust;
mod unstable;
mod wrong_key;

//! Spindle: a coding agent that speaks the Agent Client Protocol over stdio.
//!
//! The binary (`src/main.rs`) parses flags and picks the exit code; this
//! library does the work. See ARCHITECTURE.md for the map.

pub mod acp;
pub mod agent;
pub mod agentfile;
pub mod cancel;
pub mod checkpoint;
pub mod config;
pub mod credentials;
pub mod doctor;
pub mod exec;
#[doc(hidden)]
pub mod fuzz;
pub mod history;
pub mod mcp;
pub mod policy;
pub mod provider;
pub mod rpc;
pub mod sandbox;
pub mod setup;
pub mod store;
pub mod tools;
pub mod util;

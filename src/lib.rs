//! Spindle: a coding agent that speaks the Agent Client Protocol over stdio.
//!
//! The binary (`src/main.rs`) hands over to `cli::main`, which parses the
//! command line and picks the exit code. See ARCHITECTURE.md for the map.

pub mod acp;
pub mod agent;
pub mod agentfile;
pub mod cancel;
pub mod checkpoint;
pub mod cli;
pub mod clock;
pub mod config;
pub mod conversation;
pub mod credentials;
#[doc(hidden)]
pub mod fuzz;
pub mod history;
pub mod mcp;
pub mod modes;
pub mod net;
pub mod os;
pub mod policy;
pub mod process;
pub mod provider;
pub mod rpc;
pub mod sandbox;
pub mod store;
pub mod tools;
pub mod util;

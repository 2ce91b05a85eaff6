//! Spindle: a coding agent that speaks the Agent Client Protocol over stdio.
//!
//! The binary (`src/main.rs`) hands over to `cli::main`, which parses the
//! command line and picks the exit code. See ARCHITECTURE.md for the map.
//! Only what the binary, the tests and the scripts' programs use is
//! public; the rest is the crate's own, so the compiler reports what
//! nothing uses.

#![warn(unreachable_pub)]

pub(crate) mod acp;
pub mod agent;
pub(crate) mod agentfile;
pub(crate) mod cancel;
pub(crate) mod checkpoint;
pub mod cli;
pub mod clock;
pub mod config;
pub mod conversation;
pub(crate) mod credentials;
#[doc(hidden)]
pub mod fuzz;
pub(crate) mod history;
pub(crate) mod mcp;
pub mod modes;
pub(crate) mod net;
pub mod os;
pub(crate) mod policy;
pub(crate) mod process;
pub(crate) mod provider;
pub(crate) mod rpc;
pub mod sandbox;
pub mod serve;
pub mod store;
pub mod tools;
pub mod util;

//! Support code shared by the integration tests: schema validation of the
//! agent's output, a fake OpenAI-compatible model server, a harness that
//! drives the real `spindle` binary over stdio, and a client that answers
//! the agent's requests during a prompt turn.
//!
//! Not every test module uses every helper.
#![allow(dead_code)]

pub mod agent;
pub mod client;
pub mod fake_openai;
pub mod in_process;
pub mod isolation;
pub mod mcp_server;
pub mod media;
pub mod prelude;
#[cfg(unix)]
pub mod pty;
pub mod reexec;
pub mod rules;
pub mod schema;
pub mod store;
pub mod web;
pub mod wire;

// Re-exported for the test modules; not each one uses each name.
#[allow(unused_imports)]
pub use agent::{notices_text, temp_dir, updates_text, write_file, Agent};
#[allow(unused_imports)]
pub use client::{content_text, run_prompt, Answer, Exchange, Turn};
#[allow(unused_imports)]
pub use fake_openai::{FakeServer, Recorded, Reply, Step};
#[allow(unused_imports)]
pub use isolation::spindle_command;
#[allow(unused_imports)]
pub use schema::validate_agent_message;

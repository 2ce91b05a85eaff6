//! Support code shared by the integration tests: schema validation of the
//! agent's output, a fake OpenAI-compatible model server, a harness that
//! drives the real `spindle` binary over stdio, and a client that answers
//! the agent's requests during a prompt turn.
//!
//! `prelude.rs` is what most tests start with (the waits and request
//! helpers); `agent.rs` the harness, which runs `spindle acp` as a process
//! or, for protocol-shape and dispatcher tests, `agent::serve` on a thread
//! over pipes (`in_process.rs`), reading and schema-checking (`schema.rs`)
//! every line the same way; `rules.rs` what the schema cannot check (no
//! update before its session's answer, no opt-in update the client did not
//! ask for); `isolation.rs` `spindle_command(home)`, the one way a test
//! starts the binary, with a private home and none of the developer's keys
//! (the architecture test refuses any other start); `reexec.rs` what the
//! test binary becomes when started again; `client.rs` the client side of
//! a turn; `fake_openai/` and `wire.rs` the fake model servers of each wire
//! format; `mcp_server.rs` MCP test servers; `web.rs` a web server for
//! `fetch_url`; `store.rs`, `media.rs` and `pty.rs` smaller helpers.
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

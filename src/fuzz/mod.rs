//! Fuzz targets on the stable toolchain: each parser or state machine that
//! reads outside input gets random input built from the tokens it cares
//! about, and must neither panic nor break its stated property.
//! `cargo test` runs a bounded number of cases of each (see the test at the
//! end); `scripts/fuzz` runs them for longer and prints cases per second.
//! A failure names the target, the seed and the input, so it can be
//! replayed.
//!
//! This file holds the generator, the table of targets and the runner; the
//! targets are grouped by the layer they read for: `rpc.rs` (JSON-RPC
//! lines), `provider.rs` (SSE, the model streams, trace context),
//! `tools.rs` (globs, ignore rules, edits, inflate, almost-JSON
//! arguments), `policy.rs` (the command classifier), `mcp.rs`
//! (elicitations).

mod mcp;
mod policy;
mod provider;
mod rng;
mod rpc;
mod tools;

pub use rng::Rng;
pub use tools::deflate_for_tests;

use std::panic::{catch_unwind, AssertUnwindSafe};

/// One fuzz target: builds an input from the generator and checks it.
pub struct Target {
    pub name: &'static str,
    /// `Err` names the broken property; a panic is caught by `run`.
    pub case: fn(&mut Rng) -> Result<(), String>,
}

/// Every target.
pub const TARGETS: &[Target] = &[
    Target {
        name: "json-rpc classifier",
        case: rpc::rpc_classifier,
    },
    Target {
        name: "stdin line reader",
        case: rpc::line_reader,
    },
    Target {
        name: "sse parser",
        case: provider::sse_parser,
    },
    Target {
        name: "chat completions chunks",
        case: provider::chat_chunks,
    },
    Target {
        name: "anthropic stream",
        case: provider::anthropic_stream,
    },
    Target {
        name: "responses stream",
        case: provider::responses_stream,
    },
    Target {
        name: "glob matcher",
        case: tools::glob_matcher,
    },
    Target {
        name: "ignore rules",
        case: tools::ignore_rules,
    },
    Target {
        name: "edit applier",
        case: tools::edit_applier,
    },
    Target {
        name: "forgiving matcher",
        case: tools::forgiving_matcher,
    },
    Target {
        name: "almost-JSON tool arguments",
        case: tools::almost_json,
    },
    Target {
        name: "command classifier",
        case: policy::command_classifier,
    },
    Target {
        name: "inflate",
        case: tools::inflate,
    },
    Target {
        name: "mcp elicitation",
        case: mcp::mcp_elicitation,
    },
    Target {
        name: "trace context",
        case: provider::trace_context,
    },
];

/// A failed case.
#[derive(Debug)]
pub struct Failure {
    pub target: &'static str,
    pub seed: u64,
    pub problem: String,
}

/// Runs `cases` cases of `target` from `seed` (each case has its own seed,
/// `seed + i`, so a failure replays alone).
pub fn run(target: &Target, seed: u64, cases: u64) -> Result<(), Failure> {
    for index in 0..cases {
        let case_seed = seed.wrapping_add(index);
        let mut rng = Rng::new(case_seed);
        let outcome = catch_unwind(AssertUnwindSafe(|| (target.case)(&mut rng)));
        let problem = match outcome {
            Ok(Ok(())) => continue,
            Ok(Err(problem)) => problem,
            Err(panic) => format!(
                "panicked: {}",
                panic
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                    .unwrap_or_default()
            ),
        };
        return Err(Failure {
            target: target.name,
            seed: case_seed,
            problem,
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A bounded pass of every target (scripts/fuzz runs them longer).
    #[test]
    fn every_fuzz_target_holds_for_a_bounded_number_of_cases() {
        for target in TARGETS {
            let cases = if target.name == "stdin line reader" {
                300
            } else {
                3000
            };
            if let Err(failure) = run(target, 0x5eed, cases) {
                panic!("{failure:?}");
            }
        }
    }
}

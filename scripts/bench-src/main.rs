//! Spindle's benchmark program: measures the agent from the outside, the way
//! an editor sees it, and prints the figures beside their targets.
//!
//! It asserts nothing: a missed target is printed, not failed. The exit code
//! is non-zero only when a figure could not be measured at all (the binary is
//! missing, the agent crashed or timed out).
//!
//! Usage: `bench [PATH_TO_RELEASE_BINARY] [--figure N]...` (default
//! `target/release/spindle`, every figure). `scripts/bench` builds
//! everything and runs it; `scripts/bench --figure 9` runs figure 9 only.
//!
//! Figures:
//! 1. `initialize` latency: spawn to the `initialize` response, fresh
//!    process; and its ratio to the floor of spawning `sh` to answer one
//!    line over the same pipes (target 1.5 times at most).
//! 2. `session/new` latency in an initialized process.
//! 3. Peak RSS (`VmHWM`) after one scripted prompt (target 6 MiB), and
//!    what the process holds after each step: the binary's code and data,
//!    shared libraries, anonymous memory.
//!
//!    Figures 1 and 3 also measure `target/static/spindle` (the Linux
//!    release, from `scripts/build-static`) when it is there.
//! 4. Streaming throughput: a fake Chat Completions server streams 100,000
//!    content chunks; chunks/s from writing the prompt to reading its answer.
//! 5. Release binary size.
//! 6. Agent overhead per tool round trip: a scripted prompt whose replies
//!    call `read_file` 500 times, minus a text-only prompt, per call.
//! 7. Search over a 10,000-file tree: a scripted prompt whose reply calls
//!    `search` once, minus a text-only prompt, with the built-in engine and
//!    with ripgrep.
//! 8. Loading a session of 10,000 stored updates: one agent fills a
//!    database with one scripted prompt whose reply alternates message and
//!    thought chunks; fresh agents then time `session/load`, from writing
//!    the request to reading its answer, all updates replayed before it.
//! 9. Under hostile input: peak RSS while the model server streams a 1 GB
//!    event, while it streams endless small deltas of text, of reasoning
//!    and of one tool call's arguments in each wire format, while `read_file` scans a 4 GB (sparse) file, and while the
//!    client reads nothing for 10 s of a fast stream; and the time to
//!    answer `session/cancel` written right after a 60 MB line.
//! 10. A long session and automatic compaction: 200 prompts in one session,
//!     each a `read_file` of a 6 KB file, against a fake Chat Completions
//!     server without usage; `context.auto_compact` at its default and off
//!     on a 128,000-token window, and at its default on a 16,000-token one
//!     (where eliding old outputs is not enough and summaries happen): the
//!     requests' size over the session, the compactions, and the agent's
//!     own time per compaction.
//! 11. The vendor extensions, against a fake Chat Completions server: the
//!     `_spindle/session/status` answer (200 of them, 10 ms apart)
//!     while the model streams a chunk every 5 ms for 3 s, and the agent's
//!     own cost of one `_spindle/session/steer` (a prompt answered with a
//!     `list_directory` call after 300 ms, steered at 100 ms, against the
//!     same prompt unsteered: from the first answer written to the second
//!     request received), with the steer's round trip.
//! 12. Goals, against a fake Chat Completions server: one prompt in goal
//!     mode answered with a short text 50 times over, each time continued
//!     by the agent, then with a `goal_update` call of status `complete`:
//!     the agent's own time per continuation (from an answer written to
//!     the next request received) and the size of the request and of the
//!     continuation message at the first continuation and the 50th.
//! 13. Background jobs, started by a scripted `run_command` call with
//!     `background: true`: the agent's peak RSS (`VmHWM`) while a job
//!     writes 1 GB of output at the default log cap, against its `VmHWM`
//!     before, with the log's size; and with a 200 MB log cap, the latency
//!     of `_spindle/job/transcript` windows at the start, middle and end
//!     of a 100 MB job log, of a `shell-log:` resource window at its end,
//!     and of `workspace:` resource windows of the last 2,000 lines of a
//!     100 MB file and of a file just under the 16 MiB cap on the files a
//!     window reads.
//! 14. edit_file's matchers, in process, on a 10,000-line file: an exact
//!     hit, a hit found by forgiving a re-indented block, and a miss (every
//!     matcher, then the closest lines).
//! 15. The corpus of model slips (`tests/data/corpus`): the edit cases a
//!     model's slip should not fail that apply, and the controls refused;
//!     and the prompt before the first word in each profile.
//! 16. `spindle serve` with many connections: the server's memory and
//!     threads idle and with 100 HTTP connections open (each initialized,
//!     its event stream held), per connection; and the time from writing a
//!     prompt to its first message chunk over HTTP beside stdio.

mod agent;
mod chat_server;
mod context;
mod cpu;
mod extensions;
mod fake_server;
mod flood;
mod goals;
mod holdings;
mod hostile;
mod jobs;
mod load;
mod matching;
mod recovery;
mod report;
mod search;
mod serve;
mod size;
mod startup;
mod stream;
mod tools;
mod workspace;

use report::Row;
use std::path::PathBuf;
use std::process::ExitCode;
use std::thread;
use std::time::Duration;
use workspace::{Bench, Workspace};

/// The prompts the tool scripts answer: the text-only baseline, and the
/// one that plays the ordered replies with their tool calls.
const BASELINE_PROMPT: &str = "baseline";
const TOOLS_PROMPT: &str = "go";

const INIT_TIMEOUT: Duration = Duration::from_secs(10);
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);
const SCRIPTED_PROMPT_TIMEOUT: Duration = Duration::from_secs(30);
const TOOL_PROMPT_TIMEOUT: Duration = Duration::from_secs(120);

/// Suggested targets (figures 6 and 7): the issue asks for these figures
/// without a number.
const SUGGESTED: &str = "suggested; the issue sets none";

const MIB: f64 = 1024.0 * 1024.0;

const USAGE: &str = "usage: bench [PATH_TO_RELEASE_BINARY] [--figure N]...
  PATH_TO_RELEASE_BINARY  the agent to measure (default target/release/spindle)
  --figure N              run figure N only (1 to 16; repeat for several)";

fn main() -> ExitCode {
    let mut binary = PathBuf::from("target/release/spindle");
    let mut figures: Vec<u32> = Vec::new();
    let mut args = std::env::args_os().skip(1);
    while let Some(arg) = args.next() {
        match arg.to_str() {
            Some("--help" | "-h") => {
                println!("{USAGE}");
                return ExitCode::SUCCESS;
            }
            Some("--figure") => match args.next().and_then(|n| n.to_str()?.parse().ok()) {
                Some(n @ 1..=16) => figures.push(n),
                _ => {
                    eprintln!("bench: --figure takes a number from 1 to 16\n{USAGE}");
                    return ExitCode::FAILURE;
                }
            },
            Some(flag) if flag.starts_with('-') => {
                eprintln!("bench: unknown option {flag}\n{USAGE}");
                return ExitCode::FAILURE;
            }
            _ => binary = PathBuf::from(arg),
        }
    }
    let run = |n: u32| figures.is_empty() || figures.contains(&n);
    if !binary.is_file() {
        eprintln!(
            "bench: no agent binary at {} (build it with `cargo build --release`)",
            binary.display()
        );
        return ExitCode::FAILURE;
    }
    let binary = binary.canonicalize().unwrap_or(binary);
    let work = match Workspace::create() {
        Ok(work) => work,
        Err(err) => {
            eprintln!("bench: cannot create a temporary directory: {err}");
            return ExitCode::FAILURE;
        }
    };
    let bench = Bench { binary, work };

    println!("Spindle benchmark");
    println!("  binary: {}", bench.binary.display());
    println!(
        "  host:   {} CPUs, {}",
        thread::available_parallelism().map_or(0, |n| n.get()),
        std::env::consts::ARCH
    );
    println!("  (RUST_LOG is unset for the agent; sizes are MiB = 1,048,576 bytes)");
    println!();

    let mut rows: Vec<Row> = Vec::new();
    let mut failed = false;

    // 1 and 2: start-up latencies.
    if run(1) || run(2) {
        startup::report_latencies(&bench, &mut rows, &mut failed);
        println!();
    }

    // 3: peak RSS.
    if run(3) {
        startup::report_memory(&bench, &mut rows, &mut failed);
        println!();
    }

    // 4: streaming throughput.
    if run(4) {
        stream::report_throughput(&bench, &mut rows, &mut failed);
        println!();
    }

    // 5: binary size.
    if run(5) {
        size::report_size(&bench, &mut rows, &mut failed);
        println!();
    }

    // 6: agent overhead per tool round trip.
    if run(6) {
        tools::report_round_trips(&bench, &mut rows, &mut failed);
        println!();
    }

    // 7: search over a 10,000-file tree.
    if run(7) {
        search::report_search(&bench, &mut rows, &mut failed);
        println!();
    }

    // 8: loading a session of 10,000 updates.
    if run(8) {
        load::report_session_load(&bench, &mut rows, &mut failed);
        println!();
    }

    // 9: memory and cancel under hostile input.
    if run(9) {
        hostile::report_hostile(&bench, &mut rows, &mut failed);
        println!();
    }

    // 10: a long session and automatic compaction.
    if run(10) {
        context::report_context(&bench, &mut rows, &mut failed);
        println!();
    }

    // 11: status during a stream and the cost of a steer.
    if run(11) {
        extensions::report_extensions(&bench, &mut rows, &mut failed);
        println!();
    }

    // 12: the agent's own time per goal continuation.
    if run(12) {
        goals::report_goals(&bench, &mut rows, &mut failed);
        println!();
    }

    // 13: background jobs: memory under 1 GB of output, log windows.
    if run(13) {
        jobs::report_jobs(&bench, &mut rows, &mut failed);
        println!();
    }

    // 14: edit_file's matchers on a 10,000-line file.
    if run(14) {
        matching::report_matching(&mut rows, &mut failed);
        println!();
    }

    // 15: the corpus of model slips, recovered and refused.
    if run(15) {
        recovery::report_recovery(&mut rows, &mut failed);
        println!();
    }

    // 16: serve: memory and threads per connection, HTTP vs stdio.
    if run(16) {
        serve::report_serve(&bench, &mut rows, &mut failed);
        println!();
    }

    report::print_summary(&rows);

    if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}

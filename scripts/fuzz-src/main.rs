//! Runs every fuzz target of `spindle::fuzz` for a while and prints, per
//! target, the cases run, cases per second and the first failure (with the
//! seed that replays it). Usage: `fuzz [SECONDS_PER_TARGET] [SEED]`
//! (defaults 10 and a seed from the clock). Exit code 1 when a target failed.

use std::process::ExitCode;
use std::time::{Duration, Instant};

fn main() -> ExitCode {
    let mut args = std::env::args().skip(1);
    let seconds: f64 = args.next().and_then(|a| a.parse().ok()).unwrap_or(10.0);
    let seed: u64 = args.next().and_then(|a| a.parse().ok()).unwrap_or_else(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(1)
    });
    let budget = Duration::from_secs_f64(seconds);
    println!("fuzz: {seconds} s per target, seed {seed}");
    let mut failed = false;
    for target in spindle::fuzz::TARGETS {
        let started = Instant::now();
        let mut cases = 0u64;
        let mut outcome = Ok(());
        while started.elapsed() < budget {
            const BATCH: u64 = 500;
            outcome = spindle::fuzz::run(target, seed.wrapping_add(cases), BATCH);
            cases += BATCH;
            if outcome.is_err() {
                break;
            }
        }
        let rate = cases as f64 / started.elapsed().as_secs_f64();
        match outcome {
            Ok(()) => println!(
                "{:<26} {cases:>10} cases {rate:>12.0} cases/s  ok",
                target.name
            ),
            Err(failure) => {
                failed = true;
                println!(
                    "{:<26} {cases:>10} cases {rate:>12.0} cases/s  FAILED (seed {}): {}",
                    target.name, failure.seed, failure.problem
                );
            }
        }
    }
    if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}

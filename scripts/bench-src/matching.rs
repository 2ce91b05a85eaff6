//! Figure 14: the time edit_file's matchers take to find an old text in a
//! 10,000-line file: an exact hit, a hit found by forgiving a slip (the
//! block re-indented), and a miss (every matcher tried, then the closest
//! lines found). Measured in this process on the library's own function,
//! so the figure is the matching alone.

use crate::report::{group, Row, Stats};
use crate::SUGGESTED;
use spindle::tools::matching::{closest, locate, Slip};
use std::time::Instant;

/// Lines of the file searched.
const FILE_LINES: usize = 10_000;
/// Runs per case (after one discarded warm-up).
const RUNS: usize = 21;
/// Suggested target per search: the issue sets none.
const SUGGESTED_MS: f64 = 50.0;

/// A file of small functions, each four lines, indented inside an `impl`.
fn file() -> String {
    let mut text = String::from("impl Big {\n");
    for i in 0..FILE_LINES / 4 {
        text.push_str(&format!(
            "    fn f{i}(&self) -> u64 {{\n        let x = self.v * {i};\n        x + 1\n    }}\n"
        ));
    }
    text.push_str("}\n");
    text
}

/// One case: the median time of `RUNS` searches, in milliseconds, or why
/// the search did not give the expected answer.
fn time(text: &str, old: &str, expect: Result<Option<Slip>, ()>) -> Result<Stats, String> {
    let lines: Vec<&str> = text.lines().collect();
    let mut samples = Vec::with_capacity(RUNS);
    for run in 0..=RUNS {
        let started = Instant::now();
        let found = locate(text.as_bytes(), old, "replaced", false);
        let answer = match found {
            Ok(located) => Ok(located.slip),
            Err(_) => {
                let old_lines: Vec<&str> = old.lines().collect();
                std::hint::black_box(closest(&lines, &old_lines));
                Err(())
            }
        };
        let elapsed = started.elapsed().as_secs_f64();
        if answer != expect {
            return Err(format!("expected {expect:?}, got {answer:?}"));
        }
        if run > 0 {
            samples.push(elapsed * 1e3);
        }
    }
    Ok(Stats::of(&samples))
}

/// Figure 14: measures the three cases, prints them and adds their rows.
pub(crate) fn report_matching(rows: &mut Vec<Row>, failed: &mut bool) {
    let size = group(FILE_LINES as u64);
    println!("## 14. edit_file's matchers on a {size}-line file (in process, median of {RUNS})");
    let text = file();
    let target = format!("< {SUGGESTED_MS} ms ({SUGGESTED})");
    let at = FILE_LINES / 4 * 3 / 4;
    let exact = format!(
        "    fn f{at}(&self) -> u64 {{\n        let x = self.v * {at};\n        x + 1\n    }}\n"
    );
    let reindented =
        format!("fn f{at}(&self) -> u64 {{\n    let x = self.v * {at};\n    x + 1\n}}\n");
    let missing = format!(
        "    fn f{at}(&self) -> u64 {{\n        let x = self.w * {at};\n        x + 1\n    }}\n"
    );
    let cases = [
        ("exact hit", exact, Ok(None)),
        (
            "forgiven hit (re-indented)",
            reindented,
            Ok(Some(Slip::Indentation)),
        ),
        (
            "miss (all matchers, then the closest lines)",
            missing,
            Err(()),
        ),
    ];
    for (name, old, expect) in cases {
        let figure = format!("edit_file matching, {size}-line file, {name}");
        match time(&text, &old, expect) {
            Ok(stats) => {
                println!(
                    "  {name}: median {:.3} ms   min {:.3} ms   max {:.3} ms",
                    stats.median, stats.min, stats.max
                );
                rows.push(Row::suggested(
                    &format!("{figure} (median of {RUNS})"),
                    format!("{:.3} ms", stats.median),
                    stats.median < SUGGESTED_MS,
                    &target,
                ));
            }
            Err(err) => {
                *failed = true;
                println!("  {name}: FAILED: {err}");
                rows.push(Row::failed(&figure, &err, &target));
            }
        }
    }
}

//! Figure 6, agent overhead per tool round trip, and the scripted-tool
//! helpers it shares with figure 7 (search).

use crate::agent::{new_session_in, AgentProcess, Answer};
use crate::report::{Row, Stats};
use crate::workspace::Bench;
use crate::{
    BASELINE_PROMPT, INIT_TIMEOUT, SCRIPTED_PROMPT_TIMEOUT, SUGGESTED, TOOLS_PROMPT,
    TOOL_PROMPT_TIMEOUT,
};
use serde_json::{json, Value};
use std::path::Path;
use std::process::Command;
use std::time::Duration;

/// `read_file` calls per round-trip prompt.
const ROUND_TRIPS: usize = 500;
/// Round-trip runs (after one discarded warm-up).
const ROUND_TRIP_RUNS: usize = 3;

/// Suggested target: the issue asks for this figure without a number.
const SUGGESTED_ROUND_TRIP_US: f64 = 1000.0;

/// Figure 6: measures the overhead per round trip, prints it and adds its
/// row.
pub(crate) fn report_round_trips(bench: &Bench, rows: &mut Vec<Row>, failed: &mut bool) {
    println!(
        "## 6. Agent overhead per tool round trip ({ROUND_TRIPS} scripted read_file calls in one prompt, {ROUND_TRIP_RUNS} runs)"
    );
    match bench.round_trips() {
        Ok(runs) => {
            let per_trip: Vec<f64> = runs.iter().map(|r| r.per_trip_us()).collect();
            let stats = Stats::of(&per_trip);
            println!(
                "  per round trip: median {:.1} µs   min {:.1} µs   max {:.1} µs   ((T_N - T_0) / {ROUND_TRIPS})",
                stats.median, stats.min, stats.max
            );
            rows.push(Row::suggested(
                "agent overhead per tool round trip (median of 3)",
                format!("{:.1} µs", stats.median),
                stats.median < SUGGESTED_ROUND_TRIP_US,
                &format!("< {} ms ({SUGGESTED})", SUGGESTED_ROUND_TRIP_US / 1e3),
            ));
        }
        Err(err) => {
            *failed = true;
            println!("  FAILED: {err}");
            rows.push(Row::failed(
                "agent overhead per tool round trip",
                &err,
                &format!("< {} ms ({SUGGESTED})", SUGGESTED_ROUND_TRIP_US / 1e3),
            ));
        }
    }
}

/// One round-trip run: the text-only prompt and the prompt with
/// `ROUND_TRIPS` tool calls, in seconds.
struct RoundTripRun {
    baseline: f64,
    tools: f64,
}

impl RoundTripRun {
    fn per_trip_us(&self) -> f64 {
        (self.tools - self.baseline) / ROUND_TRIPS as f64 * 1e6
    }
}

impl Bench {
    /// Starts an agent on `script` that runs tools without asking (and
    /// whose prompts may take any number of steps), and initializes it.
    pub(crate) fn start_tools(
        &self,
        script: &Path,
        env: &[(&str, &str)],
    ) -> Result<AgentProcess, String> {
        let mut command = Command::new(&self.binary);
        command
            .arg("acp")
            .arg("--script")
            .arg(script)
            .args(["--permissions", "yolo", "--max-steps", "100000"])
            .env_remove("RUST_LOG")
            .env_remove("SPINDLE_SEARCH")
            .env("SPINDLE_HOME", self.work.home())
            .env("OPENAI_API_KEY", "bench-key")
            .env("OPENAI_BASE_URL", "http://127.0.0.1:9/v1");
        for (name, value) in env {
            command.env(name, value);
        }
        let mut process = AgentProcess::spawn(command)?;
        process.request("initialize", json!({ "protocolVersion": 1 }), INIT_TIMEOUT)?;
        Ok(process)
    }

    /// Figure 6. One agent; per run, a text-only prompt and a prompt whose
    /// ordered replies call `read_file` `ROUND_TRIPS` times, each in a new
    /// session (so the ordered replies start over). One discarded warm-up.
    fn round_trips(&self) -> Result<Vec<RoundTripRun>, String> {
        let io = |what: &str, err: std::io::Error| format!("{what}: {err}");
        let dir = self.work.dir.join("roundtrip");
        std::fs::create_dir_all(&dir).map_err(|e| io("cannot create the session cwd", e))?;
        let dir = dir
            .canonicalize()
            .map_err(|e| io("cannot resolve the session cwd", e))?;
        let small: String = (1..=8)
            .map(|i| format!("line {i}: a small file the benchmark reads again and again.\n"))
            .collect();
        std::fs::write(dir.join("small.txt"), &small)
            .map_err(|e| io("cannot write small.txt", e))?;

        let call = json!({
            "tool_calls": [{ "name": "read_file", "arguments": { "path": "small.txt" } }]
        });
        let mut replies = vec![call; ROUND_TRIPS];
        replies.push(json!({ "text": "Done." }));
        let script = self.work.dir.join("roundtrip.script.json");
        write_script(&script, replies)?;
        println!(
            "  session cwd {} (small.txt: {} bytes); script {}",
            dir.display(),
            small.len(),
            script.display()
        );

        let mut process = self.start_tools(&script, &[])?;
        let mut runs = Vec::new();
        for run in 0..=ROUND_TRIP_RUNS {
            let baseline = prompt_in(&mut process, &dir, BASELINE_PROMPT, SCRIPTED_PROMPT_TIMEOUT)
                .map_err(|e| format!("run {run}, baseline prompt: {e}"))?;
            let tools = prompt_in(&mut process, &dir, TOOLS_PROMPT, TOOL_PROMPT_TIMEOUT)
                .map_err(|e| format!("run {run}, tool prompt: {e}"))?;
            let result = RoundTripRun {
                baseline: baseline.elapsed(),
                tools: tools.elapsed(),
            };
            let label = if run == 0 {
                "warm-up".to_string()
            } else {
                format!("run {run}")
            };
            println!(
                "  {label:>7}: T_0 {:.2} ms   T_{ROUND_TRIPS} {:.1} ms   -> {:.1} µs per round trip   ({} tool_call, {} tool_call_update, {} completed, stopReason {})",
                result.baseline * 1e3,
                result.tools * 1e3,
                result.per_trip_us(),
                tools.tool_calls,
                tools.tool_updates,
                tools.tool_completed,
                tools.stop_reason()
            );
            check_tool_counts(&baseline, 0);
            check_tool_counts(&tools, ROUND_TRIPS as u64);
            if run > 0 {
                runs.push(result);
            }
        }
        if let Ok(memory) = process.memory() {
            println!(
                "  agent peak RSS after {} prompts ({} tool calls): {:.2} MiB (informational)",
                2 * (ROUND_TRIP_RUNS + 1),
                ROUND_TRIPS * (ROUND_TRIP_RUNS + 1),
                memory.hwm_kib as f64 / 1024.0
            );
        }
        process.close()?;
        Ok(runs)
    }
}

// ---------------------------------------------------------------------------
// Sessions, prompts and scripts for the tool figures

/// Opens a new session in `cwd` and sends it one text prompt.
pub(crate) fn prompt_in(
    process: &mut AgentProcess,
    cwd: &Path,
    text: &str,
    timeout: Duration,
) -> Result<Answer, String> {
    let (session, _) = new_session_in(process, cwd)?;
    process.request(
        "session/prompt",
        json!({ "sessionId": session, "prompt": [{ "type": "text", "text": text }] }),
        timeout,
    )
}

/// Writes a script that answers `BASELINE_PROMPT` with text only (a rule,
/// so it consumes no ordered reply) and any other prompt with `replies`.
pub(crate) fn write_script(path: &Path, replies: Vec<Value>) -> Result<(), String> {
    let script = json!({
        "rules": [{ "when": { "equals": BASELINE_PROMPT }, "reply": { "text": "Done." } }],
        "replies": replies,
    });
    std::fs::write(path, script.to_string())
        .map_err(|e| format!("cannot write {}: {e}", path.display()))
}

/// Warns when a prompt did not make exactly `calls` tool calls, each
/// announced, started and completed, or did not end its turn.
pub(crate) fn check_tool_counts(answer: &Answer, calls: u64) {
    if answer.tool_calls != calls {
        println!(
            "      WARNING: counted {} \"tool_call\" notifications, expected {calls}",
            answer.tool_calls
        );
    }
    if answer.tool_updates != 2 * calls || answer.tool_completed != calls {
        println!(
            "      WARNING: counted {} tool_call_update notifications ({} completed), expected {} ({calls} completed)",
            answer.tool_updates,
            answer.tool_completed,
            2 * calls
        );
    }
    let stop_reason = answer.stop_reason();
    if stop_reason != "end_turn" {
        println!("      WARNING: stopReason {stop_reason}, expected end_turn");
    }
}

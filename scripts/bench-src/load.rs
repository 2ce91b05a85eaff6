//! Figure 8: `session/load` of a stored session of 10,000 updates in fresh
//! processes, and the size of its database.

use crate::agent::AgentProcess;
use crate::report::{group, one_line, Row, Stats};
use crate::workspace::Bench;
use crate::{INIT_TIMEOUT, MIB, REQUEST_TIMEOUT};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// The big session: message/thought chunk pairs in its one reply. The agent
/// merges consecutive chunks of one message into one stored update, so
/// alternating them stores one update per chunk.
const LOAD_PAIRS: usize = 5_000;
const LOAD_UPDATES: u64 = 2 * LOAD_PAIRS as u64;
/// The client-chosen id of the big session.
const LOAD_SESSION: &str = "big";
/// `session/load` runs, each in a fresh process.
const LOAD_RUNS: usize = 5;

const LOAD_FILL_TIMEOUT: Duration = Duration::from_secs(120);
const LOAD_TIMEOUT: Duration = Duration::from_secs(60);

/// Target.
const TARGET_LOAD_MS: f64 = 150.0;

/// Figure 8: fills the session, times its loads, prints them and adds
/// their rows.
pub(crate) fn report_session_load(bench: &Bench, rows: &mut Vec<Row>, failed: &mut bool) {
    println!(
        "## 8. Loading a session of {} stored updates ({LOAD_RUNS} fresh processes)",
        group(LOAD_UPDATES)
    );
    let load_figure = format!(
        "session/load, {}-update session (median of {LOAD_RUNS})",
        group(LOAD_UPDATES)
    );
    let load_target = format!("< {TARGET_LOAD_MS} ms");
    match bench.session_load() {
        Ok(load) => {
            let elapsed: Vec<f64> = load.runs.iter().map(|r| r.elapsed).collect();
            let stats = Stats::of(&elapsed);
            println!(
                "  session/load: median {:.1} ms   min {:.1} ms   max {:.1} ms   (request written to answer read)",
                stats.median * 1e3,
                stats.min * 1e3,
                stats.max * 1e3
            );
            rows.push(Row::lower(
                &load_figure,
                format!("{:.1} ms", stats.median * 1e3),
                stats.median * 1e3,
                TARGET_LOAD_MS,
                "ms",
            ));
            rows.push(Row::lower(
                &format!("session/load, {}-update session (min)", group(LOAD_UPDATES)),
                format!("{:.1} ms", stats.min * 1e3),
                stats.min * 1e3,
                TARGET_LOAD_MS,
                "ms",
            ));
            rows.push(Row::info(
                &format!("database size, {}-update session", group(LOAD_UPDATES)),
                load.db_size.describe(),
            ));
        }
        Err(err) => {
            *failed = true;
            println!("  FAILED: {err}");
            rows.push(Row::failed(&load_figure, &err, &load_target));
        }
    }
}

/// Figure 8: the database holding the big session, and the timed loads.
struct Load {
    db_size: DbSize,
    runs: Vec<LoadRun>,
}

/// One `session/load` in a fresh process.
struct LoadRun {
    /// Seconds from writing `session/load` to reading its answer.
    elapsed: f64,
}

/// The session database's file and its write-ahead log, in bytes.
#[derive(Clone, Copy, PartialEq)]
struct DbSize {
    db: u64,
    wal: u64,
}

impl DbSize {
    fn of(db: &Path) -> Result<DbSize, String> {
        let size = std::fs::metadata(db)
            .map_err(|e| format!("cannot read the size of {}: {e}", db.display()))?
            .len();
        let mut wal = db.as_os_str().to_owned();
        wal.push("-wal");
        let wal = std::fs::metadata(PathBuf::from(wal)).map_or(0, |m| m.len());
        Ok(DbSize { db: size, wal })
    }

    fn describe(&self) -> String {
        let mut out = format!("{} bytes ({:.2} MiB)", group(self.db), self.db as f64 / MIB);
        if self.wal > 0 {
            out.push_str(&format!(" + {} bytes of WAL", group(self.wal)));
        }
        out
    }
}

impl Bench {
    /// Starts an agent on `script` with the session database `db` and
    /// initializes it; returns it with the time it was spawned.
    fn start_with_db(&self, script: &Path, db: &Path) -> Result<(AgentProcess, Instant), String> {
        let mut command = Command::new(&self.binary);
        command
            .arg("acp")
            .arg("--script")
            .arg(script)
            .arg("--db")
            .arg(db)
            .env_remove("RUST_LOG")
            .env("SPINDLE_HOME", self.work.home())
            .env("OPENAI_API_KEY", "bench-key")
            .env("OPENAI_BASE_URL", "http://127.0.0.1:9/v1");
        let spawned = Instant::now();
        let mut process = AgentProcess::spawn(command)?;
        process.request("initialize", json!({ "protocolVersion": 1 }), INIT_TIMEOUT)?;
        Ok((process, spawned))
    }

    /// Figure 8. One agent answers one prompt with `LOAD_PAIRS` alternating
    /// message and thought chunks, stored as `LOAD_UPDATES` updates, and
    /// exits; then `LOAD_RUNS` fresh agents on the same database each load
    /// the session once.
    fn session_load(&self) -> Result<Load, String> {
        let io = |what: &str, err: std::io::Error| format!("{what}: {err}");
        let dir = self.work.dir.join("load");
        std::fs::create_dir_all(&dir).map_err(|e| io("cannot create the session cwd", e))?;
        let dir = dir
            .canonicalize()
            .map_err(|e| io("cannot resolve the session cwd", e))?;
        let db = dir.join("sessions.db");
        let chunks: Vec<Value> = (0..LOAD_PAIRS)
            .flat_map(|_| [json!({ "text": "a " }), json!({ "thought": "b " })])
            .collect();
        let script = self.work.dir.join("load.script.json");
        std::fs::write(
            &script,
            json!({ "fallback": { "chunks": chunks } }).to_string(),
        )
        .map_err(|e| format!("cannot write {}: {e}", script.display()))?;
        println!(
            "  database {}; script {} ({LOAD_PAIRS} message/thought chunk pairs)",
            db.display(),
            script.display()
        );

        // Fill: one prompt in a session with a known id.
        let (mut process, _) = self.start_with_db(&script, &db)?;
        process
            .request(
                "session/new",
                json!({
                    "cwd": dir.to_string_lossy(),
                    "mcpServers": [],
                    "_meta": { "spindle": { "sessionId": LOAD_SESSION } },
                }),
                REQUEST_TIMEOUT,
            )
            .map_err(|e| format!("fill: {e}"))?;
        let answer = process
            .request(
                "session/prompt",
                json!({
                    "sessionId": LOAD_SESSION,
                    "prompt": [{ "type": "text", "text": "fill the session" }],
                }),
                LOAD_FILL_TIMEOUT,
            )
            .map_err(|e| format!("fill: {e}"))?;
        let exit = process.close().map_err(|e| format!("fill: {e}"))?;
        let stop_reason = answer.stop_reason();
        println!(
            "  fill: prompt answered in {:.1} ms with {} session/update lines (stopReason {stop_reason}); exit {:.1} ms",
            answer.elapsed() * 1e3,
            group(answer.updates),
            exit.as_secs_f64() * 1e3
        );
        if stop_reason != "end_turn" {
            println!("    WARNING: stopReason {stop_reason}, expected end_turn");
        }
        if answer.updates < LOAD_UPDATES {
            println!(
                "    WARNING: the prompt streamed {} session/update lines, expected at least {}",
                answer.updates,
                group(LOAD_UPDATES)
            );
        }
        let db_size = DbSize::of(&db)?;
        println!("  database after the fill: {}", db_size.describe());

        let mut runs = Vec::new();
        for run in 1..=LOAD_RUNS {
            let (mut process, spawned) = self
                .start_with_db(&script, &db)
                .map_err(|e| format!("run {run}: {e}"))?;
            let answer = process
                .request(
                    "session/load",
                    json!({
                        "sessionId": LOAD_SESSION,
                        "cwd": dir.to_string_lossy(),
                        "mcpServers": [],
                    }),
                    LOAD_TIMEOUT,
                )
                .map_err(|e| format!("run {run}: {e}"))?;
            let hwm_kib = process.memory().map(|m| m.hwm_kib).unwrap_or(0);
            process.close().map_err(|e| format!("run {run}: {e}"))?;

            let ms = |at: Instant| at.duration_since(answer.sent).as_secs_f64() * 1e3;
            let mut timeline = Vec::new();
            if let Some(first) = answer.first_update {
                timeline.push(format!("first update {:.1} ms", ms(first)));
            }
            if let Some(last) = answer.last_update {
                timeline.push(format!("last update {:.1} ms", ms(last)));
            }
            println!(
                "  run {run}: {:.1} ms   ({} session/update lines, {} of them agent_message_chunk; {}; spawn to answer {:.1} ms; peak RSS {:.2} MiB)",
                answer.elapsed() * 1e3,
                group(answer.updates),
                group(answer.chunks),
                timeline.join(", "),
                answer.at.duration_since(spawned).as_secs_f64() * 1e3,
                hwm_kib as f64 / 1024.0
            );
            if answer.updates < LOAD_UPDATES {
                println!(
                    "    WARNING: {} session/update lines replayed before the answer, expected at least {}",
                    answer.updates,
                    group(LOAD_UPDATES)
                );
            }
            let missing: Vec<&str> = ["modes", "configOptions"]
                .into_iter()
                .filter(|field| answer.result.get(field).is_none())
                .collect();
            if !missing.is_empty() {
                println!(
                    "    WARNING: the answer lacks {}: {}",
                    missing.join(" and "),
                    one_line(&answer.result.to_string(), 200)
                );
            }
            runs.push(LoadRun {
                elapsed: answer.elapsed(),
            });
        }
        let after = DbSize::of(&db)?;
        if after != db_size {
            println!("  database after the loads: {}", after.describe());
        }
        Ok(Load { db_size, runs })
    }
}

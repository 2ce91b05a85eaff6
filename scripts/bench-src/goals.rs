//! Figure 12: a goal's continuations. One session in goal mode
//! (`session/set_mode` to `goal`), one prompt, its objective, against a
//! fake Chat Completions server that answers every request with a short
//! text (no tools, no usage), so the agent continues the goal each time,
//! until the 50th continuation, which it answers with a `goal_update`
//! call of status `complete`; the prompt then ends with `end_turn`. The
//! agent's own time per continuation (from the server finishing an answer
//! to the next request arriving: the model's time is left out, since the
//! fake answers at once), and the size of the request and of the
//! continuation message at the first continuation and the 50th.

use crate::agent::{new_session_in, AgentProcess};
use crate::chat_server::{
    content, fake_config, text_chunks, tool_call_chunks, ChatRequest, ChatServer, Sse,
};
use crate::report::{group, one_line, Row, Stats};
use crate::workspace::Bench;
use crate::{INIT_TIMEOUT, REQUEST_TIMEOUT, SUGGESTED, TOOL_PROMPT_TIMEOUT};
use serde_json::{json, Value};
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

/// The continuation answered with `goal_update` complete.
const CONTINUATIONS: usize = 50;
/// `goal.max_continuations` in the config file: above `CONTINUATIONS`, so
/// the budget does not end the goal first.
const MAX_CONTINUATIONS: u64 = 100;
/// The model's window: large enough that nothing is compacted.
const WINDOW: u64 = 1_000_000;

/// Suggested target: the agent's own time per continuation (median).
const SUGGESTED_CONTINUATION_MS: f64 = 5.0;

/// How a continuation request's last (user) message starts.
const CONTINUATION_MARK: &str = "(Goal continuation.)";
const OBJECTIVE: &str = "Take fifty small steps, one at a time, then report the goal complete.";
/// The text answer of every step but the last.
const STEP_TEXT: &str = "Step done.";

/// Figure 12: runs the goal, prints it and adds the rows.
pub(crate) fn report_goals(bench: &Bench, rows: &mut Vec<Row>, failed: &mut bool) {
    println!(
        "## 12. Goals: the agent's own time per goal continuation ({CONTINUATIONS} continuations, then goal_update complete; fake Chat Completions server without usage)"
    );
    let target = format!("< {SUGGESTED_CONTINUATION_MS} ms ({SUGGESTED})");
    let figure = "agent overhead per goal continuation, model excluded";
    let run = match bench.goal_run() {
        Ok(run) => run,
        Err(err) => {
            *failed = true;
            println!("  FAILED: {err}");
            rows.push(Row::failed(figure, &err, &target));
            return;
        }
    };
    run.print();

    let gaps = run.gaps();
    if gaps.len() == CONTINUATIONS {
        let stats = Stats::of(&gaps.iter().map(|g| g.after).collect::<Vec<_>>());
        rows.push(Row::suggested(
            &format!("{figure} (median of {CONTINUATIONS})"),
            format!("{:.2} ms", stats.median * 1e3),
            stats.median * 1e3 < SUGGESTED_CONTINUATION_MS,
            &target,
        ));
        rows.push(Row::info(
            &format!("agent overhead per goal continuation (p90 of {CONTINUATIONS})"),
            format!("{:.2} ms", stats.p90 * 1e3),
        ));
    } else {
        *failed = true;
        rows.push(Row::failed(
            figure,
            &format!("{} continuations measured, not {CONTINUATIONS}", gaps.len()),
            &target,
        ));
    }
    let (first, last) = (run.continuation(1), run.continuation(CONTINUATIONS));
    let either = |pick: fn(&Continuation) -> usize| {
        let shown = |c: &Option<Continuation>| {
            c.as_ref()
                .map_or("-".to_string(), |c| group(pick(c) as u64))
        };
        format!("{} / {} bytes", shown(&first), shown(&last))
    };
    rows.push(Row::info(
        &format!("request body at goal continuation 1 / {CONTINUATIONS}"),
        either(|c| c.body),
    ));
    rows.push(Row::info(
        &format!("goal continuation message at continuation 1 / {CONTINUATIONS}"),
        format!(
            "{}{}",
            either(|c| c.message),
            match (&first, &last) {
                (Some(a), Some(b)) if a.message == b.message => " (the same)",
                (Some(_), Some(_)) => " (they differ)",
                _ => "",
            }
        ),
    ));
    if !run.odd.is_empty() {
        *failed = true;
        rows.push(Row::failed(
            "goal run as planned",
            &format!(
                "{} things went otherwise; first: {}",
                run.odd.len(),
                run.odd[0]
            ),
            "-",
        ));
    }
}

/// One chat request as the server saw it.
struct Served {
    /// When its head was read; just before its answer's write, and once
    /// that write was done.
    received: Instant,
    writing: Instant,
    written: Instant,
    /// The body's length.
    bytes: usize,
    /// A continuation request (its last message a user message starting
    /// with `CONTINUATION_MARK`): which one, from 1.
    continuation: Option<usize>,
    /// The last message's text, and the message as JSON, in bytes.
    last_text: String,
    last_json: usize,
    /// The request offered `goal_update`.
    offered_goal_update: bool,
    /// It was answered with the `goal_update` call.
    completed: bool,
}

/// Answers a request: a short text, or at the `CONTINUATIONS`th
/// continuation the `goal_update` call of status `complete`.
fn reply(request: &ChatRequest, sse: &mut Sse, seen: &AtomicUsize) -> Result<Served, String> {
    let last = request.messages().last().unwrap_or(&Value::Null);
    let text = content(last);
    let continuation = (last["role"] == "user" && text.starts_with(CONTINUATION_MARK))
        .then(|| seen.fetch_add(1, Ordering::SeqCst) + 1);
    let completed = continuation == Some(CONTINUATIONS);
    let chunks = if completed {
        tool_call_chunks(
            &format!("call_{}", request.call),
            "goal_update",
            r#"{"status":"complete"}"#,
        )
    } else {
        text_chunks(STEP_TEXT)
    };
    let offered_goal_update = request.body["tools"]
        .as_array()
        .is_some_and(|tools| tools.iter().any(|t| t["function"]["name"] == "goal_update"));
    let writing = Instant::now();
    let written = sse.finish(&chunks)?;
    Ok(Served {
        received: request.received,
        writing,
        written,
        bytes: request.bytes,
        continuation,
        last_text: text.into_owned(),
        last_json: last.to_string().len(),
        offered_goal_update,
        completed,
    })
}

/// A continuation request's sizes, in bytes.
struct Continuation {
    body: usize,
    /// The continuation message's text, and the message as JSON.
    message: usize,
    message_json: usize,
}

/// The agent's time before one continuation request, in seconds: from the
/// server finishing the answer before it (`after`), and from just before
/// that write (`before`); negative if the request was read first.
struct Gap {
    after: f64,
    before: f64,
}

/// What the goal's prompt did and what the server saw.
struct GoalRun {
    /// The chat requests in the order received.
    requests: Vec<Served>,
    others: Vec<String>,
    errors: Vec<String>,
    prompt_secs: f64,
    stop_reason: String,
    /// The status `goal` field after the prompt.
    goal: Value,
    hwm_kib: Option<u64>,
    /// What went otherwise than planned.
    odd: Vec<String>,
}

impl GoalRun {
    /// Before each continuation request: the time since the answer to the
    /// request before it.
    fn gaps(&self) -> Vec<Gap> {
        let signed = |later: Instant, earlier: Instant| match later.checked_duration_since(earlier)
        {
            Some(d) => d.as_secs_f64(),
            None => -earlier.duration_since(later).as_secs_f64(),
        };
        self.requests
            .windows(2)
            .filter(|pair| pair[1].continuation.is_some())
            .map(|pair| Gap {
                after: signed(pair[1].received, pair[0].written),
                before: signed(pair[1].received, pair[0].writing),
            })
            .collect()
    }

    /// The sizes of continuation `n` (from 1).
    fn continuation(&self, n: usize) -> Option<Continuation> {
        self.requests
            .iter()
            .find(|r| r.continuation == Some(n))
            .map(|r| Continuation {
                body: r.bytes,
                message: r.last_text.len(),
                message_json: r.last_json,
            })
    }

    /// Notes what went otherwise than planned.
    fn checked(mut self) -> GoalRun {
        let mut odd = Vec::new();
        if self.stop_reason != "end_turn" {
            odd.push(format!("stopReason {}, not end_turn", self.stop_reason));
        }
        if self.goal["status"] != "complete" {
            odd.push(format!("the goal is {}, not complete", self.goal["status"]));
        }
        let counted = self.goal.pointer("/counters/continuations");
        if counted.and_then(Value::as_u64) != Some(CONTINUATIONS as u64) {
            odd.push(format!(
                "the goal counted {} continuations, not {CONTINUATIONS}",
                counted.unwrap_or(&Value::Null)
            ));
        }
        let seen = self
            .requests
            .iter()
            .filter(|r| r.continuation.is_some())
            .count();
        if seen != CONTINUATIONS || self.requests.len() != CONTINUATIONS + 1 {
            odd.push(format!(
                "the server saw {} requests, {seen} of them continuations; planned {} and {CONTINUATIONS}",
                self.requests.len(),
                CONTINUATIONS + 1
            ));
        }
        match self.requests.iter().position(|r| r.completed) {
            None => odd.push("no request was answered with goal_update".into()),
            Some(at) if at + 1 < self.requests.len() => odd.push(format!(
                "{} requests came after the goal_update answer",
                self.requests.len() - at - 1
            )),
            Some(_) => {}
        }
        let without = self
            .requests
            .iter()
            .filter(|r| !r.offered_goal_update)
            .count();
        if without > 0 {
            odd.push(format!("{without} requests did not offer goal_update"));
        }
        self.odd = odd;
        self
    }

    fn print(&self) {
        println!(
            "  one prompt in goal mode: {:.2} s, {} chat requests, stopReason {}{}",
            self.prompt_secs,
            self.requests.len(),
            self.stop_reason,
            match self.hwm_kib {
                Some(kib) => format!(", agent peak RSS {:.2} MiB", kib as f64 / 1024.0),
                None => String::new(),
            }
        );
        println!(
            "  the goal after it: status {}, {} continuations, {} model calls, {} tool calls",
            self.goal["status"].as_str().unwrap_or("(none)"),
            self.goal
                .pointer("/counters/continuations")
                .unwrap_or(&Value::Null),
            self.goal
                .pointer("/counters/modelCalls")
                .unwrap_or(&Value::Null),
            self.goal
                .pointer("/counters/toolCalls")
                .unwrap_or(&Value::Null),
        );
        if !self.others.is_empty() {
            println!(
                "  other requests to the server (answered 404): {}",
                self.others.join(", ")
            );
        }
        if let Some(first) = self.errors.first() {
            println!(
                "  WARNING: the fake server failed {} times; first: {first}",
                self.errors.len()
            );
        }
        let gaps = self.gaps();
        let after: Vec<f64> = gaps.iter().map(|g| g.after).collect();
        let before: Vec<f64> = gaps.iter().map(|g| g.before).collect();
        println!(
            "  (a) answer written to the next continuation request ({} continuations): {}",
            gaps.len(),
            Stats::of(&after).describe_ms()
        );
        let part = |range: std::ops::Range<usize>| {
            Stats::of(after.get(range).unwrap_or_default()).median * 1e3
        };
        println!(
            "      median of continuations 1-10 {:.3} ms, 41-50 {:.3} ms; from just before the write instead of after it: median {:.3} ms",
            part(0..10),
            part(CONTINUATIONS - 10..CONTINUATIONS),
            Stats::of(&before).median * 1e3
        );
        let negative = after.iter().filter(|g| **g < 0.0).count();
        if negative > 0 {
            println!(
                "      WARNING: {negative} requests were read before the answer before them was written"
            );
        }
        if let Some(first) = self.requests.first() {
            println!(
                "  (b) first request (the objective): {} bytes",
                group(first.bytes as u64)
            );
        }
        for n in [1, CONTINUATIONS] {
            match self.continuation(n) {
                Some(c) => println!(
                    "      continuation {n:>2}: request {} bytes, continuation message {} bytes of text ({} as JSON)",
                    group(c.body as u64),
                    group(c.message as u64),
                    group(c.message_json as u64)
                ),
                None => println!("      continuation {n:>2}: none seen"),
            }
        }
        if let (Some(a), Some(b)) = (self.continuation(1), self.continuation(CONTINUATIONS)) {
            println!(
                "      the request grows by {:.0} bytes per continuation; the continuation message is {}",
                (b.body as f64 - a.body as f64) / (CONTINUATIONS - 1) as f64,
                if a.message == b.message && a.message_json == b.message_json {
                    "the same size at both".to_string()
                } else {
                    format!(
                        "NOT the same size: {} and {} bytes",
                        a.message, b.message
                    )
                }
            );
        }
        if let Some(first) = self.requests.iter().find(|r| r.continuation.is_some()) {
            println!("      the message: {}", one_line(&first.last_text, 100));
        }
        for odd in &self.odd {
            println!("  WARNING: {odd}");
        }
    }
}

impl Bench {
    /// The session cwd of figure 12 (empty).
    fn goals_dir(&self) -> Result<PathBuf, String> {
        let dir = self.work.dir.join("goals");
        std::fs::create_dir_all(&dir).map_err(|e| format!("cannot create the session cwd: {e}"))?;
        dir.canonicalize()
            .map_err(|e| format!("cannot resolve the session cwd: {e}"))
    }

    /// One goal of `CONTINUATIONS` continuations against a fresh server.
    fn goal_run(&self) -> Result<GoalRun, String> {
        let dir = self.goals_dir()?;
        let seen = AtomicUsize::new(0);
        let server = ChatServer::start("goal", move |request, sse| reply(request, sse, &seen))?;
        let mut config = fake_config(&server.base_url, "BENCH_GOAL_KEY", "goal", WINDOW);
        config["goal"] = json!({ "max_continuations": MAX_CONTINUATIONS });
        let config_path = self.work.dir.join("goals.config.json");
        let command = self.chat_agent(&config_path, &config, "BENCH_GOAL_KEY")?;
        let mut process = AgentProcess::spawn(command)?;
        process.request("initialize", json!({ "protocolVersion": 1 }), INIT_TIMEOUT)?;
        let (session, _) = new_session_in(&mut process, &dir)?;
        process.request(
            "session/set_mode",
            json!({ "sessionId": session, "modeId": "goal" }),
            REQUEST_TIMEOUT,
        )?;
        let answer = process.request(
            "session/prompt",
            json!({ "sessionId": session, "prompt": [{ "type": "text", "text": OBJECTIVE }] }),
            TOOL_PROMPT_TIMEOUT,
        )?;
        let status = process.request(
            "_spindle/session/status",
            json!({ "sessionId": session }),
            REQUEST_TIMEOUT,
        )?;
        let hwm_kib = process.memory().ok().map(|m| m.hwm_kib);
        process.close()?;
        let mut log = server.finish();
        log.served.sort_by_key(|r| r.received);

        let run = GoalRun {
            requests: log.served,
            others: log.others,
            errors: log.errors,
            prompt_secs: answer.elapsed(),
            stop_reason: answer.stop_reason(),
            goal: status.result["goal"].clone(),
            hwm_kib,
            odd: Vec::new(),
        };
        Ok(run.checked())
    }
}

//! Figure 10: a long session against automatic compaction. 200 prompts in
//! one session, each answered by a `read_file` of a 6 KB file and a short
//! text, against a fake Chat Completions server that reports no usage (so
//! the agent estimates from bytes). Run with `context.auto_compact` at its
//! default and off on a 128,000-token window, and once more on a small
//! window, where eliding old tool outputs is not enough and the model is
//! asked for summaries: the size of the requests over the session, the
//! compactions the server saw, and what a compaction adds to its prompt
//! besides the model's time.

use crate::agent::{new_session_in, AgentProcess};
use crate::chat_server::{
    content, fake_config, text_chunks, tool_call_chunks, ChatRequest, ChatServer, Sse,
};
use crate::report::{group, Row, Stats};
use crate::workspace::Bench;
use crate::{INIT_TIMEOUT, SCRIPTED_PROMPT_TIMEOUT, SUGGESTED};
use serde_json::{json, Value};
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Instant;

/// Prompts in the session.
const PROMPTS: usize = 200;
/// The model's window, from the config file.
const WINDOW: u64 = 128_000;
/// The window of the third run: small enough that 200 prompts' stubs of
/// elided outputs pass the threshold, so the model is asked for summaries.
const SMALL_WINDOW: u64 = 16_000;
/// The prompts whose first request is shown.
const SHOWN: [usize; 3] = [1, 50, PROMPTS];
/// Lines of `data.txt` (about 6 KB).
const DATA_LINES: usize = 100;
/// Compactions listed one by one, at most.
const LISTED: usize = 12;
/// Prompts before a compaction that it is also compared with (ones of a
/// similar size, unlike the session's median).
const NEIGHBOURS: usize = 10;

/// Suggested target: the agent's own time per compaction.
const SUGGESTED_COMPACTION_MS: f64 = 50.0;

/// What the summary request's last message contains.
const SUMMARY_MARK: &str = "about to be replaced by your summary";
/// How a summary starts once it replaces the older conversation.
const COMPACTED_MARK: &str = "(The earlier conversation was compacted";
/// How an elided tool result starts.
const STUB_MARK: &str = "[Output of ";

/// Figure 10: runs the long session with and without automatic
/// compaction, prints the runs and adds the rows.
pub(crate) fn report_context(bench: &Bench, rows: &mut Vec<Row>, failed: &mut bool) {
    println!(
        "## 10. A long session and automatic compaction ({PROMPTS} prompts, each a read_file of a 6 KB file, fake Chat Completions server without usage)"
    );
    let target = format!("< {SUGGESTED_COMPACTION_MS} ms ({SUGGESTED})");
    let dir = match bench.context_dir() {
        Ok(dir) => dir,
        Err(err) => {
            *failed = true;
            println!("  FAILED: {err}");
            rows.push(Row::failed("long session with compaction", &err, &target));
            return;
        }
    };
    let mut runs = Vec::new();
    for setting in [Setting::Auto, Setting::Off, Setting::Small] {
        println!("  ({}) {}:", setting.letter(), setting.describe());
        match bench.long_session(&dir, setting) {
            Ok(run) => {
                run.print(setting);
                runs.push((setting, run));
            }
            Err(err) => {
                *failed = true;
                println!("    FAILED: {err}");
                rows.push(Row::failed(
                    &format!("long session, {}", setting.describe()),
                    &err,
                    &target,
                ));
            }
        }
    }
    let run = |wanted: Setting| runs.iter().find(|(s, _)| *s == wanted).map(|r| &r.1);
    let (auto, off, small) = (run(Setting::Auto), run(Setting::Off), run(Setting::Small));

    let count = |run: &SessionRun| {
        format!(
            "{} summaries, {} elisions of old tool outputs",
            run.count(Kind::Summary),
            run.count(Kind::Elision)
        )
    };
    for (run, setting) in [(auto, Setting::Auto), (off, Setting::Off)] {
        if let Some(run) = run {
            rows.push(Row::info(
                &format!("compactions in {PROMPTS} prompts, {}", setting.short()),
                count(run),
            ));
        }
    }
    let at_end = |run: Option<&SessionRun>| {
        run.and_then(|r| r.first_request(PROMPTS))
            .map_or("-".to_string(), size_and_tokens)
    };
    if auto.is_some() || off.is_some() {
        rows.push(Row::info(
            &format!("request at prompt {PROMPTS}, with compaction / without"),
            format!("{} / {}", at_end(auto), at_end(off)),
        ));
    }
    if let Some(auto) = auto {
        rows.push(overhead_row(
            auto,
            Kind::Elision,
            &format!(
                "agent overhead per elision of old tool outputs, {}",
                Setting::Auto.short()
            ),
            &target,
        ));
    }
    if let Some(small) = small {
        rows.push(Row::info(
            &format!(
                "compactions in {PROMPTS} prompts, {}",
                Setting::Small.short()
            ),
            count(small),
        ));
        rows.push(overhead_row(
            small,
            Kind::Summary,
            &format!(
                "agent overhead per compaction (model excluded), {}",
                Setting::Small.short()
            ),
            &target,
        ));
    }
}

/// The row of the added time per compaction of `kind` in `run`.
fn overhead_row(run: &SessionRun, kind: Kind, figure: &str, target: &str) -> Row {
    match run.overhead(kind) {
        Some(overhead) => Row::suggested(
            figure,
            format!(
                "{:.1} ms (median of {} {})",
                overhead.against_all * 1e3,
                run.count(kind),
                match kind {
                    Kind::Summary => "summaries",
                    Kind::Elision => "elisions",
                }
            ),
            overhead.against_all * 1e3 < SUGGESTED_COMPACTION_MS,
            target,
        ),
        None => Row::suggested(figure, format!("none in {PROMPTS} prompts"), false, target),
    }
}

/// `1,234 bytes (~309 tokens)`: the body and its bytes/4 estimate.
fn size_and_tokens(bytes: usize) -> String {
    format!(
        "{} bytes (~{} tokens)",
        group(bytes as u64),
        group(bytes.div_ceil(4) as u64)
    )
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Setting {
    /// `WINDOW`, no `context` section (auto_compact 0.8).
    Auto,
    /// `WINDOW`, auto_compact "off".
    Off,
    /// `SMALL_WINDOW`, auto_compact 0.8.
    Small,
}

impl Setting {
    fn letter(self) -> char {
        match self {
            Setting::Auto => 'a',
            Setting::Off => 'b',
            Setting::Small => 'c',
        }
    }

    fn window(self) -> u64 {
        match self {
            Setting::Auto | Setting::Off => WINDOW,
            Setting::Small => SMALL_WINDOW,
        }
    }

    fn describe(self) -> String {
        match self {
            Setting::Auto => format!(
                "automatic compaction (auto_compact default, 0.8), {}-token window",
                group(WINDOW)
            ),
            Setting::Off => format!(
                "without compaction (auto_compact \"off\"), {}-token window",
                group(WINDOW)
            ),
            Setting::Small => format!(
                "automatic compaction (auto_compact default, 0.8), {}-token window, so that summaries happen",
                group(SMALL_WINDOW)
            ),
        }
    }

    fn short(self) -> String {
        match self {
            Setting::Auto => format!("auto_compact 0.8, {}k window", WINDOW / 1000),
            Setting::Off => format!("auto_compact off, {}k window", WINDOW / 1000),
            Setting::Small => format!("auto_compact 0.8, {}k window", SMALL_WINDOW / 1000),
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// The model was asked for a summary (old outputs may have been elided
    /// first).
    Summary,
    /// Old tool outputs were elided, and that was enough.
    Elision,
}

/// One compaction as the server saw it.
struct Event {
    prompt: usize,
    kind: Kind,
    /// The last conversation request before it and the first after it.
    before: usize,
    after: Option<usize>,
    /// Tool results elided by it (an elision).
    elided: usize,
    /// The first request after it carries the summary message.
    after_compacted: bool,
    /// The summary request: its size and the server's time on it.
    summary: Option<(usize, f64)>,
}

/// What a compaction adds to its prompt's wall time (the summary
/// request's server time taken out), in seconds.
struct Overhead {
    /// Median of the prompts with one minus the median of all others.
    against_all: f64,
    /// Median of each such prompt minus the median of the `NEIGHBOURS`
    /// prompts before it without one.
    against_neighbours: f64,
    /// The median prompt with one over the others, and the median server
    /// time of the summary requests.
    added: f64,
    server: f64,
}

/// One session's prompts and the model requests they made.
struct SessionRun {
    /// Wall time of each prompt, from writing it to reading its answer.
    prompts: Vec<f64>,
    /// Every chat request, in the order the server received them.
    requests: Vec<Served>,
    /// Everything else the server was asked (method and path).
    others: Vec<String>,
    total: f64,
    hwm_kib: Option<u64>,
}

impl SessionRun {
    /// The body size of prompt `n`'s first request with the conversation
    /// (not a summary request).
    fn first_request(&self, n: usize) -> Option<usize> {
        self.requests
            .iter()
            .find(|r| r.prompt == n && !r.summary)
            .map(|r| r.bytes)
    }

    /// The compactions, in order: each summary request, and each request
    /// with more elided results than the one before in a prompt without
    /// a summary.
    fn events(&self) -> Vec<Event> {
        let summarised: Vec<usize> = self
            .requests
            .iter()
            .filter(|r| r.summary)
            .map(|r| r.prompt)
            .collect();
        let mut events: Vec<Event> = Vec::new();
        let mut last: Option<&Served> = None;
        for (index, request) in self.requests.iter().enumerate() {
            if request.summary {
                let next = self.requests[index + 1..].iter().find(|r| !r.summary);
                events.push(Event {
                    prompt: request.prompt,
                    kind: Kind::Summary,
                    before: last.map_or(0, |r| r.bytes),
                    after: next.map(|r| r.bytes),
                    elided: 0,
                    after_compacted: next.is_some_and(|r| r.compacted),
                    summary: Some((request.bytes, request.server_time())),
                });
                continue;
            }
            let stubs = last.map_or(0, |r| r.stubs);
            if request.stubs > stubs
                && !summarised.contains(&request.prompt)
                && !events.iter().any(|e| e.prompt == request.prompt)
            {
                events.push(Event {
                    prompt: request.prompt,
                    kind: Kind::Elision,
                    before: last.map_or(0, |r| r.bytes),
                    after: Some(request.bytes),
                    elided: request.stubs - stubs,
                    after_compacted: false,
                    summary: None,
                });
            }
            last = Some(request);
        }
        events
    }

    fn count(&self, kind: Kind) -> usize {
        self.events().iter().filter(|e| e.kind == kind).count()
    }

    /// What a compaction of `kind` adds to its prompt; `None` without one.
    fn overhead(&self, kind: Kind) -> Option<Overhead> {
        let events = self.events();
        let with: Vec<usize> = events.iter().map(|e| e.prompt).collect();
        let chosen: Vec<&Event> = events.iter().filter(|e| e.kind == kind).collect();
        if chosen.is_empty() {
            return None;
        }
        let wall = |n: usize| {
            n.checked_sub(1)
                .and_then(|i| self.prompts.get(i))
                .map_or(f64::NAN, |t| *t)
        };
        let server = Stats::of(
            &chosen
                .iter()
                .map(|e| e.summary.map_or(0.0, |(_, time)| time))
                .collect::<Vec<_>>(),
        )
        .median;
        let inside: Vec<f64> = chosen.iter().map(|e| wall(e.prompt)).collect();
        let outside: Vec<f64> = (1..=self.prompts.len())
            .filter(|n| !with.contains(n))
            .map(wall)
            .collect();
        let added = Stats::of(&inside).median - Stats::of(&outside).median;
        let against_neighbours: Vec<f64> = chosen
            .iter()
            .map(|e| {
                let near: Vec<f64> = (1..e.prompt)
                    .rev()
                    .filter(|n| !with.contains(n))
                    .take(NEIGHBOURS)
                    .map(wall)
                    .collect();
                let model = e.summary.map_or(0.0, |(_, time)| time);
                wall(e.prompt) - Stats::of(&near).median - model
            })
            .collect();
        Some(Overhead {
            against_all: added - server,
            against_neighbours: Stats::of(&against_neighbours).median,
            added,
            server,
        })
    }

    fn print(&self, setting: Setting) {
        let summaries = self.requests.iter().filter(|r| r.summary).count();
        println!(
            "    {} prompts in {:.2} s, {} chat requests ({summaries} summary requests){}",
            self.prompts.len(),
            self.total,
            self.requests.len(),
            match self.hwm_kib {
                Some(kib) => format!(", agent peak RSS {:.2} MiB", kib as f64 / 1024.0),
                None => String::new(),
            }
        );
        if !self.others.is_empty() {
            println!(
                "    other requests to the server (answered 404): {}",
                self.others.join(", ")
            );
        }
        for n in SHOWN {
            match self.first_request(n) {
                Some(bytes) => println!(
                    "    first model request of prompt {n:>3}: {}",
                    size_and_tokens(bytes)
                ),
                None => println!("    first model request of prompt {n:>3}: none seen"),
            }
        }
        let largest = self.requests.iter().map(|r| r.bytes).max().unwrap_or(0);
        println!("    largest request: {}", size_and_tokens(largest));
        let events = self.events();
        let prompts_of = |kind: Kind| {
            let prompts: Vec<String> = events
                .iter()
                .filter(|e| e.kind == kind)
                .map(|e| e.prompt.to_string())
                .collect();
            match prompts.len() {
                0 => String::new(),
                1..=LISTED => format!(" (prompts {})", prompts.join(", ")),
                n => format!(
                    " (prompts {}, … {})",
                    prompts[..LISTED / 2].join(", "),
                    prompts[n - 2..].join(", ")
                ),
            }
        };
        println!(
            "    compactions: {} summaries{}; {} elisions of old tool outputs without a summary{}",
            self.count(Kind::Summary),
            prompts_of(Kind::Summary),
            self.count(Kind::Elision),
            prompts_of(Kind::Elision)
        );
        let after = |e: &Event| e.after.map_or("none seen".to_string(), size_and_tokens);
        let elisions = self.count(Kind::Elision);
        for event in &events {
            match event.summary {
                Some((bytes, time)) => println!(
                    "      prompt {:>3}, summary: last request before {}, first after {}{}; the summary request {} ({:.1} ms at the server)",
                    event.prompt,
                    size_and_tokens(event.before),
                    after(event),
                    if event.after_compacted { "" } else { " (WARNING: without the summary message)" },
                    size_and_tokens(bytes),
                    time * 1e3
                ),
                None if elisions <= LISTED => println!(
                    "      prompt {:>3}, elision of {} results: last request before {}, first after {}",
                    event.prompt,
                    event.elided,
                    size_and_tokens(event.before),
                    after(event)
                ),
                None => {}
            }
        }
        if elisions > LISTED {
            let elided: Vec<f64> = events
                .iter()
                .filter(|e| e.kind == Kind::Elision)
                .map(|e| e.elided as f64)
                .collect();
            let stats = Stats::of(&elided);
            println!(
                "      ({elisions} elisions of {:.0} to {:.0} results each, median {:.0}; each one listed only up to {LISTED})",
                stats.min, stats.max, stats.median
            );
        }
        println!(
            "    prompt wall time: {}",
            Stats::of(&self.prompts).describe_ms()
        );
        for kind in [Kind::Summary, Kind::Elision] {
            let Some(overhead) = self.overhead(kind) else {
                continue;
            };
            match kind {
                Kind::Summary => println!(
                    "    agent overhead per compaction (model excluded): {:.1} ms   (median prompt with a summary {:+.1} ms over the others, minus {:.1} ms median server time of the summary request; against the {NEIGHBOURS} prompts before each: {:.1} ms)",
                    overhead.against_all * 1e3,
                    overhead.added * 1e3,
                    overhead.server * 1e3,
                    overhead.against_neighbours * 1e3
                ),
                Kind::Elision => println!(
                    "    agent overhead per elision without a summary: {:.1} ms   (median prompt with an elision over the others, no extra request; against the {NEIGHBOURS} prompts before each: {:.1} ms)",
                    overhead.against_all * 1e3,
                    overhead.against_neighbours * 1e3
                ),
            }
        }
        match setting {
            Setting::Auto | Setting::Small if events.is_empty() => {
                println!("    WARNING: no compaction at all in {PROMPTS} prompts");
            }
            Setting::Small if self.count(Kind::Summary) == 0 => {
                println!("    WARNING: no summary in {PROMPTS} prompts");
            }
            Setting::Off if !events.is_empty() => {
                println!("    WARNING: the context was compacted with auto_compact off");
            }
            _ => {}
        }
    }
}

impl Bench {
    /// The session cwd of figure 10, with its `data.txt`.
    fn context_dir(&self) -> Result<std::path::PathBuf, String> {
        let io = |what: &str, err: std::io::Error| format!("{what}: {err}");
        let dir = self.work.dir.join("context");
        std::fs::create_dir_all(&dir).map_err(|e| io("cannot create the session cwd", e))?;
        let dir = dir
            .canonicalize()
            .map_err(|e| io("cannot resolve the session cwd", e))?;
        let data: String = (1..=DATA_LINES)
            .map(|i| format!("reading {i:03}: the quick brown fox jumps over the lazy dog.\n"))
            .collect();
        std::fs::write(dir.join("data.txt"), &data).map_err(|e| io("cannot write data.txt", e))?;
        println!(
            "  session cwd {} (data.txt: {} bytes, {DATA_LINES} lines)",
            dir.display(),
            data.len()
        );
        Ok(dir)
    }

    /// One session of `PROMPTS` prompts against a fresh fake server.
    fn long_session(&self, dir: &Path, setting: Setting) -> Result<SessionRun, String> {
        let server = ContextServer::start()?;
        let mut config = fake_config(
            &server.chat.base_url,
            "BENCH_CTX_KEY",
            "ctx",
            setting.window(),
        );
        if setting == Setting::Off {
            config["context"] = json!({ "auto_compact": "off" });
        }
        let config_path = self
            .work
            .dir
            .join(format!("context-{}.config.json", setting.letter()));
        let mut command = self.chat_agent(&config_path, &config, "BENCH_CTX_KEY")?;
        command.args(["--max-steps", "100000"]);
        let mut process = AgentProcess::spawn(command)?;
        process.request("initialize", json!({ "protocolVersion": 1 }), INIT_TIMEOUT)?;
        let (session, _) = new_session_in(&mut process, dir)?;

        let started = Instant::now();
        let mut prompts = Vec::with_capacity(PROMPTS);
        let mut odd = Vec::new();
        for n in 1..=PROMPTS {
            server.prompt.store(n, Ordering::SeqCst);
            let text = format!("Reading {n}: please read data.txt again and tell me what it says.");
            let answer = process
                .request(
                    "session/prompt",
                    json!({ "sessionId": session, "prompt": [{ "type": "text", "text": text }] }),
                    SCRIPTED_PROMPT_TIMEOUT,
                )
                .map_err(|e| format!("prompt {n}: {e}"))?;
            prompts.push(answer.elapsed());
            let stop_reason = answer.stop_reason();
            if stop_reason != "end_turn" || answer.tool_completed != 1 {
                odd.push(format!(
                    "prompt {n}: stopReason {stop_reason}, {} tool calls completed",
                    answer.tool_completed
                ));
            }
        }
        let total = started.elapsed().as_secs_f64();
        let hwm_kib = process.memory().ok().map(|m| m.hwm_kib);
        process.close()?;
        if !odd.is_empty() {
            println!(
                "    WARNING: {} prompts did not end with one completed read_file and end_turn; first: {}",
                odd.len(),
                odd[0]
            );
        }
        let (requests, others, errors) = server.finish();
        if let Some(first) = errors.first() {
            println!(
                "    WARNING: the fake server failed {} times; first: {first}",
                errors.len()
            );
        }
        if let Some(request) = requests.iter().find(|r| r.summary && r.has_tools) {
            println!(
                "    WARNING: the summary request of prompt {} offered tools",
                request.prompt
            );
        }
        Ok(SessionRun {
            prompts,
            requests,
            others,
            total,
            hwm_kib,
        })
    }
}

// ---------------------------------------------------------------------------
// The fake server's replies

/// One chat request as the server saw it.
struct Served {
    /// The prompt being answered when it arrived (1-based).
    prompt: usize,
    /// The body's length.
    bytes: usize,
    /// The last message asked for a summary.
    summary: bool,
    /// The request offered tools.
    has_tools: bool,
    /// Tool results sent as elision stubs.
    stubs: usize,
    /// A message is a compaction summary.
    compacted: bool,
    /// When its head was read, and when its answer was written.
    received: Instant,
    written: Instant,
}

impl Served {
    fn server_time(&self) -> f64 {
        self.written.duration_since(self.received).as_secs_f64()
    }
}

/// A Chat Completions server that plays a model reading `data.txt` once
/// per prompt and writing summaries when asked.
struct ContextServer {
    chat: ChatServer<Served>,
    /// The prompt being sent, for the requests to be counted under.
    prompt: Arc<AtomicUsize>,
}

impl ContextServer {
    fn start() -> Result<ContextServer, String> {
        let prompt = Arc::new(AtomicUsize::new(0));
        let calls = AtomicUsize::new(0);
        let current = prompt.clone();
        let chat = ChatServer::start("ctx", move |request, sse| {
            reply(request, sse, current.load(Ordering::SeqCst), &calls)
        })?;
        Ok(ContextServer { chat, prompt })
    }

    /// Waits for the connections in flight, then takes the log: the chat
    /// requests in the order received, the other requests, the errors.
    fn finish(&self) -> (Vec<Served>, Vec<String>, Vec<String>) {
        let mut log = self.chat.finish();
        log.served.sort_by_key(|r| r.received);
        (log.served, log.others, log.errors)
    }
}

/// Answers a chat request by its last message: a summary when asked for
/// one, "Read." after a tool result, else a `read_file` call.
fn reply(
    request: &ChatRequest,
    sse: &mut Sse,
    prompt: usize,
    calls: &AtomicUsize,
) -> Result<Served, String> {
    let messages = request.messages();
    let last = messages.last().unwrap_or(&Value::Null);
    let summary = content(last).contains(SUMMARY_MARK);
    let stubs = messages
        .iter()
        .filter(|m| m["role"] == "tool" && content(m).starts_with(STUB_MARK))
        .count();
    let compacted = messages
        .iter()
        .any(|m| m["role"] == "user" && content(m).starts_with(COMPACTED_MARK));
    let has_tools = request.body.get("tools").is_some();

    let chunks: Vec<Value> = if summary {
        text_chunks(&format!(
            "Summary: the user asked for {prompt} readings of data.txt; all were done."
        ))
    } else if last["role"] == "tool" {
        text_chunks("Read.")
    } else {
        let id = format!("call_{}", calls.fetch_add(1, Ordering::Relaxed) + 1);
        tool_call_chunks(&id, "read_file", "{\"path\":\"data.txt\"}")
    };
    let written = sse.finish(&chunks)?;
    Ok(Served {
        prompt,
        bytes: request.bytes,
        summary,
        has_tools,
        stubs,
        compacted,
        received: request.received,
        written,
    })
}

//! `spindle exec "PROMPT"`: one prompt, here, through the same agent and
//! session store as `spindle acp`, with the terminal client of
//! `link.rs` and `printer.rs` in front of it. The answer goes to stdout;
//! a header (model, approval policy, session), thoughts, tool calls and
//! the plan to stderr; `--quiet` leaves only the answer, `--json` prints
//! the raw updates instead, then one result line (`exec_result.rs`).
//! `--max-cost`, `--max-steps` and `--max-minutes` are budgets that end
//! the run with exit code 4 (`budget.rs`). `--continue` and `--session
//! ID` go on with an earlier session of this folder (its slash commands
//! too: `/undo`).
//!
//! Permission requests are asked on the terminal (`/dev/tty`) when there
//! is one. Without one nobody is asked: the call does not run, the model
//! is told nobody could be asked, and exec ends with exit code 3 naming
//! what needed approval and what would allow it.

use super::budget::{Budgets, CostWatch, Ran};
use super::exec_result::{Report, Watch};
use super::failure::Failure;
use super::link::Link;
use super::printer::{Printer, Unasked};
use crate::agent::Options;
use crate::util::json_for_terminal;
use serde_json::{json, Value};
use std::io::{IsTerminal, Read};
use std::sync::{Arc, Mutex};

/// Which earlier session `exec` goes on with.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Resume {
    /// The latest of this folder (`--continue`).
    Latest,
    /// `--session ID`.
    Id(String),
}

/// What `exec` was asked besides the agent's options.
#[derive(Debug, Clone, Default)]
pub(crate) struct ExecArgs {
    /// The prompt, or `-` for standard input.
    pub prompt: Option<String>,
    pub json: bool,
    pub quiet: bool,
    pub resume: Option<Resume>,
    /// `spindle chat`: a conversation (`quiet` then hides the thoughts).
    pub chat: bool,
    /// `--max-cost`, `--max-steps`, `--max-minutes`.
    pub budgets: Budgets,
}

/// `--session` takes what `spindle sessions show` does: an id or a unique
/// prefix of one, its `sess_` given or not. The prefix is made the whole
/// id here, before the agent opens the session by it. A database that
/// does not exist yet (or a scripted run's own) holds no session to
/// find, and is not created for the asking.
pub(super) fn resolve_session(options: &Options, args: &mut ExecArgs) -> Result<(), Failure> {
    let Some(Resume::Id(given)) = &args.resume else {
        return Ok(());
    };
    if options.script.is_some() && options.db.is_none() {
        return Ok(());
    }
    let path = options
        .db
        .clone()
        .unwrap_or_else(crate::store::default_path);
    if !path.is_file() {
        return Ok(());
    }
    let store = crate::store::Store::open(&path)
        .map_err(|error| Failure::Failed(format!("{}: {error}", path.display())))?;
    if let Some(id) = crate::history::resolve_id(&store, given).map_err(Failure::Failed)? {
        args.resume = Some(Resume::Id(id));
    }
    Ok(())
}

/// The most bytes read from standard input (the prompt, or the context
/// piped in with one).
const PROMPT_CAP: u64 = 1024 * 1024;

/// How long piped input has to start arriving before exec goes on
/// without it (a pipe nobody writes to or closes must not hang exec).
const STDIN_WAIT: std::time::Duration = std::time::Duration::from_millis(500);

/// Reads standard input whole, within [`PROMPT_CAP`].
fn read_stdin(what: &str) -> Result<String, Failure> {
    let mut bytes = Vec::new();
    if let Err(error) = std::io::stdin()
        .take(PROMPT_CAP + 1)
        .read_to_end(&mut bytes)
    {
        return Err(Failure::Failed(format!(
            "cannot read {what} from stdin: {error}"
        )));
    }
    if bytes.len() as u64 > PROMPT_CAP {
        return Err(Failure::Failed(format!("{what} on stdin is over {} MiB; give a shorter one (or put the text in a file and name the file in the prompt)", PROMPT_CAP >> 20)));
    }
    String::from_utf8(bytes)
        .map_err(|_| Failure::Failed(format!("{what} on stdin must be UTF-8 text")))
}

/// Input piped in with a prompt (`git diff | spindle exec "review"`):
/// what arrives, when something starts arriving soon; `None` for a
/// terminal or a pipe that stays silent.
fn piped_context() -> Result<Option<String>, Failure> {
    if std::io::stdin().is_terminal() {
        return Ok(None);
    }
    let (started, arrived) = crossbeam_channel::bounded(1);
    let (sender, receiver) = crossbeam_channel::bounded(1);
    // Detached: a silent pipe leaves it blocked until the process ends.
    let reader = std::thread::Builder::new()
        .name("spindle-exec-stdin".into())
        .spawn(move || {
            // The first bytes (or the end) arrive: then the rest is read.
            let _ = std::io::BufRead::fill_buf(&mut std::io::stdin().lock());
            let _ = started.send(());
            let _ = sender.send(read_stdin("the input"));
        });
    if reader.is_err() || arrived.recv_timeout(STDIN_WAIT).is_err() {
        return Ok(None);
    }
    match receiver.recv_timeout(std::time::Duration::from_secs(60)) {
        Ok(text) => Ok(Some(text?).filter(|t| !t.trim().is_empty())),
        Err(_) => Err(Failure::Failed(
            "the input piped in did not end within a minute; close it, or give the prompt alone"
                .into(),
        )),
    }
}

/// The prompt as the model gets it.
fn prompt_text(args: &ExecArgs) -> Result<String, Failure> {
    let prompt = match args.prompt.as_deref() {
        Some("-") => read_stdin("the prompt")?,
        Some(text) => match piped_context()? {
            Some(context) => format!("{text}\n\n<stdin>\n{}\n</stdin>", context.trim_end()),
            None => text.to_string(),
        },
        None => String::new(),
    };
    if prompt.trim().is_empty() {
        return Err(Failure::Failed("the prompt is empty".into()));
    }
    Ok(prompt)
}

/// Runs the prompt: `Ok` after `end_turn`, [`Failure::Stopped`] (exit
/// code 3) on any other stop reason or when a call needed approval that
/// nobody could give, [`Failure::OverBudget`] (4) when a budget ended it,
/// [`Failure::Cancelled`] (130) after Ctrl-C, another failure (1) on an
/// error. With `--json`, the last line on stdout is the result
/// (`exec_result.rs`), once a session was opened.
pub(crate) fn run(mut options: Options, mut args: ExecArgs) -> Result<(), Failure> {
    // Termination signals are exec's to handle (below), not the
    // in-process agent's: one handler per process.
    options.signals = false;
    resolve_session(&options, &mut args)?;
    // Ctrl-C (and SIGTERM, SIGHUP) cancel the turn and end exec in order
    // (`ending.rs`); a second one ends it at once. Installed before any
    // other thread starts.
    let stop: Arc<Mutex<Stop>> = Arc::default();
    {
        let stop = stop.clone();
        let _ = crate::process::on_termination(move |name| {
            let Ok(mut state) = stop.lock() else {
                super::ending::force(Some(name));
            };
            // Again, or before the agent started (nothing to clean up):
            // at once.
            if state.signal.is_some() || !state.started {
                super::ending::force(Some(name));
            }
            state.signal = Some(name);
            if let Some((to, session)) = &state.running {
                super::ending::cancel(to, session);
            }
            // No turn yet: `converse` sees the signal before it sends one.
            super::ending::watch(Some(name), None, Arc::default());
        });
    }
    // After the handler: the thread that reads piped input must inherit
    // the blocked signals too.
    let prompt = prompt_text(&args)?;
    // The clock of --max-minutes runs from here; it stops as the turn ends.
    let clock = args.budgets.duration().and_then(|limit| {
        let stop = stop.clone();
        super::budget::start_clock(limit, move || {
            if let Ok(mut state) = stop.lock() {
                state.budget.get_or_insert(Ran::Minutes);
                if let Some((to, session)) = &state.running {
                    super::ending::cancel(to, session);
                }
            }
        })
    });
    let cwd = std::env::current_dir()
        .map_err(|error| Failure::Failed(format!("cannot tell the current folder: {error}")))?;
    let config = options.config.clone();
    let flags = flag_choices(&options);
    let store = stored_in(&options);
    if let Ok(mut state) = stop.lock() {
        state.started = true;
    }
    let loaded = options.loaded.clone();
    let mut link = Link::start(options)?;
    let mut printer = Printer::new(args.json, args.quiet);
    let asked = Asked {
        cwd: &cwd,
        prompt: &prompt,
        args: &args,
        config: config.as_deref(),
        loaded: loaded.as_ref(),
        flags: &flags,
        store: store.as_deref(),
    };
    let mut report = Report::default();
    let ended = converse(&mut link, &mut printer, &stop, &asked, &mut report);
    drop(clock);
    printer.finish();
    let closed = link.close();
    // Checkpoints turned off keep no record of what changed: unknown.
    let kept = loaded
        .as_ref()
        .and_then(|loaded| loaded.config())
        .is_none_or(|config| config.checkpoints.enabled != Some(false));
    let files = match (&store, &report.session) {
        (Some(db), Some(session)) if args.json && kept => {
            super::exec_result::files_changed(db, session, report.turn_before, &cwd)
        }
        _ => None,
    };
    let opened = report.session.is_some();
    if let (Ok((_, _, session)), Some(store), None) = (&ended, &store, &args.resume) {
        if forget_if_only_commands(store, session) {
            // Nothing to go on with: the line names no session.
            report.session = None;
        }
    }
    let (signal, ran_out) = stop
        .lock()
        .map_or((None, None), |state| (state.signal, state.budget));
    let ended = match ended {
        Ok((stop, policy, _)) => {
            let ran_out = ran_out.filter(|_| stop == "cancelled");
            outcome(
                &stop,
                &printer,
                &policy,
                signal.is_some(),
                ran_out,
                &args.budgets,
            )
        }
        Err(failure) => Err(failure),
    };
    let ended = ended_as(signal, ended, closed);
    if args.json && opened {
        match &ended {
            Err(Failure::OverBudget(budget)) => report.budget = Some(budget),
            // Said on stderr, and in the line for whoever reads only it.
            Err(Failure::Failed(message)) if report.error.is_none() => {
                report.error = Some(message.clone())
            }
            _ => {}
        }
        let code = ended.as_ref().err().map_or(0, Failure::exit_code);
        let last = super::exec_result::line(&report, files, code);
        let _ = super::stdout::print(&format!("{}\n", json_for_terminal(&last)));
    }
    ended
}

/// How exec ends, given a termination request that came (if one did),
/// the turn's outcome and the agent's.
fn ended_as(
    signal: Option<&'static str>,
    ended: Result<(), Failure>,
    closed: Result<(), Failure>,
) -> Result<(), Failure> {
    match (signal, ended, closed) {
        // Ctrl-C cancelled the turn: said, and 130 as a shell shows it.
        (Some(name), Err(Failure::Cancelled), _) if super::ending::is_interrupt(name) => {
            Err(Failure::Cancelled)
        }
        // Another request, or one before the turn: passed on by `main`.
        (Some(name), _, _) => Err(Failure::Signalled(name)),
        // The agent ended early: its own words say why.
        (None, Err(Failure::Broken), Err(why)) => Err(why),
        (None, ended, closed) => ended.and(closed),
    }
}

/// What exec's termination handler shares with its loop.
#[derive(Default)]
struct Stop {
    /// The agent was started: from here on exec ends in order.
    started: bool,
    /// The running turn to cancel: the agent's input and the session.
    running: Option<(super::link::Sender, String)>,
    /// The first termination request, once one came.
    signal: Option<&'static str>,
    /// The first budget that ran out.
    budget: Option<Ran>,
}

/// The session database this run writes to; none for a scripted run
/// without `--db` (it keeps nothing).
pub(super) fn stored_in(options: &Options) -> Option<std::path::PathBuf> {
    match (&options.db, &options.script) {
        (Some(db), _) => Some(db.clone()),
        (None, Some(_)) => None,
        (None, None) => Some(crate::store::default_path()),
    }
}

/// A session this run opened in which nothing reached the model (only
/// slash commands answered here, like `/help` or `/model`) holds no
/// conversation to go on with: it is removed, so such runs do not pile
/// up in `spindle sessions`. The choices it made stay the folder's
/// defaults, which are kept apart. True when it was removed.
pub(super) fn forget_if_only_commands(db: &std::path::Path, session: &str) -> bool {
    let Ok(store) = crate::store::Store::open(db) else {
        return false;
    };
    let empty = store.message_count(session).is_ok_and(|n| n == 0)
        && store.goal(session).is_ok_and(|goal| goal.is_none())
        && store.jobs(session).is_ok_and(|jobs| jobs.is_empty())
        && store.inbox(session).is_ok_and(|items| items.is_empty());
    let gone = empty && store.delete_session(session).is_ok_and(|gone| gone);
    if gone {
        crate::process::logs::remove_session(db, session);
    }
    gone
}

/// The session choices the command line made (`--model`, or `--script`'s
/// scenario; `--permissions`, `--preset`), as config option ids and
/// values: a new session starts with them, and a session gone on with
/// (`--continue`, `--session`) takes them too, since a flag typed for
/// this run beats what the session chose before.
pub(super) fn flag_choices(options: &Options) -> Vec<(&'static str, String)> {
    let mut choices = Vec::new();
    if let Some(model) = options.chosen_model() {
        choices.push(("model", model));
    }
    if let Some(policy) = options.permissions {
        if let Some(id) = serde_json::to_value(policy)
            .ok()
            .and_then(|v| v.as_str().map(String::from))
        {
            choices.push(("tool_approval", id));
        }
    }
    if let Some(preset) = options.preset {
        choices.push(("agent_preset", preset.id().to_string()));
    }
    choices
}

/// Sets the command line's choices on a session gone on with; `opened`
/// then holds its config options as they now are. A model it does not
/// offer is refused, named.
fn take_flags(
    link: &mut Link,
    printer: &mut Printer,
    session: &str,
    opened: &mut Value,
    flags: &[(&'static str, String)],
) -> Result<(), Failure> {
    for (id, value) in flags {
        let mut value = value.clone();
        if *id == "model" {
            // A bare name (`--model gpt-4.1`) names the offered
            // `provider/gpt-4.1`.
            let offered: Vec<String> = opened["configOptions"]
                .as_array()
                .into_iter()
                .flatten()
                .filter(|option| option["id"] == "model")
                .flat_map(|option| option["options"].as_array().cloned().unwrap_or_default())
                .filter_map(|choice| choice["value"].as_str().map(String::from))
                .collect();
            let found = offered.iter().find(|m| **m == value).or_else(|| {
                offered
                    .iter()
                    .find(|m| m.split_once('/').is_some_and(|(_, name)| name == value))
            });
            match found {
                Some(model) => value = model.clone(),
                None => {
                    return Err(Failure::Failed(format!(
                        "--model {}: no provider of yours offers it to this session",
                        crate::util::visible(&value, true)
                    )))
                }
            }
        }
        let params = json!({"sessionId": session, "configId": id, "value": value});
        let answer = link
            .call("session/set_config_option", params, printer)?
            .map_err(|e| said(printer, e))?;
        opened["configOptions"] = answer["configOptions"].clone();
    }
    Ok(())
}

/// Opens the session: a new one, or the one to go on with (replayed
/// into the printer when `replay`, given the command line's `flags`).
/// Its id and the answer that opened it.
pub(super) fn open_session(
    link: &mut Link,
    printer: &mut Printer,
    cwd: &std::path::Path,
    resume: Option<&Resume>,
    replay: bool,
    client_name: &str,
    flags: &[(&'static str, String)],
) -> Result<(String, Value), Failure> {
    let init = json!({"protocolVersion": 1,
        // Notices are not the answer: they go to stderr.
        "clientCapabilities": {"_meta": {"spindle": {"notices": true, "permissionScopes": true}}},
        "clientInfo": {"name": client_name, "version": env!("CARGO_PKG_VERSION")}});
    link.call("initialize", init, printer)?
        .map_err(|e| said(printer, e))?;
    let Some(resume) = resume else {
        let opened = link
            .call(
                "session/new",
                json!({"cwd": cwd, "mcpServers": []}),
                printer,
            )?
            .map_err(|e| match e["code"].as_i64() {
                // No model to talk to: the caller says how to set one up.
                Some(crate::rpc::code::AUTH_REQUIRED) => {
                    printer.finish();
                    Failure::NoModel(plain_words(e["message"].as_str().unwrap_or_default()))
                }
                _ => said(printer, e),
            })?;
        return Ok((
            opened["sessionId"].as_str().unwrap_or_default().to_string(),
            opened,
        ));
    };
    let id = match resume {
        Resume::Id(id) => id.clone(),
        Resume::Latest => {
            let listed = link
                .call("session/list", json!({"cwd": cwd}), printer)?
                .map_err(|e| said(printer, e))?;
            match listed["sessions"][0]["sessionId"].as_str() {
                Some(id) => id.to_string(),
                None => {
                    return Err(Failure::Failed(format!(
                        "no earlier session in {}; start one without --continue",
                        cwd.display()
                    )))
                }
            }
        }
    };
    let method = if replay {
        "session/load"
    } else {
        "session/resume"
    };
    let params = json!({"sessionId": id, "cwd": cwd, "mcpServers": []});
    let mut opened = link
        .call(method, params, printer)?
        .map_err(|e| said(printer, e))?;
    take_flags(link, printer, &id, &mut opened, flags)?;
    Ok((id, opened))
}

/// A JSON-RPC error the agent answered, said on stderr.
pub(super) fn said(printer: &mut Printer, error: Value) -> Failure {
    printer.finish();
    let message = error["message"].as_str().unwrap_or("the agent failed");
    eprintln!(
        "spindle: {}",
        crate::util::visible(&plain_words(message), true)
    );
    Failure::Broken
}

/// An agent's error in a terminal user's words: without the protocol's
/// names ("Resource not found:", "Authentication required:") and the
/// advice meant for an editor ("then authenticate again").
pub(super) fn plain_words(message: &str) -> String {
    if let Some(id) = message.strip_prefix("Resource not found: there is no session ") {
        return format!("no session with the id {id}; `spindle sessions` lists them");
    }
    let text = message
        .strip_prefix("Authentication required: ")
        .or_else(|| message.strip_prefix("Resource not found: "))
        .unwrap_or(message);
    text.replace(", then authenticate again", "").replace(
        " Then authenticate again",
        " `spindle doctor` says more; `spindle setup` sets a provider up again",
    )
}

/// What exec was asked, for [`converse`].
struct Asked<'a> {
    cwd: &'a std::path::Path,
    prompt: &'a str,
    args: &'a ExecArgs,
    /// The config named on the command line (`--config`).
    config: Option<&'a std::path::Path>,
    /// That config as the command loaded it.
    loaded: Option<&'a crate::config::loaded::Loaded>,
    /// The choices the command line made, for a session gone on with.
    flags: &'a [(&'static str, String)],
    /// The session database, when the run keeps one.
    store: Option<&'a std::path::Path>,
}

/// An answer refusing the prompt because the provider refused the key
/// (HTTP 401 or 403): said in words that name where the key came from,
/// which is what the user has to fix. Other errors are left as they are.
fn key_named(
    mut error: Value,
    model: &str,
    config: Option<&std::path::Path>,
    loaded: Option<&crate::config::loaded::Loaded>,
) -> Value {
    let status = error["data"]["status"].as_u64();
    if error["code"] != crate::rpc::code::AUTH_REQUIRED || !matches!(status, Some(401 | 403)) {
        return error;
    }
    let Some((provider, _)) = model.split_once('/') else {
        return error;
    };
    let Some(Ok((loaded, _))) = loaded.map(crate::config::loaded::Loaded::get) else {
        return error;
    };
    let path = config
        .map(std::path::Path::to_path_buf)
        .unwrap_or_else(crate::config::default_path);
    let source = loaded
        .key_source(provider, &path)
        .unwrap_or_else(|| "nowhere (no key was sent)".into());
    let message = error["message"].as_str().unwrap_or_default();
    // The provider's words, without the agent's advice to an editor.
    let words = message
        .strip_prefix("Authentication required: ")
        .unwrap_or(message);
    let words = words
        .split_once(" Check the provider's API key")
        .map_or(words, |(words, _)| words);
    error["message"] = json!(format!(
        "{provider} refused its API key: {} The key came from {source}; put the right key there, or run `spindle setup` again.",
        crate::util::sentence(words)
    ));
    error
}

/// Opens the session (new, or the one to go on with), says which, sends
/// the prompt and waits for its answer: the stop reason, the session's
/// approval policy and its id.
fn converse(
    link: &mut Link,
    printer: &mut Printer,
    stop: &Mutex<Stop>,
    asked: &Asked,
    report: &mut Report,
) -> Result<(String, String, String), Failure> {
    let (cwd, prompt, args, flags) = (asked.cwd, asked.prompt, asked.args, asked.flags);
    let fail = said;
    let (session, opened) = open_session(
        link,
        printer,
        cwd,
        args.resume.as_ref(),
        false,
        "spindle-exec",
        flags,
    )?;
    let policy = header(printer, &opened, &session, args.resume.is_some(), None);
    report.session = Some(session.clone());
    let before = super::exec_result::session_cost(link, printer, &session, report)?;
    let spent_before = match args.budgets.cost {
        Some(_) => super::budget::spent_before(printer, before, &report.currency)?,
        None => 0.0,
    };
    if let Some(db) = asked.store {
        report.turn_before = super::exec_result::last_turn(db, &session);
    }
    if let Ok(mut state) = stop.lock() {
        // A request came while the session opened: no turn is started.
        if let Some(name) = state.signal {
            return Err(Failure::Signalled(name));
        }
        if let Some(ran) = state.budget {
            eprintln!("spindle: {}", ran.words(&args.budgets));
            return Err(Failure::OverBudget(ran.name()));
        }
        state.running = Some((link.sender(), session.clone()));
    }
    let params = json!({"sessionId": session, "prompt": [{"type": "text", "text": prompt}]});
    let mut watch = Watch::new(printer);
    if let Some(max) = args.budgets.cost {
        watch.cost = Some(CostWatch::new(max, spent_before, link.sender(), &session));
    }
    let answer = link.call("session/prompt", params, &mut watch);
    report.message = watch.last_message().to_string();
    let ran_out = watch.cost.as_ref().and_then(|cost| cost.ran_out);
    if let Ok(mut state) = stop.lock() {
        state.running.take();
        if let Some(ran) = ran_out {
            state.budget.get_or_insert(ran);
        }
    }
    let answer = answer?;
    let model = model_of(&opened);
    let result = answer.map_err(|e| {
        let e = key_named(e, &model, asked.config, asked.loaded);
        report.error = e["message"].as_str().map(plain_words);
        fail(printer, e)
    })?;
    let stop = result["stopReason"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    report.stop = Some(stop.clone());
    report.usage = result["_meta"]["spindle"]["usage"].clone();
    stop_jobs(link, printer, &session)?;
    printer.finish();
    Ok((stop, policy, session))
}

/// The session's model, `provider/model`, as the agent opened it.
fn model_of(opened: &Value) -> String {
    opened["configOptions"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|o| o["id"] == "model")
        .and_then(|o| o["currentValue"].as_str())
        .unwrap_or_default()
        .to_string()
}

/// The header on stderr: the model, the approval policy (returned), the
/// session.
pub(super) fn header(
    printer: &mut Printer,
    opened: &Value,
    session: &str,
    resumed: bool,
    mode: Option<&str>,
) -> String {
    let option = |id: &str| {
        opened["configOptions"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|o| o["id"] == id)
            .and_then(|o| o["currentValue"].as_str())
            .unwrap_or("?")
            .to_string()
    };
    let went_on = if resumed { ", continued" } else { "" };
    let policy = option("tool_approval");
    let mode = mode
        .map(|mode| format!(" · mode {}", crate::util::visible(mode, false)))
        .unwrap_or_default();
    printer.note(&format!(
        "spindle: {} · approval {policy}{mode} · session {session}{went_on}",
        option("model"),
    ));
    policy
}

/// Background jobs still running when the prompt ends stop with exec:
/// it says so, naming them.
fn stop_jobs(link: &mut Link, printer: &mut Printer, session: &str) -> Result<(), Failure> {
    let Ok(listed) = link.call("_spindle/jobs", json!({"sessionId": session}), printer)? else {
        return Ok(());
    };
    let running: Vec<String> = listed["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|job| job["state"] == "running")
        .map(|job| {
            format!(
                "{} `{}`",
                job["jobId"].as_str().unwrap_or("?"),
                job["command"].as_str().unwrap_or("?")
            )
        })
        .collect();
    if !running.is_empty() {
        printer.note(&format!(
            "Stopping {} background job{} still running as exec ends: {}",
            running.len(),
            if running.len() == 1 { "" } else { "s" },
            running.join(", ")
        ));
    }
    Ok(())
}

/// The exit: what the stop reason, a budget that ran out (`ran_out`, for
/// a cancelled turn) and the unanswered questions mean. A turn stopped at
/// its step limit ran out of its budget when `--max-steps` was given to
/// exec (4); a limit from the preset or an agent file is another stop (3).
fn outcome(
    stop: &str,
    printer: &Printer,
    policy: &str,
    interrupted: bool,
    ran_out: Option<Ran>,
    budgets: &Budgets,
) -> Result<(), Failure> {
    if interrupted && stop == "cancelled" {
        eprintln!("spindle: cancelled");
        return Err(Failure::Cancelled);
    }
    let ran_out = match stop {
        "max_turn_requests" if budgets.steps.is_some() => Some(Ran::Steps),
        _ => ran_out,
    };
    if let Some(ran) = ran_out {
        eprintln!("spindle: {}", ran.words(budgets));
        return Err(Failure::OverBudget(ran.name()));
    }
    if !printer.unasked.is_empty() {
        for call in &printer.unasked {
            eprintln!("spindle: {}", unasked_words(call, policy));
        }
        return Err(Failure::Stopped);
    }
    match stop {
        "end_turn" => Ok(()),
        _ => {
            if !printer.json {
                eprintln!("(stopped: {})", crate::util::visible(stop, false));
            }
            Err(Failure::Stopped)
        }
    }
}

/// What needed approval, and the flag or rule that would allow it
/// under the policy in force.
pub(crate) fn unasked_words(call: &Unasked, policy: &str) -> String {
    let what = &call.title;
    let allow_rule = |words: &str| {
        format!("spindle exec --continue \"/allow command {words} --project\" saves a rule for this folder")
    };
    match call.kind.as_str() {
        "question" => format!("{what}: the model asked a question and nobody could answer it; answer with spindle exec --continue \"YOUR ANSWER\""),
        "edit" | "delete" | "move" => match policy {
            "ask" => format!("{what} needed approval and nobody could be asked (no terminal); --permissions auto lets edits inside the workspace run, --permissions yolo lets everything run"),
            _ => format!("{what} needed approval and nobody could be asked (no terminal): it is outside what --permissions {policy} allows; --permissions yolo lets it run"),
        },
        "execute" => {
            let words = call.command.as_deref().map(first_words).unwrap_or_default();
            let rule = allow_rule(&words);
            match policy {
                "ask" => format!("{what} needed approval and nobody could be asked (no terminal); --permissions auto runs read-only commands, --permissions sandbox runs commands in a sandbox, --permissions yolo runs every command; or {rule}"),
                "auto" => format!("{what} needed approval and nobody could be asked (no terminal): it is not read-only, so --permissions auto asks; --permissions sandbox runs it in a sandbox, --permissions yolo runs it; or {rule}"),
                "sandbox" => format!("{what} needed approval and nobody could be asked (no terminal): it needs what the sandbox does not give (the network, or writing outside the workspace); --permissions yolo runs it; or {rule}"),
                _ => format!("{what} needed approval and nobody could be asked (no terminal); {rule}"),
            }
        }
        _ => format!("{what} needed approval and nobody could be asked (no terminal); --permissions yolo lets it run"),
    }
}

/// The words a rule for a command names: its program and, when it is no
/// option, the word after (`cargo test`).
fn first_words(command: &str) -> String {
    let mut words = command.split_whitespace();
    let first = words.next().unwrap_or_default();
    match words.next() {
        Some(second)
            if !second.starts_with('-')
                && second
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c)) =>
        {
            format!("{first} {second}")
        }
        _ => first.to_string(),
    }
}

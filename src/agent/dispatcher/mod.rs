//! The dispatcher: the one thread that owns session state. It reads the
//! events (the client's messages, the turns' reports) and hands each to
//! its handler (`handlers/`) through the [`EventRoutes`] it is given at
//! start: it never names them. It routes the client's answers to the
//! turns that asked, and keeps the store and the model registry.
//! `session.rs` is the session record it owns, `outgoing.rs` the table of
//! requests waiting for the client, `later.rs` the requests a helper
//! thread answers (its result comes back as an event: only this thread
//! writes answers), `params.rs` how handlers read params and name errors.
//!
//! Its fields are private: handlers reach the sessions and the rest of
//! its state through a few named methods (`state.rs`: `session`,
//! `session_mut`, `checked`, `options`, …; here `store`, `registry`,
//! `send_line`, …), never the fields themselves.

mod later;
mod outgoing;
pub(super) mod params;
pub(super) mod session;
mod state;

use crate::acp::{fit::Update, method, ClientCapabilities, SessionUpdate};
use crate::agent::common::goal::Goal;
use crate::agent::common::models::Registry;
use crate::agent::common::options::Options;
use crate::agent::turn::report::{Outbox, OutgoingRequest, Report, TurnEnd};
use crate::modes::Policy;
use crate::rpc::stdio::{Input, Output, Queued};
use crate::rpc::{self, Incoming, RequestId, RpcError};
use crate::store::Store;
use crossbeam_channel::{Receiver, RecvTimeoutError, Sender};
pub(in crate::agent) use later::Later;
use outgoing::Outgoing;
use serde_json::{json, Value};
use session::Session;
use std::collections::HashMap;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Everything the dispatcher hears about: the client's messages (from the
/// reader) and the reports of turns.
#[derive(Debug)]
pub(super) enum Event {
    Input(Input),
    Turn(Report),
    /// SIGTERM, SIGINT or SIGHUP: end as at stdin EOF, turns cancelled
    /// even with `--drain`.
    Signal,
    /// A background job of a session started, or ended.
    JobChanged {
        session_id: String,
        job_id: String,
        ended: bool,
    },
    /// A helper's result for a request it answers (`later.rs`).
    Answer {
        id: RequestId,
        result: Result<Value, RpcError>,
    },
    /// Notifications a helper has for the client (a sign-in's end).
    Lines(Vec<String>),
}

impl From<Input> for Event {
    fn from(input: Input) -> Self {
        Event::Input(input)
    }
}

/// What the loop hands each event to: the handlers (`handlers/`, which
/// import this module, never the reverse), given when the agent starts.
/// Plain function pointers: an event costs a call, nothing more.
#[derive(Clone, Copy)]
pub(in crate::agent) struct EventRoutes {
    /// A request: its answer, or `None` when it comes later.
    pub(in crate::agent) request: fn(&mut Dispatcher, &RequestId, &str, Value) -> Answer,
    /// A notification of the client (`session/cancel`, ...).
    pub(in crate::agent) notification: fn(&mut Dispatcher, &str, Value),
    /// A turn reported its end: the prompt's answer.
    pub(in crate::agent) turn_ended: fn(&mut Dispatcher, TurnEnd),
    /// A job of a session started (`false`) or ended (`true`).
    pub(in crate::agent) job_changed: fn(&mut Dispatcher, &str, &str, bool),
    /// A running turn's goal moved on.
    pub(in crate::agent) goal_progress: fn(&mut Dispatcher, &str, Goal),
    /// The user approved a turn's plan, with the policy they chose.
    pub(in crate::agent) plan_approved: fn(&mut Dispatcher, &str, Policy),
    /// A session whose stopped turn waited for a provider's limit: the
    /// wait goes on, after the answer that opened it.
    pub(in crate::agent) resume_wait: fn(&mut Dispatcher, &str),
    /// The agent ends (its `SessionEnd` hooks).
    pub(in crate::agent) exiting: fn(&mut Dispatcher),
}

/// A request's answer; `None` when it comes later (a turn's, a helper's).
pub(in crate::agent) type Answer = Option<Result<Value, RpcError>>;

/// How long running turns get to settle after stdin closed (without
/// `--drain`) before the agent exits anyway.
const SHUTDOWN_GRACE: Duration = Duration::from_millis(700);

pub(super) struct Dispatcher {
    options: Options,
    /// Providers and models, built on first need and rebuilt by
    /// `authenticate`.
    registry: Option<Result<Arc<Registry>, String>>,
    writer: Sender<Queued>,
    /// Files being indexed for `resource` windows, off this thread.
    indexing: Arc<std::sync::atomic::AtomicUsize>,
    /// The bounded queue turn workers stream their updates through.
    stream_writer: Sender<Queued>,
    events: Sender<Event>,
    client: Option<ClientCapabilities>,
    sessions: HashMap<String, Session>,
    /// Set once stdin has ended; the loop stops when no turn runs any more
    /// (or, without `--drain`, when the grace period is over).
    closing: Option<Option<Instant>>,
    test_hooks: bool,
    /// Requests we sent to the client, waiting for their answers.
    outgoing: Outgoing,
    /// Requests of the client a helper thread is answering.
    open: later::Open,
    /// The session database, opened on first use (so a broken database
    /// shows up as clear errors on session requests, not as an agent that
    /// will not start).
    store: Option<Result<Store, String>>,
    db_path: PathBuf,
    /// Lines to write right after the current request's answer.
    after_response: Vec<String>,
    /// Sessions just opened whose turn waited for a provider's limit when
    /// their process stopped: the wait goes on after the answer.
    waits_to_resume: Vec<String>,
    /// The store and registry being prepared on a helper thread at start-up,
    /// so the first `session/new` does not wait for them.
    warm: Option<Receiver<Warm>>,
    /// The config the warm-up starts from, until it starts: after the
    /// first message is handled, so its answer (`initialize`) does not
    /// share the start with it.
    cold: Option<crate::config::loaded::Loaded>,
    /// `SessionEnd` hooks still running (on `spindle-hook-end` threads).
    ending: Vec<std::thread::JoinHandle<()>>,
    routes: EventRoutes,
}

/// What the start-up helper prepares.
type Warm = (Result<Store, String>, Result<Arc<Registry>, String>);

/// How often the leases of running turns are renewed.
const LEASE_HEARTBEAT: Duration = Duration::from_secs(10);

impl Dispatcher {
    /// `loaded` is the config as the start loaded it: the registry is
    /// first built from it, and from the file again only on a reload.
    pub(super) fn new(
        options: Options,
        loaded: crate::config::loaded::Loaded,
        writer: Sender<Queued>,
        stream_writer: Sender<Queued>,
        events: Sender<Event>,
        routes: EventRoutes,
    ) -> Dispatcher {
        Dispatcher {
            stream_writer,
            registry: None,
            writer,
            indexing: Arc::default(),
            events,
            client: None,
            sessions: HashMap::new(),
            closing: None,
            test_hooks: std::env::var_os("SPINDLE_TEST_HOOKS").is_some_and(|v| v == "1"),
            outgoing: Outgoing::default(),
            open: later::Open::default(),
            store: None,
            db_path: options_db_path(&options),
            warm: None,
            cold: Some(loaded),
            after_response: Vec::new(),
            waits_to_resume: Vec::new(),
            ending: Vec::new(),
            routes,
            options,
        }
    }

    /// Opens the store and builds the registry on a helper thread: both
    /// touch files (and a local model server may be asked for its models),
    /// which should not delay `initialize` nor make the first `session/new`
    /// wait more than needed.
    fn warm_up(&mut self) {
        let Some(loaded) = self.cold.take() else {
            return;
        };
        let (sender, receiver) = crossbeam_channel::bounded(1);
        let db_path = self.db_path.clone();
        let options = self.options.clone();
        // Detached: its result comes on the channel; if nothing asks for
        // it, it finishes alone.
        let spawned = std::thread::Builder::new()
            .name("spindle-warmup".into())
            .spawn(move || {
                let store = Store::open(&db_path).map_err(|error| error.to_string());
                let registry = Registry::build_from(&options, loaded.result()).map(Arc::new);
                let _ = sender.send((store, registry));
                // The first turn's tools depend on whether ripgrep is
                // installed; finding out runs a process, done here rather
                // than before the first model request.
                crate::tools::search::ripgrep_available();
            });
        if spawned.is_ok() {
            self.warm = Some(receiver);
        }
    }

    /// Takes what the start-up helper prepared, waiting for it if needed
    /// (and starting it, if it has not started yet).
    pub(in crate::agent) fn take_warm(&mut self) {
        self.warm_up();
        if let Some(receiver) = self.warm.take() {
            if let Ok((store, registry)) = receiver.recv() {
                self.store.get_or_insert(store);
                self.registry.get_or_insert(registry);
            }
        }
    }

    /// The session store, opened on first use. A failure to open it is
    /// not kept: the next request tries again (another process may have
    /// held the file's lock too long, and be done by then).
    pub(in crate::agent) fn store(&mut self) -> Result<&mut Store, RpcError> {
        self.take_warm();
        let db_path = &self.db_path;
        self.store
            .get_or_insert_with(|| Store::open(db_path).map_err(|error| error.to_string()));
        if let Some(Err(message)) = self.store.take_if(|store| store.is_err()) {
            return Err(RpcError::internal(message).with_data(json!({"code": "store_unavailable"})));
        }
        self.store
            .as_mut()
            .and_then(|store| store.as_mut().ok())
            .ok_or_else(|| RpcError::internal("the session store is not open"))
    }

    /// The model registry; -32000 (authentication required) when no
    /// provider can be used, with what to do about it.
    pub(in crate::agent) fn registry(&mut self) -> Result<Arc<Registry>, RpcError> {
        self.take_warm();
        let options = &self.options;
        let built = self
            .registry
            .get_or_insert_with(|| Registry::build(options).map(Arc::new));
        match built {
            Ok(registry) if registry.usable() => Ok(registry.clone()),
            Ok(registry) => Err(RpcError::new(
                rpc::code::AUTH_REQUIRED,
                format!("Authentication required: {}", registry.setup_hint()),
            )),
            Err(message) => Err(RpcError::failed(format!(
                "The configuration cannot be used: {message}"
            ))
            .with_data(json!({"code": "config_invalid"}))),
        }
    }

    /// The credentials tools must not see: the registry's when it could be
    /// built, else the standard ones.
    pub(in crate::agent) fn tool_secrets(&mut self) -> Arc<crate::policy::secrets::Secrets> {
        self.take_warm();
        let options = &self.options;
        let built = self
            .registry
            .get_or_insert_with(|| Registry::build(options).map(Arc::new));
        match built {
            Ok(registry) => registry.secrets.clone(),
            Err(_) => Arc::new(crate::config::Config::default().secrets()),
        }
    }

    /// The elicitation modes the editor took in `initialize`, for the MCP
    /// servers to use during their tool calls; a server's completion of a
    /// URL elicitation becomes `elicitation/complete` to the editor,
    /// queued from the server's reader thread straight to the writer: it
    /// is stamped then, so it precedes the tool call's result it caused
    /// (a notification, not an answer: no request of the client waits).
    pub(in crate::agent) fn mcp_elicitation(&self) -> crate::mcp::ElicitationSupport {
        let modes = self
            .client
            .as_ref()
            .map(|client| client.elicitation.clone())
            .unwrap_or_default();
        if !modes.form && !modes.url {
            return crate::mcp::ElicitationSupport::default();
        }
        let writer = self.writer.clone();
        let on_complete: crate::mcp::CompletionHook = Arc::new(move |id: &str| {
            let line =
                rpc::notification_line(method::ELICITATION_COMPLETE, &json!({"elicitationId": id}));
            let _ = writer.send(Output::Line(line).queued());
        });
        crate::mcp::ElicitationSupport {
            form: modes.form,
            url: modes.url,
            on_complete: Some(on_complete),
        }
    }

    /// The folder of MCP servers' sign-in tokens: beside the provider keys.
    pub(in crate::agent) fn mcp_tokens(&mut self) -> Option<std::path::PathBuf> {
        self.take_warm();
        match &self.registry {
            Some(Ok(registry)) => Some(crate::config::mcp_tokens_dir(
                &registry
                    .config_path
                    .clone()
                    .unwrap_or_else(crate::config::default_path),
            )),
            _ => None,
        }
    }

    /// What HTTPS to MCP servers trusts: the config's (none added when
    /// the config cannot be used). Asked once a session is open, when the
    /// registry is built.
    pub(in crate::agent) fn mcp_trust(&self) -> crate::net::Trust {
        match &self.registry {
            Some(Ok(registry)) => registry.config.trust.clone(),
            _ => crate::net::Trust::default(),
        }
    }

    /// The config's MCP message limit, if it sets one.
    pub(in crate::agent) fn mcp_message_cap(&mut self) -> Option<usize> {
        self.take_warm();
        match &self.registry {
            Some(Ok(registry)) => registry
                .config
                .limits
                .mcp_message_bytes
                .filter(|v| *v > 0)
                .and_then(|v| usize::try_from(v).ok()),
            _ => None,
        }
    }

    /// Sends the session's slash commands after the current answer.
    pub(in crate::agent) fn announce_commands(&mut self, session_id: &str) {
        if let Some(line) = self.commands_line(session_id) {
            self.after_response.push(line);
        }
    }

    /// Sends the session's slash commands now: where no answer of a
    /// request follows (a turn's end, a command answered by a turn),
    /// which would otherwise hold them until some later request.
    pub(in crate::agent) fn send_commands(&mut self, session_id: &str) {
        if let Some(line) = self.commands_line(session_id) {
            self.send_line(line);
        }
    }

    fn commands_line(&self, session_id: &str) -> Option<String> {
        let session = self.sessions.get(session_id)?;
        let update = crate::agent::common::commands::update(&self.commands_of(session.cwd()));
        self.update_line(session_id, Update::Kept(update.into_value()))
    }

    /// Whether the user trusts the project at `cwd`, as the loaded
    /// configuration says (not trusted before one is loaded).
    pub(in crate::agent) fn trusted(&self, cwd: &std::path::Path) -> bool {
        matches!(&self.registry, Some(Ok(registry))
            if crate::config::project::project_trusted(&registry.config, cwd))
    }

    /// The skills of the workspace at `cwd` (its own only if trusted,
    /// and none under a name of the user's), with those left out or
    /// shadowed.
    pub(in crate::agent) fn skills_of(
        &self,
        cwd: &std::path::Path,
    ) -> crate::agent::common::skills::Found {
        self.catalog_of(cwd).skills
    }

    /// Every name of the workspace at `cwd`: its commands and skills, the
    /// user's first (`commands::catalog`).
    fn catalog_of(&self, cwd: &std::path::Path) -> crate::agent::common::commands::Catalog {
        crate::agent::common::commands::catalog(
            cwd,
            self.options.commands_dir(),
            crate::agent::common::skills::discover(cwd, self.trusted(cwd)),
        )
    }

    /// The hooks in force for the workspace at `cwd`: the user's config's,
    /// and the project's own when the user trusts it.
    pub(in crate::agent) fn hooks_of(
        &self,
        cwd: &std::path::Path,
        registry: &Registry,
    ) -> crate::agent::common::hooks::Hooks {
        let trusted = crate::config::project::project_trusted(&registry.config, cwd);
        crate::agent::common::hooks::Hooks::load(registry.config.hooks.as_ref(), cwd, trusted)
    }

    /// Every slash command of the workspace at `cwd`, its skills among them.
    pub(in crate::agent) fn commands_of(
        &self,
        cwd: &std::path::Path,
    ) -> Vec<crate::agent::common::commands::Command> {
        self.catalog_of(cwd).commands
    }

    /// Sends an update outside any turn (a mode or config change) and keeps
    /// it in the session's transcript.
    pub(in crate::agent) fn send_update(&mut self, session_id: &str, update: SessionUpdate) {
        let update = update.into_value();
        if let Some(line) = self.update_line(session_id, Update::Kept(update.clone())) {
            self.send_line(line);
        }
        if let Ok(store) = self.store() {
            if let Err(error) = store.append_events(session_id, 0, &[update.to_string()]) {
                log::warn!("cannot store an update of session {session_id}: {error}");
            }
        }
    }

    fn refresh_leases(&mut self) {
        let running: Vec<String> = self
            .sessions
            .values()
            .filter(|s| s.running.is_some())
            .map(|s| s.id.clone())
            .collect();
        if running.is_empty() {
            return;
        }
        let pid = std::process::id();
        if let Ok(store) = self.store() {
            for id in running {
                if let Err(error) = store.refresh_lease(&id, pid) {
                    log::warn!("cannot renew the lease of session {id}: {error}");
                }
            }
        }
    }

    pub(super) fn run(mut self, events: &Receiver<Event>) {
        loop {
            if self.closing.is_some() && !self.any_running() && self.open.is_empty() {
                break;
            }
            let event = match self.closing {
                Some(Some(deadline)) => match events.recv_deadline(deadline) {
                    Ok(event) => event,
                    Err(RecvTimeoutError::Timeout) => {
                        log::warn!("turns did not settle in time after stdin closed; exiting");
                        break;
                    }
                    Err(RecvTimeoutError::Disconnected) => break,
                },
                _ => match events.recv_timeout(LEASE_HEARTBEAT) {
                    Ok(event) => event,
                    Err(RecvTimeoutError::Timeout) => {
                        self.refresh_leases();
                        continue;
                    }
                    Err(RecvTimeoutError::Disconnected) => break,
                },
            };
            match event {
                Event::Input(Input::Message(message)) => self.handle(message),
                Event::Input(Input::Eof) => self.on_eof(self.options.drain),
                Event::Signal => self.on_eof(false),
                Event::JobChanged {
                    session_id,
                    job_id,
                    ended,
                } => (self.routes.job_changed)(&mut self, &session_id, &job_id, ended),
                Event::Answer { id, result } => self.helper_answered(&id, result),
                Event::Lines(lines) => {
                    for line in lines {
                        self.send_line(line);
                    }
                }
                Event::Turn(Report::Ended(end)) => (self.routes.turn_ended)(&mut self, *end),
                Event::Turn(Report::Request(request)) => self.send_client_request(request),
                Event::Turn(Report::ModeChanged { session_id, policy }) => {
                    (self.routes.plan_approved)(&mut self, &session_id, policy)
                }
                Event::Turn(Report::GoalProgress { session_id, goal }) => {
                    (self.routes.goal_progress)(&mut self, &session_id, *goal)
                }
            }
            // After the first answer is queued (once).
            self.warm_up();
        }
        // What a helper still works on is not waited for: the client
        // learns it was cancelled.
        for id in self.open.take_all() {
            self.respond(&id, Err(later::cancelled(Some("the agent is ending"))));
        }
        (self.routes.exiting)(&mut self);
        // No MCP server, and no job, outlives the agent.
        for session in self.sessions.values_mut() {
            if let Some(mcp) = session.mcp.take() {
                mcp.shutdown();
            }
            session.jobs().kill_all(None);
        }
        // Detached on purpose: a turn still running here ignored its cancel
        // for the whole grace period; the process exit ends it.
        for session in self.sessions.values_mut() {
            if let Some(running) = session.running.take() {
                if running.handle.is_finished() {
                    let _ = running.handle.join();
                }
            }
        }
    }

    fn any_running(&self) -> bool {
        self.sessions.values().any(|s| s.running.is_some())
    }

    /// Where a turn posts its reports: this dispatcher's event channel.
    pub(in crate::agent) fn outbox(&self) -> Outbox {
        let events = self.events.clone();
        Arc::new(move |report| events.send(Event::Turn(report)).is_ok())
    }

    pub(in crate::agent) fn send_line(&self, line: String) {
        let _ = self.writer.send(Output::Line(line).queued());
    }

    /// The `session/update` line of an update for this client
    /// (`acp::fit::line`); `None` when it does not get it.
    pub(in crate::agent) fn update_line(&self, session_id: &str, update: Update) -> Option<String> {
        let capabilities = self.client.clone().unwrap_or_default();
        crate::acp::fit::line(session_id, update, &capabilities)
    }

    /// Replays a session's stored updates, each fitted to this client
    /// (`acp::fit`: what it did not ask for is left out or rewritten).
    pub(in crate::agent) fn replay(&self, session_id: &str, events: &[String]) {
        let capabilities = self.client.clone().unwrap_or_default();
        for body in events {
            let stored = Update::Stored(body);
            if let Some(line) = crate::acp::fit::line(session_id, stored, &capabilities) {
                self.send_line(line);
            }
        }
    }

    /// Queues one-off notices to follow the current request's answer, as
    /// this client takes them (`acp::fit::Notice`): live only, never stored.
    pub(in crate::agent) fn notices_after_response(
        &mut self,
        session_id: &str,
        notices: Vec<crate::acp::fit::Notice>,
    ) {
        let capabilities = self.client.clone().unwrap_or_default();
        self.after_response.extend(
            notices
                .iter()
                .map(|notice| notice.line(session_id, &capabilities)),
        );
    }

    pub(in crate::agent) fn respond(&self, id: &RequestId, result: Result<Value, RpcError>) {
        match result {
            Ok(value) => self.send_line(rpc::response_line(id, &value)),
            Err(error) => {
                log::debug!("request {id} failed: {error}");
                self.send_line(rpc::error_line(id, &error));
            }
        }
    }

    /// Forgets the requests a finished turn left unanswered (see
    /// `Outgoing::forget_session`).
    pub(in crate::agent) fn forget_requests_of(&mut self, session_id: &str) {
        self.outgoing.forget_session(session_id);
    }

    /// Sends a turn's request to the client and remembers where the answer
    /// goes. Once stdin has closed nobody can answer: the request is
    /// dropped, which the waiting turn sees as "the client is gone" (a
    /// permission request counts as cancelled).
    fn send_client_request(&mut self, request: OutgoingRequest) {
        if self.closing.is_some() {
            return;
        }
        let line = self.outgoing.register(request);
        self.send_line(line);
    }

    /// The end of input (or a termination signal): with `drain`, running
    /// turns finish; without, they are cancelled and get a short grace.
    fn on_eof(&mut self, drain: bool) {
        // Nobody can answer our requests any more: dropping their reply
        // channels tells the waiting turns the client is gone.
        self.outgoing.clear();
        if drain {
            log::debug!("stdin closed; draining running turns");
            self.closing = Some(None);
        } else {
            log::debug!("stdin closed; cancelling running turns");
            for session in self.sessions.values() {
                if let Some(running) = &session.running {
                    if let Ok(mut live) = session.live().lock() {
                        live.shutting_down = true;
                    }
                    running.cancel.cancel();
                }
            }
            self.closing = Some(Some(Instant::now() + SHUTDOWN_GRACE));
        }
    }

    fn handle(&mut self, message: Incoming) {
        match message {
            Incoming::Invalid { id, error } => {
                log::warn!("rejected a message: {error}");
                self.respond(&id, Err(error));
            }
            Incoming::Batch { answer_line } => {
                log::warn!("rejected a JSON-RPC batch");
                if let Some(line) = answer_line {
                    self.send_line(line);
                }
            }
            Incoming::Response { id, result } => match self.outgoing.answer(&id, result) {
                Some(clean_up) => {
                    for request in clean_up {
                        self.send_client_request(request);
                    }
                }
                None => log::warn!("dropped a response to unknown request id {id}"),
            },
            Incoming::Notification { method, params } => {
                (self.routes.notification)(self, &method, params)
            }
            Incoming::Request { id, method, params } => {
                let outcome = catch_unwind(AssertUnwindSafe(|| {
                    (self.routes.request)(self, &id, &method, params)
                }));
                match outcome {
                    // `None`: the answer comes later (a prompt turn).
                    Ok(None) => {}
                    Ok(Some(result)) => {
                        let failed = result.is_err();
                        self.respond(&id, result);
                        // Notifications that must follow the answer (the
                        // client learns a new session's id from it). A
                        // failed request opened nothing: what it queued
                        // may name a session the client never got.
                        let after = std::mem::take(&mut self.after_response);
                        if !failed {
                            for line in after {
                                self.send_line(line);
                            }
                        }
                        for id in std::mem::take(&mut self.waits_to_resume) {
                            (self.routes.resume_wait)(self, &id);
                        }
                    }
                    Err(panic) => {
                        self.after_response.clear();
                        self.waits_to_resume.clear();
                        let what = panic_text(&panic);
                        log::error!("handler of {method} panicked: {what}");
                        self.respond(
                            &id,
                            Err(RpcError::internal(format!("{method} failed: {what}"))
                                .with_data(json!({ "code": "internal_panic" }))),
                        );
                    }
                }
            }
        }
    }

    /// Opens a request a helper thread will answer: the helper gets the
    /// [`Later`] to post its result with; the handler returns `None`.
    pub(in crate::agent) fn answer_later(&mut self, id: &RequestId) -> Later {
        let (events, request) = (self.events.clone(), id.clone());
        let post: later::Post = Box::new(move |result| {
            let _ = events.send(Event::Answer {
                id: request,
                result,
            });
        });
        self.open.open(id, post)
    }

    /// Closes a request opened with [`Dispatcher::answer_later`] without
    /// answering it (the handler answers, its helper could not start):
    /// whatever its `Later` posts is dropped.
    pub(in crate::agent) fn withdraw_later(&mut self, id: &RequestId) {
        self.open.close(id);
    }

    /// A helper's result: the answer, if the request is still open; a
    /// request cancelled meanwhile was answered already.
    fn helper_answered(&mut self, id: &RequestId, result: Result<Value, RpcError>) {
        if self.open.close(id) {
            self.respond(id, result);
        } else {
            log::debug!("dropped the late result of request {id}: it was answered already");
        }
    }

    pub(in crate::agent) fn cancel_request(&mut self, request_id: &Value) {
        // A request a helper answers is answered now, -32800; its result
        // is dropped when it comes.
        if self.open.close(request_id) {
            log::debug!("request {request_id} was cancelled before its helper answered");
            self.respond(request_id, Err(later::cancelled(None)));
            return;
        }
        // Prompts outlive their request handler too: the answer is still
        // `cancelled`, as for session/cancel.
        for session in self.sessions.values() {
            if let Some(running) = &session.running {
                if running.request_id.as_ref() == Some(request_id) {
                    running.cancel.cancel();
                }
            }
        }
    }
}

fn options_db_path(options: &Options) -> PathBuf {
    options
        .db
        .clone()
        .unwrap_or_else(crate::store::default_path)
}

fn panic_text(panic: &Box<dyn std::any::Any + Send>) -> String {
    panic
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_else(|| "unknown cause".to_string())
}

//! The dispatcher: the one thread that owns session state. It answers quick
//! requests itself, starts a turn worker per prompt, forwards cancels, and
//! answers each prompt when its worker reports back.

use super::client::OutgoingRequest;
use super::models::Registry;
use super::session::Session;
use super::{Event, Options};
use crate::acp::{self, method, ClientCapabilities};
use crate::rpc::stdio::{Input, Output};
use crate::rpc::{self, Incoming, RequestId, RpcError};
use crate::store::Store;
use crossbeam_channel::{Receiver, RecvTimeoutError, Sender};
use serde::de::DeserializeOwned;
use serde_json::{json, Value};
use std::collections::HashMap;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long running turns get to settle after stdin closed (without
/// `--drain`) before the agent exits anyway.
const SHUTDOWN_GRACE: Duration = Duration::from_millis(700);

/// A request we sent to the client and whose answer has not come yet.
struct Pending {
    session_id: String,
    method: &'static str,
    /// Where the answer goes; `None` once nobody waits for it any more.
    reply: Option<crossbeam_channel::Sender<Result<Value, RpcError>>>,
}

pub struct Dispatcher {
    pub(super) options: Options,
    /// Providers and models, built on first need and rebuilt by
    /// `authenticate`.
    pub(super) registry: Option<Result<Arc<Registry>, String>>,
    pub(super) writer: Sender<Output>,
    pub(super) events: Sender<Event>,
    pub(super) client: Option<ClientCapabilities>,
    pub(super) sessions: HashMap<String, Session>,
    /// Set once stdin has ended; the loop stops when no turn runs any more
    /// (or, without `--drain`, when the grace period is over).
    pub(super) closing: Option<Option<Instant>>,
    test_hooks: bool,
    /// Requests we sent to the client, by id, with the session that sent
    /// them and where the answer goes.
    pending: HashMap<u64, Pending>,
    next_request_id: u64,
    /// The session database, opened on first use (so a broken database
    /// shows up as clear errors on session requests, not as an agent that
    /// will not start).
    store: Option<Result<Store, String>>,
    pub(super) db_path: PathBuf,
    /// Lines to write right after the current request's answer.
    pub(super) after_response: Vec<String>,
    /// The store and registry being prepared on a helper thread at start-up,
    /// so the first `session/new` does not wait for them.
    warm: Option<Receiver<Warm>>,
}

/// What the start-up helper prepares.
type Warm = (Result<Store, String>, Result<Arc<Registry>, String>);

/// How often the leases of running turns are renewed.
const LEASE_HEARTBEAT: Duration = Duration::from_secs(10);

impl Dispatcher {
    pub fn new(options: Options, writer: Sender<Output>, events: Sender<Event>) -> Dispatcher {
        Dispatcher {
            registry: None,
            writer,
            events,
            client: None,
            sessions: HashMap::new(),
            closing: None,
            test_hooks: std::env::var_os("SPINDLE_TEST_HOOKS").is_some_and(|v| v == "1"),
            pending: HashMap::new(),
            next_request_id: 0,
            store: None,
            db_path: options_db_path(&options),
            warm: None,
            after_response: Vec::new(),
            options,
        }
        .warm_up()
    }

    /// Opens the store and builds the registry on a helper thread: both
    /// touch files (and a local model server may be asked for its models),
    /// which should not delay `initialize` nor make the first `session/new`
    /// wait more than needed.
    fn warm_up(mut self) -> Dispatcher {
        let (sender, receiver) = crossbeam_channel::bounded(1);
        let db_path = self.db_path.clone();
        let options = self.options.clone();
        let spawned = std::thread::Builder::new()
            .name("spindle-warmup".into())
            .spawn(move || {
                let store = Store::open(&db_path).map_err(|error| error.0);
                let registry = Registry::build(&options).map(Arc::new);
                let _ = sender.send((store, registry));
            });
        if spawned.is_ok() {
            self.warm = Some(receiver);
        }
        self
    }

    /// Takes what the start-up helper prepared, waiting for it if needed.
    pub(super) fn take_warm(&mut self) {
        if let Some(receiver) = self.warm.take() {
            if let Ok((store, registry)) = receiver.recv() {
                self.store.get_or_insert(store);
                self.registry.get_or_insert(registry);
            }
        }
    }

    /// The session store, opened on first use.
    pub(super) fn store(&mut self) -> Result<&mut Store, RpcError> {
        self.take_warm();
        let db_path = &self.db_path;
        let store = self
            .store
            .get_or_insert_with(|| Store::open(db_path).map_err(|error| error.0));
        match store {
            Ok(store) => Ok(store),
            Err(message) => {
                Err(RpcError::internal(message.clone())
                    .with_data(json!({"code": "store_unavailable"})))
            }
        }
    }

    /// The model registry; -32000 (authentication required) when no
    /// provider can be used, with what to do about it.
    pub(super) fn registry(&mut self) -> Result<Arc<Registry>, RpcError> {
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
            Err(message) => Err(RpcError::internal(format!(
                "the configuration cannot be used: {message}"
            ))
            .with_data(json!({"code": "config_invalid"}))),
        }
    }

    /// The credentials tools must not see: the registry's when it could be
    /// built, else the standard ones.
    pub(super) fn tool_secrets(&mut self) -> Arc<crate::policy::secrets::Secrets> {
        self.take_warm();
        let options = &self.options;
        let built = self
            .registry
            .get_or_insert_with(|| Registry::build(options).map(Arc::new));
        match built {
            Ok(registry) => registry.secrets.clone(),
            Err(_) => Arc::new(crate::policy::secrets::Secrets::from_config(
                &crate::config::Config::default(),
            )),
        }
    }

    /// Sends the session's slash commands after the current answer.
    pub(super) fn announce_commands(&mut self, session_id: &str) {
        let Some(session) = self.sessions.get(session_id) else {
            return;
        };
        let update = super::commands::update(&super::commands::available(&session.cwd));
        self.after_response.push(rpc::notification_line(
            method::SESSION_UPDATE,
            &json!({"sessionId": session_id, "update": update}),
        ));
    }

    /// Sends an update outside any turn (a mode or config change) and keeps
    /// it in the session's transcript.
    pub(super) fn send_update(&mut self, session_id: &str, update: Value) {
        self.send_line(rpc::notification_line(
            method::SESSION_UPDATE,
            &json!({"sessionId": session_id, "update": update}),
        ));
        if let Ok(store) = self.store() {
            if let Err(error) = store.append_events(session_id, 0, &[update.to_string()]) {
                log::warn!("cannot store an update of session {session_id}: {error}");
            }
        }
    }

    /// Stores a session's settings and makes its choices the workspace's
    /// defaults for new sessions.
    pub(super) fn settings_changed(&mut self, session_id: &str) {
        let Some(session) = self.sessions.get(session_id) else {
            return;
        };
        let settings = session.settings_json();
        let defaults = serde_json::to_value(session.workspace_defaults()).unwrap_or_default();
        let cwd = session.cwd.display().to_string();
        if let Ok(store) = self.store() {
            let saved = store
                .save_settings(session_id, &settings)
                .and_then(|()| store.save_workspace_defaults(&cwd, &defaults));
            if let Err(error) = saved {
                log::warn!("cannot store the settings of session {session_id}: {error}");
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

    pub fn run(mut self, events: &Receiver<Event>) {
        loop {
            if self.closing.is_some() && !self.any_running() {
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
                Event::Input(Input::Eof) => self.on_eof(),
                Event::TurnEnded(end) => self.on_turn_end(end),
                Event::ClientRequest(request) => self.send_client_request(request),
            }
        }
        // No MCP server outlives the agent.
        for session in self.sessions.values_mut() {
            if let Some(mcp) = session.mcp.take() {
                mcp.shutdown();
            }
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

    pub(super) fn send_line(&self, line: String) {
        let _ = self.writer.send(Output::Line(line));
    }

    pub(super) fn respond(&self, id: &RequestId, result: Result<Value, RpcError>) {
        match result {
            Ok(value) => self.send_line(rpc::response_line(id, &value)),
            Err(error) => {
                log::debug!("request {id} failed: {error}");
                self.send_line(rpc::error_line(id, &error));
            }
        }
    }

    /// Sends a turn's request to the client and remembers where the answer
    /// goes. Once stdin has closed nobody can answer: the request is
    /// dropped, which the waiting turn sees as "the client is gone" (a
    /// permission request counts as cancelled).
    pub(super) fn forget_requests_of(&mut self, session_id: &str) {
        // Requests the turn left unanswered (it was cancelled while
        // waiting) lose their receiver; a terminal/create among them is
        // kept, so the terminal it creates can still be released.
        self.pending.retain(|_, pending| {
            pending.session_id != session_id || pending.method == "terminal/create"
        });
        for pending in self.pending.values_mut() {
            if pending.session_id == session_id {
                pending.reply = None;
            }
        }
    }

    fn send_client_request(&mut self, request: OutgoingRequest) {
        if self.closing.is_some() {
            return;
        }
        let id = self.next_request_id;
        self.next_request_id += 1;
        self.send_line(rpc::request_line(
            &json!(id),
            request.method,
            &request.params,
        ));
        self.pending.insert(
            id,
            Pending {
                session_id: request.session_id,
                method: request.method,
                reply: Some(request.reply),
            },
        );
    }

    /// Hands the client's answer to the turn that asked. When nobody waits
    /// any more (the turn was cancelled while the request was out) and the
    /// answer created a terminal, the terminal is killed and released here:
    /// every terminal we create must be released, and its command must not
    /// outlive the cancel.
    fn on_client_answer(&mut self, pending: Pending, result: Result<Value, RpcError>) {
        let result = match pending.reply {
            Some(reply) => match reply.send(result) {
                Ok(()) => return,
                Err(unsent) => unsent.into_inner(),
            },
            None => result,
        };
        if pending.method != "terminal/create" {
            return;
        }
        if let Some(terminal_id) = result.ok().and_then(|r| r.get("terminalId").cloned()) {
            log::debug!("releasing terminal {terminal_id} created after its turn was cancelled");
            let params = json!({"sessionId": pending.session_id, "terminalId": terminal_id});
            for method in ["terminal/kill", "terminal/release"] {
                let (reply, _) = crossbeam_channel::bounded(1);
                self.send_client_request(OutgoingRequest {
                    session_id: pending.session_id.clone(),
                    method,
                    params: params.clone(),
                    reply,
                });
            }
        }
    }

    fn on_eof(&mut self) {
        // Nobody can answer our requests any more: dropping their reply
        // channels tells the waiting turns the client is gone.
        self.pending.clear();
        if self.options.drain {
            log::debug!("stdin closed; draining running turns");
            self.closing = Some(None);
        } else {
            log::debug!("stdin closed; cancelling running turns");
            for session in self.sessions.values() {
                if let Some(running) = &session.running {
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
            Incoming::Response { id, result } => {
                match id.as_u64().and_then(|key| self.pending.remove(&key)) {
                    Some(pending) => self.on_client_answer(pending, result),
                    None => log::warn!("dropped a response to unknown request id {id}"),
                }
            }
            Incoming::Notification { method, params } => self.handle_notification(&method, params),
            Incoming::Request { id, method, params } => {
                let outcome = catch_unwind(AssertUnwindSafe(|| {
                    self.handle_request(&id, &method, params)
                }));
                match outcome {
                    // `None`: the answer comes later (a prompt turn).
                    Ok(None) => {}
                    Ok(Some(result)) => {
                        self.respond(&id, result);
                        // Notifications that must follow the answer (the
                        // client learns a new session's id from it).
                        for line in std::mem::take(&mut self.after_response) {
                            self.send_line(line);
                        }
                    }
                    Err(panic) => {
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

    fn handle_notification(&mut self, method: &str, params: Value) {
        match method {
            method::SESSION_CANCEL => match decode::<acp::CancelNotification>(params) {
                Ok(cancel) => self.cancel_session(&cancel.session_id),
                Err(error) => log::warn!("ignored session/cancel: {error}"),
            },
            method::CANCEL_REQUEST => match decode::<acp::CancelRequestNotification>(params) {
                Ok(cancel) => self.cancel_request(&cancel.request_id),
                Err(error) => log::warn!("ignored $/cancel_request: {error}"),
            },
            other => log::debug!("ignored notification {other}"),
        }
    }

    /// Returns the answer, or `None` when a worker will answer later.
    fn handle_request(
        &mut self,
        id: &RequestId,
        method: &str,
        params: Value,
    ) -> Option<Result<Value, RpcError>> {
        if method == method::INITIALIZE {
            return Some(self.initialize(params));
        }
        if self.client.is_none() {
            return Some(Err(RpcError::invalid_request(format!(
                "{method} was sent before initialize; send initialize first"
            ))));
        }
        match method {
            method::AUTHENTICATE => Some(self.authenticate(params)),
            method::SESSION_SET_MODE => Some(self.set_mode(params)),
            method::SESSION_SET_CONFIG_OPTION => Some(self.set_config_option(params)),
            method::SESSION_NEW => Some(self.new_session(params)),
            method::SESSION_LOAD => Some(self.load_session(params, true)),
            method::SESSION_RESUME => Some(self.load_session(params, false)),
            method::SESSION_LIST => Some(self.list_sessions(params)),
            method::SESSION_CLOSE => Some(self.close_session(params)),
            method::SESSION_DELETE => Some(self.delete_session(params)),
            method::SESSION_PROMPT => self.prompt(id, params).err().map(Err),
            "_spindle/test/panic" if self.test_hooks => panic!("test hook asked for a panic"),
            other => Some(Err(RpcError::method_not_found(other))),
        }
    }

    pub(super) fn cancel_session(&mut self, session_id: &str) {
        match self.sessions.get(session_id) {
            Some(Session {
                running: Some(running),
                ..
            }) => {
                log::debug!("cancelling the turn of session {session_id}");
                running.cancel.cancel();
            }
            Some(_) => log::debug!("session/cancel for {session_id}: no turn is running"),
            None => log::warn!("session/cancel for unknown session {session_id}"),
        }
    }

    fn cancel_request(&mut self, request_id: &Value) {
        // Only prompts outlive their request handler, so only they can be
        // cancelled this way; the answer is still `cancelled`, as for
        // session/cancel.
        for session in self.sessions.values() {
            if let Some(running) = &session.running {
                if &running.request_id == request_id {
                    running.cancel.cancel();
                }
            }
        }
    }
}

/// Decodes params into a handler's type; the error names the offending
/// field, so a person can fix the request.
pub(super) fn decode<T: DeserializeOwned>(params: Value) -> Result<T, RpcError> {
    T::deserialize(&params).map_err(|err| RpcError::invalid_params(describe::<T>(&err, &params)))
}

/// serde reports a wrong type without saying where. Removing one top-level
/// field at a time finds it: the field whose removal turns the error into
/// "missing field" is the one that was wrong.
fn describe<T: DeserializeOwned>(err: &serde_json::Error, params: &Value) -> String {
    let text = err.to_string();
    if let Value::Object(map) = params {
        if !text.starts_with("missing field") {
            for key in map.keys() {
                let mut without = map.clone();
                without.remove(key);
                if let Err(other) = T::deserialize(&Value::Object(without)) {
                    if other.to_string() == format!("missing field `{key}`") {
                        return format!("field `{key}`: {text}");
                    }
                }
            }
        }
    }
    text
}

fn options_db_path(options: &Options) -> PathBuf {
    options
        .db
        .clone()
        .unwrap_or_else(crate::store::default_path)
}

pub(super) fn check_cwd(cwd: &str) -> Result<PathBuf, RpcError> {
    let path = Path::new(cwd);
    if !path.is_absolute() {
        return Err(RpcError::invalid_params(format!(
            "cwd must be an absolute path, got {cwd:?}"
        )));
    }
    match std::fs::metadata(path) {
        Ok(meta) if meta.is_dir() => Ok(path.to_path_buf()),
        Ok(_) => Err(RpcError::invalid_params(format!(
            "cwd {cwd:?} is not a directory"
        ))),
        Err(err) => Err(RpcError::invalid_params(format!(
            "cwd {cwd:?} cannot be used: {err}"
        ))),
    }
}

fn panic_text(panic: &Box<dyn std::any::Any + Send>) -> String {
    panic
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_else(|| "unknown cause".to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cwd_must_be_an_absolute_directory() {
        assert!(check_cwd("relative/dir").is_err());
        assert!(check_cwd("/definitely/not/here/spindle").is_err());
        assert!(check_cwd(&std::env::temp_dir().display().to_string()).is_ok());
    }
}

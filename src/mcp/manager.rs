//! The MCP servers of one ACP session.
//!
//! Every server starts on its own thread (`spindle-mcp-<name>`), so a slow
//! one does not hold up the others or the session: `start` returns when all
//! are ready or its wait is over, and late servers add their tools once they
//! are up. A server that cannot start, or that crashes and cannot be
//! brought back, has its tools withdrawn and is reported once through
//! `take_failures`.
//!
//! A crashed server (its connection is gone) is restarted at most once per
//! turn, and the call that found it dead is retried once on the new
//! connection. A second crash in the same turn is a failure.

use super::client::Client;
use super::config::ServerConfig;
use super::elicit::Elicitor;
use super::{unique_name, CallResult, McpError, McpErrorKind, McpTool, CALL_TIMEOUT, INIT_TIMEOUT};
use crate::cancel::{lock, CancelToken};
use serde_json::Value;
use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

/// The MCP servers of one session; shared as `Arc` between the session
/// owner and its turn workers.
pub(crate) struct McpSession {
    slots: Vec<Arc<Slot>>,
    shared: Arc<Shared>,
    /// Exposed name → (slot index, original tool name), as last listed.
    index: Mutex<HashMap<String, (usize, String)>>,
    /// The start-up threads, so `shutdown` can wait for those still
    /// handshaking to stop their servers (no orphan outlives the agent).
    starters: Mutex<Vec<thread::JoinHandle<()>>>,
}

/// State shared with the start-up threads.
struct Shared {
    failures: Mutex<Vec<(String, McpError)>>,
    /// The last failure of each server, for status.
    errors: Mutex<HashMap<String, String>>,
    /// Fired by `shutdown`: abandons handshakes still running.
    stop: CancelToken,
}

impl Shared {
    fn report(&self, server: &str, reason: McpError) {
        log::warn!("MCP server `{server}` failed: {reason}");
        lock(&self.errors).insert(server.to_string(), reason.message.clone());
        lock(&self.failures).push((server.to_string(), reason));
    }
}

/// One configured server.
struct Slot {
    config: ServerConfig,
    state: Mutex<State>,
    /// Held while a crashed server is being restarted.
    restarting: Mutex<()>,
    /// The restart of this turn is used up.
    restarted: AtomicBool,
}

enum State {
    Starting,
    Ready(Arc<Client>),
    /// Withdrawn: it failed and was reported.
    Failed,
    Stopped,
}

impl Slot {
    fn client(&self) -> Option<Arc<Client>> {
        match &*lock(&self.state) {
            State::Ready(client) => Some(client.clone()),
            _ => None,
        }
    }

    /// Puts a new client in place; refused (and the client shut down) when
    /// the session has stopped meanwhile.
    fn install(&self, client: Arc<Client>) -> bool {
        let mut state = lock(&self.state);
        if matches!(*state, State::Stopped) {
            drop(state);
            client.shutdown();
            return false;
        }
        let old = std::mem::replace(&mut *state, State::Ready(client));
        drop(state);
        if let State::Ready(old) = old {
            old.shutdown();
        }
        true
    }

    /// Withdraws the server; true when it was not already withdrawn.
    fn withdraw(&self) -> bool {
        let mut state = lock(&self.state);
        let old = match *state {
            State::Stopped | State::Failed => return false,
            _ => std::mem::replace(&mut *state, State::Failed),
        };
        drop(state);
        if let State::Ready(old) = old {
            old.shutdown();
        }
        true
    }
}

impl McpSession {
    /// Starts every server on its own thread and waits until all are ready
    /// (or failed) or `wait` has passed; the others keep starting in the
    /// background.
    pub(crate) fn start(configs: Vec<ServerConfig>, wait: Duration) -> Arc<McpSession> {
        let session = Arc::new(McpSession {
            slots: configs
                .into_iter()
                .map(|config| {
                    Arc::new(Slot {
                        config,
                        state: Mutex::new(State::Starting),
                        restarting: Mutex::new(()),
                        restarted: AtomicBool::new(false),
                    })
                })
                .collect(),
            shared: Arc::new(Shared {
                failures: Mutex::new(Vec::new()),
                errors: Mutex::new(HashMap::new()),
                stop: CancelToken::new(),
            }),
            index: Mutex::new(HashMap::new()),
            starters: Mutex::new(Vec::new()),
        });
        let deadline = Instant::now() + wait;
        let (done_sender, done) = crossbeam_channel::unbounded::<()>();
        let mut started = 0;
        for slot in &session.slots {
            let worker = slot.clone();
            let shared = session.shared.clone();
            let done_sender = done_sender.clone();
            let spawned = thread::Builder::new()
                .name(thread_name(&slot.config.name))
                .spawn(move || {
                    let stop = &shared.stop;
                    match Client::connect_with(&worker.config, INIT_TIMEOUT, &[stop]) {
                        Ok(client) => {
                            worker.install(Arc::new(client));
                        }
                        Err(err) => {
                            if worker.withdraw() && !stop.is_cancelled() {
                                shared.report(&worker.config.name, err);
                            }
                        }
                    }
                    let _ = done_sender.send(());
                });
            match spawned {
                Ok(handle) => {
                    lock(&session.starters).push(handle);
                    started += 1;
                }
                Err(err) => {
                    slot.withdraw();
                    let reason = McpError::new(format!("cannot start a thread: {err}"));
                    session.shared.report(&slot.config.name, reason);
                }
            }
        }
        drop(done_sender);
        for _ in 0..started {
            if done.recv_deadline(deadline).is_err() {
                break;
            }
        }
        session
    }

    /// The URL of Streamable HTTP server `name` and the file its tokens
    /// go in, when it may be signed in to (Spindle keeps tokens for the
    /// session's servers).
    pub(crate) fn sign_in_target(&self, name: &str) -> Option<(String, std::path::PathBuf)> {
        let slot = self.slots.iter().find(|slot| slot.config.name == name)?;
        match (&slot.config.transport, &slot.config.tokens) {
            (super::TransportConfig::Http { url, .. }, Some(dir)) => {
                let file = super::oauth::store::token_file(dir, name)?;
                Some((url.clone(), file))
            }
            _ => None,
        }
    }

    /// Fired when the session's servers are shut down.
    pub(crate) fn stopped(&self) -> CancelToken {
        self.shared.stop.clone()
    }

    /// Starts withdrawn server `name` again (after a sign-in), on the
    /// caller's thread; true when it is ready. A server not withdrawn is
    /// left as it is. A shutdown meanwhile abandons the handshake, and a
    /// client that arrives after it is shut down at once.
    pub(crate) fn reconnect(&self, name: &str) -> bool {
        let Some(slot) = self.slots.iter().find(|slot| slot.config.name == name) else {
            return false;
        };
        {
            let mut state = lock(&slot.state);
            if !matches!(*state, State::Failed) {
                return false;
            }
            *state = State::Starting;
        }
        let stop = &self.shared.stop;
        match Client::connect_with(&slot.config, INIT_TIMEOUT, &[stop]) {
            Ok(client) => {
                lock(&self.shared.errors).remove(name);
                slot.install(Arc::new(client))
            }
            Err(err) => {
                if slot.withdraw() && !stop.is_cancelled() {
                    self.shared.report(name, err);
                }
                false
            }
        }
    }

    /// The tools of the servers that are ready, relisted first for any
    /// server that said its tools changed. Names are unique across the
    /// session and stay the same while the tool lists do.
    pub(crate) fn tools(&self) -> Vec<McpTool> {
        self.build_index(true)
    }

    /// The failures not reported yet: servers that could not start, and
    /// servers that crashed beyond recovery. Each is returned once.
    pub(crate) fn take_failures(&self) -> Vec<(String, McpError)> {
        std::mem::take(&mut *lock(&self.shared.failures))
    }

    /// Starts a turn: each server may be restarted once again.
    pub(crate) fn begin_turn(&self) {
        for slot in &self.slots {
            slot.restarted.store(false, Ordering::SeqCst);
        }
    }

    /// Finds the tool the model knows as `exposed_name`.
    pub(crate) fn find(&self, exposed_name: &str) -> Option<McpTool> {
        let (index, name) = self.lookup(exposed_name)?;
        let client = self.slots[index].client()?;
        let mut tool = client.tools().into_iter().find(|tool| tool.name == name)?;
        tool.exposed_name = exposed_name.to_string();
        Some(tool)
    }

    /// Each server's state for a status snapshot: name, state, how many
    /// tools it offers, and its last error.
    pub(crate) fn status(&self) -> Vec<Value> {
        let errors = lock(&self.shared.errors).clone();
        self.slots
            .iter()
            .map(|slot| {
                let (state, tools) = match &*lock(&slot.state) {
                    State::Starting => ("starting", 0),
                    State::Ready(client) => ("ready", client.tools().len()),
                    State::Failed => ("failed", 0),
                    State::Stopped => ("stopped", 0),
                };
                serde_json::json!({
                    "name": slot.config.name,
                    "state": state,
                    "tools": tools,
                    "lastError": errors.get(&slot.config.name),
                })
            })
            .collect()
    }

    /// The names of all configured servers, in configuration order.
    #[cfg(test)]
    pub(crate) fn server_names(&self) -> Vec<String> {
        self.slots
            .iter()
            .map(|slot| slot.config.name.clone())
            .collect()
    }

    #[cfg(test)]
    /// Calls a tool (timeout [`CALL_TIMEOUT`]). A crashed server is
    /// restarted once per turn and the call retried once; see the module
    /// documentation.
    pub(crate) fn call(
        &self,
        exposed_name: &str,
        arguments: Value,
        cancel: &CancelToken,
    ) -> Result<CallResult, McpError> {
        self.call_asking(exposed_name, arguments, cancel, None)
    }

    /// `call`, with the server's questions during the call put to the
    /// user through `elicitor` (see [`Client::call_asking`]).
    pub(crate) fn call_asking(
        &self,
        exposed_name: &str,
        arguments: Value,
        cancel: &CancelToken,
        elicitor: Option<&dyn Elicitor>,
    ) -> Result<CallResult, McpError> {
        let (index, tool) = self
            .lookup(exposed_name)
            .ok_or_else(|| McpError::new(format!("there is no MCP tool `{exposed_name}`")))?;
        let slot = &self.slots[index];
        let server = slot.config.name.as_str();
        let client = slot
            .client()
            .ok_or_else(|| McpError::new(format!("MCP server `{server}` is not available")))?;
        let err = match client.call_asking(&tool, arguments.clone(), cancel, CALL_TIMEOUT, elicitor)
        {
            Ok(result) => return Ok(result),
            Err(err) if cancel.is_cancelled() || client.is_alive() => return Err(err),
            Err(err) => err,
        };
        log::warn!("MCP server `{server}` crashed during a call: {err}");
        let fresh = self.revive(slot, &client, cancel, &err)?;
        match fresh.call_asking(&tool, arguments, cancel, CALL_TIMEOUT, elicitor) {
            Err(again) if !cancel.is_cancelled() && !fresh.is_alive() => {
                if slot.withdraw() {
                    self.shared.report(
                        server,
                        McpError::of(
                            McpErrorKind::Closed,
                            format!(
                                "it crashed again after a restart ({again}); its tools are withdrawn"
                            ),
                        ),
                    );
                }
                Err(again)
            }
            outcome => outcome,
        }
    }

    /// Stops every server (in parallel) and abandons those still starting.
    pub(crate) fn shutdown(&self) {
        self.shared.stop.cancel();
        let clients: Vec<Arc<Client>> = self
            .slots
            .iter()
            .filter_map(
                |slot| match std::mem::replace(&mut *lock(&slot.state), State::Stopped) {
                    State::Ready(client) => Some(client),
                    _ => None,
                },
            )
            .collect();
        thread::scope(|scope| {
            for client in &clients {
                scope.spawn(|| client.shutdown());
            }
        });
        // Handshakes still running see the stop and kill their server;
        // wait (briefly) until they have.
        let deadline = Instant::now() + Duration::from_secs(2);
        for starter in std::mem::take(&mut *lock(&self.starters)) {
            while !starter.is_finished() && Instant::now() < deadline {
                thread::sleep(Duration::from_millis(5));
            }
            if starter.is_finished() {
                let _ = starter.join();
            }
        }
    }

    /// Brings a crashed server back, or withdraws it. `dead` is the client
    /// that failed; another caller may have replaced it already.
    fn revive(
        &self,
        slot: &Slot,
        dead: &Arc<Client>,
        cancel: &CancelToken,
        err: &McpError,
    ) -> Result<Arc<Client>, McpError> {
        let server = slot.config.name.as_str();
        let _restarting = lock(&slot.restarting);
        match slot.client() {
            Some(current) if !Arc::ptr_eq(&current, dead) && current.is_alive() => {
                return Ok(current)
            }
            None => {
                return Err(McpError::new(format!(
                    "MCP server `{server}` is not available"
                )))
            }
            Some(_) => {}
        }
        if slot.restarted.swap(true, Ordering::SeqCst) {
            if slot.withdraw() {
                self.shared.report(
                    server,
                    McpError::of(
                        McpErrorKind::Closed,
                        format!(
                            "it crashed again in the same turn ({err}); its tools are withdrawn"
                        ),
                    ),
                );
            }
            return Err(err.clone());
        }
        match Client::connect_with(&slot.config, INIT_TIMEOUT, &[&self.shared.stop, cancel]) {
            Ok(client) => {
                let client = Arc::new(client);
                if slot.install(client.clone()) {
                    log::info!("MCP server `{server}` was restarted after a crash");
                    Ok(client)
                } else {
                    Err(McpError::new(format!(
                        "MCP server `{server}` was shut down"
                    )))
                }
            }
            Err(restart) if cancel.is_cancelled() => Err(restart),
            Err(restart) => {
                if slot.withdraw() {
                    self.shared.report(
                        server,
                        McpError::of(
                            McpErrorKind::Closed,
                            format!(
                                "it crashed ({err}) and could not be restarted ({restart}); its tools are withdrawn"
                            ),
                        ),
                    );
                }
                Err(err.clone())
            }
        }
    }

    fn lookup(&self, exposed_name: &str) -> Option<(usize, String)> {
        if let Some(found) = lock(&self.index).get(exposed_name) {
            return Some(found.clone());
        }
        // The tools may not have been listed yet, or a server came up since.
        self.build_index(false);
        lock(&self.index).get(exposed_name).cloned()
    }

    /// Lists the tools of the ready servers and records their exposed
    /// names; with `refresh`, relists the servers whose tools changed.
    fn build_index(&self, refresh: bool) -> Vec<McpTool> {
        let mut tools = Vec::new();
        let mut taken = HashSet::new();
        let mut index = HashMap::new();
        for (position, slot) in self.slots.iter().enumerate() {
            let Some(client) = slot.client() else {
                continue;
            };
            if refresh && client.tools_changed() {
                if let Err(err) = client.refresh_tools() {
                    log::warn!(
                        "relisting the tools of MCP server `{}`: {err}",
                        client.name()
                    );
                }
            }
            for mut tool in client.tools() {
                tool.exposed_name = unique_name(&tool.exposed_name, &mut taken);
                index.insert(tool.exposed_name.clone(), (position, tool.name.clone()));
                tools.push(tool);
            }
        }
        *lock(&self.index) = index;
        tools
    }
}

impl Drop for McpSession {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// `spindle-mcp-<name>`, with characters a thread name cannot hold
/// replaced.
fn thread_name(server: &str) -> String {
    let clean: String = server
        .chars()
        .map(|c| if c.is_control() { '_' } else { c })
        .take(48)
        .collect();
    format!("spindle-mcp-{clean}")
}

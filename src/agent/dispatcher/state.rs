//! The methods handlers reach the dispatcher's state through: its fields
//! are private to `dispatcher/`, so what a handler may read or change of
//! it is listed here.

use super::{Dispatcher, Event, Session};
use crate::acp::ClientCapabilities;
use crate::agent::common::models::Registry;
use crate::agent::common::options::Options;
use crate::rpc::stdio::Queued;
use crossbeam_channel::Sender;
use std::sync::Arc;

impl Dispatcher {
    /// An open session of this process.
    pub(in crate::agent) fn session(&self, id: &str) -> Option<&Session> {
        self.sessions.get(id)
    }

    pub(in crate::agent) fn session_mut(&mut self, id: &str) -> Option<&mut Session> {
        self.sessions.get_mut(id)
    }

    /// A session the request's params were checked to name
    /// (`ext_params`); one that is not open is a bug, and panics (the
    /// request is then answered -32603).
    pub(in crate::agent) fn checked(&self, id: &str) -> &Session {
        &self.sessions[id]
    }

    pub(in crate::agent) fn has_session(&self, id: &str) -> bool {
        self.sessions.contains_key(id)
    }

    pub(in crate::agent) fn insert_session(&mut self, id: String, session: Session) {
        self.sessions.insert(id, session);
    }

    pub(in crate::agent) fn remove_session(&mut self, id: &str) -> Option<Session> {
        self.sessions.remove(id)
    }

    /// The ids of the open sessions.
    pub(in crate::agent) fn session_ids(&self) -> Vec<String> {
        self.sessions.keys().cloned().collect()
    }

    /// The open sessions, by id.
    pub(in crate::agent) fn sessions(&self) -> impl Iterator<Item = (&String, &Session)> {
        self.sessions.iter()
    }

    /// The options the agent started with (or a reload reread).
    pub(in crate::agent) fn options(&self) -> &Options {
        &self.options
    }

    /// Takes options a reload reread.
    pub(in crate::agent) fn set_options(&mut self, options: Options) {
        self.options = options;
    }

    /// Takes a registry a reload built.
    pub(in crate::agent) fn set_registry(&mut self, registry: Arc<Registry>) {
        self.registry = Some(Ok(registry));
    }

    /// Forgets the registry: the next need builds it again.
    pub(in crate::agent) fn forget_registry(&mut self) {
        self.registry = None;
    }

    /// The registry if it is built and could be, without building it.
    pub(in crate::agent) fn built_registry(&self) -> Option<&Arc<Registry>> {
        match &self.registry {
            Some(Ok(registry)) => Some(registry),
            _ => None,
        }
    }

    /// What the client said it can do in `initialize` (`None` before).
    pub(in crate::agent) fn client(&self) -> Option<&ClientCapabilities> {
        self.client.as_ref()
    }

    pub(in crate::agent) fn set_client(&mut self, client: ClientCapabilities) {
        self.client = Some(client);
    }

    /// What the client can do, as nothing before `initialize`.
    pub(in crate::agent) fn capabilities(&self) -> ClientCapabilities {
        self.client.clone().unwrap_or_default()
    }

    /// Whether stdin has ended.
    pub(in crate::agent) fn closing(&self) -> bool {
        self.closing.is_some()
    }

    /// Whether the test hooks are on (`SPINDLE_TEST_HOOKS=1`).
    pub(in crate::agent) fn test_hooks(&self) -> bool {
        self.test_hooks
    }

    /// The session database's path.
    pub(in crate::agent) fn db_path(&self) -> &std::path::Path {
        &self.db_path
    }

    /// A line to write right after the current request's answer.
    pub(in crate::agent) fn follow_answer(&mut self, line: String) {
        self.after_response.push(line);
    }

    /// A session whose waiting turn goes on after the current answer.
    pub(in crate::agent) fn resume_after_answer(&mut self, session_id: String) {
        self.waits_to_resume.push(session_id);
    }

    /// The dispatcher's event channel, for a helper to post to.
    pub(in crate::agent) fn events(&self) -> Sender<Event> {
        self.events.clone()
    }

    /// The bounded queue a turn streams its updates through.
    pub(in crate::agent) fn stream_writer(&self) -> Sender<Queued> {
        self.stream_writer.clone()
    }

    /// How many files are being indexed for windows.
    pub(in crate::agent) fn indexing(&self) -> &Arc<std::sync::atomic::AtomicUsize> {
        &self.indexing
    }

    /// Keeps a `SessionEnd` hook's thread, waited for at the end.
    pub(in crate::agent) fn keep_ending(&mut self, handle: std::thread::JoinHandle<()>) {
        self.ending.push(handle);
    }

    /// The `SessionEnd` hooks' threads, to wait for.
    pub(in crate::agent) fn take_ending(&mut self) -> Vec<std::thread::JoinHandle<()>> {
        std::mem::take(&mut self.ending)
    }
}

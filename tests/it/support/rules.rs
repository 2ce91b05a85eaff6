//! Rules of the protocol that the schema cannot see, because they depend
//! on what the client said earlier on the connection. The agent harness
//! feeds every message the test sends (`on_sent`) and every line the agent
//! writes (`on_received`, in stdout order) through one `Rules`; a broken
//! rule makes the line invalid, so it fails the test like a line that
//! breaks the schema.
//!
//! - Opt-in updates: a `notice` goes only to a client that advertised
//!   `clientCapabilities.session.notices` (or Spindle's older opt-in
//!   `_meta.spindle.notices`); `compaction_update` and
//!   `compaction_summary_chunk` only to one with `session.compaction`.
//!   Both are in the stable schema now, so it no longer catches them.
//! - No update before its session is the client's: a `session/update`
//!   names a session the client learnt from the answer to its
//!   `session/new`, `session/fork` or `session/resume`, one it asked to
//!   `session/load` (the load's replay comes before its answer, as the
//!   protocol says), one it named in any other request (a session kept
//!   from an earlier process, prompted directly), or a child that a
//!   `subagent_update` announced on a session it knows. A client learns
//!   a new session's id only from the answer, and Zed drops updates that
//!   come before it (zed-industries/zed#60199).

use serde_json::Value;
use std::collections::{HashMap, HashSet};

#[derive(Debug, Default)]
pub struct Rules {
    /// The client takes `notice` updates.
    notices: bool,
    /// The client takes the compaction updates.
    compaction: bool,
    /// The sessions the client may get updates for.
    known: HashSet<String>,
    /// The requests that open a session, not answered yet, by the
    /// canonical JSON of their id: the method, and the session a resume
    /// names.
    opening: HashMap<String, (String, Option<String>)>,
}

/// The methods whose answer gives the client a session.
const OPENING: [&str; 3] = ["session/new", "session/fork", "session/resume"];

impl Rules {
    /// A message the test sends to the agent.
    pub fn on_sent(&mut self, message: &Value) {
        if message["method"] == "initialize" && message.get("id").is_some() {
            let capabilities = &message["params"]["clientCapabilities"];
            self.notices = capabilities["session"]["notices"].is_object()
                || capabilities["_meta"]["spindle"]["notices"] == true;
            self.compaction = capabilities["session"]["compaction"].is_object();
        }
        let method = message["method"].as_str().unwrap_or_default();
        let session = message["params"]["sessionId"].as_str().map(str::to_string);
        match message.get("id") {
            Some(id) if OPENING.contains(&method) => {
                let resumed = session.filter(|_| method == "session/resume");
                self.opening
                    .insert(id.to_string(), (method.to_string(), resumed));
            }
            _ => self.known.extend(session),
        }
    }

    /// A message the agent wrote (already valid by the schema); `Err`
    /// says which rule it breaks.
    pub fn on_received(&mut self, message: &Value) -> Result<(), String> {
        if message["method"] == "session/update" {
            self.check_update(&message["params"])?;
        }
        if message.get("method").is_none() {
            let opened = message
                .get("id")
                .and_then(|id| self.opening.remove(&id.to_string()));
            if let (Some((method, resumed)), Some(result)) = (opened, message.get("result")) {
                let session = match method.as_str() {
                    "session/resume" => resumed,
                    _ => result["sessionId"].as_str().map(str::to_string),
                };
                self.known.extend(session);
            }
        }
        Ok(())
    }

    fn check_update(&mut self, params: &Value) -> Result<(), String> {
        let session = params["sessionId"].as_str().unwrap_or_default();
        if !self.known.contains(session) {
            return Err(format!(
                "a session/update for session {session:?} before the client learnt that \
                 session: before the answer to the session/new, session/fork or \
                 session/resume that opens it (and not loaded, named in another \
                 request or announced by a subagent_update)"
            ));
        }
        if params["update"]["sessionUpdate"] == "subagent_update" {
            if let Some(child) = params["update"]["sessionId"].as_str() {
                self.known.insert(child.to_string());
            }
        }
        match params["update"]["sessionUpdate"].as_str() {
            Some("notice") if !self.notices => {
                Err("a `notice` update to a client that advertised neither \
                 clientCapabilities.session.notices nor _meta.spindle.notices"
                    .into())
            }
            Some(kind @ ("compaction_update" | "compaction_summary_chunk")) if !self.compaction => {
                Err(format!(
                    "a `{kind}` update to a client that did not advertise \
                     clientCapabilities.session.compaction"
                ))
            }
            _ => Ok(()),
        }
    }
}

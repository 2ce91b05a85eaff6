//! The requests Spindle sent to the client (permissions, files, terminals)
//! and are waiting for: their ids come from one counter, and each answer
//! goes back to the turn that asked. A late answer to a request nobody
//! waits for is dropped, except a created terminal, which is cleaned up.

use crate::agent::turn::report::OutgoingRequest;
use crate::rpc::{self, RequestId, RpcError};
use crossbeam_channel::Sender;
use serde_json::{json, Value};
use std::collections::HashMap;

/// A request we sent to the client and whose answer has not come yet.
struct Pending {
    session_id: String,
    method: &'static str,
    /// Where the answer goes; `None` once nobody waits for it any more.
    reply: Option<Sender<Result<Value, RpcError>>>,
    /// Outlives the turn that sent it.
    lasting: bool,
}

/// The table of pending requests, by id.
#[derive(Default)]
pub(super) struct Outgoing {
    pending: HashMap<u64, Pending>,
    next_id: u64,
}

impl Outgoing {
    /// Takes a turn's request under a new id; returns the line to write.
    pub(super) fn register(&mut self, request: OutgoingRequest) -> String {
        let id = self.next_id;
        self.next_id += 1;
        let line = rpc::request_line(&json!(id), request.method, &request.params);
        self.pending.insert(
            id,
            Pending {
                session_id: request.session_id,
                method: request.method,
                reply: Some(request.reply),
                lasting: request.lasting,
            },
        );
        line
    }

    /// Hands the client's answer to the turn that asked; `None` for an
    /// unknown id. When nobody waits any more (the turn was cancelled
    /// while the request was out) and the answer created a terminal, the
    /// requests that kill and release it are returned: every terminal we
    /// create must be released, and its command must not outlive the
    /// cancel.
    pub(super) fn answer(
        &mut self,
        id: &RequestId,
        result: Result<Value, RpcError>,
    ) -> Option<Vec<OutgoingRequest>> {
        let pending = id.as_u64().and_then(|key| self.pending.remove(&key))?;
        let result = match pending.reply {
            Some(reply) => match reply.send(result) {
                Ok(()) => return Some(Vec::new()),
                Err(unsent) => unsent.into_inner(),
            },
            None => result,
        };
        if pending.method != "terminal/create" {
            return Some(Vec::new());
        }
        let Some(terminal_id) = result.ok().and_then(|r| r.get("terminalId").cloned()) else {
            return Some(Vec::new());
        };
        log::debug!("releasing terminal {terminal_id} created after its turn was cancelled");
        let params = json!({"sessionId": pending.session_id, "terminalId": terminal_id});
        let clean_up = ["terminal/kill", "terminal/release"]
            .into_iter()
            .map(|method| {
                let (reply, _) = crossbeam_channel::bounded(1);
                OutgoingRequest {
                    session_id: pending.session_id.clone(),
                    method,
                    params: params.clone(),
                    reply,
                    lasting: false,
                }
            })
            .collect();
        Some(clean_up)
    }

    /// Requests a finished turn left unanswered (it was cancelled while
    /// waiting) lose their receiver; a terminal/create among them is kept,
    /// so the terminal it creates can still be released.
    pub(super) fn forget_session(&mut self, session_id: &str) {
        self.pending.retain(|_, pending| {
            pending.session_id != session_id
                || pending.lasting
                || pending.method == "terminal/create"
        });
        for pending in self.pending.values_mut() {
            if pending.session_id == session_id && !pending.lasting {
                pending.reply = None;
            }
        }
    }

    /// Nobody can answer any more (stdin closed): dropping the reply
    /// channels tells the waiting turns the client is gone.
    pub(super) fn clear(&mut self) {
        self.pending.clear();
    }
}

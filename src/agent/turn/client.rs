//! Requests from a turn to the client (permissions, files, terminals).
//!
//! The worker never writes requests itself: it hands them to the
//! dispatcher, which owns the id counter and the table of pending requests,
//! and routes the client's answer back on a one-shot channel. Waiting always
//! races the turn's cancel signal, so a client that never answers cannot
//! hold a cancelled turn.

use super::report::{Outbox, OutgoingRequest, Report};
use crate::acp::ClientCapabilities;
use crate::cancel::CancelToken;
use crate::rpc::RpcError;
use crossbeam_channel::select;
use serde_json::Value;
use std::path::Path;

/// Why a client request gave no result.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum ClientError {
    /// The turn was cancelled while waiting.
    Cancelled,
    /// The client answered with an error.
    Rpc(RpcError),
    /// The agent is shutting down or the client is gone.
    Gone,
}

impl std::fmt::Display for ClientError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ClientError::Cancelled => write!(f, "cancelled"),
            ClientError::Rpc(error) => write!(f, "the editor answered: {}", error.message),
            ClientError::Gone => write!(f, "the editor is gone"),
        }
    }
}

/// A turn's handle on the client.
#[derive(Clone)]
pub(crate) struct Client {
    pub session_id: String,
    pub capabilities: ClientCapabilities,
    outbox: Outbox,
    cancel: CancelToken,
    /// A subagent's handle: its permission requests carry the parent's
    /// tool call (`_meta.spindle.parentToolCallId`).
    pub parent: Option<String>,
    /// A subagent's child session key: a client that takes subagents
    /// gets its requests on the child session (`acp::fit::route`).
    pub child: Option<String>,
    /// Its requests are not the turn's (a subagent running as a job):
    /// kept when the turn ends.
    pub lasting: bool,
}

impl Client {
    pub(crate) fn new(
        session_id: String,
        capabilities: ClientCapabilities,
        outbox: Outbox,
        cancel: CancelToken,
    ) -> Client {
        Client {
            session_id,
            capabilities,
            outbox,
            cancel,
            parent: None,
            child: None,
            lasting: false,
        }
    }

    /// The same client, its waits racing another cancel (a subagent
    /// running as a job stops with the job, not with the turn).
    pub(crate) fn with_cancel(&self, cancel: CancelToken) -> Client {
        Client {
            cancel,
            ..self.clone()
        }
    }

    /// A permission request's tool call as this client takes it
    /// (`acp::fit`), with the parent's mark on a subagent's, and the
    /// nested tool call id on a subagent's elicitation tied to a tool call.
    fn marked(&self, method: &str, mut params: Value) -> Value {
        if method == "session/request_permission" && params["toolCall"].is_object() {
            crate::acp::fit::fit_tool_call(&mut params["toolCall"], &self.capabilities);
        }
        if let (Some(key), true) = (&self.child, self.capabilities.subagents) {
            if params["sessionId"].is_string() {
                params["sessionId"] =
                    serde_json::json!(crate::acp::fit::child_session_id(&self.session_id, key));
            }
        }
        if let (Some(parent), "elicitation/create") = (&self.parent, method) {
            if let Some(id) = params["toolCallId"].as_str() {
                params["toolCallId"] = serde_json::json!(super::updates::nested_id(parent, id));
            }
        }
        if let (Some(parent), "session/request_permission") = (&self.parent, method) {
            if params["toolCall"].is_object() {
                // On the child's own session the mark says nothing more.
                if self.child.is_none() || !self.capabilities.subagents {
                    params["toolCall"]["_meta"] = super::updates::parent_meta(parent);
                }
                if let Some(id) = params["toolCall"]["toolCallId"].as_str() {
                    params["toolCall"]["toolCallId"] =
                        serde_json::json!(super::updates::nested_id(parent, id));
                }
            }
        }
        params
    }

    /// Sends a request and waits for its answer or the turn's cancel.
    /// Tells the dispatcher something besides a request (false when it is
    /// gone).
    pub(crate) fn report(&self, report: Report) -> bool {
        (self.outbox)(report)
    }

    /// Hands a request to the dispatcher; the channel its answer comes on.
    fn send(
        &self,
        method: &'static str,
        params: Value,
    ) -> Result<crossbeam_channel::Receiver<Result<Value, crate::rpc::RpcError>>, ClientError> {
        let (reply, answer) = crossbeam_channel::bounded(1);
        let request = OutgoingRequest {
            session_id: self.session_id.clone(),
            method,
            params: self.marked(method, params),
            reply,
            lasting: self.lasting,
        };
        if !(self.outbox)(Report::Request(request)) {
            return Err(ClientError::Gone);
        }
        Ok(answer)
    }

    pub(crate) fn request(
        &self,
        method: &'static str,
        params: Value,
    ) -> Result<Value, ClientError> {
        self.request_with(method, params, &self.cancel)
    }

    /// Like `request`, but waits on another cancel signal (used to stop
    /// waiting for a terminal at its timeout).
    pub(crate) fn request_with(
        &self,
        method: &'static str,
        params: Value,
        cancel: &CancelToken,
    ) -> Result<Value, ClientError> {
        if cancel.is_cancelled() {
            return Err(ClientError::Cancelled);
        }
        let answer = self.send(method, params)?;
        select! {
            recv(answer) -> result => match result {
                Ok(Ok(value)) => Ok(value),
                Ok(Err(error)) => Err(ClientError::Rpc(error)),
                Err(_) => Err(ClientError::Gone),
            },
            recv(cancel.signal()) -> _ => Err(ClientError::Cancelled),
        }
    }

    /// Like `request`, but also stops at any of `stops` or at `deadline`,
    /// which give `Cancelled` too (an MCP server's question: its tool call
    /// may be cancelled, withdrawn or time out).
    pub(crate) fn request_until(
        &self,
        method: &'static str,
        params: Value,
        stops: &[&CancelToken],
        deadline: std::time::Instant,
    ) -> Result<Value, ClientError> {
        if self.cancel.is_cancelled() || stops.iter().any(|stop| stop.is_cancelled()) {
            return Err(ClientError::Cancelled);
        }
        let answer = self.send(method, params)?;
        let mut select = crossbeam_channel::Select::new();
        select.recv(&answer);
        select.recv(self.cancel.signal());
        for stop in stops {
            select.recv(stop.signal());
        }
        let outcome = match select.select_deadline(deadline) {
            Ok(operation) if operation.index() == 0 => match operation.recv(&answer) {
                Ok(Ok(value)) => Ok(value),
                Ok(Err(error)) => Err(ClientError::Rpc(error)),
                Err(_) => Err(ClientError::Gone),
            },
            Ok(operation) => {
                // A cancel channel only ever disconnects.
                let index = operation.index();
                let signal = if index == 1 {
                    self.cancel.signal()
                } else {
                    stops[index - 2].signal()
                };
                let _ = operation.recv(signal);
                Err(ClientError::Cancelled)
            }
            Err(_) => Err(ClientError::Cancelled),
        };
        outcome
    }

    /// Like `request`, but does not stop at the turn's cancel: for clean-up
    /// calls (killing and releasing a terminal) that must go out even
    /// after a cancel. Bounded by a timeout so a silent client cannot hang
    /// the turn.
    pub(crate) fn request_cleanup(
        &self,
        method: &'static str,
        params: Value,
    ) -> Result<Value, ClientError> {
        self.request_bounded(method, params, false, std::time::Duration::from_secs(2))
    }

    /// A request that is not the turn's: it is still answered after the
    /// turn ends (a job in the editor's terminal is driven across turns).
    /// Bounded by `timeout`.
    pub(crate) fn request_lasting(
        &self,
        method: &'static str,
        params: Value,
        timeout: std::time::Duration,
    ) -> Result<Value, ClientError> {
        self.request_bounded(method, params, true, timeout)
    }

    fn request_bounded(
        &self,
        method: &'static str,
        params: Value,
        lasting: bool,
        timeout: std::time::Duration,
    ) -> Result<Value, ClientError> {
        let (reply, answer) = crossbeam_channel::bounded(1);
        let request = OutgoingRequest {
            session_id: self.session_id.clone(),
            method,
            params: self.marked(method, params),
            reply,
            lasting,
        };
        if !(self.outbox)(Report::Request(request)) {
            return Err(ClientError::Gone);
        }
        match answer.recv_timeout(timeout) {
            Ok(Ok(value)) => Ok(value),
            Ok(Err(error)) => Err(ClientError::Rpc(error)),
            Err(_) => Err(ClientError::Gone),
        }
    }

    pub(crate) fn read_text_file(&self, path: &Path) -> Result<String, ClientError> {
        let result = self.request(
            "fs/read_text_file",
            serde_json::json!({ "sessionId": self.session_id, "path": path }),
        )?;
        result
            .get("content")
            .and_then(Value::as_str)
            .map(str::to_string)
            .ok_or_else(|| {
                ClientError::Rpc(RpcError::invalid_params(
                    "fs/read_text_file answer has no content",
                ))
            })
    }

    pub(crate) fn write_text_file(&self, path: &Path, content: &str) -> Result<(), ClientError> {
        self.request(
            "fs/write_text_file",
            serde_json::json!({ "sessionId": self.session_id, "path": path, "content": content }),
        )
        .map(|_| ())
    }
}

//! JSON-RPC plumbing shared by the three transports.
//!
//! A transport only moves messages. Whatever arrives from the server goes
//! through one [`Router`], which hands each response to the thread waiting
//! for it (through a one-shot channel registered under the request id),
//! answers the server's `ping` with `{}` and any other server request with
//! -32601 (Spindle declares no client capabilities), and remembers a
//! `notifications/tools/list_changed`. When the connection dies, the router
//! is closed and every waiter gets the reason at once.

use super::McpError;
use crate::cancel::lock;
use crate::cancel::CancelToken;
use crossbeam_channel::{bounded, Receiver, RecvError, Select, Sender};
use serde_json::{json, Value};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::Duration;

/// What the server answered to one request.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Answer {
    /// The `result` member.
    Result(Value),
    /// The `error` member (`{code, message, data?}`): a protocol error.
    Error(Value),
}

/// A reply to a waiter: the server's answer, or why none will come.
pub(crate) type Reply = Result<Answer, McpError>;

/// Moves JSON-RPC messages to one server. Answers come back through the
/// router the transport was created with.
pub(crate) trait Transport: Send + Sync {
    /// Sends one message. For a request (`request_id` is set) this may
    /// return before the message is on its way; a later failure is then
    /// delivered to the request's waiter through the router.
    fn send(&self, message: &Value, request_id: Option<u64>) -> Result<(), McpError>;

    /// The request `id` is no longer awaited (cancelled or timed out):
    /// drop whatever connection exists only to carry its answer.
    fn abandon(&self, _id: u64) {}

    /// The handshake finished with this protocol version.
    fn initialized(&self, _version: &str) {}

    /// Whether the connection can still carry messages.
    fn is_alive(&self) -> bool;

    /// Ends the connection (and the server process, for stdio); also fails
    /// every waiter. Calling it again does nothing.
    fn close(&self);

    /// The server's process id, for stdio.
    fn pid(&self) -> Option<u32> {
        None
    }
}

#[derive(Default)]
struct State {
    pending: HashMap<u64, Sender<Reply>>,
    /// Set once the connection is gone: why.
    closed: Option<String>,
}

/// Routes the server's messages; see the module documentation.
pub(crate) struct Router {
    server: String,
    state: Mutex<State>,
    list_changed: AtomicBool,
    /// The most bytes of one message the server may send.
    message_cap: usize,
}

impl Router {
    #[cfg(test)]
    pub(crate) fn new(server: &str) -> Router {
        Router::with_message_cap(server, super::stdio::MESSAGE_CAP)
    }

    pub(crate) fn with_message_cap(server: &str, message_cap: usize) -> Router {
        Router {
            server: server.to_string(),
            state: Mutex::new(State::default()),
            list_changed: AtomicBool::new(false),
            message_cap,
        }
    }

    pub(crate) fn message_cap(&self) -> usize {
        self.message_cap
    }

    /// Starts waiting for the answer to request `id`.
    pub(crate) fn register(&self, id: u64) -> Result<Receiver<Reply>, McpError> {
        let mut state = lock(&self.state);
        if let Some(reason) = &state.closed {
            return Err(McpError::new(reason.clone()));
        }
        let (sender, receiver) = bounded(1);
        state.pending.insert(id, sender);
        Ok(receiver)
    }

    /// Stops waiting for request `id`; a late answer is then ignored.
    pub(crate) fn forget(&self, id: u64) {
        lock(&self.state).pending.remove(&id);
    }

    /// Gives request `id` an error instead of an answer, if it is still
    /// awaited.
    pub(crate) fn fail(&self, id: u64, error: McpError) {
        let waiter = lock(&self.state).pending.remove(&id);
        if let Some(waiter) = waiter {
            let _ = waiter.send(Err(error));
        }
    }

    /// Marks the connection as gone and fails every waiter with `reason`.
    /// The first reason sticks.
    pub(crate) fn close(&self, reason: &str) {
        let (waiters, reason): (Vec<Sender<Reply>>, String) = {
            let mut state = lock(&self.state);
            let reason = state
                .closed
                .get_or_insert_with(|| reason.to_string())
                .clone();
            (state.pending.drain().map(|(_, w)| w).collect(), reason)
        };
        for waiter in waiters {
            let _ = waiter.send(Err(McpError::new(reason.clone())));
        }
    }

    /// Why the connection is gone, if it is.
    pub(crate) fn closed_reason(&self) -> Option<String> {
        lock(&self.state).closed.clone()
    }

    /// Whether a `list_changed` arrived since the last `take_list_changed`.
    pub(crate) fn list_changed(&self) -> bool {
        self.list_changed.load(Ordering::SeqCst)
    }

    /// Reads and clears the `list_changed` flag.
    pub(crate) fn take_list_changed(&self) -> bool {
        self.list_changed.swap(false, Ordering::SeqCst)
    }

    /// Handles one incoming JSON value (a message, or a batch from a
    /// 2025-03-26 server) and returns the replies to send back.
    pub(crate) fn handle(&self, value: Value) -> Vec<Value> {
        match value {
            Value::Array(messages) => messages
                .into_iter()
                .filter_map(|message| self.handle_one(message))
                .collect(),
            message => self.handle_one(message).into_iter().collect(),
        }
    }

    fn handle_one(&self, message: Value) -> Option<Value> {
        let Value::Object(mut object) = message else {
            log::debug!("MCP server `{}` sent a non-object message", self.server);
            return None;
        };
        let method = object.get("method").and_then(Value::as_str);
        let id = object.get("id").filter(|id| !id.is_null()).cloned();
        match (method, id) {
            (Some("ping"), Some(id)) => Some(json!({"jsonrpc": "2.0", "id": id, "result": {}})),
            (Some(method), Some(id)) => {
                log::debug!(
                    "MCP server `{}` sent the request `{method}`, which Spindle does not support",
                    self.server
                );
                Some(json!({"jsonrpc": "2.0", "id": id, "error": {
                    "code": -32601,
                    "message": format!("Method not found: {method}"),
                }}))
            }
            (Some(method), None) => {
                match method {
                    "notifications/tools/list_changed" => {
                        log::debug!("MCP server `{}` changed its tools", self.server);
                        self.list_changed.store(true, Ordering::SeqCst);
                    }
                    "notifications/message" => log::debug!(
                        "MCP server `{}` says: {}",
                        self.server,
                        object.get("params").unwrap_or(&Value::Null)
                    ),
                    _ => {}
                }
                None
            }
            (None, Some(id)) => {
                let answer = if let Some(error) = object.remove("error") {
                    Answer::Error(error)
                } else if let Some(result) = object.remove("result") {
                    Answer::Result(result)
                } else {
                    log::debug!(
                        "MCP server `{}` sent a response without result or error",
                        self.server
                    );
                    return None;
                };
                match response_id(&id).and_then(|id| lock(&self.state).pending.remove(&id)) {
                    Some(waiter) => {
                        let _ = waiter.send(Ok(answer));
                    }
                    None => log::debug!(
                        "MCP server `{}` answered request {id}, which nobody awaits",
                        self.server
                    ),
                }
                None
            }
            (None, None) => {
                log::debug!(
                    "MCP server `{}` sent a message that is neither request nor response",
                    self.server
                );
                None
            }
        }
    }
}

/// What waiting on a channel, some cancel tokens and a timeout gave.
pub(crate) enum Waited<T> {
    /// The channel delivered (or disconnected).
    Got(Result<T, RecvError>),
    Cancelled,
    TimedOut,
}

/// Waits for a message on `receiver`, one of `cancels` firing, or
/// `timeout` to pass, whichever comes first.
pub(crate) fn wait_any<T>(
    receiver: &Receiver<T>,
    cancels: &[&CancelToken],
    timeout: Duration,
) -> Waited<T> {
    if cancels.iter().any(|cancel| cancel.is_cancelled()) {
        return Waited::Cancelled;
    }
    let mut select = Select::new();
    select.recv(receiver);
    for cancel in cancels {
        select.recv(cancel.signal());
    }
    let outcome = match select.select_timeout(timeout) {
        Ok(operation) => {
            let index = operation.index();
            if index == 0 {
                Waited::Got(operation.recv(receiver))
            } else {
                // The cancel channel only ever disconnects.
                let _ = operation.recv(cancels[index - 1].signal());
                Waited::Cancelled
            }
        }
        Err(_) => Waited::TimedOut,
    };
    outcome
}

/// Our request ids are integers; servers echo them, sometimes as strings.
pub(crate) fn response_id(id: &Value) -> Option<u64> {
    match id {
        Value::Number(number) => number.as_u64(),
        Value::String(text) => text.parse().ok(),
        _ => None,
    }
}

/// The id of `message` when it is a response (no `method`).
pub(crate) fn id_of_response(message: &Value) -> Option<u64> {
    if message.get("method").is_some() {
        return None;
    }
    message.get("id").and_then(response_id)
}

pub(crate) fn request(id: u64, method: &str, params: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})
}

pub(crate) fn notification(method: &str, params: Option<Value>) -> Value {
    match params {
        Some(params) => json!({"jsonrpc": "2.0", "method": method, "params": params}),
        None => json!({"jsonrpc": "2.0", "method": method}),
    }
}

/// A JSON-RPC error object as one line of text.
pub(crate) fn describe_error(error: &Value) -> String {
    let code = error.get("code").and_then(Value::as_i64);
    let message = error
        .get("message")
        .and_then(Value::as_str)
        .unwrap_or("no message");
    let mut text = match code {
        Some(code) => format!("MCP error {code}: {message}"),
        None => format!("MCP error: {message}"),
    };
    if let Some(data) = error.get("data").filter(|data| !data.is_null()) {
        let data = data.to_string();
        let data: String = data.chars().take(500).collect();
        text.push_str(&format!(" ({data})"));
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn routes_responses_and_answers_requests() {
        let router = Router::new("t");
        let waiter = router.register(7).unwrap();
        let replies = router.handle(json!([
            {"jsonrpc": "2.0", "id": "7", "result": {"ok": true}},
            {"jsonrpc": "2.0", "id": "p1", "method": "ping"},
            {"jsonrpc": "2.0", "id": 3, "method": "sampling/createMessage", "params": {}},
            {"jsonrpc": "2.0", "method": "notifications/tools/list_changed"},
            {"jsonrpc": "2.0", "id": 99, "result": {}},
        ]));
        assert_eq!(
            waiter.try_recv().unwrap().unwrap(),
            Answer::Result(json!({"ok": true}))
        );
        assert_eq!(
            replies[0],
            json!({"jsonrpc": "2.0", "id": "p1", "result": {}})
        );
        assert_eq!(replies[1]["id"], 3);
        assert_eq!(replies[1]["error"]["code"], -32601);
        assert_eq!(replies.len(), 2);
        assert!(router.list_changed());
        assert!(router.take_list_changed());
        assert!(!router.list_changed());
    }

    #[test]
    fn closing_fails_waiters_and_later_registrations() {
        let router = Router::new("t");
        let waiter = router.register(1).unwrap();
        router.close("gone");
        router.close("second reason");
        assert_eq!(waiter.recv().unwrap().unwrap_err().message, "gone");
        assert_eq!(router.register(2).unwrap_err().message, "gone");
    }

    #[test]
    fn describes_errors() {
        let error = json!({"code": -32602, "message": "bad", "data": {"supported": ["x"]}});
        assert_eq!(
            describe_error(&error),
            "MCP error -32602: bad ({\"supported\":[\"x\"]})"
        );
    }
}

//! JSON-RPC plumbing shared by the three transports.
//!
//! A transport only moves messages. Whatever arrives from the server goes
//! through one [`Router`], which hands each response to the thread waiting
//! for it (through a one-shot channel registered under the request id),
//! answers the server's `ping` with `{}`, hands an `elicitation/create`
//! to the tool call it came during (when the editor takes elicitation;
//! see `elicit.rs`), answers any other server request with -32601, and
//! remembers a `notifications/tools/list_changed`. When the connection
//! dies, the router is closed and every waiter gets the reason at once.
//!
//! The reader threads never wait for the user: a question goes to the
//! thread waiting for the tool call, which answers the server itself.

use super::elicit::{self, Elicitation, ElicitationSupport, Refusal};
use super::error::{McpError, McpErrorKind};
use crate::cancel::lock;
use crate::cancel::CancelToken;
use crossbeam_channel::{bounded, Receiver, RecvError, Select, Sender};
use serde_json::{json, Value};
use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

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
    #[cfg(test)]
    fn pid(&self) -> Option<u32> {
        None
    }

    /// Whether `send` only queues (never blocks), so a caller may send in
    /// order without a helper thread.
    fn queues(&self) -> bool {
        false
    }
}

/// A server's question, handed to the tool call it came during.
pub(crate) struct Ask {
    /// The server's request id, which the answer carries.
    pub id: Value,
    pub elicitation: Elicitation,
    /// Fired when the question is withdrawn: the server cancelled it or
    /// answered the call, or the connection died.
    pub withdrawn: CancelToken,
}

/// A tool call that may carry questions.
struct Asking {
    sender: Sender<Ask>,
    /// The question being asked now; one at a time per call.
    current: Option<Current>,
}

struct Current {
    id: Value,
    withdrawn: CancelToken,
    /// The server cancelled it: it must get no answer.
    cancelled: bool,
    /// For URL mode: the server's id and Spindle's.
    url_ids: Option<(String, String)>,
}

#[derive(Default)]
struct State {
    pending: HashMap<u64, Sender<Reply>>,
    /// The running tool calls that take questions, by request id.
    asking: HashMap<u64, Asking>,
    /// Accepted URL elicitations whose completion may come: (the server's
    /// id, Spindle's id), oldest first, at most [`elicit::REMEMBERED`].
    remembered: VecDeque<(String, String)>,
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
    /// The elicitation modes the editor takes.
    support: ElicitationSupport,
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
            support: ElicitationSupport::default(),
        }
    }

    /// The same router, forwarding the elicitation modes of `support`.
    pub(crate) fn with_elicitation(mut self, support: ElicitationSupport) -> Router {
        self.support = support;
        self
    }

    pub(crate) fn message_cap(&self) -> usize {
        self.message_cap
    }

    /// The client capabilities to declare in `initialize`.
    pub(crate) fn client_capabilities(&self) -> Value {
        self.support.capabilities()
    }

    /// Whether questions are forwarded at all.
    pub(crate) fn elicits(&self) -> bool {
        self.support.any()
    }

    /// Starts waiting for the answer to tool call `id`, which takes the
    /// server's questions meanwhile.
    pub(crate) fn register_call(
        &self,
        id: u64,
    ) -> Result<(Receiver<Reply>, Receiver<Ask>), McpError> {
        let answers = self.register(id)?;
        let (sender, asks) = bounded(1);
        lock(&self.state).asking.insert(
            id,
            Asking {
                sender,
                current: None,
            },
        );
        Ok((answers, asks))
    }

    /// The question of call `call` has been answered by the user (or not):
    /// true when the server still wants the answer. An accepted URL
    /// elicitation is remembered for its completion.
    pub(crate) fn finish_ask(&self, call: u64, accepted: bool) -> bool {
        let mut state = lock(&self.state);
        let Some(current) = state
            .asking
            .get_mut(&call)
            .and_then(|asking| asking.current.take())
        else {
            return true;
        };
        if current.cancelled {
            return false;
        }
        if let (true, Some(ids)) = (accepted, current.url_ids) {
            if state.remembered.len() >= elicit::REMEMBERED {
                state.remembered.pop_front();
            }
            state.remembered.push_back(ids);
        }
        true
    }

    /// Call `id` is over: its question, if any, is withdrawn.
    fn end_call(state: &mut State, id: u64) -> Option<CancelToken> {
        state
            .asking
            .remove(&id)
            .and_then(|asking| asking.current)
            .map(|current| current.withdrawn)
    }

    /// Hands a question to a running call of this server (the oldest
    /// without one), or gives the refusal to send back at once.
    fn elicitation(&self, id: Value, params: &Value) -> Option<Value> {
        let refuse = |refusal: Refusal| {
            log::info!(
                "MCP server `{}` asked the user something that was refused: {}",
                self.server,
                refusal.message
            );
            Some(json!({"jsonrpc": "2.0", "id": id, "error": {
                "code": refusal.code,
                "message": refusal.message,
            }}))
        };
        let parsed = match elicit::parse(params, &self.support) {
            Ok(parsed) => parsed,
            Err(refusal) => return refuse(refusal),
        };
        let mut state = lock(&self.state);
        if state.asking.is_empty() {
            drop(state);
            return refuse(Refusal {
                code: -32600,
                message: "Spindle forwards elicitation only while one of this server's tools is being called".into(),
            });
        }
        let free = state
            .asking
            .iter_mut()
            .filter(|(_, asking)| asking.current.is_none())
            .min_by_key(|(call, _)| **call)
            .map(|(_, asking)| asking);
        let Some(asking) = free else {
            drop(state);
            return refuse(Refusal {
                code: -32600,
                message: "the tool call's previous question is not answered yet; ask one at a time"
                    .into(),
            });
        };
        let withdrawn = CancelToken::new();
        let url_ids = match (&parsed.elicitation, parsed.server_id) {
            (Elicitation::Url { id: ours, .. }, Some(theirs)) => Some((theirs, ours.clone())),
            _ => None,
        };
        let ask = Ask {
            id: id.clone(),
            elicitation: parsed.elicitation,
            withdrawn: withdrawn.clone(),
        };
        if asking.sender.try_send(ask).is_err() {
            drop(state);
            return refuse(Refusal {
                code: -32603,
                message: "the tool call is ending".into(),
            });
        }
        asking.current = Some(Current {
            id,
            withdrawn,
            cancelled: false,
            url_ids,
        });
        None
    }

    /// `notifications/elicitation/complete`: told to the editor only for a
    /// URL elicitation of this server that the user accepted, and once.
    fn completed(&self, params: &Value) {
        let Some(theirs) = params.get("elicitationId").and_then(Value::as_str) else {
            return;
        };
        let ours = {
            let mut state = lock(&self.state);
            let found = state.remembered.iter().position(|(id, _)| id == theirs);
            found
                .and_then(|at| state.remembered.remove(at))
                .map(|(_, ours)| ours)
        };
        match (ours, &self.support.on_complete) {
            (Some(ours), Some(hook)) => hook(&ours),
            (Some(_), None) => {}
            (None, _) => log::debug!(
                "MCP server `{}` completed an elicitation it was not forwarded for; ignored",
                self.server
            ),
        }
    }

    /// `notifications/cancelled` for one of the server's own requests: a
    /// question still waiting for the user is withdrawn, unanswered.
    fn withdrawn(&self, params: &Value) {
        let Some(request) = params.get("requestId") else {
            return;
        };
        let mut state = lock(&self.state);
        for asking in state.asking.values_mut() {
            if let Some(current) = asking.current.as_mut().filter(|c| &c.id == request) {
                current.cancelled = true;
                current.withdrawn.cancel();
            }
        }
    }

    /// Starts waiting for the answer to request `id`.
    pub(crate) fn register(&self, id: u64) -> Result<Receiver<Reply>, McpError> {
        let mut state = lock(&self.state);
        if let Some(reason) = &state.closed {
            return Err(McpError::of(McpErrorKind::Closed, reason.clone()));
        }
        let (sender, receiver) = bounded(1);
        state.pending.insert(id, sender);
        Ok(receiver)
    }

    /// Stops waiting for request `id`; a late answer is then ignored.
    pub(crate) fn forget(&self, id: u64) {
        let withdrawn = {
            let mut state = lock(&self.state);
            state.pending.remove(&id);
            Router::end_call(&mut state, id)
        };
        if let Some(withdrawn) = withdrawn {
            withdrawn.cancel();
        }
    }

    /// Gives request `id` an error instead of an answer, if it is still
    /// awaited.
    pub(crate) fn fail(&self, id: u64, error: McpError) {
        let (waiter, withdrawn) = {
            let mut state = lock(&self.state);
            (state.pending.remove(&id), Router::end_call(&mut state, id))
        };
        if let Some(withdrawn) = withdrawn {
            withdrawn.cancel();
        }
        if let Some(waiter) = waiter {
            let _ = waiter.send(Err(error));
        }
    }

    /// Marks the connection as gone and fails every waiter with `reason`.
    /// The first reason sticks.
    pub(crate) fn close(&self, reason: &str) {
        let (waiters, withdrawn, reason): (Vec<Sender<Reply>>, Vec<CancelToken>, String) = {
            let mut state = lock(&self.state);
            let reason = state
                .closed
                .get_or_insert_with(|| reason.to_string())
                .clone();
            let withdrawn = state
                .asking
                .drain()
                .filter_map(|(_, asking)| asking.current.map(|current| current.withdrawn))
                .collect();
            (
                state.pending.drain().map(|(_, w)| w).collect(),
                withdrawn,
                reason,
            )
        };
        for token in withdrawn {
            token.cancel();
        }
        for waiter in waiters {
            let _ = waiter.send(Err(McpError::of(McpErrorKind::Closed, reason.clone())));
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
            (Some("elicitation/create"), Some(id)) if self.support.any() => {
                self.elicitation(id, object.get("params").unwrap_or(&Value::Null))
            }
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
                    "notifications/elicitation/complete" => {
                        self.completed(object.get("params").unwrap_or(&Value::Null));
                    }
                    "notifications/cancelled" => {
                        self.withdrawn(object.get("params").unwrap_or(&Value::Null));
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
                let (waiter, withdrawn) = match response_id(&id) {
                    Some(id) => {
                        let mut state = lock(&self.state);
                        (state.pending.remove(&id), Router::end_call(&mut state, id))
                    }
                    None => (None, None),
                };
                if let Some(withdrawn) = withdrawn {
                    withdrawn.cancel();
                }
                match waiter {
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
    /// The server asked the user something (or its questions channel
    /// closed: the call is over).
    Asked(Result<Ask, RecvError>),
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
    wait_until(receiver, None, cancels, deadline_after(timeout))
}

/// `now + timeout`, or a far future when that cannot be represented.
pub(crate) fn deadline_after(timeout: Duration) -> Instant {
    let now = Instant::now();
    now.checked_add(timeout)
        .unwrap_or_else(|| now + Duration::from_secs(365 * 24 * 3600))
}

/// Like `wait_any`, until `deadline`, and also for a question on `asks`.
pub(crate) fn wait_until<T>(
    receiver: &Receiver<T>,
    asks: Option<&Receiver<Ask>>,
    cancels: &[&CancelToken],
    deadline: Instant,
) -> Waited<T> {
    if cancels.iter().any(|cancel| cancel.is_cancelled()) {
        return Waited::Cancelled;
    }
    let mut select = Select::new();
    select.recv(receiver);
    let first_cancel = match asks {
        Some(asks) => {
            select.recv(asks);
            2
        }
        None => 1,
    };
    for cancel in cancels {
        select.recv(cancel.signal());
    }
    let outcome = match select.select_deadline(deadline) {
        Ok(operation) => {
            let index = operation.index();
            match (index, asks) {
                (0, _) => Waited::Got(operation.recv(receiver)),
                (1, Some(asks)) => Waited::Asked(operation.recv(asks)),
                _ => {
                    // The cancel channel only ever disconnects.
                    let _ = operation.recv(cancels[index - first_cancel].signal());
                    Waited::Cancelled
                }
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
    use std::sync::Arc;

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

    fn eliciting(completed: Arc<Mutex<Vec<String>>>) -> Router {
        let hook: elicit::CompletionHook =
            Arc::new(move |id: &str| lock(&completed).push(id.to_string()));
        Router::new("t").with_elicitation(ElicitationSupport {
            form: true,
            url: true,
            on_complete: Some(hook),
        })
    }

    fn question(id: &str, params: Value) -> Value {
        json!({"jsonrpc": "2.0", "id": id, "method": "elicitation/create", "params": params})
    }

    fn url_question(id: &str, server_id: &str) -> Value {
        question(
            id,
            json!({"mode": "url", "message": "m", "url": "https://a.example/",
                   "elicitationId": server_id}),
        )
    }

    #[test]
    fn questions_go_to_a_running_call_one_at_a_time() {
        let router = eliciting(Arc::default());
        let form = json!({"message": "m", "requestedSchema": {"type": "object", "properties": {}}});
        // No call runs: refused at once.
        let refused = router.handle(question("q0", form.clone()));
        assert_eq!(refused[0]["error"]["code"], -32600);
        let (_answers, asks) = router.register_call(5).unwrap();
        assert!(router.handle(question("q1", form.clone())).is_empty());
        let ask = asks.try_recv().unwrap();
        assert_eq!(ask.id, json!("q1"));
        // A second question while the first waits is refused.
        let busy = router.handle(question("q2", form.clone()));
        assert_eq!(busy[0]["id"], "q2");
        assert!(busy[0]["error"]["message"]
            .as_str()
            .unwrap()
            .contains("one at a time"));
        assert!(router.finish_ask(5, false));
        assert!(router.handle(question("q3", form.clone())).is_empty());
        let ask = asks.try_recv().unwrap();
        // The server withdraws it: the waiter stops and sends no answer.
        router.handle(
            json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
                             "params": {"requestId": "q3"}}),
        );
        assert!(ask.withdrawn.is_cancelled());
        assert!(!router.finish_ask(5, false));
        // The call's answer ends it: a question after that is refused.
        router.handle(json!({"jsonrpc": "2.0", "id": 5, "result": {}}));
        let late = router.handle(question("q4", form));
        assert_eq!(late[0]["error"]["code"], -32600);
    }

    #[test]
    fn the_answer_to_a_call_withdraws_its_question() {
        let router = eliciting(Arc::default());
        let (_answers, asks) = router.register_call(1).unwrap();
        router.handle(url_question("q", "e"));
        let ask = asks.try_recv().unwrap();
        router.handle(json!({"jsonrpc": "2.0", "id": 1, "result": {}}));
        assert!(ask.withdrawn.is_cancelled());
        let (_answers, asks) = router.register_call(2).unwrap();
        router.handle(url_question("q", "e"));
        let ask = asks.try_recv().unwrap();
        router.close("gone");
        assert!(ask.withdrawn.is_cancelled());
    }

    #[test]
    fn completion_is_told_once_and_only_for_an_accepted_url() {
        let completed: Arc<Mutex<Vec<String>>> = Arc::default();
        let router = eliciting(completed.clone());
        let complete = |id: &str| {
            json!({"jsonrpc": "2.0", "method": "notifications/elicitation/complete",
                   "params": {"elicitationId": id}})
        };
        let (_answers, asks) = router.register_call(1).unwrap();
        router.handle(url_question("q1", "declined"));
        asks.try_recv().unwrap();
        assert!(router.finish_ask(1, false));
        router.handle(url_question("q2", "accepted"));
        let Elicitation::Url { id: ours, .. } = asks.try_recv().unwrap().elicitation else {
            panic!("not a URL elicitation")
        };
        assert!(router.finish_ask(1, true));
        router.handle(complete("declined"));
        router.handle(complete("never-asked"));
        router.handle(complete("accepted"));
        router.handle(complete("accepted"));
        assert_eq!(*lock(&completed), vec![ours]);
    }

    #[test]
    fn without_elicitation_questions_are_unknown_methods() {
        let router = Router::new("t");
        let (_answers, _asks) = router.register_call(1).unwrap();
        let replies = router.handle(url_question("q", "e"));
        assert_eq!(replies[0]["error"]["code"], -32601);
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

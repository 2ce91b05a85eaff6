//! One connection to one MCP server: the transport, the handshake
//! (`initialize`, then `notifications/initialized`), the tool list (all
//! pages of `tools/list`, again after `list_changed`), tool calls with a
//! timeout and cancellation, and shutdown.
//!
//! A [`Client`] is used through `&self` from any number of threads: each
//! request waits on its own one-shot channel, filled by the transport's
//! reader thread. A tool call given an [`Elicitor`] also takes the
//! server's questions meanwhile, asks the user on the waiting thread and
//! answers the server.

use super::config::{ServerConfig, TransportConfig};
use super::elicit::{self, ElicitAnswer, Elicitor};
use super::http::HttpTransport;
use super::rpc::{self, describe_error, wait_until, Answer, Ask, Router, Transport, Waited};
use super::sse::SseTransport;
use super::stdio::StdioTransport;
use super::{
    exposed_name, unique_name, CallResult, McpError, McpErrorKind, McpTool, PROTOCOL_VERSION,
    SUPPORTED_VERSIONS,
};
use crate::cancel::{lock, CancelToken};
use serde_json::{json, Map, Value};
use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

/// A safety net against a server whose cursors never end.
const MAX_PAGES: usize = 1000;

/// The longest `tools/list` cursor sent back: a server's cursor is an
/// opaque token, and each one is kept (to notice a loop) and echoed.
const MAX_CURSOR: usize = 16 * 1024;

/// The most tools one server may list: past it the list is cut, as no
/// model is offered so many usefully.
const MAX_TOOLS: usize = 10_000;

/// A connected, initialised MCP server.
pub(crate) struct Client {
    name: String,
    transport: Arc<dyn Transport>,
    router: Arc<Router>,
    next_id: AtomicU64,
    protocol_version: String,
    instructions: Option<String>,
    /// Whether the server declared the `tools` capability.
    has_tools: bool,
    tools: Mutex<Vec<McpTool>>,
    shut: AtomicBool,
}

impl Client {
    /// Connects, performs the handshake and lists the tools. `timeout`
    /// bounds the handshake and each `tools/list` page (see
    /// [`super::INIT_TIMEOUT`]).
    #[cfg(test)]
    pub(crate) fn connect(config: &ServerConfig, timeout: Duration) -> Result<Client, McpError> {
        Client::connect_with(config, timeout, &[])
    }

    /// `connect`, abandoned as soon as one of `cancels` fires.
    pub(crate) fn connect_with(
        config: &ServerConfig,
        timeout: Duration,
        cancels: &[&CancelToken],
    ) -> Result<Client, McpError> {
        let name = config.name.as_str();
        let cap = config.message_cap.unwrap_or(super::stdio::MESSAGE_CAP);
        let new_router = || {
            Arc::new(
                Router::with_message_cap(name, cap).with_elicitation(config.elicitation.clone()),
            )
        };
        match &config.transport {
            TransportConfig::Stdio { command, args, env } => {
                let router = new_router();
                let transport = StdioTransport::spawn(
                    name,
                    command,
                    args,
                    env,
                    &config.env_remove,
                    router.clone(),
                )?;
                Client::handshake(name, Arc::new(transport), router, timeout, cancels)
            }
            TransportConfig::Http { url, headers } => {
                let router = new_router();
                // A configured Authorization header is the user's own
                // sign-in: Spindle's tokens are not used beside it.
                let own = headers
                    .iter()
                    .any(|(header, _)| header.eq_ignore_ascii_case("authorization"));
                let auth = match (&config.tokens, own) {
                    (Some(dir), false) => {
                        super::oauth::Auth::open(name, url, dir, &config.trust).map(Arc::new)
                    }
                    _ => None,
                };
                let transport =
                    HttpTransport::new(name, url, headers, router.clone(), auth, &config.trust);
                match Client::handshake(name, Arc::new(transport), router, timeout, cancels) {
                    // These statuses are what an old server gives a POST to
                    // its SSE URL: try the legacy transport there.
                    Err(err) if matches!(err.status, Some(400 | 404 | 405)) => {
                        log::debug!(
                            "MCP server `{name}` refused Streamable HTTP ({err}); trying HTTP+SSE"
                        );
                        Client::connect_sse(
                            name,
                            url,
                            &config.trust,
                            headers,
                            new_router(),
                            timeout,
                            cancels,
                        )
                        .map_err(|_| err)
                    }
                    outcome => outcome,
                }
            }
            TransportConfig::Sse { url, headers } => Client::connect_sse(
                name,
                url,
                &config.trust,
                headers,
                new_router(),
                timeout,
                cancels,
            ),
        }
    }

    fn connect_sse(
        name: &str,
        url: &str,
        trust: &crate::net::Trust,
        headers: &[(String, String)],
        router: Arc<Router>,
        timeout: Duration,
        cancels: &[&CancelToken],
    ) -> Result<Client, McpError> {
        let transport =
            SseTransport::connect(name, url, headers, router.clone(), timeout, cancels, trust)?;
        Client::handshake(name, Arc::new(transport), router, timeout, cancels)
    }

    /// Runs `initialize`, `notifications/initialized` and the first
    /// `tools/list`. On any failure the client is dropped, which closes the
    /// transport.
    fn handshake(
        name: &str,
        transport: Arc<dyn Transport>,
        router: Arc<Router>,
        timeout: Duration,
        cancels: &[&CancelToken],
    ) -> Result<Client, McpError> {
        let mut client = Client {
            name: name.to_string(),
            transport,
            router,
            next_id: AtomicU64::new(1),
            protocol_version: PROTOCOL_VERSION.to_string(),
            instructions: None,
            has_tools: false,
            tools: Mutex::new(Vec::new()),
            shut: AtomicBool::new(false),
        };
        let params = json!({
            "protocolVersion": PROTOCOL_VERSION,
            "capabilities": client.router.client_capabilities(),
            "clientInfo": {"name": "spindle", "version": env!("CARGO_PKG_VERSION")},
        });
        let result = match client.request("initialize", params, timeout, cancels)? {
            Answer::Result(result) => result,
            Answer::Error(error) => {
                return Err(McpError::new(format!(
                    "MCP server `{name}` refused to initialise: {}",
                    describe_error(&error)
                )))
            }
        };
        let version = result
            .get("protocolVersion")
            .and_then(Value::as_str)
            .unwrap_or("");
        if !SUPPORTED_VERSIONS.contains(&version) {
            return Err(McpError::new(format!(
                "MCP server `{name}` speaks protocol version `{version}`, which Spindle does not support (it supports {})",
                SUPPORTED_VERSIONS.join(", ")
            )));
        }
        client.protocol_version = version.to_string();
        client.instructions = result
            .get("instructions")
            .and_then(Value::as_str)
            .filter(|text| !text.trim().is_empty())
            .map(str::to_string);
        client.has_tools = result
            .get("capabilities")
            .and_then(|capabilities| capabilities.get("tools"))
            .is_some_and(|tools| !tools.is_null());
        client.transport.initialized(version);
        client
            .transport
            .send(&rpc::notification("notifications/initialized", None), None)?;
        if client.has_tools {
            let tools = client.list_tools(timeout, cancels)?;
            *lock(&client.tools) = tools;
        }
        Ok(client)
    }

    /// The server's name from the configuration.
    pub(crate) fn name(&self) -> &str {
        &self.name
    }

    /// The protocol version agreed on in the handshake.
    #[cfg(test)]
    pub(crate) fn protocol_version(&self) -> &str {
        &self.protocol_version
    }

    /// The server's `instructions`, which may go into the system prompt.
    #[cfg(test)]
    pub(crate) fn instructions(&self) -> Option<&str> {
        self.instructions.as_deref()
    }

    /// The server's process id, for a stdio server.
    #[cfg(test)]
    pub(crate) fn pid(&self) -> Option<u32> {
        self.transport.pid()
    }

    /// The tools from the last listing.
    pub(crate) fn tools(&self) -> Vec<McpTool> {
        lock(&self.tools).clone()
    }

    /// Lists the tools again (all pages), typically after `list_changed`.
    /// On failure the previous list is kept.
    pub(crate) fn refresh_tools(&self) -> Result<(), McpError> {
        if !self.has_tools {
            self.router.take_list_changed();
            return Ok(());
        }
        // Cleared first, so that a change during the listing is not lost.
        self.router.take_list_changed();
        let tools = self.list_tools(super::INIT_TIMEOUT, &[])?;
        *lock(&self.tools) = tools;
        Ok(())
    }

    /// Whether the server said its tools changed since the last listing.
    pub(crate) fn tools_changed(&self) -> bool {
        self.router.list_changed()
    }

    /// Calls a tool by its original name. A JSON-RPC error is returned as a
    /// failed [`CallResult`] (the model should see it); `Err` means no
    /// answer: the server is gone, the call timed out, or `cancel` fired,
    /// in which case `notifications/cancelled` is sent and this returns at
    /// once.
    #[cfg(test)]
    pub(crate) fn call(
        &self,
        tool_name: &str,
        arguments: Value,
        cancel: &CancelToken,
        timeout: Duration,
    ) -> Result<CallResult, McpError> {
        self.call_asking(tool_name, arguments, cancel, timeout, None)
    }

    /// `call`, with the server's questions during the call put to the
    /// user through `elicitor` (refused without one). The wait for the
    /// user counts in `timeout` and ends at `cancel`, which answers the
    /// server `cancel`.
    pub(crate) fn call_asking(
        &self,
        tool_name: &str,
        arguments: Value,
        cancel: &CancelToken,
        timeout: Duration,
        elicitor: Option<&dyn Elicitor>,
    ) -> Result<CallResult, McpError> {
        let arguments = match arguments {
            Value::Null => Value::Object(Map::new()),
            other => other,
        };
        let params = json!({"name": tool_name, "arguments": arguments});
        match self.request_asking("tools/call", params, timeout, &[cancel], elicitor)? {
            Answer::Result(result) => Ok(call_result(result)),
            Answer::Error(error) => Ok(CallResult::error_text(describe_error(&error))),
        }
    }

    /// Whether the connection works: for stdio, the process runs and its
    /// stdout is open.
    pub(crate) fn is_alive(&self) -> bool {
        !self.shut.load(Ordering::SeqCst) && self.transport.is_alive()
    }

    /// Ends the connection: for stdio, closes stdin, waits briefly, then
    /// SIGTERM and SIGKILL to the process group; for HTTP, DELETEs the
    /// session. Waiting calls fail at once. Calling it again does nothing.
    pub(crate) fn shutdown(&self) {
        if !self.shut.swap(true, Ordering::SeqCst) {
            self.transport.close();
        }
    }

    /// Sends a request and waits for its answer, the timeout or a cancel.
    fn request(
        &self,
        method: &str,
        params: Value,
        timeout: Duration,
        cancels: &[&CancelToken],
    ) -> Result<Answer, McpError> {
        self.request_asking(method, params, timeout, cancels, None)
    }

    /// `request`, taking the server's questions meanwhile when given an
    /// elicitor (and the editor takes elicitation at all).
    fn request_asking(
        &self,
        method: &str,
        params: Value,
        timeout: Duration,
        cancels: &[&CancelToken],
        elicitor: Option<&dyn Elicitor>,
    ) -> Result<Answer, McpError> {
        let cancelled = || {
            McpError::of(
                McpErrorKind::Cancelled,
                format!("the call to MCP server `{}` was cancelled", self.name),
            )
        };
        if cancels.iter().any(|cancel| cancel.is_cancelled()) {
            return Err(cancelled());
        }
        let id = self.next_id.fetch_add(1, Ordering::SeqCst);
        let elicitor = elicitor.filter(|_| self.router.elicits());
        let (answers, mut asks) = match elicitor {
            Some(_) => {
                let (answers, asks) = self.router.register_call(id)?;
                (answers, Some(asks))
            }
            None => (self.router.register(id)?, None),
        };
        if let Err(err) = self
            .transport
            .send(&rpc::request(id, method, params), Some(id))
        {
            self.router.forget(id);
            return Err(err);
        }
        let deadline = rpc::deadline_after(timeout);
        let (error, reason) = loop {
            match wait_until(&answers, asks.as_ref(), cancels, deadline) {
                Waited::Got(Ok(reply)) => return reply,
                Waited::Got(Err(_)) => {
                    return Err(McpError::of(
                        McpErrorKind::Closed,
                        self.router.closed_reason().unwrap_or_else(|| {
                            format!("MCP server `{}` did not answer", self.name)
                        }),
                    ))
                }
                Waited::Asked(Ok(ask)) => {
                    if let Some(elicitor) = elicitor {
                        self.ask_user(id, ask, elicitor, cancels, deadline);
                    }
                }
                Waited::Asked(Err(_)) => asks = None,
                Waited::Cancelled => break (cancelled(), "cancelled by the user"),
                Waited::TimedOut => {
                    break (
                        McpError::of(
                            McpErrorKind::TimedOut,
                            format!(
                                "MCP server `{}` did not answer {method} within {} s",
                                self.name,
                                timeout.as_secs_f64()
                            ),
                        ),
                        "timed out",
                    )
                }
            }
        };
        self.router.forget(id);
        self.transport.abandon(id);
        // `initialize` is never cancelled; the connection is dropped instead.
        if method != "initialize" {
            self.notify_detached(rpc::notification(
                "notifications/cancelled",
                Some(json!({"requestId": id, "reason": reason})),
            ));
        }
        Err(error)
    }

    /// Puts a server's question to the user (during call `call`) and
    /// answers the server, unless it withdrew the question. The wait
    /// races the call's cancels, its deadline and the withdrawal; any of
    /// them answers `cancel`.
    fn ask_user(
        &self,
        call: u64,
        ask: Ask,
        elicitor: &dyn Elicitor,
        cancels: &[&CancelToken],
        deadline: Instant,
    ) {
        let mut stops = cancels.to_vec();
        stops.push(&ask.withdrawn);
        let answer = if stops.iter().any(|stop| stop.is_cancelled()) {
            Ok(ElicitAnswer::Cancel)
        } else {
            elicitor.elicit(&ask.elicitation, &stops, deadline)
        };
        let accepted = matches!(answer, Ok(ElicitAnswer::Accept(_)));
        let outcome = answer.and_then(|answer| elicit::result_for_server(&ask.elicitation, answer));
        let reply = match outcome {
            Ok(result) => json!({"jsonrpc": "2.0", "id": ask.id, "result": result}),
            Err(why) => {
                log::info!(
                    "MCP server `{}`: the user was not asked ({}): {why}",
                    self.name,
                    why.kind().describe()
                );
                json!({"jsonrpc": "2.0", "id": ask.id, "error": {
                    "code": -32603,
                    "message": format!("the user could not be asked: {why}"),
                }})
            }
        };
        if self.router.finish_ask(call, accepted) {
            self.notify_detached(reply);
        }
    }

    /// Sends a notification (or a reply) in order when the transport only
    /// queues, else from a helper thread, so that a slow HTTP server
    /// cannot delay the caller.
    fn notify_detached(&self, message: Value) {
        if self.transport.queues() {
            if let Err(err) = self.transport.send(&message, None) {
                log::debug!("notifying MCP server `{}` failed: {err}", self.name);
            }
            return;
        }
        let transport = self.transport.clone();
        let name = self.name.clone();
        // Detached: a notification has no answer to wait for; the
        // transport's timeout bounds the send.
        let spawned = thread::Builder::new()
            .name("spindle-mcp-notify".into())
            .spawn(move || {
                if let Err(err) = transport.send(&message, None) {
                    log::debug!("notifying MCP server `{name}` failed: {err}");
                }
            });
        if let Err(err) = spawned {
            log::debug!("cannot notify MCP server `{}`: {err}", self.name);
        }
    }

    /// Fetches every page of `tools/list`.
    fn list_tools(
        &self,
        timeout: Duration,
        cancels: &[&CancelToken],
    ) -> Result<Vec<McpTool>, McpError> {
        let mut tools = Vec::new();
        let mut taken = HashSet::new();
        let mut seen_cursors = HashSet::new();
        let mut cursor: Option<String> = None;
        for _ in 0..MAX_PAGES {
            let params = match &cursor {
                Some(cursor) => json!({"cursor": cursor}),
                None => json!({}),
            };
            let result = match self.request("tools/list", params, timeout, cancels)? {
                Answer::Result(result) => result,
                Answer::Error(error) => {
                    return Err(McpError::new(format!(
                        "MCP server `{}` could not list its tools: {}",
                        self.name,
                        describe_error(&error)
                    )))
                }
            };
            let listed = result.get("tools").and_then(Value::as_array);
            for raw in listed.into_iter().flatten() {
                if tools.len() >= MAX_TOOLS {
                    log::warn!(
                        "MCP server `{}` lists more than {MAX_TOOLS} tools; the rest are left out",
                        self.name
                    );
                    return Ok(tools);
                }
                match parse_tool(&self.name, raw, &mut taken) {
                    Some(tool) => tools.push(tool),
                    None => log::warn!("MCP server `{}` listed a tool without a name", self.name),
                }
            }
            cursor = match result.get("nextCursor").and_then(Value::as_str) {
                Some(next) if next.len() > MAX_CURSOR => {
                    log::warn!(
                        "MCP server `{}` sent a tools/list cursor of {} bytes (at most {MAX_CURSOR}); its later pages are left out",
                        self.name,
                        next.len()
                    );
                    break;
                }
                Some(next) if !next.is_empty() => {
                    if !seen_cursors.insert(next.to_string()) {
                        log::warn!("MCP server `{}` repeated a tools/list cursor", self.name);
                        break;
                    }
                    Some(next.to_string())
                }
                _ => break,
            };
        }
        Ok(tools)
    }
}

impl Drop for Client {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// Builds an [`McpTool`] from one `tools/list` entry.
fn parse_tool(server: &str, raw: &Value, taken: &mut HashSet<String>) -> Option<McpTool> {
    let name = raw.get("name").and_then(Value::as_str)?.to_string();
    let text = |field: &str| raw.get(field).and_then(Value::as_str).map(str::to_string);
    let description = text("description")
        .or_else(|| text("title"))
        .unwrap_or_default();
    let hint = |field: &str| {
        raw.get("annotations")
            .and_then(|annotations| annotations.get(field))
            .and_then(Value::as_bool)
            == Some(true)
    };
    Some(McpTool {
        server: server.to_string(),
        exposed_name: unique_name(&exposed_name(server, &name), taken),
        name,
        description,
        input_schema: object_schema(raw.get("inputSchema")),
        read_only: hint("readOnlyHint"),
        destructive: hint("destructiveHint"),
    })
}

/// Makes sure a schema has a top-level `"type":"object"` (Anthropic
/// requires it) and `properties` (OpenAI rejects an object schema without).
fn object_schema(schema: Option<&Value>) -> Value {
    let mut schema = match schema {
        Some(Value::Object(object)) => object.clone(),
        _ => Map::new(),
    };
    schema
        .entry("type")
        .or_insert_with(|| Value::String("object".into()));
    if schema.get("type") == Some(&Value::String("object".into())) {
        schema
            .entry("properties")
            .or_insert_with(|| Value::Object(Map::new()));
    }
    Value::Object(schema)
}

/// Reads a `tools/call` result.
fn call_result(mut result: Value) -> CallResult {
    let content = match result.get_mut("content").map(Value::take) {
        Some(Value::Array(blocks)) => blocks,
        _ => Vec::new(),
    };
    CallResult {
        content,
        structured: result
            .get_mut("structuredContent")
            .map(Value::take)
            .filter(|value| !value.is_null()),
        is_error: result.get("isError").and_then(Value::as_bool) == Some(true),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tools_get_namespaced_unique_names_and_object_schemas() {
        let mut taken = HashSet::new();
        let raw = json!({"name": "read.file", "inputSchema": {"type": "object"},
                         "annotations": {"readOnlyHint": true}});
        let tool = parse_tool("fs", &raw, &mut taken).unwrap();
        assert_eq!(tool.exposed_name, "fs__read_file");
        assert_eq!(tool.name, "read.file");
        assert_eq!(
            tool.input_schema,
            json!({"type": "object", "properties": {}})
        );
        assert!(tool.read_only && !tool.destructive);
        let clash = parse_tool("fs", &json!({"name": "read_file"}), &mut taken).unwrap();
        assert_eq!(clash.exposed_name, "fs__read_file_2");
        assert_eq!(
            clash.input_schema,
            json!({"type": "object", "properties": {}})
        );
        assert!(!clash.read_only && !clash.destructive);
        assert!(parse_tool("fs", &json!({"title": "x"}), &mut taken).is_none());
    }

    #[test]
    fn reads_call_results() {
        let result = call_result(json!({
            "content": [{"type": "text", "text": "hi"}],
            "structuredContent": {"n": 1},
            "isError": true,
        }));
        assert_eq!(result.content, vec![json!({"type": "text", "text": "hi"})]);
        assert_eq!(result.structured, Some(json!({"n": 1})));
        assert!(result.is_error);
        let empty = call_result(json!({}));
        assert!(empty.content.is_empty() && empty.structured.is_none() && !empty.is_error);
    }
}

//! Spindle's vendor extensions (`../shared/EXTENSIONS.md` §0, 1, 2, 6):
//! discovery, turn events, the status snapshot, steering (Spindle's and
//! the cross-agent `_session/steering`), and the durable inbox. The
//! dispatcher owns all of it: the inbox's items live in the store, each
//! change committed before the answer; the running turn only takes the
//! steers handed to it and publishes its progress for status.

use super::prompting::TurnStart;
use crate::agent::common::models::Registry;
use crate::agent::dispatcher::Dispatcher;
use crate::rpc::RpcError;
use crate::store::inbox::{Flags, Item};
use serde_json::{json, Map, Value};

/// The methods this build serves, by discovery key.
pub const METHODS: [(&str, &str); 27] = [
    ("capabilities", "_spindle/capabilities"),
    ("status", "_spindle/session/status"),
    ("steer", "_spindle/session/steer"),
    ("inbox.enqueue", "_spindle/session/inbox/enqueue"),
    ("inbox.list", "_spindle/session/inbox/list"),
    ("inbox.get", "_spindle/session/inbox/get"),
    ("inbox.update", "_spindle/session/inbox/update"),
    ("inbox.delete", "_spindle/session/inbox/delete"),
    ("inbox.move", "_spindle/session/inbox/move"),
    ("inbox.setPaused", "_spindle/session/inbox/setPaused"),
    ("inbox.retry", "_spindle/session/inbox/retry"),
    ("inbox.refresh", "_spindle/session/inbox/refresh"),
    ("steering", "_session/steering"),
    ("goal.pause", "_spindle/session/goal/pause"),
    ("goal.resume", "_spindle/session/goal/resume"),
    ("settings", "_spindle/settings"),
    ("setting.set", "_spindle/setting/set"),
    ("models", "_spindle/models"),
    ("operations", "_spindle/operations"),
    ("invoke", "_spindle/invoke"),
    ("reload", "_spindle/session/reload"),
    ("jobs", "_spindle/jobs"),
    ("job", "_spindle/job"),
    ("job.transcript", "_spindle/job/transcript"),
    ("job.send", "_spindle/job/send"),
    ("job.cancel", "_spindle/job/cancel"),
    ("resource", "_spindle/resource"),
];

/// The notifications it sends.
pub const NOTIFICATIONS: [(&str, &str); 1] = [("event", "_spindle/event")];

/// The most characters of one item, and pending items per session.
const ITEM_CAP: usize = 262_144;
const INBOX_CAP: usize = 64;
/// The most bytes of a file a link is frozen with. The frozen item as a
/// whole stays within `ITEM_CAP` bytes of JSON too, so that `get` answers
/// it within the bound of one result.
const FROZEN_FILE_CAP: u64 = 256 * 1024;

/// `agentCapabilities._meta.spindle`, as discovery lists it.
pub fn discovery() -> Value {
    let methods: Map<String, Value> = METHODS
        .iter()
        .map(|(key, name)| (key.to_string(), json!(name)))
        .collect();
    let notifications: Map<String, Value> = NOTIFICATIONS
        .iter()
        .map(|(key, name)| (key.to_string(), json!(name)))
        .collect();
    json!({"schemaVersion": 1, "methods": methods, "notifications": notifications})
}

fn unknown_session(id: &str) -> RpcError {
    RpcError::invalid_params(format!(
        "session {id:?} is not open in this process; open it with session/new, session/load or session/resume"
    ))
    .with_data(json!({"code": "unknown_session"}))
}

fn bad(field: &str, why: &str) -> RpcError {
    RpcError::invalid_params(format!("{field}: {why}")).with_data(json!({"code": "invalid_params"}))
}

fn store_error(error: crate::store::StoreError) -> RpcError {
    RpcError::internal(error.0).with_data(json!({"code": "store_unavailable"}))
}

fn string<'a>(params: &'a Value, field: &str) -> Result<&'a str, RpcError> {
    match params.get(field) {
        Some(Value::String(text)) => Ok(text),
        Some(_) => Err(bad(field, "must be a string")),
        None => Err(bad(field, "is missing")),
    }
}

fn optional_string<'a>(params: &'a Value, field: &str) -> Result<Option<&'a str>, RpcError> {
    match params.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(text)) => Ok(Some(text)),
        Some(_) => Err(bad(field, "must be a string")),
    }
}

/// The prompt of a request: `prompt` (content blocks) or `text`.
fn prompt_of(params: &Value, text_allowed: bool) -> Result<Vec<Value>, RpcError> {
    let blocks = match (params.get("prompt"), params.get("text")) {
        (Some(Value::Array(blocks)), _) => blocks.clone(),
        (Some(_), _) => return Err(bad("prompt", "must be an array of content blocks")),
        (None, Some(Value::String(text))) if text_allowed => {
            vec![json!({"type": "text", "text": text})]
        }
        (None, Some(_)) if text_allowed => return Err(bad("text", "must be a string")),
        _ => {
            return Err(bad(
                "prompt",
                if text_allowed {
                    "give prompt (content blocks) or text"
                } else {
                    "is missing"
                },
            ))
        }
    };
    let has_content = blocks.iter().any(|block| match block["type"].as_str() {
        Some("text") => block["text"].as_str().is_some_and(|t| !t.trim().is_empty()),
        Some(_) => true,
        None => false,
    });
    if !has_content {
        return Err(bad("prompt", "is empty"));
    }
    Ok(blocks)
}

/// The first words of an item, for lists.
fn preview(blocks: &[Value]) -> String {
    let text: String = blocks
        .iter()
        .filter_map(|b| b["text"].as_str().or_else(|| b["uri"].as_str()))
        .collect::<Vec<_>>()
        .join(" ");
    text.chars().take(120).collect()
}

/// The item's blocks frozen: each `resource_link` to a text file inside
/// the workspace (its folder or an extra root) becomes a `resource` block
/// holding that file's text now, so the prompt means what the user saw
/// when they sent it, whenever it runs. The frozen item stays within
/// `ITEM_CAP` bytes of JSON: a link whose text does not fit stays a link,
/// as does one outside the workspace (the model reads it with its tools,
/// under the session's permissions) and one to a file that is not text.
fn freeze(blocks: &[Value], roots: &[std::path::PathBuf]) -> Vec<Value> {
    let size = |block: &Value| block.to_string().len() as u64;
    let mut room = (ITEM_CAP as u64).saturating_sub(size(&Value::Array(blocks.to_vec())));
    blocks
        .iter()
        .map(|block| {
            if block["type"] != "resource_link" {
                return block.clone();
            }
            let uri = block["uri"].as_str().unwrap_or_default();
            let Some(path) = file_path(uri) else {
                return block.clone();
            };
            let Some(resolved) = roots
                .iter()
                .map(|root| crate::tools::paths::resolve(root, &path))
                .find(|resolved| resolved.inside)
            else {
                return block.clone();
            };
            let cap = FROZEN_FILE_CAP.min(room);
            let Ok(bytes) = crate::tools::bounded::read_capped(&resolved.path, cap) else {
                return block.clone();
            };
            let Ok(text) = String::from_utf8(bytes) else {
                return block.clone();
            };
            let frozen = json!({"type": "resource", "resource": {
                "uri": uri, "text": text,
                "mimeType": block.get("mimeType").cloned().unwrap_or(json!("text/plain")),
            }});
            // Escapes make the JSON longer than the text: measured as sent.
            let grows = size(&frozen).saturating_sub(size(block));
            if grows > room {
                return block.clone();
            }
            room -= grows;
            frozen
        })
        .collect()
}

/// The absolute path a `file:` URI names (`file:///p`, `file://localhost/p`
/// or `file:/p`, without its `?query` or `#fragment`, such as an editor's
/// `#L10:20` selection), percent-decoded; `None` for any other URI.
fn file_path(uri: &str) -> Option<String> {
    let rest = uri.strip_prefix("file:")?;
    let rest = match rest.strip_prefix("//") {
        Some(after) if after.starts_with('/') => after,
        Some(after) => after.strip_prefix("localhost")?,
        None => rest,
    };
    let end = rest.find(['?', '#']).unwrap_or(rest.len());
    let path = percent_decode(&rest[..end])?;
    std::path::Path::new(&path).is_absolute().then_some(path)
}

/// `%XX` escapes of a URI's path decoded; `None` when malformed or not
/// UTF-8.
fn percent_decode(text: &str) -> Option<String> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = std::str::from_utf8(bytes.get(i + 1..i + 3)?).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok().filter(|s| !s.contains('\0'))
}

fn item_json(item: &Item) -> Value {
    json!({
        "itemId": item.item_id,
        "intent": item.intent,
        "state": item.state,
        // What will run: the blocks with their links frozen (older rows
        // may have only the blocks).
        "prompt": if item.prompt["frozen"].is_array() { &item.prompt["frozen"] } else { &item.prompt["blocks"] },
        "bytes": item.bytes,
        "createdAt": item.created_at,
        "idempotencyKey": item.idempotency_key,
    })
}

fn summary_json(item: &Item) -> Value {
    let blocks = item.prompt["blocks"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    json!({
        "itemId": item.item_id,
        "intent": item.intent,
        "state": item.state,
        "preview": preview(&blocks),
        "bytes": item.bytes,
        "createdAt": item.created_at,
    })
}

impl Dispatcher {
    /// Sends `_spindle/event` for a session, numbered without gaps.
    pub(in crate::agent) fn event(&mut self, session_id: &str, kind: &str, data: Value) {
        if let Some(line) = self.event_line(session_id, kind, data) {
            self.send_line(line);
        }
    }

    /// The next event of a session as a line, numbered, to send now or
    /// after an answer; `None` for a client that did not opt in to events
    /// (`clientCapabilities._meta.spindle.events`), which sees pure ACP.
    /// The number counts only events sent, so an opted-in client sees no
    /// gap.
    pub(in crate::agent) fn event_line(
        &mut self,
        session_id: &str,
        kind: &str,
        data: Value,
    ) -> Option<String> {
        if !self.wants_events() {
            return None;
        }
        let session = self.sessions.get_mut(session_id)?;
        session.event_seq += 1;
        let seq = session.event_seq;
        Some(crate::rpc::notification_line(
            "_spindle/event",
            &json!({"sessionId": session_id, "seq": seq, "kind": kind, "data": data}),
        ))
    }

    /// Whether the client asked for vendor notifications in `initialize`.
    pub(in crate::agent) fn wants_events(&self) -> bool {
        self.client
            .as_ref()
            .is_some_and(|client| client.meta.spindle.events)
    }

    /// After a session opened: its MCP servers' state, as an `mcp` event
    /// that follows the answer.
    pub(in crate::agent) fn announce_mcp(&mut self, session_id: &str) {
        let Some(status) = self
            .sessions
            .get(session_id)
            .and_then(|s| s.mcp.as_ref())
            .map(|m| m.status())
        else {
            return;
        };
        if let Some(line) = self.event_line(session_id, "mcp", json!({"servers": status})) {
            self.after_response.push(line);
        }
    }

    /// The folders a session's workspace is made of: its own, then the
    /// extra roots it was given.
    fn workspace_roots(&self, id: &str) -> Vec<std::path::PathBuf> {
        self.sessions
            .get(id)
            .map(|session| {
                std::iter::once(session.cwd.clone())
                    .chain(session.extra_roots.iter().cloned())
                    .collect()
            })
            .unwrap_or_default()
    }

    fn open_session(&self, params: &Value) -> Result<String, RpcError> {
        let id = string(params, "sessionId")?;
        match self.sessions.get(id) {
            Some(session) if !session.closed => Ok(id.to_string()),
            _ => Err(unknown_session(id)),
        }
    }

    /// Every vendor method; `None` when the name is not one.
    pub(in crate::agent) fn extension(
        &mut self,
        method: &str,
        params: Value,
    ) -> Option<Result<Value, RpcError>> {
        let params = if params.is_null() { json!({}) } else { params };
        if !params.is_object() {
            return Some(Err(bad("params", "must be an object")));
        }
        let result = match method {
            "_spindle/capabilities" => {
                let mut value = discovery();
                value["version"] = json!(env!("CARGO_PKG_VERSION"));
                Ok(value)
            }
            "_spindle/session/status" => self.status(&params),
            "_spindle/session/steer" => self
                .steer(&params)
                .map(|(item, disposition)| json!({"itemId": item, "disposition": disposition})),
            "_session/steering" => self.steering(&params),
            "_spindle/session/inbox/enqueue" => self.enqueue(&params),
            "_spindle/session/inbox/list" => self.inbox_list(&params),
            "_spindle/session/inbox/get" => self.inbox_get(&params),
            "_spindle/session/inbox/update" => self.inbox_update(&params),
            "_spindle/session/inbox/delete" => self.inbox_delete(&params),
            "_spindle/session/inbox/move" => self.inbox_move(&params),
            "_spindle/session/inbox/setPaused" => self.inbox_set_paused(&params),
            "_spindle/session/inbox/retry" => self.inbox_retry(&params),
            "_spindle/session/inbox/refresh" => self.inbox_refresh(&params),
            "_spindle/session/goal/pause" => self.goal_pause(&params),
            "_spindle/session/goal/resume" => self.goal_resume(&params),
            "_spindle/jobs" => self.jobs_list(&params),
            "_spindle/job" => self.job_item(&params),
            "_spindle/job/send" => self.job_send(&params),
            "_spindle/job/cancel" => self.job_cancel(&params),
            other => return self.catalog(other, &params),
        };
        Some(result)
    }

    // -----------------------------------------------------------------
    // Status
    // -----------------------------------------------------------------

    fn status(&mut self, params: &Value) -> Result<Value, RpcError> {
        let id = self.open_session(params)?;
        let registry = self.registry().ok();
        let stored = self.store()?.session(&id).map_err(store_error)?;
        let waiting = self.store()?.inbox(&id).map_err(store_error)?;
        let session = &self.sessions[&id];
        let entry = registry
            .as_ref()
            .and_then(|r| r.model(&session.model).cloned());
        let price = entry.as_ref().and_then(|e| e.config.price.clone());
        // The running turn's calls count as soon as each reported usage.
        let (usage, spent) = session.usage_so_far();
        let (plan, health, health_error, live_goal) = match session.live.lock() {
            Ok(live) => (
                live.plan.clone(),
                if live.health.is_empty() {
                    "ok"
                } else {
                    live.health
                },
                live.health_error.clone(),
                live.goal.clone().filter(|_| session.running.is_some()),
            ),
            Err(_) => (Value::Null, "ok", None, None),
        };
        let cost = price
            .as_ref()
            .map(|p| json!({"amount": round6(spent), "currency": p.currency}));
        let quote = cost_quote(session, (usage, spent), entry.as_ref(), registry.as_deref());
        let mcp: Vec<Value> = session.mcp.as_ref().map(|m| m.status()).unwrap_or_default();
        let pending = waiting.iter().filter(|i| i.state == "pending").count();
        Ok(json!({
            "session": {
                "id": id,
                "cwd": session.cwd,
                "title": session.title,
                "createdAt": stored.as_ref().map(|s| s.created_at.clone()),
                "updatedAt": stored.as_ref().map(|s| s.updated_at.clone()),
            },
            "turn": {
                "state": if session.running.is_some() { "running" } else { "idle" },
                "epoch": session.epoch,
                "source": if session.epoch == 0 { Value::Null } else { json!(session.turn_source) },
                "startedAt": session.turn_started_at,
                "outcome": session.last_outcome,
            },
            "model": session.model,
            "mode": session.mode.id(),
            "preset": session.preset.id(),
            "approval": crate::agent::handlers::controls::policy_id(session.policy),
            "usage": {
                "inputTokens": usage.input_tokens,
                "outputTokens": usage.output_tokens,
                "cachedReadTokens": usage.cached_tokens,
                "reasoningTokens": usage.reasoning_tokens,
                "contextUsed": session.known.map(|k| k.tokens),
                "contextSize": entry.as_ref().map(|e| e.context_window()),
                "cost": cost,
                "costQuote": quote,
            },
            "plan": {"entries": if plan.is_array() { plan } else { json!([]) }},
            "inbox": {
                "pending": pending,
                "uncertain": waiting.iter().filter(|i| i.state == "uncertain").count(),
                "paused": session.inbox_paused,
                "recovered": session.inbox_recovered,
            },
            "goal": live_goal.or_else(|| session.goal.as_ref().map(|g| g.json())),
            "jobs": {"running": 0, "total": 0},
            "mcp": mcp,
            "health": {"provider": health, "error": health_error},
        }))
    }

    // -----------------------------------------------------------------
    // Steering
    // -----------------------------------------------------------------

    /// A steer: committed as an inbox item first, then handed to the
    /// running turn (applied at its next boundary) or, when idle, queued
    /// ahead of the follow-ups (and dispatched at once when it can be).
    fn steer(&mut self, params: &Value) -> Result<(String, &'static str), RpcError> {
        let id = self.open_session(params)?;
        let blocks = prompt_of(params, false)?;
        let key = optional_string(params, "idempotencyKey")?;
        let (item, existing) = self.add_item(&id, &blocks, "steer", key)?;
        self.unpause_inbox(&id);
        let session = &self.sessions[&id];
        let running = session
            .running
            .as_ref()
            .is_some_and(|r| !r.cancel.is_cancelled());
        if existing {
            let disposition = if item.state == "pending" && running {
                "steer_accepted"
            } else {
                "queued_followup"
            };
            return Ok((item.item_id, disposition));
        }
        if running {
            if let Ok(mut live) = session.live.lock() {
                let text = crate::agent::common::content::read_prompt(
                    item.prompt["frozen"]
                        .as_array()
                        .map(Vec::as_slice)
                        .unwrap_or(&[]),
                    &session.cwd,
                )
                .map(|input| input.text)
                .unwrap_or_default();
                live.steers
                    .push_back((item.item_id.clone(), text, blocks.clone()));
            }
            self.event(
                &id,
                "inbox",
                json!({"itemId": item.item_id, "change": "steer"}),
            );
            return Ok((item.item_id, "steer_accepted"));
        }
        self.event(
            &id,
            "inbox",
            json!({"itemId": item.item_id, "change": "queued"}),
        );
        self.dispatch_next(&id);
        Ok((item.item_id, "queued_followup"))
    }

    /// `_session/steering`: the convention other agents' clients use.
    fn steering(&mut self, params: &Value) -> Result<Value, RpcError> {
        let id = self.open_session(params)?;
        let idle = match params.pointer("/_meta/steering/idleBehavior") {
            None | Some(Value::Null) => "startNewTurn",
            Some(Value::String(value)) if value == "promptRequired" => "promptRequired",
            Some(Value::String(value)) if value == "startNewTurn" => "startNewTurn",
            Some(other) => {
                return Err(bad(
                    "_meta.steering.idleBehavior",
                    &format!("must be startNewTurn or promptRequired, not {other}"),
                ))
            }
        };
        let running = self.sessions[&id].running.is_some();
        if !running && idle == "promptRequired" {
            prompt_of(params, false)?;
            return Ok(json!({"outcome": "promptRequired", "reason": "noRunningTurn"}));
        }
        let (_, disposition) = self.steer(params)?;
        Ok(
            json!({"outcome": if disposition == "steer_accepted" { "injected" } else { "startedNewTurn" }}),
        )
    }

    // -----------------------------------------------------------------
    // The inbox
    // -----------------------------------------------------------------

    /// Commits a new item (or finds the one with the same idempotency
    /// key): returns it and whether it existed.
    fn add_item(
        &mut self,
        id: &str,
        blocks: &[Value],
        intent: &str,
        key: Option<&str>,
    ) -> Result<(Item, bool), RpcError> {
        if let Some(key) = key {
            if key.is_empty() || key.len() > 200 {
                return Err(bad("idempotencyKey", "must be 1 to 200 characters"));
            }
            if let Some(item) = self.store()?.inbox_by_key(id, key).map_err(store_error)? {
                return Ok((item, true));
            }
        }
        let bytes = Value::Array(blocks.to_vec()).to_string();
        if bytes.chars().count() > ITEM_CAP {
            return Err(RpcError::invalid_params(format!(
                "prompt: the item is {} characters; the most is {ITEM_CAP}",
                bytes.chars().count()
            ))
            .with_data(json!({"code": "too_large"})));
        }
        // The blocks must be a prompt the agent can run.
        let cwd = self.sessions[id].cwd.clone();
        crate::agent::common::content::read_prompt(blocks, &cwd)?;
        let roots = self.workspace_roots(id);
        let waiting = self.store()?.inbox(id).map_err(store_error)?;
        if waiting.iter().filter(|i| i.state == "pending").count() >= INBOX_CAP {
            return Err(RpcError::invalid_request(format!(
                "the inbox of session {id} is full ({INBOX_CAP} pending items); wait, or delete some"
            ))
            .with_data(json!({"code": "inbox_full"})));
        }
        let item = Item {
            item_id: format!("item_{}", crate::util::random_hex()),
            intent: intent.to_string(),
            state: "pending".into(),
            prompt: json!({"blocks": blocks, "frozen": freeze(blocks, &roots)}),
            bytes: bytes.len() as i64,
            idempotency_key: key.map(str::to_string),
            created_at: crate::clock::now_rfc3339(),
            position: 0,
        };
        let position = self.store()?.inbox_add(id, &item).map_err(store_error)?;
        Ok((Item { position, ..item }, false))
    }

    fn enqueue(&mut self, params: &Value) -> Result<Value, RpcError> {
        let id = self.open_session(params)?;
        let blocks = prompt_of(params, true)?;
        let intent = match optional_string(params, "intent")? {
            None | Some("followup") => "followup",
            Some("steer") => "steer",
            Some(other) => {
                return Err(bad(
                    "intent",
                    &format!("must be followup or steer, not {other:?}"),
                ))
            }
        };
        let key = optional_string(params, "idempotencyKey")?;
        let (item, existing) = self.add_item(&id, &blocks, intent, key)?;
        if !existing {
            self.unpause_inbox(&id);
            self.event(
                &id,
                "inbox",
                json!({"itemId": item.item_id, "change": "queued"}),
            );
        }
        let started =
            !existing && self.dispatch_next(&id).as_deref() == Some(item.item_id.as_str());
        let position = self
            .store()?
            .inbox(&id)
            .map_err(store_error)?
            .iter()
            .filter(|i| i.state == "pending")
            .position(|i| i.item_id == item.item_id);
        Ok(json!({
            "itemId": item.item_id,
            "disposition": if started { "started" } else if existing { item.state.as_str() } else { "queued" },
            "position": position,
            "paused": self.sessions[&id].inbox_paused,
            "idempotent": existing,
        }))
    }

    fn inbox_list(&mut self, params: &Value) -> Result<Value, RpcError> {
        let id = self.open_session(params)?;
        let items = self.store()?.inbox(&id).map_err(store_error)?;
        let session = &self.sessions[&id];
        Ok(json!({
            "items": items.iter().map(summary_json).collect::<Vec<_>>(),
            "capacity": INBOX_CAP,
            "paused": session.inbox_paused,
            "recovered": session.inbox_recovered,
        }))
    }

    fn item(&mut self, id: &str, params: &Value) -> Result<Item, RpcError> {
        let item_id = string(params, "itemId")?;
        match self.store()?.inbox_item(id, item_id).map_err(store_error)? {
            Some(item) if item.state != "deleted" => Ok(item),
            _ => Err(RpcError::invalid_params(format!(
                "itemId: no item {item_id:?} in session {id}"
            ))
            .with_data(json!({"code": "unknown_item"}))),
        }
    }

    fn pending_item(&mut self, id: &str, params: &Value) -> Result<Item, RpcError> {
        let item = self.item(id, params)?;
        if item.state != "pending" {
            return Err(RpcError::invalid_request(format!(
                "item {} is {}, not pending; only pending items change",
                item.item_id, item.state
            ))
            .with_data(json!({"code": "not_pending"})));
        }
        Ok(item)
    }

    fn inbox_get(&mut self, params: &Value) -> Result<Value, RpcError> {
        let id = self.open_session(params)?;
        let item = self.item(&id, params)?;
        Ok(json!({"item": item_json(&item)}))
    }

    fn inbox_update(&mut self, params: &Value) -> Result<Value, RpcError> {
        let id = self.open_session(params)?;
        let item = self.pending_item(&id, params)?;
        let blocks = prompt_of(params, true)?;
        let bytes = Value::Array(blocks.clone()).to_string();
        if bytes.chars().count() > ITEM_CAP {
            return Err(RpcError::invalid_params("prompt: the item is too large")
                .with_data(json!({"code": "too_large"})));
        }
        let cwd = self.sessions[&id].cwd.clone();
        crate::agent::common::content::read_prompt(&blocks, &cwd)?;
        let prompt =
            json!({"blocks": blocks, "frozen": freeze(&blocks, &self.workspace_roots(&id))});
        self.store()?
            .inbox_set_prompt(&id, &item.item_id, &prompt, bytes.len() as i64)
            .map_err(store_error)?;
        self.event(
            &id,
            "inbox",
            json!({"itemId": item.item_id, "change": "updated"}),
        );
        let item = self.item(&id, params)?;
        Ok(json!({"item": item_json(&item)}))
    }

    fn inbox_delete(&mut self, params: &Value) -> Result<Value, RpcError> {
        let id = self.open_session(params)?;
        let item = self.pending_item(&id, params)?;
        self.store()?
            .inbox_set_state(&id, &item.item_id, "deleted")
            .map_err(store_error)?;
        self.event(
            &id,
            "inbox",
            json!({"itemId": item.item_id, "change": "deleted"}),
        );
        Ok(json!({"itemId": item.item_id, "state": "deleted"}))
    }

    fn inbox_move(&mut self, params: &Value) -> Result<Value, RpcError> {
        let id = self.open_session(params)?;
        let item = self.pending_item(&id, params)?;
        let to = match params.get("toIndex") {
            Some(value) => value
                .as_u64()
                .ok_or_else(|| bad("toIndex", "must be a number from 0"))?,
            None => return Err(bad("toIndex", "is missing")),
        } as usize;
        let mut order: Vec<String> = self
            .store()?
            .inbox(&id)
            .map_err(store_error)?
            .into_iter()
            .filter(|i| i.state == "pending")
            .map(|i| i.item_id)
            .collect();
        if to >= order.len() {
            return Err(RpcError::invalid_params(format!(
                "toIndex: {to} is out of range (0 to {})",
                order.len().saturating_sub(1)
            ))
            .with_data(json!({"code": "out_of_range"})));
        }
        order.retain(|i| *i != item.item_id);
        order.insert(to, item.item_id.clone());
        self.store()?
            .inbox_reorder(&id, &order)
            .map_err(store_error)?;
        self.event(
            &id,
            "inbox",
            json!({"itemId": item.item_id, "change": "moved"}),
        );
        Ok(json!({"itemId": item.item_id, "position": to}))
    }

    fn inbox_set_paused(&mut self, params: &Value) -> Result<Value, RpcError> {
        let id = self.open_session(params)?;
        let paused = params
            .get("paused")
            .ok_or_else(|| bad("paused", "is missing"))?
            .as_bool()
            .ok_or_else(|| bad("paused", "must be true or false"))?;
        if paused {
            self.pause_inbox(&id);
        } else {
            self.unpause_inbox(&id);
            self.dispatch_next(&id);
        }
        Ok(json!({"paused": self.sessions[&id].inbox_paused}))
    }

    fn inbox_retry(&mut self, params: &Value) -> Result<Value, RpcError> {
        let id = self.open_session(params)?;
        let item = self.item(&id, params)?;
        if !matches!(item.state.as_str(), "uncertain" | "failed") {
            return Err(RpcError::invalid_request(format!(
                "item {} is {}; only uncertain or failed items are retried",
                item.item_id, item.state
            ))
            .with_data(json!({"code": "not_retryable"})));
        }
        self.store()?
            .inbox_set_state(&id, &item.item_id, "pending")
            .map_err(store_error)?;
        self.event(
            &id,
            "inbox",
            json!({"itemId": item.item_id, "change": "retried"}),
        );
        Ok(json!({"itemId": item.item_id, "state": "pending"}))
    }

    fn inbox_refresh(&mut self, params: &Value) -> Result<Value, RpcError> {
        let id = self.open_session(params)?;
        let item = self.pending_item(&id, params)?;
        let blocks = item.prompt["blocks"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        let prompt =
            json!({"blocks": blocks, "frozen": freeze(&blocks, &self.workspace_roots(&id))});
        self.store()?
            .inbox_set_prompt(&id, &item.item_id, &prompt, item.bytes)
            .map_err(store_error)?;
        self.event(
            &id,
            "inbox",
            json!({"itemId": item.item_id, "change": "refreshed"}),
        );
        let item = self.item(&id, params)?;
        Ok(json!({"item": item_json(&item)}))
    }

    // -----------------------------------------------------------------
    // Dispatch, pause, recovery
    // -----------------------------------------------------------------

    fn save_flags(&mut self, id: &str) {
        let Some(session) = self.sessions.get(id) else {
            return;
        };
        let flags = Flags {
            paused: session.inbox_paused,
            recovered: session.inbox_recovered,
        };
        if let Ok(store) = self.store() {
            if let Err(error) = store.set_inbox_flags(id, flags) {
                log::warn!("cannot store the inbox flags of session {id}: {error}");
            }
        }
    }

    pub(in crate::agent) fn pause_inbox(&mut self, id: &str) {
        let Some(session) = self.sessions.get_mut(id) else {
            return;
        };
        if session.inbox_paused {
            return;
        }
        session.inbox_paused = true;
        self.save_flags(id);
        self.event(id, "inbox", json!({"change": "paused"}));
    }

    pub(in crate::agent) fn unpause_inbox(&mut self, id: &str) {
        let Some(session) = self.sessions.get_mut(id) else {
            return;
        };
        if !session.inbox_paused && !session.inbox_recovered {
            return;
        }
        session.inbox_paused = false;
        session.inbox_recovered = false;
        self.save_flags(id);
        self.event(id, "inbox", json!({"change": "resumed"}));
    }

    pub(in crate::agent) fn has_waiting_items(&mut self, id: &str) -> bool {
        self.store()
            .ok()
            .and_then(|store| store.inbox(id).ok())
            .is_some_and(|items| items.iter().any(|i| i.state == "pending"))
    }

    /// Starts the first pending item when the session is idle and its
    /// inbox runs; returns the item started.
    pub(in crate::agent) fn dispatch_next(&mut self, id: &str) -> Option<String> {
        let session = self.sessions.get(id)?;
        // After the end of input, only `--drain` lets queued work run.
        let closing = self.closing.is_some() && !self.options.drain;
        if session.running.is_some()
            || session.closed
            || session.inbox_paused
            || session.queued.is_some()
            || closing
        {
            return None;
        }
        let item = self
            .store()
            .ok()?
            .inbox(id)
            .ok()?
            .into_iter()
            .find(|i| i.state == "pending")?;
        let blocks = item.prompt["frozen"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        let source = if item.intent == "steer" {
            "steer"
        } else {
            "queue"
        };
        let start = TurnStart {
            request: None,
            source,
            item: Some(item.item_id.clone()),
        };
        match self.start_turn(id, &blocks, start) {
            Ok(()) => {
                self.event(
                    id,
                    "inbox",
                    json!({"itemId": item.item_id, "change": "dispatched"}),
                );
                Some(item.item_id)
            }
            Err(error) => {
                log::warn!(
                    "cannot start inbox item {}: {}",
                    item.item_id,
                    error.message
                );
                if let Ok(store) = self.store() {
                    let _ = store.inbox_set_state(id, &item.item_id, "failed");
                }
                self.pause_inbox(id);
                self.event(
                    id,
                    "inbox",
                    json!({"itemId": item.item_id, "change": "failed"}),
                );
                None
            }
        }
    }

    /// After a turn: its dispatched item is applied (failed on an error),
    /// and the inbox hears of the steers it applied.
    pub(in crate::agent) fn after_turn_inbox(
        &mut self,
        id: &str,
        dispatched: Option<&str>,
        applied: &[String],
        outcome: &str,
    ) {
        if let Some(item) = dispatched {
            let state = if outcome == "error" {
                "failed"
            } else {
                "applied"
            };
            if let Ok(store) = self.store() {
                if let Err(error) = store.inbox_set_state(id, item, state) {
                    log::warn!("cannot mark inbox item {item}: {error}");
                }
            }
            self.event(id, "inbox", json!({"itemId": item, "change": state}));
        }
        for item in applied {
            self.event(id, "inbox", json!({"itemId": item, "change": "applied"}));
        }
    }

    /// On load or resume: items left `dispatched` by a process that
    /// stopped become `uncertain`; an inbox with waiting items comes back
    /// paused and marked recovered, so the user looks first.
    pub(in crate::agent) fn recover_inbox(&mut self, id: &str) {
        self.recover_goal(id);
        let Ok(store) = self.store() else { return };
        let flags = store.inbox_flags(id).unwrap_or_default();
        let waiting = store.recover_inbox(id).unwrap_or(0);
        if let Some(session) = self.sessions.get_mut(id) {
            session.inbox_paused = flags.paused || waiting > 0;
            session.inbox_recovered = waiting > 0;
        }
        if waiting > 0 {
            self.save_flags(id);
        }
    }
}

impl Dispatcher {
    /// Commits the session's goal and tells the client (`goal` event),
    /// when it changed.
    pub(in crate::agent) fn goal_changed(&mut self, id: &str) {
        let Some(session) = self.sessions.get_mut(id) else {
            return;
        };
        if !session.goal_changed {
            return;
        }
        session.goal_changed = false;
        let goal = session
            .goal
            .as_ref()
            .map(|g| g.json())
            .unwrap_or(Value::Null);
        if let Ok(store) = self.store() {
            if let Err(error) = store.save_goal(id, &goal) {
                log::warn!("cannot store the goal of session {id}: {error}");
            }
        }
        self.event(id, "goal", json!({"goal": goal}));
    }

    /// `_spindle/session/goal/pause`: the running goal stops at its next
    /// continuation boundary (the step in flight finishes).
    fn goal_pause(&mut self, params: &Value) -> Result<Value, RpcError> {
        use crate::agent::common::goal::Status;
        let id = self.open_session(params)?;
        let session = self.sessions.get_mut(&id).expect("checked");
        let running = session
            .goal
            .as_ref()
            .is_some_and(|g| g.status == Status::Running);
        if !running {
            return Err(RpcError::new(-32011, "no goal is running in this session")
                .with_data(json!({"code": "no_running_goal"})));
        }
        if session.running.is_some() {
            // The turn stops at the boundary and reports the paused goal.
            if let Ok(mut live) = session.live.lock() {
                live.goal_pause = true;
            }
        } else if let Some(goal) = session.goal.as_mut() {
            goal.status = Status::Paused;
            goal.touch();
            session.goal_changed = true;
        }
        let goal = session.goal.as_ref().map(|g| g.json());
        self.goal_changed(&id);
        Ok(json!({"goal": goal, "pausing": self.sessions[&id].running.is_some()}))
    }

    /// `_spindle/session/goal/resume`: a paused, blocked, cancelled or
    /// budget-exhausted goal runs again; the next prompt continues it.
    fn goal_resume(&mut self, params: &Value) -> Result<Value, RpcError> {
        use crate::agent::common::goal::Status;
        let id = self.open_session(params)?;
        let session = self.sessions.get_mut(&id).expect("checked");
        let Some(goal) = session.goal.as_mut().filter(|g| g.resumable()) else {
            return Err(RpcError::new(
                -32010,
                "there is no paused, blocked, cancelled or budget-exhausted goal to resume",
            )
            .with_data(json!({"code": "no_resumable_goal"})));
        };
        goal.status = Status::Running;
        goal.question = None;
        goal.touch();
        let value = goal.json();
        session.goal_changed = true;
        let mode_changed = session.mode != crate::modes::Mode::Goal;
        session.mode = crate::modes::Mode::Goal;
        if mode_changed {
            self.send_update(
                &id,
                json!({"sessionUpdate": "current_mode_update", "currentModeId": "goal"}),
            );
        }
        self.goal_changed(&id);
        Ok(json!({"goal": value}))
    }
}

impl Dispatcher {
    /// On load or resume: the session's goal comes back; one that was
    /// running when its process stopped is paused (the user looks first).
    fn recover_goal(&mut self, id: &str) {
        use crate::agent::common::goal::{Goal, Status};
        let stored = self
            .store()
            .ok()
            .and_then(|store| store.goal(id).ok().flatten());
        let Some(mut goal) = stored.and_then(|v| serde_json::from_value::<Goal>(v).ok()) else {
            return;
        };
        let Some(session) = self.sessions.get_mut(id) else {
            return;
        };
        if goal.status == Status::Running {
            goal.status = Status::Paused;
            session.goal_changed = true;
        }
        session.goal = Some(goal);
        if session.goal_changed {
            self.goal_changed(id);
        }
    }
}

fn job_json(job: &crate::tools::jobs::JobInfo) -> Value {
    let mut item = json!({
        "jobId": job.job_id,
        "kind": job.kind,
        "title": job.command.chars().take(80).collect::<String>(),
        "command": job.command,
        "cwd": job.cwd,
        "state": job.state,
        "exitCode": job.exit_code,
        "startedAt": job.started_at,
        "endedAt": job.ended_at,
        "outputBytes": job.output_bytes,
    });
    // Where the editor shows it (a job in its terminal).
    if let Some(terminal) = &job.terminal_id {
        item["terminalId"] = json!(terminal);
    }
    item
}

/// The most characters of one text window.
const WINDOW_CAP: u64 = 262_144;

/// The largest workspace file a `resource` window reads (it is indexed in
/// one streaming pass, never held).
const RESOURCE_FILE_CAP: u64 = 4 * 1024 * 1024 * 1024;

fn count(params: &Value, field: &str, default: u64, max: u64) -> Result<u64, RpcError> {
    match params.get(field) {
        None | Some(Value::Null) => Ok(default),
        Some(value) => match value.as_u64() {
            Some(n) if n <= max => Ok(n),
            _ => Err(bad(
                field,
                &format!("must be a whole number from 0 to {max}"),
            )),
        },
    }
}

impl Dispatcher {
    /// Makes the session's jobs tell the dispatcher when they end.
    pub(in crate::agent) fn own_jobs(&mut self, id: &str) {
        let Some(session) = self.sessions.get(id) else {
            return;
        };
        let events = self.events.clone();
        let session_id = id.to_string();
        session
            .jobs
            .set_on_end(std::sync::Arc::new(move |job: &str, ended: bool| {
                let _ = events.send(crate::agent::dispatcher::Event::JobChanged {
                    session_id: session_id.clone(),
                    job_id: job.to_string(),
                    ended,
                });
            }));
        // Jobs of an earlier process: their records, ended.
        let records: Vec<crate::tools::jobs::JobInfo> = self
            .store()
            .ok()
            .and_then(|store| store.jobs(id).ok())
            .unwrap_or_default()
            .into_iter()
            .filter_map(|v| serde_json::from_value(v).ok())
            .collect();
        if records.is_empty() {
            return;
        }
        let jobs = self.sessions[id].jobs.clone();
        jobs.adopt(records);
        for job in jobs.list() {
            if let Ok(store) = self.store() {
                let record = serde_json::to_value(&job).unwrap_or_default();
                let _ = store.save_job(id, &job.job_id, &record);
            }
        }
    }

    /// A job started or ended: its record is committed; an end is told.
    pub(in crate::agent) fn job_changed(&mut self, id: &str, job_id: &str, ended: bool) {
        let Some(job) = self.sessions.get(id).and_then(|s| s.jobs.get(job_id)) else {
            return;
        };
        let record = serde_json::to_value(&job).unwrap_or_default();
        if let Ok(store) = self.store() {
            if let Err(error) = store.save_job(id, job_id, &record) {
                log::warn!("cannot store job {job_id}: {error}");
            }
        }
        if ended {
            self.job_ended(id, job_id);
        } else {
            self.event(id, "job", job_json(&job));
        }
    }

    /// A job ended: the client hears of it; in an idle session whose inbox
    /// runs and whose last turn ended normally, the model is told (a turn
    /// with source `job`).
    fn job_ended(&mut self, id: &str, job_id: &str) {
        let Some(session) = self.sessions.get(id) else {
            return;
        };
        let Some(job) = session.jobs.get(job_id) else {
            return;
        };
        self.event(id, "job", job_json(&job));
        let session = &self.sessions[id];
        let quiet = session.running.is_some()
            || session.closed
            || session.inbox_paused
            || session.last_outcome.as_deref() != Some("end_turn")
            || job.state == "killed";
        if quiet || self.closing.is_some() {
            return;
        }
        let size = std::fs::metadata(&job.log_path)
            .map(|m| m.len())
            .unwrap_or(0);
        // An agent job's log ends with its answer (one JSON line).
        let window: u64 = if job.kind == "agent" { 262_144 } else { 2_048 };
        let tail = crate::tools::jobs::read_window(
            &job.log_path,
            size.saturating_sub(window),
            window as usize,
        )
        .map(|(text, _)| text)
        .unwrap_or_default();
        let tail = if job.kind == "agent" {
            crate::agent::turn::agent_answer(&tail)
        } else {
            tail
        };
        let text = format!(
            "(The background job {} `{}` ended: {}.) The end of its output:\n{}",
            job.job_id,
            job.command,
            job.exit_code
                .map(|c| format!("exit code {c}"))
                .unwrap_or_else(|| job.state.clone()),
            if tail.is_empty() {
                "(no output)"
            } else {
                &tail
            }
        );
        let start = TurnStart {
            request: None,
            source: "job",
            item: None,
        };
        if let Err(error) = self.start_turn(id, &[json!({"type": "text", "text": text})], start) {
            log::warn!(
                "cannot tell the model that job {job_id} ended: {}",
                error.message
            );
        }
    }

    fn session_job(
        &mut self,
        params: &Value,
    ) -> Result<(String, crate::tools::jobs::JobInfo), RpcError> {
        let id = self.open_session(params)?;
        let job_id = string(params, "jobId")?;
        let job = self.sessions[&id].jobs.get(job_id).ok_or_else(|| {
            RpcError::invalid_params(format!("jobId: no job {job_id:?} in session {id}"))
                .with_data(json!({"code": "unknown_job"}))
        })?;
        Ok((id, job))
    }

    fn jobs_list(&mut self, params: &Value) -> Result<Value, RpcError> {
        let id = self.open_session(params)?;
        let jobs = self.sessions[&id].jobs.list();
        let start = match params.get("cursor") {
            None | Some(Value::Null) => 0,
            Some(Value::String(cursor)) => cursor
                .parse::<usize>()
                .map_err(|_| bad("cursor", "is not a cursor this agent gave"))?,
            Some(_) => return Err(bad("cursor", "must be a string")),
        };
        let limit = count(params, "limit", 100, 500)?.max(1) as usize;
        let items: Vec<Value> = jobs.iter().skip(start).take(limit).map(job_json).collect();
        let next = (start + items.len() < jobs.len()).then(|| (start + items.len()).to_string());
        Ok(json!({"items": items, "nextCursor": next}))
    }

    fn job_item(&mut self, params: &Value) -> Result<Value, RpcError> {
        let (_, job) = self.session_job(params)?;
        Ok(job_json(&job))
    }

    /// `_spindle/job/transcript`; `None`: a thread indexing the log of an
    /// agent job answers.
    pub(in crate::agent) fn job_transcript(
        &mut self,
        request: &crate::rpc::RequestId,
        params: &Value,
    ) -> Option<Result<Value, RpcError>> {
        self.transcript(request, params).transpose()
    }

    fn transcript(
        &mut self,
        request: &crate::rpc::RequestId,
        params: &Value,
    ) -> Result<Option<Value>, RpcError> {
        let (id, job) = self.session_job(params)?;
        let agent = job.kind == "agent";
        match (optional_string(params, "output")?, agent) {
            (None | Some("text"), false) => {}
            (None | Some("structured"), true) => {
                return self.structured_transcript(request, &id, job, params)
            }
            (Some(other), false) => {
                return Err(bad(
                    "output",
                    &format!("{other:?} does not apply to a command job; use \"text\""),
                ))
            }
            (Some(other), true) => {
                return Err(bad(
                    "output",
                    &format!("{other:?} does not apply to an agent job; use \"structured\""),
                ))
            }
        }
        let offset = count(params, "offset", 0, u64::MAX >> 1)?;
        let limit = count(params, "limit", 65_536, WINDOW_CAP)?;
        let (text, next, total) = log_bytes(&job.log_path, offset, limit)?;
        let complete = next >= total && job.state != "running";
        Ok(Some(json!({
            "text": text,
            "offset": offset,
            "nextOffset": if complete { Value::Null } else { json!(next) },
            "total": total,
            "complete": complete,
        })))
    }

    /// An agent job's updates, from update `offset`: at most `limit`
    /// (default 100, at most 200) and 262,144 bytes; an update larger
    /// than that alone is -32600 `too_large`, without advancing.
    fn structured_transcript(
        &mut self,
        request: &crate::rpc::RequestId,
        id: &str,
        job: crate::tools::jobs::JobInfo,
        params: &Value,
    ) -> Result<Option<Value>, RpcError> {
        let offset = count(params, "offset", 0, u64::MAX >> 1)?;
        let limit = count(params, "limit", 100, 200)?;
        let indexes = self.sessions[id].line_indexes.clone();
        let path = job.log_path.clone();
        let unreadable = {
            let job_id = job.job_id.clone();
            move |_| RpcError::internal(format!("the log of job {job_id} cannot be read"))
        };
        let capabilities = self.client.clone().unwrap_or_default();
        self.answer_when_indexed(request, indexes, path, unreadable.clone(), move |index| {
            structured_updates(&job, index, offset, limit, &capabilities, unreadable)
        })
    }

    /// Answers from `file`'s line index: at once when the session has it
    /// (and the file is unchanged); else a thread of its own makes it and
    /// answers the request (`Ok(None)`), so a long pass never holds the
    /// dispatcher. At most [`INDEXING_AT_ONCE`] such threads at a time.
    fn answer_when_indexed(
        &mut self,
        request: &crate::rpc::RequestId,
        indexes: std::sync::Arc<std::sync::Mutex<crate::tools::lines::Indexes>>,
        file: std::path::PathBuf,
        failure: impl Fn(crate::tools::lines::LinesError) -> RpcError + Send + 'static,
        answer: impl FnOnce(&crate::tools::lines::FileIndex) -> Result<Value, RpcError> + Send + 'static,
    ) -> Result<Option<Value>, RpcError> {
        use std::sync::atomic::Ordering;
        let cached = indexes
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .cached(&file, RESOURCE_FILE_CAP)
            .map_err(&failure)?;
        if let Some(index) = cached {
            return answer(&index).map(Some);
        }
        let busy = &self.indexing;
        if busy.fetch_add(1, Ordering::SeqCst) >= INDEXING_AT_ONCE {
            busy.fetch_sub(1, Ordering::SeqCst);
            return Err(RpcError::invalid_request(format!(
                "{INDEXING_AT_ONCE} files are being read for windows already; ask again when one is answered"
            ))
            .with_data(json!({"code": "busy"})));
        }
        let busy = busy.clone();
        let writer = self.writer.clone();
        let request = request.clone();
        let spawned = std::thread::Builder::new()
            .name("spindle-index".into())
            .spawn(move || {
                // Whatever happens in the pass, the request is answered
                // and the slot given back.
                let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    crate::tools::lines::index(&file, RESOURCE_FILE_CAP)
                        .map_err(&failure)
                        .and_then(|index| {
                            indexes
                                .lock()
                                .unwrap_or_else(|poisoned| poisoned.into_inner())
                                .keep(&file, index.clone());
                            answer(&index)
                        })
                }))
                .unwrap_or_else(|_| {
                    Err(RpcError::internal("reading a file for a window failed")
                        .with_data(json!({"code": "internal_panic"})))
                });
                busy.fetch_sub(1, Ordering::SeqCst);
                let line = match result {
                    Ok(value) => crate::rpc::response_line(&request, &value),
                    Err(error) => crate::rpc::error_line(&request, &error),
                };
                let _ = writer.send(crate::rpc::stdio::Output::Line(line).queued());
            });
        if spawned.is_err() {
            self.indexing.fetch_sub(1, Ordering::SeqCst);
            return Err(RpcError::internal("cannot start a thread to read the file"));
        }
        Ok(None)
    }

    fn job_send(&mut self, params: &Value) -> Result<Value, RpcError> {
        let (id, job) = self.session_job(params)?;
        let text = string(params, "text")?;
        // Below a pipe's capacity, so a job that reads gets it whole.
        if text.len() > 16 * 1024 {
            return Err(bad("text", "is too long").with_data(json!({"code": "too_large"})));
        }
        self.sessions[&id]
            .jobs
            .send(&job.job_id, text)
            .map_err(|problem| {
                let code = if job.terminal_id.is_some() {
                    "in_terminal"
                } else if job.state != "running" {
                    "not_running"
                } else {
                    "not_reading"
                };
                RpcError::invalid_request(problem).with_data(json!({"code": code}))
            })?;
        Ok(job_json(
            &self.sessions[&id].jobs.get(&job.job_id).unwrap_or(job),
        ))
    }

    fn job_cancel(&mut self, params: &Value) -> Result<Value, RpcError> {
        let (id, job) = self.session_job(params)?;
        let info = self.sessions[&id]
            .jobs
            .kill(&job.job_id)
            .map_err(RpcError::internal)?;
        Ok(job_json(&info))
    }

    /// `_spindle/resource`: a window of a workspace file (with its
    /// revision) or of a job's log. A workspace file not indexed yet (or
    /// changed since) is read on a thread of its own, which answers: a pass
    /// over a file of gigabytes never holds the dispatcher. `None`: that
    /// thread answers.
    pub(in crate::agent) fn resource(
        &mut self,
        request: &crate::rpc::RequestId,
        params: &Value,
    ) -> Option<Result<Value, RpcError>> {
        match self.workspace_window(request, params) {
            Ok(Some(answer)) => Some(Ok(answer)),
            Ok(None) => None,
            Err(error) => Some(Err(error)),
        }
    }

    fn workspace_window(
        &mut self,
        request: &crate::rpc::RequestId,
        params: &Value,
    ) -> Result<Option<Value>, RpcError> {
        let id = self.open_session(params)?;
        let uri = string(params, "uri")?;
        if let Some(job_id) = uri.strip_prefix("shell-log:") {
            return self.log_window(&id, job_id, params).map(Some);
        }
        let Some(path) = uri.strip_prefix("workspace:") else {
            return Err(bad("uri", "must start with workspace: or shell-log:"));
        };
        let root = self.sessions[&id].cwd.clone();
        let resolved = crate::tools::paths::resolve(&root, path);
        if !resolved.inside {
            return Err(
                RpcError::invalid_params(format!("uri: {path} is outside the workspace"))
                    .with_data(json!({"code": "outside_workspace"})),
            );
        }
        let start = count(params, "startLine", 1, u64::MAX >> 1)?.max(1);
        let lines = count(params, "lineCount", 200, 2_000)?;
        let indexes = self.sessions[&id].line_indexes.clone();
        let shown = path.to_string();
        let file = resolved.path.clone();
        let failure = {
            let shown = shown.clone();
            move |error| lines_failure(&shown, error)
        };
        self.answer_when_indexed(request, indexes, resolved.path, failure, move |index| {
            file_window(&shown, &file, index, start, lines)
        })
    }

    /// A window of a job's log, by bytes.
    fn log_window(&mut self, id: &str, job_id: &str, params: &Value) -> Result<Value, RpcError> {
        let job = self.sessions[id].jobs.get(job_id).ok_or_else(|| {
            RpcError::invalid_params(format!("uri: no job {job_id:?}"))
                .with_data(json!({"code": "unknown_job"}))
        })?;
        let offset = count(params, "byteOffset", 0, u64::MAX >> 1)?;
        let wanted = count(params, "byteCount", 65_536, WINDOW_CAP)?;
        let (text, next, total) = log_bytes(&job.log_path, offset, wanted)?;
        Ok(
            json!({"text": text, "byteOffset": offset, "byteCount": next - offset, "totalBytes": total}),
        )
    }
}

/// `wanted` bytes of a job's log from `offset`, as text: the text, the
/// offset after it and the log's size.
fn log_bytes(
    path: &std::path::Path,
    offset: u64,
    wanted: u64,
) -> Result<(String, u64, u64), RpcError> {
    let total = std::fs::metadata(path).map(|m| m.len()).unwrap_or(0);
    if offset >= total {
        return Ok((String::new(), total, total));
    }
    let (text, next) = crate::tools::jobs::read_window(path, offset, wanted as usize)
        .map_err(RpcError::internal)?;
    Ok((text, next, total))
}

/// The updates of an agent job's log from `offset` (see
/// `structured_transcript`).
/// Each update is fitted to the client as a live one would be (the log
/// holds the stored form), and one it must not get is left out; offsets
/// count the log's updates either way.
fn structured_updates(
    job: &crate::tools::jobs::JobInfo,
    index: &crate::tools::lines::FileIndex,
    offset: u64,
    limit: u64,
    capabilities: &crate::acp::ClientCapabilities,
    unreadable: impl Fn(crate::tools::lines::LinesError) -> RpcError,
) -> Result<Value, RpcError> {
    let total = index.total_lines;
    let lines = crate::tools::lines::window(
        &job.log_path,
        index,
        offset + 1,
        limit,
        WINDOW_CAP as usize + 1,
    )
    .map_err(unreadable)?;
    if lines.first().is_some_and(|l| l.len() > WINDOW_CAP as usize) {
        return Err(RpcError::invalid_request(format!(
            "update {offset} of job {} is over {WINDOW_CAP} bytes",
            job.job_id
        ))
        .with_data(json!({"code": "too_large"})));
    }
    let mut updates = Vec::new();
    let mut used = 0usize;
    let mut read = 0u64;
    for line in &lines {
        if used + line.len() > WINDOW_CAP as usize {
            break;
        }
        used += line.len();
        read += 1;
        let mut update = serde_json::from_str::<Value>(line).unwrap_or(Value::Null);
        if crate::acp::fit::fit(&mut update, capabilities) {
            updates.push(update);
        }
    }
    let next = offset + read;
    let complete = next >= total && job.state != "running";
    Ok(json!({
        "updates": updates,
        "offset": offset,
        "nextOffset": if complete { Value::Null } else { json!(next) },
        "total": total,
        "complete": complete,
    }))
}

/// How many files may be read for windows at once.
const INDEXING_AT_ONCE: usize = 4;

/// Why a workspace file has no window, for the client.
fn lines_failure(path: &str, error: crate::tools::lines::LinesError) -> RpcError {
    use crate::tools::lines::LinesError;
    match error {
        LinesError::NotText => RpcError::invalid_params(format!("uri: {path} is not UTF-8 text"))
            .with_data(json!({"code": "not_text"})),
        LinesError::TooLarge => RpcError::invalid_params(format!(
            "uri: {path} is over {} MiB, too large for a window",
            RESOURCE_FILE_CAP >> 20
        ))
        .with_data(json!({"code": "too_large"})),
        LinesError::Unreadable => RpcError::invalid_params(format!("uri: {path} cannot be read"))
            .with_data(json!({"code": "unreadable"})),
    }
}

/// The answer for lines `start..start + lines` of an indexed file.
fn file_window(
    shown: &str,
    path: &std::path::Path,
    index: &crate::tools::lines::FileIndex,
    start: u64,
    lines: u64,
) -> Result<Value, RpcError> {
    let window = crate::tools::lines::window(path, index, start, lines, WINDOW_CAP as usize)
        .map_err(|error| lines_failure(shown, error))?;
    let mut text = window.join("\n");
    if text.len() > WINDOW_CAP as usize {
        let mut end = WINDOW_CAP as usize;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        text.truncate(end);
    }
    Ok(json!({
        "text": text,
        "startLine": start,
        "lineCount": window.len(),
        "totalLines": index.total_lines,
        "revision": index.revision,
    }))
}

fn round6(value: f64) -> f64 {
    (value * 1e6).round() / 1e6
}

/// `usage.costQuote` (EXTENSIONS §6): the session's totals (`usage` and
/// the cost so far) priced by the model's table; incomplete, never a
/// silent 0, when a call had no price.
fn cost_quote(
    session: &crate::agent::dispatcher::session::Session,
    (usage, spent): (crate::provider::Usage, f64),
    entry: Option<&crate::agent::common::models::ModelEntry>,
    registry: Option<&Registry>,
) -> Value {
    let price = entry.and_then(|e| e.config.price.as_ref());
    let complete = price.is_some() && session.unpriced_calls == 0;
    let local = entry
        .and_then(|e| registry.and_then(|r| r.config.providers.get(&e.provider)))
        .and_then(|p| p.base_url.as_deref())
        .is_some_and(|url| url.contains("://127.0.0.1") || url.contains("://localhost"));
    let billing = if price.is_none() && local {
        "free"
    } else {
        "per_token"
    };
    let Some(price) = price else {
        return json!({
            "currency": null,
            "originalTotals": null,
            "valuation": "official_table",
            "costComplete": false,
            "displayComplete": false,
            "displayStatus": "unknown",
            "billingMode": billing,
        });
    };
    let cached = usage.cached_tokens.min(usage.input_tokens);
    let per = |tokens: u64, rate: f64| round6(tokens as f64 * rate / 1e6);
    let input = per(usage.input_tokens - cached, price.input);
    let cached_input = per(cached, price.cached_input.unwrap_or(price.input));
    let reasoning = per(
        usage.reasoning_tokens.min(usage.output_tokens),
        price.output,
    );
    let output = per(
        usage.output_tokens - usage.reasoning_tokens.min(usage.output_tokens),
        price.output,
    );
    json!({
        "currency": price.currency,
        "originalTotals": {
            "input": input,
            "cachedInput": cached_input,
            "output": output,
            "reasoning": reasoning,
            "total": round6(spent),
        },
        "valuation": "official_table",
        "costComplete": complete,
        "displayComplete": complete,
        "displayStatus": if complete { "exact" } else { "estimate" },
        "billingMode": billing,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn link(path: &str) -> Value {
        json!({"type": "resource_link", "uri": format!("file://{path}"), "name": "f"})
    }

    #[test]
    fn freezing_reads_only_workspace_files_within_the_caps() {
        let base =
            std::env::temp_dir().join(format!("spindle-freeze-{}", crate::util::random_hex()));
        let ws = base.join("ws");
        let extra = base.join("extra");
        std::fs::create_dir_all(&ws).unwrap();
        std::fs::create_dir_all(&extra).unwrap();
        std::fs::write(ws.join("a b.txt"), "inside").unwrap();
        std::fs::write(extra.join("more.txt"), "another root").unwrap();
        std::fs::write(base.join("secret.txt"), "outside").unwrap();
        std::fs::write(ws.join("binary.bin"), [0xff, 0xfe, 0x00]).unwrap();
        std::os::unix::fs::symlink(base.join("secret.txt"), ws.join("link.txt")).unwrap();
        let big = "x".repeat(150 * 1024);
        for i in 0..2 {
            std::fs::write(ws.join(format!("big{i}.txt")), &big).unwrap();
        }
        let ws_s = ws.display().to_string();
        let roots = [ws.clone(), extra.clone()];
        let frozen = freeze(
            &[
                link(&format!("{ws_s}/a%20b.txt")),
                json!({"type": "resource_link", "uri": format!("file://localhost{ws_s}/a%20b.txt#L1:2"), "name": "f"}),
                json!({"type": "resource_link", "uri": format!("file:{ws_s}/a%20b.txt?symbol=x"), "name": "f"}),
                link(&format!("{}/more.txt", extra.display())),
                link(&format!("{}/secret.txt", base.display())),
                link(&format!("{ws_s}/../secret.txt")),
                link(&format!("{ws_s}/link.txt")),
                link(&format!("{ws_s}/bad%zz")),
                link(&format!("{ws_s}/binary.bin")),
                json!({"type": "resource_link", "uri": "file://elsewhere/a%20b.txt", "name": "f"}),
                json!({"type": "resource_link", "uri": "https://example.com/a", "name": "f"}),
            ],
            &roots,
        );
        for block in &frozen[..3] {
            assert_eq!(block["resource"]["text"], "inside", "{block}");
        }
        assert_eq!(frozen[3]["resource"]["text"], "another root");
        for block in &frozen[4..] {
            assert_eq!(block["type"], "resource_link", "{block}");
        }
        // One 150 KiB file fits in the item's 262,144 bytes, the second
        // does not.
        let links: Vec<Value> = (0..2)
            .map(|i| link(&format!("{ws_s}/big{i}.txt")))
            .collect();
        let frozen = freeze(&links, &roots);
        assert_eq!(frozen[0]["type"], "resource");
        assert_eq!(frozen[1]["type"], "resource_link");
        assert!(Value::Array(frozen).to_string().len() <= ITEM_CAP);
        // Text that grows when escaped is measured as JSON.
        std::fs::write(ws.join("lines.txt"), "\n".repeat(200 * 1024)).unwrap();
        let frozen = freeze(&[link(&format!("{ws_s}/lines.txt"))], &roots);
        assert_eq!(frozen[0]["type"], "resource_link");
        assert_eq!(percent_decode("/a%2Fb"), Some("/a/b".into()));
        assert_eq!(percent_decode("/a%00"), None);
        assert_eq!(percent_decode("/a%4"), None);
        let _ = std::fs::remove_dir_all(&base);
    }
}

//! The terminal's client of an in-process agent: `spindle exec` runs
//! `agent::serve` on a thread and speaks ACP to it over two pipes, as an
//! editor would; the agent's requests (permissions) and updates go to a
//! [`Client`], anything else it asks is refused.

use super::failure::Failure;
use crate::agent::Options;
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Lines, PipeReader, PipeWriter, Write};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

/// What the person at the terminal sees and answers.
pub(super) trait Client {
    fn update(&mut self, update: &Value);
    /// The result of a `session/request_permission`.
    fn permission(&mut self, params: &Value) -> Value;
    /// An answer to a request the client sent itself (through a
    /// [`Sender`]), not the one being waited for.
    fn answer(&mut self, _message: &Value) {}
}

/// The writing end, shared with a signal handler that cancels; `None`
/// once the link closed it.
pub(super) type Sender = Arc<Mutex<Option<PipeWriter>>>;

pub(super) struct Link {
    to: Sender,
    lines: Lines<BufReader<PipeReader>>,
    next: u64,
    agent: JoinHandle<Result<(), crate::agent::ServeError>>,
}

/// Writes one message; false when the agent is gone.
pub(super) fn send(to: &Sender, message: &Value) -> bool {
    let mut line = message.to_string();
    line.push('\n');
    match to.lock().as_deref_mut() {
        Ok(Some(to)) => to.write_all(line.as_bytes()).is_ok() && to.flush().is_ok(),
        _ => false,
    }
}

impl Link {
    pub(super) fn start(options: Options) -> Result<Link, Failure> {
        let pipe = || std::io::pipe().map_err(|error| Failure::Failed(error.to_string()));
        let (to_agent_reader, to_agent) = pipe()?;
        let (from_agent, from_agent_writer) = pipe()?;
        let agent = std::thread::Builder::new()
            .name("spindle-exec-agent".into())
            .spawn(move || crate::agent::serve(options, to_agent_reader, from_agent_writer))
            .map_err(|error| Failure::Failed(format!("cannot start the agent thread: {error}")))?;
        Ok(Link {
            to: Arc::new(Mutex::new(Some(to_agent))),
            lines: BufReader::new(from_agent).lines(),
            next: 0,
            agent,
        })
    }

    pub(super) fn sender(&self) -> Sender {
        self.to.clone()
    }

    /// Sends a request and waits for its answer, handing the agent's
    /// updates and questions to `client` meanwhile: `Ok(Ok(result))`,
    /// `Ok(Err(error))` for a JSON-RPC error, `Err` when the agent ended.
    pub(super) fn call(
        &mut self,
        method: &str,
        params: Value,
        client: &mut dyn Client,
    ) -> Result<Result<Value, Value>, Failure> {
        let id = self.next;
        self.next += 1;
        let request = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        if !send(&self.to, &request) {
            return Err(Failure::Broken);
        }
        for line in self.lines.by_ref() {
            let Ok(line) = line else { break };
            let Ok(message) = serde_json::from_str::<Value>(&line) else {
                continue;
            };
            match (message["method"].as_str(), message.get("id")) {
                (Some("session/request_permission"), Some(asked)) => {
                    let result = client.permission(&message["params"]);
                    let answer = json!({"jsonrpc": "2.0", "id": asked, "result": result});
                    if !send(&self.to, &answer) {
                        return Err(Failure::Broken);
                    }
                }
                (Some(other), Some(asked)) => {
                    let answer = json!({"jsonrpc": "2.0", "id": asked, "error": {"code": -32601,
                        "message": format!("the terminal client does not offer {other}")}});
                    if !send(&self.to, &answer) {
                        return Err(Failure::Broken);
                    }
                }
                (Some("session/update"), None) => client.update(&message["params"]["update"]),
                (Some(_), None) => {}
                (None, _) if message["id"] == id => {
                    return Ok(match message.get("error") {
                        Some(error) => Err(error.clone()),
                        None => Ok(message["result"].clone()),
                    });
                }
                (None, _) => client.answer(&message),
            }
        }
        Err(Failure::Broken)
    }

    /// Ends the agent (its input closes) and waits for it.
    pub(super) fn close(self) -> Result<(), Failure> {
        if let Ok(mut to) = self.to.lock() {
            to.take();
        }
        drop(self.lines);
        match self.agent.join() {
            Ok(Ok(())) => Ok(()),
            Ok(Err(error)) => Err(Failure::Failed(error.to_string())),
            Err(_) => Err(Failure::Failed("the agent thread panicked".into())),
        }
    }
}

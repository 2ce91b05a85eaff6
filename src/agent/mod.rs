//! The agent: wires the reader, dispatcher, turn workers and writer
//! together and runs until the client goes away.

mod client;
mod dispatcher;
pub mod permission;
mod prompt;
mod prompting;
mod runner;
mod session;
mod sessions;
mod turn;
mod updates;

use crate::provider::http::Timeouts;
use crate::provider::openai::{ChatCompletions, DEFAULT_BASE_URL};
use crate::provider::script::{Script, ScriptProvider};
use crate::provider::Provider;
use crate::rpc::stdio::{self, Input, Output};
use std::io::{Read, Write};
use std::path::PathBuf;
use std::sync::Arc;

pub use prompt::system_prompt;

/// The default model when neither `--model` nor a config names one.
pub const DEFAULT_MODEL: &str = "gpt-4.1-mini";

/// Start-up choices of `spindle acp`.
#[derive(Debug, Clone, Default)]
pub struct Options {
    pub model: Option<String>,
    pub script: Option<PathBuf>,
    /// On stdin EOF, let running turns finish instead of cancelling them.
    pub drain: bool,
    pub timeouts: Timeouts,
    /// The approval policy new sessions start with.
    pub permissions: permission::Policy,
    /// The most model calls one turn may make (0: the default).
    pub max_steps: usize,
    /// The session database (default: `store::default_path()`).
    pub db: Option<PathBuf>,
}

/// Model calls per turn when nothing else says.
pub const DEFAULT_MAX_STEPS: usize = 50;

/// Everything the dispatcher hears about, from the reader or a worker.
#[derive(Debug)]
pub enum Event {
    Input(Input),
    TurnEnded(turn::TurnEnd),
    /// A turn needs the client (permission, files, terminals).
    ClientRequest(client::OutgoingRequest),
}

impl From<Input> for Event {
    fn from(input: Input) -> Self {
        Event::Input(input)
    }
}

/// Builds the model provider the options ask for.
pub fn provider_for(options: &Options) -> Result<Arc<dyn Provider>, String> {
    if let Some(path) = &options.script {
        let script = Script::load(path)?;
        return Ok(Arc::new(ScriptProvider::new(script)));
    }
    let base_url = std::env::var("OPENAI_BASE_URL")
        .ok()
        .filter(|url| !url.trim().is_empty())
        .unwrap_or_else(|| DEFAULT_BASE_URL.to_string());
    let api_key = std::env::var("OPENAI_API_KEY")
        .ok()
        .filter(|key| !key.trim().is_empty());
    Ok(Arc::new(ChatCompletions {
        base_url,
        api_key,
        model: options
            .model
            .clone()
            .unwrap_or_else(|| DEFAULT_MODEL.to_string()),
        timeouts: options.timeouts,
    }))
}

/// Serves ACP on `input`/`output` until the input ends and the running
/// turns are settled. Returns an error only when the agent could not start.
pub fn serve<R, W>(options: Options, input: R, output: W) -> Result<(), String>
where
    R: Read + Send + 'static,
    W: Write + Send + 'static,
{
    let provider = provider_for(&options)?;
    let mut options = options;
    // A scripted run is a demo or a test: unless a database is named, its
    // sessions live in a temporary database removed at exit, so they
    // neither clutter the user's history nor collide with earlier runs.
    let ephemeral = if options.script.is_some() && options.db.is_none() {
        let path = std::env::temp_dir().join(format!(
            "spindle-scripted-{}-{}.db",
            std::process::id(),
            crate::util::random_hex()
        ));
        options.db = Some(path.clone());
        Some(path)
    } else {
        None
    };
    let (event_sender, events) = crossbeam_channel::unbounded::<Event>();
    let (line_sender, lines) = crossbeam_channel::unbounded::<Output>();
    let writer = stdio::spawn_writer(output, lines).map_err(|e| e.to_string())?;
    let reader = stdio::spawn_reader(input, event_sender.clone()).map_err(|e| e.to_string())?;
    let dispatcher = {
        let line_sender = line_sender.clone();
        std::thread::Builder::new()
            .name("spindle-dispatcher".into())
            .spawn(move || {
                dispatcher::Dispatcher::new(options, provider, line_sender, event_sender)
                    .run(&events)
            })
            .map_err(|e| e.to_string())?
    };
    let dispatcher_result = dispatcher.join();
    let _ = line_sender.send(Output::Close);
    let _ = writer.join();
    // The reader has seen EOF (that is what ends the dispatcher), so this
    // join returns at once.
    let _ = reader.join();
    if let Some(path) = ephemeral {
        for suffix in ["", "-wal", "-shm", "-journal"] {
            let mut file = path.clone().into_os_string();
            file.push(suffix);
            let _ = std::fs::remove_file(file);
        }
    }
    dispatcher_result.map_err(|_| "the dispatcher thread panicked".to_string())
}

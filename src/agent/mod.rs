//! The agent: wires the reader, dispatcher, turn workers and writer
//! together and runs until the client goes away.

mod client;
mod commands;
mod content;
pub mod controls;
mod dispatcher;
mod handshake;
pub mod models;
pub mod permission;
mod prompt;
mod prompting;
mod runner;
mod session;
mod sessions;
mod shell;
mod turn;
mod updates;

use crate::provider::http::Timeouts;
use crate::provider::script::Script;
use crate::rpc::stdio::{self, Input, Output};
use std::io::{Read, Write};
use std::path::PathBuf;

pub use prompt::system_prompt;

/// Start-up choices of `spindle acp`.
#[derive(Debug, Clone, Default)]
pub struct Options {
    pub model: Option<String>,
    pub script: Option<PathBuf>,
    /// On stdin EOF, let running turns finish instead of cancelling them.
    pub drain: bool,
    pub timeouts: Timeouts,
    /// The approval policy new sessions start with (else the workspace's
    /// last choice, the config file's default, or ask).
    pub permissions: Option<permission::Policy>,
    /// The execution preset new sessions start with.
    pub preset: Option<controls::Preset>,
    /// The config file (default: `config::default_path()`).
    pub config: Option<PathBuf>,
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

/// Serves ACP on `input`/`output` until the input ends and the running
/// turns are settled. Returns an error only when the agent could not start.
pub fn serve<R, W>(options: Options, input: R, output: W) -> Result<(), String>
where
    R: Read + Send + 'static,
    W: Write + Send + 'static,
{
    // A broken script is a usage problem worth stopping for at once.
    if let Some(path) = &options.script {
        Script::load(path)?;
    }
    let mut options = options;
    // A scripted run is a demo or a test: unless a database is named, its
    // sessions (and their command logs) live in a private temporary folder
    // removed at exit, so they neither clutter the user's history nor
    // collide with earlier runs.
    let ephemeral = if options.script.is_some() && options.db.is_none() {
        let dir = std::env::temp_dir().join(format!(
            "spindle-scripted-{}-{}",
            std::process::id(),
            crate::util::random_hex()
        ));
        {
            use std::os::unix::fs::DirBuilderExt;
            std::fs::DirBuilder::new()
                .mode(0o700)
                .create(&dir)
                .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
        }
        options.db = Some(dir.join("spindle.db"));
        Some(dir)
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
                dispatcher::Dispatcher::new(options, line_sender, event_sender).run(&events)
            })
            .map_err(|e| e.to_string())?
    };
    let dispatcher_result = dispatcher.join();
    let _ = line_sender.send(Output::Close);
    let _ = writer.join();
    // The reader has seen EOF (that is what ends the dispatcher), so this
    // join returns at once.
    let _ = reader.join();
    if let Some(dir) = ephemeral {
        let _ = std::fs::remove_dir_all(dir);
    }
    dispatcher_result.map_err(|_| "the dispatcher thread panicked".to_string())
}

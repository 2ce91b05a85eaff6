//! The agent: wires the reader, dispatcher, turn workers and writer
//! together and runs until the client goes away.
//!
//! The folders are the threads: `dispatcher/` is the dispatcher thread and
//! the session state it alone owns; `handlers/` are the requests it
//! answers, one file per area; `turn/` is the turn worker and what it
//! drives; `common/` is what both sides use. `signals.rs` is the thread
//! that turns termination signals into the dispatcher's `Signal` event.
//!
//! Imports run one way: handlers → dispatcher → common (the dispatcher
//! reaches the handlers only through the table `handlers::EVENTS`, given
//! to it here); the dispatcher and handlers → the turn's public faces only
//! (`turn/mod.rs`, `report.rs`, `client.rs`, `processes.rs`); turn →
//! common. Nothing in `turn/` names the dispatcher (its reports go through
//! an `Outbox`), and `common/` names nothing else of the agent;
//! `tests/it/architecture.rs` checks this.

mod common;
mod dispatcher;
mod handlers;
mod signals;
mod turn;

pub use common::options::{Options, DEFAULT_MAX_STEPS};
pub use common::prompt::{skipped_files, system_prompt};
pub use common::{commands, hooks, models, permission, skills};
pub use turn::offered::{first_request, is_lean};

use crate::provider::script::Script;
use crate::rpc::stdio::{self, Output, Queued};
use dispatcher::{Dispatcher, Event};

/// Lines of turn output waiting for stdout, at most (each a few hundred
/// bytes to 64 KiB).
const STREAM_QUEUE: usize = 256;
use std::io::{Read, Write};

/// Why [`serve`] failed: the agent could not start, or its dispatcher
/// died. Each says what went wrong in words a person can act on.
#[derive(Debug)]
pub enum ServeError {
    /// The `--script` file cannot be used (the reason says why).
    Script(String),
    /// The private folder of a scripted run's sessions cannot be made.
    Scratch {
        dir: std::path::PathBuf,
        error: std::io::Error,
    },
    /// The termination signals cannot be caught.
    Signals(std::io::Error),
    /// One of the agent's threads cannot start.
    Thread {
        name: &'static str,
        error: std::io::Error,
    },
    /// The dispatcher thread panicked.
    DispatcherPanicked,
}

impl std::fmt::Display for ServeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ServeError::Script(why) => f.write_str(why),
            ServeError::Scratch { dir, error } => {
                write!(f, "cannot create {}: {error}", dir.display())
            }
            ServeError::Signals(error) => write!(f, "cannot catch termination signals: {error}"),
            ServeError::Thread { name, error } => {
                write!(f, "cannot start the agent's {name} thread: {error}")
            }
            ServeError::DispatcherPanicked => f.write_str("the dispatcher thread panicked"),
        }
    }
}

impl std::error::Error for ServeError {}

/// Serves ACP on `input`/`output` until the input ends and the running
/// turns are settled. Returns an error only when the agent could not
/// start, or its dispatcher panicked.
pub fn serve<R, W>(options: Options, input: R, output: W) -> Result<(), ServeError>
where
    R: Read + Send + 'static,
    W: Write + Send + 'static,
{
    // A broken script is a usage problem worth stopping for at once.
    if let Some(path) = &options.script {
        Script::load(path).map_err(ServeError::Script)?;
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
        crate::os::create_private_dir(&dir).map_err(|error| ServeError::Scratch {
            dir: dir.clone(),
            error,
        })?;
        options.db = Some(dir.join("spindle.db"));
        Some(dir)
    } else {
        None
    };
    let (event_sender, events) = crossbeam_channel::unbounded::<Event>();
    // Before any other thread starts, so that all of them inherit the mask.
    let signalled = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    if options.signals {
        signals::install(event_sender.clone(), signalled.clone()).map_err(ServeError::Signals)?;
    }
    let (line_sender, lines) = crossbeam_channel::unbounded::<Queued>();
    // What turns stream waits in a bounded queue: a client that reads
    // slowly slows the turns down instead of growing the agent's memory.
    // The config, loaded once for the whole start (the command line's
    // start has loaded it already) and handed to the dispatcher.
    let loaded = options
        .loaded
        .take()
        .unwrap_or_else(|| crate::config::loaded::Loaded::load(options.config.as_deref()));
    let queue = loaded
        .config()
        .map(|config| crate::config::Limits::or(config.limits.output_queue_lines, STREAM_QUEUE))
        .unwrap_or(STREAM_QUEUE);
    let (stream_sender, streamed) = crossbeam_channel::bounded::<Queued>(queue);
    let thread = |name| move |error| ServeError::Thread { name, error };
    let writer = stdio::spawn_writer(output, lines, streamed).map_err(thread("writer"))?;
    let reader = stdio::spawn_reader(input, event_sender.clone()).map_err(thread("reader"))?;
    let dispatcher = {
        let line_sender = line_sender.clone();
        std::thread::Builder::new()
            .name("spindle-dispatcher".into())
            .spawn(move || {
                Dispatcher::new(
                    options,
                    loaded,
                    line_sender,
                    stream_sender,
                    event_sender,
                    handlers::EVENTS,
                )
                .run(&events)
            })
            .map_err(thread("dispatcher"))?
    };
    let dispatcher_result = dispatcher.join();
    let _ = line_sender.send(Output::Close.queued());
    if writer.join().is_err() {
        log::error!("the writer thread panicked: output may have been cut short");
    }
    // The reader has seen EOF (that is what ends the dispatcher), so this
    // join returns at once; after a signal it may still wait on stdin, and
    // is left to the process exit.
    if !signalled.load(std::sync::atomic::Ordering::SeqCst) && reader.join().is_err() {
        log::error!("the reader thread panicked");
    }
    if let Some(dir) = ephemeral {
        let _ = std::fs::remove_dir_all(dir);
    }
    dispatcher_result.map_err(|_| ServeError::DispatcherPanicked)
}

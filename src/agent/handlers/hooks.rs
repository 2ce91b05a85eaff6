//! Hooks outside turns: `SessionEnd`, when a session that ran a turn in
//! this process closes or the agent ends; its hooks run on a helper
//! thread, and the agent's end waits for them a little.

use super::prompting::turn_start;
use crate::agent::common::hooks::{Event, Subject};
use crate::agent::dispatcher::Dispatcher;
use crate::agent::turn::processes::HookPlace;
use std::time::{Duration, Instant};

/// How long the agent's end waits for `SessionEnd` hooks still running.
const END_WAIT: Duration = Duration::from_secs(10);

/// Runs the `SessionEnd` hooks of session `id` (`reason`: close,
/// delete, exit) if a turn of it ran here (and so its `SessionStart`).
pub(super) fn session_end_hooks(d: &mut Dispatcher, id: &str, reason: &'static str) {
    let Some(session) = d.session(id) else {
        return;
    };
    if session.hook_start().is_some() {
        return;
    }
    let (cwd, policy) = (session.cwd().to_path_buf(), session.settings.policy);
    let Ok(registry) = d.registry() else {
        return;
    };
    let hooks = d.hooks_of(&cwd, &registry);
    if !hooks.any(Event::SessionEnd) {
        return;
    }
    let processes = turn_start::processes_for(d, id, &registry);
    let id = id.to_string();
    // Detached, but waited for at the agent's end (`end_hooks_at_exit`);
    // each hook ends at its timeout.
    let spawned = std::thread::Builder::new()
        .name("spindle-hook-end".into())
        .spawn(move || {
            let place = HookPlace {
                session_id: &id,
                root: &cwd,
                policy,
                hooks: &hooks,
            };
            let fields = serde_json::json!({ "reason": reason });
            let verdict = processes.fire(
                &place,
                Event::SessionEnd,
                &Subject::Word(reason),
                fields,
                None,
            );
            for note in verdict.notes {
                log::warn!("session {id}: {note}");
            }
        });
    match spawned {
        Ok(handle) => d.keep_ending(handle),
        Err(error) => log::warn!("cannot run the SessionEnd hooks: {error}"),
    }
}

/// At the agent's end: the `SessionEnd` hooks of every session still
/// open, and a wait of at most [`END_WAIT`] for all that still run.
pub(super) fn end_hooks_at_exit(d: &mut Dispatcher) {
    let ids: Vec<String> = d.session_ids();
    for id in ids {
        session_end_hooks(d, &id, "exit");
    }
    let deadline = Instant::now() + END_WAIT;
    for handle in d.take_ending() {
        while !handle.is_finished() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        if handle.is_finished() {
            let _ = handle.join();
        } else {
            log::warn!("a SessionEnd hook still runs; the agent ends without it");
        }
    }
}

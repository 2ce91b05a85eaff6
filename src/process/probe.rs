//! The short programs Spindle runs for itself — git's repository checks and
//! status, ripgrep's version, the sandbox probe, doctor's checks — as
//! opposed to the commands a model asks for. A repository decides what such
//! a program meets (a `.git/config` that includes a FIFO makes git block
//! forever, a hook or a huge status floods), so each one runs here: in a
//! process group of its own, dying with the agent (Linux), with its output
//! capped, and killed with its whole group at its time limit or at a cancel.
//! Hooks run here too, under the guard (their command line is built
//! through it): ending them asks the guard to take down what left the
//! group as well (see `Tree::kill`).

use crossbeam_channel::{bounded, Receiver};
use std::io::{self, Read};
use std::process::{Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// What a probe printed, within its cap.
#[derive(Debug)]
pub(crate) struct ProbeOutput {
    pub status: ExitStatus,
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
}

/// How long readers get, once the program is gone, to hand over what they
/// read; a pipe held open by a process that left the group is not waited
/// for longer than this.
const SETTLE: Duration = Duration::from_millis(200);
/// How often the program's exit is looked for.
const POLL: Duration = Duration::from_millis(5);

/// Runs `command` with stdin closed, at most `limit` long and with at most
/// `cap` bytes kept of each of stdout and stderr (the rest is read and
/// dropped, so the program never blocks on a full pipe). A message on, or
/// the disconnection of, `cancel` stops it at once. Whatever the outcome,
/// its process group is killed before this returns. Errors: the spawn's
/// own, `TimedOut` past the limit, `Interrupted` on a cancel.
pub(crate) fn run(
    command: Command,
    limit: Duration,
    cap: usize,
    cancel: Option<&Receiver<()>>,
) -> io::Result<ProbeOutput> {
    run_fed(command, None, limit, cap, cancel)
}

/// [`run`], with `input` written to the program's stdin (by a helper
/// thread, so a program that never reads it blocks nobody), then closed.
pub(crate) fn run_fed(
    mut command: Command,
    input: Option<Vec<u8>>,
    limit: Duration,
    cap: usize,
    cancel: Option<&Receiver<()>>,
) -> io::Result<ProbeOutput> {
    command
        .stdin(match input {
            Some(_) => Stdio::piped(),
            None => Stdio::null(),
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    super::Tree::prepare(&mut command);
    super::die_with_parent(&mut command);
    let guarded = super::guard::wraps(&command);
    let mut child = command.spawn()?;
    let group = match super::Tree::of(&child, guarded) {
        Ok(tree) => Group(tree),
        Err(error) => {
            let _ = child.wait();
            return Err(error);
        }
    };
    if let (Some(mut pipe), Some(input)) = (child.stdin.take(), input) {
        // Detached: the write ends when the program reads it all, exits
        // or is killed with its group (a broken pipe), which every path
        // below makes sure of.
        let fed = std::thread::Builder::new()
            .name("spindle-probe-input".into())
            .spawn(move || {
                use std::io::Write;
                let _ = pipe.write_all(&input);
            });
        if let Err(error) = fed {
            log::warn!("cannot feed a program's input: {error}");
        }
    }
    let stdout = child.stdout.take().map(|pipe| collect(pipe, cap));
    let stderr = child.stderr.take().map(|pipe| collect(pipe, cap));
    let deadline = Instant::now() + limit;
    let status = loop {
        if let Some(status) = child.try_wait()? {
            break status;
        }
        let stop = match cancel {
            Some(cancel) => !matches!(
                cancel.try_recv(),
                Err(crossbeam_channel::TryRecvError::Empty)
            ),
            None => false,
        };
        if stop || Instant::now() >= deadline {
            drop(group);
            let _ = child.wait();
            let program = command.get_program().to_string_lossy().into_owned();
            return Err(if stop {
                io::Error::new(
                    io::ErrorKind::Interrupted,
                    format!("{program} was cancelled"),
                )
            } else {
                io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!(
                        "{program} did not finish within {} s and was stopped",
                        limit.as_secs_f32()
                    ),
                )
            });
        }
        std::thread::sleep(POLL);
    };
    // What the program left running in its group goes with it.
    drop(group);
    let settle = Instant::now() + SETTLE;
    Ok(ProbeOutput {
        status,
        stdout: stdout.map(|r| gather(&r, settle)).unwrap_or_default(),
        stderr: stderr.map(|r| gather(&r, settle)).unwrap_or_default(),
    })
}

/// Kills the tree when dropped (also when the caller panics).
struct Group(super::Tree);

impl Drop for Group {
    fn drop(&mut self) {
        self.0.kill();
    }
}

/// Reads `pipe` to its end on a helper thread, keeping `cap` bytes.
fn collect(mut pipe: impl Read + Send + 'static, cap: usize) -> Receiver<Vec<u8>> {
    let (sender, receiver) = bounded(1);
    // Detached: it ends at the pipe's end, which the probe's kill makes
    // sure of; the caller waits on the channel with a deadline.
    let spawned = std::thread::Builder::new()
        .name("spindle-probe-output".into())
        .spawn(move || {
            let mut kept = Vec::new();
            let mut chunk = [0u8; 8192];
            loop {
                match pipe.read(&mut chunk) {
                    Ok(0) => break,
                    Ok(n) => {
                        let room = cap.saturating_sub(kept.len());
                        kept.extend_from_slice(&chunk[..n.min(room)]);
                    }
                    Err(error) if error.kind() == io::ErrorKind::Interrupted => {}
                    Err(_) => break,
                }
            }
            let _ = sender.send(kept);
        });
    if let Err(error) = spawned {
        log::warn!("cannot read a probe's output: {error}");
    }
    receiver
}

fn gather(output: &Receiver<Vec<u8>>, until: Instant) -> Vec<u8> {
    output
        .recv_timeout(until.saturating_duration_since(Instant::now()))
        .unwrap_or_else(|error| {
            log::debug!("a probe's output is missing: {error}");
            Vec::new()
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sh(line: &str) -> Command {
        let mut command = Command::new("sh");
        command.args(["-c", line]);
        command
    }

    #[test]
    #[cfg_attr(windows, ignore = "sh command lines")]
    fn output_is_capped_and_the_status_kept() {
        let out = run(
            sh("head -c 100000 /dev/zero; echo oops >&2; exit 3"),
            Duration::from_secs(10),
            1000,
            None,
        )
        .unwrap();
        assert_eq!(out.stdout.len(), 1000);
        assert_eq!(out.stderr, b"oops\n");
        assert_eq!(out.status.code(), Some(3));
    }

    #[test]
    #[cfg_attr(windows, ignore = "sh command lines")]
    fn a_hanging_program_is_stopped_with_its_group() {
        let dir = std::env::temp_dir().join(format!("spindle-probe-{}", crate::util::random_hex()));
        std::fs::create_dir_all(&dir).unwrap();
        let marker = dir.join("child.pid");
        // The program starts a child that would outlive it, then hangs.
        let line = format!("sleep 30 & echo $! > {}; exec sleep 30", marker.display());
        let error = run(sh(&line), Duration::from_millis(300), 1000, None).unwrap_err();
        assert_eq!(error.kind(), io::ErrorKind::TimedOut);
        let pid: i32 = std::fs::read_to_string(&marker)
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        // The kill is sent before `run` returns; its delivery may take a
        // moment. A killed child is gone or a zombie.
        let mut state = None;
        for _ in 0..200 {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            state = stat
                .rsplit(')')
                .next()
                .and_then(|rest| rest.split_whitespace().next())
                .map(str::to_string);
            if matches!(state.as_deref(), None | Some("Z")) {
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        assert!(
            matches!(state.as_deref(), None | Some("Z")),
            "child still runs: {state:?}"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    #[cfg_attr(windows, ignore = "sh command lines")]
    fn a_cancel_stops_the_program() {
        let (trigger, cancel) = bounded::<()>(0);
        let waiter = std::thread::spawn(move || {
            run(
                sh("exec sleep 30"),
                Duration::from_secs(60),
                1000,
                Some(&cancel),
            )
        });
        std::thread::sleep(Duration::from_millis(100));
        drop(trigger);
        let error = waiter.join().unwrap().unwrap_err();
        assert_eq!(error.kind(), io::ErrorKind::Interrupted);
    }
}

//! CPU time per thread of a process, sampled from `/proc` (figure 4's
//! breakdown of where the streaming time went).

use crossbeam_channel::{RecvTimeoutError, Sender};
use std::collections::HashMap;
use std::thread;
use std::time::Duration;

/// Samples the CPU time of every thread of a process from
/// `/proc/PID/task/*/stat` until finished, so threads that end during the
/// measurement (the HTTP reader, the turn worker) are still counted.
pub(crate) struct CpuSampler {
    stop: Sender<()>,
    handle: Option<thread::JoinHandle<Vec<(String, u64)>>>,
}

/// Sampling period; the kernel counts in ticks of 10 ms anyway.
const CPU_SAMPLE_EVERY: Duration = Duration::from_millis(5);

type ThreadTicks = HashMap<u64, (String, u64)>;

impl CpuSampler {
    pub(crate) fn start(pid: u32) -> CpuSampler {
        let (stop, stopped) = crossbeam_channel::bounded::<()>(1);
        let handle = thread::Builder::new()
            .name("bench-cpu".into())
            .spawn(move || {
                let baseline = thread_ticks(pid);
                let mut last = baseline.clone();
                loop {
                    last.extend(thread_ticks(pid));
                    match stopped.recv_timeout(CPU_SAMPLE_EVERY) {
                        Err(RecvTimeoutError::Timeout) => {}
                        _ => break,
                    }
                }
                // Per thread name, the time spent since the baseline.
                let mut by_name: Vec<(String, u64)> = Vec::new();
                for (tid, (name, ticks)) in last {
                    let before = baseline.get(&tid).map_or(0, |(_, t)| *t);
                    let spent = ticks.saturating_sub(before);
                    match by_name.iter_mut().find(|(n, _)| *n == name) {
                        Some((_, total)) => *total += spent,
                        None => by_name.push((name, spent)),
                    }
                }
                by_name.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
                by_name
            })
            .ok();
        CpuSampler { stop, handle }
    }

    /// Stops sampling; returns CPU ticks per thread name, largest first.
    pub(crate) fn finish(mut self) -> Vec<(String, u64)> {
        let _ = self.stop.send(());
        self.handle
            .take()
            .and_then(|h| h.join().ok())
            .unwrap_or_default()
    }
}

/// Thread id -> (name, utime + stime in clock ticks).
fn thread_ticks(pid: u32) -> ThreadTicks {
    let mut out = HashMap::new();
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return out;
    };
    for task in tasks.flatten() {
        let Some(tid) = task.file_name().to_str().and_then(|t| t.parse().ok()) else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(task.path().join("stat")) else {
            continue;
        };
        // "tid (comm) state ...": comm may hold spaces and parentheses, so
        // split at the last ')'; utime and stime are fields 14 and 15.
        let (Some(open), Some(close)) = (stat.find('('), stat.rfind(')')) else {
            continue;
        };
        let name = stat[open + 1..close].to_string();
        let fields: Vec<&str> = stat[close + 1..].split_whitespace().collect();
        let field = |i: usize| fields.get(i).and_then(|f| f.parse::<u64>().ok());
        if let (Some(utime), Some(stime)) = (field(11), field(12)) {
            out.insert(tid, (name, utime + stime));
        }
    }
    out
}

/// Clock ticks to milliseconds, assuming the usual USER_HZ of 100.
pub(crate) fn ticks_ms(ticks: u64) -> String {
    format!("{} ms", ticks * 10)
}

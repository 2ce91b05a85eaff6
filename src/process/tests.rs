//! Tests of the process runner: streaming, timeouts, cancels, group kills
//! and output capping; kept apart so that `process.rs` stays short.

use super::*;
use std::sync::atomic::{AtomicU32, Ordering};

fn spec(command_line: &str) -> CommandSpec {
    CommandSpec::new(
        command_line,
        &std::env::temp_dir(),
        Duration::from_secs(30),
        30_000,
    )
}

fn run_plain(spec: &CommandSpec) -> CommandResult {
    run(spec, &never(), &mut |_| {}).unwrap()
}

/// A fresh path for one test's files.
fn scratch_dir() -> PathBuf {
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    std::env::temp_dir().join(format!("spindle-process-{}-{n}", std::process::id()))
}

/// A cancel receiver that disconnects after `delay`.
fn cancel_after(delay: Duration) -> Receiver<()> {
    let (trigger, signal) = bounded::<()>(0);
    thread::spawn(move || {
        thread::sleep(delay);
        drop(trigger);
    });
    signal
}

/// Waits up to 2 s for `pid` to be gone; a zombie counts as gone.
fn assert_gone_soon(pid: u32) {
    assert!(pid > 1, "no pid");
    let give_up = Instant::now() + Duration::from_secs(2);
    loop {
        let gone = match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
            Err(_) => true,
            Ok(stat) => stat
                .rsplit_once(") ")
                .is_some_and(|(_, r)| r.starts_with('Z')),
        };
        if gone {
            return;
        }
        assert!(Instant::now() < give_up, "process {pid} survived");
        thread::sleep(Duration::from_millis(20));
    }
}

fn first_pid(output: &str) -> u32 {
    let line = output.lines().next().unwrap_or("");
    line.trim()
        .parse()
        .unwrap_or_else(|_| panic!("no pid in {output:?}"))
}

#[test]
#[cfg_attr(windows, ignore = "sh command lines")]
fn interleaves_streams_and_reports_how_the_shell_ended() {
    let result = run_plain(&spec("echo a; echo b >&2; echo c"));
    assert_eq!(result.output, "a\nb\nc\n");
    assert_eq!((result.exit_code, result.signal), (Some(0), None));
    assert!(!result.timed_out && !result.cancelled && !result.truncated);
    assert_eq!(result.total_bytes, 6);

    let result = run_plain(&spec("echo out; exit 3"));
    assert_eq!(
        (result.exit_code, result.output.as_str()),
        (Some(3), "out\n")
    );

    let result = run_plain(&spec("kill -9 $$"));
    assert_eq!((result.exit_code, result.signal), (None, Some(9)));
}

#[test]
#[cfg_attr(windows, ignore = "sh command lines")]
fn runs_in_the_given_directory() {
    let dir = scratch_dir();
    std::fs::create_dir_all(&dir).unwrap();
    let mut spec = spec("pwd");
    spec.cwd = dir.clone();
    let shown = PathBuf::from(run_plain(&spec).output.trim_end());
    assert_eq!(shown.canonicalize().unwrap(), dir.canonicalize().unwrap());
    std::fs::remove_dir_all(&dir).unwrap();

    spec.cwd = dir.join("missing");
    assert!(run(&spec, &never(), &mut |_| {}).is_err());
}

#[test]
#[cfg_attr(windows, ignore = "sh command lines")]
fn times_out() {
    let mut spec = spec("echo before; sleep 30");
    spec.timeout = Duration::from_millis(300);
    let started = Instant::now();
    let result = run_plain(&spec);
    let took = started.elapsed();
    eprintln!("timeout returned after {took:?}");
    assert!(result.timed_out && !result.cancelled, "{result:?}");
    assert_eq!(
        (result.signal, result.output.as_str()),
        (Some(9), "before\n")
    );
    assert!(took < Duration::from_secs(5), "took {took:?}");
}

#[test]
#[cfg_attr(windows, ignore = "sh command lines")]
fn cancels_promptly() {
    let cancel = cancel_after(Duration::from_millis(200));
    let started = Instant::now();
    let result = run(&spec("sleep 30; echo never"), &cancel, &mut |_| {}).unwrap();
    let took = started.elapsed();
    eprintln!("cancel returned after {took:?} (cancelled at 200 ms)");
    assert!(result.cancelled && !result.timed_out, "{result:?}");
    assert_eq!(result.exit_code, None);
    assert!(!result.output.contains("never"));
    assert!(took < Duration::from_secs(5), "took {took:?}");

    // A flood of output must not delay the cancel either.
    let cancel = cancel_after(Duration::from_millis(200));
    let started = Instant::now();
    let mut spec = spec("yes");
    spec.output_cap = 1000;
    let result = run(&spec, &cancel, &mut |_| {}).unwrap();
    eprintln!("cancel of `yes` returned after {:?}", started.elapsed());
    assert!(result.cancelled && result.truncated, "{result:?}");
    assert!(started.elapsed() < Duration::from_secs(5));
}

#[test]
#[cfg_attr(windows, ignore = "sh command lines")]
fn cancel_kills_the_whole_group() {
    let cancel = cancel_after(Duration::from_millis(300));
    let result = run(&spec("sleep 60 & echo $!; wait"), &cancel, &mut |_| {}).unwrap();
    assert!(result.cancelled, "{result:?}");
    assert_gone_soon(first_pid(&result.output));
}

#[test]
#[cfg_attr(windows, ignore = "sh command lines")]
fn background_jobs_do_not_hold_the_call_or_survive_it() {
    let started = Instant::now();
    let result = run_plain(&spec("sleep 60 & echo $!; echo started"));
    let took = started.elapsed();
    eprintln!("returned after {took:?} with a background job");
    assert_eq!(result.exit_code, Some(0), "{result:?}");
    assert!(result.output.ends_with("started\n"), "{result:?}");
    assert!(took < Duration::from_secs(3), "took {took:?}");
    assert_gone_soon(first_pid(&result.output));

    // A job that does not hold the pipe is ended too.
    let result = run_plain(&spec("sleep 60 >/dev/null 2>&1 & echo $!"));
    assert_eq!(result.exit_code, Some(0), "{result:?}");
    assert_gone_soon(first_pid(&result.output));
}

#[test]
#[cfg_attr(windows, ignore = "sh command lines")]
fn a_panicking_callback_still_kills_the_group() {
    let pid = AtomicU32::new(0);
    let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        run(&spec("sleep 60 & echo $!; wait"), &never(), &mut |text| {
            pid.store(first_pid(text), Ordering::SeqCst);
            panic!("callback failed on purpose");
        })
    }));
    assert!(outcome.is_err());
    assert_gone_soon(pid.load(Ordering::SeqCst));
}

#[test]
#[cfg_attr(windows, ignore = "sh command lines")]
fn caps_the_output_and_logs_all_of_it() {
    let dir = scratch_dir();
    std::fs::create_dir_all(&dir).unwrap();
    let log = dir.join("out.log");
    let mut spec = spec("yes x | head -c 1000000");
    spec.output_cap = 1000;
    spec.log_path = Some(log.clone());
    let result = run_plain(&spec);
    assert!(result.truncated);
    assert_eq!(result.total_bytes, 1_000_000);
    let marker = format!(
        "\n… [999000 bytes of output omitted; full output in {}] …\n",
        log.display()
    );
    assert!(result.output.contains(&marker), "{}", result.output);
    assert_eq!(result.output.len(), 1000 + marker.len());
    assert!(result.output.starts_with("x\nx\n") && result.output.ends_with("x\nx\n"));
    assert_eq!(std::fs::metadata(&log).unwrap().len(), 1_000_000);
    #[cfg(unix)]
    assert_eq!(crate::os::testing::mode(&log), 0o600);

    // Over the log's cap, its head and tail are kept with a marker, and the
    // model is told the log is not complete.
    spec.log_cap = 10_000;
    spec.command_line = "yes ab | head -c 999999; echo END".into();
    let result = run_plain(&spec);
    assert!(
        result.output.contains("the first and last parts are in"),
        "{}",
        result.output
    );
    let logged = std::fs::read_to_string(&log).unwrap();
    assert!(logged.starts_with("ab\nab\n"), "{}", &logged[..20]);
    assert!(logged.ends_with("ab\nEND\n"));
    assert!(logged.contains("\n… [990003 bytes of output omitted from this log] …\n"));
    assert!(logged.len() < 10_100, "{}", logged.len());
    std::fs::remove_dir_all(&dir).unwrap();

    spec.log_path = None;
    spec.command_line = "yes x | head -c 1000000".into();
    let result = run_plain(&spec);
    assert!(result
        .output
        .contains("\n… [999000 bytes of output omitted] …\n"));
}

#[test]
fn cuts_and_decodes_on_character_boundaries() {
    // "é" is two bytes, so a cap of 5 splits one at both ends.
    let mut buffer = Capped::new(5);
    buffer.push("éééééé".as_bytes());
    let (output, truncated) = buffer.finish(None);
    assert!(truncated);
    assert_eq!(output, "é\n… [8 bytes of output omitted] …\né");

    // A character split between reads is decoded whole.
    let (mut carry, mut text) = (Vec::new(), String::new());
    for byte in "aé€".as_bytes() {
        carry.push(*byte);
        decode_into(&mut carry, &mut text);
    }
    assert_eq!((text.as_str(), carry.len()), ("aé€", 0));
}

#[test]
#[cfg_attr(windows, ignore = "sh command lines")]
fn throttles_on_output_but_sends_everything() {
    let mut calls = Vec::new();
    let command = "for i in 1 2 3; do echo $i; sleep 0.2; done";
    let result = run(&spec(command), &never(), &mut |text| {
        calls.push(text.to_string())
    })
    .unwrap();
    eprintln!("on_output calls: {calls:?}");
    assert!(calls.len() > 1, "{calls:?}");
    assert_eq!(calls.concat(), result.output);
    assert_eq!(result.output, "1\n2\n3\n");
}

#[test]
#[cfg_attr(windows, ignore = "sh command lines")]
fn invalid_utf8_is_replaced() {
    let mut streamed = String::new();
    let command = r"printf 'ok\377\376 then\n'";
    let result = run(&spec(command), &never(), &mut |text| {
        streamed.push_str(text)
    })
    .unwrap();
    assert_eq!(result.output, "ok\u{FFFD}\u{FFFD} then\n");
    assert_eq!((streamed, result.total_bytes), (result.output, 10));
}

// The same promises in cmd's words.
#[cfg(windows)]
mod windows;

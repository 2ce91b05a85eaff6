//! The runner's promises in cmd's words, where commands run under cmd
//! (Windows without PowerShell, and Wine): output and exit codes, the
//! timeout, and a cancel that ends the whole tree (the job object).

use super::*;

/// A file in a fresh folder (a plain path: cmd takes it unquoted).
fn marker(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("spindle-win-{}", crate::util::random_hex()));
    std::fs::create_dir_all(&dir).unwrap();
    dir.join(name)
}

/// A tree that outlives its shell unless it is killed as a whole: a
/// second cmd started in the background appends a line to `file` every
/// second, while the first waits a minute.
fn growing_tree(file: &Path) -> String {
    format!(
        "start /b cmd /d /c \"for /l %i in (1,1,60) do (echo %i>>{} & ping -n 2 127.0.0.1 >nul)\" & ping -n 60 127.0.0.1 >nul",
        file.display()
    )
}

/// Whether `file` stops growing: its length now and after three seconds.
fn stopped_growing(file: &Path) -> bool {
    let before = std::fs::metadata(file).map_or(0, |m| m.len());
    thread::sleep(Duration::from_secs(3));
    std::fs::metadata(file).map_or(0, |m| m.len()) == before
}

#[test]
fn output_and_the_exit_code_come_back() {
    let result = run_plain(&spec("echo one& echo two 1>&2& exit /b 3"));
    assert_eq!(result.exit_code, Some(3), "{result:?}");
    assert!(result.output.contains("one"), "{result:?}");
    assert!(result.output.contains("two"), "{result:?}");
    assert!(!result.timed_out && !result.cancelled);
}

#[test]
fn a_timeout_ends_the_command() {
    let mut spec = spec("echo before& ping -n 60 127.0.0.1 >nul");
    spec.timeout = Duration::from_millis(500);
    let started = Instant::now();
    let result = run_plain(&spec);
    assert!(result.timed_out, "{result:?}");
    assert!(result.output.contains("before"), "{result:?}");
    assert!(started.elapsed() < Duration::from_secs(20));
}

#[test]
fn a_cancel_ends_the_whole_tree() {
    let file = marker("ticks.txt");
    let cancel = cancel_after(Duration::from_millis(2500));
    let result = run(&spec(&growing_tree(&file)), &cancel, &mut |_| {}).unwrap();
    assert!(result.cancelled, "{result:?}");
    assert!(file.exists(), "the background command never ran");
    assert!(
        stopped_growing(&file),
        "a process of the tree survived the cancel"
    );
}

#[test]
fn a_timeout_ends_the_whole_tree() {
    let file = marker("ticks.txt");
    let mut spec = spec(&growing_tree(&file));
    spec.timeout = Duration::from_millis(2500);
    let result = run_plain(&spec);
    assert!(result.timed_out, "{result:?}");
    assert!(file.exists(), "the background command never ran");
    assert!(
        stopped_growing(&file),
        "a process of the tree survived the timeout"
    );
}

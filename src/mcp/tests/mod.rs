//! Tests of the MCP client against small servers written for them.
//!
//! The stdio server is this test binary itself: `fake_stdio` holds a test
//! that, when started with `SPINDLE_MCP_FAKE_SERVER` set, serves MCP on its
//! stdin and stdout instead of testing anything. That needs no interpreter
//! or extra build step, works wherever `cargo test` works, and lets the
//! server be plain Rust. The HTTP servers (Streamable HTTP and legacy SSE)
//! run in-process on `127.0.0.1:0` (`fake_http`).
//!
//! A capture logger records the log lines of this module (every level) and
//! of `ureq` (up to debug), so tests can check that secrets never reach the
//! log.

mod fake_http;
mod fake_stdio;
mod http_tests;
mod session_tests;
mod stdio_tests;

use super::*;
use std::sync::{Mutex, Once};
use std::thread;
use std::time::{Duration, Instant};

static LOGS: Mutex<Vec<String>> = Mutex::new(Vec::new());

struct Capture;

impl log::Log for Capture {
    fn enabled(&self, metadata: &log::Metadata) -> bool {
        // `ureq_proto` hex-dumps raw requests, headers included, at trace
        // level: an application must keep that level off for it (as it must
        // for every HTTP client), so it is left out here.
        let target = metadata.target();
        target.starts_with("spindle::mcp")
            || (target.starts_with("ureq") && metadata.level() <= log::Level::Debug)
    }

    fn log(&self, record: &log::Record) {
        if self.enabled(record.metadata()) {
            let line = format!("{} {} {}", record.level(), record.target(), record.args());
            crate::cancel::lock(&LOGS).push(line);
        }
    }

    fn flush(&self) {}
}

static CAPTURE: Capture = Capture;

/// Installs the capture logger (once per test process).
pub(crate) fn capture_logs() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        if log::set_logger(&CAPTURE).is_ok() {
            log::set_max_level(log::LevelFilter::Trace);
        }
    });
}

/// Everything logged so far, one record per line.
pub(crate) fn logged() -> String {
    crate::cancel::lock(&LOGS).join("\n")
}

/// A value no other test uses, for secrets and file names.
pub(crate) fn unique(prefix: &str) -> String {
    use std::sync::atomic::{AtomicU32, Ordering};
    static COUNTER: AtomicU32 = AtomicU32::new(0);
    format!(
        "{prefix}-{}-{}-{}",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::SeqCst),
        crate::util::random_hex()
    )
}

/// Polls `condition` every 20 ms for at most `limit`.
pub(crate) fn eventually(limit: Duration, mut condition: impl FnMut() -> bool) -> bool {
    let give_up = Instant::now() + limit;
    loop {
        if condition() {
            return true;
        }
        if Instant::now() >= give_up {
            return false;
        }
        thread::sleep(Duration::from_millis(20));
    }
}

/// Whether process `pid` is gone (no entry, or a zombie nobody reaped).
pub(crate) fn process_gone(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => stat
            .rsplit_once(") ")
            .is_some_and(|(_, rest)| rest.starts_with('Z')),
    }
}

/// The text of the first text block of a result.
pub(crate) fn first_text(result: &CallResult) -> String {
    result
        .content
        .iter()
        .find_map(|block| block.get("text").and_then(serde_json::Value::as_str))
        .unwrap_or_default()
        .to_string()
}

#[test]
fn clients_and_sessions_can_be_shared_between_threads() {
    fn shared<T: Send + Sync>() {}
    shared::<Client>();
    shared::<McpSession>();
    shared::<ServerConfig>();
}

#[test]
fn exposed_names_are_sanitised_bounded_and_unique() {
    assert_eq!(exposed_name("git hub", "list/repos"), "git_hub__list_repos");
    assert_eq!(exposed_name("fs", "read-file_2"), "fs__read-file_2");
    assert_eq!(exposed_name("é", "x"), "___x");

    let long_tool = "t".repeat(80);
    let long = exposed_name("server", &long_tool);
    assert_eq!(long.len(), MAX_TOOL_NAME);
    assert!(long.starts_with("server__ttt"));
    let other = exposed_name("server", &format!("{long_tool}x"));
    assert_eq!(other.len(), MAX_TOOL_NAME);
    assert_ne!(long, other, "the hash keeps long names apart");
    assert_eq!(long, exposed_name("server", &long_tool), "stable");

    let mut taken = HashSet::new();
    assert_eq!(unique_name("a__b", &mut taken), "a__b");
    assert_eq!(unique_name("a__b", &mut taken), "a__b_2");
    assert_eq!(unique_name("a__b", &mut taken), "a__b_3");
    let full = "x".repeat(MAX_TOOL_NAME);
    assert_eq!(unique_name(&full, &mut taken), full);
    let second = unique_name(&full, &mut taken);
    assert_eq!(second.len(), MAX_TOOL_NAME);
    assert!(second.ends_with("_2"));
}

#[test]
fn redaction_hides_every_secret() {
    let secrets = vec!["abc".to_string(), "abcdef".to_string(), String::new()];
    assert_eq!(
        redact("key=abcdef and abc, abcabc", &secrets),
        "key=*** and ***, ******"
    );
    assert_eq!(redact("nothing here", &secrets), "nothing here");
}

#[test]
fn call_results_become_text() {
    let result = CallResult {
        content: vec![
            serde_json::json!({"type": "text", "text": "hello"}),
            serde_json::json!({"type": "image", "data": "A".repeat(4096), "mimeType": "image/png"}),
            serde_json::json!({"type": "resource", "resource": {"uri": "file:///a", "text": "inner"}}),
            serde_json::json!({"type": "resource", "resource": {"uri": "file:///b", "blob": "AA=="}}),
            serde_json::json!({"type": "resource_link", "uri": "file:///c", "name": "c"}),
        ],
        structured: Some(serde_json::json!({"n": 1})),
        is_error: false,
    };
    assert_eq!(
        result.text(),
        "hello\n[image: image/png, 3 KB]\ninner\n[resource file:///b]\nfile:///c"
    );
    let structured_only = CallResult {
        content: vec![],
        structured: Some(serde_json::json!({"n": 1})),
        is_error: false,
    };
    assert_eq!(structured_only.text(), "{\"n\":1}");
    assert_eq!(CallResult::error_text("boom").text(), "boom");
}

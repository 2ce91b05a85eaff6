//! `fetch_url` against a local HTTP server: HTML comes back as text with
//! its links, a large page is cut, a non-text answer is refused, and
//! outside yolo every fetch asks first (a rejected one never reaches the
//! server).

use super::{call, calls, permissions, say, script, Space, WAIT};
use crate::support::client::no_requests;
use crate::support::web::{http_server, ok_text};
use crate::support::{run_prompt, Answer};
use serde_json::json;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// Serves `/page` (HTML), `/big` (200,000 characters) and `/image`
/// (image/png) until the test ends; counts the requests.
fn web_server() -> (String, Arc<AtomicUsize>) {
    http_server(|_, path| {
        let (kind, body) = match path {
            "/page" => ("text/html; charset=utf-8", "<html><head><title>T</title><script>evil()</script></head><body><h1>Release notes</h1><p>Version 2 &amp; more: <a href=\"https://example.org/v2\">details</a></p></body></html>".to_string()),
            "/big" => ("text/plain", "y".repeat(200_000)),
            _ => ("image/png", "\u{1}PNG".to_string()),
        };
        ok_text(kind, &body)
    })
}

#[test]
fn fetch_url_reads_pages_as_text_within_caps() {
    let (base, _) = web_server();
    let space = Space::new("fetch");
    let (mut agent, session) = space.start(
        &script(vec![
            calls(vec![
                call("f1", "fetch_url", json!({"url": format!("{base}/page")})),
                call("f2", "fetch_url", json!({"url": format!("{base}/big")})),
                call("f3", "fetch_url", json!({"url": format!("{base}/image")})),
                call("f4", "fetch_url", json!({"url": "file:///etc/passwd"})),
            ]),
            say("Read them."),
        ]),
        &["--permissions", "yolo"],
        json!({}),
    );
    let turn = run_prompt(&mut agent, &session, "read the notes", WAIT, no_requests);
    assert_eq!(turn.tool_call("f1")["kind"], "fetch");
    let page = turn.final_text("f1");
    assert!(page.contains("Release notes"), "{page}");
    assert!(
        page.contains("Version 2 & more: details <https://example.org/v2>"),
        "{page}"
    );
    assert!(!page.contains("evil"), "{page}");
    let big = turn.final_text("f2");
    assert!(big.contains("[… cut"), "{}", &big[big.len() - 200..]);
    assert!(big.len() < 110_000);
    assert_eq!(turn.final_status("f3"), "failed");
    assert!(turn.final_text("f3").contains("not text"));
    assert_eq!(turn.final_status("f4"), "failed");
}

#[test]
fn outside_yolo_a_fetch_asks_and_a_rejected_one_never_leaves() {
    let (base, hits) = web_server();
    let space = Space::new("fetch-ask");
    let (mut agent, session) = space.start(
        &script(vec![
            calls(vec![call(
                "f1",
                "fetch_url",
                json!({"url": format!("{base}/page?secret=s3cr3t")}),
            )]),
            say("unused"),
        ]),
        &["--permissions", "auto"],
        json!({}),
    );
    let turn = run_prompt(
        &mut agent,
        &session,
        "fetch",
        WAIT,
        permissions(vec![("f1", Answer::select("reject_once"))]),
    );
    assert_eq!(turn.permission_ids(), ["f1"], "{}", turn.dump());
    assert_eq!(hits.load(Ordering::SeqCst), 0, "nothing reached the server");
}

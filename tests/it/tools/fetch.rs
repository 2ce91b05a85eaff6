//! `fetch_url` against a local HTTP server: HTML comes back as text with
//! its links, a large page is cut, a non-text answer is refused, and
//! outside yolo every fetch asks first (a rejected one never reaches the
//! server). Compressed bodies (gzip, deflate) are decoded within the page
//! cap, a bomb is cut, a broken stream and an unknown coding are refused.

use super::{call, calls, permissions, say, script, Space, WAIT};
use crate::support::client::no_requests;
use crate::support::web::{http_server, http_server_with_headers, ok_encoded, ok_text};
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

/// `gzip.compress(PAGE, 9, mtime=0)` of an HTML page of 1,143 bytes: "<h1>
/// Compressed release notes</h1>" and twenty "<p>Item N: the gzip body was
/// decoded &amp; read.</p>" (made with Python when this test was written;
/// a block with dynamic Huffman codes).
const GZIP_PAGE: &[u8] = &[
    0x1f, 0x8b, 0x08, 0x00, 0x00, 0x00, 0x00, 0x00, 0x02, 0x03, 0x9d, 0xd4, 0xbb, 0x0e, 0x02, 0x21,
    0x10, 0x85, 0xe1, 0x57, 0x99, 0xca, 0x52, 0x1c, 0xef, 0x97, 0x09, 0x8d, 0x95, 0xaf, 0x60, 0x87,
    0x32, 0x71, 0x37, 0x59, 0x84, 0x2c, 0x24, 0x46, 0x9f, 0x5e, 0x94, 0xc4, 0xde, 0x53, 0x12, 0xe6,
    0xab, 0xe6, 0xcf, 0x48, 0x57, 0xc2, 0x60, 0xa5, 0x53, 0xe7, 0xad, 0x94, 0xbe, 0x0c, 0x6a, 0xcf,
    0x7d, 0x4a, 0xea, 0xc5, 0xb4, 0x97, 0x98, 0xf6, 0x77, 0x89, 0xfe, 0x59, 0xe7, 0xd8, 0x1e, 0x63,
    0x48, 0xa3, 0xe6, 0xac, 0x9e, 0x46, 0x1d, 0xd4, 0x65, 0xa5, 0x7b, 0x2c, 0x9a, 0xeb, 0x20, 0x5b,
    0x49, 0xf6, 0x54, 0x34, 0xd0, 0x6c, 0x4f, 0xa5, 0x53, 0xba, 0xbd, 0xfa, 0x44, 0x1f, 0x49, 0x0f,
    0x97, 0xc9, 0xeb, 0x35, 0xfa, 0xca, 0x26, 0x2e, 0xa4, 0x43, 0xc5, 0xce, 0x4f, 0xc5, 0xa4, 0x9f,
    0x61, 0xc0, 0xcc, 0x01, 0xb3, 0x00, 0xcc, 0x12, 0x30, 0x2b, 0xc0, 0xac, 0x01, 0xb3, 0x01, 0xcc,
    0x16, 0x30, 0x3b, 0x64, 0xa7, 0x50, 0x08, 0x48, 0x09, 0x8c, 0xa4, 0xc0, 0x48, 0x0b, 0x8c, 0xc4,
    0xc0, 0x48, 0x0d, 0x8c, 0xe4, 0xc0, 0x48, 0x0f, 0x8c, 0x04, 0xc1, 0x7f, 0x15, 0x61, 0xda, 0x05,
    0x31, 0xdf, 0x83, 0xf3, 0x06, 0x63, 0x6c, 0x03, 0xad, 0x77, 0x04, 0x00, 0x00,
];

/// `zlib.compress(b"plain text sent with the zlib deflate coding\n")`.
const ZLIB_TEXT: &[u8] = &[
    0x78, 0x9c, 0x2b, 0xc8, 0x49, 0xcc, 0xcc, 0x53, 0x28, 0x49, 0xad, 0x28, 0x51, 0x28, 0x4e, 0xcd,
    0x2b, 0x51, 0x28, 0xcf, 0x2c, 0xc9, 0x50, 0x28, 0xc9, 0x48, 0x55, 0xa8, 0xca, 0xc9, 0x4c, 0x52,
    0x48, 0x49, 0x4d, 0xcb, 0x49, 0x2c, 0x49, 0x55, 0x48, 0xce, 0x4f, 0xc9, 0xcc, 0x4b, 0xe7, 0x02,
    0x00, 0x82, 0xea, 0x10, 0x75,
];

/// A gzip bomb of about 4 MB (under the download cap) that would inflate
/// to about 640 MB of "a": one fixed-Huffman block of the literal and
/// then copies of 258 bytes at distance 1, 13 bits each. Its trailer is
/// never reached, so its CRC is left zero.
fn gzip_bomb() -> Vec<u8> {
    let mut out = vec![0x1f, 0x8b, 0x08, 0x00, 0, 0, 0, 0, 0x02, 0x03];
    let (mut bits, mut count) = (0u32, 0u32);
    // Huffman codes go most significant bit first, header fields least.
    let mut put = |out: &mut Vec<u8>, code: u32, length: u32, msb_first: bool| {
        for i in 0..length {
            let bit = if msb_first {
                (code >> (length - 1 - i)) & 1
            } else {
                (code >> i) & 1
            };
            bits |= bit << count;
            count += 1;
            if count == 8 {
                out.push(bits as u8);
                bits = 0;
                count = 0;
            }
        }
    };
    put(&mut out, 1, 1, false); // the last block
    put(&mut out, 1, 2, false); // of the fixed code
    put(&mut out, 0x30 + u32::from(b'a'), 8, true);
    for _ in 0..2_500_000 {
        put(&mut out, 0xc5, 8, true); // 285: length 258
        put(&mut out, 0, 5, true); // distance 1
    }
    put(&mut out, 0, 7, true); // the end of the block
    put(&mut out, 0, 7, false); // to a byte
    out.extend([0; 8]);
    out
}

/// The agent's peak resident memory, in KiB (from /proc).
fn peak_memory_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmHWM:"))
        .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap()
}

/// A page sent compressed is read as text: the request offers exactly the
/// codings that are decoded, gzip and deflate pages read as the plain one
/// would, a bomb stops at the page cap with a note (the agent never holds
/// it whole), and a broken stream or an unknown coding is a clear failure.
#[test]
#[cfg_attr(windows, ignore = "reads /proc")]
fn fetch_url_decodes_gzip_and_deflate_and_cuts_a_bomb() {
    let bomb = gzip_bomb();
    assert!(bomb.len() < 5 * 1024 * 1024, "{}", bomb.len());
    let (base, _) = http_server_with_headers(move |_, path, headers| {
        let offered = headers
            .iter()
            .filter_map(|h| h.strip_prefix("accept-encoding:"))
            .map(str::trim)
            .collect::<Vec<_>>()
            .join("|");
        if offered != "gzip, deflate" {
            return ok_text("text/plain", &format!("offered encodings: {offered:?}"));
        }
        match path {
            "/gzip" => ok_encoded("text/html", "gzip", GZIP_PAGE),
            "/deflate" => ok_encoded("text/plain", "deflate", ZLIB_TEXT),
            "/bomb" => ok_encoded("text/plain", "gzip", &bomb),
            "/broken" => {
                let mut broken = GZIP_PAGE.to_vec();
                let end = broken.len() - 8;
                broken[end] ^= 0xff;
                ok_encoded("text/html", "gzip", &broken)
            }
            _ => ok_encoded("text/plain", "br", b"\x1b\x03\x00"),
        }
    });
    let space = Space::new("fetch-gzip");
    // A process of its own, whose peak memory is the agent's alone.
    let (mut agent, session) = space.start_process(
        &script(vec![
            calls(vec![
                call("f1", "fetch_url", json!({"url": format!("{base}/gzip")})),
                call("f2", "fetch_url", json!({"url": format!("{base}/deflate")})),
                call("f3", "fetch_url", json!({"url": format!("{base}/bomb")})),
                call("f4", "fetch_url", json!({"url": format!("{base}/broken")})),
                call("f5", "fetch_url", json!({"url": format!("{base}/brotli")})),
            ]),
            say("Read them."),
        ]),
        &["--permissions", "yolo"],
        json!({}),
    );
    let turn = run_prompt(&mut agent, &session, "read", WAIT, no_requests);
    let page = turn.final_text("f1");
    assert_eq!(turn.final_status("f1"), "completed", "{page}");
    assert!(page.contains("Compressed release notes"), "{page}");
    assert!(
        page.contains("Item 19: the gzip body was decoded & read."),
        "{page}"
    );
    let text = turn.final_text("f2");
    assert!(
        text.contains("plain text sent with the zlib deflate coding"),
        "{text}"
    );
    let cut = turn.final_text("f3");
    assert_eq!(turn.final_status("f3"), "completed", "{cut}");
    assert!(
        cut.contains("its gzip body decodes to more than 5242880 bytes"),
        "{}",
        &cut[cut.len().saturating_sub(300)..]
    );
    assert!(cut.contains("aaaaaaaa"));
    assert!(cut.len() < 110_000, "{}", cut.len());
    // Inflated whole, the bomb alone would take 640 MB.
    let peak = peak_memory_kib(agent.pid());
    assert!(peak < 200 * 1024, "the agent peaked at {peak} KiB");
    assert_eq!(turn.final_status("f4"), "failed");
    let broken = turn.final_text("f4");
    assert!(broken.contains("corrupt gzip data"), "{broken}");
    assert_eq!(turn.final_status("f5"), "failed");
    let refused = turn.final_text("f5");
    assert!(
        refused.contains("Content-Encoding \"br\"") && refused.contains("gzip and deflate"),
        "{refused}"
    );
}

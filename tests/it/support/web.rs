//! A small HTTP server on 127.0.0.1 for the tests of `fetch_url`: each
//! connection gets the whole raw response a closure makes of its path.

use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// An HTTP server on 127.0.0.1 until the test ends: `answer(base, path)`
/// gives the whole raw response to a request. Counts the requests.
pub fn http_server(
    answer: impl Fn(&str, &str) -> Vec<u8> + Send + Sync + 'static,
) -> (String, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let hits = Arc::new(AtomicUsize::new(0));
    let counted = hits.clone();
    let answer = Arc::new(answer);
    let own = base.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            counted.fetch_add(1, Ordering::SeqCst);
            let answer = answer.clone();
            let own = own.clone();
            std::thread::spawn(move || {
                let mut reader = BufReader::new(stream.try_clone().unwrap());
                let mut first = String::new();
                let _ = reader.read_line(&mut first);
                let mut line = String::new();
                while reader.read_line(&mut line).is_ok_and(|n| n > 2) {
                    line.clear();
                }
                let path = first.split_whitespace().nth(1).unwrap_or("/").to_string();
                let mut stream = stream;
                let _ = stream.write_all(&answer(&own, &path));
            });
        }
    });
    (base, hits)
}

/// A 200 answer of `kind` holding `body`.
pub fn ok_text(kind: &str, body: &str) -> Vec<u8> {
    format!(
        "HTTP/1.1 200 OK\r\nContent-Type: {kind}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

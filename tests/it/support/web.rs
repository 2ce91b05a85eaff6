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
    http_server_with_headers(move |base, path, _| answer(base, path))
}

/// The same, where `answer(base, path, headers)` also sees the request's
/// header lines (as sent, `\r\n` removed, names in lower case).
pub fn http_server_with_headers(
    answer: impl Fn(&str, &str, &[String]) -> Vec<u8> + Send + Sync + 'static,
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
                let mut headers = Vec::new();
                while reader.read_line(&mut line).is_ok_and(|n| n > 2) {
                    let header = line.trim_end();
                    headers.push(match header.split_once(':') {
                        Some((name, value)) => format!("{}:{value}", name.to_ascii_lowercase()),
                        None => header.to_string(),
                    });
                    line.clear();
                }
                let path = first.split_whitespace().nth(1).unwrap_or("/").to_string();
                let mut stream = stream;
                let _ = stream.write_all(&answer(&own, &path, &headers));
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

/// A 200 answer of `kind` holding `body` as sent with `Content-Encoding:
/// encoding`.
pub fn ok_encoded(kind: &str, encoding: &str, body: &[u8]) -> Vec<u8> {
    let mut out = format!(
        "HTTP/1.1 200 OK\r\nContent-Type: {kind}\r\nContent-Encoding: {encoding}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    )
    .into_bytes();
    out.extend_from_slice(body);
    out
}

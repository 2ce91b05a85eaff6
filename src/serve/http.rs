//! HTTP/1.1 as far as `serve` needs it: a request's head and body read
//! within limits of size and time, and responses written. Every byte comes
//! from an unauthenticated stranger until the token is checked, so
//! nothing here allocates more than its caps, waits past its deadline, or
//! takes a form it does not know (no `obs-fold`, no two lengths, no
//! transfer coding but `chunked`).

use std::io::{self, BufRead, Write};
use std::time::{Duration, Instant};

/// The caps on one request.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Limits {
    /// The request line and headers together, in bytes.
    pub(crate) head_bytes: usize,
    /// How many header lines.
    pub(crate) headers: usize,
    /// The body, in bytes (a POST's JSON-RPC message).
    pub(crate) body_bytes: usize,
    /// How long the head may take to arrive, from its first byte.
    pub(crate) head_time: Duration,
    /// How long the body may take to arrive.
    pub(crate) body_time: Duration,
}

/// A request as read: its method, path, headers (names in lower case) and
/// body.
#[derive(Debug)]
pub(crate) struct Request {
    pub(crate) method: String,
    pub(crate) path: String,
    pub(crate) headers: Vec<(String, String)>,
    pub(crate) body: Vec<u8>,
    /// HTTP/1.0, or `Connection: close`: the socket ends after the answer.
    pub(crate) close: bool,
}

impl Request {
    /// The value of header `name` (lower case), when it is there once.
    pub(crate) fn header(&self, name: &str) -> Option<&str> {
        let mut found = self.headers.iter().filter(|(n, _)| n == name);
        match (found.next(), found.next()) {
            (Some((_, value)), None) => Some(value.as_str()),
            _ => None,
        }
    }

    /// Whether header `name` appears more than once.
    pub(crate) fn repeated(&self, name: &str) -> bool {
        self.headers.iter().filter(|(n, _)| n == name).count() > 1
    }
}

/// Why a request could not be read: each maps to the status it is
/// answered with, or to closing the socket without a word.
#[derive(Debug)]
pub(crate) enum ReadError {
    /// The socket ended, failed or timed out: nothing to answer.
    Gone,
    /// A malformed request: 400 with the reason.
    Bad(&'static str),
    /// The head is over its cap: 431.
    HeadTooLarge,
    /// The body is over its cap: 413.
    BodyTooLarge,
    /// A POST without a length: 411.
    LengthRequired,
    /// Not HTTP/1.x: 505.
    Version,
    /// A transfer coding other than `chunked`: 501.
    Coding,
}

impl ReadError {
    /// The status and reason to answer with, if any.
    pub(crate) fn answer(&self) -> Option<(u16, &'static str)> {
        match self {
            ReadError::Gone => None,
            ReadError::Bad(why) => Some((400, why)),
            ReadError::HeadTooLarge => Some((431, "the request's headers are too large")),
            ReadError::BodyTooLarge => Some((413, "the request's body is too large")),
            ReadError::LengthRequired => Some((411, "a request body needs a Content-Length")),
            ReadError::Version => Some((505, "only HTTP/1.1 is served")),
            ReadError::Coding => Some((501, "only the chunked transfer coding is understood")),
        }
    }
}

/// Reads one request's head, its body left unread (see [`read_body`]):
/// `Ok(None)` when the socket ended cleanly before a new one began (a
/// kept-alive connection the client closed).
pub(crate) fn read_head_of(
    input: &mut impl BufRead,
    limits: &Limits,
) -> Result<Option<Request>, ReadError> {
    let Some(head) = read_head(input, limits)? else {
        return Ok(None);
    };
    let text = std::str::from_utf8(&head).map_err(|_| ReadError::Bad("the head is not text"))?;
    let mut lines = text.split("\r\n");
    let first = lines.next().unwrap_or_default();
    let mut parts = first.split(' ');
    let (Some(method), Some(target), Some(version), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(ReadError::Bad("a malformed request line"));
    };
    if method.is_empty() || !method.bytes().all(|b| b.is_ascii_uppercase()) {
        return Err(ReadError::Bad("a malformed method"));
    }
    let http10 = match version {
        "HTTP/1.1" => false,
        "HTTP/1.0" => true,
        _ if version.starts_with("HTTP/") => return Err(ReadError::Version),
        _ => return Err(ReadError::Bad("a malformed request line")),
    };
    if !target.starts_with('/') || !target.bytes().all(|b| b.is_ascii_graphic()) {
        return Err(ReadError::Bad("a malformed request target"));
    }
    let path = target.split('?').next().unwrap_or(target).to_string();
    let mut headers = Vec::new();
    for line in lines.filter(|line| !line.is_empty()) {
        if headers.len() == limits.headers {
            return Err(ReadError::HeadTooLarge);
        }
        let Some((name, value)) = line.split_once(':') else {
            return Err(ReadError::Bad("a header line without a colon"));
        };
        if name.is_empty() || !name.bytes().all(is_token_byte) {
            return Err(ReadError::Bad("a malformed header name"));
        }
        let value = value.trim_matches([' ', '\t']);
        if value.bytes().any(|b| b.is_ascii_control() && b != b'\t') {
            return Err(ReadError::Bad("a control character in a header"));
        }
        headers.push((name.to_ascii_lowercase(), value.to_string()));
    }
    let mut request = Request {
        method: method.to_string(),
        path,
        headers,
        body: Vec::new(),
        close: http10,
    };
    if let Some(connection) = request.header("connection") {
        let tokens = || connection.split(',').map(str::trim);
        if tokens().any(|t| t.eq_ignore_ascii_case("close")) {
            request.close = true;
        } else if http10 && tokens().any(|t| t.eq_ignore_ascii_case("keep-alive")) {
            request.close = false;
        }
    }
    Ok(Some(request))
}

/// Whether a request announces a body (which then still waits unread on
/// the socket after its head).
pub(crate) fn has_body(request: &Request) -> bool {
    request.headers.iter().any(|(name, value)| {
        name == "transfer-encoding" || name == "content-length" && value != "0"
    })
}

fn is_token_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

/// The head up to and without its blank line, or `None` at a clean end.
fn read_head(input: &mut impl BufRead, limits: &Limits) -> Result<Option<Vec<u8>>, ReadError> {
    let mut head = Vec::new();
    let mut started: Option<Instant> = None;
    loop {
        let available = match input.fill_buf() {
            Ok([]) if head.is_empty() => return Ok(None),
            Ok([]) => return Err(ReadError::Gone),
            Ok(bytes) => bytes,
            Err(error) if error.kind() == io::ErrorKind::Interrupted => continue,
            Err(_) => return Err(ReadError::Gone),
        };
        let start = *started.get_or_insert_with(Instant::now);
        // Blank lines before a request are tolerated (RFC 9112 2.2), not
        // kept.
        let mut taken = 0;
        let mut done = false;
        for &byte in available {
            taken += 1;
            if head.is_empty() && (byte == b'\r' || byte == b'\n') {
                continue;
            }
            head.push(byte);
            if head.ends_with(b"\r\n\r\n") {
                done = true;
                break;
            }
            if head.len() > limits.head_bytes {
                return Err(ReadError::HeadTooLarge);
            }
        }
        input.consume(taken);
        if done {
            head.truncate(head.len() - 4);
            return Ok(Some(head));
        }
        if start.elapsed() > limits.head_time {
            return Err(ReadError::Gone);
        }
    }
}

/// Reads the body of `request` (a head from [`read_head_of`]), within
/// its caps.
pub(crate) fn read_body(
    input: &mut impl BufRead,
    request: &Request,
    limits: &Limits,
) -> Result<Vec<u8>, ReadError> {
    let deadline = Instant::now() + limits.body_time;
    if request.repeated("content-length") || request.repeated("transfer-encoding") {
        return Err(ReadError::Bad("a repeated length header"));
    }
    let chunked = match request.header("transfer-encoding") {
        None => false,
        Some(coding) if coding.eq_ignore_ascii_case("chunked") => true,
        Some(_) => return Err(ReadError::Coding),
    };
    let length = request.header("content-length");
    if chunked && length.is_some() {
        return Err(ReadError::Bad("both Content-Length and Transfer-Encoding"));
    }
    if chunked {
        return read_chunked(input, limits.body_bytes, deadline);
    }
    let length = match length {
        None if request.method == "POST" => return Err(ReadError::LengthRequired),
        None => return Ok(Vec::new()),
        Some(text)
            if !text.is_empty() && text.len() <= 19 && text.bytes().all(|b| b.is_ascii_digit()) =>
        {
            text.parse::<u64>()
                .map_err(|_| ReadError::Bad("a malformed Content-Length"))?
        }
        Some(_) => return Err(ReadError::Bad("a malformed Content-Length")),
    };
    if length > limits.body_bytes as u64 {
        return Err(ReadError::BodyTooLarge);
    }
    // Room grows as bytes arrive, not as announced.
    let mut body = Vec::with_capacity((length as usize).min(64 * 1024));
    read_exact_by(input, &mut body, length as usize, deadline)?;
    Ok(body)
}

/// Appends `count` bytes to `body`, by `deadline`.
fn read_exact_by(
    input: &mut impl BufRead,
    body: &mut Vec<u8>,
    mut count: usize,
    deadline: Instant,
) -> Result<(), ReadError> {
    while count > 0 {
        if Instant::now() > deadline {
            return Err(ReadError::Gone);
        }
        let available = match input.fill_buf() {
            Ok([]) => return Err(ReadError::Gone),
            Ok(bytes) => bytes,
            Err(error) if error.kind() == io::ErrorKind::Interrupted => continue,
            Err(_) => return Err(ReadError::Gone),
        };
        let take = available.len().min(count);
        body.extend_from_slice(&available[..take]);
        input.consume(take);
        count -= take;
    }
    Ok(())
}

/// A line of a chunked body (a size line or a trailer), at most 1 KiB.
fn read_line_by(input: &mut impl BufRead, deadline: Instant) -> Result<String, ReadError> {
    let mut line = Vec::new();
    loop {
        if Instant::now() > deadline {
            return Err(ReadError::Gone);
        }
        let mut byte = Vec::with_capacity(1);
        read_exact_by(input, &mut byte, 1, deadline)?;
        line.push(byte[0]);
        if line.ends_with(b"\r\n") {
            line.truncate(line.len() - 2);
            return String::from_utf8(line).map_err(|_| ReadError::Bad("a malformed chunk"));
        }
        if line.len() > 1024 {
            return Err(ReadError::Bad("a chunk line too long"));
        }
    }
}

fn read_chunked(
    input: &mut impl BufRead,
    cap: usize,
    deadline: Instant,
) -> Result<Vec<u8>, ReadError> {
    let mut body = Vec::new();
    loop {
        let line = read_line_by(input, deadline)?;
        let size = line.split(';').next().unwrap_or_default().trim();
        if size.is_empty() || size.len() > 8 || !size.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(ReadError::Bad("a malformed chunk size"));
        }
        let size = usize::from_str_radix(size, 16)
            .map_err(|_| ReadError::Bad("a malformed chunk size"))?;
        if size == 0 {
            // Trailers, up to the blank line; at most 32 of them.
            for _ in 0..32 {
                if read_line_by(input, deadline)?.is_empty() {
                    return Ok(body);
                }
            }
            return Err(ReadError::HeadTooLarge);
        }
        if body.len() + size > cap {
            return Err(ReadError::BodyTooLarge);
        }
        read_exact_by(input, &mut body, size, deadline)?;
        if !read_line_by(input, deadline)?.is_empty() {
            return Err(ReadError::Bad("a chunk longer than its size"));
        }
    }
}

/// The reason phrase of the statuses `serve` answers with.
fn reason(status: u16) -> &'static str {
    match status {
        101 => "Switching Protocols",
        200 => "OK",
        202 => "Accepted",
        204 => "No Content",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        406 => "Not Acceptable",
        409 => "Conflict",
        411 => "Length Required",
        413 => "Content Too Large",
        415 => "Unsupported Media Type",
        429 => "Too Many Requests",
        431 => "Request Header Fields Too Large",
        500 => "Internal Server Error",
        501 => "Not Implemented",
        503 => "Service Unavailable",
        504 => "Gateway Timeout",
        505 => "HTTP Version Not Supported",
        _ => "Unknown",
    }
}

/// Writes a whole response with `body`; `close` adds `Connection: close`.
pub(crate) fn respond(
    out: &mut impl Write,
    status: u16,
    headers: &[(&str, &str)],
    content_type: Option<&str>,
    body: &[u8],
    close: bool,
) -> io::Result<()> {
    let mut head = format!("HTTP/1.1 {status} {}\r\n", reason(status));
    for (name, value) in headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    if let Some(kind) = content_type {
        head.push_str(&format!("Content-Type: {kind}\r\n"));
    }
    head.push_str(&format!("Content-Length: {}\r\n", body.len()));
    head.push_str("Cache-Control: no-store\r\n");
    if close {
        head.push_str("Connection: close\r\n");
    }
    head.push_str("\r\n");
    let mut all = head.into_bytes();
    all.extend_from_slice(body);
    out.write_all(&all)?;
    out.flush()
}

/// An error answer: `{"error": reason}` as JSON.
pub(crate) fn respond_error(
    out: &mut impl Write,
    status: u16,
    why: &str,
    extra: &[(&str, &str)],
    close: bool,
) -> io::Result<()> {
    let body = serde_json::json!({ "error": why }).to_string();
    respond(
        out,
        status,
        extra,
        Some("application/json"),
        body.as_bytes(),
        close,
    )
}

/// The head of a response whose body follows as it comes (an SSE stream):
/// no length, so the connection ends with it.
pub(crate) fn respond_stream_head(out: &mut impl Write, content_type: &str) -> io::Result<()> {
    let head = format!(
        "HTTP/1.1 200 OK\r\nContent-Type: {content_type}\r\nCache-Control: no-store\r\nX-Accel-Buffering: no\r\nConnection: close\r\n\r\n"
    );
    out.write_all(head.as_bytes())?;
    out.flush()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits() -> Limits {
        Limits {
            head_bytes: 1024,
            headers: 8,
            body_bytes: 64,
            head_time: Duration::from_secs(5),
            body_time: Duration::from_secs(5),
        }
    }

    fn read(text: &[u8]) -> Result<Option<Request>, ReadError> {
        let mut input = io::BufReader::new(text);
        let Some(mut request) = read_head_of(&mut input, &limits())? else {
            return Ok(None);
        };
        request.body = read_body(&mut input, &request, &limits())?;
        Ok(Some(request))
    }

    #[test]
    fn a_post_with_a_length_is_read_whole() {
        let request = read(b"POST /acp HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}")
            .unwrap()
            .unwrap();
        assert_eq!(request.method, "POST");
        assert_eq!(request.path, "/acp");
        assert_eq!(request.header("host"), Some("x"));
        assert_eq!(request.body, b"{}");
        assert!(!request.close);
    }

    #[test]
    fn a_chunked_body_is_joined_and_capped() {
        let request =
            read(b"POST /acp HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n")
                .unwrap()
                .unwrap();
        assert_eq!(request.body, b"{}");
        let big = b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n41\r\n";
        assert!(matches!(read(big), Err(ReadError::BodyTooLarge)));
        let endless = b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n";
        assert!(matches!(read(endless), Err(ReadError::Gone)));
    }

    #[test]
    fn malformed_and_oversized_requests_get_their_status() {
        let status = |text: &[u8]| read(text).unwrap_err().answer().map(|(s, _)| s);
        assert_eq!(status(b"POST / HTTP/1.1\r\n\r\n"), Some(411));
        assert_eq!(
            status(b"POST / HTTP/1.1\r\nContent-Length: 65\r\n\r\n"),
            Some(413)
        );
        assert_eq!(
            status(b"POST / HTTP/1.1\r\nContent-Length: -1\r\n\r\n"),
            Some(400)
        );
        assert_eq!(
            status(b"POST / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 1\r\n\r\nx"),
            Some(400)
        );
        assert_eq!(
            status(b"POST / HTTP/1.1\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n"),
            Some(400)
        );
        assert_eq!(
            status(b"POST / HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\n"),
            Some(501)
        );
        assert_eq!(status(b"GET / HTTP/2.0\r\n\r\n"), Some(505));
        assert_eq!(status(b"get / HTTP/1.1\r\n\r\n"), Some(400));
        assert_eq!(status(b"GET http://x/ HTTP/1.1\r\n\r\n"), Some(400));
        assert_eq!(status(b"GET / HTTP/1.1\r\nA: b\r\n c\r\n\r\n"), Some(400));
        let flood: Vec<u8> = [&b"GET / HTTP/1.1\r\n"[..], &b"A: b\r\n".repeat(9), b"\r\n"].concat();
        assert_eq!(status(&flood), Some(431));
        let long: Vec<u8> = [&b"GET / HTTP/1.1\r\nA: "[..], &[b'x'; 2000], b"\r\n\r\n"].concat();
        assert_eq!(status(&long), Some(431));
        assert!(matches!(
            read(b"GET / HTTP/1.1\r\nHost: x"),
            Err(ReadError::Gone)
        ));
        assert!(read(b"").unwrap().is_none());
    }

    #[test]
    fn the_head_is_read_without_its_body() {
        let text = b"POST /acp HTTP/1.1\r\nContent-Length: 999999\r\n\r\n{";
        let mut input = io::BufReader::new(&text[..]);
        let request = read_head_of(&mut input, &limits()).unwrap().unwrap();
        assert!(request.body.is_empty());
        assert!(has_body(&request));
        assert_eq!(io::BufRead::fill_buf(&mut input).unwrap(), b"{");
        let bare = read(b"GET / HTTP/1.1\r\nContent-Length: 0\r\n\r\n");
        assert!(!has_body(&bare.unwrap().unwrap()));
        let chunked = b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n";
        let request = read_head_of(&mut &chunked[..], &limits()).unwrap().unwrap();
        assert!(has_body(&request));
    }

    #[test]
    fn http_1_0_and_connection_close_end_the_socket() {
        assert!(read(b"GET / HTTP/1.0\r\n\r\n").unwrap().unwrap().close);
        assert!(
            read(b"GET / HTTP/1.1\r\nConnection: Close\r\n\r\n")
                .unwrap()
                .unwrap()
                .close
        );
    }
}

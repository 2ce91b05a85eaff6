//! The one-shot listener on 127.0.0.1 that the browser is sent back to
//! after sign-in. It takes only `GET /callback`, only with the `state` it
//! was given, waits a bounded time and gives up on cancel; each visit is
//! answered with a short page.

use super::error::{OAuthError, OAuthErrorKind};
use crate::cancel::CancelToken;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::time::{Duration, Instant};

/// The most bytes of a request read (its line and headers).
const REQUEST_CAP: usize = 16 * 1024;

/// A listener waiting for the authorization code.
pub(super) struct Callback {
    listener: TcpListener,
    port: u16,
}

/// The answer of one visit: the code, or why sign-in failed.
enum Visit {
    Code(String),
    Failed(String),
    /// Not the callback (another path, a favicon): keep waiting.
    Other,
}

impl Callback {
    /// Listens on 127.0.0.1 at `port` (0: one the system picks).
    pub(super) fn bind(port: u16) -> Result<Callback, String> {
        let listener = TcpListener::bind(("127.0.0.1", port))
            .map_err(|err| format!("cannot listen on 127.0.0.1:{port} for the sign-in: {err}"))?;
        let port = listener.local_addr().map_err(|err| err.to_string())?.port();
        listener
            .set_nonblocking(true)
            .map_err(|err| err.to_string())?;
        Ok(Callback { listener, port })
    }

    /// The redirect URI to register and send.
    pub(super) fn redirect_uri(&self) -> String {
        format!("http://127.0.0.1:{}/callback", self.port)
    }

    /// Waits for the browser's visit carrying `state`, at most `wait`;
    /// returns the authorization code.
    pub(super) fn wait(
        &self,
        state: &str,
        wait: Duration,
        cancel: &CancelToken,
    ) -> Result<String, OAuthError> {
        let deadline = Instant::now() + wait;
        loop {
            if cancel.is_cancelled() {
                return Err(OAuthError::new(
                    OAuthErrorKind::Cancelled,
                    "sign-in was cancelled",
                ));
            }
            if Instant::now() >= deadline {
                return Err(OAuthError::new(
                    OAuthErrorKind::TimedOut,
                    format!(
                        "no answer from the browser within {} seconds; sign-in gave up",
                        wait.as_secs()
                    ),
                ));
            }
            match self.listener.accept() {
                Ok((stream, _)) => match visit(stream, state) {
                    Visit::Code(code) => return Ok(code),
                    Visit::Failed(why) => {
                        return Err(OAuthError::new(OAuthErrorKind::Callback, why))
                    }
                    Visit::Other => {}
                },
                Err(err) if err.kind() == std::io::ErrorKind::WouldBlock => {
                    cancel.sleep(Duration::from_millis(100));
                }
                Err(err) => {
                    return Err(OAuthError::new(
                        OAuthErrorKind::Callback,
                        format!("the sign-in listener failed: {err}"),
                    ))
                }
            }
        }
    }
}

/// Reads one request and answers it.
fn visit(mut stream: TcpStream, state: &str) -> Visit {
    let _ = stream.set_nonblocking(false);
    let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
    let _ = stream.set_write_timeout(Some(Duration::from_secs(5)));
    let mut bytes = Vec::new();
    let mut chunk = [0u8; 2048];
    while !bytes.windows(4).any(|w| w == b"\r\n\r\n") && bytes.len() < REQUEST_CAP {
        match stream.read(&mut chunk) {
            Ok(0) | Err(_) => break,
            Ok(n) => bytes.extend_from_slice(&chunk[..n]),
        }
    }
    let text = String::from_utf8_lossy(&bytes);
    let line = text.lines().next().unwrap_or("");
    let mut words = line.split(' ');
    let (method, target) = (words.next().unwrap_or(""), words.next().unwrap_or(""));
    let (path, query) = target.split_once('?').unwrap_or((target, ""));
    if method != "GET" || path != "/callback" {
        answer(&mut stream, "404 Not Found", "Not found.");
        return Visit::Other;
    }
    let param = |name: &str| {
        query
            .split('&')
            .filter_map(|pair| pair.split_once('='))
            .find(|(key, _)| *key == name)
            .and_then(|(_, value)| decode(value))
    };
    if param("state").as_deref() != Some(state) {
        answer(
            &mut stream,
            "400 Bad Request",
            "This sign-in answer does not belong to the sign-in Spindle started. Nothing was signed in.",
        );
        return Visit::Failed(
            "the browser came back with a sign-in answer Spindle did not ask for (its state does not match); refused"
                .into(),
        );
    }
    if let Some(error) = param("error") {
        answer(
            &mut stream,
            "200 OK",
            "Sign-in was refused. You can close this page.",
        );
        let error: String = error
            .chars()
            .filter(|c| !c.is_control())
            .take(100)
            .collect();
        return Visit::Failed(format!(
            "the authorization server refused the sign-in: {error}"
        ));
    }
    match param("code") {
        Some(code) if !code.is_empty() => {
            answer(
                &mut stream,
                "200 OK",
                "Signed in. You can close this page and go back to Spindle.",
            );
            Visit::Code(code)
        }
        _ => {
            answer(
                &mut stream,
                "400 Bad Request",
                "The answer carries no code.",
            );
            Visit::Failed("the browser came back without an authorization code".into())
        }
    }
}

fn answer(stream: &mut TcpStream, status: &str, text: &str) {
    let page = format!(
        "<!doctype html><html><head><meta charset=\"utf-8\"><title>Spindle</title></head><body><p>{text}</p></body></html>"
    );
    let _ = write!(
        stream,
        "HTTP/1.1 {status}\r\nContent-Type: text/html; charset=utf-8\r\nContent-Length: {}\r\nConnection: close\r\nCache-Control: no-store\r\n\r\n{page}",
        page.len()
    );
    let _ = stream.flush();
}

/// Decodes a query value (`+` is a space); `None` when it is not UTF-8.
fn decode(text: &str) -> Option<String> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut at = 0;
    while at < bytes.len() {
        match bytes[at] {
            b'%' if at + 2 < bytes.len() => {
                let hex = std::str::from_utf8(&bytes[at + 1..at + 3]).ok()?;
                out.push(u8::from_str_radix(hex, 16).ok()?);
                at += 3;
            }
            b'+' => {
                out.push(b' ');
                at += 1;
            }
            b => {
                out.push(b);
                at += 1;
            }
        }
    }
    String::from_utf8(out).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn get(port: u16, target: &str) -> String {
        let mut stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
        write!(stream, "GET {target} HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
        let mut text = String::new();
        let _ = stream.read_to_string(&mut text);
        text
    }

    #[test]
    fn only_the_callback_with_our_state_gives_the_code() {
        let callback = Callback::bind(0).unwrap();
        let port = callback.port;
        let visits = std::thread::spawn(move || {
            let other = get(port, "/favicon.ico");
            let good = get(port, "/callback?state=s%2D1&code=the+code");
            (other, good)
        });
        let code = callback
            .wait("s-1", Duration::from_secs(60), &CancelToken::new())
            .unwrap();
        assert_eq!(code, "the code");
        let (other, good) = visits.join().unwrap();
        assert!(other.starts_with("HTTP/1.1 404"), "{other}");
        assert!(
            good.starts_with("HTTP/1.1 200") && good.contains("Signed in"),
            "{good}"
        );
    }

    #[test]
    fn another_state_is_refused_and_cancel_ends_the_wait() {
        let callback = Callback::bind(0).unwrap();
        let port = callback.port;
        let visit = std::thread::spawn(move || get(port, "/callback?state=forged&code=c"));
        let refused = callback.wait("mine", Duration::from_secs(60), &CancelToken::new());
        let refused = refused.unwrap_err();
        assert_eq!(refused.kind, OAuthErrorKind::Callback);
        assert!(refused.to_string().contains("state"));
        assert!(visit.join().unwrap().starts_with("HTTP/1.1 400"));
        let cancel = CancelToken::new();
        cancel.cancel();
        let cancelled = Callback::bind(0)
            .unwrap()
            .wait("mine", Duration::from_secs(60), &cancel);
        let cancelled = cancelled.unwrap_err();
        assert_eq!(cancelled.kind, OAuthErrorKind::Cancelled);
        assert!(cancelled.to_string().contains("cancelled"));
    }
}

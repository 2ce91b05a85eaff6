//! `spindle serve` through the real binary on 127.0.0.1: the official
//! Python and TypeScript SDKs' HTTP and WebSocket transports (`sdk.rs`),
//! bad input of every kind on the raw socket (`attacks.rs`), and a
//! server's end: a termination signal, a kill during a turn (`ending.rs`).
//!
//! [`Server`] starts one with a private home on port 0 and reads the
//! address it printed and the token it made.

use crate::support::{spindle_command, temp_dir};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

mod attacks;
mod doctor;
mod ending;
mod load;
#[cfg(target_os = "linux")]
mod sandboxed;
mod sdk;

/// A running `spindle serve`.
pub struct Server {
    pub child: Child,
    pub address: SocketAddr,
    pub token: String,
    pub base: PathBuf,
    pub home: PathBuf,
    /// What it printed on stderr after its start, read on.
    pub stderr: std::sync::Arc<std::sync::Mutex<String>>,
}

impl Server {
    /// `spindle serve --listen 127.0.0.1:0` with `args`, in a private home
    /// under a fresh folder named for `name`.
    pub fn start(name: &str, args: &[&str]) -> Server {
        let base = temp_dir(name);
        Server::start_in(base, args)
    }

    /// The same, in the folder `base` (its `home` is the private home).
    pub fn start_in(base: PathBuf, args: &[&str]) -> Server {
        let home = base.join("home");
        let mut command = spindle_command(&home);
        command
            .arg("serve")
            .args(["--listen", "127.0.0.1:0"])
            .args(args)
            .current_dir(&base)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        let mut child = command.spawn().expect("spindle serve starts");
        let stderr = child.stderr.take().expect("stderr");
        let (sender, receiver) = std::sync::mpsc::channel();
        let text = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
        let kept = text.clone();
        std::thread::spawn(move || {
            let mut lines = BufReader::new(stderr).lines();
            while let Some(Ok(line)) = lines.next() {
                kept.lock().unwrap().push_str(&format!("{line}\n"));
                if let Some(rest) = line.split("listening on http").nth(1) {
                    let address = rest.trim_start_matches('s').trim_start_matches("://");
                    let address = address.trim_end_matches("/acp").to_string();
                    let _ = sender.send(address);
                }
            }
        });
        let address = receiver
            .recv_timeout(Duration::from_secs(30))
            .unwrap_or_else(|_| panic!("serve did not start: {}", text.lock().unwrap()));
        let token_file = args
            .iter()
            .position(|a| *a == "--token-file")
            .and_then(|i| args.get(i + 1))
            .map_or_else(|| home.join("serve-token"), PathBuf::from);
        let token = std::fs::read_to_string(&token_file)
            .map(|t| t.trim().to_string())
            .unwrap_or_default();
        Server {
            child,
            address: address.parse().expect("an address"),
            token,
            base,
            home,
            stderr: text,
        }
    }

    pub fn url(&self) -> String {
        format!("http://{}/acp", self.address)
    }

    /// A raw socket to the server, with a read timeout.
    pub fn socket(&self) -> TcpStream {
        let socket = TcpStream::connect(self.address).expect("connect");
        socket
            .set_read_timeout(Some(Duration::from_secs(20)))
            .unwrap();
        socket
    }

    /// Sends `request` bytes on a new socket and reads the answer until
    /// the server closes it or `limit` passes: the status and the text.
    pub fn raw(&self, request: &[u8], limit: Duration) -> (u16, String) {
        let mut socket = self.socket();
        socket.set_read_timeout(Some(limit)).unwrap();
        let _ = socket.write_all(request);
        read_answer(&mut socket)
    }

    /// A POST of `body` to /acp with the token and `headers`.
    pub fn post(&self, body: &str, headers: &[(&str, &str)]) -> (u16, String) {
        let mut request = format!(
            "POST /acp HTTP/1.1\r\nHost: {}\r\nAuthorization: Bearer {}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n",
            self.address,
            self.token,
            body.len()
        );
        for (name, value) in headers {
            request.push_str(&format!("{name}: {value}\r\n"));
        }
        request.push_str("\r\n");
        request.push_str(body);
        self.raw(request.as_bytes(), Duration::from_secs(30))
    }

    /// `initialize` over HTTP: the connection id.
    pub fn initialize(&self) -> String {
        let mut socket = self.socket();
        let body = r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{}}}"#;
        let request = format!(
            "POST /acp HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            self.token,
            body.len()
        );
        socket.write_all(request.as_bytes()).unwrap();
        let (status, text) = read_answer(&mut socket);
        assert_eq!(status, 200, "{text}");
        header_of(&text, "acp-connection-id").expect("a connection id")
    }

    /// Whether the server still answers its health check.
    pub fn healthy(&self) -> bool {
        let (status, _) = self.raw(
            b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
            Duration::from_secs(10),
        );
        status == 200
    }

    /// Waits for the process to end, up to `limit`.
    pub fn wait_exit(&mut self, limit: Duration) -> Option<std::process::ExitStatus> {
        let deadline = Instant::now() + limit;
        while Instant::now() < deadline {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Some(status);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        None
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Reads an HTTP answer until the socket ends or times out: its status
/// (0 when none came) and the whole text.
pub fn read_answer(socket: &mut TcpStream) -> (u16, String) {
    let mut bytes = Vec::new();
    let mut buf = [0u8; 8192];
    loop {
        match socket.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                bytes.extend_from_slice(&buf[..n]);
                if bytes.len() > 1 << 20 {
                    break;
                }
                // One whole answer with a length is enough.
                if let Some(done) = complete(&bytes) {
                    bytes.truncate(done);
                    break;
                }
            }
        }
    }
    let text = String::from_utf8_lossy(&bytes).to_string();
    let status = text
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    (status, text)
}

/// The length of a complete answer with a `Content-Length` at the start
/// of `bytes`, if it is all there.
fn complete(bytes: &[u8]) -> Option<usize> {
    let text = String::from_utf8_lossy(bytes);
    let head_end = text.find("\r\n\r\n")? + 4;
    let length: usize = header_of(&text[..head_end], "content-length")?
        .parse()
        .ok()?;
    (bytes.len() >= head_end + length).then_some(head_end + length)
}

/// A header's value in an answer's text.
pub fn header_of(text: &str, name: &str) -> Option<String> {
    text.split("\r\n\r\n").next()?.lines().find_map(|line| {
        let (n, v) = line.split_once(':')?;
        n.trim()
            .eq_ignore_ascii_case(name)
            .then(|| v.trim().to_string())
    })
}

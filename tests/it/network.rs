//! Trust and proxies over loopback: an HTTPS model server whose
//! certificate an internal test CA signed (`tests/data/tls`), trusted only
//! through `SSL_CERT_FILE`, `SSL_CERT_DIR` or the config's `tls.ca_file`
//! and refused otherwise (two agents of one process each by their own
//! config); a proxy that records what it is asked
//! (`CONNECT` or an absolute-form request) and tunnels; `NO_PROXY`; and
//! the error of a proxy that is not there.

use crate::support::fake_openai::chat_text;
use crate::support::in_process;
use crate::support::prelude::WAIT;
use crate::support::{temp_dir, updates_text, write_file, Agent, FakeServer, Reply};
use serde_json::{json, Value};
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::thread;

// ---------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------

fn tls_data(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/tls")
        .join(name)
}

/// The proxy and trust variables of the test process's environment, made
/// empty, so that only what a test sets counts.
const QUIET: [(&str, &str); 10] = [
    ("HTTPS_PROXY", ""),
    ("https_proxy", ""),
    ("HTTP_PROXY", ""),
    ("http_proxy", ""),
    ("ALL_PROXY", ""),
    ("all_proxy", ""),
    ("NO_PROXY", ""),
    ("no_proxy", ""),
    ("SSL_CERT_FILE", ""),
    ("SSL_CERT_DIR", ""),
];

/// `spindle acp --model test-model --retries 0` against `base`, with the
/// quiet environment and then `env` on top; initialized.
fn agent_for(base: &str, env: &[(&str, &str)]) -> Agent {
    let mut all: Vec<(&str, &str)> = QUIET.to_vec();
    all.extend([("OPENAI_BASE_URL", base), ("OPENAI_API_KEY", "sk-test")]);
    all.extend_from_slice(env);
    let mut agent = Agent::spawn(&["acp", "--model", "test-model", "--retries", "0"], &all);
    agent.initialize();
    agent
}

/// Sends one prompt in a new session; the answer and the turn's messages.
fn prompt(agent: &mut Agent, name: &str) -> (Value, Vec<Value>) {
    let session = agent.new_session(&temp_dir(name));
    let id = agent.request(
        "session/prompt",
        json!({"sessionId": session, "prompt": [{"type": "text", "text": "hello"}]}),
    );
    agent.response(&id, WAIT)
}

fn error_message(response: &Value) -> &str {
    response["error"]["message"].as_str().unwrap_or_default()
}

/// A port nothing listens on (it was free a moment ago).
fn dead_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A proxy on 127.0.0.1 that records the request line (and any
/// `Proxy-Authorization`) of each connection, tunnels `CONNECT`s to their
/// target and forwards absolute-form requests (`GET http://…`) in origin
/// form; anything else is answered 502.
struct FakeProxy {
    port: u16,
    seen: Arc<Mutex<Vec<String>>>,
}

impl FakeProxy {
    fn start() -> FakeProxy {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let record = seen.clone();
        thread::spawn(move || {
            for mut client in listener.incoming().flatten() {
                let record = record.clone();
                thread::spawn(move || {
                    let Some(head) = read_head(&mut client) else {
                        return;
                    };
                    let line = head.lines().next().unwrap_or_default().to_string();
                    record.lock().unwrap().push(line.clone());
                    for header in head.lines().skip(1) {
                        if header
                            .to_ascii_lowercase()
                            .starts_with("proxy-authorization:")
                        {
                            record.lock().unwrap().push(header.to_string());
                        }
                    }
                    let mut words = line.split(' ');
                    let (method, target) = (words.next().unwrap_or_default(), words.next());
                    let (address, forward) = match target {
                        Some(target) if method == "CONNECT" => (target.to_string(), None),
                        Some(target) if target.starts_with("http://") => {
                            let rest = &target["http://".len()..];
                            let (authority, path) =
                                rest.split_at(rest.find('/').unwrap_or(rest.len()));
                            let authority = if authority.contains(':') {
                                authority.to_string()
                            } else {
                                format!("{authority}:80")
                            };
                            // Names only this proxy knows.
                            let authority = match authority.split_once(".invalid:") {
                                Some((_, port)) => format!("127.0.0.1:{port}"),
                                None => authority,
                            };
                            let version = words.next().unwrap_or("HTTP/1.1");
                            let mut origin = format!("{method} {path} {version}\r\n");
                            for header in head.split("\r\n").skip(1) {
                                if !header.to_ascii_lowercase().starts_with("proxy-") {
                                    origin.push_str(header);
                                    origin.push_str("\r\n");
                                }
                            }
                            (
                                authority,
                                Some(origin.trim_end_matches("\r\n").to_string() + "\r\n\r\n"),
                            )
                        }
                        _ => (String::new(), None),
                    };
                    let Some(mut upstream) = TcpStream::connect(address).ok() else {
                        let _ = client
                            .write_all(b"HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\n\r\n");
                        return;
                    };
                    match forward {
                        Some(origin) => {
                            let _ = upstream.write_all(origin.as_bytes());
                        }
                        None => {
                            let _ =
                                client.write_all(b"HTTP/1.1 200 Connection established\r\n\r\n");
                        }
                    }
                    let (mut from_client, mut to_upstream) =
                        (client.try_clone().unwrap(), upstream.try_clone().unwrap());
                    thread::spawn(move || {
                        let _ = std::io::copy(&mut from_client, &mut to_upstream);
                        let _ = to_upstream.shutdown(std::net::Shutdown::Write);
                    });
                    let (mut from_upstream, mut to_client) = (upstream, client);
                    let _ = std::io::copy(&mut from_upstream, &mut to_client);
                    let _ = to_client.shutdown(std::net::Shutdown::Write);
                });
            }
        });
        FakeProxy { port, seen }
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    fn seen(&self) -> Vec<String> {
        self.seen.lock().unwrap().clone()
    }
}

/// Reads an HTTP head (through the blank line) byte by byte, so nothing
/// past it is taken from the stream.
fn read_head(stream: &mut impl Read) -> Option<String> {
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        if stream.read(&mut byte).ok()? == 0 || head.len() > 64 * 1024 {
            return None;
        }
        head.push(byte[0]);
    }
    String::from_utf8(head).ok()
}

/// An HTTPS server on 127.0.0.1 with the test CA's `localhost`
/// certificate: every POST gets one streamed Chat Completions answer,
/// every GET an empty model list; one request per connection.
struct TlsServer {
    port: u16,
}

impl TlsServer {
    fn start() -> TlsServer {
        TlsServer::start_with(
            rustls::crypto::ring::default_provider(),
            rustls::DEFAULT_VERSIONS,
        )
    }

    /// A server offering only `provider`'s suites, in `versions`.
    fn start_with(
        provider: rustls::crypto::CryptoProvider,
        versions: &[&'static rustls::SupportedProtocolVersion],
    ) -> TlsServer {
        use rustls::pki_types::pem::PemObject;
        use rustls::pki_types::{CertificateDer, PrivateKeyDer};
        let certs = CertificateDer::pem_file_iter(tls_data("server.pem"))
            .unwrap()
            .collect::<Result<Vec<_>, _>>()
            .unwrap();
        let key = PrivateKeyDer::from_pem_file(tls_data("server.key")).unwrap();
        let config = rustls::ServerConfig::builder_with_provider(Arc::new(provider))
            .with_protocol_versions(versions)
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(certs, key)
            .unwrap();
        let config = Arc::new(config);
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let config = config.clone();
                thread::spawn(move || {
                    let connection = rustls::ServerConnection::new(config).unwrap();
                    let mut tls = rustls::StreamOwned::new(connection, stream);
                    // A refused handshake ends here.
                    let Some(head) = read_head(&mut tls) else {
                        return;
                    };
                    let length = head
                        .lines()
                        .find_map(|line| {
                            let (name, value) = line.split_once(':')?;
                            name.eq_ignore_ascii_case("content-length")
                                .then(|| value.trim().parse::<usize>().ok())?
                        })
                        .unwrap_or(0);
                    let mut body = vec![0u8; length];
                    if tls.read_exact(&mut body).is_err() {
                        return;
                    }
                    let (kind, answer) = if head.starts_with("POST") {
                        ("text/event-stream", chat_stream("hello over tls"))
                    } else {
                        (
                            "application/json",
                            r#"{"object":"list","data":[]}"#.to_string(),
                        )
                    };
                    let reply = format!(
                        "HTTP/1.1 200 OK\r\nContent-Type: {kind}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{answer}",
                        answer.len()
                    );
                    let _ = tls.write_all(reply.as_bytes());
                    tls.conn.send_close_notify();
                    let _ = tls.flush();
                });
            }
        });
        TlsServer { port }
    }

    fn base_url(&self) -> String {
        format!("https://localhost:{}/v1", self.port)
    }
}

/// A whole Chat Completions stream saying `text`.
fn chat_stream(text: &str) -> String {
    let chunk = |delta: Value, finish: Value| {
        let value = json!({
            "id": "c1", "object": "chat.completion.chunk", "created": 0, "model": "test-model",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        });
        format!("data: {value}\n\n")
    };
    format!(
        "{}{}data: [DONE]\n\n",
        chunk(json!({"role": "assistant", "content": text}), Value::Null),
        chunk(json!({}), json!("stop")),
    )
}

// ---------------------------------------------------------------------
// Trust
// ---------------------------------------------------------------------

#[test]
fn an_internal_ca_is_refused_unless_it_is_trusted() {
    let server = TlsServer::start();
    let mut agent = agent_for(&server.base_url(), &[]);
    let (response, _) = prompt(&mut agent, "tls-refused");
    assert_eq!(response["error"]["data"]["code"], "provider_unreachable");
    assert!(
        error_message(&response).contains("UnknownIssuer"),
        "{response}"
    );
}

#[test]
fn ssl_cert_file_adds_a_trusted_ca() {
    let server = TlsServer::start();
    let ca = tls_data("ca.pem");
    let mut agent = agent_for(
        &server.base_url(),
        &[("SSL_CERT_FILE", ca.to_str().unwrap())],
    );
    let (response, messages) = prompt(&mut agent, "tls-file");
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    assert_eq!(
        updates_text(&messages, "agent_message_chunk"),
        "hello over tls"
    );
}

/// The suites Spindle offers: AES-GCM in TLS 1.3 and 1.2 (a server of
/// TLS 1.2 alone is reached), and not ChaCha20-Poly1305 (its code is left
/// out of the binary), so a server that offers nothing else is refused.
#[test]
fn tls_1_2_servers_are_reached_and_chacha_is_not_offered() {
    use rustls::crypto::ring::{cipher_suite, default_provider};
    let ca = tls_data("ca.pem");
    let trust = [("SSL_CERT_FILE", ca.to_str().unwrap())];
    let only = |suites: Vec<rustls::SupportedCipherSuite>| rustls::crypto::CryptoProvider {
        cipher_suites: suites,
        ..default_provider()
    };
    let old = TlsServer::start_with(
        only(vec![
            cipher_suite::TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,
            cipher_suite::TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,
        ]),
        &[&rustls::version::TLS12],
    );
    let mut agent = agent_for(&old.base_url(), &trust);
    let (response, _) = prompt(&mut agent, "tls-12");
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");

    let chacha = TlsServer::start_with(
        only(vec![cipher_suite::TLS13_CHACHA20_POLY1305_SHA256]),
        &[&rustls::version::TLS13],
    );
    let mut agent = agent_for(&chacha.base_url(), &trust);
    let (response, _) = prompt(&mut agent, "tls-chacha");
    assert_eq!(
        response["error"]["data"]["code"], "provider_unreachable",
        "{response}"
    );
}

#[test]
fn ssl_cert_dir_adds_its_cas_and_a_bad_file_is_only_warned_about() {
    let server = TlsServer::start();
    let dir = temp_dir("tls-dir");
    let certs = dir.join("certs");
    std::fs::create_dir_all(&certs).unwrap();
    std::fs::copy(tls_data("ca.pem"), certs.join("test-ca.pem")).unwrap();
    write_file(&certs, "notes.txt", "not a certificate");
    let garbage = write_file(&dir, "garbage.pem", "-----BEGIN CERTIFICATE-----\n!!!\n");
    // A list of folders: the missing one is passed over with a warning.
    let list = std::env::join_paths([dir.join("missing"), certs]).unwrap();
    let mut agent = agent_for(
        &server.base_url(),
        &[
            ("SSL_CERT_DIR", list.to_str().unwrap()),
            ("SSL_CERT_FILE", garbage.to_str().unwrap()),
        ],
    );
    let (response, _) = prompt(&mut agent, "tls-dir");
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    let stderr = agent.stderr();
    assert!(stderr.contains("garbage.pem"), "{stderr}");
    assert!(stderr.contains("missing"), "{stderr}");
}

#[test]
fn the_config_ca_file_adds_a_trusted_ca_from_the_config_folder() {
    let server = TlsServer::start();
    let dir = temp_dir("tls-config");
    std::fs::copy(tls_data("ca.pem"), dir.join("internal-ca.pem")).unwrap();
    let config = json!({
        "providers": {"internal": {"kind": "openai", "base_url": server.base_url(), "requires_key": false}},
        "defaults": {"model": "internal/test-model"},
        "tls": {"ca_file": "internal-ca.pem"},
    });
    let config = write_file(&dir, "config.json", config.to_string());
    let mut agent = Agent::spawn(
        &[
            "acp",
            "--config",
            config.to_str().unwrap(),
            "--retries",
            "0",
        ],
        &QUIET,
    );
    agent.initialize();
    let (response, messages) = prompt(&mut agent, "tls-config");
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    assert_eq!(
        updates_text(&messages, "agent_message_chunk"),
        "hello over tls"
    );
}

/// A config in `dir` for the HTTPS server at `base`, trusting the test
/// CA (copied beside it as `tls.ca_file`) when `trusting`.
fn config_for(dir: &Path, base: &str, trusting: bool) -> PathBuf {
    std::fs::create_dir_all(dir).unwrap();
    let mut config = json!({
        "providers": {"internal": {"kind": "openai", "base_url": base, "requires_key": false}},
        "models": {"internal/test-model": {}},
        "defaults": {"model": "internal/test-model"},
    });
    if trusting {
        std::fs::copy(tls_data("ca.pem"), dir.join("internal-ca.pem")).unwrap();
        config["tls"] = json!({"ca_file": "internal-ca.pem"});
    }
    write_file(dir, "config.json", config.to_string())
}

/// Two agents in one process (the in-process tier: `agent::serve` on a
/// thread of the test), one whose config trusts the test CA and one whose
/// config does not: each keeps its own trust, whichever loaded its config
/// last, with both turns running at once.
#[test]
fn two_agents_of_one_process_keep_their_own_trust() {
    let server = TlsServer::start();
    let base = server.base_url();
    for trusting_first in [true, false] {
        let dir = temp_dir("tls-two");
        let trusting = config_for(&dir.join("trusting"), &base, true);
        let plain = config_for(&dir.join("plain"), &base, false);
        let start = |config: &PathBuf| {
            let mut agent = in_process::with_options(|options| {
                options.config = Some(config.clone());
                options.timeouts.attempts = 1;
                options.retries_given = true;
            });
            agent.initialize();
            let session = agent.new_session(&temp_dir("tls-two-work"));
            (agent, session)
        };
        // Each agent has loaded its config and built its providers before
        // the other starts: the second one's must not reach the first.
        let ((mut with_ca, with_session), (mut without, without_session)) = if trusting_first {
            let first = start(&trusting);
            (first, start(&plain))
        } else {
            let first = start(&plain);
            (start(&trusting), first)
        };
        let ask = |agent: &mut Agent, session: &str| {
            agent.request(
                "session/prompt",
                json!({"sessionId": session, "prompt": [{"type": "text", "text": "hello"}]}),
            )
        };
        // Both prompts are sent before either answer is read.
        let with_id = ask(&mut with_ca, &with_session);
        let without_id = ask(&mut without, &without_session);
        let (response, messages) = with_ca.response(&with_id, WAIT);
        assert_eq!(
            response["result"]["stopReason"], "end_turn",
            "trusting first: {trusting_first}: {response}"
        );
        assert_eq!(
            updates_text(&messages, "agent_message_chunk"),
            "hello over tls"
        );
        let (response, _) = without.response(&without_id, WAIT);
        assert_eq!(
            response["error"]["data"]["code"], "provider_unreachable",
            "trusting first: {trusting_first}: {response}"
        );
        assert!(
            error_message(&response).contains("UnknownIssuer"),
            "{response}"
        );
    }
}

// ---------------------------------------------------------------------
// Proxies
// ---------------------------------------------------------------------

/// The port of an `http://127.0.0.1:PORT/...` URL.
fn port_of(url: &str) -> String {
    let rest = url.split(':').nth(2).unwrap();
    rest.split('/').next().unwrap().to_string()
}

#[test]
fn requests_go_through_the_proxy_of_their_scheme() {
    let server = FakeServer::start();
    server.push(Reply::Sse(chat_text(&["through the proxy"])));
    let proxy = FakeProxy::start();
    let port = port_of(&server.base_url());
    // HTTPS_PROXY is not for an http URL: a dead one is never tried.
    let dead = format!("http://127.0.0.1:{}", dead_port());
    let mut agent = agent_for(
        &server.base_url(),
        &[("HTTP_PROXY", &proxy.url()), ("HTTPS_PROXY", &dead)],
    );
    let (response, messages) = prompt(&mut agent, "proxy-connect");
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    assert_eq!(
        updates_text(&messages, "agent_message_chunk"),
        "through the proxy"
    );
    // Plain HTTP goes to the proxy in absolute form, not tunnelled: many
    // proxies refuse CONNECT to port 80.
    let seen = proxy.seen();
    assert!(!seen.is_empty());
    let chat = format!("POST http://127.0.0.1:{port}/v1/chat/completions HTTP/1.1");
    assert!(seen.contains(&chat), "{seen:?}");
    let absolute = |line: &String| {
        line.starts_with(&format!("GET http://127.0.0.1:{port}/"))
            || line.starts_with(&format!("POST http://127.0.0.1:{port}/"))
    };
    assert!(seen.iter().all(absolute), "{seen:?}");
}

#[test]
fn plain_http_through_a_proxy_carries_its_credentials_and_no_dns_of_its_own() {
    let server = FakeServer::start();
    server.push(Reply::Sse(chat_text(&["named host"])));
    let proxy = FakeProxy::start();
    let port = port_of(&server.base_url());
    // The proxy resolves the target's name (this one maps `.invalid` to
    // itself): Spindle does not look it up, since the proxy's network may
    // know names the machine cannot resolve.
    let base = format!("http://model.invalid:{port}/v1");
    let with_user = format!("http://team:s3cret@127.0.0.1:{}", proxy.port);
    let mut agent = agent_for(&base, &[("HTTP_PROXY", &with_user)]);
    let (response, messages) = prompt(&mut agent, "proxy-absolute");
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    assert_eq!(updates_text(&messages, "agent_message_chunk"), "named host");
    let seen = proxy.seen();
    let chat = format!("POST http://model.invalid:{port}/v1/chat/completions HTTP/1.1");
    let at = seen.iter().position(|line| *line == chat);
    let at = at.unwrap_or_else(|| panic!("{seen:?}"));
    // base64("team:s3cret")
    assert_eq!(seen[at + 1], "Proxy-Authorization: Basic dGVhbTpzM2NyZXQ=");
    // The model server never saw the proxy's credentials.
    let request = server.requests().pop().unwrap();
    assert_eq!(request.path, "/v1/chat/completions");
    assert!(
        request
            .headers
            .iter()
            .all(|(name, _)| !name.starts_with("proxy-")),
        "{:?}",
        request.headers
    );
}

#[test]
fn https_through_a_proxy_trusts_the_same_cas() {
    let server = TlsServer::start();
    let proxy = FakeProxy::start();
    let ca = tls_data("ca.pem");
    let mut agent = agent_for(
        &server.base_url(),
        &[
            ("ALL_PROXY", &proxy.url()),
            ("SSL_CERT_FILE", ca.to_str().unwrap()),
        ],
    );
    let (response, _) = prompt(&mut agent, "proxy-tls");
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    assert!(proxy
        .seen()
        .contains(&format!("CONNECT localhost:{} HTTP/1.1", server.port)));
}

#[test]
fn no_proxy_with_spaces_and_ranges_goes_direct() {
    let dead = format!("http://127.0.0.1:{}", dead_port());
    for no_proxy in [" example.com , 127.0.0.0/8 ", "localhost,\t127.0.0.1 ", "*"] {
        let server = FakeServer::start();
        server.push(Reply::Sse(chat_text(&["direct"])));
        let mut agent = agent_for(
            &server.base_url(),
            &[("HTTP_PROXY", &dead), ("NO_PROXY", no_proxy)],
        );
        let (response, _) = prompt(&mut agent, "no-proxy");
        assert_eq!(
            response["result"]["stopReason"], "end_turn",
            "NO_PROXY={no_proxy:?}: {response}"
        );
    }
}

#[test]
fn a_dead_proxy_is_named_in_the_error() {
    let server = FakeServer::start();
    let dead = format!("http://127.0.0.1:{}", dead_port());
    let mut agent = agent_for(&server.base_url(), &[("http_proxy", &dead)]);
    let (response, _) = prompt(&mut agent, "dead-proxy");
    assert_eq!(response["error"]["data"]["code"], "provider_unreachable");
    let message = error_message(&response);
    assert!(
        message.contains(&format!(
            "cannot connect to the proxy {dead} (from http_proxy)"
        )) || (cfg!(windows) // whose variable names ignore case
            && message.contains(&format!(
                "cannot connect to the proxy {dead} (from HTTP_PROXY)"
            ))),
        "{message}"
    );
    assert!(!message.contains(&server.base_url()), "{message}");
    assert!(server.requests().is_empty());
}

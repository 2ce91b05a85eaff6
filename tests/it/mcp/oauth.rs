//! Signing in to a remote MCP server: a fake authorization server and a
//! protected fake MCP server on 127.0.0.1, `spindle mcp login` driven to
//! the end (the test plays the browser: it opens the printed URL, which
//! the fake approves by redirecting, and follows the redirect to the
//! loopback callback), then the tokens used, refreshed, dropped, removed.

use super::{call_tools, notes_about, open, say, Bench};
use crate::support::mcp_server::{read_request, respond, HttpMcp, HttpRequest};
use crate::support::prelude::WAIT;
use crate::support::{run_prompt, spindle_command};
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

/// What the fake authorization server saw and decided.
#[derive(Default)]
struct AuthState {
    requests: Vec<HttpRequest>,
    /// The authorize request's parameters.
    authorize: Vec<(String, String)>,
    registered: Option<Value>,
    /// Access tokens still to give, with their lifetimes.
    to_issue: Vec<(String, u64)>,
    code_redeemed: bool,
    refused_code: Option<String>,
    /// An authorization endpoint a hostile server names instead.
    hostile_authorize: Option<String>,
}

/// A fake authorization server (metadata, registration, authorize, token)
/// that also serves the MCP server's protected resource metadata.
struct FakeAuth {
    base: String,
    state: Arc<Mutex<AuthState>>,
    refuse_refresh: Arc<AtomicBool>,
}

const CODE: &str = "it-code-4711";
const REFRESH: &str = "it-refresh-0815";

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

fn query(text: &str) -> Vec<(String, String)> {
    text.split('&')
        .filter_map(|pair| pair.split_once('='))
        .map(|(k, v)| (unescape(k), unescape(v)))
        .collect()
}

fn unescape(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' && i + 2 < bytes.len() {
            out.push(u8::from_str_radix(&text[i + 1..i + 3], 16).unwrap_or(b'?'));
            i += 3;
        } else {
            out.push(if bytes[i] == b'+' { b' ' } else { bytes[i] });
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn param<'a>(pairs: &'a [(String, String)], name: &str) -> Option<&'a str> {
    pairs
        .iter()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.as_str())
}

/// base64url(SHA-256(verifier)), the S256 challenge, computed here.
fn s256(verifier: &str) -> String {
    let digest = ring::digest::digest(&ring::digest::SHA256, verifier.as_bytes());
    spindle::util::base64_encode(digest.as_ref())
        .trim_end_matches('=')
        .replace('+', "-")
        .replace('/', "_")
}

impl FakeAuth {
    fn serve_on(listener: TcpListener, mcp_url: &str, to_issue: Vec<(String, u64)>) -> FakeAuth {
        let base = format!("http://{}", listener.local_addr().expect("address"));
        let state = Arc::new(Mutex::new(AuthState {
            to_issue,
            ..AuthState::default()
        }));
        let refuse_refresh = Arc::new(AtomicBool::new(false));
        let (shared, refuse, here, mcp) = (
            state.clone(),
            refuse_refresh.clone(),
            base.clone(),
            mcp_url.to_string(),
        );
        thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { continue };
                let _ = stream.set_read_timeout(Some(Duration::from_secs(10)));
                let Some(request) = read_request(&stream) else {
                    continue;
                };
                lock(&shared).requests.push(request.clone());
                serve(&request, stream, &shared, &refuse, &here, &mcp);
            }
        });
        FakeAuth {
            base,
            state,
            refuse_refresh,
        }
    }

    fn token_requests(&self) -> Vec<Vec<(String, String)>> {
        lock(&self.state)
            .requests
            .iter()
            .filter(|r| r.target == "/token")
            .map(|r| query(&r.body))
            .collect()
    }
}

fn json_answer(stream: TcpStream, status: &str, body: Value) {
    respond(
        stream,
        status,
        &[("Content-Type", "application/json")],
        &body.to_string(),
    )
}

fn serve(
    request: &HttpRequest,
    stream: TcpStream,
    state: &Mutex<AuthState>,
    refuse_refresh: &AtomicBool,
    base: &str,
    mcp: &str,
) {
    let (path, q) = request
        .target
        .split_once('?')
        .unwrap_or((request.target.as_str(), ""));
    match (request.method.as_str(), path) {
        ("GET", "/.well-known/oauth-protected-resource/mcp") => json_answer(
            stream,
            "200 OK",
            json!({"resource": mcp, "authorization_servers": [base], "scopes_supported": ["mcp"]}),
        ),
        ("GET", "/.well-known/oauth-authorization-server") => json_answer(
            stream,
            "200 OK",
            json!({
                "issuer": base,
                "authorization_endpoint": lock(state).hostile_authorize.clone()
                    .unwrap_or_else(|| format!("{base}/authorize")),
                "token_endpoint": format!("{base}/token"),
                "registration_endpoint": format!("{base}/register"),
                "code_challenge_methods_supported": ["S256"],
            }),
        ),
        ("POST", "/register") => {
            let asked = request.json();
            lock(state).registered = Some(asked);
            json_answer(
                stream,
                "201 Created",
                json!({"client_id": "it-client", "token_endpoint_auth_method": "none"}),
            )
        }
        ("GET", "/authorize") => {
            let pairs = query(q);
            let to = format!(
                "{}?code={CODE}&state={}",
                param(&pairs, "redirect_uri").unwrap_or(""),
                param(&pairs, "state").unwrap_or("")
            );
            lock(state).authorize = pairs;
            respond(stream, "302 Found", &[("Location", to.as_str())], "");
        }
        ("POST", "/token") => {
            let form = query(&request.body);
            let mut state = lock(state);
            let grant = param(&form, "grant_type").unwrap_or("");
            let resource_ok = param(&form, "resource") == Some(mcp);
            let ok = match grant {
                "authorization_code" => {
                    let challenge = param(&state.authorize, "code_challenge").unwrap_or("");
                    let verifier = param(&form, "code_verifier").unwrap_or("");
                    let fine = param(&form, "code") == Some(CODE)
                        && !state.code_redeemed
                        && param(&form, "client_id") == Some("it-client")
                        && param(&form, "redirect_uri") == param(&state.authorize, "redirect_uri")
                        && !verifier.is_empty()
                        && s256(verifier) == challenge
                        && resource_ok;
                    if !fine {
                        state.refused_code = Some(format!("{form:?}"));
                    }
                    state.code_redeemed |= fine;
                    fine
                }
                "refresh_token" => {
                    !refuse_refresh.load(Ordering::SeqCst)
                        && param(&form, "refresh_token") == Some(REFRESH)
                        && resource_ok
                }
                _ => false,
            };
            if !ok || state.to_issue.is_empty() {
                drop(state);
                return json_answer(stream, "400 Bad Request", json!({"error": "invalid_grant"}));
            }
            let (token, lifetime) = state.to_issue.remove(0);
            drop(state);
            json_answer(
                stream,
                "200 OK",
                json!({"access_token": token, "token_type": "Bearer",
                       "expires_in": lifetime, "refresh_token": REFRESH}),
            )
        }
        _ => respond(stream, "404 Not Found", &[], ""),
    }
}

/// One GET as a browser would make it: the status line and `Location`.
fn browse(url: &str) -> (String, Option<String>) {
    let rest = url.strip_prefix("http://").expect("a loopback http URL");
    let (authority, target) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
    let mut stream = TcpStream::connect(authority).expect("connect");
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .expect("timeout");
    write!(
        stream,
        "GET {target} HTTP/1.1\r\nHost: {authority}\r\nConnection: close\r\n\r\n"
    )
    .expect("write");
    let mut text = String::new();
    let _ = stream.read_to_string(&mut text);
    let status = text.lines().next().unwrap_or("").to_string();
    let location = text
        .lines()
        .find_map(|line| {
            line.split_once(':')
                .filter(|(name, _)| name.eq_ignore_ascii_case("location"))
        })
        .map(|(_, value)| value.trim().to_string());
    (status, location)
}

/// `spindle mcp login remote` in `home`, its output piped.
fn login(home: &Path) -> Child {
    spindle_command(home)
        .args(["mcp", "login", "remote"])
        .env("RUST_LOG", "debug")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start spindle mcp login")
}

/// The authorization URL a login printed, and the rest of its stdout.
fn read_url(child: &mut Child) -> (String, BufReader<std::process::ChildStdout>) {
    let mut out = BufReader::new(child.stdout.take().expect("stdout"));
    let mut seen = String::new();
    loop {
        let mut line = String::new();
        if out.read_line(&mut line).unwrap_or(0) == 0 {
            let mut err = String::new();
            let _ = child.stderr.take().map(|mut e| e.read_to_string(&mut err));
            let _ = child.kill();
            let _ = child.wait();
            panic!("login printed no URL:\n{seen}\n{err}");
        }
        seen.push_str(&line);
        if let Some(url) = line.trim().strip_prefix("http://") {
            return (format!("http://{url}"), out);
        }
    }
}

/// Waits for the login to end: success, stdout and stderr.
fn finish_login(
    mut child: Child,
    mut out: BufReader<std::process::ChildStdout>,
) -> (bool, String, String) {
    let mut stdout = String::new();
    let _ = out.read_to_string(&mut stdout);
    let mut stderr = String::new();
    let _ = child
        .stderr
        .take()
        .map(|mut e| e.read_to_string(&mut stderr));
    let status = child.wait().expect("wait for login");
    (status.success(), stdout, stderr)
}

fn home_with_server(bench: &Bench, url: &str) -> PathBuf {
    let home = PathBuf::from(bench.file("spindle-home"));
    std::fs::create_dir_all(&home).expect("home");
    std::fs::write(
        home.join("config.json"),
        json!({"mcp_servers": [{"name": "remote", "type": "http", "url": url}]}).to_string(),
    )
    .expect("config");
    home
}

fn token_file(home: &Path) -> PathBuf {
    home.join("keys").join("mcp").join("remote.json")
}

/// Logs in, playing the browser; returns the login's stdout and stderr.
fn log_in(home: &Path, auth: &FakeAuth) -> (String, String) {
    let mut child = login(home);
    let (url, out) = read_url(&mut child);
    assert!(
        url.starts_with(&format!("{}/authorize?", auth.base)),
        "{url}"
    );
    let (status, location) = browse(&url);
    assert!(status.contains("302"), "{status}");
    let (status, _) = browse(&location.expect("the fake redirects"));
    assert!(status.contains("200"), "the callback answered {status}");
    let (ok, stdout, stderr) = finish_login(child, out);
    assert!(
        ok,
        "login failed:\n{stdout}\n{stderr}\nrefused: {:?}",
        lock(&auth.state).refused_code
    );
    (stdout, stderr)
}

#[test]
fn login_discovers_registers_uses_pkce_and_the_token_stays_secret() {
    let bench = Bench::new("mcp-oauth-login");
    let token = format!("it-access-{}", spindle::util::random_hex());
    // The server's URL is only known once it runs; the fake
    // authorization server learns it after.
    let listener_auth = FakeAuthSlot::new();
    let mcp = HttpMcp::protected(&format!("Bearer {token}"), &listener_auth.challenge());
    let auth = listener_auth.start(&mcp.url(), vec![(token.clone(), 3600)]);
    let home = home_with_server(&bench, &mcp.url());

    let (stdout, stderr) = log_in(&home, &auth);
    assert!(
        stdout.contains("Signed in to MCP server `remote`"),
        "{stdout}"
    );
    // What the fake saw: a public client registered for a loopback
    // callback, and an authorization request with S256, state, resource.
    let registered = lock(&auth.state).registered.clone().expect("registered");
    let redirect = registered["redirect_uris"][0].as_str().unwrap_or("");
    assert!(
        redirect.starts_with("http://127.0.0.1:") && redirect.ends_with("/callback"),
        "{registered}"
    );
    assert_eq!(registered["token_endpoint_auth_method"], "none");
    let asked = lock(&auth.state).authorize.clone();
    assert_eq!(param(&asked, "code_challenge_method"), Some("S256"));
    assert_eq!(param(&asked, "resource"), Some(mcp.url().as_str()));
    assert_eq!(param(&asked, "scope"), Some("mcp"));
    assert!(param(&asked, "state").is_some_and(|s| s.len() >= 16));
    assert!(lock(&auth.state).code_redeemed, "the code was not redeemed");

    // The tokens: a private file under Spindle's keys, not the workspace.
    let file = token_file(&home);
    let kept = std::fs::read_to_string(&file).expect("the token file");
    assert!(kept.contains(&token));
    assert!(!file.starts_with(&bench.ws));
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&file).expect("meta").permissions().mode();
        assert_eq!(mode & 0o077, 0, "the token file is mode {mode:o}");
    }

    // The agent sends it to the server and nowhere else.
    let home_text = home.to_str().expect("UTF-8").to_string();
    let mut agent = bench.agent(
        "yolo",
        &[("SPINDLE_HOME", &home_text), ("RUST_LOG", "debug")],
    );
    let opened = open(
        &mut agent,
        &bench.ws,
        json!([{"type": "http", "name": "remote", "url": mcp.url(), "headers": []}]),
    );
    assert!(
        notes_about(&opened.messages, "remote").is_empty(),
        "{:?}",
        opened.messages
    );
    bench
        .model
        .push(call_tools(&[("c1", "remote__echo", json!({"text": "hi"}))]));
    bench.model.push(say("Done."));
    let turn = run_prompt(
        &mut agent,
        &opened.session,
        "call it",
        WAIT,
        crate::support::client::no_requests,
    );
    assert_eq!(turn.final_text("c1"), "http echo: hi", "{}", turn.dump());
    agent.close_stdin();
    assert!(agent.wait_exit(Duration::from_secs(10)).is_some());
    let sent = mcp
        .requests()
        .iter()
        .filter(|r| r.header("authorization") == Some(format!("Bearer {token}").as_str()))
        .count();
    assert!(sent >= 2, "the server never got the token");

    let received: String = agent.received().iter().map(Value::to_string).collect();
    let requests: String = bench.bodies().iter().map(Value::to_string).collect();
    let mut leaks = Vec::new();
    for (what, text) in [
        ("login stdout", stdout.as_str()),
        ("login stderr (RUST_LOG=debug)", stderr.as_str()),
        ("agent stdout", received.as_str()),
        ("agent stderr (RUST_LOG=debug)", agent.stderr().as_str()),
        ("model requests", requests.as_str()),
    ] {
        if text.contains(&token) {
            leaks.push(what);
        }
    }
    assert!(leaks.is_empty(), "the token leaked to: {leaks:?}");

    let doctor = spindle_command(&home)
        .arg("doctor")
        .current_dir(&bench.ws)
        .output()
        .expect("doctor");
    let report = String::from_utf8_lossy(&doctor.stdout);
    assert!(
        report
            .lines()
            .any(|line| line.contains("remote") && line.contains("signed in")),
        "{report}"
    );
    assert!(!report.contains(&token), "the doctor shows the token");

    // Logout removes the file and says nothing was revoked.
    let out = spindle_command(&home)
        .args(["mcp", "logout", "remote"])
        .output()
        .expect("logout");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && text.contains("Nothing was revoked"),
        "{text}"
    );
    assert!(!file.exists(), "logout left the token file");
}

#[test]
fn a_callback_with_another_state_is_refused() {
    let bench = Bench::new("mcp-oauth-state");
    let slot = FakeAuthSlot::new();
    let mcp = HttpMcp::protected("Bearer never", &slot.challenge());
    let auth = slot.start(&mcp.url(), vec![("it-never-given".into(), 3600)]);
    let home = home_with_server(&bench, &mcp.url());
    let mut child = login(&home);
    let (url, out) = read_url(&mut child);
    let (_, location) = browse(&url);
    let location = location.expect("the fake redirects");
    let state = param(&lock(&auth.state).authorize, "state")
        .expect("a state")
        .to_string();
    let forged = location.replace(&format!("state={state}"), "state=forged-by-a-page");
    assert_ne!(forged, location);
    let (status, _) = browse(&forged);
    assert!(status.contains("400"), "{status}");
    let (ok, stdout, stderr) = finish_login(child, out);
    assert!(!ok, "a forged state signed in:\n{stdout}");
    assert!(stderr.contains("state"), "{stderr}");
    assert!(auth.token_requests().is_empty(), "the code was redeemed");
    assert!(!token_file(&home).exists());
}

#[test]
fn a_stale_token_is_refreshed_and_a_refused_refresh_asks_for_sign_in() {
    let bench = Bench::new("mcp-oauth-refresh");
    let fresh = format!("it-fresh-{}", spindle::util::random_hex());
    let slot = FakeAuthSlot::new();
    let mcp = HttpMcp::protected(&format!("Bearer {fresh}"), &slot.challenge());
    // The first token is stale at once; the refresh gives the one the
    // server takes.
    let auth = slot.start(
        &mcp.url(),
        vec![
            ("it-stale".into(), 1),
            (fresh.clone(), 3600),
            (fresh.clone(), 3600),
        ],
    );
    let home = home_with_server(&bench, &mcp.url());
    log_in(&home, &auth);
    let home_text = home.to_str().expect("UTF-8").to_string();
    let servers = json!([{"type": "http", "name": "remote", "url": mcp.url(), "headers": []}]);
    let mut agent = bench.agent(
        "yolo",
        &[("SPINDLE_HOME", &home_text), ("RUST_LOG", "debug")],
    );
    let opened = open(&mut agent, &bench.ws, servers.clone());
    assert!(
        notes_about(&opened.messages, "remote").is_empty(),
        "{:?}",
        opened.messages
    );
    let grants: Vec<String> = auth
        .token_requests()
        .iter()
        .map(|form| param(form, "grant_type").unwrap_or("").to_string())
        .collect();
    assert_eq!(grants, ["authorization_code", "refresh_token"]);
    let kept = std::fs::read_to_string(token_file(&home)).expect("the token file");
    assert!(kept.contains(&fresh), "the refreshed token was not kept");

    // A token the server refuses (a 401) is refreshed and the request
    // sent again.
    let mut held: Value = serde_json::from_str(&kept).expect("JSON");
    held["access_token"] = json!("it-refused-once");
    std::fs::write(token_file(&home), held.to_string()).expect("write");
    let retried = open(&mut agent, &bench.ws, servers.clone());
    assert!(
        notes_about(&retried.messages, "remote").is_empty(),
        "{:?}",
        retried.messages
    );
    assert_eq!(auth.token_requests().len(), 3, "no refresh after the 401");
    let kept = std::fs::read_to_string(token_file(&home)).expect("the token file");
    assert!(kept.contains(&fresh));

    // Now the server refuses what is held and the refresh is refused too:
    // the tokens are dropped and the user is told to sign in.
    let mut held: Value = serde_json::from_str(&kept).expect("JSON");
    held["access_token"] = json!("it-revoked");
    std::fs::write(token_file(&home), held.to_string()).expect("write");
    auth.refuse_refresh.store(true, Ordering::SeqCst);
    let again = open(&mut agent, &bench.ws, servers);
    let notes = notes_about(&again.messages, "remote").join("\n");
    assert!(notes.contains("spindle mcp login remote"), "{notes}");
    assert!(
        !token_file(&home).exists(),
        "tokens that failed to refresh were kept"
    );
    agent.close_stdin();
    assert!(agent.wait_exit(Duration::from_secs(10)).is_some());
}

/// The fake authorization server's listener, bound before the MCP
/// server exists so the MCP server's challenge can name it.
struct FakeAuthSlot {
    listener: TcpListener,
}

impl FakeAuthSlot {
    fn new() -> FakeAuthSlot {
        FakeAuthSlot {
            listener: TcpListener::bind("127.0.0.1:0").expect("bind"),
        }
    }

    fn base(&self) -> String {
        format!("http://{}", self.listener.local_addr().expect("address"))
    }

    fn challenge(&self) -> String {
        format!(
            "Bearer resource_metadata=\"{}/.well-known/oauth-protected-resource/mcp\", scope=\"mcp\"",
            self.base()
        )
    }

    fn start(self, mcp_url: &str, to_issue: Vec<(String, u64)>) -> FakeAuth {
        FakeAuth::serve_on(self.listener, mcp_url, to_issue)
    }
}

#[test]
fn in_acp_the_sign_in_url_goes_to_the_editor_and_the_server_connects() {
    let bench = Bench::new("mcp-oauth-acp");
    let token = format!("it-acp-{}", spindle::util::random_hex());
    let slot = FakeAuthSlot::new();
    let mcp = HttpMcp::protected(&format!("Bearer {token}"), &slot.challenge());
    let auth = slot.start(&mcp.url(), vec![(token.clone(), 3600)]);
    let home = home_with_server(&bench, &mcp.url());
    let home_text = home.to_str().expect("UTF-8").to_string();
    let mut agent = bench.launch(
        "yolo",
        &[("SPINDLE_HOME", &home_text), ("RUST_LOG", "debug")],
    );
    let id = agent.request(
        "initialize",
        json!({"protocolVersion": 1, "clientCapabilities": {"elicitation": {"url": {}}},
               "clientInfo": {"name": "spindle-tests", "version": "0.0.0"}}),
    );
    let (response, _) = agent.response(&id, WAIT);
    assert!(response.get("result").is_some(), "{response}");
    let opened = open(
        &mut agent,
        &bench.ws,
        json!([{"type": "http", "name": "remote", "url": mcp.url(), "headers": []}]),
    );
    // Not a silent failure: the session says the server needs sign-in.
    let notes = notes_about(&opened.messages, "remote").join("\n");
    assert!(notes.contains("needs sign-in"), "{notes}");
    // And the editor is asked to open the URL.
    let mut seen = opened.messages.clone();
    let asked = loop {
        if let Some(found) = seen
            .iter()
            .find(|m| m["method"] == "elicitation/create")
            .cloned()
        {
            break found;
        }
        match agent.recv(WAIT) {
            Some(message) => seen.push(message),
            None => panic!("no elicitation/create came:\n{seen:?}"),
        }
    };
    let params = &asked["params"];
    assert_eq!(params["mode"], "url", "{asked}");
    assert_eq!(params["sessionId"], opened.session.as_str());
    let url = params["url"].as_str().expect("a URL").to_string();
    assert!(
        url.starts_with(&format!("{}/authorize?", auth.base)),
        "{url}"
    );
    agent.send(json!({"jsonrpc": "2.0", "id": asked["id"], "result": {"action": "accept"}}));
    let (_, location) = browse(&url);
    let (status, _) = browse(&location.expect("the fake redirects"));
    assert!(status.contains("200"), "{status}");

    // The editor is told the elicitation is complete and the server
    // signed in, once it is connected.
    let mut done: Vec<Value> = Vec::new();
    while !notes_about(&done, "remote")
        .iter()
        .any(|note| note.contains("is signed in"))
    {
        let message = agent
            .recv(WAIT)
            .unwrap_or_else(|| panic!("no sign-in notice:\n{done:?}"));
        done.push(message);
    }
    let complete = done
        .iter()
        .find(|m| m["method"] == "elicitation/complete")
        .expect("elicitation/complete");
    assert_eq!(complete["params"]["elicitationId"], params["elicitationId"]);
    let bearer = format!("Bearer {token}");
    assert!(mcp.requests().iter().any(|r| {
        r.rpc_method().as_deref() == Some("tools/list")
            && r.header("authorization") == Some(bearer.as_str())
    }));
    assert!(token_file(&home).is_file());
    bench.model.push(call_tools(&[(
        "c1",
        "remote__echo",
        json!({"text": "after"}),
    )]));
    bench.model.push(say("Done."));
    let turn = run_prompt(
        &mut agent,
        &opened.session,
        "call it",
        WAIT,
        crate::support::client::no_requests,
    );
    assert_eq!(turn.final_text("c1"), "http echo: after", "{}", turn.dump());
    agent.close_stdin();
    assert!(agent.wait_exit(Duration::from_secs(10)).is_some());
    let received: String = agent.received().iter().map(Value::to_string).collect();
    let requests: String = bench.bodies().iter().map(Value::to_string).collect();
    assert!(!received.contains(&token), "the token reached the editor");
    assert!(
        !agent.stderr().contains(&token),
        "the token reached the log"
    );
    assert!(!requests.contains(&token), "the token reached the model");
}

#[test]
fn a_configured_client_id_is_used_without_registering() {
    let bench = Bench::new("mcp-oauth-client-id");
    let slot = FakeAuthSlot::new();
    let mcp = HttpMcp::protected("Bearer it-configured", &slot.challenge());
    let auth = slot.start(&mcp.url(), vec![("it-configured".into(), 3600)]);
    let home = PathBuf::from(bench.file("spindle-home"));
    std::fs::create_dir_all(&home).expect("home");
    std::fs::write(
        home.join("config.json"),
        json!({"mcp_servers": [{"name": "remote", "type": "http", "url": mcp.url(),
                                "oauth": {"client_id": "it-client"}}]})
        .to_string(),
    )
    .expect("config");
    log_in(&home, &auth);
    assert!(
        lock(&auth.state).registered.is_none(),
        "it registered anyway"
    );
    assert_eq!(
        param(&lock(&auth.state).authorize, "client_id"),
        Some("it-client")
    );
    assert!(token_file(&home).is_file());
}

#[test]
fn a_hostile_authorization_endpoint_never_reaches_the_user() {
    for hostile in [
        "javascript:alert(document.cookie)",
        "file:///etc/passwd",
        "http://auth.example/authorize",
    ] {
        let bench = Bench::new("mcp-oauth-hostile");
        let slot = FakeAuthSlot::new();
        let mcp = HttpMcp::protected("Bearer x", &slot.challenge());
        let auth = slot.start(&mcp.url(), vec![]);
        lock(&auth.state).hostile_authorize = Some(hostile.to_string());
        let home = home_with_server(&bench, &mcp.url());
        let out = spindle_command(&home)
            .args(["mcp", "login", "remote"])
            .output()
            .expect("login");
        let (stdout, stderr) = (
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr),
        );
        assert!(!out.status.success(), "{hostile}: {stdout}");
        assert!(!stdout.contains(hostile), "{hostile} was shown: {stdout}");
        assert!(stderr.contains("refused"), "{hostile}: {stderr}");
        assert!(lock(&auth.state).registered.is_none());
    }
}

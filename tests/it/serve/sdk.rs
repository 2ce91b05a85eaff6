//! The official Python and TypeScript SDKs' remote transports against
//! `spindle serve`: `tests/interop/remote_client.py` and
//! `tests/interop/remote_client.mjs` run one whole scenario (initialize,
//! a session, a prompt with tools and an allowed edit, a cancel, the
//! session loaded on a second connection) on Streamable HTTP or on a
//! WebSocket; both at once from two clients too. The SDKs are installed by
//! `scripts/interop --deps-only` (the README's test command).

use super::Server;
use std::path::{Path, PathBuf};
use std::process::Command;

fn interop() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/interop")
}

fn python() -> PathBuf {
    let python = interop().join(".deps/venv/bin/python");
    assert!(
        python.exists(),
        "the Python SDK is not installed: run 'bash scripts/interop --deps-only --client python-sdk --client typescript-sdk' first"
    );
    python
}

/// The TypeScript SDK's packages, with `ws` for Node's WebSocket.
fn node_modules() -> PathBuf {
    let modules = interop().join(".deps/node/node_modules");
    assert!(
        modules.join("@agentclientprotocol/sdk").exists() && modules.join("ws").exists(),
        "the TypeScript SDK is not installed: run 'bash scripts/interop --deps-only --client python-sdk --client typescript-sdk' first"
    );
    modules
}

fn server(name: &str) -> Server {
    server_with(name, &[])
}

fn server_with(name: &str, extra: &[&str]) -> Server {
    let script = interop().join("scenarios/remote.json");
    let mut args = vec!["--script", script.to_str().unwrap(), "--permissions", "ask"];
    args.extend_from_slice(extra);
    Server::start(name, &args)
}

fn workspace(server: &Server, name: &str) -> PathBuf {
    let ws = server.base.join(name);
    std::fs::create_dir_all(&ws).unwrap();
    std::fs::write(ws.join("notes.txt"), "title: notes\nstatus: draft\n").unwrap();
    ws
}

/// The client run over `transport` on workspace `ws`.
fn client(server: &Server, transport: &str, ws: &Path) -> Command {
    let mut command = Command::new(python());
    command
        .arg(interop().join("remote_client.py"))
        .args(["--url", &server.url(), "--token", &server.token])
        .args(["--transport", transport, "--workdir"])
        .arg(ws)
        .env("PYTHONDONTWRITEBYTECODE", "1");
    command
}

/// The TypeScript client run over `transport` on workspace `ws`.
fn ts_client(server: &Server, transport: &str, ws: &Path) -> Command {
    let mut command = Command::new("node");
    command
        .arg(interop().join("remote_client.mjs"))
        .args(["--url", &server.url(), "--token", &server.token])
        .args(["--transport", transport, "--workdir"])
        .arg(ws)
        .arg("--node-modules")
        .arg(node_modules());
    command
}

fn assert_passed(output: std::process::Output, what: &str) {
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success() && stdout.contains(" passed, 0 failed"),
        "{what}:\n{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(stdout.contains("11 passed"), "{what}: {stdout}");
}

#[test]
#[cfg_attr(windows, ignore = "the Python SDK runs on the Linux side only")]
fn the_python_sdk_runs_a_whole_scenario_over_streamable_http() {
    let server = server("serve-sdk-http");
    let ws = workspace(&server, "ws");
    let output = client(&server, "http", &ws).output().expect("python runs");
    assert_passed(output, "http");
}

#[test]
#[cfg_attr(windows, ignore = "the Python SDK runs on the Linux side only")]
fn the_python_sdk_runs_a_whole_scenario_over_a_websocket() {
    let server = server("serve-sdk-ws");
    let ws = workspace(&server, "ws");
    let output = client(&server, "ws", &ws).output().expect("python runs");
    assert_passed(output, "ws");
}

#[test]
#[cfg_attr(windows, ignore = "the Python SDK runs on the Linux side only")]
fn two_clients_at_once_each_run_their_scenario() {
    let server = server("serve-sdk-two");
    let (a, b) = (workspace(&server, "a"), workspace(&server, "b"));
    let first = client(&server, "http", &a)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("python runs");
    let second = client(&server, "ws", &b).output().expect("python runs");
    let first = first.wait_with_output().expect("python ends");
    assert_passed(first, "http, beside a WebSocket client");
    assert_passed(second, "ws, beside an HTTP client");
    assert!(server.healthy());
}

#[test]
#[cfg_attr(windows, ignore = "the TypeScript SDK runs on the Linux side only")]
fn the_typescript_sdk_runs_a_whole_scenario_over_streamable_http() {
    let server = server("serve-ts-sdk-http");
    let ws = workspace(&server, "ws");
    let output = ts_client(&server, "http", &ws).output().expect("node runs");
    assert_passed(output, "http");
    assert!(server.healthy());
}

#[test]
#[cfg_attr(windows, ignore = "the TypeScript SDK runs on the Linux side only")]
fn the_typescript_sdk_runs_a_whole_scenario_over_a_websocket() {
    let server = server("serve-ts-sdk-ws");
    let ws = workspace(&server, "ws");
    let output = ts_client(&server, "ws", &ws).output().expect("node runs");
    assert_passed(output, "ws");
    assert!(server.healthy());
}

/// The test CA's certificate for 127.0.0.1, and its key copied private
/// (the key file refuses to serve when others may read it).
fn tls_files(name: &str) -> (PathBuf, PathBuf, PathBuf) {
    let data = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/tls");
    let dir = crate::support::temp_dir(name);
    let key = dir.join("server.key");
    std::fs::copy(data.join("server.key"), &key).unwrap();
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o600)).unwrap();
    }
    (data.join("server.pem"), key, data.join("ca.pem"))
}

#[test]
#[cfg_attr(windows, ignore = "the Python SDK runs on the Linux side only")]
fn over_tls_both_transports_run_their_scenario() {
    let (cert, key, ca) = tls_files("serve-sdk-tls-files");
    let server = server_with(
        "serve-sdk-tls",
        &[
            "--tls-cert",
            cert.to_str().unwrap(),
            "--tls-key",
            key.to_str().unwrap(),
        ],
    );
    let stderr = server.stderr.lock().unwrap().clone();
    assert!(stderr.contains("listening on https://"), "{stderr}");
    let url = server.url().replace("http://", "https://");
    for transport in ["http", "ws"] {
        let ws = workspace(&server, transport);
        let output = client(&server, transport, &ws)
            .args(["--url", &url, "--ca"])
            .arg(&ca)
            .env("SSL_CERT_FILE", &ca)
            .output()
            .expect("python runs");
        assert_passed(output, transport);
    }
}

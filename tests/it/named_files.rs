//! Files that a setting or an environment variable names, swapped for a
//! FIFO: the certificate bundles of `SSL_CERT_FILE`, `SSL_CERT_DIR` and
//! the config's `tls.ca_file`, a provider's key file, the log file, the
//! config file itself and an `exec --script`. Opening a FIFO to read
//! blocks until a writer comes, so each must be refused as "a FIFO, not
//! a regular file" (or passed over with a warning), and the agent must
//! go on answering and end when its stdin closes.

use crate::support::fake_openai::chat_text;
use crate::support::prelude::WAIT;
use crate::support::{temp_dir, write_file, Agent, FakeServer, Reply};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

/// How long the agent may take to end once its stdin is closed.
const END: Duration = Duration::from_secs(15);

fn mkfifo(dir: &Path, name: &str) -> PathBuf {
    let path = dir.join(name);
    let made = Command::new("mkfifo").arg(&path).status().unwrap();
    assert!(made.success(), "mkfifo {}", path.display());
    path
}

fn path_str(path: &Path) -> &str {
    path.to_str().expect("test paths are UTF-8")
}

/// The trust variables of the test process, made empty, then `env`; the
/// fake server as the environment's provider, reached through itself as
/// the proxy: a plain-http server reached directly needs no trust, so
/// the named files would not be read at all.
fn env_for<'a>(server: &'a str, env: &[(&'a str, &'a str)]) -> Vec<(&'a str, &'a str)> {
    let proxy = server.trim_end_matches("/v1");
    let mut all = vec![
        ("SSL_CERT_FILE", ""),
        ("SSL_CERT_DIR", ""),
        ("HTTP_PROXY", proxy),
        ("NO_PROXY", ""),
        ("OPENAI_BASE_URL", server),
        ("OPENAI_API_KEY", "sk-test"),
    ];
    all.extend_from_slice(env);
    all
}

/// One prompt in a new session: it must be answered, and the agent must
/// end soon after its stdin closes.
fn answers_and_ends(mut agent: Agent, dir: &Path) -> String {
    agent.initialize();
    let session = agent.new_session(dir);
    let id = agent.request(
        "session/prompt",
        json!({"sessionId": session, "prompt": [{"type": "text", "text": "hello"}]}),
    );
    let (answer, _) = agent.response(&id, WAIT);
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    agent.close_stdin();
    assert!(
        agent.wait_exit(END).is_some(),
        "the agent did not end after its stdin closed"
    );
    agent.stderr()
}

/// Runs `command` with no input, killing it (and failing) if it has not
/// ended within [`WAIT`].
fn run_bounded(mut command: Command) -> Output {
    let mut child = command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let started = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if started.elapsed() > WAIT {
            let _ = child.kill();
            let out = child.wait_with_output().unwrap();
            panic!(
                "still running after {WAIT:?}; stderr: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().unwrap()
}

#[test]
fn a_fifo_as_ssl_cert_file_is_passed_over_with_a_warning() {
    let dir = temp_dir("fifo-cert-file");
    let fifo = mkfifo(&dir, "bundle.pem");
    let server = FakeServer::start();
    server.push(Reply::Sse(chat_text(&["Trusted anyway."])));
    let base = server.base_url();
    let env = env_for(&base, &[("SSL_CERT_FILE", path_str(&fifo))]);
    let agent = Agent::spawn(&["acp", "--model", "test-model", "--retries", "0"], &env);
    let stderr = answers_and_ends(agent, &dir);
    assert!(
        stderr.contains("bundle.pem is a FIFO, not a regular file"),
        "{stderr}"
    );
}

#[test]
fn a_fifo_in_an_ssl_cert_dir_folder_is_passed_over() {
    let dir = temp_dir("fifo-cert-dir");
    let certs = dir.join("certs");
    std::fs::create_dir_all(&certs).unwrap();
    mkfifo(&certs, "0000.pem");
    write_file(&certs, "note.txt", "not a certificate");
    let server = FakeServer::start();
    server.push(Reply::Sse(chat_text(&["Trusted anyway."])));
    let base = server.base_url();
    let env = env_for(&base, &[("SSL_CERT_DIR", path_str(&certs))]);
    let agent = Agent::spawn(&["acp", "--model", "test-model", "--retries", "0"], &env);
    answers_and_ends(agent, &dir);
}

fn write_config(dir: &Path, config: &Value) -> PathBuf {
    write_file(dir, "config.json", config.to_string())
}

#[test]
fn a_fifo_as_tls_ca_file_is_passed_over_and_doctor_fails_it() {
    let dir = temp_dir("fifo-ca-file");
    mkfifo(&dir, "ca.pem");
    let config = write_config(&dir, &json!({"tls": {"ca_file": "ca.pem"}}));
    let server = FakeServer::start();
    server.push(Reply::Sse(chat_text(&["Trusted anyway."])));
    let base = server.base_url();
    let env = env_for(&base, &[]);
    let agent = Agent::spawn(
        &[
            "acp",
            "--config",
            path_str(&config),
            "--model",
            "test-model",
            "--retries",
            "0",
        ],
        &env,
    );
    let stderr = answers_and_ends(agent, &dir);
    assert!(
        stderr.contains("ca.pem is a FIFO, not a regular file"),
        "{stderr}"
    );

    let mut doctor = crate::support::spindle_command(&dir.join("home"));
    doctor
        .args(["doctor", "--config", path_str(&config), "--db"])
        .arg(dir.join("none.db"))
        .env("SSL_CERT_FILE", "")
        .env("SSL_CERT_DIR", "");
    let out = run_bounded(doctor);
    let report = String::from_utf8_lossy(&out.stdout);
    assert!(
        report.contains("FAIL  tls.ca_file:") && report.contains("is a FIFO, not a regular file"),
        "{report}"
    );
    assert!(!out.status.success());
}

#[test]
fn a_fifo_as_a_key_file_is_a_clear_error_and_a_doctor_failure() {
    let dir = temp_dir("fifo-key-file");
    let key = mkfifo(&dir, "gateway.key");
    let server = FakeServer::start();
    let config = write_config(
        &dir,
        &json!({"providers": {"gateway": {"kind": "openai", "base_url": server.base_url(),
                                          "api_key_file": path_str(&key)}},
                "models": {"gateway/m": {}}}),
    );
    let mut agent = Agent::spawn(&["acp", "--config", path_str(&config)], &[]);
    agent.initialize();
    let id = agent.request(
        "session/new",
        json!({"cwd": path_str(&dir), "mcpServers": []}),
    );
    let (answer, _) = agent.response(&id, WAIT);
    let message = answer["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("gateway.key is a FIFO, not a regular file"),
        "{answer}"
    );
    agent.close_stdin();
    assert!(agent.wait_exit(END).is_some());
    assert!(server.requests().is_empty());

    let mut doctor = crate::support::spindle_command(&dir.join("home"));
    doctor
        .args(["doctor", "--config", path_str(&config), "--db"])
        .arg(dir.join("none.db"));
    let out = run_bounded(doctor);
    let report = String::from_utf8_lossy(&out.stdout);
    assert!(
        report.contains("FAIL  gateway:") && report.contains("is a FIFO, not a regular file"),
        "{report}"
    );
}

#[test]
fn a_fifo_as_the_log_file_is_refused_and_the_log_goes_to_stderr() {
    let dir = temp_dir("fifo-log");
    let fifo = mkfifo(&dir, "spindle.log");
    let server = FakeServer::start();
    server.push(Reply::Sse(chat_text(&["Logged elsewhere."])));
    let base = server.base_url();
    let env = env_for(&base, &[]);
    let agent = Agent::spawn(
        &[
            "acp",
            "--log-file",
            path_str(&fifo),
            "--model",
            "test-model",
        ],
        &env,
    );
    let stderr = answers_and_ends(agent, &dir);
    assert!(
        stderr.contains("spindle.log is a FIFO, not a regular file; logging to stderr"),
        "{stderr}"
    );
}

#[test]
fn a_fifo_as_the_config_file_or_a_script_is_a_clear_error() {
    let dir = temp_dir("fifo-config");
    let fifo = mkfifo(&dir, "config.json");
    let mut agent = Agent::spawn(&["acp", "--config", path_str(&fifo)], &[]);
    agent.initialize();
    let id = agent.request(
        "session/new",
        json!({"cwd": path_str(&dir), "mcpServers": []}),
    );
    let (answer, _) = agent.response(&id, WAIT);
    let message = answer["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("config.json is a FIFO, not a regular file"),
        "{answer}"
    );
    agent.close_stdin();
    assert!(agent.wait_exit(END).is_some());

    let script = mkfifo(&dir, "script.json");
    let mut exec = crate::support::spindle_command(&dir.join("home"));
    exec.current_dir(&dir)
        .args(["exec", "--script", path_str(&script), "hello"]);
    let out = run_bounded(exec);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        stderr.contains("script.json is a FIFO, not a regular file"),
        "{stderr}"
    );
}

#[test]
fn a_fifo_as_the_session_database_is_named_as_one() {
    let dir = temp_dir("fifo-db");
    let db = mkfifo(&dir, "sessions.db");
    let mut sessions = crate::support::spindle_command(&dir.join("home"));
    sessions.args(["sessions", "--db", path_str(&db)]);
    let out = run_bounded(sessions);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        stderr.contains("sessions.db is a FIFO, not a regular file"),
        "{stderr}"
    );
}

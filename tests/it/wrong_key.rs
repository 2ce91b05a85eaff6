//! A key the provider refuses (HTTP 401 or 403) is said as what it is,
//! naming where the key came from: `doctor` fails with a non-zero exit
//! code instead of saying everything is in place, and `exec` prints one
//! error, not a log line and the message both.

use crate::support::{temp_dir, FakeServer, Reply};
use serde_json::{json, Value};
use std::path::Path;
use std::process::Output;

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// A server that lists its models but refuses every model call with 401.
fn refusing_server(calls: usize) -> FakeServer {
    let server = FakeServer::start();
    server.serve_models(json!({"data": [{"id": "test-model"}]}));
    for _ in 0..calls {
        server.push(Reply::openai_error(
            401,
            "Incorrect API key provided",
            "invalid_request_error",
            "invalid_api_key",
        ));
    }
    server
}

fn spindle(home: &Path, args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut command = crate::support::spindle_command(home);
    command.args(args).current_dir(home);
    for (name, value) in env {
        command.env(name, value);
    }
    command.output().unwrap()
}

fn write_config(dir: &Path, config: &Value) -> String {
    let path = dir.join("config.json");
    std::fs::write(&path, config.to_string()).unwrap();
    path.to_str().unwrap().to_string()
}

#[test]
fn doctor_fails_on_a_refused_key_and_names_the_variable() {
    let server = refusing_server(1);
    let dir = temp_dir("wrong-key-env");
    let config = write_config(
        &dir,
        &json!({"providers": {"corp": {"kind": "openai", "base_url": server.base_url(),
            "api_key_env": "CORP_WRONG_TOKEN"}},
            "defaults": {"model": "corp/test-model"}}),
    );
    let db = dir.join("none.db");
    let out = spindle(
        &dir,
        &["doctor", "--config", &config, "--db", db.to_str().unwrap()],
        &[("CORP_WRONG_TOKEN", "sk-wrong-key-1234")],
    );
    let report = text(&out.stdout);
    assert_ne!(out.status.code(), Some(0), "{report}");
    let fail = report
        .lines()
        .find(|line| line.contains("FAIL") && line.contains("corp"))
        .unwrap_or_else(|| panic!("no FAIL line for corp:\n{report}"));
    assert!(fail.contains("401"), "{fail}");
    assert!(
        fail.contains("the environment variable CORP_WRONG_TOKEN"),
        "{fail}"
    );
    assert!(
        !report.contains("Everything Spindle needs is in place"),
        "{report}"
    );
    assert!(!report.contains("sk-wrong-key-1234"), "{report}");
}

#[cfg(unix)]
#[test]
fn doctor_fails_on_a_refused_key_and_names_the_key_file() {
    let server = FakeServer::start();
    let dir = temp_dir("wrong-key-file");
    let key = dir.join("corp.key");
    std::fs::write(&key, "sk-wrong-key-5678\n").unwrap();
    spindle::os::testing::set_mode(&key, 0o600).unwrap();
    let config = write_config(
        &dir,
        &json!({"providers": {"corp": {"kind": "openai", "base_url": server.base_url(),
            "api_key_file": key}},
            "defaults": {"model": "corp/test-model"}}),
    );
    // The model list is open to anyone; the model call refuses the key.
    server.serve_models(json!({"data": [{"id": "test-model"}]}));
    server.push(Reply::openai_error(
        403,
        "Forbidden",
        "permission_error",
        "forbidden",
    ));
    let db = dir.join("none.db");
    let out = spindle(
        &dir,
        &["doctor", "--config", &config, "--db", db.to_str().unwrap()],
        &[],
    );
    let report = text(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{report}");
    let fail = report
        .lines()
        .find(|line| line.contains("FAIL") && line.contains("corp"))
        .unwrap_or_else(|| panic!("no FAIL line for corp:\n{report}"));
    assert!(fail.contains("403"), "{fail}");
    assert!(
        fail.contains(&format!("the key file {}", key.display())),
        "{fail}"
    );
    assert!(report.contains("Something is broken"), "{report}");
}

#[test]
fn exec_says_a_refused_key_once_naming_its_variable() {
    let server = refusing_server(3);
    let dir = temp_dir("wrong-key-exec");
    let config = write_config(
        &dir,
        &json!({"providers": {"corp": {"kind": "openai", "base_url": server.base_url(),
            "api_key_env": "CORP_WRONG_TOKEN"}},
            "defaults": {"model": "corp/test-model"}}),
    );
    let out = spindle(
        &dir,
        &["exec", "--config", &config, "hello"],
        &[("CORP_WRONG_TOKEN", "sk-wrong-key-1234")],
    );
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    let said: Vec<&str> = stderr
        .lines()
        .filter(|line| line.contains("Incorrect API key provided"))
        .collect();
    assert_eq!(said.len(), 1, "said other than once:\n{stderr}");
    assert!(
        said[0].contains("the environment variable CORP_WRONG_TOKEN"),
        "{stderr}"
    );
    assert!(!stderr.contains("WARN"), "{stderr}");
}

//! `spindle doctor --serve`: a `serve` setup checked before it is started
//! — the port taken, the token file open to others, a key that does not
//! match its certificate, a network address without TLS — each a FAIL line
//! with what to do, and exit 1; a good setup all ok.

use crate::support::{spindle_command, temp_dir};
use std::path::{Path, PathBuf};

/// The Serve section of the report and the exit code.
fn doctor(base: &Path, args: &[&str]) -> (String, Option<i32>) {
    let output = spindle_command(&base.join("home"))
        .args(["doctor", "--serve"])
        .args(args)
        .output()
        .expect("doctor runs");
    let text = String::from_utf8_lossy(&output.stdout).to_string();
    let serve = text.split("\nServe\n").nth(1).unwrap_or_default();
    let serve = serve.split("\n\n").next().unwrap_or_default().to_string();
    (serve, output.status.code())
}

fn tls_data() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/tls")
}

/// The test key, copied private.
fn private_key(base: &Path) -> PathBuf {
    let key = base.join("server.key");
    std::fs::copy(tls_data().join("server.key"), &key).unwrap();
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o600)).unwrap();
    }
    key
}

#[test]
fn a_good_setup_is_all_ok_and_each_fault_is_a_fail_with_a_fix() {
    let base = temp_dir("serve-doctor");
    let key = private_key(&base);
    let cert = tls_data().join("server.pem");
    let free = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = free.local_addr().unwrap().port();
    drop(free);
    let listen = format!("127.0.0.1:{port}");
    let (good, _) = doctor(
        &base,
        &[
            "--listen",
            &listen,
            "--tls-cert",
            cert.to_str().unwrap(),
            "--tls-key",
            key.to_str().unwrap(),
        ],
    );
    assert!(!good.contains("FAIL"), "{good}");
    for what in ["address", "port", "token", "TLS"] {
        assert!(good.contains(&format!("ok    {what}:")), "{what}: {good}");
    }

    // The port taken by another listener.
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let listen = taken.local_addr().unwrap().to_string();
    let (report, code) = doctor(&base, &["--listen", &listen]);
    assert!(report.contains("FAIL  port"), "{report}");
    assert_eq!(code, Some(1));

    // A network address without TLS.
    let (report, _) = doctor(&base, &["--listen", "0.0.0.0:0"]);
    assert!(
        report.contains("FAIL  address") && report.contains("--tls-cert"),
        "{report}"
    );

    // A key that is not the certificate's.
    let (report, _) = doctor(
        &base,
        &[
            "--tls-cert",
            tls_data().join("ca.pem").to_str().unwrap(),
            "--tls-key",
            key.to_str().unwrap(),
        ],
    );
    assert!(
        report.contains("FAIL  TLS") && report.contains("does not match"),
        "{report}"
    );
}

#[test]
#[cfg(unix)]
fn a_token_file_others_can_read_fails() {
    use std::os::unix::fs::PermissionsExt;
    let base = temp_dir("serve-doctor-token");
    let token = base.join("token");
    std::fs::write(&token, format!("{}\n", "t".repeat(40))).unwrap();
    std::fs::set_permissions(&token, std::fs::Permissions::from_mode(0o644)).unwrap();
    let (report, code) = doctor(&base, &["--token-file", token.to_str().unwrap()]);
    assert!(
        report.contains("FAIL  token") && report.contains("chmod 600"),
        "{report}"
    );
    assert_eq!(code, Some(1));
    std::fs::set_permissions(&token, std::fs::Permissions::from_mode(0o600)).unwrap();
    let (report, _) = doctor(&base, &["--token-file", token.to_str().unwrap()]);
    assert!(report.contains("ok    token"), "{report}");
}

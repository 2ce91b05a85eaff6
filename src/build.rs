//! Build script: records the commit the binary is built from, for
//! `spindle --version` and `spindle doctor` (`SPINDLE_BUILD_COMMIT`). A
//! build outside a git checkout, or without git, records none. An
//! explicit `SPINDLE_BUILD_COMMIT` in the environment wins (packagers).

use std::path::Path;
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-env-changed=SPINDLE_BUILD_COMMIT");
    if let Ok(given) = std::env::var("SPINDLE_BUILD_COMMIT") {
        println!("cargo:rustc-env=SPINDLE_BUILD_COMMIT={}", clean(&given));
        return;
    }
    let root = std::env::var("CARGO_MANIFEST_DIR").unwrap_or_else(|_| ".".into());
    let git = Path::new(&root).join(".git");
    if !git.exists() {
        return;
    }
    // A new commit or checkout changes one of these.
    for watched in ["HEAD", "packed-refs"] {
        println!("cargo:rerun-if-changed={}", git.join(watched).display());
    }
    if let Ok(head) = std::fs::read_to_string(git.join("HEAD")) {
        if let Some(reference) = head.trim().strip_prefix("ref: ") {
            println!("cargo:rerun-if-changed={}", git.join(reference).display());
        }
    }
    let output = Command::new("git")
        .args(["rev-parse", "--short=12", "HEAD"])
        .current_dir(&root)
        .output();
    if let Ok(output) = output {
        let commit = String::from_utf8_lossy(&output.stdout);
        let commit = clean(commit.trim());
        if output.status.success() && !commit.is_empty() {
            println!("cargo:rustc-env=SPINDLE_BUILD_COMMIT={commit}");
        }
    }
}

/// Hex digits only, at most 40.
fn clean(text: &str) -> String {
    text.chars()
        .filter(char::is_ascii_hexdigit)
        .take(40)
        .collect()
}

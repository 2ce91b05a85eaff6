//! Build script: records the commit the binary is built from, for
//! `spindle --version` and `spindle doctor` (`SPINDLE_BUILD_COMMIT`). A
//! build outside a git checkout, or without git, records none. An
//! explicit `SPINDLE_BUILD_COMMIT` in the environment wins (packagers).

use std::path::Path;
use std::process::Command;

fn main() {
    release_link_args();
    println!("cargo:rerun-if-env-changed=SPINDLE_BUILD_COMMIT");
    if let Ok(given) = std::env::var("SPINDLE_BUILD_COMMIT") {
        println!("cargo:rustc-env=SPINDLE_BUILD_COMMIT={}", clean(&given));
        return;
    }
    let root = std::env::var("CARGO_MANIFEST_DIR").unwrap_or_else(|_| ".".into());
    if !Path::new(&root).join(".git").exists() {
        return;
    }
    // A new commit or checkout changes HEAD or its log, the branch's ref
    // file, or packed-refs. Only paths that exist are watched: cargo
    // reruns the script (and rebuilds the crate) on every build for a
    // path that does not. `git rev-parse --git-path` finds them in a work
    // tree of its own too.
    let head = git_path(&root, "HEAD");
    let mut watched = vec![
        head.clone(),
        git_path(&root, "logs/HEAD"),
        git_path(&root, "packed-refs"),
    ];
    if let Some(reference) = std::fs::read_to_string(&head)
        .ok()
        .and_then(|text| text.trim().strip_prefix("ref: ").map(str::to_string))
    {
        watched.push(git_path(&root, &reference));
    }
    for path in watched.iter().filter(|path| path.exists()) {
        println!("cargo:rerun-if-changed={}", path.display());
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

/// Smaller release binaries where the linker allows: identical functions
/// folded into one (`--icf=all`), and relative relocations packed
/// (`-z pack-relative-relocs`, DT_RELR: a PIE's table of them shrinks from
/// 24 bytes a pointer to a few bits). Each flag is used only when a probe
/// program links with it and runs, on a native Linux build: a linker or C
/// library that lacks one simply goes without. `SPINDLE_PLAIN_LINK=1`
/// turns both off.
fn release_link_args() {
    println!("cargo:rerun-if-env-changed=SPINDLE_PLAIN_LINK");
    let var = |name: &str| std::env::var(name).unwrap_or_default();
    let native = var("TARGET") == var("HOST");
    if var("PROFILE") != "release"
        || var("CARGO_CFG_TARGET_OS") != "linux"
        || !native
        || std::env::var_os("SPINDLE_PLAIN_LINK").is_some()
    {
        return;
    }
    let out = std::path::PathBuf::from(var("OUT_DIR"));
    let source = out.join("probe.rs");
    if std::fs::write(&source, "fn main() { println!(\"ok\"); }\n").is_err() {
        return;
    }
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".into());
    for (index, flag) in ["-Wl,--icf=all", "-Wl,-z,pack-relative-relocs"]
        .iter()
        .enumerate()
    {
        let binary = out.join(format!("probe-{index}"));
        let linked = Command::new(&rustc)
            .arg(&source)
            .arg("-o")
            .arg(&binary)
            .arg(format!("-Clink-arg={flag}"))
            .output()
            .is_ok_and(|output| output.status.success());
        let runs = linked
            && Command::new(&binary)
                .output()
                .is_ok_and(|output| output.status.success() && output.stdout == b"ok\n");
        if runs {
            println!("cargo:rustc-link-arg-bins={flag}");
        }
    }
}

/// Where git keeps `name` for this checkout (resolved against `root`).
fn git_path(root: &str, name: &str) -> std::path::PathBuf {
    let output = Command::new("git")
        .args(["rev-parse", "--git-path", name])
        .current_dir(root)
        .output();
    let text = match output {
        Ok(output) if output.status.success() => {
            String::from_utf8_lossy(&output.stdout).into_owned()
        }
        _ => format!(".git/{name}"),
    };
    Path::new(root).join(text.trim())
}

/// Hex digits only, at most 40.
fn clean(text: &str) -> String {
    text.chars()
        .filter(char::is_ascii_hexdigit)
        .take(40)
        .collect()
}

//! `scripts/release`'s registry entry: the `agent.json` it writes is valid
//! against the ACP registry's schema for an agent's entry (vendored in
//! `tests/data/registry-agent.schema.json`, see `tests/data/README.md`) and
//! meets the rules the registry's build script adds on top of the schema.
//! The manifest is generated without building (`--manifest-only`), so the
//! test takes no time; the archives' names are the ones the full run packs.

use std::path::Path;
use std::process::Command;

use serde_json::{json, Value};

use crate::support::temp_dir;

const PLATFORMS: [&str; 5] = [
    "linux-x86_64",
    "linux-aarch64",
    "windows-x86_64",
    "darwin-aarch64",
    "darwin-x86_64",
];

fn registry_schema() -> jsonschema::Validator {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/registry-agent.schema.json");
    let text = std::fs::read_to_string(&path).expect("the registry's schema is vendored");
    let schema: Value = serde_json::from_str(&text).expect("the registry's schema is JSON");
    jsonschema::draft7::options()
        .should_validate_formats(true)
        .build(&schema)
        .expect("the registry's schema compiles")
}

/// Runs `scripts/release --manifest-only` with `args` and returns the
/// `agent.json` it wrote.
fn manifest(args: &[&str]) -> Value {
    let out = temp_dir("release");
    let output = Command::new("bash")
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/release"))
        .arg("--manifest-only")
        .arg("--out")
        .arg(&out)
        .args(args)
        .output()
        .expect("bash runs scripts/release");
    assert!(
        output.status.success(),
        "scripts/release failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let text = std::fs::read_to_string(out.join("agent.json")).expect("agent.json is written");
    let _ = std::fs::remove_dir_all(&out);
    serde_json::from_str(&text)
        .unwrap_or_else(|err| panic!("agent.json is not JSON ({err}): {text}"))
}

fn schema_errors(validator: &jsonschema::Validator, value: &Value) -> Vec<String> {
    validator
        .iter_errors(value)
        .map(|error| error.to_string())
        .collect()
}

#[test]
fn the_release_manifest_is_a_valid_registry_entry() {
    let version = env!("CARGO_PKG_VERSION");
    let base = format!("https://downloads.example.com/spindle/releases/download/v{version}");
    let entry = manifest(&["--base-url", &base]);
    let errors = schema_errors(&registry_schema(), &entry);
    assert!(
        errors.is_empty(),
        "agent.json fails the registry's schema: {errors:?}\n{entry:#}"
    );

    assert_eq!(entry["id"], "spindle");
    assert_eq!(entry["version"], version);
    assert_eq!(entry["description"], env!("CARGO_PKG_DESCRIPTION"));
    let binary = entry["distribution"]["binary"]
        .as_object()
        .expect("a binary distribution");
    let mut keys: Vec<&str> = binary.keys().map(String::as_str).collect();
    let mut expected = PLATFORMS.to_vec();
    keys.sort_unstable();
    expected.sort_unstable();
    assert_eq!(keys, expected, "one archive per platform key");
    for (platform, target) in binary {
        let windows = platform.starts_with("windows-");
        let (archive, cmd) = if windows {
            (format!("spindle-{version}-{platform}.zip"), "./spindle.exe")
        } else {
            (format!("spindle-{version}-{platform}.tar.gz"), "./spindle")
        };
        assert_eq!(target["archive"], format!("{base}/{archive}"), "{platform}");
        assert_eq!(target["cmd"], cmd, "{platform}");
        assert_eq!(target["args"], json!(["acp"]), "{platform}");
        // The registry's build script: the version in a release URL must
        // be the entry's, and never `latest`.
        assert!(!target["archive"].as_str().unwrap().contains("/latest/"));
    }
    // The registry's build script also wants a build for every system.
    for family in ["linux", "darwin", "windows"] {
        assert!(
            binary
                .keys()
                .any(|key| key.starts_with(&format!("{family}-"))),
            "no {family} archive"
        );
    }
}

#[test]
fn a_manifest_of_some_platforms_lists_only_those_and_stays_valid() {
    let entry = manifest(&[
        "--only",
        "linux-aarch64",
        "--base-url",
        "https://downloads.example.com/v1",
    ]);
    assert!(
        schema_errors(&registry_schema(), &entry).is_empty(),
        "{entry:#}"
    );
    let binary = entry["distribution"]["binary"].as_object().unwrap();
    assert_eq!(binary.keys().collect::<Vec<_>>(), ["linux-aarch64"]);
}

#[test]
fn the_vendored_registry_schema_rejects_what_the_registry_would() {
    let validator = registry_schema();
    let mut entry = manifest(&["--base-url", "https://downloads.example.com/v1"]);
    assert!(schema_errors(&validator, &entry).is_empty());
    entry["distribution"]["binary"]["linux-riscv64"] =
        json!({"archive": "https://downloads.example.com/x.tar.gz", "cmd": "./spindle"});
    assert!(
        !schema_errors(&validator, &entry).is_empty(),
        "an unknown platform"
    );
    let mut entry = manifest(&["--base-url", "https://downloads.example.com/v1"]);
    entry["distribution"]["binary"]["linux-x86_64"]
        .as_object_mut()
        .unwrap()
        .remove("cmd");
    assert!(!schema_errors(&validator, &entry).is_empty(), "no cmd");
    let mut entry = manifest(&["--base-url", "https://downloads.example.com/v1"]);
    entry["id"] = json!("Spindle");
    assert!(
        !schema_errors(&validator, &entry).is_empty(),
        "an id in capitals"
    );
}

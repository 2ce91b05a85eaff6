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
    let entry = manifest_in(&out, args);
    let _ = std::fs::remove_dir_all(&out);
    entry
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

/// Runs `scripts/release --manifest-only --out out` with `args` where
/// `out` may already hold archives, and returns its `agent.json`.
fn manifest_in(out: &Path, args: &[&str]) -> Value {
    let output = Command::new("bash")
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/release"))
        .arg("--manifest-only")
        .arg("--out")
        .arg(out)
        .args(args)
        .output()
        .expect("bash runs scripts/release");
    assert!(
        output.status.success(),
        "scripts/release failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let text = std::fs::read_to_string(out.join("agent.json")).expect("agent.json is written");
    serde_json::from_str(&text).expect("agent.json is JSON")
}

/// The registry's schema as copied, plus the two fields the release adds
/// unless `--plain`: each archive's `sha256` and the entry's `website`.
fn extended_schema() -> jsonschema::Validator {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/registry-agent.schema.json");
    let mut schema: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    schema["properties"]["website"] = json!({"type": "string", "format": "uri"});
    schema["definitions"]["binaryTarget"]["properties"]["sha256"] =
        json!({"type": "string", "pattern": "^[0-9a-f]{64}$"});
    jsonschema::draft7::options().build(&schema).unwrap()
}

#[test]
fn each_archive_in_the_folder_gets_its_sha256_and_the_icon_is_beside() {
    let version = env!("CARGO_PKG_VERSION");
    let out = temp_dir("release-sums");
    let linux = out.join(format!("spindle-{version}-linux-x86_64.tar.gz"));
    let windows = out.join(format!("spindle-{version}-windows-x86_64.zip"));
    std::fs::write(&linux, b"linux archive").unwrap();
    std::fs::write(&windows, b"windows archive").unwrap();
    let entry = manifest_in(&out, &["--base-url", "https://downloads.example.com/v1"]);
    let errors = schema_errors(&extended_schema(), &entry);
    assert!(errors.is_empty(), "{errors:?}\n{entry:#}");
    let binary = &entry["distribution"]["binary"];
    for (key, file) in [("linux-x86_64", &linux), ("windows-x86_64", &windows)] {
        let sum = Command::new("sha256sum").arg(file).output().unwrap();
        let sum = String::from_utf8_lossy(&sum.stdout);
        let sum = sum.split_whitespace().next().unwrap();
        assert_eq!(binary[key]["sha256"], sum, "{key}");
    }
    // An archive that is not there has no sum rather than a wrong one.
    assert!(
        binary["darwin-aarch64"].get("sha256").is_none(),
        "{entry:#}"
    );
    // The strict copy of the schema refuses the sums; --plain leaves them
    // out for a registry that does not take them yet.
    assert!(!schema_errors(&registry_schema(), &entry).is_empty());
    let plain = manifest_in(
        &out,
        &["--plain", "--base-url", "https://downloads.example.com/v1"],
    );
    let errors = schema_errors(&registry_schema(), &plain);
    assert!(errors.is_empty(), "{errors:?}\n{plain:#}");
    assert!(plain["distribution"]["binary"]["linux-x86_64"]
        .get("sha256")
        .is_none());
    let icon = std::fs::read(out.join("icon.svg")).expect("icon.svg beside agent.json");
    let ours = std::fs::read(Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/registry/icon.svg"))
        .unwrap();
    assert_eq!(icon, ours);
    let _ = std::fs::remove_dir_all(&out);
}

/// The rules the registry's build script holds an `icon.svg` to: 16 by 16
/// (by its width and height, or its viewBox), square, and drawn only in
/// `currentColor` (every fill and stroke, in attributes and styles, is
/// `currentColor` or `none`, and `currentColor` is used). On top of them,
/// nothing an icon has no need for: scripts, links out, other colours.
#[test]
fn the_icon_meets_the_registrys_rules() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/registry/icon.svg");
    let svg = std::fs::read_to_string(path).expect("docs/registry/icon.svg");
    let root = &svg[svg.find("<svg").expect("an svg element")..];
    let root = &root[..root.find('>').unwrap()];
    let attribute = |tag: &str, name: &str| -> Option<String> {
        let start = tag.find(&format!(" {name}=\""))? + name.len() + 3;
        Some(tag[start..start + tag[start..].find('"')?].to_string())
    };
    assert_eq!(attribute(root, "width").as_deref(), Some("16"));
    assert_eq!(attribute(root, "height").as_deref(), Some("16"));
    assert_eq!(attribute(root, "viewBox").as_deref(), Some("0 0 16 16"));
    assert!(svg.contains("currentColor"));
    for name in ["fill", "stroke"] {
        let mut rest = svg.as_str();
        let needle = format!(" {name}=\"");
        while let Some(at) = rest.find(&needle) {
            rest = &rest[at + needle.len()..];
            let value = &rest[..rest.find('"').unwrap()];
            assert!(
                value == "currentColor" || value == "none",
                "{name}=\"{value}\" is a fixed colour"
            );
        }
    }
    for forbidden in [
        "style=",
        "<script",
        "href",
        "stop-color",
        "#",
        "rgb(",
        "<image",
    ] {
        assert!(!svg.contains(forbidden), "the icon holds {forbidden}");
    }
}

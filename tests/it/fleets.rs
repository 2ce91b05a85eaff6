//! `scripts/container-image`: the OCI image layout it writes has the
//! right digests, sizes, layer and config (read here with a tar reader of
//! this file's own, and with skopeo when it is installed).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::Value;

use crate::support::isolation::{isolate, spindle_path};
use crate::support::temp_dir;

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn strings(value: &Value) -> Vec<String> {
    value
        .as_array()
        .unwrap_or_else(|| panic!("not a list: {value}"))
        .iter()
        .map(|v| v.as_str().expect("a string").to_string())
        .collect()
}

/// What the ELF header of a 64-bit little-endian binary says: its
/// architecture as OCI names it, and whether it asks for an interpreter
/// (dynamically linked).
fn elf(data: &[u8]) -> (&'static str, bool) {
    assert!(data.len() > 64 && data.starts_with(b"\x7fELF") && data[4] == 2 && data[5] == 1);
    let u16_at = |at: usize| u16::from_le_bytes([data[at], data[at + 1]]);
    let arch = match u16_at(18) {
        62 => "amd64",
        183 => "arm64",
        other => panic!("ELF machine {other}"),
    };
    let phoff = u64::from_le_bytes(data[32..40].try_into().unwrap()) as usize;
    let (size, count) = (u16_at(54) as usize, u16_at(56) as usize);
    let dynamic = (0..count).any(|i| {
        let at = phoff + i * size;
        u32::from_le_bytes(data[at..at + 4].try_into().unwrap()) == 3
    });
    (arch, dynamic)
}

fn sha256(data: &[u8]) -> String {
    let digest = ring::digest::digest(&ring::digest::SHA256, data);
    digest.as_ref().iter().map(|b| format!("{b:02x}")).collect()
}

/// One entry of a tar file.
#[derive(Debug)]
struct Entry {
    path: String,
    kind: u8,
    mode: u32,
    uid: u64,
    gid: u64,
    data: Vec<u8>,
}

fn octal(field: &[u8]) -> u64 {
    let text = String::from_utf8_lossy(field);
    let text = text.trim_matches(|c: char| c == '\0' || c == ' ');
    u64::from_str_radix(text, 8).unwrap_or_else(|_| panic!("not octal: {text:?}"))
}

/// The entries of an uncompressed tar (ustar, with pax records for a
/// path, uid or gid that did not fit).
fn tar_entries(data: &[u8]) -> Vec<Entry> {
    let mut entries = Vec::new();
    let mut at = 0;
    let mut pax: Vec<(String, String)> = Vec::new();
    while at + 512 <= data.len() {
        let header = &data[at..at + 512];
        if header.iter().all(|&b| b == 0) {
            break;
        }
        let sum: u64 = header
            .iter()
            .enumerate()
            .map(|(i, &b)| {
                if (148..156).contains(&i) {
                    32
                } else {
                    b as u64
                }
            })
            .sum();
        assert_eq!(sum, octal(&header[148..156]), "a tar header's checksum");
        let name = |range: std::ops::Range<usize>| {
            String::from_utf8_lossy(&header[range])
                .trim_end_matches('\0')
                .to_string()
        };
        let size = octal(&header[124..136]) as usize;
        let body = data[at + 512..at + 512 + size].to_vec();
        at += 512 + size.div_ceil(512) * 512;
        let kind = header[156];
        if kind == b'x' {
            // Records "LEN key=value\n".
            let text = String::from_utf8(body).expect("pax records are UTF-8");
            pax = text
                .lines()
                .filter_map(|record| record.split_once(' ').map(|(_, kv)| kv))
                .filter_map(|kv| kv.split_once('='))
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect();
            continue;
        }
        let prefix = name(345..500);
        let mut path = if prefix.is_empty() {
            name(0..100)
        } else {
            format!("{prefix}/{}", name(0..100))
        };
        let mut uid = octal(&header[108..116]);
        let mut gid = octal(&header[116..124]);
        for (key, value) in pax.drain(..) {
            match key.as_str() {
                "path" => path = value,
                "uid" => uid = value.parse().unwrap(),
                "gid" => gid = value.parse().unwrap(),
                _ => {}
            }
        }
        let path = path
            .trim_start_matches("./")
            .trim_start_matches('/')
            .trim_end_matches('/')
            .to_string();
        entries.push(Entry {
            path,
            kind,
            mode: octal(&header[100..108]) as u32,
            uid,
            gid,
            data: body,
        });
    }
    entries
}

fn gunzip(path: &Path) -> Vec<u8> {
    let out = Command::new("gzip")
        .arg("-dc")
        .arg(path)
        .output()
        .expect("gzip runs");
    assert!(out.status.success(), "{path:?} is not gzip");
    out.stdout
}

fn json_file(path: &Path) -> Value {
    let text = std::fs::read(path).unwrap_or_else(|err| panic!("{}: {err}", path.display()));
    serde_json::from_slice(&text).unwrap_or_else(|err| panic!("{}: {err}", path.display()))
}

/// A descriptor's blob, checked against the descriptor's digest and size.
fn blob(layout: &Path, descriptor: &Value) -> PathBuf {
    let digest = descriptor["digest"].as_str().expect("a digest");
    let hex = digest.strip_prefix("sha256:").expect("a sha256 digest");
    let path = layout.join("blobs/sha256").join(hex);
    let data = std::fs::read(&path).unwrap_or_else(|err| panic!("{digest}: {err}"));
    assert_eq!(sha256(&data), hex, "the blob {digest} has another digest");
    assert_eq!(descriptor["size"], data.len(), "the size of {digest}");
    path
}

/// Runs `scripts/container-image` with `args`.
fn container_image(args: &[&std::ffi::OsStr], home: &Path) -> std::process::Output {
    let mut script = Command::new("bash");
    script
        .arg(root().join("scripts/container-image"))
        .args(args)
        .stdin(Stdio::null());
    isolate(&mut script, home);
    script.output().expect("bash runs scripts/container-image")
}

#[cfg(target_os = "linux")]
#[test]
fn the_container_image_is_a_valid_oci_layout() {
    let binary = spindle_path();
    let data = std::fs::read(&binary).unwrap();
    let (arch, dynamic) = elf(&data);
    let dir = temp_dir("fleets-image");
    let home = dir.join("home");
    let layout = dir.join("layout");
    let archive = dir.join("spindle.tar");
    let version = env!("CARGO_PKG_VERSION");

    // Something that is not a binary, and a dynamic one without the
    // switch, are refused with the reason.
    let not_binary = dir.join("not-a-binary");
    std::fs::write(&not_binary, "#!/bin/sh\n").unwrap();
    let out = container_image(
        &[
            "--binary".as_ref(),
            not_binary.as_ref(),
            "--out".as_ref(),
            layout.as_ref(),
        ],
        &home,
    );
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("is not an ELF binary"));
    if dynamic {
        let out = container_image(
            &[
                "--binary".as_ref(),
                binary.as_ref(),
                "--out".as_ref(),
                layout.as_ref(),
            ],
            &home,
        );
        assert_eq!(out.status.code(), Some(1));
        assert!(String::from_utf8_lossy(&out.stderr).contains("dynamically linked"));
        assert!(!layout.join("index.json").exists());
    }

    let out = container_image(
        &[
            "--binary".as_ref(),
            binary.as_ref(),
            "--out".as_ref(),
            layout.as_ref(),
            "--archive".as_ref(),
            archive.as_ref(),
            "--allow-dynamic".as_ref(),
        ],
        &home,
    );
    assert!(
        out.status.success(),
        "scripts/container-image failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );

    assert_eq!(
        json_file(&layout.join("oci-layout"))["imageLayoutVersion"],
        "1.0.0"
    );
    // Every blob is named by its digest.
    let blobs: Vec<PathBuf> = std::fs::read_dir(layout.join("blobs/sha256"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(blobs.len(), 3, "a manifest, a config and a layer");
    for path in &blobs {
        let name = path.file_name().unwrap().to_str().unwrap();
        assert_eq!(sha256(&std::fs::read(path).unwrap()), name, "{name}");
    }

    let index = json_file(&layout.join("index.json"));
    assert_eq!(index["schemaVersion"], 2);
    assert_eq!(
        index["mediaType"],
        "application/vnd.oci.image.index.v1+json"
    );
    let manifests = index["manifests"].as_array().expect("manifests");
    assert_eq!(manifests.len(), 1);
    let entry = &manifests[0];
    assert_eq!(
        entry["mediaType"],
        "application/vnd.oci.image.manifest.v1+json"
    );
    assert_eq!(
        entry["annotations"]["org.opencontainers.image.ref.name"],
        format!("spindle:{version}")
    );
    assert_eq!(entry["platform"]["architecture"], arch);
    let manifest = json_file(&blob(&layout, entry));
    assert_eq!(manifest["schemaVersion"], 2);
    assert_eq!(
        manifest["config"]["mediaType"],
        "application/vnd.oci.image.config.v1+json"
    );
    let config = json_file(&blob(&layout, &manifest["config"]));
    let layers = manifest["layers"].as_array().expect("layers");
    assert_eq!(layers.len(), 1);
    assert_eq!(
        layers[0]["mediaType"],
        "application/vnd.oci.image.layer.v1.tar+gzip"
    );
    let layer_tar = gunzip(&blob(&layout, &layers[0]));
    assert_eq!(
        config["rootfs"]["diff_ids"][0],
        format!("sha256:{}", sha256(&layer_tar)),
        "the config's diff_id is the uncompressed layer's digest"
    );

    assert_eq!(config["architecture"], arch);
    assert_eq!(config["os"], "linux");
    let user = config["config"]["User"].as_str().expect("a user");
    let (uid, gid) = user.split_once(':').expect("uid:gid, numeric");
    let (uid, gid): (u64, u64) = (uid.parse().unwrap(), gid.parse().unwrap());
    assert!(uid != 0 && gid != 0, "the image runs as root: {user}");
    let entrypoint = strings(&config["config"]["Entrypoint"]);
    assert_eq!(entrypoint, ["/spindle"]);
    let env = strings(&config["config"]["Env"]);
    assert!(
        env.contains(&"SPINDLE_HOME=/home/spindle".to_string()),
        "{env:?}"
    );

    let entries = tar_entries(&layer_tar);
    let find = |path: &str| {
        entries
            .iter()
            .find(|e| e.path == path)
            .unwrap_or_else(|| panic!("the layer has no {path}: {entries:?}"))
    };
    let program = find(entrypoint[0].trim_start_matches('/'));
    assert_eq!(program.kind, b'0', "the entrypoint is a regular file");
    assert_eq!(program.mode & 0o7777, 0o755);
    assert_eq!(program.uid, 0, "the user cannot replace the binary");
    assert!(program.data == data, "the layer holds this binary");
    let home_dir = find("home/spindle");
    assert_eq!(home_dir.kind, b'5');
    assert_eq!(
        (home_dir.uid, home_dir.gid, home_dir.mode & 0o7777),
        (uid, gid, 0o700)
    );
    assert_eq!(find("tmp").mode & 0o7777, 0o1777);
    assert_eq!((find("work").uid, find("work").gid), (uid, gid));
    let passwd = String::from_utf8(find("etc/passwd").data.clone()).unwrap();
    assert!(
        passwd.contains(&format!("spindle:x:{uid}:{gid}:")),
        "{passwd}"
    );

    // Docker's manifest.json names the same blobs.
    let docker = json_file(&layout.join("manifest.json"));
    let config_digest = manifest["config"]["digest"].as_str().unwrap();
    assert_eq!(
        docker[0]["Config"],
        format!("blobs/sha256/{}", &config_digest[7..])
    );
    assert_eq!(docker[0]["RepoTags"][0], format!("spindle:{version}"));
    assert!(layout
        .join(docker[0]["Layers"][0].as_str().unwrap())
        .is_file());

    // The archive holds the layout's files as they are.
    let packed = tar_entries(&std::fs::read(&archive).unwrap());
    let mut names: Vec<&str> = packed.iter().map(|e| e.path.as_str()).collect();
    names.sort_unstable();
    let mut expected = vec!["index.json", "manifest.json", "oci-layout"];
    let blob_names: Vec<String> = blobs
        .iter()
        .map(|p| format!("blobs/sha256/{}", p.file_name().unwrap().to_str().unwrap()))
        .collect();
    expected.extend(blob_names.iter().map(String::as_str));
    expected.sort_unstable();
    assert_eq!(names, expected);
    for entry in &packed {
        let file = std::fs::read(layout.join(&entry.path)).unwrap();
        assert!(entry.data == file, "{} differs in the archive", entry.path);
    }

    // A static binary needs no switch, and the same binary and time give
    // the same image (a stand-in: an ELF header without an interpreter).
    let mut stand_in = vec![0u8; 128];
    stand_in[..7].copy_from_slice(b"\x7fELF\x02\x01\x01");
    stand_in[16] = 2;
    stand_in[18..20].copy_from_slice(&data[18..20]);
    stand_in[32] = 64;
    stand_in[54] = 56;
    assert_eq!(elf(&stand_in), (arch, false));
    let stand_in_path = dir.join("static");
    std::fs::write(&stand_in_path, &stand_in).unwrap();
    let mut indexes = Vec::new();
    for run in ["one", "two"] {
        let out_dir = dir.join(run);
        let out = container_image(
            &[
                "--binary".as_ref(),
                stand_in_path.as_ref(),
                "--out".as_ref(),
                out_dir.as_ref(),
            ],
            &home,
        );
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        indexes.push(json_file(&out_dir.join("index.json")));
    }
    assert_eq!(indexes[0], indexes[1], "the same digests");

    skopeo_reads(&layout, &archive, arch);
    let _ = std::fs::remove_dir_all(&dir);
}

/// skopeo, when installed, reads the layout (checking every digest as it
/// copies) and the archive in both of its forms.
#[cfg(target_os = "linux")]
fn skopeo_reads(layout: &Path, archive: &Path, arch: &str) {
    if Command::new("skopeo").arg("--version").output().is_err() {
        eprintln!("skopeo is not installed: the image is checked by this test's own reader only");
        return;
    }
    let version = env!("CARGO_PKG_VERSION");
    let skopeo = |args: &[String]| {
        let out = Command::new("skopeo")
            .args(args)
            .stdin(Stdio::null())
            .output()
            .expect("skopeo runs");
        assert!(
            out.status.success(),
            "skopeo {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let reference = format!("oci:{}:spindle:{version}", layout.display());
    let inspected: Value =
        serde_json::from_str(&skopeo(&["inspect".into(), reference.clone()])).unwrap();
    assert_eq!(inspected["Architecture"], arch);
    assert_eq!(inspected["Os"], "linux");
    let copy = layout.with_file_name("skopeo-copy");
    skopeo(&[
        "copy".into(),
        "--quiet".into(),
        reference,
        format!("dir:{}", copy.display()),
    ]);
    for transport in ["oci-archive", "docker-archive"] {
        let inspected: Value = serde_json::from_str(&skopeo(&[
            "inspect".into(),
            format!("{transport}:{}", archive.display()),
        ]))
        .unwrap();
        assert_eq!(inspected["Architecture"], arch, "{transport}");
    }
}

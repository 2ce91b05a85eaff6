//! The fleet recipes of docs/fleets.md: every example under
//! `examples/fleets/` parses, has the shape its kind needs, and starts
//! Spindle only with flags Spindle knows; `scripts/container-image`
//! writes an OCI image layout whose digests, sizes, layer and config are
//! right (read here with a tar reader of this file's own, and with skopeo
//! when it is installed); the Harbor registry entry passes the registry's
//! schema and `scripts/registry-check`.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::Value;

use crate::support::isolation::{isolate, spindle_path};
use crate::support::{spindle_command, temp_dir};

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn read(relative: &str) -> String {
    std::fs::read_to_string(root().join(relative))
        .unwrap_or_else(|err| panic!("cannot read {relative}: {err}"))
}

/// The examples of docs/fleets.md, each with what it is.
const EXAMPLES: &[(&str, Kind)] = &[
    ("examples/fleets/kubernetes-job.yaml", Kind::Kubernetes),
    ("examples/fleets/kubernetes-serve.yaml", Kind::Kubernetes),
    ("examples/fleets/agent-sandbox.yaml", Kind::Kubernetes),
    ("examples/fleets/github-actions.yml", Kind::Workflow),
    ("examples/fleets/harbor/job.yaml", Kind::Harbor),
    ("examples/fleets/harbor/agent.json", Kind::RegistryEntry),
];

#[derive(Clone, Copy, PartialEq, Debug)]
enum Kind {
    Kubernetes,
    Workflow,
    Harbor,
    RegistryEntry,
}

/// The words of `text` that look like long flags (`--name`, without a
/// value after `=`).
fn flags_in(text: &str) -> BTreeSet<String> {
    let mut flags = BTreeSet::new();
    for word in text.split(|c: char| !(c.is_ascii_alphanumeric() || c == '-')) {
        if let Some(name) = word.strip_prefix("--") {
            if name.starts_with(|c: char| c.is_ascii_lowercase()) {
                flags.insert(word.trim_end_matches('-').to_string());
            }
        }
    }
    flags
}

/// The flags `spindle SUBCOMMAND --help` names (none when Spindle does
/// not know the subcommand).
fn help_flags(subcommand: &str) -> BTreeSet<String> {
    let home = temp_dir("fleets-help");
    let out = spindle_command(&home)
        .args([subcommand, "--help"])
        .stdin(Stdio::null())
        .output()
        .expect("spindle starts");
    let _ = std::fs::remove_dir_all(&home);
    if !out.status.success() {
        return BTreeSet::new();
    }
    flags_in(&String::from_utf8_lossy(&out.stdout))
}

/// Every flag a recipe may give to a subcommand of Spindle.
fn known_flags(subcommand: &str) -> BTreeSet<String> {
    let acp = help_flags("acp");
    assert!(
        acp.contains("--permissions") && acp.contains("--model"),
        "acp's help names its flags: {acp:?}"
    );
    let mut known = help_flags(subcommand);
    match subcommand {
        "exec" => assert!(known.contains("--max-cost"), "exec's help: {known:?}"),
        // Serve takes acp's agent options besides its own.
        "serve" => {
            assert!(known.contains("--listen"), "serve's help: {known:?}");
            known.extend(acp);
        }
        "acp" => {}
        other => panic!("a recipe starts `spindle {other}`, not a fleet command"),
    }
    known
}

/// Splits a shell line into words, keeping double-quoted text together,
/// up to a pipe.
fn shell_words(line: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut word = String::new();
    let mut quoted = false;
    for c in line.chars() {
        match c {
            '"' => quoted = !quoted,
            '|' if !quoted => break,
            c if c.is_whitespace() && !quoted => {
                if !word.is_empty() {
                    words.push(std::mem::take(&mut word));
                }
            }
            c => word.push(c),
        }
    }
    if !word.is_empty() {
        words.push(word);
    }
    words
}

fn unquote(item: &str) -> String {
    let item = item.trim();
    item.strip_prefix('"')
        .and_then(|i| i.strip_suffix('"'))
        .unwrap_or(item)
        .to_string()
}

fn indent(line: &str) -> usize {
    line.len() - line.trim_start().len()
}

/// Each start of Spindle in a YAML file, read line by line: the `args:`
/// block list of a container whose `image:` names spindle, and the shell
/// lines that run `spindle exec|serve|acp`. Each is the subcommand and
/// its arguments.
fn spindle_starts(text: &str) -> Vec<Vec<String>> {
    let lines: Vec<&str> = text.lines().collect();
    let mut starts = Vec::new();
    let mut spindle_image = false;
    for (at, line) in lines.iter().enumerate() {
        let trimmed = line.trim();
        if trimmed.starts_with("- name:") {
            spindle_image = false;
        }
        if let Some(image) = trimmed.strip_prefix("image:") {
            spindle_image = image.contains("spindle");
        }
        if trimmed == "args:" && spindle_image {
            let mut args = Vec::new();
            for next in &lines[at + 1..] {
                let item = next.trim();
                if item.is_empty() || item.starts_with('#') {
                    continue;
                }
                if indent(next) <= indent(line) && !item.starts_with("- ") {
                    break;
                }
                match item.strip_prefix("- ") {
                    Some(value) => args.push(unquote(value)),
                    None => break,
                }
            }
            starts.push(args);
        }
        for subcommand in ["exec", "serve", "acp"] {
            let shown = format!("spindle {subcommand} ");
            if let Some(at) = trimmed.find(&shown) {
                if !trimmed.starts_with('#') {
                    let words = shell_words(&trimmed[at..]);
                    starts.push(words[1..].to_vec());
                }
            }
        }
    }
    starts
}

/// The starts of Spindle a registry entry names: each target's args.
fn entry_starts(entry: &Value) -> Vec<Vec<String>> {
    let binary = entry["distribution"]["binary"]
        .as_object()
        .expect("a binary distribution");
    binary
        .values()
        .map(|target| {
            target["args"]
                .as_array()
                .expect("args")
                .iter()
                .map(|a| a.as_str().expect("string args").to_string())
                .collect()
        })
        .collect()
}

/// The flags of one start that Spindle does not know.
fn unknown_flags(start: &[String]) -> Vec<String> {
    let subcommand = start.first().expect("a subcommand").as_str();
    let known = known_flags(subcommand);
    start
        .iter()
        .filter(|word| word.starts_with("--"))
        .map(|word| word.split('=').next().unwrap_or(word).to_string())
        .filter(|flag| !known.contains(flag))
        .collect()
}

/// The top-level keys of each `---` document of a YAML file, checked for
/// tabs and odd indentation on the way.
fn yaml_documents(file: &str, text: &str) -> Vec<Vec<String>> {
    let mut documents = vec![Vec::new()];
    for (at, line) in text.lines().enumerate() {
        assert!(!line.contains('\t'), "{file}:{}: a tab", at + 1);
        if line.trim_start().starts_with('#') || line.trim().is_empty() {
            continue;
        }
        assert!(
            indent(line).is_multiple_of(2),
            "{file}:{}: indented by an odd number of spaces",
            at + 1
        );
        if line == "---" {
            documents.push(Vec::new());
            continue;
        }
        if indent(line) == 0 {
            let key = line
                .split(':')
                .next()
                .filter(|_| line.contains(':'))
                .unwrap_or_else(|| panic!("{file}:{}: not a key at the top: {line}", at + 1));
            let keys = documents.last_mut().unwrap();
            assert!(
                !keys.contains(&key.to_string()),
                "{file}:{}: {key} twice",
                at + 1
            );
            keys.push(key.to_string());
        }
    }
    documents
}

/// The documents of a YAML file as JSON, parsed by python3's yaml module;
/// `None` (said) when python3 or its yaml module is not installed.
fn parsed_yaml(path: &Path) -> Option<Vec<Value>> {
    let program = "import json, sys, yaml\n\
                   print(json.dumps(list(yaml.safe_load_all(open(sys.argv[1])))))";
    let out = Command::new("python3")
        .args(["-c", program])
        .arg(path)
        .stdin(Stdio::null())
        .output();
    match out {
        Ok(out) if out.status.success() => {
            Some(serde_json::from_slice(&out.stdout).expect("python3 prints JSON"))
        }
        Ok(out) => {
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert!(
                stderr.contains("No module named 'yaml'"),
                "python3 cannot parse {}: {stderr}",
                path.display()
            );
            eprintln!(
                "python3 has no yaml module: the YAML structure is checked line by line only"
            );
            None
        }
        Err(_) => {
            eprintln!("python3 is not installed: the YAML structure is checked line by line only");
            None
        }
    }
}

fn kinds(documents: &[Value]) -> Vec<&str> {
    documents
        .iter()
        .map(|d| d["kind"].as_str().unwrap_or("?"))
        .collect()
}

fn container<'a>(pod: &'a Value, name: &str) -> &'a Value {
    pod["containers"]
        .as_array()
        .expect("containers")
        .iter()
        .find(|c| c["name"] == name)
        .unwrap_or_else(|| panic!("no container {name}: {pod}"))
}

fn strings(value: &Value) -> Vec<String> {
    value
        .as_array()
        .unwrap_or_else(|| panic!("not a list: {value}"))
        .iter()
        .map(|v| v.as_str().expect("a string").to_string())
        .collect()
}

/// The value after `flag` in `args`.
fn after<'a>(args: &'a [String], flag: &str) -> &'a str {
    let at = args
        .iter()
        .position(|a| a == flag)
        .unwrap_or_else(|| panic!("{flag} missing from {args:?}"));
    args.get(at + 1).expect("a value").as_str()
}

/// A pod that runs Spindle the way the image means: not as root, its
/// home and the model key where Spindle looks, the secrets it names
/// mounted.
fn check_spindle_pod(file: &str, pod: &Value, args: &[String]) {
    let security = &pod["securityContext"];
    assert_eq!(security["runAsNonRoot"], true, "{file}");
    assert_eq!(security["runAsUser"], 65532, "{file}: the image's user");
    assert_eq!(pod["automountServiceAccountToken"], false, "{file}");
    let spindle = container(pod, "spindle");
    assert_eq!(strings(&spindle["args"]), args, "{file}: the line reader");
    assert_eq!(
        spindle["securityContext"]["readOnlyRootFilesystem"], true,
        "{file}"
    );
    let mounts = spindle["volumeMounts"].as_array().expect("volumeMounts");
    let mounted = |path: &str| mounts.iter().find(|m| m["mountPath"] == path);
    assert!(
        mounted("/home/spindle").is_some(),
        "{file}: SPINDLE_HOME is writable"
    );
    let key = spindle["env"]
        .as_array()
        .expect("env")
        .iter()
        .find(|e| e["name"] == "OPENAI_API_KEY")
        .expect("the model key");
    assert_eq!(
        key["valueFrom"]["secretKeyRef"]["name"], "spindle-model-key",
        "{file}"
    );
    if args.first().map(String::as_str) != Some("serve") {
        return;
    }
    let volumes = pod["volumes"].as_array().expect("volumes");
    for (flag, secret) in [
        ("--token-file", "spindle-serve-token"),
        ("--tls-cert", "spindle-serve-tls"),
        ("--tls-key", "spindle-serve-tls"),
    ] {
        let path = Path::new(after(args, flag));
        let mount = mounted(path.parent().unwrap().to_str().unwrap())
            .unwrap_or_else(|| panic!("{file}: nothing mounted for {flag} {}", path.display()));
        let volume = volumes
            .iter()
            .find(|v| v["name"] == mount["name"])
            .expect("the mount's volume");
        assert_eq!(volume["secret"]["secretName"], secret, "{file}: {flag}");
    }
    let probe = &spindle["readinessProbe"]["httpGet"];
    assert_eq!(probe["path"], "/healthz", "{file}");
    assert_eq!(probe["scheme"], "HTTPS", "{file}: serve speaks TLS");
    let port: u64 = after(args, "--listen")
        .rsplit(':')
        .next()
        .and_then(|p| p.parse().ok())
        .expect("--listen ADDR:PORT");
    let ports = spindle["ports"].as_array().expect("ports");
    assert!(
        ports
            .iter()
            .any(|p| p["name"] == probe["port"] && p["containerPort"] == port),
        "{file}: the probe's port is the one serve listens on"
    );
}

/// What each example must be, read from python3's parse.
fn check_structure(file: &str, documents: &[Value], starts: &[Vec<String>]) {
    match file {
        "examples/fleets/kubernetes-job.yaml" => {
            assert_eq!(kinds(documents), ["Secret", "Job"], "{file}");
            let job = &documents[1]["spec"];
            assert_eq!(job["backoffLimit"], 0, "{file}");
            let pod = &job["template"]["spec"];
            assert_eq!(pod["restartPolicy"], "Never", "{file}");
            let clone = &pod["initContainers"][0];
            assert_eq!(clone["args"][0], "clone", "{file}");
            check_spindle_pod(file, pod, &starts[0]);
            let work = container(pod, "spindle")["workingDir"].as_str().unwrap();
            assert!(
                clone["args"].as_array().unwrap().iter().any(|a| a == work),
                "{file}: the clone goes where spindle works"
            );
        }
        "examples/fleets/kubernetes-serve.yaml" => {
            assert_eq!(
                kinds(documents),
                ["Secret", "Secret", "Deployment", "Service"],
                "{file}"
            );
            let deployment = &documents[2]["spec"];
            let pod = &deployment["template"]["spec"];
            check_spindle_pod(file, pod, &starts[0]);
            let service = &documents[3]["spec"];
            assert_eq!(
                service["selector"], deployment["template"]["metadata"]["labels"],
                "{file}: the Service selects the pods"
            );
            assert_eq!(service["ports"][0]["targetPort"], "acp", "{file}");
        }
        "examples/fleets/agent-sandbox.yaml" => {
            assert_eq!(
                kinds(documents),
                ["SandboxTemplate", "SandboxWarmPool", "SandboxClaim"],
                "{file}"
            );
            for document in documents {
                assert_eq!(
                    document["apiVersion"], "extensions.agents.x-k8s.io/v1beta1",
                    "{file}"
                );
            }
            let template = &documents[0];
            check_spindle_pod(file, &template["spec"]["podTemplate"]["spec"], &starts[0]);
            let pool = &documents[1];
            assert_eq!(
                pool["spec"]["sandboxTemplateRef"]["name"], template["metadata"]["name"],
                "{file}"
            );
            assert_eq!(
                documents[2]["spec"]["warmPoolRef"]["name"], pool["metadata"]["name"],
                "{file}"
            );
        }
        "examples/fleets/github-actions.yml" => {
            let workflow = &documents[0];
            // YAML 1.1 reads the key `on` as true.
            let on = workflow.get("on").or_else(|| workflow.get("true"));
            assert!(
                on.is_some_and(|on| on.get("workflow_dispatch").is_some()),
                "{file}"
            );
            let steps = workflow["jobs"]["exec"]["steps"].as_array().expect("steps");
            let run = steps
                .iter()
                .find(|s| {
                    s["run"]
                        .as_str()
                        .is_some_and(|r| r.contains("spindle exec"))
                })
                .expect("a step runs spindle exec");
            // The prompt is text from outside: through the environment,
            // never expanded into the script.
            assert!(
                !run["run"].as_str().unwrap().contains("${{"),
                "{file}: an expression in the script"
            );
            assert_eq!(run["env"]["PROMPT"], "${{ inputs.prompt }}", "{file}");
        }
        "examples/fleets/harbor/job.yaml" => {
            let agent = &documents[0]["agents"][0];
            assert_eq!(agent["name"], "acp", "{file}");
            let entry = agent["kwargs"]["registry_entry_path"].as_str().unwrap();
            assert!(root().join(entry).is_file(), "{file}: {entry}");
        }
        other => panic!("no structure check for {other}"),
    }
}

#[test]
fn every_fleet_example_parses_and_gives_spindle_known_flags() {
    let guide = read("docs/fleets.md");
    for (file, kind) in EXAMPLES {
        assert!(guide.contains(file), "docs/fleets.md does not name {file}");
        let text = read(file);
        if *kind == Kind::RegistryEntry {
            continue;
        }
        let documents = yaml_documents(file, &text);
        for keys in &documents {
            let needs: &[&str] = match kind {
                Kind::Kubernetes => &["apiVersion", "kind", "metadata"],
                Kind::Workflow => &["name", "on", "jobs"],
                Kind::Harbor => &["agents"],
                Kind::RegistryEntry => unreachable!(),
            };
            for key in needs {
                assert!(keys.iter().any(|k| k == key), "{file}: {key} in {keys:?}");
            }
        }
        let starts = spindle_starts(&text);
        if *kind != Kind::Harbor {
            assert!(!starts.is_empty(), "{file} starts no spindle");
        }
        for start in &starts {
            let unknown = unknown_flags(start);
            assert!(
                unknown.is_empty(),
                "{file}: spindle {start:?} has flags spindle does not know: {unknown:?}"
            );
        }
        if let Some(parsed) = parsed_yaml(&root().join(file)) {
            assert_eq!(parsed.len(), documents.len(), "{file}: documents");
            check_structure(file, &parsed, &starts);
        }
    }
}

#[test]
fn the_line_reader_finds_spindle_and_not_the_other_containers() {
    let text = "containers:\n  - name: clone\n    image: alpine/git\n    args:\n      - clone\n      - --depth=1\n  - name: spindle\n    image: example/spindle:1\n    args:\n      # a comment\n      - exec\n      - \"--json\"\n      - Fix it\n    env: []\nrun: |\n  spindle exec --max-cost 1 \"$PROMPT\" | tee out\n";
    let starts = spindle_starts(text);
    assert_eq!(
        starts,
        [
            vec!["exec", "--json", "Fix it"],
            vec!["exec", "--max-cost", "1", "$PROMPT"]
        ]
    );
    assert!(unknown_flags(&starts[0]).is_empty());
    assert_eq!(
        unknown_flags(&["exec".into(), "--no-such-flag".into()]),
        ["--no-such-flag"]
    );
    assert_eq!(
        unknown_flags(&["serve".into(), "--listen=0.0.0.0:1".into()]),
        Vec::<String>::new()
    );
}

#[test]
fn the_harbor_entry_is_a_registry_entry_that_starts() {
    let file = "examples/fleets/harbor/agent.json";
    let entry: Value = serde_json::from_str(&read(file)).expect("agent.json is JSON");
    let schema: Value = serde_json::from_str(&read("tests/data/registry-agent.schema.json"))
        .expect("the registry's schema");
    let validator = jsonschema::draft7::options()
        .should_validate_formats(true)
        .build(&schema)
        .expect("the schema compiles");
    let errors: Vec<String> = validator
        .iter_errors(&entry)
        .map(|e| e.to_string())
        .collect();
    assert!(errors.is_empty(), "{file}: {errors:?}");
    assert_eq!(entry["version"], env!("CARGO_PKG_VERSION"), "{file}");
    for start in entry_starts(&entry) {
        assert_eq!(start.first().map(String::as_str), Some("acp"), "{file}");
        assert!(unknown_flags(&start).is_empty(), "{file}: {start:?}");
    }
    registry_check(&entry);
}

/// `scripts/registry-check` on the entry with this binary packed as the
/// archive it names for this machine: the args start an agent that the
/// registry's checks accept.
#[cfg(all(
    target_os = "linux",
    any(target_arch = "x86_64", target_arch = "aarch64")
))]
fn registry_check(entry: &Value) {
    let key = if cfg!(target_arch = "x86_64") {
        "linux-x86_64"
    } else {
        "linux-aarch64"
    };
    let url = entry["distribution"]["binary"][key]["archive"]
        .as_str()
        .expect("an archive for this machine");
    let name = url.rsplit('/').next().unwrap();
    let dir = temp_dir("fleets-registry");
    let pack = dir.join("pack");
    std::fs::create_dir_all(&pack).unwrap();
    std::fs::copy(spindle_path(), pack.join("spindle")).unwrap();
    let packed = Command::new("tar")
        .arg("-czf")
        .arg(dir.join(name))
        .arg("-C")
        .arg(&pack)
        .arg("spindle")
        .status()
        .expect("tar runs");
    assert!(packed.success());
    std::fs::write(dir.join("agent.json"), entry.to_string()).unwrap();
    let mut check = Command::new("bash");
    check
        .arg(root().join("scripts/registry-check"))
        .arg(&dir)
        .stdin(Stdio::null());
    isolate(&mut check, &dir.join("home"));
    let out = check.output().expect("bash runs scripts/registry-check");
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && said.contains("registry check: passed"),
        "{said}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[cfg(not(all(
    target_os = "linux",
    any(target_arch = "x86_64", target_arch = "aarch64")
)))]
fn registry_check(_entry: &Value) {
    eprintln!("the entry names Linux archives only: scripts/registry-check is not run here");
}

// --- The container image --------------------------------------------------

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

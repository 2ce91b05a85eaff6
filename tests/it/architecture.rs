//! The crate's layout, checked. The top-level modules form tiers (the
//! table [`TIERS`]); a module imports only from its own tier or below, a
//! new module must be given a tier, no import circle exists among the
//! crate's files or its top-level modules (a module naming its child in
//! code, `child::step(…)`, depends on it, so a parent and a child that
//! call each other are a circle), and no file holds more than
//! [`FILE_CAP`] lines of code before its tests. Inside the agent, the
//! turn worker never reaches into the dispatcher or its handlers, and the
//! dispatcher side uses only the turn's public faces (`turn/mod.rs`,
//! `report.rs`, `client.rs`, `processes.rs`). And every test that starts
//! Spindle does it through the harness, which gives it a private home.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

/// A module path inside the crate, such as `["agent", "turn", "runner"]`.
type ModulePath = Vec<String>;

/// The tiers, top to bottom: a module may import from its own tier and
/// the ones below it, never from one above.
const TIERS: &[(&str, &[&str])] = &[
    ("front-ends", &["cli", "fuzz", "serve"]),
    ("agent", &["agent"]),
    ("configuration", &["config", "agentfile"]),
    (
        "domain",
        &[
            "acp",
            "rpc",
            "provider",
            "tools",
            "policy",
            "sandbox",
            "store",
            "mcp",
            "checkpoint",
            "history",
            "credentials",
            "process",
            "net",
        ],
    ),
    (
        "vocabulary",
        &["cancel", "clock", "conversation", "modes", "os", "util"],
    ),
];

/// The most lines of code a file may hold before its test module.
const FILE_CAP: usize = 800;

/// Files still over [`FILE_CAP`], each with the most lines it may hold
/// until it is split: none may grow, and one that shrinks under the cap
/// must leave this list.
const OVER_CAP: &[(&str, usize)] = &[];

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

/// Every `.rs` file under `src/agent`, by module path.
fn agent_modules() -> BTreeMap<ModulePath, PathBuf> {
    modules_under("agent")
}

/// Every module file of the library (not `lib.rs`, `main.rs` or the build
/// script), by module path.
fn crate_modules() -> BTreeMap<ModulePath, PathBuf> {
    modules_under("")
}

/// Every `.rs` file under `src/<folder>` (`""`: all of them but the crate
/// roots), by module path.
fn modules_under(folder: &str) -> BTreeMap<ModulePath, PathBuf> {
    let root = src();
    let mut modules = BTreeMap::new();
    let mut stack = vec![root.join(folder)];
    while let Some(dir) = stack.pop() {
        for entry in fs::read_dir(&dir).expect("src is readable") {
            let path = entry.expect("a directory entry").path();
            if path.is_dir() {
                stack.push(path);
                continue;
            }
            if path.extension().is_none_or(|e| e != "rs") {
                continue;
            }
            let relative = path.strip_prefix(&root).unwrap().with_extension("");
            let mut module: ModulePath = relative
                .components()
                .map(|c| c.as_os_str().to_string_lossy().into_owned())
                .collect();
            if module.last().is_some_and(|m| m == "mod") {
                module.pop();
            }
            if matches!(module.as_slice(), [one] if ["lib", "main", "build"].contains(&one.as_str()))
            {
                continue;
            }
            modules.insert(module, path);
        }
    }
    modules
}

/// The code of a file without its test module and its other test-only
/// items (tests may reach anywhere).
fn code_of(path: &Path) -> String {
    let text = fs::read_to_string(path).expect("a source file is readable");
    let text = match text.find("#[cfg(test)]\nmod tests") {
        Some(at) => &text[..at],
        None => &text[..],
    };
    without_test_items(text)
}

/// `code` without each item marked `#[cfg(test)]`: from the attribute to
/// the end of the item (its braces closed, or its `;`).
fn without_test_items(code: &str) -> String {
    let mut kept = String::new();
    let mut lines = code.lines();
    while let Some(line) = lines.next() {
        if line.trim() != "#[cfg(test)]" {
            kept.push_str(line);
            kept.push('\n');
            continue;
        }
        let mut depth = 0i32;
        let mut opened = false;
        for item in lines.by_ref() {
            depth += item.matches('{').count() as i32 - item.matches('}').count() as i32;
            opened |= item.contains('{');
            if (opened && depth <= 0) || (!opened && item.trim_end().ends_with(';')) {
                break;
            }
        }
    }
    kept
}

/// The lines of code of a file before its first `#[cfg(test)]`.
fn code_lines(path: &Path) -> usize {
    let text = fs::read_to_string(path).expect("a source file is readable");
    text.lines()
        .take_while(|line| !line.starts_with("#[cfg(test)]"))
        .count()
}

/// The code with every `pub(in crate::…)` visibility taken out: it names
/// a module, but imports nothing from it.
fn without_visibility(code: &str) -> String {
    code.replace("(in crate::", "(in ")
}

fn is_ident(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// The paths that follow `prefix` in `code`: `prefix::a::b` gives `[a, b]`;
/// `prefix::{a, b::c}` gives `[a]` and `[b, c]`.
fn paths_after(code: &str, prefix: &str) -> Vec<Vec<String>> {
    let mut found = Vec::new();
    let mut from = 0;
    while let Some(at) = code[from..].find(prefix).map(|at| from + at) {
        // What comes before, in the whole code: `super::super::x` is one
        // path, not also a `super::x`.
        let before = code[..at].chars().last();
        from = at + prefix.len();
        let rest = &code[from..];
        if before.is_some_and(|c| is_ident(c) || c == ':') {
            continue;
        }
        if let Some(list) = rest.strip_prefix('{') {
            let end = list.find('}').unwrap_or(list.len());
            for item in list[..end].split(',') {
                let segments: Vec<String> = item
                    .trim()
                    .split("::")
                    .map(|s| s.chars().take_while(|c| is_ident(*c)).collect::<String>())
                    .take_while(|s| !s.is_empty())
                    .collect();
                if !segments.is_empty() {
                    found.push(segments);
                }
            }
            continue;
        }
        let mut segments = Vec::new();
        let mut tail = rest;
        loop {
            let ident: String = tail.chars().take_while(|c| is_ident(*c)).collect();
            if ident.is_empty() {
                break;
            }
            tail = &tail[ident.len()..];
            segments.push(ident);
            match tail.strip_prefix("::") {
                Some(next) if next.starts_with(|c: char| is_ident(c)) => tail = next,
                _ => break,
            }
        }
        if !segments.is_empty() {
            found.push(segments);
        }
    }
    found
}

/// The module a path names: the longest prefix that is a module file.
fn resolve(
    modules: &BTreeMap<ModulePath, PathBuf>,
    base: &[String],
    segments: &[String],
) -> Option<ModulePath> {
    let mut best = None;
    for length in 0..=segments.len() {
        let mut candidate = base.to_vec();
        candidate.extend_from_slice(&segments[..length]);
        if modules.contains_key(&candidate) {
            best = Some(candidate);
        }
    }
    best
}

/// Which agent modules each agent module uses.
fn dependencies() -> BTreeMap<ModulePath, BTreeSet<ModulePath>> {
    file_graph(&agent_modules(), "crate::agent::", &["agent"])
}

/// Which of `modules` each of them uses: through `super::`, through
/// `prefix` (resolved from `base`), and a folder's `mod.rs` through its
/// own `use child::…`.
fn file_graph(
    modules: &BTreeMap<ModulePath, PathBuf>,
    prefix: &str,
    base: &[&str],
) -> BTreeMap<ModulePath, BTreeSet<ModulePath>> {
    let base: ModulePath = base.iter().map(|s| s.to_string()).collect();
    let mut graph = BTreeMap::new();
    for (module, path) in modules {
        let code = without_visibility(&code_of(path));
        let is_dir_module = path.ends_with("mod.rs");
        let mut uses = BTreeSet::new();
        // `super` of a file is its folder's module; of a folder's mod.rs,
        // the folder above.
        let parent: ModulePath = module[..module.len() - 1].to_vec();
        for segments in paths_after(&code, "super::") {
            // `super::super::x` is in the folder above the parent.
            let ups = segments.iter().take_while(|s| *s == "super").count();
            let base = &parent[..parent.len().saturating_sub(ups)];
            if let Some(target) = resolve(modules, base, &segments[ups..]) {
                uses.insert(target);
            }
        }
        for segments in paths_after(&code, prefix) {
            if let Some(target) = resolve(modules, &base, &segments) {
                uses.insert(target);
            }
        }
        // A module naming one of its own children in its code
        // (`child::name(…)`, `child::Type`): the parent depends on it.
        uses.extend(children_named(modules, module, &code));
        // A folder's mod.rs naming its own children (`use client::Client`).
        if is_dir_module {
            for line in code.lines().map(str::trim) {
                let Some(used) = line
                    .strip_prefix("pub use ")
                    .or_else(|| line.strip_prefix("use "))
                else {
                    continue;
                };
                for segments in paths_after(&format!(" {used}"), " ") {
                    if let Some(target) = resolve(modules, module, &segments) {
                        if target != *module {
                            uses.insert(target);
                        }
                    }
                }
            }
        }
        uses.remove(module);
        graph.insert(module.clone(), uses);
    }
    graph
}

/// The direct children of `module` that `code` names by a path starting
/// with the child (`child::name(`, `child::Type`), not after `::` or as
/// part of a longer name.
fn children_named(
    modules: &BTreeMap<ModulePath, PathBuf>,
    module: &ModulePath,
    code: &str,
) -> BTreeSet<ModulePath> {
    let mut found = BTreeSet::new();
    for candidate in modules.keys() {
        if candidate.len() != module.len() + 1 || !candidate.starts_with(module) {
            continue;
        }
        let child = &candidate[module.len()];
        let named = paths_after(code, &format!("{child}::"));
        if named.iter().any(|segments| !segments.is_empty()) {
            found.insert(candidate.clone());
        }
    }
    found
}

fn name(module: &ModulePath) -> String {
    module.join("::")
}

/// A cycle through `start`, if any, by depth-first search.
fn find_cycle(graph: &BTreeMap<ModulePath, BTreeSet<ModulePath>>) -> Option<Vec<String>> {
    fn visit(
        node: &ModulePath,
        graph: &BTreeMap<ModulePath, BTreeSet<ModulePath>>,
        stack: &mut Vec<ModulePath>,
        done: &mut BTreeSet<ModulePath>,
    ) -> Option<Vec<String>> {
        if let Some(at) = stack.iter().position(|n| n == node) {
            let mut cycle: Vec<String> = stack[at..].iter().map(name).collect();
            cycle.push(name(node));
            return Some(cycle);
        }
        if done.contains(node) {
            return None;
        }
        stack.push(node.clone());
        for next in graph.get(node).into_iter().flatten() {
            if let Some(cycle) = visit(next, graph, stack, done) {
                return Some(cycle);
            }
        }
        stack.pop();
        done.insert(node.clone());
        None
    }
    let mut done = BTreeSet::new();
    for node in graph.keys() {
        if let Some(cycle) = visit(node, graph, &mut Vec::new(), &mut done) {
            return Some(cycle);
        }
    }
    None
}

#[test]
fn the_agents_files_import_each_other_without_a_circle() {
    let graph = dependencies();
    assert!(graph.len() > 15, "too few modules found: {graph:?}");
    // The checker sees real edges.
    let lifecycle = graph
        .get(&vec!["agent".into(), "handlers".into(), "lifecycle".into()])
        .expect("handlers/lifecycle.rs exists");
    assert!(lifecycle.contains(&vec!["agent".to_string(), "dispatcher".to_string()]));
    if let Some(cycle) = find_cycle(&graph) {
        panic!("import circle: {}", cycle.join(" -> "));
    }
}

#[test]
fn the_turn_and_the_dispatcher_keep_to_their_sides() {
    let graph = dependencies();
    let starts = |module: &ModulePath, folder: &str| module.get(1).is_some_and(|m| m == folder);
    let public_faces = ["report", "client", "processes"];
    for (module, uses) in &graph {
        for used in uses {
            if starts(module, "turn") {
                assert!(
                    !starts(used, "dispatcher") && !starts(used, "handlers"),
                    "{} reaches into {}",
                    name(module),
                    name(used)
                );
            }
            if starts(module, "dispatcher") || starts(module, "handlers") {
                let inside_turn = starts(used, "turn")
                    && used.len() > 2
                    && !public_faces.contains(&used[2].as_str());
                assert!(!inside_turn, "{} reaches into {}", name(module), name(used));
            }
            if starts(module, "common") {
                assert!(
                    starts(used, "common"),
                    "{} (shared) depends on {}",
                    name(module),
                    name(used)
                );
            }
        }
    }
}

/// The tier of a top-level module: its index in [`TIERS`] (0 is the top).
fn tier_of(module: &str) -> Option<usize> {
    TIERS
        .iter()
        .position(|(_, members)| members.contains(&module))
}

/// The upward imports in `code`, the code of a file of top-level module
/// `module`: each as `module -> imported`.
fn upward_imports(module: &str, code: &str) -> Vec<String> {
    let Some(own) = tier_of(module) else {
        return vec![format!("{module} is in no tier of TIERS")];
    };
    let mut found = Vec::new();
    for segments in paths_after(&without_visibility(code), "crate::") {
        let target = &segments[0];
        match tier_of(target) {
            Some(tier) if tier >= own => {}
            Some(tier) => found.push(format!(
                "{module} ({}) imports {target} ({})",
                TIERS[own].0, TIERS[tier].0
            )),
            None => found.push(format!("{module} imports {target}, which is in no tier")),
        }
    }
    found
}

#[test]
fn every_module_imports_only_from_its_tier_or_below() {
    let modules = crate_modules();
    let mut problems = BTreeSet::new();
    for (module, path) in &modules {
        for problem in upward_imports(&module[0], &code_of(path)) {
            problems.insert(format!("{problem} (in {})", path.display()));
        }
    }
    // Every top-level module of lib.rs is in the table.
    let lib = fs::read_to_string(src().join("lib.rs")).unwrap();
    for line in lib.lines() {
        if let Some(name) = line.trim().strip_prefix("pub mod ") {
            let name = name.trim_end_matches(';');
            if tier_of(name).is_none() {
                problems.insert(format!("lib.rs declares {name}, which is in no tier"));
            }
        }
    }
    // The binary only hands over to the front-ends.
    let main = code_of(&src().join("main.rs"));
    for segments in paths_after(&main, "spindle::") {
        if segments[0] != "cli" {
            problems.insert(format!("main.rs uses spindle::{}", segments.join("::")));
        }
    }
    assert!(problems.is_empty(), "{problems:#?}");
    assert!(
        modules.len() > 100,
        "too few modules found: {}",
        modules.len()
    );
}

#[test]
fn the_tier_check_sees_an_upward_import() {
    // The checker itself: an import from above is named, a sideways or
    // downward one is not, a visibility is no import, and a module with
    // no tier is reported.
    assert_eq!(
        upward_imports("store", "use crate::agent::Options;"),
        ["store (domain) imports agent (agent)"]
    );
    assert_eq!(
        upward_imports("modes", "fn f() { crate::tools::read(); }"),
        ["modes (vocabulary) imports tools (domain)"]
    );
    assert!(upward_imports("tools", "use crate::{process, util::visible};").is_empty());
    assert!(upward_imports("agent", "pub(in crate::cli) fn f() {}").is_empty());
    assert_eq!(upward_imports("novel", "").len(), 1);
}

#[test]
fn no_import_circle_among_the_crates_files_or_modules() {
    let modules = crate_modules();
    let files = file_graph(&modules, "crate::", &[]);
    assert!(
        files[&vec!["tools".to_string(), "files".to_string()]]
            .contains(&vec!["tools".to_string(), "bounded".to_string()]),
        "the checker sees real edges"
    );
    if let Some(cycle) = find_cycle(&files) {
        panic!("import circle: {}", cycle.join(" -> "));
    }
    // The same among the top-level modules (sideways imports in a tier).
    let mut tops: BTreeMap<ModulePath, BTreeSet<ModulePath>> = BTreeMap::new();
    for (module, uses) in &files {
        let entry = tops.entry(vec![module[0].clone()]).or_default();
        entry.extend(
            uses.iter()
                .filter(|used| used[0] != module[0])
                .map(|used| vec![used[0].clone()]),
        );
    }
    if let Some(cycle) = find_cycle(&tops) {
        panic!("import circle between modules: {}", cycle.join(" -> "));
    }
}

#[test]
fn no_file_holds_more_than_the_cap_before_its_tests() {
    let root = src();
    let mut problems = Vec::new();
    let mut listed: BTreeMap<&str, usize> = OVER_CAP.iter().copied().collect();
    for path in crate_modules().values() {
        let relative = path
            .strip_prefix(&root)
            .unwrap()
            .to_string_lossy()
            .into_owned();
        let lines = code_lines(path);
        match listed.remove(relative.as_str()) {
            Some(ceiling) if lines > ceiling => problems.push(format!(
                "{relative}: {lines} lines, more than its {ceiling}"
            )),
            Some(_) if lines <= FILE_CAP => problems.push(format!(
                "{relative}: {lines} lines, under the cap: take it off OVER_CAP"
            )),
            Some(_) => {}
            None if lines > FILE_CAP => {
                problems.push(format!("{relative}: {lines} lines, over {FILE_CAP}"))
            }
            None => {}
        }
    }
    for gone in listed.keys() {
        problems.push(format!("{gone} is on OVER_CAP but does not exist"));
    }
    assert!(problems.is_empty(), "{problems:#?}");
}

/// Every text file of the project under `dir` (recursively), skipping
/// build output and test data.
fn project_text_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.starts_with('.') || name == "target" || name == "data" {
            continue;
        }
        if path.is_dir() {
            project_text_files(&path, out);
        } else if [".rs", ".md", ".toml", ".sh", ".mjs", ".py"]
            .iter()
            .any(|ext| name.ends_with(ext))
        {
            out.push(path);
        }
    }
}

#[test]
fn no_file_holds_a_merge_conflict() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = vec![root.join("README.md"), root.join("ARCHITECTURE.md")];
    for dir in ["src", "tests", "docs", "scripts", "examples"] {
        project_text_files(&root.join(dir), &mut files);
    }
    assert!(files.len() > 100, "too few files found: {}", files.len());
    // Built here, so this file does not hold the markers itself.
    let markers = ["<".repeat(7) + " ", ">".repeat(7) + " "];
    for file in &files {
        let text = fs::read_to_string(file).unwrap_or_default();
        for line in text.lines() {
            assert!(
                !markers
                    .iter()
                    .any(|marker| line.starts_with(marker.as_str())),
                "{} holds a merge conflict marker: {line}",
                file.display()
            );
        }
    }
}

/// Why `line` of a test outside `tests/it/support/` starts Spindle some
/// other way than `support::spindle_command` (or `Agent::spawn*`, or
/// `support::in_process`), which give every start a private home; `None`
/// when it does not. The names are built here so that this file does not
/// hold them itself.
fn bare_start(line: &str) -> Option<&'static str> {
    let cargo_binary = concat!("CARGO_BIN_", "EXE_spindle");
    let harness_binary = concat!("spindle_", "binary(");
    let new_command = concat!("Command::", "new(");
    if line.contains(cargo_binary) {
        return Some("names cargo's binary (use support::spindle_command)");
    }
    if line.contains(harness_binary) {
        return Some("takes the harness's binary (use support::spindle_command)");
    }
    if line.contains(new_command) && line.to_lowercase().contains("spindle") {
        return Some("starts Spindle with a command of its own (use support::spindle_command)");
    }
    None
}

/// Every test that starts Spindle gives it a private home: the support
/// module's starts are the only ones, and a test that runs the binary
/// through another program (`isolation::spindle_path`) isolates that
/// command itself.
#[test]
fn every_start_of_spindle_goes_through_the_harness() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let support = root.join("tests").join("it").join("support");
    let mut files = Vec::new();
    project_text_files(&root.join("tests"), &mut files);
    let files: Vec<PathBuf> = files
        .into_iter()
        .filter(|file| file.extension().is_some_and(|ext| ext == "rs"))
        .filter(|file| !file.starts_with(&support))
        .collect();
    assert!(
        files.len() > 50,
        "too few test files found: {}",
        files.len()
    );
    let path_of = concat!("spindle_", "path()");
    let mut problems = Vec::new();
    for file in &files {
        let name = file
            .strip_prefix(root)
            .unwrap_or(file)
            .display()
            .to_string();
        let text = fs::read_to_string(file).unwrap_or_default();
        for (at, line) in text.lines().enumerate() {
            if let Some(why) = bare_start(line) {
                problems.push(format!("{name}:{}: {why}: {}", at + 1, line.trim()));
            }
        }
        if text.contains(path_of) && !text.contains("isolate(") && !text.contains("spawn_program(")
        {
            problems.push(format!(
                "{name} runs the binary's path without isolate or Agent::spawn_program"
            ));
        }
    }
    assert!(
        problems.is_empty(),
        "tests that could start Spindle with the developer's home:\n{}",
        problems.join("\n")
    );
}

#[test]
fn the_harness_check_sees_a_bare_start() {
    let bare = [
        concat!(
            "let out = Command::new(env!(\"CARGO_BIN_",
            "EXE_spindle\"))"
        ),
        concat!("    std::process::Command::", "new(spindle_", "binary())"),
        concat!("let mut c = Command::", "new(SPINDLE);"),
        concat!("Command::", "new(&self.spindle)"),
    ];
    for line in bare {
        assert!(bare_start(line).is_some(), "not seen: {line}");
    }
    let fine = [
        "let mut command = crate::support::spindle_command(&home);",
        concat!("let git = Command::", "new(\"git\");"),
        "Agent::spawn(&[\"acp\"], &[])",
    ];
    for line in fine {
        assert_eq!(bare_start(line), None, "{line}");
    }
}

#[test]
fn the_circle_check_sees_a_parent_calling_a_child_that_imports_it() {
    let dir = std::env::temp_dir().join(format!("spindle-arch-{}", std::process::id()));
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(dir.join("a")).unwrap();
    let parent = dir.join("a/mod.rs");
    let child = dir.join("a/b.rs");
    fs::write(
        &parent,
        "mod b;\npub struct State;\npub fn run() { b::step(); }\n",
    )
    .unwrap();
    fs::write(&child, "use super::State;\npub fn step() {}\n").unwrap();
    let module = |path: &[&str]| path.iter().map(|s| s.to_string()).collect::<ModulePath>();
    let modules: BTreeMap<ModulePath, PathBuf> = [
        (module(&["a"]), parent.clone()),
        (module(&["a", "b"]), child.clone()),
    ]
    .into_iter()
    .collect();
    let graph = file_graph(&modules, "crate::", &[]);
    let cycle = find_cycle(&graph).expect("the planted parent-child circle is seen");
    assert!(cycle.contains(&"a::b".to_string()), "{cycle:?}");
    // A path that only ends in the child's name is not a call into it.
    fs::write(
        &parent,
        "mod b;\npub struct State;\npub fn run() { other::b::step(); }\n",
    )
    .unwrap();
    let graph = file_graph(&modules, "crate::", &[]);
    assert!(find_cycle(&graph).is_none(), "{graph:?}");
    // Nor is a longer name that ends like it.
    fs::write(
        &parent,
        "mod b;\npub struct State;\npub fn run() { ab::step(); }\n",
    )
    .unwrap();
    let graph = file_graph(&modules, "crate::", &[]);
    assert!(find_cycle(&graph).is_none(), "{graph:?}");
    // A child naming its grandparent (`super::super::x`) does not name
    // its parent.
    fs::write(
        &parent,
        "mod b;\npub struct State;\npub fn run() { b::step(); }\n",
    )
    .unwrap();
    fs::write(&child, "use super::super::Other;\npub fn step() {}\n").unwrap();
    let graph = file_graph(&modules, "crate::", &[]);
    assert!(find_cycle(&graph).is_none(), "{graph:?}");
    let _ = fs::remove_dir_all(&dir);
}

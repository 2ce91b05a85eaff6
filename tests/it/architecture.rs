//! The agent's layout, checked: no import circle among the files of
//! `src/agent/`, the turn worker never reaches into the dispatcher or its
//! handlers, and the dispatcher side uses only the turn's public faces
//! (`turn/mod.rs`, `report.rs`, `client.rs`, `processes.rs`).

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

/// A module path inside the crate, such as `["agent", "turn", "runner"]`.
type ModulePath = Vec<String>;

/// Every `.rs` file under `src/agent`, by module path.
fn agent_modules() -> BTreeMap<ModulePath, PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut modules = BTreeMap::new();
    let mut stack = vec![root.join("agent")];
    while let Some(dir) = stack.pop() {
        for entry in fs::read_dir(&dir).expect("src/agent is readable") {
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
            modules.insert(module, path);
        }
    }
    modules
}

/// The code of a file without its test module (tests may reach anywhere).
fn code_of(path: &Path) -> String {
    let text = fs::read_to_string(path).expect("a source file is readable");
    match text.find("#[cfg(test)]\nmod tests") {
        Some(at) => text[..at].to_string(),
        None => text,
    }
}

fn is_ident(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// The paths that follow `prefix` in `code`: `prefix::a::b` gives `[a, b]`;
/// `prefix::{a, b::c}` gives `[a]` and `[b, c]`.
fn paths_after(code: &str, prefix: &str) -> Vec<Vec<String>> {
    let mut found = Vec::new();
    let mut rest = code;
    while let Some(at) = rest.find(prefix) {
        let before = rest[..at].chars().last();
        rest = &rest[at + prefix.len()..];
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
    let modules = agent_modules();
    let mut graph = BTreeMap::new();
    for (module, path) in &modules {
        let code = code_of(path);
        let is_dir_module = path.ends_with("mod.rs");
        let mut uses = BTreeSet::new();
        // `super` of a file is its folder's module; of a folder's mod.rs,
        // the folder above.
        let parent: ModulePath = module[..module.len() - 1].to_vec();
        for segments in paths_after(&code, "super::") {
            if let Some(target) = resolve(&modules, &parent, &segments) {
                uses.insert(target);
            }
        }
        for segments in paths_after(&code, "crate::agent::") {
            if let Some(target) = resolve(&modules, &["agent".to_string()], &segments) {
                uses.insert(target);
            }
        }
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
                    if let Some(target) = resolve(&modules, module, &segments) {
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

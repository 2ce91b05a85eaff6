//! The configurations docs/configuration.md shows for local model servers
//! are ones Spindle loads: each JSON block of that section parses, names a
//! keyless Chat Completions provider on the machine itself, and a default
//! model of it.

use std::path::Path;

#[test]
fn the_local_server_configurations_in_the_docs_load() {
    let docs = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/docs/configuration.md"
    ))
    .expect("docs/configuration.md");
    let section = docs
        .split("\n## Local model servers\n")
        .nth(1)
        .and_then(|rest| rest.split("\n## ").next())
        .expect("a section on local model servers");
    let blocks: Vec<&str> = section
        .split("```json\n")
        .skip(1)
        .filter_map(|rest| rest.split("```").next())
        .collect();
    assert_eq!(blocks.len(), 4, "llama.cpp, Ollama, vLLM, LM Studio");
    for block in blocks {
        let config = spindle::config::Config::parse(block, Path::new("docs.json"))
            .unwrap_or_else(|error| panic!("{error}\n{block}"));
        assert_eq!(config.providers.len(), 1, "{block}");
        let (name, provider) = config.providers.iter().next().unwrap();
        assert_eq!(provider.kind, spindle::config::ProviderKind::Openai);
        assert!(!provider.requires_key, "{block}");
        let base = provider.base_url.as_deref().unwrap_or_default();
        assert!(
            base.starts_with("http://127.0.0.1:") && base.ends_with("/v1"),
            "{base}"
        );
        let model = config.defaults.model.as_deref().unwrap_or_default();
        assert!(model.starts_with(&format!("{name}/")), "{model}");
    }
}

/// docs/troubleshooting.md says how many of a server's models the picker
/// keeps: the number the code keeps.
#[test]
fn the_troubleshooting_page_gives_the_model_cap() {
    let docs = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/docs/troubleshooting.md"
    ))
    .expect("docs/troubleshooting.md");
    let cap = spindle::agent::models::DISCOVERED_CAP;
    let said = format!("keeps the first {cap} chat models");
    assert!(docs.contains(&said), "the page should say {said:?}");
}

//! The default model against fake servers: a stable choice whatever
//! order a gateway lists its models in, never a model that takes no
//! tools, `doctor` on a default the server does not list, and the output
//! limit a list gives sent as the request's output cap.

use super::{
    agent_with_config, model_picker, new_session, path_str, prompt_ok, text, write_config,
};
use crate::support::fake_openai::chat_text;
use crate::support::prelude::WAIT;
use crate::support::{temp_dir, Agent, FakeServer, Reply};
use serde_json::{json, Value};
use std::path::Path;

/// What a wildcard gateway lists, in some order: search-only, embedding,
/// image and speech routes beside chat models, one of which the list
/// says takes no tools.
fn gateway_entries() -> Vec<Value> {
    vec![
        json!({"id": "gpt-4o-search-preview"}),
        json!({"id": "perplexity/sonar-pro"}),
        json!({"id": "text-embedding-3-large"}),
        json!({"id": "house-a", "supports_function_calling": false}),
        json!({"id": "house-c"}),
        json!({"id": "dall-e-3"}),
        json!({"id": "house-b"}),
        json!({"id": "tts-1"}),
    ]
}

/// `spindle acp` against `server` as the environment's provider, no
/// model named.
fn gateway_agent(server: &FakeServer) -> Agent {
    let base = server.base_url();
    let mut agent = Agent::spawn(
        &["acp"],
        &[("OPENAI_BASE_URL", &base), ("OPENAI_API_KEY", "sk-gw")],
    );
    agent.initialize();
    agent
}

/// Two gateways that list the same ids in different orders give the same
/// default, and that default takes tools: the first prompt goes to it.
#[test]
fn the_default_is_the_same_over_a_shuffled_list_and_takes_tools() {
    let mut orders = vec![gateway_entries()];
    let mut reversed = gateway_entries();
    reversed.reverse();
    orders.push(reversed);
    let mut rotated = gateway_entries();
    rotated.rotate_left(3);
    orders.push(rotated);
    for (n, entries) in orders.into_iter().enumerate() {
        let server = FakeServer::start();
        server.serve_models(json!({"object": "list", "data": entries}));
        server.push(Reply::Sse(chat_text(&["Hi."])));
        let mut agent = gateway_agent(&server);
        let ws = temp_dir(&format!("stable-default-{n}"));
        let session = new_session(&mut agent, &ws).unwrap();
        let options = &session["configOptions"];
        let model = options
            .as_array()
            .unwrap()
            .iter()
            .find(|o| o["id"] == "model")
            .unwrap();
        // house-a says it takes no tools; the search-only models chat but
        // take none; embeddings, images and speech are not offered at all.
        assert_eq!(model["currentValue"], "openai/house-b", "order {n}");
        let offered: Vec<&str> = model["options"]
            .as_array()
            .unwrap()
            .iter()
            .map(|o| o["value"].as_str().unwrap())
            .collect();
        assert!(
            offered.contains(&"openai/gpt-4o-search-preview"),
            "{offered:?}"
        );
        assert!(!offered
            .iter()
            .any(|id| id.contains("embedding") || id.contains("tts")));
        let id = session["sessionId"].as_str().unwrap().to_string();
        prompt_ok(&mut agent, &id, "hi");
        let sent = server.wait_requests(1, WAIT);
        assert_eq!(sent[0].body["model"], "house-b", "order {n}");
        assert!(sent[0].body["tools"]
            .as_array()
            .is_some_and(|t| !t.is_empty()));
    }
}

/// A gateway that lists only models that take no tools has no default:
/// the session is refused with what to do, not started on a search
/// model. Naming one still works.
#[test]
fn search_and_embedding_models_are_never_the_default() {
    let server = FakeServer::start();
    server.serve_models(json!({"data": [
        {"id": "text-embedding-3-small"},
        {"id": "gpt-4o-mini-search-preview"},
        {"id": "o3-deep-research"},
        {"model_name": "gw-ranker", "model_info": {"mode": "rerank"}},
    ]}));
    let mut agent = gateway_agent(&server);
    let error = new_session(&mut agent, &temp_dir("no-tool-default")).unwrap_err();
    let message = error["message"].as_str().unwrap_or_default();
    assert!(message.contains("takes tools"), "{error}");
    assert!(message.contains("--model"), "{error}");
    let base = server.base_url();
    let mut agent = Agent::spawn(
        &["acp", "--model", "gpt-4o-mini-search-preview"],
        &[("OPENAI_BASE_URL", &base), ("OPENAI_API_KEY", "sk-gw")],
    );
    agent.initialize();
    let (_, current, _) = model_picker(&mut agent, "named-search");
    assert_eq!(current, "openai/gpt-4o-mini-search-preview");
}

fn doctor(config: &Path, dir: &Path) -> (Option<i32>, String) {
    let out = crate::support::spindle_command(&dir.join("home"))
        .args(["doctor", "--config", path_str(config), "--db"])
        .arg(dir.join("none.db"))
        .env_remove("OPENAI_API_KEY")
        .env_remove("ANTHROPIC_API_KEY")
        .env_remove("OLLAMA_HOST")
        .env_remove("OPENAI_BASE_URL")
        .output()
        .unwrap();
    (out.status.code(), text(&out.stdout))
}

/// `doctor` fails a default model the provider's list does not have and
/// names listed ones to set instead (those that take tools, best first);
/// a listed default, or a bare name qualified as the agent does, passes.
#[test]
fn doctor_fails_a_default_model_the_server_does_not_list() {
    let server = FakeServer::start();
    server.serve_models(json!({"data": [
        {"id": "gpt-4o-search-preview"}, {"id": "zeta"}, {"id": "alpha"}, {"id": "mid"},
        {"id": "omega"},
    ]}));
    let base = server.base_url();
    let dir = temp_dir("doctor-default");
    let with_default = |model: &str| {
        write_config(
            &dir,
            &json!({"providers": {"gw": {"kind": "openai", "base_url": base, "requires_key": false}},
                    "defaults": {"model": model}}),
        )
    };
    let (code, report) = doctor(&with_default("gw/gone-model"), &dir);
    assert_eq!(code, Some(1), "{report}");
    assert!(report.contains("FAIL  default model"), "{report}");
    assert!(report.contains("\"gone-model\""), "{report}");
    assert!(
        report.contains("set defaults.model to one it lists, such as gw/alpha, gw/mid, gw/omega"),
        "{report}"
    );
    assert!(!report.contains("gw/gpt-4o-search-preview"), "{report}");
    assert!(!report.contains("Everything Spindle needs"), "{report}");

    for listed in ["gw/zeta", "zeta"] {
        let (code, report) = doctor(&with_default(listed), &dir);
        assert_eq!(code, Some(0), "{listed}: {report}");
        assert!(!report.contains("default model"), "{report}");
    }
}

/// `doctor` says how much the default model is sent before the first
/// word: the lean profile for a small window, the full one for a large
/// window or when the config chooses it.
#[test]
fn doctor_says_the_prompt_size_and_profile_of_the_default_model() {
    let server = FakeServer::start();
    server.serve_models(json!({"data": [{"id": "small"}]}));
    let base = server.base_url();
    let dir = temp_dir("doctor-prompt");
    let report_for = |window: u64, profile: Option<&str>| {
        let mut config = json!({
            "providers": {"gw": {"kind": "openai", "base_url": base, "requires_key": false}},
            "models": {"gw/small": {"context_window": window}},
            "defaults": {"model": "gw/small"}});
        if let Some(profile) = profile {
            config["profile"] = json!(profile);
        }
        doctor(&write_config(&dir, &config), &dir).1
    };
    let tokens = |report: &str, tail: &str| -> u64 {
        let line = report
            .lines()
            .find(|line| line.contains("prompt before your first word: about "))
            .unwrap_or_else(|| panic!("{report}"));
        assert!(line.ends_with(tail), "{line}");
        let after = line.split("about ").nth(1).unwrap();
        after.split(' ').next().unwrap().parse().unwrap()
    };
    let lean = tokens(&report_for(8_192, None), "tokens (profile lean, 8 tools)");
    let full = tokens(
        &report_for(128_000, None),
        "tokens (profile full, 17 tools)",
    );
    let chosen = tokens(&report_for(8_192, Some("full")), "(profile full, 17 tools)");
    assert!(
        lean > 0 && lean <= 1_200 && full <= 2_600 && lean < full,
        "{lean} {full}"
    );
    assert_eq!(chosen, full);
}

/// The output limit a list gives is the request's output cap when the
/// config sets none; the config's own limit wins over it.
#[test]
fn the_listed_output_limit_is_the_requests_output_cap() {
    let server = FakeServer::start();
    server.serve_models(json!({"data": [
        {"id": "capped", "max_input_tokens": 100000, "max_output_tokens": 12345},
        {"id": "configured", "max_output_tokens": 12345},
    ]}));
    server.push(Reply::Sse(chat_text(&["One."])));
    server.push(Reply::Sse(chat_text(&["Two."])));
    let base = server.base_url();
    let dir = temp_dir("listed-output");
    let config = write_config(
        &dir,
        &json!({"providers": {"gw": {"kind": "openai", "base_url": base, "requires_key": false}},
                "models": {"gw/configured": {"max_output_tokens": 3000}}}),
    );
    for (n, (model, cap)) in [("gw/capped", 12345), ("gw/configured", 3000)]
        .into_iter()
        .enumerate()
    {
        let mut agent = agent_with_config(&config, &["--model", model], &[]);
        let session = new_session(&mut agent, &temp_dir(&format!("listed-output-{n}"))).unwrap();
        let id = session["sessionId"].as_str().unwrap().to_string();
        prompt_ok(&mut agent, &id, "hi");
        let sent = server.wait_requests(n + 1, WAIT);
        assert_eq!(sent[n].body["max_completion_tokens"], cap, "{model}");
    }
}

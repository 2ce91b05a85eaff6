//! The client against the fake Streamable HTTP and legacy SSE servers.

use super::fake_http::{legacy, streamable, unauthorized, SESSION};
use super::{capture_logs, eventually, first_text, logged, unique};
use crate::cancel::CancelToken;
use crate::mcp::*;
use serde_json::{json, Value};
use std::thread;
use std::time::{Duration, Instant};

fn parse_one(entry: Value) -> ServerConfig {
    let (mut configs, failures) = parse_servers(&[entry]);
    assert!(failures.is_empty(), "{failures:?}");
    configs.remove(0)
}

fn call(client: &Client, tool: &str, arguments: Value) -> Result<CallResult, McpError> {
    client.call(tool, arguments, &CancelToken::new(), CALL_TIMEOUT)
}

#[test]
fn streamable_http_session_json_and_sse_answers() {
    capture_logs();
    let token = unique("http-token");
    let server = streamable();
    let config = parse_one(json!({
        "type": "http", "name": "remote", "url": format!("{}/mcp", server.base),
        "headers": [{"name": "Authorization", "value": format!("Bearer {token}")}],
    }));
    let client = Client::connect(&config, INIT_TIMEOUT).unwrap();
    assert_eq!(client.protocol_version(), "2025-06-18");
    let names: Vec<String> = client.tools().into_iter().map(|t| t.exposed_name).collect();
    assert_eq!(
        names,
        [
            "remote__echo",
            "remote__sse_ping",
            "remote__slow",
            "remote__change"
        ]
    );

    let echo = call(&client, "echo", json!({"text": "hello"})).unwrap();
    assert_eq!(first_text(&echo), "hello via json");

    // The server pings us inside the stream and waits for our answer.
    let pinged = call(&client, "sse_ping", json!({})).unwrap();
    let reply: Value = serde_json::from_str(&first_text(&pinged)).unwrap();
    assert_eq!(
        reply,
        json!({"jsonrpc": "2.0", "id": "srv-ping", "result": {}})
    );

    let unknown = call(&client, "nope", json!({})).unwrap();
    assert!(unknown.is_error);

    assert_eq!(
        first_text(&call(&client, "change", json!({})).unwrap()),
        "changed"
    );
    assert!(client.tools_changed());
    client.refresh_tools().unwrap();
    assert_eq!(client.tools().len(), 5);
    client.shutdown();

    let requests = server.requests();
    let bearer = format!("Bearer {token}");
    for request in &requests {
        assert_eq!(request.header("authorization"), Some(bearer.as_str()));
    }
    let posts: Vec<_> = requests.iter().filter(|r| r.method == "POST").collect();
    assert_eq!(posts[0].json()["method"], "initialize");
    assert_eq!(posts[0].header("mcp-session-id"), None);
    assert_eq!(posts[0].header("content-type"), Some("application/json"));
    assert_eq!(
        posts[0].header("accept"),
        Some("application/json, text/event-stream")
    );
    assert_eq!(posts[1].json()["method"], "notifications/initialized");
    for post in &posts[1..] {
        assert_eq!(post.header("mcp-session-id"), Some(SESSION), "{post:?}");
        assert_eq!(post.header("mcp-protocol-version"), Some("2025-06-18"));
    }
    let delete = requests
        .iter()
        .find(|r| r.method == "DELETE")
        .expect("DELETE");
    assert_eq!(delete.header("mcp-session-id"), Some(SESSION));

    assert!(!logged().contains(&token), "the header value was logged");
}

#[test]
fn cancelling_an_http_call_tells_the_server() {
    let server = streamable();
    let config = ServerConfig {
        name: "remote".into(),
        transport: TransportConfig::Http {
            url: format!("{}/mcp", server.base),
            headers: vec![],
        },
        env_remove: Vec::new(),
        message_cap: None,
        elicitation: Default::default(),
        tokens: None,
        trust: Default::default(),
    };
    let client = Client::connect(&config, INIT_TIMEOUT).unwrap();
    let cancel = CancelToken::new();
    {
        let cancel = cancel.clone();
        thread::spawn(move || {
            thread::sleep(Duration::from_millis(200));
            cancel.cancel();
        });
    }
    let started = Instant::now();
    let error = client
        .call("slow", json!({}), &cancel, CALL_TIMEOUT)
        .unwrap_err();
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );
    assert!(error.message.contains("cancelled"), "{error}");
    let slow_id = server
        .requests()
        .iter()
        .find(|r| r.json()["params"]["name"] == "slow")
        .map(|r| r.json()["id"].clone())
        .unwrap();
    assert!(eventually(Duration::from_secs(5), || server
        .requests()
        .iter()
        .any(|r| r.json()["method"] == "notifications/cancelled"
            && r.json()["params"]["requestId"] == slow_id)));
    // The connection is still usable.
    let echo = call(&client, "echo", json!({"text": "still"})).unwrap();
    assert_eq!(first_text(&echo), "still via json");
}

#[test]
fn an_expired_session_ends_the_connection() {
    let server = streamable();
    let config = ServerConfig {
        name: "remote".into(),
        transport: TransportConfig::Http {
            url: format!("{}/mcp", server.base),
            headers: vec![],
        },
        env_remove: Vec::new(),
        message_cap: None,
        elicitation: Default::default(),
        tokens: None,
        trust: Default::default(),
    };
    let client = Client::connect(&config, INIT_TIMEOUT).unwrap();
    assert!(client.is_alive());
    let error = call(&client, "expire", json!({})).unwrap_err();
    assert!(error.message.contains("ended the session"), "{error}");
    assert!(!client.is_alive());
    // No DELETE for a session the server already forgot.
    client.shutdown();
    assert!(server.requests().iter().all(|r| r.method != "DELETE"));
}

#[test]
fn legacy_sse_transport() {
    capture_logs();
    let token = unique("sse-token");
    let fake = legacy();
    // Headers in the object-map shape.
    let config = parse_one(json!({
        "type": "sse", "name": "old", "url": format!("{}/sse", fake.server.base),
        "headers": {"Authorization": format!("Bearer {token}")},
    }));
    let client = Client::connect(&config, INIT_TIMEOUT).unwrap();
    assert_eq!(client.protocol_version(), "2024-11-05");
    let names: Vec<String> = client.tools().into_iter().map(|t| t.exposed_name).collect();
    assert_eq!(names, ["old__echo", "old__ping_me"]);
    let echo = call(&client, "echo", json!({"text": "hi"})).unwrap();
    assert_eq!(first_text(&echo), "hi via sse");
    let pinged = call(&client, "ping_me", json!({})).unwrap();
    let reply: Value = serde_json::from_str(&first_text(&pinged)).unwrap();
    assert_eq!(
        reply,
        json!({"jsonrpc": "2.0", "id": "srv-ping", "result": {}})
    );

    let requests = fake.server.requests();
    assert_eq!(requests[0].method, "GET");
    assert_eq!(requests[0].header("accept"), Some("text/event-stream"));
    let bearer = format!("Bearer {token}");
    for request in &requests {
        assert_eq!(request.header("authorization"), Some(bearer.as_str()));
        if request.method == "POST" {
            assert_eq!(request.path, "/messages?sessionId=abc");
        }
    }

    // The stream going away is the server going away.
    assert!(client.is_alive());
    fake.drop_stream();
    assert!(eventually(Duration::from_secs(5), || !client.is_alive()));
    assert!(call(&client, "echo", json!({})).is_err());
    assert!(!logged().contains(&token), "the header value was logged");
}

#[test]
fn http_falls_back_to_the_legacy_transport() {
    let fake = legacy();
    let config = ServerConfig {
        name: "guess".into(),
        transport: TransportConfig::Http {
            url: format!("{}/sse", fake.server.base),
            headers: vec![],
        },
        env_remove: Vec::new(),
        message_cap: None,
        elicitation: Default::default(),
        tokens: None,
        trust: Default::default(),
    };
    let client = Client::connect(&config, INIT_TIMEOUT).unwrap();
    assert_eq!(client.protocol_version(), "2024-11-05");
    let echo = call(&client, "echo", json!({"text": "fell back"})).unwrap();
    assert_eq!(first_text(&echo), "fell back via sse");
}

#[test]
fn http_failures_are_reported_without_secrets() {
    capture_logs();
    let token = unique("denied-token");
    let server = unauthorized();
    let config = ServerConfig {
        name: "locked".into(),
        transport: TransportConfig::Http {
            url: format!("{}/mcp", server.base),
            headers: vec![("Authorization".into(), format!("Bearer {token}"))],
        },
        env_remove: Vec::new(),
        message_cap: None,
        elicitation: Default::default(),
        tokens: None,
        trust: Default::default(),
    };
    let error = Client::connect(&config, INIT_TIMEOUT).err().unwrap();
    assert!(error.message.contains("HTTP 401"), "{error}");
    assert!(error.message.contains("authorization"), "{error}");
    assert!(!error.message.contains(&token));

    // Nothing listens on port 9 of the loopback interface.
    let config = ServerConfig {
        name: "nowhere".into(),
        transport: TransportConfig::Sse {
            url: "http://127.0.0.1:9/sse".into(),
            headers: vec![("Authorization".into(), format!("Bearer {token}"))],
        },
        env_remove: Vec::new(),
        message_cap: None,
        elicitation: Default::default(),
        tokens: None,
        trust: Default::default(),
    };
    let error = Client::connect(&config, INIT_TIMEOUT).err().unwrap();
    assert!(
        error.message.contains("cannot reach MCP server `nowhere`"),
        "{error}"
    );
    assert!(!logged().contains(&token), "the header value was logged");
}

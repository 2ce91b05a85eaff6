//! The client against the fake stdio server.

use super::fake_stdio::{config, server_args, server_env_name};
use super::{capture_logs, eventually, first_text, logged, process_gone, unique};
use crate::cancel::CancelToken;
use crate::mcp::*;
use serde_json::{json, Value};
use std::thread;
use std::time::{Duration, Instant};

fn connect(env: &[(&str, &str)]) -> Client {
    Client::connect(&config("fake", env), INIT_TIMEOUT).expect("the fake server starts")
}

fn call(client: &Client, tool: &str, arguments: Value) -> Result<CallResult, McpError> {
    client.call(tool, arguments, &CancelToken::new(), CALL_TIMEOUT)
}

#[test]
fn a_cursor_past_its_cap_ends_the_listing_at_the_page_before() {
    let client = connect(&[("FAKE_CURSOR_BYTES", "20000")]);
    let names: Vec<String> = client.tools().into_iter().map(|t| t.name).collect();
    assert_eq!(names, ["echo", "image", "structured"]);
    // Within the cap, the cursor is followed.
    let client = connect(&[("FAKE_CURSOR_BYTES", "10000")]);
    assert_eq!(client.tools().len(), 12);
}

#[test]
fn handshake_lists_every_page_and_reads_annotations() {
    let client = connect(&[]);
    assert_eq!(client.protocol_version(), PROTOCOL_VERSION);
    assert_eq!(client.instructions(), Some("Use the fake tools."));
    let tools = client.tools();
    let names: Vec<&str> = tools.iter().map(|t| t.exposed_name.as_str()).collect();
    assert_eq!(tools.len(), 12, "{names:?}");
    assert_eq!(names[0], "fake__echo");
    assert!(
        names.contains(&"fake__spawn_child"),
        "the second page: {names:?}"
    );
    let echo = &tools[0];
    assert_eq!((echo.server.as_str(), echo.name.as_str()), ("fake", "echo"));
    assert_eq!(echo.description, "Echoes its text");
    assert!(echo.read_only && !echo.destructive);
    assert_eq!(echo.input_schema["properties"]["text"]["type"], "string");
    let crash = tools.iter().find(|t| t.name == "crash").unwrap();
    assert!(crash.destructive && !crash.read_only);
    assert_eq!(
        crash.input_schema,
        json!({"type": "object", "properties": {}})
    );
    assert!(client.is_alive());
}

#[test]
fn calls_return_text_images_structured_content_and_errors() {
    let client = connect(&[]);
    let echo = call(&client, "echo", json!({"text": "hi\nthere"})).unwrap();
    assert_eq!(first_text(&echo), "hi\nthere");
    assert!(!echo.is_error);

    let image = call(&client, "image", Value::Null).unwrap();
    assert_eq!(image.content.len(), 2);
    assert_eq!(image.content[1]["type"], "image");
    assert_eq!(image.content[1]["mimeType"], "image/png");
    assert_eq!(image.text(), "a picture\n[image: image/png, 1 KB]");

    let structured = call(&client, "structured", json!({})).unwrap();
    assert_eq!(structured.structured, Some(json!({"answer": 42})));
    assert_eq!(structured.text(), "{\"answer\":42}");

    let failed = call(&client, "fail", json!({})).unwrap();
    assert!(failed.is_error);
    assert_eq!(first_text(&failed), "it failed");

    // A JSON-RPC error becomes a failed result the model can read.
    let unknown = call(&client, "nope", json!({})).unwrap();
    assert!(unknown.is_error);
    assert_eq!(first_text(&unknown), "MCP error -32602: Unknown tool: nope");
}

#[test]
fn calls_from_several_threads_get_their_own_answers() {
    let client = connect(&[]);
    thread::scope(|scope| {
        for n in 0..8 {
            let client = &client;
            scope.spawn(move || {
                let text = format!("message {n}");
                let result = call(client, "echo", json!({ "text": text })).unwrap();
                assert_eq!(first_text(&result), text);
            });
        }
    });
}

#[test]
fn server_requests_are_answered() {
    let client = connect(&[]);
    let result = call(&client, "ping_me", json!({})).unwrap();
    let replies: Value = serde_json::from_str(&first_text(&result)).unwrap();
    assert_eq!(
        replies[0],
        json!({"jsonrpc": "2.0", "id": "srv-1", "result": {}})
    );
    assert_eq!(replies[1]["id"], "srv-2");
    assert_eq!(replies[1]["error"]["code"], -32601);
}

#[test]
fn list_changed_leads_to_a_refresh() {
    let client = connect(&[]);
    assert!(!client.tools_changed());
    assert_eq!(
        first_text(&call(&client, "change", json!({})).unwrap()),
        "changed"
    );
    // The notification came before the answer, on the same stream.
    assert!(client.tools_changed());
    client.refresh_tools().unwrap();
    assert!(!client.tools_changed());
    let tools = client.tools();
    assert_eq!(tools.len(), 13);
    assert!(tools.iter().any(|t| t.exposed_name == "fake__added"));
}

#[test]
fn env_is_added_to_the_inherited_environment() {
    // The object-map shape of older clients, parsed like a real entry.
    let entry = json!({
        "name": "fake",
        "command": std::env::current_exe().unwrap().to_string_lossy(),
        "args": server_args(),
        "env": {server_env_name(): "1", "FAKE_CUSTOM": "custom value"},
    });
    let (configs, failures) = parse_servers(&[entry]);
    assert!(failures.is_empty(), "{failures:?}");
    let client = Client::connect(&configs[0], INIT_TIMEOUT).unwrap();
    let reported: Value =
        serde_json::from_str(&first_text(&call(&client, "env", json!({})).unwrap())).unwrap();
    assert_eq!(reported["custom"], "custom value");
    let path = std::env::var("PATH").unwrap();
    assert_eq!(reported["path"], path.as_str());
    assert!(!path.is_empty());
}

#[test]
fn protocol_versions_are_negotiated() {
    let old = connect(&[("FAKE_VERSION", "2024-11-05")]);
    assert_eq!(old.protocol_version(), "2024-11-05");
    assert_eq!(old.tools().len(), 12);

    let started = Instant::now();
    let refused = Client::connect(
        &config("fake", &[("FAKE_VERSION", "1999-01-01")]),
        INIT_TIMEOUT,
    );
    let message = refused
        .err()
        .expect("an unknown version is refused")
        .message;
    assert!(message.contains("`1999-01-01`"), "{message}");
    assert!(started.elapsed() < Duration::from_secs(10));
}

#[test]
fn a_bad_command_fails_to_start() {
    let config = ServerConfig {
        name: "ghost".into(),
        transport: TransportConfig::Stdio {
            command: "/nonexistent/spindle-mcp-server".into(),
            args: vec![],
            env: vec![],
        },
        env_remove: Vec::new(),
        message_cap: None,
        elicitation: Default::default(),
        tokens: None,
        trust: Default::default(),
    };
    let error = Client::connect(&config, INIT_TIMEOUT)
        .err()
        .expect("no such file");
    assert!(
        error.message.contains("cannot start MCP server `ghost`"),
        "{error}"
    );
}

#[test]
fn a_slow_initialize_times_out() {
    let config = config("sleepy", &[("FAKE_DELAY_MS", "5000")]);
    let started = Instant::now();
    let error = Client::connect(&config, Duration::from_millis(300))
        .err()
        .expect("too slow");
    assert!(
        error.message.contains("did not answer initialize"),
        "{error}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "{:?}",
        started.elapsed()
    );
}

#[test]
#[cfg_attr(windows, ignore = "sh command lines")]
fn shutdown_leaves_no_process_behind() {
    let client = connect(&[]);
    let pid = client.pid().expect("a stdio server has a pid");
    let grandchild: u32 = first_text(&call(&client, "spawn_child", json!({})).unwrap())
        .parse()
        .unwrap();
    assert!(!process_gone(pid) && !process_gone(grandchild));
    let started = Instant::now();
    client.shutdown();
    let took = started.elapsed();
    assert!(took < Duration::from_secs(2), "shutdown took {took:?}");
    // The server itself was reaped: not even a zombie is left.
    assert!(std::fs::metadata(format!("/proc/{pid}")).is_err());
    assert!(eventually(Duration::from_secs(3), || process_gone(
        grandchild
    )));
    assert!(!client.is_alive());
    let error = call(&client, "echo", json!({})).unwrap_err();
    assert!(error.message.contains("shut down"), "{error}");
    client.shutdown();

    // Dropping a client shuts it down too.
    let client = connect(&[]);
    let pid = client.pid().unwrap();
    drop(client);
    assert!(std::fs::metadata(format!("/proc/{pid}")).is_err());
}

#[test]
fn cancel_and_timeout_return_promptly() {
    let client = connect(&[]);
    let cancel = CancelToken::new();
    let canceller = {
        let cancel = cancel.clone();
        thread::spawn(move || {
            thread::sleep(Duration::from_millis(200));
            cancel.cancel();
        })
    };
    let started = Instant::now();
    let error = client
        .call("slow", json!({"ms": 30000}), &cancel, CALL_TIMEOUT)
        .unwrap_err();
    let took = started.elapsed();
    canceller.join().unwrap();
    assert!(error.message.contains("cancelled"), "{error}");
    assert!(took < Duration::from_secs(2), "cancel took {took:?}");
    // An already cancelled token sends nothing at all.
    assert!(client
        .call("echo", json!({}), &cancel, CALL_TIMEOUT)
        .is_err());

    let other = connect(&[]);
    let started = Instant::now();
    let error = other
        .call(
            "slow",
            json!({"ms": 30000}),
            &CancelToken::new(),
            Duration::from_millis(300),
        )
        .unwrap_err();
    assert!(
        error.message.contains("did not answer tools/call"),
        "{error}"
    );
    assert!(started.elapsed() < Duration::from_secs(2));
    assert!(other.is_alive(), "a timeout does not kill the server");
}

#[test]
fn a_crash_fails_the_call_and_marks_the_client_dead() {
    let client = connect(&[]);
    let started = Instant::now();
    let error = call(&client, "crash", json!({})).unwrap_err();
    assert!(error.message.contains("closed its output"), "{error}");
    assert!(started.elapsed() < Duration::from_secs(5));
    assert!(!client.is_alive());
}

#[test]
fn stderr_and_banners_are_logged_with_secrets_redacted() {
    capture_logs();
    let secret = unique("stdio-secret");
    let client = connect(&[("FAKE_SECRET", &secret)]);
    assert!(
        eventually(Duration::from_secs(5), || logged()
            .contains("MCP server `fake` stderr: token=*** loaded")),
        "{}",
        logged()
    );
    assert!(logged().contains("this line is not JSON"));
    client.shutdown();
    assert!(!logged().contains(&secret), "the secret was logged");
}

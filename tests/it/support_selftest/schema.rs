//! The schema validator: valid messages pass, and invalid ones fail with a
//! report naming the definition and the path of each violation.

use serde_json::{json, Value};

use crate::support::validate_agent_message;

fn expect_invalid(message: &Value, method: Option<&str>, needles: &[&str]) -> String {
    let error = match validate_agent_message(message, method) {
        Ok(()) => panic!("expected {message} to be rejected"),
        Err(error) => error,
    };
    for needle in needles {
        assert!(
            error.contains(needle),
            "the error should mention {needle:?}; it is:\n{error}"
        );
    }
    error
}

fn expect_valid(message: &Value, method: Option<&str>) {
    if let Err(error) = validate_agent_message(message, method) {
        panic!("expected a valid message, got:\n{error}");
    }
}

fn initialize_response() -> Value {
    json!({
        "jsonrpc": "2.0",
        "id": 1,
        "result": {
            "protocolVersion": 1,
            "agentCapabilities": {
                "loadSession": true,
                "promptCapabilities": {"image": false, "audio": false, "embeddedContext": true},
                "mcpCapabilities": {"http": true, "sse": false},
                "sessionCapabilities": {"list": {}},
            },
            "authMethods": [],
            "agentInfo": {"name": "spindle", "version": "0.1.0"},
        }
    })
}

pub(super) fn message_chunk(text: &str) -> Value {
    json!({
        "jsonrpc": "2.0",
        "method": "session/update",
        "params": {
            "sessionId": "sess_1",
            "update": {
                "sessionUpdate": "agent_message_chunk",
                "content": {"type": "text", "text": text},
            }
        }
    })
}

#[test]
fn accepts_initialize_response() {
    expect_valid(&initialize_response(), Some("initialize"));
    // Without the method only the envelope is checked.
    expect_valid(&initialize_response(), None);
}

#[test]
fn rejects_initialize_response_without_protocol_version() {
    let mut message = initialize_response();
    message["result"]
        .as_object_mut()
        .unwrap()
        .remove("protocolVersion");
    expect_invalid(
        &message,
        Some("initialize"),
        &["$defs/InitializeResponse", "/result", "protocolVersion"],
    );
}

#[test]
fn rejects_wrong_types_with_their_path() {
    let mut message = initialize_response();
    message["result"]["protocolVersion"] = json!("1");
    expect_invalid(
        &message,
        Some("initialize"),
        &["$defs/InitializeResponse", "/result/protocolVersion"],
    );

    let mut message = initialize_response();
    message["result"]["agentCapabilities"]["loadSession"] = json!("yes");
    expect_invalid(
        &message,
        Some("initialize"),
        &["/result/agentCapabilities/loadSession"],
    );
}

#[test]
fn checks_prompt_response_by_method() {
    let good = json!({"jsonrpc": "2.0", "id": 7, "result": {"stopReason": "end_turn"}});
    expect_valid(&good, Some("session/prompt"));
    let bad = json!({"jsonrpc": "2.0", "id": 7, "result": {"stopReason": "finished"}});
    expect_invalid(
        &bad,
        Some("session/prompt"),
        &["$defs/PromptResponse", "/result/stopReason"],
    );
    // The same result is fine for a method whose response is free-form.
    expect_valid(&bad, Some("_spindle/anything"));
}

#[test]
fn accepts_session_update_chunk() {
    expect_valid(&message_chunk("Hello"), None);
    let thought = json!({
        "jsonrpc": "2.0",
        "method": "session/update",
        "params": {
            "sessionId": "sess_1",
            "update": {
                "sessionUpdate": "tool_call",
                "toolCallId": "call_1",
                "title": "Read src/main.rs",
                "kind": "read",
                "status": "pending",
            }
        }
    });
    expect_valid(&thought, None);
}

#[test]
fn rejects_bad_session_updates() {
    let mut unknown_kind = message_chunk("x");
    unknown_kind["params"]["update"]["sessionUpdate"] = json!("agent_message_delta");
    expect_invalid(
        &unknown_kind,
        None,
        &["$defs/SessionNotification", "/params/update"],
    );

    // A chunk whose content block lacks its text: the report should point at
    // the content, not only say that no alternative of the union matched.
    let mut no_text = message_chunk("x");
    no_text["params"]["update"]["content"]
        .as_object_mut()
        .unwrap()
        .remove("text");
    let error = expect_invalid(
        &no_text,
        None,
        &["$defs/SessionNotification", "/params/update/content"],
    );
    assert!(error.contains("text"), "{error}");

    let mut no_session = message_chunk("x");
    no_session["params"]
        .as_object_mut()
        .unwrap()
        .remove("sessionId");
    expect_invalid(&no_session, None, &["sessionId", "(schema:"]);
}

#[test]
fn requires_jsonrpc_2() {
    let mut missing = message_chunk("x");
    missing.as_object_mut().unwrap().remove("jsonrpc");
    expect_invalid(&missing, None, &["jsonrpc"]);
    let mut wrong = initialize_response();
    wrong["jsonrpc"] = json!("1.0");
    expect_invalid(&wrong, Some("initialize"), &["jsonrpc", "1.0"]);
}

#[test]
fn accepts_error_responses_including_null_id() {
    let parse_error = json!({
        "jsonrpc": "2.0",
        "id": null,
        "error": {"code": -32700, "message": "Parse error"}
    });
    expect_valid(&parse_error, None);
    let not_found = json!({
        "jsonrpc": "2.0",
        "id": "abc",
        "error": {"code": -32601, "message": "Method not found", "data": {"method": "x"}}
    });
    expect_valid(&not_found, Some("session/prompt"));
}

#[test]
fn rejects_malformed_responses() {
    let no_message = json!({"jsonrpc": "2.0", "id": 3, "error": {"code": -32603}});
    expect_invalid(&no_message, None, &["message"]);
    let fractional_code =
        json!({"jsonrpc": "2.0", "id": 3, "error": {"code": 1.5, "message": "x"}});
    expect_invalid(&fractional_code, None, &["/error/code"]);
    let both =
        json!({"jsonrpc": "2.0", "id": 3, "result": {}, "error": {"code": 1, "message": "x"}});
    expect_invalid(&both, None, &["both"]);
    let neither = json!({"jsonrpc": "2.0", "id": 3});
    expect_invalid(&neither, None, &["\"result\" or \"error\""]);
    let fractional_id = json!({"jsonrpc": "2.0", "id": 1.5, "result": {}});
    expect_invalid(&fractional_id, None, &["$defs/RequestId", "/id"]);
    let bad_request_id = json!({"jsonrpc": "2.0", "id": {"n": 1}, "method": "_x", "params": {}});
    expect_invalid(&bad_request_id, None, &["$defs/RequestId", "/id"]);
    let not_an_object = json!([1, 2]);
    expect_invalid(&not_an_object, None, &["object"]);
}

#[test]
fn checks_requests_from_the_agent() {
    let permission = json!({
        "jsonrpc": "2.0",
        "id": 0,
        "method": "session/request_permission",
        "params": {
            "sessionId": "sess_1",
            "toolCall": {"toolCallId": "call_1", "title": "Run cargo test", "kind": "execute"},
            "options": [
                {"optionId": "allow", "name": "Allow once", "kind": "allow_once"},
                {"optionId": "reject", "name": "Reject", "kind": "reject_once"},
            ]
        }
    });
    expect_valid(&permission, None);

    let mut no_options = permission.clone();
    no_options["params"]
        .as_object_mut()
        .unwrap()
        .remove("options");
    expect_invalid(
        &no_options,
        None,
        &["$defs/RequestPermissionRequest", "/params", "options"],
    );

    let mut bad_kind = permission.clone();
    bad_kind["params"]["options"][1]["kind"] = json!("deny");
    expect_invalid(&bad_kind, None, &["/params/options/1/kind"]);
}

#[test]
fn rejects_methods_the_agent_must_not_send() {
    // session/cancel is handled by the agent, never sent by it.
    let cancel =
        json!({"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": "s"}});
    expect_invalid(&cancel, None, &["session/cancel", "x-side"]);
    // A typo in a method name is not silently accepted as an extension.
    let typo = json!({"jsonrpc": "2.0", "method": "session/updates", "params": {}});
    expect_invalid(&typo, None, &["session/updates"]);
    // Extension methods are free-form.
    let extension = json!({"jsonrpc": "2.0", "method": "_spindle/progress", "params": {"any": 1}});
    expect_valid(&extension, None);
    let extension_request =
        json!({"jsonrpc": "2.0", "id": 4, "method": "_spindle/ask", "params": [1]});
    expect_valid(&extension_request, None);
}

#[test]
fn unstable_updates_pass_only_the_unstable_edition() {
    let child = json!({
        "jsonrpc": "2.0",
        "method": "session/update",
        "params": {"sessionId": "s", "update": {
            "sessionUpdate": "subagent_update", "sessionId": "child", "title": "Explore"}},
    });
    expect_invalid(
        &child,
        None,
        &["\"subagent_update\" is not one of the known tags"],
    );
    crate::support::schema::with_edition(true, || expect_valid(&child, None));
    // The unstable edition still holds the update to its shape.
    let anonymous = json!({
        "jsonrpc": "2.0",
        "method": "session/update",
        "params": {"sessionId": "s", "update": {"sessionUpdate": "subagent_update", "title": "Explore"}},
    });
    crate::support::schema::with_edition(true, || {
        expect_invalid(&anonymous, None, &["sessionId"]);
    });
}

#[test]
fn notices_are_stable_and_held_to_their_shape() {
    let notice = json!({
        "jsonrpc": "2.0",
        "method": "session/update",
        "params": {"sessionId": "s", "update": {
            "sessionUpdate": "notice", "severity": "info", "title": "Sandbox on"}},
    });
    expect_valid(&notice, None);
    let untitled = json!({
        "jsonrpc": "2.0",
        "method": "session/update",
        "params": {"sessionId": "s", "update": {"sessionUpdate": "notice", "severity": "info"}},
    });
    expect_invalid(&untitled, None, &["title"]);
}

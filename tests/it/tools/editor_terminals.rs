//! The editor's terminals (`terminal/*`): run_command in the editor's
//! terminal, a failing `terminal/create`, and terminals killed and
//! released on a cancel, after a cancel, and on a timeout.

use super::{call, calls, position, say, script, Space, WAIT};
use crate::support::{run_prompt, Answer, Exchange};
use serde_json::{json, Value};
use std::collections::HashMap;
use std::fs;
use std::time::{Duration, Instant};

/// A fake terminal host: each command line maps to (exit code, output).
/// Records nothing itself; the turn keeps the requests.
fn terminals(results: Vec<(&'static str, i64, &'static str)>) -> impl FnMut(&Value) -> Answer {
    let mut created: HashMap<String, &'static str> = HashMap::new();
    let mut next = 0;
    move |request: &Value| {
        let params = &request["params"];
        let terminal = params["terminalId"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        match request["method"].as_str().unwrap_or_default() {
            "terminal/create" => {
                // The command is `env -u … sh -c LINE`: the line is last.
                let line = params["args"]
                    .as_array()
                    .and_then(|args| args.last())
                    .and_then(Value::as_str)
                    .unwrap_or_default();
                let Some(&(line, _, _)) = results.iter().find(|(l, _, _)| *l == line) else {
                    return Answer::error(-32603, "cannot start a shell");
                };
                next += 1;
                let id = format!("term-{next}");
                created.insert(id.clone(), line);
                Answer::Result(json!({"terminalId": id}))
            }
            "terminal/wait_for_exit" => {
                let line = created[&terminal];
                let (_, code, _) = results.iter().find(|(l, _, _)| *l == line).unwrap();
                Answer::Result(json!({"exitCode": code, "signal": null}))
            }
            "terminal/output" => {
                let line = created[&terminal];
                let (_, code, output) = results.iter().find(|(l, _, _)| *l == line).unwrap();
                Answer::Result(json!({
                    "output": output,
                    "truncated": false,
                    "exitStatus": {"exitCode": code, "signal": null},
                }))
            }
            "terminal/release" | "terminal/kill" => Answer::Result(json!({})),
            _ => panic!("unexpected request: {request}"),
        }
    }
}

#[test]
#[cfg_attr(windows, ignore = "sh command lines")]
fn run_command_uses_the_editors_terminal() {
    let space = Space::new("tools-term");
    fs::create_dir_all(space.path("sub")).unwrap();
    let (mut agent, session) = space.start(
        &script(vec![
            calls(vec![
                call(
                    "x1",
                    "run_command",
                    json!({"command": "touch ran-locally", "cwd": "sub"}),
                ),
                call("x2", "run_command", json!({"command": "make lint"})),
            ]),
            say("Done."),
        ]),
        &["--permissions", "yolo"],
        json!({"terminal": true}),
    );
    let turn = run_prompt(
        &mut agent,
        &session,
        "go",
        WAIT,
        terminals(vec![
            ("touch ran-locally", 0, "all good\n"),
            ("make lint", 2, "lint failed\n"),
        ]),
    );
    assert_eq!(turn.stop_reason(), "end_turn", "{}", turn.dump());
    turn.assert_every_tool_call_finished();
    assert!(
        !space.exists("sub/ran-locally"),
        "the command ran locally instead of in the editor's terminal"
    );

    let creates = turn.requests("terminal/create");
    assert_eq!(creates.len(), 2, "{}", turn.dump());
    let params = &creates[0]["params"];
    assert_eq!(params["sessionId"], session);
    // Started through `env`, which removes the provider credentials in the
    // terminal's own process.
    assert_eq!(params["command"], "env");
    let args: Vec<&str> = params["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap())
        .collect();
    assert!(
        args.windows(2).any(|w| w == ["-u", "OPENAI_API_KEY"]),
        "{args:?}"
    );
    assert_eq!(args[args.len() - 3..], ["sh", "-c", "touch ran-locally"]);
    // The output is kept as text beside the terminal block (a replay
    // outlives the terminal).
    let kept = turn.final_content("x2");
    assert_eq!(kept[0]["type"], "terminal");
    assert!(
        kept[1]["content"]["text"]
            .as_str()
            .unwrap()
            .contains("lint failed"),
        "{kept:?}"
    );
    // Nobody sits at the editor's terminal either.
    assert!(
        args.contains(&"PAGER=cat") && args.contains(&"GIT_EDITOR=true"),
        "{args:?}"
    );
    assert_eq!(params["cwd"], space.abs("sub"));
    assert_eq!(params["outputByteLimit"], 30_000);
    assert_eq!(
        creates[1]["params"]["cwd"],
        json!(space.ws),
        "{}",
        turn.dump()
    );

    // Per terminal: create, wait, output, release; no kill.
    let methods: Vec<(String, String)> = turn
        .all_requests()
        .iter()
        .map(|r| {
            (
                r["method"].as_str().unwrap_or_default().to_string(),
                r["params"]["terminalId"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
            )
        })
        .collect();
    let expected: Vec<(String, String)> = [
        ("terminal/create", ""),
        ("terminal/wait_for_exit", "term-1"),
        ("terminal/output", "term-1"),
        ("terminal/release", "term-1"),
        ("terminal/create", ""),
        ("terminal/wait_for_exit", "term-2"),
        ("terminal/output", "term-2"),
        ("terminal/release", "term-2"),
    ]
    .iter()
    .map(|(m, t)| (m.to_string(), t.to_string()))
    .collect();
    assert_eq!(methods, expected, "{}", turn.dump());

    // The editor was told to show the terminal while the command ran, and
    // the final update keeps it.
    let shown = turn.updates_of("x1").iter().any(|u| {
        u["sessionUpdate"] == "tool_call_update"
            && u.get("status").is_none_or(|s| s == "in_progress")
            && u["content"]
                .as_array()
                .is_some_and(|c| c.contains(&json!({"type": "terminal", "terminalId": "term-1"})))
    });
    assert!(shown, "no terminal block before the end\n{}", turn.dump());
    assert_eq!(turn.final_status("x1"), "completed");
    assert!(turn
        .final_content("x1")
        .contains(&json!({"type": "terminal", "terminalId": "term-1"})));
    assert!(turn.final_text("x1").contains("Exit code: 0"));
    assert_eq!(turn.final_status("x2"), "failed");
    assert!(turn.final_text("x2").contains("Exit code: 2"));
}

#[test]
fn a_terminal_create_error_fails_the_call() {
    let space = Space::new("tools-term-error");
    let (mut agent, session) = space.start(
        &script(vec![
            calls(vec![
                call("x1", "run_command", json!({"command": "no such terminal"})),
                call("x2", "run_command", json!({"command": "echo fine"})),
            ]),
            say("Went on."),
        ]),
        &["--permissions", "yolo"],
        json!({"terminal": true}),
    );
    let turn = run_prompt(
        &mut agent,
        &session,
        "go",
        WAIT,
        terminals(vec![("echo fine", 0, "fine\n")]),
    );
    assert_eq!(turn.stop_reason(), "end_turn", "{}", turn.dump());
    assert_eq!(turn.text(), "Went on.");
    turn.assert_every_tool_call_finished();
    assert_eq!(turn.final_status("x1"), "failed");
    assert!(
        turn.final_text("x1").contains("cannot start a shell"),
        "{}",
        turn.dump()
    );
    assert_eq!(turn.final_status("x2"), "completed");
    // Only the terminal that exists is released.
    let released: Vec<&Value> = turn
        .requests("terminal/release")
        .iter()
        .map(|r| &r["params"]["terminalId"])
        .collect();
    assert_eq!(released, [&json!("term-1")]);
}

#[test]
fn cancel_while_an_editor_terminal_runs_kills_and_releases_it() {
    let space = Space::new("tools-term-cancel");
    let (mut agent, session) = space.start(
        &script(vec![calls(vec![
            call("x1", "run_command", json!({"command": "sleep 100"})),
            call("x2", "run_command", json!({"command": "echo after"})),
        ])]),
        &["--permissions", "yolo"],
        json!({"terminal": true}),
    );
    let mut answer = |request: &Value| match request["method"].as_str().unwrap_or_default() {
        "terminal/create" => Answer::Result(json!({"terminalId": "term-c"})),
        // The command never exits by itself.
        "terminal/wait_for_exit" => Answer::Ignore,
        "terminal/kill" | "terminal/release" => Answer::Result(json!({})),
        "terminal/output" => Answer::Result(json!({"output": "partial\n", "truncated": false})),
        _ => panic!("unexpected request: {request}"),
    };
    let mut exchange = Exchange::prompt(&mut agent, &session, "go");
    let waiting = exchange.until(&mut agent, WAIT, &mut answer, &mut |ex: &Exchange| {
        !ex.requests("terminal/wait_for_exit").is_empty()
    });
    assert!(waiting, "the prompt ended before waiting for the terminal");
    let cancelled_at = Instant::now();
    agent.notify("session/cancel", json!({"sessionId": session}));
    let turn = exchange.finish(&mut agent, WAIT, &mut answer);
    eprintln!("cancel answered after {:?}", cancelled_at.elapsed());
    assert_eq!(turn.stop_reason(), "cancelled", "{}", turn.dump());
    assert!(cancelled_at.elapsed() < Duration::from_secs(5));
    turn.assert_every_tool_call_finished();
    assert_eq!(turn.final_status("x1"), "failed");
    assert!(!turn.tool_call_ids().contains(&"x2".to_string()));
    let kill = position(&turn, |m| m["method"] == "terminal/kill");
    let release = position(&turn, |m| m["method"] == "terminal/release");
    assert!(kill < release, "{}", turn.dump());
    for method in ["terminal/kill", "terminal/release"] {
        let requests = turn.requests(method);
        assert_eq!(requests.len(), 1, "{method}\n{}", turn.dump());
        assert_eq!(requests[0]["params"]["terminalId"], "term-c");
    }
    // Nothing more after the answer.
    if let Some(late) = agent.recv(Duration::from_millis(300)) {
        panic!("a message after the cancelled answer: {late}");
    }
}

#[test]
fn a_terminal_created_after_a_cancel_is_still_released() {
    let space = Space::new("tools-term-late");
    let (mut agent, session) = space.start(
        &script(vec![calls(vec![call(
            "x1",
            "run_command",
            json!({"command": "sleep 100"}),
        )])]),
        &["--permissions", "yolo"],
        json!({"terminal": true}),
    );
    // The editor is slow to create the terminal: the user cancels first.
    let mut answer = |request: &Value| match request["method"].as_str().unwrap_or_default() {
        "terminal/create" => Answer::Ignore,
        "terminal/kill" | "terminal/release" => Answer::Result(json!({})),
        "terminal/output" => Answer::Result(json!({"output": "", "truncated": false})),
        "terminal/wait_for_exit" => Answer::Ignore,
        _ => panic!("unexpected request: {request}"),
    };
    let mut exchange = Exchange::prompt(&mut agent, &session, "go");
    let creating = exchange.until(&mut agent, WAIT, &mut answer, &mut |ex: &Exchange| {
        !ex.requests("terminal/create").is_empty()
    });
    assert!(creating, "the prompt ended before creating a terminal");
    let create_id = exchange.requests("terminal/create")[0]["id"].clone();
    agent.notify("session/cancel", json!({"sessionId": session}));
    // The editor's answer comes late: after the cancelled answer if the
    // agent gives that at once, or after half a second if the agent waits
    // for it. Either way the terminal exists now.
    let asked_at = Instant::now();
    exchange.until(&mut agent, WAIT, &mut answer, &mut |_: &Exchange| {
        asked_at.elapsed() > Duration::from_millis(500)
    });
    agent.send(json!({"jsonrpc": "2.0", "id": create_id, "result": {"terminalId": "term-late"}}));
    let turn = exchange.finish(&mut agent, WAIT, &mut answer);
    assert_eq!(turn.stop_reason(), "cancelled", "{}", turn.dump());
    turn.assert_every_tool_call_finished();

    // ACP: every terminal the agent created must be released, so the
    // editor can stop the command and free it.
    let is_release =
        |m: &Value| m["method"] == "terminal/release" && m["params"]["terminalId"] == "term-late";
    let mut released = turn.messages.iter().any(is_release);
    let deadline = Instant::now() + Duration::from_secs(3);
    while !released && Instant::now() < deadline {
        let Some(message) = agent.recv(Duration::from_millis(100)) else {
            continue;
        };
        if let Some(id) = message
            .get("id")
            .filter(|_| message.get("method").is_some())
        {
            agent.send(json!({"jsonrpc": "2.0", "id": id, "result": {}}));
        }
        released = is_release(&message);
    }
    assert!(
        released,
        "terminal term-late, created for the cancelled call, was never released\n{}",
        turn.dump()
    );
}

#[test]
fn a_terminal_that_outlives_its_timeout_is_killed_and_released() {
    let space = Space::new("tools-term-timeout");
    let (mut agent, session) = space.start(
        &script(vec![
            calls(vec![call(
                "x1",
                "run_command",
                json!({"command": "sleep 100", "timeout_seconds": 1}),
            )]),
            say("Timed out."),
        ]),
        &["--permissions", "yolo"],
        json!({"terminal": true}),
    );
    let started = Instant::now();
    let turn = run_prompt(
        &mut agent,
        &session,
        "go",
        WAIT,
        |request: &Value| match request["method"].as_str().unwrap_or_default() {
            "terminal/create" => Answer::Result(json!({"terminalId": "term-t"})),
            "terminal/wait_for_exit" => Answer::Ignore,
            "terminal/kill" | "terminal/release" => Answer::Result(json!({})),
            "terminal/output" => Answer::Result(json!({"output": "zzz\n", "truncated": false})),
            _ => panic!("unexpected request: {request}"),
        },
    );
    assert_eq!(turn.stop_reason(), "end_turn", "{}", turn.dump());
    assert!(started.elapsed() < Duration::from_secs(10));
    turn.assert_every_tool_call_finished();
    assert_eq!(turn.final_status("x1"), "failed");
    assert!(
        turn.final_text("x1").contains("Timed out after 1 s"),
        "{}",
        turn.dump()
    );
    let methods: Vec<&str> = turn
        .all_requests()
        .iter()
        .map(|r| r["method"].as_str().unwrap_or_default())
        .collect();
    assert_eq!(
        methods,
        [
            "terminal/create",
            "terminal/wait_for_exit",
            "terminal/kill",
            "terminal/output",
            "terminal/release"
        ]
    );
}

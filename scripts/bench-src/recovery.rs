//! Figure 15: how much of the corpus of model slips (`tests/data/corpus`)
//! Spindle recovers, and how many of its controls it refuses: each
//! `edit_file` case's edits are located in process by the library's own
//! matcher, the one the tool uses, and each call whose name or arguments
//! slipped goes through the library's own repair. It also prints the
//! size of what the model is sent before the user's first word, in each
//! profile. Every case must end as it expects (a
//! slip forgiven, a control refused); the rate says how many slips the
//! corpus holds that are forgiven. The integration test
//! `tests/it/corpus.rs` runs the same cases through the binary on every
//! wire format.

use crate::report::Row;
use serde_json::Value;
use spindle::tools::matching::locate;
use std::path::Path;

/// One case's outcome, or `None` when it is not an edit this figure
/// judges (a call in text, a write, an unknown tool).
fn edit_outcome(case: &Value) -> Option<(bool, bool)> {
    if case["call"]["name"] != "edit_file" {
        return None;
    }
    let arguments: Value = serde_json::from_str(case["call"]["arguments"].as_str()?).ok()?;
    let path = arguments["path"].as_str()?;
    let mut content = case["files"][path].as_str()?.as_bytes().to_vec();
    let expected = case["expect"]["status"] == "completed";
    let mut applied = true;
    for edit in arguments["edits"].as_array()? {
        let (old, new) = (edit["old"].as_str()?, edit["new"].as_str()?);
        let all = edit["replace_all"].as_bool().unwrap_or(false);
        if old.is_empty() || old == new {
            applied = false;
            break;
        }
        match locate(&content, old, new, all) {
            Ok(located) => {
                // Later edits see the earlier ones' result.
                content = spindle::tools::matching::splice(&content, &located.spans);
            }
            Err(_) => {
                applied = false;
                break;
            }
        }
    }
    Some((expected, applied))
}

/// A tool call case's outcome (whether it should run, whether its name
/// and arguments are read), or `None` for other cases.
fn call_outcome(case: &Value) -> Option<(bool, bool)> {
    let name = case["call"]["name"].as_str()?;
    if name == "edit_file" {
        return None;
    }
    let arguments = case["call"]["arguments"].as_str()?;
    let offered = spindle::tools::specs(false, 32 * 1024);
    let read = spindle::tools::repair::fix_call(name, arguments, &offered).is_ok();
    // A call to a real tool may still fail for a missing file; the
    // corpus's refusals of the call itself are the `refuse-` cases.
    let expected = case["expect"]["status"] == "completed";
    Some((expected, read))
}

/// Figure 15: prints the rates and adds their rows.
pub(crate) fn report_recovery(rows: &mut Vec<Row>, failed: &mut bool) {
    println!("## 15. Recovery on the corpus of model slips (in process)");
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/corpus");
    let mut cases: Vec<(String, Value)> = Vec::new();
    for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
        let path = entry.path();
        if path.extension().is_some_and(|e| e == "json") {
            if let Some(case) = std::fs::read_to_string(&path)
                .ok()
                .and_then(|text| serde_json::from_str(&text).ok())
            {
                cases.push((entry.file_name().to_string_lossy().into_owned(), case));
            }
        }
    }
    cases.sort_by(|a, b| a.0.cmp(&b.0));
    let (mut slips, mut forgiven, mut controls, mut refused) = (0, 0, 0, 0);
    let mut wrong = Vec::new();
    for (name, case) in &cases {
        let Some((expected, applied)) = edit_outcome(case) else {
            continue;
        };
        if expected {
            slips += 1;
            forgiven += usize::from(applied);
        } else {
            controls += 1;
            refused += usize::from(!applied);
        }
        if expected != applied {
            wrong.push(name.clone());
        }
    }
    println!("  edit cases: {slips} to apply, {forgiven} applied; {controls} controls, {refused} refused");
    let (mut calls, mut read, mut bad, mut kept_out) = (0, 0, 0, 0);
    for (name, case) in &cases {
        let Some((expected, ran)) = call_outcome(case) else {
            continue;
        };
        if expected {
            calls += 1;
            read += usize::from(ran);
        } else {
            bad += 1;
            kept_out += usize::from(!ran);
        }
        if expected && !ran {
            wrong.push(name.clone());
        }
    }
    println!("  tool calls: {calls} to run, {read} read; {bad} controls, {kept_out} refused before running");
    rows.push(Row::suggested(
        "tool-call corpus: calls read as expected",
        format!("{read} of {calls}"),
        read == calls,
        "every case as it expects",
    ));
    let target = "every case as it expects".to_string();
    let figure = "edit_file corpus: cases applied as expected";
    rows.push(Row::suggested(
        figure,
        format!("{forgiven} of {slips}"),
        forgiven == slips,
        &target,
    ));
    rows.push(Row::suggested(
        "edit_file corpus: controls refused",
        format!("{refused} of {controls}"),
        refused == controls,
        &target,
    ));
    if !wrong.is_empty() {
        *failed = true;
        println!("  not as expected: {}", wrong.join(", "));
    }
    // What the model is sent before the user's first word, per profile
    // (the estimate the agent itself uses, with ripgrep's search text).
    let cwd = std::path::Path::new("/workspace");
    for (profile, lean, cap) in [("full", false, 2_500), ("lean", true, 1_200)] {
        let (tokens, tools) = spindle::agent::first_request(cwd, lean, true);
        println!("  prompt before the first word, profile {profile}: about {tokens} tokens, {tools} tools");
        rows.push(Row::suggested(
            &format!("prompt before the first word, profile {profile} ({tools} tools)"),
            format!("{tokens} tokens"),
            tokens <= cap,
            &format!("at most {cap} tokens"),
        ));
    }
}

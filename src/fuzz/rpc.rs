//! Targets of the JSON-RPC layer: the line classifier and the stdin line
//! reader.

use super::rng::Rng;

pub(super) const JSON_TOKENS: &[&str] = &[
    "{",
    "}",
    "[",
    "]",
    ",",
    ":",
    "\"",
    "\"jsonrpc\"",
    "\"2.0\"",
    "\"id\"",
    "\"method\"",
    "\"params\"",
    "\"result\"",
    "\"error\"",
    "1",
    "-7",
    "1e400",
    "null",
    "true",
    "\"a\"",
    "\\u",
    "\\ud83d",
    "\\ude00",
    "\\\\",
    "\\\"",
    " ",
    "\u{fffd}",
    "\"session/prompt\"",
];

pub(super) fn rpc_classifier(rng: &mut Rng) -> Result<(), String> {
    let line = rng.text(JSON_TOKENS, 40);
    let classified = crate::rpc::classify(line.as_bytes());
    if serde_json::from_str::<serde_json::Value>(&line).is_err()
        && !line.contains("\\u")
        && !matches!(classified, crate::rpc::Incoming::Invalid { .. })
    {
        return Err(format!("not JSON, yet accepted: {line:?}"));
    }
    Ok(())
}

pub(super) fn line_reader(rng: &mut Rng) -> Result<(), String> {
    let mut input = Vec::new();
    let mut lines = 0;
    for _ in 0..rng.below(8) {
        let line = rng.text(JSON_TOKENS, 12);
        input.extend_from_slice(line.as_bytes());
        if rng.below(4) == 0 {
            input.push(0xff);
        }
        if rng.below(3) != 0 {
            input.extend_from_slice(if rng.below(2) == 0 { b"\n" } else { b"\r\n" });
            lines += 1;
        }
    }
    // Random characters may hold line breaks of their own.
    let lines = lines.max(input.iter().filter(|&&b| b == b'\n').count());
    let (sender, receiver) = crossbeam_channel::unbounded::<crate::rpc::stdio::Input>();
    let handle = crate::rpc::stdio::spawn_reader(std::io::Cursor::new(input), sender)
        .map_err(|e| e.to_string())?;
    let _ = handle.join();
    let received: Vec<_> = receiver.try_iter().collect();
    let ends = received
        .iter()
        .filter(|i| matches!(i, crate::rpc::stdio::Input::Eof))
        .count();
    if ends != 1 || !matches!(received.last(), Some(crate::rpc::stdio::Input::Eof)) {
        return Err(format!("{ends} ends of input, not one at the end"));
    }
    if received.len() > lines + 2 {
        return Err(format!("{} messages from {lines} lines", received.len()));
    }
    Ok(())
}

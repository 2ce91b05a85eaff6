//! Rich prompt content through the real binary: the prompt capabilities,
//! images (saved under `<cwd>/.spindle/attachments/` by content hash, sent
//! as `image_url` data URLs to a model that takes images and as a note to
//! one that does not), refused blocks (bad base64, not an image, audio),
//! embedded text and blob resources, resource links, and the replay of
//! such a prompt in another process (images by reference, no base64 in the
//! database).
//!
//! The model is the fake Chat Completions server named in a config file
//! with two models, `fake/vision` (`images: true`) and `fake/text`.

use crate::support::client::no_requests;
use crate::support::fake_openai::chat_text;
use crate::support::media::{base64, png};
use crate::support::prelude::WAIT;
use crate::support::{in_process, temp_dir, Agent, Exchange, FakeServer, Reply, Turn};
use serde_json::{json, Value};
use std::fs;
use std::path::{Path, PathBuf};
use std::thread;
use std::time::Duration;

struct Bench {
    model: FakeServer,
    base: PathBuf,
    ws: PathBuf,
    config: PathBuf,
    db: PathBuf,
}

impl Bench {
    fn new(name: &str) -> Bench {
        let model = FakeServer::start();
        let base =
            spindle::os::canonical(temp_dir(name)).expect("cannot canonicalize the temp dir");
        let ws = base.join("ws");
        fs::create_dir_all(&ws).expect("cannot create the workspace");
        let config = base.join("config.json");
        let text = json!({
            "providers": {"fake": {"kind": "openai", "base_url": model.base_url(),
                                   "requires_key": false}},
            "models": {"fake/vision": {"images": true}, "fake/text": {}},
        });
        fs::write(&config, serde_json::to_string_pretty(&text).unwrap())
            .expect("cannot write the config");
        Bench {
            model,
            db: base.join("spindle.db"),
            base,
            ws,
            config,
        }
    }

    /// `spindle acp --config … --db … --model MODEL`, in process
    /// (`support::in_process`), initialized.
    fn agent(&self, model: &str) -> Agent {
        let config = self.config.to_str().expect("UTF-8 path");
        let db = self.db.to_str().expect("UTF-8 path");
        let mut agent = in_process::acp(&["--config", config, "--db", db, "--model", model]);
        agent.initialize();
        agent
    }

    fn session(&self, agent: &mut Agent) -> String {
        agent.new_session(&self.ws)
    }

    fn attachments(&self) -> PathBuf {
        self.ws.join(".spindle").join("attachments")
    }

    /// The files saved as attachments, sorted by name.
    fn saved(&self) -> Vec<PathBuf> {
        let mut files: Vec<PathBuf> = fs::read_dir(self.attachments())
            .map(|entries| entries.filter_map(|e| e.ok().map(|e| e.path())).collect())
            .unwrap_or_default();
        files.sort();
        files
    }

    fn last_body(&self) -> Value {
        self.model
            .requests()
            .pop()
            .expect("the model got no request")
            .body
    }

    /// Every byte of the database files (main file, WAL, shared memory).
    fn database_bytes(&self) -> Vec<u8> {
        let mut bytes = Vec::new();
        for suffix in ["", "-wal", "-shm", "-journal"] {
            if let Ok(found) = fs::read(format!("{}{suffix}", self.db.display())) {
                bytes.extend(found);
            }
        }
        bytes
    }
}

impl Drop for Bench {
    fn drop(&mut self) {
        if thread::panicking() {
            eprintln!("test directory kept: {}", self.base.display());
        } else {
            let _ = fs::remove_dir_all(&self.base);
        }
    }
}

fn say(text: &str) -> Reply {
    Reply::Sse(chat_text(&[text]))
}

/// Sends a prompt made of `blocks` and runs it to its answer.
fn prompt(agent: &mut Agent, session: &str, blocks: Value) -> Turn {
    let id = agent.request(
        "session/prompt",
        json!({"sessionId": session, "prompt": blocks}),
    );
    Exchange {
        id,
        messages: Vec::new(),
        response: None,
    }
    .finish(agent, WAIT, &mut no_requests)
}

/// Sends a prompt that must be refused; returns the error object.
fn refused(agent: &mut Agent, session: &str, blocks: Value) -> Value {
    let id = agent.request(
        "session/prompt",
        json!({"sessionId": session, "prompt": blocks}),
    );
    let (response, _) = agent.response(&id, WAIT);
    response
        .get("error")
        .cloned()
        .unwrap_or_else(|| panic!("the prompt {blocks} was accepted: {response}"))
}

/// The last user message of a Chat Completions request.
fn last_user(body: &Value) -> &Value {
    body["messages"]
        .as_array()
        .and_then(|messages| messages.iter().rev().find(|m| m["role"] == "user"))
        .unwrap_or_else(|| panic!("no user message in {body}"))
}

/// The text of a user message, whether its content is a string or parts.
fn user_text(message: &Value) -> String {
    match &message["content"] {
        Value::String(text) => text.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter(|p| p["type"] == "text")
            .filter_map(|p| p["text"].as_str())
            .collect::<Vec<_>>()
            .join("\n"),
        other => panic!("unexpected content {other}"),
    }
}

fn image_block(data: &[u8]) -> Value {
    json!({"type": "image", "data": base64(data), "mimeType": "image/png"})
}

fn text_block(text: &str) -> Value {
    json!({"type": "text", "text": text})
}

fn is_hex_name(path: &Path, extension: &str) -> bool {
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
    name.strip_suffix(&format!(".{extension}"))
        .is_some_and(|stem| {
            stem.len() >= 16
                && stem
                    .chars()
                    .all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase())
        })
}

fn contains_bytes(haystack: &[u8], needle: &[u8]) -> bool {
    haystack
        .windows(needle.len())
        .any(|window| window == needle)
}

#[test]
fn prompt_capabilities_take_images_and_embedded_context_but_not_audio() {
    let bench = Bench::new("content-caps");
    let config = bench.config.to_str().unwrap();
    let db = bench.db.to_str().unwrap();
    let mut agent = in_process::acp(&["--config", config, "--db", db]);
    let result = agent.initialize();
    assert_eq!(
        result["agentCapabilities"]["promptCapabilities"],
        json!({"image": true, "audio": false, "embeddedContext": true}),
        "{result}"
    );
}

#[test]
fn an_image_is_saved_by_content_and_sent_to_a_vision_model_as_a_data_url() {
    let bench = Bench::new("content-image");
    let mut agent = bench.agent("fake/vision");
    let session = bench.session(&mut agent);
    let picture = png(10, 20, 30);
    bench.model.push(say("A dark pixel."));
    let turn = prompt(
        &mut agent,
        &session,
        json!([
            text_block("What is in this picture?"),
            image_block(&picture)
        ]),
    );
    assert_eq!(turn.stop_reason(), "end_turn", "{}", turn.dump());

    let saved = bench.saved();
    assert_eq!(saved.len(), 1, "{saved:?}");
    assert!(is_hex_name(&saved[0], "png"), "{saved:?}");
    assert_eq!(fs::read(&saved[0]).unwrap(), picture);

    let body = bench.last_body();
    let user = last_user(&body);
    let parts = user["content"]
        .as_array()
        .unwrap_or_else(|| panic!("the image needs content parts: {user}"));
    assert!(
        user_text(user).contains("What is in this picture?"),
        "{user}"
    );
    let url = format!("data:image/png;base64,{}", base64(&picture));
    assert!(
        parts
            .iter()
            .any(|p| p["type"] == "image_url" && p["image_url"]["url"] == url.as_str()),
        "no image_url part with the data URL: {user}"
    );

    // The same image again is the same file; another image is another.
    let other = png(200, 100, 0);
    bench.model.push(say("Two pixels."));
    let turn = prompt(
        &mut agent,
        &session,
        json!([
            text_block("And these?"),
            image_block(&picture),
            image_block(&other)
        ]),
    );
    assert_eq!(turn.stop_reason(), "end_turn", "{}", turn.dump());
    let saved_now = bench.saved();
    assert_eq!(saved_now.len(), 2, "{saved_now:?}");
    assert!(saved_now.contains(&saved[0]));
    let body = bench.last_body();
    let images = last_user(&body)["content"]
        .as_array()
        .map(|parts| parts.iter().filter(|p| p["type"] == "image_url").count())
        .unwrap_or(0);
    assert_eq!(images, 2, "{body}");
}

#[test]
fn a_model_without_images_gets_a_note_instead() {
    let bench = Bench::new("content-text-model");
    let mut agent = bench.agent("fake/text");
    let session = bench.session(&mut agent);
    let picture = png(1, 2, 3);
    bench.model.push(say("I cannot see it."));
    let turn = prompt(
        &mut agent,
        &session,
        json!([text_block("Describe this"), image_block(&picture)]),
    );
    assert_eq!(turn.stop_reason(), "end_turn", "{}", turn.dump());
    let saved = bench.saved();
    assert_eq!(saved.len(), 1, "the image is saved all the same: {saved:?}");
    let body = bench.last_body();
    let text = body.to_string();
    assert!(!text.contains("image_url"), "{body}");
    assert!(!text.contains(&base64(&picture)), "{body}");
    let user = last_user(&body);
    assert!(
        user["content"].is_string(),
        "plain text for a text model: {user}"
    );
    let note = user_text(user);
    assert!(note.contains("Describe this"), "{note}");
    assert!(
        note.contains(saved[0].to_str().unwrap()),
        "the note names the saved file: {note}"
    );
}

#[test]
fn bad_blocks_are_refused_with_invalid_params_and_nothing_is_saved() {
    let bench = Bench::new("content-bad");
    let mut agent = bench.agent("fake/vision");
    let session = bench.session(&mut agent);
    let good = image_block(&png(9, 9, 9));
    let cases = [
        (
            json!([text_block("look"), {"type": "image", "data": "not base64 at all!!", "mimeType": "image/png"}]),
            vec!["block 1", "base64"],
        ),
        (
            json!([text_block("look"), {"type": "image", "data": base64(b"just some text, no picture"), "mimeType": "image/png"}]),
            vec!["block 1", "image"],
        ),
        (
            json!([text_block("listen"), {"type": "audio", "data": base64(b"RIFF\x00\x00\x00\x00WAVEfmt "), "mimeType": "audio/wav"}]),
            vec!["block 1", "audio"],
        ),
        // A good image before a bad one: still nothing saved.
        (
            json!([good, {"type": "image", "data": "%%%", "mimeType": "image/png"}]),
            vec!["block 1"],
        ),
    ];
    for (blocks, needles) in cases {
        let error = refused(&mut agent, &session, blocks.clone());
        assert_eq!(error["code"], -32602, "{blocks}: {error}");
        let message = error["message"].as_str().unwrap_or_default();
        for needle in needles {
            assert!(
                message.contains(needle),
                "{blocks}: the message {message:?} lacks {needle:?}"
            );
        }
    }
    assert!(
        !bench.attachments().exists(),
        "nothing may be saved: {:?}",
        bench.saved()
    );
    assert!(
        bench.model.requests().is_empty(),
        "no refused prompt reaches the model"
    );
    // The session still works.
    bench.model.push(say("Fine."));
    let turn = prompt(&mut agent, &session, json!([text_block("still there?")]));
    assert_eq!(turn.stop_reason(), "end_turn", "{}", turn.dump());
    assert_eq!(user_text(last_user(&bench.last_body())), "still there?");
}

#[test]
fn an_embedded_text_resource_reaches_the_model_with_its_uri_in_a_fence() {
    let bench = Bench::new("content-resource");
    let mut agent = bench.agent("fake/vision");
    let session = bench.session(&mut agent);
    let uri = "file:///project/src/main.rs";
    // The text holds a fence of its own, so the agent needs a longer one.
    let text = "fn main() {\n    println!(\"```\");\n}\n";
    bench.model.push(say("Seen."));
    let turn = prompt(
        &mut agent,
        &session,
        json!([
            text_block("Explain this file"),
            {"type": "resource", "resource": {"uri": uri, "text": text, "mimeType": "text/x-rust"}},
        ]),
    );
    assert_eq!(turn.stop_reason(), "end_turn", "{}", turn.dump());
    let got = user_text(last_user(&bench.last_body()));
    assert!(got.contains("Explain this file"), "{got}");
    assert!(got.contains(uri), "{got}");
    let at = got
        .find(text)
        .unwrap_or_else(|| panic!("the text is not there verbatim: {got:?}"));
    let before: Vec<&str> = got[..at].lines().collect();
    let opening = before.last().copied().unwrap_or_default();
    assert!(
        opening.len() >= 4 && opening.chars().all(|c| c == '`'),
        "opened by a fence longer than the text's own: {got:?}"
    );
    let after = got[at + text.len()..].lines().next().unwrap_or_default();
    assert_eq!(after, opening, "closed by the same fence: {got:?}");
    assert!(bench.saved().is_empty(), "a text resource is not a file");
}

#[test]
fn a_blob_resource_is_saved_and_the_model_told_where() {
    let bench = Bench::new("content-blob");
    let mut agent = bench.agent("fake/vision");
    let session = bench.session(&mut agent);
    let blob = b"\x00\x01\x02binary\xff\xfe".to_vec();
    let uri = "file:///project/data/blob.bin";
    bench.model.push(say("Binary."));
    let turn = prompt(
        &mut agent,
        &session,
        json!([
            text_block("What is this?"),
            {"type": "resource", "resource": {"uri": uri, "blob": base64(&blob),
                                              "mimeType": "application/octet-stream"}},
        ]),
    );
    assert_eq!(turn.stop_reason(), "end_turn", "{}", turn.dump());
    let saved = bench.saved();
    assert_eq!(saved.len(), 1, "{saved:?}");
    assert_eq!(fs::read(&saved[0]).unwrap(), blob);
    let got = user_text(last_user(&bench.last_body()));
    assert!(got.contains(uri), "{got}");
    assert!(got.contains(saved[0].to_str().unwrap()), "{got}");
    assert!(got.contains(&blob.len().to_string()), "the size: {got}");
    assert!(!got.contains(&base64(&blob)), "{got}");
}

#[test]
fn a_resource_link_tells_the_model_its_uri_name_and_size() {
    let bench = Bench::new("content-link");
    let mut agent = bench.agent("fake/vision");
    let session = bench.session(&mut agent);
    bench.model.push(say("I will read it."));
    let turn = prompt(
        &mut agent,
        &session,
        json!([
            text_block("Check the log"),
            {"type": "resource_link", "uri": "file:///var/log/build-7.log", "name": "build-7.log",
             "size": 123456, "mimeType": "text/plain"},
        ]),
    );
    assert_eq!(turn.stop_reason(), "end_turn", "{}", turn.dump());
    let got = user_text(last_user(&bench.last_body()));
    for needle in [
        "Check the log",
        "file:///var/log/build-7.log",
        "build-7.log",
        "123456",
    ] {
        assert!(got.contains(needle), "{needle:?} missing from {got:?}");
    }
    assert!(bench.saved().is_empty());
}

#[test]
fn replay_in_another_process_shows_the_blocks_as_sent_with_files_by_reference() {
    let bench = Bench::new("content-replay");
    let picture = png(77, 88, 99);
    let blob = b"\x00zip-ish\x01\x02\x03 payload".to_vec();
    let text_resource = json!({"type": "resource", "resource": {
        "uri": "file:///project/notes.md", "text": "# Notes\nkeep me", "mimeType": "text/markdown"}});
    let link = json!({"type": "resource_link", "uri": "file:///project/big.csv",
                      "name": "big.csv", "size": 2048});
    let blocks = json!([
        text_block("Here is everything"),
        image_block(&picture),
        text_resource,
        link,
        {"type": "resource", "resource": {"uri": "file:///project/blob.dat", "blob": base64(&blob),
                                          "mimeType": "application/octet-stream"}},
    ]);

    let mut first = bench.agent("fake/vision");
    let session = bench.session(&mut first);
    bench.model.push(say("Got it all."));
    let turn = prompt(&mut first, &session, blocks.clone());
    assert_eq!(turn.stop_reason(), "end_turn", "{}", turn.dump());
    first.close_stdin();
    assert!(first.wait_exit(Duration::from_secs(10)).is_some());

    let saved = bench.saved();
    assert_eq!(saved.len(), 2, "{saved:?}");
    let image_path = saved
        .iter()
        .find(|p| p.extension().is_some_and(|e| e == "png"))
        .expect("the image file")
        .clone();
    let blob_path = saved
        .iter()
        .find(|p| p.extension().is_some_and(|e| e != "png"))
        .expect("the blob file")
        .clone();
    assert_eq!(fs::read(&image_path).unwrap(), picture);
    assert_eq!(fs::read(&blob_path).unwrap(), blob);

    let database = bench.database_bytes();
    assert!(!database.is_empty());
    assert!(
        !contains_bytes(&database, base64(&picture).as_bytes()),
        "the image's base64 is in the database"
    );
    assert!(
        !contains_bytes(&database, base64(&blob).as_bytes()),
        "the blob's base64 is in the database"
    );

    let mut second = bench.agent("fake/vision");
    let id = second.request(
        "session/load",
        json!({"sessionId": session, "cwd": bench.ws.to_str().unwrap(), "mcpServers": []}),
    );
    let (response, replayed) = second.response(&id, WAIT);
    assert!(response.get("result").is_some(), "{response}");
    let user_blocks: Vec<Value> = replayed
        .iter()
        .filter(|m| m["params"]["update"]["sessionUpdate"] == "user_message_chunk")
        .map(|m| m["params"]["update"]["content"].clone())
        .collect();
    let sent = blocks.as_array().unwrap();
    assert_eq!(user_blocks.len(), sent.len(), "{user_blocks:#?}");
    assert_eq!(user_blocks[0], sent[0], "text as sent");
    assert_eq!(user_blocks[2], sent[2], "the text resource as sent");
    assert_eq!(user_blocks[3], sent[3], "the link as sent");
    let image = &user_blocks[1];
    assert_eq!(image["type"], "resource_link", "{image}");
    assert_eq!(
        image["uri"],
        spindle::os::paths::to_file_uri(image_path.to_str().unwrap(), spindle::os::paths::NATIVE),
        "{image}"
    );
    assert_eq!(image["mimeType"], "image/png", "{image}");
    assert_eq!(image["size"], picture.len(), "{image}");
    let blob_link = &user_blocks[4];
    assert_eq!(blob_link["type"], "resource_link", "{blob_link}");
    assert_eq!(
        blob_link["uri"],
        spindle::os::paths::to_file_uri(blob_path.to_str().unwrap(), spindle::os::paths::NATIVE),
        "{blob_link}"
    );
    assert_eq!(blob_link["size"], blob.len(), "{blob_link}");
    let all: String = user_blocks.iter().map(Value::to_string).collect();
    assert!(!all.contains(&base64(&picture)) && !all.contains(&base64(&blob)));

    // The conversation goes on with the image still in it.
    bench.model.push(say("Still see it."));
    let turn = prompt(&mut second, &session, json!([text_block("And now?")]));
    assert_eq!(turn.stop_reason(), "end_turn", "{}", turn.dump());
    let body = bench.last_body();
    let url = format!("data:image/png;base64,{}", base64(&picture));
    assert!(
        body["messages"].to_string().contains(&url),
        "the earlier image is sent again from its file: {body}"
    );
}

/// A saved attachment the workspace swaps for a link (to a secret outside
/// it) between turns is not read: the next request carries no image of
/// the linked file.
#[test]
fn an_attachment_swapped_for_a_link_is_not_sent_again() {
    let bench = Bench::new("content-image-swapped");
    let mut agent = bench.agent("fake/vision");
    let session = bench.session(&mut agent);
    bench.model.push(say("A pixel."));
    let turn = prompt(
        &mut agent,
        &session,
        json!([text_block("Look."), image_block(&png(1, 2, 3))]),
    );
    assert_eq!(turn.stop_reason(), "end_turn", "{}", turn.dump());
    let saved = bench.saved();
    let secret = bench.base.join("secret.txt");
    fs::write(&secret, "OUTSIDE-SECRET-4417").unwrap();
    fs::remove_file(&saved[0]).unwrap();
    spindle::os::testing::symlink(&secret, &saved[0]).unwrap();
    bench.model.push(say("Again."));
    let turn = prompt(&mut agent, &session, json!([text_block("And now?")]));
    assert_eq!(turn.stop_reason(), "end_turn", "{}", turn.dump());
    let body = bench.last_body().to_string();
    assert!(
        !body.contains(&base64(b"OUTSIDE-SECRET-4417")),
        "the linked file was sent"
    );
    assert!(!body.contains("data:image/png;base64"), "{body}");
}

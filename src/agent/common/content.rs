//! Prompt content: turns the blocks of a `session/prompt` into what the
//! model gets (text and images) and what the transcript keeps (the blocks
//! as sent, with images and binary resources by reference to files saved
//! under `.spindle/attachments/` in the workspace).
//!
//! Every block is checked before anything is saved or sent, so a bad block
//! fails the whole prompt with -32602 and nothing is half-sent.

use crate::provider::Image;
use crate::rpc::RpcError;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};

/// The prompt as the turn uses it.
pub(crate) struct PromptInput {
    /// The text the model gets.
    pub text: String,
    pub images: Vec<Image>,
    /// The blocks to store and replay: as sent, but images and blobs as
    /// `resource_link`s to their saved files.
    pub stored_blocks: Vec<Value>,
}

/// A checked block, nothing written yet.
enum Block {
    Text(String),
    Link {
        uri: String,
        name: String,
        size: Option<u64>,
    },
    Image {
        data: Vec<u8>,
        mime: &'static str,
        extension: &'static str,
    },
    TextResource {
        uri: String,
        text: String,
    },
    Blob {
        uri: String,
        data: Vec<u8>,
        mime: Option<String>,
    },
}

/// Recognises PNG, JPEG, GIF and WebP by their first bytes.
fn image_kind(data: &[u8]) -> Option<(&'static str, &'static str)> {
    if data.starts_with(b"\x89PNG\r\n\x1a\n") {
        Some(("image/png", "png"))
    } else if data.starts_with(&[0xff, 0xd8, 0xff]) {
        Some(("image/jpeg", "jpg"))
    } else if data.starts_with(b"GIF87a") || data.starts_with(b"GIF89a") {
        Some(("image/gif", "gif"))
    } else if data.len() >= 12 && &data[..4] == b"RIFF" && &data[8..12] == b"WEBP" {
        Some(("image/webp", "webp"))
    } else {
        None
    }
}

fn field<'a>(block: &'a Value, name: &str, index: usize, kind: &str) -> Result<&'a str, RpcError> {
    block.get(name).and_then(Value::as_str).ok_or_else(|| {
        RpcError::invalid_params(format!(
            "prompt block {index} ({kind}) needs a \"{name}\" string"
        ))
    })
}

fn check(blocks: &[Value]) -> Result<Vec<Block>, RpcError> {
    let mut checked = Vec::with_capacity(blocks.len());
    for (index, block) in blocks.iter().enumerate() {
        let kind = block.get("type").and_then(Value::as_str).unwrap_or("");
        let checked_block = match kind {
            "text" => Block::Text(field(block, "text", index, kind)?.to_string()),
            "resource_link" => Block::Link {
                uri: field(block, "uri", index, kind)?.to_string(),
                name: field(block, "name", index, kind)?.to_string(),
                size: block.get("size").and_then(Value::as_u64),
            },
            "image" => {
                let data = crate::util::base64_decode(field(block, "data", index, kind)?)
                    .ok_or_else(|| {
                        RpcError::invalid_params(format!(
                            "prompt block {index} (image): \"data\" is not valid base64"
                        ))
                    })?;
                let (mime, extension) = image_kind(&data).ok_or_else(|| {
                    RpcError::invalid_params(format!(
                        "prompt block {index} (image) is not a PNG, JPEG, GIF or WebP image"
                    ))
                })?;
                Block::Image { data, mime, extension }
            }
            "resource" => {
                let resource = block.get("resource").ok_or_else(|| {
                    RpcError::invalid_params(format!(
                        "prompt block {index} (resource) needs a \"resource\" object"
                    ))
                })?;
                let uri = field(resource, "uri", index, kind)?.to_string();
                if let Some(text) = resource.get("text").and_then(Value::as_str) {
                    Block::TextResource { uri, text: text.to_string() }
                } else if let Some(blob) = resource.get("blob").and_then(Value::as_str) {
                    let data = crate::util::base64_decode(blob).ok_or_else(|| {
                        RpcError::invalid_params(format!(
                            "prompt block {index} (resource): \"blob\" is not valid base64"
                        ))
                    })?;
                    let mime = resource.get("mimeType").and_then(Value::as_str).map(str::to_string);
                    Block::Blob { uri, data, mime }
                } else {
                    return Err(RpcError::invalid_params(format!(
                        "prompt block {index} (resource) needs \"text\" or \"blob\""
                    )));
                }
            }
            "audio" => {
                return Err(RpcError::invalid_params(format!(
                    "prompt block {index} is audio, which this agent does not take (promptCapabilities.audio is false)"
                )))
            }
            "" => {
                return Err(RpcError::invalid_params(format!(
                    "prompt block {index} has no \"type\""
                )))
            }
            other => {
                return Err(RpcError::invalid_params(format!(
                    "prompt block {index} has unknown type {other:?}"
                )))
            }
        };
        checked.push(checked_block);
    }
    let has_content = checked.iter().any(|block| match block {
        Block::Text(text) => !text.trim().is_empty(),
        _ => true,
    });
    if !has_content {
        return Err(RpcError::invalid_params(
            "the prompt is empty; send at least one non-empty text block",
        ));
    }
    Ok(checked)
}

/// Saves `data` under `.spindle/attachments/` with a content-hash name,
/// never through a link (see [`crate::tools::shipped::write_new`]).
fn save(cwd: &Path, data: &[u8], extension: &str) -> Result<PathBuf, RpcError> {
    let dir = cwd.join(".spindle").join("attachments");
    let name = format!("{}.{extension}", &crate::util::sha256_hex(data)[..32]);
    crate::tools::shipped::write_new(cwd, &dir, &name, data).map_err(RpcError::internal)
}

fn file_uri(path: &Path) -> String {
    crate::os::paths::to_file_uri(&path.to_string_lossy(), crate::os::paths::NATIVE)
}

/// Checks every block, then saves attachments and builds the prompt.
pub(crate) fn read_prompt(blocks: &[Value], cwd: &Path) -> Result<PromptInput, RpcError> {
    let checked = check(blocks)?;
    let mut parts: Vec<String> = Vec::new();
    let mut images = Vec::new();
    let mut stored = Vec::with_capacity(checked.len());
    for (block, original) in checked.into_iter().zip(blocks) {
        match block {
            Block::Text(text) => {
                parts.push(text);
                stored.push(original.clone());
            }
            Block::Link { uri, name, size } => {
                let size = size.map(|s| format!(", {s} bytes")).unwrap_or_default();
                parts.push(format!(
                    "[@{name}]({uri}){size} — you can read it with your tools."
                ));
                stored.push(original.clone());
            }
            Block::Image {
                data,
                mime,
                extension,
            } => {
                let path = save(cwd, &data, extension)?;
                parts.push(format!("[Image attached: {}]", path.display()));
                stored.push(json!({
                    "type": "resource_link",
                    "uri": file_uri(&path),
                    "name": path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default(),
                    "mimeType": mime,
                    "size": data.len(),
                }));
                images.push(Image {
                    path,
                    mime_type: mime.to_string(),
                });
            }
            Block::TextResource { uri, text } => {
                let fence = crate::util::fence(&text);
                parts.push(format!("Context from {uri}:\n{fence}"));
                stored.push(original.clone());
            }
            Block::Blob { uri, data, mime } => {
                let extension = image_kind(&data).map_or("bin", |(_, e)| e);
                let path = save(cwd, &data, extension)?;
                parts.push(format!(
                    "[Attached file {uri} ({}, {} bytes) saved at {}]",
                    mime.as_deref().unwrap_or("binary"),
                    data.len(),
                    path.display()
                ));
                let mut link = json!({
                    "type": "resource_link",
                    "uri": file_uri(&path),
                    "name": uri,
                    "size": data.len(),
                });
                if let Some(mime) = mime {
                    link["mimeType"] = json!(mime);
                }
                stored.push(link);
            }
        }
    }
    Ok(PromptInput {
        text: parts.join("\n"),
        images,
        stored_blocks: stored,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const PNG: &[u8] = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR";

    fn temp() -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("spindle-content-{}", crate::util::random_hex()));
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn images_are_saved_and_referenced() {
        let cwd = temp();
        let data = crate::util::base64_encode(PNG);
        let input = read_prompt(
            &[
                json!({"type": "text", "text": "What is this?"}),
                json!({"type": "image", "data": data, "mimeType": "image/png"}),
            ],
            &cwd,
        )
        .unwrap();
        assert_eq!(input.images.len(), 1);
        assert_eq!(std::fs::read(&input.images[0].path).unwrap(), PNG);
        assert!(input.images[0]
            .path
            .starts_with(cwd.join(".spindle/attachments")));
        assert_eq!(input.stored_blocks[1]["type"], "resource_link");
        assert!(!input.stored_blocks[1].to_string().contains(&data));
    }

    #[test]
    fn bad_blocks_fail_before_anything_is_saved() {
        let cwd = temp();
        let good = json!({"type": "image", "data": crate::util::base64_encode(PNG), "mimeType": "image/png"});
        for (bad, needle) in [
            (
                json!({"type": "image", "data": "!!!", "mimeType": "image/png"}),
                "base64",
            ),
            (
                json!({"type": "image", "data": crate::util::base64_encode(b"plain text"), "mimeType": "image/png"}),
                "PNG, JPEG",
            ),
            (
                json!({"type": "audio", "data": "AAAA", "mimeType": "audio/wav"}),
                "audio",
            ),
            (
                json!({"type": "resource", "resource": {"uri": "x"}}),
                "text",
            ),
        ] {
            let err = read_prompt(&[good.clone(), bad], &cwd).err().unwrap();
            assert_eq!(err.code, crate::rpc::code::INVALID_PARAMS);
            assert!(
                err.message.contains("block 1") && err.message.contains(needle),
                "{}",
                err.message
            );
        }
        assert!(!cwd.join(".spindle").exists());
    }

    #[test]
    fn resources_and_links_become_text() {
        let cwd = temp();
        let input = read_prompt(
            &[
                json!({"type": "resource", "resource": {"uri": "file:///w/a.rs", "text": "fn main() {}", "mimeType": "text/x-rust"}}),
                json!({"type": "resource_link", "uri": "file:///w/b.rs", "name": "b.rs", "size": 12}),
                json!({"type": "resource", "resource": {"uri": "file:///w/c.bin", "blob": crate::util::base64_encode(b"\x00\x01"), "mimeType": "application/octet-stream"}}),
            ],
            &cwd,
        )
        .unwrap();
        assert!(
            input.text.contains("file:///w/a.rs") && input.text.contains("```\nfn main() {}\n```"),
            "{}",
            input.text
        );
        assert!(
            input.text.contains("[@b.rs](file:///w/b.rs), 12 bytes"),
            "{}",
            input.text
        );
        assert!(input.text.contains("2 bytes"), "{}", input.text);
        assert_eq!(input.stored_blocks[2]["type"], "resource_link");
    }
}

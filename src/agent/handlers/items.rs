//! An inbox item's content: the prompt a request gives, its links frozen
//! to the text of the workspace files they name, and the item's JSON forms
//! (whole for `get`, a preview for `list`).

use crate::store::inbox::Item;
use serde_json::{json, Value};

/// The most characters of one item, and pending items per session.
pub(super) const ITEM_CAP: usize = 262_144;

/// The most bytes of a file a link is frozen with. The frozen item as a
/// whole stays within `ITEM_CAP` bytes of JSON too, so that `get` answers
/// it within the bound of one result.
const FROZEN_FILE_CAP: u64 = 256 * 1024;

/// The first words of an item, for lists.
fn preview(blocks: &[Value]) -> String {
    let text: String = blocks
        .iter()
        .filter_map(|b| b["text"].as_str().or_else(|| b["uri"].as_str()))
        .collect::<Vec<_>>()
        .join(" ");
    text.chars().take(120).collect()
}

/// The item's blocks frozen: each `resource_link` to a text file inside
/// the workspace (its folder or an extra root) becomes a `resource` block
/// holding that file's text now, so the prompt means what the user saw
/// when they sent it, whenever it runs. The frozen item stays within
/// `ITEM_CAP` bytes of JSON: a link whose text does not fit stays a link,
/// as does one outside the workspace (the model reads it with its tools,
/// under the session's permissions) and one to a file that is not text.
pub(super) fn freeze(blocks: &[Value], roots: &[std::path::PathBuf]) -> Vec<Value> {
    let size = |block: &Value| block.to_string().len() as u64;
    let mut room = (ITEM_CAP as u64).saturating_sub(size(&Value::Array(blocks.to_vec())));
    blocks
        .iter()
        .map(|block| {
            if block["type"] != "resource_link" {
                return block.clone();
            }
            let uri = block["uri"].as_str().unwrap_or_default();
            let Some(path) = file_path(uri) else {
                return block.clone();
            };
            let Some(resolved) = roots
                .iter()
                .map(|root| crate::tools::paths::resolve(root, &path))
                .find(|resolved| resolved.inside)
            else {
                return block.clone();
            };
            let cap = FROZEN_FILE_CAP.min(room);
            let Ok(bytes) = crate::tools::bounded::read_capped(&resolved.path, cap) else {
                return block.clone();
            };
            let Ok(text) = String::from_utf8(bytes) else {
                return block.clone();
            };
            let frozen = json!({"type": "resource", "resource": {
                "uri": uri, "text": text,
                "mimeType": block.get("mimeType").cloned().unwrap_or(json!("text/plain")),
            }});
            // Escapes make the JSON longer than the text: measured as sent.
            let grows = size(&frozen).saturating_sub(size(block));
            if grows > room {
                return block.clone();
            }
            room -= grows;
            frozen
        })
        .collect()
}

/// The absolute path a `file:` URI names on this system (see
/// [`crate::os::paths::from_file_uri`]).
fn file_path(uri: &str) -> Option<String> {
    crate::os::paths::from_file_uri(uri, crate::os::paths::NATIVE)
}

pub(super) fn item_json(item: &Item) -> Value {
    json!({
        "itemId": item.item_id,
        "intent": item.intent.as_str(),
        "state": item.state.as_str(),
        // What will run: the blocks with their links frozen (older rows
        // may have only the blocks).
        "prompt": if item.prompt["frozen"].is_array() { &item.prompt["frozen"] } else { &item.prompt["blocks"] },
        "bytes": item.bytes,
        "createdAt": item.created_at,
        "idempotencyKey": item.idempotency_key,
    })
}

pub(super) fn summary_json(item: &Item) -> Value {
    let blocks = item.prompt["blocks"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    json!({
        "itemId": item.item_id,
        "intent": item.intent.as_str(),
        "state": item.state.as_str(),
        "preview": preview(&blocks),
        "bytes": item.bytes,
        "createdAt": item.created_at,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(super) fn link(path: &str) -> Value {
        json!({"type": "resource_link", "uri": format!("file://{path}"), "name": "f"})
    }

    #[test]
    #[cfg_attr(windows, ignore = "Unix file URI forms (the Windows ones: os::paths)")]
    pub(super) fn freezing_reads_only_workspace_files_within_the_caps() {
        let base =
            std::env::temp_dir().join(format!("spindle-freeze-{}", crate::util::random_hex()));
        let ws = base.join("ws");
        let extra = base.join("extra");
        std::fs::create_dir_all(&ws).unwrap();
        std::fs::create_dir_all(&extra).unwrap();
        std::fs::write(ws.join("a b.txt"), "inside").unwrap();
        std::fs::write(extra.join("more.txt"), "another root").unwrap();
        std::fs::write(base.join("secret.txt"), "outside").unwrap();
        std::fs::write(ws.join("binary.bin"), [0xff, 0xfe, 0x00]).unwrap();
        crate::os::testing::symlink(base.join("secret.txt"), ws.join("link.txt")).unwrap();
        let big = "x".repeat(150 * 1024);
        for i in 0..2 {
            std::fs::write(ws.join(format!("big{i}.txt")), &big).unwrap();
        }
        let ws_s = ws.display().to_string();
        let roots = [ws.clone(), extra.clone()];
        let frozen = freeze(
            &[
                link(&format!("{ws_s}/a%20b.txt")),
                json!({"type": "resource_link", "uri": format!("file://localhost{ws_s}/a%20b.txt#L1:2"), "name": "f"}),
                json!({"type": "resource_link", "uri": format!("file:{ws_s}/a%20b.txt?symbol=x"), "name": "f"}),
                link(&format!("{}/more.txt", extra.display())),
                link(&format!("{}/secret.txt", base.display())),
                link(&format!("{ws_s}/../secret.txt")),
                link(&format!("{ws_s}/link.txt")),
                link(&format!("{ws_s}/bad%zz")),
                link(&format!("{ws_s}/binary.bin")),
                json!({"type": "resource_link", "uri": "file://elsewhere/a%20b.txt", "name": "f"}),
                json!({"type": "resource_link", "uri": "https://example.com/a", "name": "f"}),
            ],
            &roots,
        );
        for block in &frozen[..3] {
            assert_eq!(block["resource"]["text"], "inside", "{block}");
        }
        assert_eq!(frozen[3]["resource"]["text"], "another root");
        for block in &frozen[4..] {
            assert_eq!(block["type"], "resource_link", "{block}");
        }
        // One 150 KiB file fits in the item's 262,144 bytes, the second
        // does not.
        let links: Vec<Value> = (0..2)
            .map(|i| link(&format!("{ws_s}/big{i}.txt")))
            .collect();
        let frozen = freeze(&links, &roots);
        assert_eq!(frozen[0]["type"], "resource");
        assert_eq!(frozen[1]["type"], "resource_link");
        assert!(Value::Array(frozen).to_string().len() <= ITEM_CAP);
        // Text that grows when escaped is measured as JSON.
        std::fs::write(ws.join("lines.txt"), "\n".repeat(200 * 1024)).unwrap();
        let frozen = freeze(&[link(&format!("{ws_s}/lines.txt"))], &roots);
        assert_eq!(frozen[0]["type"], "resource_link");
        let _ = std::fs::remove_dir_all(&base);
    }
}

//! Where a value sits in the JSON text a server sent, so that an item can
//! be kept and sent back byte for byte rather than re-serialised (which
//! would sort its keys and may rewrite its numbers).
//!
//! The text is one that `serde_json` has already parsed: the scan only
//! finds the bounds of values, and answers `None` (never panics) on text
//! it cannot follow.

/// The text of the member `key` of the JSON object `text`; the last one
/// when the key repeats, as `serde_json` reads it.
pub(crate) fn member<'a>(text: &'a str, key: &str) -> Option<&'a str> {
    let bytes = text.as_bytes();
    let mut at = skip_space(bytes, 0);
    if bytes.get(at) != Some(&b'{') {
        return None;
    }
    at = skip_space(bytes, at + 1);
    let mut found = None;
    while bytes.get(at) == Some(&b'"') {
        let key_end = string_end(bytes, at)?;
        let name: String = serde_json::from_str(text.get(at..key_end)?).ok()?;
        at = skip_space(bytes, key_end);
        if bytes.get(at) != Some(&b':') {
            return None;
        }
        let start = skip_space(bytes, at + 1);
        let end = value_end(bytes, start)?;
        if name == key {
            found = text.get(start..end);
        }
        at = skip_space(bytes, end);
        match bytes.get(at) {
            Some(b',') => at = skip_space(bytes, at + 1),
            Some(b'}') => break,
            _ => return None,
        }
    }
    found
}

/// The texts of the elements of the JSON array `text` (none when it is
/// not an array).
pub(crate) fn elements(text: &str) -> Vec<&str> {
    let bytes = text.as_bytes();
    let mut found = Vec::new();
    let mut at = skip_space(bytes, 0);
    if bytes.get(at) != Some(&b'[') {
        return found;
    }
    at = skip_space(bytes, at + 1);
    while at < bytes.len() && bytes[at] != b']' {
        let Some(end) = value_end(bytes, at) else {
            return Vec::new();
        };
        match text.get(at..end) {
            Some(element) => found.push(element),
            None => return Vec::new(),
        }
        at = skip_space(bytes, end);
        match bytes.get(at) {
            Some(b',') => at = skip_space(bytes, at + 1),
            Some(b']') => return found,
            _ => return Vec::new(),
        }
    }
    if bytes.get(at) == Some(&b']') {
        found
    } else {
        Vec::new()
    }
}

fn skip_space(bytes: &[u8], mut at: usize) -> usize {
    while bytes
        .get(at)
        .is_some_and(|byte| matches!(byte, b' ' | b'\t' | b'\n' | b'\r'))
    {
        at += 1;
    }
    at
}

/// Just past the string that opens at `at`.
fn string_end(bytes: &[u8], at: usize) -> Option<usize> {
    let mut at = at + 1;
    while let Some(byte) = bytes.get(at) {
        match byte {
            b'\\' => at += 2,
            b'"' => return Some(at + 1),
            _ => at += 1,
        }
    }
    None
}

/// Just past the value that starts at `at`.
fn value_end(bytes: &[u8], at: usize) -> Option<usize> {
    match bytes.get(at)? {
        b'"' => string_end(bytes, at),
        b'{' | b'[' => {
            let mut depth = 0usize;
            let mut at = at;
            while let Some(byte) = bytes.get(at) {
                match byte {
                    b'"' => {
                        at = string_end(bytes, at)?;
                        continue;
                    }
                    b'{' | b'[' => depth += 1,
                    b'}' | b']' => {
                        depth = depth.checked_sub(1)?;
                        if depth == 0 {
                            return Some(at + 1);
                        }
                    }
                    _ => {}
                }
                at += 1;
            }
            None
        }
        _ => {
            let end = at
                + bytes[at..]
                    .iter()
                    .position(|byte| {
                        matches!(byte, b',' | b'}' | b']' | b' ' | b'\t' | b'\n' | b'\r')
                    })
                    .unwrap_or(bytes.len() - at);
            (end > at).then_some(end)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_members_and_elements_as_written() {
        let text = r#" { "type" : "x", "item":{"b":1, "a":"}\"]" , "n":1.50},
            "list": [ {"z":[1,2]} ,"s", 3e2,null ], "item":{"last":true} }"#;
        assert_eq!(member(text, "item"), Some(r#"{"last":true}"#));
        assert_eq!(member(text, "type"), Some(r#""x""#));
        assert_eq!(member(text, "gone"), None);
        let list = member(text, "list").unwrap();
        assert_eq!(elements(list), [r#"{"z":[1,2]}"#, r#""s""#, "3e2", "null"]);
        assert_eq!(elements("[]"), Vec::<&str>::new());
        assert_eq!(member(r#"{"\u0069tem":[1]}"#, "item"), Some("[1]"));
    }

    #[test]
    fn text_it_cannot_follow_gives_nothing() {
        for bad in [
            "",
            "[",
            "{",
            r#"{"a""#,
            r#"{"a":"#,
            r#"{"a":"x"#,
            "}",
            r#"{"a":1 "b":2}"#,
        ] {
            assert_eq!(member(bad, "a"), None, "{bad}");
        }
        for bad in ["{", "[1,", "[\"", "[1 2]"] {
            assert!(elements(bad).is_empty(), "{bad}");
        }
    }
}

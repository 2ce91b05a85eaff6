//! The one way text from outside reaches a terminal: a repository's
//! files, a session's title, a server's names and answers, a path, the
//! model's words. Every character a terminal would act on rather than
//! show, or that reorders or hides what is shown, is written out instead:
//! in plain text as `\u{1b}` (`\n`, `\r`, `\t` for those three), in JSON
//! as a `\u001b` escape, so the JSON still parses to the same strings.
//!
//! A backslash is left as it is: escaping is idempotent, so text escaped
//! once and printed through here again does not change.

/// Whether `c` must not reach a terminal as it is:
/// - the controls: C0 (escape sequences start with ESC; BEL, backspace
///   and carriage return move or sound), DEL and C1 (U+009B is a
///   one-character CSI, U+009D an OSC, U+0085 a line break);
/// - the bidirectional controls, which reorder what is shown (U+061C,
///   U+200E, U+200F, U+202A–U+202E, U+2066–U+2069);
/// - the invisible format characters, which hide text or glue a lookalike
///   together: the soft hyphen, the Mongolian vowel separator, the zero
///   width space, the word joiner and invisible operators (U+2060–U+2064),
///   the deprecated shaping controls (U+206A–U+206F), the byte order mark,
///   the interlinear annotation marks (which hide what they enclose), the
///   musical beam and slur controls and the tag characters (invisible
///   ASCII, U+E0000–U+E007F);
/// - the line and paragraph separators (U+2028, U+2029), which break a
///   line where a terminal or a log viewer shows none;
/// - the Hangul fillers, letters drawn as nothing.
///
/// The zero width joiner and non-joiner (U+200D, U+200C) stay: emoji and
/// several scripts need them, and they neither reorder nor hide text.
pub fn acts_on_a_terminal(c: char) -> bool {
    c.is_control()
        || matches!(
            c,
            '\u{ad}'
                | '\u{61c}'
                | '\u{115f}'
                | '\u{1160}'
                | '\u{180e}'
                | '\u{200b}'
                | '\u{200e}'
                | '\u{200f}'
                | '\u{2028}'..='\u{202e}'
                | '\u{2060}'..='\u{2064}'
                | '\u{2066}'..='\u{206f}'
                | '\u{3164}'
                | '\u{feff}'
                | '\u{ffa0}'
                | '\u{fff9}'..='\u{fffb}'
                | '\u{1d173}'..='\u{1d17a}'
                | '\u{e0000}'..='\u{e007f}'
        )
}

/// `text` safe to print: each character [`acts_on_a_terminal`] written
/// out (`\u{1b}`, `\u{202e}`; `\n`, `\r`, `\t`). With `lines`, line
/// breaks and tabs are kept (a transcript, a log line); without, the text
/// stays on one line, so it cannot start a line that looks like Spindle's
/// own (a name, a path, a title in a table).
pub fn visible(text: &str, lines: bool) -> String {
    if !text.chars().any(acts_on_a_terminal) {
        return text.to_string();
    }
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        let kept = lines && matches!(c, '\n' | '\t');
        if acts_on_a_terminal(c) && !kept {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    out
}

/// One line of JSON, every character [`acts_on_a_terminal`] a `\uXXXX`
/// escape: the same value to a program, inert on a terminal.
pub fn json_for_terminal(value: &serde_json::Value) -> String {
    escape_json(&value.to_string())
}

/// Indented JSON, escaped as [`json_for_terminal`] is.
pub fn json_pretty_for_terminal(value: &serde_json::Value) -> String {
    escape_json(&serde_json::to_string_pretty(value).unwrap_or_default())
}

/// Serialised JSON with each character [`acts_on_a_terminal`] inside its
/// strings written as `\uXXXX` (two, a surrogate pair, above U+FFFF).
/// serde_json escapes C0 in strings already; outside strings JSON holds
/// only ASCII punctuation and the whitespace kept here, so every
/// character replaced sits inside a string, where the escape is valid
/// and reads back as the character.
fn escape_json(text: &str) -> String {
    let structural = |c: char| matches!(c, '\n' | '\r' | '\t');
    if !text
        .chars()
        .any(|c| acts_on_a_terminal(c) && !structural(c))
    {
        return text.to_string();
    }
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        if acts_on_a_terminal(c) && !structural(c) {
            for unit in c.encode_utf16(&mut [0; 2]) {
                out.push_str(&format!("\\u{unit:04x}"));
            }
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{json, Value};

    /// One of each kind of character that must not reach a terminal.
    const HOSTILE: &[char] = &[
        '\u{0}',
        '\u{7}',
        '\u{8}',
        '\u{d}',
        '\u{1b}',
        '\u{1f}',
        '\u{7f}',
        '\u{80}',
        '\u{85}',
        '\u{9b}',
        '\u{9d}',
        '\u{9f}',
        '\u{ad}',
        '\u{61c}',
        '\u{115f}',
        '\u{180e}',
        '\u{200b}',
        '\u{200e}',
        '\u{200f}',
        '\u{2028}',
        '\u{2029}',
        '\u{202a}',
        '\u{202e}',
        '\u{2060}',
        '\u{2064}',
        '\u{2066}',
        '\u{2069}',
        '\u{206f}',
        '\u{3164}',
        '\u{feff}',
        '\u{ffa0}',
        '\u{fff9}',
        '\u{fffb}',
        '\u{1d173}',
        '\u{e0001}',
        '\u{e0041}',
        '\u{e007f}',
    ];

    #[test]
    fn every_hostile_character_is_written_out() {
        for &c in HOSTILE {
            assert!(acts_on_a_terminal(c), "{:x}", c as u32);
            let text = format!("a{c}b");
            for lines in [false, true] {
                let shown = visible(&text, lines);
                assert!(!shown.contains(c), "{:x} {shown:?}", c as u32);
                assert!(shown.starts_with('a') && shown.ends_with('b'));
            }
        }
        assert_eq!(
            visible("a\u{1b}]52;c;eA==\u{7}b", false),
            "a\\u{1b}]52;c;eA==\\u{7}b"
        );
        assert_eq!(visible("\u{9b}2J\u{202e}", false), "\\u{9b}2J\\u{202e}");
        assert_eq!(visible("x\r\ny", false), "x\\r\\ny");
    }

    #[test]
    fn ordinary_text_is_left_as_it_is() {
        for text in [
            "plain ASCII ~!@#$%^&*()_+{}|:\"<>?`-=[]\\;',./",
            "Grüße, ça va, naïve",
            "العربية עברית 日本語 한국어 हिन्दी",
            "emoji 👩\u{200d}👩\u{200d}👧 and a flag 🇫🇷, a variation ❤\u{fe0f}",
            "Persian می\u{200c}خواهم",
        ] {
            assert_eq!(visible(text, false), text);
            assert_eq!(visible(text, true), text);
        }
    }

    #[test]
    fn line_breaks_and_tabs_stay_only_where_lines_are_allowed() {
        assert_eq!(visible("a\n\tb", true), "a\n\tb");
        assert_eq!(visible("a\n\tb", false), "a\\n\\tb");
        // A carriage return would overwrite the line: never kept.
        assert_eq!(visible("a\rb", true), "a\\rb");
    }

    #[test]
    fn escaping_twice_changes_nothing() {
        let all: String = HOSTILE.iter().collect();
        for lines in [false, true] {
            let once = visible(&all, lines);
            assert_eq!(visible(&once, lines), once);
        }
    }

    #[test]
    fn json_keeps_its_value_and_loses_every_hostile_character() {
        let all: String = HOSTILE.iter().collect();
        let value = json!({
            "title": format!("fix \u{85}it\u{9b}2J {all}"),
            "list": [all.clone(), "plain", 3, null],
            all.clone(): "a key too",
        });
        for text in [json_for_terminal(&value), json_pretty_for_terminal(&value)] {
            assert!(!text.chars().any(|c| HOSTILE.contains(&c)), "{text}");
            assert!(!text.chars().any(|c| c.is_control() && !matches!(c, '\n')));
            assert_eq!(serde_json::from_str::<Value>(&text).unwrap(), value);
            // Printing it as text afterwards changes nothing either.
            assert_eq!(visible(&text, true), text);
        }
        assert_eq!(json_for_terminal(&json!("\u{e0041}")), "\"\\udb40\\udc41\"");
        assert_eq!(json_for_terminal(&json!("\u{202e}")), "\"\\u202e\"");
        assert_eq!(json_for_terminal(&json!({"a": "b"})), "{\"a\":\"b\"}");
    }
}

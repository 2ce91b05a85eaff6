use super::*;

fn typed(editor: &mut Editor, bytes: &[u8], commands: &[String]) -> Vec<Step> {
    let mut keys = Keys::default();
    keys.feed(bytes)
        .into_iter()
        .map(|key| editor.key(key, commands))
        .collect()
}

fn submitted(bytes: &[u8]) -> String {
    let mut editor = Editor::default();
    match typed(&mut editor, bytes, &[]).pop() {
        Some(Step::Submit(line)) => line,
        other => panic!("no line submitted: {other:?}"),
    }
}

#[test]
fn keys_edit_the_line() {
    assert_eq!(submitted(b"hello\r"), "hello");
    // Left twice, insert, Home, insert, End, insert.
    assert_eq!(submitted(b"ac\x1b[Db\x1b[H>\x1b[F<\r"), ">abc<");
    assert_eq!(submitted(b"abc\x02\x02X\x01Y\x05Z\r"), "YaXbcZ");
    // Backspace (both codes), Delete, Ctrl-D as Delete on a full line.
    assert_eq!(submitted(b"abcd\x7f\x08\r"), "ab");
    assert_eq!(submitted(b"abcd\x01\x1b[3~\x04\r"), "cd");
    // Ctrl-W and Alt-Backspace drop a word, Ctrl-U the start, Ctrl-K the end.
    assert_eq!(submitted(b"one two  \x17\r"), "one ");
    assert_eq!(submitted(b"one two\x1b\x7f\r"), "one ");
    assert_eq!(submitted(b"one two\x1bbX\r"), "one Xtwo");
    assert_eq!(submitted(b"one two\x01\x1b[1;5CX\r"), "oneX two");
    assert_eq!(submitted(b"one two\x02\x02\x02\x15\r"), "two");
    assert_eq!(submitted(b"one two\x01\x1bf\x0b\r"), "one");
    // Keys at the edges do nothing.
    assert_eq!(submitted(b"\x7f\x1b[3~\x1b[Dx\x1b[C\x1b[C\r"), "x");
}

#[test]
fn bytes_split_across_reads_still_make_keys() {
    let mut keys = Keys::default();
    let euro = "€".as_bytes();
    let mut out = keys.feed(&euro[..2]);
    out.extend(keys.feed(&euro[2..]));
    out.extend(keys.feed(b"\x1b"));
    out.extend(keys.feed(b"["));
    out.extend(keys.feed(b"A"));
    assert_eq!(out, vec![Key::Char('€'), Key::Up]);
    // Broken UTF-8 and unknown sequences are dropped, not typed.
    let mut keys = Keys::default();
    assert_eq!(
        keys.feed(b"\xff\x1b[99Z\x1b[5~a\x1b[?1;2c\x00"),
        vec![Key::Char('a')]
    );
    // An endless sequence is dropped at its cap; typing goes on.
    let mut long = b"\x1b[".to_vec();
    long.extend(std::iter::repeat_n(b'1', 100));
    long.extend(b"~b");
    assert_eq!(keys.feed(&long).last(), Some(&Key::Char('b')));
}

#[test]
fn a_paste_is_one_key_with_its_newlines() {
    let mut editor = Editor::default();
    let steps = typed(
        &mut editor,
        b"see \x1b[200~line one\r\nline two\x1b]0;x\x07\x1b[201~\r",
        &[],
    );
    assert_eq!(
        steps.last(),
        Some(&Step::Submit("see line one\nline two]0;x".into()))
    );
    // Enter inside a paste does not submit.
    let mut keys = Keys::default();
    let out = keys.feed(b"\x1b[200~a\rb");
    assert!(out.is_empty(), "{out:?}");
    assert_eq!(keys.feed(b"\x1b[201~"), vec![Key::Paste("a\nb".into())]);
}

#[test]
fn interrupt_clears_and_eof_ends_only_an_empty_line() {
    let mut editor = Editor::default();
    // On a line, Ctrl-C clears it; on an empty one it is an interrupt.
    let steps = typed(&mut editor, b"half\x03", &[]);
    assert_eq!(steps.last(), Some(&Step::Edited));
    assert_eq!(editor.text(), "");
    assert_eq!(typed(&mut editor, b"\x03", &[]), vec![Step::Interrupt]);
    assert_eq!(typed(&mut editor, b"\x04", &[]), vec![Step::Eof]);
    assert_eq!(
        typed(&mut editor, b"\x0c\x1a", &[]),
        vec![Step::Clear, Step::Suspend]
    );
}

#[test]
fn history_goes_back_and_forth_and_keeps_the_draft() {
    let dir = std::env::temp_dir().join(format!("spindle-line-{}", crate::util::random_hex()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("history");
    let mut editor = Editor::new(History::load(&path));
    typed(&mut editor, b"first\rsecond\rsecond\r secret\r\r", &[]);
    assert_eq!(editor.history.entries(), ["first", "second"]);
    typed(&mut editor, b"draft\x1b[A", &[]);
    assert_eq!(editor.text(), "second");
    typed(&mut editor, b"\x1b[A\x1b[A", &[]);
    assert_eq!(editor.text(), "first");
    typed(&mut editor, b"\x1b[B\x0e", &[]);
    assert_eq!(editor.text(), "draft");
    typed(&mut editor, b"\x0e", &[]);
    assert_eq!(editor.text(), "draft");
    // Kept in the file, one JSON string a line, a pasted newline included.
    typed(&mut editor, b"\x15\x1b[200~two\nlines\x1b[201~\r", &[]);
    let again = History::load(&path);
    assert_eq!(again.entries(), ["first", "second", "two\nlines"]);
    // Junk lines in the file are skipped.
    std::fs::write(&path, "not json\n\"ok\"\n").unwrap();
    assert_eq!(History::load(&path).entries(), ["ok"]);
    // A long file is cut to what is kept, and written back shorter.
    let long: String = (0..2500).map(|n| format!("\"{n}\"\n")).collect();
    std::fs::write(&path, long).unwrap();
    let cut = History::load(&path);
    assert_eq!(cut.entries().len(), 1000);
    assert_eq!(cut.entries()[0], "1500");
    assert_eq!(
        std::fs::read_to_string(&path).unwrap().lines().count(),
        1000
    );
    // A missing file is an empty history.
    assert!(History::load(&dir.join("none")).entries().is_empty());
}

#[test]
fn tab_completes_slash_commands() {
    let commands: Vec<String> = ["undo", "update-deps", "compact", "cost"]
        .map(String::from)
        .to_vec();
    let mut editor = Editor::default();
    typed(&mut editor, b"/co", &commands);
    let steps = typed(&mut editor, b"\t", &commands);
    assert_eq!(
        steps,
        vec![Step::Choices(vec!["/compact".into(), "/cost".into()])]
    );
    typed(&mut editor, b"m\t", &commands);
    assert_eq!(editor.text(), "/compact ");
    let mut editor = Editor::default();
    typed(&mut editor, b"/u\t", &commands);
    assert_eq!(editor.text(), "/u");
    typed(&mut editor, b"n\t", &commands);
    assert_eq!(editor.text(), "/undo ");
    // Not a command being typed: Tab does nothing.
    let mut editor = Editor::default();
    typed(&mut editor, b"fix /co\t", &commands);
    assert_eq!(editor.text(), "fix /co");
    let mut editor = Editor::default();
    typed(&mut editor, b"/zz\t", &commands);
    assert_eq!(editor.text(), "/zz");
}

/// The row's characters between the prompt and the clearing sequence.
fn shown(row: &str, prompt: &str) -> String {
    let start = row.find(prompt).unwrap() + prompt.len();
    row[start..row.find("\x1b[K").unwrap()].to_string()
}

fn cursor_column(row: &str) -> usize {
    match row.rsplit_once("\x1b[") {
        Some((_, tail)) if tail.ends_with('C') => tail.trim_end_matches('C').parse().unwrap(),
        _ => 0,
    }
}

#[test]
fn a_long_line_scrolls_within_the_width() {
    let mut editor = Editor::default();
    let text: String = (0..200)
        .map(|n| char::from(b'a' + (n % 26) as u8))
        .collect();
    typed(&mut editor, text.as_bytes(), &[]);
    for width in [80, 40, 20] {
        let row = editor.render("› ", width);
        let visible = shown(&row, "› ");
        let columns = 2 + visible.chars().count();
        assert!(columns < width, "{width}: {columns} columns: {visible:?}");
        assert!(
            visible.starts_with('…') && !visible.ends_with('…'),
            "{visible:?}"
        );
        assert!(visible.ends_with(&text[190..]));
        assert_eq!(cursor_column(&row), columns);
    }
    // The cursor in the middle: both ends cut, the cursor inside.
    typed(&mut editor, &b"\x1b[D".repeat(100), &[]);
    let row = editor.render("› ", 40);
    let visible = shown(&row, "› ");
    assert!(
        visible.starts_with('…') && visible.ends_with('…'),
        "{visible:?}"
    );
    assert!(visible.chars().count() + 2 < 40);
    let at = cursor_column(&row) - 2;
    let under: String = visible.chars().skip(at).take(1).collect();
    assert_eq!(under, text[100..101]);
    // A short line is drawn whole, its cursor after the prompt's width.
    let mut editor = Editor::default();
    typed(&mut editor, "日本 x\x1b[D".as_bytes(), &[]);
    let row = editor.render("› ", 80);
    assert_eq!(shown(&row, "› "), "日本 x");
    assert_eq!(cursor_column(&row), 2 + 5);
    // Newlines are drawn as a mark, never as a line break.
    let mut editor = Editor::default();
    typed(&mut editor, b"\x1b[200~a\nb\x1b[201~", &[]);
    assert_eq!(shown(&editor.render("› ", 80), "› "), "a⏎b");
}

#[test]
fn wide_characters_count_twice() {
    assert_eq!(columns('a'), 1);
    assert_eq!(columns('日'), 2);
    assert_eq!(columns('\u{301}'), 0);
    assert_eq!(columns('😀'), 2);
}

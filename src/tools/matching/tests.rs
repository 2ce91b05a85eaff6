use super::*;

/// `old` replaced by `new` in `text`, and the slip forgiven.
fn apply(text: &str, old: &str, new: &str) -> Result<(String, Option<Slip>), Refusal> {
    apply_all(text, old, new, false)
}

fn apply_all(
    text: &str,
    old: &str,
    new: &str,
    replace_all: bool,
) -> Result<(String, Option<Slip>), Refusal> {
    let located = locate(text.as_bytes(), old, new, replace_all)?;
    let mut out = Vec::new();
    let mut last = 0;
    for span in &located.spans {
        out.extend_from_slice(&text.as_bytes()[last..span.start]);
        out.extend_from_slice(&span.new);
        last = span.end;
    }
    out.extend_from_slice(&text.as_bytes()[last..]);
    Ok((String::from_utf8(out).unwrap(), located.slip))
}

fn missing(result: Result<(String, Option<Slip>), Refusal>) -> bool {
    matches!(result, Err(Refusal::Missing))
}

#[test]
fn kmp_finds_every_occurrence_and_the_non_overlapping_ones() {
    assert_eq!(kmp_all(b"aaaa", b"aa"), vec![0, 1, 2]);
    assert_eq!(find_all(b"aaaa", b"aa"), vec![0, 2]);
    assert_eq!(find_all(b"abcabdabc", b"abc"), vec![0, 6]);
    assert!(find_all(b"ab", b"abc").is_empty());
    assert!(find_all(b"ab", b"").is_empty());
    let lines = ["x", "y", "x", "y", "x"];
    assert_eq!(kmp_all(&lines, &["x", "y", "x"]), vec![0, 2]);
}

#[test]
fn the_exact_text_needs_no_forgiving() {
    let (out, slip) = apply("a  \nb\n", "a  \nb", "c").unwrap();
    assert_eq!((out.as_str(), slip), ("c\n", None));
}

#[test]
fn crlf_old_text_matches_an_lf_file_and_writes_lf() {
    let (out, slip) = apply("a\nb\nc\n", "a\r\nb\r\n", "x\r\ny\r\n").unwrap();
    assert_eq!(slip, Some(Slip::LineEndings));
    assert_eq!(out, "x\ny\nc\n");
}

#[test]
fn trailing_whitespace_is_forgiven() {
    let text = "fn f() {   \n    call();\t\n}\n";
    let (out, slip) = apply(text, "fn f() {\n    call();\n}\n", "fn g() {}\n").unwrap();
    assert_eq!(out, "fn g() {}\n");
    assert_eq!(slip, Some(Slip::TrailingWhitespace));
    // In a CRLF file, the new lines get CRLF.
    let (out, _) = apply("a \r\nb\r\nc\r\n", "a\nb\n", "x\ny\n").unwrap();
    assert_eq!(out, "x\r\ny\r\nc\r\n");
}

#[test]
fn a_uniform_reindent_is_forgiven_and_the_new_text_takes_the_files_indent() {
    let text = "impl A {\n        fn f() {\n            one();\n        }\n}\n";
    let old = "fn f() {\n    one();\n}\n";
    let new = "fn f() {\n    two();\n    if x {\n        three();\n    }\n}\n";
    let (out, slip) = apply(text, old, new).unwrap();
    assert_eq!(slip, Some(Slip::Indentation));
    assert_eq!(
        out,
        "impl A {\n        fn f() {\n            two();\n            if x {\n                three();\n            }\n        }\n}\n"
    );
    // An old text without indentation: the new text's words are never
    // taken for indentation.
    let (out, _) = apply("  xa\n  b\n", "xa\nb\n", "xxa\n  b\n").unwrap();
    assert_eq!(out, "  xxa\n    b\n");
    // The model indented more than the file: the new text comes back.
    let (out, _) = apply("a\n  b\n", "    a\n      b", "    a\n      c").unwrap();
    assert_eq!(out, "a\n  c\n");
}

#[test]
fn tabs_against_spaces_keep_the_files_tabs() {
    let text = "fn f() {\n\tif x {\n\t\ty();\n\t}\n}\n";
    let old = "    if x {\n        y();\n    }\n";
    let new = "    if x {\n        z();\n    }\n";
    let (out, slip) = apply(text, old, new).unwrap();
    assert_eq!(slip, Some(Slip::TabsAndSpaces));
    assert_eq!(out, "fn f() {\n\tif x {\n\t\tz();\n\t}\n}\n");
    // And spaces in the file for tabs in the old text.
    let text = "def f():\n    if x:\n        y()\n";
    let (out, slip) = apply(text, "\tif x:\n\t\ty()\n", "\tif x:\n\t\tz()\n").unwrap();
    assert_eq!(slip, Some(Slip::TabsAndSpaces));
    assert_eq!(out, "def f():\n    if x:\n        z()\n");
}

#[test]
fn an_uneven_reindent_is_not_forgiven() {
    // Line 2 moved by 4, line 3 by 2: not one change of indentation.
    let text = "a {\n    b();\n    c();\n}\n";
    assert!(missing(apply(
        text,
        "a {\n        b();\n      c();\n}",
        "x"
    )));
}

#[test]
fn read_file_line_numbers_are_taken_off_old_and_new() {
    let text = "one\ntwo\nthree\n";
    let (out, slip) = apply(
        text,
        "     2\ttwo\n     3\tthree",
        "     2\tTWO\n     3\tTHREE",
    )
    .unwrap();
    assert_eq!(slip, Some(Slip::LineNumbers));
    assert_eq!(out, "one\nTWO\nTHREE\n");
    // New text without numbers is taken as given.
    let (out, _) = apply(text, "     1\tone\n", "uno\n").unwrap();
    assert_eq!(out, "uno\ntwo\nthree\n");
    // Numbers that do not count up are not read_file's.
    assert!(missing(apply(text, "     1\tone\n     3\ttwo", "x")));
}

#[test]
fn typographic_punctuation_is_forgiven_both_ways() {
    // The model typed ASCII; the file has curly quotes and a dash: the
    // file's other characters stay.
    let text = "say(\u{201c}hi\u{201d}) \u{2013} ok\u{a0}x \u{2026}\nnext \u{2014} line\n";
    let (out, slip) = apply(text, "say(\"hi\") - ok x ...", "say(\"yo\")").unwrap();
    assert_eq!(slip, Some(Slip::Punctuation));
    assert_eq!(out, "say(\"yo\")\nnext \u{2014} line\n");
    // The model typed curly quotes; the file has ASCII.
    let (out, _) = apply(
        "let s = \"a\";\n",
        "let s = \u{201c}a\u{201d};",
        "let s = \u{201c}b\u{201d};",
    )
    .unwrap();
    assert_eq!(out, "let s = \u{201c}b\u{201d};\n");
    // In a CRLF file a match ends after its own line ending, not inside
    // the next one.
    let (out, _) = apply("\u{a0}-\r\n\r\nz\r\n", "\u{2014}\r\n", "x\n").unwrap();
    assert_eq!(out, "\u{a0}x\r\n\r\nz\r\n");
    // A match starting inside one character's ASCII form is not taken.
    assert!(missing(apply("wait\u{2026}\n", "t..", "x")));
}

#[test]
fn text_escaped_once_too_often_is_unescaped() {
    let text = "fn f() {\n\tprint(\"hi\");\n}\n";
    let old = "fn f() {\\n\\tprint(\\\"hi\\\");\\n}";
    let new = "fn f() {\\n\\tprint(\\\"bye\\\");\\n}";
    let (out, slip) = apply(text, old, new).unwrap();
    assert_eq!(slip, Some(Slip::Escapes));
    assert_eq!(out, "fn f() {\n\tprint(\"bye\");\n}\n");
    // The literal text present: taken as given, nothing unescaped.
    let literal = "s = \"a\\nb\"\n";
    let (out, slip) = apply(literal, "\"a\\nb\"", "\"c\\nd\"").unwrap();
    assert_eq!((out.as_str(), slip), ("s = \"c\\nd\"\n", None));
}

#[test]
fn an_extra_final_newline_is_forgiven_at_the_end_of_the_file() {
    let (out, slip) = apply("a\nlast", "last\n", "final\n").unwrap();
    assert_eq!(slip, Some(Slip::FinalNewline));
    assert_eq!(out, "a\nfinal");
    // Not elsewhere: a block followed by another line is matched exactly
    // or not at all.
    assert!(missing(apply("a\nb\n", "a\n\n", "x")));
}

#[test]
fn a_changed_middle_line_is_never_matched() {
    let text = "fn f() {\n    let a = 1;\n    let b = 2;\n    let c = 3;\n}\n";
    let old = "fn f() {\n    let a = 1;\n    let b = 5;\n    let c = 3;\n}\n";
    assert!(missing(apply(text, old, "x")));
    // Nor one whose first and last lines alone agree.
    assert!(missing(apply(text, "fn f() {\n}\n", "x")));
}

#[test]
fn two_near_identical_blocks_are_refused_naming_both() {
    let text = "    if a {\n        go();\n    }\n\tif a {\n\t\tgo();  \n\t}\n    if a {\n        go();\n    }\n";
    // Re-indented: the first and third blocks both match.
    match apply(text, "if a {\n    go();\n}", "x") {
        Err(Refusal::Ambiguous {
            ranges,
            count,
            slip,
        }) => {
            assert_eq!(count, 2);
            assert_eq!(ranges, vec![(1, 3), (7, 9)]);
            assert_eq!(slip, Some(Slip::Indentation));
        }
        other => panic!("{other:?}"),
    }
    // With replace_all, every match of that matcher is replaced, each
    // re-indented to its own place.
    let (out, _) = apply_all(text, "if a {\n    go();\n}", "if b {\n    stop();\n}", true).unwrap();
    assert_eq!(
        out,
        "    if b {\n        stop();\n    }\n\tif a {\n\t\tgo();  \n\t}\n    if b {\n        stop();\n    }\n"
    );
}

#[test]
fn two_slips_at_once_are_not_combined() {
    // Re-indented and with trailing whitespace: each matcher forgives one.
    let text = "fn f() {\n    x();   \n}\n";
    assert!(missing(apply(text, "fn f() {\n  x();\n}", "y")));
    // Line numbers over re-indented text.
    assert!(missing(apply("a\n    b\n", "     1\ta\n     2\t  b", "y")));
}

#[test]
fn text_that_is_not_utf8_is_matched_exactly_only() {
    let content = b"caf\xe9 \nname = old\n";
    assert!(locate(content, "caf", "x", false).is_ok());
    assert!(matches!(
        locate(content, "name = old  \n", "x", false),
        Err(Refusal::Missing)
    ));
}

#[test]
fn a_miss_shows_the_closest_lines_and_what_differs() {
    let file: Vec<String> = (1..=40)
        .map(|i| format!("    let v{i} = compute({i});"))
        .collect();
    let file: Vec<&str> = file.iter().map(String::as_str).collect();
    let old = ["    let v20 = compute(20);", "    let v21 = compute(99);"];
    let hint = closest(&file, &old);
    assert!(
        hint.contains("    20\t    let v20 = compute(20);\n"),
        "{hint}"
    );
    assert!(
        hint.contains("    21\t    let v21 = compute(21);\n"),
        "{hint}"
    );
    assert!(!hint.contains("    19\t"), "{hint}");
    assert!(
        hint.contains("line 21: the old text has \"99\" where the file has \"21\""),
        "{hint}"
    );
    // Indentation named.
    let hint = closest(&file, &["let v5 = compute(5);"]);
    assert!(hint.contains("line 5: the indentation differs"), "{hint}");
    // A line missing from the old text.
    let hint = closest(
        &file,
        &["    let v5 = compute(5);", "    let v7 = compute(7);"],
    );
    assert!(hint.contains("line 6 of the file is missing"), "{hint}");
    // Shared words find a line no line equals.
    let hint = closest(&file, &["let v30 = compute(thirty);"]);
    assert!(hint.contains("    30\t"), "{hint}");
    // Nothing alike.
    let hint = closest(&file, &["unrelated words entirely"]);
    assert!(hint.contains("appears in the file"), "{hint}");
    // Capped: at most 8 lines, at most 2,000 characters.
    let long: Vec<&str> = file.iter().copied().take(30).collect();
    let hint = closest(&file, &long);
    assert_eq!(hint.matches('\t').count(), SHOWN_LINES_FOR_TEST);
    let wide = "x".repeat(5000);
    let wides: Vec<&str> = vec![wide.as_str(); 20];
    let hint = closest(&wides, &wides[..1]);
    assert!(hint.len() < 2600, "{}", hint.len());
}

const SHOWN_LINES_FOR_TEST: usize = closest::SHOWN_LINES;

/// Inputs that would take minutes with a quadratic search: a file of
/// 200,000 identical lines and an old text of 20,000 of them with the
/// last line changed; a 4 MB line against a 1 MB old text that differs in
/// its last byte. Only the answers are checked.
#[test]
fn adversarial_inputs_get_linear_answers() {
    let mut text = "a = 1;\n".repeat(200_000);
    text.push_str("end\n");
    let mut old = "a = 1;\n".repeat(20_000);
    old.push_str("a = 2;\n");
    assert!(missing(apply(&text, &old, "x")));
    // Re-indented, the same shape, must be refused as found many times.
    let shifted = "  a = 1;\n".repeat(20_000);
    assert!(matches!(
        apply(&text, &shifted, "x"),
        Err(Refusal::Ambiguous { count: 10, .. })
    ));
    let line = "ab".repeat(2_000_000);
    let mut needle = "ab".repeat(500_000);
    needle.push('c');
    assert!(missing(apply(&line, &needle, "x")));
    let hint = closest(&Lines::of(&text).texts(), &old_lines(&old).0);
    assert!(hint.contains("\ta = 1;"), "{hint}");
    // Lines that match everywhere once indentation is set aside, with an
    // indentation no place fits: the checks are capped and the edit
    // refused, not searched for minutes.
    let uneven: String = (0..20_000)
        .map(|i| {
            if i % 2 == 0 {
                "  a = 1;\n"
            } else {
                "    a = 1;\n"
            }
        })
        .collect();
    assert!(matches!(
        apply(&text, &uneven, "x"),
        Err(Refusal::Crowded { .. })
    ));
    // The same bytes without a match in invalid UTF-8: KMP over bytes.
    let mut bytes = b"ab".repeat(1_000_000);
    bytes.push(0xff);
    assert!(matches!(
        locate(&bytes, &format!("{}c", "ab".repeat(200_000)), "x", false),
        Err(Refusal::Missing)
    ));
}

#[test]
fn a_replace_all_that_would_write_too_much_is_refused() {
    let text = "a\n".repeat(100_000);
    let new = "b".repeat(1_000);
    assert!(matches!(
        apply_all(&text, "a", &new, true),
        Err(Refusal::TooLarge { .. })
    ));
    // Without replace_all it is merely ambiguous.
    assert!(matches!(
        apply(&text, "a", &new),
        Err(Refusal::Ambiguous { count: 100_000, .. })
    ));
}

//! Tests of the search engines (built-in, and ripgrep where installed).

use super::*;
use crate::tools::walk::tests::Tree;

fn query(pattern: &str) -> SearchQuery {
    SearchQuery {
        pattern: pattern.to_string(),
        regex: false,
        case_insensitive: false,
        glob: None,
        max_results: 100,
    }
}

fn sample() -> Tree {
    let long = format!("needle {}\n", "x".repeat(400));
    let mut binary = b"needle\0".to_vec();
    binary.extend_from_slice(b"more needle");
    let main = "fn main() {\n    let needle = 1;\n}\n// Needle again\n";
    let files = [
        (".gitignore", "*.log\nbuild/\n"),
        ("src/main.rs", main),
        ("src/lib.rs", "pub mod a;\r\nneedle in crlf\r\n"),
        ("src/a/deep.rs", "no match here\nthe needle\n"),
        ("README.md", "A needle in the docs.\n"),
        ("long.txt", &long),
    ];
    let tree = Tree::new("", &files);
    for path in ["skip.log", "build/gen.rs", ".hidden/h.txt", ".git/config"] {
        std::fs::create_dir_all(tree.0.join(path).parent().unwrap()).unwrap();
        std::fs::write(tree.0.join(path), "needle\n").unwrap();
    }
    std::fs::write(tree.0.join("data.bin"), binary).unwrap();
    let big = format!("needle\n{}", "0123456789abcde\n".repeat(300_000));
    std::fs::write(tree.0.join("big.txt"), big).unwrap();
    tree
}

const NEVER: &dyn Fn() -> bool = &|| false;

#[test]
fn builtin_search_finds_sorts_and_skips() {
    let tree = sample();
    let result = search_builtin(&tree.0, &tree.0, &query("needle"), NEVER).unwrap();
    let clipped = format!("long.txt:1: needle {}…", "x".repeat(293));
    let expected = [
        ".hidden/h.txt:1: needle",
        "README.md:1: A needle in the docs.",
        &clipped,
        "src/a/deep.rs:2: the needle",
        "src/lib.rs:2: needle in crlf",
        "src/main.rs:2:     let needle = 1;",
    ]
    .join("\n");
    assert_eq!(result.text, expected);
    assert_eq!(
        (result.matches, result.truncated, result.engine),
        (6, false, "builtin")
    );

    let mut q = query("NEEDLE");
    q.case_insensitive = true;
    q.glob = Some("src/**/*.rs".to_string());
    let result = search_builtin(&tree.0, &tree.0, &q, NEVER).unwrap();
    let expected = "src/a/deep.rs:2: the needle\nsrc/lib.rs:2: needle in crlf\n\
                    src/main.rs:2:     let needle = 1;\nsrc/main.rs:4: // Needle again";
    assert_eq!(result.text, expected);

    // A base below the root keeps paths relative to the root; a file works too.
    q.glob = Some("*.rs".to_string());
    let result = search_builtin(&tree.0, &tree.0.join("src/a"), &q, NEVER).unwrap();
    assert_eq!(result.text, "src/a/deep.rs:2: the needle");
    let result = search_builtin(&tree.0, &tree.0.join("src/main.rs"), &q, NEVER).unwrap();
    assert_eq!(result.matches, 2);
}

#[test]
fn builtin_cap_no_match_and_errors() {
    let tree = sample();
    let mut q = query("needle");
    q.max_results = 2;
    let result = search_builtin(&tree.0, &tree.0, &q, NEVER).unwrap();
    let expected = ".hidden/h.txt:1: needle\nREADME.md:1: A needle in the docs.\n\
                    … results truncated at 2 matches; narrow the search";
    assert_eq!(result.text, expected);
    assert!(result.truncated);

    let mut q = query("haystack");
    q.glob = Some("*.rs".to_string());
    let result = search_builtin(&tree.0, &tree.0, &q, NEVER).unwrap();
    assert_eq!(
        result.text,
        "No matches for \"haystack\" in files matching \"*.rs\"."
    );
    assert_eq!(result.matches, 0);

    assert!(search_builtin(&tree.0, &tree.0, &query("needle"), &|| true).is_err());
    let result = search(&tree.0, &tree.0, &query("needle"), NEVER).unwrap();
    let engine = if ripgrep_available() {
        "ripgrep"
    } else {
        "builtin"
    };
    assert_eq!((result.engine, result.matches), (engine, 6));
    assert!(search_builtin(&tree.0, &tree.0, &query(""), NEVER).is_err());
    assert!(search_builtin(&tree.0, &tree.0.join("nope"), &query("x"), NEVER).is_err());
}

#[test]
fn regex_without_ripgrep() {
    let tree = sample();
    let mut q = query("need.e");
    q.regex = true;
    let err = search_builtin(&tree.0, &tree.0, &q, NEVER)
        .unwrap_err()
        .to_string();
    assert!(err.contains("need ripgrep"), "{err}");
    q.pattern = "let needle".to_string();
    assert_eq!(
        search_builtin(&tree.0, &tree.0, &q, NEVER).unwrap().matches,
        1
    );
    q.pattern = r"needle = 1\;".to_string();
    assert_eq!(
        search_builtin(&tree.0, &tree.0, &q, NEVER).unwrap().matches,
        1
    );
    assert_eq!(regex_as_literal(r"a\.b"), Some("a.b".to_string()));
    assert_eq!(regex_as_literal(r"a\db"), None);
}

#[test]
fn scan_reports_line_numbers_with_folding() {
    let text = "İx\nabc\nxABC\nnone\nabc abc";
    let mut seen = Vec::new();
    scan(text, "abc", true, &mut |n, line| {
        seen.push((n, line.to_string()));
        true
    });
    let expected = [(2, "abc"), (3, "xABC"), (5, "abc abc")];
    assert_eq!(seen, expected.map(|(n, s)| (n, s.to_string())));
}

#[test]
fn ripgrep_agrees_with_builtin() {
    if !ripgrep_available() {
        eprintln!("ripgrep is not installed; skipping");
        return;
    }
    let tree = sample();
    // Names that sort differently as whole paths than component by component.
    for path in ["z/a/x", "z/a-b/x", "z/a.rs", "z/a b"] {
        std::fs::create_dir_all(tree.0.join(path).parent().unwrap()).unwrap();
        std::fs::write(tree.0.join(path), "needle\n").unwrap();
    }
    let mut queries = vec![query("needle"), query("nothing here")];
    let mut q = query("NEEDLE");
    q.case_insensitive = true;
    queries.push(q.clone());
    q.glob = Some("src/**/*.rs".to_string());
    queries.push(q.clone());
    q.glob = Some("*.rs".to_string());
    queries.push(q.clone());
    q.max_results = 3;
    queries.push(q);
    let mut capped = query("needle");
    capped.max_results = 2;
    queries.push(capped);
    for base in [
        tree.0.clone(),
        tree.0.join("z"),
        tree.0.join("src"),
        tree.0.join("src/main.rs"),
    ] {
        for q in &queries {
            let rg = search_ripgrep(&tree.0, &base, q, NEVER).unwrap();
            let builtin = search_builtin(&tree.0, &base, q, NEVER).unwrap();
            assert_eq!(rg.text, builtin.text, "{q:?} in {base:?}");
            assert_eq!(
                (rg.matches, rg.truncated),
                (builtin.matches, builtin.truncated)
            );
            assert_eq!(rg.engine, "ripgrep");
        }
    }
    let mut q = query("need(le");
    q.regex = true;
    let err = search_ripgrep(&tree.0, &tree.0, &q, NEVER)
        .unwrap_err()
        .to_string();
    assert!(err.contains("regex"), "{err}");
    q.pattern = "ne+dle = [0-9]".to_string();
    let result = search_ripgrep(&tree.0, &tree.0, &q, NEVER).unwrap();
    assert_eq!(result.text, "src/main.rs:2:     let needle = 1;");
    assert!(search_ripgrep(&tree.0, &tree.0, &query("needle"), &|| true).is_err());
}

//! Target of the policy: the command classifier.

use super::rng::Rng;

pub(super) fn command_classifier(rng: &mut Rng) -> Result<(), String> {
    const TOKENS: &[&str] = &[
        "ls", "cat", "git", "log", "sort", "-o", "rg", "--pre", " ", "'", "\"", "\\", "$", "`",
        "(", ")", "{", "}", ";", "&", "|", ">", "<", "<<", "*", "?", "[", "~", "#", "\n", "=",
        "cd", "..", "/", "a", "-",
    ];
    let line = rng.text(TOKENS, 16);
    let root = std::env::temp_dir();
    let verdict = crate::policy::classify(
        &line,
        &crate::policy::Context {
            root: &root,
            cwd: &root,
            path_var: None,
            shell: crate::process::shell::ShellKind::Posix,
        },
    );
    // Whatever writes with `>` (outside quotes it would be an operator) or
    // expands must ask; a line with neither quotes nor escapes is simple to
    // check.
    let plain = !line.contains(['\'', '"', '\\', '#']);
    if plain && verdict.is_read_only() && (line.contains('$') || line.contains('`')) {
        return Err(format!("judged read-only with an expansion: {line:?}"));
    }
    Ok(())
}

//! The system prompt: who the model is and where it works.

use std::path::Path;

/// The largest AGENTS.md we put into the system prompt.
const AGENTS_MD_LIMIT: usize = 64 * 1024;

/// Builds the system prompt for a session rooted at `cwd`. An `AGENTS.md`
/// at the workspace root, when present, is appended: it is where projects
/// keep instructions for coding agents.
pub fn system_prompt(cwd: &Path) -> String {
    let mut prompt = format!(
        "You are Spindle, a coding agent working inside a code editor. \
         The user's workspace is the directory {cwd}. Answer precisely and \
         concisely; use Markdown for code. When you are unsure about the \
         code, say so rather than guess.",
        cwd = cwd.display()
    );
    if let Ok(text) = std::fs::read_to_string(cwd.join("AGENTS.md")) {
        let text = truncate(&text, AGENTS_MD_LIMIT);
        prompt.push_str(
            "\n\nThe workspace's AGENTS.md holds instructions for you from the project:\n\n",
        );
        prompt.push_str(text);
    }
    prompt
}

fn truncate(text: &str, limit: usize) -> &str {
    if text.len() <= limit {
        return text;
    }
    let mut end = limit;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn agents_md_is_appended_when_present() {
        let dir =
            std::env::temp_dir().join(format!("spindle-prompt-{}", crate::util::random_hex()));
        std::fs::create_dir_all(&dir).unwrap();
        assert!(!system_prompt(&dir).contains("AGENTS.md"));
        std::fs::write(dir.join("AGENTS.md"), "Always run the tests.").unwrap();
        let prompt = system_prompt(&dir);
        assert!(prompt.contains(&dir.display().to_string()));
        assert!(prompt.ends_with("Always run the tests."));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn truncation_keeps_char_boundaries() {
        assert_eq!(truncate("héllo", 2), "h");
    }
}

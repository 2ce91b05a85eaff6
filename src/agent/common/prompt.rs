//! The system prompt: who the model is, where it works, what its tools are
//! for, and the instructions the user and the project left for it.
//!
//! The prompt is the request's stable prefix (provider caches hit on it),
//! so what changes while one works — the date, the git state — is taken
//! once per session ([`environment`]) and kept.

use std::path::{Path, PathBuf};

/// The most bytes of instructions (the user's and the project's files
/// together) the prompt carries.
const INSTRUCTIONS_LIMIT: usize = 64 * 1024;

/// One line of guidance for each built-in tool.
const TOOL_GUIDANCE: &str = "\
How to use the tools:
- read_file before you edit a file; read a large file in pages (start_line, line_count).
- search (text or regex) and glob find code faster than listing folders one by one.
- edit_file for small exact replacements; write_file for new files or whole rewrites; apply_patch for several files at once.
- run_command for builds, tests and git; prefer short, non-interactive commands; use background: true for servers and watchers, then job_output and job_stop.
- todo_write keeps a plan the user sees; update it as items get done.
- task hands a self-contained subtask to a subagent with a fresh conversation.
- ask_user only when you cannot go on without the user's decision.
- remember only what the user asks you to keep for later sessions.";

/// Builds the system prompt for a session rooted at `cwd`; `environment`
/// is the session's snapshot ([`environment`]).
pub fn system_prompt(cwd: &Path, environment: &str) -> String {
    let mut prompt = format!(
        "You are Spindle, a coding agent working inside a code editor. \
         The user's workspace is the directory {cwd}. Answer precisely and \
         concisely; use Markdown for code. When you are unsure about the \
         code, say so rather than guess.",
        cwd = cwd.display()
    );
    if !environment.is_empty() {
        prompt.push_str("\n\n");
        prompt.push_str(environment);
    }
    prompt.push_str("\n\n");
    prompt.push_str(TOOL_GUIDANCE);
    let instructions = instructions(cwd, &global_instructions_path());
    if !instructions.is_empty() {
        prompt.push_str("\n\n");
        prompt.push_str(&instructions);
    }
    prompt
}

/// Where the user keeps instructions for every workspace: `AGENTS.md`
/// beside the config file.
pub fn global_instructions_path() -> PathBuf {
    crate::config::default_path()
        .parent()
        .map(|dir| dir.join("AGENTS.md"))
        .unwrap_or_else(|| PathBuf::from("AGENTS.md"))
}

/// The date, the machine, the shell commands run under, and the
/// repository's branch and state: taken once, at the start of a session.
pub fn environment(cwd: &Path, shell: &crate::process::shell::Shell) -> String {
    let date = crate::clock::now_rfc3339();
    let mut out = format!(
        "Environment (at the start of this session):\n- Date: {} (UTC)\n- System: {} {}\n- Shell: {} (commands run with {})\n- Working folder: {}",
        &date[..date.len().min(10)],
        std::env::consts::OS,
        std::env::consts::ARCH,
        shell.name(),
        shell.describe(),
        cwd.display()
    );
    if let Some(git) = git_state(cwd) {
        out.push_str("\n- Git: ");
        out.push_str(&git);
    }
    out
}

/// The repository folder that holds `cwd` (`.git` a folder or a file).
fn repository_root(cwd: &Path) -> Option<PathBuf> {
    cwd.ancestors()
        .find(|dir| dir.join(".git").exists())
        .map(Path::to_path_buf)
}

/// The branch (read from HEAD, no git run) and, when git may run there
/// without running anything of the repository's, its short status.
fn git_state(cwd: &Path) -> Option<String> {
    let root = repository_root(cwd)?;
    let dot_git = root.join(".git");
    let git_dir = if dot_git.is_file() {
        let text = crate::tools::bounded::read_capped(&dot_git, 4096).ok()?;
        let text = String::from_utf8(text).ok()?;
        let target = text.trim().strip_prefix("gitdir:")?.trim().to_string();
        root.join(target)
    } else {
        dot_git
    };
    let head = crate::tools::bounded::read_capped(&git_dir.join("HEAD"), 4096).ok()?;
    let head = String::from_utf8_lossy(&head).trim().to_string();
    let branch = match head.strip_prefix("ref: refs/heads/") {
        Some(branch) => format!("branch {branch}"),
        // Only a commit id is shown: a `.git` file may point anywhere, and
        // whatever file is read there must not reach the prompt.
        None if head.len() >= 12 && head.bytes().all(|b| b.is_ascii_hexdigit()) => {
            format!("detached at {}", &head[..12])
        }
        None => return None,
    };
    let status = crate::policy::git::short_status(cwd, &root);
    Some(match status {
        Some(status) => format!("{branch}; {status}"),
        None => branch,
    })
}

/// The files of the workspace Spindle would read on its own behalf but
/// refuses (links out of their folder, FIFOs, devices, hard links, files
/// over their cap): the project's instruction files, its commands and its
/// `.spindle/config.json`. For a notice and `spindle doctor`. `agent_dir`:
/// the agent file's commands, as [`super::commands::available`] has it.
pub fn skipped_files(cwd: &Path, agent_dir: Option<&Path>) -> Vec<crate::tools::shipped::Skipped> {
    use crate::tools::shipped::{self, Skipped};
    let mut skipped = Vec::new();
    for (_, path) in project_instruction_files(cwd) {
        let folder = path.parent().unwrap_or(Path::new("/"));
        if let Err(why) = shipped::open(&path, folder) {
            skipped.push(Skipped { path, why });
        }
    }
    skipped.extend(super::commands::available_and_skipped(cwd, agent_dir).1);
    let config = cwd.join(".spindle").join("config.json");
    if let Err(why) = shipped::read(&config, cwd, crate::config::project::PROJECT_CONFIG_CAP) {
        skipped.push(Skipped { path: config, why });
    }
    skipped
}

/// The instruction files one may edit: the user's global file (where it
/// would be, when there is none yet) and the project's, root first.
pub fn editable_files(cwd: &Path) -> Vec<PathBuf> {
    let mut files = vec![global_instructions_path()];
    files.extend(
        project_instruction_files(cwd)
            .into_iter()
            .map(|(_, path)| path),
    );
    files
}

/// The project's instruction files, from the repository root down to
/// `cwd`, with the words that name each.
fn project_instruction_files(cwd: &Path) -> Vec<(String, PathBuf)> {
    let mut files = Vec::new();
    let top = repository_root(cwd).unwrap_or_else(|| cwd.to_path_buf());
    let mut dirs: Vec<&Path> = cwd
        .ancestors()
        .take_while(|d| d.starts_with(&top))
        .collect();
    dirs.reverse();
    for dir in dirs {
        let chosen = ["AGENTS.md", "CLAUDE.md", "GEMINI.md"]
            .iter()
            .map(|name| dir.join(name))
            .find(|path| std::fs::symlink_metadata(path).is_ok());
        if let Some(path) = chosen {
            let shown = path
                .strip_prefix(cwd)
                .map(|p| p.display().to_string())
                .unwrap_or_else(|_| path.display().to_string());
            files.push((format!("the project's {shown}"), path));
        }
    }
    files
}

/// How deep `@path` imports are followed (an imported file's imports
/// count one more), and how many files they may add in all.
const IMPORT_DEPTH: usize = 5;
const IMPORTS: usize = 32;

/// One instruction file to read: what names it, where it is, the folder
/// it must lie in (`None`: the user's own, anywhere) and how deep in
/// imports it was found.
struct Source {
    what: String,
    path: PathBuf,
    within: Option<PathBuf>,
    depth: usize,
}

/// The instructions left for the model: the user's global file, then the
/// project's `AGENTS.md` from the repository root down to `cwd` (each
/// folder's `CLAUDE.md` when it has no `AGENTS.md`, else its
/// `GEMINI.md`), within [`INSTRUCTIONS_LIMIT`], with a note when cut.
/// Each file's `@path` imports (relative to the file, or `@~/` from the
/// user's own) follow it, as Claude Code reads them: up to
/// [`IMPORT_DEPTH`] deep, each file once, and a project's only from
/// inside the workspace.
pub fn instructions(cwd: &Path, global: &Path) -> String {
    gather(cwd, global).0
}

/// The instructions ([`instructions`]) and one line for each file in
/// force or left out, saying where it came from, for `/memory`.
pub fn gather(cwd: &Path, global: &Path) -> (String, Vec<String>) {
    let top = repository_root(cwd).unwrap_or_else(|| cwd.to_path_buf());
    let mut sources: Vec<Source> = Vec::new();
    if global.is_file() {
        sources.push(Source {
            what: "your instructions for every workspace".into(),
            path: global.to_path_buf(),
            within: None,
            depth: 0,
        });
    }
    // A project's file is the project's only where it really is: a link
    // (`AGENTS.md -> ../../.ssh/id_rsa`) or a hard link to a file outside
    // the folder it was found in is not read, even inside a repository
    // that holds more (a dotfiles repository at the home folder). The
    // user's own global file may link anywhere.
    sources.extend(
        project_instruction_files(cwd)
            .into_iter()
            .map(|(what, path)| {
                let folder = path.parent().unwrap_or(Path::new("/")).to_path_buf();
                Source {
                    what,
                    path,
                    within: Some(folder),
                    depth: 0,
                }
            }),
    );
    sources.reverse();
    let mut out = String::new();
    let mut listed = Vec::new();
    let mut left = INSTRUCTIONS_LIMIT;
    let mut seen: Vec<PathBuf> = Vec::new();
    let mut imported = 0;
    while let Some(source) = sources.pop() {
        let Source {
            what,
            path,
            within,
            depth,
        } = source;
        let opened = match &within {
            None => crate::tools::bounded::open_regular(&path).ok(),
            Some(folder) => match crate::tools::shipped::open(&path, folder) {
                Ok(opened) => opened,
                Err(why) => {
                    let note = format!("Not included: {what}: {}.", why.reason());
                    out.push_str(&format!("\n\n({note})"));
                    listed.push(note);
                    continue;
                }
            },
        };
        let Some((file, size)) = opened else {
            continue;
        };
        // Each file once: an import loop ends at the file seen before.
        let real = crate::os::real_path(&file).unwrap_or_else(|| path.clone());
        if seen.contains(&real) {
            continue;
        }
        seen.push(real);
        // Never more than the limit is read, however large the file.
        let mut bytes = Vec::new();
        if std::io::Read::read_to_end(
            &mut std::io::Read::take(file, INSTRUCTIONS_LIMIT as u64 + 4),
            &mut bytes,
        )
        .is_err()
        {
            continue;
        }
        let longer = size > bytes.len() as u64;
        let text = String::from_utf8_lossy(&bytes);
        let text = text.trim();
        if text.is_empty() {
            continue;
        }
        if left == 0 {
            out.push_str(&format!(
                "\n\n(Not included, over the size limit: {what}, {}.)",
                path.display()
            ));
            continue;
        }
        let kept = truncate(text, left);
        left -= kept.len();
        if !out.is_empty() {
            out.push_str("\n\n");
        }
        out.push_str(&format!(
            "Instructions from {what} ({}):\n\n{kept}",
            path.display()
        ));
        listed.push(format!("{what}: {} ({} bytes)", path.display(), kept.len()));
        if kept.len() < text.len() || longer {
            out.push_str(&format!(
                "\n\n(Cut here: the instructions are limited to {INSTRUCTIONS_LIMIT} bytes; read {} for the rest.)",
                path.display()
            ));
        }
        if depth >= IMPORT_DEPTH {
            continue;
        }
        let base = path.parent().unwrap_or(Path::new("/"));
        let mut next = Vec::new();
        for name in imports(kept) {
            let Some(target) = import_path(base, name, within.is_none()) else {
                continue;
            };
            // A project's import stays in the workspace, lexically and as
            // a real path (no link out, no hard link).
            let inside = within.as_ref().map(|_| top.clone());
            if inside.as_ref().is_some_and(|top| !target.starts_with(top)) {
                if target.exists() {
                    let note =
                        format!("Not imported: @{name} from {what}: it is outside the workspace.");
                    out.push_str(&format!("\n\n({note})"));
                    listed.push(note);
                }
                continue;
            }
            if !target.is_file() || imported >= IMPORTS {
                continue;
            }
            imported += 1;
            next.push(Source {
                what: format!("@{name}, imported by {what}"),
                path: target,
                within: inside,
                depth: depth + 1,
            });
        }
        sources.extend(next.into_iter().rev());
    }
    (out, listed)
}

/// The `@path` imports of an instruction file: words starting with `@`
/// outside code (fenced blocks and backticks), trailing punctuation
/// left off.
fn imports(text: &str) -> Vec<&str> {
    let mut found = Vec::new();
    let mut fenced = false;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if fenced {
            continue;
        }
        // Backticks split a line into prose (even parts) and code.
        for (index, part) in line.split('`').enumerate() {
            if index % 2 == 1 {
                continue;
            }
            for word in part.split_whitespace() {
                let name = word
                    .strip_prefix('@')
                    .unwrap_or_default()
                    .trim_end_matches(['.', ',', ';', ':', ')', '!', '?', '"', '\'']);
                if !name.is_empty() && !found.contains(&name) {
                    found.push(name);
                }
            }
        }
    }
    found
}

/// Where an import points: relative to the importing file's folder, or
/// the home folder for `~/` (the user's own files only); `.` and `..`
/// resolved by name.
fn import_path(base: &Path, name: &str, own: bool) -> Option<PathBuf> {
    let joined = match name.strip_prefix("~/") {
        Some(rest) if own => crate::os::folders::home()?.join(rest),
        Some(_) => return None,
        None => base.join(name),
    };
    let mut path = PathBuf::new();
    for part in joined.components() {
        match part {
            std::path::Component::ParentDir => {
                path.pop();
            }
            std::path::Component::CurDir => {}
            other => path.push(other),
        }
    }
    Some(path)
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

    fn temp() -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("spindle-prompt-{}", crate::util::random_hex()));
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn instructions_come_from_the_user_and_the_repository_down_to_cwd() {
        let repo = temp();
        std::fs::create_dir_all(repo.join(".git")).unwrap();
        std::fs::write(repo.join(".git/HEAD"), "ref: refs/heads/feature/x\n").unwrap();
        let sub = repo.join("crates/core");
        std::fs::create_dir_all(&sub).unwrap();
        std::fs::write(repo.join("AGENTS.md"), "Root rule.").unwrap();
        std::fs::write(repo.join("crates/CLAUDE.md"), "Crates rule.").unwrap();
        std::fs::write(sub.join("AGENTS.md"), "Core rule.").unwrap();
        std::fs::write(sub.join("CLAUDE.md"), "ignored: AGENTS.md wins").unwrap();
        let global = repo.join("global-AGENTS.md");
        std::fs::write(&global, "Global rule.").unwrap();
        let text = instructions(&sub, &global);
        let order: Vec<usize> = ["Global rule.", "Root rule.", "Crates rule.", "Core rule."]
            .iter()
            .map(|rule| text.find(rule).unwrap_or_else(|| panic!("{rule}: {text}")))
            .collect();
        assert!(order.windows(2).all(|w| w[0] < w[1]), "{text}");
        assert!(!text.contains("ignored"));
        let env = environment(&sub, &crate::process::shell::Shell::sh());
        assert!(env.contains("branch feature/x"), "{env}");
        assert!(env.contains(&crate::clock::now_rfc3339()[..10]));
        std::fs::remove_dir_all(&repo).unwrap();
    }

    #[test]
    fn instructions_are_capped_with_a_note() {
        let dir = temp();
        std::fs::write(dir.join("AGENTS.md"), "x".repeat(INSTRUCTIONS_LIMIT + 10)).unwrap();
        let text = instructions(&dir, Path::new("/nonexistent/AGENTS.md"));
        assert!(text.contains("Cut here"), "{}", &text[text.len() - 200..]);
        let prompt = system_prompt(&dir, "Environment: test");
        assert!(prompt.contains("Environment: test") && prompt.contains("How to use the tools"));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn gemini_md_is_read_where_there_is_no_other() {
        let dir = temp();
        std::fs::write(dir.join("GEMINI.md"), "Gemini rule.").unwrap();
        let text = instructions(&dir, Path::new("/nonexistent/AGENTS.md"));
        assert!(text.contains("Gemini rule."), "{text}");
        std::fs::write(dir.join("CLAUDE.md"), "Claude rule.").unwrap();
        let text = instructions(&dir, Path::new("/nonexistent/AGENTS.md"));
        assert!(
            text.contains("Claude rule.") && !text.contains("Gemini"),
            "{text}"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn imports_are_followed_once_within_the_workspace_and_depth() {
        let root = temp();
        let repo = root.join("repo");
        std::fs::create_dir_all(repo.join(".git")).unwrap();
        std::fs::create_dir_all(repo.join("docs")).unwrap();
        std::fs::write(
            repo.join("CLAUDE.md"),
            "See @docs/style.md, and @docs/style.md again.\n\
             Not code: `@docs/code.md` nor\n```\n@docs/fenced.md\n```\n\
             Nor @someone, nor @../outside.md nor @/etc/hostname nor @docs/link.md.\n",
        )
        .unwrap();
        std::fs::write(
            repo.join("docs/style.md"),
            "Style rule. Back to @../CLAUDE.md; on to @chain1.md",
        )
        .unwrap();
        for name in ["code", "fenced"] {
            std::fs::write(
                repo.join(format!("docs/{name}.md")),
                format!("{name} was imported"),
            )
            .unwrap();
        }
        for n in 1..8 {
            std::fs::write(
                repo.join(format!("docs/chain{n}.md")),
                format!("Chain {n}. @chain{}.md", n + 1),
            )
            .unwrap();
        }
        std::fs::write(root.join("outside.md"), "outside was imported").unwrap();
        #[cfg(unix)]
        std::os::unix::fs::symlink(root.join("outside.md"), repo.join("docs/link.md")).unwrap();
        let text = instructions(&repo, Path::new("/nonexistent/AGENTS.md"));
        assert_eq!(text.matches("Style rule.").count(), 1, "{text}");
        assert_eq!(text.matches("See @docs/style.md").count(), 1, "{text}");
        assert!(
            text.contains("imported by the project's CLAUDE.md"),
            "{text}"
        );
        assert!(!text.contains("was imported"), "{text}");
        assert!(text.contains("Not imported: @../outside.md"), "{text}");
        // CLAUDE.md is depth 0, style.md 1, chain1 2 … chain4 5: the last.
        assert!(
            text.contains("Chain 4.") && !text.contains("Chain 5."),
            "{text}"
        );
        #[cfg(unix)]
        assert!(text.contains("Not included: @docs/link.md"), "{text}");
        // The user's own file imports from anywhere it names.
        let global = root.join("global.md");
        std::fs::write(&global, "Mine: @outside.md").unwrap();
        let text = instructions(&repo, &global);
        assert!(text.contains("outside was imported"), "{text}");
        std::fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn truncation_keeps_char_boundaries() {
        assert_eq!(truncate("héllo", 2), "h");
    }
}

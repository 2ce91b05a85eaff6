//! Agent Skills: folders holding a `SKILL.md` (front matter with `name`
//! and `description`, then instructions) and the files it names, found
//! where Claude Code, Codex and other agents keep them. The prompt lists
//! each skill's name and description; the model loads a body with the
//! `skill` tool when a task needs it, and each skill is a slash command.
//!
//! A project's skills are read only when the user trusts the project
//! (they are instructions for the model, written by whoever can commit),
//! and then only as [`crate::tools::shipped`] allows: no link out of the
//! workspace, no FIFO, a cap. The user's own may link anywhere.

use crate::tools::shipped::{self, Refused};
use std::path::{Path, PathBuf};

/// The largest `SKILL.md` read.
pub const SKILL_FILE_CAP: u64 = 64 * 1024;
/// The largest file beside it the `skill` tool reads.
pub const SKILL_EXTRA_CAP: u64 = 256 * 1024;
/// The most skill folders read from one place.
pub const SKILLS_MAX: usize = 100;
/// The most characters of a description (the format's own limit).
pub const DESCRIPTION_CAP: usize = 1024;
/// The most bytes the prompt's list of skills takes.
pub const LISTING_CAP: usize = 12 * 1024;
/// The most files beside `SKILL.md` named when a skill loads.
const FILES_SHOWN: usize = 50;

/// One skill in force.
#[derive(Debug, Clone, PartialEq)]
pub struct Skill {
    pub name: String,
    pub description: String,
    /// Its folder (the one holding `SKILL.md`).
    pub dir: PathBuf,
    /// Where it came from, in words: "the project's .claude/skills".
    pub origin: String,
    /// The folder its files must lie in; `None` for the user's own.
    pub within: Option<PathBuf>,
}

/// One skill, or place of skills, left out and why.
#[derive(Debug, Clone, PartialEq)]
pub struct Left {
    pub path: PathBuf,
    pub why: String,
}

impl Left {
    pub fn describe(&self) -> String {
        // A repository chooses its folder names: none may act on a terminal.
        let path = crate::util::visible(&self.path.display().to_string(), false);
        format!("{path}: {}", self.why)
    }
}

/// The skills in force in a workspace, the ones left out, and the
/// project's commands and skills shadowed by a name of the user's (a
/// built-in, or the user's own command or skill), which is used instead.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Found {
    pub skills: Vec<Skill>,
    pub left: Vec<Left>,
    pub shadowed: Vec<Left>,
}

/// The folders skills are read from, first wins: the user's, then the
/// project's (only when `trusted`), so a project never takes a name of
/// the user's.
fn places(cwd: &Path) -> Vec<(PathBuf, String, bool)> {
    let mut places = Vec::new();
    if let Some(dir) = crate::config::default_path().parent() {
        places.push((dir.join("skills"), "your Spindle skills".into(), false));
    }
    if let Some(home) = crate::os::folders::home() {
        for folder in [".agents", ".claude", ".codex"] {
            places.push((
                home.join(folder).join("skills"),
                format!("your ~/{folder}/skills"),
                false,
            ));
        }
    }
    for folder in [".spindle", ".agents", ".claude", ".codex"] {
        places.push((
            cwd.join(folder).join("skills"),
            format!("the project's {folder}/skills"),
            true,
        ));
    }
    places
}

/// Every skill of the workspace at `cwd` (the project's only when the
/// user trusts it) and what was left out: untrusted, malformed, too
/// large, a link out, or a name an earlier one took.
pub fn discover(cwd: &Path, trusted: bool) -> Found {
    // The project's skills are its root's, from any of its folders.
    let root = crate::config::project::root(cwd);
    discover_in(places(&root), &root, trusted)
}

/// [`discover`] in the places given: (folder, its words, the project's).
fn discover_in(places: Vec<(PathBuf, String, bool)>, cwd: &Path, trusted: bool) -> Found {
    let mut found = Found::default();
    for (place, origin, project) in places {
        let Ok(entries) = std::fs::read_dir(&place) else {
            continue;
        };
        let mut dirs: Vec<PathBuf> = entries
            .filter_map(|entry| entry.ok().map(|e| e.path()))
            .take(SKILLS_MAX * 4)
            .collect();
        dirs.sort();
        if dirs.len() > SKILLS_MAX {
            found.left.push(Left {
                path: place.clone(),
                why: format!(
                    "only the first {SKILLS_MAX} of its {} entries are read",
                    dirs.len()
                ),
            });
            dirs.truncate(SKILLS_MAX);
        }
        for dir in dirs {
            let file = dir.join("SKILL.md");
            if std::fs::symlink_metadata(&file).is_err() {
                continue;
            }
            if project && !trusted {
                found.left.push(Left {
                    path: dir,
                    why: "the project is not trusted, so its skills are not read (spindle trust)"
                        .into(),
                });
                continue;
            }
            let within = project.then(|| cwd.to_path_buf());
            match read_skill(&dir, within.as_deref()) {
                Ok((name, description, _)) => {
                    if let Some(first) = found.skills.iter().find(|s| s.name == name) {
                        if first.within.is_none() && project {
                            let why = format!(
                                "/{name} from {origin} is shadowed by your skill from {} ({}), which is used",
                                first.origin,
                                crate::util::visible(&first.dir.display().to_string(), false)
                            );
                            found.shadowed.push(Left { path: dir, why });
                            continue;
                        }
                        let why = format!("{} from {} comes first", name, first.origin);
                        found.left.push(Left { path: dir, why });
                        continue;
                    }
                    found.skills.push(Skill {
                        name,
                        description,
                        dir,
                        origin: origin.clone(),
                        within,
                    });
                }
                Err(why) => found.left.push(Left { path: file, why }),
            }
        }
    }
    found
}

/// Reads one skill's `SKILL.md`: its name (the front matter's, else the
/// folder's), description and body.
fn read_skill(dir: &Path, within: Option<&Path>) -> Result<(String, String, String), String> {
    let path = dir.join("SKILL.md");
    let bytes = read_in(&path, within, SKILL_FILE_CAP)?;
    let text = String::from_utf8(bytes).map_err(|_| "it is not UTF-8 text".to_string())?;
    let Some((fields, body)) = front_matter(&text) else {
        return Err("it has no front matter (--- name: … description: … ---)".into());
    };
    let field = |key: &str| {
        fields
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.clone())
    };
    let folder = dir.file_name().and_then(|n| n.to_str()).unwrap_or("");
    let name = field("name").unwrap_or_else(|| folder.to_string());
    if !valid_name(&name) {
        return Err(format!(
            "its name {:?} is not 1 to 64 lowercase letters, digits and hyphens",
            crate::util::visible(&name, false)
        ));
    }
    let description = field("description").unwrap_or_default();
    let description = crate::util::visible(description.trim(), false);
    if description.is_empty() {
        return Err("its front matter has no description".into());
    }
    let description = description.chars().take(DESCRIPTION_CAP).collect();
    Ok((name, description, body.to_string()))
}

/// A file of a skill: as a shipped file when it must lie `within` a
/// folder, else the user's own (any link, but a regular file in the cap).
fn read_in(path: &Path, within: Option<&Path>, cap: u64) -> Result<Vec<u8>, String> {
    let read = match within {
        Some(within) => shipped::read(path, within, cap),
        None => own_file(path, cap),
    };
    match read {
        Ok(Some(bytes)) => Ok(bytes),
        Ok(None) => Err("it is missing".into()),
        Err(Refused::Link) => Err("it is a link out of the workspace".into()),
        Err(why) => Err(why.reason()),
    }
}

/// One of the user's own files (a command, a skill): links are theirs to
/// make, but a FIFO or a file over `cap` is refused all the same.
pub fn own_file(path: &Path, cap: u64) -> Result<Option<Vec<u8>>, crate::tools::shipped::Refused> {
    use crate::tools::bounded::{read_capped, ReadError};
    use crate::tools::shipped::Refused;
    match std::fs::metadata(path) {
        Ok(meta) if !meta.is_file() => return Err(Refused::NotRegular),
        Err(_) => return Ok(None),
        Ok(_) => {}
    }
    match read_capped(path, cap) {
        Ok(bytes) => Ok(Some(bytes)),
        Err(ReadError::Missing) => Ok(None),
        Err(ReadError::Directory | ReadError::NotRegular) => Err(Refused::NotRegular),
        Err(ReadError::TooLarge(size)) => Err(Refused::TooLarge(size)),
        Err(ReadError::Io(error)) => Err(Refused::Unreadable(error.to_string())),
    }
}

/// The Agent Skills name rule: lowercase letters, digits and hyphens, no
/// hyphen at either end or twice in a row.
fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && !name.starts_with('-')
        && !name.ends_with('-')
        && !name.contains("--")
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
}

/// A markdown file's front matter (`---` lines around `key: value`
/// lines; an indented line or a `>`/`|` block continues the value) and
/// the body after it. `None` when the file has none.
pub fn front_matter(text: &str) -> Option<(Vec<(String, String)>, &str)> {
    let rest = text
        .strip_prefix("---\n")
        .or_else(|| text.strip_prefix("---\r\n"))?;
    let end = if rest.starts_with("---") {
        0
    } else {
        rest.find("\n---")? + 1
    };
    let mut fields: Vec<(String, String)> = Vec::new();
    for line in rest[..end].lines() {
        let continued = line.starts_with([' ', '\t']);
        match (continued, fields.last_mut()) {
            (true, Some((_, value))) => {
                if !value.is_empty() {
                    value.push(' ');
                }
                value.push_str(line.trim());
            }
            _ => {
                if let Some((key, value)) = line.split_once(':') {
                    let value = value.trim();
                    let value = if matches!(value, ">" | "|" | ">-" | "|-") {
                        ""
                    } else {
                        value
                    };
                    let value = value
                        .strip_prefix('"')
                        .and_then(|v| v.strip_suffix('"'))
                        .or_else(|| value.strip_prefix('\'').and_then(|v| v.strip_suffix('\'')))
                        .unwrap_or(value);
                    fields.push((key.trim().to_string(), value.to_string()));
                }
            }
        }
    }
    let after = &rest[end..];
    let body = after
        .split_once('\n')
        .map(|(_, body)| body)
        .unwrap_or("")
        .trim_start_matches(['\r', '\n']);
    Some((fields, body))
}

impl Skill {
    /// Its instructions, read again now (a change since the list is
    /// seen), with the folder and the files beside it named.
    pub fn load(&self) -> Result<String, String> {
        let (_, _, body) = read_skill(&self.dir, self.within.as_deref())
            .map_err(|why| format!("the skill {} cannot be read: {why}", self.name))?;
        let mut out = format!(
            "Skill {} (from {}; its folder is {}):\n\n{}",
            self.name,
            self.origin,
            self.dir.display(),
            body.trim_end()
        );
        let files = self.files();
        if !files.is_empty() {
            out.push_str(
                "\n\nFiles of this skill (read one with the skill tool's `file` argument):\n",
            );
            for file in files {
                out.push_str("- ");
                out.push_str(&file);
                out.push('\n');
            }
        }
        Ok(out)
    }

    /// The files beside `SKILL.md`, two folders deep, relative to its
    /// folder, at most [`FILES_SHOWN`].
    fn files(&self) -> Vec<String> {
        let mut out = Vec::new();
        let mut stack = vec![(self.dir.clone(), 0usize)];
        while let Some((dir, depth)) = stack.pop() {
            let Ok(entries) = std::fs::read_dir(&dir) else {
                continue;
            };
            let mut paths: Vec<PathBuf> = entries
                .filter_map(|e| e.ok().map(|e| e.path()))
                .take(FILES_SHOWN * 2)
                .collect();
            paths.sort();
            for path in paths {
                let Ok(meta) = std::fs::symlink_metadata(&path) else {
                    continue;
                };
                if meta.is_dir() && depth < 2 {
                    stack.push((path, depth + 1));
                } else if meta.is_file() && out.len() < FILES_SHOWN {
                    if let Ok(relative) = path.strip_prefix(&self.dir) {
                        // With `/` on every system: the model gives it back.
                        let parts: Vec<String> = relative
                            .components()
                            .map(|part| part.as_os_str().to_string_lossy().into_owned())
                            .collect();
                        let relative = parts.join("/");
                        if relative != "SKILL.md" {
                            out.push(crate::util::visible(&relative, false));
                        }
                    }
                }
            }
        }
        out.sort();
        out
    }

    /// A file of the skill, `relative` to its folder: never outside it
    /// (no absolute path, no `..`, no link out), within a cap.
    pub fn file(&self, relative: &str) -> Result<String, String> {
        use std::path::Component;
        let given = Path::new(relative);
        if relative.is_empty()
            || !given
                .components()
                .all(|part| matches!(part, Component::Normal(_) | Component::CurDir))
        {
            return Err(format!(
                "file must be a path inside the skill's folder, such as scripts/run.sh (got {relative:?})"
            ));
        }
        let path = self.dir.join(given);
        let bytes = match &self.within {
            Some(_) => shipped::read(&path, &self.dir, SKILL_EXTRA_CAP),
            None => own_file(&path, SKILL_EXTRA_CAP),
        };
        match bytes {
            Ok(Some(bytes)) => Ok(String::from_utf8_lossy(&bytes).into_owned()),
            Ok(None) => Err(format!("the skill {} has no file {relative}", self.name)),
            Err(Refused::Link) => Err(format!(
                "{relative} is a link out of the skill's folder and is not read"
            )),
            Err(why) => Err(format!("{relative} is not read: {}", why.reason())),
        }
    }
}

/// The system prompt's list of skills, within [`LISTING_CAP`].
pub fn listing(skills: &[Skill]) -> String {
    if skills.is_empty() {
        return String::new();
    }
    let mut out = String::from(
        "Skills (instructions for particular tasks): when a task matches one, load it with the skill tool before you start, and follow it.\n",
    );
    for (at, skill) in skills.iter().enumerate() {
        let line = format!("- {}: {}\n", skill.name, skill.description);
        if out.len() + line.len() > LISTING_CAP {
            out.push_str(&format!(
                "({} more skills are not listed here; the user's /skills lists them all.)\n",
                skills.len() - at
            ));
            break;
        }
        out.push_str(&line);
    }
    out.truncate(out.trim_end().len());
    out
}

/// `/skills`: each skill in force and where it came from, then the ones
/// left out.
pub fn report(found: &Found) -> String {
    let mut out = String::new();
    if found.skills.is_empty() {
        out.push_str("No skills are in force. A skill is a folder with a SKILL.md in .claude/skills/, .agents/skills/, .codex/skills/ or .spindle/skills/ (of a trusted project, or in your home folder).");
    } else {
        out.push_str("Skills in force (each is also a slash command):\n");
        for skill in &found.skills {
            out.push_str(&format!(
                "- /{} — {} ({}: {})\n",
                skill.name,
                skill.description.chars().take(120).collect::<String>(),
                skill.origin,
                crate::util::visible(&skill.dir.display().to_string(), false)
            ));
        }
    }
    if !found.left.is_empty() {
        out.push_str("\nLeft out:\n");
        for left in &found.left {
            out.push_str(&format!("- {}\n", left.describe()));
        }
    }
    if !found.shadowed.is_empty() {
        out.push_str(
            "\nShadowed (the project's, under a name of yours or a built-in, which comes first):\n",
        );
        for left in &found.shadowed {
            out.push_str(&format!("- {}\n", left.describe()));
        }
    }
    out.trim_end().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn front_matter_with_quotes_blocks_and_continuations() {
        let text = "---\nname: pdf\ndescription: >\n  Fill PDF forms\n  and merge files.\nlicense: 'MIT'\n---\n\n# PDF\nBody.\n";
        let (fields, body) = front_matter(text).unwrap();
        assert_eq!(fields[0], ("name".into(), "pdf".into()));
        assert_eq!(
            fields[1],
            (
                "description".into(),
                "Fill PDF forms and merge files.".into()
            )
        );
        assert_eq!(fields[2], ("license".into(), "MIT".into()));
        assert_eq!(body, "# PDF\nBody.\n");
        assert_eq!(front_matter("# no front matter"), None);
        assert_eq!(front_matter("---\nname: x\nno end"), None);
        let (empty, body) = front_matter("---\n---\nbody").unwrap();
        assert!(empty.is_empty());
        assert_eq!(body, "body");
    }

    #[test]
    fn names_follow_the_format() {
        for good in ["pdf", "code-review", "a1", &"x".repeat(64)] {
            assert!(valid_name(good), "{good}");
        }
        for bad in [
            "",
            "-a",
            "a-",
            "a--b",
            "Code",
            "a_b",
            "a b",
            "../x",
            &"x".repeat(65),
        ] {
            assert!(!valid_name(bad), "{bad}");
        }
    }

    fn skill_dir(root: &Path, name: &str, text: &str) -> PathBuf {
        let dir = root.join(name);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("SKILL.md"), text).unwrap();
        dir
    }

    #[test]
    fn project_skills_need_trust_and_the_first_of_a_name_wins() {
        let cwd =
            std::env::temp_dir().join(format!("spindle-skills-{}", crate::util::random_hex()));
        let claude = cwd.join(".claude/skills");
        let agents = cwd.join(".agents/skills");
        skill_dir(
            &claude,
            "review",
            "---\nname: review\ndescription: Review code\n---\nLook hard.",
        );
        skill_dir(
            &agents,
            "review",
            "---\ndescription: Another review\n---\nOther.",
        );
        skill_dir(&claude, "broken", "no front matter");
        skill_dir(&claude, "Bad", "---\ndescription: a bad name\n---\n");
        skill_dir(&claude, "quiet", "---\nname: quiet\n---\nno description");
        std::fs::create_dir_all(claude.join("empty")).unwrap();

        let untrusted = discover(&cwd, false);
        assert!(untrusted.skills.iter().all(|s| s.within.is_none()));
        assert!(untrusted
            .left
            .iter()
            .any(|l| l.path == claude.join("review") && l.why.contains("not trusted")));

        let found = discover(&cwd, true);
        let review = found.skills.iter().find(|s| s.name == "review").unwrap();
        // .agents comes before .claude.
        assert_eq!(review.description, "Another review");
        assert_eq!(review.origin, "the project's .agents/skills");
        let whys: Vec<String> = found.left.iter().map(Left::describe).collect();
        assert!(
            whys.iter()
                .any(|w| w.contains("review from the project's .agents/skills comes first")),
            "{whys:?}"
        );
        assert!(
            whys.iter()
                .any(|w| w.contains("broken") && w.contains("no front matter")),
            "{whys:?}"
        );
        assert!(whys.iter().any(|w| w.contains("\"Bad\"")), "{whys:?}");
        assert!(
            whys.iter()
                .any(|w| w.contains("quiet") && w.contains("no description")),
            "{whys:?}"
        );
        assert!(!whys.iter().any(|w| w.contains("empty")), "{whys:?}");
        let text = review.load().unwrap();
        assert!(
            text.contains("Other.") && text.contains("Skill review"),
            "{text}"
        );
        let listing = listing(&found.skills);
        assert!(listing.contains("- review: Another review"), "{listing}");
    }

    #[test]
    fn a_huge_skill_is_left_out_and_files_stay_inside_the_folder() {
        let cwd =
            std::env::temp_dir().join(format!("spindle-skills-{}", crate::util::random_hex()));
        let skills = cwd.join(".spindle/skills");
        let huge = format!(
            "---\nname: huge\ndescription: big\n---\n{}",
            "x".repeat(SKILL_FILE_CAP as usize)
        );
        skill_dir(&skills, "huge", &huge);
        let dir = skill_dir(
            &skills,
            "tools",
            "---\nname: tools\ndescription: Has files\n---\nSee scripts/run.sh.",
        );
        std::fs::create_dir_all(dir.join("scripts")).unwrap();
        std::fs::write(dir.join("scripts/run.sh"), "echo hi").unwrap();
        let found = discover(&cwd, true);
        assert!(
            found.left.iter().any(|l| l.why.contains("too large")),
            "{:?}",
            found.left
        );
        let tools = found.skills.iter().find(|s| s.name == "tools").unwrap();
        assert!(tools.load().unwrap().contains("- scripts/run.sh"));
        assert_eq!(tools.file("scripts/run.sh").unwrap(), "echo hi");
        for outside in ["../huge/SKILL.md", "/etc/passwd", ""] {
            assert!(tools.file(outside).is_err(), "{outside}");
        }
        assert!(tools
            .file("missing.txt")
            .unwrap_err()
            .contains("has no file"));
    }

    #[test]
    fn the_listing_is_capped() {
        let skills: Vec<Skill> = (0..200)
            .map(|n| Skill {
                name: format!("skill-{n}"),
                description: "d".repeat(200),
                dir: PathBuf::from("x"),
                origin: "o".into(),
                within: None,
            })
            .collect();
        let text = listing(&skills);
        assert!(text.len() <= LISTING_CAP + 200, "{}", text.len());
        assert!(text.contains("more skills are not listed here"));
    }

    /// A trusted project's skill never takes the name of the user's: the
    /// user's is in force, the project's listed as shadowed, naming both.
    #[test]
    fn a_users_skill_comes_before_a_projects_of_the_same_name() {
        let root =
            std::env::temp_dir().join(format!("spindle-skills-{}", crate::util::random_hex()));
        let cwd = root.join("ws");
        let mine = root.join("mine");
        skill_dir(
            &mine,
            "deploy",
            "---\nname: deploy\ndescription: Mine\n---\nMINE",
        );
        let theirs = skill_dir(
            &cwd.join(".claude/skills"),
            "deploy",
            "---\nname: deploy\ndescription: Theirs\n---\nTHEIRS",
        );
        let places = vec![
            (mine.clone(), "your ~/.claude/skills".to_string(), false),
            (
                cwd.join(".claude/skills"),
                "the project's .claude/skills".to_string(),
                true,
            ),
        ];
        let found = discover_in(places, &cwd, true);
        assert_eq!(found.skills.len(), 1, "{found:?}");
        assert_eq!(found.skills[0].description, "Mine");
        assert!(found.skills[0].within.is_none());
        assert!(found.left.is_empty(), "{found:?}");
        assert_eq!(found.shadowed.len(), 1, "{found:?}");
        assert_eq!(found.shadowed[0].path, theirs);
        let text = report(&found);
        assert!(
            text.contains("Shadowed") && text.contains("/deploy from the project's .claude/skills is shadowed by your skill from your ~/.claude/skills"),
            "{text}"
        );
        // Every place of the user's comes before every place of the project's.
        let order = super::places(&cwd);
        let first = order.iter().position(|(_, _, project)| *project).unwrap();
        assert!(
            order[first..].iter().all(|(_, _, project)| *project),
            "{order:?}"
        );
        assert!(first > 0, "{order:?}");
        std::fs::remove_dir_all(&root).unwrap();
    }
}

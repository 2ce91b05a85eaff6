//! Git, judged read-only only for a short list of subcommands and options,
//! and run with the repository's ability to run programs taken away.
//!
//! Git runs programs that its configuration names: hooks, `core.fsmonitor`,
//! pagers, external diff and textconv drivers, clean/smudge filters,
//! `gpg.program` for signatures. A repository's own configuration file sits
//! in the workspace, where a model (or whoever wrote the workspace) can put
//! anything. So a git command runs unasked only when (1) its subcommand and
//! every option are listed here, (2) it has no global option that changes
//! the repository or configuration (`-c`, `-C`, `--git-dir`, …), (3) the
//! repository's own configuration holds only keys known not to run
//! programs (`plain_repository_config`), and (4) it runs with
//! `neutralising_env`, which turns hooks, fsmonitor, pagers and optional
//! index writes off and refuses embedded bare repositories.

use super::programs::Table;
use std::path::Path;

/// Options of `git` itself (before the subcommand) that are harmless.
pub(crate) const GLOBAL_OPTIONS: &[&str] = &["--no-pager", "-P", "--no-optional-locks"];

/// The options of the diff machinery shared by diff, log and show. Absent
/// on purpose: `--output` (writes a file), `--ext-diff` and `--textconv`
/// (run configured programs), `-O` (reads an order file: not needed),
/// `--submodule` (reads submodules, with their own configuration).
const DIFF_LONG: &[&str] = &[
    "--patch",
    "--no-patch",
    "--raw",
    "--numstat",
    "--shortstat",
    "--summary",
    "--name-only",
    "--name-status",
    "--patch-with-stat",
    "--patch-with-raw",
    "--no-color",
    "--color-words",
    "--no-renames",
    "--irreversible-delete",
    "--no-relative",
    "--text",
    "--ignore-space-change",
    "--ignore-all-space",
    "--ignore-blank-lines",
    "--ignore-space-at-eol",
    "--ignore-cr-at-eol",
    "--minimal",
    "--patience",
    "--histogram",
    "--check",
    "--full-index",
    "--binary",
    "--no-prefix",
    "--exit-code",
    "--quiet",
    "--cached",
    "--staged",
    "--merge-base",
    "--no-ext-diff",
    "--no-textconv",
    "--no-index",
    "--ita-invisible-in-index",
    "--function-context",
    "--ignore-submodules",
];

const DIFF_VALUE: &[&str] = &[
    "--inter-hunk-context",
    "--diff-filter",
    "--word-diff-regex",
    "--src-prefix",
    "--dst-prefix",
    "--line-prefix",
    "--diff-algorithm",
    "--anchored",
];

const DIFF_OPTIONAL: &[&str] = &[
    "--unified",
    "--stat",
    "--dirstat",
    "--color",
    "--word-diff",
    "--abbrev",
    "--find-renames",
    "--find-copies",
    "--relative",
    "--break-rewrites",
    "--color-moved",
];

/// Options of the revision walk (log and show) on top of the diff ones.
/// Absent on purpose: `--show-signature` (runs gpg), `--output`,
/// `--remerge-diff` (writes objects). Format placeholders `%G…` (which run
/// gpg too) are refused wherever they appear.
const LOG_LONG: &[&str] = &[
    "--oneline",
    "--graph",
    "--no-decorate",
    "--all",
    "--reverse",
    "--first-parent",
    "--merges",
    "--no-merges",
    "--follow",
    "--abbrev-commit",
    "--no-abbrev-commit",
    "--full-history",
    "--simplify-merges",
    "--simplify-by-decoration",
    "--left-right",
    "--cherry-pick",
    "--cherry-mark",
    "--boundary",
    "--topo-order",
    "--date-order",
    "--author-date-order",
    "--source",
    "--use-mailmap",
    "--log-size",
    "--children",
    "--parents",
    "--no-notes",
    "--invert-grep",
    "--regexp-ignore-case",
    "--extended-regexp",
    "--fixed-strings",
    "--all-match",
    "--pickaxe-all",
    "--pickaxe-regex",
    "--ancestry-path",
    "--cc",
    "--expand-tabs",
    "--no-expand-tabs",
    "--no-walk",
];

const LOG_VALUE: &[&str] = &[
    "--max-count",
    "--skip",
    "--since",
    "--after",
    "--until",
    "--before",
    "--author",
    "--committer",
    "--grep",
    "--format",
    "--date",
    "--encoding",
    "--min-parents",
    "--max-parents",
    "--diff-merges",
];

const LOG_OPTIONAL: &[&str] = &[
    "--pretty",
    "--decorate",
    "--branches",
    "--tags",
    "--remotes",
];

/// One read-only subcommand and what it accepts.
pub(crate) struct Subcommand {
    pub name: &'static str,
    pub table: Table,
    /// Extra option groups accepted besides the table (the diff and log
    /// option lists).
    pub diff: bool,
    pub log: bool,
    /// Whether operands (revisions, paths, patterns) are accepted.
    pub operands: bool,
}

/// A table whose short options in `optional` take an attached value only.
const fn with_optional(mut table: Table, optional: &'static str) -> Table {
    table.short_optional = optional;
    table
}

const fn table(
    short: &'static str,
    short_value: &'static str,
    long: &'static [&'static str],
    long_value: &'static [&'static str],
    long_optional: &'static [&'static str],
) -> Table {
    Table {
        short,
        short_value,
        short_optional: "",
        long,
        long_value,
        long_optional,
        numeric: false,
    }
}

/// The subcommands that only read the repository. Others (commit, checkout,
/// config, fetch, stash, …) change something or reach the network.
pub(crate) const SUBCOMMANDS: &[Subcommand] = &[
    Subcommand {
        name: "status",
        table: table(
            "sbvz",
            "",
            &[
                "--short",
                "--branch",
                "--long",
                "--verbose",
                "--no-renames",
                "--ahead-behind",
                "--no-ahead-behind",
                "--show-stash",
                "--null",
            ],
            &[],
            &[
                "--porcelain",
                "--untracked-files",
                "--ignored",
                "--ignore-submodules",
                "--find-renames",
            ],
        ),
        diff: false,
        log: false,
        operands: true,
    },
    Subcommand {
        name: "diff",
        table: with_optional(table("pusRawbzqMCBD", "lSG", &[], &[], &[]), "U"),
        diff: true,
        log: false,
        operands: true,
    },
    Subcommand {
        name: "log",
        table: with_optional(table("pusRawbzqMCBDiEFmc", "nSGL", &[], &[], &[]), "U"),
        diff: true,
        log: true,
        operands: true,
    },
    Subcommand {
        name: "show",
        table: with_optional(table("pusRawbzqMCBDiEFmc", "nSG", &[], &[], &[]), "U"),
        diff: true,
        log: true,
        operands: true,
    },
    Subcommand {
        name: "blame",
        table: with_optional(
            table(
                "lstewfnpcb",
                "L",
                &[
                    "--porcelain",
                    "--line-porcelain",
                    "--incremental",
                    "--show-name",
                    "--show-number",
                    "--root",
                    "--show-stats",
                    "--show-email",
                    "--color-lines",
                    "--color-by-age",
                    "--minimal",
                    "--no-textconv",
                ],
                &["--date"],
                &["--abbrev"],
            ),
            "MC",
        ),
        diff: false,
        log: false,
        operands: true,
    },
    Subcommand {
        name: "ls-files",
        table: table(
            "cdmoiskutvfz",
            "x",
            &[
                "--cached",
                "--deleted",
                "--modified",
                "--others",
                "--ignored",
                "--stage",
                "--unmerged",
                "--killed",
                "--directory",
                "--no-empty-directory",
                "--exclude-standard",
                "--full-name",
                "--recurse-submodules",
                "--debug",
                "--deduplicate",
                "--error-unmatch",
                "--sparse",
            ],
            &["--exclude", "--format", "--exclude-per-directory"],
            &["--abbrev", "--eol"],
        ),
        diff: false,
        log: false,
        operands: true,
    },
    Subcommand {
        name: "ls-tree",
        table: table(
            "drtlz",
            "",
            &[
                "--long",
                "--name-only",
                "--name-status",
                "--object-only",
                "--full-name",
                "--full-tree",
            ],
            &["--format"],
            &["--abbrev"],
        ),
        diff: false,
        log: false,
        operands: true,
    },
    Subcommand {
        name: "rev-parse",
        table: table(
            "q",
            "",
            &[
                "--show-toplevel",
                "--git-dir",
                "--absolute-git-dir",
                "--git-common-dir",
                "--is-inside-work-tree",
                "--is-inside-git-dir",
                "--is-bare-repository",
                "--is-shallow-repository",
                "--show-prefix",
                "--show-cdup",
                "--show-superproject-working-tree",
                "--verify",
                "--quiet",
                "--symbolic",
                "--symbolic-full-name",
                "--all",
                "--revs-only",
                "--no-revs",
                "--flags",
                "--no-flags",
                "--sq",
                "--local-env-vars",
                "--show-object-format",
            ],
            &["--since", "--until", "--path-format", "--git-path"],
            &[
                "--short",
                "--abbrev-ref",
                "--branches",
                "--tags",
                "--remotes",
            ],
        ),
        diff: false,
        log: false,
        operands: true,
    },
    Subcommand {
        name: "describe",
        table: table(
            "",
            "",
            &[
                "--tags",
                "--all",
                "--long",
                "--always",
                "--contains",
                "--exact-match",
                "--first-parent",
                "--debug",
            ],
            &["--candidates", "--match", "--exclude"],
            // Not `--dirty`/`--broken`: they refresh (write) the index.
            &["--abbrev"],
        ),
        diff: false,
        log: false,
        operands: true,
    },
    // Listing only: no operands, so nothing is created, renamed or deleted.
    Subcommand {
        name: "branch",
        table: table(
            "arvi",
            "",
            &[
                "--all",
                "--remotes",
                "--verbose",
                "--show-current",
                "--no-color",
                "--ignore-case",
                "--no-abbrev",
                "--omit-empty",
            ],
            &[
                "--sort",
                "--format",
                "--no-contains",
                "--no-merged",
                "--points-at",
            ],
            &["--color", "--abbrev", "--contains", "--merged"],
        ),
        diff: false,
        log: false,
        operands: false,
    },
    // `git remote` and `git remote -v`: listing, no network.
    Subcommand {
        name: "remote",
        table: table("v", "", &["--verbose"], &[], &[]),
        diff: false,
        log: false,
        operands: false,
    },
    Subcommand {
        name: "grep",
        table: table(
            "niwvlLchHEFGPoqzIr",
            "efABCm",
            &[
                "--cached",
                "--untracked",
                "--no-index",
                "--recurse-submodules",
                "--full-name",
                "--heading",
                "--break",
                "--line-number",
                "--column",
                "--no-color",
                "--count",
                "--files-with-matches",
                "--files-without-match",
                "--name-only",
                "--ignore-case",
                "--word-regexp",
                "--invert-match",
                "--all-match",
                "--and",
                "--or",
                "--not",
                "--extended-regexp",
                "--fixed-strings",
                "--basic-regexp",
                "--perl-regexp",
                "--only-matching",
                "--quiet",
                "--null",
                "--no-textconv",
                "--show-function",
                "--function-context",
                "--exclude-standard",
                "--no-exclude-standard",
            ],
            &[
                "--max-depth",
                "--threads",
                "--after-context",
                "--before-context",
                "--context",
                "--max-count",
            ],
            &["--color"],
        ),
        diff: false,
        log: false,
        operands: true,
    },
];

pub(crate) fn subcommand(name: &str) -> Option<&'static Subcommand> {
    SUBCOMMANDS.iter().find(|s| s.name == name)
}

impl Subcommand {
    /// Whether `--name` (without a value) is accepted.
    pub(crate) fn long(&self, name: &str) -> bool {
        self.table.long.contains(&name)
            || (self.diff && DIFF_LONG.contains(&name))
            || (self.log && LOG_LONG.contains(&name))
    }

    /// Git's long options with a value are accepted only as
    /// `--name=value`: for several of them (`--format`, `--max-parents`)
    /// git takes no separate value, so the next word would be an option of
    /// its own, and judging it as one is never less strict.
    pub(crate) fn long_value(&self, _name: &str) -> bool {
        false
    }

    pub(crate) fn long_optional(&self, name: &str) -> bool {
        self.table.long_optional.contains(&name)
            || self.table.long_value.contains(&name)
            || (self.diff && (DIFF_OPTIONAL.contains(&name) || DIFF_VALUE.contains(&name)))
            || (self.log && (LOG_OPTIONAL.contains(&name) || LOG_VALUE.contains(&name)))
    }

    /// `git log -3`.
    pub(crate) fn numeric(&self) -> bool {
        self.log
    }
}

/// Configuration set for every git command that runs unasked (through
/// `GIT_CONFIG_COUNT`, which has the precedence of `-c`): no hooks (git
/// status may write the index, which runs `post-index-change`), no
/// fsmonitor program, `cat` as the pager, and embedded bare repositories
/// (a folder of the workspace that looks like a repository, with its own
/// config) are not used.
const NEUTRAL_CONFIG: &[(&str, &str)] = &[
    ("core.hooksPath", "/dev/null"),
    ("core.fsmonitor", "false"),
    ("core.pager", "cat"),
    ("safe.bareRepository", "explicit"),
    // Submodules have configurations of their own; stay out of them.
    ("submodule.recurse", "false"),
    ("diff.ignoreSubmodules", "all"),
    ("status.submoduleSummary", "false"),
];

/// Environment for git commands that run unasked.
pub(crate) fn neutralising_env() -> Vec<(String, String)> {
    let mut env = vec![
        (
            "GIT_CONFIG_COUNT".to_string(),
            NEUTRAL_CONFIG.len().to_string(),
        ),
        ("GIT_PAGER".to_string(), "cat".to_string()),
        ("PAGER".to_string(), "cat".to_string()),
        ("GIT_TERMINAL_PROMPT".to_string(), "0".to_string()),
        // Read-only commands then never write the index.
        ("GIT_OPTIONAL_LOCKS".to_string(), "0".to_string()),
        // A partial clone would fetch missing objects (from any URL its
        // configuration names) and write them into the repository.
        ("GIT_NO_LAZY_FETCH".to_string(), "1".to_string()),
    ];
    for (index, (key, value)) in NEUTRAL_CONFIG.iter().enumerate() {
        env.push((format!("GIT_CONFIG_KEY_{index}"), key.to_string()));
        env.push((format!("GIT_CONFIG_VALUE_{index}"), value.to_string()));
    }
    env
}

/// Keys of a repository's own configuration (`.git/config`, worktree
/// config, and files they include) that run no program for the listed
/// subcommands. Everything else (`filter.*`, `diff.*.textconv`,
/// `diff.external`, `core.fsmonitor`, `core.pager`, `pager.*`, `gpg.*`,
/// `log.showSignature`, `core.sshCommand`, aliases, …) makes git commands
/// ask. The user's own global and system configuration is trusted.
fn plain_key(key: &str) -> bool {
    const EXACT: &[&str] = &[
        "core.repositoryformatversion",
        "core.filemode",
        "core.bare",
        "core.logallrefupdates",
        "core.ignorecase",
        "core.precomposeunicode",
        "core.symlinks",
        "core.autocrlf",
        "core.eol",
        "core.safecrlf",
        "core.quotepath",
        "core.abbrev",
        "core.sparsecheckout",
        "core.sparsecheckoutcone",
        "core.splitindex",
        "core.untrackedcache",
        "core.commitgraph",
        "core.multipackindex",
        "core.checkstat",
        "core.trustctime",
        "core.preloadindex",
        "core.longpaths",
        "core.compression",
        "core.loosecompression",
        "core.warnambiguousrefs",
        "user.name",
        "user.email",
        "init.defaultbranch",
        "pull.rebase",
        "pull.ff",
        "push.default",
        "push.autosetupremote",
        "fetch.prune",
        "index.version",
        "index.threads",
        "diff.renames",
        "diff.algorithm",
        "diff.mnemonicprefix",
        "diff.noprefix",
        "diff.context",
        "log.date",
        "log.decorate",
        "merge.conflictstyle",
        "rerere.enabled",
        "status.showuntrackedfiles",
        "status.short",
        "status.branch",
        "protocol.version",
        "lfs.repositoryformatversion",
        "commit.gpgsign",
        "tag.gpgsign",
    ];
    const SECTIONS: &[&str] = &["color.", "advice.", "extensions.", "feature.", "pack."];
    // A partial clone fetches what it lacks from its promisor remote.
    if key == "extensions.partialclone" {
        return false;
    }
    if EXACT.contains(&key) || SECTIONS.iter().any(|s| key.starts_with(s)) {
        return true;
    }
    // Per-remote, per-branch and per-submodule keys that are names and
    // references, never commands.
    let parts: Vec<&str> = key.splitn(2, '.').collect();
    let last = key.rsplit('.').next().unwrap_or("");
    match parts.first().copied() {
        Some("remote") => matches!(
            last,
            "url" | "pushurl" | "fetch" | "push" | "tagopt" | "prune" | "mirror"
        ),
        Some("branch") => matches!(
            last,
            "remote" | "merge" | "rebase" | "pushremote" | "description"
        ),
        Some("submodule") => matches!(last, "url" | "active" | "branch"),
        _ => false,
    }
}

/// The short status of the repository at `dir` (inside `root`), for the
/// system prompt: "3 changed files (a, b, c)" or "no changes". `None`
/// when git may not run there unasked (see [`plain_repository_config`]),
/// fails, or takes longer than its limit.
pub(crate) fn short_status(dir: &Path, root: &Path) -> Option<String> {
    plain_repository_config(dir, root).ok()?;
    let output = git_here(
        dir,
        &["status", "--porcelain=v1", "--untracked-files=normal"],
        None,
    )
    .ok()?;
    if !output.status.success() {
        return None;
    }
    let text = String::from_utf8_lossy(&output.stdout);
    let changed: Vec<&str> = text.lines().filter_map(|line| line.get(3..)).collect();
    Some(match changed.len() {
        0 => "no uncommitted changes".into(),
        n => {
            let shown: Vec<&str> = changed.iter().take(10).copied().collect();
            format!(
                "{n} changed file{} ({}{})",
                if n == 1 { "" } else { "s" },
                shown.join(", "),
                if n > shown.len() { ", …" } else { "" }
            )
        }
    })
}

/// How long one of Spindle's own git calls may take: a repository whose
/// configuration includes a FIFO, or a huge one, must not hold a prompt.
const GIT_LIMIT: std::time::Duration = std::time::Duration::from_secs(3);
/// The most output kept of one of those calls.
const GIT_OUTPUT_CAP: usize = 1024 * 1024;

/// A git command started in `dir`, with the neutralising environment,
/// bounded in time and output (see [`crate::process::probe`]). It runs
/// under the guard, as commands do: the user's own configuration (trusted,
/// so not neutralised) may name programs git starts, such as a clean
/// filter for the files a repository's `.gitattributes` picks, and what
/// such a program leaves behind, in a session of its own too, ends with
/// the call.
fn git_here(
    dir: &Path,
    args: &[&str],
    cancel: Option<&crossbeam_channel::Receiver<()>>,
) -> Result<crate::process::probe::ProbeOutput, String> {
    let mut argv = vec![std::ffi::OsString::from("--no-pager")];
    argv.extend(args.iter().map(std::ffi::OsString::from));
    let mut command = crate::process::guard::command(Path::new("git"), &argv);
    command.current_dir(dir);
    for (key, value) in neutralising_env() {
        command.env(key, value);
    }
    crate::process::probe::run(command, GIT_LIMIT, GIT_OUTPUT_CAP, cancel)
        .map_err(|error| format!("git cannot be run in {}: {error}", dir.display()))
}

/// Whether a git command may run unasked in `dir`: the repository git
/// finds there (if any) lies inside the workspace `root` (work tree, git
/// folder and common folder; no alternates borrowing objects from
/// elsewhere), has no submodules (each with a configuration of its own),
/// and its own configuration files hold only keys that run nothing. Git
/// itself is asked (with the neutralising environment, so asking runs
/// nothing either), so includes and worktree configuration count as the
/// real command would see them. Outside any repository only `--no-index`
/// commands work, on paths already checked.
pub(crate) fn plain_repository_config(dir: &Path, root: &Path) -> Result<(), String> {
    plain_repository_config_or_cancel(dir, root, None)
}

/// [`plain_repository_config`], stopped (with an error) by a message on,
/// or the disconnection of, `cancel`.
pub(crate) fn plain_repository_config_or_cancel(
    dir: &Path,
    root: &Path,
    cancel: Option<&crossbeam_channel::Receiver<()>>,
) -> Result<(), String> {
    if !dir.is_dir() {
        return Err(format!("{} is not a directory", dir.display()));
    }
    let root = crate::os::canonical(root).unwrap_or_else(|_| root.to_path_buf());
    let located = git_here(
        dir,
        &[
            "rev-parse",
            "--show-toplevel",
            "--absolute-git-dir",
            "--git-common-dir",
        ],
        cancel,
    )?;
    if located.status.success() {
        let text = String::from_utf8_lossy(&located.stdout);
        let places: Vec<std::path::PathBuf> = text
            .lines()
            .map(|line| {
                let path = dir.join(line);
                crate::os::canonical(&path).unwrap_or(path)
            })
            .collect();
        if places.len() != 3 {
            return Err("git could not say where the repository is".into());
        }
        for place in &places {
            if !place.starts_with(&root) {
                return Err(format!(
                    "the repository reaches outside the workspace ({})",
                    place.display()
                ));
            }
        }
        let (top, git_dir, common) = (&places[0], &places[1], &places[2]);
        if top.join(".gitmodules").exists()
            || git_dir.join("modules").exists()
            || common.join("modules").exists()
        {
            return Err("the repository has submodules, with configurations of their own".into());
        }
        if common.join("objects/info/alternates").exists() {
            return Err("the repository borrows objects from another one (alternates)".into());
        }
    }
    let output = git_here(dir, &["config", "--list", "--show-scope", "-z"], cancel)?;
    if !output.status.success() {
        return Err("git cannot read the repository's configuration".into());
    }
    let text = String::from_utf8_lossy(&output.stdout);
    let mut fields = text.split('\0');
    while let Some(scope) = fields.next() {
        let Some(entry) = fields.next() else {
            break;
        };
        if !matches!(scope, "local" | "worktree") {
            continue;
        }
        let key = entry.split('\n').next().unwrap_or("").to_ascii_lowercase();
        if !plain_key(&key) {
            return Err(format!(
                "the repository's configuration sets `{key}`, which can make git run a program"
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_keys() {
        for key in [
            "core.bare",
            "remote.origin.url",
            "branch.main.merge",
            "color.ui",
            "submodule.lib.url",
        ] {
            assert!(plain_key(key), "{key}");
        }
        for key in [
            "core.fsmonitor",
            "core.pager",
            "pager.log",
            "filter.x.clean",
            "diff.x.textconv",
            "diff.external",
            "gpg.program",
            "log.showsignature",
            "alias.st",
            "core.sshcommand",
            "remote.origin.uploadpack",
            "submodule.lib.update",
            "include.path",
            "core.hookspath",
            "core.worktree",
        ] {
            assert!(!plain_key(key), "{key}");
        }
    }
}

//! The programs a command may run without asking under `auto`, and the
//! options with which each of them only looks.
//!
//! The list is short on purpose: a missed read-only program costs one
//! question to the user, a wrong one is a hole. Each entry says why it is
//! safe. Programs whose every option is harmless accept any option; the
//! others accept only the options listed, so an option added by a later
//! version of the program asks until someone reads what it does.

/// How a program's options are judged.
pub(crate) enum Options {
    /// No option of the program writes a file or runs another program.
    Any,
    /// Like `Any`, except for options that reach outside what the command
    /// line names (following symlinks while walking, reading file lists,
    /// running a helper, reading variables); a long option is refused
    /// also when abbreviated.
    AnyExcept(&'static Denied),
    /// Only the options of the table; anything else asks.
    Only(&'static Table),
    /// `find`: its own expression language.
    Find,
    /// `git`: read-only subcommands only (see `git.rs`).
    Git,
}

/// Options refused for an otherwise harmless program.
pub(crate) struct Denied {
    /// Short options, one letter each.
    pub short: &'static str,
    /// Long options (without their value).
    pub long: &'static [&'static str],
}

/// Options a program accepts, as getopt-style syntax.
pub(crate) struct Table {
    /// Short options without a value, one letter each.
    pub short: &'static str,
    /// Short options that take a value, attached (`-k2`) or as the next word.
    pub short_value: &'static str,
    /// Short options whose value is optional and must be attached (`-U3`).
    pub short_optional: &'static str,
    /// Long options without a value.
    pub long: &'static [&'static str],
    /// Long options that take a value: `--name=value` or `--name value`.
    pub long_value: &'static [&'static str],
    /// Long options whose value is optional and must be attached
    /// (`--color` or `--color=always`).
    pub long_optional: &'static [&'static str],
    /// Whether `-NUMBER` is an option (`head -5`, `git log -3`).
    pub numeric: bool,
}

/// What a program reads of a directory named on its line. Reads matter
/// under `auto` because its sandbox limits writes, not reads: a symlink
/// inside a workspace folder can lead anywhere.
pub(crate) enum Reach {
    /// Only what the line names. A directory operand is refused ("Is a
    /// directory": `cat`, `head`, `tail`, `wc`, `nl`, `tac`, `cut`,
    /// `sha256sum`, `cmp`, …), described (`stat`, `test`), or walked
    /// without following the symlinks met inside it (`ls -R`, `du`,
    /// `find`, `grep -r`, `rg`, `git`, which shows a symlink as its
    /// text); their options that follow symlinks while walking are
    /// refused (`Denied`, or left out of the table).
    Named,
    /// It opens the entries of a directory operand, following symlinks:
    /// `diff DIR1 DIR2` compares the files of the same name in both,
    /// `diff FILE DIR` compares FILE with `DIR/FILE`; with one of these
    /// options, every level below too. The classifier walks what it would
    /// open (a bounded number of entries) and asks if a symlink there
    /// leads outside the workspace.
    Entries { recursive: &'static Denied },
}

/// One known program.
pub(crate) struct Program {
    pub name: &'static str,
    pub options: Options,
    /// A shell builtin in both dash and bash: no PATH lookup happens.
    pub builtin: bool,
    pub reach: Reach,
}

const fn any(name: &'static str) -> Program {
    Program {
        name,
        options: Options::Any,
        builtin: false,
        reach: Reach::Named,
    }
}

const fn builtin(name: &'static str) -> Program {
    Program {
        name,
        options: Options::Any,
        builtin: true,
        reach: Reach::Named,
    }
}

const fn except(name: &'static str, denied: &'static Denied, builtin: bool) -> Program {
    Program {
        name,
        options: Options::AnyExcept(denied),
        builtin,
        reach: Reach::Named,
    }
}

/// `-L`/`--dereference` make `ls -R` and `du` walk into symlinked folders
/// outside the workspace.
static LS_DENIED: Denied = Denied {
    short: "L",
    long: &["--dereference"],
};
static DU_DENIED: Denied = Denied {
    short: "L",
    long: &["--dereference", "--files0-from"],
};
/// `--files0-from=-` reads the names of files to count from stdin, where
/// the command line can put any path in a form no check sees.
static WC_DENIED: Denied = Denied {
    short: "",
    long: &["--files0-from"],
};
/// `grep -R` follows every symlink while it walks (`grep -r` follows
/// only those the line names); so does BSD grep's `-S` with `-r`.
static GREP_DENIED: Denied = Denied {
    short: "RS",
    long: &["--dereference-recursive"],
};
/// `diff -l` runs `pr`.
static DIFF_DENIED: Denied = Denied {
    short: "l",
    long: &["--paginate"],
};
/// The options that make `diff` compare folders at every level.
static DIFF_RECURSIVE: Denied = Denied {
    short: "r",
    long: &["--recursive"],
};
/// `-c` reads the files a checksum list names (any path).
static SUM_DENIED: Denied = Denied {
    short: "c",
    long: &["--check"],
};
/// bash's `printf -v NAME` sets a variable (PATH, CDPATH) for the rest of
/// the line.
static PRINTF_DENIED: Denied = Denied {
    short: "v",
    long: &[],
};
/// `test -v NAME` tells whether a variable is set, `-R` whether it is a
/// name reference, `-o` an option: none is about the workspace.
static TEST_DENIED: Denied = Denied {
    short: "vRo",
    long: &[],
};

/// The known programs.
pub(crate) const PROGRAMS: &[Program] = &[
    // GNU coreutils that only print what they read or are told: none of
    // their options writes a file or runs a program (checked against each
    // program's manual); those that can reach further have the options
    // that do refused. Values naming files are checked like every path.
    except("ls", &LS_DENIED, false),
    any("cat"),
    any("head"),
    any("tail"),
    except("wc", &WC_DENIED, false),
    any("nl"),
    any("cut"),
    any("tr"),
    any("tac"),
    any("stat"),
    except("du", &DU_DENIED, false),
    any("df"),
    any("basename"),
    any("dirname"),
    any("realpath"),
    any("readlink"),
    any("whoami"),
    any("id"),
    any("uname"),
    except("sha256sum", &SUM_DENIED, false),
    except("sha1sum", &SUM_DENIED, false),
    except("md5sum", &SUM_DENIED, false),
    any("which"),
    // GNU diff and cmp compare files and print; diff's `-l` (through `pr`)
    // is refused. diff follows symlinks in the folders it compares, so
    // what it would open is walked; cmp refuses a folder.
    Program {
        name: "diff",
        options: Options::AnyExcept(&DIFF_DENIED),
        builtin: false,
        reach: Reach::Entries {
            recursive: &DIFF_RECURSIVE,
        },
    },
    any("cmp"),
    // GNU grep reads files and prints matches; it has no option that
    // writes or runs anything (unlike ripgrep's --pre).
    except("grep", &GREP_DENIED, false),
    except("egrep", &GREP_DENIED, false),
    except("fgrep", &GREP_DENIED, false),
    // Shell builtins that print or test; `printf -v` only sets a variable
    // of the shell that runs this one line.
    builtin("echo"),
    except("printf", &PRINTF_DENIED, true),
    builtin("pwd"),
    builtin("true"),
    builtin("false"),
    except("test", &TEST_DENIED, true),
    except("[", &TEST_DENIED, true),
    // `cd` changes the directory later commands of the line start in; its
    // operand is checked like any path and followed by the classifier.
    builtin("cd"),
    Program {
        name: "sort",
        options: Options::Only(&SORT),
        builtin: false,
        reach: Reach::Named,
    },
    Program {
        name: "rg",
        options: Options::Only(&RG),
        builtin: false,
        reach: Reach::Named,
    },
    Program {
        name: "find",
        options: Options::Find,
        builtin: false,
        reach: Reach::Named,
    },
    Program {
        name: "git",
        options: Options::Git,
        builtin: false,
        reach: Reach::Named,
    },
];

pub(crate) fn find(name: &str) -> Option<&'static Program> {
    PROGRAMS.iter().find(|p| p.name == name)
}

/// `sort` without `-o`/`--output` (writes a file), `-T`/
/// `--temporary-directory` (writes there), `--compress-program` (runs
/// a program) and `--files0-from` (reads any file names from stdin).
static SORT: Table = Table {
    short: "bdfghiMnRrsuVcCmz",
    short_value: "ktS",
    short_optional: "",
    long: &[
        "--ignore-leading-blanks",
        "--dictionary-order",
        "--ignore-case",
        "--general-numeric-sort",
        "--human-numeric-sort",
        "--ignore-nonprinting",
        "--month-sort",
        "--numeric-sort",
        "--random-sort",
        "--reverse",
        "--version-sort",
        "--merge",
        "--stable",
        "--unique",
        "--zero-terminated",
        "--debug",
    ],
    long_value: &[
        "--key",
        "--field-separator",
        "--buffer-size",
        "--parallel",
        "--sort",
    ],
    long_optional: &["--check"],
    numeric: false,
};

/// ripgrep without `--pre`/`--pre-glob` (run a program on each file),
/// `-z`/`--search-zip` (run decompressors), `--hostname-bin` (runs a
/// program) and `-L`/`--follow` (walks into symlinked folders outside the
/// workspace); everything listed only selects, matches or formats.
static RG: Table = Table {
    short: "iSswvlcnNHhoqxFUab0uI.p",
    short_value: "efgtTABCmMjErd",
    short_optional: "",
    long: &[
        "--hidden",
        "--no-ignore",
        "--no-ignore-vcs",
        "--no-ignore-parent",
        "--no-ignore-dot",
        "--no-ignore-global",
        "--files",
        "--files-with-matches",
        "--files-without-match",
        "--count",
        "--count-matches",
        "--line-number",
        "--no-line-number",
        "--ignore-case",
        "--smart-case",
        "--case-sensitive",
        "--word-regexp",
        "--line-regexp",
        "--invert-match",
        "--fixed-strings",
        "--multiline",
        "--multiline-dotall",
        "--json",
        "--no-heading",
        "--heading",
        "--with-filename",
        "--no-filename",
        "--only-matching",
        "--quiet",
        "--vimgrep",
        "--column",
        "--no-column",
        "--no-messages",
        "--null",
        "--null-data",
        "--pcre2",
        "--trim",
        "--stats",
        "--text",
        "--binary",
        "--unrestricted",
        "--no-config",
        "--one-file-system",
        "--byte-offset",
        "--pretty",
        "--passthru",
        "--type-list",
        "--sort-files",
        "--crlf",
        "--no-unicode",
        "--max-columns-preview",
        "--glob-case-insensitive",
        "--include-zero",
    ],
    long_value: &[
        "--regexp",
        "--file",
        "--glob",
        "--iglob",
        "--type",
        "--type-not",
        "--type-add",
        "--after-context",
        "--before-context",
        "--context",
        "--max-count",
        "--max-columns",
        "--max-depth",
        "--threads",
        "--replace",
        "--sort",
        "--sortr",
        "--colors",
        "--encoding",
        "--engine",
        "--path-separator",
        "--context-separator",
        "--field-match-separator",
        "--field-context-separator",
        "--max-filesize",
        "--ignore-file",
        "--dfa-size-limit",
        "--regex-size-limit",
    ],
    long_optional: &["--color"],
    numeric: false,
};

/// `find` expressions that only test or print. Absent on purpose:
/// `-exec`, `-execdir`, `-ok`, `-okdir` (run programs), `-delete`
/// (removes files), `-fprint`, `-fprint0`, `-fprintf`, `-fls` (write files),
/// `-follow` (walks into symlinked folders outside the workspace).
pub(crate) const FIND_FLAGS: &[&str] = &[
    "-print",
    "-print0",
    "-ls",
    "-prune",
    "-quit",
    "-true",
    "-false",
    "-empty",
    "-readable",
    "-writable",
    "-executable",
    "-nouser",
    "-nogroup",
    "-depth",
    "-xdev",
    "-mount",
    "-daystart",
    "-noleaf",
    "-not",
    "-a",
    "-and",
    "-o",
    "-or",
    "!",
    "(",
    ")",
    ",",
    "-ignore_readdir_race",
    "-noignore_readdir_race",
];

/// `find` tests that take one argument; those marked are file names.
pub(crate) const FIND_WITH_VALUE: &[(&str, bool)] = &[
    ("-name", false),
    ("-iname", false),
    ("-path", false),
    ("-ipath", false),
    ("-wholename", false),
    ("-iwholename", false),
    ("-regex", false),
    ("-iregex", false),
    ("-regextype", false),
    ("-type", false),
    ("-xtype", false),
    ("-maxdepth", false),
    ("-mindepth", false),
    ("-size", false),
    ("-mtime", false),
    ("-mmin", false),
    ("-atime", false),
    ("-amin", false),
    ("-ctime", false),
    ("-cmin", false),
    ("-used", false),
    ("-perm", false),
    ("-user", false),
    ("-group", false),
    ("-uid", false),
    ("-gid", false),
    ("-links", false),
    ("-inum", false),
    ("-lname", false),
    ("-ilname", false),
    ("-fstype", false),
    // Prints with a format; it cannot write files (that is -fprintf).
    ("-printf", false),
    ("-newer", true),
    ("-anewer", true),
    ("-cnewer", true),
    ("-samefile", true),
];

/// Whether the word `text` gives an option of `set`: a long one, maybe
/// abbreviated, or a short one, maybe in a cluster. Generous on purpose:
/// a letter that is really the attached value of another option counts.
pub(super) fn is_one_of(set: &Denied, text: &str) -> bool {
    if text.len() < 2 || !text.starts_with('-') {
        return false;
    }
    if let Some(long) = text.strip_prefix("--") {
        let name = format!("--{}", long.split('=').next().unwrap_or(""));
        return name.len() > 2 && set.long.iter().any(|d| d.starts_with(name.as_str()));
    }
    text[1..].chars().any(|c| set.short.contains(c))
}

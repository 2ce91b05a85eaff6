//! The command classifier, table-driven: lines that must ask and lines
//! that may run, in a small workspace with a symlink leading out of it, a
//! file named like an option, and a fake program inside it.

use super::*;
use std::path::PathBuf;

pub(super) struct Workspace {
    pub(super) root: PathBuf,
}

impl Drop for Workspace {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.root);
    }
}

/// The workspace the classifier tests judge lines in: symlinks leading
/// out of it (`link`, `b/link`, `sub/secret`), a file named like an option
/// (`tricky/-delete`), a fake program (`bin/cat`) and a look-alike tree
/// (`a/link/hostname`).
pub(super) fn workspace() -> Workspace {
    let root = std::env::temp_dir().join(format!("spindle-policy-{}", crate::util::random_hex()));
    for dir in ["src", "tricky", "bin", "sub/inner", "a/link", "b"] {
        std::fs::create_dir_all(root.join(dir)).unwrap();
    }
    for file in [
        "src/main.rs",
        "src/lib.rs",
        "src/data.csv",
        "tricky/-delete",
        "a/link/hostname",
    ] {
        std::fs::write(root.join(file), "x\n").unwrap();
    }
    crate::os::testing::symlink("/etc", root.join("b/link")).unwrap();
    std::fs::write(root.join("bin/cat"), "#!/bin/sh\n").unwrap();
    crate::os::testing::set_mode(root.join("bin/cat"), 0o755).unwrap();
    crate::os::testing::symlink("/etc", root.join("link")).unwrap();
    crate::os::testing::symlink("/etc/hostname", root.join("sub/secret")).unwrap();
    let root = std::fs::canonicalize(root).unwrap();
    Workspace { root }
}

pub(super) const SYSTEM_PATH: &str = "/usr/local/bin:/usr/bin:/bin";

pub(super) fn verdict(root: &Path, cwd: &Path, path_var: &str, line: &str) -> Verdict {
    classify(
        line,
        &Context {
            root,
            cwd,
            path_var: Some(path_var.into()),
            shell: crate::process::shell::ShellKind::Posix,
        },
    )
}

/// Lines that must ask under `auto`, by class.
const MUST_ASK: &[&str] = &[
    // Redirections that write files.
    "echo hi > file",
    "echo hi >file",
    "echo hi >> file",
    "echo hi >| file",
    "ls 1>out",
    "ls 2>err.txt",
    "ls &>out",
    "ls >&out",
    "cat src/main.rs >/tmp/x",
    "cat src/main.rs > /dev/nullx",
    "ls >out 2>&1",
    "ls 2>&1 >out",
    "cat <<EOF >out\nhi\nEOF",
    "wc -l < src/main.rs > out",
    "grep x src/main.rs >>log",
    "echo x > .git/config",
    "printf 'x' > .git/hooks/pre-commit",
    "ls > /dev/null*",
    // Variables, substitutions and other expansions.
    "echo $OPENAI_API_KEY",
    "echo ${OPENAI_API_KEY}",
    "echo \"$OPENAI_API_KEY\"",
    "echo \"key: ${ANTHROPIC_API_KEY}\"",
    "echo $HOME",
    "cat $(which sh)",
    "cat `which sh`",
    "echo $((1+2))",
    "echo $'\\x41'",
    "ls $PWD",
    "echo \"`id`\"",
    "echo ${#PATH}",
    "echo $1",
    "echo $@",
    "echo $$",
    "grep \"$(cat /etc/passwd)\" src",
    "ls ~",
    "ls ~/.ssh",
    "cat ~root/.profile",
    "echo {a,b}",
    "ls {src,tests}",
    "cat <<EOF\n$OPENAI_API_KEY\nEOF",
    "cat <<EOF\n`id`\nEOF",
    "cat <<EOF\n\\$x\nEOF",
    "cat <<EOF\nhi\n",
    // Output and program options, clustered and spelled other ways.
    "sort -o out src/data.csv",
    "sort -oout src/data.csv",
    "sort -uo out src/data.csv",
    "sort -ruo out.txt src/data.csv",
    "sort --output=out src/data.csv",
    "sort --output out src/data.csv",
    "sort --out=out src/data.csv",
    "sort -T tmp src/data.csv",
    "sort --temporary-directory=d src/data.csv",
    "sort --compress-program=sh src/data.csv",
    "sort -S 1M -o x src/data.csv",
    "sort src/data.csv -o out",
    "rg --pre sh x",
    "rg --pre=sh x",
    "rg -z x",
    "rg --search-zip x",
    "rg -iz x",
    "rg --pre-glob '*' --pre cat x",
    "rg --hostname-bin=sh x",
    "rg --hostname-bin sh x",
    // find actions that run, delete or write.
    "find . -exec rm x \\;",
    "find . -exec rm x ';'",
    "find . -execdir sh \\;",
    "find . -ok rm \\;",
    "find . -okdir x \\;",
    "find . -delete",
    "find . -name x -delete",
    "find . -fprint out",
    "find . -fprint0 out",
    "find . -fprintf out %p",
    "find . -fls out",
    "find . -newer /etc/passwd",
    "find /etc -name x",
    "find . -name x -o -delete",
    "find -D exec .",
    // git: configuration, repository and pager overrides.
    "git -c core.pager=sh log",
    "git -ccore.fsmonitor=x status",
    "git -C /tmp status",
    "git -C sub status",
    "git --git-dir=/tmp/x status",
    "git --work-tree=/ status",
    "git --exec-path=/tmp status",
    "git -p log",
    "git --paginate log",
    "git --config-env=core.pager=X log",
    "GIT_DIR=/tmp git status",
    "GIT_EXTERNAL_DIFF=sh git diff",
    "GIT_CONFIG_PARAMETERS=x git log",
    // git subcommands that change things or reach the network.
    "git commit -m x",
    "git commit -am x",
    "git push",
    "git fetch",
    "git pull",
    "git clone x",
    "git checkout x",
    "git reset --hard",
    "git clean -fdx",
    "git config core.pager sh",
    "git config --list",
    "git stash",
    "git tag v1",
    "git apply p",
    "git am",
    "git submodule update",
    "git worktree add x",
    "git gc",
    "git help log",
    "git difftool",
    "git mergetool",
    "git st",
    "git branch new",
    "git branch -D x",
    "git branch -m a b",
    "git branch --set-upstream-to=x",
    "git branch -f x",
    "git branch --edit-description",
    "git remote add x y",
    "git remote set-url o x",
    "git remote show origin",
    "git remote update",
    // git options that write or run programs.
    "git diff --output=x",
    "git diff --output x",
    "git diff --out=x",
    "git log --output=x",
    "git diff --ext-diff",
    "git diff --textconv",
    "git log --show-signature",
    "git show --show-signature",
    "git grep -O x",
    "git grep --open-files-in-pager=sh x",
    "git grep -Ovim x",
    "git grep -nO x",
    "git log -p --ext-diff",
    "git diff -O/etc/passwd",
    "git blame --contents=/etc/passwd src/main.rs",
    "git ls-files -X /etc/x",
    "git rev-parse --git-dir=x",
    "git status; git commit -am x",
    "git log | sh",
    "git diff > patch",
    // Programs that write, run others, or are not known.
    "rm -rf target",
    "mv a b",
    "cp a b",
    "touch x",
    "mkdir x",
    "tee out",
    "ls | tee out",
    "sed -i s/a/b/ x",
    "sed -n p src/main.rs",
    "awk '{print}' x",
    "xargs rm",
    "ls | xargs rm",
    "python3 x.py",
    "sh -c ls",
    "bash -c 'ls'",
    "env",
    "printenv",
    "env ls",
    "nohup ls",
    "timeout 5 ls",
    "nice ls",
    "sudo ls",
    "chmod +x x",
    "ln -s a b",
    "dd if=a of=b",
    "curl http://example.invalid",
    "wget x",
    "make",
    "cargo test",
    "npm test",
    "uniq a b",
    "tree -o out",
    "date -s 2020-01-01",
    "file -C -m x",
    "vim x",
    "less src/main.rs",
    "tar xf a",
    "patch -p1",
    "truncate -s0 x",
    "./script.sh",
    "/bin/rm x",
    "bin/ls",
    "/bin/ls",
    "exec ls",
    "eval ls",
    ". ./x",
    "source x",
    "command ls",
    "builtin echo",
    "alias ls=rm",
    "export A=1",
    "unset PATH",
    "set -e",
    "trap x EXIT",
    "kill 1",
    "'rm' x",
    "r\\m x",
    "l\"s\"x",
    // Shell constructs the parser does not take.
    "ls &",
    "ls & rm x",
    "(rm x)",
    "{ ls; }",
    "if true; then rm x; fi",
    "for f in a; do rm x; done",
    "while true; do ls; done",
    "case x in x) rm x;; esac",
    "! ls",
    "ls |& cat",
    "cat <(ls)",
    "diff <(ls) <(ls)",
    "cat <<< x",
    "ls <> f",
    "function f { ls; }",
    "[[ -f x ]]",
    "time ls",
    "ls\nrm x",
    "ls;rm x",
    "ls&&rm x",
    "ls||rm x",
    "ls|rm x",
    "ls # x\nrm y",
    "echo 'x' ; rm y",
    "cat 'unterminated",
    "\"",
    "ls \\",
    "ls\0rm",
    "ls |",
    "; ls",
    "",
    "   ",
    // Variables set in front of a command, or alone.
    "A=1",
    "PATH=/tmp ls",
    "LD_PRELOAD=x ls",
    "PATH=.; ls",
    // Paths outside the workspace, through `..`, absolute paths, symlinks,
    // option values, redirections and `cd`.
    "ls ../",
    "cat ../secret",
    "cat /etc/passwd",
    "cat link/hosts",
    "cat link",
    "cat sub/secret",
    "grep -f/etc/passwd x",
    "grep --file=/etc/passwd x",
    "grep -rf ../x src",
    "wc --files0-from=/etc/x",
    "diff --from-file=/etc/shadow src/main.rs",
    "cat <../secret",
    "cat < /etc/passwd",
    "ls -la /",
    "head -n1 /etc/hostname",
    "cd .. && ls",
    "cd / && ls",
    "cd /tmp",
    "cd",
    "cd -",
    "cd src | ls",
    "cd src; cat main.rs",
    "cd src || cat x",
    "cd link && cat hosts",
    "cd sub && cat secret",
    "rg -f /etc/passwd src",
    "sort --files0-from=/etc/x",
    "git diff --no-index /etc/passwd src/main.rs",
    "git log -- ../other",
    // Folders whose entries diff opens, following symlinks: `b/link` and
    // `sub/secret` lead out. `diff FILE DIR` opens `DIR/FILE`.
    "diff a b",
    "diff b a",
    "diff sub src",
    "diff src/main.rs b",
    "diff -- a b",
    "diff --from-file=b src/main.rs",
    "diff --to-file b src/main.rs",
    "diff --recursive src b",
    "diff --recur src b",
    "diff -Nr a b",
    "diff -qr src b",
    "diff -r . src",
    "cd sub && diff . ../src",
    // BSD grep follows every symlink with `-S`.
    "grep -S -r x src",
    // Globs that could expand to options or lead outside.
    "cat tricky/*",
    "find tricky/* -name x",
    "sort tricky/*",
    "cat */x",
    "cat l*",
    "cat *",
    "ls s*/*",
    "cat sub/*",
];

/// Lines that may run without asking under `auto`.
const MAY_RUN: &[&str] = &[
    "ls",
    "ls -la",
    "ls -la src",
    "cat src/main.rs",
    "cat src/main.rs | head -5",
    "head -n 20 src/main.rs",
    "tail -n5 src/main.rs",
    "wc -l src/main.rs",
    "grep -rn foo src",
    "grep -rn 'fn main' src --include='*.rs'",
    "grep -c x src/main.rs 2>/dev/null",
    "rg -n TODO src",
    "rg -i --type rust foo",
    "rg -g '*.rs' -l bar",
    "rg --files",
    "rg -uu x",
    "rg --color=never -C2 foo src",
    "find . -name '*.rs'",
    "find src -type f -name '*.rs' -print",
    "find . -maxdepth 2 -type d",
    "find . -newer src/main.rs",
    "find . \\( -name a -o -name b \\) -print",
    "find . -not -path './target/*'",
    "find src -newermt 2024-01-01",
    "sort src/data.csv",
    "sort -u -k2 -t, src/data.csv",
    "sort -rn src/main.rs | head",
    "git status",
    "git status --short",
    "git status -sb",
    "git status --porcelain=v1",
    "git diff",
    "git diff --cached",
    "git diff --stat HEAD~1",
    "git diff --no-ext-diff --no-textconv HEAD",
    "git log --oneline -10",
    "git log -5 --format='%h %s'",
    "git log --oneline --graph --all",
    "git log -n 3 -p -- src/main.rs",
    "git show HEAD",
    "git show --stat HEAD",
    "git blame src/main.rs",
    "git blame -L 1,10 src/main.rs",
    "git ls-files",
    "git ls-tree -r HEAD",
    "git rev-parse --show-toplevel",
    "git rev-parse --abbrev-ref HEAD",
    "git describe --tags --always",
    "git branch",
    "git branch -a",
    "git branch -vv",
    "git branch --show-current",
    "git remote -v",
    "git grep -n foo",
    "git --no-pager log -3",
    "git -P diff",
    "pwd",
    "echo hello",
    "echo 'hello world' | wc -c",
    "printf '%s\\n' a b",
    "which cargo",
    "stat src/main.rs",
    "du -sh src",
    "df -h .",
    "diff src/main.rs src/lib.rs",
    "cmp src/main.rs src/lib.rs",
    // Folders compared where every entry stays inside (`a/link` is a
    // real folder), at one level or all.
    "diff src a",
    "diff src/main.rs a",
    "diff -r src a",
    "diff -ru src tricky",
    // A folder holding a symlink that leads out (`b/link`), given to a
    // program that does not follow it: cat, head, wc and cmp refuse a
    // folder; ls, du, find, grep -r, rg and git walk without following
    // (git shows a symlink as its text).
    "cat b",
    "head b",
    "wc -l b",
    "cmp src/main.rs b",
    "stat b",
    "ls -la b",
    "ls -R b",
    "du -a b",
    "find b -name x",
    "grep -r x b",
    "rg x b",
    "git diff --no-index a b",
    "cd src && ls",
    "cd src && cat main.rs",
    "cd sub/inner && ls ..",
    "ls src/*.rs",
    "cat src/*.rs | wc -l",
    "true && echo ok || echo no",
    "test -f src/main.rs && echo yes",
    "[ -d src ] && ls src",
    "ls # list the files",
    "cat <<'EOF'\n$HOME\nEOF",
    "cat <<EOF\nplain text\nEOF",
    "basename src/main.rs",
    "realpath src",
    "uname -a",
    "id -u",
    "whoami",
    "sha256sum src/main.rs",
    "nl src/main.rs",
    "cut -d, -f1 src/data.csv",
    "tr a-z A-Z < src/main.rs",
    "echo x 2>/dev/null",
    "ls >/dev/null 2>&1",
    "ls \\\n -la",
    "grep -e '$HOME' src",
    "echo '>' not a redirect",
    "echo \"a > b\"",
];

#[test]
fn lines_that_must_ask() {
    let workspace = workspace();
    let root = &workspace.root;
    assert!(MUST_ASK.len() >= 150, "{} lines", MUST_ASK.len());
    let mut wrong = Vec::new();
    for line in MUST_ASK {
        if verdict(root, root, SYSTEM_PATH, line).is_read_only() {
            wrong.push(*line);
        }
    }
    assert!(wrong.is_empty(), "judged read-only: {wrong:#?}");
}

#[test]
#[cfg_attr(windows, ignore = "POSIX shell lines and PATH")]
fn lines_that_may_run() {
    let workspace = workspace();
    let root = &workspace.root;
    assert!(MAY_RUN.len() >= 50, "{} lines", MAY_RUN.len());
    let mut wrong = Vec::new();
    for line in MAY_RUN {
        if let Verdict::Ask(reason) = verdict(root, root, SYSTEM_PATH, line) {
            wrong.push(format!("{line:?}: {reason}"));
        }
    }
    assert!(wrong.is_empty(), "asked: {wrong:#?}");
}

#[test]
fn programs_are_found_outside_the_workspace() {
    let workspace = workspace();
    let root = &workspace.root;
    let inside_first = format!("{}:{SYSTEM_PATH}", root.join("bin").display());
    assert!(!verdict(root, root, &inside_first, "cat src/main.rs").is_read_only());
    assert!(!verdict(root, root, &format!(".:{SYSTEM_PATH}"), "ls").is_read_only());
    assert!(!verdict(root, root, &format!(":{SYSTEM_PATH}"), "ls").is_read_only());
    // Builtins are not looked up.
    assert!(verdict(root, root, &inside_first, "echo hi").is_read_only());
}

#[test]
#[cfg_attr(windows, ignore = "POSIX shell lines and PATH")]
fn git_commands_name_their_directories() {
    let workspace = workspace();
    let root = &workspace.root;
    assert_eq!(
        verdict(root, root, SYSTEM_PATH, "git status && cd src && git log"),
        Verdict::ReadOnly {
            git_dirs: vec![root.clone(), root.join("src")]
        }
    );
}

/// A repository whose own configuration names a program is not trusted,
/// while a plain one is; an embedded bare repository is not used.
#[test]
fn repository_configuration_is_checked() {
    if std::process::Command::new("git")
        .arg("--version")
        .output()
        .is_err()
    {
        eprintln!("git is not installed; skipping");
        return;
    }
    let workspace = workspace();
    let root = &workspace.root;
    let git = |args: &[&str], dir: &Path| {
        let status = std::process::Command::new("git")
            .args(args)
            .current_dir(dir)
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .output()
            .unwrap();
        assert!(status.status.success(), "git {args:?}");
    };
    git(&["init", "-q"], root);
    let context = Context {
        root,
        cwd: root,
        path_var: Some(SYSTEM_PATH.into()),
        shell: crate::process::shell::ShellKind::Posix,
    };
    assert!(judge("git status", &context).is_read_only());
    for (key, value) in [
        ("core.fsmonitor", "touch pwned"),
        ("core.pager", "sh -c x"),
        ("diff.evil.textconv", "sh"),
        ("filter.evil.clean", "sh"),
        ("alias.st", "!sh"),
        ("gpg.program", "sh"),
    ] {
        git(&["config", key, value], root);
        assert!(
            !judge("git status", &context).is_read_only(),
            "{key} was trusted"
        );
        git(&["config", "--unset", key], root);
    }
    // An include pointing at a workspace file counts as the repository's.
    std::fs::write(root.join("inc.cfg"), "[core]\n\tpager = sh\n").unwrap();
    git(&["config", "include.path", "../inc.cfg"], root);
    assert!(!judge("git log", &context).is_read_only());
    git(&["config", "--unset", "include.path"], root);
    assert!(judge("git log", &context).is_read_only());

    // A folder shaped like a bare repository with a hostile config is not
    // discovered as a repository (safe.bareRepository=explicit).
    let bare = root.join("sub/bare");
    git(&["init", "-q", "--bare", bare.to_str().unwrap()], root);
    std::fs::write(
        bare.join("config"),
        "[core]\n\tbare = true\n\tfsmonitor = touch pwned\n",
    )
    .unwrap();
    let context = Context {
        root,
        cwd: &bare,
        path_var: Some(SYSTEM_PATH.into()),
        shell: crate::process::shell::ShellKind::Posix,
    };
    assert!(judge("git status", &context).is_read_only());
}

/// A small, fast pseudo-random generator, so the property test needs no
/// dependency and replays exactly.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[(self.next() % items.len() as u64) as usize]
    }
}

/// Random shell-like lines made of known programs, harmless words, quotes
/// and operators, into which a writing redirection or an expansion is
/// inserted where the shell would act on it: none may be read-only.
#[test]
fn writes_and_expansions_are_never_read_only() {
    let workspace = workspace();
    let root = &workspace.root;
    let programs = [
        "ls",
        "cat",
        "grep -n",
        "echo",
        "git log",
        "git status",
        "sort",
        "rg",
        "find .",
        "wc -l",
        "head",
        "printf",
    ];
    let words = [
        "src/main.rs",
        "'a b'",
        "\"c d\"",
        "x\\ y",
        "-n",
        "--",
        "src",
        "'$HOME'",
        "2>/dev/null",
        "'>'",
        "\\>",
        "\"|\"",
    ];
    let operators = [" | ", " && ", " || ", "; ", "\n"];
    let tainted = [
        "> out",
        ">out.txt",
        ">> log",
        "1>x",
        "2>err",
        ">| f",
        "$HOME",
        "${OPENAI_API_KEY}",
        "\"$OPENAI_API_KEY\"",
        "\"a${B}c\"",
        "$(id)",
        "`id`",
        "\"`id`\"",
        "$((1))",
        "x$y",
        "~/x",
        "&> f",
        ">&f",
    ];
    let mut rng = Rng(0x5eed_1234_abcd_0042);
    for _ in 0..20_000 {
        let mut parts: Vec<String> = Vec::new();
        let commands = 1 + rng.next() % 3;
        let taint_at = rng.next() % commands;
        for index in 0..commands {
            if index > 0 {
                parts.push(rng.pick(&operators).to_string());
            }
            let mut command = vec![rng.pick(&programs).to_string()];
            let count = rng.next() % 4;
            let taint_pos = rng.next() % (count + 1);
            for position in 0..=count {
                if index == taint_at && position == taint_pos {
                    command.push(rng.pick(&tainted).to_string());
                }
                if position < count {
                    command.push(rng.pick(&words).to_string());
                }
            }
            parts.push(command.join(" "));
        }
        let line = parts.concat();
        assert!(
            !verdict(root, root, SYSTEM_PATH, &line).is_read_only(),
            "judged read-only: {line:?}"
        );
    }
}

/// Arbitrary bytes never panic the parser or the classifier.
#[test]
fn random_input_never_panics() {
    let workspace = workspace();
    let root = &workspace.root;
    let alphabet: Vec<char> = " \t\n;&|<>()$`'\"\\*?[]{}~#=-abc/.0129é".chars().collect();
    let mut rng = Rng(0x0dd_ba11_cafe_f00d);
    for _ in 0..20_000 {
        let length = rng.next() % 40;
        let line: String = (0..length)
            .map(|_| alphabet[(rng.next() % alphabet.len() as u64) as usize])
            .collect();
        let _ = verdict(root, root, SYSTEM_PATH, &line);
    }
}

#[test]
fn no_line_is_read_only_under_a_shell_that_is_not_sh() {
    let ws = workspace();
    for shell in [
        crate::process::shell::ShellKind::PowerShell,
        crate::process::shell::ShellKind::Cmd,
    ] {
        let context = Context {
            root: &ws.root,
            cwd: &ws.root,
            path_var: Some(SYSTEM_PATH.into()),
            shell,
        };
        match classify("ls", &context) {
            Verdict::Ask(reason) => assert!(reason.contains("not sh"), "{reason}"),
            other => panic!("{other:?}"),
        }
    }
}

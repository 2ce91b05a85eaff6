//! Attacks on the `auto` classifier, each checked against the real dash,
//! bash, GNU tools and git: `former_holes_are_refused()` holds lines that
//! were once judged read-only and must ask; `refused()` holds attacks that
//! were always asked about, and lines that look like attacks but are not.

use super::reach::WALK_ENTRY_LIMIT;
use super::tests::{verdict, workspace, Workspace, SYSTEM_PATH};
use super::*;

fn git_available() -> bool {
    std::process::Command::new("git")
        .arg("--version")
        .output()
        .is_ok()
}

/// Runs git with the user's global configuration out of the way.
fn git(args: &[&str], dir: &Path) {
    let out = std::process::Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_AUTHOR_NAME", "a")
        .env("GIT_AUTHOR_EMAIL", "a@b")
        .env("GIT_COMMITTER_NAME", "a")
        .env("GIT_COMMITTER_EMAIL", "a@b")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn temp_dir(tag: &str) -> Workspace {
    let root = std::env::temp_dir().join(format!(
        "spindle-attack-{tag}-{}",
        crate::util::random_hex()
    ));
    std::fs::create_dir_all(&root).unwrap();
    Workspace {
        root: std::fs::canonicalize(root).unwrap(),
    }
}

/// Lines judged read-only that are not. Each was checked by running it
/// with /bin/sh = dash (or bash where noted), GNU coreutils, grep 3.8,
/// diffutils 3.8 and git 2.47 (with `neutralising_env`).
const HOLES: &[&str] = &[
    // `..` is resolved lexically before symlinks: `link/..` is `/` to the
    // kernel but the workspace root to `paths::resolve`.
    "cat link/../etc/passwd",
    "cat < link/../etc/passwd",
    "grep -f link/../etc/shadow x",
    "find . -newer link/../etc/passwd",
    "git diff --no-index link/../etc/passwd src/main.rs",
    "ls link/../*",
    "cd -P link/.. && cat etc/passwd",
    // `cd` is assumed to succeed; when it fails (missing dir, no x bit),
    // the rest of the line runs in the old directory.
    "cd nx/nx/nx/nx/nx/nx/nx/nx; cat ../../../../../../../../etc/passwd",
    "cd nx/nx/nx/nx/nx/nx/nx/nx || cat ../../../../../../../../etc/passwd",
    "cd nx/nx/nx/nx/nx/nx/nx/nx && ls || cat ../../../../../../../../etc/passwd",
    "cd nx || cat sub/*",
    // Options that follow symlinks while walking directories.
    "grep -R root .",
    "grep --dereference-recursive root .",
    "diff -r a b",
    "ls -RL",
    "find -L . -name passwd",
    "find . -follow -name passwd",
    "du -L -a .",
    "rg -L root",
    "rg --follow root",
    // File lists read from stdin: any file on the system.
    "printf '\\057etc\\057passwd\\0' | sort --files0-from=-",
    "printf '\\057etc\\057passwd\\0' | wc -c --files0-from=-",
    "printf '\\057etc\\057passwd\\0' | du --files0-from=-",
    "printf 'd41d8cd98f00b204e9800998ecf8427e  \\057etc\\057shadow\\n' | md5sum -c",
    // git options whose value is optional (attached only): the next word
    // is not their value but an option of its own.
    "git blame -C --contents=/etc/passwd src/main.rs",
    "git blame -M --contents=/etc/passwd src/main.rs",
    "git diff -U --output=src/main.rs",
    "git diff --unified --output=src/main.rs",
    "git show -U --output=src/main.rs",
    "git log -U --output=src/main.rs",
    // `--format` / `--max-parents` / `--min-parents` take no separate
    // value in revision.c: git opens (truncates) --output, then dies.
    "git log --format --output=src/main.rs",
    "git show --format --output=src/main.rs",
    "git log --max-parents --output=src/main.rs",
    "git log --min-parents --output=src/main.rs",
    // Signature placeholders run gpg (what --show-signature is kept out for).
    "git log --format='%G?'",
    "git log --pretty=format:%GS",
    "git show --format=%GG",
    // git writes into .git.
    "git describe --dirty",
    "git log --remerge-diff",
    // diff -l pipes its output through /usr/bin/pr.
    "diff -l src/main.rs src/lib.rs",
    // bash as sh only: builtins that read or set variables.
    "printf -v PATH %s bin; cat src/main.rs",
    "printf -v CDPATH '\\057'; cd etc && cat passwd",
    "test -v OPENAI_API_KEY",
];

#[test]
#[cfg_attr(windows, ignore = "POSIX shell lines and PATH")]
fn former_holes_are_refused() {
    let w = workspace();
    let root = &w.root;
    let mut wrong: Vec<String> = Vec::new();
    for line in HOLES {
        if verdict(root, root, SYSTEM_PATH, line).is_read_only() {
            wrong.push(line.to_string());
        }
    }

    // dash expands `.*` and `.?` to `.` and `..` too; the glob check lists
    // the directory, where neither appears. At the root, `..` is outside.
    let clean = temp_dir("clean");
    std::fs::create_dir_all(clean.root.join("src")).unwrap();
    for line in ["grep -r root .*", "ls -a .?"] {
        if verdict(&clean.root, &clean.root, SYSTEM_PATH, line).is_read_only() {
            wrong.push(format!("(clean workspace) {line}"));
        }
    }

    // A PATH entry inside the workspace whose `cat` is a symlink to a
    // program outside it (`/bin/sh`): `cat evil.txt` runs a shell script.
    let pbin = root.join("pbin");
    std::fs::create_dir_all(&pbin).unwrap();
    crate::os::testing::symlink("/bin/sh", pbin.join("cat")).unwrap();
    let path = format!("{}:{SYSTEM_PATH}", pbin.display());
    if verdict(root, root, &path, "cat evil.txt").is_read_only() {
        wrong.push("(PATH=<ws>/pbin with cat -> /bin/sh) cat evil.txt".into());
    }

    if git_available() {
        wrong.extend(git_holes());
    }
    assert!(wrong.is_empty(), "judged read-only: {wrong:#?}");
}

fn judged(root: &Path, cwd: &Path, line: &str) -> bool {
    judge(
        line,
        &Context {
            root,
            cwd,
            path_var: Some(SYSTEM_PATH.into()),
            shell: crate::process::shell::ShellKind::Posix,
        },
    )
    .is_read_only()
}

fn git_holes() -> Vec<String> {
    let mut wrong = Vec::new();

    // 1. `cd` to a missing directory: the configuration check runs git in
    //    that directory, cannot start it, and answers yes; git then runs in
    //    the root, whose config names a textconv program.
    let ws = temp_dir("cdfail");
    let root = &ws.root;
    git(&["init", "-q"], root);
    std::fs::write(root.join(".gitattributes"), "* diff=evil\n").unwrap();
    std::fs::write(root.join("a.txt"), "a\n").unwrap();
    git(&["add", "."], root);
    git(&["commit", "-qm", "1"], root);
    git(
        &[
            "config",
            "diff.evil.textconv",
            "sh -c 'touch pwned; cat \"$1\"' -",
        ],
        root,
    );
    assert!(
        !judged(root, root, "git log -p"),
        "sanity: hostile config asks"
    );
    if judged(root, root, "cd nonexistent; git log -p") {
        wrong.push("(hostile .git/config) cd nonexistent; git log -p".into());
    }

    // 2. An embedded repository registered as a submodule: `git status`
    //    recurses into it and runs the clean filter of *its* config.
    let ws = temp_dir("submodule");
    let root = &ws.root;
    git(&["init", "-q"], root);
    let sub = root.join("sub");
    std::fs::create_dir_all(&sub).unwrap();
    git(&["init", "-q"], &sub);
    std::fs::write(sub.join("a.txt"), "a\n").unwrap();
    std::fs::write(sub.join(".gitattributes"), "* filter=evil diff=evil\n").unwrap();
    git(&["add", "."], &sub);
    git(&["commit", "-qm", "s"], &sub);
    git(
        &["config", "filter.evil.clean", "sh -c 'touch ../pwned; cat'"],
        &sub,
    );
    git(&["add", "sub"], root);
    git(&["commit", "-qm", "root"], root);
    std::fs::write(sub.join("a.txt"), "a\nb\n").unwrap();
    // `--submodule` is refused; a plain `git status` may run, and with the
    // neutralising environment it does not enter the submodule.
    if judged(root, root, "git diff --submodule=diff") {
        wrong.push("(hostile submodule config) git diff --submodule=diff".into());
    }
    for args in [&["status"][..], &["diff"][..]] {
        let mut command = std::process::Command::new("git");
        command
            .args(args)
            .current_dir(root)
            .env("GIT_CONFIG_GLOBAL", "/dev/null");
        for (key, value) in super::git::neutralising_env() {
            command.env(key, value);
        }
        let _ = command.output();
        if root.join("pwned").exists() {
            wrong.push(format!(
                "(hostile submodule config) git {args:?} ran its filter"
            ));
        }
    }

    // 3. The repository is larger than the workspace (the workspace is a
    //    folder of a repository, e.g. a monorepo or a dotfiles repo in
    //    $HOME): git reads files above the root.
    let outer = temp_dir("outer");
    git(&["init", "-q"], &outer.root);
    std::fs::write(outer.root.join("secret.txt"), "TOPSECRET\n").unwrap();
    let root = outer.root.join("ws");
    std::fs::create_dir_all(root.join("src")).unwrap();
    std::fs::write(root.join("src/a"), "x\n").unwrap();
    git(&["add", "."], &outer.root);
    git(&["commit", "-qm", "s"], &outer.root);
    for line in [
        "git show HEAD:secret.txt",
        "git grep -e TOP -- :/",
        "git log -p -- ':(top)'",
    ] {
        if judged(&root, &root, line) {
            wrong.push(format!("(workspace inside a repository) {line}"));
        }
    }

    // 4. `.git` is a file pointing at a repository outside the workspace.
    let ws = temp_dir("gitfile");
    std::fs::write(
        ws.root.join(".git"),
        format!("gitdir: {}\n", outer.root.join(".git").display()),
    )
    .unwrap();
    if judged(&ws.root, &ws.root, "git show HEAD:secret.txt") {
        wrong.push("(.git file -> outside repository) git show HEAD:secret.txt".into());
    }

    // 5. A partial clone (remote.*.promisor and partialclonefilter are
    //    "plain" keys): reading a missing blob runs `git fetch` from the
    //    remote URL (any path or host) and writes into .git/objects.
    let src = temp_dir("promisor-src");
    git(&["init", "-q"], &src.root);
    std::fs::write(src.root.join("p.txt"), "PRIVATE\n").unwrap();
    git(&["add", "."], &src.root);
    git(&["commit", "-qm", "p"], &src.root);
    git(&["config", "uploadpack.allowFilter", "true"], &src.root);
    let clone = temp_dir("promisor");
    let url = format!("file://{}", src.root.display());
    git(
        &[
            "clone",
            "-q",
            "--filter=blob:none",
            "--no-checkout",
            &url,
            "c",
        ],
        &clone.root,
    );
    let root = clone.root.join("c");
    if judged(&root, &root, "git show HEAD:p.txt") {
        wrong.push("(partial clone) git show HEAD:p.txt".into());
    }
    wrong
}

/// Attacks that are correctly asked about.
const REFUSED: &[&str] = &[
    "cat /proc/self/environ",
    "cat </dev/tcp/127.0.0.1/80",
    "echo x >/dev/tcp/127.0.0.1/80",
    "ls 0<>f",
    "echo x 1<>src/main.rs",
    "echo x >&file",
    "echo x &>/dev/null",
    "echo x >/dev/null/../../tmp/x",
    "echo x >/dev/nul?",
    "cat 3<link/passwd",
    "ls -la link/",
    "grep -r x -- link",
    "grep -r x .*",
    "ls -d .?",
    "cat sub/*",
    "cd link",
    "cd sub/inner && ls ../../..",
    "cd -- link",
    "cd -L link",
    "printf -v CDPATH %s /; cd etc && cat passwd",
    "git blame --abbrev --contents=/etc/passwd src/main.rs",
    "git blame -S /etc/x src/main.rs",
    "git diff -pO/etc/passwd",
    "git log --outp=x",
    "git log --output x",
    "git log --end-of-options --output=x",
    "git log --stdin",
    "git log --show-signature",
    "git log --format=%G?",
    "git -c x=y log",
    "git --git-dir=.git log",
    "git branch --contains x newbranch",
    "git grep -Ocat x",
    "git grep --open-files-in-pager x",
    "sort -k1 -o x",
    "sort --out=x",
    "sort -mT. x",
    "rg --pre=x y",
    "rg -zi x",
    "find . -fprint x",
    "find . -files0-from x",
    "find . -D tree",
    "find . -name x -ok rm ;",
    "cat <<EOF\n\\\nEOF",
    "cat <<-EOF\n\tEOF\nrm x\nEOF",
    "cat <<EOF\r\nhi\r\nEOF\r\nrm x",
    "ls # x\nrm y",
    "ls;#\nrm y",
    "ls &\\\n& rm x",
    "A=1\\ ls",
    "2>/dev/null PATH=. ls",
    ">/dev/null A=1 cat src/main.rs",
    "cat <~/.ssh/id_rsa",
    "l\\s ~",
    "echo a{b,c}",
    "ls ?(x)",
    "cat $'\\x2fetc\\x2fpasswd'",
    "echo \"$(id)\"",
    "test -f /etc/shadow",
    "[ -f link/shadow ]",
];

/// Lines that look like attacks but are judged as the shell runs them.
const HARMLESS: &[&str] = &[
    // The body ends only at a line that is exactly the delimiter.
    "cat <<'EOF'\nEOF \nrm -rf x\nEOF",
    // `#` inside a word is not a comment.
    "echo a#b",
    // Quoted command names are the same program.
    "'ls' -la",
];

#[test]
#[cfg_attr(windows, ignore = "POSIX shell lines and PATH")]
fn refused() {
    let w = workspace();
    let root = &w.root;
    let mut wrong = Vec::new();
    for line in REFUSED {
        if verdict(root, root, SYSTEM_PATH, line).is_read_only() {
            wrong.push(*line);
        }
    }
    assert!(wrong.is_empty(), "judged read-only: {wrong:#?}");
    for line in HARMLESS {
        assert!(
            verdict(root, root, SYSTEM_PATH, line).is_read_only(),
            "{line:?} asks"
        );
    }
}

/// A workspace of folders to compare, next to a secret outside it:
/// `left/leak` and `deep/l/inner/leak` lead to the secret, `right` and
/// `deep/r` hold plain files of the same names, `globbed/one/leak` leads
/// out one level below what `globbed/*` lists, `loop/self` is a symlink
/// to its own folder and `pair/b/link` leads to a file inside.
fn folders() -> (Workspace, PathBuf) {
    let base = temp_dir("folders");
    let root = base.root.join("ws");
    let secret = base.root.join("secret");
    std::fs::write(&secret, "TOPSECRET\n").unwrap();
    for dir in [
        "left",
        "right",
        "deep/l/inner",
        "deep/r/inner",
        "globbed/one",
        "loop",
        "pair/a",
        "pair/b",
    ] {
        std::fs::create_dir_all(root.join(dir)).unwrap();
    }
    for file in [
        "left/f",
        "right/f",
        "right/leak",
        "deep/r/inner/leak",
        "loop/f",
        "pair/a/f",
        "pair/a/link",
        "pair/b/f",
    ] {
        std::fs::write(root.join(file), "plain\n").unwrap();
    }
    let link =
        |target: &Path, at: &str| crate::os::testing::symlink(target, root.join(at)).unwrap();
    link(&secret, "left/leak");
    link(&secret, "deep/l/inner/leak");
    link(&secret, "globbed/one/leak");
    link(Path::new("."), "loop/self");
    link(&root.join("pair/a/f"), "pair/b/link");
    (base, root)
}

/// What a command prints, run by `sh` in `dir` (`None` when `sh` or the
/// program is missing).
fn output_of(dir: &Path, line: &str) -> Option<String> {
    let out = std::process::Command::new("sh")
        .args(["-c", line])
        .current_dir(dir)
        .output()
        .ok()?;
    Some(String::from_utf8_lossy(&out.stdout).into_owned())
}

#[test]
#[cfg_attr(windows, ignore = "POSIX shell lines and PATH")]
fn folders_compared_through_symlinks_that_lead_out_ask() {
    let (_base, root) = folders();
    let root = root.as_path();
    // The attack is real: diff prints the secret through the folders' links.
    if let Some(printed) = output_of(root, "diff left right") {
        assert!(printed.contains("TOPSECRET"), "{printed}");
    }
    let mut wrong = Vec::new();
    for line in [
        "diff left right",
        "diff right left",
        "diff right/f left",
        "diff -r deep/l deep/r",
        "diff -ru deep/l deep/r",
        "diff -qr deep/l deep/r",
        "diff --recursive deep/l deep/r",
        "diff --recurs deep/l deep/r",
        "diff deep/l/inner deep/r/inner",
        "diff globbed/* right",
        "diff --from-file=left right/f",
        "diff --to-file left right/f",
        "diff -- left right",
        "diff -r . deep",
        "cd deep && diff -r l r",
        "cd left && diff . ../right",
    ] {
        if verdict(root, root, SYSTEM_PATH, line).is_read_only() {
            wrong.push(line);
        }
    }
    assert!(wrong.is_empty(), "judged read-only: {wrong:#?}");
    // Only what diff opens is judged: without `-r` it does not enter
    // `inner`; links that stay inside, and loops, are fine.
    if let Some(printed) = output_of(root, "diff deep/l deep/r") {
        assert!(!printed.contains("TOPSECRET"), "{printed}");
    }
    for line in [
        "diff deep/l deep/r",
        "diff -r pair/a pair/b",
        "diff -r loop loop",
        "diff -r right deep/r",
        "diff left/f right/f",
    ] {
        if let Verdict::Ask(reason) = verdict(root, root, SYSTEM_PATH, line) {
            wrong.push(line);
            eprintln!("{line}: {reason}");
        }
    }
    assert!(wrong.is_empty(), "asked: {wrong:#?}");
}

#[test]
#[cfg_attr(windows, ignore = "POSIX shell lines and PATH")]
fn a_folder_too_large_to_walk_asks() {
    let ws = temp_dir("large");
    let root = ws.root.as_path();
    std::fs::create_dir_all(root.join("many")).unwrap();
    std::fs::create_dir_all(root.join("few")).unwrap();
    for n in 0..=WALK_ENTRY_LIMIT {
        std::fs::write(root.join(format!("many/{n}")), "").unwrap();
    }
    let Verdict::Ask(reason) = verdict(root, root, SYSTEM_PATH, "diff many few") else {
        panic!("a folder past the limit was judged read-only");
    };
    assert!(reason.contains("more than"), "{reason}");
    // The limit is for the whole line, not per folder.
    std::fs::remove_file(root.join("many/0")).unwrap();
    assert!(verdict(root, root, SYSTEM_PATH, "diff many few").is_read_only());
    std::fs::write(root.join("few/x"), "").unwrap();
    std::fs::write(root.join("few/y"), "").unwrap();
    assert!(!verdict(root, root, SYSTEM_PATH, "diff many few").is_read_only());
}

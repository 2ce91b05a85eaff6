//! What a command obviously needs beyond the sandbox (the network,
//! privileges), so that it asks instead of failing inside it.

/// Programs that reach the network, which the sandbox does not allow.
const NETWORK_PROGRAMS: &[&str] = &[
    "curl", "wget", "ssh", "scp", "sftp", "rsync", "nc", "ncat", "netcat", "telnet", "ftp", "ping",
    "dig", "nslookup", "host", "docker", "podman", "kubectl", "gh",
];

/// Programs that ask for privileges, which the sandbox never grants.
const PRIVILEGE_PROGRAMS: &[&str] = &["sudo", "su", "doas", "pkexec"];

/// `program subcommand` pairs that need the network (installing, fetching,
/// publishing).
const NETWORK_SUBCOMMANDS: &[(&str, &[&str])] = &[
    (
        "git",
        &[
            "clone",
            "fetch",
            "pull",
            "push",
            "ls-remote",
            "submodule",
            "remote",
        ],
    ),
    (
        "npm",
        &[
            "install", "i", "ci", "add", "update", "publish", "exec", "x",
        ],
    ),
    ("npx", &[]),
    ("pnpm", &["install", "i", "add", "update", "dlx", "publish"]),
    ("yarn", &["install", "add", "upgrade", "dlx", "publish"]),
    ("bun", &["install", "add", "x"]),
    ("pip", &["install", "download"]),
    ("pip3", &["install", "download"]),
    ("uv", &["pip", "add", "sync", "run", "tool"]),
    ("poetry", &["install", "add", "update"]),
    (
        "cargo",
        &["install", "add", "update", "fetch", "publish", "search"],
    ),
    ("go", &["get", "install", "mod"]),
    ("gem", &["install"]),
    ("bundle", &["install", "update"]),
    ("apt", &[]),
    ("apt-get", &[]),
    ("brew", &[]),
    ("dnf", &[]),
    ("yum", &[]),
    ("pacman", &[]),
    ("apk", &[]),
];

/// Why a command obviously needs more than the sandbox gives (the network,
/// privileges), so it should ask instead of failing inside it. A best-effort
/// look at the words of the line (it need not parse): the sandbox itself is
/// what holds; this only spares the user a command that cannot work.
pub(crate) fn needs_more(line: &str) -> Option<String> {
    // The sandbox keeps the files Spindle runs read-only (and moves aside
    // what a command creates of them): a line that names one asks, so
    // the user decides instead of the command failing.
    let named = crate::tools::protected::line_names_executed(line);
    if let Some(word) = named {
        return Some(format!(
            "`{word}` is a file whose content Spindle runs, which the sandbox keeps read-only"
        ));
    }
    let words: Vec<&str> = line
        .split(|c: char| !(c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '/')))
        .filter(|w| !w.is_empty())
        .map(|w| w.rsplit('/').next().unwrap_or(w))
        .collect();
    for (index, word) in words.iter().enumerate() {
        if NETWORK_PROGRAMS.contains(word) {
            return Some(format!("`{word}` needs the network"));
        }
        if PRIVILEGE_PROGRAMS.contains(word) {
            return Some(format!("`{word}` asks for privileges"));
        }
        if let Some((_, subcommands)) = NETWORK_SUBCOMMANDS.iter().find(|(p, _)| p == word) {
            let next = words.get(index + 1).copied().unwrap_or("");
            if subcommands.is_empty() || subcommands.contains(&next) {
                return Some(format!("`{word} {next}` needs the network"));
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_that_need_more_than_the_sandbox() {
        for line in [
            "curl https://example.invalid",
            "cd x && git push",
            "npm install",
            "cargo install ripgrep",
            "sudo make install",
            "/usr/bin/wget x",
            "pip install -r requirements.txt",
            "echo '{}' > .mcp.json",
            "cp x.json .claude/settings.local.json",
            "tee ./.spindle/config.json",
            "sed -i s/a/b/ .Claude/settings.json",
        ] {
            assert!(needs_more(line).is_some(), "{line}");
        }
        for line in [
            "cargo build",
            "make",
            "npm test",
            "git commit -m 'install'",
            "ls",
            "cat .claude/commands/x.md",
            "git status",
        ] {
            assert!(needs_more(line).is_none(), "{line}");
        }
    }
}

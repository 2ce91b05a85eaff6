//! Approval policy: which tool calls run freely and which ask the user,
//! and what "always" answers are remembered.

pub use crate::modes::Policy;
pub use crate::tools::protected::Protection;
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;
use std::path::Path;

/// What a tool call is about to do, as far as permission goes.
#[derive(Debug, Clone)]
pub enum Action<'a> {
    Read {
        path: &'a Path,
        inside: bool,
    },
    Edit {
        path: &'a Path,
        inside: bool,
        /// Whether the file is on the workspace's protected list.
        protection: Protection,
    },
    Command {
        command_line: &'a str,
        cwd: &'a Path,
        /// Proven read-only by `policy::judge` (which also checks that every
        /// path stays inside the workspace).
        read_only: bool,
        /// Can run inside the sandbox: one is available, and the command
        /// does not obviously need more (network, privileges).
        sandboxable: bool,
    },
    /// A tool of an MCP server.
    Mcp {
        exposed_name: &'a str,
        /// The server's configured name and the tool's own name, as
        /// permission rules name them (not the sanitised exposed name).
        server: &'a str,
        tool: &'a str,
        read_only: bool,
    },
    /// A web page fetched (network): asks outside yolo, since a URL can
    /// carry the workspace's secrets out.
    Fetch {
        url: &'a str,
    },
    /// Updating the plan: nothing to approve.
    Plan,
}

/// "Always" answers, remembered for the rest of the session and scoped
/// exactly: a command by its exact line and working directory, an edit or a
/// read outside the workspace by its file.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Approvals {
    pub allowed: BTreeSet<String>,
    pub rejected: BTreeSet<String>,
    /// Rules answered for the rest of the session ("always allow `cargo
    /// test …`", "all edits in this session").
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rules: Vec<crate::policy::rules::Rule>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    Allow,
    Ask,
    Reject,
}

impl Action<'_> {
    /// The key an "always" answer is remembered under.
    pub fn key(&self) -> Option<String> {
        match self {
            Action::Read { path, .. } => Some(format!("read:{}", path.display())),
            Action::Edit { path, .. } => Some(format!("edit:{}", path.display())),
            Action::Command {
                command_line, cwd, ..
            } => Some(format!("command:{}\u{0}{command_line}", cwd.display())),
            Action::Mcp { exposed_name, .. } => Some(format!("mcp:{exposed_name}")),
            Action::Fetch { url } => Some(format!("fetch:{}", crate::tools::fetch::site_of(url))),
            Action::Plan => None,
        }
    }

    /// How the "always" buttons describe their scope.
    pub fn scope(&self) -> String {
        match self {
            Action::Read { path, .. } => format!("reading {}", path.display()),
            Action::Edit { path, .. } => format!("edits to {}", path.display()),
            Action::Command { command_line, .. } => {
                let line: String = command_line.chars().take(60).collect();
                format!("`{line}` here")
            }
            Action::Mcp { exposed_name, .. } => format!("calls to {exposed_name}"),
            Action::Fetch { url } => format!("fetches from {}", crate::tools::fetch::site_of(url)),
            Action::Plan => String::new(),
        }
    }
}

pub fn decide(policy: Policy, action: &Action<'_>, approvals: &Approvals) -> Decision {
    if policy == Policy::Yolo {
        return Decision::Allow;
    }
    if let Some(key) = action.key() {
        if approvals.rejected.contains(&key) {
            return Decision::Reject;
        }
        if approvals.allowed.contains(&key) {
            return Decision::Allow;
        }
    }
    match action {
        Action::Plan => Decision::Allow,
        Action::Fetch { .. } => Decision::Ask,
        // Read-only MCP tools (by their annotation) run freely in auto.
        Action::Mcp { read_only, .. } => {
            if policy == Policy::Auto && *read_only {
                Decision::Allow
            } else {
                Decision::Ask
            }
        }
        Action::Read { inside, .. } => {
            if *inside {
                Decision::Allow
            } else {
                Decision::Ask
            }
        }
        // A protected file asks wherever edits are otherwise free: both
        // levels under `auto` and `sandbox` (where the file tools run as
        // in `auto`), and `ask` asks for every edit anyway.
        Action::Edit {
            inside, protection, ..
        } => {
            let free = matches!(policy, Policy::Auto | Policy::Sandbox);
            if free && *inside && *protection == Protection::None {
                Decision::Allow
            } else {
                Decision::Ask
            }
        }
        Action::Command {
            read_only,
            sandboxable,
            ..
        } => match policy {
            Policy::Auto if *read_only => Decision::Allow,
            Policy::Sandbox if *sandboxable => Decision::Allow,
            _ => Decision::Ask,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn policies_and_remembered_answers() {
        let path = Path::new("/w/a.rs");
        let edit = Action::Edit {
            path,
            inside: true,
            protection: Protection::None,
        };
        let none = Approvals::default();
        assert_eq!(decide(Policy::Ask, &edit, &none), Decision::Ask);
        assert_eq!(decide(Policy::Auto, &edit, &none), Decision::Allow);
        assert_eq!(decide(Policy::Yolo, &edit, &none), Decision::Allow);
        let git = Action::Edit {
            path,
            inside: true,
            protection: Protection::Executes,
        };
        assert_eq!(decide(Policy::Auto, &git, &none), Decision::Ask);
        let outside_read = Action::Read {
            path: Path::new("/etc/hosts"),
            inside: false,
        };
        assert_eq!(decide(Policy::Auto, &outside_read, &none), Decision::Ask);
        assert_eq!(decide(Policy::Yolo, &outside_read, &none), Decision::Allow);
        let cwd = Path::new("/w");
        let ls = Action::Command {
            command_line: "ls",
            cwd,
            read_only: true,
            sandboxable: true,
        };
        assert_eq!(decide(Policy::Ask, &ls, &none), Decision::Ask);
        assert_eq!(decide(Policy::Auto, &ls, &none), Decision::Allow);
        let build = Action::Command {
            command_line: "cargo build",
            cwd,
            read_only: false,
            sandboxable: true,
        };
        assert_eq!(decide(Policy::Auto, &build, &none), Decision::Ask);
        assert_eq!(decide(Policy::Sandbox, &build, &none), Decision::Allow);
        let unsandboxed = Action::Command {
            command_line: "ls",
            cwd,
            read_only: true,
            sandboxable: false,
        };
        // Without a sandbox, the sandbox policy asks for every command.
        assert_eq!(decide(Policy::Sandbox, &unsandboxed, &none), Decision::Ask);
        assert_eq!(decide(Policy::Sandbox, &edit, &none), Decision::Allow);
        assert_eq!(decide(Policy::Sandbox, &git, &none), Decision::Ask);
        let mut remembered = Approvals::default();
        remembered.allowed.insert(build.key().unwrap());
        assert_eq!(decide(Policy::Ask, &build, &remembered), Decision::Allow);
        let elsewhere = Action::Command {
            command_line: "cargo build",
            cwd: Path::new("/w/sub"),
            read_only: false,
            sandboxable: false,
        };
        assert_eq!(decide(Policy::Ask, &elsewhere, &remembered), Decision::Ask);
        remembered.rejected.insert(edit.key().unwrap());
        assert_eq!(decide(Policy::Auto, &edit, &remembered), Decision::Reject);
    }
}

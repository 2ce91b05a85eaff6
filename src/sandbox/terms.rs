//! The terms of one sandboxed run, shared by the launcher of each system
//! and by the code that starts it: what a command may do (`Profile`),
//! what to run under it (`Launch`), and what the probe found
//! (`ProbeReport`).

use serde::{Deserialize, Serialize};
use std::ffi::OsString;
use std::path::PathBuf;

/// What a sandboxed command may do.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Profile {
    /// Directories whose contents the command may create, change and
    /// delete (the workspace, a private temp dir). Empty: a read-only
    /// sandbox.
    pub writable: Vec<PathBuf>,
    /// Paths inside `writable` ones that stay read-only (the workspace's
    /// `.git`). Missing paths are ignored.
    pub read_only: Vec<PathBuf>,
    /// Whether the network may be used. false = no network at all (no TCP,
    /// no UDP, not even 127.0.0.1). Unix sockets are refused either way
    /// (socket pairs, connected to each other only, are not).
    pub network: bool,
    /// Paths the command must not read (Spindle's key files, config,
    /// database and logs): covered by empty ones where namespaces are
    /// available. Missing paths are ignored.
    pub hidden: Vec<PathBuf>,
}

/// The one line `spindle sandbox --probe` prints: each layer tried for
/// real, with the error of those that failed.
#[derive(Debug, Default, Serialize, Deserialize)]
pub(super) struct ProbeReport {
    pub(super) landlock: Option<u32>,
    pub(super) namespaces: bool,
    pub(super) seccomp: bool,
    /// Whether the sandbox gets a PID namespace with a `/proc` of its own.
    #[serde(default)]
    pub(super) pid_namespace: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) landlock_error: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) namespaces_error: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) seccomp_error: Option<String>,
    /// macOS: whether a Seatbelt profile could be applied.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub(super) seatbelt: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) seatbelt_error: Option<String>,
}

/// What to run and how to confine it.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct Launch {
    pub(super) profile: Profile,
    /// false with the hidden `--no-namespaces`: Landlock and seccomp only,
    /// as on machines without usable namespaces (for tests).
    pub(super) namespaces: bool,
    pub(super) program: OsString,
    pub(super) args: Vec<OsString>,
}

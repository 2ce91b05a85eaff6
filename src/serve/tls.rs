//! TLS for `serve`: the certificate chain and key read from PEM files,
//! a rustls server over the same crypto as every client connection
//! (`net::tls`), and a TLS socket split into a reading and a writing half
//! for a WebSocket, where both run at once on two threads.

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::{ServerConfig, ServerConnection};
use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::sync::{Arc, Mutex};

/// PEM files larger than this are refused.
const PEM_CAP: u64 = 1 << 20;

fn read_pem(path: &Path, what: &str) -> Result<Vec<u8>, String> {
    let shown = path.display();
    let file = crate::os::open_read(path, true)
        .map_err(|error| format!("cannot read the TLS {what} {shown}: {error}"))?;
    if !file.metadata().map(|m| m.is_file()).unwrap_or(false) {
        return Err(format!("the TLS {what} {shown} is not a plain file"));
    }
    let mut bytes = Vec::new();
    file.take(PEM_CAP + 1)
        .read_to_end(&mut bytes)
        .map_err(|error| format!("cannot read the TLS {what} {shown}: {error}"))?;
    if bytes.len() as u64 > PEM_CAP {
        return Err(format!("the TLS {what} {shown} is larger than 1 MiB"));
    }
    Ok(bytes)
}

/// The server's TLS setup from a certificate chain and a private key in
/// PEM; what is wrong with either, in words.
pub(crate) fn server_config(cert: &Path, key: &Path) -> Result<Arc<ServerConfig>, String> {
    let pem = read_pem(cert, "certificate")?;
    let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(&pem)
        .collect::<Result<_, _>>()
        .map_err(|error| format!("the TLS certificate {} is not PEM: {error}", cert.display()))?;
    if chain.is_empty() {
        return Err(format!(
            "the TLS certificate {} holds no certificate",
            cert.display()
        ));
    }
    let key_pem = read_pem(key, "key")?;
    if let Ok(meta) = std::fs::metadata(key) {
        super::token::check_private(&meta)
            .map_err(|why| format!("the TLS key {} {why}", key.display()))?;
    }
    let der = PrivateKeyDer::from_pem_slice(&key_pem).map_err(|error| {
        format!(
            "the TLS key {} is not a PEM private key: {error}",
            key.display()
        )
    })?;
    let signing = rustls::crypto::ring::sign::any_supported_type(&der)
        .map_err(|error| format!("the TLS key {} cannot be used: {error}", key.display()))?;
    let certified = rustls::sign::CertifiedKey::new(chain, signing);
    certified.keys_match().map_err(|_| {
        format!(
            "the TLS key {} does not match the certificate",
            key.display()
        )
    })?;
    let config = ServerConfig::builder_with_provider(crate::net::tls::provider())
        .with_safe_default_protocol_versions()
        .map_err(|error| format!("cannot set up TLS: {error}"))?
        .with_no_client_auth()
        .with_cert_resolver(Arc::new(rustls::sign::SingleCertAndKey::from(certified)));
    Ok(Arc::new(config))
}

/// A TLS socket shared by a reading and a writing half.
struct Shared {
    tls: Mutex<ServerConnection>,
    /// The raw socket the writing half sends records on.
    out: Mutex<TcpStream>,
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl Shared {
    /// Sends every record the TLS state has ready.
    fn flush_records(&self, tls: &mut ServerConnection) -> io::Result<()> {
        let mut out = lock(&self.out);
        while tls.wants_write() {
            tls.write_tls(&mut *out)?;
        }
        out.flush()
    }
}

pub(crate) struct ReadHalf {
    shared: Arc<Shared>,
    raw: TcpStream,
}

pub(crate) struct WriteHalf {
    shared: Arc<Shared>,
}

impl Read for ReadHalf {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        loop {
            {
                let mut tls = lock(&self.shared.tls);
                match tls.reader().read(buf) {
                    Ok(n) => return Ok(n),
                    Err(error) if error.kind() == io::ErrorKind::WouldBlock => {}
                    Err(error) => return Err(error),
                }
            }
            // Records are read off the socket without the lock, so the
            // writing half goes on meanwhile.
            let mut records = [0u8; 16 * 1024];
            let n = self.raw.read(&mut records)?;
            if n == 0 {
                return Ok(0);
            }
            let mut tls = lock(&self.shared.tls);
            let mut fed = &records[..n];
            while !fed.is_empty() {
                tls.read_tls(&mut fed)?;
                if let Err(error) = tls.process_new_packets() {
                    let _ = self.shared.flush_records(&mut tls);
                    return Err(io::Error::new(io::ErrorKind::InvalidData, error));
                }
            }
            self.shared.flush_records(&mut tls)?;
        }
    }
}

impl Write for WriteHalf {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let mut tls = lock(&self.shared.tls);
        tls.writer().write_all(buf)?;
        self.shared.flush_records(&mut tls)?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        let mut tls = lock(&self.shared.tls);
        self.shared.flush_records(&mut tls)
    }
}

/// Splits an established TLS stream into halves usable from two threads.
pub(crate) fn split(
    stream: rustls::StreamOwned<ServerConnection, TcpStream>,
) -> io::Result<(ReadHalf, WriteHalf)> {
    let raw = stream.sock.try_clone()?;
    let shared = Arc::new(Shared {
        tls: Mutex::new(stream.conn),
        out: Mutex::new(stream.sock),
    });
    Ok((
        ReadHalf {
            shared: shared.clone(),
            raw,
        },
        WriteHalf { shared },
    ))
}

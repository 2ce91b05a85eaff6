//! Which certificate authorities HTTPS trusts, for every `ureq` agent
//! Spindle makes (model calls, model lists, MCP over HTTP, `fetch_url`).
//!
//! Always the Mozilla roots compiled in; besides them the certificates of
//! `SSL_CERT_FILE` (a PEM bundle), of the PEM files in each folder of
//! `SSL_CERT_DIR` (`:`-separated, `;` on Windows), of the config's
//! `tls.ca_file`, and of the operating system's store: on Linux and the
//! other Unix systems the distribution's bundle file, on macOS the system
//! bundle and the certificates of the System and login keychains (exported
//! by `/usr/bin/security`, so no SDK framework is linked), on Windows the
//! system's store (read through `rustls-native-certs`). So a corporate
//! TLS-inspecting proxy or a self-hosted server with an internal CA works
//! the way it does for the system's own tools.
//!
//! A file that cannot be read, is too large, is not a regular file (a
//! FIFO would block the open) or holds no certificate is skipped with a
//! warning naming it; nothing here fails a request nor waits on a file.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};
use ureq::tls::{Certificate, PemItem, RootCerts, TlsConfig};

/// The largest certificate file read (a distribution's whole bundle is
/// about 200 KiB).
const FILE_CAP: u64 = 4 * 1024 * 1024;

/// The most files read from one `SSL_CERT_DIR` folder (hashed links
/// included: a folder like `/etc/ssl/certs` holds a few hundred).
const DIR_FILES: usize = 2_000;

/// Where distributions keep their bundle of trusted certificates; the
/// first one present is read.
#[cfg(all(unix, not(target_os = "macos")))]
const SYSTEM_BUNDLES: [&str; 6] = [
    "/etc/ssl/certs/ca-certificates.crt", // Debian, Ubuntu, Arch, Alpine, Gentoo
    "/etc/pki/tls/certs/ca-bundle.crt",   // Fedora, RHEL, CentOS
    "/etc/pki/ca-trust/extracted/pem/tls-ca-bundle.pem", // newer RHEL
    "/etc/ssl/ca-bundle.pem",             // openSUSE
    "/etc/ssl/cert.pem",                  // Alpine, the BSDs
    "/etc/pki/tls/cacert.pem",            // OpenELEC
];

/// What a configuration adds to the trust of the process's environment:
/// its `tls.ca_file` (made absolute when the config was loaded). Every
/// `ureq` agent is built from the `Trust` of the configuration its caller
/// was given, so two agents of one process with different configs trust
/// different authorities. The TLS settings are built on first use, once
/// per `Trust` (a reload makes a new one, so a changed file is read again).
#[derive(Clone, Debug, Default)]
pub struct Trust {
    ca_file: Option<PathBuf>,
    built: Arc<OnceLock<TlsConfig>>,
}

impl PartialEq for Trust {
    fn eq(&self, other: &Trust) -> bool {
        self.ca_file == other.ca_file
    }
}

impl Eq for Trust {}

impl Trust {
    /// The trust of a config whose `tls.ca_file` is `ca_file` (absolute).
    pub fn new(ca_file: Option<PathBuf>) -> Trust {
        Trust {
            ca_file,
            built: Arc::default(),
        }
    }

    /// The config's `tls.ca_file`, if it names one.
    pub fn ca_file(&self) -> Option<&Path> {
        self.ca_file.as_deref()
    }

    /// The TLS settings of an agent: the bundled roots and whatever the
    /// environment, this config and the system add. With nothing added it
    /// is ureq's own default (the bundled roots).
    pub fn tls_config(&self) -> TlsConfig {
        self.built
            .get_or_init(|| build(self.ca_file.as_deref()))
            .clone()
    }
}

/// The TLS settings of an agent for a plain-http address reached
/// directly: TLS is used there only if the server redirects to https,
/// which then trusts the bundled roots alone. Reading and parsing the
/// system's certificates (most of a megabyte held for the whole process)
/// is left to the agents that speak https.
pub(crate) fn bundled_only() -> TlsConfig {
    static BUNDLED: std::sync::OnceLock<TlsConfig> = std::sync::OnceLock::new();
    BUNDLED
        .get_or_init(|| {
            TlsConfig::builder()
                .unversioned_rustls_crypto_provider(provider())
                .build()
        })
        .clone()
}

/// What one build of the TLS settings was made from: the `ca_file` and a
/// digest of the bytes read from it (`None` when it could not be read).
/// The environment's and the system's certificates are facts of the
/// process, read on the first build.
type Inputs = (Option<PathBuf>, Option<[u8; 32]>);

/// The TLS settings built so far, by their inputs: building them reads and
/// parses a few hundred certificates, and every config of the process
/// with the same `ca_file` holding the same bytes shares one build. Keyed,
/// never replaced by another config's: each caller finds its own.
static BUILT: Mutex<Vec<(Inputs, TlsConfig)>> = Mutex::new(Vec::new());

/// The most builds kept (a long process reloading a changing file keeps
/// only the recent ones).
const BUILT_KEPT: usize = 8;

/// The TLS settings for `ca_file`, from the cache when the same file with
/// the same bytes was built for before.
fn build(ca_file: Option<&Path>) -> TlsConfig {
    let ca = ca_file.map(|path| (path, read_capped(path, "tls.ca_file")));
    let digest = ca
        .as_ref()
        .and_then(|(_, bytes)| bytes.as_deref())
        .map(|bytes| {
            let mut out = [0u8; 32];
            out.copy_from_slice(ring::digest::digest(&ring::digest::SHA256, bytes).as_ref());
            out
        });
    let inputs: Inputs = (ca_file.map(Path::to_path_buf), digest);
    let mut built = crate::cancel::lock(&BUILT);
    if let Some((_, config)) = built.iter().find(|(key, _)| *key == inputs) {
        return config.clone();
    }
    // Hostile files are read here; whatever goes wrong, connections go
    // on with the bundled roots rather than the thread that asked dying.
    let extra = std::panic::catch_unwind(|| {
        let ca = ca
            .as_ref()
            .and_then(|(path, bytes)| Some((*path, bytes.as_deref()?)));
        extra_certificates(ca)
    })
    .unwrap_or_else(|_| {
        log::warn!("the extra certificates could not be read; only the bundled roots are trusted");
        Vec::new()
    });
    let config = if extra.is_empty() {
        TlsConfig::builder()
            .unversioned_rustls_crypto_provider(provider())
            .build()
    } else {
        log::debug!(
            "trusting {} certificates besides the bundled roots",
            extra.len()
        );
        let mut all = bundled_roots();
        all.extend(extra);
        TlsConfig::builder()
            .root_certs(RootCerts::Specific(Arc::new(all)))
            .unversioned_rustls_crypto_provider(provider())
            .build()
    };
    if built.len() >= BUILT_KEPT {
        built.remove(0);
    }
    built.push((inputs, config.clone()));
    config
}

/// What `spindle doctor` shows of the added trust: for each file or
/// folder that the environment or the config names, its name and how
/// many certificates it gives, or why it gives none (the files are read
/// as the trust reads them: never a FIFO or a device, within a cap).
pub(crate) fn check(trust: &Trust) -> Vec<(String, Result<String, String>)> {
    let mut found = Vec::new();
    let count = |path: &Path| {
        crate::os::reading::read_named(path, FILE_CAP).and_then(|bytes| {
            let mut certs = Vec::new();
            parse_into(&bytes, path, "doctor", false, &mut certs);
            match certs.len() {
                0 => Err(format!("{} holds no PEM certificate", path.display())),
                n => Ok(format!(
                    "{}: {}",
                    path.display(),
                    crate::util::count(n, "certificate", "certificates")
                )),
            }
        })
    };
    if let Some(file) = std::env::var_os("SSL_CERT_FILE").filter(|v| !v.is_empty()) {
        found.push(("SSL_CERT_FILE".to_string(), count(Path::new(&file))));
    }
    if let Some(dirs) = std::env::var_os("SSL_CERT_DIR").filter(|v| !v.is_empty()) {
        for dir in std::env::split_paths(&dirs).filter(|dir| !dir.as_os_str().is_empty()) {
            let mut certs = Vec::new();
            let looked = match std::fs::metadata(&dir) {
                Ok(meta) if meta.is_dir() => {
                    read_dir(&dir, &mut certs);
                    Ok(format!(
                        "{}: {}",
                        dir.display(),
                        crate::util::count(certs.len(), "certificate", "certificates")
                    ))
                }
                Ok(_) => Err(format!("{} is not a folder", dir.display())),
                Err(err) => Err(format!("{}: {err}", dir.display())),
            };
            found.push(("SSL_CERT_DIR".to_string(), looked));
        }
    }
    if let Some(file) = trust.ca_file() {
        found.push(("tls.ca_file".to_string(), count(file)));
    }
    found
}

/// The crypto of every connection: ring, with the AES-GCM cipher suites
/// of TLS 1.3 and 1.2 (ECDHE only), ring's key exchange groups and
/// webpki's signature checks over ring. Built here rather than taken from
/// rustls's ring provider, whose list of suites would keep the code of
/// ChaCha20-Poly1305 in the binary.
pub(crate) fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    use rustls::crypto::ring::{cipher_suite as suite, kx_group};
    Arc::new(rustls::crypto::CryptoProvider {
        cipher_suites: vec![
            suite::TLS13_AES_128_GCM_SHA256,
            suite::TLS13_AES_256_GCM_SHA384,
            suite::TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,
            suite::TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,
            suite::TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,
            suite::TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,
        ],
        kx_groups: vec![kx_group::X25519, kx_group::SECP256R1, kx_group::SECP384R1],
        signature_verification_algorithms: SIGNATURES,
        secure_random: &Ring,
        key_provider: &Ring,
    })
}

/// The signature algorithms a server's certificate and handshake may
/// use, and which of them each TLS signature scheme names.
static SIGNATURES: rustls::crypto::WebPkiSupportedAlgorithms = {
    use rustls::SignatureScheme as Scheme;
    use webpki::ring as alg;
    rustls::crypto::WebPkiSupportedAlgorithms {
        all: &[
            alg::ECDSA_P256_SHA256,
            alg::ECDSA_P256_SHA384,
            alg::ECDSA_P384_SHA256,
            alg::ECDSA_P384_SHA384,
            alg::ED25519,
            alg::RSA_PSS_2048_8192_SHA256_LEGACY_KEY,
            alg::RSA_PSS_2048_8192_SHA384_LEGACY_KEY,
            alg::RSA_PSS_2048_8192_SHA512_LEGACY_KEY,
            alg::RSA_PKCS1_2048_8192_SHA256,
            alg::RSA_PKCS1_2048_8192_SHA384,
            alg::RSA_PKCS1_2048_8192_SHA512,
            alg::RSA_PKCS1_2048_8192_SHA256_ABSENT_PARAMS,
            alg::RSA_PKCS1_2048_8192_SHA384_ABSENT_PARAMS,
            alg::RSA_PKCS1_2048_8192_SHA512_ABSENT_PARAMS,
        ],
        // In TLS 1.2 an ECDSA scheme does not fix the curve; in 1.3 it does.
        mapping: &[
            (
                Scheme::ECDSA_NISTP384_SHA384,
                &[alg::ECDSA_P384_SHA384, alg::ECDSA_P256_SHA384],
            ),
            (
                Scheme::ECDSA_NISTP256_SHA256,
                &[alg::ECDSA_P256_SHA256, alg::ECDSA_P384_SHA256],
            ),
            (Scheme::ED25519, &[alg::ED25519]),
            (
                Scheme::RSA_PSS_SHA512,
                &[alg::RSA_PSS_2048_8192_SHA512_LEGACY_KEY],
            ),
            (
                Scheme::RSA_PSS_SHA384,
                &[alg::RSA_PSS_2048_8192_SHA384_LEGACY_KEY],
            ),
            (
                Scheme::RSA_PSS_SHA256,
                &[alg::RSA_PSS_2048_8192_SHA256_LEGACY_KEY],
            ),
            (Scheme::RSA_PKCS1_SHA512, &[alg::RSA_PKCS1_2048_8192_SHA512]),
            (Scheme::RSA_PKCS1_SHA384, &[alg::RSA_PKCS1_2048_8192_SHA384]),
            (Scheme::RSA_PKCS1_SHA256, &[alg::RSA_PKCS1_2048_8192_SHA256]),
        ],
    }
};

/// The randomness of the handshakes (the system's, through ring), and no
/// client keys: Spindle presents no client certificate.
#[derive(Debug)]
struct Ring;

impl rustls::crypto::SecureRandom for Ring {
    fn fill(&self, buf: &mut [u8]) -> Result<(), rustls::crypto::GetRandomFailed> {
        use ring::rand::SecureRandom;
        ring::rand::SystemRandom::new()
            .fill(buf)
            .map_err(|_| rustls::crypto::GetRandomFailed)
    }
}

impl rustls::crypto::KeyProvider for Ring {
    fn load_private_key(
        &self,
        _key: rustls::pki_types::PrivateKeyDer<'static>,
    ) -> Result<Arc<dyn rustls::sign::SigningKey>, rustls::Error> {
        Err(rustls::Error::General(
            "Spindle presents no client certificate".into(),
        ))
    }
}

/// The certificates every source adds, in order: `SSL_CERT_FILE`,
/// `SSL_CERT_DIR`, the config's `ca_file`, the system's store.
/// `ca` is the config's file with the bytes read from it.
fn extra_certificates(ca: Option<(&Path, &[u8])>) -> Vec<Certificate<'static>> {
    let mut certs = Vec::new();
    let env = |name: &str| std::env::var_os(name).filter(|value| !value.is_empty());
    let cert_file = env("SSL_CERT_FILE");
    let cert_dir = env("SSL_CERT_DIR");
    if let Some(file) = &cert_file {
        read_file(Path::new(file), "SSL_CERT_FILE", &mut certs);
    }
    if let Some(dirs) = &cert_dir {
        for dir in std::env::split_paths(dirs).filter(|dir| !dir.as_os_str().is_empty()) {
            read_dir(&dir, &mut certs);
        }
    }
    if let Some((file, bytes)) = ca {
        parse_into(bytes, file, "tls.ca_file", true, &mut certs);
    }
    system_certificates(cert_file.is_some() || cert_dir.is_some(), &mut certs);
    certs
}

/// The distribution's bundle: the first of the usual files present.
#[cfg(all(unix, not(target_os = "macos")))]
fn system_certificates(_env_given: bool, certs: &mut Vec<Certificate<'static>>) {
    if let Some(bundle) = SYSTEM_BUNDLES.iter().map(Path::new).find(|p| p.is_file()) {
        read_file(bundle, "the system's certificate bundle", certs);
    }
}

/// The system's store. `rustls-native-certs` reads `SSL_CERT_FILE` and
/// `SSL_CERT_DIR` instead of the store when either is set (as OpenSSL
/// does); those were read already, so the store is then left out.
#[cfg(windows)]
fn system_certificates(env_given: bool, certs: &mut Vec<Certificate<'static>>) {
    if env_given {
        return;
    }
    let found = rustls_native_certs::load_native_certs();
    for error in &found.errors {
        log::warn!("reading the system's certificate store: {error}");
    }
    certs.extend(
        found
            .certs
            .iter()
            .map(|der| Certificate::from_der(der.as_ref()).to_owned()),
    );
}

/// macOS: `/etc/ssl/cert.pem` (the system's bundle), then what an
/// administrator or the user added to the System and login keychains (a
/// corporate CA lands there), as PEM from `security find-certificate`,
/// which is given a few seconds. Left out when `SSL_CERT_FILE` or
/// `SSL_CERT_DIR` is set, as on Windows.
#[cfg(target_os = "macos")]
fn system_certificates(env_given: bool, certs: &mut Vec<Certificate<'static>>) {
    if env_given {
        return;
    }
    let bundle = Path::new("/etc/ssl/cert.pem");
    if bundle.is_file() {
        read_file(bundle, "the system's certificate bundle", certs);
    }
    let mut keychains = vec![PathBuf::from("/Library/Keychains/System.keychain")];
    if let Some(home) = crate::os::folders::home() {
        keychains.push(home.join("Library/Keychains/login.keychain-db"));
    }
    for keychain in keychains.iter().filter(|k| k.is_file()) {
        match keychain_pem(keychain) {
            Ok(pem) => parse_into(&pem, keychain, "a keychain", false, certs),
            Err(err) => log::warn!("reading {}: {err}", keychain.display()),
        }
    }
}

/// The certificates of `keychain` as PEM, from `/usr/bin/security`,
/// killed after five seconds; its output capped like a file.
#[cfg(target_os = "macos")]
fn keychain_pem(keychain: &Path) -> Result<Vec<u8>, String> {
    use std::io::Read;
    use std::process::{Command, Stdio};
    let mut child = Command::new("/usr/bin/security")
        .args(["find-certificate", "-a", "-p"])
        .arg(keychain)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|err| format!("cannot run /usr/bin/security: {err}"))?;
    let stdout = child.stdout.take().ok_or("no output pipe")?;
    let reader = std::thread::spawn(move || {
        let mut out = Vec::new();
        let _ = stdout.take(FILE_CAP).read_to_end(&mut out);
        out
    });
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    loop {
        match child.try_wait() {
            Ok(Some(_)) => break,
            Ok(None) if std::time::Instant::now() < deadline => {
                std::thread::sleep(std::time::Duration::from_millis(20))
            }
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                return Err("/usr/bin/security did not answer in 5 s".into());
            }
        }
    }
    reader.join().map_err(|_| "the reader failed".to_string())
}

#[cfg(not(any(unix, windows)))]
fn system_certificates(_env_given: bool, _certs: &mut Vec<Certificate<'static>>) {}

/// Reads every regular file of `dir` that holds PEM certificates (files
/// that hold none, such as revocation lists, are passed over quietly).
fn read_dir(dir: &Path, certs: &mut Vec<Certificate<'static>>) {
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(err) => {
            log::warn!("cannot read SSL_CERT_DIR folder {}: {err}", dir.display());
            return;
        }
    };
    let mut paths: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .map(|entry| entry.path())
        .filter(|path| path.is_file())
        .take(DIR_FILES + 1)
        .collect();
    if paths.len() > DIR_FILES {
        log::warn!(
            "SSL_CERT_DIR folder {} has more than {DIR_FILES} files; only {DIR_FILES} are read",
            dir.display()
        );
        paths.truncate(DIR_FILES);
    }
    paths.sort();
    for path in paths {
        if let Some(text) = read_capped(&path, "SSL_CERT_DIR") {
            parse_into(&text, &path, "SSL_CERT_DIR", false, certs);
        }
    }
}

/// Reads one PEM bundle named by `source`.
fn read_file(path: &Path, source: &str, certs: &mut Vec<Certificate<'static>>) {
    if let Some(text) = read_capped(path, source) {
        parse_into(&text, path, source, true, certs);
    }
}

/// A file's bytes, at most `FILE_CAP` of them; `None` (with a warning)
/// when it cannot be read, is larger, or is not a regular file (a FIFO
/// would block the open and every connection waiting for the trust).
fn read_capped(path: &Path, source: &str) -> Option<Vec<u8>> {
    match crate::os::reading::read_named(path, FILE_CAP) {
        Ok(bytes) => Some(bytes),
        Err(why) => {
            log::warn!("certificates of {source} are not read: {why}");
            None
        }
    }
}

/// Adds the PEM certificates of `text` (keys and other sections are
/// passed over). A malformed section ends the file with a warning; what
/// came before it is kept. `want` says whether a file with no
/// certificate deserves a warning.
fn parse_into(
    text: &[u8],
    path: &Path,
    source: &str,
    want: bool,
    certs: &mut Vec<Certificate<'static>>,
) {
    let before = certs.len();
    for item in ureq::tls::parse_pem(text) {
        match item {
            Ok(PemItem::Certificate(cert)) => certs.push(cert),
            Ok(_) => {}
            Err(err) => {
                log::warn!(
                    "{} ({source}) is not a valid PEM file: {err}; certificates after that are not read",
                    path.display()
                );
                break;
            }
        }
    }
    if want && certs.len() == before {
        log::warn!("{} ({source}) holds no PEM certificate", path.display());
    }
}

/// The bundled Mozilla roots, as certificates. ureq takes added roots
/// only as certificates, and the bundle holds trust anchors (a subject, a
/// key, name constraints), so each anchor is wrapped in the smallest
/// certificate that the verifier reads back as the very same anchor: no
/// signature, no validity (an anchor has neither).
fn bundled_roots() -> Vec<Certificate<'static>> {
    webpki_roots::TLS_SERVER_ROOTS
        .iter()
        .map(|anchor| {
            let der = anchor_certificate(
                &anchor.subject,
                &anchor.subject_public_key_info,
                anchor.name_constraints.as_deref(),
            );
            Certificate::from_der(&der).to_owned()
        })
        .collect()
}

/// A DER-encoded X.509 v3 certificate holding `subject` and `spki` (the
/// contents of their SEQUENCEs) and, when given, the name constraints
/// extension with `constraints` (the contents of its SEQUENCE).
fn anchor_certificate(subject: &[u8], spki: &[u8], constraints: Option<&[u8]>) -> Vec<u8> {
    const EMPTY_SEQUENCE: [u8; 2] = [0x30, 0x00];
    let mut tbs = vec![
        0xa0, 0x03, 0x02, 0x01, 0x02, // [0] version: v3
        0x02, 0x01, 0x01, // serial number 1
    ];
    tbs.extend(EMPTY_SEQUENCE); // signature algorithm
    tbs.extend(EMPTY_SEQUENCE); // issuer
    tbs.extend(EMPTY_SEQUENCE); // validity
    tbs.extend(der(0x30, subject));
    tbs.extend(der(0x30, spki));
    if let Some(constraints) = constraints {
        // id-ce-nameConstraints, 2.5.29.30
        let mut extension = vec![0x06, 0x03, 0x55, 0x1d, 0x1e];
        extension.extend(der(0x04, &der(0x30, constraints)));
        tbs.extend(der(0xa3, &der(0x30, &der(0x30, &extension))));
    }
    let mut certificate = der(0x30, &tbs);
    certificate.extend(EMPTY_SEQUENCE); // signature algorithm
    certificate.extend([0x03, 0x01, 0x00]); // empty signature
    der(0x30, &certificate)
}

/// One DER value: `tag`, the definite length, `content`.
fn der(tag: u8, content: &[u8]) -> Vec<u8> {
    let len = content.len();
    let mut out = vec![tag];
    if len < 0x80 {
        out.push(len as u8);
    } else if len < 0x100 {
        out.extend([0x81, len as u8]);
    } else {
        out.extend([0x82, (len >> 8) as u8, len as u8]);
    }
    out.extend_from_slice(content);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_bundled_root_reads_back_as_the_same_trust_anchor() {
        let certs = bundled_roots();
        let mut store = rustls::RootCertStore::empty();
        let (added, ignored) = store.add_parsable_certificates(
            certs
                .iter()
                .map(|cert| rustls::pki_types::CertificateDer::from(cert.der().to_vec())),
        );
        assert_eq!(ignored, 0);
        assert_eq!(added, webpki_roots::TLS_SERVER_ROOTS.len());
        assert_eq!(store.roots, webpki_roots::TLS_SERVER_ROOTS);
        // The one name-constrained root keeps its constraints.
        assert!(store
            .roots
            .iter()
            .any(|root| root.name_constraints.is_some()));
    }

    #[test]
    fn der_lengths_take_one_two_or_three_bytes() {
        assert_eq!(der(0x04, &[1, 2]), [0x04, 2, 1, 2]);
        assert_eq!(der(0x04, &[0; 200])[..3], [0x04, 0x81, 200]);
        assert_eq!(der(0x04, &[0; 300])[..4], [0x04, 0x82, 1, 44]);
    }

    fn scratch(name: &str) -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("spindle-tls-{name}-{}", crate::util::random_hex()));
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    const CA: &str = include_str!("../../tests/data/tls/ca.pem");

    #[test]
    fn pem_files_give_their_certificates_and_bad_ones_are_skipped() {
        let dir = scratch("pem");
        let good = dir.join("good.pem");
        std::fs::write(&good, format!("junk before\n{CA}{CA}")).unwrap();
        let mut certs = Vec::new();
        read_file(&good, "test", &mut certs);
        assert_eq!(certs.len(), 2);

        // A broken section: what came before it is kept, nothing panics.
        let broken = dir.join("broken.pem");
        std::fs::write(&broken, format!("{CA}-----BEGIN CERTIFICATE-----\n!!!\n")).unwrap();
        let mut certs = Vec::new();
        read_file(&broken, "test", &mut certs);
        assert_eq!(certs.len(), 1);

        // Missing, not PEM, too large: nothing, and no panic.
        let mut certs = Vec::new();
        read_file(&dir.join("missing.pem"), "test", &mut certs);
        let binary = dir.join("binary");
        std::fs::write(&binary, [0u8, 159, 146, 150]).unwrap();
        read_file(&binary, "test", &mut certs);
        let large = dir.join("large.pem");
        std::fs::write(&large, vec![b'a'; FILE_CAP as usize + 1]).unwrap();
        read_file(&large, "test", &mut certs);
        read_file(&dir, "a folder", &mut certs);
        assert!(certs.is_empty());

        // A folder: its PEM files, in name order; others passed over.
        let mut certs = Vec::new();
        read_dir(&dir, &mut certs);
        assert_eq!(certs.len(), 3);
        read_dir(&dir.join("missing"), &mut certs);
        assert_eq!(certs.len(), 3);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// Whether `config` trusts the test CA.
    fn trusts_test_ca(config: &TlsConfig) -> bool {
        let mut ca = Vec::new();
        parse_into(CA.as_bytes(), Path::new("ca.pem"), "test", true, &mut ca);
        match config.root_certs() {
            RootCerts::Specific(certs) => certs.iter().any(|cert| cert.der() == ca[0].der()),
            _ => false,
        }
    }

    #[test]
    fn each_trust_keeps_its_own_ca_file_and_a_changed_file_is_read_anew() {
        let dir = scratch("trust");
        let file = dir.join("ca.pem");
        std::fs::write(&file, CA).unwrap();
        let with = Trust::new(Some(file.clone()));
        let without = Trust::default();
        // In either order, neither changes what the other trusts.
        assert!(!trusts_test_ca(&without.tls_config()));
        assert!(trusts_test_ca(&with.tls_config()));
        assert!(!trusts_test_ca(&without.tls_config()));
        assert!(trusts_test_ca(&Trust::new(Some(file.clone())).tls_config()));
        // The same path with other bytes is another build; the trust
        // built before keeps what it read.
        std::fs::write(&file, "no certificate here").unwrap();
        assert!(!trusts_test_ca(
            &Trust::new(Some(file.clone())).tls_config()
        ));
        assert!(trusts_test_ca(&with.tls_config()));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    #[cfg_attr(windows, ignore = "FIFOs")]
    fn a_fifo_is_passed_over_without_blocking() {
        let dir = scratch("fifo");
        let fifo = dir.join("bundle.pem");
        let made = std::process::Command::new("mkfifo").arg(&fifo).status();
        assert!(made.is_ok_and(|s| s.success()), "mkfifo");
        std::fs::write(dir.join("ca.pem"), CA).unwrap();
        // Opening the FIFO to read would block until a writer came.
        let mut certs = Vec::new();
        read_file(&fifo, "SSL_CERT_FILE", &mut certs);
        assert!(certs.is_empty());
        read_dir(&dir, &mut certs);
        assert_eq!(certs.len(), 1);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

//! Plain `http` through an HTTP proxy the way proxies expect it: the
//! request goes to the proxy with its target in absolute form
//! (`POST http://host:port/path HTTP/1.1`, RFC 9112 §3.2.2) instead of a
//! `CONNECT` tunnel, which many corporate proxies refuse for port 80.
//!
//! ureq 3.5.2 writes only origin-form request lines, so the agent for
//! such a URL is built from parts: a resolver that gives the proxy's
//! addresses for every URL, ureq's own TCP connector, and a transport
//! around it that rewrites the request line of the connection's one
//! request (idle connections are not kept, so none carries a second)
//! and adds the proxy's credentials.

use std::fmt;
use ureq::http::Uri;
use ureq::unversioned::resolver::{DefaultResolver, ResolvedSocketAddrs, Resolver};
use ureq::unversioned::transport::{
    Buffers, ConnectionDetails, Connector, NextTimeout, TcpConnector, Transport,
};

/// Builds the agent for `config` whose requests go through `proxy` in
/// absolute form. `config` carries no proxy of ureq's own.
pub(super) fn agent(config: ureq::config::Config, proxy: &ureq::Proxy) -> ureq::Agent {
    let authorization = proxy.username().map(|user| {
        let pair = format!("{user}:{}", proxy.password().unwrap_or_default());
        format!("Basic {}", crate::util::base64_encode(pair.as_bytes()))
    });
    let connector = TcpConnector::default().chain(AbsoluteForm { authorization });
    let resolver = ToProxy {
        proxy: format!("http://{}:{}", host_for_uri(proxy.host()), proxy.port()),
        inner: DefaultResolver::default(),
    };
    ureq::Agent::with_parts(config, connector, resolver)
}

/// An IPv6 address goes into a URI in brackets.
fn host_for_uri(host: &str) -> String {
    if host.contains(':') && !host.starts_with('[') {
        format!("[{host}]")
    } else {
        host.to_string()
    }
}

/// Resolves every URL to the proxy's addresses.
#[derive(Debug)]
struct ToProxy {
    proxy: String,
    inner: DefaultResolver,
}

impl Resolver for ToProxy {
    fn resolve(
        &self,
        _uri: &Uri,
        config: &ureq::config::Config,
        timeout: NextTimeout,
    ) -> Result<ResolvedSocketAddrs, ureq::Error> {
        let proxy: Uri = self.proxy.parse().map_err(|_| ureq::Error::HostNotFound)?;
        self.inner.resolve(&proxy, config, timeout)
    }
}

/// Wraps the TCP connection to the proxy.
struct AbsoluteForm {
    /// The `Proxy-Authorization` value, when the proxy URL names a user.
    authorization: Option<String>,
}

impl fmt::Debug for AbsoluteForm {
    // The credentials stay out of every log line.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AbsoluteForm").finish_non_exhaustive()
    }
}

impl<In: Transport> Connector<In> for AbsoluteForm {
    type Out = Rewriting<In>;

    fn connect(
        &self,
        details: &ConnectionDetails,
        chained: Option<In>,
    ) -> Result<Option<Self::Out>, ureq::Error> {
        let Some(inner) = chained else {
            return Ok(None);
        };
        let authority = details
            .uri
            .authority()
            .map(|a| a.as_str().to_string())
            .ok_or(ureq::Error::HostNotFound)?;
        Ok(Some(Rewriting {
            inner,
            target: format!("http://{authority}"),
            authorization: self.authorization.clone(),
            sent_head: false,
        }))
    }
}

/// The connection to the proxy: its first output is the request's head,
/// sent with the target in absolute form.
pub(super) struct Rewriting<T> {
    inner: T,
    /// `http://host[:port]` of the request's URL.
    target: String,
    authorization: Option<String>,
    sent_head: bool,
}

impl<T> fmt::Debug for Rewriting<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Rewriting")
            .field("target", &self.target)
            .finish_non_exhaustive()
    }
}

impl<T: Transport> Transport for Rewriting<T> {
    fn buffers(&mut self) -> &mut dyn Buffers {
        self.inner.buffers()
    }

    fn transmit_output(&mut self, amount: usize, timeout: NextTimeout) -> Result<(), ureq::Error> {
        if self.sent_head {
            return self.inner.transmit_output(amount, timeout);
        }
        self.sent_head = true;
        let head = self.inner.buffers().output()[..amount].to_vec();
        let rewritten = absolute_head(&head, &self.target, self.authorization.as_deref())
            .ok_or_else(|| {
                ureq::Error::Io(std::io::Error::new(
                    std::io::ErrorKind::InvalidData,
                    "the request's first line is not an origin-form request line",
                ))
            })?;
        // The rewritten head is longer than what ureq wrote: it goes out
        // through the same buffer, as many times as it takes.
        for chunk in rewritten.chunks(self.inner.buffers().output().len().max(1)) {
            self.inner.buffers().output()[..chunk.len()].copy_from_slice(chunk);
            self.inner.transmit_output(chunk.len(), timeout)?;
        }
        Ok(())
    }

    fn await_input(&mut self, timeout: NextTimeout) -> Result<bool, ureq::Error> {
        self.inner.await_input(timeout)
    }

    fn is_open(&mut self) -> bool {
        self.inner.is_open()
    }
}

/// `bytes` (a request's head and perhaps the start of its body) with the
/// request line's origin-form target made absolute under `target` and a
/// `Proxy-Authorization` line added; `None` when the first line is not
/// `METHOD /path HTTP/1.x`.
fn absolute_head(bytes: &[u8], target: &str, authorization: Option<&str>) -> Option<Vec<u8>> {
    let end = bytes.windows(2).position(|w| w == b"\r\n")?;
    let line = std::str::from_utf8(&bytes[..end]).ok()?;
    let mut parts = line.splitn(3, ' ');
    let (method, path, version) = (parts.next()?, parts.next()?, parts.next()?);
    if method.is_empty() || !path.starts_with('/') || !version.starts_with("HTTP/1.") {
        return None;
    }
    let mut out = format!("{method} {target}{path} {version}\r\n").into_bytes();
    if let Some(value) = authorization {
        out.extend_from_slice(format!("Proxy-Authorization: {value}\r\n").as_bytes());
    }
    out.extend_from_slice(&bytes[end + 2..]);
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::absolute_head;

    #[test]
    fn the_request_line_gets_its_absolute_target_and_the_rest_stays() {
        let head = b"POST /v1/chat?x=1 HTTP/1.1\r\nHost: gw:8080\r\n\r\n{\"a\":1}";
        let out = absolute_head(head, "http://gw:8080", Some("Basic dTpw")).unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "POST http://gw:8080/v1/chat?x=1 HTTP/1.1\r\nProxy-Authorization: Basic dTpw\r\nHost: gw:8080\r\n\r\n{\"a\":1}"
        );
        let out = absolute_head(b"GET / HTTP/1.1\r\n\r\n", "http://h", None).unwrap();
        assert_eq!(out, b"GET http://h/ HTTP/1.1\r\n\r\n");
    }

    #[test]
    fn anything_else_is_refused() {
        for head in [
            &b"GET http://other/ HTTP/1.1\r\n\r\n"[..],
            b"GET /",
            b"CONNECT h:80 HTTP/1.1\r\n\r\n",
            b" /x HTTP/1.1\r\n",
            b"GET /x SPDY\r\n",
            b"\xff /x HTTP/1.1\r\n",
        ] {
            assert!(absolute_head(head, "http://h", None).is_none(), "{head:?}");
        }
    }
}

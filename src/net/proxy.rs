//! Which proxy a request goes through, read from the environment the way
//! curl and most tools read it, for every `ureq` agent Spindle makes.
//!
//! An `https` URL takes `HTTPS_PROXY`, an `http` URL `HTTP_PROXY` (each
//! also in lower case), either falling back to `ALL_PROXY`. `NO_PROXY`
//! (or `no_proxy`) lists what goes direct: comma-separated entries with
//! spaces around them allowed; `*` for everything; a domain, which also
//! covers its subdomains (a leading `.` or `*.` changes nothing); an IP
//! address; either with `:port` to bypass only that port; and IPv4 or
//! IPv6 ranges (`10.0.0.0/8`, `fd00::/8`). The decision is Spindle's: the
//! proxy handed to ureq carries no `NO_PROXY` list of its own.
//!
//! An `https` URL is tunnelled with `CONNECT`. A plain `http` URL through
//! an `http://` proxy is sent to the proxy as an absolute-form request
//! (`POST http://host/path`), as proxies expect (`absolute.rs`; ureq
//! alone would tunnel it too, and many proxies refuse `CONNECT` to port
//! 80); through an `https://` or SOCKS proxy it is tunnelled.

use std::net::IpAddr;

/// The proxy chosen for one URL.
pub(crate) struct Route {
    pub proxy: ureq::Proxy,
    /// The proxy's address for messages: scheme, host and port, never
    /// its credentials.
    pub shown: String,
    /// The variable it came from.
    pub variable: &'static str,
    /// A plain `http` URL through an `http://` proxy: sent to the proxy
    /// as an absolute-form request, not tunnelled.
    pub absolute_form: bool,
}

/// The proxy for `url`, or `None` to go direct (no proxy set, a
/// `NO_PROXY` match, or a URL that does not parse).
pub(crate) fn for_url(url: &str) -> Option<Route> {
    let uri: ureq::http::Uri = url.trim().parse().ok()?;
    let https = uri.scheme_str()?.eq_ignore_ascii_case("https");
    let host = uri.host()?;
    let port = uri.port_u16().unwrap_or(if https { 443 } else { 80 });
    let no_proxy = ["NO_PROXY", "no_proxy"]
        .iter()
        .find_map(|name| std::env::var(name).ok());
    if let Some(list) = no_proxy {
        if bypasses(&list, host, port) {
            return None;
        }
    }
    let variables: [&'static str; 4] = if https {
        ["HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy"]
    } else {
        ["HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy"]
    };
    variables.into_iter().find_map(|variable| {
        let value = std::env::var(variable).ok()?;
        let value = value.trim();
        if value.is_empty() {
            return None;
        }
        match ureq::Proxy::new(value) {
            Ok(proxy) => {
                let scheme = value
                    .split_once("://")
                    .map_or("http", |(scheme, _)| scheme)
                    .to_ascii_lowercase();
                let shown = format!("{scheme}://{}:{}", proxy.host(), proxy.port());
                let absolute_form = !https && proxy.protocol() == ureq::ProxyProtocol::Http;
                Some(Route {
                    proxy,
                    shown,
                    variable,
                    absolute_form,
                })
            }
            Err(err) => {
                log::warn!("{variable} is not a proxy URL ({err}); it is not used");
                None
            }
        }
    })
}

/// The message for a request to `url` that failed because its proxy could
/// not be reached (or would not open the tunnel); `None` when no proxy
/// was used or the failure is another one.
pub(crate) fn failure(url: &str, err: &ureq::Error) -> Option<String> {
    use std::io::ErrorKind;
    use ureq::Error;
    let at_proxy = match err {
        Error::Io(io) => matches!(
            io.kind(),
            ErrorKind::ConnectionRefused
                | ErrorKind::ConnectionReset
                | ErrorKind::ConnectionAborted
                | ErrorKind::TimedOut
                | ErrorKind::HostUnreachable
                | ErrorKind::NetworkUnreachable
                | ErrorKind::AddrNotAvailable
                | ErrorKind::UnexpectedEof
        ),
        Error::HostNotFound | Error::ConnectionFailed | Error::ConnectProxyFailed(_) => true,
        Error::Timeout(ureq::Timeout::Connect | ureq::Timeout::Resolve) => true,
        _ => false,
    };
    if !at_proxy {
        return None;
    }
    let route = for_url(url)?;
    let (shown, variable) = (&route.shown, route.variable);
    Some(match err {
        Error::ConnectProxyFailed(_) => {
            format!("the proxy {shown} (from {variable}) would not connect to {url}: {err}")
        }
        Error::Timeout(_) => {
            format!("cannot connect to {url} through the proxy {shown} (from {variable}): {err}")
        }
        _ => format!("cannot connect to the proxy {shown} (from {variable}): {err}"),
    })
}

/// Whether the `NO_PROXY` list `list` sends `host` (as a URL gives it:
/// IPv6 in brackets) on `port` direct.
pub(crate) fn bypasses(list: &str, host: &str, port: u16) -> bool {
    let host = host
        .trim_start_matches('[')
        .trim_end_matches(']')
        .trim_end_matches('.')
        .to_ascii_lowercase();
    let address: Option<IpAddr> = host.parse().ok();
    list.split(',')
        .map(str::trim)
        .filter(|entry| !entry.is_empty())
        .any(|entry| matches(entry, &host, address, port))
}

/// One `NO_PROXY` entry against a host (lower case, without brackets).
fn matches(entry: &str, host: &str, address: Option<IpAddr>, port: u16) -> bool {
    if entry == "*" {
        return true;
    }
    let entry = entry.to_ascii_lowercase();
    // A range: address/prefix length.
    if let Some((network, bits)) = entry.split_once('/') {
        let network = network.trim_start_matches('[').trim_end_matches(']');
        let (Ok(network), Ok(bits), Some(address)) =
            (network.parse::<IpAddr>(), bits.parse::<u32>(), address)
        else {
            return false;
        };
        return in_range(address, network, bits);
    }
    // The entry's host and port: `[v6]:port`, `[v6]`, a bare IPv6
    // address, or `name:port`.
    let (name, wanted_port) = if let Some(rest) = entry.strip_prefix('[') {
        match rest.split_once(']') {
            Some((name, tail)) => (name, tail.strip_prefix(':').map(str::parse::<u16>)),
            None => return false,
        }
    } else if entry.parse::<IpAddr>().is_ok() {
        (entry.as_str(), None)
    } else {
        match entry.rsplit_once(':') {
            Some((name, port)) => (name, Some(port.parse::<u16>())),
            None => (entry.as_str(), None),
        }
    };
    match wanted_port {
        Some(Ok(wanted)) if wanted != port => return false,
        Some(Err(_)) => return false,
        _ => {}
    }
    if let Ok(ip) = name.parse::<IpAddr>() {
        return address == Some(ip);
    }
    let domain = name
        .trim_start_matches('*')
        .trim_start_matches('.')
        .trim_end_matches('.');
    !domain.is_empty()
        && (host == domain
            || (host.ends_with(domain) && host[..host.len() - domain.len()].ends_with('.')))
}

/// Whether `address` lies in `network`/`bits` (families must agree).
fn in_range(address: IpAddr, network: IpAddr, bits: u32) -> bool {
    match (address, network) {
        (IpAddr::V4(a), IpAddr::V4(n)) if bits <= 32 => {
            let mask = u32::MAX.checked_shl(32 - bits).unwrap_or(0);
            u32::from(a) & mask == u32::from(n) & mask
        }
        (IpAddr::V6(a), IpAddr::V6(n)) if bits <= 128 => {
            let mask = u128::MAX.checked_shl(128 - bits).unwrap_or(0);
            u128::from(a) & mask == u128::from(n) & mask
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::bypasses;

    #[test]
    fn entries_may_have_spaces_around_them() {
        let list = " localhost , 127.0.0.1,\t.internal.example ,";
        assert!(bypasses(list, "localhost", 80));
        assert!(bypasses(list, "127.0.0.1", 8080));
        assert!(bypasses(list, "api.internal.example", 443));
        assert!(!bypasses(list, "example.com", 443));
        assert!(!bypasses("", "localhost", 80));
    }

    #[test]
    fn a_star_bypasses_everything() {
        assert!(bypasses("*", "api.openai.com", 443));
        assert!(bypasses("example.com, *", "[::1]", 443));
    }

    #[test]
    fn domains_cover_their_subdomains_only() {
        for entry in [
            "example.com",
            ".example.com",
            "*.example.com",
            "EXAMPLE.com.",
        ] {
            assert!(bypasses(entry, "example.com", 443), "{entry}");
            assert!(bypasses(entry, "api.Example.com", 443), "{entry}");
            assert!(!bypasses(entry, "badexample.com", 443), "{entry}");
            assert!(!bypasses(entry, "example.com.evil.net", 443), "{entry}");
        }
    }

    #[test]
    fn ports_narrow_an_entry() {
        let list = "localhost:8080, 10.1.2.3:443, [::1]:9000";
        assert!(bypasses(list, "localhost", 8080));
        assert!(!bypasses(list, "localhost", 80));
        assert!(bypasses(list, "10.1.2.3", 443));
        assert!(!bypasses(list, "10.1.2.3", 80));
        assert!(bypasses(list, "[::1]", 9000));
        assert!(!bypasses(list, "[::1]", 9001));
        assert!(!bypasses("localhost:notaport", "localhost", 80));
    }

    #[test]
    fn ip_ranges_match_addresses_of_their_family() {
        let list = "10.0.0.0/8, 192.168.1.0/24, fd00::/8, 0.0.0.0/0x";
        assert!(bypasses(list, "10.200.3.4", 443));
        assert!(bypasses(list, "192.168.1.77", 443));
        assert!(!bypasses(list, "192.168.2.1", 443));
        assert!(!bypasses(list, "11.0.0.1", 443));
        assert!(bypasses(list, "[fd12:3456::1]", 443));
        assert!(!bypasses(list, "[fe80::1]", 443));
        // A name is never in a range; a range never matches the other family.
        assert!(!bypasses(list, "ten.example", 443));
        assert!(!bypasses("::/0", "10.0.0.1", 443));
        assert!(bypasses("0.0.0.0/0", "8.8.8.8", 443));
        assert!(bypasses("127.0.0.1/32", "127.0.0.1", 443));
        assert!(!bypasses("127.0.0.1/33", "127.0.0.1", 443));
    }

    #[test]
    fn addresses_match_exactly_and_bare_ipv6_works() {
        assert!(bypasses("::1", "[::1]", 443));
        assert!(bypasses("[::1]", "[::1]", 443));
        assert!(bypasses("0:0::1", "[::1]", 443));
        assert!(!bypasses("127.0.0.1", "127.0.0.2", 443));
        assert!(!bypasses("127.0.0.1", "localhost", 443));
    }
}

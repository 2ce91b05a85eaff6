//! `fetch_url`: one GET of a web page, within caps (time, bytes), turned
//! into text the model can read (HTML without its tags, scripts and
//! styles; links kept as `text <url>`). Only http and https; the answer's
//! body must be text. Bodies sent with `Content-Encoding` gzip or deflate
//! are decoded (`inflate.rs`) within the same cap as a plain page; any
//! other encoding is refused, since its bytes would mean nothing to the
//! model.

use super::inflate::Stop;
use std::io::Read;
use std::time::Duration;

/// The most bytes downloaded, and the most characters given back.
pub const DOWNLOAD_CAP: u64 = 5 * 1024 * 1024;
pub const TEXT_CAP: usize = 100_000;
/// The longest a fetch may take.
pub const TIMEOUT: Duration = Duration::from_secs(20);

/// The site of a URL, which "always allow" covers: its scheme and the host
/// contacted (with its port), in lower case; `user:pass@` in front of the
/// host is not part of it.
pub fn site_of(url: &str) -> String {
    let after = url.find("://").map_or(0, |i| i + 3);
    let end = url[after..]
        .find(['/', '?', '#', '\\'])
        .map_or(url.len(), |i| after + i);
    let authority = &url[after..end];
    let host = authority.rsplit('@').next().unwrap_or(authority);
    format!("{}{host}", &url[..after]).to_ascii_lowercase()
}

/// Where a redirect's `Location` points, from the URL that answered it.
fn resolve(base: &str, location: &str) -> String {
    let location = location.trim();
    if location.starts_with("http://") || location.starts_with("https://") {
        return location.to_string();
    }
    let scheme_end = base.find("://").map_or(0, |i| i + 3);
    if let Some(rest) = location.strip_prefix("//") {
        return format!("{}{rest}", &base[..scheme_end]);
    }
    let authority_end = base[scheme_end..]
        .find(['/', '?', '#'])
        .map_or(base.len(), |i| scheme_end + i);
    if location.starts_with('/') {
        return format!("{}{location}", &base[..authority_end]);
    }
    // Relative to the folder of the base's path.
    let path_end = base[authority_end..]
        .find(['?', '#'])
        .map_or(base.len(), |i| authority_end + i);
    let path = &base[authority_end..path_end];
    let folder = path.rfind('/').map_or("/", |at| &path[..=at]);
    format!("{}{folder}{location}", &base[..authority_end])
}

/// The most redirects followed within one site.
const REDIRECTS: usize = 5;

/// Fetches `url`; the text, or why not (for the model). Redirects are
/// followed within the site that was approved; one to another site is
/// not followed but told, so that fetching it is asked (or judged) anew.
/// HTTPS trusts what `trust` (the session's config) adds.
pub fn fetch(url: &str, max_chars: usize, trust: &crate::net::Trust) -> Result<String, String> {
    let parsed = url.trim();
    if !(parsed.starts_with("http://") || parsed.starts_with("https://")) {
        return Err(format!("{url:?} is not an http or https URL"));
    }
    if parsed.len() > 4096 {
        return Err("the URL is over 4,096 characters".into());
    }
    // Redirects stay within the site (scheme and host): one proxy choice.
    let agent = crate::net::agent(
        parsed,
        crate::net::agent_config(parsed, trust)
            .timeout_global(Some(TIMEOUT))
            .http_status_as_error(false)
            .max_redirects(0)
            .build(),
    );
    let deadline = std::time::Instant::now() + TIMEOUT;
    let site = site_of(parsed);
    let mut current = parsed.to_string();
    let mut hops = 0;
    let response = loop {
        if std::time::Instant::now() > deadline {
            return Err(format!("{parsed} took longer than {} s", TIMEOUT.as_secs()));
        }
        let response = agent
            .get(&current)
            .header(
                "Accept",
                "text/html, text/plain, application/json, */*;q=0.5",
            )
            // The HTTP client is built without decoders and sends no
            // Accept-Encoding of its own; these two are decoded below.
            .header("Accept-Encoding", "gzip, deflate")
            .call()
            .map_err(|error| {
                crate::net::proxy::failure(&current, &error)
                    .unwrap_or_else(|| format!("cannot fetch {current}: {error}"))
            })?;
        if !response.status().is_redirection() {
            break response;
        }
        let Some(location) = response
            .headers()
            .get("location")
            .and_then(|v| v.to_str().ok())
        else {
            break response;
        };
        let next = resolve(&current, location);
        if !(next.starts_with("http://") || next.starts_with("https://")) || next.len() > 4096 {
            return Err(format!(
                "{current} redirects to {next:?}, which is not fetched"
            ));
        }
        if site_of(&next) != site {
            return Err(format!(
                "{current} redirects to {next}, on another site; fetch that URL to follow it"
            ));
        }
        hops += 1;
        if hops > REDIRECTS {
            return Err(format!("{parsed} redirects more than {REDIRECTS} times"));
        }
        current = next;
    };
    let parsed = current.as_str();
    let status = response.status().as_u16();
    let kind = response
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_ascii_lowercase();
    let textual = kind.is_empty()
        || kind.starts_with("text/")
        || kind.contains("json")
        || kind.contains("xml")
        || kind.contains("javascript");
    if !textual {
        return Err(format!("{parsed} answered {kind}, which is not text"));
    }
    let codings = content_codings(&response).map_err(|why| format!("{parsed} answered {why}"))?;
    let mut bytes = Vec::new();
    response
        .into_body()
        .into_reader()
        .take(DOWNLOAD_CAP + 1)
        .read_to_end(&mut bytes)
        .map_err(|error| format!("cannot read {parsed}: {error}"))?;
    let mut cut_download = bytes.len() as u64 > DOWNLOAD_CAP;
    bytes.truncate(DOWNLOAD_CAP as usize);
    let mut cut_decoding = None;
    // Decoded in the reverse of the order they were applied.
    for coding in codings.iter().rev() {
        if bytes.is_empty() {
            break;
        }
        let decoded = match coding {
            Coding::Gzip => super::inflate::gunzip(&bytes, DOWNLOAD_CAP as usize),
            Coding::Deflate => super::inflate::zlib_or_raw(&bytes, DOWNLOAD_CAP as usize),
        }
        .map_err(|error| format!("cannot decode the body of {parsed}: {error}"))?;
        match decoded.stop {
            Stop::End => {}
            Stop::Cap => {
                // The next coding down then sees a cut stream, as after a
                // cut download.
                cut_decoding = Some(coding.name());
                cut_download = true;
            }
            Stop::Truncated if cut_download => {}
            Stop::Truncated => {
                return Err(format!(
                    "cannot decode the body of {parsed}: its {} data ends early",
                    coding.name()
                ))
            }
        }
        bytes = decoded.bytes;
    }
    // Without a type, a body with NUL bytes is binary, whatever it claims.
    if kind.is_empty() && bytes.iter().take(8192).any(|b| *b == 0) {
        return Err(format!("{parsed} answered binary data, which is not text"));
    }
    let body = String::from_utf8_lossy(&bytes);
    let text = if kind.contains("html") || (kind.is_empty() && body.trim_start().starts_with('<')) {
        html_to_text(&body)
    } else {
        body.into_owned()
    };
    let mut out = format!("{parsed} (HTTP {status}, {kind}):\n\n");
    let total = text.chars().count();
    out.extend(text.chars().take(max_chars));
    if total > max_chars || cut_download {
        out.push_str(&format!(
            "\n\n[… cut: the page has more than {max_chars} characters shown here]"
        ));
    }
    if let Some(coding) = cut_decoding {
        out.push_str(&format!(
            "\n[its {coding} body decodes to more than {DOWNLOAD_CAP} bytes; the rest was not decoded]"
        ));
    }
    Ok(out)
}

/// A content coding that fetch decodes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Coding {
    Gzip,
    Deflate,
}

impl Coding {
    fn name(self) -> &'static str {
        match self {
            Coding::Gzip => "gzip",
            Coding::Deflate => "deflate",
        }
    }
}

/// The most codings one body may stack.
const CODINGS: usize = 4;

/// The codings of the answer's `Content-Encoding` headers, in the order
/// they were applied (`identity` is none); `Err` says why not (the first
/// coding not decoded here, or too many).
fn content_codings(response: &ureq::http::Response<ureq::Body>) -> Result<Vec<Coding>, String> {
    let mut codings = Vec::new();
    for value in response.headers().get_all("content-encoding") {
        let value = value
            .to_str()
            .map_err(|_| "a Content-Encoding that is not text".to_string())?;
        for coding in value.split(',') {
            let coding = coding.trim().to_ascii_lowercase();
            match coding.as_str() {
                "" | "identity" => continue,
                "gzip" | "x-gzip" => codings.push(Coding::Gzip),
                "deflate" => codings.push(Coding::Deflate),
                _ => {
                    let coding: String = coding.chars().take(40).collect();
                    return Err(format!(
                        "with Content-Encoding {coding:?}, which fetch_url cannot decode \
                         (it decodes gzip and deflate only)"
                    ));
                }
            }
            if codings.len() > CODINGS {
                return Err(format!("with more than {CODINGS} content codings"));
            }
        }
    }
    Ok(codings)
}

/// HTML as readable text: the tags go, `script`, `style` and comments with
/// their contents; block elements end lines; links read `text <url>`;
/// the common entities are decoded; runs of blank space shrink.
pub fn html_to_text(html: &str) -> String {
    let mut out = String::with_capacity(html.len() / 2);
    let lower = html.to_ascii_lowercase();
    let bytes = html.as_bytes();
    let mut i = 0;
    let mut link: Option<String> = None;
    while i < bytes.len() {
        if bytes[i] == b'<' {
            let rest = &lower[i..];
            // Skipped with everything inside.
            let skipped = [
                ("<!--", "-->"),
                ("<script", "</script"),
                ("<style", "</style"),
                ("<head", "</head"),
            ]
            .iter()
            .find(|(open, _)| {
                // `<head` is not `<header>`: the name ends where the tag
                // name does (a comment has no name).
                rest.starts_with(open)
                    && (open.starts_with("<!")
                        || rest[open.len()..]
                            .bytes()
                            .next()
                            .is_none_or(|b| !(b.is_ascii_alphanumeric() || b == b'-')))
            });
            if let Some((_, close)) = skipped {
                match rest.find(close) {
                    Some(at) => {
                        i += at + close.len();
                        // `</script` and the like end at their own `>`.
                        if !close.ends_with('>') {
                            if let Some(end) = lower[i..].find('>') {
                                i += end + 1;
                            }
                        }
                    }
                    None => break,
                }
                continue;
            }
            let end = match rest.find('>') {
                Some(end) => end,
                None => break,
            };
            let tag = &rest[1..end];
            let name: String = tag
                .trim_start_matches('/')
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric())
                .collect();
            let closing = tag.starts_with('/');
            if name == "a" && !closing {
                link = attribute(&html[i + 1..i + end], "href");
            } else if name == "a" && closing {
                if let Some(href) = link.take().filter(|h| h.starts_with("http")) {
                    out.push_str(&format!(" <{href}>"));
                }
            }
            let block = matches!(
                name.as_str(),
                "p" | "div"
                    | "br"
                    | "li"
                    | "tr"
                    | "h1"
                    | "h2"
                    | "h3"
                    | "h4"
                    | "h5"
                    | "h6"
                    | "pre"
                    | "section"
                    | "article"
                    | "header"
                    | "footer"
                    | "table"
                    | "ul"
                    | "ol"
                    | "blockquote"
                    | "hr"
            );
            if block && !(closing && matches!(name.as_str(), "li" | "tr" | "br" | "hr")) {
                out.push('\n');
                if name == "li" && !closing {
                    out.push_str("- ");
                }
            }
            i += end + 1;
            continue;
        }
        let next = html[i..].find('<').map_or(html.len(), |at| i + at);
        out.push_str(&decode_entities(&html[i..next]));
        i = next;
    }
    tidy(&out)
}

fn attribute(tag: &str, name: &str) -> Option<String> {
    let lower = tag.to_ascii_lowercase();
    let at = lower.find(&format!("{name}="))? + name.len() + 1;
    let rest = &tag[at..];
    let (quote, rest) = match rest.chars().next()? {
        q @ ('"' | '\'') => (q, &rest[1..]),
        _ => (' ', rest),
    };
    let end = rest.find(quote).unwrap_or(rest.len());
    Some(decode_entities(&rest[..end]))
}

fn decode_entities(text: &str) -> String {
    if !text.contains('&') {
        return text.to_string();
    }
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find('&') {
        out.push_str(&rest[..at]);
        rest = &rest[at..];
        // An entity is short: its `;` is looked for in the next bytes only
        // (a page of `&` stays linear).
        let near = &rest.as_bytes()[..rest.len().min(12)];
        let end = near.iter().position(|b| *b == b';');
        let decoded = end.and_then(|end| {
            let entity = &rest[1..end];
            let ch = match entity {
                "amp" => Some('&'),
                "lt" => Some('<'),
                "gt" => Some('>'),
                "quot" => Some('"'),
                "apos" | "#39" => Some('\''),
                "nbsp" => Some(' '),
                _ if entity.starts_with("#x") => u32::from_str_radix(&entity[2..], 16)
                    .ok()
                    .and_then(char::from_u32),
                _ if entity.starts_with('#') => entity[1..].parse().ok().and_then(char::from_u32),
                _ => None,
            };
            ch.map(|c| (c, end))
        });
        match decoded {
            Some((c, end)) => {
                out.push(c);
                rest = &rest[end + 1..];
            }
            None => {
                out.push('&');
                rest = &rest[1..];
            }
        }
    }
    out.push_str(rest);
    out
}

/// Spaces within a line collapse; more than one blank line becomes one.
fn tidy(text: &str) -> String {
    let mut out = String::new();
    let mut blank = 0;
    for line in text.lines() {
        let line = line.split_whitespace().collect::<Vec<_>>().join(" ");
        if line.is_empty() {
            blank += 1;
            if blank == 1 && !out.is_empty() {
                out.push('\n');
            }
            continue;
        }
        blank = 0;
        out.push_str(&line);
        out.push('\n');
    }
    out.trim_end().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sites_are_the_hosts_contacted() {
        assert_eq!(site_of("https://Example.com/a?b"), "https://example.com");
        assert_eq!(site_of("http://good.com@evil.com/x"), "http://evil.com");
        assert_eq!(site_of("http://a:b@host:8080#f"), "http://host:8080");
        assert_eq!(site_of("http://evil.com\\@good.com/"), "http://evil.com");
        assert_ne!(site_of("http://a.com"), site_of("https://a.com"));
    }

    #[test]
    fn redirect_targets_resolve_against_the_answering_url() {
        let base = "https://h.com/docs/page.html?x=1";
        assert_eq!(resolve(base, "https://o.com/"), "https://o.com/");
        assert_eq!(resolve(base, "//o.com/p"), "https://o.com/p");
        assert_eq!(resolve(base, "/top"), "https://h.com/top");
        assert_eq!(resolve(base, "next.html"), "https://h.com/docs/next.html");
        assert_eq!(resolve("https://h.com", "a"), "https://h.com/a");
        assert_eq!(
            resolve(base, "javascript:alert(1)"),
            "https://h.com/docs/javascript:alert(1)"
        );
    }

    #[test]
    fn html_reads_as_text() {
        let html = r#"<html><head><title>x</title><style>p{}</style></head><body>
            <h1>Title &amp; more</h1><script>alert(1)</script>
            <p>See <a href="https://example.com/a?b=1&amp;c=2">the docs</a>.</p>
            <ul><li>one</li><li>two</li></ul><!-- hidden --> &lt;tag&gt; &#65;&#x42;
            </body></html>"#;
        let text = html_to_text(html);
        assert!(text.contains("Title & more"), "{text}");
        assert!(
            text.contains("See the docs <https://example.com/a?b=1&c=2>."),
            "{text}"
        );
        assert!(text.contains("- one\n- two"), "{text}");
        assert!(text.contains("<tag> AB"), "{text}");
        assert!(
            !text.contains("alert") && !text.contains("hidden") && !text.contains("p{}"),
            "{text}"
        );
    }

    #[test]
    fn only_http_urls() {
        assert!(fetch("file:///etc/passwd", 100, &Default::default())
            .unwrap_err()
            .contains("not an http"));
        assert!(fetch("ftp://x", 100, &Default::default()).is_err());
    }
}

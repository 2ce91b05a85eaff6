//! Paths as editors and people write them on each system: `file:` URIs
//! (`file:///home/a/x.rs`, `file:///C:/a/x.rs`, `file://server/share/x`)
//! and real paths without Windows' `\\?\` prefix where the plain form
//! means the same file. The string work is pure and takes the system's
//! style as an argument, so both styles are tested everywhere.

use std::path::{Path, PathBuf};

/// Which system's path syntax a string is read in.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Style {
    Unix,
    Windows,
}

/// This system's style.
pub const NATIVE: Style = if cfg!(windows) {
    Style::Windows
} else {
    Style::Unix
};

/// The real path of `path` (links resolved), as `fs::canonicalize` gives
/// it, but on Windows without the `\\?\` prefix where the plain form is
/// the same file, so that it reads as the user wrote it and compares
/// with paths the editor sends.
pub fn canonical(path: impl AsRef<Path>) -> std::io::Result<PathBuf> {
    let real = std::fs::canonicalize(path)?;
    if NATIVE == Style::Windows {
        if let Some(text) = real.to_str() {
            return Ok(PathBuf::from(plain(text)));
        }
    }
    Ok(real)
}

/// `\\?\C:\a` as `C:\a` and `\\?\UNC\server\share\a` as
/// `\\server\share\a`; kept as it is when the plain form could mean
/// another file (a path longer than the old limit, or a component that
/// Windows would trim or read as a device).
pub fn plain(text: &str) -> String {
    let Some(rest) = text.strip_prefix(r"\\?\") else {
        return text.to_string();
    };
    let (plain, body) = if let Some(unc) = rest.strip_prefix(r"UNC\") {
        (format!(r"\\{unc}"), unc)
    } else {
        let bytes = rest.as_bytes();
        let drive = bytes.len() >= 3
            && bytes[0].is_ascii_alphabetic()
            && bytes[1] == b':'
            && bytes[2] == b'\\';
        if !drive {
            return text.to_string();
        }
        (rest.to_string(), &rest[3..])
    };
    let safe = plain.len() < 260
        && body.split('\\').all(|part| {
            let stem = part.split('.').next().unwrap_or("").to_ascii_uppercase();
            let device = matches!(stem.as_str(), "CON" | "PRN" | "AUX" | "NUL")
                || (stem.len() == 4
                    && (stem.starts_with("COM") || stem.starts_with("LPT"))
                    && stem.as_bytes()[3].is_ascii_digit());
            !device && !part.ends_with(['.', ' ']) && !part.contains('/')
        });
    if safe {
        plain
    } else {
        text.to_string()
    }
}

/// The absolute path a `file:` URI names (`file:///p`, `file://localhost/p`
/// or `file:/p`; on Windows also `file:///C:/p` and `file://server/share/p`
/// as a UNC path), without its `?query` or `#fragment` (such as an
/// editor's `#L10:20` selection), percent-decoded; `None` for any other
/// URI or a path that is not absolute.
pub fn from_file_uri(uri: &str, style: Style) -> Option<String> {
    let rest = strip_scheme(uri)?;
    let end = rest.find(['?', '#']).unwrap_or(rest.len());
    let (host, path) = match rest[..end].strip_prefix("//") {
        Some(after) => match after.find('/') {
            Some(slash) => (&after[..slash], &after[slash..]),
            None => return None,
        },
        None => ("", &rest[..end]),
    };
    let path = percent_decode(path)?;
    let host = percent_decode(host)?;
    let local = host.is_empty() || host.eq_ignore_ascii_case("localhost");
    match style {
        Style::Unix => (local && path.starts_with('/')).then_some(path),
        Style::Windows => {
            if !local {
                // file://server/share/x is the UNC path \\server\share\x.
                let unc = format!(r"\\{host}{}", path.replace('/', "\\"));
                return (unc.matches('\\').count() >= 4 && !host.contains('\\')).then_some(unc);
            }
            // file:///C:/x (or file:///C|/x, as old editors wrote it).
            let drive = path.strip_prefix('/')?;
            let bytes = drive.as_bytes();
            let is_drive = bytes.len() >= 3
                && bytes[0].is_ascii_alphabetic()
                && matches!(bytes[1], b':' | b'|')
                && bytes[2] == b'/';
            is_drive.then(|| format!("{}:{}", &drive[..1], drive[2..].replace('/', "\\")))
        }
    }
}

/// The `file:` URI of an absolute path, its bytes outside the unreserved
/// set and `/` percent-encoded (`file:///C:/a%20b.txt` on Windows).
pub fn to_file_uri(path: &str, style: Style) -> String {
    let (host, path) = match style {
        Style::Unix => (String::new(), path.to_string()),
        Style::Windows => {
            let path = plain(path);
            if let Some(unc) = path.strip_prefix(r"\\") {
                let (host, rest) = unc.split_once('\\').unwrap_or((unc, ""));
                (host.to_string(), format!("/{}", rest.replace('\\', "/")))
            } else {
                (String::new(), format!("/{}", path.replace('\\', "/")))
            }
        }
    };
    let mut out = format!("file://{host}");
    for byte in path.bytes() {
        let keep = byte.is_ascii_alphanumeric() || b"-._~/:".contains(&byte);
        if keep {
            out.push(byte as char);
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

fn strip_scheme(uri: &str) -> Option<&str> {
    let scheme = uri.get(..5)?;
    scheme.eq_ignore_ascii_case("file:").then(|| &uri[5..])
}

/// `%XX` escapes decoded; `None` when malformed, not UTF-8 or holding NUL.
fn percent_decode(text: &str) -> Option<String> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = std::str::from_utf8(bytes.get(i + 1..i + 3)?).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok().filter(|s| !s.contains('\0'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unix_uris_read_as_before() {
        let read = |uri| from_file_uri(uri, Style::Unix);
        assert_eq!(read("file:///w/a%20b.txt").as_deref(), Some("/w/a b.txt"));
        assert_eq!(read("file://localhost/w/a#L1:2").as_deref(), Some("/w/a"));
        assert_eq!(read("FILE:/w/a?symbol=x").as_deref(), Some("/w/a"));
        for refused in [
            "file://elsewhere/a",
            "file:a",
            "http:///w",
            "file:///w/%00",
            "file:///w/%zz",
            "file://",
        ] {
            assert_eq!(read(refused), None, "{refused}");
        }
        assert_eq!(
            to_file_uri("/w/a b#1.txt", Style::Unix),
            "file:///w/a%20b%231.txt"
        );
        let back = from_file_uri(&to_file_uri("/w/ü %.rs", Style::Unix), Style::Unix);
        assert_eq!(back.as_deref(), Some("/w/ü %.rs"));
    }

    #[test]
    fn windows_uris_name_drives_and_shares() {
        let read = |uri| from_file_uri(uri, Style::Windows);
        assert_eq!(
            read("file:///C:/Users/a/x%20y.rs").as_deref(),
            Some(r"C:\Users\a\x y.rs")
        );
        assert_eq!(read("file:///c%3A/w/a.rs").as_deref(), Some(r"c:\w\a.rs"));
        assert_eq!(read("file:///C|/w/a.rs#L3").as_deref(), Some(r"C:\w\a.rs"));
        assert_eq!(
            read("file://server/share/dir/a.rs").as_deref(),
            Some(r"\\server\share\dir\a.rs")
        );
        for refused in [
            "file:///w/a.rs",
            "file:///C:",
            "file://server/share",
            "file:///1:/a",
        ] {
            assert_eq!(read(refused), None, "{refused}");
        }
        assert_eq!(
            to_file_uri(r"C:\Users\a\x y.rs", Style::Windows),
            "file:///C:/Users/a/x%20y.rs"
        );
        assert_eq!(
            to_file_uri(r"\\?\C:\w\a.rs", Style::Windows),
            "file:///C:/w/a.rs"
        );
        assert_eq!(
            to_file_uri(r"\\server\share\a.rs", Style::Windows),
            "file://server/share/a.rs"
        );
        assert_eq!(
            to_file_uri(r"\\?\UNC\server\share\a.rs", Style::Windows),
            "file://server/share/a.rs"
        );
    }

    #[test]
    fn the_verbatim_prefix_goes_only_where_the_plain_path_is_the_same_file() {
        assert_eq!(plain(r"\\?\C:\w\a.rs"), r"C:\w\a.rs");
        assert_eq!(plain(r"\\?\UNC\srv\share\a"), r"\\srv\share\a");
        assert_eq!(plain(r"C:\w"), r"C:\w");
        for kept in [
            r"\\?\C:\w\nul.txt",
            r"\\?\C:\w\dots.",
            r"\\?\C:\w\COM1",
            r"\\?\Volume{1234}\w",
            r"\\?\GLOBALROOT\Device\x",
        ] {
            assert_eq!(plain(kept), kept);
        }
        let long = format!(r"\\?\C:\{}", "d\\".repeat(200));
        assert_eq!(plain(&long), long);
    }
}

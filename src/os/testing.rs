//! What the unit tests need of the file system in the same words on every
//! system: links, modes and names that are not Unicode. Where a system has
//! no such thing the helper says so, and a test whose promise needs it is
//! marked ignored there with the reason.

use std::ffi::OsString;
use std::io;
use std::path::Path;

/// A symbolic link at `link` to `target` (on Windows a directory link
/// when the target is a directory, which needs the right to make links).
pub fn symlink(target: impl AsRef<Path>, link: impl AsRef<Path>) -> io::Result<()> {
    #[cfg(unix)]
    return std::os::unix::fs::symlink(target, link);
    #[cfg(windows)]
    {
        let (target, link) = (target.as_ref(), link.as_ref());
        let base = link.parent().unwrap_or(Path::new("."));
        if base.join(target).is_dir() {
            std::os::windows::fs::symlink_dir(target, link)
        } else {
            std::os::windows::fs::symlink_file(target, link)
        }
    }
}

/// Sets a file's permission bits (Unix); Windows has none, so this only
/// clears or sets the read-only flag from the owner's write bit.
pub fn set_mode(path: impl AsRef<Path>, mode: u32) -> io::Result<()> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
    }
    #[cfg(windows)]
    {
        let mut permissions = std::fs::metadata(&path)?.permissions();
        #[allow(clippy::permissions_set_readonly_false)]
        permissions.set_readonly(mode & 0o200 == 0);
        std::fs::set_permissions(path, permissions)
    }
}

/// A file's permission bits (Unix); 0 on Windows, which has none.
pub fn mode(path: impl AsRef<Path>) -> u32 {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::metadata(path).map_or(0, |m| m.permissions().mode() & 0o7777)
    }
    #[cfg(windows)]
    {
        let _ = path;
        0
    }
}

/// A file name that is not valid Unicode: a stray byte on Unix, an
/// unpaired surrogate on Windows.
pub fn not_unicode(before: &str, after: &str) -> OsString {
    let mut name = OsString::from(before);
    #[cfg(unix)]
    {
        use std::os::unix::ffi::OsStrExt;
        name.push(std::ffi::OsStr::from_bytes(b"\xff"));
    }
    #[cfg(windows)]
    {
        use std::os::windows::ffi::OsStringExt;
        name.push(OsString::from_wide(&[0xD800]));
    }
    name.push(after);
    name
}

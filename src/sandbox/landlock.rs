//! Landlock, the kernel's unprivileged access control, through raw system
//! calls (no library wraps it for us).
//!
//! The ruleset handles only the write-type filesystem rights, so reading
//! and executing stay allowed everywhere and only writes are limited: all
//! of them beneath each writable directory, plain writes to a few harmless
//! devices (`/dev/null`, terminals), nothing elsewhere. When no mount makes
//! a read-only path (the workspace's `.git`) read-only, it is carved out
//! here instead: a Landlock grant on a directory covers everything beneath
//! it, so the grant moves down to the directory's entries, minus the
//! carve-out. It also turns TCP off (ABI 4) and scopes signals and
//! abstract Unix sockets to the sandbox (ABI 6).

use std::fs;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

// From the kernel's uapi `linux/landlock.h`.
const CREATE_RULESET_VERSION: u32 = 1 << 0;
const RULE_PATH_BENEATH: libc::c_int = 1;

const FS_WRITE_FILE: u64 = 1 << 1;
const FS_REMOVE_DIR: u64 = 1 << 4;
const FS_REMOVE_FILE: u64 = 1 << 5;
const FS_MAKE_CHAR: u64 = 1 << 6;
const FS_MAKE_DIR: u64 = 1 << 7;
const FS_MAKE_REG: u64 = 1 << 8;
const FS_MAKE_SOCK: u64 = 1 << 9;
const FS_MAKE_FIFO: u64 = 1 << 10;
const FS_MAKE_BLOCK: u64 = 1 << 11;
const FS_MAKE_SYM: u64 = 1 << 12;
/// ABI 2: linking or renaming a file into another directory.
const FS_REFER: u64 = 1 << 13;
/// ABI 3: truncating a file (`truncate`, `O_TRUNC`).
const FS_TRUNCATE: u64 = 1 << 14;
// LANDLOCK_ACCESS_FS_IOCTL_DEV (ABI 5) stays unhandled on purpose: handling
// it would refuse the terminal ioctls every interactive program makes.

const NET_BIND_TCP: u64 = 1 << 0;
const NET_CONNECT_TCP: u64 = 1 << 1;

const SCOPE_ABSTRACT_UNIX_SOCKET: u64 = 1 << 0;
const SCOPE_SIGNAL: u64 = 1 << 1;

/// The only rights a rule on a file (not a directory) may carry, of those
/// handled here.
const FILE_RIGHTS: u64 = FS_WRITE_FILE | FS_TRUNCATE;

/// Devices every program may write to (or truncate, for `2>/dev/null`);
/// `/dev/pts` is a directory, so it covers every pseudo-terminal.
const DEVICES: [&str; 6] = [
    "/dev/null",
    "/dev/zero",
    "/dev/full",
    "/dev/tty",
    "/dev/ptmx",
    "/dev/pts",
];

/// `struct landlock_ruleset_attr` as of ABI 6; older kernels get a prefix
/// of it (the size passed says how much).
#[repr(C)]
struct RulesetAttr {
    handled_access_fs: u64,
    handled_access_net: u64,
    scoped: u64,
}

/// `struct landlock_path_beneath_attr`, packed like the kernel's.
#[repr(C, packed)]
struct PathBeneathAttr {
    allowed_access: u64,
    parent_fd: i32,
}

/// The highest Landlock ABI version the kernel offers, or why there is
/// none.
pub(super) fn abi() -> Result<u32, String> {
    // SAFETY: with a null attribute, size 0 and the VERSION flag the call
    // reads no memory; it only returns a number (or -1 and errno).
    let version = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<RulesetAttr>(),
            0usize,
            CREATE_RULESET_VERSION,
        )
    };
    if version < 0 {
        let error = io::Error::last_os_error();
        return Err(match error.raw_os_error() {
            Some(libc::ENOSYS) => {
                "Landlock is not supported by this kernel (needs Linux 5.13+)".to_string()
            }
            Some(libc::EOPNOTSUPP) => {
                "Landlock is not enabled in this kernel (needs Linux 5.13+)".to_string()
            }
            _ => format!("Landlock cannot be used here: {error}"),
        });
    }
    u32::try_from(version).map_err(|_| format!("Landlock reported ABI {version}"))
}

/// The write-type filesystem rights `abi` knows: what the ruleset handles.
fn write_rights(abi: u32) -> u64 {
    let mut rights = FS_WRITE_FILE
        | FS_REMOVE_DIR
        | FS_REMOVE_FILE
        | FS_MAKE_CHAR
        | FS_MAKE_DIR
        | FS_MAKE_REG
        | FS_MAKE_SOCK
        | FS_MAKE_FIFO
        | FS_MAKE_BLOCK
        | FS_MAKE_SYM;
    if abi >= 2 {
        rights |= FS_REFER;
    }
    if abi >= 3 {
        rights |= FS_TRUNCATE;
    }
    rights
}

/// What the Landlock domain allows.
pub(super) struct Rules<'a> {
    /// Canonical directories where every write is allowed.
    pub writable: &'a [PathBuf],
    /// Canonical paths inside `writable` ones that must stay read-only and
    /// that no mount protects.
    pub carve_out: &'a [PathBuf],
    /// Whether TCP may be used.
    pub network: bool,
}

/// Restricts this thread (and everything it execs) to `rules`. An error
/// means nothing was restricted; the caller must not go on.
pub(super) fn restrict(abi: u32, rules: &Rules) -> Result<(), String> {
    let ruleset = Ruleset::new(abi, !rules.network)
        .map_err(|error| format!("cannot create a Landlock ruleset: {error}"))?;
    for dir in rules.writable {
        grant_except(&ruleset, dir, rules.carve_out)?;
    }
    for device in DEVICES {
        match ruleset.allow(Path::new(device), FILE_RIGHTS, true) {
            Ok(()) => {}
            Err(error) if error.kind() == io::ErrorKind::NotFound => {}
            Err(error) => return Err(format!("cannot allow writes to {device}: {error}")),
        }
    }
    ruleset
        .restrict_self()
        .map_err(|error| format!("cannot enforce the Landlock ruleset: {error}"))
}

/// Grants every handled right beneath `path`, except beneath the paths of
/// `carve_out`: a directory holding one of those gets no rule of its own
/// (so no new entries in it), and each of its entries is granted the same
/// way instead.
fn grant_except(ruleset: &Ruleset, path: &Path, carve_out: &[PathBuf]) -> Result<(), String> {
    if carve_out.iter().any(|kept| kept == path) {
        return Ok(());
    }
    if !carve_out.iter().any(|kept| kept.starts_with(path)) {
        return match ruleset.allow(path, ruleset.handled_fs, false) {
            Ok(()) => Ok(()),
            // Gone since it was listed: nothing to grant.
            Err(error) if error.kind() == io::ErrorKind::NotFound => Ok(()),
            Err(error) => Err(format!(
                "cannot allow writes to {}: {error}",
                path.display()
            )),
        };
    }
    // A directory that cannot be listed gets no grants at all: stricter
    // than asked, never looser. The carve-outs are canonical, so this never
    // descends through a symbolic link.
    let Ok(entries) = fs::read_dir(path) else {
        return Ok(());
    };
    for entry in entries.flatten() {
        grant_except(ruleset, &entry.path(), carve_out)?;
    }
    Ok(())
}

/// An open Landlock ruleset.
struct Ruleset {
    fd: OwnedFd,
    handled_fs: u64,
}

impl Ruleset {
    fn new(abi: u32, block_tcp: bool) -> io::Result<Ruleset> {
        let attr = RulesetAttr {
            handled_access_fs: write_rights(abi),
            handled_access_net: if block_tcp && abi >= 4 {
                NET_BIND_TCP | NET_CONNECT_TCP
            } else {
                0
            },
            scoped: if abi >= 6 {
                SCOPE_ABSTRACT_UNIX_SOCKET | SCOPE_SIGNAL
            } else {
                0
            },
        };
        // Each ABI knows a prefix of the structure: pass only that much.
        let fields: usize = match abi {
            1..=3 => 1,
            4 | 5 => 2,
            _ => 3,
        };
        let size = fields * std::mem::size_of::<u64>();
        // SAFETY: `attr` is a live, properly laid out landlock_ruleset_attr
        // of at least `size` bytes; the kernel only reads it.
        let fd = unsafe {
            libc::syscall(
                libc::SYS_landlock_create_ruleset,
                &attr as *const RulesetAttr,
                size,
                0u32,
            )
        };
        let fd = libc::c_int::try_from(fd).map_err(|_| io::Error::other("bad descriptor"))?;
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(Ruleset {
            // SAFETY: the kernel just returned this descriptor, owned by
            // nothing else.
            fd: unsafe { OwnedFd::from_raw_fd(fd) },
            handled_fs: attr.handled_access_fs,
        })
    }

    /// Allows `access` (limited to what is handled, and to the file rights
    /// when `path` is not a directory) beneath `path`. A symbolic link is
    /// skipped unless `follow` is set.
    fn allow(&self, path: &Path, access: u64, follow: bool) -> io::Result<()> {
        let nofollow = if follow { 0 } else { libc::O_NOFOLLOW };
        // Opened with the C library directly: std masks O_PATH out of its
        // custom flags where O_ACCMODE includes it (musl), and without
        // O_PATH opening a device such as /dev/tty fails (no controlling
        // terminal) or has effects.
        let c_path = std::ffi::CString::new(path.as_os_str().as_bytes())
            .map_err(|_| io::Error::other("a path with a NUL byte"))?;
        // SAFETY: `c_path` is NUL-terminated and outlives the call; open
        // touches no other memory of ours.
        let raw = unsafe { libc::open(c_path.as_ptr(), libc::O_PATH | libc::O_CLOEXEC | nofollow) };
        if raw < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: open just returned this descriptor, owned by nothing else.
        let file = fs::File::from(unsafe { OwnedFd::from_raw_fd(raw) });
        let kind = file.metadata()?.file_type();
        if kind.is_symlink() {
            return Ok(());
        }
        let access = access & self.handled_fs & if kind.is_dir() { u64::MAX } else { FILE_RIGHTS };
        if access == 0 {
            return Ok(());
        }
        let rule = PathBeneathAttr {
            allowed_access: access,
            parent_fd: file.as_raw_fd(),
        };
        // SAFETY: both descriptors are open for the whole call, and `rule`
        // is a live landlock_path_beneath_attr the kernel only reads.
        let result = unsafe {
            libc::syscall(
                libc::SYS_landlock_add_rule,
                self.fd.as_raw_fd(),
                RULE_PATH_BENEATH,
                &rule as *const PathBeneathAttr,
                0u32,
            )
        };
        if result != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    fn restrict_self(self) -> io::Result<()> {
        // SAFETY: the descriptor is an open ruleset; the call takes no
        // pointers.
        let result =
            unsafe { libc::syscall(libc::SYS_landlock_restrict_self, self.fd.as_raw_fd(), 0u32) };
        if result != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn newer_abis_handle_more_rights() {
        assert_eq!(write_rights(1) & (FS_REFER | FS_TRUNCATE), 0);
        assert_eq!(write_rights(2) & FS_REFER, FS_REFER);
        assert_eq!(write_rights(2) & FS_TRUNCATE, 0);
        assert_eq!(write_rights(7), write_rights(3));
        assert_eq!(std::mem::size_of::<PathBeneathAttr>(), 12);
    }
}

//! Namespaces: a network namespace of the command's own (no interface but
//! a loopback that is down, so nothing connects anywhere, 127.0.0.1
//! included) and a mount namespace where the read-only paths (the
//! workspace's `.git`) are bind-mounted read-only over themselves, which
//! Landlock cannot express inside a writable directory.
//!
//! A normal user needs a user namespace for both; its own uid and gid are
//! mapped to themselves, so files keep their owner. Root enters the two
//! namespaces directly (and falls back to a user namespace when it lacks
//! CAP_SYS_ADMIN, as in a container).

use std::ffi::CString;
use std::fs::OpenOptions;
use std::io::{self, Write};
use std::mem::MaybeUninit;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::ptr;

/// What entering the namespaces achieved.
#[derive(Debug, Default)]
pub struct Entered {
    /// Every read-only path is now a read-only mount.
    pub mounted_read_only: bool,
    /// Why the read-only mounts failed, when they did.
    pub mount_error: Option<String>,
}

/// Why no namespaces were entered.
#[derive(Debug)]
pub enum Failure {
    /// Nothing changed: the caller may go on without namespaces.
    Unusable(String),
    /// Half done (a user namespace without its id maps): the process is
    /// unfit to run anything.
    Broken(String),
}

/// Enters a network namespace when `isolate_network`, and a mount
/// namespace with `read_only` (canonical paths) mounted read-only and
/// `hidden` (canonical paths: Spindle's key files, database and logs)
/// covered by something empty, when either is not empty. Hiding is not
/// optional: a path that cannot be hidden makes the launch fail.
pub fn enter(
    isolate_network: bool,
    read_only: &[PathBuf],
    hidden: &[PathBuf],
) -> Result<Entered, Failure> {
    let mut flags = 0;
    if isolate_network {
        flags |= libc::CLONE_NEWNET;
    }
    if !read_only.is_empty() || !hidden.is_empty() {
        flags |= libc::CLONE_NEWNS;
    }
    if flags == 0 {
        return Ok(Entered::default());
    }
    unshare_as_self(flags)?;
    let mut entered = Entered::default();
    if flags & libc::CLONE_NEWNS != 0 {
        // Nothing done here may reach the parent namespace.
        mount(None, Path::new("/"), libc::MS_REC | libc::MS_PRIVATE)
            .map_err(|error| Failure::Broken(format!("cannot make the mounts private: {error}")))?;
    }
    if !read_only.is_empty() {
        match mount_read_only(read_only) {
            Ok(()) => entered.mounted_read_only = true,
            Err(error) => entered.mount_error = Some(error),
        }
    }
    for path in hidden {
        hide(path)
            .map_err(|error| Failure::Broken(format!("cannot hide {}: {error}", path.display())))?;
    }
    Ok(entered)
}

/// Covers `path`: a folder with an empty read-only tmpfs, a file with
/// `/dev/null`.
fn hide(path: &Path) -> io::Result<()> {
    let meta = std::fs::symlink_metadata(path)?;
    let target = c_path(path)?;
    if meta.is_dir() {
        let fstype = CString::new("tmpfs").map_err(io::Error::other)?;
        let data = CString::new("mode=0500,size=4k").map_err(io::Error::other)?;
        // SAFETY: every pointer is a NUL-terminated string alive for the
        // call; mount reads them only.
        let result = unsafe {
            libc::mount(
                fstype.as_ptr(),
                target.as_ptr(),
                fstype.as_ptr(),
                libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC | libc::MS_RDONLY,
                data.as_ptr().cast(),
            )
        };
        if result != 0 {
            return Err(io::Error::last_os_error());
        }
        return Ok(());
    }
    mount(Some(Path::new("/dev/null")), path, libc::MS_BIND)
}

/// What the probe checks, in a throwaway child: both namespaces can be
/// entered, and `dir` can be made read-only in the mount namespace.
pub fn probe(dir: &Path) -> Result<(), String> {
    let dir = dir.to_path_buf();
    let entered = match enter(true, std::slice::from_ref(&dir), &[]) {
        Ok(entered) => entered,
        Err(Failure::Unusable(reason) | Failure::Broken(reason)) => return Err(reason),
    };
    if let Some(error) = entered.mount_error {
        return Err(error);
    }
    // The mount must really refuse writes, root included.
    let marker = dir.join(format!(".spindle-sandbox-probe-{}", std::process::id()));
    match OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&marker)
    {
        Err(error) if error.raw_os_error() == Some(libc::EROFS) => Ok(()),
        Err(error) => Err(format!("the read-only mount failed with {error}")),
        Ok(_) => {
            let _ = std::fs::remove_file(&marker);
            Err("a read-only bind mount still takes writes".into())
        }
    }
}

/// `unshare(flags)`, adding a user namespace (with this uid and gid mapped
/// to themselves) when that is what it takes.
fn unshare_as_self(flags: libc::c_int) -> Result<(), Failure> {
    // SAFETY: geteuid and getegid cannot fail and touch no memory.
    let (uid, gid) = unsafe { (libc::geteuid(), libc::getegid()) };
    // SAFETY: unshare takes no pointers; the process is single-threaded,
    // which a user namespace requires.
    if uid == 0 && unsafe { libc::unshare(flags) } == 0 {
        return Ok(());
    }
    // SAFETY: as above.
    if unsafe { libc::unshare(flags | libc::CLONE_NEWUSER) } != 0 {
        return Err(Failure::Unusable(format!(
            "cannot enter namespaces: unshare: {}",
            io::Error::last_os_error()
        )));
    }
    let map = |path: &str, line: String| {
        write_proc(path, &line).map_err(|error| {
            Failure::Broken(format!("cannot set up the user namespace: {path}: {error}"))
        })
    };
    // Older kernels have no setgroups file, and then need no "deny".
    match write_proc("/proc/self/setgroups", "deny") {
        Err(error) if error.kind() != io::ErrorKind::NotFound => {
            return Err(Failure::Broken(format!(
                "cannot set up the user namespace: /proc/self/setgroups: {error}"
            )))
        }
        _ => {}
    }
    map("/proc/self/uid_map", format!("{uid} {uid} 1"))?;
    map("/proc/self/gid_map", format!("{gid} {gid} 1"))
}

/// One `write` of `text` to a /proc file (the id maps take one only).
fn write_proc(path: &str, text: &str) -> io::Result<()> {
    let mut file = OpenOptions::new().write(true).open(path)?;
    let written = file.write(text.as_bytes())?;
    if written != text.len() {
        return Err(io::Error::other("short write"));
    }
    Ok(())
}

/// Bind-mounts each path over itself and remounts it read-only (the mount
/// tree is private already).
fn mount_read_only(paths: &[PathBuf]) -> Result<(), String> {
    for path in paths {
        mount(Some(path), path, libc::MS_BIND | libc::MS_REC)
            .map_err(|error| format!("cannot bind-mount {}: {error}", path.display()))?;
        // In a user namespace the flags the mount already has are locked:
        // a remount that drops one fails with EPERM, so keep them all.
        let remounted = kept_flags(path)
            .and_then(|kept| {
                mount(
                    None,
                    path,
                    libc::MS_REMOUNT | libc::MS_BIND | libc::MS_RDONLY | kept,
                )
            })
            .map_err(|error| format!("cannot remount {} read-only: {error}", path.display()));
        if let Err(error) = remounted {
            // Leave no half-done mount behind; the caller carves the path
            // out with Landlock instead.
            if let Ok(target) = c_path(path) {
                // SAFETY: `target` is a NUL-terminated path alive for the
                // call.
                unsafe { libc::umount2(target.as_ptr(), libc::MNT_DETACH) };
            }
            return Err(error);
        }
    }
    Ok(())
}

/// The flags of the mount holding `path` that a read-only remount must
/// repeat, from statvfs.
fn kept_flags(path: &Path) -> io::Result<libc::c_ulong> {
    /// ST_RELATIME and ST_NOSYMFOLLOW, which the libc crate does not name
    /// for every C library.
    const ST_RELATIME: libc::c_ulong = 0x1000;
    const ST_NOSYMFOLLOW: libc::c_ulong = 0x2000;
    let target = c_path(path)?;
    let mut stats = MaybeUninit::<libc::statvfs>::uninit();
    // SAFETY: `target` is NUL-terminated and `stats` has room for the
    // structure statvfs fills.
    if unsafe { libc::statvfs(target.as_ptr(), stats.as_mut_ptr()) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: statvfs succeeded, so it initialised the structure.
    let have = unsafe { stats.assume_init() }.f_flag;
    let pairs = [
        (libc::ST_NOSUID, libc::MS_NOSUID),
        (libc::ST_NODEV, libc::MS_NODEV),
        (libc::ST_NOEXEC, libc::MS_NOEXEC),
        (libc::ST_SYNCHRONOUS, libc::MS_SYNCHRONOUS),
        (libc::ST_MANDLOCK, libc::MS_MANDLOCK),
        (libc::ST_NOATIME, libc::MS_NOATIME),
        (libc::ST_NODIRATIME, libc::MS_NODIRATIME),
        (ST_RELATIME, libc::MS_RELATIME),
        (ST_NOSYMFOLLOW, libc::MS_NOSYMFOLLOW),
    ];
    Ok(pairs
        .iter()
        .filter(|(st, _)| have & st != 0)
        .fold(0, |flags, (_, ms)| flags | ms))
}

fn mount(source: Option<&Path>, target: &Path, flags: libc::c_ulong) -> io::Result<()> {
    let source = source.map(c_path).transpose()?;
    let target = c_path(target)?;
    let source_ptr = source
        .as_ref()
        .map_or(ptr::null(), |source| source.as_ptr());
    // SAFETY: the paths are NUL-terminated and alive for the call; no
    // file system type or data is passed (bind mounts and remounts take
    // none).
    let result =
        unsafe { libc::mount(source_ptr, target.as_ptr(), ptr::null(), flags, ptr::null()) };
    if result != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

fn c_path(path: &Path) -> io::Result<CString> {
    CString::new(path.as_os_str().as_bytes())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "a path holds a NUL byte"))
}

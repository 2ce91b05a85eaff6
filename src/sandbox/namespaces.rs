//! Namespaces: a network namespace of the command's own (no interface but
//! a loopback that is down, so nothing connects anywhere, 127.0.0.1
//! included); a mount namespace where the read-only paths (the
//! workspace's `.git`) are bind-mounted read-only over themselves, which
//! Landlock cannot express inside a writable directory, Spindle's secrets
//! are covered by empty files, and `/dev` is a fresh folder holding only
//! the harmless devices; a PID namespace, whose first process mounts a
//! `/proc` of its own, so no process outside is even seen; and an IPC
//! namespace, so no System V or POSIX message queue, semaphore or shared
//! memory of the user's other programs is reached.
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
pub(super) struct Entered {
    /// Every read-only path is now a read-only mount.
    pub mounted_read_only: bool,
    /// Why the read-only mounts failed, when they did.
    pub mount_error: Option<String>,
    /// The process is in a PID namespace of its own (for its children:
    /// the next process it forks is that namespace's first).
    pub pid_namespace: bool,
}

/// Why no namespaces were entered.
#[derive(Debug)]
pub(super) enum Failure {
    /// Nothing changed: the caller may go on without namespaces.
    Unusable(String),
    /// Half done (a user namespace without its id maps): the process is
    /// unfit to run anything.
    Broken(String),
}

/// Enters a network namespace when `isolate_network`, and mount, PID and
/// IPC namespaces: in the mount namespace, `read_only` (canonical paths)
/// mounted read-only, `hidden` (canonical paths: Spindle's key files,
/// config, database and logs) covered by something empty, and a `/dev`
/// of the harmless devices only. Hiding is not optional: a path that
/// cannot be hidden, or a `/dev` that cannot be replaced, makes the launch
/// fail. Where a PID namespace cannot be had, the rest is entered
/// without it.
pub(super) fn enter(
    isolate_network: bool,
    read_only: &[PathBuf],
    hidden: &[PathBuf],
) -> Result<Entered, Failure> {
    let mut flags = libc::CLONE_NEWNS;
    if isolate_network {
        flags |= libc::CLONE_NEWNET;
    }
    let pid_namespace = match unshare_as_self(flags | libc::CLONE_NEWPID | libc::CLONE_NEWIPC) {
        Ok(()) => true,
        Err(Failure::Unusable(reason)) => {
            log::debug!("sandbox without a PID namespace: {reason}");
            unshare_as_self(flags)?;
            false
        }
        Err(broken) => return Err(broken),
    };
    let mut entered = Entered {
        pid_namespace,
        ..Entered::default()
    };
    // Nothing done here may reach the parent namespace.
    mount(None, Path::new("/"), libc::MS_REC | libc::MS_PRIVATE)
        .map_err(|error| Failure::Broken(format!("cannot make the mounts private: {error}")))?;
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
    replace_dev().map_err(|error| Failure::Broken(format!("cannot replace /dev: {error}")))?;
    Ok(entered)
}

/// The devices a command finds in its `/dev`: taken from the real one,
/// bind-mounted (files) or mounted whole (`pts`, the pseudo-terminals, so
/// the editor's terminal stays usable).
const KEPT_DEVICES: [&str; 8] = [
    "null", "zero", "full", "random", "urandom", "tty", "ptmx", "pts",
];

/// The links every `/dev` has.
const DEV_LINKS: [(&str, &str); 4] = [
    ("fd", "/proc/self/fd"),
    ("stdin", "/proc/self/fd/0"),
    ("stdout", "/proc/self/fd/1"),
    ("stderr", "/proc/self/fd/2"),
];

/// Mounts an empty tmpfs over `/dev` and brings back only
/// [`KEPT_DEVICES`], [`DEV_LINKS`] and an empty `shm`, then makes it
/// read-only. Disks, consoles, input devices, `kmsg`, `kvm`… are gone:
/// even root could read a disk it owns, capabilities or not.
fn replace_dev() -> io::Result<()> {
    use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
    let dev = Path::new("/dev");
    // Opened before the tmpfs covers them; bound from their descriptors.
    let mut kept = Vec::new();
    for name in KEPT_DEVICES {
        let path = c_path(&dev.join(name))?;
        // SAFETY: `path` is NUL-terminated and alive for the call.
        let raw = unsafe { libc::open(path.as_ptr(), libc::O_PATH | libc::O_CLOEXEC) };
        if raw < 0 {
            let error = io::Error::last_os_error();
            if error.kind() == io::ErrorKind::NotFound {
                continue;
            }
            return Err(io::Error::other(format!("/dev/{name}: {error}")));
        }
        // SAFETY: open just returned this descriptor, owned by nothing else.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        let is_dir = std::fs::File::from(fd.try_clone()?).metadata()?.is_dir();
        kept.push((name, fd, is_dir));
    }
    tmpfs(dev, 0, "mode=0755,size=64k")?;
    for (name, fd, is_dir) in &kept {
        let target = dev.join(name);
        if *is_dir {
            std::fs::create_dir(&target)?;
        } else {
            std::fs::File::create(&target)?;
        }
        let source = PathBuf::from(format!("/proc/self/fd/{}", fd.as_raw_fd()));
        mount(Some(&source), &target, libc::MS_BIND | libc::MS_REC)
            .map_err(|error| io::Error::other(format!("/dev/{name}: {error}")))?;
    }
    std::fs::create_dir(dev.join("shm"))?;
    for (name, target) in DEV_LINKS {
        std::os::unix::fs::symlink(target, dev.join(name))?;
    }
    mount(
        None,
        dev,
        libc::MS_REMOUNT | libc::MS_RDONLY | libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
    )
}

/// Mounts a fresh `/proc`, of the PID namespace this process is the
/// first of: only the sandbox's own processes are in it.
pub(super) fn mount_proc() -> io::Result<()> {
    let proc = c_path(Path::new("/proc"))?;
    let fstype = CString::new("proc").map_err(io::Error::other)?;
    // SAFETY: every pointer is a NUL-terminated string alive for the
    // call; no data is passed.
    let result = unsafe {
        libc::mount(
            fstype.as_ptr(),
            proc.as_ptr(),
            fstype.as_ptr(),
            libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
            ptr::null(),
        )
    };
    if result != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Mounts an empty tmpfs at `target` with `flags` and `data`.
fn tmpfs(target: &Path, flags: libc::c_ulong, data: &str) -> io::Result<()> {
    let target = c_path(target)?;
    let fstype = CString::new("tmpfs").map_err(io::Error::other)?;
    let data = CString::new(data).map_err(io::Error::other)?;
    // SAFETY: every pointer is a NUL-terminated string alive for the
    // call; mount reads them only.
    let result = unsafe {
        libc::mount(
            fstype.as_ptr(),
            target.as_ptr(),
            fstype.as_ptr(),
            libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC | flags,
            data.as_ptr().cast(),
        )
    };
    if result != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Covers `path`: a folder with an empty read-only tmpfs, a file with
/// `/dev/null`.
fn hide(path: &Path) -> io::Result<()> {
    let meta = std::fs::symlink_metadata(path)?;
    if meta.is_dir() {
        return tmpfs(path, libc::MS_RDONLY, "mode=0500,size=4k");
    }
    mount(Some(Path::new("/dev/null")), path, libc::MS_BIND)
}

/// What the probe checks, in a throwaway child: the namespaces can be
/// entered, `dir` can be made read-only in the mount namespace and `/dev`
/// replaced. Ok(true) when a PID namespace with a `/proc` of its own works
/// too.
pub(super) fn probe(dir: &Path) -> Result<bool, String> {
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
        Err(error) if error.raw_os_error() == Some(libc::EROFS) => {}
        Err(error) => return Err(format!("the read-only mount failed with {error}")),
        Ok(_) => {
            let _ = std::fs::remove_file(&marker);
            return Err("a read-only bind mount still takes writes".into());
        }
    }
    if std::fs::symlink_metadata("/dev/kmsg").is_ok() {
        return Err("/dev still holds more than the harmless devices".into());
    }
    Ok(entered.pid_namespace && own_proc_works())
}

/// Whether the first process of the new PID namespace can mount its own
/// `/proc` (and then finds itself as process 1 there).
fn own_proc_works() -> bool {
    // SAFETY: the probe's process is single-threaded (the launcher checks
    // it before probing), so the child may run ordinary code.
    let pid = unsafe { libc::fork() };
    if pid == 0 {
        let works = mount_proc().is_ok()
            && std::fs::read_link("/proc/self").is_ok_and(|link| link == Path::new("1"));
        // SAFETY: _exit ends the child at once, running no exit handlers.
        unsafe { libc::_exit(if works { 0 } else { 1 }) };
    }
    if pid < 0 {
        return false;
    }
    let mut status = 0;
    // SAFETY: waits for the child just forked, into a local.
    while unsafe { libc::waitpid(pid, &mut status, 0) } < 0 {
        if io::Error::last_os_error().kind() != io::ErrorKind::Interrupted {
            return false;
        }
    }
    libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0
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

//! Unix: modes, owners and `O_NOFOLLOW`/`O_NONBLOCK` opens (constants from
//! `libc`: their values differ between systems and architectures).

use super::shapes::{LocalTime, Private};
use std::fs::{self, File, Metadata, OpenOptions};
use std::io;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// Creates `dir` (mode 0700, whatever the umask allows more).
pub fn create_private_dir(dir: &Path) -> io::Result<()> {
    fs::DirBuilder::new().mode(0o700).create(dir)
}

/// Creates `dir` and any missing parents, each new one mode 0700.
pub fn create_private_dir_all(dir: &Path) -> io::Result<()> {
    fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
}

/// Opens a file of mode 0600 for writing, never through a symbolic link
/// at its name and without blocking on a FIFO planted there.
pub fn open_private(path: &Path, how: Private) -> io::Result<File> {
    let mut options = OpenOptions::new();
    match how {
        Private::Append => options.create(true).append(true),
        Private::Truncate => options.create(true).write(true).truncate(true),
        Private::CreateNew => options.create_new(true).write(true),
    };
    options
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)
}

/// Opens a file for reading without blocking on the open (a FIFO or a
/// device would), not taking a terminal as the controlling one, and,
/// unless `follow` is set, refusing a symbolic link at its name.
pub fn open_read(path: &Path, follow: bool) -> io::Result<File> {
    let mut flags = libc::O_NONBLOCK | libc::O_NOCTTY;
    if !follow {
        flags |= libc::O_NOFOLLOW;
    }
    OpenOptions::new().read(true).custom_flags(flags).open(path)
}

/// What a file that is not a regular file or a folder is, in words.
pub(super) fn special_kind(meta: &Metadata) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    let kind = meta.file_type();
    if kind.is_fifo() {
        "a FIFO"
    } else if kind.is_socket() {
        "a socket"
    } else if kind.is_char_device() {
        "a character device"
    } else if kind.is_block_device() {
        "a block device"
    } else {
        "a special file"
    }
}

pub(super) fn is_link_refused(error: &io::Error) -> bool {
    error.raw_os_error() == Some(libc::ELOOP)
}

/// Whether the file belongs to the user this process runs as.
pub fn owned_by_me(meta: &Metadata) -> bool {
    // SAFETY: geteuid(2) takes no arguments, cannot fail and touches no
    // memory.
    meta.uid() == unsafe { libc::geteuid() }
}

/// Takes group and other access away from the open file (0600) when it
/// has any.
pub fn make_private(file: &File) -> io::Result<()> {
    if file.metadata()?.mode() & 0o077 == 0 {
        return Ok(());
    }
    file.set_permissions(fs::Permissions::from_mode(0o600))
}

/// Takes group and other access away from the file at `path` (0600) when
/// `meta`, its metadata, shows any. By name: nothing is opened, since
/// closing a descriptor of a file drops every `fcntl` lock this process
/// holds on it (SQLite's among them).
pub fn make_private_at(path: &Path, meta: &Metadata) -> io::Result<()> {
    if meta.mode() & 0o077 == 0 {
        return Ok(());
    }
    fs::set_permissions(path, fs::Permissions::from_mode(0o600))
}

/// Takes group and other access away from the folder `dir` (0700) when
/// `meta`, its metadata, shows any.
pub fn make_private_dir(dir: &Path, meta: &Metadata) -> io::Result<()> {
    if meta.mode() & 0o077 == 0 {
        return Ok(());
    }
    fs::set_permissions(dir, fs::Permissions::from_mode(0o700))
}

/// How many names the open file has.
pub fn link_count(file: &File) -> io::Result<u64> {
    Ok(file.metadata()?.nlink())
}

/// How many names the file at `path` has (following links), without
/// opening it.
pub fn link_count_at(path: &Path) -> io::Result<u64> {
    Ok(fs::metadata(path)?.nlink())
}

/// What changes when a file is written or replaced: its modification time
/// in nanoseconds and its inode.
pub fn change_stamp(meta: &Metadata) -> (i64, u64) {
    (
        // Any time a file may carry (an archive's far future included).
        meta.mtime()
            .saturating_mul(1_000_000_000)
            .saturating_add(meta.mtime_nsec()),
        meta.ino(),
    )
}

/// The path an open file really has.
#[cfg(target_os = "linux")]
pub(super) fn real_path(file: &File) -> Option<PathBuf> {
    use std::os::fd::AsRawFd;
    fs::read_link(format!("/proc/self/fd/{}", file.as_raw_fd())).ok()
}

/// The path an open file really has.
#[cfg(target_os = "macos")]
pub fn real_path(file: &File) -> Option<PathBuf> {
    use std::os::fd::AsRawFd;
    use std::os::unix::ffi::OsStrExt;
    let mut buffer = vec![0u8; libc::PATH_MAX as usize];
    // SAFETY: F_GETPATH writes at most PATH_MAX bytes, a NUL-terminated
    // path, into the buffer it is given, which is that long.
    let done = unsafe { libc::fcntl(file.as_raw_fd(), libc::F_GETPATH, buffer.as_mut_ptr()) };
    if done == -1 {
        return None;
    }
    let end = buffer.iter().position(|&b| b == 0)?;
    Some(PathBuf::from(std::ffi::OsStr::from_bytes(&buffer[..end])))
}

/// The path an open file really has: not known on this system.
#[cfg(not(any(target_os = "linux", target_os = "macos")))]
pub fn real_path(_file: &File) -> Option<PathBuf> {
    None
}

/// `seconds` since 1970 as the local wall clock shows them.
pub fn local_time(seconds: i64) -> Option<LocalTime> {
    // libc marks musl's `time_t` deprecated (its width changed in musl
    // 1.2, to 64 bits, which the target's libc has); it is still the type
    // localtime_r takes.
    #[allow(deprecated)]
    let time = libc::time_t::try_from(seconds).ok()?;
    // SAFETY: localtime_r fills the tm we own and returns it or null;
    // tm_zone, when set, points at a NUL-terminated name the C library
    // keeps for the life of the process.
    unsafe {
        let mut tm: libc::tm = std::mem::zeroed();
        if libc::localtime_r(&time, &mut tm).is_null() {
            return None;
        }
        let zone = if tm.tm_zone.is_null() {
            String::new()
        } else {
            std::ffi::CStr::from_ptr(tm.tm_zone)
                .to_string_lossy()
                .into_owned()
        };
        Some(LocalTime {
            year: tm.tm_year + 1900,
            month: u32::try_from(tm.tm_mon + 1).ok()?,
            day: u32::try_from(tm.tm_mday).ok()?,
            hour: u32::try_from(tm.tm_hour).ok()?,
            minute: u32::try_from(tm.tm_min).ok()?,
            zone,
        })
    }
}

/// The terminal's echo off while it lives (a key being typed). An
/// interrupt meanwhile (Ctrl-C) puts the echo back before the process
/// ends, so the user's shell is not left typing blind.
pub struct EchoOff {
    saved: libc::termios,
    handlers: Vec<(libc::c_int, libc::sigaction)>,
}

/// The terminal's settings before the echo went off, for the handler.
// Global: the signal handler that restores the terminal sees only statics.
static SAVED_TERMINAL: std::sync::OnceLock<libc::termios> = std::sync::OnceLock::new();

extern "C" fn restore_and_die(signal: libc::c_int) {
    // SAFETY: tcsetattr(2), signal(2) and raise(2) are async-signal-safe;
    // the settings were stored before this handler was installed.
    unsafe {
        if let Some(saved) = SAVED_TERMINAL.get() {
            libc::tcsetattr(0, libc::TCSANOW, saved);
        }
        libc::signal(signal, libc::SIG_DFL);
        libc::raise(signal);
    }
}

impl EchoOff {
    /// Turns standard input's echo off; `None` when it is not a terminal.
    pub fn new() -> Option<EchoOff> {
        // SAFETY: tcgetattr/tcsetattr on standard input with a termios we
        // own, and sigaction(2) with structures built here; nothing
        // happens when stdin is not a terminal.
        unsafe {
            let mut saved = std::mem::zeroed::<libc::termios>();
            if libc::tcgetattr(0, &mut saved) != 0 {
                return None;
            }
            let _ = SAVED_TERMINAL.set(saved);
            let mut handlers = Vec::new();
            for signal in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP, libc::SIGQUIT] {
                let mut action: libc::sigaction = std::mem::zeroed();
                action.sa_sigaction =
                    restore_and_die as extern "C" fn(libc::c_int) as libc::sighandler_t;
                libc::sigemptyset(&mut action.sa_mask);
                let mut old: libc::sigaction = std::mem::zeroed();
                if libc::sigaction(signal, &action, &mut old) == 0 {
                    handlers.push((signal, old));
                }
            }
            let mut quiet = saved;
            quiet.c_lflag &= !libc::ECHO;
            let echo = EchoOff { saved, handlers };
            if libc::tcsetattr(0, libc::TCSANOW, &quiet) != 0 {
                return None;
            }
            Some(echo)
        }
    }
}

impl Drop for EchoOff {
    fn drop(&mut self) {
        // SAFETY: restores what `new` read and the handlers it replaced.
        unsafe {
            libc::tcsetattr(0, libc::TCSANOW, &self.saved);
            for (signal, old) in &self.handlers {
                libc::sigaction(*signal, old, std::ptr::null_mut());
            }
        }
    }
}

/// The terminal's settings before raw mode, for [`restore_terminal`].
static RAW_SAVED: std::sync::Mutex<Option<libc::termios>> = std::sync::Mutex::new(None);

/// Standard input in raw mode while it lives (the chat's line editor):
/// each key as it is typed, no echo, Ctrl-C and Ctrl-Z as bytes; output
/// processing stays on, so `\n` still starts a line.
pub struct RawMode {
    saved: libc::termios,
}

impl RawMode {
    /// `None` when standard input is not a terminal.
    pub fn new() -> Option<RawMode> {
        // SAFETY: tcgetattr/tcsetattr on standard input with termios
        // structures owned here.
        unsafe {
            let mut saved = std::mem::zeroed::<libc::termios>();
            if libc::tcgetattr(0, &mut saved) != 0 {
                return None;
            }
            let mut raw = saved;
            raw.c_iflag &= !(libc::BRKINT | libc::ICRNL | libc::INPCK | libc::ISTRIP | libc::IXON);
            raw.c_cflag |= libc::CS8;
            raw.c_lflag &= !(libc::ECHO | libc::ICANON | libc::IEXTEN | libc::ISIG);
            raw.c_cc[libc::VMIN] = 1;
            raw.c_cc[libc::VTIME] = 0;
            if let Ok(mut slot) = RAW_SAVED.lock() {
                *slot = Some(saved);
            }
            if libc::tcsetattr(0, libc::TCSANOW, &raw) != 0 {
                return None;
            }
            Some(RawMode { saved })
        }
    }

    /// Ctrl-Z: the terminal as it was, the process stopped as the shell
    /// expects; raw again when it is continued.
    pub fn suspend(&self) {
        // SAFETY: the settings are ours; raise(2) stops this process
        // until SIGCONT, then returns.
        unsafe {
            let mut raw = std::mem::zeroed::<libc::termios>();
            libc::tcgetattr(0, &mut raw);
            libc::tcsetattr(0, libc::TCSANOW, &self.saved);
            libc::raise(libc::SIGTSTP);
            libc::tcsetattr(0, libc::TCSANOW, &raw);
        }
    }
}

impl Drop for RawMode {
    fn drop(&mut self) {
        // SAFETY: restores what `new` read.
        unsafe {
            libc::tcsetattr(0, libc::TCSANOW, &self.saved);
        }
        if let Ok(mut slot) = RAW_SAVED.lock() {
            *slot = None;
        }
    }
}

/// Puts back the terminal a [`RawMode`] changed, for a process about to
/// end without dropping it (a signal's handler).
pub fn restore_terminal() {
    if let Ok(slot) = RAW_SAVED.lock() {
        if let Some(saved) = slot.as_ref() {
            // SAFETY: settings read from this terminal earlier.
            unsafe {
                libc::tcsetattr(0, libc::TCSANOW, saved);
            }
        }
    }
}

/// The columns of the terminal on standard error, when it is one.
pub fn terminal_width() -> Option<usize> {
    // SAFETY: TIOCGWINSZ writes a winsize we own.
    unsafe {
        let mut size = std::mem::zeroed::<libc::winsize>();
        if libc::ioctl(2, libc::TIOCGWINSZ, &mut size) == 0 && size.ws_col > 0 {
            return Some(usize::from(size.ws_col));
        }
    }
    None
}

//! Windows: files opened on the link itself (`FILE_FLAG_OPEN_REPARSE_POINT`)
//! and refused when it is one; private files and folders as a protected
//! access list that admits the current user alone (`acl.rs`); the
//! console's echo.

mod acl;

use super::shapes::{LocalTime, Private};
use std::fs::{self, File, Metadata, OpenOptions};
use std::io;
use std::os::windows::fs::OpenOptionsExt;
use std::os::windows::io::AsRawHandle;
use std::path::{Path, PathBuf};
use windows_sys::Win32::Foundation::{ERROR_CANT_RESOLVE_FILENAME, FILETIME, SYSTEMTIME};
use windows_sys::Win32::Storage::FileSystem::{
    GetFileInformationByHandle, GetFinalPathNameByHandleW, BY_HANDLE_FILE_INFORMATION,
    FILE_FLAG_BACKUP_SEMANTICS, FILE_FLAG_OPEN_REPARSE_POINT, READ_CONTROL, WRITE_DAC,
};
use windows_sys::Win32::System::Console::{
    GetConsoleMode, GetConsoleScreenBufferInfo, GetStdHandle, SetConsoleCtrlHandler,
    SetConsoleMode, CONSOLE_SCREEN_BUFFER_INFO, ENABLE_ECHO_INPUT, ENABLE_LINE_INPUT,
    ENABLE_PROCESSED_INPUT, ENABLE_PROCESSED_OUTPUT, ENABLE_VIRTUAL_TERMINAL_INPUT,
    ENABLE_VIRTUAL_TERMINAL_PROCESSING, STD_ERROR_HANDLE, STD_INPUT_HANDLE,
};
use windows_sys::Win32::System::Time::{FileTimeToSystemTime, SystemTimeToTzSpecificLocalTime};

/// Creates `dir`; it takes the access list of the folder it is in.
pub fn create_private_dir(dir: &Path) -> io::Result<()> {
    fs::create_dir(dir)?;
    protect_dir(dir)
}

/// Creates `dir` and any missing parents, each one it creates private.
pub fn create_private_dir_all(dir: &Path) -> io::Result<()> {
    let missing: Vec<&Path> = dir.ancestors().take_while(|d| !d.exists()).collect();
    fs::create_dir_all(dir)?;
    missing.into_iter().rev().try_for_each(protect_dir)
}

/// Opens a folder itself (not a link's target) to change its access list.
fn protect_dir(dir: &Path) -> io::Result<()> {
    let folder = OpenOptions::new()
        .access_mode(WRITE_DAC | READ_CONTROL)
        .custom_flags(FILE_FLAG_BACKUP_SEMANTICS | FILE_FLAG_OPEN_REPARSE_POINT)
        .open(dir)?;
    let folder = not_a_link(folder)?;
    acl::protect(folder.as_raw_handle() as isize, true)
}

fn link_refused() -> io::Error {
    io::Error::from_raw_os_error(ERROR_CANT_RESOLVE_FILENAME as i32)
}

/// Refuses `file` when what was opened is a link (a reparse point).
fn not_a_link(file: File) -> io::Result<File> {
    if file.metadata()?.file_type().is_symlink() {
        return Err(link_refused());
    }
    Ok(file)
}

/// Opens a file for writing, never through a link at its name.
pub fn open_private(path: &Path, how: Private) -> io::Result<File> {
    let mut options = OpenOptions::new();
    match how {
        Private::Append => options.create(true).append(true),
        Private::Truncate => options.create(true).write(true).truncate(true),
        Private::CreateNew => options.create_new(true).write(true),
    };
    let file = options
        .custom_flags(FILE_FLAG_OPEN_REPARSE_POINT)
        .open(path)?;
    let file = not_a_link(file)?;
    // As mode 0600 on Unix, an existing file included. A file system with
    // no access lists (FAT, some shares) keeps what it has.
    if let Err(error) = make_private(&file) {
        log::debug!("cannot make {} private: {error}", path.display());
    }
    Ok(file)
}

/// Opens a file for reading (Windows has no FIFOs in the file system, so
/// the open cannot block); unless `follow` is set, refusing a link at its
/// name.
pub fn open_read(path: &Path, follow: bool) -> io::Result<File> {
    if follow {
        return OpenOptions::new().read(true).open(path);
    }
    let file = OpenOptions::new()
        .read(true)
        .custom_flags(FILE_FLAG_OPEN_REPARSE_POINT)
        .open(path)?;
    not_a_link(file)
}

/// What a file that is not a regular file or a folder is, in words.
pub(super) fn special_kind(_meta: &Metadata) -> &'static str {
    "a device or pipe"
}

pub(super) fn is_link_refused(error: &io::Error) -> bool {
    error.raw_os_error() == Some(ERROR_CANT_RESOLVE_FILENAME as i32)
}

/// Whether the file belongs to this user: the access list, not an owner
/// id, decides on Windows, and Spindle's folders inherit their owner's.
pub fn owned_by_me(_meta: &Metadata) -> bool {
    true
}

/// Gives an open file an access list that admits the current user alone
/// (through a second handle on the same file, opened to change it).
pub fn make_private(file: &File) -> io::Result<()> {
    acl::protect(with_access(file, WRITE_DAC | READ_CONTROL)?.0, false)
}

/// Gives the file at `path` an access list that admits the current user
/// alone. The handle opened for it disturbs no other: Windows locks
/// belong to the handle that took them.
pub fn make_private_at(path: &Path, _meta: &Metadata) -> io::Result<()> {
    make_private(&OpenOptions::new().read(true).open(path)?)
}

/// Gives a folder an access list that admits the current user alone,
/// inherited by what it holds.
pub fn make_private_dir(dir: &Path, _meta: &Metadata) -> io::Result<()> {
    protect_dir(dir)
}

#[cfg(test)]
/// Whether an open file's access list admits the current user alone.
pub(super) fn is_private(file: &File) -> io::Result<bool> {
    acl::is_private(with_access(file, READ_CONTROL)?.0)
}

/// A handle closed when dropped.
struct Reopened(isize);

impl Drop for Reopened {
    fn drop(&mut self) {
        // SAFETY: the handle is ours and closed once.
        unsafe { windows_sys::Win32::Foundation::CloseHandle(self.0) };
    }
}

/// A second handle on the file `file` is open on, with `access`.
fn with_access(file: &File, access: u32) -> io::Result<Reopened> {
    use windows_sys::Win32::Foundation::INVALID_HANDLE_VALUE;
    use windows_sys::Win32::Storage::FileSystem::{
        ReOpenFile, FILE_SHARE_DELETE, FILE_SHARE_READ, FILE_SHARE_WRITE,
    };
    // SAFETY: the original handle is the open file's for the call; the
    // new one is checked and owned.
    let handle = unsafe {
        ReOpenFile(
            file.as_raw_handle() as isize,
            access,
            FILE_SHARE_READ | FILE_SHARE_WRITE | FILE_SHARE_DELETE,
            FILE_FLAG_OPEN_REPARSE_POINT,
        )
    };
    if handle == INVALID_HANDLE_VALUE {
        return Err(io::Error::last_os_error());
    }
    Ok(Reopened(handle))
}

fn information(file: &File) -> io::Result<BY_HANDLE_FILE_INFORMATION> {
    // SAFETY: the handle is the open file's for the length of the call,
    // and the structure is ours to fill.
    unsafe {
        let mut info: BY_HANDLE_FILE_INFORMATION = std::mem::zeroed();
        if GetFileInformationByHandle(file.as_raw_handle() as isize, &mut info) == 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(info)
    }
}

/// How many names the open file has.
pub fn link_count(file: &File) -> io::Result<u64> {
    Ok(u64::from(information(file)?.nNumberOfLinks))
}

/// How many names the file at `path` has (following links). Opening asks
/// for no access, so nothing is read and nothing waits.
pub fn link_count_at(path: &Path) -> io::Result<u64> {
    let file = OpenOptions::new()
        .access_mode(0)
        .custom_flags(FILE_FLAG_BACKUP_SEMANTICS)
        .open(path)?;
    link_count(&file)
}

/// What changes when a file is written or replaced: its modification time
/// in nanoseconds (the file's index would need an open handle; the size
/// and the time tell a change here).
pub fn change_stamp(meta: &Metadata) -> (i64, u64) {
    let nanos = meta
        .modified()
        .ok()
        .and_then(|time| time.duration_since(std::time::UNIX_EPOCH).ok())
        .map_or(0, |since| {
            i64::try_from(since.as_nanos()).unwrap_or(i64::MAX)
        });
    (nanos, 0)
}

/// The path an open file really has (in the `\\?\` form that
/// `fs::canonicalize` gives too; `os::real_path` makes it plain).
pub(super) fn real_path(file: &File) -> Option<PathBuf> {
    use std::os::windows::ffi::OsStringExt;
    let mut buffer = vec![0u16; 1024];
    loop {
        let size = u32::try_from(buffer.len()).ok()?;
        // SAFETY: the handle is the open file's; the call writes at most
        // `size` UTF-16 units into the buffer, which is that long, and
        // returns the length it needs when it is too short.
        let written = unsafe {
            GetFinalPathNameByHandleW(file.as_raw_handle() as isize, buffer.as_mut_ptr(), size, 0)
        } as usize;
        match written {
            0 => return None,
            n if n < buffer.len() => {
                return Some(PathBuf::from(std::ffi::OsString::from_wide(&buffer[..n])))
            }
            // Longer than any path the system takes: refused.
            n if n > 32_768 => return None,
            n => buffer.resize(n + 1, 0),
        }
    }
}

/// Seconds between 1601-01-01 (Windows' epoch) and 1970-01-01.
const EPOCH_GAP: i64 = 11_644_473_600;

/// `seconds` since 1970 as the local wall clock shows them.
pub fn local_time(seconds: i64) -> Option<LocalTime> {
    let ticks = u64::try_from(seconds.checked_add(EPOCH_GAP)?.checked_mul(10_000_000)?).ok()?;
    let file_time = FILETIME {
        dwLowDateTime: ticks as u32,
        dwHighDateTime: (ticks >> 32) as u32,
    };
    // SAFETY: both calls read and fill structures we own; a null zone
    // means the system's current one.
    unsafe {
        let mut utc: SYSTEMTIME = std::mem::zeroed();
        let mut local: SYSTEMTIME = std::mem::zeroed();
        if FileTimeToSystemTime(&file_time, &mut utc) == 0
            || SystemTimeToTzSpecificLocalTime(std::ptr::null(), &utc, &mut local) == 0
        {
            return None;
        }
        Some(LocalTime {
            year: i32::from(local.wYear),
            month: u32::from(local.wMonth),
            day: u32::from(local.wDay),
            hour: u32::from(local.wHour),
            minute: u32::from(local.wMinute),
            zone: offset_name(&utc, &local),
        })
    }
}

/// The zone as its offset from UTC (`UTC`, `UTC+02:00`): Windows' own
/// zone names are long phrases, not abbreviations.
fn offset_name(utc: &SYSTEMTIME, local: &SYSTEMTIME) -> String {
    // Days between the two dates are at most one; the day of the month
    // tells which way across a month's end.
    let day_shift = match (i32::from(local.wDay) - i32::from(utc.wDay)).signum() {
        0 => 0,
        sign if local.wMonth == utc.wMonth => sign,
        sign => -sign,
    };
    let minutes = |t: &SYSTEMTIME| i32::from(t.wHour) * 60 + i32::from(t.wMinute);
    let offset = day_shift * 1440 + minutes(local) - minutes(utc);
    if offset == 0 {
        return "UTC".into();
    }
    let sign = if offset < 0 { '-' } else { '+' };
    format!("UTC{sign}{:02}:{:02}", offset.abs() / 60, offset.abs() % 60)
}

/// The console's input mode before the echo went off, for the handler.
// Global: the console control handler sees only statics.
static SAVED_MODE: std::sync::OnceLock<u32> = std::sync::OnceLock::new();

unsafe extern "system" fn restore_on_break(_kind: u32) -> i32 {
    if let Some(mode) = SAVED_MODE.get() {
        SetConsoleMode(GetStdHandle(STD_INPUT_HANDLE), *mode);
    }
    // Not handled: the default handler ends the process.
    0
}

/// The console's echo off while it lives (a key being typed); Ctrl-C or
/// Ctrl-Break meanwhile puts it back before the process ends.
pub struct EchoOff {
    saved: u32,
}

impl EchoOff {
    /// Turns the console's echo off; `None` when input is not a console.
    pub fn new() -> Option<EchoOff> {
        // SAFETY: console calls on this process's standard input handle
        // with a mode we own; they fail harmlessly when it is no console.
        unsafe {
            let input = GetStdHandle(STD_INPUT_HANDLE);
            let mut saved = 0u32;
            if GetConsoleMode(input, &mut saved) == 0 {
                return None;
            }
            let _ = SAVED_MODE.set(saved);
            SetConsoleCtrlHandler(Some(restore_on_break), 1);
            if SetConsoleMode(input, saved & !ENABLE_ECHO_INPUT) == 0 {
                SetConsoleCtrlHandler(Some(restore_on_break), 0);
                return None;
            }
            Some(EchoOff { saved })
        }
    }
}

impl Drop for EchoOff {
    fn drop(&mut self) {
        // SAFETY: restores the mode `new` read and removes its handler.
        unsafe {
            SetConsoleMode(GetStdHandle(STD_INPUT_HANDLE), self.saved);
            SetConsoleCtrlHandler(Some(restore_on_break), 0);
        }
    }
}

/// The console's modes before raw mode, for [`restore_terminal`].
static RAW_SAVED: std::sync::Mutex<Option<(u32, u32)>> = std::sync::Mutex::new(None);

/// The console in raw mode while it lives (the chat's line editor): keys
/// as they are typed, as the terminal sequences a Unix terminal sends
/// (`ENABLE_VIRTUAL_TERMINAL_INPUT`), no echo, Ctrl-C as a byte; standard
/// error draws those sequences too.
pub struct RawMode {
    saved: (u32, u32),
}

impl RawMode {
    /// `None` when input is no console or the console cannot send
    /// terminal sequences (before Windows 10).
    pub fn new() -> Option<RawMode> {
        // SAFETY: console calls on this process's standard handles with
        // modes we own; they fail harmlessly when these are no console.
        unsafe {
            let (input, output) = (
                GetStdHandle(STD_INPUT_HANDLE),
                GetStdHandle(STD_ERROR_HANDLE),
            );
            let (mut saved_in, mut saved_out) = (0u32, 0u32);
            if GetConsoleMode(input, &mut saved_in) == 0
                || GetConsoleMode(output, &mut saved_out) == 0
            {
                return None;
            }
            let raw_in = (saved_in
                & !(ENABLE_LINE_INPUT | ENABLE_ECHO_INPUT | ENABLE_PROCESSED_INPUT))
                | ENABLE_VIRTUAL_TERMINAL_INPUT;
            if SetConsoleMode(input, raw_in) == 0 {
                return None;
            }
            let raw_out = saved_out | ENABLE_PROCESSED_OUTPUT | ENABLE_VIRTUAL_TERMINAL_PROCESSING;
            if SetConsoleMode(output, raw_out) == 0 {
                SetConsoleMode(input, saved_in);
                return None;
            }
            if let Ok(mut slot) = RAW_SAVED.lock() {
                *slot = Some((saved_in, saved_out));
            }
            Some(RawMode {
                saved: (saved_in, saved_out),
            })
        }
    }

    /// Ctrl-Z stops nothing on Windows.
    pub fn suspend(&self) {}
}

fn set_modes((input, output): (u32, u32)) {
    // SAFETY: modes read from these console handles earlier.
    unsafe {
        SetConsoleMode(GetStdHandle(STD_INPUT_HANDLE), input);
        SetConsoleMode(GetStdHandle(STD_ERROR_HANDLE), output);
    }
}

impl Drop for RawMode {
    fn drop(&mut self) {
        set_modes(self.saved);
        if let Ok(mut slot) = RAW_SAVED.lock() {
            *slot = None;
        }
    }
}

/// Puts back the console a [`RawMode`] changed, for a process about to
/// end without dropping it.
pub fn restore_terminal() {
    if let Ok(slot) = RAW_SAVED.lock() {
        if let Some(saved) = *slot {
            set_modes(saved);
        }
    }
}

/// The columns of the console window standard error writes to.
pub fn terminal_width() -> Option<usize> {
    // SAFETY: the call fills a structure we own; it fails when standard
    // error is no console.
    unsafe {
        let mut info = std::mem::zeroed::<CONSOLE_SCREEN_BUFFER_INFO>();
        if GetConsoleScreenBufferInfo(GetStdHandle(STD_ERROR_HANDLE), &mut info) == 0 {
            return None;
        }
        let columns = i32::from(info.srWindow.Right) - i32::from(info.srWindow.Left) + 1;
        usize::try_from(columns).ok().filter(|&c| c > 0)
    }
}

//! Pseudo-terminals for the tests of what Spindle does on a terminal
//! (`spindle setup`, `spindle exec`'s questions).

use std::fs::File;
use std::os::fd::FromRawFd;

/// A fresh pseudo-terminal: its master side (what the test reads is the
/// screen, what it writes is typed) and its slave side (the program's
/// terminal). Both are close-on-exec; `Stdio::from` hands the slave over.
pub fn open() -> (File, File) {
    // SAFETY: plain libc calls on descriptors this function owns; every
    // result is checked before use.
    unsafe {
        let fd = libc::posix_openpt(libc::O_RDWR | libc::O_NOCTTY | libc::O_CLOEXEC);
        assert!(fd >= 0, "posix_openpt failed");
        assert_eq!(libc::grantpt(fd), 0, "grantpt failed");
        assert_eq!(libc::unlockpt(fd), 0, "unlockpt failed");
        let mut name = [0 as libc::c_char; 128];
        #[cfg(not(target_os = "macos"))]
        let named = libc::ptsname_r(fd, name.as_mut_ptr(), name.len());
        // macOS's ptsname_r is this ioctl, into a buffer of 128 bytes.
        #[cfg(target_os = "macos")]
        let named = libc::ioctl(
            fd,
            libc::c_ulong::from(libc::TIOCPTYGNAME),
            name.as_mut_ptr(),
        );
        assert_eq!(named, 0, "cannot name the pty's slave side");
        let slave = libc::open(
            name.as_ptr(),
            libc::O_RDWR | libc::O_NOCTTY | libc::O_CLOEXEC,
        );
        assert!(slave >= 0, "cannot open the pty's slave side");
        (File::from_raw_fd(fd), File::from_raw_fd(slave))
    }
}

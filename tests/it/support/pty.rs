//! Pseudo-terminals for the tests of what Spindle does on a terminal
//! (`spindle setup`, `spindle exec`'s questions).

use super::prelude::WAIT;
use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::FromRawFd;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

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

/// A program running on the slave side of a fresh pseudo-terminal; the
/// test holds the master: what it writes is typed, what it reads is the
/// screen (including the terminal's own echo of what was typed).
pub struct Pty {
    pub master: File,
    screen: Arc<Mutex<String>>,
    /// How much of the screen `expect` has consumed.
    seen: usize,
    pub child: Child,
    /// The thread copying the master to `screen`; it ends at the EIO that
    /// follows the close of the last slave descriptor.
    reader: std::thread::JoinHandle<()>,
}

impl Pty {
    pub fn spawn(command: Command) -> Pty {
        Pty::start(command, false)
    }

    /// As [`Pty::spawn`], the terminal also the child's controlling one
    /// (`/dev/tty`, Ctrl-C as SIGINT to it): a session of its own.
    pub fn spawn_controlling(command: Command) -> Pty {
        Pty::start(command, true)
    }

    fn start(mut command: Command, controlling: bool) -> Pty {
        let (master, slave) = crate::support::pty::open();
        command
            .stdin(Stdio::from(slave.try_clone().unwrap()))
            .stdout(Stdio::from(slave.try_clone().unwrap()))
            .stderr(Stdio::from(slave));
        if controlling {
            // SAFETY: setsid and ioctl between fork and exec, nothing
            // else: the pty (its stdin by now) becomes the controlling
            // terminal.
            unsafe {
                use std::os::unix::process::CommandExt;
                command.pre_exec(|| {
                    libc::setsid();
                    if libc::ioctl(0, libc::TIOCSCTTY as _, 0) != 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                    Ok(())
                });
            }
        }
        let child = command.spawn().expect("cannot start spindle");
        // The command holds its copies now; ours are gone with `command`.
        drop(command);
        let screen = Arc::new(Mutex::new(String::new()));
        let mut reader = master.try_clone().unwrap();
        let sink = Arc::clone(&screen);
        let reader = std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            // Ends with EIO once the last slave descriptor closes.
            while let Ok(n @ 1..) = reader.read(&mut buf) {
                sink.lock()
                    .unwrap()
                    .push_str(&String::from_utf8_lossy(&buf[..n]));
            }
        });
        Pty {
            master,
            screen,
            seen: 0,
            child,
            reader,
        }
    }

    pub fn screen(&self) -> String {
        self.screen.lock().unwrap().clone()
    }

    /// Waits until `text` shows after what was already consumed.
    pub fn expect(&mut self, text: &str) {
        let deadline = Instant::now() + WAIT;
        loop {
            let screen = self.screen();
            if let Some(at) = screen[self.seen..].find(text) {
                self.seen += at + text.len();
                return;
            }
            if Instant::now() > deadline {
                panic!(
                    "{text:?} never showed; the screen after the last match:\n{}",
                    &screen[self.seen..]
                );
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Types these bytes as they are (keys, escape sequences).
    pub fn type_bytes(&mut self, bytes: &[u8]) {
        self.master.write_all(bytes).unwrap();
    }

    /// Types a line (the terminal turns `\r` into the newline).
    pub fn send(&mut self, line: &str) {
        self.master
            .write_all(format!("{line}\r").as_bytes())
            .unwrap();
    }

    pub fn wait(&mut self) -> (Option<i32>, String) {
        let deadline = Instant::now() + WAIT;
        let status = loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                break status;
            }
            if Instant::now() > deadline {
                let _ = self.child.kill();
                panic!("the program did not end; the screen:\n{}", self.screen());
            }
            std::thread::sleep(Duration::from_millis(10));
        };
        // What the program wrote last is on the screen once the reader
        // has seen the terminal close.
        while !self.reader.is_finished() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        (status.code(), self.screen())
    }
}

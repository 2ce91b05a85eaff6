//! The API key `spindle setup` is given on standard input: read as one
//! line (not echoed on a terminal), kept in a file only its owner reads,
//! and removed again unless the setup gets to the end.

use super::setup_error::SetupError;
use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};

/// Whether `key` can be an API key: one word, not too long.
fn is_key(key: &str) -> bool {
    !key.is_empty() && key.len() <= 4096 && !key.chars().any(char::is_whitespace)
}

/// The API key, one line. Typed or pasted on a terminal it is not echoed,
/// and an empty or malformed answer is asked again (the end of input
/// stops); from `--key-stdin` without a terminal a bad line is an error.
pub(super) fn read_key(
    input: &mut dyn BufRead,
    output: &mut dyn Write,
    interactive: bool,
) -> Result<String, SetupError> {
    loop {
        // The echo goes off before the prompt, so a key pasted the moment
        // the prompt shows is never written back.
        let echo = interactive.then(crate::os::EchoOff::new).flatten();
        if interactive {
            let _ = write!(output, "API key (not shown): ");
            let _ = output.flush();
        }
        let mut line = String::new();
        let read = input.read_line(&mut line);
        if echo.is_some() {
            let _ = writeln!(output);
        }
        drop(echo);
        let read = read.map_err(|err| SetupError::input(format!("cannot read the key: {err}")))?;
        if is_key(line.trim()) {
            return Ok(line);
        }
        if !interactive {
            return Err(SetupError::arguments(
                "--key-stdin reads one line holding the API key, and it was empty or not a key",
            ));
        }
        if read == 0 {
            return Err(SetupError::stopped(
                "setup was aborted (end of input, no API key given)",
            ));
        }
        let _ = writeln!(
            output,
            "  {}; paste the key again",
            if line.trim().is_empty() {
                "that was empty"
            } else {
                "a key is one word (no spaces), at most 4,096 characters"
            }
        );
    }
}

/// A file to remove unless the setup gets to the end.
#[derive(Default)]
pub(super) struct Leftover(Option<PathBuf>);

impl Leftover {
    pub(super) fn arm(&mut self, path: PathBuf) {
        self.0 = Some(path);
    }

    pub(super) fn disarm(&mut self) {
        self.0 = None;
    }
}

impl Drop for Leftover {
    fn drop(&mut self) {
        if let Some(path) = self.0.take() {
            let _ = std::fs::remove_file(path);
        }
    }
}

/// Writes a key file readable by its owner only (created so from the
/// start, never world-readable for a moment).
pub(super) fn write_private(file: &Path, key: &str) -> Result<(), SetupError> {
    let dir = file
        .parent()
        .ok_or_else(|| SetupError::key("the key folder has no parent"))?;
    crate::os::create_private_dir_all(dir)
        .map_err(|err| SetupError::key(format!("cannot create {}: {err}", dir.display())))?;
    let temporary = file.with_extension(format!("tmp-{}", crate::util::random_hex()));
    let mut out = crate::os::open_private(&temporary, crate::os::Private::CreateNew)
        .map_err(|err| SetupError::key(format!("cannot write {}: {err}", temporary.display())))?;
    out.write_all(format!("{key}\n").as_bytes())
        .and_then(|()| out.sync_all())
        .map_err(|err| SetupError::key(format!("cannot write {}: {err}", temporary.display())))?;
    std::fs::rename(&temporary, file).map_err(|err| {
        let _ = std::fs::remove_file(&temporary);
        SetupError::key(format!("cannot write {}: {err}", file.display()))
    })
}

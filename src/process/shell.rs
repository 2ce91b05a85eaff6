//! The shell a command line runs under: `sh -c LINE` on Unix, PowerShell
//! (or `cmd`) on Windows, or the program the config's `shell` names. Its
//! kind says how the line is handed over and whether the policy's sh
//! parser may judge it.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The shells Spindle knows how to hand a line to.
pub(crate) const ACCEPTED: &str = "sh, bash, dash, zsh, ksh, pwsh, powershell or cmd";

/// How a shell takes its command line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ShellKind {
    /// `-c LINE`, POSIX sh syntax.
    Posix,
    /// `-NoProfile -NonInteractive -Command LINE`.
    PowerShell,
    /// `/D /S /C LINE`.
    Cmd,
}

impl ShellKind {
    /// The kind of a program, from its file name without `.exe`
    /// (case-insensitive); `None` for a shell Spindle does not know.
    pub fn of(program: &str) -> Option<ShellKind> {
        let name = program.rsplit(['/', '\\']).next().unwrap_or(program);
        let name = name.to_ascii_lowercase();
        let stem = name.strip_suffix(".exe").unwrap_or(&name);
        match stem {
            "sh" | "bash" | "dash" | "zsh" | "ksh" => Some(ShellKind::Posix),
            "pwsh" | "powershell" => Some(ShellKind::PowerShell),
            "cmd" => Some(ShellKind::Cmd),
            _ => None,
        }
    }

    /// The arguments before the line.
    pub fn args(self) -> &'static [&'static str] {
        match self {
            ShellKind::Posix => &["-c"],
            ShellKind::PowerShell => &["-NoProfile", "-NonInteractive", "-Command"],
            ShellKind::Cmd => &["/D", "/S", "/C"],
        }
    }
}

/// A resolved shell: the program, what goes before the line, its kind.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Shell {
    pub program: PathBuf,
    pub args: Vec<OsString>,
    pub kind: ShellKind,
}

impl Shell {
    /// The shell `program` (a name or a path) is; an error naming the
    /// accepted shells when it is none of them.
    pub fn named(program: &str) -> Result<Shell, String> {
        let kind = ShellKind::of(program).ok_or_else(|| {
            format!("{program:?} is not a shell Spindle can run commands with (use {ACCEPTED})")
        })?;
        Ok(Shell::of_kind(PathBuf::from(program), kind))
    }

    fn of_kind(program: PathBuf, kind: ShellKind) -> Shell {
        Shell {
            program,
            args: kind.args().iter().map(OsString::from).collect(),
            kind,
        }
    }

    /// `sh`, found on PATH.
    pub fn sh() -> Shell {
        Shell::of_kind(PathBuf::from("sh"), ShellKind::Posix)
    }

    /// The configured shell, else this system's default.
    pub fn configured(program: Option<&str>) -> Shell {
        program
            .and_then(|p| Shell::named(p).ok())
            .unwrap_or_else(Shell::default_here)
    }

    /// This system's default: `sh` on Unix; on Windows `pwsh` when it is
    /// on PATH, else Windows PowerShell, else `cmd` (`%ComSpec%`).
    pub fn default_here() -> Shell {
        if cfg!(windows) {
            windows_default()
        } else {
            Shell::sh()
        }
    }

    /// The arguments for running `line`: the shell's, then the line.
    pub fn argv(&self, line: &str) -> Vec<OsString> {
        let mut argv = self.args.clone();
        argv.push(line.into());
        argv
    }

    /// The program's name without folder or `.exe`, such as `pwsh`.
    pub fn name(&self) -> String {
        let text = self.program.to_string_lossy();
        let name = text.rsplit(['/', '\\']).next().unwrap_or(&text);
        let cut = name.len().saturating_sub(4);
        match name.get(cut..) {
            Some(ext) if ext.eq_ignore_ascii_case(".exe") => name[..cut].to_string(),
            _ => name.to_string(),
        }
    }

    /// How a command runs, for people and the model: `pwsh -NoProfile
    /// -NonInteractive -Command`.
    pub fn describe(&self) -> String {
        let mut out = self.name();
        for arg in &self.args {
            out.push(' ');
            out.push_str(&arg.to_string_lossy());
        }
        out
    }

    /// The command running `line` under this shell (wrapped in the guard,
    /// [`super::guard::command`]). `cmd` takes its line verbatim: on
    /// Windows it is passed quoted as a whole, not escaped as an argument.
    pub fn command(&self, line: &str) -> Command {
        #[cfg(windows)]
        if self.kind == ShellKind::Cmd {
            use std::os::windows::process::CommandExt;
            let mut command = super::guard::command(&self.program, &self.args);
            command.raw_arg(format!("\"{line}\""));
            return command;
        }
        super::guard::command(&self.program, &self.argv(line))
    }
}

/// The Windows default shell, looked up on PATH and in the system folder.
fn windows_default() -> Shell {
    let on_path = |name: &str| -> Option<PathBuf> {
        let path = std::env::var_os("PATH")?;
        std::env::split_paths(&path)
            .map(|dir| dir.join(name))
            .find(|file| file.is_file())
    };
    if let Some(pwsh) = on_path("pwsh.exe") {
        return Shell::of_kind(pwsh, ShellKind::PowerShell);
    }
    let system_powershell = std::env::var_os("SystemRoot")
        .map(|root| Path::new(&root).join("System32\\WindowsPowerShell\\v1.0\\powershell.exe"));
    if let Some(powershell) =
        on_path("powershell.exe").or(system_powershell.filter(|file| file.is_file()))
    {
        return Shell::of_kind(powershell, ShellKind::PowerShell);
    }
    let cmd = std::env::var_os("ComSpec")
        .filter(|c| !c.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("cmd.exe"));
    Shell::of_kind(cmd, ShellKind::Cmd)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_come_from_the_file_stem() {
        for posix in [
            "sh",
            "bash",
            "/bin/dash",
            "zsh",
            "ksh",
            "C:\\Git\\bin\\BASH.EXE",
        ] {
            assert_eq!(ShellKind::of(posix), Some(ShellKind::Posix), "{posix}");
        }
        for ps in ["pwsh", "pwsh.exe", "PowerShell.exe", "C:\\x\\powershell"] {
            assert_eq!(ShellKind::of(ps), Some(ShellKind::PowerShell), "{ps}");
        }
        assert_eq!(
            ShellKind::of("C:\\Windows\\System32\\cmd.exe"),
            Some(ShellKind::Cmd)
        );
        for unknown in ["fish", "nu", "bash.sh", "", "cmd.com"] {
            assert_eq!(ShellKind::of(unknown), None, "{unknown}");
        }
    }

    #[test]
    fn argv_puts_the_shells_arguments_before_the_line() {
        let argv = |program: &str| Shell::named(program).unwrap().argv("echo hi");
        assert_eq!(argv("bash"), ["-c", "echo hi"]);
        assert_eq!(
            argv("pwsh.exe"),
            ["-NoProfile", "-NonInteractive", "-Command", "echo hi"]
        );
        assert_eq!(argv("cmd"), ["/D", "/S", "/C", "echo hi"]);
        assert_eq!(
            Shell::named("C:\\P\\pwsh.exe").unwrap().describe(),
            "pwsh -NoProfile -NonInteractive -Command"
        );
        assert_eq!(Shell::named("/usr/bin/bash").unwrap().describe(), "bash -c");
    }

    #[test]
    fn an_unknown_shell_is_refused_naming_the_accepted_ones() {
        let error = Shell::named("fish").unwrap_err();
        assert!(
            error.contains("\"fish\"") && error.contains(ACCEPTED),
            "{error}"
        );
    }

    #[test]
    fn the_unix_default_is_sh() {
        if cfg!(unix) {
            assert_eq!(Shell::default_here(), Shell::sh());
            assert_eq!(Shell::configured(None).describe(), "sh -c");
        }
    }
}

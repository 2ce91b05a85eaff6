//! Where each system keeps a user's configuration and data. `SPINDLE_HOME`
//! (both in one folder) is the callers' business; below it:
//!
//! | system  | config                                   | data                                            |
//! |---------|------------------------------------------|-------------------------------------------------|
//! | Linux   | `$XDG_CONFIG_HOME/spindle`, `~/.config/spindle` | `$XDG_DATA_HOME/spindle`, `~/.local/share/spindle` |
//! | macOS   | as Linux (command-line tools' custom there)     | as Linux                                  |
//! | Windows | `$XDG_CONFIG_HOME/spindle`, `%APPDATA%\spindle` | `$XDG_DATA_HOME/spindle`, `%LOCALAPPDATA%\spindle` |
//!
//! An XDG variable set by the user wins everywhere: it is a choice.

use std::ffi::OsString;
use std::path::PathBuf;

/// The user's home folder: `HOME`, else (Windows) `USERPROFILE`; `None`
/// when neither is set.
pub(crate) fn home() -> Option<PathBuf> {
    home_from(&|name| std::env::var_os(name))
}

/// The folder Spindle's config file lives in when `SPINDLE_HOME` is unset.
pub(crate) fn config_dir() -> PathBuf {
    config_from(&|name| std::env::var_os(name), cfg!(windows))
}

/// The folder Spindle's database lives in when `SPINDLE_HOME` is unset.
pub(crate) fn data_dir() -> PathBuf {
    data_from(&|name| std::env::var_os(name), cfg!(windows))
}

type Env<'a> = &'a dyn Fn(&str) -> Option<OsString>;

fn set(env: Env, name: &str) -> Option<PathBuf> {
    env(name).filter(|v| !v.is_empty()).map(PathBuf::from)
}

fn home_from(env: Env) -> Option<PathBuf> {
    set(env, "HOME").or_else(|| set(env, "USERPROFILE"))
}

fn home_or_here(env: Env) -> PathBuf {
    home_from(env).unwrap_or_else(|| PathBuf::from("."))
}

fn config_from(env: Env, windows: bool) -> PathBuf {
    if let Some(dir) = set(env, "XDG_CONFIG_HOME") {
        return dir.join("spindle");
    }
    if windows {
        if let Some(dir) = set(env, "APPDATA") {
            return dir.join("spindle");
        }
    }
    home_or_here(env).join(".config").join("spindle")
}

fn data_from(env: Env, windows: bool) -> PathBuf {
    if let Some(dir) = set(env, "XDG_DATA_HOME") {
        return dir.join("spindle");
    }
    if windows {
        if let Some(dir) = set(env, "LOCALAPPDATA") {
            return dir.join("spindle");
        }
    }
    home_or_here(env)
        .join(".local")
        .join("share")
        .join("spindle")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env_of(pairs: &'static [(&'static str, &'static str)]) -> impl Fn(&str) -> Option<OsString> {
        move |name| {
            pairs
                .iter()
                .find(|(key, _)| *key == name)
                .map(|(_, value)| OsString::from(value))
        }
    }

    #[test]
    fn unix_folders_follow_xdg_then_home() {
        let env = env_of(&[("HOME", "/h"), ("APPDATA", "/appdata")]);
        assert_eq!(
            config_from(&env, false),
            PathBuf::from("/h/.config/spindle")
        );
        assert_eq!(
            data_from(&env, false),
            PathBuf::from("/h/.local/share/spindle")
        );
        let env = env_of(&[
            ("HOME", "/h"),
            ("XDG_CONFIG_HOME", "/c"),
            ("XDG_DATA_HOME", ""),
        ]);
        assert_eq!(config_from(&env, false), PathBuf::from("/c/spindle"));
        assert_eq!(
            data_from(&env, false),
            PathBuf::from("/h/.local/share/spindle")
        );
    }

    #[test]
    fn windows_folders_are_appdata_and_localappdata() {
        let env = env_of(&[
            ("USERPROFILE", "/users/u"),
            ("APPDATA", "/users/u/roaming"),
            ("LOCALAPPDATA", "/users/u/local"),
        ]);
        assert_eq!(home_from(&env), Some(PathBuf::from("/users/u")));
        assert_eq!(
            config_from(&env, true),
            PathBuf::from("/users/u/roaming/spindle")
        );
        assert_eq!(
            data_from(&env, true),
            PathBuf::from("/users/u/local/spindle")
        );
        // An XDG variable the user set still wins.
        let env = env_of(&[("APPDATA", "/roaming"), ("XDG_CONFIG_HOME", "/c")]);
        assert_eq!(config_from(&env, true), PathBuf::from("/c/spindle"));
        // Neither: the profile's own dot-folders, then the current folder.
        let env = env_of(&[("USERPROFILE", "/users/u")]);
        assert_eq!(
            data_from(&env, true),
            PathBuf::from("/users/u/.local/share/spindle")
        );
        assert_eq!(
            config_from(&env_of(&[]), true),
            PathBuf::from("./.config/spindle")
        );
    }
}

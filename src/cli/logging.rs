//! Logging to stderr or a rotated file: a small logger of its own that
//! reads `RUST_LOG` as `LEVEL` and `TARGET=LEVEL` pairs separated by
//! commas (the longest target that starts a record's target decides; a
//! bare target means `trace`). Each line is `[LEVEL target] message`.

use super::args::{Command, Usage};
use log::LevelFilter;
use std::io::Write;
use std::sync::Mutex;

/// The levels asked for: the default, and per target prefix.
#[derive(Debug, PartialEq)]
pub(super) struct Filter {
    default: LevelFilter,
    targets: Vec<(String, LevelFilter)>,
}

impl Filter {
    /// Reads a `RUST_LOG` value; parts that name no level are skipped
    /// with a line on stderr, as a typo must not silence the log.
    pub(super) fn parse(spec: &str, default: LevelFilter) -> Filter {
        let mut filter = Filter {
            default,
            targets: Vec::new(),
        };
        for part in spec.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (name, level) = match part.split_once('=') {
                Some((name, level)) => (name.trim(), level.trim().parse().ok()),
                None => match part.parse::<LevelFilter>() {
                    Ok(level) => ("", Some(level)),
                    Err(_) => (part, Some(LevelFilter::Trace)),
                },
            };
            match level {
                Some(level) if name.is_empty() => filter.default = level,
                Some(level) => filter.set(name, level),
                None => eprintln!("spindle: RUST_LOG: `{part}` names no level; ignored"),
            }
        }
        filter
    }

    /// Sets the level of one target prefix (replacing an earlier one).
    pub(super) fn set(&mut self, name: &str, level: LevelFilter) {
        self.targets.retain(|(known, _)| known != name);
        self.targets.push((name.to_string(), level));
    }

    /// The level in force for a record's target.
    pub(super) fn level(&self, target: &str) -> LevelFilter {
        self.targets
            .iter()
            .filter(|(name, _)| {
                target.starts_with(name.as_str())
                    && matches!(target.as_bytes().get(name.len()), None | Some(b':'))
            })
            .max_by_key(|(name, _)| name.len())
            .map_or(self.default, |(_, level)| *level)
    }

    fn most(&self) -> LevelFilter {
        self.targets
            .iter()
            .map(|(_, level)| *level)
            .fold(self.default, std::cmp::max)
    }
}

struct Logger {
    filter: Filter,
    out: Mutex<Box<dyn Write + Send>>,
}

impl log::Log for Logger {
    fn enabled(&self, metadata: &log::Metadata) -> bool {
        metadata.level() <= self.filter.level(metadata.target())
    }

    fn log(&self, record: &log::Record) {
        if !self.enabled(record.metadata()) {
            return;
        }
        // What is logged may quote a model server's or a file's bytes:
        // their control characters are written out, so a log on a
        // terminal cannot be made to move the cursor, retitle the window
        // or fake a line.
        let line = format!(
            "[{:<5} {}] {}\n",
            record.level(),
            record.target(),
            crate::util::visible(&record.args().to_string(), true)
        );
        if let Ok(mut out) = self.out.lock() {
            let _ = out.write_all(line.as_bytes());
        }
    }

    fn flush(&self) {
        if let Ok(mut out) = self.out.lock() {
            let _ = out.flush();
        }
    }
}

/// Sets up logging: stderr, or the log file (`--log-file`, else the
/// config's `log_file`) rotated by size. `shows_retries`: the command
/// prints each retry and a model call's failure to stderr itself
/// (`spindle exec`), so the log there leaves them out unless `RUST_LOG`
/// asks for them. `off_screen` (`spindle chat`): no log line is ever
/// written to the terminal, where it would land in the conversation;
/// without a file, the log is dropped.
pub(super) fn init_logging(
    log_file: Option<std::path::PathBuf>,
    shows_retries: bool,
    off_screen: bool,
) {
    let asked = std::env::var("RUST_LOG").unwrap_or_default();
    let mut filter = Filter::parse(&asked, LevelFilter::Warn);
    // The HTTP and TLS libraries log only when RUST_LOG names them, and
    // never above debug: at trace they dump raw requests, API keys in
    // their headers included.
    let library = |name: &str, cap: LevelFilter| {
        if asked.contains(name) {
            cap
        } else {
            LevelFilter::Warn
        }
    };
    filter.set("ureq_proto", library("ureq", LevelFilter::Debug));
    filter.set("ureq", library("ureq", LevelFilter::Debug));
    filter.set("rustls", library("rustls", LevelFilter::Info));
    let file = log_file.and_then(|path| match crate::util::RotatingLog::open(&path) {
        Ok(file) => Some(file),
        Err(error) => {
            eprintln!(
                "spindle: cannot log to {}: {error}; {}",
                path.display(),
                if off_screen {
                    "not logging"
                } else {
                    "logging to stderr"
                }
            );
            None
        }
    });
    let out: Box<dyn Write + Send> = match file {
        // A file keeps the levels asked for, and `info` by default.
        Some(file) => {
            if std::env::var_os("RUST_LOG").is_none() {
                filter.set("spindle", LevelFilter::Info);
            }
            Box::new(file)
        }
        None if off_screen => {
            filter = Filter::parse("", LevelFilter::Off);
            Box::new(std::io::sink())
        }
        None => {
            if shows_retries && !asked.contains("retry") {
                filter.set(crate::provider::http::RETRY_LOG, LevelFilter::Off);
            }
            if shows_retries && !asked.contains("call_failed") {
                filter.set(crate::provider::http::FAILED_CALL_LOG, LevelFilter::Off);
            }
            Box::new(std::io::stderr())
        }
    };
    log::set_max_level(filter.most());
    let logger = Logger {
        filter,
        out: Mutex::new(out),
    };
    let _ = log::set_logger(Box::leak(Box::new(logger)));
}

/// The log file the command line names (`spindle acp`, `exec`, `chat`),
/// else the one the config names (`spindle acp` and `chat`: exec keeps
/// its warnings on the terminal).
pub(super) fn log_file_of(
    command: &Result<Command, Usage>,
    loaded: Option<&crate::config::loaded::Loaded>,
) -> Option<std::path::PathBuf> {
    let options = match command {
        Ok(Command::Acp(options)) => options,
        Ok(Command::Exec(options, args)) if args.chat => &**options,
        Ok(Command::Exec(options, _)) => return options.log_file.clone(),
        _ => return None,
    };
    if let Some(path) = &options.log_file {
        return Some(path.clone());
    }
    // The config the command loaded; only one that cannot be used is read
    // again here, for its `log_file` alone (its problem is then logged).
    if let Some(config) = loaded.and_then(crate::config::loaded::Loaded::config) {
        return config.log_file.clone();
    }
    let path = options
        .config
        .clone()
        .unwrap_or_else(crate::config::default_path);
    // Read as the config is read: never a FIFO, within a cap (a bad file
    // is reported when the config is loaded).
    let text = crate::config::read_text(&path).ok()??;
    let value: serde_json::Value = serde_json::from_str(&text).ok()?;
    value["log_file"].as_str().map(std::path::PathBuf::from)
}

#[cfg(test)]
mod tests {
    use super::Filter;
    use log::LevelFilter::*;

    #[test]
    fn rust_log_reads_levels_and_targets() {
        let filter = Filter::parse("info, spindle::provider=trace,ureq", Warn);
        assert_eq!(filter.level("other"), Info);
        assert_eq!(filter.level("spindle::provider::http"), Trace);
        assert_eq!(filter.level("spindle::agent"), Info);
        assert_eq!(filter.level("ureq"), Trace);
        // A prefix counts only at a module boundary.
        assert_eq!(filter.level("ureq_proto"), Info);
        assert_eq!(Filter::parse("", Warn).level("x"), Warn);
        assert_eq!(
            Filter::parse("spindle=nonsense", Warn).level("spindle"),
            Warn
        );
        let mut filter = Filter::parse("debug,spindle=error", Warn);
        filter.set("spindle", Off);
        assert_eq!(filter.level("spindle::x"), Off);
        assert_eq!(filter.most(), Debug);
    }
}

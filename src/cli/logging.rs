//! Logging to stderr or a rotated file.

use super::args::{Command, Usage};

/// Sets up logging: stderr, or the log file (`--log-file`, else the
/// config's `log_file`) rotated by size. `shows_retries`: the command
/// prints each retry to stderr itself (`spindle exec`), so the log there
/// leaves them out unless `RUST_LOG` asks for them.
pub fn init_logging(log_file: Option<std::path::PathBuf>, shows_retries: bool) {
    // The HTTP and TLS libraries log only when RUST_LOG names them, and
    // never above debug: at trace they dump raw requests, API keys in
    // their headers included.
    let asked = std::env::var("RUST_LOG").unwrap_or_default();
    let library = |name: &str, cap: log::LevelFilter| {
        if asked.contains(name) {
            cap
        } else {
            log::LevelFilter::Warn
        }
    };
    let mut builder =
        env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("warn"));
    // What is logged may quote a model server's or a file's bytes: their
    // control characters are written out, so a log on a terminal cannot
    // be made to move the cursor, retitle the window or fake a line.
    builder.format(|out, record| {
        use std::io::Write;
        writeln!(
            out,
            "[{:<5} {}] {}",
            record.level(),
            record.target(),
            crate::util::visible(&record.args().to_string(), true)
        )
    });
    builder
        .filter_module("ureq_proto", library("ureq", log::LevelFilter::Debug))
        .filter_module("ureq", library("ureq", log::LevelFilter::Debug))
        .filter_module("rustls", library("rustls", log::LevelFilter::Info));
    let file = log_file.and_then(|path| match crate::util::RotatingLog::open(&path) {
        Ok(file) => Some(file),
        Err(error) => {
            eprintln!(
                "spindle: cannot log to {}: {error}; logging to stderr",
                path.display()
            );
            None
        }
    });
    match file {
        // A file keeps the levels asked for, and `info` by default.
        Some(file) => {
            if std::env::var_os("RUST_LOG").is_none() {
                builder.filter_module("spindle", log::LevelFilter::Info);
            }
            builder.target(env_logger::Target::Pipe(Box::new(file)))
        }
        None => {
            if shows_retries && !asked.contains("retry") {
                builder.filter_module(crate::provider::http::RETRY_LOG, log::LevelFilter::Off);
            }
            builder.target(env_logger::Target::Stderr)
        }
    };
    builder.init();
}

/// The log file the command line or the config names, for `spindle acp`.
pub fn log_file_of(command: &Result<Command, Usage>) -> Option<std::path::PathBuf> {
    let Ok(Command::Acp(options)) = command else {
        return None;
    };
    if let Some(path) = &options.log_file {
        return Some(path.clone());
    }
    let path = options
        .config
        .clone()
        .unwrap_or_else(crate::config::default_path);
    let text = std::fs::read_to_string(path).ok()?;
    let value: serde_json::Value = serde_json::from_str(&text).ok()?;
    value["log_file"].as_str().map(std::path::PathBuf::from)
}

//! What a turn starts with, besides the prompt: how its commands start
//! (the session's folder, credentials removed, the sandbox).

use crate::agent::common::models::Registry;
use crate::agent::dispatcher::Dispatcher;
use crate::agent::turn::processes::Processes;

impl Dispatcher {
    /// How the commands of a session's next turn start: its private folder
    /// for logs (made now), the credentials to remove, the sandbox.
    pub(in crate::agent) fn processes_for(
        &self,
        session_id: &str,
        registry: &Registry,
    ) -> Processes {
        let session_dir = match crate::process::logs::prepare_session_dir(&self.db_path, session_id)
        {
            Ok(dir) => Some(dir),
            Err(error) => {
                log::warn!("commands of session {session_id} run without logs: {error}");
                None
            }
        };
        let launcher = std::env::current_exe().ok();
        let sandbox = launcher
            .as_deref()
            .is_some_and(|exe| crate::sandbox::support(exe).available());
        let temp_dir = crate::process::logs::prepare_temp_dir(&self.db_path, session_id)
            .map_err(|error| log::warn!("no private temp folder for the sandbox: {error}"))
            .ok();
        // Sandboxed commands may read outside the workspace, but not
        // Spindle's credentials, config (MCP servers' env and headers),
        // sessions or logs.
        let mut hidden: Vec<std::path::PathBuf> = registry
            .config
            .providers
            .values()
            .filter_map(|provider| provider.api_key_file.clone())
            .collect();
        let config_path = registry
            .config_path
            .clone()
            .unwrap_or_else(crate::config::default_path);
        hidden.push(crate::config::managed_keys_dir(&config_path));
        hidden.push(config_path);
        let with_suffixes = |path: &std::path::Path, suffixes: &[&str]| {
            suffixes
                .iter()
                .map(|suffix| {
                    let mut name = path.as_os_str().to_os_string();
                    name.push(suffix);
                    std::path::PathBuf::from(name)
                })
                .collect::<Vec<_>>()
        };
        hidden.extend(with_suffixes(
            &self.db_path,
            &["", "-wal", "-shm", "-journal"],
        ));
        hidden.push(crate::process::logs::root(&self.db_path));
        // The agent's own log (and the one rotation keeps).
        for log in [&self.options.log_file, &registry.config.log_file]
            .into_iter()
            .flatten()
        {
            hidden.extend(with_suffixes(log, &["", ".1"]));
        }
        // The launcher resolves them in the command's folder: a relative
        // one is meant from here.
        let hidden: Vec<std::path::PathBuf> = hidden
            .into_iter()
            .filter_map(|path| std::path::absolute(path).ok())
            .collect();
        // A page of read_file always fits a tool result whole, so reading
        // a kept output never spills again.
        let mut file_limits = registry.config.limits.files();
        file_limits.page = file_limits.page.min(
            registry
                .config
                .context
                .tool_output_bytes()
                .saturating_sub(1024),
        );
        Processes {
            file_limits,
            output_cap: crate::config::Limits::or(
                registry.config.limits.command_output_bytes,
                crate::tools::COMMAND_OUTPUT_CAP,
            ),
            secrets: registry.secrets.clone(),
            temp_dir,
            hidden,
            session_dir,
            log_cap: registry
                .config
                .tools
                .command_log_bytes
                .unwrap_or(crate::process::logs::DEFAULT_LOG_CAP),
            launcher,
            sandbox,
            extra_roots: self
                .sessions
                .get(session_id)
                .map(|s| s.extra_roots.clone())
                .unwrap_or_default(),
        }
    }
}

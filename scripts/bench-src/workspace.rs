//! `Bench`, which every figure runs against (the agent binary and its scratch
//! `Workspace`), and its `new_session` in the workspace.

use crate::agent::{new_session_in, AgentProcess};
use std::path::PathBuf;
use std::time::Duration;

pub(crate) struct Bench {
    pub(crate) binary: PathBuf,
    pub(crate) work: Workspace,
}

impl Bench {
    pub(crate) fn new_session(
        &self,
        process: &mut AgentProcess,
    ) -> Result<(String, Duration), String> {
        new_session_in(process, &self.work.dir)
    }
}

// ---------------------------------------------------------------------------
// Scratch files

/// A temporary directory holding the session cwd, the script files, the
/// agents' `SPINDLE_HOME` and the search tree; removed on drop.
pub(crate) struct Workspace {
    pub(crate) dir: PathBuf,
    pub(crate) script: PathBuf,
}

impl Workspace {
    pub(crate) fn create() -> std::io::Result<Workspace> {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        let dir =
            std::env::temp_dir().join(format!("spindle-bench-{}-{nanos}", std::process::id()));
        std::fs::create_dir_all(&dir)?;
        let dir = dir.canonicalize()?;
        let script = dir.join("script.json");
        std::fs::write(&script, r#"{"fallback":{"text":"Hello there"}}"#)?;
        Ok(Workspace { dir, script })
    }

    /// The agents' `SPINDLE_HOME` (their session database), inside the
    /// workspace. Scripted agents use a temporary database of their own
    /// anyway; the streaming runs would otherwise write the user's.
    pub(crate) fn home(&self) -> PathBuf {
        self.dir.join("home")
    }
}

impl Drop for Workspace {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

//! Which connection of `serve` has which session open: a session runs in
//! one connection's agent at a time, as over stdio it runs in one process.

use std::collections::HashMap;
use std::sync::Mutex;

#[derive(Default)]
pub(crate) struct Owners(Mutex<HashMap<String, String>>);

impl Owners {
    fn map(&self) -> std::sync::MutexGuard<'_, HashMap<String, String>> {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Takes `session` for connection `conn`, unless another connection
    /// that `alive` says is still open has it.
    pub(crate) fn reserve(
        &self,
        session: &str,
        conn: &str,
        alive: impl Fn(&str) -> bool,
    ) -> Result<(), ()> {
        let mut owners = self.map();
        if let Some(owner) = owners.get(session) {
            if owner != conn && alive(owner) {
                return Err(());
            }
        }
        owners.insert(session.to_string(), conn.to_string());
        Ok(())
    }

    /// Whether a connection other than `conn` that `alive` says is still
    /// open has `session`.
    pub(crate) fn held_elsewhere(
        &self,
        session: &str,
        conn: &str,
        alive: impl Fn(&str) -> bool,
    ) -> bool {
        self.map()
            .get(session)
            .is_some_and(|owner| owner != conn && alive(owner))
    }

    /// Records that `conn` has `session` open (it made or loaded it).
    pub(crate) fn claim(&self, session: &str, conn: &str) {
        self.map().insert(session.to_string(), conn.to_string());
    }

    /// `conn` no longer has `session` open.
    pub(crate) fn release(&self, session: &str, conn: &str) {
        let mut owners = self.map();
        if owners.get(session).is_some_and(|owner| owner == conn) {
            owners.remove(session);
        }
    }

    /// Connection `conn` ended: its sessions are free.
    pub(crate) fn forget(&self, conn: &str) {
        self.map().retain(|_, owner| owner != conn);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_session_belongs_to_one_live_connection() {
        let owners = Owners::default();
        owners.claim("s", "a");
        assert!(owners.reserve("s", "b", |_| true).is_err());
        assert!(owners.held_elsewhere("s", "b", |_| true));
        assert!(!owners.held_elsewhere("s", "a", |_| true));
        assert!(!owners.held_elsewhere("s", "b", |_| false));
        assert!(owners.reserve("s", "a", |_| true).is_ok());
        assert!(owners.reserve("s", "b", |_| false).is_ok());
        owners.forget("b");
        assert!(owners.reserve("s", "a", |_| true).is_ok());
        owners.release("s", "a");
        assert!(owners.reserve("s", "b", |_| true).is_ok());
    }
}

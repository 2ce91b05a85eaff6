//! Checkpoints in the store: for each turn that changed the workspace, the
//! files it changed with their contents before and after, kept as blobs
//! once per session (by content hash, compared byte for byte), so `/undo`,
//! `/rewind` and `/redo` work after a reload and in another process.

use super::words::stored_words;
use super::{Result, Store};
use rusqlite::{params, OptionalExtension};
use std::path::PathBuf;

/// One file a turn changed: its content keys before and after (`None`:
/// the file did not exist), and whether it was written through the
/// editor.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileRecord {
    pub path: PathBuf,
    pub before: Option<String>,
    pub after: Option<String>,
    pub via_editor: bool,
}

/// Whether a turn's changes are in the workspace.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CheckpointState {
    Applied,
    Undone,
}

stored_words!(CheckpointState {
    Applied => "applied",
    Undone => "undone",
});

/// A turn's checkpoint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckpointRow {
    pub turn: i64,
    pub state: CheckpointState,
    pub created_ms: i64,
    pub files: Vec<FileRecord>,
}

/// A 128-bit FNV-1a digest; only a name for a blob (equal keys are
/// compared byte for byte before they are shared).
fn digest(data: &[u8]) -> String {
    let mut a: u64 = 0xcbf2_9ce4_8422_2325;
    let mut b: u64 = 0x6c62_272e_07bb_0142;
    for &byte in data {
        a = (a ^ byte as u64).wrapping_mul(0x0000_0100_0000_01b3);
        b = (b ^ byte as u64)
            .wrapping_mul(0x0000_0100_0000_01b3)
            .rotate_left(5);
    }
    format!("{a:016x}{b:016x}-{}", data.len())
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

impl Store {
    /// Keeps `data` for the session; returns its key. Identical content is
    /// kept once.
    pub fn put_blob(&self, session: &str, data: &[u8]) -> Result<String> {
        let base = digest(data);
        for n in 0..16 {
            let key = if n == 0 {
                base.clone()
            } else {
                format!("{base}.{n}")
            };
            let existing: Option<Vec<u8>> = self
                .connection
                .query_row(
                    "SELECT data FROM checkpoint_blobs WHERE session_id = ?1 AND key = ?2",
                    params![session, key],
                    |row| row.get(0),
                )
                .optional()?;
            match existing {
                Some(stored) if stored == data => return Ok(key),
                Some(_) => continue,
                None => {
                    self.connection.execute(
                        "INSERT INTO checkpoint_blobs (session_id, key, data) VALUES (?1, ?2, ?3)",
                        params![session, key, data],
                    )?;
                    return Ok(key);
                }
            }
        }
        Err(super::StoreError::new(
            super::StoreErrorKind::Other,
            "too many different contents share one checkpoint key",
        ))
    }

    pub fn blob(&self, session: &str, key: &str) -> Result<Option<Vec<u8>>> {
        Ok(self
            .connection
            .query_row(
                "SELECT data FROM checkpoint_blobs WHERE session_id = ?1 AND key = ?2",
                params![session, key],
                |row| row.get(0),
            )
            .optional()?)
    }

    /// Records that `turn` changed `path` from `before` to `after`. The
    /// first `before` of a turn stays (the state the turn started from);
    /// `after` is the latest.
    pub fn record_change(
        &self,
        session: &str,
        turn: i64,
        path: &str,
        before: Option<&str>,
        after: Option<&str>,
        via_editor: bool,
    ) -> Result<()> {
        self.connection.execute(
            "INSERT OR IGNORE INTO checkpoints (session_id, turn, state, created_ms)
             VALUES (?1, ?2, 'applied', ?3)",
            params![session, turn, now_ms()],
        )?;
        self.connection.execute(
            "INSERT INTO checkpoint_files (session_id, turn, path, before_key, after_key, via_editor)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6)
             ON CONFLICT (session_id, turn, path) DO UPDATE
             SET after_key = excluded.after_key,
                 via_editor = checkpoint_files.via_editor OR excluded.via_editor",
            params![session, turn, path, before, after, via_editor],
        )?;
        Ok(())
    }

    /// Forgets a file of a turn whose content ended as it began.
    pub fn drop_unchanged(&self, session: &str, turn: i64) -> Result<()> {
        self.connection.execute(
            "DELETE FROM checkpoint_files WHERE session_id = ?1 AND turn = ?2
             AND before_key IS after_key",
            params![session, turn],
        )?;
        self.connection.execute(
            "DELETE FROM checkpoints WHERE session_id = ?1 AND turn = ?2 AND NOT EXISTS
             (SELECT 1 FROM checkpoint_files f WHERE f.session_id = ?1 AND f.turn = ?2)",
            params![session, turn],
        )?;
        Ok(())
    }

    /// The session's checkpoints, oldest first.
    pub fn checkpoints(&self, session: &str) -> Result<Vec<CheckpointRow>> {
        let mut statement = self.connection.prepare_cached(
            "SELECT turn, state, created_ms FROM checkpoints WHERE session_id = ?1 ORDER BY turn",
        )?;
        let rows = statement.query_map([session], |row| {
            Ok(CheckpointRow {
                turn: row.get(0)?,
                state: row.get(1)?,
                created_ms: row.get(2)?,
                files: Vec::new(),
            })
        })?;
        let mut checkpoints = rows.collect::<rusqlite::Result<Vec<_>>>()?;
        let mut files = self.connection.prepare_cached(
            "SELECT path, before_key, after_key, via_editor FROM checkpoint_files
             WHERE session_id = ?1 AND turn = ?2 ORDER BY path",
        )?;
        for checkpoint in &mut checkpoints {
            let rows = files.query_map(params![session, checkpoint.turn], |row| {
                Ok(FileRecord {
                    path: PathBuf::from(row.get::<_, String>(0)?),
                    before: row.get(1)?,
                    after: row.get(2)?,
                    via_editor: row.get(3)?,
                })
            })?;
            checkpoint.files = rows.collect::<rusqlite::Result<Vec<_>>>()?;
        }
        Ok(checkpoints)
    }

    /// Undone checkpoints can no longer be redone once a turn changes the
    /// workspace again: they go.
    pub fn forget_undone(&self, session: &str) -> Result<()> {
        self.connection.execute(
            "DELETE FROM checkpoints WHERE session_id = ?1 AND state = 'undone'",
            [session],
        )?;
        Ok(())
    }

    /// Groups the writes that follow into one transaction (a scan records
    /// many files); `end_batch` commits.
    pub fn begin_batch(&self) -> Result<()> {
        self.connection.execute_batch("BEGIN IMMEDIATE")?;
        Ok(())
    }

    pub fn end_batch(&self) -> Result<()> {
        if !self.connection.is_autocommit() {
            self.connection.execute_batch("COMMIT")?;
        }
        Ok(())
    }

    pub fn set_checkpoint_state(
        &self,
        session: &str,
        turn: i64,
        state: CheckpointState,
    ) -> Result<()> {
        self.connection.execute(
            "UPDATE checkpoints SET state = ?3 WHERE session_id = ?1 AND turn = ?2",
            params![session, turn, state],
        )?;
        Ok(())
    }

    /// Removes checkpoints older than `older_than_ms` (epoch ms), then the
    /// oldest ones while the session's blobs take more than `max_bytes`,
    /// then blobs no checkpoint refers to. Returns how many checkpoints
    /// went.
    pub fn prune_checkpoints(
        &mut self,
        session: &str,
        older_than_ms: i64,
        max_bytes: u64,
    ) -> Result<usize> {
        let transaction = self
            .connection
            .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
        let mut removed = transaction.execute(
            "DELETE FROM checkpoints WHERE session_id = ?1 AND created_ms < ?2",
            params![session, older_than_ms],
        )?;
        let unreferenced = "DELETE FROM checkpoint_blobs WHERE session_id = ?1 AND key NOT IN
             (SELECT before_key FROM checkpoint_files WHERE session_id = ?1 AND before_key IS NOT NULL
              UNION SELECT after_key FROM checkpoint_files WHERE session_id = ?1 AND after_key IS NOT NULL)";
        transaction.execute(unreferenced, [session])?;
        loop {
            let bytes: i64 = transaction.query_row(
                "SELECT COALESCE(SUM(LENGTH(data)), 0) FROM checkpoint_blobs WHERE session_id = ?1",
                [session],
                |row| row.get(0),
            )?;
            if bytes as u64 <= max_bytes {
                break;
            }
            let oldest: Option<i64> = transaction
                .query_row(
                    "SELECT MIN(turn) FROM checkpoints WHERE session_id = ?1",
                    [session],
                    |row| row.get(0),
                )
                .optional()?
                .flatten();
            let Some(oldest) = oldest else { break };
            transaction.execute(
                "DELETE FROM checkpoints WHERE session_id = ?1 AND turn = ?2",
                params![session, oldest],
            )?;
            transaction.execute(unreferenced, [session])?;
            removed += 1;
        }
        transaction.commit()?;
        Ok(removed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn store() -> (Store, std::path::PathBuf) {
        let dir = std::env::temp_dir().join(format!("spindle-ckpt-{}", crate::util::random_hex()));
        let store = Store::open(&dir.join("s.db")).unwrap();
        store
            .connection
            .execute(
                "INSERT INTO sessions (id, cwd, created_at, updated_at, updated_order)
                 VALUES ('s', '/w', 'x', 'x', 1)",
                [],
            )
            .unwrap();
        (store, dir)
    }

    #[test]
    fn blobs_are_kept_once_and_changes_keep_the_first_before() {
        let (mut store, dir) = store();
        let a = store.put_blob("s", b"one").unwrap();
        assert_eq!(store.put_blob("s", b"one").unwrap(), a);
        let b = store.put_blob("s", b"two").unwrap();
        assert_ne!(a, b);
        assert_eq!(store.blob("s", &b).unwrap().unwrap(), b"two");
        store
            .record_change("s", 1, "/w/f", Some(&a), Some(&b), false)
            .unwrap();
        let c = store.put_blob("s", b"three").unwrap();
        store
            .record_change("s", 1, "/w/f", Some(&b), Some(&c), true)
            .unwrap();
        store
            .record_change("s", 1, "/w/new", None, Some(&a), false)
            .unwrap();
        let all = store.checkpoints("s").unwrap();
        assert_eq!(all.len(), 1);
        assert_eq!(all[0].state, CheckpointState::Applied);
        assert_eq!(all[0].files[0].before.as_deref(), Some(a.as_str()));
        assert_eq!(all[0].files[0].after.as_deref(), Some(c.as_str()));
        assert!(all[0].files[0].via_editor);
        assert_eq!(all[0].files[1].before, None);
        // Pruning by size drops the oldest turn and its blobs.
        store
            .record_change("s", 2, "/w/g", None, Some(&c), false)
            .unwrap();
        let removed = store.prune_checkpoints("s", 0, 5).unwrap();
        assert_eq!(removed, 1);
        let left = store.checkpoints("s").unwrap();
        assert_eq!(left.iter().map(|c| c.turn).collect::<Vec<_>>(), [2]);
        assert!(store.blob("s", &b).unwrap().is_none());
        assert!(store.blob("s", &c).unwrap().is_some());
        // A turn whose file ended as it began leaves no checkpoint.
        store
            .record_change("s", 3, "/w/h", Some(&c), Some(&c), false)
            .unwrap();
        store.drop_unchanged("s", 3).unwrap();
        assert_eq!(store.checkpoints("s").unwrap().len(), 1);
        // An open database cannot be removed on Windows.
        drop(store);
        std::fs::remove_dir_all(dir).unwrap();
    }
}

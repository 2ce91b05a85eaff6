//! Checkpoints: before a turn first changes a file, Spindle keeps what the
//! file held; around a command that may change anything, it scans the
//! workspace (the files git would see: tracked and untracked-not-ignored,
//! without `.git`) and keeps what changed. Contents go to the session
//! database (`store::checkpoints`), never into the user's git history or
//! index, so `/undo`, `/rewind` and `/redo` work in any folder, with or
//! without git, after a reload too.
//!
//! A scan reads a file only when its size or modification time changed
//! since the session's last scan (an in-memory cache per session), so the
//! first command of a session pays for reading the workspace once and the
//! later ones for what changed. Files larger than `max_file_bytes`, and
//! whatever passes `max_scan_bytes` in one scan, are not kept (they cannot
//! be restored; the undo says so).

use crate::store::Store;
use crate::tools::walk::{self, Control, EntryKind, WalkOptions};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// The limits and switches of checkpoints (config `checkpoints`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Settings {
    pub enabled: bool,
    /// Larger files are not kept.
    pub max_file_bytes: u64,
    /// The most new content one workspace scan reads.
    pub max_scan_bytes: u64,
    /// The most files one scan looks at.
    pub max_files: usize,
    /// Checkpoints older than this are pruned.
    pub max_age_days: u64,
    /// The most bytes of kept contents per session.
    pub max_bytes: u64,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            enabled: true,
            max_file_bytes: 8 * 1024 * 1024,
            max_scan_bytes: 256 * 1024 * 1024,
            max_files: 50_000,
            max_age_days: 7,
            max_bytes: 512 * 1024 * 1024,
        }
    }
}

/// Files per write transaction of a scan.
const BATCH: usize = 64;

/// What a file looked like at a scan.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Seen {
    size: u64,
    modified_ns: i128,
    /// Its content's key in the store; `None` when it was not kept.
    key: Option<String>,
}

/// What the session's last scan saw, kept between turns.
#[derive(Debug, Default)]
pub(crate) struct ScanCache {
    files: HashMap<PathBuf, Seen>,
}

/// The workspace as one scan saw it, and whether it saw all of it.
pub(crate) struct Scan {
    files: HashMap<PathBuf, Seen>,
    complete: bool,
}

/// A file tool's paths with their contents before it ran.
pub(crate) struct Pending {
    before: Vec<(PathBuf, Option<String>)>,
}

/// A file's content as a checkpoint sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Contents {
    /// No such file.
    Absent,
    Data(Vec<u8>),
    /// There is a file, but it is not kept (too large, unreadable).
    Unkept,
}

/// The key recorded for a file that existed but was not kept: an undo
/// never deletes it, and says it cannot restore it.
pub(crate) const UNKEPT: &str = "-";

/// How the turn reads a file for a checkpoint: through the editor for the
/// text it shows (unsaved changes count), else from disk.
pub(crate) type Reader<'a> = &'a dyn Fn(&Path) -> Contents;

/// One turn's checkpoint in the making.
pub(crate) struct Checkpoints {
    store: Store,
    session: String,
    turn: i64,
    cache: Arc<Mutex<ScanCache>>,
    settings: Settings,
    started: bool,
}

fn stat(path: &Path) -> Option<(u64, i128)> {
    let meta = std::fs::symlink_metadata(path).ok()?;
    if !meta.is_file() {
        return None;
    }
    let modified = meta
        .modified()
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map_or(0, |d| d.as_nanos() as i128);
    Some((meta.len(), modified))
}

/// Reads a regular file from disk (no symlinks followed), up to `cap`.
pub(crate) fn read_disk(path: &Path, cap: u64) -> Contents {
    let Ok(meta) = std::fs::symlink_metadata(path) else {
        return Contents::Absent;
    };
    if !meta.is_file() || meta.len() > cap {
        return Contents::Unkept;
    }
    // The look above follows nothing; the open must not either (a link or
    // a FIFO swapped in meanwhile), nor block, nor read past the cap.
    match crate::tools::bounded::read_capped_here(path, cap) {
        Ok(data) => Contents::Data(data),
        Err(_) => Contents::Unkept,
    }
}

impl Checkpoints {
    /// The checkpoint of `turn`, in the database at `db`; `None` when
    /// checkpoints are off or the database cannot be opened.
    pub(crate) fn open(
        db: &Path,
        session: &str,
        turn: i64,
        cache: Arc<Mutex<ScanCache>>,
        settings: Settings,
    ) -> Option<Checkpoints> {
        if !settings.enabled {
            return None;
        }
        match Store::open(db) {
            Ok(store) => Some(Checkpoints {
                store,
                session: session.to_string(),
                turn,
                cache,
                settings,
                started: false,
            }),
            Err(error) => {
                log::warn!("checkpoints of session {session} are off: {error}");
                None
            }
        }
    }

    /// A change after undos: the undone turns cannot be redone any more.
    fn start(&mut self) {
        if !self.started {
            self.started = true;
            if let Err(error) = self.store.forget_undone(&self.session) {
                log::warn!("cannot forget undone checkpoints: {error}");
            }
        }
    }

    /// The key of a content: `None` for an absent file, [`UNKEPT`] for
    /// one that exists but is not kept.
    fn keep(&self, contents: Contents) -> Option<String> {
        let data = match contents {
            Contents::Absent => return None,
            Contents::Unkept => return Some(UNKEPT.into()),
            Contents::Data(data) => data,
        };
        if data.len() as u64 > self.settings.max_file_bytes {
            return Some(UNKEPT.into());
        }
        match self.store.put_blob(&self.session, &data) {
            Ok(key) => Some(key),
            Err(error) => {
                log::warn!("cannot keep a checkpoint: {error}");
                Some(UNKEPT.into())
            }
        }
    }

    /// Before a file tool changes `paths`: their contents now.
    pub(crate) fn before_files(&mut self, paths: &[PathBuf], read: Reader<'_>) -> Pending {
        self.start();
        let before = paths
            .iter()
            .map(|path| (path.clone(), self.keep(read(path))))
            .collect();
        Pending { before }
    }

    /// After the file tool ran: records each path's change.
    pub(crate) fn after_files(&mut self, pending: Pending, read: Reader<'_>, via_editor: bool) {
        for (path, before) in pending.before {
            let after = self.keep(read(&path));
            self.record(&path, before.as_deref(), after.as_deref(), via_editor);
            // The next scan must look at this file again.
            if let Ok(mut cache) = self.cache.lock() {
                cache.files.remove(&path);
            }
        }
    }

    fn record(&self, path: &Path, before: Option<&str>, after: Option<&str>, via_editor: bool) {
        let path = path.display().to_string();
        if let Err(error) =
            self.store
                .record_change(&self.session, self.turn, &path, before, after, via_editor)
        {
            log::warn!("cannot record a checkpoint of {path}: {error}");
        }
    }

    /// Scans the workspace before a command that may change it, keeping
    /// the contents of files not seen unchanged before.
    pub(crate) fn before_command(
        &mut self,
        root: &Path,
        cancelled: &dyn Fn() -> bool,
    ) -> Option<Scan> {
        self.start();
        let cache = self.cache.clone();
        let mut cache = cache.lock().ok()?;
        let mut files = HashMap::new();
        let mut budget = self.settings.max_scan_bytes;
        // Writes are committed in small batches: other sessions share the
        // database and must not wait for a whole scan.
        let mut written = 0usize;
        let _ = self.store.begin_batch();
        let complete = self.walk(root, cancelled, &mut |path, size, modified| {
            written += 1;
            if written.is_multiple_of(BATCH) {
                let _ = self.store.end_batch();
                let _ = self.store.begin_batch();
            }
            let known = cache
                .files
                .get(path)
                .filter(|seen| {
                    seen.size == size && seen.modified_ns == modified && seen.key.is_some()
                })
                .cloned();
            let seen = match known {
                Some(seen) => seen,
                None => {
                    // Not kept (over a cap): `None` here, recorded as unkept.
                    let key = if size <= budget {
                        budget -= size;
                        self.keep(read_disk(path, self.settings.max_file_bytes))
                            .filter(|key| key != UNKEPT)
                    } else {
                        None
                    };
                    Seen {
                        size,
                        modified_ns: modified,
                        key,
                    }
                }
            };
            cache.files.insert(path.to_path_buf(), seen.clone());
            files.insert(path.to_path_buf(), seen);
        });
        let _ = self.store.end_batch();
        Some(Scan { files, complete })
    }

    /// Scans again after the command and records what it changed.
    pub(crate) fn after_command(
        &mut self,
        root: &Path,
        before: Scan,
        cancelled: &dyn Fn() -> bool,
    ) {
        let cache = self.cache.clone();
        let Ok(mut cache) = cache.lock() else { return };
        let mut now: HashMap<PathBuf, (u64, i128)> = HashMap::new();
        let complete = self.walk(root, cancelled, &mut |path, size, modified| {
            now.insert(path.to_path_buf(), (size, modified));
        });
        let _ = self.store.begin_batch();
        for (path, &(size, modified)) in &now {
            let old = before.files.get(path);
            if old.is_some_and(|seen| seen.size == size && seen.modified_ns == modified) {
                continue;
            }
            // A file the first scan did not reach may have been there all
            // along: only a complete scan says a file is new.
            if old.is_none() && !before.complete {
                continue;
            }
            let after = self.keep(read_disk(path, self.settings.max_file_bytes));
            let before_key = old.map(|seen| seen.key.clone().unwrap_or_else(|| UNKEPT.into()));
            if before_key.as_deref() == Some(UNKEPT) {
                log::info!("{} changed but was too large to keep", path.display());
            }
            if before_key != after || old.is_none() {
                self.record(path, before_key.as_deref(), after.as_deref(), false);
            }
            cache.files.insert(
                path.clone(),
                Seen {
                    size,
                    modified_ns: modified,
                    key: after,
                },
            );
        }
        // Only a complete second scan says a file is gone.
        for (path, seen) in before.files.iter().filter(|_| complete) {
            if !now.contains_key(path) {
                let key = seen.key.clone().unwrap_or_else(|| UNKEPT.into());
                self.record(path, Some(&key), None, false);
                cache.files.remove(path);
            }
        }
        let _ = self.store.end_batch();
    }

    /// Visits the workspace's files; false when it stopped before the end
    /// (the file limit, a cancel, an unreadable root).
    fn walk(
        &self,
        root: &Path,
        cancelled: &dyn Fn() -> bool,
        visit: &mut dyn FnMut(&Path, u64, i128),
    ) -> bool {
        let mut count = 0usize;
        let options = WalkOptions {
            max_depth: None,
            cancelled: Some(cancelled),
        };
        let limit = self.settings.max_files;
        let result = walk::walk(root, root, &options, &mut |entry| {
            if entry.kind != EntryKind::File {
                return Control::Continue;
            }
            count += 1;
            if count > limit {
                return Control::Stop;
            }
            if let Some((size, modified)) = stat(entry.path) {
                visit(entry.path, size, modified);
            }
            Control::Continue
        });
        let finished = match result {
            Ok(walk::WalkEnd::Finished) => true,
            Ok(_) => false,
            Err(error) => {
                log::warn!("cannot scan {} for a checkpoint: {error}", root.display());
                false
            }
        };
        if count > limit {
            log::warn!(
                "the workspace has more than {limit} files; the checkpoint covers the first ones"
            );
        }
        finished && count <= limit
    }

    /// At the end of the turn: forgets files that ended as they began and
    /// prunes old checkpoints.
    pub(crate) fn finish(mut self) {
        if let Err(error) = self.store.drop_unchanged(&self.session, self.turn) {
            log::warn!("cannot tidy the checkpoint: {error}");
        }
        let age_ms = self.settings.max_age_days.saturating_mul(86_400_000) as i64;
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as i64);
        match self
            .store
            .prune_checkpoints(&self.session, now - age_ms, self.settings.max_bytes)
        {
            Ok(0) => {}
            Ok(n) => log::info!("pruned {n} old checkpoints of session {}", self.session),
            Err(error) => log::warn!("cannot prune checkpoints: {error}"),
        }
    }
}

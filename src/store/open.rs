//! Opening the database: safe when several processes open (and create,
//! and migrate) the same file at once — two editor windows started
//! together — and never waiting without end.
//!
//! The order matters. The busy timeout is set before anything takes a
//! lock. The schema version is read before anything is written, so a
//! newer database is refused untouched. `PRAGMA journal_mode=WAL` takes a
//! read lock and then upgrades it; SQLite does not wait for a lock it
//! cannot get while holding another (that could deadlock), so it can fail
//! at once when another process does the same: it is tried again, with
//! pauses, until the wait runs out. The schema is created and migrated in
//! one `BEGIN IMMEDIATE` transaction that reads the version again inside
//! it, so whoever comes second finds the work done.
//!
//! The file is private: a new folder is made for this user alone (0700 on
//! Unix, an access list on Windows), and the file, new or old, loses any
//! access others had before anything is written to it (SQLite makes its
//! `-wal` and `-shm` files with the database's mode). A file that belongs
//! to another user is refused: its owner could read the sessions. No
//! descriptor of these files is ever opened outside SQLite: on Unix,
//! closing one drops the locks SQLite's connections in this process hold.

use super::{Result, Store, StoreError, StoreErrorKind, MIGRATIONS, SCHEMA_VERSION};
use rusqlite::{Connection, OpenFlags, TransactionBehavior};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Turns off SQLite's up-front page cache block, once, before the first
/// connection is opened (SQLite takes this setting only before it starts).
/// By default each connection allocates, and writes through, room for 20
/// pages (about 87 KB) as soon as it reads its first page; Spindle opens
/// one connection per thread that writes, and a session's reads touch few
/// pages, so each page is now allocated when it is first needed instead.
/// The cache's size limit is unchanged. Measured on one scripted turn (3
/// connections): peak RSS 0.27 MiB lower, `session/load` of 10,000
/// updates no slower.
fn lean_page_cache() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        // SAFETY: SQLITE_CONFIG_PAGECACHE takes a pointer and two ints;
        // a null buffer with 0 and 0 asks for no bulk allocation. It is
        // called before any connection exists in this process (a later
        // call would be refused with SQLITE_MISUSE, and is harmless).
        let code = unsafe {
            rusqlite::ffi::sqlite3_config(
                rusqlite::ffi::SQLITE_CONFIG_PAGECACHE,
                std::ptr::null_mut::<std::ffi::c_void>(),
                0 as std::ffi::c_int,
                0 as std::ffi::c_int,
            )
        };
        if code != rusqlite::ffi::SQLITE_OK {
            log::debug!("SQLite kept its page cache block (code {code})");
        }
    });
}

/// How long opening waits, in all, for locks other processes hold.
pub(super) const WAIT: Duration = Duration::from_secs(10);

/// The longest pause between two tries of switching to WAL mode.
const MOST_PAUSE: Duration = Duration::from_millis(200);

impl Store {
    /// Opens (creating when missing) the database at `path` and brings its
    /// schema up to date. Another process may be doing the same at the
    /// same moment; a lock held longer than [`WAIT`] is an error that names
    /// the file.
    pub fn open(path: &Path) -> Result<Store> {
        Store::open_waiting(path, WAIT)
    }

    /// [`Store::open`], waiting at most `wait` for other processes' locks.
    pub(super) fn open_waiting(path: &Path, wait: Duration) -> Result<Store> {
        lean_page_cache();
        prepare_file(path)?;
        // No URI flag: a path that starts with `file:` is a file's name.
        let flags = OpenFlags::SQLITE_OPEN_READ_WRITE
            | OpenFlags::SQLITE_OPEN_CREATE
            | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        let connection = Connection::open_with_flags(path, flags).map_err(|err| {
            StoreError::sqlite(
                format!("cannot open the session database {}: {err}", path.display()),
                &err,
            )
        })?;
        // Before anything that takes a lock.
        connection
            .busy_timeout(wait)
            .map_err(|err| StoreError::sqlite(format!("{}: {err}", path.display()), &err))?;
        let mut store = Store {
            connection,
            path: path.to_path_buf(),
        };
        // The version is checked before anything is written: a newer
        // database is refused untouched (not even its journal mode changes).
        store.check_version(wait)?;
        // Before anything is written to it (a new file is empty so far).
        make_private(path);
        store.configure(wait)?;
        store.migrate(wait)?;
        Ok(store)
    }

    fn configure(&self, wait: Duration) -> Result<()> {
        let mode = self.enter_wal(wait)?;
        if !mode.eq_ignore_ascii_case("wal") {
            log::warn!("the session database stays in {mode} journal mode");
        }
        self.connection
            .execute_batch("PRAGMA foreign_keys=ON; PRAGMA synchronous=NORMAL;")
            .map_err(|err| self.context("cannot set up the connection", err))
    }

    /// `PRAGMA journal_mode=WAL`, tried again while another process holds
    /// the lock it needs, until `wait` has passed. Each try waits for a
    /// lock no longer than the time left. Returns the mode the database
    /// is in.
    fn enter_wal(&self, wait: Duration) -> Result<String> {
        let deadline = Instant::now() + wait;
        let mut pause = Duration::from_millis(2);
        let result = loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let tried = self.connection.busy_timeout(left).and_then(|()| {
                self.connection
                    .query_row("PRAGMA journal_mode=WAL", [], |row| row.get::<_, String>(0))
            });
            match tried {
                Err(err) if is_busy(&err) && left > pause => {
                    std::thread::sleep(pause);
                    pause = (pause * 2).min(MOST_PAUSE);
                }
                other => break other,
            }
        };
        self.connection
            .busy_timeout(wait)
            .map_err(|err| self.context("cannot set the busy timeout", err))?;
        result.map_err(|err| lock_or(&self.path, wait, "switch it to WAL mode", err))
    }

    /// The schema version, read (under the busy timeout) before anything
    /// is written; a database of a newer schema is refused.
    fn check_version(&self, wait: Duration) -> Result<i64> {
        let version: i64 = self
            .connection
            .query_row("PRAGMA user_version", [], |row| row.get(0))
            .map_err(|err| {
                if is_busy(&err) {
                    return busy(&self.path, wait, "read its schema version", &err);
                }
                self.context(
                    "cannot read the database schema version (is it a SQLite database?)",
                    err,
                )
            })?;
        refuse_newer(&self.path, version)?;
        Ok(version)
    }

    /// Brings the schema up to date in one `BEGIN IMMEDIATE` transaction
    /// (the write lock first, waited for under the busy timeout), reading
    /// the version again inside it: processes starting together on a new
    /// database migrate one after the other, and the later ones find
    /// nothing left to do.
    fn migrate(&mut self, wait: Duration) -> Result<()> {
        if self.check_version(wait)? >= SCHEMA_VERSION {
            return Ok(());
        }
        let path = self.path.clone();
        let failed = |what: &str, err: rusqlite::Error| lock_or(&path, wait, what, err);
        let transaction = self
            .connection
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(|err| failed("bring its schema up to date", err))?;
        let version: i64 = transaction
            .query_row("PRAGMA user_version", [], |row| row.get(0))
            .map_err(|err| failed("read its schema version", err))?;
        // Dropping the transaction rolls it back.
        refuse_newer(&path, version)?;
        let done = usize::try_from(version).unwrap_or(0);
        for (index, migration) in MIGRATIONS.iter().enumerate().skip(done) {
            transaction
                .execute_batch(migration)
                .map_err(|err| failed(&format!("migrate it to schema {}", index + 1), err))?;
        }
        transaction
            .execute_batch(&format!("PRAGMA user_version = {SCHEMA_VERSION}"))
            .and_then(|()| transaction.commit())
            .map_err(|err| failed("bring its schema up to date", err))
    }

    fn context(&self, what: &str, err: rusqlite::Error) -> StoreError {
        StoreError::sqlite(format!("{what} ({}): {err}", self.path.display()), &err)
    }
}

/// The newer-schema refusal, when `version` is above [`SCHEMA_VERSION`].
fn refuse_newer(path: &Path, version: i64) -> Result<()> {
    if version <= SCHEMA_VERSION {
        return Ok(());
    }
    Err(StoreError::new(StoreErrorKind::Newer, format!(
        "the session database {} was written by a newer Spindle (schema version {version}; this Spindle knows up to {SCHEMA_VERSION}). Upgrade Spindle, or use another database with --db; the file was not changed.",
        path.display()
    )))
}

fn is_busy(err: &rusqlite::Error) -> bool {
    matches!(
        err.sqlite_error_code(),
        Some(rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked)
    )
}

/// `err` of `what` on the database at `path`, as [`busy`] when another
/// process held the lock too long.
fn lock_or(path: &Path, wait: Duration, what: &str, err: rusqlite::Error) -> StoreError {
    if is_busy(&err) {
        return busy(path, wait, what, &err);
    }
    StoreError::sqlite(
        format!(
            "the session database {}: cannot {what} ({err})",
            path.display()
        ),
        &err,
    )
}

/// The error when the wait for another process's lock ran out: which
/// file, how long, and what to do.
fn busy(path: &Path, wait: Duration, what: &str, err: &rusqlite::Error) -> StoreError {
    StoreError::sqlite(
        format!(
            "the session database {} stayed locked by another process for more than {:.1} s, so Spindle could not {what} ({err}). Try again in a moment; if it keeps happening, look for a Spindle (or another program) stuck on that file, or use another database with --db.",
            path.display(),
            wait.as_secs_f64()
        ),
        err,
    )
}

/// Makes the database's folder, private, when it is missing (several
/// processes may make it at once). An existing file that is no regular
/// file or belongs to another user is refused. The file itself is left to
/// SQLite to create: creating it here would open a descriptor of it, and
/// closing that drops the locks another connection of this process may
/// have just taken on it (see [`make_private`], which makes it private
/// before anything is written to it).
fn prepare_file(path: &Path) -> Result<()> {
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        crate::os::create_private_dir_all(parent).map_err(|err| {
            StoreError::new(
                StoreErrorKind::Io,
                format!(
                    "cannot create the directory {} for the session database: {err}",
                    parent.display()
                ),
            )
        })?;
    }
    // SQLite reads a FIFO or a device as a broken disk: say what it is.
    if let Some(kind) = crate::os::reading::special_kind(path) {
        return Err(StoreError::new(
            StoreErrorKind::Io,
            format!(
                "cannot open the session database: {} is {kind}, not a regular file",
                path.display()
            ),
        ));
    }
    let meta = match std::fs::metadata(path) {
        Ok(meta) => meta,
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(err) => {
            return Err(StoreError::new(
                StoreErrorKind::Io,
                format!("cannot read the session database {}: {err}", path.display()),
            ))
        }
    };
    if !meta.is_file() {
        return Err(StoreError::new(
            StoreErrorKind::Io,
            format!(
                "the session database {} is not a regular file; name a database file with --db",
                path.display()
            ),
        ));
    }
    if !crate::os::owned_by_me(&meta) {
        return Err(StoreError::new(
            StoreErrorKind::Io,
            format!(
                "the session database {} belongs to another user, who could read your sessions; use a database of your own with --db",
                path.display()
            ),
        ));
    }
    Ok(())
}

/// Takes the access other users have away from the database and its
/// companion files (`-wal`, `-shm`) when they have any: a database made
/// by an older Spindle, or by hand. By name, never opening the files: on
/// Unix, closing any descriptor of a file drops every lock this process
/// holds on it, which SQLite's other connections here rely on (the
/// shared-memory file unlocked could be cut short under them). A failure
/// is logged: the database is still usable.
fn make_private(path: &Path) {
    let companion = |suffix: &str| {
        let mut name = path.as_os_str().to_owned();
        name.push(suffix);
        PathBuf::from(name)
    };
    for (file, follow) in [
        (path.to_path_buf(), true),
        (companion("-wal"), false),
        (companion("-shm"), false),
    ] {
        let meta = if follow {
            std::fs::metadata(&file)
        } else {
            std::fs::symlink_metadata(&file)
        };
        let meta = match meta {
            Ok(meta) => meta,
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => continue,
            Err(err) => {
                log::warn!("cannot check the access to {}: {err}", file.display());
                continue;
            }
        };
        if !meta.is_file() || !crate::os::owned_by_me(&meta) {
            continue;
        }
        if let Err(err) = crate::os::make_private_at(&file, &meta) {
            log::warn!("cannot make {} private: {err}", file.display());
        }
    }
}

//! The database file itself: one from a newer Spindle (also in
//! rollback-journal mode) or one that is not a database is refused and
//! left alone, one that could not be opened is tried again, `doctor` on
//! one another process keeps locked, and where the database lives without
//! `--db`.

use super::{err, finish, message, prompt_ok, Space};
use crate::support::store::Db;
use crate::support::{Agent, FakeServer};
use serde_json::json;
use std::fs;

// ---------------------------------------------------------------------------
// A database written by a newer Spindle.

/// Makes a database with one session through `spindle`, then lets `alter`
/// change it with rusqlite. Returns the session id.
fn made_database(space: &Space, db: &Db, alter: &str) -> String {
    let mut agent = space.scripted_on(db, &json!({"fallback": {"text": "Hi."}}));
    let session = agent.new_session(&space.ws);
    prompt_ok(&mut agent, &session, "hello");
    finish(agent);
    db.connect()
        .execute_batch(alter)
        .unwrap_or_else(|e| panic!("cannot alter the database: {e}"));
    session
}

/// Every session request fails with a message naming the newer Spindle;
/// the agent keeps answering, and the file is left byte for byte.
fn assert_refused_untouched(space: &Space, db: &Db, session: &str) {
    let before = fs::read(db.path()).expect("cannot read the database");
    let mut agent = space.scripted_on(db, &json!({"replies": []}));
    let requests = [
        ("session/new", json!({"cwd": space.ws(), "mcpServers": []})),
        ("session/list", json!({})),
        (
            "session/load",
            json!({"sessionId": session, "cwd": space.ws(), "mcpServers": []}),
        ),
        (
            "session/resume",
            json!({"sessionId": session, "cwd": space.ws()}),
        ),
        ("session/delete", json!({"sessionId": session})),
        ("session/new", json!({"cwd": space.ws(), "mcpServers": []})),
    ];
    for (method, params) in requests {
        let error = err(&mut agent, method, params);
        assert!(
            message(&error).contains("newer Spindle"),
            "{method}: {error}"
        );
    }
    // Still alive and answering.
    agent.initialize();
    finish(agent);
    assert!(
        fs::read(db.path()).expect("cannot read the database") == before,
        "the database file was changed"
    );
}

#[test]
fn a_database_from_a_newer_spindle_is_refused_and_left_alone() {
    let space = Space::new("newer");
    let db = Db::new(space.base.join("newer.db"));
    let session = made_database(&space, &db, "PRAGMA user_version = 99");
    assert_eq!(db.user_version(), 99);
    assert_refused_untouched(&space, &db, &session);
    assert_eq!(db.user_version(), 99);
    assert_eq!(db.integrity_check(), "ok");
}

/// The same with a database in rollback-journal mode (a newer Spindle, or
/// another tool, may well use it): refusing it must not switch it to WAL
/// first.
#[test]
fn a_newer_database_in_rollback_journal_mode_is_left_alone_too() {
    let space = Space::new("newer-journal");
    let db = Db::new(space.base.join("newer.db"));
    let session = made_database(
        &space,
        &db,
        "PRAGMA journal_mode = DELETE; PRAGMA user_version = 99;",
    );
    let mode: String = db
        .connect()
        .query_row("PRAGMA journal_mode", [], |row| row.get(0))
        .expect("cannot read journal_mode");
    assert_eq!(mode, "delete");
    assert_refused_untouched(&space, &db, &session);
}

#[test]
fn a_file_that_is_not_a_database_is_reported_and_left_alone() {
    let space = Space::new("not-db");
    let db = Db::new(space.base.join("notes.db"));
    let junk = "These are my notes, not a database.\n".repeat(200);
    fs::write(db.path(), &junk).expect("cannot write");
    let mut agent = space.scripted_on(&db, &json!({"replies": []}));
    for _ in 0..2 {
        let error = err(
            &mut agent,
            "session/new",
            json!({"cwd": space.ws(), "mcpServers": []}),
        );
        assert!(message(&error).contains(&db.arg()), "{error}");
    }
    finish(agent);
    assert_eq!(fs::read_to_string(db.path()).unwrap(), junk);
}

/// A database that cannot be opened for a while (here its folder cannot
/// be made: a file is in the way) fails the requests with the path named,
/// and the agent tries again on the next one: once the way is clear, the
/// same agent opens it. Before, the first failure was kept, and every
/// session request failed until the agent was restarted.
#[test]
fn a_database_that_could_not_be_opened_is_tried_again() {
    let space = Space::new("retry-open");
    let blocker = space.base.join("blocked");
    fs::write(&blocker, "a file where the folder goes").expect("cannot write");
    let db = Db::new(blocker.join("spindle.db"));
    let mut agent = space.scripted_on(&db, &json!({"replies": []}));
    let new = json!({"cwd": space.ws(), "mcpServers": []});
    let error = err(&mut agent, "session/new", new.clone());
    assert_eq!(error["data"]["code"], "store_unavailable", "{error}");
    assert!(
        message(&error).contains(&blocker.display().to_string()),
        "{error}"
    );
    fs::remove_file(&blocker).expect("cannot remove the blocker");
    let session = agent.new_session(&space.ws);
    finish(agent);
    assert_eq!(db.session_ids(), [session]);
}

/// `spindle doctor` on a database another process keeps locked (in
/// rollback-journal mode, where a writer keeps readers out) waits a
/// moment, then says it is locked and was not checked: not that it cannot
/// be read or is no Spindle database.
#[test]
fn doctor_says_a_locked_database_is_locked_not_broken() {
    let space = Space::new("doctor-busy");
    let mut agent = space.reader();
    agent.new_session(&space.ws);
    finish(agent);
    let holder = space.db.connect();
    let mode: String = holder
        .query_row("PRAGMA journal_mode=DELETE", [], |row| row.get(0))
        .expect("cannot leave WAL mode");
    assert_eq!(mode, "delete");
    holder
        .execute_batch("BEGIN EXCLUSIVE")
        .expect("cannot lock the database");
    let mut command = crate::support::spindle_command(&space.base.join("doctor-home"));
    let out = command
        .current_dir(&space.ws)
        .arg("doctor")
        .arg("--db")
        .arg(space.db.path())
        .output()
        .expect("cannot run doctor");
    holder.execute_batch("COMMIT").expect("cannot unlock");
    let report = String::from_utf8_lossy(&out.stdout);
    let line = report
        .lines()
        .find(|line| line.contains("database:"))
        .unwrap_or_default();
    assert!(
        line.contains("stayed locked by another process"),
        "{report}"
    );
    assert!(line.contains(&space.db.arg()), "{report}");
    assert!(!report.contains("integrity check"), "{report}");
    assert!(!report.contains("cannot be read"), "{report}");
}

// ---------------------------------------------------------------------------
// Where the database lives without --db.

#[test]
#[cfg_attr(windows, ignore = "TMPDIR is Unix's (Windows reads TMP and TEMP)")]
fn without_db_scripted_runs_use_a_temporary_database_and_others_spindle_home() {
    let space = Space::new("default-db");
    let script = space.script(&json!({"fallback": {"text": "Hi."}}));
    let tmp = space.tmpdir();
    let mut agent = Agent::spawn(&["acp", "--script", &script], &[("TMPDIR", &tmp)]);
    agent.initialize();
    let session = agent.new_session(&space.ws);
    prompt_ok(&mut agent, &session, "hello");
    let home = agent.home().to_path_buf();
    let temporary: Vec<String> = fs::read_dir(&tmp)
        .expect("cannot read TMPDIR")
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|name| name.starts_with("spindle-scripted"))
        .collect();
    assert!(!temporary.is_empty(), "no temporary database in TMPDIR");
    finish(agent);
    assert!(!home.join("spindle.db").exists());
    let left: Vec<String> = fs::read_dir(&tmp)
        .expect("cannot read TMPDIR")
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|name| name.starts_with("spindle-scripted"))
        .collect();
    assert!(left.is_empty(), "the temporary database was left: {left:?}");

    // A model-backed agent uses $SPINDLE_HOME/spindle.db.
    let server = FakeServer::start();
    let base = server.base_url();
    let mut agent = Agent::spawn(
        &["acp", "--model", "test-model"],
        &[("OPENAI_BASE_URL", &base), ("OPENAI_API_KEY", "sk-test")],
    );
    agent.initialize();
    let session = agent.new_session(&space.ws);
    let db = Db::new(agent.home().join("spindle.db"));
    assert!(db.path().exists(), "no database in SPINDLE_HOME");
    assert_eq!(db.session_ids(), vec![session]);
    finish(agent);
}

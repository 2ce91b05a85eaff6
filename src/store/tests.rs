//! Tests of the session store against real database files.

use super::*;
use serde_json::json;
use std::time::Duration;

fn temp_db() -> PathBuf {
    std::env::temp_dir()
        .join(format!("spindle-store-{}", crate::util::random_hex()))
        .join("nested/spindle.db")
}

#[test]
fn sessions_turns_and_order() {
    let path = temp_db();
    let mut store = Store::open(&path).unwrap();
    store
        .create_session("a", "/w", &json!({"policy": "ask"}), &json!([]))
        .unwrap();
    store
        .create_session("b", "/v", &json!({}), &json!([]))
        .unwrap();
    let turn = store
        .begin_turn(
            "a",
            &["{\"sessionUpdate\":\"user_message_chunk\"}".into()],
            &[Message::user("hi")],
        )
        .unwrap();
    assert_eq!(turn, 1);
    store
        .end_turn(
            "a",
            turn,
            &["{}".into()],
            &[Message::assistant("hello", "")],
            Some("end_turn"),
            None,
            &json!({}),
        )
        .unwrap();
    let listed: Vec<String> = store
        .list_sessions(None, None, 10, true)
        .unwrap()
        .into_iter()
        .map(|s| s.id)
        .collect();
    assert_eq!(listed, ["a", "b"]);
    let only_v = store.list_sessions(Some("/v"), None, 10, true).unwrap();
    assert_eq!(only_v.len(), 1);
    let first = store.list_sessions(None, None, 1, true).unwrap();
    let next = store
        .list_sessions(None, Some(first[0].updated_order), 1, true)
        .unwrap();
    assert_eq!(next[0].id, "b");
    assert_eq!(store.events("a").unwrap().len(), 2);
    assert_eq!(store.messages("a").unwrap()[1].text, "hello");
    assert!(store.running_turns("a").unwrap().is_empty());
    assert!(store.delete_session("a").unwrap());
    assert!(store.events("a").unwrap().is_empty());
    assert_eq!(store.integrity_check().unwrap(), "ok");
}

#[test]
fn version_one_databases_are_migrated() {
    let path = temp_db();
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    let connection = Connection::open(&path).unwrap();
    connection.execute_batch(MIGRATIONS[0]).unwrap();
    connection.execute_batch("PRAGMA user_version = 1").unwrap();
    connection
        .execute(
            "INSERT INTO sessions (id, cwd, created_at, updated_at, updated_order) VALUES ('old', '/w', 't', 't', 1)",
            [],
        )
        .unwrap();
    drop(connection);
    let store = Store::open(&path).unwrap();
    assert!(store.session("old").unwrap().is_some());
    store
        .save_workspace_defaults("/w", &json!({"model": "m"}))
        .unwrap();
    assert_eq!(
        store.workspace_defaults("/w").unwrap(),
        Some(json!({"model": "m"}))
    );
    let version: i64 = store
        .connection
        .query_row("PRAGMA user_version", [], |row| row.get(0))
        .unwrap();
    assert_eq!(version, SCHEMA_VERSION);
}

#[test]
fn newer_schemas_are_refused_untouched() {
    let path = temp_db();
    drop(Store::open(&path).unwrap());
    let connection = Connection::open(&path).unwrap();
    connection
        .execute_batch("PRAGMA user_version = 99")
        .unwrap();
    drop(connection);
    let before = std::fs::read(&path).unwrap();
    let error = Store::open(&path).err().unwrap();
    assert_eq!(error.kind(), StoreErrorKind::Newer, "{error}");
    assert!(error.to_string().contains("newer Spindle"), "{error}");
    assert_eq!(std::fs::read(&path).unwrap(), before);
}

#[test]
fn leases_belong_to_live_processes() {
    let path = temp_db();
    let mut store = Store::open(&path).unwrap();
    store
        .create_session("s", "/w", &json!({}), &json!([]))
        .unwrap();
    let me = std::process::id();
    assert_eq!(store.acquire_lease("s", me).unwrap(), Ok(()));
    // A live process's lease is respected, and taken over once it died.
    let mut holder = if cfg!(windows) {
        std::process::Command::new("ping")
            .args(["-n", "60", "127.0.0.1"])
            .stdout(std::process::Stdio::null())
            .spawn()
    } else {
        std::process::Command::new("sleep").arg("60").spawn()
    }
    .unwrap();
    let pid = holder.id();
    store
        .connection
        .execute("UPDATE sessions SET lease_pid = ?1 WHERE id = 's'", [pid])
        .unwrap();
    assert_eq!(store.acquire_lease("s", me).unwrap(), Err(i64::from(pid)));
    holder.kill().unwrap();
    holder.wait().unwrap();
    assert_eq!(store.acquire_lease("s", me).unwrap(), Ok(()));
    // A dead holder's lease is taken over.
    store
        .connection
        .execute(
            "UPDATE sessions SET lease_pid = 999999999 WHERE id = 's'",
            [],
        )
        .unwrap();
    assert_eq!(store.acquire_lease("s", me).unwrap(), Ok(()));
    store.release_lease("s", me).unwrap();
    assert_eq!(store.session("s").unwrap().unwrap().lease_pid, None);
}

#[test]
fn inbox_reorder_takes_exactly_the_pending_items() {
    let path = temp_db();
    let mut store = Store::open(&path).unwrap();
    store
        .create_session("a", "/w", &json!({}), &json!([]))
        .unwrap();
    let item = |id: &str| crate::store::inbox::Item {
        item_id: id.into(),
        intent: crate::store::inbox::Intent::Followup,
        state: crate::store::inbox::ItemState::Pending,
        prompt: json!({"blocks": []}),
        bytes: 0,
        idempotency_key: None,
        created_at: "x".into(),
        position: 0,
    };
    for id in ["i1", "i2", "i3"] {
        store.inbox_add("a", &item(id)).unwrap();
    }
    store
        .inbox_set_state("a", "i1", crate::store::inbox::ItemState::Applied)
        .unwrap();
    let order = |store: &Store| -> Vec<String> {
        let mut items = store.inbox("a").unwrap();
        items.retain(|i| i.state == crate::store::inbox::ItemState::Pending);
        items.sort_by_key(|i| i.position);
        items.into_iter().map(|i| i.item_id).collect()
    };
    let ids = |list: &[&str]| list.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    let positions = |store: &Store| -> Vec<(String, i64)> {
        let mut all: Vec<_> = store
            .inbox("a")
            .unwrap()
            .into_iter()
            .map(|i| (i.item_id, i.position))
            .collect();
        all.sort();
        all
    };
    let before = positions(&store);
    // A delivered item, a duplicate, a missing one: refused, nothing moved.
    for bad in [ids(&["i3", "i1"]), ids(&["i3", "i3"]), ids(&["i3"])] {
        assert!(store.inbox_reorder("a", &bad).is_err(), "{bad:?}");
        assert_eq!(positions(&store), before);
    }
    store.inbox_reorder("a", &ids(&["i3", "i2"])).unwrap();
    assert_eq!(order(&store), ids(&["i3", "i2"]));
}

#[test]
fn sessions_the_user_never_sent_anything_to_are_not_listed_nor_kept() {
    let path = temp_db();
    let mut store = Store::open(&path).unwrap();
    for id in ["empty", "prompted", "queued", "goal", "job", "settings"] {
        store
            .create_session(id, "/w", &json!({}), &json!([]))
            .unwrap();
    }
    store
        .begin_turn("prompted", &[], &[Message::user("hi")])
        .unwrap();
    let item = crate::store::inbox::Item {
        item_id: "i1".into(),
        intent: crate::store::inbox::Intent::Followup,
        state: crate::store::inbox::ItemState::Deleted,
        prompt: json!({"blocks": []}),
        bytes: 0,
        idempotency_key: None,
        created_at: "x".into(),
        position: 0,
    };
    store.inbox_add("queued", &item).unwrap();
    store.save_goal("goal", &json!({"objective": "x"})).unwrap();
    store.save_job("job", "j1", &json!({})).unwrap();
    // Settings and the transcript's updates outside turns do not count.
    store
        .save_settings("settings", &json!({"mode": "plan"}))
        .unwrap();
    store.append_events("settings", 0, &["{}".into()]).unwrap();
    let listed = |store: &Store, with_unused: bool| -> Vec<String> {
        store
            .list_sessions(None, None, 10, with_unused)
            .unwrap()
            .into_iter()
            .map(|s| s.id)
            .collect()
    };
    // A turn moves its session to the front.
    let used = ["prompted", "job", "goal", "queued"];
    assert_eq!(listed(&store, false), used);
    assert_eq!(listed(&store, true).len(), 6);
    // A page of one still steps over the hidden ones.
    let first = store.list_sessions(None, None, 1, false).unwrap();
    assert_eq!(first[0].id, "prompted");
    let next = store
        .list_sessions(None, Some(first[0].updated_order), 1, false)
        .unwrap();
    assert_eq!(next[0].id, "job");
    for id in ["prompted", "queued", "goal", "job"] {
        assert!(!store.delete_if_unused(id).unwrap(), "{id}");
    }
    assert!(store.delete_if_unused("empty").unwrap());
    assert!(store.delete_if_unused("settings").unwrap());
    assert!(!store.delete_if_unused("empty").unwrap());
    assert_eq!(listed(&store, true), used);
}

#[test]
fn inbox_words_read_back_as_written_and_others_are_refused() {
    use crate::store::inbox::{Intent, ItemState};
    let states = [
        ItemState::Pending,
        ItemState::Dispatched,
        ItemState::Applied,
        ItemState::Uncertain,
        ItemState::Failed,
        ItemState::Deleted,
    ];
    for state in states {
        assert_eq!(ItemState::parse(state.as_str()), Some(state));
    }
    for intent in [Intent::Steer, Intent::Followup] {
        assert_eq!(Intent::parse(intent.as_str()), Some(intent));
    }
    assert_eq!(ItemState::parse("Pending"), None);
    // A word the store never writes is an error, not a silent state.
    let path = temp_db();
    let mut store = Store::open(&path).unwrap();
    store
        .create_session("a", "/w", &json!({}), &json!([]))
        .unwrap();
    let item = crate::store::inbox::Item {
        item_id: "i1".into(),
        intent: Intent::Followup,
        state: ItemState::Pending,
        prompt: json!({"blocks": []}),
        bytes: 0,
        idempotency_key: None,
        created_at: "x".into(),
        position: 0,
    };
    store.inbox_add("a", &item).unwrap();
    assert_eq!(store.inbox("a").unwrap()[0].state, ItemState::Pending);
    store
        .connection
        .execute("UPDATE inbox SET state = 'bogus'", [])
        .unwrap();
    assert!(store.inbox("a").is_err());
}

/// Processes starting together on a new database (two editor windows
/// opened at once): every open succeeds, whichever of them creates the
/// file, switches it to WAL mode and creates the schema. Threads stand in
/// for the processes (each has its own connection, as a process would);
/// switching to WAL mode used to fail now and then, so many rounds.
#[test]
fn openers_racing_on_a_new_database_all_succeed() {
    const OPENERS: usize = 6;
    const ROUNDS: usize = 60;
    let mut failures = Vec::new();
    for round in 0..ROUNDS {
        let path = temp_db();
        let start = std::sync::Arc::new(std::sync::Barrier::new(OPENERS));
        let openers: Vec<_> = (0..OPENERS)
            .map(|opener| {
                let (path, start) = (path.clone(), start.clone());
                std::thread::spawn(move || {
                    start.wait();
                    let mut store = Store::open(&path)?;
                    store.create_session(&format!("s{opener}"), "/w", &json!({}), &json!([]))
                })
            })
            .collect();
        for (opener, joined) in openers.into_iter().enumerate() {
            if let Err(error) = joined.join().expect("an opener panicked") {
                failures.push(format!("round {round}, opener {opener}: {error}"));
            }
        }
        if failures.is_empty() {
            let store = Store::open(&path).unwrap();
            assert_eq!(
                store.list_sessions(None, None, 10, true).unwrap().len(),
                OPENERS
            );
            assert_eq!(store.integrity_check().unwrap(), "ok");
        }
        let _ = std::fs::remove_dir_all(path.parent().unwrap().parent().unwrap());
    }
    assert!(failures.is_empty(), "{failures:#?}");
}

/// A lock another process holds past the wait is an error that names the
/// file and says what to do; once it is released, the database opens.
#[test]
fn a_lock_held_past_the_wait_names_the_file_and_what_to_do() {
    let path = temp_db();
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    let holder = Connection::open(&path).unwrap();
    holder.execute_batch("BEGIN EXCLUSIVE").unwrap();
    let error = Store::open_waiting(&path, Duration::from_millis(300))
        .err()
        .expect("the open waited past the lock");
    assert_eq!(error.kind(), StoreErrorKind::Busy, "{error}");
    let message = error.to_string();
    assert!(message.contains(&path.display().to_string()), "{message}");
    assert!(message.contains("locked by another process"), "{message}");
    assert!(message.contains("--db"), "{message}");
    holder.execute_batch("COMMIT").unwrap();
    let store = Store::open_waiting(&path, Duration::from_millis(300)).unwrap();
    assert_eq!(store.integrity_check().unwrap(), "ok");
}

/// A new database and its new folder are the user's alone; an existing
/// one that others could read (from an older Spindle) is made private.
#[test]
#[cfg_attr(windows, ignore = "Unix file modes")]
fn the_database_is_private_new_or_old() {
    use crate::os::testing::{mode, set_mode};
    let path = temp_db();
    drop(Store::open(&path).unwrap());
    assert_eq!(mode(&path), 0o600);
    assert_eq!(mode(path.parent().unwrap()), 0o700);
    set_mode(&path, 0o644).unwrap();
    let wal = path.with_file_name("spindle.db-wal");
    std::fs::write(&wal, b"").unwrap();
    set_mode(&wal, 0o666).unwrap();
    let store = Store::open(&path).unwrap();
    assert_eq!(mode(&path), 0o600);
    assert_eq!(mode(&wal), 0o600);
    drop(store);
}

/// A database path that is a folder is refused with a message naming it.
#[test]
fn a_folder_at_the_database_path_is_refused_by_name() {
    let path = temp_db();
    std::fs::create_dir_all(&path).unwrap();
    let error = Store::open(&path).err().expect("a folder was opened");
    assert!(
        error.to_string().contains(&path.display().to_string()),
        "{error}"
    );
    assert!(error.to_string().contains("not a regular file"), "{error}");
}

#[test]
fn an_automatic_title_never_replaces_one_already_set() {
    let path = temp_db();
    let mut store = Store::open(&path).unwrap();
    store
        .create_session("s", "/w", &json!({}), &json!([]))
        .unwrap();
    assert!(!store.is_used("s").unwrap());
    store.set_title("s", "Chosen").unwrap();
    // A title alone does not make a session used: the automatic one is
    // set just before the first turn is recorded.
    assert!(!store.is_used("s").unwrap());
    // The client's title is kept in the transcript outside any turn too,
    // and that keeps the session, listed, before any prompt.
    let update = json!({"sessionUpdate": "session_info_update", "title": "Chosen"});
    store.append_events("s", 0, &[update.to_string()]).unwrap();
    assert!(store.is_used("s").unwrap());
    assert!(!store.set_title_if_unset("s", "Automatic").unwrap());
    assert_eq!(
        store.session("s").unwrap().unwrap().title.as_deref(),
        Some("Chosen")
    );
    store
        .create_session("t", "/w", &json!({}), &json!([]))
        .unwrap();
    assert!(store.set_title_if_unset("t", "Automatic").unwrap());
    // Another update outside a turn (a mode change) does not count.
    let mode = json!({"sessionUpdate": "current_mode_update", "currentModeId": "plan"});
    store.append_events("t", 0, &[mode.to_string()]).unwrap();
    assert!(!store.is_used("t").unwrap());
    assert_eq!(
        store.session("t").unwrap().unwrap().title.as_deref(),
        Some("Automatic")
    );
    assert!(!store.set_title_if_unset("missing", "x").unwrap());
}

//! `session/list`: pages newest first, cursors, the cwd filter, sessions
//! never used left out (and removed when closed), and sessions created by
//! two processes at once paging without gaps.

use super::{
    err, finish, ids_of, list_all, list_page, looks_like_rfc3339, ok, prompt_ok, resume,
    wait_answers, Space, INVALID_PARAMS, INVALID_REQUEST, NOT_FOUND,
};
use crate::support::Agent;
use serde_json::{json, Value};
use std::collections::HashSet;
use std::thread;

#[test]
fn list_pages_newest_first_with_cursors_and_filters_by_cwd() {
    let space = Space::new("list");
    let left = space.workspace("left");
    let right = space.workspace("right");
    let left_str = left.to_str().expect("UTF-8").to_string();
    let mut agent = space.scripted(&json!({"fallback": {"text": "Awake."}}));
    let mut created = Vec::new();
    // Sessions never prompted, between the used ones: single ones and
    // runs of five, on both sides of the page boundaries (after the 70th
    // and the 20th used session, newest first).
    let mut unused = Vec::new();
    for index in 0..120 {
        let cwd = if index % 2 == 0 { &left } else { &right };
        let session = agent.new_session(cwd);
        prompt_ok(&mut agent, &session, &format!("task {index}"));
        created.push(session);
        let extra = if index % 10 == 0 {
            5
        } else if index % 3 == 0 {
            1
        } else {
            0
        };
        for _ in 0..extra {
            unused.push(agent.new_session(cwd));
        }
    }

    let (all, sizes) = list_all(&mut agent, None);
    assert_eq!(sizes, [50, 50, 20]);
    let newest_first: Vec<String> = created.iter().rev().cloned().collect();
    assert_eq!(
        ids_of(&all),
        newest_first,
        "newest first, no gaps, no repeats, none never used"
    );
    for (index, entry) in all.iter().enumerate() {
        // Newest first: entry `index` is the one created
        // `created.len() - 1 - index`-th; the even ones went left.
        let created_index = created.len() - 1 - index;
        let cwd = if created_index % 2 == 0 {
            &left
        } else {
            &right
        };
        assert_eq!(entry["cwd"], cwd.to_str().unwrap(), "{entry}");
        assert!(
            looks_like_rfc3339(entry["updatedAt"].as_str().unwrap_or_default()),
            "{entry}"
        );
        assert_eq!(entry["title"], format!("task {created_index}"), "{entry}");
    }
    let stamps: Vec<&str> = all
        .iter()
        .map(|e| e["updatedAt"].as_str().unwrap_or_default())
        .collect();
    assert!(
        stamps.windows(2).all(|w| w[0] >= w[1]),
        "updatedAt must not increase down the list: {stamps:?}"
    );

    // Only one workspace.
    let (lefts, sizes) = list_all(&mut agent, Some(&left_str));
    assert_eq!(sizes, [50, 10]);
    let expected: Vec<String> = created.iter().step_by(2).rev().cloned().collect();
    assert_eq!(ids_of(&lefts), expected);
    let empty_ws = space.workspace("empty");
    let page = list_page(&mut agent, empty_ws.to_str(), None);
    assert_eq!(page, json!({"sessions": []}));

    // Bad cursors and a relative cwd.
    for cursor in ["", "garbage", "o0", "o-3", "o1x", "99", "o"] {
        let error = err(&mut agent, "session/list", json!({"cursor": cursor}));
        assert_eq!(error["code"], INVALID_PARAMS, "cursor {cursor:?}: {error}");
    }
    let error = err(&mut agent, "session/list", json!({"cwd": "relative/dir"}));
    assert_eq!(error["code"], INVALID_PARAMS, "{error}");

    // A prompt moves a session to the front; the first one lists it,
    // with its title.
    let oldest = created[0].clone();
    prompt_ok(&mut agent, &oldest, "wake up");
    let first = list_page(&mut agent, None, None);
    assert_eq!(first["sessions"][0]["sessionId"], oldest.as_str());
    assert_eq!(first["sessions"][0]["title"], "task 0");
    let late = unused.remove(7);
    prompt_ok(&mut agent, &late, "wake up");
    let first = list_page(&mut agent, None, None);
    assert_eq!(first["sessions"][0]["sessionId"], late.as_str());
    assert_eq!(first["sessions"][0]["title"], "wake up");
    assert_eq!(first["sessions"][1]["sessionId"], oldest.as_str());

    // Another process sees the same list.
    let (now, _) = list_all(&mut agent, None);
    let mut other = space.reader();
    let (seen, _) = list_all(&mut other, None);
    assert_eq!(seen, now);
    // The sessions never used stay stored when their process ends (a
    // client may prompt one from the next process), and stay unlisted.
    finish(agent);
    let stored = space.db.session_ids();
    assert!(unused.iter().all(|id| stored.contains(id)), "{stored:?}");
    assert_eq!(stored.len(), created.len() + 1 + unused.len());
    let (after, _) = list_all(&mut other, None);
    assert_eq!(after, now);
    finish(other);
}

/// Sessions created by two processes at the same moment all show up when
/// paging through `session/list`: the order the list pages by must not
/// give two sessions the same position.
#[test]
fn sessions_created_by_two_processes_at_once_page_without_gaps() {
    const EACH: usize = 100;
    let space = Space::new("list-race");
    // The database exists before the race (creating it at once is
    // `agents_started_at_once_on_a_new_database_all_work`'s subject).
    let mut first = space.reader();
    list_page(&mut first, None, None);
    finish(first);
    let agents: Vec<Agent> = (0..2).map(|_| space.reader()).collect();
    let workers: Vec<thread::JoinHandle<(Agent, Vec<String>)>> = agents
        .into_iter()
        .map(|mut agent| {
            let ws = space.ws().to_string();
            thread::spawn(move || {
                // All requests at once, then the answers.
                let ids: Vec<Value> = (0..EACH)
                    .map(|_| agent.request("session/new", json!({"cwd": ws, "mcpServers": []})))
                    .collect();
                let (answers, _) = wait_answers(&mut agent, &ids);
                let created = ids
                    .iter()
                    .map(|id| {
                        let answer = &answers[&id.to_string()];
                        answer["result"]["sessionId"]
                            .as_str()
                            .unwrap_or_else(|| panic!("session/new failed: {answer}"))
                            .to_string()
                    })
                    .collect();
                (agent, created)
            })
        })
        .collect();
    let mut created: HashSet<String> = HashSet::new();
    let mut agents = Vec::new();
    for worker in workers {
        let (agent, ids) = worker.join().expect("a worker failed");
        created.extend(ids);
        agents.push(agent);
    }
    assert_eq!(created.len(), 2 * EACH);
    // Each as if prompted, without moving it in the list (a prompt would
    // give it a new position, and the race is over the ones given at
    // creation): only used sessions are listed.
    {
        let connection = space.db.connect();
        for id in &created {
            connection
                .execute(
                    "INSERT INTO turns (session_id, turn, state, started_at, ended_at)
                     VALUES (?1, 1, 'ended', '2026-01-01T00:00:00.000Z', '2026-01-01T00:00:01.000Z')",
                    [id],
                )
                .expect("cannot mark a session used");
        }
    }
    for agent in agents {
        finish(agent);
    }
    let duplicates: Vec<(i64, i64)> = {
        let connection = space.db.connect();
        let mut statement = connection
            .prepare(
                "SELECT updated_order, COUNT(*) FROM sessions GROUP BY updated_order HAVING COUNT(*) > 1",
            )
            .expect("cannot prepare");
        let rows = statement
            .query_map([], |row| Ok((row.get(0)?, row.get(1)?)))
            .expect("cannot query")
            .collect::<rusqlite::Result<Vec<_>>>()
            .expect("cannot query");
        rows
    };
    // Two sessions at one position are a gap waiting for a page boundary:
    // move the boundary onto such a pair (deleting newer sessions or
    // prompting older ones) and page through.
    let mut agent = space.scripted(&json!({"fallback": {"text": "Moved."}}));
    if let Some(&(order, _)) = duplicates.last() {
        let connection = space.db.connect();
        let ids_where = |sql: &str| -> Vec<String> {
            let mut statement = connection.prepare(sql).expect("cannot prepare");
            let rows = statement
                .query_map([order], |row| row.get::<_, String>(0))
                .expect("cannot query")
                .collect::<rusqlite::Result<Vec<_>>>()
                .expect("cannot query");
            rows
        };
        let newer = ids_where(
            "SELECT id FROM sessions WHERE updated_order > ?1 ORDER BY updated_order DESC",
        );
        let older = ids_where(
            "SELECT id FROM sessions WHERE updated_order < ?1 ORDER BY updated_order DESC",
        );
        if newer.len() >= 49 {
            for id in &newer[..newer.len() - 49] {
                ok(&mut agent, "session/delete", json!({"sessionId": id}));
                created.remove(id);
            }
        } else {
            for id in &older[..49 - newer.len()] {
                resume(&mut agent, id, space.ws());
                prompt_ok(&mut agent, id, "move up");
            }
        }
    }
    let (all, sizes) = list_all(&mut agent, None);
    finish(agent);
    let listed: HashSet<String> = ids_of(&all).into_iter().collect();
    let missing = created.difference(&listed).count();
    assert!(
        duplicates.is_empty() && missing == 0 && all.len() == created.len(),
        "sessions created at once share a list position (updated_order, count): {duplicates:?}; \
         paging ({sizes:?}) then misses {missing} of {} sessions",
        created.len()
    );
    space.db.assert_sound();
}

/// A session the user never sent anything to is not listed; its first
/// prompt lists it (titled), in this process or the next. Closed unused,
/// it is gone; one whose settings were changed, or that is used, stays.
/// Another process that deleted a session this one has open makes its
/// next prompt a clear refusal.
#[test]
fn sessions_are_listed_from_their_first_prompt_and_unused_ones_go_on_close() {
    let space = Space::new("list-unused");
    let mut agent = space.scripted(&json!({"fallback": {"text": "Done."}}));
    let used = agent.new_session(&space.ws);
    let (all, _) = list_all(&mut agent, None);
    assert!(all.is_empty(), "{all:?}");
    prompt_ok(&mut agent, &used, "first words");
    let (all, _) = list_all(&mut agent, None);
    assert_eq!(ids_of(&all), vec![used.clone()]);
    assert_eq!(all[0]["title"], "first words");

    // Closed unused: removed, so loading it is "not found".
    let unused = agent.new_session(&space.ws);
    ok(&mut agent, "session/close", json!({"sessionId": unused}));
    assert!(!space.db.session_ids().contains(&unused));
    let error = err(
        &mut agent,
        "session/load",
        json!({"sessionId": unused, "cwd": space.ws(), "mcpServers": []}),
    );
    assert_eq!(error["code"], NOT_FOUND, "{error}");
    // A used one, and one with a setting changed, stay when closed.
    let tuned = agent.new_session(&space.ws);
    ok(
        &mut agent,
        "session/set_mode",
        json!({"sessionId": tuned, "modeId": "plan"}),
    );
    ok(&mut agent, "session/close", json!({"sessionId": tuned}));
    ok(&mut agent, "session/close", json!({"sessionId": used}));
    let stored = space.db.session_ids();
    assert!(
        stored.contains(&used) && stored.contains(&tuned),
        "{stored:?}"
    );
    let (all, _) = list_all(&mut agent, None);
    assert_eq!(
        ids_of(&all),
        vec![used.clone()],
        "a setting is not a prompt"
    );
    let result = ok(
        &mut agent,
        "session/resume",
        json!({"sessionId": tuned, "cwd": space.ws()}),
    );
    assert_eq!(result["modes"]["currentModeId"], "plan", "{result}");

    // Open here, deleted by another process: the prompt says so.
    let open = agent.new_session(&space.ws);
    let mut other = space.reader();
    ok(&mut other, "session/delete", json!({"sessionId": open}));
    finish(other);
    // Made here, prompted first by the next process (as acpx's named
    // sessions are): the end of this one keeps it.
    let named = agent.new_session(&space.ws);
    let error = err(
        &mut agent,
        "session/prompt",
        json!({"sessionId": open, "prompt": [{"type": "text", "text": "hello?"}]}),
    );
    assert_eq!(error["code"], INVALID_REQUEST, "{error}");
    assert_eq!(error["data"]["code"], "session_deleted", "{error}");
    finish(agent);
    let mut next = space.scripted(&json!({"fallback": {"text": "Later."}}));
    resume(&mut next, &named, space.ws());
    prompt_ok(&mut next, &named, "named later");
    let (all, _) = list_all(&mut next, None);
    assert_eq!(all[0]["sessionId"], named.as_str());
    assert_eq!(all[0]["title"], "named later");
    finish(next);
    space.db.assert_sound();
    let mut stored = space.db.session_ids();
    stored.sort();
    let mut expected = vec![used, tuned, named];
    expected.sort();
    assert_eq!(stored, expected);
}

//! Session deletion against the real binary: the endpoints, the tombstone at the collector, the
//! erasure from the lake, the scores, the features, the write-ahead log and the catalog, and
//! crashes in the middle of an erasure and of a compaction.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::harness::{
    Reply, Survey, TestServer, assert_error, batch, duckdb_query, new_uuid, now_millis,
    pointermove, send, session_event,
};

pub(crate) fn delete_path(survey_id: &str, reference: &str) -> String {
    format!("/integrations/v1/surveys/{survey_id}/sessions/by-reference/{reference}")
}

pub(crate) fn deletion_path(survey_id: &str, reference: &str) -> String {
    format!("/integrations/v1/surveys/{survey_id}/session-deletions/{reference}")
}

pub(crate) async fn request_deletion(
    server: &TestServer,
    key: &str,
    survey_id: &str,
    reference: &str,
) -> Reply {
    send(
        server
            .client()
            .delete(server.url(&delete_path(survey_id, reference)))
            .bearer_auth(key),
    )
    .await
}

pub(crate) async fn get_deletion(
    server: &TestServer,
    key: &str,
    survey_id: &str,
    reference: &str,
) -> Reply {
    send(
        server
            .client()
            .get(server.url(&deletion_path(survey_id, reference)))
            .bearer_auth(key),
    )
    .await
}

/// Polls a deletion until it is no longer pending.
pub(crate) async fn wait_deletion_done(
    server: &TestServer,
    key: &str,
    survey_id: &str,
    reference: &str,
) -> Value {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let reply = get_deletion(server, key, survey_id, reference).await;
        assert_eq!(reply.status, 200, "{}", reply.text);
        let deletion = reply.json()["data"].clone();
        if deletion["status"] != "pending" {
            return deletion;
        }
        assert!(
            Instant::now() < deadline,
            "deletion still pending: {deletion}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The exact fields of a deletion.
fn assert_deletion_shape(deletion: &Value) {
    let mut keys: Vec<&str> = deletion
        .as_object()
        .expect("deletion object")
        .keys()
        .map(String::as_str)
        .collect();
    keys.sort_unstable();
    assert_eq!(
        keys,
        [
            "attempts",
            "completedAt",
            "error",
            "reference",
            "requestedAt",
            "status",
            "updatedAt",
            "waitReason",
            "waitingOn"
        ],
        "{deletion}"
    );
}

/// An ISO 8601 time within `[from, to]` (Unix ms).
fn assert_between(value: &Value, from: i64, to: i64) {
    let text = value
        .as_str()
        .unwrap_or_else(|| panic!("{value} is not a string"));
    let at = chrono::DateTime::parse_from_rfc3339(text)
        .unwrap_or_else(|error| panic!("{text} is not ISO 8601: {error}"))
        .timestamp_millis();
    assert!(
        (from..=to).contains(&at),
        "{text} not within [{from}, {to}]"
    );
}

/// Scores the survey through the API and waits for the run to complete.
pub(crate) async fn score_survey(server: &TestServer, key: &str, survey_id: &str) {
    let run = server.run_scoring_to_end(key, survey_id).await;
    assert_eq!(run["status"], "completed", "{run}");
}

/// Sends `batches` batches of `per_batch` pointer events for an identifier, the first batch
/// starting with a `session` event naming `reference` when one is given.
pub(crate) async fn send_session(
    server: &TestServer,
    survey: &Survey,
    identifier: &str,
    reference: Option<&str>,
    batches: usize,
    per_batch: i32,
) -> u64 {
    let mut sent = 0;
    let start = now_millis();
    for index in 0..batches {
        let mut events = Vec::new();
        if index == 0
            && let Some(reference) = reference
        {
            events.push(session_event(start, identifier, reference));
        }
        for i in 0..per_batch {
            let at = start + (index as i64 * i64::from(per_batch) + i64::from(i)) * 16;
            events.push(pointermove(at, i, i * 2));
        }
        server
            .collect_ok(
                &survey.tracking_key,
                identifier,
                &batch(&events),
                events.len(),
            )
            .await;
        sent += events.len() as u64;
    }
    sent
}

/// Rows per `session_id` in the lake's events, read with DuckDB.
pub(crate) fn event_rows_by_session(server: &TestServer) -> BTreeMap<String, u64> {
    // One copy of the lake for both the log and the files (a bucket is copied anew each time).
    let lake = server.lake_dir();
    let live: Vec<String> = crate::harness::live_files_at(&lake, "events")
        .into_iter()
        .map(|(path, _)| format!("'{}/{path}'", lake.display()))
        .collect();
    if live.is_empty() {
        return BTreeMap::new();
    }
    duckdb_query(&format!(
        "SELECT CAST(session_id AS VARCHAR) AS session, count(*) AS n
         FROM read_parquet([{}]) GROUP BY 1",
        live.join(", ")
    ))
    .into_iter()
    .map(|row| {
        (
            row["session"].as_str().expect("session").to_owned(),
            row["n"].as_u64().expect("count"),
        )
    })
    .collect()
}

/// Rows of any lake table (events, scores, features) that mention any of `needles`, in any
/// column, found by DuckDB reading every data file of the tables (the tables' `_delta_log/`
/// files, checkpoints included, are scanned byte by byte apart).
pub(crate) fn lake_rows_mentioning(server: &TestServer, needles: &[&str]) -> Vec<Value> {
    let mut found = Vec::new();
    let lake = server.lake_dir();
    for table in ["events", "scores", "features"] {
        let glob = format!("{}/{table}/survey_id=*/**/*.parquet", lake.display());
        let any_file = files_under(&lake.join(table))
            .iter()
            .any(|path| path.extension().is_some_and(|ext| ext == "parquet"));
        if !any_file {
            continue;
        }
        let conditions: Vec<String> = needles
            .iter()
            .map(|needle| format!("contains(lower(row_text), '{}')", needle.to_lowercase()))
            .collect();
        found.extend(duckdb_query(&format!(
            "SELECT '{table}' AS tbl, row_text FROM (
                 SELECT CAST(t AS VARCHAR) AS row_text
                 FROM read_parquet('{glob}', hive_partitioning = true, union_by_name = true) t)
             WHERE {}",
            conditions.join(" OR ")
        )));
    }
    found
}

/// Every regular file under `dir`, recursively.
pub(crate) fn files_under(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut files = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return files;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            files.extend(files_under(&path));
        } else {
            files.push(path);
        }
    }
    files
}

/// Reads the SQLite catalog page by page (the database file, then each frame of its
/// write-ahead log) and returns where `needle` occurs: (file, page number, the table or index
/// owning the page per SQLite's `dbstat`, or "free" when none does).
fn catalog_pages_holding(catalog: &Path, needle: &str) -> Vec<(String, u64, String)> {
    const SCRIPT: &str = r#"
import sqlite3, sys
path, needle = sys.argv[1], sys.argv[2].encode()
data = open(path, "rb").read()
try:
    wal = open(path + "-wal", "rb").read()
except FileNotFoundError:
    wal = b""
page_size = int.from_bytes(data[16:18], "big")
page_size = 65536 if page_size == 1 else page_size
found = []
for start in range(0, len(data), page_size):
    if needle in data[start:start + page_size].lower():
        found.append(("db", start // page_size + 1))
offset = 32
while offset + 24 + page_size <= len(wal):
    page = int.from_bytes(wal[offset:offset + 4], "big")
    if needle in wal[offset + 24:offset + 24 + page_size].lower():
        found.append(("wal", page))
    offset += 24 + page_size
connection = sqlite3.connect("file:" + path + "?mode=ro", uri=True)
owners = {page: name for name, page in connection.execute("SELECT name, pageno FROM dbstat")}
for place, page in found:
    print(place, page, owners.get(page, "free"))
"#;
    let output = std::process::Command::new("python3")
        .arg("-c")
        .arg(SCRIPT)
        .arg(catalog)
        .arg(needle)
        .output()
        .expect("run python3");
    assert!(
        output.status.success(),
        "page scan failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout)
        .expect("utf-8")
        .lines()
        .map(|line| {
            let mut parts = line.splitn(3, ' ');
            let place = parts.next().unwrap_or_default().to_owned();
            let page = parts.next().and_then(|page| page.parse().ok()).unwrap_or(0);
            (place, page, parts.next().unwrap_or_default().to_owned())
        })
        .collect()
}

fn count_occurrences(haystack: &[u8], needle: &[u8]) -> usize {
    haystack
        .windows(needle.len())
        .filter(|window| window.eq_ignore_ascii_case(needle))
        .count()
}

/// Once a vacuum with no retention has run, the Parquet objects in the lake folder and the live
/// files of the tables' snapshots must be the same (no replaced file left behind, no upload
/// left uncommitted): then a reader of the plain files sees exactly the tables' rows.
fn assert_lake_matches_snapshots(server: &TestServer) {
    server.cli_json(&["vacuum", "--retention-secs", "0", "--json"]);
    let lake = server.lake_dir();
    let mut on_disk: Vec<String> = files_under(&lake)
        .into_iter()
        .filter(|path| path.extension().is_some_and(|ext| ext == "parquet"))
        .map(|path| {
            path.strip_prefix(&lake)
                .expect("under the lake")
                .display()
                .to_string()
        })
        .collect();
    on_disk.sort();
    let mut live: Vec<String> = ["events", "features", "scores"]
        .iter()
        .flat_map(|table| crate::harness::live_files_at(&lake, table))
        .map(|(path, _)| path)
        .collect();
    live.sort();
    assert_eq!(on_disk, live, "lake objects and live files differ");
}

#[tokio::test]
async fn a_deleted_session_is_erased_from_lake_scores_log_and_catalog() {
    let mut server = TestServer::start_with(&["--api-rate-per-minute", "100000"]).await;
    let key = server.key().to_owned();
    let survey = server.provision_ok(&key, "deletion", "Deletion").await;
    let sid = survey.survey_id.clone();

    // The session to delete: an identifier that is its own reference, and a second tab linked
    // to it by its session event. Two others stay.
    let deleted = new_uuid();
    let tab = format!("tab-{}", &new_uuid()[..8]);
    let kept = new_uuid();
    let kept_tab = format!("tab-{}", &new_uuid()[..8]);
    let kept_reference = new_uuid();
    let deleted_events = send_session(&server, &survey, &deleted, None, 3, 20).await
        + send_session(&server, &survey, &tab, Some(&deleted), 2, 20).await;
    let kept_events = send_session(&server, &survey, &kept, None, 4, 20).await;
    let kept_tab_events =
        send_session(&server, &survey, &kept_tab, Some(&kept_reference), 2, 15).await;
    let rows = server
        .lookup_until_counts(
            &key,
            &sid,
            &[
                (deleted.clone(), deleted_events),
                (kept.clone(), kept_events),
                (kept_reference.clone(), kept_tab_events),
            ],
            Duration::from_secs(5),
        )
        .await;
    assert_eq!(rows[0]["eventCount"], json!(deleted_events), "{rows:?}");
    score_survey(&server, &key, &sid).await;
    let before = event_rows_by_session(&server);
    assert_eq!(before.get(&deleted), Some(&60));
    assert_eq!(before.get(&tab), Some(&41));
    assert_eq!(
        lake_rows_mentioning(&server, &[&deleted])
            .iter()
            .filter(|row| row["tbl"] != "events")
            .count(),
        2,
        "the session has a score and features before the deletion"
    );
    // One more batch still in the log (not yet flushed) when the deletion arrives.
    server
        .collect_ok(
            &survey.tracking_key,
            &tab,
            &batch(&[pointermove(now_millis(), 1, 1)]),
            1,
        )
        .await;

    let requested = now_millis();
    let reply = request_deletion(&server, &key, &sid, &deleted.to_uppercase()).await;
    assert_eq!(reply.status, 202, "{}", reply.text);
    let pending = reply.json()["data"].clone();
    assert_deletion_shape(&pending);
    assert_eq!(pending["reference"], json!(deleted));
    assert_eq!(pending["status"], "pending");
    assert_eq!(pending["attempts"], 0);
    assert_eq!(pending["completedAt"], Value::Null);
    assert_eq!(pending["error"], Value::Null);
    assert_between(&pending["requestedAt"], requested, now_millis());

    // From the 202 on, this instance discards the session's batches: by reference, by linked
    // identifier, and under a new identifier whose session event names the reference.
    for (identifier, events) in [
        (deleted.clone(), batch(&[pointermove(now_millis(), 2, 2)])),
        (tab.clone(), batch(&[pointermove(now_millis(), 3, 3)])),
        (
            "reload-1".to_owned(),
            batch(&[session_event(now_millis(), "reload-1", &deleted)]),
        ),
    ] {
        let reply = server
            .collect(
                &survey.tracking_key,
                &identifier,
                Some("text/plain"),
                events,
            )
            .await;
        assert_eq!(reply.status, 202, "{identifier}: {}", reply.text);
        assert_eq!(
            reply.json(),
            json!({ "success": true, "count": 1, "deleted": true })
        );
    }

    let done = wait_deletion_done(&server, &key, &sid, &deleted).await;
    assert_deletion_shape(&done);
    assert_eq!(done["status"], "completed", "{done}");
    assert_eq!(done["attempts"], 1);
    assert_eq!(done["error"], Value::Null);
    assert_eq!(done["requestedAt"], pending["requestedAt"]);
    assert_between(&done["completedAt"], requested, now_millis());
    assert_eq!(done["updatedAt"], done["completedAt"]);

    // A repeated DELETE returns the completed deletion.
    let again = request_deletion(&server, &key, &sid, &deleted).await;
    assert_eq!(again.status, 202, "{}", again.text);
    assert_eq!(again.json()["data"], done);

    // Lookup: the session is no longer captured and has no score; the others are intact.
    let rows = server
        .lookup_rows(
            &key,
            &sid,
            &[deleted.clone(), kept.clone(), kept_reference.clone()],
        )
        .await;
    assert_eq!(rows[0]["captured"], json!(false), "{rows:?}");
    assert_eq!(rows[0]["eventCount"], json!(0));
    assert_eq!(rows[0]["humanScorePercent"], Value::Null);
    assert_eq!(rows[1]["eventCount"], json!(kept_events));
    assert!(rows[1]["humanScorePercent"].is_number(), "{rows:?}");
    assert_eq!(rows[2]["eventCount"], json!(kept_tab_events));

    // The lake, read by an outside reader: exact row counts of the others, nothing of the
    // deleted session in any column of any table.
    let after = event_rows_by_session(&server);
    let mut expected = before.clone();
    expected.remove(&deleted);
    expected.remove(&tab);
    assert_eq!(after, expected);
    let mentions = lake_rows_mentioning(&server, &[&deleted, &tab, "reload-1"]);
    assert!(
        mentions.is_empty(),
        "rows still mention the session: {mentions:?}"
    );
    assert_eq!(
        lake_rows_mentioning(&server, &[&kept])
            .iter()
            .filter(|row| row["tbl"] != "events")
            .count(),
        2,
        "the kept session keeps its score and features"
    );
    // The tables' Delta logs (commits, checkpoints) never held a copy: their statistics name
    // no session column.
    let lake = server.lake_dir();
    let mut log_files = 0;
    for table in ["events", "features", "scores"] {
        for path in files_under(&lake.join(table).join("_delta_log")) {
            let bytes = std::fs::read(&path).expect("read a Delta log file");
            log_files += 1;
            for needle in [&deleted, &tab, &kept] {
                assert_eq!(
                    count_occurrences(&bytes, needle.as_bytes()),
                    0,
                    "{needle} is in {}",
                    path.display()
                );
            }
        }
    }
    assert!(log_files >= 6, "the three tables' logs were scanned");
    assert_lake_matches_snapshots(&server);

    // Stopped, so the catalog's own log is checkpointed into its file: a byte scan of the
    // write-ahead log and of the catalog finds no identifier, and the reference only in the
    // tombstone (its row, its unique index entry, and the deletion record).
    server.terminate_ok().await;
    for file in files_under(&server.data_dir().join("wal")) {
        let bytes = std::fs::read(&file).expect("read a log file");
        for needle in [&deleted, &tab] {
            assert_eq!(
                count_occurrences(&bytes, needle.as_bytes()),
                0,
                "{needle} is still in {}",
                file.display()
            );
        }
    }
    // The byte scan reads SQLite's own files; a PostgreSQL catalog's pages are the database
    // server's (its vacuum, `Fleet::scrub`, reclaims them; docs/deploy.md).
    if server.is_embedded() {
        let mut reference_count = 0;
        for file in files_under(server.data_dir()) {
            let name = file
                .file_name()
                .and_then(|name| name.to_str())
                .unwrap_or("");
            if !name.starts_with("catalog.db") {
                continue;
            }
            let bytes = std::fs::read(&file).expect("read the catalog");
            assert_eq!(
                count_occurrences(&bytes, tab.as_bytes()),
                0,
                "the linked identifier is still in {}",
                file.display()
            );
            assert_eq!(count_occurrences(&bytes, b"reload-1"), 0);
            reference_count += count_occurrences(&bytes, deleted.as_bytes());
        }
        assert!(reference_count > 0, "the tombstone holds the reference");
        // Every page of the catalog, and every page image in its write-ahead log, that holds the
        // reference belongs to the tombstone (its table and unique index) or the deletion record
        // (its table, and the index of pending deletions, which a page image from before the last
        // checkpoint may still show).
        let pages = catalog_pages_holding(&server.catalog_path(), &deleted);
        assert!(!pages.is_empty());
        for (place, page, owner) in &pages {
            assert!(
                [
                    "tombstones",
                    "sqlite_autoindex_tombstones_1",
                    "session_deletions",
                    "session_deletions_pending"
                ]
                .contains(&owner.as_str()),
                "the reference is in {place} page {page}, owned by {owner}: {pages:?}"
            );
        }
    }
    let tables = server.catalog_sql(&format!(
        "SELECT 'sessions', count(*) FROM sessions WHERE reference = '{deleted}' OR identifier IN ('{deleted}', '{tab}')
         UNION ALL SELECT 'scores', count(*) FROM session_scores WHERE reference = '{deleted}'
         UNION ALL SELECT 'summaries', count(*) FROM reference_summaries WHERE reference = '{deleted}'
         UNION ALL SELECT 'cohort', count(*) FROM cohort_points WHERE reference = '{deleted}'
         UNION ALL SELECT 'tombstones', count(*) FROM tombstones WHERE reference = '{deleted}'
         UNION ALL SELECT 'identifiers', count(*) FROM tombstoned_identifiers"
    ));
    assert_eq!(
        tables.lines().collect::<Vec<_>>(),
        [
            "sessions|0",
            "scores|0",
            "summaries|0",
            "cohort|0",
            "tombstones|1",
            "identifiers|3"
        ],
        "two identifiers erased with the session, one named by a later session event"
    );

    // After a restart, late batches are still discarded, even under the linked identifier
    // whose sessions row is gone.
    server.restart().await;
    for identifier in [&deleted, &tab] {
        let reply = server
            .collect(
                &survey.tracking_key,
                identifier,
                Some("application/json"),
                batch(&[pointermove(now_millis(), 4, 4)]),
            )
            .await;
        assert_eq!(reply.status, 202, "{identifier}: {}", reply.text);
    }
    server
        .collect_ok(
            &survey.tracking_key,
            &kept,
            &batch(&[pointermove(now_millis(), 5, 5)]),
            1,
        )
        .await;
}

#[tokio::test]
async fn deletion_requests_are_validated_and_scoped() {
    let server = TestServer::start_with(&["--api-rate-per-minute", "100000"]).await;
    let key = server.key().to_owned();
    let survey = server.provision_ok(&key, "deletion-rules", "Rules").await;
    let sid = survey.survey_id.clone();
    let reference = new_uuid();

    // 400: the reference is not a UUID.
    for bad in ["not-a-uuid", "123", "4f1c2d3e-0000-4000-8000-00000000000g"] {
        assert_error(&request_deletion(&server, &key, &sid, bad).await, 400);
    }
    // 404: no deletion was requested (a UUID, or anything else, on GET).
    assert_error(&get_deletion(&server, &key, &sid, &reference).await, 404);
    assert_error(&get_deletion(&server, &key, &sid, "not-a-uuid").await, 404);
    // 404: a survey that does not exist, or is another organization's.
    let missing = "00112233445566778899aabb";
    assert_error(
        &request_deletion(&server, &key, missing, &reference).await,
        404,
    );
    assert_error(
        &request_deletion(&server, &key, "nope", &reference).await,
        404,
    );
    let other_org = server.create_org("other");
    let foreign = server.create_key(&other_org, "foreign", None);
    assert_error(
        &request_deletion(&server, &foreign.key, &sid, &reference).await,
        404,
    );

    // A reference never captured can still be deleted (its later batches are discarded).
    let reply = request_deletion(&server, &key, &sid, &reference).await;
    assert_eq!(reply.status, 202, "{}", reply.text);
    let done = wait_deletion_done(&server, &key, &sid, &reference).await;
    assert_eq!(done["status"], "completed");
    assert_error(
        &get_deletion(&server, &foreign.key, &sid, &reference).await,
        404,
    );

    // 403: a key without sessions:delete, for both operations; 401 without a valid key.
    let reader = server.create_key(&server.default_org().await, "reader", Some("sessions:read"));
    assert_error(
        &request_deletion(&server, &reader.key, &sid, &reference).await,
        403,
    );
    assert_error(
        &get_deletion(&server, &reader.key, &sid, &reference).await,
        403,
    );
    assert_error(
        &get_deletion(&server, "tt_nope", &sid, &reference).await,
        401,
    );
}

/// Sends sessions and waits until they are in the lake; returns rows per session.
pub(crate) async fn prepare_lake(
    server: &TestServer,
    key: &str,
    survey: &Survey,
    sessions: &[String],
) -> BTreeMap<String, u64> {
    let mut expected = Vec::new();
    for (index, identifier) in sessions.iter().enumerate() {
        let sent = send_session(server, survey, identifier, None, 2 + index % 3, 10).await;
        expected.push((identifier.clone(), sent));
    }
    server
        .lookup_until_counts(key, &survey.survey_id, &expected, Duration::from_secs(5))
        .await;
    // Flushed every 500 ms by the harness default; wait for every row.
    let total: u64 = expected.iter().map(|(_, sent)| sent).sum();
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let rows = event_rows_by_session(server);
        // This round's sessions only: earlier rounds' rows are in the lake already.
        let flushed: u64 = sessions
            .iter()
            .filter_map(|session| rows.get(session))
            .sum();
        if flushed >= total {
            return rows;
        }
        assert!(Instant::now() < deadline, "events not flushed: {rows:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test]
#[cfg_attr(
    not(feature = "failpoints"),
    ignore = "needs the pause points of `--features failpoints`"
)]
async fn an_erasure_killed_midway_completes_after_restart() {
    for point in ["uploaded", "swapped"] {
        let mut server = TestServer::start_with(&["--api-rate-per-minute", "100000"]).await;
        let key = server.key().to_owned();
        let survey = server.provision_ok(&key, "crash", "Crash").await;
        let sessions: Vec<String> = (0..6).map(|_| new_uuid()).collect();
        let before = prepare_lake(&server, &key, &survey, &sessions).await;
        score_survey(&server, &key, &survey.survey_id).await;

        // Restarted with the rewrite set to stop at `point`, then killed there.
        server.terminate_ok().await;
        server.set_env(
            "FAILPOINTS",
            Some(&format!("telltale-rewrite-{point}=return")),
        );
        server.restart().await;
        let victim = &sessions[2];
        let reply = request_deletion(&server, &key, &survey.survey_id, victim).await;
        assert_eq!(reply.status, 202, "{}", reply.text);
        server
            .wait_for_log("rewrite paused for a crash test", Duration::from_secs(30))
            .await;
        server.kill_hard();
        server.set_env("FAILPOINTS", None);
        server.restart().await;

        let done = wait_deletion_done(&server, &key, &survey.survey_id, victim).await;
        assert_eq!(done["status"], "completed", "{point}: {done}");
        let mut expected = before.clone();
        expected.remove(victim);
        assert_eq!(
            event_rows_by_session(&server),
            expected,
            "after a crash at {point}"
        );
        assert!(lake_rows_mentioning(&server, &[victim]).is_empty());
        assert_lake_matches_snapshots(&server);
    }
}

#[tokio::test]
#[cfg_attr(
    not(feature = "failpoints"),
    ignore = "needs the pause points of `--features failpoints`"
)]
async fn compaction_merges_small_files_and_survives_a_crash() {
    // Background compaction off: the command line does it.
    let mut server = TestServer::start_with(&[
        "--api-rate-per-minute",
        "100000",
        "--compaction-interval-secs",
        "0",
    ])
    .await;
    let key = server.key().to_owned();
    let survey = server.provision_ok(&key, "compaction", "Compaction").await;
    let mut sessions = Vec::new();
    // Several flushes, so several small files.
    for _ in 0..3 {
        let round: Vec<String> = (0..4).map(|_| new_uuid()).collect();
        prepare_lake(&server, &key, &survey, &round).await;
        sessions.extend(round);
    }
    let before = event_rows_by_session(&server);
    let partition = format!("events/survey_id={}/", survey.survey_id);
    let files = |server: &TestServer| {
        server
            .live_files("events")
            .iter()
            .filter(|(path, _)| path.starts_with(&partition))
            .count() as u64
    };
    // DuckDB sees a flush file once it is uploaded, the catalog a moment later when its commit
    // lands: wait for the commits.
    let deadline = Instant::now() + Duration::from_secs(10);
    while files(&server) < 3 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(files(&server) >= 3, "several flush files to merge");

    // A compaction killed after its upload, then one killed after its commit: each time the
    // tables hold every row once, and the vacuum removes what it left (an uncommitted upload,
    // or the replaced files).
    for point in ["uploaded", "swapped"] {
        let mut compact = server
            .command(&["compact", "--survey", &survey.survey_id])
            .env("FAILPOINTS", format!("telltale-rewrite-{point}=return"))
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("spawn telltale compact");
        let stderr = compact.stderr.take().expect("stderr");
        let (sender, receiver) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            use std::io::BufRead;
            for line in std::io::BufReader::new(stderr)
                .lines()
                .map_while(Result::ok)
            {
                if line.contains("rewrite paused for a crash test") {
                    let _ = sender.send(());
                }
            }
        });
        receiver
            .recv_timeout(Duration::from_secs(60))
            .expect("compaction reached the crash point");
        compact.kill().expect("kill -9 the compaction");
        let _ = compact.wait();
        server.terminate_ok().await;
        server.restart().await;
        assert_eq!(
            event_rows_by_session(&server),
            before,
            "after a crash at {point}"
        );
        assert_lake_matches_snapshots(&server);
    }
    // The crash after the commit had merged the files; a new pass finds nothing to do.
    assert_eq!(files(&server), 1);
    let report = server.cli_json(&["compact", "--json"]);
    assert_eq!(report["conflicts"], 0, "{report}");
    assert_eq!(report["filesIn"], 0, "{report}");
    assert_eq!(event_rows_by_session(&server), before);
    // The merged file is sorted by session.
    let order = duckdb_query(&format!(
        "SELECT CAST(session_id AS VARCHAR) AS s FROM read_parquet({})",
        server.events_files()
    ));
    let order: Vec<&str> = order
        .iter()
        .map(|row| row["s"].as_str().expect("s"))
        .collect();
    let mut sorted = order.clone();
    sorted.sort_unstable();
    assert_eq!(order, sorted);
    assert_lake_matches_snapshots(&server);
    assert_eq!(sessions.len(), before.len());
}

#[tokio::test]
async fn a_deletion_that_keeps_failing_ends_failed_with_its_error() {
    let server = TestServer::start_with(&["--api-rate-per-minute", "100000"]).await;
    let key = server.key().to_owned();
    let survey = server.provision_ok(&key, "failing", "Failing").await;
    let victim = new_uuid();
    prepare_lake(&server, &key, &survey, std::slice::from_ref(&victim)).await;
    // The storage goes bad under the session's file: every erasure attempt fails reading it.
    for (path, _) in server.live_files("events") {
        server.write_lake_object(&path, b"not parquet");
    }

    let started = Instant::now();
    let reply = request_deletion(&server, &key, &survey.survey_id, &victim).await;
    assert_eq!(reply.status, 202, "{}", reply.text);
    // Retried after 1, 2, 4 and 8 s: failed after about 15 s.
    let mut attempts_seen = Vec::new();
    let failed = loop {
        let deletion = get_deletion(&server, &key, &survey.survey_id, &victim)
            .await
            .json()["data"]
            .clone();
        let attempts = deletion["attempts"].as_u64().expect("attempts");
        if attempts_seen.last() != Some(&attempts) {
            attempts_seen.push(attempts);
        }
        if deletion["status"] != "pending" {
            break deletion;
        }
        assert!(started.elapsed() < Duration::from_secs(60), "{deletion}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_deletion_shape(&failed);
    assert_eq!(failed["status"], "failed", "{failed}");
    assert_eq!(failed["attempts"], 5);
    assert_eq!(failed["completedAt"], Value::Null);
    let error = failed["error"].as_str().expect("an error message");
    assert!(error.contains("parquet"), "{error}");
    assert!(
        started.elapsed() >= Duration::from_secs(14),
        "backoff of 1+2+4+8 s, took {:?}",
        started.elapsed()
    );
    assert!(
        attempts_seen.windows(2).all(|pair| pair[0] < pair[1]),
        "{attempts_seen:?}"
    );

    // The tombstone stands meanwhile; a new request starts the deletion over.
    let reply = server
        .collect(
            &survey.tracking_key,
            &victim,
            Some("application/json"),
            batch(&[pointermove(now_millis(), 1, 1)]),
        )
        .await;
    assert_eq!(reply.status, 202, "{}", reply.text);
    let again = request_deletion(&server, &key, &survey.survey_id, &victim).await;
    assert_eq!(again.status, 202, "{}", again.text);
    let again = again.json()["data"].clone();
    assert_eq!(again["status"], "pending", "{again}");
    assert_eq!(again["attempts"], 0);
    assert_eq!(again["error"], Value::Null);
}

//! The durability contract: a 201 means the batch is on disk. While clients post, the server is
//! killed with SIGKILL and restarted: every acknowledged event is counted, nothing is counted
//! that was not sent, and after the flush the lake holds exactly the counted rows.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use serde_json::json;

use crate::harness::{TestServer, batch, duckdb_query, new_uuid, now_millis};

const TASKS: usize = 4;
const BATCHES_PER_TASK: usize = 200;
const EVENTS_PER_BATCH: usize = 20;
const IDENTIFIERS_PER_TASK: usize = 10;
/// The server is killed once this share of all events has been acknowledged.
const KILL_AFTER_EVENTS: u64 = (TASKS * BATCHES_PER_TASK * EVENTS_PER_BATCH / 3) as u64;

#[derive(Debug, Default, Clone, Copy)]
struct Tally {
    sent: u64,
    acknowledged: u64,
}

/// Posts `batches` batches round-robin over `identifiers` until the server goes away. Every
/// event is unique: (task, sequence) is in (x, y).
async fn post_batches(
    client: reqwest::Client,
    collector: String,
    task: usize,
    batches: usize,
    identifiers: Vec<String>,
    acknowledged_total: Arc<AtomicU64>,
) -> (HashMap<String, Tally>, Vec<String>) {
    let mut tallies: HashMap<String, Tally> = HashMap::new();
    let mut unexpected = Vec::new();
    for batch_index in 0..batches {
        let identifier = &identifiers[batch_index % identifiers.len()];
        let start = now_millis();
        let events: Vec<String> = (0..EVENTS_PER_BATCH)
            .map(|i| {
                let sequence = batch_index * EVENTS_PER_BATCH + i;
                format!(
                    r#"{{"type":"pointermove","timestamp":{},"data":{{"x":{task},"y":{sequence},"pointerType":"mouse","trusted":true}}}}"#,
                    start + i as i64
                )
            })
            .collect();
        let tally = tallies.entry(identifier.clone()).or_default();
        tally.sent += EVENTS_PER_BATCH as u64;
        let response = client
            .post(format!("{collector}/{identifier}"))
            .header("content-type", "application/json")
            .body(batch(&events))
            .send()
            .await;
        match response {
            Ok(response) if response.status() == 201 => {
                tally.acknowledged += EVENTS_PER_BATCH as u64;
                acknowledged_total.fetch_add(EVENTS_PER_BATCH as u64, Ordering::Relaxed);
            }
            Ok(response) => {
                let status = response.status();
                let text = response.text().await.unwrap_or_default();
                unexpected.push(format!("{identifier}: {status} {text}"));
            }
            // The server is gone: the connection was reset or refused.
            Err(_) => break,
        }
    }
    (tallies, unexpected)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acknowledged_events_survive_sigkill_and_land_in_the_lake_exactly_once() {
    let mut server = TestServer::start_with(&[
        "--collector-ip-rate",
        "0",
        "--collector-identifier-rate",
        "0",
        "--api-rate-per-minute",
        "100000",
    ])
    .await;
    let key = server.key().to_owned();
    let survey = server.provision_ok(&key, "crash", "Crash").await;
    let collector = server.url(&format!("/event/{}", survey.tracking_key));

    let identifiers: Vec<Vec<String>> = (0..TASKS)
        .map(|_| (0..IDENTIFIERS_PER_TASK).map(|_| new_uuid()).collect())
        .collect();

    // Warm-up: one batch per identifier, then wait for a flush, so that the process killed
    // below has already committed files to the lake (and replay must skip those records).
    let mut tallies: HashMap<String, Tally> = HashMap::new();
    for (task, task_identifiers) in identifiers.iter().enumerate() {
        for (index, identifier) in task_identifiers.iter().enumerate() {
            let event = format!(
                r#"{{"type":"pointermove","timestamp":{},"data":{{"x":{task},"y":{},"pointerType":"mouse","trusted":true}}}}"#,
                now_millis(),
                1_000_000 + index
            );
            server
                .collect_ok(&survey.tracking_key, identifier, &batch(&[event]), 1)
                .await;
            tallies.insert(
                identifier.clone(),
                Tally {
                    sent: 1,
                    acknowledged: 1,
                },
            );
        }
    }
    let deadline = Instant::now() + Duration::from_secs(5);
    while !server.lake_dir().join("events").exists() {
        assert!(Instant::now() < deadline, "no flush to the lake within 5 s");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    let acknowledged_total = Arc::new(AtomicU64::new(0));
    let mut tasks = Vec::new();
    for (task, task_identifiers) in identifiers.into_iter().enumerate() {
        tasks.push(tokio::spawn(post_batches(
            server.client().clone(),
            collector.clone(),
            task,
            BATCHES_PER_TASK,
            task_identifiers,
            Arc::clone(&acknowledged_total),
        )));
    }

    let deadline = Instant::now() + Duration::from_secs(60);
    while acknowledged_total.load(Ordering::Relaxed) < KILL_AFTER_EVENTS {
        assert!(
            Instant::now() < deadline,
            "clients did not get {KILL_AFTER_EVENTS} events acknowledged in time"
        );
        assert!(
            tasks.iter().any(|task| !task.is_finished()),
            "every client stopped before the kill"
        );
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    server.kill_hard();

    for task in tasks {
        let (task_tallies, unexpected) = task.await.expect("client task");
        assert!(
            unexpected.is_empty(),
            "the collector answered other than 201: {unexpected:?}"
        );
        for (identifier, tally) in task_tallies {
            let total = tallies.entry(identifier).or_default();
            total.sent += tally.sent;
            total.acknowledged += tally.acknowledged;
        }
    }
    let sent: u64 = tallies.values().map(|tally| tally.sent).sum();
    let acknowledged: u64 = tallies.values().map(|tally| tally.acknowledged).sum();
    let planned =
        (TASKS * BATCHES_PER_TASK * EVENTS_PER_BATCH + TASKS * IDENTIFIERS_PER_TASK) as u64;
    assert!(
        acknowledged >= KILL_AFTER_EVENTS && acknowledged < planned,
        "the kill did not land mid-stream: {acknowledged} of {planned} acknowledged"
    );

    server.restart().await;
    let mut references: Vec<String> = tallies.keys().cloned().collect();
    references.sort();
    let expected: Vec<(String, u64)> = references
        .iter()
        .map(|reference| (reference.clone(), tallies[reference].acknowledged))
        .collect();
    let rows = server
        .lookup_until_counts(&key, &survey.survey_id, &expected, Duration::from_secs(2))
        .await;
    let mut counted: HashMap<String, u64> = HashMap::new();
    for (row, reference) in rows.iter().zip(&references) {
        assert_eq!(row["externalReference"], json!(reference));
        let count = row["eventCount"].as_u64().expect("eventCount");
        let tally = tallies[reference];
        assert!(
            count >= tally.acknowledged,
            "{reference}: lookup counts {count} but {} were acknowledged",
            tally.acknowledged
        );
        assert!(
            count <= tally.sent,
            "{reference}: lookup counts {count} but only {} were sent",
            tally.sent
        );
        counted.insert(reference.clone(), count);
    }
    let counted_total: u64 = counted.values().sum();
    eprintln!(
        "crash test: planned {planned}, sent {sent}, acknowledged {acknowledged}, counted after restart {counted_total}"
    );

    // SIGTERM flushes; then an outside reader sees exactly the counted rows, once each.
    server.terminate_ok().await;
    let files = server.events_files();
    let per_reference = duckdb_query(&format!(
        "SELECT reference, count(*) AS n, count(DISTINCT session_id) AS sessions
         FROM read_parquet({files}, hive_partitioning = true)
         GROUP BY reference ORDER BY reference"
    ));
    let lake: HashMap<String, u64> = per_reference
        .iter()
        .map(|row| {
            assert_eq!(row["sessions"], json!(1), "{row}");
            (
                row["reference"].as_str().expect("reference").to_owned(),
                row["n"].as_u64().expect("count"),
            )
        })
        .collect();
    for reference in &references {
        assert_eq!(
            lake.get(reference).copied().unwrap_or(0),
            counted[reference],
            "{reference}: lake rows differ from the lookup count"
        );
    }
    assert_eq!(
        lake.values().sum::<u64>(),
        counted_total,
        "the lake holds rows of references nobody sent: {lake:?}"
    );
    assert_no_duplicate_events(&files);

    // A restart after the clean stop changes nothing.
    server.restart().await;
    let rows = server
        .lookup_rows(&key, &survey.survey_id, &references)
        .await;
    for (row, reference) in rows.iter().zip(&references) {
        assert_eq!(row["eventCount"], json!(counted[reference]), "{reference}");
    }
}

/// Adds one client task's tallies to the totals; asserts it saw only 201s.
fn merge_tallies(
    totals: &mut HashMap<String, Tally>,
    (task_tallies, unexpected): (HashMap<String, Tally>, Vec<String>),
) {
    assert!(
        unexpected.is_empty(),
        "the collector answered other than 201: {unexpected:?}"
    );
    for (identifier, tally) in task_tallies {
        let total = totals.entry(identifier).or_default();
        total.sent += tally.sent;
        total.acknowledged += tally.acknowledged;
    }
}

/// Looks every identifier up (each is its own reference) and checks
/// acknowledged <= count <= sent; returns the counts.
async fn checked_counts(
    server: &TestServer,
    survey_id: &str,
    tallies: &HashMap<String, Tally>,
) -> HashMap<String, u64> {
    let mut references: Vec<String> = tallies.keys().cloned().collect();
    references.sort();
    let expected: Vec<(String, u64)> = references
        .iter()
        .map(|reference| (reference.clone(), tallies[reference].acknowledged))
        .collect();
    let rows = server
        .lookup_until_counts(server.key(), survey_id, &expected, Duration::from_secs(2))
        .await;
    let mut counts = HashMap::new();
    for (row, reference) in rows.iter().zip(&references) {
        let count = row["eventCount"].as_u64().expect("eventCount");
        let tally = tallies[reference];
        assert!(
            (tally.acknowledged..=tally.sent).contains(&count),
            "{reference}: lookup counts {count}; acknowledged {}, sent {}",
            tally.acknowledged,
            tally.sent
        );
        counts.insert(reference.clone(), count);
    }
    counts
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_under_load_exits_cleanly_and_counts_every_event_once() {
    // Frequent flushes, so that the signal often lands while one is under way.
    let mut server = TestServer::start_with(&[
        "--flush-interval-ms",
        "100",
        "--collector-ip-rate",
        "0",
        "--collector-identifier-rate",
        "0",
        "--api-rate-per-minute",
        "100000",
    ])
    .await;
    let survey = server
        .provision_ok(server.key(), "sigterm", "SIGTERM")
        .await;
    let identifiers: Vec<String> = (0..8).map(|_| new_uuid()).collect();
    let mut tallies: HashMap<String, Tally> = HashMap::new();
    let mut counts = HashMap::new();

    for cycle in 0..4 {
        let collector = server.url(&format!("/event/{}", survey.tracking_key));
        let acknowledged = Arc::new(AtomicU64::new(0));
        let tasks: Vec<_> = (0..2)
            .map(|task| {
                tokio::spawn(post_batches(
                    server.client().clone(),
                    collector.clone(),
                    cycle * 2 + task,
                    10_000,
                    identifiers.clone(),
                    Arc::clone(&acknowledged),
                ))
            })
            .collect();
        let deadline = Instant::now() + Duration::from_secs(30);
        let target = 1_000 + 400 * cycle as u64;
        while acknowledged.load(Ordering::Relaxed) < target {
            assert!(Instant::now() < deadline, "clients stalled");
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        server.terminate_ok().await;
        for task in tasks {
            merge_tallies(&mut tallies, task.await.expect("client task"));
        }
        server.restart().await;
        counts = checked_counts(&server, &survey.survey_id, &tallies).await;
    }

    server.terminate_ok().await;
    let files = server.events_files();
    let lake = duckdb_query(&format!(
        "SELECT reference, count(*) AS n FROM read_parquet({files}, hive_partitioning = true)
         GROUP BY reference"
    ));
    assert_eq!(lake.len(), identifiers.len(), "{lake:?}");
    for row in &lake {
        let reference = row["reference"].as_str().expect("reference");
        assert_eq!(
            row["n"].as_u64(),
            counts.get(reference).copied(),
            "{reference}: lake rows differ from the lookup count"
        );
    }
    assert_no_duplicate_events(&files);
}

/// No (session, x, y) occurs twice: the test batches never repeat a position within a session,
/// so a repeat is an event written twice.
fn assert_no_duplicate_events(files: &str) {
    let duplicates = duckdb_query(&format!(
        "SELECT count(*) AS n FROM (
             SELECT session_id, x, y FROM read_parquet({files}, hive_partitioning = true)
             GROUP BY session_id, x, y HAVING count(*) > 1)"
    ));
    assert_eq!(
        duplicates[0]["n"],
        json!(0),
        "duplicated events in the lake"
    );
}

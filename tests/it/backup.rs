//! Backup and restore (`telltale backup`, `telltale restore`) on the stores the suite runs on
//! (the embedded default, or PostgreSQL and S3): a backup taken while the collector is under
//! load, restored into new stores, holds every batch acknowledged before the backup began,
//! once; no session erased before or after the backup comes back; the restored service answers
//! lookups that agree with its lake and scores a new run.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::deletion::{request_deletion, wait_deletion_done};
use crate::harness::{TestServer, duckdb_query, new_uuid};
use crate::stores::ScaleOutStores;

const EVENTS_PER_BATCH: u64 = 10;

fn numbered_batch(number: u64) -> String {
    crate::harness::numbered_batch(number, EVENTS_PER_BATCH)
}

/// `(reference, batch number)` of every batch in the lake, each with its row count.
fn batches_in_lake(server: &TestServer, references: &[String]) -> Vec<((String, u64), u64)> {
    let list: Vec<String> = references.iter().map(|r| format!("'{r}'")).collect();
    duckdb_query(&format!(
        "SELECT session_id, CAST(x AS BIGINT) AS batch, count(*) AS n
         FROM read_parquet('{}', hive_partitioning = true)
         WHERE session_id IN ({}) GROUP BY session_id, batch ORDER BY session_id, batch",
        server.events_glob(),
        list.join(",")
    ))
    .into_iter()
    .map(|row| {
        (
            (
                row["session_id"].as_str().expect("session_id").to_owned(),
                row["batch"].as_u64().expect("batch"),
            ),
            row["n"].as_u64().expect("n"),
        )
    })
    .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_backup_under_load_restores_every_batch_before_it_and_no_erased_session() {
    let args = [
        "--api-rate-per-minute",
        "100000",
        "--collector-ip-rate",
        "0",
        "--collector-identifier-rate",
        "0",
    ];
    let server = Arc::new(TestServer::start_with(&args).await);
    let key = server.key().to_owned();
    let survey = server.provision_ok(&key, "backup", "Backup").await;

    // A session erased before the backup.
    let erased_before = new_uuid();
    for number in 0..3 {
        server
            .collect_ok(
                &survey.tracking_key,
                &erased_before,
                &numbered_batch(number),
                EVENTS_PER_BATCH as usize,
            )
            .await;
    }
    let reply = request_deletion(&server, &key, &survey.survey_id, &erased_before).await;
    assert_eq!(reply.status, 202, "{}", reply.text);
    let done = wait_deletion_done(&server, &key, &survey.survey_id, &erased_before).await;
    assert_eq!(done["status"], "completed", "{done}");

    // The load: four sessions, a batch every 10 ms in turn.
    let references: Vec<String> = (0..4).map(|_| new_uuid()).collect();
    let stop = Arc::new(AtomicBool::new(false));
    let acknowledged: Arc<Mutex<Vec<(String, u64, Instant)>>> = Arc::default();
    let load = {
        let (server, stop, acknowledged) = (
            Arc::clone(&server),
            Arc::clone(&stop),
            Arc::clone(&acknowledged),
        );
        let (references, tracking_key) = (references.clone(), survey.tracking_key.clone());
        tokio::spawn(async move {
            let mut number = 0u64;
            while !stop.load(Ordering::Relaxed) {
                let reference = &references[(number % 4) as usize];
                let reply = server
                    .collect(
                        &tracking_key,
                        reference,
                        Some("application/json"),
                        numbered_batch(number),
                    )
                    .await;
                if reply.status == 201 {
                    acknowledged.lock().expect("acknowledged").push((
                        reference.clone(),
                        number,
                        Instant::now(),
                    ));
                }
                number += 1;
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        })
    };
    // At least 80 batches acknowledged before the backup begins, however busy the machine.
    let deadline = Instant::now() + Duration::from_secs(60);
    while acknowledged.lock().expect("acknowledged").len() < 80 {
        assert!(
            Instant::now() < deadline,
            "the load is not being acknowledged"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    let folder = tempfile::tempdir().expect("temp dir");
    let backup_dir = folder.path().join("backup");
    let began = Instant::now();
    let output = {
        let to = format!("--to={}", backup_dir.display());
        let mut command = server.command(&["backup", "--json", &to]);
        tokio::task::spawn_blocking(move || command.output().expect("run telltale backup"))
            .await
            .expect("backup task")
    };
    assert!(
        output.status.success(),
        "telltale backup failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let manifest: Value = serde_json::from_slice(&output.stdout).expect("the manifest");
    assert_eq!(
        manifest["catalog"],
        if server.is_embedded() {
            "sqlite"
        } else {
            "postgres"
        },
        "{manifest}"
    );
    tokio::time::sleep(Duration::from_millis(1000)).await;
    stop.store(true, Ordering::Relaxed);
    load.await.expect("load");

    // A session acknowledged before the backup, erased after it.
    let erased_after = references[0].clone();
    let reply = request_deletion(&server, &key, &survey.survey_id, &erased_after).await;
    assert_eq!(reply.status, 202, "{}", reply.text);
    let done = wait_deletion_done(&server, &key, &survey.survey_id, &erased_after).await;
    assert_eq!(done["status"], "completed", "{done}");
    let source_catalog = server.catalog_url();
    let mut server = Arc::into_inner(server).expect("the load is done");
    server.terminate_ok().await;

    // Restored into new stores, with the source catalog's tombstones.
    let root = TestServer::new_root();
    let target = if server.is_embedded() {
        None
    } else {
        Some(ScaleOutStores::create(root.path()).await)
    };
    let backup_text = backup_dir.display().to_string();
    let output = TestServer::cli_on(
        root.path(),
        target.as_ref(),
        &[
            "restore",
            "--json",
            "--from",
            &backup_text,
            "--tombstones-from",
            &source_catalog,
        ],
    );
    assert!(
        output.status.success(),
        "telltale restore failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let report: Value = serde_json::from_slice(&output.stdout).expect("the report");
    assert_eq!(report["deletionsRedone"], 1, "{report}");
    assert_eq!(report["deletionsRequested"], 1, "{report}");
    let restored = TestServer::start_restored(root, target, &key, &args).await;
    for reference in [&erased_before, &erased_after] {
        let done = wait_deletion_done(&restored, &key, &survey.survey_id, reference).await;
        assert_eq!(done["status"], "completed", "{done}");
    }

    // Every batch acknowledged before the backup began, once; none of an erased session.
    let acknowledged = acknowledged.lock().expect("acknowledged").clone();
    let before: Vec<(String, u64)> = acknowledged
        .iter()
        .filter(|(reference, _, at)| *at < began && *reference != erased_after)
        .map(|(reference, number, _)| (reference.clone(), *number))
        .collect();
    assert!(
        before.len() > 50,
        "only {} batches before the backup",
        before.len()
    );
    let mut all = references.clone();
    all.push(erased_before.clone());
    let deadline = Instant::now() + Duration::from_secs(30);
    let in_lake = loop {
        let in_lake = batches_in_lake(&restored, &all);
        let present: std::collections::HashSet<&(String, u64)> =
            in_lake.iter().map(|(batch, _)| batch).collect();
        if before.iter().all(|batch| present.contains(batch)) {
            break in_lake;
        }
        assert!(
            Instant::now() < deadline,
            "batches acknowledged before the backup are missing from the restored lake: {:?}",
            before
                .iter()
                .filter(|batch| !present.contains(batch))
                .take(10)
                .collect::<Vec<_>>()
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    };
    for ((reference, number), rows) in &in_lake {
        assert_eq!(*rows, EVENTS_PER_BATCH, "batch {number} of {reference}");
        assert!(
            *reference != erased_before && *reference != erased_after,
            "an erased session came back: {reference}"
        );
    }

    // A new run scores (it flushes what the log replayed first), and the restored catalog's
    // statistics agree with its lake.
    let run = restored.run_scoring_to_end(&key, &survey.survey_id).await;
    assert_eq!(run["status"], "completed", "{run}");
    let in_lake = batches_in_lake(&restored, &all);
    let kept: Vec<String> = references[1..].to_vec();
    let rows = restored.lookup_rows(&key, &survey.survey_id, &kept).await;
    for (row, reference) in rows.iter().zip(&kept) {
        let events: u64 = in_lake
            .iter()
            .filter(|((session, _), _)| session == reference)
            .map(|(_, rows)| rows)
            .sum();
        assert_eq!(row["eventCount"], json!(events), "{reference}: {row}");
    }
}

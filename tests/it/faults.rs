//! The log's fail-stop: with its disk failing (fsync and fdatasync of the write-ahead log's files
//! fail with EIO) or full (its writes fail with ENOSPC), through the `LD_PRELOAD` shim
//! `tests/faults/fsync_shim.c` compiled here with the system's C compiler, the collector answers
//! 503 with `Retry-After` and never 201; once the disk works again it recovers by itself; every
//! acknowledged event reaches the lake exactly once, and none of the refused ones does, across a
//! SIGKILL and the log's replay as well.

use std::process::Command;
use std::time::Duration;

use serde_json::json;

use crate::harness::{TestServer, batch, duckdb_query, new_uuid, now_millis};

/// Compiles the shim into `dir`; returns the library's path.
fn shim(dir: &std::path::Path) -> String {
    let source = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/faults/fsync_shim.c");
    let library = dir.join("fsync_shim.so");
    let status = Command::new("cc")
        .args(["-shared", "-fPIC", "-O2", "-o"])
        .arg(&library)
        .arg(source)
        .arg("-ldl")
        .status()
        .expect("run cc (gcc is required)");
    assert!(status.success(), "compiling the fsync shim failed");
    library.to_str().expect("utf-8 path").to_owned()
}

/// Posts one batch of ten events marked with `phase` and `index`; returns the status.
async fn post(
    server: &TestServer,
    collector: &str,
    identifier: &str,
    phase: u64,
    index: u64,
) -> u16 {
    let start = now_millis();
    let events: Vec<String> = (0..10)
        .map(|i| {
            format!(
                r#"{{"type":"pointermove","timestamp":{},"data":{{"x":{phase},"y":{},"pointerType":"mouse","trusted":true}}}}"#,
                start + i,
                index * 10 + i as u64
            )
        })
        .collect();
    let response = server
        .client()
        .post(format!("{collector}/{identifier}"))
        .header("content-type", "application/json")
        .body(batch(&events))
        .send()
        .await
        .expect("the server answers");
    let status = response.status().as_u16();
    if status == 503 {
        assert_eq!(
            response
                .headers()
                .get("retry-after")
                .map(|v| v.to_str().ok()),
            Some(Some("1")),
            "a 503 says when to come back"
        );
        let body: serde_json::Value = response.json().await.expect("a JSON error");
        assert!(body["error"].is_string(), "{body}");
    }
    status
}

#[tokio::test]
async fn a_failing_log_disk_gets_503_never_201_and_the_log_recovers_by_itself() {
    log_disk_fault("failing").await;
}

#[tokio::test]
async fn a_full_log_disk_gets_503_never_201_and_the_log_recovers_by_itself() {
    log_disk_fault("full").await;
}

/// The three phases (healthy, `fault` raised, cleared), a SIGKILL, and the lake's rows.
async fn log_disk_fault(fault: &str) {
    let faults = tempfile::tempdir().expect("temp dir");
    let library = shim(faults.path());
    let flag = faults.path().join(fault);
    let failing = faults.path().join("failing");
    let full = faults.path().join("full");
    let mut server = TestServer::start_with_env(
        &[
            "--collector-ip-rate",
            "0",
            "--collector-identifier-rate",
            "0",
        ],
        &[
            ("LD_PRELOAD", library.as_str()),
            ("TELLTALE_FAULT_FLAG", failing.to_str().expect("utf-8 path")),
            ("TELLTALE_FAULT_FULL", full.to_str().expect("utf-8 path")),
            ("TELLTALE_FAULT_PATH", "/data/wal/"),
        ],
    )
    .await;
    let key = server.key().to_owned();
    let survey = server.provision_ok(&key, "faults", "Faults").await;
    let collector = format!("{}/event/{}", server.base_url(), survey.tracking_key);
    let reference = new_uuid();

    // Phase 1: a healthy disk.
    let mut acknowledged = 0;
    for index in 0..10 {
        assert_eq!(post(&server, &collector, &reference, 1, index).await, 201);
        acknowledged += 10;
    }
    // Phase 2: every fsync of the log fails, or every write. Nothing is acknowledged.
    std::fs::write(&flag, b"").expect("raise the fault");
    for index in 0..10 {
        assert_eq!(
            post(&server, &collector, &reference, 2, index).await,
            503,
            "no 201 while the log cannot sync"
        );
    }
    // The rest of the service stays up meanwhile.
    assert_eq!(server.get("/status/health").await.status, 200);
    // Phase 3: the disk works again; the first request finds the log recovered.
    std::fs::remove_file(&flag).expect("clear the fault");
    for index in 0..10 {
        assert_eq!(post(&server, &collector, &reference, 3, index).await, 201);
        acknowledged += 10;
    }

    // Killed and restarted: the log's replay brings back no refused batch.
    server.kill_hard();
    server.restart().await;
    server
        .lookup_until_counts(
            &key,
            &survey.survey_id,
            &[(reference.clone(), acknowledged)],
            Duration::from_secs(10),
        )
        .await;
    server.terminate_ok().await;
    let rows = duckdb_query(&format!(
        "SELECT CAST(x AS BIGINT) AS phase, count(*) AS n, count(DISTINCT y) AS distinct_events
         FROM read_parquet({}, hive_partitioning = true)
         WHERE reference = '{reference}' GROUP BY phase ORDER BY phase",
        server.events_files()
    ));
    assert_eq!(
        rows,
        vec![
            json!({"phase": 1, "n": 100, "distinct_events": 100}),
            json!({"phase": 3, "n": 100, "distinct_events": 100}),
        ],
        "every acknowledged event once, no refused one"
    );
}

/// Lines of the shim's log of fsync'd paths from `from` on.
fn synced_since(log: &std::path::Path, from: usize) -> Vec<String> {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .skip(from)
        .map(str::to_owned)
        .collect()
}

#[tokio::test]
async fn deleting_a_lake_file_and_log_segments_syncs_their_directories() {
    let faults = tempfile::tempdir().expect("temp dir");
    let library = shim(faults.path());
    let log = faults.path().join("synced");
    let mut server = TestServer::start_with_env(
        &["--api-rate-per-minute", "100000"],
        &[
            ("LD_PRELOAD", library.as_str()),
            ("TELLTALE_FSYNC_LOG", log.to_str().expect("utf-8 path")),
        ],
    )
    .await;
    if !server.is_embedded() {
        // S3 needs no directory syncs; the local folder is what this is about.
        server.terminate_ok().await;
        return;
    }
    let key = server.key().to_owned();
    let survey = server.provision_ok(&key, "syncs", "Syncs").await;
    let collector = format!("{}/event/{}", server.base_url(), survey.tracking_key);
    // The survey's only session: its events file is deleted, not rewritten, by the erasure.
    let reference = new_uuid();
    for index in 0..3 {
        assert_eq!(post(&server, &collector, &reference, 1, index).await, 201);
    }
    let events = server.lake_dir().join("events");
    let file = loop {
        let found = crate::deletion::files_under(&events)
            .into_iter()
            .find(|path| path.extension().is_some_and(|ext| ext == "parquet"));
        if let Some(file) = found {
            break file;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let partition = file.parent().expect("partition dir").to_owned();
    let before = synced_since(&log, 0).len();

    let reply =
        crate::deletion::request_deletion(&server, &key, &survey.survey_id, &reference).await;
    assert_eq!(reply.status, 202, "{}", reply.text);
    let done =
        crate::deletion::wait_deletion_done(&server, &key, &survey.survey_id, &reference).await;
    assert_eq!(done["status"], "completed", "{done}");
    assert!(!file.exists(), "the erasure deleted {}", file.display());
    let synced = synced_since(&log, before);
    let partition_text = partition.display().to_string();
    assert!(
        synced.contains(&partition_text),
        "{partition_text} was not synced after its file was deleted: {synced:?}"
    );
    // The purge deleted the log's segments: the log's directory was synced after.
    let wal = server.data_dir().join("wal").display().to_string();
    assert!(
        synced.contains(&wal),
        "{wal} was not synced after the purge: {synced:?}"
    );
    server.terminate_ok().await;
}

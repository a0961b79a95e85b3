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
         FROM read_parquet({}, hive_partitioning = true)
         WHERE session_id IN ({}) GROUP BY session_id, batch ORDER BY session_id, batch",
        server.events_files(),
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
    // The backup pauses once it has copied the catalog (a fail point of the test build), and a
    // session's erasure is requested then: its tombstone is in the source catalog, not the copy.
    let backup = {
        let to = format!("--to={}", backup_dir.display());
        let mut command = server.command(&["backup", "--json", &to]);
        command.env("FAILPOINTS", "telltale-backup-after-catalog=sleep(3000)");
        tokio::task::spawn_blocking(move || command.output().expect("run telltale backup"))
    };
    let copied_catalog = [
        backup_dir.join("catalog.db"),
        backup_dir.join("catalog.dump"),
    ];
    let deadline = Instant::now() + Duration::from_secs(60);
    while !copied_catalog.iter().any(|path| path.exists()) {
        assert!(
            Instant::now() < deadline,
            "the backup never copied the catalog"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let erased_during = references[1].clone();
    let reply = request_deletion(&server, &key, &survey.survey_id, &erased_during).await;
    assert_eq!(reply.status, 202, "{}", reply.text);
    let output = backup.await.expect("backup task");
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
    assert_eq!(
        report["deletionsRequested"], 2,
        "the erasures requested during and after the backup: {report}"
    );
    let restored = TestServer::start_restored(root, target, &key, &args).await;
    for reference in [&erased_before, &erased_during, &erased_after] {
        let done = wait_deletion_done(&restored, &key, &survey.survey_id, reference).await;
        assert_eq!(done["status"], "completed", "{done}");
    }

    // Every batch acknowledged before the backup began, once; none of an erased session.
    let acknowledged = acknowledged.lock().expect("acknowledged").clone();
    let before: Vec<(String, u64)> = acknowledged
        .iter()
        .filter(|(reference, _, at)| {
            *at < began && *reference != erased_after && *reference != erased_during
        })
        .map(|(reference, number, _)| (reference.clone(), *number))
        .collect();
    assert!(
        before.len() > 30,
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
            *reference != erased_before
                && *reference != erased_after
                && *reference != erased_during,
            "an erased session came back: {reference}"
        );
    }

    // A new run scores (it flushes what the log replayed first), and the restored catalog's
    // statistics agree with its lake.
    let run = restored.run_scoring_to_end(&key, &survey.survey_id).await;
    assert_eq!(run["status"], "completed", "{run}");
    let in_lake = batches_in_lake(&restored, &all);
    let kept: Vec<String> = references[2..].to_vec();
    let rows = restored.lookup_rows(&key, &survey.survey_id, &kept).await;
    for (row, reference) in rows.iter().zip(&kept) {
        let events: u64 = in_lake
            .iter()
            .filter(|((session, _), _)| session == reference)
            .map(|(_, rows)| rows)
            .sum();
        assert_eq!(row["eventCount"], json!(events), "{reference}: {row}");
    }

    // Nothing of an erased session: no evidence, no row of any table, no byte in any file of
    // the restored lake (live or not).
    let erased = [&erased_before, &erased_during, &erased_after];
    for reference in erased {
        let path = format!(
            "/integrations/v1/surveys/{}/sessions/by-reference/{reference}/evidence",
            survey.survey_id
        );
        let reply =
            crate::harness::send(restored.client().get(restored.url(&path)).bearer_auth(&key))
                .await;
        assert_eq!(reply.status, 404, "{reference}: {}", reply.text);
    }
    let listed: Vec<String> = erased.iter().map(|r| format!("'{r}'")).collect();
    for table in ["events", "features", "scores"] {
        let count = restored.cli_ok(&[
            "sql",
            "--format",
            "csv",
            &format!(
                "SELECT count(*) AS n FROM {table} WHERE reference IN ({})",
                listed.join(",")
            ),
        ]);
        assert_eq!(count.trim(), "n\n0", "{table} holds an erased session");
    }
    // Every Parquet file, live or not (a replaced one the vacuum has not taken yet would still
    // count): read, not searched as bytes, since its pages are compressed.
    let lake = restored.lake_dir();
    for table in ["events", "features", "scores"] {
        let files = format!("{}/{table}/survey_id=*/**/*.parquet", lake.display());
        let column = if table == "events" {
            "session_id"
        } else {
            "reference"
        };
        let rows = duckdb_query(&format!(
            "SELECT count(*) AS n FROM read_parquet('{files}', union_by_name = true) \
             WHERE CAST({column} AS VARCHAR) IN ({})",
            listed.join(",")
        ));
        assert_eq!(
            rows[0]["n"],
            json!(0),
            "a {table} file holds an erased session"
        );
    }
    // And no copy of them in the tables' logs or anywhere else as plain bytes.
    let mut folders = vec![lake];
    while let Some(folder) = folders.pop() {
        for entry in std::fs::read_dir(&folder).expect("read the lake") {
            let path = entry.expect("entry").path();
            if path.is_dir() {
                folders.push(path);
                continue;
            }
            let bytes = std::fs::read(&path).expect("read a lake file");
            for reference in erased {
                assert!(
                    !bytes
                        .windows(reference.len())
                        .any(|window| window == reference.as_bytes()),
                    "{} holds the erased session {reference}",
                    path.display()
                );
            }
        }
    }
}

/// The peak resident memory (MiB) of a command run to its end, read from `/proc` while it runs.
fn peak_rss_mib(mut command: std::process::Command) -> (std::process::Output, u64) {
    use std::io::Read;
    let mut child = command
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn");
    let status_path = format!("/proc/{}/status", child.id());
    let mut peak_kib = 0u64;
    let status = loop {
        if let Ok(text) = std::fs::read_to_string(&status_path) {
            for line in text.lines() {
                if let Some(value) = line.strip_prefix("VmHWM:") {
                    let kib: u64 = value
                        .trim()
                        .trim_end_matches("kB")
                        .trim()
                        .parse()
                        .unwrap_or(0);
                    peak_kib = peak_kib.max(kib);
                }
            }
        }
        if let Some(status) = child.try_wait().expect("wait") {
            break status;
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    let (mut stdout, mut stderr) = (Vec::new(), Vec::new());
    if let Some(mut out) = child.stdout.take() {
        out.read_to_end(&mut stdout).expect("stdout");
    }
    if let Some(mut err) = child.stderr.take() {
        err.read_to_end(&mut stderr).expect("stderr");
    }
    (
        std::process::Output {
            status,
            stdout,
            stderr,
        },
        peak_kib / 1024,
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backup_refuses_a_data_dir_without_its_log_and_copies_large_objects_in_bounded_memory() {
    let mut server = TestServer::start().await;
    let key = server.key().to_owned();
    let survey = server.provision_ok(&key, "large", "Large").await;
    let reference = new_uuid();
    for number in 0..4 {
        server
            .collect_ok(
                &survey.tracking_key,
                &reference,
                &numbered_batch(number),
                EVENTS_PER_BATCH as usize,
            )
            .await;
    }
    server
        .lookup_until_counts(
            &key,
            &survey.survey_id,
            &[(reference.clone(), 4 * EVENTS_PER_BATCH)],
            Duration::from_secs(10),
        )
        .await;
    let folder = tempfile::tempdir().expect("temp dir");

    // Another data dir of the same stores (a cron job's machine), with no log: refused, unless
    // said to be empty on purpose.
    let elsewhere = folder.path().join("cron-machine");
    let to = folder.path().join("refused").display().to_string();
    let (catalog, lake) = (
        server.catalog_url(),
        server.data_dir().join("lake").display().to_string(),
    );
    let mut args = vec!["backup", "--to", &to];
    if server.is_embedded() {
        args.extend(["--catalog", &catalog, "--lake", &lake]);
    }
    let refused = TestServer::cli_on(&elsewhere, server.scale_out_stores(), &args);
    assert!(!refused.status.success(), "a backup without its log ran");
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(stderr.contains("no write-ahead log"), "{stderr}");
    args.push("--without-log");
    let allowed = TestServer::cli_on(&elsewhere, server.scale_out_stores(), &args);
    assert!(
        allowed.status.success(),
        "{}",
        String::from_utf8_lossy(&allowed.stderr)
    );

    // A lake object of 1 GiB (a live file's bytes replaced: the copy reads bytes, not rows)
    // backed up in bounded memory. Only on the embedded lake: the test's S3 server holds every
    // object in memory.
    if !server.is_embedded() {
        return;
    }
    server.terminate_ok().await;
    let (largest, _) = server
        .live_files("events")
        .into_iter()
        .next()
        .expect("an events file");
    let path = server.data_dir().join("lake").join(&largest);
    {
        use std::io::Write;
        let mut file = std::fs::File::create(&path).expect("replace the file");
        let block = vec![0x5au8; 8 * 1024 * 1024];
        for _ in 0..128 {
            file.write_all(&block).expect("write");
        }
        file.sync_all().expect("sync");
    }
    let to = folder.path().join("large");
    let to_arg = format!("--to={}", to.display());
    let (output, peak) = peak_rss_mib(server.command(&["backup", "--json", &to_arg]));
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let copied = std::fs::metadata(to.join("lake").join(&largest)).expect("the copy");
    assert_eq!(copied.len(), 1024 * 1024 * 1024);
    eprintln!("backup: a 1 GiB object copied with a peak RSS of {peak} MiB");
    assert!(peak < 256, "the backup's peak RSS was {peak} MiB");
}

#[tokio::test]
async fn a_backup_without_a_log_checks_every_log_is_in_the_lake_and_a_restore_its_tombstones() {
    let mut server = TestServer::start().await;
    let key = server.key().to_owned();
    let survey = server.provision_ok(&key, "checked", "Checked").await;
    let reference = new_uuid();
    for number in 0..3 {
        server
            .collect_ok(
                &survey.tracking_key,
                &reference,
                &numbered_batch(number),
                EVENTS_PER_BATCH as usize,
            )
            .await;
    }
    let folder = tempfile::tempdir().expect("temp dir");
    let elsewhere = folder.path().join("cron-machine");
    let (catalog, lake) = (
        server.catalog_url(),
        server.data_dir().join("lake").display().to_string(),
    );
    let backup_without_log = |server: &TestServer, name: &str| {
        let to = folder.path().join(name).display().to_string();
        let mut args = vec![
            "backup".to_owned(),
            "--json".to_owned(),
            "--to".to_owned(),
            to,
            "--without-log".to_owned(),
            "--instance-lease-secs".to_owned(),
            "2".to_owned(),
        ];
        if server.is_embedded() {
            args.extend(["--catalog".to_owned(), catalog.clone()]);
            args.extend(["--lake".to_owned(), lake.clone()]);
        }
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        TestServer::cli_on(&elsewhere, server.scale_out_stores(), &args)
    };

    // Running: the instance is asked to flush and answers; what it acknowledged is in the lake
    // the backup copies.
    let running = backup_without_log(&server, "running");
    assert!(
        running.status.success(),
        "{}",
        String::from_utf8_lossy(&running.stderr)
    );
    let manifest: Value = serde_json::from_slice(&running.stdout).expect("manifest");
    assert_eq!(manifest["format"], 3, "{manifest}");
    let identity = manifest["catalogIdentity"]
        .as_str()
        .expect("identity")
        .to_owned();

    // Killed, its log not drained: refused, naming it.
    server.kill_hard();
    tokio::time::sleep(Duration::from_millis(2500)).await;
    let killed = backup_without_log(&server, "killed");
    assert!(
        !killed.status.success(),
        "a backup without an undrained log ran"
    );
    let stderr = String::from_utf8_lossy(&killed.stderr);
    assert!(
        stderr.contains("stopped without draining its log"),
        "{stderr}"
    );
    // Stopped cleanly (its final flush done): allowed again.
    server.restart().await;
    server.terminate_ok().await;
    let drained = backup_without_log(&server, "drained");
    assert!(
        drained.status.success(),
        "{}",
        String::from_utf8_lossy(&drained.stderr)
    );

    // A restore whose source of tombstones is another deployment's catalog is refused before
    // anything is written; with the backup's own, it goes ahead.
    let other = TestServer::start().await;
    let backup = folder.path().join("drained").display().to_string();
    let restore_with = |source: &str| {
        let root = TestServer::new_root();
        let output = TestServer::cli_on(
            root.path(),
            None,
            &[
                "restore",
                "--json",
                "--from",
                &backup,
                "--tombstones-from",
                source,
            ],
        );
        (root, output)
    };
    if server.is_embedded() {
        let (wrong_root, wrong) = restore_with(&other.catalog_url());
        assert!(
            !wrong.status.success(),
            "restored with another's tombstones"
        );
        let stderr = String::from_utf8_lossy(&wrong.stderr);
        assert!(
            stderr.contains("is not the catalog this backup was taken from"),
            "{stderr}"
        );
        assert!(
            !wrong_root.path().join("data").join("catalog.db").exists(),
            "nothing was restored"
        );
        let (_root, right) = restore_with(&catalog);
        assert!(
            right.status.success(),
            "{}",
            String::from_utf8_lossy(&right.stderr)
        );
        let report: Value = serde_json::from_slice(&right.stdout).expect("report");
        assert_eq!(report["tombstoneSourceChecked"], true, "{report}");
    }
    assert_eq!(identity.len(), 48, "{identity}");
}

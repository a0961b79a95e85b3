use super::*;

/// The server's default: commit files stay for an hour after a checkpoint.
fn retention() -> Arc<AtomicU64> {
    Arc::new(AtomicU64::new(DEFAULT_RETENTION.as_millis() as u64))
}

const SURVEY: &str = "00112233445566778899aabb";

fn new_file(name: &str, rows: u64) -> NewFile {
    NewFile {
        path: format!("events/survey_id={SURVEY}/date=2026-11-25/{name}.parquet"),
        survey_id: SURVEY.to_owned(),
        date: Some("2026-11-25".to_owned()),
        size: 100 + rows,
        rows,
        received: Some((1_764_000_000_000, 1_764_000_001_000)),
    }
}

async fn lake() -> (tempfile::TempDir, Store) {
    let dir = tempfile::tempdir().expect("tempdir");
    let lake = Store::open(&dir.path().display().to_string(), &[]).expect("lake");
    (dir, lake)
}

fn paths(files: &[LiveFile]) -> Vec<String> {
    let mut paths: Vec<String> = files.iter().map(|file| file.path.clone()).collect();
    paths.sort();
    paths
}

#[tokio::test]
async fn a_table_names_its_format_and_one_of_a_newer_release_is_refused() {
    let (dir, lake) = lake().await;
    drop(
        Table::open(&lake, TableKind::Scores, &[], retention())
            .await
            .expect("create"),
    );
    let first = dir
        .path()
        .join("scores/_delta_log/00000000000000000000.json");
    let log = std::fs::read_to_string(&first).expect("the first commit");
    let written = format!("\"{TABLE_FORMAT_PROPERTY}\":\"{TABLE_FORMAT}\"");
    assert!(log.contains(&written), "{log}");
    // Reopened as it is: the same format.
    Table::open(&lake, TableKind::Scores, &[], retention())
        .await
        .expect("reopen");

    let newer = format!("\"{TABLE_FORMAT_PROPERTY}\":\"{}\"", TABLE_FORMAT + 1);
    std::fs::write(&first, log.replace(&written, &newer)).expect("rewrite the commit");
    match Table::open(&lake, TableKind::Scores, &[], retention()).await {
        Err(error @ crate::LakeError::NewerTableFormat { .. }) => {
            assert!(error.to_string().contains("newer release"), "{error}");
        }
        Err(other) => panic!("expected NewerTableFormat, got {other}"),
        Ok(_) => panic!("a newer table format was opened"),
    }
}

#[tokio::test]
async fn an_append_with_an_application_transaction_commits_once() {
    let (dir, lake) = lake().await;
    let table = Table::open(&lake, TableKind::Events, &[], retention())
        .await
        .expect("open");
    assert_eq!(table.app_version("ingest-a").await.expect("txn"), None);
    let first = table
        .commit(
            Change::Append,
            &[new_file("a-1-5", 5)],
            &[],
            Some(("ingest-a", 5)),
        )
        .await
        .expect("commit");
    assert!(matches!(first, Committed::Version(1)), "{first:?}");
    // Replayed after a crash: the same position commits nothing.
    let again = table
        .commit(
            Change::Append,
            &[new_file("a-1-5", 5)],
            &[],
            Some(("ingest-a", 5)),
        )
        .await
        .expect("commit");
    assert_eq!(again, Committed::AlreadyApplied);
    assert_eq!(table.app_version("ingest-a").await.expect("txn"), Some(5));
    let files = table.live_files(Some(SURVEY)).await.expect("files");
    assert_eq!(files.len(), 1);
    assert_eq!(files[0].path, new_file("a-1-5", 5).path);
    assert_eq!(files[0].date.as_deref(), Some("2026-11-25"));
    assert_eq!(files[0].rows, Some(5));
    assert_eq!(
        files[0].received,
        Some((1_764_000_000_000, 1_764_000_001_000))
    );
    assert!(
        table
            .live_files(Some("ffffffffffffffffffffffff"))
            .await
            .expect("files")
            .is_empty()
    );
    // A second handle (another instance) sees the commit.
    let other = Table::open(&lake, TableKind::Events, &[], retention())
        .await
        .expect("open");
    assert_eq!(other.app_version("ingest-a").await.expect("txn"), Some(5));
    assert!(
        dir.path()
            .join("events/_delta_log/00000000000000000001.json")
            .exists()
    );
}

#[tokio::test]
async fn a_replacement_commits_only_while_its_files_are_live() {
    let (_dir, lake) = lake().await;
    let table = Table::open(&lake, TableKind::Events, &[], retention())
        .await
        .expect("open");
    let (a, b) = (new_file("a-1-1", 1), new_file("a-2-2", 1));
    table
        .commit(Change::Append, &[a.clone(), b.clone()], &[], None)
        .await
        .expect("append");
    let merged = new_file("rewrite_merged", 2);
    let compacted = table
        .commit(
            Change::Compact,
            std::slice::from_ref(&merged),
            &[a.path.clone(), b.path.clone()],
            None,
        )
        .await
        .expect("compact");
    assert!(matches!(compacted, Committed::Version(2)));
    assert_eq!(
        paths(&table.live_files(None).await.expect("files")),
        std::slice::from_ref(&merged.path)
    );
    // An erasure planned on the old snapshot loses: its file is no longer live.
    let erased = new_file("rewrite_erased", 1);
    let lost = table
        .commit(
            Change::Erase,
            &[erased],
            std::slice::from_ref(&a.path),
            None,
        )
        .await
        .expect("erase");
    assert_eq!(lost, Committed::Conflict);
    assert_eq!(
        paths(&table.live_files(None).await.expect("files")),
        std::slice::from_ref(&merged.path)
    );
    // History: version 1 still lists the two flushed files.
    let (version, old) = table.files_as_of(AsOf::Version(1)).await.expect("as of");
    assert_eq!(version, 1);
    assert_eq!(paths(&old), [a.path, b.path]);
}

#[tokio::test]
async fn instances_appending_at_once_all_commit() {
    let (_dir, lake) = lake().await;
    let first = Table::open(&lake, TableKind::Events, &[], retention())
        .await
        .expect("open");
    let mut tasks = Vec::new();
    for instance in 0..3 {
        // Each instance has its own handle, as separate processes would.
        let table = Table::open(&lake, TableKind::Events, &[], retention())
            .await
            .expect("open");
        tasks.push(tokio::spawn(async move {
            for lsn in 1..=10i64 {
                let file = new_file(&format!("i{instance}-{lsn}-{lsn}"), 1);
                let app = format!("ingest-i{instance}");
                let committed = table
                    .commit(Change::Append, &[file], &[], Some((&app, lsn)))
                    .await
                    .expect("commit");
                assert!(matches!(committed, Committed::Version(_)), "{committed:?}");
            }
        }));
    }
    for task in tasks {
        task.await.expect("task");
    }
    assert_eq!(first.live_files(None).await.expect("files").len(), 30);
    for instance in 0..3 {
        let app = format!("ingest-i{instance}");
        assert_eq!(first.app_version(&app).await.expect("txn"), Some(10));
    }
    assert_eq!(first.refresh().await.expect("version"), 30);
}

#[tokio::test]
async fn two_writers_racing_both_land_in_order_with_no_transaction_applied_twice() {
    let (dir, lake) = lake().await;
    let mut tasks = Vec::new();
    for writer in ["a", "b"] {
        let table = Table::open(&lake, TableKind::Events, &[], retention())
            .await
            .expect("open");
        tasks.push(tokio::spawn(async move {
            let app = format!("ingest-{writer}");
            let mut versions = Vec::new();
            for lsn in 1..=25i64 {
                let file = new_file(&format!("{writer}-{lsn}-{lsn}"), 1);
                match table
                    .commit(Change::Append, &[file], &[], Some((&app, lsn)))
                    .await
                    .expect("commit")
                {
                    Committed::Version(version) => versions.push(version),
                    other => panic!("{writer} {lsn}: {other:?}"),
                }
                // Replayed at once (a restart that replays the log): nothing is applied twice.
                let again = table
                    .commit(
                        Change::Append,
                        &[new_file(&format!("{writer}-{lsn}-{lsn}"), 1)],
                        &[],
                        Some((&app, lsn)),
                    )
                    .await
                    .expect("commit");
                assert_eq!(again, Committed::AlreadyApplied, "{writer} {lsn}");
            }
            versions
        }));
    }
    let mut all = Vec::new();
    for task in tasks {
        let versions = task.await.expect("task");
        // In order: each writer's commits land in the order it made them.
        assert!(
            versions.windows(2).all(|pair| pair[0] < pair[1]),
            "{versions:?}"
        );
        all.extend(versions);
    }
    all.sort_unstable();
    assert_eq!(
        all,
        (1..=50).collect::<Vec<u64>>(),
        "every commit landed once"
    );
    // Each application transaction is in the log exactly once.
    let log = dir.path().join("events/_delta_log");
    let mut seen = std::collections::HashMap::new();
    for version in 1..=50u64 {
        let text =
            std::fs::read_to_string(log.join(format!("{version:020}.json"))).expect("commit file");
        for line in text.lines() {
            let action: serde_json::Value = serde_json::from_str(line).expect("action");
            if let Some(txn) = action.get("txn") {
                let key = (
                    txn["appId"].as_str().expect("appId").to_owned(),
                    txn["version"].as_i64().expect("version"),
                );
                *seen.entry(key).or_insert(0) += 1;
            }
        }
    }
    assert_eq!(seen.len(), 50);
    assert!(seen.values().all(|count| *count == 1), "{seen:?}");
}

#[tokio::test]
async fn checkpoints_are_written_and_the_log_names_no_session() {
    let (dir, lake) = lake().await;
    let table = Table::open(&lake, TableKind::Events, &[], retention())
        .await
        .expect("open");
    for lsn in 1..=CHECKPOINT_INTERVAL {
        let file = new_file(&format!("a-{lsn}-{lsn}"), 1);
        table
            .commit(Change::Append, &[file], &[], Some(("ingest-a", lsn as i64)))
            .await
            .expect("commit");
    }
    let log = dir.path().join("events/_delta_log");
    assert!(log.join("_last_checkpoint").exists());
    assert!(
        log.join(format!("{CHECKPOINT_INTERVAL:020}.checkpoint.parquet"))
            .exists()
    );
    let reopened = Table::open(&lake, TableKind::Events, &[], retention())
        .await
        .expect("open");
    assert_eq!(
        reopened.live_files(None).await.expect("files").len() as u64,
        CHECKPOINT_INTERVAL
    );
    assert_eq!(
        reopened.app_version("ingest-a").await.expect("txn"),
        Some(CHECKPOINT_INTERVAL as i64)
    );
    // Statistics hold row counts and times, never a session column.
    let commit = std::fs::read_to_string(log.join("00000000000000000001.json")).expect("read");
    assert!(commit.contains("numRecords"), "{commit}");
    assert!(
        !commit.contains("session_id") && !commit.contains("reference"),
        "{commit}"
    );
}

#[tokio::test]
async fn features_and_scores_tables_are_partitioned_by_survey() {
    let (dir, lake) = lake().await;
    let features = Table::open(&lake, TableKind::Features, &["pointer_speed"], retention())
        .await
        .expect("open");
    let scores = Table::open(&lake, TableKind::Scores, &[], retention())
        .await
        .expect("open");
    let file = NewFile {
        path: format!("scores/survey_id={SURVEY}/run-abc-00001.parquet"),
        survey_id: SURVEY.to_owned(),
        date: None,
        size: 10,
        rows: 3,
        received: None,
    };
    scores
        .commit(
            Change::Append,
            std::slice::from_ref(&file),
            &[],
            Some(("run-1", 1)),
        )
        .await
        .expect("commit");
    let live = scores.live_files(Some(SURVEY)).await.expect("files");
    assert_eq!(paths(&live), [file.path]);
    assert_eq!(live[0].date, None);
    assert!(features.live_files(None).await.expect("files").is_empty());
    let metadata = std::fs::read_to_string(
        dir.path()
            .join("features/_delta_log/00000000000000000000.json"),
    )
    .expect("read");
    assert!(metadata.contains("pointer_speed"), "{metadata}");
}

#[tokio::test]
async fn a_table_of_an_older_release_gains_the_features_added_since() {
    let (_dir, lake) = lake().await;
    let older = Table::open(&lake, TableKind::Features, &["pointer_speed"], retention())
        .await
        .expect("open");
    let file = NewFile {
        path: format!("features/survey_id={SURVEY}/run-abc-00001.parquet"),
        survey_id: SURVEY.to_owned(),
        date: None,
        size: 10,
        rows: 3,
        received: None,
    };
    older
        .commit(
            Change::Append,
            std::slice::from_ref(&file),
            &[],
            Some(("run-1", 1)),
        )
        .await
        .expect("commit");
    // Two instances of the newer release open it at once: both find every column, and the
    // older files stay live.
    let names = ["pointer_speed", "touch_taps", "free_keystrokes"];
    let (a, b) = tokio::join!(
        Table::open(&lake, TableKind::Features, &names, retention()),
        Table::open(&lake, TableKind::Features, &names, retention()),
    );
    for table in [a.expect("open"), b.expect("open")] {
        table.refresh().await.expect("refresh");
        let state = table.state.lock().await;
        let schema = state.snapshot().expect("snapshot").schema();
        for name in names {
            let field = schema.field(name).expect("the column is there");
            assert!(field.is_nullable(), "{name}");
        }
    }
    let newer = Table::open(&lake, TableKind::Features, &names, retention())
        .await
        .expect("open");
    assert_eq!(
        paths(&newer.live_files(None).await.expect("files")),
        [file.path]
    );
}

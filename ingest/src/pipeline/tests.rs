use super::*;
use arrow::array::{Array, AsArray};
use arrow::datatypes::Int32Type;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

struct Fixture {
    dir: tempfile::TempDir,
    catalog: Arc<dyn Catalog>,
    lake: Lake,
    tracking_key: String,
    survey_id: SurveyId,
}

async fn fixture() -> Fixture {
    let dir = tempfile::tempdir().expect("tempdir");
    let catalog = catalog::open(&format!(
        "sqlite://{}",
        dir.path().join("catalog.db").display()
    ))
    .await
    .expect("catalog");
    let org = catalog.create_organization("org").await.expect("org");
    let survey = catalog
        .provision_survey(&org.id, "s", "S")
        .await
        .expect("survey");
    let lake = Lake::open(&dir.path().join("lake").display().to_string(), &[], &[])
        .await
        .expect("lake");
    Fixture {
        tracking_key: survey.tracking_key.to_string(),
        survey_id: survey.id,
        dir,
        catalog,
        lake,
    }
}

fn config(fixture: &Fixture, flush_bytes: usize) -> IngestConfig {
    let mut config = IngestConfig::new("test", fixture.dir.path().join("wal"));
    // Background consumers effectively off: the tests drive them.
    config.stats_interval = Duration::from_secs(3600);
    config.flush_interval = Duration::from_secs(3600);
    config.flush_bytes = flush_bytes;
    config
}

async fn start(fixture: &Fixture, flush_bytes: usize) -> Result<Ingestor, IngestError> {
    Ingestor::start(
        config(fixture, flush_bytes),
        fixture.catalog.clone(),
        fixture.lake.clone(),
    )
    .await
}

fn pointer_batch(start: i32, count: i32) -> Bytes {
    let events: Vec<String> = (start..start + count)
        .map(|i| {
            format!(
                r#"{{"type":"pointermove","timestamp":{},"data":{{"x":{i},"y":{i},"pointerType":"mouse","trusted":true}}}}"#,
                1_763_800_000_000i64 + i64::from(i) * 16
            )
        })
        .collect();
    Bytes::from(format!("{{\"events\":[{}]}}", events.join(",")))
}

/// A flush larger than a row group is encoded a row group at a time into one file: every
/// row once, in session order, in full row groups but the last.
#[test]
fn a_large_flush_is_one_file_of_full_row_groups() {
    let survey_id = SurveyId::parse("00112233445566778899aabb").expect("id");
    let (sessions, batches, per_batch) = (3, 500, 100);
    let mut records = Vec::new();
    let mut lsn = 0;
    // Interleaved as they arrive; the flush sorts them by session.
    for batch in 0..batches {
        for session in 0..sessions {
            lsn += 1;
            records.push(Arc::new(WalRecord {
                lsn,
                received_at: 1_763_800_000_000 + lsn as i64,
                survey_id: survey_id.clone(),
                identifier: format!("session-{session}"),
                body: pointer_batch(batch * per_batch, per_batch),
            }));
        }
    }
    let (files, _) =
        event_files::build_event_files(&records, &HashMap::new(), None, "test", 1, lsn)
            .expect("files");
    assert_eq!(files.len(), 1, "one survey, one day: one file");
    let (bytes, file) = &files[0];
    let total = (sessions * batches * per_batch) as usize;
    assert_eq!(file.rows, total as u64);

    let reader =
        ParquetRecordBatchReaderBuilder::try_new(Bytes::from(bytes.clone())).expect("parquet");
    let groups: Vec<usize> = reader
        .metadata()
        .row_groups()
        .iter()
        .map(|group| group.num_rows() as usize)
        .collect();
    assert_eq!(
        groups,
        vec![
            tables::EVENTS_ROW_GROUP_ROWS,
            total - tables::EVENTS_ROW_GROUP_ROWS
        ]
    );
    let mut rows = Vec::new();
    for batch in reader.build().expect("reader") {
        let batch = batch.expect("batch");
        let sessions = arrow::compute::cast(
            batch.column_by_name("session_id").expect("session_id"),
            &arrow::datatypes::DataType::Utf8,
        )
        .expect("cast");
        let sessions = sessions.as_string::<i32>();
        let xs = batch
            .column_by_name("x")
            .expect("x")
            .as_primitive::<Int32Type>();
        for row in 0..batch.num_rows() {
            rows.push((sessions.value(row).to_owned(), xs.value(row)));
        }
    }
    let expected: Vec<(String, i32)> = (0..sessions)
        .flat_map(|session| {
            (0..batches * per_batch).map(move |x| (format!("session-{session}"), x))
        })
        .collect();
    assert_eq!(rows, expected);
}

/// (session, x) of every row of every live events file.
async fn read_events(fixture: &Fixture) -> Vec<(String, i32)> {
    let files = fixture
        .lake
        .table(TableKind::Events)
        .live_files(None)
        .await
        .expect("files");
    files
        .iter()
        .flat_map(|file| read_events_of(fixture, &file.path))
        .collect()
}

#[tokio::test]
async fn a_backlog_is_flushed_in_bounded_files_sorted_by_session() {
    let fixture = fixture().await;
    let ingestor = start(&fixture, 4096).await.expect("start");
    // Interleave two sessions so sorting has work to do.
    for round in 0..20 {
        for identifier in ["b-session", "a-session"] {
            let accepted = ingestor
                .accept(
                    &fixture.tracking_key,
                    identifier,
                    pointer_batch(round * 10, 10),
                )
                .await
                .expect("accept");
            assert_eq!(accepted, Accepted::Stored { count: 10 });
        }
    }
    // Part may already be flushed in the background (the backlog passed the bound).
    ingestor.shutdown().await.expect("shutdown");
    let files = fixture
        .lake
        .table(TableKind::Events)
        .live_files(None)
        .await
        .expect("files");
    assert!(files.len() > 1, "a 4 KiB flush bound must split 400 events");
    assert_eq!(files.iter().map(|f| f.rows.unwrap_or(0)).sum::<u64>(), 400);
    for file in &files {
        let rows = read_events_of(&fixture, &file.path);
        let mut sorted = rows.clone();
        sorted.sort_by(|a, b| a.0.cmp(&b.0));
        assert_eq!(
            rows, sorted,
            "rows of {} sorted by session, arrival order kept",
            file.path
        );
    }
    let rows = read_events(&fixture).await;
    assert_eq!(rows.len(), 400);
    for session in ["a-session", "b-session"] {
        let xs: Vec<i32> = rows
            .iter()
            .filter(|(s, _)| s == session)
            .map(|(_, x)| *x)
            .collect();
        assert_eq!(
            xs,
            (0..200).collect::<Vec<_>>(),
            "{session} complete and in order"
        );
    }
}

fn read_events_of(fixture: &Fixture, path: &str) -> Vec<(String, i32)> {
    let bytes =
        Bytes::from(std::fs::read(fixture.dir.path().join("lake").join(path)).expect("read"));
    let reader = ParquetRecordBatchReaderBuilder::try_new(bytes)
        .expect("parquet")
        .build()
        .expect("reader");
    let mut rows = Vec::new();
    for batch in reader {
        let batch = batch.expect("batch");
        let sessions =
            arrow::compute::cast(batch.column(1), &arrow::datatypes::DataType::Utf8).expect("cast");
        let sessions = sessions.as_string::<i32>();
        let xs = batch.column(6).as_primitive::<Int32Type>();
        assert_eq!(xs.null_count(), 0, "pointer events keep typed x");
        for row in 0..batch.num_rows() {
            rows.push((sessions.value(row).to_owned(), xs.value(row)));
        }
    }
    rows
}

#[tokio::test]
async fn an_unflushed_log_replays_exactly_once_after_a_restart() {
    let fixture = fixture().await;
    {
        let ingestor = start(&fixture, 1 << 20).await.expect("start");
        for round in 0..5 {
            ingestor
                .accept(&fixture.tracking_key, "s1", pointer_batch(round * 4, 4))
                .await
                .expect("accept");
        }
        // Statistics applied, the lake not: the two consumers are at different positions.
        ingestor.apply_stats().await.expect("stats");
        // Stopped without shutdown, like a crash: nothing else reaches the catalog or lake.
        ingestor.halt().await;
    }
    let ingestor = start(&fixture, 1 << 20).await.expect("restart");
    let summaries = fixture
        .catalog
        .lookup_sessions(&fixture.survey_id, &["s1".to_owned()])
        .await
        .expect("lookup");
    assert!(
        summaries.is_empty(),
        "s1 is not a UUID, so it has no reference"
    );
    let rows = read_events(&fixture).await;
    assert_eq!(rows.len(), 20, "replayed into the lake once");
    ingestor.shutdown().await.expect("shutdown");
    // The log stays locked while a handle lives.
    drop(ingestor);
    let restarted = start(&fixture, 1 << 20).await.expect("third start");
    restarted.shutdown().await.expect("shutdown");
    assert_eq!(read_events(&fixture).await.len(), 20, "no second replay");
}

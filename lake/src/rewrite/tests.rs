use super::*;
use crate::tables::{EVENTS_SCHEMA, encode, writer_properties};
use arrow::array::{
    BooleanBuilder, Int32Builder, StringDictionaryBuilder, TimestampMillisecondBuilder,
    new_null_array,
};

const SURVEY: &str = "00112233445566778899aabb";
const REFERENCE: &str = "4f1c2d3e-0000-4000-8000-000000000001";

/// An events batch with `per_session` mouse pointer moves (x = 0, 1, ...) for each
/// (identifier, reference), in the order given; the columns a move leaves empty are null.
fn events_batch(sessions: &[(&str, Option<&str>)], per_session: i32) -> RecordBatch {
    let mut survey = StringDictionaryBuilder::<Int32Type>::new();
    let mut session_id = StringDictionaryBuilder::<Int32Type>::new();
    let mut reference = StringDictionaryBuilder::<Int32Type>::new();
    let mut received = TimestampMillisecondBuilder::new().with_timezone("UTC");
    let mut event_time = TimestampMillisecondBuilder::new().with_timezone("UTC");
    let mut event_type = StringDictionaryBuilder::<Int32Type>::new();
    let (mut x, mut y) = (Int32Builder::new(), Int32Builder::new());
    let mut pointer_type = StringDictionaryBuilder::<Int32Type>::new();
    let mut trusted = BooleanBuilder::new();
    for (identifier, session_reference) in sessions {
        for i in 0..per_session {
            survey.append_value(SURVEY);
            session_id.append_value(identifier);
            reference.append_option(*session_reference);
            received.append_value(1_763_800_000_000);
            event_time.append_value(1_763_800_000_000 + i64::from(i));
            event_type.append_value("pointermove");
            x.append_value(i);
            y.append_value(1);
            pointer_type.append_value("mouse");
            trusted.append_value(true);
        }
    }
    let mut columns: Vec<ArrayRef> = vec![
        Arc::new(survey.finish()),
        Arc::new(session_id.finish()),
        Arc::new(reference.finish()),
        Arc::new(received.finish()),
        Arc::new(event_time.finish()),
        Arc::new(event_type.finish()),
        Arc::new(x.finish()),
        Arc::new(y.finish()),
        Arc::new(pointer_type.finish()),
        Arc::new(trusted.finish()),
    ];
    let rows = columns[0].len();
    for field in &EVENTS_SCHEMA.fields()[columns.len()..] {
        columns.push(new_null_array(field.data_type(), rows));
    }
    RecordBatch::try_new(EVENTS_SCHEMA.clone(), columns).expect("an events batch")
}

fn events_file(sessions: &[(&str, Option<&str>)], per_session: i32) -> Bytes {
    let batch = events_batch(sessions, per_session);
    Bytes::from(encode(TableKind::Events, &batch).expect("encode"))
}

fn sessions_of(bytes: Vec<u8>) -> Vec<String> {
    let reader = ParquetRecordBatchReaderBuilder::try_new(Bytes::from(bytes))
        .expect("reader")
        .build()
        .expect("build");
    let mut sessions = Vec::new();
    for batch in reader {
        let batch = batch.expect("batch");
        let column =
            arrow::compute::cast(batch.column(1), &DataType::Utf8).expect("cast to strings");
        sessions.extend(
            column
                .as_string::<i32>()
                .iter()
                .map(|value| value.unwrap_or_default().to_owned()),
        );
    }
    sessions
}

fn session() -> SessionRows {
    SessionRows {
        reference: REFERENCE.to_owned(),
        identifiers: HashSet::from(["tab-2".to_owned()]),
    }
}

#[test]
fn erasing_drops_rows_by_reference_and_by_linked_identifier_only() {
    let bytes = events_file(
        &[
            ("a-other", None),
            ("tab-1", Some(REFERENCE)),
            // Linked in the catalog, but its rows were written before the link was known.
            ("tab-2", None),
            ("z-other", Some("9f1c2d3e-0000-4000-8000-000000000009")),
        ],
        5,
    );
    let Erased::Rewritten(rewritten) =
        erase_rows(bytes, &session(), writer_properties(TableKind::Events)).expect("erase")
    else {
        panic!("the file holds the session");
    };
    assert_eq!(rewritten.rows, 10);
    let mut sessions = sessions_of(rewritten.bytes);
    sessions.dedup();
    assert_eq!(sessions, ["a-other", "z-other"]);
}

#[test]
fn row_groups_without_the_session_are_copied_and_read_back_intact() {
    let sessions = [
        ("a-other", None),
        ("b-other", None),
        ("tab-1", Some(REFERENCE)),
        ("y-other", None),
    ];
    let batch = events_batch(&sessions, 7);
    // Row groups of 5 rows: most hold no row of the session and are copied as they are.
    let small_groups = || {
        writer_properties(TableKind::Events)
            .into_builder()
            .set_max_row_group_row_count(Some(5))
            .build()
    };
    let mut original = Vec::new();
    let mut writer =
        ArrowWriter::try_new(&mut original, batch.schema(), Some(small_groups())).expect("w");
    writer.write(&batch).expect("write");
    writer.close().expect("close");
    let Erased::Rewritten(rewritten) =
        erase_rows(Bytes::from(original), &session(), small_groups()).expect("erase")
    else {
        panic!("the file holds the session");
    };
    assert_eq!(rewritten.rows, 21);
    let reader = ParquetRecordBatchReaderBuilder::try_new(Bytes::from(rewritten.bytes))
        .expect("reader")
        .build()
        .expect("build");
    let mut rows = Vec::new();
    for batch in reader {
        let batch = batch.expect("batch");
        assert_eq!(
            batch.schema().field(1).data_type(),
            EVENTS_SCHEMA.field(1).data_type()
        );
        let sessions = arrow::compute::cast(batch.column(1), &DataType::Utf8).expect("cast");
        let xs = batch.column(6).as_primitive::<Int32Type>();
        for row in 0..batch.num_rows() {
            rows.push((
                sessions.as_string::<i32>().value(row).to_owned(),
                xs.value(row),
            ));
        }
    }
    let expected: Vec<(String, i32)> = ["a-other", "b-other", "y-other"]
        .iter()
        .flat_map(|session| (0..7).map(move |x| ((*session).to_owned(), x)))
        .collect();
    assert_eq!(rows, expected);
}

#[test]
fn files_without_the_session_are_untouched_and_files_of_only_it_are_emptied() {
    let other = events_file(&[("a-other", None)], 3);
    assert!(matches!(
        erase_rows(other, &session(), writer_properties(TableKind::Events)).expect("erase"),
        Erased::Untouched
    ));
    let only = events_file(&[("tab-1", Some(REFERENCE)), ("tab-2", None)], 3);
    assert!(matches!(
        erase_rows(only, &session(), writer_properties(TableKind::Events)).expect("erase"),
        Erased::Emptied
    ));
}

#[test]
fn merging_sorts_by_session_and_keeps_each_sessions_order() {
    let first = events_file(&[("b", None), ("c", None)], 2);
    let second = events_file(&[("a", None), ("b", None)], 2);
    let merged = merge_sorted(
        &[first, second],
        "session_id",
        writer_properties(TableKind::Events),
    )
    .expect("merge");
    assert_eq!(merged.rows, 8);
    assert_eq!(
        sessions_of(merged.bytes),
        ["a", "a", "b", "b", "b", "b", "c", "c"]
    );
}

/// `sessions` written in row groups of 5 rows to an in-memory store at `f.parquet`.
async fn stored_file(
    sessions: &[(&str, Option<&str>)],
) -> (Arc<dyn object_store::ObjectStore>, u64) {
    use object_store::ObjectStoreExt;
    let batch = events_batch(sessions, 7);
    let properties = writer_properties(TableKind::Events)
        .into_builder()
        .set_max_row_group_row_count(Some(5))
        .build();
    let mut bytes = Vec::new();
    let mut writer = ArrowWriter::try_new(&mut bytes, batch.schema(), Some(properties)).expect("w");
    writer.write(&batch).expect("write");
    writer.close().expect("close");
    let size = bytes.len() as u64;
    let store: Arc<dyn object_store::ObjectStore> = Arc::new(object_store::memory::InMemory::new());
    store
        .put(&"f.parquet".into(), bytes.into())
        .await
        .expect("put");
    (store, size)
}

#[tokio::test]
async fn the_probe_finds_a_session_by_reference_or_linked_identifier_and_no_other() {
    let by_reference = [
        ("a-other", None),
        ("tab-1", Some(REFERENCE)),
        ("y-other", None),
    ];
    let by_identifier = [("a-other", None), ("tab-2", None), ("y-other", None)];
    let neither = [
        ("a-other", None),
        ("tab-3", Some("9f1c2d3e-0000-4000-8000-000000000009")),
    ];
    for (sessions, expected) in [
        (&by_reference[..], true),
        (&by_identifier[..], true),
        (&neither[..], false),
    ] {
        let (store, size) = stored_file(sessions).await;
        let holds = holds_session(&store, "f.parquet", size, &session())
            .await
            .expect("probe");
        assert_eq!(holds, expected, "{sessions:?}");
    }
}

#[tokio::test]
async fn the_probe_reads_only_row_groups_whose_statistics_allow_the_session() {
    use object_store::ObjectStoreExt;
    // Sorted by session, as compaction writes them: 7 rows a session in groups of 5.
    let sessions = [
        ("a-other", None),
        ("b-other", None),
        ("tab-2", None),
        ("x-other", None),
        ("y-other", None),
    ];
    let (store, size) = stored_file(&sessions).await;
    let bytes = store
        .get(&"f.parquet".into())
        .await
        .expect("get")
        .bytes()
        .await
        .expect("bytes");
    let metadata = parquet::file::metadata::ParquetMetaDataReader::new()
        .parse_and_finish(&bytes)
        .expect("metadata");
    let leaves = [(1, "session_id"), (2, "reference")];
    let candidates: Vec<usize> = (0..metadata.num_row_groups())
        .filter(|group| probe::may_hold(metadata.row_group(*group), &leaves, &session()))
        .collect();
    // Rows 14-20 are tab-2's: groups 2 (rows 10-14) to 4 (rows 20-24).
    assert_eq!(candidates, [2, 3, 4]);
    assert!(
        holds_session(&store, "f.parquet", size, &session())
            .await
            .expect("probe")
    );
}

#[tokio::test]
async fn the_probe_fails_on_a_file_that_is_not_parquet() {
    use object_store::ObjectStoreExt;
    let store: Arc<dyn object_store::ObjectStore> = Arc::new(object_store::memory::InMemory::new());
    store
        .put(
            &"cut.parquet".into(),
            Bytes::from_static(b"PAR1 cut short").into(),
        )
        .await
        .expect("put");
    assert!(
        holds_session(&store, "cut.parquet", 14, &session())
            .await
            .is_err()
    );
}

#[tokio::test]
async fn the_probe_finds_values_longer_than_the_truncated_statistics() {
    // Statistics keep 64 bytes: these share a longer prefix, so the bounds are cut and rounded.
    let prefix = "é".repeat(40);
    let (low, held, high) = (
        format!("{prefix}-a"),
        format!("{prefix}-m"),
        format!("{prefix}-z"),
    );
    let session = SessionRows {
        reference: REFERENCE.to_owned(),
        identifiers: HashSet::from([held.clone()]),
    };
    let (store, size) = stored_file(&[(&low, None), (&held, None), (&high, None)]).await;
    assert!(
        holds_session(&store, "f.parquet", size, &session)
            .await
            .expect("probe")
    );
    let absent = SessionRows {
        reference: REFERENCE.to_owned(),
        identifiers: HashSet::from([format!("{prefix}-q")]),
    };
    assert!(
        !holds_session(&store, "f.parquet", size, &absent)
            .await
            .expect("probe")
    );
}

/// Many sorted inputs merged by byte ranges a chunk at a time (`merge_sorted_files`) give the
/// rows of the in-memory merge, in its order: sessions sorted, each session's rows in the
/// inputs' order, across chunk and row-group boundaries.
#[tokio::test]
async fn the_ranged_merge_gives_the_in_memory_merges_rows_in_its_order() {
    use object_store::ObjectStoreExt;
    let store: Arc<dyn object_store::ObjectStore> = Arc::new(object_store::memory::InMemory::new());
    let properties = writer_properties(TableKind::Events)
        .into_builder()
        .set_max_row_group_row_count(Some(1000))
        .build();
    let mut whole = Vec::new();
    let mut inputs = Vec::new();
    for file in 0..7 {
        // Each input sorted by session; sessions shared between inputs, enough rows that the
        // merge takes several chunks.
        let names: Vec<String> = (0..40)
            .filter(|n| (n + file) % 3 != 0)
            .map(|n| format!("s{:03}", (n * 7 + file) % 97))
            .collect();
        let mut sorted: Vec<&str> = names.iter().map(String::as_str).collect();
        sorted.sort_unstable();
        sorted.dedup();
        let sessions: Vec<(&str, Option<&str>)> = sorted.iter().map(|s| (*s, None)).collect();
        // A length of its own per input: rows of one session taken in another input order
        // would read differently.
        let batch = events_batch(&sessions, 400 + file * 3);
        let mut bytes = Vec::new();
        let mut writer =
            ArrowWriter::try_new(&mut bytes, batch.schema(), Some(properties.clone())).expect("w");
        writer.write(&batch).expect("write");
        writer.close().expect("close");
        let path = format!("f{file}.parquet");
        let size = bytes.len() as u64;
        store
            .put(&path.as_str().into(), bytes.clone().into())
            .await
            .expect("put");
        whole.push(Bytes::from(bytes));
        inputs.push(MergeInput { path, size });
    }
    let expected = merge_sorted(&whole, "session_id", writer_properties(TableKind::Events))
        .expect("in memory");
    let ranged = merge_sorted_files(
        &store,
        &inputs,
        "session_id",
        writer_properties(TableKind::Events),
    )
    .await
    .expect("ranged");
    assert!(
        ranged.rows as usize > 2 * merge::CHUNK_ROWS,
        "{} rows",
        ranged.rows
    );
    assert_eq!(ranged.rows, expected.rows);
    let rows_of = |bytes: Vec<u8>| -> Vec<(String, i64)> {
        let reader = ParquetRecordBatchReaderBuilder::try_new(Bytes::from(bytes))
            .expect("read")
            .build()
            .expect("build");
        let mut rows = Vec::new();
        for batch in reader {
            let batch = batch.expect("batch");
            let sessions = arrow::compute::cast(
                batch.column_by_name("session_id").expect("session_id"),
                &DataType::Utf8,
            )
            .expect("cast");
            let times = arrow::compute::cast(
                batch.column_by_name("event_time").expect("event_time"),
                &DataType::Int64,
            )
            .expect("cast");
            let times = times.as_primitive::<arrow::datatypes::Int64Type>();
            for row in 0..batch.num_rows() {
                rows.push((
                    sessions.as_string::<i32>().value(row).to_owned(),
                    times.value(row),
                ));
            }
        }
        rows
    };
    assert_eq!(rows_of(ranged.bytes), rows_of(expected.bytes));
}

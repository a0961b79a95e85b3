//! The lake's three tables: their schemas, Parquet writer settings and object paths.
//!
//! ```text
//! events/survey_id=<24hex>/date=<YYYY-MM-DD>/<instance>-<first lsn>-<last lsn>.parquet   (a flush)
//! events/survey_id=<24hex>/date=<YYYY-MM-DD>/rewrite_<time>_<random>.parquet            (erasure, compaction)
//! features/survey_id=<24hex>/<run id>-<attempt>-<seq>.parquet
//! scores/survey_id=<24hex>/<run id>-<attempt>-<seq>.parquet
//! ```
//!
//! The layout and the columns are a public contract (DESIGN.md: lake layout): data scientists
//! read these files with their own tools. `events` rows are sorted by session within a file;
//! `features` and `scores` rows are appended per scoring run, told apart by `run_id` and their
//! time (a session scored twice has rows in both runs' files).

use std::sync::{Arc, LazyLock};

use arrow::array::RecordBatch;
use arrow::datatypes::{DataType, Field, Schema, SchemaRef, TimeUnit};
use parquet::arrow::ArrowWriter;
use parquet::basic::{Compression, Encoding, ZstdLevel};
use parquet::file::metadata::SortingColumn;
use parquet::file::properties::{EnabledStatistics, WriterProperties};
use parquet::schema::types::ColumnPath;

/// The lake's three tables.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum TableKind {
    Events,
    Features,
    Scores,
}

impl TableKind {
    pub const ALL: [TableKind; 3] = [TableKind::Events, TableKind::Features, TableKind::Scores];

    /// The table's folder under the lake's root, and its name.
    pub fn as_str(self) -> &'static str {
        match self {
            TableKind::Events => "events",
            TableKind::Features => "features",
            TableKind::Scores => "scores",
        }
    }
}

fn dictionary() -> DataType {
    DataType::Dictionary(Box::new(DataType::Int32), Box::new(DataType::Utf8))
}

fn timestamp() -> DataType {
    DataType::Timestamp(TimeUnit::Millisecond, Some("UTC".into()))
}

/// The schema of `events` files, in column order.
pub static EVENTS_SCHEMA: LazyLock<SchemaRef> = LazyLock::new(|| {
    Arc::new(Schema::new(vec![
        Field::new("survey_id", dictionary(), false),
        Field::new("session_id", dictionary(), false),
        Field::new("reference", dictionary(), true),
        Field::new("received_at", timestamp(), false),
        Field::new("event_time", timestamp(), true),
        Field::new("type", dictionary(), true),
        Field::new("x", DataType::Int32, true),
        Field::new("y", DataType::Int32, true),
        Field::new("pointer_type", dictionary(), true),
        Field::new("trusted", DataType::Boolean, true),
        Field::new("button", DataType::Int32, true),
        Field::new("target", dictionary(), true),
        Field::new("key_class", dictionary(), true),
        Field::new("repeat", DataType::Boolean, true),
        Field::new("hold_ms", DataType::Float64, true),
        Field::new("flight_ms", DataType::Float64, true),
        Field::new("input_type", dictionary(), true),
        Field::new("length_delta", DataType::Int32, true),
        Field::new("field", DataType::Int32, true),
        Field::new("length", DataType::Int32, true),
        Field::new("dx", DataType::Float64, true),
        Field::new("dy", DataType::Float64, true),
        Field::new("delta_mode", DataType::Int32, true),
        Field::new("force", DataType::Float64, true),
        Field::new("radius", DataType::Float64, true),
        Field::new("state", dictionary(), true),
        Field::new("width", DataType::Int32, true),
        Field::new("height", DataType::Int32, true),
        Field::new("payload", DataType::Utf8, true),
    ]))
});

/// The schema of `features` files: keys, then one nullable `Float64` per feature, in the order
/// the scorer names them.
pub fn features_schema(feature_names: &[&str]) -> SchemaRef {
    let mut fields = vec![
        Field::new("survey_id", DataType::Utf8, false),
        Field::new("reference", DataType::Utf8, false),
        Field::new("run_id", DataType::Utf8, false),
        Field::new("computed_at", timestamp(), false),
    ];
    fields.extend(
        feature_names
            .iter()
            .map(|name| Field::new(*name, DataType::Float64, true)),
    );
    Arc::new(Schema::new(fields))
}

/// The schema of `scores` files.
pub static SCORES_SCHEMA: LazyLock<SchemaRef> = LazyLock::new(|| {
    Arc::new(Schema::new(vec![
        Field::new("survey_id", DataType::Utf8, false),
        Field::new("reference", DataType::Utf8, false),
        Field::new("human_score_percent", DataType::Float64, false),
        Field::new("score_band", DataType::Utf8, false),
        Field::new("scored_at", timestamp(), false),
        Field::new("model_version", DataType::Utf8, false),
        Field::new("run_id", DataType::Utf8, false),
        // Int64, not UInt64: the Delta schema has no unsigned type (it says `long`), and readers
        // that check the files against it (polars) refuse a uint64 column.
        Field::new("event_count", DataType::Int64, false),
        Field::new(
            "reasons",
            DataType::List(Arc::new(Field::new("item", DataType::Utf8, true))),
            false,
        ),
    ]))
});

/// The column that names a session in a table's rows: an erasure drops the rows whose value is
/// the session's reference or (in `events`) one of its linked identifiers.
pub fn session_column(kind: TableKind) -> &'static str {
    match kind {
        TableKind::Events => "session_id",
        TableKind::Features | TableKind::Scores => "reference",
    }
}

/// Writer settings of a table's files.
pub fn writer_properties(kind: TableKind) -> WriterProperties {
    match kind {
        TableKind::Events => events_writer_properties(),
        TableKind::Features | TableKind::Scores => WriterProperties::builder()
            .set_compression(Compression::ZSTD(ZstdLevel::try_new(3).unwrap_or_default()))
            .set_statistics_enabled(EnabledStatistics::Page)
            .set_max_row_group_row_count(Some(RESULTS_ROW_GROUP_ROWS))
            .build(),
    }
}

/// Rows per row group of a `features` or `scores` file (a scoring step writes up to 50,000
/// sessions to one): erasing a session re-encodes the row group holding it and copies the
/// others as they are (`rewrite::erase_rows`). With one row group per file an erasure
/// re-encoded a whole step's features (about 90 ms a file, benches/README.md `scoring_run`).
pub const RESULTS_ROW_GROUP_ROWS: usize = 4096;

/// Rows per row group of an `events` file. DuckDB's default size: small enough that erasing a
/// session from a large compacted file re-encodes one row group and copies the others as they
/// are (see `rewrite`).
pub const EVENTS_ROW_GROUP_ROWS: usize = 128 * 1024;

/// `events`: zstd, page statistics, sorted by session; the time and coordinate columns, which
/// change by small steps, delta-encoded rather than dictionary-encoded.
fn events_writer_properties() -> WriterProperties {
    let mut builder = WriterProperties::builder()
        .set_compression(Compression::ZSTD(ZstdLevel::try_new(6).unwrap_or_default()))
        .set_statistics_enabled(EnabledStatistics::Page)
        .set_sorting_columns(Some(vec![SortingColumn {
            column_idx: 1,
            descending: false,
            nulls_first: false,
        }]))
        .set_max_row_group_row_count(Some(EVENTS_ROW_GROUP_ROWS));
    for column in ["received_at", "event_time", "x", "y"] {
        let path = ColumnPath::from(column);
        builder = builder
            .set_column_dictionary_enabled(path.clone(), false)
            .set_column_encoding(path, Encoding::DELTA_BINARY_PACKED);
    }
    builder.build()
}

/// Encodes one batch as a complete Parquet file of `kind` (an `events` batch must already be
/// sorted by session).
pub fn encode(
    kind: TableKind,
    batch: &RecordBatch,
) -> Result<Vec<u8>, parquet::errors::ParquetError> {
    let buffer = Vec::with_capacity(batch.get_array_memory_size() / 4 + 1024);
    let mut encoder = FileEncoder::with_buffer(kind, batch.schema(), buffer)?;
    encoder.write(batch)?;
    encoder.finish()
}

/// Encodes batches given one after another as one Parquet file of `kind`, so that a large file
/// is built a row group at a time rather than from one batch holding all its rows (a flush's
/// memory then does not grow with `--flush-bytes`). Batches of an `events` file must follow
/// each other in session order.
#[derive(Debug)]
pub struct FileEncoder {
    writer: ArrowWriter<Vec<u8>>,
}

impl FileEncoder {
    pub fn new(kind: TableKind, schema: SchemaRef) -> Result<Self, parquet::errors::ParquetError> {
        Self::with_buffer(kind, schema, Vec::new())
    }

    fn with_buffer(
        kind: TableKind,
        schema: SchemaRef,
        buffer: Vec<u8>,
    ) -> Result<Self, parquet::errors::ParquetError> {
        let writer = ArrowWriter::try_new(buffer, schema, Some(writer_properties(kind)))?;
        Ok(Self { writer })
    }

    pub fn write(&mut self, batch: &RecordBatch) -> Result<(), parquet::errors::ParquetError> {
        self.writer.write(batch)
    }

    /// Writes the last row group and the footer; returns the file's bytes.
    pub fn finish(self) -> Result<Vec<u8>, parquet::errors::ParquetError> {
        self.writer.into_inner()
    }
}

/// The object path of the events file a flush writes.
///
/// ```
/// assert_eq!(
///     lake::tables::events_file_path("00112233445566778899aabb", "2026-11-22", "inst", 7, 42),
///     "events/survey_id=00112233445566778899aabb/date=2026-11-22/inst-00000000000000000007-00000000000000000042.parquet"
/// );
/// ```
pub fn events_file_path(
    survey_id: &str,
    date: &str,
    instance: &str,
    first_lsn: u64,
    last_lsn: u64,
) -> String {
    format!(
        "events/survey_id={survey_id}/date={date}/{instance}-{first_lsn:020}-{last_lsn:020}.parquet"
    )
}

/// The instance that wrote an events file, read back from its path.
pub fn events_file_instance(path: &str) -> Option<&str> {
    events_file_origin(path).map(|(instance, _, _)| instance)
}

/// The instance that wrote a flush's events file and the first and last log positions it
/// covers, read back from its path; `None` for any other file.
pub fn events_file_origin(path: &str) -> Option<(&str, u64, u64)> {
    let name = path.rsplit('/').next()?.strip_suffix(".parquet")?;
    let mut parts = name.rsplitn(3, '-');
    let last = parts.next()?.parse().ok()?;
    let first = parts.next()?.parse().ok()?;
    Some((parts.next()?, first, last))
}

/// Whether `value` is a survey id as partitions name them: 24 lowercase hex characters.
pub fn is_survey_id(value: &str) -> bool {
    value.len() == 24
        && value
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// The object path of a file a rewrite (erasure, compaction) writes: a random name with no
/// `-`, so it is never taken for a flush's file (see [`events_file_instance`]).
pub fn rewritten_file_path(kind: TableKind, survey_id: &str, date: Option<&str>) -> String {
    let name = format!(
        "rewrite_{}_{:016x}.parquet",
        chrono::Utc::now().format("%Y%m%dT%H%M%S%3f"),
        rand::random::<u64>()
    );
    match date {
        Some(date) => format!("{}/survey_id={survey_id}/date={date}/{name}", kind.as_str()),
        None => format!("{}/survey_id={survey_id}/{name}", kind.as_str()),
    }
}

/// The folder of a survey's files in the `features` or `scores` table.
pub fn results_folder(kind: TableKind, survey_id: &str) -> String {
    format!("{}/survey_id={survey_id}", kind.as_str())
}

/// The object path of one file a scoring run publishes: `attempt` tells this attempt's files
/// from a crashed attempt's leftovers, `sequence` counts the run's chunks.
///
/// ```
/// use lake::TableKind;
/// assert_eq!(
///     lake::tables::results_file_path(TableKind::Scores, "00112233445566778899aabb", "run1", "a1b2c3", 7),
///     "scores/survey_id=00112233445566778899aabb/run1-a1b2c3-00007.parquet"
/// );
/// ```
pub fn results_file_path(
    kind: TableKind,
    survey_id: &str,
    run_id: &str,
    attempt: &str,
    sequence: usize,
) -> String {
    format!(
        "{}/{run_id}-{attempt}-{sequence:05}.parquet",
        results_folder(kind, survey_id)
    )
}

/// The prefix of every file one scoring run publishes into a survey's folder.
pub fn results_run_prefix(kind: TableKind, survey_id: &str, run_id: &str) -> String {
    format!("{}/{run_id}-", results_folder(kind, survey_id))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn instance_is_recovered_from_a_flush_path_only() {
        let path = events_file_path("00112233445566778899aabb", "2026-11-22", "a1b2-c3", 1, 2);
        assert_eq!(events_file_instance(&path), Some("a1b2-c3"));
        assert_eq!(events_file_origin(&path), Some(("a1b2-c3", 1, 2)));
        assert_eq!(events_file_instance("events/x/y.parquet"), None);
        let rewritten = rewritten_file_path(
            TableKind::Events,
            "00112233445566778899aabb",
            Some("2026-11-22"),
        );
        assert_eq!(events_file_instance(&rewritten), None);
    }

    #[test]
    fn a_run_prefix_covers_its_files_and_no_other_runs() {
        let survey = "00112233445566778899aabb";
        let file = results_file_path(TableKind::Features, survey, "run1", "abc", 3);
        assert!(file.starts_with(&results_run_prefix(TableKind::Features, survey, "run1")));
        assert!(!file.starts_with(&results_run_prefix(TableKind::Features, survey, "run")));
    }
}

//! The `features` and `scores` tables of the lake: schemas and Parquet encoding.
//!
//! ```text
//! features/survey_id=<24hex>/<run id>-<attempt>-<seq>.parquet
//! scores/survey_id=<24hex>/<run id>-<attempt>-<seq>.parquet
//! ```
//!
//! Each run appends files; a session scored twice has rows in both runs' files, told apart by
//! `run_id` and `scored_at` (the latest is the one lookup reports).

use std::sync::{Arc, LazyLock};

use arrow::array::{
    ArrayRef, Float64Builder, ListBuilder, RecordBatch, StringBuilder, TimestampMillisecondBuilder,
    UInt64Builder,
};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef, TimeUnit};
use parquet::arrow::ArrowWriter;
use parquet::basic::{Compression, ZstdLevel};
use parquet::file::properties::WriterProperties;

use crate::features::Features;
use crate::model::Score;

fn timestamp() -> DataType {
    DataType::Timestamp(TimeUnit::Millisecond, Some("UTC".into()))
}

/// `features` columns: keys, then one nullable `Float64` per feature in [`Features::NAMES`].
pub static FEATURES_SCHEMA: LazyLock<SchemaRef> = LazyLock::new(|| {
    let mut fields = vec![
        Field::new("survey_id", DataType::Utf8, false),
        Field::new("reference", DataType::Utf8, false),
        Field::new("run_id", DataType::Utf8, false),
        Field::new("computed_at", timestamp(), false),
    ];
    fields.extend(
        Features::NAMES
            .iter()
            .map(|name| Field::new(*name, DataType::Float64, true)),
    );
    Arc::new(Schema::new(fields))
});

/// `scores` columns (DESIGN.md: lake layout).
pub static SCORES_SCHEMA: LazyLock<SchemaRef> = LazyLock::new(|| {
    Arc::new(Schema::new(vec![
        Field::new("survey_id", DataType::Utf8, false),
        Field::new("reference", DataType::Utf8, false),
        Field::new("human_score_percent", DataType::Float64, false),
        Field::new("score_band", DataType::Utf8, false),
        Field::new("scored_at", timestamp(), false),
        Field::new("model_version", DataType::Utf8, false),
        Field::new("run_id", DataType::Utf8, false),
        Field::new("event_count", DataType::UInt64, false),
        Field::new(
            "reasons",
            DataType::List(Arc::new(Field::new("item", DataType::Utf8, true))),
            false,
        ),
    ]))
});

/// One scored session, as both tables record it.
#[derive(Debug, Clone)]
pub struct ScoredSession {
    pub reference: String,
    pub features: Features,
    pub score: Score,
}

/// The `features` rows of `sessions`.
pub fn features_batch(
    survey_id: &str,
    run_id: &str,
    at: i64,
    sessions: &[ScoredSession],
) -> Result<RecordBatch, arrow::error::ArrowError> {
    let n = sessions.len();
    let mut columns: Vec<ArrayRef> = vec![
        Arc::new(repeated(survey_id, n)),
        Arc::new(
            sessions
                .iter()
                .map(|s| Some(s.reference.as_str()))
                .collect::<arrow::array::StringArray>(),
        ),
        Arc::new(repeated(run_id, n)),
        Arc::new(repeated_time(at, n)),
    ];
    let rows: Vec<Vec<f64>> = sessions.iter().map(|s| s.features.values()).collect();
    for index in 0..Features::NAMES.len() {
        let mut builder = Float64Builder::with_capacity(n);
        for row in &rows {
            let value = row[index];
            builder.append_option(value.is_finite().then_some(value));
        }
        columns.push(Arc::new(builder.finish()));
    }
    RecordBatch::try_new(FEATURES_SCHEMA.clone(), columns)
}

/// The `scores` rows of `sessions`.
pub fn scores_batch(
    survey_id: &str,
    run_id: &str,
    model_version: &str,
    at: i64,
    sessions: &[ScoredSession],
) -> Result<RecordBatch, arrow::error::ArrowError> {
    let n = sessions.len();
    let mut percent = Float64Builder::with_capacity(n);
    let mut band = StringBuilder::new();
    let mut reference = StringBuilder::new();
    let mut events = UInt64Builder::with_capacity(n);
    let mut reasons = ListBuilder::new(StringBuilder::new());
    for session in sessions {
        reference.append_value(&session.reference);
        percent.append_value(session.score.human_score_percent);
        band.append_value(session.score.band);
        events.append_value(session.features.event_count.max(0.0) as u64);
        for reason in &session.score.reasons {
            reasons.values().append_value(reason.describe());
        }
        reasons.append(true);
    }
    let columns: Vec<ArrayRef> = vec![
        Arc::new(repeated(survey_id, n)),
        Arc::new(reference.finish()),
        Arc::new(percent.finish()),
        Arc::new(band.finish()),
        Arc::new(repeated_time(at, n)),
        Arc::new(repeated(model_version, n)),
        Arc::new(repeated(run_id, n)),
        Arc::new(events.finish()),
        Arc::new(reasons.finish()),
    ];
    RecordBatch::try_new(SCORES_SCHEMA.clone(), columns)
}

fn repeated(value: &str, n: usize) -> arrow::array::StringArray {
    let mut builder = StringBuilder::with_capacity(n, value.len() * n);
    for _ in 0..n {
        builder.append_value(value);
    }
    builder.finish()
}

fn repeated_time(at: i64, n: usize) -> arrow::array::TimestampMillisecondArray {
    let mut builder = TimestampMillisecondBuilder::with_capacity(n).with_timezone("UTC");
    for _ in 0..n {
        builder.append_value(at);
    }
    builder.finish()
}

/// Writer settings of `features` and `scores` files: zstd, statistics on.
pub fn writer_properties() -> WriterProperties {
    WriterProperties::builder()
        .set_compression(Compression::ZSTD(ZstdLevel::try_new(3).unwrap_or_default()))
        .build()
}

/// Encodes one batch as a Parquet file with [`writer_properties`].
pub fn to_parquet(batch: &RecordBatch) -> Result<Vec<u8>, parquet::errors::ParquetError> {
    let mut out = Vec::new();
    let mut writer = ArrowWriter::try_new(&mut out, batch.schema(), Some(writer_properties()))?;
    writer.write(batch)?;
    writer.close()?;
    Ok(out)
}

//! The rows a scoring run publishes into the lake's `features` and `scores` tables (their
//! schemas, settings and paths are [`lake::tables`]'s).

use std::sync::{Arc, LazyLock};

use arrow::array::{
    ArrayRef, Float64Builder, Int64Builder, ListBuilder, RecordBatch, StringBuilder,
    TimestampMillisecondBuilder,
};
use arrow::datatypes::SchemaRef;
pub use lake::tables::SCORES_SCHEMA;

use crate::features::Features;
use crate::model::Score;

/// `features` columns: keys, then one nullable `Float64` per feature in [`Features::NAMES`].
pub static FEATURES_SCHEMA: LazyLock<SchemaRef> =
    LazyLock::new(|| lake::tables::features_schema(Features::NAMES));

/// One scored session, as both tables record it.
#[derive(Debug, Clone)]
pub struct ScoredSession {
    pub reference: String,
    pub features: Features,
    pub score: Score,
    /// Its places in the survey's cohort, recorded with the score.
    pub cohort: Vec<catalog::CohortPoint>,
    /// The modality it stood in a cluster of its survey in, and how many were alike.
    pub cluster: Option<(u8, u32)>,
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
    let mut events = Int64Builder::with_capacity(n);
    let mut reasons = ListBuilder::new(StringBuilder::new());
    for session in sessions {
        reference.append_value(&session.reference);
        percent.append_value(session.score.human_score_percent);
        band.append_value(session.score.band);
        events.append_value(session.features.event_count.max(0.0) as i64);
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

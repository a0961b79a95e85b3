//! What a reviewer sees of one session: its timeline, drawn from the same events the features
//! read and compact enough to send to a browser, and every feature with its value, its part in
//! the score and its place among the TRAIN humans (issue 37, docs/review.md).
//!
//! The timeline carries nothing the lake does not hold, and less: key classes and timing,
//! never keys; lengths of pasted or inserted text, never text; coordinates relative to the
//! viewport. Pointer paths are simplified in time as well as space (see [`simplify`]), so a
//! replay at the recorded timing passes within [`PATH_TOLERANCE_PX`] of every recorded move and
//! keeps every sub-movement's speed profile.

use arrow::array::{ArrayRef, AsArray};
use arrow::datatypes::{DataType, Float64Type, Int64Type};
use serde::Serialize;

use crate::features::Features;
use crate::model::Model;
use crate::trace::Environment;

/// The most a drawn pointer path is off a recorded move, at the move's own time (CSS px).
pub const PATH_TOLERANCE_PX: f64 = 1.0;

/// A pause after which the pointer path starts a new stroke (ms).
const STROKE_GAP_MS: i64 = 1000;

/// An input event this soon after a key press (or paste) came from it (ms); the same window
/// the `input_without_keys` feature uses.
const INPUT_KEY_WINDOW_MS: i64 = 250;

#[derive(Debug, thiserror::Error)]
pub enum EvidenceError {
    #[error("unexpected column type in the lake: {0}")]
    Schema(String),
    #[error(transparent)]
    Arrow(#[from] arrow::error::ArrowError),
    #[error(transparent)]
    Scan(#[from] crate::scan::ScanError),
    #[error(transparent)]
    Lake(#[from] lake::LakeError),
    #[error(transparent)]
    Query(#[from] query::QueryError),
    #[error("lake query failed: {0}")]
    DataFusion(#[from] datafusion::error::DataFusionError),
}

/// Everything the review view shows of one session.
#[derive(Debug, Clone, Serialize, PartialEq, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct SessionEvidence {
    pub timeline: Timeline,
    pub environment: EnvironmentTells,
    /// The latest score the lake holds for the session; `None` before its first scoring run.
    pub score: Option<LatestScore>,
    /// The model the features below are weighed by: the one this server scores with.
    pub model_version: String,
    pub features: Vec<FeatureEvidence>,
}

/// A session's latest row of the `scores` table.
#[derive(Debug, Clone, Serialize, PartialEq, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct LatestScore {
    pub human_score_percent: f64,
    pub score_band: String,
    pub model_version: String,
    /// Unix milliseconds.
    pub scored_at: i64,
    pub run_id: String,
    /// Events the score was computed from (more arrived since when the timeline has more).
    pub event_count: i64,
    pub reasons: Vec<String>,
}

/// Reads one session's evidence from the lake: its events (the rows of `identifiers`, the
/// browser sessions linked to `reference`) from the survey's live `events` files, its latest
/// score row, and its features computed from those events and weighed by `model`.
pub async fn read(
    lake: &lake::Lake,
    query: &query::LakeQuery,
    model: &Model,
    survey: &str,
    reference: &str,
    identifiers: &[String],
) -> Result<SessionEvidence, EvidenceError> {
    let events: Vec<String> = lake
        .table(lake::TableKind::Events)
        .live_files(Some(survey))
        .await?
        .into_iter()
        .map(|file| file.path)
        .collect();
    let (trace, batches) = crate::scan::scan_session(query, &events, identifiers).await?;
    let timeline = timeline(&batches, &trace)?;
    let features = crate::features::compute(&trace);
    let scores: Vec<String> = lake
        .table(lake::TableKind::Scores)
        .live_files(Some(survey))
        .await?
        .into_iter()
        .map(|file| file.path)
        .collect();
    Ok(SessionEvidence {
        timeline,
        environment: EnvironmentTells::of(trace.environment.as_deref()),
        score: latest_score(query, &scores, reference).await?,
        model_version: model.version.clone(),
        features: feature_evidence(model, &features),
    })
}

/// The newest `scores` row of `reference` among `files`.
async fn latest_score(
    query: &query::LakeQuery,
    files: &[String],
    reference: &str,
) -> Result<Option<LatestScore>, EvidenceError> {
    use datafusion::prelude::{col, lit};

    if files.is_empty() {
        return Ok(None);
    }
    let table = query.selective_table(lake::tables::SCORES_SCHEMA.clone(), files)?;
    let batches = query
        .context()
        .read_table(table)?
        .filter(col("reference").eq(lit(reference)))?
        .sort(vec![col("scored_at").sort(false, false)])?
        .limit(0, Some(1))?
        .collect()
        .await?;
    let Some(batch) = batches.iter().find(|batch| batch.num_rows() > 0) else {
        return Ok(None);
    };
    let text = |name: &str| -> Result<String, EvidenceError> {
        let array = batch
            .column_by_name(name)
            .ok_or_else(|| EvidenceError::Schema(name.to_owned()))?;
        let utf8 = arrow::compute::cast(array, &DataType::Utf8)?;
        Ok(utf8.as_string::<i32>().value(0).to_owned())
    };
    let number = |name: &str, to: DataType| -> Result<ArrayRef, EvidenceError> {
        let array = batch
            .column_by_name(name)
            .ok_or_else(|| EvidenceError::Schema(name.to_owned()))?;
        Ok(arrow::compute::cast(array, &to)?)
    };
    let reasons = batch
        .column_by_name("reasons")
        .and_then(|array| array.as_list_opt::<i32>())
        .ok_or_else(|| EvidenceError::Schema("reasons".to_owned()))?
        .value(0);
    let reasons = arrow::compute::cast(&reasons, &DataType::Utf8)?;
    Ok(Some(LatestScore {
        human_score_percent: number("human_score_percent", DataType::Float64)?
            .as_primitive::<Float64Type>()
            .value(0),
        score_band: text("score_band")?,
        model_version: text("model_version")?,
        scored_at: number("scored_at", DataType::Int64)?
            .as_primitive::<Int64Type>()
            .value(0),
        run_id: text("run_id")?,
        event_count: number("event_count", DataType::Int64)?
            .as_primitive::<Int64Type>()
            .value(0),
        reasons: reasons
            .as_string::<i32>()
            .iter()
            .flatten()
            .map(str::to_owned)
            .collect(),
    }))
}

/// A session's behaviour in time order. Every `t` is milliseconds after `startedAt`.
#[derive(Debug, Clone, Default, Serialize, PartialEq, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Timeline {
    /// Unix milliseconds of the first event.
    pub started_at: i64,
    pub duration_ms: i64,
    pub event_count: u64,
    /// The page's viewport and the screen, as the embed reported them.
    pub viewport: Option<Size>,
    pub screen: Option<Size>,
    /// Pointer strokes: runs of moves of one pointer type without a pause of a second or more.
    pub pointer: Vec<Stroke>,
    pub presses: Vec<Press>,
    pub keys: Vec<Key>,
    pub scrolls: Vec<Scroll>,
    /// Focus and visibility switches, fields reached, submits and page exits.
    pub focus: Vec<FocusChange>,
    /// Text that arrived in fields: pasted, typed, or inserted with no key or paste behind it.
    pub text: Vec<TextChange>,
}

#[derive(Debug, Clone, Copy, Serialize, PartialEq, utoipa::ToSchema)]
pub struct Size {
    pub width: f64,
    pub height: f64,
}

#[derive(Debug, Clone, Serialize, PartialEq, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Stroke {
    /// `mouse`, `pen` or `touch`.
    pub pointer_type: &'static str,
    /// `[t, x, y]`, simplified (see the module docs).
    #[schema(value_type = Vec<Vec<i64>>)]
    pub points: Vec<[i64; 3]>,
    /// Moves recorded in the stroke, before simplification.
    pub recorded: u32,
}

#[derive(Debug, Clone, Serialize, PartialEq, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Press {
    pub t: i64,
    /// `down`, `up`, `click` (pointer), `touchstart`, `touchend`.
    pub kind: &'static str,
    pub x: Option<i32>,
    pub y: Option<i32>,
    pub pointer_type: &'static str,
    /// `Event.isTrusted` as sent; `false` is a script's event.
    pub trusted: Option<bool>,
}

#[derive(Debug, Clone, Serialize, PartialEq, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Key {
    pub t: i64,
    /// The key's class (`char`, `digit`, `space`, `backspace`, ...), never the key.
    pub class: &'static str,
    /// Until the matching key-up of the same class, when there was one.
    pub hold_ms: Option<i64>,
    pub repeat: bool,
    pub trusted: Option<bool>,
}

#[derive(Debug, Clone, Serialize, PartialEq, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Scroll {
    pub t: i64,
    /// `wheel` (a notch or a touchpad step, `dy` in pixels) or `scroll` (the page's position).
    pub kind: &'static str,
    pub dy: Option<f64>,
    pub y: Option<i32>,
}

#[derive(Debug, Clone, Serialize, PartialEq, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct FocusChange {
    pub t: i64,
    /// `focus`, `blur` (the window), `field` (a form field, by its index on the page),
    /// `hidden`, `visible`, `submit`, `pagehide`.
    pub kind: &'static str,
    pub field: Option<i32>,
}

#[derive(Debug, Clone, Serialize, PartialEq, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct TextChange {
    pub t: i64,
    /// `paste`, `typed` (an insertion right after a key press) or `inserted` (an insertion with
    /// no key press or paste behind it: a script or an autofill).
    pub kind: &'static str,
    pub length: i64,
    pub trusted: Option<bool>,
}

/// The environment the embed reported, and the tells the model reads from it.
#[derive(Debug, Clone, Default, Serialize, PartialEq, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct EnvironmentTells {
    pub webdriver: Option<bool>,
    pub webdriver_patched: Option<bool>,
    pub automation_globals: Option<bool>,
    pub automation_stack: Option<bool>,
    pub software_renderer: Option<bool>,
    pub headless_user_agent: bool,
    pub embed_version: Option<String>,
    pub max_touch_points: Option<f64>,
    pub device_pixel_ratio: Option<f64>,
}

impl EnvironmentTells {
    pub fn of(environment: Option<&Environment>) -> EnvironmentTells {
        let Some(e) = environment else {
            return EnvironmentTells::default();
        };
        EnvironmentTells {
            webdriver: e.webdriver,
            webdriver_patched: e.webdriver_patched,
            automation_globals: e.automation_globals,
            automation_stack: e.automation_stack,
            software_renderer: e.software_renderer,
            headless_user_agent: e.headless_agent(),
            embed_version: e.embed_version.clone(),
            max_touch_points: e.max_touch_points,
            device_pixel_ratio: e.device_pixel_ratio,
        }
    }
}

/// One feature of the session as the current model sees it.
#[derive(Debug, Clone, Serialize, PartialEq, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct FeatureEvidence {
    pub name: &'static str,
    /// `None`: the session gave no evidence for it (unmeasured).
    pub value: Option<f64>,
    /// Its part in the score's log-odds (positive towards human-like); 0 when the model does
    /// not read it or it did not count.
    pub contribution: f64,
    /// Where the value sits among the TRAIN humans (0-100), from the model file's quantiles.
    pub human_percentile: Option<f64>,
}

/// Every feature of `features`, with its contribution under `model` and its TRAIN human
/// percentile, in the features' own order.
pub fn feature_evidence(model: &Model, features: &Features) -> Vec<FeatureEvidence> {
    let effects = model.contributions(features);
    Features::NAMES
        .iter()
        .zip(features.values())
        .zip(effects)
        .map(|((name, value), contribution)| FeatureEvidence {
            name,
            value: (!value.is_nan()).then_some(value),
            contribution: round(contribution, 4),
            human_percentile: model
                .human_percentile(name, value)
                .map(|percentile| round(percentile, 1)),
        })
        .collect()
}

fn round(value: f64, digits: i32) -> f64 {
    let scale = 10f64.powi(digits);
    (value * scale).round() / scale
}

mod path;
mod timeline;

pub use path::{off_replay, replay_position, simplify};
pub use timeline::timeline;

#[cfg(test)]
mod tests;

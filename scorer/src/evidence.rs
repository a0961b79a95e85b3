//! What a reviewer sees of one session: its timeline, drawn from the same events the features
//! read and compact enough to send to a browser, and every feature with its value, its part in
//! the score and its place among the TRAIN humans (issue 37, docs/review.md).
//!
//! The timeline carries nothing the lake does not hold, and less: key classes and timing,
//! never keys; lengths of pasted or inserted text, never text; coordinates relative to the
//! viewport. Pointer paths are simplified in time as well as space (see [`simplify`]), so a
//! replay at the recorded timing passes within [`PATH_TOLERANCE_PX`] of every recorded move and
//! keeps every sub-movement's speed profile.

use arrow::array::{ArrayRef, AsArray, RecordBatch};
use arrow::datatypes::{
    DataType, Float64Type, Int32Type, Int64Type, TimeUnit, TimestampMillisecondType,
};
use serde::Serialize;

use crate::features::Features;
use crate::model::Model;
use crate::trace::{Environment, KeyClass, Kind, SessionTrace};

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
    let table = query.table(lake::tables::SCORES_SCHEMA.clone(), files)?;
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

/// One decoded `events` row: what the timeline needs of it.
#[derive(Debug, Clone, Copy)]
struct Row {
    t: i64,
    kind: Kind,
    x: Option<i32>,
    y: Option<i32>,
    pointer: &'static str,
    trusted: Option<bool>,
    key_class: KeyClass,
    repeat: bool,
    inserts_text: bool,
    length_delta: Option<i32>,
    length: Option<i32>,
    dy: Option<f64>,
    field: Option<i32>,
    hidden: bool,
}

/// The timeline of one session from its `events` rows (any order) and its trace (for the
/// environment the embed reported).
pub fn timeline(batches: &[RecordBatch], trace: &SessionTrace) -> Result<Timeline, EvidenceError> {
    let mut rows = Vec::new();
    for batch in batches {
        decode(batch, &mut rows)?;
    }
    rows.sort_by_key(|row| row.t);
    let mut timeline = Timeline {
        event_count: rows.len() as u64,
        ..Timeline::default()
    };
    if let Some(environment) = trace.environment.as_deref() {
        timeline.viewport = size(environment.viewport_width, environment.viewport_height);
        timeline.screen = size(environment.screen_width, environment.screen_height);
    }
    let (Some(first), Some(last)) = (rows.first(), rows.last()) else {
        return Ok(timeline);
    };
    let start = first.t;
    timeline.started_at = start;
    timeline.duration_ms = last.t - start;

    let mut stroke: Option<(&'static str, Vec<[i64; 3]>)> = None;
    let mut strokes = Vec::new();
    let mut open_keys: Vec<(KeyClass, usize)> = Vec::new();
    let (mut last_key, mut last_paste): (Option<i64>, Option<i64>) = (None, None);
    for row in &rows {
        let t = row.t - start;
        match row.kind {
            Kind::PointerMove | Kind::TouchMove => {
                let (Some(x), Some(y)) = (row.x, row.y) else {
                    continue;
                };
                let pointer = if row.kind == Kind::TouchMove {
                    "touch"
                } else {
                    row.pointer
                };
                // A touch is drawn from its touch events; the pointer events a phone also
                // fires for it would draw it twice.
                if row.kind == Kind::PointerMove && pointer == "touch" {
                    continue;
                }
                let continues = stroke.as_ref().is_some_and(|(kind, points)| {
                    *kind == pointer && points.last().is_some_and(|p| t - p[0] < STROKE_GAP_MS)
                });
                if !continues && let Some(done) = stroke.take() {
                    strokes.push(done);
                }
                stroke.get_or_insert_with(|| (pointer, Vec::new())).1.push([
                    t,
                    i64::from(x),
                    i64::from(y),
                ]);
            }
            Kind::PointerDown | Kind::PointerUp | Kind::Click => {
                if row.pointer == "touch" {
                    continue;
                }
                timeline.presses.push(Press {
                    t,
                    kind: match row.kind {
                        Kind::PointerDown => "down",
                        Kind::PointerUp => "up",
                        _ => "click",
                    },
                    x: row.x,
                    y: row.y,
                    pointer_type: row.pointer,
                    trusted: row.trusted,
                });
            }
            Kind::TouchStart | Kind::TouchEnd => {
                // A touch's start begins a stroke of its own.
                if row.kind == Kind::TouchStart
                    && let Some(done) = stroke.take()
                {
                    strokes.push(done);
                }
                if row.kind == Kind::TouchStart
                    && let (Some(x), Some(y)) = (row.x, row.y)
                {
                    stroke = Some(("touch", vec![[t, i64::from(x), i64::from(y)]]));
                }
                timeline.presses.push(Press {
                    t,
                    kind: if row.kind == Kind::TouchStart {
                        "touchstart"
                    } else {
                        "touchend"
                    },
                    x: row.x,
                    y: row.y,
                    pointer_type: "touch",
                    trusted: row.trusted,
                });
            }
            Kind::KeyDown => {
                last_key = Some(row.t);
                open_keys.retain(|(class, _)| *class != row.key_class || row.repeat);
                if !row.repeat {
                    open_keys.push((row.key_class, timeline.keys.len()));
                }
                timeline.keys.push(Key {
                    t,
                    class: key_class_name(row.key_class),
                    hold_ms: None,
                    repeat: row.repeat,
                    trusted: row.trusted,
                });
            }
            Kind::KeyUp => {
                if let Some(position) = open_keys
                    .iter()
                    .position(|(class, _)| *class == row.key_class)
                {
                    let (_, index) = open_keys.remove(position);
                    let key = &mut timeline.keys[index];
                    key.hold_ms = Some(t - key.t);
                }
            }
            Kind::Wheel => timeline.scrolls.push(Scroll {
                t,
                kind: "wheel",
                dy: row.dy,
                y: None,
            }),
            Kind::Scroll => timeline.scrolls.push(Scroll {
                t,
                kind: "scroll",
                dy: None,
                y: row.y,
            }),
            Kind::Focus
            | Kind::Blur
            | Kind::FieldFocus
            | Kind::Visibility
            | Kind::Submit
            | Kind::PageHide => timeline.focus.push(FocusChange {
                t,
                kind: match row.kind {
                    Kind::Focus => "focus",
                    Kind::Blur => "blur",
                    Kind::FieldFocus => "field",
                    Kind::Visibility if row.hidden => "hidden",
                    Kind::Visibility => "visible",
                    Kind::Submit => "submit",
                    _ => "pagehide",
                },
                field: row.field.filter(|_| row.kind == Kind::FieldFocus),
            }),
            Kind::Paste => {
                last_paste = Some(row.t);
                timeline.text.push(TextChange {
                    t,
                    kind: "paste",
                    length: i64::from(row.length.unwrap_or(0).max(0)),
                    trusted: row.trusted,
                });
            }
            Kind::Input if row.inserts_text => {
                let near = |at: Option<i64>| at.is_some_and(|at| row.t - at <= INPUT_KEY_WINDOW_MS);
                if near(last_paste) {
                    // The paste event already counted this text.
                    last_paste = None;
                    continue;
                }
                timeline.text.push(TextChange {
                    t,
                    kind: if near(last_key) { "typed" } else { "inserted" },
                    length: i64::from(row.length_delta.unwrap_or(1).max(1)),
                    trusted: row.trusted,
                });
            }
            _ => {}
        }
    }
    strokes.extend(stroke);
    timeline.pointer = strokes
        .into_iter()
        .map(|(pointer_type, points)| Stroke {
            pointer_type,
            recorded: points.len() as u32,
            points: simplify(&points, PATH_TOLERANCE_PX),
        })
        .collect();
    Ok(timeline)
}

fn size(width: Option<f64>, height: Option<f64>) -> Option<Size> {
    match (width, height) {
        (Some(width), Some(height)) if width > 0.0 && height > 0.0 => Some(Size { width, height }),
        _ => None,
    }
}

fn key_class_name(class: KeyClass) -> &'static str {
    match class {
        KeyClass::Char => "char",
        KeyClass::Digit => "digit",
        KeyClass::Space => "space",
        KeyClass::Backspace => "backspace",
        KeyClass::Delete => "delete",
        KeyClass::Enter => "enter",
        KeyClass::Tab => "tab",
        KeyClass::Arrow => "arrow",
        KeyClass::Modifier => "modifier",
        KeyClass::Other => "other",
        KeyClass::Unknown => "unknown",
    }
}

/// Ramer-Douglas-Peucker in time: a point is dropped when the position a replay would show at
/// its time (moving at constant speed between the kept points either side) is within
/// `tolerance` px of it. Unlike the spatial version, a pause or a change of speed along a
/// straight line is kept, so sub-movements survive. Endpoints are always kept.
pub fn simplify(points: &[[i64; 3]], tolerance: f64) -> Vec<[i64; 3]> {
    if points.len() <= 2 {
        return points.to_vec();
    }
    let mut keep = vec![false; points.len()];
    keep[0] = true;
    keep[points.len() - 1] = true;
    // An explicit stack: a 10-minute stroke has tens of thousands of points.
    let mut stack = vec![(0, points.len() - 1)];
    while let Some((first, last)) = stack.pop() {
        if last <= first + 1 {
            continue;
        }
        let (mut worst, mut worst_at) = (0.0, first);
        for (index, point) in points.iter().enumerate().take(last).skip(first + 1) {
            let distance = off_replay(points[first], points[last], *point);
            if distance > worst {
                (worst, worst_at) = (distance, index);
            }
        }
        if worst > tolerance {
            keep[worst_at] = true;
            stack.push((first, worst_at));
            stack.push((worst_at, last));
        }
    }
    points
        .iter()
        .zip(keep)
        .filter_map(|(point, kept)| kept.then_some(*point))
        .collect()
}

/// How far `point` is from where a replay between `from` and `to` shows the pointer at
/// `point`'s time (px).
pub fn off_replay(from: [i64; 3], to: [i64; 3], point: [i64; 3]) -> f64 {
    let span = (to[0] - from[0]) as f64;
    let share = if span > 0.0 {
        ((point[0] - from[0]) as f64 / span).clamp(0.0, 1.0)
    } else {
        0.0
    };
    let x = from[1] as f64 + share * (to[1] - from[1]) as f64;
    let y = from[2] as f64 + share * (to[2] - from[2]) as f64;
    (point[1] as f64 - x).hypot(point[2] as f64 - y)
}

/// Where a replay of `points` (simplified or not) shows the pointer at time `t`.
pub fn replay_position(points: &[[i64; 3]], t: i64) -> Option<(f64, f64)> {
    let after = points.partition_point(|point| point[0] <= t);
    match (after.checked_sub(1).map(|i| points[i]), points.get(after)) {
        (Some(from), Some(to)) => {
            let share = (t - from[0]) as f64 / (to[0] - from[0]).max(1) as f64;
            Some((
                from[1] as f64 + share * (to[1] - from[1]) as f64,
                from[2] as f64 + share * (to[2] - from[2]) as f64,
            ))
        }
        (Some(last), None) => Some((last[1] as f64, last[2] as f64)),
        (None, Some(first)) => Some((first[1] as f64, first[2] as f64)),
        (None, None) => None,
    }
}

/// Decodes one `events` batch's rows into `rows`.
fn decode(batch: &RecordBatch, rows: &mut Vec<Row>) -> Result<(), EvidenceError> {
    // Every column is cast to one plain type: the lake's dictionaries, or whatever a reader
    // gives, read alike. A column the batch lacks reads as all nulls.
    let cast = |name: &str, to: DataType| -> Result<ArrayRef, EvidenceError> {
        Ok(match batch.column_by_name(name) {
            Some(array) => arrow::compute::cast(array, &to)?,
            None => arrow::array::new_null_array(&to, batch.num_rows()),
        })
    };
    let strings = |name: &str| -> Result<Vec<Option<String>>, EvidenceError> {
        let array = cast(name, DataType::Utf8)?;
        Ok(array
            .as_string::<i32>()
            .iter()
            .map(|value| value.map(str::to_owned))
            .collect())
    };
    let ints = |name: &str| -> Result<Vec<Option<i32>>, EvidenceError> {
        Ok(cast(name, DataType::Int32)?
            .as_primitive::<Int32Type>()
            .iter()
            .collect())
    };
    let floats = |name: &str| -> Result<Vec<Option<f64>>, EvidenceError> {
        Ok(cast(name, DataType::Float64)?
            .as_primitive::<Float64Type>()
            .iter()
            .collect())
    };
    let bools = |name: &str| -> Result<Vec<Option<bool>>, EvidenceError> {
        Ok(cast(name, DataType::Boolean)?.as_boolean().iter().collect())
    };
    let times = |name: &str| -> Result<Vec<Option<i64>>, EvidenceError> {
        if batch.column_by_name(name).is_none() {
            return Err(EvidenceError::Schema(name.to_owned()));
        }
        let utc = DataType::Timestamp(TimeUnit::Millisecond, Some("UTC".into()));
        Ok(cast(name, utc)?
            .as_primitive::<TimestampMillisecondType>()
            .iter()
            .collect())
    };
    let received = times("received_at")?;
    let event_time = times("event_time")?;
    let kinds = strings("type")?;
    let pointer_types = strings("pointer_type")?;
    let key_classes = strings("key_class")?;
    let input_types = strings("input_type")?;
    let states = strings("state")?;
    let (x, y) = (ints("x")?, ints("y")?);
    let (length_delta, length, field) = (ints("length_delta")?, ints("length")?, ints("field")?);
    let dy = floats("dy")?;
    let (trusted, repeat) = (bools("trusted")?, bools("repeat")?);
    for row in 0..batch.num_rows() {
        let Some(t) = event_time[row].or(received[row]) else {
            continue;
        };
        let kind = Kind::parse(kinds[row].as_deref().unwrap_or(""));
        let input_type = input_types[row].as_deref().unwrap_or("");
        rows.push(Row {
            t,
            kind,
            x: x[row],
            y: y[row],
            pointer: match pointer_types[row].as_deref() {
                Some("pen") => "pen",
                Some("touch") => "touch",
                _ => "mouse",
            },
            trusted: trusted[row],
            key_class: KeyClass::parse(key_classes[row].as_deref().unwrap_or("")),
            repeat: repeat[row].unwrap_or(false),
            inserts_text: input_type.starts_with("insert")
                && input_type != "insertFromPaste"
                && input_type != "insertFromDrop",
            length_delta: length_delta[row],
            length: length[row],
            dy: dy[row],
            field: field[row],
            hidden: states[row].as_deref() == Some("hidden"),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests;

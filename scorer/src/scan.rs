//! Reads a survey's events from the lake with DataFusion and groups them into session traces.
//!
//! The scan names only the survey's live files (partition pruning) and only the columns the
//! features read (projection). Each output partition of the scan is consumed by its own task,
//! so decoding Parquet and routing rows to sessions run on every core.

use std::collections::HashMap;
use std::sync::Arc;

use arrow::array::{
    Array, AsArray, BooleanArray, Float64Array, Int32Array, RecordBatch, StringArray,
    TimestampMillisecondArray,
};
use arrow::datatypes::{Int32Type, TimestampMillisecondType};
use futures::StreamExt;
use query::LakeQuery;

use crate::trace::{
    Delivery, Environment, KeyClass, Kind, NO_LAG, SessionTrace, TraceEvent, force_hundredths,
    page_counts,
};

/// Columns of `events` the features read.
const COLUMNS: &[&str] = &[
    "session_id",
    "received_at",
    "event_time",
    "type",
    "x",
    "y",
    "trusted",
    "key_class",
    "repeat",
    "input_type",
    "length_delta",
    "length",
    "dx",
    "dy",
    "force",
    "radius",
    "state",
    "payload",
];

/// Columns of `events` one session's evidence reads besides the features' [`COLUMNS`]. Each
/// column read costs every file a column reader (and its codec) even where one page is kept.
const TIMELINE_COLUMNS: &[&str] = &["pointer_type", "field"];

#[derive(Debug, thiserror::Error)]
pub enum ScanError {
    #[error(transparent)]
    Query(#[from] query::QueryError),
    #[error("scan failed: {0}")]
    DataFusion(#[from] datafusion::error::DataFusionError),
    #[error("unexpected column type in events: {0}")]
    Schema(String),
    #[error("scan task failed: {0}")]
    Join(#[from] tokio::task::JoinError),
}

/// Which sessions a scan collects: identifiers mapped to the index of their session.
#[derive(Debug, Clone)]
pub struct ScanTarget {
    pub session_of_identifier: Arc<HashMap<String, u32>>,
    pub sessions: usize,
}

/// Scans `files` (the survey's live `events` files) and returns one trace per session index,
/// in arrival order (`SessionTrace::finish` sorts them).
pub async fn scan_traces(
    query: &LakeQuery,
    files: &[String],
    target: &ScanTarget,
) -> Result<Vec<SessionTrace>, ScanError> {
    let table = query.table(lake::tables::EVENTS_SCHEMA.clone(), files)?;
    let frame = query.context().read_table(table)?.select_columns(COLUMNS)?;
    let streams = frame.execute_stream_partitioned().await?;
    // Each scan partition is drained on a blocking thread that decodes (inside `poll_next`) and
    // routes rows straight into its own per-session vectors: no per-batch maps, no hashing of
    // session numbers, one copy when partitions are merged.
    let runtime = tokio::runtime::Handle::current();
    let mut tasks = Vec::with_capacity(streams.len());
    for mut stream in streams {
        let target = target.clone();
        let runtime = runtime.clone();
        tasks.push(tokio::task::spawn_blocking(move || {
            let mut traces = vec![SessionTrace::default(); target.sessions];
            let mut router = Router::default();
            while let Some(batch) = runtime.block_on(stream.next()) {
                router.route(&batch?, &target, &mut traces)?;
            }
            Ok::<_, ScanError>(traces)
        }));
    }
    let mut merged: Option<Vec<SessionTrace>> = None;
    for task in tasks {
        let partition = task.await??;
        match &mut merged {
            None => merged = Some(partition),
            Some(traces) => {
                for (trace, part) in traces.iter_mut().zip(partition) {
                    trace.absorb(part);
                }
            }
        }
    }
    Ok(merged.unwrap_or_else(|| vec![SessionTrace::default(); target.sessions]))
}

/// Scans one session's rows (those whose `session_id` is one of `identifiers`) out of `files`:
/// its trace, in time order, as the features read it, and the rows themselves (the features'
/// and the timeline's columns), for the evidence view. The files are sorted by session, so the filter skips the
/// row groups and pages whose statistics rule the identifiers out.
pub async fn scan_session(
    query: &LakeQuery,
    files: &[String],
    identifiers: &[String],
) -> Result<(SessionTrace, Vec<RecordBatch>), ScanError> {
    use datafusion::prelude::{col, lit};

    let mut trace = SessionTrace::default();
    if identifiers.is_empty() || files.is_empty() {
        return Ok((trace, Vec::new()));
    }
    let table = query.selective_table(lake::tables::EVENTS_SCHEMA.clone(), files)?;
    let wanted = identifiers.iter().map(|id| lit(id.as_str())).collect();
    let batches = query
        .context()
        .read_table(table)?
        .select_columns(
            &COLUMNS
                .iter()
                .chain(TIMELINE_COLUMNS)
                .copied()
                .collect::<Vec<_>>(),
        )?
        .filter(col("session_id").in_list(wanted, false))?
        .collect()
        .await?;
    let target = ScanTarget {
        session_of_identifier: Arc::new(identifiers.iter().map(|id| (id.clone(), 0)).collect()),
        sessions: 1,
    };
    let mut traces = vec![SessionTrace::default()];
    let mut router = Router::default();
    for batch in &batches {
        router.route(batch, &target, &mut traces)?;
    }
    if let Some(found) = traces.pop() {
        trace = found;
    }
    trace.finish();
    Ok((trace, batches))
}

/// Per-dictionary lookups kept across batches: a Parquet row group's batches share one
/// dictionary, which is then mapped once rather than once per batch.
#[derive(Default)]
struct Router {
    sessions: DictionaryCache<Option<u32>>,
    kinds: DictionaryCache<Kind>,
}

struct DictionaryCache<T> {
    values: Option<arrow::array::ArrayRef>,
    lookup: Vec<T>,
}

impl<T> Default for DictionaryCache<T> {
    fn default() -> Self {
        DictionaryCache {
            values: None,
            lookup: Vec::new(),
        }
    }
}

impl<T: Copy> DictionaryCache<T> {
    /// Per-row values of a string column, mapping each distinct dictionary value once.
    fn map(
        &mut self,
        array: &dyn Array,
        name: &str,
        map: impl Fn(&str) -> T,
    ) -> Result<Vec<Option<T>>, ScanError> {
        let Some(dictionary) = array.as_dictionary_opt::<Int32Type>() else {
            return mapped(array, name, map);
        };
        let same = self
            .values
            .as_ref()
            .is_some_and(|known| Arc::ptr_eq(known, dictionary.values()));
        if !same {
            let values = dictionary
                .values()
                .as_string_opt::<i32>()
                .ok_or_else(|| ScanError::Schema(format!("{name}: dictionary of non-strings")))?;
            self.lookup = values.iter().map(|v| map(v.unwrap_or(""))).collect();
            self.values = Some(dictionary.values().clone());
        }
        Ok(dictionary
            .keys()
            .iter()
            .map(|key| key.and_then(|k| self.lookup.get(k as usize).copied()))
            .collect())
    }
}

/// Per-row values of a dictionary-encoded (or plain) string column, mapped once per distinct
/// value.
fn mapped<T: Copy>(
    array: &dyn Array,
    name: &str,
    map: impl Fn(&str) -> T,
) -> Result<Vec<Option<T>>, ScanError> {
    if let Some(dictionary) = array.as_dictionary_opt::<Int32Type>() {
        let values = dictionary
            .values()
            .as_string_opt::<i32>()
            .ok_or_else(|| ScanError::Schema(format!("{name}: dictionary of non-strings")))?;
        let lookup: Vec<T> = values.iter().map(|v| map(v.unwrap_or(""))).collect();
        return Ok(dictionary
            .keys()
            .iter()
            .map(|key| key.and_then(|k| lookup.get(k as usize).copied()))
            .collect());
    }
    if let Some(strings) = array.as_string_opt::<i32>() {
        return Ok(strings.iter().map(|v| v.map(&map)).collect());
    }
    if let Some(strings) = array.as_string_view_opt() {
        return Ok(strings.iter().map(|v| v.map(&map)).collect());
    }
    Err(ScanError::Schema(format!("{name}: {}", array.data_type())))
}

fn column<'a, T: 'static>(batch: &'a RecordBatch, name: &str) -> Result<&'a T, ScanError> {
    batch
        .column_by_name(name)
        .and_then(|array| array.as_any().downcast_ref::<T>())
        .ok_or_else(|| ScanError::Schema(name.to_owned()))
}

fn int(array: &Int32Array, row: usize) -> Option<i32> {
    array.is_valid(row).then(|| array.value(row))
}

fn boolean(array: &BooleanArray, row: usize) -> Option<bool> {
    array.is_valid(row).then(|| array.value(row))
}

impl Router {
    /// Routes one batch's rows to their sessions' traces.
    fn route(
        &mut self,
        batch: &RecordBatch,
        target: &ScanTarget,
        traces: &mut [SessionTrace],
    ) -> Result<(), ScanError> {
        let sessions = self.sessions.map(
            batch_column(batch, "session_id")?,
            "session_id",
            |identifier| target.session_of_identifier.get(identifier).copied(),
        )?;
        let kinds = self
            .kinds
            .map(batch_column(batch, "type")?, "type", Kind::parse)?;
        route_rows(batch, &sessions, &kinds, traces)
    }
}

/// Routes one batch's rows, given each row's session and kind.
fn route_rows(
    batch: &RecordBatch,
    sessions: &[Option<Option<u32>>],
    kinds: &[Option<Kind>],
    traces: &mut [SessionTrace],
) -> Result<(), ScanError> {
    let key_classes = mapped(
        batch_column(batch, "key_class")?,
        "key_class",
        KeyClass::parse,
    )?;
    let inserts = mapped(batch_column(batch, "input_type")?, "input_type", |t| {
        t.starts_with("insert") && t != "insertFromPaste" && t != "insertFromDrop"
    })?;
    let hidden = mapped(batch_column(batch, "state")?, "state", |s| s == "hidden")?;
    let received = column::<TimestampMillisecondArray>(batch, "received_at")?;
    let event_time = batch_column(batch, "event_time")?
        .as_primitive_opt::<TimestampMillisecondType>()
        .ok_or_else(|| ScanError::Schema("event_time".to_owned()))?;
    let x = column::<Int32Array>(batch, "x")?;
    let y = column::<Int32Array>(batch, "y")?;
    let trusted = column::<BooleanArray>(batch, "trusted")?;
    let repeat = column::<BooleanArray>(batch, "repeat")?;
    let length_delta = column::<Int32Array>(batch, "length_delta")?;
    let length = column::<Int32Array>(batch, "length")?;
    let dx = column::<Float64Array>(batch, "dx")?;
    let dy = column::<Float64Array>(batch, "dy")?;
    let force = column::<Float64Array>(batch, "force")?;
    let radius = column::<Float64Array>(batch, "radius")?;
    let payload = column::<StringArray>(batch, "payload")?;

    for row in 0..batch.num_rows() {
        let Some(trace) = sessions[row]
            .flatten()
            .and_then(|session| traces.get_mut(session as usize))
        else {
            continue;
        };
        let kind = kinds[row].unwrap_or(Kind::Other);
        let received_at = received.value(row);
        let (t, lag_ms) = if event_time.is_valid(row) {
            let t = event_time.value(row);
            // Saturated: a lag beyond 24 days is as telling as its exact value.
            let lag = received_at
                .saturating_sub(t)
                .clamp(i64::from(i32::MIN + 1), i64::from(i32::MAX));
            (t, lag as i32)
        } else {
            (received_at, NO_LAG)
        };
        if matches!(kind, Kind::Session | Kind::Environment) && payload.is_valid(row) {
            let text = payload.value(row);
            let environment = if kind == Kind::Session {
                Environment::from_session_payload(text)
            } else {
                Environment::from_environment_payload(text)
            };
            if let Some(environment) = environment {
                trace.add_environment(environment);
            }
        }
        if kind == Kind::Delivery
            && payload.is_valid(row)
            && let Some(delivery) = Delivery::from_payload(payload.value(row))
        {
            trace.add_delivery(delivery);
        }
        let page = (kind == Kind::Page && payload.is_valid(row))
            .then(|| page_counts(payload.value(row)))
            .flatten();
        let amount = match kind {
            Kind::Page => page.map_or(0.0, |(words, _)| words as f32),
            Kind::Input => int(length_delta, row).map_or(0.0, |v| v as f32),
            Kind::Paste => int(length, row).map_or(0.0, |v| v as f32),
            Kind::Wheel if dy.is_valid(row) => dy.value(row) as f32,
            _ => 0.0,
        };
        let float = |array: &Float64Array| array.is_valid(row).then(|| array.value(row));
        let (contact_radius, contact_force) = match kind {
            Kind::TouchStart | Kind::TouchMove | Kind::TouchEnd => (
                float(radius).unwrap_or(0.0) as f32,
                float(force).map_or(0, force_hundredths),
            ),
            Kind::Page => (
                0.0,
                page.map_or(0, |(_, controls)| controls.min(u32::from(u16::MAX)) as u16),
            ),
            _ => (0.0, 0),
        };
        let offset = match kind {
            // A press's offset from its target's centre, in half-sizes (embed 1.3).
            Kind::PointerDown | Kind::TouchStart => float(dx)
                .zip(float(dy))
                .filter(|(x, y)| x.is_finite() && y.is_finite())
                .map(|(x, y)| (hundredths(x), hundredths(y))),
            _ => None,
        };
        trace.push(TraceEvent {
            t,
            x: int(x, row),
            y: int(y, row),
            lag_ms,
            amount,
            radius: contact_radius,
            force: contact_force,
            kind,
            trusted: boolean(trusted, row),
            key_class: key_classes[row].unwrap_or(KeyClass::Unknown),
            repeat: boolean(repeat, row).unwrap_or(false),
            inserts_text: inserts[row].unwrap_or(false),
            hidden: hidden[row].unwrap_or(false),
            offset,
        });
    }
    Ok(())
}

/// A share of a half-size (-1 to 1 inside the target) in hundredths, saturated to `i8`.
fn hundredths(share: f64) -> i8 {
    (share * 100.0).round().clamp(-127.0, 127.0) as i8
}

fn batch_column<'a>(batch: &'a RecordBatch, name: &str) -> Result<&'a dyn Array, ScanError> {
    batch
        .column_by_name(name)
        .map(|array| array.as_ref())
        .ok_or_else(|| ScanError::Schema(name.to_owned()))
}

//! The timeline of one session, decoded from its `events` rows: strokes, presses, key rhythm
//! by key class, scrolls, focus and text lengths, in time order.

use arrow::array::{ArrayRef, AsArray, RecordBatch};
use arrow::datatypes::{DataType, Float64Type, Int32Type, TimeUnit, TimestampMillisecondType};

use super::path::simplify;
use super::*;
use crate::trace::{KeyClass, Kind, SessionTrace};

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

//! Typed decoding of collected events, off the request path.
//!
//! An event that is exactly `{"type": string, "timestamp": integer, "data": {...}}`, whose `data`
//! holds only fields of the embed's vocabulary with their documented JSON types, is held
//! losslessly by the typed columns: its `payload` is null. Anything else (other shapes, extra
//! fields, fractional coordinates, `session` events) keeps its raw JSON in `payload`, with the
//! typed columns filled as far as they can be. A reader rebuilds a typed event as
//! `{"type": type, "timestamp": event_time, "data": {<every non-null typed data column>}}`.

use std::borrow::Cow;

use serde::{Deserialize, Deserializer};
use serde_json::value::RawValue;

use crate::batch::{self, BatchError};

mod fast;

/// Event timestamps outside `[2000-01-01, received_at + 1 day]` are kept in `event_time` as
/// sent but not trusted for session statistics.
const EARLIEST_PLAUSIBLE_MS: i64 = 946_684_800_000;
const FUTURE_SKEW_MS: i64 = 24 * 60 * 60 * 1000;

/// `data` fields of the embed's vocabulary (camelCase on the wire). `None` means absent: an
/// explicit `null` is not of the vocabulary and sends the event to `payload`.
#[derive(Debug, Default, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct EventData<'a> {
    #[serde(default, deserialize_with = "present")]
    pub x: Option<i32>,
    #[serde(default, deserialize_with = "present")]
    pub y: Option<i32>,
    #[serde(borrow, default, deserialize_with = "present_str")]
    pub pointer_type: Option<Cow<'a, str>>,
    #[serde(default, deserialize_with = "present")]
    pub trusted: Option<bool>,
    #[serde(default, deserialize_with = "present")]
    pub button: Option<i32>,
    #[serde(borrow, default, deserialize_with = "present_str")]
    pub target: Option<Cow<'a, str>>,
    #[serde(borrow, default, deserialize_with = "present_str")]
    pub key_class: Option<Cow<'a, str>>,
    #[serde(default, deserialize_with = "present")]
    pub repeat: Option<bool>,
    #[serde(default, deserialize_with = "present")]
    pub hold_ms: Option<f64>,
    #[serde(default, deserialize_with = "present")]
    pub flight_ms: Option<f64>,
    #[serde(borrow, default, deserialize_with = "present_str")]
    pub input_type: Option<Cow<'a, str>>,
    #[serde(default, deserialize_with = "present")]
    pub length_delta: Option<i32>,
    #[serde(default, deserialize_with = "present")]
    pub field: Option<i32>,
    #[serde(default, deserialize_with = "present")]
    pub length: Option<i32>,
    #[serde(default, deserialize_with = "present")]
    pub dx: Option<f64>,
    #[serde(default, deserialize_with = "present")]
    pub dy: Option<f64>,
    #[serde(default, deserialize_with = "present")]
    pub delta_mode: Option<i32>,
    #[serde(default, deserialize_with = "present")]
    pub force: Option<f64>,
    #[serde(default, deserialize_with = "present")]
    pub radius: Option<f64>,
    #[serde(borrow, default, deserialize_with = "present_str")]
    pub state: Option<Cow<'a, str>>,
    #[serde(default, deserialize_with = "present")]
    pub width: Option<i32>,
    #[serde(default, deserialize_with = "present")]
    pub height: Option<i32>,
}

/// A present, non-null string, borrowed from the input when it has no escapes (the common case:
/// decoding a flush's events allocates nothing per string).
fn present_str<'de: 'a, 'a, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<Cow<'a, str>>, D::Error> {
    struct StrVisitor<'a>(std::marker::PhantomData<&'a ()>);

    impl<'de: 'a, 'a> serde::de::Visitor<'de> for StrVisitor<'a> {
        type Value = Cow<'a, str>;

        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("a string")
        }

        fn visit_borrowed_str<E>(self, value: &'de str) -> Result<Self::Value, E> {
            Ok(Cow::Borrowed(value))
        }

        fn visit_str<E>(self, value: &str) -> Result<Self::Value, E> {
            Ok(Cow::Owned(value.to_owned()))
        }

        fn visit_string<E>(self, value: String) -> Result<Self::Value, E> {
            Ok(Cow::Owned(value))
        }
    }

    deserializer
        .deserialize_str(StrVisitor(std::marker::PhantomData))
        .map(Some)
}

/// Deserializes a field that, when present, must not be null.
fn present<'de, D: Deserializer<'de>, T: Deserialize<'de>>(
    deserializer: D,
) -> Result<Option<T>, D::Error> {
    T::deserialize(deserializer).map(Some)
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct StrictEvent<'a> {
    #[serde(rename = "type", borrow)]
    event_type: Cow<'a, str>,
    timestamp: i64,
    #[serde(borrow)]
    data: EventData<'a>,
}

/// The parts of an arbitrary event that can still be read when it is not strictly typed.
#[derive(Deserialize)]
struct LooseEvent<'a> {
    #[serde(rename = "type", borrow, default)]
    event_type: Option<&'a RawValue>,
    #[serde(borrow, default)]
    timestamp: Option<&'a RawValue>,
    #[serde(borrow, default)]
    data: Option<&'a RawValue>,
}

#[derive(Deserialize)]
struct SessionEventData<'a> {
    #[serde(rename = "interviewId", borrow, default)]
    interview_id: Option<&'a RawValue>,
}

/// One event, decoded.
#[derive(Debug, Clone, PartialEq)]
pub struct EventRow<'a> {
    pub event_type: Option<Cow<'a, str>>,
    /// The event's own `timestamp` (Unix ms), as sent.
    pub event_time: Option<i64>,
    pub data: EventData<'a>,
    /// The raw event when the typed columns do not hold it losslessly.
    pub payload: Option<&'a str>,
    /// `data.interviewId` of a `session` event, as sent.
    pub interview_id: Option<String>,
}

impl EventRow<'_> {
    /// The time to count this event at for session statistics: its own timestamp when plausible,
    /// else when it was received.
    pub fn stats_time(&self, received_at: i64) -> i64 {
        plausible_time(self.event_time, received_at)
    }
}

/// Decodes every event of a logged batch body (one that passed
/// [`batch::count_batch_events`]), each as [`decode_event`] would.
///
/// Bodies of the common shape are read in one hand-written pass; the rest, event by event,
/// through serde.
pub fn decode_batch(body: &[u8]) -> Result<Vec<EventRow<'_>>, BatchError> {
    if let Some(rows) = fast::decode_batch(body) {
        return Ok(rows);
    }
    Ok(batch::batch_events(body)?
        .into_iter()
        .map(decode_event)
        .collect())
}

/// What session statistics read of an event: the time to count it at (see
/// [`EventRow::stats_time`]) and the `interviewId` a `session` event names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StatsEvent {
    pub event_time: Option<i64>,
    pub interview_id: Option<String>,
}

/// The statistics view of every event of a logged batch body, as [`decode_batch`] would give
/// it; the common shape is read without decoding `data`.
pub fn stats_events(body: &[u8]) -> Result<Vec<StatsEvent>, BatchError> {
    if let Some(times) = fast::batch_times(body) {
        return Ok(times
            .into_iter()
            .map(|time| StatsEvent {
                event_time: Some(time),
                interview_id: None,
            })
            .collect());
    }
    Ok(decode_batch(body)?
        .into_iter()
        .map(|row| StatsEvent {
            event_time: row.event_time,
            interview_id: row.interview_id,
        })
        .collect())
}

/// Decodes one raw event. Never fails: what cannot be typed is kept raw.
pub fn decode_event(raw: &RawValue) -> EventRow<'_> {
    fast::decode_event(raw.get()).unwrap_or_else(|| decode_with_serde(raw))
}

/// The general path of [`decode_event`], for any JSON value.
fn decode_with_serde(raw: &RawValue) -> EventRow<'_> {
    let text = raw.get();
    if let Ok(strict) = serde_json::from_str::<StrictEvent<'_>>(text) {
        return EventRow {
            event_type: Some(strict.event_type),
            event_time: Some(strict.timestamp),
            data: strict.data,
            payload: None,
            interview_id: None,
        };
    }
    let mut row = EventRow {
        event_type: None,
        event_time: None,
        data: EventData::default(),
        payload: Some(text),
        interview_id: None,
    };
    let Ok(loose) = serde_json::from_str::<LooseEvent<'_>>(text) else {
        return row;
    };
    row.event_type = loose
        .event_type
        .and_then(|raw| serde_json::from_str::<Cow<'_, str>>(raw.get()).ok());
    row.event_time = loose
        .timestamp
        .and_then(|raw| serde_json::from_str::<i64>(raw.get()).ok());
    if let Some(data) = loose.data {
        if let Ok(typed) = serde_json::from_str::<EventData<'_>>(data.get()) {
            row.data = typed;
        }
        if row.event_type.as_deref() == Some("session") {
            row.interview_id = serde_json::from_str::<SessionEventData<'_>>(data.get())
                .ok()
                .and_then(|session| session.interview_id)
                .and_then(|raw| serde_json::from_str::<String>(raw.get()).ok());
        }
    }
    row
}

/// The plausible time of an event for statistics (see [`EventRow::stats_time`]).
pub fn plausible_time(event_time: Option<i64>, received_at: i64) -> i64 {
    match event_time {
        Some(time)
            if (EARLIEST_PLAUSIBLE_MS..=received_at.saturating_add(FUTURE_SKEW_MS))
                .contains(&time) =>
        {
            time
        }
        _ => received_at,
    }
}

#[cfg(test)]
mod tests;

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

/// Decodes one raw event. Never fails: what cannot be typed is kept raw.
pub fn decode_event(raw: &RawValue) -> EventRow<'_> {
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

/// What session statistics need of an event, read without typed decoding: its timestamp and,
/// for a `session` event, the `interviewId` it names.
pub fn stats_view(raw: &RawValue) -> (Option<i64>, Option<String>) {
    let Ok(loose) = serde_json::from_str::<LooseEvent<'_>>(raw.get()) else {
        return (None, None);
    };
    let time = loose
        .timestamp
        .and_then(|raw| serde_json::from_str::<i64>(raw.get()).ok());
    let is_session = loose
        .event_type
        .is_some_and(|raw| raw.get() == "\"session\"");
    let interview_id = if is_session {
        loose
            .data
            .and_then(|data| serde_json::from_str::<SessionEventData<'_>>(data.get()).ok())
            .and_then(|session| session.interview_id)
            .and_then(|raw| serde_json::from_str::<String>(raw.get()).ok())
    } else {
        None
    };
    (time, interview_id)
}

/// What session statistics read of one event: its timestamp, and the `interviewId` of a
/// `session` event. Decoded while walking the batch, so each event is scanned once; any JSON
/// value is accepted (a non-object yields neither).
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct StatsEvent {
    pub time: Option<i64>,
    pub interview_id: Option<String>,
}

/// A logged batch body as statistics read it.
#[derive(Debug, Deserialize)]
pub struct StatsBatch {
    pub events: Vec<StatsEvent>,
}

#[derive(Deserialize)]
#[serde(field_identifier, rename_all = "lowercase")]
enum StatsKey {
    Type,
    Timestamp,
    Data,
    #[serde(other)]
    Other,
}

impl<'de> Deserialize<'de> for StatsEvent {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct EventVisitor;

        impl<'de> serde::de::Visitor<'de> for EventVisitor {
            type Value = StatsEvent;

            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("any JSON value")
            }

            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> Result<StatsEvent, A::Error> {
                let mut event = StatsEvent::default();
                let mut is_session = false;
                let mut data: Option<&'de RawValue> = None;
                while let Some(key) = map.next_key::<StatsKey>()? {
                    match key {
                        StatsKey::Type => {
                            let raw: &'de RawValue = map.next_value()?;
                            is_session = raw.get() == "\"session\"";
                        }
                        StatsKey::Timestamp => {
                            let raw: &'de RawValue = map.next_value()?;
                            event.time = serde_json::from_str::<i64>(raw.get()).ok();
                        }
                        StatsKey::Data => data = Some(map.next_value()?),
                        StatsKey::Other => {
                            map.next_value::<serde::de::IgnoredAny>()?;
                        }
                    }
                }
                if is_session {
                    event.interview_id = data
                        .and_then(|data| {
                            serde_json::from_str::<SessionEventData<'_>>(data.get()).ok()
                        })
                        .and_then(|session| session.interview_id)
                        .and_then(|raw| serde_json::from_str::<String>(raw.get()).ok());
                }
                Ok(event)
            }

            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                mut seq: A,
            ) -> Result<StatsEvent, A::Error> {
                while seq.next_element::<serde::de::IgnoredAny>()?.is_some() {}
                Ok(StatsEvent::default())
            }

            fn visit_bool<E>(self, _: bool) -> Result<StatsEvent, E> {
                Ok(StatsEvent::default())
            }
            fn visit_i64<E>(self, _: i64) -> Result<StatsEvent, E> {
                Ok(StatsEvent::default())
            }
            fn visit_u64<E>(self, _: u64) -> Result<StatsEvent, E> {
                Ok(StatsEvent::default())
            }
            fn visit_f64<E>(self, _: f64) -> Result<StatsEvent, E> {
                Ok(StatsEvent::default())
            }
            fn visit_str<E>(self, _: &str) -> Result<StatsEvent, E> {
                Ok(StatsEvent::default())
            }
            fn visit_unit<E>(self) -> Result<StatsEvent, E> {
                Ok(StatsEvent::default())
            }
        }

        deserializer.deserialize_any(EventVisitor)
    }
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
mod tests {
    use super::*;

    fn decode(text: &str) -> EventRow<'static> {
        let raw: &'static RawValue =
            Box::leak(RawValue::from_string(text.to_owned()).expect("json"));
        decode_event(raw)
    }

    #[test]
    fn vocabulary_events_need_no_payload() {
        let row = decode(
            r#"{"type":"pointermove","timestamp":1700000000123,"data":{"x":10,"y":-3,"pointerType":"mouse","trusted":true}}"#,
        );
        assert_eq!(row.payload, None);
        assert_eq!(row.event_type.as_deref(), Some("pointermove"));
        assert_eq!(row.event_time, Some(1_700_000_000_123));
        assert_eq!((row.data.x, row.data.y), (Some(10), Some(-3)));
        assert_eq!(row.data.trusted, Some(true));

        let key = decode(
            r#"{"type":"keyup","timestamp":5,"data":{"keyClass":"char","trusted":true,"repeat":false,"holdMs":87.5}}"#,
        );
        assert_eq!(key.payload, None);
        assert_eq!(key.data.hold_ms, Some(87.5));
    }

    #[test]
    fn anything_not_lossless_keeps_its_raw_json() {
        for text in [
            r#"{"type":"pointermove","timestamp":1,"data":{"x":1.5,"y":2}}"#,
            r#"{"type":"pointermove","timestamp":1,"data":{"x":1,"y":2,"extra":true}}"#,
            r#"{"type":"pointermove","timestamp":1,"data":{"x":null}}"#,
            r#"{"type":"pointermove","timestamp":1}"#,
            r#"{"type":"pointermove","timestamp":1,"data":{},"more":1}"#,
            r#"{"type":"pointermove","timestamp":"1","data":{}}"#,
            r#"[1,2,3]"#,
            r#""just a string""#,
        ] {
            let row = decode(text);
            assert_eq!(row.payload, Some(text), "{text}");
        }
        let partial = decode(r#"{"type":"click","timestamp":7,"data":{"x":1,"y":2},"extra":1}"#);
        assert_eq!(partial.event_type.as_deref(), Some("click"));
        assert_eq!(partial.event_time, Some(7));
        assert_eq!(partial.data.x, Some(1));
    }

    #[test]
    fn session_events_yield_their_interview_id() {
        let row = decode(
            r#"{"type":"session","timestamp":1,"data":{"sessionId":"s","interviewId":"1b4e28ba-2fa1-11d2-883f-0016d3cca427","webdriver":false}}"#,
        );
        assert_eq!(
            row.interview_id.as_deref(),
            Some("1b4e28ba-2fa1-11d2-883f-0016d3cca427")
        );
        assert!(row.payload.is_some());
        let raw = RawValue::from_string(
            r#"{"type":"session","timestamp":9,"data":{"interviewId":"abc"}}"#.to_owned(),
        )
        .expect("json");
        assert_eq!(stats_view(&raw), (Some(9), Some("abc".to_owned())));
        let raw = RawValue::from_string(
            r#"{"type":"click","timestamp":9,"data":{"interviewId":"abc"}}"#.to_owned(),
        )
        .expect("json");
        assert_eq!(stats_view(&raw), (Some(9), None));
    }

    #[test]
    fn the_one_pass_stats_decoder_agrees_with_stats_view() {
        let body = r#"{"events":[
            {"type":"session","timestamp":9,"data":{"interviewId":"abc","webdriver":false}},
            {"data":{"interviewId":"not-a-session"},"timestamp":10,"type":"click"},
            {"timestamp":"11","type":"x"}, 42, "s", null, [1,{"a":[2]}], {"type":7}
        ],"other":{"x":1}}"#;
        let batch: StatsBatch = serde_json::from_str(body).expect("stats batch");
        let raws = crate::batch::batch_events(body.as_bytes()).expect("batch");
        assert_eq!(batch.events.len(), raws.len());
        for (event, raw) in batch.events.iter().zip(raws) {
            let (time, interview_id) = stats_view(raw);
            assert_eq!(
                (event.time, event.interview_id.clone()),
                (time, interview_id),
                "{}",
                raw.get()
            );
        }
        assert_eq!(batch.events[0].interview_id.as_deref(), Some("abc"));
        assert_eq!(batch.events[1].time, Some(10));
        // Every event the collector accepted is counted, however deep.
        let depth = 100_000;
        for event in [
            format!("{}{}", "[".repeat(depth), "]".repeat(depth)),
            format!("{}1{}", "{\"a\":".repeat(depth), "}".repeat(depth)),
            format!(
                "{{\"type\":\"session\",\"data\":{}1{}}}",
                "{\"a\":".repeat(depth),
                "}".repeat(depth)
            ),
        ] {
            let body = format!("{{\"events\":[{event},1]}}");
            let batch: StatsBatch = serde_json::from_str(&body).expect("deep event");
            assert_eq!(batch.events.len(), 2);
        }
    }

    #[test]
    fn implausible_timestamps_fall_back_to_receipt_time() {
        let received = 1_700_000_000_000;
        let row = decode(r#"{"type":"focus","timestamp":12,"data":{}}"#);
        assert_eq!(row.stats_time(received), received);
        let row = decode(r#"{"type":"focus","timestamp":1699999999000,"data":{}}"#);
        assert_eq!(row.stats_time(received), 1_699_999_999_000);
    }
}

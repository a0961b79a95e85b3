//! Validation of collector requests on the hot path.
//!
//! A batch body is checked for well-formed JSON with an `events` array without building a value
//! tree: each event stays a borrowed [`RawValue`]. Typed decoding happens later, off the request
//! path, in the flusher (see [`crate::event_row`]).

use serde::Deserialize;
use serde::de::IgnoredAny;
use serde_json::value::RawValue;

/// Largest accepted request body.
pub const MAX_BODY_BYTES: usize = 1024 * 1024;
/// Most events accepted in one batch.
pub const MAX_EVENTS_PER_BATCH: usize = 1000;
/// Longest accepted browser-session identifier.
pub const MAX_IDENTIFIER_LEN: usize = 128;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BatchError {
    #[error("body is not valid JSON: {0}")]
    Malformed(String),
    #[error("body must be a JSON object with an `events` array")]
    NotABatch,
    #[error("batch holds more than 1000 events, the most accepted per request")]
    TooManyEvents,
    #[error("body exceeds 1 MiB")]
    TooLarge,
}

/// Marks the deserializer error raised when the events array passes the limit.
const TOO_MANY_EVENTS: &str = "telltale: too many events";

/// A batch body shaped as the collector expects. Unknown top-level fields are ignored.
#[derive(Deserialize)]
struct BorrowedBatch<'a> {
    #[serde(borrow, default)]
    events: Option<EventsField<'a>>,
}

/// The `events` member: an array of raw events, or anything else (consumed and rejected later).
/// A hand-written visitor, because serde's untagged enums cannot hold borrowed raw values.
enum EventsField<'a> {
    Array(Vec<&'a RawValue>),
    Other,
}

impl<'de: 'a, 'a> Deserialize<'de> for EventsField<'a> {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct EventsVisitor<'a>(std::marker::PhantomData<&'a ()>);

        impl<'de: 'a, 'a> serde::de::Visitor<'de> for EventsVisitor<'a> {
            type Value = EventsField<'a>;

            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("an array of events")
            }

            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                mut seq: A,
            ) -> Result<Self::Value, A::Error> {
                let mut events =
                    Vec::with_capacity(seq.size_hint().unwrap_or(32).min(MAX_EVENTS_PER_BATCH));
                while let Some(event) = seq.next_element::<&'a RawValue>()? {
                    if events.len() == MAX_EVENTS_PER_BATCH {
                        // Stop here: a 1 MiB body of tiny events must not become half a million
                        // pointers before it is refused.
                        return Err(serde::de::Error::custom(TOO_MANY_EVENTS));
                    }
                    events.push(event);
                }
                Ok(EventsField::Array(events))
            }

            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> Result<Self::Value, A::Error> {
                while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
                Ok(EventsField::Other)
            }

            fn visit_bool<E>(self, _: bool) -> Result<Self::Value, E> {
                Ok(EventsField::Other)
            }
            fn visit_i64<E>(self, _: i64) -> Result<Self::Value, E> {
                Ok(EventsField::Other)
            }
            fn visit_u64<E>(self, _: u64) -> Result<Self::Value, E> {
                Ok(EventsField::Other)
            }
            fn visit_f64<E>(self, _: f64) -> Result<Self::Value, E> {
                Ok(EventsField::Other)
            }
            fn visit_str<E>(self, _: &str) -> Result<Self::Value, E> {
                Ok(EventsField::Other)
            }
            fn visit_unit<E>(self) -> Result<Self::Value, E> {
                Ok(EventsField::Other)
            }
        }

        deserializer.deserialize_any(EventsVisitor(std::marker::PhantomData))
    }
}

/// Validates a batch body and returns the number of events it holds.
pub fn count_batch_events(body: &[u8]) -> Result<usize, BatchError> {
    if body.len() > MAX_BODY_BYTES {
        return Err(BatchError::TooLarge);
    }
    Ok(parse_borrowed(body)?.len())
}

/// The events of a batch body, each as its raw JSON text. The body must already have passed
/// [`count_batch_events`]; a body that does not parse yields an error.
pub fn batch_events(body: &[u8]) -> Result<Vec<&RawValue>, BatchError> {
    parse_borrowed(body)
}

fn parse_borrowed(body: &[u8]) -> Result<Vec<&RawValue>, BatchError> {
    // A top-level value that is not an object is rejected as "not a batch", not as malformed.
    let first = body.iter().find(|byte| !byte.is_ascii_whitespace());
    if first.is_some_and(|byte| *byte != b'{') {
        return match serde_json::from_slice::<IgnoredAny>(body) {
            Ok(_) => Err(BatchError::NotABatch),
            Err(error) => Err(BatchError::Malformed(error.to_string())),
        };
    }
    let batch: BorrowedBatch<'_> = serde_json::from_slice(body).map_err(|error| {
        if error.to_string().starts_with(TOO_MANY_EVENTS) {
            BatchError::TooManyEvents
        } else {
            BatchError::Malformed(error.to_string())
        }
    })?;
    match batch.events {
        Some(EventsField::Array(events)) => Ok(events),
        _ => Err(BatchError::NotABatch),
    }
}

/// Checks a browser-session identifier: 1 to 128 characters of `[A-Za-z0-9._:-]`.
pub fn validate_identifier(identifier: &str) -> Result<(), String> {
    if identifier.is_empty() {
        return Err("identifier must not be empty".to_owned());
    }
    if identifier.len() > MAX_IDENTIFIER_LEN {
        return Err("identifier is longer than 128 characters".to_owned());
    }
    if !identifier
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b':' | b'-'))
    {
        return Err("identifier may only contain letters, digits and . _ : -".to_owned());
    }
    Ok(())
}

/// Normalizes a UUID in its hyphenated 8-4-4-4-12 form (either case) to lowercase. `None` for
/// anything else.
pub fn normalize_reference(value: &str) -> Option<String> {
    if value.len() != 36 {
        return None;
    }
    let uuid = uuid::Uuid::try_parse(value).ok()?;
    let normalized = uuid.hyphenated().to_string();
    normalized.eq_ignore_ascii_case(value).then_some(normalized)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn counts_events_of_a_valid_batch() {
        let body = br#"{"events":[{"type":"pointermove","timestamp":1,"data":{"x":1,"y":2}}, 3, "s", null, [1,[2]]]}"#;
        assert_eq!(count_batch_events(body), Ok(5));
        assert_eq!(
            count_batch_events(br#"{"events":[], "extra": {"a": 1}}"#),
            Ok(0)
        );
    }

    #[test]
    fn rejects_bodies_that_are_not_batches() {
        assert_eq!(
            count_batch_events(br#"{"events":{}}"#),
            Err(BatchError::NotABatch)
        );
        assert_eq!(
            count_batch_events(br#"{"events":"x"}"#),
            Err(BatchError::NotABatch)
        );
        assert_eq!(count_batch_events(br#"{}"#), Err(BatchError::NotABatch));
        assert_eq!(count_batch_events(br#"[1,2]"#), Err(BatchError::NotABatch));
        assert_eq!(count_batch_events(br#"42"#), Err(BatchError::NotABatch));
        assert!(matches!(
            count_batch_events(b""),
            Err(BatchError::Malformed(_))
        ));
        assert!(matches!(
            count_batch_events(br#"{"events":[1,]}"#),
            Err(BatchError::Malformed(_))
        ));
        assert!(matches!(
            count_batch_events(b"{\"events\":[\"\xff\"]}"),
            Err(BatchError::Malformed(_))
        ));
        assert!(matches!(
            count_batch_events(br#"{"events":[]} trailing"#),
            Err(BatchError::Malformed(_))
        ));
    }

    #[test]
    fn deep_nesting_is_skipped_iteratively_and_decodes_without_overflow() {
        // Any JSON value is a valid event; raw values are skipped without recursion, and the
        // typed decoder's recursion limit turns a too-deep event into a raw payload.
        let depth = 100_000;
        let body = format!(
            "{{\"events\":[{}{}]}}",
            "[".repeat(depth),
            "]".repeat(depth)
        );
        assert_eq!(count_batch_events(body.as_bytes()), Ok(1));
        let objects = format!(
            "{{\"events\":[{}1{}]}}",
            "{\"a\":".repeat(depth),
            "}".repeat(depth)
        );
        assert_eq!(count_batch_events(objects.as_bytes()), Ok(1));
        for raw in batch_events(objects.as_bytes()).expect("valid") {
            let row = crate::event_row::decode_event(raw);
            assert_eq!(row.payload, Some(raw.get()));
        }
        let unbalanced = format!("{{\"events\":[{}]}}", "[".repeat(depth));
        assert!(matches!(
            count_batch_events(unbalanced.as_bytes()),
            Err(BatchError::Malformed(_))
        ));
    }

    #[test]
    fn enforces_event_and_size_limits() {
        let exactly = vec!["1"; MAX_EVENTS_PER_BATCH].join(",");
        assert_eq!(
            count_batch_events(format!("{{\"events\":[{exactly}]}}").as_bytes()),
            Ok(1000)
        );
        let events = vec!["1"; MAX_EVENTS_PER_BATCH + 1].join(",");
        let body = format!("{{\"events\":[{events}]}}");
        assert_eq!(
            count_batch_events(body.as_bytes()),
            Err(BatchError::TooManyEvents)
        );
        let huge = format!("{{\"events\":[\"{}\"]}}", "a".repeat(MAX_BODY_BYTES));
        assert_eq!(
            count_batch_events(huge.as_bytes()),
            Err(BatchError::TooLarge)
        );
    }

    #[test]
    fn identifiers_follow_the_documented_alphabet() {
        assert!(validate_identifier("0b1c2d3e-aaaa-4bbb-8ccc-123456789abc").is_ok());
        assert!(validate_identifier("a.b_c:d-E9").is_ok());
        assert!(validate_identifier(&"a".repeat(128)).is_ok());
        assert!(validate_identifier(&"a".repeat(129)).is_err());
        assert!(validate_identifier("").is_err());
        assert!(validate_identifier("../etc/passwd").is_err());
        assert!(validate_identifier("a b").is_err());
        assert!(validate_identifier("é").is_err());
    }

    #[test]
    fn references_must_be_hyphenated_uuids() {
        assert_eq!(
            normalize_reference("1B4E28BA-2FA1-11D2-883F-0016D3CCA427").as_deref(),
            Some("1b4e28ba-2fa1-11d2-883f-0016d3cca427")
        );
        assert!(normalize_reference("1b4e28ba2fa111d2883f0016d3cca427").is_none());
        assert!(normalize_reference("{1b4e28ba-2fa1-11d2-883f-0016d3cca427}").is_none());
        assert!(normalize_reference("not-a-uuid").is_none());
    }

    proptest! {
        #[test]
        fn arbitrary_bytes_never_panic(body in proptest::collection::vec(any::<u8>(), 0..2048)) {
            let _ = count_batch_events(&body);
        }

        #[test]
        fn arbitrary_json_values_never_panic(value in arbitrary_json(4)) {
            let body = serde_json::json!({ "events": value }).to_string();
            let result = count_batch_events(body.as_bytes());
            match &value {
                serde_json::Value::Array(items) if items.len() <= MAX_EVENTS_PER_BATCH => {
                    prop_assert_eq!(result, Ok(items.len()));
                }
                serde_json::Value::Array(_) => prop_assert_eq!(result, Err(BatchError::TooManyEvents)),
                _ => prop_assert_eq!(result, Err(BatchError::NotABatch)),
            }
        }

        #[test]
        fn identifiers_outside_the_alphabet_are_rejected(identifier in ".{0,200}") {
            let valid = !identifier.is_empty()
                && identifier.len() <= MAX_IDENTIFIER_LEN
                && identifier.bytes().all(|b| b.is_ascii_alphanumeric() || b"._:-".contains(&b));
            prop_assert_eq!(validate_identifier(&identifier).is_ok(), valid);
        }
    }

    fn arbitrary_json(depth: u32) -> impl Strategy<Value = serde_json::Value> {
        let leaf = prop_oneof![
            Just(serde_json::Value::Null),
            any::<bool>().prop_map(serde_json::Value::Bool),
            any::<i64>().prop_map(serde_json::Value::from),
            any::<f64>()
                .prop_filter("finite", |f| f.is_finite())
                .prop_map(serde_json::Value::from),
            ".{0,40}".prop_map(serde_json::Value::String),
        ];
        leaf.prop_recursive(depth, 64, 8, |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..8).prop_map(serde_json::Value::Array),
                proptest::collection::hash_map(".{0,10}", inner, 0..8)
                    .prop_map(|map| serde_json::Value::Object(map.into_iter().collect())),
            ]
        })
    }
}

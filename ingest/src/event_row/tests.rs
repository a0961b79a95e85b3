use super::*;
use proptest::prelude::*;

fn decode(text: &str) -> EventRow<'static> {
    let raw: &'static RawValue = Box::leak(RawValue::from_string(text.to_owned()).expect("json"));
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
    let click = decode(r#"{"type":"click","timestamp":9,"data":{"interviewId":"abc"}}"#);
    assert_eq!((click.event_time, click.interview_id), (Some(9), None));
}

#[test]
fn every_event_of_a_batch_is_decoded_however_deep() {
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
        assert_eq!(crate::batch::count_batch_events(body.as_bytes()), Ok(2));
        let rows = decode_batch(body.as_bytes()).expect("deep events");
        assert_eq!(rows.len(), 2);
        assert!(rows.iter().all(|row| row.payload.is_some()));
    }
}

#[test]
fn the_fast_path_takes_the_embeds_common_events() {
    for text in [
        r#"{"type":"pointermove","timestamp":1700000000123,"data":{"x":10,"y":-3,"pointerType":"mouse","trusted":true}}"#,
        r#"{ "data" : { "keyClass":"char", "holdMs": 87.5, "repeat": false }, "timestamp": 5, "type": "keyup" }"#,
        r#"{"type":"focus","timestamp":0,"data":{}}"#,
    ] {
        let row = fast::decode_event(text).expect("fast path");
        let raw = RawValue::from_string(text.to_owned()).expect("json");
        assert_eq!(row, decode_with_serde(&raw), "{text}");
    }
    let body = br#"{"events":[{"type":"scroll","timestamp":1,"data":{"dx":0,"dy":-120.5,"deltaMode":0}}, {"type":"blur","timestamp":2,"data":{}}]}"#;
    assert_eq!(fast::decode_batch(body).map(|rows| rows.len()), Some(2));
    // Left to serde: escapes, `-0`, duplicates, other keys, nulls, a second top-level key.
    for text in [
        r#"{"type":"point\u0065rmove","timestamp":1,"data":{}}"#,
        r#"{"type":"focus","timestamp":-0,"data":{}}"#,
        r#"{"type":"focus","type":"blur","timestamp":1,"data":{}}"#,
        r#"{"type":"focus","timestamp":1,"data":{"x":1,"x":2}}"#,
        r#"{"type":"focus","timestamp":1,"data":{"x":null}}"#,
        r#"{"type":"focus","timestamp":1,"data":{},"other":1}"#,
    ] {
        assert_eq!(fast::decode_event(text), None, "{text}");
    }
    assert!(fast::decode_batch(br#"{"events":[],"other":1}"#).is_none());
    // Statistics skip `data` whatever it holds, but leave `session` events to serde.
    let body = br#"{"events":[{"type":"x","timestamp":3,"data":{"a":[1,{"b":"}\"]"}],"c":null}},{"data":7,"timestamp":4,"type":"y"}]}"#;
    assert_eq!(fast::batch_times(body), Some(vec![3, 4]));
    let session = br#"{"events":[{"type":"session","timestamp":3,"data":{"interviewId":"abc"}}]}"#;
    assert_eq!(fast::batch_times(session), None);
    assert_eq!(
        stats_events(session).expect("stats"),
        vec![StatsEvent {
            event_time: Some(3),
            interview_id: Some("abc".to_owned())
        }]
    );
}

/// Values of every kind the fast path must either read exactly as serde does or refuse.
fn value_text() -> impl Strategy<Value = String> {
    prop_oneof![
        any::<i32>().prop_map(|value| value.to_string()),
        any::<i64>().prop_map(|value| value.to_string()),
        any::<u64>().prop_map(|value| value.to_string()),
        any::<f64>()
            .prop_filter("finite", |value| value.is_finite())
            .prop_map(|value| value.to_string()),
        prop_oneof![
            Just("-0"),
            Just("0"),
            Just("1e3"),
            Just("-1.5E-2"),
            Just("123456789012345678"),
            Just("1234567890123456789"),
            Just("-9223372036854775808"),
            Just("true"),
            Just("false"),
            Just("null"),
            Just(r#""a\"b""#),
            Just(r#""\u0041""#),
            Just("[1,2]"),
            Just("{}"),
            Just(r#"{"x":1}"#),
        ]
        .prop_map(str::to_owned),
        "[a-zé]{0,6}".prop_map(|text| format!("\"{text}\"")),
    ]
}

fn whitespace() -> impl Strategy<Value = &'static str> {
    prop_oneof![Just(""), Just(""), Just(" "), Just("\n\t ")]
}

fn object_text(
    keys: &'static [&'static str],
    value: impl Strategy<Value = String>,
) -> impl Strategy<Value = String> {
    proptest::collection::vec((proptest::sample::select(keys), value, whitespace()), 0..7).prop_map(
        |fields| {
            let fields: Vec<String> = fields
                .into_iter()
                .map(|(key, value, space)| format!("{space}\"{key}\"{space}:{space}{value}"))
                .collect();
            format!("{{{}}}", fields.join(","))
        },
    )
}

fn event_text() -> impl Strategy<Value = String> {
    const DATA_KEYS: &[&str] = &[
        "x",
        "y",
        "pointerType",
        "trusted",
        "button",
        "target",
        "keyClass",
        "repeat",
        "holdMs",
        "flightMs",
        "inputType",
        "lengthDelta",
        "field",
        "length",
        "dx",
        "dy",
        "deltaMode",
        "force",
        "radius",
        "state",
        "width",
        "height",
        "interviewId",
        "X",
    ];
    const EVENT_KEYS: &[&str] = &["type", "timestamp", "data", "data", "other"];
    object_text(
        EVENT_KEYS,
        prop_oneof![
            value_text(),
            object_text(DATA_KEYS, value_text()),
            object_text(DATA_KEYS, value_text()),
        ],
    )
}

/// Events of the vocabulary's shape, mostly with well-typed fields, so that the fast path
/// takes many of them (and still meets duplicates, wrong types and stray keys).
fn shaped_event_text() -> impl Strategy<Value = String> {
    const INT_KEYS: &[&str] = &[
        "x",
        "y",
        "button",
        "lengthDelta",
        "field",
        "length",
        "deltaMode",
        "width",
        "height",
    ];
    const FLOAT_KEYS: &[&str] = &["holdMs", "flightMs", "dx", "dy", "force", "radius"];
    const STR_KEYS: &[&str] = &["pointerType", "target", "keyClass", "inputType", "state"];
    const BOOL_KEYS: &[&str] = &["trusted", "repeat"];
    let field = prop_oneof![
        4 => (proptest::sample::select(INT_KEYS), any::<i32>())
            .prop_map(|(key, value)| format!("\"{key}\":{value}")),
        2 => (proptest::sample::select(FLOAT_KEYS), any::<f32>())
            .prop_filter("finite", |(_, value)| value.is_finite())
            .prop_map(|(key, value)| format!("\"{key}\":{value}")),
        2 => (proptest::sample::select(STR_KEYS), "[a-z]{0,5}")
            .prop_map(|(key, value)| format!("\"{key}\":\"{value}\"")),
        2 => (proptest::sample::select(BOOL_KEYS), any::<bool>())
            .prop_map(|(key, value)| format!("\"{key}\":{value}")),
        1 => ("[a-zA-Z]{1,6}", value_text())
            .prop_map(|(key, value)| format!("\"{key}\":{value}")),
    ];
    let timestamp = prop_oneof![
        4 => (0_i64..2_000_000_000_000).prop_map(|value| value.to_string()),
        1 => value_text(),
    ];
    (
        "[a-z]{1,10}",
        timestamp,
        proptest::collection::vec(field, 0..6),
        whitespace(),
    )
        .prop_map(|(event_type, timestamp, fields, space)| {
            format!(
                "{{\"type\":{space}\"{event_type}\",\"timestamp\":{timestamp},{space}\"data\":{{{}}}}}",
                fields.join(",")
            )
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1024))]

    #[test]
    fn the_fast_path_decodes_exactly_as_serde(
        events in proptest::collection::vec(prop_oneof![event_text(), shaped_event_text()], 0..6),
        space in whitespace(),
    ) {
        let body = format!("{{{space}\"events\":[{}]{space}}}", events.join(","));
        prop_assume!(crate::batch::count_batch_events(body.as_bytes()).is_ok());
        let raws = crate::batch::batch_events(body.as_bytes()).expect("valid body");
        let fast = raws.iter().filter(|raw| fast::decode_event(raw.get()).is_some()).count();
        FAST_PATH_HITS.with(|hits| hits.set(hits.get() + fast));
        if let Err(failure) = decodes_as_serde(body.as_bytes()) {
            return Err(TestCaseError::fail(failure));
        }
    }
}

/// The decoders' contract on any body the collector accepts (its count succeeds; the
/// others only ever see such bodies, and may skip validating what it validated): the
/// lake's and the statistics' decoders accept it too, and every event decodes (fast path or
/// not) exactly as serde decodes it.
fn decodes_as_serde(body: &[u8]) -> Result<(), String> {
    let Ok(count) = crate::batch::count_batch_events(body) else {
        return Ok(());
    };
    let (decoded, stats) = match (decode_batch(body), stats_events(body)) {
        (Ok(decoded), Ok(stats)) => (decoded, stats),
        (decoded, stats) => {
            return Err(format!(
                "counted {count} events, but decode {:?}, stats {:?}",
                decoded.map(|_| ()),
                stats.map(|_| ())
            ));
        }
    };
    let raws = crate::batch::batch_events(body).map_err(|error| error.to_string())?;
    let by_serde: Vec<EventRow<'_>> = raws.iter().map(|raw| decode_with_serde(raw)).collect();
    let by_event: Vec<EventRow<'_>> = raws.iter().map(|raw| decode_event(raw)).collect();
    if by_serde.len() != count {
        return Err(format!("counted {count}, serde found {}", by_serde.len()));
    }
    if by_event != by_serde {
        return Err(format!("decode_event {by_event:?} != serde {by_serde:?}"));
    }
    if decoded != by_serde {
        return Err(format!("decode_batch {decoded:?} != serde {by_serde:?}"));
    }
    let expected: Vec<StatsEvent> = by_serde
        .iter()
        .map(|row| StatsEvent {
            event_time: row.event_time,
            interview_id: row.interview_id.clone(),
        })
        .collect();
    if stats != expected {
        return Err(format!("stats_events {stats:?} != {expected:?}"));
    }
    Ok(())
}

use crate::fuzz_mutator as mutator;

/// Time-bounded fuzzing of the decoders (`TELLTALE_FUZZ_SECS`, tests/fuzz/mutator.rs) from
/// the corpus in `tests/fuzz/corpus/events`.
#[test]
fn fuzz_the_decoders_against_serde() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fuzz/corpus");
    let dictionary = mutator::JSON_TOKENS;
    let report = mutator::run("events", &root, dictionary, decodes_as_serde);
    assert!(
        report.mutants > 0 || mutator::budget().is_zero(),
        "{report:?}"
    );
}

thread_local! {
    /// Events of the property test's cases that the fast path decoded, on this thread.
    static FAST_PATH_HITS: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

#[test]
fn the_property_test_exercises_the_fast_path() {
    // Runs the property test's cases again on this thread and counts what they decoded fast.
    FAST_PATH_HITS.with(|hits| hits.set(0));
    the_fast_path_decodes_exactly_as_serde();
    let hits = FAST_PATH_HITS.with(std::cell::Cell::get);
    assert!(hits >= 100, "only {hits} events took the fast path");
}

#[test]
fn implausible_timestamps_fall_back_to_receipt_time() {
    let received = 1_700_000_000_000;
    let row = decode(r#"{"type":"focus","timestamp":12,"data":{}}"#);
    assert_eq!(row.stats_time(received), received);
    let row = decode(r#"{"type":"focus","timestamp":1699999999000,"data":{}}"#);
    assert_eq!(row.stats_time(received), 1_699_999_999_000);
}

use std::sync::Arc;

use arrow::array::{
    ArrayRef, BooleanArray, Float64Array, Int32Array, RecordBatch, StringArray,
    TimestampMillisecondArray,
};
use arrow::datatypes::{DataType, Field, Schema, TimeUnit};

use super::*;
use crate::trace::{Environment, SessionTrace};

/// One hand-made event: `(ms, type, x, y, pointer type, key class, input type, length)`.
type Event = (
    i64,
    &'static str,
    Option<i32>,
    Option<i32>,
    Option<&'static str>,
    Option<&'static str>,
    Option<&'static str>,
    Option<i32>,
);

/// A batch with the `events` columns the timeline reads (plain strings, as a reader may give
/// them; the lake's dictionaries are cast the same way).
fn batch(events: &[Event]) -> RecordBatch {
    let utc = || DataType::Timestamp(TimeUnit::Millisecond, Some("UTC".into()));
    let schema = Schema::new(vec![
        Field::new("received_at", utc(), false),
        Field::new("event_time", utc(), true),
        Field::new("type", DataType::Utf8, true),
        Field::new("x", DataType::Int32, true),
        Field::new("y", DataType::Int32, true),
        Field::new("pointer_type", DataType::Utf8, true),
        Field::new("trusted", DataType::Boolean, true),
        Field::new("key_class", DataType::Utf8, true),
        Field::new("input_type", DataType::Utf8, true),
        Field::new("length_delta", DataType::Int32, true),
        Field::new("length", DataType::Int32, true),
        Field::new("dy", DataType::Float64, true),
    ]);
    let times: Vec<i64> = events.iter().map(|e| 1_700_000_000_000 + e.0).collect();
    let columns: Vec<ArrayRef> = vec![
        Arc::new(
            TimestampMillisecondArray::from(times.iter().map(|t| t + 40).collect::<Vec<_>>())
                .with_timezone("UTC"),
        ),
        Arc::new(TimestampMillisecondArray::from(times.clone()).with_timezone("UTC")),
        Arc::new(StringArray::from(
            events.iter().map(|e| Some(e.1)).collect::<Vec<_>>(),
        )),
        Arc::new(Int32Array::from(
            events.iter().map(|e| e.2).collect::<Vec<_>>(),
        )),
        Arc::new(Int32Array::from(
            events.iter().map(|e| e.3).collect::<Vec<_>>(),
        )),
        Arc::new(StringArray::from(
            events.iter().map(|e| e.4).collect::<Vec<_>>(),
        )),
        Arc::new(BooleanArray::from(vec![Some(true); events.len()])),
        Arc::new(StringArray::from(
            events.iter().map(|e| e.5).collect::<Vec<_>>(),
        )),
        Arc::new(StringArray::from(
            events.iter().map(|e| e.6).collect::<Vec<_>>(),
        )),
        Arc::new(Int32Array::from(
            events
                .iter()
                .map(|e| e.7.filter(|_| e.1 == "input"))
                .collect::<Vec<_>>(),
        )),
        Arc::new(Int32Array::from(
            events
                .iter()
                .map(|e| e.7.filter(|_| e.1 == "paste"))
                .collect::<Vec<_>>(),
        )),
        Arc::new(Float64Array::from(
            events
                .iter()
                .map(|e| (e.1 == "wheel").then_some(100.0))
                .collect::<Vec<_>>(),
        )),
    ];
    RecordBatch::try_new(Arc::new(schema), columns).expect("batch")
}

fn mv(t: i64, x: i32, y: i32, pointer: &'static str) -> Event {
    (
        t,
        "pointermove",
        Some(x),
        Some(y),
        Some(pointer),
        None,
        None,
        None,
    )
}

fn key(t: i64, kind: &'static str, class: &'static str) -> Event {
    (t, kind, None, None, None, Some(class), None, None)
}

fn input(t: i64, length: i32) -> Event {
    (
        t,
        "input",
        None,
        None,
        None,
        None,
        Some("insertText"),
        Some(length),
    )
}

#[test]
fn the_simplified_path_replays_within_a_pixel_of_every_recorded_move() {
    // An aimed movement with a bell-shaped speed profile, a stop, and a correction: the stop
    // and the correction lie on the same straight line, which a spatial simplification would
    // reduce to its two ends.
    let mut points = Vec::new();
    for i in 0..=60 {
        let s = f64::from(i) / 60.0;
        let progress = 10.0 * s.powi(3) - 15.0 * s.powi(4) + 6.0 * s.powi(5);
        points.push([i64::from(i) * 16, (400.0 * progress).round() as i64, 300]);
    }
    for i in 1..=20 {
        points.push([960 + i64::from(i) * 16, 400, 300]);
    }
    for i in 1..=15 {
        points.push([1280 + i64::from(i) * 16, 400 + i64::from(i), 300]);
    }
    let simplified = simplify(&points, PATH_TOLERANCE_PX);
    assert!(simplified.len() < points.len() / 3, "{}", simplified.len());
    assert_eq!(simplified.first(), points.first());
    assert_eq!(simplified.last(), points.last());
    for point in &points {
        let (x, y) = replay_position(&simplified, point[0]).expect("a position");
        let off = (x - point[1] as f64).hypot(y - point[2] as f64);
        assert!(off <= PATH_TOLERANCE_PX, "{point:?} is {off} px off");
    }
    // The stop survives: the pointer is still at 400 at the stop's middle.
    assert_eq!(replay_position(&simplified, 1120), Some((400.0, 300.0)));
}

#[test]
fn strokes_split_at_pauses_and_pointer_types_and_touch_is_drawn_once() {
    let events = vec![
        mv(0, 10, 10, "mouse"),
        mv(16, 12, 11, "mouse"),
        mv(32, 15, 12, "mouse"),
        // A pause of more than a second: a new stroke.
        mv(1500, 200, 200, "mouse"),
        mv(1516, 210, 205, "mouse"),
        mv(1532, 215, 207, "pen"),
        (
            2000,
            "touchstart",
            Some(50),
            Some(60),
            None,
            None,
            None,
            None,
        ),
        // The pointer event a phone fires beside the touch is not drawn twice.
        mv(2010, 52, 61, "touch"),
        (
            2016,
            "touchmove",
            Some(55),
            Some(62),
            None,
            None,
            None,
            None,
        ),
        (2100, "touchend", Some(55), Some(62), None, None, None, None),
    ];
    let timeline = timeline(&[batch(&events)], &SessionTrace::default()).expect("timeline");
    let kinds: Vec<(&str, u32)> = timeline
        .pointer
        .iter()
        .map(|stroke| (stroke.pointer_type, stroke.recorded))
        .collect();
    assert_eq!(
        kinds,
        [("mouse", 3), ("mouse", 2), ("pen", 1), ("touch", 2)]
    );
    assert_eq!(timeline.started_at, 1_700_000_000_000);
    assert_eq!(timeline.duration_ms, 2100);
    assert_eq!(timeline.event_count, 10);
    let presses: Vec<&str> = timeline.presses.iter().map(|p| p.kind).collect();
    assert_eq!(presses, ["touchstart", "touchend"]);
}

#[test]
fn keys_carry_their_class_and_hold_and_text_says_where_it_came_from() {
    let events = vec![
        key(0, "keydown", "char"),
        key(20, "keydown", "digit"),
        key(95, "keyup", "char"),
        input(100, 1),
        key(140, "keyup", "digit"),
        (3000, "paste", None, None, None, None, None, Some(24)),
        (
            3010,
            "input",
            None,
            None,
            None,
            None,
            Some("insertFromPaste"),
            Some(24),
        ),
        // Text with no key press or paste behind it.
        input(9000, 12),
    ];
    let timeline = timeline(&[batch(&events)], &SessionTrace::default()).expect("timeline");
    let keys: Vec<(i64, &str, Option<i64>)> = timeline
        .keys
        .iter()
        .map(|k| (k.t, k.class, k.hold_ms))
        .collect();
    assert_eq!(keys, [(0, "char", Some(95)), (20, "digit", Some(120))]);
    let text: Vec<(&str, i64)> = timeline.text.iter().map(|t| (t.kind, t.length)).collect();
    assert_eq!(text, [("typed", 1), ("paste", 24), ("inserted", 12)]);
    // Nothing in the timeline can hold a key's value: classes only.
    let json = serde_json::to_string(&timeline).expect("json");
    assert!(!json.contains("\"key\""), "{json}");
}

#[test]
fn the_viewport_comes_from_what_the_embed_reported() {
    let trace = SessionTrace {
        events: Vec::new(),
        environment: Some(Box::new(Environment {
            viewport_width: Some(1280.0),
            viewport_height: Some(800.0),
            webdriver: Some(true),
            ..Environment::default()
        })),
        delivery: None,
    };
    let timeline = timeline(&[batch(&[mv(0, 1, 1, "mouse")])], &trace).expect("timeline");
    assert_eq!(
        timeline.viewport,
        Some(Size {
            width: 1280.0,
            height: 800.0
        })
    );
    let tells = EnvironmentTells::of(trace.environment.as_deref());
    assert_eq!(tells.webdriver, Some(true));
    assert!(!tells.headless_user_agent);
}

#[test]
fn every_feature_is_listed_with_its_contribution_and_human_percentile() {
    let model = Model::from_json(
        r#"{"version":"t","description":"","bias":0,
            "bands":{"review_from":30,"human_from":70},
            "terms":[{"feature":"webdriver","weight":-8,"transform":{"kind":"indicator"}}],
            "human_ranges":[{"feature":"key_hold_mean_ms","sessions":50,"quantiles":[50,100,150]}]}"#,
    )
    .expect("model");
    let mut features = Features::unmeasured();
    features.webdriver = 1.0;
    features.key_hold_mean_ms = 125.0;
    let listed = feature_evidence(&model, &features);
    assert_eq!(listed.len(), Features::NAMES.len());
    let find = |name: &str| listed.iter().find(|f| f.name == name).expect(name);
    assert_eq!(find("webdriver").contribution, -8.0);
    assert_eq!(find("webdriver").value, Some(1.0));
    assert_eq!(find("key_hold_mean_ms").human_percentile, Some(75.0));
    assert_eq!(find("key_hold_mean_ms").contribution, 0.0);
    assert_eq!(find("key_flight_mean_ms").value, None);
    // The contributions are the score's: they add up to its log-odds.
    let total: f64 = model.contributions(&features).iter().sum();
    let score = model.score(&features).human_score_percent;
    let expected = (100.0 / (1.0 + (-total).exp()) * 100.0).round() / 100.0;
    assert_eq!(score, expected);
}

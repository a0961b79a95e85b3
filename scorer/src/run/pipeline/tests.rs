use super::*;
use crate::trace::{Kind, TraceEvent};

#[test]
fn a_session_without_events_fails_alone_and_says_why() {
    let model = Model::default_model().expect("built-in model");
    let failure =
        score_one(&model, "r1".to_owned(), SessionTrace::default()).expect_err("nothing to score");
    assert_eq!(failure.session_id, "r1");
    assert_eq!(failure.code.as_deref(), Some("no_events"));
}

#[test]
fn a_session_with_events_is_scored_under_its_reference() {
    let model = Model::default_model().expect("built-in model");
    let mut trace = SessionTrace::default();
    // Out of order: scoring puts the events in time order first.
    trace.push(TraceEvent::new(2_000, Kind::Click).at(120, 80));
    trace.push(TraceEvent::new(1_000, Kind::Session));
    trace.push(TraceEvent::new(1_500, Kind::PointerMove).at(100, 70));
    let scored = score_one(&model, "r2".to_owned(), trace).expect("scored");
    assert_eq!(scored.reference, "r2");
    let percent = scored.score.human_score_percent;
    assert!((0.0..=100.0).contains(&percent), "{percent}");
    assert_eq!(scored.score.band, model.band(percent));
}

use super::*;
use crate::trace::{Kind, TraceEvent};

#[test]
fn a_session_without_events_fails_alone_and_says_why() {
    let failure = features_of("r1".to_owned(), SessionTrace::default()).expect_err("nothing");
    assert_eq!(failure.session_id, "r1");
    assert_eq!(failure.code.as_deref(), Some("no_events"));
}

#[tokio::test]
async fn a_session_with_events_is_scored_under_its_reference() {
    let model = Arc::new(Model::default_model().expect("built-in model"));
    let mut trace = SessionTrace::default();
    // Out of order: scoring puts the events in time order first.
    trace.push(TraceEvent::new(2_000, Kind::Click).at(120, 80));
    trace.push(TraceEvent::new(1_000, Kind::Session));
    trace.push(TraceEvent::new(1_500, Kind::PointerMove).at(100, 70));
    let computed = featurize(
        model.clone(),
        vec![
            ("r2".to_owned(), false, trace),
            ("r3".to_owned(), false, SessionTrace::default()),
        ],
    )
    .await
    .expect("on the pool");
    let (_, featured, rescore) = stand(Cohort::default(), computed, Vec::new())
        .await
        .expect("on the pool");
    assert!(rescore.is_empty());
    let scored = score_sessions(model.clone(), featured)
        .await
        .expect("on the pool");
    let scored_r2 = scored[0].as_ref().expect("scored");
    assert_eq!(scored_r2.reference, "r2");
    // Too little behaviour to be placed in the cohort.
    assert!(scored_r2.features.cohort_alike.is_nan());
    assert!(scored_r2.cohort.is_empty());
    let percent = scored_r2.score.human_score_percent;
    assert!((0.0..=100.0).contains(&percent), "{percent}");
    assert_eq!(scored_r2.score.band, model.band(percent));
    assert_eq!(
        scored[1].as_ref().expect_err("no events").code.as_deref(),
        Some("no_events")
    );
}

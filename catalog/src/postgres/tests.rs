use super::surveys::merge_deltas;
use super::*;

fn delta(identifier: &str, reference: Option<&str>, explicit: bool, count: u64) -> SessionDelta {
    SessionDelta {
        survey_id: SurveyId::from_stored("a".repeat(24)),
        identifier: identifier.to_owned(),
        reference: reference.map(str::to_owned),
        reference_explicit: explicit,
        event_count: count,
        first_event_at: count as i64,
        last_event_at: 10 * count as i64,
        first_received_at: 1_000 + count as i64,
        last_received_at: 2_000 + count as i64,
    }
}

#[test]
fn merged_deltas_sum_per_identifier_and_keep_an_explicit_reference() {
    let merged = merge_deltas(&[
        delta("a", Some("default"), false, 2),
        delta("b", None, false, 1),
        delta("a", Some("explicit"), true, 3),
        delta("a", Some("later-default"), false, 4),
    ]);
    assert_eq!(merged.len(), 2);
    assert_eq!(merged[0].identifier, "a");
    assert_eq!(merged[0].event_count, 9);
    assert_eq!(merged[0].reference.as_deref(), Some("explicit"));
    assert!(merged[0].reference_explicit);
    assert_eq!((merged[0].first_event_at, merged[0].last_event_at), (2, 40));
    assert_eq!(merged[1].event_count, 1);
}

#[test]
fn merged_deltas_come_in_the_order_rows_are_locked() {
    let merged = merge_deltas(&[
        delta("c", None, false, 1),
        delta("a", None, false, 1),
        delta("b", None, false, 1),
        delta("a", None, false, 1),
    ]);
    let order: Vec<&str> = merged.iter().map(|d| d.identifier.as_str()).collect();
    assert_eq!(order, ["a", "b", "c"]);
}

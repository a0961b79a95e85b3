use super::*;

fn identity(identifier: &str, reference: Option<&str>, events: u64) -> SessionIdentity {
    SessionIdentity {
        identifier: identifier.to_owned(),
        reference: reference.map(str::to_owned),
        event_count: events,
    }
}

fn scored_by(reference: &str, run: &RunId) -> ScoredReference {
    ScoredReference {
        reference: reference.to_owned(),
        run_id: run.as_str().to_owned(),
    }
}

fn references(plan: &Plan) -> Vec<&str> {
    plan.sessions
        .iter()
        .map(|session| session.reference.as_str())
        .collect()
}

fn planned(reference: &str, events: u64) -> PlannedSession {
    PlannedSession {
        reference: reference.to_owned(),
        identifiers: vec![format!("{reference}-browser")],
        events,
        scored_before: false,
    }
}

fn pass_references(passes: &[Vec<&PlannedSession>]) -> Vec<Vec<String>> {
    passes
        .iter()
        .map(|pass| pass.iter().map(|s| s.reference.clone()).collect())
        .collect()
}

#[test]
fn a_reference_is_one_session_whatever_its_browser_sessions() {
    let run = RunId::generate();
    let plan = Plan::new(
        vec![
            identity("b1", Some("r1"), 10),
            identity("b2", Some("r2"), 5),
            identity("b3", Some("r1"), 7),
        ],
        Vec::new(),
        &run,
        false,
    );
    assert_eq!(plan.total, 2);
    assert_eq!(references(&plan), ["r1", "r2"]);
    let r1 = &plan.sessions[0];
    assert_eq!(r1.identifiers, ["b1", "b3"]);
    assert_eq!(r1.events, 17, "its browser sessions' events add up");
    assert_eq!((plan.already_scored, plan.skipped), (0, 0));
}

#[test]
fn sessions_without_a_reference_are_neither_planned_nor_counted() {
    let run = RunId::generate();
    let plan = Plan::new(
        vec![identity("b1", None, 40), identity("b2", Some("r2"), 5)],
        Vec::new(),
        &run,
        false,
    );
    assert_eq!(plan.total, 1);
    assert_eq!(references(&plan), ["r2"]);
}

#[test]
fn sessions_are_planned_in_reference_order() {
    let run = RunId::generate();
    let plan = Plan::new(
        vec![
            identity("b1", Some("zeta"), 1),
            identity("b2", Some("alpha"), 1),
            identity("b3", Some("mu"), 1),
        ],
        Vec::new(),
        &run,
        false,
    );
    assert_eq!(references(&plan), ["alpha", "mu", "zeta"]);
}

#[test]
fn a_resumed_run_counts_what_it_scored_and_does_not_score_it_again() {
    let run = RunId::generate();
    let identities = vec![identity("b1", Some("r1"), 3), identity("b2", Some("r2"), 3)];
    for force in [false, true] {
        let plan = Plan::new(identities.clone(), vec![scored_by("r1", &run)], &run, force);
        assert_eq!(plan.total, 2);
        assert_eq!(plan.already_scored, 1, "force {force}");
        assert_eq!(plan.skipped, 0, "force {force}");
        assert_eq!(references(&plan), ["r2"], "force {force}");
    }
}

#[test]
fn sessions_another_run_scored_are_skipped_unless_forced() {
    let run = RunId::generate();
    let earlier = RunId::generate();
    let identities = vec![identity("b1", Some("r1"), 3), identity("b2", Some("r2"), 3)];
    let scored = vec![scored_by("r1", &earlier)];

    let plan = Plan::new(identities.clone(), scored.clone(), &run, false);
    assert_eq!((plan.total, plan.already_scored, plan.skipped), (2, 0, 1));
    assert_eq!(references(&plan), ["r2"]);
    // Kept, should its cluster in the cohort grow: the run scores it again then.
    let skipped = &plan.skipped_sessions["r1"];
    assert_eq!(
        (skipped.identifiers.as_slice(), skipped.scored_before),
        (&["b1".to_owned()][..], true)
    );
    assert!(!plan.sessions[0].scored_before);

    let forced = Plan::new(identities, scored, &run, true);
    assert_eq!(
        (forced.total, forced.already_scored, forced.skipped),
        (2, 0, 0)
    );
    assert_eq!(references(&forced), ["r1", "r2"]);
}

#[test]
fn passes_hold_at_most_the_events_allowed_in_order() {
    let plan = Plan {
        sessions: vec![
            planned("a", 4),
            planned("b", 4),
            planned("c", 3),
            planned("d", 2),
        ],
        ..Plan::default()
    };
    let passes = plan.passes(8);
    assert_eq!(pass_references(&passes), [vec!["a", "b"], vec!["c", "d"]]);
    for pass in &passes {
        assert!(pass.iter().map(|s| s.events).sum::<u64>() <= 8);
    }
}

#[test]
fn a_session_larger_than_a_pass_gets_a_pass_of_its_own() {
    let plan = Plan {
        sessions: vec![planned("a", 3), planned("big", 20), planned("c", 3)],
        ..Plan::default()
    };
    assert_eq!(
        pass_references(&plan.passes(10)),
        [vec!["a"], vec!["big"], vec!["c"]]
    );
}

#[test]
fn every_planned_session_is_in_exactly_one_pass() {
    let plan = Plan {
        sessions: (0..50u64)
            .map(|i| planned(&format!("r{i:02}"), i * 7 % 13))
            .collect(),
        ..Plan::default()
    };
    for max_events in [1, 5, 13, 40, 1_000] {
        let flat: Vec<String> = pass_references(&plan.passes(max_events))
            .into_iter()
            .flatten()
            .collect();
        assert_eq!(flat, references(&plan), "max_events {max_events}");
    }
}

#[test]
fn nothing_to_score_makes_no_pass() {
    assert!(Plan::default().passes(100).is_empty());
}

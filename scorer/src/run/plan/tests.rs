use super::*;

fn identity(identifier: &str, reference: Option<&str>, events: u64) -> SessionIdentity {
    SessionIdentity {
        identifier: identifier.to_owned(),
        reference: reference.map(str::to_owned),
        event_count: events,
        received: None,
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
        received: None,
        scored_before: false,
    }
}

fn pass_references(passes: &[Vec<&PlannedSession>]) -> Vec<Vec<String>> {
    passes
        .iter()
        .map(|pass| pass.iter().map(|s| s.reference.clone()).collect())
        .collect()
}

fn unscored(identities: Vec<SessionIdentity>) -> UnscoredSessions {
    UnscoredSessions {
        references: 0,
        scored: 0,
        scored_by_run: 0,
        sessions: identities,
        grown: Vec::new(),
    }
}

#[test]
fn a_reference_is_one_session_whatever_its_browser_sessions() {
    let mut b3 = identity("b3", Some("r1"), 7);
    b3.received = Some((50, 90));
    let mut b1 = identity("b1", Some("r1"), 10);
    b1.received = Some((10, 60));
    let plan = Plan::incremental(unscored(vec![b1, identity("b2", Some("r2"), 5), b3]));
    assert_eq!(references(&plan), ["r1", "r2"]);
    let r1 = &plan.sessions[0];
    assert_eq!(r1.identifiers, ["b1", "b3"]);
    assert_eq!(r1.events, 17, "its browser sessions' events add up");
    assert_eq!(r1.received, Some((10, 90)), "its received ranges join");
    assert_eq!(plan.sessions[1].received, None);
}

#[test]
fn a_session_whose_received_range_is_not_known_is_read_from_every_file() {
    let mut b1 = identity("b1", Some("r1"), 10);
    b1.received = Some((10, 60));
    let plan = Plan::incremental(unscored(vec![b1, identity("b2", Some("r1"), 1)]));
    assert_eq!(plan.sessions[0].received, None);
}

#[test]
fn sessions_without_a_reference_are_neither_planned_nor_counted() {
    let run = RunId::generate();
    let plan = Plan::forced(
        vec![identity("b1", None, 40), identity("b2", Some("r2"), 5)],
        Vec::new(),
        &run,
    );
    assert_eq!(plan.total, 1);
    assert_eq!(references(&plan), ["r2"]);
}

#[test]
fn sessions_are_planned_in_reference_order() {
    let plan = Plan::incremental(unscored(vec![
        identity("b1", Some("zeta"), 1),
        identity("b2", Some("alpha"), 1),
        identity("b3", Some("mu"), 1),
    ]));
    assert_eq!(references(&plan), ["alpha", "mu", "zeta"]);
}

#[test]
fn an_incremental_plan_counts_what_the_catalog_counted() {
    let plan = Plan::incremental(UnscoredSessions {
        references: 10,
        scored: 7,
        scored_by_run: 2,
        sessions: vec![identity("b1", Some("r1"), 3)],
        grown: Vec::new(),
    });
    assert_eq!((plan.total, plan.already_scored, plan.skipped), (10, 2, 5));
    assert_eq!(references(&plan), ["r1"]);
    assert!(!plan.sessions[0].scored_before);
}

#[test]
fn an_incremental_plan_scores_again_what_grew_since_its_score() {
    let plan = Plan::incremental(UnscoredSessions {
        references: 10,
        scored: 7,
        scored_by_run: 2,
        sessions: vec![identity("b1", Some("r2"), 3)],
        grown: vec![identity("b2", Some("r1"), 5), identity("b3", Some("r1"), 1)],
    });
    // One of the five scored by earlier runs grew: four are skipped, one scored again.
    assert_eq!((plan.total, plan.already_scored, plan.skipped), (10, 2, 4));
    assert_eq!(references(&plan), ["r1", "r2"]);
    assert!(
        plan.sessions[0].scored_before,
        "counted in the cohort already"
    );
    assert_eq!(plan.sessions[0].events, 6);
    assert!(!plan.sessions[1].scored_before);
}

#[test]
fn a_forced_run_scores_what_other_runs_scored_but_not_what_it_did() {
    let run = RunId::generate();
    let earlier = RunId::generate();
    let identities = vec![
        identity("b1", Some("r1"), 3),
        identity("b2", Some("r2"), 3),
        identity("b3", Some("r3"), 3),
    ];
    let plan = Plan::forced(
        identities,
        vec![scored_by("r1", &earlier), scored_by("r2", &run)],
        &run,
    );
    assert_eq!((plan.total, plan.already_scored, plan.skipped), (3, 1, 0));
    assert_eq!(references(&plan), ["r1", "r3"]);
    assert!(plan.sessions[0].scored_before);
    assert!(!plan.sessions[1].scored_before);
}

#[test]
fn sessions_scored_again_are_grouped_and_marked_scored_before() {
    let again = rescored(vec![
        identity("b2", Some("r2"), 1),
        identity("b1", Some("r1"), 3),
        identity("b1x", Some("r1"), 2),
    ]);
    let found: Vec<(&str, u64, bool)> = again
        .iter()
        .map(|s| (s.reference.as_str(), s.events, s.scored_before))
        .collect();
    assert_eq!(found, [("r1", 5, true), ("r2", 1, true)]);
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

fn file(path: &str, received: Option<(i64, i64)>) -> EventsFile {
    EventsFile {
        path: path.to_owned(),
        received,
    }
}

fn received(reference: &str, range: Option<(i64, i64)>) -> PlannedSession {
    PlannedSession {
        received: range,
        ..planned(reference, 1)
    }
}

#[test]
fn a_pass_reads_only_the_files_received_while_its_sessions_were() {
    let files = [
        file("old", Some((0, 99))),
        file("edge", Some((100, 150))),
        file("between", Some((201, 299))),
        file("late", Some((300, 400))),
        file("unknown", None),
        file("after", Some((500, 600))),
    ];
    let a = received("a", Some((150, 200)));
    let b = received("b", Some((350, 360)));
    assert_eq!(
        pass_files(&files, &[&a, &b]),
        ["edge", "late", "unknown"],
        "ranges meet at their ends; a file without a range is read"
    );
    let c = received("c", None);
    assert_eq!(
        pass_files(&files, &[&a, &c]).len(),
        files.len(),
        "a session without a range reads every file"
    );
}

#[test]
fn pruning_files_by_merged_ranges_matches_checking_every_range() {
    // Overlapping, nested and disjoint session ranges against files of every shape.
    let mut rng = crate::synthetic::Rng::new(11);
    for _ in 0..200 {
        let sessions: Vec<PlannedSession> = (0..rng.next_u64() % 6 + 1)
            .map(|i| {
                let first = (rng.next_u64() % 1000) as i64;
                let last = first + (rng.next_u64() % 200) as i64;
                received(&format!("s{i}"), Some((first, last)))
            })
            .collect();
        let files: Vec<EventsFile> = (0..20)
            .map(|i| {
                let low = (rng.next_u64() % 1200) as i64;
                let high = low + (rng.next_u64() % 100) as i64;
                file(&format!("f{i}"), Some((low, high)))
            })
            .collect();
        let pass: Vec<&PlannedSession> = sessions.iter().collect();
        let expected: Vec<String> = files
            .iter()
            .filter(|f| {
                let (low, high) = f.received.expect("range");
                sessions.iter().any(|s| {
                    let (first, last) = s.received.expect("range");
                    low <= last && high >= first
                })
            })
            .map(|f| f.path.clone())
            .collect();
        assert_eq!(pass_files(&files, &pass), expected);
    }
}

use super::*;
use crate::features::Features;
use crate::synthetic::{Rng, cohort_farm, cohort_people};

#[test]
fn a_farm_among_people_is_found_and_the_people_are_not() {
    let model = Model::default_model().expect("model");
    let mut rng = Rng::new(7);
    let mut all = cohort_people(&model, 600, &mut rng);
    // Repeat visits: the first 30 people come back, a little different.
    let repeats: Vec<Features> = all[..30]
        .iter()
        .map(|f| {
            let mut values = f.values();
            for v in values.iter_mut().filter(|v| !v.is_nan()) {
                *v *= 1.0 + 0.02 * rng.normal();
            }
            Features::from_values(&values).expect("values")
        })
        .collect();
    all.extend(repeats);
    let people_count = all.len();
    all.extend(cohort_farm(&model, 25, 0.01, &mut rng));
    let refs: Vec<&Features> = all.iter().collect();
    let standings = standings(&model, &refs);
    let clustered = |range: std::ops::Range<usize>| {
        standings[range]
            .iter()
            .filter(|s| s.expect("placed").clustered())
            .count()
    };
    let people_flagged = clustered(0..people_count);
    assert!(
        people_flagged * 100 <= people_count,
        "{people_flagged} of {people_count} people clustered"
    );
    assert_eq!(clustered(people_count..all.len()), 25, "{standings:?}");
    let farm_alike: Vec<u32> = standings[people_count..]
        .iter()
        .map(|s| s.expect("placed").alike)
        .collect();
    let people_max = standings[..people_count]
        .iter()
        .map(|s| s.expect("placed").alike)
        .max();
    // Measured with these seeds: the farm's sessions have 7-21 alike each, people none.
    assert!(farm_alike.iter().all(|&a| a >= MIN_ALIKE), "{farm_alike:?}");
    assert!(people_max <= Some(2), "{people_max:?}");
}

#[test]
fn sparse_sessions_and_models_without_ranges_place_nobody() {
    let model = Model::default_model().expect("model");
    let mut values = Features::unmeasured().values();
    values[0] = 1.0;
    values[Features::NAMES.len() - 1] = 2.0;
    let sparse = Features::from_values(&values).expect("values");
    assert_eq!(standings(&model, &[&sparse, &sparse]), vec![None, None]);
    let v1 = Model::from_json(include_str!("../../models/telltale-v1.json")).expect("v1");
    let mut rng = Rng::new(1);
    let farm = cohort_farm(&model, 10, 0.0, &mut rng);
    let refs: Vec<&Features> = farm.iter().collect();
    assert!(standings(&v1, &refs).iter().all(Option::is_none));
}

#[test]
fn a_cluster_lowers_a_score_with_a_reason_and_a_small_one_only_to_review() {
    let model = Model::default_model().expect("model");
    let human = Score {
        human_score_percent: 95.0,
        band: model.band(95.0),
        reasons: Vec::new(),
    };
    let small = Standing {
        modality: 0,
        alike: 8,
        expected: 0.01,
        expected_reference: 0.01,
        alike_people: 0,
        expected_people: f64::INFINITY,
    };
    let adjusted = adjust(&model, human.clone(), Some(small));
    assert_eq!(adjusted.band, "review");
    assert!((adjusted.human_score_percent - model.bands.review_from).abs() < 1e-9);
    assert_eq!(
        adjusted.reasons[0].describe(),
        "9 sessions in this survey move alike (pointing)"
    );
    // Large: below review on its own.
    let large = Standing {
        modality: 1,
        alike: 40,
        expected: 0.5,
        expected_reference: 0.5,
        alike_people: 0,
        expected_people: f64::INFINITY,
    };
    let adjusted = adjust(&model, human.clone(), Some(large));
    assert_eq!(adjusted.band, "automation-like", "{adjusted:?}");
    // The figure scorer/quality/test_quality.py pins for model.py's replica.
    assert_eq!(adjusted.human_score_percent, 25.82);
    // Not a cluster: too few alike, or no more than chance; nothing changes.
    for standing in [
        Standing {
            modality: 0,
            alike: 3,
            expected: 0.0,
            expected_reference: 0.0,
            alike_people: 0,
            expected_people: f64::INFINITY,
        },
        Standing {
            modality: 0,
            alike: 50,
            expected: 10.0,
            expected_reference: 10.0,
            alike_people: 0,
            expected_people: f64::INFINITY,
        },
    ] {
        assert_eq!(adjust(&model, human.clone(), Some(standing)), human);
    }
    assert_eq!(adjust(&model, human.clone(), None), human);
}

/// A farm whose pointing comes from one generator and whose keys each come from another person
/// (its typing spread as people's is) is found in the pointing modality, and named so.
#[test]
fn a_farm_alike_in_its_pointing_and_not_its_typing_is_found_by_its_pointing() {
    let model = Model::default_model().expect("model");
    let mut rng = Rng::new(11);
    let mut all = cohort_people(&model, 300, &mut rng);
    let people_count = all.len();
    let donors = cohort_people(&model, 25, &mut rng);
    let farm = cohort_farm(&model, 25, 0.01, &mut rng);
    let typing = &COHORT_FEATURES[MODALITIES[1].features.clone()];
    for (mut session, donor) in farm.into_iter().zip(donors) {
        for name in typing {
            session.set(name, donor.get(name).expect("a feature"));
        }
        all.push(session);
    }
    let refs: Vec<&Features> = all.iter().collect();
    let standings = standings(&model, &refs);
    let farm_found: Vec<&Standing> = standings[people_count..]
        .iter()
        .flatten()
        .filter(|s| s.clustered())
        .collect();
    // At least 90 % (issue 54's bar for a farm): a session whose noise puts one of its seven
    // pointing features 3 points from most of the others has fewer than 5 alike (24 of 25 here).
    assert!(
        farm_found.len() >= 23,
        "{} of 25: {standings:?}",
        farm_found.len()
    );
    assert!(
        farm_found
            .iter()
            .all(|s| MODALITIES[s.modality].name == "pointing")
    );
    let people_flagged = standings[..people_count]
        .iter()
        .flatten()
        .filter(|s| s.clustered())
        .count();
    assert!(
        people_flagged * 100 <= people_count,
        "{people_flagged} people clustered"
    );
}

/// A survey that is 80 % one farm: the farm sets the survey's own spread, so against it the
/// farm looks like chance; against the people's spread it is found.
#[test]
fn a_farm_that_is_most_of_the_survey_is_found_against_the_peoples_spread() {
    let model = Model::default_model().expect("model");
    let mut rng = Rng::new(5);
    let mut all = cohort_people(&model, 30, &mut rng);
    let people_count = all.len();
    all.extend(cohort_farm(&model, 120, 0.01, &mut rng));
    let refs: Vec<&Features> = all.iter().collect();
    let standings = standings(&model, &refs);
    let farm: Vec<Standing> = standings[people_count..]
        .iter()
        .flatten()
        .copied()
        .collect();
    assert_eq!(farm.len(), 120);
    assert!(
        farm.iter()
            .all(|s| f64::from(s.alike) < SURPRISE * s.expected),
        "the survey's own spread hides the farm: {farm:?}"
    );
    assert!(farm.iter().all(Standing::clustered), "{farm:?}");
    let people_flagged = standings[..people_count]
        .iter()
        .flatten()
        .filter(|s| s.clustered())
        .count();
    assert_eq!(people_flagged, 0);
}

/// The people test (a model with reference people): a farm tight on five of its seven pointing
/// features and spread as people are on the other two is missed by "alike on every feature" and
/// found against the people; the people of the survey are not.
#[test]
fn the_people_test_finds_a_farm_spread_on_two_axes() {
    let mut model = Model::default_model().expect("model");
    let mut rng = Rng::new(23);
    let names: Vec<String> = COHORT_FEATURES.iter().map(|s| (*s).to_owned()).collect();
    let reference = cohort_people(&model, 200, &mut rng)
        .iter()
        .map(|person| {
            COHORT_FEATURES
                .iter()
                .map(|name| person.get(name).filter(|v| v.is_finite()))
                .collect()
        })
        .collect();
    let mut all = cohort_people(&model, 150, &mut rng);
    let people_count = all.len();
    let donors = cohort_people(&model, 20, &mut rng);
    // Two pointing features, and the typing (each session another typist's), as people's.
    let pointing = &COHORT_FEATURES[MODALITIES[0].features.clone()];
    let typing = &COHORT_FEATURES[MODALITIES[1].features.clone()];
    for (mut session, donor) in cohort_farm(&model, 20, 0.02, &mut rng)
        .into_iter()
        .zip(donors)
    {
        for name in pointing[1..3].iter().chain(typing) {
            session.set(name, donor.get(name).expect("a feature"));
        }
        all.push(session);
    }
    let refs: Vec<&Features> = all.iter().collect();
    let without = standings(&model, &refs);
    model.cohort_reference = Some(crate::model::CohortReference {
        features: names,
        sessions: reference,
    });
    let with = standings(&model, &refs);
    let named = |standings: &[Option<Standing>], range: std::ops::Range<usize>| {
        standings[range]
            .iter()
            .flatten()
            .filter(|s| s.clustered())
            .count()
    };
    let missed = named(&without, people_count..all.len());
    assert!(missed <= 10, "{missed} of 20 named without the people");
    let found = named(&with, people_count..all.len());
    assert!(found >= 18, "{found} of 20: {:?}", &with[people_count..]);
    // Measured with these seeds: 3 of the 150 (two alike with the farm's members in pointing,
    // one with 5 people in typing where 0.85 were expected). Generated people crowd corners of
    // the percentile space (docs/scoring.md); the corpus's TRAIN people are the real measure.
    let people_flagged = named(&with, 0..people_count);
    assert!(
        people_flagged <= 3,
        "{people_flagged} people clustered: {:?}",
        with[..people_count]
            .iter()
            .flatten()
            .filter(|s| s.clustered())
            .collect::<Vec<_>>()
    );
    // A named farm session's reason counts the people test's cluster.
    let standing = with[people_count..]
        .iter()
        .flatten()
        .find(|s| s.clustered_by_people())
        .expect("one");
    assert!(standing.cluster_alike() >= standing.alike);
}

#[test]
fn a_cluster_only_the_people_test_found_stops_at_review_however_large() {
    let model = Model::default_model().expect("model");
    let human = Score {
        human_score_percent: 95.0,
        band: model.band(95.0),
        reasons: Vec::new(),
    };
    let by_people = Standing {
        modality: 0,
        alike: 0,
        expected: 1.0,
        expected_reference: 1.0,
        alike_people: 42,
        expected_people: 0.9,
    };
    assert!(by_people.clustered() && by_people.cluster_alike() == 42);
    let adjusted = adjust(&model, human.clone(), Some(by_people));
    assert_eq!(adjusted.band, "review");
    assert_eq!(
        adjusted.reasons[0].describe(),
        "43 sessions in this survey move alike (pointing)"
    );
    // Below review already: it stays where the other evidence put it, now with the reason.
    let low = Score {
        human_score_percent: 20.0,
        band: model.band(20.0),
        reasons: Vec::new(),
    };
    let adjusted = adjust(&model, low, Some(by_people));
    assert_eq!(adjusted.human_score_percent, 20.0);
    assert_eq!(adjusted.reasons.len(), 1);
}

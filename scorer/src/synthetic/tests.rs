use super::*;
use crate::features;
use crate::model::{BAND_AUTOMATION, BAND_HUMAN, Model};

fn to_trace(events: &[String]) -> SessionTrace {
    trace(events).expect("generated events parse")
}

fn score(behaviour: Behaviour, seed: u64) -> crate::model::Score {
    let events = session(behaviour, "s", "r", 1_700_000_000_000, 4, seed);
    let trace = to_trace(&events);
    let features = features::compute(&trace);
    Model::from_json(crate::model::HAND_SET_MODEL_JSON)
        .expect("model")
        .score(&features)
}

#[test]
fn synthetic_people_score_human_like() {
    for seed in 0..20 {
        let score = score(Behaviour::Human, seed);
        assert_eq!(score.band, BAND_HUMAN, "seed {seed}: {score:?}");
    }
}

#[test]
fn naive_and_stealthed_automation_score_automation_like() {
    for seed in 0..20 {
        for behaviour in [Behaviour::NaiveBot, Behaviour::StealthBot] {
            let score = score(behaviour, seed);
            assert_eq!(
                score.band, BAND_AUTOMATION,
                "{behaviour:?} seed {seed}: {score:?}"
            );
        }
    }
}

fn human_trace(seed: u64) -> SessionTrace {
    to_trace(&session(
        Behaviour::Human,
        "s",
        "r",
        1_700_000_000_000,
        4,
        seed,
    ))
}

fn band_of(trace: &SessionTrace) -> &'static str {
    Model::from_json(crate::model::HAND_SET_MODEL_JSON)
        .expect("model")
        .score(&features::compute(trace))
        .band
}

/// Each obvious tell alone, added to an otherwise human-like session, lands it in
/// `automation-like`.
#[test]
fn each_obvious_tell_alone_is_enough() {
    for seed in 0..10 {
        let human = human_trace(seed);
        assert_eq!(band_of(&human), BAND_HUMAN, "seed {seed}");

        let mut webdriver = human.clone();
        if let Some(environment) = &mut webdriver.environment {
            environment.webdriver = Some(true);
        }
        assert_eq!(
            band_of(&webdriver),
            BAND_AUTOMATION,
            "webdriver, seed {seed}"
        );

        let mut untrusted = human.clone();
        for event in &mut untrusted.events {
            if event.trusted.is_some() {
                event.trusted = Some(false);
            }
        }
        assert_eq!(
            band_of(&untrusted),
            BAND_AUTOMATION,
            "untrusted, seed {seed}"
        );

        // Clicks with no press and no pointer movement in the second before them.
        let mut scripted = human.clone();
        let clicks: Vec<i64> = scripted
            .events
            .iter()
            .filter(|e| e.kind == Kind::Click)
            .map(|e| e.t)
            .collect();
        scripted.events.retain(|e| match e.kind {
            Kind::PointerDown | Kind::PointerUp => false,
            Kind::PointerMove => !clicks.iter().any(|&c| c >= e.t && c - e.t <= 1000),
            _ => true,
        });
        assert_eq!(
            band_of(&scripted),
            BAND_AUTOMATION,
            "scripted clicks, seed {seed}"
        );

        // Keys at a metronome's pace, released at once.
        let mut metronome = human.clone();
        let start = 1_700_000_000_000 + 600_000;
        let mut presses = 0;
        for event in &mut metronome.events {
            match event.kind {
                Kind::KeyDown => {
                    event.t = start + presses * 50;
                    presses += 1;
                }
                Kind::KeyUp => event.t = start + (presses - 1).max(0) * 50,
                Kind::Input => event.t = start + (presses - 1).max(0) * 50 + 1,
                _ => {}
            }
        }
        metronome.finish();
        assert_eq!(
            band_of(&metronome),
            BAND_AUTOMATION,
            "metronome keys, seed {seed}"
        );
    }
}

#[test]
fn reasons_name_the_tells() {
    let contributions = |score: &crate::model::Score| -> Vec<crate::model::Contribution> {
        score
            .reasons
            .iter()
            .filter_map(crate::model::Reason::contribution)
            .cloned()
            .collect()
    };
    let naive = contributions(&score(Behaviour::NaiveBot, 1));
    let named: Vec<&str> = naive.iter().map(|r| r.feature).collect();
    assert!(named.contains(&"webdriver"), "{named:?}");
    assert!(naive.iter().all(|r| r.effect < 0.0));
    // A human-like session's reasons are what made it human-like.
    let person = score(Behaviour::Human, 1);
    assert_eq!(person.band, BAND_HUMAN);
    assert!(
        contributions(&person).iter().all(|r| r.effect > 0.0),
        "{person:?}"
    );
}

#[test]
fn sessions_are_reproducible_from_their_seed() {
    let a = session(Behaviour::Human, "s", "r", 0, 2, 7);
    let b = session(Behaviour::Human, "s", "r", 0, 2, 7);
    let c = session(Behaviour::Human, "s", "r", 0, 2, 8);
    assert_eq!(a, b);
    assert_ne!(a, c);
}

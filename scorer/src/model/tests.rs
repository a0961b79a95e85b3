use super::*;

#[test]
fn the_built_in_model_loads_and_uses_the_documented_bands() {
    let model = Model::default_model().expect("built-in model");
    assert_eq!(model.version, "telltale-v4");
    assert_eq!(model.band(29.99), BAND_AUTOMATION);
    assert_eq!(model.band(30.0), BAND_REVIEW);
    assert_eq!(model.band(69.99), BAND_REVIEW);
    assert_eq!(model.band(70.0), BAND_HUMAN);
    assert_eq!(
        (model.bands.review_from, model.bands.human_from),
        (30.0, 70.0),
        "training never moves the bands"
    );
}

#[test]
fn scorecard_bins_are_half_open_so_each_value_falls_in_exactly_one() {
    let bins = [
        Transform::Bin {
            low: None,
            high: Some(0.5),
        },
        Transform::Bin {
            low: Some(0.5),
            high: Some(1.25),
        },
        Transform::Bin {
            low: Some(1.25),
            high: None,
        },
    ];
    for value in [-1e300, 0.0, 0.4999, 0.5, 1.0, 1.25, 7.0, 1e300] {
        let hits: f64 = bins.iter().map(|bin| bin.apply(value)).sum();
        assert_eq!(hits, 1.0, "{value}");
    }
    let parsed: Transform =
        serde_json::from_str(r#"{"kind":"bin","low":0.5}"#).expect("a bin without high");
    assert_eq!(parsed.apply(0.5), 1.0);
    assert_eq!(parsed.apply(0.49), 0.0);
}

#[test]
fn under_the_trained_model_too_little_behaviour_is_a_review_that_says_so() {
    let model = Model::default_model().expect("model");
    assert!(!model.trees.is_empty());
    assert!(
        !model.evidence.is_empty(),
        "the built-in model gates on evidence"
    );
    let score = model.score(&Features::unmeasured());
    let middle = (model.bands.review_from + model.bands.human_from) / 2.0;
    assert!(score.human_score_percent <= middle, "{score:?}");
    assert_eq!(score.band, BAND_REVIEW, "no evidence is not a verdict");
    let first = score.reasons.first().expect("a reason").describe();
    assert!(first.starts_with("too little behaviour: 0 "), "{first}");
    // Key timing alone, however human, never makes a session human-like.
    let mut features = Features::unmeasured();
    features.key_flight_mean_ms = 180.0;
    features.key_hold_mean_ms = 95.0;
    features.key_presses = 400.0;
    assert_ne!(model.score(&features).band, BAND_HUMAN);
}

#[test]
fn no_evidence_scores_the_middle_of_review_under_the_hand_set_model() {
    let model = Model::from_json(HAND_SET_MODEL_JSON).expect("model");
    let score = model.score(&Features::unmeasured());
    assert_eq!(score.human_score_percent, 50.0);
    assert_eq!(score.band, BAND_REVIEW);
    assert!(score.reasons.is_empty());
}

#[test]
fn contributions_add_up_and_point_the_bands_way() {
    let model = Model::from_json(
        r#"{"version":"t","description":"","bias":0.5,
            "bands":{"review_from":30,"human_from":70},
            "terms":[
              {"feature":"webdriver","weight":-4,"transform":{"kind":"indicator"}},
              {"feature":"pauses","weight":1,"transform":{"kind":"above","from":0,"scale":2,"max":1}}
            ]}"#,
    )
    .expect("model");
    let mut features = Features::unmeasured();
    features.webdriver = 1.0;
    features.pauses = 1.0;
    let score = model.score(&features);
    let z: f64 = 0.5 - 4.0 + 0.5;
    let expected = (100.0 / (1.0 + (-z).exp()) * 100.0).round() / 100.0;
    assert_eq!(score.human_score_percent, expected);
    // Automation-like: the reasons are what counted against it, never what counted for it.
    assert_eq!(score.band, BAND_AUTOMATION);
    let described: Vec<String> = score.reasons.iter().map(Reason::describe).collect();
    assert_eq!(described, ["webdriver=1 (-4.00)"]);
    // Human-like: what made it so, largest first.
    features.webdriver = 0.0;
    features.pauses = 2.0;
    let score = model.score(&features);
    assert_eq!(score.band, BAND_HUMAN, "{score:?}");
    let described: Vec<String> = score.reasons.iter().map(Reason::describe).collect();
    assert_eq!(described, ["pauses=2 (+1.00)"]);
    // Review: the largest either way.
    let model = Model::from_json(
        r#"{"version":"t","description":"","bias":0,
            "bands":{"review_from":30,"human_from":70},
            "terms":[
              {"feature":"webdriver","weight":-0.5,"transform":{"kind":"indicator"}},
              {"feature":"pauses","weight":0.25,"transform":{"kind":"indicator"}}
            ]}"#,
    )
    .expect("model");
    features.webdriver = 1.0;
    features.pauses = 1.0;
    let score = model.score(&features);
    assert_eq!(score.band, BAND_REVIEW);
    let described: Vec<String> = score.reasons.iter().map(Reason::describe).collect();
    assert_eq!(described, ["webdriver=1 (-0.50)", "pauses=1 (+0.25)"]);
}

/// A model of one term and one tree: `pauses <= 2` (unmeasured goes right), then
/// `webdriver <= 0.5` on the left.
const TREE_MODEL: &str = r#"{"version":"t","description":"","bias":0.25,
    "bands":{"review_from":30,"human_from":70},
    "terms":[{"feature":"key_hold_cv","weight":-1,"transform":{"kind":"below","from":0.1,"scale":0.05,"max":2}}],
    "trees":[{"nodes":[
      {"feature":"pauses","threshold":2,"missing":"right","left":1,"right":2,"value":0.5},
      {"feature":"webdriver","threshold":0.5,"missing":"left","left":3,"right":4,"value":-0.5},
      {"leaf":1.5},
      {"leaf":0.5},
      {"leaf":-3}
    ]}]}"#;

fn percent(z: f64) -> f64 {
    (100.0 / (1.0 + (-z).exp()) * 100.0).round() / 100.0
}

#[test]
fn trees_add_their_leaf_and_charge_each_split_to_its_feature() {
    let model = Model::from_json(TREE_MODEL).expect("model");
    let mut features = Features::unmeasured();
    features.pauses = 1.0;
    features.webdriver = 1.0;
    features.key_hold_cv = 0.0;
    let score = model.score(&features);
    // bias + term (-1 * 2) + leaf -3.
    assert_eq!(score.human_score_percent, percent(0.25 - 2.0 - 3.0));
    let effect = |name: &str| {
        score
            .reasons
            .iter()
            .filter_map(Reason::contribution)
            .find(|r| r.feature == name)
            .map(|r| r.effect)
    };
    // Root 0.5 -> split node -0.5 (pauses: -1) -> leaf -3 (webdriver: -2.5).
    assert_eq!(effect("webdriver"), Some(-2.5));
    assert_eq!(effect("key_hold_cv"), Some(-2.0));
    assert_eq!(effect("pauses"), Some(-1.0));
    assert_eq!(score.reasons[0].describe(), "webdriver=1 (-2.50)");
    let total: f64 = score
        .reasons
        .iter()
        .filter_map(Reason::contribution)
        .map(|r| r.effect)
        .sum();
    assert_eq!(percent(0.25 + 0.5 + total), score.human_score_percent);

    // Unmeasured values follow their split's missing side.
    features.pauses = f64::NAN;
    features.key_hold_cv = f64::NAN;
    let score = model.score(&features);
    assert_eq!(score.human_score_percent, percent(0.25 + 1.5));
    assert_eq!(score.reasons[0].describe(), "pauses=unmeasured (+1.00)");
    // With none of the trees' features measured, the trees say nothing.
    let score = model.score(&Features::unmeasured());
    assert_eq!(score.human_score_percent, percent(0.25));
    assert!(score.reasons.is_empty());
    let mut left = Features::unmeasured();
    left.pauses = 2.0; // the threshold itself goes left; unmeasured webdriver goes left too
    assert_eq!(model.score(&left).human_score_percent, percent(0.75));
}

#[test]
fn a_split_may_read_a_deviation_charged_to_its_feature() {
    // pauses deviates from 10 by |pauses - 10| / 4; at most 1 goes left (+1), more right (-2).
    let model = Model::from_json(
        r#"{"version":"t","description":"","bias":0,
        "bands":{"review_from":30,"human_from":70},"terms":[],
        "deviations":[{"feature":"pauses","centre":10,"scale":4}],
        "trees":[{"nodes":[
          {"feature":"pauses","deviation":true,"threshold":1,"missing":"left","left":1,"right":2,"value":0},
          {"leaf":1},
          {"leaf":-2}
        ]}]}"#,
    )
    .expect("model");
    let with = |pauses: f64| {
        let mut features = Features::unmeasured();
        features.pauses = pauses;
        model.score(&features)
    };
    assert_eq!(with(13.0).human_score_percent, percent(1.0));
    assert_eq!(with(6.0).human_score_percent, percent(1.0));
    let far = with(30.0);
    assert_eq!(far.human_score_percent, percent(-2.0));
    assert_eq!(far.reasons[0].describe(), "pauses=30 (-2.00)");
    assert_eq!(with(-10.0).human_score_percent, percent(-2.0));

    // A deviation the table lacks, or one without a positive scale, is refused.
    for table in [r#"[]"#, r#"[{"feature":"pauses","centre":10,"scale":0}]"#] {
        let json = format!(
            r#"{{"version":"t","description":"","bias":0,
            "bands":{{"review_from":30,"human_from":70}},"terms":[],"deviations":{table},
            "trees":[{{"nodes":[
              {{"feature":"pauses","deviation":true,"threshold":1,"missing":"left","left":1,"right":2,"value":0}},
              {{"leaf":1}},{{"leaf":-2}}]}}]}}"#
        );
        assert!(matches!(
            Model::from_json(&json),
            Err(ModelError::Deviation(_))
        ));
    }
}

/// The laid-out walk adds what a walk over the nodes adds, bit for bit, on the built-in
/// model's 300 trees and random values (a fifth unmeasured, some exactly at a threshold).
#[test]
fn the_laid_out_walk_adds_what_a_walk_over_the_nodes_adds() {
    let model = Model::default_model().expect("model");
    assert!(model.trees.len() >= 100, "the built-in model has trees");
    let thresholds: Vec<f64> = model
        .trees
        .iter()
        .flat_map(|tree| &tree.nodes)
        .filter_map(|node| match node {
            Node::Split { threshold, .. } => Some(*threshold),
            Node::Leaf { .. } => None,
        })
        .collect();
    let mut rng = crate::synthetic::Rng::new(3);
    for _ in 0..3000 {
        let values: Vec<f64> = Features::NAMES
            .iter()
            .map(|_| match rng.next_u64() % 10 {
                0 | 1 => f64::NAN,
                2 => thresholds[rng.next_u64() as usize % thresholds.len()],
                _ => rng.lognormal(1.0, 2.0) - 0.5,
            })
            .collect();
        let split_values = model.split_values(&values);
        let (mut z, mut effects) = (0.125, vec![0.0; values.len()]);
        model.resolved.layout.walk(
            &split_values,
            &vec![true; model.evidence.len() + 1],
            &mut z,
            &mut effects,
        );

        let (mut expected_z, mut expected) = (0.125, vec![0.0; values.len()]);
        for tree in &model.trees {
            let mut node = 0;
            expected_z += tree.nodes[0].value();
            while let Node::Split {
                feature,
                threshold,
                missing,
                left,
                right,
                deviation,
                ..
            } = &tree.nodes[node]
            {
                let own = Features::NAMES
                    .iter()
                    .position(|name| name == feature)
                    .expect("known feature");
                let read = if *deviation {
                    let position = model
                        .deviations
                        .iter()
                        .position(|d| d.feature == *feature)
                        .expect("deviation");
                    Features::NAMES.len() + position
                } else {
                    own
                };
                let value = split_values[read];
                let go_left = if value.is_nan() {
                    *missing == Side::Left
                } else {
                    value <= *threshold
                };
                let next = if go_left { *left } else { *right };
                let effect = tree.nodes[next].value() - tree.nodes[node].value();
                expected_z += effect;
                expected[own] += effect;
                node = next;
            }
        }
        assert_eq!(z.to_bits(), expected_z.to_bits(), "{values:?}");
        assert_eq!(effects, expected, "{values:?}");
    }
}

#[test]
fn malformed_trees_are_refused() {
    let with_nodes = |nodes: &str| {
        format!(
            r#"{{"version":"t","description":"","bias":0,
            "bands":{{"review_from":30,"human_from":70}},"terms":[],
            "trees":[{{"nodes":[{nodes}]}}]}}"#
        )
    };
    let split = |left: usize, right: usize| {
        format!(
            r#"{{"feature":"pauses","threshold":1,"missing":"left","left":{left},"right":{right},"value":0}}"#
        )
    };
    for nodes in [
        String::new(),
        format!(r#"{},{{"leaf":1}}"#, split(1, 2)),
        format!(r#"{},{{"leaf":1}},{{"leaf":1}}"#, split(0, 2)),
        format!(
            r#"{},{},{{"leaf":1}},{{"leaf":1}}"#,
            split(1, 1),
            split(2, 3)
        ),
    ] {
        assert!(
            matches!(
                Model::from_json(&with_nodes(&nodes)),
                Err(ModelError::Tree(0, _))
            ),
            "{nodes}"
        );
    }
    let unknown = with_nodes(
        r#"{"feature":"nope","threshold":1,"missing":"left","left":1,"right":2,"value":0},{"leaf":1},{"leaf":1}"#,
    );
    assert!(matches!(
        Model::from_json(&unknown),
        Err(ModelError::UnknownFeature(_))
    ));
    assert!(
        Model::from_json(&with_nodes(&format!(
            r#"{},{{"leaf":1}},{{"leaf":2}}"#,
            split(1, 2)
        )))
        .is_ok()
    );
}

#[test]
fn bad_model_files_are_refused() {
    assert!(matches!(Model::from_json("{}"), Err(ModelError::Parse(_))));
    let unknown = r#"{"version":"t","description":"","bias":0,
        "bands":{"review_from":30,"human_from":70},
        "terms":[{"feature":"nope","weight":1,"transform":{"kind":"indicator"}}]}"#;
    assert!(matches!(
        Model::from_json(unknown),
        Err(ModelError::UnknownFeature(_))
    ));
    let bands = r#"{"version":"t","description":"","bias":0,
        "bands":{"review_from":80,"human_from":70},"terms":[]}"#;
    assert!(matches!(Model::from_json(bands), Err(ModelError::Bands)));
}

/// A pointer tree (`movement_peak_time <= 0.4`, then `movement_deviation <= 0.1` on the left,
/// unmeasured values averaged by cover) and a keyboard tree, with evidence entries: 4 aimed
/// movements make pointer evidence that may decide, 10 keys keyboard evidence that may not.
const EVIDENCE_MODEL: &str = r#"{"version":"t","description":"","bias":0,
    "bands":{"review_from":30,"human_from":70},
    "terms":[{"feature":"webdriver","weight":-8,"transform":{"kind":"indicator"}}],
    "evidence":[
      {"modality":"pointer","features":["movements"],"minimum":4,"label":"aimed pointer movements","sufficient":true},
      {"modality":"touch","features":["touch_taps","touch_swipes"],"minimum":6,"label":"touch gestures","sufficient":true},
      {"modality":"keyboard","features":["free_keystrokes"],"minimum":10,"label":"keys","sufficient":false}
    ],
    "trees":[
      {"modality":"pointer","nodes":[
        {"feature":"movement_peak_time","threshold":0.4,"missing":"average","left":1,"right":4,"value":1.0,"cover":100},
        {"feature":"movement_deviation","threshold":0.1,"missing":"average","left":2,"right":3,"value":0.5,"cover":75},
        {"leaf":-1.0,"cover":25},
        {"leaf":1.25,"cover":50},
        {"leaf":2.5,"cover":25}
      ]},
      {"modality":"keyboard","nodes":[
        {"feature":"key_flight_cv","threshold":0.1,"missing":"average","left":1,"right":2,"value":0.5,"cover":10},
        {"leaf":-3.0,"cover":5},
        {"leaf":4.0,"cover":5}
      ]}
    ]}"#;

#[test]
fn an_unmeasured_feature_at_an_average_split_moves_the_score_neither_way() {
    let model = Model::from_json(EVIDENCE_MODEL).expect("model");
    let mut features = Features::unmeasured();
    features.movements = 6.0;
    features.movement_peak_time = 0.3;
    features.movement_deviation = 0.05;
    // Measured: root 1.0, then -0.5 (peak time), then -1.5 (deviation): leaf -1.
    assert_eq!(model.score(&features).human_score_percent, percent(-1.0));
    // Deviation unmeasured: the expected value of the left node (0.5), charged to peak time
    // alone; nothing to the unmeasured feature.
    features.movement_deviation = f64::NAN;
    let score = model.score(&features);
    assert_eq!(score.human_score_percent, percent(0.5));
    let described: Vec<String> = score.reasons.iter().map(Reason::describe).collect();
    assert_eq!(described, ["movement_peak_time=0.300 (-0.50)"]);
    // Both unmeasured: the tree's expected value over its training cover, its root's value.
    features.movement_peak_time = f64::NAN;
    let score = model.score(&features);
    assert_eq!(score.human_score_percent, percent(1.0));
    assert!(score.reasons.iter().all(|r| r.contribution().is_none()));
    // Only the deeper feature measured: weighed by the cover that reaches it (75 of 100).
    features.movement_deviation = 0.05;
    let score = model.score(&features);
    assert_eq!(score.human_score_percent, percent(1.0 + 0.75 * -1.5));
    let described: Vec<String> = score.reasons.iter().map(Reason::describe).collect();
    assert_eq!(described, ["movement_deviation=0.050 (-1.12)"]);
}

#[test]
fn a_modalitys_trees_speak_only_with_enough_of_it_and_keys_alone_never_decide() {
    let model = Model::from_json(EVIDENCE_MODEL).expect("model");
    // Two aimed movements and twelve very human keys: too little pointer behaviour for the
    // pointer tree, enough keys for the keyboard's, but keys alone cannot make it human-like.
    let mut features = Features::unmeasured();
    features.movements = 2.0;
    features.movement_peak_time = 0.9;
    features.free_keystrokes = 12.0;
    features.key_flight_cv = 0.5;
    let score = model.score(&features);
    assert_eq!(
        score.human_score_percent, 50.0,
        "held at the middle of review"
    );
    assert_eq!(score.band, BAND_REVIEW);
    assert_eq!(
        score.reasons[0].describe(),
        "too little behaviour: 2 aimed pointer movements, 0 touch gestures, 12 keys"
    );
    assert_eq!(score.reasons[1].describe(), "key_flight_cv=0.500 (+3.50)");
    // Metronome keys still count against: a review that leans to automation stays below 50.
    features.key_flight_cv = 0.0;
    let score = model.score(&features);
    assert_eq!(score.human_score_percent, percent(-3.0));
    assert_eq!(score.band, BAND_AUTOMATION);
    assert_eq!(score.reasons[0].describe(), "key_flight_cv=0 (-3.50)");
    // With four aimed movements the pointer decides: human-like, for what made it so.
    features.movements = 4.0;
    features.key_flight_cv = 0.5;
    let score = model.score(&features);
    assert_eq!(score.human_score_percent, percent(2.5 + 4.0));
    assert_eq!(score.band, BAND_HUMAN);
    let described: Vec<String> = score.reasons.iter().map(Reason::describe).collect();
    assert_eq!(
        described,
        [
            "key_flight_cv=0.500 (+3.50)",
            "movement_peak_time=0.900 (+1.50)"
        ]
    );
    // Nothing at all: the bias alone, in review, the amounts first.
    let score = model.score(&Features::unmeasured());
    assert_eq!(score.human_score_percent, 50.0);
    assert_eq!(
        score.reasons[0].describe(),
        "too little behaviour: 0 aimed pointer movements, 0 touch gestures, 0 keys"
    );
    // A tell is a verdict on its own, whatever the amount of behaviour.
    let mut naive = Features::unmeasured();
    naive.webdriver = 1.0;
    let score = model.score(&naive);
    assert_eq!(score.band, BAND_AUTOMATION);
    assert_eq!(score.reasons[0].describe(), "webdriver=1 (-8.00)");
}

#[test]
fn with_only_the_minimum_evidence_a_session_is_review_whatever_its_trees_say() {
    // telltale-v5's rule: the pointer's trees speak from 4 aimed movements, but a session needs
    // 5 before they may make it human-like (`human_minimum`).
    let model = Model::from_json(&EVIDENCE_MODEL.replace(
        r#""minimum":4,"label":"aimed pointer movements","sufficient":true"#,
        r#""minimum":4,"label":"aimed pointer movements","sufficient":true,"human_minimum":5"#,
    ))
    .expect("model");
    let mut features = Features::unmeasured();
    features.movements = 4.0;
    features.movement_peak_time = 0.9; // the tree's most human leaf: +2.5
    let score = model.score(&features);
    assert_eq!(
        score.human_score_percent, 50.0,
        "held at the middle of review"
    );
    assert_eq!(score.band, BAND_REVIEW);
    assert_eq!(
        score.reasons[0].describe(),
        "too little behaviour: 4 aimed pointer movements, 0 touch gestures, 0 keys"
    );
    // The trees still speak at the minimum: against, a score below the middle stays there.
    features.movement_peak_time = 0.3;
    features.movement_deviation = 0.05;
    assert_eq!(model.score(&features).human_score_percent, percent(-1.0));
    // One more movement, and the same human leaf may decide.
    features.movements = 5.0;
    features.movement_peak_time = 0.9;
    features.movement_deviation = f64::NAN;
    let score = model.score(&features);
    assert_eq!(score.human_score_percent, percent(2.5));
    assert_eq!(score.band, BAND_HUMAN);
    // A human minimum below the minimum is refused.
    let below = EVIDENCE_MODEL.replace(
        r#""minimum":4,"label":"aimed pointer movements","sufficient":true"#,
        r#""minimum":4,"label":"aimed pointer movements","sufficient":true,"human_minimum":3"#,
    );
    assert!(matches!(
        Model::from_json(&below),
        Err(ModelError::Evidence(_, _))
    ));
}

#[test]
fn bad_evidence_and_modalities_are_refused() {
    let with = |evidence: &str, modality: &str| {
        Model::from_json(&format!(
            r#"{{"version":"t","description":"","bias":0,
            "bands":{{"review_from":30,"human_from":70}},"terms":[],"evidence":{evidence},
            "trees":[{{"modality":"{modality}","nodes":[{{"leaf":1}}]}}]}}"#
        ))
    };
    let pointer = r#"{"modality":"pointer","features":["movements"],"minimum":4,"label":"m","sufficient":true}"#;
    assert!(with(&format!("[{pointer}]"), "pointer").is_ok());
    assert!(matches!(
        with(&format!("[{pointer}]"), "gaze"),
        Err(ModelError::Tree(0, _))
    ));
    assert!(matches!(
        with(&format!("[{pointer},{pointer}]"), "pointer"),
        Err(ModelError::Evidence(_, _))
    ));
    let no_features =
        r#"[{"modality":"pointer","features":[],"minimum":4,"label":"m","sufficient":true}]"#;
    assert!(matches!(
        with(no_features, "pointer"),
        Err(ModelError::Evidence(_, _))
    ));
    let negative = r#"[{"modality":"pointer","features":["movements"],"minimum":-1,"label":"m","sufficient":true}]"#;
    assert!(matches!(
        with(negative, "pointer"),
        Err(ModelError::Evidence(_, _))
    ));
    let unknown =
        r#"[{"modality":"pointer","features":["nope"],"minimum":1,"label":"m","sufficient":true}]"#;
    assert!(matches!(
        with(unknown, "pointer"),
        Err(ModelError::UnknownFeature(_))
    ));
}

#[test]
fn a_value_is_placed_among_the_train_humans_by_its_quantiles() {
    let range = HumanRange {
        feature: "key_hold_mean_ms".to_owned(),
        sessions: 40,
        quantiles: vec![50.0, 80.0, 80.0, 100.0, 200.0],
    };
    assert_eq!(range.check(), Ok(()));
    assert_eq!(range.percentile(f64::NAN), None);
    assert_eq!(range.percentile(10.0), Some(0.0));
    assert_eq!(range.percentile(50.0), Some(0.0));
    assert_eq!(range.percentile(65.0), Some(12.5));
    // A value on a run of equal quantiles sits in the run's middle.
    assert_eq!(range.percentile(80.0), Some(37.5));
    assert_eq!(range.percentile(150.0), Some(87.5));
    assert_eq!(range.percentile(1e9), Some(100.0));
}

#[test]
fn bad_human_ranges_are_refused() {
    let with_range = |range: &str| {
        format!(
            r#"{{"version":"t","description":"","bias":0,"bands":{{"review_from":30,"human_from":70}},
            "terms":[],"human_ranges":[{range}]}}"#
        )
    };
    let good = r#"{"feature":"key_hold_mean_ms","sessions":3,"quantiles":[1,2,3]}"#;
    let model = Model::from_json(&with_range(good)).expect("a good range");
    assert_eq!(model.human_percentile("key_hold_mean_ms", 2.5), Some(75.0));
    assert_eq!(model.human_percentile("key_flight_mean_ms", 2.5), None);
    for (range, why) in [
        (
            r#"{"feature":"nope","sessions":3,"quantiles":[1,2]}"#,
            "unknown feature",
        ),
        (
            r#"{"feature":"key_hold_mean_ms","sessions":3,"quantiles":[1]}"#,
            "fewer than two",
        ),
        (
            r#"{"feature":"key_hold_mean_ms","sessions":3,"quantiles":[2,1]}"#,
            "must not decrease",
        ),
        (&format!("{good},{good}"), "named twice"),
    ] {
        let error = Model::from_json(&with_range(range))
            .expect_err(why)
            .to_string();
        assert!(
            error.contains(why) || why == "unknown feature",
            "{why}: {error}"
        );
    }
}

/// From telltale-v4: a deviation split whose threshold is a TRAIN session's own deviation. The
/// session must go left (`<=`), as it did in training: every number of the file has to parse to
/// exactly the f64 the trainer wrote (serde_json's `float_roundtrip`).
#[test]
fn a_model_files_numbers_parse_exactly_so_a_split_at_a_training_value_goes_left() {
    let json = r#"{"version":"t","description":"","bias":0,
        "bands":{"review_from":30,"human_from":70},"terms":[],
        "deviations":[{"feature":"movement_peak_time","centre":0.2692307692307693,"scale":0.12457866710584109}],
        "trees":[{"nodes":[
            {"feature":"movement_peak_time","threshold":1.317260554434603,"missing":"left",
             "left":1,"right":2,"value":0,"deviation":true},
            {"leaf":1},{"leaf":-1}]}]}"#;
    let model = Model::from_json(json).expect("model");
    assert_eq!(model.deviations[0].centre, 0.269_230_769_230_769_3);
    assert_eq!(model.deviations[0].scale, 0.124_578_667_105_841_09);
    let mut features = Features::unmeasured();
    features.movement_peak_time = 0.433_333_333_333_333_35;
    let index = Features::NAMES
        .iter()
        .position(|name| *name == "movement_peak_time")
        .expect("feature");
    assert_eq!(model.contributions(&features)[index], 1.0);
}

#[test]
fn a_model_file_of_a_newer_format_is_refused_before_its_fields_are_read() {
    // A field this release does not know would fail the parse; the format is read first.
    let newer = r#"{"format":3,"version":"t","description":"","bias":0,
        "bands":{"review_from":30,"human_from":70},"terms":[],"a_field_of_format_3":[]}"#;
    match Model::from_json(newer) {
        Err(ModelError::NewerFormat { found, known }) => {
            assert_eq!((found, known), (3, MODEL_FORMAT));
        }
        other => panic!("not refused as a newer format: {other:?}"),
    }
    let message = Model::from_json(newer)
        .err()
        .map(|error| error.to_string())
        .unwrap_or_default();
    assert!(message.contains("newer release"), "{message}");
    // Format 1, stated or not (every file before the field), and 2 read as before.
    for format in ["", r#""format":1,"#, r#""format":2,"#] {
        let current = format!(
            r#"{{{format}"version":"t","description":"","bias":0,
                "bands":{{"review_from":30,"human_from":70}},"terms":[]}}"#
        );
        Model::from_json(&current).expect("a format-1 model");
    }
    assert!(Model::default_model().expect("built-in").format.is_none());
}

#[test]
fn a_cohort_reference_is_checked() {
    let with = |reference: &str| {
        Model::from_json(&format!(
            r#"{{"format":2,"version":"t","description":"","bias":0,
                "bands":{{"review_from":30,"human_from":70}},"terms":[],
                "cohort_reference":{reference}}}"#
        ))
    };
    let model = with(r#"{"features":["key_hold_mean_ms","key_flight_mean_ms"],"sessions":[[90.5,null],[101,180]]}"#)
        .expect("a reference");
    assert_eq!(model.cohort_reference.expect("kept").sessions.len(), 2);
    for (bad, why) in [
        (
            r#"{"features":["no_such_feature"],"sessions":[]}"#,
            "no_such_feature",
        ),
        (
            r#"{"features":["key_hold_mean_ms","key_hold_mean_ms"],"sessions":[]}"#,
            "twice",
        ),
        (
            r#"{"features":["key_hold_mean_ms"],"sessions":[[1,2]]}"#,
            "one value per feature",
        ),
    ] {
        let message = with(bad).err().map(|e| e.to_string()).unwrap_or_default();
        assert!(message.contains(why), "{bad}: {message}");
    }
}

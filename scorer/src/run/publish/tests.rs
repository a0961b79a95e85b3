use super::*;
use crate::features::Features;
use crate::model::{BAND_AUTOMATION, BAND_HUMAN, Score};

const SURVEY: &str = "00112233445566778899aabb";

fn session(reference: &str, percent: f64, band: &'static str) -> ScoredSession {
    ScoredSession {
        reference: reference.to_owned(),
        features: Features::unmeasured(),
        score: Score {
            human_score_percent: percent,
            band,
            reasons: Vec::new(),
        },
        cohort: Vec::new(),
        cluster: None,
    }
}

#[test]
fn a_step_records_each_session_as_scored_by_this_run_and_model() {
    let run = RunId::generate();
    let scored = [
        session("r1", 91.5, BAND_HUMAN),
        session("r2", 4.25, BAND_AUTOMATION),
    ];
    let records = score_records(
        &scored,
        &HashMap::new(),
        &run,
        "telltale-v3",
        1_700_000_000_123,
    );
    assert_eq!(records.len(), 2);
    for (record, session) in records.iter().zip(&scored) {
        assert_eq!(record.reference, session.reference);
        assert_eq!(
            record.human_score_percent,
            session.score.human_score_percent
        );
        assert_eq!(record.score_band, session.score.band);
        assert_eq!(record.scored_at, 1_700_000_000_123);
        assert_eq!(record.model_version, "telltale-v3");
        assert_eq!(record.run_id, run);
    }
    assert!(score_records(&[], &HashMap::new(), &run, "telltale-v3", 0).is_empty());
}

#[test]
fn a_steps_files_are_found_again_under_their_runs_prefix() {
    let run = RunId::generate();
    for kind in [TableKind::Features, TableKind::Scores] {
        let file = step_file(kind, SURVEY, run.as_str(), "a1b2c3", 7, 2_048, 120);
        let ours = tables::results_run_prefix(kind, SURVEY, run.as_str());
        assert!(file.path.starts_with(&ours), "{} under {ours}", file.path);
        assert!(file.path.starts_with(&tables::results_folder(kind, SURVEY)));
        assert_eq!(file.survey_id, SURVEY);
        assert_eq!((file.size, file.rows), (2_048, 120));
        assert_eq!((file.date, file.received), (None, None));
    }
    let other = RunId::generate();
    let theirs = step_file(TableKind::Scores, SURVEY, other.as_str(), "a1b2c3", 7, 1, 1);
    let ours = tables::results_run_prefix(TableKind::Scores, SURVEY, run.as_str());
    assert!(
        !theirs.path.starts_with(&ours),
        "another run's file is not ours"
    );
}

#[test]
fn each_step_and_attempt_publishes_to_a_file_of_its_own() {
    let run = RunId::generate();
    let path = |attempt: &str, sequence: usize| {
        step_file(
            TableKind::Scores,
            SURVEY,
            run.as_str(),
            attempt,
            sequence,
            1,
            1,
        )
        .path
    };
    let paths: HashSet<String> = [
        path("a1b2c3", 1),
        path("a1b2c3", 2),
        path("d4e5f6", 1),
        path("d4e5f6", 2),
    ]
    .into_iter()
    .collect();
    assert_eq!(paths.len(), 4);
    assert_ne!(
        step_file(TableKind::Features, SURVEY, run.as_str(), "a1b2c3", 1, 1, 1).path,
        path("a1b2c3", 1),
        "the two tables' files of a step differ"
    );
}

//! The cohort step of a scoring run through the real binary: a farm that posts one generator's
//! session again and again is named by its cohort, with the built-in model (whose people's
//! ranges place sessions), and the survey's other sessions are not.

use scorer::synthetic::{Behaviour, Style, styled_session};
use serde_json::Value;

use crate::harness::{Survey, TestServer, new_uuid, now_millis, send};
use crate::scoring::{NO_API_LIMIT, post_generated, post_session};

async fn score_of(server: &TestServer, key: &str, survey_id: &str, reference: &str) -> Value {
    let path =
        format!("/integrations/v1/surveys/{survey_id}/sessions/by-reference/{reference}/evidence");
    let reply = send(server.client().get(server.url(&path)).bearer_auth(key)).await;
    assert_eq!(reply.status, 200, "{}", reply.text);
    reply.json()["data"]["score"].clone()
}

#[tokio::test]
async fn a_farm_of_one_session_posted_again_and_again_is_named_by_its_cohort() {
    let server = TestServer::start_with(&["--api-rate-per-minute", NO_API_LIMIT]).await;
    let key = server.key().to_owned();
    let survey = server.provision_ok(&key, "cohort", "Cohort").await;
    let mut others = Vec::new();
    for seed in 0..24 {
        others.push(
            post_session(&server, &survey, Behaviour::Human, seed)
                .await
                .0,
        );
    }
    let mut farm = Vec::new();
    for _ in 0..20 {
        let (reference, _, _) =
            post_generated(&server, &survey, "farm", Behaviour::Human, 1_000).await;
        farm.push(reference);
    }
    let run = server.run_scoring_to_end(&key, &survey.survey_id).await;
    assert_eq!(run["status"], "completed", "{run}");
    assert_eq!(run["scored"], 44, "{run}");

    for reference in &farm {
        let score = score_of(&server, &key, &survey.survey_id, reference).await;
        let reason = score["reasons"][0].as_str().unwrap_or_default();
        assert!(
            reason.starts_with("20 sessions in this survey move alike ("),
            "{score}"
        );
        assert_ne!(score["scoreBand"], "human-like", "{score}");
    }
    for reference in &others {
        let score = score_of(&server, &key, &survey.survey_id, reference).await;
        let reasons = score["reasons"].as_array().expect("reasons");
        assert!(
            reasons
                .iter()
                .all(|r| !r.as_str().unwrap_or("").contains("move alike")),
            "{score}"
        );
    }
    // The count is a feature column of the lake's `features` table as well.
    let csv = server.cli_ok(&[
        "sql",
        "SELECT cohort_alike, count(*) AS n FROM features WHERE cohort_alike >= 5 GROUP BY cohort_alike",
        "--format",
        "csv",
    ]);
    assert_eq!(csv, "cohort_alike,n\n19.0,20\n", "{csv}");
}

/// Questions a session of the tests below answers: enough strokes and keys that a session's
/// medians reflect its style more than its noise.
const QUESTIONS: usize = 15;

/// Posts a `Human` session of `style` (its noise from `seed`) under a new reference.
pub(crate) async fn post_styled(
    server: &TestServer,
    survey: &Survey,
    style: Style,
    seed: u64,
) -> String {
    let reference = new_uuid();
    let identifier = format!("styled-{}", &reference[..8]);
    let events = styled_session(
        Behaviour::Human,
        style,
        &identifier,
        &reference,
        now_millis() - 300_000,
        QUESTIONS,
        seed,
    );
    for chunk in events.chunks(200) {
        let body = format!(r#"{{"events":[{}]}}"#, chunk.join(","));
        server
            .collect_ok(&survey.tracking_key, &identifier, &body, chunk.len())
            .await;
    }
    reference
}

/// How many of 300 synthetic people a farm test lets the cohort move. Not 0: the generator's
/// people are drawn from a few style traits around one stroke model, so they crowd corners of
/// real people's percentile space (every synthetic stroke peaks later than 96 % of the TRAIN
/// people's), and the people's-spread test rightly finds some of them far more alike than
/// people are. The claim "no person moves" is measured on real people: the recorded corpus's
/// TRAIN people scored as one survey with its automation (`python3 lab/corpus.py load`:
/// 0 of 167 moved, docs/scoring.md).
const PEOPLE_MOVED_AT_MOST: usize = 12;

/// Drawn people: each a style of their own.
pub(crate) async fn post_people(server: &TestServer, survey: &Survey, count: u64) -> Vec<String> {
    let mut people = Vec::new();
    for seed in 0..count {
        people.push(post_styled(server, survey, Style::drawn(seed), seed).await);
    }
    people
}

/// The cohort reason of a session's score (`N sessions in this survey move alike (...)`).
async fn cohort_reason(
    server: &TestServer,
    key: &str,
    survey_id: &str,
    reference: &str,
) -> Option<String> {
    let score = score_of(server, key, survey_id, reference).await;
    score["reasons"]
        .as_array()
        .expect("reasons")
        .iter()
        .filter_map(Value::as_str)
        .find(|reason| reason.contains("move alike"))
        .map(str::to_owned)
}

async fn moved(server: &TestServer, key: &str, survey_id: &str, references: &[String]) -> usize {
    let mut moved = 0;
    for reference in references {
        if cohort_reason(server, key, survey_id, reference)
            .await
            .is_some()
        {
            moved += 1;
        }
    }
    moved
}

/// Issue 56: a farm that trickles into a survey five sessions a run is compared with the
/// sessions earlier runs scored (the survey's cohort is kept across runs), named by the last
/// run, and its earlier sessions are scored again as their cluster grows; no person moves.
#[tokio::test]
async fn a_farm_arriving_over_five_runs_is_named_and_its_earlier_sessions_rescored() {
    let server = TestServer::start_with(&["--api-rate-per-minute", NO_API_LIMIT]).await;
    let key = server.key().to_owned();
    let survey = server.provision_ok(&key, "trickle", "Trickle").await;
    let people = post_people(&server, &survey, 300).await;
    let farm_style = Style::generator(1_000_000);
    let mut farm = Vec::new();
    let mut last = Value::Null;
    for round in 0..5u64 {
        for i in 0..5 {
            farm.push(post_styled(&server, &survey, farm_style, 2_000_000 + round * 5 + i).await);
        }
        last = server.run_scoring_to_end(&key, &survey.survey_id).await;
        assert_eq!(last["status"], "completed", "{last}");
    }
    // The last run scored its 5 and scored again the earlier farm sessions alike with them
    // (their cluster grew); the people stay skipped.
    let (scored, skipped) = (
        last["scored"].as_u64().expect("scored"),
        last["skipped"].as_u64().expect("skipped"),
    );
    assert_eq!(
        (last["total"].as_u64(), scored + skipped),
        (Some(325), 325),
        "{last}"
    );
    assert!((6..=25).contains(&scored), "{last}");
    for reference in &farm {
        let reason = cohort_reason(&server, &key, &survey.survey_id, reference).await;
        assert!(reason.is_some(), "farm session {reference} not named");
    }
    let people_moved = moved(&server, &key, &survey.survey_id, &people).await;
    println!("trickle: {scored} scored by the last run, {people_moved} of 300 people moved");
    assert!(
        people_moved <= PEOPLE_MOVED_AT_MOST,
        "{people_moved} people moved; {last}"
    );
}

/// A survey that is mostly one farm sets the survey's own spread; the people's spread (the
/// model's ranges) still names it.
#[tokio::test]
async fn a_survey_that_is_mostly_one_farm_names_it() {
    let server = TestServer::start_with(&["--api-rate-per-minute", NO_API_LIMIT]).await;
    let key = server.key().to_owned();
    let survey = server
        .provision_ok(&key, "mostly-farm", "Mostly farm")
        .await;
    let people = post_people(&server, &survey, 20).await;
    let farm_style = Style::generator(1_000_001);
    let mut farm = Vec::new();
    for seed in 0..80 {
        farm.push(post_styled(&server, &survey, farm_style, 3_000_000 + seed).await);
    }
    let run = server.run_scoring_to_end(&key, &survey.survey_id).await;
    assert_eq!(run["scored"], 100, "{run}");
    assert_eq!(moved(&server, &key, &survey.survey_id, &farm).await, 80);
    assert_eq!(moved(&server, &key, &survey.survey_id, &people).await, 0);
}

/// A farm whose pointing comes from one generator and whose keys come from different typists
/// is alike in its pointing, and named there.
#[tokio::test]
async fn a_farm_alike_in_pointing_with_different_typists_is_named() {
    let server = TestServer::start_with(&["--api-rate-per-minute", NO_API_LIMIT]).await;
    let key = server.key().to_owned();
    let survey = server.provision_ok(&key, "typists", "Typists").await;
    let people = post_people(&server, &survey, 100).await;
    let farm_style = Style::generator(1_000_002);
    let mut farm = Vec::new();
    for seed in 0..20 {
        let typist = Style::drawn(5_000_000 + seed);
        let style = farm_style.typing_as(typist);
        farm.push(post_styled(&server, &survey, style, 4_000_000 + seed).await);
    }
    let run = server.run_scoring_to_end(&key, &survey.survey_id).await;
    assert_eq!(run["scored"], 120, "{run}");
    let mut named = 0;
    for reference in &farm {
        let reason = cohort_reason(&server, &key, &survey.survey_id, reference).await;
        named += usize::from(reason.as_deref().is_some_and(|r| r.ends_with("(pointing)")));
    }
    let people_moved = moved(&server, &key, &survey.survey_id, &people).await;
    println!(
        "typists: {named} of 20 farm sessions named by their pointing, {people_moved} of 100 people moved"
    );
    // At least 90 % (issue 54's bar for a farm; 18 of 20 here); synthetic people concentrate
    // where real people do not (see `PEOPLE_MOVED_AT_MOST`).
    assert!(named >= 18, "{named} of 20 named");
    assert!(
        people_moved <= PEOPLE_MOVED_AT_MOST * 100 / 300,
        "{people_moved}"
    );
}

/// A model with reference people (telltale-v7) makes the cohort's people test: a run then reads
/// its groups' stored places whole (one range over every cell) rather than the cells around
/// each session. A farm trickling in over three runs is named and the runs complete; the
/// stored places are read whole and the earlier farm sessions scored again.
#[tokio::test]
async fn the_people_test_reads_the_survey_whole_across_runs() {
    let model = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/scorer/models/telltale-v7.json"
    );
    let server =
        TestServer::start_with(&["--api-rate-per-minute", NO_API_LIMIT, "--model", model]).await;
    let key = server.key().to_owned();
    let survey = server
        .provision_ok(&key, "people-test", "People test")
        .await;
    let people = post_people(&server, &survey, 60).await;
    let farm_style = Style::generator(1_000_003);
    let mut farm = Vec::new();
    let mut last = Value::Null;
    for round in 0..3u64 {
        for i in 0..5 {
            farm.push(post_styled(&server, &survey, farm_style, 6_000_000 + round * 5 + i).await);
        }
        last = server.run_scoring_to_end(&key, &survey.survey_id).await;
        assert_eq!(last["status"], "completed", "{last}");
    }
    let score = score_of(&server, &key, &survey.survey_id, &farm[0]).await;
    assert_eq!(score["modelVersion"], "telltale-v7", "{score}");
    let (scored, skipped) = (
        last["scored"].as_u64().expect("scored"),
        last["skipped"].as_u64().expect("skipped"),
    );
    assert_eq!(
        (scored + skipped, last["total"].as_u64()),
        (75, Some(75)),
        "{last}"
    );
    // Its 5, the 10 earlier farm sessions, and the stored sessions alike with a farm session in
    // the people test's looser sense (generated people crowd near the generator's style).
    assert!((15..=75).contains(&scored), "{last}");
    for reference in &farm {
        let reason = cohort_reason(&server, &key, &survey.survey_id, reference).await;
        assert!(reason.is_some(), "farm session {reference} not named");
    }
    // The generated "people" are one stroke model's sessions: against real people (the model's
    // reference) they are alike far beyond chance, and the people test says so (50 of 60 named
    // when this was written). That they are not people is the test's premise failing, not the
    // rule; real people are measured on the corpus (docs/evaluation.md).
    let people_moved = moved(&server, &key, &survey.survey_id, &people).await;
    println!(
        "people test: {scored} scored by the last run, {people_moved} of 60 generated people named"
    );
}

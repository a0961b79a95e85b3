//! The cohort step of a scoring run through the real binary: a farm that posts one generator's
//! session again and again is named by its cohort, with the built-in model (whose people's
//! ranges place sessions), and the survey's other sessions are not.

use scorer::synthetic::Behaviour;
use serde_json::Value;

use crate::harness::{TestServer, send};
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

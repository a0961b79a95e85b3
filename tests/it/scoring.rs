//! Scoring runs through the real binary: lifecycle, skip and force, one active run, cancel,
//! resume after SIGKILL, tenancy and validation, and the published tables.

use std::time::{Duration, Instant};

use scorer::synthetic::{Behaviour, session};
use serde_json::{Value, json};

use crate::harness::{
    Reply, Survey, TestServer, assert_error, duckdb_query, is_hex24, new_uuid, now_millis, send,
};

pub(crate) const NO_API_LIMIT: &str = "100000";

/// Posts a synthetic session through the collector in batches of 40 events; returns its
/// reference and how many events were acknowledged.
pub(crate) async fn post_session(
    server: &TestServer,
    survey: &Survey,
    behaviour: Behaviour,
    seed: u64,
) -> (String, usize) {
    let (reference, count, _) = post_session_events(server, survey, behaviour, seed).await;
    (reference, count)
}

/// [`post_session`], also returning the events as sent.
pub(crate) async fn post_session_events(
    server: &TestServer,
    survey: &Survey,
    behaviour: Behaviour,
    seed: u64,
) -> (String, usize, Vec<String>) {
    post_generated(server, survey, &format!("browser-{seed}"), behaviour, seed).await
}

/// Posts the synthetic session of `behaviour` and `seed` under a new reference, in batches of 40
/// events, from a browser session `{prefix}-...`: the same seed posts the same behaviour again.
pub(crate) async fn post_generated(
    server: &TestServer,
    survey: &Survey,
    prefix: &str,
    behaviour: Behaviour,
    seed: u64,
) -> (String, usize, Vec<String>) {
    let reference = new_uuid();
    let identifier = format!("{prefix}-{}", &reference[..8]);
    let events = session(
        behaviour,
        &identifier,
        &reference,
        now_millis() - 120_000,
        3,
        seed,
    );
    for chunk in events.chunks(40) {
        let body = format!(r#"{{"events":[{}]}}"#, chunk.join(","));
        server
            .collect_ok(&survey.tracking_key, &identifier, &body, chunk.len())
            .await;
    }
    (reference, events.len(), events)
}

/// The hand-set model file. Tests that assert the bands of the suite's synthetic sessions
/// (`scorer::synthetic`) score with it: they check how runs work, and its terms are fixed by
/// design. The trained default's quality is measured on real data in docs/evaluation.md.
pub(crate) const HAND_SET_MODEL: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/scorer/models/telltale-v1.json"
);

pub(crate) fn runs_path(survey_id: &str) -> String {
    format!("/integrations/v1/surveys/{survey_id}/scoring-runs")
}

pub(crate) async fn start_run(
    server: &TestServer,
    key: &str,
    survey_id: &str,
    body: Option<&str>,
) -> Reply {
    let mut request = server
        .client()
        .post(server.url(&runs_path(survey_id)))
        .bearer_auth(key);
    if let Some(body) = body {
        request = request
            .header("content-type", "application/json")
            .body(body.to_owned());
    }
    send(request).await
}

pub(crate) async fn start_run_ok(
    server: &TestServer,
    key: &str,
    survey_id: &str,
    body: Option<&str>,
) -> Value {
    let reply = start_run(server, key, survey_id, body).await;
    assert_eq!(reply.status, 202, "start failed: {}", reply.text);
    reply.json()["data"].clone()
}

pub(crate) async fn get_run(
    server: &TestServer,
    key: &str,
    survey_id: &str,
    run_id: &str,
) -> Reply {
    let path = format!("{}/{run_id}", runs_path(survey_id));
    send(server.client().get(server.url(&path)).bearer_auth(key)).await
}

async fn cancel_run(server: &TestServer, key: &str, survey_id: &str, run_id: &str) -> Reply {
    let path = format!("{}/{run_id}/cancel", runs_path(survey_id));
    send(server.client().post(server.url(&path)).bearer_auth(key)).await
}

/// Polls a run until it is no longer `running`.
pub(crate) async fn wait_finished(
    server: &TestServer,
    key: &str,
    survey_id: &str,
    run_id: &str,
) -> Value {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let reply = get_run(server, key, survey_id, run_id).await;
        assert_eq!(reply.status, 200, "{}", reply.text);
        let run = reply.json()["data"].clone();
        if run["status"] != "running" {
            return run;
        }
        assert!(Instant::now() < deadline, "run still running: {run}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Starts a run (`body` as [`start_run_ok`] takes it) and polls it until it is no longer
/// `running`.
pub(crate) async fn run_to_end(
    server: &TestServer,
    key: &str,
    survey_id: &str,
    body: Option<&str>,
) -> Value {
    let run = start_run_ok(server, key, survey_id, body).await;
    let run_id = run["id"].as_str().expect("run id").to_owned();
    wait_finished(server, key, survey_id, &run_id).await
}

/// Polls a run until `scored` reaches `at_least` while it still runs.
pub(crate) async fn wait_scored(
    server: &TestServer,
    key: &str,
    survey_id: &str,
    run_id: &str,
    at_least: u64,
) -> Value {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let run = get_run(server, key, survey_id, run_id).await.json()["data"].clone();
        if run["scored"].as_u64().unwrap_or(0) >= at_least {
            return run;
        }
        assert!(Instant::now() < deadline, "run made no progress: {run}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The fields of a run, exactly: required ones always, optional ones as the state implies.
fn assert_run_shape(run: &Value, optional: &[&str]) {
    let mut expected = vec![
        "createdAt",
        "deferred",
        "failed",
        "failures",
        "force",
        "id",
        "scored",
        "skipped",
        "startedAt",
        "status",
        "surveyId",
        "total",
    ];
    expected.extend_from_slice(optional);
    expected.sort_unstable();
    let mut fields: Vec<&str> = run
        .as_object()
        .expect("run object")
        .keys()
        .map(String::as_str)
        .collect();
    fields.sort_unstable();
    assert_eq!(fields, expected, "{run}");
}

#[tokio::test]
async fn a_run_scores_every_session_and_lookup_reports_the_scores() {
    let mut server = TestServer::start_with(&[
        "--api-rate-per-minute",
        NO_API_LIMIT,
        "--model",
        HAND_SET_MODEL,
    ])
    .await;
    let key = server.key().to_owned();
    let survey = server
        .provision_ok(&key, "scoring-lifecycle", "Lifecycle")
        .await;

    let mut people = Vec::new();
    let mut bots = Vec::new();
    for seed in 0..3 {
        people.push(post_session(&server, &survey, Behaviour::Human, seed).await);
    }
    for seed in 10..12 {
        bots.push(post_session(&server, &survey, Behaviour::NaiveBot, seed).await);
    }
    bots.push(post_session(&server, &survey, Behaviour::StealthBot, 20).await);

    // Started at once after the last 201: the run itself makes those events visible.
    let started = start_run_ok(&server, &key, &survey.survey_id, None).await;
    let run_id = started["id"].as_str().expect("id").to_owned();
    assert!(is_hex24(&run_id));
    assert_eq!(started["surveyId"], survey.survey_id.as_str());
    assert_eq!(started["force"], false);
    assert_eq!(started["status"], "running");
    assert_eq!(started["failures"], json!([]));

    let run = wait_finished(&server, &key, &survey.survey_id, &run_id).await;
    assert_run_shape(&run, &["completedAt", "updatedAt"]);
    assert_eq!(run["status"], "completed", "{run}");
    assert_eq!(
        (
            &run["total"],
            &run["scored"],
            &run["skipped"],
            &run["failed"]
        ),
        (&json!(6), &json!(6), &json!(0), &json!(0)),
        "{run}"
    );

    let references: Vec<String> = people.iter().chain(&bots).map(|(r, _)| r.clone()).collect();
    let rows = server
        .lookup_rows(&key, &survey.survey_id, &references)
        .await;
    for (row, (reference, events)) in rows.iter().zip(people.iter().chain(&bots)) {
        assert_eq!(row["externalReference"], reference.as_str());
        assert_eq!(row["eventCount"], *events as u64);
        assert_eq!(row["modelVersion"], "telltale-v1");
        let percent = row["humanScorePercent"].as_f64().expect("score");
        assert!((0.0..=100.0).contains(&percent), "{row}");
        assert!(row["scoredAt"].is_string(), "{row}");
    }
    for row in &rows[..3] {
        assert_eq!(row["scoreBand"], "human-like", "{row}");
    }
    for row in &rows[3..] {
        assert_eq!(row["scoreBand"], "automation-like", "{row}");
    }

    // force false: everything is skipped; force true: everything is scored again.
    let again = start_run_ok(&server, &key, &survey.survey_id, Some("{}")).await;
    let again = wait_finished(
        &server,
        &key,
        &survey.survey_id,
        again["id"].as_str().expect("id"),
    )
    .await;
    assert_eq!(
        (
            &again["status"],
            &again["total"],
            &again["scored"],
            &again["skipped"]
        ),
        (&json!("completed"), &json!(6), &json!(0), &json!(6)),
        "{again}"
    );
    let forced = start_run_ok(&server, &key, &survey.survey_id, Some(r#"{"force": true}"#)).await;
    assert_eq!(forced["force"], true);
    let forced = wait_finished(
        &server,
        &key,
        &survey.survey_id,
        forced["id"].as_str().expect("id"),
    )
    .await;
    assert_eq!(
        (
            &forced["status"],
            &forced["total"],
            &forced["scored"],
            &forced["skipped"]
        ),
        (&json!("completed"), &json!(6), &json!(6), &json!(0)),
        "{forced}"
    );

    // The published tables, read by an outside reader and by `telltale sql`.
    server.terminate_ok().await;
    let lake = server.lake_dir();
    let scores = duckdb_query(&format!(
        "SELECT count(*) AS n, count(DISTINCT reference) AS refs, count(DISTINCT run_id) AS runs,
                min(len(reasons)) AS min_reasons
         FROM read_parquet('{}/scores/*/*.parquet')",
        lake.display()
    ));
    assert_eq!(scores[0]["n"], 12, "{scores:?}");
    assert_eq!(scores[0]["refs"], 6);
    assert_eq!(scores[0]["runs"], 2);
    assert!(
        scores[0]["min_reasons"].as_u64().unwrap_or(0) >= 1,
        "{scores:?}"
    );
    let features = duckdb_query(&format!(
        "SELECT count(*) AS n, max(webdriver) AS webdriver
         FROM read_parquet('{}/features/*/*.parquet')",
        lake.display()
    ));
    assert_eq!(features[0]["n"], 12, "{features:?}");
    assert_eq!(features[0]["webdriver"], 1.0);

    let csv = server.cli_ok(&[
        "sql",
        "SELECT score_band, count(*) AS n FROM scores GROUP BY score_band ORDER BY score_band",
        "--format",
        "csv",
    ]);
    assert_eq!(
        csv, "score_band,n\nautomation-like,6\nhuman-like,6\n",
        "{csv}"
    );
    let json_rows = server.cli_ok(&[
        "sql",
        "SELECT count(*) AS n FROM events",
        "--format",
        "json",
    ]);
    let total_events: usize = people.iter().chain(&bots).map(|(_, n)| n).sum();
    assert_eq!(
        serde_json::from_str::<Value>(json_rows.trim()).expect("json"),
        json!([{ "n": total_events }])
    );
    // Queries only.
    let refused = server.cli(&[
        "sql",
        "CREATE EXTERNAL TABLE t STORED AS PARQUET LOCATION '/'",
    ]);
    assert!(!refused.status.success());

    // A run from the shell, with the server stopped.
    let cli_run = server.cli_json(&["score", "--survey", &survey.survey_id, "--force", "--json"]);
    assert_eq!(cli_run["status"], "completed", "{cli_run}");
    assert_eq!(cli_run["scored"], 6);
    let skipped = server.cli_json(&["score", "--survey", &survey.survey_id, "--json"]);
    assert_eq!(skipped["skipped"], 6, "{skipped}");
    let unknown = server.cli(&["score", "--survey", "0123456789abcdef01234567"]);
    assert!(!unknown.status.success());
}

#[tokio::test]
async fn run_requests_are_validated_and_scoped_to_the_survey() {
    let server = TestServer::start_with(&["--api-rate-per-minute", NO_API_LIMIT]).await;
    let key = server.key().to_owned();
    let survey = server.provision_ok(&key, "scoring-validation", "V").await;
    let other = server.provision_ok(&key, "scoring-validation-2", "W").await;

    for body in [
        "{",
        "[]",
        r#"{"force": "yes"}"#,
        r#"{"forse": true}"#,
        "true",
    ] {
        let reply = start_run(&server, &key, &survey.survey_id, Some(body)).await;
        assert_error(&reply, 400);
    }

    // An empty survey completes with nothing to do.
    let run = start_run_ok(
        &server,
        &key,
        &survey.survey_id,
        Some(r#"{"force": false}"#),
    )
    .await;
    let run_id = run["id"].as_str().expect("id").to_owned();
    let done = wait_finished(&server, &key, &survey.survey_id, &run_id).await;
    assert_eq!(done["status"], "completed");
    assert_eq!((&done["total"], &done["scored"]), (&json!(0), &json!(0)));
    assert!(done.get("error").is_none() && done.get("canceledAt").is_none());

    // The run is not reachable through another survey, nor with malformed ids.
    assert_error(
        &get_run(&server, &key, &other.survey_id, &run_id).await,
        404,
    );
    assert_error(
        &cancel_run(&server, &key, &other.survey_id, &run_id).await,
        404,
    );
    assert_error(
        &get_run(&server, &key, &survey.survey_id, "0123456789abcdef01234567").await,
        404,
    );
    assert_error(
        &get_run(&server, &key, &survey.survey_id, "not-a-run").await,
        404,
    );
    assert_error(
        &start_run(&server, &key, "0123456789abcdef01234567", None).await,
        404,
    );

    // Another organization's key sees nothing.
    let org = server.create_org("Elsewhere");
    let foreign = server.create_key(&org, "theirs", None);
    assert_error(
        &get_run(&server, &foreign.key, &survey.survey_id, &run_id).await,
        404,
    );
    assert_error(
        &start_run(&server, &foreign.key, &survey.survey_id, None).await,
        404,
    );

    // Scopes: scoring:write to start and cancel, scoring:read to poll.
    let reader = server.create_key(&server.default_org().await, "reader", Some("scoring:read"));
    assert_error(
        &start_run(&server, &reader.key, &survey.survey_id, None).await,
        403,
    );
    assert_error(
        &cancel_run(&server, &reader.key, &survey.survey_id, &run_id).await,
        403,
    );
    assert_eq!(
        get_run(&server, &reader.key, &survey.survey_id, &run_id)
            .await
            .status,
        200
    );
    let writer = server.create_key(&server.default_org().await, "writer", Some("scoring:write"));
    assert_error(
        &get_run(&server, &writer.key, &survey.survey_id, &run_id).await,
        403,
    );

    // Cancelling a finished run returns it unchanged.
    let reply = cancel_run(&server, &key, &survey.survey_id, &run_id).await;
    assert_eq!(reply.status, 202, "{}", reply.text);
    assert_eq!(reply.json()["data"], done);
}

#[tokio::test]
async fn concurrent_starts_share_one_active_run_and_cancel_stops_it() {
    let server = TestServer::start_with(&[
        "--api-rate-per-minute",
        NO_API_LIMIT,
        "--scoring-chunk-sessions",
        "1",
        "--scoring-pause-ms",
        "400",
    ])
    .await;
    let key = server.key().to_owned();
    let survey = server.provision_ok(&key, "scoring-concurrency", "C").await;
    for seed in 0..5 {
        post_session(&server, &survey, Behaviour::Human, seed).await;
    }

    let starts = (0..8).map(|_| start_run(&server, &key, &survey.survey_id, None));
    let replies = futures::future::join_all(starts).await;
    let ids: Vec<String> = replies
        .iter()
        .map(|reply| {
            assert_eq!(reply.status, 202, "{}", reply.text);
            reply.json()["data"]["id"].as_str().expect("id").to_owned()
        })
        .collect();
    assert!(ids.iter().all(|id| id == &ids[0]), "{ids:?}");
    let run_id = ids[0].clone();

    // Counters move while the run works.
    let progressing = wait_scored(&server, &key, &survey.survey_id, &run_id, 1).await;
    assert_eq!(progressing["status"], "running", "{progressing}");
    assert_eq!(progressing["total"], 5);
    assert!(progressing["updatedAt"].is_string());

    let reply = cancel_run(&server, &key, &survey.survey_id, &run_id).await;
    assert_eq!(reply.status, 202, "{}", reply.text);
    assert!(
        reply.json()["data"]["cancelRequestedAt"].is_string(),
        "{}",
        reply.text
    );
    let run = wait_finished(&server, &key, &survey.survey_id, &run_id).await;
    assert_run_shape(
        &run,
        &["updatedAt", "cancelRequestedAt", "canceledAt", "canceledBy"],
    );
    assert_eq!(run["status"], "canceled");
    let prefix = server.context(&key).await.json()["data"]["key"]["prefix"].clone();
    assert_eq!(run["canceledBy"], prefix);
    assert!(run["scored"].as_u64().expect("scored") < 5, "{run}");

    // With the run ended, a new start makes a new run.
    let next = start_run_ok(&server, &key, &survey.survey_id, None).await;
    assert_ne!(next["id"], run_id.as_str());
}

#[tokio::test]
async fn a_run_interrupted_by_sigkill_finishes_after_restart() {
    let mut server = TestServer::start_with(&[
        "--api-rate-per-minute",
        NO_API_LIMIT,
        "--model",
        HAND_SET_MODEL,
        "--scoring-chunk-sessions",
        "1",
        "--scoring-pause-ms",
        "300",
        // About one session per pass: the multi-pass path must give the same scores.
        "--scoring-max-events-per-pass",
        "300",
    ])
    .await;
    let key = server.key().to_owned();
    let survey = server.provision_ok(&key, "scoring-crash", "K").await;
    let mut references = Vec::new();
    for seed in 0..5 {
        references.push(
            post_session(&server, &survey, Behaviour::Human, seed)
                .await
                .0,
        );
    }
    let run = start_run_ok(&server, &key, &survey.survey_id, None).await;
    let run_id = run["id"].as_str().expect("id").to_owned();
    let progressing = wait_scored(&server, &key, &survey.survey_id, &run_id, 2).await;
    assert_eq!(progressing["status"], "running", "{progressing}");

    server.kill_hard();
    server.restart().await;
    let done = wait_finished(&server, &key, &survey.survey_id, &run_id).await;
    assert_eq!(done["status"], "completed", "{done}");
    assert_eq!(
        (
            &done["total"],
            &done["scored"],
            &done["skipped"],
            &done["failed"]
        ),
        (&json!(5), &json!(5), &json!(0), &json!(0)),
        "{done}"
    );
    let rows = server
        .lookup_rows(&key, &survey.survey_id, &references)
        .await;
    assert!(
        rows.iter().all(|row| row["scoreBand"] == "human-like"),
        "{rows:?}"
    );

    // Every session was published once by this run (no duplicate score rows).
    server.terminate_ok().await;
    let scores = duckdb_query(&format!(
        "SELECT count(*) AS n, count(DISTINCT reference) AS refs
         FROM read_parquet('{}/scores/*/*.parquet')",
        server.lake_dir().display()
    ));
    assert_eq!(
        (&scores[0]["n"], &scores[0]["refs"]),
        (&json!(5), &json!(5)),
        "{scores:?}"
    );
}

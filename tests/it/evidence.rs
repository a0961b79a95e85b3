//! The evidence view's API through the real binary: a scored session's timeline matches what
//! the collector acknowledged, its score matches the lookup, and the same 404 rules as the
//! lookup hold, plus 404 for a session whose deletion was requested.

use scorer::Features;
use scorer::evidence::{PATH_TOLERANCE_PX, replay_position};
use scorer::synthetic::Behaviour;
use serde_json::Value;

use crate::harness::{Reply, TestServer, assert_error, new_uuid, send};
use crate::scoring::{HAND_SET_MODEL, NO_API_LIMIT, post_session};

fn evidence_path(survey_id: &str, reference: &str) -> String {
    format!("/integrations/v1/surveys/{survey_id}/sessions/by-reference/{reference}/evidence")
}

async fn get_evidence(server: &TestServer, key: &str, survey_id: &str, reference: &str) -> Reply {
    send(
        server
            .client()
            .get(server.url(&evidence_path(survey_id, reference)))
            .bearer_auth(key),
    )
    .await
}

/// The pointer moves a synthetic session's events hold: `(t, x, y)`, in time order.
fn recorded_moves(events: &[String]) -> Vec<(i64, i64, i64)> {
    let mut moves: Vec<(i64, i64, i64)> = events
        .iter()
        .map(|text| serde_json::from_str::<Value>(text).expect("event JSON"))
        .filter(|event| event["type"] == "pointermove")
        .map(|event| {
            (
                event["timestamp"].as_i64().expect("timestamp"),
                event["data"]["x"].as_i64().expect("x"),
                event["data"]["y"].as_i64().expect("y"),
            )
        })
        .collect();
    moves.sort_by_key(|m| m.0);
    moves
}

#[tokio::test]
async fn a_scored_sessions_evidence_replays_its_moves_and_matches_its_lookup() {
    let server = TestServer::start_with(&[
        "--api-rate-per-minute",
        NO_API_LIMIT,
        "--model",
        HAND_SET_MODEL,
    ])
    .await;
    let key = server.key().to_owned();
    let survey = server.provision_ok(&key, "evidence", "Evidence").await;
    let (reference, count, events) =
        crate::scoring::post_session_events(&server, &survey, Behaviour::Human, 7).await;
    let run = server.run_scoring_to_end(&key, &survey.survey_id).await;
    assert_eq!(run["status"], "completed", "{run}");

    let reply = get_evidence(&server, &key, &survey.survey_id, &reference).await;
    assert_eq!(reply.status, 200, "{}", reply.text);
    let evidence = &reply.json()["data"];
    let timeline = &evidence["timeline"];
    assert_eq!(timeline["eventCount"], count as u64, "{timeline}");

    // Every recorded move is within the tolerance of the drawn path at its own time.
    let moves = recorded_moves(&events);
    assert!(moves.len() > 50, "a human session moves: {}", moves.len());
    let started = timeline["startedAt"].as_i64().expect("startedAt");
    let strokes: Vec<Vec<[i64; 3]>> = timeline["pointer"]
        .as_array()
        .expect("pointer strokes")
        .iter()
        .map(|stroke| serde_json::from_value(stroke["points"].clone()).expect("points"))
        .collect();
    let recorded: u64 = timeline["pointer"]
        .as_array()
        .expect("strokes")
        .iter()
        .map(|stroke| stroke["recorded"].as_u64().expect("recorded"))
        .sum();
    assert_eq!(recorded, moves.len() as u64);
    for (t, x, y) in &moves {
        let t = t - started;
        let stroke = strokes
            .iter()
            .find(|points| {
                points.first().is_some_and(|p| p[0] <= t)
                    && points.last().is_some_and(|p| p[0] >= t)
            })
            .unwrap_or_else(|| panic!("no stroke covers the move at {t} ms"));
        let (px, py) = replay_position(stroke, t).expect("position");
        let off = (px - *x as f64).hypot(py - *y as f64);
        assert!(
            off <= PATH_TOLERANCE_PX,
            "the move at {t} ms is drawn {off} px off"
        );
    }
    let drawn: usize = strokes.iter().map(Vec::len).sum();
    assert!(
        drawn < moves.len(),
        "the paths are simplified: {drawn} of {}",
        moves.len()
    );

    // Keys are classes and timing, never values.
    for key_event in timeline["keys"].as_array().expect("keys") {
        let fields: Vec<&String> = key_event.as_object().expect("key").keys().collect();
        assert!(
            fields
                .iter()
                .all(|f| ["t", "class", "holdMs", "repeat", "trusted"].contains(&f.as_str())),
            "{key_event}"
        );
    }

    // The score is the lookup's; the features are every feature the model knows.
    let rows = server
        .lookup_rows(&key, &survey.survey_id, std::slice::from_ref(&reference))
        .await;
    let score = &evidence["score"];
    assert_eq!(score["humanScorePercent"], rows[0]["humanScorePercent"]);
    assert_eq!(score["scoreBand"], rows[0]["scoreBand"]);
    assert_eq!(score["modelVersion"], rows[0]["modelVersion"]);
    assert_eq!(score["eventCount"], count as u64);
    assert!(
        !score["reasons"].as_array().expect("reasons").is_empty(),
        "{score}"
    );
    assert_eq!(evidence["modelVersion"], "telltale-v1");
    let features = evidence["features"].as_array().expect("features");
    assert_eq!(features.len(), Features::NAMES.len());
    let moves_feature = features
        .iter()
        .find(|f| f["name"] == "pointer_moves")
        .expect("pointer_moves");
    assert_eq!(moves_feature["value"].as_f64(), Some(moves.len() as f64));
    assert_eq!(evidence["environment"]["webdriver"], false);
}

#[tokio::test]
async fn evidence_follows_the_lookups_404_rules_and_a_deletion_hides_it_at_once() {
    let server = TestServer::start_with(&["--api-rate-per-minute", NO_API_LIMIT]).await;
    let key = server.key().to_owned();
    let survey = server.provision_ok(&key, "evidence-rules", "Rules").await;
    let (reference, _) = post_session(&server, &survey, Behaviour::Human, 3).await;
    // Not yet scored, and maybe not yet flushed: wait until the lake has it.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let evidence = loop {
        let reply = get_evidence(&server, &key, &survey.survey_id, &reference).await;
        if reply.status == 200 {
            break reply.json()["data"].clone();
        }
        assert_error(&reply, 404);
        assert!(std::time::Instant::now() < deadline, "never in the lake");
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    };
    assert_eq!(evidence["score"], Value::Null, "not scored yet");

    for (reference, why) in [
        (new_uuid(), "a reference with no session"),
        ("not-a-uuid".to_owned(), "not a UUID"),
    ] {
        let reply = get_evidence(&server, &key, &survey.survey_id, &reference).await;
        assert_eq!(reply.status, 404, "{why}: {}", reply.text);
        assert_error(&reply, 404);
    }
    let reply = get_evidence(&server, &key, "0123456789abcdef01234567", &reference).await;
    assert_error(&reply, 404);

    // Another organization's key sees no such survey; a key without sessions:read is refused.
    let other_org = server.create_org("Other");
    let other = server.create_key(&other_org, "other", None).key;
    assert_error(
        &get_evidence(&server, &other, &survey.survey_id, &reference).await,
        404,
    );
    let org = server.default_org().await;
    let writer = server.create_key(&org, "writer", Some("surveys:write")).key;
    assert_error(
        &get_evidence(&server, &writer, &survey.survey_id, &reference).await,
        403,
    );
    let reply = send(
        server
            .client()
            .get(server.url(&evidence_path(&survey.survey_id, &reference))),
    )
    .await;
    assert_error(&reply, 401);

    // Once its deletion is requested, the evidence is gone before the erasure runs.
    let deleted = send(
        server
            .client()
            .delete(server.url(&format!(
                "/integrations/v1/surveys/{}/sessions/by-reference/{reference}",
                survey.survey_id
            )))
            .bearer_auth(&key),
    )
    .await;
    assert_eq!(deleted.status, 202, "{}", deleted.text);
    assert_error(
        &get_evidence(&server, &key, &survey.survey_id, &reference).await,
        404,
    );
}
